/* Capabilities: what this daemon speaks and implements. Answers anyone. */
#include "common/lyh_limits.h"
#include "common/macros.h"
#include <stdio.h>

#include "daemon/guard.h"
#include "daemon/lyhd.h"
#include "daemon/rpc.h"

/* Feature names a client may test for. Only what this build really does;
 * docs/protocol.md lists exactly these (tests/e2e/protocol_doc.py checks). */
static char *const features[] = {
    "framing-v1", "unknown-field-refusal", "fd-passing", "sqlite-state",
    "run", "sessions", "signal", "nftables", "seccomp",
    "audit-query", "audit-follow", "run-monitor", "nflog",
    "install", "policy",
};

void rpc_capabilities(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    Lianyaohu__V1__CapabilitiesReply caps = LIANYAOHU__V1__CAPABILITIES_REPLY__INIT;
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;

    caps.protocol_version = LYH_PROTOCOL_VERSION;
    caps.build_version = (char *)LYH_VERSION;
    /* What depends on this host: cgroup v2 (session scope), listeners, Landlock. */
    char *feat[ARRAY_SIZE(features) + 3];
    char ll[32];
    size_t n = 0;
    for (size_t i = 0; i < ARRAY_SIZE(features); i++)
        feat[n++] = features[i];
    if (d->guard && d->guard->have_cgroup)
        feat[n++] = (char *)"cgroup2";
    if (d->guard && d->guard->listeners)
        feat[n++] = (char *)"listeners";
    if (d->landlock_abi > 0) {
        snprintf(ll, sizeof(ll), "landlock-abi-%d", d->landlock_abi);
        feat[n++] = ll;
    }
    caps.n_features = n;
    caps.features = feat;
    caps.max_frame_bytes = LYH_MAX_FRAME_BYTES;
    caps.max_fds_per_message = d->cfg.max_fds_per_msg;
    caps.max_calls_per_connection = d->cfg.max_calls_per_conn;
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_CAPABILITIES;
    resp.capabilities = &caps;
    rpc_send(call, &resp, true);
}
