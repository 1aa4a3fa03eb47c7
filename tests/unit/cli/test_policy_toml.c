/* Unit tests for cli/policy_toml.c: the admin policy file to the typed
 * Policy message and back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/policy_toml.h"
#include "common/dest_rule.h"

static lianyaohu_v1_Policy p, q;
static char err[512];

static int parse(const char *text, lianyaohu_v1_Policy *out) {
    err[0] = '\0';
    return policy_from_toml("pol.toml", text, strlen(text), out, err, sizeof(err));
}

static void test_full(void **state) {
    (void)state;
    const char *t = "allowed_interface_patterns = [\"wg0\", \"tun*\"]\n"
                    "permit_allow_non_default_route = false\n"
                    "permit_no_firewall = false\n"
                    "permit_shared_user_firewall = false\n"
                    "lan_allow_ceiling = [\"192.168.77.0/24:7777\"]\n"
                    "always_deny = [\"203.0.113.7\", \"[2001:db8::/32]:443\"]\n"
                    "extra_env_block = [\"AWS_*\"]\n"
                    "writable_prefixes = [\"/srv/work\"]\n"
                    "log_allowed_flows = false\n"
                    "max_sessions_per_uid = 4\n"
                    "audit_retention_days = 30\n"
                    "audit_max_bytes = 1073741824\n";
    assert_int_equal(parse(t, &p), 0);
    assert_int_equal(p.allowed_interface_patterns_count, 2);
    assert_string_equal(p.allowed_interface_patterns[0], "wg0");
    assert_string_equal(p.allowed_interface_patterns[1], "tun*");
    assert_false(p.permit_allow_non_default_route);
    assert_false(p.permit_no_firewall);
    assert_false(p.permit_shared_user_firewall);
    assert_int_equal(p.lan_allow_ceiling_count, 1);
    assert_int_equal(p.lan_allow_ceiling[0].addr.size, 4);
    assert_memory_equal(p.lan_allow_ceiling[0].addr.bytes, "\xc0\xa8\x4d\x00", 4);
    assert_int_equal(p.lan_allow_ceiling[0].prefix_len, 24);
    assert_int_equal(p.lan_allow_ceiling[0].port_min, 7777);
    assert_int_equal(p.always_deny_count, 2);
    assert_int_equal(p.always_deny[0].prefix_len, 32);
    assert_int_equal(p.always_deny[1].addr.size, 16);
    assert_int_equal(p.always_deny[1].prefix_len, 32);
    assert_int_equal(p.always_deny[1].port_min, 443);
    assert_int_equal(p.extra_env_block_count, 1);
    assert_string_equal(p.extra_env_block[0], "AWS_*");
    assert_string_equal(p.writable_prefixes[0], "/srv/work");
    assert_false(p.log_allowed_flows);
    assert_int_equal(p.max_sessions_per_uid, 4);
    assert_int_equal(p.audit_retention_days, 30);
    assert_int_equal(p.audit_max_bytes, 1073741824u);
}

/* A key left out keeps the built-in default (docs/admin.md). */
static void test_defaults(void **state) {
    (void)state;
    assert_int_equal(parse("always_deny = [\"198.51.100.0/24\"]\n", &p), 0);
    /* the common VPN clients' names (common/vpn_names.h) */
    assert_int_equal(p.allowed_interface_patterns_count, 6);
    assert_string_equal(p.allowed_interface_patterns[0], "tun*");
    assert_string_equal(p.allowed_interface_patterns[1], "wg*");
    assert_string_equal(p.allowed_interface_patterns[2], "tailscale*");
    assert_string_equal(p.allowed_interface_patterns[5], "mullvad-*"); /* not ppp*: an uplink */
    assert_true(p.permit_allow_non_default_route);
    assert_true(p.permit_no_firewall);
    assert_true(p.permit_shared_user_firewall);
    assert_int_equal(p.lan_allow_ceiling_count, DR_BLOCKED_V4_COUNT + DR_BLOCKED_V6_COUNT);
    assert_true(p.log_allowed_flows);
    assert_int_equal(p.always_deny_count, 1);
    /* One user cannot take lyhd's fds from the others by default. */
    assert_int_equal(p.max_sessions_per_uid, 64);
    /* 0 = the built-in minimum (ABI 6); an admin accepts less explicitly. */
    assert_int_equal(p.min_landlock_abi, 0);
    assert_int_equal(parse("min_landlock_abi = 4\n", &p), 0);
    assert_int_equal(p.min_landlock_abi, 4);
}

/* What policy_print_toml() writes reads back to the same message. */
static void test_round_trip(void **state) {
    (void)state;
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(parse("always_deny = [\"[fd00::/8]:80-90\"]\nmax_sessions_per_uid = 2\n"
                           "extra_env_block = [\"A\\\"B\"]\n"
                           "dns_resolvers = [\"10.8.0.1\", \"fd00::53\"]\n",
                           &p),
                     0);
    assert_int_equal(p.dns_resolvers_count, 2);
    assert_string_equal(p.dns_resolvers[1], "fd00::53");
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    policy_print_toml(f, &p);
    fclose(f);
    assert_int_equal(policy_from_toml("printed", text, len, &q, err, sizeof(err)), 0);
    assert_memory_equal(&p, &q, sizeof(p));
    free(text);
}

static void test_errors(void **state) {
    (void)state;
    struct {
        const char *text;
        int r;
        const char *msg;
    } cases[] = {
        {"permit_no_firewal = true\n", -EBADMSG,
         "pol.toml:1:1: permit_no_firewal: unknown key (lianyaohu.toml(5) lists the policy keys)"},
        {"\nlog_allowed_flows = \"yes\"\n", -EBADMSG,
         "pol.toml:2:21: log_allowed_flows: expected bool, found string"},
        {"always_deny = [\"10.0.0.1/8\"]\n", -EBADMSG, NULL},
        {"max_sessions_per_uid = -1\n", -EBADMSG,
         "pol.toml:1:24: max_sessions_per_uid: -1 is out of range (0..4294967295)"},
        {"allowed_interface_patterns = [\"\"]\n", -EBADMSG, NULL},
        {"allowed_interface_patterns = [\"0123456789abcdef\"]\n", -EBADMSG, NULL},
        {"extra_env_block = [1]\n", -EBADMSG, "pol.toml:1:20: extra_env_block: expected string, found integer"},
        {"[policy]\nx = 1\n", -EBADMSG, NULL},
        {"always_deny = [\"1.2.3.4\"\n", -EBADMSG, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(parse(cases[i].text, &p), cases[i].r);
        assert_true(strncmp(err, "pol.toml:", 9) == 0);
        if (cases[i].msg)
            assert_string_equal(err, cases[i].msg);
    }
    /* Too many entries. */
    char big[4096] = "always_deny = [";
    for (int i = 0; i < 65; i++) {
        char one[32];
        snprintf(one, sizeof(one), "%s\"198.51.100.%d\"", i ? ", " : "", i);
        strcat(big, one);
    }
    strcat(big, "]\n");
    assert_int_equal(parse(big, &p), -E2BIG);
    assert_string_equal(err, "pol.toml:1:15: always_deny: 65 entries (at most 64)");
    /* Nothing is returned on failure. */
    memset(&q, 0x5a, sizeof(q));
    assert_int_equal(parse("nope = 1\n", &q), -EBADMSG);
    assert_int_equal(((unsigned char *)&q)[0], 0x5a);
}

static void test_size_cap(void **state) {
    (void)state;
    size_t n = POLICY_FILE_MAX + 1;
    char *buf = malloc(n);
    assert_non_null(buf);
    memset(buf, '#', n);
    assert_int_equal(policy_from_toml("big.toml", buf, n, &p, err, sizeof(err)), -EFBIG);
    assert_string_equal(err, "big.toml: larger than 256 KiB; a policy file is small");
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full),     cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_round_trip), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_size_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
