/* nflog: one nfnetlink_log socket bound to one NFLOG group.
 *
 * Owns: the NETLINK_NETFILTER socket, its receive buffer, the configuration
 * of the group's kernel instance and the sequence bookkeeping that turns the
 * kernel's NFULA_SEQ into a count of lost events. Must never: block outside
 * nflog_open's wait for its ACK, log, change the per-family logger bindings
 * of the network namespace, or deliver a message that did not come from the
 * kernel.
 *
 * How the kernel behaves, and what follows (net/netfilter/nfnetlink_log.c):
 * - One instance per group and network namespace, owned by the socket that
 *   bound it; it dies with that socket (NETLINK_URELEASE). A second socket's
 *   BIND is refused with EPERM (the owner check runs before the command; the
 *   same socket binding twice gets EBUSY). nfnetlink answers EPERM as well
 *   to a sender without CAP_NET_ADMIN, so on EPERM we look the group up in
 *   /proc/self/net/netfilter/nfnetlink_log: listed means taken (-EBUSY).
 * - BIND and the settings go in one config message: the kernel creates the
 *   instance and then applies mode, buffer size, timeout, threshold and flags
 *   from the same message, so no event is ever sent without NFULA_SEQ and the
 *   first one carries seq 0. NFULA_CFG_NLBUFSIZ outside [NLMSG_GOODSIZE,
 *   128 KiB] is ignored by the kernel without an error, hence the constant.
 * - NFULA_UID / NFULA_GID need no flag: the kernel adds them whenever the
 *   packet belongs to a full socket with a file (fsuid/fsgid of the opener,
 *   mapped into our user namespace). There is no NFULNL_CFG_F_UID.
 * - NFULA_SEQ is the instance's counter, incremented for each message built
 *   (u32, wraps). Events the socket could not take (receive buffer full) were
 *   numbered before the unicast failed, so they show as a gap at the next
 *   event; the failed unicast also sets ENOBUFS on the socket, which the next
 *   recv() returns once per congestion episode (not once per dropped batch).
 *   The gap counts the loss; ENOBUFS only counts the overrun, so nothing is
 *   counted twice. Events lost after the last one we see are not known until
 *   another arrives.
 * - We do not send NFULNL_CFG_CMD_PF_UNBIND / PF_BIND: on current kernels
 *   nft's `log group` reaches nfnetlink_log without them, and they rebind the
 *   namespace's default logger for the family (/proc/net/netfilter/nf_log),
 *   which belongs to the administrator.
 * - Anyone may unicast to a netlink port id, so a datagram whose sender is
 *   not the kernel (nl_pid != 0) is dropped unread and counted as bad. */
#include "audit/nflog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/macros.h"

/* The kernel's largest per-instance batch (nfulnl_set_nlbufsiz). */
#define NFLOG_NLBUFSIZ     (128u * 1024u)
/* One recv() returns one kernel skb, allocated for NFLOG_NLBUFSIZ but filled
 * to its tailroom, which kmalloc rounds up to the next power of two: just
 * under 256 KiB. A batch never exceeds this buffer. */
#define NFLOG_RECV_BUF     (2u * NFLOG_NLBUFSIZ + 4096u)
#define NFLOG_COPY_MAX     (0xffffu - NLA_HDRLEN) /* NFULNL_COPY_RANGE_MAX */
#define NFLOG_ACK_TIMEOUT_MS 1000
#define NFLOG_REQ_SIZE     256
#define NFLOG_PROC_INSTANCES "/proc/self/net/netfilter/nfnetlink_log"

struct nflog {
    struct mnl_socket *nl; /* owned; NULL: an adopted socket */
    int fd;                /* the socket (nl's, or the adopted one, owned then) */
    uint32_t portid;
    uint32_t req_seq;      /* netlink sequence of our requests */
    uint16_t group;
    bool bound;            /* the kernel instance exists: unbind on close */
    uint32_t next_seq;     /* NFULA_SEQ expected next */
    uint8_t *buf;          /* owned, NFLOG_RECV_BUF bytes */
};

uint32_t nflog_seq_advance(uint32_t *next, uint32_t seq) {
    uint32_t gap = seq - *next; /* mod 2^32: wraparound included */
    /* The kernel numbers events in order and delivers them in order, so a
     * "gap" of more than 2^31 is a number we already passed: count nothing
     * and keep our place. */
    if (gap >= UINT32_C(0x80000000))
        return 0;
    *next = seq + 1;
    return gap;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct nlmsghdr *config_msg(struct nflog *n, void *buf, uint8_t cmd) {
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
    nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    if (++n->req_seq == 0)
        n->req_seq = 1;
    nlh->nlmsg_seq = n->req_seq;
    struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
    g->nfgen_family = AF_UNSPEC;
    g->version = NFNETLINK_V0;
    g->res_id = htons(n->group);
    struct nfulnl_msg_config_cmd c = {.command = cmd};
    mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(c), &c);
    return nlh;
}

/* The ACK of our request in one datagram: 0 when found (*ret_err set), or
 * -EAGAIN when it is not in there (packets that raced the ACK are dropped
 * here; their sequence numbers make them count as lost). */
static int find_ack(const uint8_t *b, size_t len, uint32_t seq, uint32_t portid, int *ret_err) {
    int left = (int)len; /* <= NFLOG_RECV_BUF */
    for (const struct nlmsghdr *nlh = (const void *)b; mnl_nlmsg_ok(nlh, left);
         nlh = mnl_nlmsg_next(nlh, &left)) {
        if (nlh->nlmsg_type != NLMSG_ERROR || nlh->nlmsg_seq != seq || nlh->nlmsg_pid != portid)
            continue;
        if (mnl_nlmsg_get_payload_len(nlh) < sizeof(struct nlmsgerr))
            return -EPROTO;
        const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
        if (e->error > 0 || e->error < -4095)
            return -EPROTO;
        *ret_err = e->error;
        return 0;
    }
    return -EAGAIN;
}

/* Send one request and wait (poll, bounded) for its ACK. Returns the
 * kernel's answer (0 or -errno) or our own failure. */
static int transact(struct nflog *n, struct nlmsghdr *nlh) {
    int fd = mnl_socket_get_fd(n->nl);
    ssize_t sent = mnl_socket_sendto(n->nl, nlh, nlh->nlmsg_len);
    if (sent < 0)
        return -errno;
    if ((size_t)sent != nlh->nlmsg_len)
        return -EIO;

    int64_t deadline = now_ms() + NFLOG_ACK_TIMEOUT_MS;
    for (;;) {
        int64_t now = now_ms();
        if (now >= deadline)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)(deadline - now));
        if (pr < 0 && errno != EINTR)
            return -errno;
        if (pr <= 0)
            continue;
        struct sockaddr_nl sa = {0};
        struct iovec iov = {.iov_base = n->buf, .iov_len = NFLOG_RECV_BUF};
        struct msghdr msg = {
            .msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov, .msg_iovlen = 1};
        ssize_t len = recvmsg(fd, &msg, MSG_DONTWAIT);
        if (len < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == ENOBUFS)
                continue; /* ENOBUFS: events lost; were the ACK lost too, we time out */
            return -errno;
        }
        if (msg.msg_namelen != sizeof(sa) || sa.nl_pid != 0)
            continue;
        int kerr = 0;
        int r = find_ack(n->buf, (size_t)len, nlh->nlmsg_seq, n->portid, &kerr);
        if (r == -EAGAIN)
            continue;
        return r < 0 ? r : kerr;
    }
}

/* Is `group` bound in this network namespace? Reads the kernel's instance
 * table ("%5u %6u ..." per instance, group first). */
static bool group_listed(uint16_t group) {
    int fd = open(NFLOG_PROC_INSTANCES, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    FILE *f = fdopen(fd, "re");
    if (!f) {
        close(fd);
        return false;
    }
    _cleanup_(fclosep_) FILE *fp = f;
    char line[128];
    while (fgets(line, sizeof(line), fp)) {
        unsigned g;
        if (sscanf(line, "%u", &g) == 1 && g == group)
            return true;
    }
    return false;
}

static int set_rcvbuf(int fd, uint32_t bytes) {
    if (bytes == 0)
        return 0;
    if (bytes > INT32_MAX / 2)
        return -EINVAL;
    int v = (int)bytes;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) == 0)
        return 0;
    if (errno != EPERM)
        return -errno;
    /* Without CAP_NET_ADMIN: the capped variant (net.core.rmem_max). */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)) < 0)
        return -errno;
    return 0;
}

static void nflog_closep(struct nflog **p) {
    if (*p) {
        int saved = errno;
        nflog_close(*p);
        *p = NULL;
        errno = saved;
    }
}

int nflog_open(const struct nflog_params *p, struct nflog **ret) {
    _cleanup_(nflog_closep) struct nflog *n = NULL;
    _Alignas(struct nlmsghdr) uint8_t req[NFLOG_REQ_SIZE] = {0};

    if (!p || !ret || p->copy_range == 0 || p->copy_range > NFLOG_COPY_MAX || p->qthresh == 0)
        return -EINVAL;
    n = calloc(1, sizeof(*n));
    if (!n)
        return -ENOMEM;
    n->fd = -1;
    n->group = p->group;
    n->buf = malloc(NFLOG_RECV_BUF);
    if (!n->buf)
        return -ENOMEM;
    /* Non-blocking: nflog_read runs in the daemon's loop; nflog_open's ACK
     * wait is a bounded poll. */
    n->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (!n->nl)
        return -errno;
    n->fd = mnl_socket_get_fd(n->nl);
    int r = set_rcvbuf(mnl_socket_get_fd(n->nl), p->rcvbuf);
    if (r < 0)
        return r;
    if (mnl_socket_bind(n->nl, 0, MNL_SOCKET_AUTOPID) < 0)
        return -errno;
    /* ACKs without a copy of the request. */
    int one = 1;
    (void)mnl_socket_setsockopt(n->nl, NETLINK_CAP_ACK, &one, sizeof(one));
    n->portid = mnl_socket_get_portid(n->nl);
    n->req_seq = (uint32_t)time(NULL);

    struct nlmsghdr *nlh = config_msg(n, req, NFULNL_CFG_CMD_BIND);
    struct nfulnl_msg_config_mode mode = {
        .copy_range = htonl(p->copy_range),
        .copy_mode = NFULNL_COPY_PACKET,
    };
    mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof(mode), &mode);
    mnl_attr_put_u32(nlh, NFULA_CFG_NLBUFSIZ, htonl(NFLOG_NLBUFSIZ));
    uint32_t ticks = p->flush_ms / 10 + (p->flush_ms % 10 != 0); /* 1/100 s, rounded up */
    mnl_attr_put_u32(nlh, NFULA_CFG_TIMEOUT, htonl(ticks ? ticks : 1));
    mnl_attr_put_u32(nlh, NFULA_CFG_QTHRESH, htonl(p->qthresh));
    mnl_attr_put_u16(nlh, NFULA_CFG_FLAGS, htons(NFULNL_CFG_F_SEQ));
    r = transact(n, nlh);
    if (r == -EPERM && group_listed(p->group))
        r = -EBUSY;
    if (r < 0)
        return r;
    n->bound = true;
    n->next_seq = 0; /* the instance is new: its first event is seq 0 */
    *ret = TAKE_PTR(n);
    return 0;
}

int nflog_fd(const struct nflog *n) {
    return n ? n->fd : -EINVAL;
}

int nflog_adopt(int fd, struct nflog **ret) {
    struct nflog *n = calloc(1, sizeof(*n));
    if (!n)
        return -ENOMEM;
    n->buf = malloc(NFLOG_RECV_BUF);
    if (!n->buf) {
        free(n);
        return -ENOMEM;
    }
    n->fd = fd;
    *ret = n;
    return 0;
}

/* ---- reading ---------------------------------------------------------------- */

struct read_ctx {
    struct nflog *n;
    nflog_pkt_fn fn;
    void *ud;
    struct nflog_read_stats *st;
};

static void on_pkt(const struct nflog_pkt *pkt, void *ud) {
    struct read_ctx *c = ud;

    c->st->packets++;
    if (pkt->has_seq)
        c->st->lost += nflog_seq_advance(&c->n->next_seq, pkt->seq);
    if (c->fn)
        c->fn(pkt, c->ud);
}

int nflog_read(struct nflog *n, unsigned max_reads, nflog_pkt_fn fn, void *ud,
               struct nflog_read_stats *stats) {
    if (!n || !stats)
        return -EINVAL;
    int fd = n->fd;
    struct read_ctx ctx = {.n = n, .fn = fn, .ud = ud, .st = stats};

    for (unsigned i = 0; i < max_reads; i++) {
        struct sockaddr_nl sa = {0};
        struct iovec iov = {.iov_base = n->buf, .iov_len = NFLOG_RECV_BUF};
        struct msghdr msg = {
            .msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov, .msg_iovlen = 1};
        ssize_t len = recvmsg(fd, &msg, MSG_DONTWAIT);
        if (len < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == ENOBUFS) {
                stats->overruns++; /* the loss itself shows as a sequence gap */
                continue;
            }
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (msg.msg_namelen != sizeof(sa) || sa.nl_pid != 0) {
            stats->bad++; /* not from the kernel: never decoded */
            continue;
        }
        /* MSG_TRUNC cannot happen with our buffer; if it did, the messages
         * that fit are used and the cut one is bad (and its successors show
         * as a gap). */
        int r = nflog_decode_buf_count(n->buf, (size_t)len, on_pkt, &ctx, &stats->bad);
        if (r < 0 && r != -EBADMSG)
            stats->bad++; /* an NLMSG_ERROR in the event stream: not expected */
    }
    /* max_reads used up: is there more? */
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLIN | POLLERR)))
        return 1;
    return 0;
}

void nflog_close(struct nflog *n) {
    if (!n)
        return;
    if (n->nl && n->bound) {
        /* Best effort: the kernel also destroys the instance when the socket
         * goes away; unbinding first just flushes it deterministically. */
        _Alignas(struct nlmsghdr) uint8_t req[NFLOG_REQ_SIZE] = {0};
        struct nlmsghdr *nlh = config_msg(n, req, NFULNL_CFG_CMD_UNBIND);
        nlh->nlmsg_flags = NLM_F_REQUEST;
        (void)mnl_socket_sendto(n->nl, nlh, nlh->nlmsg_len);
    }
    if (n->nl)
        mnl_socket_close(n->nl);
    else if (n->fd >= 0)
        close(n->fd);
    free(n->buf);
    free(n);
}
