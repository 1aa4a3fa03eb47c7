/* Unit tests for platform/ifaces.c: the VPN name rules, parsing of a
 * getifaddrs() chain built by hand, and every ifc_validate_vpn() outcome.
 * Needs no privileges and touches no interface. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netpacket/packet.h>
#include <string.h>
#include <sys/socket.h>

#include "platform/ifaces.h"

#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP 0x10000
#endif

/* ---- a hand-built ifaddrs chain ---------------------------------------------- */

union sa_any {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
    struct sockaddr_ll ll;
};

struct fake {
    struct ifaddrs ifa;
    union sa_any addr, mask, dst;
    char name[40];
};

#define POOL 32
static struct fake pool[POOL];
static size_t npool;
static struct ifaddrs *head;
static struct ifaddrs **tailp = &head;

static void reset(void) {
    memset(pool, 0, sizeof(pool));
    npool = 0;
    head = NULL;
    tailp = &head;
}

static struct fake *add(const char *name, unsigned flags) {
    assert_true(npool < POOL);
    struct fake *f = &pool[npool++];
    assert_true(strlen(name) < sizeof(f->name));
    strcpy(f->name, name);
    f->ifa.ifa_name = f->name;
    f->ifa.ifa_flags = flags;
    *tailp = &f->ifa;
    tailp = &f->ifa.ifa_next;
    return f;
}

static void add_link(const char *name, int ifindex, unsigned flags) {
    struct fake *f = add(name, flags);
    f->addr.ll.sll_family = AF_PACKET;
    f->addr.ll.sll_ifindex = ifindex;
    f->ifa.ifa_addr = &f->addr.sa;
}

/* What glibc produces for a link without a hardware address (tun,
 * WireGuard): a link entry with no ifa_addr, hence no index. */
static void add_bare_link(const char *name, unsigned flags) { add(name, flags); }

static void put4(union sa_any *u, const char *text) {
    u->in.sin_family = AF_INET;
    assert_int_equal(inet_pton(AF_INET, text, &u->in.sin_addr), 1);
}

static void put6(union sa_any *u, const char *text) {
    u->in6.sin6_family = AF_INET6;
    assert_int_equal(inet_pton(AF_INET6, text, &u->in6.sin6_addr), 1);
}

static void add_v4(const char *name, unsigned flags, const char *addr, const char *mask,
                   const char *peer) {
    struct fake *f = add(name, flags);
    put4(&f->addr, addr);
    f->ifa.ifa_addr = &f->addr.sa;
    if (mask) {
        put4(&f->mask, mask);
        f->ifa.ifa_netmask = &f->mask.sa;
    }
    if (peer) {
        put4(&f->dst, peer);
        f->ifa.ifa_dstaddr = &f->dst.sa;
    }
}

static void add_v6(const char *name, unsigned flags, const char *addr, int prefixlen,
                   const char *peer) {
    struct fake *f = add(name, flags);
    put6(&f->addr, addr);
    f->ifa.ifa_addr = &f->addr.sa;
    if (prefixlen >= 0) {
        f->mask.in6.sin6_family = AF_INET6;
        for (int b = 0; b < prefixlen; b++)
            f->mask.in6.sin6_addr.s6_addr[b / 8] |= (uint8_t)(0x80u >> (b % 8));
        f->ifa.ifa_netmask = &f->mask.sa;
    }
    if (peer) {
        put6(&f->dst, peer);
        f->ifa.ifa_dstaddr = &f->dst.sa;
    }
}

#define UPRUN (IFF_UP | IFF_RUNNING | IFF_LOWER_UP)
#define TUNF (IFF_POINTOPOINT | IFF_NOARP | IFF_MULTICAST)

/* A host with loopback, an Ethernet with an alias, a VPN tun with a peer, a
 * WireGuard interface and a few broken VPN candidates. */
static void build_host(void) {
    reset();
    add_link("lo", 1, IFF_UP | IFF_RUNNING | IFF_LOOPBACK | IFF_LOWER_UP);
    add_link("eth0", 2, UPRUN | IFF_BROADCAST | IFF_MULTICAST);
    add_link("tun0", 3, UPRUN | TUNF);
    add_bare_link("wg0", IFF_UP | IFF_RUNNING | IFF_NOARP | IFF_POINTOPOINT);
    add_link("tun1", 5, TUNF);                  /* down */
    add_link("tun2", 6, IFF_UP | TUNF);         /* up, no carrier, addressed */
    add_link("tun3", 7, UPRUN | TUNF);          /* up, no address */
    add_link("tun4", 8, UPRUN | IFF_BROADCAST); /* up, link-local only */
    add_link("tun5", 9, UPRUN | IFF_LOOPBACK);  /* a loopback by another name */
    add_v4("lo", IFF_UP | IFF_LOOPBACK, "127.0.0.1", "255.0.0.0", NULL);
    add_v4("eth0", UPRUN | IFF_BROADCAST, "192.168.1.10", "255.255.255.0", NULL);
    add_v4("tun5", UPRUN | IFF_LOOPBACK, "127.0.0.2", "255.0.0.0", NULL);
    add_v4("eth0:1", UPRUN | IFF_BROADCAST, "192.168.1.11", "255.255.255.0", NULL);
    add_v4("tun0", UPRUN | TUNF, "10.8.0.2", "255.255.255.255", "10.8.0.1");
    add_v4("wg0", IFF_UP | IFF_RUNNING | IFF_POINTOPOINT, "10.66.0.2", NULL, NULL);
    add_v4("tun1", TUNF, "10.9.0.2", "255.255.255.252", NULL);
    add_v4("tun2", IFF_UP | TUNF, "10.10.0.2", "255.255.255.0", NULL);
    add_v6("lo", IFF_UP | IFF_LOOPBACK, "::1", 128, NULL);
    add_v6("eth0", UPRUN, "fe80::1", 64, NULL);
    add_v6("tun0", UPRUN | TUNF, "fd00:8::2", 64, "fd00:8::1");
    add_v6("tun4", UPRUN, "fe80::4", 64, NULL);
}

static int setup(void **state) {
    (void)state;
    reset();
    return 0;
}

/* ---- names ---------------------------------------------------------------------- */

static void test_names_supported(void **state) {
    (void)state;
    /* which of them are VPNs is the admin policy's word, not the name rule's */
    const char *ok[] = {"tun0", "wg0", "tun", "wg", "tun-a.b_c", "wgVPN", "wg0123456789abc",
                        "tun.1", "tun0123456789ab", "tailscale0", "nordlynx", "mullvad-se1",
                        "proton0", "ppp0", "eth0", "Tun0"};
    for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++) {
        char why[160] = "untouched";
        assert_true(ifc_name_supported(ok[k]));
        assert_int_equal(ifc_name_check(ok[k], why, sizeof(why)), 0);
        assert_string_equal(why, "untouched"); /* written on failure only */
    }
}

static void test_names_refused(void **state) {
    (void)state;
    const char *bad[] = {"",      ".",        "..",          "lo",
                         "tun0/x", "tun 0",   "tun0\n",      "tun:0",
                         "tun0\x7f", "tun\xc3\xa9", "tun0123456789abc", "wg/../x"};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        assert_false(ifc_name_supported(bad[k]));
        assert_int_equal(ifc_name_check(bad[k], NULL, 0), -EINVAL);
    }
    assert_false(ifc_name_supported(NULL));
}

static void expect_name_why(const char *name, const char *want) {
    char why[160] = "";
    assert_int_equal(ifc_name_check(name, why, sizeof(why)), -EINVAL);
    assert_string_equal(why, want);
}

static void test_name_messages(void **state) {
    (void)state;
    expect_name_why("lo", "'lo' is the loopback interface, not a VPN");
    expect_name_why("", "empty interface name");
    expect_name_why(NULL, "empty interface name");
    expect_name_why(".", "interface name '.' is not allowed");
    expect_name_why("..", "interface name '..' is not allowed");
    /* Hostile input is shown bounded and printable. */
    expect_name_why("tun0\n\x1b[2J",
                    "interface name 'tun0???2J' has a character outside [A-Za-z0-9_.-]");
    expect_name_why("tun0123456789abcdefgh",
                    "interface name 'tun0123456789ab...' is too long (at most 15 characters)");
}

/* The Darwin rule (utun<N>), checked here: the same code decides on a Mac. */
static void test_names_darwin(void **state) {
    (void)state;
    const char *ok[] = {"utun0", "utun1", "utun12", "utun99999"};
    const char *bad[] = {"utun", "utun01", "utun123456", "utun1a", "tun0", "wg0", "en0",
                         "lo0", "utun-1", "UTUN3", "utun 3", ""};
    char why[160];
    for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++)
        assert_int_equal(ifc_name_check_for(IFC_OS_DARWIN, ok[k], NULL, 0), 0);
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        assert_int_equal(ifc_name_check_for(IFC_OS_DARWIN, bad[k], NULL, 0), -EINVAL);
    assert_int_equal(ifc_name_check_for(IFC_OS_DARWIN, "tun0", why, sizeof(why)), -EINVAL);
    assert_string_equal(why, "'tun0' is not a supported VPN interface name (utun<N>)");
    /* on Linux the name rule takes any plain name but lo (the policy
     * decides which are VPNs) */
    assert_int_equal(ifc_name_check_for(IFC_OS_LINUX, "utun3", why, sizeof(why)), 0);
    assert_int_equal(ifc_name_check_for((enum ifc_os)0, "tun0", NULL, 0), -EINVAL);
    /* this build decides by its own platform's rule */
    assert_int_equal(ifc_os_native(), IFC_OS_LINUX);
}

static void test_why_truncated_and_terminated(void **state) {
    (void)state;
    char why[8];
    memset(why, 'x', sizeof(why));
    assert_int_equal(ifc_name_check("tun0 x", why, sizeof(why)), -EINVAL);
    assert_int_equal(why[sizeof(why) - 1], '\0');
    assert_string_equal(why, "interfa");
}

/* ---- parsing ---------------------------------------------------------------------- */

static void test_parse_host(void **state) {
    (void)state;
    struct ifc_list l = {0};
    const struct ifc *i = NULL;
    char buf[INET6_ADDRSTRLEN];

    build_host();
    assert_int_equal(ifc_list_from_ifaddrs(head, &l), 0);
    assert_int_equal(l.n, 9);
    assert_string_equal(l.items[0].name, "lo");
    assert_string_equal(l.items[7].name, "tun4");

    assert_int_equal(ifc_find(&l, "lo", &i), 0);
    assert_true(i->loopback && i->up && i->running && i->carrier);
    assert_int_equal(i->ifindex, 1);
    assert_int_equal(i->n_addrs, 2);

    /* The alias "eth0:1" belongs to eth0; there is no interface "eth0:1". */
    assert_int_equal(ifc_find(&l, "eth0", &i), 0);
    assert_int_equal(i->ifindex, 2);
    assert_int_equal(i->n_addrs, 3);
    assert_int_equal(i->addrs[0].family, AF_INET);
    assert_int_equal(i->addrs[0].prefixlen, 24);
    assert_false(i->addrs[0].has_peer);
    assert_string_equal(inet_ntop(AF_INET, &i->addrs[1].addr.v4, buf, sizeof(buf)),
                        "192.168.1.11");
    assert_int_equal(i->addrs[2].family, AF_INET6);
    assert_int_equal(i->addrs[2].prefixlen, 64);
    assert_int_equal(ifc_find(&l, "eth0:1", &i), -ENODEV);

    assert_int_equal(ifc_find(&l, "tun0", &i), 0);
    assert_int_equal(i->ifindex, 3);
    assert_true(i->pointopoint && i->up && i->running && i->carrier && !i->loopback);
    assert_int_equal(i->flags & IFF_NOARP, IFF_NOARP);
    assert_int_equal(i->n_addrs, 2);
    assert_int_equal(i->addrs[0].prefixlen, 32);
    assert_true(i->addrs[0].has_peer);
    assert_string_equal(inet_ntop(AF_INET, &i->addrs[0].peer.v4, buf, sizeof(buf)), "10.8.0.1");
    assert_true(i->addrs[1].has_peer);
    assert_string_equal(inet_ntop(AF_INET6, &i->addrs[1].peer.v6, buf, sizeof(buf)),
                        "fd00:8::1");

    /* No netmask given: a host address. */
    assert_int_equal(ifc_find(&l, "wg0", &i), 0);
    assert_int_equal(i->ifindex, 0); /* no link-layer address, no AF_PACKET entry */
    assert_true(i->up && i->running && i->pointopoint);
    assert_int_equal(i->addrs[0].prefixlen, 32);
    assert_false(i->carrier);

    assert_int_equal(ifc_find(&l, "tun2", &i), 0);
    assert_true(i->up && !i->running && !i->carrier);
    assert_int_equal(ifc_find(&l, "tun3", &i), 0);
    assert_int_equal(i->n_addrs, 0);
    assert_null(i->addrs);

    ifc_list_free(&l);
    assert_null(l.items);
    assert_int_equal(l.n, 0);
    ifc_list_free(&l); /* twice is harmless */
    ifc_list_free(NULL);
}

static void test_parse_peer_only_on_pointopoint(void **state) {
    (void)state;
    struct ifc_list l = {0};
    /* On a broadcast link ifa_dstaddr is the broadcast address, not a peer. */
    add_link("eth1", 9, UPRUN | IFF_BROADCAST);
    add_v4("eth1", UPRUN | IFF_BROADCAST, "10.1.2.3", "255.255.0.0", "10.1.255.255");
    assert_int_equal(ifc_list_from_ifaddrs(head, &l), 0);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.items[0].addrs[0].prefixlen, 16);
    assert_false(l.items[0].addrs[0].has_peer);
    ifc_list_free(&l);
}

static void test_parse_other_families_and_no_link(void **state) {
    (void)state;
    struct ifc_list l = {0};
    struct fake *f = add("tun7", UPRUN);
    f->addr.sa.sa_family = AF_UNIX; /* not ours: ignored */
    f->ifa.ifa_addr = &f->addr.sa;
    add("tun8", UPRUN); /* no address at all: the interface exists */
    add_v4("tun9", UPRUN | TUNF, "10.0.0.9", NULL, NULL); /* no link entry: no ifindex */
    assert_int_equal(ifc_list_from_ifaddrs(head, &l), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0].name, "tun8");
    assert_int_equal(l.items[0].ifindex, 0);
    assert_true(l.items[0].up);
    assert_string_equal(l.items[1].name, "tun9");
    assert_int_equal(l.items[1].ifindex, 0);
    assert_int_equal(l.items[1].n_addrs, 1);
    ifc_list_free(&l);
}

static void test_parse_empty(void **state) {
    (void)state;
    struct ifc_list l = {.n = 99};
    assert_int_equal(ifc_list_from_ifaddrs(NULL, &l), 0);
    assert_int_equal(l.n, 0);
    assert_null(l.items);
}

static void test_parse_refuses_bad_names(void **state) {
    (void)state;
    const char *bad[] = {"", ":1", "tun0123456789abc", "tun0123456789abc:1"};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        struct ifc_list l = {.n = 42};
        reset();
        add_link("tun0", 3, UPRUN);
        add_v4("tun0", UPRUN, "10.0.0.1", NULL, NULL);
        add_link(bad[k], 4, UPRUN);
        assert_int_equal(ifc_list_from_ifaddrs(head, &l), -EINVAL);
        assert_int_equal(l.n, 42); /* untouched on failure */
    }
    struct ifc_list l = {.n = 42};
    reset();
    struct fake *f = add("x", UPRUN);
    f->ifa.ifa_name = NULL;
    assert_int_equal(ifc_list_from_ifaddrs(head, &l), -EINVAL);
    assert_int_equal(l.n, 42);
}

/* Many interfaces and addresses: exercises the growth paths (under ASan). */
static void test_parse_many(void **state) {
    (void)state;
    static struct fake big[600];
    struct ifaddrs *h = NULL, **t = &h;
    for (size_t k = 0; k < 600; k++) {
        struct fake *f = &big[k];
        memset(f, 0, sizeof(*f));
        snprintf(f->name, sizeof(f->name), "tun%zu", k % 40);
        f->ifa.ifa_name = f->name;
        f->ifa.ifa_flags = UPRUN;
        f->addr.in.sin_family = AF_INET;
        f->addr.in.sin_addr.s_addr = htonl(0x0a000000u + (uint32_t)k);
        f->ifa.ifa_addr = &f->addr.sa;
        *t = &f->ifa;
        t = &f->ifa.ifa_next;
    }
    struct ifc_list l = {0};
    const struct ifc *i = NULL;
    assert_int_equal(ifc_list_from_ifaddrs(h, &l), 0);
    assert_int_equal(l.n, 40);
    assert_int_equal(ifc_find(&l, "tun39", &i), 0);
    assert_int_equal(i->n_addrs, 15);
    ifc_list_free(&l);
}

static void test_find(void **state) {
    (void)state;
    struct ifc_list l = {0};
    const struct ifc *i = (const struct ifc *)0x1;
    build_host();
    assert_int_equal(ifc_list_from_ifaddrs(head, &l), 0);
    assert_int_equal(ifc_find(&l, "tun", &i), -ENODEV); /* exact names only */
    assert_int_equal(ifc_find(&l, "tun00", &i), -ENODEV);
    assert_ptr_equal(i, (const struct ifc *)0x1);   /* untouched on failure */
    assert_int_equal(ifc_find(&l, NULL, &i), -EINVAL);
    assert_int_equal(ifc_find(NULL, "tun0", &i), -EINVAL);
    ifc_list_free(&l);
}

/* ---- validation ---------------------------------------------------------------------- */

static void expect_validate(const struct ifc_list *l, const char *name, int want,
                            const char *want_why) {
    char why[200] = "untouched";
    assert_int_equal(ifc_validate_vpn(l, name, why, sizeof(why)), want);
    assert_string_equal(why, want_why ? want_why : "untouched");
    /* The same answer without a reason buffer. */
    assert_int_equal(ifc_validate_vpn(l, name, NULL, 0), want);
}

static void test_validate(void **state) {
    (void)state;
    struct ifc_list l = {0};
    build_host();
    assert_int_equal(ifc_list_from_ifaddrs(head, &l), 0);

    expect_validate(&l, "tun0", 0, NULL);
    expect_validate(&l, "wg0", 0, NULL);
    /* Up without carrier (VPN daemon reconnecting) is still the interface. */
    expect_validate(&l, "tun2", 0, NULL);

    /* a name that is not there: the nearest one and the ones there are
     * (loopback left out) */
    expect_validate(&l, "tun9", -ENODEV,
                    "interface 'tun9' does not exist; did you mean 'tun0'? (interfaces here: eth0, "
                    "tun0, wg0, tun1, tun2, tun3, tun4)");
    expect_validate(&l, "wgg0", -ENODEV,
                    "interface 'wgg0' does not exist; did you mean 'wg0'? (interfaces here: eth0, "
                    "tun0, wg0, tun1, tun2, tun3, tun4)");
    expect_validate(&l, "proton0", -ENODEV,
                    "interface 'proton0' does not exist (interfaces here: eth0, tun0, wg0, tun1, "
                    "tun2, tun3, tun4)");
    expect_validate(&l, "tun1", -ENETDOWN, "interface 'tun1' is down");
    expect_validate(&l, "tun3", -EADDRNOTAVAIL, "interface 'tun3' has no address");
    expect_validate(&l, "tun4", -EADDRNOTAVAIL,
                    "interface 'tun4' has no address (only link-local)");
    expect_validate(&l, "lo", -EINVAL, "'lo' is the loopback interface, not a VPN");
    expect_validate(&l, "tun5", -EINVAL, "'tun5' is a loopback interface, not a VPN");
    expect_validate(&l, "..", -EINVAL, "interface name '..' is not allowed");
    expect_validate(&l, "", -EINVAL, "empty interface name");
    ifc_list_free(&l);

    /* An empty or missing list: nothing exists. */
    struct ifc_list empty = {0};
    expect_validate(&empty, "tun0", -ENODEV,
                    "interface 'tun0' does not exist (interfaces here: none but loopback)");
    expect_validate(NULL, "tun0", -ENODEV,
                    "interface 'tun0' does not exist (interfaces here: none but loopback)");
    /* many: the first eight, then "..." */
    struct ifc many_items[10];
    memset(many_items, 0, sizeof(many_items));
    for (size_t i = 0; i < 10; i++)
        snprintf(many_items[i].name, sizeof(many_items[i].name), "veth%zu", i);
    struct ifc_list many = {.items = many_items, .n = 10};
    expect_validate(&many, "tun0", -ENODEV,
                    "interface 'tun0' does not exist (interfaces here: veth0, veth1, veth2, veth3, "
                    "veth4, veth5, veth6, veth7, ...)");
}

static void test_validate_link_local_v4(void **state) {
    (void)state;
    struct ifc_list l = {0};
    add_link("wg1", 12, IFF_UP);
    add_v4("wg1", IFF_UP, "169.254.3.4", "255.255.0.0", NULL);
    add_link("wg2", 13, IFF_UP);
    add_v4("wg2", IFF_UP, "169.253.3.4", "255.255.0.0", NULL);
    add_v6("wg2", IFF_UP, "fe80::2", 64, NULL);
    assert_int_equal(ifc_list_from_ifaddrs(head, &l), 0);
    expect_validate(&l, "wg1", -EADDRNOTAVAIL, "interface 'wg1' has no address (only link-local)");
    expect_validate(&l, "wg2", 0, NULL);
    const struct ifc *i = NULL;
    assert_int_equal(ifc_find(&l, "wg2", &i), 0);
    assert_int_equal(ifc_routable_addr_count(i), 1);
    ifc_list_free(&l);
}

/* ---- the real thing (no privileges needed) ------------------------------------------- */

static void test_list_live(void **state) {
    (void)state;
    struct ifc_list l = {0};
    const struct ifc *i = NULL;
    assert_int_equal(ifc_list(&l), 0);
    assert_true(l.n >= 1);
    assert_int_equal(ifc_find(&l, "lo", &i), 0);
    assert_true(i->loopback);
    assert_true(i->ifindex > 0);
    assert_int_equal(ifc_validate_vpn(&l, "lo", NULL, 0), -EINVAL);
    ifc_list_free(&l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_names_supported, setup),
        cmocka_unit_test_setup(test_names_refused, setup),
        cmocka_unit_test_setup(test_name_messages, setup),
        cmocka_unit_test_setup(test_names_darwin, setup),
        cmocka_unit_test_setup(test_why_truncated_and_terminated, setup),
        cmocka_unit_test_setup(test_parse_host, setup),
        cmocka_unit_test_setup(test_parse_peer_only_on_pointopoint, setup),
        cmocka_unit_test_setup(test_parse_other_families_and_no_link, setup),
        cmocka_unit_test_setup(test_parse_empty, setup),
        cmocka_unit_test_setup(test_parse_refuses_bad_names, setup),
        cmocka_unit_test_setup(test_parse_many, setup),
        cmocka_unit_test_setup(test_find, setup),
        cmocka_unit_test_setup(test_validate, setup),
        cmocka_unit_test_setup(test_validate_link_local_v4, setup),
        cmocka_unit_test_setup(test_list_live, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
