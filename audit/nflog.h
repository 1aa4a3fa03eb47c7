/* NFLOG: the kernel's flow events for our rules (nfnetlink_log over libmnl).
 *
 * Two halves. The decoder (nflog_decode.c) is a pure function over bytes the
 * kernel sent: it never allocates, never logs and never trusts a length it has
 * not checked, so it is fuzzed on its own (fuzz/fuzz_nflog). The socket
 * (nflog.c) binds one NFLOG group in the caller's network namespace and reads
 * it without blocking, from inside the daemon's event loop.
 *
 * Contract: functions return 0 or -errno and set ret_* only on success;
 * nothing here logs. */
#ifndef LYH_NFLOG_H
#define LYH_NFLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The prefix our rules put on each log event (platform/linux/nft_render.c):
 *   "lyh:<session id>:A " / "lyh:<session id>:D "  a session chain
 *   "lyh:LYH-<uid>:A "    / "lyh:LYH-U-<uid>:D "    a shared (per-uid) chain
 *   "lyh:nosession:D "                             the base chain's catch-all */
enum nflog_origin_kind {
    NFLOG_ORIGIN_SESSION = 1,
    NFLOG_ORIGIN_UID = 2,     /* a shared chain; uid set, session empty */
    NFLOG_ORIGIN_NOSESSION = 3,
};

struct nflog_origin {
    int kind;              /* enum nflog_origin_kind */
    char session[17];      /* NFLOG_ORIGIN_SESSION: 16 lowercase hex characters */
    char chain[32];        /* NFLOG_ORIGIN_UID: the chain named in the prefix */
    uint32_t uid;          /* NFLOG_ORIGIN_UID */
    int verdict;           /* 1 allowed ('A'), 2 denied ('D') */
};

/* Parse a log prefix (exactly as it arrived, trailing space included or not).
 * -EINVAL for anything that is not one of the forms above. */
int nflog_prefix_parse(const char *prefix, struct nflog_origin *ret);

struct nflog_pkt {
    char prefix[64];       /* NUL-terminated; "" when the message had none */
    bool has_time;         /* NFULA_TIMESTAMP was present */
    int64_t time_us;       /* wall clock, microseconds since the epoch */
    bool has_uid;          /* NFULA_UID: the sending socket's owner */
    uint32_t uid;
    bool has_gid;
    uint32_t gid;
    bool has_seq;          /* NFULA_SEQ (NFULNL_CFG_F_SEQ): per-group sequence */
    uint32_t seq;
    uint32_t oif;          /* NFULA_IFINDEX_OUTDEV, 0 when absent */
    uint32_t iif;          /* NFULA_IFINDEX_INDEV, 0 when absent */
    uint8_t family;        /* AF_INET or AF_INET6 (nfgenmsg), 0: no payload */
    uint8_t protocol;      /* IPPROTO_* of the L4 header (after IPv6 extension headers);
                              when the IPv6 extension headers cannot be walked to their
                              end in the copy (cut short, more than 8), the type of the
                              header where the walk stopped */
    uint8_t addr_len;      /* 4 or 16, 0: no usable L3 header */
    uint8_t src[16];
    uint8_t dst[16];
    bool has_ports;        /* TCP/UDP/UDPLITE/SCTP header present in the copy */
    uint16_t sport;
    uint16_t dport;
    uint32_t ip_len;       /* length of the packet per its L3 header; 0 when the header
                              gives none (IPv4 tot_len 0 of BIG TCP, IPv6 jumbo) */
};

/* Decode one netlink message (header included, len = its nlmsg_len or the
 * bytes available, whichever is smaller). -ENOMSG when it is valid netlink but
 * not an NFULNL_MSG_PACKET of nfnetlink_log (e.g. an ACK or NLMSG_DONE);
 * -EBADMSG when it is malformed (bad lengths, truncated attributes). A payload
 * too short for its L3 or L4 header is not an error: the fields it lacks stay
 * zero (addr_len 0, has_ports false). */
int nflog_decode(const void *msg, size_t len, struct nflog_pkt *ret);

/* Walk a buffer of netlink messages as one recv() returned it, calling fn for
 * each packet message that decodes. Returns the number of packet messages
 * decoded, or -EBADMSG when the buffer's framing itself is broken (messages
 * before the break were delivered). Messages that are -ENOMSG are skipped;
 * an NLMSG_ERROR carrying an error is returned as that -errno after the walk. */
typedef void (*nflog_pkt_fn)(const struct nflog_pkt *pkt, void *ud);
int nflog_decode_buf(const void *buf, size_t len, nflog_pkt_fn fn, void *ud);

/* nflog_decode_buf that also counts what it could not use: *n_bad grows by
 * one per message that was framed correctly but did not decode (a packet
 * message that is -EBADMSG, a short NLMSG_ERROR), and by one when the
 * framing broke. *n_bad is added to on every return (it is a counter, not a
 * result). */
int nflog_decode_buf_count(const void *buf, size_t len, nflog_pkt_fn fn, void *ud,
                           uint64_t *n_bad);

/* ---- socket (nflog.c) ------------------------------------------------------- */

struct nflog;

struct nflog_params {
    uint16_t group;        /* the group our rules log to */
    uint32_t copy_range;   /* bytes of each packet to copy (L3+L4 headers: 128) */
    uint32_t rcvbuf;       /* SO_RCVBUFFORCE, bytes */
    uint32_t qthresh;      /* kernel batches up to this many packets per message */
    uint32_t flush_ms;     /* ... or flushes after this long (10 ms steps) */
};

/* Open a netlink socket (non-blocking, CLOEXEC), bind the group in copy-packet
 * mode with sequence numbers and uid/gid, set the buffer. -EBUSY when another
 * process already listens on that group in this network namespace. Blocks
 * only for the kernel's ACKs. */
int nflog_open(const struct nflog_params *p, struct nflog **ret);
int nflog_fd(const struct nflog *n);

/* Read a socket another process opened and bound (lyhd's parent hands it to
 * its protocol process): fd is owned from here; nothing is configured, and
 * nflog_close only closes it. Its `lost` counts from the first event read. */
int nflog_adopt(int fd, struct nflog **ret);

/* Sequence bookkeeping (NFULA_SEQ): the events lost between *next and seq,
 * and *next moved past seq; 0 for a number already passed. */
uint32_t nflog_seq_advance(uint32_t *next, uint32_t seq);

struct nflog_read_stats {
    uint64_t packets;      /* packet messages decoded */
    uint64_t lost;         /* events the kernel dropped before we read them:
                              sequence gaps, and overruns (ENOBUFS) */
    uint64_t overruns;     /* ENOBUFS returned by recv */
    uint64_t bad;          /* messages that did not decode */
};

/* Read what is queued without blocking, at most max_reads recv() calls,
 * calling fn per packet. Adds to *stats. Returns 0 when the socket was drained,
 * 1 when max_reads was reached with more queued (call again), -errno on a
 * socket error other than EAGAIN/ENOBUFS. */
int nflog_read(struct nflog *n, unsigned max_reads, nflog_pkt_fn fn, void *ud,
               struct nflog_read_stats *stats);

/* Unbind and close. Accepts NULL. */
void nflog_close(struct nflog *n);

#endif
