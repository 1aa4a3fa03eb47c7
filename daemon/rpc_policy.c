/* PolicyGet, PolicyHistory, PolicyUpdate: the admin policy's versions, and
 * bringing running sessions under a new version.
 *
 * PolicyUpdate runs inside the dispatcher's state.db transaction (RPC_MUTATES):
 * the new version's row and the narrowed sessions' guard specs are written in
 * it, then every affected session chain is replaced in ONE nftables batch.
 * If the batch fails nothing changed in the kernel and the call fails, so the
 * transaction rolls back. If the commit fails after the batch, the kernel is
 * narrower than state.db says (the safe direction) and d->policy is reloaded
 * from state.db by the undo hook. A request never widens a running session:
 * new versions apply to running sessions only where they narrow.
 *
 * Authorization is the RPC table's (PolicyUpdate is admin-only); nothing here
 * looks at the caller except to record who set a version. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "daemon/audit.h"
#include "daemon/guard.h"
#include "daemon/log.h"
#include "daemon/lyhd.h"
#include "daemon/dns_fwd.h"
#include "daemon/policy.h"
#include "daemon/pproc.h"
#include "daemon/rpc.h"
#include "daemon/session.h"
#include "platform/linux/nft.h"

/* A dry run's answer: what narrow_sessions would do (the first
 * EFFECTS_MAX; strings cut to what the client holds, proto options). */
#define EFFECTS_MAX 32
struct effects {
    Lianyaohu__V1__PolicyEffect e[EFFECTS_MAX];
    Lianyaohu__V1__PolicyEffect *p[EFFECTS_MAX];
    char id[EFFECTS_MAX][40], chain[EFFECTS_MAX][64], why[EFFECTS_MAX][256];
    size_t n;
};

/* Copy src into dst[n], cut (on a UTF-8 character boundary) when longer:
 * a dry run's "why" is the daemon's POLICY_WHY_MAX, the client holds 256. */
static void copy_cut(char *dst, size_t n, const char *src) {
    size_t l = strnlen(src, n);
    if (l == n) /* longer: cut before the character that would not fit */
        for (l = n - 1; l > 0 && ((unsigned char)src[l] & 0xC0) == 0x80;)
            l--;
    memcpy(dst, src, l);
    dst[l] = '\0';
}

static void effect_add(struct effects *ef, const char *id, const char *chain, uint32_t uid,
                       bool cut, const char *why) {
    if (ef->n >= EFFECTS_MAX)
        return;
    size_t i = ef->n++;
    lianyaohu__v1__policy_effect__init(&ef->e[i]);
    copy_cut(ef->id[i], sizeof(ef->id[i]), id);
    copy_cut(ef->chain[i], sizeof(ef->chain[i]), chain);
    copy_cut(ef->why[i], sizeof(ef->why[i]), why);
    ef->e[i].session_id = ef->id[i];
    ef->e[i].chain = ef->chain[i];
    ef->e[i].uid = uid;
    ef->e[i].cut = cut;
    ef->e[i].why = ef->why[i];
    ef->p[i] = &ef->e[i];
}

static void effects_to_reply(struct effects *fx, Lianyaohu__V1__PolicyReply *rep) {
    rep->n_effects = fx->n;
    rep->effects = fx->p;
}

static void send_policy_fx(struct rpc_call *call, const struct policy *p, bool unchanged,
                           struct effects *fx, bool end) {
    _cleanup_free_ struct policy_msg *h = calloc(1, sizeof(*h));
    Lianyaohu__V1__PolicyReply rep = LIANYAOHU__V1__POLICY_REPLY__INIT;
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;

    if (!h) {
        rpc_fail(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    policy_to_msg(p, h);
    rep.version = p->version;
    rep.policy = &h->m;
    rep.set_by_uid = p->set_by_uid;
    rep.set_unix_ms = p->set_ms > 0 ? (uint64_t)p->set_ms : 0;
    rep.unchanged = unchanged;
    if (fx)
        effects_to_reply(fx, &rep);
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_POLICY;
    resp.policy = &rep;
    rpc_send(call, &resp, end);
}

static void send_policy(struct rpc_call *call, const struct policy *p, bool unchanged, bool end) {
    send_policy_fx(call, p, unchanged, NULL, end);
}

void rpc_policy_get(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    (void)req;
    send_policy(call, policy_current(d), false, true);
}

/* ---- history ------------------------------------------------------------------- */

struct history {
    struct store_policy_version *v;
    size_t n, cap;
};

static int collect(const struct store_policy_version *v, void *ud) {
    struct history *h = ud;
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        void *nv = reallocarray(h->v, cap, sizeof(h->v[0]));
        if (!nv)
            return -ENOMEM;
        h->v = nv;
        h->cap = cap;
    }
    struct store_policy_version *c = &h->v[h->n];
    *c = *v;
    c->blob = NULL;
    if (v->blob_len) {
        c->blob = malloc(v->blob_len);
        if (!c->blob)
            return -ENOMEM;
        memcpy(c->blob, v->blob, v->blob_len);
    }
    h->n++;
    return 0;
}

/* Every stored version, oldest first (newest last), then an empty final
 * answer. The built-in default (version 0) is not a stored version. */
void rpc_policy_history(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    struct history h = {0};
    _cleanup_free_ struct policy *p = calloc(1, sizeof(*p));
    LyhResponse end = LIANYAOHU__V1__RESPONSE__INIT;
    int r;

    (void)req;
    if (!p) {
        rpc_fail(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    r = store_policy_foreach(d->store, 0, collect, &h);
    if (r < 0) {
        rpc_fail(call, r == -ENOMEM ? LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED
                                    : LIANYAOHU__V1__CODE__UNAVAILABLE,
                 "state.db: %s", r == -ENOMEM ? "out of memory" : store_errmsg(d->store));
        goto out;
    }
    for (size_t i = h.n; i-- > 0 && !call->finished;) {
        char why[POLICY_WHY_MAX];
        if (policy_unpack(h.v[i].blob, h.v[i].blob_len, p, why, sizeof(why)) < 0) {
            log_error("stored policy version %" PRIu64 " is not valid: %s", h.v[i].version, why);
            rpc_fail(call, LIANYAOHU__V1__CODE__DATA_LOSS, "stored policy version %" PRIu64
                     " is not valid: %s", h.v[i].version, why);
            goto out;
        }
        p->version = h.v[i].version;
        p->set_by_uid = h.v[i].set_by_uid;
        p->set_ms = h.v[i].set_ms;
        send_policy(call, p, false, false);
    }
    rpc_send(call, &end, true);
out:
    for (size_t i = 0; i < h.n; i++)
        free(h.v[i].blob);
    free(h.v);
}

/* ---- live narrowing --------------------------------------------------------------- */

struct narrowed {
    struct session *s;
    struct gspec spec;
    bool cut;
    bool rebuild; /* its own chain (session scope) is replaced */
    int swap;     /* a data session: its index in the swaps (-1: none) */
    char why[POLICY_WHY_MAX];
};

static void tell_session(struct lyhd *d, struct narrowed *n, uint64_t version) {
    struct session *s = n->s;
    char detail[POLICY_WHY_MAX + 64] = "";
    char num[32];

    snprintf(num, sizeof(num), "%" PRIu64, version);
    audit_kv(detail, sizeof(detail), "policy_version", num);
    audit_kv(detail, sizeof(detail), "why", n->why);
    audit_note(d, AUDIT_KIND_POLICY, s->row.id, true, s->row.uid, n->cut ? "cut" : "narrowed", "%s",
               detail + (detail[0] == ' '));
    log_info("session '%s' of uid %u: %s", s->row.id, s->row.uid, n->why);
    if (s->call) {
        Lianyaohu__V1__AuditEvent ev = LIANYAOHU__V1__AUDIT_EVENT__INIT;
        Lianyaohu__V1__RunEvent re = LIANYAOHU__V1__RUN_EVENT__INIT;
        LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
        ev.kind = LIANYAOHU__V1__EVENT_KIND__EVENT_KIND_POLICY;
        ev.session_id = s->row.id;
        ev.has_uid = true;
        ev.uid = s->row.uid;
        ev.action = (char *)(n->cut ? "cut" : "narrowed");
        ev.detail = n->why;
        re.event_case = LIANYAOHU__V1__RUN_EVENT__EVENT_FLOW;
        re.flow = &ev;
        resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_RUN_EVENT;
        resp.run_event = &re;
        rpc_send(s->call, &resp, false);
    }
}

/* A shared chain (lyh install's LYH-U-<uid>; the LYH-<uid> of sessions
 * without cgroup v2) that a new version narrows. */
struct narrowed_guard {
    struct store_guard g;
    struct gspec spec;
    bool cut;
    char why[POLICY_WHY_MAX];
};

struct guard_walk {
    const struct policy *np;
    struct narrowed_guard *v;
    size_t n, cap;
    int err;
};

static int collect_guard(const struct store_guard *g, void *userdata) {
    struct guard_walk *w = userdata;
    struct narrowed_guard x = {.g = *g};

    if (g->refcount == 0 || (g->scope != LIANYAOHU__V1__SCOPE__SCOPE_USER &&
                             g->scope != LIANYAOHU__V1__SCOPE__SCOPE_UID_GID))
        return 0;
    if (gspec_decode(g->guard_spec, g->guard_spec_len, &x.spec) < 0) {
        w->err = -EBADMSG;
        return 1;
    }
    if (!policy_narrow_spec(w->np, &x.spec, &x.cut, x.why, sizeof(x.why)))
        return 0;
    if (x.cut)
        snprintf(x.why, sizeof(x.why),
                 "policy: the rules of %s no longer fit the policy; only loopback is left", g->chain);
    if (w->n == w->cap) {
        size_t ncap = w->cap ? w->cap * 2 : 8;
        struct narrowed_guard *nv = reallocarray(w->v, ncap, sizeof(*nv));
        if (!nv) {
            w->err = -ENOMEM;
            return 1;
        }
        w->v = nv;
        w->cap = ncap;
    }
    w->v[w->n++] = x;
    return 0;
}

/* Was the shared chain a session without a chain of its own relies on cut? */
static bool shared_cut(const struct guard_walk *w, const struct session *s) {
    for (size_t i = 0; i < w->n; i++)
        if (w->v[i].cut && w->v[i].g.uid == s->row.uid && w->v[i].g.scope == s->row.scope)
            return true;
    return false;
}

/* Bring every running session, and every shared chain, under np where np
 * narrows it. Rows first (in the caller's transaction), then one nftables
 * batch for all chains, then the sessions whose egress was cut are killed.
 * A session with a chain of its own has it rebuilt; one without (the
 * per-user fallback) follows its shared chain, which is narrowed in the same
 * batch; a shared chain that cannot keep its rules (its interface is no
 * longer allowed) keeps loopback only: the user asked for "only through the
 * VPN", and the safe reading of "that VPN is not allowed" is "nothing". */
/* dry: only say what it would do (into *dry), change nothing. */
static int narrow_sessions(struct lyhd *d, const struct policy *np, struct effects *dry,
                           size_t *ret_narrowed, size_t *ret_cut, char *why, size_t whylen) {
    struct session *s;
    size_t cap = 0, n = 0, n_chains = 0, cut = 0;
    _cleanup_free_ struct narrowed *v = NULL;
    _cleanup_free_ const struct nftr_chain **chains = NULL;
    /* data sessions (guard-as-data.md): their pieces swapped for their
     * narrowed rules, in the chains' transaction */
    _cleanup_free_ struct nft_data_swap *swaps = NULL;
    size_t n_swaps = 0;
    struct guard_walk gw = {.np = np};
    int r = 0;

    *ret_narrowed = *ret_cut = 0;
    r = store_guard_foreach(d->store, collect_guard, &gw);
    if (r < 0 || gw.err < 0) {
        snprintf(why, whylen, "%s", gw.err == -ENOMEM ? "out of memory"
                                    : gw.err < 0       ? "a stored shared firewall spec is damaged"
                                                       : store_errmsg(d->store));
        free(gw.v);
        return gw.err < 0 ? gw.err : r;
    }
    TAILQ_FOREACH(s, &d->sessions, link)
        cap++;
    if (cap + gw.n == 0)
        return 0;
    v = calloc(cap ? cap : 1, sizeof(*v));
    chains = calloc(cap + gw.n, sizeof(*chains));
    swaps = calloc(cap ? cap : 1, sizeof(*swaps));
    if (!v || !chains || !swaps) {
        snprintf(why, whylen, "out of memory");
        r = -ENOMEM;
        goto out;
    }
    TAILQ_FOREACH(s, &d->sessions, link) {
        struct narrowed *x = &v[n];
        if (s->exited || s->row.state != STORE_SESSION_RUNNING || s->pid <= 0)
            continue;
        x->s = s;
        if (s->row.scope == LIANYAOHU__V1__SCOPE__SCOPE_NONE) {
            if (np->permit_no_firewall)
                continue;
            x->cut = true;
            snprintf(x->why, sizeof(x->why),
                     "policy: --no-firewall is no longer permitted (permit_no_firewall is off); "
                     "session ended");
            n++;
            continue;
        }
        if (!s->has_chain) {
            /* Its shared chain is narrowed below; only a cut ends it. */
            if (!shared_cut(&gw, s))
                continue;
            x->cut = true;
            snprintf(x->why, sizeof(x->why),
                     "policy: the session's shared firewall LYH-%u no longer fits the policy; "
                     "session ended",
                     s->row.uid);
            n++;
            continue;
        }
        x->spec = s->spec;
        if (!policy_narrow_spec(np, &x->spec, &x->cut, x->why, sizeof(x->why)))
            continue;
        x->rebuild = true;
        n++;
    }
    if (dry) {
        for (size_t i = 0; i < n; i++)
            effect_add(dry, v[i].s->row.id, "", v[i].s->row.uid, v[i].cut, v[i].why);
        for (size_t i = 0; i < gw.n; i++)
            effect_add(dry, "", gw.v[i].g.chain, gw.v[i].g.uid, gw.v[i].cut, gw.v[i].why);
        r = 0;
        goto out;
    }
    /* 1. state.db (the caller's transaction): the narrowed specs. */
    for (size_t i = 0; i < n; i++) {
        struct narrowed *x = &v[i];
        if (!x->rebuild)
            continue;
        struct store_session row = x->s->row;
        r = gspec_encode(&x->spec, row.guard_spec, sizeof(row.guard_spec), &row.guard_spec_len);
        if (r == 0)
            r = store_session_update(d->store, &row);
        if (r < 0) {
            snprintf(why, whylen, "recording the narrowed rules of session '%s' failed: %s",
                     x->s->row.id, r == -ENOBUFS ? "too large" : store_errmsg(d->store));
            goto out;
        }
    }
    for (size_t i = 0; i < gw.n; i++) {
        struct narrowed_guard *x = &gw.v[i];
        r = guard_shared_set_spec(&x->g, &x->spec);
        if (r == 0)
            r = store_guard_put(d->store, &x->g);
        if (r < 0) {
            snprintf(why, whylen, "recording the narrowed rules of %s failed: %s", x->g.chain,
                     r == -ENOBUFS ? "too large" : store_errmsg(d->store));
            goto out;
        }
    }
    /* 2. The kernel: every affected chain in one transaction. */
    for (size_t i = 0; i < n; i++) {
        struct narrowed *x = &v[i];
        if (!x->rebuild)
            continue;
        _cleanup_free_ struct session *tmp = malloc(sizeof(*tmp));
        struct nftr_chain *c = NULL;
        if (!tmp) {
            r = -ENOMEM;
            snprintf(why, whylen, "out of memory");
            goto out;
        }
        *tmp = *x->s;
        tmp->spec = x->spec;
        tmp->accept_unlogged = !np->log_allowed_flows;
        x->swap = -1;
        if (x->s->data) {
            x->swap = (int)n_swaps;
            struct nft_data_swap *w = &swaps[n_swaps++];
            struct nftr_data *old = NULL, *nd = NULL;
            r = guard_render_data(d, x->s, &old);
            w->old = old;
            if (r == 0) {
                r = guard_render_data(d, tmp, &nd);
                w->data = nd;
                if (r == -EINVAL) { /* narrowed beyond the default policy: a chain now */
                    r = guard_render_session(d, tmp, &c);
                    w->chain = c;
                }
            }
            if (r < 0) {
                snprintf(why, whylen, "cannot render the narrowed rules of session '%s': %s",
                         x->s->row.id, strerror(-r));
                goto out;
            }
            continue;
        }
        r = guard_render_session(d, tmp, &c);
        if (r < 0) {
            snprintf(why, whylen, "cannot render the narrowed rules of session '%s': %s",
                     x->s->row.id, strerror(-r));
            goto out;
        }
        chains[n_chains++] = c;
    }
    for (size_t i = 0; i < gw.n; i++) {
        struct nftr_chain *c = NULL;
        r = guard_render_shared(d, &gw.v[i].g, &gw.v[i].spec, !np->log_allowed_flows, &c);
        if (r < 0) {
            snprintf(why, whylen, "cannot render the narrowed rules of %s: %s", gw.v[i].g.chain,
                     strerror(-r));
            goto out;
        }
        chains[n_chains++] = c;
    }
    if (n_chains + n_swaps > 0) {
        r = nft_chains_replace(d->guard->nft, chains, n_chains, swaps, n_swaps);
        if (r < 0 && n_swaps) {
            /* The transaction changed nothing; most likely a piece of a data
             * session is gone or named by something lyhd did not put there
             * (someone else's doing: ENOENT, EBUSY, EEXIST). The chains
             * alone, then each data session in a transaction of its own; one
             * that still fails ends, what is left of its rules removed: never
             * left with its wider rules. */
            r = n_chains ? nft_chains_replace(d->guard->nft, chains, n_chains, NULL, 0) : 0;
            for (size_t i = 0; r == 0 && i < n; i++) {
                struct narrowed *x = &v[i];
                if (!x->rebuild || x->swap < 0 ||
                    nft_chains_replace(d->guard->nft, NULL, 0, &swaps[x->swap], 1) == 0)
                    continue;
                x->cut = true;
                x->swap = -1;
                snprintf(x->why, sizeof(x->why),
                         "policy: the session's rules were changed by someone else and could "
                         "not be narrowed; session ended");
                if (guard_session_del(d, x->s) == 0)
                    x->s->has_chain = false;
            }
        }
        if (r < 0) {
            snprintf(why, whylen, "nftables refused the narrowed rules (%s): %s",
                     nft_last_error_object(d->guard->nft), strerror(-r));
            goto out;
        }
    }
    /* 3. Memory, the audit, the clients; cut sessions end. */
    for (size_t i = 0; i < gw.n; i++) {
        struct narrowed_guard *x = &gw.v[i];
        char detail[POLICY_WHY_MAX + 128] = "", num[32];
        snprintf(num, sizeof(num), "%" PRIu64, np->version);
        audit_kv(detail, sizeof(detail), "chain", x->g.chain);
        audit_kv(detail, sizeof(detail), "policy_version", num);
        audit_kv(detail, sizeof(detail), "why", x->why);
        audit_note(d, AUDIT_KIND_POLICY, NULL, true, x->g.uid, x->cut ? "cut" : "narrowed", "%s",
                   detail + (detail[0] == ' '));
        log_info("firewall %s of uid %u: %s", x->g.chain, x->g.uid, x->why);
    }
    for (size_t i = 0; i < n; i++) {
        struct narrowed *x = &v[i];
        s = x->s;
        if (x->rebuild && x->swap >= 0) { /* a data session, installed anew */
            const struct nft_data_swap *w = &swaps[x->swap];
            s->data = w->data != NULL;
            free(s->nft_kept);
            s->nft_kept = w->chain ? malloc(sizeof(*s->nft_kept)) : NULL;
            if (s->nft_kept) /* (none kept: the delete asks) */
                nft_session_objs_of(w->chain, s->nft_kept);
        }
        if (x->rebuild) {
            s->spec = x->spec;
            s->accept_unlogged = !np->log_allowed_flows;
            (void)gspec_encode(&s->spec, s->row.guard_spec, sizeof(s->row.guard_spec),
                               &s->row.guard_spec_len);
            audit_session_chain_built(d, s); /* fresh counters from here */
            s->dns_marks_counted = false;     /* and its DNS marks: the teardown walks */
        }
        tell_session(d, x, np->version);
        if (x->cut) {
            cut++;
            if (s->has_cgroup)
                (void)cg_kill(&d->guard->cg, s->row.id);
            kill(-s->pid, SIGKILL);
        }
    }
    *ret_narrowed = n - cut;
    *ret_cut = cut;
    r = 0;
out:
    for (size_t i = 0; i < n_chains; i++)
        nftr_chain_free((struct nftr_chain *)chains[i]);
    for (size_t i = 0; i < n_swaps; i++) {
        nftr_data_free((struct nftr_data *)swaps[i].old);
        nftr_data_free((struct nftr_data *)swaps[i].data);
        nftr_chain_free((struct nftr_chain *)swaps[i].chain);
    }
    free(gw.v);
    return r;
}

/* ---- update ------------------------------------------------------------------------ */

/* The transaction rolled back after the handler succeeded (commit failed):
 * take the policy in force from state.db again. */
static void update_undo(struct rpc_call *call) {
    struct lyhd *d = call->state;
    char why[POLICY_WHY_MAX];

    call->state = NULL;
    if (d && policy_load(d, why, sizeof(why)) < 0)
        log_error("admin policy: cannot reload after a failed commit: %s", why);
    /* the relay was told the lists that were not kept: the ones in force again */
    if (d && dns_fwd_send_policy(d) < 0 && pproc_ready(d))
        log_error("cannot send the admin policy's domains to the protocol process again");
}

void rpc_policy_update(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    const Lianyaohu__V1__PolicyUpdateRequest *u = req->policy_update;
    const struct policy *cur = policy_current(d);
    struct policy *np = calloc(1, sizeof(*np));
    struct store_policy_version old = {0};
    uint8_t *blob = NULL;
    size_t len = 0, narrowed = 0, cut = 0;
    uint64_t version = 0;
    char why[POLICY_WHY_MAX];
    const char *action = u->rollback_to || u->rollback_to_default ? "rollback" : "set";
    int r;

    if (!np) {
        rpc_fail(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    if (u->expect_case == LIANYAOHU__V1__POLICY_UPDATE_REQUEST__EXPECT_EXPECT_VERSION &&
        u->expect_version != cur->version) {
        rpc_fail(call, LIANYAOHU__V1__CODE__ABORTED,
                 "policy: expect_version is %" PRIu64 " but the current version is %" PRIu64
                 "; nothing was changed (read it again with PolicyGet)",
                 u->expect_version, cur->version);
        goto out;
    }
    if ((u->policy != NULL) + (u->rollback_to != 0) + u->rollback_to_default > 1) {
        rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                 "policy: give one of policy, rollback_to and rollback_to_default");
        goto out;
    }
    if (u->rollback_to_default) {
        policy_default(np);
    } else if (u->rollback_to) {
        r = store_policy_get(d->store, u->rollback_to, &old);
        if (r == -ENOENT) {
            rpc_fail(call, LIANYAOHU__V1__CODE__NOT_FOUND,
                     "rollback_to: there is no stored policy version %" PRIu64, u->rollback_to);
            goto out;
        }
        if (r < 0) {
            rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "state.db: %s", store_errmsg(d->store));
            goto out;
        }
        r = policy_unpack(old.blob, old.blob_len, np, why, sizeof(why));
        if (r < 0) {
            rpc_fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                     "rollback_to: stored version %" PRIu64 " is not valid any more: %s",
                     u->rollback_to, why);
            goto out;
        }
    } else {
        if (!u->policy) {
            rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                     "policy: missing (give policy, rollback_to a stored version, or "
                     "rollback_to_default)");
            goto out;
        }
        r = policy_from_msg(u->policy, np, why, sizeof(why));
        if (r < 0) {
            rpc_fail(call, r == -ENOMEM ? LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED
                                        : LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                     "policy: %s", r == -ENOMEM ? "out of memory" : why);
            goto out;
        }
    }
    r = policy_pack(np, &blob, &len);
    /* The content in force already (a config-management run that finds
     * nothing to do): no new version, nothing narrowed, said so. */
    if (r == 0) {
        _cleanup_free_ uint8_t *cur_blob = NULL;
        size_t cur_len = 0;
        r = policy_pack(cur, &cur_blob, &cur_len);
        if (r == 0 && cur_len == len && memcmp(cur_blob, blob, len) == 0) {
            log_info("policy %s by uid %u: the content of version %" PRIu64
                     " is in force already; nothing changed",
                     action, call->peer.uid, cur->version);
            send_policy(call, cur, true, true);
            goto out;
        }
    }
    /* A dry run: what it would do to running sessions, and nothing else. */
    if (r == 0 && u->dry_run) {
        _cleanup_free_ struct effects *fx = calloc(1, sizeof(*fx));
        size_t nn = 0, nc = 0;
        r = fx ? narrow_sessions(d, np, fx, &nn, &nc, why, sizeof(why)) : -ENOMEM;
        if (r < 0) {
            rpc_fail(call, r == -ENOMEM ? LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED
                                        : LIANYAOHU__V1__CODE__UNAVAILABLE,
                     "policy: %s", r == -ENOMEM ? "out of memory" : why);
            goto out;
        }
        np->version = cur->version;
        send_policy_fx(call, np, false, fx, true);
        goto out;
    }
    if (r == 0)
        r = store_policy_append(d->store, blob, len, call->peer.uid, lyhd_wall_ms(), &version);
    if (r < 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "state.db: %s",
                 r == -ENOMEM ? "out of memory" : store_errmsg(d->store));
        goto out;
    }
    np->version = version;
    np->set_by_uid = call->peer.uid;
    np->set_ms = lyhd_wall_ms();
    r = narrow_sessions(d, np, NULL, &narrowed, &cut, why, sizeof(why));
    if (r < 0) {
        log_error("policy version %" PRIu64 " not applied: %s", version, why);
        rpc_fail(call, r == -ENOMEM ? LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED
                                    : LIANYAOHU__V1__CODE__UNAVAILABLE,
                 "policy: running sessions could not be narrowed (%s); nothing was changed", why);
        goto out;
    }
    {
        char detail[256];
        int k = snprintf(detail, sizeof(detail),
                         "old_version=%" PRIu64 " new_version=%" PRIu64 " by_uid=%u", cur->version,
                         version, call->peer.uid);
        if (u->rollback_to && k > 0 && (size_t)k < sizeof(detail))
            k += snprintf(detail + k, sizeof(detail) - (size_t)k, " rollback_to=%" PRIu64,
                          u->rollback_to);
        else if (u->rollback_to_default && k > 0 && (size_t)k < sizeof(detail))
            k += snprintf(detail + k, sizeof(detail) - (size_t)k, " rollback_to=default");
        if (k > 0 && (size_t)k < sizeof(detail))
            snprintf(detail + k, sizeof(detail) - (size_t)k, " narrowed=%zu cut=%zu", narrowed, cut);
        /* who, beyond the uid: the connecting process and the name it had
         * when it connected ("sshd" through a forward; conn.c) */
        char num[24];
        snprintf(num, sizeof(num), "%d", (int)call->peer.pid);
        audit_kv(detail, sizeof(detail), "by_pid", num);
        audit_kv(detail, sizeof(detail), "by_proc", call->peer_label[0] ? call->peer_label : "?");
        audit_note(d, AUDIT_KIND_POLICY, NULL, true, call->peer.uid, action, "%s", detail);
    }
    log_info("policy version %" PRIu64 " (%s by uid %u, was %" PRIu64 "): %zu session(s) narrowed, "
             "%zu cut",
             version, action, call->peer.uid, cur->version, narrowed, cut);
    free(d->policy);
    d->policy = TAKE_PTR(np);
    /* Names the policy no longer lets a session resolve: what only they
     * opened leaves the sessions' sets now (new flows to it are refused). */
    {
        struct session *s;
        size_t gone = 0;
        TAILQ_FOREACH(s, &d->sessions, link)
            gone += dns_fwd_policy_changed(s->dns);
        if (gone)
            log_info("policy version %" PRIu64 ": %zu address(es) left sessions' domain sets",
                     version, gone);
        /* the relays' own check of names follows the new lists (the parent
         * checks an allowlisted answer again anyway) */
        int k = dns_fwd_send_policy(d);
        if (k < 0 && k != -ENOTCONN)
            log_error("policy version %" PRIu64 ": cannot tell the protocol process: %s",
                      version, strerror(-k));
    }
    call->state = d;
    call->on_disconnect = update_undo;
    send_policy(call, d->policy, false, true);
    /* Finished: the hook is only for the dispatcher's failed commit. */
out:
    free(blob);
    store_policy_version_free(&old);
    free(np);
}
