/* Cancel: end a streaming call of the same connection. */
#include "daemon/lyhd.h"
#include "daemon/rpc.h"

void rpc_cancel(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
    Lianyaohu__V1__CancelReply rep = LIANYAOHU__V1__CANCEL_REPLY__INIT;
    struct rpc_call *target = conn_find_call(call->conn, req->cancel->call_id);

    if (!target || target == call) {
        rpc_fail(call, LIANYAOHU__V1__CODE__NOT_FOUND, "no call %llu in flight on this connection",
                 (unsigned long long)req->cancel->call_id);
        return;
    }
    if (target->on_disconnect)
        target->on_disconnect(target);
    target->on_disconnect = NULL;
    rpc_fail(target, LIANYAOHU__V1__CODE__CANCELLED, "cancelled by the client");
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_CANCEL;
    resp.cancel = &rep;
    rpc_send(call, &resp, true);
}
