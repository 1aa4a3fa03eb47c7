/* The resolver sources' parsers (platform/linux/dns_config.c) and the address
 * rule they share with the CLI (common/dns_addr.c). Pure: no files read. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "common/dns_addr.h"
#include "common/macros.h"
#include "platform/linux/dns_config.h"

static void has(const struct nftr_dest *d, const char *text) {
    char buf[INET6_ADDRSTRLEN];
    assert_non_null(inet_ntop(d->family, d->addr, buf, sizeof(buf)));
    assert_string_equal(buf, text);
    assert_int_equal(d->prefix_len, d->family == AF_INET ? 32 : 128);
}

static void test_addr(void **state) {
    (void)state;
    uint8_t a[16];
    int fam;
    char canon[DNS_ADDR_TEXT_MAX];
    assert_int_equal(dns_addr_parse("10.8.0.1", &fam, a, canon), 0);
    assert_int_equal(fam, AF_INET);
    assert_string_equal(canon, "10.8.0.1");
    assert_int_equal(dns_addr_parse("2001:DB8::53", &fam, a, canon), 0);
    assert_int_equal(fam, AF_INET6);
    assert_string_equal(canon, "2001:db8::53");
    /* unreachable through a VPN interface, or not an address at all */
    static const char *const bad[] = {
        "127.0.0.53", "127.0.0.1", "0.0.0.0", "224.0.0.251", "255.255.255.255",
        "169.254.1.1", "::1", "::", "fe80::1", "ff02::fb", "::ffff:10.0.0.1",
        "10.0.0.1:53", "10.0.0.1%eth0", "fe80::1%tun0", "example.com", "", " 10.0.0.1",
        "10.0.0.1 ", "1.2.3", "2001:db8::53/64",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(dns_addr_parse(bad[i], &fam, a, NULL), -EINVAL);
    assert_int_equal(dns_addr_parse(NULL, &fam, a, NULL), -EINVAL);
}

static void test_resolv_conf(void **state) {
    (void)state;
    struct nftr_dest out[DNSCFG_MAX];
    const char *text = "# generated\n"
                       "search example.org\n"
                       "nameserver 127.0.0.53\n" /* a stub: never */
                       "nameserver\t10.8.0.1\r\n"
                       "options edns0\n"
                       "nameserver 10.8.0.1\n" /* twice: once */
                       "nameserver 2001:db8::53\n"
                       "nameserver junk\n"
                       "nameserver 10.8.0.2\n"
                       "nameserver 10.8.0.3\n"
                       "nameserver 10.8.0.4"; /* a fifth: past the bound */
    size_t n = dnscfg_parse_resolv_conf(text, out, DNSCFG_MAX);
    assert_int_equal(n, 4);
    has(&out[0], "10.8.0.1");
    has(&out[1], "2001:db8::53");
    has(&out[2], "10.8.0.2");
    has(&out[3], "10.8.0.3");
    assert_int_equal(dnscfg_parse_resolv_conf("", out, DNSCFG_MAX), 0);
    assert_int_equal(dnscfg_parse_resolv_conf(NULL, out, DNSCFG_MAX), 0);
    assert_int_equal(dnscfg_parse_resolv_conf("nameserver 10.0.0.1", out, 0), 0);
    /* a line too long to be one is skipped, not cut */
    char longl[600];
    memset(longl, ' ', sizeof(longl));
    memcpy(longl, "nameserver", 10);
    memcpy(longl + 500, "10.9.9.9", 9);
    assert_int_equal(dnscfg_parse_resolv_conf(longl, out, DNSCFG_MAX), 0);
}

static void test_resolved_link(void **state) {
    (void)state;
    struct nftr_dest out[DNSCFG_MAX];
    const char *text = "# This is private data. Do not parse.\n"
                       "ADMIN_STATE=configured\n"
                       "SERVERS=10.8.0.1 10.8.0.2%3#vpn.example [2001:db8::53]:53 10.8.0.9:5353 "
                       "[2001:db8::54]:853 127.0.0.53\n"
                       "DOMAINS=~.\n";
    size_t n = dnscfg_parse_resolved_link(text, out, DNSCFG_MAX);
    assert_int_equal(n, 3);
    has(&out[0], "10.8.0.1");
    has(&out[1], "10.8.0.2");
    has(&out[2], "2001:db8::53");
    n = dnscfg_parse_resolved_link("DNS=192.0.2.53\n", out, DNSCFG_MAX);
    assert_int_equal(n, 1);
    has(&out[0], "192.0.2.53");
    assert_int_equal(dnscfg_parse_resolved_link("LLMNR=yes\nSERVERS=\n", out, DNSCFG_MAX), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addr),
        cmocka_unit_test(test_resolv_conf),
        cmocka_unit_test(test_resolved_link),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
