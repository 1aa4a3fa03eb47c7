/* Capabilities: what this daemon speaks and implements. Answers anyone. */
#include "common/lyh_limits.h"
#include "common/macros.h"
#include <stdio.h>
#include <string.h>

#include "daemon/caps.h"
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
_Static_assert(ARRAY_SIZE(features) == CAPS_FIXED_FEATURES, "caps.h: CAPS_FIXED_FEATURES");

void caps_build(const struct caps_facts *f, struct caps_reply *r) {
    size_t n = 0;

    memset(r, 0, sizeof(*r));
    lianyaohu__v1__capabilities_reply__init(&r->msg);
    r->msg.protocol_version = LYH_PROTOCOL_VERSION;
    r->msg.build_version = (char *)LYH_VERSION;
    /* What depends on this host: cgroup v2 (session scope), listeners, Landlock. */
    for (size_t i = 0; i < ARRAY_SIZE(features); i++)
        r->feat[n++] = features[i];
    if (f->cgroup2)
        r->feat[n++] = (char *)"cgroup2";
    if (f->listeners)
        r->feat[n++] = (char *)"listeners";
    if (f->landlock_abi > 0) {
        snprintf(r->landlock, sizeof(r->landlock), "landlock-abi-%d", f->landlock_abi);
        r->feat[n++] = r->landlock;
    }
    r->msg.n_features = n;
    r->msg.features = r->feat;
    r->msg.max_frame_bytes = LYH_MAX_FRAME_BYTES;
    r->msg.max_fds_per_message = f->max_fds;
    r->msg.max_calls_per_connection = f->max_calls;
}

void caps_facts_of(const struct lyhd *d, struct caps_facts *f) {
    *f = (struct caps_facts){
        .cgroup2 = d->guard && d->guard->have_cgroup,
        .listeners = d->guard && d->guard->listeners,
        .landlock_abi = d->landlock_abi,
        .max_fds = d->cfg.max_fds_per_msg,
        .max_calls = d->cfg.max_calls_per_conn,
    };
}

void rpc_capabilities(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    (void)req;
    struct caps_facts f;
    struct caps_reply r;
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;

    caps_facts_of(d, &f);
    caps_build(&f, &r);
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_CAPABILITIES;
    resp.capabilities = &r.msg;
    rpc_send(call, &resp, true);
}
