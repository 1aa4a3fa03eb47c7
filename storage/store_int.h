/* Private to storage/: the struct store layout and the helpers store.c and
 * migrate.c share. Nothing outside storage/ includes this. */
#ifndef LYH_STORE_INT_H
#define LYH_STORE_INT_H

#include <limits.h>
#include <sqlite3.h>

#include "common/macros.h"
#include "storage/store.h"

/* The cached statements, prepared once at open (after the migrations, so they
 * compile against the current schema) and finalized on close. */
enum store_stmt {
    STMT_BEGIN,
    STMT_COMMIT,
    STMT_ROLLBACK,
    STMT_SESSION_INSERT,
    STMT_SESSION_UPDATE,
    STMT_SESSION_GET,
    STMT_SESSION_LIVE,
    STMT_SESSION_COUNT_LIVE_ALL,
    STMT_SESSION_COUNT_LIVE_UID,
    STMT_SESSION_PRUNE,
    STMT_GUARD_GET,
    STMT_GUARD_GET_BY_CHAIN,
    STMT_GUARD_PUT,
    STMT_GUARD_DELETE,
    STMT_GUARD_ALL,
    STMT_REAP_LOG,
    STMT_POLICY_CURRENT,
    STMT_POLICY_GET,
    STMT_POLICY_APPEND,
    STMT_POLICY_LIST,
    STMT_META_GET,
    STMT_META_SET,
    STMT_GGID_GET,
    STMT_GGID_SET,
    STMT_GGID_FREE,
    STMT__MAX,
};

struct store {
    sqlite3 *db;                    /* owned */
    sqlite3_stmt *stmt[STMT__MAX];  /* owned, NULL until prepared */
    char path[PATH_MAX];            /* DIR/state.db, for messages and sqlite */
    char err[STORE_ERR_MAX];
    int last_rc;                    /* sqlite code of the last store_sql_fail */
};

/* sqlite result code (extended or primary) -> -errno. */
int store_errno(int rc);
/* Format s->err and return r (a -errno). */
int store_errf(struct store *s, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* s->err = "PATH: WHAT: sqlite message" (WHAT formatted from fmt), with what to
 * do for a locked or corrupt file; returns store_errno(rc). */
int store_sql_fail(struct store *s, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Run constant SQL (one or more statements, no values) to completion. */
int store_exec(struct store *s, const char *sql, const char *what);
/* Run a constant single-row, single-integer query (a PRAGMA read). */
int store_query_int(struct store *s, const char *sql, int64_t *ret);

/* Cleanup helpers for statements: cached ones are reset (and their bindings,
 * which may point into caller memory, cleared); ad-hoc ones finalized. */
static inline void store_stmt_resetp(sqlite3_stmt **p) {
    if (*p) {
        (void)sqlite3_reset(*p);
        (void)sqlite3_clear_bindings(*p);
    }
}
static inline void store_stmt_finalizep(sqlite3_stmt **p) {
    (void)sqlite3_finalize(*p); /* accepts NULL */
}
#define _cleanup_reset_ _cleanup_(store_stmt_resetp)
#define _cleanup_finalize_ _cleanup_(store_stmt_finalizep)

/* migrate.c: -EPROTO for a schema newer than this build (with the message
 * that says to upgrade), -EBADMSG for a nonsensical one, else 0. */
int store_check_version(struct store *s, int64_t version);

/* migrate.c: bring the schema to STORE_SCHEMA_VERSION in one BEGIN IMMEDIATE
 * transaction; refuses a newer schema (-EPROTO) or another application's
 * database (-EBADMSG). */
int store_migrate(struct store *s);

/* store.c: the message (into buf) for sqlite failure rc at path while doing
 * what, with what to do for a locked or corrupt file; after_restart ends the
 * "restart lyhd" advice. Returns the -errno for rc. Shared by both databases. */
int storage_sql_message(char *buf, size_t len, int rc, const char *msg, const char *path,
                        const char *what, int busy_ms, const char *after_restart);

#include "storage/dircheck.h"

#endif
