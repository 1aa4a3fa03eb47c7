/* libFuzzer: bytes as a session's stored guard spec (daemon/guard_spec.c),
 * the row lyhd renders a firewall chain from again after a restart. Whatever
 * gspec_decode accepts must encode again, to exactly the same bytes (the
 * layout is canonical: the version follows from dns_port, every field has one
 * encoding), and decode once more to an equal spec; else abort(). The spec is
 * then handed to gspec_policy as the renderer would get it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/guard_spec.h"

/* More than the longest spec the decoder can accept (three full lists of IPv6
 * rules, four resolvers, GSPEC_DOMAIN_BYTES of domains). */
static uint8_t out[16384];

static bool rules_eq(const struct dr_rule *a, const struct dr_rule *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i].family != b[i].family || a[i].prefix_len != b[i].prefix_len ||
            a[i].port_min != b[i].port_min || a[i].port_max != b[i].port_max ||
            memcmp(a[i].addr, b[i].addr, sizeof(a[i].addr)) != 0)
            return false;
    return true;
}

/* Field by field: struct dr_rule has padding, so no memcmp of the whole. */
static bool gspec_eq(const struct gspec *a, const struct gspec *b) {
    return strcmp(a->iface, b->iface) == 0 && a->deny_default == b->deny_default &&
           a->ipv6_blocked == b->ipv6_blocked && a->n_lan == b->n_lan &&
           rules_eq(a->lan, b->lan, a->n_lan) && a->n_deny == b->n_deny &&
           rules_eq(a->deny, b->deny, a->n_deny) && a->n_allow == b->n_allow &&
           rules_eq(a->allow, b->allow, a->n_allow) && a->dns_port == b->dns_port &&
           a->n_resolvers == b->n_resolvers &&
           rules_eq(a->resolvers, b->resolvers, a->n_resolvers) &&
           a->n_domains == b->n_domains && a->domains_len == b->domains_len &&
           memcmp(a->domains, b->domains, a->domains_len) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static struct gspec g, again;
    struct nftr_policy pol;
    size_t n;

    if (size > sizeof(out))
        return 0;
    if (gspec_decode(data, size, &g) != 0)
        return 0;
    if (g.n_lan > GSPEC_MAX_DESTS || g.n_deny > GSPEC_MAX_DESTS || g.n_allow > GSPEC_MAX_DESTS ||
        g.n_resolvers > GSPEC_MAX_RESOLVERS || g.n_domains > GSPEC_MAX_DOMAINS ||
        g.domains_len > sizeof(g.domains) || strnlen(g.iface, sizeof(g.iface)) == sizeof(g.iface))
        abort();
    if (gspec_encode(&g, out, sizeof(out), &n) != 0 || n != size || memcmp(out, data, size) != 0)
        abort();
    if (gspec_decode(out, n, &again) != 0 || !gspec_eq(&g, &again))
        abort();
    gspec_policy(&g, &pol);
    if (pol.lan_exceptions != g.lan || pol.n_lan_exceptions != g.n_lan || pol.deny != g.deny ||
        pol.n_deny != g.n_deny || pol.allow != g.allow || pol.n_allow != g.n_allow ||
        pol.deny_default != g.deny_default || pol.ipv6_blocked != g.ipv6_blocked)
        abort();
    return 0;
}
