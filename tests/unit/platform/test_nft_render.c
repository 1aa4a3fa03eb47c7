/* Golden and invariant tests for the nftables renderer (no root, no kernel).
 *
 * Each case renders one scope and compares the text form byte for byte with
 * tests/unit/platform/golden/<case>.nft. LYH_UPDATE_GOLDEN=1 rewrites the golden
 * files instead (review the diff!); by default a mismatch fails and prints both. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/macros.h"
#include "golden_file.h"
#include "common/dest_rule.h"
#include "platform/linux/nft_render.h"

#ifndef LYH_NFT_GOLDEN_DIR
#error "LYH_NFT_GOLDEN_DIR must name tests/unit/platform/golden"
#endif

static void check_golden(const char *name, const char *text) {
    golden_check(LYH_NFT_GOLDEN_DIR, name, "nft", text);
}

static struct dr_rule v4(const char *a, uint8_t len, uint16_t lo, uint16_t hi) {
    struct dr_rule d = { .family = AF_INET, .prefix_len = len, .port_min = lo, .port_max = hi };
    assert_int_equal(inet_pton(AF_INET, a, d.addr), 1);
    return d;
}

static struct dr_rule v6(const char *a, uint8_t len, uint16_t lo, uint16_t hi) {
    struct dr_rule d = { .family = AF_INET6, .prefix_len = len, .port_min = lo, .port_max = hi };
    assert_int_equal(inet_pton(AF_INET6, a, d.addr), 1);
    return d;
}

static struct nftr_input session_input(void) {
    return (struct nftr_input){
        .scope = NFTR_SCOPE_SESSION,
        .session_id = "7f3a9c01",
        .cgroup_id = 4242,
        .iface = "tun0",
        .log = { .group = NFTR_DEFAULT_NFLOG_GROUP, .rate = NFTR_DEFAULT_LOG_RATE,
                 .burst = NFTR_DEFAULT_LOG_BURST },
    };
}

/* (0a): oifname VPN ct state established,related ip[6] daddr != @lan[46]
 *       tcp|udp dport != 53 counter accept */
static bool is_fast_rule(const struct nftr_rule *r) {
    return r->n_match == 4 && r->match[0].type == NFTR_M_OIFNAME &&
           strcmp(r->match[0].name, "lo") != 0 && r->match[1].type == NFTR_M_CT_ESTABLISHED &&
           r->match[2].type == NFTR_M_DADDR_SET_NE && r->match[3].type == NFTR_M_DPORT_NE &&
           r->match[3].port_min == 53 &&
           (r->match[3].l4proto == IPPROTO_TCP || r->match[3].l4proto == IPPROTO_UDP) &&
           r->verdict == NFTR_V_ACCEPT && r->counter && !r->log && !r->limit;
}

/* The first rule after the fast rules and the DNS rules: loopback's first. */
static size_t after_head(const struct nftr_chain *c) {
    size_t i = c->n_rules && c->rules[0].ct_mark_clear ? 1 : 0;
    while (i < c->n_rules && (c->rules[i].match[0].type == NFTR_M_CT_DNAT ||
                              (c->rules[i].match[0].type == NFTR_M_DPORT &&
                               c->rules[i].match[0].port_min == 53) ||
                              is_fast_rule(&c->rules[i])))
        i++;
    return i;
}

/* Invariants every rendered chain must hold, independent of the golden text. */
static void check_invariants(const struct nftr_chain *c) {
    assert_true(c->n_rules >= 2);
    for (size_t i = 0; i < c->n_rules; i++) {
        const struct nftr_rule *r = &c->rules[i];
        if (r->verdict == NFTR_V_CONTINUE && r->ct_mark_clear) {
            /* the shared-user scope's first rule: gives a host packet its flow back */
            assert_int_equal(c->scope, NFTR_SCOPE_SHARED_USER);
            assert_int_equal(i, 0);
            assert_false(r->log);
            assert_false(r->counter);
        } else if (r->verdict == NFTR_V_CONTINUE) {
            /* log-only rule: limited log, no counter (so counters sum verdicts only) */
            assert_true(r->log);
            assert_false(r->counter);
            assert_true(strlen(r->log_prefix) <= 63);
            assert_true(strncmp(r->log_prefix, "lyh:", 4) == 0);
        } else {
            /* every verdict rule counts, none logs (the limit would gate the verdict) */
            assert_true(r->counter);
            assert_false(r->log);
            assert_false(r->limit);
            assert_true(r->verdict == NFTR_V_ACCEPT || r->verdict == NFTR_V_REJECT_TCP_RESET ||
                        r->verdict == NFTR_V_REJECT_ADMIN ||
                        (r->verdict == NFTR_V_DROP && r->n_match == 2 &&
                         r->match[1].type == NFTR_M_CT_INVALID)); /* lo, untracked */
        }
        if (r->verdict == NFTR_V_REJECT_TCP_RESET) {
            bool tcp = false;
            for (size_t j = 0; j < r->n_match; j++)
                tcp |= (r->match[j].type == NFTR_M_L4PROTO || r->match[j].type == NFTR_M_DPORT) &&
                       r->match[j].l4proto == IPPROTO_TCP;
            assert_true(tcp);
        }
    }
    /* fail closed: the chain ends in an unconditional reject */
    const struct nftr_rule *last = &c->rules[c->n_rules - 1];
    assert_int_equal(last->verdict, NFTR_V_REJECT_ADMIN);
    assert_int_equal(last->n_match, 0);
    /* the DNS forwarder's flows (only those chain dnsnat rewrote, only to
     * 127.0.0.1 or ::1 at one port), then loopback */
    size_t start = c->rules[0].ct_mark_clear ? 1 : 0; /* shared-user: the flow back */
    size_t first = start;
    /* then at most four fast rules (see test_fast_path) */
    while (first < start + 4 && first < c->n_rules && is_fast_rule(&c->rules[first]))
        first++;
    size_t fast = first;
    for (; first < c->n_rules && c->rules[first].match[0].type == NFTR_M_CT_DNAT; first++) {
        const struct nftr_rule *r = &c->rules[first];
        assert_int_equal(r->n_match, 3);
        assert_int_equal(r->match[1].type, NFTR_M_DADDR);
        assert_int_equal(r->match[1].prefix_len, r->match[1].family == AF_INET ? 32 : 128);
        assert_int_equal(r->match[2].type, NFTR_M_DPORT);
        assert_int_equal(r->match[2].port_min, r->match[2].port_max);
        assert_int_equal(r->verdict, NFTR_V_ACCEPT);
    }
    assert_true(first == fast || first == fast + 4);
    /* then port 53 that was not rewritten: logged and refused, udp and tcp */
    size_t dns_rejects = 0;
    for (; first > fast && first < c->n_rules && c->rules[first].match[0].type == NFTR_M_DPORT;
         first++, dns_rejects++) {
        const struct nftr_rule *r = &c->rules[first];
        assert_int_equal(r->match[0].port_min, 53);
        assert_int_equal(r->match[0].port_max, 53);
        assert_true(r->verdict == NFTR_V_CONTINUE || r->verdict == NFTR_V_REJECT_ADMIN ||
                    r->verdict == NFTR_V_REJECT_TCP_RESET);
    }
    assert_int_equal(dns_rejects, first > fast ? 4 : 0);
    for (size_t i = first; i < c->n_rules; i++)
        assert_false(is_fast_rule(&c->rules[i]));
    assert_int_equal(c->rules[first].match[0].type, NFTR_M_OIFNAME);
    assert_string_equal(c->rules[first].match[0].name, "lo");
    /* lo is accepted only towards 127.0.0.0/8 and ::1, never towards the
     * host's other addresses (its LAN address routes through lo too) */
    for (size_t i = 0; i < c->n_rules; i++) {
        const struct nftr_rule *r = &c->rules[i];
        if (r->verdict != NFTR_V_ACCEPT || r->match[0].type != NFTR_M_OIFNAME ||
            strcmp(r->match[0].name, "lo") != 0)
            continue;
        assert_true(r->n_match >= 2);
        if (r->match[1].type == NFTR_M_CT_REPLY) /* answers to a local process's flow */
            continue;
        assert_int_equal(r->match[1].type, NFTR_M_DADDR);
        if (r->match[1].family == AF_INET) {
            assert_int_equal(r->match[1].addr[0], 127); /* inside 127.0.0.0/8 */
            assert_true(r->match[1].prefix_len >= 8);
        } else {
            static const uint8_t one[16] = {[15] = 1};
            assert_int_equal(r->match[1].family, AF_INET6);
            assert_memory_equal(r->match[1].addr, one, 16);
            assert_int_equal(r->match[1].prefix_len, 128);
        }
    }
}

static void render_check(const struct nftr_input *in, const char *golden) {
    struct nftr_chain *c = NULL;
    assert_int_equal(nftr_render_chain(in, &c), 0);
    check_invariants(c);
    _cleanup_free_ char *text = NULL;
    assert_int_equal(nftr_chain_text(c, &text), 0);
    check_golden(golden, text);
    nftr_chain_free(c);
}

static void test_session_default(void **state) {
    struct nftr_input in = session_input();
    render_check(&in, "session_default");

    struct nftr_chain *c = NULL;
    assert_int_equal(nftr_render_chain(&in, &c), 0);
    assert_string_equal(c->name, "s-7f3a9c01");
    assert_int_equal(c->cgroup_id, 4242);
    assert_string_equal(c->dispatch_chain, "");
    nftr_chain_free(c);
}

static void test_session_lan_exceptions(void **state) {
    struct dr_rule lan[] = {
        v4("192.168.1.10", 32, 0, 0),     /* a printer, every port */
        v4("10.20.0.0", 16, 8000, 8080),  /* a dev subnet, port range */
        v6("fd12:3456::", 32, 22, 22),    /* ULA, one port */
    };
    struct nftr_input in = session_input();
    in.policy.lan_exceptions = lan;
    in.policy.n_lan_exceptions = ARRAY_SIZE(lan);
    render_check(&in, "session_lan_exceptions");
}

static void test_session_deny_default(void **state) {
    struct dr_rule allow[] = {
        v4("140.82.112.0", 20, 443, 443),
        v4("151.101.0.0", 16, 0, 0),
        v6("2606:50c0::", 32, 80, 443),
    };
    struct dr_rule deny[] = {
        v4("140.82.112.4", 32, 22, 22),
        v4("0.0.0.0", 0, 25, 25), /* no SMTP anywhere */
    };
    struct nftr_input in = session_input();
    in.policy.deny_default = true;
    in.policy.allow = allow;
    in.policy.n_allow = ARRAY_SIZE(allow);
    in.policy.deny = deny;
    in.policy.n_deny = ARRAY_SIZE(deny);
    render_check(&in, "session_deny_default");
}

static void test_session_ipv6_blocked(void **state) {
    struct nftr_input in = session_input();
    in.iface = "wg0";
    in.policy.ipv6_blocked = true;
    render_check(&in, "session_ipv6_blocked");
}

static void test_shared_user(void **state) {
    struct nftr_input in = session_input();
    in.scope = NFTR_SCOPE_SHARED_USER;
    in.session_id = NULL;
    in.cgroup_id = 0;
    in.uid = 1000;
    in.guard_gid = NFTR_DEFAULT_GUARD_GID;
    in.guard_gid_max = NFTR_DEFAULT_GUARD_GID + 65535; /* every user's agents */
    render_check(&in, "shared_user");

    struct nftr_chain *c = NULL;
    assert_int_equal(nftr_render_chain(&in, &c), 0);
    assert_string_equal(c->name, "LYH-U-1000");
    assert_string_equal(c->dispatch_chain, "output");
    assert_int_equal(c->dispatch.match[0].type, NFTR_M_SKUID);
    /* The user-wide chain never takes a sandboxed agent's socket: those are
     * decided by their session's own chain (issue: the skuid jump came first
     * and bypassed the session's deny rules and allowlist). */
    assert_int_equal(c->dispatch.n_match, 2);
    assert_int_equal(c->dispatch.match[1].type, NFTR_M_SKGID_NE);
    assert_int_equal(c->dispatch.match[1].id, NFTR_DEFAULT_GUARD_GID);
    assert_int_equal(c->dispatch.match[1].id_max, NFTR_DEFAULT_GUARD_GID + 65535);
    _cleanup_free_ char *dt = NULL;
    assert_int_equal(nftr_rule_text(&c->dispatch, &dt), 0);
    assert_string_equal(dt, "meta skuid 1000 meta skgid != 2000000-2065535 jump LYH-U-1000 "
                            "comment \"LYH-U-1000\"");
    assert_string_equal(c->dispatch.target, "LYH-U-1000");
    assert_string_equal(c->dispatch.comment, "LYH-U-1000");
    /* Its dispatch precedes chain output's rule that gives a host packet back
     * a flow a session started: the chain's first rule does it too, before
     * any accept on lo (else the user's own connection is refused on input
     * as the session's). */
    _cleanup_free_ char *first = NULL;
    assert_int_equal(nftr_rule_text(&c->rules[0], &first), 0);
    assert_string_equal(first, "oifname \"lo\" ct direction original ct mark & 0xc0000000 == "
                               "0x80000000 ct mark set 0x00000000");
    for (size_t i = 1; i < c->n_rules; i++)
        assert_false(c->rules[i].ct_mark_clear);
    nftr_chain_free(c);

    /* Without a guard gid to skip it is refused, not rendered wide open;
     * so is a range that runs backwards. */
    in.guard_gid_max = NFTR_DEFAULT_GUARD_GID - 1;
    assert_int_equal(nftr_render_chain(&in, &c), -EINVAL);
    in.guard_gid = 0;
    in.guard_gid_max = 0;
    assert_int_equal(nftr_render_chain(&in, &c), -EINVAL);
}

static void test_uid_fallback(void **state) {
    struct nftr_input in = session_input();
    in.scope = NFTR_SCOPE_UID;
    in.session_id = NULL;
    in.cgroup_id = 0;
    in.uid = 1000;
    render_check(&in, "uid_fallback");

    struct nftr_chain *c = NULL;
    assert_int_equal(nftr_render_chain(&in, &c), 0);
    assert_string_equal(c->name, "LYH-1000");
    assert_string_equal(c->dispatch_chain, "guarded");
    assert_string_equal(c->dispatch.comment, "LYH-1000");
    assert_true(strncmp(c->rules[after_head(c)].log_prefix, "lyh:LYH-1000:A ", 15) == 0);
    nftr_chain_free(c);
}

/* A guarded socket never answers a flow someone else started, except on lo:
 * the head of output, in every base, before the jump to guarded. On lo only
 * a listener's SYN-ACK to 127.0.0.0/8 or ::1 is decided there; nothing else
 * skips the session's chain. */
static void check_reply_rules(const struct nftr_base *b) {
    /* with inbound, one more: a host packet takes back a flow a session's
     * refused packet left with the session's mark */
    size_t clear = b->params.inbound ? 1 : 0;
    assert_int_equal(b->n_output, 4 + clear);
    if (clear) {
        const struct nftr_rule *c = &b->output[3];
        assert_true(c->ct_mark_clear);
        assert_int_equal(c->verdict, NFTR_V_CONTINUE);
        assert_int_equal(c->match[1].type, NFTR_M_SKGID_NE);
        assert_int_equal(c->match[3].type, NFTR_M_CT_MARK_ORIG);
    }
    const struct nftr_rule *r = &b->output[0];
    assert_int_equal(r->verdict, NFTR_V_DROP);
    assert_true(r->counter);
    assert_int_equal(r->n_match, 3);
    assert_int_equal(r->match[0].type, NFTR_M_SKGID);
    assert_int_equal(r->match[0].id, NFTR_DEFAULT_GUARD_GID);
    assert_int_equal(r->match[1].type, NFTR_M_CT_REPLY);
    assert_int_equal(r->match[2].type, NFTR_M_OIFNAME_NE);
    assert_string_equal(r->match[2].name, "lo");
    for (size_t i = 1; i <= 2; i++) {
        r = &b->output[i];
        assert_int_equal(r->verdict, NFTR_V_ACCEPT);
        assert_int_equal(r->n_match, 6);
        assert_int_equal(r->match[1].type, NFTR_M_CT_REPLY);
        assert_int_equal(r->match[2].type, NFTR_M_OIFNAME);
        assert_string_equal(r->match[2].name, "lo");
        assert_int_equal(r->match[3].type, NFTR_M_DADDR);
        assert_int_equal(r->match[3].family, i == 1 ? AF_INET : AF_INET6);
        assert_int_equal(r->match[3].prefix_len, i == 1 ? 8 : 128);
        assert_int_equal(r->match[4].type, NFTR_M_L4PROTO);
        assert_int_equal(r->match[4].l4proto, IPPROTO_TCP);
        assert_int_equal(r->match[5].type, NFTR_M_TCP_SYNACK);
    }
    r = &b->output[3 + clear];
    assert_int_equal(r->verdict, NFTR_V_JUMP);
    assert_int_equal(r->n_match, 1);
    assert_string_equal(r->target, NFTR_CHAIN_GUARDED);
}

static void test_base(void **state) {
    struct nftr_base_params p = {
        .guard_gid = NFTR_DEFAULT_GUARD_GID,
        .guard_gid_max = NFTR_DEFAULT_GUARD_GID + 65535,
        .cgroupv2 = true,
        .cgroup_level = 1,
        .log = { .group = 7, .rate = 2000, .burst = 1000 },
    };
    struct nftr_base *b = NULL;
    assert_int_equal(nftr_render_base(&p, &b), 0);
    _cleanup_free_ char *text = NULL;
    assert_int_equal(nftr_base_text(b, &text), 0);
    check_golden("base", text);
    /* output: the reply rules, the jump; guarded: the vmap, then an
     * unconditional reject last */
    check_reply_rules(b);
    /* every user's guard gid goes to guarded: the jump matches the range */
    _cleanup_free_ char *jt = NULL;
    assert_int_equal(nftr_rule_text(&b->output[b->n_output - 1], &jt), 0);
    assert_string_equal(jt, "meta skgid 2000000-2065535 jump guarded");
    assert_int_equal(b->guarded[0].verdict, NFTR_V_VMAP_CGROUP);
    assert_int_equal(b->guarded[b->n_guarded - 1].verdict, NFTR_V_REJECT_ADMIN);
    assert_int_equal(b->guarded[b->n_guarded - 1].n_match, 0);
    nftr_base_free(b);

    p.cgroupv2 = false;
    assert_int_equal(nftr_render_base(&p, &b), 0);
    _cleanup_free_ char *text2 = NULL;
    assert_int_equal(nftr_base_text(b, &text2), 0);
    check_golden("base_no_cgroupv2", text2);
    assert_int_equal(b->guarded[0].verdict, NFTR_V_CONTINUE);
    assert_int_equal(b->n_input, 0);
    nftr_base_free(b);
}

/* Sessions may listen: chain input refuses what reaches their sockets from
 * anywhere but lo, by the base cgroup one level above the sessions. */
static void test_base_inbound(void **state) {
    struct nftr_base_params p = {
        .guard_gid = NFTR_DEFAULT_GUARD_GID,
        .cgroupv2 = true,
        .cgroup_level = 3,
        .log = { .group = 7, .rate = 2000, .burst = 1000 },
        .inbound = true,
        .base_cgroup_id = 9876,
        .base_cgroup = "system.slice/lyhd.service/lianyaohu",
    };
    struct nftr_base *b = NULL;
    assert_int_equal(nftr_render_base(&p, &b), 0);
    _cleanup_free_ char *text = NULL;
    assert_int_equal(nftr_base_text(b, &text), 0);
    check_golden("base_inbound", text);
    check_reply_rules(b);
    assert_int_equal(b->guarded[0].verdict, NFTR_V_VMAP_CGROUP);
    assert_int_equal(b->n_input, 11);
    for (size_t i = 0; i < 3; i++) {
        const struct nftr_rule *r = &b->input[i];
        assert_true(r->counter);
        assert_int_equal(r->match[0].type, NFTR_M_IIFNAME_NE);
        assert_string_equal(r->match[0].name, "lo");
        assert_int_equal(r->match[1].type, NFTR_M_SOCK_CGROUP);
        assert_int_equal(r->match[1].level, 2);
        assert_int_equal(r->match[1].cgroup_id, 9876);
        /* the id is in the rule's text (the base check compares text) */
        _cleanup_free_ char *t = NULL;
        assert_int_equal(nftr_rule_text(r, &t), 0);
        assert_non_null(strstr(t, "comment \"sessions cgroup 9876\""));
    }
    /* invalid and untracked first (ct direction would not match them) */
    assert_int_equal(b->input[0].match[2].type, NFTR_M_CT_INVALID);
    assert_int_equal(b->input[0].verdict, NFTR_V_DROP);
    assert_int_equal(b->input[1].verdict, NFTR_V_REJECT_TCP_RESET);
    assert_int_equal(b->input[2].verdict, NFTR_V_REJECT_ADMIN);
    assert_int_equal(b->input[2].match[2].type, NFTR_M_CT_ORIGINAL);
    /* then every packet through lo of a flow a session started goes to
     * that session's chain lo-<id>, by its ct mark */
    assert_int_equal(b->input[3].match[0].type, NFTR_M_IIFNAME);
    assert_string_equal(b->input[3].match[0].name, "lo");
    assert_int_equal(b->input[3].n_match, 1);
    assert_int_equal(b->input[3].verdict, NFTR_V_VMAP_CTMARK);
    assert_string_equal(b->input[3].target, NFTR_MAP_LOOPBACK);
    /* a flow with a session's mark that no element of map loopback takes
     * (root deleted it) is refused, not left to the policy's accept; as in
     * lo-<id>, ICMP and TCP past its SYN pass (the answers to a refusal); a
     * session's DNS flow (mark NFTR_DNS_FLOW_MARK) is not caught here */
    for (size_t i = 4; i < 10; i++) {
        const struct nftr_rule *r = &b->input[i];
        assert_int_equal(r->match[0].type, NFTR_M_IIFNAME);
        assert_int_equal(r->match[1].type, NFTR_M_CT_MARK_ORIG);
        assert_int_equal(r->match[2].type, NFTR_M_CT_MARK_NE);
        assert_int_equal(r->match[2].id, NFTR_DNS_FLOW_MARK);
    }
    assert_int_equal(b->input[4].match[3].l4proto, IPPROTO_ICMP);
    assert_int_equal(b->input[4].verdict, NFTR_V_ACCEPT);
    assert_int_equal(b->input[5].match[3].l4proto, IPPROTO_ICMPV6);
    assert_int_equal(b->input[5].verdict, NFTR_V_ACCEPT);
    assert_int_equal(b->input[6].match[3].l4proto, IPPROTO_TCP);
    assert_int_equal(b->input[6].match[4].type, NFTR_M_CT_NOT_NEW);
    assert_int_equal(b->input[6].verdict, NFTR_V_ACCEPT);
    assert_true(b->input[7].log);
    assert_int_equal(b->input[7].n_match, 3);
    assert_string_equal(b->input[7].log_prefix, NFTR_NOSESSION_PREFIX);
    assert_int_equal(b->input[7].verdict, NFTR_V_CONTINUE);
    assert_int_equal(b->input[8].verdict, NFTR_V_REJECT_TCP_RESET);
    assert_int_equal(b->input[9].verdict, NFTR_V_REJECT_ADMIN);
    assert_int_equal(b->input[9].n_match, 3);
    /* and a host process's new flow to a session's socket is marked as
     * served by that session (so it may answer) */
    assert_int_equal(b->input[10].ct_mark_served_level, 3);
    assert_int_equal(b->input[10].n_match, 4);
    assert_int_equal(b->input[10].match[3].type, NFTR_M_CT_MARK);
    assert_int_equal(b->input[10].match[3].id, 0);
    nftr_base_free(b);

    /* The base without inbound keeps the reply rules. */
    p.inbound = false;
    assert_int_equal(nftr_render_base(&p, &b), 0);
    check_reply_rules(b);
    nftr_base_free(b);

    /* Inbound needs cgroup v2, a base above the sessions and its id. */
    b = NULL;
    p.inbound = true;
    p.cgroupv2 = false;
    assert_int_equal(nftr_render_base(&p, &b), -EINVAL);
    p.cgroupv2 = true;
    p.cgroup_level = 1;
    assert_int_equal(nftr_render_base(&p, &b), -EINVAL);
    p.cgroup_level = 3;
    p.base_cgroup_id = 0;
    assert_int_equal(nftr_render_base(&p, &b), -EINVAL);
    assert_null(b);
}

static void test_lan_sets(void **state) {
    const struct dr_rule *v;
    assert_int_equal(nftr_lan_prefixes(AF_INET, &v), 15);
    assert_int_equal(nftr_lan_prefixes(AF_INET6, &v), 9);
    assert_int_equal(nftr_lan_prefixes(AF_UNIX, &v), 0);
}

static void expect_einval(const struct nftr_input *in) {
    struct nftr_chain *c = (struct nftr_chain *)0x1;
    assert_int_equal(nftr_render_chain(in, &c), -EINVAL);
    assert_ptr_equal(c, (struct nftr_chain *)0x1); /* untouched on failure */
}

static void test_invalid(void **state) {
    static const char *bad_ids[] = {
        "", "nosession", "-lead", "Upper", "a b", "a\"b", "a/b",
        "0123456789012345678901234567890123456789012345678", /* 49 chars */
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad_ids); i++) {
        struct nftr_input in = session_input();
        in.session_id = bad_ids[i];
        expect_einval(&in);
    }
    struct nftr_input in = session_input();
    in.session_id = NULL;
    expect_einval(&in);

    static const char *bad_ifaces[] = { "", "lo", "tun*", "a\"b", "0123456789abcdef", "tun 0" };
    for (size_t i = 0; i < ARRAY_SIZE(bad_ifaces); i++) {
        in = session_input();
        in.iface = bad_ifaces[i];
        expect_einval(&in);
    }
    in = session_input();
    in.cgroup_id = 0;
    expect_einval(&in);
    in = session_input();
    in.scope = 0;
    expect_einval(&in);
    in = session_input();
    in.scope = NFTR_SCOPE_UID;
    in.uid = UINT32_MAX;
    expect_einval(&in);

    struct dr_rule bad[] = {
        v4("10.1.2.3", 8, 0, 0),   /* host bits */
        v4("10.0.0.0", 33, 0, 0),  /* prefix too long */
        v4("10.0.0.0", 8, 0, 80),  /* port_max without port_min */
        v4("10.0.0.0", 8, 90, 80), /* reversed */
        v6("fe80::1", 10, 0, 0),   /* host bits */
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        in = session_input();
        in.policy.deny = &bad[i];
        in.policy.n_deny = 1;
        expect_einval(&in);
    }
    struct dr_rule fam = v4("10.0.0.0", 8, 0, 0);
    fam.family = AF_UNIX;
    in = session_input();
    in.policy.allow = &fam;
    in.policy.n_allow = 1;
    expect_einval(&in);
    in = session_input();
    in.policy.n_lan_exceptions = 1; /* NULL array */
    expect_einval(&in);
    in = session_input();
    in.policy.lan_exceptions = &fam;
    in.policy.n_lan_exceptions = NFTR_DESTS_MAX + 1;
    expect_einval(&in);

    struct nftr_base *b = NULL;
    struct nftr_base_params p = { .guard_gid = 0, .cgroupv2 = true, .cgroup_level = 1 };
    assert_int_equal(nftr_render_base(&p, &b), -EINVAL);
    p.guard_gid = 2000000;
    p.cgroup_level = 0;
    assert_int_equal(nftr_render_base(&p, &b), -EINVAL);
    p.cgroup_level = 256;
    assert_int_equal(nftr_render_base(&p, &b), -EINVAL);
    assert_null(b);
}

static void test_longest_id_prefix_fits(void **state) {
    char id[NFTR_SESSION_ID_MAX + 1];
    memset(id, 'a', NFTR_SESSION_ID_MAX);
    id[NFTR_SESSION_ID_MAX] = '\0';
    struct nftr_input in = session_input();
    in.session_id = id;
    struct nftr_chain *c = NULL;
    assert_int_equal(nftr_render_chain(&in, &c), 0);
    check_invariants(c);
    char want[NFTR_LOG_PREFIX_MAX];
    snprintf(want, sizeof(want), "lyh:%s:A ", id);
    assert_string_equal(c->rules[after_head(c)].log_prefix, want);
    nftr_chain_free(c);
}

static void test_no_rate_limit(void **state) {
    struct nftr_input in = session_input();
    in.log.rate = 0;
    struct nftr_chain *c = NULL;
    assert_int_equal(nftr_render_chain(&in, &c), 0);
    for (size_t i = 0; i < c->n_rules; i++)
        assert_false(c->rules[i].limit);
    _cleanup_free_ char *t = NULL;
    assert_int_equal(nftr_rule_text(&c->rules[after_head(c)], &t), 0);
    assert_string_equal(
        t, "oifname \"lo\" ip daddr 127.0.0.0/8 meta l4proto icmp ct state new counter log prefix "
           "\"lyh:7f3a9c01:A \" group 7");
    nftr_chain_free(c);
}

/* vpn_rate: the log rules of new flows out of the VPN interface share it
 * (default policy: one rule; deny_default with three allowed destinations:
 * split between theirs); every other log rule keeps rate and burst. */
static void vpn_rates(const struct nftr_input *in, uint32_t *ret_n, uint32_t *ret_sum_rate,
                      uint32_t *ret_sum_burst) {
    struct nftr_chain *c = NULL;

    *ret_n = *ret_sum_rate = *ret_sum_burst = 0;
    assert_int_equal(nftr_render_chain(in, &c), 0);
    for (size_t i = 0; i < c->n_rules; i++) {
        const struct nftr_rule *r = &c->rules[i];
        _cleanup_free_ char *t = NULL;

        if (!r->log)
            continue;
        assert_true(r->limit);
        assert_int_equal(nftr_rule_text(r, &t), 0);
        if (r->vpn_log) {
            assert_non_null(strstr(t, "oifname \"tun0\""));
            assert_non_null(strstr(t, ":A \""));
            (*ret_n)++;
            *ret_sum_rate += r->limit_rate;
            *ret_sum_burst += r->limit_burst;
        } else {
            assert_int_equal(r->limit_rate, NFTR_DEFAULT_LOG_RATE);
            assert_int_equal(r->limit_burst, NFTR_DEFAULT_LOG_BURST);
        }
    }
    nftr_chain_free(c);
}

/* (0a): the fast rules come first, only where the rules below would accept
 * the same packets: the VPN open to everything, no deny rule; the IPv6 ones
 * not when IPv6 is blocked. */
static size_t fast_rules(const struct nftr_input *in, size_t *at, bool *v6) {
    struct nftr_chain *c = NULL;
    assert_int_equal(nftr_render_chain(in, &c), 0);
    check_invariants(c);
    size_t n = 0;
    *v6 = false;
    for (size_t i = 0; i < c->n_rules; i++) {
        if (!is_fast_rule(&c->rules[i]))
            continue;
        if (n == 0)
            *at = i;
        n++;
        assert_string_equal(c->rules[i].match[0].name, in->iface);
        assert_string_equal(c->rules[i].match[2].name,
                            c->rules[i].match[2].family == AF_INET ? NFTR_SET_LAN4 : NFTR_SET_LAN6);
        *v6 |= c->rules[i].match[2].family == AF_INET6;
    }
    nftr_chain_free(c);
    return n;
}

/* Does the LAN set of this family hold this whole prefix? */
static bool lan_holds(int family, const uint8_t *addr, unsigned plen) {
    const struct dr_rule *v = NULL;
    size_t n = nftr_lan_prefixes(family, &v);
    for (size_t i = 0; i < n; i++) {
        if (v[i].family != family || v[i].prefix_len > plen)
            continue;
        bool in = true;
        for (unsigned b = 0; b < v[i].prefix_len && in; b++)
            in = ((addr[b / 8] ^ v[i].addr[b / 8]) & (0x80u >> (b % 8))) == 0;
        if (in)
            return true;
    }
    return false;
}

static void test_fast_path(void **state) {
    (void)state;
    /* What keeps the fast rules off the DNS forwarder's flows (rewritten to
     * 127.0.0.1 / ::1 at its port, their oif still the VPN) is that loopback
     * is in the LAN sets; port 53 is not what they carry by then. */
    static const uint8_t lo4[4] = {127, 0, 0, 0}, lo6[16] = {[15] = 1};
    assert_true(lan_holds(AF_INET, lo4, 8));
    assert_true(lan_holds(AF_INET6, lo6, 128));
    struct dr_rule allow[] = {v4("140.82.112.0", 20, 443, 443)};
    struct dr_rule deny[] = {v4("203.0.114.0", 24, 0, 0)};
    struct dr_rule lanx[] = {v4("192.168.1.0", 24, 0, 0)};
    struct nftr_input in = session_input();
    size_t at = 99;
    bool v6;

    assert_int_equal(fast_rules(&in, &at, &v6), 4);
    assert_int_equal(at, 0);
    assert_true(v6);
    in.dns_port = 40053; /* before the forwarder's rules: see lan_holds above */
    assert_int_equal(fast_rules(&in, &at, &v6), 4);
    assert_int_equal(at, 0);
    in.policy.lan_exceptions = lanx; /* accepts only: no change */
    in.policy.n_lan_exceptions = ARRAY_SIZE(lanx);
    assert_int_equal(fast_rules(&in, &at, &v6), 4);
    in.policy.ipv6_blocked = true;
    assert_int_equal(fast_rules(&in, &at, &v6), 2);
    assert_false(v6);
    in.policy.ipv6_blocked = false;
    in.policy.deny = deny; /* a deny rule would be skipped */
    in.policy.n_deny = ARRAY_SIZE(deny);
    assert_int_equal(fast_rules(&in, &at, &v6), 0);
    in.policy.n_deny = 0;
    in.policy.deny_default = true; /* only the allowed destinations */
    in.policy.allow = allow;
    in.policy.n_allow = ARRAY_SIZE(allow);
    assert_int_equal(fast_rules(&in, &at, &v6), 0);
    in.policy.deny_default = false;
    in.domain_sets = true; /* only the allowlist's addresses */
    assert_int_equal(fast_rules(&in, &at, &v6), 0);
    in.domain_sets = false;
    in.dns_port = 0;
    in.iface = NULL; /* proxy-only: no VPN */
    assert_int_equal(fast_rules(&in, &at, &v6), 0);
}

static void test_vpn_rate(void **state) {
    struct dr_rule allow[] = {
        v4("140.82.112.0", 20, 443, 443),
        v4("151.101.0.0", 16, 0, 0),
        v6("2606:50c0::", 32, 80, 443),
    };
    struct nftr_input in = session_input();
    uint32_t n, rate, burst;

    in.log.vpn_rate = 90000;
    in.log.vpn_burst = 45000;
    vpn_rates(&in, &n, &rate, &burst);
    assert_int_equal(n, 1);
    assert_int_equal(rate, 90000);
    assert_int_equal(burst, 45000);
    in.policy.deny_default = true;
    in.policy.allow = allow;
    in.policy.n_allow = ARRAY_SIZE(allow);
    vpn_rates(&in, &n, &rate, &burst);
    assert_true(n >= 3);
    assert_true(rate <= 90000 && rate > 90000 - n);
    assert_true(burst <= 45000 && burst > 45000 - n);
    /* a share never rounds down to no limit at all */
    in.log.vpn_rate = 1;
    in.log.vpn_burst = 1;
    vpn_rates(&in, &n, &rate, &burst);
    assert_int_equal(rate, n);
    /* 0: the VPN's rules are like the others (the goldens) */
    in.log.vpn_rate = 0;
    vpn_rates(&in, &n, &rate, &burst);
    assert_true(n >= 3);
    assert_int_equal(rate, n * NFTR_DEFAULT_LOG_RATE);
    /* proxy-only: no VPN, no such rule */
    in = session_input();
    in.iface = NULL;
    in.log.vpn_rate = 90000;
    vpn_rates(&in, &n, &rate, &burst);
    assert_int_equal(n, 0);
}

/* Policy.log_allowed_flows = false: accepts are counted (the new-flow counter
 * stays, so the audit's totals are exact) but never logged; refusals still are. */
static void test_session_accept_unlogged(void **state) {
    struct dr_rule lan[] = { v4("192.168.77.2", 32, 0, 0) };
    struct nftr_input in = session_input();
    in.policy.lan_exceptions = lan;
    in.policy.n_lan_exceptions = ARRAY_SIZE(lan);
    in.log.accept_unlogged = true;
    struct nftr_chain *c = NULL;
    assert_int_equal(nftr_render_chain(&in, &c), 0);
    size_t flow_counters = 0, reject_logs = 0;
    for (size_t i = 0; i < c->n_rules; i++) {
        const struct nftr_rule *r = &c->rules[i];
        if (r->log) {
            assert_non_null(strstr(r->log_prefix, ":D "));
            reject_logs++;
        }
        if (r->verdict == NFTR_V_CONTINUE && !r->log) {
            assert_true(r->log_counter);
            assert_false(r->limit);
            flow_counters++;
        }
    }
    /* loopback v4 and v6 (ICMP, DNS over TCP and UDP each), the LAN exception, the VPN */
    assert_int_equal(flow_counters, 8);
    assert_true(reject_logs > 0);
    _cleanup_free_ char *text = NULL;
    assert_int_equal(nftr_chain_text(c, &text), 0);
    check_golden("session_accept_unlogged", text);
    nftr_chain_free(c);
}

/* Where a sandboxed session's flow through lo may go: without listeners only
 * ICMP, port 53 and the LAN exceptions (127.0.0.1:5432 is a listed host
 * port); nothing else through lo is accepted. */
static bool lo_accept_is_narrow(const struct nftr_rule *r) {
    for (size_t j = 0; j < r->n_match; j++) {
        const struct nftr_match *m = &r->match[j];
        if (m->type == NFTR_M_L4PROTO && (m->l4proto == IPPROTO_ICMP || m->l4proto == IPPROTO_ICMPV6))
            return true;
        if (m->type == NFTR_M_DPORT && m->port_min == 53 && m->port_max == 53)
            return true;
    }
    return false;
}

static void test_session_loopback_narrow(void **state) {
    struct nftr_input in = session_input();
    struct nftr_chain *c = NULL;
    assert_int_equal(nftr_render_chain(&in, &c), 0);
    for (size_t i = 0; i < c->n_rules; i++) {
        const struct nftr_rule *r = &c->rules[i];
        assert_int_equal(r->ct_mark_set, 0);
        if (r->verdict == NFTR_V_ACCEPT && r->match[0].type == NFTR_M_OIFNAME &&
            strcmp(r->match[0].name, "lo") == 0)
            assert_true(lo_accept_is_narrow(r));
    }
    assert_int_equal(c->lo_mark, 0);
    assert_int_equal(c->n_lo_rules, 0);
    nftr_chain_free(c);

    /* The uid scope (no cgroup v2, so never listeners) is as narrow. */
    in = session_input();
    in.scope = NFTR_SCOPE_UID;
    in.uid = 1000;
    assert_int_equal(nftr_render_chain(&in, &c), 0);
    for (size_t i = 0; i < c->n_rules; i++) {
        const struct nftr_rule *r = &c->rules[i];
        if (r->verdict == NFTR_V_ACCEPT && r->match[0].type == NFTR_M_OIFNAME &&
            strcmp(r->match[0].name, "lo") == 0)
            assert_true(lo_accept_is_narrow(r));
    }
    nftr_chain_free(c);
}

/* With listeners: every new flow through lo is marked with the session's
 * mark (ahead of the log's limit), the session sends through lo only on
 * flows with its mark or answers flows marked as served by it; no packet
 * without conntrack state; the listed ports and the resolver are decided
 * in chain lo-<id>, which lets the rest land only on its own sockets. */
static void test_session_listeners(void **state) {
    struct dr_rule lan[] = { v4("127.0.0.0", 8, 5432, 5432), v4("192.168.77.0", 24, 0, 0) };
    struct nftr_input in = session_input();
    in.policy.lan_exceptions = lan;
    in.policy.n_lan_exceptions = ARRAY_SIZE(lan);
    in.lo_slot = 7;
    in.cgroup_level = 3;
    in.cgroup_path = "system.slice/lyhd.service/lianyaohu/7f3a9c01";
    in.base_cgroup_id = 9876;
    in.base_cgroup = "system.slice/lyhd.service/lianyaohu";
    render_check(&in, "session_listeners");

    struct nftr_chain *c = NULL;
    assert_int_equal(nftr_render_chain(&in, &c), 0);
    assert_int_equal(c->lo_mark, 0x80000007u);
    assert_int_equal(c->served_mark, 0xc0000007u);
    assert_string_equal(c->lo_name, "lo-7f3a9c01");
    size_t marked = 0, lo_accepts = 0;
    for (size_t i = 0; i < c->n_rules; i++) {
        const struct nftr_rule *r = &c->rules[i];
        bool lo = r->match[0].type == NFTR_M_OIFNAME && strcmp(r->match[0].name, "lo") == 0;
        if (r->ct_mark_set) {
            assert_int_equal(r->ct_mark_set, c->lo_mark);
            assert_int_equal(r->verdict, NFTR_V_CONTINUE);
            assert_true(lo);
            assert_int_equal(r->match[r->n_match - 1].type, NFTR_M_CT_NEW);
            marked++;
        }
        /* every accept through lo needs one of the session's marks */
        if (lo && r->verdict == NFTR_V_ACCEPT) {
            const struct nftr_match *m = &r->match[r->n_match - 1];
            assert_int_equal(m->type, NFTR_M_CT_MARK);
            assert_true(m->id == c->lo_mark || (m->id == c->served_mark &&
                                                r->match[r->n_match - 2].type == NFTR_M_CT_REPLY));
            lo_accepts++;
        }
        /* a LAN exception never opens lo (the host's own addresses) */
        for (size_t j = 0; j < r->n_match; j++)
            if (r->match[j].type == NFTR_M_DADDR && r->match[j].family == AF_INET &&
                r->match[j].addr[0] == 192)
                assert_int_equal(r->match[0].type, NFTR_M_OIFNAME_NE);
    }
    assert_int_equal(marked, 2);
    assert_int_equal(lo_accepts, 4);
    /* the first rule through lo refuses what conntrack does not track */
    assert_int_equal(c->rules[after_head(c)].match[1].type, NFTR_M_CT_INVALID);
    /* lo-<id>: ICMP, port 53 and the listed port in the original direction,
     * TCP past its first packet, own sockets, then refuse */
    size_t listed = 0;
    for (size_t i = 0; i < c->n_lo_rules; i++) {
        const struct nftr_rule *r = &c->lo_rules[i];
        if (r->n_match == 3 && r->match[0].type == NFTR_M_CT_ORIGINAL &&
            r->match[2].type == NFTR_M_DPORT && r->match[2].port_min == 5432)
            listed++;
    }
    assert_int_equal(listed, 2); /* tcp and udp */
    /* its own sockets, then a refusal for any other session's, before
     * the listed ports (which name host services) */
    size_t own_at = 0, other_at = 0, listed_at = 0;
    for (size_t i = 0; i < c->n_lo_rules; i++) {
        const struct nftr_rule *r = &c->lo_rules[i];
        if (r->n_match == 1 && r->match[0].type == NFTR_M_SOCK_CGROUP && r->match[0].level == 3 &&
            r->match[0].cgroup_id == 4242 && r->verdict == NFTR_V_ACCEPT)
            own_at = i + 1;
        if (r->match[0].type == NFTR_M_SOCK_CGROUP && r->match[0].level == 2 &&
            r->match[0].cgroup_id == 9876 && r->verdict == NFTR_V_REJECT_ADMIN)
            other_at = i + 1;
        if (!listed_at && r->n_match == 3 && r->match[2].type == NFTR_M_DPORT)
            listed_at = i + 1;
    }
    assert_true(own_at && other_at && listed_at && own_at < other_at && other_at < listed_at);
    const struct nftr_rule *last = &c->lo_rules[c->n_lo_rules - 1];
    assert_int_equal(last->verdict, NFTR_V_REJECT_ADMIN);
    assert_int_equal(last->n_match, 0);
    nftr_chain_free(c);
    c = NULL;

    /* A slot out of range, a level missing, a slot on a uid scope: refused. */
    in.lo_slot = NFTR_LO_SLOT_MAX + 1;
    assert_int_equal(nftr_render_chain(&in, &c), -EINVAL);
    in.lo_slot = 7;
    in.cgroup_level = 1;
    assert_int_equal(nftr_render_chain(&in, &c), -EINVAL);
    in.cgroup_level = 3;
    in.base_cgroup_id = 0;
    assert_int_equal(nftr_render_chain(&in, &c), -EINVAL);
    in.base_cgroup_id = 9876;
    in.scope = NFTR_SCOPE_UID;
    in.uid = 1000;
    assert_int_equal(nftr_render_chain(&in, &c), -EINVAL);
    assert_null(c);
    assert_int_equal(nftr_lo_mark(1), 0x80000001u);
    assert_int_equal(nftr_served_mark(NFTR_LO_SLOT_MAX), 0xffffffffu);
}

/* Proxy-only (no interface): the proxy's port on loopback and ICMP there,
 * nothing else: no VPN accept, no resolver port on loopback, no DNS; with
 * listeners the lo-<id> chain lands flows on the proxy's port and the
 * session's own sockets only. Refused without a session scope of its own or
 * with DNS forwarding. */
static void test_session_proxy_only(void **state) {
    (void)state;
    struct dr_rule lan[] = {v4("127.0.0.1", 32, 3128, 3128)};
    struct nftr_input in = session_input();
    in.iface = NULL;
    in.policy.deny_default = true;
    in.policy.lan_exceptions = lan;
    in.policy.n_lan_exceptions = ARRAY_SIZE(lan);
    render_check(&in, "session_proxy_only");

    for (int listeners = 0; listeners < 2; listeners++) {
        struct nftr_chain *c = NULL;
        if (listeners) {
            in.lo_slot = 7;
            in.cgroup_level = 3;
            in.base_cgroup_id = 9876;
        }
        assert_int_equal(nftr_render_chain(&in, &c), 0);
        size_t proxy = 0;
        for (int lo_chain = 0; lo_chain < 2; lo_chain++) {
            const struct nftr_rule *v = lo_chain ? c->lo_rules : c->rules;
            size_t n = lo_chain ? c->n_lo_rules : c->n_rules;
            for (size_t i = 0; i < n; i++) {
                const struct nftr_rule *r = &v[i];
                for (size_t j = 0; j < r->n_match; j++) {
                    const struct nftr_match *m = &r->match[j];
                    /* no interface but lo is ever named for an accept */
                    if (r->verdict == NFTR_V_ACCEPT && m->type == NFTR_M_OIFNAME)
                        assert_string_equal(m->name, "lo");
                    /* no resolver port anywhere accepted */
                    if (m->type == NFTR_M_DPORT && r->verdict == NFTR_V_ACCEPT)
                        assert_int_not_equal(m->port_min, 53);
                    if (m->type == NFTR_M_DPORT && m->port_min == 3128 &&
                        r->verdict == NFTR_V_ACCEPT)
                        proxy++;
                }
            }
        }
        assert_int_equal(proxy, 2); /* tcp and udp, in the chain or in lo-<id> */
        /* nothing after loopback is accepted: every accept names lo or is
         * in lo-<id> */
        for (size_t i = 0; i < c->n_rules; i++)
            if (c->rules[i].verdict == NFTR_V_ACCEPT)
                assert_true(c->rules[i].n_match > 0 &&
                            c->rules[i].match[0].type == NFTR_M_OIFNAME &&
                            strcmp(c->rules[i].match[0].name, "lo") == 0);
        nftr_chain_free(c);
    }

    struct nftr_chain *c = NULL;
    in = session_input();
    in.iface = NULL;
    in.dns_port = 53053;
    assert_int_equal(nftr_render_chain(&in, &c), -EINVAL);
    in.dns_port = 0;
    in.scope = NFTR_SCOPE_UID;
    in.uid = 1000;
    assert_int_equal(nftr_render_chain(&in, &c), -EINVAL);
    in.scope = NFTR_SCOPE_SHARED_USER;
    in.guard_gid = NFTR_DEFAULT_GUARD_GID;
    assert_int_equal(nftr_render_chain(&in, &c), -EINVAL);
    assert_null(c);
}

/* A base with DNS redirection, cgroup v2 at level 3, no listeners. */
static struct nftr_base_params dns_base(void) {
    return (struct nftr_base_params){
        .guard_gid = NFTR_DEFAULT_GUARD_GID,
        .guard_gid_max = NFTR_DEFAULT_GUARD_GID + 65535,
        .cgroupv2 = true,
        .cgroup_level = 3,
        .log = {.group = 7, .rate = 2000, .burst = 1000},
        .dns = true,
    };
}

/* The protocol process's uid: its packets leave only as UDP to port 53 of
 * an address in proto4/proto6, or through lo as the reply side of a TCP
 * connection (an agent's to its forwarder), and are dropped otherwise; these
 * rules come first in chain output, with or without DNS redirection. */
static void test_base_proto(void **state) {
    (void)state;
    struct nftr_base_params p = dns_base();
    p.proto_uid = 999;
    struct nftr_base *b = NULL;
    assert_int_equal(nftr_render_base(&p, &b), 0);
    _cleanup_free_ char *text = NULL;
    assert_int_equal(nftr_base_text(b, &text), 0);
    check_golden("base_dns_proto", text);
    assert_true(b->n_output > 4);
    for (size_t i = 0; i < 4; i++) {
        const struct nftr_rule *r = &b->output[i];
        assert_int_equal(r->match[0].type, NFTR_M_SKUID);
        assert_int_equal(r->match[0].id, 999);
        assert_int_equal(r->verdict, i < 3 ? NFTR_V_ACCEPT : NFTR_V_DROP);
    }
    assert_int_equal(b->output[0].n_match, 4);
    assert_int_equal(b->output[0].match[1].type, NFTR_M_OIFNAME);
    assert_string_equal(b->output[0].match[1].name, "lo");
    assert_int_equal(b->output[0].match[2].type, NFTR_M_L4PROTO);
    assert_int_equal(b->output[0].match[2].l4proto, IPPROTO_TCP);
    assert_int_equal(b->output[0].match[3].type, NFTR_M_CT_REPLY);
    for (size_t i = 1; i < 3; i++) {
        assert_int_equal(b->output[i].n_match, 3);
        assert_int_equal(b->output[i].match[1].type, NFTR_M_DADDR_SET);
        assert_string_equal(b->output[i].match[1].name, i == 1 ? NFTR_SET_PROTO4 : NFTR_SET_PROTO6);
        assert_int_equal(b->output[i].match[2].type, NFTR_M_DPORT);
        assert_int_equal(b->output[i].match[2].l4proto, IPPROTO_UDP);
        assert_int_equal(b->output[i].match[2].port_min, 53);
        assert_int_equal(b->output[i].match[2].port_max, 53);
    }
    assert_int_equal(b->output[3].n_match, 1);
    assert_true(b->output[3].counter);
    nftr_base_free(b);
    /* not the first rules of any other base: none without a uid */
    p.proto_uid = 0;
    assert_int_equal(nftr_render_base(&p, &b), 0);
    for (size_t i = 0; i < b->n_output; i++)
        for (size_t k = 0; k < b->output[i].n_match; k++)
            assert_int_not_equal(b->output[i].match[k].type, NFTR_M_SKUID);
    nftr_base_free(b);
    /* without DNS redirection too (it reads the flow events); (uid_t)-1: refused */
    p.proto_uid = 999;
    p.dns = false;
    assert_int_equal(nftr_render_base(&p, &b), 0);
    assert_int_equal(b->output[0].match[0].type, NFTR_M_SKUID);
    nftr_base_free(b);
    p.dns = true;
    p.proto_uid = UINT32_MAX;
    assert_int_equal(nftr_render_base(&p, &b), -EINVAL);
}

/* DNS to lyhd: chain dnsnat rewrites the guarded sockets' port-53 flows by
 * cgroup (map dnsport); a session with a forwarder accepts, first, only the
 * rewritten flows to its own port, and no longer opens port 53 on lo. */
static void test_base_dns(void **state) {
    (void)state;
    struct nftr_base_params p = dns_base();
    p.inbound = true;
    p.base_cgroup_id = 9876;
    p.base_cgroup = "system.slice/lyhd.service/lianyaohu";
    struct nftr_base *b = NULL;
    assert_int_equal(nftr_render_base(&p, &b), 0);
    _cleanup_free_ char *text = NULL;
    assert_int_equal(nftr_base_text(b, &text), 0);
    check_golden("base_dns", text);
    assert_int_equal(b->n_dnsnat, 4); /* udp, tcp x IPv4, IPv6 */
    for (size_t i = 0; i < b->n_dnsnat; i++) {
        const struct nftr_rule *r = &b->dnsnat[i];
        assert_int_equal(r->verdict, NFTR_V_DNAT_CGROUP);
        assert_int_equal(r->match[0].type, NFTR_M_SKGID); /* guarded sockets only */
        assert_int_equal(r->match[2].type, NFTR_M_DPORT);
        assert_int_equal(r->match[2].port_min, 53);
        assert_string_equal(r->target, NFTR_MAP_DNSPORT);
    }
    /* a DNS flow's original direction from a host socket, its reply
     * direction from any socket but the forwarder's: dropped in output,
     * before the host-packet rule that would clear a session's mark */
    size_t drops = 0, clear_at = b->n_output;
    for (size_t i = 0; i < b->n_output; i++) {
        const struct nftr_rule *r = &b->output[i];
        if (r->ct_mark_clear)
            clear_at = i;
        if (r->verdict != NFTR_V_DROP || r->n_match < 3 || r->match[2].type != NFTR_M_CT_MARK)
            continue;
        assert_int_equal(r->match[0].type, NFTR_M_SKGID_NE);
        assert_int_equal(r->match[2].id, NFTR_DNS_FLOW_MARK);
        if (r->match[1].type == NFTR_M_CT_REPLY) {
            assert_int_equal(r->n_match, 4);
            assert_int_equal(r->match[3].type, NFTR_M_META_MARK_NE);
            assert_int_equal(r->match[3].id, NFTR_DNS_FWD_SOCKET_MARK);
        } else {
            assert_int_equal(r->match[1].type, NFTR_M_CT_ORIGINAL);
            assert_int_equal(r->n_match, 3);
        }
        assert_true(i < clear_at);
        drops++;
    }
    assert_int_equal(drops, 2);
    assert_true(clear_at < b->n_output);
    nftr_base_free(b);

    /* no listeners (an old kernel, cgroups at level 1): chain input still
     * holds the two DNS rules, on every interface */
    p.inbound = false;
    p.base_cgroup_id = 0;
    p.base_cgroup = NULL;
    assert_int_equal(nftr_render_base(&p, &b), 0);
    assert_int_equal(b->n_input, 4); /* two per family */
    for (size_t i = 0; i < b->n_input; i++) {
        const struct nftr_rule *r = &b->input[i];
        assert_int_equal(r->verdict, NFTR_V_DROP);
        for (size_t k = 0; k < r->n_match; k++)
            assert_int_not_equal(r->match[k].type, NFTR_M_IIFNAME);
        assert_int_equal(r->match[1].type, NFTR_M_DADDR); /* loopback only */
        /* the socket lookup last */
        assert_true(r->match[r->n_match - 1].type == NFTR_M_SOCK_MARK ||
                    r->match[r->n_match - 1].type == NFTR_M_SOCK_MARK_NE);
        assert_int_equal(r->match[2].type, i % 2 ? NFTR_M_CT_MARK_NE : NFTR_M_CT_MARK);
    }
    free(text);
    text = NULL;
    assert_int_equal(nftr_base_text(b, &text), 0);
    assert_non_null(strstr(text, "add chain inet lianyaohu input"));
    nftr_base_free(b);
    p.cgroupv2 = false; /* nothing tells the sessions apart */
    p.inbound = false;
    assert_int_equal(nftr_render_base(&p, &b), -EINVAL);
}

static void test_session_dns(void **state) {
    (void)state;
    struct nftr_input in = session_input();
    in.lo_slot = 7;
    in.cgroup_level = 3;
    in.cgroup_path = "system.slice/lyhd.service/lianyaohu/7f3a9c01";
    in.base_cgroup_id = 9876;
    in.base_cgroup = "system.slice/lyhd.service/lianyaohu";
    in.dns_port = 40053;
    render_check(&in, "session_dns");

    struct nftr_chain *c = NULL;
    assert_int_equal(nftr_render_chain(&in, &c), 0);
    assert_int_equal(c->dns_port, 40053);
    /* after the fast rules (they leave port 53 alone, and the forwarder's
     * flows go to 127.0.0.1 / ::1, in the LAN sets), four rules: ct status
     * dnat, to the forwarder's port, accept */
    size_t f = 0;
    while (f < c->n_rules && is_fast_rule(&c->rules[f]))
        f++;
    assert_int_equal(f, 4);
    for (size_t i = f; i < f + 4; i++) {
        const struct nftr_rule *r = &c->rules[i];
        assert_int_equal(r->match[0].type, NFTR_M_CT_DNAT);
        assert_int_equal(r->match[2].port_min, 40053);
        assert_int_equal(r->verdict, NFTR_V_ACCEPT);
    }
    /* nothing else opens port 53 (it is refused right after, where dnsnat
     * did not rewrite it): not in the session chain, not in lo-<id> */
    for (size_t i = f + 4; i < c->n_rules; i++)
        for (size_t k = 0; k < c->rules[i].n_match; k++)
            assert_false(c->rules[i].match[k].type == NFTR_M_DPORT &&
                         c->rules[i].match[k].port_min <= 53 &&
                         c->rules[i].match[k].port_max >= 53 &&
                         c->rules[i].verdict == NFTR_V_ACCEPT);
    for (size_t i = 0; i < c->n_lo_rules; i++)
        for (size_t k = 0; k < c->lo_rules[i].n_match; k++)
            assert_false(c->lo_rules[i].match[k].type == NFTR_M_DPORT &&
                         c->lo_rules[i].match[k].port_min == 53);
    nftr_chain_free(c);

    /* the same without listeners (no lo slot): still no port 53 on lo */
    struct nftr_input nl = session_input();
    nl.dns_port = 40053;
    assert_int_equal(nftr_render_chain(&nl, &c), 0);
    for (size_t i = 4; i < c->n_rules; i++)
        for (size_t k = 0; k < c->rules[i].n_match; k++)
            assert_false(c->rules[i].match[k].type == NFTR_M_DPORT &&
                         c->rules[i].match[k].port_min == 53 &&
                         c->rules[i].verdict == NFTR_V_ACCEPT);
    nftr_chain_free(c);
    /* a domain allowlist: new flows on the VPN only to the session's sets,
     * established ones go on; nothing else opens the VPN */
    struct nftr_input dl = session_input();
    dl.dns_port = 40053;
    dl.domain_sets = true;
    render_check(&dl, "session_domains");
    assert_int_equal(nftr_render_chain(&dl, &c), 0);
    assert_string_equal(c->set4, "a4-7f3a9c01");
    assert_string_equal(c->set6, "a6-7f3a9c01");
    size_t set_accepts = 0;
    for (size_t i = 0; i < c->n_rules; i++) {
        const struct nftr_rule *r = &c->rules[i];
        if (r->verdict != NFTR_V_ACCEPT || r->match[0].type != NFTR_M_OIFNAME ||
            strcmp(r->match[0].name, "tun0") != 0)
            continue;
        /* every accept on the VPN: established, or an address of the sets */
        assert_true(r->n_match == 2);
        assert_true(r->match[1].type == NFTR_M_CT_ESTABLISHED ||
                    r->match[1].type == NFTR_M_DADDR_SET);
        set_accepts += r->match[1].type == NFTR_M_DADDR_SET;
    }
    assert_int_equal(set_accepts, 2);
    nftr_chain_free(c);
    dl.dns_port = 0; /* sets nobody fills */
    assert_int_equal(nftr_render_chain(&dl, &c), -EINVAL);
    /* a uid scope has no forwarder */
    struct nftr_input u = session_input();
    u.scope = NFTR_SCOPE_UID;
    u.uid = 1000;
    u.dns_port = 40053;
    assert_int_equal(nftr_render_chain(&u, &c), -EINVAL);
}

/* ---- the data layout ---------------------------------------------------------------- */

static struct nftr_base_params data_base(void) {
    struct nftr_base_params p = dns_base();
    p.inbound = true;
    p.base_cgroup_id = 9876;
    p.base_cgroup = "system.slice/lyhd.service/lianyaohu";
    p.data = true;
    return p;
}

static struct nftr_input data_input(void) {
    struct nftr_input in = session_input();
    in.lo_slot = 7;
    in.cgroup_level = 3;
    in.base_cgroup_id = 9876;
    in.dns_port = 5301;
    in.cgroup_path = "system.slice/lyhd.service/lianyaohu/7f3a9c01";
    return in;
}

/* a lookup keyed by the socket's cgroup (alone, or paired with the interface,
 * the port or the flow's mark) */
static bool has_cgroup_lookup(const struct nftr_rule *r) {
    for (size_t i = 0; i < r->n_match; i++)
        switch (r->match[i].type) {
        case NFTR_M_CG_SET:
        case NFTR_M_CG_IF_SET:
        case NFTR_M_PORT_CG_SET:
        case NFTR_M_MARK_CG_SET:
            return r->match[i].level == 3;
        default:
            break;
        }
    return false;
}

static bool ends_in_refusal(const struct nftr_rule *v, size_t n) {
    return n >= 2 && v[n - 1].n_match == 0 && v[n - 1].verdict == NFTR_V_REJECT_ADMIN &&
           v[n - 2].verdict == NFTR_V_REJECT_TCP_RESET;
}

/* The shared rules: presence opens, absence closes. */
static void test_base_data(void **state) {
    (void)state;
    struct nftr_base_params p = data_base();
    struct nftr_base *b = NULL;
    assert_int_equal(nftr_render_base(&p, &b), 0);
    _cleanup_free_ char *text = NULL;
    assert_int_equal(nftr_base_text(b, &text), 0);
    check_golden("base_data", text);

    /* guarded: the established VPN flows of data sessions first, keyed by
     * cgroup and interface, each family by its own set; then the chain
     * sessions' dispatch; then dlive; then the nosession refusal */
    assert_true(b->n_guarded >= 7);
    for (size_t i = 0; i < 4; i++) {
        const struct nftr_rule *r = &b->guarded[i];
        assert_int_equal(r->verdict, NFTR_V_ACCEPT);
        assert_int_equal(r->match[0].type, NFTR_M_CT_ESTABLISHED);
        assert_int_equal(r->match[1].type, NFTR_M_CG_IF_SET);
        assert_int_equal(r->match[2].type, NFTR_M_DADDR_SET_NE);
        assert_string_equal(r->match[1].name, r->match[2].family == AF_INET ? NFTR_SET_DVPN
                                                                            : NFTR_SET_DVPN6);
        assert_int_equal(r->match[3].type, NFTR_M_DPORT_NE);
        assert_int_equal(r->match[3].port_min, 53);
        assert_string_equal(r->counter_map, NFTR_MAP_ACCT);
    }
    assert_int_equal(b->guarded[4].verdict, NFTR_V_VMAP_CGROUP);
    assert_string_equal(b->guarded[4].target, NFTR_MAP_SESSIONS);
    assert_int_equal(b->guarded[5].verdict, NFTR_V_GOTO);
    assert_string_equal(b->guarded[5].target, NFTR_CHAIN_DATA);
    assert_int_equal(b->guarded[5].match[0].type, NFTR_M_CG_SET);
    assert_string_equal(b->guarded[5].match[0].name, NFTR_SET_DLIVE);
    assert_true(ends_in_refusal(b->guarded, b->n_guarded));

    /* data: every accept needs an element that names the socket's cgroup,
     * and its counter's element; the chain ends by going to drefuse */
    size_t accepts = 0;
    for (size_t i = 0; i < b->n_data; i++) {
        const struct nftr_rule *r = &b->data[i];
        if (r->verdict != NFTR_V_ACCEPT)
            continue;
        accepts++;
        assert_true(has_cgroup_lookup(r));
        assert_true(r->counter_map[0] != '\0');
    }
    assert_int_equal(accepts, 4 + 4 + 2); /* DNS, loopback (own, served) x 2, VPN x 2 */
    const struct nftr_rule *last = &b->data[b->n_data - 1];
    assert_int_equal(last->n_match, 0);
    assert_int_equal(last->verdict, NFTR_V_GOTO);
    assert_string_equal(last->target, NFTR_CHAIN_DREFUSE);
    /* IPv6 out through the VPN only by dvpn6: no rule opens it by another set */
    for (size_t i = 0; i < b->n_data; i++)
        for (size_t k = 0; k < b->data[i].n_match; k++)
            if (b->data[i].match[k].type == NFTR_M_NFPROTO &&
                b->data[i].match[k].family == AF_INET6)
                assert_string_equal(b->data[i].match[k + 1].name, NFTR_SET_DVPN6);
    assert_true(ends_in_refusal(b->drefuse, b->n_drefuse));
    assert_string_equal(b->drefuse[0].counter_map, NFTR_MAP_DROP);
    assert_true(ends_in_refusal(b->dlo, b->n_dlo));

    /* input: a session's marked flow that map loopback does not take goes to
     * dlo, chosen by the mark's kind alone */
    size_t to_dlo = 0;
    for (size_t i = 0; i < b->n_input; i++) {
        const struct nftr_rule *r = &b->input[i];
        if (r->n_match > 1 && r->match[1].type == NFTR_M_CT_MARK_ORIG)
            assert_int_equal(r->verdict, NFTR_V_GOTO); /* dlo decides, nothing here */
        if (r->verdict == NFTR_V_GOTO) {
            to_dlo++;
            assert_string_equal(r->target, NFTR_CHAIN_DLO);
            assert_int_equal(r->match[1].type, NFTR_M_CT_MARK_ORIG);
            assert_int_equal(r->match[2].type, NFTR_M_CT_MARK_NE);
            assert_int_equal(r->n_match, 3);
        }
    }
    assert_int_equal(to_dlo, 1);
    nftr_base_free(b);

    /* it needs chain input and the forwarders */
    p.dns = false;
    assert_int_equal(nftr_render_base(&p, &b), -EINVAL);
    p = data_base();
    p.inbound = false;
    assert_int_equal(nftr_render_base(&p, &b), -EINVAL);
}

static const struct nftr_elem *find_elem(const struct nftr_data *d, const char *set) {
    for (size_t i = 0; i < d->n_elems; i++)
        if (strcmp(d->elems[i].set, set) == 0)
            return &d->elems[i];
    return NULL;
}

static void test_data_session(void **state) {
    (void)state;
    struct nftr_input in = data_input();
    assert_true(nftr_data_eligible(&in));
    struct nftr_data *d = NULL;
    assert_int_equal(nftr_render_data(&in, &d), 0);
    _cleanup_free_ char *text = NULL;
    assert_int_equal(nftr_data_text(d, &text), 0);
    check_golden("data_default", text);
    /* every set and map of the layout but none has its element, dlive last */
    const struct nftr_data_set *ds;
    size_t nds = nftr_data_sets(&ds);
    for (size_t i = 0; i < nds; i++)
        assert_non_null(find_elem(d, ds[i].name));
    assert_string_equal(d->elems[d->n_elems - 1].set, NFTR_SET_DLIVE);
    const struct nftr_elem *e = find_elem(d, NFTR_MAP_DLOMARK);
    assert_int_equal(e->vmark, nftr_lo_mark(7));
    e = find_elem(d, NFTR_SET_DSRVMARK);
    assert_int_equal(e->mark, nftr_served_mark(7));
    e = find_elem(d, NFTR_SET_DFWD);
    assert_int_equal(e->port, 5301);
    e = find_elem(d, NFTR_MAP_DLOGM);
    assert_int_equal(e->mark, nftr_lo_mark(7));
    assert_string_equal(e->vname, "d-7f3a9c01");
    e = find_elem(d, NFTR_MAP_LOOPBACK); /* its slot taken, nothing decided */
    assert_int_equal(e->mark, nftr_lo_mark(7));
    assert_int_equal(e->val, NFTR_D_CONTINUE);
    assert_string_equal(d->alog_rule.log_prefix, "lyh:7f3a9c01:A ");
    assert_string_equal(d->dlog_rule.log_prefix, "lyh:7f3a9c01:D ");
    /* an object for every element that names one */
    for (size_t i = 0; i < d->n_elems; i++) {
        if (d->elems[i].val != NFTR_D_COUNTER && d->elems[i].val != NFTR_D_LIMIT)
            continue;
        bool found = false;
        for (size_t k = 0; k < d->n_objs; k++)
            found |= d->objs[k].type == d->elems[i].val &&
                     strcmp(d->objs[k].name, d->elems[i].vname) == 0;
        assert_true(found);
    }
    nftr_data_free(d);

    /* IPv6 blocked: no dvpn6 element; allowed flows not logged: no accept log
     * chain, no limit for them, no jump to it; no path: elements as comments */
    in.policy.ipv6_blocked = true;
    in.log.accept_unlogged = true;
    in.cgroup_path = NULL;
    assert_int_equal(nftr_render_data(&in, &d), 0);
    _cleanup_free_ char *text2 = NULL;
    assert_int_equal(nftr_data_text(d, &text2), 0);
    check_golden("data_unlogged", text2);
    assert_null(find_elem(d, NFTR_SET_DVPN6));
    assert_null(find_elem(d, NFTR_MAP_ALOG));
    assert_null(find_elem(d, NFTR_MAP_ALIM));
    assert_null(find_elem(d, NFTR_MAP_LLIM));
    assert_non_null(find_elem(d, NFTR_MAP_ANEW)); /* still counted */
    assert_string_equal(d->alog, "");
    nftr_data_free(d);

    /* the VPN's log rate is the session's VPN rate, when it has one */
    in = data_input();
    in.log.vpn_rate = 90000;
    in.log.vpn_burst = 45000;
    assert_int_equal(nftr_render_data(&in, &d), 0);
    for (size_t k = 0; k < d->n_objs; k++)
        if (strcmp(d->objs[k].name, "alim-7f3a9c01") == 0)
            assert_int_equal(d->objs[k].rate, 90000);
        else if (d->objs[k].type == NFTR_D_LIMIT)
            assert_int_equal(d->objs[k].rate, NFTR_DEFAULT_LOG_RATE);
    nftr_data_free(d);
}

/* Anything but the default policy keeps its chain. */
static void test_data_not_eligible(void **state) {
    (void)state;
    static const struct dr_rule one = {.family = AF_INET, .addr = {10, 1, 2, 0}, .prefix_len = 24};
    struct nftr_data *d = NULL;
    for (int k = 0; k < 10; k++) {
        struct nftr_input in = data_input();
        switch (k) {
        case 0: in.policy.lan_exceptions = &one; in.policy.n_lan_exceptions = 1; break;
        case 1: in.policy.deny = &one; in.policy.n_deny = 1; break;
        case 2: in.policy.allow = &one; in.policy.n_allow = 1; break;
        case 3: in.policy.deny_default = true; break;
        case 4: in.domain_sets = true; break;
        case 5: in.lo_slot = 0; break;
        case 6: in.dns_port = 0; in.domain_sets = false; break;
        case 7: in.iface = NULL; in.dns_port = 0; break;
        case 8: in.log.rate = 0; break;
        case 9: in.scope = NFTR_SCOPE_UID; in.uid = 1000; break;
        }
        assert_false(nftr_data_eligible(&in));
        assert_int_equal(nftr_render_data(&in, &d), -EINVAL);
    }
    assert_false(nftr_data_eligible(NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session_default),
        cmocka_unit_test(test_session_lan_exceptions),
        cmocka_unit_test(test_session_deny_default),
        cmocka_unit_test(test_session_ipv6_blocked),
        cmocka_unit_test(test_shared_user),
        cmocka_unit_test(test_uid_fallback),
        cmocka_unit_test(test_base),
        cmocka_unit_test(test_base_inbound),
        cmocka_unit_test(test_lan_sets),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_longest_id_prefix_fits),
        cmocka_unit_test(test_no_rate_limit),
        cmocka_unit_test(test_vpn_rate),
        cmocka_unit_test(test_fast_path),
        cmocka_unit_test(test_session_accept_unlogged),
        cmocka_unit_test(test_session_loopback_narrow),
        cmocka_unit_test(test_session_listeners),
        cmocka_unit_test(test_base_dns),
        cmocka_unit_test(test_base_proto),
        cmocka_unit_test(test_session_dns),
        cmocka_unit_test(test_session_proxy_only),
        cmocka_unit_test(test_base_data),
        cmocka_unit_test(test_data_session),
        cmocka_unit_test(test_data_not_eligible),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
