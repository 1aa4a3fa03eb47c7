/* The admin policy as data (daemon/policy.c): a Policy message validated
 * field by field into struct policy (every refusal names its field and
 * leaves *ret alone), the canonical blob state.db keeps (damage is refused
 * or decodes to a policy that is valid again, never a crash), narrowing a
 * running session's guard spec, and the matching helpers Run, Install and
 * the DNS forwarder ask. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/dest_rule.h"
#include "common/macros.h"
#include "daemon/guard_spec.h"
#include "daemon/policy.h"
#include "tests/unit/daemon/spec_assert.h"

/* ---- helpers ------------------------------------------------------------------- */

/* A rule from its text form (common/dest_rule.h grammar). */
static struct dr_rule dest(const char *text) {
    struct dr_rule r;
    char why[DR_WHY_MAX];
    memset(&r, 0, sizeof(r));
    if (dr_parse(text, &r, why, sizeof(why)) < 0)
        fail_msg("test rule '%s': %s", text, why);
    return r;
}

/* The wire form of a rule (DestRule), borrowing addr. */
static Lianyaohu__V1__DestRule wire_rule(uint8_t *addr, size_t len, uint32_t prefix, uint32_t pmin,
                                         uint32_t pmax) {
    Lianyaohu__V1__DestRule r = LIANYAOHU__V1__DEST_RULE__INIT;
    r.addr.data = addr;
    r.addr.len = len;
    r.prefix_len = prefix;
    r.port_min = pmin;
    r.port_max = pmax;
    return r;
}

#define STRINGS_EQUAL(a, b, n)                                                                     \
    do {                                                                                           \
        for (size_t k_ = 0; k_ < (n); k_++)                                                        \
            assert_string_equal((a)[k_], (b)[k_]);                                                 \
    } while (0)

static void policy_equal(const struct policy *a, const struct policy *b) {
    assert_int_equal(a->version, b->version);
    assert_int_equal(a->set_by_uid, b->set_by_uid);
    assert_int_equal(a->set_ms, b->set_ms);
    assert_int_equal(a->n_if_patterns, b->n_if_patterns);
    STRINGS_EQUAL(a->if_patterns, b->if_patterns, a->n_if_patterns);
    assert_int_equal(a->permit_non_default_route, b->permit_non_default_route);
    assert_int_equal(a->permit_no_firewall, b->permit_no_firewall);
    assert_int_equal(a->permit_shared_user_firewall, b->permit_shared_user_firewall);
    assert_int_equal(a->forbid_proxy_only, b->forbid_proxy_only);
    assert_int_equal(a->permit_lan_proxy, b->permit_lan_proxy);
    assert_int_equal(a->n_lan_ceiling, b->n_lan_ceiling);
    dests_equal(a->lan_ceiling, b->lan_ceiling, a->n_lan_ceiling);
    assert_int_equal(a->n_always_deny, b->n_always_deny);
    dests_equal(a->always_deny, b->always_deny, a->n_always_deny);
    assert_int_equal(a->n_env_block, b->n_env_block);
    STRINGS_EQUAL(a->env_block, b->env_block, a->n_env_block);
    assert_int_equal(a->n_writable, b->n_writable);
    STRINGS_EQUAL(a->writable, b->writable, a->n_writable);
    assert_int_equal(a->n_protect, b->n_protect);
    STRINGS_EQUAL(a->protect, b->protect, a->n_protect);
    assert_int_equal(a->forbid_allow_socket, b->forbid_allow_socket);
    assert_int_equal(a->n_socket_patterns, b->n_socket_patterns);
    STRINGS_EQUAL(a->socket_patterns, b->socket_patterns, a->n_socket_patterns);
    assert_int_equal(a->n_domain_ceiling, b->n_domain_ceiling);
    STRINGS_EQUAL(a->domain_ceiling, b->domain_ceiling, a->n_domain_ceiling);
    assert_int_equal(a->n_deny_domains, b->n_deny_domains);
    STRINGS_EQUAL(a->deny_domains, b->deny_domains, a->n_deny_domains);
    assert_int_equal(a->n_resolvers, b->n_resolvers);
    dests_equal(a->resolvers, b->resolvers, a->n_resolvers);
    STRINGS_EQUAL(a->resolver_text, b->resolver_text, a->n_resolvers);
    assert_int_equal(a->log_allowed_flows, b->log_allowed_flows);
    assert_int_equal(a->max_sessions_per_uid, b->max_sessions_per_uid);
    assert_int_equal(a->min_landlock_abi, b->min_landlock_abi);
    assert_int_equal(a->audit_retention_days, b->audit_retention_days);
    assert_int_equal(a->audit_max_bytes, b->audit_max_bytes);
}

/* Per test: the built-in default and a message borrowing from it, which a
 * test edits; out receives the result. */
struct fx {
    struct policy base;
    struct policy_msg h;
    struct policy out;
    char why[POLICY_WHY_MAX];
};

static int fx_setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    policy_default(&f->base);
    policy_to_msg(&f->base, &f->h);
    *state = f;
    return 0;
}

static int fx_teardown(void **state) {
    free(*state);
    return 0;
}

#define POISON 0xa5

static void poison(struct policy *p) {
    memset(p, POISON, sizeof(*p));
}

/* *p still holds poison() bytes: a refusal writes nothing to *ret. */
static void untouched(const struct policy *p) {
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < sizeof(*p); i++)
        if (b[i] != POISON)
            fail_msg("*ret written at byte %zu of a refused policy", i);
}

/* f->h.m is refused with err, why holding want, *ret untouched. */
static void refused(struct fx *f, int err, const char *want) {
    poison(&f->out);
    strcpy(f->why, "(not set)");
    int r = policy_from_msg(&f->h.m, &f->out, f->why, sizeof(f->why));
    if (r != err)
        fail_msg("want %d ('%s'), got %d: %s", err, want, r, f->why);
    if (!strstr(f->why, want))
        fail_msg("why '%s' does not say '%s'", f->why, want);
    untouched(&f->out);
}

static void accepted(struct fx *f) {
    strcpy(f->why, "(not set)");
    int r = policy_from_msg(&f->h.m, &f->out, f->why, sizeof(f->why));
    if (r != 0)
        fail_msg("refused (%d): %s", r, f->why);
}

/* A policy with every list non-empty and every number set, through the
 * message (so canonicalisation happens): the packing tests' sample. */
static char *full_pat[] = {"tun*", "wg0", "x_y.z-1"};
static char *full_env[] = {"AWS_*", "GITHUB_TOKEN"};
static char *full_wr[] = {"/home", "/srv/data"};
static char *full_prot[] = {"~/.bashrc", ".config/git/"};
static char *full_sock[] = {"/run/user/*/pipewire-0"};
static char *full_dceil[] = {"*.Example.COM.", "api.example.org"};
static char *full_ddeny[] = {"evil.example.com"};
static char *full_res[] = {"10.8.0.1", "2001:DB8::53"};
static uint8_t full_lan[4] = {192, 168, 0, 0}, full_lan6[16] = {0xfd};
static uint8_t full_deny[4] = {198, 51, 100, 0}, full_deny2[4] = {8, 8, 8, 8};

static void full_msg(Lianyaohu__V1__Policy *m, Lianyaohu__V1__DestRule dr[4],
                     Lianyaohu__V1__DestRule *ceil[2], Lianyaohu__V1__DestRule *deny[2]) {
    lianyaohu__v1__policy__init(m);
    m->allowed_interface_patterns = full_pat;
    m->n_allowed_interface_patterns = ARRAY_SIZE(full_pat);
    m->permit_allow_non_default_route = true;
    m->permit_no_firewall = false;
    m->permit_shared_user_firewall = true;
    m->forbid_proxy_only = true;
    m->permit_lan_proxy = true;
    dr[0] = wire_rule(full_lan, 4, 16, 0, 0);
    dr[1] = wire_rule(full_lan6, 16, 8, 443, 0);
    dr[2] = wire_rule(full_deny, 4, 24, 22, 25);
    dr[3] = wire_rule(full_deny2, 4, 32, 0, 0);
    ceil[0] = &dr[0];
    ceil[1] = &dr[1];
    deny[0] = &dr[2];
    deny[1] = &dr[3];
    m->lan_allow_ceiling = ceil;
    m->n_lan_allow_ceiling = 2;
    m->always_deny = deny;
    m->n_always_deny = 2;
    m->extra_env_block = full_env;
    m->n_extra_env_block = ARRAY_SIZE(full_env);
    m->writable_prefixes = full_wr;
    m->n_writable_prefixes = ARRAY_SIZE(full_wr);
    m->protect_paths = full_prot;
    m->n_protect_paths = ARRAY_SIZE(full_prot);
    m->forbid_allow_socket = true;
    m->allow_socket_patterns = full_sock;
    m->n_allow_socket_patterns = ARRAY_SIZE(full_sock);
    m->allowed_domains = full_dceil;
    m->n_allowed_domains = ARRAY_SIZE(full_dceil);
    m->always_deny_domains = full_ddeny;
    m->n_always_deny_domains = ARRAY_SIZE(full_ddeny);
    m->dns_resolvers = full_res;
    m->n_dns_resolvers = ARRAY_SIZE(full_res);
    m->log_allowed_flows = true;
    m->max_sessions_per_uid = 12;
    m->audit_retention_days = 90;
    m->audit_max_bytes = 5ull << 20;
    m->min_landlock_abi = 4;
}

static void full_policy(struct policy *ret) {
    Lianyaohu__V1__Policy m;
    Lianyaohu__V1__DestRule dr[4], *ceil[2], *deny[2];
    char why[POLICY_WHY_MAX] = "";
    full_msg(&m, dr, ceil, deny);
    if (policy_from_msg(&m, ret, why, sizeof(why)) != 0)
        fail_msg("the full sample is refused: %s", why);
}

/* ---- policy_from_msg: accepted ---------------------------------------------------- */

/* The default, as a message and back, is the default (version fields zero). */
static void test_from_msg_default_round_trip(void **state) {
    struct fx *f = *state;
    accepted(f);
    policy_equal(&f->out, &f->base);
    assert_int_equal(f->out.n_if_patterns, 6);
    assert_string_equal(f->out.if_patterns[0], "tun*");
    assert_int_equal(f->out.n_lan_ceiling, DR_BLOCKED_V4_COUNT + DR_BLOCKED_V6_COUNT);
    assert_true(f->out.permit_no_firewall);
    assert_int_equal(f->out.max_sessions_per_uid, POLICY_DEFAULT_SESSIONS);
}

/* Only the required field: where proto3's zero means what the default means
 * the result equals the default; where it does not, the message is taken at
 * its word (a zero is a choice: off, none, no limit). */
static void test_from_msg_minimal(void **state) {
    struct fx *f = *state;
    Lianyaohu__V1__Policy m = LIANYAOHU__V1__POLICY__INIT;
    struct policy def;

    policy_default(&def);
    m.allowed_interface_patterns = f->h.pat;
    m.n_allowed_interface_patterns = f->base.n_if_patterns;
    f->h.m = m;
    accepted(f);
    /* as the default */
    assert_int_equal(f->out.version, 0);
    assert_int_equal(f->out.set_by_uid, 0);
    assert_int_equal(f->out.set_ms, 0);
    assert_int_equal(f->out.n_if_patterns, def.n_if_patterns);
    STRINGS_EQUAL(f->out.if_patterns, def.if_patterns, def.n_if_patterns);
    assert_int_equal(f->out.n_always_deny, def.n_always_deny);
    assert_int_equal(f->out.n_env_block, def.n_env_block);
    assert_int_equal(f->out.n_writable, def.n_writable);
    assert_int_equal(f->out.n_protect, def.n_protect);
    assert_int_equal(f->out.forbid_allow_socket, def.forbid_allow_socket);
    assert_int_equal(f->out.n_socket_patterns, def.n_socket_patterns);
    assert_int_equal(f->out.n_domain_ceiling, def.n_domain_ceiling);
    assert_int_equal(f->out.n_deny_domains, def.n_deny_domains);
    assert_int_equal(f->out.n_resolvers, def.n_resolvers);
    assert_int_equal(f->out.min_landlock_abi, def.min_landlock_abi);
    assert_int_equal(policy_min_landlock_abi(&f->out), POLICY_DEFAULT_MIN_LANDLOCK_ABI);
    assert_int_equal(f->out.audit_retention_days, def.audit_retention_days);
    assert_int_equal(f->out.audit_max_bytes, def.audit_max_bytes);
    /* what the message says, not the default */
    assert_false(f->out.permit_non_default_route);
    assert_false(f->out.permit_no_firewall);
    assert_false(f->out.permit_shared_user_firewall);
    assert_int_equal(f->out.n_lan_ceiling, 0);
    assert_false(f->out.log_allowed_flows);
    assert_int_equal(f->out.max_sessions_per_uid, 0);
}

/* Every field lands where it belongs, in canonical form. */
static void test_from_msg_full(void **state) {
    (void)state;
    struct policy p;
    struct dr_rule want;

    full_policy(&p);
    assert_int_equal(p.n_if_patterns, 3);
    assert_string_equal(p.if_patterns[2], "x_y.z-1");
    assert_true(p.permit_non_default_route);
    assert_false(p.permit_no_firewall);
    assert_true(p.permit_shared_user_firewall);
    assert_int_equal(p.n_lan_ceiling, 2);
    want = dest("192.168.0.0/16");
    dests_equal(&p.lan_ceiling[0], &want, 1);
    want = dest("[fd00::/8]:443"); /* port_max 0 = port_min */
    dests_equal(&p.lan_ceiling[1], &want, 1);
    assert_int_equal(p.n_always_deny, 2);
    want = dest("198.51.100.0/24:22-25");
    dests_equal(&p.always_deny[0], &want, 1);
    want = dest("8.8.8.8");
    dests_equal(&p.always_deny[1], &want, 1);
    assert_int_equal(p.n_env_block, 2);
    assert_string_equal(p.env_block[0], "AWS_*");
    assert_int_equal(p.n_writable, 2);
    assert_string_equal(p.writable[1], "/srv/data");
    assert_int_equal(p.n_protect, 2);
    assert_string_equal(p.protect[0], ".bashrc");    /* no "~/" */
    assert_string_equal(p.protect[1], ".config/git"); /* no trailing '/' */
    assert_true(p.forbid_allow_socket);
    assert_int_equal(p.n_socket_patterns, 1);
    assert_string_equal(p.socket_patterns[0], "/run/user/*/pipewire-0");
    assert_int_equal(p.n_domain_ceiling, 2);
    assert_string_equal(p.domain_ceiling[0], "*.example.com"); /* lower case, no trailing dot */
    assert_string_equal(p.domain_ceiling[1], "api.example.org");
    assert_int_equal(p.n_deny_domains, 1);
    assert_string_equal(p.deny_domains[0], "evil.example.com");
    assert_int_equal(p.n_resolvers, 2);
    assert_string_equal(p.resolver_text[0], "10.8.0.1");
    assert_string_equal(p.resolver_text[1], "2001:db8::53");
    want = dest("10.8.0.1");
    dests_equal(&p.resolvers[0], &want, 1);
    want = dest("2001:db8::53");
    dests_equal(&p.resolvers[1], &want, 1);
    assert_int_equal(p.resolvers[1].prefix_len, 128);
    assert_true(p.log_allowed_flows);
    assert_int_equal(p.max_sessions_per_uid, 12);
    assert_int_equal(p.audit_retention_days, 90);
    assert_int_equal(p.audit_max_bytes, 5ull << 20);
    assert_int_equal(p.min_landlock_abi, 4);
    assert_int_equal(policy_min_landlock_abi(&p), 4);
    assert_int_equal(p.version, 0);
}

/* The bounds themselves are accepted. */
static void test_from_msg_edges_accepted(void **state) {
    struct fx *f = *state;
    char *pat[POLICY_MAX_PATTERNS];
    char p15[] = "abcdefghijklmn*", star[] = "*";

    for (size_t i = 0; i < POLICY_MAX_PATTERNS; i++)
        pat[i] = i % 2 ? p15 : star;
    f->h.m.allowed_interface_patterns = pat;
    f->h.m.n_allowed_interface_patterns = POLICY_MAX_PATTERNS;
    f->h.m.max_sessions_per_uid = POLICY_MAX_SESSIONS;
    f->h.m.audit_retention_days = POLICY_MAX_RETENTION_DAYS;
    f->h.m.audit_max_bytes = POLICY_MIN_AUDIT_BYTES;
    f->h.m.min_landlock_abi = POLICY_MAX_LANDLOCK_ABI;
    accepted(f);
    assert_int_equal(f->out.n_if_patterns, POLICY_MAX_PATTERNS);
    assert_string_equal(f->out.if_patterns[1], p15);
    assert_int_equal(f->out.max_sessions_per_uid, POLICY_MAX_SESSIONS);
    assert_int_equal(f->out.audit_retention_days, POLICY_MAX_RETENTION_DAYS);
    assert_int_equal(f->out.audit_max_bytes, POLICY_MIN_AUDIT_BYTES);
    assert_int_equal(f->out.min_landlock_abi, POLICY_MAX_LANDLOCK_ABI);
    f->h.m.audit_max_bytes = POLICY_MAX_AUDIT_BYTES;
    accepted(f);
    assert_int_equal(f->out.audit_max_bytes, POLICY_MAX_AUDIT_BYTES);
}

/* ---- policy_from_msg: refused ----------------------------------------------------- */

static void test_from_msg_refuses_patterns(void **state) {
    struct fx *f = *state;
    char *pat[POLICY_MAX_PATTERNS + 1];
    char ok[] = "tun*", p16[] = "abcdefghijklmno*", empty[] = "", inner[] = "tun*0",
         two[] = "wg**", slash[] = "tun/0", space[] = "tun 0", colon[] = "eth0:1";

    poison(&f->out);
    assert_int_equal(policy_from_msg(NULL, &f->out, f->why, sizeof(f->why)), -EINVAL);
    assert_string_equal(f->why, "policy: missing");
    untouched(&f->out);

    f->h.m.n_allowed_interface_patterns = 0;
    refused(f, -EINVAL, "allowed_interface_patterns: at least one pattern");
    for (size_t i = 0; i < ARRAY_SIZE(pat); i++)
        pat[i] = ok;
    f->h.m.allowed_interface_patterns = pat;
    f->h.m.n_allowed_interface_patterns = POLICY_MAX_PATTERNS + 1;
    refused(f, -EINVAL, "allowed_interface_patterns: 33 entries (at most 32)");

    f->h.m.n_allowed_interface_patterns = 3;
    pat[2] = empty;
    refused(f, -EINVAL, "allowed_interface_patterns[2]: must be 1..15 characters");
    pat[2] = p16;
    refused(f, -EINVAL, "allowed_interface_patterns[2]: must be 1..15 characters");
    pat[2] = inner;
    refused(f, -EINVAL, "allowed_interface_patterns[2]: 'tun*0' may hold only [A-Za-z0-9_.-] and "
                        "one trailing '*'");
    pat[2] = two;
    refused(f, -EINVAL, "allowed_interface_patterns[2]: 'wg**'");
    pat[2] = slash;
    refused(f, -EINVAL, "allowed_interface_patterns[2]: 'tun/0'");
    pat[2] = space;
    refused(f, -EINVAL, "allowed_interface_patterns[2]: 'tun 0'");
    pat[2] = colon;
    refused(f, -EINVAL, "allowed_interface_patterns[2]: 'eth0:1'");
    /* the first bad one is named */
    pat[0] = slash;
    refused(f, -EINVAL, "allowed_interface_patterns[0]: 'tun/0'");
}

static void test_from_msg_refuses_dests(void **state) {
    struct fx *f = *state;
    uint8_t pub[4] = {8, 8, 8, 0}, lan[4] = {10, 0, 0, 0}, host[4] = {10, 0, 0, 1},
            v6[16] = {0x20, 0x01, 0x0d, 0xb8};
    Lianyaohu__V1__DestRule a = wire_rule(lan, 4, 8, 0, 0), b = wire_rule(pub, 4, 24, 0, 0),
                            c = wire_rule(host, 4, 8, 0, 0), d = wire_rule(lan, 3, 8, 0, 0),
                            e = wire_rule(lan, 4, 8, 0, 80), g = wire_rule(v6, 16, 32, 90, 80);
    Lianyaohu__V1__DestRule *ceil[2], *list[2];

    /* lan_allow_ceiling: only inside the blocked ranges */
    ceil[0] = &a;
    ceil[1] = &b;
    f->h.m.lan_allow_ceiling = ceil;
    f->h.m.n_lan_allow_ceiling = 2;
    refused(f, -EINVAL, "lan_allow_ceiling rule 2: 8.8.8.0/24 is not inside a blocked range");
    ceil[1] = &c;
    refused(f, -EINVAL, "lan_allow_ceiling rule 2: 10.0.0.1/8 has host bits set");
    f->h.m.n_lan_allow_ceiling = 1;
    accepted(f);
    assert_int_equal(f->out.n_lan_ceiling, 1);

    /* always_deny: any address, well formed */
    f->h.m.always_deny = list;
    f->h.m.n_always_deny = 2;
    list[0] = &a;
    list[1] = &b;
    accepted(f);
    assert_int_equal(f->out.n_always_deny, 2);
    list[0] = &c; /* host bits beyond the prefix: refused, not masked */
    refused(f, -EINVAL, "always_deny rule 1: 10.0.0.1/8 has host bits set");
    list[0] = &d; /* neither 4 nor 16 bytes */
    refused(f, -EINVAL, "always_deny rule 1: ");
    list[0] = &e; /* port_max without port_min */
    refused(f, -EINVAL, "always_deny rule 1: ");
    list[0] = &a;
    list[1] = &g; /* port_max < port_min */
    refused(f, -EINVAL, "always_deny rule 2: ");
    list[1] = NULL;
    refused(f, -EINVAL, "always_deny rule 2 is missing");
}

/* More rules than room: refused, the list named, *ret untouched; and, as
 * policy.h promises for every refusal of policy_from_msg ("-EINVAL with why
 * naming the field"), -EINVAL (dests_from_msg's -E2BIG used to come
 * through). */
static void test_from_msg_too_many_dests(void **state) {
    struct fx *f = *state;
    uint8_t lan[4] = {10, 0, 0, 0};
    Lianyaohu__V1__DestRule a = wire_rule(lan, 4, 8, 0, 0);
    Lianyaohu__V1__DestRule *list[POLICY_MAX_CEILING + 1];
    int r_deny, r_ceil;

    for (size_t i = 0; i < ARRAY_SIZE(list); i++)
        list[i] = &a;
    f->h.m.always_deny = list;
    f->h.m.n_always_deny = POLICY_MAX_ALWAYS_DENY;
    accepted(f);
    assert_int_equal(f->out.n_always_deny, POLICY_MAX_ALWAYS_DENY);

    f->h.m.n_always_deny = POLICY_MAX_ALWAYS_DENY + 1;
    poison(&f->out);
    r_deny = policy_from_msg(&f->h.m, &f->out, f->why, sizeof(f->why));
    assert_true(r_deny < 0);
    assert_string_equal(f->why, "too many always_deny rules (33; at most 32)");
    untouched(&f->out);

    f->h.m.n_always_deny = 0;
    f->h.m.lan_allow_ceiling = list;
    f->h.m.n_lan_allow_ceiling = POLICY_MAX_CEILING;
    accepted(f);
    assert_int_equal(f->out.n_lan_ceiling, POLICY_MAX_CEILING);
    f->h.m.n_lan_allow_ceiling = POLICY_MAX_CEILING + 1;
    poison(&f->out);
    r_ceil = policy_from_msg(&f->h.m, &f->out, f->why, sizeof(f->why));
    assert_true(r_ceil < 0);
    assert_string_equal(f->why, "too many lan_allow_ceiling rules (65; at most 64)");
    untouched(&f->out);

    assert_int_equal(r_deny, -EINVAL);
    assert_int_equal(r_ceil, -EINVAL);
}

static void test_from_msg_refuses_env_paths_sockets(void **state) {
    struct fx *f = *state;
    char *v[POLICY_MAX_PROTECT + 1];
    char ok_env[] = "AWS_*", bad_env[] = "A-B", mid_star[] = "A*B", empty[] = "",
         long_env[POLICY_ENV_NAME_MAX + 2];
    char ok_wr[] = "/srv", rel[] = "srv", root[] = "/", trail[] = "/srv/", dbl[] = "/srv//x",
         dot[] = "/srv/./x", dotdot[] = "/srv/../etc", proc[] = "/proc", sys[] = "/sys/fs",
         devp[] = "/dev", procfs[] = "/procfs", ctl[] = "/srv/a\tb", dotname[] = "/srv/.x",
         long_wr[POLICY_PREFIX_MAX + 2];
    char ok_prot[] = ".ssh", bad_prot[] = "../x", bad_prot2[] = "a//b";
    char ok_sock[] = "/run/*.sock", rel_sock[] = "run/x", ctl_sock[] = "/run/\x7f";

    memset(long_env, 'A', sizeof(long_env) - 1);
    long_env[sizeof(long_env) - 1] = '\0';
    memset(long_wr, 'a', sizeof(long_wr) - 1);
    long_wr[0] = '/';
    long_wr[sizeof(long_wr) - 1] = '\0';

    /* extra_env_block */
    for (size_t i = 0; i < ARRAY_SIZE(v); i++)
        v[i] = ok_env;
    f->h.m.extra_env_block = v;
    f->h.m.n_extra_env_block = POLICY_MAX_ENV + 1;
    refused(f, -EINVAL, "extra_env_block: 33 entries (at most 32)");
    f->h.m.n_extra_env_block = 2;
    v[1] = long_env;
    refused(f, -EINVAL, "extra_env_block[1]: longer than 63 characters");
    v[1] = bad_env;
    refused(f, -EINVAL, "extra_env_block[1]: environment block pattern 'A-B' must be a variable");
    v[1] = mid_star;
    refused(f, -EINVAL, "extra_env_block[1]: ");
    v[1] = empty;
    refused(f, -EINVAL, "extra_env_block[1]: empty environment block pattern");
    f->h.m.n_extra_env_block = 0;

    /* writable_prefixes */
    for (size_t i = 0; i < ARRAY_SIZE(v); i++)
        v[i] = ok_wr;
    f->h.m.writable_prefixes = v;
    f->h.m.n_writable_prefixes = POLICY_MAX_WRITABLE + 1;
    refused(f, -EINVAL, "writable_prefixes: 17 entries (at most 16)");
    f->h.m.n_writable_prefixes = 2;
    struct {
        char *s;
        const char *why;
    } wr[] = {
        {rel, "writable_prefixes[1]: 'srv' is not an absolute path"},
        {empty, "writable_prefixes[1]: '' is not an absolute path"},
        {root, "writable_prefixes[1]: '/' would allow every path"},
        {trail, "writable_prefixes[1]: '/srv/' is not normalised (trailing '/')"},
        {dbl, "writable_prefixes[1]: '/srv//x' is not normalised (empty, '.' or '..' component)"},
        {dot, "writable_prefixes[1]: '/srv/./x' is not normalised"},
        {dotdot, "writable_prefixes[1]: '/srv/../etc' is not normalised"},
        {proc, "writable_prefixes[1]: '/proc' is at or below /proc"},
        {sys, "writable_prefixes[1]: '/sys/fs' is at or below /sys"},
        {devp, "writable_prefixes[1]: '/dev' is at or below /dev"},
        {ctl, "writable_prefixes[1]: has a control character"},
        {long_wr, "writable_prefixes[1]: longer than 511 bytes"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(wr); i++) {
        v[1] = wr[i].s;
        refused(f, -EINVAL, wr[i].why);
    }
    v[1] = procfs; /* a name that merely starts like /proc */
    accepted(f);
    assert_string_equal(f->out.writable[1], "/procfs");
    v[1] = dotname;
    accepted(f);
    assert_string_equal(f->out.writable[1], "/srv/.x");
    f->h.m.n_writable_prefixes = 0;

    /* protect_paths */
    for (size_t i = 0; i < ARRAY_SIZE(v); i++)
        v[i] = ok_prot;
    f->h.m.protect_paths = v;
    f->h.m.n_protect_paths = POLICY_MAX_PROTECT + 1;
    refused(f, -EINVAL, "protect_paths: 33 entries (at most 32)");
    f->h.m.n_protect_paths = 2;
    v[1] = bad_prot;
    refused(f, -EINVAL, "protect_paths[1]: '../x' ");
    v[1] = bad_prot2;
    refused(f, -EINVAL, "protect_paths[1]: 'a//b' ");
    v[1] = empty;
    refused(f, -EINVAL, "protect_paths[1]: '' ");
    f->h.m.n_protect_paths = 0;

    /* allow_socket_patterns */
    for (size_t i = 0; i < ARRAY_SIZE(v); i++)
        v[i] = ok_sock;
    f->h.m.allow_socket_patterns = v;
    f->h.m.n_allow_socket_patterns = POLICY_MAX_SOCKET_PATTERNS + 1;
    refused(f, -EINVAL, "allow_socket_patterns: 17 entries (at most 16)");
    f->h.m.n_allow_socket_patterns = 2;
    v[1] = rel_sock;
    refused(f, -EINVAL, "allow_socket_patterns[1]: an absolute path pattern");
    v[1] = empty;
    refused(f, -EINVAL, "allow_socket_patterns[1]: an absolute path pattern");
    v[1] = ctl_sock;
    refused(f, -EINVAL, "allow_socket_patterns[1]: has a control character");
}

static void test_from_msg_refuses_domains(void **state) {
    struct fx *f = *state;
    char *v[POLICY_MAX_DOMAINS + 1];
    char ok[] = "example.com", star[] = "*", empty_label[] = "a..example.com",
         inner_star[] = "www.*.example.com", bad_char[] = "exa mple.com", empty[] = "",
         /* 63 + 1 + 63 + 1 + 10 = 138 characters: a valid name, too long a pattern here */
         long_name[139], at_max[POLICY_DOMAIN_MAX + 1];

    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[63] = '.';
    long_name[127] = '.';
    long_name[sizeof(long_name) - 1] = '\0';
    memset(at_max, 'b', sizeof(at_max) - 1);
    at_max[63] = '.';
    at_max[sizeof(at_max) - 1] = '\0';

    for (size_t i = 0; i < ARRAY_SIZE(v); i++)
        v[i] = ok;
    f->h.m.allowed_domains = v;
    f->h.m.n_allowed_domains = POLICY_MAX_DOMAINS + 1;
    refused(f, -EINVAL, "allowed_domains: 33 entries (at most 32)");
    f->h.m.n_allowed_domains = 2;
    v[1] = star;
    refused(f, -EINVAL, "allowed_domains[1]: '*': '*' alone would allow every name");
    v[1] = empty_label;
    refused(f, -EINVAL, "allowed_domains[1]: 'a..example.com': an empty label");
    v[1] = inner_star;
    refused(f, -EINVAL, "allowed_domains[1]: 'www.*.example.com': '*' only as the first label");
    v[1] = bad_char;
    refused(f, -EINVAL, "allowed_domains[1]: 'exa mple.com': ");
    v[1] = empty;
    refused(f, -EINVAL, "allowed_domains[1]: '': an empty name");
    v[1] = long_name;
    refused(f, -EINVAL, "allowed_domains[1]: longer than 127 characters");
    v[1] = at_max;
    accepted(f);
    assert_int_equal(strlen(f->out.domain_ceiling[1]), POLICY_DOMAIN_MAX);

    /* the same checks, named for the deny list */
    f->h.m.n_allowed_domains = 0;
    f->h.m.always_deny_domains = v;
    f->h.m.n_always_deny_domains = POLICY_MAX_DOMAINS + 1;
    refused(f, -EINVAL, "always_deny_domains: 33 entries (at most 32)");
    f->h.m.n_always_deny_domains = 2;
    v[1] = star;
    refused(f, -EINVAL, "always_deny_domains[1]: '*': ");
    v[1] = long_name;
    refused(f, -EINVAL, "always_deny_domains[1]: longer than 127 characters");
}

static void test_from_msg_refuses_resolvers(void **state) {
    struct fx *f = *state;
    char *v[POLICY_MAX_RESOLVERS + 1];
    char ok[] = "10.8.0.1", lo[] = "127.0.0.1", lo6[] = "::1", any[] = "0.0.0.0",
         ll[] = "169.254.1.1", ll6[] = "fe80::1", mc[] = "224.0.0.251", mapped[] = "::ffff:1.2.3.4",
         port[] = "1.1.1.1:53", name[] = "dns.example.com", cidr[] = "10.0.0.0/8";

    for (size_t i = 0; i < ARRAY_SIZE(v); i++)
        v[i] = ok;
    f->h.m.dns_resolvers = v;
    f->h.m.n_dns_resolvers = POLICY_MAX_RESOLVERS + 1;
    refused(f, -EINVAL, "dns_resolvers: 9 entries (at most 8)");
    f->h.m.n_dns_resolvers = POLICY_MAX_RESOLVERS;
    accepted(f);
    assert_int_equal(f->out.n_resolvers, POLICY_MAX_RESOLVERS);
    char *bad[] = {lo, lo6, any, ll, ll6, mc, mapped, port, name, cidr};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char want[160];
        v[3] = bad[i];
        snprintf(want, sizeof(want), "dns_resolvers[3]: '%s' is not a resolver's address", bad[i]);
        refused(f, -EINVAL, want);
    }
}

static void test_from_msg_refuses_numbers(void **state) {
    struct fx *f = *state;

    f->h.m.max_sessions_per_uid = POLICY_MAX_SESSIONS + 1;
    refused(f, -EINVAL, "max_sessions_per_uid: 4097 is above 4096 (0 = no limit)");
    f->h.m.max_sessions_per_uid = 0;
    f->h.m.audit_retention_days = POLICY_MAX_RETENTION_DAYS + 1;
    refused(f, -EINVAL, "audit_retention_days: 36501 is above 36500");
    f->h.m.audit_retention_days = 0;
    f->h.m.audit_max_bytes = POLICY_MIN_AUDIT_BYTES - 1;
    refused(f, -EINVAL, "audit_max_bytes: 1048575 is outside 1 MiB..1 TiB");
    f->h.m.audit_max_bytes = POLICY_MAX_AUDIT_BYTES + 1;
    refused(f, -EINVAL, "audit_max_bytes: 1099511627777 is outside 1 MiB..1 TiB");
    f->h.m.audit_max_bytes = 0;
    f->h.m.min_landlock_abi = POLICY_MAX_LANDLOCK_ABI + 1;
    refused(f, -EINVAL, "min_landlock_abi: 256 is above 255 (0 = the built-in 6)");
    f->h.m.min_landlock_abi = 0;
    accepted(f);
}

/* why may be NULL or empty-sized: the refusal is still a refusal. */
static void test_from_msg_no_why(void **state) {
    struct fx *f = *state;
    char why[4] = "xyz";

    f->h.m.n_allowed_interface_patterns = 0;
    poison(&f->out);
    assert_int_equal(policy_from_msg(&f->h.m, &f->out, NULL, 0), -EINVAL);
    assert_int_equal(policy_from_msg(&f->h.m, &f->out, why, 0), -EINVAL);
    assert_string_equal(why, "xyz");
    assert_int_equal(policy_from_msg(&f->h.m, &f->out, why, sizeof(why)), -EINVAL);
    assert_string_equal(why, "all"); /* truncated, terminated */
    untouched(&f->out);
}

/* ---- the stored blob -------------------------------------------------------------- */

static void round_trip(const struct policy *p) {
    uint8_t *b1 = NULL, *b2 = NULL;
    size_t n1 = 0, n2 = 0;
    struct policy *back = calloc(1, sizeof(*back));
    char why[POLICY_WHY_MAX] = "";

    assert_non_null(back);
    assert_int_equal(policy_pack(p, &b1, &n1), 0);
    assert_true(n1 > 0);
    if (policy_unpack(b1, n1, back, why, sizeof(why)) != 0)
        fail_msg("own blob refused: %s", why);
    policy_equal(back, p);
    /* canonical: packing what was unpacked gives the same bytes */
    assert_int_equal(policy_pack(back, &b2, &n2), 0);
    assert_int_equal(n1, n2);
    assert_memory_equal(b1, b2, n1);
    free(b1);
    free(b2);
    free(back);
}

static void test_pack_round_trip(void **state) {
    struct fx *f = *state;
    struct policy *p = calloc(1, sizeof(*p));

    assert_non_null(p);
    round_trip(&f->base);
    full_policy(p);
    round_trip(p);
    /* the version fields are state.db's row, not the blob's */
    p->version = 7;
    p->set_by_uid = 1000;
    p->set_ms = 1700000000000;
    uint8_t *b = NULL;
    size_t n = 0;
    assert_int_equal(policy_pack(p, &b, &n), 0);
    assert_int_equal(policy_unpack(b, n, &f->out, f->why, sizeof(f->why)), 0);
    assert_int_equal(f->out.version, 0);
    assert_int_equal(f->out.set_by_uid, 0);
    assert_int_equal(f->out.set_ms, 0);
    free(b);
    free(p);
}

/* unpack's answer on damaged bytes: refused with a why and *ret untouched,
 * or a policy that is valid (it packs and unpacks again to itself). */
static int unpack_checked(const uint8_t *b, size_t n, struct policy *out) {
    char why[POLICY_WHY_MAX];
    strcpy(why, "(not set)");
    poison(out);
    int r = policy_unpack(b, n, out, why, sizeof(why));
    if (r < 0) {
        if (r != -EBADMSG && r != -EINVAL && r != -E2BIG)
            fail_msg("unexpected %d: %s", r, why);
        if (strcmp(why, "(not set)") == 0 || why[0] == '\0')
            fail_msg("refused (%d) without a why", r);
        untouched(out);
    } else {
        assert_int_equal(r, 0);
        round_trip(out);
    }
    return r;
}

static void test_unpack_truncated(void **state) {
    struct fx *f = *state;
    struct policy *p = calloc(1, sizeof(*p));
    uint8_t *b = NULL, *only_pat = NULL;
    size_t n = 0, n_pat = 0, refused_n = 0;

    assert_non_null(p);
    full_policy(p);
    assert_int_equal(policy_pack(p, &b, &n), 0);
    /* nothing: an empty message, which has no interface pattern */
    poison(&f->out);
    assert_int_equal(policy_unpack(b, 0, &f->out, f->why, sizeof(f->why)), -EINVAL);
    assert_non_null(strstr(f->why, "allowed_interface_patterns: at least one pattern"));
    untouched(&f->out);
    /* the last byte missing: permit_lan_proxy's tag without its value */
    poison(&f->out);
    assert_int_equal(policy_unpack(b, n - 1, &f->out, f->why, sizeof(f->why)), -EBADMSG);
    assert_string_equal(f->why, "the stored policy does not decode");
    untouched(&f->out);
    /* one byte: a tag without its value */
    assert_int_equal(policy_unpack(b, 1, &f->out, f->why, sizeof(f->why)), -EBADMSG);
    /* every length: never a crash, never an invalid policy */
    for (size_t k = 0; k < n; k++)
        if (unpack_checked(b, k, &f->out) < 0)
            refused_n++;
    assert_true(refused_n > n / 2);

    /* Not a refusal, and not one the blob could make: a cut at a field
     * boundary is a shorter, valid message (protobuf has no length or
     * checksum); the stored form relies on sqlite for its integrity. Here:
     * the blob cut after allowed_interface_patterns is the policy with only
     * them, always_deny and the rest gone. */
    p->n_lan_ceiling = p->n_always_deny = p->n_env_block = p->n_writable = p->n_protect = 0;
    p->n_socket_patterns = p->n_domain_ceiling = p->n_deny_domains = p->n_resolvers = 0;
    p->permit_non_default_route = p->permit_shared_user_firewall = false;
    p->forbid_allow_socket = p->log_allowed_flows = false;
    p->forbid_proxy_only = p->permit_lan_proxy = false;
    p->max_sessions_per_uid = p->audit_retention_days = p->min_landlock_abi = 0;
    p->audit_max_bytes = 0;
    assert_int_equal(policy_pack(p, &only_pat, &n_pat), 0);
    assert_true(n_pat < n);
    assert_memory_equal(b, only_pat, n_pat);
    assert_int_equal(policy_unpack(b, n_pat, &f->out, f->why, sizeof(f->why)), 0);
    policy_equal(&f->out, p);
    assert_int_equal(f->out.n_always_deny, 0);
    free(only_pat);
    free(b);
    free(p);
}

static void test_unpack_flipped(void **state) {
    struct fx *f = *state;
    struct policy *p = calloc(1, sizeof(*p));
    uint8_t *b = NULL;
    size_t n = 0, refused_n = 0, tries = 0;
    static const uint8_t masks[] = {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff};

    assert_non_null(p);
    full_policy(p);
    assert_int_equal(policy_pack(p, &b, &n), 0);
    /* the first field's tag (1, length-delimited: 0x0a) as wire type 7 */
    assert_int_equal(b[0], 0x0a);
    b[0] = 0x0f;
    poison(&f->out);
    assert_int_equal(policy_unpack(b, n, &f->out, f->why, sizeof(f->why)), -EBADMSG);
    assert_string_equal(f->why, "the stored policy does not decode");
    untouched(&f->out);
    /* its length past the end (a two-byte varint: 0x7f | 't' << 7) */
    b[0] = 0x0a;
    assert_int_equal(b[1], strlen("tun*"));
    b[1] = 0xff;
    assert_int_equal(policy_unpack(b, n, &f->out, f->why, sizeof(f->why)), -EBADMSG);
    /* one character of a pattern out of the grammar */
    b[1] = (uint8_t)strlen("tun*");
    assert_int_equal(b[2], 't');
    b[2] = '/';
    assert_int_equal(policy_unpack(b, n, &f->out, f->why, sizeof(f->why)), -EINVAL);
    assert_non_null(strstr(f->why, "allowed_interface_patterns[0]: '/un*'"));
    b[2] = 't';
    assert_int_equal(policy_unpack(b, n, &f->out, f->why, sizeof(f->why)), 0);
    policy_equal(&f->out, p);
    /* every byte, every bit: never a crash, never an invalid policy */
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < ARRAY_SIZE(masks); k++) {
            b[i] ^= masks[k];
            if (unpack_checked(b, n, &f->out) < 0)
                refused_n++;
            tries++;
            b[i] ^= masks[k];
        }
    assert_true(refused_n > 0 && refused_n < tries);
    free(b);
    free(p);
}

static void test_unpack_trailing(void **state) {
    struct fx *f = *state;
    uint8_t *b = NULL, *x;
    size_t n = 0;
    /* field 99, varint 1: a field this lyhd does not know */
    static const uint8_t unknown[] = {0x98, 0x06, 0x01};
    /* field 10 (max_sessions_per_uid), varint 5000 */
    static const uint8_t sessions[] = {0x50, 0x88, 0x27};
    /* field 1 as a varint: the wrong wire type for a string */
    static const uint8_t wrong_type[] = {0x08, 0x01};

    assert_int_equal(policy_pack(&f->base, &b, &n), 0);
    x = malloc(n + 8);
    assert_non_null(x);
    memcpy(x, b, n);

    /* a zero byte: tag 0 is no field */
    x[n] = 0x00;
    poison(&f->out);
    assert_int_equal(policy_unpack(x, n + 1, &f->out, f->why, sizeof(f->why)), -EBADMSG);
    assert_string_equal(f->why, "the stored policy does not decode");
    untouched(&f->out);
    /* a varint that never ends */
    x[n] = 0xff;
    assert_int_equal(policy_unpack(x, n + 1, &f->out, f->why, sizeof(f->why)), -EBADMSG);
    x[n + 1] = 0xff;
    assert_int_equal(policy_unpack(x, n + 2, &f->out, f->why, sizeof(f->why)), -EBADMSG);
    /* a known field with the wrong wire type */
    memcpy(x + n, wrong_type, sizeof(wrong_type));
    assert_int_equal(policy_unpack(x, n + sizeof(wrong_type), &f->out, f->why, sizeof(f->why)),
                     -EBADMSG);
    /* a repeated scalar field decodes (protobuf: the last wins) and is then
     * validated like any value */
    memcpy(x + n, sessions, sizeof(sessions));
    poison(&f->out);
    assert_int_equal(policy_unpack(x, n + sizeof(sessions), &f->out, f->why, sizeof(f->why)),
                     -EINVAL);
    assert_non_null(strstr(f->why, "max_sessions_per_uid: 5000 is above 4096"));
    untouched(&f->out);
    /* an unknown field is dropped (fuzz/fuzz_policy.c relies on this): the
     * policy is the one without it */
    memcpy(x + n, unknown, sizeof(unknown));
    assert_int_equal(policy_unpack(x, n + sizeof(unknown), &f->out, f->why, sizeof(f->why)), 0);
    policy_equal(&f->out, &f->base);
    free(x);
    free(b);
}

/* A blob of another message is not a policy. There is no version byte in the
 * blob (the version is state.db's row), so "another version" of the stored
 * form is another message. */
static void test_unpack_other_message(void **state) {
    struct fx *f = *state;
    Lianyaohu__V1__PolicyReply rep = LIANYAOHU__V1__POLICY_REPLY__INIT;
    uint8_t buf[4096];
    size_t n;

    /* PolicyReply: its version is field 1 as a varint, the wrong wire type
     * for Policy's field 1 (a string) */
    rep.version = 3;
    rep.policy = &f->h.m;
    n = lianyaohu__v1__policy_reply__get_packed_size(&rep);
    assert_true(n <= sizeof(buf));
    lianyaohu__v1__policy_reply__pack(&rep, buf);
    poison(&f->out);
    assert_int_equal(policy_unpack(buf, n, &f->out, f->why, sizeof(f->why)), -EBADMSG);
    assert_string_equal(f->why, "the stored policy does not decode");
    untouched(&f->out);
    /* no why buffer: still refused */
    assert_int_equal(policy_unpack(buf, n, &f->out, NULL, 0), -EBADMSG);
}

/* ---- matching --------------------------------------------------------------------- */

static void test_iface_ok(void **state) {
    struct fx *f = *state;
    struct policy *p = &f->base;

    /* the default: common VPN clients */
    assert_true(policy_iface_ok(p, "tun0"));
    assert_true(policy_iface_ok(p, "tun")); /* "tun*" includes "tun" itself, as fnmatch does */
    assert_true(policy_iface_ok(p, "wg-home"));
    assert_true(policy_iface_ok(p, "tailscale0"));
    assert_true(policy_iface_ok(p, "nordlynx"));
    assert_true(policy_iface_ok(p, "mullvad-se1"));
    assert_false(policy_iface_ok(p, "mullvad")); /* "mullvad-*" */
    assert_false(policy_iface_ok(p, "nordlynx0")); /* exact */
    assert_false(policy_iface_ok(p, "eth0"));
    assert_false(policy_iface_ok(p, "lo"));
    assert_false(policy_iface_ok(p, "Tun0")); /* case matters: names are bytes */
    assert_false(policy_iface_ok(p, "xtun0")); /* a prefix, not a substring */
    assert_false(policy_iface_ok(p, ""));

    /* a literal '.' or '-' is no wildcard */
    snprintf(p->if_patterns[0], sizeof(p->if_patterns[0]), "a.b");
    p->n_if_patterns = 1;
    assert_true(policy_iface_ok(p, "a.b"));
    assert_false(policy_iface_ok(p, "axb"));
    /* "*" alone (accepted by policy_from_msg) is every name */
    snprintf(p->if_patterns[0], sizeof(p->if_patterns[0]), "*");
    assert_true(policy_iface_ok(p, "eth0"));
    assert_true(policy_iface_ok(p, ""));
    /* none: nothing */
    p->n_if_patterns = 0;
    assert_false(policy_iface_ok(p, "tun0"));
}

static void test_patterns_text(void **state) {
    struct fx *f = *state;
    char buf[200], small[8];

    policy_patterns_text(&f->base, buf, sizeof(buf));
    assert_string_equal(buf, "tun*, wg*, tailscale*, nordlynx, proton*, mullvad-*");
    policy_patterns_text(&f->base, small, sizeof(small));
    assert_string_equal(small, "tun*, w");
    f->base.n_if_patterns = 0;
    policy_patterns_text(&f->base, buf, sizeof(buf));
    assert_string_equal(buf, "");
}

static void test_dest_overlap(void **state) {
    (void)state;
    struct {
        const char *a, *b;
        bool want;
    } t[] = {
        {"192.168.1.0/24", "192.168.1.5", true},
        {"192.168.1.0/24", "192.168.0.0/16", true},
        {"192.168.1.0/24", "192.168.2.0/24", false},
        {"192.168.1.128/25", "192.168.1.0/25", false},
        {"0.0.0.0/0", "8.8.8.8", true},
        {"10.0.0.0/8", "11.0.0.0/8", false},
        {"192.168.1.0/24:22", "192.168.1.5", true},        /* no ports: every port */
        {"192.168.1.0/24:22", "192.168.1.5:443", false},
        {"192.168.1.0/24:80-90", "192.168.1.5:90-100", true}, /* one shared port */
        {"192.168.1.0/24:80-90", "192.168.1.5:91-100", false},
        {"192.168.1.0/24:80-90", "192.168.1.5:85", true},
        {"192.168.1.0/24:80-90", "192.168.2.5:85", false},
        {"fd00::/8", "fd12::1", true},
        {"fd00::/8", "fe80::1", false},
        {"fc00::/7", "fdff::1", true},
        {"::/0", "2001:db8::1", true},
        {"[fd00::/8]:443", "[fd00::1]:443", true},
        {"[fd00::/8]:443", "[fd00::1]:444", false},
        {"10.0.0.0/8", "::/0", false}, /* families never overlap */
        {"0.0.0.0/0", "::ffff:10.0.0.1", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        struct dr_rule a = dest(t[i].a), b = dest(t[i].b);
        if (policy_dest_overlap(&a, &b) != t[i].want || policy_dest_overlap(&b, &a) != t[i].want)
            fail_msg("%s and %s: want %s", t[i].a, t[i].b, t[i].want ? "overlap" : "none");
    }
}

static void test_lan_ok(void **state) {
    struct fx *f = *state;
    struct policy *p = &f->base;
    char why[POLICY_WHY_MAX];
    struct dr_rule d;

    /* the default: any LAN exception inside the blocked ranges */
    const char *ok[] = {"192.168.1.0/24", "10.0.0.5:22", "172.16.0.0/12", "100.64.0.1",
                        "127.0.0.1:8080", "fd00::1", "[fe80::/64]:80"};
    for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
        d = dest(ok[i]);
        if (!policy_lan_ok(p, &d, why, sizeof(why)))
            fail_msg("%s refused: %s", ok[i], why);
    }
    d = dest("8.8.8.8");
    assert_false(policy_lan_ok(p, &d, why, sizeof(why)));
    assert_string_equal(why, "policy: LAN exception 8.8.8.8 is not inside lan_allow_ceiling "
                             "(24 entries)");
    d = dest("192.168.0.0/15"); /* wider than 192.168/16 */
    assert_false(policy_lan_ok(p, &d, why, sizeof(why)));

    /* a ceiling with ports: exceptions within them only */
    p->lan_ceiling[0] = dest("192.168.1.0/24:443");
    p->n_lan_ceiling = 1;
    d = dest("192.168.1.5:443");
    assert_true(policy_lan_ok(p, &d, why, sizeof(why)));
    d = dest("192.168.1.0/25:443");
    assert_true(policy_lan_ok(p, &d, why, sizeof(why)));
    d = dest("192.168.1.5"); /* every port: more than the ceiling */
    assert_false(policy_lan_ok(p, &d, why, sizeof(why)));
    assert_string_equal(why, "policy: LAN exception 192.168.1.5 is not inside lan_allow_ceiling "
                             "(1 entry)");
    d = dest("192.168.1.5:443-444");
    assert_false(policy_lan_ok(p, &d, why, sizeof(why)));
    d = dest("192.168.2.5:443");
    assert_false(policy_lan_ok(p, &d, why, sizeof(why)));

    /* always_deny refuses whatever it touches, inside the ceiling or not */
    p->lan_ceiling[0] = dest("192.168.0.0/16");
    p->always_deny[0] = dest("192.168.1.0/24:22");
    p->n_always_deny = 1;
    d = dest("192.168.1.5");
    assert_false(policy_lan_ok(p, &d, why, sizeof(why)));
    assert_string_equal(why, "policy: LAN exception 192.168.1.5 overlaps always_deny "
                             "192.168.1.0/24:22");
    d = dest("192.168.0.0/16:20-30");
    assert_false(policy_lan_ok(p, &d, why, sizeof(why)));
    assert_non_null(strstr(why, "overlaps always_deny"));
    d = dest("192.168.1.5:443");
    assert_true(policy_lan_ok(p, &d, why, sizeof(why)));
    d = dest("192.168.2.5");
    assert_true(policy_lan_ok(p, &d, why, sizeof(why)));
    d = dest("10.1.1.1"); /* outside the ceiling, away from always_deny */
    assert_false(policy_lan_ok(p, &d, why, sizeof(why)));
    assert_non_null(strstr(why, "is not inside lan_allow_ceiling"));

    /* no ceiling: no exception */
    p->n_lan_ceiling = 0;
    d = dest("192.168.2.5");
    assert_false(policy_lan_ok(p, &d, why, sizeof(why)));
    assert_non_null(strstr(why, "(0 entries)"));
}

static void test_socket_ok(void **state) {
    struct fx *f = *state;
    struct policy *p = &f->base;
    char why[POLICY_WHY_MAX];

    assert_true(policy_socket_ok(p, "/run/user/1000/bus", why, sizeof(why)));
    snprintf(p->socket_patterns[0], sizeof(p->socket_patterns[0]), "/run/user/*/pipewire-0");
    p->n_socket_patterns = 1;
    assert_true(policy_socket_ok(p, "/run/user/1000/pipewire-0", why, sizeof(why)));
    /* FNM_PATHNAME: '*' stays within one component */
    assert_false(policy_socket_ok(p, "/run/user/1000/x/pipewire-0", why, sizeof(why)));
    assert_string_equal(why, "policy: socket /run/user/1000/x/pipewire-0 matches none of "
                             "allow_socket_patterns (1 entry)");
    p->forbid_allow_socket = true;
    assert_false(policy_socket_ok(p, "/run/user/1000/pipewire-0", why, sizeof(why)));
    assert_non_null(strstr(why, "forbid_allow_socket"));
}

/* ---- narrowing a running session's spec ------------------------------------------- */

static void spec_init(struct gspec *g) {
    memset(g, 0, sizeof(*g));
    snprintf(g->iface, sizeof(g->iface), "tun0");
    g->lan[0] = dest("192.168.1.0/24");
    g->lan[1] = dest("10.0.0.5:22");
    g->n_lan = 2;
    g->deny[0] = dest("203.0.113.0/24");
    g->n_deny = 1;
    g->allow[0] = dest("93.184.216.34:443");
    g->n_allow = 1;
}

/* Wholly within the policy: nothing changes, nothing is said. */
static void test_narrow_within_policy(void **state) {
    struct fx *f = *state;
    struct gspec g, before;
    char why[POLICY_WHY_MAX];
    bool cut = true;

    spec_init(&g);
    g.deny_default = true;
    g.dns_port = 40053;
    g.resolvers[0] = dest("10.8.0.1");
    g.n_resolvers = 1;
    assert_int_equal(gspec_add_domain(&g, "*.example.com"), 0);
    before = g;
    strcpy(why, "stale");
    assert_false(policy_narrow_spec(&f->base, &g, &cut, why, sizeof(why)));
    assert_false(cut);
    assert_string_equal(why, "");
    spec_equal(&g, &before);

    /* always_deny already among the session's deny rules: nothing to add */
    f->base.always_deny[0] = dest("203.0.113.0/24");
    f->base.n_always_deny = 1;
    cut = true;
    assert_false(policy_narrow_spec(&f->base, &g, &cut, why, sizeof(why)));
    assert_false(cut);
    spec_equal(&g, &before);
}

/* LAN exceptions the policy forbids are dropped, always_deny joins the deny
 * rules; the rest stays as it was, and a second pass changes nothing. */
static void test_narrow_drops_and_adds(void **state) {
    struct fx *f = *state;
    struct policy *p = &f->base;
    struct gspec g;
    char why[POLICY_WHY_MAX];
    bool cut = true;

    spec_init(&g);
    g.lan[2] = dest("172.16.0.1");
    g.n_lan = 3;
    p->lan_ceiling[0] = dest("192.168.0.0/16");
    p->lan_ceiling[1] = dest("172.16.0.0/12");
    p->n_lan_ceiling = 2;
    p->always_deny[0] = dest("172.16.0.0/24:53"); /* overlaps lan[2] (every port) */
    p->always_deny[1] = dest("198.51.100.7");
    p->n_always_deny = 2;

    assert_true(policy_narrow_spec(p, &g, &cut, why, sizeof(why)));
    assert_false(cut);
    assert_string_equal(why, "policy: 2 LAN exception(s) outside lan_allow_ceiling or in "
                             "always_deny removed, 2 always_deny rule(s) added");
    /* 10.0.0.5:22 (outside the ceiling) and 172.16.0.1 (always_deny) gone */
    assert_int_equal(g.n_lan, 1);
    struct dr_rule want = dest("192.168.1.0/24");
    dests_equal(&g.lan[0], &want, 1);
    assert_int_equal(g.n_deny, 3);
    want = dest("203.0.113.0/24");
    dests_equal(&g.deny[0], &want, 1);
    dests_equal(&g.deny[1], &p->always_deny[0], 1);
    dests_equal(&g.deny[2], &p->always_deny[1], 1);
    assert_false(g.deny_default);
    assert_int_equal(g.n_allow, 1);
    assert_string_equal(g.iface, "tun0");

    struct gspec before = g;
    cut = true;
    assert_false(policy_narrow_spec(p, &g, &cut, why, sizeof(why)));
    assert_false(cut);
    spec_equal(&g, &before);

    /* only drops */
    p->n_always_deny = 0;
    p->n_lan_ceiling = 0;
    assert_true(policy_narrow_spec(p, &g, &cut, why, sizeof(why)));
    assert_false(cut);
    assert_int_equal(g.n_lan, 0);
    assert_non_null(strstr(why, "1 LAN exception(s)"));
    assert_non_null(strstr(why, "0 always_deny rule(s) added"));
}

/* The interface no longer allowed: the spec keeps loopback only. */
static void test_narrow_iface_cut(void **state) {
    struct fx *f = *state;
    struct gspec g;
    char why[POLICY_WHY_MAX];
    bool cut = false;

    spec_init(&g);
    snprintf(g.iface, sizeof(g.iface), "eth0");
    assert_true(policy_narrow_spec(&f->base, &g, &cut, why, sizeof(why)));
    assert_true(cut);
    assert_string_equal(why, "policy: interface 'eth0' no longer matches allowed_interface_patterns "
                             "(tun*, wg*, tailscale*, nordlynx, proton*, mullvad-*); egress cut, "
                             "session ended");
    assert_true(g.deny_default);
    assert_int_equal(g.n_allow, 0);
    assert_int_equal(g.n_lan, 0);
    /* again: still cut (the interface still does not match) */
    cut = false;
    assert_true(policy_narrow_spec(&f->base, &g, &cut, why, sizeof(why)));
    assert_true(cut);
}

/* Proxy-only (no interface): the interface patterns do not apply;
 * forbid_proxy_only cuts it; with permit_lan_proxy off, a LAN proxy is
 * dropped (a loopback one stays), with it on, it stays. */
static void test_narrow_proxy_only(void **state) {
    struct fx *f = *state;
    struct policy *p = &f->base;
    struct gspec g;
    char why[POLICY_WHY_MAX];
    bool cut = true;

    memset(&g, 0, sizeof(g));
    g.deny_default = true;
    g.lan[0] = dest("127.0.0.1:3128");
    g.lan[1] = dest("192.168.1.5:8080");
    g.n_lan = 2;
    p->permit_lan_proxy = true;
    struct gspec before = g;
    assert_false(policy_narrow_spec(p, &g, &cut, why, sizeof(why)));
    assert_false(cut);
    spec_equal(&g, &before);

    p->permit_lan_proxy = false;
    assert_true(policy_narrow_spec(p, &g, &cut, why, sizeof(why)));
    assert_false(cut);
    assert_int_equal(g.n_lan, 1);
    dests_equal(&g.lan[0], &before.lan[0], 1);

    p->forbid_proxy_only = true;
    assert_true(policy_narrow_spec(p, &g, &cut, why, sizeof(why)));
    assert_true(cut);
    assert_string_equal(why, "policy: proxy-only mode is now forbidden (forbid_proxy_only); "
                             "egress cut, session ended");
    assert_int_equal(g.n_lan, 0);

    /* a session on a VPN keeps its LAN exceptions whatever permit_lan_proxy says */
    spec_init(&g);
    before = g;
    assert_false(policy_narrow_spec(p, &g, &cut, why, sizeof(why)));
    spec_equal(&g, &before);
}

/* always_deny that does not fit the session's deny rules cuts it. */
static void test_narrow_deny_overflow(void **state) {
    struct fx *f = *state;
    struct policy *p = &f->base;
    struct gspec g;
    char why[POLICY_WHY_MAX], txt[32];
    bool cut = false;

    spec_init(&g);
    for (size_t i = 0; i < GSPEC_MAX_DESTS - 1; i++) {
        snprintf(txt, sizeof(txt), "203.0.113.%zu", i);
        g.deny[i] = dest(txt);
    }
    g.n_deny = GSPEC_MAX_DESTS - 1;
    p->always_deny[0] = dest("198.51.100.1");
    p->n_always_deny = 1;
    /* one free place: it fits */
    assert_true(policy_narrow_spec(p, &g, &cut, why, sizeof(why)));
    assert_false(cut);
    assert_int_equal(g.n_deny, GSPEC_MAX_DESTS);
    /* none left */
    p->always_deny[1] = dest("198.51.100.2");
    p->n_always_deny = 2;
    assert_true(policy_narrow_spec(p, &g, &cut, why, sizeof(why)));
    assert_true(cut);
    assert_string_equal(why, "policy: always_deny does not fit the session's deny rules; egress "
                             "cut, session ended");
    assert_true(g.deny_default);
    assert_int_equal(g.n_allow, 0);
    assert_int_equal(g.n_lan, 0);
    assert_int_equal(g.n_deny, GSPEC_MAX_DESTS);
}

/* Names are not the spec's to narrow: a session's domain allowlist and
 * resolvers stay as they are when the policy's domain lists change; the
 * forwarder asks policy_domain_ok of the policy in force at every query
 * (daemon/dns_fwd.c), and that answer follows the new lists at once. */
static void test_narrow_leaves_names(void **state) {
    struct fx *f = *state;
    struct policy *p = &f->base;
    struct gspec g, before;
    char why[POLICY_WHY_MAX];
    bool cut = true;

    spec_init(&g);
    g.dns_port = 40053;
    g.resolvers[0] = dest("10.8.0.1");
    g.n_resolvers = 1;
    assert_int_equal(gspec_add_domain(&g, "*.example.com"), 0);
    assert_int_equal(gspec_add_domain(&g, "evil.example.org"), 0);
    before = g;
    snprintf(p->domain_ceiling[0], sizeof(p->domain_ceiling[0]), "api.example.com");
    p->n_domain_ceiling = 1;
    snprintf(p->deny_domains[0], sizeof(p->deny_domains[0]), "evil.example.org");
    p->n_deny_domains = 1;
    snprintf(p->resolver_text[0], sizeof(p->resolver_text[0]), "10.9.0.1");
    p->resolvers[0] = dest("10.9.0.1");
    p->n_resolvers = 1;
    assert_false(policy_narrow_spec(p, &g, &cut, why, sizeof(why)));
    assert_false(cut);
    spec_equal(&g, &before);
    /* ... and the answers for those names follow the policy */
    assert_false(policy_domain_pattern_ok(p, "*.example.com"));
    assert_false(policy_domain_ok(p, "www.example.com", true));
    assert_true(policy_domain_ok(p, "api.example.com", true));
    assert_false(policy_domain_ok(p, "evil.example.org", false));
}

/* policy.h: on a cut "the spec is made reject-all (loopback only)": its
 * domain allowlist goes too (a cut spec used to keep it, and the renderer,
 * daemon/guard.c: domain_sets = dns_port && n_domains, still accepted flows
 * to the addresses in the session's domain sets until the session was
 * killed). */
static void test_narrow_cut_drops_domain_allowlist(void **state) {
    struct fx *f = *state;
    struct gspec g;
    char why[POLICY_WHY_MAX];
    bool cut = false;

    spec_init(&g);
    snprintf(g.iface, sizeof(g.iface), "eth0");
    g.dns_port = 40053;
    g.resolvers[0] = dest("10.8.0.1");
    g.n_resolvers = 1;
    assert_int_equal(gspec_add_domain(&g, "*.example.com"), 0);
    assert_true(policy_narrow_spec(&f->base, &g, &cut, why, sizeof(why)));
    assert_true(cut);
    assert_true(g.deny_default);
    assert_int_equal(g.n_allow, 0);
    assert_int_equal(g.n_lan, 0);
    /* nothing left that opens the interface */
    assert_int_equal(g.n_domains, 0);
}

/* ---- domains ---------------------------------------------------------------------- */

static void test_domain_ok(void **state) {
    struct fx *f = *state;
    struct policy *p = &f->base;

    /* the default: no lists, every name */
    assert_true(policy_domain_ok(p, "example.com", true));
    assert_true(policy_domain_ok(p, "example.com", false));

    snprintf(p->deny_domains[0], sizeof(p->deny_domains[0]), "*.evil.com");
    snprintf(p->deny_domains[1], sizeof(p->deny_domains[1]), "bad.example.com");
    p->n_deny_domains = 2;
    /* with no ceiling: only the deny list matters, with or without allowlist */
    assert_false(policy_domain_ok(p, "a.evil.com", false));
    assert_false(policy_domain_ok(p, "a.b.evil.com", true));
    assert_true(policy_domain_ok(p, "evil.com", false)); /* "*.name": not the name itself */
    assert_true(policy_domain_ok(p, "notevil.com", false));
    assert_false(policy_domain_ok(p, "bad.example.com", false));
    assert_true(policy_domain_ok(p, "x.bad.example.com", false)); /* exact */
    assert_true(policy_domain_ok(p, "www.example.com", true));

    snprintf(p->domain_ceiling[0], sizeof(p->domain_ceiling[0]), "*.example.com");
    snprintf(p->domain_ceiling[1], sizeof(p->domain_ceiling[1]), "example.org");
    p->n_domain_ceiling = 2;
    /* a session with an allowlist: within the ceiling */
    assert_true(policy_domain_ok(p, "www.example.com", true));
    assert_true(policy_domain_ok(p, "a.b.example.com", true));
    assert_false(policy_domain_ok(p, "example.com", true));
    assert_true(policy_domain_ok(p, "example.org", true));
    assert_false(policy_domain_ok(p, "www.example.org", true));
    assert_false(policy_domain_ok(p, "example.net", true));
    assert_false(policy_domain_ok(p, "wwwexample.com", true));
    /* deny wins inside the ceiling */
    assert_false(policy_domain_ok(p, "bad.example.com", true));
    /* a session without an allowlist: the ceiling does not apply */
    assert_true(policy_domain_ok(p, "example.net", false));
    assert_false(policy_domain_ok(p, "a.evil.com", false));
}

static void test_domain_pattern_ok(void **state) {
    struct fx *f = *state;
    struct policy *p = &f->base;

    /* no ceiling: any pattern */
    assert_true(policy_domain_pattern_ok(p, "*.com"));
    assert_true(policy_domain_pattern_ok(p, "anything.example"));

    snprintf(p->domain_ceiling[0], sizeof(p->domain_ceiling[0]), "*.example.com");
    snprintf(p->domain_ceiling[1], sizeof(p->domain_ceiling[1]), "example.org");
    p->n_domain_ceiling = 2;
    struct {
        const char *pattern;
        bool want;
    } t[] = {
        {"*.example.com", true},     /* the entry itself */
        {"www.example.com", true},   /* a name below */
        {"a.b.example.com", true},
        {"*.a.example.com", true},   /* every name it matches is below example.com */
        {"example.com", false},      /* "*.name" is not the name */
        {"*.com", false},            /* wider */
        {"evilexample.com", false},  /* not a label boundary */
        {"*.evilexample.com", false},
        {"example.org", true},       /* exact entry */
        {"www.example.org", false},  /* an exact entry holds nothing below it */
        {"*.example.org", false},
        {"org", false},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++)
        if (policy_domain_pattern_ok(p, t[i].pattern) != t[i].want)
            fail_msg("pattern %s: want %s", t[i].pattern, t[i].want ? "allowed" : "refused");
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_from_msg_default_round_trip),
        T(test_from_msg_minimal),
        T(test_from_msg_full),
        T(test_from_msg_edges_accepted),
        T(test_from_msg_refuses_patterns),
        T(test_from_msg_refuses_dests),
        T(test_from_msg_too_many_dests),
        T(test_from_msg_refuses_env_paths_sockets),
        T(test_from_msg_refuses_domains),
        T(test_from_msg_refuses_resolvers),
        T(test_from_msg_refuses_numbers),
        T(test_from_msg_no_why),
        T(test_pack_round_trip),
        T(test_unpack_truncated),
        T(test_unpack_flipped),
        T(test_unpack_trailing),
        T(test_unpack_other_message),
        T(test_iface_ok),
        T(test_patterns_text),
        T(test_dest_overlap),
        T(test_lan_ok),
        T(test_socket_ok),
        T(test_narrow_within_policy),
        T(test_narrow_drops_and_adds),
        T(test_narrow_iface_cut),
        T(test_narrow_proxy_only),
        T(test_narrow_deny_overflow),
        T(test_narrow_leaves_names),
        T(test_narrow_cut_drops_domain_allowlist),
        T(test_domain_ok),
        T(test_domain_pattern_ok),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
