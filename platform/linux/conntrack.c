/* conntrack: deletes the conntrack entries of a DNS forwarder that closed
 * (see conntrack.h for why).
 *
 * Owns: two NETLINK_NETFILTER sockets for the length of one call, one that
 * dumps the entries with the forwarder's mark (the kernel filters on it) and
 * one that deletes those whose reply direction comes from the forwarder's
 * port. Must never: delete an entry it did not see in the dump (each delete
 * names the entry's id: an entry made again meanwhile with the same addresses
 * and ports, by a live session, is left alone); log; run `conntrack`.
 *
 * The bytes read are the kernel's; the addresses and ports in them are what a
 * session's packets carried, so the walk checks every length anyway. */
#include "platform/linux/conntrack.h"

#include "common/macros.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>

/* what the kernel puts in one datagram of a dump at most (libmnl's
 * MNL_SOCKET_DUMP_SIZE, not in Debian 12's libmnl yet) */
#define CT_BUF_SIZE 32768

/* ---- the entry's reply direction -------------------------------------------- */

/* The attribute of type `type` among the len bytes at p, or NULL (-EBADMSG in
 * *err when the bytes do not form attributes). */
static const struct nlattr *attr_find(const void *p, size_t len, uint16_t type, int *err) {
    if (len > INT_MAX) {
        *err = -EBADMSG;
        return NULL;
    }
    const struct nlattr *a = p, *found = NULL;
    int left = (int)len;
    for (; mnl_attr_ok(a, left); a = mnl_attr_next(a)) {
        left -= (int)MNL_ALIGN(a->nla_len);
        if (!found && mnl_attr_get_type(a) == type)
            found = a;
    }
    /* a negative remainder is the padding after a last unaligned attribute */
    if (left > 0) {
        *err = -EBADMSG;
        return NULL;
    }
    return found;
}

int ct_is_forwarder_flow(const void *attrs, size_t len, uint16_t fwd_port) {
    static const uint8_t lo4[4] = {127, 0, 0, 1};
    static const uint8_t lo6[16] = {[15] = 1};
    int err = 0;

    const struct nlattr *t = attr_find(attrs, len, CTA_TUPLE_REPLY, &err);
    if (err || !t)
        return err;
    const void *tp = mnl_attr_get_payload(t);
    size_t tl = mnl_attr_get_payload_len(t);
    const struct nlattr *ip = attr_find(tp, tl, CTA_TUPLE_IP, &err);
    const struct nlattr *pr = attr_find(tp, tl, CTA_TUPLE_PROTO, &err);
    if (err || !ip || !pr)
        return err;

    const void *ipp = mnl_attr_get_payload(ip), *prp = mnl_attr_get_payload(pr);
    size_t ipl = mnl_attr_get_payload_len(ip), prl = mnl_attr_get_payload_len(pr);
    const struct nlattr *v4 = attr_find(ipp, ipl, CTA_IP_V4_SRC, &err);
    const struct nlattr *v6 = attr_find(ipp, ipl, CTA_IP_V6_SRC, &err);
    const struct nlattr *num = attr_find(prp, prl, CTA_PROTO_NUM, &err);
    const struct nlattr *sport = attr_find(prp, prl, CTA_PROTO_SRC_PORT, &err);
    if (err)
        return err;
    if (!num || !sport)
        return 0; /* a protocol without ports */
    if (mnl_attr_get_payload_len(num) != 1 || mnl_attr_get_payload_len(sport) != 2)
        return -EBADMSG;
    uint8_t proto = mnl_attr_get_u8(num);
    if (proto != IPPROTO_UDP && proto != IPPROTO_TCP)
        return 0;
    if (ntohs(mnl_attr_get_u16(sport)) != fwd_port)
        return 0;
    if (v4)
        return mnl_attr_get_payload_len(v4) == 4 ? memcmp(mnl_attr_get_payload(v4), lo4, 4) == 0
                                                 : -EBADMSG;
    if (v6)
        return mnl_attr_get_payload_len(v6) == 16
                   ? memcmp(mnl_attr_get_payload(v6), lo6, 16) == 0
                   : -EBADMSG;
    return 0;
}

/* ---- netlink ------------------------------------------------------------------- */

struct ct_nl {
    struct mnl_socket *nl;
    uint32_t portid;
};

static void ct_nl_close(struct ct_nl *c) {
    if (c->nl)
        mnl_socket_close(c->nl);
    c->nl = NULL;
}

static int ct_nl_open(struct ct_nl *c) {
    c->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (!c->nl)
        return -errno;
    if (mnl_socket_bind(c->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
        int r = -errno;
        ct_nl_close(c);
        return r;
    }
    c->portid = mnl_socket_get_portid(c->nl);
    return 0;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One datagram from the kernel within the deadline: its length, 0 for one to
 * skip (another sender), or -errno. */
static ssize_t ct_recv(struct ct_nl *c, void *buf, size_t size, int64_t deadline) {
    int64_t now = now_ms();
    if (now >= deadline)
        return -ETIMEDOUT;
    struct pollfd pfd = {.fd = mnl_socket_get_fd(c->nl), .events = POLLIN};
    int r = poll(&pfd, 1, (int)(deadline - now));
    if (r < 0)
        return errno == EINTR ? 0 : -errno;
    if (r == 0)
        return -ETIMEDOUT;
    struct sockaddr_nl sa = {0};
    struct iovec iov = {.iov_base = buf, .iov_len = size};
    struct msghdr msg = {.msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n = recvmsg(pfd.fd, &msg, MSG_DONTWAIT);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -errno;
    if (msg.msg_flags & MSG_TRUNC)
        return -EMSGSIZE;
    if (msg.msg_namelen != sizeof(sa) || sa.nl_family != AF_NETLINK || sa.nl_pid != 0)
        return 0;
    return n;
}

static struct nlmsghdr *ct_req(char *buf, uint16_t type, uint16_t flags, uint8_t family,
                               uint32_t seq) {
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    nlh->nlmsg_type = (uint16_t)((NFNL_SUBSYS_CTNETLINK << 8) | type);
    nlh->nlmsg_flags = NLM_F_REQUEST | flags;
    nlh->nlmsg_seq = seq;
    struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
    g->nfgen_family = family;
    g->version = NFNETLINK_V0;
    g->res_id = 0;
    return nlh;
}

static void put_copy(struct nlmsghdr *nlh, const struct nlattr *a) {
    if (a)
        mnl_attr_put(nlh, a->nla_type, mnl_attr_get_payload_len(a), mnl_attr_get_payload(a));
}

/* Deletes go out in batches (several requests in one datagram, each acked):
 * one round trip per batch, not per entry. */
struct ct_batch {
    char buf[16384];
    size_t used;
    uint32_t first_seq, next_seq;
    unsigned deleted; /* acked with 0 */
};

/* Send what is batched and read every ack: 0, or the first error other than
 * "gone already" (ENOENT). */
static int ct_flush(struct ct_nl *del, struct ct_batch *b, int64_t deadline) {
    if (!b->used)
        return 0;
    if (mnl_socket_sendto(del->nl, b->buf, b->used) != (ssize_t)b->used)
        return errno ? -errno : -EIO;
    b->used = 0;
    uint32_t want = b->next_seq - b->first_seq, got = 0;
    int first_err = 0;
    char ack[8192];
    while (got < want) {
        ssize_t n = ct_recv(del, ack, sizeof(ack), deadline);
        if (n < 0)
            return (int)n;
        int left = (int)n;
        for (const struct nlmsghdr *h = (const void *)ack; mnl_nlmsg_ok(h, left);
             h = mnl_nlmsg_next(h, &left)) {
            if (h->nlmsg_pid != del->portid || h->nlmsg_type != NLMSG_ERROR ||
                h->nlmsg_seq - b->first_seq >= want)
                continue;
            if (mnl_nlmsg_get_payload_len(h) < sizeof(struct nlmsgerr))
                return -EBADMSG;
            const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
            got++;
            if (e->error == 0)
                b->deleted++;
            else if (e->error != -ENOENT && !first_err)
                first_err = e->error;
        }
    }
    b->first_seq = b->next_seq;
    return first_err;
}

/* Batch the delete of the entry an answer of the dump described: by its
 * original tuple, zone and id (an entry made again with the same tuple has
 * another id and stays). */
static int ct_delete(struct ct_nl *del, struct ct_batch *b, uint8_t family, const void *attrs,
                     size_t len, int64_t deadline) {
    int err = 0;
    const struct nlattr *orig = attr_find(attrs, len, CTA_TUPLE_ORIG, &err);
    const struct nlattr *zone = attr_find(attrs, len, CTA_ZONE, &err);
    const struct nlattr *id = attr_find(attrs, len, CTA_ID, &err);
    if (err || !orig || !id)
        return -EBADMSG;
    size_t need = MNL_ALIGN(sizeof(struct nlmsghdr)) + MNL_ALIGN(sizeof(struct nfgenmsg)) +
                  MNL_ALIGN(orig->nla_len) + (zone ? MNL_ALIGN(zone->nla_len) : 0) +
                  MNL_ALIGN(id->nla_len);
    if (need > 1024)
        return -EBADMSG;
    if (b->used + need > sizeof(b->buf)) {
        int r = ct_flush(del, b, deadline);
        if (r < 0)
            return r;
    }
    struct nlmsghdr *nlh =
        ct_req(b->buf + b->used, IPCTNL_MSG_CT_DELETE, NLM_F_ACK, family, b->next_seq++);
    put_copy(nlh, orig);
    put_copy(nlh, zone);
    put_copy(nlh, id);
    b->used += MNL_ALIGN(nlh->nlmsg_len);
    return 0;
}

int ct_forget_forwarder(uint16_t fwd_port, uint32_t mark, unsigned *ret_n) {
    if (fwd_port == 0)
        return -EINVAL;
    struct ct_nl dump = {0}, del = {0};
    _cleanup_free_ char *buf = malloc(CT_BUF_SIZE);
    _cleanup_free_ struct ct_batch *batch = calloc(1, sizeof(*batch));
    int64_t deadline = now_ms() + CT_TIMEOUT_MS;
    unsigned n_del = 0;
    bool done = false;
    int r;

    if (!buf || !batch)
        return -ENOMEM;
    batch->first_seq = batch->next_seq = 1;
    r = ct_nl_open(&dump);
    if (r == 0)
        r = ct_nl_open(&del);
    if (r < 0)
        goto out;

    char req[256];
    /* AF_UNSPEC: both families; the kernel sends only entries with the mark */
    struct nlmsghdr *nlh = ct_req(req, IPCTNL_MSG_CT_GET, NLM_F_DUMP, AF_UNSPEC, 1);
    mnl_attr_put_u32(nlh, CTA_MARK, htonl(mark));
    mnl_attr_put_u32(nlh, CTA_MARK_MASK, htonl(UINT32_MAX));
    if (mnl_socket_sendto(dump.nl, nlh, nlh->nlmsg_len) != (ssize_t)nlh->nlmsg_len) {
        r = -errno ? -errno : -EIO;
        goto out;
    }
    while (!done && r == 0) {
        ssize_t n = ct_recv(&dump, buf, CT_BUF_SIZE, deadline);
        if (n <= 0) {
            r = (int)n;
            continue;
        }
        int left = (int)n;
        const struct nlmsghdr *h = (const void *)buf;
        for (; r == 0 && !done && mnl_nlmsg_ok(h, left); h = mnl_nlmsg_next(h, &left)) {
            if (h->nlmsg_seq != 1 || h->nlmsg_pid != dump.portid)
                continue;
            if (h->nlmsg_type == NLMSG_DONE) {
                done = true;
            } else if (h->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
                r = mnl_nlmsg_get_payload_len(h) < sizeof(*e) ? -EBADMSG
                    : e->error < 0                             ? e->error
                                                               : -EPROTO;
            } else if (h->nlmsg_type == ((NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW)) {
                size_t plen = mnl_nlmsg_get_payload_len(h);
                if (plen < sizeof(struct nfgenmsg)) {
                    r = -EBADMSG;
                    break;
                }
                const struct nfgenmsg *g = mnl_nlmsg_get_payload(h);
                const void *attrs = (const char *)g + MNL_ALIGN(sizeof(*g));
                size_t alen = plen - MNL_ALIGN(sizeof(*g));
                int m = ct_is_forwarder_flow(attrs, alen, fwd_port);
                if (m < 0)
                    r = m;
                else if (m > 0 && n_del < CT_FORGET_MAX) {
                    r = ct_delete(&del, batch, g->nfgen_family, attrs, alen, deadline);
                    n_del += r == 0;
                }
            }
        }
        if (r == 0 && !done && left > 0)
            r = -EBADMSG;
    }
    if (r == 0)
        r = ct_flush(&del, batch, deadline);
out:
    ct_nl_close(&dump);
    ct_nl_close(&del);
    if (r == 0 && ret_n)
        *ret_n = batch->deleted;
    return r;
}
