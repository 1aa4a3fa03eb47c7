/* The protocol process, seen from the parent (see pproc.h).
 *
 * Owns: the system user the process runs as (created like the guard group
 * when missing), the fd of lyhd's own binary (opened once at start, so a
 * package upgrade that replaces the file on disk never pairs a new protocol
 * process with an old parent), the socketpair, the process's pidfd, and the
 * restart timer with its back-off. It must never decode a message but with
 * pmsg.c, never act on one before checking who may send it, and never wait
 * on the process from the event loop (but for 1 s at shutdown).
 *
 * Why a fresh exec: a fork alone would hand the protocol process a copy of
 * the parent's memory (the admin policy, every session's state, the nft
 * socket's buffers) and the parent's address-space layout; after execveat it
 * has only its arguments and what the parent chooses to send. The forked
 * child gives up root before the exec: the new image never runs with
 * privilege, not even while the loader and its argument parsing run. */
#include "daemon/pproc.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macros.h"
#include "daemon/audit.h"
#include "daemon/closer.h"
#include "daemon/dns_fwd.h"
#include "daemon/log.h"
#include "daemon/lyhd.h"
#include "daemon/pmsg.h"
#include "daemon/server.h"
#include "daemon/spawner.h"
#include "storage/audit_db.h"

#define PPROC_BACKOFF_MIN_MS 250
#define PPROC_BACKOFF_MAX_MS 30000
#define PPROC_STABLE_MS      30000 /* alive this long: the next death starts the back-off over */
#define PPROC_SNDBUF         (1 << 20)
#define PPROC_DYING_MS       2000 /* killed, or its first thread gone, this long: left behind */
#define PPROC_LEFT_MAX       8    /* processes left behind at once; then no new one starts */
#define PPROC_READY_MS       30000 /* a start that has not said READY by then is ended */

extern char **environ;

/* Exit statuses of the forked child before its exec (pproc_exit_hint). */
#define PPROC_EXIT_CREDS 126 /* could not become the user */
#define PPROC_EXIT_EXEC  127 /* the exec failed */

#if defined(SYS_setresuid32)
#define SYS_SETRESUID SYS_setresuid32
#define SYS_SETRESGID SYS_setresgid32
#define SYS_SETGROUPS SYS_setgroups32
#else
#define SYS_SETRESUID SYS_setresuid
#define SYS_SETRESGID SYS_setresgid
#define SYS_SETGROUPS SYS_setgroups
#endif

struct pproc {
    int exe_fd; /* -1 with --protocol-exe (exec by path) */
    char *env[8]; /* its environment: a few of lyhd's variables, never all of root's */
    uid_t uid;
    gid_t gid;
    int sock; /* -1: no process */
    pid_t pid;
    int pidfd;
    struct event *ev_sock, *ev_exit, *ev_restart;
    bool ready;
    bool said_ready; /* READY came (ready also falls when a send fails) */
    bool ending; /* SIGKILL sent: nothing it says counts any more */
    uint64_t started_ms;
    unsigned backoff_ms;
    size_t q_bound; /* pproc_queued: the socket holds at most this many bytes */
    /* A message that came with fds (or lost them: -EMFILE), held until the
     * FDS_CLOSED that follows it (pproc_take) */
    bool awaiting;
    uint64_t held_id;   /* its client connection */
    uint16_t held_type;
    size_t held_len;    /* 0: nothing to act on (its fds were lost, told already) */
    size_t held_nfds;
    int held_fds[PMSG_RECV_FDS];
    uint8_t held[PMSG_MAX_BYTES];
    /* A process whose exit does not come: a thread of it (or its exit's
     * close of its files) waits in a FUSE FLUSH, which no signal ends.
     * pproc_tick leaves it behind after PPROC_DYING_MS and starts the next
     * one; each left behind is reaped when it finally ends. */
    uint64_t dying_since_ms; /* 0: not known to be on its way out */
    unsigned ticks;
    bool left_full_told;
    struct left_behind {
        pid_t pid;
        int pidfd;
        struct event *ev;
    } left[PPROC_LEFT_MAX];
};

static int spawn(struct lyhd *d);
static bool reaped_within(pid_t pid, unsigned ms);

bool pproc_ready(const struct lyhd *d) { return d->pproc && d->pproc->ready && d->pproc->sock >= 0; }

pid_t pproc_pid(const struct lyhd *d) { return d->pproc ? d->pproc->pid : 0; }

/* The kernel's figure (SIOCOUTQ: the buffers of what the other end has not
 * read yet) can only fall between two askings, so the figure last asked
 * plus what was sent since, each message charged at twice its bytes and a
 * header (its buffer's true size is less), bounds it. The kernel is asked
 * again only when that bound reaches limit: at most one ioctl per some
 * hundred messages instead of one per answer (each one a system call on a
 * call's path). */
#define PPROC_MSG_CHARGE(len) (2 * (len) + 1024)

/* FORCE: past net.core.wmem_max (root), so that announcing every session to
 * a new process does not fill the queue. */
static void size_sndbuf(int fd) {
    int buf = PPROC_SNDBUF;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf)) < 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
}

size_t pproc_queued(struct lyhd *d, size_t limit) {
    struct pproc *p = d->pproc;
    int n = 0;

    if (!pproc_ready(d))
        return SIZE_MAX;
    if (p->q_bound < limit)
        return p->q_bound;
    /* SIOCOUTQ, which <linux/sockios.h> defines as TIOCOUTQ */
    if (ioctl(p->sock, TIOCOUTQ, &n) < 0 || n < 0)
        return SIZE_MAX;
    p->q_bound = (size_t)n;
    return (size_t)n;
}

/* End the process (SIGKILL through its pidfd: never another process that
 * got its pid); its exit event then starts a new one. */
static void end_process(struct lyhd *d, const char *why) {
    struct pproc *p = d->pproc;
    if (!p || p->pidfd < 0)
        return;
    log_error("protocol process %d: %s; ending it, a new one starts", p->pid, why);
    p->ready = false;
    p->ending = true;
    if (!p->dying_since_ms)
        p->dying_since_ms = lyhd_mono_ms();
    /* nothing more is read until it is gone: drain_dead then takes what
     * it sent as unread (the connections of requests in it are cut) */
    if (p->ev_sock)
        event_del(p->ev_sock);
    (void)syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
}

/* The closer's queue for the processes' sockets: no user's uid. */
#define PPROC_CLOSER_KEY ((uid_t)-1)

void pproc_drop_fds(struct lyhd *d, const int *fds, size_t nfds) {
    if (nfds)
        closer_close_all(d->closer, d->proto_uid, fds, nfds);
}

int pproc_send(struct lyhd *d, const uint8_t *buf, size_t len, const int *fds, size_t nfds) {
    if (!pproc_ready(d))
        return -ENOTCONN;
    int r = pmsg_send(d->pproc->sock, buf, len, fds, nfds);
    if (r == 0)
        d->pproc->q_bound = d->pproc->q_bound > SIZE_MAX - PPROC_MSG_CHARGE(len)
                                ? SIZE_MAX
                                : d->pproc->q_bound + PPROC_MSG_CHARGE(len);
    if (r == -EAGAIN)
        end_process(d, "it does not read its messages");
    else if (r < 0)
        d->pproc->ready = false; /* gone: its exit event follows */
    return r;
}

/* The guard's flow events: the NFLOG socket audit_start bound, for the
 * protocol process to read (each new one gets it again; what queued
 * meanwhile waits in it). */
static void send_nflog(struct lyhd *d) {
    struct pmsg_sync m = {0};
    uint8_t buf[16];
    size_t len;
    int fd = audit_nflog_fd(d), r;

    if (fd < 0)
        return;
    if ((r = pmsg_encode_sync(PMSG_NFLOG_START, &m, buf, sizeof(buf), &len)) < 0 ||
        (r = pproc_send(d, buf, len, &fd, 1)) < 0)
        log_error("cannot hand the flow events to the protocol process: %s; they wait in the "
                  "socket",
                  strerror(-r));
}

int pproc_dispatch(struct lyhd *d, const uint8_t *buf, size_t len, int *fds, size_t nfds) {
    uint16_t type;
    const uint8_t *pl;
    size_t pl_len;
    bool ready = pproc_ready(d);
    int r;

    /* every message but READY comes after READY */
    if (pmsg_header(buf, len, &type, &pl, &pl_len) < 0 || (type != PMSG_READY && !ready) ||
        (d->pproc && d->pproc->ending)) {
        pproc_drop_fds(d, fds, nfds);
        return -EBADMSG;
    }
    /* the client connections' messages: the only ones that carry fds */
    if (pmsg_conn_type(type) && type < PMSG_LISTEN_START) {
        struct pmsg_conn m;
        if (pmsg_decode_conn(type, pl, pl_len, &m) < 0) {
            pproc_drop_fds(d, fds, nfds);
            return -EBADMSG;
        }
        if (!d->server) { /* shutting down: the connections are gone */
            pproc_drop_fds(d, fds, nfds);
            return 0;
        }
        return server_on_message(d->server, type, &m, fds, nfds);
    }
    if (nfds) {
        pproc_drop_fds(d, fds, nfds);
        return -EBADMSG;
    }
    switch (type) {
    case PMSG_READY: {
        struct pmsg_ready m;
        /* once per process: not again after ready fell (a failed send, a
         * process seen dying) */
        if (ready || !d->pproc || d->pproc->said_ready || d->pproc->dying_since_ms ||
            pmsg_decode_ready(pl, pl_len, &m) < 0)
            return -EBADMSG;
        d->pproc->ready = d->pproc->said_ready = true;
        log_info("protocol process %d ready (uid %u)", d->pproc->pid, (unsigned)d->pproc->uid);
        if ((r = dns_fwd_send_policy(d)) < 0) {
            /* never a relay without the admin's deny list: a new process */
            log_error("cannot send the admin policy's domains to the protocol process: %s",
                      strerror(-r));
            end_process(d, "it did not take the admin policy");
            return 0;
        }
        dns_fwd_announce_all(d);
        send_nflog(d);
        if ((r = server_protocol_ready(d->server)) < 0 && d->pproc->ready) {
            log_error_errno(-r, "cannot hand lyhd's clients to the protocol process");
            end_process(d, "it did not take the clients");
        }
        return 0;
    }
    case PMSG_DNS_ANSWER: {
        struct pmsg_dns_answer m;
        if (pmsg_decode_dns_answer(pl, pl_len, &m) < 0 || (m.want_reply && m.req == 0))
            return -EBADMSG;
        r = dns_fwd_on_answer(d, &m);
        if (r == -EBADMSG)
            return r;
        if (m.want_reply) {
            struct pmsg_dns_answered a = {.req = m.req, .status = r < 0 ? r : 0};
            uint8_t out[32];
            size_t n;
            if (pmsg_encode_dns_answered(&a, out, sizeof(out), &n) == 0)
                (void)pproc_send(d, out, n, NULL, 0);
        }
        return 0;
    }
    case PMSG_DNS_RECORD: {
        struct pmsg_dns_record m;
        if (pmsg_decode_dns_record(pl, pl_len, &m) < 0)
            return -EBADMSG;
        dns_fwd_on_record(d, &m);
        return 0;
    }
    case PMSG_FLOWS: {
        static struct pmsg_flows m; /* 10 KiB: not on the stack */
        if (pmsg_decode_flows(pl, pl_len, &m) < 0 || audit_on_flows(d, &m) < 0)
            return -EBADMSG;
        return 0;
    }
    case PMSG_FLOWS_SYNCED: {
        struct pmsg_sync m;
        if (pmsg_decode_sync(type, pl, pl_len, &m) < 0 || audit_flows_synced(d, m.id) < 0)
            return -EBADMSG;
        return 0;
    }
    default:
        return -EBADMSG;
    }
}

/* A message whose fds we had no room for (pmsg_recv's -EMFILE). */
static int fds_lost(struct lyhd *d, const uint8_t *buf, size_t len) {
    uint16_t type;
    const uint8_t *pl;
    size_t pl_len;
    struct pmsg_conn m;

    if (!pproc_ready(d) || pmsg_header(buf, len, &type, &pl, &pl_len) < 0 ||
        !pmsg_conn_type(type) || type >= PMSG_LISTEN_START ||
        pmsg_decode_conn(type, pl, pl_len, &m) < 0)
        return -EBADMSG;
    return server_fds_lost(d->server, type, &m);
}

/* A client connection's message (those that may carry fds): its type and id. */
static int conn_msg(const uint8_t *buf, size_t len, uint16_t *type, uint64_t *id) {
    const uint8_t *pl;
    size_t pl_len;
    struct pmsg_conn m;

    if (pmsg_header(buf, len, type, &pl, &pl_len) < 0 || !pmsg_conn_type(*type) ||
        *type >= PMSG_LISTEN_START || pmsg_decode_conn(*type, pl, pl_len, &m) < 0)
        return -EBADMSG;
    *id = m.id;
    return 0;
}

/* The held message is let go unread (its process died, or is being ended):
 * its fds to the closer; a connection it was a request or refusal of is cut,
 * as drain_dead does for what was never read. */
/* Nothing held any more (its fds taken by whoever acted on them); the bytes
 * wiped: a Run's argv and environment. */
static void clear_held(struct pproc *p) {
    p->awaiting = false;
    p->held_nfds = 0;
    explicit_bzero(p->held, p->held_len);
    p->held_len = 0;
}

static void drop_held(struct lyhd *d) {
    struct pproc *p = d->pproc;

    if (!p->awaiting)
        return;
    /* a client it announced, never adopted: its socket may live on in a
     * process left behind */
    if (p->held_len && p->held_type == PMSG_CONN_OPEN && p->held_nfds == 1)
        server_shutdown_ours(d->server, p->held_fds[0]);
    pproc_drop_fds(d, p->held_fds, p->held_nfds);
    if (p->held_len && (p->held_type == PMSG_REQUEST || p->held_type == PMSG_REFUSE) &&
        d->server)
        server_conn_cut(d->server, p->held_id);
    clear_held(p);
}

/* Why the hold: the protocol process closes its copy of each fd it sends
 * right after sending it. Were the parent to act first and close its own
 * (a refusal, an fd no request takes: straight to the closer, whose close
 * then returns at once), the protocol process's close would be the last
 * one, and for a client's TCP socket with SO_LINGER and data its peer does
 * not read, it waits there: every client of lyhd waits with it (seen in
 * hardening.sh §8 "flood", one run in ten). Its FDS_CLOSED comes once its
 * copies are closed, so every last close is the parent's, on the closer. */
int pproc_take(struct lyhd *d, int r, const uint8_t *buf, size_t len, int *fds, size_t nfds) {
    struct pproc *p = d->pproc;
    uint16_t type;
    uint64_t id;
    bool is_conn = conn_msg(buf, len, &type, &id) == 0;

    if (p->awaiting && is_conn) {
        /* nothing of a client's comes between a message with fds and its
         * FDS_CLOSED: the process sends them in one queue, in order */
        if (r < 0 || nfds || type != PMSG_FDS_CLOSED || id != p->held_id) {
            pproc_drop_fds(d, fds, nfds);
            return -EBADMSG;
        }
        p->awaiting = false; /* the fds are pproc_dispatch's now, whatever it does */
        int rr = p->held_len ? pproc_dispatch(d, p->held, p->held_len, p->held_fds, p->held_nfds)
                             : 0;
        clear_held(p);
        return rr;
    }
    if (r == -EMFILE) { /* its fds were lost here: told now, FDS_CLOSED follows */
        pproc_drop_fds(d, fds, nfds);
        if (!is_conn || fds_lost(d, buf, len) < 0)
            return -EBADMSG;
        p->awaiting = true;
        p->held_id = id;
        return 0;
    }
    if (!nfds || p->awaiting) /* DNS and flow messages may come between: they carry none */
        return pproc_dispatch(d, buf, len, fds, nfds);
    if (!is_conn || len > sizeof(p->held) || nfds > PMSG_RECV_FDS) {
        pproc_drop_fds(d, fds, nfds);
        return -EBADMSG;
    }
    memcpy(p->held, buf, len);
    memcpy(p->held_fds, fds, nfds * sizeof(int));
    p->held_len = len;
    p->held_nfds = nfds;
    p->held_type = type;
    p->held_id = id;
    p->awaiting = true;
    return 0;
}

/* Receive one datagram and take it (pproc_take): pmsg_recv's result, and
 * *bad when what came makes no sense (the caller ends the process). What
 * came with a datagram that could not be received is dropped. */
static int recv_take(struct lyhd *d, bool *bad) {
    struct pproc *p = d->pproc;
    static uint8_t buf[PMSG_MAX_BYTES];
    int fds[PMSG_RECV_FDS];
    size_t len = 0, nfds = 0;
    int r = pmsg_recv(p->sock, buf, sizeof(buf), &len, fds, &nfds);

    *bad = false;
    if (r < 0) {
        pproc_drop_fds(d, fds, nfds);
        nfds = 0;
    }
    if (r == -EAGAIN || r == -EPIPE || r == -ECONNRESET)
        return r;
    *bad = (r < 0 && r != -EMFILE) || pproc_take(d, r, buf, len, fds, nfds) < 0;
    /* a REQUEST piece is a client's argv and environment (a Run's): not
     * left in lyhd's memory, which a fallback remover forks a copy of */
    if (r == 0 || r == -EMFILE)
        explicit_bzero(buf, len);
    return r;
}

static void on_sock(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct lyhd *d = arg;
    struct pproc *p = d->pproc;

    for (int i = 0; i < 64 && p->sock >= 0; i++) {
        bool bad;
        int r = recv_take(d, &bad);
        if (r == -EAGAIN)
            return;
        if (r == -EPIPE || r == -ECONNRESET) {
            /* gone (its exit event does the rest), or it closed its end
             * while alive: never left holding the sessions' sockets */
            end_process(d, "it closed its socket");
            p->ready = false;
            event_del(p->ev_sock);
            return;
        }
        if (bad) {
            end_process(d, "it sent a message that makes no sense");
            event_del(p->ev_sock);
            return;
        }
    }
}

static void on_restart(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct lyhd *d = arg;
    int r = spawn(d);
    if (r < 0) {
        struct pproc *p = d->pproc;
        p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : PPROC_BACKOFF_MIN_MS;
        if (p->backoff_ms > PPROC_BACKOFF_MAX_MS)
            p->backoff_ms = PPROC_BACKOFF_MAX_MS;
        log_error("cannot start the protocol process: %s; trying again in %u ms", strerror(-r),
                  p->backoff_ms);
        struct timeval tv = {p->backoff_ms / 1000, (p->backoff_ms % 1000) * 1000};
        evtimer_add(p->ev_restart, &tv);
    }
}

static void close_process(struct lyhd *d, struct pproc *p) {
    if (p->ev_sock)
        event_free(p->ev_sock);
    if (p->ev_exit)
        event_free(p->ev_exit);
    p->ev_sock = p->ev_exit = NULL;
    /* fds it sent that were never read go with the socket's last reference:
     * on a closer worker, not this loop, in a queue of the processes' own
     * (one that hangs on a client's fd holds up no other's) */
    closer_close(d->closer, PPROC_CLOSER_KEY, TAKE_FD(p->sock));
    drop_held(d);
    CLOSE_FD(p->pidfd);
    p->pid = 0;
    p->ready = false;
}

/* What a process that died had sent and the parent had not read yet: the
 * fds go to the closer, and a connection with a frame begun, a request or a
 * refusal among it is closed rather than handed to the next process (a
 * frame of it was cut, or its answer would never come). Bounded: the
 * socket holds at most 2 MiB. */
static void drain_dead(struct lyhd *d) {
    struct pproc *p = d->pproc;
    static uint8_t buf[PMSG_MAX_BYTES];

    drop_held(d); /* read before the rest, and as unread */
    for (int i = 0; i < 4096 && p->sock >= 0; i++) {
        int fds[PMSG_RECV_FDS];
        size_t len = 0, nfds = 0, pl_len;
        uint16_t type;
        const uint8_t *pl;
        struct pmsg_conn m;
        int r = pmsg_recv(p->sock, buf, sizeof(buf), &len, fds, &nfds);
        bool head = pmsg_header(buf, len, &type, &pl, &pl_len) == 0;
        /* a client it accepted and told of, never adopted: a process left
         * behind still holds its socket, so the client would wait for it */
        if (r == 0 && head && type == PMSG_CONN_OPEN && nfds == 1)
            server_shutdown_ours(d->server, fds[0]);
        pproc_drop_fds(d, fds, nfds);
        if (r < 0 && r != -EMFILE && r != -EBADMSG)
            return; /* all read (-EAGAIN), or the end */
        if (head && (type == PMSG_REQUEST || type == PMSG_REFUSE || type == PMSG_MIDFRAME) &&
            pmsg_decode_conn(type, pl, pl_len, &m) == 0)
            server_conn_cut(d->server, m.id);
    }
}

/* The process is gone (reaped, or left behind): what it had sent and not
 * read is dropped, its clients wait for the next one, which starts after
 * the back-off; the audit log says how it went. */
static void process_gone(struct lyhd *d, pid_t pid, const char *how) {
    struct pproc *p = d->pproc;

    drain_dead(d);
    close_process(d, p);
    /* its clients wait for the next one (but those it may have left mid-frame) */
    server_protocol_gone(d->server);
    uint64_t now = lyhd_mono_ms();
    if (now - p->started_ms >= PPROC_STABLE_MS)
        p->backoff_ms = PPROC_BACKOFF_MIN_MS;
    else
        p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : PPROC_BACKOFF_MIN_MS;
    if (p->backoff_ms > PPROC_BACKOFF_MAX_MS)
        p->backoff_ms = PPROC_BACKOFF_MAX_MS;
    log_warn("protocol process %d %s; sessions stay guarded, a new one starts in %u ms", pid, how,
             p->backoff_ms);
    char kv[192] = "", pidbuf[16];
    snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
    audit_kv(kv, sizeof(kv), "pid", pidbuf);
    audit_kv(kv, sizeof(kv), "how", how);
    audit_note(d, AUDIT_KIND_GUARD, NULL, false, 0, "protocol_exit", "%s",
               kv + (kv[0] == ' '));
    struct timeval tv = {p->backoff_ms / 1000, (p->backoff_ms % 1000) * 1000};
    evtimer_add(p->ev_restart, &tv);
}

static void on_exit_event(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct lyhd *d = arg;
    struct pproc *p = d->pproc;
    int status = 0;
    pid_t pid = p->pid;
    char how[64];

    if (waitpid(pid, &status, WNOHANG) != pid) {
        /* not yet (cannot be: the pidfd said so); look again, never lose it */
        struct timeval tv = {0, 100 * 1000};
        event_add(p->ev_exit, &tv);
        return;
    }
    if (WIFSIGNALED(status))
        snprintf(how, sizeof(how), "was killed by signal %d%s", WTERMSIG(status),
                 WTERMSIG(status) == SIGSYS ? " (a system call outside its filter)" : "");
    else if (WEXITSTATUS(status) == PPROC_EXIT_CREDS || WEXITSTATUS(status) == PPROC_EXIT_EXEC)
        snprintf(how, sizeof(how), "could not %s (status %d)",
                 WEXITSTATUS(status) == PPROC_EXIT_CREDS ? "become its user" : "be run",
                 WEXITSTATUS(status));
    else
        snprintf(how, sizeof(how), "exited with status %d", WEXITSTATUS(status));
    process_gone(d, pid, how);
}

bool pproc_stat_dying(const char *stat) {
    /* "PID (COMM) STATE PPID PGRP SESSION TTY TPGID FLAGS ... SIGNAL ...":
     * COMM is the process's to choose, ')' included, so the last ')' ends
     * it; FLAGS is field 9, SIGNAL (its first thread's pending signals, 31
     * bits) field 31 */
    const char *s = strrchr(stat, ')');
    char state = 0;
    unsigned long flags = 0, pending = 0;

    if (!s || sscanf(s + 1,
                     " %c %*s %*s %*s %*s %*s %lu %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
                     "%*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %lu",
                     &state, &flags, &pending) != 3)
        return false;
    /* a zombie leader (its other threads live on), an exiting one, or one
     * with SIGKILL pending (its first thread waits where no signal reaches
     * it: the kill took, the exit has not begun) */
    return state == 'Z' || state == 'X' || (flags & 0x4 /* PF_EXITING */) ||
           (pending & (1ul << (SIGKILL - 1)));
}

/* Is the process on its way out: its first thread exited and waits for the
 * others (a zombie leader), or it is exiting itself? Its pid names no other
 * process: an unreaped child of ours. */
static bool dying(pid_t pid) {
    char path[32], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return pproc_stat_dying(buf);
}

static void on_left_exit(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct left_behind *l = arg;

    if (waitpid(l->pid, NULL, WNOHANG) != l->pid) {
        struct timeval tv = {0, 100 * 1000};
        event_add(l->ev, &tv);
        return;
    }
    log_info("protocol process %d, left behind, has ended", l->pid);
    event_free(l->ev);
    l->ev = NULL;
    CLOSE_FD(l->pidfd);
    l->pid = 0;
}

/* Leave the process behind: keep its pidfd to reap it when it ends, and go
 * on as if it had exited. False when too many are left behind already (the
 * clients then wait: nothing new runs beside them unbounded). */
static bool leave_behind(struct lyhd *d) {
    struct pproc *p = d->pproc;
    struct left_behind *l = NULL;

    for (size_t i = 0; i < ARRAY_SIZE(p->left) && !l; i++)
        if (!p->left[i].pid)
            l = &p->left[i];
    if (!l) {
        if (!p->left_full_told)
            log_error("protocol process %d does not end, and %zu left behind have not either: no "
                      "new one starts until one does (a FUSE server that does not answer FLUSH? "
                      "`grep fuse /proc/%d/task/*/wchan`)",
                      p->pid, ARRAY_SIZE(p->left), p->pid);
        p->left_full_told = true;
        return false;
    }
    (void)syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
    l->ev = event_new(d->base, p->pidfd, EV_READ, on_left_exit, l);
    if (!l->ev || event_add(l->ev, NULL) < 0) {
        if (l->ev)
            event_free(l->ev);
        l->ev = NULL;
        if (!p->left_full_told)
            log_error("protocol process %d does not end, and cannot be left behind: out of "
                      "memory",
                      p->pid);
        p->left_full_told = true;
        return false;
    }
    l->pid = p->pid;
    l->pidfd = TAKE_FD(p->pidfd);
    event_free(p->ev_exit);
    p->ev_exit = NULL;
    p->left_full_told = false;
    process_gone(d, l->pid,
                 "did not end (a thread of it waits on a file, as in a FUSE FLUSH no one "
                 "answers); left behind");
    return true;
}

void pproc_tick(struct lyhd *d) {
    struct pproc *p = d->pproc;
    uint64_t now = lyhd_mono_ms();

    if (!p || p->pid <= 0 || p->pidfd < 0)
        return;
    /* Exited: its exit event has it (it runs on this loop pass or the next). */
    struct pollfd pfd = {.fd = p->pidfd, .events = POLLIN};
    if (poll(&pfd, 1, 0) > 0)
        return;
    /* A start that never said READY: a child that waits in its exec (a fork
     * of lyhd's closing a FUSE file) or in its set-up. Ended, then left
     * behind like any other that does not exit. */
    if (!p->said_ready && !p->ending && now - p->started_ms >= PPROC_READY_MS)
        end_process(d, "it did not say it was ready in time");
    /* The 2 s run from our SIGKILL; else its own death shows in /proc (looked
     * at once a second) */
    if (!p->dying_since_ms && p->ticks++ % 5 == 0 && dying(p->pid)) {
        p->dying_since_ms = now;
        /* its loop is gone: nothing more is sent to it, and what it sent
         * and the parent has not read is taken as a dead one's (drain_dead),
         * never acted on */
        p->ready = false;
        if (p->ev_sock)
            event_del(p->ev_sock);
    }
    if (p->dying_since_ms && now - p->dying_since_ms >= PPROC_DYING_MS)
        (void)leave_behind(d);
}

_Noreturn void pproc_exec_child(int sock, const struct pproc_exec *x) {
    /* Async-signal-safe calls only (a fork of lyhd's: the closer's threads
     * may hold locks). Its end of the pair becomes fd 3, every other fd
     * above 2 closes at exec, its own session (no signal from lyhd's
     * terminal), no signal blocked. Then it becomes the user for good (raw
     * system calls: this thread is all there is, and libc's wrappers would
     * try to reach the parent's other threads) and can never gain privilege
     * again, before the exec. */
    sigset_t none;
    int exe = x->exe_fd;
    if (exe == 3 && (exe = fcntl(3, F_DUPFD_CLOEXEC, 4)) < 0)
        _exit(PPROC_EXIT_EXEC);
    if ((sock == 3 ? fcntl(3, F_SETFD, 0) : dup2(sock, 3)) < 0 ||
        syscall(SYS_close_range, 4u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */) < 0)
        _exit(PPROC_EXIT_EXEC);
    (void)setsid();
    /* the parent's handlers (libevent's write to its signal socket) must
     * not run here once the process is _lyhd's to signal */
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            (void)signal(sig, SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (syscall(SYS_SETGROUPS, 0, NULL) < 0 || syscall(SYS_SETRESGID, x->gid, x->gid, x->gid) < 0 ||
        syscall(SYS_SETRESUID, x->uid, x->uid, x->uid) < 0 ||
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        _exit(PPROC_EXIT_CREDS);
    if (exe >= 0)
        syscall(SYS_execveat, exe, "", x->argv, x->envp, AT_EMPTY_PATH);
    else if (x->path)
        execve(x->path, x->argv, x->envp);
    _exit(PPROC_EXIT_EXEC);
}

static int spawn(struct lyhd *d) {
    struct pproc *p = d->pproc;
    int sv[2];
    char a_uid[16], a_gid[16], a_flags[4];
    char *argv[] = {(char *)"lyhd", (char *)"--protocol-process", (char *)"3", a_uid, a_gid,
                    a_flags, NULL, NULL};

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
        return -errno;
    for (int k = 0; k < 2; k++)
        size_sndbuf(sv[k]);
    snprintf(a_uid, sizeof(a_uid), "%u", (unsigned)p->uid);
    snprintf(a_gid, sizeof(a_gid), "%u", (unsigned)p->gid);
    snprintf(a_flags, sizeof(a_flags), "%u", (d->cfg.verbose ? 1u : 0u) | (d->cfg.use_syslog ? 2u : 0u));
    if (d->cfg.use_syslog && d->cfg.syslog_socket)
        argv[6] = (char *)d->cfg.syslog_socket;
    /* From the spawner, as a child of lyhd's (CLONE_PARENT): lyhd itself may
     * hold a client's fds (the closer's queues, a message held), and a fork
     * of lyhd's would have copies of them all, which its exec then closes;
     * if one is a FUSE file whose server does not answer FLUSH, the exec
     * never ends. The spawner holds none but a launch's stdio, which lyhd
     * checked (no FUSE file, no socket that lingers). Without a spawner
     * (given up, or not started yet: the first process) lyhd forks. */
    struct pproc_exec x = {
        .uid = p->uid,
        .gid = p->gid,
        .exe_fd = p->exe_fd,
        .path = d->cfg.protocol_exe,
        .argv = argv,
        .envp = p->exe_fd >= 0 ? p->env : environ, /* a test program: what the test set */
    };
    pid_t pid = -1;
    int pidfd = -1;
    int r = spawner_start_protocol(d, &x, sv[1], &pid, &pidfd);
    if (r == -ENOSYS) {
        pid = fork();
        if (pid == 0)
            pproc_exec_child(sv[1], &x);
        r = pid < 0 ? -errno : 0;
        if (r == 0 && (pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0)
            log_warn_errno(errno, "protocol process %d: no pidfd", pid);
    }
    close(sv[1]);
    if (r < 0) {
        close(sv[0]);
        return r;
    }
    p->sock = sv[0];
    p->q_bound = 0; /* a new socket: empty */
    p->pid = pid;
    p->ending = p->said_ready = false;
    p->dying_since_ms = 0;
    p->pidfd = pidfd;
    p->started_ms = lyhd_mono_ms();
    p->ev_sock = event_new(d->base, p->sock, EV_READ | EV_PERSIST, on_sock, d);
    p->ev_exit = p->pidfd >= 0 ? event_new(d->base, p->pidfd, EV_READ, on_exit_event, d) : NULL;
    if (!p->ev_sock || !p->ev_exit || event_add(p->ev_sock, NULL) < 0 ||
        event_add(p->ev_exit, NULL) < 0) {
        kill(pid, SIGKILL); /* our unreaped child: its pid names no other */
        /* bounded: one that waits in its exec's close of a FUSE file stays
         * a child of lyhd's, unreaped, until lyhd ends (logged) */
        if (!reaped_within(pid, 100))
            log_warn("protocol process %d did not end; left behind, unwatched", pid);
        close_process(d, p);
        return -ENOMEM;
    }
    log_debug("protocol process %d started", pid);
    return 0;
}

/* The user _lyhd: found, or created (no home, no shell, its own group). It
 * must not be root, nor share the guard gids. */
int pproc_user(struct lyhd *d, char *why, size_t whylen) {
    struct passwd *pw = getpwnam(LYHD_PROTO_USER);
    if (!pw) {
        char *argv[] = {(char *)"useradd", (char *)"--system", (char *)"--no-create-home",
                        (char *)"--home-dir", (char *)"/nonexistent", (char *)"--shell",
                        (char *)"/usr/sbin/nologin", (char *)"--user-group",
                        (char *)LYHD_PROTO_USER, NULL};
        const char *tool =
            access("/usr/sbin/useradd", X_OK) == 0 ? "/usr/sbin/useradd" : "/sbin/useradd";
        pid_t pid;
        int status = 0;
        bool ok = posix_spawn(&pid, tool, NULL, NULL, argv, (char *[]){NULL}) == 0 &&
                  waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                  WEXITSTATUS(status) == 0;
        /* another lyhd may have created it meanwhile: fine too */
        pw = getpwnam(LYHD_PROTO_USER);
        if (!pw) {
            snprintf(why, whylen,
                     "cannot create user %s for the protocol process; create it with `useradd "
                     "--system --no-create-home --shell /usr/sbin/nologin --user-group %s`",
                     LYHD_PROTO_USER, LYHD_PROTO_USER);
            return -EIO;
        }
        if (ok)
            log_info("created user %s (uid %u) for the protocol process", LYHD_PROTO_USER,
                     (unsigned)pw->pw_uid);
    }
    uid_t uid = pw->pw_uid;
    gid_t gid = pw->pw_gid;
    /* its own: no other account with that uid (it could signal the process;
     * the process could signal it) */
    struct passwd *owner = getpwuid(uid);
    bool own = owner && strcmp(owner->pw_name, LYHD_PROTO_USER) == 0;
    if (uid == 0 || gid == 0 || lyhd_guard_gid(&d->cfg, gid) || !own) {
        snprintf(why, whylen,
                 "user %s has uid %u gid %u%s: the protocol process needs an unprivileged user of "
                 "its own, outside the guard gids",
                 LYHD_PROTO_USER, (unsigned)uid, (unsigned)gid,
                 own ? "" : ", which another account shares");
        return -EPERM;
    }
    d->proto_uid = uid;
    d->proto_gid = gid;
    return 0;
}

/* The protocol process's environment: the time zone and the locale it logs
 * in, and the sanitizers' options of a test build; pointers into environ
 * (lyhd never changes its own). */
static void pick_env(struct pproc *p) {
    static const char *const keep[] = {"TZ=", "LANG=", "LC_ALL=", "ASAN_OPTIONS=",
                                       "UBSAN_OPTIONS=", "LSAN_OPTIONS="};
    size_t n = 0;
    for (char **e = environ; e && *e && n < ARRAY_SIZE(p->env) - 1; e++)
        for (size_t k = 0; k < ARRAY_SIZE(keep); k++)
            if (strncmp(*e, keep[k], strlen(keep[k])) == 0) {
                p->env[n++] = *e;
                break;
            }
    p->env[n] = NULL;
}

/* lyhd's own binary, which the child runs as the user: executable by it. */
static int open_own_binary(struct pproc *p, char *why, size_t whylen) {
    struct stat st;
    int r;

    p->exe_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (p->exe_fd >= 0 && p->exe_fd < 4) {
        /* the child's fd 3 is its socket: the binary's fd must not be there */
        int fd = fcntl(p->exe_fd, F_DUPFD_CLOEXEC, 4);
        close(p->exe_fd);
        p->exe_fd = fd;
    }
    if (p->exe_fd < 0 || fstat(p->exe_fd, &st) < 0) {
        r = -errno;
        snprintf(why, whylen, "cannot open lyhd's own binary (/proc/self/exe): %s", strerror(-r));
        return r;
    }
    mode_t x = st.st_uid == p->uid ? S_IXUSR : st.st_gid == p->gid ? S_IXGRP : S_IXOTH;
    if (!(st.st_mode & x)) {
        snprintf(why, whylen,
                 "lyhd's binary (mode %04o) is not executable by user %s, which the protocol "
                 "process runs as; make it executable by all (chmod 0755)",
                 (unsigned)(st.st_mode & 07777), LYHD_PROTO_USER);
        return -EACCES;
    }
    return 0;
}

int pproc_start(struct lyhd *d, char *why, size_t whylen) {
    struct pproc *p = calloc(1, sizeof(*p));
    int r;

    if (!p) {
        snprintf(why, whylen, "out of memory");
        return -ENOMEM;
    }
    p->sock = p->pidfd = p->exe_fd = -1;
    d->pproc = p;
    if (!d->proto_uid && (r = pproc_user(d, why, whylen)) < 0)
        return r;
    p->uid = d->proto_uid;
    p->gid = d->proto_gid;
    pick_env(p);
    if (d->cfg.protocol_exe)
        log_warn("the protocol process is %s (--protocol-exe: for tests only)",
                 d->cfg.protocol_exe);
    else if ((r = open_own_binary(p, why, whylen)) < 0)
        return r;
    p->ev_restart = evtimer_new(d->base, on_restart, d);
    if (!p->ev_restart) {
        snprintf(why, whylen, "out of memory");
        return -ENOMEM;
    }
    if ((r = spawn(d)) < 0) {
        snprintf(why, whylen, "cannot start the protocol process: %s", strerror(-r));
        return r;
    }
    return 0;
}

void pproc_sync_flows(struct lyhd *d, unsigned timeout_ms) {
    struct pproc *p = d->pproc;
    uint32_t id = audit_flows_sync(d);
    uint64_t end = lyhd_mono_ms() + timeout_ms;

    while (p && id && !audit_flows_synced_since(d, id) && p->sock >= 0 && !p->ending) {
        uint64_t now = lyhd_mono_ms();
        struct pollfd pfd = {.fd = p->sock, .events = POLLIN};
        bool bad;
        if (now >= end || poll(&pfd, 1, (int)(end - now)) <= 0)
            break;
        int r = recv_take(d, &bad);
        if (r == -EAGAIN)
            continue;
        if (r == -EPIPE || r == -ECONNRESET)
            break;
        if (bad) {
            end_process(d, "it sent a message that makes no sense");
            break;
        }
    }
    if (id && !audit_flows_synced_since(d, id))
        log_warn("the protocol process did not send the last flow events in %u ms", timeout_ms);
}

int pproc_attach_for_test(struct lyhd *d, int sock) {
    struct pproc *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->sock = sock;
    size_sndbuf(sock); /* as a real process's */
    p->pidfd = p->exe_fd = -1;
    p->ready = true;
    d->pproc = p;
    return 0;
}

void pproc_drain_for_test(struct lyhd *d) { drain_dead(d); }

/* Reap pid, waiting at most ms (it sleeps: at shutdown, and 100 ms on the
 * loop when a start fails after its child exists). */
static bool reaped_within(pid_t pid, unsigned ms) {
    for (unsigned waited = 0;; waited += 50) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return true;
        if (waited >= ms)
            return false;
        usleep(50 * 1000);
    }
}

void pproc_stop(struct lyhd *d) {
    struct pproc *p = d->pproc;
    if (!p)
        return;
    if (p->pid > 0) {
        pid_t pid = p->pid;
        int pidfd = TAKE_FD(p->pidfd);
        /* end of file: it exits (the fd itself is closed by the closer
         * below: fds it sent that were never read go with it) */
        (void)shutdown(p->sock, SHUT_RDWR);
        if (!reaped_within(pid, 1000)) {
            if (pidfd >= 0)
                (void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
            /* bounded: a thread of it in a FUSE FLUSH ends only when that
             * server answers (its closer; security-model.md) */
            if (!reaped_within(pid, 2000))
                log_warn("the protocol process (pid %d) did not end; left behind", pid);
        }
        CLOSE_FD(pidfd);
    }
    close_process(d, p);
    /* those left behind end when their file system answers: they were sent
     * SIGKILL; once lyhd is gone init reaps them */
    for (size_t i = 0; i < ARRAY_SIZE(p->left); i++)
        if (p->left[i].pid) {
            event_free(p->left[i].ev);
            CLOSE_FD(p->left[i].pidfd);
        }
    if (p->ev_restart)
        event_free(p->ev_restart);
    CLOSE_FD(p->exe_fd);
    free(p);
    d->pproc = NULL;
}
