/* Install / Uninstall: the shared-user firewall (LYH-U-<uid>), which guards
 * every socket of the caller, not just one session's. Refcounted in state.db;
 * uninstall is refused while the caller has a live session, so a running
 * agent never loses its rules underneath it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/dest_rule.h"
#include "daemon/guard.h"
#include "daemon/dests.h"
#include "daemon/lyhd.h"
#include "daemon/policy.h"
#include "daemon/rpc.h"
#include "daemon/session.h"

void rpc_install(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    const Lianyaohu__V1__InstallRequest *in = req->install;
    Lianyaohu__V1__InstallReply rep = LIANYAOHU__V1__INSTALL_REPLY__INIT;
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
    struct gspec spec;
    struct store_guard g;
    char why[512];
    int k;

    memset(&spec, 0, sizeof(spec));
    if (dests_from_msg("LAN exception", in->lan_allow, in->n_lan_allow, GSPEC_MAX_DESTS, true,
                       spec.lan, why, sizeof(why)) < 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "%s", why);
        return;
    }
    spec.n_lan = in->n_lan_allow;
    /* The admin policy's ceiling: refused naming the key, never narrowed. */
    {
        const struct policy *pol = policy_current(d);
        char pwhy[POLICY_WHY_MAX];
        if (!pol->permit_shared_user_firewall) {
            rpc_fail(call, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                     "policy: the shared-user firewall is not permitted "
                     "(permit_shared_user_firewall is off, policy version %llu)",
                     (unsigned long long)pol->version);
            return;
        }
        if (in->allow_non_default_route && !pol->permit_non_default_route) {
            rpc_fail(call, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                     "policy: --allow-non-default-route is not permitted "
                     "(permit_allow_non_default_route is off)");
            return;
        }
        if (strnlen(in->interface, NFTR_IFNAME_MAX) < NFTR_IFNAME_MAX && in->interface[0] &&
            strspn(in->interface, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
                strlen(in->interface) &&
            !policy_iface_ok(pol, in->interface)) {
            char pats[400];
            policy_patterns_text(pol, pats, sizeof(pats));
            rpc_fail(call, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                     "policy: interface '%s' does not match allowed_interface_patterns (%s)",
                     in->interface, pats);
            return;
        }
        for (size_t i = 0; i < spec.n_lan; i++)
            if (!policy_lan_ok(pol, &spec.lan[i], pwhy, sizeof(pwhy))) {
                rpc_fail(call, LIANYAOHU__V1__CODE__PERMISSION_DENIED, "%s", pwhy);
                return;
            }
        for (size_t i = 0; i < pol->n_always_deny; i++)
            spec.deny[spec.n_deny++] = pol->always_deny[i];
    }
    k = guard_check_vpn(d, in->interface, in->allow_non_default_route, &spec.ipv6_blocked, why,
                        sizeof(why));
    if (k < 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION, "%s", why);
        return;
    }
    snprintf(spec.iface, sizeof(spec.iface), "%s", in->interface);
    k = guard_shared_acquire(d, call->peer.uid, LIANYAOHU__V1__SCOPE__SCOPE_USER, &spec, &g, why, sizeof(why));
    if (k < 0) {
        rpc_fail(call,
                 k == -EEXIST ? LIANYAOHU__V1__CODE__FAILED_PRECONDITION
                              : LIANYAOHU__V1__CODE__UNAVAILABLE,
                 "%s", why);
        return;
    }
    rep.chain = g.chain;
    rep.refcount = g.refcount;
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_INSTALL;
    resp.install = &rep;
    rpc_send(call, &resp, true);
}

void rpc_uninstall(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    Lianyaohu__V1__UninstallReply rep = LIANYAOHU__V1__UNINSTALL_REPLY__INIT;
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
    struct store_guard g;
    unsigned live = session_count(d, false, call->peer.uid);
    int k;

    if (live > 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                 "you have %u running session(s); uninstall once they have ended", live);
        return;
    }
    k = guard_shared_release(d, call->peer.uid, LIANYAOHU__V1__SCOPE__SCOPE_USER, &g);
    if (k == -ENOENT) {
        rpc_fail(call, LIANYAOHU__V1__CODE__NOT_FOUND, "no shared firewall is installed for uid %u",
                 call->peer.uid);
        return;
    }
    if (k < 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "removing the shared firewall failed: %s",
                 strerror(-k));
        return;
    }
    rep.refcount = g.refcount;
    rep.removed = g.refcount == 0;
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_UNINSTALL;
    resp.uninstall = &rep;
    rpc_send(call, &resp, true);
}
