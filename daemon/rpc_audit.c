/* AuditQuery and AuditFollow: check the filter, narrow it to the caller's own
 * uid unless the caller is an admin, and hand it to the audit pipeline, which
 * streams the records (daemon/audit.c). Nothing here edits or deletes a
 * record: the RPC surface of the audit log is read-only. */
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/dest_rule.h"
#include "common/dns_name.h"
#include "common/macros.h"
#include "storage/store.h"

#include "daemon/audit.h"
#include "daemon/lyhd.h"
#include "daemon/rpc.h"

/* The most candidates an ambiguous prefix's error names. */
#define PREFIX_SHOW 6

/* A session id, or a unique prefix of one (1 to 16 lowercase hex digits; a
 * non-admin's prefix is matched against their own sessions only, so it
 * neither finds nor counts anyone else's), into f->session; 0, or the call
 * failed saying what matched. Resolved against state.db, which keeps every
 * session's row (a session older than a state.db wiped meanwhile needs its
 * whole id). */
static int resolve_session(struct lyhd *d, struct rpc_call *call, const char *id,
                           struct audit_filter *f) {
    size_t n = strlen(id), k = 0;
    char found[PREFIX_SHOW][17], list[PREFIX_SHOW * 18 + 16] = "";

    if (n == 0 || n > 16 || strspn(id, "0123456789abcdef") != n) {
        rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                 "session id '%.40s' is not a session id or a prefix of one (1 to 16 lowercase "
                 "hex digits)",
                 id);
        return -EINVAL;
    }
    if (n == 16) {
        memcpy(f->session, id, n + 1);
        return 0;
    }
    int r = store_session_ids_by_prefix(d->store, id, call->peer_is_admin, call->peer.uid, found,
                                        PREFIX_SHOW, &k);
    if (r < 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "cannot look the prefix up: %s",
                 store_errmsg(d->store));
        return r;
    }
    if (k == 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__NOT_FOUND, "no session%s starts with '%s'",
                 call->peer_is_admin ? "" : " of yours", id);
        return -ENOENT;
    }
    if (k > 1) {
        for (size_t i = 0; i < k && i < PREFIX_SHOW; i++) {
            size_t used = strlen(list);
            snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", found[i]);
        }
        rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                 "'%s' is the start of several session ids: %s%s; give more of its digits", id,
                 list, k > PREFIX_SHOW ? ", and more" : "");
        return -EINVAL;
    }
    memcpy(f->session, found[0], sizeof(found[0]));
    return 0;
}

/* Request → filter; 0, or the call failed with a precise message. */
static int to_filter(struct lyhd *d, struct rpc_call *call,
                     const Lianyaohu__V1__AuditQueryRequest *q, struct audit_filter *f) {
    const int bad = LIANYAOHU__V1__CODE__INVALID_ARGUMENT;

    memset(f, 0, sizeof(*f));
    if (!q)
        goto narrow;
    if (q->since_unix_us > INT64_MAX || q->until_unix_us > INT64_MAX) {
        rpc_fail(call, bad, "since/until out of range");
        return -EINVAL;
    }
    if (q->since_unix_us && q->until_unix_us && q->until_unix_us <= q->since_unix_us) {
        rpc_fail(call, bad, "until (%llu) must be later than since (%llu)",
                 (unsigned long long)q->until_unix_us, (unsigned long long)q->since_unix_us);
        return -EINVAL;
    }
    f->since_us = (int64_t)q->since_unix_us;
    f->until_us = (int64_t)q->until_unix_us;
    if (q->session_id && q->session_id[0] && resolve_session(d, call, q->session_id, f) < 0)
        return -EINVAL;
    if (q->has_uid) {
        f->has_uid = true;
        f->uid = q->uid;
    } else if (q->uid != 0) {
        rpc_fail(call, bad, "uid %u given without has_uid", q->uid);
        return -EINVAL;
    }
    if (q->verdict > LIANYAOHU__V1__VERDICT__VERDICT_DENIED) {
        rpc_fail(call, bad, "unknown verdict %d", q->verdict);
        return -EINVAL;
    }
    f->verdict = (uint8_t)q->verdict;
    if (q->kind > LIANYAOHU__V1__EVENT_KIND__EVENT_KIND_DNS) {
        rpc_fail(call, bad, "unknown event kind %d", q->kind);
        return -EINVAL;
    }
    f->kind = (uint8_t)q->kind;
    if (q->protocol > 255) {
        rpc_fail(call, bad, "protocol %u is not an IP protocol number", q->protocol);
        return -EINVAL;
    }
    f->protocol = (uint8_t)q->protocol;
    if (q->dst) {
        const Lianyaohu__V1__DestRule *dr = q->dst;
        size_t alen = dr->addr.len;
        if (alen != 0 && alen != 4 && alen != 16) {
            rpc_fail(call, bad, "destination address must be 4 or 16 bytes, not %zu", alen);
            return -EINVAL;
        }
        /* With an address: the same rule as a policy or Run destination
         * (dr_from_parts), so host bits below the prefix are refused, not
         * masked: a filter that silently meant another network would hide
         * records from a reviewer. */
        if (alen) {
            struct dr_rule parsed;
            char why[DR_WHY_MAX];
            if (dr_from_parts(dr->addr.data, alen, dr->prefix_len, dr->port_min, dr->port_max,
                              &parsed, why, sizeof(why)) < 0) {
                rpc_fail(call, bad, "destination filter: %s", why);
                return -EINVAL;
            }
        }
        if (dr->prefix_len > alen * 8 || (alen == 0 && dr->prefix_len)) {
            rpc_fail(call, bad, "destination prefix /%u is longer than the address", dr->prefix_len);
            return -EINVAL;
        }
        if (dr->port_min > 65535 || dr->port_max > 65535 ||
            (dr->port_max && dr->port_max < dr->port_min) || (dr->port_max && !dr->port_min)) {
            rpc_fail(call, bad, "destination ports %u-%u are not a valid range", dr->port_min,
                     dr->port_max);
            return -EINVAL;
        }
        f->dst_len = (uint8_t)alen;
        if (alen)
            memcpy(f->dst, dr->addr.data, alen);
        f->dst_prefix = (uint8_t)dr->prefix_len;
        f->port_min = (uint16_t)dr->port_min;
        f->port_max = (uint16_t)(dr->port_max ? dr->port_max : dr->port_min);
    }
    f->after_id = q->after_id;
    if (q->name && q->name[0]) {
        char canon[DNS_PATTERN_MAX], why[160];
        if (dn_pattern_check(q->name, canon, why, sizeof(why)) < 0) {
            rpc_fail(call, bad, "name filter '%.60s': %s", q->name, why);
            return -EINVAL;
        }
        snprintf(f->name, sizeof(f->name), "%s", canon);
    }

narrow:
    /* A user sees the records about them; root and the admin group see all. */
    if (!call->peer_is_admin) {
        if (f->has_uid && f->uid != call->peer.uid) {
            rpc_fail(call, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                     "you may read the audit records of your own uid (%u) only; root or the "
                     "admin group sees all",
                     call->peer.uid);
            return -EPERM;
        }
        f->has_uid = true;
        f->uid = call->peer.uid;
    }
    if (audit_filter_check(f) < 0) {
        rpc_fail(call, bad, "the filter is not valid");
        return -EINVAL;
    }
    return 0;
}

static void start(struct lyhd *d, struct rpc_call *call, const Lianyaohu__V1__AuditQueryRequest *q,
                  bool follow) {
    struct audit_filter f;
    int r;

    if (to_filter(d, call, q, &f) < 0)
        return;
    if (follow && f.until_us) {
        rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                 "a follow has no end: until must be 0 (use AuditQuery for a time window)");
        return;
    }
    /* A non-admin naming someone else's session would find nothing (the
     * filter holds their uid), but the session index would walk all of that
     * session's records to learn it: answer at once instead. */
    if (!call->peer_is_admin && f.session[0] && !follow) {
        _cleanup_free_ struct store_session *row = malloc(sizeof(*row));
        if (row && store_session_get(d->store, f.session, row) == 0 && row->uid != call->peer.uid) {
            LyhResponse end = LIANYAOHU__V1__RESPONSE__INIT;
            rpc_send(call, &end, true);
            return;
        }
    }
    r = audit_stream_start(d, call, &f, q ? q->limit : 0, follow);
    if (r < 0)
        rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "the audit log cannot be read: %s",
                 strerror(-r));
}

void rpc_audit_query(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    start(d, call, req->audit_query, false);
}

void rpc_audit_follow(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    start(d, call, req->audit_follow ? req->audit_follow->filter : NULL, true);
}
