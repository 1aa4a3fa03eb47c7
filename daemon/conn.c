/* One client connection: reads frames and the fds that come with them, checks
 * each request, dispatches it, and writes responses.
 *
 * What this file owns: the connection's socket, its frame reader, the queue of
 * received fds, the output buffer and the list of calls in flight. It never
 * interprets a request beyond the envelope; that is rpc_table.c's job.
 *
 * Failure policy: a malformed frame (bad flag byte, oversize length, bytes that
 * are not a Request) closes this connection only. A well-formed request that we
 * cannot serve (unknown field, unknown method, limit reached) gets an error
 * response and the connection stays open. Nothing a client sends can stop the
 * daemon from serving everyone else.
 *
 * fd passing: libevent bufferevents drop ancillary data, so we read with
 * recvmsg(MSG_CMSG_CLOEXEC) ourselves. On a Unix stream socket the kernel hands
 * out the fds of a sendmsg together with bytes of that same sendmsg and stops
 * the read there, so the stream offset at the end of the read that delivered
 * them lies inside the frame they were sent with (clients send a frame that
 * carries fds in one sendmsg). Each received fd is tagged with that offset; a
 * completed frame [start, end) owns the fds tagged <= end. Fds the request does
 * not take are closed once it has been dispatched. */
#include "platform/linux/proc.h"
#include "daemon/audit.h"
#include "daemon/closer.h"
#include "daemon/conn.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/frame.h"
#include "common/macros.h"
#include "daemon/log.h"
#include "daemon/lyhd.h"
#include "daemon/rpc.h"
#include "daemon/server.h"
#include "platform/linux/fdkind.h"

/* A client that does not read its responses may make us buffer this much. */
#define CONN_MAX_OUTPUT (8u << 20)
/* Most bytes read per readiness event, so one busy client cannot starve others. */
#define CONN_READ_BUDGET (256u << 10)
/* Received fds waiting for their frame; more than this is abuse. */
#define CONN_MAX_QUEUED_FDS 16u
/* The most fds one recvmsg can carry (the kernel's SCM_MAX_FD). The control
 * buffer has room for all of them: fds that did not fit would be dropped by
 * the kernel inside recvmsg, and the last reference of such a file (a
 * lingering TCP socket) would then be released on the event loop. */
#define CONN_SCM_MAX_FD 253u
/* A user with more of their fds than this waiting in the closer gets nothing
 * more read from their connections until it drains: the fds stay in the
 * kernel, counted against the sender's own limits, not lyhd's. */
#define CONN_PAUSE_PENDING 16u

struct queued_fd {
    int fd;          /* -1: an fd the kernel delivered beyond the limit (closed) */
    uint64_t tag;    /* stream offset at the end of the read that delivered it */
};

struct conn {
    struct lyhd *d;
    int fd;
    struct ucred peer;
    char peer_label[32]; /* its comm at accept, for the audit log ("" unknown) */
    gid_t peer_groups[LYH_MAX_PEER_GROUPS];
    size_t n_peer_groups;
    bool dead;
    bool paused;             /* reading stopped: too many of its user's fds being closed */
    struct event *ev_read;
    struct event *ev_write;
    struct event *ev_frame_timeout;
    struct evbuffer *out;
    struct frame_reader reader;
    uint64_t frame_started_mono_ms;
    struct queued_fd fds[CONN_MAX_QUEUED_FDS];
    unsigned n_fds;
    TAILQ_HEAD(, rpc_call) calls;
    unsigned n_calls;
};

uid_t conn_uid(const struct conn *c) { return c->peer.uid; }
bool conn_is_dead(const struct conn *c) { return c->dead; }
unsigned conn_calls_in_flight(const struct conn *c) { return c->n_calls; }
size_t conn_out_pending(const struct conn *c) { return c->dead ? 0 : evbuffer_get_length(c->out); }
struct lyhd *conn_lyhd(const struct conn *c) { return c->d; }

static void conn_free_cb(evutil_socket_t fd, short what, void *arg) {
    struct conn *c = arg;

    frame_reader_done(&c->reader);
    if (c->out)
        evbuffer_free(c->out);
    free(c);
}

void conn_close(struct conn *c, const char *why) {
    struct rpc_call *call;

    if (c->dead)
        return;
    c->dead = true;
    if (why)
        log_debug("connection of uid %u pid %d closed: %s", c->peer.uid, c->peer.pid, why);

    /* Calls still open (streams) hear that their client went away. */
    while ((call = TAILQ_FIRST(&c->calls))) {
        TAILQ_REMOVE(&c->calls, call, link);
        c->n_calls--;
        call->conn = NULL;
        if (call->on_disconnect)
            call->on_disconnect(call);
        /* A call being dispatched right now is freed by handle_frame(), one
         * whose response is being written (the write failed and closed us) by
         * rpc_send() when that returns. */
        if (!call->in_dispatch && !call->in_emit)
            rpc_call_free(call);
    }
    for (unsigned i = 0; i < c->n_fds; i++)
        closer_close(c->d->closer, c->peer.uid, TAKE_FD(c->fds[i].fd));
    c->n_fds = 0;
    event_free(c->ev_read);
    event_free(c->ev_write);
    event_free(c->ev_frame_timeout);
    c->ev_read = c->ev_write = c->ev_frame_timeout = NULL;
    /* Off the loop: fds still in flight in its queue go with the socket's
     * last reference, on a closer worker. */
    closer_close(c->d->closer, c->peer.uid, TAKE_FD(c->fd));
    server_conn_removed(c->d->server, c);
    /* We may be inside one of this connection's callbacks: free later. */
    if (event_base_once(c->d->base, -1, EV_TIMEOUT, conn_free_cb, c, NULL) < 0)
        log_error("cannot schedule connection release; leaking %zu bytes", sizeof(*c));
}

static void on_writable(evutil_socket_t fd, short what, void *arg) {
    struct conn *c = arg;

    while (evbuffer_get_length(c->out) > 0) {
        int n = evbuffer_write(c->out, c->fd);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            conn_close(c, "write failed");
            return;
        }
        if (n == 0)
            break;
    }
    if (evbuffer_get_length(c->out) == 0)
        event_del(c->ev_write);
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
    if (evbuffer_get_length(c->out) + len > CONN_MAX_OUTPUT) {
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
    /* Try at once: most responses fit the socket buffer and this saves a
     * trip through the loop. */
    on_writable(c->fd, EV_WRITE, c);
    if (!c->dead && evbuffer_get_length(c->out) > 0)
        event_add(c->ev_write, NULL);
    return 0;
}

void conn_refuse(struct conn *c, int code, const char *message) {
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;

    resp.call_id = 0;
    resp.code = code;
    resp.message = (char *)message;
    resp.end_of_stream = true;
    (void)conn_send(c, &resp);
    conn_close(c, message);
}

/* Answer a request that never reaches a handler. */
static void reply_error(struct conn *c, uint64_t call_id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void reply_error(struct conn *c, uint64_t call_id, int code, const char *fmt, ...) {
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

/* Take the fds that came with the frame ending at stream offset end. Returns
 * how many real fds were taken, or -E2BIG if the kernel delivered more than
 * the limit with this frame (those were closed on arrival). */
static int take_frame_fds(struct conn *c, uint64_t end, int *out, unsigned max, unsigned *ret_n) {
    unsigned n = 0, keep = 0;
    bool overflow = false;

    for (unsigned i = 0; i < c->n_fds; i++) {
        if (c->fds[i].tag > end) {
            c->fds[keep++] = c->fds[i];
            continue;
        }
        if (c->fds[i].fd < 0 || n >= max) {
            overflow = true;
            closer_close(c->d->closer, c->peer.uid, TAKE_FD(c->fds[i].fd));
            continue;
        }
        out[n++] = c->fds[i].fd;
    }
    c->n_fds = keep;
    *ret_n = n;
    return overflow ? -E2BIG : 0;
}

static void handle_frame(struct conn *c, uint8_t *body, uint32_t len, uint64_t end) {
    LyhRequest *req = NULL;
    struct wire_check chk;
    struct rpc_call *call = NULL;
    int fds[LYH_MAX_FDS_PER_MESSAGE];
    unsigned n_fds = 0;
    unsigned max_fds = c->d->cfg.max_fds_per_msg;
    int r;

    if (max_fds > LYH_MAX_FDS_PER_MESSAGE)
        max_fds = LYH_MAX_FDS_PER_MESSAGE;
    r = take_frame_fds(c, end, fds, max_fds, &n_fds);

    if (wire_request_decode(body, len, &req) < 0) {
        for (unsigned i = 0; i < n_fds; i++)
            closer_close(c->d->closer, c->peer.uid, fds[i]);
        conn_close(c, "malformed request");
        return;
    }

    if (r == -E2BIG) {
        reply_error(c, req->call_id, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                    "too many file descriptors with one message (limit %u); they were closed",
                    max_fds);
        goto out_fds;
    }
    if (req->fd_count != n_fds) {
        reply_error(c, req->call_id, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                    "request says it carries %u file descriptors but %u arrived with it; send "
                    "them with the sendmsg that carries the frame",
                    req->fd_count, n_fds);
        goto out_fds;
    }
    /* Only the kinds Run needs are kept; anything else (a TCP socket whose
     * close could linger, a FUSE file, a directory, an eventfd) is refused by
     * name and closed off the loop. */
    for (unsigned i = 0; i < n_fds; i++) {
        struct fdk_info info;
        int k = fdk_classify(fds[i], &info);
        if (k < 0 || info.kind == FDK_REFUSED) {
            reply_error(c, req->call_id, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                        "file descriptor %u of %u is %s; lyhd takes only terminals, pipes, AF_UNIX "
                        "sockets, regular files and /dev/null-like devices",
                        i + 1, n_fds, k < 0 ? "of a kind lyhd cannot tell" : info.what);
            goto out_fds;
        }
    }
    wire_request_check(req, &chk);
    switch (chk.verdict) {
    case WIRE_OK:
        break;
    case WIRE_UNKNOWN_METHOD:
        reply_error(c, req->call_id, LIANYAOHU__V1__CODE__UNIMPLEMENTED,
                    "method field %u is not known to lyhd %s (protocol %u)", chk.field, LYH_VERSION,
                    LYH_PROTOCOL_VERSION);
        goto out_fds;
    case WIRE_UNKNOWN_FIELD:
        reply_error(c, req->call_id, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                    "field %u of %s is not known to lyhd %s (protocol %u); refusing rather than "
                    "ignoring it: upgrade lyhd or drop the option",
                    chk.field, chk.message, LYH_VERSION, LYH_PROTOCOL_VERSION);
        goto out_fds;
    case WIRE_NO_METHOD:
        reply_error(c, req->call_id, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                    "request names no method");
        goto out_fds;
    case WIRE_NUL_IN_STRING:
    case WIRE_TWO_METHODS:
        break;
    }
    if (wire_find_second_method(body, len, &chk)) {
        const char *a = wire_method_name(chk.first), *b = wire_method_name(chk.field);
        reply_error(c, req->call_id, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                    "request sets more than one method (field %u %s, then field %u %s); set "
                    "exactly one",
                    chk.first, a ? a : "(unknown)", chk.field, b ? b : "(unknown)");
        goto out_fds;
    }
    if (wire_find_nul_string(body, len, &chk)) {
        reply_error(c, req->call_id, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                    "field %u of %s contains a NUL byte; strings must not", chk.field, chk.message);
        goto out_fds;
    }
    if (req->protocol_version != LYH_PROTOCOL_VERSION) {
        reply_error(c, req->call_id, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                    "client speaks protocol %u, lyhd %s speaks protocol %u", req->protocol_version,
                    LYH_VERSION, LYH_PROTOCOL_VERSION);
        goto out_fds;
    }
    /* Call ids are how responses find their call: a missing or reused one is
     * a protocol error (like a reused HTTP/2 stream id), answered once at the
     * connection level and then the connection is closed, because any answer
     * carrying that id would be mistaken for the other call's. */
    if (req->call_id == 0 || conn_find_call(c, req->call_id)) {
        char msg[128];
        snprintf(msg, sizeof(msg),
                 req->call_id == 0 ? "call_id must be non-zero"
                                   : "call_id %llu is already in flight on this connection",
                 (unsigned long long)req->call_id);
        conn_refuse(c, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, msg);
        goto out_fds;
    }
    if (req->deadline_ms > 0 && lyhd_mono_ms() - c->frame_started_mono_ms > req->deadline_ms) {
        reply_error(c, req->call_id, LIANYAOHU__V1__CODE__DEADLINE_EXCEEDED,
                    "deadline of %u ms passed before the request was complete", req->deadline_ms);
        goto out_fds;
    }
    /* A Cancel is always taken, even with every slot held by streams: it is
     * how a client frees one (it is unary, done before dispatch returns). */
    if (c->n_calls >= c->d->cfg.max_calls_per_conn &&
        req->method_case != LIANYAOHU__V1__REQUEST__METHOD_CANCEL) {
        reply_error(c, req->call_id, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                    "too many calls in flight on this connection (limit %u); wait for one to "
                    "finish or open another connection",
                    c->d->cfg.max_calls_per_conn);
        goto out_fds;
    }

    call = calloc(1, sizeof(*call));
    if (!call) {
        reply_error(c, req->call_id, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
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
    for (unsigned i = 0; i < n_fds; i++)
        closer_close(c->d->closer, c->peer.uid, fds[i]);
    wire_request_free(req);
}

void conn_call_done(struct rpc_call *call) {
    struct conn *c = call->conn;

    if (c && !call->in_dispatch) {
        TAILQ_REMOVE(&c->calls, call, link);
        c->n_calls--;
        rpc_call_free(call);
    }
}

static int queue_fds(struct conn *c, struct msghdr *mh, uint64_t tag) {
    int dropped = 0;

    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const unsigned char *data = CMSG_DATA(cm);
        for (size_t i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, data + i * sizeof(int), sizeof(int));
            if (c->n_fds >= CONN_MAX_QUEUED_FDS) {
                closer_close(c->d->closer, c->peer.uid, fd);
                dropped++;
                continue;
            }
            c->fds[c->n_fds].fd = fd;
            c->fds[c->n_fds].tag = tag;
            c->n_fds++;
        }
    }
    if (mh->msg_flags & MSG_CTRUNC)
        dropped++;
    /* Record the loss so the frame these came with is refused, not run with
     * fewer fds than it sent. */
    if (dropped && c->n_fds < CONN_MAX_QUEUED_FDS) {
        c->fds[c->n_fds].fd = -1;
        c->fds[c->n_fds].tag = tag;
        c->n_fds++;
        return 0;
    }
    return dropped ? -E2BIG : 0;
}

static void arm_frame_timeout(struct conn *c) {
    if (frame_reader_partial(&c->reader)) {
        if (!event_pending(c->ev_frame_timeout, EV_TIMEOUT, NULL)) {
            struct timeval tv = {
                .tv_sec = c->d->cfg.frame_timeout_ms / 1000,
                .tv_usec = (c->d->cfg.frame_timeout_ms % 1000) * 1000,
            };
            event_add(c->ev_frame_timeout, &tv);
        }
    } else {
        event_del(c->ev_frame_timeout);
    }
}

static void on_frame_timeout(evutil_socket_t fd, short what, void *arg) {
    struct conn *c = arg;

    log_warn("client uid %u pid %d did not finish a frame within %u ms; dropped", c->peer.uid,
             c->peer.pid, c->d->cfg.frame_timeout_ms);
    conn_close(c, "frame timeout");
}

/* Read nothing more from this connection for now: the fds its user handed
 * lyhd are not closed yet (one of them hangs a closer worker), or all users'
 * together are more than lyhd should hold. */
static bool conn_must_pause(const struct conn *c) {
    struct closer *cl = c->d->closer;
    unsigned all_cap = c->d->fd_limit / 4 > 64 ? c->d->fd_limit / 4 : 64;

    return cl && (closer_pending(cl, c->peer.uid) > CONN_PAUSE_PENDING ||
                  closer_total_pending(cl) > all_cap);
}

static void conn_pause(struct conn *c) {
    if (c->paused)
        return;
    c->paused = true;
    event_del(c->ev_read);
    log_warn("not reading from uid %u pid %d for now: %u of its file descriptors are still "
             "being closed",
             c->peer.uid, c->peer.pid, closer_pending(c->d->closer, c->peer.uid));
}

void conn_resume_if_ok(struct conn *c) {
    if (!c->paused || c->dead || conn_must_pause(c))
        return;
    c->paused = false;
    event_add(c->ev_read, NULL);
}

static void on_readable(evutil_socket_t fd, short what, void *arg) {
    struct conn *c = arg;
    uint8_t buf[64 * 1024];
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * CONN_SCM_MAX_FD)];
    } ctl;
    size_t budget = CONN_READ_BUDGET;

    while (budget > 0 && !c->dead) {
        if (conn_must_pause(c)) {
            conn_pause(c);
            return;
        }
        struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
        struct msghdr mh = {
            .msg_iov = &iov,
            .msg_iovlen = 1,
            .msg_control = ctl.buf,
            .msg_controllen = sizeof(ctl.buf),
        };
        ssize_t n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                break;
            conn_close(c, "read failed");
            return;
        }
        if (n == 0) {
            conn_close(c, "client closed");
            return;
        }
        budget -= (size_t)n < budget ? (size_t)n : budget;
        if (queue_fds(c, &mh, c->reader.offset + (uint64_t)n) < 0) {
            conn_refuse(c, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                        "too many file descriptors sent without a frame to carry them");
            return;
        }

        size_t off = 0;
        while (off < (size_t)n && !c->dead) {
            bool done = false;
            if (!frame_reader_partial(&c->reader))
                c->frame_started_mono_ms = lyhd_mono_ms();
            ssize_t used = frame_reader_feed(&c->reader, buf + off, (size_t)n - off, &done);
            if (used < 0) {
                conn_close(c, used == -EMSGSIZE ? "frame larger than the limit"
                                                : "malformed frame header");
                return;
            }
            off += (size_t)used;
            if (done) {
                uint32_t len;
                uint64_t start, end;
                _cleanup_free_ uint8_t *body = frame_reader_take(&c->reader, &len, &start, &end);
                /* Each frame gets the full frame timeout from its own start. */
                if (c->ev_frame_timeout)
                    event_del(c->ev_frame_timeout);
                handle_frame(c, body, len, end);
            }
        }
    }
    if (!c->dead)
        arm_frame_timeout(c);
}

int conn_new(struct lyhd *d, int fd, const struct ucred *peer, struct conn **ret) {
    struct conn *c = calloc(1, sizeof(*c));

    if (!c)
        return -ENOMEM;
    c->d = d;
    c->fd = fd;
    c->peer = *peer;
    /* what the peer calls itself, now, while its pid is most likely still its
     * own (for the audit log only) */
    if (proc_label(peer->pid, c->peer_label, sizeof(c->peer_label)) < 0)
        c->peer_label[0] = '\0';
    TAILQ_INIT(&c->calls);
    frame_reader_init(&c->reader, LYH_MAX_FRAME_BYTES);
    c->out = evbuffer_new();
    c->ev_read = event_new(d->base, fd, EV_READ | EV_PERSIST, on_readable, c);
    c->ev_write = event_new(d->base, fd, EV_WRITE | EV_PERSIST, on_writable, c);
    c->ev_frame_timeout = evtimer_new(d->base, on_frame_timeout, c);
    if (!c->out || !c->ev_read || !c->ev_write || !c->ev_frame_timeout ||
        event_add(c->ev_read, NULL) < 0) {
        if (c->out)
            evbuffer_free(c->out);
        if (c->ev_read)
            event_free(c->ev_read);
        if (c->ev_write)
            event_free(c->ev_write);
        if (c->ev_frame_timeout)
            event_free(c->ev_frame_timeout);
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
