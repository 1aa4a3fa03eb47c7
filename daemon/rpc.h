/* The RPC table and dispatcher. The table in rpc_table.c is the authorization
 * policy: one row per method with its flags; the dispatcher enforces them and
 * handlers never re-check the caller ad hoc. */
#ifndef LYHD_RPC_H
#define LYHD_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/conn.h"
#include "daemon/wire.h"

struct lyhd;

enum rpc_flags {
    RPC_ADMIN = 1u << 0,     /* root or a member of --admin-group */
    RPC_OWNER = 1u << 1,     /* the caller owns the object (owner_of), or is admin */
    RPC_MUTATES = 1u << 2,   /* runs inside one state.db transaction */
    RPC_STREAMING = 1u << 3, /* may answer with several responses */
    /* Only reads, as its caller may. Never with RPC_MUTATES or RPC_OWNER
     * (rpc_table_verify). (Until 2026-12-08 the parent did not ask the
     * kernel whether a query's client had gone; it does for every request
     * now: a compromised protocol process could otherwise read as root after
     * root left, conn.c.) */
    RPC_QUERY = 1u << 4,
};

/* A handler answers with rpc_send()/rpc_fail(), now or later (streaming). */
typedef void (*rpc_handler_fn)(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
/* For RPC_OWNER rows: who owns the object the request names. -ENOENT when the
 * object does not exist (answered NOT_FOUND). */
typedef int (*rpc_owner_fn)(struct lyhd *d, const LyhRequest *req, uid_t *ret_owner);

struct rpc_method {
    uint32_t method; /* Request.method case */
    const char *name;
    unsigned flags;
    rpc_handler_fn handler; /* every row has one (rpc_table_verify) */
    rpc_owner_fn owner_of;
};

const struct rpc_method *rpc_lookup(uint32_t method);
/* Startup self-check of the table: every row has a handler, every
 * owner-only row can name its owner, no method has two rows. False means a
 * build bug: lyhd refuses to start. */
bool rpc_table_verify(void);
/* Enforce the row's flags, then run its handler. Unary handlers must have
 * answered by the time they return. */
void rpc_dispatch(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
/* The same over any table of n rows (tests: a fake one; lyhd uses only its
 * own through the two above). */
bool rpc_table_verify_in(const struct rpc_method *table, size_t n);
void rpc_dispatch_in(const struct rpc_method *table, size_t n, struct lyhd *d,
                     struct rpc_call *call, const LyhRequest *req);

/* Send one response of this call; end = last one (the call is then finished
 * and, outside dispatch, freed). When the write fails the connection closes at
 * once: the call's on_disconnect runs and, outside dispatch, the call is freed
 * before rpc_send returns, so a caller that is not told by on_disconnect must
 * not touch the call afterwards. The response's call_id, code (OK) and
 * end_of_stream are filled in here. */
void rpc_send(struct rpc_call *call, LyhResponse *resp, bool end);
/* Finish the call with an error status and message. */
void rpc_fail(struct rpc_call *call, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Take ownership of the i-th fd that came with the request (-1 if none). */
int rpc_take_fd(struct rpc_call *call, unsigned i);
/* Free a finished or orphaned call, closing fds not taken. */
void rpc_call_free(struct rpc_call *call);

/* Handlers (one file each). */
void rpc_capabilities(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
void rpc_status(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
void rpc_cancel(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
void rpc_install(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
void rpc_uninstall(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
void rpc_run(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
void rpc_sessions(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
void rpc_signal(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
void rpc_audit_query(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
void rpc_audit_follow(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
void rpc_policy_get(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
void rpc_policy_update(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
void rpc_policy_history(struct lyhd *d, struct rpc_call *call, const LyhRequest *req);
int rpc_signal_owner(struct lyhd *d, const LyhRequest *req, uid_t *ret_owner);

#endif
