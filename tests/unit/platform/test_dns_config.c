/* The resolver sources' parsers (platform/linux/dns_config.c) and the address
 * rule they share with the CLI (common/dns_addr.c), and the order of the
 * sources, read from a tree of the test's own (dnscfg_system_at). */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/dns_addr.h"
#include "common/macros.h"
#include "platform/linux/dns_config.h"

static void has(const struct dr_rule *d, const char *text) {
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
    struct dr_rule out[DNSCFG_MAX];
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
    struct dr_rule out[DNSCFG_MAX];
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

/* ---- the sources, in order -------------------------------------------------------- */

static char root[64];

static void put(const char *rel, const char *text) {
    char path[256], dir[256];
    snprintf(path, sizeof(path), "%s%s", root, rel);
    snprintf(dir, sizeof(dir), "%s", path);
    for (char *p = dir + strlen(root) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        (void)mkdir(dir, 0700);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* the test's tree goes, whatever happened */
static int remove_root(void **state) {
    (void)state;
    return root[0] && nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0 ? -1 : 0;
}

/* "through the VPN": 10.0.0.0/8 and fd00::/8 only */
static bool routed_vpn(int family, const uint8_t *addr, void *ud) {
    (void)ud;
    return family == AF_INET ? addr[0] == 10 : addr[0] == 0xfd;
}

static void sys(size_t want_n, const char *want_source, const char *first) {
    struct dr_rule out[DNSCFG_MAX];
    size_t n = 99;
    char source[80] = "", rc[256];
    snprintf(rc, sizeof(rc), "%s/etc/resolv.conf", root);
    assert_int_equal(dnscfg_system_at(root, "tun0", 7, rc, routed_vpn, NULL, out, &n, source,
                                      sizeof(source)),
                     0);
    assert_int_equal(n, want_n);
    if (want_n) {
        assert_non_null(strstr(source, want_source));
        has(&out[0], first);
    }
}

static void test_sources(void **state) {
    (void)state;
    snprintf(root, sizeof(root), "/tmp/lyh-dnscfg-XXXXXX");
    assert_non_null(mkdtemp(root));
    sys(0, "", NULL); /* nothing at all */
    /* a stub: resolv.conf names only 127.0.0.53, the LAN router is not routed */
    put("/etc/resolv.conf", "nameserver 127.0.0.53\nnameserver 192.168.1.1\n");
    sys(0, "", NULL);
    put("/run/systemd/resolve/resolv.conf", "nameserver 192.168.1.1\nnameserver fd00::53\n");
    sys(1, "/run/systemd/resolve/resolv.conf", "fd00::53");
    put("/run/NetworkManager/no-stub-resolv.conf", "nameserver 10.8.0.1\n");
    sys(1, "/run/NetworkManager/no-stub-resolv.conf", "10.8.0.1");
    /* resolv.conf's own routed nameserver comes before the upstream lists */
    put("/etc/resolv.conf", "nameserver 192.168.1.1\nnameserver 10.9.0.1\n");
    sys(1, "/etc/resolv.conf", "10.9.0.1");
    /* resolvconf's record of the interface (OpenVPN's "tun0.openvpn"), not
     * another interface's, and before resolv.conf */
    put("/run/resolvconf/interface/tun01.openvpn", "nameserver 10.1.1.1\n");
    sys(1, "/etc/resolv.conf", "10.9.0.1");
    put("/run/resolvconf/interface/tun0.openvpn", "nameserver 10.2.2.2\n");
    sys(1, "resolvconf", "10.2.2.2");
    /* systemd-resolved's link state of ifindex 7 first of all */
    put("/run/systemd/resolve/netif/8", "SERVERS=10.3.3.3\n");
    sys(1, "resolvconf", "10.2.2.2");
    put("/run/systemd/resolve/netif/7", "SERVERS=10.4.4.4 10.4.4.5\n");
    sys(2, "systemd-resolved", "10.4.4.4");

}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addr),
        cmocka_unit_test(test_resolv_conf),
        cmocka_unit_test(test_resolved_link),
        cmocka_unit_test_teardown(test_sources, remove_root),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
