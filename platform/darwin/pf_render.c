/* pf_render: turns a validated macOS guard request into a PF anchor ruleset.
 *
 * This file owns the *meaning* of the macOS egress guard, as nft_render.c owns
 * it on Linux: which rules an anchor gets and in which order. It must never do
 * I/O, run pfctl, log or keep state; pf.c loads what we return and the golden
 * tests pin it down.
 *
 * Why the anchor looks the way it does:
 * - Every rule is `quick`, so the first match decides and the order below is
 *   the policy; rule 9 blocks whatever of the owner is left, so nothing of the
 *   owner falls through to the system's own ruleset (which passes by default).
 * - Every rule names the owner. PF resolves the owner of TCP and UDP packets
 *   only (a socket lookup), so every rule says `proto { tcp udp }`; other
 *   protocols are the sandbox profile's job (sbpl_render.c allows the agent no
 *   raw or system sockets).
 * - The group scope matches `user U group G`, never `group G` alone: anchors of
 *   several uids sit side by side under com.apple/, and a group-only rule in
 *   U's anchor would pass or block another uid's agents by U's interface.
 * - `block return` answers at once (TCP reset, ICMP unreachable for UDP): an
 *   agent fails fast instead of hanging on a silently dropped SYN.
 * - Passes keep state, so replies are matched by the state table and never by
 *   these rules; blocks keep none.
 * - route-to is IPv4 only and only with a point-to-point peer: it steers the
 *   owner's IPv4 traffic that the routing table would send elsewhere into the
 *   utun instead of refusing it (the Linux guard refuses; the route preflight
 *   makes that rare). Without a peer there is no next hop to name.
 * - A destination with ports becomes `port A` or `port A:B` (inclusive in
 *   pf.conf); without ports every TCP and UDP port. A /0 becomes `to any`
 *   under its address family.
 * - Interface names and addresses are validated before anything is printed,
 *   so no input can end a rule early or add one (the text is a pf.conf file).
 */
#include "platform/darwin/pf_render.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/macros.h"

/* ---- validation ---------------------------------------------------------------- */

bool pfr_iface_valid(const char *name) {
    if (!name || strncmp(name, "utun", 4) != 0)
        return false;
    const char *d = name + 4;
    size_t n = strlen(d);
    if (n < 1 || n > 5 || (d[0] == '0' && n > 1))
        return false;
    for (size_t i = 0; i < n; i++)
        if (d[i] < '0' || d[i] > '9')
            return false;
    return true;
}

static bool dests_valid(const struct dr_rule *v, size_t n) {
    if (n > PFR_DESTS_MAX || (n > 0 && !v))
        return false;
    for (size_t i = 0; i < n; i++)
        if (dr_check(&v[i], NULL, 0) < 0)
            return false;
    return true;
}

static bool peer_valid(const uint8_t p[4]) {
    static const uint8_t zero[4] = {0, 0, 0, 0}, bcast[4] = {255, 255, 255, 255};
    return memcmp(p, zero, 4) != 0 && memcmp(p, bcast, 4) != 0;
}

static int input_valid(const struct pfr_input *in) {
    if (!in || in->uid == UINT32_MAX || !pfr_iface_valid(in->iface))
        return -EINVAL;
    switch (in->scope) {
    case PFR_SCOPE_GROUP:
        if (in->guard_gid == 0 || in->guard_gid == UINT32_MAX)
            return -EINVAL;
        break;
    case PFR_SCOPE_USER:
        break;
    default:
        return -EINVAL;
    }
    if (in->has_peer && !peer_valid(in->peer))
        return -EINVAL;
    const struct pfr_policy *p = &in->policy;
    if (!dests_valid(p->lan_exceptions, p->n_lan_exceptions) || !dests_valid(p->deny, p->n_deny) ||
        !dests_valid(p->allow, p->n_allow))
        return -EINVAL;
    return 0;
}

int pfr_anchor_name(enum pfr_scope scope, uint32_t uid, char buf[static PFR_NAME_MAX]) {
    if (uid == UINT32_MAX)
        return -EINVAL;
    int r;
    switch (scope) {
    case PFR_SCOPE_GROUP:
        r = snprintf(buf, PFR_NAME_MAX, PFR_ANCHOR_PREFIX "%" PRIu32, uid);
        break;
    case PFR_SCOPE_USER:
        r = snprintf(buf, PFR_NAME_MAX, PFR_ANCHOR_USER_PREFIX "%" PRIu32, uid);
        break;
    default:
        return -EINVAL;
    }
    return r > 0 && r < PFR_NAME_MAX ? 0 : -EINVAL;
}

/* ---- text -------------------------------------------------------------------------- */

/* One rule being rendered: everything a rule line needs besides its action. */
struct ctx {
    FILE *f;
    char owner[64]; /* "user U group G" or "user U" */
    const char *iface;
};

static const char *af_word(int family) {
    return family == AF_INET ? "inet" : "inet6";
}

/* "to any", "to 10.0.0.0/8", "to 192.0.2.1 port 443", "to fd00::/8 port 80:90" */
static void put_to(FILE *f, const struct dr_rule *d) {
    char a[INET6_ADDRSTRLEN];
    unsigned full = d->family == AF_INET ? 32 : 128;

    if (d->prefix_len == 0)
        fputs("to any", f);
    else if (!inet_ntop(d->family, d->addr, a, sizeof(a)))
        fputs("to ?", f); /* unreachable: the rule was validated */
    else if (d->prefix_len == full)
        fprintf(f, "to %s", a);
    else
        fprintf(f, "to %s/%u", a, d->prefix_len);
    if (d->port_min == 0)
        return;
    if (d->port_min == d->port_max)
        fprintf(f, " port %u", d->port_min);
    else
        fprintf(f, " port %u:%u", d->port_min, d->port_max);
}

/* pass out quick [on IF] [route-to (IF PEER)] AF proto { tcp udp } from any to D OWNER keep state */
static void pass_dest(const struct ctx *c, const char *on, const char *route_to,
                      const struct dr_rule *d) {
    fputs("pass out quick ", c->f);
    if (on)
        fprintf(c->f, "on %s ", on);
    if (route_to)
        fprintf(c->f, "route-to %s ", route_to);
    fprintf(c->f, "%s proto { tcp udp } from any ", af_word(d->family));
    put_to(c->f, d);
    fprintf(c->f, " %s keep state\n", c->owner);
}

static void block_dest(const struct ctx *c, const struct dr_rule *d) {
    fprintf(c->f, "block return out quick %s proto { tcp udp } from any ", af_word(d->family));
    put_to(c->f, d);
    fprintf(c->f, " %s\n", c->owner);
}

static void put_table(FILE *f, const char *name, int family) {
    const struct dr_rule *v = family == AF_INET ? dr_blocked_v4 : dr_blocked_v6;
    size_t n = family == AF_INET ? DR_BLOCKED_V4_COUNT : DR_BLOCKED_V6_COUNT;
    char a[INET6_ADDRSTRLEN];

    fprintf(f, "table <%s> const {", name);
    for (size_t i = 0; i < n; i++) {
        if (!inet_ntop(family, v[i].addr, a, sizeof(a)))
            snprintf(a, sizeof(a), "?");
        fprintf(f, "%s %s/%u", i ? "," : "", a, v[i].prefix_len);
    }
    fputs(" }\n", f);
}

int pfr_render(const struct pfr_input *in, char **ret) {
    int r = input_valid(in);
    if (r < 0)
        return r;

    char anchor[PFR_NAME_MAX];
    r = pfr_anchor_name(in->scope, in->uid, anchor);
    if (r < 0)
        return r;

    struct ctx c = {.iface = in->iface};
    if (in->scope == PFR_SCOPE_GROUP)
        snprintf(c.owner, sizeof(c.owner), "user %" PRIu32 " group %" PRIu32, in->uid,
                 in->guard_gid);
    else
        snprintf(c.owner, sizeof(c.owner), "user %" PRIu32, in->uid);

    char route_to[64] = "";
    if (in->has_peer) {
        char peer[INET_ADDRSTRLEN];
        if (!inet_ntop(AF_INET, in->peer, peer, sizeof(peer)))
            return -EINVAL;
        snprintf(route_to, sizeof(route_to), "(%s %s)", in->iface, peer);
    }

    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    c.f = open_memstream(&buf, &len);
    if (!c.f)
        return -ENOMEM;

    const struct pfr_policy *p = &in->policy;
    FILE *f = c.f;
    fprintf(f, "# lianyaohu anchor %s: %s scope, sockets of %s, VPN %s\n", anchor,
            in->scope == PFR_SCOPE_GROUP ? "group" : "user", c.owner, in->iface);
    if (in->has_peer)
        fprintf(f, "# IPv4 that would leave elsewhere is steered with route-to %s\n", route_to);
    else
        fprintf(f, "# no route-to: %s has no point-to-point IPv4 peer\n", in->iface);
    put_table(f, PFR_TABLE_LAN4, AF_INET);
    put_table(f, PFR_TABLE_LAN6, AF_INET6);

    /* 1 loopback */
    fprintf(f, "pass out quick on lo0 proto { tcp udp } from any to any %s keep state\n", c.owner);
    /* 2 LAN exceptions, any interface */
    for (size_t i = 0; i < p->n_lan_exceptions; i++)
        pass_dest(&c, NULL, NULL, &p->lan_exceptions[i]);
    /* 3 the blocked ranges */
    fprintf(f, "block return out quick inet proto { tcp udp } from any to <%s> %s\n",
            PFR_TABLE_LAN4, c.owner);
    fprintf(f, "block return out quick inet6 proto { tcp udp } from any to <%s> %s\n",
            PFR_TABLE_LAN6, c.owner);
    /* 4 the policy's deny rules */
    for (size_t i = 0; i < p->n_deny; i++)
        block_dest(&c, &p->deny[i]);
    /* 5 IPv6 off */
    if (p->ipv6_blocked)
        fprintf(f, "block return out quick inet6 proto { tcp udp } from any to any %s\n", c.owner);
    /* 6 route-to the peer, IPv4 only */
    if (in->has_peer) {
        char not_vpn[PFR_IFNAME_MAX + 2];
        snprintf(not_vpn, sizeof(not_vpn), "! %s", in->iface);
        if (!p->deny_default) {
            const struct dr_rule any4 = {.family = AF_INET};
            pass_dest(&c, not_vpn, route_to, &any4);
        } else {
            for (size_t i = 0; i < p->n_allow; i++)
                if (p->allow[i].family == AF_INET)
                    pass_dest(&c, not_vpn, route_to, &p->allow[i]);
        }
    }
    /* 7 any other interface */
    fprintf(f, "block return out quick on ! %s proto { tcp udp } from any to any %s\n", in->iface,
            c.owner);
    /* 8 the VPN */
    if (!p->deny_default)
        fprintf(f, "pass out quick on %s proto { tcp udp } from any to any %s keep state\n",
                in->iface, c.owner);
    else
        for (size_t i = 0; i < p->n_allow; i++)
            pass_dest(&c, in->iface, NULL, &p->allow[i]);
    /* 9 everything else */
    fprintf(f, "block return out quick proto { tcp udp } from any to any %s\n", c.owner);

    bool failed = ferror(f);
    if (fclose(f) != 0 || failed || !buf)
        return -ENOMEM;
    *ret = TAKE_PTR(buf);
    return 0;
}
