/* nft_guard_tool: drives platform/linux/nft.c for tests/e2e/nft_guard.sh.
 *
 * Run it only inside a throwaway network namespace (nsenter --net=/run/netns/X):
 * every subcommand that changes nftables acts on the table of the namespace it runs
 * in. The probe and serve subcommands exist so the script needs no other client or
 * server; serve exits by itself after its lifetime, probe after its timeout.
 *
 *   base [--gid G] [--level L] [--no-cgroupv2] [--group G] [--rate R]
 *        [--inbound BASE_ID BASE_PATH]   (chain input for the cgroup BASE_ID)
 *                                      -> "created" | "rebuilt" | "unchanged"
 *   render-base [same options]         -> the base text (no kernel)
 *   add-session ID CGROUPID IFACE [policy]  / render-session ID CGROUPID IFACE [policy]
 *   render-data ID CGROUPID IFACE [policy]   -> the session in the data layout, as text
 *                                         (it needs --loopback and --dns-port; a base
 *                                         rendered with --inbound, --dns and --data)
 *   add-data / del-data ID CGROUPID IFACE [policy]   install / remove it (nft.c); del-data
 *                                         prints "piece by piece" when part of it was gone
 *   del-session ID CGROUPID
 *   add-uid UID IFACE [policy] | add-shared UID IFACE [policy]
 *   del-uid UID | del-shared UID
 *   list | sessions | counters CHAIN | delete-table   (counters s-<id> of a data session:
 *                                         its named counters)
 *   mark-packets CHAIN MARK            -> "packets N" (packets of the chain's counted rules
 *                                         that set ct mark MARK) | "cannot tell" (exit 3)
 *   cgroup-id PATH                     -> the cgroup v2 id (name_to_handle_at)
 *   probe tcp|udp ADDR PORT TIMEOUT_MS -> "ok <ms>" | "refused <ms>" | "unreach <ms>"
 *                                         | "timeout <ms>" | "error <errno> <ms>"; exit 0 iff ok
 *   burst ADDR PORT COUNT PPS          -> COUNT udp datagrams from one socket to ADDR ports
 *                                         PORT, PORT+1, ... (each a new flow), PPS per
 *                                         second (0: as fast as possible); "sent N"
 *   serve ADDR PORT SECONDS [MARK]     -> tcp + udp echo on ADDR:PORT for SECONDS; MARK: its
 *                                         sockets' SO_MARK (as lyhd's DNS forwarders; root)
 *   connrate tcp|udp ADDR PORT MS      -> short flows to a serve echo, one after another,
 *                                         for MS ms: a new socket each (new flow), one
 *                                         byte there and back, closed; "flows N ms T failed F"
 *   nflog GROUP SECONDS COUNT          -> "listening", then "[<prefix>]" per logged packet,
 *                                         until COUNT packets or SECONDS
 * policy: --lan-exception D | --deny D | --allow D | --deny-default | --block-ipv6
 *         | --log-rate RATE,BURST        D = ADDR/PREFIX[,PORT[-PORT]]
 *         | --dns-port PORT              its DNS goes to a forwarder on PORT
 *         | --unlogged                   allowed flows counted, not logged
 *         | --cgroup-path PATH           (text) the cgroup below /sys/fs/cgroup
 *         | --loopback LEVEL BASE_ID     (sessions) it may listen: lo flows marked (slot: the
 *                                        cgroup id's low 30 bits), chain lo-<id> matches its
 *                                        sockets at cgroup LEVEL, other sessions' below BASE_ID
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>

#include "common/macros.h"
#include "platform/linux/nft.h"
#include "platform/linux/nft_render.h"

#define MAX_DESTS 32

static int usage(void) {
    fprintf(stderr, "usage: see the comment at the top of tests/e2e/nft_guard_tool.c\n");
    return 2;
}

static int fail(struct nft *n, const char *what, int r) {
    const char *obj = n ? nft_last_error_object(n) : "";
    fprintf(stderr, "error: %s: %s%s%s%s\n", what, strerror(-r), obj[0] ? " (" : "", obj,
            obj[0] ? ")" : "");
    return 1;
}

static int parse_u64(const char *s, uint64_t *ret) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return -EINVAL;
    *ret = v;
    return 0;
}

static int parse_u32(const char *s, uint32_t *ret) {
    uint64_t v;
    if (parse_u64(s, &v) < 0 || v > UINT32_MAX)
        return -EINVAL;
    *ret = (uint32_t)v;
    return 0;
}

/* ADDR/PREFIX[,PORT[-PORT]] */
static int parse_dest(const char *arg, struct dr_rule *d) {
    char buf[128];
    if (strlen(arg) >= sizeof(buf))
        return -EINVAL;
    strcpy(buf, arg);
    memset(d, 0, sizeof(*d));
    char *ports = strchr(buf, ',');
    if (ports) {
        *ports++ = '\0';
        char *hi = strchr(ports, '-');
        if (hi)
            *hi++ = '\0';
        uint32_t lo, h;
        if (parse_u32(ports, &lo) < 0 || lo > 65535 || (hi && (parse_u32(hi, &h) < 0 || h > 65535)))
            return -EINVAL;
        d->port_min = (uint16_t)lo;
        d->port_max = hi ? (uint16_t)h : (uint16_t)lo;
    }
    char *slash = strchr(buf, '/');
    if (!slash)
        return -EINVAL;
    *slash++ = '\0';
    uint32_t plen;
    if (parse_u32(slash, &plen) < 0 || plen > 128)
        return -EINVAL;
    d->prefix_len = (uint8_t)plen;
    if (inet_pton(AF_INET, buf, d->addr) == 1)
        d->family = AF_INET;
    else if (inet_pton(AF_INET6, buf, d->addr) == 1)
        d->family = AF_INET6;
    else
        return -EINVAL;
    return 0;
}

struct policy_args {
    struct dr_rule lan[MAX_DESTS], deny[MAX_DESTS], allow[MAX_DESTS];
    size_t nlan, ndeny, nallow;
    bool deny_default, block6;
    bool log_set;
    uint32_t log_rate, log_burst;
    uint32_t lo_level; /* --loopback LEVEL BASE_ID: the session may listen */
    uint64_t lo_base;
    uint32_t dns_port;
    bool unlogged;
    const char *cgroup_path;
};

static int parse_policy(int argc, char **argv, struct policy_args *p) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        struct dr_rule *v = NULL;
        size_t *nv = NULL;
        if (strcmp(a, "--deny-default") == 0) {
            p->deny_default = true;
            continue;
        }
        if (strcmp(a, "--block-ipv6") == 0) {
            p->block6 = true;
            continue;
        }
        if (strcmp(a, "--unlogged") == 0) {
            p->unlogged = true;
            continue;
        }
        if (strcmp(a, "--dns-port") == 0) {
            if (i + 1 >= argc || parse_u32(argv[i + 1], &p->dns_port) < 0 || p->dns_port == 0 ||
                p->dns_port > UINT16_MAX)
                return -EINVAL;
            i++;
            continue;
        }
        if (strcmp(a, "--cgroup-path") == 0) {
            if (i + 1 >= argc)
                return -EINVAL;
            p->cgroup_path = argv[++i];
            continue;
        }
        if (strcmp(a, "--log-rate") == 0) {
            char *comma = i + 1 < argc ? strchr(argv[i + 1], ',') : NULL;
            if (!comma)
                return -EINVAL;
            *comma = '\0';
            if (parse_u32(argv[i + 1], &p->log_rate) < 0 || parse_u32(comma + 1, &p->log_burst) < 0)
                return -EINVAL;
            p->log_set = true;
            i++;
            continue;
        }
        if (strcmp(a, "--loopback") == 0) {
            if (i + 2 >= argc || parse_u32(argv[i + 1], &p->lo_level) < 0 || p->lo_level < 2 ||
                parse_u64(argv[i + 2], &p->lo_base) < 0 || p->lo_base == 0)
                return -EINVAL;
            i += 2;
            continue;
        }
        if (strcmp(a, "--lan-exception") == 0)
            v = p->lan, nv = &p->nlan;
        else if (strcmp(a, "--deny") == 0)
            v = p->deny, nv = &p->ndeny;
        else if (strcmp(a, "--allow") == 0)
            v = p->allow, nv = &p->nallow;
        if (!v || i + 1 >= argc || *nv >= MAX_DESTS || parse_dest(argv[i + 1], &v[*nv]) < 0)
            return -EINVAL;
        (*nv)++;
        i++;
    }
    return 0;
}

static struct nftr_log_params default_log(void) {
    return (struct nftr_log_params){ .group = NFTR_DEFAULT_NFLOG_GROUP, .rate = NFTR_DEFAULT_LOG_RATE,
                                     .burst = NFTR_DEFAULT_LOG_BURST };
}

static struct nftr_input input_of(enum nftr_scope scope, const char *id, uint64_t cg, uint32_t uid,
                                   const char *iface, const struct policy_args *pa) {
    struct nftr_input in = {
        .scope = scope,
        .session_id = id,
        .cgroup_id = cg,
        .uid = uid,
        .guard_gid = NFTR_DEFAULT_GUARD_GID,
        .iface = iface,
        .log = default_log(),
        .policy = {
            .lan_exceptions = pa->lan, .n_lan_exceptions = pa->nlan,
            .deny = pa->deny, .n_deny = pa->ndeny,
            .deny_default = pa->deny_default,
            .allow = pa->allow, .n_allow = pa->nallow,
            .ipv6_blocked = pa->block6,
        },
    };
    if (pa->log_set) {
        in.log.rate = pa->log_rate;
        in.log.burst = pa->log_burst;
    }
    if (pa->lo_level) {
        in.lo_slot = (uint32_t)(cg & NFTR_LO_SLOT_MAX) ? (uint32_t)(cg & NFTR_LO_SLOT_MAX) : 1;
        in.cgroup_level = pa->lo_level;
        in.base_cgroup_id = pa->lo_base;
    }
    in.dns_port = (uint16_t)pa->dns_port;
    in.log.accept_unlogged = pa->unlogged;
    in.cgroup_path = pa->cgroup_path;
    return in;
}

static void nftr_data_freep(struct nftr_data **d) { nftr_data_free(*d); }

static int render(enum nftr_scope scope, const char *id, uint64_t cg, uint32_t uid, const char *iface,
                  const struct policy_args *pa, struct nftr_chain **ret) {
    struct nftr_input in = input_of(scope, id, cg, uid, iface, pa);
    return nftr_render_chain(&in, ret);
}

static int parse_base(int argc, char **argv, struct nftr_base_params *p) {
    *p = (struct nftr_base_params){
        .guard_gid = NFTR_DEFAULT_GUARD_GID, .cgroupv2 = true, .cgroup_level = NFTR_DEFAULT_CGROUP_LEVEL,
        .log = default_log(),
    };
    for (int i = 0; i < argc; i++) {
        uint32_t v;
        if (strcmp(argv[i], "--no-cgroupv2") == 0) {
            p->cgroupv2 = false;
            continue;
        }
        if (strcmp(argv[i], "--dns") == 0) {
            p->dns = true;
            continue;
        }
        if (strcmp(argv[i], "--data") == 0) {
            p->data = true;
            continue;
        }
        if (strcmp(argv[i], "--inbound") == 0) { /* --inbound BASE_ID BASE_PATH */
            if (i + 2 >= argc || parse_u64(argv[i + 1], &p->base_cgroup_id) < 0)
                return -EINVAL;
            p->inbound = true;
            p->base_cgroup = argv[i + 2];
            i += 2;
            continue;
        }
        if (i + 1 >= argc || parse_u32(argv[i + 1], &v) < 0)
            return -EINVAL;
        if (strcmp(argv[i], "--gid") == 0)
            p->guard_gid = v;
        else if (strcmp(argv[i], "--level") == 0)
            p->cgroup_level = v;
        else if (strcmp(argv[i], "--group") == 0 && v <= UINT16_MAX)
            p->log.group = (uint16_t)v;
        else if (strcmp(argv[i], "--rate") == 0)
            p->log.rate = v;
        else
            return -EINVAL;
        i++;
    }
    return 0;
}

/* ---- probe / serve ------------------------------------------------------------------ */

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int sockaddr_of(const char *addr, uint16_t port, struct sockaddr_storage *ss, socklen_t *len) {
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons(port);
        *len = sizeof(*s4);
        return 0;
    }
    if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(port);
        *len = sizeof(*s6);
        return 0;
    }
    return -EINVAL;
}

static const char *classify(int err) {
    switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
        return "refused";
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EACCES:
    case EPERM:
        return "unreach";
    case ETIMEDOUT:
        return "timeout";
    default:
        return NULL;
    }
}

static int report(int err, long t0) {
    long ms = now_ms() - t0;
    if (err == 0) {
        printf("ok %ld\n", ms);
        return 0;
    }
    const char *c = classify(err);
    if (c)
        printf("%s %ld\n", c, ms);
    else
        printf("error %d %ld\n", err, ms);
    return 1;
}

/* Wait for fd to become ready for `events` until deadline; 0, -ETIMEDOUT or -errno. */
static int wait_fd(int fd, short events, long deadline) {
    for (;;) {
        long left = deadline - now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = { .fd = fd, .events = events };
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r > 0)
            return 0;
    }
}

/* Many short flows: one unconnected udp socket, a new destination port each,
 * handed to the kernel BURST_BATCH at a time (sendmmsg): one system call a
 * datagram held the sender under 100k/s on a 2-CPU guest, below what lyhd
 * records (docs/performance.md). A paced burst sends batches small enough
 * to keep to its rate (pps / 2000, at least 1: one a millisecond at 2000/s). */
#define BURST_BATCH 64
static int burst(const char *addr, uint16_t port, uint32_t count, uint32_t pps) {
    struct sockaddr_storage ss;
    socklen_t sl;
    if (sockaddr_of(addr, port, &ss, &sl) < 0)
        return usage();
    _cleanup_close_ int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fail(NULL, "socket", -errno);
    struct sockaddr_storage to[BURST_BATCH];
    struct mmsghdr msg[BURST_BATCH];
    struct iovec iov = {.iov_base = (void *)"x", .iov_len = 1};
    uint32_t batch = pps == 0 ? BURST_BATCH : pps / 2000;
    if (batch < 1)
        batch = 1;
    if (batch > BURST_BATCH)
        batch = BURST_BATCH;
    uint32_t sent = 0;
    long t0 = now_ms();
    for (uint32_t i = 0; i < count;) {
        uint32_t n = count - i < batch ? count - i : batch;
        for (uint32_t k = 0; k < n; k++) {
            uint16_t p = (uint16_t)(port + (i + k) % (65536u - port));
            to[k] = ss;
            if (ss.ss_family == AF_INET)
                ((struct sockaddr_in *)&to[k])->sin_port = htons(p);
            else
                ((struct sockaddr_in6 *)&to[k])->sin6_port = htons(p);
            msg[k] = (struct mmsghdr){.msg_hdr = {.msg_name = &to[k], .msg_namelen = sl,
                                                  .msg_iov = &iov, .msg_iovlen = 1}};
        }
        /* a datagram the kernel refuses is skipped, as one sendto each was */
        for (uint32_t off = 0; off < n;) {
            int r = sendmmsg(fd, msg + off, n - off, 0);
            if (r < 0) {
                off++;
                continue;
            }
            off += (uint32_t)r;
            sent += (uint32_t)r;
        }
        i += n;
        if (pps > 0) {
            long due = t0 + (long)((uint64_t)i * 1000 / pps);
            long now = now_ms();
            if (due > now)
                usleep((useconds_t)(due - now) * 1000);
        }
    }
    printf("sent %" PRIu32 "\n", sent);
    return 0;
}

/* Short flows back to back: each a new socket (a new source port, so a new
 * flow for conntrack and the guard), one byte echoed by `serve`, closed. TCP
 * waits for the server's close first, so TIME_WAIT stays on the server's side
 * and the client's ports are not used up. */
static int connrate(const char *proto, const char *addr, uint16_t port, long ms) {
    struct sockaddr_storage ss;
    socklen_t sl;
    if (sockaddr_of(addr, port, &ss, &sl) < 0)
        return usage();
    bool tcp = strcmp(proto, "tcp") == 0;
    if (!tcp && strcmp(proto, "udp") != 0)
        return usage();
    const struct timeval tmo = {.tv_sec = 1};
    uint64_t ok = 0, failed = 0;
    long t0 = now_ms(), end = t0 + ms;
    while (now_ms() < end && failed < 1000) {
        _cleanup_close_ int fd = socket(ss.ss_family, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return fail(NULL, "socket", -errno);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tmo, sizeof(tmo));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tmo, sizeof(tmo));
        char c = 'x';
        bool good = connect(fd, (struct sockaddr *)&ss, sl) == 0 && send(fd, &c, 1, MSG_NOSIGNAL) == 1 &&
                    recv(fd, &c, 1, 0) == 1 && c == 'x';
        if (good && tcp)
            good = recv(fd, &c, 1, 0) == 0; /* the server's close */
        if (good)
            ok++;
        else
            failed++;
    }
    printf("flows %" PRIu64 " ms %ld failed %" PRIu64 "\n", ok, now_ms() - t0, failed);
    return failed < 1000 ? 0 : 1;
}

static int probe(const char *proto, const char *addr, uint16_t port, long timeout_ms) {
    struct sockaddr_storage ss;
    socklen_t sl;
    if (sockaddr_of(addr, port, &ss, &sl) < 0)
        return usage();
    bool tcp = strcmp(proto, "tcp") == 0;
    long t0 = now_ms(), deadline = t0 + timeout_ms;
    _cleanup_close_ int fd =
        socket(ss.ss_family, (tcp ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return report(errno, t0);
    if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS)
        return report(errno, t0);
    if (tcp) {
        int r = wait_fd(fd, POLLOUT, deadline);
        if (r < 0)
            return report(-r, t0);
        int soerr = 0;
        socklen_t el = sizeof(soerr);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el);
        if (soerr)
            return report(soerr, t0);
    }
    static const char ping[] = "lyh-ping";
    if (send(fd, ping, sizeof(ping), MSG_NOSIGNAL) < 0)
        return report(errno, t0);
    char buf[64];
    for (;;) {
        int r = wait_fd(fd, POLLIN, deadline);
        if (r < 0)
            return report(-r, t0);
        ssize_t got = recv(fd, buf, sizeof(buf), 0);
        if (got < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (got < 0)
            return report(errno, t0);
        if (got == (ssize_t)sizeof(ping) && memcmp(buf, ping, sizeof(ping)) == 0)
            return report(0, t0);
        return report(EPROTO, t0);
    }
}

/* A bounded echo server: one TCP listener (connections served one at a time, each
 * with a short deadline) and one UDP socket; exits after `seconds`. */
static int serve(const char *addr, uint16_t port, long seconds, uint32_t mark) {
    struct sockaddr_storage ss;
    socklen_t sl;
    if (sockaddr_of(addr, port, &ss, &sl) < 0)
        return usage();
    int one = 1;
    _cleanup_close_ int t = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    _cleanup_close_ int u = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (t < 0 || u < 0)
        return fail(NULL, "socket", -errno);
    setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (mark && (setsockopt(t, SOL_SOCKET, SO_MARK, &mark, sizeof(mark)) < 0 ||
                 setsockopt(u, SOL_SOCKET, SO_MARK, &mark, sizeof(mark)) < 0))
        return fail(NULL, "SO_MARK", -errno);
    if (ss.ss_family == AF_INET6) {
        setsockopt(t, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        setsockopt(u, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
    if (bind(t, (struct sockaddr *)&ss, sl) < 0 || listen(t, 16) < 0 ||
        bind(u, (struct sockaddr *)&ss, sl) < 0)
        return fail(NULL, "bind", -errno);
    printf("serving %s %u\n", addr, port);
    fflush(stdout);
    long deadline = now_ms() + seconds * 1000L;
    while (now_ms() < deadline) {
        struct pollfd p[2] = { { .fd = t, .events = POLLIN }, { .fd = u, .events = POLLIN } };
        int r = poll(p, 2, 500);
        if (r <= 0)
            continue;
        char buf[512];
        if (p[1].revents & POLLIN) {
            struct sockaddr_storage from;
            socklen_t fl = sizeof(from);
            ssize_t got = recvfrom(u, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
            if (got > 0)
                sendto(u, buf, (size_t)got, 0, (struct sockaddr *)&from, fl);
        }
        if (p[0].revents & POLLIN) {
            _cleanup_close_ int c = accept4(t, NULL, NULL, SOCK_CLOEXEC);
            if (c < 0)
                continue;
            struct pollfd pc = { .fd = c, .events = POLLIN };
            if (poll(&pc, 1, 2000) > 0) {
                ssize_t got = recv(c, buf, sizeof(buf), MSG_DONTWAIT);
                if (got > 0)
                    send(c, buf, (size_t)got, MSG_NOSIGNAL);
            }
        }
    }
    return 0;
}

/* NFLOG listener: enough of nfnetlink_log to see which prefixes the rules log. */
static int nflog_cfg(struct mnl_socket *nl, uint16_t group, uint16_t attr, const void *data, size_t len,
                     uint32_t seq) {
    char buf[8192];
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    nlh->nlmsg_seq = seq;
    struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
    g->nfgen_family = AF_UNSPEC;
    g->version = NFNETLINK_V0;
    g->res_id = htons(group);
    mnl_attr_put(nlh, attr, len, data);
    if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
        return -errno;
    ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
    if (n < 0)
        return -errno;
    return mnl_cb_run(buf, (size_t)n, seq, mnl_socket_get_portid(nl), NULL, NULL) < 0 ? -errno : 0;
}

static int prefix_attr_cb(const struct nlattr *a, void *data) {
    if (mnl_attr_get_type(a) == NFULA_PREFIX)
        *(const char **)data = mnl_attr_get_str(a);
    return MNL_CB_OK;
}

static int nflog(uint16_t group, long seconds, long count) {
    struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
    if (!nl)
        return fail(NULL, "nflog socket", -errno);
    int r = mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0 ? -errno : 0;
    struct nfulnl_msg_config_cmd cmd = { .command = NFULNL_CFG_CMD_BIND };
    struct nfulnl_msg_config_mode mode = { .copy_range = htonl(0), .copy_mode = NFULNL_COPY_META };
    if (r == 0)
        r = nflog_cfg(nl, group, NFULA_CFG_CMD, &cmd, sizeof(cmd), 1);
    /* deliver each event at once (the default batches up to 100 events or 1 s) */
    uint32_t qthresh = htonl(1);
    if (r == 0)
        r = nflog_cfg(nl, group, NFULA_CFG_MODE, &mode, sizeof(mode), 2);
    if (r == 0)
        r = nflog_cfg(nl, group, NFULA_CFG_QTHRESH, &qthresh, sizeof(qthresh), 3);
    if (r < 0) {
        mnl_socket_close(nl);
        return fail(NULL, "nflog bind", r);
    }
    printf("listening\n");
    fflush(stdout);
    long deadline = now_ms() + seconds * 1000L, seen = 0;
    static char buf[65536];
    while (seen < count && now_ms() < deadline) {
        struct pollfd p = { .fd = mnl_socket_get_fd(nl), .events = POLLIN };
        if (poll(&p, 1, 200) <= 0)
            continue;
        ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
        if (n < 0)
            continue;
        int left = (int)n;
        for (struct nlmsghdr *nlh = (struct nlmsghdr *)buf; mnl_nlmsg_ok(nlh, left);
             nlh = mnl_nlmsg_next(nlh, &left)) {
            if (nlh->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET))
                continue;
            const char *prefix = NULL;
            mnl_attr_parse(nlh, sizeof(struct nfgenmsg), prefix_attr_cb, &prefix);
            printf("[%s]\n", prefix ? prefix : "");
            fflush(stdout);
            seen++;
        }
    }
    mnl_socket_close(nl);
    return 0;
}

static int cgroup_id(const char *path) {
    struct {
        struct file_handle fh;
        uint64_t id;
    } h = { .fh.handle_bytes = sizeof(uint64_t) };
    int mount_id;
    if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mount_id, 0) < 0)
        return fail(NULL, path, -errno);
    if (h.fh.handle_bytes != sizeof(uint64_t))
        return fail(NULL, "unexpected handle size", -EPROTO);
    uint64_t id;
    memcpy(&id, h.fh.f_handle, sizeof(id));
    printf("%" PRIu64 "\n", id);
    return 0;
}

/* ---- main ---------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    if (argc < 2)
        return usage();
    const char *cmd = argv[1];
    int r;

    if (strcmp(cmd, "probe") == 0) {
        uint32_t port, timeout;
        if (argc != 6 || parse_u32(argv[4], &port) < 0 || port > 65535 || parse_u32(argv[5], &timeout) < 0)
            return usage();
        return probe(argv[2], argv[3], (uint16_t)port, timeout);
    }
    if (strcmp(cmd, "burst") == 0) {
        uint32_t port, count, pps;
        if (argc != 6 || parse_u32(argv[3], &port) < 0 || port == 0 || port > 65535 ||
            parse_u32(argv[4], &count) < 0 || parse_u32(argv[5], &pps) < 0)
            return usage();
        return burst(argv[2], (uint16_t)port, count, pps);
    }
    if (strcmp(cmd, "connrate") == 0) {
        uint32_t port, ms;
        if (argc != 6 || parse_u32(argv[4], &port) < 0 || port == 0 || port > 65535 ||
            parse_u32(argv[5], &ms) < 0 || ms == 0 || ms > 600000)
            return usage();
        return connrate(argv[2], argv[3], (uint16_t)port, ms);
    }
    if (strcmp(cmd, "serve") == 0) {
        uint32_t port, secs, mark = 0;
        if ((argc != 5 && argc != 6) || parse_u32(argv[3], &port) < 0 || port > 65535 ||
            parse_u32(argv[4], &secs) < 0 || (argc == 6 && parse_u32(argv[5], &mark) < 0))
            return usage();
        return serve(argv[2], (uint16_t)port, secs, mark);
    }
    if (strcmp(cmd, "nflog") == 0) {
        uint32_t group, secs, count;
        if (argc != 5 || parse_u32(argv[2], &group) < 0 || group > UINT16_MAX || parse_u32(argv[3], &secs) < 0 ||
            parse_u32(argv[4], &count) < 0)
            return usage();
        return nflog((uint16_t)group, secs, count);
    }
    if (strcmp(cmd, "cgroup-id") == 0)
        return argc == 3 ? cgroup_id(argv[2]) : usage();

    if (strcmp(cmd, "render-base") == 0 || strcmp(cmd, "base") == 0) {
        struct nftr_base_params p;
        if (parse_base(argc - 2, argv + 2, &p) < 0)
            return usage();
        if (cmd[0] == 'r') {
            struct nftr_base *b = NULL;
            _cleanup_free_ char *text = NULL;
            r = nftr_render_base(&p, &b);
            if (r == 0)
                r = nftr_base_text(b, &text);
            nftr_base_free(b);
            if (r < 0)
                return fail(NULL, "render", r);
            fputs(text, stdout);
            return 0;
        }
        struct nft *n = NULL;
        unsigned flags = 0;
        r = nft_open(&n);
        if (r < 0)
            return fail(NULL, "open", r);
        r = nft_ensure_base(n, &p, &flags);
        if (r < 0) {
            r = fail(n, "ensure base", r);
            nft_close(n);
            return r;
        }
        nft_close(n);
        puts(flags & NFT_BASE_CREATED ? "created" : flags & NFT_BASE_REBUILT ? "rebuilt" : "unchanged");
        return 0;
    }

    /* chain and data rendering subcommands */
    struct policy_args pa = { .nlan = 0 };
    struct nftr_chain *c = NULL;
    _cleanup_(nftr_data_freep) struct nftr_data *dd = NULL;
    bool do_render = false, add_uidish = false;
    if (strcmp(cmd, "render-data") == 0 || strcmp(cmd, "add-data") == 0 ||
        strcmp(cmd, "del-data") == 0) {
        uint64_t cg;
        if (argc < 5 || parse_u64(argv[3], &cg) < 0 || parse_policy(argc - 5, argv + 5, &pa) < 0)
            return usage();
        struct nftr_input in = input_of(NFTR_SCOPE_SESSION, argv[2], cg, 0, argv[4], &pa);
        r = nftr_render_data(&in, &dd);
        if (r < 0)
            return fail(NULL, "render", r);
        do_render = cmd[0] == 'r';
    } else if (strcmp(cmd, "add-session") == 0 || strcmp(cmd, "render-session") == 0) {
        uint64_t cg;
        if (argc < 5 || parse_u64(argv[3], &cg) < 0 || parse_policy(argc - 5, argv + 5, &pa) < 0)
            return usage();
        r = render(NFTR_SCOPE_SESSION, argv[2], cg, 0, argv[4], &pa, &c);
        if (r < 0)
            return fail(NULL, "render", r);
        do_render = cmd[0] == 'r';
    } else if (strcmp(cmd, "add-uid") == 0 || strcmp(cmd, "add-shared") == 0 ||
               strcmp(cmd, "render-uid") == 0 || strcmp(cmd, "render-shared") == 0) {
        uint32_t uid;
        if (argc < 4 || parse_u32(argv[2], &uid) < 0 || parse_policy(argc - 4, argv + 4, &pa) < 0)
            return usage();
        bool shared = strstr(cmd, "shared") != NULL;
        r = render(shared ? NFTR_SCOPE_SHARED_USER : NFTR_SCOPE_UID, NULL, 0, uid, argv[3], &pa, &c);
        if (r < 0)
            return fail(NULL, "render", r);
        do_render = cmd[0] == 'r';
        add_uidish = true;
    }
    if (do_render) {
        _cleanup_free_ char *text = NULL;
        r = dd ? nftr_data_text(dd, &text) : nftr_chain_text(c, &text);
        nftr_chain_free(c);
        if (r < 0)
            return fail(NULL, "render", r);
        fputs(text, stdout);
        return 0;
    }

    struct nft *n = NULL;
    r = nft_open(&n);
    if (r < 0) {
        nftr_chain_free(c);
        return fail(NULL, "open", r);
    }
    int rc = 0;
    if (c) {
        r = add_uidish ? nft_uid_chain_add(n, c) : nft_session_add(n, c);
        if (r < 0)
            rc = fail(n, "add", r);
        nftr_chain_free(c);
    } else if (dd) {
        bool searched = false;
        r = cmd[0] == 'a' ? nft_data_add(n, dd) : nft_data_del(n, dd, &searched);
        if (r < 0)
            rc = fail(n, cmd, r);
        if (searched)
            puts("piece by piece");
    } else if (strcmp(cmd, "del-session") == 0 && argc == 4) {
        uint64_t cg;
        char name[NFTR_NAME_MAX];
        if (parse_u64(argv[3], &cg) < 0 || nftr_chain_name(NFTR_SCOPE_SESSION, argv[2], 0, name) < 0) {
            rc = usage();
        } else if ((r = nft_session_del(n, name, cg, 0)) < 0) {
            rc = fail(n, "del-session", r);
        }
    } else if ((strcmp(cmd, "del-uid") == 0 || strcmp(cmd, "del-shared") == 0) && argc == 3) {
        uint32_t uid;
        if (parse_u32(argv[2], &uid) < 0)
            rc = usage();
        else if ((r = nft_uid_chain_del(n, cmd[4] == 's' ? NFTR_SCOPE_SHARED_USER : NFTR_SCOPE_UID, uid)) < 0)
            rc = fail(n, "del", r);
    } else if (strcmp(cmd, "list") == 0) {
        char **names = NULL;
        size_t nn = 0;
        if ((r = nft_list_chains(n, &names, &nn)) < 0) {
            rc = fail(n, "list", r);
        } else {
            for (size_t i = 0; i < nn; i++)
                puts(names[i]);
            nft_names_free(names);
        }
    } else if (strcmp(cmd, "sessions") == 0) {
        struct nft_session_elem *v = NULL;
        size_t nv = 0;
        if ((r = nft_list_sessions(n, &v, &nv)) < 0) {
            rc = fail(n, "sessions", r);
        } else {
            for (size_t i = 0; i < nv; i++)
                printf("%" PRIu64 " %s\n", v[i].cgroup_id, v[i].chain);
            free(v);
        }
    } else if (strcmp(cmd, "counters") == 0 && argc == 3) {
        struct nft_counters k;
        /* a session in the data layout has no chain s-<id>: its named counters */
        r = nft_chain_counters(n, argv[2], &k);
        if (r == -ENOENT && strncmp(argv[2], NFTR_SESSION_CHAIN_PREFIX,
                                    strlen(NFTR_SESSION_CHAIN_PREFIX)) == 0)
            r = nft_data_counters(n, argv[2] + strlen(NFTR_SESSION_CHAIN_PREFIX), &k, NULL);
        if (r < 0)
            rc = fail(n, "counters", r);
        else
            printf("accept_packets=%" PRIu64 " accept_bytes=%" PRIu64 " reject_packets=%" PRIu64
                   " reject_bytes=%" PRIu64 " accept_flows=%" PRIu64 "\n",
                   k.accept_packets, k.accept_bytes, k.reject_packets, k.reject_bytes,
                   k.accept_flows);
    } else if (strcmp(cmd, "mark-packets") == 0 && argc == 4) {
        char *end;
        unsigned long m = strtoul(argv[3], &end, 0);
        uint64_t pk = 0;
        if (*end || end == argv[3] || m > UINT32_MAX) {
            rc = usage();
        } else if ((r = nft_chain_mark_packets(n, argv[2], (uint32_t)m, &pk)) == -ENODATA) {
            printf("cannot tell\n");
            rc = 3;
        } else if (r < 0) {
            rc = fail(n, "mark-packets", r);
        } else {
            printf("packets %" PRIu64 "\n", pk);
        }
    } else if (strcmp(cmd, "delete-table") == 0) {
        if ((r = nft_table_delete(n)) < 0)
            rc = fail(n, "delete-table", r);
    } else {
        rc = usage();
    }
    nft_close(n);
    return rc;
}
