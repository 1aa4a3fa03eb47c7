/* Route preflight: ask the kernel (rtnetlink RTM_GETROUTE, "ip route get"
 * semantics) where packets to a given address would leave, and decide
 * whether a session's traffic would reach its VPN interface.
 *
 * Contract for every function here:
 *  - Returns 0 or -errno; ret_* out-parameters are written only on success.
 *  - No logging. `why`/`whylen` (may be NULL/0) receive one human sentence
 *    on failure only, always NUL-terminated.
 *  - Answers describe the network namespace the socket was opened in (the
 *    one-shot helpers open theirs in the calling thread's namespace).
 *  - Blocking: each kernel request waits for its answer for at most
 *    ROUTE_TIMEOUT_MS (-ETIMEDOUT after that). The kernel answers
 *    RTM_GETROUTE synchronously, so in practice a call returns in
 *    microseconds; it is fine to call from the event loop.
 *  - A route_sock is not thread-safe: one request at a time. */
#ifndef LYH_ROUTE_H
#define LYH_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/route_preflight.h"

#define ROUTE_MAX_PATHS 16

/* One rtnetlink socket (NETLINK_ROUTE, SOCK_CLOEXEC, non-blocking, bound to
 * a kernel-assigned port id). Opaque. */
struct route_sock;

/* Open a socket. On success *ret is owned by the caller: route_close() it. */
int route_open(struct route_sock **ret);
/* Close and free. Accepts NULL. */
void route_close(struct route_sock *rs);
/* For _cleanup_(route_closep). */
void route_closep(struct route_sock **rs);

/* A socket the kernel tells of every change that could change a preflight's
 * answer: links, addresses, routes, rules, nexthops and per-interface
 * settings of this network namespace (rtnetlink multicast groups; the kernel
 * queues the notice inside the call that made the change). Non-blocking,
 * CLOEXEC; the caller closes it. 0 or -errno. */
int route_watch_open(int *ret_fd);
/* Has anything changed since the last call? Reads what is queued, never
 * waits. 1: yes, or cannot tell (an overrun, an error); 0: nothing. */
int route_watch_changed(int fd);

/* What the kernel answered for one address. */
struct route_answer {
    int error;        /* 0, or the kernel's -errno for this lookup: -ENETUNREACH no
                       * route, -EHOSTUNREACH unreachable route, -EACCES prohibit
                       * route, -EINVAL blackhole route */
    unsigned type;    /* when error == 0: the RTN_* route type (<linux/rtnetlink.h>) */
    int oif;          /* when error == 0: output ifindex, 0 if the kernel named none
                       * (loopback's index for one of our own addresses) */
    size_t n_paths;   /* next hops of a multipath route (fib-match answers only), dead
                       * ones left out; 0 for a single-path route */
    int path_oif[ROUTE_MAX_PATHS];
    bool paths_truncated; /* more than ROUTE_MAX_PATHS next hops */
};

/* Look up one address: family AF_INET (addr = struct in_addr) or AF_INET6
 * (struct in6_addr). fib_match = false is "ip route get ADDR": the route the
 * kernel resolved, with the next hop it picked. fib_match = true is
 * "ip route get fibmatch ADDR": the routing-table entry that matched, with
 * every next hop of a multipath route. A lookup the kernel refused ("no
 * route") is a success with ret->error set; a failure return means the
 * question could not be asked or answered (-EAFNOSUPPORT, -ENOBUFS,
 * -ETIMEDOUT, -EBADMSG/-EPROTO for a malformed or unexpected answer). */
int route_lookup(struct route_sock *rs, int family, const void *addr, bool fib_match,
                 struct route_answer *ret);

/* The interface packets to addr would leave through. -ENETUNREACH when the
 * kernel has no usable route (none, or an unreachable, prohibit, blackhole
 * or throw route); other -errno as route_lookup(). */
int route_get_oif(struct route_sock *rs, int family, const void *addr, int *ret_ifindex);
/* route_oif_for() (platform/route_preflight.h) is the same on a socket
 * opened and closed for this one call. */

/* The current name of ifindex (RTM_GETLINK), into name[IFNAMSIZ].
 * -ENODEV when there is no such interface. */
int route_link_name(struct route_sock *rs, int ifindex, char name[16]);


/* route_preflight() (platform/route_preflight.h) on this socket; the Linux
 * answer also requires every next hop of a multipath route to use ifindex. */
int route_preflight_on(struct route_sock *rs, const char *ifname, int ifindex,
                       bool allow_non_default_route, struct route_preflight_result *ret,
                       char *why, size_t whylen);
/* route_preflight() is the same on a socket opened and closed for this call. */

/* Exposed for unit tests: scan one received datagram for the answer to
 * request seq from a socket with port id portid, and parse it as a route of
 * the given family. 0 when the answer was found (a route, or a kernel error
 * in ret->error); -EAGAIN when the buffer holds nothing for this request
 * (stale or foreign messages are skipped); -EBADMSG for a malformed message
 * or a route of another family; -EPROTO for an unexpected message type or
 * an ACK where a route was expected. */
int route_parse_reply(const void *buf, size_t len, uint32_t seq, uint32_t portid, int family,
                      struct route_answer *ret);

#endif
