/* The sqlite plumbing state.db and audit.db share (sqlite_util.h): one way to
 * open a connection, to turn a sqlite failure into -errno and a message that
 * says what to do, to run constant SQL, to read rows and columns with their
 * length checks, and to run numbered migrations in one transaction.
 *
 * Must never: log, know either schema, or set a PRAGMA (each database chooses
 * its own durability: see store.c and audit_db.c). Every statement it runs is
 * constant text or one its caller prepared. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "storage/sqlite_util.h"

/* ---- errors ------------------------------------------------------------------------ */

int sqlu_errno(int rc) {
    switch (rc) {
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_PRIMARYKEY:
        return -EEXIST;
    case SQLITE_CANTOPEN_SYMLINK:
        return -EPERM;
    }
    switch (rc & 0xff) {
    case SQLITE_OK:
        return 0;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return -EBUSY;
    case SQLITE_NOMEM:
        return -ENOMEM;
    case SQLITE_READONLY:
        return -EROFS;
    case SQLITE_INTERRUPT:
        return -EINTR;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    /* Our SQL is constant and was tested against our schema: a plain SQL error
     * ("no such table") means the file's schema is not the one we wrote. */
    case SQLITE_ERROR:
    case SQLITE_SCHEMA:
        return -EBADMSG;
    case SQLITE_FULL:
        return -ENOSPC;
    case SQLITE_TOOBIG:
        return -E2BIG;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_MISUSE:
        return -EINVAL;
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return -EPERM;
    case SQLITE_NOLFS:
        return -EFBIG;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_PROTOCOL:
    default:
        return -EIO;
    }
}

int sqlu_errf(struct sqlu *c, int r, const char *fmt, ...) {
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return r;
}

/* A message that may be cut at len: paths can be PATH_MAX long and the
 * message buffers are smaller, which is fine for a log line. (vsnprintf, so
 * that -O3's -Wformat-truncation does not flag the intended truncation.) */
__attribute__((format(printf, 3, 4))) static void message(char *buf, size_t len, const char *fmt,
                                                          ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

int sqlu_fail(struct sqlu *c, sqlite3 *conn, int rc, const char *fmt, ...) {
    char what[256];
    const char *msg = conn ? sqlite3_errmsg(conn) : sqlite3_errstr(rc);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    c->last_rc = rc;
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        message(c->err, sizeof c->err,
                "%s is locked by another process (is another lyhd running?): %s: gave up after "
                "%d ms",
                c->path, what, c->busy_ms);
        break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        message(c->err, sizeof c->err,
                "%s is corrupt or not a database (%s: %s); move it away (e.g. mv %s %s.corrupt) "
                "and restart lyhd%s",
                c->path, what, msg, c->path, c->path, c->after_restart);
        break;
    default:
        message(c->err, sizeof c->err, "%s: %s: %s", c->path, what, msg);
        break;
    }
    return sqlu_errno(rc);
}

int sqlu_corrupt(struct sqlu *c, const char *detail) {
    return sqlu_errf(c, -EBADMSG,
                     "%s is corrupt (%s); move it away (e.g. mv %s %s.corrupt) and restart lyhd",
                     c->path, detail, c->path, c->path);
}

/* ---- connections ---------------------------------------------------------------------- */

void sqlu_process_init(void) {
    (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

int sqlu_init(struct sqlu *c, int busy_ms, const char *after_restart) {
    c->busy_ms = busy_ms;
    c->after_restart = after_restart;
    if (sqlite3_libversion_number() < 3037000)
        return sqlu_errf(c, -ENOTSUP, "sqlite %s is too old; lyhd needs 3.37 or newer",
                         sqlite3_libversion());
    return 0;
}

int sqlu_open(struct sqlu *c, sqlite3 **ret, bool readonly, const char *what,
              const char *dir_label) {
    static const struct {
        int op;
        int value;
    } config[] = {
        /* No writable_schema or other ways to corrupt the file from SQL. */
        { SQLITE_DBCONFIG_DEFENSIVE, 1 },
        /* Functions in the schema (CHECKs) must be innocuous built-ins. */
        { SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0 },
        /* "x" is an identifier, never a string: typos fail at prepare. */
        { SQLITE_DBCONFIG_DQS_DML, 0 },
        { SQLITE_DBCONFIG_DQS_DDL, 0 },
    };
    /* The file exists (the caller made or checked it), so no
     * SQLITE_OPEN_CREATE: sqlite must not create it with its own mode if it
     * vanished in between. NOFOLLOW refuses a symlink anywhere in the path, so
     * the name sqlite opens is the path the caller checked. */
    const int flags = (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) |
                      SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_PRIVATECACHE | SQLITE_OPEN_NOFOLLOW |
                      SQLITE_OPEN_EXRESCODE;
    int rc;

    rc = sqlite3_open_v2(c->path, ret, flags, NULL);
    if (rc != SQLITE_OK) {
        if (!*ret)
            return sqlu_errf(c, -ENOMEM, "%s: cannot allocate a sqlite connection", c->path);
        rc = sqlite3_extended_errcode(*ret);
        if (rc == SQLITE_CANTOPEN_SYMLINK)
            return sqlu_errf(c, -EPERM, "%s: the path contains a symlink; give the %s's real path",
                             c->path, dir_label);
        return sqlu_fail(c, *ret, rc, "%s", what);
    }
    rc = sqlite3_busy_timeout(*ret, c->busy_ms);
    if (rc != SQLITE_OK)
        return sqlu_fail(c, *ret, rc, "set the busy timeout");
    for (size_t i = 0; i < ARRAY_SIZE(config); i++) {
        int now = -1;

        rc = sqlite3_db_config(*ret, config[i].op, config[i].value, &now);
        if (rc != SQLITE_OK)
            return sqlu_fail(c, *ret, rc, "sqlite3_db_config(%d)", config[i].op);
        if (now != config[i].value)
            return sqlu_errf(c, -ENOTSUP, "%s: sqlite3_db_config(%d) did not take", c->path,
                             config[i].op);
    }
    return 0;
}

int sqlu_wal(struct sqlu *c, sqlite3 *conn, const char *dir_label) {
    char mode[160];
    int r;

    r = sqlu_query_text(c, conn, "PRAGMA journal_mode = WAL", mode, sizeof mode);
    if (r < 0)
        return r;
    if (strcmp(mode, "wal") != 0)
        return sqlu_errf(c, -ENOTSUP,
                         "%s: cannot switch to WAL mode (journal_mode is '%s'); the %s must be on "
                         "a local filesystem",
                         c->path, mode, dir_label);
    return 0;
}

void sqlu_rollback_open(sqlite3 *conn) {
    if (conn && !sqlite3_get_autocommit(conn))
        (void)sqlite3_exec(conn, "ROLLBACK", NULL, NULL, NULL);
}

/* ---- statements ----------------------------------------------------------------------- */

int sqlu_prepare_all(struct sqlu *c, sqlite3 *conn, const char *const *sql, sqlite3_stmt **st,
                     size_t n) {
    for (size_t i = 0; i < n; i++) {
        int rc = sqlite3_prepare_v3(conn, sql[i], -1, SQLITE_PREPARE_PERSISTENT, &st[i], NULL);
        if (rc != SQLITE_OK)
            return sqlu_fail(c, conn, rc, "prepare '%s'", sql[i]);
    }
    return 0;
}

int sqlu_exec(struct sqlu *c, sqlite3 *conn, const char *sql, const char *what) {
    const char *tail = sql;

    while (*tail) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(conn, tail, -1, &st, &tail);
        if (rc != SQLITE_OK)
            return sqlu_fail(c, conn, rc, "%s", what);
        if (!st) /* only whitespace or a comment left */
            break;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            ;
        if (rc != SQLITE_DONE)
            return sqlu_fail(c, conn, rc, "%s", what);
    }
    return 0;
}

int sqlu_step_int(struct sqlu *c, sqlite3_stmt *st, int64_t *ret) {
    int rc = sqlite3_step(st);

    if (rc != SQLITE_ROW)
        return rc == SQLITE_DONE
                   ? sqlu_errf(c, -EBADMSG, "%s: %s returned no row", c->path, sqlite3_sql(st))
                   : sqlu_fail(c, sqlite3_db_handle(st), rc, "%s", sqlite3_sql(st));
    *ret = sqlite3_column_int64(st, 0);
    return 0;
}

int sqlu_query_int(struct sqlu *c, sqlite3 *conn, const char *sql, int64_t *ret) {
    _cleanup_finalize_ sqlite3_stmt *st = NULL;
    int rc;

    rc = sqlite3_prepare_v2(conn, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return sqlu_fail(c, conn, rc, "%s", sql);
    return sqlu_step_int(c, st, ret);
}

int sqlu_query_text(struct sqlu *c, sqlite3 *conn, const char *sql, char *text, size_t textlen) {
    _cleanup_finalize_ sqlite3_stmt *st = NULL;
    const char *t;
    size_t n;
    int r, rc;

    rc = sqlite3_prepare_v2(conn, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return sqlu_fail(c, conn, rc, "%s", sql);
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW)
        return rc == SQLITE_DONE ? sqlu_errf(c, -EBADMSG, "%s: %s returned no row", c->path, sql)
                                 : sqlu_fail(c, conn, rc, "%s", sql);
    r = sqlu_column_text(st, 0, &t, &n);
    if (r < 0)
        return sqlu_errf(c, r, "%s: %s: %s", c->path, sql,
                         r == -ENOMEM ? "out of memory" : "unreadable text");
    snprintf(text, textlen, "%s", t);
    /* quick_check reports one problem per line: keep the message one line. */
    for (char *p = text; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = ' ';
    return 0;
}

int sqlu_step_done(struct sqlu *c, sqlite3_stmt *st, const char *what) {
    int rc = sqlite3_step(st);
    return rc == SQLITE_DONE ? 0 : sqlu_fail(c, sqlite3_db_handle(st), rc, "%s", what);
}

/* Room for one more element in a growing array. */
static int reserve(void **arr, size_t *cap, size_t n, size_t elem) {
    void *p;
    size_t ncap;

    if (n < *cap)
        return 0;
    ncap = *cap ? *cap * 2 : 16;
    if (ncap > SIZE_MAX / elem)
        return -ENOMEM;
    p = realloc(*arr, ncap * elem);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = ncap;
    return 0;
}

int sqlu_collect(struct sqlu *c, sqlite3_stmt *st, size_t elem, sqlu_read_fn read, void *ud,
                 void (*free_row)(void *row), const char *what, void **ret, size_t *ret_n) {
    void *rows = NULL;
    size_t n = 0, cap = 0;
    int r;

    for (;;) {
        int rc = sqlite3_step(st);

        if (rc == SQLITE_DONE)
            break;
        if (rc != SQLITE_ROW) {
            r = sqlu_fail(c, sqlite3_db_handle(st), rc, "%s", what);
            goto fail;
        }
        r = reserve(&rows, &cap, n, elem);
        if (r < 0) {
            r = sqlu_errf(c, r, "%s: out of memory", what);
            goto fail;
        }
        r = read(ud, st, (char *)rows + n * elem);
        if (r < 0)
            goto fail;
        n++;
    }
    sqlu_stmt_resetp(&st);
    *ret = rows;
    *ret_n = n;
    return 0;
fail:
    sqlu_stmt_resetp(&st);
    for (size_t i = 0; free_row && i < n; i++)
        free_row((char *)rows + i * elem);
    free(rows);
    return r;
}

/* ---- parameters and columns ----------------------------------------------------------- */

int sqlu_bind_i64(struct sqlu *c, sqlite3_stmt *st, int idx, int64_t v) {
    int rc = sqlite3_bind_int64(st, idx, v);
    return rc == SQLITE_OK ? 0 : sqlu_fail(c, sqlite3_db_handle(st), rc, "bind parameter %d", idx);
}

int sqlu_bind_named_i64(struct sqlu *c, sqlite3_stmt *st, const char *name, int64_t v) {
    int i = sqlite3_bind_parameter_index(st, name);
    int rc;

    if (i == 0)
        return 0;
    rc = sqlite3_bind_int64(st, i, v);
    return rc == SQLITE_OK ? 0 : sqlu_fail(c, sqlite3_db_handle(st), rc, "bind %s", name);
}

int sqlu_bind_named_text(struct sqlu *c, sqlite3_stmt *st, const char *name, const char *v,
                         sqlite3_destructor_type how) {
    int i = sqlite3_bind_parameter_index(st, name);
    int rc;

    if (i == 0)
        return 0;
    rc = sqlite3_bind_text(st, i, v, -1, how);
    return rc == SQLITE_OK ? 0 : sqlu_fail(c, sqlite3_db_handle(st), rc, "bind %s", name);
}

int sqlu_bind_named_blob(struct sqlu *c, sqlite3_stmt *st, const char *name, const void *p,
                         int len, sqlite3_destructor_type how) {
    int i = sqlite3_bind_parameter_index(st, name);
    int rc;

    if (i == 0)
        return 0;
    rc = sqlite3_bind_blob(st, i, p, len, how);
    return rc == SQLITE_OK ? 0 : sqlu_fail(c, sqlite3_db_handle(st), rc, "bind %s", name);
}

/* sqlite returns NULL both for an SQL NULL and when converting the value ran
 * out of memory; only the connection's error code tells them apart. */
int sqlu_column_text(sqlite3_stmt *st, int col, const char **ret, size_t *ret_len) {
    const unsigned char *t = sqlite3_column_text(st, col);
    int n = sqlite3_column_bytes(st, col);

    if (!t) {
        if (sqlite3_errcode(sqlite3_db_handle(st)) == SQLITE_NOMEM)
            return -ENOMEM;
        n = 0;
    }
    if (n < 0)
        return -EBADMSG;
    *ret = t ? (const char *)t : "";
    *ret_len = (size_t)n;
    return 0;
}

int sqlu_column_blob(sqlite3_stmt *st, int col, const void **ret, size_t *ret_len) {
    const void *p = sqlite3_column_blob(st, col);
    int n = sqlite3_column_bytes(st, col);

    if (!p && sqlite3_errcode(sqlite3_db_handle(st)) == SQLITE_NOMEM)
        return -ENOMEM;
    if (n < 0 || (n > 0 && !p))
        return -EBADMSG;
    *ret = p ? p : "";
    *ret_len = (size_t)n;
    return 0;
}

int sqlu_column_text_copy(sqlite3_stmt *st, int col, char *out, size_t size) {
    const char *t;
    size_t n;
    int r;

    r = sqlu_column_text(st, col, &t, &n);
    if (r < 0)
        return r;
    if (n >= size)
        return -ERANGE;
    memcpy(out, t, n);
    out[n] = '\0';
    return 0;
}

/* ---- transactions and migrations ------------------------------------------------------ */

int sqlu_transaction(struct sqlu *c, sqlite3 *conn, const char *name, int (*fn)(void *ud),
                     void *ud) {
    char what[96];
    int r;

    snprintf(what, sizeof what, "start the %s transaction", name);
    r = sqlu_exec(c, conn, "BEGIN IMMEDIATE", what);
    if (r < 0)
        return r;
    r = fn(ud);
    if (r < 0) {
        /* Nothing of a failed transaction may stay. ROLLBACK's own failure
         * changes nothing we could report better than the first error. */
        sqlu_rollback_open(conn);
        return r;
    }
    snprintf(what, sizeof what, "commit the %s transaction", name);
    return sqlu_exec(c, conn, "COMMIT", what);
}

int sqlu_migrate(struct sqlu *c, sqlite3 *conn, const struct sqlu_migration *m, size_t n,
                 const char *foreign_hint, int64_t *version) {
    for (size_t i = 0; i < n; i++) {
        int64_t now = 0;
        char what[64];
        int r;

        if (m[i].version <= *version)
            continue;
        snprintf(what, sizeof what, "migration to schema version %lld", (long long)m[i].version);
        r = sqlu_exec(c, conn, m[i].sql, what);
        if (r < 0) {
            if (foreign_hint && (c->last_rc & 0xff) == SQLITE_ERROR) {
                char first[SQLU_ERR_MAX];

                snprintf(first, sizeof first, "%s", c->err);
                return sqlu_errf(c, -EBADMSG, "%s; %s", first, foreign_hint);
            }
            return r;
        }
        r = sqlu_query_int(c, conn, "PRAGMA user_version", &now);
        if (r < 0)
            return r;
        if (now != m[i].version)
            return sqlu_errf(c, -EBADMSG, "%s: %s left user_version at %lld", c->path, what,
                             (long long)now);
        *version = now;
    }
    return 0;
}
