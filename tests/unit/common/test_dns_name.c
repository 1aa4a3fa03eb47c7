/* The domain allowlist's patterns (common/dns_name.c) and the forwarder's
 * flattened answer (dns_build_reply_addrs). Pure. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "common/dns_msg.h"
#include "common/dns_name.h"
#include "common/macros.h"

static void test_patterns(void **state) {
    (void)state;
    char c[DNS_PATTERN_MAX], why[160];
    assert_int_equal(dn_pattern_check("API.Anthropic.com.", c, why, sizeof(why)), 0);
    assert_string_equal(c, "api.anthropic.com");
    assert_int_equal(dn_pattern_check("*.NPMJS.org", c, why, sizeof(why)), 0);
    assert_string_equal(c, "*.npmjs.org");
    assert_int_equal(dn_pattern_check("localhost", c, why, sizeof(why)), 0);
    assert_int_equal(dn_pattern_check("_dmarc.example.com", c, why, sizeof(why)), 0);
    static const char *const bad[] = {
        "", "*", "*.", ".", "..", "a..b", ".a.b", "a.*.b", "*a.b", "**.b", "a b", "a/b",
        "ex\xc3\xa4mple.com", "a.b..", "*.*.b",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        why[0] = '\0';
        assert_int_equal(dn_pattern_check(bad[i], c, why, sizeof(why)), -EINVAL);
        assert_true(why[0] != '\0');
    }
    char lab[80];
    memset(lab, 'a', 64);
    lab[64] = '\0';
    assert_int_equal(dn_pattern_check(lab, c, why, sizeof(why)), -EINVAL);
    lab[63] = '\0';
    assert_int_equal(dn_pattern_check(lab, c, why, sizeof(why)), 0);
    char big[300];
    memset(big, 'a', sizeof(big));
    for (size_t i = 50; i < sizeof(big); i += 51)
        big[i] = '.';
    big[254] = '\0'; /* 254 characters */
    assert_int_equal(dn_pattern_check(big, c, why, sizeof(why)), -EINVAL);
    big[253] = '\0';
    assert_int_equal(dn_pattern_check(big, c, why, sizeof(why)), 0);
}

static void test_match(void **state) {
    (void)state;
    assert_true(dn_match("github.com", "github.com"));
    assert_false(dn_match("github.com", "api.github.com"));
    assert_false(dn_match("github.com", "evilgithub.com"));
    assert_true(dn_match("*.github.com", "api.github.com"));
    assert_true(dn_match("*.github.com", "a.b.github.com"));
    assert_false(dn_match("*.github.com", "github.com")); /* not the apex */
    assert_false(dn_match("*.github.com", "evilgithub.com"));
    assert_false(dn_match("*.github.com", "github.com.evil"));
    assert_false(dn_match("*.github.com", ".github.com"));
    assert_false(dn_match("*.com", "com"));
    assert_true(dn_match("*.com", "a.com"));
}

static void test_reply_addrs(void **state) {
    (void)state;
    uint8_t q[512], out[1024];
    size_t qn, n;
    struct dns_query dq;
    struct dns_answer a;
    assert_int_equal(dns_build_query(0x1234, "cdn.allowed.test", DNS_TYPE_A, q, sizeof(q), &qn), 0);
    assert_int_equal(dns_parse_query(q, qn, &dq), 0);
    struct dns_addr addrs[3] = {
        {.family = AF_INET, .addr = {203, 0, 113, 3}},
        {.family = AF_INET, .addr = {203, 0, 113, 4}},
        {.family = AF_INET, .addr = {11, 77, 1, 5}},
    };
    assert_int_equal(dns_build_reply_addrs(&dq, q, qn, addrs, 3, 120, DNS_UDP_MAX, out, sizeof(out), &n), 0);
    assert_int_equal(dns_parse_answer(out, n, 0x1234, DNS_TYPE_A, "cdn.allowed.test", &a), 0);
    assert_int_equal(a.n_addrs, 3);
    assert_int_equal(a.min_ttl, 120);
    assert_false(a.tc);
    assert_memory_equal(a.addrs[2].addr, addrs[2].addr, 4);
    /* nothing kept: NOERROR, no data */
    assert_int_equal(dns_build_reply_addrs(&dq, q, qn, addrs, 0, 120, DNS_UDP_MAX, out, sizeof(out), &n), 0);
    assert_int_equal(dns_parse_answer(out, n, 0x1234, DNS_TYPE_A, "cdn.allowed.test", &a), 0);
    assert_int_equal(a.n_addrs, 0);
    assert_int_equal(a.rcode, DNS_RCODE_NOERROR);
    /* the wrong family, a question that is not A/AAAA: refused */
    addrs[1].family = AF_INET6;
    assert_int_equal(dns_build_reply_addrs(&dq, q, qn, addrs, 3, 120, DNS_UDP_MAX, out, sizeof(out), &n), -EINVAL);
    /* over the limit: TC, no records */
    addrs[1].family = AF_INET;
    assert_int_equal(dns_build_reply_addrs(&dq, q, qn, addrs, 3, 120, 60, out, sizeof(out), &n), 0);
    assert_int_equal(dns_parse_answer(out, n, 0x1234, DNS_TYPE_A, "cdn.allowed.test", &a), 0);
    assert_true(a.tc);
    assert_int_equal(a.n_addrs, 0);
}

/* An audit record's detail: a dns record's name=, a flow's names=a,b. */
static void test_detail(void **state) {
    (void)state;
    assert_true(dn_detail_has("name=api.github.com type=A rcode=NOERROR", "api.github.com"));
    assert_true(dn_detail_has("name=api.github.com type=A", "*.github.com"));
    assert_false(dn_detail_has("name=github.com type=A", "*.github.com"));
    assert_true(dn_detail_has("names=a.test,b.example.com", "b.example.com"));
    assert_true(dn_detail_has("dns=expired names=x.test,a.example.com expired_s_ago=3",
                              "*.example.com"));
    assert_false(dn_detail_has("names=a.test,b.test", "c.test"));
    /* other keys that end in name, values that merely contain it */
    assert_false(dn_detail_has("hostname=a.test", "a.test"));
    assert_false(dn_detail_has("via=tun0 resolver=a.test", "a.test"));
    assert_false(dn_detail_has("names=xa.test", "a.test"));
    assert_false(dn_detail_has("name= names=", "a.test"));
    assert_false(dn_detail_has("", "a.test"));
    assert_true(dn_detail_has("names=,,a.test,", "a.test"));
    /* a value longer than any name never matches, and nothing overflows */
    char big[600] = "names=";
    memset(big + 6, 'a', 500);
    big[506] = '\0';
    assert_false(dn_detail_has(big, "*.a"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_patterns),
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_detail),
        cmocka_unit_test(test_reply_addrs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
