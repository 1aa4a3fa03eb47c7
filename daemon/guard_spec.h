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

struct gspec {
    char iface[NFTR_IFNAME_MAX];
    bool deny_default;
    bool ipv6_blocked;
    struct nftr_dest lan[GSPEC_MAX_DESTS];
    size_t n_lan;
    struct nftr_dest deny[GSPEC_MAX_DESTS];
    size_t n_deny;
    struct nftr_dest allow[GSPEC_MAX_DESTS];
    size_t n_allow;
    /* DNS (version 2): the session's forwarder port (0: none) and the
     * resolvers it asks, through iface (prefix_len full, no ports) */
    uint16_t dns_port;
    struct nftr_dest resolvers[GSPEC_MAX_RESOLVERS];
    size_t n_resolvers;
};

/* -ENOBUFS when buf is too small, -E2BIG when a list is longer than GSPEC_MAX_DESTS. */
int gspec_encode(const struct gspec *g, uint8_t *buf, size_t len, size_t *ret_len);
/* -EBADMSG for anything malformed (bounds, families, prefixes, trailing bytes). */
int gspec_decode(const uint8_t *buf, size_t len, struct gspec *ret);
/* Point an nftr_policy at the lists of g (borrowed). */
void gspec_policy(const struct gspec *g, struct nftr_policy *ret);

#endif
