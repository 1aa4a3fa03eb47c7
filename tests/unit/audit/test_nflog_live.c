/* Live test of audit/nflog.c against the running kernel, inside a network
 * namespace of its own: the process unshares CLONE_NEWNET before it opens
 * any socket, brings its private lo up, loads a small nftables ruleset with
 * `nft -f -` (in that namespace only) that logs to NFLOG group 7, sends UDP
 * datagrams to 127.0.0.1 and ::1, and reads the events back through
 * nflog_open / nflog_read. The namespace, its ruleset and its NFLOG
 * instances vanish when the process exits.
 *
 * Skipped (with the reason) when not root, when unshare(CLONE_NEWNET) fails
 * or when nft is not installed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "audit/nflog.h"

#define GROUP 7
#define SESSION_ID "0123456789abcdef"
#define BURST 20000

static const char ruleset[] =
    "table inet lyhtest {\n"
    "  chain output {\n"
    "    type filter hook output priority 0; policy accept;\n"
    "    udp dport 9 log prefix \"lyh:" SESSION_ID ":D \" group 7\n"
    "    udp dport 9 drop\n"
    "    ct state new udp dport 10 log prefix \"lyh:LYH-1000:A \" group 7\n"
    "  }\n"
    "}\n";

static char skip_reason[160];

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the namespace ------------------------------------------------------------ */

static int lo_up(void) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    int r = 0;
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
        r = -errno;
    } else {
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
            r = -errno;
    }
    close(fd);
    return r;
}

/* 0, or the exit status of nft (127: not found). */
static int load_ruleset(void) {
    FILE *f = popen("PATH=/usr/sbin:/sbin:/usr/bin:/bin:$PATH nft -f - 2>&1", "we");
    if (!f)
        return -errno;
    fputs(ruleset, f);
    int st = pclose(f);
    if (st < 0)
        return -errno;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Everything here runs before any test and before any socket exists. */
static void prepare(void) {
    if (geteuid() != 0) {
        snprintf(skip_reason, sizeof(skip_reason), "not root (needs CAP_NET_ADMIN)");
        return;
    }
    if (unshare(CLONE_NEWNET) < 0) {
        snprintf(skip_reason, sizeof(skip_reason), "unshare(CLONE_NEWNET) failed: %s",
                 strerror(errno));
        return;
    }
    int r = lo_up();
    if (r < 0) {
        snprintf(skip_reason, sizeof(skip_reason), "cannot bring lo up: %s", strerror(-r));
        return;
    }
    r = load_ruleset();
    if (r == 127)
        snprintf(skip_reason, sizeof(skip_reason), "nft is not installed");
    else if (r != 0)
        snprintf(skip_reason, sizeof(skip_reason), "nft -f - failed (%d)", r);
}

#define SKIP_UNLESS_READY()                                                        \
    do {                                                                           \
        if (skip_reason[0]) {                                                      \
            print_message("[  SKIP    ] nflog live test: %s\n", skip_reason);      \
            skip();                                                                \
        }                                                                          \
    } while (0)

/* ---- traffic -------------------------------------------------------------------- */

/* A UDP socket bound to the loopback address of family, with its port. */
static int udp_socket(int family, uint16_t *ret_port) {
    int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sl = sizeof(*a);
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        sl = sizeof(*a);
    }
    assert_int_equal(bind(fd, (struct sockaddr *)&ss, sl), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &sl), 0);
    *ret_port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                        : ((struct sockaddr_in6 *)&ss)->sin6_port);
    return fd;
}

/* Send one datagram to the loopback address; the drop rule makes port 9 fail
 * with EPERM, which is expected. */
static void send_to(int fd, int family, uint16_t port) {
    static const char data[] = "lyh";
    ssize_t n;
    if (family == AF_INET) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        n = sendto(fd, data, sizeof(data), 0, (struct sockaddr *)&a, sizeof(a));
    } else {
        struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons(port),
                                 .sin6_addr = in6addr_loopback};
        n = sendto(fd, data, sizeof(data), 0, (struct sockaddr *)&a, sizeof(a));
    }
    if (port == 9)
        assert_true(n < 0 && errno == EPERM);
    else
        assert_int_equal(n, (ssize_t)sizeof(data));
}

/* ---- collecting events ------------------------------------------------------------- */

#define MAX_EV 64

struct got {
    int n;
    struct nflog_pkt ev[MAX_EV];
    uint64_t port9, port10;
    uint32_t last_seq;
    bool seq_ordered;
};

static void collect(const struct nflog_pkt *p, void *ud) {
    struct got *g = ud;
    if (g->n > 0 && p->seq <= g->last_seq)
        g->seq_ordered = false;
    g->last_seq = p->seq;
    if (g->n < MAX_EV)
        g->ev[g->n] = *p;
    g->n++;
    if (p->has_ports && p->dport == 9)
        g->port9++;
    if (p->has_ports && p->dport == 10)
        g->port10++;
}

/* Read until want events arrived or timeout_ms passed. */
static void read_until(struct nflog *n, struct got *g, int want, int timeout_ms,
                       struct nflog_read_stats *st) {
    int64_t deadline = now_ms() + timeout_ms;
    while (g->n < want) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            break;
        struct pollfd pfd = {.fd = nflog_fd(n), .events = POLLIN};
        int pr = poll(&pfd, 1, (int)left);
        assert_true(pr >= 0);
        if (pr == 0)
            continue;
        int r;
        while ((r = nflog_read(n, 16, collect, g, st)) == 1)
            ;
        assert_int_equal(r, 0);
    }
}

/* Read until nothing arrives for quiet_ms (bounded by timeout_ms). */
static void drain(struct nflog *n, struct got *g, int quiet_ms, int timeout_ms,
                  struct nflog_read_stats *st) {
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            break;
        struct pollfd pfd = {.fd = nflog_fd(n), .events = POLLIN};
        int pr = poll(&pfd, 1, left < quiet_ms ? (int)left : quiet_ms);
        assert_true(pr >= 0);
        if (pr == 0)
            break;
        int r;
        while ((r = nflog_read(n, 16, collect, g, st)) == 1)
            ;
        assert_int_equal(r, 0);
    }
}

static struct nflog *open_group(uint32_t rcvbuf) {
    struct nflog_params p = {
        .group = GROUP, .copy_range = 128, .rcvbuf = rcvbuf, .qthresh = 64, .flush_ms = 10};
    struct nflog *n = NULL;
    int r = nflog_open(&p, &n);
    if (r < 0)
        fail_msg("nflog_open: %s", strerror(-r));
    return n;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_events(void **state) {
    (void)state;
    SKIP_UNLESS_READY();
    struct nflog *n = open_group(1u << 20);
    int fl = fcntl(nflog_fd(n), F_GETFL);
    assert_true(fl >= 0 && (fl & O_NONBLOCK));
    assert_true(fcntl(nflog_fd(n), F_GETFD) & FD_CLOEXEC);

    uint16_t p4, p6, pa, pb;
    int s4 = udp_socket(AF_INET, &p4), s6 = udp_socket(AF_INET6, &p6);
    int sa = udp_socket(AF_INET, &pa), sb = udp_socket(AF_INET, &pb);
    /* in this order: seq 0..6 */
    send_to(s4, AF_INET, 9);
    send_to(s4, AF_INET, 9);
    send_to(s6, AF_INET6, 9);
    send_to(s4, AF_INET, 9);
    send_to(s6, AF_INET6, 9);
    send_to(sa, AF_INET, 10);
    send_to(sb, AF_INET, 10);

    struct got g = {.seq_ordered = true};
    struct nflog_read_stats st = {0};
    read_until(n, &g, 7, 2000, &st);
    drain(n, &g, 50, 500, &st); /* and nothing more */
    assert_int_equal(g.n, 7);
    assert_int_equal(st.packets, 7);
    assert_int_equal(st.lost, 0);
    assert_int_equal(st.overruns, 0);
    assert_int_equal(st.bad, 0);

    const int fam[7] = {AF_INET, AF_INET, AF_INET6, AF_INET, AF_INET6, AF_INET, AF_INET};
    const uint16_t sport[7] = {p4, p4, p6, p4, p6, pa, pb};
    const uint16_t dport[7] = {9, 9, 9, 9, 9, 10, 10};
    unsigned lo = if_nametoindex("lo");
    uint8_t v4lo[4] = {127, 0, 0, 1};
    for (int i = 0; i < 7; i++) {
        const struct nflog_pkt *e = &g.ev[i];
        struct nflog_origin o;
        assert_true(e->has_seq);
        assert_int_equal(e->seq, (uint32_t)i); /* a new instance counts from 0 */
        assert_int_equal(e->family, fam[i]);
        assert_int_equal(e->protocol, IPPROTO_UDP);
        assert_true(e->has_ports);
        assert_int_equal(e->sport, sport[i]);
        assert_int_equal(e->dport, dport[i]);
        assert_true(e->has_uid);
        assert_int_equal(e->uid, getuid());
        assert_true(e->has_gid);
        assert_int_equal(e->gid, getgid());
        assert_int_equal(e->oif, lo);
        assert_int_equal(e->iif, 0);
        if (fam[i] == AF_INET) {
            assert_int_equal(e->addr_len, 4);
            assert_memory_equal(e->src, v4lo, 4);
            assert_memory_equal(e->dst, v4lo, 4);
            assert_int_equal(e->ip_len, 20 + 8 + 4);
        } else {
            assert_int_equal(e->addr_len, 16);
            assert_memory_equal(e->src, &in6addr_loopback, 16);
            assert_memory_equal(e->dst, &in6addr_loopback, 16);
            assert_int_equal(e->ip_len, 40 + 8 + 4);
        }
        assert_int_equal(nflog_prefix_parse(e->prefix, &o), 0);
        if (dport[i] == 9) {
            assert_string_equal(e->prefix, "lyh:" SESSION_ID ":D ");
            assert_int_equal(o.kind, NFLOG_ORIGIN_SESSION);
            assert_string_equal(o.session, SESSION_ID);
            assert_int_equal(o.verdict, 2);
        } else {
            assert_int_equal(o.kind, NFLOG_ORIGIN_UID);
            assert_string_equal(o.chain, "LYH-1000");
            assert_int_equal(o.uid, 1000);
            assert_int_equal(o.verdict, 1);
        }
    }
    print_message("[ INFO     ] output hook: NFULA_TIMESTAMP %s\n",
                  g.ev[0].has_time ? "present" : "absent");
    close(s4);
    close(s6);
    close(sa);
    close(sb);
    nflog_close(n);

    /* closing unbound the group: it can be bound again, and counts from 0 */
    n = open_group(0);
    int s = udp_socket(AF_INET, &p4);
    send_to(s, AF_INET, 9);
    struct got g2 = {.seq_ordered = true};
    memset(&st, 0, sizeof(st));
    read_until(n, &g2, 1, 2000, &st);
    assert_int_equal(g2.n, 1);
    assert_int_equal(g2.ev[0].seq, 0);
    close(s);
    nflog_close(n);
}

static void test_busy(void **state) {
    (void)state;
    SKIP_UNLESS_READY();
    struct nflog *a = open_group(0);
    struct nflog_params p = {.group = GROUP, .copy_range = 128, .qthresh = 1, .flush_ms = 10};
    struct nflog *b = NULL;
    assert_int_equal(nflog_open(&p, &b), -EBUSY);
    assert_null(b);
    /* another group is free */
    p.group = GROUP + 1;
    assert_int_equal(nflog_open(&p, &b), 0);
    nflog_close(b);
    b = NULL;
    /* once the owner closes, the group is free again */
    nflog_close(a);
    p.group = GROUP;
    assert_int_equal(nflog_open(&p, &b), 0);
    nflog_close(b);

    /* parameters the kernel would misread are refused before any socket */
    p.copy_range = 0;
    assert_int_equal(nflog_open(&p, &b), -EINVAL);
    p.copy_range = 70000;
    assert_int_equal(nflog_open(&p, &b), -EINVAL);
    p.copy_range = 128;
    p.qthresh = 0;
    assert_int_equal(nflog_open(&p, &b), -EINVAL);
    nflog_close(NULL);
}

static void test_burst(void **state) {
    (void)state;
    SKIP_UNLESS_READY();
    struct nflog *n = open_group(64u * 1024u);
    uint16_t port, mport;
    int s = udp_socket(AF_INET, &port);

    /* Nobody reads while the burst goes out: the socket overruns. */
    for (int i = 0; i < BURST; i++)
        send_to(s, AF_INET, 9);

    struct got g = {.seq_ordered = true};
    struct nflog_read_stats st = {0};
    drain(n, &g, 200, 5000, &st);
    uint64_t before_marker = g.port9;

    /* Losses at the tail only show at the next event: send one more, to port
     * 10 (same group, same instance counter), and read until it arrives. */
    int m = udp_socket(AF_INET, &mport);
    send_to(m, AF_INET, 10);
    int64_t deadline = now_ms() + 2000;
    while (g.port10 == 0 && now_ms() < deadline)
        read_until(n, &g, g.n + 1, 200, &st);
    assert_int_equal(g.port10, 1);
    assert_int_equal(g.port9, before_marker);
    assert_true(g.seq_ordered);
    assert_int_equal(g.last_seq, BURST); /* the marker: seq 0..BURST-1 were the burst */

    print_message("[ INFO     ] burst of %d: %llu received, %llu lost, %llu overruns, "
                  "%llu bad\n",
                  BURST, (unsigned long long)g.port9, (unsigned long long)st.lost,
                  (unsigned long long)st.overruns, (unsigned long long)st.bad);
    assert_int_equal(g.port9 + st.lost, BURST);
    assert_int_equal(st.packets, g.port9 + 1);
    assert_true(st.lost > 0);
    assert_true(st.overruns > 0);
    assert_int_equal(st.bad, 0);
    close(s);
    close(m);
    nflog_close(n);
}

int main(void) {
    prepare();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_busy),
        cmocka_unit_test(test_burst),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
