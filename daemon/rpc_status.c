/* Status: uptime, connection counts, sessions and guards. Answers anyone; a
 * caller sees the counts, not other users' details. */
#include <unistd.h>

#include "daemon/lyhd.h"
#include "daemon/rpc.h"
#include "daemon/server.h"
#include "storage/store.h"

void rpc_status(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    Lianyaohu__V1__StatusReply st = LIANYAOHU__V1__STATUS_REPLY__INIT;
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
    uint32_t live = 0;

    if (store_session_count_live(d->store, 0, true, &live) < 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "state.db: %s", store_errmsg(d->store));
        return;
    }
    st.uptime_ms = lyhd_mono_ms() - d->start_mono_ms;
    st.connections = server_conn_count(d->server);
    st.connections_of_caller = server_conn_count_uid(d->server, call->peer.uid);
    st.sessions = live;
    st.pid = (uint64_t)getpid();
    st.state_dir = (char *)d->cfg.state_dir;
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_STATUS;
    resp.status = &st;
    rpc_send(call, &resp, true);
}
