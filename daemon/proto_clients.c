/* The protocol process's side of lyhd's clients (proto.h): it holds every
 * client connection, reads the frames and the fds that come with them,
 * decodes each request and checks its envelope, and hands the parent only
 * what passed, encoded again by protobuf-c (PMSG_REQUEST), with the fds.
 * What the parent answers (PMSG_OUT) it writes to the client as it came.
 *
 * Owns: the accepted sockets (the parent keeps a duplicate of each, reads
 * the peer's credentials from it itself, and hands it to the next protocol
 * process if this one dies), their frame readers, the fds waiting for their
 * frame, the bytes waiting for a client that does not read yet, and the
 * queue of messages for the parent. The parent writes every response frame
 * (a refusal from here goes up as PMSG_REFUSE) but one: a Capabilities call
 * on a connection the parent has said is idle (its last OUT carried
 * PMSG_OUT_IDLE and the count of every request and refusal handed to it
 * since: no call in flight, nothing of its own left to send), without fds,
 * is answered here from what PMSG_CAPS said. No answer of the parent's can
 * then come before or inside that frame, answers still come in request
 * order, and the bytes written of it are not in what DRAINED tells. It
 * never closes an fd a client sent (closing a client's lingering TCP socket
 * could hang this process): those go to the parent (PMSG_FDS, or with the
 * request or refusal), which closes them off its loop.
 *
 * Why the checks here and again in the parent: here, so that a malformed
 * request is never turned into bytes for the parent; there, because this
 * process may run an attacker's code once a parser here has a bug. */
#include "daemon/proto.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/frame.h"
#include "common/macros.h"
#include "daemon/closer.h"
#include "daemon/log.h"
#include "daemon/wire.h"

#define PC_READ_BUDGET   (256u << 10) /* bytes read from one client per event */
#define PC_MAX_QUEUED_FDS 16u         /* fds waiting for their frame */
#define PC_SCM_MAX_FD    253u         /* the kernel's SCM_MAX_FD: room for all of them */
/* The queue for the parent is one line for every client: what waits in it
 * delays every other client's next request. Reading from clients stops when
 * it holds more than this many messages (or bytes), and starts again below
 * the low marks; while it is not nearly empty, a read takes at most
 * PC_READ_SMALL bytes, so that one read cannot add thousands of tiny
 * requests at once (a client pipelining 16-byte frames).
 *
 * A client that has bytes to read while the queue is long waits in a line
 * of its own (p->line), and is read in its turn: one read of PC_READ_TURN
 * bytes, then the next client in line. Without the line, the clients whose
 * sockets the event loop happened to report first filled the room each time
 * it opened: a user pipelining on 16 connections kept another user's one
 * request unread for over 10 s (tests/e2e/hardening.sh, 8). */
#define PC_QUEUE_MSGS_HIGH 512u
#define PC_QUEUE_MSGS_LOW  128u
#define PC_QUEUE_HIGH    (4u << 20)
#define PC_QUEUE_LOW     (1u << 20)
#define PC_READ_SMALL    4096u
#define PC_READ_TURN     1024u /* one turn in line: at most ~80 of the smallest frames */
#define PC_TURNS_PER_PASS 64u  /* then other events run, and the line goes on after them */
#define PC_ACCEPT_RETRY_MS 250        /* out of fds: try accepting again after this */
/* What was written to a client is told to the parent (DRAINED) in batches:
 * at once from this many bytes, else after PC_DRAINED_MS. The parent's
 * window per connection (256 KiB) is far above both: a batch never stalls
 * it, and a small answer costs no message of its own. */
#define PC_DRAINED_BATCH (64u << 10)
#define PC_DRAINED_MS    5
/* Capabilities answered here in one read of a client's: beyond that they go
 * to the parent like any request, so the queue's limits and the line hold a
 * client that pipelines thousands of them as they hold any other. */
#define PC_LOCAL_PER_READ 64u
#define PC_CLOSES_BEHIND 64u  /* a user's fds waiting in our closer: beyond, it is not read */
/* A connection's requests handed to the parent that its last OUT did not
 * count as taken yet: at this many, it is not read until the parent says it
 * took more. The parent's pause (conn.h) reaches this process through the
 * same socket as its answers; while that socket is full, the pause waits
 * behind them, this process reads on and hands the parent more requests,
 * and their answers can pass the 8 MiB output limit, which closes the
 * connection (tests/e2e/test_daemon.c's non-reader case failed so, rarely,
 * after ~40,000 requests on this 2-CPU machine). The same stalled OUTs hold
 * this count back, so it bounds what is on its way: 8192 Capabilities
 * answers are ~1.6 MiB. Above the calls in flight a connection may have (at
 * most 4096, each silent until it answers), so that the OUTs of the others
 * always tell enough taken to read on. */
#define PC_AHEAD_MAX 8192u
#define PC_CLOSES_ALL    512u /* everyone's: beyond, nobody is (many uids: subuids) */
#define PC_CLOSES_TICK_MS 100 /* then: how often we look again */
#define PC_CLOSE_POKE_MS 1000 /* a worker's close longer than this is interrupted */

struct queued_fd {
    int fd;       /* -1: the kernel delivered more than fit (those were lost) */
    uint64_t tag; /* stream offset at the end of the read that delivered it */
};

struct pconn {
    struct proto *p;
    uint64_t id;
    int fd;
    struct ucred peer; /* for log lines only; the parent reads its own */
    struct frame_reader reader;
    uint64_t frame_started_ms;
    /* The frame timer counts only while lyhd reads this client: in line it
     * stops, and goes on with what was left (0: a frame not started yet). */
    uint32_t frame_left_ms;
    uint64_t timer_armed_ms;
    struct queued_fd fds[PC_MAX_QUEUED_FDS];
    unsigned n_fds;
    struct evbuffer *out;
    struct event *ev_read, *ev_write, *ev_timeout;
    bool paused;   /* the parent said so (its user's fds are being closed) */
    bool in_line;  /* waits in p->line for room in the queue to the parent */
    bool refused;   /* refused for good: the parent closes it */
    bool told_midframe; /* the parent knows a frame of it is half read (MIDFRAME) */
    uint32_t drained; /* written to the client, not told to the parent yet */
    uint32_t handed;  /* its requests and refusals queued for the parent */
    bool parent_idle; /* the parent's last OUT said idle, as of all of them */
    bool closes_wait; /* not read until its user's closes here catch up */
    uint32_t taken;   /* of those, what the parent's last OUT said it took */
    bool ahead_wait;  /* not read until the parent takes more (PC_AHEAD_MAX) */
    size_t own_left;  /* bytes of an answer of ours at the head of out */
    unsigned local_left; /* answers it may still get here in this read (PC_LOCAL_PER_READ) */
    TAILQ_ENTRY(pconn) link;
    TAILQ_ENTRY(pconn) line_link;
};

/* A message for the parent that did not fit its socket yet. */
struct outmsg {
    uint64_t conn; /* the client connection it is about */
    uid_t uid;     /* its user, (uid_t)-1 unknown: the closer's queue for its fds */
    size_t len, nfds;
    int fds[PMSG_MAX_FDS];
    TAILQ_ENTRY(outmsg) link;
    uint8_t buf[];
};

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void serve_line_soon(struct proto *p);
static void resume_accept(struct proto *p);
static void closes_watch(struct proto *p);
static struct pconn *find(struct proto *p, uint64_t id);
static void on_writable(evutil_socket_t fd, short what, void *arg);

/* ---- the queue to the parent ------------------------------------------------------- */

/* FDS_CLOSED for the message with fds sent last: its sockets are closed
 * here by now (the rest queued on our closer), and the parent acts
 * on that message only once it has this one. So a client's socket is
 * closed last by the parent (on its closer), never here: a TCP socket with
 * SO_LINGER and data its peer does not read waits in its last close, and
 * this loop serves every client of lyhd. */
static int send_fds_closed(struct proto *p) {
    struct pmsg_conn c = {.id = p->fds_closed_due};
    uint8_t buf[PMSG_HDR_BYTES + 8];
    size_t len;
    int r = pmsg_encode_conn(PMSG_FDS_CLOSED, &c, buf, sizeof(buf), &len);

    if (r == 0)
        r = pmsg_send(p->sock, buf, len, NULL, 0);
    if (r == 0)
        p->fds_closed_due = 0;
    return r;
}

/* Our copy of an fd the parent holds now (and acts on only after our
 * FDS_CLOSED: this close is never the last one). A socket's close that is
 * not the last never waits: at once. Anything else may (a FUSE or NFS
 * file's FLUSH goes to its server at every close, and waits for the answer
 * whatever the signals): on our closer's workers, so a user's FUSE server
 * that never answers holds a worker and that user's closes, never this
 * loop (see PC_CLOSES_BEHIND). */
static void close_sent(struct proto *p, uid_t uid, int fd) {
    int type;
    socklen_t len = sizeof(type);

    /* Is it a socket: asked of the fd, never of a file system (an fstat of a
     * FUSE file asks its server, who need not answer). Pipes go to the
     * workers too. */
    if (!p->closer || getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0) {
        close(fd);
        return;
    }
    closer_queue(p->closer, uid, fd);
    closes_watch(p);
}

static void flush_queue(struct proto *p) {
    struct outmsg *m;

    for (;;) {
        int r;
        m = NULL;
        if (p->fds_closed_due)
            r = send_fds_closed(p);
        else if ((m = TAILQ_FIRST(&p->outq)))
            r = pmsg_send(p->sock, m->buf, m->len, m->fds, m->nfds);
        else
            break;
        if (r == -EAGAIN) {
            event_add(p->ev_sock_write, NULL);
            return;
        }
        if (r < 0) { /* the parent is gone: its end of file ends us */
            log_error_errno(-r, "cannot send to lyhd");
            event_base_loopbreak(p->base);
            return;
        }
        if (!m)
            continue;
        TAILQ_REMOVE(&p->outq, m, link);
        p->outq_bytes -= m->len;
        p->outq_n--;
        for (size_t i = 0; i < m->nfds; i++)
            close_sent(p, m->uid, m->fds[i]);
        if (m->nfds)
            p->fds_closed_due = m->conn;
        free(m);
    }
    event_del(p->ev_sock_write);
    if (p->outq_bytes < PC_QUEUE_LOW && p->outq_n < PC_QUEUE_MSGS_LOW)
        serve_line_soon(p);
}

void clients_on_sock_writable(struct proto *p) { flush_queue(p); }

/* One message for the parent, encoded (its fds are taken only once queued).
 * NULL: a bug or no memory (logged). */
static struct outmsg *outmsg_new(uint16_t type, const struct pmsg_conn *c, uid_t uid,
                                 const int *fds, size_t nfds) {
    uint8_t buf[PMSG_MAX_BYTES];
    size_t len;
    int r = pmsg_encode_conn(type, c, buf, sizeof(buf), &len);
    struct outmsg *m = r == 0 ? malloc(sizeof(*m) + len) : NULL;

    if (!m) {
        log_error("cannot queue a message for lyhd (type %u): %s", type,
                  strerror(r < 0 ? -r : ENOMEM));
        return NULL;
    }
    memcpy(m->buf, buf, len);
    m->conn = c->id;
    m->uid = uid;
    m->len = len;
    m->nfds = nfds;
    if (nfds)
        memcpy(m->fds, fds, nfds * sizeof(int));
    return m;
}

static void enqueue(struct proto *p, struct outmsg *m) {
    TAILQ_INSERT_TAIL(&p->outq, m, link);
    p->outq_bytes += m->len;
    p->outq_n++;
}

/* Queue one message (its fds are taken: closed here once sent). In order
 * with every other message of this file. */
static int queue(struct proto *p, uint16_t type, const struct pmsg_conn *c, int *fds,
                 size_t nfds) {
    struct pconn *pc = nfds ? find(p, c->id) : NULL;
    struct outmsg *m = outmsg_new(type, c, pc ? pc->peer.uid : (uid_t)-1, fds, nfds);

    if (!m) {
        /* The fds go nowhere: closing them here could be the last close
         * (see send_fds_closed), so they stay open until the process exits
         * (the kernel's closes at exit never wait on a linger). Only when
         * out of memory. */
        if (nfds)
            log_error("out of memory: %zu fds of a client's kept until this process ends", nfds);
        return -ENOMEM;
    }
    enqueue(p, m);
    if (TAILQ_FIRST(&p->outq) == m)
        flush_queue(p);
    return 0;
}

/* Fds for the parent to close, up to PMSG_MAX_FDS at a time. */
static void give_fds(struct pconn *c, int *fds, size_t n) {
    struct pmsg_conn m = {.id = c->id};

    for (size_t i = 0; i < n; i += PMSG_MAX_FDS) {
        size_t k = n - i < PMSG_MAX_FDS ? n - i : PMSG_MAX_FDS;
        (void)queue(c->p, PMSG_FDS, &m, fds + i, k);
    }
}

/* ---- one connection ----------------------------------------------------------------- */

static void pconn_free(struct pconn *c) {
    struct proto *p = c->p;

    TAILQ_REMOVE(&p->conns, c, link);
    p->n_conns--;
    if (c->in_line)
        TAILQ_REMOVE(&p->line, c, line_link);
    if (c->ev_read)
        event_free(c->ev_read);
    if (c->ev_write)
        event_free(c->ev_write);
    if (c->ev_timeout)
        event_free(c->ev_timeout);
    if (c->out)
        evbuffer_free(c->out);
    frame_reader_done(&c->reader);
    /* Only a connection that did not end (pconn_end hands the socket to
     * the parent): at exit, or one never handed over or adopted, whose fds
     * the kernel releases here (at exit without waiting on a linger). */
    CLOSE_FD(c->fd);
    free(c);
    resume_accept(p);
}

/* The connection ends on our side: its waiting fds and its socket to the
 * parent, the parent told. The socket goes too: the parent may have closed
 * its own copy already (a connection it turned away), and fds the client
 * sent that nobody read yet are released with the socket's last close,
 * which must then be the parent's, on its closer (see send_fds_closed). */
static void pconn_end(struct pconn *c, const char *why) {
    struct pmsg_conn m = {.id = c->id};
    int fds[PC_MAX_QUEUED_FDS + 1];
    size_t n = 0;

    log_debug("client %llu (uid %u pid %d): %s", (unsigned long long)c->id, c->peer.uid,
              c->peer.pid, why);
    for (unsigned i = 0; i < c->n_fds; i++)
        if (c->fds[i].fd >= 0)
            fds[n++] = c->fds[i].fd;
    c->n_fds = 0;
    if (c->fd >= 0) {
        /* its events go first: libevent must not watch an fd number that
         * is closed (and reused) once the parent has it */
        if (c->ev_read)
            event_del(c->ev_read);
        if (c->ev_write)
            event_del(c->ev_write);
        fds[n++] = TAKE_FD(c->fd);
    }
    give_fds(c, fds, n);
    uint64_t id = c->id;
    struct proto *p = c->p;
    pconn_free(c);
    m.id = id;
    (void)queue(p, PMSG_CONN_GONE, &m, NULL, 0);
}

static struct pconn *find(struct proto *p, uint64_t id) {
    struct pconn *c;
    TAILQ_FOREACH(c, &p->conns, link)
        if (c->id == id)
            return c;
    return NULL;
}

/* Refused here: the parent answers (and records it), the fds go with it. */
static void refuse(struct pconn *c, uint64_t call_id, int code, bool close_conn, const char *text,
                   int *fds, size_t nfds) {
    struct pmsg_conn m = {.id = c->id,
                          .call_id = close_conn ? 0 : call_id,
                          .code = (uint8_t)code,
                          .flags = close_conn ? PMSG_REFUSE_CLOSE : 0};

    /* printable ASCII only (the parent checks): anything else becomes '?' */
    snprintf(m.text, sizeof(m.text), "%s", text);
    for (char *t = m.text; *t; t++)
        if (*t < 0x20 || *t > 0x7e)
            *t = '?';
    c->parent_idle = false;
    if (queue(c->p, PMSG_REFUSE, &m, fds, nfds) == 0)
        c->handed++;
}

/* The fds that came with the frame ending at stream offset end (as conn.c
 * did when lyhd read its clients itself: the kernel stops a read at the end
 * of the sendmsg that carried fds, so the frame they came with ends at or
 * after that offset). overflow: more than max, or some were lost. */
static unsigned take_frame_fds(struct pconn *c, uint64_t end, int *out, unsigned max,
                               bool *overflow) {
    unsigned n = 0, keep = 0;

    *overflow = false;
    for (unsigned i = 0; i < c->n_fds; i++) {
        if (c->fds[i].tag > end) {
            c->fds[keep++] = c->fds[i];
            continue;
        }
        if (c->fds[i].fd < 0 || n >= max)
            *overflow = true;
        if (c->fds[i].fd >= 0)
            out[n++] = c->fds[i].fd; /* all of them: the parent closes them */
    }
    c->n_fds = keep;
    return n;
}

static void send_request(struct pconn *c, const LyhRequest *req, int *fds, size_t nfds) {
    size_t len = lianyaohu__v1__request__get_packed_size(req);
    _cleanup_free_ uint8_t *bytes = NULL;
    struct pmsg_conn m = {.id = c->id};
    TAILQ_HEAD(, outmsg) pieces = TAILQ_HEAD_INITIALIZER(pieces);
    struct outmsg *o;

    if (len > PMSG_REQUEST_MAX || !(bytes = malloc(len ? len : 1))) {
        refuse(c, req->call_id, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, false,
               len > PMSG_REQUEST_MAX ? "request too large" : "lyhd is out of memory", fds, nfds);
        return;
    }
    lianyaohu__v1__request__pack(req, bytes);
    /* Every piece made before any is queued: the parent takes them only
     * together, in order, so it is all of them or none (a refusal). */
    m.total = (uint32_t)len;
    do {
        m.data = bytes + m.offset;
        m.data_len = len - m.offset < PMSG_CHUNK ? len - m.offset : PMSG_CHUNK;
        bool last = m.offset + m.data_len == len;
        if (!(o = outmsg_new(PMSG_REQUEST, &m, c->peer.uid, last ? fds : NULL, last ? nfds : 0))) {
            while ((o = TAILQ_FIRST(&pieces))) {
                TAILQ_REMOVE(&pieces, o, link);
                free(o);
            }
            refuse(c, req->call_id, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, false,
                   "lyhd is out of memory", fds, nfds);
            return;
        }
        TAILQ_INSERT_TAIL(&pieces, o, link);
        m.offset += (uint32_t)m.data_len;
    } while (m.offset < len);
    bool was_empty = TAILQ_EMPTY(&c->p->outq);
    c->parent_idle = false;
    c->handed++;
    while ((o = TAILQ_FIRST(&pieces))) {
        TAILQ_REMOVE(&pieces, o, link);
        enqueue(c->p, o);
    }
    if (was_empty)
        flush_queue(c->p);
}

/* What was written to the client since the last DRAINED, told. */
static void tell_drained(struct pconn *c) {
    struct pmsg_conn m = {.id = c->id, .count = c->drained};
    if (c->drained == 0)
        return;
    c->drained = 0;
    (void)queue(c->p, PMSG_DRAINED, &m, NULL, 0);
}

/* Answer a Capabilities call here (see the top of this file): only on an
 * idle connection whose output is all written and all read by the client
 * (SIOCOUTQ 0: so the answer goes whole in one write, and a death of this
 * process can never leave half of one of ours, which the parent could not
 * know of, in front of the parent's next frame), without fds, for a frame the
 * parent was not told is half read (MIDFRAME: its REQUEST ends that for the
 * parent). false: the parent answers it. */
static bool answer_capabilities(struct pconn *c, const LyhRequest *req, unsigned n_fds,
                                bool told_midframe) {
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
    uint8_t frame[1024];
    size_t len;

    if (req->method_case != LIANYAOHU__V1__REQUEST__METHOD_CAPABILITIES || !c->p->have_caps ||
        !c->parent_idle || n_fds || told_midframe || c->local_left == 0 ||
        evbuffer_get_length(c->out) != 0)
        return false;
    int unread = -1;
    if (ioctl(c->fd, SIOCOUTQ, &unread) < 0 || unread != 0)
        return false;
    resp.call_id = req->call_id;
    resp.end_of_stream = true;
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_CAPABILITIES;
    resp.capabilities = &c->p->caps.msg;
    if (wire_response_frame_into(&resp, frame, sizeof(frame), &len) < 0 ||
        evbuffer_add(c->out, frame, len) < 0)
        return false;
    c->own_left = len;
    c->local_left--;
    on_writable(c->fd, EV_WRITE, c);
    return true;
}

static void handle_frame(struct pconn *c, const uint8_t *body, uint32_t len, uint64_t end,
                         bool told_midframe) {
    struct proto *p = c->p;
    int fds[PC_MAX_QUEUED_FDS];
    bool overflow, close_conn;
    unsigned n_fds = take_frame_fds(c, end, fds, p->max_fds, &overflow);
    LyhRequest *req = NULL;
    char msg[PMSG_TEXT_MAX];
    int code;

    if (wire_request_decode(body, len, &req) < 0) {
        give_fds(c, fds, n_fds);
        pconn_end(c, "malformed request");
        return;
    }
    if (n_fds > PMSG_MAX_FDS) { /* beyond what one message carries: the rest apart */
        give_fds(c, fds + PMSG_MAX_FDS, n_fds - PMSG_MAX_FDS);
        n_fds = PMSG_MAX_FDS;
        overflow = true;
    }
    code = wire_envelope_check(req, body, len, n_fds, overflow, p->max_fds, msg, sizeof(msg),
                               &close_conn);
    if (code == 0 && req->deadline_ms > 0 && mono_ms() - c->frame_started_ms > req->deadline_ms) {
        snprintf(msg, sizeof(msg), "deadline of %u ms passed before the request was complete",
                 req->deadline_ms);
        code = LIANYAOHU__V1__CODE__DEADLINE_EXCEEDED;
    }
    if (code != 0)
        refuse(c, req->call_id, code, close_conn, msg, fds, n_fds);
    else if (!answer_capabilities(c, req, n_fds, told_midframe))
        send_request(c, req, fds, n_fds);
    wire_request_free(req);
}

/* Queue the fds of one read. -E2BIG: more than a frame could ever carry
 * came without one (the connection is then refused: they all go to the
 * parent). */
static int queue_fds(struct pconn *c, struct msghdr *mh, uint64_t tag) {
    int extra[PC_SCM_MAX_FD];
    size_t n_extra = 0;

    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (c->n_fds < PC_MAX_QUEUED_FDS)
                c->fds[c->n_fds++] = (struct queued_fd){.fd = fd, .tag = tag};
            else if (n_extra < ARRAY_SIZE(extra))
                extra[n_extra++] = fd;
        }
    }
    bool lost = (mh->msg_flags & MSG_CTRUNC) != 0;
    if (n_extra || (lost && c->n_fds >= PC_MAX_QUEUED_FDS)) {
        give_fds(c, extra, n_extra);
        return -E2BIG;
    }
    /* the frame these came with is refused, not run with fewer fds than sent */
    if (lost)
        c->fds[c->n_fds++] = (struct queued_fd){.fd = -1, .tag = tag};
    return 0;
}

static void arm_timeout(struct pconn *c) {
    if (frame_reader_partial(&c->reader)) {
        if (!event_pending(c->ev_timeout, EV_TIMEOUT, NULL)) {
            uint32_t ms = c->frame_left_ms ? c->frame_left_ms : c->p->frame_timeout_ms;
            struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
            c->frame_left_ms = ms;
            c->timer_armed_ms = mono_ms();
            event_add(c->ev_timeout, &tv);
        }
    } else {
        event_del(c->ev_timeout);
        c->frame_left_ms = 0;
    }
}

/* Stop the frame timer, keeping what is left of it for arm_timeout. */
static void hold_timeout(struct pconn *c) {
    if (!event_pending(c->ev_timeout, EV_TIMEOUT, NULL))
        return;
    uint64_t ran = mono_ms() - c->timer_armed_ms;
    c->frame_left_ms = ran >= c->frame_left_ms ? 1 : c->frame_left_ms - (uint32_t)ran;
    event_del(c->ev_timeout);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct pconn *c = arg;
    log_warn("client uid %u pid %d did not finish a frame within %u ms; dropped", c->peer.uid,
             c->peer.pid, c->p->frame_timeout_ms);
    pconn_end(c, "frame timeout");
}

static bool queue_long(const struct proto *p) {
    return p->outq_bytes > PC_QUEUE_HIGH || p->outq_n > PC_QUEUE_MSGS_HIGH;
}

/* Stop watching c's socket: it is read in its turn (serve_line). Its frame
 * timer stops too (while it waits, lyhd does not read the frame), and goes on
 * from where it stopped: turns in line never give a slow client more time. */
static void get_in_line(struct pconn *c) {
    if (c->in_line)
        return;
    c->in_line = true;
    event_del(c->ev_read);
    hold_timeout(c);
    TAILQ_INSERT_TAIL(&c->p->line, c, line_link);
}

enum read_end {
    READ_EMPTY, /* its socket most likely holds nothing more */
    READ_MORE,  /* the budget is spent; more may wait */
    READ_LINE,  /* the queue to the parent is long: it waits in line */
    READ_GONE,  /* the connection ended (freed) */
    READ_WAIT,  /* its user's closes here are behind: not read until they catch up */
};

/* Its user's fds wait in our closer beyond PC_CLOSES_BEHIND (one of them
 * hangs a worker, most likely: a FUSE server that does not answer), or
 * everyone's beyond PC_CLOSES_ALL (a user with many uids). */
static bool closes_behind(const struct pconn *c) {
    return c->p->closer && (closer_pending(c->p->closer, c->peer.uid) > PC_CLOSES_BEHIND ||
                            closer_total_pending(c->p->closer) > PC_CLOSES_ALL);
}

/* Closes are pending here: the tick runs until none are. */
static void closes_watch(struct proto *p) {
    struct timeval tv = {0, PC_CLOSES_TICK_MS * 1000};
    if (p->ev_closes && !evtimer_pending(p->ev_closes, NULL))
        evtimer_add(p->ev_closes, &tv);
}

/* Interrupt a close that waits on a linger; read again from the clients
 * whose closes caught up. */
static void on_closes_tick(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct proto *p = arg;
    struct pconn *c;

    closer_poke(p->closer, PC_CLOSE_POKE_MS);
    TAILQ_FOREACH(c, &p->conns, link) {
        if (!c->closes_wait || closes_behind(c))
            continue;
        c->closes_wait = false;
        log_info("reading from uid %u pid %d again: its file descriptors are closed", c->peer.uid,
                 c->peer.pid);
        if (!c->paused && !c->refused && !c->in_line && !c->ahead_wait)
            event_add(c->ev_read, NULL);
    }
    if (closer_total_pending(p->closer) > 0)
        closes_watch(p);
}

/* Read what c sent, up to budget bytes, and queue its whole frames for the
 * parent. */
static enum read_end read_some(struct pconn *c, size_t budget) {
    struct proto *p = c->p;
    static uint8_t buf[64 * 1024];
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(sizeof(int) * PC_SCM_MAX_FD)];
    } ctl;
    uint64_t id = c->id;
    enum read_end how = READ_MORE;

    c->local_left = PC_LOCAL_PER_READ;
    while (budget > 0) {
        if (closes_behind(c)) {
            if (!c->closes_wait)
                log_warn("protocol process: not reading from uid %u pid %d for now: %u of its "
                         "file descriptors are still being closed here",
                         c->peer.uid, c->peer.pid, closer_pending(p->closer, c->peer.uid));
            c->closes_wait = true;
            event_del(c->ev_read);
            closes_watch(p);
            how = READ_WAIT;
            break;
        }
        if (c->handed - c->taken >= PC_AHEAD_MAX) {
            /* the next OUT of the parent reads on; its frame timer waits too,
             * as in line: lyhd is behind, not the client */
            c->ahead_wait = true;
            event_del(c->ev_read);
            hold_timeout(c);
            return READ_WAIT;
        }
        if (queue_long(p)) {
            /* the parent is behind: wait for it, in turn */
            get_in_line(c);
            return READ_LINE;
        }
        size_t want = p->outq_n < PC_QUEUE_MSGS_LOW && TAILQ_EMPTY(&p->line) ? sizeof(buf)
                                                                             : PC_READ_SMALL;
        struct iovec iov = {.iov_base = buf, .iov_len = want < budget ? want : budget};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                            .msg_controllen = sizeof(ctl.b)};
        ssize_t n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            how = READ_EMPTY;
            break;
        }
        if (n <= 0) {
            /* fds that came with the last bytes are queued: they go too */
            if (n == 0)
                (void)queue_fds(c, &mh, c->reader.offset);
            pconn_end(c, n == 0 ? "client closed" : "read failed");
            return READ_GONE;
        }
        budget -= (size_t)n < budget ? (size_t)n : budget;
        if (queue_fds(c, &mh, c->reader.offset + (uint64_t)n) < 0) {
            /* the parent answers and closes it; nothing more is read */
            int fds[PC_MAX_QUEUED_FDS];
            size_t k = 0;
            for (unsigned i = 0; i < c->n_fds; i++)
                if (c->fds[i].fd >= 0)
                    fds[k++] = c->fds[i].fd;
            c->n_fds = 0;
            give_fds(c, fds, k);
            refuse(c, 0, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, true,
                   "too many file descriptors sent without a frame to carry them", NULL, 0);
            c->refused = true;
            event_del(c->ev_read);
            event_del(c->ev_timeout);
            return READ_EMPTY;
        }
        for (size_t off = 0; off < (size_t)n;) {
            bool done = false;
            if (!frame_reader_partial(&c->reader)) {
                c->frame_started_ms = mono_ms();
                c->frame_left_ms = 0; /* a new frame: the whole timeout */
            }
            ssize_t used = frame_reader_feed(&c->reader, buf + off, (size_t)n - off, &done);
            if (used < 0) {
                pconn_end(c, used == -EMSGSIZE ? "frame larger than the limit"
                                               : "malformed frame header");
                return READ_GONE;
            }
            off += (size_t)used;
            if (done) {
                uint32_t len;
                uint64_t start, end;
                _cleanup_free_ uint8_t *body = frame_reader_take(&c->reader, &len, &start, &end);
                event_del(c->ev_timeout);
                bool told = c->told_midframe;
                c->told_midframe = false; /* its REQUEST or REFUSE ends it for the parent */
                handle_frame(c, body, len, end, told);
                if (!find(p, id)) /* it ended (a malformed request) */
                    return READ_GONE;
            }
        }
        /* Bytes of a frame read and not yet sent on: if this process died
         * now, the next one would read the rest of it as a new frame. The
         * parent hears it (once per frame; most frames come whole in one
         * read and cost nothing) and closes such a connection instead of
         * handing it over. */
        if (frame_reader_partial(&c->reader) && !c->told_midframe) {
            struct pmsg_conn m = {.id = c->id};
            c->told_midframe = true;
            (void)queue(p, PMSG_MIDFRAME, &m, NULL, 0);
        }
        /* A short read most likely emptied the socket: no second recvmsg
         * just to hear EAGAIN (the event is level-triggered: it says if not). */
        if ((size_t)n < iov.iov_len) {
            how = READ_EMPTY;
            break;
        }
    }
    arm_timeout(c);
    return how;
}

static void on_readable(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct pconn *c = arg;

    /* others wait for room already: this one waits behind them */
    if (!TAILQ_EMPTY(&c->p->line)) {
        get_in_line(c);
        return;
    }
    (void)read_some(c, PC_READ_BUDGET);
}

/* Once the queue to the parent has room again: each client in line gets one
 * turn (a read of PC_READ_TURN bytes), in order, until the queue is long
 * long again; one with more to read goes to the back of the line. */
static void serve_line(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct proto *p = arg;
    struct pconn *c;

    for (unsigned turn = 0; turn < PC_TURNS_PER_PASS; turn++) {
        if (queue_long(p) || !(c = TAILQ_FIRST(&p->line)))
            return; /* the queue's next drain calls again */
        TAILQ_REMOVE(&p->line, c, line_link);
        c->in_line = false;
        if (c->paused || c->refused) {
            /* the parent's word to go on adds its read event again; a pause
             * is the client's own doing (its fds, its unread answers): the
             * frame timer goes on */
            if (!c->refused)
                arm_timeout(c);
            continue;
        }
        switch (read_some(c, PC_READ_TURN)) {
        case READ_MORE:
            get_in_line(c);
            break;
        case READ_EMPTY:
            if (!c->refused)
                event_add(c->ev_read, NULL);
            break;
        case READ_LINE:
        case READ_GONE:
        case READ_WAIT:
            break;
        }
    }
    serve_line_soon(p);
}

static void serve_line_soon(struct proto *p) {
    if (p->ev_serve && !TAILQ_EMPTY(&p->line) && !queue_long(p))
        event_active(p->ev_serve, EV_TIMEOUT, 0);
}

static void on_writable(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct pconn *c = arg;
    size_t before = evbuffer_get_length(c->out);

    while (evbuffer_get_length(c->out) > 0) {
        int n = evbuffer_write(c->out, c->fd);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        if (n <= 0) {
            pconn_end(c, "write failed");
            return;
        }
    }
    size_t written = before - evbuffer_get_length(c->out);
    size_t own = written < c->own_left ? written : c->own_left;
    c->own_left -= own; /* ours: not the parent's to count */
    written -= own;
    if (evbuffer_get_length(c->out) == 0)
        event_del(c->ev_write);
    else
        event_add(c->ev_write, NULL);
    if (written) {
        c->drained += (uint32_t)written;
        if (c->drained >= PC_DRAINED_BATCH)
            tell_drained(c);
        else if (!evtimer_pending(c->p->ev_drained, NULL)) {
            struct timeval tv = {0, PC_DRAINED_MS * 1000};
            evtimer_add(c->p->ev_drained, &tv);
        }
    }
}

static void on_drained_timer(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct proto *p = arg;
    struct pconn *c;
    TAILQ_FOREACH(c, &p->conns, link)
        tell_drained(c);
}

static struct pconn *pconn_new(struct proto *p, uint64_t id, int fd) {
    struct pconn *c = calloc(1, sizeof(*c));
    socklen_t cl = sizeof(c ? c->peer : (struct ucred){0});

    if (!c)
        return NULL;
    c->p = p;
    c->id = id;
    c->fd = fd;
    (void)getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->peer, &cl);
    frame_reader_init(&c->reader, LYH_MAX_FRAME_BYTES);
    c->out = evbuffer_new();
    c->ev_read = event_new(p->base, fd, EV_READ | EV_PERSIST, on_readable, c);
    c->ev_write = event_new(p->base, fd, EV_WRITE, on_writable, c);
    c->ev_timeout = evtimer_new(p->base, on_timeout, c);
    TAILQ_INSERT_TAIL(&p->conns, c, link);
    p->n_conns++;
    if (!c->out || !c->ev_read || !c->ev_write || !c->ev_timeout ||
        event_add(c->ev_read, NULL) < 0) {
        c->fd = -1; /* the caller's to close */
        pconn_free(c);
        return NULL;
    }
    return c;
}

/* ---- accepting ---------------------------------------------------------------------- */

/* Out of fds: the reserve (a spare fd kept for this) is let go so that the
 * waiting client can be accepted and closed (it sees the end of the
 * stream, not a hang), and accepting stops until a connection closes. The
 * close is on the closer, under the client's uid: the client may have sent
 * fds before it was accepted, and that close is their last reference (a
 * lingering TCP socket's waits). */
static void out_of_fds(struct proto *p, int lfd) {
    CLOSE_FD(p->reserve_fd);
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) {
        struct ucred cred = {.uid = (uid_t)-1};
        socklen_t len = sizeof(cred);
        (void)getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
        closer_queue(p->closer, cred.uid, fd);
        closes_watch(p);
    }
    p->reserve_fd = dup(p->sock);
    if (!p->accept_paused) {
        log_warn("out of file descriptors; not accepting until a connection closes");
        p->accept_paused = true;
        event_del(p->ev_accept);
        struct timeval tv = {0, PC_ACCEPT_RETRY_MS * 1000};
        event_add(p->ev_accept_retry, &tv);
    }
}

static void on_accept(evutil_socket_t lfd, short what, void *arg) {
    (void)what;
    struct proto *p = arg;

    for (int i = 0; i < 64 && !p->accept_paused; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE)
                out_of_fds(p, lfd);
            return;
        }
        uint64_t id = p->next_id;
        struct pmsg_conn m = {.id = id};
        int dup_fd = dup(fd); /* this process never execs */
        if (dup_fd < 0) {
            close(fd);
            out_of_fds(p, lfd);
            return;
        }
        if (!pconn_new(p, id, fd)) {
            log_error("cannot take a client connection: out of memory");
            close(dup_fd);
            close(fd);
            continue;
        }
        p->next_id++;
        /* the parent gets its own: its credentials, read by the parent */
        (void)queue(p, PMSG_CONN_OPEN, &m, &dup_fd, 1);
    }
}

/* Accept again once the reserve fd can be taken back. */
static void resume_accept(struct proto *p) {
    if (!p->accept_paused)
        return;
    if (p->reserve_fd < 0)
        p->reserve_fd = dup(p->sock);
    if (p->reserve_fd < 0) {
        struct timeval tv = {0, PC_ACCEPT_RETRY_MS * 1000};
        event_add(p->ev_accept_retry, &tv);
        return;
    }
    p->accept_paused = false;
    event_del(p->ev_accept_retry);
    event_add(p->ev_accept, NULL);
    log_info("fds available again; accepting connections");
}

static void on_accept_retry(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    resume_accept(arg);
}

/* ---- the parent's messages ------------------------------------------------------------ */

int clients_listen(struct proto *p, const struct pmsg_conn *m, int fd) {
    if (p->listen_fd >= 0) {
        close(fd);
        return -EBADMSG;
    }
    p->listen_fd = fd;
    p->next_id = m->id;
    p->frame_timeout_ms = m->count;
    p->max_fds = m->code;
    p->reserve_fd = dup(p->sock);
    p->ev_accept = event_new(p->base, fd, EV_READ | EV_PERSIST, on_accept, p);
    p->ev_accept_retry = evtimer_new(p->base, on_accept_retry, p);
    p->ev_drained = evtimer_new(p->base, on_drained_timer, p);
    p->ev_serve = event_new(p->base, -1, 0, serve_line, p);
    p->ev_closes = evtimer_new(p->base, on_closes_tick, p);
    if (!p->ev_accept || !p->ev_accept_retry || !p->ev_drained || !p->ev_serve || !p->ev_closes ||
        event_add(p->ev_accept, NULL) < 0)
        return -ENOMEM;
    return 0;
}

int clients_adopt(struct proto *p, const struct pmsg_conn *m, int fd) {
    if (p->listen_fd < 0 || m->id >= p->next_id || find(p, m->id)) {
        close(fd); /* the parent keeps its own */
        return -EBADMSG;
    }
    if (!pconn_new(p, m->id, fd)) {
        struct pmsg_conn g = {.id = m->id};
        close(fd);
        (void)queue(p, PMSG_CONN_GONE, &g, NULL, 0);
    }
    return 0;
}

void clients_on_message(struct proto *p, uint16_t type, const struct pmsg_conn *m) {
    struct pconn *c = find(p, m->id);

    if (!c) /* it ended here already: the parent hears CONN_GONE */
        return;
    switch (type) {
    case PMSG_OUT:
        if (evbuffer_add(c->out, m->data, m->data_len) < 0) {
            pconn_end(c, "out of memory");
            return;
        }
        c->parent_idle = (m->flags & PMSG_OUT_IDLE) && m->count == c->handed;
        c->taken = m->count;
        if (c->ahead_wait && c->handed - c->taken < PC_AHEAD_MAX) {
            c->ahead_wait = false;
            if (!c->paused && !c->refused && !c->in_line && !c->closes_wait)
                event_add(c->ev_read, NULL);
        }
        on_writable(c->fd, EV_WRITE, c);
        break;
    case PMSG_CONN_CLOSE:
        /* what the parent sent before it (a refusal) goes out if it can */
        if (evbuffer_get_length(c->out))
            (void)evbuffer_write(c->out, c->fd);
        pconn_end(c, "closed by lyhd");
        break;
    case PMSG_CONN_PAUSE:
        /* The frame timer runs on: a pause is the client's own doing (its
         * fds not closed yet, its answers not read), and a client that holds
         * a frame half sent while it does not read is dropped as before. */
        c->paused = m->count == 1;
        if (c->paused)
            event_del(c->ev_read);
        else if (!c->in_line && !c->refused && !c->closes_wait && !c->ahead_wait)
            event_add(c->ev_read, NULL);
        break;
    default:
        break;
    }
}

void clients_free(struct proto *p) {
    struct outmsg *m;

    while (!TAILQ_EMPTY(&p->conns))
        pconn_free(TAILQ_FIRST(&p->conns));
    /* Their fds are not closed here: this close would be the last one and
     * may wait (see send_fds_closed); the process exits next, and the
     * kernel's closes at exit never wait on a linger. */
    while ((m = TAILQ_FIRST(&p->outq))) {
        TAILQ_REMOVE(&p->outq, m, link);
        free(m);
    }
    if (p->ev_accept)
        event_free(p->ev_accept);
    if (p->ev_accept_retry)
        event_free(p->ev_accept_retry);
    if (p->ev_drained)
        event_free(p->ev_drained);
    if (p->ev_serve)
        event_free(p->ev_serve);
    if (p->ev_closes)
        event_free(p->ev_closes);
    /* its workers are not waited for: one may hang in a FUSE FLUSH, and the
     * process exits next */
    CLOSE_FD(p->listen_fd);
    CLOSE_FD(p->reserve_fd);
}
