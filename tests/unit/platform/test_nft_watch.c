/* Unit tests for the ruleset watch's count of platform/linux/nft.c
 * (nft_watch_foreign, nft_watch_drain): which change notifications lyhd's own
 * socket caused and which another did, on hand-built datagrams (several
 * notifications in one, as the kernel packs them), and what cannot be told
 * counted as a change by someone else: a cut-short datagram, a length that
 * runs past the bytes, a header that is not whole; a change that names another
 * table than lyhd's, and a generation message, not counted. The drain reads from an
 * AF_UNIX datagram pair, not from the kernel; the kernel's side is
 * tests/e2e/timing.sh §4. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "platform/linux/nft.h"

#define OWN 0x4242u
#define OTHER 0x1717u

static uint8_t buf[3 * 8192];
static size_t len;

/* append one message of `payload` bytes (its length padded as the kernel pads) */
static void put(uint32_t pid, size_t payload) {
    struct nlmsghdr h = {.nlmsg_len = (uint32_t)(NLMSG_HDRLEN + payload), .nlmsg_type = 0x0a06,
                         .nlmsg_pid = pid};
    assert_true(len + NLMSG_ALIGN(h.nlmsg_len) <= sizeof(buf));
    memcpy(buf + len, &h, sizeof(h));
    memset(buf + len + sizeof(h), 0xab, NLMSG_ALIGN(h.nlmsg_len) - sizeof(h));
    len += NLMSG_ALIGN(h.nlmsg_len);
}

static int setup(void **state) {
    (void)state;
    len = 0;
    memset(buf, 0, sizeof(buf));
    return 0;
}

static void test_own_only(void **state) {
    (void)state;
    put(OWN, 120);
    put(OWN, 7);
    put(OWN, 0);
    assert_int_equal(nft_watch_foreign(buf, len, OWN), 0);
    assert_int_equal(nft_watch_foreign(buf, 0, OWN), 0);
}

static void test_others_counted(void **state) {
    (void)state;
    put(OWN, 64);
    put(OTHER, 33);
    put(OWN, 8);
    put(0, 20); /* the kernel's own change */
    put(OTHER, 0);
    assert_int_equal(nft_watch_foreign(buf, len, OWN), 3);
    /* no own port: every notification counts */
    assert_int_equal(nft_watch_foreign(buf, len, 0), 5);
}

static void test_unaligned_and_unpadded(void **state) {
    (void)state;
    static uint8_t shifted[512];
    put(OWN, 40);
    put(OTHER, 3); /* 19 bytes, padded to 20 */
    memcpy(shifted + 1, buf, len);
    assert_int_equal(nft_watch_foreign(shifted + 1, len, OWN), 1);
    /* the last message without its padding is still whole */
    assert_int_equal(nft_watch_foreign(buf, len - 1, OWN), 1);
}

static void test_malformed_counted(void **state) {
    (void)state;
    put(OWN, 40);
    put(OWN, 40);
    size_t whole = len;
    assert_int_equal(nft_watch_foreign(buf, whole, OWN), 0);
    put(OWN, 40);
    /* a header cut short after two whole own messages */
    assert_int_equal(nft_watch_foreign(buf, whole + 10, OWN), 1);
    /* a length past the bytes */
    assert_int_equal(nft_watch_foreign(buf, whole + 30, OWN), 1);
    /* a length shorter than its own header (would loop or go backwards) */
    struct nlmsghdr h = {.nlmsg_len = 4, .nlmsg_pid = OWN};
    memcpy(buf + whole, &h, sizeof(h));
    assert_int_equal(nft_watch_foreign(buf, len, OWN), 1);
    h.nlmsg_len = 0;
    memcpy(buf + whole, &h, sizeof(h));
    assert_int_equal(nft_watch_foreign(buf, len, OWN), 1);
    /* a length that would wrap */
    h.nlmsg_len = UINT32_MAX;
    memcpy(buf + whole, &h, sizeof(h));
    assert_int_equal(nft_watch_foreign(buf, len, OWN), 1);
}

/* append one nf_tables notification of type msg (NFT_MSG_*) whose attribute 1
 * is `name` (k bytes, no NUL added), after an attribute 2 when `second`;
 * returns where it starts */
static size_t put_nft(uint32_t pid, uint16_t msg, const char *name, size_t k, bool second) {
    uint8_t m[256] = {0};
    size_t at = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));
    if (second) {
        struct nlattr a2 = {.nla_len = NLA_HDRLEN + 4, .nla_type = 2};
        memcpy(m + at, &a2, sizeof(a2));
        at += NLA_ALIGN(a2.nla_len);
    }
    struct nlattr a = {.nla_len = (uint16_t)(NLA_HDRLEN + k), .nla_type = 1};
    memcpy(m + at, &a, sizeof(a));
    memcpy(m + at + NLA_HDRLEN, name, k);
    at += NLA_ALIGN(a.nla_len);
    struct nlmsghdr h = {.nlmsg_len = (uint32_t)at,
                         .nlmsg_type = (uint16_t)(NFNL_SUBSYS_NFTABLES << 8 | msg),
                         .nlmsg_pid = pid};
    memcpy(m, &h, sizeof(h));
    assert_true(len + NLMSG_ALIGN(at) <= sizeof(buf));
    memcpy(buf + len, m, NLMSG_ALIGN(at));
    len += NLMSG_ALIGN(at);
    return len - NLMSG_ALIGN(at);
}

#define NAME(s) s, sizeof(s) /* with its NUL */

static void test_other_tables_not_counted(void **state) {
    (void)state;
    /* another table's changes and the generation message after them */
    put_nft(OTHER, NFT_MSG_NEWRULE, NAME("filter"), false);
    put_nft(OTHER, NFT_MSG_NEWSETELEM, NAME("lianyaohu2"), false);
    put_nft(OTHER, NFT_MSG_DELOBJ, NAME("x"), false);
    put_nft(0, NFT_MSG_DELCHAIN, NAME("lianyaoh"), false);
    put_nft(OTHER, NFT_MSG_NEWGEN, "\0\0\0\1", 4, false);
    assert_int_equal(nft_watch_foreign(buf, len, OWN), 0);
    assert_int_equal(nft_watch_foreign(buf, len, 0), 0);
    /* lyhd's table, by name, in any message, the table's own deletion included */
    put_nft(OTHER, NFT_MSG_DELTABLE, NAME("lianyaohu"), false);
    put_nft(0, NFT_MSG_DELSETELEM, NAME("lianyaohu"), false);
    put_nft(OWN, NFT_MSG_DELRULE, NAME("lianyaohu"), false); /* its own */
    assert_int_equal(nft_watch_foreign(buf, len, OWN), 2);
    assert_int_equal(nft_watch_foreign(buf, len, 0), 3);
}

static void test_unreadable_names_counted(void **state) {
    (void)state;
    put_nft(OTHER, NFT_MSG_NEWCHAIN, "filter", 6, false); /* no NUL */
    put_nft(OTHER, NFT_MSG_NEWCHAIN, "", 0, false);       /* empty */
    put(OTHER, 0);                                         /* no attributes */
    put(OTHER, 40);                                        /* an attribute past its message */
    /* another table's name, but not as the first attribute */
    put_nft(OTHER, NFT_MSG_NEWRULE, NAME("filter"), true);
    /* a message type not known to name its table there (a future one) */
    put_nft(OTHER, NFT_MSG_MAX + 3, NAME("filter"), false);
    put_nft(OTHER, NFT_MSG_GETOBJ_RESET, NAME("filter"), false);
    /* another subsystem's message */
    size_t at = put_nft(OTHER, NFT_MSG_NEWRULE, NAME("filter"), false);
    struct nlmsghdr h;
    memcpy(&h, buf + at, sizeof(h));
    h.nlmsg_type = (uint16_t)(NFNL_SUBSYS_CTNETLINK << 8 | NFT_MSG_NEWRULE);
    memcpy(buf + at, &h, sizeof(h));
    assert_int_equal(nft_watch_foreign(buf, len, OWN), 8);
}

static void send_all(int fd, const uint8_t *b, size_t n) {
    assert_int_equal(send(fd, b, n, 0), (ssize_t)n);
}

static void test_drain(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    int big = 64 * 1024;
    assert_int_equal(setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big)), 0);

    /* nothing queued */
    assert_int_equal(nft_watch_drain(sv[1], OWN), 0);

    /* own datagrams only: nothing to check, and all of them read */
    put(OWN, 100);
    put(OWN, 100);
    send_all(sv[0], buf, len);
    send_all(sv[0], buf, len);
    assert_int_equal(nft_watch_drain(sv[1], OWN), 0);
    assert_int_equal(recv(sv[1], buf, 1, MSG_DONTWAIT), -1);
    assert_int_equal(errno, EAGAIN);

    /* one other among own ones */
    len = 0;
    put(OWN, 100);
    put(OTHER, 100);
    send_all(sv[0], buf, len);
    assert_int_equal(nft_watch_drain(sv[1], OWN), 1);

    /* a datagram longer than the drain reads, own headers only: cut short, so counted */
    len = 0;
    while (len <= 8192)
        put(OWN, 1000);
    assert_true(len > 8192);
    send_all(sv[0], buf, len);
    assert_int_equal(nft_watch_drain(sv[1], OWN), 1);
    assert_int_equal(nft_watch_drain(sv[1], OWN), 0);

    close(sv[0]);
    close(sv[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_own_only, setup),
        cmocka_unit_test_setup(test_others_counted, setup),
        cmocka_unit_test_setup(test_unaligned_and_unpadded, setup),
        cmocka_unit_test_setup(test_other_tables_not_counted, setup),
        cmocka_unit_test_setup(test_unreadable_names_counted, setup),
        cmocka_unit_test_setup(test_malformed_counted, setup),
        cmocka_unit_test_setup(test_drain, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
