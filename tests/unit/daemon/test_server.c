/* The parent's side of lyhd's clients (daemon/server.c, conn.c) with the test
 * as the protocol process: a real listening socket (server_start, in a
 * directory of the test's own), real accepted connections handed up as
 * PMSG_CONN_OPEN, and the messages a compromised process could send instead
 * of the right ones. What must hold:
 *   - the pieces of a request come together: a piece that does not follow
 *     the one before, or any other connection message between two pieces,
 *     is refused (-EBADMSG: the caller ends the process), so the parent
 *     assembles one request at a time, never one per connection;
 *   - the parent keeps at most max_conns connections, even when the process
 *     never says that the refused ones are gone: the one above the limit is
 *     turned away (its refusal and CONN_CLOSE go to the process) and no slot
 *     or fd is kept for it;
 *   - a connection the process said it has read part of a frame of
 *     (MIDFRAME) is closed, not handed to the next process, when this one
 *     dies; one whose frame then ended (a REQUEST or a REFUSE) is handed over;
 *   - a connection named in what the parent had not read when the process
 *     died is closed too;
 *   - a message with fds is acted on only once the FDS_CLOSED after it came
 *     (pproc_take): until then the parent holds its fds and does nothing
 *     with them (a connection it opens is not there yet, a pipe end it is to
 *     close stays open); a client's message in between, an FDS_CLOSED for
 *     another connection or with nothing held is refused; the held message
 *     of a process that died is let go (its fds closed);
 *   - an fd it sends is never closed on the parent's loop: a client's TCP
 *     socket whose close lingers 30 s, sent with a malformed message or for
 *     a connection the parent does not know, leaves the parent at once and
 *     waits in the closer (real workers here), under _lyhd's queue;
 *   - room in the socket to the process goes to the connections whose
 *     answers found it full in turn: one that asked after six busy ones,
 *     while they still have answers waiting, gets its answer in the first
 *     round (not after theirs, not at the next tick); a new process hears
 *     of every connection it adopts before any answer to one, also to one
 *     that was waiting for room when the last process died.
 * Needs root (the parent checks a connection's socket file with SIOCUNIXFILE;
 * the lingering socket lives in a network namespace of the test's own);
 * skips without it. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/lyh_limits.h"
#include "daemon/closer.h"
#include "daemon/conn.h"
#include "daemon/lyhd.h"
#include "daemon/pmsg.h"
#include "daemon/pproc.h"
#include "daemon/server.h"
#include "tests/unit/daemon/lingering.h"

#define PROTO_UID 4242 /* _lyhd, as the parent knows it */

struct fx {
    struct lyhd d;
    char dir[64];
    char path[96];
    int peer;      /* the protocol process's end */
    int listener;  /* its copy of the listening socket (LISTEN_START) */
    uint64_t next; /* the next connection id it may name */
    int clients[8];
    unsigned n_clients;
};

static unsigned open_fds(void) {
    unsigned n = 0;
    DIR *dir = opendir("/proc/self/fd");
    assert_non_null(dir);
    while (readdir(dir))
        n++;
    closedir(dir);
    return n;
}

/* One datagram from the parent, of type want (others skipped), its fds closed. */
static bool got_from_parent(struct fx *f, uint16_t want, struct pmsg_conn *ret, int *ret_fd) {
    for (int i = 0; i < 64; i++) {
        static uint8_t buf[PMSG_MAX_BYTES];
        int fds[PMSG_RECV_FDS];
        size_t len, nfds = 0;
        uint16_t type;
        const uint8_t *pl;
        size_t pl_len;
        if (pmsg_recv(f->peer, buf, sizeof(buf), &len, fds, &nfds) < 0)
            return false;
        assert_int_equal(pmsg_header(buf, len, &type, &pl, &pl_len), 0);
        if (type == want) {
            assert_int_equal(pmsg_decode_conn(type, pl, pl_len, ret), 0);
            if (ret_fd && nfds == 1) {
                *ret_fd = fds[0];
                nfds = 0;
            }
        }
        pmsg_close_fds(fds, nfds);
        if (type == want)
            return true;
    }
    return false;
}

static int send_conn(struct fx *f, uint16_t type, const struct pmsg_conn *m, int *fds,
                     size_t nfds) {
    uint8_t buf[PMSG_MAX_BYTES];
    size_t len;
    assert_int_equal(pmsg_encode_conn(type, m, buf, sizeof(buf), &len), 0);
    return pproc_dispatch(&f->d, buf, len, fds, nfds);
}

/* A client connects; the "protocol process" accepts and hands it up. */
static int open_client(struct fx *f, uint64_t *ret_id) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(c >= 0);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
    assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_true(f->n_clients < 8);
    f->clients[f->n_clients++] = c;
    int a = accept4(f->listener, NULL, NULL, SOCK_CLOEXEC);
    assert_true(a >= 0);
    struct pmsg_conn m = {.id = f->next++};
    *ret_id = m.id;
    int r = send_conn(f, PMSG_CONN_OPEN, &m, &a, 1); /* the fd is the parent's now */
    return r;
}

/* The protocol process ends (what pproc.c does when it exits) and a new one
 * starts: its socket, LISTEN_START, then the adopted connections. */
static void restart(struct fx *f) {
    int sv[2];
    struct pmsg_conn ls;
    int lfd = -1;

    pproc_stop(&f->d);
    close(f->peer);
    server_protocol_gone(f->d.server);
    event_base_loop(f->d.base, EVLOOP_NONBLOCK);
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(pproc_attach_for_test(&f->d, sv[0]), 0);
    f->peer = sv[1];
    assert_int_equal(server_protocol_ready(f->d.server), 0);
    assert_true(got_from_parent(f, PMSG_LISTEN_START, &ls, &lfd));
    close(lfd);
    assert_true(ls.id == f->next);
}

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    char why[256];
    int sv[2];

    if (geteuid() != 0) {
        free(f);
        return -1;
    }
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/lyh-server-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/lyhd.sock", f->dir);
    f->d.cfg.socket_path = f->path;
    f->d.cfg.guard_gid = 60000; /* not the test's own gid */
    f->d.cfg.guard_gid_max = 60015;
    f->d.cfg.max_conns = 3;
    f->d.cfg.max_conns_per_uid = 3;
    f->d.cfg.max_calls_per_conn = 16;
    f->d.cfg.max_fds_per_msg = LYH_MAX_FDS_PER_MESSAGE;
    f->d.cfg.frame_timeout_ms = 5000;
    f->d.fd_limit = 1024;
    f->d.proto_uid = PROTO_UID;
    f->d.base = event_base_new();
    assert_non_null(f->d.base);
    TAILQ_INIT(&f->d.sessions);
    TAILQ_INIT(&f->d.tmpdir_jobs);
    assert_int_equal(server_start(&f->d, &f->d.server, why, sizeof(why)), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(pproc_attach_for_test(&f->d, sv[0]), 0);
    f->peer = sv[1];
    assert_int_equal(server_protocol_ready(f->d.server), 0);
    struct pmsg_conn ls;
    f->listener = -1;
    assert_true(got_from_parent(f, PMSG_LISTEN_START, &ls, &f->listener));
    assert_true(f->listener >= 0);
    f->next = ls.id;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    char cmd[128];

    server_free(f->d.server);
    pproc_stop(&f->d);
    close(f->peer);
    close(f->listener);
    for (unsigned i = 0; i < f->n_clients; i++)
        close(f->clients[i]);
    for (int i = 0; i < 3; i++)
        event_base_loop(f->d.base, EVLOOP_NONBLOCK);
    event_base_free(f->d.base);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static uint8_t piece[1000];

static struct pmsg_conn first_piece(uint64_t id) {
    return (struct pmsg_conn){.id = id, .total = 40000, .offset = 0, .data = piece,
                              .data_len = sizeof(piece)};
}

static void test_pieces_come_together(void **state) {
    struct fx *f = *state;
    uint64_t a, b;

    assert_int_equal(open_client(f, &a), 0);
    assert_int_equal(open_client(f, &b), 0);
    /* a first piece, then the next one: taken */
    struct pmsg_conn m = first_piece(a);
    assert_int_equal(send_conn(f, PMSG_REQUEST, &m, NULL, 0), 0);
    m.offset = sizeof(piece);
    assert_int_equal(send_conn(f, PMSG_REQUEST, &m, NULL, 0), 0);
    /* another connection's message between two pieces: refused */
    struct pmsg_conn other = {.id = b};
    assert_int_equal(send_conn(f, PMSG_MIDFRAME, &other, NULL, 0), -EBADMSG);
    restart(f); /* what the caller does: a's request is cut, a is closed */
    assert_int_equal(server_conn_count(f->d.server), 1);

    /* the same connection's other messages between pieces: refused too */
    m = first_piece(b);
    assert_int_equal(send_conn(f, PMSG_REQUEST, &m, NULL, 0), 0);
    struct pmsg_conn gone = {.id = b};
    assert_int_equal(send_conn(f, PMSG_CONN_GONE, &gone, NULL, 0), -EBADMSG);
    restart(f);

    /* nor a new connection */
    uint64_t d;
    assert_int_equal(open_client(f, &d), 0);
    m = first_piece(d);
    assert_int_equal(send_conn(f, PMSG_REQUEST, &m, NULL, 0), 0);
    assert_int_equal(open_client(f, &d), -EBADMSG);
    f->next--; /* not taken */
    restart(f);

    /* a piece out of place: a second one first, one that skips, another total */
    uint64_t c;
    assert_int_equal(open_client(f, &c), 0);
    m = first_piece(c);
    m.offset = sizeof(piece);
    assert_int_equal(send_conn(f, PMSG_REQUEST, &m, NULL, 0), -EBADMSG);
    m.offset = 0;
    assert_int_equal(send_conn(f, PMSG_REQUEST, &m, NULL, 0), 0);
    m.offset = 2 * sizeof(piece);
    assert_int_equal(send_conn(f, PMSG_REQUEST, &m, NULL, 0), -EBADMSG);
    restart(f);
    assert_int_equal(open_client(f, &c), 0);
    m = first_piece(c);
    assert_int_equal(send_conn(f, PMSG_REQUEST, &m, NULL, 0), 0);
    m.offset = sizeof(piece), m.total = 50000;
    assert_int_equal(send_conn(f, PMSG_REQUEST, &m, NULL, 0), -EBADMSG);
}

static void test_slots_stay_within_the_limit(void **state) {
    struct fx *f = *state;
    uint64_t id[3], over;

    for (int i = 0; i < 3; i++)
        assert_int_equal(open_client(f, &id[i]), 0);
    assert_int_equal(server_conn_count(f->d.server), 3);
    /* the process never says CONN_GONE: a fourth client is turned away and
     * the parent keeps nothing of it */
    unsigned before = open_fds();
    assert_int_equal(open_client(f, &over), 0);
    assert_int_equal(server_conn_count(f->d.server), 3);
    assert_int_equal(open_fds(), before + 1); /* the client's own end, no more */
    struct pmsg_conn out, cl;
    assert_true(got_from_parent(f, PMSG_OUT, &out, NULL));
    assert_true(out.id == over);
    assert_non_null(memmem(out.data, out.data_len, "too many connections", 20));
    assert_true(got_from_parent(f, PMSG_CONN_CLOSE, &cl, NULL));
    assert_true(cl.id == over);
}

static void test_half_read_frame_is_not_handed_over(void **state) {
    struct fx *f = *state;
    uint64_t a, b;

    assert_int_equal(open_client(f, &a), 0);
    assert_int_equal(open_client(f, &b), 0);
    /* a: part of a frame read; b: part of a frame read, then a whole request;
     * c: part of a frame read, then the frame refused */
    uint64_t c;
    assert_int_equal(open_client(f, &c), 0);
    struct pmsg_conn m = {.id = c};
    assert_int_equal(send_conn(f, PMSG_MIDFRAME, &m, NULL, 0), 0);
    struct pmsg_conn ref = {.id = c, .call_id = 5, .code = 3};
    snprintf(ref.text, sizeof(ref.text), "request names no method");
    assert_int_equal(send_conn(f, PMSG_REFUSE, &ref, NULL, 0), 0);
    struct pmsg_conn out;
    assert_true(got_from_parent(f, PMSG_OUT, &out, NULL));
    assert_true(out.id == c);
    struct pmsg_conn drc = {.id = c, .count = (uint32_t)out.data_len};
    assert_int_equal(send_conn(f, PMSG_DRAINED, &drc, NULL, 0), 0);
    /* MIDFRAME carries no fd */
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    m.id = a;
    assert_int_equal(send_conn(f, PMSG_MIDFRAME, &m, &devnull, 1), -EBADMSG);
    m = (struct pmsg_conn){.id = a};
    assert_int_equal(send_conn(f, PMSG_MIDFRAME, &m, NULL, 0), 0);
    m.id = b;
    assert_int_equal(send_conn(f, PMSG_MIDFRAME, &m, NULL, 0), 0);
    /* Capabilities, call id 1, protocol 1: the frame's end */
    static const uint8_t caps[] = {0x08, 0x01, 0x10, 0x01, 0x52, 0x00};
    struct pmsg_conn req = {.id = b, .total = sizeof(caps), .data = caps, .data_len = sizeof(caps)};
    assert_int_equal(send_conn(f, PMSG_REQUEST, &req, NULL, 0), 0);
    assert_int_equal(server_conn_count(f->d.server), 3);
    /* its answer written to the client (else it may be cut too) */
    assert_true(got_from_parent(f, PMSG_OUT, &out, NULL));
    assert_true(out.id == b);
    struct pmsg_conn dr = {.id = b, .count = (uint32_t)out.data_len};
    assert_int_equal(send_conn(f, PMSG_DRAINED, &dr, NULL, 0), 0);
    /* the process dies: a is closed, b and c are handed to the next one */
    restart(f);
    assert_int_equal(server_conn_count(f->d.server), 2);
    struct pmsg_conn ad;
    int fd = -1;
    assert_true(got_from_parent(f, PMSG_CONN_ADOPT, &ad, &fd));
    assert_true(ad.id == b || ad.id == c);
    close(fd);
    fd = -1;
    assert_true(got_from_parent(f, PMSG_CONN_ADOPT, &ad, &fd));
    assert_true(ad.id == b || ad.id == c);
    close(fd);
}

/* Messages the parent had not read when the process died: a connection
 * they name is closed, not handed over; the others are. */
static void test_unread_messages_of_the_dead(void **state) {
    struct fx *f = *state;
    uint64_t a, b;
    uint8_t buf[PMSG_MAX_BYTES];
    size_t len;

    assert_int_equal(open_client(f, &a), 0);
    assert_int_equal(open_client(f, &b), 0);
    struct pmsg_conn m = {.id = a};
    assert_int_equal(pmsg_encode_conn(PMSG_MIDFRAME, &m, buf, sizeof(buf), &len), 0);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_int_equal(pmsg_send(f->peer, buf, len, &devnull, 1), 0); /* sent, never read */
    close(devnull);
    unsigned before = open_fds();
    pproc_drain_for_test(&f->d);
    assert_int_equal(open_fds(), before); /* the fd that came with it: closed */
    restart(f);
    assert_int_equal(server_conn_count(f->d.server), 1);
    struct pmsg_conn ad;
    int fd = -1;
    assert_true(got_from_parent(f, PMSG_CONN_ADOPT, &ad, &fd));
    assert_true(ad.id == b);
    close(fd);
}

static int take_conn(struct fx *f, uint16_t type, const struct pmsg_conn *m, int *fds,
                     size_t nfds) {
    uint8_t buf[PMSG_MAX_BYTES];
    size_t len;
    assert_int_equal(pmsg_encode_conn(type, m, buf, sizeof(buf), &len), 0);
    return pproc_take(&f->d, 0, buf, len, fds, nfds);
}

/* 1: the pipe's write end is closed (its read end sees the end), 0: open. */
static int write_end_closed(int rfd) {
    char ch;
    ssize_t n = read(rfd, &ch, 1);
    if (n == 0)
        return 1;
    assert_true(n < 0 && errno == EAGAIN);
    return 0;
}

static void test_fds_held_until_the_process_closed_its_own(void **state) {
    struct fx *f = *state;
    uint64_t a;
    int pv[2];

    assert_int_equal(open_client(f, &a), 0);
    assert_int_equal(server_conn_count(f->d.server), 1);
    /* CONN_OPEN: the connection is the parent's only with FDS_CLOSED */
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
    int cl = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(cl, (struct sockaddr *)&sa, sizeof(sa)), 0);
    int acc = accept4(f->listener, NULL, NULL, SOCK_CLOEXEC);
    assert_true(acc >= 0);
    struct pmsg_conn o = {.id = f->next++};
    assert_int_equal(take_conn(f, PMSG_CONN_OPEN, &o, &acc, 1), 0);
    assert_int_equal(server_conn_count(f->d.server), 1);
    assert_int_equal(take_conn(f, PMSG_FDS_CLOSED, &o, NULL, 0), 0);
    assert_int_equal(server_conn_count(f->d.server), 2);
    /* FDS: the fd stays open until FDS_CLOSED (no closer here: closed at once then) */
    assert_int_equal(pipe2(pv, O_CLOEXEC | O_NONBLOCK), 0);
    struct pmsg_conn m = {.id = a}, other = {.id = o.id};
    assert_int_equal(take_conn(f, PMSG_FDS, &m, &pv[1], 1), 0);
    assert_int_equal(write_end_closed(pv[0]), 0);
    assert_int_equal(take_conn(f, PMSG_FDS_CLOSED, &other, NULL, 0), -EBADMSG);
    assert_int_equal(write_end_closed(pv[0]), 0);
    assert_int_equal(take_conn(f, PMSG_FDS_CLOSED, &m, NULL, 0), 0);
    assert_int_equal(write_end_closed(pv[0]), 1);
    close(pv[0]);
    /* FDS_CLOSED with nothing held */
    assert_int_equal(take_conn(f, PMSG_FDS_CLOSED, &m, NULL, 0), -EBADMSG);
    /* a client's message between a message with fds and its FDS_CLOSED;
     * then the process dies: what it held is let go */
    assert_int_equal(pipe2(pv, O_CLOEXEC | O_NONBLOCK), 0);
    assert_int_equal(take_conn(f, PMSG_FDS, &m, &pv[1], 1), 0);
    assert_int_equal(take_conn(f, PMSG_CONN_GONE, &other, NULL, 0), -EBADMSG);
    assert_int_equal(write_end_closed(pv[0]), 0);
    assert_int_equal(server_conn_count(f->d.server), 2); /* the GONE was not acted on */
    pproc_drain_for_test(&f->d);
    assert_int_equal(write_end_closed(pv[0]), 1);
    close(pv[0]);
    close(cl);
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void test_fds_never_closed_on_the_loop(void **state) {
    struct fx *f = *state;
    int server, listener;
    uint64_t a;

    assert_int_equal(closer_start(&f->d.closer), 0);
    assert_int_equal(open_client(f, &a), 0);
    /* with a malformed message (CONN_GONE carries no fd), and with FDS for a
     * connection the parent never knew as such (an id below the next, not
     * open): the parent is back at once, the close waits in _lyhd's queue */
    int l1 = lingering_socket(&server, &listener);
    struct pmsg_conn m = {.id = a};
    uint64_t t0 = now_ms();
    assert_int_equal(send_conn(f, PMSG_CONN_GONE, &m, &l1, 1), -EBADMSG);
    restart(f);
    int s2, li2;
    int l2 = lingering_socket(&s2, &li2);
    m.id = f->next - 1 > a ? a : f->next - 1;
    struct pmsg_conn gone = {.id = a};
    assert_int_equal(send_conn(f, PMSG_CONN_GONE, &gone, NULL, 0), 0);
    assert_int_equal(send_conn(f, PMSG_FDS, &m, &l2, 1), 0);
    assert_true(now_ms() - t0 < 1000); /* not the 30 s linger */
    assert_int_equal(closer_pending(f->d.closer, PROTO_UID), 2);
    /* _lyhd's closes wait; nobody else's is held up behind them (the
     * connection's own socket, root's here, closes meanwhile) */
    for (int i = 0; i < 200 && closer_pending(f->d.closer, 0) > 0; i++)
        usleep(10 * 1000);
    assert_int_equal(closer_pending(f->d.closer, 0), 0);
    assert_int_equal(closer_pending(f->d.closer, PROTO_UID), 2);
    /* shutting down: the server gone, a connection message's fd still goes
     * to the closer and the parent does not trip over the missing server */
    struct server *keep = f->d.server;
    f->d.server = NULL;
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_int_equal(send_conn(f, PMSG_FDS, &m, &devnull, 1), 0);
    f->d.server = keep;
    for (int i = 0; i < 300 && closer_pending(f->d.closer, PROTO_UID) > 0; i++) {
        closer_poke(f->d.closer, 100);
        usleep(10 * 1000);
    }
    assert_int_equal(closer_pending(f->d.closer, PROTO_UID), 0);
    closer_stop(f->d.closer);
    f->d.closer = NULL;
    close(server);
    close(listener);
    close(s2);
    close(li2);
}

/* One Capabilities request (call id 1) of connection id, answered at once. */
static void ask_caps(struct fx *f, uint64_t id) {
    static const uint8_t caps[] = {0x08, 0x01, 0x10, 0x01, 0x52, 0x00};
    struct pmsg_conn req = {.id = id, .total = sizeof(caps), .data = caps, .data_len = sizeof(caps)};
    assert_int_equal(send_conn(f, PMSG_REQUEST, &req, NULL, 0), 0);
}

/* One datagram from the parent, if one is there: its type, and its
 * connection (OUT, CONN_ADOPT) and length (OUT). */
static bool next_from_parent(struct fx *f, uint16_t *type, uint64_t *id, size_t *data_len) {
    static uint8_t buf[PMSG_MAX_BYTES];
    int fds[PMSG_RECV_FDS];
    size_t len, nfds = 0, pl_len;
    const uint8_t *pl;
    struct pmsg_conn m;

    if (pmsg_recv(f->peer, buf, sizeof(buf), &len, fds, &nfds) < 0)
        return false;
    pmsg_close_fds(fds, nfds);
    assert_int_equal(pmsg_header(buf, len, type, &pl, &pl_len), 0);
    *id = 0, *data_len = 0;
    if (*type == PMSG_OUT || *type == PMSG_CONN_ADOPT) {
        assert_int_equal(pmsg_decode_conn(*type, pl, pl_len, &m), 0);
        *id = m.id, *data_len = m.data_len;
    }
    return true;
}

#define BUSY 6 /* their windows together hold more than the socket */

/* The socket to the process holds 1 MiB only with SO_SNDBUFFORCE (as
 * pproc.c sizes it): without CAP_NET_ADMIN these tests cannot fill it. */
static bool sndbuf_forceable(void) {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), buf = 1 << 20;
    bool ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Connections ask until the socket to the process is full, then 100 more
 * each: those answers wait in the parent. */
static void fill_socket(struct fx *f, const uint64_t *ids, size_t n_ids) {
    int i;
    for (i = 0; i < 100000 && pproc_queued(&f->d, CONN_SOCK_MAX) < CONN_SOCK_MAX; i++)
        ask_caps(f, ids[(size_t)i % n_ids]);
    assert_true(i < 100000);
    for (i = 0; i < 100 * (int)n_ids; i++)
        ask_caps(f, ids[(size_t)i % n_ids]);
}

static void test_room_goes_round(void **state) {
    struct fx *f = *state;
    uint64_t busy[BUSY], c, id;
    uint16_t type;
    size_t n;

    if (!sndbuf_forceable())
        skip();
    f->d.cfg.max_conns = BUSY + 1;
    for (int k = 0; k < BUSY; k++)
        assert_int_equal(open_client(f, &busy[k]), 0);
    assert_int_equal(open_client(f, &c), 0);
    fill_socket(f, busy, BUSY);
    /* c asks once: its answer finds the socket full */
    ask_caps(f, c);
    /* the process reads all that is there (nothing of c's), and writes one
     * answer of the first busy one's to its client */
    size_t first_n = 0, outs = 0;
    while (next_from_parent(f, &type, &id, &n)) {
        if (type != PMSG_OUT)
            continue;
        assert_true(id != c);
        outs++;
        if (id == busy[0])
            first_n = n;
    }
    assert_true(outs > 100 && first_n > 0);
    struct pmsg_conn dr = {.id = busy[0], .count = (uint32_t)first_n};
    assert_int_equal(send_conn(f, PMSG_DRAINED, &dr, NULL, 0), 0);
    /* the room it made goes round: c's answer comes after at most one piece
     * of each busy one's */
    unsigned before_c = 0;
    bool got_c = false;
    while (!got_c && next_from_parent(f, &type, &id, &n)) {
        if (type != PMSG_OUT)
            continue;
        if (id == c)
            got_c = true;
        else
            before_c++;
    }
    if (!got_c || before_c > BUSY)
        fprintf(stderr, "c's answer: %s, after %u of the busy ones' pieces\n",
                got_c ? "came" : "did not come", before_c);
    assert_true(got_c);
    assert_true(before_c <= BUSY);
}

/* A new process hears of every connection (CONN_ADOPT) before any answer to
 * one: a connection still waiting for room when the last process died gets
 * its answer from the new one, after its ADOPT. */
static void test_adopted_before_answered(void **state) {
    struct fx *f = *state;
    uint64_t idle, busy[BUSY], c, id;
    uint16_t type;
    size_t n;

    if (!sndbuf_forceable())
        skip();
    f->d.cfg.max_conns = BUSY + 2;
    assert_int_equal(open_client(f, &idle), 0); /* the first slot: nothing to send */
    for (int k = 0; k < BUSY; k++)
        assert_int_equal(open_client(f, &busy[k]), 0);
    assert_int_equal(open_client(f, &c), 0);
    fill_socket(f, busy, BUSY);
    ask_caps(f, c); /* waits for room, nothing of it in flight */
    /* the process dies: the busy ones (answers in flight) are closed, idle
     * and c are handed to the next one */
    restart(f);
    assert_int_equal(server_conn_count(f->d.server), 2);
    bool adopted_idle = false, adopted_c = false, answered_c = false;
    while (next_from_parent(f, &type, &id, &n)) {
        if (type == PMSG_CONN_ADOPT) {
            adopted_idle |= id == idle;
            adopted_c |= id == c;
        }
        if (type != PMSG_OUT)
            continue;
        assert_true(id == c);
        if (!adopted_c)
            fprintf(stderr, "an answer to connection %llu came before its ADOPT\n",
                    (unsigned long long)c);
        assert_true(adopted_c);
        answered_c = true;
    }
    assert_true(adopted_idle && adopted_c && answered_c);
}

int main(void) {
    if (geteuid() != 0) {
        fprintf(stderr, "test_server: needs root (SIOCUNIXFILE); skipped\n");
        return 77;
    }
    if (unshare(CLONE_NEWNET) < 0 || !lo_up()) {
        fprintf(stderr, "test_server: cannot make a network namespace; skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pieces_come_together, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slots_stay_within_the_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_half_read_frame_is_not_handed_over, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unread_messages_of_the_dead, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fds_held_until_the_process_closed_its_own, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_fds_never_closed_on_the_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_room_goes_round, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adopted_before_answered, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
