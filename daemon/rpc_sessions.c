/* Sessions: stream the live sessions, one per response. A user sees their
 * own; an admin sees all. */
#include <string.h>

#include "daemon/lyhd.h"
#include "daemon/rpc.h"
#include "daemon/session.h"

void rpc_sessions(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    struct session *s;

    TAILQ_FOREACH(s, &d->sessions, link) {
        Lianyaohu__V1__SessionInfo info = LIANYAOHU__V1__SESSION_INFO__INIT;
        Lianyaohu__V1__SessionsReply rep = LIANYAOHU__V1__SESSIONS_REPLY__INIT;
        LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;

        if (!call->peer_is_admin && s->row.uid != call->peer.uid)
            continue;
        if (s->row.state >= STORE_SESSION_ENDING)
            continue;
        info.id = s->row.id;
        info.uid = s->row.uid;
        info.pid = (uint64_t)(s->pid > 0 ? s->pid : 0);
        info.interface = s->row.interface;
        info.scope = s->row.scope;
        info.started_unix_ms = (uint64_t)s->row.started_ms;
        info.argv0 = s->row.argv0;
        info.cwd = s->row.cwd;
        rep.session = &info;
        resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_SESSIONS;
        resp.sessions = &rep;
        rpc_send(call, &resp, false);
    }
    LyhResponse end = LIANYAOHU__V1__RESPONSE__INIT;
    rpc_send(call, &end, true);
}
