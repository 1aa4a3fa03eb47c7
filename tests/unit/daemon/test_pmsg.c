/* The messages between lyhd's two processes (daemon/pmsg.c): each one round
 * trips; every cut, every extra byte, every field out of range is refused
 * (the parent decodes what a possibly compromised process sent); the socket
 * I/O carries fds and refuses a datagram with more than it may. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/pmsg.h"

static uint8_t buf[PMSG_MAX_BYTES];

/* Every prefix of a valid datagram is refused, and so is one byte more. */
typedef int (*decode_fn)(const uint8_t *, size_t, void *);

static void refuses_cuts(const uint8_t *msg, size_t len, decode_fn dec, void *out) {
    uint16_t type;
    const uint8_t *pl;
    size_t pl_len;
    uint8_t longer[PMSG_MAX_BYTES + 1];

    assert_int_equal(pmsg_header(msg, len, &type, &pl, &pl_len), 0);
    assert_int_equal(dec(pl, pl_len, out), 0);
    for (size_t cut = 0; cut < pl_len; cut++)
        assert_int_equal(dec(pl, cut, out), -EBADMSG);
    memcpy(longer, pl, pl_len);
    longer[pl_len] = 0;
    assert_int_equal(dec(longer, pl_len + 1, out), -EBADMSG);
    /* the header must agree with the datagram's length */
    for (size_t cut = 0; cut < len; cut++)
        assert_int_equal(pmsg_header(msg, cut, &type, &pl, &pl_len), -EBADMSG);
}

static struct pmsg_dns_answer sample_answer(void) {
    struct pmsg_dns_answer m;
    memset(&m, 0, sizeof(m));
    m.req = 7;
    strcpy(m.session, "0123456789abcdef");
    strcpy(m.name, "n1.allowed.test");
    m.want_reply = true;
    m.qtype = 1;
    m.ttl = 300;
    m.n_addrs = 2;
    m.addrs[0] = (struct pmsg_addr){.family = AF_INET, .addr = {11, 77, 0, 1}};
    m.addrs[1] = (struct pmsg_addr){.family = AF_INET, .addr = {11, 77, 0, 2}};
    return m;
}

static void test_answer(void **state) {
    (void)state;
    struct pmsg_dns_answer m = sample_answer(), got;
    size_t len;
    uint16_t type;
    const uint8_t *pl;
    size_t pl_len;

    assert_int_equal(pmsg_encode_dns_answer(&m, buf, sizeof(buf), &len), 0);
    assert_int_equal(pmsg_header(buf, len, &type, &pl, &pl_len), 0);
    assert_int_equal(type, PMSG_DNS_ANSWER);
    assert_int_equal(pmsg_decode_dns_answer(pl, pl_len, &got), 0);
    assert_int_equal(got.req, 7);
    assert_string_equal(got.session, m.session);
    assert_string_equal(got.name, m.name);
    assert_true(got.want_reply);
    assert_int_equal(got.n_addrs, 2);
    assert_memory_equal(got.addrs[1].addr, m.addrs[1].addr, 4);
    refuses_cuts(buf, len, (decode_fn)pmsg_decode_dns_answer, &got);

    /* out of range: the encoder refuses, and so does the decoder on bytes
     * that say the same */
    struct pmsg_dns_answer bad = m;
    strcpy(bad.session, "0123456789ABCDEF");
    assert_int_equal(pmsg_encode_dns_answer(&bad, buf, sizeof(buf), &len), -EINVAL);
    bad = m;
    strcpy(bad.name, "a..b");
    assert_int_equal(pmsg_encode_dns_answer(&bad, buf, sizeof(buf), &len), -EINVAL);
    bad = m;
    strcpy(bad.name, "Upper.test");
    assert_int_equal(pmsg_encode_dns_answer(&bad, buf, sizeof(buf), &len), -EINVAL);
    bad = m;
    bad.addrs[1].family = AF_INET6; /* an AAAA address in an A answer */
    assert_int_equal(pmsg_encode_dns_answer(&bad, buf, sizeof(buf), &len), -EINVAL);
    bad = m;
    bad.qtype = 16; /* TXT */
    assert_int_equal(pmsg_encode_dns_answer(&bad, buf, sizeof(buf), &len), -EINVAL);

    /* byte patches of a valid message */
    assert_int_equal(pmsg_encode_dns_answer(&m, buf, sizeof(buf), &len), 0);
    pl = buf + PMSG_HDR_BYTES;
    pl_len = len - PMSG_HDR_BYTES;
    uint8_t c[PMSG_MAX_BYTES];
    size_t want_reply_at = 4 + 1 + 16 + 1 + strlen(m.name);
    memcpy(c, pl, pl_len);
    c[want_reply_at] = 2; /* a bool that is neither */
    assert_int_equal(pmsg_decode_dns_answer(c, pl_len, &got), -EBADMSG);
    memcpy(c, pl, pl_len);
    c[want_reply_at + 1 + 2 + 4] = 17; /* more addresses than an answer keeps */
    assert_int_equal(pmsg_decode_dns_answer(c, pl_len, &got), -EBADMSG);
    memcpy(c, pl, pl_len);
    c[want_reply_at + 1 + 2 + 4 + 1] = 6; /* an IPv6 address in an A answer */
    assert_int_equal(pmsg_decode_dns_answer(c, pl_len, &got), -EBADMSG);
    memcpy(c, pl, pl_len);
    c[5] = 0; /* a NUL inside the session id */
    assert_int_equal(pmsg_decode_dns_answer(c, pl_len, &got), -EBADMSG);

    /* another version in the header */
    assert_int_equal(pmsg_encode_dns_answer(&m, buf, sizeof(buf), &len), 0);
    buf[3] ^= 1;
    assert_int_equal(pmsg_header(buf, len, &type, &pl, &pl_len), -EBADMSG);
}

static void test_record(void **state) {
    (void)state;
    struct pmsg_dns_record m, got;
    size_t len;
    uint16_t type;
    const uint8_t *pl;
    size_t pl_len;

    memset(&m, 0, sizeof(m));
    strcpy(m.session, "fedcba9876543210");
    m.action = PDNS_DENIED;
    m.rcode = 3;
    m.qtype = 16;
    m.resolver = 0xff;
    m.dropped_inflight = 5;
    strcpy(m.name, "exfil.example");
    assert_int_equal(pmsg_encode_dns_record(&m, buf, sizeof(buf), &len), 0);
    assert_int_equal(pmsg_header(buf, len, &type, &pl, &pl_len), 0);
    assert_int_equal(type, PMSG_DNS_RECORD);
    assert_int_equal(pmsg_decode_dns_record(pl, pl_len, &got), 0);
    assert_int_equal(got.action, PDNS_DENIED);
    assert_int_equal(got.dropped_inflight, 5);
    assert_string_equal(got.name, "exfil.example");
    refuses_cuts(buf, len, (decode_fn)pmsg_decode_dns_record, &got);

    m.action = PDNS_ACTION_MAX + 1;
    assert_int_equal(pmsg_encode_dns_record(&m, buf, sizeof(buf), &len), -EINVAL);
    m.action = PDNS_ANSWERED;
    m.resolver = PMSG_RESOLVERS; /* no such resolver: the decoder refuses it */
    assert_int_equal(pmsg_encode_dns_record(&m, buf, sizeof(buf), &len), 0);
    assert_int_equal(pmsg_header(buf, len, &type, &pl, &pl_len), 0);
    assert_int_equal(pmsg_decode_dns_record(pl, pl_len, &got), -EBADMSG);
    /* the root name is a name */
    m.resolver = 0;
    m.name[0] = '\0';
    assert_int_equal(pmsg_encode_dns_record(&m, buf, sizeof(buf), &len), 0);
}

static void test_start(void **state) {
    (void)state;
    struct pmsg_dns_start m, got;
    size_t len;
    uint16_t type;
    const uint8_t *pl;
    size_t pl_len;

    memset(&m, 0, sizeof(m));
    strcpy(m.session, "00000000000000ff");
    strcpy(m.iface, "tun0");
    m.fd_mask = PMSG_FD_UDP4 | PMSG_FD_TCP4;
    m.n_resolvers = 1;
    m.resolvers[0] = (struct pmsg_addr){.family = AF_INET6, .addr = {0x20, 0x01, [15] = 0x53}};
    memcpy(m.domains, "allowed.test\0*.example.org\0", 27);
    m.domains_len = 27;
    m.n_domains = 2;
    assert_int_equal(pmsg_encode_dns_start(&m, buf, sizeof(buf), &len), 0);
    assert_int_equal(pmsg_header(buf, len, &type, &pl, &pl_len), 0);
    assert_int_equal(type, PMSG_DNS_START);
    assert_int_equal(pmsg_decode_dns_start(pl, pl_len, &got), 0);
    assert_string_equal(got.iface, "tun0");
    assert_int_equal(got.n_domains, 2);
    assert_memory_equal(got.domains, m.domains, 27);
    refuses_cuts(buf, len, (decode_fn)pmsg_decode_dns_start, &got);

    struct pmsg_dns_start bad = m;
    bad.n_domains = 3; /* more than the bytes hold */
    assert_int_equal(pmsg_encode_dns_start(&bad, buf, sizeof(buf), &len), -EINVAL);
    bad = m;
    bad.n_resolvers = 0;
    assert_int_equal(pmsg_encode_dns_start(&bad, buf, sizeof(buf), &len), -EINVAL);
    bad = m;
    strcpy(bad.iface, "../x");
    assert_int_equal(pmsg_encode_dns_start(&bad, buf, sizeof(buf), &len), -EINVAL);
    bad = m;
    bad.fd_mask = 16;
    assert_int_equal(pmsg_encode_dns_start(&bad, buf, sizeof(buf), &len), -EINVAL);
}

static void test_small_ones(void **state) {
    (void)state;
    size_t len;
    uint16_t type;
    const uint8_t *pl;
    size_t pl_len;

    struct pmsg_ready r = {.pid = 42}, rg;
    assert_int_equal(pmsg_encode_ready(&r, buf, sizeof(buf), &len), 0);
    refuses_cuts(buf, len, (decode_fn)pmsg_decode_ready, &rg);
    assert_int_equal(rg.pid, 42);

    struct pmsg_dns_stop s = {.session = "0123456789abcdef"}, sg;
    assert_int_equal(pmsg_encode_dns_stop(&s, buf, sizeof(buf), &len), 0);
    refuses_cuts(buf, len, (decode_fn)pmsg_decode_dns_stop, &sg);
    assert_string_equal(sg.session, s.session);

    struct pmsg_dns_answered a = {.req = 9, .status = -EPERM}, ag;
    assert_int_equal(pmsg_encode_dns_answered(&a, buf, sizeof(buf), &len), 0);
    refuses_cuts(buf, len, (decode_fn)pmsg_decode_dns_answered, &ag);
    assert_int_equal(ag.status, -EPERM);
    a.status = 1; /* a positive status is no status */
    assert_int_equal(pmsg_encode_dns_answered(&a, buf, sizeof(buf), &len), -EINVAL);

    static struct pmsg_dns_policy p, pg;
    memset(&p, 0, sizeof(p));
    p.n_deny = 1;
    strcpy(p.deny[0], "*.evil.test");
    p.n_ceiling = 2;
    strcpy(p.ceiling[0], "*.example.org");
    strcpy(p.ceiling[1], "allowed.test");
    assert_int_equal(pmsg_encode_dns_policy(&p, buf, sizeof(buf), &len), 0);
    refuses_cuts(buf, len, (decode_fn)pmsg_decode_dns_policy, &pg);
    assert_string_equal(pg.ceiling[1], "allowed.test");
    p.deny[0][0] = '\0'; /* an empty pattern */
    assert_int_equal(pmsg_encode_dns_policy(&p, buf, sizeof(buf), &len), -EINVAL);

    /* a type the receiver does not know still has a valid header: the
     * dispatchers refuse it (not the codec's business) */
    assert_int_equal(pmsg_encode_ready(&r, buf, sizeof(buf), &len), 0);
    buf[1] = 200;
    assert_int_equal(pmsg_header(buf, len, &type, &pl, &pl_len), 0);
    assert_int_equal(type, 200);
}

static struct pmsg_flow sample_flow(void) {
    struct pmsg_flow f;
    memset(&f, 0, sizeof(f));
    f.verdict = 2;
    f.origin = 1;
    strcpy(f.session, "0123456789abcdef");
    f.has_time = f.has_skuid = f.has_seq = f.has_ports = true;
    f.time_us = INT64_C(1796280226103105);
    f.skuid = 1001;
    f.seq = 4000000000u;
    f.oif = 7;
    f.family = AF_INET6;
    f.protocol = 6;
    f.src[0] = 0x2a, f.src[15] = 1;
    f.dst[0] = 0xfd, f.dst[15] = 2;
    f.sport = 40000;
    f.dport = 443;
    return f;
}

static void flows_refused(struct pmsg_flows *m) {
    size_t len;
    assert_int_equal(pmsg_encode_flows(m, buf, sizeof(buf), &len), -EINVAL);
}

/* Flow events: a full message round trips field by field and fits one
 * datagram; every field the decoder constrains is refused out of range. */
static void test_flows(void **state) {
    (void)state;
    static struct pmsg_flows m, g;
    size_t len;

    memset(&m, 0, sizeof(m));
    m.overruns = 3;
    m.bad = 4;
    m.unsent = 5;
    m.n = PMSG_FLOWS_MAX;
    for (size_t i = 0; i < m.n; i++) {
        m.v[i] = sample_flow();
        m.v[i].seq += (uint32_t)i;
    }
    /* the other shapes: a uid chain's IPv4 event, one with no headers */
    m.v[1].origin = 2, m.v[1].session[0] = '\0', m.v[1].uid = 1001, m.v[1].family = AF_INET;
    memset(m.v[1].src + 4, 0, 12);
    memset(m.v[1].dst + 4, 0, 12);
    m.v[2] = (struct pmsg_flow){.verdict = 2, .origin = 3};
    assert_int_equal(pmsg_encode_flows(&m, buf, sizeof(buf), &len), 0);
    assert_true(len <= PMSG_MAX_BYTES);
    refuses_cuts(buf, len, (decode_fn)pmsg_decode_flows, &g);
    assert_int_equal(g.n, m.n);
    assert_int_equal(g.overruns, 3);
    assert_int_equal(g.bad, 4);
    assert_int_equal(g.unsent, 5);
    for (size_t i = 0; i < m.n; i++) {
        const struct pmsg_flow *a = &m.v[i], *b = &g.v[i];
        assert_int_equal(a->verdict, b->verdict);
        assert_int_equal(a->origin, b->origin);
        assert_string_equal(a->session, b->session);
        assert_int_equal(a->uid, b->uid);
        assert_int_equal(a->time_us, b->time_us);
        assert_int_equal(a->has_time, b->has_time);
        assert_int_equal(a->skuid, b->skuid);
        assert_int_equal(a->seq, b->seq);
        assert_int_equal(a->oif, b->oif);
        assert_int_equal(a->family, b->family);
        assert_int_equal(a->protocol, b->protocol);
        assert_memory_equal(a->src, b->src, 16);
        assert_memory_equal(a->dst, b->dst, 16);
        assert_int_equal(a->has_ports, b->has_ports);
        assert_int_equal(a->sport, b->sport);
        assert_int_equal(a->dport, b->dport);
    }

    m.n = 1;
    struct pmsg_flow ok = sample_flow();
    m.v[0] = ok, m.v[0].verdict = 3;
    flows_refused(&m);
    m.v[0] = ok, m.v[0].origin = 4;
    flows_refused(&m);
    m.v[0] = ok, m.v[0].session[3] = 'G'; /* not lowercase hex */
    flows_refused(&m);
    m.v[0] = ok, m.v[0].origin = 3; /* a session id on a catch-all event */
    flows_refused(&m);
    m.v[0] = ok, m.v[0].uid = 5; /* a uid on a session's event */
    flows_refused(&m);
    m.v[0] = ok, m.v[0].has_time = false; /* a time not announced */
    flows_refused(&m);
    m.v[0] = ok, m.v[0].time_us = -1;
    flows_refused(&m);
    m.v[0] = ok, m.v[0].has_seq = false;
    flows_refused(&m);
    m.v[0] = ok, m.v[0].family = AF_INET; /* bytes past an IPv4 address */
    flows_refused(&m);
    m.v[0] = ok, m.v[0].family = 99;
    flows_refused(&m);
    m.v[0] = ok, m.v[0].has_ports = false; /* ports not announced */
    flows_refused(&m);
    m.v[0] = (struct pmsg_flow){.verdict = 1, .origin = 3, .has_ports = true};
    flows_refused(&m); /* ports without addresses */
    m.n = PMSG_FLOWS_MAX + 1;
    m.v[0] = ok;
    flows_refused(&m);

    /* the decoder: a flag it does not know, a family byte it does not know */
    m.n = 1;
    assert_int_equal(pmsg_encode_flows(&m, buf, sizeof(buf), &len), 0);
    uint16_t type;
    const uint8_t *pl;
    size_t pl_len;
    assert_int_equal(pmsg_header(buf, len, &type, &pl, &pl_len), 0);
    /* counts (12), n (1), verdict, origin, session (17), uid (4): the flags */
    size_t at = PMSG_HDR_BYTES + 12 + 1 + 2 + 17 + 4;
    assert_int_equal(buf[at], 15);
    buf[at] = 31;
    assert_int_equal(pmsg_decode_flows(pl, pl_len, &g), -EBADMSG);
    buf[at] = 15;
    at += 1 + 8 + 4 + 4 + 4; /* time, skuid, seq, oif: the family */
    assert_int_equal(buf[at], 6);
    buf[at] = 5;
    assert_int_equal(pmsg_decode_flows(pl, pl_len, &g), -EBADMSG);
    buf[at] = 6;
    assert_int_equal(pmsg_decode_flows(pl, pl_len, &g), 0);

    /* the sync messages: an id each way; NFLOG_START has no payload */
    struct pmsg_sync y = {.id = 77}, yg;
    assert_int_equal(pmsg_encode_sync(PMSG_FLOWS_SYNC, &y, buf, sizeof(buf), &len), 0);
    assert_int_equal(pmsg_header(buf, len, &type, &pl, &pl_len), 0);
    assert_int_equal(pmsg_decode_sync(type, pl, pl_len, &yg), 0);
    assert_int_equal(yg.id, 77);
    assert_int_equal(pmsg_decode_sync(PMSG_FLOWS_SYNCED, pl, pl_len - 1, &yg), -EBADMSG);
    assert_int_equal(pmsg_decode_sync(PMSG_DNS_STOP, pl, pl_len, &yg), -EBADMSG);
    assert_int_equal(pmsg_encode_sync(PMSG_NFLOG_START, &y, buf, sizeof(buf), &len), -EINVAL);
    y.id = 0;
    assert_int_equal(pmsg_encode_sync(PMSG_NFLOG_START, &y, buf, sizeof(buf), &len), 0);
    assert_int_equal(len, PMSG_HDR_BYTES);
    assert_int_equal(pmsg_decode_sync(PMSG_NFLOG_START, buf + PMSG_HDR_BYTES, 1, &yg), -EBADMSG);
    assert_int_equal(pmsg_encode_sync(PMSG_READY, &y, buf, sizeof(buf), &len), -EINVAL);
}

static unsigned open_fds(void) {
    unsigned n = 0;
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static void test_socket(void **state) {
    (void)state;
    int sv[2], fds[PMSG_MAX_FDS + 2], got[PMSG_RECV_FDS];
    size_t len, n, nfds;
    struct pmsg_ready r = {.pid = 1};

    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    for (size_t i = 0; i < (size_t)(PMSG_MAX_FDS + 2); i++)
        fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_int_equal(pmsg_encode_ready(&r, buf, sizeof(buf), &len), 0);

    /* two fds arrive with the datagram, close-on-exec */
    assert_int_equal(pmsg_send(sv[0], buf, len, fds, 2), 0);
    uint8_t in[PMSG_MAX_BYTES];
    assert_int_equal(pmsg_recv(sv[1], in, sizeof(in), &n, got, &nfds), 0);
    assert_int_equal(n, len);
    assert_int_equal(nfds, 2);
    assert_true(fcntl(got[0], F_GETFD) & FD_CLOEXEC);
    close(got[0]);
    close(got[1]);

    /* more fds than a message may carry: refused. Far more than that (the
     * old control buffer held 8; the kernel would have dropped the rest and
     * released them in the receiving thread): every one reaches the caller,
     * who closes them off its loop. */
    assert_int_equal(pmsg_send(sv[0], buf, len, fds, PMSG_MAX_FDS + 1), -EINVAL);
    enum { MANY = 40 };
    int many[MANY];
    for (size_t i = 0; i < MANY; i++)
        many[i] = fds[i % (PMSG_MAX_FDS + 2)];
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int) * MANY)];
    } c;
    memset(&c, 0, sizeof(c));
    struct iovec iov = {buf, len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.b,
                        .msg_controllen = sizeof(c.b)};
    struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int) * MANY);
    memcpy(CMSG_DATA(h), many, sizeof(int) * MANY);
    assert_int_equal(sendmsg(sv[0], &mh, 0), (ssize_t)len);
    unsigned before = open_fds();
    assert_int_equal(pmsg_recv(sv[1], in, sizeof(in), &n, got, &nfds), -EBADMSG);
    assert_int_equal(nfds, MANY);
    assert_int_equal(open_fds(), before + MANY);
    pmsg_close_fds(got, nfds);
    assert_int_equal(open_fds(), before);

    /* a datagram longer than the buffer: cut, refused */
    assert_int_equal(pmsg_send(sv[0], buf, len, NULL, 0), 0);
    assert_int_equal(pmsg_recv(sv[1], in, 4, &n, got, &nfds), -EBADMSG);

    /* nothing waiting, then the peer gone */
    assert_int_equal(pmsg_recv(sv[1], in, sizeof(in), &n, got, &nfds), -EAGAIN);
    close(sv[0]);
    assert_int_equal(pmsg_recv(sv[1], in, sizeof(in), &n, got, &nfds), -EPIPE);
    close(sv[1]);
    for (size_t i = 0; i < (size_t)(PMSG_MAX_FDS + 2); i++)
        close(fds[i]);
}

/* The client connections' messages: each round-trips; what the decoder
 * must refuse (the parent runs it on a possibly compromised process's
 * bytes) is refused, and so is encoding it. */
static int conn_rt(uint16_t type, const struct pmsg_conn *m, struct pmsg_conn *back) {
    size_t len;
    uint16_t t;
    const uint8_t *pl;
    size_t pl_len;
    int r = pmsg_encode_conn(type, m, buf, sizeof(buf), &len);
    if (r < 0)
        return r;
    assert_int_equal(pmsg_header(buf, len, &t, &pl, &pl_len), 0);
    assert_int_equal(t, type);
    return pmsg_decode_conn(type, pl, pl_len, back);
}

static void test_conn(void **state) {
    (void)state;
    struct pmsg_conn m = {.id = 0x0102030405060708ull}, b;
    uint8_t data[PMSG_CHUNK + 1];

    memset(data, 'x', sizeof(data));
    assert_int_equal(conn_rt(PMSG_CONN_OPEN, &m, &b), 0);
    assert_true(b.id == m.id);
    m.count = 1;
    assert_int_equal(conn_rt(PMSG_CONN_PAUSE, &m, &b), 0);
    assert_int_equal(b.count, 1);
    m.count = 2; /* pause is 0 or 1 */
    assert_int_equal(conn_rt(PMSG_CONN_PAUSE, &m, &b), -EINVAL);
    m.count = 0; /* drained: at least one byte */
    assert_int_equal(conn_rt(PMSG_DRAINED, &m, &b), -EINVAL);
    m.count = 4096;
    assert_int_equal(conn_rt(PMSG_DRAINED, &m, &b), 0);
    assert_int_equal(b.count, 4096);

    /* REQUEST: pieces within the whole, the whole within the limit */
    m = (struct pmsg_conn){.id = 9, .total = 40000, .offset = PMSG_CHUNK, .data = data,
                           .data_len = PMSG_CHUNK};
    assert_int_equal(conn_rt(PMSG_REQUEST, &m, &b), 0);
    assert_true(b.total == 40000 && b.offset == PMSG_CHUNK && b.data_len == PMSG_CHUNK &&
                memcmp(b.data, data, PMSG_CHUNK) == 0);
    m.data_len = PMSG_CHUNK + 1; /* more than a piece */
    assert_int_equal(conn_rt(PMSG_REQUEST, &m, &b), -EINVAL);
    m.offset = 30000, m.data_len = 10001; /* past the whole */
    assert_int_equal(conn_rt(PMSG_REQUEST, &m, &b), -EINVAL);
    m.total = PMSG_REQUEST_MAX + 1, m.offset = 0, m.data_len = 1;
    assert_int_equal(conn_rt(PMSG_REQUEST, &m, &b), -EINVAL);
    m.total = 0, m.data_len = 0; /* an empty request: one empty piece */
    assert_int_equal(conn_rt(PMSG_REQUEST, &m, &b), 0);
    m.total = 5; /* an empty piece of a non-empty one */
    assert_int_equal(conn_rt(PMSG_REQUEST, &m, &b), -EINVAL);

    /* REFUSE: a status code, printable text, call id 0 with the close flag */
    m = (struct pmsg_conn){.id = 9, .call_id = 7, .code = 3};
    snprintf(m.text, sizeof(m.text), "request names no method");
    assert_int_equal(conn_rt(PMSG_REFUSE, &m, &b), 0);
    assert_true(b.call_id == 7 && b.code == 3 && strcmp(b.text, m.text) == 0);
    m.flags = PMSG_REFUSE_CLOSE;
    assert_int_equal(conn_rt(PMSG_REFUSE, &m, &b), -EINVAL);
    m.call_id = 0;
    assert_int_equal(conn_rt(PMSG_REFUSE, &m, &b), 0);
    m.text[3] = '\n';
    assert_int_equal(conn_rt(PMSG_REFUSE, &m, &b), -EINVAL);
    m.text[3] = 'u', m.code = 17;
    assert_int_equal(conn_rt(PMSG_REFUSE, &m, &b), -EINVAL);

    /* LISTEN_START: a frame timeout, 1 to 3 fds per request */
    m = (struct pmsg_conn){.id = 1, .count = 5000, .code = 3};
    assert_int_equal(conn_rt(PMSG_LISTEN_START, &m, &b), 0);
    m.code = 4;
    assert_int_equal(conn_rt(PMSG_LISTEN_START, &m, &b), -EINVAL);
    /* OUT: at least a byte; the taken count and the idle flag round-trip,
     * no other flag */
    m = (struct pmsg_conn){.id = 1, .data = data, .data_len = 0};
    assert_int_equal(conn_rt(PMSG_OUT, &m, &b), -EINVAL);
    m = (struct pmsg_conn){.id = 1, .data = data, .data_len = 3, .count = 0xfffffffeu,
                           .flags = PMSG_OUT_IDLE};
    assert_int_equal(conn_rt(PMSG_OUT, &m, &b), 0);
    assert_true(b.count == 0xfffffffeu && b.flags == PMSG_OUT_IDLE && b.data_len == 3 &&
                memcmp(b.data, data, 3) == 0);
    m.flags = 2;
    assert_int_equal(conn_rt(PMSG_OUT, &m, &b), -EINVAL);
    /* OUT by hand: a flag byte the encoder never makes, and one too short
     * to hold the count and flags */
    static const uint8_t out_bad_flag[14] = {0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 5, 0x81, 'x'};
    static const uint8_t out_short[11] = {0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
    assert_int_equal(pmsg_decode_conn(PMSG_OUT, out_bad_flag, sizeof(out_bad_flag), &b), -EBADMSG);
    assert_int_equal(pmsg_decode_conn(PMSG_OUT, out_short, sizeof(out_short), &b), -EBADMSG);
    /* id 0 is nobody's */
    m = (struct pmsg_conn){.id = 0};
    assert_int_equal(conn_rt(PMSG_CONN_GONE, &m, &b), -EINVAL);
    /* decoded by hand: id 0, a short one, bytes left over, another type */
    static const uint8_t zero_id[8] = {0}, short_id[7] = {0, 0, 0, 0, 0, 0, 1};
    static const uint8_t extra[9] = {0, 0, 0, 0, 0, 0, 0, 1, 0};
    assert_int_equal(pmsg_decode_conn(PMSG_CONN_GONE, zero_id, 8, &b), -EBADMSG);
    assert_int_equal(pmsg_decode_conn(PMSG_CONN_GONE, short_id, 7, &b), -EBADMSG);
    assert_int_equal(pmsg_decode_conn(PMSG_CONN_GONE, extra, 9, &b), -EBADMSG);
    assert_int_equal(pmsg_decode_conn(PMSG_READY, extra, 8, &b), -EBADMSG);
    assert_false(pmsg_conn_type(PMSG_READY));
    assert_true(pmsg_conn_type(PMSG_CONN_PAUSE));
    /* MIDFRAME: an id, nothing else */
    m = (struct pmsg_conn){.id = 4};
    assert_int_equal(conn_rt(PMSG_MIDFRAME, &m, &b), 0);
    assert_true(b.id == 4);
    assert_int_equal(pmsg_decode_conn(PMSG_MIDFRAME, extra, 9, &b), -EBADMSG);
    assert_true(pmsg_conn_type(PMSG_MIDFRAME));
    /* FDS_CLOSED: the same; id 0 is refused both ways */
    m = (struct pmsg_conn){.id = 5};
    assert_int_equal(conn_rt(PMSG_FDS_CLOSED, &m, &b), 0);
    assert_true(b.id == 5);
    assert_int_equal(pmsg_decode_conn(PMSG_FDS_CLOSED, extra, 9, &b), -EBADMSG);
    assert_int_equal(pmsg_decode_conn(PMSG_FDS_CLOSED, zero_id, 8, &b), -EBADMSG);
    m.id = 0;
    assert_int_equal(conn_rt(PMSG_FDS_CLOSED, &m, &b), -EINVAL);
    assert_true(pmsg_conn_type(PMSG_FDS_CLOSED));
}

/* CAPS: the facts round-trip; flags, fds and calls out of range are refused
 * both ways; a short or long payload is refused. */
static void test_caps(void **state) {
    (void)state;
    struct pmsg_caps m = {.flags = PMSG_CAPS_CGROUP2 | PMSG_CAPS_LISTENERS, .landlock_abi = 7,
                          .max_fds = 3, .max_calls = 4096},
                     b;
    size_t len, pl_len;
    uint16_t t;
    const uint8_t *pl;

    assert_int_equal(pmsg_encode_caps(&m, buf, sizeof(buf), &len), 0);
    assert_int_equal(pmsg_header(buf, len, &t, &pl, &pl_len), 0);
    assert_int_equal(t, PMSG_CAPS);
    assert_int_equal(pmsg_decode_caps(pl, pl_len, &b), 0);
    assert_true(b.flags == m.flags && b.landlock_abi == 7 && b.max_fds == 3 && b.max_calls == 4096);
    assert_int_equal(pmsg_decode_caps(pl, pl_len - 1, &b), -EBADMSG);
    uint8_t longer[16];
    memcpy(longer, pl, pl_len);
    longer[pl_len] = 0;
    assert_int_equal(pmsg_decode_caps(longer, pl_len + 1, &b), -EBADMSG);
    static const uint8_t bad_flag[5] = {4, 0, 3, 0, 16}, no_calls[5] = {0, 0, 3, 0, 0},
                         many_calls[5] = {0, 0, 3, 0x10, 1}, many_fds[5] = {0, 0, 4, 0, 16};
    assert_int_equal(pmsg_decode_caps(bad_flag, 5, &b), -EBADMSG);
    assert_int_equal(pmsg_decode_caps(no_calls, 5, &b), -EBADMSG);
    assert_int_equal(pmsg_decode_caps(many_calls, 5, &b), -EBADMSG);
    assert_int_equal(pmsg_decode_caps(many_fds, 5, &b), -EBADMSG);
    m.max_calls = 0;
    assert_int_equal(pmsg_encode_caps(&m, buf, sizeof(buf), &len), -EINVAL);
    m.max_calls = 1, m.flags = 8;
    assert_int_equal(pmsg_encode_caps(&m, buf, sizeof(buf), &len), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_answer),
        cmocka_unit_test(test_record),
        cmocka_unit_test(test_start),
        cmocka_unit_test(test_small_ones),
        cmocka_unit_test(test_flows),
        cmocka_unit_test(test_socket),
        cmocka_unit_test(test_conn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
