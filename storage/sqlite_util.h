/* Private to storage/: the sqlite plumbing state.db (store.c, migrate.c) and
 * audit.db (audit_db.c) share: opening a connection with the same flags and
 * checks, the sqlite-code-to-errno mapping and the messages that go with it,
 * constant SQL, statement tables, reading rows and columns with their length
 * checks, and numbered migrations in one transaction.
 *
 * Contract as in store.h: 0 or -errno, ret_* set only on success, no logging.
 * A function that takes a struct sqlu fills c->err on failure (unless it says
 * otherwise). Nothing outside storage/ includes this. */
#ifndef LYH_STORAGE_SQLITE_UTIL_H
#define LYH_STORAGE_SQLITE_UTIL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sqlite3.h>

#include "common/macros.h"

#define SQLU_ERR_MAX 512

/* What one database keeps for its messages. Embedded in struct store and
 * struct audit_db. */
struct sqlu {
    char path[PATH_MAX];        /* the database file, for messages and sqlite */
    char err[SQLU_ERR_MAX];     /* the message of the last failure */
    int last_rc;                /* sqlite code of the last sqlu_fail */
    int busy_ms;                /* busy timeout sqlu_open sets; named in "locked" messages */
    const char *after_restart;  /* ends the "restart lyhd" advice for a corrupt file */
};

/* ---- errors ---- */

/* sqlite result code (extended or primary) -> -errno. */
int sqlu_errno(int rc);
/* Format c->err and return r (a -errno). */
int sqlu_errf(struct sqlu *c, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* c->err = "PATH: WHAT: sqlite message" (WHAT formatted from fmt; the message
 * is conn's, or rc's when conn is NULL), with what to do for a locked or
 * corrupt file; sets c->last_rc; returns sqlu_errno(rc). */
int sqlu_fail(struct sqlu *c, sqlite3 *conn, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* -EBADMSG with "PATH is corrupt (DETAIL); move it away ... and restart lyhd". */
int sqlu_corrupt(struct sqlu *c, const char *detail);

/* ---- connections ---- */

/* Once per process, before its first connection: no global allocation
 * statistics (sqlite otherwise takes a process-wide mutex around every
 * allocation to keep them; nothing of ours reads them). Harmless when too
 * late. */
void sqlu_process_init(void);

/* Set c's busy timeout and message ending (c->path is the caller's to set),
 * and check the sqlite library: -ENOTSUP when older than 3.37. */
int sqlu_init(struct sqlu *c, int busy_ms, const char *after_restart);

/* Open c->path (which must exist: no SQLITE_OPEN_CREATE; never through a
 * symlink), read-write or read-only, with c->busy_ms as the busy timeout and
 * the defensive settings (DEFENSIVE on, TRUSTED_SCHEMA and double-quoted
 * strings off), each checked to have taken. what names the open in messages;
 * dir_label ("state dir") the directory a symlink message points at. Sets no
 * PRAGMA: each database sets its own. On failure *ret may hold a connection
 * the caller closes (as it does on success). */
int sqlu_open(struct sqlu *c, sqlite3 **ret, bool readonly, const char *what,
              const char *dir_label);
/* PRAGMA journal_mode = WAL on conn: -ENOTSUP, naming dir_label, when the
 * file system cannot do it. */
int sqlu_wal(struct sqlu *c, sqlite3 *conn, const char *dir_label);
/* Roll back the open transaction of conn, if any (conn may be NULL). What a
 * failed ROLLBACK says is dropped: the caller has a better error to report. */
void sqlu_rollback_open(sqlite3 *conn);

/* ---- statements ---- */

/* Prepare sql[0..n) on conn into st[0..n) (SQLITE_PREPARE_PERSISTENT; the
 * caller finalizes them). */
int sqlu_prepare_all(struct sqlu *c, sqlite3 *conn, const char *const *sql, sqlite3_stmt **st,
                     size_t n);
/* Run constant SQL (one or more statements, no values) to completion. */
int sqlu_exec(struct sqlu *c, sqlite3 *conn, const char *sql, const char *what);
/* Run a constant single-row, single-integer query (a PRAGMA read). */
int sqlu_query_int(struct sqlu *c, sqlite3 *conn, const char *sql, int64_t *ret);
/* Step st (prepared, bound) for its first row's first column as an integer
 * (SQL NULL reads as 0); no row is -EBADMSG. Does not reset st. */
int sqlu_step_int(struct sqlu *c, sqlite3_stmt *st, int64_t *ret);
/* Run a constant query whose first row's first column is text: text gets it
 * ("" for NULL), cut to textlen and on one line (control characters become
 * spaces), for comparing and for messages. */
int sqlu_query_text(struct sqlu *c, sqlite3 *conn, const char *sql, char *text, size_t textlen);
/* Step a write statement to completion. Does not reset st. */
int sqlu_step_done(struct sqlu *c, sqlite3_stmt *st, const char *what);

/* Step st to its end, reading each row with read(ud, st, row) into a growing
 * array of elem-sized rows. On success *ret (owned, free() it; NULL when no
 * row) and *ret_n. On failure the rows read so far are taken apart with
 * free_row (may be NULL: nothing to free inside a row) and freed; a failing
 * read has set c->err itself. what names the walk in messages. st is reset
 * (bindings cleared) before it returns, so no read stays open while the
 * caller goes through the rows. */
typedef int (*sqlu_read_fn)(void *ud, sqlite3_stmt *st, void *row);
int sqlu_collect(struct sqlu *c, sqlite3_stmt *st, size_t elem, sqlu_read_fn read, void *ud,
                 void (*free_row)(void *row), const char *what, void **ret, size_t *ret_n);

/* ---- parameters and columns ---- */

int sqlu_bind_i64(struct sqlu *c, sqlite3_stmt *st, int idx, int64_t v);
/* Bind :name if st has it (0 when it does not: cached statements share names). */
int sqlu_bind_named_i64(struct sqlu *c, sqlite3_stmt *st, const char *name, int64_t v);
int sqlu_bind_named_text(struct sqlu *c, sqlite3_stmt *st, const char *name, const char *v,
                         sqlite3_destructor_type how);
int sqlu_bind_named_blob(struct sqlu *c, sqlite3_stmt *st, const char *name, const void *p,
                         int len, sqlite3_destructor_type how);

/* These leave c->err alone (there is none): the caller words the failure.
 * A text or blob column: *ret is never NULL ("" for SQL NULL) and valid until
 * the next step or reset of st. -ENOMEM when sqlite ran out of memory
 * converting it; -EBADMSG when its length makes no sense. */
int sqlu_column_text(sqlite3_stmt *st, int col, const char **ret, size_t *ret_len);
int sqlu_column_blob(sqlite3_stmt *st, int col, const void **ret, size_t *ret_len);
/* A text column copied into out[size] with its NUL: -ERANGE when it does not
 * fit (a sign of a damaged file where the schema bounds the length); -ENOMEM
 * as above. */
int sqlu_column_text_copy(sqlite3_stmt *st, int col, char *out, size_t size);

/* ---- transactions and migrations ---- */

/* BEGIN IMMEDIATE on conn, fn(ud), COMMIT; when fn fails, ROLLBACK and
 * return its error. name ("migration") names the transaction in messages. */
int sqlu_transaction(struct sqlu *c, sqlite3 *conn, const char *name, int (*fn)(void *ud),
                     void *ud);

struct sqlu_migration {
    int64_t version;   /* what the SQL leaves in PRAGMA user_version */
    const char *sql;
};
/* Run the migrations above *version in order (in the caller's transaction),
 * each checked to leave user_version at its number; *version follows. When a
 * migration's SQL fails with a plain SQL error (the file holds objects we did
 * not expect) and foreign_hint is not NULL, the error is -EBADMSG with
 * "; FOREIGN_HINT" appended to the message. */
int sqlu_migrate(struct sqlu *c, sqlite3 *conn, const struct sqlu_migration *m, size_t n,
                 const char *foreign_hint, int64_t *version);

/* Cleanup helpers for statements: cached ones are reset (and their bindings,
 * which may point into caller memory, cleared); ad-hoc ones finalized. */
static inline void sqlu_stmt_resetp(sqlite3_stmt **p) {
    if (*p) {
        (void)sqlite3_reset(*p);
        (void)sqlite3_clear_bindings(*p);
    }
}
static inline void sqlu_stmt_finalizep(sqlite3_stmt **p) {
    (void)sqlite3_finalize(*p); /* accepts NULL */
}
#define _cleanup_reset_ _cleanup_(sqlu_stmt_resetp)
#define _cleanup_finalize_ _cleanup_(sqlu_stmt_finalizep)

#endif
