/* Routing-socket messages of the Darwin route preflight (platform/darwin/
 * rtmsg.c), compiled on Linux against the stub layouts (-DLYH_DARWIN_STUBS):
 * the request's bytes, and the answer found among other messages, with every
 * malformed length refused. The layouts are Apple's (stub/apple.h); that the
 * kernel answers as modelled here is checked on a Mac only. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "platform/darwin/darwin_sys.h"
#include "platform/darwin/rtmsg.h"

static void test_build_v4(void **state) {
    (void)state;
    uint8_t buf[RTMSG_BUF_MAX];
    size_t len = 0;
    struct in_addr a;
    inet_pton(AF_INET, "128.0.0.1", &a);

    assert_int_equal(rtmsg_build_get(AF_INET, &a, 42, buf, sizeof(buf), &len), 0);
    struct rt_msghdr rtm;
    memcpy(&rtm, buf, sizeof(rtm));
    /* header + sockaddr_in (16) + sockaddr_dl (20, padded to 20) */
    assert_int_equal(len, sizeof(rtm) + 16 + 20);
    assert_int_equal(rtm.rtm_msglen, len);
    assert_int_equal(rtm.rtm_version, RTM_VERSION);
    assert_int_equal(rtm.rtm_type, RTM_GET);
    assert_int_equal(rtm.rtm_addrs, RTA_DST | RTA_IFP);
    assert_int_equal(rtm.rtm_seq, 42);
    const uint8_t *sa = buf + sizeof(rtm);
    assert_int_equal(sa[0], 16);
    assert_int_equal(sa[1], AF_INET);
    assert_memory_equal(sa + 4, &a, 4);
    const uint8_t *dl = sa + 16;
    assert_int_equal(dl[0], sizeof(struct sockaddr_dl));
    assert_int_equal(dl[1], AF_LINK);

    /* too small a buffer, unknown family */
    assert_int_equal(rtmsg_build_get(AF_INET, &a, 1, buf, len - 1, &len), -ENOSPC);
    assert_int_equal(rtmsg_build_get(AF_UNIX, &a, 1, buf, sizeof(buf), &len), -EAFNOSUPPORT);
}

static void test_build_v6(void **state) {
    (void)state;
    uint8_t buf[RTMSG_BUF_MAX];
    size_t len = 0;
    struct in6_addr a;
    inet_pton(AF_INET6, "8000::", &a);

    assert_int_equal(rtmsg_build_get(AF_INET6, &a, 7, buf, sizeof(buf), &len), 0);
    assert_int_equal(len, sizeof(struct rt_msghdr) + 28 + 20);
    const uint8_t *sa = buf + sizeof(struct rt_msghdr);
    assert_int_equal(sa[0], 28);
    assert_int_equal(sa[1], (uint8_t)AF_INET6);
    assert_memory_equal(sa + 8, &a, 16);
}

/* An answer as the kernel would write it: header, then the sockaddrs of
 * `addrs` in bit order, each padded to 4 bytes. */
struct msg {
    uint8_t b[RTMSG_BUF_MAX];
    size_t len;
};

static void put_msg(struct msg *m, int type, int seq, pid_t pid, int err, int flags, int addrs,
                    int hdr_index, int ifp_index, uint8_t bad_len) {
    size_t start = m->len;
    struct rt_msghdr rtm;
    memset(&rtm, 0, sizeof(rtm));
    rtm.rtm_version = RTM_VERSION;
    rtm.rtm_type = (unsigned char)type;
    rtm.rtm_seq = seq;
    rtm.rtm_pid = pid;
    rtm.rtm_errno = err;
    rtm.rtm_flags = flags;
    rtm.rtm_addrs = addrs;
    rtm.rtm_index = (unsigned short)hdr_index;
    size_t off = start + sizeof(rtm);
    for (int bit = 0; bit < RTAX_MAX; bit++) {
        if (!(addrs & (1 << bit)))
            continue;
        uint8_t *sa = m->b + off;
        if ((1 << bit) == RTA_IFP) {
            struct sockaddr_dl dl;
            memset(&dl, 0, sizeof(dl));
            dl.sdl_len = bad_len ? bad_len : sizeof(dl);
            dl.sdl_family = AF_LINK;
            dl.sdl_index = (uint16_t)ifp_index;
            memcpy(sa, &dl, sizeof(dl));
            off += 20;
        } else {
            sa[0] = 16;
            sa[1] = AF_INET;
            off += 16;
        }
    }
    rtm.rtm_msglen = (unsigned short)(off - start);
    memcpy(m->b + start, &rtm, sizeof(rtm));
    m->len = off;
}

static void test_parse(void **state) {
    (void)state;
    struct msg m = {.len = 0};
    struct rtmsg_answer a;

    /* another process's answer, an unrelated message type, then ours */
    put_msg(&m, RTM_GET, 5, 999, 0, RTF_UP, RTA_DST | RTA_IFP, 1, 1, 0);
    put_msg(&m, 0x1 /* RTM_ADD */, 5, 100, 0, RTF_UP, RTA_DST, 0, 0, 0);
    put_msg(&m, RTM_GET, 5, 100, 0, RTF_UP | RTF_GATEWAY, RTA_DST | RTA_GATEWAY | RTA_IFP, 3, 9,
            0);
    assert_int_equal(rtmsg_parse_get(m.b, m.len, 5, 100, &a), 0);
    assert_int_equal(a.error, 0);
    assert_int_equal(a.ifindex, 9); /* RTA_IFP wins over rtm_index */
    assert_int_equal(a.flags, RTF_UP | RTF_GATEWAY);

    /* not in this read */
    assert_int_equal(rtmsg_parse_get(m.b, m.len, 6, 100, &a), -EAGAIN);

    /* without RTA_IFP the header's index */
    m.len = 0;
    put_msg(&m, RTM_GET, 1, 100, 0, RTF_UP, RTA_DST, 4, 0, 0);
    assert_int_equal(rtmsg_parse_get(m.b, m.len, 1, 100, &a), 0);
    assert_int_equal(a.ifindex, 4);

    /* no route: the kernel's errno, no interface */
    m.len = 0;
    put_msg(&m, RTM_GET, 2, 100, ESRCH, 0, 0, 4, 0, 0);
    assert_int_equal(rtmsg_parse_get(m.b, m.len, 2, 100, &a), 0);
    assert_int_equal(a.error, -ESRCH);
    assert_int_equal(a.ifindex, 0);
}

static void test_parse_malformed(void **state) {
    (void)state;
    struct msg m = {.len = 0};
    struct rtmsg_answer a = {.ifindex = 77};

    /* a sockaddr that claims more than the message holds */
    put_msg(&m, RTM_GET, 1, 100, 0, RTF_UP, RTA_DST | RTA_IFP, 1, 2, 200);
    assert_int_equal(rtmsg_parse_get(m.b, m.len, 1, 100, &a), -EBADMSG);
    /* a message length beyond the read, and one too short for any header */
    m.len = 0;
    put_msg(&m, RTM_GET, 1, 100, 0, RTF_UP, RTA_DST, 1, 0, 0);
    assert_int_equal(rtmsg_parse_get(m.b, m.len - 1, 1, 100, &a), -EBADMSG);
    uint16_t tiny = 2;
    memcpy(m.b, &tiny, sizeof(tiny));
    assert_int_equal(rtmsg_parse_get(m.b, m.len, 1, 100, &a), -EBADMSG);
    /* a version we do not know */
    m.len = 0;
    put_msg(&m, RTM_GET, 1, 100, 0, RTF_UP, RTA_DST, 1, 0, 0);
    m.b[2] = RTM_VERSION + 1;
    assert_int_equal(rtmsg_parse_get(m.b, m.len, 1, 100, &a), -EPROTO);
    assert_int_equal(a.ifindex, 77); /* untouched */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_v4),
        cmocka_unit_test(test_build_v6),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_parse_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
