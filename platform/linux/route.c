/* Route preflight over rtnetlink. Owns one NETLINK_ROUTE socket per
 * route_sock and the buffers it sends and receives with. It only ever sends
 * RTM_GETROUTE and RTM_GETLINK requests: it never changes a route, a rule or
 * an interface, never sends a packet anywhere, never runs `ip`, never logs.
 *
 * Why the answers can be trusted:
 *  - The kernel resolves the route exactly as it would for a packet sent by
 *    us to that address ("ip route get"), including policy rules, so there is
 *    no second implementation of routing here to get wrong.
 *  - A reply is accepted only if the datagram came from the kernel (sender
 *    port id 0), carries our socket's port id and the sequence number of the
 *    request in flight, and parses completely; anything else from our seq is
 *    an error, anything for another seq (a late answer to a request that
 *    timed out) is skipped. Receives are bounded in count and time.
 *  - Every doubt ends in "not through the VPN": a missing attribute, an
 *    unusable route type or a multipath route with one next hop elsewhere
 *    fails IPv4 and blocks IPv6.
 * This is a preflight, not the enforcement: the nftables session chain
 * rejects whatever would leave through another interface. Its job is to
 * refuse a launch whose traffic would all be refused, with a clear reason. */
#include "platform/linux/route.h"
#include "common/why.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "common/macros.h"

#define ROUTE_BUF_SIZE 16384 /* one RTM_NEWLINK without stats fits many times over */
#define ROUTE_MAX_RECV 16    /* datagrams read per request before giving up */
#define ROUTE_REQ_SIZE 256

struct route_sock {
    struct mnl_socket *nl; /* owned */
    uint32_t portid;
    uint32_t seq;          /* of the request in flight or last sent */
    _Alignas(struct nlmsghdr) uint8_t buf[ROUTE_BUF_SIZE];
};


void route_close(struct route_sock *rs) {
    if (!rs)
        return;
    if (rs->nl)
        mnl_socket_close(rs->nl);
    free(rs);
}

void route_closep(struct route_sock **rs) {
    if (rs && *rs) {
        int saved = errno;
        route_close(*rs);
        *rs = NULL;
        errno = saved;
    }
}

int route_open(struct route_sock **ret) {
    _cleanup_(route_closep) struct route_sock *rs = NULL;

    if (!ret)
        return -EINVAL;
    rs = calloc(1, sizeof(*rs));
    if (!rs)
        return -ENOMEM;
    /* Non-blocking so that a receive can never outlive its poll() deadline. */
    rs->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (!rs->nl)
        return -errno;
    if (mnl_socket_bind(rs->nl, 0, MNL_SOCKET_AUTOPID) < 0)
        return -errno;
#ifdef NETLINK_GET_STRICT_CHK
    /* Make the kernel refuse a request it does not fully understand rather
     * than answer a different question. Older kernels lack it; that is fine,
     * our requests are well-formed either way. */
    int one = 1;
    (void)mnl_socket_setsockopt(rs->nl, NETLINK_GET_STRICT_CHK, &one, sizeof(one));
#endif
    rs->portid = mnl_socket_get_portid(rs->nl);
    *ret = TAKE_PTR(rs);
    return 0;
}

/* ---- changes --------------------------------------------------------------------- */

int route_watch_open(int *ret_fd) {
    static const unsigned groups[] = {
        RTNLGRP_LINK,       RTNLGRP_IPV4_IFADDR,  RTNLGRP_IPV6_IFADDR,  RTNLGRP_IPV4_ROUTE,
        RTNLGRP_IPV6_ROUTE, RTNLGRP_IPV4_RULE,    RTNLGRP_IPV6_RULE,    RTNLGRP_IPV4_NETCONF,
        RTNLGRP_IPV6_NETCONF, RTNLGRP_NEXTHOP,
    };
    _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};

    if (!ret_fd)
        return -EINVAL;
    /* Only "something changed" is read from it: a small queue, so an idle
     * stretch of notices costs a few reads, and more than it holds is
     * ENOBUFS, which says the same. */
    int rcvbuf = 4096;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) < 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return -errno;
    for (size_t i = 0; i < ARRAY_SIZE(groups); i++)
        if (setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &groups[i], sizeof(groups[i])) < 0 &&
            !(errno == EINVAL && groups[i] == RTNLGRP_NEXTHOP)) /* before 5.3: no nexthop objects */
            return -errno;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int route_watch_changed(int fd) {
    char buf[8192];
    int changed = 0;

    /* Only "something changed" matters: the caller asks the kernel again. */
    for (int i = 0; i < 4096; i++) {
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return changed;
        if (n < 0 && errno != ENOBUFS)
            return 1; /* cannot tell */
        changed = 1; /* a notice, or notices lost (ENOBUFS): something changed */
    }
    return 1;
}

/* ---- one request, one answer ------------------------------------------------- */

typedef int (*answer_fn)(const struct nlmsghdr *nlh, void *data);

/* Scan one datagram for the answer to (seq, portid). Messages for other
 * requests are skipped. For ours: NLMSG_ERROR sets *ret_kerr (always < 0),
 * a message of want_type with at least want_hdr payload bytes goes to fn.
 * Returns 0 when answered, -EAGAIN when nothing here is ours, -EBADMSG /
 * -EPROTO otherwise (or what fn returned). */
static int nl_scan(const void *buf, size_t len, uint32_t seq, uint32_t portid, uint16_t want_type,
                   size_t want_hdr, answer_fn fn, void *data, int *ret_kerr) {
    if (len > INT_MAX)
        return -EBADMSG;
    int left = (int)len;
    const struct nlmsghdr *nlh = buf;

    for (; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left)) {
        if (nlh->nlmsg_seq != seq || nlh->nlmsg_pid != portid)
            continue;
        size_t plen = mnl_nlmsg_get_payload_len(nlh);
        if (nlh->nlmsg_type == NLMSG_ERROR) {
            if (plen < sizeof(struct nlmsgerr))
                return -EBADMSG;
            const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
            /* We never ask for ACKs, so error 0 is not an answer. */
            if (e->error >= 0 || e->error < -4095)
                return -EPROTO;
            *ret_kerr = e->error;
            return 0;
        }
        if (nlh->nlmsg_type == NLMSG_NOOP)
            continue;
        if (nlh->nlmsg_type != want_type)
            return -EPROTO;
        if (plen < want_hdr)
            return -EBADMSG;
        *ret_kerr = 0;
        return fn(nlh, data);
    }
    /* Bytes left that do not form a message (a negative count is the
     * alignment padding after a final unaligned message). */
    if (left > 0)
        return -EBADMSG;
    return -EAGAIN;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Receive one datagram into rs->buf within timeout_ms. Returns its length,
 * 0 for a datagram to ignore (not from the kernel), or -errno. */
static ssize_t rs_recv(struct route_sock *rs, int timeout_ms) {
    int fd = mnl_socket_get_fd(rs->nl);
    struct pollfd pfd = {.fd = fd, .events = POLLIN};

    int r = poll(&pfd, 1, timeout_ms);
    if (r < 0)
        return -errno;
    if (r == 0)
        return -ETIMEDOUT;

    struct sockaddr_nl sa = {0};
    struct iovec iov = {.iov_base = rs->buf, .iov_len = sizeof(rs->buf)};
    struct msghdr msg = {
        .msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
    if (n < 0)
        return -errno;
    if (msg.msg_flags & MSG_TRUNC)
        return -EMSGSIZE;
    if (msg.msg_namelen != sizeof(sa) || sa.nl_family != AF_NETLINK)
        return -EPROTO;
    /* Only the kernel speaks for routes; a datagram from another socket
     * (possible for a privileged sender) is dropped unread. */
    if (sa.nl_pid != 0)
        return 0;
    return n;
}

static int rs_transact(struct route_sock *rs, struct nlmsghdr *req, uint16_t want_type,
                       size_t want_hdr, answer_fn fn, void *data, int *ret_kerr) {
    if (++rs->seq == 0)
        rs->seq = 1;
    req->nlmsg_seq = rs->seq;
    ssize_t sent = mnl_socket_sendto(rs->nl, req, req->nlmsg_len);
    if (sent < 0)
        return -errno;
    if ((size_t)sent != req->nlmsg_len)
        return -EIO;

    int64_t deadline = now_ms() + ROUTE_TIMEOUT_MS;
    for (unsigned tries = 0; tries < ROUTE_MAX_RECV; tries++) {
        int64_t now = now_ms();
        if (now >= deadline)
            return -ETIMEDOUT;
        ssize_t n = rs_recv(rs, (int)(deadline - now));
        if (n == -EINTR || n == -EAGAIN || n == 0)
            continue;
        if (n < 0)
            return (int)n;
        int r = nl_scan(rs->buf, (size_t)n, rs->seq, rs->portid, want_type, want_hdr, fn, data,
                        ret_kerr);
        if (r != -EAGAIN)
            return r;
    }
    return -ETIMEDOUT;
}

/* Walk the attributes in [*pos, end). Returns the next one, or NULL at the
 * end or (with *err = -EBADMSG) at a malformed one. *pos must be 4-aligned. */
static const struct nlattr *attr_next(const char **pos, const char *end, int *err) {
    ptrdiff_t left = end - *pos;
    if (left <= 0)
        return NULL;
    const struct nlattr *a = (const void *)*pos;
    if (left < (ptrdiff_t)sizeof(*a) || a->nla_len < sizeof(*a) || a->nla_len > left) {
        *err = -EBADMSG;
        return NULL;
    }
    *pos += MNL_ALIGN(a->nla_len);
    return a;
}

/* ---- routes ------------------------------------------------------------------ */

struct route_parse {
    int family;
    struct route_answer *ans;
};

static int parse_multipath(const struct nlattr *attr, struct route_answer *a) {
    const uint8_t *p = mnl_attr_get_payload(attr);
    size_t left = mnl_attr_get_payload_len(attr);

    a->n_paths = 0;
    a->paths_truncated = false;
    while (left > 0) {
        if (left < sizeof(struct rtnexthop))
            return -EBADMSG;
        const struct rtnexthop *nh = (const void *)p;
        if (nh->rtnh_len < sizeof(*nh) || nh->rtnh_len > left)
            return -EBADMSG;
        /* The kernel never picks a dead next hop, so it is not a path. */
        if (!(nh->rtnh_flags & RTNH_F_DEAD)) {
            if (a->n_paths < ROUTE_MAX_PATHS)
                a->path_oif[a->n_paths++] = nh->rtnh_ifindex;
            else
                a->paths_truncated = true;
        }
        size_t step = RTNH_ALIGN(nh->rtnh_len);
        if (step >= left)
            break;
        p += step;
        left -= step;
    }
    return 0;
}

static int parse_route_msg(const struct nlmsghdr *nlh, void *data) {
    struct route_parse *rp = data;
    const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
    struct route_answer a = {.type = rtm->rtm_type};
    int err = 0;

    if (rtm->rtm_family != rp->family)
        return -EBADMSG;
    const char *pos = (const char *)rtm + MNL_ALIGN(sizeof(*rtm));
    const char *end = (const char *)nlh + nlh->nlmsg_len;
    for (const struct nlattr *at; (at = attr_next(&pos, end, &err));) {
        switch (mnl_attr_get_type(at)) {
        case RTA_OIF: {
            if (mnl_attr_validate(at, MNL_TYPE_U32) < 0)
                return -EBADMSG;
            uint32_t v = mnl_attr_get_u32(at);
            if (v > INT_MAX)
                return -EBADMSG;
            a.oif = (int)v;
            break;
        }
        case RTA_MULTIPATH: {
            int r = parse_multipath(at, &a);
            if (r < 0)
                return r;
            break;
        }
        default:
            break;
        }
    }
    if (err < 0)
        return err;
    *rp->ans = a;
    return 0;
}

static int addr_len(int family, size_t *ret) {
    switch (family) {
    case AF_INET:
        *ret = sizeof(struct in_addr);
        return 0;
    case AF_INET6:
        *ret = sizeof(struct in6_addr);
        return 0;
    default:
        return -EAFNOSUPPORT;
    }
}

int route_parse_reply(const void *buf, size_t len, uint32_t seq, uint32_t portid, int family,
                      struct route_answer *ret) {
    struct route_answer a = {0};
    struct route_parse rp = {.family = family, .ans = &a};
    size_t alen;
    int kerr = 0;

    if (!buf || !ret || ((uintptr_t)buf % _Alignof(struct nlmsghdr)) != 0)
        return -EINVAL;
    int r = addr_len(family, &alen);
    if (r < 0)
        return r;
    r = nl_scan(buf, len, seq, portid, RTM_NEWROUTE, sizeof(struct rtmsg), parse_route_msg, &rp,
                &kerr);
    if (r < 0)
        return r;
    if (kerr < 0)
        a = (struct route_answer){.error = kerr};
    *ret = a;
    return 0;
}

int route_lookup(struct route_sock *rs, int family, const void *addr, bool fib_match,
                 struct route_answer *ret) {
    _Alignas(struct nlmsghdr) char req[ROUTE_REQ_SIZE] = {0};
    struct route_answer a = {0};
    struct route_parse rp = {.family = family, .ans = &a};
    size_t alen;
    int kerr = 0;

    if (!rs || !addr || !ret)
        return -EINVAL;
    int r = addr_len(family, &alen);
    if (r < 0)
        return r;

    struct nlmsghdr *nlh = mnl_nlmsg_put_header(req);
    nlh->nlmsg_type = RTM_GETROUTE;
    nlh->nlmsg_flags = NLM_F_REQUEST;
    struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
    rtm->rtm_family = (unsigned char)family;
    rtm->rtm_dst_len = (unsigned char)(alen * 8);
    if (fib_match)
        rtm->rtm_flags = RTM_F_FIB_MATCH;
    mnl_attr_put(nlh, RTA_DST, alen, addr);

    r = rs_transact(rs, nlh, RTM_NEWROUTE, sizeof(struct rtmsg), parse_route_msg, &rp, &kerr);
    if (r < 0)
        return r;
    if (kerr < 0)
        a = (struct route_answer){.error = kerr};
    *ret = a;
    return 0;
}

/* Route types that send a packet out of an interface. */
static bool type_delivers(unsigned type) {
    return type == RTN_UNICAST || type == RTN_LOCAL || type == RTN_BROADCAST ||
           type == RTN_MULTICAST || type == RTN_ANYCAST;
}

/* Kernel errors that mean "routing has no way there" (as opposed to "could
 * not ask"): none, unreachable, prohibit, blackhole, throw. */
static bool error_is_no_route(int kerr) {
    return kerr == -ENETUNREACH || kerr == -EHOSTUNREACH || kerr == -EACCES || kerr == -EINVAL ||
           kerr == -EAGAIN;
}

int route_get_oif(struct route_sock *rs, int family, const void *addr, int *ret_ifindex) {
    struct route_answer a;

    if (!ret_ifindex)
        return -EINVAL;
    int r = route_lookup(rs, family, addr, false, &a);
    if (r < 0)
        return r;
    if (a.error < 0)
        return error_is_no_route(a.error) ? -ENETUNREACH : a.error;
    if (!type_delivers(a.type))
        return -ENETUNREACH;
    if (a.oif <= 0)
        return -EBADMSG;
    *ret_ifindex = a.oif;
    return 0;
}

int route_oif_for(int family, const void *addr, int *ret_ifindex) {
    _cleanup_(route_closep) struct route_sock *rs = NULL;

    int r = route_open(&rs);
    if (r < 0)
        return r;
    return route_get_oif(rs, family, addr, ret_ifindex);
}

/* ---- links ------------------------------------------------------------------- */

struct link_parse {
    int ifindex;
    char *name; /* IFNAMSIZ bytes */
};

static int parse_link_msg(const struct nlmsghdr *nlh, void *data) {
    struct link_parse *lp = data;
    const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
    int err = 0;
    bool found = false;

    if (ifi->ifi_index != lp->ifindex)
        return -EBADMSG;
    const char *pos = (const char *)ifi + MNL_ALIGN(sizeof(*ifi));
    const char *end = (const char *)nlh + nlh->nlmsg_len;
    for (const struct nlattr *at; (at = attr_next(&pos, end, &err));) {
        if (mnl_attr_get_type(at) != IFLA_IFNAME)
            continue;
        if (mnl_attr_validate(at, MNL_TYPE_NUL_STRING) < 0)
            return -EBADMSG;
        const char *s = mnl_attr_get_str(at);
        size_t n = strnlen(s, mnl_attr_get_payload_len(at));
        if (n == 0 || n > 15)
            return -EBADMSG;
        memcpy(lp->name, s, n);
        lp->name[n] = '\0';
        found = true;
    }
    if (err < 0)
        return err;
    return found ? 0 : -EBADMSG;
}

int route_link_name(struct route_sock *rs, int ifindex, char name[16]) {
    _Alignas(struct nlmsghdr) char req[ROUTE_REQ_SIZE] = {0};
    char got[16] = {0};
    struct link_parse lp = {.ifindex = ifindex, .name = got};
    int kerr = 0;

    if (!rs || !name || ifindex <= 0)
        return -EINVAL;
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(req);
    nlh->nlmsg_type = RTM_GETLINK;
    nlh->nlmsg_flags = NLM_F_REQUEST;
    struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
    ifi->ifi_family = AF_UNSPEC;
    ifi->ifi_index = ifindex;
#ifdef RTEXT_FILTER_SKIP_STATS
    mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
#endif

    int r = rs_transact(rs, nlh, RTM_NEWLINK, sizeof(struct ifinfomsg), parse_link_msg, &lp, &kerr);
    if (r < 0)
        return r;
    if (kerr < 0)
        return kerr;
    memcpy(name, got, sizeof(got));
    return 0;
}

/* ---- preflight --------------------------------------------------------------- */

enum verdict {
    V_VIA,       /* leaves through the VPN (every next hop) */
    V_ELSEWHERE, /* leaves through p->other */
    V_MIXED,     /* multipath, a next hop (p->other, 0 if unknown) elsewhere */
    V_NONE,      /* no usable route */
};

struct probe {
    const char *text; /* the address probed, as printed */
    enum verdict v;
    int other;        /* V_ELSEWHERE / V_MIXED */
    int kerr;         /* V_NONE: the kernel's error, 0 for an unusable route type */
    unsigned type;    /* V_NONE with kerr == 0 */
    bool truncated;   /* V_MIXED: too many next hops to check */
    char other_name[24];
};

/* Names in messages: kernel interface names may hold control characters. */
static void printable(char *s) {
    for (; *s; s++)
        if (*s < 0x21 || *s > 0x7e)
            *s = '?';
}

static void name_other(struct route_sock *rs, struct probe *p) {
    char n[16];
    if (p->other > 0 && route_link_name(rs, p->other, n) == 0) {
        printable(n);
        snprintf(p->other_name, sizeof(p->other_name), "%s", n);
    } else if (p->other > 0) {
        snprintf(p->other_name, sizeof(p->other_name), "ifindex %d", p->other);
    } else {
        snprintf(p->other_name, sizeof(p->other_name), "an unknown interface");
    }
}

static int probe(struct route_sock *rs, int family, const char *text, int ifindex,
                 struct probe *p) {
    unsigned char addr[sizeof(struct in6_addr)];
    struct route_answer a;

    memset(p, 0, sizeof(*p));
    p->text = text;
    if (inet_pton(family, text, addr) != 1)
        return -EINVAL;
    int r = route_lookup(rs, family, addr, false, &a);
    if (r < 0)
        return r;
    if (a.error < 0) {
        /* IPv6 compiled out or disabled at boot: the kernel has no IPv6
         * route handler at all. That is "no route" for IPv6's purposes. */
        bool v6_absent =
            family == AF_INET6 && (a.error == -EOPNOTSUPP || a.error == -EAFNOSUPPORT);
        if (!error_is_no_route(a.error) && !v6_absent)
            return a.error;
        p->v = V_NONE;
        p->kerr = a.error;
        return 0;
    }
    /* Kernels before 4.x answered an IPv6 lookup without a route with the
     * null entry (type RTN_UNREACHABLE, dev lo) instead of an error. */
    if (!type_delivers(a.type) || a.oif <= 0) {
        p->v = V_NONE;
        p->type = a.type;
        return 0;
    }
    if (a.oif != ifindex) {
        p->v = V_ELSEWHERE;
        p->other = a.oif;
        name_other(rs, p);
        return 0;
    }

    /* The resolved route picked the VPN, but for a multipath route that is
     * one hash bucket's choice; other destinations may take another next
     * hop. Ask for the table entry and require every live next hop. */
    struct route_answer f;
    r = route_lookup(rs, family, addr, true, &f);
    if (r < 0)
        return r;
    p->v = V_VIA;
    if (f.error < 0) /* kernel without RTM_F_FIB_MATCH: the resolved route is all we know */
        return 0;
    if (f.paths_truncated) {
        p->v = V_MIXED;
        p->truncated = true;
        return 0;
    }
    for (size_t k = 0; k < f.n_paths; k++)
        if (f.path_oif[k] != ifindex) {
            p->v = V_MIXED;
            p->other = f.path_oif[k];
            name_other(rs, p);
            break;
        }
    return 0;
}

static const char *none_kind(const struct probe *p) {
    if (p->kerr == -EINVAL || (p->kerr == 0 && p->type == RTN_BLACKHOLE))
        return "a blackhole route";
    if (p->kerr == -EACCES || (p->kerr == 0 && p->type == RTN_PROHIBIT))
        return "a prohibit route";
    if (p->kerr == -EHOSTUNREACH || (p->kerr == 0 && p->type == RTN_UNREACHABLE))
        return "an unreachable route";
    if (p->kerr == -EOPNOTSUPP || p->kerr == -EAFNOSUPPORT)
        return "not available (IPv6 is disabled)";
    return NULL; /* plain "no route" */
}

/* false when both probes leave through the VPN; otherwise true with one
 * sentence in out naming what the kernel would do instead. */
static bool describe(const struct probe p[2], int family, const char *ifname, char *out,
                     size_t outlen) {
    const char *fam = family == AF_INET ? "IPv4" : "IPv6";

    if (p[0].v == V_VIA && p[1].v == V_VIA)
        return false;
    /* Both halves go the same other way: that is the default route. */
    if (p[0].v == V_ELSEWHERE && p[1].v == V_ELSEWHERE && p[0].other == p[1].other) {
        snprintf(out, outlen, "default %s route uses %s, not %s", fam, p[0].other_name, ifname);
        return true;
    }
    if (p[0].v == V_NONE && p[1].v == V_NONE && !none_kind(&p[0]) && !none_kind(&p[1])) {
        if (family == AF_INET)
            snprintf(out, outlen, "no IPv4 route for %s (no default route)", p[0].text);
        else
            snprintf(out, outlen, "no IPv6 default route");
        return true;
    }

    const struct probe *bad = p[0].v != V_VIA ? &p[0] : &p[1];
    const struct probe *good = bad == &p[0] ? &p[1] : &p[0];
    const char *split = good->v == V_VIA ? " (split default incomplete)" : "";
    switch (bad->v) {
    case V_ELSEWHERE:
        snprintf(out, outlen, "%s route for %s uses %s, not %s%s", fam, bad->text,
                 bad->other_name, ifname, split);
        break;
    case V_MIXED:
        if (bad->truncated)
            snprintf(out, outlen, "%s route for %s is multipath with more than %d next hops",
                     fam, bad->text, ROUTE_MAX_PATHS);
        else
            snprintf(out, outlen, "%s route for %s is multipath and a next hop uses %s, not %s",
                     fam, bad->text, bad->other_name, ifname);
        break;
    case V_NONE:
        if (none_kind(bad))
            snprintf(out, outlen, "%s route for %s is %s", fam, bad->text, none_kind(bad));
        else
            snprintf(out, outlen, "no %s route for %s%s", fam, bad->text, split);
        break;
    case V_VIA:
        break; /* not reached: bad->v != V_VIA */
    }
    return true;
}

static bool ifname_ok(const char *s) {
    size_t n = s ? strnlen(s, 16) : 0;
    if (n == 0 || n > 15)
        return false;
    for (size_t k = 0; k < n; k++)
        if (s[k] < 0x21 || s[k] > 0x7e)
            return false;
    return true;
}

static int probe_pair(struct route_sock *rs, int family, const char *a0, const char *a1,
                      int ifindex, struct probe p[2], char *why, size_t whylen) {
    const char *texts[2] = {a0, a1};
    for (int k = 0; k < 2; k++) {
        int r = probe(rs, family, texts[k], ifindex, &p[k]);
        if (r < 0) {
            set_why(why, whylen, "%s route lookup for %s failed: %s",
                    family == AF_INET ? "IPv4" : "IPv6", texts[k], strerror(-r));
            return r;
        }
    }
    return 0;
}

int route_preflight_on(struct route_sock *rs, const char *ifname, int ifindex,
                       bool allow_non_default_route, struct route_preflight_result *ret,
                       char *why, size_t whylen) {
    struct route_preflight_result res = {0};
    struct probe p[2];
    char name[16];
    char desc[ROUTE_NOTE_MAX];
    int r;

    if (!rs || !ret || ifindex <= 0 || !ifname_ok(ifname)) {
        set_why(why, whylen, "route preflight needs an interface name and index");
        return -EINVAL;
    }

    /* The caller validated ifname and resolved ifindex earlier; make sure
     * they still designate the same interface. */
    r = route_link_name(rs, ifindex, name);
    if (r == -ENODEV) {
        set_why(why, whylen, "interface '%s' (index %d) no longer exists", ifname, ifindex);
        return r;
    }
    if (r < 0) {
        set_why(why, whylen, "cannot look up interface '%s' (index %d): %s", ifname, ifindex,
                strerror(-r));
        return r;
    }
    if (strcmp(name, ifname) != 0) {
        printable(name);
        set_why(why, whylen, "interface index %d is now '%s', not '%s'", ifindex, name, ifname);
        return -ENODEV;
    }

    if (allow_non_default_route) {
        snprintf(res.ipv4_note, sizeof(res.ipv4_note),
                 "IPv4 traffic not routed to %s will be refused, not steered", ifname);
    } else {
        r = probe_pair(rs, AF_INET, "0.0.0.1", "128.0.0.1", ifindex, p, why, whylen);
        if (r < 0)
            return r;
        if (describe(p, AF_INET, ifname, desc, sizeof(desc))) {
            set_why(why, whylen, "%s", desc);
            return -ENETUNREACH;
        }
        res.ipv4_checked = true;
    }

    r = probe_pair(rs, AF_INET6, "2000::", "8000::", ifindex, p, why, whylen);
    if (r < 0)
        return r;
    if (describe(p, AF_INET6, ifname, desc, sizeof(desc))) {
        res.ipv6_blocked = true;
        snprintf(res.ipv6_note, sizeof(res.ipv6_note), "IPv6 blocked for this session: %.*s",
                 (int)(sizeof(res.ipv6_note) - 40), desc);
    }

    *ret = res;
    return 0;
}

int route_preflight(const char *ifname, int ifindex, bool allow_non_default_route,
                    struct route_preflight_result *ret, char *why, size_t whylen) {
    _cleanup_(route_closep) struct route_sock *rs = NULL;

    int r = route_open(&rs);
    if (r < 0) {
        set_why(why, whylen, "cannot open an rtnetlink socket: %s", strerror(-r));
        return r;
    }
    return route_preflight_on(rs, ifname, ifindex, allow_non_default_route, ret, why, whylen);
}
