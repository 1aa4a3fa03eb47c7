/* Private to storage/: the struct store layout and the helpers store.c and
 * migrate.c share (the sqlite plumbing both databases share is sqlite_util.h).
 * Nothing outside storage/ includes this. */
#ifndef LYH_STORE_INT_H
#define LYH_STORE_INT_H

#include <limits.h>
#include <sqlite3.h>

#include "common/macros.h"
#include "storage/sqlite_util.h"
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
    STMT_SESSION_PREFIX,
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
    struct sqlu sq;                 /* path (DIR/state.db), err, last sqlite code */
};

_Static_assert(STORE_ERR_MAX == SQLU_ERR_MAX, "store_errmsg is struct sqlu's err");

/* migrate.c: PRAGMA user_version, refused with -EPROTO when newer than this
 * build (with the message that says to upgrade) or -EBADMSG when nonsensical. */
int store_read_version(struct store *s, int64_t *ret);

/* migrate.c: bring the schema to STORE_SCHEMA_VERSION in one BEGIN IMMEDIATE
 * transaction; refuses a newer schema (-EPROTO) or another application's
 * database (-EBADMSG). */
int store_migrate(struct store *s);

#include "storage/dircheck.h"

#endif
