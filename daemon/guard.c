/* The egress guard as the daemon runs it: opening the kernel interfaces,
 * keeping table `inet lianyaohu` in shape, and reconciling it with state.db at
 * startup (the reaper).
 *
 * What it must never do: leave a running session unguarded, or remove rules
 * for a session whose processes still run. When in doubt a process is treated
 * as alive and its chain is kept; when a chain is missing for a live session it
 * is rebuilt from the spec recorded in state.db. */
#include "daemon/audit.h"
#include "daemon/guard.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "common/macros.h"
#include "daemon/dns_fwd.h"
#include "daemon/log.h"
#include "daemon/policy.h"
#include "daemon/wire.h"
#include "daemon/lyhd.h"
#include "daemon/session.h"
#include "platform/linux/fsutil.h"
#include "platform/ifaces.h"
#include "platform/linux/nft.h"
#include "platform/linux/proc.h"
#include "platform/linux/route.h"
#include "storage/store.h"

#define GUARD_CGROUP_SUBTREE "lyh"

void guard_free(struct guard *g, bool remove_base) {
    if (!g)
        return;
    if (g->ev_watch)
        event_free(g->ev_watch);
    if (g->ev_check)
        event_free(g->ev_check);
    if (g->ev_sweep)
        event_free(g->ev_sweep);
    if (g->ev_dns_retry)
        event_free(g->ev_dns_retry);
    CLOSE_FD(g->watch_fd);
    CLOSE_FD(g->route_watch);
    nft_close(g->nft);
    route_close(g->route);
    if (remove_base && g->have_cgroup)
        (void)cg_remove_base(&g->cg);
    cg_close(&g->cg);
    free(g);
}

/* A chain of the session's own (s-<id>), not a shared user or uid chain. */
static bool own_chain(const char *chain) {
    return strncmp(chain, NFTR_SESSION_CHAIN_PREFIX, strlen(NFTR_SESSION_CHAIN_PREFIX)) == 0;
}

/* What a session's rules are rendered from, in either layout. */
static void session_input(struct lyhd *d, const struct session *s, struct nftr_input *ret) {
    /* A session with a chain of its own (s-<id>: the session scope, and a
     * --shared-user-firewall session with cgroups, whose sandboxed sockets are
     * decided there with the shared rules) renders that; else its shared one. */
    bool own = own_chain(s->row.chain);
    struct nftr_input in = {
        .scope = own                                                   ? NFTR_SCOPE_SESSION
                 : s->row.scope == LIANYAOHU__V1__SCOPE__SCOPE_USER    ? NFTR_SCOPE_SHARED_USER
                 : s->row.scope == LIANYAOHU__V1__SCOPE__SCOPE_UID_GID ? NFTR_SCOPE_UID
                                                                       : NFTR_SCOPE_SESSION,
        .session_id = s->row.id,
        .cgroup_id = s->row.cgroup_id,
        .uid = s->row.uid,
        .guard_gid = d->cfg.guard_gid,
        .guard_gid_max = d->cfg.guard_gid_max,
        .iface = s->spec.iface[0] ? s->spec.iface : NULL, /* none: proxy-only */
        .log = d->guard->flow_log,
        .dns_port = own && d->guard->base.dns ? s->spec.dns_port : 0,
        .domain_sets = own && d->guard->base.dns && s->spec.dns_port && s->spec.n_domains,
    };

    /* Sessions may listen: their flows through lo are marked and may land
     * only on their own sockets (and the ports they listed). */
    if (in.scope == NFTR_SCOPE_SESSION && d->guard->listeners && s->row.cgroup_id && s->lo_slot) {
        in.lo_slot = s->lo_slot;
        in.cgroup_level = d->guard->base.cgroup_level;
        in.base_cgroup_id = d->guard->base.base_cgroup_id;
        in.base_cgroup = d->guard->base.base_cgroup;
        in.cgroup_path = s->row.cgroup[0] == '/' ? s->row.cgroup + 1 : s->row.cgroup;
    }
    in.log.accept_unlogged = s->accept_unlogged;
    gspec_policy(&s->spec, &in.policy);
    *ret = in;
}

int guard_render_session(struct lyhd *d, const struct session *s, struct nftr_chain **ret) {
    struct nftr_input in;
    session_input(d, s, &in);
    return nftr_render_chain(&in, ret);
}

/* The data layout (docs/guard-as-data.md): a session of its own chain whose
 * rules are the default policy's, on a base that has the layout. */
static bool gets_data(const struct lyhd *d, const struct session *s, const struct nftr_input *in) {
    return d->guard->base.data && own_chain(s->row.chain) && nftr_data_eligible(in);
}

int guard_render_data(struct lyhd *d, const struct session *s, struct nftr_data **ret) {
    struct nftr_input in;
    session_input(d, s, &in);
    return gets_data(d, s, &in) ? nftr_render_data(&in, ret) : -EINVAL;
}

int guard_session_counters(struct lyhd *d, const struct session *s, struct nft_counters *ret) {
    if (s->data)
        return nft_data_counters(d->guard->nft, s->row.id, ret, NULL);
    return nft_chain_counters(d->guard->nft, s->row.chain, ret);
}

/* Is the last preflight that passed still the answer? Only while the kernel
 * has announced no change since it was made: the notices are queued inside
 * the call that makes the change, so one made before this launch is read
 * here. The keeping spares ~40 system calls per launch (an interface dump and
 * up to nine route lookups); it cannot open anything: the session's chain
 * lets its packets leave through its interface only, whatever the routes. */
static bool vpn_check_kept(struct guard *g, const char *iface, bool allow_non_default_route,
                           bool *ret_ipv6_blocked) {
    uint64_t now = lyhd_mono_ms();
    if (g->route_watch < 0 || route_watch_changed(g->route_watch) != 0 || !g->vpn_ok.valid ||
        now - g->vpn_ok.at_ms > GUARD_VPN_CHECK_KEEP_MS ||
        g->vpn_ok.allow_non_default_route != allow_non_default_route ||
        strcmp(g->vpn_ok.iface, iface) != 0) {
        g->vpn_ok.valid = false;
        return false;
    }
    *ret_ipv6_blocked = g->vpn_ok.ipv6_blocked;
    return true;
}

int guard_check_vpn(struct lyhd *d, const char *iface, bool allow_non_default_route,
                    bool *ret_ipv6_blocked, char *why, size_t whylen) {
    struct ifc_list ifs = {0};
    const struct ifc *ifc = NULL;
    struct route_preflight_result pre = {0};
    struct guard *g = d->guard;

    if (vpn_check_kept(g, iface, allow_non_default_route, ret_ipv6_blocked))
        return 0;
    int k = ifc_list(&ifs);

    if (k < 0)
        snprintf(why, whylen, "cannot list interfaces: %s", strerror(-k));
    if (k == 0)
        k = ifc_validate_vpn(&ifs, iface, why, whylen);
    if (k == 0)
        k = ifc_find(&ifs, iface, &ifc);
    if (k == 0) {
        k = route_preflight_on(d->guard->route, iface, ifc->ifindex, allow_non_default_route, &pre,
                               why, whylen);
        /* a route that does not go there: what the user can do about it */
        size_t used = strnlen(why, whylen);
        if (k == -ENETUNREACH && !allow_non_default_route && used + 1 < whylen)
            snprintf(why + used, whylen - used,
                     "; route your VPN as the default (0.0.0.0/0, or 0.0.0.0/1 and 128.0.0.0/1, "
                     "through %s), or run with --allow-non-default-route (traffic the routes send "
                     "elsewhere is then refused, not steered)",
                     iface);
    }
    ifc_list_free(&ifs);
    if (k == 0) {
        *ret_ipv6_blocked = pre.ipv6_blocked;
        if (strlen(iface) < sizeof(g->vpn_ok.iface)) {
            snprintf(g->vpn_ok.iface, sizeof(g->vpn_ok.iface), "%s", iface);
            g->vpn_ok.allow_non_default_route = allow_non_default_route;
            g->vpn_ok.ipv6_blocked = pre.ipv6_blocked;
            g->vpn_ok.at_ms = lyhd_mono_ms();
            g->vpn_ok.valid = true;
        }
    }
    return k;
}

int guard_dns_flows_marked(struct lyhd *d, const struct session *s, uint64_t *ret) {
    /* A chain rebuilt (restart, restore, narrowing) or shared with other
     * sessions counts from some later point or for others too: no answer. */
    if (!s->dns_marks_counted || !s->has_chain || !own_chain(s->row.chain))
        return -ESTALE;
    if (s->data) {
        struct nft_counters c;
        return nft_data_counters(d->guard->nft, s->row.id, &c, ret);
    }
    return nft_chain_mark_packets(d->guard->nft, s->row.chain, NFTR_DNS_FLOW_MARK, ret);
}

static uint32_t take_slot(struct guard *g) {
    uint32_t slot = g->next_slot;
    g->next_slot = g->next_slot >= NFTR_LO_SLOT_MAX ? 1 : g->next_slot + 1;
    return slot ? slot : take_slot(g);
}

int guard_session_add(struct lyhd *d, struct session *s, char *why, size_t whylen) {
    bool own = own_chain(s->row.chain);
    bool slot_given = false;
    int r = -EEXIST;

    /* A session of its own chain that may listen gets a loopback slot; after
     * a wrap of the counter a slot can still be a live session's, which the
     * map element tells (EEXIST): take the next one. */
    if (own && d->guard->listeners && !s->lo_slot) {
        s->lo_slot = take_slot(d->guard);
        slot_given = true;
    }
    for (int attempt = 0; attempt < 4 && r == -EEXIST; attempt++) {
        struct nftr_chain *c = NULL;
        struct nftr_input in;
        if (attempt > 0) {
            if (!slot_given)
                break;
            s->lo_slot = take_slot(d->guard);
        }
        session_input(d, s, &in);
        if (gets_data(d, s, &in)) {
            struct nftr_data *dd = NULL;
            r = nftr_render_data(&in, &dd);
            if (r < 0) {
                snprintf(why, whylen, "cannot render the firewall rules: %s", strerror(-r));
                return r;
            }
            r = nft_data_add(d->guard->nft, dd);
            if (r < 0)
                snprintf(why, whylen, "nftables refused the session's rules (%s): %s",
                         nft_last_error_object(d->guard->nft), strerror(-r));
            nftr_data_free(dd);
            if (r >= 0) {
                s->data = true;
                free(s->nft_kept);
                s->nft_kept = NULL;
            }
            continue;
        }
        r = nftr_render_chain(&in, &c);
        if (r < 0) {
            snprintf(why, whylen, "cannot render the firewall rules: %s", strerror(-r));
            return r;
        }
        r = nft_session_add(d->guard->nft, c);
        if (r < 0)
            snprintf(why, whylen, "nftables refused the session's rules (%s): %s",
                     nft_last_error_object(d->guard->nft), strerror(-r));
        else if (own && c->cgroup_id && (s->nft_kept || (s->nft_kept = malloc(sizeof(*s->nft_kept)))))
            nft_session_objs_of(c, s->nft_kept); /* (none kept: the delete asks) */
        if (r >= 0)
            s->data = false;
        nftr_chain_free(c);
    }
    /* Its counters start at zero now: they hold every packet only if this
     * is the chain's first build. */
    if (r >= 0)
        s->dns_marks_counted = !s->has_chain;
    return r;
}

/* Whatever is left of data session id (cgroup_id 0: find it from its chain
 * d-<id>), piece by piece, as snapshot p lists it (NULL: read the table now).
 * A snapshot taken before part of it was removed does: what is gone since is
 * skipped. */
static int data_session_reap(struct lyhd *d, const struct nft_data_pieces *p, const char *id,
                             uint64_t cgroup_id) {
    struct nft_data_pieces *read = NULL;
    uint64_t cg = 0;
    uint32_t mark = 0;

    if (!p) {
        int r = nft_data_pieces_read(d->guard->nft, &read);
        if (r < 0)
            return r;
        p = read;
    }
    /* lyhd's row knows the cgroup; the mark is one an element naming the
     * session is keyed by (never its cgroup's dlomark value: see
     * nft_data_pieces_owner) */
    (void)nft_data_pieces_owner(p, id, &cg, &mark);
    if (cgroup_id)
        cg = cgroup_id;
    int r = nft_data_reap(d->guard->nft, p, id, cg, mark);
    nft_data_pieces_free(read);
    return r;
}

/* A data session's rules: what it should have, rendered again from what it
 * was installed with (its spec, slot and forwarder), removed; when part of
 * them is gone, piece by piece. When it is rendered otherwise now, reaped by
 * its keys (from snapshot p, NULL: read), and *ret_reaped says so. */
static int data_session_del(struct lyhd *d, struct session *s, const struct nft_data_pieces *p,
                            bool *ret_reaped) {
    struct nftr_data *dd = NULL;
    bool searched = false;
    /* An adopted session's logging is not on record (accept_unlogged is the
     * policy's now): the logged form, which has every piece the other has,
     * the ones it lacks skipped when missing. */
    bool unlogged = s->accept_unlogged;
    if (s->adopted)
        s->accept_unlogged = false;
    int r = guard_render_data(d, s, &dd);
    s->accept_unlogged = unlogged;

    *ret_reaped = false;
    if (r == 0)
        r = nft_data_del(d->guard->nft, dd, &searched);
    nftr_data_free(dd);
    if (r == -EINVAL) { /* rendered otherwise now (its spec was narrowed): reap by its keys */
        r = data_session_reap(d, p, s->row.id, s->row.cgroup_id);
        *ret_reaped = true;
    } else if (searched && !s->adopted) {
        log_warn("session '%s': its firewall rules were not as lyhd installed them at its "
                 "end (someone else changed lyhd's table); what is left of them is removed",
                 s->row.id);
    }
    if (r == 0 || r == -ENOENT)
        s->data = false;
    return r;
}

/* A repair's removal of a data session, with snapshot p of the table from
 * before it: what it should have, then anything else keyed by its cgroup or
 * naming it (an element someone added: a second interface in dvpn, say), so
 * that what is put back is all there is. The reap runs even when the removal
 * failed (a chain of it named by someone else's rule: EBUSY): what can go,
 * goes, and the session stays refused until the next check. */
static int data_session_clear(struct lyhd *d, struct session *s, const struct nft_data_pieces *p) {
    bool reaped;
    int r = data_session_del(d, s, p, &reaped);
    if (reaped)
        return r;
    int k = data_session_reap(d, p, s->row.id, s->row.cgroup_id);
    if (r < 0 && r != -ENOENT)
        return r;
    return k < 0 && k != -ENOENT ? k : r;
}

/* A chain session's removal for a repair: any element of the data layout's
 * sets keyed by its cgroup (snapshot p; none belongs there: root's `nft add
 * element` of it to dvpn would open its established flows through another
 * interface, which guarded's first rules accept before its chain is reached),
 * then its chains and elements. In that order: without its element of map
 * sessions, a dlive element of its cgroup would send its packets to chain
 * data. */
static int chain_session_clear(struct lyhd *d, struct session *s, const struct nft_data_pieces *p) {
    int k = p && nft_data_pieces_keyed(p, s->row.cgroup_id)
                ? nft_data_reap_keyed(d->guard->nft, p, s->row.cgroup_id)
                : 0;
    int r = nft_session_del(d->guard->nft, s->row.chain, s->row.cgroup_id,
                            s->lo_slot ? nftr_lo_mark(s->lo_slot) : 0);
    if (r < 0 && r != -ENOENT)
        return r;
    return k < 0 && k != -ENOENT ? k : r;
}

int guard_session_del(struct lyhd *d, struct session *s) {
    struct nft_session_elem *elems = NULL;
    size_t n = 0;
    uint32_t mark = s->lo_slot ? nftr_lo_mark(s->lo_slot) : 0;
    int r;

    if (s->data) {
        bool reaped;
        r = data_session_del(d, s, NULL, &reaped);
        return r == -ENOENT ? 0 : r;
    }

    /* What this lyhd installed and kept: one round trip (it asks the
     * kernel itself when any of it is gone). Else ask what exists. */
    if (s->nft_kept && strcmp(s->nft_kept->name, s->row.chain) == 0 &&
        s->nft_kept->cgroup_id == s->row.cgroup_id) {
        bool searched = false;
        r = nft_session_del_known(d->guard->nft, s->nft_kept, &searched);
        if (searched)
            log_warn("session '%s': its firewall rules were not as lyhd installed them at its "
                     "end (someone else changed lyhd's table: part of them gone, or something "
                     "added that refers to them); what is left of them is removed",
                     s->row.id);
    } else
        r = nft_session_del(d->guard->nft, s->row.chain, s->row.cgroup_id, mark);
    free(s->nft_kept);
    s->nft_kept = NULL;

    if (r != -EBUSY)
        return r == -ENOENT ? 0 : r;
    /* The map element that jumps to this chain carries another cgroup id
     * than the row (a crash between creating the cgroup and recording its
     * id): take the kernel's word for it. */
    if (nft_list_sessions(d->guard->nft, &elems, &n) == 0)
        for (size_t i = 0; i < n; i++)
            if (strcmp(elems[i].chain, s->row.chain) == 0) {
                r = nft_session_del(d->guard->nft, s->row.chain, elems[i].cgroup_id, mark);
                break;
            }
    free(elems);
    return r == -ENOENT ? 0 : r;
}

/* ---- the shared-user scope ------------------------------------------------------ */

/* FNV-1a over the encoded spec: equality of rules, not a security hash. */
static void spec_hash(const uint8_t *b, size_t n, char out[65]) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    snprintf(out, 65, "%016llx", (unsigned long long)h);
}

static int save_guard(struct lyhd *d, const struct store_guard *g, bool delete) {
    int r = store_begin(d->store);

    if (r == 0)
        r = delete ? store_guard_delete(d->store, g->chain) : store_guard_put(d->store, g);
    if (r == 0)
        r = store_commit(d->store);
    if (r < 0)
        store_rollback(d->store);
    return r;
}

/* Proto scope numbers to the renderer's. */
static enum nftr_scope nftr_scope_of(int scope) {
    return scope == LIANYAOHU__V1__SCOPE__SCOPE_UID_GID ? NFTR_SCOPE_UID : NFTR_SCOPE_SHARED_USER;
}

int guard_render_shared(struct lyhd *d, const struct store_guard *g, const struct gspec *spec,
                        bool accept_unlogged, struct nftr_chain **ret) {
    struct nftr_input in = {
        .scope = nftr_scope_of(g->scope),
        .uid = g->uid,
        .guard_gid = d->cfg.guard_gid,
        .guard_gid_max = d->cfg.guard_gid_max,
        .iface = spec->iface,
        .log = d->guard->flow_log,
    };

    in.log.accept_unlogged = accept_unlogged;
    gspec_policy(spec, &in.policy);
    return nftr_render_chain(&in, ret);
}

/* The part of a session's spec its user's shared chain has: not its DNS
 * forwarder, resolvers or domain allowlist, which are the session's own. */
static void shared_part(const struct gspec *spec, struct gspec *ret) {
    *ret = *spec;
    ret->dns_port = 0;
    ret->n_resolvers = 0;
    ret->n_domains = 0;
    ret->domains_len = 0;
    memset(ret->domains, 0, sizeof(ret->domains));
    memset(ret->resolvers, 0, sizeof(ret->resolvers));
}

int guard_shared_set_spec(struct store_guard *g, const struct gspec *full) {
    struct gspec spec;
    size_t n;
    shared_part(full, &spec);
    int r = gspec_encode(&spec, g->guard_spec, sizeof(g->guard_spec), &n);

    if (r < 0)
        return r;
    g->guard_spec_len = n;
    spec_hash(g->guard_spec, n, g->rules_hash);
    return 0;
}

/* Install g's chain from spec; replace: in one transaction with what exists
 * of it (nft_uid_chain_replace), else it must not exist yet. */
static int shared_render_add(struct lyhd *d, const struct store_guard *g, const struct gspec *spec,
                             bool replace, char *why, size_t whylen) {
    struct nftr_chain *c = NULL;
    int r;

    /* Shared chains keep no per-session totals; they follow the policy too. */
    r = guard_render_shared(d, g, spec, !policy_current(d)->log_allowed_flows, &c);
    if (r < 0) {
        snprintf(why, whylen, "cannot render the shared rules: %s", strerror(-r));
        return r;
    }
    r = replace ? nft_uid_chain_replace(d->guard->nft, g->uid, c) : nft_uid_chain_add(d->guard->nft, c);
    if (r < 0)
        snprintf(why, whylen, "nftables refused the shared rules (%s): %s",
                 nft_last_error_object(d->guard->nft), strerror(-r));
    nftr_chain_free(c);
    return r;
}

int guard_shared_acquire(struct lyhd *d, uint32_t uid, int scope, const struct gspec *spec,
                         struct store_guard *ret, char *why, size_t whylen) {
    struct store_guard g;
    uint8_t enc[STORE_GUARD_SPEC_MAX];
    size_t n;
    char hash[65];
    struct gspec shared;
    int r;

    shared_part(spec, &shared);
    r = gspec_encode(&shared, enc, sizeof(enc), &n);
    if (r < 0) {
        snprintf(why, whylen, "the shared rules are too large");
        return r;
    }
    spec_hash(enc, n, hash);
    r = store_guard_get(d->store, uid, scope, &g);
    if (r == 0) {
        if (strcmp(g.rules_hash, hash) != 0) {
            if (scope == LIANYAOHU__V1__SCOPE__SCOPE_USER)
                snprintf(why, whylen,
                         "a shared firewall for uid %u is installed with other rules (via %s, %u "
                         "user(s)); use the same options, or `lyh uninstall` it first",
                         uid, g.interface, g.refcount);
            else
                snprintf(why, whylen,
                         "without cgroup v2 your sessions share one firewall (%s), and %u running "
                         "session(s) use other rules (via %s); use the same options or wait for "
                         "them to end",
                         g.chain, g.refcount, g.interface);
            return -EEXIST;
        }
        g.refcount++;
        r = save_guard(d, &g, false);
        if (r < 0) {
            snprintf(why, whylen, "state.db: %s", store_errmsg(d->store));
            return r;
        }
        *ret = g;
        return 0;
    }
    if (r != -ENOENT) {
        snprintf(why, whylen, "state.db: %s", store_errmsg(d->store));
        return r;
    }
    /* First user: the row first, then the kernel; undo the row on failure. */
    memset(&g, 0, sizeof(g));
    g.uid = uid;
    g.scope = scope;
    snprintf(g.interface, sizeof(g.interface), "%s", spec->iface);
    r = nftr_chain_name(nftr_scope_of(scope), NULL, uid, g.chain);
    if (r < 0) {
        snprintf(why, whylen, "no chain name for uid %u", uid);
        return r;
    }
    g.refcount = 1;
    memcpy(g.rules_hash, hash, sizeof(hash));
    g.created_ms = lyhd_wall_ms();
    memcpy(g.guard_spec, enc, n);
    g.guard_spec_len = n;
    r = save_guard(d, &g, false);
    if (r < 0) {
        snprintf(why, whylen, "state.db: %s", store_errmsg(d->store));
        return r;
    }
    r = shared_render_add(d, &g, spec, false, why, whylen);
    if (r < 0) {
        (void)save_guard(d, &g, true);
        return r;
    }
    log_info("installed firewall %s for uid %u via %s", g.chain, uid, g.interface);
    audit_note(d, AUDIT_KIND_GUARD, NULL, true, uid, "install", "chain=%s interface=%s refcount=%u",
               g.chain, g.interface, g.refcount);
    *ret = g;
    return 0;
}

int guard_shared_release(struct lyhd *d, uint32_t uid, int scope, struct store_guard *ret) {
    struct store_guard g;
    int r = store_guard_get(d->store, uid, scope, &g);

    if (r < 0)
        return r;
    if (g.refcount > 1) {
        g.refcount--;
        r = save_guard(d, &g, false);
        if (r == 0)
            *ret = g;
        return r;
    }
    /* Last reference: record the intent (refcount 0), remove from the
     * kernel, then the row. A crash in between leaves a 0-row the reaper
     * finishes. */
    g.refcount = 0;
    r = save_guard(d, &g, false);
    if (r < 0)
        return r;
    r = nft_uid_chain_del(d->guard->nft, nftr_scope_of(scope), uid);
    if (r < 0 && r != -ENOENT)
        return r;
    r = save_guard(d, &g, true);
    if (r < 0)
        return r;
    log_info("removed firewall %s of uid %u", g.chain, uid);
    audit_note(d, AUDIT_KIND_GUARD, NULL, true, uid, "remove", "chain=%s", g.chain);
    *ret = g;
    return 0;
}

static void reap_log(struct lyhd *d, const char *object, const char *action, const char *detail);
static unsigned restore_chains(struct lyhd *d);

/* Chain input names the sessions' subtree by its cgroup id: point it at the
 * subtree lyhd holds now (a recreated one has a new id) before a session is
 * created under it. On failure the rules keep the old id and no session
 * starts (the next launch tries again). */
static int follow_base_id(struct lyhd *d) {
    struct guard *g = d->guard;
    uint64_t old = g->base.base_cgroup_id;
    unsigned flags = 0;
    int r;

    if (!g->listeners || old == g->cg.base_id)
        return 0;
    g->base.base_cgroup_id = g->cg.base_id;
    r = nft_ensure_base(g->nft, &g->base, &flags);
    if (r < 0) {
        g->base.base_cgroup_id = old;
        log_error("cannot point chain input at the new cgroup subtree (%s): %s",
                  nft_last_error_object(g->nft), strerror(-r));
        return r;
    }
    if (flags & (NFT_BASE_CREATED | NFT_BASE_REBUILT))
        (void)restore_chains(d);
    return 0;
}

int guard_cgroup_create(struct lyhd *d, const char *name, uint64_t *ret_id, int *ret_dir_fd,
                        int *ret_procs_fd) {
    struct guard *g = d->guard;
    int r = follow_base_id(d);

    if (r < 0)
        return r;
    r = cg_create(&g->cg, name, ret_id, ret_dir_fd, ret_procs_fd);
    if (r != -ENOENT)
        return r;
    /* mkdirat under a removed directory: the base is gone. It can only be
     * removed while empty, so no session cgroup went with it. */
    r = cg_reopen_base(&g->cg);
    if (r < 0) {
        log_error("lyhd's cgroup subtree %s%s is gone and cannot be created again: %s",
                  g->cg.mount, g->cg.base, strerror(-r));
        return r;
    }
    log_warn("lyhd's cgroup subtree %s%s had been removed by someone else; created it again",
             g->cg.mount, g->cg.base);
    reap_log(d, g->cg.base, "rebuilt", "the cgroup subtree of the sessions had been removed");
    r = follow_base_id(d);
    if (r < 0)
        return r;
    return cg_create(&g->cg, name, ret_id, ret_dir_fd, ret_procs_fd);
}

void guard_launch_probe(struct lyhd *d, char *problem, size_t len) {
    struct guard *g = d->guard;
    uint64_t now = lyhd_mono_ms();

    if (!g->have_cgroup) {
        snprintf(problem, len, "%s", "");
        return;
    }
    if (g->probe_ms && now - g->probe_ms < GUARD_PROBE_MS) {
        snprintf(problem, len, "%s", g->probe_problem);
        return;
    }
    g->probe_ms = now;
    g->probe_problem[0] = '\0';
    uint32_t rnd = 0;
    if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
        rnd = (uint32_t)now;
    char name[32];
    snprintf(name, sizeof(name), "probe-%08x", rnd);
    uint64_t id;
    int dfd = -1, pfd = -1;
    int r = guard_cgroup_create(d, name, &id, &dfd, &pfd);
    CLOSE_FD(dfd);
    CLOSE_FD(pfd);
    if (r == 0) {
        int k = cg_remove(&g->cg, name);
        if (k < 0)
            log_warn("cannot remove the probe cgroup %s%s/%s: %s", g->cg.mount, g->cg.base, name,
                     strerror(-k));
    } else {
        const char *fix = r == -EAGAIN
                              ? "its cgroup.max.descendants or cgroup.max.depth is reached: raise "
                                "it, or end sessions"
                          : r == -EACCES || r == -EPERM || r == -EROFS
                              ? "lyhd may not create cgroups there: run it from its systemd unit "
                                "(Delegate=yes), then restart it"
                              : "see lyhd's log; restarting lyhd makes the subtree again";
        snprintf(g->probe_problem, sizeof(g->probe_problem),
                 "lyhd cannot create a session cgroup under %.120s%.120s (%s), so every lyh run "
                 "fails: %s",
                 g->cg.mount, g->cg.base, strerror(-r), fix);
        log_warn("launch probe: %s", g->probe_problem);
    }
    snprintf(problem, len, "%s", g->probe_problem);
}

/* ---- startup reconciliation ------------------------------------------------------ */

struct reconcile {
    struct lyhd *d;
    char **chains;        /* chains now in the table, sorted (has_chain_sorted) */
    size_t n_chains;
    struct nft_data_pieces *dp; /* startup: the data sessions' elements */
    struct nft_session_elem *lo; /* elements of map loopback (mark, lo-<id>) */
    size_t n_lo;
    bool rebuilt;
    /* The table lyhd found let sessions listen (it had chain input) and this
     * lyhd cannot: a running session's seccomp filter lets it listen, and
     * nothing would keep the network from its servers. */
    bool listeners_gone;
    unsigned adopted, reaped;
};

#define GUARD_DNS_RETRY_MS 5000

/* Adopted sessions whose forwarder could not listen at its port again (see
 * reconcile_one): tried again until it can, or the session ends. */
static void on_dns_retry(evutil_socket_t fd, short what, void *arg);

static void arm_dns_retry(struct lyhd *d) {
    struct guard *g = d->guard;
    struct timeval tv = {.tv_sec = GUARD_DNS_RETRY_MS / 1000};
    if (!g->ev_dns_retry)
        g->ev_dns_retry = evtimer_new(d->base, on_dns_retry, d);
    if (g->ev_dns_retry && !evtimer_pending(g->ev_dns_retry, NULL))
        evtimer_add(g->ev_dns_retry, &tv);
}

static void on_dns_retry(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct lyhd *d = arg;
    struct session *s;
    bool left = false;

    TAILQ_FOREACH(s, &d->sessions, link) {
        if (!s->adopted || !s->spec.dns_port || !d->guard->base.dns)
            continue;
        if (s->dns_elem_lost) {
            s->dns_elem_lost = nft_session_dns_set(d->guard->nft, s->row.cgroup_id,
                                                   s->spec.dns_port) < 0;
            if (!s->dns_elem_lost && s->nft_kept)
                s->nft_kept->dns = true;
            left |= s->dns_elem_lost;
        }
        char w[256];
        if (s->dns)
            continue;
        if (dns_fwd_start(d, s, w, sizeof(w)) == 0)
            log_info("session '%s': lyhd answers its DNS queries again (port %u)", s->row.id,
                     s->spec.dns_port);
        else
            left = true;
    }
    if (left)
        arm_dns_retry(d);
}

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool has_chain_sorted(const struct reconcile *rc, const char *name) {
    return rc->n_chains && bsearch(&name, rc->chains, rc->n_chains, sizeof(char *), name_cmp);
}

static void sort_chains(struct reconcile *rc) {
    if (rc->n_chains)
        qsort(rc->chains, rc->n_chains, sizeof(char *), name_cmp);
}

/* Whether the table holds all of a running data session's rules: every
 * element it should have, with its value, and its log chains. */
static bool data_session_whole(struct lyhd *d, const struct reconcile *rc,
                               const struct nft_data_pieces *dp, const struct session *s) {
    struct nftr_data *dd = NULL;
    bool whole = dp && guard_render_data(d, s, &dd) == 0 && nft_data_pieces_whole(dp, dd) &&
                 has_chain_sorted(rc, dd->dlog) && (!dd->alog[0] || has_chain_sorted(rc, dd->alog));
    nftr_data_free(dd);
    return whole;
}

static void reap_log(struct lyhd *d, const char *object, const char *action, const char *detail) {
    char kv[512] = "";
    int r = store_reap_log(d->store, object, action, detail);

    audit_kv(kv, sizeof(kv), "object", object);
    audit_kv(kv, sizeof(kv), "why", detail);
    audit_note(d, AUDIT_KIND_GUARD, NULL, false, 0, action, "%s", kv);
    if (r < 0)
        log_warn("state.db reap log for %s failed: %s", object, store_errmsg(d->store));
}

/* Is anything of this session still running? Treat doubt as yes. */
static bool session_alive(struct lyhd *d, const struct store_session *row, bool *ret_main_alive) {
    uint64_t start = 0;
    bool populated = false;

    *ret_main_alive = row->pid > 0 && proc_start_time((pid_t)row->pid, &start) == 0 &&
                      start == row->pid_start;
    if (*ret_main_alive)
        return true;
    if (row->cgroup[0] && d->guard->have_cgroup) {
        int r = cg_populated(&d->guard->cg, row->id, &populated);
        if (r == 0)
            return populated;
        if (r != -ENOENT)
            return true;
    }
    return false;
}

static int reconcile_one(const struct store_session *row, void *userdata) {
    struct reconcile *rc = userdata;
    struct lyhd *d = rc->d;
    struct session *s;
    bool main_alive = false;
    char why[256];
    int r;

    s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->d = d;
    s->row = *row;
    s->pidfd = s->status_fd = s->pty_fd = -1;
    s->has_cgroup = row->cgroup[0] && d->guard->have_cgroup;
    s->has_chain = row->chain[0] != '\0';
    s->started_mono_ms = lyhd_mono_ms();
    if (row->guard_spec_len > 0 && gspec_decode(row->guard_spec, row->guard_spec_len, &s->spec) < 0) {
        log_error("session '%s': its recorded firewall spec is damaged", row->id);
        /* Without a spec the chain cannot be rebuilt: a live session gets
         * killed rather than left without rules. */
        if (s->has_cgroup)
            (void)cg_kill(&d->guard->cg, row->id);
        else if (row->pid > 0 && session_alive(d, row, &main_alive) && main_alive)
            kill(-(pid_t)row->pid, SIGKILL);
        s->row.guard_spec_len = 0;
    }
    TAILQ_INSERT_TAIL(&d->sessions, s, link);
    /* What its chain was built with is not recorded; assume the policy in
     * force (a rebuild below uses it, so then it is exact). */
    s->accept_unlogged = !policy_current(d)->log_allowed_flows;
    /* Its rules in the data layout: its chain d-<id> says so; it logs its
     * allowed flows when its chain a-<id> is there or the policy says so (a
     * missing a-<id> is then put back below); its loopback slot is the mark
     * an element naming it is keyed by (map dlogm's jump to d-<id>, else its
     * idrop or ilim object's element), none else: a slot the table does not
     * tell is taken anew by the repair. */
    char dlog[NFTR_NAME_MAX + 8], alog[NFTR_NAME_MAX + 8];
    snprintf(dlog, sizeof(dlog), NFTR_DLOG_CHAIN_PREFIX "%s", row->id);
    snprintf(alog, sizeof(alog), NFTR_ALOG_CHAIN_PREFIX "%s", row->id);
    if (s->has_chain && own_chain(row->chain) && has_chain_sorted(rc, dlog)) {
        uint64_t cg = 0;
        uint32_t mark = 0;
        s->data = true;
        s->accept_unlogged = s->accept_unlogged && !has_chain_sorted(rc, alog);
        if (rc->dp)
            (void)nft_data_pieces_owner(rc->dp, row->id, &cg, &mark);
        s->lo_slot = mark & NFTR_LO_SLOT_MAX;
    }

    if (rc->listeners_gone && session_alive(d, row, &main_alive)) {
        log_error("session '%s' may run servers, and this lyhd cannot keep the network from "
                  "them (%s); ending it",
                  row->id, d->guard->listeners_why);
        if (s->has_cgroup)
            (void)cg_kill(&d->guard->cg, row->id);
        else if (row->pid > 0 && main_alive)
            kill(-(pid_t)row->pid, SIGKILL);
        reap_log(d, row->id, "reaped", "its servers would be reachable: listeners are off now");
        session_teardown(s);
        rc->reaped++;
        return 0;
    }
    if (session_alive(d, row, &main_alive)) {
        /* Its loopback slot, from the element that jumps to its lo-<id>. */
        char lo[NFTR_NAME_MAX + 8];
        bool own = own_chain(row->chain);
        snprintf(lo, sizeof(lo), NFTR_LOOPBACK_CHAIN_PREFIX "%s",
                 row->chain + (own ? strlen(NFTR_SESSION_CHAIN_PREFIX) : 0));
        for (size_t i = 0; own && !s->data && i < rc->n_lo; i++)
            if (strcmp(rc->lo[i].chain, lo) == 0)
                s->lo_slot = (uint32_t)rc->lo[i].cgroup_id & NFTR_LO_SLOT_MAX;
        /* Keep it guarded: rebuild the chains if the table lost them, or
         * part of them (a session that may listen has three objects: s-<id>,
         * lo-<id> and its loopback element; none may be missing; a data
         * session, every element and chain it should have). */
        bool whole = s->data ? data_session_whole(d, rc, rc->dp, s)
                             : has_chain_sorted(rc, row->chain) &&
                                   (!own || !d->guard->listeners ||
                                    (s->lo_slot && has_chain_sorted(rc, lo))) &&
                                   !(own && rc->dp && nft_data_pieces_keyed(rc->dp, row->cgroup_id));
        if (s->has_chain && !whole) {
            /* what is left of them first, so the add cannot collide */
            if (s->data)
                (void)data_session_clear(d, s, rc->dp);
            else
                (void)chain_session_clear(d, s, own ? rc->dp : NULL);
            s->lo_slot = 0;
            r = guard_session_add(d, s, why, sizeof(why));
            if (r < 0) {
                log_error("session '%s' is running but its rules cannot be restored (%s); "
                          "killing it",
                          row->id, why);
                if (s->has_cgroup)
                    (void)cg_kill(&d->guard->cg, row->id);
                session_teardown(s);
                rc->reaped++;
                return 0;
            }
            log_warn("session '%s': firewall chain was missing; rebuilt", row->id);
            reap_log(d, row->chain, "rebuilt", "chain of a running session was missing");
            audit_session_chain_built(d, s);
        }
        s->adopted = true;
        /* Its DNS forwarder listens again at the port its rules name, and
         * its element of map dnsport is put back if it went missing. When
         * the port is held by someone else, the element stays: the
         * session's DNS flows still go there, chain input lets nothing but
         * lyhd's sockets take them, and the agent resolves nothing (never
         * through the VPN to a resolver of its choosing, unrecorded) until
         * lyhd listens there again, tried every few seconds. */
        if (own && s->spec.dns_port && d->guard->base.dns) {
            char w[256];
            int k = dns_fwd_start(d, s, w, sizeof(w));
            int e = s->row.cgroup_id ? nft_session_dns_set(d->guard->nft, s->row.cgroup_id,
                                                           s->spec.dns_port)
                                     : 0;
            if (e < 0)
                log_error("session '%s': cannot put its DNS redirection back (%s); its chain "
                          "refuses port 53, so it resolves nothing until lyhd can",
                          row->id, strerror(-e));
            else if (e > 0)
                reap_log(d, row->chain, "rebuilt", "DNS redirection of a running session was missing");
            s->dns_elem_lost = e < 0;
            if (e >= 0 && s->nft_kept)
                s->nft_kept->dns = true;
            if (k < 0)
                log_error("session '%s': %s; its agent cannot resolve names until lyhd can "
                          "listen there again",
                          row->id, w);
            if (k < 0 || e < 0)
                arm_dns_retry(d);
        }
        if (main_alive) {
            s->pid = (pid_t)row->pid;
            s->pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0);
        }
        if (s->pidfd >= 0 && session_watch(s) == 0) {
            log_info("re-adopted running session '%s' of uid %u (pid %d)", row->id, row->uid,
                     s->pid);
            reap_log(d, row->id, "adopted", "process still running after restart");
            rc->adopted++;
            return 0;
        }
        /* The main process is gone but others remain: end them now. */
        log_info("session '%s': main process gone, leftovers remain; ending it", row->id);
    }
    reap_log(d, row->id, "reaped", "process gone at startup");
    session_teardown(s);
    rc->reaped++;
    return 0;
}

/* Shared-user guards: rebuild a missing chain, finish a removal a crash
 * interrupted. */
static int reconcile_shared(const struct store_guard *g, void *userdata) {
    struct reconcile *rc = userdata;
    struct lyhd *d = rc->d;
    struct gspec spec;
    char why[256];

    if (g->scope == LIANYAOHU__V1__SCOPE__SCOPE_SESSION)
        return 0;
    if (g->refcount == 0) {
        int r = nft_uid_chain_del(d->guard->nft, nftr_scope_of(g->scope), g->uid);
        if (r == 0 || r == -ENOENT) {
            (void)save_guard(d, g, true);
            reap_log(d, g->chain, "removed", "unfinished removal of a shared guard");
        }
        return 0;
    }
    /* A present user-wide chain is installed again anyway, in one
     * transaction: a lyhd before this one put its dispatch in front of the
     * guard gid's rule, where it decided sandboxed sockets too. */
    bool present = has_chain_sorted(rc, g->chain);
    if (present && g->scope != LIANYAOHU__V1__SCOPE__SCOPE_USER)
        return 0;
    if (gspec_decode(g->guard_spec, g->guard_spec_len, &spec) < 0 ||
        shared_render_add(d, g, &spec, present, why, sizeof(why)) < 0) {
        log_error("firewall %s of uid %u is %s and cannot be %s", g->chain, g->uid,
                  present ? "installed" : "missing", present ? "brought up to date" : "rebuilt");
        return 0;
    }
    if (present)
        return 0;
    log_warn("firewall %s of uid %u was missing; rebuilt", g->chain, g->uid);
    reap_log(d, g->chain, "rebuilt", "shared guard chain was missing");
    return 0;
}

/* Chains in our table that no live session owns: remove them. */
static void reap_unknown_chains(struct reconcile *rc) {
    struct lyhd *d = rc->d;
    struct nft_session_elem *elems = NULL;
    size_t n_elems = 0;

    (void)nft_list_sessions(d->guard->nft, &elems, &n_elems);
    for (size_t i = 0; i < rc->n_chains; i++) {
        const char *name = rc->chains[i];
        struct session *s;
        bool known = false;
        uint64_t cgid = 0;
        int r;

        bool shared = strncmp(name, NFTR_SHARED_CHAIN_PREFIX, strlen(NFTR_SHARED_CHAIN_PREFIX)) == 0;
        if (shared || strncmp(name, NFTR_UID_CHAIN_PREFIX, strlen(NFTR_UID_CHAIN_PREFIX)) == 0) {
            struct store_guard g;
            char *end;
            const char *num = name + strlen(shared ? NFTR_SHARED_CHAIN_PREFIX : NFTR_UID_CHAIN_PREFIX);
            unsigned long uid = strtoul(num, &end, 10);
            if (*end == '\0' && store_guard_get_by_chain(d->store, name, &g) == 0)
                continue;
            r = nft_uid_chain_del(d->guard->nft, shared ? NFTR_SCOPE_SHARED_USER : NFTR_SCOPE_UID,
                                  (uint32_t)uid);
            if (r == 0) {
                log_warn("removed chain '%s': no guard in state.db owns it", name);
                reap_log(d, name, "removed", "chain unknown to state.db");
            }
            continue;
        }
        /* a data session's log chains: whatever is left of it, by its keys */
        bool dl = strncmp(name, NFTR_DLOG_CHAIN_PREFIX, strlen(NFTR_DLOG_CHAIN_PREFIX)) == 0,
             al = strncmp(name, NFTR_ALOG_CHAIN_PREFIX, strlen(NFTR_ALOG_CHAIN_PREFIX)) == 0;
        if (dl || al) {
            const char *id = name + strlen(dl ? NFTR_DLOG_CHAIN_PREFIX : NFTR_ALOG_CHAIN_PREFIX);
            TAILQ_FOREACH(s, &d->sessions, link)
                known |= s->data && strcmp(s->row.id, id) == 0;
            if (known || data_session_reap(d, NULL, id, 0) != 0)
                continue;
            log_warn("removed the rules of data session '%s': no session in state.db owns them", id);
            reap_log(d, name, "removed", "data session unknown to state.db");
            continue;
        }
        /* a loopback chain lo-<id> goes with its session's s-<id> */
        char sname[NFTR_NAME_MAX + 8];
        if (strncmp(name, NFTR_LOOPBACK_CHAIN_PREFIX, strlen(NFTR_LOOPBACK_CHAIN_PREFIX)) == 0) {
            snprintf(sname, sizeof(sname), NFTR_SESSION_CHAIN_PREFIX "%s",
                     name + strlen(NFTR_LOOPBACK_CHAIN_PREFIX));
            name = sname;
        } else if (!own_chain(name)) {
            continue; /* base chains */
        }
        TAILQ_FOREACH(s, &d->sessions, link)
            if (strcmp(s->row.chain, name) == 0)
                known = true;
        if (known)
            continue;
        for (size_t j = 0; j < n_elems; j++)
            if (strcmp(elems[j].chain, name) == 0)
                cgid = elems[j].cgroup_id;
        r = nft_session_del(d->guard->nft, name, cgid, 0);
        if (r == -ENOENT)
            continue; /* gone with its s-<id> or lo-<id> already */
        if (r < 0) {
            log_error_errno(-r, "cannot remove unknown chain '%s'", name);
            continue;
        }
        log_warn("removed chain '%s': no session in state.db owns it", name);
        reap_log(d, name, "removed", "chain unknown to state.db");
    }
    free(elems);
}

static int reap_cgroup_cb(const char *name, void *userdata) {
    struct reconcile *rc = userdata;
    struct session *s;

    TAILQ_FOREACH(s, &rc->d->sessions, link)
        if (strcmp(s->row.id, name) == 0)
            return 0;
    /* Startup, before serving: waiting briefly for the killed processes to go
     * is fine here (bounded: 2 s). */
    (void)cg_kill(&rc->d->guard->cg, name);
    for (int i = 0; i < 200; i++) {
        bool populated = false;
        if (cg_populated(&rc->d->guard->cg, name, &populated) < 0 || !populated)
            break;
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
    int r = cg_remove(&rc->d->guard->cg, name);
    if (r == 0) {
        log_warn("removed cgroup '%s': no session in state.db owns it", name);
        reap_log(rc->d, name, "removed", "cgroup unknown to state.db");
    } else {
        log_error_errno(-r, "cannot remove stale cgroup '%s'", name);
    }
    return 0;
}

/* ---- someone else changed the ruleset while we run ---------------------------- */

#define GUARD_CHECK_DELAY_MS 20   /* coalesce a burst of notifications */
#define GUARD_CHECK_RETRY_MS 1000
/* Sessions whose rules one check puts back: each is a transaction the kernel
 * validates with the whole table (milliseconds beside many sessions), so a
 * flush of a map that touches them all is repaired in turns of the loop, the
 * next GUARD_CHECK_DELAY_MS later, never in one long stall. */
#define GUARD_REPAIRS_PER_CHECK 8
static const char GUARD_WHY_REPAIR[] = "more sessions to put back";
/* and a check once a minute whatever was announced: a change the kernel
 * announces to nobody, or one lost while the watch socket's queue was full
 * (after ENOBUFS the kernel drops notices silently until it drains) */
#define GUARD_CHECK_SWEEP_S 60
static const char GUARD_WHY_CHANGE[] = "a ruleset change not lyhd's own or a lost notice";
static const char GUARD_WHY_RETRY[] = "a check that failed";
static const char GUARD_WHY_SWEEP[] = "the minute's sweep";

/* why: what the --timing line names; a change's wins over the others while
 * the check waits (one check serves them all) */
static void arm_check(struct guard *g, unsigned ms, const char *why) {
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    bool pending = evtimer_pending(g->ev_check, NULL);
    if (!pending || why == GUARD_WHY_CHANGE)
        g->check_why = why;
    if (!pending)
        evtimer_add(g->ev_check, &tv);
}

/* Install a running session's rules anew (the table rebuilt, or pieces of
 * them put back): its loopback slot again where its marks are free, so that
 * its flows through lo go on, a new one where someone else's element holds
 * them; its counters and its domain sets start from nothing. When they cannot
 * be installed, nothing of them is in the table (one transaction) and the
 * session is ended, as none of its traffic may go on: false. */
static bool session_rules_anew(struct lyhd *d, struct session *s, const char *what) {
    char why[256];
    int r = guard_session_add(d, s, why, sizeof(why));
    if (r == -EEXIST && s->lo_slot) {
        s->lo_slot = 0;
        r = guard_session_add(d, s, why, sizeof(why));
    }
    if (r < 0) {
        log_error("session '%s': its rules cannot be %s (%s); ending it", s->row.id, what, why);
        if (s->has_cgroup)
            (void)cg_kill(&d->guard->cg, s->row.id);
        s->has_chain = false;
        session_teardown(s);
        return false;
    }
    audit_session_chain_built(d, s); /* fresh counters from here */
    dns_fwd_sets_emptied(s->dns);
    return true;
}

/* The table was rebuilt empty: put every live session's chain back (a session
 * whose chain cannot be restored is ended: its traffic must not go unguarded,
 * and the base chain refuses a guarded socket that matches no session in the
 * meantime), then the shared chains. */
static unsigned restore_chains(struct lyhd *d) {
    struct reconcile rc = {.d = d};
    struct session *s, *next;
    unsigned n = 0;

    d->guard->proto_sets_stale = true;
    dns_fwd_resolvers_sync(d);

    for (s = TAILQ_FIRST(&d->sessions); s; s = next) {
        next = TAILQ_NEXT(s, link);
        if (!s->has_chain || s->row.state >= STORE_SESSION_ENDING)
            continue;
        if (session_rules_anew(d, s, "restored after the table was rebuilt"))
            n++;
    }
    /* No chain is present now: reconcile_shared rebuilds every shared one. */
    (void)store_guard_foreach(d->store, reconcile_shared, &rc);
    return n;
}

/* What a check reads back of the sessions' rules. */
struct sess_pieces {
    struct reconcile rc; /* the chains, the elements of map loopback */
    struct nft_session_elem *elems, *served, *dns; /* maps sessions, served, dnsport */
    size_t n_elems, n_served, n_dns;
};

#define ANY_VALUE INT64_MIN /* a verdict map's element: no value to compare */

static int elem_key_cmp(const void *a, const void *b) {
    const struct nft_session_elem *x = a, *y = b;
    return x->cgroup_id < y->cgroup_id ? -1 : x->cgroup_id > y->cgroup_id;
}

static void sort_elems(struct nft_session_elem *v, size_t n) {
    if (n)
        qsort(v, n, sizeof(*v), elem_key_cmp);
}

/* (a map's keys are unique: sorted by key, one bsearch finds the element) */
static bool has_elem(const struct nft_session_elem *v, size_t n, uint64_t key, const char *chain,
                     int64_t value) {
    const struct nft_session_elem k = {.cgroup_id = key};
    const struct nft_session_elem *e = n ? bsearch(&k, v, n, sizeof(*v), elem_key_cmp) : NULL;
    return e && strcmp(e->chain, chain) == 0 && (value == ANY_VALUE || e->value == value);
}

/* Whether the table holds all of a running session's own rules: its chain
 * s-<id> and the element of map sessions that jumps there from its cgroup;
 * with a forwarder, its element of map dnsport; and, for a session that may
 * listen, its chain lo-<id>, the element of map loopback that jumps there
 * from its mark, and its element of map served. */
static bool session_whole(const struct sess_pieces *p, const struct session *s,
                          const struct guard *g) {
    if (!has_elem(p->elems, p->n_elems, s->row.cgroup_id, s->row.chain, ANY_VALUE) ||
        !has_chain_sorted(&p->rc, s->row.chain))
        return false;
    if (g->base.dns && s->spec.dns_port &&
        !has_elem(p->dns, p->n_dns, s->row.cgroup_id, "", s->spec.dns_port))
        return false;
    if (!g->listeners)
        return true;
    char lo[NFTR_NAME_MAX + 8];
    snprintf(lo, sizeof(lo), NFTR_LOOPBACK_CHAIN_PREFIX "%s",
             s->row.chain + strlen(NFTR_SESSION_CHAIN_PREFIX));
    return s->lo_slot && has_chain_sorted(&p->rc, lo) &&
           has_elem(p->rc.lo, p->rc.n_lo, nftr_lo_mark(s->lo_slot), lo, ANY_VALUE) &&
           has_elem(p->served, p->n_served, s->row.cgroup_id, "", nftr_served_mark(s->lo_slot));
}

/* The base check covers the table's own objects; this covers the pieces of
 * each running session's rules within it. A piece someone else deleted
 * (root's `nft delete element` of its loopback element, say) is put back by
 * installing the session's rules again, what is left of them removed first,
 * as the startup's reconciliation does. Until then the session's packets are
 * refused, never let through (a missing element closes what it opened:
 * security-model.md). A session whose rules cannot be put back is ended. */
static unsigned repair_sessions(struct lyhd *d) {
    struct guard *g = d->guard;
    struct sess_pieces p = {.rc = {.d = d}};
    struct nft_data_pieces *dp = NULL;
    struct session *s, *next;
    unsigned n = 0;
    bool any = false;
    int r;

    /* (a session with a cgroup has a chain of its own, s-<id>, when it is not
     * a data session: rpc_run.c; LYH-<uid> is for lyhd without cgroup v2) */
    TAILQ_FOREACH(s, &d->sessions, link)
        any |= s->has_chain && s->row.state < STORE_SESSION_ENDING && s->row.cgroup_id &&
               own_chain(s->row.chain);
    if (!any)
        return 0;
    /* the data layout's sets, also for chain sessions: none of their elements
     * may be keyed by a chain session's cgroup */
    if ((g->base.data && (r = nft_data_pieces_read(g->nft, &dp)) < 0) ||
        (r = nft_list_chains(g->nft, &p.rc.chains, &p.rc.n_chains)) < 0 ||
        (r = nft_list_sessions(g->nft, &p.elems, &p.n_elems)) < 0 ||
        (r = nft_list_dnsport(g->nft, &p.dns, &p.n_dns)) < 0 ||
        (g->listeners && (r = nft_list_loopback(g->nft, &p.rc.lo, &p.rc.n_lo)) < 0) ||
        (g->listeners && (r = nft_list_served(g->nft, &p.served, &p.n_served)) < 0)) {
        log_error("table inet lianyaohu: cannot read the sessions' rules back to check them "
                  "(%s): %s; retrying",
                  nft_last_error_object(g->nft), strerror(-r));
        arm_check(g, GUARD_CHECK_RETRY_MS, GUARD_WHY_RETRY);
        goto out;
    }
    /* sorted, so that a check costs n log n at many sessions, not n^2 */
    sort_chains(&p.rc);
    sort_elems(p.elems, p.n_elems);
    sort_elems(p.rc.lo, p.rc.n_lo);
    sort_elems(p.served, p.n_served);
    sort_elems(p.dns, p.n_dns);
    for (s = TAILQ_FIRST(&d->sessions); s; s = next) {
        next = TAILQ_NEXT(s, link);
        if (!s->has_chain || s->row.state >= STORE_SESSION_ENDING || !s->row.cgroup_id ||
            !own_chain(s->row.chain) ||
            (s->data ? data_session_whole(d, &p.rc, dp, s)
                     : session_whole(&p, s, g) && !(dp && nft_data_pieces_keyed(dp, s->row.cgroup_id))))
            continue;
        if (n == GUARD_REPAIRS_PER_CHECK) {
            arm_check(g, GUARD_CHECK_DELAY_MS, GUARD_WHY_REPAIR);
            break;
        }
        /* What is left of them goes first, so the add cannot collide. When
         * that fails (its cgroup's element of map sessions jumps to someone
         * else's chain, say), nothing is added: its packets stay refused, and
         * the next check tries again. */
        r = s->data ? data_session_clear(d, s, dp) : chain_session_clear(d, s, dp);
        if (r < 0 && r != -ENOENT) {
            log_error("session '%s': part of its firewall rules was removed by someone else, "
                      "and what is left of them cannot be removed to put them back (%s): %s; "
                      "its traffic stays refused until the next check",
                      s->row.id, nft_last_error_object(g->nft), strerror(-r));
            continue;
        }
        free(s->nft_kept);
        s->nft_kept = NULL;
        n++;
        if (!session_rules_anew(d, s, "put back after someone else removed part of them"))
            continue;
        s->dns_elem_lost = false;
        log_warn("session '%s': part of its firewall rules was removed by someone else while "
                 "it ran; put them back",
                 s->row.id);
        reap_log(d, s->row.chain, "rebuilt", "part of a running session's rules was missing");
    }
out:
    nft_data_pieces_free(dp);
    nft_names_free(p.rc.chains);
    free(p.rc.lo);
    free(p.elems);
    free(p.served);
    free(p.dns);
    return n;
}

static void on_check(evutil_socket_t fd, short what, void *arg) {
    struct lyhd *d = arg;
    struct guard *g = d->guard;
    unsigned flags = 0;
    uint64_t t0 = d->cfg.timing ? lyhd_mono_us() : 0;
    int r = nft_ensure_base(g->nft, &g->base, &flags);

    /* (--timing: how often and how long; lyhd's own changes start none) */
    if (d->cfg.timing)
        log_info("guard check after %s: %llu us (flags %u)",
                 g->check_why ? g->check_why : GUARD_WHY_CHANGE,
                 (unsigned long long)(lyhd_mono_us() - t0), r < 0 ? 0u : flags);
    if (r < 0) {
        log_error("table inet lianyaohu: checking it after a ruleset change failed (%s): %s; "
                  "retrying",
                  nft_last_error_object(g->nft), strerror(-r));
        arm_check(g, GUARD_CHECK_RETRY_MS, GUARD_WHY_RETRY);
        return;
    }
    if (!(flags & (NFT_BASE_CREATED | NFT_BASE_REBUILT))) {
        (void)repair_sessions(d);
        return;
    }
    unsigned n = restore_chains(d);
    log_warn("table inet lianyaohu was removed or changed by someone else while lyhd ran; "
             "rebuilt it and the chains of %u session(s)",
             n);
    reap_log(d, "table inet lianyaohu", "rebuilt",
             "removed or changed by someone else while lyhd ran");
}

static void on_sweep(evutil_socket_t fd, short what, void *arg) {
    struct lyhd *d = arg;
    arm_check(d->guard, 0, GUARD_WHY_SWEEP);
}

static void on_watch(evutil_socket_t fd, short what, void *arg) {
    struct lyhd *d = arg;
    /* lyhd's own transactions were checked by their acks: only a change that
     * another socket (or the kernel) made, or one that cannot be told, starts
     * a check (docs/security-model.md) */
    int r = nft_watch_drain(fd, nft_portid(d->guard->nft));

    if (r != 0)
        arm_check(d->guard, GUARD_CHECK_DELAY_MS, GUARD_WHY_CHANGE);
}

static int watch_start(struct lyhd *d, char *why, size_t whylen) {
    struct guard *g = d->guard;
    int r = nft_watch_open(&g->watch_fd);

    if (r < 0) {
        snprintf(why, whylen, "cannot watch the nftables ruleset for changes: %s", strerror(-r));
        return r;
    }
    g->ev_watch = event_new(d->base, g->watch_fd, EV_READ | EV_PERSIST, on_watch, d);
    g->ev_check = evtimer_new(d->base, on_check, d);
    g->ev_sweep = event_new(d->base, -1, EV_PERSIST, on_sweep, d);
    if (!g->ev_watch || !g->ev_check || !g->ev_sweep || event_add(g->ev_watch, NULL) < 0 ||
        event_add(g->ev_sweep, &(struct timeval){.tv_sec = GUARD_CHECK_SWEEP_S}) < 0) {
        snprintf(why, whylen, "cannot watch the nftables ruleset: out of memory");
        return -ENOMEM;
    }
    return 0;
}

void guard_set_flow_rate(struct lyhd *d, unsigned rate) {
    struct guard *g = d->guard;

    if (!g)
        return;
    g->flow_log.vpn_rate = rate;
    g->flow_log.vpn_burst = rate / 2 > NFTR_DEFAULT_LOG_BURST ? rate / 2 : NFTR_DEFAULT_LOG_BURST;
}

/* Linux >= maj.min by uname's release ("6.1.0-13-amd64"): 0/1, -errno. */
static int kernel_at_least(unsigned maj, unsigned min) {
    struct utsname u;
    unsigned a, b;

    if (uname(&u) < 0)
        return -errno;
    if (sscanf(u.release, "%u.%u", &a, &b) != 2)
        return -EINVAL;
    return a > maj || (a == maj && b >= min);
}

/* Install the base, with chain input when sessions can be let listen:
 * cgroup v2 (the input rules match a receiving socket's cgroup ancestor at
 * the base's level) and a kernel whose nft socket expression looks the
 * receiving socket up on input (Linux 5.18; before it `socket cgroupv2`
 * loads in an input chain but never matches there, which would fail open,
 * so the version decides, not a load probe). When the kernel refuses the
 * input chain, the base goes in without it and listeners stay denied.
 * Never an open inbound path: seccomp is built from g->listeners after. */
static int base_with_listeners(struct lyhd *d, unsigned *flags) {
    struct guard *g = d->guard;
    int k = g->have_cgroup ? kernel_at_least(5, 18) : 0;
    int r;

    g->listeners = false;
    g->base.inbound = false;
    if (!g->have_cgroup) {
        snprintf(g->listeners_why, sizeof(g->listeners_why),
                 "without cgroup v2 lyhd cannot tell a session's sockets from others' to refuse "
                 "what reaches them from the network");
    } else if (k <= 0) {
        snprintf(g->listeners_why, sizeof(g->listeners_why),
                 "this kernel is older than Linux 5.18, whose nftables cannot match the socket a "
                 "packet is for by its cgroup");
    } else if (g->cg.session_level < 2) {
        snprintf(g->listeners_why, sizeof(g->listeners_why),
                 "the session cgroups sit at the cgroup root's level 1");
    } else {
        g->base.inbound = true;
        g->base.base_cgroup_id = g->cg.base_id;
        g->base.base_cgroup = g->cg.base + 1; /* below the root, without the leading '/' */
    }
    /* DNS to lyhd's forwarders: the nat chain needs cgroup v2 (the sessions
     * are told apart by cgroup); without it, a session's DNS goes where its
     * resolv.conf says, through its chain's port-53 rules. */
    g->base.dns = g->have_cgroup;
    /* The protocol process (it parses the forwarded DNS and the flow
     * events) may send only to the sessions' resolvers. */
    g->base.proto_uid = (uint32_t)d->proto_uid;
    /* A session of the default policy as data (docs/guard-as-data.md), which
     * needs chain input and the forwarders; kept in step below. */
    g->base.data = g->base.inbound && g->base.dns;
    r = nft_ensure_base(g->nft, &g->base, flags);
    if (r < 0 && g->base.dns) {
        log_warn("nftables refused the DNS redirection (%s: %s); sessions' DNS goes where their "
                 "resolv.conf says",
                 nft_last_error_object(g->nft), strerror(-r));
        g->base.dns = g->base.data = false;
        r = nft_ensure_base(g->nft, &g->base, flags);
    }
    if (r < 0 && g->base.inbound) /* once more: a transient failure must not turn them off */
        r = nft_ensure_base(g->nft, &g->base, flags);
    if (r < 0 && g->base.inbound) {
        snprintf(g->listeners_why, sizeof(g->listeners_why),
                 "nftables refused the rules that keep the network from a session's sockets "
                 "(%s: %s)",
                 nft_last_error_object(g->nft), strerror(-r));
        g->base.inbound = g->base.data = false;
        r = nft_ensure_base(g->nft, &g->base, flags);
    }
    if (r == 0)
        g->listeners = g->base.inbound;
    return r;
}

int guard_init(struct lyhd *d, char *why, size_t whylen) {
    struct guard *g = calloc(1, sizeof(*g));
    struct reconcile rc = {.d = d};
    unsigned flags = 0;
    int r;

    if (!g)
        return -ENOMEM;
    g->cg.base_fd = -1;
    g->watch_fd = -1;
    g->route_watch = -1;
    d->guard = g;
    g->proto_sets_stale = true; /* a table kept from the last lyhd: whatever they hold */
    r = nft_open(&g->nft);
    if (r < 0) {
        snprintf(why, whylen, "cannot open the nftables netlink socket: %s", strerror(-r));
        return r;
    }
    r = route_open(&g->route);
    if (r < 0) {
        snprintf(why, whylen, "cannot open the rtnetlink socket: %s", strerror(-r));
        return r;
    }
    r = route_watch_open(&g->route_watch);
    if (r < 0) /* every launch asks the kernel again */
        log_warn("cannot watch the network for changes (%s): each launch checks the routes anew",
                 strerror(-r));
    r = d->cfg.no_cgroup ? -ENOENT : cg_open(GUARD_CGROUP_SUBTREE, &g->cg);
    if (r == 0) {
        g->have_cgroup = true;
    } else {
        g->cg.base_fd = -1;
        log_warn("no usable cgroup v2 hierarchy (%s): sessions of one user share a firewall "
                 "chain LYH-<uid> matched by uid and guard gid, and concurrent sessions must "
                 "agree on their rules",
                 d->cfg.no_cgroup ? "--no-cgroup" : strerror(-r));
    }
    g->base = (struct nftr_base_params){
        .guard_gid = d->cfg.guard_gid,
        .guard_gid_max = d->cfg.guard_gid_max,
        .cgroupv2 = g->have_cgroup,
        .cgroup_level = g->have_cgroup ? g->cg.session_level : NFTR_DEFAULT_CGROUP_LEVEL,
        .log = {.group = NFTR_DEFAULT_NFLOG_GROUP,
                .rate = NFTR_DEFAULT_LOG_RATE,
                .burst = NFTR_DEFAULT_LOG_BURST},
    };
    /* The VPN's new flows share the measured rate (a burst of half a
     * second's worth: a short flood is recorded whole); every other log
     * rule keeps the fixed one. */
    g->flow_log = g->base.log;
    guard_set_flow_rate(d, audit_flow_rate(d));
    /* Did the table lyhd finds let sessions listen? Its map loopback says
     * (chain input is there for DNS alone too). Unknown counts as yes. */
    r = nft_set_exists(g->nft, NFTR_MAP_LOOPBACK);
    bool had_input = r != 0;
    r = base_with_listeners(d, &flags);
    if (r == 0)
        rc.listeners_gone = had_input && !g->listeners;
    if (r < 0) {
        snprintf(why, whylen, "cannot install table inet lianyaohu (%s): %s",
                 nft_last_error_object(g->nft), strerror(-r));
        return r;
    }
    if (flags & NFT_BASE_CREATED)
        log_info("created table inet lianyaohu (guard gids %u-%u, session cgroups at level %u)",
                 g->base.guard_gid, g->base.guard_gid_max, g->base.cgroup_level);
    if (g->listeners)
        log_info("sessions may run local servers: packets for their sockets are refused on "
                 "every interface but lo (chain input)");
    else
        log_warn("sessions may not listen (bind/listen/accept are denied): %s",
                 g->listeners_why);
    if (flags & NFT_BASE_REBUILT) {
        rc.rebuilt = true;
        log_warn("table inet lianyaohu had been changed by someone else; rebuilt it");
        reap_log(d, "table inet lianyaohu", "rebuilt", "base objects were missing or foreign");
    }

    r = nft_list_chains(g->nft, &rc.chains, &rc.n_chains);
    if (r < 0) {
        snprintf(why, whylen, "cannot list chains of table inet lianyaohu: %s", strerror(-r));
        return r;
    }
    sort_chains(&rc);
    if (g->base.data && (r = nft_data_pieces_read(g->nft, &rc.dp)) < 0) {
        snprintf(why, whylen, "cannot read the data sessions' rules of table inet lianyaohu: %s",
                 strerror(-r));
        nft_names_free(rc.chains);
        return r;
    }
    /* Loopback slots: adopted sessions keep theirs (read from the table);
     * new ones count on from a random start, so a slot an ended session had
     * before this start is not given again soon (its flows' conntrack entries
     * may outlive it for minutes: a new owner of the slot must not inherit
     * them). A slot still in use is met as EEXIST and skipped. */
    uint32_t rnd = 0;
    if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
        rnd = (uint32_t)lyhd_mono_ms();
    g->next_slot = 1 + rnd % (NFTR_LO_SLOT_MAX - 1);
    (void)nft_list_loopback(g->nft, &rc.lo, &rc.n_lo);
    r = store_session_foreach_live(d->store, reconcile_one, &rc);
    if (r < 0) {
        snprintf(why, whylen, "cannot read live sessions from state.db: %s",
                 store_errmsg(d->store));
        nft_names_free(rc.chains);
        free(rc.lo);
        nft_data_pieces_free(rc.dp);
        return r;
    }
    (void)store_guard_foreach(d->store, reconcile_shared, &rc);
    reap_unknown_chains(&rc);
    if (g->have_cgroup)
        (void)cg_foreach(&g->cg, reap_cgroup_cb, &rc);
    nft_names_free(rc.chains);
    free(rc.lo);
    nft_data_pieces_free(rc.dp);
    if (rc.adopted || rc.reaped)
        log_info("startup reconciliation: %u session(s) re-adopted, %u reaped", rc.adopted,
                 rc.reaped);
    return watch_start(d, why, whylen);
}
