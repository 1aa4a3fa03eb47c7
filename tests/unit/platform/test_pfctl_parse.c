/* pfctl output parsing (platform/darwin/pfctl_parse.c): the enable token and
 * the anchor listing, including hostile and malformed output. Pure; runs
 * anywhere. The sample outputs follow pfctl's formats ("Token : N" after -E;
 * one indented anchor path per line after -s Anchors). */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "platform/darwin/pfctl_parse.h"

static int token(const char *s, uint64_t *t) {
    return pfctl_parse_token(s, strlen(s), t);
}

static void test_token(void **state) {
    (void)state;
    uint64_t t = 7;

    assert_int_equal(token("pf enabled\nToken : 18446744073709551615\n", &t), 0);
    assert_true(t == UINT64_MAX);
    assert_int_equal(token("No ALTQ support in kernel\nALTQ related functions disabled\n"
                           "pf already enabled\nToken : 1234567\n",
                           &t),
                     0);
    assert_true(t == 1234567);
    assert_int_equal(token("Token:42", &t), 0); /* no newline, no spacing */
    assert_true(t == 42);
    assert_int_equal(token("  Token \t:\t 9 \r\n", &t), 0);
    assert_true(t == 9);

    t = 5;
    assert_int_equal(token("pf enabled\n", &t), -ENOENT);
    assert_int_equal(token("", &t), -ENOENT);
    assert_int_equal(token("Token : \n", &t), -ENOENT);
    assert_int_equal(token("Token : 12ab\n", &t), -ENOENT);
    assert_int_equal(token("Token : -3\n", &t), -ENOENT);
    assert_int_equal(token("Token : 0\n", &t), -ERANGE);
    assert_int_equal(token("Token : 18446744073709551616\n", &t), -ERANGE);
    assert_int_equal(token("Token : 123456789012345678901\n", &t), -ERANGE);
    assert_int_equal(token("Tokens : 3\n", &t), -ENOENT); /* not our line */
    assert_true(t == 5); /* untouched on failure */
    assert_int_equal(pfctl_parse_token(NULL, 0, &t), -EINVAL);

    /* The length bounds the scan: a token beyond len is not seen, and the
     * input need not be NUL-terminated. */
    const char buf[] = "Token : 77";
    assert_int_equal(pfctl_parse_token(buf, 8, &t), -ENOENT);
    assert_int_equal(pfctl_parse_token(buf, 9, &t), 0);
    assert_true(t == 7);
}

static void test_anchors(void **state) {
    (void)state;
    const char out[] = "  com.apple/200.AirDrop\n"
                       "  com.apple/250.ApplicationFirewall\n"
                       "  com.apple/lianyaohu-501\n"
                       "  com.apple/lianyaohu-user-501\n"
                       "  com.apple/lianyaohu-0\n"
                       "  com.apple/lianyaohu-4294967294\n"
                       "  com.apple/lianyaohu-4294967295\n" /* (uid_t)-1: not ours-shaped */
                       "  com.apple/lianyaohu-0501\n"
                       "  com.apple/lianyaohu-user-\n"
                       "  com.apple/lianyaohu-x;rm\n"      /* unsafe: skipped */
                       "  com.apple/lianyaohu-1/sub\n"     /* a sub-anchor: skipped */
                       "  com.apple/lianyaohu-..\n"        /* path trick: skipped */
                       "  com.apple/lianyaohux\n"          /* not our prefix */
                       "  other/lianyaohu-1\n";
    struct pfctl_anchor a[16];
    size_t n = 0, skipped = 0;

    assert_int_equal(pfctl_parse_anchors(out, strlen(out), a, 16, &n, &skipped), 0);
    assert_int_equal(n, 7);
    assert_int_equal(skipped, 3);

    assert_string_equal(a[0].name, "com.apple/lianyaohu-501");
    assert_true(a[0].well_formed);
    assert_int_equal(a[0].scope, PFR_SCOPE_GROUP);
    assert_int_equal(a[0].uid, 501);

    assert_string_equal(a[1].name, "com.apple/lianyaohu-user-501");
    assert_true(a[1].well_formed);
    assert_int_equal(a[1].scope, PFR_SCOPE_USER);
    assert_int_equal(a[1].uid, 501);

    assert_true(a[2].well_formed);
    assert_int_equal(a[2].uid, 0);
    assert_true(a[3].well_formed);
    assert_int_equal(a[3].uid, 4294967294u);

    for (size_t i = 4; i < 7; i++)
        assert_false(a[i].well_formed);
    assert_string_equal(a[4].name, "com.apple/lianyaohu-4294967295");
    assert_string_equal(a[5].name, "com.apple/lianyaohu-0501");
    assert_string_equal(a[6].name, "com.apple/lianyaohu-user-");

    /* every name we return is one pfr_anchor_name() could have made, or a
     * well-behaved name of our prefix */
    for (size_t i = 0; i < n; i++) {
        assert_true(strncmp(a[i].name, PFR_ANCHOR_PREFIX, strlen(PFR_ANCHOR_PREFIX)) == 0);
        assert_null(strpbrk(a[i].name + strlen(PFR_ANCHOR_PREFIX), "/;\"' \t"));
        if (a[i].well_formed) {
            char want[PFR_NAME_MAX];
            assert_int_equal(pfr_anchor_name(a[i].scope, a[i].uid, want), 0);
            assert_string_equal(a[i].name, want);
        }
    }
}

static void test_anchors_bounds(void **state) {
    (void)state;
    const char out[] = "com.apple/lianyaohu-1\ncom.apple/lianyaohu-2\ncom.apple/lianyaohu-3";
    struct pfctl_anchor a[2];
    size_t n = 0;

    /* more than fits: the first cap are written, n counts all */
    assert_int_equal(pfctl_parse_anchors(out, strlen(out), a, 2, &n, NULL), -ENOSPC);
    assert_int_equal(n, 3);
    assert_int_equal(a[1].uid, 2);

    /* a name as long as the buffer is skipped, never truncated */
    char longname[PFR_NAME_MAX + 32];
    memset(longname, '7', sizeof(longname));
    memcpy(longname, PFR_ANCHOR_PREFIX, strlen(PFR_ANCHOR_PREFIX));
    longname[PFR_NAME_MAX] = '\0';
    size_t skipped = 0;
    assert_int_equal(pfctl_parse_anchors(longname, strlen(longname), a, 2, &n, &skipped), 0);
    assert_int_equal(n, 0);
    assert_int_equal(skipped, 1);

    /* nothing of ours, empty output */
    assert_int_equal(pfctl_parse_anchors("", 0, a, 2, &n, NULL), 0);
    assert_int_equal(n, 0);
    assert_int_equal(pfctl_parse_anchors(NULL, 0, a, 2, &n, NULL), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token),
        cmocka_unit_test(test_anchors),
        cmocka_unit_test(test_anchors_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
