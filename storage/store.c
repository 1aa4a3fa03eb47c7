/* state.db access: where the file may live (the state dir checks), opening it,
 * transactions, and the typed reads and writes of sessions, guards, the reap
 * log, policy versions and metadata. The schema itself is migrate.c's.
 *
 * Must never: log (failures fill s->err; the daemon logs once, at its
 * boundary), format a value into SQL (every statement is constant text with
 * bound parameters, the common ones prepared once at open), or open state.db
 * anywhere someone other than us could write.
 *
 * Why the location is safe: DIR is opened with O_NOFOLLOW and checked through
 * its fd (a directory owned by our euid, not group/world writable), and every
 * directory above it, found by walking ".." from that fd, is owned by root or
 * us and either not writable by others or sticky. So no other user can rename,
 * replace or add anything on the path. sqlite then opens DIR/state.db by name,
 * but with SQLITE_OPEN_NOFOLLOW, which refuses a symlink anywhere in the path:
 * the name it opens is the physical path we walked, hence the file we checked.
 * We create state.db ourselves (O_NOFOLLOW, 0600) before sqlite sees it, and
 * sqlite gives the -wal and -shm files the main file's mode; sqlite opens every
 * file O_CLOEXEC on Linux. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/macros.h"
#include "storage/store_int.h"

#if SQLITE_VERSION_NUMBER < 3037000
#error "storage/ needs sqlite >= 3.37 (STRICT tables, SQLITE_OPEN_EXRESCODE)"
#endif

#define STORE_DB_NAME "state.db"
#define STORE_BUSY_TIMEOUT_MS 2000
/* Deeper than any real state dir; stops a walk that never reaches "/". */

#define SESSION_COLS                                                                      \
    "id, uid, pid, pid_start, scope, interface, chain, cgroup, cgroup_id, tmpdir, argv0, " \
    "cwd, policy_version, state, started_ms, ended_ms, exit_code, signal, guard_spec"
#define GUARD_COLS "chain, uid, scope, interface, refcount, rules_hash, created_ms, guard_spec"
#define POLICY_COLS "version, blob, set_by_uid, set_ms"

/* Live means state <> 4 (STORE_SESSION_ENDED), spelled as the partial indexes
 * spell it so the planner uses them. */
static const char *const stmt_sql[STMT__MAX] = {
    [STMT_BEGIN] = "BEGIN IMMEDIATE",
    [STMT_COMMIT] = "COMMIT",
    [STMT_ROLLBACK] = "ROLLBACK",
    [STMT_SESSION_INSERT] = "INSERT INTO sessions (" SESSION_COLS ") VALUES "
                            "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
                            "?15, ?16, ?17, ?18, ?19)",
    [STMT_SESSION_UPDATE] = "UPDATE sessions SET uid = ?2, pid = ?3, pid_start = ?4, scope = ?5, "
                            "interface = ?6, chain = ?7, cgroup = ?8, cgroup_id = ?9, "
                            "tmpdir = ?10, argv0 = ?11, cwd = ?12, policy_version = ?13, "
                            "state = ?14, started_ms = ?15, ended_ms = ?16, exit_code = ?17, "
                            "signal = ?18, guard_spec = ?19 WHERE id = ?1",
    [STMT_SESSION_GET] = "SELECT " SESSION_COLS " FROM sessions WHERE id = ?1",
    [STMT_SESSION_LIVE] = "SELECT " SESSION_COLS " FROM sessions WHERE state <> 4 "
                          "ORDER BY started_ms, id",
    [STMT_SESSION_COUNT_LIVE_ALL] = "SELECT count(*) FROM sessions WHERE state <> 4",
    [STMT_SESSION_COUNT_LIVE_UID] = "SELECT count(*) FROM sessions WHERE state <> 4 AND uid = ?1",
    [STMT_SESSION_PRUNE] = "DELETE FROM sessions WHERE state = 4 AND ended_ms < ?1",
    [STMT_GUARD_GET] = "SELECT " GUARD_COLS " FROM guards "
                       "WHERE uid = ?1 AND scope = ?2 AND scope <> 1",
    [STMT_GUARD_GET_BY_CHAIN] = "SELECT " GUARD_COLS " FROM guards WHERE chain = ?1",
    /* The WHERE keeps a chain bound to the (uid, scope) that created it: a put
     * that would move it updates nothing, and we report -EEXIST. */
    [STMT_GUARD_PUT] = "INSERT INTO guards (" GUARD_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                       "ON CONFLICT (chain) DO UPDATE SET interface = excluded.interface, "
                       "refcount = excluded.refcount, rules_hash = excluded.rules_hash, "
                       "created_ms = excluded.created_ms, guard_spec = excluded.guard_spec "
                       "WHERE guards.uid = excluded.uid AND guards.scope = excluded.scope",
    [STMT_GUARD_DELETE] = "DELETE FROM guards WHERE chain = ?1",
    [STMT_GUARD_ALL] = "SELECT " GUARD_COLS " FROM guards ORDER BY id",
    [STMT_REAP_LOG] = "INSERT INTO reap_log (at_ms, object, action, detail) "
                      "VALUES (?1, ?2, ?3, ?4)",
    [STMT_POLICY_CURRENT] = "SELECT " POLICY_COLS " FROM policy_versions "
                            "ORDER BY version DESC LIMIT 1",
    [STMT_POLICY_GET] = "SELECT " POLICY_COLS " FROM policy_versions WHERE version = ?1",
    /* One statement reads max and inserts, so it is atomic even outside an
     * explicit transaction. */
    [STMT_POLICY_APPEND] = "INSERT INTO policy_versions (version, blob, set_by_uid, set_ms) "
                           "SELECT coalesce(max(version), 0) + 1, ?1, ?2, ?3 FROM policy_versions",
    [STMT_POLICY_LIST] = "SELECT " POLICY_COLS " FROM policy_versions "
                         "ORDER BY version DESC LIMIT ?1",
    [STMT_META_GET] = "SELECT value FROM meta WHERE key = ?1",
    [STMT_META_SET] = "INSERT INTO meta (key, value) VALUES (?1, ?2) "
                      "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    [STMT_GGID_GET] = "SELECT gid FROM guard_gids WHERE uid = ?1",
    [STMT_GGID_SET] = "INSERT INTO guard_gids (uid, gid) VALUES (?1, ?2) "
                      "ON CONFLICT (uid) DO UPDATE SET gid = excluded.gid",
    /* ?1 itself, or the first gid after a taken one, whichever is free and lowest */
    [STMT_GGID_FREE] = "SELECT ?1 AS g WHERE NOT EXISTS (SELECT 1 FROM guard_gids WHERE gid = ?1) "
                       "UNION ALL SELECT a.gid + 1 FROM guard_gids AS a "
                       "WHERE a.gid BETWEEN ?1 AND ?2 - 1 "
                       "AND NOT EXISTS (SELECT 1 FROM guard_gids WHERE gid = a.gid + 1) "
                       "ORDER BY g LIMIT 1",
};

/* ---- errors ------------------------------------------------------------------------ */

int store_errno(int rc) {
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

int store_errf(struct store *s, int r, const char *fmt, ...) {
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
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

int storage_sql_message(char *buf, size_t len, int rc, const char *msg, const char *path,
                        const char *what, int busy_ms, const char *after_restart) {
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        message(buf, len,
                "%s is locked by another process (is another lyhd running?): %s: gave up after "
                "%d ms",
                path, what, busy_ms);
        break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        message(buf, len,
                "%s is corrupt or not a database (%s: %s); move it away (e.g. mv %s %s.corrupt) "
                "and restart lyhd%s",
                path, what, msg, path, path, after_restart);
        break;
    default:
        message(buf, len, "%s: %s: %s", path, what, msg);
        break;
    }
    return store_errno(rc);
}

int store_sql_fail(struct store *s, int rc, const char *fmt, ...) {
    char what[256], m[STORE_ERR_MAX];
    const char *msg = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    s->last_rc = rc;
    int e = storage_sql_message(m, sizeof m, rc, msg, s->path, what, STORE_BUSY_TIMEOUT_MS, "");
    return store_errf(s, e, "%s", m);
}

static int corrupt(struct store *s, const char *detail) {
    return store_errf(s, -EBADMSG,
                      "%s is corrupt (%s); move it away (e.g. mv %s %s.corrupt) and restart lyhd",
                      s->path, detail, s->path, s->path);
}

const char *store_errmsg(const struct store *s) {
    return s ? s->err : "";
}

/* ---- ad-hoc constant SQL ------------------------------------------------------------ */

int store_exec(struct store *s, const char *sql, const char *what) {
    const char *tail = sql;

    while (*tail) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        int rc;

        rc = sqlite3_prepare_v2(s->db, tail, -1, &st, &tail);
        if (rc != SQLITE_OK)
            return store_sql_fail(s, rc, "%s", what);
        if (!st) /* only whitespace or a comment left */
            break;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            ;
        if (rc != SQLITE_DONE)
            return store_sql_fail(s, rc, "%s", what);
    }
    return 0;
}

int store_query_int(struct store *s, const char *sql, int64_t *ret) {
    _cleanup_finalize_ sqlite3_stmt *st = NULL;
    int rc;

    rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return store_sql_fail(s, rc, "%s", sql);
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW)
        return rc == SQLITE_DONE ? store_errf(s, -EBADMSG, "%s: %s returned no row", s->path, sql)
                                 : store_sql_fail(s, rc, "%s", sql);
    *ret = sqlite3_column_int64(st, 0);
    return 0;
}

/* Run a constant query whose first row's first column is text, and compare it
 * with want. text gets that text (truncated, on one line) for the message. */
static int query_text_is(struct store *s, const char *sql, const char *want, bool *ret_is,
                         char *text, size_t textlen) {
    _cleanup_finalize_ sqlite3_stmt *st = NULL;
    const unsigned char *t;
    int rc;

    rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return store_sql_fail(s, rc, "%s", sql);
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW)
        return rc == SQLITE_DONE ? store_errf(s, -EBADMSG, "%s: %s returned no row", s->path, sql)
                                 : store_sql_fail(s, rc, "%s", sql);
    t = sqlite3_column_text(st, 0);
    if (!t && sqlite3_errcode(s->db) == SQLITE_NOMEM)
        return store_errf(s, -ENOMEM, "%s: %s: out of memory", s->path, sql);
    snprintf(text, textlen, "%s", t ? (const char *)t : "");
    /* quick_check reports one problem per line: keep the message one line. */
    for (char *c = text; *c; c++)
        if ((unsigned char)*c < 0x20)
            *c = ' ';
    *ret_is = t && strcmp((const char *)t, want) == 0;
    return 0;
}

/* ---- the state dir -------------------------------------------------------------------- */

static int open_state_dir(struct store *s, const char *dir, int *ret_fd) {
    char err[STORE_ERR_MAX];
    int r = storage_open_private_dir(dir, true, "state dir", "security state", err, sizeof err,
                                     ret_fd);
    return r < 0 ? store_errf(s, r, "%s", err) : 0;
}

/* Create state.db ourselves so it is 0600 from the start (sqlite would use
 * 0644 minus umask), and refuse one we did not make. */
static int prepare_db_file(struct store *s, int dirfd) {
    _cleanup_close_ int fd = -1;
    struct stat st;

    fd = openat(dirfd, STORE_DB_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == ELOOP)
            return store_errf(s, -EPERM, "%s is a symlink; move it away", s->path);
        return store_errf(s, -errno, "cannot open %s: %s", s->path, strerror(errno));
    }
    if (fstat(fd, &st) < 0)
        return store_errf(s, -errno, "%s: fstat: %s", s->path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return store_errf(s, -EPERM, "%s is not a regular file; move it away", s->path);
    if (st.st_uid != geteuid())
        return store_errf(s, -EPERM, "%s is owned by uid %u, not %u; move it away", s->path,
                          (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_nlink != 1)
        return store_errf(s, -EPERM, "%s has %lu hard links; move it away", s->path,
                          (unsigned long)st.st_nlink);
    if ((st.st_mode & 07777) != 0600 && fchmod(fd, 0600) < 0)
        return store_errf(s, -errno, "%s: chmod 0600: %s", s->path, strerror(errno));
    return 0;
}

/* ---- opening ---------------------------------------------------------------------------- */

static int open_db(struct store *s) {
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
    /* The file exists (prepare_db_file), so no SQLITE_OPEN_CREATE: sqlite must
     * not create it with its own mode if it vanished in between. */
    const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_PRIVATECACHE |
                      SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_EXRESCODE;
    int rc;

    rc = sqlite3_open_v2(s->path, &s->db, flags, NULL);
    if (rc != SQLITE_OK) {
        if (!s->db)
            return store_errf(s, -ENOMEM, "%s: cannot allocate a sqlite connection", s->path);
        rc = sqlite3_extended_errcode(s->db);
        if (rc == SQLITE_CANTOPEN_SYMLINK)
            return store_errf(s, -EPERM,
                              "%s: the path contains a symlink; give the state dir's real path",
                              s->path);
        return store_sql_fail(s, rc, "open");
    }
    rc = sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);
    if (rc != SQLITE_OK)
        return store_sql_fail(s, rc, "set the busy timeout");
    for (size_t i = 0; i < ARRAY_SIZE(config); i++) {
        int now = -1;

        rc = sqlite3_db_config(s->db, config[i].op, config[i].value, &now);
        if (rc != SQLITE_OK)
            return store_sql_fail(s, rc, "sqlite3_db_config(%d)", config[i].op);
        if (now != config[i].value)
            return store_errf(s, -ENOTSUP, "%s: sqlite3_db_config(%d) did not take", s->path,
                              config[i].op);
    }
    return 0;
}

static int check_db(struct store *s) {
    char text[160];
    int64_t version = 0;
    bool ok = false;
    int r;

    /* The first read: a locked, corrupt or foreign file shows up here. Look
     * at the version before changing anything (even the journal mode) in a
     * file a newer lyhd wrote. */
    r = store_query_int(s, "PRAGMA user_version", &version);
    if (r < 0)
        return r;
    r = store_check_version(s, version);
    if (r < 0)
        return r;

    r = query_text_is(s, "PRAGMA journal_mode = WAL", "wal", &ok, text, sizeof text);
    if (r < 0)
        return r;
    if (!ok)
        return store_errf(s, -ENOTSUP,
                          "%s: cannot switch to WAL mode (journal_mode is '%s'); "
                          "the state dir must be on a local filesystem",
                          s->path, text);
    /* NORMAL (WAL): a committed change survives a crash of lyhd (kill -9,
     * abort), which is what the reaper needs: every row precedes the kernel
     * change it describes. Only an OS crash or power loss can lose the last
     * commits, and that also wipes the kernel state they describe (rules,
     * cgroups, processes), so there is nothing left to reap. FULL would add
     * an fsync to every state change on the launch path (measured: ~3.8 ms
     * of a 10.7 ms launch). */
    r = store_exec(s,
                   "PRAGMA synchronous = NORMAL;"
                   "PRAGMA foreign_keys = ON;"
                   "PRAGMA cell_size_check = ON;",
                   "set pragmas");
    if (r < 0)
        return r;

    r = query_text_is(s, "PRAGMA quick_check", "ok", &ok, text, sizeof text);
    if (r < 0)
        return r;
    if (!ok) {
        char detail[200];

        snprintf(detail, sizeof detail, "quick_check: %s", text);
        return corrupt(s, detail);
    }
    return 0;
}

static int prepare_statements(struct store *s) {
    for (size_t i = 0; i < STMT__MAX; i++) {
        int rc = sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                    &s->stmt[i], NULL);
        if (rc != SQLITE_OK)
            return store_sql_fail(s, rc, "prepare statement %zu", i);
    }
    return 0;
}

static int open_internal(struct store *s, const char *dir) {
    _cleanup_close_ int dirfd = -1;
    int n, r;

    if (sqlite3_libversion_number() < 3037000)
        return store_errf(s, -ENOTSUP, "sqlite %s is too old; lyhd needs 3.37 or newer",
                          sqlite3_libversion());
    n = snprintf(s->path, sizeof s->path, "%s/%s", dir, STORE_DB_NAME);
    if (n < 0 || (size_t)n >= sizeof s->path)
        return store_errf(s, -ENAMETOOLONG, "state dir path is too long");

    r = open_state_dir(s, dir, &dirfd);
    if (r < 0)
        return r;
    r = prepare_db_file(s, dirfd);
    if (r < 0)
        return r;
    r = open_db(s);
    if (r < 0)
        return r;
    r = check_db(s);
    if (r < 0)
        return r;
    r = store_migrate(s);
    if (r < 0)
        return r;
    return prepare_statements(s);
}

static void store_closep(struct store **p) {
    store_close(*p);
}

int store_open(const char *dir, struct store **ret, const char **ret_err_msg) {
    /* store_open's contract hands back static storage: the store that held
     * the message is gone by the time the caller reads it. */
    static _Thread_local char open_err[STORE_ERR_MAX];
    _cleanup_(store_closep) struct store *s = NULL;
    int r;

    if (!dir || !*dir || !ret) {
        snprintf(open_err, sizeof open_err, "store_open: no state dir given");
        r = -EINVAL;
        goto fail;
    }
    s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(open_err, sizeof open_err, "store_open: out of memory");
        r = -ENOMEM;
        goto fail;
    }
    r = open_internal(s, dir);
    if (r < 0) {
        snprintf(open_err, sizeof open_err, "%s", s->err);
        goto fail;
    }
    s->err[0] = '\0';
    *ret = TAKE_PTR(s);
    return 0;
fail:
    if (ret_err_msg)
        *ret_err_msg = open_err;
    return r;
}

void store_close(struct store *s) {
    if (!s)
        return;
    if (s->db && !sqlite3_get_autocommit(s->db))
        (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    for (size_t i = 0; i < STMT__MAX; i++)
        (void)sqlite3_finalize(s->stmt[i]);
    /* _v2: should anything still be unfinalized, free it later rather than
     * leak the connection. The last connection checkpoints the WAL here. */
    (void)sqlite3_close_v2(s->db);
    free(s);
}

/* ---- binding and reading -------------------------------------------------------------- */

static int bind_i64(struct store *s, sqlite3_stmt *st, int i, int64_t v) {
    int rc = sqlite3_bind_int64(st, i, v);
    return rc == SQLITE_OK ? 0 : store_sql_fail(s, rc, "bind parameter %d", i);
}

/* A C string argument (NULL refused). */
static int bind_str(struct store *s, sqlite3_stmt *st, int i, const char *v, const char *name) {
    int rc;

    if (!v)
        return store_errf(s, -EINVAL, "%s is missing", name);
    rc = sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
    return rc == SQLITE_OK ? 0 : store_sql_fail(s, rc, "bind %s", name);
}

/* A fixed-size char array field: it must hold its NUL. SQLITE_STATIC is safe
 * because every statement is reset and its bindings cleared before we return. */
static int bind_field(struct store *s, sqlite3_stmt *st, int i, const char *f, size_t size,
                      const char *name) {
    size_t n = strnlen(f, size);
    int rc;

    if (n == size)
        return store_errf(s, -EINVAL, "%s is not NUL-terminated within %zu bytes", name, size);
    rc = sqlite3_bind_text(st, i, f, (int)n, SQLITE_STATIC);
    return rc == SQLITE_OK ? 0 : store_sql_fail(s, rc, "bind %s", name);
}

/* Copy a text column into a fixed-size field. The schema's length CHECKs make
 * a value that does not fit a sign of a damaged file. */
static int column_field(struct store *s, sqlite3_stmt *st, int col, char *f, size_t size,
                        const char *name) {
    const unsigned char *t = sqlite3_column_text(st, col);
    int n = sqlite3_column_bytes(st, col);

    if (!t) {
        if (sqlite3_errcode(s->db) == SQLITE_NOMEM)
            return store_errf(s, -ENOMEM, "read %s: out of memory", name);
        n = 0;
    }
    if (n < 0 || (size_t)n >= size)
        return corrupt(s, name);
    if (n > 0)
        memcpy(f, t, (size_t)n);
    f[n] = '\0';
    return 0;
}

/* An integer column that must lie in [min, max]. */
static int column_range(struct store *s, sqlite3_stmt *st, int col, int64_t min, int64_t max,
                        const char *name, int64_t *ret) {
    int64_t v = sqlite3_column_int64(st, col);

    if (v < min || v > max)
        return corrupt(s, name);
    *ret = v;
    return 0;
}

/* Column tables: which parameter or column holds which field. */
struct text_in {
    int idx;
    const char *name;
    const char *buf;
    size_t size;
};
struct int_in {
    int idx;
    int64_t v;
};
struct text_out {
    int idx;
    const char *name;
    char *buf;
    size_t size;
};
struct int_out {
    int idx;
    const char *name;
    int64_t min, max;
    int64_t v;
};

static int read_texts(struct store *s, sqlite3_stmt *st, const struct text_out *t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int r = column_field(s, st, t[i].idx, t[i].buf, t[i].size, t[i].name);
        if (r < 0)
            return r;
    }
    return 0;
}

static int read_ints(struct store *s, sqlite3_stmt *st, struct int_out *c, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int r = column_range(s, st, c[i].idx, c[i].min, c[i].max, c[i].name, &c[i].v);
        if (r < 0)
            return r;
    }
    return 0;
}

static int bind_texts(struct store *s, sqlite3_stmt *st, const struct text_in *t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int r = bind_field(s, st, t[i].idx, t[i].buf, t[i].size, t[i].name);
        if (r < 0)
            return r;
    }
    return 0;
}

static int bind_ints(struct store *s, sqlite3_stmt *st, const struct int_in *c, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int r = bind_i64(s, st, c[i].idx, c[i].v);
        if (r < 0)
            return r;
    }
    return 0;
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

/* Step a cached write statement to completion. */
static int step_done(struct store *s, sqlite3_stmt *st, const char *what) {
    int rc = sqlite3_step(st);
    return rc == SQLITE_DONE ? 0 : store_sql_fail(s, rc, "%s", what);
}

/* ---- transactions ------------------------------------------------------------------------ */

int store_begin(struct store *s) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_BEGIN];

    s->err[0] = '\0';
    if (!sqlite3_get_autocommit(s->db))
        return store_errf(s, -EALREADY, "%s: a transaction is already open", s->path);
    return step_done(s, st, "begin transaction");
}

int store_commit(struct store *s) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_COMMIT];

    s->err[0] = '\0';
    if (sqlite3_get_autocommit(s->db))
        return store_errf(s, -EINVAL, "%s: commit without an open transaction", s->path);
    return step_done(s, st, "commit transaction");
}

void store_rollback(struct store *s) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_ROLLBACK];

    s->err[0] = '\0';
    if (sqlite3_get_autocommit(s->db))
        return;
    /* A failed ROLLBACK leaves nothing better to do; the message stays in
     * s->err for the caller's log. */
    (void)step_done(s, st, "roll back transaction");
}

/* ---- sessions ---------------------------------------------------------------------------- */

/* The guard spec blobs of sessions and guards (opaque bytes, bounded). */
static int bind_spec(struct store *s, sqlite3_stmt *st, int col, const uint8_t *spec, size_t len,
                     size_t max) {
    if (len > max)
        return store_errf(s, -EINVAL, "guard spec too long (%zu bytes)", len);
    /* A zero-length blob must still be a blob (the column is NOT NULL). */
    if (sqlite3_bind_blob(st, col, len ? (const void *)spec : (const void *)"", (int)len,
                          SQLITE_TRANSIENT) != SQLITE_OK)
        return store_errf(s, -ENOMEM, "cannot bind a guard spec");
    return 0;
}

static int read_spec(struct store *s, sqlite3_stmt *st, int col, uint8_t *out, size_t max,
                     size_t *ret_len) {
    const void *blob = sqlite3_column_blob(st, col);
    int n = sqlite3_column_bytes(st, col);

    if (n < 0 || (size_t)n > max)
        return store_errf(s, -EBADMSG, "guard spec of %d bytes (at most %zu)", n, max);
    if (n > 0)
        memcpy(out, blob, (size_t)n);
    *ret_len = (size_t)n;
    return 0;
}

static int bind_session(struct store *s, sqlite3_stmt *st, const struct store_session *ss) {
    const struct text_in texts[] = {
        { 1, "session id", ss->id, sizeof ss->id },
        { 6, "session interface", ss->interface, sizeof ss->interface },
        { 7, "session chain", ss->chain, sizeof ss->chain },
        { 8, "session cgroup", ss->cgroup, sizeof ss->cgroup },
        { 10, "session tmpdir", ss->tmpdir, sizeof ss->tmpdir },
        { 11, "session argv0", ss->argv0, sizeof ss->argv0 },
        { 12, "session cwd", ss->cwd, sizeof ss->cwd },
    };
    /* The uint64 ids are stored as their int64 bits; a policy_version above
     * INT64_MAX becomes -1, which the schema's CHECK refuses. The other range
     * checks are the schema's too. */
    const struct int_in ints[] = {
        { 2, ss->uid },
        { 3, ss->pid },
        { 4, (int64_t)ss->pid_start },
        { 5, ss->scope },
        { 9, (int64_t)ss->cgroup_id },
        { 13, ss->policy_version > INT64_MAX ? -1 : (int64_t)ss->policy_version },
        { 14, ss->state },
        { 15, ss->started_ms },
        { 16, ss->ended_ms },
        { 17, ss->exit_code },
        { 18, ss->signal },
    };
    int r;

    r = bind_texts(s, st, texts, ARRAY_SIZE(texts));
    if (r < 0)
        return r;
    r = bind_ints(s, st, ints, ARRAY_SIZE(ints));
    if (r < 0)
        return r;
    return bind_spec(s, st, 19, ss->guard_spec, ss->guard_spec_len, sizeof ss->guard_spec);
}

static int read_session(struct store *s, sqlite3_stmt *st, struct store_session *ret) {
    struct store_session ss = { 0 };
    const struct text_out texts[] = {
        { 0, "session id", ss.id, sizeof ss.id },
        { 5, "session interface", ss.interface, sizeof ss.interface },
        { 6, "session chain", ss.chain, sizeof ss.chain },
        { 7, "session cgroup", ss.cgroup, sizeof ss.cgroup },
        { 9, "session tmpdir", ss.tmpdir, sizeof ss.tmpdir },
        { 10, "session argv0", ss.argv0, sizeof ss.argv0 },
        { 11, "session cwd", ss.cwd, sizeof ss.cwd },
    };
    struct int_out ints[] = {
        { 1, "session uid", 0, UINT32_MAX, 0 },
        { 2, "session pid", 0, INT64_MAX, 0 },
        { 3, "session pid_start", INT64_MIN, INT64_MAX, 0 },
        { 4, "session scope", 1, 4, 0 },
        { 8, "session cgroup_id", INT64_MIN, INT64_MAX, 0 },
        { 12, "session policy_version", 0, INT64_MAX, 0 },
        { 13, "session state", STORE_SESSION_STARTING, STORE_SESSION_ENDED, 0 },
        { 14, "session started_ms", INT64_MIN, INT64_MAX, 0 },
        { 15, "session ended_ms", INT64_MIN, INT64_MAX, 0 },
        { 16, "session exit_code", INT32_MIN, INT32_MAX, 0 },
        { 17, "session signal", INT32_MIN, INT32_MAX, 0 },
    };
    int r;

    r = read_texts(s, st, texts, ARRAY_SIZE(texts));
    if (r < 0)
        return r;
    r = read_ints(s, st, ints, ARRAY_SIZE(ints));
    if (r < 0)
        return r;
    ss.uid = (uint32_t)ints[0].v;
    ss.pid = ints[1].v;
    ss.pid_start = (uint64_t)ints[2].v;
    ss.scope = (int)ints[3].v;
    ss.cgroup_id = (uint64_t)ints[4].v;
    ss.policy_version = (uint64_t)ints[5].v;
    ss.state = (int)ints[6].v;
    ss.started_ms = ints[7].v;
    ss.ended_ms = ints[8].v;
    ss.exit_code = (int32_t)ints[9].v;
    ss.signal = (int32_t)ints[10].v;
    r = read_spec(s, st, 18, ss.guard_spec, sizeof ss.guard_spec, &ss.guard_spec_len);
    if (r < 0)
        return r;
    *ret = ss;
    return 0;
}

int store_session_insert(struct store *s, const struct store_session *ss) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_SESSION_INSERT];
    int r, rc;

    s->err[0] = '\0';
    if (!ss)
        return store_errf(s, -EINVAL, "no session given");
    r = bind_session(s, st, ss);
    if (r < 0)
        return r;
    rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
        return store_sql_fail(s, rc, "insert session '%s'", ss->id);
    return 0;
}

int store_session_update(struct store *s, const struct store_session *ss) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_SESSION_UPDATE];
    int r, rc;

    s->err[0] = '\0';
    if (!ss)
        return store_errf(s, -EINVAL, "no session given");
    r = bind_session(s, st, ss);
    if (r < 0)
        return r;
    rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
        return store_sql_fail(s, rc, "update session '%s'", ss->id);
    if (sqlite3_changes(s->db) == 0)
        return store_errf(s, -ENOENT, "update session '%s': no such session", ss->id);
    return 0;
}

int store_session_get(struct store *s, const char *id, struct store_session *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_SESSION_GET];
    int r, rc;

    s->err[0] = '\0';
    if (!ret)
        return store_errf(s, -EINVAL, "get session: no result given");
    r = bind_str(s, st, 1, id, "session id");
    if (r < 0)
        return r;
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return store_errf(s, -ENOENT, "no session '%s'", id);
    if (rc != SQLITE_ROW)
        return store_sql_fail(s, rc, "get session '%s'", id);
    return read_session(s, st, ret);
}

/* Read every live session before the caller sees one: the callback may then
 * write (the reaper ends sessions as it walks), and no read stays open. */
static int session_snapshot(struct store *s, struct store_session **ret, size_t *ret_n) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_SESSION_LIVE];
    _cleanup_free_ struct store_session *rows = NULL;
    size_t n = 0, cap = 0;

    for (;;) {
        int r, rc = sqlite3_step(st);

        if (rc == SQLITE_DONE)
            break;
        if (rc != SQLITE_ROW)
            return store_sql_fail(s, rc, "list live sessions");
        r = reserve((void **)&rows, &cap, n, sizeof *rows);
        if (r < 0)
            return store_errf(s, r, "list live sessions: out of memory");
        r = read_session(s, st, &rows[n]);
        if (r < 0)
            return r;
        n++;
    }
    *ret = TAKE_PTR(rows);
    *ret_n = n;
    return 0;
}

int store_session_foreach_live(struct store *s,
                               int (*fn)(const struct store_session *ss, void *userdata),
                               void *userdata) {
    _cleanup_free_ struct store_session *rows = NULL;
    size_t n = 0;
    int r;

    s->err[0] = '\0';
    if (!fn)
        return store_errf(s, -EINVAL, "list live sessions: no callback given");
    r = session_snapshot(s, &rows, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++) {
        r = fn(&rows[i], userdata);
        if (r != 0)
            return r;
    }
    return 0;
}

int store_session_count_live(struct store *s, uint32_t uid_or_all, bool all, uint32_t *ret) {
    _cleanup_reset_ sqlite3_stmt *st =
        s->stmt[all ? STMT_SESSION_COUNT_LIVE_ALL : STMT_SESSION_COUNT_LIVE_UID];
    int64_t count;
    int r, rc;

    s->err[0] = '\0';
    if (!ret)
        return store_errf(s, -EINVAL, "count live sessions: no result given");
    if (!all) {
        r = bind_i64(s, st, 1, uid_or_all);
        if (r < 0)
            return r;
    }
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW)
        return store_sql_fail(s, rc, "count live sessions");
    count = sqlite3_column_int64(st, 0);
    *ret = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
    return 0;
}

int store_session_prune(struct store *s, int64_t cutoff_ms, uint32_t *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_SESSION_PRUNE];
    int64_t n;
    int r;

    s->err[0] = '\0';
    r = bind_i64(s, st, 1, cutoff_ms);
    if (r < 0)
        return r;
    r = step_done(s, st, "prune ended sessions");
    if (r < 0)
        return r;
    n = sqlite3_changes64(s->db);
    if (ret)
        *ret = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    return 0;
}

/* ---- guards ------------------------------------------------------------------------------- */

/* Scope numbers as in Lianyaohu__V1__Scope; storage does not include proto. */
#define STORE_SCOPE_SESSION 1

static int read_guard(struct store *s, sqlite3_stmt *st, struct store_guard *ret) {
    struct store_guard g = { 0 };
    const struct text_out texts[] = {
        { 0, "guard chain", g.chain, sizeof g.chain },
        { 3, "guard interface", g.interface, sizeof g.interface },
        { 5, "guard rules_hash", g.rules_hash, sizeof g.rules_hash },
    };
    struct int_out ints[] = {
        { 1, "guard uid", 0, UINT32_MAX, 0 },
        { 2, "guard scope", 1, 3, 0 },
        { 4, "guard refcount", 0, UINT32_MAX, 0 },
        { 6, "guard created_ms", INT64_MIN, INT64_MAX, 0 },
    };
    int r;

    r = read_texts(s, st, texts, ARRAY_SIZE(texts));
    if (r < 0)
        return r;
    r = read_ints(s, st, ints, ARRAY_SIZE(ints));
    if (r < 0)
        return r;
    g.uid = (uint32_t)ints[0].v;
    g.scope = (int)ints[1].v;
    g.refcount = (uint32_t)ints[2].v;
    g.created_ms = ints[3].v;
    r = read_spec(s, st, 7, g.guard_spec, sizeof g.guard_spec, &g.guard_spec_len);
    if (r < 0)
        return r;
    *ret = g;
    return 0;
}

static int guard_get_one(struct store *s, sqlite3_stmt *st, const char *what,
                         struct store_guard *ret) {
    int rc = sqlite3_step(st);

    if (rc == SQLITE_DONE)
        return store_errf(s, -ENOENT, "no guard %s", what);
    if (rc != SQLITE_ROW)
        return store_sql_fail(s, rc, "get guard %s", what);
    return read_guard(s, st, ret);
}

int store_guard_get(struct store *s, uint32_t uid, int scope, struct store_guard *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GUARD_GET];
    char what[64];
    int r;

    s->err[0] = '\0';
    if (!ret)
        return store_errf(s, -EINVAL, "get guard: no result given");
    if (scope == STORE_SCOPE_SESSION)
        return store_errf(s, -EINVAL,
                          "get guard: session-scope guards are per chain, not per uid");
    r = bind_i64(s, st, 1, uid);
    if (r < 0)
        return r;
    r = bind_i64(s, st, 2, scope);
    if (r < 0)
        return r;
    snprintf(what, sizeof what, "for uid %u scope %d", (unsigned)uid, scope);
    return guard_get_one(s, st, what, ret);
}

int store_guard_get_by_chain(struct store *s, const char *chain, struct store_guard *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GUARD_GET_BY_CHAIN];
    char what[96];
    int r;

    s->err[0] = '\0';
    if (!ret)
        return store_errf(s, -EINVAL, "get guard: no result given");
    r = bind_str(s, st, 1, chain, "guard chain");
    if (r < 0)
        return r;
    snprintf(what, sizeof what, "'%s'", chain);
    return guard_get_one(s, st, what, ret);
}

static int bind_guard(struct store *s, sqlite3_stmt *st, const struct store_guard *g) {
    const struct text_in texts[] = {
        { 1, "guard chain", g->chain, sizeof g->chain },
        { 4, "guard interface", g->interface, sizeof g->interface },
        { 6, "guard rules_hash", g->rules_hash, sizeof g->rules_hash },
    };
    const struct int_in ints[] = {
        { 2, g->uid },
        { 3, g->scope },
        { 5, g->refcount },
        { 7, g->created_ms },
    };
    int r;

    r = bind_texts(s, st, texts, ARRAY_SIZE(texts));
    if (r < 0)
        return r;
    r = bind_ints(s, st, ints, ARRAY_SIZE(ints));
    if (r < 0)
        return r;
    return bind_spec(s, st, 8, g->guard_spec, g->guard_spec_len, sizeof g->guard_spec);
}

int store_guard_put(struct store *s, const struct store_guard *g) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GUARD_PUT];
    int r, rc;

    s->err[0] = '\0';
    if (!g)
        return store_errf(s, -EINVAL, "put guard: no guard given");
    r = bind_guard(s, st, g);
    if (r < 0)
        return r;
    rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
        return store_sql_fail(s, rc, "put guard '%s'", g->chain);
    if (sqlite3_changes(s->db) == 0)
        return store_errf(s, -EEXIST,
                          "put guard '%s': the chain belongs to another uid or scope", g->chain);
    return 0;
}

int store_guard_delete(struct store *s, const char *chain) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GUARD_DELETE];
    int r;

    s->err[0] = '\0';
    r = bind_str(s, st, 1, chain, "guard chain");
    if (r < 0)
        return r;
    r = step_done(s, st, "delete guard");
    if (r < 0)
        return r;
    if (sqlite3_changes(s->db) == 0)
        return store_errf(s, -ENOENT, "delete guard '%s': no such guard", chain);
    return 0;
}

static int guard_snapshot(struct store *s, struct store_guard **ret, size_t *ret_n) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GUARD_ALL];
    _cleanup_free_ struct store_guard *rows = NULL;
    size_t n = 0, cap = 0;

    for (;;) {
        int r, rc = sqlite3_step(st);

        if (rc == SQLITE_DONE)
            break;
        if (rc != SQLITE_ROW)
            return store_sql_fail(s, rc, "list guards");
        r = reserve((void **)&rows, &cap, n, sizeof *rows);
        if (r < 0)
            return store_errf(s, r, "list guards: out of memory");
        r = read_guard(s, st, &rows[n]);
        if (r < 0)
            return r;
        n++;
    }
    *ret = TAKE_PTR(rows);
    *ret_n = n;
    return 0;
}

int store_guard_foreach(struct store *s, int (*fn)(const struct store_guard *g, void *userdata),
                        void *userdata) {
    _cleanup_free_ struct store_guard *rows = NULL;
    size_t n = 0;
    int r;

    s->err[0] = '\0';
    if (!fn)
        return store_errf(s, -EINVAL, "list guards: no callback given");
    r = guard_snapshot(s, &rows, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++) {
        r = fn(&rows[i], userdata);
        if (r != 0)
            return r;
    }
    return 0;
}

/* ---- reap log ------------------------------------------------------------------------------ */

int store_reap_log(struct store *s, const char *object, const char *action, const char *detail) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_REAP_LOG];
    struct timespec ts;
    int r;

    s->err[0] = '\0';
    if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
        return store_errf(s, -errno, "reap log: clock_gettime: %s", strerror(errno));
    r = bind_i64(s, st, 1, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    if (r < 0)
        return r;
    r = bind_str(s, st, 2, object, "reap log object");
    if (r < 0)
        return r;
    r = bind_str(s, st, 3, action, "reap log action");
    if (r < 0)
        return r;
    r = bind_str(s, st, 4, detail ? detail : "", "reap log detail");
    if (r < 0)
        return r;
    return step_done(s, st, "write reap log");
}

/* ---- policy versions -------------------------------------------------------------------- */

void store_policy_version_free(struct store_policy_version *v) {
    if (!v)
        return;
    free(v->blob);
    *v = (struct store_policy_version){ 0 };
}

/* Fills ret with an owned copy of the row. */
static int read_policy(struct store *s, sqlite3_stmt *st, struct store_policy_version *ret) {
    struct int_out ints[] = {
        { 0, "policy version", 1, INT64_MAX, 0 },
        { 2, "policy set_by_uid", 0, UINT32_MAX, 0 },
        { 3, "policy set_ms", INT64_MIN, INT64_MAX, 0 },
    };
    _cleanup_free_ uint8_t *blob = NULL;
    const void *p;
    int n, r;

    r = read_ints(s, st, ints, ARRAY_SIZE(ints));
    if (r < 0)
        return r;
    p = sqlite3_column_blob(st, 1);
    n = sqlite3_column_bytes(st, 1);
    if (!p && sqlite3_errcode(s->db) == SQLITE_NOMEM)
        return store_errf(s, -ENOMEM, "read policy: out of memory");
    if (n < 0 || (n > 0 && !p))
        return corrupt(s, "policy blob");
    if (n > 0) {
        blob = malloc((size_t)n);
        if (!blob)
            return store_errf(s, -ENOMEM, "read policy: out of memory");
        memcpy(blob, p, (size_t)n);
    }
    *ret = (struct store_policy_version){
        .version = (uint64_t)ints[0].v,
        .blob = TAKE_PTR(blob),
        .blob_len = (size_t)n,
        .set_by_uid = (uint32_t)ints[1].v,
        .set_ms = ints[2].v,
    };
    return 0;
}

static int policy_get_one(struct store *s, sqlite3_stmt *st, const char *what,
                          struct store_policy_version *ret) {
    int rc = sqlite3_step(st);

    if (rc == SQLITE_DONE)
        return store_errf(s, -ENOENT, "no policy %s", what);
    if (rc != SQLITE_ROW)
        return store_sql_fail(s, rc, "get policy %s", what);
    return read_policy(s, st, ret);
}

int store_policy_current(struct store *s, struct store_policy_version *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_POLICY_CURRENT];

    s->err[0] = '\0';
    if (!ret)
        return store_errf(s, -EINVAL, "get policy: no result given");
    return policy_get_one(s, st, "version set", ret);
}

int store_policy_get(struct store *s, uint64_t version, struct store_policy_version *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_POLICY_GET];
    char what[64];
    int r;

    s->err[0] = '\0';
    if (!ret)
        return store_errf(s, -EINVAL, "get policy: no result given");
    snprintf(what, sizeof what, "version %llu", (unsigned long long)version);
    if (version > INT64_MAX)
        return store_errf(s, -ENOENT, "no policy %s", what);
    r = bind_i64(s, st, 1, (int64_t)version);
    if (r < 0)
        return r;
    return policy_get_one(s, st, what, ret);
}

int store_policy_append(struct store *s, const uint8_t *blob, size_t len, uint32_t uid,
                        int64_t now_ms, uint64_t *ret_version) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_POLICY_APPEND];
    int r, rc;

    s->err[0] = '\0';
    if (!blob && len > 0)
        return store_errf(s, -EINVAL, "append policy: no blob given");
    /* A non-NULL pointer even for len 0: sqlite binds a NULL pointer as SQL
     * NULL, which NOT NULL would refuse. */
    rc = sqlite3_bind_blob64(st, 1, blob ? (const void *)blob : (const void *)"", len,
                             SQLITE_STATIC);
    if (rc != SQLITE_OK)
        return store_sql_fail(s, rc, "append policy: bind blob of %zu bytes", len);
    r = bind_i64(s, st, 2, uid);
    if (r < 0)
        return r;
    r = bind_i64(s, st, 3, now_ms);
    if (r < 0)
        return r;
    r = step_done(s, st, "append policy version");
    if (r < 0)
        return r;
    /* version is the INTEGER PRIMARY KEY, i.e. the rowid. */
    if (ret_version)
        *ret_version = (uint64_t)sqlite3_last_insert_rowid(s->db);
    return 0;
}

static void policy_rows_free(struct store_policy_version *rows, size_t n) {
    for (size_t i = 0; i < n; i++)
        store_policy_version_free(&rows[i]);
    free(rows);
}

static int policy_snapshot(struct store *s, uint32_t limit, struct store_policy_version **ret,
                           size_t *ret_n) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_POLICY_LIST];
    struct store_policy_version *rows = NULL;
    size_t n = 0, cap = 0;
    int r;

    r = bind_i64(s, st, 1, limit == 0 ? -1 : (int64_t)limit); /* LIMIT -1: no limit */
    if (r < 0)
        return r;
    for (;;) {
        int rc = sqlite3_step(st);

        if (rc == SQLITE_DONE)
            break;
        if (rc != SQLITE_ROW) {
            r = store_sql_fail(s, rc, "list policy versions");
            goto fail;
        }
        r = reserve((void **)&rows, &cap, n, sizeof *rows);
        if (r < 0) {
            r = store_errf(s, r, "list policy versions: out of memory");
            goto fail;
        }
        r = read_policy(s, st, &rows[n]);
        if (r < 0)
            goto fail;
        n++;
    }
    *ret = rows;
    *ret_n = n;
    return 0;
fail:
    policy_rows_free(rows, n);
    return r;
}

int store_policy_foreach(struct store *s, uint32_t limit,
                         int (*fn)(const struct store_policy_version *v, void *userdata),
                         void *userdata) {
    struct store_policy_version *rows = NULL;
    size_t n = 0;
    int r;

    s->err[0] = '\0';
    if (!fn)
        return store_errf(s, -EINVAL, "list policy versions: no callback given");
    r = policy_snapshot(s, limit, &rows, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++) {
        r = fn(&rows[i], userdata);
        if (r != 0)
            break;
    }
    policy_rows_free(rows, n);
    return r;
}

/* ---- meta ---------------------------------------------------------------------------------- */

int store_meta_get(struct store *s, const char *key, char *buf, size_t buflen) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_META_GET];
    const unsigned char *t;
    int n, r, rc;

    s->err[0] = '\0';
    if (!buf)
        return store_errf(s, -EINVAL, "get meta: no buffer given");
    r = bind_str(s, st, 1, key, "meta key");
    if (r < 0)
        return r;
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return store_errf(s, -ENOENT, "no meta key '%s'", key);
    if (rc != SQLITE_ROW)
        return store_sql_fail(s, rc, "get meta key '%s'", key);
    t = sqlite3_column_text(st, 0);
    n = sqlite3_column_bytes(st, 0);
    if (!t && sqlite3_errcode(s->db) == SQLITE_NOMEM)
        return store_errf(s, -ENOMEM, "get meta key '%s': out of memory", key);
    if (n < 0 || (n > 0 && !t))
        return corrupt(s, "meta value");
    if ((size_t)n >= buflen)
        return store_errf(s, -ERANGE, "meta key '%s': value of %d bytes does not fit in %zu",
                          key, n, buflen);
    if (n > 0)
        memcpy(buf, t, (size_t)n);
    buf[n] = '\0';
    return 0;
}

int store_meta_set(struct store *s, const char *key, const char *value) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_META_SET];
    int r;

    s->err[0] = '\0';
    r = bind_str(s, st, 1, key, "meta key");
    if (r < 0)
        return r;
    r = bind_str(s, st, 2, value, "meta value");
    if (r < 0)
        return r;
    return step_done(s, st, "set meta");
}

/* ---- guard gids -------------------------------------------------------------------------- */

int store_guard_gid_get(struct store *s, uint32_t uid, uint32_t *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GGID_GET];
    int r, rc;

    s->err[0] = '\0';
    r = bind_i64(s, st, 1, uid);
    if (r < 0)
        return r;
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return store_errf(s, -ENOENT, "no guard gid for uid %u", uid);
    if (rc != SQLITE_ROW)
        return store_sql_fail(s, rc, "get the guard gid of uid %u", uid);
    int64_t g = sqlite3_column_int64(st, 0);
    if (g < 1 || g > 4294967294)
        return corrupt(s, "guard gid");
    *ret = (uint32_t)g;
    return 0;
}

int store_guard_gid_set(struct store *s, uint32_t uid, uint32_t gid) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GGID_SET];
    int r;

    s->err[0] = '\0';
    if ((r = bind_i64(s, st, 1, uid)) < 0 || (r = bind_i64(s, st, 2, gid)) < 0)
        return r;
    return step_done(s, st, "set a guard gid");
}

int store_guard_gid_free(struct store *s, uint32_t min, uint32_t max, uint32_t *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GGID_FREE];
    int r, rc;

    s->err[0] = '\0';
    if (min == 0 || min > max)
        return store_errf(s, -EINVAL, "guard gid range %u-%u", min, max);
    if ((r = bind_i64(s, st, 1, min)) < 0 || (r = bind_i64(s, st, 2, max)) < 0)
        return r;
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return store_errf(s, -ENOSPC, "every guard gid in %u-%u is taken", min, max);
    if (rc != SQLITE_ROW)
        return store_sql_fail(s, rc, "find a free guard gid");
    int64_t g = sqlite3_column_int64(st, 0);
    if (g < min || g > max)
        return store_errf(s, -ENOSPC, "every guard gid in %u-%u is taken", min, max);
    *ret = (uint32_t)g;
    return 0;
}
