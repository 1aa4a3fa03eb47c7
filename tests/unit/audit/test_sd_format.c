/* Unit tests for audit/sd_format.c: RFC 5424 structured data of audit
 * records, the escaping that keeps a hostile detail (an agent picks its own
 * argv[0]) from forging parameters, and truncation that stays well-formed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "audit/sd_format.h"

static struct audit_rec flow4(void) {
    struct audit_rec r = {
        .id = 42,
        .time_us = 1764583200123456, /* 2025-12-01T10:00:00.123456Z */
        .kind = AUDIT_KIND_FLOW,
        .verdict = AUDIT_VERDICT_DENIED,
        .family = AF_INET,
        .protocol = 6,
        .addr_len = 4,
        .src = {10, 77, 0, 1},
        .dst = {192, 168, 77, 2},
        .sport = 40000,
        .dport = 7777,
        .has_uid = true,
        .uid = 1000,
        .session = "0123456789abcdef",
        .iface = "eth0",
    };
    return r;
}

static void test_flow(void **state) {
    (void)state;
    char buf[1024];
    struct audit_rec r = flow4();
    assert_int_equal(audit_sd_format(&r, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "[lyh@32473 id=\"42\" time=\"2025-12-01T10:00:00.123456Z\" kind=\"flow\" "
                             "verdict=\"denied\" session=\"0123456789abcdef\" uid=\"1000\" "
                             "proto=\"tcp\" src=\"10.77.0.1\" dst=\"192.168.77.2\" sport=\"40000\" "
                             "dport=\"7777\" interface=\"eth0\"]");
}

static void test_flow_v6_unknown_proto(void **state) {
    (void)state;
    char buf[1024];
    struct audit_rec r = flow4();
    r.family = AF_INET6;
    r.addr_len = 16;
    memset(r.src, 0, 16);
    memset(r.dst, 0, 16);
    r.src[15] = 1;
    r.dst[0] = 0xfd;
    r.dst[1] = 0x77;
    r.dst[15] = 2;
    r.protocol = 99;
    r.sport = r.dport = 0;
    r.verdict = AUDIT_VERDICT_ALLOWED;
    r.has_uid = false;
    r.session[0] = '\0';
    assert_int_equal(audit_sd_format(&r, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "[lyh@32473 id=\"42\" time=\"2025-12-01T10:00:00.123456Z\" kind=\"flow\" "
                             "verdict=\"allowed\" proto=\"99\" src=\"::1\" dst=\"fd77::2\" "
                             "interface=\"eth0\"]");
}

static void test_session_end_and_gap(void **state) {
    (void)state;
    char buf[1024];
    struct audit_rec r = {.id = 7, .time_us = 0, .kind = AUDIT_KIND_SESSION, .has_uid = true,
                          .uid = 5, .session = "00000000000000aa", .action = "end",
                          .allowed_packets = 1, .allowed_bytes = 2, .denied_packets = 3,
                          .denied_bytes = 4, .detail = "exit=0 duration_ms=12"};
    assert_int_equal(audit_sd_format(&r, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "[lyh@32473 id=\"7\" time=\"1970-01-01T00:00:00.000000Z\" "
                             "kind=\"session\" action=\"end\" session=\"00000000000000aa\" uid=\"5\" "
                             "allowed_packets=\"1\" allowed_bytes=\"2\" denied_packets=\"3\" "
                             "denied_bytes=\"4\" detail=\"exit=0 duration_ms=12\"]");
    struct audit_rec g = {.id = 8, .kind = AUDIT_KIND_GAP, .action = "overrun", .missed = 19520};
    assert_int_equal(audit_sd_format(&g, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "[lyh@32473 id=\"8\" time=\"1970-01-01T00:00:00.000000Z\" kind=\"gap\" "
                             "action=\"overrun\" missed=\"19520\"]");
}

/* A detail full of the three characters RFC 5424 makes special. */
static void test_escaping(void **state) {
    (void)state;
    char buf[1024];
    struct audit_rec r = {.id = 1, .kind = AUDIT_KIND_SESSION, .action = "start",
                          .detail = "argv0=\"x\\\"] [evil@1 a=\"b"};
    assert_int_equal(audit_sd_format(&r, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "[lyh@32473 id=\"1\" time=\"1970-01-01T00:00:00.000000Z\" "
                             "kind=\"session\" action=\"start\" "
                             "detail=\"argv0=\\\"x\\\\\\\"\\] [evil@1 a=\\\"b\"]");
    /* Every '"' inside the element is escaped except the value delimiters, and
     * every ']' except the last: a collector sees one element. */
    size_t n = strlen(buf), close = 0;
    for (size_t i = 0; i < n; i++)
        if (buf[i] == ']' && buf[i - 1] != '\\')
            close++;
    assert_int_equal(close, 1);
    assert_int_equal(buf[n - 1], ']');
}

/* Too small a buffer: the detail is cut (never inside an escape) and the
 * element still closes, marked truncated. */
static void test_truncation(void **state) {
    (void)state;
    char detail[600];
    memset(detail, '"', sizeof(detail) - 1);
    detail[sizeof(detail) - 1] = '\0';
    struct audit_rec r = {.id = 1, .kind = AUDIT_KIND_REQUEST, .action = "refused", .detail = detail};
    for (size_t size = 64; size <= 400; size += 17) {
        char buf[400];
        memset(buf, 'Z', sizeof(buf));
        int k = audit_sd_format(&r, buf, size);
        assert_int_equal(k, -ENOSPC);
        size_t n = strlen(buf);
        assert_true(n < size);
        assert_int_equal(buf[n - 1], ']');
        assert_non_null(strstr(buf, " truncated=\"1\"]"));
        /* Inside detail="...": only escaped quotes, so an even run of chars. */
        const char *d = strstr(buf, "detail=\"");
        if (d) {
            const char *v = d + strlen("detail=\"");
            const char *end = strstr(v, "\" truncated");
            assert_non_null(end);
            assert_int_equal((end - v) % 2, 0);
            for (const char *p = v; p < end; p += 2) {
                assert_int_equal(p[0], '\\');
                assert_int_equal(p[1], '"');
            }
        }
        /* Nothing written past size. */
        for (size_t i = size; i < sizeof(buf); i++)
            assert_int_equal(buf[i], 'Z');
    }
    char small[63];
    assert_int_equal(audit_sd_format(&r, small, sizeof(small)), -EINVAL);
}

static void test_names(void **state) {
    (void)state;
    assert_string_equal(audit_kind_name(AUDIT_KIND_GUARD), "guard");
    assert_null(audit_kind_name(0));
    assert_string_equal(audit_kind_name(AUDIT_KIND_DNS), "dns");
    assert_null(audit_kind_name(8));
    assert_string_equal(audit_verdict_name(AUDIT_VERDICT_ALLOWED), "allowed");
    assert_null(audit_verdict_name(0));
    assert_string_equal(audit_proto_name(58), "icmpv6");
    assert_null(audit_proto_name(0));
}

/* The datagram glibc's syslog(3) would send, byte for byte (rsyslog and
 * journald parse exactly this), and the refusals. */
static void test_syslog_frame(void **state) {
    (void)state;
    char buf[128];
    struct tm tm = {.tm_mon = 11, .tm_mday = 3, .tm_hour = 9, .tm_min = 5, .tm_sec = 7};
    int k = audit_syslog_frame(buf, sizeof(buf), 4 * 8 + 6, &tm, "lyhd", 321, "[lyh@32473 id=\"1\"]");
    assert_string_equal(buf, "<38>Dec  3 09:05:07 lyhd[321]: [lyh@32473 id=\"1\"]");
    assert_int_equal(k, (int)strlen(buf));
    tm.tm_mon = 0;
    tm.tm_mday = 31;
    assert_true(audit_syslog_frame(buf, sizeof(buf), 191, &tm, "a.b_c-9", 1, "") > 0);
    assert_string_equal(buf, "<191>Jan 31 09:05:07 a.b_c-9[1]: ");

    /* too small: nothing half-written */
    char small[20];
    memset(small, 'Z', sizeof(small));
    assert_int_equal(audit_syslog_frame(small, sizeof(small), 38, &tm, "lyhd", 1, "x"), -ENOSPC);
    assert_string_equal(small, "");
    assert_int_equal(audit_syslog_frame(buf, sizeof(buf), 192, &tm, "lyhd", 1, "x"), -EINVAL);
    assert_int_equal(audit_syslog_frame(buf, sizeof(buf), -1, &tm, "lyhd", 1, "x"), -EINVAL);
    assert_int_equal(audit_syslog_frame(buf, sizeof(buf), 38, &tm, "", 1, "x"), -EINVAL);
    assert_int_equal(audit_syslog_frame(buf, sizeof(buf), 38, &tm, "ly hd", 1, "x"), -EINVAL);
    assert_int_equal(audit_syslog_frame(buf, sizeof(buf), 38, &tm, "lyhd:", 1, "x"), -EINVAL);
    tm.tm_mon = 12;
    assert_int_equal(audit_syslog_frame(buf, sizeof(buf), 38, &tm, "lyhd", 1, "x"), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flow),
        cmocka_unit_test(test_flow_v6_unknown_proto),
        cmocka_unit_test(test_session_end_and_gap),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_syslog_frame),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
