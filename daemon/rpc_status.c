/* Status: uptime, connection counts, sessions, guards, audit.db size and
 * retention. Answers anyone; an admin sees every user's counts and guards,
 * anyone else only their own (own_only): how many sessions and connections
 * other users have, or how fast audit.db grows, is their business. */
#include <stdio.h>
#include <unistd.h>

#include "daemon/audit.h"
#include "daemon/guard.h"
#include "daemon/lyhd.h"
#include "daemon/rpc.h"
#include "daemon/server.h"
#include "daemon/session.h"
#include "storage/store.h"

/* The client library holds at most this many (proto/lianyaohu.options). */
#define STATUS_MAX_GUARDS 64

struct shared_walk {
    struct rpc_call *call;
    Lianyaohu__V1__GuardInfo *gi;
    Lianyaohu__V1__GuardInfo **gp;
    size_t n;
    struct store_guard rows[STATUS_MAX_GUARDS];
};

/* The shared-user guards from state.db (session guards come from the list). */
static int add_shared(const struct store_guard *g, void *userdata) {
    struct shared_walk *w = userdata;
    struct store_guard *row;

    if (w->n >= STATUS_MAX_GUARDS)
        return 1;
    if (g->scope == LIANYAOHU__V1__SCOPE__SCOPE_SESSION ||
        (!w->call->peer_is_admin && g->uid != w->call->peer.uid))
        return 0;
    row = &w->rows[w->n];
    *row = *g;
    lianyaohu__v1__guard_info__init(&w->gi[w->n]);
    w->gi[w->n].uid = row->uid;
    w->gi[w->n].scope = row->scope;
    w->gi[w->n].interface = row->interface;
    w->gi[w->n].refcount = row->refcount;
    w->gi[w->n].chain = row->chain;
    w->gp[w->n] = &w->gi[w->n];
    w->n++;
    return 0;
}

void rpc_status(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    Lianyaohu__V1__StatusReply st = LIANYAOHU__V1__STATUS_REPLY__INIT;
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
    uint32_t live = 0;
    bool all = call->peer_is_admin;

    if (store_session_count_live(d->store, call->peer.uid, all, &live) < 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "state.db: %s", store_errmsg(d->store));
        return;
    }
    st.uptime_ms = lyhd_mono_ms() - d->start_mono_ms;
    st.connections_of_caller = server_conn_count_uid(d->server, call->peer.uid);
    st.connections = all ? server_conn_count(d->server) : st.connections_of_caller;
    st.sessions = live;
    st.own_only = !all;
    /* Guards of the sessions the caller may see (an admin sees all), at most
     * what a client can hold; the count above is the total. */
    Lianyaohu__V1__GuardInfo gi[STATUS_MAX_GUARDS], *gp[STATUS_MAX_GUARDS];
    char dchain[STATUS_MAX_GUARDS][NFTR_NAME_MAX + 8]; /* a data session: its d-<id> */
    struct session *s;
    size_t n = 0;
    TAILQ_FOREACH(s, &d->sessions, link) {
        if (n >= STATUS_MAX_GUARDS)
            break;
        if (!s->has_chain || (!call->peer_is_admin && s->row.uid != call->peer.uid))
            continue;
        lianyaohu__v1__guard_info__init(&gi[n]);
        gi[n].uid = s->row.uid;
        gi[n].scope = s->row.scope;
        gi[n].interface = s->row.interface;
        gi[n].refcount = 1;
        gi[n].chain = s->row.chain;
        if (s->data) {
            snprintf(dchain[n], sizeof(dchain[n]), NFTR_DLOG_CHAIN_PREFIX "%s", s->row.id);
            gi[n].chain = dchain[n];
        }
        gp[n] = &gi[n];
        n++;
    }
    struct shared_walk w = {.call = call, .gi = gi, .gp = gp, .n = n};
    (void)store_guard_foreach(d->store, add_shared, &w);
    n = w.n;
    st.n_guards = n;
    st.guards = gp;
    st.pid = (uint64_t)getpid();
    st.state_dir = (char *)d->cfg.state_dir;
    /* audit.db's size is advisory here: a failed read leaves it 0. */
    uint64_t audit_db_bytes = 0;
    unsigned retention_days = 0;
    if (all && audit_bytes(d, &audit_db_bytes) == 0)
        st.audit_db_bytes = audit_db_bytes;
    audit_retention(d, &retention_days, &st.audit_max_bytes);
    st.audit_flow_rate = audit_flow_rate(d);
    st.audit_retention_days = retention_days;
    /* what would make every launch fail (no secret: the path is lyhd's) */
    char problem[sizeof(d->guard->probe_problem)];
    guard_launch_probe(d, problem, sizeof(problem));
    st.launch_problem = problem;
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_STATUS;
    resp.status = &st;
    rpc_send(call, &resp, true);
}
