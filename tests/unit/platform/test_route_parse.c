/* Unit tests for the rtnetlink answer parser of platform/linux/route.c
 * (route_parse_reply): sequence and port id matching, kernel errors,
 * malformed messages and multipath next hops, on hand-built datagrams.
 * Needs no privileges and opens no socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>

#include "platform/linux/route.h"

#define SEQ 77
#define PID 4242

static _Alignas(struct nlmsghdr) char buf[16384];
static size_t used;

static int setup(void **state) {
    (void)state;
    memset(buf, 0, sizeof(buf));
    used = 0;
    return 0;
}

static struct nlmsghdr *msg_begin(uint16_t type, uint32_t seq, uint32_t pid) {
    assert_true(used + 4096 <= sizeof(buf));
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf + used);
    nlh->nlmsg_type = type;
    nlh->nlmsg_seq = seq;
    nlh->nlmsg_pid = pid;
    return nlh;
}

static void msg_end(struct nlmsghdr *nlh) { used += MNL_ALIGN(nlh->nlmsg_len); }

static struct nlmsghdr *route_begin(uint32_t seq, uint32_t pid, int family, unsigned type) {
    struct nlmsghdr *nlh = msg_begin(RTM_NEWROUTE, seq, pid);
    struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
    rtm->rtm_family = (unsigned char)family;
    rtm->rtm_type = (unsigned char)type;
    rtm->rtm_table = RT_TABLE_MAIN;
    rtm->rtm_dst_len = family == AF_INET ? 32 : 128;
    return nlh;
}

static void put_route(uint32_t seq, uint32_t pid, int family, unsigned type, uint32_t oif) {
    struct nlmsghdr *nlh = route_begin(seq, pid, family, type);
    struct in_addr dst = {htonl(1)};
    mnl_attr_put(nlh, RTA_DST, sizeof(dst), &dst);
    mnl_attr_put_u32(nlh, RTA_TABLE, RT_TABLE_MAIN);
    if (oif)
        mnl_attr_put_u32(nlh, RTA_OIF, oif);
    msg_end(nlh);
}

static void put_error(uint32_t seq, uint32_t pid, int error) {
    struct nlmsghdr *nlh = msg_begin(NLMSG_ERROR, seq, pid);
    struct nlmsgerr *e = mnl_nlmsg_put_extra_header(nlh, sizeof(*e));
    e->error = error;
    msg_end(nlh);
}

static int parse(int family, struct route_answer *a) {
    return route_parse_reply(buf, used, SEQ, PID, family, a);
}

static void test_route_oif(void **state) {
    (void)state;
    struct route_answer a;
    put_route(SEQ, PID, AF_INET, RTN_UNICAST, 5);
    assert_int_equal(parse(AF_INET, &a), 0);
    assert_int_equal(a.error, 0);
    assert_int_equal(a.type, RTN_UNICAST);
    assert_int_equal(a.oif, 5);
    assert_int_equal(a.n_paths, 0);
    assert_false(a.paths_truncated);
}

static void test_route_v6(void **state) {
    (void)state;
    struct route_answer a;
    put_route(SEQ, PID, AF_INET6, RTN_UNICAST, 9);
    assert_int_equal(parse(AF_INET6, &a), 0);
    assert_int_equal(a.oif, 9);
    /* A route of the other family is not our answer. */
    assert_int_equal(parse(AF_INET, &a), -EBADMSG);
}

static void test_kernel_errors(void **state) {
    (void)state;
    const int errs[] = {-ENETUNREACH, -EHOSTUNREACH, -EACCES, -EINVAL, -EOPNOTSUPP};
    for (size_t k = 0; k < sizeof(errs) / sizeof(errs[0]); k++) {
        struct route_answer a = {.oif = 99};
        setup(NULL);
        put_error(SEQ, PID, errs[k]);
        assert_int_equal(parse(AF_INET6, &a), 0);
        assert_int_equal(a.error, errs[k]);
        assert_int_equal(a.oif, 0);
    }
}

static void test_ack_and_bogus_errors(void **state) {
    (void)state;
    struct route_answer a = {.oif = 123};
    put_error(SEQ, PID, 0); /* an ACK: we never ask for one */
    assert_int_equal(parse(AF_INET, &a), -EPROTO);
    setup(NULL);
    put_error(SEQ, PID, 5);
    assert_int_equal(parse(AF_INET, &a), -EPROTO);
    setup(NULL);
    put_error(SEQ, PID, -5000);
    assert_int_equal(parse(AF_INET, &a), -EPROTO);
    assert_int_equal(a.oif, 123); /* untouched on failure */
}

static void test_truncated_error(void **state) {
    (void)state;
    struct route_answer a;
    struct nlmsghdr *nlh = msg_begin(NLMSG_ERROR, SEQ, PID);
    int32_t *e = mnl_nlmsg_put_extra_header(nlh, sizeof(*e)); /* nlmsgerr without its msg */
    *e = -ENETUNREACH;
    msg_end(nlh);
    assert_int_equal(parse(AF_INET, &a), -EBADMSG);
}

static void test_foreign_messages_skipped(void **state) {
    (void)state;
    struct route_answer a;
    /* Only stale or foreign messages: nothing for us yet. */
    put_route(SEQ - 1, PID, AF_INET, RTN_UNICAST, 1);
    put_route(SEQ, PID + 1, AF_INET, RTN_UNICAST, 2);
    put_error(SEQ, 0, -ENETUNREACH);
    assert_int_equal(parse(AF_INET, &a), -EAGAIN);
    /* Our answer after them in the same datagram. */
    put_route(SEQ, PID, AF_INET, RTN_UNICAST, 3);
    assert_int_equal(parse(AF_INET, &a), 0);
    assert_int_equal(a.oif, 3);
}

static void test_noop_skipped(void **state) {
    (void)state;
    struct route_answer a;
    msg_end(msg_begin(NLMSG_NOOP, SEQ, PID));
    put_route(SEQ, PID, AF_INET, RTN_UNICAST, 4);
    assert_int_equal(parse(AF_INET, &a), 0);
    assert_int_equal(a.oif, 4);
}

static void test_unexpected_type(void **state) {
    (void)state;
    struct route_answer a;
    struct nlmsghdr *nlh = msg_begin(RTM_NEWLINK, SEQ, PID);
    mnl_nlmsg_put_extra_header(nlh, sizeof(struct rtmsg));
    msg_end(nlh);
    assert_int_equal(parse(AF_INET, &a), -EPROTO);
    setup(NULL);
    msg_end(msg_begin(NLMSG_DONE, SEQ, PID));
    assert_int_equal(parse(AF_INET, &a), -EPROTO);
}

static void test_short_rtmsg(void **state) {
    (void)state;
    struct route_answer a;
    struct nlmsghdr *nlh = msg_begin(RTM_NEWROUTE, SEQ, PID);
    mnl_nlmsg_put_extra_header(nlh, 4);
    msg_end(nlh);
    assert_int_equal(parse(AF_INET, &a), -EBADMSG);
}

static void test_bad_oif_length(void **state) {
    (void)state;
    struct route_answer a;
    struct nlmsghdr *nlh = route_begin(SEQ, PID, AF_INET, RTN_UNICAST);
    mnl_attr_put_u16(nlh, RTA_OIF, 3);
    msg_end(nlh);
    assert_int_equal(parse(AF_INET, &a), -EBADMSG);
}

static void test_attr_overruns_message(void **state) {
    (void)state;
    struct route_answer a;
    struct nlmsghdr *nlh = route_begin(SEQ, PID, AF_INET, RTN_UNICAST);
    mnl_attr_put_u32(nlh, RTA_OIF, 3);
    struct nlattr *last = (struct nlattr *)((char *)nlh + nlh->nlmsg_len - MNL_ALIGN(8));
    last->nla_len = 64; /* claims more than the message holds */
    msg_end(nlh);
    assert_int_equal(parse(AF_INET, &a), -EBADMSG);

    /* A zero-length attribute would loop forever in a careless parser. */
    setup(NULL);
    nlh = route_begin(SEQ, PID, AF_INET, RTN_UNICAST);
    mnl_attr_put_u32(nlh, RTA_OIF, 3);
    last = (struct nlattr *)((char *)nlh + nlh->nlmsg_len - MNL_ALIGN(8));
    last->nla_len = 0;
    msg_end(nlh);
    assert_int_equal(parse(AF_INET, &a), -EBADMSG);
}

static void test_trailing_garbage(void **state) {
    (void)state;
    struct route_answer a;
    put_route(SEQ - 1, PID, AF_INET, RTN_UNICAST, 1);
    used += 8; /* bytes that are not a message */
    assert_int_equal(parse(AF_INET, &a), -EBADMSG);
}

static void test_message_longer_than_datagram(void **state) {
    (void)state;
    struct route_answer a;
    put_route(SEQ, PID, AF_INET, RTN_UNICAST, 1);
    assert_int_equal(route_parse_reply(buf, used - 4, SEQ, PID, AF_INET, &a), -EBADMSG);
    assert_int_equal(route_parse_reply(buf, 10, SEQ, PID, AF_INET, &a), -EBADMSG);
    assert_int_equal(route_parse_reply(buf, 0, SEQ, PID, AF_INET, &a), -EAGAIN);
}

static void test_bad_arguments(void **state) {
    (void)state;
    struct route_answer a;
    put_route(SEQ, PID, AF_INET, RTN_UNICAST, 1);
    assert_int_equal(route_parse_reply(buf + 1, used - 1, SEQ, PID, AF_INET, &a), -EINVAL);
    assert_int_equal(route_parse_reply(NULL, used, SEQ, PID, AF_INET, &a), -EINVAL);
    assert_int_equal(route_parse_reply(buf, used, SEQ, PID, AF_INET, NULL), -EINVAL);
    assert_int_equal(route_parse_reply(buf, used, SEQ, PID, AF_UNIX, &a), -EAFNOSUPPORT);
}

/* RTA_MULTIPATH: a list of rtnexthop, each optionally followed by attributes. */
struct nh_spec {
    int ifindex;
    unsigned flags;
    bool with_gateway;
};

static void put_multipath(const struct nh_spec *nhs, size_t n, size_t corrupt_len_at) {
    _Alignas(struct rtnexthop) char mp[2048] = {0};
    size_t off = 0;
    for (size_t k = 0; k < n; k++) {
        struct rtnexthop *nh = (struct rtnexthop *)(mp + off);
        nh->rtnh_len = sizeof(*nh);
        nh->rtnh_flags = (unsigned char)nhs[k].flags;
        nh->rtnh_ifindex = nhs[k].ifindex;
        if (nhs[k].with_gateway) {
            struct nlattr *gw = (struct nlattr *)(mp + off + sizeof(*nh));
            gw->nla_type = RTA_GATEWAY;
            gw->nla_len = 8;
            nh->rtnh_len += 8;
        }
        if (k + 1 == corrupt_len_at)
            nh->rtnh_len = 200;
        off += RTNH_ALIGN(sizeof(*nh) + (nhs[k].with_gateway ? 8 : 0));
        assert_true(off < sizeof(mp));
    }
    struct nlmsghdr *nlh = route_begin(SEQ, PID, AF_INET, RTN_UNICAST);
    mnl_attr_put(nlh, RTA_MULTIPATH, off, mp);
    msg_end(nlh);
}

static void test_multipath(void **state) {
    (void)state;
    struct route_answer a;
    const struct nh_spec nhs[] = {
        {.ifindex = 3, .with_gateway = true},
        {.ifindex = 2, .flags = RTNH_F_DEAD, .with_gateway = true}, /* never used */
        {.ifindex = 4},
    };
    put_multipath(nhs, 3, 0);
    assert_int_equal(parse(AF_INET, &a), 0);
    assert_int_equal(a.n_paths, 2);
    assert_int_equal(a.path_oif[0], 3);
    assert_int_equal(a.path_oif[1], 4);
    assert_false(a.paths_truncated);
    assert_int_equal(a.oif, 0);
}

static void test_multipath_truncated(void **state) {
    (void)state;
    struct route_answer a;
    struct nh_spec nhs[ROUTE_MAX_PATHS + 4];
    for (size_t k = 0; k < ROUTE_MAX_PATHS + 4; k++)
        nhs[k] = (struct nh_spec){.ifindex = (int)k + 1};
    put_multipath(nhs, ROUTE_MAX_PATHS + 4, 0);
    assert_int_equal(parse(AF_INET, &a), 0);
    assert_int_equal(a.n_paths, ROUTE_MAX_PATHS);
    assert_true(a.paths_truncated);
}

static void test_multipath_malformed(void **state) {
    (void)state;
    struct route_answer a;
    const struct nh_spec nhs[] = {{.ifindex = 3}, {.ifindex = 4}};
    put_multipath(nhs, 2, 2); /* second next hop claims 200 bytes */
    assert_int_equal(parse(AF_INET, &a), -EBADMSG);

    setup(NULL);
    struct nlmsghdr *nlh = route_begin(SEQ, PID, AF_INET, RTN_UNICAST);
    char junk[5] = {0};
    mnl_attr_put(nlh, RTA_MULTIPATH, sizeof(junk), junk); /* shorter than an rtnexthop + 1 */
    msg_end(nlh);
    assert_int_equal(parse(AF_INET, &a), -EBADMSG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_route_oif, setup),
        cmocka_unit_test_setup(test_route_v6, setup),
        cmocka_unit_test_setup(test_kernel_errors, setup),
        cmocka_unit_test_setup(test_ack_and_bogus_errors, setup),
        cmocka_unit_test_setup(test_truncated_error, setup),
        cmocka_unit_test_setup(test_foreign_messages_skipped, setup),
        cmocka_unit_test_setup(test_noop_skipped, setup),
        cmocka_unit_test_setup(test_unexpected_type, setup),
        cmocka_unit_test_setup(test_short_rtmsg, setup),
        cmocka_unit_test_setup(test_bad_oif_length, setup),
        cmocka_unit_test_setup(test_attr_overruns_message, setup),
        cmocka_unit_test_setup(test_trailing_garbage, setup),
        cmocka_unit_test_setup(test_message_longer_than_datagram, setup),
        cmocka_unit_test_setup(test_bad_arguments, setup),
        cmocka_unit_test_setup(test_multipath, setup),
        cmocka_unit_test_setup(test_multipath_truncated, setup),
        cmocka_unit_test_setup(test_multipath_malformed, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
