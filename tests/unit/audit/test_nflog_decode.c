/* Unit tests for audit/nflog_decode.c: NFLOG packet messages built by hand
 * (nlmsghdr + nfgenmsg + attributes, padded as the kernel pads them, with
 * IPv4 / IPv6 payloads), broken ones, buffers of several messages, and the
 * log prefix grammar. Needs no privileges and opens no socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "audit/nflog.h"

#define PKT_TYPE ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET)
#define SESSION_PREFIX "lyh:0123456789abcdef:A "

static _Alignas(struct nlmsghdr) uint8_t buf[16384];
static size_t used;

static int setup(void **state) {
    (void)state;
    memset(buf, 0, sizeof(buf));
    used = 0;
    return 0;
}

/* ---- builders ------------------------------------------------------------------ */

static struct nlmsghdr *msg_begin(uint16_t type, uint8_t family) {
    assert_true(used + 2048 <= sizeof(buf));
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf + used);
    nlh->nlmsg_type = type;
    if (type == PKT_TYPE) {
        struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
        g->nfgen_family = family;
        g->version = NFNETLINK_V0;
        g->res_id = htons(7);
    }
    return nlh;
}

static void msg_end(struct nlmsghdr *nlh) { used += MNL_ALIGN(nlh->nlmsg_len); }

static void put_be32(struct nlmsghdr *nlh, uint16_t type, uint32_t v) {
    mnl_attr_put_u32(nlh, type, htonl(v));
}

static void put_prefix(struct nlmsghdr *nlh, const char *prefix) {
    mnl_attr_put_strz(nlh, NFULA_PREFIX, prefix);
}

static void put_time(struct nlmsghdr *nlh, uint64_t sec, uint64_t usec) {
    uint8_t ts[16];
    for (int i = 0; i < 8; i++) {
        ts[i] = (uint8_t)(sec >> (56 - 8 * i));
        ts[8 + i] = (uint8_t)(usec >> (56 - 8 * i));
    }
    mnl_attr_put(nlh, NFULA_TIMESTAMP, sizeof(ts), ts);
}

/* The metadata every packet message of ours carries. */
static struct nlmsghdr *pkt_begin(uint8_t family, const char *prefix, uint32_t seq) {
    struct nlmsghdr *nlh = msg_begin(PKT_TYPE, family);
    struct nfulnl_msg_packet_hdr ph = {.hw_protocol = htons(family == AF_INET ? 0x0800 : 0x86dd),
                                       .hook = 3};
    mnl_attr_put(nlh, NFULA_PACKET_HDR, sizeof(ph), &ph);
    if (prefix)
        put_prefix(nlh, prefix);
    put_be32(nlh, NFULA_IFINDEX_OUTDEV, 3);
    put_be32(nlh, NFULA_UID, 1000);
    put_be32(nlh, NFULA_GID, 1001);
    put_be32(nlh, NFULA_SEQ, seq);
    return nlh;
}

static size_t ipv4(uint8_t *p, uint8_t proto, uint16_t frag, size_t l4len) {
    memset(p, 0, 20);
    p[0] = 0x45;
    uint16_t tot = (uint16_t)(20 + l4len);
    p[2] = (uint8_t)(tot >> 8);
    p[3] = (uint8_t)tot;
    p[6] = (uint8_t)(frag >> 8);
    p[7] = (uint8_t)frag;
    p[8] = 64;
    p[9] = proto;
    const uint8_t src[4] = {10, 0, 0, 1}, dst[4] = {93, 184, 216, 34};
    memcpy(p + 12, src, 4);
    memcpy(p + 16, dst, 4);
    return 20;
}

static size_t ipv6(uint8_t *p, uint8_t nh, size_t plen) {
    memset(p, 0, 40);
    p[0] = 0x60;
    p[4] = (uint8_t)(plen >> 8);
    p[5] = (uint8_t)plen;
    p[6] = nh;
    p[7] = 64;
    inet_pton(AF_INET6, "2001:db8::1", p + 8);
    inet_pton(AF_INET6, "2606:4700::1111", p + 24);
    return 40;
}

static size_t ports(uint8_t *p, uint16_t sport, uint16_t dport, size_t hdrlen) {
    memset(p, 0, hdrlen);
    p[0] = (uint8_t)(sport >> 8);
    p[1] = (uint8_t)sport;
    p[2] = (uint8_t)(dport >> 8);
    p[3] = (uint8_t)dport;
    return hdrlen;
}

static int decode_last(struct nflog_pkt *p) {
    const struct nlmsghdr *nlh = (const void *)buf;
    return nflog_decode(buf, nlh->nlmsg_len, p);
}

static void assert_v4_addrs(const struct nflog_pkt *p) {
    const uint8_t src[4] = {10, 0, 0, 1}, dst[4] = {93, 184, 216, 34};
    assert_int_equal(p->addr_len, 4);
    assert_memory_equal(p->src, src, 4);
    assert_memory_equal(p->dst, dst, 4);
}

static void assert_v6_addrs(const struct nflog_pkt *p) {
    uint8_t src[16], dst[16];
    inet_pton(AF_INET6, "2001:db8::1", src);
    inet_pton(AF_INET6, "2606:4700::1111", dst);
    assert_int_equal(p->addr_len, 16);
    assert_memory_equal(p->src, src, 16);
    assert_memory_equal(p->dst, dst, 16);
}

/* ---- packets ---------------------------------------------------------------------- */

static void test_ipv4_tcp(void **state) {
    (void)state;
    uint8_t pl[64];
    size_t n = ipv4(pl, IPPROTO_TCP, 0x4000 /* DF */, 20);
    n += ports(pl + n, 40000, 443, 20);
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 5);
    put_time(nlh, 1700000000, 123456);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);

    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), 0);
    assert_string_equal(p.prefix, SESSION_PREFIX);
    assert_true(p.has_time);
    assert_int_equal(p.time_us, INT64_C(1700000000123456));
    assert_true(p.has_uid);
    assert_int_equal(p.uid, 1000);
    assert_true(p.has_gid);
    assert_int_equal(p.gid, 1001);
    assert_true(p.has_seq);
    assert_int_equal(p.seq, 5);
    assert_int_equal(p.oif, 3);
    assert_int_equal(p.iif, 0);
    assert_int_equal(p.family, AF_INET);
    assert_int_equal(p.protocol, IPPROTO_TCP);
    assert_v4_addrs(&p);
    assert_true(p.has_ports);
    assert_int_equal(p.sport, 40000);
    assert_int_equal(p.dport, 443);
    assert_int_equal(p.ip_len, 40);
}

static void test_ipv4_udp(void **state) {
    (void)state;
    uint8_t pl[64];
    size_t n = ipv4(pl, IPPROTO_UDP, 0, 8 + 12);
    n += ports(pl + n, 5353, 53, 8);
    struct nlmsghdr *nlh = pkt_begin(AF_INET, "lyh:LYH-1000:D ", 0);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl); /* copy_range cut the 12 data bytes */
    msg_end(nlh);

    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), 0);
    assert_string_equal(p.prefix, "lyh:LYH-1000:D ");
    assert_false(p.has_time);
    assert_int_equal(p.seq, 0);
    assert_int_equal(p.family, AF_INET);
    assert_int_equal(p.protocol, IPPROTO_UDP);
    assert_v4_addrs(&p);
    assert_true(p.has_ports);
    assert_int_equal(p.sport, 5353);
    assert_int_equal(p.dport, 53);
    assert_int_equal(p.ip_len, 40);
}

static void test_ipv4_icmp(void **state) {
    (void)state;
    uint8_t pl[64];
    size_t n = ipv4(pl, IPPROTO_ICMP, 0, 8);
    memset(pl + n, 0, 8);
    pl[n] = 8; /* echo request: type 8 code 0 would read as "port 2048" */
    n += 8;
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 9);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);

    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), 0);
    assert_int_equal(p.family, AF_INET);
    assert_int_equal(p.protocol, IPPROTO_ICMP);
    assert_v4_addrs(&p);
    assert_false(p.has_ports);
    assert_int_equal(p.sport, 0);
    assert_int_equal(p.dport, 0);
    assert_int_equal(p.ip_len, 28);
}

static void test_ipv4_options(void **state) {
    (void)state;
    uint8_t pl[64];
    size_t n = ipv4(pl, IPPROTO_UDP, 0, 8 + 8);
    pl[0] = 0x47; /* ihl 7: 8 bytes of options */
    pl[3] = 36;
    memset(pl + n, 1, 8); /* options (NOPs) */
    n += 8;
    n += ports(pl + n, 1234, 4321, 8);
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);

    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), 0);
    assert_true(p.has_ports);
    assert_int_equal(p.sport, 1234);
    assert_int_equal(p.dport, 4321);
    assert_int_equal(p.ip_len, 36);
}

static void test_ipv4_bad_ihl(void **state) {
    (void)state;
    uint8_t pl[64];
    size_t n = ipv4(pl, IPPROTO_UDP, 0, 8);
    n += ports(pl + n, 1, 2, 8);
    pl[0] = 0x44; /* ihl 4 < 5 */
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);

    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), 0);
    assert_int_equal(p.family, AF_INET);
    assert_int_equal(p.addr_len, 0);
    assert_false(p.has_ports);
}

static void test_ipv4_ihl_beyond_copy(void **state) {
    (void)state;
    uint8_t pl[64];
    size_t n = ipv4(pl, IPPROTO_TCP, 0, 40);
    pl[0] = 0x4f; /* 60-byte header, but only 24 bytes copied */
    memset(pl + n, 0, 4);
    n += 4;
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);

    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), 0);
    assert_v4_addrs(&p);
    assert_int_equal(p.protocol, IPPROTO_TCP);
    assert_false(p.has_ports);
}

static void test_ipv4_fragments(void **state) {
    (void)state;
    uint8_t pl[64];
    struct nflog_pkt p;

    /* non-first fragment (offset 185 * 8): what follows the header is data */
    size_t n = ipv4(pl, IPPROTO_UDP, 185, 16);
    n += ports(pl + n, 1111, 2222, 16);
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 2);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);
    assert_int_equal(decode_last(&p), 0);
    assert_v4_addrs(&p);
    assert_int_equal(p.protocol, IPPROTO_UDP);
    assert_false(p.has_ports);
    assert_int_equal(p.sport, 0);

    /* first fragment (MF, offset 0): ports are there */
    setup(NULL);
    n = ipv4(pl, IPPROTO_UDP, 0x2000, 16);
    n += ports(pl + n, 1111, 2222, 16);
    nlh = pkt_begin(AF_INET, SESSION_PREFIX, 3);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);
    assert_int_equal(decode_last(&p), 0);
    assert_true(p.has_ports);
    assert_int_equal(p.sport, 1111);
    assert_int_equal(p.dport, 2222);
}

static void test_ipv6_tcp(void **state) {
    (void)state;
    uint8_t pl[96];
    size_t n = ipv6(pl, IPPROTO_TCP, 20);
    n += ports(pl + n, 50000, 8443, 20);
    struct nlmsghdr *nlh = pkt_begin(AF_INET6, "lyh:LYH-U-1000:A", 11);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);

    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), 0);
    assert_string_equal(p.prefix, "lyh:LYH-U-1000:A");
    assert_int_equal(p.family, AF_INET6);
    assert_int_equal(p.protocol, IPPROTO_TCP);
    assert_v6_addrs(&p);
    assert_true(p.has_ports);
    assert_int_equal(p.sport, 50000);
    assert_int_equal(p.dport, 8443);
    assert_int_equal(p.ip_len, 60);
    assert_int_equal(p.seq, 11);
}

static void test_ipv6_udp_hopopts(void **state) {
    (void)state;
    uint8_t pl[96];
    size_t n = ipv6(pl, IPPROTO_HOPOPTS, 8 + 8);
    memset(pl + n, 0, 8);
    pl[n] = IPPROTO_UDP; /* next header */
    pl[n + 1] = 0;       /* (0 + 1) * 8 bytes */
    pl[n + 2] = 1;       /* PadN, 4 bytes of padding */
    pl[n + 3] = 4;
    n += 8;
    n += ports(pl + n, 546, 547, 8);
    struct nlmsghdr *nlh = pkt_begin(AF_INET6, SESSION_PREFIX, 12);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);

    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), 0);
    assert_int_equal(p.family, AF_INET6);
    assert_int_equal(p.protocol, IPPROTO_UDP);
    assert_v6_addrs(&p);
    assert_true(p.has_ports);
    assert_int_equal(p.sport, 546);
    assert_int_equal(p.dport, 547);
    assert_int_equal(p.ip_len, 56);
}

static void test_ipv6_ext_chain(void **state) {
    (void)state;
    uint8_t pl[160];
    /* dest-opts (16 bytes) -> routing (8) -> fragment, first (8) -> udp */
    size_t n = ipv6(pl, IPPROTO_DSTOPTS, 16 + 8 + 8 + 8);
    memset(pl + n, 0, 32);
    pl[n] = IPPROTO_ROUTING;
    pl[n + 1] = 1;
    pl[n + 16] = IPPROTO_FRAGMENT;
    pl[n + 17] = 0;
    pl[n + 24] = IPPROTO_UDP;
    pl[n + 27] = 1; /* offset 0, M flag */
    n += 32;
    n += ports(pl + n, 7, 9, 8);
    struct nlmsghdr *nlh = pkt_begin(AF_INET6, SESSION_PREFIX, 1);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);

    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), 0);
    assert_int_equal(p.protocol, IPPROTO_UDP);
    assert_true(p.has_ports);
    assert_int_equal(p.sport, 7);
    assert_int_equal(p.dport, 9);
}

static void test_ipv6_fragment_not_first(void **state) {
    (void)state;
    uint8_t pl[96];
    size_t n = ipv6(pl, IPPROTO_FRAGMENT, 8 + 8);
    memset(pl + n, 0, 8);
    pl[n] = IPPROTO_UDP;
    pl[n + 2] = 0x05; /* offset 0x05a8 >> 3 = 181 (x 8 bytes) */
    pl[n + 3] = 0xa8;
    n += 8;
    n += ports(pl + n, 1, 2, 8);
    struct nlmsghdr *nlh = pkt_begin(AF_INET6, SESSION_PREFIX, 1);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);

    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), 0);
    assert_v6_addrs(&p);
    assert_int_equal(p.protocol, IPPROTO_UDP);
    assert_false(p.has_ports);
}

static void test_ipv6_ext_limit(void **state) {
    (void)state;
    uint8_t pl[200];
    /* 9 destination-options headers: more than the walk's bound of 8 */
    size_t n = ipv6(pl, IPPROTO_DSTOPTS, 9 * 8 + 8);
    for (int i = 0; i < 9; i++) {
        memset(pl + n, 0, 8);
        pl[n] = i < 8 ? IPPROTO_DSTOPTS : IPPROTO_UDP;
        n += 8;
    }
    n += ports(pl + n, 1, 2, 8);
    struct nlmsghdr *nlh = pkt_begin(AF_INET6, SESSION_PREFIX, 1);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);

    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), 0);
    assert_int_equal(p.addr_len, 16);
    assert_int_equal(p.protocol, IPPROTO_DSTOPTS);
    assert_false(p.has_ports);
}

static void test_ipv6_icmpv6(void **state) {
    (void)state;
    uint8_t pl[96];
    size_t n = ipv6(pl, IPPROTO_ICMPV6, 8);
    memset(pl + n, 0, 8);
    pl[n] = 128; /* echo request */
    n += 8;
    struct nlmsghdr *nlh = pkt_begin(AF_INET6, SESSION_PREFIX, 4);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);

    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), 0);
    assert_int_equal(p.family, AF_INET6);
    assert_int_equal(p.protocol, IPPROTO_ICMPV6);
    assert_v6_addrs(&p);
    assert_false(p.has_ports);
    assert_int_equal(p.ip_len, 48);
}

static void test_short_l3(void **state) {
    (void)state;
    uint8_t pl[96];
    struct nflog_pkt p;

    ipv4(pl, IPPROTO_TCP, 0, 20);
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    mnl_attr_put(nlh, NFULA_PAYLOAD, 12, pl); /* 12 of the 20 header bytes */
    msg_end(nlh);
    assert_int_equal(decode_last(&p), 0);
    assert_int_equal(p.family, AF_INET);
    assert_int_equal(p.addr_len, 0);
    assert_int_equal(p.protocol, 0);
    assert_false(p.has_ports);
    assert_int_equal(p.ip_len, 0);
    assert_string_equal(p.prefix, SESSION_PREFIX); /* the metadata is still there */
    assert_int_equal(p.uid, 1000);

    setup(NULL);
    ipv6(pl, IPPROTO_TCP, 20);
    nlh = pkt_begin(AF_INET6, SESSION_PREFIX, 1);
    mnl_attr_put(nlh, NFULA_PAYLOAD, 39, pl);
    msg_end(nlh);
    assert_int_equal(decode_last(&p), 0);
    assert_int_equal(p.family, AF_INET6);
    assert_int_equal(p.addr_len, 0);
    assert_false(p.has_ports);

    /* no payload attribute at all (copy mode meta): family 0 */
    setup(NULL);
    nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    msg_end(nlh);
    assert_int_equal(decode_last(&p), 0);
    assert_int_equal(p.family, 0);
    assert_int_equal(p.addr_len, 0);
}

static void test_short_l4(void **state) {
    (void)state;
    uint8_t pl[96];
    struct nflog_pkt p;

    size_t n = ipv4(pl, IPPROTO_UDP, 0, 8);
    n += ports(pl + n, 5353, 53, 8);
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    mnl_attr_put(nlh, NFULA_PAYLOAD, 20 + 3, pl); /* 3 of the 4 port bytes */
    msg_end(nlh);
    assert_int_equal(decode_last(&p), 0);
    assert_v4_addrs(&p);
    assert_int_equal(p.protocol, IPPROTO_UDP);
    assert_false(p.has_ports);
    assert_int_equal(p.ip_len, 28);

    /* the L3 length says the packet ends before its ports */
    setup(NULL);
    n = ipv4(pl, IPPROTO_UDP, 0, 2);
    n += ports(pl + n, 5353, 53, 8);
    nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);
    assert_int_equal(decode_last(&p), 0);
    assert_int_equal(p.ip_len, 22);
    assert_false(p.has_ports);

    /* IPv6: a hop-by-hop header that claims 16 bytes, with 8 copied */
    setup(NULL);
    n = ipv6(pl, IPPROTO_HOPOPTS, 16 + 8);
    memset(pl + n, 0, 8);
    pl[n] = IPPROTO_UDP;
    pl[n + 1] = 1;
    n += 8;
    nlh = pkt_begin(AF_INET6, SESSION_PREFIX, 1);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);
    assert_int_equal(decode_last(&p), 0);
    assert_int_equal(p.addr_len, 16);
    assert_int_equal(p.protocol, IPPROTO_HOPOPTS);
    assert_false(p.has_ports);

    /* IPv6 TCP with two bytes of its header */
    setup(NULL);
    n = ipv6(pl, IPPROTO_TCP, 20);
    n += ports(pl + n, 1, 2, 20);
    nlh = pkt_begin(AF_INET6, SESSION_PREFIX, 1);
    mnl_attr_put(nlh, NFULA_PAYLOAD, 42, pl);
    msg_end(nlh);
    assert_int_equal(decode_last(&p), 0);
    assert_int_equal(p.protocol, IPPROTO_TCP);
    assert_false(p.has_ports);
}

static void test_version_mismatch(void **state) {
    (void)state;
    uint8_t pl[96];
    struct nflog_pkt p;

    size_t n = ipv6(pl, IPPROTO_TCP, 20);
    n += ports(pl + n, 1, 2, 20);
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1); /* says IPv4 */
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);
    assert_int_equal(decode_last(&p), -EBADMSG);

    /* a family without an IP payload of ours (bridge): metadata only */
    setup(NULL);
    nlh = pkt_begin(AF_BRIDGE, SESSION_PREFIX, 8);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);
    assert_int_equal(decode_last(&p), 0);
    assert_int_equal(p.family, 0);
    assert_int_equal(p.addr_len, 0);
    assert_int_equal(p.seq, 8);
}

/* ---- broken messages ----------------------------------------------------------------- */

static void test_truncated_attr(void **state) {
    (void)state;
    struct nflog_pkt p;
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    put_be32(nlh, NFULA_MARK, 0x1234); /* last attribute: 8 bytes */
    msg_end(nlh);

    /* cut the message inside the last attribute's payload, and inside its header */
    nlh->nlmsg_len -= 2;
    assert_int_equal(nflog_decode(buf, nlh->nlmsg_len, &p), -EBADMSG);
    nlh->nlmsg_len -= 4;
    assert_int_equal(nflog_decode(buf, nlh->nlmsg_len, &p), -EBADMSG);
    /* fewer bytes available than nlmsg_len says */
    nlh->nlmsg_len += 6;
    assert_int_equal(nflog_decode(buf, nlh->nlmsg_len - 1, &p), -EBADMSG);
    /* exact again */
    assert_int_equal(nflog_decode(buf, nlh->nlmsg_len, &p), 0);
}

static void test_attr_wrong_size(void **state) {
    (void)state;
    struct nflog_pkt p;
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    uint16_t two = 7;
    mnl_attr_put(nlh, NFULA_UID, sizeof(two), &two);
    msg_end(nlh);
    assert_int_equal(decode_last(&p), -EBADMSG);

    setup(NULL);
    nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    uint8_t ts[12] = {0};
    mnl_attr_put(nlh, NFULA_TIMESTAMP, sizeof(ts), ts);
    msg_end(nlh);
    assert_int_equal(decode_last(&p), -EBADMSG);

    setup(NULL);
    nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    put_time(nlh, 5, 1000000); /* usec out of range */
    msg_end(nlh);
    assert_int_equal(decode_last(&p), -EBADMSG);

    setup(NULL);
    nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    put_time(nlh, UINT64_MAX, 0); /* would overflow microseconds */
    msg_end(nlh);
    assert_int_equal(decode_last(&p), -EBADMSG);
}

static void test_attr_len_beyond_msg(void **state) {
    (void)state;
    struct nflog_pkt p;
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    struct nlattr *a = (struct nlattr *)((uint8_t *)nlh + nlh->nlmsg_len);
    put_be32(nlh, NFULA_MARK, 1);
    a->nla_len = 200; /* message ends 4 bytes after this header */
    msg_end(nlh);
    assert_int_equal(decode_last(&p), -EBADMSG);

    a->nla_len = 3; /* shorter than an attribute header */
    assert_int_equal(decode_last(&p), -EBADMSG);
}

static void test_nlmsg_len_lies(void **state) {
    (void)state;
    struct nflog_pkt p;
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    msg_end(nlh);
    uint32_t real = nlh->nlmsg_len;

    nlh->nlmsg_len = real + 64; /* longer than the bytes we have */
    assert_int_equal(nflog_decode(buf, real, &p), -EBADMSG);
    nlh->nlmsg_len = 8; /* shorter than its own header */
    assert_int_equal(nflog_decode(buf, real, &p), -EBADMSG);
    nlh->nlmsg_len = NLMSG_HDRLEN + 2; /* no room for nfgenmsg */
    assert_int_equal(nflog_decode(buf, real, &p), -EBADMSG);
    nlh->nlmsg_len = real;
    assert_int_equal(nflog_decode(buf, 10, &p), -EBADMSG); /* less than a header */
    /* a buffer with more than the message: the rest is not read */
    assert_int_equal(nflog_decode(buf, sizeof(buf), &p), 0);
    assert_string_equal(p.prefix, SESSION_PREFIX);
}

static void test_bad_version(void **state) {
    (void)state;
    struct nflog_pkt p;
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 1);
    msg_end(nlh);
    struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);
    g->version = 1;
    assert_int_equal(decode_last(&p), -EBADMSG);
}

static void test_missing_prefix(void **state) {
    (void)state;
    uint8_t pl[64];
    size_t n = ipv4(pl, IPPROTO_UDP, 0, 8);
    n += ports(pl + n, 1, 2, 8);
    struct nlmsghdr *nlh = pkt_begin(AF_INET, NULL, 3);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);

    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), 0);
    assert_string_equal(p.prefix, "");
    assert_int_equal(p.seq, 3);
    assert_true(p.has_ports);
    assert_int_equal(p.dport, 2);
    struct nflog_origin o;
    assert_int_equal(nflog_prefix_parse(p.prefix, &o), -EINVAL);
}

static void test_prefix_without_nul(void **state) {
    (void)state;
    struct nflog_pkt p;
    struct nlmsghdr *nlh = pkt_begin(AF_INET, NULL, 1);
    mnl_attr_put(nlh, NFULA_PREFIX, strlen(SESSION_PREFIX), SESSION_PREFIX);
    msg_end(nlh);
    assert_int_equal(decode_last(&p), -EBADMSG);

    /* an empty attribute has no NUL either */
    setup(NULL);
    nlh = pkt_begin(AF_INET, NULL, 1);
    mnl_attr_put(nlh, NFULA_PREFIX, 0, NULL);
    msg_end(nlh);
    assert_int_equal(decode_last(&p), -EBADMSG);
}

static void test_prefix_long(void **state) {
    (void)state;
    char longp[101];
    memset(longp, 'x', 100);
    memcpy(longp, "lyh:", 4);
    longp[100] = '\0';
    struct nlmsghdr *nlh = pkt_begin(AF_INET, longp, 1);
    msg_end(nlh);

    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), 0);
    assert_int_equal(strlen(p.prefix), 63);
    assert_memory_equal(p.prefix, longp, 63);
    struct nflog_origin o;
    assert_int_equal(nflog_prefix_parse(p.prefix, &o), -EINVAL);

    /* bytes after the NUL inside the attribute are ignored */
    setup(NULL);
    nlh = pkt_begin(AF_INET, NULL, 1);
    static const char padded[] = "lyh:nosession:D \0junk";
    mnl_attr_put(nlh, NFULA_PREFIX, sizeof(padded), padded);
    msg_end(nlh);
    assert_int_equal(decode_last(&p), 0);
    assert_string_equal(p.prefix, "lyh:nosession:D ");
}

static void test_unaligned(void **state) {
    (void)state;
    static uint8_t copy[sizeof(buf) + 1];
    uint8_t pl[64];
    size_t n = ipv4(pl, IPPROTO_TCP, 0, 20);
    n += ports(pl + n, 40000, 443, 20);
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, 77);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);
    memcpy(copy + 1, buf, used);

    struct nflog_pkt p;
    assert_int_equal(nflog_decode(copy + 1, used, &p), 0);
    assert_int_equal(p.seq, 77);
    assert_int_equal(p.dport, 443);
}

/* ---- buffers --------------------------------------------------------------------------- */

struct seen {
    int n;
    uint32_t seq[8];
    uint16_t dport[8];
};

static void on_pkt(const struct nflog_pkt *p, void *ud) {
    struct seen *s = ud;
    if (s->n < 8) {
        s->seq[s->n] = p->seq;
        s->dport[s->n] = p->dport;
    }
    s->n++;
}

static void put_udp_msg(uint32_t seq, uint16_t dport) {
    uint8_t pl[64];
    size_t n = ipv4(pl, IPPROTO_UDP, 0, 8);
    n += ports(pl + n, 40000, dport, 8);
    struct nlmsghdr *nlh = pkt_begin(AF_INET, SESSION_PREFIX, seq);
    mnl_attr_put(nlh, NFULA_PAYLOAD, n, pl);
    msg_end(nlh);
}

static void put_done(void) {
    struct nlmsghdr *nlh = msg_begin(NLMSG_DONE, 0);
    struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
    g->res_id = htons(7);
    msg_end(nlh);
}

static void put_error(int error) {
    struct nlmsghdr *nlh = msg_begin(NLMSG_ERROR, 0);
    struct nlmsgerr *e = mnl_nlmsg_put_extra_header(nlh, sizeof(*e));
    e->error = error;
    msg_end(nlh);
}

static void test_buf_three(void **state) {
    (void)state;
    struct seen s = {0};
    uint64_t bad = 0;
    put_udp_msg(10, 53);
    put_udp_msg(11, 80);
    put_udp_msg(12, 443);
    put_done(); /* the kernel ends a batch of more than one with NLMSG_DONE */

    assert_int_equal(nflog_decode_buf_count(buf, used, on_pkt, &s, &bad), 3);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.seq[0], 10);
    assert_int_equal(s.seq[1], 11);
    assert_int_equal(s.seq[2], 12);
    assert_int_equal(s.dport[0], 53);
    assert_int_equal(s.dport[1], 80);
    assert_int_equal(s.dport[2], 443);
    assert_int_equal(bad, 0);
    /* without a callback, the count is the same */
    assert_int_equal(nflog_decode_buf(buf, used, NULL, NULL), 3);
}

static void test_buf_skips_bad(void **state) {
    (void)state;
    struct seen s = {0};
    uint64_t bad = 0;
    put_udp_msg(1, 53);
    struct nlmsghdr *nlh = pkt_begin(AF_INET, NULL, 2);
    mnl_attr_put(nlh, NFULA_PREFIX, 3, "abc"); /* no NUL: this one is bad */
    msg_end(nlh);
    put_udp_msg(3, 54);

    assert_int_equal(nflog_decode_buf_count(buf, used, on_pkt, &s, &bad), 2);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.seq[0], 1);
    assert_int_equal(s.seq[1], 3);
    assert_int_equal(bad, 1);
}

static void test_buf_framing_broken(void **state) {
    (void)state;
    struct seen s = {0};
    uint64_t bad = 0;
    put_udp_msg(1, 53);
    put_udp_msg(2, 54);
    struct nlmsghdr *third = (struct nlmsghdr *)(buf + used);
    put_udp_msg(3, 55);
    third->nlmsg_len = (uint32_t)sizeof(buf); /* beyond the buffer */

    assert_int_equal(nflog_decode_buf_count(buf, used, on_pkt, &s, &bad), -EBADMSG);
    assert_int_equal(s.n, 2); /* the two before the break were delivered */
    assert_int_equal(s.seq[1], 2);
    assert_int_equal(bad, 1);

    /* trailing bytes that cannot be a message */
    setup(NULL);
    s.n = 0;
    bad = 0;
    put_udp_msg(4, 53);
    used += 8;
    assert_int_equal(nflog_decode_buf_count(buf, used, on_pkt, &s, &bad), -EBADMSG);
    assert_int_equal(s.n, 1);
    assert_int_equal(bad, 1);

    /* a final message without its padding is fine */
    setup(NULL);
    s.n = 0;
    struct nlmsghdr *nlh = pkt_begin(AF_INET, NULL, 5);
    uint8_t three[3] = {1, 2, 3};
    mnl_attr_put(nlh, NFULA_HWHEADER, sizeof(three), three);
    nlh->nlmsg_len -= 1; /* mnl padded the attribute; drop the pad byte */
    assert_int_equal(nflog_decode_buf(buf, nlh->nlmsg_len, on_pkt, &s), 1);
    assert_int_equal(s.seq[0], 5);
}

static void test_buf_error(void **state) {
    (void)state;
    struct seen s = {0};
    uint64_t bad = 0;
    put_udp_msg(1, 53);
    put_error(0); /* an ACK: skipped */
    put_error(-ENOENT);
    put_udp_msg(2, 54);

    assert_int_equal(nflog_decode_buf_count(buf, used, on_pkt, &s, &bad), -ENOENT);
    assert_int_equal(s.n, 2); /* the walk went on past the error */
    assert_int_equal(bad, 0);

    /* a short NLMSG_ERROR is counted bad, not fatal */
    setup(NULL);
    s.n = 0;
    struct nlmsghdr *nlh = msg_begin(NLMSG_ERROR, 0);
    int e = -EPERM;
    memcpy(mnl_nlmsg_put_extra_header(nlh, sizeof(e)), &e, sizeof(e));
    msg_end(nlh);
    put_udp_msg(3, 55);
    assert_int_equal(nflog_decode_buf_count(buf, used, on_pkt, &s, &bad), 1);
    assert_int_equal(bad, 1);

    /* nflog_decode on an error message: not a packet */
    setup(NULL);
    put_error(-ENOENT);
    struct nflog_pkt p;
    assert_int_equal(decode_last(&p), -ENOMSG);
}

static void test_done(void **state) {
    (void)state;
    struct nflog_pkt p;
    struct seen s = {0};
    put_done();
    assert_int_equal(decode_last(&p), -ENOMSG);
    assert_int_equal(nflog_decode_buf(buf, used, on_pkt, &s), 0);
    assert_int_equal(s.n, 0);

    /* another nfnetlink subsystem's message (conntrack): not ours */
    setup(NULL);
    struct nlmsghdr *nlh = msg_begin((NFNL_SUBSYS_CTNETLINK << 8) | 0, 0);
    struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
    g->nfgen_family = AF_INET;
    msg_end(nlh);
    assert_int_equal(decode_last(&p), -ENOMSG);

    assert_int_equal(nflog_decode_buf(buf, 0, on_pkt, &s), 0);
}

/* ---- prefixes -------------------------------------------------------------------------- */

static void test_prefix_valid(void **state) {
    (void)state;
    struct nflog_origin o;

    assert_int_equal(nflog_prefix_parse("lyh:0123456789abcdef:A ", &o), 0);
    assert_int_equal(o.kind, NFLOG_ORIGIN_SESSION);
    assert_string_equal(o.session, "0123456789abcdef");
    assert_string_equal(o.chain, "");
    assert_int_equal(o.verdict, 1);

    assert_int_equal(nflog_prefix_parse("lyh:fedcba9876543210:D", &o), 0);
    assert_int_equal(o.kind, NFLOG_ORIGIN_SESSION);
    assert_string_equal(o.session, "fedcba9876543210");
    assert_int_equal(o.verdict, 2);

    assert_int_equal(nflog_prefix_parse("lyh:LYH-1000:A ", &o), 0);
    assert_int_equal(o.kind, NFLOG_ORIGIN_UID);
    assert_string_equal(o.chain, "LYH-1000");
    assert_string_equal(o.session, "");
    assert_int_equal(o.uid, 1000);
    assert_int_equal(o.verdict, 1);

    assert_int_equal(nflog_prefix_parse("lyh:LYH-1000:D", &o), 0);
    assert_int_equal(o.verdict, 2);

    assert_int_equal(nflog_prefix_parse("lyh:LYH-U-1000:D ", &o), 0);
    assert_int_equal(o.kind, NFLOG_ORIGIN_UID);
    assert_string_equal(o.chain, "LYH-U-1000");
    assert_int_equal(o.uid, 1000);
    assert_int_equal(o.verdict, 2);

    assert_int_equal(nflog_prefix_parse("lyh:LYH-U-65534:A", &o), 0);
    assert_string_equal(o.chain, "LYH-U-65534");
    assert_int_equal(o.uid, 65534);
    assert_int_equal(o.verdict, 1);

    assert_int_equal(nflog_prefix_parse("lyh:LYH-0:D ", &o), 0);
    assert_string_equal(o.chain, "LYH-0");
    assert_int_equal(o.uid, 0);

    assert_int_equal(nflog_prefix_parse("lyh:LYH-U-4294967294:A ", &o), 0);
    assert_string_equal(o.chain, "LYH-U-4294967294");
    assert_int_equal(o.uid, 4294967294u);

    assert_int_equal(nflog_prefix_parse("lyh:nosession:D ", &o), 0);
    assert_int_equal(o.kind, NFLOG_ORIGIN_NOSESSION);
    assert_string_equal(o.session, "");
    assert_string_equal(o.chain, "");
    assert_int_equal(o.verdict, 2);

    assert_int_equal(nflog_prefix_parse("lyh:nosession:D", &o), 0);
    assert_int_equal(o.kind, NFLOG_ORIGIN_NOSESSION);
}

static void test_prefix_invalid(void **state) {
    (void)state;
    static const char *const bad[] = {
        "",
        "lyh:",
        "lyh::A",
        "lyh:A",
        "lyh:0123456789ABCDEF:A ",   /* upper-case hex */
        "lyh:0123456789abcdeF:A",
        "lyh:0123456789abcde:A ",    /* 15 */
        "lyh:0123456789abcdef0:A ",  /* 17 */
        "lyh:0123456789abcdeg:A ",   /* not hex */
        "lyh:0123456789abcdef:X ",   /* unknown verdict */
        "lyh:0123456789abcdef:a ",
        "lyh:0123456789abcdef:AD",
        "lyh:0123456789abcdef:",
        "lyh:0123456789abcdef",
        "lyh:0123456789abcdef:A  ",  /* two spaces */
        "lyh:0123456789abcdef:A\t",
        "lyh:0123456789abcdef:A\n",
        " lyh:0123456789abcdef:A",
        "0123456789abcdef:A ",       /* no "lyh:" */
        "LYH:0123456789abcdef:A ",
        "lyx:0123456789abcdef:A ",
        "lyh;0123456789abcdef:A ",
        "lyh:0123456789abcdef;A ",
        "lyh:LYH-01000:A ",          /* leading zero */
        "lyh:LYH-U-00:A ",
        "lyh:LYH-4294967296:A ",     /* overflow */
        "lyh:LYH-99999999999:A ",
        "lyh:LYH-4294967295:A ",     /* (uid_t)-1 */
        "lyh:LYH-:A ",
        "lyh:LYH-U-:A ",
        "lyh:LYH--5:A ",
        "lyh:LYH-+5:A ",
        "lyh:LYH- 5:A ",
        "lyh:LYH-U-1000x:A ",
        "lyh:LYH-1000:1000:A ",
        "lyh:lyh-1000:A ",
        "lyh:LYH-u-1000:A ",
        "lyh:LYH-X-1000:A ",
        "lyh:nosession:A ",          /* the catch-all only rejects */
        "lyh:NOSESSION:D ",
        "lyh:nosessio:D ",
        "lyh:s-0123456789abcdef:A ", /* the chain name, not the id */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct nflog_origin o = {.kind = 99, .uid = 42, .verdict = 7};
        if (nflog_prefix_parse(bad[i], &o) != -EINVAL)
            fail_msg("accepted \"%s\"", bad[i]);
        /* ret is untouched on failure */
        assert_int_equal(o.kind, 99);
        assert_int_equal(o.uid, 42);
        assert_int_equal(o.verdict, 7);
    }
    /* 64 characters or more: never one of ours, and not read past 64 */
    char longp[80];
    memset(longp, 'a', sizeof(longp));
    memcpy(longp, "lyh:LYH-1000:A", 14);
    struct nflog_origin o;
    assert_int_equal(nflog_prefix_parse(longp, &o), -EINVAL); /* no NUL within 64 */
    assert_int_equal(nflog_prefix_parse(NULL, &o), -EINVAL);
    assert_int_equal(nflog_prefix_parse("lyh:nosession:D", NULL), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_ipv4_tcp, setup),
        cmocka_unit_test_setup(test_ipv4_udp, setup),
        cmocka_unit_test_setup(test_ipv4_icmp, setup),
        cmocka_unit_test_setup(test_ipv4_options, setup),
        cmocka_unit_test_setup(test_ipv4_bad_ihl, setup),
        cmocka_unit_test_setup(test_ipv4_ihl_beyond_copy, setup),
        cmocka_unit_test_setup(test_ipv4_fragments, setup),
        cmocka_unit_test_setup(test_ipv6_tcp, setup),
        cmocka_unit_test_setup(test_ipv6_udp_hopopts, setup),
        cmocka_unit_test_setup(test_ipv6_ext_chain, setup),
        cmocka_unit_test_setup(test_ipv6_fragment_not_first, setup),
        cmocka_unit_test_setup(test_ipv6_ext_limit, setup),
        cmocka_unit_test_setup(test_ipv6_icmpv6, setup),
        cmocka_unit_test_setup(test_short_l3, setup),
        cmocka_unit_test_setup(test_short_l4, setup),
        cmocka_unit_test_setup(test_version_mismatch, setup),
        cmocka_unit_test_setup(test_truncated_attr, setup),
        cmocka_unit_test_setup(test_attr_wrong_size, setup),
        cmocka_unit_test_setup(test_attr_len_beyond_msg, setup),
        cmocka_unit_test_setup(test_nlmsg_len_lies, setup),
        cmocka_unit_test_setup(test_bad_version, setup),
        cmocka_unit_test_setup(test_missing_prefix, setup),
        cmocka_unit_test_setup(test_prefix_without_nul, setup),
        cmocka_unit_test_setup(test_prefix_long, setup),
        cmocka_unit_test_setup(test_unaligned, setup),
        cmocka_unit_test_setup(test_buf_three, setup),
        cmocka_unit_test_setup(test_buf_skips_bad, setup),
        cmocka_unit_test_setup(test_buf_framing_broken, setup),
        cmocka_unit_test_setup(test_buf_error, setup),
        cmocka_unit_test_setup(test_done, setup),
        cmocka_unit_test(test_prefix_valid),
        cmocka_unit_test(test_prefix_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
