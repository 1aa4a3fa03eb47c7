/* Encoding of the guard spec. Format (version 1), all integers big-endian:
 *   u8 version, u8 flags (1 = deny_default, 2 = ipv6_blocked),
 *   u8 iface length, iface bytes (0 bytes: proxy-only, no VPN, never with DNS),
 *   3 lists (lan exceptions, deny, allow), each: u8 count, then per entry
 *   u8 family (4 or 6), u8 prefix, u16 port_min, u16 port_max, 4 or 16 address bytes.
 * Version 2 (a session whose DNS lyhd forwards) adds, after the lists:
 *   u16 forwarder port (1..65535), the resolvers as a fourth list (1..4 entries,
 *   full prefixes, no ports), u8 count of allowed domains (0..128), each a u8
 *   length and the canonical pattern's bytes (checked again on decoding).
 * The decoder trusts nothing: state.db is root-only, but a damaged row must not
 * turn into a wrong firewall, so every field is range-checked. */
#include "daemon/guard_spec.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "common/dest_rule.h"
#include "common/dns_name.h"
#include "daemon/bytes.h"

#define GSPEC_VERSION 1
#define GSPEC_VERSION_DNS 2

static int put_list(struct bw *w, const struct dr_rule *d, size_t n) {
    if (n > GSPEC_MAX_DESTS)
        return -E2BIG;
    bw_put8(w, (uint8_t)n);
    for (size_t i = 0; i < n; i++) {
        bool v4 = d[i].family == AF_INET;
        if (!v4 && d[i].family != AF_INET6)
            return -EINVAL;
        bw_put8(w, v4 ? 4 : 6);
        bw_put8(w, d[i].prefix_len);
        bw_put16(w, d[i].port_min);
        bw_put16(w, d[i].port_max);
        bw_put(w, d[i].addr, v4 ? 4 : 16);
    }
    return 0;
}

int gspec_encode(const struct gspec *g, uint8_t *buf, size_t len, size_t *ret_len) {
    struct bw w = {.p = buf, .cap = len};
    size_t il = strnlen(g->iface, sizeof(g->iface));
    int r;

    if (il >= sizeof(g->iface))
        return -EINVAL;
    if (g->dns_port && (g->n_resolvers == 0 || g->n_resolvers > GSPEC_MAX_RESOLVERS || il == 0))
        return -EINVAL;
    bw_put8(&w, g->dns_port ? GSPEC_VERSION_DNS : GSPEC_VERSION);
    bw_put8(&w, (uint8_t)((g->deny_default ? 1 : 0) | (g->ipv6_blocked ? 2 : 0)));
    bw_put8(&w, (uint8_t)il);
    bw_put(&w, g->iface, il);
    if ((r = put_list(&w, g->lan, g->n_lan)) < 0 || (r = put_list(&w, g->deny, g->n_deny)) < 0 ||
        (r = put_list(&w, g->allow, g->n_allow)) < 0)
        return r;
    if (g->dns_port) {
        bw_put16(&w, g->dns_port);
        if ((r = put_list(&w, g->resolvers, g->n_resolvers)) < 0)
            return r;
        if (g->n_domains > GSPEC_MAX_DOMAINS || g->domains_len > sizeof(g->domains))
            return -E2BIG;
        bw_put8(&w, (uint8_t)g->n_domains);
        const char *p = g->domains;
        for (size_t i = 0; i < g->n_domains; i++) {
            size_t l = strnlen(p, (size_t)(g->domains + g->domains_len - p));
            if (l == 0 || l > 255 || p + l >= g->domains + g->domains_len)
                return -EINVAL;
            bw_put8(&w, (uint8_t)l);
            bw_put(&w, p, l);
            p += l + 1;
        }
    } else if (g->n_domains) {
        return -EINVAL; /* an allowlist without a forwarder would allow nothing */
    }
    if (w.bad)
        return -ENOBUFS;
    *ret_len = w.off;
    return 0;
}

static int get_list(struct br *r, struct dr_rule *d, size_t *ret_n) {
    size_t n = br_get8(r);

    if (n > GSPEC_MAX_DESTS)
        return -EBADMSG;
    for (size_t i = 0; i < n && !r->bad; i++) {
        uint8_t fam = br_get8(r);
        memset(&d[i], 0, sizeof(d[i]));
        if (fam != 4 && fam != 6)
            return -EBADMSG;
        d[i].family = fam == 4 ? AF_INET : AF_INET6;
        d[i].prefix_len = br_get8(r);
        d[i].port_min = br_get16(r);
        d[i].port_max = br_get16(r);
        br_get(r, d[i].addr, fam == 4 ? 4 : 16);
        /* every invariant of a dr_rule, host bits included: a damaged row
         * fails here, as damaged, not later in the renderer */
        if (!r->bad && dr_check(&d[i], NULL, 0) < 0)
            return -EBADMSG;
    }
    *ret_n = n;
    return r->bad ? -EBADMSG : 0;
}

int gspec_decode(const uint8_t *buf, size_t len, struct gspec *ret) {
    struct br r = {.p = buf, .len = len};
    struct gspec g;
    uint8_t flags, il;

    memset(&g, 0, sizeof(g));
    uint8_t version = br_get8(&r);
    if (version != GSPEC_VERSION && version != GSPEC_VERSION_DNS)
        return -EBADMSG;
    flags = br_get8(&r);
    if (flags & ~3u)
        return -EBADMSG;
    g.deny_default = flags & 1;
    g.ipv6_blocked = flags & 2;
    il = br_get8(&r);
    if (il >= sizeof(g.iface))
        return -EBADMSG;
    br_get(&r, g.iface, il);
    g.iface[il] = '\0';
    if (memchr(g.iface, '\0', il))
        return -EBADMSG;
    if (get_list(&r, g.lan, &g.n_lan) < 0 || get_list(&r, g.deny, &g.n_deny) < 0 ||
        get_list(&r, g.allow, &g.n_allow) < 0)
        return -EBADMSG;
    if (version == GSPEC_VERSION_DNS) {
        struct dr_rule res[GSPEC_MAX_DESTS];
        g.dns_port = br_get16(&r);
        if (g.dns_port == 0 || get_list(&r, res, &g.n_resolvers) < 0 || g.n_resolvers == 0 ||
            g.n_resolvers > GSPEC_MAX_RESOLVERS)
            return -EBADMSG;
        for (size_t i = 0; i < g.n_resolvers; i++) {
            if (res[i].prefix_len != (res[i].family == AF_INET ? 32 : 128) || res[i].port_min)
                return -EBADMSG;
            g.resolvers[i] = res[i];
        }
        size_t nd = br_get8(&r);
        if (nd > GSPEC_MAX_DOMAINS)
            return -EBADMSG;
        for (size_t i = 0; i < nd && !r.bad; i++) {
            char pat[256], canon[DNS_PATTERN_MAX];
            uint8_t l = br_get8(&r);
            br_get(&r, pat, l);
            pat[l] = '\0';
            if (r.bad || l == 0 || memchr(pat, '\0', l) ||
                dn_pattern_check(pat, canon, NULL, 0) < 0 || strcmp(canon, pat) != 0 ||
                gspec_add_domain(&g, pat) < 0)
                return -EBADMSG;
        }
    }
    if (r.bad || r.off != r.len || (!g.iface[0] && g.dns_port))
        return -EBADMSG; /* proxy-only (no interface) has no DNS */
    *ret = g;
    return 0;
}

int gspec_add_domain(struct gspec *g, const char *pattern) {
    size_t l = strlen(pattern);
    if (g->n_domains >= GSPEC_MAX_DOMAINS || g->domains_len + l + 1 > sizeof(g->domains))
        return -E2BIG;
    memcpy(g->domains + g->domains_len, pattern, l + 1);
    g->domains_len += l + 1;
    g->n_domains++;
    return 0;
}

void gspec_policy(const struct gspec *g, struct nftr_policy *ret) {
    *ret = (struct nftr_policy){
        .lan_exceptions = g->lan,
        .n_lan_exceptions = g->n_lan,
        .deny = g->deny,
        .n_deny = g->n_deny,
        .deny_default = g->deny_default,
        .allow = g->allow,
        .n_allow = g->n_allow,
        .ipv6_blocked = g->ipv6_blocked,
    };
}
