/* state.db access: where the file may live (the state dir checks), opening it,
 * transactions, and the typed reads and writes of sessions, guards, the reap
 * log, policy versions and metadata. The schema itself is migrate.c's.
 *
 * Must never: log (failures fill s->sq.err; the daemon logs once, at its
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
    /* ids are lowercase hex: every id that starts with P lies in [P, P || 'g') */
    [STMT_SESSION_PREFIX] = "SELECT id FROM sessions WHERE id >= ?1 AND id < ?1 || 'g' "
                            "AND length(id) = 16 AND (?2 OR uid = ?3) ORDER BY id LIMIT ?4",
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

const char *store_errmsg(const struct store *s) {
    return s ? s->sq.err : "";
}

/* ---- the state dir -------------------------------------------------------------------- */

static int open_state_dir(struct store *s, const char *dir, int *ret_fd) {
    char err[STORE_ERR_MAX];
    int r = storage_open_private_dir(dir, true, "state dir", "security state", err, sizeof err,
                                     ret_fd);
    return r < 0 ? sqlu_errf(&s->sq, r, "%s", err) : 0;
}

/* Create state.db ourselves so it is 0600 from the start (sqlite would use
 * 0644 minus umask), and refuse one we did not make. */
static int prepare_db_file(struct store *s, int dirfd) {
    _cleanup_close_ int fd = -1;
    struct stat st;

    fd = openat(dirfd, STORE_DB_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == ELOOP)
            return sqlu_errf(&s->sq, -EPERM, "%s is a symlink; move it away", s->sq.path);
        return sqlu_errf(&s->sq, -errno, "cannot open %s: %s", s->sq.path, strerror(errno));
    }
    if (fstat(fd, &st) < 0)
        return sqlu_errf(&s->sq, -errno, "%s: fstat: %s", s->sq.path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return sqlu_errf(&s->sq, -EPERM, "%s is not a regular file; move it away", s->sq.path);
    if (st.st_uid != geteuid())
        return sqlu_errf(&s->sq, -EPERM, "%s is owned by uid %u, not %u; move it away", s->sq.path,
                         (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_nlink != 1)
        return sqlu_errf(&s->sq, -EPERM, "%s has %lu hard links; move it away", s->sq.path,
                         (unsigned long)st.st_nlink);
    if ((st.st_mode & 07777) != 0600 && fchmod(fd, 0600) < 0)
        return sqlu_errf(&s->sq, -errno, "%s: chmod 0600: %s", s->sq.path, strerror(errno));
    return 0;
}

/* ---- opening ---------------------------------------------------------------------------- */

static int open_db(struct store *s) {
    return sqlu_open(&s->sq, &s->db, false, "open", "state dir");
}

static int check_db(struct store *s) {
    char text[160];
    int64_t version = 0;
    int r;

    /* The first read: a locked, corrupt or foreign file shows up here. Look
     * at the version before changing anything (even the journal mode) in a
     * file a newer lyhd wrote. */
    r = store_read_version(s, &version);
    if (r < 0)
        return r;

    r = sqlu_wal(&s->sq, s->db, "state dir");
    if (r < 0)
        return r;
    /* NORMAL (WAL): a committed change survives a crash of lyhd (kill -9,
     * abort), which is what the reaper needs: every row precedes the kernel
     * change it describes. Only an OS crash or power loss can lose the last
     * commits, and that also wipes the kernel state they describe (rules,
     * cgroups, processes), so there is nothing left to reap. FULL would add
     * an fsync to every state change on the launch path (measured: ~3.8 ms
     * of a 10.7 ms launch). */
    r = sqlu_exec(&s->sq, s->db,
                  "PRAGMA synchronous = NORMAL;"
                  "PRAGMA foreign_keys = ON;"
                  "PRAGMA cell_size_check = ON;",
                  "set pragmas");
    if (r < 0)
        return r;

    r = sqlu_query_text(&s->sq, s->db, "PRAGMA quick_check", text, sizeof text);
    if (r < 0)
        return r;
    if (strcmp(text, "ok") != 0) {
        char detail[200];

        snprintf(detail, sizeof detail, "quick_check: %s", text);
        return sqlu_corrupt(&s->sq, detail);
    }
    return 0;
}

static int prepare_statements(struct store *s) {
    return sqlu_prepare_all(&s->sq, s->db, stmt_sql, s->stmt, STMT__MAX);
}

static int open_internal(struct store *s, const char *dir) {
    _cleanup_close_ int dirfd = -1;
    int n, r;

    r = sqlu_init(&s->sq, STORE_BUSY_TIMEOUT_MS, "");
    if (r < 0)
        return r;
    n = snprintf(s->sq.path, sizeof s->sq.path, "%s/%s", dir, STORE_DB_NAME);
    if (n < 0 || (size_t)n >= sizeof s->sq.path)
        return sqlu_errf(&s->sq, -ENAMETOOLONG, "state dir path is too long");

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
        snprintf(open_err, sizeof open_err, "%s", s->sq.err);
        goto fail;
    }
    s->sq.err[0] = '\0';
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
    sqlu_rollback_open(s->db);
    for (size_t i = 0; i < STMT__MAX; i++)
        (void)sqlite3_finalize(s->stmt[i]);
    /* _v2: should anything still be unfinalized, free it later rather than
     * leak the connection. The last connection checkpoints the WAL here. */
    (void)sqlite3_close_v2(s->db);
    free(s);
}

/* ---- binding and reading -------------------------------------------------------------- */

/* A C string argument (NULL refused). */
static int bind_str(struct store *s, sqlite3_stmt *st, int i, const char *v, const char *name) {
    int rc;

    if (!v)
        return sqlu_errf(&s->sq, -EINVAL, "%s is missing", name);
    rc = sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
    return rc == SQLITE_OK ? 0 : sqlu_fail(&s->sq, s->db, rc, "bind %s", name);
}

/* A fixed-size char array field: it must hold its NUL. SQLITE_STATIC is safe
 * because every statement is reset and its bindings cleared before we return. */
static int bind_field(struct store *s, sqlite3_stmt *st, int i, const char *f, size_t size,
                      const char *name) {
    size_t n = strnlen(f, size);
    int rc;

    if (n == size)
        return sqlu_errf(&s->sq, -EINVAL, "%s is not NUL-terminated within %zu bytes", name, size);
    rc = sqlite3_bind_text(st, i, f, (int)n, SQLITE_STATIC);
    return rc == SQLITE_OK ? 0 : sqlu_fail(&s->sq, s->db, rc, "bind %s", name);
}

/* Copy a text column into a fixed-size field. The schema's length CHECKs make
 * a value that does not fit a sign of a damaged file. */
static int column_field(struct store *s, sqlite3_stmt *st, int col, char *f, size_t size,
                        const char *name) {
    int r = sqlu_column_text_copy(st, col, f, size);

    if (r == -ENOMEM)
        return sqlu_errf(&s->sq, -ENOMEM, "read %s: out of memory", name);
    return r < 0 ? sqlu_corrupt(&s->sq, name) : 0;
}

/* An integer column that must lie in [min, max]. */
static int column_range(struct store *s, sqlite3_stmt *st, int col, int64_t min, int64_t max,
                        const char *name, int64_t *ret) {
    int64_t v = sqlite3_column_int64(st, col);

    if (v < min || v > max)
        return sqlu_corrupt(&s->sq, name);
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

/* A row's text and integer columns, read (texts first) or bound. */
static int read_cols(struct store *s, sqlite3_stmt *st, const struct text_out *t, size_t nt,
                     struct int_out *c, size_t nc) {
    int r = 0;

    for (size_t i = 0; i < nt && r >= 0; i++)
        r = column_field(s, st, t[i].idx, t[i].buf, t[i].size, t[i].name);
    for (size_t i = 0; i < nc && r >= 0; i++)
        r = column_range(s, st, c[i].idx, c[i].min, c[i].max, c[i].name, &c[i].v);
    return r;
}

static int bind_cols(struct store *s, sqlite3_stmt *st, const struct text_in *t, size_t nt,
                     const struct int_in *c, size_t nc) {
    int r = 0;

    for (size_t i = 0; i < nt && r >= 0; i++)
        r = bind_field(s, st, t[i].idx, t[i].buf, t[i].size, t[i].name);
    for (size_t i = 0; i < nc && r >= 0; i++)
        r = sqlu_bind_i64(&s->sq, st, c[i].idx, c[i].v);
    return r;
}

/* Step a lookup to its row: -ENOENT ("no NOUN WHAT") when there is none. */
static int step_row(struct store *s, sqlite3_stmt *st, const char *noun, const char *what) {
    int rc = sqlite3_step(st);

    if (rc == SQLITE_DONE)
        return sqlu_errf(&s->sq, -ENOENT, "no %s %s", noun, what);
    if (rc != SQLITE_ROW)
        return sqlu_fail(&s->sq, s->db, rc, "get %s %s", noun, what);
    return 0;
}

/* Read every row st selects before the caller sees one (the callback may then
 * write: the reaper ends sessions as it walks; and no read stays open), then
 * hand each to visit(row, cb) until one returns non-zero, which is returned. */
static int walk_rows(struct store *s, sqlite3_stmt *st, size_t elem, sqlu_read_fn read,
                     void (*free_row)(void *row), const char *what,
                     int (*visit)(const void *row, void *cb), void *cb) {
    void *rows = NULL;
    size_t n = 0;
    int r;

    r = sqlu_collect(&s->sq, st, elem, read, s, free_row, what, &rows, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n && r == 0; i++)
        r = visit((const char *)rows + i * elem, cb);
    for (size_t i = 0; free_row && i < n; i++)
        free_row((char *)rows + i * elem);
    free(rows);
    return r;
}

/* ---- transactions ------------------------------------------------------------------------ */

int store_begin(struct store *s) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_BEGIN];

    s->sq.err[0] = '\0';
    if (!sqlite3_get_autocommit(s->db))
        return sqlu_errf(&s->sq, -EALREADY, "%s: a transaction is already open", s->sq.path);
    return sqlu_step_done(&s->sq, st, "begin transaction");
}

int store_commit(struct store *s) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_COMMIT];

    s->sq.err[0] = '\0';
    if (sqlite3_get_autocommit(s->db))
        return sqlu_errf(&s->sq, -EINVAL, "%s: commit without an open transaction", s->sq.path);
    return sqlu_step_done(&s->sq, st, "commit transaction");
}

void store_rollback(struct store *s) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_ROLLBACK];

    s->sq.err[0] = '\0';
    if (sqlite3_get_autocommit(s->db))
        return;
    /* A failed ROLLBACK leaves nothing better to do; the message stays in
     * s->sq.err for the caller's log. */
    (void)sqlu_step_done(&s->sq, st, "roll back transaction");
}

/* ---- sessions ---------------------------------------------------------------------------- */

/* The guard spec blobs of sessions and guards (opaque bytes, bounded). */
static int bind_spec(struct store *s, sqlite3_stmt *st, int col, const uint8_t *spec, size_t len,
                     size_t max) {
    if (len > max)
        return sqlu_errf(&s->sq, -EINVAL, "guard spec too long (%zu bytes)", len);
    /* A zero-length blob must still be a blob (the column is NOT NULL). */
    if (sqlite3_bind_blob(st, col, len ? (const void *)spec : (const void *)"", (int)len,
                          SQLITE_TRANSIENT) != SQLITE_OK)
        return sqlu_errf(&s->sq, -ENOMEM, "cannot bind a guard spec");
    return 0;
}

static int read_spec(struct store *s, sqlite3_stmt *st, int col, uint8_t *out, size_t max,
                     size_t *ret_len) {
    const void *blob;
    size_t n;
    int r = sqlu_column_blob(st, col, &blob, &n);

    if (r == -ENOMEM)
        return sqlu_errf(&s->sq, -ENOMEM, "read guard spec: out of memory");
    if (r < 0 || n > max)
        return sqlu_errf(&s->sq, -EBADMSG, "guard spec of %zu bytes (at most %zu)", r < 0 ? 0 : n,
                         max);
    memcpy(out, blob, n);
    *ret_len = n;
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

    r = bind_cols(s, st, texts, ARRAY_SIZE(texts), ints, ARRAY_SIZE(ints));
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

    r = read_cols(s, st, texts, ARRAY_SIZE(texts), ints, ARRAY_SIZE(ints));
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

/* Insert or update (verb, with its statement) a session's row. */
static int session_write(struct store *s, enum store_stmt which, const char *verb,
                         const struct store_session *ss) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[which];
    int r, rc;

    s->sq.err[0] = '\0';
    if (!ss)
        return sqlu_errf(&s->sq, -EINVAL, "no session given");
    r = bind_session(s, st, ss);
    if (r < 0)
        return r;
    rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
        return sqlu_fail(&s->sq, s->db, rc, "%s session '%s'", verb, ss->id);
    return 0;
}

int store_session_insert(struct store *s, const struct store_session *ss) {
    return session_write(s, STMT_SESSION_INSERT, "insert", ss);
}

int store_session_update(struct store *s, const struct store_session *ss) {
    int r = session_write(s, STMT_SESSION_UPDATE, "update", ss);

    if (r < 0)
        return r;
    /* sqlite3_changes counts the UPDATE's rows; the reset did not change it. */
    if (sqlite3_changes(s->db) == 0)
        return sqlu_errf(&s->sq, -ENOENT, "update session '%s': no such session", ss->id);
    return 0;
}

int store_session_get(struct store *s, const char *id, struct store_session *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_SESSION_GET];
    char what[STORE_ERR_MAX];
    int r;

    s->sq.err[0] = '\0';
    if (!ret)
        return sqlu_errf(&s->sq, -EINVAL, "get session: no result given");
    r = bind_str(s, st, 1, id, "session id");
    if (r < 0)
        return r;
    snprintf(what, sizeof what, "'%s'", id);
    r = step_row(s, st, "session", what);
    return r < 0 ? r : read_session(s, st, ret);
}

static int read_session_row(void *s, sqlite3_stmt *st, void *row) {
    return read_session(s, st, row);
}

struct session_cb {
    int (*fn)(const struct store_session *ss, void *userdata);
    void *userdata;
};

static int visit_session(const void *row, void *cb) {
    const struct session_cb *c = cb;
    return c->fn(row, c->userdata);
}

int store_session_foreach_live(struct store *s,
                               int (*fn)(const struct store_session *ss, void *userdata),
                               void *userdata) {
    struct session_cb cb = { fn, userdata };

    s->sq.err[0] = '\0';
    if (!fn)
        return sqlu_errf(&s->sq, -EINVAL, "list live sessions: no callback given");
    return walk_rows(s, s->stmt[STMT_SESSION_LIVE], sizeof(struct store_session), read_session_row,
                     NULL, "list live sessions", visit_session, &cb);
}

int store_session_count_live(struct store *s, uint32_t uid_or_all, bool all, uint32_t *ret) {
    _cleanup_reset_ sqlite3_stmt *st =
        s->stmt[all ? STMT_SESSION_COUNT_LIVE_ALL : STMT_SESSION_COUNT_LIVE_UID];
    int64_t count;
    int r, rc;

    s->sq.err[0] = '\0';
    if (!ret)
        return sqlu_errf(&s->sq, -EINVAL, "count live sessions: no result given");
    if (!all) {
        r = sqlu_bind_i64(&s->sq, st, 1, uid_or_all);
        if (r < 0)
            return r;
    }
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW)
        return sqlu_fail(&s->sq, s->db, rc, "count live sessions");
    count = sqlite3_column_int64(st, 0);
    *ret = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count;
    return 0;
}

int store_session_ids_by_prefix(struct store *s, const char *prefix, bool all, uint32_t uid,
                                char (*out)[17], size_t max, size_t *ret_n) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_SESSION_PREFIX];
    size_t n = 0, len = prefix ? strlen(prefix) : 0;
    int r, rc;

    s->sq.err[0] = '\0';
    if (!ret_n || len == 0 || len > 16 || strspn(prefix, "0123456789abcdef") != len ||
        max > 64)
        return sqlu_errf(&s->sq, -EINVAL, "session prefix: 1 to 16 lowercase hex digits");
    r = bind_str(s, st, 1, prefix, "session prefix");
    r = r ?: sqlu_bind_i64(&s->sq, st, 2, all);
    r = r ?: sqlu_bind_i64(&s->sq, st, 3, uid);
    r = r ?: sqlu_bind_i64(&s->sq, st, 4, (int64_t)max + 1);
    if (r < 0)
        return r;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n < max && sqlu_column_text_copy(st, 0, out[n], sizeof(out[n])) < 0)
            return sqlu_corrupt(&s->sq, "a session id of over 16 bytes");
        n++;
    }
    if (rc != SQLITE_DONE)
        return sqlu_fail(&s->sq, s->db, rc, "find sessions by prefix");
    *ret_n = n;
    return 0;
}

int store_session_prune(struct store *s, int64_t cutoff_ms, uint32_t *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_SESSION_PRUNE];
    int64_t n;
    int r;

    s->sq.err[0] = '\0';
    r = sqlu_bind_i64(&s->sq, st, 1, cutoff_ms);
    if (r < 0)
        return r;
    r = sqlu_step_done(&s->sq, st, "prune ended sessions");
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

    r = read_cols(s, st, texts, ARRAY_SIZE(texts), ints, ARRAY_SIZE(ints));
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

int store_guard_get(struct store *s, uint32_t uid, int scope, struct store_guard *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GUARD_GET];
    char what[64];
    int r;

    s->sq.err[0] = '\0';
    if (!ret)
        return sqlu_errf(&s->sq, -EINVAL, "get guard: no result given");
    if (scope == STORE_SCOPE_SESSION)
        return sqlu_errf(&s->sq, -EINVAL,
                         "get guard: session-scope guards are per chain, not per uid");
    r = sqlu_bind_i64(&s->sq, st, 1, uid);
    if (r < 0)
        return r;
    r = sqlu_bind_i64(&s->sq, st, 2, scope);
    if (r < 0)
        return r;
    snprintf(what, sizeof what, "for uid %u scope %d", (unsigned)uid, scope);
    r = step_row(s, st, "guard", what);
    return r < 0 ? r : read_guard(s, st, ret);
}

int store_guard_get_by_chain(struct store *s, const char *chain, struct store_guard *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GUARD_GET_BY_CHAIN];
    char what[96];
    int r;

    s->sq.err[0] = '\0';
    if (!ret)
        return sqlu_errf(&s->sq, -EINVAL, "get guard: no result given");
    r = bind_str(s, st, 1, chain, "guard chain");
    if (r < 0)
        return r;
    snprintf(what, sizeof what, "'%s'", chain);
    r = step_row(s, st, "guard", what);
    return r < 0 ? r : read_guard(s, st, ret);
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

    r = bind_cols(s, st, texts, ARRAY_SIZE(texts), ints, ARRAY_SIZE(ints));
    if (r < 0)
        return r;
    return bind_spec(s, st, 8, g->guard_spec, g->guard_spec_len, sizeof g->guard_spec);
}

int store_guard_put(struct store *s, const struct store_guard *g) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GUARD_PUT];
    int r, rc;

    s->sq.err[0] = '\0';
    if (!g)
        return sqlu_errf(&s->sq, -EINVAL, "put guard: no guard given");
    r = bind_guard(s, st, g);
    if (r < 0)
        return r;
    rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
        return sqlu_fail(&s->sq, s->db, rc, "put guard '%s'", g->chain);
    if (sqlite3_changes(s->db) == 0)
        return sqlu_errf(&s->sq, -EEXIST,
                         "put guard '%s': the chain belongs to another uid or scope", g->chain);
    return 0;
}

int store_guard_delete(struct store *s, const char *chain) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GUARD_DELETE];
    int r;

    s->sq.err[0] = '\0';
    r = bind_str(s, st, 1, chain, "guard chain");
    if (r < 0)
        return r;
    r = sqlu_step_done(&s->sq, st, "delete guard");
    if (r < 0)
        return r;
    if (sqlite3_changes(s->db) == 0)
        return sqlu_errf(&s->sq, -ENOENT, "delete guard '%s': no such guard", chain);
    return 0;
}

static int read_guard_row(void *s, sqlite3_stmt *st, void *row) {
    return read_guard(s, st, row);
}

struct guard_cb {
    int (*fn)(const struct store_guard *g, void *userdata);
    void *userdata;
};

static int visit_guard(const void *row, void *cb) {
    const struct guard_cb *c = cb;
    return c->fn(row, c->userdata);
}

int store_guard_foreach(struct store *s, int (*fn)(const struct store_guard *g, void *userdata),
                        void *userdata) {
    struct guard_cb cb = { fn, userdata };

    s->sq.err[0] = '\0';
    if (!fn)
        return sqlu_errf(&s->sq, -EINVAL, "list guards: no callback given");
    return walk_rows(s, s->stmt[STMT_GUARD_ALL], sizeof(struct store_guard), read_guard_row, NULL,
                     "list guards", visit_guard, &cb);
}

/* ---- reap log ------------------------------------------------------------------------------ */

int store_reap_log(struct store *s, const char *object, const char *action, const char *detail) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_REAP_LOG];
    struct timespec ts;
    int r;

    s->sq.err[0] = '\0';
    if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
        return sqlu_errf(&s->sq, -errno, "reap log: clock_gettime: %s", strerror(errno));
    r = sqlu_bind_i64(&s->sq, st, 1, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
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
    return sqlu_step_done(&s->sq, st, "write reap log");
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
    size_t n;
    int r;

    r = read_cols(s, st, NULL, 0, ints, ARRAY_SIZE(ints));
    if (r < 0)
        return r;
    r = sqlu_column_blob(st, 1, &p, &n);
    if (r == -ENOMEM)
        return sqlu_errf(&s->sq, -ENOMEM, "read policy: out of memory");
    if (r < 0)
        return sqlu_corrupt(&s->sq, "policy blob");
    if (n > 0) {
        blob = malloc(n);
        if (!blob)
            return sqlu_errf(&s->sq, -ENOMEM, "read policy: out of memory");
        memcpy(blob, p, n);
    }
    *ret = (struct store_policy_version){
        .version = (uint64_t)ints[0].v,
        .blob = TAKE_PTR(blob),
        .blob_len = n,
        .set_by_uid = (uint32_t)ints[1].v,
        .set_ms = ints[2].v,
    };
    return 0;
}

int store_policy_current(struct store *s, struct store_policy_version *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_POLICY_CURRENT];
    int r;

    s->sq.err[0] = '\0';
    if (!ret)
        return sqlu_errf(&s->sq, -EINVAL, "get policy: no result given");
    r = step_row(s, st, "policy", "version set");
    return r < 0 ? r : read_policy(s, st, ret);
}

int store_policy_get(struct store *s, uint64_t version, struct store_policy_version *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_POLICY_GET];
    char what[64];
    int r;

    s->sq.err[0] = '\0';
    if (!ret)
        return sqlu_errf(&s->sq, -EINVAL, "get policy: no result given");
    snprintf(what, sizeof what, "version %llu", (unsigned long long)version);
    if (version > INT64_MAX)
        return sqlu_errf(&s->sq, -ENOENT, "no policy %s", what);
    r = sqlu_bind_i64(&s->sq, st, 1, (int64_t)version);
    if (r < 0)
        return r;
    r = step_row(s, st, "policy", what);
    return r < 0 ? r : read_policy(s, st, ret);
}

int store_policy_append(struct store *s, const uint8_t *blob, size_t len, uint32_t uid,
                        int64_t now_ms, uint64_t *ret_version) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_POLICY_APPEND];
    int r, rc;

    s->sq.err[0] = '\0';
    if (!blob && len > 0)
        return sqlu_errf(&s->sq, -EINVAL, "append policy: no blob given");
    /* A non-NULL pointer even for len 0: sqlite binds a NULL pointer as SQL
     * NULL, which NOT NULL would refuse. */
    rc = sqlite3_bind_blob64(st, 1, blob ? (const void *)blob : (const void *)"", len,
                             SQLITE_STATIC);
    if (rc != SQLITE_OK)
        return sqlu_fail(&s->sq, s->db, rc, "append policy: bind blob of %zu bytes", len);
    r = sqlu_bind_i64(&s->sq, st, 2, uid);
    if (r < 0)
        return r;
    r = sqlu_bind_i64(&s->sq, st, 3, now_ms);
    if (r < 0)
        return r;
    r = sqlu_step_done(&s->sq, st, "append policy version");
    if (r < 0)
        return r;
    /* version is the INTEGER PRIMARY KEY, i.e. the rowid. */
    if (ret_version)
        *ret_version = (uint64_t)sqlite3_last_insert_rowid(s->db);
    return 0;
}

static int read_policy_row(void *s, sqlite3_stmt *st, void *row) {
    return read_policy(s, st, row);
}

static void policy_row_free(void *row) {
    store_policy_version_free(row);
}

struct policy_cb {
    int (*fn)(const struct store_policy_version *v, void *userdata);
    void *userdata;
};

static int visit_policy(const void *row, void *cb) {
    const struct policy_cb *c = cb;
    return c->fn(row, c->userdata);
}

int store_policy_foreach(struct store *s, uint32_t limit,
                         int (*fn)(const struct store_policy_version *v, void *userdata),
                         void *userdata) {
    sqlite3_stmt *st = s->stmt[STMT_POLICY_LIST];
    struct policy_cb cb = { fn, userdata };
    int r;

    s->sq.err[0] = '\0';
    if (!fn)
        return sqlu_errf(&s->sq, -EINVAL, "list policy versions: no callback given");
    r = sqlu_bind_i64(&s->sq, st, 1, limit == 0 ? -1 : (int64_t)limit); /* LIMIT -1: no limit */
    if (r < 0) {
        sqlu_stmt_resetp(&st);
        return r;
    }
    return walk_rows(s, st, sizeof(struct store_policy_version), read_policy_row, policy_row_free,
                     "list policy versions", visit_policy, &cb);
}

/* ---- meta ---------------------------------------------------------------------------------- */

int store_meta_get(struct store *s, const char *key, char *buf, size_t buflen) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_META_GET];
    char what[STORE_ERR_MAX];
    const char *t;
    size_t n;
    int r;

    s->sq.err[0] = '\0';
    if (!buf)
        return sqlu_errf(&s->sq, -EINVAL, "get meta: no buffer given");
    r = bind_str(s, st, 1, key, "meta key");
    if (r < 0)
        return r;
    snprintf(what, sizeof what, "'%s'", key);
    r = step_row(s, st, "meta key", what);
    if (r < 0)
        return r;
    r = sqlu_column_text(st, 0, &t, &n);
    if (r == -ENOMEM)
        return sqlu_errf(&s->sq, -ENOMEM, "get meta key '%s': out of memory", key);
    if (r < 0)
        return sqlu_corrupt(&s->sq, "meta value");
    if (n >= buflen)
        return sqlu_errf(&s->sq, -ERANGE, "meta key '%s': value of %zu bytes does not fit in %zu",
                         key, n, buflen);
    memcpy(buf, t, n);
    buf[n] = '\0';
    return 0;
}

int store_meta_set(struct store *s, const char *key, const char *value) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_META_SET];
    int r;

    s->sq.err[0] = '\0';
    r = bind_str(s, st, 1, key, "meta key");
    if (r < 0)
        return r;
    r = bind_str(s, st, 2, value, "meta value");
    if (r < 0)
        return r;
    return sqlu_step_done(&s->sq, st, "set meta");
}

/* ---- guard gids -------------------------------------------------------------------------- */

int store_guard_gid_get(struct store *s, uint32_t uid, uint32_t *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GGID_GET];
    int r, rc;

    s->sq.err[0] = '\0';
    r = sqlu_bind_i64(&s->sq, st, 1, uid);
    if (r < 0)
        return r;
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return sqlu_errf(&s->sq, -ENOENT, "no guard gid for uid %u", uid);
    if (rc != SQLITE_ROW)
        return sqlu_fail(&s->sq, s->db, rc, "get the guard gid of uid %u", uid);
    int64_t g = sqlite3_column_int64(st, 0);
    if (g < 1 || g > 4294967294)
        return sqlu_corrupt(&s->sq, "guard gid");
    *ret = (uint32_t)g;
    return 0;
}

int store_guard_gid_set(struct store *s, uint32_t uid, uint32_t gid) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GGID_SET];
    int r;

    s->sq.err[0] = '\0';
    if ((r = sqlu_bind_i64(&s->sq, st, 1, uid)) < 0 || (r = sqlu_bind_i64(&s->sq, st, 2, gid)) < 0)
        return r;
    return sqlu_step_done(&s->sq, st, "set a guard gid");
}

int store_guard_gid_free(struct store *s, uint32_t min, uint32_t max, uint32_t *ret) {
    _cleanup_reset_ sqlite3_stmt *st = s->stmt[STMT_GGID_FREE];
    int r, rc;

    s->sq.err[0] = '\0';
    if (min == 0 || min > max)
        return sqlu_errf(&s->sq, -EINVAL, "guard gid range %u-%u", min, max);
    if ((r = sqlu_bind_i64(&s->sq, st, 1, min)) < 0 || (r = sqlu_bind_i64(&s->sq, st, 2, max)) < 0)
        return r;
    rc = sqlite3_step(st);
    if (rc == SQLITE_DONE)
        return sqlu_errf(&s->sq, -ENOSPC, "every guard gid in %u-%u is taken", min, max);
    if (rc != SQLITE_ROW)
        return sqlu_fail(&s->sq, s->db, rc, "find a free guard gid");
    int64_t g = sqlite3_column_int64(st, 0);
    if (g < min || g > max)
        return sqlu_errf(&s->sq, -ENOSPC, "every guard gid in %u-%u is taken", min, max);
    *ret = (uint32_t)g;
    return 0;
}
