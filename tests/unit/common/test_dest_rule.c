/* Destination rules: a table of good inputs with the exact struct expected
 * and the canonical print-back (which must parse again to the same struct),
 * a table of bad inputs with the expected message, the wire form, containment,
 * and blocked-range membership for LAN exceptions. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/dest_rule.h"
#include "common/macros.h"

#define UNTOUCHED "untouched"

struct good {
    const char *text;
    int family;
    uint8_t addr[16];
    uint8_t prefix_len;
    uint16_t port_min, port_max;
    const char *canonical;
};

static const struct good goods[] = {
    {"10.0.0.0/8", AF_INET, {10}, 8, 0, 0, "10.0.0.0/8"},
    {"192.168.1.7", AF_INET, {192, 168, 1, 7}, 32, 0, 0, "192.168.1.7"},
    {"192.168.1.7/32", AF_INET, {192, 168, 1, 7}, 32, 0, 0, "192.168.1.7"},
    {"0.0.0.0/0", AF_INET, {0}, 0, 0, 0, "0.0.0.0/0"},
    {"0.0.0.0/0:443", AF_INET, {0}, 0, 443, 443, "0.0.0.0/0:443"},
    {"8.8.8.8:53", AF_INET, {8, 8, 8, 8}, 32, 53, 53, "8.8.8.8:53"},
    {"10.0.0.0/8:80-90", AF_INET, {10}, 8, 80, 90, "10.0.0.0/8:80-90"},
    {"1.2.3.4:80-80", AF_INET, {1, 2, 3, 4}, 32, 80, 80, "1.2.3.4:80"},
    {"1.2.3.4:1-65535", AF_INET, {1, 2, 3, 4}, 32, 1, 65535, "1.2.3.4:1-65535"},
    {"255.255.255.255", AF_INET, {255, 255, 255, 255}, 32, 0, 0, "255.255.255.255"},
    {"100.64.0.0/10", AF_INET, {100, 64}, 10, 0, 0, "100.64.0.0/10"},
    {"0.0.0.0", AF_INET, {0}, 32, 0, 0, "0.0.0.0"},
    {"fd00::/8", AF_INET6, {0xfd}, 8, 0, 0, "fd00::/8"},
    {"FD00::1", AF_INET6, {0xfd, [15] = 1}, 128, 0, 0, "fd00::1"},
    {"::1", AF_INET6, {[15] = 1}, 128, 0, 0, "::1"},
    {"::", AF_INET6, {0}, 128, 0, 0, "::"},
    {"::/0", AF_INET6, {0}, 0, 0, 0, "::/0"},
    {"[fd00::1]:443", AF_INET6, {0xfd, [15] = 1}, 128, 443, 443, "[fd00::1]:443"},
    {"[fd00::/8]:80-90", AF_INET6, {0xfd}, 8, 80, 90, "[fd00::/8]:80-90"},
    {"[fd00::1]", AF_INET6, {0xfd, [15] = 1}, 128, 0, 0, "fd00::1"},
    {"[2001:db8::/32]", AF_INET6, {0x20, 0x01, 0x0d, 0xb8}, 32, 0, 0, "2001:db8::/32"},
    {"[::/0]:443", AF_INET6, {0}, 0, 443, 443, "[::/0]:443"},
    {"2001:0db8:0000:0000:0000:0000:0000:0001", AF_INET6, {0x20, 0x01, 0x0d, 0xb8, [15] = 1},
     128, 0, 0, "2001:db8::1"},
    {"2001:db8:1:2:3:4:5:6", AF_INET6,
     {0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6}, 128, 0, 0,
     "2001:db8:1:2:3:4:5:6"},
    {"::ffff:10.0.0.1", AF_INET6, {[10] = 0xff, [11] = 0xff, 10, 0, 0, 1}, 128, 0, 0,
     "::ffff:10.0.0.1"},
    {"fe80::/10", AF_INET6, {0xfe, 0x80}, 10, 0, 0, "fe80::/10"},
    {"[fe80::/10]:22", AF_INET6, {0xfe, 0x80}, 10, 22, 22, "[fe80::/10]:22"},
    /* Unbracketed: a tail that is a valid group is part of the address
     * (documented: ports need brackets). The print-back shows it. */
    {"fd00::1:443", AF_INET6, {0xfd, [13] = 1, [14] = 0x04, [15] = 0x43}, 128, 0, 0,
     "fd00::1:443"},
};

static void assert_rule(const struct dr_rule *r, const struct good *g) {
    assert_int_equal(r->family, g->family);
    assert_memory_equal(r->addr, g->addr, 16);
    assert_int_equal(r->prefix_len, g->prefix_len);
    assert_int_equal(r->port_min, g->port_min);
    assert_int_equal(r->port_max, g->port_max);
}

static void test_good_inputs(void **state) {
    for (size_t i = 0; i < ARRAY_SIZE(goods); i++) {
        const struct good *g = &goods[i];
        struct dr_rule r, again;
        char why[DR_WHY_MAX] = UNTOUCHED, buf[DR_FORMAT_MAX];

        if (dr_parse(g->text, &r, why, sizeof(why)) != 0)
            fail_msg("'%s' refused: %s", g->text, why);
        assert_string_equal(why, UNTOUCHED);
        assert_rule(&r, g);
        assert_int_equal(dr_check(&r, why, sizeof(why)), 0);
        assert_int_equal(dr_format(&r, buf, sizeof(buf)), 0);
        if (strcmp(buf, g->canonical) != 0)
            fail_msg("'%s' printed as '%s', want '%s'", g->text, buf, g->canonical);
        if (dr_parse(buf, &again, why, sizeof(why)) != 0)
            fail_msg("canonical '%s' refused: %s", buf, why);
        assert_true(dr_equal(&r, &again));
        assert_rule(&again, g);
    }
}

struct bad {
    const char *text;
    const char *want; /* substring of the message */
};

static const struct bad bads[] = {
    {"", "empty rule"},
    {"10.1.2.3/8", "10.1.2.3/8 has host bits set; did you mean 10.0.0.0/8?"},
    {"10.1.2.3/8:443", "10.1.2.3/8 has host bits set; did you mean 10.0.0.0/8:443?"},
    {"1.2.3.4/24", "did you mean 1.2.3.0/24?"},
    {"fd00::1/8", "fd00::1/8 has host bits set; did you mean fd00::/8?"},
    {"[fd00::1/8]:443", "did you mean [fd00::/8]:443?"},
    {"10.0.0.0/33", "prefix length /33 is out of range for IPv4 (0-32)"},
    {"fd00::/129", "prefix length /129 is out of range for IPv6 (0-128)"},
    {"10.0.0.0/1000", "out of range for IPv4"},
    {"10.0.0.0/", "missing prefix length after '/'"},
    {"10.0.0.0/+8", "prefix length '+8' is not a number"},
    {"10.0.0.0/-8", "prefix length '-8' is not a number"},
    {"10.0.0.0/08", "leading zero"},
    {"10.0.0.0/8x", "prefix length '8x' is not a number"},
    {"10.0.0.1:0", "port 0 is not a valid port"},
    {"10.0.0.1:65536", "port 65536 is out of range (1-65535)"},
    {"10.0.0.1:99999999999999", "port 99999999999999 is out of range"},
    {"10.0.0.1:90-80", "port range 90-80 is reversed"},
    {"10.0.0.1:0-80", "port 0 is not a valid port"},
    {"10.0.0.1:80-70000", "port 70000 is out of range"},
    {"10.0.0.1:http", "port 'http' is not a number"},
    {"10.0.0.1:+80", "port '+80' must not have a sign"},
    {"10.0.0.1:80-+90", "port '+90' must not have a sign"},
    {"10.0.0.1:", "missing port after ':'"},
    {"10.0.0.1:80-", "missing port after '-'"},
    {"10.0.0.1:-80", "missing port before '-'"},
    {"10.0.0.1:080", "port '080' has a leading zero"},
    {"10.0.0.1:80x", "unexpected 'x' after port 80"},
    {"10.0.0.1:80:90", "unexpected ':90' after port 80"},
    {"10.0.0.1:80-90-100", "unexpected '-100' after port 90"},
    {"[::1]:", "missing port after ':'"},
    {"example.com", "'example.com' is not an IP address; rules take addresses, not names"},
    {"example.com:443", "'example.com' is not an IP address; rules take addresses, not names"},
    {"localhost", "'localhost' is not an IP address; rules take addresses, not names"},
    {"my-host.lan/24", "'my-host.lan' is not an IP address; rules take addresses"},
    {"[example.com]:443", "'example.com' is not an IP address; rules take addresses"},
    {"fd00::1:80-90", "an IPv6 rule with a port needs brackets: write '[fd00::1]:80-90'"},
    {"fd00::1:65536", "needs brackets: write '[fd00::1]:65536'"},
    {"fd00::/8:443", "an IPv6 rule with a port needs brackets: write '[fd00::/8]:443'"},
    {"[fd00::]/8:443", "the prefix goes inside the brackets: write '[fd00::/8]:443'"},
    {"[fd00::]/8", "the prefix goes inside the brackets: write '[fd00::/8]'"},
    {"[fd00::1]x", "unexpected 'x' after ']'"},
    {"[fd00::1]:443]", "unexpected ']' after port 443"},
    {"[fd00::1", "missing ']'"},
    {"[]", "empty brackets"},
    {"[10.0.0.1]:443", "brackets are only for IPv6 addresses: write '10.0.0.1:443'"},
    {"[10.0.0.0/8]", "brackets are only for IPv6 addresses: write '10.0.0.0/8'"},
    {"10.0.0.1 ", "contains a space at offset 8"},
    {" 10.0.0.1", "contains a space at offset 0"},
    {"10.0.0.1\n", "byte 0x0a at offset 8"},
    {"10.0.0.1\xc3\xa9", "byte 0xc3"},
    {"1.2.3", "'1.2.3' is not a valid IPv4 address"},
    {"256.0.0.1", "'256.0.0.1' is not a valid IPv4 address"},
    {"010.0.0.1", "'010.0.0.1' is not a valid IPv4 address"},
    {"1.2.3.4.5", "'1.2.3.4.5' is not a valid IPv4 address"},
    {"1..2.3", "not a valid IPv4 address"},
    {"1.2.3.4.", "not a valid IPv4 address"},
    {"1.2.3.4a", "unexpected 'a' after address 1.2.3.4"},
    {"0x0a.0.0.1", "is not an IP address"},
    {"12345", "'12345' is not an IP address"},
    {"fe80::1%eth0", "zone indexes"},
    {"fd00::zz", "'fd00::zz' is not a valid IPv6 address"},
    {"fd00:::1", "not a valid IPv6 address"},
    {"1:2:3:4:5:6:7:8:9", "not a valid IPv6 address"},
    {"/8", "missing address in '/8'"},
    {":443", "missing address in ':443'"},
};

static void test_bad_inputs(void **state) {
    for (size_t i = 0; i < ARRAY_SIZE(bads); i++) {
        const struct bad *b = &bads[i];
        struct dr_rule r;
        char why[DR_WHY_MAX] = "";

        memset(&r, 0xa5, sizeof(r));
        int e = dr_parse(b->text, &r, why, sizeof(why));
        if (e != -EINVAL)
            fail_msg("'%s' gave %d, want -EINVAL", b->text, e);
        if (!strstr(why, b->want))
            fail_msg("'%s': message '%s' lacks '%s'", b->text, why, b->want);
        /* ret untouched on failure */
        for (size_t k = 0; k < sizeof(r); k++)
            assert_int_equal(((const uint8_t *)&r)[k], 0xa5);
    }
}

static void test_bad_misc(void **state) {
    char why[DR_WHY_MAX];
    char text[DR_TEXT_MAX + 2];
    struct dr_rule r;

    memset(text, '1', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0';
    assert_int_equal(dr_parse(text, &r, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "longer than 128"));
    assert_int_equal(dr_parse(NULL, &r, why, sizeof(why)), -EINVAL);
    assert_int_equal(dr_parse("10.0.0.0/8", NULL, why, sizeof(why)), -EINVAL);
    /* NULL why is fine. */
    assert_int_equal(dr_parse("example.com", &r, NULL, 0), -EINVAL);
    /* A tiny why buffer is truncated, still terminated. */
    char tiny[8];
    assert_int_equal(dr_parse("example.com", &r, tiny, sizeof(tiny)), -EINVAL);
    assert_int_equal(strlen(tiny), sizeof(tiny) - 1);
}

static void test_from_parts(void **state) {
    char why[DR_WHY_MAX];
    struct dr_rule r, p;
    const uint8_t v4[4] = {10, 0, 0, 0}, v4host[4] = {10, 1, 2, 3};
    const uint8_t v6[16] = {0xfd};

    assert_int_equal(dr_from_parts(v4, 4, 8, 443, 0, &r, why, sizeof(why)), 0);
    assert_int_equal(dr_parse("10.0.0.0/8:443", &p, why, sizeof(why)), 0);
    assert_true(dr_equal(&r, &p));
    assert_int_equal(dr_from_parts(v4, 4, 8, 80, 90, &r, why, sizeof(why)), 0);
    assert_int_equal(dr_parse("10.0.0.0/8:80-90", &p, why, sizeof(why)), 0);
    assert_true(dr_equal(&r, &p));
    assert_int_equal(dr_from_parts(v6, 16, 8, 0, 0, &r, why, sizeof(why)), 0);
    assert_int_equal(dr_parse("fd00::/8", &p, why, sizeof(why)), 0);
    assert_true(dr_equal(&r, &p));

    memset(&r, 0xa5, sizeof(r));
    p = r;
    assert_int_equal(dr_from_parts(v4, 5, 8, 0, 0, &r, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "4 or 16 bytes"));
    assert_int_equal(dr_from_parts(v4, 4, 33, 0, 0, &r, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "out of range for IPv4"));
    assert_int_equal(dr_from_parts(v6, 16, 129, 0, 0, &r, why, sizeof(why)), -EINVAL);
    assert_int_equal(dr_from_parts(v4host, 4, 8, 0, 0, &r, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "10.1.2.3/8 has host bits set; did you mean 10.0.0.0/8?"));
    assert_int_equal(dr_from_parts(v4, 4, 8, 0, 5, &r, why, sizeof(why)), -EINVAL);
    assert_int_equal(dr_from_parts(v4, 4, 8, 70000, 0, &r, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "70000"));
    assert_int_equal(dr_from_parts(v4, 4, 8, 90, 80, &r, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "reversed"));
    assert_int_equal(dr_from_parts(NULL, 4, 8, 0, 0, &r, why, sizeof(why)), -EINVAL);
    assert_memory_equal(&r, &p, sizeof(r));
}

static void test_check_and_format(void **state) {
    char why[DR_WHY_MAX];
    char buf[DR_FORMAT_MAX];
    struct dr_rule r;

    /* Invalid structs. */
    r = (struct dr_rule){.family = AF_UNIX, .prefix_len = 0};
    assert_int_equal(dr_check(&r, why, sizeof(why)), -EINVAL);
    r = (struct dr_rule){.family = AF_INET, .addr = {1, 2, 3, 4, 5}, .prefix_len = 32};
    assert_int_equal(dr_check(&r, why, sizeof(why)), -EINVAL);
    r = (struct dr_rule){.family = AF_INET, .addr = {10, 1}, .prefix_len = 8};
    assert_int_equal(dr_check(&r, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "10.1.0.0/8 has host bits set; did you mean 10.0.0.0/8?"));
    r = (struct dr_rule){.family = AF_INET6, .prefix_len = 129};
    assert_int_equal(dr_check(&r, why, sizeof(why)), -EINVAL);
    r = (struct dr_rule){.family = AF_INET, .prefix_len = 0, .port_min = 0, .port_max = 9};
    assert_int_equal(dr_check(&r, why, sizeof(why)), -EINVAL);
    r = (struct dr_rule){.family = AF_INET, .prefix_len = 0, .port_min = 9, .port_max = 8};
    assert_int_equal(dr_check(&r, why, sizeof(why)), -EINVAL);
    strcpy(buf, UNTOUCHED);
    assert_int_equal(dr_format(&r, buf, sizeof(buf)), -EINVAL);
    assert_string_equal(buf, UNTOUCHED);
    assert_int_equal(dr_check(NULL, why, sizeof(why)), -EINVAL);

    /* The longest output fits DR_FORMAT_MAX; a short buffer gets -ENOSPC. */
    assert_int_equal(dr_parse("[1111:2222:3333:4444:5555:6666:7777:8888]:65534-65535", &r, why,
                              sizeof(why)),
                     0);
    assert_int_equal(dr_format(&r, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "[1111:2222:3333:4444:5555:6666:7777:8888]:65534-65535");
    assert_int_equal(dr_parse("[::ffff:255.255.255.254/127]:65534-65535", &r, why, sizeof(why)),
                     0);
    assert_int_equal(dr_format(&r, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "[::ffff:255.255.255.254/127]:65534-65535");
    char small[8];
    strcpy(small, "keep");
    assert_int_equal(dr_format(&r, small, sizeof(small)), -ENOSPC);
    assert_string_equal(small, "keep");
    assert_int_equal(dr_parse("1.2.3.4", &r, why, sizeof(why)), 0);
    assert_int_equal(dr_format(&r, small, sizeof(small)), 0); /* "1.2.3.4" + NUL = 8 */
    assert_string_equal(small, "1.2.3.4");
    assert_int_equal(dr_format(&r, small, 7), -ENOSPC);
}

static struct dr_rule P(const char *text) {
    struct dr_rule r;
    char why[DR_WHY_MAX];
    if (dr_parse(text, &r, why, sizeof(why)) != 0)
        fail_msg("'%s': %s", text, why);
    return r;
}

static void test_contains(void **state) {
    struct {
        const char *outer, *inner;
        bool want;
    } cases[] = {
        {"10.0.0.0/8", "10.1.0.0/16", true},
        {"10.1.0.0/16", "10.0.0.0/8", false},
        {"10.0.0.0/8", "11.0.0.0/8", false},
        {"10.0.0.0/8", "10.0.0.0/8", true},
        {"10.0.0.0/8", "10.255.255.255", true},
        {"0.0.0.0/0", "203.0.113.9", true},
        {"0.0.0.0/0", "::/0", false},
        {"::/0", "10.0.0.0/8", false},
        {"fc00::/7", "fd00::/8", true},
        {"fd00::/8", "fc00::/7", false},
        {"fc00::/7", "fe80::1", false},
        {"172.16.0.0/12", "172.31.255.0/24", true},
        {"172.16.0.0/12", "172.32.0.0/24", false},
        /* ports: no port = every port */
        {"10.0.0.0/8", "10.1.2.3:443", true},
        {"10.0.0.0/8:443", "10.1.2.3", false},
        {"10.0.0.0/8:443", "10.1.2.3:443", true},
        {"10.0.0.0/8:1-1024", "10.1.2.3:80-90", true},
        {"10.0.0.0/8:1-1024", "10.1.2.3:1000-2000", false},
        {"10.0.0.0/8:1-65535", "10.1.2.3", false},
        {"[fd00::/8]:80-90", "[fd00::1]:85", true},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct dr_rule o = P(cases[i].outer), in = P(cases[i].inner);
        if (dr_contains(&o, &in) != cases[i].want)
            fail_msg("contains(%s, %s) != %d", cases[i].outer, cases[i].inner, cases[i].want);
    }
    struct dr_rule bad = {.family = AF_INET, .addr = {10, 1}, .prefix_len = 8};
    struct dr_rule any = P("0.0.0.0/0");
    assert_false(dr_contains(&any, &bad));
    assert_false(dr_contains(&bad, &any));
}

static void test_blocked_ranges(void **state) {
    struct {
        const char *text;
        bool want;
    } cases[] = {
        {"192.168.1.0/24", true},
        {"8.8.8.8/32", false},
        {"[fd00::1]", true},
        {"[fd00::1]:443", true},
        {"10.0.0.0/8", true},
        {"10.0.0.0/7", false},
        {"192.168.0.0/15", false},
        {"224.0.0.0/3", false}, /* spans two listed ranges: fail closed */
        {"100.64.0.0/10", true},
        {"100.128.0.0/10", false},
        {"127.0.0.1", true},
        {"169.254.169.254:80", true},
        {"172.32.0.1", false},
        {"1.1.1.1", false},
        {"fe80::1", true},
        {"2001:db8::1", true},
        {"2001:4860:4860::8888", false},
        {"::1", true},
        {"::", true},
        {"::2", false},
        {"::ffff:192.168.1.1", true},
        {"64:ff9b:1::1", true},
        {"64:ff9b::1.2.3.4", false},
        {"ff02::1", true},
        {"::/0", false},
        {"0.0.0.0/0", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct dr_rule r = P(cases[i].text);
        if (dr_in_blocked_ranges(&r) != cases[i].want)
            fail_msg("in_blocked(%s) != %d", cases[i].text, cases[i].want);
    }
    struct dr_rule bad = {.family = AF_INET, .addr = {10, 1}, .prefix_len = 8};
    assert_false(dr_in_blocked_ranges(&bad));
}

/* The exported tables are exactly the documented lists, valid, and print back. */
static void test_blocked_tables(void **state) {
    static const char *const v4[] = {
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
        "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
        "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
    };
    static const char *const v6[] = {
        "::", "::1", "::ffff:0.0.0.0/96", "64:ff9b:1::/48", "100::/64", "2001:db8::/32",
        "fc00::/7", "fe80::/10", "ff00::/8",
    };
    char buf[DR_FORMAT_MAX];
    assert_int_equal(ARRAY_SIZE(v4), DR_BLOCKED_V4_COUNT);
    assert_int_equal(ARRAY_SIZE(v6), DR_BLOCKED_V6_COUNT);
    for (size_t i = 0; i < DR_BLOCKED_V4_COUNT; i++) {
        struct dr_rule r = P(v4[i]);
        assert_true(dr_equal(&r, &dr_blocked_v4[i]));
        assert_int_equal(dr_check(&dr_blocked_v4[i], NULL, 0), 0);
        assert_int_equal(dr_format(&dr_blocked_v4[i], buf, sizeof(buf)), 0);
        assert_string_equal(buf, v4[i]);
        assert_true(dr_in_blocked_ranges(&dr_blocked_v4[i]));
    }
    for (size_t i = 0; i < DR_BLOCKED_V6_COUNT; i++) {
        struct dr_rule r = P(v6[i]);
        assert_true(dr_equal(&r, &dr_blocked_v6[i]));
        assert_int_equal(dr_check(&dr_blocked_v6[i], NULL, 0), 0);
        assert_int_equal(dr_format(&dr_blocked_v6[i], buf, sizeof(buf)), 0);
        assert_string_equal(buf, v6[i]);
    }
    /* "::ffff:0:0/96" is the same rule as its canonical spelling. */
    struct dr_rule a = P("::ffff:0:0/96");
    assert_true(dr_equal(&a, &dr_blocked_v6[2]));
}

/* A host address in a blocked range (what an allowlisted name may never open). */
static void test_addr_blocked(void **state) {
    (void)state;
    uint8_t a[16] = {0};
    a[0] = 8, a[1] = 8, a[2] = 8, a[3] = 8;
    assert_false(dr_addr_blocked(AF_INET, a));
    a[0] = 192, a[1] = 168, a[2] = 1, a[3] = 1;
    assert_true(dr_addr_blocked(AF_INET, a));
    a[0] = 100, a[1] = 64; /* CGN */
    assert_true(dr_addr_blocked(AF_INET, a));
    uint8_t v6[16] = {[15] = 1}; /* ::1 */
    assert_true(dr_addr_blocked(AF_INET6, v6));
    uint8_t g6[16] = {0x20, 0x01, 0x48, 0x60, [14] = 0x88, [15] = 0x88};
    assert_false(dr_addr_blocked(AF_INET6, g6));
    assert_true(dr_addr_blocked(AF_UNIX, g6)); /* not an address family: blocked */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_inputs),      cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_bad_misc),         cmocka_unit_test(test_from_parts),
        cmocka_unit_test(test_check_and_format), cmocka_unit_test(test_contains),
        cmocka_unit_test(test_blocked_ranges),   cmocka_unit_test(test_blocked_tables),
        cmocka_unit_test(test_addr_blocked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
