/* route (Darwin): the route preflight over the routing socket, "route -n get"
 * in-process. Owns one PF_ROUTE socket per question and closes it before
 * returning; never adds, changes or deletes a route, never logs.
 *
 * Darwin-only: it builds on macOS, and on Linux only in the syntax check
 * (-DLYH_DARWIN_STUBS). The messages themselves are built and parsed by
 * rtmsg.c, which the Linux unit tests exercise against the stub layouts.
 *
 * Why the same probes as Linux: 0.0.0.1 and 128.0.0.1 are covered by a
 * default route and by the 0/1 + 128/1 split VPN clients install, and by no
 * single host route; 2000:: and 8000:: likewise for IPv6. A reject or
 * blackhole route is no route. The answer only decides whether the launch
 * proceeds; PF (pf_render.c) is what keeps traffic on the VPN. */
#include "platform/route_preflight.h"

#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/macros.h"
#include "common/why.h"
#include "platform/darwin/darwin_sys.h"
#include "platform/darwin/posix.h"
#include "platform/darwin/rtmsg.h"

static int ask(int fd, int family, const void *addr, int seq, struct rtmsg_answer *ret) {
    uint8_t buf[RTMSG_BUF_MAX];
    size_t len;
    int r = rtmsg_build_get(family, addr, seq, buf, sizeof(buf), &len);
    if (r < 0)
        return r;
    ssize_t w;
    do
        w = write(fd, buf, len);
    while (w < 0 && errno == EINTR);
    if (w < 0) {
        /* The kernel refuses the request itself when there is no route. */
        if (errno == ESRCH || errno == ENETUNREACH)
            return -ENETUNREACH;
        return -errno;
    }

    pid_t pid = getpid();
    int64_t deadline = px_now_ms() + ROUTE_TIMEOUT_MS;
    for (;;) {
        int64_t left = deadline - px_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -ETIMEDOUT;
        ssize_t got = read(fd, buf, sizeof(buf));
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (got < 0)
            return -errno;
        r = rtmsg_parse_get(buf, (size_t)got, seq, pid, ret);
        if (r != -EAGAIN)
            return r; /* an answer, or a malformed message */
        /* someone else's route message: keep reading */
    }
}

static int open_route_socket(void) {
    int fd = socket(PF_ROUTE, SOCK_RAW, AF_UNSPEC);
    if (fd < 0)
        return -errno;
    int r = px_set_cloexec(fd);
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}

static int oif_on(int fd, int family, const void *addr, int seq, int *ret_ifindex) {
    struct rtmsg_answer a;
    int r = ask(fd, family, addr, seq, &a);
    if (r < 0)
        return r;
    if (a.error == -ESRCH || (a.error == 0 && (a.flags & (RTF_REJECT | RTF_BLACKHOLE))))
        return -ENETUNREACH;
    if (a.error < 0)
        return a.error;
    if (a.ifindex <= 0)
        return -ENETUNREACH;
    *ret_ifindex = a.ifindex;
    return 0;
}

int route_oif_for(int family, const void *addr, int *ret_ifindex) {
    _cleanup_close_ int fd = open_route_socket();
    if (fd < 0)
        return fd;
    return oif_on(fd, family, addr, 1, ret_ifindex);
}

/* Where the two probes of one family leave: 0 when both use ifindex, else
 * a sentence for the caller. */
static int probe_pair(int fd, int family, const char *a0, const char *a1, int ifindex,
                      const char *ifname, int *seq, char *desc, size_t desclen) {
    const char *probes[2] = {a0, a1};
    for (int i = 0; i < 2; i++) {
        unsigned char addr[16];
        if (inet_pton(family, probes[i], addr) != 1)
            return -EINVAL;
        int oif = 0;
        int r = oif_on(fd, family, addr, ++*seq, &oif);
        if (r == -ENETUNREACH) {
            snprintf(desc, desclen, "no %s route reaches %s (checked %s)",
                     family == AF_INET ? "IPv4" : "IPv6", ifname, probes[i]);
            return 1;
        }
        if (r < 0)
            return r;
        if (oif != ifindex) {
            char other[IF_NAMESIZE] = "?";
            if (!if_indextoname((unsigned)oif, other))
                snprintf(other, sizeof(other), "index %d", oif);
            snprintf(desc, desclen, "the %s route for %s uses %s, not %s",
                     family == AF_INET ? "IPv4" : "IPv6", probes[i], other, ifname);
            return 1;
        }
    }
    return 0;
}

int route_preflight(const char *ifname, int ifindex, bool allow_non_default_route,
                    struct route_preflight_result *ret, char *why, size_t whylen) {
    struct route_preflight_result res = {0};
    char name[IF_NAMESIZE], desc[ROUTE_NOTE_MAX];
    int seq = 0, r;

    if (!ret || !ifname || ifindex <= 0 || strlen(ifname) >= IF_NAMESIZE) {
        set_why(why, whylen, "route preflight needs an interface name and index");
        return -EINVAL;
    }
    /* Still the interface the caller validated? */
    if (!if_indextoname((unsigned)ifindex, name)) {
        set_why(why, whylen, "interface '%s' (index %d) no longer exists", ifname, ifindex);
        return -ENODEV;
    }
    if (strcmp(name, ifname) != 0) {
        set_why(why, whylen, "interface index %d is now another interface, not '%s'", ifindex,
                ifname);
        return -ENODEV;
    }

    _cleanup_close_ int fd = open_route_socket();
    if (fd < 0) {
        set_why(why, whylen, "cannot open the routing socket: %s", strerror(-fd));
        return fd;
    }
    if (allow_non_default_route) {
        snprintf(res.ipv4_note, sizeof(res.ipv4_note),
                 "IPv4 traffic not routed to %s will be refused, not steered", ifname);
    } else {
        r = probe_pair(fd, AF_INET, "0.0.0.1", "128.0.0.1", ifindex, ifname, &seq, desc,
                       sizeof(desc));
        if (r < 0) {
            set_why(why, whylen, "route lookup for %s failed: %s", ifname, strerror(-r));
            return r;
        }
        if (r > 0) {
            set_why(why, whylen, "%s", desc);
            return -ENETUNREACH;
        }
        res.ipv4_checked = true;
    }
    r = probe_pair(fd, AF_INET6, "2000::", "8000::", ifindex, ifname, &seq, desc, sizeof(desc));
    if (r < 0) {
        set_why(why, whylen, "IPv6 route lookup for %s failed: %s", ifname, strerror(-r));
        return r;
    }
    if (r > 0) {
        res.ipv6_blocked = true;
        snprintf(res.ipv6_note, sizeof(res.ipv6_note), "IPv6 blocked for this session: %.*s",
                 (int)(sizeof(res.ipv6_note) - 40), desc);
    }
    *ret = res;
    return 0;
}
