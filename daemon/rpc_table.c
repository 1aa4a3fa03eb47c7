/* The RPC table: which methods exist, who may call them, and what the
 * dispatcher must wrap around them. This table is the authorization policy;
 * handlers never re-check the caller themselves.
 *
 * Every row has a handler (rpc_table_verify refuses to start otherwise); a
 * method the table does not know (a newer client's) answers UNIMPLEMENTED. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "daemon/audit.h"
#include "daemon/closer.h"
#include "daemon/log.h"
#include "daemon/lyhd.h"
#include "daemon/rpc.h"
#include "storage/store.h"

#define M(x) LIANYAOHU__V1__REQUEST__METHOD_##x

static const struct rpc_method rpc_methods[] = {
    {M(CAPABILITIES), "Capabilities", RPC_QUERY, rpc_capabilities, NULL},
    {M(STATUS), "Status", RPC_QUERY, rpc_status, NULL},
    {M(SESSIONS), "Sessions", RPC_STREAMING | RPC_QUERY, rpc_sessions, NULL},
    /* Run is not RPC_MUTATES: its state.db rows must be committed before each
     * kernel change they describe, so it runs several transactions itself. */
    {M(RUN), "Run", RPC_STREAMING, rpc_run, NULL},
    {M(SIGNAL), "Signal", RPC_OWNER, rpc_signal, rpc_signal_owner},
    /* Like Run, Install and Uninstall commit each row before the kernel change. */
    {M(INSTALL), "Install", 0, rpc_install, NULL},
    {M(UNINSTALL), "Uninstall", 0, rpc_uninstall, NULL},
    /* Everyone may query; the handlers narrow a non-admin to their own uid
     * (a filter, not an ownership check of one object). */
    {M(AUDIT_QUERY), "AuditQuery", RPC_STREAMING | RPC_QUERY, rpc_audit_query, NULL},
    {M(AUDIT_FOLLOW), "AuditFollow", RPC_STREAMING | RPC_QUERY, rpc_audit_follow, NULL},
    /* Everyone may read the policy (it says what they may ask for); only an
     * admin changes it, in one transaction with the narrowed sessions. */
    {M(POLICY_GET), "PolicyGet", RPC_QUERY, rpc_policy_get, NULL},
    {M(POLICY_UPDATE), "PolicyUpdate", RPC_ADMIN | RPC_MUTATES, rpc_policy_update, NULL},
    {M(POLICY_HISTORY), "PolicyHistory", RPC_STREAMING | RPC_QUERY, rpc_policy_history, NULL},
    {M(CANCEL), "Cancel", 0, rpc_cancel, NULL},
};

static const struct rpc_method *lookup_in(const struct rpc_method *table, size_t n,
                                          uint32_t method) {
    for (size_t i = 0; i < n; i++)
        if (table[i].method == method)
            return &table[i];
    return NULL;
}

const struct rpc_method *rpc_lookup(uint32_t method) {
    return lookup_in(rpc_methods, ARRAY_SIZE(rpc_methods), method);
}

void rpc_call_free(struct rpc_call *call) {
    if (!call)
        return;
    for (unsigned i = 0; i < call->n_fds; i++)
        closer_close(call->closer, call->peer.uid, TAKE_FD(call->fds[i]));
    free(call->held);
    free(call);
}

int rpc_take_fd(struct rpc_call *call, unsigned i) {
    if (i >= call->n_fds)
        return -1;
    return TAKE_FD(call->fds[i]);
}

/* The last resort when memory is short: a small error answer encoded on the
 * stack, so the client always hears something (conn_send_frame closes the
 * connection if even that cannot be queued). */
static void emit_bare_error(struct rpc_call *call, int code, const char *msg) {
    LyhResponse err = LIANYAOHU__V1__RESPONSE__INIT;
    uint8_t buf[512];
    size_t len = 0;

    err.call_id = call->call_id;
    err.code = code;
    err.message = (char *)msg;
    err.end_of_stream = true;
    call->finished = true;
    call->final_code = code;
    if (call->conn && wire_response_frame_into(&err, buf, sizeof(buf), &len) == 0) {
        call->in_emit = true;
        (void)conn_send_frame(call->conn, buf, len);
        call->in_emit = false;
    }
}

/* Queue one response of the call. While a mutating call is being dispatched
 * its responses are held (packed, in order) until the transaction commits; a
 * held answer that cannot be kept marks the call (held_lost) and the
 * dispatcher undoes the change and says so. A response that cannot be framed
 * becomes an error, so the client is never left waiting for an answer that
 * was dropped. */
static void emit(struct rpc_call *call, LyhResponse *resp) {
    uint8_t *frame = NULL;
    size_t len = 0;
    int r = wire_response_frame(resp, &frame, &len);

    if (r == -ENOMEM) {
        log_error("out of memory answering %s to uid %u", call->row ? call->row->name : "call",
                  call->peer.uid);
        if (call->hold_final) {
            call->held_lost = true;
            return;
        }
        emit_bare_error(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                        "lyhd ran out of memory while answering; try again");
        return;
    }
    if (r < 0) {
        log_error("response of %s to uid %u could not be framed: %s",
                  call->row ? call->row->name : "call", call->peer.uid, strerror(-r));
        if (call->hold_final) {
            call->held_lost = true;
            return;
        }
        emit_bare_error(call, LIANYAOHU__V1__CODE__INTERNAL,
                        "the daemon could not encode its answer (too large); this is a bug");
        return;
    }
    if (call->hold_final) {
        uint8_t *n = realloc(call->held, call->held_len + len);
        if (!n) {
            log_error("out of memory holding the answer of %s to uid %u",
                      call->row ? call->row->name : "call", call->peer.uid);
            call->held_lost = true;
        } else {
            memcpy(n + call->held_len, frame, len);
            call->held = n;
            call->held_len += len;
        }
        free(frame);
        return;
    }
    if (call->conn) {
        /* A failed write closes the connection at once, which would free the
         * call under our feet: it is freed by release_orphan() instead. */
        call->in_emit = true;
        (void)conn_send_frame(call->conn, frame, len);
        call->in_emit = false;
    }
    free(frame);
}

/* The connection closed while a response was being written: the call is off
 * its list and its owner heard on_disconnect; free it now unless dispatch
 * (which frees it itself) is still running. True when the call is gone. */
static bool release_orphan(struct rpc_call *call) {
    if (call->conn || call->in_dispatch)
        return false;
    rpc_call_free(call);
    return true;
}

static void send_final(struct rpc_call *call, LyhResponse *resp) {
    call->finished = true;
    call->final_code = (int)resp->code;
    emit(call, resp);
    if (release_orphan(call))
        return;
    if (!call->hold_final)
        conn_call_done(call);
}

void rpc_send(struct rpc_call *call, LyhResponse *resp, bool end) {
    if (call->finished)
        return;
    resp->call_id = call->call_id;
    resp->code = LIANYAOHU__V1__CODE__OK;
    resp->end_of_stream = end;
    if (end) {
        send_final(call, resp);
        return;
    }
    emit(call, resp);
    (void)release_orphan(call);
}

void rpc_fail(struct rpc_call *call, int code, const char *fmt, ...) {
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
    char msg[1024];
    va_list ap;

    if (call->finished)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    resp.call_id = call->call_id;
    resp.code = code;
    resp.message = msg;
    resp.end_of_stream = true;
    /* refusals, and a policy update that lost a race (ABORTED: who tried to
     * change the policy is on record even when nothing changed) */
    if (code == LIANYAOHU__V1__CODE__PERMISSION_DENIED || code == LIANYAOHU__V1__CODE__INVALID_ARGUMENT ||
        (code == LIANYAOHU__V1__CODE__ABORTED &&
         call->method == LIANYAOHU__V1__REQUEST__METHOD_POLICY_UPDATE)) {
        /* The log line is held to the audit's per-user limits too: a flood of
         * bad requests must not flood the log either (what the limits drop is
         * counted in the audit's gap records). */
        struct lyhd *d = call->conn ? conn_lyhd(call->conn) : NULL;
        if (!d || !d->audit ||
            audit_request(d, call->peer.uid, call->peer.pid, call->peer_label,
                          call->row ? call->row->name : NULL,
                          code, "refused", msg))
            log_info("refused %s from uid %u pid %d: %s", call->row ? call->row->name : "request",
                     call->peer.uid, call->peer.pid, msg);
    }
    send_final(call, &resp);
}

/* A unary handler must have answered by the time it returns: a broken
 * internal invariant, but the client still gets an answer. */
static void check_unary(const struct rpc_method *m, struct rpc_call *call) {
    if (!(m->flags & RPC_STREAMING) && !call->finished) {
        log_error("handler of %s returned without answering; this is a bug", m->name);
        rpc_fail(call, LIANYAOHU__V1__CODE__INTERNAL, "%s did not answer; this is a bug", m->name);
    }
}

/* A mutating call whose transaction was rolled back after its handler ran:
 * drop what it held, let a started stream undo itself, answer with code. */
static void abandon(struct rpc_call *call, int code, const char *msg) {
    free(call->held);
    call->held = NULL;
    call->held_len = 0;
    call->held_lost = false;
    call->finished = false;
    if (call->on_disconnect) /* undo what the handler changed outside state.db */
        call->on_disconnect(call);
    call->on_disconnect = NULL;
    /* When even this answer cannot be framed, emit falls back to a bare one
     * built on the stack. */
    rpc_fail(call, code, "%s", msg);
}

void rpc_dispatch(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    rpc_dispatch_in(rpc_methods, ARRAY_SIZE(rpc_methods), d, call, req);
}

void rpc_dispatch_in(const struct rpc_method *table, size_t n, struct lyhd *d,
                     struct rpc_call *call, const LyhRequest *req) {
    const struct rpc_method *m = lookup_in(table, n, req->method_case);
    int r;

    if (!m) {
        rpc_fail(call, LIANYAOHU__V1__CODE__UNIMPLEMENTED, "method %u is not implemented by lyhd %s",
                 req->method_case, LYH_VERSION);
        return;
    }
    call->row = m;
    if ((m->flags & RPC_ADMIN) && !call->peer_is_admin) {
        rpc_fail(call, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                 "%s needs root or membership in the admin group%s%s", m->name,
                 d->cfg.admin_group ? " " : "", d->cfg.admin_group ? d->cfg.admin_group : "");
        return;
    }
    if ((m->flags & RPC_OWNER) && !call->peer_is_admin) {
        uid_t owner;
        r = m->owner_of(d, req, &owner);
        if (r == -ENOENT) {
            rpc_fail(call, LIANYAOHU__V1__CODE__NOT_FOUND, "%s: no such object", m->name);
            return;
        }
        if (r < 0 || owner != call->peer.uid) {
            rpc_fail(call, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                     "%s: the object belongs to another user", m->name);
            return;
        }
    }
    if (m->flags & RPC_MUTATES) {
        r = store_begin(d->store);
        if (r < 0) {
            rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "state.db: %s",
                     store_errmsg(d->store));
            return;
        }
        call->hold_final = true;
        m->handler(d, call, req);
        call->hold_final = false;
        /* The synchronous part of a mutating request is one transaction: kept
         * when the call succeeded or is still going (a stream), else undone.
         * The final answer leaves only after the commit. An answer that could
         * not be held undoes the change too: a client must never miss the
         * result of a change that stays. */
        if (call->held_lost) {
            store_rollback(d->store);
            abandon(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                    "lyhd ran out of memory while answering; nothing was changed");
            return;
        }
        if (!call->finished || call->final_code == LIANYAOHU__V1__CODE__OK) {
            r = store_commit(d->store);
            if (r < 0) {
                log_error("state.db commit for %s failed: %s", m->name, store_errmsg(d->store));
                store_rollback(d->store);
                abandon(call, LIANYAOHU__V1__CODE__UNAVAILABLE,
                        "could not record the change in state.db; nothing was changed");
                return;
            }
        } else {
            store_rollback(d->store);
        }
        if (call->held && call->conn)
            (void)conn_send_frame(call->conn, call->held, call->held_len);
        free(call->held);
        call->held = NULL;
        call->held_len = 0;
        check_unary(m, call);
        return;
    }
    m->handler(d, call, req);
    check_unary(m, call);
}

bool rpc_table_verify_in(const struct rpc_method *table, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const struct rpc_method *m = &table[i];
        if (!m->handler || ((m->flags & RPC_OWNER) && !m->owner_of) ||
            lookup_in(table, n, m->method) != m)
            return false; /* no handler, no owner check, or a method twice */
        if ((m->flags & RPC_QUERY) && (m->flags & (RPC_MUTATES | RPC_OWNER)))
            return false; /* a query that acts */
    }
    return true;
}

bool rpc_table_verify(void) {
    return rpc_table_verify_in(rpc_methods, ARRAY_SIZE(rpc_methods));
}
