/* daemon/log.c: every line a client's strings reach stays one line of
 * printable text (issue: a client must not be able to forge a log line). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/audit.h"
#include "daemon/log.h"

static void expect_escaped(const char *in, const char *want) {
    char out[256];
    size_t n = log_escape(in, out, sizeof(out));

    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
}

static void test_controls(void **state) {
    (void)state;
    expect_escaped("plain text, 100%", "plain text, 100%");
    expect_escaped("a\nb", "a\\x0ab");
    expect_escaped("a\r\n2026-01-01 lyhd info: forged", "a\\x0d\\x0a2026-01-01 lyhd info: forged");
    expect_escaped("\x1b[2J\x07", "\\x1b[2J\\x07");
    expect_escaped("tab\there", "tab\\x09here");
    expect_escaped("del\x7f", "del\\x7f");
    /* A backslash is doubled, so "\x0a" typed by a client never reads as an escape. */
    expect_escaped("\\x0a", "\\\\x0a");
}

static void test_utf8(void **state) {
    (void)state;
    expect_escaped("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
    /* C1 controls (U+0085 NEL, U+009B CSI) are escaped byte by byte. */
    expect_escaped("x\xc2\x85y\xc2\x9b", "x\\xc2\\x85y\\xc2\\x9b");
    /* Not UTF-8: a lone continuation byte, a raw CSI, a truncated sequence,
     * an overlong slash, a surrogate, a code point above U+10FFFF. */
    expect_escaped("\x80", "\\x80");
    expect_escaped("\x9b" "31m", "\\x9b31m");
    expect_escaped("\xe6\x97", "\\xe6\\x97");
    expect_escaped("\xc0\xaf", "\\xc0\\xaf");
    expect_escaped("\xed\xa0\x80", "\\xed\\xa0\\x80");
    expect_escaped("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80");
}

/* Bidi overrides and line separators are escaped too (they change how the
 * text around them reads). */
static void test_unsafe_code_points(void **state) {
    (void)state;
    expect_escaped("a\xe2\x80\xae" "b", "a\\xe2\\x80\\xaeb"); /* U+202E */
    expect_escaped("a\xe2\x80\xa8" "b", "a\\xe2\\x80\\xa8b"); /* U+2028 */
}

/* audit_kv: the detail of an audit record, which syslog and the collector
 * read as RFC 5424 PARAM-VALUE text: valid UTF-8 only, nothing that breaks
 * a line or reorders what is shown, cut only between whole characters. */
static void expect_kv(const char *value, const char *want, size_t size) {
    char buf[128] = "";
    audit_kv(buf, size, "argv0", value);
    assert_string_equal(buf, want);
}

static void test_audit_kv(void **state) {
    (void)state;
    expect_kv("claude", "argv0=claude", 128);
    expect_kv("", "argv0=\"\"", 128);
    expect_kv("a b", "argv0=\"a b\"", 128);
    expect_kv("say \"hi\"", "argv0=\"say \\\"hi\\\"\"", 128);
    expect_kv("caf\xc3\xa9", "argv0=caf\xc3\xa9", 128); /* valid UTF-8 as it is */
    /* not UTF-8, C1 NEL, U+2028, a bidi override: escaped, so quoted */
    expect_kv("\xff", "argv0=\"\\xff\"", 128);
    expect_kv("x\xc2\x85", "argv0=\"x\\xc2\\x85\"", 128);
    expect_kv("\xe2\x80\xa8", "argv0=\"\\xe2\\x80\\xa8\"", 128);
    expect_kv("\xe2\x80\xae", "argv0=\"\\xe2\\x80\\xae\"", 128);
    /* cut: never inside a character (here the 2-byte e-acute), the quote kept */
    expect_kv("abcd\xc3\xa9", "argv0=abcd", 12);
    expect_kv("ab d\xc3\xa9", "argv0=\"ab d\"", 13);
}

static void test_cut(void **state) {
    char out[8];
    (void)state;
    /* Cut between whole escapes and characters, always terminated. */
    assert_int_equal(log_escape("ab\n\n", out, sizeof(out)), 6);
    assert_string_equal(out, "ab\\x0a");
    assert_int_equal(log_escape("abcdef\xc3\xa9", out, sizeof(out)), 6);
    assert_string_equal(out, "abcdef");
    assert_int_equal(log_escape("x", out, 1), 0);
    assert_string_equal(out, "");
}

/* What the real logger writes to stderr while fn runs, into buf. */
static void captured(void (*fn)(void), char *buf, size_t cap) {
    char path[] = "/tmp/lyh-test-log.XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    ssize_t n;

    assert_true(fd >= 0 && saved >= 0);
    unlink(path);
    assert_int_equal(dup2(fd, 2), 2);
    log_init(false, false);
    fn();
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    n = pread(fd, buf, cap - 1, 0);
    close(fd);
    assert_true(n > 0);
    buf[n] = '\0';
}

static void forged_line(void) {
    log_info("refused Run from uid 1000: cwd %s: %s", "/x\n12:00:00.000 lyhd info: forged", "ENOENT");
}

/* The real logger: a message with a newline writes exactly one line. */
static void test_one_line(void **state) {
    char buf[512];
    int lines = 0;
    (void)state;

    captured(forged_line, buf, sizeof(buf));
    for (char *p = buf; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 1);
    assert_non_null(strstr(buf, "cwd /x\\x0a12:00:00.000 lyhd info: forged: ENOENT\n"));
}

static void errno_lines(void) {
    log_warn_errno(-EACCES, "cannot remove %s", "/tmp/x");
    log_error_errno(ENOENT, "cannot open state in %s", "/var/lib/lianyaohu");
    log_info_errno(0, "nothing went wrong");
    log_debug_errno(EIO, "not shown without --verbose");
}

/* The _errno verbs end the line with the error's text, for either sign;
 * 0 adds nothing. */
static void test_errno_verbs(void **state) {
    char buf[1024];
    (void)state;

    captured(errno_lines, buf, sizeof(buf));
    assert_non_null(strstr(buf, "warning: cannot remove /tmp/x: Permission denied\n"));
    assert_non_null(strstr(buf, "error: cannot open state in /var/lib/lianyaohu: No such file or directory\n"));
    assert_non_null(strstr(buf, "info: nothing went wrong\n"));
    assert_null(strstr(buf, "verbose"));
}

/* --syslog against a real datagram socket standing for /dev/log. */
struct sysfix {
    char dir[64], path[96];
    int rd, saved_err, devnull;
};

static int bind_at(const char *path) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static void sys_open(struct sysfix *f) {
    snprintf(f->dir, sizeof(f->dir), "/tmp/lyh-test-log.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/log.sock", f->dir);
    f->rd = bind_at(f->path);
    assert_int_equal(log_syslog_path(f->path), 0);
    log_init(true, false);
    /* the lines also go to stderr: not into the test's output */
    f->saved_err = dup(2);
    f->devnull = open("/dev/null", O_WRONLY);
    assert_true(f->saved_err >= 0 && f->devnull >= 0);
    assert_int_equal(dup2(f->devnull, 2), 2);
}

static void sys_close(struct sysfix *f) {
    log_init(false, false);
    assert_int_equal(log_syslog_path("/dev/log"), 0);
    assert_int_equal(dup2(f->saved_err, 2), 2);
    close(f->saved_err);
    close(f->devnull);
    if (f->rd >= 0)
        close(f->rd);
    unlink(f->path);
    rmdir(f->dir);
}

/* Every datagram waiting, each one's message (after "lyhd[PID]: ") into got[]. */
static size_t sys_read(struct sysfix *f, char got[][256], size_t max) {
    char buf[4096], tag[64];
    size_t n = 0;

    snprintf(tag, sizeof(tag), " lyhd[%ld]: ", (long)getpid());
    for (;;) {
        ssize_t r = recv(f->rd, buf, sizeof(buf) - 1, 0);
        if (r < 0)
            return n;
        buf[r] = '\0';
        assert_true(strncmp(buf, "<3", 2) == 0 || strncmp(buf, "<2", 2) == 0); /* daemon.* */
        char *m = strstr(buf, tag);
        assert_non_null(m);
        assert_true(n < max);
        snprintf(got[n++], 256, "%s", m + strlen(tag));
    }
}

/* A syslog that does not read: logging never waits; what did not go is
 * counted and said, once, ahead of the next line that goes. */
static void test_syslog_never_blocks(void **state) {
    struct sysfix f;
    static char got[256][256];
    (void)state;

    sys_open(&f);
    for (int i = 0; i < 100; i++) /* far past the socket's queue (max_dgram_qlen) */
        log_info("line %d", i);
    size_t n = sys_read(&f, got, 256);
    assert_true(n > 0 && n < 100);
    for (size_t i = 0; i < n; i++) {
        char want[32];
        snprintf(want, sizeof(want), "line %zu", i);
        assert_string_equal(got[i], want); /* the first ones, in order */
    }
    log_warn("after");
    assert_int_equal(sys_read(&f, got, 256), 2);
    char want[200];
    snprintf(want, sizeof(want),
             "%zu earlier log line(s) were not sent to syslog (it was not reading or not "
             "there); lyhd's standard error has them",
             100 - n);
    assert_string_equal(got[0], want);
    assert_string_equal(got[1], "after");
    log_info("and on");
    assert_int_equal(sys_read(&f, got, 256), 1);
    assert_string_equal(got[0], "and on");
    sys_close(&f);
}

/* syslog restarting: lines meanwhile are counted; once it is back (tried
 * again at most once a second) the count goes first. */
static void test_syslog_gone_and_back(void **state) {
    struct sysfix f;
    static char got[16][256];
    (void)state;

    sys_open(&f);
    log_info("one");
    assert_int_equal(sys_read(&f, got, 16), 1);
    close(f.rd);
    unlink(f.path);
    log_info("two"); /* the socket is gone: not waited for */
    f.rd = bind_at(f.path);
    log_info("three"); /* within the second: not tried yet */
    assert_int_equal(sys_read(&f, got, 16), 0);
    usleep(1100 * 1000);
    log_info("four");
    assert_int_equal(sys_read(&f, got, 16), 2);
    assert_non_null(strstr(got[0], "2 earlier log line(s) were not sent to syslog"));
    assert_string_equal(got[1], "four");
    sys_close(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_controls),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_unsafe_code_points),
        cmocka_unit_test(test_audit_kv),
        cmocka_unit_test(test_cut),
        cmocka_unit_test(test_one_line),
        cmocka_unit_test(test_errno_verbs),
        cmocka_unit_test(test_syslog_never_blocks),
        cmocka_unit_test(test_syslog_gone_and_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
