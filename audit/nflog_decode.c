/* nflog_decode: NFLOG packet messages (nfnetlink_log) and our log prefixes,
 * decoded from bytes into plain structs.
 *
 * Owns: the reading of netlink framing, nfnetlink_log attributes, the IPv4 /
 * IPv6 headers and the first four bytes of TCP/UDP/UDPLITE/SCTP in the copy
 * of a packet, and the grammar of the prefixes nft_render puts on log rules.
 * Must never: allocate, log, keep state, or read a byte it has not shown to
 * lie inside the buffer it was given.
 *
 * Why this is safe to run on any bytes (it is fuzzed on its own):
 * - Every read goes through rd_*() on a byte pointer (memcpy or byte
 *   arithmetic), so the input may have any alignment and no struct is ever
 *   cast onto it; each rd_*() is preceded by a check of the bytes it reads.
 * - Lengths are compared as size_t against what is left, before any sum is
 *   formed that could wrap: `a > left - off` with off <= left, never
 *   `off + a > left`.
 * - Netlink messages and attributes advance by their aligned length only
 *   after the unaligned length was checked to fit; a final message or
 *   attribute without its padding ends the walk instead of stepping past it.
 * - The IPv6 extension header walk is bounded in count (NFLOG_V6_EXT_MAX).
 *
 * Decisions, with their reason:
 * - A fixed-size attribute (u32, the timestamp) of any other size makes the
 *   message -EBADMSG: the kernel always sends them exact, and a value read
 *   from a shorter or longer attribute would be a guess.
 * - NFULA_PREFIX without a NUL inside its payload is -EBADMSG (the kernel
 *   sends strlen + 1 bytes, so a prefix that lacks it was not written by the
 *   kernel's encoder). A NUL-terminated prefix longer than 63 characters is
 *   cut to 63: no prefix we render is longer (NFTR_LOG_PREFIX_MAX), and a cut
 *   one can never parse as one of ours, since every valid form is shorter.
 * - An IP version nibble that contradicts nfgen_family is -EBADMSG; other
 *   families (bridge, netdev, arp) decode their metadata with family 0.
 * - Ports need only the first four bytes of the L4 header (both ports sit
 *   there for all four protocols); the rest of the header is not read.
 * - IPv4 non-first fragments (offset != 0) and IPv6 non-first fragments
 *   carry no L4 header: protocol is set, has_ports stays false. */
#include "audit/nflog.h"

#include <errno.h>
#include <limits.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#define NFLOG_V6_EXT_MAX  8  /* extension headers walked before giving up */
#define NFLOG_PACKET_TYPE ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET)
#define NL_HDR            ((size_t)NLMSG_HDRLEN)
#define NFGEN_HDR         ((size_t)NLMSG_ALIGN(sizeof(struct nfgenmsg)))
#define NLA_HDR           ((size_t)NLA_HDRLEN)

/* 4-byte alignment in size_t, so that a length near UINT32_MAX cannot wrap. */
static size_t align4(size_t n) { return (n + 3u) & ~(size_t)3u; }

static uint16_t rd_h16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}
static uint16_t rd_be16(const uint8_t *p) { return (uint16_t)((unsigned)p[0] << 8 | p[1]); }
static uint32_t rd_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint64_t rd_be64(const uint8_t *p) {
    return (uint64_t)rd_be32(p) << 32 | rd_be32(p + 4);
}

/* ---- L3 / L4 ------------------------------------------------------------------ */

static bool proto_has_ports(uint8_t proto) {
    return proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE ||
           proto == IPPROTO_SCTP;
}

static void parse_ports(const uint8_t *l4, size_t n, uint8_t proto, struct nflog_pkt *p) {
    if (!proto_has_ports(proto) || n < 4)
        return;
    p->sport = rd_be16(l4);
    p->dport = rd_be16(l4 + 2);
    p->has_ports = true;
}

/* The bytes of the copy that belong to the packet: its L3 length when the
 * header gives one that is shorter than the copy (the rest is not packet),
 * else all of the copy. */
static size_t packet_bytes(size_t copied, uint32_t ip_len) {
    return ip_len != 0 && ip_len < copied ? ip_len : copied;
}

static void parse_ipv4(const uint8_t *b, size_t n, struct nflog_pkt *p) {
    if (n < 20)
        return;
    size_t ihl = (size_t)(b[0] & 0x0f) * 4;
    if (ihl < 20)
        return; /* not a usable header: addr_len stays 0 */
    p->ip_len = rd_be16(b + 2);
    p->protocol = b[9];
    p->addr_len = 4;
    memcpy(p->src, b + 12, 4);
    memcpy(p->dst, b + 16, 4);
    if ((rd_be16(b + 6) & 0x1fff) != 0)
        return; /* a non-first fragment has no L4 header */
    size_t avail = packet_bytes(n, p->ip_len);
    if (p->ip_len != 0 && p->ip_len < ihl)
        return; /* the header claims a packet shorter than itself */
    if (ihl > avail)
        return; /* options cut off by copy_range */
    parse_ports(b + ihl, avail - ihl, p->protocol, p);
}

static void parse_ipv6(const uint8_t *b, size_t n, struct nflog_pkt *p) {
    if (n < 40)
        return;
    uint16_t plen = rd_be16(b + 4);
    p->ip_len = plen ? 40u + plen : 0;
    p->addr_len = 16;
    memcpy(p->src, b + 8, 16);
    memcpy(p->dst, b + 24, 16);

    size_t avail = packet_bytes(n, p->ip_len);
    size_t off = 40;
    uint8_t nh = b[6];
    for (unsigned i = 0;; i++) {
        size_t left = avail - off; /* off <= avail holds: checked before each advance */
        size_t hl;
        switch (nh) {
        case IPPROTO_HOPOPTS:
        case IPPROTO_ROUTING:
        case IPPROTO_DSTOPTS:
            if (i >= NFLOG_V6_EXT_MAX || left < 2)
                goto stop;
            hl = ((size_t)b[off + 1] + 1) * 8;
            break;
        case IPPROTO_AH:
            if (i >= NFLOG_V6_EXT_MAX || left < 2)
                goto stop;
            hl = ((size_t)b[off + 1] + 2) * 4;
            break;
        case IPPROTO_FRAGMENT:
            if (i >= NFLOG_V6_EXT_MAX || left < 8)
                goto stop;
            if ((rd_be16(b + off + 2) & 0xfff8) != 0) {
                /* A non-first fragment: the fragment header names the protocol
                 * of the fragmentable part, but its L4 header is elsewhere. */
                p->protocol = b[off];
                return;
            }
            hl = 8;
            break;
        default:
            p->protocol = nh;
            parse_ports(b + off, left, nh, p);
            return;
        }
        if (hl > left)
            goto stop;
        nh = b[off];
        off += hl;
    }
stop:
    p->protocol = nh; /* the header we could not get past */
}

/* ---- one message ----------------------------------------------------------------- */

static int attr_u32(const uint8_t *data, size_t dlen, uint32_t *out) {
    if (dlen != 4)
        return -EBADMSG;
    *out = rd_be32(data);
    return 0;
}

static int parse_attr(uint16_t type, const uint8_t *data, size_t dlen, struct nflog_pkt *p,
                      const uint8_t **payload, size_t *payload_len) {
    switch (type) {
    case NFULA_PREFIX: {
        const uint8_t *nul = memchr(data, 0, dlen);
        if (!nul)
            return -EBADMSG;
        size_t n = (size_t)(nul - data);
        if (n > sizeof(p->prefix) - 1)
            n = sizeof(p->prefix) - 1;
        memcpy(p->prefix, data, n);
        p->prefix[n] = '\0';
        return 0;
    }
    case NFULA_TIMESTAMP: {
        if (dlen != sizeof(struct nfulnl_msg_packet_timestamp))
            return -EBADMSG;
        uint64_t sec = rd_be64(data), usec = rd_be64(data + 8);
        if (usec >= 1000000u || sec > (uint64_t)(INT64_MAX / 1000000 - 1))
            return -EBADMSG;
        p->time_us = (int64_t)sec * 1000000 + (int64_t)usec;
        p->has_time = true;
        return 0;
    }
    case NFULA_UID:
        p->has_uid = true;
        return attr_u32(data, dlen, &p->uid);
    case NFULA_GID:
        p->has_gid = true;
        return attr_u32(data, dlen, &p->gid);
    case NFULA_SEQ:
        p->has_seq = true;
        return attr_u32(data, dlen, &p->seq);
    case NFULA_IFINDEX_INDEV:
        return attr_u32(data, dlen, &p->iif);
    case NFULA_IFINDEX_OUTDEV:
        return attr_u32(data, dlen, &p->oif);
    case NFULA_PAYLOAD:
        *payload = data;
        *payload_len = dlen;
        return 0;
    default:
        return 0; /* mark, hardware, conntrack, ...: not ours to read */
    }
}

static int decode_msg(const uint8_t *m, size_t len, struct nflog_pkt *ret) {
    struct nlmsghdr h;
    struct nfgenmsg g;

    if (len < NL_HDR)
        return -EBADMSG;
    memcpy(&h, m, sizeof(h));
    if (h.nlmsg_len < NL_HDR || h.nlmsg_len > len)
        return -EBADMSG;
    len = h.nlmsg_len;
    if (h.nlmsg_type != NFLOG_PACKET_TYPE)
        return -ENOMSG; /* NLMSG_ERROR, NLMSG_DONE, NLMSG_NOOP, other subsystems */
    if (len - NL_HDR < sizeof(g))
        return -EBADMSG;
    memcpy(&g, m + NL_HDR, sizeof(g));
    if (g.version != NFNETLINK_V0)
        return -EBADMSG;

    struct nflog_pkt p = {0};
    const uint8_t *payload = NULL;
    size_t payload_len = 0;
    size_t off = NL_HDR + NFGEN_HDR;
    while (off < len) {
        size_t left = len - off;
        if (left < NLA_HDR)
            return -EBADMSG;
        uint16_t alen = rd_h16(m + off);
        uint16_t type = rd_h16(m + off + 2) & NLA_TYPE_MASK;
        if (alen < NLA_HDR || alen > left)
            return -EBADMSG;
        int r = parse_attr(type, m + off + NLA_HDR, alen - NLA_HDR, &p, &payload, &payload_len);
        if (r < 0)
            return r;
        size_t step = align4(alen);
        if (step >= left)
            break; /* the last attribute, with or without its padding */
        off += step;
    }

    if (payload && payload_len > 0 && (g.nfgen_family == AF_INET || g.nfgen_family == AF_INET6)) {
        unsigned want = g.nfgen_family == AF_INET ? 4 : 6;
        if ((payload[0] >> 4) != want)
            return -EBADMSG;
        p.family = g.nfgen_family;
        if (p.family == AF_INET)
            parse_ipv4(payload, payload_len, &p);
        else
            parse_ipv6(payload, payload_len, &p);
    }
    *ret = p;
    return 0;
}

int nflog_decode(const void *msg, size_t len, struct nflog_pkt *ret) {
    if (!msg || !ret)
        return -EINVAL;
    return decode_msg(msg, len, ret);
}

/* ---- a buffer of messages ----------------------------------------------------------- */

int nflog_decode_buf_count(const void *buf, size_t len, nflog_pkt_fn fn, void *ud,
                           uint64_t *n_bad) {
    const uint8_t *b = buf;
    uint64_t bad = 0;
    int count = 0, kerr = 0, r = 0;
    size_t off = 0;

    if ((!buf && len) || !n_bad)
        return -EINVAL;
    /* A count must fit the int we return: at most one message per 16 bytes. */
    if (len / NL_HDR > (size_t)INT_MAX)
        return -E2BIG;
    while (len - off >= NL_HDR) {
        size_t left = len - off;
        struct nlmsghdr h;
        memcpy(&h, b + off, sizeof(h));
        if (h.nlmsg_len < NL_HDR || h.nlmsg_len > left) {
            bad++;
            r = -EBADMSG;
            goto out;
        }
        if (h.nlmsg_type == NLMSG_ERROR) {
            int e;
            if (h.nlmsg_len - NL_HDR < sizeof(struct nlmsgerr)) {
                bad++;
            } else {
                memcpy(&e, b + off + NL_HDR, sizeof(e));
                if (e < 0 && e >= -4095) {
                    if (kerr == 0)
                        kerr = e;
                } else if (e != 0) {
                    bad++; /* not an errno; 0 is an ACK */
                }
            }
        } else {
            struct nflog_pkt p;
            int d = decode_msg(b + off, h.nlmsg_len, &p);
            if (d == 0) {
                if (fn)
                    fn(&p, ud);
                count++;
            } else if (d != -ENOMSG) {
                bad++;
            }
        }
        size_t step = align4(h.nlmsg_len);
        if (step >= left) {
            off = len;
            break;
        }
        off += step;
    }
    if (off < len) {
        bad++; /* 1..15 bytes that cannot hold a message header */
        r = -EBADMSG;
        goto out;
    }
    r = kerr ? kerr : count;
out:
    *n_bad += bad;
    return r;
}

int nflog_decode_buf(const void *buf, size_t len, nflog_pkt_fn fn, void *ud) {
    uint64_t bad = 0;
    return nflog_decode_buf_count(buf, len, fn, ud, &bad);
}

/* ---- prefixes ----------------------------------------------------------------------- */

/* A uid as nft_render writes it: decimal, no sign, no leading zero, and not
 * (uid_t)-1, which is never a uid (the renderer refuses it). */
static int parse_uid(const char *s, size_t n, uint32_t *ret) {
    uint64_t v = 0;

    if (n < 1 || n > 10 || (n > 1 && s[0] == '0'))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v >= UINT32_MAX)
        return -EINVAL;
    *ret = (uint32_t)v;
    return 0;
}

static bool is_session_id(const char *s, size_t n) {
    if (n != 16)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

int nflog_prefix_parse(const char *prefix, struct nflog_origin *ret) {
    static const char lyh[] = "lyh:", uid_chain[] = "LYH-", shared_chain[] = "LYH-U-";
    struct nflog_origin o = {0};

    if (!prefix || !ret)
        return -EINVAL;
    size_t n = strnlen(prefix, 64);
    if (n >= 64)
        return -EINVAL;
    if (n > 0 && prefix[n - 1] == ' ')
        n--; /* the separator nft_render appends; optional */
    /* "lyh:" body ":" verdict, body at least one character */
    if (n < sizeof(lyh) - 1 + 3 || memcmp(prefix, lyh, sizeof(lyh) - 1) != 0 ||
        prefix[n - 2] != ':')
        return -EINVAL;
    switch (prefix[n - 1]) {
    case 'A':
        o.verdict = 1;
        break;
    case 'D':
        o.verdict = 2;
        break;
    default:
        return -EINVAL;
    }
    const char *body = prefix + sizeof(lyh) - 1;
    size_t blen = n - 2 - (sizeof(lyh) - 1);

    if (is_session_id(body, blen)) {
        o.kind = NFLOG_ORIGIN_SESSION;
        memcpy(o.session, body, blen);
        o.session[blen] = '\0';
    } else if (blen == 9 && memcmp(body, "nosession", 9) == 0) {
        if (o.verdict != 2)
            return -EINVAL; /* the catch-all only ever rejects */
        o.kind = NFLOG_ORIGIN_NOSESSION;
    } else {
        size_t pl;
        if (blen > sizeof(shared_chain) - 1 &&
            memcmp(body, shared_chain, sizeof(shared_chain) - 1) == 0)
            pl = sizeof(shared_chain) - 1;
        else if (blen > sizeof(uid_chain) - 1 &&
                 memcmp(body, uid_chain, sizeof(uid_chain) - 1) == 0)
            pl = sizeof(uid_chain) - 1;
        else
            return -EINVAL;
        if (parse_uid(body + pl, blen - pl, &o.uid) < 0)
            return -EINVAL;
        o.kind = NFLOG_ORIGIN_UID;
        memcpy(o.chain, body, blen); /* <= 16 characters: "LYH-U-" + 10 digits */
        o.chain[blen] = '\0';
    }
    *ret = o;
    return 0;
}
