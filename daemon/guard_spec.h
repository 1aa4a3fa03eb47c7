/* The guard spec: what a session's firewall chain is rendered from (VPN
 * interface and network policy), in a small versioned binary form kept in
 * state.db, so the chain can be rendered again after a restart or a flush.
 * Pure: no I/O. 0 or -errno; ret_* set only on success. */
#ifndef LYHD_GUARD_SPEC_H
#define LYHD_GUARD_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/linux/nft_render.h"

#define GSPEC_MAX_DESTS 64
#define GSPEC_MAX_RESOLVERS 4
#define GSPEC_MAX_DOMAINS 128
#define GSPEC_DOMAIN_BYTES 3072 /* the patterns, each with its NUL */

struct gspec {
    char iface[NFTR_IFNAME_MAX]; /* "": proxy-only (no VPN; the proxy is in lan) */
    bool deny_default;
    bool ipv6_blocked;
    struct dr_rule lan[GSPEC_MAX_DESTS];
    size_t n_lan;
    struct dr_rule deny[GSPEC_MAX_DESTS];
    size_t n_deny;
    struct dr_rule allow[GSPEC_MAX_DESTS];
    size_t n_allow;
    /* DNS (version 2): the session's forwarder port (0: none) and the
     * resolvers it asks, through iface (prefix_len full, no ports) */
    uint16_t dns_port;
    struct dr_rule resolvers[GSPEC_MAX_RESOLVERS];
    size_t n_resolvers;
    /* The domain allowlist (version 2; common/dns_name.h patterns, canonical):
     * n_domains NUL-terminated patterns packed in domains. With any, the
     * session reaches on the VPN only what an allowed name resolved to for it
     * (and its explicit allow rules). */
    char domains[GSPEC_DOMAIN_BYTES];
    size_t n_domains;
    size_t domains_len; /* bytes of domains used */
};

/* Append a canonical pattern to g's allowlist: -E2BIG when full. */
int gspec_add_domain(struct gspec *g, const char *pattern);

/* -ENOBUFS when buf is too small, -E2BIG when a list is longer than GSPEC_MAX_DESTS. */
int gspec_encode(const struct gspec *g, uint8_t *buf, size_t len, size_t *ret_len);
/* -EBADMSG for anything malformed (bounds, families, prefixes, trailing bytes). */
int gspec_decode(const uint8_t *buf, size_t len, struct gspec *ret);
/* Point an nftr_policy at the lists of g (borrowed). */
void gspec_policy(const struct gspec *g, struct nftr_policy *ret);

#endif
