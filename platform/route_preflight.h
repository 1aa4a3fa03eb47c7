/* The route preflight, the same question on every platform: would a session's
 * traffic leave through its VPN interface? Linux answers it with rtnetlink
 * (platform/linux/route.c), Darwin with the routing socket
 * (platform/darwin/route.c).
 *
 * Contract: 0 or -errno; ret_* written only on success; no logging;
 * `why`/`whylen` (may be NULL/0) receive one human sentence on failure only,
 * always NUL-terminated. Each kernel request waits at most ROUTE_TIMEOUT_MS. */
#ifndef LYH_PLATFORM_ROUTE_PREFLIGHT_H
#define LYH_PLATFORM_ROUTE_PREFLIGHT_H

#include <stdbool.h>
#include <stddef.h>

#define ROUTE_TIMEOUT_MS 1000
#define ROUTE_NOTE_MAX 160

struct route_preflight_result {
    bool ipv4_checked;  /* false when allow_non_default_route skipped the IPv4 check */
    bool ipv6_blocked;  /* IPv6 would not leave through the VPN: block it for the session */
    char ipv4_note[ROUTE_NOTE_MAX]; /* "" or the note that the check was skipped */
    char ipv6_note[ROUTE_NOTE_MAX]; /* "" or why IPv6 is blocked */
};

/* Would the session's traffic leave through ifindex (named ifname)?
 *  - ifindex must still carry the name ifname (catches a rename or a
 *    recycled index between validation and preflight): -ENODEV otherwise.
 *  - IPv4: the routes for 0.0.0.1 and 128.0.0.1 must both leave through
 *    ifindex (a default route or the 0/1 + 128/1 split; a host route for one
 *    address cannot satisfy both). Otherwise -ENETUNREACH with why naming the
 *    interface actually used. allow_non_default_route skips this check and
 *    says so in ret->ipv4_note.
 *  - IPv6: the same for 2000:: and 8000::, but failing it is not an error:
 *    ret->ipv6_blocked is set and ret->ipv6_note says why.
 * -EINVAL for a bad ifname/ifindex; transport errors as the platform's. */
int route_preflight(const char *ifname, int ifindex, bool allow_non_default_route,
                    struct route_preflight_result *ret, char *why, size_t whylen);

/* The interface packets to addr (family AF_INET: struct in_addr, AF_INET6:
 * struct in6_addr) would leave through. -ENETUNREACH when the kernel has no
 * usable route (none, reject or blackhole). */
int route_oif_for(int family, const void *addr, int *ret_ifindex);

#endif
