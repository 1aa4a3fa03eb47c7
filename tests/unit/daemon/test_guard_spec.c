/* The guard spec's encoding (daemon/guard_spec.c): version 1 as before, and
 * version 2 with the DNS forwarder's port and resolvers; damaged bytes are
 * refused, never turned into a different firewall. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/guard_spec.h"
#include "tests/unit/daemon/spec_assert.h"

static struct gspec sample(void) {
    struct gspec g;
    memset(&g, 0, sizeof(g));
    strcpy(g.iface, "tun0");
    g.ipv6_blocked = true;
    g.lan[0] = (struct dr_rule){.family = AF_INET, .addr = {192, 168, 1}, .prefix_len = 24};
    g.n_lan = 1;
    return g;
}

static void test_v1_round_trip(void **state) {
    (void)state;
    struct gspec g = sample(), back;
    uint8_t buf[4096];
    size_t n;
    assert_int_equal(gspec_encode(&g, buf, sizeof(buf), &n), 0);
    assert_int_equal(buf[0], 1); /* no DNS: the old format, readable by an older lyhd */
    assert_int_equal(gspec_decode(buf, n, &back), 0);
    spec_equal(&g, &back);
}

static void test_v2_round_trip(void **state) {
    (void)state;
    struct gspec g = sample(), back;
    uint8_t buf[4096];
    size_t n;
    g.dns_port = 40053;
    g.resolvers[0] = (struct dr_rule){.family = AF_INET, .addr = {10, 8, 0, 1}, .prefix_len = 32};
    g.resolvers[1] = (struct dr_rule){.family = AF_INET6, .addr = {0x20, 0x01, 0x0d, 0xb8, [15] = 0x53},
                                        .prefix_len = 128};
    g.n_resolvers = 2;
    assert_int_equal(gspec_encode(&g, buf, sizeof(buf), &n), 0);
    assert_int_equal(buf[0], 2);
    assert_int_equal(gspec_decode(buf, n, &back), 0);
    spec_equal(&g, &back);
    /* every truncation refused */
    for (size_t k = 0; k < n; k++)
        assert_int_equal(gspec_decode(buf, k, &back), -EBADMSG);
    /* a trailing byte refused */
    buf[n] = 0;
    assert_int_equal(gspec_decode(buf, n + 1, &back), -EBADMSG);
    /* a resolver with a prefix or a port is not an address */
    /* the last resolver (family, prefix, ports, address), before the domains' count */
    size_t at = n - 1 - (1 + 1 + 2 + 2 + 16);
    assert_int_equal(buf[at], 6);
    buf[at + 1] = 64;
    assert_int_equal(gspec_decode(buf, n, &back), -EBADMSG);
    buf[at + 1] = 128;
    buf[at + 3] = 53;
    assert_int_equal(gspec_decode(buf, n, &back), -EBADMSG);
    /* port 0 and no resolvers are refused both ways */
    g.dns_port = 40053;
    g.n_resolvers = 0;
    assert_int_equal(gspec_encode(&g, buf, sizeof(buf), &n), -EINVAL);
    g.n_resolvers = GSPEC_MAX_RESOLVERS + 1;
    assert_int_equal(gspec_encode(&g, buf, sizeof(buf), &n), -EINVAL);
}

static void test_v2_domains(void **state) {
    (void)state;
    struct gspec g = sample(), back;
    uint8_t buf[4096];
    size_t n;
    g.dns_port = 53053;
    g.resolvers[0] = (struct dr_rule){.family = AF_INET, .addr = {10, 8, 0, 1}, .prefix_len = 32};
    g.n_resolvers = 1;
    assert_int_equal(gspec_add_domain(&g, "api.anthropic.com"), 0);
    assert_int_equal(gspec_add_domain(&g, "*.npmjs.org"), 0);
    assert_int_equal(gspec_encode(&g, buf, sizeof(buf), &n), 0);
    assert_int_equal(gspec_decode(buf, n, &back), 0);
    assert_int_equal(back.n_domains, 2);
    assert_memory_equal(back.domains, "api.anthropic.com\0*.npmjs.org\0", back.domains_len);
    spec_equal(&g, &back);
    /* a pattern that is not canonical, or not a pattern, is damage */
    uint8_t *p = memchr(buf, 'a', n);
    while (p && memcmp(p, "api.", 4) != 0)
        p = memchr(p + 1, 'a', n - (size_t)(p + 1 - buf));
    assert_non_null(p);
    p[0] = 'A';
    assert_int_equal(gspec_decode(buf, n, &back), -EBADMSG);
    p[0] = '/';
    assert_int_equal(gspec_decode(buf, n, &back), -EBADMSG);
    p[0] = 'a';
    assert_int_equal(gspec_decode(buf, n, &back), 0);
    /* full */
    for (int i = 0; gspec_add_domain(&g, "a-rather-long-label.example.com") == 0; i++)
        assert_true(i < GSPEC_MAX_DOMAINS);
    /* an allowlist without a forwarder is refused */
    g.dns_port = 0;
    assert_int_equal(gspec_encode(&g, buf, sizeof(buf), &n), -EINVAL);
}

static void test_v2_port_zero(void **state) {
    (void)state;
    struct gspec g = sample(), back;
    uint8_t buf[4096];
    size_t n;
    g.dns_port = 1;
    g.resolvers[0] = (struct dr_rule){.family = AF_INET, .addr = {10, 8, 0, 1}, .prefix_len = 32};
    g.n_resolvers = 1;
    assert_int_equal(gspec_encode(&g, buf, sizeof(buf), &n), 0);
    size_t at = n - (1 + 2 + (1 + 1 + 2 + 2 + 4) + 1); /* the port, before the list */
    assert_int_equal(buf[at], 0);
    assert_int_equal(buf[at + 1], 1);
    buf[at + 1] = 0;
    assert_int_equal(gspec_decode(buf, n, &back), -EBADMSG);
    /* version 3 does not exist */
    buf[at + 1] = 1;
    buf[0] = 3;
    assert_int_equal(gspec_decode(buf, n, &back), -EBADMSG);
}

/* A rule that breaks a dr_rule invariant (host bits: 192.168.1.5/24) is
 * damage, refused at decode, not left for the renderer to trip on. */
static void test_host_bits_refused(void **state) {
    (void)state;
    struct gspec g = sample(), back;
    uint8_t buf[4096];
    size_t n;
    assert_int_equal(gspec_encode(&g, buf, sizeof(buf), &n), 0);
    /* version, flags, iface length, "tun0", lan count, family, prefix, ports */
    size_t at = 1 + 1 + 1 + 4 + 1 + 1 + 1 + 2 + 2;
    assert_int_equal(buf[at], 192);
    assert_int_equal(buf[at + 3], 0);
    buf[at + 3] = 5;
    assert_int_equal(gspec_decode(buf, n, &back), -EBADMSG);
    buf[at + 3] = 0;
    assert_int_equal(gspec_decode(buf, n, &back), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_round_trip),
        cmocka_unit_test(test_v2_round_trip),
        cmocka_unit_test(test_v2_port_zero),
        cmocka_unit_test(test_v2_domains),
        cmocka_unit_test(test_host_bits_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
