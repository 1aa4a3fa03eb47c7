/* The CLI's one JSON escaper (cli/textbuf.c), which every --json output uses:
 * valid JSON whatever the bytes, and sb_json_size is enough for the worst. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "cli/textbuf.h"

static void json_of(const char *in, char *out, size_t cap) {
    struct sb s;
    assert_int_equal(sb_init(&s, out, cap), 0);
    sb_json(&s, in);
    assert_int_equal(sb_finish(&s), 0);
}

static void test_escapes(void **state) {
    (void)state;
    char out[256];
    json_of("plain", out, sizeof(out));
    assert_string_equal(out, "\"plain\"");
    json_of("q\"b\\n\nt\tc\x01\x7f", out, sizeof(out));
    assert_string_equal(out, "\"q\\\"b\\\\n\\nt\\tc\\u0001\\u007f\"");
    /* invalid UTF-8 (a lone continuation, an overlong slash, a cut sequence)
     * becomes U+FFFD; valid multibyte passes */
    json_of("\x80/\xc0\xaf|\xe2\x82|\xc3\xa9", out, sizeof(out));
    assert_string_equal(out, "\"\\ufffd/\\ufffd\\ufffd|\\ufffd\\ufffd|\xc3\xa9\"");
}

static void test_worst_case_fits(void **state) {
    (void)state;
    char in[200], out[200 * 6 + 3];
    memset(in, 0x01, sizeof(in) - 1);
    in[sizeof(in) - 1] = '\0';
    assert_true(sb_json_size(in) <= sizeof(out));
    json_of(in, out, sb_json_size(in));
    assert_int_equal(strlen(out), (sizeof(in) - 1) * 6 + 2);
    /* one byte less and the builder says so instead of overflowing */
    struct sb s;
    assert_int_equal(sb_init(&s, out, (sizeof(in) - 1) * 6 + 2), 0);
    sb_json(&s, in);
    assert_int_equal(sb_finish(&s), -ENOSPC);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escapes),
        cmocka_unit_test(test_worst_case_fits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
