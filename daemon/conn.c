/* One client connection, as the parent sees it: its peer (credentials read
 * here from our duplicate of the socket), the requests that reach it from
 * the protocol process, the calls in flight, and the responses on their way
 * out.
 *
 * The protocol process (proto_clients.c) holds the socket, reads the frames
 * and the fds that come with them, checks each request's envelope and sends
 * what passed as PMSG_REQUEST, encoded again, with the fds. This file checks
 * it again as if a client had sent it (the protocol process may be
 * compromised): one encoding only (protobuf-c's own, which decoding and
 * encoding again must give back byte for byte), the envelope, the fds'
 * kinds, the call ids in flight. It never reads the client's socket.
 *
 * Responses are framed here (the parent is the only author of the stream a
 * client reads) and go to the protocol process as PMSG_OUT, at most
 * CONN_WINDOW bytes per connection not yet written to its client
 * (PMSG_DRAINED says what was), and only while the socket between the
 * processes holds less than CONN_SOCK_MAX: one client that does not read
 * holds back its own answers, never another's.
 *
 * Failure policy: bad client input closes that connection or gets an error
 * answer, as before; a message from the protocol process that is not its to
 * send returns -EBADMSG and the parent ends that process. */
#include "platform/linux/proc.h"
#include "daemon/audit.h"
#include "daemon/closer.h"
#include "daemon/conn.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/macros.h"
#include "daemon/log.h"
#include "daemon/lyhd.h"
#include "daemon/pmsg.h"
#include "daemon/pproc.h"
#include "daemon/rpc.h"
#include "daemon/server.h"
#include "platform/linux/fdkind.h"
#include "platform/linux/unixsock.h"

/* A client that does not read its responses may make us buffer this much. */
#define CONN_MAX_OUTPUT (8u << 20)
/* Bytes handed to the protocol process and not yet written to the client,
 * per connection (CONN_SOCK_MAX, conn.h: for all of them). */
#define CONN_WINDOW   (256u << 10)
/* A user with more of their fds than this waiting in the closer gets nothing
 * more read from their connections until it drains: the fds stay in the
 * kernel, counted against the sender's own limits, not lyhd's. */
#define CONN_PAUSE_PENDING 16u

struct conn {
    struct lyhd *d;
    uint64_t id;             /* the protocol process's name for it */
    int fd;                  /* our duplicate of the client's socket */
    struct ucred peer;
    char peer_label[32]; /* its comm at accept, for the audit log ("" unknown) */
    gid_t peer_groups[LYH_MAX_PEER_GROUPS];
    size_t n_peer_groups;
    bool dead;               /* closed for lyhd; the protocol process may not know yet */
    bool released;           /* conn_release ran: freed on the next loop pass */
    bool paused;             /* reading stopped: too many of its user's fds being closed */
    bool midframe;           /* the protocol process has read part of a frame (MIDFRAME) */
    struct evbuffer *out;    /* framed responses not yet handed over */
    size_t inflight;         /* handed over, not yet written to the client */
    uint8_t *req;            /* a request arriving in pieces */
    uint32_t taken;          /* its requests and refusals taken from the protocol process */
    bool closing;            /* refused at the connection level: never idle again */
    uint32_t req_total, req_have;
    TAILQ_HEAD(, rpc_call) calls;
    unsigned n_calls;
    bool waiting;            /* in `waiting`: has answers, found the socket full */
    TAILQ_ENTRY(conn) wait_link;
};

/* The connections whose answers found the socket to the protocol process
 * full, in the order they found it (one parent per process). Room, when it
 * comes, goes to them in turn, one piece each, and a connection with more
 * goes to the back. Before, every connection was flushed in slot order once
 * there was room: a user pipelining on 16 connections, each with 256 KiB of
 * answers allowed in flight, filled the room each time before a connection
 * accepted after theirs, and another user's one answer waited for seconds
 * (tests/e2e/hardening.sh, 8: 3.8 s once under ASan). */
static TAILQ_HEAD(, conn) waiting = TAILQ_HEAD_INITIALIZER(waiting);

static void wait_for_room(struct conn *c) {
    if (c->waiting)
        return;
    c->waiting = true;
    TAILQ_INSERT_TAIL(&waiting, c, wait_link);
}

static void stop_waiting(struct conn *c) {
    if (!c->waiting)
        return;
    c->waiting = false;
    TAILQ_REMOVE(&waiting, c, wait_link);
}

uid_t conn_uid(const struct conn *c) { return c->peer.uid; }
bool conn_is_dead(const struct conn *c) { return c->dead; }
unsigned conn_calls_in_flight(const struct conn *c) { return c->n_calls; }
size_t conn_out_pending(const struct conn *c) {
    return c->dead ? 0 : evbuffer_get_length(c->out) + c->inflight;
}
struct lyhd *conn_lyhd(const struct conn *c) { return c->d; }
uint64_t conn_id(const struct conn *c) { return c->id; }
int conn_fd(const struct conn *c) { return c->fd; }
bool conn_has_partial(const struct conn *c) {
    return c->req != NULL || c->inflight > 0 || c->midframe;
}
void conn_set_midframe(struct conn *c, bool midframe) { c->midframe = midframe; }

static void conn_free_cb(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct conn *c = arg;

    if (c->out)
        evbuffer_free(c->out);
    free(c->req);
    free(c);
}

/* Tell the protocol process one thing about this connection. */
static int tell(struct conn *c, uint16_t type, const struct pmsg_conn *m) {
    uint8_t buf[PMSG_MAX_BYTES];
    size_t len;
    int r = pmsg_encode_conn(type, m, buf, sizeof(buf), &len);
    return r < 0 ? r : pproc_send(c->d, buf, len, NULL, 0);
}

/* shutdown(SHUT_RDWR) of its socket: its client sees the end whoever else
 * holds a copy. */
static void conn_shutdown(struct conn *c) {
    if (c->fd >= 0)
        (void)shutdown(c->fd, SHUT_RDWR);
}

void conn_release(struct conn *c) {
    if (c->released)
        return;
    c->released = true;
    stop_waiting(c);
    /* With no protocol process ready, none will write what this connection
     * was handed or close its copy (a process left behind still holds one):
     * its client sees the end all the same. With one ready, not: a refusal
     * handed over (CONN_CLOSE at lyhd's shutdown) is still to be written. */
    if (!pproc_ready(c->d))
        conn_shutdown(c);
    c->dead = true;
    c->inflight = 0;
    /* Off the loop: fds still in flight in its queue go with the socket's
     * last reference, on a closer worker. */
    closer_close(c->d->closer, c->peer.uid, TAKE_FD(c->fd));
    server_conn_removed(c->d->server, c);
    /* We may be inside one of this connection's callbacks: free later. */
    if (event_base_once(c->d->base, -1, EV_TIMEOUT, conn_free_cb, c, NULL) < 0)
        log_error("cannot schedule connection release; leaking %zu bytes", sizeof(*c));
}

void conn_close(struct conn *c, const char *why) {
    struct rpc_call *call;

    if (c->dead)
        return;
    c->dead = true;
    stop_waiting(c);
    if (why)
        log_debug("connection of uid %u pid %d closed: %s", c->peer.uid, c->peer.pid, why);

    /* Calls still open (streams) hear that their client went away. */
    while ((call = TAILQ_FIRST(&c->calls))) {
        TAILQ_REMOVE(&c->calls, call, link);
        c->n_calls--;
        call->conn = NULL;
        if (call->on_disconnect)
            call->on_disconnect(call);
        /* A call being dispatched right now is freed by handle_request(),
         * one whose response is being written (the write failed and closed
         * us) by rpc_send() when that returns. */
        if (!call->in_dispatch && !call->in_emit)
            rpc_call_free(call);
    }
    free(c->req);
    c->req = NULL;
    /* What it has not handed over is dropped; what it has (a refusal) the
     * protocol process writes before it closes. Its CONN_GONE then releases
     * the connection here; with no protocol process, now. */
    struct pmsg_conn m = {.id = c->id};
    if (!pproc_ready(c->d) || tell(c, PMSG_CONN_CLOSE, &m) < 0)
        conn_release(c);
}

void conn_took(struct conn *c) { c->taken++; }
void conn_count_from_zero(struct conn *c) { c->taken = 0; }

/* No call of this connection's waits for its final answer (one held until
 * its commit, hold_final, is still open). */
static bool no_call_open(const struct conn *c) {
    const struct rpc_call *call;
    TAILQ_FOREACH(call, &c->calls, link)
        if (!call->finished || call->hold_final)
            return false;
    return true;
}

/* Can c hand over a piece now, as far as c itself goes (its window)? */
static bool has_piece(const struct conn *c) {
    return !c->dead && pproc_ready(c->d) && evbuffer_get_length(c->out) > 0 &&
           c->inflight < CONN_WINDOW;
}

enum piece {
    PIECE_SENT, /* one piece handed over (more may wait) */
    PIECE_NONE, /* nothing to hand over now: empty, its window full, or no process */
    PIECE_FULL, /* the socket has no room */
};

/* Hand one piece of what is queued to the protocol process. The piece that
 * empties the queue while no call is open says so (OUT_IDLE, with the count
 * of requests taken): the protocol process may then answer a Capabilities
 * call itself, as no answer of the parent's can come before or between
 * (c->out holds whole frames only). */
static enum piece send_piece(struct conn *c) {
    uint8_t chunk[PMSG_CHUNK];
    uint8_t buf[PMSG_MAX_BYTES];

    if (!has_piece(c))
        return PIECE_NONE;
    if (pproc_queued(c->d, CONN_SOCK_MAX) >= CONN_SOCK_MAX)
        return PIECE_FULL;
    size_t n = evbuffer_get_length(c->out), len;
    if (n > sizeof(chunk))
        n = sizeof(chunk);
    evbuffer_copyout(c->out, chunk, n);
    struct pmsg_conn m = {.id = c->id, .data = chunk, .data_len = n, .count = c->taken};
    if (n == evbuffer_get_length(c->out) && !c->closing && no_call_open(c))
        m.flags = PMSG_OUT_IDLE;
    if (pmsg_encode_conn(PMSG_OUT, &m, buf, sizeof(buf), &len) < 0 ||
        pproc_send(c->d, buf, len, NULL, 0) < 0)
        return PIECE_NONE; /* the process is gone or ended: the next one gets it */
    evbuffer_drain(c->out, n);
    c->inflight += n;
    return PIECE_SENT;
}

void conn_serve_waiting(void) {
    struct conn *c;

    while ((c = TAILQ_FIRST(&waiting))) {
        stop_waiting(c);
        switch (send_piece(c)) {
        case PIECE_FULL:
            c->waiting = true; /* still first */
            TAILQ_INSERT_HEAD(&waiting, c, wait_link);
            return;
        case PIECE_SENT:
            if (has_piece(c))
                wait_for_room(c);
            break;
        case PIECE_NONE:
            break; /* its DRAINED, or the next process, flushes it again */
        }
    }
}

/* Hand what is queued to the protocol process, within the windows: at once,
 * or in turn behind the connections already waiting for room. */
void conn_flush(struct conn *c) {
    enum piece r;

    /* A refusal is the last thing a connection gets, and it is closed
     * right after: it goes now if there is room, as it did before the
     * line, rather than be dropped with the connection while it waits. */
    if (c->closing)
        stop_waiting(c);
    if (c->waiting)
        return;
    if (!TAILQ_EMPTY(&waiting) && !c->closing) {
        if (has_piece(c))
            wait_for_room(c);
        conn_serve_waiting();
        return;
    }
    while ((r = send_piece(c)) == PIECE_SENT)
        ;
    if (r == PIECE_FULL)
        wait_for_room(c);
}

int conn_send(struct conn *c, const LyhResponse *resp) {
    _cleanup_free_ uint8_t *buf = NULL;
    size_t len = 0;
    int r;

    if (c->dead)
        return -ENOTCONN;
    r = wire_response_frame(resp, &buf, &len);
    if (r < 0)
        return r;
    return conn_send_frame(c, buf, len);
}

int conn_send_frame(struct conn *c, const uint8_t *buf, size_t len) {
    if (c->dead)
        return -ENOTCONN;
    if (conn_out_pending(c) + len > CONN_MAX_OUTPUT) {
        log_warn("client uid %u pid %d does not read its responses; closing", c->peer.uid,
                 c->peer.pid);
        conn_close(c, "output limit");
        return -ENOBUFS;
    }
    if (evbuffer_add(c->out, buf, len) < 0) {
        log_error("out of memory queueing an answer to uid %u pid %d; closing its connection",
                  c->peer.uid, c->peer.pid);
        conn_close(c, "out of memory");
        return -ENOMEM;
    }
    conn_flush(c);
    return 0;
}

int conn_drained(struct conn *c, uint32_t n) {
    if (n > c->inflight)
        return -EBADMSG; /* more than it was given */
    c->inflight -= n;
    conn_flush(c);
    conn_resume_if_ok(c);
    return 0;
}

void conn_refuse(struct conn *c, int code, const char *message) {
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;

    resp.call_id = 0;
    resp.code = code;
    resp.message = (char *)message;
    resp.end_of_stream = true;
    c->closing = true; /* its CONN_CLOSE may come a read pass after this OUT */
    (void)conn_send(c, &resp);
    conn_close(c, message);
}

/* Answer a request that never reaches a handler. */
void conn_reply_error(struct conn *c, uint64_t call_id, int code, const char *fmt, ...) {
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    resp.call_id = call_id;
    resp.code = code;
    resp.message = msg;
    resp.end_of_stream = true;
    if (code == LIANYAOHU__V1__CODE__PERMISSION_DENIED || code == LIANYAOHU__V1__CODE__INVALID_ARGUMENT)
        audit_request(c->d, c->peer.uid, c->peer.pid, c->peer_label, NULL, code, "refused", msg);
    else if (code == LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED)
        audit_request(c->d, c->peer.uid, c->peer.pid, c->peer_label, NULL, code, "limit", msg);
    (void)conn_send(c, &resp);
}

struct rpc_call *conn_find_call(struct conn *c, uint64_t call_id) {
    struct rpc_call *call;

    TAILQ_FOREACH(call, &c->calls, link)
        if (call->call_id == call_id && !call->finished)
            return call;
    return NULL;
}

/* One whole request from the protocol process, checked again. -EBADMSG: it
 * is not what that process may send (not protobuf-c's own encoding). */
static int handle_request(struct conn *c, const uint8_t *body, uint32_t len, int *fds,
                          unsigned n_fds) {
    LyhRequest *req = NULL;
    struct rpc_call *call = NULL;
    unsigned max_fds = c->d->cfg.max_fds_per_msg;
    char msg[512];
    bool close_conn;
    int code;

    if (max_fds > LYH_MAX_FDS_PER_MESSAGE)
        max_fds = LYH_MAX_FDS_PER_MESSAGE;
    if (wire_request_decode(body, len, &req) < 0) {
        closer_close_all(c->d->closer, c->peer.uid, fds, n_fds);
        return -EBADMSG;
    }
    /* one encoding: what protobuf-c makes of what it decoded */
    size_t again = lianyaohu__v1__request__get_packed_size(req);
    _cleanup_free_ uint8_t *re = again == len ? malloc(len ? len : 1) : NULL;
    if (again == len && !re) {
        conn_reply_error(c, req->call_id, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                         "lyhd is out of memory");
        goto out_fds;
    }
    if (again != len || lianyaohu__v1__request__pack(req, re) != len ||
        memcmp(re, body, len) != 0) {
        wire_request_free(req);
        closer_close_all(c->d->closer, c->peer.uid, fds, n_fds);
        return -EBADMSG;
    }
    /* Only for a client that is still connected: a request on a connection
     * whose client has gone would act for someone who left (the protocol
     * process could keep such a socket open). Queries too: a root client's
     * connection kept open would let it start an AuditFollow of every user's
     * records after root left, and keep it running (server_tick's sweep
     * ends the calls of connections whose client has gone). */
    if (unixsock_peer_gone(c->fd)) {
        conn_close(c, "client gone");
        goto out_fds;
    }
    /* the protocol process checked all this: a request that fails here means
     * it did not; the client still gets its answer */
    code = wire_envelope_check(req, body, len, n_fds, n_fds > max_fds, max_fds, msg, sizeof(msg),
                               &close_conn);
    if (code != 0) {
        log_warn("the protocol process passed a request it should have refused (%s)", msg);
        if (close_conn)
            conn_refuse(c, code, msg);
        else
            conn_reply_error(c, req->call_id, code, "%s", msg);
        goto out_fds;
    }
    /* Only the kinds Run needs are kept; anything else (a TCP socket whose
     * close could linger, a FUSE file, a directory, an eventfd) is refused by
     * name and closed off the loop. */
    for (unsigned i = 0; i < n_fds; i++) {
        struct fdk_info info;
        int k = fdk_classify(fds[i], &info);
        if (k < 0 || info.kind == FDK_REFUSED) {
            conn_reply_error(c, req->call_id, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                             "file descriptor %u of %u is %s; lyhd takes only terminals, pipes, "
                             "AF_UNIX sockets, regular files and /dev/null-like devices",
                             i + 1, n_fds, k < 0 ? "of a kind lyhd cannot tell" : info.what);
            goto out_fds;
        }
    }
    /* A reused call id is a protocol error (like a reused HTTP/2 stream id),
     * answered once at the connection level and then the connection is
     * closed, because any answer carrying that id would be mistaken for the
     * other call's. */
    if (conn_find_call(c, req->call_id)) {
        snprintf(msg, sizeof(msg), "call_id %llu is already in flight on this connection",
                 (unsigned long long)req->call_id);
        conn_refuse(c, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, msg);
        goto out_fds;
    }
    /* A Cancel is always taken, even with every slot held by streams: it is
     * how a client frees one (it is unary, done before dispatch returns). */
    if (c->n_calls >= c->d->cfg.max_calls_per_conn &&
        req->method_case != LIANYAOHU__V1__REQUEST__METHOD_CANCEL) {
        conn_reply_error(c, req->call_id, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                         "too many calls in flight on this connection (limit %u); wait for one "
                         "to finish or open another connection",
                         c->d->cfg.max_calls_per_conn);
        goto out_fds;
    }

    call = calloc(1, sizeof(*call));
    if (!call) {
        conn_reply_error(c, req->call_id, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                         "out of memory");
        goto out_fds;
    }
    call->conn = c;
    call->closer = c->d->closer;
    call->call_id = req->call_id;
    call->method = req->method_case;
    call->peer = c->peer;
    memcpy(call->peer_label, c->peer_label, sizeof(call->peer_label));
    call->peer_is_admin = conn_admin_now(c->d, c->peer.uid);
    memcpy(call->peer_groups, c->peer_groups, sizeof(call->peer_groups));
    call->n_peer_groups = c->n_peer_groups;
    for (unsigned i = 0; i < LYH_MAX_FDS_PER_MESSAGE; i++)
        call->fds[i] = i < n_fds ? fds[i] : -1;
    call->n_fds = n_fds;
    n_fds = 0;
    TAILQ_INSERT_TAIL(&c->calls, call, link);
    c->n_calls++;

    call->in_dispatch = true;
    rpc_dispatch(c->d, call, req);
    call->in_dispatch = false;
    /* Fds the handler did not take are closed now, whatever it does later. */
    for (unsigned i = 0; i < call->n_fds; i++)
        closer_close(c->d->closer, c->peer.uid, TAKE_FD(call->fds[i]));
    if (call->finished || !call->conn) {
        if (call->conn) {
            TAILQ_REMOVE(&c->calls, call, link);
            c->n_calls--;
        }
        rpc_call_free(call);
    }

out_fds:
    closer_close_all(c->d->closer, c->peer.uid, fds, n_fds);
    wire_request_free(req);
    return 0;
}

int conn_on_request(struct conn *c, const struct pmsg_conn *m, int *fds, size_t nfds) {
    bool last = m->offset + m->data_len == m->total;

    /* fds come with the last piece; a new request only once the last one
     * was whole; a piece follows the one before */
    if ((nfds && !last) || (m->offset == 0 && c->req) ||
        (m->offset != 0 && (!c->req || m->offset != c->req_have || m->total != c->req_total))) {
        closer_close_all(c->d->closer, c->peer.uid, fds, nfds);
        return -EBADMSG;
    }
    if (m->offset == 0) {
        c->req = malloc(m->total ? m->total : 1);
        if (!c->req) {
            /* the client's stream cannot be followed any more */
            closer_close_all(c->d->closer, c->peer.uid, fds, nfds);
            conn_close(c, "out of memory");
            return 0;
        }
        c->req_total = m->total;
        c->req_have = 0;
    }
    if (m->data_len)
        memcpy(c->req + c->req_have, m->data, m->data_len);
    c->req_have += (uint32_t)m->data_len;
    if (!last)
        return 0;
    c->midframe = false; /* the frame's end */
    c->taken++;
    _cleanup_free_ uint8_t *body = TAKE_PTR(c->req);
    int fdv[PMSG_MAX_FDS];
    if (nfds)
        memcpy(fdv, fds, nfds * sizeof(int));
    return handle_request(c, body, c->req_total, fdv, (unsigned)nfds);
}

void conn_call_done(struct rpc_call *call) {
    struct conn *c = call->conn;

    if (c && !call->in_dispatch) {
        TAILQ_REMOVE(&c->calls, call, link);
        c->n_calls--;
        rpc_call_free(call);
    }
}

/* The fds its user handed lyhd are not closed yet (one of them hangs a
 * closer worker), or all users' together are more than lyhd should hold. */
static bool closes_behind(const struct conn *c) {
    struct closer *cl = c->d->closer;
    unsigned all_cap = c->d->fd_limit / 4 > 64 ? c->d->fd_limit / 4 : 64;

    return cl && (closer_pending(cl, c->peer.uid) > CONN_PAUSE_PENDING ||
                  closer_total_pending(cl) > all_cap);
}

/* It has not read the answers to what it asked. */
static bool answers_behind(const struct conn *c) {
    return conn_out_pending(c) > (c->paused ? CONN_OUT_RESUME : CONN_OUT_PAUSE);
}

/* Read nothing more from this connection for now. */
static bool conn_must_pause(const struct conn *c) { return closes_behind(c) || answers_behind(c); }

static void conn_set_paused(struct conn *c, bool paused) {
    struct pmsg_conn m = {.id = c->id, .count = paused ? 1 : 0};
    if (c->paused == paused || c->dead)
        return;
    c->paused = paused;
    if (paused && closes_behind(c))
        log_warn("not reading from uid %u pid %d for now: %u of its file descriptors are still "
                 "being closed",
                 c->peer.uid, c->peer.pid, closer_pending(c->d->closer, c->peer.uid));
    else if (paused) /* a busy client, not an attack: it reads, only slower than it asks */
        log_debug("not reading from uid %u pid %d until it reads its answers (%zu bytes)",
                  c->peer.uid, c->peer.pid, conn_out_pending(c));
    if (pproc_ready(c->d))
        (void)tell(c, PMSG_CONN_PAUSE, &m);
}

void conn_pause_if_needed(struct conn *c) {
    if (!c->paused && !c->dead && conn_must_pause(c))
        conn_set_paused(c, true);
}

void conn_resume_if_ok(struct conn *c) {
    if (!c->paused || c->dead || conn_must_pause(c))
        return;
    conn_set_paused(c, false);
}

bool conn_paused(const struct conn *c) { return c->paused; }

int conn_new(struct lyhd *d, uint64_t id, int fd, const struct ucred *peer, struct conn **ret) {
    struct conn *c = calloc(1, sizeof(*c));

    if (!c)
        return -ENOMEM;
    c->d = d;
    c->id = id;
    c->fd = fd;
    c->peer = *peer;
    /* what the peer calls itself, now, while its pid is most likely still its
     * own (for the audit log only) */
    if (proc_label(peer->pid, c->peer_label, sizeof(c->peer_label)) < 0)
        c->peer_label[0] = '\0';
    TAILQ_INIT(&c->calls);
    c->out = evbuffer_new();
    if (!c->out) {
        free(c);
        return -ENOMEM;
    }
    *ret = c;
    return 0;
}

bool conn_admin_now(const struct lyhd *d, uid_t uid) {
    if (uid == 0)
        return true;
    if (!d->cfg.admin_group)
        return false;
    struct passwd pw, *pwp = NULL;
    char pbuf[4096];
    if (getpwuid_r(uid, &pw, pbuf, sizeof(pbuf), &pwp) != 0 || !pwp)
        return false;
    if (pw.pw_gid == d->cfg.admin_gid)
        return true;
    /* a big group's member list may need more room: up to 1 MiB */
    for (size_t size = 16384; size <= 1u << 20; size *= 4) {
        _cleanup_free_ char *gbuf = malloc(size);
        struct group gr, *grp = NULL;
        if (!gbuf)
            return false;
        int r = getgrgid_r(d->cfg.admin_gid, &gr, gbuf, size, &grp);
        if (r == ERANGE)
            continue;
        if (r != 0 || !grp)
            return false;
        for (char **m = gr.gr_mem; m && *m; m++)
            if (strcmp(*m, pw.pw_name) == 0)
                return true;
        return false;
    }
    return false;
}

void conn_set_peer_groups(struct conn *c, const gid_t *groups, size_t n) {
    c->n_peer_groups = n < LYH_MAX_PEER_GROUPS ? n : LYH_MAX_PEER_GROUPS;
    memcpy(c->peer_groups, groups, c->n_peer_groups * sizeof(gid_t));
}
