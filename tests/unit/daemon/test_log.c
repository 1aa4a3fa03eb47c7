/* daemon/log.c: every line a client's strings reach stays one line of
 * printable text (issue: a client must not be able to forge a log line). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The real logger: a message with a newline writes exactly one line. */
static void test_one_line(void **state) {
    char path[] = "/tmp/lyh-test-log.XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    char buf[512];
    ssize_t n;
    int lines = 0;
    (void)state;

    assert_true(fd >= 0 && saved >= 0);
    unlink(path);
    assert_int_equal(dup2(fd, 2), 2);
    log_init(false, false);
    log_info("refused Run from uid 1000: cwd %s: %s", "/x\n12:00:00.000 lyhd info: forged", "ENOENT");
    fflush(stderr);
    assert_int_equal(dup2(saved, 2), 2);
    close(saved);
    n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    assert_true(n > 0);
    buf[n] = '\0';
    for (ssize_t i = 0; i < n; i++)
        lines += buf[i] == '\n';
    assert_int_equal(lines, 1);
    assert_non_null(strstr(buf, "cwd /x\\x0a12:00:00.000 lyhd info: forged: ENOENT\n"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_controls),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_cut),
        cmocka_unit_test(test_one_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
