/* nft: the only code that changes nftables, and only table `inet lianyaohu`.
 *
 * Owns: the netfilter netlink socket, the encoding of nft_render's rule descriptions
 * into libnftnl objects, and the transactions that install and remove them.
 * Must never: run `nft`, `iptables` or any other process; touch another table; send
 * a batch after one of its builders failed; report success without an ACK for every
 * message of the batch; log (callers log once, naming the object).
 *
 * Why this is safe:
 * - One transaction per change (NFNL_MSG_BATCH_BEGIN .. END): the kernel applies the
 *   whole batch or nothing, so a session chain never exists without its rules or
 *   without its dispatch, and a rebuilt base replaces the old one without a window.
 * - Every object message carries NLM_F_ACK; the kernel processes a batch inside our
 *   sendmsg() and queues one ACK or error per message (and an error on the BEGIN
 *   message if the commit itself failed or the generation moved), so we read until
 *   every message is accounted for. The receive buffer is sized for the batch first.
 * - Read-then-act operations (ensure_base, the deletes) put the generation id they
 *   read into NFNL_BATCH_GENID; if anyone committed in between, the kernel refuses
 *   the batch with ERESTART and we read again (bounded).
 * - Fail closed: if the base is broken we delete and rebuild the whole table in one
 *   batch; guarded sockets hit `guarded`'s final reject until sessions are re-added.
 *
 * Rule userdata (NFTNL_RULE_USERDATA, libnftnl udata TLVs):
 * - dispatch rules of uid scopes carry a comment (NFTNL_UDATA_RULE_COMMENT, which
 *   `nft list` shows) with their chain's name: that is how nft_uid_chain_del() finds
 *   them, without remembering rule handles across restarts.
 * - rules we put into the base chains also carry a private TLV (LYH_UDATA_TAG, which
 *   nft ignores): "b:<chain>:<index>:<hash of the rule's text>" for base rules,
 *   "d:<chain>" for dispatch rules. nft_ensure_base() compares these with what it
 *   would install: a missing, reordered, changed or foreign rule means "rebuild".
 *   Comparing tags rather than re-decoding expressions keeps the check independent of
 *   which attributes a kernel version echoes back.
 */
#include "platform/linux/nft.h"

#include "common/dest_rule.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/gen.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include "common/macros.h"

#define RECV_BUF_SIZE  (64u * 1024u) /* > the 32 KiB the kernel puts in one dump skb */
#define REQ_BUF_SIZE   8192u         /* single GET requests */
#define BATCH_PAGE     (128u * 1024u)
#define BATCH_OVERRUN  (UINT16_MAX + 4096u) /* > the largest single message */
#define ACK_TRUESIZE   1024u         /* generous per-ACK receive-buffer cost */
#define ACK_SLOTS      64u           /* ACK datagrams read per recvmmsg() (1 KiB each) */
#define RETRIES        8             /* generation races, interrupted dumps */
#define UDATA_MAX      256u
#define LYH_UDATA_TAG  0xa7          /* private rule udata type, ignored by nft */
#define TAG_MAX        96

/* nft's datatype ids (src/datatype.h), only so that `nft list` prints our sets. */
#define NFT_TYPE_IPADDR    7
#define NFT_TYPE_IP6ADDR   8
#define NFT_TYPE_CGROUPV2  46
#define NFT_TYPE_MARK      19
#define NFT_TYPE_INET_SERVICE 13
#define NFT_TYPE_IFNAME    41
#define NFT_TYPE_BITS      6  /* a concatenation's id: (first << 6) | second */
#define NFT_BYTEORDER_HOST 1
#define NFT_BYTEORDER_BIG  2

#define SET_ID_LAN4     1
#define SET_ID_LAN6     2
#define SET_ID_SESSIONS 3
#define SET_ID_LOOPBACK 4
#define SET_ID_SERVED   5
#define SET_ID_DNSPORT  6
#define SET_ID_DOMAIN4  7 /* NEWSET needs an id unique in its batch */
#define SET_ID_DOMAIN6  8
#define SET_ID_PROTO4   9
#define SET_ID_PROTO6   10
#define SET_ID_DATA     16 /* + the index in nftr_data_sets() */

struct nft {
    struct mnl_socket *nl; /* owned */
    uint32_t portid;
    uint32_t seq;
    char *rbuf;            /* owned, RECV_BUF_SIZE */
    char *qbuf;            /* owned, REQ_BUF_SIZE */
    int rcvbuf;            /* what we last set, 0 = kernel default */
    int sndbuf;
    char err_obj[96];
};

/* ---- cleanup helpers ----------------------------------------------------------------- */

static void tablep(struct nftnl_table **p) { if (*p) nftnl_table_free(*p); }
static void chainp(struct nftnl_chain **p) { if (*p) nftnl_chain_free(*p); }
static void rulep(struct nftnl_rule **p) { if (*p) nftnl_rule_free(*p); }
static void setp(struct nftnl_set **p) { if (*p) nftnl_set_free(*p); }
static void elemp(struct nftnl_set_elem **p) { if (*p) nftnl_set_elem_free(*p); }
static void udatap(struct nftnl_udata_buf **p) { if (*p) nftnl_udata_buf_free(*p); }
static void genp(struct nftnl_gen **p) { if (*p) nftnl_gen_free(*p); }
static void objp(struct nftnl_obj **p) { if (*p) nftnl_obj_free(*p); }
static void iterp(struct nftnl_expr_iter **p) { if (*p) nftnl_expr_iter_destroy(*p); }
static void base_freep(struct nftr_base **p) { nftr_base_free(*p); }

/* ---- socket ---------------------------------------------------------------------------- */

void nft_close(struct nft *n) {
    if (!n)
        return;
    if (n->nl)
        mnl_socket_close(n->nl);
    free(n->rbuf);
    free(n->qbuf);
    free(n);
}

static void nft_closep(struct nft **p) { nft_close(*p); }

int nft_open(struct nft **ret) {
    _cleanup_(nft_closep) struct nft *n = calloc(1, sizeof(*n));
    if (!n)
        return -ENOMEM;
    n->rbuf = malloc(RECV_BUF_SIZE);
    n->qbuf = malloc(REQ_BUF_SIZE);
    if (!n->rbuf || !n->qbuf)
        return -ENOMEM;
    n->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
    if (!n->nl)
        return -errno;
    if (mnl_socket_bind(n->nl, 0, MNL_SOCKET_AUTOPID) < 0)
        return -errno;
    /* ACKs without a copy of the request: smaller, so more fit in the buffer. */
    int one = 1;
    (void)mnl_socket_setsockopt(n->nl, NETLINK_CAP_ACK, &one, sizeof(one));
    n->portid = mnl_socket_get_portid(n->nl);
    n->seq = (uint32_t)time(NULL);
    *ret = TAKE_PTR(n);
    return 0;
}

int nft_watch_open(int *ret_fd) {
    _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC,
                                    NETLINK_NETFILTER);
    if (fd < 0)
        return -errno;
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = 1u << (NFNLGRP_NFTABLES - 1)};
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return -errno;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

uint32_t nft_portid(const struct nft *n) { return n->portid; }

/* The kernel sets a notification's nlmsg_pid to the port of the socket whose
 * request made the change (0 for its own), and packs several notifications in
 * one datagram. */
/* Does nf_tables notification m (len bytes, its header whole) name a table other
 * than lyhd's? Only the message types below are read, each of which names its
 * table in its first attribute, type 1 (NFTA_TABLE_NAME, NFTA_CHAIN_TABLE,
 * NFTA_RULE_TABLE, NFTA_SET_TABLE, NFTA_SET_ELEM_LIST_TABLE, NFTA_OBJ_TABLE,
 * NFTA_FLOWTABLE_TABLE): a type not listed, a first attribute that is not a
 * whole name, or bytes that cannot be read are not another table's (a future
 * message type is counted, never skipped). A generation message names none:
 * the messages of its transaction do. */
static bool names_other_table(const uint8_t *m, size_t len, uint16_t type) {
    if (type >> 8 != NFNL_SUBSYS_NFTABLES)
        return false;
    switch (type & 0xff) {
    case NFT_MSG_NEWGEN:
        return true;
    case NFT_MSG_NEWTABLE:
    case NFT_MSG_DELTABLE:
    case NFT_MSG_NEWCHAIN:
    case NFT_MSG_DELCHAIN:
    case NFT_MSG_NEWRULE:
    case NFT_MSG_DELRULE:
    case NFT_MSG_NEWSET:
    case NFT_MSG_DELSET:
    case NFT_MSG_NEWSETELEM:
    case NFT_MSG_DELSETELEM:
    case NFT_MSG_NEWOBJ:
    case NFT_MSG_DELOBJ:
    case NFT_MSG_NEWFLOWTABLE:
    case NFT_MSG_DELFLOWTABLE:
        break;
    default:
        return false;
    }
    size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));
    struct nlattr a;
    if (off + NLA_HDRLEN > len)
        return false;
    memcpy(&a, m + off, sizeof(a));
    if (a.nla_len <= NLA_HDRLEN || a.nla_len > len - off || (a.nla_type & NLA_TYPE_MASK) != 1)
        return false;
    const char *name = (const char *)m + off + NLA_HDRLEN;
    return memchr(name, '\0', a.nla_len - NLA_HDRLEN) && strcmp(name, NFTR_TABLE) != 0;
}

int nft_watch_foreign(const uint8_t *buf, size_t len, uint32_t own_portid) {
    int n = 0;
    size_t off = 0;

    while (off < len) {
        struct nlmsghdr h;
        if (len - off < sizeof(h))
            return n + 1;
        memcpy(&h, buf + off, sizeof(h));
        if (h.nlmsg_len < sizeof(h) || h.nlmsg_len > len - off)
            return n + 1;
        /* The check a count starts reads lyhd's table only, and a change to
         * another table leaves it as it was: nothing for the check to find
         * (`nft flush ruleset` names lyhd's table as it deletes it). */
        if ((own_portid == 0 || h.nlmsg_pid != own_portid) &&
            !names_other_table(buf + off, h.nlmsg_len, h.nlmsg_type))
            n++;
        size_t step = ((size_t)h.nlmsg_len + NLMSG_ALIGNTO - 1) & ~(size_t)(NLMSG_ALIGNTO - 1);
        off += step < len - off ? step : len - off;
    }
    return n;
}

int nft_watch_drain(int fd, uint32_t own_portid) {
    union {
        struct nlmsghdr h; /* alignment */
        uint8_t b[8192];
    } buf;
    int n = 0;

    /* Only "someone else changed something" matters; what changed is read back
     * by the caller (nft_ensure_base), so the messages are not parsed further. */
    for (int i = 0; i < 1024; i++) {
        ssize_t k = recv(fd, buf.b, sizeof(buf.b), MSG_DONTWAIT | MSG_TRUNC);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return n;
            if (errno == ENOBUFS) { /* lost: whose, is unknown */
                n++;
                continue;
            }
            return -errno;
        }
        if (k == 0)
            return n;
        if ((size_t)k > sizeof(buf.b)) { /* cut short: the rest is unread */
            n++;
            continue;
        }
        n += nft_watch_foreign(buf.b, (size_t)k, own_portid);
    }
    return n;
}

const char *nft_last_error_object(const struct nft *n) {
    return n->err_obj;
}

/* Grow SO_RCVBUF / SO_SNDBUF to at least `want` bytes (FORCE needs CAP_NET_ADMIN,
 * which we have; fall back to the capped variant). */
static void ensure_buf(struct nft *n, int opt_force, int opt, int *cur, size_t want) {
    if (want > INT32_MAX / 2)
        want = INT32_MAX / 2;
    if (*cur >= (int)want || want <= 200u * 1024u)
        return;
    int v = (int)want;
    int fd = mnl_socket_get_fd(n->nl);
    if (setsockopt(fd, SOL_SOCKET, opt_force, &v, sizeof(v)) == 0 ||
        setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v)) == 0)
        *cur = v;
}

/* One datagram from the kernel into n->rbuf. Returns its length or -errno. */
static ssize_t recv_one(struct nft *n, bool wait) {
    for (;;) {
        struct sockaddr_nl sa;
        struct iovec iov = { .iov_base = n->rbuf, .iov_len = RECV_BUF_SIZE };
        struct msghdr msg = {
            .msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov, .msg_iovlen = 1,
        };
        ssize_t len = recvmsg(mnl_socket_get_fd(n->nl), &msg, wait ? 0 : MSG_DONTWAIT);
        if (len < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (msg.msg_flags & MSG_TRUNC)
            return -EMSGSIZE;
        if (msg.msg_namelen != sizeof(sa) || sa.nl_pid != 0)
            continue; /* not from the kernel */
        return len;
    }
}

/* ---- request / reply (GET and dumps) ------------------------------------------------- */

typedef int (*msg_cb)(const struct nlmsghdr *nlh, void *data);

/* Send one request built in n->qbuf and read its replies: each reply message goes to
 * cb; the exchange ends with the ACK (GET) or NLMSG_DONE (dump). */
static int talk(struct nft *n, struct nlmsghdr *req, msg_cb cb, void *data) {
    uint32_t seq = req->nlmsg_seq;
    if (mnl_socket_sendto(n->nl, req, req->nlmsg_len) < 0)
        return -errno;
    int err = 0;
    bool intr = false;
    for (;;) {
        ssize_t len = recv_one(n, true);
        if (len < 0)
            return (int)len;
        int left = (int)len; /* <= RECV_BUF_SIZE */
        for (struct nlmsghdr *nlh = (struct nlmsghdr *)n->rbuf; mnl_nlmsg_ok(nlh, left);
             nlh = mnl_nlmsg_next(nlh, &left)) {
            if (nlh->nlmsg_seq != seq || nlh->nlmsg_pid != n->portid)
                continue; /* a late reply to something earlier */
            if (nlh->nlmsg_flags & NLM_F_DUMP_INTR)
                intr = true;
            if (nlh->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
                if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*e)))
                    return -EPROTO;
                if (e->error != 0)
                    return e->error;
                return err ? err : intr ? -EINTR : 0;
            }
            if (nlh->nlmsg_type == NLMSG_DONE) {
                if (nlh->nlmsg_len >= mnl_nlmsg_size(sizeof(int))) {
                    const int *e = mnl_nlmsg_get_payload(nlh);
                    if (*e < 0)
                        return *e;
                }
                return err ? err : intr ? -EINTR : 0;
            }
            if (err == 0 && cb) {
                int r = cb(nlh, data);
                if (r < 0)
                    err = r; /* keep draining to NLMSG_DONE */
            }
        }
    }
}

static struct nlmsghdr *req_hdr(struct nft *n, uint16_t type, uint16_t flags) {
    return nftnl_nlmsg_build_hdr(n->qbuf, type, NFPROTO_INET, flags, ++n->seq);
}

/* A dump, retried while the kernel says the ruleset changed underneath it. The
 * builder fills in the request's payload; reset() forgets partial results. */
static int dump(struct nft *n, uint16_t type, void (*build)(struct nlmsghdr *, const void *),
                const void *obj, msg_cb cb, void (*reset)(void *), void *data) {
    int r = -EINTR;
    for (int i = 0; i < RETRIES && r == -EINTR; i++) {
        if (reset)
            reset(data);
        struct nlmsghdr *nlh = req_hdr(n, type, NLM_F_DUMP);
        if (build)
            build(nlh, obj);
        r = talk(n, nlh, cb, data);
    }
    return r;
}

static int gen_cb(const struct nlmsghdr *nlh, void *data) {
    return nftnl_gen_nlmsg_parse(nlh, data) < 0 ? -EPROTO : 0;
}
static int table_cb(const struct nlmsghdr *nlh, void *data) {
    return nftnl_table_nlmsg_parse(nlh, data) < 0 ? -EPROTO : 0;
}
static int chain_cb(const struct nlmsghdr *nlh, void *data) {
    return nftnl_chain_nlmsg_parse(nlh, data) < 0 ? -EPROTO : 0;
}
static int set_cb(const struct nlmsghdr *nlh, void *data) {
    return nftnl_set_nlmsg_parse(nlh, data) < 0 ? -EPROTO : 0;
}

static int get_genid(struct nft *n, uint32_t *ret) {
    _cleanup_(genp) struct nftnl_gen *g = nftnl_gen_alloc();
    if (!g)
        return -ENOMEM;
    struct nlmsghdr *nlh = req_hdr(n, NFT_MSG_GETGEN, NLM_F_ACK);
    int r = talk(n, nlh, gen_cb, g);
    if (r < 0)
        return r;
    if (!nftnl_gen_is_set(g, NFTNL_GEN_ID))
        return -EPROTO;
    *ret = nftnl_gen_get_u32(g, NFTNL_GEN_ID);
    return 0;
}

/* ---- batches -------------------------------------------------------------------------- */

struct batch {
    struct nftnl_batch *b;
    uint32_t begin_seq;
    uint32_t n_msgs;        /* object messages, seq begin_seq+1 .. begin_seq+n_msgs */
    char (*what)[64];       /* description of each object message, for errors */
    size_t what_cap;
    int err;                /* first builder failure: the batch will not be sent */
};

static void batch_free(struct batch *bt) {
    if (bt->b)
        nftnl_batch_free(bt->b);
    free(bt->what);
    bt->b = NULL;
    bt->what = NULL;
}

static int batch_start(struct nft *n, struct batch *bt, const uint32_t *genid) {
    *bt = (struct batch){ .b = nftnl_batch_alloc(BATCH_PAGE, BATCH_OVERRUN) };
    if (!bt->b)
        return -ENOMEM;
    bt->begin_seq = ++n->seq;
    struct nlmsghdr *nlh = nftnl_batch_begin(nftnl_batch_buffer(bt->b), bt->begin_seq);
    if (genid)
        mnl_attr_put_u32(nlh, NFNL_BATCH_GENID, htonl(*genid));
    if (nftnl_batch_update(bt->b) < 0)
        return -ENOMEM;
    return 0;
}

/* Header of the next object message, or NULL once the batch has failed. */
__attribute__((format(printf, 5, 6))) static struct nlmsghdr *
batch_msg(struct nft *n, struct batch *bt, uint16_t type, uint16_t flags, const char *fmt, ...) {
    if (bt->err)
        return NULL;
    if (bt->n_msgs == bt->what_cap) {
        size_t cap = bt->what_cap ? bt->what_cap * 2 : 32;
        void *w = reallocarray(bt->what, cap, sizeof(bt->what[0]));
        if (!w) {
            bt->err = -ENOMEM;
            return NULL;
        }
        bt->what = w;
        bt->what_cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(bt->what[bt->n_msgs], sizeof(bt->what[0]), fmt, ap);
    va_end(ap);
    bt->n_msgs++;
    return nftnl_nlmsg_build_hdr(nftnl_batch_buffer(bt->b), type, NFPROTO_INET,
                                 flags | NLM_F_ACK, ++n->seq);
}

static void batch_next(struct batch *bt) {
    if (!bt->err && nftnl_batch_update(bt->b) < 0)
        bt->err = -ENOMEM;
}

/* The ACKs of one batch as they come in: res[0] for the transaction (BEGIN,
 * END), res[i] for message i (1: not answered yet). */
struct ack_tally {
    int *res;
    uint32_t n_msgs, begin_seq, end_seq, portid, acked;
    bool begin_failed;
};

static void tally_one(struct ack_tally *t, const struct nlmsghdr *nlh) {
    if (nlh->nlmsg_type != NLMSG_ERROR || nlh->nlmsg_pid != t->portid)
        return;
    const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
    uint32_t i = nlh->nlmsg_seq - t->begin_seq;
    if (nlh->nlmsg_seq == t->begin_seq || nlh->nlmsg_seq == t->end_seq) {
        t->res[0] = e->error ? e->error : -EPROTO;
        t->begin_failed = true;
    } else if (i >= 1 && i <= t->n_msgs && t->res[i] == 1) {
        t->res[i] = e->error;
        t->acked++;
    }
}

/* Read what is queued, up to ACK_SLOTS datagrams in one recvmmsg() (a batch
 * of 50 messages is 50 ACKs, each its own datagram: one system call instead
 * of 50). *more: every slot was filled, so more may be waiting. */
static int recv_acks(struct nft *n, struct ack_tally *t, bool *more) {
    struct mmsghdr v[ACK_SLOTS];
    struct iovec iov[ACK_SLOTS];
    struct sockaddr_nl sa[ACK_SLOTS];
    const size_t slot = RECV_BUF_SIZE / ACK_SLOTS;

    for (size_t k = 0; k < ACK_SLOTS; k++) {
        iov[k] = (struct iovec){.iov_base = n->rbuf + k * slot, .iov_len = slot};
        v[k] = (struct mmsghdr){.msg_hdr = {.msg_name = &sa[k], .msg_namelen = sizeof(sa[k]),
                                            .msg_iov = &iov[k], .msg_iovlen = 1}};
    }
    int got;
    do
        got = recvmmsg(mnl_socket_get_fd(n->nl), v, ACK_SLOTS, MSG_DONTWAIT, NULL);
    while (got < 0 && errno == EINTR);
    *more = false;
    if (got < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    for (int k = 0; k < got; k++) {
        const struct msghdr *m = &v[k].msg_hdr;
        if (m->msg_namelen != sizeof(sa[k]) || sa[k].nl_pid != 0)
            continue; /* not from the kernel */
        int left = (int)v[k].msg_len;
        const struct nlmsghdr *nlh = (const struct nlmsghdr *)iov[k].iov_base;
        if (m->msg_flags & MSG_TRUNC) {
            /* An error that echoes its request (a kernel without
             * NETLINK_CAP_ACK) is cut after the code, which is all we read. */
            if ((size_t)left < NLMSG_HDRLEN + sizeof(struct nlmsgerr) ||
                nlh->nlmsg_type != NLMSG_ERROR)
                return -EMSGSIZE;
            tally_one(t, nlh);
            continue;
        }
        for (; mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left))
            if (nlh->nlmsg_len >= mnl_nlmsg_size(sizeof(struct nlmsgerr)))
                tally_one(t, nlh);
    }
    *more = got == ACK_SLOTS;
    return 0;
}

/* Close, send, and account for every ACK. Consumes bt. */
static int batch_send(struct nft *n, struct batch *bt) {
    _cleanup_free_ struct iovec *iov = NULL;
    _cleanup_free_ int *res = NULL;
    int r = bt->err;
    n->err_obj[0] = '\0';
    if (r < 0)
        goto out;
    uint32_t end_seq = ++n->seq;
    nftnl_batch_end(nftnl_batch_buffer(bt->b), end_seq);
    if (nftnl_batch_update(bt->b) < 0) {
        r = -ENOMEM;
        goto out;
    }
    int niov = nftnl_batch_iovec_len(bt->b);
    iov = calloc((size_t)niov, sizeof(*iov));
    res = malloc((bt->n_msgs + 1) * sizeof(*res)); /* [0]: BEGIN, [i]: message i */
    if (!iov || !res) {
        r = -ENOMEM;
        goto out;
    }
    nftnl_batch_iovec(bt->b, iov, (uint32_t)niov);
    size_t total = 0;
    for (int i = 0; i < niov; i++)
        total += iov[i].iov_len;
    ensure_buf(n, SO_SNDBUFFORCE, SO_SNDBUF, &n->sndbuf, total + 64u * 1024u);
    ensure_buf(n, SO_RCVBUFFORCE, SO_RCVBUF, &n->rcvbuf,
               (size_t)(bt->n_msgs + 1) * ACK_TRUESIZE + 64u * 1024u);
    for (uint32_t i = 0; i <= bt->n_msgs; i++)
        res[i] = 1; /* pending */

    struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
    struct msghdr msg = {
        .msg_name = &kernel, .msg_namelen = sizeof(kernel), .msg_iov = iov,
        .msg_iovlen = (size_t)niov,
    };
    if (sendmsg(mnl_socket_get_fd(n->nl), &msg, 0) < 0) {
        r = -errno;
        goto out;
    }

    /* nf_tables handled the batch inside sendmsg(); its replies are queued. Read
     * them many at a time without blocking; wait briefly only if something is
     * still unaccounted for. */
    struct ack_tally t = {.res = res, .n_msgs = bt->n_msgs, .begin_seq = bt->begin_seq,
                          .end_seq = end_seq, .portid = n->portid};
    bool waited = false;
    for (;;) {
        bool more = false;
        r = recv_acks(n, &t, &more);
        if (r < 0)
            goto out; /* ENOBUFS: ACKs lost, the outcome is unknown */
        if (more)
            continue; /* every slot filled: there may be more queued */
        /* all queued replies read: done, unless ACKs are missing and nothing
         * explains it yet (then wait once, briefly, before calling it EPROTO) */
        if (t.acked == bt->n_msgs || t.begin_failed || waited)
            break;
        struct pollfd p = { .fd = mnl_socket_get_fd(n->nl), .events = POLLIN };
        (void)poll(&p, 1, 1000);
        waited = true;
    }
    uint32_t acked = t.acked;
    r = 0;
    if (res[0] != 1) {
        r = res[0];
        snprintf(n->err_obj, sizeof(n->err_obj), "the transaction (commit or generation)");
    }
    for (uint32_t i = 1; i <= bt->n_msgs && r == 0; i++) {
        if (res[i] < 0) {
            r = res[i];
            snprintf(n->err_obj, sizeof(n->err_obj), "%s", bt->what[i - 1]);
        }
    }
    if (r == 0 && acked < bt->n_msgs)
        r = -EPROTO; /* an ACK went missing: never claim success without it */
out:
    batch_free(bt);
    return r;
}

/* ---- object builders ------------------------------------------------------------------- */

static void put_table(struct nft *n, struct batch *bt, uint16_t type, uint16_t flags) {
    _cleanup_(tablep) struct nftnl_table *t = nftnl_table_alloc();
    if (!t || nftnl_table_set_str(t, NFTNL_TABLE_NAME, NFTR_TABLE) < 0) {
        bt->err = bt->err ? bt->err : -ENOMEM;
        return;
    }
    nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
    if (type == NFT_MSG_NEWTABLE)
        nftnl_table_set_u32(t, NFTNL_TABLE_FLAGS, 0);
    struct nlmsghdr *nlh = batch_msg(n, bt, type, flags, "table %s", NFTR_TABLE);
    if (!nlh)
        return;
    nftnl_table_nlmsg_build_payload(nlh, t);
    batch_next(bt);
}

static struct nftnl_chain *chain_obj(const char *name) {
    struct nftnl_chain *c = nftnl_chain_alloc();
    if (!c)
        return NULL;
    if (nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, NFTR_TABLE) < 0 ||
        nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name) < 0) {
        nftnl_chain_free(c);
        return NULL;
    }
    nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
    return c;
}

/* NEWCHAIN (a base chain if `hook`), DELCHAIN. */
/* The base chains with a hook: output at priority 0, input at -10 (before
 * anything that could accept at the usual priority 0), dnsnat (type nat) at
 * -100 in output. */
#define INPUT_PRIO (-10)
#define NAT_PRIO   (-100) /* dnsnat: NF_IP_PRI_NAT_DST, ahead of the filter chains */

static void put_chain(struct nft *n, struct batch *bt, uint16_t type, uint16_t flags,
                      const char *name, bool hook) {
    _cleanup_(chainp) struct nftnl_chain *c = chain_obj(name);
    bool input = strcmp(name, NFTR_CHAIN_INPUT) == 0, nat = strcmp(name, NFTR_CHAIN_DNSNAT) == 0,
         post = strcmp(name, NFTR_CHAIN_DNSOUT) == 0;
    if (!c || (hook && nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, nat ? "nat" : "filter") < 0)) {
        bt->err = bt->err ? bt->err : -ENOMEM;
        return;
    }
    if (hook) {
        nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, input ? NF_INET_LOCAL_IN
                                                    : post ? NF_INET_POST_ROUTING
                                                           : NF_INET_LOCAL_OUT);
        nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, input ? INPUT_PRIO : nat ? NAT_PRIO : 0);
        nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
    }
    struct nlmsghdr *nlh = batch_msg(n, bt, type, flags, "chain %s", name);
    if (!nlh)
        return;
    nftnl_chain_nlmsg_build_payload(nlh, c);
    batch_next(bt);
}

static struct nftnl_rule *rule_obj(const char *chain) {
    struct nftnl_rule *r = nftnl_rule_alloc();
    if (!r)
        return NULL;
    if (nftnl_rule_set_str(r, NFTNL_RULE_TABLE, NFTR_TABLE) < 0 ||
        nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain) < 0) {
        nftnl_rule_free(r);
        return NULL;
    }
    nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
    return r;
}

/* DELRULE by handle, or a flush of the whole chain (handle 0). */
static void put_delrule(struct nft *n, struct batch *bt, const char *chain, uint64_t handle) {
    _cleanup_(rulep) struct nftnl_rule *r = rule_obj(chain);
    if (!r) {
        bt->err = bt->err ? bt->err : -ENOMEM;
        return;
    }
    if (handle)
        nftnl_rule_set_u64(r, NFTNL_RULE_HANDLE, handle);
    struct nlmsghdr *nlh =
        handle ? batch_msg(n, bt, NFT_MSG_DELRULE, 0, "rule handle %" PRIu64 " of chain %s",
                           handle, chain)
               : batch_msg(n, bt, NFT_MSG_DELRULE, 0, "flush of chain %s", chain);
    if (!nlh)
        return;
    nftnl_rule_nlmsg_build_payload(nlh, r);
    batch_next(bt);
}

/* ---- expressions ----------------------------------------------------------------------- */

/* Add an expression to a rule (which takes ownership); remembers ENOMEM. */
struct eb {
    struct nftnl_rule *r;
    int err;
};

static struct nftnl_expr *ex(struct eb *b, const char *name) {
    if (b->err)
        return NULL;
    struct nftnl_expr *e = nftnl_expr_alloc(name);
    if (!e) {
        b->err = -ENOMEM;
        return NULL;
    }
    nftnl_rule_add_expr(b->r, e);
    return e;
}

static void ex_data(struct eb *b, struct nftnl_expr *e, uint16_t attr, const void *d, uint32_t len) {
    if (e && nftnl_expr_set(e, attr, d, len) < 0)
        b->err = -ENOMEM;
}

static void ex_str(struct eb *b, struct nftnl_expr *e, uint16_t attr, const char *s) {
    if (e && nftnl_expr_set_str(e, attr, s) < 0)
        b->err = -ENOMEM;
}

static void e_meta(struct eb *b, uint32_t key) {
    struct nftnl_expr *e = ex(b, "meta");
    if (!e)
        return;
    nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
    nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
}

static void e_cmp(struct eb *b, uint32_t op, const void *data, uint32_t len) {
    struct nftnl_expr *e = ex(b, "cmp");
    if (!e)
        return;
    nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
    ex_data(b, e, NFTNL_EXPR_CMP_DATA, data, len);
}

static void e_payload(struct eb *b, uint32_t base, uint32_t offset, uint32_t len) {
    struct nftnl_expr *e = ex(b, "payload");
    if (!e)
        return;
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
    nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
}

static void e_bitwise(struct eb *b, const void *mask, uint32_t len) {
    static const uint8_t zero[16];
    struct nftnl_expr *e = ex(b, "bitwise");
    if (!e)
        return;
    nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
    ex_data(b, e, NFTNL_EXPR_BITWISE_MASK, mask, len);
    ex_data(b, e, NFTNL_EXPR_BITWISE_XOR, zero, len);
}

static void e_ct(struct eb *b, uint32_t key) {
    struct nftnl_expr *e = ex(b, "ct");
    if (!e)
        return;
    nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, key);
    nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
}

/* The socket's cgroup ancestor at level (8 bytes, host order) into dreg; no
 * full socket, or none at that level: the rule stops. */
static void e_socket_cg(struct eb *b, uint32_t dreg, uint32_t level) {
    struct nftnl_expr *e = ex(b, "socket");
    if (!e)
        return;
    nftnl_expr_set_u32(e, NFTNL_EXPR_SOCKET_KEY, NFT_SOCKET_CGROUPV2);
    nftnl_expr_set_u32(e, NFTNL_EXPR_SOCKET_DREG, dreg);
    nftnl_expr_set_u32(e, NFTNL_EXPR_SOCKET_LEVEL, level);
}

/* A lookup of the key in sreg. A concatenated key is as nft lays it out: each
 * part from a 4-byte register boundary (a 2-byte port is padded with zeros by
 * payload), the first at NFT_REG32_00; the set's key length is the padded sum.
 * verdict: a verdict map's; inverted: the rule goes on when the key is NOT in
 * the set (a verdict lookup is never inverted). */
static void e_lookup_from(struct eb *b, const char *set, uint32_t sreg, bool verdict,
                          bool inverted) {
    struct nftnl_expr *e = ex(b, "lookup");
    if (!e)
        return;
    nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
    if (verdict)
        nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, NFT_REG_VERDICT);
    else if (inverted)
        nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
    ex_str(b, e, NFTNL_EXPR_LOOKUP_SET, set);
}

static void e_lookup(struct eb *b, const char *set, bool verdict, bool inverted) {
    e_lookup_from(b, set, NFT_REG_1, verdict, inverted);
}

/* The key of a named object's map into NFT_REG_1: the socket's cgroup at
 * level, or (level 0) the flow's ct mark. */
static void e_obj_key(struct eb *b, uint32_t level) {
    if (level)
        e_socket_cg(b, NFT_REG_1, level);
    else
        e_ct(b, NFT_CT_MARK);
}

/* counter name / limit name <key> map @map: the object the key's element
 * names; no element: the rule stops */
static void e_objref_map(struct eb *b, uint32_t level, const char *map) {
    e_obj_key(b, level);
    struct nftnl_expr *e = ex(b, "objref");
    if (!e)
        return;
    nftnl_expr_set_u32(e, NFTNL_EXPR_OBJREF_SET_SREG, NFT_REG_1);
    ex_str(b, e, NFTNL_EXPR_OBJREF_SET_NAME, map);
}

static void e_nfproto(struct eb *b, int family) {
    uint8_t p = family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6;
    e_meta(b, NFT_META_NFPROTO);
    e_cmp(b, NFT_CMP_EQ, &p, sizeof(p));
}

static void e_l4proto(struct eb *b, uint8_t proto) {
    e_meta(b, NFT_META_L4PROTO);
    e_cmp(b, NFT_CMP_EQ, &proto, sizeof(proto));
}

static void e_verdict(struct eb *b, int verdict, const char *chain) {
    struct nftnl_expr *e = ex(b, "immediate");
    if (!e)
        return;
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
    if (chain)
        ex_str(b, e, NFTNL_EXPR_IMM_CHAIN, chain);
}

static void e_reject(struct eb *b, uint32_t type, uint8_t code) {
    struct nftnl_expr *e = ex(b, "reject");
    if (!e)
        return;
    nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, type);
    nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, code);
}

/* The register holds a gid in host order: as nft does for a range, turn it
 * big-endian (byteorder) so the range's memcmp orders like the numbers. */
static void e_gid_range(struct eb *b, bool outside, uint32_t lo, uint32_t hi) {
    struct nftnl_expr *e = ex(b, "byteorder");
    if (e) {
        nftnl_expr_set_u32(e, NFTNL_EXPR_BYTEORDER_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BYTEORDER_DREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BYTEORDER_OP, NFT_BYTEORDER_HTON);
        nftnl_expr_set_u32(e, NFTNL_EXPR_BYTEORDER_LEN, sizeof(uint32_t));
        nftnl_expr_set_u32(e, NFTNL_EXPR_BYTEORDER_SIZE, sizeof(uint32_t));
    }
    uint32_t from = htonl(lo), to = htonl(hi);
    e = ex(b, "range");
    if (e) {
        nftnl_expr_set_u32(e, NFTNL_EXPR_RANGE_SREG, NFT_REG_1);
        nftnl_expr_set_u32(e, NFTNL_EXPR_RANGE_OP, outside ? NFT_RANGE_NEQ : NFT_RANGE_EQ);
        ex_data(b, e, NFTNL_EXPR_RANGE_FROM_DATA, &from, sizeof(from));
        ex_data(b, e, NFTNL_EXPR_RANGE_TO_DATA, &to, sizeof(to));
    }
}

static void e_ct_set_mark(struct eb *b) {
    struct nftnl_expr *e = ex(b, "ct");
    if (!e)
        return;
    nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_MARK);
    nftnl_expr_set_u32(e, NFTNL_EXPR_CT_SREG, NFT_REG_1);
}

static void e_match(struct eb *b, const struct nftr_match *m) {
    switch (m->type) {
    case NFTR_M_OIFNAME: {
        char name[IFNAMSIZ] = { 0 }; /* exact match: compare all 16 bytes */
        memcpy(name, m->name, strnlen(m->name, IFNAMSIZ - 1));
        e_meta(b, NFT_META_OIFNAME);
        e_cmp(b, NFT_CMP_EQ, name, sizeof(name));
        break;
    }
    case NFTR_M_NFPROTO:
        e_nfproto(b, m->family);
        break;
    case NFTR_M_L4PROTO:
        e_l4proto(b, m->l4proto);
        break;
    case NFTR_M_DADDR: {
        /* As nft does: load only the bytes the prefix covers, mask a partial last
         * byte, compare. The nfproto match first makes the offset mean ip/ip6. */
        bool v4 = m->family == AF_INET;
        uint32_t len = (m->prefix_len + 7u) / 8u;
        uint8_t addr[16] = { 0 }, mask[16] = { 0 };
        memcpy(addr, m->addr, len);
        for (uint32_t i = 0; i < len; i++)
            mask[i] = 0xff;
        if (m->prefix_len % 8)
            mask[len - 1] = (uint8_t)(0xff00u >> (m->prefix_len % 8));
        for (uint32_t i = 0; i < len; i++)
            addr[i] &= mask[i];
        e_nfproto(b, m->family);
        e_payload(b, NFT_PAYLOAD_NETWORK_HEADER, v4 ? 16 : 24, len);
        if (m->prefix_len % 8)
            e_bitwise(b, mask, len);
        e_cmp(b, NFT_CMP_EQ, addr, len);
        break;
    }
    case NFTR_M_DADDR_SET:
    case NFTR_M_DADDR_SET_NE: {
        bool v4 = m->family == AF_INET;
        e_nfproto(b, m->family);
        e_payload(b, NFT_PAYLOAD_NETWORK_HEADER, v4 ? 16 : 24, v4 ? 4 : 16);
        e_lookup(b, m->name, false, m->type == NFTR_M_DADDR_SET_NE);
        break;
    }
    case NFTR_M_DPORT: {
        uint16_t lo = htons(m->port_min), hi = htons(m->port_max);
        e_l4proto(b, m->l4proto);
        e_payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2); /* tcp/udp dport */
        if (m->port_min == m->port_max) {
            e_cmp(b, NFT_CMP_EQ, &lo, sizeof(lo));
        } else { /* cmp is a memcmp: big-endian bytes order like the numbers */
            e_cmp(b, NFT_CMP_GTE, &lo, sizeof(lo));
            e_cmp(b, NFT_CMP_LTE, &hi, sizeof(hi));
        }
        break;
    }
    case NFTR_M_DPORT_NE: {
        uint16_t port = htons(m->port_min);
        e_l4proto(b, m->l4proto);
        e_payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2); /* tcp/udp dport */
        e_cmp(b, NFT_CMP_NEQ, &port, sizeof(port));
        break;
    }
    case NFTR_M_CT_NEW: {
        uint32_t bit = NF_CT_STATE_BIT(IP_CT_NEW), zero = 0;
        e_ct(b, NFT_CT_STATE);
        e_bitwise(b, &bit, sizeof(bit));
        e_cmp(b, NFT_CMP_NEQ, &zero, sizeof(zero));
        break;
    }
    case NFTR_M_SKUID:
        e_meta(b, NFT_META_SKUID);
        e_cmp(b, NFT_CMP_EQ, &m->id, sizeof(m->id));
        break;
    case NFTR_M_SKGID:
    case NFTR_M_SKGID_NE:
        e_meta(b, NFT_META_SKGID);
        if (m->id_max > m->id) {
            e_gid_range(b, m->type == NFTR_M_SKGID_NE, m->id, m->id_max);
            break;
        }
        e_cmp(b, m->type == NFTR_M_SKGID_NE ? NFT_CMP_NEQ : NFT_CMP_EQ, &m->id, sizeof(m->id));
        break;
    case NFTR_M_IIFNAME_NE:
    case NFTR_M_OIFNAME_NE: {
        char name[IFNAMSIZ] = { 0 };
        memcpy(name, m->name, strnlen(m->name, IFNAMSIZ - 1));
        e_meta(b, m->type == NFTR_M_IIFNAME_NE ? NFT_META_IIFNAME : NFT_META_OIFNAME);
        e_cmp(b, NFT_CMP_NEQ, name, sizeof(name));
        break;
    }
    case NFTR_M_CT_INVALID: {
        uint32_t bits = NF_CT_STATE_INVALID_BIT | NF_CT_STATE_UNTRACKED_BIT, zero = 0;
        e_ct(b, NFT_CT_STATE);
        e_bitwise(b, &bits, sizeof(bits));
        e_cmp(b, NFT_CMP_NEQ, &zero, sizeof(zero));
        break;
    }
    case NFTR_M_CT_ORIGINAL:
    case NFTR_M_CT_REPLY: {
        /* enum ip_conntrack_dir: IP_CT_DIR_ORIGINAL 0, IP_CT_DIR_REPLY 1 (not in uapi) */
        uint8_t dir = m->type == NFTR_M_CT_REPLY ? 1 : 0;
        e_ct(b, NFT_CT_DIRECTION);
        e_cmp(b, NFT_CMP_EQ, &dir, sizeof(dir));
        break;
    }
    case NFTR_M_TCP_SYNACK: {
        /* the flags byte of the TCP header (the rule matched l4proto tcp) */
        uint8_t synack = 0x12; /* TH_SYN | TH_ACK */
        e_payload(b, NFT_PAYLOAD_TRANSPORT_HEADER, 13, 1);
        e_bitwise(b, &synack, 1);
        e_cmp(b, NFT_CMP_EQ, &synack, 1);
        break;
    }
    case NFTR_M_SOCK_MARK:
    case NFTR_M_SOCK_MARK_NE: {
        /* the receiving socket's mark; no full socket: the rule stops */
        struct nftnl_expr *e = ex(b, "socket");
        if (e) {
            nftnl_expr_set_u32(e, NFTNL_EXPR_SOCKET_KEY, NFT_SOCKET_MARK);
            nftnl_expr_set_u32(e, NFTNL_EXPR_SOCKET_DREG, NFT_REG_1);
        }
        e_cmp(b, m->type == NFTR_M_SOCK_MARK ? NFT_CMP_EQ : NFT_CMP_NEQ, &m->id, sizeof(m->id));
        break;
    }
    case NFTR_M_CT_ESTABLISHED: {
        uint32_t bits = NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED),
                 zero = 0;
        e_ct(b, NFT_CT_STATE);
        e_bitwise(b, &bits, sizeof(bits));
        e_cmp(b, NFT_CMP_NEQ, &zero, sizeof(zero));
        break;
    }
    case NFTR_M_CT_NOT_NEW: {
        uint32_t bit = NF_CT_STATE_BIT(IP_CT_NEW), zero = 0;
        e_ct(b, NFT_CT_STATE);
        e_bitwise(b, &bit, sizeof(bit));
        e_cmp(b, NFT_CMP_EQ, &zero, sizeof(zero));
        break;
    }
    case NFTR_M_IIFNAME: {
        char name[IFNAMSIZ] = { 0 };
        memcpy(name, m->name, strnlen(m->name, IFNAMSIZ - 1));
        e_meta(b, NFT_META_IIFNAME);
        e_cmp(b, NFT_CMP_EQ, name, sizeof(name));
        break;
    }
    case NFTR_M_CT_MARK:
    case NFTR_M_CT_MARK_NE:
        e_ct(b, NFT_CT_MARK);
        e_cmp(b, m->type == NFTR_M_CT_MARK ? NFT_CMP_EQ : NFT_CMP_NEQ, &m->id, sizeof(m->id));
        break;
    case NFTR_M_META_MARK_NE:
        e_meta(b, NFT_META_MARK);
        e_cmp(b, NFT_CMP_NEQ, &m->id, sizeof(m->id));
        break;
    case NFTR_M_CT_MARK_ORIG: {
        uint32_t kind = NFTR_LO_MARK_KIND, ours = NFTR_LO_MARK_OURS;
        e_ct(b, NFT_CT_MARK);
        e_bitwise(b, &kind, sizeof(kind));
        e_cmp(b, NFT_CMP_EQ, &ours, sizeof(ours));
        break;
    }
    case NFTR_M_CT_DNAT: {
        uint32_t bit = IPS_DST_NAT, zero = 0;
        e_ct(b, NFT_CT_STATUS);
        e_bitwise(b, &bit, sizeof(bit));
        e_cmp(b, NFT_CMP_NEQ, &zero, sizeof(zero));
        break;
    }
    case NFTR_M_CG_SET:
        e_socket_cg(b, NFT_REG_1, m->level);
        e_lookup_from(b, m->name, NFT_REG_1, false, false);
        break;
    case NFTR_M_CG_IF_SET: {
        e_socket_cg(b, NFT_REG32_00, m->level);
        struct nftnl_expr *e = ex(b, "meta");
        if (e) {
            nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, NFT_META_OIFNAME);
            nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG32_02);
        }
        e_lookup_from(b, m->name, NFT_REG32_00, false, false);
        break;
    }
    case NFTR_M_PORT_CG_SET: {
        e_l4proto(b, m->l4proto);
        struct nftnl_expr *e = ex(b, "payload");
        if (e) { /* tcp/udp dport */
            nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG32_00);
            nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, NFT_PAYLOAD_TRANSPORT_HEADER);
            nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, 2);
            nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, 2);
        }
        e_socket_cg(b, NFT_REG32_01, m->level);
        e_lookup_from(b, m->name, NFT_REG32_00, false, false);
        break;
    }
    case NFTR_M_MARK_CG_SET: {
        struct nftnl_expr *e = ex(b, "ct");
        if (e) {
            nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_MARK);
            nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG32_00);
        }
        e_socket_cg(b, NFT_REG32_01, m->level);
        e_lookup_from(b, m->name, NFT_REG32_00, false, false);
        break;
    }
    case NFTR_M_CT_MARK_SET_NE:
        e_ct(b, NFT_CT_MARK);
        e_lookup_from(b, m->name, NFT_REG_1, false, true);
        break;
    case NFTR_M_SOCK_CGROUP: {
        /* The socket's cgroup ancestor at this level, by id (host order, as
         * the sessions map's keys). */
        e_socket_cg(b, NFT_REG_1, m->level);
        e_cmp(b, NFT_CMP_EQ, &m->cgroup_id, sizeof(m->cgroup_id));
        break;
    }
    }
}

static int rule_exprs(struct nftnl_rule *nr, const struct nftr_rule *r) {
    struct eb b = { .r = nr };
    for (size_t i = 0; i < r->n_match; i++)
        e_match(&b, &r->match[i]);
    if (r->counter_map[0])
        e_objref_map(&b, r->obj_level, r->counter_map);
    if (r->ct_mark_set || r->ct_mark_clear) {
        struct nftnl_expr *e = ex(&b, "immediate");
        if (e) {
            nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
            ex_data(&b, e, NFTNL_EXPR_IMM_DATA, &r->ct_mark_set, sizeof(r->ct_mark_set));
        }
        e_ct_set_mark(&b);
    }
    if (r->ct_mark_served_level || (r->ct_mark_map[0] && r->obj_level)) {
        /* the socket's session (cgroup at the sessions' level) to the mark
         * the map gives it (served: the receiving socket's served mark;
         * dlomark: the mark of a data session's new loopback flows); no
         * socket or not a session's: no match */
        e_socket_cg(&b, NFT_REG_1, r->ct_mark_served_level ? r->ct_mark_served_level : r->obj_level);
        struct nftnl_expr *e = ex(&b, "lookup");
        if (e) {
            nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
            nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, NFT_REG_1);
            ex_str(&b, e, NFTNL_EXPR_LOOKUP_SET,
                   r->ct_mark_served_level ? NFTR_MAP_SERVED : r->ct_mark_map);
        }
        e_ct_set_mark(&b);
    }
    if (r->limit_map[0])
        e_objref_map(&b, r->obj_level, r->limit_map);
    if (r->log_counter)
        ex(&b, "counter");
    if (r->limit) {
        struct nftnl_expr *e = ex(&b, "limit");
        if (e) {
            nftnl_expr_set_u64(e, NFTNL_EXPR_LIMIT_RATE, r->limit_rate);
            nftnl_expr_set_u64(e, NFTNL_EXPR_LIMIT_UNIT, 1); /* per second */
            nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_BURST, r->limit_burst);
            nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_TYPE, NFT_LIMIT_PKTS);
            nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_FLAGS, 0);
        }
    }
    if (r->log) {
        struct nftnl_expr *e = ex(&b, "log");
        if (e) {
            ex_str(&b, e, NFTNL_EXPR_LOG_PREFIX, r->log_prefix);
            nftnl_expr_set_u16(e, NFTNL_EXPR_LOG_GROUP, r->log_group);
        }
    }
    if (r->counter)
        ex(&b, "counter");
    switch (r->verdict) {
    case NFTR_V_CONTINUE:
        break;
    case NFTR_V_ACCEPT:
        e_verdict(&b, NF_ACCEPT, NULL);
        break;
    case NFTR_V_DROP:
        e_verdict(&b, NF_DROP, NULL);
        break;
    case NFTR_V_REJECT_TCP_RESET:
        e_reject(&b, NFT_REJECT_TCP_RST, 0);
        break;
    case NFTR_V_REJECT_ADMIN:
        e_reject(&b, NFT_REJECT_ICMPX_UNREACH, NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
        break;
    case NFTR_V_JUMP:
        e_verdict(&b, NFT_JUMP, r->target);
        break;
    case NFTR_V_GOTO:
        e_verdict(&b, NFT_GOTO, r->target);
        break;
    case NFTR_V_VMAP_CGROUP: {
        /* nft cannot express "this cgroup id" without resolving a path below
         * /sys/fs/cgroup; we hand the kernel the 8-byte id ourselves. */
        e_socket_cg(&b, NFT_REG_1, r->cgroup_level);
        e_lookup(&b, r->target, true, false);
        break;
    }
    case NFTR_V_VMAP_CTMARK:
        e_ct(&b, NFT_CT_MARK);
        e_lookup(&b, r->target, true, false);
        break;
    case NFTR_V_DNAT_CGROUP: {
        /* as nft encodes `dnat ip to 127.0.0.1:socket cgroupv2 level L map
         * @m`: the address in reg 1, the cgroup id in reg 2 and the port the
         * map gives it over it; a socket outside every session with a
         * forwarder has no element, and the rule stops there */
        bool v4 = r->dnat_family == AF_INET;
        static const uint8_t lo4[4] = {127, 0, 0, 1}, lo6[16] = {[15] = 1};
        struct nftnl_expr *e = ex(&b, "immediate");
        if (e) {
            nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
            ex_data(&b, e, NFTNL_EXPR_IMM_DATA, v4 ? lo4 : lo6, v4 ? sizeof(lo4) : sizeof(lo6));
        }
        e_socket_cg(&b, NFT_REG_2, r->cgroup_level);
        e = ex(&b, "lookup");
        if (e) {
            nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_2);
            nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, NFT_REG_2);
            ex_str(&b, e, NFTNL_EXPR_LOOKUP_SET, r->target);
        }
        e = ex(&b, "nat");
        if (e) {
            nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_TYPE, NFT_NAT_DNAT);
            nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FAMILY, v4 ? NFPROTO_IPV4 : NFPROTO_IPV6);
            nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_ADDR_MIN, NFT_REG_1);
            nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_ADDR_MAX, NFT_REG_1);
            nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_PROTO_MIN, NFT_REG_2);
            nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_PROTO_MAX, NFT_REG_2);
            nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FLAGS,
                               NF_NAT_RANGE_MAP_IPS | NF_NAT_RANGE_PROTO_SPECIFIED);
        }
        break;
    }
    }
    return b.err;
}

/* NEWRULE: appended, or inserted at the head of the chain. tag: private udata. */
static void put_rule(struct nft *n, struct batch *bt, const char *chain, const struct nftr_rule *r,
                     size_t index, bool append, const char *tag) {
    if (bt->err)
        return;
    _cleanup_(rulep) struct nftnl_rule *nr = rule_obj(chain);
    _cleanup_(udatap) struct nftnl_udata_buf *ud = NULL;
    int e = nr ? rule_exprs(nr, r) : -ENOMEM;
    if (e == 0 && (r->comment[0] || tag)) {
        ud = nftnl_udata_buf_alloc(UDATA_MAX);
        if (!ud || (r->comment[0] && !nftnl_udata_put_strz(ud, NFTNL_UDATA_RULE_COMMENT, r->comment)) ||
            (tag && !nftnl_udata_put_strz(ud, LYH_UDATA_TAG, tag)) ||
            nftnl_rule_set_data(nr, NFTNL_RULE_USERDATA, nftnl_udata_buf_data(ud),
                                nftnl_udata_buf_len(ud)) < 0)
            e = -ENOMEM;
    }
    if (e < 0) {
        bt->err = e;
        return;
    }
    struct nlmsghdr *nlh = batch_msg(n, bt, NFT_MSG_NEWRULE, NLM_F_CREATE | (append ? NLM_F_APPEND : 0),
                                     "rule %zu of chain %s", index, chain);
    if (!nlh)
        return;
    nftnl_rule_nlmsg_build_payload(nlh, nr);
    batch_next(bt);
}

/* ---- sets ------------------------------------------------------------------------------ */

static struct nftnl_set *set_obj(const char *name, uint32_t id) {
    struct nftnl_set *s = nftnl_set_alloc();
    if (!s)
        return NULL;
    if (nftnl_set_set_str(s, NFTNL_SET_TABLE, NFTR_TABLE) < 0 ||
        nftnl_set_set_str(s, NFTNL_SET_NAME, name) < 0) {
        nftnl_set_free(s);
        return NULL;
    }
    nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
    if (id)
        nftnl_set_set_u32(s, NFTNL_SET_ID, id);
    return s;
}

/* An interval set holds a start element per range and an INTERVAL_END element at
 * the first address after it; a range reaching the top of the space has no end
 * (nft marks its start "open" in the element's udata so it prints as a prefix). */
struct elem {
    uint8_t key[16];
    bool end;
    bool open;
};

static size_t prefix_elems(int family, struct elem *out) {
    const struct dr_rule *v;
    size_t n = nftr_lan_prefixes(family, &v), k = 0, alen = family == AF_INET ? 4 : 16;
    for (size_t i = 0; i < n; i++) {
        struct elem s = { .end = false }, e = { .end = true };
        memcpy(s.key, v[i].addr, alen);
        memcpy(e.key, v[i].addr, alen);
        /* e = start + 2^(bits - prefix): set the host bits, then add one */
        for (size_t bit = v[i].prefix_len; bit < alen * 8; bit++)
            e.key[bit / 8] |= (uint8_t)(0x80u >> (bit % 8));
        bool carry = true;
        for (size_t j = alen; j-- > 0 && carry;) {
            e.key[j]++;
            carry = e.key[j] == 0;
        }
        s.open = carry; /* wrapped: the range runs to the last address */
        out[k++] = s;
        if (!carry)
            out[k++] = e;
    }
    return k;
}

static void put_set_elems(struct nft *n, struct batch *bt, int family) {
    const char *name = family == AF_INET ? NFTR_SET_LAN4 : NFTR_SET_LAN6;
    uint32_t alen = family == AF_INET ? 4 : 16;
    struct elem el[2 * 16];
    size_t k = prefix_elems(family, el);
    _cleanup_(setp) struct nftnl_set *s = set_obj(name, family == AF_INET ? SET_ID_LAN4 : SET_ID_LAN6);
    if (!s) {
        bt->err = bt->err ? bt->err : -ENOMEM;
        return;
    }
    for (size_t i = 0; i < k; i++) {
        _cleanup_(elemp) struct nftnl_set_elem *e = nftnl_set_elem_alloc();
        if (!e || nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, el[i].key, alen) < 0) {
            bt->err = -ENOMEM;
            return;
        }
        if (el[i].end)
            nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END);
        if (el[i].open) {
            _cleanup_(udatap) struct nftnl_udata_buf *ud = nftnl_udata_buf_alloc(16);
            if (!ud || !nftnl_udata_put_u32(ud, NFTNL_UDATA_SET_ELEM_FLAGS, NFTNL_SET_ELEM_F_INTERVAL_OPEN) ||
                nftnl_set_elem_set(e, NFTNL_SET_ELEM_USERDATA, nftnl_udata_buf_data(ud),
                                   nftnl_udata_buf_len(ud)) < 0) {
                bt->err = -ENOMEM;
                return;
            }
        }
        nftnl_set_elem_add(s, TAKE_PTR(e));
    }
    struct nlmsghdr *nlh = batch_msg(n, bt, NFT_MSG_NEWSETELEM, NLM_F_CREATE, "elements of set %s", name);
    if (!nlh)
        return;
    nftnl_set_elems_nlmsg_build_payload(nlh, s);
    batch_next(bt);
}

static void put_set(struct nft *n, struct batch *bt, const char *name) {
    bool lomap = strcmp(name, NFTR_MAP_LOOPBACK) == 0, served = strcmp(name, NFTR_MAP_SERVED) == 0;
    bool dnsport = strcmp(name, NFTR_MAP_DNSPORT) == 0;
    bool p4 = strcmp(name, NFTR_SET_PROTO4) == 0, p6 = strcmp(name, NFTR_SET_PROTO6) == 0;
    bool map = lomap || served || dnsport || strcmp(name, NFTR_MAP_SESSIONS) == 0,
         v4 = p4 || strcmp(name, NFTR_SET_LAN4) == 0;
    uint32_t id = lomap     ? SET_ID_LOOPBACK
                  : served  ? SET_ID_SERVED
                  : dnsport ? SET_ID_DNSPORT
                  : map    ? SET_ID_SESSIONS
                  : p4     ? SET_ID_PROTO4
                  : p6     ? SET_ID_PROTO6
                  : v4     ? SET_ID_LAN4
                           : SET_ID_LAN6;
    _cleanup_(setp) struct nftnl_set *s = set_obj(name, id);
    _cleanup_(udatap) struct nftnl_udata_buf *ud = nftnl_udata_buf_alloc(16);
    if (!s || !ud ||
        !nftnl_udata_put_u32(ud, NFTNL_UDATA_SET_KEYBYTEORDER, map ? NFT_BYTEORDER_HOST : NFT_BYTEORDER_BIG) ||
        ((served || dnsport) && /* so that nft prints a mark as the rules read it */
         !nftnl_udata_put_u32(ud, NFTNL_UDATA_SET_DATABYTEORDER,
                              served ? NFT_BYTEORDER_HOST : NFT_BYTEORDER_BIG)) ||
        nftnl_set_set_data(s, NFTNL_SET_USERDATA, nftnl_udata_buf_data(ud), nftnl_udata_buf_len(ud)) < 0) {
        bt->err = bt->err ? bt->err : -ENOMEM;
        return;
    }
    if (map) {
        nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_MAP);
        nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, lomap ? NFT_TYPE_MARK : NFT_TYPE_CGROUPV2);
        nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, lomap ? sizeof(uint32_t) : sizeof(uint64_t));
        nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, served    ? NFT_TYPE_MARK
                                                  : dnsport ? NFT_TYPE_INET_SERVICE
                                                            : NFT_DATA_VERDICT);
        nftnl_set_set_u32(s, NFTNL_SET_DATA_LEN, served    ? sizeof(uint32_t)
                                                 : dnsport ? sizeof(uint16_t)
                                                           : 0);
    } else {
        /* lan4/lan6: ranges; proto4/proto6: single addresses */
        nftnl_set_set_u32(s, NFTNL_SET_FLAGS, p4 || p6 ? 0 : NFT_SET_INTERVAL);
        nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, v4 ? NFT_TYPE_IPADDR : NFT_TYPE_IP6ADDR);
        nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, v4 ? 4 : 16);
    }
    struct nlmsghdr *nlh = batch_msg(n, bt, NFT_MSG_NEWSET, NLM_F_CREATE | NLM_F_EXCL, "set %s", name);
    if (!nlh)
        return;
    nftnl_set_nlmsg_build_payload(nlh, s);
    batch_next(bt);
}

/* NEWSET / DELSET of a session's domain set (ipv4_addr or ipv6_addr, flags
 * timeout, bounded). */
static void put_domain_set(struct nft *n, struct batch *bt, uint16_t type, const char *name,
                           int family) {
    _cleanup_(setp) struct nftnl_set *s =
        set_obj(name, type == NFT_MSG_NEWSET ? (family == AF_INET ? SET_ID_DOMAIN4 : SET_ID_DOMAIN6) : 0);
    if (!s) {
        bt->err = bt->err ? bt->err : -ENOMEM;
        return;
    }
    if (type == NFT_MSG_NEWSET) {
        bool v4 = family == AF_INET;
        nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_TIMEOUT);
        nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, v4 ? NFT_TYPE_IPADDR : NFT_TYPE_IP6ADDR);
        nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, v4 ? 4 : 16);
        nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, NFTR_DOMAIN_SET_SIZE);
    }
    struct nlmsghdr *nlh = batch_msg(n, bt, type, type == NFT_MSG_NEWSET ? NLM_F_CREATE | NLM_F_EXCL : 0,
                                     "set %s", name);
    if (!nlh)
        return;
    nftnl_set_nlmsg_build_payload(nlh, s);
    batch_next(bt);
}

/* NEWSETELEM / DELSETELEM of { key : jump chain } in map sessions (a cgroup id)
 * or map loopback (a ct mark), or { key : data } in map served (a cgroup id :
 * a ct mark; data != NULL). */
static void put_map_elem(struct nft *n, struct batch *bt, uint16_t type, const char *map,
                         const void *key, uint32_t key_len, uint64_t key_num, const char *chain,
                         const void *data, uint32_t data_len) {
    _cleanup_(setp) struct nftnl_set *s = set_obj(map, 0);
    _cleanup_(elemp) struct nftnl_set_elem *e = nftnl_set_elem_alloc();
    /* the kernel writes ids and marks into registers in host byte order */
    if (!s || !e || nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, key_len) < 0 ||
        (data && nftnl_set_elem_set(e, NFTNL_SET_ELEM_DATA, data, data_len) < 0) ||
        (chain && nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, chain) < 0)) {
        bt->err = bt->err ? bt->err : -ENOMEM;
        return;
    }
    if (chain)
        nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, (uint32_t)NFT_JUMP);
    nftnl_set_elem_add(s, TAKE_PTR(e));
    struct nlmsghdr *nlh = batch_msg(n, bt, type, type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE | NLM_F_EXCL : 0,
                                     "element %" PRIu64 " of map %s", key_num, map);
    if (!nlh)
        return;
    nftnl_set_elems_nlmsg_build_payload(nlh, s);
    batch_next(bt);
}

static void put_session_elem(struct nft *n, struct batch *bt, uint16_t type, uint64_t cgroup_id,
                             const char *chain) {
    put_map_elem(n, bt, type, NFTR_MAP_SESSIONS, &cgroup_id, sizeof(cgroup_id), cgroup_id, chain,
                 NULL, 0);
}

static void put_lo_elem(struct nft *n, struct batch *bt, uint16_t type, uint32_t mark,
                        const char *chain) {
    put_map_elem(n, bt, type, NFTR_MAP_LOOPBACK, &mark, sizeof(mark), mark, chain, NULL, 0);
}

static void put_served_elem(struct nft *n, struct batch *bt, uint16_t type, uint64_t cgroup_id,
                            const uint32_t *mark) {
    put_map_elem(n, bt, type, NFTR_MAP_SERVED, &cgroup_id, sizeof(cgroup_id), cgroup_id, NULL,
                 mark, sizeof(*mark));
}

/* { cgroup id : port } of map dnsport; the port in network order, as the nat
 * expression reads it */
static void put_dns_elem(struct nft *n, struct batch *bt, uint16_t type, uint64_t cgroup_id,
                         uint16_t port) {
    uint16_t be = htons(port);
    put_map_elem(n, bt, type, NFTR_MAP_DNSPORT, &cgroup_id, sizeof(cgroup_id), cgroup_id, NULL,
                 port ? &be : NULL, sizeof(be));
}

/* ---- the data layout ------------------------------------------------------------------- */

static bool has_prefix(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A key's bytes, as the rules' expressions lay it out (e_match): each part
 * from a 4-byte boundary, cgroup ids and marks in host order, ports and
 * interface names as on the wire. */
static uint32_t key_len(enum nftr_key k) {
    switch (k) {
    case NFTR_K_CG: return 8;
    case NFTR_K_CG_IF: return 8 + IFNAMSIZ;
    case NFTR_K_PORT_CG: return 4 + 8;
    case NFTR_K_MARK_CG: return 4 + 8;
    case NFTR_K_MARK: return 4;
    }
    return 0;
}

static uint32_t key_type(enum nftr_key k) {
    switch (k) {
    case NFTR_K_CG: return NFT_TYPE_CGROUPV2;
    case NFTR_K_CG_IF: return NFT_TYPE_CGROUPV2 << NFT_TYPE_BITS | NFT_TYPE_IFNAME;
    case NFTR_K_PORT_CG: return NFT_TYPE_INET_SERVICE << NFT_TYPE_BITS | NFT_TYPE_CGROUPV2;
    case NFTR_K_MARK_CG: return NFT_TYPE_MARK << NFT_TYPE_BITS | NFT_TYPE_CGROUPV2;
    case NFTR_K_MARK: return NFT_TYPE_MARK;
    }
    return 0;
}

static size_t elem_key(const struct nftr_elem *e, uint8_t key[static 8 + IFNAMSIZ]) {
    uint16_t port = htons(e->port);
    memset(key, 0, 8 + IFNAMSIZ);
    switch (e->key) {
    case NFTR_K_CG:
        memcpy(key, &e->cgroup_id, 8);
        break;
    case NFTR_K_CG_IF:
        memcpy(key, &e->cgroup_id, 8);
        memcpy(key + 8, e->ifname, strnlen(e->ifname, IFNAMSIZ - 1));
        break;
    case NFTR_K_PORT_CG:
        memcpy(key, &port, 2);
        memcpy(key + 4, &e->cgroup_id, 8);
        break;
    case NFTR_K_MARK_CG:
        memcpy(key, &e->mark, 4);
        memcpy(key + 4, &e->cgroup_id, 8);
        break;
    case NFTR_K_MARK:
        memcpy(key, &e->mark, 4);
        break;
    }
    return key_len(e->key);
}

/* NEWSET of one of the layout's sets or maps (nftr_data_sets()) */
static void put_data_set(struct nft *n, struct batch *bt, const struct nftr_data_set *ds, uint32_t id) {
    _cleanup_(setp) struct nftnl_set *s = set_obj(ds->name, id);
    _cleanup_(udatap) struct nftnl_udata_buf *ud = nftnl_udata_buf_alloc(16);
    bool concat = ds->key != NFTR_K_CG && ds->key != NFTR_K_MARK;
    /* as nft writes it: a concatenation's parts carry their own byte order */
    if (!s || !ud ||
        !nftnl_udata_put_u32(ud, NFTNL_UDATA_SET_KEYBYTEORDER, concat ? 0 : NFT_BYTEORDER_HOST) ||
        (ds->val == NFTR_D_MARK &&
         !nftnl_udata_put_u32(ud, NFTNL_UDATA_SET_DATABYTEORDER, NFT_BYTEORDER_HOST)) ||
        nftnl_set_set_data(s, NFTNL_SET_USERDATA, nftnl_udata_buf_data(ud), nftnl_udata_buf_len(ud)) < 0) {
        bt->err = bt->err ? bt->err : -ENOMEM;
        return;
    }
    nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, key_type(ds->key));
    nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, key_len(ds->key));
    switch (ds->val) {
    case NFTR_D_NONE:
        nftnl_set_set_u32(s, NFTNL_SET_FLAGS, 0);
        break;
    case NFTR_D_MARK:
    case NFTR_D_PORT:
        nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_MAP);
        nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE,
                          ds->val == NFTR_D_MARK ? NFT_TYPE_MARK : NFT_TYPE_INET_SERVICE);
        nftnl_set_set_u32(s, NFTNL_SET_DATA_LEN, ds->val == NFTR_D_MARK ? 4 : 2);
        break;
    case NFTR_D_VERDICT:
    case NFTR_D_CONTINUE:
        nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_MAP);
        nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, NFT_DATA_VERDICT);
        nftnl_set_set_u32(s, NFTNL_SET_DATA_LEN, 0);
        break;
    case NFTR_D_COUNTER:
    case NFTR_D_LIMIT:
        nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_OBJECT);
        nftnl_set_set_u32(s, NFTNL_SET_OBJ_TYPE,
                          ds->val == NFTR_D_COUNTER ? NFT_OBJECT_COUNTER : NFT_OBJECT_LIMIT);
        break;
    }
    struct nlmsghdr *nlh = batch_msg(n, bt, NFT_MSG_NEWSET, NLM_F_CREATE | NLM_F_EXCL, "set %s", ds->name);
    if (!nlh)
        return;
    nftnl_set_nlmsg_build_payload(nlh, s);
    batch_next(bt);
}

/* NEWSETELEM / DELSETELEM of one element of a data session */
static void put_data_elem(struct nft *n, struct batch *bt, uint16_t type, const struct nftr_elem *de) {
    _cleanup_(setp) struct nftnl_set *s = set_obj(de->set, 0);
    _cleanup_(elemp) struct nftnl_set_elem *e = nftnl_set_elem_alloc();
    uint8_t key[8 + IFNAMSIZ];
    size_t klen = elem_key(de, key);
    uint16_t port = htons(de->vport);
    int r = !s || !e ? -1 : nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, (uint32_t)klen);
    if (r == 0 && type == NFT_MSG_NEWSETELEM) {
        switch (de->val) {
        case NFTR_D_NONE:
            break;
        case NFTR_D_MARK:
            r = nftnl_set_elem_set(e, NFTNL_SET_ELEM_DATA, &de->vmark, sizeof(de->vmark));
            break;
        case NFTR_D_PORT:
            r = nftnl_set_elem_set(e, NFTNL_SET_ELEM_DATA, &port, sizeof(port));
            break;
        case NFTR_D_COUNTER:
        case NFTR_D_LIMIT:
            r = nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_OBJREF, de->vname);
            break;
        case NFTR_D_VERDICT:
            r = nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, de->vname);
            if (r == 0)
                nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, (uint32_t)NFT_JUMP);
            break;
        case NFTR_D_CONTINUE:
            nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, (uint32_t)NFT_CONTINUE);
            break;
        }
    }
    if (r < 0) {
        bt->err = bt->err ? bt->err : -ENOMEM;
        return;
    }
    nftnl_set_elem_add(s, TAKE_PTR(e));
    struct nlmsghdr *nlh = batch_msg(n, bt, type, type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE | NLM_F_EXCL : 0,
                                     "element %" PRIu64 " of %s", de->cgroup_id, de->set);
    if (!nlh)
        return;
    nftnl_set_elems_nlmsg_build_payload(nlh, s);
    batch_next(bt);
}

/* NEWOBJ / DELOBJ of a data session's named counter or limit */
static void put_data_obj(struct nft *n, struct batch *bt, uint16_t type, const struct nftr_obj *o) {
    _cleanup_(objp) struct nftnl_obj *ob = nftnl_obj_alloc();
    if (ob) { /* these return nothing: a failed copy leaves the attribute unset */
        nftnl_obj_set_str(ob, NFTNL_OBJ_TABLE, NFTR_TABLE);
        nftnl_obj_set_str(ob, NFTNL_OBJ_NAME, o->name);
    }
    if (!ob || !nftnl_obj_is_set(ob, NFTNL_OBJ_TABLE) || !nftnl_obj_is_set(ob, NFTNL_OBJ_NAME)) {
        bt->err = bt->err ? bt->err : -ENOMEM;
        return;
    }
    nftnl_obj_set_u32(ob, NFTNL_OBJ_FAMILY, NFPROTO_INET);
    nftnl_obj_set_u32(ob, NFTNL_OBJ_TYPE, o->type == NFTR_D_COUNTER ? NFT_OBJECT_COUNTER
                                                                    : NFT_OBJECT_LIMIT);
    if (type == NFT_MSG_NEWOBJ && o->type == NFTR_D_LIMIT) {
        nftnl_obj_set_u64(ob, NFTNL_OBJ_LIMIT_RATE, o->rate);
        nftnl_obj_set_u64(ob, NFTNL_OBJ_LIMIT_UNIT, 1); /* per second */
        nftnl_obj_set_u32(ob, NFTNL_OBJ_LIMIT_BURST, o->burst);
        nftnl_obj_set_u32(ob, NFTNL_OBJ_LIMIT_TYPE, NFT_LIMIT_PKTS);
        nftnl_obj_set_u32(ob, NFTNL_OBJ_LIMIT_FLAGS, 0);
    }
    struct nlmsghdr *nlh = batch_msg(n, bt, type, type == NFT_MSG_NEWOBJ ? NLM_F_CREATE | NLM_F_EXCL : 0,
                                     "object %s", o->name);
    if (!nlh)
        return;
    nftnl_obj_nlmsg_build_payload(nlh, ob);
    batch_next(bt);
}

static bool data_names_ok(const struct nftr_data *d) {
    return d && d->cgroup_id && has_prefix(d->dlog, NFTR_DLOG_CHAIN_PREFIX) &&
           (!d->alog[0] || has_prefix(d->alog, NFTR_ALOG_CHAIN_PREFIX)) && d->n_elems > 0 &&
           strcmp(d->elems[d->n_elems - 1].set, NFTR_SET_DLIVE) == 0;
}

static void put_data_adds(struct nft *n, struct batch *bt, const struct nftr_data *d) {
    for (size_t i = 0; i < d->n_objs; i++)
        put_data_obj(n, bt, NFT_MSG_NEWOBJ, &d->objs[i]);
    const char *chains[] = {d->alog, d->dlog};
    const struct nftr_rule *rules[] = {&d->alog_rule, &d->dlog_rule};
    for (size_t i = 0; i < ARRAY_SIZE(chains); i++) {
        if (!chains[i][0])
            continue;
        put_chain(n, bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, chains[i], false);
        put_rule(n, bt, chains[i], rules[i], 0, true, NULL);
    }
    for (size_t i = 0; i < d->n_elems; i++)
        put_data_elem(n, bt, NFT_MSG_NEWSETELEM, &d->elems[i]);
}

int nft_data_add(struct nft *n, const struct nftr_data *d) {
    if (!data_names_ok(d))
        return -EINVAL;
    struct batch bt;
    int r = batch_start(n, &bt, NULL);
    if (r < 0) {
        batch_free(&bt);
        return r;
    }
    put_data_adds(n, &bt, d);
    return batch_send(n, &bt);
}

/* The elements whose loss closes everything the session had: its dispatch
 * (dlive) and what chain guarded's rules for established flows read ahead of
 * it (dvpn, dvpn6). */
static bool elem_opens_first(const struct nftr_elem *e) {
    return strcmp(e->set, NFTR_SET_DLIVE) == 0 || strcmp(e->set, NFTR_SET_DVPN) == 0 ||
           strcmp(e->set, NFTR_SET_DVPN6) == 0;
}

static void put_data_chain_del(struct nft *n, struct batch *bt, const char *chain) {
    put_delrule(n, bt, chain, 0);
    put_chain(n, bt, NFT_MSG_DELCHAIN, 0, chain, false);
}

/* the elements before the chains and objects they name */
static void put_data_dels(struct nft *n, struct batch *bt, const struct nftr_data *d) {
    for (size_t i = d->n_elems; i-- > 0;)
        put_data_elem(n, bt, NFT_MSG_DELSETELEM, &d->elems[i]);
    const char *chains[] = {d->alog, d->dlog};
    for (size_t i = 0; i < ARRAY_SIZE(chains); i++)
        if (chains[i][0])
            put_data_chain_del(n, bt, chains[i]);
    for (size_t i = 0; i < d->n_objs; i++)
        put_data_obj(n, bt, NFT_MSG_DELOBJ, &d->objs[i]);
}

/* One piece (element i, chain i - n_elems, or object i - n_elems - 2) in a
 * transaction of its own. */
static int data_del_piece(struct nft *n, const struct nftr_data *d, size_t i) {
    const char *chains[] = {d->alog, d->dlog};
    if (i >= d->n_elems && i < d->n_elems + 2 && !chains[i - d->n_elems][0])
        return -ENOENT;
    struct batch bt;
    int r = batch_start(n, &bt, NULL);
    if (r < 0) {
        batch_free(&bt);
        return r;
    }
    if (i < d->n_elems)
        put_data_elem(n, &bt, NFT_MSG_DELSETELEM, &d->elems[i]);
    else if (i < d->n_elems + 2)
        put_data_chain_del(n, &bt, chains[i - d->n_elems]);
    else
        put_data_obj(n, &bt, NFT_MSG_DELOBJ, &d->objs[i - d->n_elems - 2]);
    return batch_send(n, &bt);
}

/* The pass in which a piece-by-piece removal takes piece i: 0, what closes all;
 * 1, the other elements; 2, the jumps to its log chains, by which a reap after
 * a crash in between still finds what is left (nft_data_pieces_owner); 3, the
 * chains and objects they named. */
static int data_del_pass(const struct nftr_data *d, size_t i) {
    if (i >= d->n_elems)
        return 3;
    if (elem_opens_first(&d->elems[i]))
        return 0;
    return d->elems[i].val == NFTR_D_VERDICT ? 2 : 1;
}

int nft_data_del(struct nft *n, const struct nftr_data *d, bool *ret_searched) {
    if (ret_searched)
        *ret_searched = false;
    if (!data_names_ok(d))
        return -EINVAL;
    struct batch bt;
    int r = batch_start(n, &bt, NULL);
    if (r < 0) {
        batch_free(&bt);
        return r;
    }
    put_data_dels(n, &bt, d);
    r = batch_send(n, &bt);
    if (r != -ENOENT && r != -EBUSY)
        return r;
    /* Part of it is gone (-ENOENT), or a chain or object of it is named by
     * something lyhd did not put there (-EBUSY): the transaction changed
     * nothing. Then every piece alone, what closes the session first, so
     * that no missing piece can keep the others, and least of all what
     * opens, in place. */
    if (ret_searched)
        *ret_searched = true;
    size_t removed = 0, total = d->n_elems + 2 + d->n_objs;
    int err = 0;
    for (int pass = 0; pass < 4; pass++)
        for (size_t i = 0; i < total; i++) {
            if (data_del_pass(d, i) != pass)
                continue;
            int k = data_del_piece(n, d, i);
            if (k == 0)
                removed++;
            else if (k != -ENOENT && !err)
                err = k;
        }
    return err ? err : removed ? 0 : -ENOENT;
}

/* ---- reading single objects ------------------------------------------------------------ */

static void build_table(struct nlmsghdr *nlh, const void *o) { nftnl_table_nlmsg_build_payload(nlh, o); }
static void build_chain(struct nlmsghdr *nlh, const void *o) { nftnl_chain_nlmsg_build_payload(nlh, o); }
static void build_rule(struct nlmsghdr *nlh, const void *o) { nftnl_rule_nlmsg_build_payload(nlh, (struct nftnl_rule *)o); }
static void build_set(struct nlmsghdr *nlh, const void *o) { nftnl_set_nlmsg_build_payload(nlh, (struct nftnl_set *)o); }
static void build_elems(struct nlmsghdr *nlh, const void *o) { nftnl_set_elems_nlmsg_build_payload(nlh, (struct nftnl_set *)o); }

static int get_table(struct nft *n, struct nftnl_table *out) {
    _cleanup_(tablep) struct nftnl_table *t = nftnl_table_alloc();
    if (!t || nftnl_table_set_str(t, NFTNL_TABLE_NAME, NFTR_TABLE) < 0)
        return -ENOMEM;
    struct nlmsghdr *nlh = req_hdr(n, NFT_MSG_GETTABLE, NLM_F_ACK);
    build_table(nlh, t);
    return talk(n, nlh, table_cb, out);
}

static int get_chain(struct nft *n, const char *name, struct nftnl_chain *out) {
    _cleanup_(chainp) struct nftnl_chain *c = chain_obj(name);
    if (!c)
        return -ENOMEM;
    struct nlmsghdr *nlh = req_hdr(n, NFT_MSG_GETCHAIN, NLM_F_ACK);
    build_chain(nlh, c);
    return talk(n, nlh, chain_cb, out);
}

static int get_set(struct nft *n, const char *name, struct nftnl_set *out) {
    _cleanup_(setp) struct nftnl_set *s = set_obj(name, 0);
    if (!s)
        return -ENOMEM;
    struct nlmsghdr *nlh = req_hdr(n, NFT_MSG_GETSET, NLM_F_ACK);
    build_set(nlh, s);
    return talk(n, nlh, set_cb, out);
}

static int chain_exists(struct nft *n, const char *name) {
    _cleanup_(chainp) struct nftnl_chain *c = nftnl_chain_alloc();
    if (!c)
        return -ENOMEM;
    int r = get_chain(n, name, c);
    return r == 0 ? 1 : r == -ENOENT ? 0 : r;
}

static int set_exists(struct nft *n, const char *name) {
    _cleanup_(setp) struct nftnl_set *s = nftnl_set_alloc();
    if (!s)
        return -ENOMEM;
    int r = get_set(n, name, s);
    return r == 0 ? 1 : r == -ENOENT ? 0 : r;
}

/* ---- rule dumps ------------------------------------------------------------------------ */

struct rule_info {
    uint64_t handle;
    char comment[NFTR_NAME_MAX];
    char tag[TAG_MAX];
    bool counter;
    bool log;    /* a log rule (no verdict); its counter counts what it saw */
    bool sets_mark; /* `ct mark set <mark>` */
    bool sets_unknown_mark; /* `ct mark set` from a register it cannot tell, or a jump or
                             * goto (the chain it leads to may set one) */
    bool mark_counted; /* its counter counts every packet whose mark it sets: nothing
                        * that could stop a packet between the counter and the set */
    uint32_t mark;
    uint64_t packets, bytes;
    int verdict; /* 0 none, 1 accept, 2 reject, 3 other */
};

struct rule_list {
    struct rule_info *v;
    size_t n, cap;
};

static void rule_list_reset(void *data) {
    struct rule_list *l = data;
    l->n = 0;
}

static int udata_cb(const struct nftnl_udata *attr, void *data) {
    const struct nftnl_udata **tb = data;
    tb[nftnl_udata_type(attr)] = attr;
    return 0;
}

static void udata_str(const struct nftnl_udata *a, char *buf, size_t size) {
    buf[0] = '\0';
    if (!a)
        return;
    size_t len = nftnl_udata_len(a);
    const char *v = nftnl_udata_get(a);
    if (len == 0 || v[len - 1] != '\0' || len > size)
        return;
    memcpy(buf, v, len);
}

static int rule_cb(const struct nlmsghdr *nlh, void *data) {
    struct rule_list *l = data;
    _cleanup_(rulep) struct nftnl_rule *r = nftnl_rule_alloc();
    if (!r)
        return -ENOMEM;
    if (nftnl_rule_nlmsg_parse(nlh, r) < 0)
        return -EPROTO;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        void *v = reallocarray(l->v, cap, sizeof(l->v[0]));
        if (!v)
            return -ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    struct rule_info *ri = &l->v[l->n];
    memset(ri, 0, sizeof(*ri));
    ri->handle = nftnl_rule_get_u64(r, NFTNL_RULE_HANDLE);
    if (nftnl_rule_is_set(r, NFTNL_RULE_USERDATA)) {
        uint32_t len = 0;
        const void *ud = nftnl_rule_get_data(r, NFTNL_RULE_USERDATA, &len);
        const struct nftnl_udata *tb[256] = { NULL };
        if (ud && nftnl_udata_parse(ud, len, udata_cb, tb) >= 0) {
            udata_str(tb[NFTNL_UDATA_RULE_COMMENT], ri->comment, sizeof(ri->comment));
            udata_str(tb[LYH_UDATA_TAG], ri->tag, sizeof(ri->tag));
        }
    }
    _cleanup_(iterp) struct nftnl_expr_iter *it = nftnl_expr_iter_create(r);
    if (!it)
        return -ENOMEM;
    uint32_t reg1 = 0; /* what an immediate last loaded into register 1 */
    bool reg1_set = false;
    /* where the last expression that may stop a packet, the last counter and
     * the mark's set are (expression numbers; -1 none) */
    int at = -1, last_stop = -1, last_counter = -1, set_at = -1, counters = 0;
    for (struct nftnl_expr *e = nftnl_expr_iter_next(it); e; e = nftnl_expr_iter_next(it)) {
        const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);
        at++;
        if (!name) {
            last_stop = at;
            continue;
        }
        if (strcmp(name, "immediate") != 0 && strcmp(name, "ct") != 0 &&
            strcmp(name, "counter") != 0 && strcmp(name, "log") != 0)
            last_stop = at; /* a match, a limit, a load: anything but these four */
        if (strcmp(name, "ct") == 0 && !nftnl_expr_is_set(e, NFTNL_EXPR_CT_SREG))
            last_stop = at; /* a ct load, not a set */
        if (strcmp(name, "immediate") == 0 && nftnl_expr_is_set(e, NFTNL_EXPR_IMM_VERDICT)) {
            int v = (int)nftnl_expr_get_u32(e, NFTNL_EXPR_IMM_VERDICT);
            if (v == NFT_JUMP || v == NFT_GOTO)
                ri->sets_unknown_mark = true;
            if (v != NFT_CONTINUE)
                last_stop = at; /* nothing after a verdict is evaluated */
        }
        /* a verdict map may jump to a chain that sets one; a queue's
         * program and an xtables target (CONNMARK) set marks nobody here
         * sees */
        if ((strcmp(name, "lookup") == 0 && nftnl_expr_is_set(e, NFTNL_EXPR_LOOKUP_DREG) &&
             nftnl_expr_get_u32(e, NFTNL_EXPR_LOOKUP_DREG) == NFT_REG_VERDICT) ||
            strcmp(name, "queue") == 0 || strcmp(name, "target") == 0)
            ri->sets_unknown_mark = true;
        if (strcmp(name, "immediate") == 0 && nftnl_expr_is_set(e, NFTNL_EXPR_IMM_DATA) &&
            nftnl_expr_get_u32(e, NFTNL_EXPR_IMM_DREG) == NFT_REG_1) {
            uint32_t len = 0;
            const void *v = nftnl_expr_get_data(e, NFTNL_EXPR_IMM_DATA, &len);
            reg1_set = v && len == sizeof(reg1);
            if (reg1_set)
                memcpy(&reg1, v, sizeof(reg1));
            continue;
        }
        if (strcmp(name, "ct") == 0 && nftnl_expr_is_set(e, NFTNL_EXPR_CT_SREG)) {
            if (nftnl_expr_get_u32(e, NFTNL_EXPR_CT_KEY) == NFT_CT_MARK) {
                /* a mark from anything but an immediate in register 1 may
                 * be any mark: whoever counts marks cannot tell */
                if (nftnl_expr_get_u32(e, NFTNL_EXPR_CT_SREG) == NFT_REG_1 && reg1_set &&
                    !ri->sets_mark) {
                    ri->sets_mark = true;
                    ri->mark = reg1;
                    set_at = at;
                    /* a counter before it, nothing that may stop between */
                    if (last_counter >= 0 && last_stop < last_counter)
                        ri->mark_counted = true;
                } else {
                    /* from a register it cannot tell, or a second set in
                     * one rule (only the last would be remembered) */
                    ri->sets_unknown_mark = true;
                }
            }
            continue;
        }
        /* what register 1 holds is known only until anything else may
         * load it (meta, payload, ct or lookup with a destination, ...) */
        if (strcmp(name, "cmp") != 0 && strcmp(name, "counter") != 0 && strcmp(name, "log") != 0)
            reg1_set = false;
        if (strcmp(name, "counter") == 0) {
            counters++;
            last_counter = at;
            /* a counter after the set, nothing that may stop between */
            if (set_at >= 0 && last_stop < set_at)
                ri->mark_counted = true;
            ri->counter = true;
            ri->packets = nftnl_expr_get_u64(e, NFTNL_EXPR_CTR_PACKETS);
            ri->bytes = nftnl_expr_get_u64(e, NFTNL_EXPR_CTR_BYTES);
        } else if (strcmp(name, "log") == 0) {
            ri->log = true;
        } else if (strcmp(name, "reject") == 0) {
            ri->verdict = 2;
        } else if (strcmp(name, "immediate") == 0 && nftnl_expr_is_set(e, NFTNL_EXPR_IMM_VERDICT)) {
            ri->verdict = (int)nftnl_expr_get_u32(e, NFTNL_EXPR_IMM_VERDICT) == NF_ACCEPT ? 1 : 3;
        } else if (strcmp(name, "lookup") == 0 && nftnl_expr_is_set(e, NFTNL_EXPR_LOOKUP_DREG)) {
            ri->verdict = 3;
        }
    }
    /* one count per rule: with two, the one kept (the last) need not be the
     * one that saw every packet whose mark the rule set */
    if (ri->sets_mark && counters > 1)
        ri->sets_unknown_mark = true;
    l->n++;
    return 0;
}

static int dump_rules(struct nft *n, const char *chain, struct rule_list *out) {
    _cleanup_(rulep) struct nftnl_rule *r = rule_obj(chain);
    if (!r)
        return -ENOMEM;
    return dump(n, NFT_MSG_GETRULE, build_rule, r, rule_cb, rule_list_reset, out);
}

/* ---- base shape ------------------------------------------------------------------------ */

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) {
        h ^= (uint8_t)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

/* "b:<chain>:<index>:<hash of the rule's text>" */
static int base_tag(const char *chain, size_t i, const struct nftr_rule *r, char tag[static TAG_MAX]) {
    _cleanup_free_ char *text = NULL;
    int e = nftr_rule_text(r, &text);
    if (e < 0)
        return e;
    snprintf(tag, TAG_MAX, "b:%s:%zu:%016" PRIx64, chain, i, fnv1a(text));
    return 0;
}

static int elem_cmp(const void *a, const void *b) {
    const struct elem *x = a, *y = b;
    int c = memcmp(x->key, y->key, sizeof(x->key));
    if (c)
        return c;
    return (int)y->end - (int)x->end; /* an end sorts before a start at the same key */
}

/* Reduce interval-set elements to their covered ranges, merged, as a canonical list
 * of [start, end) keys ("end" all-zero + open = to the top), so that the elements
 * the kernel reports compare equal to what we would send however it stores them. */
struct range {
    uint8_t lo[16], hi[16];
    bool open;
};

static int ranges_of(struct elem *el, size_t n, struct range *out, size_t cap, size_t *ret_n) {
    qsort(el, n, sizeof(el[0]), elem_cmp);
    size_t k = 0;
    bool in = false;
    for (size_t i = 0; i < n; i++) {
        if (!el[i].end) {
            if (in)
                return -EINVAL; /* two starts */
            if (k > 0 && !out[k - 1].open && memcmp(out[k - 1].hi, el[i].key, 16) == 0) {
                k--; /* adjacent to the previous range: merge */
            } else {
                if (k == cap)
                    return -EINVAL;
                memcpy(out[k].lo, el[i].key, 16);
            }
            in = true;
        } else if (in) {
            memcpy(out[k].hi, el[i].key, 16);
            out[k].open = false;
            k++;
            in = false;
        } /* a stray end before any start (old nft's leading 0 end): ignore */
    }
    if (in) {
        memset(out[k].hi, 0, 16);
        out[k].open = true;
        k++;
    }
    *ret_n = k;
    return 0;
}

struct elem_list {
    struct elem v[64];
    size_t n;
    uint32_t alen;
    bool overflow;
};

static void elem_list_reset(void *data) {
    struct elem_list *l = data;
    l->n = 0;
    l->overflow = false;
}

static int elem_cb(struct nftnl_set_elem *e, void *data) {
    struct elem_list *l = data;
    if (l->n == ARRAY_SIZE(l->v)) {
        l->overflow = true;
        return 0;
    }
    struct elem *x = &l->v[l->n];
    memset(x, 0, sizeof(*x));
    uint32_t len = 0;
    const void *key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len);
    if (!key || len != l->alen) {
        l->overflow = true; /* malformed for our purpose: treat as a mismatch */
        return 0;
    }
    memcpy(x->key, key, len);
    if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_FLAGS))
        x->end = nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_FLAGS) & NFT_SET_ELEM_INTERVAL_END;
    l->n++;
    return 0;
}

static int elems_msg_cb(const struct nlmsghdr *nlh, void *data) {
    _cleanup_(setp) struct nftnl_set *s = nftnl_set_alloc();
    if (!s)
        return -ENOMEM;
    if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0)
        return -EPROTO;
    return nftnl_set_elem_foreach(s, elem_cb, data) < 0 ? -EPROTO : 0;
}

/* 1 if set `family`'s elements cover exactly our prefixes, 0 if not, or -errno. */
static int set_elems_match(struct nft *n, int family) {
    const char *name = family == AF_INET ? NFTR_SET_LAN4 : NFTR_SET_LAN6;
    struct elem want[2 * 16];
    size_t nw = prefix_elems(family, want);
    struct elem_list got = { .alen = family == AF_INET ? 4 : 16 };
    _cleanup_(setp) struct nftnl_set *s = set_obj(name, 0);
    if (!s)
        return -ENOMEM;
    int r = dump(n, NFT_MSG_GETSETELEM, build_elems, s, elems_msg_cb, elem_list_reset, &got);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    if (got.overflow)
        return 0;
    struct range rw[32], rg[32];
    size_t nrw, nrg;
    if (ranges_of(want, nw, rw, ARRAY_SIZE(rw), &nrw) < 0)
        return -EINVAL; /* our own table is broken: a bug */
    if (ranges_of(got.v, got.n, rg, ARRAY_SIZE(rg), &nrg) < 0)
        return 0;
    return nrw == nrg && memcmp(rw, rg, nrw * sizeof(rw[0])) == 0;
}

static bool set_shape_ok(const struct nftnl_set *s, uint32_t flags, uint32_t key_len, bool map) {
    /* the kernel leaves NFTA_SET_FLAGS out when they are 0 */
    uint32_t got = nftnl_set_is_set(s, NFTNL_SET_FLAGS) ? nftnl_set_get_u32(s, NFTNL_SET_FLAGS) : 0;
    if (!nftnl_set_is_set(s, NFTNL_SET_KEY_LEN) || got != flags ||
        nftnl_set_get_u32(s, NFTNL_SET_KEY_LEN) != key_len)
        return false;
    if (map)
        return nftnl_set_is_set(s, NFTNL_SET_DATA_TYPE) &&
               nftnl_set_get_u32(s, NFTNL_SET_DATA_TYPE) == NFT_DATA_VERDICT;
    if (flags & NFT_SET_MAP) /* a data map: marks */
        return nftnl_set_is_set(s, NFTNL_SET_DATA_LEN) &&
               nftnl_set_get_u32(s, NFTNL_SET_DATA_LEN) == sizeof(uint32_t);
    return true;
}

/* 1 if map dnsport exists as put_set makes it, 0 if missing or different. */
static int dnsport_matches(struct nft *n) {
    _cleanup_(setp) struct nftnl_set *s = nftnl_set_alloc();
    if (!s)
        return -ENOMEM;
    int r = get_set(n, NFTR_MAP_DNSPORT, s);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    return nftnl_set_is_set(s, NFTNL_SET_FLAGS) && nftnl_set_is_set(s, NFTNL_SET_KEY_LEN) &&
           nftnl_set_is_set(s, NFTNL_SET_DATA_LEN) &&
           nftnl_set_get_u32(s, NFTNL_SET_FLAGS) == NFT_SET_MAP &&
           nftnl_set_get_u32(s, NFTNL_SET_KEY_LEN) == sizeof(uint64_t) &&
           nftnl_set_get_u32(s, NFTNL_SET_DATA_LEN) == sizeof(uint16_t);
}

/* 1 if a set/map exists with the given shape, 0 if missing or different. */
static int set_matches(struct nft *n, const char *name, uint32_t flags, uint32_t key_len, bool map) {
    _cleanup_(setp) struct nftnl_set *s = nftnl_set_alloc();
    if (!s)
        return -ENOMEM;
    int r = get_set(n, name, s);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    return set_shape_ok(s, flags, key_len, map);
}

/* 1 if `chain` holds our dispatch rules (any number, tag "d:<chain>...") followed by
 * exactly the base rules `want`, in order; 0 otherwise. */
static int chain_rules_match(struct nft *n, const char *chain, const struct nftr_rule *want, size_t nwant) {
    struct rule_list got = { .v = NULL };
    int r = dump_rules(n, chain, &got);
    if (r < 0) {
        free(got.v);
        return r == -ENOENT ? 0 : r;
    }
    char dprefix[NFTR_NAME_MAX + 3];
    snprintf(dprefix, sizeof(dprefix), "d:%s", chain);
    size_t i = 0, w = 0;
    for (; i < got.n && strcmp(got.v[i].tag, dprefix) == 0 && got.v[i].comment[0]; i++)
        ;
    int ok = 1;
    for (; ok && w < nwant; w++, i++) {
        char tag[TAG_MAX];
        r = base_tag(chain, w, &want[w], tag);
        if (r < 0) {
            free(got.v);
            return r;
        }
        ok = i < got.n && strcmp(got.v[i].tag, tag) == 0;
    }
    if (i != got.n)
        ok = 0; /* a rule after ours, or a foreign one */
    free(got.v);
    return ok;
}

enum { BASE_MISSING, BASE_OK, BASE_BROKEN };

/* 1 if base chain `name` is present exactly when `want` and, when present,
 * is a base chain of `type` on `hook` at `prio` with policy accept (hook -1:
 * a regular chain); 0 if not; <0 on error. */
static int base_chain_ok(struct nft *n, const char *name, bool want, int hook, int prio,
                         const char *type) {
    _cleanup_(chainp) struct nftnl_chain *c = nftnl_chain_alloc();
    if (!c)
        return -ENOMEM;
    int r = get_chain(n, name, c);
    if (r < 0 && r != -ENOENT)
        return r;
    if ((r == 0) != want)
        return 0; /* missing, or present although this base has none */
    if (r != 0)
        return 1;
    if (hook < 0)
        return !nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM);
    const char *t = nftnl_chain_get_str(c, NFTNL_CHAIN_TYPE);
    return nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM) &&
           nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM) == (uint32_t)hook &&
           nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO) == prio &&
           nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY) == NF_ACCEPT && t && strcmp(t, type) == 0;
}

/* One of the data layout's sets: 1 as put_data_set makes it, 0 missing or
 * otherwise (its key, its flags, the kind of its values), <0 error. */
static int data_set_matches(struct nft *n, const struct nftr_data_set *ds) {
    _cleanup_(setp) struct nftnl_set *s = nftnl_set_alloc();
    if (!s)
        return -ENOMEM;
    int r = get_set(n, ds->name, s);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    bool obj = ds->val == NFTR_D_COUNTER || ds->val == NFTR_D_LIMIT;
    uint32_t flags = ds->val == NFTR_D_NONE ? 0 : obj ? NFT_SET_OBJECT : NFT_SET_MAP;
    /* (a map of marks: set_shape_ok checks their length) */
    if (!set_shape_ok(s, flags, key_len(ds->key), ds->val == NFTR_D_VERDICT))
        return 0;
    if (obj)
        return nftnl_set_is_set(s, NFTNL_SET_OBJ_TYPE) &&
               nftnl_set_get_u32(s, NFTNL_SET_OBJ_TYPE) ==
                   (ds->val == NFTR_D_COUNTER ? NFT_OBJECT_COUNTER : NFT_OBJECT_LIMIT);
    return 1;
}

static int probe_base(struct nft *n, const struct nftr_base *b, int *ret) {
    _cleanup_(tablep) struct nftnl_table *t = nftnl_table_alloc();
    if (!t)
        return -ENOMEM;
    int r = get_table(n, t);
    if (r == -ENOENT) {
        *ret = BASE_MISSING;
        return 0;
    }
    if (r < 0)
        return r;
    *ret = BASE_BROKEN;
    if (nftnl_table_is_set(t, NFTNL_TABLE_FLAGS) &&
        (nftnl_table_get_u32(t, NFTNL_TABLE_FLAGS) & NFT_TABLE_F_DORMANT))
        return 0;

    bool want_input = b->params.inbound || b->params.dns;
    const struct {
        const char *name;
        bool want;
        int hook, prio;
        const char *type;
    } chains[] = {
        { NFTR_CHAIN_OUTPUT, true, NF_INET_LOCAL_OUT, 0, "filter" },
        { NFTR_CHAIN_GUARDED, true, -1, 0, NULL },
        { NFTR_CHAIN_INPUT, want_input, NF_INET_LOCAL_IN, INPUT_PRIO, "filter" },
        { NFTR_CHAIN_DNSNAT, b->params.dns, NF_INET_LOCAL_OUT, NAT_PRIO, "nat" },
        { NFTR_CHAIN_DNSOUT, b->params.dns, NF_INET_POST_ROUTING, 0, "filter" },
        { NFTR_CHAIN_DATA, b->params.data, -1, 0, NULL },
        { NFTR_CHAIN_DREFUSE, b->params.data, -1, 0, NULL },
        { NFTR_CHAIN_DLO, b->params.data, -1, 0, NULL },
        { NFTR_CHAIN_DALOG, b->params.data, -1, 0, NULL },
    };
    for (size_t i = 0; i < ARRAY_SIZE(chains); i++)
        if ((r = base_chain_ok(n, chains[i].name, chains[i].want, chains[i].hook, chains[i].prio,
                               chains[i].type)) <= 0)
            return r;

    /* each check: 1 = as expected, 0 = not (state stays BASE_BROKEN), <0 = error */
    if ((r = set_matches(n, NFTR_SET_LAN4, NFT_SET_INTERVAL, 4, false)) <= 0 ||
        (r = set_matches(n, NFTR_SET_LAN6, NFT_SET_INTERVAL, 16, false)) <= 0 ||
        (r = set_elems_match(n, AF_INET)) <= 0 || (r = set_elems_match(n, AF_INET6)) <= 0)
        return r;
    r = set_matches(n, NFTR_MAP_SESSIONS, NFT_SET_MAP, 8, true);
    if (r < 0)
        return r;
    if (r != (b->params.cgroupv2 ? 1 : 0))
        return 0; /* map missing, or present although this base has none */
    r = set_matches(n, NFTR_MAP_LOOPBACK, NFT_SET_MAP, 4, true);
    if (r < 0)
        return r;
    if (r != (b->params.inbound ? 1 : 0))
        return 0;
    r = set_matches(n, NFTR_MAP_SERVED, NFT_SET_MAP, 8, false);
    if (r < 0)
        return r;
    if (r != (b->params.inbound ? 1 : 0))
        return 0;
    r = dnsport_matches(n);
    if (r < 0)
        return r;
    if (r != (b->params.dns ? 1 : 0))
        return 0;
    for (int fam = 0; fam < 2; fam++) {
        r = set_matches(n, fam ? NFTR_SET_PROTO6 : NFTR_SET_PROTO4, 0, fam ? 16 : 4, false);
        if (r < 0)
            return r;
        if (r != (b->params.proto_uid ? 1 : 0))
            return 0;
    }
    const struct nftr_data_set *ds;
    size_t nds = nftr_data_sets(&ds);
    for (size_t i = 0; i < nds; i++) {
        r = data_set_matches(n, &ds[i]);
        if (r < 0)
            return r;
        if (r != (b->params.data ? 1 : 0))
            return 0;
    }
    if (b->params.data && ((r = chain_rules_match(n, NFTR_CHAIN_DATA, b->data, b->n_data)) <= 0 ||
                           (r = chain_rules_match(n, NFTR_CHAIN_DREFUSE, b->drefuse, b->n_drefuse)) <= 0 ||
                           (r = chain_rules_match(n, NFTR_CHAIN_DLO, b->dlo, b->n_dlo)) <= 0 ||
                           (r = chain_rules_match(n, NFTR_CHAIN_DALOG, b->dalog, b->n_dalog)) <= 0))
        return r;
    if (b->params.dns && ((r = chain_rules_match(n, NFTR_CHAIN_DNSNAT, b->dnsnat, b->n_dnsnat)) <= 0 ||
                          (r = chain_rules_match(n, NFTR_CHAIN_DNSOUT, b->dnsout, b->n_dnsout)) <= 0))
        return r;
    if ((r = chain_rules_match(n, NFTR_CHAIN_OUTPUT, b->output, b->n_output)) <= 0 ||
        (r = chain_rules_match(n, NFTR_CHAIN_GUARDED, b->guarded, b->n_guarded)) <= 0 ||
        (want_input && (r = chain_rules_match(n, NFTR_CHAIN_INPUT, b->input, b->n_input)) <= 0))
        return r;
    *ret = BASE_OK;
    return 0;
}

static void put_base(struct nft *n, struct batch *bt, const struct nftr_base *b, bool replace) {
    if (replace)
        put_table(n, bt, NFT_MSG_DELTABLE, 0);
    put_table(n, bt, NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL);
    put_set(n, bt, NFTR_SET_LAN4);
    put_set_elems(n, bt, AF_INET);
    put_set(n, bt, NFTR_SET_LAN6);
    put_set_elems(n, bt, AF_INET6);
    if (b->params.cgroupv2)
        put_set(n, bt, NFTR_MAP_SESSIONS);
    if (b->params.proto_uid) {
        put_set(n, bt, NFTR_SET_PROTO4);
        put_set(n, bt, NFTR_SET_PROTO6);
    }
    if (b->params.inbound) {
        put_set(n, bt, NFTR_MAP_LOOPBACK);
        put_set(n, bt, NFTR_MAP_SERVED);
    }
    put_chain(n, bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, NFTR_CHAIN_OUTPUT, true);
    put_chain(n, bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, NFTR_CHAIN_GUARDED, false);
    if (b->params.inbound || b->params.dns)
        put_chain(n, bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, NFTR_CHAIN_INPUT, true);
    if (b->params.dns) {
        put_set(n, bt, NFTR_MAP_DNSPORT);
        put_chain(n, bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, NFTR_CHAIN_DNSNAT, true);
        put_chain(n, bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, NFTR_CHAIN_DNSOUT, true);
    }
    if (b->params.data) {
        const struct nftr_data_set *ds;
        size_t nds = nftr_data_sets(&ds);
        for (size_t i = 0; i < nds; i++)
            put_data_set(n, bt, &ds[i], SET_ID_DATA + (uint32_t)i);
        put_chain(n, bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, NFTR_CHAIN_DATA, false);
        put_chain(n, bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, NFTR_CHAIN_DREFUSE, false);
        put_chain(n, bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, NFTR_CHAIN_DLO, false);
        put_chain(n, bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, NFTR_CHAIN_DALOG, false);
    }
    struct {
        const char *chain;
        const struct nftr_rule *v;
        size_t n;
    } lists[] = {
        { NFTR_CHAIN_DALOG, b->dalog, b->n_dalog },
        { NFTR_CHAIN_DREFUSE, b->drefuse, b->n_drefuse },
        { NFTR_CHAIN_DATA, b->data, b->n_data },
        { NFTR_CHAIN_DLO, b->dlo, b->n_dlo },
        { NFTR_CHAIN_OUTPUT, b->output, b->n_output },
        { NFTR_CHAIN_GUARDED, b->guarded, b->n_guarded },
        { NFTR_CHAIN_INPUT, b->input, b->n_input },
        { NFTR_CHAIN_DNSNAT, b->dnsnat, b->n_dnsnat },
        { NFTR_CHAIN_DNSOUT, b->dnsout, b->n_dnsout },
    };
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        for (size_t i = 0; i < lists[l].n; i++) {
            char tag[TAG_MAX];
            int r = base_tag(lists[l].chain, i, &lists[l].v[i], tag);
            if (r < 0) {
                bt->err = bt->err ? bt->err : r;
                return;
            }
            put_rule(n, bt, lists[l].chain, &lists[l].v[i], i, true, tag);
        }
    }
}

int nft_ensure_base(struct nft *n, const struct nftr_base_params *p, unsigned *ret_flags) {
    _cleanup_(base_freep) struct nftr_base *b = NULL;
    int r = nftr_render_base(p, &b);
    if (r < 0)
        return r;
    r = -ERESTART;
    for (int attempt = 0; attempt < RETRIES && r == -ERESTART; attempt++) {
        uint32_t genid;
        int state = BASE_BROKEN;
        r = get_genid(n, &genid);
        if (r < 0)
            return r;
        r = probe_base(n, b, &state);
        if (r < 0)
            return r;
        if (state == BASE_OK) {
            *ret_flags = 0;
            return 0;
        }
        struct batch bt;
        r = batch_start(n, &bt, &genid);
        if (r < 0) {
            batch_free(&bt);
            return r;
        }
        put_base(n, &bt, b, state == BASE_BROKEN);
        r = batch_send(n, &bt);
        if (r == 0)
            *ret_flags = state == BASE_MISSING ? NFT_BASE_CREATED : NFT_BASE_REBUILT;
    }
    return r;
}

/* ---- sessions -------------------------------------------------------------------------- */


/* The messages that install session chain c (nft_session_add); -EINVAL when c
 * is not one. */
static int put_session_adds(struct nft *n, struct batch *bt, const struct nftr_chain *c) {
    if (!c || c->scope != NFTR_SCOPE_SESSION || c->cgroup_id == 0 ||
        !has_prefix(c->name, NFTR_SESSION_CHAIN_PREFIX) ||
        (c->lo_mark && !has_prefix(c->lo_name, NFTR_LOOPBACK_CHAIN_PREFIX)) ||
        (c->set4[0] && (!has_prefix(c->set4, NFTR_DOMAIN_SET4_PREFIX) ||
                        !has_prefix(c->set6, NFTR_DOMAIN_SET6_PREFIX))))
        return -EINVAL;
    if (c->set4[0]) {
        put_domain_set(n, bt, NFT_MSG_NEWSET, c->set4, AF_INET);
        put_domain_set(n, bt, NFT_MSG_NEWSET, c->set6, AF_INET6);
    }
    put_chain(n, bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, c->name, false);
    for (size_t i = 0; i < c->n_rules; i++)
        put_rule(n, bt, c->name, &c->rules[i], i, true, NULL);
    if (c->lo_mark) {
        put_chain(n, bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, c->lo_name, false);
        for (size_t i = 0; i < c->n_lo_rules; i++)
            put_rule(n, bt, c->lo_name, &c->lo_rules[i], i, true, NULL);
        put_lo_elem(n, bt, NFT_MSG_NEWSETELEM, c->lo_mark, c->lo_name);
        put_served_elem(n, bt, NFT_MSG_NEWSETELEM, c->cgroup_id, &c->served_mark);
    }
    if (c->dns_port)
        put_dns_elem(n, bt, NFT_MSG_NEWSETELEM, c->cgroup_id, c->dns_port);
    put_session_elem(n, bt, NFT_MSG_NEWSETELEM, c->cgroup_id, c->name);
    return 0;
}

int nft_session_add(struct nft *n, const struct nftr_chain *c) {
    struct batch bt;
    int r = batch_start(n, &bt, NULL);
    if (r == 0)
        r = put_session_adds(n, &bt, c);
    if (r < 0) {
        batch_free(&bt);
        return r;
    }
    return batch_send(n, &bt);
}

struct one_elem {
    bool found;
    uint32_t verdict;
    char chain[NFTR_NAME_MAX];
    uint8_t data[4]; /* a map's data of at most 4 bytes (dnsport's port) */
    uint32_t data_len;
};

static int one_elem_cb(struct nftnl_set_elem *e, void *data) {
    struct one_elem *o = data;
    o->found = true;
    if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_VERDICT))
        o->verdict = nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_VERDICT);
    const char *c = nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_CHAIN)
                        ? nftnl_set_elem_get_str(e, NFTNL_SET_ELEM_CHAIN)
                        : NULL;
    snprintf(o->chain, sizeof(o->chain), "%s", c ? c : "");
    if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_DATA)) {
        uint32_t len = 0;
        const void *d = nftnl_set_elem_get(e, NFTNL_SET_ELEM_DATA, &len);
        if (d && len <= sizeof(o->data)) {
            memcpy(o->data, d, len);
            o->data_len = len;
        }
    }
    return 0;
}

static int one_elem_msg_cb(const struct nlmsghdr *nlh, void *data) {
    _cleanup_(setp) struct nftnl_set *s = nftnl_set_alloc();
    if (!s)
        return -ENOMEM;
    if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0)
        return -EPROTO;
    return nftnl_set_elem_foreach(s, one_elem_cb, data) < 0 ? -EPROTO : 0;
}

/* GETSETELEM of one key: 0 with o->found set or not, or -errno. */
static int get_map_elem(struct nft *n, const char *map, const void *key, uint32_t key_len,
                        struct one_elem *o) {
    _cleanup_(setp) struct nftnl_set *s = set_obj(map, 0);
    _cleanup_(elemp) struct nftnl_set_elem *e = nftnl_set_elem_alloc();
    if (!s || !e || nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, key_len) < 0)
        return -ENOMEM;
    nftnl_set_elem_add(s, TAKE_PTR(e));
    memset(o, 0, sizeof(*o));
    struct nlmsghdr *nlh = req_hdr(n, NFT_MSG_GETSETELEM, NLM_F_ACK);
    build_elems(nlh, s);
    int r = talk(n, nlh, one_elem_msg_cb, o);
    if (r == -ENOENT) {
        o->found = false;
        return 0;
    }
    return r;
}

static int get_session_elem(struct nft *n, uint64_t cgroup_id, struct one_elem *o) {
    return get_map_elem(n, NFTR_MAP_SESSIONS, &cgroup_id, sizeof(cgroup_id), o);
}

/* The element of map loopback that jumps to chain `lo`: tried at the mark
 * the caller knows first (hint, 0: none), else looked for in the whole map.
 * 0 with *found set or not. */
static int find_lo_elem(struct nft *n, const char *lo, uint32_t hint, bool *found,
                        uint32_t *mark) {
    struct one_elem o = {.found = false};
    uint32_t m = hint;
    int r = hint ? get_map_elem(n, NFTR_MAP_LOOPBACK, &m, sizeof(m), &o) : 0;
    if (r == -ENOENT)
        r = 0, o.found = false; /* no map loopback: sessions may not listen */
    if (r < 0)
        return r;
    if (hint && o.found && o.verdict == (uint32_t)NFT_JUMP && strcmp(o.chain, lo) == 0) {
        *found = true;
        *mark = m;
        return 0;
    }
    _cleanup_free_ struct nft_session_elem *v = NULL;
    size_t nv = 0;
    r = nft_list_loopback(n, &v, &nv);
    if (r < 0)
        return r;
    *found = false;
    for (size_t i = 0; i < nv; i++)
        if (strcmp(v[i].chain, lo) == 0) {
            *found = true;
            *mark = (uint32_t)v[i].cgroup_id;
        }
    return 0;
}

/* The names of a session's other objects, from its chain's "s-<id>". */
struct session_names {
    char lo[NFTR_NAME_MAX + 8], set4[NFTR_NAME_MAX + 8], set6[NFTR_NAME_MAX + 8];
};

static void session_names_of(const char *name, struct session_names *ret) {
    const char *id = name + strlen(NFTR_SESSION_CHAIN_PREFIX);
    snprintf(ret->lo, sizeof(ret->lo), NFTR_LOOPBACK_CHAIN_PREFIX "%s", id);
    snprintf(ret->set4, sizeof(ret->set4), NFTR_DOMAIN_SET4_PREFIX "%s", id);
    snprintf(ret->set6, sizeof(ret->set6), NFTR_DOMAIN_SET6_PREFIX "%s", id);
}

/* Which of a session's objects one transaction deletes (both deletes). */
struct session_dels {
    uint64_t cgroup_id;
    uint32_t lo_mark; /* the loopback element's key, with lo_elem */
    bool elem, chain, lo_elem, served, dns, lo_chain, set4, set6;
};

/* The deletes of w in bt, in an order the kernel takes: the elements that
 * jump to a chain before it, the rules that name a set before the set. */
static void put_session_dels(struct nft *n, struct batch *bt, const char *name,
                             const struct session_names *nm, const struct session_dels *w) {
    if (w->elem)
        put_session_elem(n, bt, NFT_MSG_DELSETELEM, w->cgroup_id, NULL);
    if (w->chain) {
        put_delrule(n, bt, name, 0);
        put_chain(n, bt, NFT_MSG_DELCHAIN, 0, name, false);
    }
    if (w->lo_elem)
        put_lo_elem(n, bt, NFT_MSG_DELSETELEM, w->lo_mark, NULL);
    if (w->served)
        put_served_elem(n, bt, NFT_MSG_DELSETELEM, w->cgroup_id, NULL);
    if (w->dns)
        put_dns_elem(n, bt, NFT_MSG_DELSETELEM, w->cgroup_id, 0);
    if (w->lo_chain) {
        put_delrule(n, bt, nm->lo, 0);
        put_chain(n, bt, NFT_MSG_DELCHAIN, 0, nm->lo, false);
    }
    if (w->set4)
        put_domain_set(n, bt, NFT_MSG_DELSET, nm->set4, AF_INET);
    if (w->set6)
        put_domain_set(n, bt, NFT_MSG_DELSET, nm->set6, AF_INET6);
}

int nft_session_del(struct nft *n, const char *name, uint64_t cgroup_id, uint32_t lo_mark) {
    if (!name || !has_prefix(name, NFTR_SESSION_CHAIN_PREFIX) || strlen(name) >= NFTR_NAME_MAX)
        return -EINVAL;
    struct session_names nm;
    session_names_of(name, &nm);
    int r = -ERESTART;
    for (int attempt = 0; attempt < RETRIES && r == -ERESTART; attempt++) {
        uint32_t genid;
        struct one_elem o;
        r = get_genid(n, &genid);
        if (r < 0)
            return r;
        int have_chain = chain_exists(n, name);
        if (have_chain < 0)
            return have_chain;
        r = cgroup_id ? get_session_elem(n, cgroup_id, &o) : 0;
        if (r < 0)
            return r;
        if (!cgroup_id)
            o.found = false;
        if (o.found && (o.verdict != (uint32_t)NFT_JUMP || strcmp(o.chain, name) != 0))
            return -EBUSY; /* that cgroup belongs to someone else now */
        int have_lo = chain_exists(n, nm.lo);
        if (have_lo < 0)
            return have_lo;
        bool lo_found = false;
        uint32_t mark = 0;
        /* an element can only jump to a chain that exists */
        r = have_lo ? find_lo_elem(n, nm.lo, lo_mark, &lo_found, &mark) : 0;
        if (r < 0)
            return r;
        /* the served element of the cgroup, when there is one */
        struct one_elem sv = {.found = false};
        if (cgroup_id) {
            r = get_map_elem(n, NFTR_MAP_SERVED, &cgroup_id, sizeof(cgroup_id), &sv);
            if (r == -ENOENT)
                r = 0, sv.found = false;
            if (r < 0)
                return r;
        }
        /* and its DNS forwarder's element */
        struct one_elem dn = {.found = false};
        if (cgroup_id) {
            r = get_map_elem(n, NFTR_MAP_DNSPORT, &cgroup_id, sizeof(cgroup_id), &dn);
            if (r == -ENOENT)
                r = 0, dn.found = false;
            if (r < 0)
                return r;
        }
        /* and its domain sets (only the chain refers to them) */
        int have_set4 = set_exists(n, nm.set4), have_set6 = set_exists(n, nm.set6);
        if (have_set4 < 0)
            return have_set4;
        if (have_set6 < 0)
            return have_set6;
        if (!o.found && !have_chain && !have_lo && !lo_found && !sv.found && !dn.found &&
            !have_set4 && !have_set6)
            return -ENOENT;
        struct batch bt;
        r = batch_start(n, &bt, &genid);
        if (r < 0) {
            batch_free(&bt);
            return r;
        }
        put_session_dels(n, &bt, name, &nm,
                         &(struct session_dels){.cgroup_id = cgroup_id, .lo_mark = mark,
                                                .elem = o.found, .chain = have_chain,
                                                .lo_elem = lo_found, .served = sv.found,
                                                .dns = dn.found, .lo_chain = have_lo,
                                                .set4 = have_set4, .set6 = have_set6});
        r = batch_send(n, &bt);
    }
    return r;
}

void nft_session_objs_of(const struct nftr_chain *c, struct nft_session_objs *ret) {
    *ret = (struct nft_session_objs){
        .cgroup_id = c->cgroup_id,
        .lo_mark = c->lo_mark,
        .dns = c->dns_port != 0,
        .sets = c->set4[0] != '\0',
    };
    snprintf(ret->name, sizeof(ret->name), "%s", c->name);
}

int nft_session_del_known(struct nft *n, const struct nft_session_objs *o, bool *ret_searched) {
    if (ret_searched)
        *ret_searched = false;
    if (!has_prefix(o->name, NFTR_SESSION_CHAIN_PREFIX) || o->cgroup_id == 0 ||
        strnlen(o->name, sizeof(o->name)) >= sizeof(o->name))
        return -EINVAL;
    struct session_names nm;
    session_names_of(o->name, &nm);
    struct batch bt;
    int r = batch_start(n, &bt, NULL);
    if (r < 0) {
        batch_free(&bt);
        return r;
    }
    bool lo = o->lo_mark != 0;
    put_session_dels(n, &bt, o->name, &nm,
                     &(struct session_dels){.cgroup_id = o->cgroup_id, .lo_mark = o->lo_mark,
                                            .elem = true, .chain = true, .lo_elem = lo,
                                            .served = lo, .dns = o->dns, .lo_chain = lo,
                                            .set4 = o->sets, .set6 = o->sets});
    r = batch_send(n, &bt);
    /* Something of it is gone already (-ENOENT), or a chain of it is still
     * referenced (-EBUSY: by an element lyhd did not keep): nothing changed;
     * ask what exists. */
    if (r == -ENOENT || r == -EBUSY) {
        if (ret_searched)
            *ret_searched = true;
        r = nft_session_del(n, o->name, o->cgroup_id, o->lo_mark);
    }
    return r;
}

static bool domain_set_name(const char *set) {
    return set && (has_prefix(set, NFTR_DOMAIN_SET4_PREFIX) || has_prefix(set, NFTR_DOMAIN_SET6_PREFIX));
}

/* NEWSETELEM (timeout_ms != 0) or DELSETELEM of addresses in a domain set. */
static void put_domain_elems(struct nft *n, struct batch *bt, uint16_t type, const char *set,
                             uint32_t alen, const uint8_t (*addrs)[16], size_t count,
                             uint64_t timeout_ms) {
    _cleanup_(setp) struct nftnl_set *s = set_obj(set, 0);
    if (!s) {
        bt->err = bt->err ? bt->err : -ENOMEM;
        return;
    }
    for (size_t i = 0; i < count; i++) {
        _cleanup_(elemp) struct nftnl_set_elem *e = nftnl_set_elem_alloc();
        if (!e || nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, addrs[i], alen) < 0) {
            bt->err = bt->err ? bt->err : -ENOMEM;
            return;
        }
        if (timeout_ms)
            nftnl_set_elem_set_u64(e, NFTNL_SET_ELEM_TIMEOUT, timeout_ms);
        nftnl_set_elem_add(s, TAKE_PTR(e));
    }
    struct nlmsghdr *nlh = batch_msg(n, bt, type, type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0,
                                     "elements of set %s", set);
    if (!nlh)
        return;
    nftnl_set_elems_nlmsg_build_payload(nlh, s);
    batch_next(bt);
}

int nft_domain_elems_add(struct nft *n, const char *set, int family, const uint8_t (*addrs)[16],
                         size_t count, uint64_t timeout_ms, bool refresh) {
    uint32_t alen = family == AF_INET ? 4 : 16;
    if (!domain_set_name(set) || (family != AF_INET && family != AF_INET6) || count == 0 ||
        count > 64 || timeout_ms == 0)
        return -EINVAL;
    struct batch bt;
    int r = batch_start(n, &bt, NULL);
    if (r < 0) {
        batch_free(&bt);
        return r;
    }
    /* A re-add replaces an element's timeout since Linux 6.12 and is a no-op
     * before: to lengthen a live element's timeout everywhere, it is
     * deleted and added again in one transaction (refresh: the caller knows
     * it is there; a delete of a missing element would fail the batch). */
    if (refresh)
        put_domain_elems(n, &bt, NFT_MSG_DELSETELEM, set, alen, addrs, count, 0);
    put_domain_elems(n, &bt, NFT_MSG_NEWSETELEM, set, alen, addrs, count, timeout_ms);
    return batch_send(n, &bt);
}

int nft_domain_elems_del(struct nft *n, const char *set, int family, const uint8_t (*addrs)[16],
                         size_t count) {
    uint32_t alen = family == AF_INET ? 4 : 16;
    if (!domain_set_name(set) || (family != AF_INET && family != AF_INET6) || count == 0 ||
        count > 64)
        return -EINVAL;
    struct batch bt;
    int r = batch_start(n, &bt, NULL);
    if (r < 0) {
        batch_free(&bt);
        return r;
    }
    put_domain_elems(n, &bt, NFT_MSG_DELSETELEM, set, alen, addrs, count, 0);
    return batch_send(n, &bt);
}

int nft_proto_resolvers_set(struct nft *n, const uint8_t (*v4)[16], size_t n4,
                            const uint8_t (*v6)[16], size_t n6) {
    if (n4 > NFT_PROTO_RESOLVERS_MAX || n6 > NFT_PROTO_RESOLVERS_MAX)
        return -E2BIG;
    struct batch bt;
    int r = batch_start(n, &bt, NULL);
    if (r < 0) {
        batch_free(&bt);
        return r;
    }
    /* a DELSETELEM without elements empties the set: flush and fill, in one
     * transaction (no moment with an address missing that stays) */
    put_domain_elems(n, &bt, NFT_MSG_DELSETELEM, NFTR_SET_PROTO4, 4, NULL, 0, 0);
    put_domain_elems(n, &bt, NFT_MSG_DELSETELEM, NFTR_SET_PROTO6, 16, NULL, 0, 0);
    if (n4)
        put_domain_elems(n, &bt, NFT_MSG_NEWSETELEM, NFTR_SET_PROTO4, 4, v4, n4, 0);
    if (n6)
        put_domain_elems(n, &bt, NFT_MSG_NEWSETELEM, NFTR_SET_PROTO6, 16, v6, n6, 0);
    return batch_send(n, &bt);
}

int nft_session_dns_set(struct nft *n, uint64_t cgroup_id, uint16_t port) {
    struct one_elem o;
    if (cgroup_id == 0 || port == 0)
        return -EINVAL;
    int r = get_map_elem(n, NFTR_MAP_DNSPORT, &cgroup_id, sizeof(cgroup_id), &o);
    if (r < 0)
        return r;
    uint16_t be = htons(port);
    if (o.found && o.data_len == sizeof(be) && memcmp(o.data, &be, sizeof(be)) == 0)
        return 0;
    struct batch bt;
    r = batch_start(n, &bt, NULL);
    if (r < 0) {
        batch_free(&bt);
        return r;
    }
    if (o.found)
        put_dns_elem(n, &bt, NFT_MSG_DELSETELEM, cgroup_id, 0);
    put_dns_elem(n, &bt, NFT_MSG_NEWSETELEM, cgroup_id, port);
    r = batch_send(n, &bt);
    return r < 0 ? r : 1;
}

int nft_set_exists(struct nft *n, const char *name) {
    _cleanup_(setp) struct nftnl_set *s = nftnl_set_alloc();
    if (!s)
        return -ENOMEM;
    int r = get_set(n, name, s);
    return r == -ENOENT ? 0 : r < 0 ? r : 1;
}

int nft_chains_replace(struct nft *n, const struct nftr_chain *const *chains, size_t count,
                       const struct nft_data_swap *swaps, size_t n_swaps) {
    if ((!chains && count) || (!swaps && n_swaps) || count + n_swaps == 0)
        return -EINVAL;
    for (size_t i = 0; i < n_swaps; i++)
        if (!data_names_ok(swaps[i].old) || !!swaps[i].chain == !!swaps[i].data ||
            (swaps[i].data && !data_names_ok(swaps[i].data)))
            return -EINVAL;
    for (size_t i = 0; i < count; i++) {
        const char *name = chains[i] ? chains[i]->name : NULL;
        if (!name || !name[0] || strlen(name) >= NFTR_NAME_MAX ||
            !(has_prefix(name, NFTR_SESSION_CHAIN_PREFIX) || has_prefix(name, NFTR_UID_CHAIN_PREFIX)))
            return -EINVAL; /* "LYH-U-" starts with "LYH-" */
    }
    struct batch bt;
    int r = batch_start(n, &bt, NULL);
    if (r < 0) {
        batch_free(&bt);
        return r;
    }
    /* A flush of a missing chain fails the whole batch with ENOENT. */
    for (size_t i = 0; i < count; i++) {
        const struct nftr_chain *c = chains[i];
        put_delrule(n, &bt, c->name, 0);
        for (size_t k = 0; k < c->n_rules; k++)
            put_rule(n, &bt, c->name, &c->rules[k], k, true, NULL);
        if (c->lo_mark) { /* its listed ports are judged there */
            put_delrule(n, &bt, c->lo_name, 0);
            for (size_t k = 0; k < c->n_lo_rules; k++)
                put_rule(n, &bt, c->lo_name, &c->lo_rules[k], k, true, NULL);
        }
    }
    /* A data session's pieces go and its new ones come in the same
     * transaction: a cgroup or slot is never held twice (the old elements
     * are gone when the new ones are added), and nothing is open between. */
    for (size_t i = 0; i < n_swaps && r == 0; i++) {
        put_data_dels(n, &bt, swaps[i].old);
        if (swaps[i].data)
            put_data_adds(n, &bt, swaps[i].data);
        else
            r = put_session_adds(n, &bt, swaps[i].chain);
    }
    if (r < 0) {
        batch_free(&bt);
        return r;
    }
    return batch_send(n, &bt);
}

/* ---- uid scopes ------------------------------------------------------------------------ */

int nft_uid_chain_add(struct nft *n, const struct nftr_chain *c) {
    if (!c || (c->scope != NFTR_SCOPE_UID && c->scope != NFTR_SCOPE_SHARED_USER) ||
        strcmp(c->dispatch.comment, c->name) != 0 || strcmp(c->dispatch.target, c->name) != 0)
        return -EINVAL;
    char tag[TAG_MAX];
    snprintf(tag, sizeof(tag), "d:%s", c->dispatch_chain);
    struct batch bt;
    int r = batch_start(n, &bt, NULL);
    if (r < 0) {
        batch_free(&bt);
        return r;
    }
    put_chain(n, &bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, c->name, false);
    for (size_t i = 0; i < c->n_rules; i++)
        put_rule(n, &bt, c->name, &c->rules[i], i, true, NULL);
    /* at the head: before guarded's final reject, resp. before output's gid rule */
    put_rule(n, &bt, c->dispatch_chain, &c->dispatch, 0, false, tag);
    return batch_send(n, &bt);
}

/* One transaction: remove the uid scope's chain and its dispatch rules (what
 * exists of them) and, when add is given, install it afresh (chain, rules,
 * dispatch). -ENOENT when there was nothing to remove and nothing to add. */
static int uid_chain_change(struct nft *n, enum nftr_scope scope, uint32_t uid,
                            const struct nftr_chain *add) {
    char name[NFTR_NAME_MAX];
    if (scope != NFTR_SCOPE_UID && scope != NFTR_SCOPE_SHARED_USER)
        return -EINVAL;
    int r = nftr_chain_name(scope, NULL, uid, name);
    if (r < 0)
        return r;
    if (add && (add->scope != scope || strcmp(add->name, name) != 0 ||
                strcmp(add->dispatch.comment, add->name) != 0 ||
                strcmp(add->dispatch.target, add->name) != 0))
        return -EINVAL;
    const char *from = scope == NFTR_SCOPE_UID ? NFTR_CHAIN_GUARDED : NFTR_CHAIN_OUTPUT;
    r = -ERESTART;
    for (int attempt = 0; attempt < RETRIES && r == -ERESTART; attempt++) {
        uint32_t genid;
        r = get_genid(n, &genid);
        if (r < 0)
            return r;
        int have_chain = chain_exists(n, name);
        if (have_chain < 0)
            return have_chain;
        struct rule_list rules = { .v = NULL };
        r = dump_rules(n, from, &rules);
        if (r < 0 && r != -ENOENT) {
            free(rules.v);
            return r;
        }
        size_t ndispatch = 0;
        for (size_t i = 0; i < rules.n; i++)
            ndispatch += strcmp(rules.v[i].comment, name) == 0;
        if (!have_chain && ndispatch == 0 && !add) {
            free(rules.v);
            return -ENOENT;
        }
        struct batch bt;
        r = batch_start(n, &bt, &genid);
        if (r == 0) {
            for (size_t i = 0; i < rules.n; i++)
                if (strcmp(rules.v[i].comment, name) == 0)
                    put_delrule(n, &bt, from, rules.v[i].handle);
            if (have_chain) {
                put_delrule(n, &bt, name, 0);
                put_chain(n, &bt, NFT_MSG_DELCHAIN, 0, name, false);
            }
            if (add) {
                char tag[TAG_MAX];
                snprintf(tag, sizeof(tag), "d:%s", add->dispatch_chain);
                put_chain(n, &bt, NFT_MSG_NEWCHAIN, NLM_F_CREATE | NLM_F_EXCL, add->name, false);
                for (size_t i = 0; i < add->n_rules; i++)
                    put_rule(n, &bt, add->name, &add->rules[i], i, true, NULL);
                put_rule(n, &bt, add->dispatch_chain, &add->dispatch, 0, false, tag);
            }
            r = batch_send(n, &bt);
        } else {
            batch_free(&bt);
        }
        free(rules.v);
    }
    return r;
}

int nft_uid_chain_del(struct nft *n, enum nftr_scope scope, uint32_t uid) {
    return uid_chain_change(n, scope, uid, NULL);
}

int nft_uid_chain_replace(struct nft *n, uint32_t uid, const struct nftr_chain *c) {
    if (!c)
        return -EINVAL;
    return uid_chain_change(n, c->scope, uid, c);
}

/* ---- listing, counters, table ---------------------------------------------------------- */

struct name_list {
    char **v;
    size_t n, cap;
};

void nft_names_free(char **names) {
    if (!names)
        return;
    for (char **p = names; *p; p++)
        free(*p);
    free(names);
}

static void name_list_reset(void *data) {
    struct name_list *l = data;
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    l->n = 0;
}

static int chain_name_cb(const struct nlmsghdr *nlh, void *data) {
    struct name_list *l = data;
    _cleanup_(chainp) struct nftnl_chain *c = nftnl_chain_alloc();
    if (!c)
        return -ENOMEM;
    if (nftnl_chain_nlmsg_parse(nlh, c) < 0)
        return -EPROTO;
    const char *table = nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE);
    const char *name = nftnl_chain_get_str(c, NFTNL_CHAIN_NAME);
    if (!table || !name || strcmp(table, NFTR_TABLE) != 0 ||
        nftnl_chain_get_u32(c, NFTNL_CHAIN_FAMILY) != NFPROTO_INET)
        return 0;
    if (l->n + 1 >= l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **v = reallocarray(l->v, cap, sizeof(*v));
        if (!v)
            return -ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n] = strdup(name);
    if (!l->v[l->n])
        return -ENOMEM;
    l->n++;
    return 0;
}

int nft_list_chains(struct nft *n, char ***ret_names, size_t *ret_n) {
    _cleanup_(tablep) struct nftnl_table *t = nftnl_table_alloc();
    _cleanup_(chainp) struct nftnl_chain *filter = chain_obj("");
    if (!t || !filter)
        return -ENOMEM;
    int r = get_table(n, t);
    if (r < 0)
        return r;
    nftnl_chain_unset(filter, NFTNL_CHAIN_NAME);
    struct name_list l = { .v = NULL };
    r = dump(n, NFT_MSG_GETCHAIN, build_chain, filter, chain_name_cb, name_list_reset, &l);
    if (r == 0 && !l.v) {
        l.v = calloc(1, sizeof(*l.v));
        if (!l.v)
            r = -ENOMEM;
    }
    if (r < 0) {
        name_list_reset(&l);
        free(l.v);
        return r;
    }
    l.v[l.n] = NULL;
    *ret_names = l.v;
    *ret_n = l.n;
    return 0;
}

/* Room for element n of the array the pointer at vp holds (capacity *cap,
 * doubled from 64, elements of size bytes): 0, or -ENOMEM (unchanged). The
 * pointer is read and written with memcpy, whatever its type. */
static int grow(void *vp, size_t n, size_t *cap, size_t size) {
    if (n < *cap)
        return 0;
    void *old, *p;
    size_t c = *cap ? *cap * 2 : 64;
    memcpy(&old, vp, sizeof(old));
    if (!(p = reallocarray(old, c, size)))
        return -ENOMEM;
    memcpy(vp, &p, sizeof(p));
    *cap = c;
    return 0;
}

struct sess_list {
    struct nft_session_elem *v;
    size_t n, cap;
    int err;
};

static void sess_list_reset(void *data) {
    struct sess_list *l = data;
    l->n = 0;
    l->err = 0;
}

static int sess_elem_cb(struct nftnl_set_elem *e, void *data) {
    struct sess_list *l = data;
    uint32_t len = 0;
    const void *key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len);
    if (!key || (len != sizeof(uint64_t) && len != sizeof(uint32_t)))
        return 0;
    if ((l->err = grow(&l->v, l->n, &l->cap, sizeof(l->v[0]))) < 0)
        return -1;
    struct nft_session_elem *s = &l->v[l->n++];
    if (len == sizeof(uint32_t)) { /* map loopback: a mark */
        uint32_t m;
        memcpy(&m, key, sizeof(m));
        s->cgroup_id = m;
    } else {
        memcpy(&s->cgroup_id, key, sizeof(s->cgroup_id));
    }
    const char *c = nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_CHAIN) ? nftnl_set_elem_get_str(e, NFTNL_SET_ELEM_CHAIN)
                                                                   : NULL;
    snprintf(s->chain, sizeof(s->chain), "%s", c ? c : "");
    /* a value: a mark (host order, as the kernel's registers hold it) or a
     * port (network order, as the nat expression reads it) */
    s->value = 0;
    uint32_t dlen = 0;
    const void *val = nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_DATA)
                           ? nftnl_set_elem_get(e, NFTNL_SET_ELEM_DATA, &dlen)
                           : NULL;
    if (val && dlen == sizeof(uint32_t)) {
        memcpy(&s->value, val, sizeof(s->value));
    } else if (val && dlen == sizeof(uint16_t)) {
        uint16_t be;
        memcpy(&be, val, sizeof(be));
        s->value = ntohs(be);
    }
    return 0;
}

/* A dump message of set elements: cb for each; *err is where cb leaves its
 * error when it stops the walk. */
static int set_elems_each(const struct nlmsghdr *nlh, int (*cb)(struct nftnl_set_elem *, void *),
                          void *data, const int *err) {
    _cleanup_(setp) struct nftnl_set *s = nftnl_set_alloc();
    if (!s)
        return -ENOMEM;
    if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0)
        return -EPROTO;
    if (nftnl_set_elem_foreach(s, cb, data) < 0)
        return *err ? *err : -EPROTO;
    return 0;
}

static int sess_msg_cb(const struct nlmsghdr *nlh, void *data) {
    struct sess_list *l = data;
    return set_elems_each(nlh, sess_elem_cb, l, &l->err);
}

static int list_map(struct nft *n, const char *map, struct nft_session_elem **ret, size_t *ret_n) {
    _cleanup_(setp) struct nftnl_set *s = set_obj(map, 0);
    if (!s)
        return -ENOMEM;
    struct sess_list l = { .v = NULL };
    int r = dump(n, NFT_MSG_GETSETELEM, build_elems, s, sess_msg_cb, sess_list_reset, &l);
    if (r < 0) {
        free(l.v);
        return r;
    }
    *ret = l.v;
    *ret_n = l.n;
    return 0;
}

int nft_list_sessions(struct nft *n, struct nft_session_elem **ret, size_t *ret_n) {
    return list_map(n, NFTR_MAP_SESSIONS, ret, ret_n);
}

static int list_map_or_none(struct nft *n, const char *map, struct nft_session_elem **ret,
                            size_t *ret_n) {
    int r = list_map(n, map, ret, ret_n);
    if (r == -ENOENT) {
        *ret = NULL;
        *ret_n = 0;
        return 0;
    }
    return r;
}

int nft_list_loopback(struct nft *n, struct nft_session_elem **ret, size_t *ret_n) {
    return list_map_or_none(n, NFTR_MAP_LOOPBACK, ret, ret_n);
}

int nft_list_served(struct nft *n, struct nft_session_elem **ret, size_t *ret_n) {
    return list_map_or_none(n, NFTR_MAP_SERVED, ret, ret_n);
}

int nft_list_dnsport(struct nft *n, struct nft_session_elem **ret, size_t *ret_n) {
    return list_map_or_none(n, NFTR_MAP_DNSPORT, ret, ret_n);
}

/* ---- a data session's counters ----------------------------------------------------------- */

struct ctr_read {
    uint64_t packets, bytes;
    bool got;
};

static int obj_cb(const struct nlmsghdr *nlh, void *data) {
    struct ctr_read *c = data;
    _cleanup_(objp) struct nftnl_obj *o = nftnl_obj_alloc();
    if (!o)
        return -ENOMEM;
    if (nftnl_obj_nlmsg_parse(nlh, o) < 0)
        return -EPROTO;
    if (!nftnl_obj_is_set(o, NFTNL_OBJ_CTR_PKTS) || !nftnl_obj_is_set(o, NFTNL_OBJ_CTR_BYTES))
        return -EPROTO;
    c->packets = nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_PKTS);
    c->bytes = nftnl_obj_get_u64(o, NFTNL_OBJ_CTR_BYTES);
    c->got = true;
    return 0;
}

static void build_obj(struct nlmsghdr *nlh, const void *o) { nftnl_obj_nlmsg_build_payload(nlh, (struct nftnl_obj *)o); }

/* counter object <kind>-<id> */
static int get_counter(struct nft *n, const char *kind, const char *id, struct ctr_read *ret) {
    _cleanup_(objp) struct nftnl_obj *o = nftnl_obj_alloc();
    char name[NFTR_NAME_MAX];
    snprintf(name, sizeof(name), "%s-%s", kind, id);
    if (o) {
        nftnl_obj_set_str(o, NFTNL_OBJ_TABLE, NFTR_TABLE);
        nftnl_obj_set_str(o, NFTNL_OBJ_NAME, name);
        nftnl_obj_set_u32(o, NFTNL_OBJ_TYPE, NFT_OBJECT_COUNTER);
    }
    if (!o || !nftnl_obj_is_set(o, NFTNL_OBJ_TABLE) || !nftnl_obj_is_set(o, NFTNL_OBJ_NAME))
        return -ENOMEM;
    *ret = (struct ctr_read){0};
    struct nlmsghdr *nlh = req_hdr(n, NFT_MSG_GETOBJ, NLM_F_ACK);
    build_obj(nlh, o);
    int r = talk(n, nlh, obj_cb, ret);
    return r < 0 ? r : ret->got ? 0 : -EPROTO;
}

int nft_data_counters(struct nft *n, const char *id, struct nft_counters *ret, uint64_t *ret_dns) {
    struct ctr_read acct, dnsc, anew, lnew, refused, idrop;
    int r;
    if ((r = get_counter(n, NFTR_MAP_ACCT, id, &acct)) < 0 ||
        (r = get_counter(n, NFTR_MAP_DNSC, id, &dnsc)) < 0 ||
        (r = get_counter(n, NFTR_MAP_ANEW, id, &anew)) < 0 ||
        (r = get_counter(n, NFTR_MAP_LNEW, id, &lnew)) < 0 ||
        (r = get_counter(n, NFTR_MAP_DROP, id, &refused)) < 0 ||
        (r = get_counter(n, NFTR_MAP_IDROP, id, &idrop)) < 0)
        return r;
    /* as a chain session's: its DNS flows' packets are accepted packets */
    *ret = (struct nft_counters){
        .accept_packets = acct.packets + dnsc.packets,
        .accept_bytes = acct.bytes + dnsc.bytes,
        .reject_packets = refused.packets + idrop.packets,
        .reject_bytes = refused.bytes + idrop.bytes,
        .accept_flows = anew.packets + lnew.packets,
    };
    if (ret_dns)
        *ret_dns = dnsc.packets;
    return 0;
}

/* ---- the data layout's elements as they are --------------------------------------------- */

struct raw_elem {
    uint8_t key[8 + IFNAMSIZ];
    uint32_t klen;
    uint8_t val[4];
    uint32_t vlen;
    bool has_verdict;
    int32_t verdict;
    char name[NFTR_NAME_MAX]; /* a verdict's chain, or an object */
};

struct raw_set {
    const char *name;
    enum nftr_key key;
    struct raw_elem *v;
    size_t n, cap;
    int err;
};

/* the base's maps a data session has elements in, besides its own sets */
static const struct nftr_data_set base_maps[] = {
    { NFTR_MAP_SESSIONS, NFTR_K_CG, NFTR_D_CONTINUE, "" },
    { NFTR_MAP_LOOPBACK, NFTR_K_MARK, NFTR_D_CONTINUE, "" },
    { NFTR_MAP_SERVED, NFTR_K_CG, NFTR_D_MARK, "" },
    { NFTR_MAP_DNSPORT, NFTR_K_CG, NFTR_D_PORT, "" },
};
#define PIECE_SETS_MAX 32

struct nft_data_pieces {
    struct raw_set sets[PIECE_SETS_MAX];
    size_t n;
    uint64_t *cgs; /* the cgroup of every element keyed by one, sorted */
    size_t n_cgs;
};

/* where a key of kind k holds its cgroup */
static size_t raw_cg_at(enum nftr_key k) {
    return k == NFTR_K_PORT_CG || k == NFTR_K_MARK_CG ? 4 : 0;
}

/* The cgroup raw element r, of a set whose keys are of kind k, is keyed by
 * (false: keyed by a mark alone, or too short to hold one). */
static bool raw_cg(const struct raw_elem *r, enum nftr_key k, uint64_t *ret) {
    size_t at = raw_cg_at(k);
    if (k == NFTR_K_MARK || r->klen < at + 8)
        return false;
    memcpy(ret, r->key + at, 8);
    return true;
}

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int raw_cmp(const void *a, const void *b) {
    const struct raw_elem *x = a, *y = b;
    if (x->klen != y->klen)
        return x->klen < y->klen ? -1 : 1;
    return memcmp(x->key, y->key, x->klen);
}

static void raw_set_reset(void *data) {
    struct raw_set *l = data;
    l->n = 0;
    l->err = 0;
}

static int raw_elem_cb(struct nftnl_set_elem *e, void *data) {
    struct raw_set *l = data;
    uint32_t len = 0;
    const void *key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len);
    if (!key || len > sizeof(l->v[0].key))
        return 0;
    if ((l->err = grow(&l->v, l->n, &l->cap, sizeof(l->v[0]))) < 0)
        return -1;
    struct raw_elem *r = &l->v[l->n++];
    memset(r, 0, sizeof(*r));
    memcpy(r->key, key, len);
    r->klen = len;
    uint32_t dlen = 0;
    const void *val = nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_DATA)
                          ? nftnl_set_elem_get(e, NFTNL_SET_ELEM_DATA, &dlen)
                          : NULL;
    if (val && dlen <= sizeof(r->val)) {
        memcpy(r->val, val, dlen);
        r->vlen = dlen;
    }
    if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_VERDICT)) {
        r->has_verdict = true;
        r->verdict = (int32_t)nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_VERDICT);
    }
    const char *nm = nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_CHAIN)
                         ? nftnl_set_elem_get_str(e, NFTNL_SET_ELEM_CHAIN)
                     : nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_OBJREF)
                         ? nftnl_set_elem_get_str(e, NFTNL_SET_ELEM_OBJREF)
                         : NULL;
    snprintf(r->name, sizeof(r->name), "%s", nm ? nm : "");
    return 0;
}

static int raw_msg_cb(const struct nlmsghdr *nlh, void *data) {
    struct raw_set *l = data;
    return set_elems_each(nlh, raw_elem_cb, l, &l->err);
}

void nft_data_pieces_free(struct nft_data_pieces *p) {
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->sets[i].v);
    free(p->cgs);
    free(p);
}

static void piecesp(struct nft_data_pieces **p) { nft_data_pieces_free(*p); }

int nft_data_pieces_read(struct nft *n, struct nft_data_pieces **ret) {
    _cleanup_(piecesp) struct nft_data_pieces *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    const struct nftr_data_set *ds;
    size_t nds = nftr_data_sets(&ds);
    for (size_t i = 0; i < nds + ARRAY_SIZE(base_maps) && i < PIECE_SETS_MAX; i++) {
        const struct nftr_data_set *d = i < nds ? &ds[i] : &base_maps[i - nds];
        struct raw_set *l = &p->sets[p->n++];
        l->name = d->name;
        l->key = d->key;
        _cleanup_(setp) struct nftnl_set *s = set_obj(d->name, 0);
        if (!s)
            return -ENOMEM;
        int r = dump(n, NFT_MSG_GETSETELEM, build_elems, s, raw_msg_cb, raw_set_reset, l);
        if (r == -ENOENT && i >= nds) /* a base without listeners or DNS: no such map */
            r = 0;
        if (r < 0)
            return r;
        if (l->n)
            qsort(l->v, l->n, sizeof(l->v[0]), raw_cmp);
    }
    /* the cgroup of every element of the layout's own sets, sorted: how many
     * elements a cgroup keys is then two searches (nft_data_pieces_keyed), not
     * a walk of all per session */
    size_t total = 0;
    for (size_t i = 0; i < nds && i < p->n; i++)
        total += p->sets[i].n;
    p->cgs = calloc(total ? total : 1, sizeof(*p->cgs));
    if (!p->cgs)
        return -ENOMEM;
    for (size_t i = 0; i < nds && i < p->n; i++)
        for (size_t k = 0; k < p->sets[i].n; k++)
            if (raw_cg(&p->sets[i].v[k], p->sets[i].key, &p->cgs[p->n_cgs]))
                p->n_cgs++;
    qsort(p->cgs, p->n_cgs, sizeof(*p->cgs), u64_cmp);
    *ret = TAKE_PTR(p);
    return 0;
}

static const struct raw_set *pieces_set(const struct nft_data_pieces *p, const char *name) {
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->sets[i].name, name) == 0)
            return &p->sets[i];
    return NULL;
}

static const struct raw_elem *pieces_find(const struct raw_set *l, const uint8_t *key, uint32_t klen) {
    struct raw_elem k = {.klen = klen};
    memcpy(k.key, key, klen);
    return l && l->n ? bsearch(&k, l->v, l->n, sizeof(k), raw_cmp) : NULL;
}

/* Is raw element r, of a set whose keys are of kind k, keyed by cgroup cg? */
static bool raw_keyed_by_cg(const struct raw_elem *r, enum nftr_key k, uint64_t cg) {
    uint64_t at;
    return cg && raw_cg(r, k, &at) && at == cg;
}

/* The first of the sorted cgs not below cg. */
static size_t cgs_lower_bound(const struct nft_data_pieces *p, uint64_t cg) {
    size_t lo = 0, hi = p->n_cgs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->cgs[mid] < cg)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t nft_data_pieces_keyed(const struct nft_data_pieces *p, uint64_t cg) {
    if (!cg)
        return 0;
    return (cg == UINT64_MAX ? p->n_cgs : cgs_lower_bound(p, cg + 1)) - cgs_lower_bound(p, cg);
}

static bool base_map(const char *name) {
    for (size_t i = 0; i < ARRAY_SIZE(base_maps); i++)
        if (strcmp(base_maps[i].name, name) == 0)
            return true;
    return false;
}

bool nft_data_pieces_whole(const struct nft_data_pieces *p, const struct nftr_data *d) {
    for (size_t i = 0; i < d->n_elems; i++) {
        const struct nftr_elem *e = &d->elems[i];
        uint8_t key[8 + IFNAMSIZ];
        uint32_t klen = (uint32_t)elem_key(e, key);
        const struct raw_elem *r = pieces_find(pieces_set(p, e->set), key, klen);
        if (!r)
            return false;
        uint16_t port = htons(e->vport);
        bool same = true;
        switch (e->val) {
        case NFTR_D_NONE:
            break;
        case NFTR_D_MARK:
            same = r->vlen == 4 && memcmp(r->val, &e->vmark, 4) == 0;
            break;
        case NFTR_D_PORT:
            same = r->vlen == 2 && memcmp(r->val, &port, 2) == 0;
            break;
        case NFTR_D_COUNTER:
        case NFTR_D_LIMIT:
            same = strcmp(r->name, e->vname) == 0;
            break;
        case NFTR_D_VERDICT:
            same = r->has_verdict && r->verdict == NFT_JUMP && strcmp(r->name, e->vname) == 0;
            break;
        case NFTR_D_CONTINUE:
            same = r->has_verdict && r->verdict == NFT_CONTINUE;
            break;
        }
        if (!same)
            return false;
    }
    /* ... and nothing more keyed by its cgroup in the layout's sets: an
     * element someone added (a second interface in dvpn, say) would open what
     * its rules do not. (A base map holds one element per cgroup, compared
     * above.) */
    size_t want = 0;
    for (size_t i = 0; i < d->n_elems; i++)
        want += d->elems[i].key != NFTR_K_MARK && !base_map(d->elems[i].set);
    return nft_data_pieces_keyed(p, d->cgroup_id) == want;
}

/* The key of the element of map `map` whose verdict jumps to chain. */
static const struct raw_elem *pieces_jumping(const struct nft_data_pieces *p, const char *map,
                                             const char *chain) {
    const struct raw_set *l = pieces_set(p, map);
    for (size_t i = 0; l && i < l->n; i++)
        if (l->v[i].has_verdict && l->v[i].verdict == NFT_JUMP && strcmp(l->v[i].name, chain) == 0)
            return &l->v[i];
    return NULL;
}

/* The key of the element of map `map` whose value is object `obj`. */
static const struct raw_elem *pieces_naming(const struct nft_data_pieces *p, const char *map,
                                            const char *obj) {
    const struct raw_set *l = pieces_set(p, map);
    for (size_t i = 0; l && i < l->n; i++)
        if (!l->v[i].has_verdict && strcmp(l->v[i].name, obj) == 0)
            return &l->v[i];
    return NULL;
}

int nft_data_pieces_owner(const struct nft_data_pieces *p, const char *id, uint64_t *ret_cgroup_id,
                          uint32_t *ret_mark) {
    char dlog[NFTR_NAME_MAX], alog[NFTR_NAME_MAX], idrop[NFTR_NAME_MAX], ilim[NFTR_NAME_MAX];
    snprintf(dlog, sizeof(dlog), NFTR_DLOG_CHAIN_PREFIX "%s", id);
    snprintf(alog, sizeof(alog), NFTR_ALOG_CHAIN_PREFIX "%s", id);
    snprintf(idrop, sizeof(idrop), NFTR_MAP_IDROP "-%s", id);
    snprintf(ilim, sizeof(ilim), NFTR_MAP_ILIM "-%s", id);
    const struct raw_elem *c = pieces_jumping(p, NFTR_MAP_DLOG, dlog);
    if (!c) /* (a removal cut short can leave the accept log's jump alone) */
        c = pieces_jumping(p, NFTR_MAP_ALOG, alog);
    const struct raw_elem *m = pieces_jumping(p, NFTR_MAP_DLOGM, dlog);
    if (!m)
        m = pieces_naming(p, NFTR_MAP_IDROP, idrop);
    if (!m)
        m = pieces_naming(p, NFTR_MAP_ILIM, ilim);
    *ret_cgroup_id = 0;
    *ret_mark = 0;
    if (c && c->klen == 8)
        memcpy(ret_cgroup_id, c->key, 8);
    if (m && m->klen == 4)
        memcpy(ret_mark, m->key, 4);
    return c || m ? 0 : -ENOENT;
}

/* Does a raw element of set l belong to session id of cgroup_id (or, keyed by a
 * mark alone, to mark)? An element keyed by a mark alone that names a chain or
 * an object is the session's when it names the session's, whatever its mark;
 * one that names nothing (map loopback's continue) only when its mark is
 * paired with the session's cgroup in set downmark as well: a mark read wrongly
 * (a table someone changed) then takes nothing of another session's. */
static bool raw_owned(const struct nft_data_pieces *p, const struct raw_elem *r, const struct raw_set *l,
                      const char *id, uint64_t cg, uint32_t mark) {
    if (l->key != NFTR_K_MARK)
        return raw_keyed_by_cg(r, l->key, cg);
    if (!id[0]) /* (nft_data_reap_keyed: by the cgroup alone) */
        return false;
    if (r->name[0]) {
        char want[NFTR_NAME_MAX];
        if (r->has_verdict)
            snprintf(want, sizeof(want), NFTR_DLOG_CHAIN_PREFIX "%s", id);
        else
            snprintf(want, sizeof(want), "%s-%s", l->name, id);
        return strcmp(r->name, want) == 0;
    }
    if (!mark || !cg || r->klen != 4 || memcmp(r->key, &mark, 4) != 0)
        return false;
    uint8_t pair[12];
    memcpy(pair, &mark, 4);
    memcpy(pair + 4, &cg, 8);
    return pieces_find(pieces_set(p, NFTR_SET_DOWNMARK), pair, sizeof(pair)) != NULL;
}

/* The elements of p's first n_sets sets that raw_owned() gives session id,
 * each deleted in a transaction of its own (what is gone already is skipped);
 * *removed counts the deletes, *err keeps the first error. */
static void reap_elems(struct nft *n, const struct nft_data_pieces *p, size_t n_sets,
                       const char *id, uint64_t cgroup_id, uint32_t mark, size_t *removed,
                       int *err) {
    for (size_t i = 0; i < n_sets && i < p->n; i++) {
        const struct raw_set *l = &p->sets[i];
        /* map loopback: only a data session's own slot element (continue),
         * never a chain session's jump */
        bool lomap = strcmp(l->name, NFTR_MAP_LOOPBACK) == 0;
        for (size_t k = 0; k < l->n; k++) {
            const struct raw_elem *r = &l->v[k];
            if (!raw_owned(p, r, l, id, cgroup_id, mark) ||
                (lomap && !(r->has_verdict && r->verdict == NFT_CONTINUE)) ||
                (strcmp(l->name, NFTR_MAP_SESSIONS) == 0 &&
                 !(r->has_verdict && r->verdict == NFT_CONTINUE)))
                continue;
            struct batch bt;
            int e = batch_start(n, &bt, NULL);
            if (e == 0) {
                _cleanup_(setp) struct nftnl_set *s = set_obj(l->name, 0);
                _cleanup_(elemp) struct nftnl_set_elem *el = nftnl_set_elem_alloc();
                if (!s || !el || nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, r->key, r->klen) < 0) {
                    bt.err = -ENOMEM;
                } else {
                    nftnl_set_elem_add(s, TAKE_PTR(el));
                    struct nlmsghdr *nlh = batch_msg(n, &bt, NFT_MSG_DELSETELEM, 0,
                                                     "element of %s", l->name);
                    if (nlh) {
                        nftnl_set_elems_nlmsg_build_payload(nlh, s);
                        batch_next(&bt);
                    }
                }
                e = batch_send(n, &bt);
            } else {
                batch_free(&bt);
            }
            if (e == 0)
                (*removed)++;
            else if (e != -ENOENT && !*err)
                *err = e;
        }
    }
}

int nft_data_reap(struct nft *n, const struct nft_data_pieces *p, const char *id, uint64_t cgroup_id,
                  uint32_t mark) {
    size_t removed = 0;
    int err = 0;
    reap_elems(n, p, p->n, id, cgroup_id, mark, &removed, &err);
    /* its chains and objects, by name */
    char name[NFTR_NAME_MAX];
    const char *chain_pfx[] = {NFTR_ALOG_CHAIN_PREFIX, NFTR_DLOG_CHAIN_PREFIX};
    const struct nftr_data_set *ds;
    size_t nds = nftr_data_sets(&ds), nk = 0;
    const struct nftr_data_set *kinds[PIECE_SETS_MAX];
    for (size_t i = 0; i < nds && nk < PIECE_SETS_MAX; i++)
        if (ds[i].val == NFTR_D_COUNTER || ds[i].val == NFTR_D_LIMIT)
            kinds[nk++] = &ds[i]; /* each object is named after its map */
    for (size_t i = 0; i < ARRAY_SIZE(chain_pfx) + nk; i++) {
        struct batch bt;
        int e = batch_start(n, &bt, NULL);
        if (e < 0) {
            batch_free(&bt);
            err = err ? err : e;
            continue;
        }
        if (i < ARRAY_SIZE(chain_pfx)) {
            snprintf(name, sizeof(name), "%s%s", chain_pfx[i], id);
            put_data_chain_del(n, &bt, name);
        } else {
            const struct nftr_data_set *kind = kinds[i - ARRAY_SIZE(chain_pfx)];
            struct nftr_obj o = {.type = kind->val};
            snprintf(o.name, sizeof(o.name), "%s-%s", kind->name, id);
            put_data_obj(n, &bt, NFT_MSG_DELOBJ, &o);
        }
        e = batch_send(n, &bt);
        if (e == 0)
            removed++;
        else if (e != -ENOENT && !err)
            err = e;
    }
    return err ? err : removed ? 0 : -ENOENT;
}

int nft_data_reap_keyed(struct nft *n, const struct nft_data_pieces *p, uint64_t cgroup_id) {
    const struct nftr_data_set *ds;
    size_t removed = 0;
    int err = 0;
    if (!cgroup_id)
        return -EINVAL;
    /* the layout's own sets only (the base maps follow them in p), and no
     * element keyed by a mark alone (no id) */
    reap_elems(n, p, nftr_data_sets(&ds), "", cgroup_id, 0, &removed, &err);
    return err ? err : removed ? 0 : -ENOENT;
}

int nft_table_delete(struct nft *n) {
    struct batch bt;
    int r = batch_start(n, &bt, NULL);
    if (r < 0) {
        batch_free(&bt);
        return r;
    }
    put_table(n, &bt, NFT_MSG_DELTABLE, 0);
    return batch_send(n, &bt);
}

/* The rules of one of our chains, as dumped. -EINVAL, -ENOENT (no chain). */
static int chain_rules(struct nft *n, const char *chain, struct rule_list *l) {
    if (!chain || !chain[0] || strlen(chain) >= NFTR_NAME_MAX)
        return -EINVAL;
    int have = chain_exists(n, chain);
    if (have < 0)
        return have;
    if (!have)
        return -ENOENT;
    return dump_rules(n, chain, l);
}

int nft_chain_mark_packets(struct nft *n, const char *chain, uint32_t mark, uint64_t *ret) {
    struct rule_list l = { .v = NULL };
    int r = chain_rules(n, chain, &l);
    uint64_t sum = 0;
    bool any = false;
    for (size_t i = 0; r == 0 && i < l.n; i++)
        if (l.v[i].sets_unknown_mark) {
            r = -ENODATA; /* a rule may set this mark too, uncounted here */
        } else if (l.v[i].sets_mark && l.v[i].mark == mark) {
            any = true;
            if (!l.v[i].mark_counted)
                r = -ENODATA; /* no count to go by, or one of only some of them */
            sum += l.v[i].packets;
        }
    free(l.v);
    if (r == 0 && !any)
        r = -ENODATA;
    if (r == 0)
        *ret = sum;
    return r;
}

int nft_chain_counters(struct nft *n, const char *chain, struct nft_counters *ret) {
    struct rule_list l = { .v = NULL };
    int r = chain_rules(n, chain, &l);
    if (r < 0) {
        free(l.v);
        return r;
    }
    struct nft_counters c = { 0 };
    for (size_t i = 0; i < l.n; i++) {
        if (!l.v[i].counter)
            continue;
        /* A counter on a rule without a verdict is the new-flow counter of
         * an accept, logged or not (Policy.log_allowed_flows). */
        if (l.v[i].verdict == 0) {
            c.accept_flows += l.v[i].packets;
        } else if (l.v[i].verdict == 1) {
            c.accept_packets += l.v[i].packets;
            c.accept_bytes += l.v[i].bytes;
        } else if (l.v[i].verdict == 2) {
            c.reject_packets += l.v[i].packets;
            c.reject_bytes += l.v[i].bytes;
        }
    }
    free(l.v);
    *ret = c;
    return 0;
}
