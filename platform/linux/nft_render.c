/* nft_render: turns a validated firewall request into rule descriptions and text.
 *
 * This file owns the *meaning* of the egress guard: which rules a session, uid or
 * shared-user scope gets, in which order, and what the base chains do. It must never
 * do I/O, talk to the kernel, log, or keep state between calls: nft.c encodes what
 * we return, the golden tests pin it down, and `lyh run --print-firewall` shows it.
 *
 * Why the chains look the way they do:
 * - Every chain ends in a reject, so a jump into it never falls back into `guarded`;
 *   `guarded` itself ends in a reject, so a guarded socket that matches no live
 *   session (its chain is gone, or it never had one) can send nothing.
 * - Rejects answer at once (tcp reset for tcp, icmpx admin-prohibited otherwise):
 *   an agent fails fast instead of hanging on a silently dropped SYN.
 * - A limit expression stops the rule it is in once the bucket is empty. If the limit
 *   sat in the verdict rule, packets over the rate would skip the verdict and fall
 *   through to later rules. So logging is its own rule without a verdict
 *   (`M [ct state new] limit .. log ..`), followed by the verdict rule
 *   (`M counter accept|reject`): the limit thins out log events only, and the counter
 *   of the verdict rule still counts every packet. Each log rule has its own bucket.
 * - Accepts log only new flows (ct state new); rejects log every rejected packet.
 *   An accept's log rule carries a counter ahead of its limit (`ct state new counter
 *   limit .. log`), so the number of new flows is exact even when the limit drops
 *   their events; a reject needs none, its verdict counter counts its events.
 * - `reject with tcp reset` is only valid for tcp, so each reject point is split into
 *   an l4proto-tcp rule and a catch-all icmpx rule.
 * - A destination with ports covers tcp and udp (two rules), without ports every
 *   protocol. A /0 destination is rendered as `meta nfproto ipv4|ipv6`.
 * - Text form: one nft command per netlink message, so the printed form is a
 *   transcript of the transaction and parses again with `nft -c -f`.
 */
#include "platform/linux/nft_render.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/dest_rule.h"
#include "common/macros.h"

/* ---- the blocked destination sets ------------------------------------------------ */

/* The one definition lives in common/dest_rule.c (the CLI and the daemon check
 * LAN exceptions against the same list). */
size_t nftr_lan_prefixes(int family, const struct dr_rule **ret) {
    if (family == AF_INET) {
        *ret = dr_blocked_v4;
        return DR_BLOCKED_V4_COUNT;
    }
    if (family == AF_INET6) {
        *ret = dr_blocked_v6;
        return DR_BLOCKED_V6_COUNT;
    }
    return 0;
}

/* ---- validation -------------------------------------------------------------------- */

static bool session_id_valid(const char *id) {
    if (!id)
        return false;
    size_t n = strlen(id);
    if (n < 1 || n > NFTR_SESSION_ID_MAX || strcmp(id, "nosession") == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '-' && c != '_')))
            return false;
    }
    return true;
}

static bool iface_valid(const char *name) {
    if (!name)
        return false;
    size_t n = strlen(name);
    if (n < 1 || n >= NFTR_IFNAME_MAX || strcmp(name, "lo") == 0 || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

static size_t family_len(int family) {
    return family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
}

static bool dest_valid(const struct dr_rule *d) {
    size_t alen = family_len(d->family);
    if (alen == 0 || d->prefix_len > alen * 8)
        return false;
    /* host bits must be zero: "10.1.2.3/8" is a caller bug, not something to guess */
    for (size_t bit = d->prefix_len; bit < alen * 8; bit++)
        if (d->addr[bit / 8] & (0x80u >> (bit % 8)))
            return false;
    if (d->port_min == 0 && d->port_max == 0)
        return true;
    return d->port_min >= 1 && d->port_min <= d->port_max;
}

static bool dests_valid(const struct dr_rule *v, size_t n) {
    if (n > NFTR_DESTS_MAX || (n > 0 && !v))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!dest_valid(&v[i]))
            return false;
    return true;
}

int nftr_chain_name(enum nftr_scope scope, const char *session_id, uint32_t uid,
                    char buf[static NFTR_NAME_MAX]) {
    int r;
    switch (scope) {
    case NFTR_SCOPE_SESSION:
        if (!session_id_valid(session_id))
            return -EINVAL;
        r = snprintf(buf, NFTR_NAME_MAX, NFTR_SESSION_CHAIN_PREFIX "%s", session_id);
        break;
    case NFTR_SCOPE_UID:
        if (uid == UINT32_MAX)
            return -EINVAL;
        r = snprintf(buf, NFTR_NAME_MAX, NFTR_UID_CHAIN_PREFIX "%" PRIu32, uid);
        break;
    case NFTR_SCOPE_SHARED_USER:
        if (uid == UINT32_MAX)
            return -EINVAL;
        r = snprintf(buf, NFTR_NAME_MAX, NFTR_SHARED_CHAIN_PREFIX "%" PRIu32, uid);
        break;
    default:
        return -EINVAL;
    }
    return r > 0 && r < NFTR_NAME_MAX ? 0 : -EINVAL;
}

/* ---- building rule lists ------------------------------------------------------------- */

struct rules {
    struct nftr_rule *v;
    size_t n, cap;
    int err;
};

static struct nftr_rule *rules_push(struct rules *rs) {
    if (rs->err)
        return NULL;
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? rs->cap * 2 : 16;
        struct nftr_rule *v = reallocarray(rs->v, cap, sizeof(*v));
        if (!v) {
            rs->err = -ENOMEM;
            return NULL;
        }
        rs->v = v;
        rs->cap = cap;
    }
    struct nftr_rule *r = &rs->v[rs->n++];
    memset(r, 0, sizeof(*r));
    return r;
}

/* A small list of matches shared by the rules of one accept or reject point. */
struct matches {
    struct nftr_match m[NFTR_RULE_MATCHES_MAX];
    size_t n;
};

static struct nftr_match *mpush(struct matches *ms, enum nftr_match_type type) {
    /* Callers use at most four matches per rule: running out is a bug here. */
    if (ms->n >= NFTR_RULE_MATCHES_MAX)
        abort();
    struct nftr_match *m = &ms->m[ms->n++];
    memset(m, 0, sizeof(*m));
    m->type = type;
    return m;
}

static void m_oif(struct matches *ms, const char *ifname) {
    struct nftr_match *m = mpush(ms, NFTR_M_OIFNAME);
    snprintf(m->name, sizeof(m->name), "%s", ifname);
}

static void m_nfproto(struct matches *ms, int family) {
    mpush(ms, NFTR_M_NFPROTO)->family = family;
}

/* The loopback addresses a session may send to through lo. */
static const struct dr_rule lo4 = {.family = AF_INET, .addr = {127}, .prefix_len = 8};
static const struct dr_rule lo6 = {.family = AF_INET6, .addr = {[15] = 1}, .prefix_len = 128};

static void m_l4proto(struct matches *ms, uint8_t proto) {
    mpush(ms, NFTR_M_L4PROTO)->l4proto = proto;
}

static void m_set_type(struct matches *ms, enum nftr_match_type type, int family, const char *set) {
    struct nftr_match *m = mpush(ms, type);
    m->family = family;
    snprintf(m->name, sizeof(m->name), "%s", set);
}

static void m_set(struct matches *ms, int family, const char *set) {
    m_set_type(ms, NFTR_M_DADDR_SET, family, set);
}

static void m_daddr(struct matches *ms, const struct dr_rule *d) {
    if (d->prefix_len == 0) {
        m_nfproto(ms, d->family);
        return;
    }
    struct nftr_match *m = mpush(ms, NFTR_M_DADDR);
    m->family = d->family;
    memcpy(m->addr, d->addr, sizeof(m->addr));
    m->prefix_len = d->prefix_len;
}

static void m_dport(struct matches *ms, uint8_t proto, uint16_t lo, uint16_t hi) {
    struct nftr_match *m = mpush(ms, NFTR_M_DPORT);
    m->l4proto = proto;
    m->port_min = lo;
    m->port_max = hi;
}

/* meta skgid A or A-B (id_max 0: A alone) */
static void m_gids(struct matches *ms, enum nftr_match_type type, uint32_t id, uint32_t id_max) {
    struct nftr_match *m = mpush(ms, type);
    m->id = id;
    m->id_max = id_max;
}

/* Logging context of one chain. */
struct logctx {
    struct nftr_log_params p;
    bool vpn; /* emitting the VPN interface's accepts: their log rules are vpn_log */
    char accept_prefix[NFTR_LOG_PREFIX_MAX];
    char reject_prefix[NFTR_LOG_PREFIX_MAX];
};

static struct nftr_rule *rule_with(struct rules *rs, const struct matches *ms) {
    struct nftr_rule *r = rules_push(rs);
    if (!r)
        return NULL;
    memcpy(r->match, ms->m, ms->n * sizeof(ms->m[0]));
    r->n_match = ms->n;
    return r;
}

static void rule_log(struct nftr_rule *r, const struct logctx *lc, const char *prefix) {
    if (lc->p.rate > 0) {
        r->limit = true;
        r->limit_rate = lc->p.rate;
        r->limit_burst = lc->p.burst;
    }
    r->log = true;
    r->vpn_log = lc->vpn;
    r->log_group = lc->p.group;
    snprintf(r->log_prefix, sizeof(r->log_prefix), "%s", prefix);
}

/* The VPN interface's accept log rules share vpn_rate and vpn_burst. */
static void share_vpn_rate(struct rules *rs, const struct nftr_log_params *p) {
    size_t n = 0;

    if (!p->vpn_rate)
        return;
    for (size_t i = 0; i < rs->n; i++)
        n += rs->v[i].vpn_log && rs->v[i].limit;
    for (size_t i = 0; n && i < rs->n; i++) {
        if (!rs->v[i].vpn_log || !rs->v[i].limit)
            continue;
        rs->v[i].limit_rate = p->vpn_rate / n ? (uint32_t)(p->vpn_rate / n) : 1;
        rs->v[i].limit_burst = p->vpn_burst / n ? (uint32_t)(p->vpn_burst / n) : 1;
    }
}

/* M ct state new counter limit .. log "..:A " ; M counter accept
 * (accept_unlogged: M ct state new counter ; M counter accept)
 * The verdict rule counts packets, the log rule's counter counts new flows:
 * the audit compares that with the flow events it recorded (gap records). */
static void emit_accept(struct rules *rs, const struct logctx *lc, const struct matches *base) {
    struct matches ms = *base;
    mpush(&ms, NFTR_M_CT_NEW);
    struct nftr_rule *r = rule_with(rs, &ms);
    if (r) {
        if (!lc->p.accept_unlogged)
            rule_log(r, lc, lc->accept_prefix);
        r->log_counter = true;
    }
    r = rule_with(rs, base);
    if (r) {
        r->counter = true;
        r->verdict = NFTR_V_ACCEPT;
    }
}

enum reject_kind { REJECT_ANY, REJECT_TCP, REJECT_UDP };

/* M limit .. log "..:D " ; then per kind:
 *   ANY: M meta l4proto tcp counter reject with tcp reset ; M counter reject icmpx
 *   TCP: M counter reject with tcp reset   (M already matches tcp)
 *   UDP: M counter reject with icmpx admin-prohibited */
static void emit_reject(struct rules *rs, const struct logctx *lc, const struct matches *base,
                        enum reject_kind kind, const char *prefix) {
    struct nftr_rule *r = rule_with(rs, base);
    if (r)
        rule_log(r, lc, prefix);
    if (kind != REJECT_UDP) {
        struct matches ms = *base;
        if (kind == REJECT_ANY)
            m_l4proto(&ms, IPPROTO_TCP);
        r = rule_with(rs, &ms);
        if (r) {
            r->counter = true;
            r->verdict = NFTR_V_REJECT_TCP_RESET;
        }
    }
    if (kind != REJECT_TCP) {
        r = rule_with(rs, base);
        if (r) {
            r->counter = true;
            r->verdict = NFTR_V_REJECT_ADMIN;
        }
    }
}


/* An accept for one destination, optionally behind an oifname match. */
static void emit_dest_accept(struct rules *rs, const struct logctx *lc, const char *oif,
                             const struct dr_rule *d) {
    static const uint8_t protos[] = { IPPROTO_TCP, IPPROTO_UDP };
    bool ports = d->port_min != 0;
    for (size_t i = 0; i < (ports ? ARRAY_SIZE(protos) : 1); i++) {
        struct matches ms = { .n = 0 };
        if (oif)
            m_oif(&ms, oif);
        m_daddr(&ms, d);
        if (ports)
            m_dport(&ms, protos[i], d->port_min, d->port_max);
        emit_accept(rs, lc, &ms);
    }
}

static void emit_dest_reject(struct rules *rs, const struct logctx *lc, const struct dr_rule *d) {
    struct matches ms = { .n = 0 };
    m_daddr(&ms, d);
    if (d->port_min == 0) {
        emit_reject(rs, lc, &ms, REJECT_ANY, lc->reject_prefix);
        return;
    }
    struct matches tcp = ms, udp = ms;
    m_dport(&tcp, IPPROTO_TCP, d->port_min, d->port_max);
    emit_reject(rs, lc, &tcp, REJECT_TCP, lc->reject_prefix);
    m_dport(&udp, IPPROTO_UDP, d->port_min, d->port_max);
    emit_reject(rs, lc, &udp, REJECT_UDP, lc->reject_prefix);
}

/* ---- chains -------------------------------------------------------------------------- */

void nftr_chain_free(struct nftr_chain *c) {
    if (!c)
        return;
    free(c->rules);
    free(c->lo_rules);
    free(c);
}

uint32_t nftr_lo_mark(uint32_t slot) {
    return NFTR_LO_MARK_OURS | (slot & NFTR_LO_SLOT_MAX);
}

uint32_t nftr_served_mark(uint32_t slot) {
    return NFTR_LO_MARK_OURS | NFTR_LO_MARK_SERVED | (slot & NFTR_LO_SLOT_MAX);
}


/* An accept for a destination in chain input's terms (the flow's original
 * direction, no interface), per protocol when it has ports. */
static void lo_dest_accept(struct rules *rs, const struct dr_rule *d) {
    static const uint8_t protos[] = {IPPROTO_TCP, IPPROTO_UDP};
    bool ports = d->port_min != 0;
    for (size_t i = 0; i < (ports ? ARRAY_SIZE(protos) : 1); i++) {
        struct matches ms = {.n = 0};
        mpush(&ms, NFTR_M_CT_ORIGINAL);
        m_daddr(&ms, d);
        if (ports)
            m_dport(&ms, protos[i], d->port_min, d->port_max);
        struct nftr_rule *r = rule_with(rs, &ms);
        if (r) {
            r->counter = true;
            r->verdict = NFTR_V_ACCEPT;
        }
    }
}

/* What passes through lo whatever the flow's owner: ICMP (ping, and the
 * answers to a refusal) and TCP past its first packet (the reset that
 * answers one; a TCP flow is judged at its SYN). base: matches ahead. */
static void lo_passes(struct rules *rs, const struct matches *base) {
    static const uint8_t icmps[] = {IPPROTO_ICMP, IPPROTO_ICMPV6};
    struct nftr_rule *r;
    for (size_t i = 0; i < ARRAY_SIZE(icmps); i++) {
        struct matches im = *base;
        m_l4proto(&im, icmps[i]);
        r = rule_with(rs, &im);
        if (r)
            r->verdict = NFTR_V_ACCEPT;
    }
    struct matches tm = *base;
    m_l4proto(&tm, IPPROTO_TCP);
    mpush(&tm, NFTR_M_CT_NOT_NEW);
    r = rule_with(rs, &tm);
    if (r)
        r->verdict = NFTR_V_ACCEPT;
}

/* Chain lo-<id>: where a packet of a flow the session started through lo
 * (its mark, any direction) may land. ICMP (ping, and errors about its own
 * flows) always; a socket of the session itself; never another session's
 * socket; in the direction the session sent, the resolver's port 53 and its
 * listed host ports; else a refusal (a host service on 127.0.0.1 or ::1, no
 * socket at all). Every packet but TCP's after its first is looked
 * at, answers included: a session can send a datagram with a forged
 * loopback source (IP_PKTINFO, from a socket it bound on 127.0.0.2 at a
 * host service's port) to its own socket or a listed one and have it
 * answered, and that answer must not reach whoever owns the forged address.
 * A TCP flow cannot be forged so, and past its SYN the lookup can find a
 * request or TIME-WAIT sock, which has no cgroup. */
static void render_lo_chain(const struct nftr_input *in, const struct logctx *lc,
                            struct rules *rs) {
    static const struct dr_rule dns4 = {.family = AF_INET, .addr = {127}, .prefix_len = 8,
                                          .port_min = 53, .port_max = 53};
    static const struct dr_rule dns6 = {.family = AF_INET6, .addr = {[15] = 1},
                                          .prefix_len = 128, .port_min = 53, .port_max = 53};
    struct matches ms = {.n = 0};
    struct nftr_rule *r;

    lo_passes(rs, &ms);
    struct nftr_match *m = mpush(&ms, NFTR_M_SOCK_CGROUP);
    m->level = in->cgroup_level;
    m->cgroup_id = in->cgroup_id;
    if (in->cgroup_path)
        snprintf(m->name, sizeof(m->name), "%s", in->cgroup_path);
    else
        snprintf(m->name, sizeof(m->name), "%" PRIu64, in->cgroup_id);
    r = rule_with(rs, &ms);
    if (r) {
        r->counter = true;
        r->verdict = NFTR_V_ACCEPT;
    }
    /* another session's socket, whatever the port: a listed port names a
     * host service, never another user's (or this user's other) agent */
    ms.n = 0;
    m = mpush(&ms, NFTR_M_SOCK_CGROUP);
    m->level = in->cgroup_level - 1;
    m->cgroup_id = in->base_cgroup_id;
    if (in->base_cgroup)
        snprintf(m->name, sizeof(m->name), "%s", in->base_cgroup);
    else
        snprintf(m->name, sizeof(m->name), "%" PRIu64, in->base_cgroup_id);
    emit_reject(rs, lc, &ms, REJECT_ANY, lc->reject_prefix);
    if (!in->dns_port && in->iface) { /* proxy-only: no DNS at all */
        lo_dest_accept(rs, &dns4);
        lo_dest_accept(rs, &dns6);
    }
    for (size_t i = 0; i < in->policy.n_lan_exceptions; i++)
        if (dr_is_loopback(&in->policy.lan_exceptions[i]))
            lo_dest_accept(rs, &in->policy.lan_exceptions[i]);
    ms.n = 0;
    emit_reject(rs, lc, &ms, REJECT_ANY, lc->reject_prefix);
}

static int input_valid(const struct nftr_input *in) {
    if (!in)
        return -EINVAL;
    /* no interface: proxy-only, a session's own chain without DNS */
    if (in->iface ? !iface_valid(in->iface)
                  : in->scope != NFTR_SCOPE_SESSION || in->dns_port || in->domain_sets)
        return -EINVAL;
    switch (in->scope) {
    case NFTR_SCOPE_SESSION:
        if (!session_id_valid(in->session_id) || in->cgroup_id == 0)
            return -EINVAL;
        if (in->lo_slot && (in->lo_slot > NFTR_LO_SLOT_MAX || in->cgroup_level < 2 ||
                            in->cgroup_level > 255 || in->base_cgroup_id == 0))
            return -EINVAL;
        if (in->domain_sets && !in->dns_port)
            return -EINVAL; /* nothing would fill the sets */
        break;
    case NFTR_SCOPE_UID:
    case NFTR_SCOPE_SHARED_USER:
        if (in->uid == UINT32_MAX ||
            (in->scope == NFTR_SCOPE_SHARED_USER &&
             (in->guard_gid == 0 || in->guard_gid == UINT32_MAX ||
              (in->guard_gid_max && (in->guard_gid_max < in->guard_gid ||
                                     in->guard_gid_max == UINT32_MAX)))))
            return -EINVAL;
        if (in->lo_slot || in->dns_port || in->domain_sets)
            return -EINVAL;
        break;
    default:
        return -EINVAL;
    }
    const struct nftr_policy *p = &in->policy;
    if (!dests_valid(p->lan_exceptions, p->n_lan_exceptions) || !dests_valid(p->deny, p->n_deny) ||
        !dests_valid(p->allow, p->n_allow))
        return -EINVAL;
    return 0;
}

int nftr_render_chain(const struct nftr_input *in, struct nftr_chain **ret) {
    int r = input_valid(in);
    if (r < 0)
        return r;

    _cleanup_free_ struct nftr_chain *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->scope = in->scope;
    r = nftr_chain_name(in->scope, in->session_id, in->uid, c->name);
    if (r < 0)
        return r;

    /* The log prefix names the session (its id) or, in the fallback scopes, the
     * chain; session ids are lower case, so the two can never be confused. */
    struct logctx lc = { .p = in->log };
    const char *who = in->scope == NFTR_SCOPE_SESSION ? in->session_id : c->name;
    int na = snprintf(lc.accept_prefix, sizeof(lc.accept_prefix), "lyh:%s:A ", who);
    int nd = snprintf(lc.reject_prefix, sizeof(lc.reject_prefix), "lyh:%s:D ", who);
    if (na < 0 || (size_t)na >= sizeof(lc.accept_prefix) || nd < 0 ||
        (size_t)nd >= sizeof(lc.reject_prefix))
        return -EINVAL; /* unreachable with validated ids; never truncate a prefix */

    struct rules rs = { .v = NULL };
    const struct nftr_policy *p = &in->policy;
    struct matches ms;

    /* (00) Shared-user scope: the user's own programs outside lyh, whose
     * dispatch sits at the head of chain output, ahead of output's rule that
     * gives a host packet back a flow a session started (same addresses and
     * ports: the session sent first, chain input refused it, the entry
     * stays). Without this copy, (1) accepted the host packet with the
     * session's mark still on the entry, and chain input refused the user's
     * own connection as the session's: a session could plant entries at the
     * user's next source ports. Not a verdict: the packet goes on below.
     * The mask also takes in a session's DNS flow (NFTR_DNS_FLOW_MARK), which
     * output's drop rules keep host packets out of and this dispatch
     * precedes too: cleared, such a packet is dropped on input (the
     * forwarder takes only marked flows) instead of reaching it as the
     * session's, and the session's next packet marks its flow again (0). */
    if (in->scope == NFTR_SCOPE_SHARED_USER) {
        ms.n = 0;
        m_oif(&ms, "lo");
        mpush(&ms, NFTR_M_CT_ORIGINAL);
        mpush(&ms, NFTR_M_CT_MARK_ORIG);
        struct nftr_rule *cr = rule_with(&rs, &ms);
        if (cr)
            cr->ct_mark_clear = true;
    }

    /* (0a) The common packet first: one of a TCP or UDP flow already under
     * way (or an error about one) out through the VPN to an address outside
     * the LAN sets, to any port but 53. It is accepted here only where the
     * rules below would accept it: the VPN is open to everything (no
     * deny-default, no domain allowlist), the policy denies nothing, and
     * (for IPv6) IPv6 is not blocked. Nothing below can refuse it: (0)
     * refuses only port 53, and its accepts take the forwarder's rewritten
     * flows, to 127.0.0.1 / ::1, which the LAN sets hold (so these rules
     * leave them to (0) and its ct mark), (1) and (2b) match only
     * oifname "lo" (never a VPN's name), (2) only accepts, (3) is what the set
     * lookup excludes, (6) accepts. New flows go on to (6), where they are
     * logged; the rest (ICMP, port 53, other protocols) takes the long way.
     * A transfer's packets meet 1 rule here instead of ~27 (perf: nft's
     * share of the CPU under a flood of small UDP packets 8.0% -> 6.1%). */
    if (in->iface && !p->deny_default && !in->domain_sets && p->n_deny == 0) {
        static const uint8_t fprotos[] = {IPPROTO_TCP, IPPROTO_UDP};
        for (int fam = 0; fam < 2; fam++) {
            if (fam && p->ipv6_blocked)
                continue;
            for (size_t k = 0; k < ARRAY_SIZE(fprotos); k++) {
                ms.n = 0;
                m_oif(&ms, in->iface);
                mpush(&ms, NFTR_M_CT_ESTABLISHED);
                m_set_type(&ms, NFTR_M_DADDR_SET_NE, fam ? AF_INET6 : AF_INET,
                           fam ? NFTR_SET_LAN6 : NFTR_SET_LAN4);
                struct nftr_match *pm = mpush(&ms, NFTR_M_DPORT_NE);
                pm->l4proto = fprotos[k];
                pm->port_min = pm->port_max = 53;
                struct nftr_rule *fr = rule_with(&rs, &ms);
                if (fr) {
                    fr->counter = true;
                    fr->verdict = NFTR_V_ACCEPT;
                }
            }
        }
    }
    /* (0) DNS: chain dnsnat rewrote the session's port-53 flows (to any
     * address) to its forwarder in lyhd; they pass here with the rewritten
     * header (their oif is still the device the original address routed
     * to). Only flows dnsnat rewrote (`ct status dnat`), only to that port:
     * a session never reaches another session's forwarder. Not logged: the
     * forwarder records each query itself. */
    if (in->dns_port) {
        static const struct dr_rule fwd[] = {
            {.family = AF_INET, .addr = {127, 0, 0, 1}, .prefix_len = 32},
            {.family = AF_INET6, .addr = {[15] = 1}, .prefix_len = 128},
        };
        static const uint8_t protos[] = {IPPROTO_UDP, IPPROTO_TCP};
        for (size_t i = 0; i < ARRAY_SIZE(fwd); i++)
            for (size_t k = 0; k < ARRAY_SIZE(protos); k++) {
                ms.n = 0;
                mpush(&ms, NFTR_M_CT_DNAT);
                m_daddr(&ms, &fwd[i]);
                m_dport(&ms, protos[k], in->dns_port, in->dns_port);
                struct nftr_rule *dr = rule_with(&rs, &ms);
                if (dr) {
                    /* chain input lets it land on lyhd's forwarder only */
                    dr->ct_mark_set = NFTR_DNS_FLOW_MARK;
                    dr->counter = true;
                    dr->verdict = NFTR_V_ACCEPT;
                }
            }
        /* A port-53 flow that was not rewritten (the session's element of
         * map dnsport went missing, or an old flow from before it) would
         * ask a resolver of the agent's choosing, unrecorded: refused, so
         * that a lost redirection fails closed. */
        for (size_t k = 0; k < ARRAY_SIZE(protos); k++) {
            ms.n = 0;
            m_dport(&ms, protos[k], 53, 53);
            emit_reject(&rs, &lc, &ms, protos[k] == IPPROTO_TCP ? REJECT_TCP : REJECT_UDP,
                        lc.reject_prefix);
        }
    }
    /* (1) loopback. The shared-user scope covers a user's own unsandboxed
     * programs: loopback addresses, any port. */
    const struct dr_rule *los[] = {&lo4, &lo6};
    bool sandboxed = in->scope != NFTR_SCOPE_SHARED_USER;
    uint32_t mark = in->lo_slot ? nftr_lo_mark(in->lo_slot) : 0;
    for (size_t i = 0; !sandboxed && i < ARRAY_SIZE(los); i++)
        emit_dest_accept(&rs, &lc, "lo", los[i]);
    if (sandboxed && mark) {
        /* A session that may listen: through lo it sends only on flows that
         * carry its marks. It marks every flow it starts (chain input then
         * decides where the flow may land: chain lo-<id>), and answers only
         * flows chain input marked as served by it (a host process's
         * connection to its server). No packet of someone else's flow, and
         * none without conntrack state (nothing to judge on input). */
        ms.n = 0;
        m_oif(&ms, "lo");
        mpush(&ms, NFTR_M_CT_INVALID);
        /* dropped, not rejected: conntrack calls the odd packet of a live
         * TCP connection invalid (out of its window), and a reset in answer
         * would end the session's own connection */
        struct nftr_rule *ir = rule_with(&rs, &ms);
        if (ir) {
            ir->counter = true;
            ir->verdict = NFTR_V_DROP;
        }
        for (size_t i = 0; i < ARRAY_SIZE(los); i++) {
            ms.n = 0;
            m_oif(&ms, "lo");
            m_daddr(&ms, los[i]);
            struct matches nm = ms, om = ms, sm = ms;
            mpush(&nm, NFTR_M_CT_NEW);
            struct nftr_rule *lr = rule_with(&rs, &nm);
            if (lr) {
                lr->ct_mark_set = mark;
                if (!lc.p.accept_unlogged)
                    rule_log(lr, &lc, lc.accept_prefix);
                lr->log_counter = true;
            }
            mpush(&om, NFTR_M_CT_MARK)->id = mark;
            lr = rule_with(&rs, &om);
            if (lr) {
                lr->counter = true;
                lr->verdict = NFTR_V_ACCEPT;
            }
            mpush(&sm, NFTR_M_CT_REPLY);
            mpush(&sm, NFTR_M_CT_MARK)->id = nftr_served_mark(in->lo_slot);
            lr = rule_with(&rs, &sm);
            if (lr) {
                lr->counter = true;
                lr->verdict = NFTR_V_ACCEPT;
            }
        }
    } else if (sandboxed) {
        /* No listeners (nothing is judged on input): ICMP (ping), the
         * resolver's port 53 (a stub such as 127.0.0.53, when lyhd does not
         * forward the session's DNS itself) and the listed host ports, in
         * output. Without bind the session cannot pick a source port to
         * forge a flow with. */
        for (size_t i = 0; i < ARRAY_SIZE(los); i++) {
            ms.n = 0;
            m_oif(&ms, "lo");
            m_daddr(&ms, los[i]);
            m_l4proto(&ms, los[i]->family == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6);
            emit_accept(&rs, &lc, &ms);
            if (in->dns_port || !in->iface)
                continue;
            struct dr_rule dns = *los[i];
            dns.port_min = dns.port_max = 53;
            emit_dest_accept(&rs, &lc, "lo", &dns);
        }
        for (size_t i = 0; i < p->n_lan_exceptions; i++)
            if (dr_is_loopback(&p->lan_exceptions[i]))
                emit_dest_accept(&rs, &lc, "lo", &p->lan_exceptions[i]);
    }
    /* (2) the policy's LAN exceptions, on any interface but lo: the host's
     * own addresses route through lo, and a LAN exception must not open
     * the machine's own services (a listed host port is a loopback LAN
     * exception, handled above or in chain lo-<id>) */
    for (size_t i = 0; i < p->n_lan_exceptions; i++) {
        const struct dr_rule *d = &p->lan_exceptions[i];
        if (dr_is_loopback(d))
            continue;
        if (!sandboxed) {
            emit_dest_accept(&rs, &lc, NULL, d);
            continue;
        }
        static const uint8_t protos[] = {IPPROTO_TCP, IPPROTO_UDP};
        bool ports = d->port_min != 0;
        for (size_t k = 0; k < (ports ? ARRAY_SIZE(protos) : 1); k++) {
            ms.n = 0;
            struct nftr_match *nm = mpush(&ms, NFTR_M_OIFNAME_NE);
            snprintf(nm->name, sizeof(nm->name), "lo");
            m_daddr(&ms, d);
            if (ports)
                m_dport(&ms, protos[k], d->port_min, d->port_max);
            emit_accept(&rs, &lc, &ms);
        }
    }
    /* (2b) anything else through lo: the host's other addresses (its LAN
     * address, say), flows of others: refused */
    ms.n = 0;
    m_oif(&ms, "lo");
    emit_reject(&rs, &lc, &ms, REJECT_ANY, lc.reject_prefix);
    /* (3) LAN and other non-VPN destinations */
    ms.n = 0;
    m_set(&ms, AF_INET, NFTR_SET_LAN4);
    emit_reject(&rs, &lc, &ms, REJECT_ANY, lc.reject_prefix);
    ms.n = 0;
    m_set(&ms, AF_INET6, NFTR_SET_LAN6);
    emit_reject(&rs, &lc, &ms, REJECT_ANY, lc.reject_prefix);
    /* (4) the policy's deny rules */
    for (size_t i = 0; i < p->n_deny; i++)
        emit_dest_reject(&rs, &lc, &p->deny[i]);
    /* (5) IPv6 off for this session */
    if (p->ipv6_blocked) {
        ms.n = 0;
        m_nfproto(&ms, AF_INET6);
        emit_reject(&rs, &lc, &ms, REJECT_ANY, lc.reject_prefix);
    }
    /* (6) the VPN: everything, or (deny-default) the allowed destinations
     * and, with a domain allowlist, the addresses in the session's sets */
    if (in->domain_sets) {
        snprintf(c->set4, sizeof(c->set4), NFTR_DOMAIN_SET4_PREFIX "%s", in->session_id);
        snprintf(c->set6, sizeof(c->set6), NFTR_DOMAIN_SET6_PREFIX "%s", in->session_id);
        /* A flow this chain let in goes on when the name's mapping expires
         * (its set element times out): only new ones need a live mapping.
         * The LAN sets, deny rules and IPv6 block above still cut it. */
        ms.n = 0;
        m_oif(&ms, in->iface);
        mpush(&ms, NFTR_M_CT_ESTABLISHED);
        struct nftr_rule *er = rule_with(&rs, &ms);
        if (er) {
            er->counter = true;
            er->verdict = NFTR_V_ACCEPT;
        }
        lc.vpn = true;
        for (int fam = 0; fam < 2; fam++) {
            ms.n = 0;
            m_oif(&ms, in->iface);
            m_set(&ms, fam ? AF_INET6 : AF_INET, fam ? c->set6 : c->set4);
            emit_accept(&rs, &lc, &ms);
        }
        lc.vpn = false;
    }
    lc.vpn = in->iface != NULL;
    if (!in->iface) {
        /* proxy-only: no VPN; the proxy is a LAN exception, above */
    } else if (!p->deny_default && !in->domain_sets) {
        ms.n = 0;
        m_oif(&ms, in->iface);
        emit_accept(&rs, &lc, &ms);
    } else {
        for (size_t i = 0; i < p->n_allow; i++)
            emit_dest_accept(&rs, &lc, in->iface, &p->allow[i]);
    }
    lc.vpn = false;
    /* (7) everything else */
    ms.n = 0;
    emit_reject(&rs, &lc, &ms, REJECT_ANY, lc.reject_prefix);

    if (rs.err) {
        free(rs.v);
        return rs.err;
    }
    share_vpn_rate(&rs, &lc.p);
    c->rules = rs.v;
    c->n_rules = rs.n;
    if (mark) {
        struct rules lrs = {.v = NULL};
        render_lo_chain(in, &lc, &lrs);
        if (lrs.err) {
            free(lrs.v);
            free(c->rules);
            return lrs.err;
        }
        c->lo_mark = mark;
        c->served_mark = nftr_served_mark(in->lo_slot);
        c->lo_rules = lrs.v;
        c->n_lo_rules = lrs.n;
        snprintf(c->lo_name, sizeof(c->lo_name), NFTR_LOOPBACK_CHAIN_PREFIX "%s", in->session_id);
    }

    /* dispatch */
    switch (in->scope) {
    case NFTR_SCOPE_SESSION:
        c->cgroup_id = in->cgroup_id;
        c->dns_port = in->dns_port;
        break;
    case NFTR_SCOPE_UID:
    case NFTR_SCOPE_SHARED_USER: {
        /* UID: inside guarded the gid has matched already, the uid picks the chain.
         * SHARED_USER: in output, the uid's sockets that are NOT the guard gid's:
         * a socket of a sandboxed agent is always decided by its own session's
         * chain in guarded, never by the user-wide one (which has neither the
         * session's deny rules nor its allowlist), wherever this dispatch sits. */
        snprintf(c->dispatch_chain, sizeof(c->dispatch_chain), "%s",
                 in->scope == NFTR_SCOPE_UID ? NFTR_CHAIN_GUARDED : NFTR_CHAIN_OUTPUT);
        struct nftr_rule *d = &c->dispatch;
        d->match[0].type = NFTR_M_SKUID;
        d->match[0].id = in->uid;
        d->n_match = 1;
        if (in->scope == NFTR_SCOPE_SHARED_USER) {
            d->match[1].type = NFTR_M_SKGID_NE;
            d->match[1].id = in->guard_gid;
            d->match[1].id_max = in->guard_gid_max;
            d->n_match = 2;
        }
        d->verdict = NFTR_V_JUMP;
        snprintf(d->target, sizeof(d->target), "%s", c->name);
        snprintf(d->comment, sizeof(d->comment), "%s", c->name);
        break;
    }
    }
    *ret = TAKE_PTR(c);
    return 0;
}

/* ---- the data layout (docs/guard-as-data.md) ------------------------------------------- */

static const struct nftr_data_set data_sets[] = {
    { NFTR_SET_DLIVE, NFTR_K_CG, NFTR_D_NONE, "every data session" },
    { NFTR_SET_DVPN, NFTR_K_CG_IF, NFTR_D_NONE, "its VPN interface, for IPv4" },
    { NFTR_SET_DVPN6, NFTR_K_CG_IF, NFTR_D_NONE, "its VPN interface, for IPv6 (when on)" },
    { NFTR_SET_DFWD, NFTR_K_PORT_CG, NFTR_D_NONE, "its forwarder's port" },
    { NFTR_MAP_DLOMARK, NFTR_K_CG, NFTR_D_MARK, "the mark its new loopback flows get" },
    { NFTR_SET_DOWNMARK, NFTR_K_MARK_CG, NFTR_D_NONE, "its mark: flows through lo it started" },
    { NFTR_SET_DSRVMARK, NFTR_K_MARK_CG, NFTR_D_NONE, "its served mark: flows it answers" },
    { NFTR_MAP_ACCT, NFTR_K_CG, NFTR_D_COUNTER, "its accepted packets" },
    { NFTR_MAP_DNSC, NFTR_K_CG, NFTR_D_COUNTER, "its DNS flows' packets" },
    { NFTR_MAP_ANEW, NFTR_K_CG, NFTR_D_COUNTER, "its new VPN flows" },
    { NFTR_MAP_LNEW, NFTR_K_CG, NFTR_D_COUNTER, "its new loopback flows" },
    { NFTR_MAP_DROP, NFTR_K_CG, NFTR_D_COUNTER, "its refused packets" },
    { NFTR_MAP_ALIM, NFTR_K_CG, NFTR_D_LIMIT, "the log rate of its new VPN flows" },
    { NFTR_MAP_LLIM, NFTR_K_CG, NFTR_D_LIMIT, "the log rate of its new loopback flows" },
    { NFTR_MAP_DLIM, NFTR_K_CG, NFTR_D_LIMIT, "the log rate of its refusals" },
    { NFTR_MAP_ILIM, NFTR_K_MARK, NFTR_D_LIMIT, "the log rate of refusals on input, by mark" },
    { NFTR_MAP_IDROP, NFTR_K_MARK, NFTR_D_COUNTER, "refusals on input, by mark" },
    { NFTR_MAP_ALOG, NFTR_K_CG, NFTR_D_VERDICT, "jump to its accept log chain" },
    { NFTR_MAP_DLOG, NFTR_K_CG, NFTR_D_VERDICT, "jump to its refusal log chain" },
    { NFTR_MAP_DLOGM, NFTR_K_MARK, NFTR_D_VERDICT, "the same, by mark (input)" },
};

size_t nftr_data_sets(const struct nftr_data_set **ret) {
    *ret = data_sets;
    return ARRAY_SIZE(data_sets);
}

/* a lookup keyed by the socket's cgroup at level */
static struct nftr_match *m_cg_set(struct matches *ms, enum nftr_match_type type, uint32_t level,
                                   const char *set) {
    struct nftr_match *m = mpush(ms, type);
    m->level = level;
    snprintf(m->name, sizeof(m->name), "%s", set);
    return m;
}

static void r_objs(struct nftr_rule *r, uint32_t level, const char *counter, const char *limit) {
    r->obj_level = level;
    if (counter)
        snprintf(r->counter_map, sizeof(r->counter_map), "%s", counter);
    if (limit)
        snprintf(r->limit_map, sizeof(r->limit_map), "%s", limit);
}

static void r_verdict(struct nftr_rule *r, enum nftr_verdict v, const char *target, uint32_t level) {
    r->verdict = v;
    r->cgroup_level = level;
    if (target)
        snprintf(r->target, sizeof(r->target), "%s", target);
}

/* Chain guarded's first rules: a packet of a TCP or UDP flow under way out
 * through a data session's VPN interface to an address outside the LAN sets,
 * to any port but 53: what chain data would accept, in one rule. dvpn and
 * dvpn6 hold live data sessions only (the transaction that adds or removes
 * dlive's element does the same to theirs), and dvpn6 only those with IPv6
 * on; `ip daddr` / `ip6 daddr` tie each rule to its family. */
static void data_established(struct rules *rs, uint32_t level) {
    static const uint8_t protos[] = {IPPROTO_TCP, IPPROTO_UDP};
    for (int fam = 0; fam < 2; fam++)
        for (size_t k = 0; k < ARRAY_SIZE(protos); k++) {
            struct matches ms = {.n = 0};
            mpush(&ms, NFTR_M_CT_ESTABLISHED);
            m_cg_set(&ms, NFTR_M_CG_IF_SET, level, fam ? NFTR_SET_DVPN6 : NFTR_SET_DVPN);
            m_set_type(&ms, NFTR_M_DADDR_SET_NE, fam ? AF_INET6 : AF_INET,
                       fam ? NFTR_SET_LAN6 : NFTR_SET_LAN4);
            struct nftr_match *pm = mpush(&ms, NFTR_M_DPORT_NE);
            pm->l4proto = protos[k];
            pm->port_min = pm->port_max = 53;
            struct nftr_rule *r = rule_with(rs, &ms);
            if (r) {
                r_objs(r, level, NFTR_MAP_ACCT, NULL);
                r_verdict(r, NFTR_V_ACCEPT, NULL, 0);
            }
        }
}

static void goto_refuse(struct rules *rs, const struct matches *ms) {
    struct nftr_rule *r = rule_with(rs, ms);
    if (r)
        r_verdict(r, NFTR_V_GOTO, NFTR_CHAIN_DREFUSE, 0);
}

/* Chain data: a data session's packet, the steps of nftr_render_chain() for
 * the default policy, each accept behind an element that names the socket's
 * cgroup. A named counter's map comes first in a rule: its miss ends the rule
 * before anything else. */
static void render_data_chain(struct rules *rs, uint32_t level) {
    static const struct dr_rule fwd[] = {
        {.family = AF_INET, .addr = {127, 0, 0, 1}, .prefix_len = 32},
        {.family = AF_INET6, .addr = {[15] = 1}, .prefix_len = 128},
    };
    static const uint8_t protos[] = {IPPROTO_UDP, IPPROTO_TCP};
    struct matches ms;
    struct nftr_rule *r;

    /* (0) DNS: only flows chain dnsnat sent to this session's own forwarder */
    for (size_t i = 0; i < ARRAY_SIZE(fwd); i++)
        for (size_t k = 0; k < ARRAY_SIZE(protos); k++) {
            ms.n = 0;
            mpush(&ms, NFTR_M_CT_DNAT);
            m_daddr(&ms, &fwd[i]);
            m_cg_set(&ms, NFTR_M_PORT_CG_SET, level, NFTR_SET_DFWD)->l4proto = protos[k];
            r = rule_with(rs, &ms);
            if (r) {
                r_objs(r, level, NFTR_MAP_DNSC, NULL);
                r->ct_mark_set = NFTR_DNS_FLOW_MARK;
                r_verdict(r, NFTR_V_ACCEPT, NULL, 0);
            }
        }
    /* a flow chain dnsnat rewrote that (0) did not take (its dfwd or dnsc
     * element gone): refused here, not left to pass as a loopback flow */
    ms.n = 0;
    mpush(&ms, NFTR_M_CT_DNAT);
    goto_refuse(rs, &ms);
    for (size_t k = 0; k < ARRAY_SIZE(protos); k++) {
        ms.n = 0;
        m_dport(&ms, protos[k], 53, 53);
        goto_refuse(rs, &ms);
    }
    /* (1) loopback: new flows get the session's mark (dlomark), and it sends
     * only on flows with its marks, each paired with its cgroup */
    ms.n = 0;
    m_oif(&ms, "lo");
    mpush(&ms, NFTR_M_CT_INVALID);
    r = rule_with(rs, &ms);
    if (r) {
        r->counter = true;
        r->verdict = NFTR_V_DROP;
    }
    const struct dr_rule *los[] = {&lo4, &lo6};
    for (size_t i = 0; i < ARRAY_SIZE(los); i++) {
        ms.n = 0;
        m_oif(&ms, "lo");
        m_daddr(&ms, los[i]);
        struct matches nm = ms, om = ms, sm = ms;
        mpush(&nm, NFTR_M_CT_NEW);
        r = rule_with(rs, &nm);
        if (r) {
            r_objs(r, level, NFTR_MAP_LNEW, NFTR_MAP_LLIM);
            snprintf(r->ct_mark_map, sizeof(r->ct_mark_map), NFTR_MAP_DLOMARK);
            r_verdict(r, NFTR_V_JUMP, NFTR_CHAIN_DALOG, 0);
        }
        m_cg_set(&om, NFTR_M_MARK_CG_SET, level, NFTR_SET_DOWNMARK);
        r = rule_with(rs, &om);
        if (r) {
            r_objs(r, level, NFTR_MAP_ACCT, NULL);
            r_verdict(r, NFTR_V_ACCEPT, NULL, 0);
        }
        mpush(&sm, NFTR_M_CT_REPLY);
        m_cg_set(&sm, NFTR_M_MARK_CG_SET, level, NFTR_SET_DSRVMARK);
        r = rule_with(rs, &sm);
        if (r) {
            r_objs(r, level, NFTR_MAP_ACCT, NULL);
            r_verdict(r, NFTR_V_ACCEPT, NULL, 0);
        }
    }
    /* (2b) anything else through lo; (3) the LAN sets */
    ms.n = 0;
    m_oif(&ms, "lo");
    goto_refuse(rs, &ms);
    for (int fam = 0; fam < 2; fam++) {
        ms.n = 0;
        m_set(&ms, fam ? AF_INET6 : AF_INET, fam ? NFTR_SET_LAN6 : NFTR_SET_LAN4);
        goto_refuse(rs, &ms);
    }
    /* (5) no rule: IPv6 leaves by the VPN only with a dvpn6 element.
     * (6) the VPN, new flows counted and logged, then accepted. */
    for (int fam = 0; fam < 2; fam++) {
        ms.n = 0;
        m_nfproto(&ms, fam ? AF_INET6 : AF_INET);
        m_cg_set(&ms, NFTR_M_CG_IF_SET, level, fam ? NFTR_SET_DVPN6 : NFTR_SET_DVPN);
        struct matches nm = ms;
        mpush(&nm, NFTR_M_CT_NEW);
        r = rule_with(rs, &nm);
        if (r) {
            r_objs(r, level, NFTR_MAP_ANEW, NFTR_MAP_ALIM);
            r_verdict(r, NFTR_V_JUMP, NFTR_CHAIN_DALOG, 0);
        }
        /* accepted only with its new flows' counter there: its loss closes,
         * never lets new flows out uncounted (the rule above, which counts
         * and logs them, ends at the same miss) */
        m_cg_set(&ms, NFTR_M_CG_SET, level, NFTR_MAP_ANEW);
        r = rule_with(rs, &ms);
        if (r) {
            r_objs(r, level, NFTR_MAP_ACCT, NULL);
            r_verdict(r, NFTR_V_ACCEPT, NULL, 0);
        }
    }
    /* (7) everything else */
    ms.n = 0;
    goto_refuse(rs, &ms);
}

/* A chain's end: whatever comes here is refused (tcp reset, else icmpx). */
static void refuse_rest(struct rules *rs) {
    struct matches ms = {.n = 0};
    m_l4proto(&ms, IPPROTO_TCP);
    struct nftr_rule *r = rule_with(rs, &ms);
    if (r) {
        r->counter = true;
        r->verdict = NFTR_V_REJECT_TCP_RESET;
    }
    ms.n = 0;
    r = rule_with(rs, &ms);
    if (r) {
        r->counter = true;
        r->verdict = NFTR_V_REJECT_ADMIN;
    }
}

/* Chain dalog: the jump to a session's accept log chain a-<id>, which the new
 * loopback and VPN flows' rules reach (after their limit) by a jump of their
 * own. In one rule, so that a commit that validates the table walks map alog's
 * elements once, not once for each rule that names it (Linux 6.18 validates a
 * chain once per hook, but walks a verdict map at every lookup that names
 * it). */
static void render_dalog(struct rules *rs, uint32_t level) {
    struct matches ms = {.n = 0};
    struct nftr_rule *r = rule_with(rs, &ms);
    if (r)
        r_verdict(r, NFTR_V_VMAP_CGROUP, NFTR_MAP_ALOG, level);
}

/* Chain drefuse: counted, logged within the session's rate, refused. The
 * count and the record are rules of their own, so that a lost counter element
 * stops neither the record nor the refusal, and a lost limit or log element
 * only the record (the end's gap record shows it). */
static void render_drefuse(struct rules *rs, uint32_t level) {
    struct matches ms = {.n = 0};
    struct nftr_rule *r = rule_with(rs, &ms);
    if (r)
        r_objs(r, level, NFTR_MAP_DROP, NULL);
    r = rule_with(rs, &ms);
    if (r) {
        r_objs(r, level, NULL, NFTR_MAP_DLIM);
        r_verdict(r, NFTR_V_VMAP_CGROUP, NFTR_MAP_DLOG, level);
    }
    refuse_rest(rs);
}

/* Chain dlo (input): a flow through lo with a session's mark that no chain
 * session's lo-<id> takes. Chosen by the mark's kind in chain input, never by
 * an element (chain input accepts by default: a set that chose which flows
 * are judged would open them when it lost one). As in lo-<id>: ICMP and TCP
 * past its first packet pass; the flow lands only on a socket of the session
 * whose mark it carries (downmark pairs the two); everything else (another
 * session's socket, a host service, no socket) is refused, counted and
 * logged as that session's, or under the nosession prefix for a mark no
 * session has. */
static void render_dlo(struct rules *rs, const struct logctx *lc, uint32_t level) {
    struct matches ms = {.n = 0};
    struct nftr_rule *r;
    lo_passes(rs, &ms);
    m_cg_set(&ms, NFTR_M_MARK_CG_SET, level, NFTR_SET_DOWNMARK);
    r = rule_with(rs, &ms);
    if (r)
        r->verdict = NFTR_V_ACCEPT;
    ms.n = 0;
    r = rule_with(rs, &ms); /* counted, then recorded: as in drefuse */
    if (r)
        r_objs(r, 0, NFTR_MAP_IDROP, NULL);
    r = rule_with(rs, &ms);
    if (r) {
        r_objs(r, 0, NULL, NFTR_MAP_ILIM);
        r_verdict(r, NFTR_V_VMAP_CTMARK, NFTR_MAP_DLOGM, 0);
    }
    ms.n = 0;
    snprintf(mpush(&ms, NFTR_M_CT_MARK_SET_NE)->name, NFTR_NAME_MAX, NFTR_MAP_DLOGM);
    r = rule_with(rs, &ms);
    if (r)
        rule_log(r, lc, NFTR_NOSESSION_PREFIX);
    refuse_rest(rs);
}

/* Chain input without the data layout: a session's marked flow that map
 * loopback does not take (root deleted its element while the session ran, or
 * the session is gone and its flow lingers) lands nowhere: refused, never
 * left to the policy's accept, which would let it reach any host service. As
 * in chain lo-<id>, ICMP (the answers to a refusal among it) and TCP past its
 * first packet (the reset that answers one) pass: a TCP flow is judged at its
 * SYN. */
static void unmarked_lo_refusal(struct rules *in, const struct logctx *lc, const struct matches *om) {
    lo_passes(in, om);
    emit_reject(in, lc, om, REJECT_ANY, NFTR_NOSESSION_PREFIX);
}

bool nftr_data_eligible(const struct nftr_input *in) {
    if (input_valid(in) < 0 || in->scope != NFTR_SCOPE_SESSION)
        return false;
    const struct nftr_policy *p = &in->policy;
    return in->iface && in->dns_port && in->lo_slot && !in->domain_sets && in->log.rate > 0 &&
           !p->deny_default && p->n_lan_exceptions == 0 && p->n_deny == 0 && p->n_allow == 0;
}

void nftr_data_free(struct nftr_data *d) {
    free(d);
}

static struct nftr_elem *elem_push(struct nftr_data *d, const char *set, enum nftr_key key) {
    if (d->n_elems >= NFTR_DATA_ELEMS_MAX)
        abort(); /* a fixed list below: running out is a bug here */
    struct nftr_elem *e = &d->elems[d->n_elems++];
    memset(e, 0, sizeof(*e));
    e->set = set;
    e->key = key;
    e->cgroup_id = d->cgroup_id;
    return e;
}

/* id: the caller's copy, not d's (the names are built inside d) */
static void obj_push(struct nftr_data *d, const char *id, enum nftr_val type, const char *kind,
                     uint32_t rate, uint32_t burst) {
    if (d->n_objs >= NFTR_DATA_OBJS_MAX)
        abort();
    struct nftr_obj *o = &d->objs[d->n_objs++];
    o->type = type;
    snprintf(o->name, sizeof(o->name), "%s-%s", kind, id);
    o->rate = rate;
    o->burst = burst;
}

/* { cgroup : "<kind>-<id>" } of map `kind`, the object of the same name */
static void elem_obj(struct nftr_data *d, const char *id, const char *map, enum nftr_val type) {
    struct nftr_elem *e = elem_push(d, map, NFTR_K_CG);
    e->val = type;
    snprintf(e->vname, sizeof(e->vname), "%s-%s", map, id);
}

int nftr_render_data(const struct nftr_input *in, struct nftr_data **ret) {
    if (!nftr_data_eligible(in))
        return -EINVAL;
    _cleanup_free_ struct nftr_data *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    snprintf(d->session_id, sizeof(d->session_id), "%s", in->session_id);
    d->cgroup_id = in->cgroup_id;
    if (in->cgroup_path && strlen(in->cgroup_path) < sizeof(d->cgroup_text) &&
        !strpbrk(in->cgroup_path, "\"\n"))
        snprintf(d->cgroup_text, sizeof(d->cgroup_text), "%s", in->cgroup_path);
    bool logged = !in->log.accept_unlogged;
    uint32_t lo_mark = nftr_lo_mark(in->lo_slot), served = nftr_served_mark(in->lo_slot);

    /* objects: every bucket today's chains have is a bucket of its own */
    static const char *const counters[] = {NFTR_MAP_ACCT, NFTR_MAP_DNSC, NFTR_MAP_ANEW,
                                           NFTR_MAP_LNEW, NFTR_MAP_DROP, NFTR_MAP_IDROP};
    for (size_t i = 0; i < ARRAY_SIZE(counters); i++)
        obj_push(d, in->session_id, NFTR_D_COUNTER, counters[i], 0, 0);
    if (logged) {
        bool vpn = in->log.vpn_rate > 0;
        obj_push(d, in->session_id, NFTR_D_LIMIT, NFTR_MAP_ALIM,
                 vpn ? in->log.vpn_rate : in->log.rate, vpn ? in->log.vpn_burst : in->log.burst);
        obj_push(d, in->session_id, NFTR_D_LIMIT, NFTR_MAP_LLIM, in->log.rate, in->log.burst);
    }
    obj_push(d, in->session_id, NFTR_D_LIMIT, NFTR_MAP_DLIM, in->log.rate, in->log.burst);
    obj_push(d, in->session_id, NFTR_D_LIMIT, NFTR_MAP_ILIM, in->log.rate, in->log.burst);

    /* the log chains: each only names the session in its prefix */
    struct nftr_rule *lr[] = {&d->alog_rule, &d->dlog_rule};
    char *names[] = {d->alog, d->dlog};
    const char *pfx[] = {NFTR_ALOG_CHAIN_PREFIX, NFTR_DLOG_CHAIN_PREFIX};
    const char kind[] = {'A', 'D'};
    for (size_t i = logged ? 0 : 1; i < 2; i++) {
        snprintf(names[i], NFTR_NAME_MAX, "%s%s", pfx[i], in->session_id);
        lr[i]->log = true;
        lr[i]->log_group = in->log.group;
        int n = snprintf(lr[i]->log_prefix, sizeof(lr[i]->log_prefix), "lyh:%s:%c ",
                         in->session_id, kind[i]);
        if (n < 0 || (size_t)n >= sizeof(lr[i]->log_prefix))
            return -EINVAL; /* unreachable with validated ids */
    }

    /* elements: what opens, then its counters, limits and log jumps, dlive last */
    struct nftr_elem *e = elem_push(d, NFTR_SET_DVPN, NFTR_K_CG_IF);
    snprintf(e->ifname, sizeof(e->ifname), "%s", in->iface);
    if (!in->policy.ipv6_blocked) {
        e = elem_push(d, NFTR_SET_DVPN6, NFTR_K_CG_IF);
        snprintf(e->ifname, sizeof(e->ifname), "%s", in->iface);
    }
    elem_push(d, NFTR_SET_DFWD, NFTR_K_PORT_CG)->port = in->dns_port;
    e = elem_push(d, NFTR_MAP_DNSPORT, NFTR_K_CG);
    e->val = NFTR_D_PORT;
    e->vport = in->dns_port;
    e = elem_push(d, NFTR_MAP_DLOMARK, NFTR_K_CG);
    e->val = NFTR_D_MARK;
    e->vmark = lo_mark;
    elem_push(d, NFTR_SET_DOWNMARK, NFTR_K_MARK_CG)->mark = lo_mark;
    elem_push(d, NFTR_SET_DSRVMARK, NFTR_K_MARK_CG)->mark = served;
    e = elem_push(d, NFTR_MAP_SERVED, NFTR_K_CG);
    e->val = NFTR_D_MARK;
    e->vmark = served;
    for (size_t i = 0; i < ARRAY_SIZE(counters) - 1; i++)
        elem_obj(d, in->session_id, counters[i], NFTR_D_COUNTER);
    e = elem_push(d, NFTR_MAP_IDROP, NFTR_K_MARK);
    e->mark = lo_mark;
    e->val = NFTR_D_COUNTER;
    snprintf(e->vname, sizeof(e->vname), NFTR_MAP_IDROP "-%s", in->session_id);
    if (logged) {
        elem_obj(d, in->session_id, NFTR_MAP_ALIM, NFTR_D_LIMIT);
        elem_obj(d, in->session_id, NFTR_MAP_LLIM, NFTR_D_LIMIT);
    }
    elem_obj(d, in->session_id, NFTR_MAP_DLIM, NFTR_D_LIMIT);
    e = elem_push(d, NFTR_MAP_ILIM, NFTR_K_MARK);
    e->mark = lo_mark;
    e->val = NFTR_D_LIMIT;
    snprintf(e->vname, sizeof(e->vname), NFTR_MAP_ILIM "-%s", in->session_id);
    if (logged) {
        e = elem_push(d, NFTR_MAP_ALOG, NFTR_K_CG);
        e->val = NFTR_D_VERDICT;
        snprintf(e->vname, sizeof(e->vname), "%s", d->alog);
    }
    e = elem_push(d, NFTR_MAP_DLOG, NFTR_K_CG);
    e->val = NFTR_D_VERDICT;
    snprintf(e->vname, sizeof(e->vname), "%s", d->dlog);
    e = elem_push(d, NFTR_MAP_DLOGM, NFTR_K_MARK);
    e->mark = lo_mark;
    e->val = NFTR_D_VERDICT;
    snprintf(e->vname, sizeof(e->vname), "%s", d->dlog);
    /* Its slot, taken in map loopback as a chain session's is: a slot is
     * never a chain session's and a data session's at once (chain input
     * would send the data session's flows to the other's lo-<id>). The
     * element decides nothing: with it or without, such a flow goes on to
     * chain dlo. */
    e = elem_push(d, NFTR_MAP_LOOPBACK, NFTR_K_MARK);
    e->mark = lo_mark;
    e->val = NFTR_D_CONTINUE;
    /* Its cgroup, taken in map sessions likewise: a cgroup is never a chain
     * session's and a data session's at once, so chain guarded's rules for
     * established flows, ahead of the chain sessions' dispatch, never take
     * a chain session's packet (its cgroup is in no dvpn element). The
     * element decides nothing: the packet goes on to the dlive rule. */
    elem_push(d, NFTR_MAP_SESSIONS, NFTR_K_CG)->val = NFTR_D_CONTINUE;
    elem_push(d, NFTR_SET_DLIVE, NFTR_K_CG);
    *ret = TAKE_PTR(d);
    return 0;
}

/* ---- base ---------------------------------------------------------------------------- */

void nftr_base_free(struct nftr_base *b) {
    if (!b)
        return;
    free(b->output);
    free(b->guarded);
    free(b->input);
    free(b->dnsnat);
    free(b->dnsout);
    free(b->data);
    free(b->drefuse);
    free(b->dlo);
    free(b->dalog);
    free(b);
}

int nftr_render_base(const struct nftr_base_params *p, struct nftr_base **ret) {
    if (!p || p->guard_gid == 0 || p->guard_gid == UINT32_MAX ||
        (p->guard_gid_max && (p->guard_gid_max < p->guard_gid || p->guard_gid_max == UINT32_MAX)))
        return -EINVAL;
    if (p->cgroupv2 && (p->cgroup_level < 1 || p->cgroup_level > 255))
        return -EINVAL;
    if (p->inbound && (!p->cgroupv2 || p->cgroup_level < 2 || p->base_cgroup_id == 0))
        return -EINVAL;
    if (p->dns && !p->cgroupv2)
        return -EINVAL;
    if (p->proto_uid == UINT32_MAX)
        return -EINVAL;
    if (p->data && !(p->cgroupv2 && p->inbound && p->dns))
        return -EINVAL;

    _cleanup_free_ struct nftr_base *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->params = *p;
    if (!p->cgroupv2)
        b->params.cgroup_level = 0;

    struct rules out = { .v = NULL }, gu = { .v = NULL };
    struct matches ms = { .n = 0 };
    struct nftr_rule *r;

    /* lyhd's protocol process parses what agents send and resolvers and
     * NFLOG carry; were it taken over, its own sockets must not become a way
     * out: UDP port 53 to a session's resolver, and through lo only the
     * replies of TCP connections agents opened to its forwarders (the socket
     * it accepted is its file, so its uid), nothing else: no local resolver
     * or service as a way around the VPN. Its UDP answers to agents leave
     * through the parent's sockets (root's, not matched here); its upstream
     * sockets are bound to a session's VPN interface. It makes no TCP socket
     * of its own (its seccomp filter). */
    if (p->proto_uid) {
        for (int k = 0; k < 4; k++) {
            ms.n = 0;
            mpush(&ms, NFTR_M_SKUID)->id = p->proto_uid;
            if (k == 0) {
                m_oif(&ms, "lo");
                m_l4proto(&ms, IPPROTO_TCP);
                mpush(&ms, NFTR_M_CT_REPLY);
            } else if (k < 3) {
                m_set(&ms, k == 1 ? AF_INET : AF_INET6, k == 1 ? NFTR_SET_PROTO4 : NFTR_SET_PROTO6);
                m_dport(&ms, IPPROTO_UDP, 53, 53);
            }
            r = rule_with(&out, &ms);
            if (r) {
                r->counter = k == 3;
                r->verdict = k == 3 ? NFTR_V_DROP : NFTR_V_ACCEPT;
            }
        }
    }

    /* A sandboxed socket never answers a flow someone else started, except
     * on lo: a guarded packet of direction reply leaving by another
     * interface is dropped. With `inbound`, chain input refuses such flows
     * before they reach a socket; this drop holds even where that lookup
     * missed. On lo, a listener's SYN-ACK to 127.0.0.0/8 or ::1 is accepted
     * here: its socket is a request sock, which `meta skgid` resolves to the
     * listener but `socket cgroupv2` cannot, so guarded's vmap would refuse
     * it. Every other packet of a session goes to its own chain, which sends
     * through lo only to 127.0.0.0/8 and ::1: no "reply on lo" shortcut, as a
     * session can make itself the reply side of a flow (a datagram with a
     * forged source from one of its sockets to another). Here in output, not
     * in guarded: the uid scopes' dispatch rules go to the head of guarded. */
    ms.n = 0;
    m_gids(&ms, NFTR_M_SKGID, p->guard_gid, p->guard_gid_max);
    mpush(&ms, NFTR_M_CT_REPLY);
    r = rule_with(&out, &ms);
    if (r) {
        r->match[2].type = NFTR_M_OIFNAME_NE;
        snprintf(r->match[2].name, sizeof(r->match[2].name), "lo");
        r->n_match = 3;
        r->counter = true;
        r->verdict = NFTR_V_DROP;
    }
    m_oif(&ms, "lo");
    const struct dr_rule *los[] = {&lo4, &lo6};
    for (size_t i = 0; i < ARRAY_SIZE(los); i++) {
        struct matches sa = ms;
        m_daddr(&sa, los[i]);
        m_l4proto(&sa, IPPROTO_TCP);
        mpush(&sa, NFTR_M_TCP_SYNACK);
        r = rule_with(&out, &sa);
        if (r) {
            r->counter = true;
            r->verdict = NFTR_V_ACCEPT;
        }
    }
    /* A session's DNS flow (its chain marked it when chain dnsnat had sent
     * it to the forwarder): only the session's sockets send its original
     * direction (a host socket that binds the agent's old address and port
     * would otherwise follow the entry's rewrite and query through the
     * session's VPN, as the session), and only lyhd's forwarder sockets its
     * reply direction (a squatter on the port while lyhd is down cannot
     * answer the agent). Packets the kernel sends for no process (an ICMP
     * error, a reset) have no socket with a gid, so skgid stops the rule. */
    if (p->dns) {
        for (int dir = 0; dir < 2; dir++) {
            ms.n = 0;
            m_gids(&ms, NFTR_M_SKGID_NE, p->guard_gid, p->guard_gid_max);
            mpush(&ms, dir ? NFTR_M_CT_REPLY : NFTR_M_CT_ORIGINAL);
            mpush(&ms, NFTR_M_CT_MARK)->id = NFTR_DNS_FLOW_MARK;
            if (dir)
                mpush(&ms, NFTR_M_META_MARK_NE)->id = NFTR_DNS_FWD_SOCKET_MARK;
            r = rule_with(&out, &ms);
            if (r) {
                r->counter = true;
                r->verdict = NFTR_V_DROP;
            }
        }
    }
    /* A flow a session started carries its mark; were a host process's
     * packet to join it (same addresses and ports: the session sent one
     * first, which chain input refused, and the entry stays), chain input
     * would judge it as the session's and refuse the host's own connection.
     * A host packet takes such a flow back. */
    if (p->inbound) {
        ms.n = 0;
        m_oif(&ms, "lo");
        m_gids(&ms, NFTR_M_SKGID_NE, p->guard_gid, p->guard_gid_max);
        mpush(&ms, NFTR_M_CT_ORIGINAL);
        mpush(&ms, NFTR_M_CT_MARK_ORIG);
        r = rule_with(&out, &ms);
        if (r)
            r->ct_mark_clear = true;
    }
    ms.n = 0;
    m_gids(&ms, NFTR_M_SKGID, p->guard_gid, p->guard_gid_max);
    r = rule_with(&out, &ms);
    if (r) {
        r->verdict = NFTR_V_JUMP;
        snprintf(r->target, sizeof(r->target), NFTR_CHAIN_GUARDED);
    }

    if (p->data)
        data_established(&gu, p->cgroup_level);
    if (p->cgroupv2) {
        r = rules_push(&gu);
        if (r) {
            r->verdict = NFTR_V_VMAP_CGROUP;
            r->cgroup_level = p->cgroup_level;
            snprintf(r->target, sizeof(r->target), NFTR_MAP_SESSIONS);
        }
    }
    if (p->data) {
        /* after the chain sessions' dispatch: their chains end in a verdict,
         * so what comes here belongs to no chain session */
        ms.n = 0;
        m_cg_set(&ms, NFTR_M_CG_SET, p->cgroup_level, NFTR_SET_DLIVE);
        r = rule_with(&gu, &ms);
        if (r) {
            r->verdict = NFTR_V_GOTO;
            snprintf(r->target, sizeof(r->target), NFTR_CHAIN_DATA);
        }
    }
    struct logctx lc = { .p = p->log };
    ms.n = 0;
    emit_reject(&gu, &lc, &ms, REJECT_ANY, NFTR_NOSESSION_PREFIX);

    struct rules in = { .v = NULL };
    /* A session's DNS flow (its chain marked it) lands only on lyhd's
     * forwarder (a socket with its mark, which takes CAP_NET_ADMIN or
     * CAP_NET_RAW: binding the port while lyhd restarts gets a squatter
     * nothing), and a forwarder
     * receives only such flows (a local user cannot use it to query through
     * a session's VPN). On every interface: with route_localnet a packet for
     * 127.0.0.1 may come from the LAN. Whenever DNS is forwarded, with or
     * without listeners. Only packets for loopback addresses (where the
     * forwarders listen) come to the socket lookup, and it is the last
     * match: most packets never pay for it. */
    for (int fam = 0; p->dns && fam < 2; fam++) {
        struct matches dm = {.n = 0};
        mpush(&dm, NFTR_M_CT_ORIGINAL);
        m_daddr(&dm, fam ? &lo6 : &lo4);
        struct matches to_other = dm, not_dns = dm;
        mpush(&to_other, NFTR_M_CT_MARK)->id = NFTR_DNS_FLOW_MARK;
        mpush(&to_other, NFTR_M_SOCK_MARK_NE)->id = NFTR_DNS_FWD_SOCKET_MARK;
        mpush(&not_dns, NFTR_M_CT_MARK_NE)->id = NFTR_DNS_FLOW_MARK;
        mpush(&not_dns, NFTR_M_SOCK_MARK)->id = NFTR_DNS_FWD_SOCKET_MARK;
        const struct matches *dl[] = {&to_other, &not_dns};
        for (size_t i = 0; i < ARRAY_SIZE(dl); i++) {
            r = rule_with(&in, dl[i]);
            if (r) {
                r->counter = true;
                r->verdict = NFTR_V_DROP;
            }
        }
    }
    if (p->inbound) {
        /* Packets for any socket of any session (its cgroup is below the
         * base, one level above the sessions) from any interface but lo:
         * conntrack's invalid and untracked ones dropped (ct direction would
         * not match them), new flows refused (TCP reset, ICMP for the rest),
         * before a listener sees them. */
        struct matches sm = { .n = 0 };
        struct nftr_match *m = mpush(&sm, NFTR_M_IIFNAME_NE);
        snprintf(m->name, sizeof(m->name), "lo");
        m = mpush(&sm, NFTR_M_SOCK_CGROUP);
        m->level = p->cgroup_level - 1;
        m->cgroup_id = p->base_cgroup_id;
        snprintf(m->name, sizeof(m->name), "%s", p->base_cgroup ? p->base_cgroup : "");
        /* The comment names the base by id: the path alone would not tell a
         * recreated base (a new id) from the old one, and the base check
         * compares rules by their text. */
        char idc[NFTR_NAME_MAX];
        snprintf(idc, sizeof(idc), "sessions cgroup %" PRIu64, p->base_cgroup_id);
        struct matches inv = sm, orig = sm;
        mpush(&inv, NFTR_M_CT_INVALID);
        mpush(&orig, NFTR_M_CT_ORIGINAL);
        struct matches tcp = orig;
        m_l4proto(&tcp, IPPROTO_TCP);
        const struct {
            const struct matches *ms;
            enum nftr_verdict v;
        } rows[] = {
            { &inv, NFTR_V_DROP },
            { &tcp, NFTR_V_REJECT_TCP_RESET },
            { &orig, NFTR_V_REJECT_ADMIN },
        };
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
            r = rule_with(&in, rows[i].ms);
            if (r) {
                r->counter = true;
                r->verdict = rows[i].v;
                snprintf(r->comment, sizeof(r->comment), "%s", idc);
            }
        }
        /* Through lo: a packet of a flow a session started (its ct mark,
         * set by the session's chain in output) goes to that session's
         * chain lo-<id>, which decides where it may land. */
        sm.n = 0;
        m = mpush(&sm, NFTR_M_IIFNAME);
        snprintf(m->name, sizeof(m->name), "lo");
        r = rule_with(&in, &sm);
        if (r) {
            r->verdict = NFTR_V_VMAP_CTMARK;
            snprintf(r->target, sizeof(r->target), NFTR_MAP_LOOPBACK);
            snprintf(r->comment, sizeof(r->comment), "%s", idc);
        }
        /* ... and one whose mark no element of map loopback names (root
         * deleted it while the session ran, or the session is gone and its
         * flow lingers) lands nowhere: refused, never left to the policy's
         * accept, which would let it reach any host service. As in chain
         * lo-<id>, ICMP (the answers to a refusal among it) and TCP past its
         * first packet (the reset that answers one) pass: a TCP flow is
         * judged at its SYN. A session's DNS flow (kind 0, slot 0) is not
         * one: the rules above judged it. */
        struct matches om = sm;
        mpush(&om, NFTR_M_CT_MARK_ORIG);
        mpush(&om, NFTR_M_CT_MARK_NE)->id = NFTR_DNS_FLOW_MARK;
        size_t first = in.n;
        if (p->data) {
            /* the data sessions' flows, and every other such flow: chain dlo
             * decides by the flow's mark paired with the socket's cgroup */
            r = rule_with(&in, &om);
            if (r) {
                r->verdict = NFTR_V_GOTO;
                snprintf(r->target, sizeof(r->target), NFTR_CHAIN_DLO);
            }
        } else {
            unmarked_lo_refusal(&in, &lc, &om);
        }
        for (size_t i = first; i < in.n && !in.err; i++)
            snprintf(in.v[i].comment, sizeof(in.v[i].comment), "%s", idc);
        /* A flow a host process starts through lo towards a session's
         * socket: marked as served by that session (its cgroup's element
         * of map served), so that the session may answer it, and only it. */
        mpush(&sm, NFTR_M_CT_ORIGINAL);
        mpush(&sm, NFTR_M_CT_NEW);
        mpush(&sm, NFTR_M_CT_MARK)->id = 0;
        r = rule_with(&in, &sm);
        if (r) {
            r->ct_mark_served_level = p->cgroup_level;
            snprintf(r->comment, sizeof(r->comment), "%s", idc);
        }
    }

    /* DNS: every port-53 flow (udp and tcp, any address) of a guarded
     * socket whose session has a forwarder goes to that forwarder, on
     * 127.0.0.1 or ::1 at the port map dnsport names; a socket of no such
     * session (no element) is left alone, and its chain decides. Only a new
     * flow passes a nat chain. */
    struct rules dn = { .v = NULL };
    for (int fam = 0; p->dns && fam < 2; fam++) {
        static const uint8_t protos[] = {IPPROTO_UDP, IPPROTO_TCP};
        for (size_t k = 0; k < ARRAY_SIZE(protos); k++) {
            ms.n = 0;
            m_gids(&ms, NFTR_M_SKGID, p->guard_gid, p->guard_gid_max);
            m_nfproto(&ms, fam ? AF_INET6 : AF_INET);
            m_dport(&ms, protos[k], 53, 53);
            r = rule_with(&dn, &ms);
            if (r) {
                r->verdict = NFTR_V_DNAT_CGROUP;
                r->dnat_family = fam ? AF_INET6 : AF_INET;
                r->cgroup_level = p->cgroup_level;
                snprintf(r->target, sizeof(r->target), NFTR_MAP_DNSPORT);
            }
        }
    }

    /* A flow chain dnsnat rewrote leaves by lo, to the forwarder; were it
     * routed elsewhere (a socket bound to the LAN device: no route to
     * 127.0.0.1 there, so out it goes, to the LAN) it is dropped. Output's
     * oifname still names the device before the rewrite: only postrouting
     * sees where it really goes. */
    struct rules dout = { .v = NULL };
    if (p->dns) {
        ms.n = 0;
        m_gids(&ms, NFTR_M_SKGID, p->guard_gid, p->guard_gid_max);
        mpush(&ms, NFTR_M_CT_DNAT);
        struct nftr_match *om = mpush(&ms, NFTR_M_OIFNAME_NE);
        snprintf(om->name, sizeof(om->name), "lo");
        r = rule_with(&dout, &ms);
        if (r) {
            r->counter = true;
            r->verdict = NFTR_V_DROP;
        }
    }

    struct rules da = { .v = NULL }, dr = { .v = NULL }, dl = { .v = NULL }, dal = { .v = NULL };
    if (p->data) {
        render_data_chain(&da, p->cgroup_level);
        render_drefuse(&dr, p->cgroup_level);
        render_dlo(&dl, &lc, p->cgroup_level);
        render_dalog(&dal, p->cgroup_level);
    }

    if (out.err || gu.err || in.err || dn.err || dout.err || da.err || dr.err || dl.err ||
        dal.err) {
        free(out.v);
        free(gu.v);
        free(in.v);
        free(dn.v);
        free(dout.v);
        free(da.v);
        free(dr.v);
        free(dl.v);
        free(dal.v);
        return -ENOMEM;
    }
    b->data = da.v;
    b->n_data = da.n;
    b->drefuse = dr.v;
    b->n_drefuse = dr.n;
    b->dlo = dl.v;
    b->n_dlo = dl.n;
    b->dalog = dal.v;
    b->n_dalog = dal.n;
    b->dnsnat = dn.v;
    b->n_dnsnat = dn.n;
    b->dnsout = dout.v;
    b->n_dnsout = dout.n;
    b->input = in.v;
    b->n_input = in.n;
    b->output = out.v;
    b->n_output = out.n;
    b->guarded = gu.v;
    b->n_guarded = gu.n;
    *ret = TAKE_PTR(b);
    return 0;
}

/* ---- text ---------------------------------------------------------------------------- */

struct sb {
    char *buf;
    size_t len, cap;
    bool oom;
};

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sb *s, const char *fmt, ...) {
    if (s->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = s->cap - s->len;
        int n = vsnprintf(s->buf ? s->buf + s->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            s->oom = true;
            return;
        }
        if ((size_t)n < room) {
            s->len += (size_t)n;
            return;
        }
        size_t cap = s->cap ? s->cap : 256;
        while (cap <= s->len + (size_t)n)
            cap *= 2;
        char *p = realloc(s->buf, cap);
        if (!p) {
            s->oom = true;
            return;
        }
        s->buf = p;
        s->cap = cap;
    }
}

static int sb_finish(struct sb *s, char **ret) {
    if (!s->oom && !s->buf)
        sb_printf(s, "%s", "");
    if (s->oom) {
        free(s->buf);
        return -ENOMEM;
    }
    *ret = s->buf;
    return 0;
}

static void put_addr(struct sb *s, int family, const uint8_t *addr, unsigned prefix, bool always) {
    char a[INET6_ADDRSTRLEN];
    if (!inet_ntop(family, addr, a, sizeof(a)))
        snprintf(a, sizeof(a), "?");
    if (always || prefix != family_len(family) * 8)
        sb_printf(s, "%s/%u", a, prefix);
    else
        sb_printf(s, "%s", a);
}

static const char *proto_name(uint8_t p) {
    switch (p) {
    case IPPROTO_TCP: return "tcp";
    case IPPROTO_UDP: return "udp";
    case IPPROTO_ICMP: return "icmp";
    case IPPROTO_ICMPV6: return "ipv6-icmp";
    default: return "?";
    }
}

static void put_match(struct sb *s, const struct nftr_match *m) {
    switch (m->type) {
    case NFTR_M_OIFNAME:
        sb_printf(s, "oifname \"%s\"", m->name);
        break;
    case NFTR_M_NFPROTO:
        sb_printf(s, "meta nfproto %s", m->family == AF_INET ? "ipv4" : "ipv6");
        break;
    case NFTR_M_L4PROTO:
        sb_printf(s, "meta l4proto %s", proto_name(m->l4proto));
        break;
    case NFTR_M_DADDR:
        sb_printf(s, "%s daddr ", m->family == AF_INET ? "ip" : "ip6");
        put_addr(s, m->family, m->addr, m->prefix_len, false);
        break;
    case NFTR_M_DADDR_SET:
    case NFTR_M_DADDR_SET_NE:
        sb_printf(s, "%s daddr %s@%s", m->family == AF_INET ? "ip" : "ip6",
                  m->type == NFTR_M_DADDR_SET_NE ? "!= " : "", m->name);
        break;
    case NFTR_M_DPORT:
        if (m->port_min == m->port_max)
            sb_printf(s, "%s dport %u", proto_name(m->l4proto), m->port_min);
        else
            sb_printf(s, "%s dport %u-%u", proto_name(m->l4proto), m->port_min, m->port_max);
        break;
    case NFTR_M_DPORT_NE:
        sb_printf(s, "%s dport != %u", proto_name(m->l4proto), m->port_min);
        break;
    case NFTR_M_CT_NEW:
        sb_printf(s, "ct state new");
        break;
    case NFTR_M_SKUID:
        sb_printf(s, "meta skuid %" PRIu32, m->id);
        break;
    case NFTR_M_SKGID:
    case NFTR_M_SKGID_NE:
        sb_printf(s, "meta skgid %s%" PRIu32, m->type == NFTR_M_SKGID_NE ? "!= " : "", m->id);
        if (m->id_max > m->id)
            sb_printf(s, "-%" PRIu32, m->id_max);
        break;
    case NFTR_M_IIFNAME_NE:
        sb_printf(s, "iifname != \"%s\"", m->name);
        break;
    case NFTR_M_OIFNAME_NE:
        sb_printf(s, "oifname != \"%s\"", m->name);
        break;
    case NFTR_M_CT_INVALID:
        sb_printf(s, "ct state invalid,untracked");
        break;
    case NFTR_M_CT_ORIGINAL:
        sb_printf(s, "ct direction original");
        break;
    case NFTR_M_CT_REPLY:
        sb_printf(s, "ct direction reply");
        break;
    case NFTR_M_SOCK_CGROUP:
        sb_printf(s, "socket cgroupv2 level %" PRIu32 " \"%s\"", m->level, m->name);
        break;
    case NFTR_M_TCP_SYNACK:
        sb_printf(s, "tcp flags & (syn | ack) == syn | ack");
        break;
    case NFTR_M_CT_NOT_NEW: /* the new bit clear (nft's "!= new" would compare the value) */
        sb_printf(s, "ct state ! new");
        break;
    case NFTR_M_IIFNAME:
        sb_printf(s, "iifname \"%s\"", m->name);
        break;
    case NFTR_M_CT_MARK:
    case NFTR_M_CT_MARK_NE:
        sb_printf(s, "ct mark %s0x%08" PRIx32, m->type == NFTR_M_CT_MARK_NE ? "!= " : "", m->id);
        break;
    case NFTR_M_META_MARK_NE:
        sb_printf(s, "meta mark != 0x%08" PRIx32, m->id);
        break;
    case NFTR_M_CT_MARK_ORIG:
        sb_printf(s, "ct mark & 0x%08" PRIx32 " == 0x%08" PRIx32, NFTR_LO_MARK_KIND,
                  NFTR_LO_MARK_OURS);
        break;
    case NFTR_M_CT_DNAT:
        sb_printf(s, "ct status dnat");
        break;
    case NFTR_M_CT_ESTABLISHED:
        sb_printf(s, "ct state established,related");
        break;
    case NFTR_M_SOCK_MARK:
    case NFTR_M_SOCK_MARK_NE:
        sb_printf(s, "socket mark %s0x%08" PRIx32, m->type == NFTR_M_SOCK_MARK_NE ? "!= " : "",
                  m->id);
        break;
    case NFTR_M_CG_SET:
        sb_printf(s, "socket cgroupv2 level %" PRIu32 " @%s", m->level, m->name);
        break;
    case NFTR_M_CG_IF_SET:
        sb_printf(s, "socket cgroupv2 level %" PRIu32 " . oifname @%s", m->level, m->name);
        break;
    case NFTR_M_PORT_CG_SET:
        sb_printf(s, "%s dport . socket cgroupv2 level %" PRIu32 " @%s", proto_name(m->l4proto),
                  m->level, m->name);
        break;
    case NFTR_M_MARK_CG_SET:
        sb_printf(s, "ct mark . socket cgroupv2 level %" PRIu32 " @%s", m->level, m->name);
        break;
    case NFTR_M_CT_MARK_SET_NE:
        sb_printf(s, "ct mark != @%s", m->name);
        break;
    }
}

/* "<what> <key> map @<map>" (map "": nothing), the key being the socket's
 * cgroup at level, or (level 0) the flow's ct mark */
static void put_by_key(struct sb *s, const char **sep, const char *what, uint32_t level,
                       const char *map) {
    if (!map[0])
        return;
    sb_printf(s, "%s%s ", *sep, what);
    if (level)
        sb_printf(s, "socket cgroupv2 level %" PRIu32, level);
    else
        sb_printf(s, "ct mark");
    sb_printf(s, " map @%s", map);
    *sep = " ";
}

static void put_rule(struct sb *s, const struct nftr_rule *r) {
    const char *sep = "";
    for (size_t i = 0; i < r->n_match; i++) {
        sb_printf(s, "%s", sep);
        put_match(s, &r->match[i]);
        sep = " ";
    }
    put_by_key(s, &sep, "counter name", r->obj_level, r->counter_map);
    put_by_key(s, &sep, "ct mark set", r->obj_level, r->ct_mark_map);
    put_by_key(s, &sep, "limit name", r->obj_level, r->limit_map);
    if (r->ct_mark_set || r->ct_mark_clear) {
        sb_printf(s, "%sct mark set 0x%08" PRIx32, sep, r->ct_mark_set);
        sep = " ";
    }
    if (r->ct_mark_served_level) {
        sb_printf(s, "%sct mark set socket cgroupv2 level %" PRIu32 " map @" NFTR_MAP_SERVED, sep,
                  r->ct_mark_served_level);
        sep = " ";
    }
    if (r->log_counter) {
        sb_printf(s, "%scounter", sep);
        sep = " ";
    }
    if (r->limit) {
        sb_printf(s, "%slimit rate %" PRIu32 "/second burst %" PRIu32 " packets", sep,
                  r->limit_rate, r->limit_burst);
        sep = " ";
    }
    if (r->log) {
        sb_printf(s, "%slog prefix \"%s\" group %u", sep, r->log_prefix, r->log_group);
        sep = " ";
    }
    if (r->counter) {
        sb_printf(s, "%scounter", sep);
        sep = " ";
    }
    switch (r->verdict) {
    case NFTR_V_CONTINUE:
        break;
    case NFTR_V_ACCEPT:
        sb_printf(s, "%saccept", sep);
        break;
    case NFTR_V_REJECT_TCP_RESET:
        sb_printf(s, "%sreject with tcp reset", sep);
        break;
    case NFTR_V_REJECT_ADMIN:
        sb_printf(s, "%sreject with icmpx admin-prohibited", sep);
        break;
    case NFTR_V_JUMP:
        sb_printf(s, "%sjump %s", sep, r->target);
        break;
    case NFTR_V_GOTO:
        sb_printf(s, "%sgoto %s", sep, r->target);
        break;
    case NFTR_V_VMAP_CGROUP:
        sb_printf(s, "%ssocket cgroupv2 level %" PRIu32 " vmap @%s", sep, r->cgroup_level,
                  r->target);
        break;
    case NFTR_V_DROP:
        sb_printf(s, "%sdrop", sep);
        break;
    case NFTR_V_VMAP_CTMARK:
        sb_printf(s, "%sct mark vmap @%s", sep, r->target);
        break;
    case NFTR_V_DNAT_CGROUP:
        sb_printf(s, "%sdnat %s to %s:socket cgroupv2 level %" PRIu32 " map @%s", sep,
                  r->dnat_family == AF_INET ? "ip" : "ip6",
                  r->dnat_family == AF_INET ? "127.0.0.1" : "[::1]", r->cgroup_level, r->target);
        break;
    }
    if (r->comment[0])
        sb_printf(s, " comment \"%s\"", r->comment);
}

int nftr_rule_text(const struct nftr_rule *r, char **ret) {
    struct sb s = { .buf = NULL };
    put_rule(&s, r);
    return sb_finish(&s, ret);
}

static void put_rules(struct sb *s, const char *chain, const struct nftr_rule *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        sb_printf(s, "add rule inet " NFTR_TABLE " %s ", chain);
        put_rule(s, &v[i]);
        sb_printf(s, "\n");
    }
}

int nftr_chain_text(const struct nftr_chain *c, char **ret) {
    struct sb s = { .buf = NULL };
    switch (c->scope) {
    case NFTR_SCOPE_SESSION:
        sb_printf(&s, "# lianyaohu scope session, cgroup id %" PRIu64 "\n", c->cgroup_id);
        break;
    case NFTR_SCOPE_UID:
        sb_printf(&s, "# lianyaohu scope uid (no cgroup v2), uid %" PRIu32 "\n",
                  c->dispatch.match[0].id);
        break;
    case NFTR_SCOPE_SHARED_USER:
        sb_printf(&s, "# lianyaohu scope shared-user, uid %" PRIu32 "\n",
                  c->dispatch.match[0].id);
        break;
    }
    if (c->set4[0])
        sb_printf(&s,
                  "add set inet " NFTR_TABLE " %s { type ipv4_addr; flags timeout; size %u; }\n"
                  "add set inet " NFTR_TABLE " %s { type ipv6_addr; flags timeout; size %u; }\n",
                  c->set4, NFTR_DOMAIN_SET_SIZE, c->set6, NFTR_DOMAIN_SET_SIZE);
    sb_printf(&s, "add chain inet " NFTR_TABLE " %s\n", c->name);
    put_rules(&s, c->name, c->rules, c->n_rules);
    if (c->lo_mark) {
        sb_printf(&s, "add chain inet " NFTR_TABLE " %s\n", c->lo_name);
        put_rules(&s, c->lo_name, c->lo_rules, c->n_lo_rules);
        sb_printf(&s,
                  "add element inet " NFTR_TABLE " " NFTR_MAP_LOOPBACK
                  " { 0x%08" PRIx32 " : jump %s }\n",
                  c->lo_mark, c->lo_name);
        sb_printf(&s,
                  "# add element inet " NFTR_TABLE " " NFTR_MAP_SERVED
                  " { <cgroup id %" PRIu64 "> : 0x%08" PRIx32 " }\n",
                  c->cgroup_id, c->served_mark);
    }
    if (c->dns_port)
        sb_printf(&s,
                  "# add element inet " NFTR_TABLE " " NFTR_MAP_DNSPORT
                  " { <cgroup id %" PRIu64 "> : %u }\n",
                  c->cgroup_id, c->dns_port);
    if (c->scope == NFTR_SCOPE_SESSION) {
        sb_printf(&s,
                  "# add element inet " NFTR_TABLE " " NFTR_MAP_SESSIONS
                  " { <cgroup id %" PRIu64 "> : jump %s }\n",
                  c->cgroup_id, c->name);
    } else {
        sb_printf(&s, "insert rule inet " NFTR_TABLE " %s ", c->dispatch_chain);
        put_rule(&s, &c->dispatch);
        sb_printf(&s, "\n");
    }
    return sb_finish(&s, ret);
}

static const char *key_type(enum nftr_key k) {
    switch (k) {
    case NFTR_K_CG: return "cgroupsv2";
    case NFTR_K_CG_IF: return "cgroupsv2 . ifname";
    case NFTR_K_PORT_CG: return "inet_service . cgroupsv2";
    case NFTR_K_MARK_CG: return "mark . cgroupsv2";
    case NFTR_K_MARK: return "mark";
    }
    return "?";
}

static const char *val_type(enum nftr_val v) {
    switch (v) {
    case NFTR_D_NONE: return "";
    case NFTR_D_MARK: return "mark";
    case NFTR_D_PORT: return "inet_service";
    case NFTR_D_COUNTER: return "counter";
    case NFTR_D_LIMIT: return "limit";
    case NFTR_D_VERDICT:
    case NFTR_D_CONTINUE: return "verdict";
    }
    return "?";
}

static void put_set(struct sb *s, int family, const char *name) {
    const struct dr_rule *v;
    size_t n = nftr_lan_prefixes(family, &v);
    sb_printf(s, "add set inet " NFTR_TABLE " %s { type %s; flags interval; }\n", name,
              family == AF_INET ? "ipv4_addr" : "ipv6_addr");
    sb_printf(s, "add element inet " NFTR_TABLE " %s { ", name);
    for (size_t i = 0; i < n; i++) {
        if (i)
            sb_printf(s, ", ");
        put_addr(s, family, v[i].addr, v[i].prefix_len, true);
    }
    sb_printf(s, " }\n");
}

int nftr_base_text(const struct nftr_base *b, char **ret) {
    struct sb s = { .buf = NULL };
    const struct nftr_base_params *p = &b->params;
    sb_printf(&s, "# lianyaohu base, guard gid %" PRIu32, p->guard_gid);
    if (p->guard_gid_max > p->guard_gid)
        sb_printf(&s, "-%" PRIu32, p->guard_gid_max);
    sb_printf(&s, ", ");
    if (p->cgroupv2)
        sb_printf(&s, "cgroup v2 level %" PRIu32 "\n", p->cgroup_level);
    else
        sb_printf(&s, "no cgroup v2\n");
    sb_printf(&s, "add table inet " NFTR_TABLE "\n");
    put_set(&s, AF_INET, NFTR_SET_LAN4);
    put_set(&s, AF_INET6, NFTR_SET_LAN6);
    if (p->cgroupv2)
        sb_printf(&s, "add map inet " NFTR_TABLE " " NFTR_MAP_SESSIONS
                      " { type cgroupsv2 : verdict; }\n");
    if (p->proto_uid)
        sb_printf(&s, "add set inet " NFTR_TABLE " " NFTR_SET_PROTO4
                      " { type ipv4_addr; }\nadd set inet " NFTR_TABLE " " NFTR_SET_PROTO6
                      " { type ipv6_addr; }\n");
    sb_printf(&s, "add chain inet " NFTR_TABLE " " NFTR_CHAIN_OUTPUT
                  " { type filter hook output priority 0; policy accept; }\n");
    sb_printf(&s, "add chain inet " NFTR_TABLE " " NFTR_CHAIN_GUARDED "\n");
    if (p->inbound)
        sb_printf(&s, "add map inet " NFTR_TABLE " " NFTR_MAP_LOOPBACK
                      " { type mark : verdict; }\nadd map inet " NFTR_TABLE " " NFTR_MAP_SERVED
                      " { type cgroupsv2 : mark; }\n");
    if (p->inbound || p->dns)
        sb_printf(&s, "add chain inet " NFTR_TABLE " " NFTR_CHAIN_INPUT
                      " { type filter hook input priority -10; policy accept; }\n");
    if (p->dns)
        sb_printf(&s, "add map inet " NFTR_TABLE " " NFTR_MAP_DNSPORT
                      " { type cgroupsv2 : inet_service; }\nadd chain inet " NFTR_TABLE
                      " " NFTR_CHAIN_DNSNAT
                      " { type nat hook output priority -100; policy accept; }\nadd chain inet "
                      NFTR_TABLE " " NFTR_CHAIN_DNSOUT
                      " { type filter hook postrouting priority 0; policy accept; }\n");
    if (p->data) {
        const struct nftr_data_set *ds;
        size_t nds = nftr_data_sets(&ds);
        for (size_t i = 0; i < nds; i++) {
            sb_printf(&s, "add %s inet " NFTR_TABLE " %s { type %s", ds[i].val ? "map" : "set",
                      ds[i].name, key_type(ds[i].key));
            if (ds[i].val)
                sb_printf(&s, " : %s", val_type(ds[i].val));
            sb_printf(&s, "; }\n");
        }
        sb_printf(&s, "add chain inet " NFTR_TABLE " " NFTR_CHAIN_DATA "\nadd chain inet " NFTR_TABLE
                      " " NFTR_CHAIN_DREFUSE "\nadd chain inet " NFTR_TABLE " " NFTR_CHAIN_DLO
                      "\nadd chain inet " NFTR_TABLE " " NFTR_CHAIN_DALOG "\n");
    }
    put_rules(&s, NFTR_CHAIN_DALOG, b->dalog, b->n_dalog);
    put_rules(&s, NFTR_CHAIN_DREFUSE, b->drefuse, b->n_drefuse);
    put_rules(&s, NFTR_CHAIN_DATA, b->data, b->n_data);
    put_rules(&s, NFTR_CHAIN_DLO, b->dlo, b->n_dlo);
    put_rules(&s, NFTR_CHAIN_OUTPUT, b->output, b->n_output);
    put_rules(&s, NFTR_CHAIN_GUARDED, b->guarded, b->n_guarded);
    put_rules(&s, NFTR_CHAIN_INPUT, b->input, b->n_input);
    put_rules(&s, NFTR_CHAIN_DNSNAT, b->dnsnat, b->n_dnsnat);
    put_rules(&s, NFTR_CHAIN_DNSOUT, b->dnsout, b->n_dnsout);
    return sb_finish(&s, ret);
}

/* cg: the cgroup as nft reads it, "\"<path>\"" */
static void put_elem_key(struct sb *s, const char *cg, const struct nftr_elem *e) {
    switch (e->key) {
    case NFTR_K_CG:
        sb_printf(s, "%s", cg);
        break;
    case NFTR_K_CG_IF:
        sb_printf(s, "%s . \"%s\"", cg, e->ifname);
        break;
    case NFTR_K_PORT_CG:
        sb_printf(s, "%u . %s", e->port, cg);
        break;
    case NFTR_K_MARK_CG:
        sb_printf(s, "0x%08" PRIx32 " . %s", e->mark, cg);
        break;
    case NFTR_K_MARK:
        sb_printf(s, "0x%08" PRIx32, e->mark);
        break;
    }
}

int nftr_data_text(const struct nftr_data *d, char **ret) {
    struct sb s = { .buf = NULL };
    sb_printf(&s, "# lianyaohu data session %s, cgroup id %" PRIu64 "\n", d->session_id,
              d->cgroup_id);
    bool v6 = false;
    for (size_t i = 0; i < d->n_elems; i++)
        v6 |= strcmp(d->elems[i].set, NFTR_SET_DVPN6) == 0;
    if (!v6) /* (lyh doctor looks for this line, as for a chain's IPv6 refusal) */
        sb_printf(&s, "# IPv6 blocked: no element of set " NFTR_SET_DVPN6
                      ", so no IPv6 packet of it leaves by the VPN\n");
    for (size_t i = 0; i < d->n_objs; i++) {
        const struct nftr_obj *o = &d->objs[i];
        if (o->type == NFTR_D_COUNTER)
            sb_printf(&s, "add counter inet " NFTR_TABLE " %s\n", o->name);
        else
            sb_printf(&s,
                      "add limit inet " NFTR_TABLE " %s { rate %" PRIu32 "/second burst %" PRIu32
                      " packets; }\n",
                      o->name, o->rate, o->burst);
    }
    const char *chains[] = {d->alog, d->dlog};
    const struct nftr_rule *rules[] = {&d->alog_rule, &d->dlog_rule};
    for (size_t i = 0; i < 2; i++) {
        if (!chains[i][0])
            continue;
        sb_printf(&s, "add chain inet " NFTR_TABLE " %s\n", chains[i]);
        put_rules(&s, chains[i], rules[i], 1);
    }
    char cg[NFTR_CGROUP_TEXT_MAX + 32];
    if (d->cgroup_text[0])
        snprintf(cg, sizeof(cg), "\"%s\"", d->cgroup_text);
    else
        snprintf(cg, sizeof(cg), "<cgroup id %" PRIu64 ">", d->cgroup_id);
    for (size_t i = 0; i < d->n_elems; i++) {
        const struct nftr_elem *e = &d->elems[i];
        /* nft takes a cgroupsv2 value as a path below /sys/fs/cgroup only:
         * without one, the line is a comment that names the id */
        bool comment = e->key != NFTR_K_MARK && !d->cgroup_text[0];
        sb_printf(&s, "%sadd element inet " NFTR_TABLE " %s { ", comment ? "# " : "", e->set);
        put_elem_key(&s, cg, e);
        switch (e->val) {
        case NFTR_D_NONE:
            break;
        case NFTR_D_MARK:
            sb_printf(&s, " : 0x%08" PRIx32, e->vmark);
            break;
        case NFTR_D_PORT:
            sb_printf(&s, " : %u", e->vport);
            break;
        case NFTR_D_COUNTER:
        case NFTR_D_LIMIT:
            sb_printf(&s, " : \"%s\"", e->vname);
            break;
        case NFTR_D_VERDICT:
            sb_printf(&s, " : jump %s", e->vname);
            break;
        case NFTR_D_CONTINUE:
            sb_printf(&s, " : continue");
            break;
        }
        sb_printf(&s, " }\n");
    }
    return sb_finish(&s, ret);
}
