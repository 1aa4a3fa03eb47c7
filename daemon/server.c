/* The listening socket and the set of connections.
 *
 * Owns: the listener fd, the socket path (created here, unlinked on stop), the
 * fd reserve, and the list of open connections with their uids (for the global
 * and per-uid limits). Never reads requests; conn.c does.
 *
 * Why mode 0666: every request is authorized on its own from the peer's
 * credentials (SO_PEERCRED, read from the kernel at connect), so the socket
 * itself needs no access control; anyone may ask, the table decides. The mode
 * comes from the umask at bind, never from a chmod of the path (which follows
 * a symlink someone put there).
 *
 * Where the socket lives: a directory only root can change (owned by root,
 * not writable by group or others; every ancestor root's or sticky), opened
 * once; the socket is bound, probed and unlinked through that directory fd
 * (/proc/self/fd/N/NAME), so nobody can swap the directory or the name under
 * us between the check and the use, and clients who reach the path reach us.
 *
 * Who accepts: the protocol process (proto_clients.c). This file binds the
 * socket, hands it over (PMSG_LISTEN_START) to every protocol process that
 * starts, and keeps its own copy: while none runs, clients wait in the
 * backlog. Each accepted connection comes back as PMSG_CONN_OPEN with a
 * duplicate of its socket, from which the peer's credentials are read here,
 * from the kernel: never what the protocol process says. The duplicate is
 * kept, so a connection outlives the protocol process that served it: the
 * next one adopts it (PMSG_CONN_ADOPT), unless a frame may have been cut
 * (conn_has_partial), and the sessions whose clients are connected carry
 * on. */
#include "daemon/audit.h"
#include "daemon/closer.h"
#include "daemon/server.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/macros.h"
#include "daemon/caps.h"
#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/lyhd.h"
#include "daemon/pmsg.h"
#include "daemon/pproc.h"
#include "platform/linux/unixsock.h"
#include "storage/dircheck.h"

/* Closes of one user's fds that may still be pending before lyhd refuses
 * that user's new connections. */
#define SERVER_MAX_PENDING_CLOSES 64u
/* sweep_gone every 5 ticks of 200 ms: a second */
#define SERVER_SWEEP_TICKS 5u
#define SERVER_SWEEP_CLOSES 64u

struct conn_slot {
    struct conn *conn;
    uid_t uid;
};

struct server {
    struct lyhd *d;
    int listen_fd;
    int dir_fd;                 /* the socket's directory, checked */
    char name[NAME_MAX + 1];    /* the socket's name in it */
    uint64_t file_ino, file_dev; /* the socket file it is bound to */
    bool stopping;
    bool unlinked;
    uint64_t next_id;           /* above every connection id seen */
    /* A request in pieces, from the first to the last: the protocol process
     * queues them together, so no other connection's message comes between
     * (and one request at a time is all the parent ever assembles). */
    uint64_t piece_id;          /* 0: none open */
    uint32_t piece_next, piece_total;
    struct conn_slot *slots;
    unsigned n_slots;
    unsigned cap_slots;
    unsigned ticks;             /* server_tick's calls (200 ms each) */
};

unsigned server_conn_count(const struct server *s) { return s ? s->n_slots : 0; }
bool server_stopping(const struct server *s) { return s->stopping; }

unsigned server_conn_count_uid(const struct server *s, uid_t uid) {
    unsigned n = 0;

    for (unsigned i = 0; s && i < s->n_slots; i++)
        if (s->slots[i].uid == uid)
            n++;
    return n;
}

void server_conn_removed(struct server *s, struct conn *c) {
    if (!s)
        return;
    for (unsigned i = 0; i < s->n_slots; i++) {
        if (s->slots[i].conn == c) {
            s->slots[i] = s->slots[--s->n_slots];
            break;
        }
    }
}

static struct conn *find(const struct server *s, uint64_t id);

/* The connections with a call open (a stream: AuditFollow, Sessions, a Run
 * attached) whose client has gone: the protocol process says so with
 * CONN_GONE, and one that does not (it may be compromised, and kept the
 * socket) must not keep such a call going for someone who left, a root
 * client's AuditFollow of every user's records say. One poll over all of
 * them; a poll that fails closes nothing (the next sweep tries again). */
static void sweep_gone(struct server *s) {
    _cleanup_free_ struct pollfd *p = NULL;
    _cleanup_free_ uint64_t *ids = NULL;
    unsigned n = 0;

    for (unsigned i = 0; i < s->n_slots; i++)
        n += conn_calls_in_flight(s->slots[i].conn) > 0;
    if (n == 0)
        return;
    p = calloc(n, sizeof(*p));
    ids = calloc(n, sizeof(*ids));
    if (!p || !ids)
        return;
    n = 0;
    for (unsigned i = 0; i < s->n_slots; i++) {
        struct conn *c = s->slots[i].conn;
        if (conn_calls_in_flight(c) == 0)
            continue;
        p[n] = (struct pollfd){.fd = conn_fd(c), .events = POLLRDHUP};
        ids[n++] = conn_id(c);
    }
    if (poll(p, n, 0) <= 0)
        return;
    /* By id, found again each time: a close runs its calls' ends, which may
     * close and release other connections (a stream whose output limit the
     * session's end record passed, say). */
    /* At most SERVER_SWEEP_CLOSES a sweep: each close is a message to the
     * protocol process, whose socket may be full of answers; the rest go at
     * the next sweep. */
    unsigned closed = 0;
    for (unsigned i = 0; i < n && closed < SERVER_SWEEP_CLOSES; i++) {
        struct conn *c;
        if ((p[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) && (c = find(s, ids[i]))) {
            conn_close(c, "client gone (found by the sweep)");
            closed++;
        }
    }
}

void server_tick(struct server *s) {
    if (!s || s->stopping)
        return;
    for (unsigned i = 0; i < s->n_slots; i++)
        conn_resume_if_ok(s->slots[i].conn);
    conn_serve_waiting();
    if (++s->ticks % SERVER_SWEEP_TICKS == 0)
        sweep_gone(s);
}

static struct conn *find(const struct server *s, uint64_t id) {
    for (unsigned i = 0; i < s->n_slots; i++)
        if (conn_id(s->slots[i].conn) == id)
            return s->slots[i].conn;
    return NULL;
}

/* Is fd a connection accepted on our listening socket? The kernel says so:
 * a connected (not listening) AF_UNIX stream socket whose bound file is the
 * one our listener was bound to (an accepted socket shares it). A path
 * string would not do: anyone can bind a socket of their own to the same
 * string through a directory of theirs, and the listening socket itself
 * would answer SO_PEERCRED with root's credentials. */
static int ours(const struct server *s, int fd) {
    int v = 0, k;
    socklen_t vl = sizeof(v);
    uint64_t dev = 0, ino = 0;

    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &vl) < 0 || v != AF_UNIX)
        return 0;
    vl = sizeof(v);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &vl) < 0 || v != SOCK_STREAM)
        return 0;
    vl = sizeof(v);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) < 0 || v != 0)
        return 0;
    k = unixsock_file_of(fd, &dev, &ino);
    if (k == -EMFILE || k == -ENFILE || k == -ENOMEM)
        return k; /* ours or not, lyhd cannot tell now */
    return k == 0 && ino == s->file_ino && dev == s->file_dev;
}

static void turn_away(struct server *s, uint64_t id, int code, const char *msg);
static const char out_of_fds_msg[] = "lyhd is out of file descriptors; try again shortly";
static const char out_of_memory_msg[] = "lyhd is out of memory; try again shortly";

/* A new client (CONN_OPEN): its credentials from the kernel, the limits.
 * -EBADMSG: not a connection of ours, or an id in use or below the first
 * the protocol process was given. */
static int conn_open(struct server *s, uint64_t id, int fd) {
    struct ucred cred;
    socklen_t len = sizeof(cred);
    struct conn *c = NULL;
    gid_t groups[LYH_MAX_PEER_GROUPS];
    socklen_t glen;
    bool groups_ok = true;
    char msg[256];
    int r;

    /* ids come in order, each once: the next one and no other */
    int o = id == s->next_id ? ours(s, fd) : 0;
    if (o < 0) { /* out of fds to check it with: turned away, as below */
        pproc_drop_fds(s->d, &fd, 1);
        s->next_id = id + 1;
        log_warn("out of file descriptors: turned a client away (connection %llu); the limit "
                 "is %u", (unsigned long long)id, s->d->fd_limit);
        turn_away(s, id, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, out_of_fds_msg);
        return 0;
    }
    if (!o || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        pproc_drop_fds(s->d, &fd, 1);
        return -EBADMSG;
    }
    s->next_id = id + 1;
    /* a client that has already gone: nothing to serve (and an old
     * connection kept open is no way to act for someone who left) */
    if (unixsock_peer_gone(fd)) {
        closer_close(s->d->closer, cred.uid, fd);
        return 0;
    }
    /* Refusals that keep nothing of the connection (a slot is held until the
     * protocol process says a connection is gone, so the slots stay within
     * the limit even while that process is slow to say it, or never does).
     * A process inside a sandbox (it runs with the guard gid) must not drive
     * the daemon: it could start sessions of its own or, worse, reach admin
     * methods through groups its user has. */
    if (lyhd_guard_gid(&s->d->cfg, cred.gid)) {
        if (!s->d->audit ||
            audit_request(s->d, cred.uid, cred.pid, NULL, NULL, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                          "refused", "connection from inside a lyh sandbox"))
            log_warn("refused a connection from inside a sandbox (uid %u pid %d)", cred.uid,
                     cred.pid);
        closer_close(s->d->closer, cred.uid, fd);
        turn_away(s, id, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                  "requests from inside a lyh sandbox are refused");
        return 0;
    }
    /* Limits are answered with a frame so the client can say why. */
    if (s->n_slots >= s->d->cfg.max_conns) {
        snprintf(msg, sizeof(msg), "lyhd has too many connections (limit %u); try again shortly",
                 s->d->cfg.max_conns);
        log_warn("connection limit reached (%u); refused uid %u pid %d", s->d->cfg.max_conns,
                 cred.uid, cred.pid);
        audit_request(s->d, cred.uid, cred.pid, NULL, NULL, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                      "limit", msg);
        closer_close(s->d->closer, cred.uid, fd);
        turn_away(s, id, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, msg);
        return 0;
    }
    /* Supplementary groups; more than we can hold means we cannot decide
     * admin membership or drop groups correctly, so refuse (fail closed). */
    glen = sizeof(groups);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) < 0) {
        groups_ok = false;
        glen = 0;
    }
    if (s->n_slots == s->cap_slots) {
        unsigned ncap = s->cap_slots ? s->cap_slots * 2 : 64;
        struct conn_slot *n = reallocarray(s->slots, ncap, sizeof(*n));
        if (!n) {
            log_error("cannot take a connection of uid %u: out of memory", cred.uid);
            closer_close(s->d->closer, cred.uid, fd);
            turn_away(s, id, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, out_of_memory_msg);
            return 0;
        }
        s->slots = n;
        s->cap_slots = ncap;
    }
    r = conn_new(s->d, id, fd, &cred, &c);
    if (r < 0) {
        log_error_errno(-r, "cannot set up a connection for uid %u", cred.uid);
        closer_close(s->d->closer, cred.uid, fd);
        turn_away(s, id, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, out_of_memory_msg);
        return 0;
    }
    conn_set_peer_groups(c, groups, glen / sizeof(gid_t));
    s->slots[s->n_slots].conn = c;
    s->slots[s->n_slots].uid = cred.uid;
    s->n_slots++;

    if (!groups_ok) {
        conn_refuse(c, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                    "your process has more supplementary groups than lyhd accepts (64)");
        return 0;
    }
    /* A user whose fds lyhd is still closing (a close that hangs: a FUSE
     * server that does not answer) gets no new connection that could hand it
     * more. */
    if (closer_pending(s->d->closer, cred.uid) > SERVER_MAX_PENDING_CLOSES) {
        snprintf(msg, sizeof(msg),
                 "lyhd is still closing %u file descriptors you passed it; try again later",
                 closer_pending(s->d->closer, cred.uid));
        audit_request(s->d, cred.uid, cred.pid, NULL, NULL, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                      "limit", msg);
        conn_refuse(c, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, msg);
        return 0;
    }
    /* Root is not capped per uid: it can stop the daemon anyway, and the
     * global cap still holds. */
    if (cred.uid != 0 && server_conn_count_uid(s, cred.uid) > s->d->cfg.max_conns_per_uid) {
        snprintf(msg, sizeof(msg),
                 "too many connections for uid %u (limit %u per user); close some and retry",
                 cred.uid, s->d->cfg.max_conns_per_uid);
        log_warn("per-uid connection limit reached for uid %u (%u)", cred.uid,
                 s->d->cfg.max_conns_per_uid);
        audit_request(s->d, cred.uid, cred.pid, NULL, NULL, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                      "limit", msg);
        conn_refuse(c, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, msg);
        return 0;
    }
    return 0;
}

/* Does this message keep the pieces of a request together? A piece follows
 * the one before it, with the same total; only a first piece (offset 0)
 * starts a request; while one is open nothing of another connection's, and
 * no other message of its own, comes between. */
static bool pieces_in_order(struct server *s, uint16_t type, const struct pmsg_conn *m) {
    if (s->piece_id != 0 && (type != PMSG_REQUEST || m->id != s->piece_id ||
                             m->offset != s->piece_next || m->total != s->piece_total))
        return false;
    if (type != PMSG_REQUEST)
        return true;
    if (s->piece_id == 0 && m->offset != 0)
        return false;
    if (m->offset + m->data_len < m->total) {
        s->piece_id = m->id;
        s->piece_next = m->offset + (uint32_t)m->data_len;
        s->piece_total = m->total;
    } else {
        s->piece_id = 0;
    }
    return true;
}

int server_on_message(struct server *s, uint16_t type, const struct pmsg_conn *m, int *fds,
                      size_t nfds) {
    struct conn *c = find(s, m->id);
    int r = 0;

    if (s->stopping) {
        pproc_drop_fds(s->d, fds, nfds);
        return 0;
    }
    if (!pieces_in_order(s, type, m)) {
        pproc_drop_fds(s->d, fds, nfds);
        return -EBADMSG;
    }
    if (type == PMSG_CONN_OPEN)
        return nfds == 1 ? conn_open(s, m->id, fds[0]) : (pproc_drop_fds(s->d, fds, nfds), -EBADMSG);
    if (m->id >= s->next_id) { /* never opened: it makes that up (ids below the current
                                 * process's first are the adopted ones) */
        pproc_drop_fds(s->d, fds, nfds);
        return -EBADMSG;
    }
    switch (type) {
    case PMSG_FDS:
        if (nfds == 0)
            return -EBADMSG;
        if (c)
            closer_close_all(s->d->closer, conn_uid(c), fds, nfds);
        else
            pproc_drop_fds(s->d, fds, nfds);
        break;
    case PMSG_CONN_GONE:
        if (nfds)
            return pproc_drop_fds(s->d, fds, nfds), -EBADMSG;
        if (c) {
            conn_close(c, "client closed");
            if (find(s, m->id) == c) /* still here: released now */
                conn_release(c);
        }
        return 0;
    case PMSG_MIDFRAME:
        if (nfds)
            return pproc_drop_fds(s->d, fds, nfds), -EBADMSG;
        if (c && !conn_is_dead(c))
            conn_set_midframe(c, true);
        return 0;
    case PMSG_REQUEST:
        if (!c || conn_is_dead(c)) { /* it ended meanwhile */
            if (c)
                closer_close_all(s->d->closer, conn_uid(c), fds, nfds);
            else
                pproc_drop_fds(s->d, fds, nfds);
            return 0;
        }
        r = conn_on_request(c, m, fds, nfds);
        break;
    case PMSG_REFUSE:
        if (!c || conn_is_dead(c)) {
            if (c)
                closer_close_all(s->d->closer, conn_uid(c), fds, nfds);
            else
                pproc_drop_fds(s->d, fds, nfds);
            return 0;
        }
        closer_close_all(s->d->closer, conn_uid(c), fds, nfds);
        conn_set_midframe(c, false); /* a frame's end, or the connection's */
        conn_took(c);
        if (m->flags & PMSG_REFUSE_CLOSE)
            conn_refuse(c, m->code, m->text);
        else
            conn_reply_error(c, m->call_id, m->code, "%s", m->text);
        break;
    case PMSG_DRAINED:
        if (nfds)
            return pproc_drop_fds(s->d, fds, nfds), -EBADMSG;
        if (c && !conn_is_dead(c))
            r = conn_drained(c, m->count);
        if (r == 0)
            conn_serve_waiting(); /* the protocol process read: room, most likely */
        return r;
    default:
        pproc_drop_fds(s->d, fds, nfds);
        return -EBADMSG;
    }
    if (r == 0 && (c = find(s, m->id)) != NULL)
        conn_pause_if_needed(c);
    return r;
}

int server_fds_lost(struct server *s, uint16_t type, const struct pmsg_conn *m) {

    if (!s || s->stopping)
        return 0;
    if (type != PMSG_CONN_OPEN && type != PMSG_REQUEST && type != PMSG_REFUSE && type != PMSG_FDS)
        return -EBADMSG; /* it carries none */
    if (!pieces_in_order(s, type, m))
        return -EBADMSG;
    log_warn("out of file descriptors: turned a client away (connection %llu); the limit is %u",
             (unsigned long long)m->id, s->d->fd_limit);
    if (type != PMSG_CONN_OPEN) {
        struct conn *c = find(s, m->id);
        if (c && !conn_is_dead(c)) {
            audit_request(s->d, conn_uid(c), 0, NULL, NULL,
                          LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "limit", out_of_fds_msg);
            conn_refuse(c, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, out_of_fds_msg);
        }
        return m->id < s->next_id ? 0 : -EBADMSG;
    }
    if (m->id != s->next_id)
        return -EBADMSG;
    s->next_id = m->id + 1;
    turn_away(s, m->id, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, out_of_fds_msg);
    return 0;
}

/* A connection lyhd keeps nothing for (it had no fd to check it with, has
 * too many, is out of memory, or the client runs in a sandbox): there is no connection here to answer through, so the
 * refusal and the close go straight to the protocol process (its CONN_GONE
 * then finds nothing). */
static void turn_away(struct server *s, uint64_t id, int code, const char *msg) {
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
    uint8_t frame[256], buf[PMSG_MAX_BYTES];
    size_t flen, len;

    resp.code = code;
    resp.message = (char *)msg;
    resp.end_of_stream = true;
    struct pmsg_conn out = {.id = id, .data = frame};
    /* the refusal only while the socket has room (a flood of connections
     * at the limit must not fill it: that would end the protocol process);
     * the close always */
    if (pproc_queued(s->d, CONN_SOCK_MAX) < CONN_SOCK_MAX &&
        wire_response_frame_into(&resp, frame, sizeof(frame), &flen) == 0) {
        out.data_len = flen;
        if (pmsg_encode_conn(PMSG_OUT, &out, buf, sizeof(buf), &len) == 0)
            (void)pproc_send(s->d, buf, len, NULL, 0);
    }
    struct pmsg_conn cl = {.id = id};
    if (pmsg_encode_conn(PMSG_CONN_CLOSE, &cl, buf, sizeof(buf), &len) == 0)
        (void)pproc_send(s->d, buf, len, NULL, 0);
}

void server_conn_cut(struct server *s, uint64_t id) {
    struct conn *c = s && id < s->next_id ? find(s, id) : NULL;
    if (c && !conn_is_dead(c))
        conn_set_midframe(c, true);
}

void server_shutdown_ours(struct server *s, int fd) {
    if (s && ours(s, fd) == 1)
        (void)shutdown(fd, SHUT_RDWR);
}

void server_protocol_gone(struct server *s) {
    if (!s)
        return;
    s->piece_id = 0; /* the rest of it died with the process (conn_has_partial) */
    /* from the end: conn_release swaps the last slot into the freed one */
    for (unsigned i = s->n_slots; i-- > 0;) {
        if (i >= s->n_slots)
            continue;
        struct conn *c = s->slots[i].conn;
        /* (a process left behind still holds its copies: with no process
         * ready conn_release shuts the socket down, so these clients see the
         * end all the same) */
        if (conn_is_dead(c))
            conn_release(c); /* its CONN_GONE will not come */
        else if (conn_has_partial(c)) /* released at once: no process to tell */
            conn_close(c, "the protocol process died in the middle of a frame");
    }
}

int server_protocol_ready(struct server *s) {
    uint8_t buf[64];
    size_t len;
    int r;

    if (!s || s->stopping || s->listen_fd < 0)
        return 0;
    /* its ids start above every one seen, so it never names one twice */
    struct pmsg_conn m = {.id = s->next_id,
                          .count = s->d->cfg.frame_timeout_ms ? s->d->cfg.frame_timeout_ms : 1,
                          .code = (uint8_t)(s->d->cfg.max_fds_per_msg < LYH_MAX_FDS_PER_MESSAGE
                                                ? s->d->cfg.max_fds_per_msg
                                                : LYH_MAX_FDS_PER_MESSAGE)};
    if (m.code == 0)
        m.code = 1;
    /* what a Capabilities answer says, before any client is accepted (a
     * fact CAPS cannot carry: none sent, the parent answers every one) */
    struct caps_facts f;
    caps_facts_of(s->d, &f);
    struct pmsg_caps caps = {
        .flags = (uint8_t)((f.cgroup2 ? PMSG_CAPS_CGROUP2 : 0) | (f.listeners ? PMSG_CAPS_LISTENERS : 0)),
        .landlock_abi = (uint8_t)f.landlock_abi,
        .max_fds = (uint8_t)f.max_fds,
        .max_calls = (uint16_t)f.max_calls,
    };
    if (f.landlock_abi >= 0 && f.landlock_abi <= UINT8_MAX && f.max_fds <= UINT8_MAX &&
        f.max_calls <= UINT16_MAX && pmsg_encode_caps(&caps, buf, sizeof(buf), &len) == 0 &&
        (r = pproc_send(s->d, buf, len, NULL, 0)) < 0)
        return r;
    if ((r = pmsg_encode_conn(PMSG_LISTEN_START, &m, buf, sizeof(buf), &len)) < 0 ||
        (r = pproc_send(s->d, buf, len, &s->listen_fd, 1)) < 0)
        return r;
    for (unsigned i = 0; i < s->n_slots; i++) {
        struct conn *c = s->slots[i].conn;
        int fd = conn_fd(c);
        struct pmsg_conn a = {.id = conn_id(c)};
        conn_count_from_zero(c); /* the new process counts what it hands over from 0 */
        if ((r = pmsg_encode_conn(PMSG_CONN_ADOPT, &a, buf, sizeof(buf), &len)) < 0 ||
            (r = pproc_send(s->d, buf, len, &fd, 1)) < 0)
            return r;
        if (conn_paused(c)) {
            struct pmsg_conn p = {.id = conn_id(c), .count = 1};
            if ((r = pmsg_encode_conn(PMSG_CONN_PAUSE, &p, buf, sizeof(buf), &len)) < 0 ||
                (r = pproc_send(s->d, buf, len, NULL, 0)) < 0)
                return r;
        }
    }
    /* Answers only once every connection is the new process's: a flush
     * serves the line, which may hold connections of later slots (an OUT
     * for an id it does not know yet would be dropped, and its bytes never
     * drained). */
    for (unsigned i = 0; i < s->n_slots; i++)
        conn_flush(s->slots[i].conn);
    conn_serve_waiting(); /* those still waiting from the last process */
    return 0;
}

/* The socket's path through its checked directory, for bind and connect. */
static int via_dir(const struct server *s, struct sockaddr_un *sa) {
    int n = snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", s->dir_fd, s->name);
    return n < 0 || (size_t)n >= sizeof(sa->sun_path) ? -ENAMETOOLONG : 0;
}

/* Is someone serving on the path? 1 yes, 0 no (stale or absent), <0 error. */
static int probe_socket(const struct server *s, const char *path, char *why, size_t whylen) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat st;
    _cleanup_close_ int fd = -1;

    if (fstatat(s->dir_fd, s->name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(why, whylen, "cannot stat %s: %s", path, strerror(errno));
        return -errno;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(why, whylen, "%s exists and is not a socket; remove it or pick --socket", path);
        return -EEXIST;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || via_dir(s, &sa) < 0) {
        snprintf(why, whylen, "socket: %s", strerror(fd < 0 ? errno : ENAMETOOLONG));
        return fd < 0 ? -errno : -ENAMETOOLONG;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        struct ucred cred = {0};
        socklen_t len = sizeof(cred);
        (void)getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
        snprintf(why, whylen, "another lyhd (pid %d) is already serving on %s; stop it first",
                 cred.pid, path);
        return 1;
    }
    return 0; /* ECONNREFUSED and friends: nobody home */
}

/* Open the socket's directory and check that only root can change it: owned
 * by root, writable by nobody else (a sticky /tmp is not enough: anyone could
 * put a socket of their own at our name while we are stopped), every ancestor
 * root's or sticky. */
static int open_socket_dir(struct server *s, const char *path, char *why, size_t whylen) {
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    struct stat st;

    if (!slash || !slash[1] || strlen(slash + 1) > NAME_MAX) {
        snprintf(why, whylen, "socket path %s must name a file in a directory", path);
        return -EINVAL;
    }
    snprintf(s->name, sizeof(s->name), "%s", slash + 1);
    snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
    s->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dir_fd < 0 || fstat(s->dir_fd, &st) < 0) {
        snprintf(why, whylen, "cannot open the socket directory %s: %s", dir, strerror(errno));
        return -errno;
    }
    if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        snprintf(why, whylen,
                 "the socket directory %s is %s (mode %04o); lyhd's socket must live in a "
                 "directory only root can write: pick another --socket or fix the directory",
                 dir, st.st_uid != geteuid() ? "not owned by root" : "writable by others",
                 (unsigned)(st.st_mode & 07777));
        return -EPERM;
    }
    return storage_check_ancestors(s->dir_fd, "socket directory", dir, "lyhd's socket", why,
                                   whylen);
}

static int make_parent_dir(const char *path, char *why, size_t whylen) {
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char *slash;

    snprintf(dir, sizeof(dir), "%s", path);
    slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    /* Create each missing component 0755; existing ones are left as they
     * are, and not asked for (an mkdir takes the parent's lock even when the
     * name exists, and a user can hold that of "/" or "/var"). */
    for (char *p = dir + 1; ; p++) {
        char c = *p;
        if (c == '/' || c == '\0') {
            struct stat st;
            *p = '\0';
            if (lstat(dir, &st) < 0 && errno == ENOENT && mkdir(dir, 0755) < 0 && errno != EEXIST) {
                snprintf(why, whylen, "cannot create %s: %s", dir, strerror(errno));
                return -errno;
            }
            *p = c;
        }
        if (c == '\0')
            break;
    }
    return 0;
}

int server_start(struct lyhd *d, struct server **ret, char *why, size_t whylen) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    const char *path = d->cfg.socket_path;
    struct server *s = NULL;
    mode_t old_umask;
    int r;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(why, whylen, "socket path %s is longer than %zu bytes", path,
                 sizeof(sa.sun_path) - 1);
        return -ENAMETOOLONG;
    }
    r = make_parent_dir(path, why, whylen);
    if (r < 0)
        return r;

    s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->d = d;
    s->listen_fd = -1;
    s->dir_fd = -1;
    r = open_socket_dir(s, path, why, whylen);
    if (r < 0)
        goto fail;
    r = probe_socket(s, path, why, whylen);
    if (r != 0) {
        r = r > 0 ? -EADDRINUSE : r;
        goto fail;
    }
    s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->listen_fd < 0) {
        r = -errno;
        snprintf(why, whylen, "socket: %s", strerror(errno));
        goto fail;
    }
    /* The probe said nobody answers: replace a stale socket. */
    if (unlinkat(s->dir_fd, s->name, 0) < 0 && errno != ENOENT) {
        r = -errno;
        snprintf(why, whylen, "cannot remove stale socket %s: %s", path, strerror(errno));
        goto fail;
    }
    r = via_dir(s, &sa);
    if (r < 0) {
        snprintf(why, whylen, "socket path %s is too long to bind through its directory", path);
        goto fail;
    }
    /* Mode 0666 from the umask: no chmod of a path afterwards. */
    old_umask = umask(0111);
    r = bind(s->listen_fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old_umask);
    if (r < 0) {
        r = -errno;
        snprintf(why, whylen, "cannot bind %s: %s", path, strerror(errno));
        goto fail;
    }
    if (listen(s->listen_fd, 128) < 0) {
        r = -errno;
        snprintf(why, whylen, "cannot listen on %s: %s", path, strerror(errno));
        unlinkat(s->dir_fd, s->name, 0);
        goto fail;
    }
    /* the file it is bound to: how an accepted connection is told from any
     * other socket (ours()) */
    struct stat fst;
    if (fstatat(s->dir_fd, s->name, &fst, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISSOCK(fst.st_mode)) {
        r = fstatat(s->dir_fd, s->name, &fst, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : -EEXIST;
        snprintf(why, whylen, "cannot stat the socket %s after binding it", path);
        unlinkat(s->dir_fd, s->name, 0);
        goto fail;
    }
    s->file_ino = fst.st_ino;
    s->file_dev = fst.st_dev;
    s->next_id = 1;
    *ret = s;
    return 0;

fail:
    CLOSE_FD(s->listen_fd);
    CLOSE_FD(s->dir_fd);
    free(s);
    return r;
}

void server_stop(struct server *s) {
    if (!s || s->stopping)
        return;
    s->stopping = true;
    CLOSE_FD(s->listen_fd);
    if (!s->unlinked) {
        unlinkat(s->dir_fd, s->name, 0);
        s->unlinked = true;
    }
}

void server_free(struct server *s) {
    if (!s)
        return;
    server_stop(s);
    while (s->n_slots > 0) {
        struct conn *c = s->slots[s->n_slots - 1].conn;
        conn_close(c, "daemon shutting down");
        if (s->n_slots && s->slots[s->n_slots - 1].conn == c)
            conn_release(c); /* removes the slot */
    }
    CLOSE_FD(s->dir_fd);
    free(s->slots);
    free(s);
}
