/* pf_render: the macOS egress guard as a PF anchor, rendered as text.
 *
 * A pure renderer: validated input in, the anchor's ruleset out (pf.conf
 * syntax, loaded with `pfctl -a ANCHOR -f FILE` by platform/darwin/pf.c). No
 * I/O, no globals, no logging; it builds and is golden-tested on Linux
 * (tests/unit/platform/test_pf_render.c), where no PF exists to load it.
 *
 * macOS has no cgroups, so PF can tell an agent's sockets apart only by their
 * owner: every rule matches TCP/UDP sockets of one owner (PF looks owners up for
 * TCP and UDP only), and the anchor belongs to one uid, like the Linux uid
 * scopes (LYH-<uid>, LYH-U-<uid>):
 *
 *   PFR_SCOPE_GROUP  anchor com.apple/lianyaohu-<uid>, owner `user U group G`:
 *                    sockets of uid U whose gid is the guard gid (the agents
 *                    lyhd started, whose egid is _lianyaohu); U's other
 *                    processes are untouched, and another uid's agents never
 *                    match U's anchor.
 *   PFR_SCOPE_USER   anchor com.apple/lianyaohu-user-<uid>, owner `user U`:
 *                    every socket of uid U (--shared-user-firewall).
 *
 * The rules, all `quick` (first match wins), in order:
 *   1 pass loopback (lo0)
 *   2 pass the policy's LAN exceptions, on any interface
 *   3 block return to the blocked ranges (tables lyh_lan4 / lyh_lan6, from
 *     common/dest_rule.h: the same list as the nftables sets)
 *   4 block return the policy's deny rules
 *   5 block return IPv6 (when the route preflight said IPv6 misses the VPN)
 *   6 pass IPv4 leaving any other interface with route-to (utunN peer): only
 *     when the utun has a point-to-point IPv4 peer; deny-default: only the
 *     allowed IPv4 destinations
 *   7 block return on any interface other than utunN
 *   8 pass on utunN (deny-default: only the allowed destinations)
 *   9 block return everything else of the owner
 *
 * Every function returns 0 or -errno; ret_* out-parameters are set only on
 * success. */
#ifndef LYH_PLATFORM_DARWIN_PF_RENDER_H
#define LYH_PLATFORM_DARWIN_PF_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dest_rule.h"

/* macOS' stock /etc/pf.conf evaluates every anchor below com.apple (its
 * anchor line names com.apple/ and a wildcard): loading there needs no edit
 * of the system's PF configuration. */
#define PFR_ANCHOR_PARENT       "com.apple"
#define PFR_ANCHOR_PREFIX       "com.apple/lianyaohu-"
#define PFR_ANCHOR_USER_PREFIX  "com.apple/lianyaohu-user-"
#define PFR_TABLE_LAN4          "lyh_lan4"
#define PFR_TABLE_LAN6          "lyh_lan6"
#define PFR_DEFAULT_GUARD_GID   2000000u
#define PFR_NAME_MAX            64  /* anchor names, with the NUL */
#define PFR_IFNAME_MAX          16  /* IFNAMSIZ on Darwin, with the NUL */
#define PFR_DESTS_MAX           256 /* entries per policy list, as nft_render */

enum pfr_scope {
    PFR_SCOPE_GROUP = 1, /* user U group guard_gid: sessions lyhd started */
    PFR_SCOPE_USER,      /* user U: --shared-user-firewall */
};

struct pfr_policy {
    const struct dr_rule *lan_exceptions; /* passed before the blocked ranges */
    size_t n_lan_exceptions;
    const struct dr_rule *deny; /* blocked after the blocked ranges */
    size_t n_deny;
    bool deny_default; /* on the VPN pass only `allow` */
    const struct dr_rule *allow;
    size_t n_allow;
    bool ipv6_blocked; /* block IPv6 before the VPN pass */
};

struct pfr_input {
    enum pfr_scope scope;
    uint32_t uid;       /* not (uid_t)-1 */
    uint32_t guard_gid; /* PFR_SCOPE_GROUP: != 0, != (gid_t)-1 */
    const char *iface;  /* the VPN: "utun" followed by 1..5 digits */
    bool has_peer;      /* the utun's point-to-point IPv4 peer, for route-to */
    uint8_t peer[4];    /* network byte order; not 0.0.0.0, not 255.255.255.255 */
    struct pfr_policy policy;
};

/* "com.apple/lianyaohu-<uid>" or "com.apple/lianyaohu-user-<uid>" into buf.
 * -EINVAL for an unknown scope or uid (uid_t)-1. */
int pfr_anchor_name(enum pfr_scope scope, uint32_t uid, char buf[static PFR_NAME_MAX]);

/* Is name a utun interface name ("utun" + 1..5 digits, no leading zero unless
 * it is "utun0")? Pure; the Darwin interface rule (platform/ifaces.h) uses it. */
bool pfr_iface_valid(const char *name);

/* Validate `in` and render the anchor's ruleset: a comment header, the two
 * tables, then the rules above, one per line, '\n'-terminated. *ret is newly
 * allocated (free()). -EINVAL on invalid input (nothing rendered), -ENOMEM. */
int pfr_render(const struct pfr_input *in, char **ret);

#endif
