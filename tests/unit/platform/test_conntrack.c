/* Unit tests for the conntrack entry check of platform/linux/conntrack.c
 * (ct_is_forwarder_flow): which entries belong to a DNS forwarder's port,
 * on hand-built ctnetlink attributes, and malformed ones refused. Opens no
 * socket; the deletion itself is exercised by tests/e2e/dns.sh §8. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <netinet/in.h>
#include <string.h>

#include "platform/linux/conntrack.h"

#define PORT 40123

static _Alignas(struct nlmsghdr) char buf[4096];

struct tuple {
    int family;
    const char *src;
    uint8_t proto;
    uint16_t sport; /* 0: no port attributes (ICMP) */
};

static void put_tuple(struct nlmsghdr *nlh, uint16_t type, const struct tuple *t) {
    struct nlattr *tu = mnl_attr_nest_start(nlh, type);
    struct nlattr *ip = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
    uint8_t a[16] = {0};
    assert_int_equal(inet_pton(t->family, t->src, a), 1);
    if (t->family == AF_INET)
        mnl_attr_put(nlh, CTA_IP_V4_SRC, 4, a);
    else
        mnl_attr_put(nlh, CTA_IP_V6_SRC, 16, a);
    mnl_attr_nest_end(nlh, ip);
    struct nlattr *pr = mnl_attr_nest_start(nlh, CTA_TUPLE_PROTO);
    mnl_attr_put_u8(nlh, CTA_PROTO_NUM, t->proto);
    if (t->sport) {
        mnl_attr_put_u16(nlh, CTA_PROTO_SRC_PORT, htons(t->sport));
        mnl_attr_put_u16(nlh, CTA_PROTO_DST_PORT, htons(53));
    }
    mnl_attr_nest_end(nlh, pr);
    mnl_attr_nest_end(nlh, tu);
}

/* An entry as the dump sends it: original tuple from the agent, reply tuple
 * from `reply`. Returns the attributes' length; they start at attrs_of(). */
static size_t entry(const struct tuple *reply) {
    memset(buf, 0, sizeof(buf));
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    struct tuple orig = {reply->family, reply->family == AF_INET ? "10.77.0.1" : "fd00::1",
                         reply->proto, 5353};
    put_tuple(nlh, CTA_TUPLE_ORIG, &orig);
    put_tuple(nlh, CTA_TUPLE_REPLY, reply);
    mnl_attr_put_u32(nlh, CTA_MARK, htonl(0x80000000u));
    mnl_attr_put_u32(nlh, CTA_ID, htonl(7));
    return nlh->nlmsg_len - MNL_NLMSG_HDRLEN;
}

static const void *attrs_of(void) { return buf + MNL_NLMSG_HDRLEN; }

static void test_forwarder_flows(void **state) {
    (void)state;
    static const struct tuple yes[] = {
        {AF_INET, "127.0.0.1", IPPROTO_UDP, PORT},
        {AF_INET, "127.0.0.1", IPPROTO_TCP, PORT},
        {AF_INET6, "::1", IPPROTO_UDP, PORT},
        {AF_INET6, "::1", IPPROTO_TCP, PORT},
    };
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        size_t n = entry(&yes[i]);
        assert_int_equal(ct_is_forwarder_flow(attrs_of(), n, PORT), 1);
    }
}

static void test_other_flows(void **state) {
    (void)state;
    static const struct tuple no[] = {
        {AF_INET, "127.0.0.1", IPPROTO_UDP, PORT + 1}, /* another session's forwarder */
        {AF_INET, "127.0.0.2", IPPROTO_UDP, PORT},     /* not where forwarders listen */
        {AF_INET, "8.8.8.8", IPPROTO_UDP, PORT},       /* a resolver's reply */
        {AF_INET6, "::2", IPPROTO_TCP, PORT},
        {AF_INET, "127.0.0.1", IPPROTO_SCTP, PORT},    /* not UDP or TCP */
        {AF_INET, "127.0.0.1", IPPROTO_ICMP, 0},       /* no ports at all */
    };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        size_t n = entry(&no[i]);
        assert_int_equal(ct_is_forwarder_flow(attrs_of(), n, PORT), 0);
    }
    /* no reply tuple at all */
    assert_int_equal(ct_is_forwarder_flow(attrs_of(), 0, PORT), 0);
}

/* A reply tuple 127.0.0.1, UDP, PORT whose address takes alen bytes (of
 * 127.0.0.1) and whose port plen (2 or 4); returns the attributes' length. */
static size_t odd_reply(size_t alen, size_t plen) {
    static const uint8_t lo[4] = {127, 0, 0, 1};
    memset(buf, 0, sizeof(buf));
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
    struct nlattr *tu = mnl_attr_nest_start(nlh, CTA_TUPLE_REPLY);
    struct nlattr *ip = mnl_attr_nest_start(nlh, CTA_TUPLE_IP);
    mnl_attr_put(nlh, CTA_IP_V4_SRC, alen, lo);
    mnl_attr_nest_end(nlh, ip);
    struct nlattr *pr = mnl_attr_nest_start(nlh, CTA_TUPLE_PROTO);
    mnl_attr_put_u8(nlh, CTA_PROTO_NUM, IPPROTO_UDP);
    if (plen == 2)
        mnl_attr_put_u16(nlh, CTA_PROTO_SRC_PORT, htons(PORT));
    else
        mnl_attr_put_u32(nlh, CTA_PROTO_SRC_PORT, htonl(PORT));
    mnl_attr_nest_end(nlh, pr);
    mnl_attr_nest_end(nlh, tu);
    return nlh->nlmsg_len - MNL_NLMSG_HDRLEN;
}

static void test_malformed(void **state) {
    (void)state;
    static const struct tuple t = {AF_INET, "127.0.0.1", IPPROTO_UDP, PORT};
    size_t n = entry(&t);
    /* every cut of the attributes: a clean refusal or "not ours", never a read
     * past the end (ASan watches); "ours" only once the reply tuple is whole
     * (the mark and the id, 8 bytes each, come after it) */
    for (size_t cut = 1; cut < n; cut++) {
        int r = ct_is_forwarder_flow(attrs_of(), cut, PORT);
        if (cut == n - 16 || cut == n - 8)
            assert_int_equal(r, 1);
        else
            assert_true(r == 0 || r == -EBADMSG);
    }
    /* a source address or a port of the wrong length */
    assert_int_equal(ct_is_forwarder_flow(attrs_of(), odd_reply(3, 2), PORT), -EBADMSG);
    assert_int_equal(ct_is_forwarder_flow(attrs_of(), odd_reply(4, 4), PORT), -EBADMSG);
    assert_int_equal(ct_is_forwarder_flow(attrs_of(), odd_reply(4, 2), PORT), 1);
    /* an attribute whose length runs past the bytes there are */
    memset(buf, 0, sizeof(buf));
    struct nlattr *a = (struct nlattr *)(void *)(buf + MNL_NLMSG_HDRLEN);
    a->nla_type = CTA_TUPLE_REPLY;
    a->nla_len = 200;
    assert_int_equal(ct_is_forwarder_flow(a, 64, PORT), -EBADMSG);
}

static void test_forget_needs_a_port(void **state) {
    (void)state;
    unsigned n = 99;
    assert_int_equal(ct_forget_forwarder(0, 0x80000000u, &n), -EINVAL);
    assert_int_equal(n, 99);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forwarder_flows),
        cmocka_unit_test(test_other_flows),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_forget_needs_a_port),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
