/* escape_probe: the attacker's side of tests/e2e/escape_suite.sh.
 *
 * One static binary with a subcommand per check. Run INSIDE the sandbox
 * (`lyh run -- ./escape_probe CHECK [ARGS] [+ CHECK [ARGS]]...`) it tries one
 * way out per line and prints exactly one verdict line per attempt:
 *
 *   OK name detail        the attempt was refused (or a positive control worked)
 *   ESCAPE name detail    the attempt got through: a sandbox failure
 *   FAIL name detail      a positive control did not work, or the attempt was
 *                         refused in a way that proves nothing (wrong errno)
 *   KNOWN name detail     got through, and the product documents that it does
 *   INFO name detail      an observation the suite reports, no verdict
 *
 * Exit status: 1 if any ESCAPE, else 2 if any FAIL, else 0. Several checks can
 * share one launch, separated by a lone "+".
 *
 * Every mode run inside lingers 100 ms before it exits (exit-now does not):
 * lyh (cli/client.c, cli/cmd_run.c) can hang when the daemon's Started and
 * Exited frames arrive in one read, which happens when the agent exits within
 * microseconds; escape_suite.sh checks that bug on its own with exit-now, and
 * the linger keeps it from making every other check flaky.
 *
 * The same binary also plays the parts that must live OUTSIDE the sandbox
 * (modes whose name starts with "x-"): an echo server, a DNS responder, a
 * unix socket listener and a pty "terminal" that drives the lyh CLI. They are
 * bounded: every server exits after its lifetime, every wait has a timeout.
 *
 * Nothing here changes the system when the sandbox holds: every write-like
 * attempt targets bait the suite created, and an attempt that unexpectedly
 * succeeds is undone at once (a created file removed, a renamed one put back,
 * a traced process detached) before it is reported.
 *
 * Checks (inside):
 *   write-ok DIR...            create/write/read/unlink a file in each DIR
 *                              (@VAR: the directory in $VAR)
 *   read-ok PATH...            read a file (or list a directory)
 *   tcp-ok|udp-ok ADDR PORT    echo round trip works
 *   tcp-deny|udp-deny ADDR PORT  no echo comes back
 *   proto-deny ADDR PORT PROTO   TCP-like stream socket of IP protocol PROTO
 *                              (e.g. 262 = MPTCP, 132 = SCTP) must not reach
 *   iface-select IFNAME ADDR PORT  SO_BINDTODEVICE, IP_UNICAST_IF, IP_PKTINFO
 *                              towards IFNAME must not reach ADDR
 *   ping-deny ADDR             ICMP echo through a ping socket must not come back
 *   dns-ok SERVER NAME IPV4    raw DNS A query over UDP to SERVER:53
 *   fs-deny LABEL PATH         read, write, truncate, create beside, rename away
 *   dir-deny LABEL DIR         list, create, mkdir
 *   exec-deny PATH             execve refused
 *   symlink-out TARGET         a link in cwd to TARGET does not open it
 *   dotdot-out TARGET          ../../TARGET, /proc/self/root, /proc/self/cwd
 *   hardlink-in TARGET         link(), O_PATH + linkat, O_PATH reopen
 *   read-file LABEL PATH       INFO: is PATH readable/writable
 *   proc-peek PID BAIT         /proc/PID/{root,cwd,exe,environ,mem,fd}
 *   sys-write                  writes under /sys and /proc/sys
 *   cgroup-move                leave the session cgroup
 *   socket-families            everything but unix/inet/inet6 stream+dgram
 *   bind-listen [allowed]      bind, listen, accept: EPERM, or (allowed: the
 *                              daemon reports "listeners") they work
 *   userns                     unshare, clone, clone3, setns
 *   mount                      mount, fsopen, open_tree, chroot, pivot_root
 *   ptrace PID                 ptrace, process_vm_readv/writev, pidfd_getfd
 *   signal PID                 kill() a process outside the sandbox
 *   kernel                     bpf, io_uring, keyrings, perf, userfaultfd,
 *                              file handles, personality
 *   foreign-abi                x32 and int 0x80 syscalls
 *   tiocsti                    TIOCSTI/TIOCLINUX on every terminal it holds
 *   pts-other                  open any pty that is not its own
 *   pts-steal SECONDS          read what is typed on ptys that are not its own
 *   pty-own                    its own terminal reopens, /dev/tty, new ptys work
 *   abstract-unix NAME         connect to @NAME (outside listener)
 *   unix-path PATH             connect to a pathname socket (outside listener)
 *   creds UID GID              ids, groups, caps, no_new_privs, seccomp
 *   setuid-exec PATH           exec a setuid-root copy of id(1): euid stays ours
 *   env SPEC...                NAME=VALUE, NAME~PREFIX must hold; !NAME unset;
 *                              ^PREFIX: no name starts with PREFIX
 *   fds                        nothing but 0, 1, 2 inherited
 *   winsize INIT NEW           RxC at start; NEW after SIGWINCH
 * Lifecycle helpers (inside, no verdicts): exit N, exit-now N, killself SIG, mark FILE,
 *   spawn-bg PIDFILE, hup-trap PIDFILE LOGFILE SECONDS, euid, sleep SECONDS
 * Outside: x-serve ADDR PORT SECONDS TAG (tcp+udp echo, answers "srv=TAG <line>"),
 *   x-dns ADDR PORT IPV4 SECONDS,
 *   x-unix PATH|@NAME SECONDS, x-pty [STEP...] -- CMD ARGS (see pty_term()).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif
#ifndef IP_UNICAST_IF
#define IP_UNICAST_IF 50
#endif
#ifndef SO_BINDTOIFINDEX
#define SO_BINDTOIFINDEX 62
#endif

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- verdicts ------------------------------------------------------------------ */

static int g_escape, g_fail;

__attribute__((format(printf, 3, 0))) static void vreport(const char *tag, const char *name,
                                                         const char *fmt, va_list ap) {
    char detail[1024];
    vsnprintf(detail, sizeof(detail), fmt, ap);
    /* One line per verdict, whatever the detail holds. */
    for (char *c = detail; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    printf("%s %s %s\n", tag, name, detail);
    fflush(stdout);
}

#define VERDICT(fn, tag, action)                                                   \
    __attribute__((format(printf, 2, 3))) static void fn(const char *name, const char *fmt, \
                                                         ...) {                    \
        va_list ap;                                                                \
        va_start(ap, fmt);                                                         \
        vreport(tag, name, fmt, ap);                                               \
        va_end(ap);                                                                \
        action;                                                                    \
    }
VERDICT(ok, "OK", (void)0)
VERDICT(escape, "ESCAPE", g_escape = 1)
VERDICT(fail, "FAIL", g_fail = 1)
VERDICT(known, "KNOWN", (void)0)
VERDICT(info, "INFO", (void)0)

static const char *en(int e) {
    const char *s = strerrorname_np(e);
    return s ? s : "E?";
}

/* A name made of parts: "fs:" LABEL ":read". Static buffers in rotation so
 * two can be alive in one call. */
__attribute__((format(printf, 1, 2))) static const char *nm(const char *fmt, ...) {
    static char bufs[4][256];
    static unsigned k;
    char *b = bufs[k++ % 4];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof(bufs[0]), fmt, ap);
    va_end(ap);
    return b;
}

/* rc < 0 means refused (any errno): OK; success: ESCAPE. */
static void want_refused(const char *name, long rc, int err, const char *what) {
    if (rc >= 0)
        escape(name, "%s succeeded", what);
    else
        ok(name, "%s refused: %s", what, en(err));
}

/* Refused with one of two errnos (the sandbox's own answer): OK; success:
 * ESCAPE; any other errno: FAIL (inconclusive: the attempt did not reach the
 * layer that is under test). */
static void want_errno(const char *name, long rc, int err, int want, int want2, const char *what) {
    if (rc >= 0)
        escape(name, "%s succeeded (returned %ld)", what, rc);
    else if (err == want || (want2 && err == want2))
        ok(name, "%s refused: %s", what, en(err));
    else
        fail(name, "%s failed with %s, expected %s: inconclusive", what, en(err), en(want));
}

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int parse_long(const char *s, long min, long max, long *ret) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || *end || end == s || v < min || v > max)
        return -1;
    *ret = v;
    return 0;
}

/* ---- addresses ---------------------------------------------------------------------- */

struct addr {
    struct sockaddr_storage ss;
    socklen_t len;
    int family;
};

static int parse_addr(const char *text, long port, struct addr *a) {
    char buf[INET6_ADDRSTRLEN + 2];
    memset(a, 0, sizeof(*a));
    snprintf(buf, sizeof(buf), "%s", text);
    if (buf[0] == '[') {
        memmove(buf, buf + 1, strlen(buf));
        char *e = strchr(buf, ']');
        if (e)
            *e = '\0';
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)&a->ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a->ss;
    if (inet_pton(AF_INET, buf, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        a->len = sizeof(*s4);
        a->family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, buf, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        a->len = sizeof(*s6);
        a->family = AF_INET6;
        return 0;
    }
    return -1;
}

static void addr_text(const struct sockaddr_storage *ss, char *out, size_t n) {
    char h[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *s = (const void *)ss;
        inet_ntop(AF_INET, &s->sin_addr, h, sizeof(h));
        port = ntohs(s->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const void *)ss;
        inet_ntop(AF_INET6, &s->sin6_addr, h, sizeof(h));
        port = ntohs(s->sin6_port);
    }
    snprintf(out, n, "%s:%u", h, port);
}

/* ---- network attempts ----------------------------------------------------------------- */

enum how { VIA_ROUTE, VIA_BINDTODEVICE, VIA_BINDTOIFINDEX, VIA_UNICAST_IF, VIA_PKTINFO };

struct attempt {
    int type;        /* SOCK_STREAM / SOCK_DGRAM */
    int protocol;    /* 0 or IPPROTO_* */
    enum how how;
    const char *ifname;
    int timeout_ms;
};

struct outcome {
    bool reached;    /* the echo came back */
    const char *stage;
    int err;
    long ms;
    char reply[64];  /* the echo's first bytes: "srv=TAG ..." from x-serve */
};

static int wait_fd(int fd, short ev, int timeout_ms) {
    struct pollfd p = {.fd = fd, .events = ev};
    long end = now_ms() + timeout_ms;
    for (;;) {
        long left = end - now_ms();
        if (left < 0)
            left = 0;
        int k = poll(&p, 1, (int)left);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k == 0 ? -ETIMEDOUT : -errno;
        return p.revents;
    }
}

/* Send `payload`, expect it echoed back. Never blocks longer than the timeout. */
static struct outcome try_net(const struct attempt *at, const struct addr *dst, const char *payload) {
    struct outcome o = {.stage = "socket"};
    long t0 = now_ms();
    int fd = socket(dst->family, at->type | SOCK_CLOEXEC | SOCK_NONBLOCK, at->protocol);
    char buf[512];

    if (fd < 0) {
        o.err = errno;
        goto out;
    }
    if (at->how != VIA_ROUTE) {
        unsigned idx = if_nametoindex(at->ifname);
        int r = -1;
        o.stage = "setsockopt";
        if (idx == 0) {
            o.err = errno;
            goto out;
        }
        switch (at->how) {
        case VIA_BINDTODEVICE:
            r = setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, at->ifname, (socklen_t)strlen(at->ifname));
            break;
        case VIA_BINDTOIFINDEX: {
            int i = (int)idx;
            r = setsockopt(fd, SOL_SOCKET, SO_BINDTOIFINDEX, &i, sizeof(i));
            break;
        }
        case VIA_UNICAST_IF:
            if (dst->family == AF_INET) {
                uint32_t i = htonl(idx); /* IP_UNICAST_IF takes network order */
                r = setsockopt(fd, IPPROTO_IP, IP_UNICAST_IF, &i, sizeof(i));
            } else {
                int i = (int)idx;
                r = setsockopt(fd, IPPROTO_IPV6, IPV6_UNICAST_IF, &i, sizeof(i));
            }
            break;
        case VIA_PKTINFO:
            r = 0; /* per packet, below */
            break;
        case VIA_ROUTE:
            break;
        }
        if (r < 0) {
            o.err = errno;
            goto out;
        }
    }
    o.stage = "connect";
    if (at->how == VIA_PKTINFO) {
        /* UDP only: the output interface rides in a control message. */
        union {
            char b[CMSG_SPACE(sizeof(struct in6_pktinfo))];
            struct cmsghdr align;
        } cb;
        memset(&cb, 0, sizeof(cb));
        struct iovec iov = {.iov_base = (void *)payload, .iov_len = strlen(payload)};
        struct msghdr mh = {.msg_name = (void *)&dst->ss, .msg_namelen = dst->len,
                            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cb.b};
        struct cmsghdr *c = (struct cmsghdr *)cb.b;
        unsigned idx = if_nametoindex(at->ifname);
        if (dst->family == AF_INET) {
            struct in_pktinfo pi = {.ipi_ifindex = (int)idx};
            c->cmsg_level = IPPROTO_IP;
            c->cmsg_type = IP_PKTINFO;
            c->cmsg_len = CMSG_LEN(sizeof(pi));
            memcpy(CMSG_DATA(c), &pi, sizeof(pi));
            mh.msg_controllen = CMSG_SPACE(sizeof(pi));
        } else {
            struct in6_pktinfo pi = {.ipi6_ifindex = idx};
            c->cmsg_level = IPPROTO_IPV6;
            c->cmsg_type = IPV6_PKTINFO;
            c->cmsg_len = CMSG_LEN(sizeof(pi));
            memcpy(CMSG_DATA(c), &pi, sizeof(pi));
            mh.msg_controllen = CMSG_SPACE(sizeof(pi));
        }
        o.stage = "sendmsg";
        if (sendmsg(fd, &mh, 0) < 0) {
            o.err = errno;
            goto out;
        }
    } else {
        if (connect(fd, (const struct sockaddr *)&dst->ss, dst->len) < 0 && errno != EINPROGRESS) {
            o.err = errno;
            goto out;
        }
        if (at->type == SOCK_STREAM) {
            int k = wait_fd(fd, POLLOUT, at->timeout_ms);
            int soerr = 0;
            socklen_t sl = sizeof(soerr);
            if (k < 0) {
                o.err = -k;
                goto out;
            }
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
            if (soerr) {
                o.err = soerr;
                goto out;
            }
        }
        o.stage = "send";
        if (send(fd, payload, strlen(payload), MSG_NOSIGNAL) < 0) {
            o.err = errno;
            goto out;
        }
    }
    o.stage = "reply";
    for (;;) {
        int k = wait_fd(fd, POLLIN, at->timeout_ms);
        if (k < 0) {
            o.err = -k;
            goto out;
        }
        ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
        if (n < 0) {
            o.err = errno;
            goto out;
        }
        if (n == 0) {
            o.err = ECONNRESET;
            goto out;
        }
        buf[n] = '\0';
        if (strstr(buf, "lyh-esc")) {
            o.reached = true;
            o.stage = "echoed";
            snprintf(o.reply, sizeof(o.reply), "%.*s", (int)strcspn(buf, " \n"), buf);
            goto out;
        }
    }
out:
    o.ms = now_ms() - t0;
    if (fd >= 0)
        close(fd);
    return o;
}

static void net_verdict(const char *name, const struct outcome *o, bool want_reach) {
    if (want_reach) {
        if (o->reached)
            ok(name, "echo (%s) came back in %ld ms", o->reply, o->ms);
        else
            fail(name, "no echo: %s: %s after %ld ms", o->stage, en(o->err), o->ms);
    } else {
        if (o->reached)
            escape(name, "echo (%s) came back in %ld ms: the destination was reached", o->reply,
                   o->ms);
        else
            ok(name, "not reached: %s: %s after %ld ms", o->stage, en(o->err), o->ms);
    }
}

static int get_port(const char *s, long *port) {
    if (parse_long(s, 1, 65535, port) < 0) {
        fprintf(stderr, "bad port '%s'\n", s);
        return -1;
    }
    return 0;
}

static int c_net(const char *what, char **argv, int type, bool want_reach) {
    struct addr a;
    long port;
    char payload[160];
    if (get_port(argv[1], &port) < 0 || parse_addr(argv[0], port, &a) < 0) {
        fail(nm("%s:%s", what, argv[0]), "bad address");
        return 0;
    }
    snprintf(payload, sizeof(payload), "lyh-esc %s %s:%ld\n", what, argv[0], port);
    struct attempt at = {.type = type, .how = VIA_ROUTE, .timeout_ms = want_reach ? 4000 : 2500};
    struct outcome o = try_net(&at, &a, payload);
    net_verdict(nm("%s:%s:%ld", what, argv[0], port), &o, want_reach);
    return 0;
}

static int c_tcp_ok(int argc, char **argv) { (void)argc; return c_net("tcp-ok", argv, SOCK_STREAM, true); }
static int c_udp_ok(int argc, char **argv) { (void)argc; return c_net("udp-ok", argv, SOCK_DGRAM, true); }
static int c_tcp_deny(int argc, char **argv) { (void)argc; return c_net("tcp-deny", argv, SOCK_STREAM, false); }
static int c_udp_deny(int argc, char **argv) { (void)argc; return c_net("udp-deny", argv, SOCK_DGRAM, false); }

static int c_proto_deny(int argc, char **argv) {
    struct addr a;
    long port, proto;
    char payload[160];
    (void)argc;
    if (get_port(argv[1], &port) < 0 || parse_addr(argv[0], port, &a) < 0 ||
        parse_long(argv[2], 0, 65535, &proto) < 0) {
        fail("proto-deny", "bad arguments");
        return 0;
    }
    const char *name = nm("proto-deny:%ld:%s:%ld", proto, argv[0], port);
    snprintf(payload, sizeof(payload), "lyh-esc proto-%ld %s:%ld\n", proto, argv[0], port);
    struct attempt at = {.type = SOCK_STREAM, .protocol = (int)proto, .timeout_ms = 2500};
    struct outcome o = try_net(&at, &a, payload);
    net_verdict(name, &o, false);
    return 0;
}

static int c_iface_select(int argc, char **argv) {
    static const struct {
        const char *label;
        enum how how;
        int type;
    } ways[] = {
        {"bindtodevice-tcp", VIA_BINDTODEVICE, SOCK_STREAM},
        {"bindtodevice-udp", VIA_BINDTODEVICE, SOCK_DGRAM},
        {"bindtoifindex-tcp", VIA_BINDTOIFINDEX, SOCK_STREAM},
        {"unicast-if-tcp", VIA_UNICAST_IF, SOCK_STREAM},
        {"unicast-if-udp", VIA_UNICAST_IF, SOCK_DGRAM},
        {"pktinfo-udp", VIA_PKTINFO, SOCK_DGRAM},
    };
    struct addr a;
    long port;
    (void)argc;
    if (get_port(argv[2], &port) < 0 || parse_addr(argv[1], port, &a) < 0) {
        fail("iface-select", "bad address");
        return 0;
    }
    for (size_t i = 0; i < ARRAY_SIZE(ways); i++) {
        char payload[160];
        snprintf(payload, sizeof(payload), "lyh-esc %s %s %s:%ld\n", ways[i].label, argv[0], argv[1],
                 port);
        struct attempt at = {.type = ways[i].type, .how = ways[i].how, .ifname = argv[0],
                             .timeout_ms = 2500};
        struct outcome o = try_net(&at, &a, payload);
        const char *name = nm("iface-select:%s:%s:%s", ways[i].label, argv[0], argv[1]);
        /* SO_BINDTODEVICE must be refused outright (CAP_NET_RAW), the others
         * need no capability and must be stopped by the guard. */
        if ((ways[i].how == VIA_BINDTODEVICE || ways[i].how == VIA_BINDTOIFINDEX) && !o.reached &&
            strcmp(o.stage, "setsockopt") == 0 && o.err != EPERM)
            fail(name, "setsockopt failed with %s, expected EPERM", en(o.err));
        else if (o.reached && strcmp(o.reply, "srv=lan") != 0)
            ok(name, "answered by %s, not by the LAN side: the option did not steer it", o.reply);
        else
            net_verdict(name, &o, false);
    }
    return 0;
}

static uint16_t icmp_sum(const void *data, size_t len) {
    const uint8_t *p = data;
    uint32_t s = 0;
    for (size_t i = 0; i + 1 < len; i += 2)
        s += (uint32_t)(p[i] << 8 | p[i + 1]);
    if (len & 1)
        s += (uint32_t)(p[len - 1] << 8);
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return htons((uint16_t)~s);
}

static int c_ping_deny(int argc, char **argv) {
    struct addr a;
    const char *name = nm("ping-deny:%s", argv[0]);
    (void)argc;
    if (parse_addr(argv[0], 0, &a) < 0 || a.family != AF_INET) {
        fail(name, "want an IPv4 address");
        return 0;
    }
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_ICMP);
    if (fd < 0) {
        ok(name, "ping socket refused: %s", en(errno));
        return 0;
    }
    struct icmphdr h = {.type = ICMP_ECHO};
    char pkt[sizeof(h) + 16];
    h.un.echo.sequence = htons(1);
    memcpy(pkt, &h, sizeof(h));
    memcpy(pkt + sizeof(h), "lyh-esc ping....", 16);
    ((struct icmphdr *)(void *)pkt)->checksum = icmp_sum(pkt, sizeof(pkt));
    if (sendto(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&a.ss, a.len) < 0) {
        ok(name, "echo request not sent: %s", en(errno));
        close(fd);
        return 0;
    }
    int k = wait_fd(fd, POLLIN, 2000);
    char buf[256];
    if (k > 0 && recv(fd, buf, sizeof(buf), 0) > 0)
        escape(name, "echo reply received from %s", argv[0]);
    else
        ok(name, "no echo reply (%s)", k < 0 ? en(-k) : "error");
    close(fd);
    return 0;
}

/* ---- DNS ------------------------------------------------------------------------------ */

static size_t dns_query(uint8_t *q, size_t cap, uint16_t id, const char *name) {
    size_t n = 0;
    uint8_t hdr[12] = {(uint8_t)(id >> 8), (uint8_t)id, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    memcpy(q, hdr, 12);
    n = 12;
    for (const char *l = name; *l;) {
        size_t len = strcspn(l, ".");
        if (len == 0 || len > 63 || n + len + 2 + 5 > cap)
            return 0;
        q[n++] = (uint8_t)len;
        memcpy(q + n, l, len);
        n += len;
        l += len;
        if (*l == '.')
            l++;
    }
    q[n++] = 0;
    q[n++] = 0, q[n++] = 1; /* A */
    q[n++] = 0, q[n++] = 1; /* IN */
    return n;
}

/* Skip a (possibly compressed) name; returns the offset after it or 0. */
static size_t dns_skip_name(const uint8_t *m, size_t len, size_t off) {
    for (int guard = 0; off < len && guard < 128; guard++) {
        uint8_t c = m[off];
        if (c == 0)
            return off + 1;
        if ((c & 0xc0) == 0xc0)
            return off + 2 <= len ? off + 2 : 0;
        off += 1u + c;
    }
    return 0;
}

static int c_dns_ok(int argc, char **argv) {
    struct addr srv;
    struct in_addr want;
    uint8_t q[512], r[1500];
    const char *name = nm("dns-ok:%s@%s", argv[1], argv[0]);
    (void)argc;
    if (parse_addr(argv[0], 53, &srv) < 0 || inet_pton(AF_INET, argv[2], &want) != 1) {
        fail(name, "bad arguments");
        return 0;
    }
    uint16_t id = (uint16_t)(getpid() ^ now_ms());
    size_t qn = dns_query(q, sizeof(q), id, argv[1]);
    int fd = socket(srv.family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (qn == 0 || fd < 0 || connect(fd, (struct sockaddr *)&srv.ss, srv.len) < 0 ||
        send(fd, q, qn, 0) < 0) {
        fail(name, "cannot send the query: %s", en(errno));
        if (fd >= 0)
            close(fd);
        return 0;
    }
    int k = wait_fd(fd, POLLIN, 3000);
    ssize_t n = k > 0 ? recv(fd, r, sizeof(r), 0) : -1;
    close(fd);
    if (n < 12) {
        fail(name, "no answer from %s:53 (%s)", argv[0], k < 0 ? en(-k) : en(errno));
        return 0;
    }
    if (((r[0] << 8) | r[1]) != id || (r[3] & 0x0f) != 0) {
        fail(name, "bad answer (id or rcode %d)", r[3] & 0x0f);
        return 0;
    }
    unsigned qd = (unsigned)(r[4] << 8 | r[5]), an = (unsigned)(r[6] << 8 | r[7]);
    size_t off = 12;
    for (unsigned i = 0; i < qd && off; i++) {
        off = dns_skip_name(r, (size_t)n, off);
        off = off ? off + 4 : 0;
    }
    for (unsigned i = 0; i < an && off && off < (size_t)n; i++) {
        off = dns_skip_name(r, (size_t)n, off);
        if (!off || off + 10 > (size_t)n)
            break;
        unsigned type = (unsigned)(r[off] << 8 | r[off + 1]);
        unsigned rdlen = (unsigned)(r[off + 8] << 8 | r[off + 9]);
        off += 10;
        if (off + rdlen > (size_t)n)
            break;
        if (type == 1 && rdlen == 4) {
            char got[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, r + off, got, sizeof(got));
            if (memcmp(r + off, &want, 4) == 0)
                ok(name, "resolved to %s over UDP via loopback", got);
            else
                fail(name, "resolved to %s, expected %s", got, argv[2]);
            return 0;
        }
        off += rdlen;
    }
    fail(name, "no A record in the answer");
    return 0;
}

/* ---- filesystem --------------------------------------------------------------------- */

static int c_write_ok(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        char path[PATH_MAX], back[16] = "";
        const char *name = nm("write-ok:%s", argv[i]);
        const char *dir = argv[i];
        if (dir[0] == '@') { /* @VAR: the directory named by $VAR */
            dir = getenv(dir + 1);
            if (!dir) {
                fail(name, "$%s is not set", argv[i] + 1);
                continue;
            }
        }
        snprintf(path, sizeof(path), "%s/.lyh-esc-write-%d", dir, (int)getpid());
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            fail(name, "create %s: %s", path, en(errno));
            continue;
        }
        bool w = write(fd, "probe", 5) == 5;
        close(fd);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        bool r = fd >= 0 && read(fd, back, sizeof(back) - 1) == 5 && memcmp(back, "probe", 5) == 0;
        if (fd >= 0)
            close(fd);
        bool u = unlink(path) == 0;
        if (w && r && u)
            ok(name, "created, wrote, read back and removed %s", path);
        else
            fail(name, "write %d read %d unlink %d (%s)", w, r, u, en(errno));
    }
    return 0;
}

static int c_read_ok(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        const char *name = nm("read-ok:%s", argv[i]);
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            if (d && readdir(d))
                ok(name, "listed the directory");
            else
                fail(name, "cannot list: %s", en(errno));
            if (d)
                closedir(d);
            continue;
        }
        char b[64];
        int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && read(fd, b, sizeof(b)) > 0)
            ok(name, "read the file");
        else
            fail(name, "cannot read: %s", en(errno));
        if (fd >= 0)
            close(fd);
    }
    return 0;
}

static void try_open(const char *name, const char *path, int flags) {
    int fd = open(path, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    int e = errno;
    if (fd >= 0) {
        char b[32];
        ssize_t n = (flags & O_ACCMODE) == O_WRONLY ? 0 : read(fd, b, sizeof(b));
        close(fd);
        escape(name, "open(%s, %s) succeeded%s", path,
               (flags & O_ACCMODE) == O_RDONLY ? "O_RDONLY" : (flags & O_ACCMODE) == O_WRONLY ? "O_WRONLY" : "O_RDWR",
               n > 0 ? " and data was read" : "");
        return;
    }
    ok(name, "open(%s) refused: %s", path, en(e));
}

static void dir_of(const char *path, char *out, size_t n) {
    snprintf(out, n, "%s", path);
    char *s = strrchr(out, '/');
    if (s && s != out)
        *s = '\0';
    else if (s)
        s[1] = '\0';
}

static int c_fs_deny(int argc, char **argv) {
    const char *label = argv[0], *path = argv[1];
    char dir[PATH_MAX], sib[PATH_MAX + 64], stolen[64];
    struct stat st;
    (void)argc;
    if (stat(path, &st) < 0) {
        fail(nm("fs:%s", label), "stat %s: %s (the bait must exist)", path, en(errno));
        return 0;
    }
    try_open(nm("fs:%s:read", label), path, O_RDONLY);
    try_open(nm("fs:%s:write", label), path, O_WRONLY);
    try_open(nm("fs:%s:rdwr", label), path, O_RDWR);
    /* Same size: no data changes even if it went through. */
    long r = truncate(path, st.st_size);
    want_refused(nm("fs:%s:truncate", label), r, errno, "truncate");
    dir_of(path, dir, sizeof(dir));
    snprintf(sib, sizeof(sib), "%s/lyh-esc-new-%d", dir, (int)getpid());
    int fd = open(sib, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
        close(fd);
        unlink(sib);
        escape(nm("fs:%s:create-beside", label), "created %s", sib);
    } else {
        ok(nm("fs:%s:create-beside", label), "create %s refused: %s", sib, en(errno));
    }
    snprintf(stolen, sizeof(stolen), "lyh-esc-stolen-%d", (int)getpid());
    if (rename(path, stolen) == 0) {
        int back = rename(stolen, path);
        escape(nm("fs:%s:rename-out", label), "moved %s into cwd (put back: %s)", path,
               back == 0 ? "yes" : en(errno));
    } else {
        ok(nm("fs:%s:rename-out", label), "rename into cwd refused: %s", en(errno));
    }
    DIR *d = opendir(dir);
    if (d) {
        closedir(d);
        escape(nm("fs:%s:list-dir", label), "listed %s", dir);
    } else {
        ok(nm("fs:%s:list-dir", label), "opendir(%s) refused: %s", dir, en(errno));
    }
    /* Landlock has no right for metadata: the kernel's own checks decide. */
    if (chmod(path, st.st_mode & 07777) == 0)
        known(nm("fs:%s:chmod", label),
              "chmod on %s allowed (Landlock does not cover chmod/chown/utimes; DAC decides)", path);
    else
        info(nm("fs:%s:chmod", label), "chmod refused: %s", en(errno));
    return 0;
}

static int c_dir_deny(int argc, char **argv) {
    const char *label = argv[0], *dir = argv[1];
    char p[PATH_MAX];
    (void)argc;
    DIR *d = opendir(dir);
    if (d) {
        int n = 0;
        while (readdir(d))
            n++;
        closedir(d);
        escape(nm("dir:%s:list", label), "listed %s (%d entries)", dir, n);
    } else {
        ok(nm("dir:%s:list", label), "opendir(%s) refused: %s", dir, en(errno));
    }
    snprintf(p, sizeof(p), "%s/lyh-esc-new-%d", dir, (int)getpid());
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
        close(fd);
        unlink(p);
        escape(nm("dir:%s:create", label), "created %s", p);
    } else {
        ok(nm("dir:%s:create", label), "create refused: %s", en(errno));
    }
    if (mkdir(p, 0700) == 0) {
        rmdir(p);
        escape(nm("dir:%s:mkdir", label), "made %s", p);
    } else {
        ok(nm("dir:%s:mkdir", label), "mkdir refused: %s", en(errno));
    }
    return 0;
}

static int c_exec_deny(int argc, char **argv) {
    const char *name = nm("exec-deny:%s", argv[0]);
    (void)argc;
    pid_t pid = fork();
    if (pid == 0) {
        char *args[] = {argv[0], "euid", NULL};
        execv(argv[0], args);
        _exit(errno == EACCES ? 100 : errno == EPERM ? 101 : 102);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st) && (WEXITSTATUS(st) == 100 || WEXITSTATUS(st) == 101))
        ok(name, "execve refused: %s", WEXITSTATUS(st) == 100 ? "EACCES" : "EPERM");
    else if (WIFEXITED(st) && WEXITSTATUS(st) == 102)
        fail(name, "execve failed for another reason (inconclusive)");
    else
        escape(name, "execve of %s succeeded (status 0x%x)", argv[0], st);
    return 0;
}

static int c_symlink_out(int argc, char **argv) {
    char link[64];
    (void)argc;
    snprintf(link, sizeof(link), "lyh-esc-sym-%d", (int)getpid());
    if (symlink(argv[0], link) < 0) {
        ok("symlink-out:make", "symlink in cwd refused: %s (nothing to follow)", en(errno));
        return 0;
    }
    try_open("symlink-out:read", link, O_RDONLY);
    try_open("symlink-out:write", link, O_WRONLY);
    unlink(link);
    return 0;
}

static int c_dotdot_out(int argc, char **argv) {
    char cwd[PATH_MAX], rel[PATH_MAX * 2] = "", p[PATH_MAX * 2];
    (void)argc;
    if (!getcwd(cwd, sizeof(cwd)) || argv[0][0] != '/') {
        fail("dotdot-out", "need a cwd and an absolute target");
        return 0;
    }
    int depth = 0;
    for (char *c = cwd; *c; c++)
        depth += *c == '/';
    for (int i = 0; i < depth + 2; i++)
        strcat(rel, "../");
    strcat(rel, argv[0] + 1);
    try_open("dotdot-out:read", rel, O_RDONLY);
    try_open("dotdot-out:write", rel, O_WRONLY);
    snprintf(p, sizeof(p), "/proc/self/root%s", argv[0]);
    try_open("dotdot-out:proc-self-root", p, O_RDONLY);
    snprintf(p, sizeof(p), "/proc/self/cwd/%s", rel);
    try_open("dotdot-out:proc-self-cwd", p, O_RDONLY);
    int dfd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    int fd = dfd >= 0 ? openat(dfd, rel, O_RDONLY | O_CLOEXEC) : -1;
    want_refused("dotdot-out:openat", fd, errno, "openat(cwd, ../..)");
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    return 0;
}

static int c_hardlink_in(int argc, char **argv) {
    char l1[64], l2[64], pp[64];
    (void)argc;
    snprintf(l1, sizeof(l1), "lyh-esc-hl-%d", (int)getpid());
    snprintf(l2, sizeof(l2), "lyh-esc-hl2-%d", (int)getpid());
    if (link(argv[0], l1) == 0) {
        unlink(l1);
        escape("hardlink-in:link", "link(%s, cwd) succeeded", argv[0]);
    } else {
        ok("hardlink-in:link", "link() refused: %s", en(errno));
    }
    int fd = open(argv[0], O_PATH | O_CLOEXEC);
    if (fd < 0) {
        info("hardlink-in:opath", "O_PATH open refused: %s", en(errno));
        return 0;
    }
    info("hardlink-in:opath", "O_PATH open of %s allowed (gives no read/write right)", argv[0]);
    snprintf(pp, sizeof(pp), "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, pp, AT_FDCWD, l2, AT_SYMLINK_FOLLOW) == 0) {
        unlink(l2);
        escape("hardlink-in:opath-linkat", "linkat(/proc/self/fd) into cwd succeeded");
    } else {
        ok("hardlink-in:opath-linkat", "linkat via /proc/self/fd refused: %s", en(errno));
    }
    if (linkat(fd, "", AT_FDCWD, l2, AT_EMPTY_PATH) == 0) {
        unlink(l2);
        escape("hardlink-in:empty-path", "linkat(AT_EMPTY_PATH) into cwd succeeded");
    } else {
        ok("hardlink-in:empty-path", "linkat(AT_EMPTY_PATH) refused: %s", en(errno));
    }
    try_open("hardlink-in:opath-reopen", pp, O_RDONLY);
    close(fd);
    return 0;
}

static int c_read_file(int argc, char **argv) {
    (void)argc;
    char b[128];
    int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    int re = errno;
    ssize_t n = fd >= 0 ? read(fd, b, sizeof(b) - 1) : -1;
    if (fd >= 0)
        close(fd);
    fd = open(argv[1], O_WRONLY | O_CLOEXEC);
    int we = errno;
    if (fd >= 0)
        close(fd);
    if (n >= 0) {
        b[n] = '\0';
        b[strcspn(b, "\n")] = '\0';
    }
    info(nm("read-file:%s", argv[0]), "read: %s%s%s%s; open for write: %s", n >= 0 ? "yes" : en(re),
         n >= 0 ? " ('" : "", n >= 0 ? b : "", n >= 0 ? "')" : "", fd >= 0 ? "yes" : en(we));
    printf("READABLE %s %s\n", argv[0], n >= 0 ? "yes" : "no");
    printf("WRITABLE %s %s\n", argv[0], fd >= 0 ? "yes" : "no");
    return 0;
}

static int c_proc_peek(int argc, char **argv) {
    const char *pid = argv[0], *bait = argv[1];
    char p[PATH_MAX], t[PATH_MAX];
    (void)argc;
    snprintf(p, sizeof(p), "/proc/%s/root", pid);
    DIR *d = opendir(p);
    if (d) {
        closedir(d);
        escape(nm("proc:%s:root-list", pid), "listed %s", p);
    } else {
        ok(nm("proc:%s:root-list", pid), "opendir(%s) refused: %s", p, en(errno));
    }
    snprintf(p, sizeof(p), "/proc/%s/root%s", pid, bait);
    try_open(nm("proc:%s:root-bait", pid), p, O_RDONLY);
    static const char *const links[] = {"cwd", "exe", "root"};
    for (size_t i = 0; i < ARRAY_SIZE(links); i++) {
        snprintf(p, sizeof(p), "/proc/%s/%s", pid, links[i]);
        ssize_t n = readlink(p, t, sizeof(t) - 1);
        if (n >= 0) {
            t[n] = '\0';
            escape(nm("proc:%s:readlink-%s", pid, links[i]), "readlink gave '%s'", t);
        } else {
            ok(nm("proc:%s:readlink-%s", pid, links[i]), "readlink refused: %s", en(errno));
        }
    }
    static const char *const files[] = {"environ", "mem", "maps", "auxv"};
    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
        snprintf(p, sizeof(p), "/proc/%s/%s", pid, files[i]);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        char b[64];
        ssize_t n = fd >= 0 ? read(fd, b, sizeof(b)) : -1;
        if (fd >= 0)
            close(fd);
        if (n > 0)
            escape(nm("proc:%s:%s", pid, files[i]), "read %zd bytes of %s", n, p);
        else
            ok(nm("proc:%s:%s", pid, files[i]), "%s refused: %s", p, en(errno));
    }
    /* Listing /proc/PID/fd only needs DAC (same uid) and shows fd numbers;
     * following an entry is what ptrace_may_access() (and Landlock) gate. */
    snprintf(p, sizeof(p), "/proc/%s/fd", pid);
    d = opendir(p);
    if (d) {
        int n = 0, followed = 0;
        char first[PATH_MAX + 320] = "";
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            n++;
            char fp[PATH_MAX + 300];
            snprintf(fp, sizeof(fp), "%s/%s", p, e->d_name);
            ssize_t k = readlink(fp, t, sizeof(t) - 1);
            int fd = open(fp, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
            if (k >= 0 || fd >= 0) {
                if (!followed) {
                    t[k > 0 ? k : 0] = '\0';
                    snprintf(first, sizeof(first), "%s -> '%s'%s", e->d_name, t,
                             fd >= 0 ? " (opened)" : "");
                }
                followed++;
            }
            if (fd >= 0)
                close(fd);
        }
        closedir(d);
        info(nm("proc:%s:fd-list", pid), "%d fd numbers listable (DAC, same uid)", n);
        if (followed)
            escape(nm("proc:%s:fd-follow", pid), "followed %d of its fds, e.g. %s", followed, first);
        else
            ok(nm("proc:%s:fd-follow", pid), "none of %d fds could be followed", n);
    } else {
        ok(nm("proc:%s:fd-follow", pid), "opendir(%s) refused: %s", p, en(errno));
    }
    return 0;
}

static int c_sys_write(int argc, char **argv) {
    static const char *const paths[] = {
        "/sys/class/net/lo/mtu", "/sys/kernel/mm/transparent_hugepage/enabled",
        "/sys/kernel/mm/ksm/run", "/proc/sys/net/ipv4/ip_forward", "/proc/sys/kernel/hostname",
        "/proc/self/oom_score_adj", "/proc/self/attr/current", "/proc/sysrq-trigger",
    };
    (void)argc, (void)argv;
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
        if (access(paths[i], F_OK) < 0 && errno == ENOENT)
            continue;
        try_open(nm("sys-write:%s", paths[i]), paths[i], O_WRONLY);
    }
    DIR *d = opendir("/sys/class/net");
    info("sys-read:/sys/class/net", "%s", d ? "listable" : en(errno));
    if (d)
        closedir(d);
    return 0;
}

static int cgroup2_mount(char *out, size_t n) {
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char line[4096];
    int r = -1;
    while (f && fgets(line, sizeof(line), f)) {
        char *sep = strstr(line, " - ");
        char mnt[PATH_MAX];
        if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0)
            continue;
        if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1) {
            snprintf(out, n, "%s", mnt);
            r = 0;
            break;
        }
    }
    if (f)
        fclose(f);
    return r;
}

static int c_cgroup_move(int argc, char **argv) {
    char mnt[PATH_MAX], own[PATH_MAX] = "", p[PATH_MAX * 2 + 32], line[PATH_MAX];
    (void)argc, (void)argv;
    FILE *f = fopen("/proc/self/cgroup", "re");
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(own, sizeof(own), "%s", line + 3);
        }
    if (f)
        fclose(f);
    if (!own[0] || cgroup2_mount(mnt, sizeof(mnt)) < 0) {
        fail("cgroup-move", "cannot tell my cgroup (%s) or the cgroup2 mount", own);
        return 0;
    }
    info("cgroup-move:where", "in %s under %s", own, mnt);
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%s", own);
    char *s = strrchr(parent, '/');
    if (s)
        *s = '\0';
    const char *targets[] = {parent, ""};
    for (size_t i = 0; i < ARRAY_SIZE(targets); i++) {
        snprintf(p, sizeof(p), "%s%s/cgroup.procs", mnt, targets[i]);
        int fd = open(p, O_WRONLY | O_CLOEXEC);
        if (fd < 0) {
            ok(nm("cgroup-move:%s", i ? "root" : "parent"), "open(%s) refused: %s", p, en(errno));
            continue;
        }
        char b[32];
        int n = snprintf(b, sizeof(b), "%d\n", (int)getpid());
        if (write(fd, b, (size_t)n) == n)
            escape(nm("cgroup-move:%s", i ? "root" : "parent"), "moved myself to %s", p);
        else
            ok(nm("cgroup-move:%s", i ? "root" : "parent"), "opened %s but the move was refused: %s",
               p, en(errno));
        close(fd);
    }
    snprintf(p, sizeof(p), "%s%s/lyh-esc", mnt, own);
    if (mkdir(p, 0755) == 0) {
        rmdir(p);
        escape("cgroup-move:mkdir", "made %s", p);
    } else {
        ok("cgroup-move:mkdir", "mkdir in my cgroup refused: %s", en(errno));
    }
    return 0;
}

/* ---- sockets -------------------------------------------------------------------------- */

static void sock_try(const char *name, long domain, long type, long proto) {
    long fd = syscall(SYS_socket, domain, type, proto);
    int e = errno;
    if (fd >= 0)
        close((int)fd);
    want_errno(name, fd, e, EPERM, 0, nm("socket(%#lx, %#lx, %ld)", domain, type, proto));
}

static int c_socket_families(int argc, char **argv) {
    (void)argc, (void)argv;
    sock_try("socket:raw4", AF_INET, SOCK_RAW, IPPROTO_ICMP);
    sock_try("socket:raw4-tcp", AF_INET, SOCK_RAW, IPPROTO_TCP);
    sock_try("socket:raw6", AF_INET6, SOCK_RAW, IPPROTO_ICMPV6);
    sock_try("socket:inet-sock-packet", AF_INET, SOCK_PACKET, 0);
    sock_try("socket:inet-seqpacket-sctp", AF_INET, SOCK_SEQPACKET, IPPROTO_SCTP);
    sock_try("socket:inet-rdm", AF_INET, SOCK_RDM, 0);
    sock_try("socket:inet-dccp", AF_INET, SOCK_DCCP, 0);
    /* IP protocols nftables' socket lookup does not know: chain input could
     * not keep the LAN from them */
    sock_try("socket:inet-stream-sctp", AF_INET, SOCK_STREAM, IPPROTO_SCTP);
    sock_try("socket:inet6-stream-sctp", AF_INET6, SOCK_STREAM, IPPROTO_SCTP);
    sock_try("socket:inet-dgram-udplite", AF_INET, SOCK_DGRAM, 136 /* IPPROTO_UDPLITE */);
    sock_try("socket:inet6-dgram-udplite", AF_INET6, SOCK_DGRAM, 136);
    sock_try("socket:inet-proto-highbits", AF_INET, SOCK_DGRAM, (1L << 32) | 136);
    sock_try("socket:packet-raw", AF_PACKET, SOCK_RAW, htons(0x0003));
    sock_try("socket:packet-dgram", AF_PACKET, SOCK_DGRAM, htons(0x0800));
    sock_try("socket:netlink-route", AF_NETLINK, SOCK_RAW, 0 /* NETLINK_ROUTE */);
    sock_try("socket:netlink-netfilter", AF_NETLINK, SOCK_RAW, 12 /* NETLINK_NETFILTER */);
    sock_try("socket:netlink-dgram", AF_NETLINK, SOCK_DGRAM, 0);
    /* High halves: the kernel truncates int arguments. */
    sock_try("socket:packet-highbits", (1L << 32) | AF_PACKET, SOCK_RAW, 0);
    sock_try("socket:raw-type-highbits", AF_INET, (1L << 32) | SOCK_RAW, IPPROTO_ICMP);
    sock_try("socket:inet-highbits-raw", (1L << 32) | AF_INET, SOCK_RAW, IPPROTO_ICMP);
    int bad = 0, n = 0;
    char which[512] = "", opened[512] = "";
    for (long fam = 0; fam < 64; fam++) {
        if (fam == AF_UNIX || fam == AF_INET || fam == AF_INET6)
            continue;
        for (long type = 1; type <= 5; type++) {
            long fd = syscall(SYS_socket, fam, type, 0);
            int e = errno;
            n++;
            char *list = fd >= 0 ? opened : which;
            if (fd >= 0) {
                close((int)fd);
                bad++;
            }
            if ((fd >= 0 || e != EPERM) && strlen(list) < sizeof(which) - 32)
                snprintf(list + strlen(list), sizeof(which) - strlen(list), " %ld/%ld%s%s", fam,
                         type, fd >= 0 ? "" : ":", fd >= 0 ? "" : en(e));
        }
    }
    if (bad)
        escape("socket:other-families", "%d family/type pairs opened:%s", bad, opened);
    else if (which[0])
        fail("socket:other-families", "not EPERM:%s", which);
    else
        ok("socket:other-families", "all %d family/type pairs refused with EPERM", n);
    int sv[2];
    long r = syscall(SYS_socketpair, AF_INET, SOCK_STREAM, 0, sv);
    int e = errno;
    if (r == 0)
        close(sv[0]), close(sv[1]);
    want_errno("socket:socketpair-inet", r, e, EPERM, 0, "socketpair(AF_INET)");
    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (u >= 0) {
        ok("socket:unix-allowed", "AF_UNIX stream socket works (as intended)");
        close(u);
    } else {
        fail("socket:unix-allowed", "AF_UNIX refused: %s", en(errno));
    }
    return 0;
}

/* Servers denied (EPERM), or allowed: then each call must work (what keeps
 * the network from the listener is the firewall's chain input, tested from
 * outside by the suite). */
static void want_server(bool allowed, const char *name, long rc, int err, const char *what) {
    if (!allowed)
        want_errno(name, rc, err, EPERM, 0, what);
    else if (rc >= 0 || (strncmp(name, "accept", 6) == 0 && err == EAGAIN))
        ok(name, "%s works (listeners allowed)", what);
    else
        fail(name, "%s: %s (listeners should be allowed)", what, en(err));
}

static int c_bind_listen(int argc, char **argv) {
    bool allowed = argc > 0 && strcmp(argv[0], "allowed") == 0;
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in any4 = {.sin_family = AF_INET};
    struct sockaddr_in6 any6 = {.sin6_family = AF_INET6};
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    struct {
        const char *name;
        int fam, type;
        const void *sa;
        socklen_t len;
    } cases[] = {
        {"bind:tcp-127.0.0.1", AF_INET, SOCK_STREAM, &a4, sizeof(a4)},
        {"bind:tcp-0.0.0.0", AF_INET, SOCK_STREAM, &any4, sizeof(any4)},
        {"bind:udp-0.0.0.0", AF_INET, SOCK_DGRAM, &any4, sizeof(any4)},
        {"bind:tcp6-[::]", AF_INET6, SOCK_STREAM, &any6, sizeof(any6)},
        {"bind:udp6-[::]", AF_INET6, SOCK_DGRAM, &any6, sizeof(any6)},
        {"bind:unix-abstract", AF_UNIX, SOCK_STREAM, &un, 0},
        {"bind:unix-path", AF_UNIX, SOCK_STREAM, &un, 0},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct sockaddr_un u = un;
        socklen_t len = cases[i].len;
        const void *sa = cases[i].sa;
        if (strcmp(cases[i].name, "bind:unix-abstract") == 0) {
            int n = snprintf(u.sun_path + 1, sizeof(u.sun_path) - 1, "lyh-esc-%d", (int)getpid());
            len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
            sa = &u;
        } else if (strcmp(cases[i].name, "bind:unix-path") == 0) {
            snprintf(u.sun_path, sizeof(u.sun_path), "lyh-esc-sock-%d", (int)getpid());
            len = sizeof(u);
            sa = &u;
        }
        int fd = socket(cases[i].fam, cases[i].type | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            fail(cases[i].name, "socket: %s", en(errno));
            continue;
        }
        long r = bind(fd, sa, len);
        want_server(allowed, cases[i].name, r, errno, "bind");
        if (r == 0 && strcmp(cases[i].name, "bind:unix-path") == 0)
            unlink(u.sun_path);
        close(fd);
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    long r = listen(fd, 1); /* would autobind to an ephemeral port */
    want_server(allowed, "listen:tcp-autobind", r, errno, "listen");
    r = accept(fd, NULL, NULL);
    want_server(allowed, "accept:tcp", r, errno, "accept");
    r = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
    want_server(allowed, "accept4:tcp", r, errno, "accept4");
    close(fd);
    fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    r = listen(fd, 1);
    want_server(allowed, "listen:tcp6-autobind", r, errno, "listen");
    close(fd);
    return 0;
}

static int c_abstract_unix(int argc, char **argv) {
    struct sockaddr_un u = {.sun_family = AF_UNIX};
    (void)argc;
    int n = snprintf(u.sun_path + 1, sizeof(u.sun_path) - 1, "%s", argv[0]);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    long r = connect(fd, (struct sockaddr *)&u, len);
    int e = errno;
    close(fd);
    want_errno(nm("abstract-unix:@%s", argv[0]), r, e, EPERM, 0, "connect to an outside abstract socket");
    return 0;
}

static int c_unix_path(int argc, char **argv) {
    struct sockaddr_un u = {.sun_family = AF_UNIX};
    (void)argc;
    snprintf(u.sun_path, sizeof(u.sun_path), "%s", argv[0]);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    long r = connect(fd, (struct sockaddr *)&u, sizeof(u));
    int e = errno;
    char b[64] = "";
    if (r == 0 && wait_fd(fd, POLLIN, 2000) > 0) {
        ssize_t n = read(fd, b, sizeof(b) - 1);
        b[n > 0 ? n : 0] = '\0';
        b[strcspn(b, "\n")] = '\0';
    }
    close(fd);
    if (r == 0)
        known(nm("unix-path:%s", argv[0]),
              "connected to a pathname socket outside the sandbox (server said '%s'); "
              "documented in platform/linux/landlock.c: Landlock ABI <= 7 does not cover "
              "connect() to pathname unix sockets",
              b);
    else
        ok(nm("unix-path:%s", argv[0]), "connect refused: %s", en(e));
    return 0;
}

/* ---- privilege and kernel ----------------------------------------------------------- */

/* Run fn in a child so a "successful" escape cannot change the probe itself.
 * The child's exit code: 0 refused-as-expected..., see callers. */
static int in_child(int (*fn)(void), int *ret_err) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        int e = 0;
        int r = fn();
        e = errno;
        int msg[2] = {r, e};
        (void)!write(p[1], msg, sizeof(msg));
        _exit(0);
    }
    close(p[1]);
    int msg[2] = {-1, EIO};
    ssize_t n = read(p[0], msg, sizeof(msg));
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    if (n != sizeof(msg)) {
        *ret_err = EIO;
        return -2;
    }
    *ret_err = msg[1];
    return msg[0];
}

static int do_unshare_user(void) { return unshare(CLONE_NEWUSER); }
static int do_unshare_net(void) { return unshare(CLONE_NEWNET); }
static int do_unshare_ns(void) { return unshare(CLONE_NEWNS); }
static int do_setns(void) {
    int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    return setns(fd, CLONE_NEWNET);
}
static int do_clone_user(void) {
    long r = syscall(SYS_clone, (long)(CLONE_NEWUSER | SIGCHLD), 0L, 0L, 0L, 0L);
    if (r == 0)
        _exit(0);
    if (r > 0)
        waitpid((pid_t)r, NULL, 0);
    return r > 0 ? 1 : -1;
}
static int do_clone_net(void) {
    long r = syscall(SYS_clone, (long)(CLONE_NEWNET | SIGCHLD), 0L, 0L, 0L, 0L);
    if (r == 0)
        _exit(0);
    if (r > 0)
        waitpid((pid_t)r, NULL, 0);
    return r > 0 ? 1 : -1;
}
static int do_clone3_user(void) {
    struct clone_args ca;
    memset(&ca, 0, sizeof(ca));
    ca.flags = CLONE_NEWUSER;
    ca.exit_signal = SIGCHLD;
    long r = syscall(SYS_clone3, &ca, sizeof(ca));
    if (r == 0)
        _exit(0);
    if (r > 0)
        waitpid((pid_t)r, NULL, 0);
    return r > 0 ? 1 : -1;
}

static int c_userns(int argc, char **argv) {
    static const struct {
        const char *name;
        int (*fn)(void);
        int want, want2;
    } cases[] = {
        {"userns:unshare-user", do_unshare_user, EPERM, 0},
        {"userns:unshare-net", do_unshare_net, EPERM, 0},
        {"userns:unshare-mnt", do_unshare_ns, EPERM, 0},
        {"userns:setns", do_setns, EPERM, 0},
        {"userns:clone-newuser", do_clone_user, EPERM, 0},
        {"userns:clone-newnet", do_clone_net, EPERM, 0},
        /* seccomp answers clone3 with ENOSYS on purpose (see seccomp.c). */
        {"userns:clone3-newuser", do_clone3_user, ENOSYS, EPERM},
    };
    (void)argc, (void)argv;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        int e = 0;
        int r = in_child(cases[i].fn, &e);
        want_errno(cases[i].name, r, e, cases[i].want, cases[i].want2, cases[i].name + 7);
    }
    return 0;
}

static int do_mount_tmpfs(void) {
    char d[64];
    snprintf(d, sizeof(d), "lyh-esc-mnt-%d", (int)getpid());
    if (mkdir(d, 0700) < 0)
        return -1;
    int r = mount("none", d, "tmpfs", 0, "size=1m");
    int e = errno;
    if (r == 0)
        umount2(d, MNT_DETACH);
    rmdir(d);
    errno = e;
    return r;
}
static int do_fsopen(void) {
    long fd = syscall(SYS_fsopen, "tmpfs", 0);
    if (fd >= 0)
        close((int)fd);
    return (int)fd;
}
static int do_open_tree(void) {
    long fd = syscall(SYS_open_tree, AT_FDCWD, ".", OPEN_TREE_CLONE | O_CLOEXEC);
    if (fd >= 0)
        close((int)fd);
    return (int)fd;
}
static int do_chroot(void) { return chroot("."); }
static int do_pivot_root(void) { return (int)syscall(SYS_pivot_root, ".", "."); }
static int do_umount(void) { return umount2("/tmp", MNT_DETACH); }

static int c_mount(int argc, char **argv) {
    static const struct {
        const char *name;
        int (*fn)(void);
    } cases[] = {
        {"mount:tmpfs", do_mount_tmpfs}, {"mount:fsopen", do_fsopen},
        {"mount:open_tree", do_open_tree}, {"mount:chroot", do_chroot},
        {"mount:pivot_root", do_pivot_root}, {"mount:umount", do_umount},
    };
    (void)argc, (void)argv;
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        int e = 0;
        int r = in_child(cases[i].fn, &e);
        want_errno(cases[i].name, r, e, EPERM, 0, cases[i].name + 6);
    }
    return 0;
}

static int c_ptrace(int argc, char **argv) {
    long pid;
    (void)argc;
    if (parse_long(argv[0], 1, INT_MAX, &pid) < 0) {
        fail("ptrace", "bad pid");
        return 0;
    }
    long r = syscall(SYS_ptrace, 16L /* PTRACE_ATTACH */, pid, 0L, 0L);
    int e = errno;
    if (r == 0)
        syscall(SYS_ptrace, 17L /* PTRACE_DETACH */, pid, 0L, 0L);
    want_errno(nm("ptrace:attach:%ld", pid), r, e, EPERM, 0, "PTRACE_ATTACH");
    r = syscall(SYS_ptrace, 0x4206L /* PTRACE_SEIZE */, pid, 0L, 0L);
    e = errno;
    if (r == 0)
        syscall(SYS_ptrace, 17L, pid, 0L, 0L);
    want_errno(nm("ptrace:seize:%ld", pid), r, e, EPERM, 0, "PTRACE_SEIZE");
    char buf[16];
    struct iovec l = {.iov_base = buf, .iov_len = sizeof(buf)};
    struct iovec rv = {.iov_base = (void *)0x400000, .iov_len = sizeof(buf)};
    r = syscall(SYS_process_vm_readv, pid, &l, 1L, &rv, 1L, 0L);
    e = errno;
    /* EFAULT would mean the access check passed and only the address was bad. */
    want_errno(nm("ptrace:process_vm_readv:%ld", pid), r < 0 && e == EFAULT ? 0 : r, e, EPERM, 0,
               "process_vm_readv");
    r = syscall(SYS_process_vm_writev, pid, &l, 1L, &rv, 1L, 0L);
    e = errno;
    want_errno(nm("ptrace:process_vm_writev:%ld", pid), r < 0 && e == EFAULT ? 0 : r, e, EPERM, 0,
               "process_vm_writev");
    long pfd = syscall(SYS_pidfd_open, pid, 0L);
    if (pfd >= 0) {
        r = syscall(SYS_pidfd_getfd, pfd, 0L, 0L);
        e = errno;
        if (r >= 0)
            close((int)r);
        want_errno(nm("ptrace:pidfd_getfd:%ld", pid), r, e, EPERM, 0, "pidfd_getfd");
        r = syscall(SYS_pidfd_send_signal, pfd, (long)SIGWINCH, 0L, 0L);
        e = errno;
        want_errno(nm("ptrace:pidfd_send_signal:%ld", pid), r, e, EPERM, 0, "pidfd_send_signal");
        close((int)pfd);
    } else {
        info(nm("ptrace:pidfd_open:%ld", pid), "pidfd_open: %s", en(errno));
    }
    return 0;
}

static int c_signal(int argc, char **argv) {
    long pid;
    (void)argc;
    if (parse_long(argv[0], 1, INT_MAX, &pid) < 0) {
        fail("signal", "bad pid");
        return 0;
    }
    /* SIGWINCH: ignored by default, harmless if it does get through. */
    long r = kill((pid_t)pid, SIGWINCH);
    want_errno(nm("signal:kill:%ld", pid), r, errno, EPERM, 0, "kill(SIGWINCH)");
    r = kill((pid_t)pid, 0);
    want_errno(nm("signal:kill0:%ld", pid), r, errno, EPERM, 0, "kill(0)");
    return 0;
}

static int c_kernel(int argc, char **argv) {
    (void)argc, (void)argv;
    union bpf_attr ba;
    memset(&ba, 0, sizeof(ba));
    ba.map_type = BPF_MAP_TYPE_ARRAY;
    ba.key_size = 4;
    ba.value_size = 4;
    ba.max_entries = 1;
    long r = syscall(SYS_bpf, (long)BPF_MAP_CREATE, &ba, (long)sizeof(ba));
    int e = errno;
    if (r >= 0)
        close((int)r);
    want_errno("kernel:bpf", r, e, EPERM, 0, "bpf(BPF_MAP_CREATE)");

    struct io_uring_params up;
    memset(&up, 0, sizeof(up));
    r = syscall(SYS_io_uring_setup, 4L, &up);
    e = errno;
    if (r >= 0)
        close((int)r);
    want_errno("kernel:io_uring_setup", r, e, EPERM, 0, "io_uring_setup");
    r = syscall(SYS_io_uring_enter, 0L, 0L, 0L, 0L, 0L, 0L);
    want_errno("kernel:io_uring_enter", r, errno, EPERM, 0, "io_uring_enter");

    r = syscall(SYS_keyctl, (long)KEYCTL_GET_KEYRING_ID, (long)KEY_SPEC_SESSION_KEYRING, 0L);
    want_errno("kernel:keyctl", r, errno, EPERM, 0, "keyctl(GET_KEYRING_ID)");
    r = syscall(SYS_add_key, "user", "lyh-esc", "x", 1L, (long)KEY_SPEC_PROCESS_KEYRING);
    want_errno("kernel:add_key", r, errno, EPERM, 0, "add_key");
    r = syscall(SYS_request_key, "user", "lyh-esc", NULL, 0L);
    want_errno("kernel:request_key", r, errno, EPERM, 0, "request_key");

    struct perf_event_attr pa;
    memset(&pa, 0, sizeof(pa));
    pa.type = PERF_TYPE_SOFTWARE;
    pa.size = sizeof(pa);
    pa.config = PERF_COUNT_SW_TASK_CLOCK;
    pa.exclude_kernel = 1;
    r = syscall(SYS_perf_event_open, &pa, 0L, -1L, -1L, 0L);
    e = errno;
    if (r >= 0)
        close((int)r);
    want_errno("kernel:perf_event_open", r, e, EPERM, 0, "perf_event_open(self)");

    r = syscall(SYS_userfaultfd, (long)O_CLOEXEC);
    e = errno;
    if (r >= 0)
        close((int)r);
    want_errno("kernel:userfaultfd", r, e, EPERM, 0, "userfaultfd");
    int ufd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    e = errno;
    if (ufd >= 0)
        close(ufd);
    want_refused("kernel:/dev/userfaultfd", ufd, e, "open(/dev/userfaultfd)");

    struct {
        unsigned int bytes;
        int type;
        unsigned char h[128];
    } fh = {.bytes = 128};
    int mnt = 0;
    r = syscall(SYS_name_to_handle_at, AT_FDCWD, "/etc/passwd", &fh, &mnt, 0L);
    want_errno("kernel:name_to_handle_at", r, errno, EPERM, 0, "name_to_handle_at");
    r = syscall(SYS_open_by_handle_at, AT_FDCWD, &fh, (long)O_RDONLY);
    e = errno;
    if (r >= 0)
        close((int)r);
    want_errno("kernel:open_by_handle_at", r, e, EPERM, 0, "open_by_handle_at");

    r = syscall(SYS_personality, (long)(PER_LINUX | READ_IMPLIES_EXEC));
    e = errno;
    if (r >= 0)
        syscall(SYS_personality, (long)PER_LINUX);
    want_errno("kernel:personality-rie", r, e, EPERM, 0, "personality(READ_IMPLIES_EXEC)");
    r = syscall(SYS_personality, (long)ADDR_NO_RANDOMIZE);
    e = errno;
    if (r >= 0)
        syscall(SYS_personality, (long)PER_LINUX);
    want_errno("kernel:personality-norandom", r, e, EPERM, 0, "personality(ADDR_NO_RANDOMIZE)");
    r = syscall(SYS_personality, (1L << 32) | READ_IMPLIES_EXEC);
    e = errno;
    if (r >= 0)
        syscall(SYS_personality, (long)PER_LINUX);
    want_errno("kernel:personality-highbits", r, e, EPERM, 0, "personality(1<<32|READ_IMPLIES_EXEC)");
    r = syscall(SYS_personality, 0xffffffffL);
    if (r >= 0)
        ok("kernel:personality-query", "query allowed (as intended): %#lx", r);
    else
        fail("kernel:personality-query", "query refused: %s", en(errno));

    static const struct {
        const char *name;
        long nr;
    } admin[] = {
        {"kernel:init_module", SYS_init_module}, {"kernel:finit_module", SYS_finit_module},
        {"kernel:kexec_load", SYS_kexec_load}, {"kernel:acct", SYS_acct},
        {"kernel:syslog", SYS_syslog}, {"kernel:swapoff", SYS_swapoff},
    };
    for (size_t i = 0; i < ARRAY_SIZE(admin); i++) {
        /* All arguments zero: with no filter the kernel would answer EPERM
         * (no capability) or EFAULT/EINVAL/EBADF; only seccomp says EPERM
         * before looking. syslog(0, ...) is SYSLOG_ACTION_CLOSE: a no-op. */
        r = syscall(admin[i].nr, 0L, 0L, 0L, 0L, 0L);
        want_errno(admin[i].name, r, errno, EPERM, 0, admin[i].name + 7);
    }
    return 0;
}

static int fork_expect_kill(void (*fn)(void), int *ret_status) {
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        _exit(42);
    }
    int st = 0;
    long end = now_ms() + 5000;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            break;
        }
        usleep(10000);
    }
    *ret_status = st;
    return 0;
}

#if defined(__x86_64__)
static void x32_getpid(void) {
    long r = syscall(__X32_SYSCALL_BIT | SYS_getpid);
    _exit(r == getpid() ? 43 : 44);
}
static void int80_getpid(void) {
    long r;
    /* i386 getpid is 20. */
    __asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
    _exit(r == getpid() ? 43 : 44);
}
#endif

static int c_foreign_abi(int argc, char **argv) {
    (void)argc, (void)argv;
#if defined(__x86_64__)
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {{"foreign-abi:x32", x32_getpid}, {"foreign-abi:int80", int80_getpid}};
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        int st;
        fork_expect_kill(cases[i].fn, &st);
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS)
            ok(cases[i].name, "killed by SIGSYS (seccomp's bad-arch action)");
        else if (WIFSIGNALED(st))
            ok(cases[i].name, "killed by signal %d (no such ABI here)", WTERMSIG(st));
        else if (WIFEXITED(st) && WEXITSTATUS(st) == 43)
            escape(cases[i].name, "a foreign-ABI syscall ran unfiltered");
        else
            ok(cases[i].name, "syscall failed (exit %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
#else
    info("foreign-abi", "only checked on x86_64");
#endif
    return 0;
}

/* ---- terminals -------------------------------------------------------------------------- */

static const char inject[] = "echo LYH_INJECTED\n";

/* Try TIOCSTI (plain and with junk in the high half) on fd; returns bytes
 * the kernel accepted. */
static int sti_all(int fd, const char *label) {
    int accepted = 0;
    for (int v = 0; v < 2; v++) {
        const char *name = nm("tiocsti:%s:%s", label, v ? "highbits" : "plain");
        long cmd = v ? (long)((1UL << 32) | TIOCSTI) : (long)TIOCSTI;
        int got = 0, last = 0;
        for (const char *c = inject; *c; c++) {
            long r = syscall(SYS_ioctl, (long)fd, cmd, c);
            if (r == 0)
                got++;
            else
                last = errno;
        }
        if (got)
            escape(name, "TIOCSTI pushed %d bytes into %s", got, label);
        else if (last == EPERM || last == EIO)
            ok(name, "TIOCSTI refused: %s", en(last));
        else
            fail(name, "TIOCSTI failed with %s (not a terminal?)", en(last));
        accepted += got;
    }
    char sel[2] = {11, 0}; /* TIOCL_GETSHIFTSTATE-ish subcode; refused before use */
    long r = syscall(SYS_ioctl, (long)fd, (long)TIOCLINUX, sel);
    want_errno(nm("tiocsti:%s:tioclinux", label), r, errno, EPERM, 0, "TIOCLINUX");
    return accepted;
}

static int c_tiocsti(int argc, char **argv) {
    struct termios saved, raw;
    bool have_tty = isatty(0);
    (void)argc, (void)argv;
    if (have_tty && tcgetattr(0, &saved) == 0) {
        raw = saved;
        raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        tcsetattr(0, TCSANOW, &raw);
        tcflush(0, TCIFLUSH);
    } else {
        have_tty = false;
    }
    int acc = 0;
    for (int fd = 0; fd <= 2; fd++)
        if (isatty(fd))
            acc += sti_all(fd, nm("fd%d", fd));
    int t = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (t >= 0) {
        acc += sti_all(t, "dev-tty");
        close(t);
    } else {
        info("tiocsti:dev-tty", "no controlling terminal: %s", en(errno));
    }
    if (have_tty) {
        usleep(200000);
        char b[256];
        ssize_t n = read(0, b, sizeof(b) - 1);
        if (n > 0) {
            b[n] = '\0';
            if (strstr(b, "LYH_INJ"))
                escape("tiocsti:own-input", "injected bytes came back on stdin: '%s'", b);
            else
                info("tiocsti:own-input", "stdin had %zd unrelated bytes", n);
        } else {
            ok("tiocsti:own-input", "nothing was injected into the agent's own input");
        }
        tcsetattr(0, TCSANOW, &saved);
    }
    (void)acc;
    return 0;
}

/* Is /dev/pts/N one of the agent's own stdio terminals? */
static bool pts_is_mine(const struct stat *st) {
    for (int i = 0; i < 3; i++) {
        struct stat o;
        if (isatty(i) && fstat(i, &o) == 0 && o.st_rdev == st->st_rdev)
            return true;
    }
    return false;
}

/* Ptys are tried by number (stat needs no Landlock right), so a refused
 * listing of /dev/pts hides nothing. */
#define PTS_MAX 256

static int c_pts_other(int argc, char **argv) {
    int tried = 0, opened = 0;
    char which[512] = "";
    (void)argc, (void)argv;
    for (int k = 0; k < PTS_MAX; k++) {
        char p[64];
        struct stat st;
        snprintf(p, sizeof(p), "/dev/pts/%d", k);
        if (stat(p, &st) < 0 || !S_ISCHR(st.st_mode) || pts_is_mine(&st))
            continue;
        tried++;
        int fd = open(p, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            opened++;
            if (strlen(which) < sizeof(which) - 48)
                snprintf(which + strlen(which), sizeof(which) - strlen(which), " %s(uid %u)", p,
                         (unsigned)st.st_uid);
            sti_all(fd, nm("pts%d", k));
            close(fd);
        }
    }
    if (opened)
        escape("pts-other",
               "opened %d terminal(s) that are not the agent's own:%s; the agent can read the "
               "user's keystrokes there and write to them",
               opened, which);
    else
        ok("pts-other", "none of %d other ptys could be opened", tried);
    return 0;
}

/* The agent's own terminal and new ptys keep working. */
static int c_pty_own(int argc, char **argv) {
    (void)argc, (void)argv;
    if (isatty(0)) {
        char name[64];
        /* Compatibility, not security: reported, not judged. */
        if (ttyname_r(0, name, sizeof(name)) != 0) {
            info("pty-own:reopen", "ttyname(0): %s", en(errno));
        } else {
            int fd = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
            info("pty-own:reopen", "reopen of its own terminal %s: %s", name,
                 fd >= 0 ? "works" : en(errno));
            if (fd >= 0)
                close(fd);
        }
        int t = open("/dev/tty", O_RDWR | O_CLOEXEC);
        if (t >= 0) {
            ok("pty-own:dev-tty", "/dev/tty opens");
            close(t);
        } else if (errno == ENXIO) {
            info("pty-own:dev-tty", "no controlling terminal (expected without a session pty)");
        } else {
            fail("pty-own:dev-tty", "/dev/tty: %s", en(errno));
        }
    }
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) {
        fail("pty-own:new", "posix_openpt: %s", en(errno));
        if (m >= 0)
            close(m);
        return 0;
    }
    int s2 = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (s2 >= 0) {
        ok("pty-own:new", "a new pty and its peer (TIOCGPTPEER, as glibc's openpty does)");
        close(s2);
    } else {
        fail("pty-own:new", "TIOCGPTPEER: %s", en(errno));
    }
    char sn[64];
    if (ptsname_r(m, sn, sizeof(sn)) == 0) {
        int fd = open(sn, O_RDWR | O_NOCTTY | O_CLOEXEC);
        info("pty-own:new-by-name", "open(%s) of its new pty: %s", sn, fd >= 0 ? "works" : en(errno));
        if (fd >= 0)
            close(fd);
    }
    close(m);
    return 0;
}

/* Read, for up to SECONDS, whatever is typed on any pty that is not ours. */
static int c_pts_steal(int argc, char **argv) {
    struct pollfd p[32];
    char names[32][24];
    int n = 0;
    long secs;
    (void)argc;
    if (parse_long(argv[0], 1, 60, &secs) < 0) {
        fail("pts-steal", "bad seconds");
        return 0;
    }
    for (int k = 0; k < PTS_MAX && n < 32; k++) {
        char path[64];
        struct stat st;
        snprintf(path, sizeof(path), "/dev/pts/%d", k);
        if (stat(path, &st) < 0 || !S_ISCHR(st.st_mode) || pts_is_mine(&st))
            continue;
        int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            p[n] = (struct pollfd){.fd = fd, .events = POLLIN};
            snprintf(names[n], sizeof(names[n]), "%.20s", path);
            n++;
        }
    }
    printf("READY-STEAL %d\n", n);
    fflush(stdout);
    char got[256] = "";
    size_t ng = 0;
    const char *where = "";
    long end = now_ms() + secs * 1000;
    while (n > 0 && now_ms() < end && ng < sizeof(got) - 1) {
        if (poll(p, (nfds_t)n, 100) <= 0)
            continue;
        for (int i = 0; i < n; i++)
            if (p[i].revents & POLLIN) {
                ssize_t k = read(p[i].fd, got + ng, sizeof(got) - 1 - ng);
                if (k > 0) {
                    ng += (size_t)k;
                    where = names[i];
                }
            }
    }
    for (int i = 0; i < n; i++)
        close(p[i].fd);
    got[ng] = '\0';
    for (size_t i = 0; i < ng; i++)
        if (!isprint((unsigned char)got[i]))
            got[i] = '.';
    if (ng)
        escape("pts-steal", "read %zu bytes typed on %s, a terminal that is not the agent's: '%s'",
               ng, where, got);
    else
        ok("pts-steal", "nothing read from %d other pty(s) in %ld s", n, secs);
    return 0;
}

/* ---- identity and environment ------------------------------------------------------- */

static int status_field(const char *key, char *out, size_t n) {
    FILE *f = fopen("/proc/self/status", "re");
    char line[512];
    int r = -1;
    size_t k = strlen(key);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, k) == 0 && line[k] == ':') {
            char *v = line + k + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            v[strcspn(v, "\n")] = '\0';
            snprintf(out, n, "%s", v);
            r = 0;
            break;
        }
    if (f)
        fclose(f);
    return r;
}

static int c_creds(int argc, char **argv) {
    long uid, gid;
    (void)argc;
    if (parse_long(argv[0], 0, INT_MAX, &uid) < 0 || parse_long(argv[1], 0, INT_MAX, &gid) < 0) {
        fail("creds", "bad uid/gid");
        return 0;
    }
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    getresuid(&ru, &eu, &su);
    getresgid(&rg, &eg, &sg);
    if (ru == (uid_t)uid && eu == (uid_t)uid && su == (uid_t)uid)
        ok("creds:uid", "real/effective/saved uid %ld", uid);
    else
        escape("creds:uid", "uids %u/%u/%u, expected %ld", ru, eu, su, uid);
    if (rg == (gid_t)gid && eg == (gid_t)gid && sg == (gid_t)gid)
        ok("creds:gid", "real/effective/saved gid %ld (guard gid)", gid);
    else
        escape("creds:gid", "gids %u/%u/%u, expected the guard gid %ld", rg, eg, sg, gid);
    gid_t groups[256];
    int n = getgroups(256, groups);
    bool bad = false;
    char list[512] = "";
    for (int i = 0; i < n; i++) {
        bad |= groups[i] == 0 || groups[i] == (gid_t)gid;
        snprintf(list + strlen(list), sizeof(list) - strlen(list), " %u", groups[i]);
    }
    if (bad)
        escape("creds:groups", "supplementary groups include root or the guard gid:%s", list);
    else
        ok("creds:groups", "supplementary groups:%s", list[0] ? list : " (none)");
    static const char *const zero[] = {"CapInh", "CapPrm", "CapEff", "CapAmb"};
    for (size_t i = 0; i < ARRAY_SIZE(zero); i++) {
        char v[64];
        if (status_field(zero[i], v, sizeof(v)) < 0) {
            fail(nm("creds:%s", zero[i]), "not in /proc/self/status");
            continue;
        }
        if (strspn(v, "0") == strlen(v))
            ok(nm("creds:%s", zero[i]), "%s", v);
        else
            escape(nm("creds:%s", zero[i]), "capabilities left: %s", v);
    }
    char v[64];
    if (status_field("NoNewPrivs", v, sizeof(v)) == 0 && strcmp(v, "1") == 0)
        ok("creds:no_new_privs", "NoNewPrivs 1");
    else
        escape("creds:no_new_privs", "NoNewPrivs '%s'", v);
    if (status_field("Seccomp", v, sizeof(v)) == 0 && strcmp(v, "2") == 0)
        ok("creds:seccomp", "Seccomp 2 (filter)");
    else
        escape("creds:seccomp", "Seccomp '%s'", v);
    if (setresuid(0, 0, 0) == 0 || setuid(0) == 0)
        escape("creds:setuid0", "regained uid 0");
    else
        ok("creds:setuid0", "setuid(0) refused: %s", en(errno));
    if (setgid(0) == 0)
        escape("creds:setgid0", "regained gid 0");
    else
        ok("creds:setgid0", "setgid(0) refused: %s", en(errno));
    /* Any other gid would leave the guard (it matches on the gid). */
    if (n > 0 && groups[0] != (gid_t)gid) {
        int r = setresgid(groups[0], groups[0], groups[0]);
        int e = errno;
        gid_t r2 = 0, e2 = 0, s2 = 0;
        getresgid(&r2, &e2, &s2);
        if (r == 0 || r2 != (gid_t)gid || e2 != (gid_t)gid || s2 != (gid_t)gid)
            escape("creds:leave-guard-gid", "now gids %u/%u/%u", r2, e2, s2);
        else
            ok("creds:leave-guard-gid", "setresgid(%u) refused: %s", groups[0], en(e));
    }
    return 0;
}

/* PATH is a setuid-root copy of id(1); `id -u` prints the effective uid. */
static int c_setuid_exec(int argc, char **argv) {
    int p[2];
    const char *name = nm("setuid-exec:%s", argv[0]);
    struct stat st;
    (void)argc;
    if (stat(argv[0], &st) < 0 || !(st.st_mode & S_ISUID) || st.st_uid != 0) {
        fail(name, "%s is not a setuid-root file", argv[0]);
        return 0;
    }
    if (pipe2(p, O_CLOEXEC) < 0)
        return 0;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        char *args[] = {argv[0], "-u", NULL};
        execv(argv[0], args);
        printf("exec-failed %s\n", en(errno));
        _exit(127);
    }
    close(p[1]);
    char b[128] = "";
    ssize_t n = 0, k;
    while (n < (ssize_t)sizeof(b) - 1 && (k = read(p[0], b + n, sizeof(b) - 1 - (size_t)n)) > 0)
        n += k;
    b[n > 0 ? n : 0] = '\0';
    b[strcspn(b, "\n")] = '\0';
    close(p[0]);
    waitpid(pid, NULL, 0);
    long eu;
    if (parse_long(b, 0, INT_MAX, &eu) < 0)
        fail(name, "no uid from the setuid copy: '%s'", b);
    else if (eu == 0)
        escape(name, "the setuid-root binary ran with euid 0");
    else if (eu == (long)getuid())
        ok(name, "setuid bit ignored: euid %ld (no_new_privs)", eu);
    else
        escape(name, "the setuid binary ran with euid %ld, not mine (%u)", eu, (unsigned)getuid());
    return 0;
}

extern char **environ;

static int c_env(int argc, char **argv) {
    for (int i = 0; i < argc; i++) {
        const char *spec = argv[i];
        if (spec[0] == '!') {
            const char *v = getenv(spec + 1);
            if (v)
                escape(nm("env:%s", spec), "%s is set to '%s'", spec + 1, v);
            else
                ok(nm("env:%s", spec), "%s is not set", spec + 1);
            continue;
        }
        if (spec[0] == '^') { /* no variable whose name starts with this */
            size_t k = strlen(spec + 1);
            const char *hit = NULL;
            for (char **e = environ; *e && !hit; e++)
                if (strncasecmp(*e, spec + 1, k) == 0)
                    hit = *e;
            if (hit)
                escape(nm("env:%s", spec), "found '%s'", hit);
            else
                ok(nm("env:%s", spec), "no variable starts with %s", spec + 1);
            continue;
        }
        const char *tl = strchr(spec, '~');
        if (tl && (!strchr(spec, '=') || tl < strchr(spec, '='))) { /* NAME~PREFIX */
            char key[256];
            snprintf(key, sizeof(key), "%.*s", (int)(tl - spec), spec);
            const char *v = getenv(key);
            if (v && strncmp(v, tl + 1, strlen(tl + 1)) == 0)
                ok(nm("env:%s", spec), "%s=%s", key, v);
            else
                fail(nm("env:%s", spec), "%s is '%s'", key, v ? v : "(unset)");
            continue;
        }
        const char *eq = strchr(spec, '=');
        if (!eq) {
            fail(nm("env:%s", spec), "bad spec");
            continue;
        }
        char key[256];
        snprintf(key, sizeof(key), "%.*s", (int)(eq - spec), spec);
        const char *v = getenv(key);
        if (v && strcmp(v, eq + 1) == 0)
            ok(nm("env:%s", spec), "%s=%s", key, v);
        else
            fail(nm("env:%s", spec), "%s is '%s'", key, v ? v : "(unset)");
    }
    return 0;
}

static int c_fds(int argc, char **argv) {
    (void)argc, (void)argv;
    DIR *d = opendir("/proc/self/fd");
    char list[1024] = "";
    int extra = 0;
    if (!d) {
        fail("fds", "cannot list /proc/self/fd: %s", en(errno));
        return 0;
    }
    int self = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        long fd;
        if (parse_long(e->d_name, 0, INT_MAX, &fd) < 0 || fd <= 2 || fd == self)
            continue;
        char p[64], t[256];
        snprintf(p, sizeof(p), "/proc/self/fd/%ld", fd);
        ssize_t n = readlink(p, t, sizeof(t) - 1);
        t[n > 0 ? n : 0] = '\0';
        extra++;
        snprintf(list + strlen(list), sizeof(list) - strlen(list), " %ld->%s", fd, t);
    }
    closedir(d);
    if (extra)
        escape("fds:inherited", "file descriptors beyond stdio:%s", list);
    else
        ok("fds:inherited", "only 0, 1, 2");
    for (int fd = 0; fd <= 2; fd++) {
        char p[64], t[256];
        snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(p, t, sizeof(t) - 1);
        t[n > 0 ? n : 0] = '\0';
        info(nm("fds:%d", fd), "%s", n > 0 ? t : "closed");
    }
    return 0;
}

/* ---- window size ------------------------------------------------------------------------ */

static volatile sig_atomic_t g_winch;
static void on_winch(int sig) {
    (void)sig;
    g_winch = 1;
}

static int parse_rc(const char *s, unsigned *r, unsigned *c) {
    return sscanf(s, "%ux%u", r, c) == 2 ? 0 : -1;
}

static int c_winsize(int argc, char **argv) {
    unsigned r0, c0, r1, c1;
    struct winsize ws;
    (void)argc;
    if (parse_rc(argv[0], &r0, &c0) < 0 || parse_rc(argv[1], &r1, &c1) < 0) {
        fail("winsize", "want ROWSxCOLS ROWSxCOLS");
        return 0;
    }
    struct sigaction sa = {.sa_handler = on_winch};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGWINCH, &sa, NULL);
    if (ioctl(0, TIOCGWINSZ, &ws) < 0) {
        fail("winsize:initial", "TIOCGWINSZ: %s", en(errno));
        return 0;
    }
    if (ws.ws_row == r0 && ws.ws_col == c0)
        ok("winsize:initial", "%ux%u", ws.ws_row, ws.ws_col);
    else
        fail("winsize:initial", "%ux%u, expected %ux%u", ws.ws_row, ws.ws_col, r0, c0);
    printf("READY-WINSZ\n");
    fflush(stdout);
    long end = now_ms() + 15000;
    bool saw = false;
    while (now_ms() < end) {
        poll(NULL, 0, 50);
        if (!g_winch)
            continue;
        saw = true;
        g_winch = 0;
        if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row == r1 && ws.ws_col == c1) {
            ok("winsize:resized", "SIGWINCH, then TIOCGWINSZ %ux%u", ws.ws_row, ws.ws_col);
            return 0;
        }
    }
    ioctl(0, TIOCGWINSZ, &ws);
    fail("winsize:resized", "%s; size %ux%u, expected %ux%u", saw ? "SIGWINCH seen" : "no SIGWINCH",
         ws.ws_row, ws.ws_col, r1, c1);
    return 0;
}

/* ---- lifecycle helpers (no verdicts) ----------------------------------------------------- */

static int write_pidfile(const char *path, pid_t pid) {
    char b[32];
    int n = snprintf(b, sizeof(b), "%d\n", (int)pid);
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, b, (size_t)n) != n) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return rename(tmp, path);
}

static int g_hup_log = -1;
static void on_hup(int sig) {
    (void)sig;
    if (g_hup_log >= 0)
        (void)!write(g_hup_log, "SIGHUP\n", 7);
}

static int m_hup_trap(char **argv) {
    long secs;
    if (parse_long(argv[2], 1, 600, &secs) < 0)
        return 2;
    g_hup_log = open(argv[1], O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    struct sigaction sa = {.sa_handler = on_hup};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    if (write_pidfile(argv[0], getpid()) < 0)
        return 3;
    printf("READY-HUP %d\n", (int)getpid());
    fflush(stdout);
    long end = now_ms() + secs * 1000;
    while (now_ms() < end)
        poll(NULL, 0, 100);
    return 0;
}

static int m_spawn_bg(char **argv) {
    pid_t pid = fork();
    if (pid < 0)
        return 3;
    if (pid == 0) {
        /* A grandchild in its own session and process group, deaf to the
         * hang-up: only the cgroup can still find it. */
        setsid();
        pid_t g = fork();
        if (g != 0)
            _exit(0);
        signal(SIGHUP, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        for (int fd = 0; fd <= 2; fd++) {
            int nul = open("/dev/null", O_RDWR);
            if (nul >= 0) {
                dup2(nul, fd);
                if (nul > 2)
                    close(nul);
            }
        }
        if (write_pidfile(argv[0], getpid()) < 0)
            _exit(3);
        long end = now_ms() + 300000;
        while (now_ms() < end)
            poll(NULL, 0, 200);
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    /* Wait (bounded) for the grandchild to record itself. */
    for (int i = 0; i < 100 && access(argv[0], F_OK) < 0; i++)
        usleep(20000);
    printf("SPAWNED-BG\n");
    fflush(stdout);
    return access(argv[0], F_OK) == 0 ? 0 : 3;
}

static void linger(void) { poll(NULL, 0, 100); }

static int m_killself(char **argv) {
    long sig;
    if (parse_long(argv[0], 1, 64, &sig) < 0)
        return 2;
    linger();
    signal((int)sig, SIG_DFL);
    fflush(stdout);
    raise((int)sig);
    pause();
    return 3;
}

/* ---- outside: servers ---------------------------------------------------------------------- */

static void logline(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logline(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

static int x_serve(char **argv) {
    struct addr a;
    long port, secs;
    const char *tag = argv[3];
    if (get_port(argv[1], &port) < 0 || parse_addr(argv[0], port, &a) < 0 ||
        parse_long(argv[2], 1, 3600, &secs) < 0)
        return 2;
    int one = 1;
    int t = socket(a.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int u = socket(a.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a.family == AF_INET6) {
        setsockopt(t, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        setsockopt(u, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    if (t < 0 || u < 0 || bind(t, (struct sockaddr *)&a.ss, a.len) < 0 || listen(t, 16) < 0 ||
        bind(u, (struct sockaddr *)&a.ss, a.len) < 0) {
        logline("error %s", en(errno));
        return 1;
    }
    logline("serving %s %ld", argv[0], port);
    long end = now_ms() + secs * 1000;
    while (now_ms() < end) {
        struct pollfd p[2] = {{.fd = t, .events = POLLIN}, {.fd = u, .events = POLLIN}};
        if (poll(p, 2, 200) <= 0)
            continue;
        char buf[1024], peer[80];
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (p[0].revents & POLLIN) {
            int c = accept4(t, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
            if (c >= 0) {
                addr_text(&ss, peer, sizeof(peer));
                ssize_t n = wait_fd(c, POLLIN, 1500) > 0 ? recv(c, buf, sizeof(buf) - 1, 0) : 0;
                buf[n > 0 ? n : 0] = '\0';
                buf[strcspn(buf, "\n")] = '\0';
                logline("tcp %s %s", peer, buf);
                char out[1200];
                int k = snprintf(out, sizeof(out), "srv=%s %s\n", tag, buf);
                if (n > 0)
                    (void)!send(c, out, (size_t)k, MSG_NOSIGNAL);
                close(c);
            }
        }
        if (p[1].revents & POLLIN) {
            sl = sizeof(ss);
            ssize_t n = recvfrom(u, buf, sizeof(buf) - 1, 0, (struct sockaddr *)&ss, &sl);
            if (n > 0) {
                buf[n] = '\0';
                buf[strcspn(buf, "\n")] = '\0';
                addr_text(&ss, peer, sizeof(peer));
                logline("udp %s %s", peer, buf);
                char out[1200];
                int k = snprintf(out, sizeof(out), "srv=%s %s\n", tag, buf);
                sendto(u, out, (size_t)k, 0, (struct sockaddr *)&ss, sl);
            }
        }
    }
    return 0;
}

static int x_dns(char **argv) {
    struct addr a;
    long port, secs;
    struct in_addr ip;
    if (get_port(argv[1], &port) < 0 || parse_addr(argv[0], port, &a) < 0 ||
        inet_pton(AF_INET, argv[2], &ip) != 1 || parse_long(argv[3], 1, 3600, &secs) < 0)
        return 2;
    int u = socket(a.family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (u < 0 || bind(u, (struct sockaddr *)&a.ss, a.len) < 0) {
        logline("error %s", en(errno));
        return 1;
    }
    logline("serving dns %s %ld", argv[0], port);
    long end = now_ms() + secs * 1000;
    while (now_ms() < end) {
        if (wait_fd(u, POLLIN, 200) <= 0)
            continue;
        uint8_t m[1500];
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        ssize_t n = recvfrom(u, m, sizeof(m) - 32, 0, (struct sockaddr *)&ss, &sl);
        if (n < 12)
            continue;
        size_t qend = dns_skip_name(m, (size_t)n, 12);
        if (!qend || qend + 4 > (size_t)n)
            continue;
        qend += 4;
        char qname[256] = "";
        for (size_t o = 12; o < qend - 5 && m[o] && strlen(qname) < 200;) {
            size_t l = m[o];
            snprintf(qname + strlen(qname), sizeof(qname) - strlen(qname), "%s%.*s",
                     qname[0] ? "." : "", (int)l, (const char *)m + o + 1);
            o += 1 + l;
        }
        logline("dns query %s", qname);
        m[2] = 0x81, m[3] = 0x80;   /* response, RD, RA, NOERROR */
        m[6] = 0, m[7] = 1;         /* one answer */
        m[8] = m[9] = m[10] = m[11] = 0;
        size_t o = qend;
        const uint8_t ans[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4};
        memcpy(m + o, ans, sizeof(ans));
        o += sizeof(ans);
        memcpy(m + o, &ip, 4);
        o += 4;
        sendto(u, m, o, 0, (struct sockaddr *)&ss, sl);
    }
    return 0;
}

static int x_unix(char **argv) {
    struct sockaddr_un u = {.sun_family = AF_UNIX};
    long secs;
    socklen_t len;
    if (parse_long(argv[1], 1, 3600, &secs) < 0)
        return 2;
    if (argv[0][0] == '@') {
        int n = snprintf(u.sun_path + 1, sizeof(u.sun_path) - 1, "%s", argv[0] + 1);
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    } else {
        snprintf(u.sun_path, sizeof(u.sun_path), "%s", argv[0]);
        len = sizeof(u);
        unlink(argv[0]);
    }
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || bind(s, (struct sockaddr *)&u, len) < 0 || listen(s, 8) < 0) {
        logline("error %s", en(errno));
        return 1;
    }
    logline("serving unix %s", argv[0]);
    long end = now_ms() + secs * 1000;
    while (now_ms() < end) {
        if (wait_fd(s, POLLIN, 200) <= 0)
            continue;
        int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        struct ucred cr;
        socklen_t cl = sizeof(cr);
        getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl);
        logline("unix accepted pid %d uid %u gid %u", (int)cr.pid, cr.uid, cr.gid);
        (void)!send(c, "outside-hello\n", 14, MSG_NOSIGNAL);
        close(c);
    }
    if (argv[0][0] != '@')
        unlink(argv[0]);
    return 0;
}

/* ---- outside: the terminal ------------------------------------------------------------------ */

/* x-pty [-s RxC] [-T SECONDS] [STEP...] -- CMD ARGS
 * Plays a terminal for CMD: a fresh pty whose slave is CMD's controlling
 * terminal and stdio; everything CMD writes is copied to our stdout. STEPs
 * run in order:  -w TEXT  wait until TEXT has appeared in the output;
 *                -r RxC   set the window size (the kernel sends SIGWINCH);
 *                -i TEXT  type TEXT ("\n" and "\r" escapes understood);
 *                -p MS    pause.
 * Then it relays until CMD exits and the pty is drained. Finally prints
 * "PTY-EXIT <code>" (128+N for a signal; 124 on timeout, after SIGKILL to
 * CMD's pid) and exits with that code. */
static int x_pty(int argc, char **argv) {
    unsigned rows = 24, cols = 80;
    long timeout_s = 60;
    int i = 0;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-s") == 0 && i + 1 < argc) {
            if (parse_rc(argv[++i], &rows, &cols) < 0)
                return 2;
        } else if (strcmp(argv[i], "-T") == 0 && i + 1 < argc) {
            if (parse_long(argv[++i], 1, 600, &timeout_s) < 0)
                return 2;
        }
    }
    if (i >= argc - 1) {
        fprintf(stderr, "x-pty: no command\n");
        return 2;
    }
    char **cmd = argv + i + 1;
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) {
        perror("x-pty: openpt");
        return 1;
    }
    char sname[64];
    if (ptsname_r(m, sname, sizeof(sname)) != 0)
        return 1;
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    ioctl(m, TIOCSWINSZ, &ws);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        int s = open(sname, O_RDWR);
        if (s < 0)
            _exit(126);
        ioctl(s, TIOCSCTTY, 0);
        dup2(s, 0), dup2(s, 1), dup2(s, 2);
        if (s > 2)
            close(s);
        execvp(cmd[0], cmd);
        _exit(127);
    }
    static char seen[1 << 16];
    size_t nseen = 0;
    long end = now_ms() + timeout_s * 1000;
    int status = -1;
    bool exited = false, master_open = true, timed_out = false;
    int step = 0;
    long pause_until = 0;

    for (;;) {
        /* Steps. */
        while (step < i && !timed_out) {
            const char *op = argv[step];
            if ((strcmp(op, "-s") == 0 || strcmp(op, "-T") == 0) && step + 1 < i) {
                step += 2;
                continue;
            }
            if (step + 1 >= i) {
                step = i;
                break;
            }
            const char *arg = argv[step + 1];
            if (strcmp(op, "-w") == 0) {
                seen[nseen] = '\0';
                if (!memmem(seen, nseen, arg, strlen(arg)))
                    break; /* keep waiting */
            } else if (strcmp(op, "-r") == 0) {
                unsigned r, c;
                if (parse_rc(arg, &r, &c) == 0) {
                    struct winsize w2 = {.ws_row = (unsigned short)r, .ws_col = (unsigned short)c};
                    ioctl(m, TIOCSWINSZ, &w2);
                }
            } else if (strcmp(op, "-i") == 0) {
                char b[512];
                size_t n = 0;
                for (const char *c = arg; *c && n < sizeof(b) - 1; c++) {
                    if (c[0] == '\\' && c[1] == 'n')
                        b[n++] = '\n', c++;
                    else if (c[0] == '\\' && c[1] == 'r')
                        b[n++] = '\r', c++;
                    else
                        b[n++] = *c;
                }
                (void)!write(m, b, n);
            } else if (strcmp(op, "-p") == 0) {
                long ms;
                if (pause_until == 0 && parse_long(arg, 0, 60000, &ms) == 0)
                    pause_until = now_ms() + ms;
                if (now_ms() < pause_until)
                    break;
                pause_until = 0;
            }
            step += 2;
        }
        if (!exited) {
            int st;
            pid_t w = waitpid(pid, &st, WNOHANG);
            if (w == pid) {
                exited = true;
                status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            }
        }
        if (exited && !master_open)
            break;
        if (now_ms() > end) {
            if (!exited) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                exited = true;
            }
            timed_out = true;
            status = 124;
            break;
        }
        struct pollfd p = {.fd = master_open ? m : -1, .events = POLLIN};
        int k = poll(&p, 1, exited ? 20 : 50);
        if (k > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
            char b[4096];
            ssize_t n = read(m, b, sizeof(b));
            if (n <= 0) {
                master_open = false; /* EIO: no slave holder left */
            } else {
                (void)!write(1, b, (size_t)n);
                if (nseen + (size_t)n >= sizeof(seen) - 1) {
                    size_t keep = sizeof(seen) / 2;
                    memmove(seen, seen + nseen - keep, keep);
                    nseen = keep;
                }
                memcpy(seen + nseen, b, (size_t)n);
                nseen += (size_t)n;
            }
        } else if (exited && k == 0) {
            break; /* exited and nothing more to read */
        }
    }
    close(m);
    printf("\nPTY-EXIT %d\n", status);
    fflush(stdout);
    return status;
}

/* ---- dispatch --------------------------------------------------------------------------------- */

struct check {
    const char *name;
    int min, max; /* argument counts */
    int (*fn)(int argc, char **argv);
};

static const struct check checks[] = {
    {"write-ok", 1, 64, c_write_ok},
    {"read-ok", 1, 64, c_read_ok},
    {"tcp-ok", 2, 2, c_tcp_ok},
    {"udp-ok", 2, 2, c_udp_ok},
    {"tcp-deny", 2, 2, c_tcp_deny},
    {"udp-deny", 2, 2, c_udp_deny},
    {"proto-deny", 3, 3, c_proto_deny},
    {"iface-select", 3, 3, c_iface_select},
    {"ping-deny", 1, 1, c_ping_deny},
    {"dns-ok", 3, 3, c_dns_ok},
    {"fs-deny", 2, 2, c_fs_deny},
    {"dir-deny", 2, 2, c_dir_deny},
    {"exec-deny", 1, 1, c_exec_deny},
    {"symlink-out", 1, 1, c_symlink_out},
    {"dotdot-out", 1, 1, c_dotdot_out},
    {"hardlink-in", 1, 1, c_hardlink_in},
    {"read-file", 2, 2, c_read_file},
    {"proc-peek", 2, 2, c_proc_peek},
    {"sys-write", 0, 0, c_sys_write},
    {"cgroup-move", 0, 0, c_cgroup_move},
    {"socket-families", 0, 0, c_socket_families},
    {"bind-listen", 0, 1, c_bind_listen},
    {"abstract-unix", 1, 1, c_abstract_unix},
    {"unix-path", 1, 1, c_unix_path},
    {"userns", 0, 0, c_userns},
    {"mount", 0, 0, c_mount},
    {"ptrace", 1, 1, c_ptrace},
    {"signal", 1, 1, c_signal},
    {"kernel", 0, 0, c_kernel},
    {"foreign-abi", 0, 0, c_foreign_abi},
    {"tiocsti", 0, 0, c_tiocsti},
    {"pts-other", 0, 0, c_pts_other},
    {"pts-steal", 1, 1, c_pts_steal},
    {"pty-own", 0, 0, c_pty_own},
    {"creds", 2, 2, c_creds},
    {"setuid-exec", 1, 1, c_setuid_exec},
    {"env", 1, 64, c_env},
    {"fds", 0, 0, c_fds},
    {"winsize", 2, 2, c_winsize},
};

static int usage(void) {
    fprintf(stderr, "usage: escape_probe CHECK [ARGS] [+ CHECK [ARGS]]...\n"
                    "       escape_probe exit N | exit-now N | killself SIG | mark FILE | euid | sleep S\n"
                    "       escape_probe spawn-bg PIDFILE | hup-trap PIDFILE LOG SECONDS\n"
                    "       escape_probe x-serve ADDR PORT S TAG | x-dns ADDR PORT IPV4 S\n"
                    "       escape_probe x-unix PATH|@NAME S | x-pty [STEPS] -- CMD...\n"
                    "checks:");
    for (size_t i = 0; i < ARRAY_SIZE(checks); i++)
        fprintf(stderr, " %s", checks[i].name);
    fprintf(stderr, "\n(see the comment at the top of tests/e2e/escape_probe.c)\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return usage();
    const char *mode = argv[1];
    long v;

    /* A peer that hangs up early must not kill a server or the probe. */
    signal(SIGPIPE, SIG_IGN);

    /* Helpers with no verdict line. */
    if (strcmp(mode, "exit-now") == 0 && argc == 3 && parse_long(argv[2], 0, 255, &v) == 0)
        return (int)v;
    if (strcmp(mode, "exit") == 0 && argc == 3 && parse_long(argv[2], 0, 255, &v) == 0) {
        linger();
        return (int)v;
    }
    if (strcmp(mode, "killself") == 0 && argc == 3)
        return m_killself(argv + 2);
    if (strcmp(mode, "euid") == 0) {
        printf("euid=%u ruid=%u\n", (unsigned)geteuid(), (unsigned)getuid());
        return 0;
    }
    if (strcmp(mode, "mark") == 0 && argc == 3) {
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0)
            close(fd);
        return fd >= 0 ? 0 : 1;
    }
    if (strcmp(mode, "sleep") == 0 && argc == 3 && parse_long(argv[2], 0, 600, &v) == 0) {
        long end = now_ms() + v * 1000;
        while (now_ms() < end)
            poll(NULL, 0, 100);
        return 0;
    }
    if (strcmp(mode, "spawn-bg") == 0 && argc == 3) {
        int r = m_spawn_bg(argv + 2);
        linger();
        return r;
    }
    if (strcmp(mode, "hup-trap") == 0 && argc == 5)
        return m_hup_trap(argv + 2);
    if (strcmp(mode, "x-serve") == 0 && argc == 6)
        return x_serve(argv + 2);
    if (strcmp(mode, "x-dns") == 0 && argc == 6)
        return x_dns(argv + 2);
    if (strcmp(mode, "x-unix") == 0 && argc == 4)
        return x_unix(argv + 2);
    if (strcmp(mode, "x-pty") == 0)
        return x_pty(argc - 2, argv + 2);

    /* Checks, separated by "+". */
    for (int i = 1; i < argc;) {
        int j = i + 1;
        while (j < argc && strcmp(argv[j], "+") != 0)
            j++;
        const struct check *c = NULL;
        for (size_t k = 0; k < ARRAY_SIZE(checks); k++)
            if (strcmp(argv[i], checks[k].name) == 0)
                c = &checks[k];
        int n = j - i - 1;
        if (!c || n < c->min || n > c->max) {
            fprintf(stderr, "escape_probe: bad check '%s' with %d arguments\n", argv[i], n);
            return usage();
        }
        c->fn(n, argv + i + 1);
        i = j + 1;
    }
    linger();
    return g_escape ? 1 : g_fail ? 2 : 0;
}
