/* lyh audit summary --by-name (cli/audit_names.c): counting dns and flow
 * records under each name they carry, the pattern, odd names refused, the
 * bound on distinct names, the order, and the rendered lines. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/audit_names.h"

static lianyaohu_v1_AuditEvent ev(lianyaohu_v1_EventKind kind, lianyaohu_v1_Verdict v,
                                  const char *action, const char *detail) {
    lianyaohu_v1_AuditEvent e;
    memset(&e, 0, sizeof(e));
    e.kind = kind;
    e.verdict = v;
    snprintf(e.action, sizeof(e.action), "%s", action);
    snprintf(e.detail, sizeof(e.detail), "%s", detail);
    return e;
}

#define DNS lianyaohu_v1_EventKind_EVENT_KIND_DNS
#define FLOW lianyaohu_v1_EventKind_EVENT_KIND_FLOW
#define ALLOWED lianyaohu_v1_Verdict_VERDICT_ALLOWED
#define DENIED lianyaohu_v1_Verdict_VERDICT_DENIED

static const struct audit_name *get(const struct audit_name *v, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return &v[i];
    return NULL;
}

static void test_counts(void **state) {
    (void)state;
    struct audit_names t;
    assert_int_equal(audit_names_init(&t, 100), 0);
    lianyaohu_v1_AuditEvent e[] = {
        ev(DNS, ALLOWED, "answered", "name=api.example.com type=A rcode=NOERROR answers=1.2.3.4"),
        ev(DNS, ALLOWED, "answered", "name=api.example.com type=AAAA rcode=NOERROR"),
        ev(DNS, DENIED, "denied", "name=evil.test type=A rcode=NXDOMAIN"),
        ev(DNS, ALLOWED, "failed", "name=slow.example.com type=A rcode=SERVFAIL"),
        ev(FLOW, ALLOWED, "", "names=api.example.com,cdn.example.com"),
        ev(FLOW, DENIED, "", "dns=expired names=api.example.com expired_s_ago=4"),
        ev(FLOW, DENIED, "", "dns=none"),                       /* no names: not counted */
        ev(FLOW, lianyaohu_v1_Verdict_VERDICT_UNSPECIFIED, "", "names=api.example.com"),
        ev(lianyaohu_v1_EventKind_EVENT_KIND_SESSION, ALLOWED, "start", "names=x.test"),
        ev(DNS, ALLOWED, "answered", "name=BAD\"NAME type=A"),   /* not lyhd's spelling */
        ev(DNS, ALLOWED, "answered", "name=a..b type=A"),
    };
    for (size_t i = 0; i < sizeof(e) / sizeof(e[0]); i++)
        assert_int_equal(audit_names_add(&t, &e[i], NULL), 0);
    const struct audit_name *v;
    size_t n;
    assert_int_equal(t.dns, 4);
    assert_int_equal(t.flows, 2);
    assert_int_equal(t.odd, 2);
    audit_names_sort(&t, &v, &n);
    assert_int_equal(n, 4);
    /* busiest first: api (2 queries + 2 flows) */
    assert_string_equal(v[0].name, "api.example.com");
    assert_int_equal(v[0].queries, 2);
    assert_int_equal(v[0].flows_allowed, 1);
    assert_int_equal(v[0].flows_denied, 1);
    const struct audit_name *x = get(v, n, "evil.test");
    assert_non_null(x);
    assert_int_equal(x->queries, 1);
    assert_int_equal(x->denied, 1);
    x = get(v, n, "slow.example.com");
    assert_non_null(x);
    assert_int_equal(x->failed, 1);
    x = get(v, n, "cdn.example.com");
    assert_non_null(x);
    assert_int_equal(x->flows_allowed, 1);
    assert_int_equal(x->queries, 0);
    /* ties by name */
    assert_string_equal(v[1].name, "cdn.example.com");
    audit_names_done(&t);
}

static void test_pattern_and_bound(void **state) {
    (void)state;
    struct audit_names t;
    assert_int_equal(audit_names_init(&t, 3), 0);
    char d[64];
    for (int i = 0; i < 10; i++) {
        snprintf(d, sizeof(d), "name=n%d.example.com type=A", i);
        lianyaohu_v1_AuditEvent e = ev(DNS, ALLOWED, "answered", d);
        assert_int_equal(audit_names_add(&t, &e, "*.example.com"), 0);
    }
    lianyaohu_v1_AuditEvent o = ev(DNS, ALLOWED, "answered", "name=example.com type=A");
    assert_int_equal(audit_names_add(&t, &o, "*.example.com"), 0); /* the apex is not below */
    assert_int_equal(t.n, 3);
    assert_int_equal(t.overflow, 7);
    assert_int_equal(t.dns, 10);
    audit_names_done(&t);
    /* growth past the first table keeps every count */
    assert_int_equal(audit_names_init(&t, 5000), 0);
    for (int i = 0; i < 3000; i++) {
        snprintf(d, sizeof(d), "names=h%d.test", i % 1000);
        lianyaohu_v1_AuditEvent e = ev(FLOW, ALLOWED, "", d);
        assert_int_equal(audit_names_add(&t, &e, NULL), 0);
    }
    const struct audit_name *v;
    size_t n;
    audit_names_sort(&t, &v, &n);
    assert_int_equal(n, 1000);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(v[i].flows_allowed, 3);
    audit_names_done(&t);
    assert_int_equal(audit_names_init(&t, 0), -EINVAL);
}

static void test_lines(void **state) {
    (void)state;
    struct audit_name a = {.name = "api.example.com", .queries = 12, .denied = 0, .failed = 1,
                           .flows_allowed = 7, .flows_denied = 2};
    char buf[512];
    assert_int_equal(audit_names_table_line(&a, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "api.example.com                                   12        0        1"
                             "         7             2");
    assert_int_equal(strlen(audit_names_header()), strlen(buf));
    assert_int_equal(audit_names_json_line(&a, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "{\"name\":\"api.example.com\",\"queries\":12,\"denied\":0,\"failed\":1,"
                             "\"flows_allowed\":7,\"flows_denied\":2}");
    assert_int_equal(audit_names_json_line(&a, buf, 20), -ENOSPC);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_pattern_and_bound),
        cmocka_unit_test(test_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
