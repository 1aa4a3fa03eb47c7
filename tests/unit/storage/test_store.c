/* Unit tests for storage/: opening state.db (fresh, again, newer, corrupt,
 * locked, insecure places), and every typed accessor. Each test gets its own
 * mkdtemp dir under /tmp, removed afterwards. A second, raw sqlite3
 * connection checks what actually landed in the file. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/macros.h"
#include "storage/store.h"

struct fx {
    char root[64];  /* mkdtemp dir, removed in teardown */
    char dir[128];  /* root/state: the state dir (not created by setup) */
    char db[160];   /* dir/state.db */
    struct store *s;
};

/* ---- helpers --------------------------------------------------------------------------- */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int64_t now_ms(clockid_t clock) {
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void must_open(struct fx *f) {
    const char *err = NULL;
    int r = store_open(f->dir, &f->s, &err);

    if (r < 0)
        fail_msg("store_open(%s) = %d: %s", f->dir, r, err ? err : "(no message)");
    assert_non_null(f->s);
    assert_string_equal(store_errmsg(f->s), "");
}

static void reopen(struct fx *f) {
    store_close(f->s);
    f->s = NULL;
    must_open(f);
}

/* Open that must fail with want; returns the message. */
static const char *open_fails(const char *dir, int want) {
    struct store *s = NULL;
    const char *err = NULL;
    int r = store_open(dir, &s, &err);

    if (r != want)
        fail_msg("store_open(%s) = %d, want %d (%s)", dir, r, want, err ? err : "no message");
    assert_null(s);
    assert_non_null(err);
    assert_true(strlen(err) > 0);
    return err;
}

static sqlite3 *raw_open(const char *path) {
    sqlite3 *db = NULL;

    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
                     SQLITE_OK);
    return db;
}

static void raw_exec(sqlite3 *db, const char *sql) {
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);

    if (rc != SQLITE_OK)
        fail_msg("%s: %s", sql, msg ? msg : sqlite3_errstr(rc));
}

static int64_t raw_int(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st = NULL;
    int64_t v;

    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* First column of the first row, copied into buf. */
static const char *raw_text(sqlite3 *db, const char *sql, char *buf, size_t len) {
    sqlite3_stmt *st = NULL;

    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return buf;
}

/* All rows' column 3 ("detail") of EXPLAIN QUERY PLAN, joined. */
static const char *raw_plan(sqlite3 *db, const char *sql, char *buf, size_t len) {
    char q[512];
    sqlite3_stmt *st = NULL;
    size_t used = 0;

    snprintf(q, sizeof q, "EXPLAIN QUERY PLAN %s", sql);
    assert_int_equal(sqlite3_prepare_v2(db, q, -1, &st, NULL), SQLITE_OK);
    buf[0] = '\0';
    while (sqlite3_step(st) == SQLITE_ROW && used < len)
        used += (size_t)snprintf(buf + used, len - used, "%s; ",
                                 (const char *)sqlite3_column_text(st, 3));
    sqlite3_finalize(st);
    return buf;
}

static void write_file(const char *path, const void *p, size_t n, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, p, n), (ssize_t)n);
    close(fd);
}

static mode_t mode_of(const char *path) {
    struct stat st;

    assert_int_equal(lstat(path, &st), 0);
    return st.st_mode & 07777;
}

static struct store_session mk_session(const char *id, uint32_t uid, int64_t started_ms,
                                       int state) {
    struct store_session ss = { 0 };

    snprintf(ss.id, sizeof ss.id, "%s", id);
    ss.uid = uid;
    ss.scope = 1;
    snprintf(ss.interface, sizeof ss.interface, "tun0");
    snprintf(ss.chain, sizeof ss.chain, "lyh-%s", id);
    snprintf(ss.cwd, sizeof ss.cwd, "/home/u");
    ss.state = state;
    ss.started_ms = started_ms;
    ss.ended_ms = state == STORE_SESSION_ENDED ? started_ms + 50 : 0;
    ss.exit_code = -1;
    return ss;
}

static void assert_session_eq(const struct store_session *a, const struct store_session *b) {
    assert_string_equal(a->id, b->id);
    assert_int_equal(a->uid, b->uid);
    assert_int_equal(a->pid, b->pid);
    assert_true(a->pid_start == b->pid_start);
    assert_int_equal(a->scope, b->scope);
    assert_string_equal(a->interface, b->interface);
    assert_string_equal(a->chain, b->chain);
    assert_string_equal(a->cgroup, b->cgroup);
    assert_true(a->cgroup_id == b->cgroup_id);
    assert_string_equal(a->tmpdir, b->tmpdir);
    assert_string_equal(a->argv0, b->argv0);
    assert_string_equal(a->cwd, b->cwd);
    assert_true(a->policy_version == b->policy_version);
    assert_int_equal(a->state, b->state);
    assert_true(a->started_ms == b->started_ms);
    assert_true(a->ended_ms == b->ended_ms);
    assert_int_equal(a->exit_code, b->exit_code);
    assert_int_equal(a->signal, b->signal);
    assert_int_equal(a->guard_spec_len, b->guard_spec_len);
    assert_memory_equal(a->guard_spec, b->guard_spec, a->guard_spec_len);
}

static struct store_guard mk_guard(const char *chain, uint32_t uid, int scope) {
    struct store_guard g = { 0 };

    snprintf(g.chain, sizeof g.chain, "%s", chain);
    g.uid = uid;
    g.scope = scope;
    snprintf(g.interface, sizeof g.interface, "wg0");
    g.refcount = 1;
    snprintf(g.rules_hash, sizeof g.rules_hash, "%064x", 0xabcdefu);
    g.created_ms = 42;
    g.guard_spec_len = 3 + strlen(chain);
    memcpy(g.guard_spec, "\x01\x00\x03", 3);
    memcpy(g.guard_spec + 3, chain, strlen(chain));
    return g;
}

static void assert_guard_eq(const struct store_guard *a, const struct store_guard *b) {
    assert_int_equal(a->uid, b->uid);
    assert_int_equal(a->scope, b->scope);
    assert_string_equal(a->interface, b->interface);
    assert_string_equal(a->chain, b->chain);
    assert_int_equal(a->refcount, b->refcount);
    assert_string_equal(a->rules_hash, b->rules_hash);
    assert_true(a->created_ms == b->created_ms);
    assert_int_equal(a->guard_spec_len, b->guard_spec_len);
    assert_memory_equal(a->guard_spec, b->guard_spec, a->guard_spec_len);
}

/* ---- fixtures ------------------------------------------------------------------------------ */

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof *f);

    if (!f)
        return -1;
    snprintf(f->root, sizeof f->root, "/tmp/lyh-test-store-XXXXXX");
    if (!mkdtemp(f->root)) {
        free(f);
        return -1;
    }
    snprintf(f->dir, sizeof f->dir, "%s/state", f->root);
    snprintf(f->db, sizeof f->db, "%s/state.db", f->dir);
    *state = f;
    return 0;
}

static int setup_open(void **state) {
    if (setup(state) < 0)
        return -1;
    must_open(*state);
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;

    store_close(f->s);
    nftw(f->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

/* ---- opening ------------------------------------------------------------------------------- */

static void test_open_fresh(void **state) {
    struct fx *f = *state;
    char wal[200], buf[1024];
    struct stat st;
    sqlite3 *raw;
    mode_t old;

    /* A hostile umask must not leak into the modes. */
    old = umask(0277);
    must_open(f);
    umask(old);

    assert_int_equal(stat(f->dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(mode_of(f->db), 0600);
    snprintf(wal, sizeof wal, "%s-wal", f->db);
    assert_int_equal(mode_of(wal), 0600);

    raw = raw_open(f->db);
    assert_int_equal(raw_int(raw, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_string_equal(raw_text(raw, "PRAGMA journal_mode", buf, sizeof buf), "wal");
    assert_int_equal(raw_int(raw, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND "
                                  "name IN ('meta', 'sessions', 'guards', 'reap_log', "
                                  "'policy_versions')"),
                     5);
    assert_int_equal(raw_int(raw, "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND "
                                  "name IN ('sessions_live', 'sessions_live_uid', "
                                  "'sessions_ended', 'guards_shared')"),
                     4);
    assert_int_equal(raw_int(raw, "SELECT count(*) FROM sqlite_schema WHERE type = 'trigger'"),
                     1);
    /* The live-session queries can use the partial indexes. */
    assert_non_null(strstr(raw_plan(raw,
                                    "SELECT id FROM sessions WHERE state <> 4 "
                                    "ORDER BY started_ms, id",
                                    buf, sizeof buf),
                           "sessions_live"));
    assert_non_null(strstr(raw_plan(raw,
                                    "SELECT count(*) FROM sessions WHERE state <> 4 AND uid = 7",
                                    buf, sizeof buf),
                           "sessions_live_uid"));
    sqlite3_close(raw);
}

static void test_reopen_idempotent(void **state) {
    struct fx *f = *state;
    struct store_session ss = mk_session("s-keep", 1000, 10, STORE_SESSION_RUNNING), got;
    char buf[32];
    int64_t objects;
    sqlite3 *raw;

    must_open(f);
    assert_int_equal(store_session_insert(f->s, &ss), 0);
    assert_int_equal(store_meta_set(f->s, "k", "v"), 0);
    store_close(f->s);
    f->s = NULL;

    raw = raw_open(f->db);
    objects = raw_int(raw, "SELECT count(*) FROM sqlite_schema");
    sqlite3_close(raw);

    for (int i = 0; i < 3; i++) {
        reopen(f);
        assert_int_equal(store_session_get(f->s, "s-keep", &got), 0);
        assert_session_eq(&got, &ss);
        assert_int_equal(store_meta_get(f->s, "k", buf, sizeof buf), 0);
        assert_string_equal(buf, "v");
    }
    store_close(f->s);
    f->s = NULL;

    raw = raw_open(f->db);
    assert_int_equal(raw_int(raw, "PRAGMA user_version"), STORE_SCHEMA_VERSION);
    assert_int_equal(raw_int(raw, "SELECT count(*) FROM sqlite_schema"), objects);
    assert_int_equal(raw_int(raw, "SELECT count(*) FROM sessions"), 1);
    sqlite3_close(raw);
}

static void test_newer_version_refused(void **state) {
    struct fx *f = *state;
    char want[128];
    const char *err;
    sqlite3 *raw;

    must_open(f);
    store_close(f->s);
    f->s = NULL;
    raw = raw_open(f->db);
    raw_exec(raw, "PRAGMA user_version = 7");
    sqlite3_close(raw);

    err = open_fails(f->dir, -EPROTO);
    snprintf(want, sizeof want,
             "state.db schema version 7 is newer than this lyhd (%d); upgrade lyhd or move "
             "the file away",
             STORE_SCHEMA_VERSION);
    if (!strstr(err, want))
        fail_msg("message '%s' lacks '%s'", err, want);
    assert_non_null(strstr(err, f->db));

    /* Refused means untouched. */
    raw = raw_open(f->db);
    assert_int_equal(raw_int(raw, "PRAGMA user_version"), 7);
    sqlite3_close(raw);
}

static void assert_corrupt_message(const struct fx *f, const char *err) {
    if (!strstr(err, f->db) || !strstr(err, "move it away"))
        fail_msg("corrupt-file message '%s' should name %s and say to move it away", err, f->db);
}

static void test_corrupt_random_bytes(void **state) {
    struct fx *f = *state;
    uint8_t junk[16384];
    uint32_t x = 0x12345678;

    for (size_t i = 0; i < sizeof junk; i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (uint8_t)(x >> 16);
    }
    assert_int_equal(mkdir(f->dir, 0700), 0);
    write_file(f->db, junk, sizeof junk, 0600);
    assert_corrupt_message(f, open_fails(f->dir, -EBADMSG));
}

/* A real state.db with a few pages of rows, closed (so the WAL is checkpointed
 * into the main file and removed). */
static void make_populated_db(struct fx *f) {
    must_open(f);
    assert_int_equal(store_begin(f->s), 0);
    for (int i = 0; i < 200; i++) {
        char id[40];
        struct store_session ss;

        snprintf(id, sizeof id, "s-%04d", i);
        ss = mk_session(id, 1000 + (uint32_t)i % 3, i, i % 2 ? STORE_SESSION_RUNNING
                                                            : STORE_SESSION_ENDED);
        memset(ss.cwd, 'c', 300);
        ss.cwd[300] = '\0';
        assert_int_equal(store_session_insert(f->s, &ss), 0);
    }
    assert_int_equal(store_commit(f->s), 0);
    store_close(f->s);
    f->s = NULL;
}

static void test_corrupt_truncated(void **state) {
    struct fx *f = *state;
    struct stat st;

    make_populated_db(f);
    assert_int_equal(stat(f->db, &st), 0);
    assert_true(st.st_size > 8 * 4096);
    assert_int_equal(truncate(f->db, 3 * 4096 + 100), 0);
    assert_corrupt_message(f, open_fails(f->dir, -EBADMSG));
}

static void test_corrupt_garbled_pages(void **state) {
    struct fx *f = *state;
    uint8_t garbage[4096];
    int fd;

    make_populated_db(f);
    memset(garbage, 0xa5, sizeof garbage);
    fd = open(f->db, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    for (off_t page = 1; page < 12; page += 2)
        assert_int_equal(pwrite(fd, garbage, sizeof garbage, page * 4096), (ssize_t)sizeof garbage);
    close(fd);
    assert_corrupt_message(f, open_fails(f->dir, -EBADMSG));
}

static void test_corrupt_garbled_header(void **state) {
    struct fx *f = *state;
    int fd;

    make_populated_db(f);
    fd = open(f->db, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "NotSQLite!", 10, 0), 10);
    close(fd);
    assert_corrupt_message(f, open_fails(f->dir, -EBADMSG));
}

static void test_foreign_database_refused(void **state) {
    struct fx *f = *state;
    sqlite3 *raw;

    /* Someone else's database that happens to have our table names. */
    assert_int_equal(mkdir(f->dir, 0700), 0);
    raw = raw_open(f->db);
    raw_exec(raw, "CREATE TABLE sessions (x); PRAGMA user_version = 0");
    sqlite3_close(raw);
    open_fails(f->dir, -EBADMSG);

    /* A version we know but another application id. */
    nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    assert_int_equal(mkdir(f->dir, 0700), 0);
    raw = raw_open(f->db);
    raw_exec(raw, "CREATE TABLE t (x); PRAGMA user_version = 1; PRAGMA application_id = 42");
    sqlite3_close(raw);
    assert_non_null(strstr(open_fails(f->dir, -EBADMSG), "not a lianyaohu state database"));
}

static void check_locked(struct fx *f) {
    int64_t t0 = now_ms(CLOCK_MONOTONIC), elapsed;
    const char *err = open_fails(f->dir, -EBUSY);

    elapsed = now_ms(CLOCK_MONOTONIC) - t0;
    if (elapsed > 5000)
        fail_msg("locked open took %lld ms", (long long)elapsed);
    if (!strstr(err, "locked") || !strstr(err, f->db))
        fail_msg("locked message '%s' should say locked and name %s", err, f->db);
}

static void test_locked_wal(void **state) {
    struct fx *f = *state;
    sqlite3 *raw;

    must_open(f);
    store_close(f->s);
    f->s = NULL;

    raw = raw_open(f->db);
    raw_exec(raw, "BEGIN EXCLUSIVE");
    check_locked(f);
    raw_exec(raw, "ROLLBACK");
    must_open(f);
    sqlite3_close(raw);
}

static void test_locked_rollback_journal(void **state) {
    struct fx *f = *state;
    sqlite3 *raw;

    /* Another process made the file in rollback-journal mode and holds an
     * exclusive lock: even the first read blocks. */
    assert_int_equal(mkdir(f->dir, 0700), 0);
    raw = raw_open(f->db);
    raw_exec(raw, "PRAGMA journal_mode = DELETE; CREATE TABLE other (x); "
                  "BEGIN EXCLUSIVE; INSERT INTO other VALUES (1)");
    check_locked(f);
    raw_exec(raw, "ROLLBACK");
    sqlite3_close(raw);
    must_open(f);
    assert_int_equal(mode_of(f->db), 0600); /* tightened from sqlite's 0644 */
}

static void test_insecure_dir(void **state) {
    struct fx *f = *state;
    char p[256], q[256];
    const char *err;

    /* World writable. */
    snprintf(p, sizeof p, "%s/ww", f->root);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(chmod(p, 0777), 0);
    err = open_fails(p, -EPERM);
    assert_non_null(strstr(err, "writable"));
    assert_non_null(strstr(err, p));

    /* Group writable. */
    assert_int_equal(chmod(p, 0770), 0);
    open_fails(p, -EPERM);
    /* Sticky does not excuse the state dir itself. */
    assert_int_equal(chmod(p, 01777), 0);
    open_fails(p, -EPERM);

    /* Someone else's. */
    if (geteuid() == 0) {
        assert_int_equal(chmod(p, 0700), 0);
        assert_int_equal(chown(p, 12345, (gid_t)-1), 0);
        assert_non_null(strstr(open_fails(p, -EPERM), "owned by uid 12345"));
    }

    /* A symlink as the state dir, and one further up the path. */
    snprintf(p, sizeof p, "%s/real", f->root);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(q, sizeof q, "%s/real/sub", f->root);
    assert_int_equal(mkdir(q, 0700), 0);
    snprintf(q, sizeof q, "%s/link", f->root);
    assert_int_equal(symlink(p, q), 0);
    assert_non_null(strstr(open_fails(q, -EPERM), "symlink"));
    snprintf(q, sizeof q, "%s/link/sub", f->root);
    assert_non_null(strstr(open_fails(q, -EPERM), "symlink"));

    /* An ancestor others can write (not sticky): they could swap the dir. */
    snprintf(p, sizeof p, "%s/open", f->root);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(chmod(p, 0777), 0);
    snprintf(q, sizeof q, "%s/open/state", f->root);
    err = open_fails(q, -EPERM);
    assert_non_null(strstr(err, "sticky"));
    /* Sticky, like /tmp: others cannot rename our entries. */
    assert_int_equal(chmod(p, 01777), 0);
    {
        struct store *s = NULL;
        const char *e = NULL;

        assert_int_equal(store_open(q, &s, &e), 0);
        store_close(s);
    }

    /* state.db itself a symlink. */
    assert_int_equal(mkdir(f->dir, 0700), 0);
    snprintf(p, sizeof p, "%s/elsewhere.db", f->root);
    write_file(p, "", 0, 0600);
    assert_int_equal(symlink(p, f->db), 0);
    assert_non_null(strstr(open_fails(f->dir, -EPERM), "symlink"));
    assert_int_equal(unlink(f->db), 0);

    /* state.db with a second hard link, and owned by someone else. */
    assert_int_equal(link(p, f->db), 0);
    assert_non_null(strstr(open_fails(f->dir, -EPERM), "hard links"));
    assert_int_equal(unlink(f->db), 0);
    if (geteuid() == 0) {
        write_file(f->db, "", 0, 0600);
        assert_int_equal(chown(f->db, 12345, (gid_t)-1), 0);
        assert_non_null(strstr(open_fails(f->dir, -EPERM), "owned by uid 12345"));
        assert_int_equal(unlink(f->db), 0);
    }

    /* A pre-existing empty state.db with loose permissions is tightened. */
    write_file(f->db, "", 0, 0644);
    assert_int_equal(chmod(f->db, 0644), 0);
    must_open(f);
    assert_int_equal(mode_of(f->db), 0600);

    /* Bad arguments. */
    open_fails("", -EINVAL);
}

/* ---- sessions -------------------------------------------------------------------------------- */

/* Session ids by prefix (lyh audit query --session 6e): in id order, a
 * non-admin's own only, the count one past what fits, ids that are not 16
 * hex digits never matched, and a bad prefix refused. */
static void test_session_prefix(void **state) {
    struct fx *f = *state;
    static const struct {
        const char *id;
        uint32_t uid;
        int state;
    } rows[] = {
        {"6e00000000000001", 1000, STORE_SESSION_ENDED},
        {"6e00000000000002", 1000, STORE_SESSION_RUNNING},
        {"6e10000000000000", 1001, STORE_SESSION_RUNNING},
        {"6f00000000000000", 1000, STORE_SESSION_RUNNING},
        {"6e-not-hex", 1000, STORE_SESSION_RUNNING},
        {"6e000000000000011", 1000, STORE_SESSION_RUNNING},
    };
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        struct store_session ss = mk_session(rows[i].id, rows[i].uid, 1000 + (int64_t)i, rows[i].state);
        assert_int_equal(store_session_insert(f->s, &ss), 0);
    }
    char out[4][17];
    size_t n = 99;
    /* an admin sees every owner's */
    assert_int_equal(store_session_ids_by_prefix(f->s, "6e", true, 0, out, 4, &n), 0);
    assert_int_equal(n, 3);
    assert_string_equal(out[0], "6e00000000000001");
    assert_string_equal(out[1], "6e00000000000002");
    assert_string_equal(out[2], "6e10000000000000");
    /* uid 1000 only its own, ended ones too */
    assert_int_equal(store_session_ids_by_prefix(f->s, "6e", false, 1000, out, 4, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(store_session_ids_by_prefix(f->s, "6e1", false, 1000, out, 4, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(store_session_ids_by_prefix(f->s, "6e1", false, 1001, out, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(out[0], "6e10000000000000");
    /* room for one: the count still says there are more */
    assert_int_equal(store_session_ids_by_prefix(f->s, "6", true, 0, out, 1, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(out[0], "6e00000000000001");
    /* a whole id matches itself */
    assert_int_equal(store_session_ids_by_prefix(f->s, "6f00000000000000", true, 0, out, 4, &n), 0);
    assert_int_equal(n, 1);
    /* not a prefix of an id: refused, nothing written */
    n = 99;
    const char *bad[] = {"", "6E", "6e-", "6e%", "6e_", "6e00000000000000011", "g"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(store_session_ids_by_prefix(f->s, bad[i], true, 0, out, 4, &n), -EINVAL);
    assert_int_equal(n, 99);
    assert_int_equal(store_session_ids_by_prefix(f->s, "6e", true, 0, out, 65, &n), -EINVAL);
}

static void test_session_crud(void **state) {
    struct fx *f = *state;
    struct store_session ss = mk_session("s-0001a2b3c4d5e6f7", 1000, 1234, STORE_SESSION_STARTING);
    struct store_session got, bad, marker;

    /* Every field, with the uint64s past INT64_MAX and a full-length cwd. */
    ss.pid_start = UINT64_MAX - 5;
    ss.cgroup_id = 0x8000000000000001ull;
    snprintf(ss.cgroup, sizeof ss.cgroup, "lianyaohu/s-0001a2b3c4d5e6f7");
    snprintf(ss.tmpdir, sizeof ss.tmpdir, "/tmp/lyh-s-0001");
    for (size_t i = 0; i + 2 < sizeof ss.argv0; i += 2)
        memcpy(ss.argv0 + i, "\xc3\xa9", 2); /* 254 bytes of UTF-8, 127 characters */
    memset(ss.cwd, 'd', sizeof ss.cwd - 1);
    ss.cwd[sizeof ss.cwd - 1] = '\0';
    ss.policy_version = 3;
    ss.signal = 0;
    for (size_t i = 0; i < sizeof ss.guard_spec; i++)
        ss.guard_spec[i] = (uint8_t)(i * 7);
    ss.guard_spec_len = sizeof ss.guard_spec;

    assert_int_equal(store_session_insert(f->s, &ss), 0);
    assert_string_equal(store_errmsg(f->s), "");
    assert_int_equal(store_session_get(f->s, ss.id, &got), 0);
    assert_session_eq(&got, &ss);

    assert_int_equal(store_session_insert(f->s, &ss), -EEXIST);
    assert_non_null(strstr(store_errmsg(f->s), "UNIQUE"));

    /* Not found leaves ret alone. */
    memset(&marker, 0x5a, sizeof marker);
    got = marker;
    assert_int_equal(store_session_get(f->s, "s-nope", &got), -ENOENT);
    assert_memory_equal(&got, &marker, sizeof got);
    assert_true(strlen(store_errmsg(f->s)) > 0);

    /* Update: spawned, then exited. */
    ss.state = STORE_SESSION_RUNNING;
    ss.pid = 4242;
    assert_int_equal(store_session_update(f->s, &ss), 0);
    ss.state = STORE_SESSION_ENDED;
    ss.ended_ms = 9999;
    ss.exit_code = 0;
    ss.signal = 15;
    assert_int_equal(store_session_update(f->s, &ss), 0);
    assert_int_equal(store_session_get(f->s, ss.id, &got), 0);
    assert_session_eq(&got, &ss);

    /* An ended session cannot come back. */
    bad = ss;
    bad.state = STORE_SESSION_RUNNING;
    assert_int_equal(store_session_update(f->s, &bad), -EINVAL);
    assert_int_equal(store_session_get(f->s, ss.id, &got), 0);
    assert_int_equal(got.state, STORE_SESSION_ENDED);

    bad = mk_session("s-ghost", 1, 1, STORE_SESSION_RUNNING);
    assert_int_equal(store_session_update(f->s, &bad), -ENOENT);

    /* Out of range values and malformed strings are refused. */
    bad = mk_session("s-bad", 1, 1, STORE_SESSION_RUNNING);
    bad.scope = 0;
    assert_int_equal(store_session_insert(f->s, &bad), -EINVAL);
    bad.scope = 5;
    assert_int_equal(store_session_insert(f->s, &bad), -EINVAL);
    bad.scope = 1;
    bad.state = 9;
    assert_int_equal(store_session_insert(f->s, &bad), -EINVAL);
    bad.state = STORE_SESSION_RUNNING;
    bad.pid = -1;
    assert_int_equal(store_session_insert(f->s, &bad), -EINVAL);
    bad.pid = 0;
    bad.policy_version = UINT64_MAX;
    assert_int_equal(store_session_insert(f->s, &bad), -EINVAL);
    bad.policy_version = 0;
    memset(bad.id, 'x', sizeof bad.id);
    assert_int_equal(store_session_insert(f->s, &bad), -EINVAL);
    assert_non_null(strstr(store_errmsg(f->s), "NUL-terminated"));
    bad.id[0] = '\0';
    assert_int_equal(store_session_insert(f->s, &bad), -EINVAL);
    snprintf(bad.id, sizeof bad.id, "s-bad");
    memset(bad.interface, 'i', sizeof bad.interface);
    assert_int_equal(store_session_insert(f->s, &bad), -EINVAL);
    assert_int_equal(store_session_insert(f->s, NULL), -EINVAL);
    assert_int_equal(store_session_get(f->s, NULL, &got), -EINVAL);
    assert_int_equal(store_session_get(f->s, "s-bad", &got), -ENOENT);
}

struct walk {
    char ids[16][64];
    int n;
    int stop_after; /* 0: never */
    struct store *s; /* for the re-entrant walk */
};

static int collect_session(const struct store_session *ss, void *userdata) {
    struct walk *w = userdata;

    snprintf(w->ids[w->n++], sizeof w->ids[0], "%s", ss->id);
    return w->stop_after && w->n == w->stop_after ? 7 : 0;
}

/* The reaper's shape: end every live session while walking them. */
static int end_session(const struct store_session *ss, void *userdata) {
    struct walk *w = userdata;
    struct store_session e = *ss;

    e.state = STORE_SESSION_ENDED;
    e.ended_ms = 500;
    w->n++;
    return store_session_update(w->s, &e);
}

static void test_session_live(void **state) {
    struct fx *f = *state;
    struct store_session rows[] = {
        mk_session("s-c", 1000, 300, STORE_SESSION_RUNNING),
        mk_session("s-a", 1001, 100, STORE_SESSION_STARTING),
        mk_session("s-b", 1000, 200, STORE_SESSION_ENDED), /* ended_ms 250 */
        mk_session("s-e", 1000, 200, STORE_SESSION_RUNNING),
        mk_session("s-d", 1000, 200, STORE_SESSION_ENDING),
    };
    struct walk w = { 0 };
    uint32_t n = 99;

    for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
        assert_int_equal(store_session_insert(f->s, &rows[i]), 0);

    /* Start order, ties by id, ENDED left out. */
    assert_int_equal(store_session_foreach_live(f->s, collect_session, &w), 0);
    assert_int_equal(w.n, 4);
    assert_string_equal(w.ids[0], "s-a");
    assert_string_equal(w.ids[1], "s-d");
    assert_string_equal(w.ids[2], "s-e");
    assert_string_equal(w.ids[3], "s-c");

    /* A non-zero return stops the walk and comes back. */
    w = (struct walk){ .stop_after = 2 };
    assert_int_equal(store_session_foreach_live(f->s, collect_session, &w), 7);
    assert_int_equal(w.n, 2);

    assert_int_equal(store_session_count_live(f->s, 0, true, &n), 0);
    assert_int_equal(n, 4);
    assert_int_equal(store_session_count_live(f->s, 1000, false, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(store_session_count_live(f->s, 1001, false, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(store_session_count_live(f->s, 5, false, &n), 0);
    assert_int_equal(n, 0);

    /* Prune: only ENDED rows older than the cutoff. */
    assert_int_equal(store_session_prune(f->s, 250, &n), 0);
    assert_int_equal(n, 0); /* s-b ended at 250, not before */
    assert_int_equal(store_session_prune(f->s, 251, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(store_session_get(f->s, "s-b", &rows[0]), -ENOENT);
    assert_int_equal(store_session_prune(f->s, INT64_MAX, &n), 0);
    assert_int_equal(n, 0); /* the live ones stay however old */
    assert_int_equal(store_session_count_live(f->s, 0, true, &n), 0);
    assert_int_equal(n, 4);

    /* Re-entrant walk: the callback writes through the same store. */
    w = (struct walk){ .s = f->s };
    assert_int_equal(store_session_foreach_live(f->s, end_session, &w), 0);
    assert_int_equal(w.n, 4);
    assert_int_equal(store_session_count_live(f->s, 0, true, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(store_session_prune(f->s, 501, NULL), 0);
    assert_int_equal(store_session_get(f->s, "s-a", &rows[0]), -ENOENT);
}

/* ---- guards --------------------------------------------------------------------------------- */

static int collect_guard(const struct store_guard *g, void *userdata) {
    struct walk *w = userdata;

    snprintf(w->ids[w->n++], sizeof w->ids[0], "%s", g->chain);
    return w->stop_after && w->n == w->stop_after ? 3 : 0;
}

static void test_guards(void **state) {
    struct fx *f = *state;
    struct store_guard g = mk_guard("LYH-1000", 1000, 2), got, other;
    struct walk w = { 0 };

    assert_int_equal(store_guard_put(f->s, &g), 0);
    assert_int_equal(store_guard_get(f->s, 1000, 2, &got), 0);
    assert_guard_eq(&got, &g);
    assert_int_equal(store_guard_get_by_chain(f->s, "LYH-1000", &got), 0);
    assert_guard_eq(&got, &g);

    /* Put replaces the row of the same chain (the refcount goes up). */
    g.refcount = 2;
    assert_int_equal(store_guard_put(f->s, &g), 0);
    assert_int_equal(store_guard_get(f->s, 1000, 2, &got), 0);
    assert_int_equal(got.refcount, 2);

    /* Chain names are unique: another uid cannot take LYH-1000... */
    other = mk_guard("LYH-1000", 1001, 2);
    assert_int_equal(store_guard_put(f->s, &other), -EEXIST);
    assert_true(strlen(store_errmsg(f->s)) > 0);
    other.uid = 1000;
    other.scope = 3;
    assert_int_equal(store_guard_put(f->s, &other), -EEXIST);
    assert_int_equal(store_guard_get_by_chain(f->s, "LYH-1000", &got), 0);
    assert_guard_eq(&got, &g);
    /* ...nor can the shared (uid, scope) get a second chain. */
    other = mk_guard("LYH-1000-b", 1000, 2);
    assert_int_equal(store_guard_put(f->s, &other), -EEXIST);

    /* Session chains: many per uid, looked up by chain only. */
    other = mk_guard("lyh-s-1", 1000, 1);
    assert_int_equal(store_guard_put(f->s, &other), 0);
    other = mk_guard("lyh-s-2", 1000, 1);
    assert_int_equal(store_guard_put(f->s, &other), 0);
    assert_int_equal(store_guard_get(f->s, 1000, 1, &got), -EINVAL);
    other = mk_guard("LYH-U-1000", 1000, 3);
    assert_int_equal(store_guard_put(f->s, &other), 0);
    assert_int_equal(store_guard_get(f->s, 1000, 3, &got), 0);
    assert_guard_eq(&got, &other);
    assert_int_equal(store_guard_get(f->s, 2000, 2, &got), -ENOENT);
    assert_int_equal(store_guard_get_by_chain(f->s, "LYH-9", &got), -ENOENT);

    /* Malformed guards. */
    other = mk_guard("LYH-bad", 7, 4);
    assert_int_equal(store_guard_put(f->s, &other), -EINVAL);
    other = mk_guard("LYH-bad", 7, 2);
    other.interface[0] = '\0';
    assert_int_equal(store_guard_put(f->s, &other), -EINVAL);
    other = mk_guard("LYH-bad", 7, 2);
    other.rules_hash[0] = 'A';
    assert_int_equal(store_guard_put(f->s, &other), -EINVAL);
    other = mk_guard("", 7, 2);
    assert_int_equal(store_guard_put(f->s, &other), -EINVAL);
    other = mk_guard("LYH-bad", 7, 2);
    memset(other.chain, 'c', sizeof other.chain);
    assert_int_equal(store_guard_put(f->s, &other), -EINVAL);

    /* Insertion order. */
    assert_int_equal(store_guard_foreach(f->s, collect_guard, &w), 0);
    assert_int_equal(w.n, 4);
    assert_string_equal(w.ids[0], "LYH-1000");
    assert_string_equal(w.ids[1], "lyh-s-1");
    assert_string_equal(w.ids[2], "lyh-s-2");
    assert_string_equal(w.ids[3], "LYH-U-1000");
    w = (struct walk){ .stop_after = 1 };
    assert_int_equal(store_guard_foreach(f->s, collect_guard, &w), 3);
    assert_int_equal(w.n, 1);

    assert_int_equal(store_guard_delete(f->s, "LYH-1000"), 0);
    assert_int_equal(store_guard_get(f->s, 1000, 2, &got), -ENOENT);
    assert_int_equal(store_guard_delete(f->s, "LYH-1000"), -ENOENT);
    /* The (uid, scope) is free again. */
    other = mk_guard("LYH-1000-b", 1000, 2);
    assert_int_equal(store_guard_put(f->s, &other), 0);
}

/* ---- transactions ---------------------------------------------------------------------------- */

static void test_transactions(void **state) {
    struct fx *f = *state;
    struct store_session ss = mk_session("s-tx", 1000, 1, STORE_SESSION_STARTING), got;
    struct store_guard g = mk_guard("LYH-1000", 1000, 2), gg;
    struct store_policy_version pv;
    char buf[16];
    uint64_t v = 0;
    sqlite3 *raw;

    store_rollback(f->s); /* no transaction: fine */
    assert_string_equal(store_errmsg(f->s), "");
    assert_int_equal(store_commit(f->s), -EINVAL);

    /* Rolled back rows are gone, in every table. */
    assert_int_equal(store_begin(f->s), 0);
    assert_int_equal(store_begin(f->s), -EALREADY);
    assert_int_equal(store_session_insert(f->s, &ss), 0);
    assert_int_equal(store_guard_put(f->s, &g), 0);
    assert_int_equal(store_meta_set(f->s, "k", "v"), 0);
    assert_int_equal(store_policy_append(f->s, (const uint8_t *)"p", 1, 0, 1, &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(store_session_get(f->s, "s-tx", &got), 0); /* visible inside */
    store_rollback(f->s);
    assert_int_equal(store_session_get(f->s, "s-tx", &got), -ENOENT);
    assert_int_equal(store_guard_get_by_chain(f->s, "LYH-1000", &gg), -ENOENT);
    assert_int_equal(store_meta_get(f->s, "k", buf, sizeof buf), -ENOENT);
    assert_int_equal(store_policy_current(f->s, &pv), -ENOENT);

    /* BEGIN IMMEDIATE: the write lock is ours from begin on. */
    assert_int_equal(store_begin(f->s), 0);
    raw = raw_open(f->db);
    assert_int_equal(sqlite3_exec(raw, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_BUSY);
    /* A failed statement inside a transaction does not end it. */
    assert_int_equal(store_session_insert(f->s, &ss), 0);
    assert_int_equal(store_session_insert(f->s, &ss), -EEXIST);
    assert_int_equal(store_commit(f->s), 0);
    assert_int_equal(raw_int(raw, "SELECT count(*) FROM sessions WHERE id = 's-tx'"), 1);
    sqlite3_close(raw);

    reopen(f);
    assert_int_equal(store_session_get(f->s, "s-tx", &got), 0);
    assert_session_eq(&got, &ss);

    /* Closing with a transaction open rolls it back. */
    ss = mk_session("s-lost", 1000, 2, STORE_SESSION_STARTING);
    assert_int_equal(store_begin(f->s), 0);
    assert_int_equal(store_session_insert(f->s, &ss), 0);
    reopen(f);
    assert_int_equal(store_session_get(f->s, "s-lost", &got), -ENOENT);
    assert_int_equal(store_begin(f->s), 0);
    assert_int_equal(store_commit(f->s), 0);
}

/* ---- policy ------------------------------------------------------------------------------ */

struct pwalk {
    uint64_t versions[8];
    char blobs[8][16];
    int n;
    int stop_after;
};

static int collect_policy(const struct store_policy_version *v, void *userdata) {
    struct pwalk *w = userdata;

    w->versions[w->n] = v->version;
    snprintf(w->blobs[w->n], sizeof w->blobs[0], "%.*s", (int)v->blob_len, (const char *)v->blob);
    w->n++;
    return w->stop_after && w->n == w->stop_after ? 5 : 0;
}

static void test_policy(void **state) {
    struct fx *f = *state;
    static const char *const blobs[] = { "one", "two", "three" };
    struct store_policy_version pv = { 0 };
    struct pwalk w = { 0 };
    _cleanup_free_ uint8_t *big = NULL;
    uint64_t v = 0;

    assert_int_equal(store_policy_current(f->s, &pv), -ENOENT);
    assert_int_equal(store_policy_get(f->s, 1, &pv), -ENOENT);

    for (size_t i = 0; i < ARRAY_SIZE(blobs); i++) {
        assert_int_equal(store_policy_append(f->s, (const uint8_t *)blobs[i], strlen(blobs[i]),
                                             (uint32_t)i, 1000 + (int64_t)i, &v),
                         0);
        assert_int_equal(v, i + 1);
    }

    assert_int_equal(store_policy_current(f->s, &pv), 0);
    assert_int_equal(pv.version, 3);
    assert_int_equal(pv.blob_len, 5);
    assert_memory_equal(pv.blob, "three", 5);
    assert_int_equal(pv.set_by_uid, 2);
    assert_int_equal(pv.set_ms, 1002);
    store_policy_version_free(&pv);
    assert_null(pv.blob);

    assert_int_equal(store_policy_get(f->s, 2, &pv), 0);
    assert_int_equal(pv.version, 2);
    assert_int_equal(pv.blob_len, 3);
    assert_memory_equal(pv.blob, "two", 3);
    store_policy_version_free(&pv);
    assert_int_equal(store_policy_get(f->s, 0, &pv), -ENOENT);
    assert_int_equal(store_policy_get(f->s, 4, &pv), -ENOENT);
    assert_int_equal(store_policy_get(f->s, UINT64_MAX, &pv), -ENOENT);

    /* Newest first, all or limited, and stoppable. */
    assert_int_equal(store_policy_foreach(f->s, 0, collect_policy, &w), 0);
    assert_int_equal(w.n, 3);
    assert_int_equal(w.versions[0], 3);
    assert_int_equal(w.versions[1], 2);
    assert_int_equal(w.versions[2], 1);
    assert_string_equal(w.blobs[0], "three");
    assert_string_equal(w.blobs[2], "one");
    w = (struct pwalk){ 0 };
    assert_int_equal(store_policy_foreach(f->s, 2, collect_policy, &w), 0);
    assert_int_equal(w.n, 2);
    assert_int_equal(w.versions[1], 2);
    w = (struct pwalk){ .stop_after = 1 };
    assert_int_equal(store_policy_foreach(f->s, 0, collect_policy, &w), 5);
    assert_int_equal(w.n, 1);

    /* An empty policy is a policy. */
    assert_int_equal(store_policy_append(f->s, NULL, 0, 0, 2000, &v), 0);
    assert_int_equal(v, 4);
    assert_int_equal(store_policy_get(f->s, 4, &pv), 0);
    assert_int_equal(pv.blob_len, 0);
    assert_null(pv.blob);
    store_policy_version_free(&pv);
    assert_int_equal(store_policy_append(f->s, NULL, 3, 0, 2000, &v), -EINVAL);

    /* 1 MiB fits, one byte more does not. */
    big = calloc(1, (1u << 20) + 1);
    assert_non_null(big);
    assert_int_equal(store_policy_append(f->s, big, (1u << 20) + 1, 0, 3000, &v), -EINVAL);
    assert_int_equal(store_policy_append(f->s, big, 1u << 20, 0, 3000, &v), 0);
    assert_int_equal(v, 5);

    /* A rolled-back version was never there; committed ones only grow. */
    assert_int_equal(store_begin(f->s), 0);
    assert_int_equal(store_policy_append(f->s, (const uint8_t *)"x", 1, 0, 4000, &v), 0);
    assert_int_equal(v, 6);
    store_rollback(f->s);
    assert_int_equal(store_policy_append(f->s, (const uint8_t *)"y", 1, 0, 4000, NULL), 0);
    assert_int_equal(store_policy_current(f->s, &pv), 0);
    assert_int_equal(pv.version, 6);
    assert_memory_equal(pv.blob, "y", 1);
    store_policy_version_free(&pv);
    store_policy_version_free(NULL);
}

/* ---- guard gids ---------------------------------------------------------------------------- */

/* One gid per uid, the lowest free one first, gaps reused, none shared. */
static void test_guard_gids(void **state) {
    struct fx *f = *state;
    uint32_t g = 0;

    assert_int_equal(store_guard_gid_get(f->s, 1000, &g), -ENOENT);
    assert_int_equal(store_guard_gid_free(f->s, 2000001, 2000003, &g), 0);
    assert_int_equal(g, 2000001);
    assert_int_equal(store_guard_gid_set(f->s, 1000, g), 0);
    assert_int_equal(store_guard_gid_free(f->s, 2000001, 2000003, &g), 0);
    assert_int_equal(g, 2000002);
    assert_int_equal(store_guard_gid_set(f->s, 1001, g), 0);
    assert_int_equal(store_guard_gid_set(f->s, 1002, 2000003), 0);
    /* full */
    assert_int_equal(store_guard_gid_free(f->s, 2000001, 2000003, &g), -ENOSPC);
    /* another uid cannot take a gid that is given */
    assert_int_equal(store_guard_gid_set(f->s, 1003, 2000002), -EEXIST);
    /* a uid may be given another one (the range moved); its old one frees up */
    assert_int_equal(store_guard_gid_set(f->s, 1000, 3000001), 0);
    assert_int_equal(store_guard_gid_get(f->s, 1000, &g), 0);
    assert_int_equal(g, 3000001);
    assert_int_equal(store_guard_gid_free(f->s, 2000001, 2000003, &g), 0);
    assert_int_equal(g, 2000001);
    assert_int_equal(store_guard_gid_get(f->s, 1001, &g), 0);
    assert_int_equal(g, 2000002);
    assert_int_equal(store_guard_gid_free(f->s, 5, 4, &g), -EINVAL);
}

/* ---- meta and reap log ---------------------------------------------------------------------- */

static void test_meta(void **state) {
    struct fx *f = *state;
    char buf[16], small[7];

    assert_int_equal(store_meta_get(f->s, "guard_gid", buf, sizeof buf), -ENOENT);
    assert_int_equal(store_meta_set(f->s, "guard_gid", "2000000"), 0);
    assert_int_equal(store_meta_get(f->s, "guard_gid", buf, sizeof buf), 0);
    assert_string_equal(buf, "2000000");
    assert_int_equal(store_meta_set(f->s, "guard_gid", "2000001"), 0);
    assert_int_equal(store_meta_get(f->s, "guard_gid", buf, sizeof buf), 0);
    assert_string_equal(buf, "2000001");

    /* Too small: -ERANGE, buffer untouched; exactly enough works. */
    memset(small, '#', sizeof small);
    assert_int_equal(store_meta_get(f->s, "guard_gid", small, sizeof small), -ERANGE);
    assert_memory_equal(small, "#######", sizeof small);
    assert_int_equal(store_meta_get(f->s, "guard_gid", buf, 8), 0);
    assert_string_equal(buf, "2000001");

    assert_int_equal(store_meta_set(f->s, "empty", ""), 0);
    assert_int_equal(store_meta_get(f->s, "empty", buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    assert_int_equal(store_meta_set(f->s, "", "x"), -EINVAL);
    assert_int_equal(store_meta_set(f->s, "k", NULL), -EINVAL);
    assert_int_equal(store_meta_set(f->s, NULL, "x"), -EINVAL);
}

static void test_reap_log(void **state) {
    struct fx *f = *state;
    int64_t before = now_ms(CLOCK_REALTIME), after;
    sqlite3_stmt *st = NULL;
    sqlite3 *raw;

    assert_int_equal(store_reap_log(f->s, "chain lyh-s-1", "removed", "process 4242 gone"), 0);
    assert_int_equal(store_reap_log(f->s, "cgroup lianyaohu/s-1", "killed", NULL), 0);
    after = now_ms(CLOCK_REALTIME);
    assert_int_equal(store_reap_log(f->s, "", "removed", NULL), -EINVAL);
    assert_int_equal(store_reap_log(f->s, "x", "", NULL), -EINVAL);
    assert_int_equal(store_reap_log(f->s, NULL, "removed", NULL), -EINVAL);

    raw = raw_open(f->db);
    assert_int_equal(sqlite3_prepare_v2(raw,
                                        "SELECT object, action, detail, at_ms FROM reap_log "
                                        "ORDER BY id",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "chain lyh-s-1");
    assert_string_equal((const char *)sqlite3_column_text(st, 1), "removed");
    assert_string_equal((const char *)sqlite3_column_text(st, 2), "process 4242 gone");
    assert_true(sqlite3_column_int64(st, 3) >= before && sqlite3_column_int64(st, 3) <= after);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "cgroup lianyaohu/s-1");
    assert_string_equal((const char *)sqlite3_column_text(st, 1), "killed");
    assert_string_equal((const char *)sqlite3_column_text(st, 2), "");
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(raw);
}

static void test_close_null(void **state) {
    (void)state;
    store_close(NULL);
    assert_string_equal(store_errmsg(NULL), "");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_fresh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reopen_idempotent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_version_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_random_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_truncated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_garbled_pages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_garbled_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_database_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_locked_wal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_locked_rollback_journal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_insecure_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_crud, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_session_prefix, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_session_live, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_guards, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_transactions, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_policy, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_guard_gids, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_meta, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_reap_log, setup_open, teardown),
        cmocka_unit_test(test_close_null),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
