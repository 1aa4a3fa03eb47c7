/* One client connection as the parent sees it: the requests the protocol
 * process hands up (PMSG_REQUEST, checked again here and dispatched), the
 * calls in flight, and the framed responses handed back (PMSG_OUT) within
 * the windows. The client's socket is read by the protocol process only
 * (proto_clients.c); conn.c says why. */
#ifndef LYHD_CONN_H
#define LYHD_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "common/lyh_limits.h"

#define LYH_MAX_PEER_GROUPS 64
#include "daemon/wire.h"

/* What the socket to the protocol process may hold before the parent stops
 * handing it client bytes (it holds 2 MiB: the rest is room for the DNS
 * messages and the closes). */
#define CONN_SOCK_MAX (1u << 20)
/* A connection's requests are not read while this much of its answers waits
 * for it, until it is down to CONN_OUT_RESUME: a client that pipelines small
 * requests faster than it reads is slowed down, not dropped at the output
 * limit (8 MiB, conn.c). What was read before the pause is still answered
 * (about 0.5 MiB of Capabilities answers, measured), and answers that reach
 * the limit all the same still close the connection. Both marks are above
 * what a stream queues by itself (audit.c checks it), so a follow or a
 * monitor alone never keeps its connection's Cancel unread. */
#define CONN_OUT_PAUSE  (2u << 20)
#define CONN_OUT_RESUME (3u << 19)

struct lyhd;
struct conn;
struct rpc_method;

/* A call in flight. Unary calls live only for the duration of dispatch;
 * streaming calls stay on the connection's list until rpc_finish(). */
struct rpc_call {
    struct conn *conn;
    struct closer *closer;      /* closes the fds not taken (daemon/closer.h) */
    uint64_t call_id;
    uint32_t method;            /* Request.method case */
    const struct rpc_method *row;
    struct ucred peer;          /* from SO_PEERCRED at connect */
    char peer_label[32];        /* its comm when it connected ("" unknown) */
    bool peer_is_admin;         /* decided for this call (conn_admin_now) */
    gid_t peer_groups[LYH_MAX_PEER_GROUPS]; /* SO_PEERGROUPS at connect */
    size_t n_peer_groups;
    int fds[LYH_MAX_FDS_PER_MESSAGE]; /* owned until taken; -1 = taken/none */
    unsigned n_fds;
    bool finished;
    bool in_dispatch;
    bool in_emit;               /* a response of it is being written: a close frees it later */
    bool hold_final;            /* mutating call: final answer waits for the commit */
    bool held_lost;             /* a held answer could not be kept (out of memory) */
    int final_code;
    uint8_t *held;              /* owned: the held final frame */
    size_t held_len;
    /* For streaming handlers: called once if the connection goes away before
     * rpc_finish(); must release what the handler attached to the call. */
    void (*on_disconnect)(struct rpc_call *call);
    void *state;
    TAILQ_ENTRY(rpc_call) link;
};

/* A connection the protocol process accepted (its id) whose socket fd (our
 * duplicate: taken) has this peer. */
int conn_new(struct lyhd *d, uint64_t id, int fd, const struct ucred *peer, struct conn **ret);
/* Tear down: open calls get on_disconnect, the protocol process is told to
 * close it (its CONN_GONE then calls conn_release; with no protocol process
 * that happens now). Safe to call from inside the connection's own
 * callbacks (freeing is deferred). */
void conn_close(struct conn *c, const char *why);
/* The end: the socket shut down (its client sees the end whoever else
 * holds a copy: a protocol process left behind), our duplicate closed off
 * the loop, the server told, the memory freed later. After conn_close, or
 * instead of it when the calls are gone already. */
void conn_release(struct conn *c);
/* Queue one response frame. -EMSGSIZE if it cannot be framed; -ENOBUFS when the
 * client does not read and the output limit is reached (the connection is then
 * closed). */
int conn_send(struct conn *c, const LyhResponse *resp);
/* Queue an already framed response (header included). When it cannot be
 * queued (out of memory) the connection is closed, so the client sees the end
 * of the stream rather than waiting for an answer that will never come. */
int conn_send_frame(struct conn *c, const uint8_t *frame, size_t len);
/* Send a connection-level error (call id 0) and close. */
void conn_refuse(struct conn *c, int code, const char *message);
/* Answer a request that never reaches a handler (refusals and limits go to
 * the audit log). */
void conn_reply_error(struct conn *c, uint64_t call_id, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The protocol process's messages about this connection. -EBADMSG: not its
 * to send (the caller ends the process). */
struct pmsg_conn;
/* A piece of a request (fds with the last piece, taken in every case). */
int conn_on_request(struct conn *c, const struct pmsg_conn *m, int *fds, size_t nfds);
/* n bytes of what it was handed were written to the client. */
int conn_drained(struct conn *c, uint32_t n);
/* Hand queued responses over (a new protocol process, room in the windows). */
void conn_flush(struct conn *c);
/* Room in the socket to the protocol process may have come (a DRAINED, a
 * tick): the connections that found it full hand over a piece each, in the
 * order they found it, until it is full again. */
void conn_serve_waiting(void);

uint64_t conn_id(const struct conn *c);
int conn_fd(const struct conn *c);
/* A request half received, a frame the protocol process said it has begun
 * to read (MIDFRAME), or responses handed over but not known to be written:
 * a protocol process that dies now may have cut a frame. */
bool conn_has_partial(const struct conn *c);
/* The protocol process has read part of a frame (true), or the frame ended
 * (a REQUEST's last piece or a REFUSE: false). */
void conn_set_midframe(struct conn *c, bool midframe);
/* A REFUSE of the protocol process's was taken (a REQUEST's last piece is
 * counted by conn_on_request): OUT tells the count, for its IDLE flag. */
void conn_took(struct conn *c);
/* A new protocol process adopts it: both sides count from zero again. */
void conn_count_from_zero(struct conn *c);

/* Is uid an admin now: root, or a member of --admin-group in the group
 * database as it is at this moment (primary group or member list), not as it
 * was when the connection was opened: a revoked admin's open connection (an
 * ssh forward) loses the rights with their next request. A lookup that fails
 * counts as no. */
bool conn_admin_now(const struct lyhd *d, uid_t uid);
/* The peer's supplementary groups as the kernel recorded them at connect. */
void conn_set_peer_groups(struct conn *c, const gid_t *groups, size_t n);
/* A finished call outside dispatch: unlink from its connection and free. */
void conn_call_done(struct rpc_call *call);

/* Stop reading from a connection whose user's fds are still being closed,
 * or that has not read 2 MiB of its answers (after each of its requests),
 * and start again once that is no longer so (a timer and each DRAINED call
 * conn_resume_if_ok). */
void conn_pause_if_needed(struct conn *c);
void conn_resume_if_ok(struct conn *c);
bool conn_paused(const struct conn *c);

/* The open call with this id, or NULL. */
struct rpc_call *conn_find_call(struct conn *c, uint64_t call_id);

uid_t conn_uid(const struct conn *c);
bool conn_is_dead(const struct conn *c);
/* Bytes queued for the client and not yet written (streams pace themselves by it). */
size_t conn_out_pending(const struct conn *c);
struct lyhd *conn_lyhd(const struct conn *c);
unsigned conn_calls_in_flight(const struct conn *c);
#endif
