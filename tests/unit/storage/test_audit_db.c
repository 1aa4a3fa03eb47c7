/* Unit tests for storage/audit_db.c: opening audit.db (new, clean, after a
 * crash, newer, corrupt, insecure places), all-or-nothing appends, keyset
 * pages and tails, the query plan of every filter shape, query correctness
 * against an independent brute-force matcher over a generated million-record
 * log, retention by age and by size (the order size retention removes in,
 * the gap records retention writes, the per-writer counts it keeps, the
 * migration that adds them), and a reader that does not block the writer. Each test gets its own 0700 mkdtemp dir (in /dev/shm when there is
 * one, else /tmp), removed afterwards. A raw sqlite3 connection checks what
 * landed in the file. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sqlite3.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/macros.h"
#include "storage/audit_db.h"

struct fx {
    char root[64];   /* mkdtemp dir, removed in teardown */
    char db[128];    /* root/audit.db */
    struct audit_db *a;
};

/* ---- helpers ------------------------------------------------------------------------------ */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static double now_s(void) {
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A memory-backed temp dir keeps the million-record test off the disk. */
static const char *tmp_base(void) {
    struct stat st;

    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0)
        return "/dev/shm";
    return "/tmp";
}

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof *f);

    assert_non_null(f);
    snprintf(f->root, sizeof f->root, "%s/lyh-adb-XXXXXX", tmp_base());
    assert_non_null(mkdtemp(f->root));
    assert_int_equal(chmod(f->root, 0700), 0);
    snprintf(f->db, sizeof f->db, "%s/audit.db", f->root);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;

    audit_db_close(f->a);
    nftw(f->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static bool must_open(struct fx *f) {
    char why[AUDIT_DB_ERR_MAX] = "";
    bool clean = false;
    int r = audit_db_open(f->db, &f->a, &clean, why, sizeof why);

    if (r < 0)
        fail_msg("audit_db_open(%s) = %d: %s", f->db, r, why);
    assert_non_null(f->a);
    assert_string_equal(audit_db_errmsg(f->a), "");
    return clean;
}

static bool reopen(struct fx *f) {
    audit_db_close(f->a);
    f->a = NULL;
    return must_open(f);
}

static int setup_open(void **state) {
    setup(state);
    assert_true(must_open(*state));
    return 0;
}

/* An open that must fail with want; the message goes to why. */
static void open_fails(const char *path, int want, char *why, size_t whylen) {
    struct audit_db *a = NULL;
    bool clean = true;
    int r;

    why[0] = '\0';
    r = audit_db_open(path, &a, &clean, why, whylen);
    if (r != want)
        fail_msg("audit_db_open(%s) = %d, want %d (%s)", path, r, want, why);
    assert_null(a);
    assert_true(strlen(why) > 0);
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

static int64_t raw_int_at(const char *path, const char *sql) {
    sqlite3 *raw = raw_open(path);
    int64_t v = raw_int(raw, sql);

    sqlite3_close(raw);
    return v;
}

static void write_file(const char *path, const void *p, size_t n, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, p, n), (ssize_t)n);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static off_t size_of(const char *path) {
    struct stat st;

    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

static mode_t mode_of(const char *path) {
    struct stat st;

    assert_int_equal(lstat(path, &st), 0);
    return st.st_mode & 07777;
}

/* A flow record with a v4 or v6 destination. */
static struct audit_rec mk_flow(int64_t t, const char *session, uint32_t uid, bool v6,
                                uint8_t host, uint16_t dport) {
    struct audit_rec r = { 0 };

    r.time_us = t;
    r.kind = AUDIT_KIND_FLOW;
    r.verdict = AUDIT_VERDICT_ALLOWED;
    snprintf(r.session, sizeof r.session, "%s", session);
    r.has_uid = true;
    r.uid = uid;
    r.protocol = 6;
    if (v6) {
        static const uint8_t net[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2 };
        r.family = AF_INET6;
        r.addr_len = 16;
        memcpy(r.dst, net, 16);
        r.dst[15] = host;
        memcpy(r.src, net, 16);
        r.src[15] = 1;
    } else {
        r.family = AF_INET;
        r.addr_len = 4;
        memcpy(r.dst, (uint8_t[]){ 10, 1, 2, host }, 4);
        memcpy(r.src, (uint8_t[]){ 10, 0, 0, 1 }, 4);
    }
    r.sport = 40000;
    r.dport = dport;
    snprintf(r.iface, sizeof r.iface, "eth0");
    snprintf(r.action, sizeof r.action, "accept");
    r.allowed_packets = 3;
    r.allowed_bytes = 180;
    return r;
}

static void append_ok(struct audit_db *a, struct audit_rec *recs, size_t n) {
    int r = audit_db_append(a, recs, n);

    if (r < 0)
        fail_msg("audit_db_append(%zu) = %d: %s", n, r, audit_db_errmsg(a));
}

/* n simple flows, times t0 + i * step. */
static void append_flows(struct audit_db *a, size_t n, int64_t t0, int64_t step) {
    struct audit_rec *recs = calloc(n, sizeof *recs);

    assert_non_null(recs);
    for (size_t i = 0; i < n; i++)
        recs[i] = mk_flow(t0 + (int64_t)i * step, "s-0000000000000a", 1000, i % 2, (uint8_t)i,
                          443);
    append_ok(a, recs, n);
    free(recs);
}

/* Collects ids (and optionally checks each record against an expected
 * array indexed by id - 1). */
struct walk {
    uint64_t *ids;
    size_t n, cap;
    const struct audit_rec *want; /* NULL: no field checks */
    size_t nwant;
    size_t bad;                   /* rows whose fields differ */
    size_t stop_after;            /* fn returns 1 after this many (0: never) */
};

static bool rec_equal(const struct audit_rec *a, const struct audit_rec *b) {
    const char *da = a->detail ? a->detail : "", *db = b->detail ? b->detail : "";

    return a->id == b->id && a->time_us == b->time_us && a->kind == b->kind &&
           a->verdict == b->verdict && a->family == b->family && a->protocol == b->protocol &&
           a->addr_len == b->addr_len && memcmp(a->src, b->src, a->addr_len) == 0 &&
           memcmp(a->dst, b->dst, a->addr_len) == 0 && a->sport == b->sport &&
           a->dport == b->dport && a->has_uid == b->has_uid &&
           (a->has_uid ? a->uid == b->uid : true) && strcmp(a->session, b->session) == 0 &&
           strcmp(a->iface, b->iface) == 0 && strcmp(a->action, b->action) == 0 &&
           strcmp(da, db) == 0 && a->allowed_packets == b->allowed_packets &&
           a->allowed_bytes == b->allowed_bytes && a->denied_packets == b->denied_packets &&
           a->denied_bytes == b->denied_bytes && a->missed == b->missed;
}

static int walk_cb(const struct audit_rec *r, void *ud) {
    struct walk *w = ud;

    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 1024;
        w->ids = realloc(w->ids, w->cap * sizeof *w->ids);
        assert_non_null(w->ids);
    }
    w->ids[w->n++] = r->id;
    assert_non_null(r->detail);
    if (w->want && (r->id == 0 || r->id > w->nwant || !rec_equal(r, &w->want[r->id - 1])))
        w->bad++;
    return w->stop_after && w->n >= w->stop_after;
}

/* Walk every page from f->after_id; a short page is the last one. */
static void walk_all(struct audit_db *a, const struct audit_filter *f0, unsigned page,
                     struct walk *w) {
    struct audit_filter f = *f0;

    for (;;) {
        int n = audit_db_page(a, &f, page, walk_cb, w);

        if (n < 0)
            fail_msg("audit_db_page = %d: %s", n, audit_db_errmsg(a));
        assert_true((unsigned)n <= page);
        if (n == 0)
            break;
        f.after_id = w->ids[w->n - 1];
        if ((unsigned)n < page)
            break;
    }
}

static void walk_free(struct walk *w) {
    free(w->ids);
    *w = (struct walk){ 0 };
}

static uint64_t last_id(struct audit_db *a) {
    uint64_t id = 12345;

    assert_int_equal(audit_db_last_id(a, &id), 0);
    return id;
}

/* A retention step whose removals are counted but never written as gap
 * records (a delay that does not end), for the tests that count what is
 * left. ret_deleted NULL passes a NULL result. */
static int prune_simple(struct audit_db *a, int64_t older_than_us, uint64_t max_bytes,
                        unsigned max_rows, unsigned *ret_deleted) {
    struct audit_retention p = { .now_us = 1, .older_than_us = older_than_us,
                                 .max_age_days = 90, .max_bytes = max_bytes,
                                 .max_rows = max_rows, .gap_delay_us = INT64_MAX };
    struct audit_prune_result res = { 0 };
    int r;

    if (!ret_deleted)
        return audit_db_prune(a, &p, NULL);
    r = audit_db_prune(a, &p, &res);
    if (r == 0) {
        assert_int_equal(res.gaps, 0);
        *ret_deleted = res.deleted;
    }
    return r;
}

/* ---- opening -------------------------------------------------------------------------------- */

static void test_open_new_close_reopen(void **state) {
    struct fx *f = *state;
    char wal[200];
    uint64_t size = 0;
    mode_t old;

    /* A hostile umask must not leak into the mode. */
    old = umask(0277);
    assert_true(must_open(f)); /* new: clean */
    umask(old);
    assert_int_equal(mode_of(f->db), 0600);
    snprintf(wal, sizeof wal, "%s-wal", f->db);
    assert_int_equal(mode_of(wal), 0600);

    assert_int_equal(raw_int_at(f->db, "PRAGMA user_version"), 3);
    assert_int_equal(raw_int_at(f->db, "PRAGMA application_id"), 0x4c594841);
    assert_int_equal(raw_int_at(f->db, "PRAGMA auto_vacuum"), 2);
    assert_int_equal(raw_int_at(f->db, "SELECT value FROM meta WHERE key = 'clean'"), 0);
    assert_int_equal(raw_int_at(f->db, "SELECT count(*) FROM sqlite_schema WHERE type = 'index' "
                                       "AND name LIKE 'events_%'"),
                     6);
    assert_int_equal(last_id(f->a), 0);
    assert_int_equal(audit_db_size(f->a, &size), 0);
    /* 16 pages: the schema, 14 tables and indexes, the auto_vacuum pointer map */
    assert_true(size > 0 && size <= 16 * 4096);

    audit_db_close(f->a);
    f->a = NULL;
    assert_int_equal(raw_int_at(f->db, "SELECT value FROM meta WHERE key = 'clean'"), 1);
    /* The last close checkpointed and removed the WAL. */
    assert_int_equal(access(wal, F_OK), -1);

    assert_true(must_open(f)); /* closed cleanly */
    append_flows(f->a, 3, 1000, 1);
    assert_true(reopen(f));
    assert_int_equal(last_id(f->a), 3);
    /* A path that is too bare or names no file. */
    {
        char why[AUDIT_DB_ERR_MAX];
        char dirpath[160];

        snprintf(dirpath, sizeof dirpath, "%s/", f->root);
        open_fails(dirpath, -EINVAL, why, sizeof why);
    }
}

static void test_crash_is_not_clean(void **state) {
    struct fx *f = *state;
    struct walk w = { 0 };
    struct audit_filter all = { 0 };
    int status = 0;
    pid_t pid;

    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* No cmocka in the child: plain checks, the verdict in the exit code. */
        struct audit_db *a = NULL;
        struct audit_rec recs[3];
        bool clean = false;
        char why[AUDIT_DB_ERR_MAX];

        if (audit_db_open(f->db, &a, &clean, why, sizeof why) < 0 || !clean)
            _exit(2);
        for (int i = 0; i < 3; i++)
            recs[i] = mk_flow(100 + i, "s-crash", 1000, false, (uint8_t)i, 80);
        if (audit_db_append(a, recs, 3) < 0 || recs[2].id != 3)
            _exit(3);
        _exit(0); /* "crash": no audit_db_close */
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    assert_false(must_open(f)); /* the child never closed it */
    /* What it committed survived. */
    assert_int_equal(last_id(f->a), 3);
    walk_all(f->a, &all, 10, &w);
    assert_int_equal(w.n, 3);
    assert_int_equal(w.ids[0], 1);
    assert_int_equal(w.ids[2], 3);
    walk_free(&w);
    /* This instance closes it properly: clean again. */
    assert_true(reopen(f));
}

static void test_abandon_is_not_clean(void **state) {
    struct fx *f = *state;

    assert_true(must_open(f));
    append_flows(f->a, 4, 1000, 1);
    /* The caller still held records it could not write: not clean. */
    audit_db_abandon(f->a);
    f->a = NULL;
    assert_int_equal(raw_int_at(f->db, "SELECT value FROM meta WHERE key = 'clean'"), 0);
    assert_false(must_open(f));
    assert_int_equal(last_id(f->a), 4); /* what was appended is kept */
    assert_true(reopen(f));
    audit_db_abandon(NULL);
}

static void test_refuse_insecure_file(void **state) {
    struct fx *f = *state;
    char why[AUDIT_DB_ERR_MAX], other[160];

    /* Others may write it: refused, with what to do. */
    write_file(f->db, "", 0, 0666);
    open_fails(f->db, -EPERM, why, sizeof why);
    assert_non_null(strstr(why, "group/world writable"));
    assert_non_null(strstr(why, "move it away"));
    assert_int_equal(mode_of(f->db), 0666); /* left alone */

    /* Group-writable too. */
    assert_int_equal(chmod(f->db, 0620), 0);
    open_fails(f->db, -EPERM, why, sizeof why);

    /* Someone else's file. */
    assert_int_equal(chmod(f->db, 0600), 0);
    assert_int_equal(chown(f->db, 12345, 12345), 0);
    open_fails(f->db, -EPERM, why, sizeof why);
    assert_non_null(strstr(why, "owned by uid 12345"));
    assert_int_equal(unlink(f->db), 0);

    /* Not a regular file. */
    assert_int_equal(mkdir(f->db, 0700), 0);
    open_fails(f->db, -EPERM, why, sizeof why);
    assert_non_null(strstr(why, "not a regular file"));
    assert_int_equal(rmdir(f->db), 0);
    assert_int_equal(mkfifo(f->db, 0600), 0);
    open_fails(f->db, -EPERM, why, sizeof why);
    assert_non_null(strstr(why, "not a regular file"));
    assert_int_equal(unlink(f->db), 0);

    /* A symlink. */
    snprintf(other, sizeof other, "%s/elsewhere.db", f->root);
    write_file(other, "", 0, 0600);
    assert_int_equal(symlink(other, f->db), 0);
    open_fails(f->db, -EPERM, why, sizeof why);
    assert_non_null(strstr(why, "symlink"));
    assert_int_equal(unlink(f->db), 0);

    /* A second hard link. */
    assert_int_equal(link(other, f->db), 0);
    open_fails(f->db, -EPERM, why, sizeof why);
    assert_non_null(strstr(why, "hard links"));
    assert_int_equal(unlink(f->db), 0);

    /* An existing 0644 file of ours is tightened, not refused. */
    write_file(f->db, "", 0, 0644);
    assert_true(must_open(f)); /* empty: a new database */
    assert_int_equal(mode_of(f->db), 0600);
}

static void test_refuse_insecure_dir(void **state) {
    struct fx *f = *state;
    char why[AUDIT_DB_ERR_MAX], missing[200];

    assert_int_equal(chmod(f->root, 0777), 0);
    open_fails(f->db, -EPERM, why, sizeof why);
    assert_non_null(strstr(why, "group/world writable"));
    assert_non_null(strstr(why, "chmod 0700"));
    assert_int_equal(access(f->db, F_OK), -1); /* nothing created there */

    assert_int_equal(chmod(f->root, 0770), 0);
    open_fails(f->db, -EPERM, why, sizeof why);

    assert_int_equal(chmod(f->root, 0700), 0);
    assert_int_equal(chown(f->root, 12345, 12345), 0);
    open_fails(f->db, -EPERM, why, sizeof why);
    assert_non_null(strstr(why, "owned by uid 12345"));
    assert_int_equal(chown(f->root, geteuid(), getegid()), 0);

    /* The parent must exist: we do not create directories. */
    snprintf(missing, sizeof missing, "%s/nope/audit.db", f->root);
    open_fails(missing, -ENOENT, why, sizeof why);

    assert_true(must_open(f));
}

static void test_newer_version_refused(void **state) {
    struct fx *f = *state;
    char why[AUDIT_DB_ERR_MAX];
    sqlite3 *raw;

    assert_true(must_open(f));
    audit_db_close(f->a);
    f->a = NULL;
    raw = raw_open(f->db);
    raw_exec(raw, "PRAGMA user_version = 4");
    sqlite3_close(raw);

    open_fails(f->db, -EPROTO, why, sizeof why);
    assert_non_null(strstr(why, "newer than this lyhd"));
    /* Untouched: still version 4, and not marked anything. */
    assert_int_equal(raw_int_at(f->db, "PRAGMA user_version"), 4);
    assert_int_equal(raw_int_at(f->db, "SELECT value FROM meta WHERE key = 'clean'"), 1);
}

static void test_corrupt_and_foreign_refused(void **state) {
    struct fx *f = *state;
    char why[AUDIT_DB_ERR_MAX], junk[8192];
    sqlite3 *raw;

    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(i * 131 + 7);
    write_file(f->db, junk, sizeof junk, 0600);
    open_fails(f->db, -EBADMSG, why, sizeof why);
    assert_non_null(strstr(why, "corrupt"));
    assert_non_null(strstr(why, "mv "));
    assert_int_equal(unlink(f->db), 0);

    /* Another program's database (version 0 with tables). */
    raw = raw_open(f->db);
    raw_exec(raw, "CREATE TABLE t (x)");
    sqlite3_close(raw);
    assert_int_equal(chmod(f->db, 0600), 0);
    open_fails(f->db, -EBADMSG, why, sizeof why);
    assert_non_null(strstr(why, "not an audit database"));
    assert_int_equal(unlink(f->db), 0);

    /* Our version number, someone else's application id (e.g. state.db). */
    raw = raw_open(f->db);
    raw_exec(raw, "CREATE TABLE t (x); PRAGMA user_version = 1; PRAGMA application_id = 7");
    sqlite3_close(raw);
    assert_int_equal(chmod(f->db, 0600), 0);
    open_fails(f->db, -EBADMSG, why, sizeof why);
    assert_non_null(strstr(why, "application_id 7"));
}

static void test_close_null(void **state) {
    (void)state;
    audit_db_close(NULL);
    assert_string_equal(audit_db_errmsg(NULL), "");
}

/* ---- appends ---------------------------------------------------------------------------------- */

static void test_append_all_or_nothing(void **state) {
    struct fx *f = *state;
    struct audit_rec recs[10], got[10];
    struct audit_filter all = { 0 };
    struct walk w = { 0 };
    static const char *const why[] = {
        "kind is not 1..7", "kind is not 1..7", "verdict is not 0..2", "family is not",
        "addr_len is not", "session is not NUL-terminated", "iface is not NUL-terminated",
        "action is not NUL-terminated",
    };

    for (size_t bad = 0; bad < ARRAY_SIZE(why); bad++) {
        for (int i = 0; i < 10; i++) {
            recs[i] = mk_flow(1000 + i, "s-1", 1000, i % 2, (uint8_t)i, 443);
            recs[i].id = 777;
        }
        switch (bad) {
        case 0: recs[5].kind = 0; break;
        case 1: recs[5].kind = 8; break;
        case 2: recs[5].verdict = 3; break;
        case 3: recs[5].family = 99; break;
        case 4: recs[5].addr_len = 5; break;
        case 5: memset(recs[5].session, 'x', sizeof recs[5].session); break;
        case 6: memset(recs[5].iface, 'x', sizeof recs[5].iface); break;
        case 7: memset(recs[5].action, 'x', sizeof recs[5].action); break;
        }
        assert_int_equal(audit_db_append(f->a, recs, 10), -EINVAL);
        assert_non_null(strstr(audit_db_errmsg(f->a), why[bad]));
        assert_non_null(strstr(audit_db_errmsg(f->a), "record 5"));
        for (int i = 0; i < 10; i++)
            assert_int_equal(recs[i].id, 777); /* no id set */
        assert_int_equal(last_id(f->a), 0);    /* nothing stored */
    }
    assert_int_equal(audit_db_append(f->a, NULL, 3), -EINVAL);
    assert_int_equal(audit_db_append(f->a, recs, 0), 0);

    /* Valid: ids ascending from 1, and every field comes back as it went in. */
    for (int i = 0; i < 10; i++)
        recs[i] = mk_flow(1000 + i, "s-1", 1000 + (uint32_t)i, i % 2, (uint8_t)i, 443);
    recs[1].kind = AUDIT_KIND_SESSION;
    recs[1].verdict = AUDIT_VERDICT_NONE;
    recs[1].family = 0;
    recs[1].addr_len = 0;
    recs[1].protocol = 0;
    recs[1].sport = recs[1].dport = 0;
    recs[1].detail = "session started: argv0=/bin/sh";
    recs[2].has_uid = false;
    recs[2].uid = 0;
    recs[3].verdict = AUDIT_VERDICT_DENIED;
    recs[3].denied_packets = UINT64_MAX;
    recs[3].denied_bytes = (uint64_t)INT64_MAX + 5;
    recs[3].missed = 1;
    recs[4].time_us = -5; /* before the epoch: still just a number */
    recs[5].session[0] = '\0';
    snprintf(recs[6].session, sizeof recs[6].session, "0123456789abcdef"); /* 16: the max */
    snprintf(recs[6].iface, sizeof recs[6].iface, "0123456789abcde");
    snprintf(recs[6].action, sizeof recs[6].action, "verylongaction1");
    recs[7].detail = "";
    recs[8].uid = UINT32_MAX;
    recs[9].kind = AUDIT_KIND_GUARD;
    memcpy(got, recs, sizeof recs);
    append_ok(f->a, recs, 10);
    for (int i = 0; i < 10; i++)
        assert_int_equal(recs[i].id, (uint64_t)i + 1);
    append_ok(f->a, recs, 3); /* again: new ids */
    assert_int_equal(recs[0].id, 11);
    assert_int_equal(recs[2].id, 13);
    assert_int_equal(last_id(f->a), 13);

    for (int i = 0; i < 10; i++)
        got[i].id = (uint64_t)i + 1;
    got[2].uid = 0; /* has_uid false: uid is 0 */
    w.want = got;
    w.nwant = 10;
    walk_all(f->a, &all, 4, &w);
    assert_int_equal(w.n, 13);
    assert_int_equal(w.bad, 3); /* ids 11..13 are beyond want */
    for (size_t i = 0; i < w.n; i++)
        assert_int_equal(w.ids[i], i + 1);
    walk_free(&w);
}

struct detail_check {
    size_t len;
    char first_cut;
};

static int detail_cb(const struct audit_rec *r, void *ud) {
    struct detail_check *c = ud;
    c->len = strlen(r->detail);
    return 0;
}

static void test_detail_truncation(void **state) {
    struct fx *f = *state;
    /* One character repeated past the limit: where does the cut land? */
    static const struct {
        const char *ch;
        size_t want;
    } cases[] = {
        { "a", 5119 },                 /* ASCII: the full 5119 bytes */
        { "\xc3\xa9", 5118 },          /* e-acute, 2 bytes: 5119 would split one */
        { "\xe2\x82\xac", 5118 },      /* euro sign, 3 bytes: 1706 of them */
        { "\xf0\x9d\x84\x9e", 5116 },  /* G clef, 4 bytes: 1279 of them */
    };
    char *buf = malloc(6000);

    assert_non_null(buf);
    for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
        size_t l = strlen(cases[c].ch), n = 0;
        struct audit_rec r = mk_flow(1, "s-d", 1, false, 1, 1);
        struct audit_filter q = { 0 };
        struct detail_check dc = { 0 };

        while (n + l < 6000) {
            memcpy(buf + n, cases[c].ch, l);
            n += l;
        }
        buf[n] = '\0';
        r.detail = buf;
        append_ok(f->a, &r, 1);
        q.after_id = r.id - 1;
        assert_int_equal(audit_db_page(f->a, &q, 1, detail_cb, &dc), 1);
        assert_int_equal(dc.len, cases[c].want);
    }
    /* Exactly at the limit: kept whole. */
    memset(buf, 'b', 5119);
    buf[5119] = '\0';
    {
        struct audit_rec r = mk_flow(1, "s-d", 1, false, 1, 1);
        struct audit_filter q = { 0 };
        struct detail_check dc = { 0 };

        r.detail = buf;
        append_ok(f->a, &r, 1);
        q.after_id = r.id - 1;
        assert_int_equal(audit_db_page(f->a, &q, 1, detail_cb, &dc), 1);
        assert_int_equal(dc.len, 5119);
    }
    free(buf);
}

static void test_ids_never_reused(void **state) {
    struct fx *f = *state;
    unsigned deleted = 99;
    struct audit_rec r = mk_flow(50, "s-x", 1, false, 1, 1);

    append_flows(f->a, 5, 10, 1);
    assert_int_equal(prune_simple(f->a, 1000, 0, 100, &deleted), 0);
    assert_int_equal(deleted, 5);
    assert_int_equal(last_id(f->a), 0); /* empty */
    append_ok(f->a, &r, 1);
    assert_int_equal(r.id, 6);           /* not 1 again */
    assert_true(reopen(f));
    append_ok(f->a, &r, 1);
    assert_int_equal(r.id, 7);
}

/* ---- filters, pages, tails, plans ------------------------------------------------------------ */

static void test_filter_check(void **state) {
    struct fx *f = *state;
    struct audit_filter q;
    uint64_t after = 0;

    memset(&q, 0, sizeof q);
    assert_int_equal(audit_filter_check(&q), 0);
    assert_int_equal(audit_filter_check(NULL), -EINVAL);

#define BAD(stmt)                                                    \
    do {                                                             \
        memset(&q, 0, sizeof q);                                     \
        stmt;                                                        \
        assert_int_equal(audit_filter_check(&q), -EINVAL);           \
        assert_int_equal(audit_db_tail_start(f->a, &q, 1, &after), -EINVAL); \
        assert_non_null(strstr(audit_db_errmsg(f->a), "invalid audit filter")); \
    } while (0)
#define GOOD(stmt)                                                   \
    do {                                                             \
        memset(&q, 0, sizeof q);                                     \
        stmt;                                                        \
        assert_int_equal(audit_filter_check(&q), 0);                 \
    } while (0)

    BAD(memset(q.session, 's', sizeof q.session));
    BAD(q.uid = 5);                                  /* uid without has_uid */
    BAD(q.kind = 8);
    BAD(q.verdict = 3);
    BAD(q.dst_len = 5);
    BAD((q.dst_len = 4, q.dst_prefix = 33));
    BAD((q.dst_len = 16, q.dst_prefix = 129));
    BAD(q.dst_prefix = 8);                           /* a prefix of no address */
    BAD((q.port_min = 100, q.port_max = 99));
    GOOD((q.has_uid = true, q.uid = 0));
    GOOD((q.dst_len = 4, q.dst_prefix = 32));
    GOOD((q.dst_len = 16, q.dst_prefix = 0));
    GOOD((q.port_min = 100, q.port_max = 0));        /* port_max 0: just 100 */
    GOOD((q.port_min = 0, q.port_max = 100));
    GOOD((q.since_us = 10, q.until_us = 5));         /* empty, not wrong */
    BAD(snprintf(q.name, sizeof q.name, "Example.COM")); /* not canonical */
    BAD(snprintf(q.name, sizeof q.name, "*"));
    BAD(snprintf(q.name, sizeof q.name, "a..b"));
    BAD(memset(q.name, 'a', sizeof q.name));
    GOOD(snprintf(q.name, sizeof q.name, "*.example.com"));
#undef BAD
#undef GOOD
    assert_int_equal(audit_db_page(f->a, &q, 10, NULL, NULL), -EINVAL);
}

static int count_cb(const struct audit_rec *r, void *ud) {
    (void)r;
    (*(size_t *)ud)++;
    return 0;
}

/* --name: a dns record's name=, a flow's names=, matched as lyh matches. */
static void test_name_filter(void **state) {
    struct fx *f = *state;
    struct audit_rec recs[6];
    static const char *const details[] = {
        "name=a.example.com type=A rcode=NOERROR", "names=b.test,a.example.com",
        "names=c.test", "name=example.com type=A", "dns=none",
        "via=a.example.com hostname=a.example.com",
    };
    for (int i = 0; i < 6; i++) {
        recs[i] = mk_flow(1000 + i, "s-1", 1000, 0, 1, 443);
        recs[i].detail = details[i];
    }
    recs[0].kind = recs[3].kind = AUDIT_KIND_DNS;
    assert_int_equal(audit_db_append(f->a, recs, 6), 0);
    static const struct {
        const char *pattern;
        size_t want;
    } cases[] = {
        {"*.example.com", 2}, {"example.com", 1}, {"c.test", 1}, {"b.test", 1},
        {"d.test", 0}, {"a.example.com", 2},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct audit_filter q = { 0 };
        size_t n = 0;
        snprintf(q.name, sizeof q.name, "%s", cases[i].pattern);
        assert_int_equal(audit_db_page(f->a, &q, 100, count_cb, &n), (int)cases[i].want);
        assert_int_equal(n, cases[i].want);
    }
    /* with the kind, and the newest one only (the tail counts matches) */
    struct audit_filter q = { .kind = AUDIT_KIND_DNS };
    size_t n = 0;
    uint64_t after = 0;
    snprintf(q.name, sizeof q.name, "*.example.com");
    assert_int_equal(audit_db_page(f->a, &q, 100, count_cb, &n), 1);
    q.kind = 0;
    assert_int_equal(audit_db_tail_start(f->a, &q, 1, &after), 0);
    assert_int_equal(after, 1); /* id 2 is the newest match: the walk starts after id 1 */
}

static void test_page_and_tail(void **state) {
    struct fx *f = *state;
    struct audit_filter all = { 0 }, odd = { 0 }, q;
    struct walk w = { 0 };
    uint64_t after = 99;
    size_t count = 0;

    append_flows(f->a, 2500, 1000000, 1000);

    /* Every row exactly once, ascending, over pages of 100 and of 7. */
    walk_all(f->a, &all, 100, &w);
    assert_int_equal(w.n, 2500);
    for (size_t i = 0; i < w.n; i++)
        assert_int_equal(w.ids[i], i + 1);
    walk_free(&w);
    walk_all(f->a, &all, 7, &w);
    assert_int_equal(w.n, 2500);
    assert_int_equal(w.ids[2499], 2500);
    walk_free(&w);
    /* The page after the last is empty. */
    q = all;
    q.after_id = 2500;
    assert_int_equal(audit_db_page(f->a, &q, 100, count_cb, &count), 0);
    assert_int_equal(count, 0);
    assert_int_equal(audit_db_page(f->a, &all, 0, count_cb, &count), 0);
    q.after_id = UINT64_MAX;
    assert_int_equal(audit_db_page(f->a, &q, 100, count_cb, &count), 0);

    /* fn stops early: the page says how many it delivered. */
    w.stop_after = 3;
    assert_int_equal(audit_db_page(f->a, &all, 100, walk_cb, &w), 3);
    assert_int_equal(w.n, 3);
    walk_free(&w);

    /* v6 records are the even ids (append_flows alternates). */
    odd.dst_len = 16;
    odd.dst[0] = 0x20;
    odd.dst[1] = 0x01;
    odd.dst_prefix = 16;
    walk_all(f->a, &odd, 64, &w);
    assert_int_equal(w.n, 1250);
    for (size_t i = 0; i < w.n; i++)
        assert_int_equal(w.ids[i], 2 * i + 2);
    walk_free(&w);

    {
        uint64_t c = 0;

        assert_int_equal(audit_db_count(f->a, &odd, &c), 0);
        assert_int_equal(c, 1250);
        assert_int_equal(audit_db_count(f->a, &all, &c), 0);
        assert_int_equal(c, 2500);
        q = odd;
        q.after_id = 2000;
        assert_int_equal(audit_db_count(f->a, &q, &c), 0);
        assert_int_equal(c, 250);
        q.after_id = UINT64_MAX;
        assert_int_equal(audit_db_count(f->a, &q, &c), 0);
        assert_int_equal(c, 0);
        assert_int_equal(audit_db_count(f->a, &q, NULL), -EINVAL);
    }

    /* Tails: the walk from the start point yields exactly the last n. */
    static const unsigned ns[] = { 1, 2, 100, 1249, 1250 };
    for (size_t k = 0; k < ARRAY_SIZE(ns); k++) {
        assert_int_equal(audit_db_tail_start(f->a, &odd, ns[k], &after), 0);
        q = odd;
        q.after_id = after;
        walk_all(f->a, &q, 1000, &w);
        assert_int_equal(w.n, ns[k]);
        assert_int_equal(w.ids[w.n - 1], 2500);
        assert_int_equal(w.ids[0], 2500 - 2 * (ns[k] - 1));
        walk_free(&w);
    }
    assert_int_equal(audit_db_tail_start(f->a, &odd, 1251, &after), 0);
    assert_int_equal(after, 0); /* fewer than n: all of them */
    q = odd;
    q.after_id = 2000;
    assert_int_equal(audit_db_tail_start(f->a, &q, 1000, &after), 0);
    assert_int_equal(after, 2000); /* fewer than n: the filter's own start */
    assert_int_equal(audit_db_tail_start(f->a, &q, 10, &after), 0);
    assert_int_equal(after, 2500 - 19);
    assert_int_equal(audit_db_tail_start(f->a, &all, 0, &after), 0);
    assert_int_equal(after, 2500); /* n = 0: only what comes later */
    q = all;
    q.after_id = 4000;
    assert_int_equal(audit_db_tail_start(f->a, &q, 0, &after), 0);
    assert_int_equal(after, 4000);
    assert_int_equal(audit_db_tail_start(f->a, &all, 5, NULL), -EINVAL);
}

/* The driver audit_db.c is expected to pick for a filter. */
static const char *expected_index(const struct audit_filter *q) {
    if (q->session[0])
        return "events_session";
    if (q->dst_len && q->dst_prefix == q->dst_len * 8)
        return "events_dst";
    if (q->kind && q->kind != AUDIT_KIND_FLOW)
        return "events_kind";
    if (q->has_uid)
        return "events_uid";
    return "INTEGER PRIMARY KEY";
}

static void test_every_shape_plan(void **state) {
    struct fx *f = *state;
    char plan[1024];
    unsigned shapes = 0;

    /* since, until, session, uid, verdict, protocol, port: 7 bits; kind
     * none/flow/rare; dst none/host/net. */
    for (unsigned bits = 0; bits < 128; bits++)
        for (int kind = 0; kind < 3; kind++)
            for (int dst = 0; dst < 3; dst++)
                for (int tail = 0; tail < 2; tail++) {
                    struct audit_filter q = { 0 };
                    const char *want;

                    q.since_us = bits & 1 ? 5 : 0;
                    q.until_us = bits & 2 ? 50 : 0;
                    if (bits & 4)
                        snprintf(q.session, sizeof q.session, "s-1");
                    q.has_uid = bits & 8;
                    q.verdict = bits & 16 ? AUDIT_VERDICT_DENIED : 0;
                    q.protocol = bits & 32 ? 6 : 0;
                    q.port_min = bits & 64 ? 443 : 0;
                    q.kind = kind == 0 ? 0 : kind == 1 ? AUDIT_KIND_FLOW : AUDIT_KIND_GAP;
                    q.dst_len = dst ? 4 : 0;
                    q.dst_prefix = dst == 1 ? 32 : dst == 2 ? 24 : 0;
                    q.after_id = 3;
                    if (audit_db_explain(f->a, &q, tail, plan, sizeof plan) < 0)
                        fail_msg("explain: %s", audit_db_errmsg(f->a));
                    want = expected_index(&q);
                    if (strstr(plan, "TEMP B-TREE") || !strstr(plan, want) ||
                        !strstr(plan, "rowid>?") || strstr(plan, "SCAN"))
                        fail_msg("shape %u/%d/%d %s: plan '%s', want %s with rowid>?", bits,
                                 kind, dst, tail ? "tail" : "page", plan, want);
                    shapes++;
                }
    print_message("plans of %u query shapes: one index (or the rowid) each, no sort\n", shapes);

    /* The two the docs quote, verbatim. */
    {
        struct audit_filter q = { 0 };

        snprintf(q.session, sizeof q.session, "s-1");
        assert_int_equal(audit_db_explain(f->a, &q, false, plan, sizeof plan), 0);
        assert_string_equal(plan, "SEARCH events USING INDEX events_session (session=? AND rowid>?)");
        assert_int_equal(audit_db_explain(f->a, &q, true, plan, sizeof plan), 0);
        assert_string_equal(plan, "SEARCH events USING COVERING INDEX events_session "
                                  "(session=? AND rowid>?)");
        q.has_uid = true;
        q.uid = 1000;
        q.since_us = 1;
        assert_int_equal(audit_db_explain(f->a, &q, false, plan, sizeof plan), 0);
        assert_string_equal(plan, "SEARCH events USING INDEX events_session (session=? AND rowid>?)");
        memset(&q, 0, sizeof q);
        q.has_uid = true;
        q.verdict = AUDIT_VERDICT_DENIED;
        assert_int_equal(audit_db_explain(f->a, &q, true, plan, sizeof plan), 0);
        assert_string_equal(plan, "SEARCH events USING INDEX events_uid "
                                  "(has_uid=? AND uid=? AND rowid>?)");
        assert_int_equal(audit_db_explain(f->a, &q, true, plan, 10), -ERANGE);
    }
}

/* ---- readers and the writer ---------------------------------------------------------------- */

struct mid_iter {
    struct audit_db *a;
    size_t seen;
    int append_rc;
    int nested;
    uint64_t appended_id;
};

static int mid_iter_cb(const struct audit_rec *r, void *ud) {
    struct mid_iter *m = ud;

    (void)r;
    if (m->seen++ == 1) {
        /* The page statement is in the middle of its walk (a read snapshot
         * is open on the reader): the writer must not wait for it. */
        struct audit_rec more[5];
        struct audit_filter same = { 0 };
        size_t n = 0;

        for (int i = 0; i < 5; i++)
            more[i] = mk_flow(9000 + i, "s-0000000000000a", 1000, false, 9, 443);
        m->append_rc = audit_db_append(m->a, more, 5);
        m->appended_id = more[4].id;
        /* And a page with the same shape from inside a page: it runs (on a
         * statement of its own) in the same read snapshot. */
        m->nested = audit_db_page(m->a, &same, 100, count_cb, &n);
    }
    return 0;
}

static void test_reader_does_not_block_writer(void **state) {
    struct fx *f = *state;
    struct audit_filter all = { 0 };
    struct mid_iter m = { .a = f->a, .append_rc = 1 };
    size_t n = 0;
    unsigned deleted = 0;

    append_flows(f->a, 10, 1000, 1);
    assert_int_equal(audit_db_page(f->a, &all, 100, mid_iter_cb, &m), 10);
    assert_int_equal(m.append_rc, 0);
    assert_int_equal(m.appended_id, 15);
    assert_int_equal(m.seen, 10);   /* the page read its snapshot: not the 5 new ones */
    assert_int_equal(m.nested, 10); /* same connection, same snapshot */
    assert_int_equal(last_id(f->a), 15); /* a read begun later sees them */
    all.after_id = 10;
    assert_int_equal(audit_db_page(f->a, &all, 100, count_cb, &n), 5);

    /* Retention while a page is open: also not blocked. */
    m = (struct mid_iter){ .a = f->a, .append_rc = 1 };
    all.after_id = 0;
    assert_int_equal(prune_simple(f->a, 1003, 0, 100, &deleted), 0);
    assert_int_equal(deleted, 3);
    assert_int_equal(audit_db_page(f->a, &all, 100, mid_iter_cb, &m), 12);
    assert_int_equal(m.append_rc, 0);
}

static void test_locked_by_another_writer(void **state) {
    struct fx *f = *state;
    struct audit_rec r = mk_flow(1, "s-lock", 1, false, 1, 1);
    struct audit_filter all = { 0 };
    size_t n = 0;
    sqlite3 *raw = raw_open(f->db);

    append_ok(f->a, &r, 1);
    raw_exec(raw, "BEGIN IMMEDIATE");
    /* The writer gives up after its busy timeout, stores nothing, says why. */
    r.id = 42;
    assert_int_equal(audit_db_append(f->a, &r, 1), -EBUSY);
    assert_non_null(strstr(audit_db_errmsg(f->a), "locked by another process"));
    assert_int_equal(r.id, 42);
    /* Readers are not held up by someone else's write lock either. */
    assert_int_equal(audit_db_page(f->a, &all, 10, count_cb, &n), 1);
    raw_exec(raw, "ROLLBACK");
    sqlite3_close(raw);
    append_ok(f->a, &r, 1);
    assert_int_equal(r.id, 2);
}

/* ---- retention ------------------------------------------------------------------------------- */

static void test_prune_by_age(void **state) {
    struct fx *f = *state;
    const size_t n = 10000;
    const int64_t cutoff = 6000 * 1000;
    struct audit_rec *recs = calloc(n, sizeof *recs);
    struct audit_filter all = { 0 };
    struct walk w = { 0 };
    unsigned deleted = 0, calls = 0;
    size_t old = 0;
    int64_t youngest_deleted = INT64_MIN;

    assert_non_null(recs);
    /* Times mostly in id order, every 7th a few seconds early. */
    for (size_t i = 0; i < n; i++) {
        int64_t t = (int64_t)i * 1000 - (i % 7 == 0 ? 3500 : 0);
        recs[i] = mk_flow(t, "s-age", 1000, false, (uint8_t)i, 443);
        old += t < cutoff;
    }
    for (size_t i = 0; i < n; i += 1000)
        append_ok(f->a, recs + i, 1000);

    /* Bounded: 700 per call, the oldest by time first. */
    for (;;) {
        assert_int_equal(prune_simple(f->a, cutoff, 0, 700, &deleted), 0);
        if (deleted == 0)
            break;
        calls++;
        assert_true(deleted <= 700);
        /* Everything left that is old is younger than what went. */
        walk_all(f->a, &all, 1000, &w);
        {
            int64_t oldest_left = INT64_MAX;
            size_t left_old = 0;

            for (size_t i = 0; i < w.n; i++) {
                int64_t t = recs[w.ids[i] - 1].time_us;
                if (t < oldest_left)
                    oldest_left = t;
                left_old += t < cutoff;
            }
            /* what was deleted so far is exactly the oldest (old - left_old) */
            for (size_t i = 0; i < n; i++) {
                bool present = false;
                /* ids are ascending in w: binary search */
                size_t lo = 0, hi = w.n;
                while (lo < hi) {
                    size_t mid = (lo + hi) / 2;
                    if (w.ids[mid] < i + 1)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                present = lo < w.n && w.ids[lo] == i + 1;
                if (!present && recs[i].time_us > youngest_deleted)
                    youngest_deleted = recs[i].time_us;
            }
            assert_true(youngest_deleted <= oldest_left);
            assert_int_equal(n - w.n, old - left_old);
        }
        walk_free(&w);
    }
    assert_int_equal(calls, (old + 699) / 700);
    /* Exactly the old ones went. */
    walk_all(f->a, &all, 1000, &w);
    assert_int_equal(w.n, n - old);
    for (size_t i = 0; i < w.n; i++)
        assert_true(recs[w.ids[i] - 1].time_us >= cutoff);
    assert_true(youngest_deleted < cutoff);
    walk_free(&w);
    print_message("age prune: %zu old of %zu removed in %u bounded calls\n", old, n, calls);
    free(recs);
}

static void test_prune_by_size(void **state) {
    struct fx *f = *state;
    const size_t n = 60000;
    struct audit_rec *recs = calloc(1000, sizeof *recs);
    char detail[301];
    uint64_t size0 = 0, size1 = 0, budget;
    off_t file0, file1;
    unsigned deleted = 0, calls = 0, total = 0;
    struct audit_filter all = { 0 };
    struct walk w = { 0 };

    assert_non_null(recs);
    memset(detail, 'd', 300);
    detail[300] = '\0';
    for (size_t b = 0; b < n; b += 1000) {
        for (size_t i = 0; i < 1000; i++) {
            recs[i] = mk_flow((int64_t)(b + i), "s-size", 1000, i % 3 == 0, (uint8_t)i, 443);
            recs[i].detail = detail;
        }
        append_ok(f->a, recs, 1000);
    }
    assert_int_equal(audit_db_size(f->a, &size0), 0);
    /* Get the WAL into the file so the file size is the database's. */
    audit_db_close(f->a);
    f->a = NULL;
    assert_true(must_open(f));
    file0 = size_of(f->db);
    assert_true(size0 > 20 * 1024 * 1024);
    budget = size0 / 3;

    for (;;) {
        assert_int_equal(prune_simple(f->a, 0, budget, 5000, &deleted), 0);
        if (deleted == 0)
            break;
        assert_true(deleted <= 5000);
        total += deleted;
        calls++;
        assert_true(calls < 100);
    }
    assert_int_equal(audit_db_size(f->a, &size1), 0);
    assert_true(size1 <= budget);
    /* The oldest went: what is left is the newest, contiguous to the end. */
    walk_all(f->a, &all, 5000, &w);
    assert_int_equal(w.n, n - total);
    assert_int_equal(w.ids[0], total + 1);
    assert_int_equal(w.ids[w.n - 1], n);
    walk_free(&w);
    /* And the file gave the pages back (prune checkpoints after vacuuming). */
    file1 = size_of(f->db);
    print_message("size prune: %llu -> %llu bytes used (budget %llu), %u rows in %u calls, "
                  "file %lld -> %lld bytes\n",
                  (unsigned long long)size0, (unsigned long long)size1,
                  (unsigned long long)budget, total, calls, (long long)file0, (long long)file1);
    assert_true((uint64_t)file1 < (uint64_t)file0 / 2);
    assert_int_equal(raw_int_at(f->db, "PRAGMA freelist_count"), 0);
    /* Nothing to do is a no-op. */
    assert_int_equal(prune_simple(f->a, 0, 0, 5000, &deleted), 0);
    assert_int_equal(deleted, 0);
    assert_int_equal(prune_simple(f->a, 0, budget, 5000, NULL), -EINVAL);
    free(recs);
}

/* ---- fair retention ------------------------------------------------------------------------- */

/* A non-flow record. */
static struct audit_rec mk_note(int64_t t, uint8_t kind, const char *session, bool has_uid,
                                uint32_t uid, const char *action) {
    struct audit_rec r = { 0 };

    r.time_us = t;
    r.kind = kind;
    snprintf(r.session, sizeof r.session, "%s", session);
    r.has_uid = has_uid;
    r.uid = has_uid ? uid : 0;
    snprintf(r.action, sizeof r.action, "%s", action);
    r.detail = "k=v";
    return r;
}

/* n flows of one writer (session "" = no session), times t, t+1, ... */
static void append_writer(struct audit_db *a, size_t n, int64_t t, const char *session,
                          bool has_uid, uint32_t uid) {
    struct audit_rec *recs = calloc(n, sizeof *recs);

    assert_non_null(recs);
    for (size_t i = 0; i < n; i++) {
        recs[i] = mk_flow(t + (int64_t)i, session, uid, i % 4 == 0, (uint8_t)i, 443);
        recs[i].has_uid = has_uid;
        recs[i].uid = has_uid ? uid : 0;
        recs[i].verdict = AUDIT_VERDICT_DENIED;
    }
    for (size_t i = 0; i < n; i += 1000)
        append_ok(a, recs + i, n - i < 1000 ? n - i : 1000);
    free(recs);
}

static void append_notes(struct audit_db *a, size_t n, int64_t t, uint8_t kind,
                         const char *session, bool has_uid, uint32_t uid, const char *action) {
    for (size_t i = 0; i < n; i++) {
        struct audit_rec r = mk_note(t + (int64_t)i, kind, session, has_uid, uid, action);
        append_ok(a, &r, 1);
    }
}

/* count(*) of events WHERE cond, through a connection of its own. */
static int64_t count_where(struct fx *f, const char *cond) {
    char sql[512];

    snprintf(sql, sizeof sql, "SELECT count(*) FROM events WHERE %s", cond);
    return raw_int_at(f->db, sql);
}

/* The per-writer counts equal what events holds, both ways. */
static void check_counts(struct fx *f) {
    static const char *const sql[] = {
        "SELECT count(*) FROM (SELECT kind, session, has_uid, uid, count(*) FROM events "
        "GROUP BY 1, 2, 3, 4 EXCEPT SELECT kind, session, has_uid, uid, n FROM writers)",
        "SELECT count(*) FROM (SELECT kind, session, has_uid, uid, n FROM writers EXCEPT "
        "SELECT kind, session, has_uid, uid, count(*) FROM events GROUP BY 1, 2, 3, 4)",
        "SELECT count(*) FROM (SELECT kind, has_uid, uid, count(*) FROM events "
        "GROUP BY 1, 2, 3 EXCEPT SELECT kind, has_uid, uid, n FROM writer_uids)",
        "SELECT count(*) FROM (SELECT kind, has_uid, uid, n FROM writer_uids EXCEPT "
        "SELECT kind, has_uid, uid, count(*) FROM events GROUP BY 1, 2, 3)",
    };

    for (size_t i = 0; i < ARRAY_SIZE(sql); i++) {
        int64_t bad = raw_int_at(f->db, sql[i]);
        if (bad != 0)
            fail_msg("counts differ from the records (%lld rows): %s", (long long)bad, sql[i]);
    }
}

static int prune_p(struct fx *f, const struct audit_retention *p, struct audit_prune_result *res) {
    int r = audit_db_prune(f->a, p, res);

    if (r < 0)
        fail_msg("audit_db_prune = %d: %s", r, audit_db_errmsg(f->a));
    return r;
}

#define SES_A "a-00000000000aaa" /* uid 1000: the agent that floods */
#define SES_B "b-000000000000bb" /* uid 1000: another session of the same user */
#define SES_C "c-000000000000cc" /* uid 2000 */

/* A sandboxed agent floods denied flows; size retention must take its flow
 * records, oldest of them first, and leave other users' records, the same
 * user's other session and every lifecycle, policy, guard, gap and request
 * record alone, although all of those are older. */
static void test_prune_size_heaviest_first(void **state) {
    struct fx *f = *state;
    struct audit_retention p = { .now_us = 5000000, .max_age_days = 90, .max_rows = 2000,
                                 .gap_delay_us = INT64_MAX };
    struct audit_prune_result res = { 0 };
    uint64_t size0 = 0, size1 = 0;
    int64_t first_a, left_a, removed = 0, nonflow;
    unsigned steps = 0;

    /* The older records: everything but the flood. */
    append_notes(f->a, 1, 100, AUDIT_KIND_SESSION, SES_C, true, 2000, "start");
    append_notes(f->a, 1, 101, AUDIT_KIND_SESSION, SES_B, true, 1000, "start");
    append_notes(f->a, 1, 102, AUDIT_KIND_SESSION, SES_A, true, 1000, "start");
    append_notes(f->a, 1, 103, AUDIT_KIND_POLICY, "", true, 0, "set");
    append_notes(f->a, 1, 104, AUDIT_KIND_GUARD, "", true, 1000, "install");
    append_notes(f->a, 1, 105, AUDIT_KIND_GAP, "", false, 0, "overrun");
    append_writer(f->a, 1000, 1000, SES_C, true, 2000);
    append_writer(f->a, 500, 3000, SES_B, true, 1000);
    append_writer(f->a, 300, 4000, "", true, 3000); /* a shared chain: no session */
    append_notes(f->a, 5, 4500, AUDIT_KIND_REQUEST, "", true, 2000, "refused");
    append_notes(f->a, 200, 4600, AUDIT_KIND_REQUEST, "", true, 1000, "refused");
    /* The flood, newest. */
    first_a = (int64_t)last_id(f->a) + 1;
    append_writer(f->a, 8000, 10000, SES_A, true, 1000);
    append_notes(f->a, 1, 20000, AUDIT_KIND_SESSION, SES_B, true, 1000, "end");
    append_notes(f->a, 1, 20001, AUDIT_KIND_SESSION, SES_C, true, 2000, "end");
    check_counts(f);
    nonflow = count_where(f, "kind <> 1");
    assert_int_equal(nonflow, 213);

    assert_int_equal(audit_db_size(f->a, &size0), 0);
    p.max_bytes = size0 * 3 / 4;
    for (;;) {
        prune_p(f, &p, &res);
        if (res.deleted == 0)
            break;
        assert_true(res.deleted <= p.max_rows);
        removed += res.deleted;
        steps++;
        assert_true(steps < 100);
        /* After every step, not only at the end. */
        assert_int_equal(count_where(f, "kind <> 1"), nonflow);
        assert_int_equal(count_where(f, "session = '" SES_C "'"), 1002);
        assert_int_equal(count_where(f, "session = '" SES_B "'"), 502);
        assert_int_equal(count_where(f, "uid = 3000"), 300);
    }
    assert_int_equal(audit_db_size(f->a, &size1), 0);
    assert_true(size1 <= p.max_bytes);
    assert_true(removed > 0);
    /* Only the agent's flows went, the oldest of them. */
    left_a = count_where(f, "session = '" SES_A "' AND kind = 1");
    assert_int_equal(left_a, 8000 - removed);
    {
        char sql[160];

        snprintf(sql, sizeof sql,
                 "SELECT min(id) FROM events WHERE session = '" SES_A "' AND kind = 1");
        assert_int_equal(raw_int_at(f->db, sql), first_a + removed);
    }
    check_counts(f);
    /* Counted as removed for size, for uid 1000, as flows; no gap record yet
     * (this test's delay never ends). */
    assert_int_equal(raw_int_at(f->db, "SELECT n FROM pruned WHERE reason = 2 AND has_uid = 1 "
                                       "AND uid = 1000 AND kind = 1"),
                     removed);
    assert_int_equal(raw_int_at(f->db, "SELECT count(*) FROM pruned"), 1);
    assert_true(res.gaps_pending);
    print_message("size retention: %lld of the agent's 8000 flows removed in %u steps "
                  "(%llu -> %llu bytes, cap %llu); nothing else touched\n",
                  (long long)removed, steps, (unsigned long long)size0,
                  (unsigned long long)size1, (unsigned long long)p.max_bytes);
}

/* Size retention's order when it must keep going: flows (the heaviest uid
 * first), then requests (likewise), and only then the oldest of the rest. */
static void test_prune_size_order(void **state) {
    struct fx *f = *state;
    struct audit_retention p = { .now_us = 5000000, .max_bytes = 1, .max_rows = 7,
                                 .gap_delay_us = INT64_MAX };
    struct audit_prune_result res = { 0 };
    unsigned steps = 0;

    append_notes(f->a, 2, 10, AUDIT_KIND_SESSION, "s-1", true, 1000, "start");
    append_notes(f->a, 1, 20, AUDIT_KIND_POLICY, "", true, 0, "set");
    append_notes(f->a, 1, 30, AUDIT_KIND_GUARD, "", true, 1000, "install");
    append_notes(f->a, 1, 40, AUDIT_KIND_GAP, "", false, 0, "overrun");
    append_notes(f->a, 30, 100, AUDIT_KIND_REQUEST, "", true, 1000, "refused");
    append_notes(f->a, 10, 200, AUDIT_KIND_REQUEST, "", true, 2000, "refused");
    append_writer(f->a, 40, 300, "s-1", true, 1000);
    append_writer(f->a, 20, 400, "", true, 2000);
    append_writer(f->a, 3, 500, "", false, 0); /* a flow about no uid (nosession) */

    for (;;) {
        int64_t f1000, f2000, fnone, r1000, r2000, rest;

        prune_p(f, &p, &res);
        steps++;
        assert_true(steps < 100);
        f1000 = count_where(f, "kind = 1 AND uid = 1000");
        f2000 = count_where(f, "kind = 1 AND uid = 2000");
        fnone = count_where(f, "kind = 1 AND has_uid = 0");
        r1000 = count_where(f, "kind = 4 AND uid = 1000");
        r2000 = count_where(f, "kind = 4 AND uid = 2000");
        rest = count_where(f, "kind NOT IN (1, 4)");
        /* The heaviest uid's go first: the lighter one is untouched while
         * the heavier has more (one pick takes at most 1 here: 7 / 8). */
        assert_true(f2000 == 20 || f1000 <= f2000 + 1);
        assert_true(fnone == 3 || (f1000 <= 3 && f2000 <= 3));
        if (f1000 + f2000 + fnone > 0)
            assert_int_equal(r1000 + r2000, 40);
        assert_true(r2000 == 10 || r1000 <= r2000 + 1);
        if (f1000 + f2000 + fnone + r1000 + r2000 > 0)
            assert_int_equal(rest, 5);
        check_counts(f);
        if (res.deleted == 0)
            break;
    }
    assert_int_equal(count_where(f, "1"), 0);
    assert_int_equal(raw_int_at(f->db, "SELECT count(*) FROM writers"), 0);
    assert_int_equal(raw_int_at(f->db, "SELECT count(*) FROM writer_uids"), 0);
    assert_int_equal(raw_int_at(f->db, "SELECT sum(n) FROM pruned"), 108);
    print_message("size order: 108 records removed in %u steps of 7: flows, requests, rest\n",
                  steps - 1);
}

struct gaps {
    struct audit_rec rec[16];
    char detail[16][512];
    size_t n;
};

static int gaps_cb(const struct audit_rec *r, void *ud) {
    struct gaps *g = ud;

    if (strcmp(r->action, "retention") != 0)
        return 0;
    assert_true(g->n < ARRAY_SIZE(g->rec));
    g->rec[g->n] = *r;
    snprintf(g->detail[g->n], sizeof g->detail[g->n], "%s", r->detail);
    g->rec[g->n].detail = g->detail[g->n];
    g->n++;
    return 0;
}

/* The retention gap records a filter sees. */
static void read_gaps(struct fx *f, bool has_uid, uint32_t uid, struct gaps *g) {
    struct audit_filter q = { .kind = AUDIT_KIND_GAP, .has_uid = has_uid, .uid = uid };

    memset(g, 0, sizeof *g);
    assert_true(audit_db_page(f->a, &q, 100, gaps_cb, g) >= 0);
}

static const struct audit_rec *gap_of(const struct gaps *g, bool has_uid, uint32_t uid) {
    for (size_t i = 0; i < g->n; i++)
        if (g->rec[i].has_uid == has_uid && (!has_uid || g->rec[i].uid == uid))
            return &g->rec[i];
    return NULL;
}

static void has_text(const char *s, const char *want) {
    if (!strstr(s, want))
        fail_msg("'%s' lacks '%s'", s, want);
}

#define T_NOW 1800000000000000ll /* 2027-01-15T08:00:00Z */
#define DAY_US (86400ll * 1000000)

/* Retention says what it removed: one gap record per uid (and one about no
 * uid), with the counts per kind, why, and the time span; a user sees their
 * own. Coalesced over gap_delay_us, kept across a crash, flushed on demand. */
static void test_prune_gap_records(void **state) {
    struct fx *f = *state;
    const int64_t old = T_NOW - 100 * DAY_US, young = T_NOW - DAY_US;
    struct audit_retention p = { .now_us = T_NOW, .older_than_us = T_NOW - 90 * DAY_US,
                                 .max_age_days = 90, .max_rows = 1000 };
    struct audit_prune_result res = { 0 };
    const struct audit_rec *g1000, *g2000, *gnone;
    struct gaps g;

    append_writer(f->a, 30, old, "s-1", true, 1000);
    append_notes(f->a, 1, old + 100, AUDIT_KIND_SESSION, "s-2", true, 2000, "start");
    append_notes(f->a, 4, old + 200, AUDIT_KIND_SESSION, "s-2", true, 2000, "end");
    append_notes(f->a, 3, old + 300, AUDIT_KIND_REQUEST, "", true, 2000, "refused");
    append_notes(f->a, 1, old + 400, AUDIT_KIND_GAP, "", false, 0, "overrun");
    append_writer(f->a, 10, young, "s-1", true, 1000);
    append_notes(f->a, 2, young, AUDIT_KIND_REQUEST, "", true, 2000, "refused");

    /* Age: one step removes the 39 old records and writes three gaps. */
    prune_p(f, &p, &res);
    assert_int_equal(res.deleted, 39);
    assert_int_equal(res.gaps, 3);
    assert_false(res.gaps_pending);
    assert_int_equal(res.first_gap_id, 52);
    read_gaps(f, false, 0, &g);
    assert_int_equal(g.n, 3);
    g1000 = gap_of(&g, true, 1000);
    g2000 = gap_of(&g, true, 2000);
    gnone = gap_of(&g, false, 0);
    assert_non_null(g1000);
    assert_non_null(g2000);
    assert_non_null(gnone);
    assert_int_equal(g1000->time_us, T_NOW);
    assert_int_equal(g1000->missed, 30);
    assert_string_equal(g1000->session, "");
    has_text(g1000->detail, "reason=\"retention: older than 90 days\" max_age_days=90 flow=30 ");
    assert_null(strstr(g1000->detail, "request="));
    has_text(g1000->detail, " oldest=2026-10-07T08:00:00Z newest=2026-10-07T08:00:00Z");
    assert_int_equal(g2000->missed, 8);
    has_text(g2000->detail, "max_age_days=90 session=5 request=3 oldest=");
    assert_int_equal(gnone->missed, 1);
    has_text(gnone->detail, " gap=1 ");
    check_counts(f);
    assert_int_equal(raw_int_at(f->db, "SELECT count(*) FROM pruned"), 0);
    /* Each user sees the gap about them (the filter a non-admin gets). */
    read_gaps(f, true, 1000, &g);
    assert_int_equal(g.n, 1);
    assert_int_equal(g.rec[0].missed, 30);
    read_gaps(f, true, 2000, &g);
    assert_int_equal(g.n, 1);
    read_gaps(f, true, 3000, &g);
    assert_int_equal(g.n, 0);
    /* Nothing more to do: nothing written. */
    prune_p(f, &p, &res);
    assert_int_equal(res.deleted, 0);
    assert_int_equal(res.gaps, 0);

    /* Size: the heaviest writer (uid 1000's young flows) goes first. */
    p = (struct audit_retention){ .now_us = T_NOW + 1000000, .max_bytes = 1, .max_rows = 5 };
    prune_p(f, &p, &res);
    assert_int_equal(res.deleted, 5);
    assert_int_equal(res.gaps, 1);
    read_gaps(f, true, 1000, &g);
    assert_int_equal(g.n, 2);
    assert_int_equal(g.rec[1].missed, 5);
    assert_int_equal(g.rec[1].time_us, T_NOW + 1000000);
    has_text(g.rec[1].detail, "reason=\"retention: audit.db over its size cap\" max_bytes=1 "
                              "flow=5 oldest=");

    /* Coalesced: removals within gap_delay_us of the first become one gap. */
    p = (struct audit_retention){ .now_us = T_NOW + 2000000, .max_bytes = 1, .max_rows = 3,
                                  .gap_delay_us = 600ll * 1000000 };
    prune_p(f, &p, &res);
    assert_int_equal(res.deleted, 3);
    assert_int_equal(res.gaps, 0);
    assert_true(res.gaps_pending);
    p.now_us = T_NOW + 500ll * 1000000;
    p.max_rows = 1;
    prune_p(f, &p, &res);
    assert_int_equal(res.deleted, 1);
    assert_int_equal(res.gaps, 0);
    assert_true(res.gaps_pending);
    /* Not lost in a crash: the counts are in audit.db. */
    audit_db_abandon(f->a);
    f->a = NULL;
    assert_false(must_open(f));
    p.now_us = T_NOW + 602ll * 1000000;
    p.max_rows = 0; /* only the gap records are due */
    prune_p(f, &p, &res);
    assert_int_equal(res.deleted, 0);
    assert_int_equal(res.gaps, 1);
    assert_false(res.gaps_pending);
    read_gaps(f, true, 1000, &g);
    assert_int_equal(g.n, 3);
    assert_int_equal(g.rec[2].missed, 4);
    has_text(g.rec[2].detail, "max_bytes=1 flow=4 ");
    assert_int_equal(g.rec[2].time_us, T_NOW + 602ll * 1000000);

    /* flush_gaps writes what is counted at once, whatever the delay. */
    p.now_us = T_NOW + 603ll * 1000000;
    p.max_rows = 1;
    prune_p(f, &p, &res);
    assert_int_equal(res.gaps, 0);
    assert_true(res.gaps_pending);
    p = (struct audit_retention){ .now_us = T_NOW + 604ll * 1000000, .flush_gaps = true,
                                  .gap_delay_us = 600ll * 1000000 };
    prune_p(f, &p, &res);
    assert_int_equal(res.deleted, 0);
    assert_int_equal(res.gaps, 1);
    assert_false(res.gaps_pending);
    check_counts(f);
    assert_int_equal(audit_db_prune(f->a, NULL, &res), -EINVAL);
    assert_int_equal(audit_db_prune(f->a, &p, NULL), -EINVAL);
}

/* Many uids at once: at most 256 gap records per step, the rest next step. */
static void test_prune_gaps_bounded(void **state) {
    struct fx *f = *state;
    struct audit_rec recs[300];
    struct audit_retention p = { .now_us = T_NOW, .older_than_us = T_NOW, .max_age_days = 1,
                                 .max_rows = 1000 };
    struct audit_prune_result res = { 0 };

    for (int i = 0; i < 300; i++)
        recs[i] = mk_note(i, AUDIT_KIND_REQUEST, "", true, 5000 + (uint32_t)i, "refused");
    append_ok(f->a, recs, 300);
    prune_p(f, &p, &res);
    assert_int_equal(res.deleted, 300);
    assert_int_equal(res.gaps, 256);
    assert_true(res.gaps_pending);
    prune_p(f, &p, &res);
    assert_int_equal(res.deleted, 0);
    assert_int_equal(res.gaps, 44);
    assert_false(res.gaps_pending);
    assert_int_equal(count_where(f, "kind = 5 AND action = 'retention' AND missed = 1"), 300);
    check_counts(f);
}

/* The plans of the retention lookups: an index each, no scan, no sort. */
static void test_prune_plans(void **state) {
    struct fx *f = *state;
    char plan[2048];

    assert_int_equal(audit_db_explain_heaviest(f->a, plan, sizeof plan), 0);
    print_message("retention plans: %s\n", plan);
    has_text(plan, "writer_uids USING COVERING INDEX writer_uids_heavy (kind=?)");
    has_text(plan, "writers USING COVERING INDEX writers_heavy (kind=? AND has_uid=? AND uid=?)");
    has_text(plan, "events USING INDEX events_session (session=?)");
    has_text(plan, "events USING INDEX events_nosession (kind=? AND has_uid=? AND uid=?)");
    assert_null(strstr(plan, "TEMP B-TREE"));
    assert_null(strstr(plan, "SCAN"));
    assert_int_equal(audit_db_explain_heaviest(f->a, plan, 10), -ERANGE);
}

/* A version 1 file (before fair retention) gets its counts from its records. */
static void test_migration_2(void **state) {
    struct fx *f = *state;
    struct audit_retention p = { .now_us = 5000000, .max_bytes = 1, .max_rows = 10 };
    struct audit_prune_result res = { 0 };
    sqlite3 *raw;

    append_writer(f->a, 50, 100, "s-1", true, 1000);
    append_writer(f->a, 20, 200, "", true, 2000);
    append_notes(f->a, 3, 300, AUDIT_KIND_SESSION, "s-1", true, 1000, "start");
    audit_db_close(f->a);
    f->a = NULL;
    raw = raw_open(f->db);
    raw_exec(raw, "DROP TABLE writers; DROP TABLE writer_uids; DROP TABLE pruned; "
                  "DROP INDEX events_nosession; PRAGMA user_version = 1");
    sqlite3_close(raw);
    assert_true(must_open(f));
    assert_int_equal(raw_int_at(f->db, "PRAGMA user_version"), 3);
    assert_int_equal(raw_int_at(f->db, "SELECT n FROM writers WHERE session = 's-1' AND kind = 1"),
                     50);
    /* migration 3 kept the records, their ids and the next id */
    assert_int_equal(raw_int_at(f->db, "SELECT count(*) FROM events"), 73);
    assert_int_equal(raw_int_at(f->db, "SELECT seq FROM sqlite_sequence WHERE name = 'events'"),
                     73);
    assert_int_equal(raw_int_at(f->db, "SELECT n FROM writer_uids WHERE uid = 2000"), 20);
    check_counts(f);
    prune_p(f, &p, &res);
    assert_int_equal(res.deleted, 10);
    assert_int_equal(count_where(f, "session = 's-1' AND kind = 1"), 40);
    check_counts(f);
    /* and takes the records it widened the kinds for */
    append_notes(f->a, 2, 400, AUDIT_KIND_DNS, "s-1", true, 1000, "answered");
    assert_int_equal(count_where(f, "kind = 7"), 2);
    check_counts(f);
}

/* Version 3 as lyhd wrote it before: the events table's CHECKs with IN
 * lists (checks_without_in_lists spells them as comparisons), plus extra
 * SQL, if any, under writable_schema. */
static void make_v3(const char *path, const char *extra) {
    sqlite3 *raw = raw_open(path);
    int64_t cookie = raw_int(raw, "PRAGMA schema_version");
    char sql[64];

    raw_exec(raw, "PRAGMA writable_schema = ON");
    raw_exec(raw, "UPDATE sqlite_schema SET sql = replace(replace(replace(sql, "
                  "'CHECK (family = 0 OR family = 4 OR family = 6)', "
                  "'CHECK (family IN (0, 4, 6))'), "
                  "'CHECK (length(src) = 0 OR length(src) = 4 OR length(src) = 16)', "
                  "'CHECK (length(src) IN (0, 4, 16))'), "
                  "'CHECK (length(dst) = length(src))', "
                  "'CHECK (length(dst) IN (0, 4, 16) AND length(dst) = length(src))') "
                  "WHERE type = 'table' AND name = 'events'");
    if (extra)
        raw_exec(raw, extra);
    snprintf(sql, sizeof sql, "PRAGMA schema_version = %lld", (long long)cookie + 1);
    raw_exec(raw, sql);
    raw_exec(raw, "PRAGMA writable_schema = OFF; PRAGMA user_version = 3");
    sqlite3_close(raw);
}

#define EVENTS_IN_LISTS                                                                          \
    "SELECT count(*) FROM sqlite_schema WHERE name = 'events' AND (sql LIKE '%family IN (%' "      \
    "OR sql LIKE '%length(src) IN (%' OR sql LIKE '%length(dst) IN (%')"

/* A record the CHECKs must refuse, through a connection of its own (which
 * parses the schema in the file). */
static void insert_refused(const char *path, const char *family_src_dst) {
    sqlite3 *raw = raw_open(path);
    char sql[512];
    int rc;

    snprintf(sql, sizeof sql,
             "INSERT INTO events (time_us, kind, verdict, session, has_uid, uid, family, "
             "protocol, src, dst, sport, dport, iface, action, detail, a_pkts, a_bytes, d_pkts, "
             "d_bytes, missed) VALUES (1, 1, 1, 's-9', 1, 5, %s, 6, 1, 2, 'tun0', '', '', 0, 0, "
             "0, 0, 0)",
             family_src_dst);
    rc = sqlite3_exec(raw, sql, NULL, NULL, NULL);
    if (rc != SQLITE_CONSTRAINT)
        fail_msg("%s: rc %d (%s), want a CHECK failure", family_src_dst, rc, sqlite3_errmsg(raw));
    sqlite3_close(raw);
}

/* A file with the IN lists gets its CHECKs rewritten in place: records,
 * ids and counts stay, the rules are the same, the version too (an older
 * lyhd still opens it), and a second open changes nothing. */
static void test_checks_rewrite(void **state) {
    struct fx *f = *state;

    append_writer(f->a, 30, 100, "s-1", true, 1000);
    audit_db_close(f->a);
    f->a = NULL;
    make_v3(f->db, NULL);
    assert_int_equal(raw_int_at(f->db, EVENTS_IN_LISTS), 1);
    assert_true(must_open(f));
    assert_int_equal(raw_int_at(f->db, "PRAGMA user_version"), 3);
    assert_int_equal(raw_int_at(f->db, EVENTS_IN_LISTS), 0);
    assert_int_equal(raw_int_at(f->db, "SELECT count(*) FROM events"), 30);
    assert_int_equal(raw_int_at(f->db, "SELECT max(id) FROM events"), 30);
    assert_int_equal(raw_int_at(f->db, "SELECT count(*) FROM pragma_integrity_check "
                                       "WHERE integrity_check = 'ok'"),
                     1);
    /* the writer's connection works on the schema it parsed again */
    append_writer(f->a, 8, 200, "s-1", true, 1000);
    assert_int_equal(count_where(f, "session = 's-1'"), 38);
    assert_int_equal(count_where(f, "family = 6"), raw_int_at(f->db, "SELECT count(*) FROM events "
                                                               "WHERE length(src) = 16"));
    check_counts(f);
    /* the same rules as version 3 */
    insert_refused(f->db, "5, x'0a000001', x'0a000002'");                 /* no such family */
    insert_refused(f->db, "4, x'0a0000', x'0a0000'");                     /* 3 bytes */
    insert_refused(f->db, "4, x'0a000001', x'0a00000100'");               /* lengths differ */
    insert_refused(f->db, "6, x'00000000000000000000000000000001', x''"); /* lengths differ */
    assert_int_equal(count_where(f, "session = 's-9'"), 0);
    /* and a reopen finds it as it is */
    int64_t cookie = raw_int_at(f->db, "PRAGMA schema_version");
    assert_true(reopen(f));
    assert_int_equal(raw_int_at(f->db, "PRAGMA user_version"), 3);
    assert_int_equal(raw_int_at(f->db, "PRAGMA schema_version"), cookie);
}

/* An events table someone changed is refused, and left as it is: one with
 * an IN list changed, one with an old and a new CHECK. */
static void test_checks_rewrite_foreign(void **state) {
    struct fx *f = *state;
    char why[AUDIT_DB_ERR_MAX];

    audit_db_close(f->a);
    f->a = NULL;
    make_v3(f->db, "UPDATE sqlite_schema SET sql = replace(sql, 'family IN (0, 4, 6)', "
                   "'family IN (0, 4, 6, 7)') WHERE type = 'table' AND name = 'events'");
    open_fails(f->db, -EBADMSG, why, sizeof why);
    has_text(why, "not the one lyhd wrote");
    has_text(why, "CHECK (family IN (0, 4, 6))");
    assert_int_equal(raw_int_at(f->db, "PRAGMA user_version"), 3);
    assert_int_equal(raw_int_at(f->db, EVENTS_IN_LISTS), 1);
    make_v3(f->db, "UPDATE sqlite_schema SET sql = replace(sql, 'family IN (0, 4, 6, 7)', "
                   "'family = 0 OR family = 4 OR family = 6') WHERE type = 'table' AND "
                   "name = 'events'");
    open_fails(f->db, -EBADMSG, why, sizeof why);
    has_text(why, "not the one lyhd wrote");
    assert_int_equal(raw_int_at(f->db, EVENTS_IN_LISTS), 1);
}

static bool exists_in(const char *dir, const char *name) {
    char p[PATH_MAX];
    struct stat st;

    snprintf(p, sizeof p, "%s/%s", dir, name);
    return lstat(p, &st) == 0;
}

/* A measurement writes to a scratch file beside audit.db and removes it:
 * audit.db keeps its records, counts and next id; leftovers of an earlier
 * one go; a symlink in the scratch file's place is removed, not followed. */
static void test_measure(void **state) {
    struct fx *f = *state;
    struct audit_rec r = mk_flow(500, "s-1", 1000, false, 1, 443);
    char why[AUDIT_DB_ERR_MAX] = "", p[PATH_MAX], outside[PATH_MAX];
    uint64_t rate = 0;

    append_writer(f->a, 10, 100, "s-1", true, 1000);
    assert_int_equal(audit_db_measure(f->root, 512, 3, &rate, why, sizeof why), 0);
    print_message("audit_db_measure(512 x 3): %llu records/s\n", (unsigned long long)rate);
    assert_true(rate > 0);
    assert_int_equal(raw_int_at(f->db, "SELECT count(*) FROM events"), 10);
    check_counts(f);
    append_ok(f->a, &r, 1);
    assert_int_equal(r.id, 11);
    for (size_t i = 0; i < 3; i++) {
        static const char *const n[] = { "audit-measure.db", "audit-measure.db-wal",
                                          "audit-measure.db-shm" };
        assert_false(exists_in(f->root, n[i]));
    }
    /* an earlier start's leftovers: junk, and a symlink to a file elsewhere */
    snprintf(p, sizeof p, "%s/audit-measure.db-wal", f->root);
    write_file(p, "junk", 4, 0600);
    snprintf(outside, sizeof outside, "%s.outside", f->root);
    write_file(outside, "keep", 4, 0600);
    snprintf(p, sizeof p, "%s/audit-measure.db", f->root);
    assert_int_equal(symlink(outside, p), 0);
    assert_int_equal(audit_db_measure(f->root, 64, 1, &rate, why, sizeof why), 0);
    assert_false(exists_in(f->root, "audit-measure.db"));
    assert_false(exists_in(f->root, "audit-measure.db-wal"));
    assert_int_equal(size_of(outside), 4);
    unlink(outside);
    /* bounds: nothing measured, nothing made */
    rate = 7;
    assert_int_equal(audit_db_measure(f->root, 0, 3, &rate, why, sizeof why), -EINVAL);
    assert_int_equal(audit_db_measure(f->root, AUDIT_MEASURE_MAX + 1, 3, &rate, why, sizeof why),
                     -EINVAL);
    assert_int_equal(audit_db_measure(f->root, 512, 0, &rate, why, sizeof why), -EINVAL);
    assert_int_equal(audit_db_measure(f->root, 512, AUDIT_MEASURE_ROUNDS_MAX + 1, &rate, why,
                                      sizeof why),
                     -EINVAL);
    has_text(why, "not 1..");
    assert_int_equal(rate, 7);
    assert_false(exists_in(f->root, "audit-measure.db"));
    /* a directory that is not one */
    snprintf(p, sizeof p, "%s/nowhere", f->root);
    assert_true(audit_db_measure(p, 512, 3, &rate, why, sizeof why) < 0);
    assert_int_equal(rate, 7);
    assert_int_equal(raw_int_at(f->db, "SELECT count(*) FROM events"), 11);
    assert_true(reopen(f));
}

/* ---- a million records against a brute-force matcher -------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned below(unsigned n) {
    return (unsigned)(rnd() % n);
}

#define BIG_N 1000000
#define T0 1704067200000000ll /* 2024-01-01 in µs */
#define MONTH_US (30ll * 24 * 3600 * 1000000)

static const uint8_t nets4[][4] = { { 10, 1, 2, 0 }, { 10, 1, 3, 0 }, { 192, 168, 7, 0 },
                                    { 93, 184, 216, 0 } };
static const uint8_t nets6[][8] = { { 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2 },
                                    { 0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 3 },
                                    { 0xfd, 0x00, 0xab, 0xcd, 0, 0, 0, 1 } };
static const char *const details[] = { "", "", "", "connect refused by policy",
                                       "dns: example.org", "sess\xc3\xa9 d\xc3\xa9tail" };

static void gen_rec(size_t i, struct audit_rec *r) {
    memset(r, 0, sizeof *r);
    r->time_us = T0 + (int64_t)((double)i * ((double)MONTH_US / BIG_N));
    if (below(10) == 0)
        r->time_us -= (int64_t)below(5000000); /* a few seconds out of id order */
    r->kind = below(100) < 92 ? AUDIT_KIND_FLOW : (uint8_t)(2 + below(5));
    if (r->kind == AUDIT_KIND_FLOW || below(2))
        snprintf(r->session, sizeof r->session, "s-%014x", 0x1000 + below(50));
    if (below(100) < 93) {
        static const uint32_t uids[] = { 0, 1000, 1001, 1002, 1003, 1004, 1005, 1006, 65534 };
        r->has_uid = true;
        r->uid = uids[below(ARRAY_SIZE(uids))];
    }
    if (r->kind == AUDIT_KIND_FLOW)
        r->verdict = below(100) < 78 ? AUDIT_VERDICT_ALLOWED : AUDIT_VERDICT_DENIED;
    else
        r->verdict = below(4) == 0 ? AUDIT_VERDICT_DENIED : AUDIT_VERDICT_NONE;
    if (r->kind == AUDIT_KIND_FLOW || below(10) < 3) {
        bool v6 = below(100) < 40;
        unsigned p = below(10);

        if (v6) {
            r->family = AF_INET6;
            r->addr_len = 16;
            memcpy(r->dst, nets6[below(ARRAY_SIZE(nets6))], 8);
            r->dst[15] = (uint8_t)below(40);
            if (below(4) == 0)
                r->dst[12] = (uint8_t)below(256);
            memcpy(r->src, nets6[2], 8);
            r->src[15] = 7;
            r->protocol = p < 6 ? 6 : p < 9 ? 17 : 58;
        } else {
            r->family = AF_INET;
            r->addr_len = 4;
            memcpy(r->dst, nets4[below(ARRAY_SIZE(nets4))], 4);
            r->dst[3] = (uint8_t)below(40);
            memcpy(r->src, (uint8_t[]){ 10, 0, 0, 2 }, 4);
            r->protocol = p < 6 ? 6 : p < 9 ? 17 : 1;
        }
        if (r->protocol == 6 || r->protocol == 17) {
            static const uint16_t ports[] = { 53, 80, 443, 443, 443, 22, 8080 };
            r->dport = below(5) == 0 ? (uint16_t)(1024 + below(64512))
                                     : ports[below(ARRAY_SIZE(ports))];
            r->sport = (uint16_t)(32768 + below(28000));
        }
    }
    snprintf(r->iface, sizeof r->iface, "%s", below(3) ? "eth0" : "wg0");
    snprintf(r->action, sizeof r->action, "%s",
             r->verdict == AUDIT_VERDICT_DENIED ? "drop" : "accept");
    r->detail = details[below(ARRAY_SIZE(details))];
    r->allowed_packets = below(100);
    r->allowed_bytes = rnd() >> 20;
    r->denied_packets = r->verdict == AUDIT_VERDICT_DENIED ? 1 + below(5) : 0;
    r->denied_bytes = r->denied_packets * 60;
    r->missed = r->kind == AUDIT_KIND_GAP ? 1 + below(1000) : 0;
}

/* The test's own matcher: bit by bit, no BLOB ranges. */
static bool bit_of(const uint8_t *a, unsigned i) {
    return (a[i / 8] >> (7 - i % 8)) & 1;
}

static bool t_match(const struct audit_filter *q, const struct audit_rec *r) {
    if (r->id <= q->after_id)
        return false;
    if (q->since_us && !(r->time_us >= q->since_us))
        return false;
    if (q->until_us && !(r->time_us < q->until_us))
        return false;
    if (q->session[0] && strcmp(q->session, r->session) != 0)
        return false;
    if (q->has_uid && !(r->has_uid && r->uid == q->uid))
        return false;
    if (q->kind && r->kind != q->kind)
        return false;
    if (q->verdict && r->verdict != q->verdict)
        return false;
    if (q->protocol && r->protocol != q->protocol)
        return false;
    if (q->dst_len) {
        if (r->addr_len != q->dst_len)
            return false;
        for (unsigned i = 0; i < q->dst_prefix; i++)
            if (bit_of(r->dst, i) != bit_of(q->dst, i))
                return false;
    }
    if (q->port_min || q->port_max) {
        unsigned lo = q->port_min, hi = q->port_max ? q->port_max : q->port_min;
        if (r->dport < lo || r->dport > hi)
            return false;
    }
    return true;
}

struct combo {
    const char *name;
    struct audit_filter q;
};

static struct audit_filter f_dst4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint8_t prefix) {
    struct audit_filter q = { 0 };

    q.dst_len = 4;
    q.dst[0] = a, q.dst[1] = b, q.dst[2] = c, q.dst[3] = d;
    q.dst_prefix = prefix;
    return q;
}

static struct audit_filter f_dst6(const uint8_t net[8], uint8_t last, uint8_t prefix) {
    struct audit_filter q = { 0 };

    q.dst_len = 16;
    memcpy(q.dst, net, 8);
    q.dst[15] = last;
    q.dst[9] = 0x55; /* host bits beyond the prefix must not matter */
    if (prefix == 128)
        q.dst[9] = 0;
    q.dst_prefix = prefix;
    return q;
}

static size_t build_combos(struct combo *c) {
    const char *s7 = "s-00000000001007", *s30 = "s-0000000000101e";
    const int64_t day = 24ll * 3600 * 1000000;
    size_t n = 0;

#define ADD(label, ...)                                                       \
    do {                                                                      \
        struct audit_filter q_ = { 0 };                                       \
        __VA_ARGS__;                                                          \
        c[n].name = label;                                                    \
        c[n].q = q_;                                                          \
        n++;                                                                  \
    } while (0)
#define SESSION(s) snprintf(q_.session, sizeof q_.session, "%s", s)

    ADD("everything");
    ADD("session", SESSION(s7));
    ADD("session unknown", SESSION("s-ffffffffffffff"));
    ADD("uid 1000", q_.has_uid = true, q_.uid = 1000);
    ADD("uid 0 (root, not the uid-less)", q_.has_uid = true, q_.uid = 0);
    ADD("uid unknown", q_.has_uid = true, q_.uid = 4242);
    ADD("kind flow", q_.kind = AUDIT_KIND_FLOW);
    ADD("kind gap", q_.kind = AUDIT_KIND_GAP);
    ADD("kind session", q_.kind = AUDIT_KIND_SESSION);
    ADD("verdict denied", q_.verdict = AUDIT_VERDICT_DENIED);
    ADD("verdict allowed", q_.verdict = AUDIT_VERDICT_ALLOWED);
    ADD("protocol udp", q_.protocol = 17);
    ADD("protocol icmpv6", q_.protocol = 58);
    ADD("dst v4 /32", q_ = f_dst4(10, 1, 2, 7, 32));
    ADD("dst v4 /24", q_ = f_dst4(192, 168, 7, 99, 24));
    ADD("dst v4 /8", q_ = f_dst4(10, 200, 0, 0, 8));
    ADD("dst v4 /0", q_ = f_dst4(0, 0, 0, 0, 0));
    ADD("dst v4 /16 nothing there", q_ = f_dst4(172, 16, 0, 0, 16));
    ADD("dst v4 /30", q_ = f_dst4(93, 184, 216, 9, 30));
    ADD("dst v6 /128", q_ = f_dst6(nets6[0], 17, 128));
    ADD("dst v6 /64", q_ = f_dst6(nets6[1], 0, 64));
    ADD("dst v6 /48", q_ = f_dst6(nets6[0], 0, 48));
    ADD("dst v6 /32", q_ = f_dst6(nets6[0], 0, 32));
    ADD("dst v6 /0", q_ = f_dst6(nets6[0], 0, 0));
    ADD("dst v6 /8 fd00::", q_ = f_dst6(nets6[2], 0, 8));
    ADD("port 443", q_.port_min = 443);
    ADD("ports 1024-65535", q_.port_min = 1024, q_.port_max = 65535);
    ADD("ports 0-100", q_.port_min = 0, q_.port_max = 100);
    ADD("since mid-month", q_.since_us = T0 + 15 * day);
    ADD("until day 7", q_.until_us = T0 + 7 * day);
    ADD("one day", q_.since_us = T0 + 10 * day, q_.until_us = T0 + 11 * day);
    ADD("since after until", q_.since_us = T0 + 11 * day, q_.until_us = T0 + 10 * day);
    ADD("after_id half", q_.after_id = BIG_N / 2);
    ADD("after_id past the end", q_.after_id = BIG_N + 10);
    ADD("session + uid", SESSION(s7), q_.has_uid = true, q_.uid = 1003);
    ADD("uid + denied", q_.has_uid = true, q_.uid = 1001, q_.verdict = AUDIT_VERDICT_DENIED);
    ADD("session + flow", SESSION(s30), q_.kind = AUDIT_KIND_FLOW);
    ADD("dst /24 + port 443", q_ = f_dst4(10, 1, 3, 0, 24), q_.port_min = 443);
    ADD("uid + since", q_.has_uid = true, q_.uid = 1005, q_.since_us = T0 + 25 * day);
    ADD("gap + since", q_.kind = AUDIT_KIND_GAP, q_.since_us = T0 + 20 * day);
    ADD("denied + v6 /64 + tcp", q_ = f_dst6(nets6[0], 0, 64),
        q_.verdict = AUDIT_VERDICT_DENIED, q_.protocol = 6);
    ADD("session + denied + port 53", SESSION(s30), q_.verdict = AUDIT_VERDICT_DENIED,
        q_.port_min = 53);
    ADD("uid + dst /32 + port", q_ = f_dst4(192, 168, 7, 3, 32), q_.has_uid = true,
        q_.uid = 1002, q_.port_min = 443);
    ADD("dst /128 + uid + after_id", q_ = f_dst6(nets6[2], 5, 128), q_.has_uid = true,
        q_.uid = 1000, q_.after_id = 300000);
    ADD("request + uid", q_.kind = AUDIT_KIND_REQUEST, q_.has_uid = true, q_.uid = 1004);
    ADD("guard + session", q_.kind = AUDIT_KIND_GUARD, SESSION(s7));
    ADD("icmp to any v4", q_ = f_dst4(0, 0, 0, 0, 0), q_.protocol = 1);
    ADD("until + after_id", q_.until_us = T0 + 3 * day, q_.after_id = 50000);
    ADD("uid + flow + allowed + window", q_.has_uid = true, q_.uid = 1003,
        q_.kind = AUDIT_KIND_FLOW, q_.verdict = AUDIT_VERDICT_ALLOWED,
        q_.since_us = T0 + 2 * day, q_.until_us = T0 + 9 * day);
    ADD("everything set", q_ = f_dst4(10, 1, 2, 0, 24), SESSION(s7), q_.has_uid = true,
        q_.uid = 1000, q_.kind = AUDIT_KIND_FLOW, q_.verdict = AUDIT_VERDICT_ALLOWED,
        q_.protocol = 6, q_.port_min = 1, q_.port_max = 1000, q_.since_us = T0 + day,
        q_.until_us = T0 + 29 * day, q_.after_id = 1000);
    ADD("everything set, nothing matches", q_ = f_dst6(nets6[1], 0, 64), SESSION(s7),
        q_.has_uid = true, q_.uid = 1000, q_.kind = AUDIT_KIND_FLOW,
        q_.verdict = AUDIT_VERDICT_ALLOWED, q_.protocol = 1, q_.port_min = 1,
        q_.port_max = 1000, q_.since_us = T0 + day, q_.until_us = T0 + 29 * day);
    ADD("v4 /0 must not match v6", q_ = f_dst4(0, 0, 0, 0, 0), q_.protocol = 58);
    ADD("v6 /0 must not match v4", q_ = f_dst6(nets6[0], 0, 0), q_.protocol = 1);
#undef SESSION
#undef ADD
    return n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static void test_million_events(void **state) {
    struct fx *f = *state;
    struct audit_rec *recs = calloc(BIG_N, sizeof *recs);
    struct combo combos[64];
    size_t ncombos, rows = 0, tails = 0, nonempty = 0;
    uint64_t *want = malloc(BIG_N * sizeof *want);
    double t0 = now_s(), t_ins, t_q;

    assert_non_null(recs);
    assert_non_null(want);
    rng_state = 0x1ae5eed;
    for (size_t i = 0; i < BIG_N; i++)
        gen_rec(i, &recs[i]);
    for (size_t i = 0; i < BIG_N; i += 5000) {
        append_ok(f->a, recs + i, 5000);
        assert_int_equal(recs[i].id, i + 1);
    }
    t_ins = now_s();
    assert_int_equal(last_id(f->a), BIG_N);

    ncombos = build_combos(combos);
    assert_true(ncombos >= 40);
    for (size_t c = 0; c < ncombos; c++) {
        const struct audit_filter *q = &combos[c].q;
        struct walk w = { .want = recs, .nwant = BIG_N };
        size_t nwant = 0;

        assert_int_equal(audit_filter_check(q), 0);
        for (size_t i = 0; i < BIG_N; i++)
            if (t_match(q, &recs[i]))
                want[nwant++] = recs[i].id;
        walk_all(f->a, q, 1000, &w);
        if (w.n != nwant || (nwant && memcmp(w.ids, want, nwant * sizeof *want) != 0))
            fail_msg("combo '%s': %zu rows from audit_db_page, %zu from the matcher",
                     combos[c].name, w.n, nwant);
        if (w.bad)
            fail_msg("combo '%s': %zu rows differ from what was appended", combos[c].name,
                     w.bad);
        rows += w.n;
        nonempty += nwant > 0;
        walk_free(&w);
        {
            uint64_t count = 0;

            if (audit_db_count(f->a, q, &count) < 0)
                fail_msg("combo '%s': count: %s", combos[c].name, audit_db_errmsg(f->a));
            if (count != nwant)
                fail_msg("combo '%s': audit_db_count says %llu, the matcher %zu",
                         combos[c].name, (unsigned long long)count, nwant);
        }

        /* Tails of a few sizes: exactly the last n again. */
        static const unsigned ns[] = { 1, 100, 1000 };
        for (size_t k = 0; k < ARRAY_SIZE(ns); k++) {
            uint64_t start = 0, expect;
            struct audit_filter t = *q;
            struct walk tw = { 0 };

            expect = ns[k] <= nwant ? want[nwant - ns[k]] - 1 : q->after_id;
            assert_int_equal(audit_db_tail_start(f->a, q, ns[k], &start), 0);
            if (start != expect)
                fail_msg("combo '%s': tail %u starts after %llu, want %llu", combos[c].name,
                         ns[k], (unsigned long long)start, (unsigned long long)expect);
            t.after_id = start;
            walk_all(f->a, &t, 1000, &tw);
            assert_int_equal(tw.n, ns[k] < nwant ? ns[k] : nwant);
            if (tw.n)
                assert_int_equal(tw.ids[0], want[nwant - tw.n]);
            walk_free(&tw);
            tails++;
        }
    }
    t_q = now_s();
    print_message("1M events: %zu filter combinations (%zu non-empty), %zu rows compared "
                  "field by field, %zu tails, %zu counts; insert %.1f s, queries %.1f s\n",
                  ncombos, nonempty, rows, tails, ncombos, t_ins - t0, t_q - t_ins);
    assert_true(nonempty >= 30);
    free(want);
    free(recs);

    /* Retention on the same million: the counts are exact, and what a step
     * costs (docs/audit.md quotes these lines). */
    check_counts(f);
    {
        struct audit_retention p = { .now_us = T0 + MONTH_US, .max_rows = 2000,
                                     .gap_delay_us = 600ll * 1000000 };
        struct audit_prune_result res = { 0 };
        double t_size[10], t_age[10], t_idle[10], t_gaps;
        uint64_t size = 0;

        assert_int_equal(audit_db_size(f->a, &size), 0);
        p.max_bytes = size - size / 20;
        for (int i = 0; i < 10; i++) {
            double t = now_s();
            prune_p(f, &p, &res);
            t_size[i] = (now_s() - t) * 1000;
            assert_int_equal(res.deleted, 2000);
        }
        p.max_bytes = 0;
        p.older_than_us = T0 + MONTH_US / 2;
        p.max_age_days = 15;
        for (int i = 0; i < 10; i++) {
            double t = now_s();
            prune_p(f, &p, &res);
            t_age[i] = (now_s() - t) * 1000;
            assert_int_equal(res.deleted, 2000);
        }
        p.older_than_us = T0 - MONTH_US;
        p.max_bytes = size * 2;
        for (int i = 0; i < 10; i++) {
            double t = now_s();
            prune_p(f, &p, &res);
            t_idle[i] = (now_s() - t) * 1000;
            assert_int_equal(res.deleted, 0);
        }
        p = (struct audit_retention){ .now_us = T0 + MONTH_US, .flush_gaps = true };
        {
            double t = now_s();
            prune_p(f, &p, &res);
            t_gaps = (now_s() - t) * 1000;
        }
        assert_true(res.gaps >= 9);
        check_counts(f);
        qsort(t_size, 10, sizeof t_size[0], cmp_double);
        qsort(t_age, 10, sizeof t_age[0], cmp_double);
        qsort(t_idle, 10, sizeof t_idle[0], cmp_double);
        print_message("retention on 1M: a step of 2000, size (heaviest writer first) %.1f ms "
                      "median (%.1f-%.1f), age %.1f ms median (%.1f-%.1f), nothing to do %.2f "
                      "ms; %u gap records written in %.1f ms\n",
                      t_size[5], t_size[0], t_size[9], t_age[5], t_age[0], t_age[9], t_idle[5],
                      res.gaps, t_gaps);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_new_close_reopen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_name_filter, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_crash_is_not_clean, setup, teardown),
        cmocka_unit_test_setup_teardown(test_abandon_is_not_clean, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuse_insecure_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuse_insecure_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_newer_version_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_and_foreign_refused, setup, teardown),
        cmocka_unit_test(test_close_null),
        cmocka_unit_test_setup_teardown(test_append_all_or_nothing, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_detail_truncation, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_ids_never_reused, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_filter_check, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_page_and_tail, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_every_shape_plan, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_reader_does_not_block_writer, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_locked_by_another_writer, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_prune_by_age, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_prune_by_size, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_prune_size_heaviest_first, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_prune_size_order, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_prune_gap_records, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_prune_gaps_bounded, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_prune_plans, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_migration_2, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_checks_rewrite, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_checks_rewrite_foreign, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_measure, setup_open, teardown),
        cmocka_unit_test_setup_teardown(test_million_events, setup_open, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
