/* lyh audit's pure half: every option parser with good and bad inputs (exact
 * values, exact messages), every renderer against golden lines, JSON lines
 * read back by a small strict parser, CSV records read back by an RFC 4180
 * reader, buffer bounds, the monitor reasons and the summary table. Runs with
 * TZ=UTC unless a test sets a zone of its own (POSIX TZ strings: no tzdata
 * needed). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <cmocka.h>

#include "cli/audit_fmt.h"
#include "common/macros.h"

#define S 1000000ull
/* 2025-12-01T10:00:00Z, "now" for durations. */
#define NOW (1764583200ull * S)
#define UNTOUCHED 0xdeadbeefull

static void set_tz(const char *tz) {
    setenv("TZ", tz, 1);
    tzset();
}

static int setup_utc(void **state) {
    (void)state;
    set_tz("UTC");
    return 0;
}

/* ---- --since / --until ----------------------------------------------------------- */

struct time_good {
    const char *text;
    uint64_t us;
};

static const struct time_good time_goods[] = {
    {"0", 0},
    {"@0", 0},
    {"@1733000000", 1733000000 * S},
    {"@1733000000.25", 1733000000 * S + 250000},
    {"@1.1234567", 1 * S + 123456}, /* truncated to microseconds */
    {"@253402300799", 253402300799 * S},
    {"0s", NOW},
    {"30s", NOW - 30 * S},
    {"15m", NOW - 15 * 60 * S},
    {"2h", NOW - 2 * 3600 * S},
    {"7d", NOW - 7 * 86400 * S},
    {"1w", NOW - 7 * 86400 * S},
    {"1h30m", NOW - 5400 * S},
    {"1w2d3h4m5s", NOW - (9 * 86400 + 3 * 3600 + 4 * 60 + 5) * S},
    {"20423d", NOW - 20423ull * 86400 * S}, /* back to 1970-01-01T10:00:00Z */
    {"2026-12-01T10:00:00Z", 1796119200 * S},
    {"2026-12-01t10:00:00z", 1796119200 * S},
    {"2026-12-01 10:00:00Z", 1796119200 * S},
    {"2026-12-01T10:00Z", 1796119200 * S},
    {"2026-12-01T10:00:00+01:00", 1796115600 * S},
    {"2026-12-01T10:00:00-05:30", 1796139000 * S},
    {"2026-12-01T10:00:00-00:00", 1796119200 * S},
    {"2026-12-01T10:00:00.123456Z", 1796119200 * S + 123456},
    {"2026-12-01T10:00:00.1Z", 1796119200 * S + 100000},
    {"2026-12-01T10:00:00.123456789Z", 1796119200 * S + 123456},
    {"2026-12-01T10:00:00", 1796119200 * S}, /* local, TZ=UTC */
    {"2026-12-01 10:00", 1796119200 * S},
    {"2026-12-01", 1796083200 * S},
    {"2024-02-29T00:00:00Z", 1709164800 * S},
    {"2000-02-29", 951782400 * S},
    {"1970-01-01T00:00:00Z", 0},
    {"1970-01-01T01:00:00+01:00", 0},
    {"9999-12-31T23:59:59Z", 253402300799 * S},
    /* Leap seconds: the second after. */
    {"1990-12-31T23:59:60Z", 662688000 * S},
    {"1990-12-31T15:59:60-08:00", 662688000 * S},
    {"2016-12-31T23:59:60.5Z", 1483228800 * S + 500000},
    {"2016-12-31T23:59:60", 1483228800 * S}, /* local = UTC here */
};

static void test_time_good(void **state) {
    (void)state;
    for (size_t i = 0; i < ARRAY_SIZE(time_goods); i++) {
        uint64_t us = UNTOUCHED;
        char why[AUDIT_FMT_WHY_MAX] = "";
        int r = audit_fmt_parse_time(time_goods[i].text, NOW, &us, why, sizeof(why));
        if (r != 0 || us != time_goods[i].us)
            fail_msg("'%s': r=%d us=%llu want %llu (%s)", time_goods[i].text, r,
                     (unsigned long long)us, (unsigned long long)time_goods[i].us, why);
    }
}

struct bad {
    const char *text;
    const char *why;
};

static const struct bad time_bads[] = {
    {"", "empty time"},
    {"30", "a duration needs a unit (s, m, h, d or w), e.g. 30s or 30m"},
    {"1x", "unknown duration unit 'x' (use s, m, h, d or w: 30s 15m 2h 7d 1w)"},
    {"1H", "unknown duration unit 'H' (use s, m, h, d or w: 30s 15m 2h 7d 1w)"},
    {"1m1h", "duration units go from largest to smallest, each once (w d h m s), e.g. 1d12h"},
    {"1h1h", "duration units go from largest to smallest, each once (w d h m s), e.g. 1d12h"},
    {"1hm", "not a duration: expected a number before 'm' (like 30s, 15m, 2h, 7d, 1h30m)"},
    {"20424d", "reaches before 1970"},
    {"100000000d", "reaches before 1970"},
    {"99999999999999999999s", "reaches before 1970"},
    {"30 s", "unknown duration unit ' ' (use s, m, h, d or w: 30s 15m 2h 7d 1w)"},
    {"-1h",
     "not a time: expected a duration (30s, 15m, 2h, 7d), an RFC 3339 time "
     "(2026-12-01T10:00:00Z, or local without a zone) or @UNIXTIME"},
    {"yesterday",
     "not a time: expected a duration (30s, 15m, 2h, 7d), an RFC 3339 time "
     "(2026-12-01T10:00:00Z, or local without a zone) or @UNIXTIME"},
    {"@", "expected seconds since 1970 after '@', e.g. @1733000000"},
    {"@abc", "expected seconds since 1970 after '@' (digits, optionally .FRACTION)"},
    {"@-1", "expected seconds since 1970 after '@' (digits, optionally .FRACTION)"},
    {"@1.", "expected digits after '.'"},
    {"@1.2.3", "expected digits after '.'"},
    {"@253402300800", "after the year 9999"},
    {"@99999999999999999999", "after the year 9999"},
    {"2026-13-01", "month 13 is out of range (01-12)"},
    {"2026-00-10", "month 00 is out of range (01-12)"},
    {"2026-02-29", "day 29 is out of range for 2026-02 (01-28)"},
    {"1900-02-29", "day 29 is out of range for 1900-02 (01-28)"},
    {"2026-04-31", "day 31 is out of range for 2026-04 (01-30)"},
    {"2026-12-00", "day 00 is out of range for 2026-12 (01-31)"},
    {"1969-12-31T23:59:59Z", "before 1970"},
    {"1970-01-01T00:30:00+01:00", "before 1970"},
    {"2026-12-1", "expected a date YYYY-MM-DD"},
    {"2026/12/01", "expected a date YYYY-MM-DD"},
    {"2026-12-01T24:00:00Z", "hour 24 is out of range (00-23)"},
    {"2026-12-01T10:60Z", "minute 60 is out of range (00-59)"},
    {"2026-12-01T10:00:61Z", "second 61 is out of range (00-60)"},
    {"2026-12-01T10:00:60Z",
     "second 60 only exists as a leap second, at 23:59:60 UTC on the last day of a month"},
    {"2026-12-30T23:59:60Z",
     "second 60 only exists as a leap second, at 23:59:60 UTC on the last day of a month"},
    {"2026-12-01T10:00:00+24:00", "UTC offset +24:00 is out of range"},
    {"2026-12-01T10:00:00+01:60", "UTC offset +01:60 is out of range"},
    {"2026-12-01T10:00:00+0100", "expected a UTC offset as +HH:MM or -HH:MM"},
    {"2026-12-01T10", "expected a time HH:MM[:SS] after the date"},
    {"2026-12-01T10:00:0", "expected two digits of seconds"},
    {"2026-12-01T10:00:00.Z", "expected digits after '.'"},
    {"2026-12-01T10:00.5Z",
     "unexpected '.5Z' (expected YYYY-MM-DD[THH:MM[:SS[.FRACTION]]][Z|+HH:MM])"},
    {"2026-12-01Z", "unexpected 'Z' (expected YYYY-MM-DD[THH:MM[:SS[.FRACTION]]][Z|+HH:MM])"},
    {"2026-12-01T10:00:00Zjunk",
     "unexpected 'junk' (expected YYYY-MM-DD[THH:MM[:SS[.FRACTION]]][Z|+HH:MM])"},
    {"1h\x1b[2J", "time contains byte 0x1b at offset 2"},
    {"11111111111111111111111111111111111111111111111111111111111111111s",
     "time is longer than 64 characters"},
};

static void check_bads_time(const struct bad *t, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint64_t us = UNTOUCHED;
        char why[AUDIT_FMT_WHY_MAX] = "";
        int r = audit_fmt_parse_time(t[i].text, NOW, &us, why, sizeof(why));
        if (r != -EINVAL || us != UNTOUCHED || strcmp(why, t[i].why) != 0)
            fail_msg("'%s': r=%d us=%llu why '%s', want '%s'", t[i].text, r,
                     (unsigned long long)us, why, t[i].why);
    }
}

static void test_time_bad(void **state) {
    (void)state;
    check_bads_time(time_bads, ARRAY_SIZE(time_bads));
    /* NULL why is fine. */
    uint64_t us;
    assert_int_equal(audit_fmt_parse_time("nope", NOW, &us, NULL, 0), -EINVAL);
    assert_int_equal(audit_fmt_parse_time(NULL, NOW, &us, NULL, 0), -EINVAL);
}

/* Central European time: +01:00 in winter, +02:00 from the last Sunday of
 * March 02:00 to the last Sunday of October 03:00. */
static void test_time_local_dst(void **state) {
    (void)state;
    uint64_t us = UNTOUCHED;
    char why[AUDIT_FMT_WHY_MAX] = "";

    set_tz("CET-1CEST,M3.5.0,M10.5.0/3");
    assert_int_equal(audit_fmt_parse_time("2026-07-01T12:00:00", NOW, &us, why, sizeof(why)), 0);
    assert_int_equal(us, 1782900000 * S);
    assert_int_equal(audit_fmt_parse_time("2026-01-01 12:00", NOW, &us, why, sizeof(why)), 0);
    assert_int_equal(us, 1767265200 * S);
    /* A zone still wins over TZ. */
    assert_int_equal(audit_fmt_parse_time("2026-12-01T10:00:00Z", NOW, &us, why, sizeof(why)), 0);
    assert_int_equal(us, 1796119200 * S);
    /* 02:30 on 2026-03-29 is skipped: refused, with a way out. */
    us = UNTOUCHED;
    assert_int_equal(audit_fmt_parse_time("2026-03-29T02:30", NOW, &us, why, sizeof(why)),
                     -EINVAL);
    assert_int_equal(us, UNTOUCHED);
    assert_string_equal(why, "does not exist in the local time zone (skipped by a daylight "
                             "saving change); give a UTC offset, e.g. 2026-03-29T02:30+01:00");
    /* 02:30 on 2026-10-25 happens twice: one of the two. */
    assert_int_equal(audit_fmt_parse_time("2026-10-25T02:30:00", NOW, &us, why, sizeof(why)), 0);
    assert_true(us == 1792888200 * S || us == 1792891800 * S);
    /* Local midnight of 1970-01-01 is before the epoch east of Greenwich. */
    assert_int_equal(audit_fmt_parse_time("1970-01-01", NOW, &us, why, sizeof(why)), -EINVAL);
    assert_string_equal(why, "before 1970");
    /* A local leap second is checked in UTC: 2017-01-01T00:59:60 CET is one. */
    assert_int_equal(audit_fmt_parse_time("2017-01-01T00:59:60", NOW, &us, why, sizeof(why)), 0);
    assert_int_equal(us, 1483228800 * S);
    assert_int_equal(audit_fmt_parse_time("2016-12-31T23:59:60", NOW, &us, why, sizeof(why)),
                     -EINVAL);
    set_tz("UTC");
}

/* ---- the small parsers ------------------------------------------------------------- */

static void test_port(void **state) {
    (void)state;
    static const struct {
        const char *text;
        uint16_t lo, hi;
    } goods[] = {{"1", 1, 1}, {"53", 53, 53}, {"65535", 65535, 65535}, {"80-90", 80, 90},
                 {"80-80", 80, 80}, {"1-65535", 1, 65535}};
    static const struct bad bads[] = {
        {"0", "port 0 is not a port; omit --port to match any port"},
        {"0-80", "port 0 is not a port; omit --port to match any port"},
        {"70000", "port 70000 is out of range (1-65535)"},
        {"65536", "port 65536 is out of range (1-65535)"},
        {"99999999999999999999", "port 99999999999999999999 is out of range (1-65535)"},
        {"80-70000", "port 70000 is out of range (1-65535)"},
        {"90-80", "the range is reversed; write 80-90"},
        {"80-", "expected a port number (1-65535) or a range N-M"},
        {"-80", "expected a port number (1-65535) or a range N-M"},
        {"+80", "a port has no sign"},
        {"080", "port '080' has a leading zero"},
        {"8o", "port '8o' is not a number"},
        {"80-90-100", "port '90-100' is not a number"},
        {"https", "port 'https' is not a number"},
        {"", "empty port"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(goods); i++) {
        uint16_t lo = 7, hi = 7;
        assert_int_equal(audit_fmt_parse_port(goods[i].text, &lo, &hi, NULL, 0), 0);
        assert_int_equal(lo, goods[i].lo);
        assert_int_equal(hi, goods[i].hi);
    }
    for (size_t i = 0; i < ARRAY_SIZE(bads); i++) {
        uint16_t lo = 7, hi = 7;
        char why[AUDIT_FMT_WHY_MAX] = "";
        int r = audit_fmt_parse_port(bads[i].text, &lo, &hi, why, sizeof(why));
        if (r != -EINVAL || lo != 7 || hi != 7 || strcmp(why, bads[i].why) != 0)
            fail_msg("'%s': r=%d why '%s', want '%s'", bads[i].text, r, why, bads[i].why);
    }
}

static void test_proto(void **state) {
    (void)state;
    static const struct {
        const char *text;
        uint32_t num;
    } goods[] = {{"tcp", 6}, {"udp", 17}, {"icmp", 1}, {"icmpv6", 58}, {"sctp", 132},
                 {"udplite", 136}, {"TCP", 6}, {"Udp", 17}, {"1", 1}, {"47", 47}, {"255", 255}};
    static const struct bad bads[] = {
        {"0", "protocol 0 cannot be searched for (0 means any protocol in a query); omit --proto"},
        {"256", "out of range (1-255)"},
        {"99999999999", "out of range (1-255)"},
        {"-1", "unknown protocol (use tcp, udp, icmp, icmpv6, sctp, udplite or a number 1-255)"},
        {"gre", "unknown protocol (use tcp, udp, icmp, icmpv6, sctp, udplite or a number 1-255)"},
        {"", "empty protocol"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(goods); i++) {
        uint32_t v = 0;
        assert_int_equal(audit_fmt_parse_proto(goods[i].text, &v, NULL, 0), 0);
        assert_int_equal(v, goods[i].num);
    }
    for (size_t i = 0; i < ARRAY_SIZE(bads); i++) {
        uint32_t v = 7;
        char why[AUDIT_FMT_WHY_MAX] = "";
        assert_int_equal(audit_fmt_parse_proto(bads[i].text, &v, why, sizeof(why)), -EINVAL);
        assert_int_equal(v, 7);
        assert_string_equal(why, bads[i].why);
    }
    assert_string_equal(audit_fmt_proto_name(58), "icmpv6");
    assert_null(audit_fmt_proto_name(47));
}

static void test_kind_verdict(void **state) {
    (void)state;
    static const char *const names[] = {"flow", "session", "policy", "request", "gap", "guard"};
    lianyaohu_v1_EventKind k;
    lianyaohu_v1_Verdict v;
    char why[AUDIT_FMT_WHY_MAX];

    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        assert_int_equal(audit_fmt_parse_kind(names[i], &k, NULL, 0), 0);
        assert_int_equal(k, (int)i + 1);
        assert_string_equal(audit_fmt_kind_name((int)i + 1), names[i]);
    }
    k = 0;
    assert_int_equal(audit_fmt_parse_kind("flows", &k, why, sizeof(why)), -EINVAL);
    assert_string_equal(why, "unknown kind (use flow, session, policy, request, gap, guard or dns)");
    assert_int_equal(audit_fmt_parse_kind("Flow", &k, why, sizeof(why)), -EINVAL);
    assert_int_equal(audit_fmt_parse_kind("unspecified", &k, why, sizeof(why)), -EINVAL);
    assert_int_equal(k, 0);
    assert_null(audit_fmt_kind_name(0));
    assert_string_equal(audit_fmt_kind_name(7), "dns");
    assert_null(audit_fmt_kind_name(8));
    assert_null(audit_fmt_kind_name(-1));

    assert_int_equal(audit_fmt_parse_verdict("allowed", &v, NULL, 0), 0);
    assert_int_equal(v, lianyaohu_v1_Verdict_VERDICT_ALLOWED);
    assert_int_equal(audit_fmt_parse_verdict("denied", &v, NULL, 0), 0);
    assert_int_equal(v, lianyaohu_v1_Verdict_VERDICT_DENIED);
    assert_int_equal(audit_fmt_parse_verdict("deny", &v, why, sizeof(why)), -EINVAL);
    assert_string_equal(why, "unknown verdict (use allowed or denied)");
    assert_int_equal(audit_fmt_parse_verdict("", &v, why, sizeof(why)), -EINVAL);
    assert_string_equal(why, "empty verdict");
}

static void test_dst(void **state) {
    (void)state;
    static const struct {
        const char *text;
        size_t len;
        uint8_t addr[16];
        uint32_t prefix;
    } goods[] = {
        {"10.0.0.0/8", 4, {10}, 8},
        {"192.168.1.5", 4, {192, 168, 1, 5}, 32},
        {"0.0.0.0/0", 4, {0}, 0},
        {"fd00::/8", 16, {0xfd}, 8},
        {"2001:db8::/32", 16, {0x20, 0x01, 0x0d, 0xb8}, 32},
        {"[fd00::1]", 16, {0xfd, [15] = 1}, 128},
        {"::/0", 16, {0}, 0},
        {"::1", 16, {[15] = 1}, 128},
    };
    static const struct bad bads[] = {
        {"10.0.0.0/33", "prefix length /33 is out of range for IPv4 (0-32)"},
        {"fd00::/129", "prefix length /129 is out of range for IPv6 (0-128)"},
        {"10.1.2.3/8", "10.1.2.3/8 has host bits set; did you mean 10.0.0.0/8?"},
        {"fd00::1/8", "fd00::1/8 has host bits set; did you mean fd00::/8?"},
        {"10.0.0.1:80", "give the port with --port, not in --dst"},
        {"[fd00::1]:443", "give the port with --port, not in --dst"},
        {"example.com", "'example.com' is not an IP address; rules take addresses, not names"},
        {"", "empty rule; expected ADDR[/PREFIX][:PORT[-PORT]]"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(goods); i++) {
        lianyaohu_v1_DestRule d;
        memset(&d, 0xaa, sizeof(d));
        assert_int_equal(audit_fmt_parse_dst(goods[i].text, &d, NULL, 0), 0);
        assert_int_equal(d.addr.size, goods[i].len);
        assert_memory_equal(d.addr.bytes, goods[i].addr, goods[i].len);
        assert_int_equal(d.prefix_len, goods[i].prefix);
        assert_int_equal(d.port_min, 0);
        assert_int_equal(d.port_max, 0);
    }
    for (size_t i = 0; i < ARRAY_SIZE(bads); i++) {
        lianyaohu_v1_DestRule d = {.prefix_len = 77};
        char why[AUDIT_FMT_WHY_MAX] = "";
        int r = audit_fmt_parse_dst(bads[i].text, &d, why, sizeof(why));
        if (r != -EINVAL || d.prefix_len != 77 || strcmp(why, bads[i].why) != 0)
            fail_msg("'%s': r=%d why '%s', want '%s'", bads[i].text, r, why, bads[i].why);
    }
}

static void test_uid_limit_session(void **state) {
    (void)state;
    uint32_t v = 7;
    char why[AUDIT_FMT_WHY_MAX];
    char id[40] = "untouched";

    assert_int_equal(audit_fmt_parse_uid("0", &v, NULL, 0), 0);
    assert_int_equal(v, 0);
    assert_int_equal(audit_fmt_parse_uid("4294967294", &v, NULL, 0), 0);
    assert_int_equal(v, 4294967294u);
    v = 7;
    assert_int_equal(audit_fmt_parse_uid("4294967295", &v, why, sizeof(why)), -EINVAL);
    assert_string_equal(why, "out of range (0-4294967294)");
    assert_int_equal(audit_fmt_parse_uid("-1", &v, why, sizeof(why)), -EINVAL);
    assert_string_equal(why, "not a uid or a user name");
    assert_int_equal(audit_fmt_parse_uid("root", &v, why, sizeof(why)), -EINVAL);
    assert_int_equal(v, 7);

    assert_int_equal(audit_fmt_parse_limit("1", &v, NULL, 0), 0);
    assert_int_equal(v, 1);
    assert_int_equal(audit_fmt_parse_limit("4294967295", &v, NULL, 0), 0);
    assert_int_equal(v, 4294967295u);
    v = 7;
    assert_int_equal(audit_fmt_parse_limit("0", &v, why, sizeof(why)), -EINVAL);
    assert_string_equal(why, "limit 0 would show nothing; omit --limit for no limit");
    assert_int_equal(audit_fmt_parse_limit("4294967296", &v, why, sizeof(why)), -EINVAL);
    assert_string_equal(why, "out of range (1-4294967295)");
    assert_int_equal(audit_fmt_parse_limit("ten", &v, why, sizeof(why)), -EINVAL);
    assert_string_equal(why, "not a number");
    assert_int_equal(v, 7);

    assert_int_equal(audit_fmt_parse_session("0123456789abcdef", id, sizeof(id), NULL, 0), 0);
    assert_string_equal(id, "0123456789abcdef");
    assert_int_equal(audit_fmt_parse_session("s:fedcba9876543210", id, sizeof(id), NULL, 0), 0);
    assert_string_equal(id, "fedcba9876543210");
    assert_int_equal(audit_fmt_parse_session("0123456789ABCDEF", id, sizeof(id), NULL, 0), 0);
    assert_string_equal(id, "0123456789abcdef");
    assert_int_equal(audit_fmt_parse_session("1f", id, sizeof(id), NULL, 0), 0);
    assert_string_equal(id, "1f");
    strcpy(id, "untouched");
    static const struct bad bads[] = {
        {"0123456789abcdef0", "not a session id or a prefix of one (up to 16 hexadecimal digits, as `lyh sessions` shows them)"},
        {"s:", "not a session id or a prefix of one (up to 16 hexadecimal digits, as `lyh sessions` shows them)"},
        {"0123456789abcdeg", "not a session id or a prefix of one (up to 16 hexadecimal digits, as `lyh sessions` shows them)"},
        {"a b", "not a session id or a prefix of one (up to 16 hexadecimal digits, as `lyh sessions` shows them)"},
        {"../x", "not a session id or a prefix of one (up to 16 hexadecimal digits, as `lyh sessions` shows them)"},
        {"S:0123456789abcdef", "not a session id or a prefix of one (up to 16 hexadecimal digits, as `lyh sessions` shows them)"},
        {"", "empty session id"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bads); i++) {
        assert_int_equal(audit_fmt_parse_session(bads[i].text, id, sizeof(id), why, sizeof(why)),
                         -EINVAL);
        assert_string_equal(why, bads[i].why);
    }
    char small[4];
    assert_int_equal(audit_fmt_parse_session("abcd", small, sizeof(small), why, sizeof(why)),
                     -EINVAL);
    assert_string_equal(why, "too long");
    assert_string_equal(id, "untouched");
}

/* ---- events ---------------------------------------------------------------------------- */

/* 2026-12-01T10:00:00Z */
#define T0 (1796119200ull * S)

static lianyaohu_v1_AuditEvent *new_event(void) {
    lianyaohu_v1_AuditEvent *e = calloc(1, sizeof(*e));
    assert_non_null(e);
    return e;
}

static void set_bytes(pb_size_t *size, uint8_t *bytes, size_t n, const uint8_t *src) {
    *size = (pb_size_t)n;
    if (n > 0)
        memcpy(bytes, src, n);
}
/* src_addr and dst_addr have distinct nanopb types of the same shape; the
 * bytes may be a compound literal (commas). */
#define set_addr(a, n, ...) set_bytes(&(a)->size, (a)->bytes, (n), __VA_ARGS__)

/* The example of the brief: a denied DNS query to the LAN. */
static lianyaohu_v1_AuditEvent *flow_v4(void) {
    lianyaohu_v1_AuditEvent *e = new_event();
    e->id = 42;
    e->time_unix_us = T0 + 123456;
    e->kind = lianyaohu_v1_EventKind_EVENT_KIND_FLOW;
    strcpy(e->session_id, "0123456789abcdef");
    e->has_uid = true;
    e->uid = 1000;
    e->verdict = lianyaohu_v1_Verdict_VERDICT_DENIED;
    e->family = AF_INET;
    e->protocol = 17;
    set_addr(&e->src_addr, 4, (const uint8_t[]){10, 0, 0, 1});
    set_addr(&e->dst_addr, 4, (const uint8_t[]){192, 168, 1, 5});
    e->src_port = 5353;
    e->dst_port = 53;
    strcpy(e->interface, "eth0");
    return e;
}

static lianyaohu_v1_AuditEvent *flow_v6(void) {
    lianyaohu_v1_AuditEvent *e = new_event();
    e->id = 7;
    e->time_unix_us = T0 + 999999;
    e->kind = lianyaohu_v1_EventKind_EVENT_KIND_FLOW;
    strcpy(e->session_id, "00000000000000ff");
    e->has_uid = true;
    e->uid = 65534;
    e->verdict = lianyaohu_v1_Verdict_VERDICT_ALLOWED;
    e->family = AF_INET6;
    e->protocol = 6;
    set_addr(&e->src_addr, 16,
             (const uint8_t[]){0xfd, 0, [15] = 2});
    set_addr(&e->dst_addr, 16, (const uint8_t[]){0x20, 0x01, 0x0d, 0xb8, [15] = 1});
    e->src_port = 40000;
    e->dst_port = 443;
    strcpy(e->interface, "wg0");
    return e;
}

/* ICMP: no ports; no uid, no session (the base chain's catch-all). */
static lianyaohu_v1_AuditEvent *flow_icmp(void) {
    lianyaohu_v1_AuditEvent *e = new_event();
    e->id = 8;
    e->time_unix_us = T0;
    e->kind = lianyaohu_v1_EventKind_EVENT_KIND_FLOW;
    e->verdict = lianyaohu_v1_Verdict_VERDICT_DENIED;
    e->family = AF_INET;
    e->protocol = 1;
    set_addr(&e->src_addr, 4, (const uint8_t[]){10, 8, 0, 2});
    set_addr(&e->dst_addr, 4, (const uint8_t[]){1, 1, 1, 1});
    return e;
}

static lianyaohu_v1_AuditEvent *session_end(void) {
    lianyaohu_v1_AuditEvent *e = new_event();
    e->id = 43;
    e->time_unix_us = T0;
    e->kind = lianyaohu_v1_EventKind_EVENT_KIND_SESSION;
    strcpy(e->action, "end");
    strcpy(e->session_id, "0123456789abcdef");
    e->has_uid = true;
    e->uid = 1000;
    strcpy(e->detail, "exit=0 duration_ms=5000 argv0=\"my agent\"");
    e->allowed_packets = 10;
    e->allowed_bytes = 2000;
    e->denied_packets = 1;
    e->denied_bytes = 60;
    return e;
}

static lianyaohu_v1_AuditEvent *gap(void) {
    lianyaohu_v1_AuditEvent *e = new_event();
    e->id = 44;
    e->time_unix_us = T0;
    e->kind = lianyaohu_v1_EventKind_EVENT_KIND_GAP;
    e->missed = 17;
    strcpy(e->detail, "why=ratelimit");
    return e;
}

/* The gap retention writes (storage/audit_db.c) and the request rate limit's
 * (daemon/audit.c), as lyhd words them. */
static lianyaohu_v1_AuditEvent *gap_retention(void) {
    lianyaohu_v1_AuditEvent *e = gap();
    e->id = 48;
    strcpy(e->action, "retention");
    e->has_uid = true;
    e->uid = 1000;
    e->missed = 2000;
    strcpy(e->detail, "reason=\"retention: older than 90 days\" max_age_days=90 flow=1990 "
                      "session=10 oldest=2026-09-01T10:00:00Z newest=2026-09-01T10:05:00Z");
    return e;
}

static lianyaohu_v1_AuditEvent *gap_requests(void) {
    lianyaohu_v1_AuditEvent *e = gap();
    e->id = 49;
    strcpy(e->action, "requests");
    e->has_uid = true;
    e->uid = 1000;
    e->missed = 95;
    strcpy(e->detail, "reason=\"request records over the rate limit\" dropped_by_uid_limit=95 "
                      "dropped_by_global_limit=0");
    return e;
}

/* Everything a hostile detail can hold: CSV and JSON specials, control bytes,
 * DEL, an invalid byte, valid UTF-8 (é) and a bidi override (U+202E). */
#define NASTY "a,b \"q\"\nline\x01\x7f\xff \xc3\xa9 \xe2\x80\xae tab\t\\"

static lianyaohu_v1_AuditEvent *request_nasty(void) {
    lianyaohu_v1_AuditEvent *e = new_event();
    e->id = 45;
    e->time_unix_us = T0;
    e->kind = lianyaohu_v1_EventKind_EVENT_KIND_REQUEST;
    strcpy(e->action, "refused");
    e->has_uid = true;
    e->uid = 0;
    strcpy(e->detail, NASTY);
    return e;
}

static lianyaohu_v1_AuditEvent *guard_install(void) {
    lianyaohu_v1_AuditEvent *e = new_event();
    e->id = 46;
    e->time_unix_us = T0;
    e->kind = lianyaohu_v1_EventKind_EVENT_KIND_GUARD;
    strcpy(e->action, "install");
    e->has_uid = true;
    e->uid = 1000;
    strcpy(e->interface, "tun0");
    strcpy(e->detail, "chain=LYH-U-1000 refcount=1");
    return e;
}

/* A kind this client does not know yet, with a flow field set. */
static lianyaohu_v1_AuditEvent *future_kind(void) {
    lianyaohu_v1_AuditEvent *e = new_event();
    e->id = 47;
    e->time_unix_us = T0;
    e->kind = 9;
    e->protocol = 200;
    return e;
}

struct golden {
    lianyaohu_v1_AuditEvent *(*make)(void);
    const char *table, *json, *csv, *monitor;
};

static const struct golden goldens[] = {
    {flow_v4,
     "2026-12-01 10:00:00.123  flow     denied    s:0123456789abcdef  uid 1000   udp      "
     "10.0.0.1:5353 -> 192.168.1.5:53                  eth0",
     "{\"id\":42,\"time\":\"2026-12-01T10:00:00.123456Z\",\"time_unix_us\":1796119200123456,"
     "\"kind\":\"flow\",\"action\":\"\",\"session\":\"0123456789abcdef\",\"uid\":1000,"
     "\"verdict\":\"denied\",\"family\":\"ipv4\",\"protocol\":\"udp\",\"src\":\"10.0.0.1\","
     "\"dst\":\"192.168.1.5\",\"sport\":5353,\"dport\":53,\"interface\":\"eth0\",\"detail\":\"\"}",
     "42,2026-12-01T10:00:00.123456Z,1796119200123456,flow,,0123456789abcdef,1000,denied,ipv4,"
     "udp,10.0.0.1,192.168.1.5,5353,53,eth0,,,,,,",
     "10:00:00 denied udp 192.168.1.5:53 (LAN address)"},
    {flow_v6,
     "2026-12-01 10:00:00.999  flow     allowed   s:00000000000000ff  uid 65534  tcp      "
     "[fd00::2]:40000 -> [2001:db8::1]:443             wg0",
     "{\"id\":7,\"time\":\"2026-12-01T10:00:00.999999Z\",\"time_unix_us\":1796119200999999,"
     "\"kind\":\"flow\",\"action\":\"\",\"session\":\"00000000000000ff\",\"uid\":65534,"
     "\"verdict\":\"allowed\",\"family\":\"ipv6\",\"protocol\":\"tcp\",\"src\":\"fd00::2\","
     "\"dst\":\"2001:db8::1\",\"sport\":40000,\"dport\":443,\"interface\":\"wg0\",\"detail\":\"\"}",
     "7,2026-12-01T10:00:00.999999Z,1796119200999999,flow,,00000000000000ff,65534,allowed,ipv6,"
     "tcp,fd00::2,2001:db8::1,40000,443,wg0,,,,,,",
     "10:00:00 allowed tcp [2001:db8::1]:443"},
    {flow_icmp,
     "2026-12-01 10:00:00.000  flow     denied    -                   uid -      icmp     "
     "10.8.0.2 -> 1.1.1.1                              -",
     "{\"id\":8,\"time\":\"2026-12-01T10:00:00.000000Z\",\"time_unix_us\":1796119200000000,"
     "\"kind\":\"flow\",\"action\":\"\",\"session\":null,\"uid\":null,\"verdict\":\"denied\","
     "\"family\":\"ipv4\",\"protocol\":\"icmp\",\"src\":\"10.8.0.2\",\"dst\":\"1.1.1.1\","
     "\"sport\":0,\"dport\":0,\"interface\":\"\",\"detail\":\"\"}",
     "8,2026-12-01T10:00:00.000000Z,1796119200000000,flow,,,,denied,ipv4,icmp,10.8.0.2,1.1.1.1,"
     "0,0,,,,,,,",
     "10:00:00 denied icmp 1.1.1.1 (policy deny)"},
    {session_end,
     "2026-12-01 10:00:00.000  session  end       s:0123456789abcdef  uid 1000   exit=0 "
     "duration_ms=5000 argv0=\"my agent\" allowed_packets=10 allowed_bytes=2000 "
     "denied_packets=1 denied_bytes=60",
     "{\"id\":43,\"time\":\"2026-12-01T10:00:00.000000Z\",\"time_unix_us\":1796119200000000,"
     "\"kind\":\"session\",\"action\":\"end\",\"session\":\"0123456789abcdef\",\"uid\":1000,"
     "\"detail\":\"exit=0 duration_ms=5000 argv0=\\\"my agent\\\"\",\"allowed_packets\":10,"
     "\"allowed_bytes\":2000,\"denied_packets\":1,\"denied_bytes\":60}",
     "43,2026-12-01T10:00:00.000000Z,1796119200000000,session,end,0123456789abcdef,1000,,,,,,,,,"
     "\"exit=0 duration_ms=5000 argv0=\"\"my agent\"\"\",10,2000,1,60,",
     "10:00:00 session end exit=0 duration_ms=5000 argv0=\"my agent\""},
    {gap,
     "2026-12-01 10:00:00.000  gap      -         -                   uid -      missed=17 "
     "why=ratelimit",
     "{\"id\":44,\"time\":\"2026-12-01T10:00:00.000000Z\",\"time_unix_us\":1796119200000000,"
     "\"kind\":\"gap\",\"action\":\"\",\"session\":null,\"uid\":null,\"detail\":\"why=ratelimit\","
     "\"missed\":17}",
     "44,2026-12-01T10:00:00.000000Z,1796119200000000,gap,,,,,,,,,,,,why=ratelimit,,,,,17",
     "10:00:00 gap: 17 flow events were not logged (why=ratelimit)"},
    {gap_retention,
     "2026-12-01 10:00:00.000  gap      retention  -                   uid 1000   removed=2000 "
     "reason=\"retention: older than 90 days\" max_age_days=90 flow=1990 session=10 "
     "oldest=2026-09-01T10:00:00Z newest=2026-09-01T10:05:00Z",
     "{\"id\":48,\"time\":\"2026-12-01T10:00:00.000000Z\",\"time_unix_us\":1796119200000000,"
     "\"kind\":\"gap\",\"action\":\"retention\",\"session\":null,\"uid\":1000,"
     "\"detail\":\"reason=\\\"retention: older than 90 days\\\" max_age_days=90 flow=1990 "
     "session=10 oldest=2026-09-01T10:00:00Z newest=2026-09-01T10:05:00Z\",\"missed\":2000}",
     "48,2026-12-01T10:00:00.000000Z,1796119200000000,gap,retention,,1000,,,,,,,,,"
     "\"reason=\"\"retention: older than 90 days\"\" max_age_days=90 flow=1990 session=10 "
     "oldest=2026-09-01T10:00:00Z newest=2026-09-01T10:05:00Z\",,,,,2000",
     "10:00:00 gap: 2000 records removed by retention (reason=\"retention: older than 90 days\" "
     "max_age_days=90 flow=1990 session=10 oldest=2026-09-01T10:00:00Z "
     "newest=2026-09-01T10:05:00Z)"},
    {gap_requests,
     "2026-12-01 10:00:00.000  gap      requests  -                   uid 1000   missed=95 "
     "reason=\"request records over the rate limit\" dropped_by_uid_limit=95 "
     "dropped_by_global_limit=0",
     "{\"id\":49,\"time\":\"2026-12-01T10:00:00.000000Z\",\"time_unix_us\":1796119200000000,"
     "\"kind\":\"gap\",\"action\":\"requests\",\"session\":null,\"uid\":1000,"
     "\"detail\":\"reason=\\\"request records over the rate limit\\\" "
     "dropped_by_uid_limit=95 dropped_by_global_limit=0\",\"missed\":95}",
     "49,2026-12-01T10:00:00.000000Z,1796119200000000,gap,requests,,1000,,,,,,,,,"
     "\"reason=\"\"request records over the rate limit\"\" dropped_by_uid_limit=95 "
     "dropped_by_global_limit=0\",,,,,95",
     "10:00:00 gap: 95 request records were not logged (reason=\"request records over the rate "
     "limit\" dropped_by_uid_limit=95 dropped_by_global_limit=0)"},
    {request_nasty,
     "2026-12-01 10:00:00.000  request  refused   -                   uid 0      "
     "a,b \"q\"\\x0aline\\x01\\x7f\\xff \xc3\xa9 \\u202e tab\\x09\\",
     "{\"id\":45,\"time\":\"2026-12-01T10:00:00.000000Z\",\"time_unix_us\":1796119200000000,"
     "\"kind\":\"request\",\"action\":\"refused\",\"session\":null,\"uid\":0,"
     "\"detail\":\"a,b \\\"q\\\"\\nline\\u0001\\u007f\\ufffd \xc3\xa9 \xe2\x80\xae tab\\t\\\\\"}",
     "45,2026-12-01T10:00:00.000000Z,1796119200000000,request,refused,,0,,,,,,,,,"
     "\"a,b \"\"q\"\"\nline\x01\x7f\xff \xc3\xa9 \xe2\x80\xae tab\t\\\",,,,,",
     "10:00:00 request refused a,b \"q\"\\x0aline\\x01\\x7f\\xff \xc3\xa9 \\u202e tab\\x09\\"},
    {guard_install,
     "2026-12-01 10:00:00.000  guard    install   -                   uid 1000   "
     "chain=LYH-U-1000 refcount=1",
     "{\"id\":46,\"time\":\"2026-12-01T10:00:00.000000Z\",\"time_unix_us\":1796119200000000,"
     "\"kind\":\"guard\",\"action\":\"install\",\"session\":null,\"uid\":1000,"
     "\"interface\":\"tun0\",\"detail\":\"chain=LYH-U-1000 refcount=1\"}",
     "46,2026-12-01T10:00:00.000000Z,1796119200000000,guard,install,,1000,,,,,,,,tun0,"
     "chain=LYH-U-1000 refcount=1,,,,,",
     "10:00:00 guard install chain=LYH-U-1000 refcount=1"},
    {future_kind,
     "2026-12-01 10:00:00.000  kind9    -         -                   uid -",
     "{\"id\":47,\"time\":\"2026-12-01T10:00:00.000000Z\",\"time_unix_us\":1796119200000000,"
     "\"kind\":9,\"action\":\"\",\"session\":null,\"uid\":null,\"protocol\":200,\"detail\":\"\"}",
     "47,2026-12-01T10:00:00.000000Z,1796119200000000,9,,,,,,200,,,,,,,,,,,",
     "10:00:00 kind9"},
};

static void test_golden(void **state) {
    (void)state;
    static char buf[AUDIT_FMT_LINE_MAX];

    for (size_t i = 0; i < ARRAY_SIZE(goldens); i++) {
        _cleanup_free_ lianyaohu_v1_AuditEvent *e = goldens[i].make();
        assert_int_equal(audit_fmt_table_line(e, buf, sizeof(buf)), 0);
        assert_string_equal(buf, goldens[i].table);
        assert_int_equal(audit_fmt_json_line(e, buf, sizeof(buf)), 0);
        assert_string_equal(buf, goldens[i].json);
        assert_int_equal(audit_fmt_csv_line(e, buf, sizeof(buf)), 0);
        assert_string_equal(buf, goldens[i].csv);
        assert_int_equal(audit_fmt_monitor_line(e, buf, sizeof(buf)), 0);
        assert_string_equal(buf, goldens[i].monitor);
    }
}

/* The table's columns start at the same offsets for every flow line. */
static void test_table_columns(void **state) {
    (void)state;
    static char a[AUDIT_FMT_LINE_MAX], b[AUDIT_FMT_LINE_MAX];
    _cleanup_free_ lianyaohu_v1_AuditEvent *e1 = flow_v4();
    _cleanup_free_ lianyaohu_v1_AuditEvent *e2 = flow_icmp();

    assert_int_equal(audit_fmt_table_line(e1, a, sizeof(a)), 0);
    assert_int_equal(audit_fmt_table_line(e2, b, sizeof(b)), 0);
    static const size_t cols[] = {0, 25, 34, 44, 64, 75, 84, 133};
    for (size_t i = 1; i < ARRAY_SIZE(cols); i++) {
        assert_true(a[cols[i] - 1] == ' ' && a[cols[i]] != ' ');
        assert_true(b[cols[i] - 1] == ' ' && b[cols[i]] != ' ');
    }
}

/* Local time in the table and the monitor line. */
static void test_local_time(void **state) {
    (void)state;
    static char buf[AUDIT_FMT_LINE_MAX];
    _cleanup_free_ lianyaohu_v1_AuditEvent *e = flow_v4();

    set_tz("CET-1CEST,M3.5.0,M10.5.0/3");
    assert_int_equal(audit_fmt_table_line(e, buf, sizeof(buf)), 0);
    assert_memory_equal(buf, "2026-12-01 11:00:00.123  ", 25);
    assert_int_equal(audit_fmt_json_line(e, buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "\"time\":\"2026-12-01T10:00:00.123456Z\"")); /* JSON is UTC */
    assert_int_equal(audit_fmt_monitor_line(e, buf, sizeof(buf)), 0);
    assert_memory_equal(buf, "11:00:00 ", 9);
    set_tz("UTC");
}

/* A refusal in a session with a domain allowlist: the monitor says why, from
 * the flow's detail; the table line carries the detail. */
static void test_monitor_dns_reasons(void **state) {
    (void)state;
    static char buf[AUDIT_FMT_LINE_MAX];
    _cleanup_free_ lianyaohu_v1_AuditEvent *e = flow_v4();

    set_addr(&e->dst_addr, 4, (const uint8_t[]){11, 77, 1, 5});
    e->protocol = 6;
    e->dst_port = 443;
    strcpy(e->interface, "tun0");
    strcpy(e->detail, "dns=none");
    assert_int_equal(audit_fmt_monitor_line(e, buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "(no allowed name resolved to it in this session)"));
    strcpy(e->detail, "dns=expired names=api.example.com expired_s_ago=12");
    assert_int_equal(audit_fmt_monitor_line(e, buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "(the mapping for api.example.com expired 12 s ago)"));
    assert_int_equal(audit_fmt_table_line(e, buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "tun0  dns=expired names=api.example.com expired_s_ago=12"));
    /* a LAN address keeps its own reason */
    set_addr(&e->dst_addr, 4, (const uint8_t[]){192, 168, 1, 5});
    strcpy(e->detail, "dns=none");
    assert_int_equal(audit_fmt_monitor_line(e, buf, sizeof(buf)), 0);
    assert_null(strstr(buf, "no allowed name"));
}

/* ---- JSON read back ------------------------------------------------------------------- */

/* A strict reader for the flat objects we write: string, unsigned number and
 * null values; RFC 8259 escapes; the whole line must be consumed; every byte
 * of the line valid UTF-8 without raw control characters. Collects keys in
 * order and the decoded value of `want`. */
struct jr {
    const char *p;
    char keys[32][32];
    size_t n_keys;
    const char *want;
    char got[8192];
    bool found;
};

static bool jr_string(struct jr *j, char *out, size_t outlen) {
    size_t n = 0;
    if (*j->p++ != '"')
        return false;
    for (;;) {
        unsigned char c = (unsigned char)*j->p++;
        uint32_t cp;
        if (c == '"')
            break;
        if (c < 0x20)
            return false;
        if (c == '\\') {
            char e = *j->p++;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u': {
                char hex[5] = {0};
                memcpy(hex, j->p, 4);
                char *end;
                cp = (uint32_t)strtoul(hex, &end, 16);
                if (end != hex + 4)
                    return false;
                j->p += 4;
                break;
            }
            default: return false;
            }
            /* Re-encode as UTF-8. */
            char u[4];
            size_t ul;
            if (cp < 0x80) {
                u[0] = (char)cp;
                ul = 1;
            } else if (cp < 0x800) {
                u[0] = (char)(0xc0 | cp >> 6);
                u[1] = (char)(0x80 | (cp & 0x3f));
                ul = 2;
            } else {
                if (cp >= 0xd800 && cp <= 0xdfff)
                    return false; /* we never write surrogates */
                u[0] = (char)(0xe0 | cp >> 12);
                u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
                u[2] = (char)(0x80 | (cp & 0x3f));
                ul = 3;
            }
            if (n + ul >= outlen)
                return false;
            memcpy(out + n, u, ul);
            n += ul;
            continue;
        }
        /* Raw bytes: check UTF-8 structure. */
        size_t len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
                                   : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (len == 0)
            return false;
        if (n + len >= outlen)
            return false;
        out[n++] = (char)c;
        for (size_t i = 1; i < len; i++) {
            unsigned char cc = (unsigned char)*j->p++;
            if ((cc & 0xc0) != 0x80)
                return false;
            out[n++] = (char)cc;
        }
    }
    out[n] = '\0';
    return true;
}

static bool json_read(struct jr *j, const char *line) {
    static char val[AUDIT_FMT_LINE_MAX];
    j->p = line;
    j->n_keys = 0;
    j->found = false;
    if (*j->p++ != '{')
        return false;
    if (*j->p == '}')
        return *++j->p == '\0';
    for (;;) {
        if (j->n_keys == ARRAY_SIZE(j->keys) ||
            !jr_string(j, j->keys[j->n_keys], sizeof(j->keys[0])))
            return false;
        bool is_want = j->want && strcmp(j->keys[j->n_keys], j->want) == 0;
        for (size_t i = 0; i < j->n_keys; i++)
            if (strcmp(j->keys[i], j->keys[j->n_keys]) == 0)
                return false; /* duplicate key */
        j->n_keys++;
        if (*j->p++ != ':')
            return false;
        if (*j->p == '"') {
            if (!jr_string(j, val, sizeof(val)))
                return false;
            if (is_want) {
                strcpy(j->got, val);
                j->found = true;
            }
        } else if (strncmp(j->p, "null", 4) == 0) {
            j->p += 4;
        } else if (*j->p >= '0' && *j->p <= '9') {
            if (*j->p == '0' && j->p[1] >= '0' && j->p[1] <= '9')
                return false;
            while (*j->p >= '0' && *j->p <= '9')
                j->p++;
        } else {
            return false;
        }
        if (*j->p == ',') {
            j->p++;
            continue;
        }
        if (*j->p++ != '}')
            return false;
        return *j->p == '\0';
    }
}

static void expect_keys(struct jr *j, const char *const *keys, size_t n) {
    assert_int_equal(j->n_keys, n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(j->keys[i], keys[i]);
}

static void test_json_read_back(void **state) {
    (void)state;
    static char buf[AUDIT_FMT_LINE_MAX];
    static struct jr j;
    static const char *const flow_keys[] = {
        "id", "time", "time_unix_us", "kind", "action", "session", "uid", "verdict", "family",
        "protocol", "src", "dst", "sport", "dport", "interface", "detail"};
    static const char *const gap_keys[] = {"id", "time", "time_unix_us", "kind", "action",
                                           "session", "uid", "detail", "missed"};

    for (size_t i = 0; i < ARRAY_SIZE(goldens); i++) {
        _cleanup_free_ lianyaohu_v1_AuditEvent *e = goldens[i].make();
        assert_int_equal(audit_fmt_json_line(e, buf, sizeof(buf)), 0);
        j.want = "detail";
        if (!json_read(&j, buf))
            fail_msg("line %zu is not valid JSON: %s", i, buf);
        assert_true(j.found);
        if (e->kind == lianyaohu_v1_EventKind_EVENT_KIND_FLOW)
            expect_keys(&j, flow_keys, ARRAY_SIZE(flow_keys));
        if (e->kind == lianyaohu_v1_EventKind_EVENT_KIND_GAP)
            expect_keys(&j, gap_keys, ARRAY_SIZE(gap_keys));
        if (e->kind == lianyaohu_v1_EventKind_EVENT_KIND_REQUEST)
            /* Every byte comes back except the invalid one (U+FFFD). */
            assert_string_equal(j.got,
                                "a,b \"q\"\nline\x01\x7f\xef\xbf\xbd \xc3\xa9 \xe2\x80\xae tab\t\\");
        else
            assert_string_equal(j.got, e->detail);
    }
}

/* ---- CSV read back ------------------------------------------------------------------------ */

/* One RFC 4180 record (without its CRLF) into fields. */
static size_t csv_read(const char *line, char fields[][8192], size_t max) {
    size_t n = 0;
    const char *p = line;
    for (;;) {
        assert_true(n < max);
        char *out = fields[n++];
        size_t o = 0;
        if (*p == '"') {
            p++;
            for (;;) {
                assert_true(*p != '\0'); /* unterminated quote */
                if (*p == '"' && p[1] == '"') {
                    out[o++] = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    out[o++] = *p++;
                }
            }
            assert_true(*p == ',' || *p == '\0');
        } else {
            while (*p && *p != ',') {
                assert_true(*p != '"' && *p != '\n' && *p != '\r');
                out[o++] = *p++;
            }
        }
        out[o] = '\0';
        if (*p == '\0')
            return n;
        p++;
    }
}

static void test_csv_read_back(void **state) {
    (void)state;
    static char buf[AUDIT_FMT_LINE_MAX];
    static char f[32][8192];

    /* The header: the JSON names, all 21. */
    size_t n = csv_read(audit_fmt_csv_header(), f, 32);
    assert_int_equal(n, 21);
    assert_string_equal(f[0], "id");
    assert_string_equal(f[15], "detail");
    assert_string_equal(f[20], "missed");

    for (size_t i = 0; i < ARRAY_SIZE(goldens); i++) {
        _cleanup_free_ lianyaohu_v1_AuditEvent *e = goldens[i].make();
        assert_int_equal(audit_fmt_csv_line(e, buf, sizeof(buf)), 0);
        assert_int_equal(csv_read(buf, f, 32), 21);
        assert_string_equal(f[15], e->detail); /* bytes pass through unchanged */
        char id[32];
        snprintf(id, sizeof(id), "%llu", (unsigned long long)e->id);
        assert_string_equal(f[0], id);
    }

    /* Quoting: comma, quote, CR, LF each force quotes; nothing else does. */
    _cleanup_free_ lianyaohu_v1_AuditEvent *e = session_end();
    static const struct {
        const char *detail, *cell;
    } q[] = {
        {"plain key=value", "plain key=value"},
        {"a,b", "\"a,b\""},
        {"say \"hi\"", "\"say \"\"hi\"\"\""},
        {"two\nlines", "\"two\nlines\""},
        {"cr\rhere", "\"cr\rhere\""},
        {"\"", "\"\"\"\""},
        {"", ""},
        {" lead and trail ", " lead and trail "},
    };
    for (size_t i = 0; i < ARRAY_SIZE(q); i++) {
        strcpy(e->detail, q[i].detail);
        assert_int_equal(audit_fmt_csv_line(e, buf, sizeof(buf)), 0);
        char want[256];
        snprintf(want, sizeof(want),
                 "43,2026-12-01T10:00:00.000000Z,1796119200000000,session,end,0123456789abcdef,"
                 "1000,,,,,,,,,%s,10,2000,1,60,",
                 q[i].cell);
        assert_string_equal(buf, want);
        assert_int_equal(csv_read(buf, f, 32), 21);
        assert_string_equal(f[15], q[i].detail);
    }
}

/* ---- bounds ---------------------------------------------------------------------------------- */

typedef int (*render_fn)(const lianyaohu_v1_AuditEvent *ev, char *buf, size_t len);

static void check_exact_fit(render_fn fn, const lianyaohu_v1_AuditEvent *e) {
    static char big[AUDIT_FMT_LINE_MAX];
    _cleanup_free_ char *b = NULL;

    assert_int_equal(fn(e, big, sizeof(big)), 0);
    size_t n = strlen(big);
    b = malloc(n + 1);
    assert_non_null(b);
    assert_int_equal(fn(e, b, n + 1), 0);
    assert_string_equal(b, big);
    assert_int_equal(fn(e, b, n), -ENOSPC);
    assert_int_equal(fn(e, b, 1), -ENOSPC);
    assert_int_equal(fn(e, b, 0), -ENOSPC);
}

static void test_bounds(void **state) {
    (void)state;
    static const render_fn fns[] = {audit_fmt_table_line, audit_fmt_json_line,
                                    audit_fmt_csv_line, audit_fmt_monitor_line};
    static char buf[AUDIT_FMT_LINE_MAX];

    for (size_t g = 0; g < ARRAY_SIZE(goldens); g++) {
        _cleanup_free_ lianyaohu_v1_AuditEvent *e = goldens[g].make();
        for (size_t i = 0; i < ARRAY_SIZE(fns); i++)
            check_exact_fit(fns[i], e);
    }
    /* The worst event the client can decode: every string full of bytes that
     * expand most (0x01 is \u0001 in JSON, \x01 in the table). */
    _cleanup_free_ lianyaohu_v1_AuditEvent *w = flow_v6();
    memset(w->detail, 0x01, sizeof(w->detail) - 1);
    memset(w->session_id, 0x01, sizeof(w->session_id) - 1);
    memset(w->action, 0x01, sizeof(w->action) - 1);
    memset(w->interface, 0x01, sizeof(w->interface) - 1);
    w->id = w->time_unix_us = UINT64_MAX;
    w->allowed_packets = w->allowed_bytes = w->denied_packets = w->denied_bytes = w->missed =
        UINT64_MAX;
    w->uid = UINT32_MAX;
    w->src_port = w->dst_port = UINT32_MAX;
    for (int kind = 1; kind <= 6; kind++) {
        w->kind = kind;
        for (size_t i = 0; i < ARRAY_SIZE(fns); i++)
            assert_int_equal(fns[i](w, buf, sizeof(buf)), 0);
    }
    memset(w->detail, 0xff, sizeof(w->detail) - 1); /* \ufffd each */
    assert_int_equal(audit_fmt_json_line(w, buf, sizeof(buf)), 0);
    static struct jr j;
    j.want = NULL;
    assert_true(json_read(&j, buf));
}

/* ---- monitor ------------------------------------------------------------------------------------ */

static void test_monitor(void **state) {
    (void)state;
    static char buf[AUDIT_FMT_LINE_MAX];
    static const struct {
        size_t len;
        uint8_t addr[16];
        uint32_t proto, port;
        const char *iface, *detail;
        const char *want; /* without ctx */
        const char *want_ctx; /* vpn tun0, IPv6 blocked */
    } t[] = {
        {4, {192, 168, 1, 5}, 6, 443, "eth0", "", "10:00:00 denied tcp 192.168.1.5:443 (LAN address)",
         "10:00:00 denied tcp 192.168.1.5:443 (LAN address)"},
        {4, {10, 1, 2, 3}, 17, 53, "", "", "10:00:00 denied udp 10.1.2.3:53 (LAN address)", NULL},
        {4, {172, 31, 0, 1}, 6, 22, "", "", "10:00:00 denied tcp 172.31.0.1:22 (LAN address)", NULL},
        {4, {100, 100, 100, 100}, 17, 53, "", "",
         "10:00:00 denied udp 100.100.100.100:53 (LAN address (carrier-grade NAT range))", NULL},
        {4, {127, 0, 0, 53}, 17, 53, "lo", "", "10:00:00 denied udp 127.0.0.53:53 (loopback)", NULL},
        {4, {169, 254, 169, 254}, 6, 80, "", "",
         "10:00:00 denied tcp 169.254.169.254:80 (link-local address)", NULL},
        {4, {224, 0, 0, 251}, 17, 5353, "", "", "10:00:00 denied udp 224.0.0.251:5353 (multicast)",
         NULL},
        {4, {192, 0, 2, 1}, 6, 80, "", "", "10:00:00 denied tcp 192.0.2.1:80 (reserved address)",
         NULL},
        {4, {255, 255, 255, 255}, 17, 67, "", "",
         "10:00:00 denied udp 255.255.255.255:67 (reserved address)", NULL},
        {16, {[15] = 1}, 6, 8080, "", "", "10:00:00 denied tcp [::1]:8080 (loopback)", NULL},
        {16, {0xfe, 0x80, [15] = 1}, 58, 0, "", "", "10:00:00 denied icmpv6 fe80::1 (link-local address)",
         NULL},
        {16, {0xfd, 0x12, [15] = 1}, 6, 443, "", "", "10:00:00 denied tcp [fd12::1]:443 (LAN address)",
         NULL},
        {16, {0xff, 0x02, [15] = 0xfb}, 17, 5353, "", "", "10:00:00 denied udp [ff02::fb]:5353 (multicast)",
         NULL},
        {16, {[10] = 0xff, [11] = 0xff, 10, 0, 0, 1}, 6, 80, "", "",
         "10:00:00 denied tcp [::ffff:10.0.0.1]:80 (IPv4-mapped address)", NULL},
        {16, {0x20, 0x01, 0x0d, 0xb8, [15] = 1}, 6, 443, "", "",
         "10:00:00 denied tcp [2001:db8::1]:443 (reserved address)", NULL},
        /* Public destinations: the reason depends on what is known. */
        {4, {1, 1, 1, 1}, 6, 443, "", "", "10:00:00 denied tcp 1.1.1.1:443 (policy deny)",
         "10:00:00 denied tcp 1.1.1.1:443 (policy deny)"},
        {4, {1, 1, 1, 1}, 6, 443, "eth0", "",
         "10:00:00 denied tcp 1.1.1.1:443 (policy deny or not via the VPN; out eth0)",
         "10:00:00 denied tcp 1.1.1.1:443 (not via the VPN interface: eth0)"},
        {4, {1, 1, 1, 1}, 6, 443, "tun0", "",
         "10:00:00 denied tcp 1.1.1.1:443 (policy deny or not via the VPN; out tun0)",
         "10:00:00 denied tcp 1.1.1.1:443 (policy deny)"},
        {4, {8, 8, 8, 8}, 17, 53, "eth0", "rule=deny why=\"deny rule 8.8.8.8\" x=1",
         "10:00:00 denied udp 8.8.8.8:53 (deny rule 8.8.8.8)",
         "10:00:00 denied udp 8.8.8.8:53 (deny rule 8.8.8.8)"},
        {4, {8, 8, 8, 8}, 17, 53, "", "why=deny-default",
         "10:00:00 denied udp 8.8.8.8:53 (deny-default)", NULL},
        {4, {8, 8, 8, 8}, 17, 53, "", "nowhy=x awhy=y", "10:00:00 denied udp 8.8.8.8:53 (policy deny)",
         NULL},
        {4, {8, 8, 8, 8}, 17, 53, "", "rule=3 reason=\"deny-dest 8.8.8.8\"",
         "10:00:00 denied udp 8.8.8.8:53 (deny-dest 8.8.8.8)", NULL},
        {4, {8, 8, 8, 8}, 17, 53, "", "why=", "10:00:00 denied udp 8.8.8.8:53 (policy deny)", NULL},
        {4, {8, 8, 8, 8}, 17, 53, "", "why=\x1b[31m", "10:00:00 denied udp 8.8.8.8:53 (\\x1b[31m)",
         NULL},
        {16, {0x26, 0x06, 0x47, 0, [15] = 1}, 6, 443, "tun0", "",
         "10:00:00 denied tcp [2606:4700::1]:443 (policy deny or not via the VPN; out tun0)",
         "10:00:00 denied tcp [2606:4700::1]:443 (IPv6 blocked)"},
        {0, {0}, 6, 443, "", "", "10:00:00 denied tcp ?:443 (policy deny)", NULL},
    };
    const struct audit_fmt_monitor_ctx ctx = {.vpn = "tun0", .ipv6_blocked = true};

    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        _cleanup_free_ lianyaohu_v1_AuditEvent *e = new_event();
        e->time_unix_us = T0;
        e->kind = lianyaohu_v1_EventKind_EVENT_KIND_FLOW;
        e->verdict = lianyaohu_v1_Verdict_VERDICT_DENIED;
        e->family = t[i].len == 16 ? AF_INET6 : AF_INET;
        e->protocol = t[i].proto;
        set_addr(&e->dst_addr, t[i].len, t[i].addr);
        e->dst_port = t[i].port;
        strcpy(e->interface, t[i].iface);
        strcpy(e->detail, t[i].detail);
        assert_int_equal(audit_fmt_monitor_line(e, buf, sizeof(buf)), 0);
        if (strcmp(buf, t[i].want) != 0)
            fail_msg("case %zu: '%s', want '%s'", i, buf, t[i].want);
        assert_int_equal(audit_fmt_monitor_line_ctx(e, &ctx, buf, sizeof(buf)), 0);
        const char *want = t[i].want_ctx ? t[i].want_ctx : t[i].want;
        if (strcmp(buf, want) != 0)
            fail_msg("case %zu with ctx: '%s', want '%s'", i, buf, want);
    }
}

/* Notes on the monitor stream, and an allowed flow (no reason). */
static void test_monitor_notes(void **state) {
    (void)state;
    static char buf[AUDIT_FMT_LINE_MAX];
    _cleanup_free_ lianyaohu_v1_AuditEvent *g = gap();

    /* A per-session gap as lyhd writes it: the action is not repeated. */
    strcpy(g->action, "session");
    strcpy(g->session_id, "0123456789abcdef");
    g->has_uid = true;
    g->uid = 1000;
    strcpy(g->detail, "allowed_missed=0 denied_missed=17 reason=\"log rate limit\"");
    assert_int_equal(audit_fmt_monitor_line(g, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "10:00:00 gap: 17 flow events were not logged (allowed_missed=0 "
                             "denied_missed=17 reason=\"log rate limit\")");
    assert_int_equal(audit_fmt_table_line(g, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2026-12-01 10:00:00.000  gap      session   s:0123456789abcdef  "
                             "uid 1000   missed=17 allowed_missed=0 denied_missed=17 "
                             "reason=\"log rate limit\"");
    g->detail[0] = '\0';
    assert_int_equal(audit_fmt_monitor_line(g, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "10:00:00 gap: 17 flow events were not logged");
    assert_int_equal(audit_fmt_table_line(g, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2026-12-01 10:00:00.000  gap      session   s:0123456789abcdef  "
                             "uid 1000   missed=17");

    /* A session end with an empty detail: counters after one gap. */
    _cleanup_free_ lianyaohu_v1_AuditEvent *e = session_end();
    e->detail[0] = '\0';
    e->allowed_packets = e->allowed_bytes = e->denied_packets = e->denied_bytes = 0;
    assert_int_equal(audit_fmt_table_line(e, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2026-12-01 10:00:00.000  session  end       s:0123456789abcdef  "
                             "uid 1000   allowed_packets=0 allowed_bytes=0 denied_packets=0 "
                             "denied_bytes=0");
    assert_int_equal(audit_fmt_json_line(e, buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, ",\"allowed_packets\":0,\"allowed_bytes\":0,"
                                "\"denied_packets\":0,\"denied_bytes\":0}"));
    /* A session start has no counters. */
    strcpy(e->action, "start");
    strcpy(e->detail, "pid=4242 argv0=claude");
    assert_int_equal(audit_fmt_json_line(e, buf, sizeof(buf)), 0);
    assert_null(strstr(buf, "allowed_packets"));
    assert_int_equal(audit_fmt_monitor_line(e, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "10:00:00 session start pid=4242 argv0=claude");

    /* Allowed and verdict-less flows carry no reason. */
    _cleanup_free_ lianyaohu_v1_AuditEvent *f = flow_v4();
    f->verdict = lianyaohu_v1_Verdict_VERDICT_ALLOWED;
    assert_int_equal(audit_fmt_monitor_line(f, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "10:00:00 allowed udp 192.168.1.5:53");
    f->verdict = 0;
    assert_int_equal(audit_fmt_monitor_line(f, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "10:00:00 flow udp 192.168.1.5:53");
    assert_int_equal(audit_fmt_json_line(f, buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "\"verdict\":null,"));
    f->verdict = 7;
    f->family = 0;
    f->protocol = 250;
    assert_int_equal(audit_fmt_json_line(f, buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "\"verdict\":7,\"family\":null,\"protocol\":250,"));
    assert_int_equal(audit_fmt_table_line(f, buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "  flow     verdict7  "));
    assert_non_null(strstr(buf, "  250      10.0.0.1:5353 -> "));
}

/* ---- summary ------------------------------------------------------------------------------------- */

static void add_flow(struct audit_fmt_sum *s, int verdict, const uint8_t *a, size_t alen,
                     uint32_t port, uint32_t proto, unsigned times) {
    _cleanup_free_ lianyaohu_v1_AuditEvent *e = new_event();
    e->kind = lianyaohu_v1_EventKind_EVENT_KIND_FLOW;
    e->verdict = verdict;
    e->family = alen == 16 ? AF_INET6 : AF_INET;
    e->protocol = proto;
    set_addr(&e->dst_addr, alen, a);
    e->dst_port = port;
    for (unsigned i = 0; i < times; i++)
        assert_int_equal(audit_fmt_sum_add(s, e), 0);
}

#define VA 1
#define VD 2

static void test_summary(void **state) {
    (void)state;
    struct audit_fmt_sum s;
    const struct audit_fmt_dest *d;
    size_t n;
    static char buf[AUDIT_FMT_LINE_MAX];
    static const uint8_t dns[4] = {192, 168, 1, 1}, web[4] = {1, 1, 1, 1},
                         v6[16] = {0x26, 0x06, 0x47, 0, [15] = 1};

    assert_int_equal(audit_fmt_sum_init(&s, 0), -EINVAL);
    assert_int_equal(audit_fmt_sum_init(&s, 100), 0);
    add_flow(&s, VD, dns, 4, 53, 17, 5);
    add_flow(&s, VA, web, 4, 443, 6, 3);
    add_flow(&s, VD, web, 4, 443, 6, 1);
    add_flow(&s, VA, web, 4, 443, 17, 2); /* QUIC: another protocol, another row */
    add_flow(&s, VA, v6, 16, 443, 6, 4);
    add_flow(&s, 0, web, 4, 80, 6, 1); /* no verdict: not counted */
    _cleanup_free_ lianyaohu_v1_AuditEvent *g = gap();
    assert_int_equal(audit_fmt_sum_add(&s, g), 0); /* not a flow: ignored */
    assert_int_equal(s.n, 4);
    assert_int_equal(s.flows, 15);
    assert_int_equal(s.other, 1);
    assert_int_equal(s.overflow_events, 0);

    audit_fmt_sum_sort(&s, &d, &n);
    assert_int_equal(n, 4);
    /* Totals 5, 4, 4, 2; the tie goes to the shorter (IPv4) address. */
    assert_int_equal(d[0].denied, 5);
    assert_int_equal(d[0].port, 53);
    assert_int_equal(d[1].allowed, 3);
    assert_int_equal(d[1].denied, 1);
    assert_int_equal(d[1].addr_len, 4);
    assert_int_equal(d[2].addr_len, 16);
    assert_int_equal(d[2].allowed, 4);
    assert_int_equal(d[3].protocol, 17);
    assert_int_equal(d[3].allowed, 2);

    assert_string_equal(audit_fmt_sum_table_header(),
                        "DESTINATION                                      PROTO       ALLOWED      "
                        "DENIED       TOTAL");
    assert_int_equal(audit_fmt_sum_table_line(&d[0], buf, sizeof(buf)), 0);
    assert_string_equal(buf, "192.168.1.1:53                                   udp               0 "
                             "          5           5");
    assert_int_equal(audit_fmt_sum_table_line(&d[2], buf, sizeof(buf)), 0);
    assert_string_equal(buf, "[2606:4700::1]:443                               tcp               4 "
                             "          0           4");
    assert_int_equal(strlen(buf), strlen(audit_fmt_sum_table_header()));
    assert_int_equal(audit_fmt_sum_json_line(&d[1], buf, sizeof(buf)), 0);
    assert_string_equal(buf, "{\"family\":\"ipv4\",\"dst\":\"1.1.1.1\",\"dport\":443,"
                             "\"protocol\":\"tcp\",\"allowed\":3,\"denied\":1,\"total\":4}");
    assert_int_equal(audit_fmt_sum_json_line(&d[2], buf, sizeof(buf)), 0);
    assert_string_equal(buf, "{\"family\":\"ipv6\",\"dst\":\"2606:4700::1\",\"dport\":443,"
                             "\"protocol\":\"tcp\",\"allowed\":4,\"denied\":0,\"total\":4}");
    assert_int_equal(audit_fmt_sum_json_line(&d[0], buf, 10), -ENOSPC);
    audit_fmt_sum_done(&s);
    audit_fmt_sum_done(&s); /* twice is fine */

    /* A flow without a destination address still has a row. */
    assert_int_equal(audit_fmt_sum_init(&s, 10), 0);
    add_flow(&s, VD, NULL, 0, 0, 1, 1);
    audit_fmt_sum_sort(&s, &d, &n);
    assert_int_equal(n, 1);
    assert_int_equal(audit_fmt_sum_json_line(&d[0], buf, sizeof(buf)), 0);
    assert_string_equal(buf, "{\"family\":\"ipv4\",\"dst\":null,\"dport\":0,\"protocol\":\"icmp\","
                             "\"allowed\":0,\"denied\":1,\"total\":1}");
    audit_fmt_sum_done(&s);
}

/* The cap: new destinations beyond it are counted, not stored. */
/* What a gap may have hidden from a summary's period: not refused requests,
 * and of retention only the flows, only when they overlap the period. */
static void test_gap_flows(void **state) {
    lianyaohu_v1_AuditEvent ev = lianyaohu_v1_AuditEvent_init_zero;
    const uint64_t day = 86400ull * 1000000ull;
    const uint64_t t2026_09_01 = 1788220800ull * 1000000ull; /* 2026-09-01T00:00:00Z */
    (void)state;

    ev.kind = lianyaohu_v1_EventKind_EVENT_KIND_GAP;
    ev.missed = 7;
    snprintf(ev.action, sizeof(ev.action), "session");
    assert_int_equal(audit_fmt_gap_flows(&ev, 0, 0), 7);
    snprintf(ev.action, sizeof(ev.action), "requests");
    ev.missed = 260000;
    assert_int_equal(audit_fmt_gap_flows(&ev, 0, 0), 0);
    snprintf(ev.action, sizeof(ev.action), "retention");
    ev.missed = 2000;
    snprintf(ev.detail, sizeof(ev.detail),
             "reason=\"retention: older than 90 days\" max_age_days=90 flow=1990 session=10 "
             "oldest=2026-09-01T10:00:00Z newest=2026-09-01T10:05:00Z");
    assert_int_equal(audit_fmt_gap_flows(&ev, 0, 0), 1990);
    assert_int_equal(audit_fmt_gap_flows(&ev, t2026_09_01, t2026_09_01 + day), 1990);
    assert_int_equal(audit_fmt_gap_flows(&ev, t2026_09_01 + day, 0), 0);
    assert_int_equal(audit_fmt_gap_flows(&ev, 0, t2026_09_01), 0);
    snprintf(ev.detail, sizeof(ev.detail), "reason=\"retention: audit.db over its size cap\" session=4");
    assert_int_equal(audit_fmt_gap_flows(&ev, 0, 0), 0);
    ev.kind = lianyaohu_v1_EventKind_EVENT_KIND_FLOW;
    assert_int_equal(audit_fmt_gap_flows(&ev, 0, 0), 0);
}

static void test_summary_cap(void **state) {
    (void)state;
    struct audit_fmt_sum s;
    const struct audit_fmt_dest *d;
    size_t n;

    assert_int_equal(audit_fmt_sum_init(&s, 3), 0);
    for (uint8_t i = 1; i <= 5; i++)
        add_flow(&s, i % 2 ? VA : VD, (const uint8_t[]){10, 0, 0, i}, 4, 80, 6, i);
    /* Known destinations keep counting after the cap. */
    add_flow(&s, VA, (const uint8_t[]){10, 0, 0, 1}, 4, 80, 6, 10);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.flows, 1 + 2 + 3 + 4 + 5 + 10);
    assert_int_equal(s.overflow_events, 4 + 5);
    assert_int_equal(s.overflow_allowed, 5);
    assert_int_equal(s.overflow_denied, 4);
    audit_fmt_sum_sort(&s, &d, &n);
    assert_int_equal(n, 3);
    assert_int_equal(d[0].addr[3], 1);
    assert_int_equal(d[0].allowed, 11);
    assert_int_equal(d[1].addr[3], 3);
    assert_int_equal(d[2].addr[3], 2);
    audit_fmt_sum_done(&s);
}

/* Growth past the first table: every count lands where it belongs. */
static void test_summary_grow(void **state) {
    (void)state;
    struct audit_fmt_sum s;
    const struct audit_fmt_dest *d;
    size_t n;

    assert_int_equal(audit_fmt_sum_init(&s, AUDIT_FMT_SUM_MAX_DESTS), 0);
    for (unsigned i = 0; i < 5000; i++) {
        uint8_t a[4] = {10, (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i};
        add_flow(&s, VD, a, 4, 443, 6, 1 + i % 3);
    }
    assert_int_equal(s.n, 5000);
    assert_true(s.n_slots >= 10000);
    audit_fmt_sum_sort(&s, &d, &n);
    assert_int_equal(n, 5000);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned idx = (unsigned)d[i].addr[1] << 16 | (unsigned)d[i].addr[2] << 8 | d[i].addr[3];
        assert_int_equal(d[i].denied, 1 + idx % 3);
        if (i > 0)
            assert_true(d[i - 1].denied >= d[i].denied);
        total += d[i].denied;
    }
    assert_int_equal(total, s.flows);
    audit_fmt_sum_done(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time_good),
        cmocka_unit_test(test_time_bad),
        cmocka_unit_test(test_time_local_dst),
        cmocka_unit_test(test_port),
        cmocka_unit_test(test_proto),
        cmocka_unit_test(test_kind_verdict),
        cmocka_unit_test(test_dst),
        cmocka_unit_test(test_uid_limit_session),
        cmocka_unit_test(test_golden),
        cmocka_unit_test(test_table_columns),
        cmocka_unit_test(test_local_time),
        cmocka_unit_test(test_monitor_dns_reasons),
        cmocka_unit_test(test_json_read_back),
        cmocka_unit_test(test_csv_read_back),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_monitor),
        cmocka_unit_test(test_monitor_notes),
        cmocka_unit_test(test_summary),
        cmocka_unit_test(test_gap_flows),
        cmocka_unit_test(test_summary_cap),
        cmocka_unit_test(test_summary_grow),
    };
    return cmocka_run_group_tests(tests, setup_utc, NULL);
}
