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
 * Why an fd reserve: when the process runs out of fds, accept() keeps failing
 * with EMFILE while the pending connection stays in the backlog, and a
 * level-triggered loop would spin. We keep one spare fd; on EMFILE we free it,
 * accept and close the waiting connection (the client sees EOF rather than a
 * hang), and stop accepting until some connection closes. */
#include "daemon/audit.h"
#include "daemon/closer.h"
#include "daemon/server.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/macros.h"
#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/lyhd.h"
#include "storage/dircheck.h"

/* Closes of one user's fds that may still be pending before lyhd refuses
 * that user's new connections. */
#define SERVER_MAX_PENDING_CLOSES 64u

struct conn_slot {
    struct conn *conn;
    uid_t uid;
};

struct server {
    struct lyhd *d;
    int listen_fd;
    int dir_fd;                 /* the socket's directory, checked */
    char name[NAME_MAX + 1];    /* the socket's name in it */
    int reserve_fd;
    bool accept_paused;
    bool stopping;
    bool unlinked;
    struct event *ev_accept;
    struct conn_slot *slots;
    unsigned n_slots;
    unsigned cap_slots;
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

static void reserve_fd_take(struct server *s) {
    if (s->reserve_fd < 0)
        s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
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
    if (s->accept_paused && !s->stopping) {
        reserve_fd_take(s);
        if (s->reserve_fd >= 0) {
            s->accept_paused = false;
            event_add(s->ev_accept, NULL);
            log_info("fds available again; accepting connections");
        }
    }
}

void server_tick(struct server *s) {
    if (!s || s->stopping)
        return;
    for (unsigned i = 0; i < s->n_slots; i++)
        conn_resume_if_ok(s->slots[i].conn);
    /* A closed connection's fd may have been released by a closer worker
     * after server_conn_removed() tried to take the reserve back. */
    if (s->accept_paused) {
        reserve_fd_take(s);
        if (s->reserve_fd >= 0) {
            s->accept_paused = false;
            event_add(s->ev_accept, NULL);
            log_info("fds available again; accepting connections");
        }
    }
}

static void accept_one(struct server *s, int fd) {
    struct ucred cred;
    socklen_t len = sizeof(cred);
    struct conn *c = NULL;
    gid_t groups[LYH_MAX_PEER_GROUPS];
    socklen_t glen;
    bool groups_ok = true;
    char msg[256];
    int r;

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        log_warn("SO_PEERCRED failed on a new connection: %s; closing it", strerror(errno));
        close(fd);
        return;
    }
    /* Supplementary groups; more than we can hold means we cannot decide
     * admin membership or drop groups correctly, so refuse (fail closed). */
    glen = sizeof(groups);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) < 0) {
        groups_ok = false;
        glen = 0;
    }
    r = conn_new(s->d, fd, &cred, &c);
    if (r < 0) {
        log_error("cannot set up a connection for uid %u: %s", cred.uid, strerror(-r));
        close(fd);
        return;
    }
    conn_set_peer_groups(c, groups, glen / sizeof(gid_t));
    if (s->n_slots == s->cap_slots) {
        unsigned ncap = s->cap_slots ? s->cap_slots * 2 : 64;
        struct conn_slot *n = reallocarray(s->slots, ncap, sizeof(*n));
        if (!n) {
            conn_refuse(c, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "lyhd is out of memory");
            return;
        }
        s->slots = n;
        s->cap_slots = ncap;
    }
    s->slots[s->n_slots].conn = c;
    s->slots[s->n_slots].uid = cred.uid;
    s->n_slots++;

    /* A process inside a sandbox (it runs with the guard gid) must not drive
     * the daemon: it could start sessions of its own or, worse, reach admin
     * methods through groups its user has. */
    if (lyhd_guard_gid(&s->d->cfg, cred.gid)) {
        if (!s->d->audit ||
            audit_request(s->d, cred.uid, cred.pid, NULL, NULL, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                          "refused", "connection from inside a lyh sandbox"))
            log_warn("refused a connection from inside a sandbox (uid %u pid %d)", cred.uid,
                     cred.pid);
        conn_refuse(c, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                    "requests from inside a lyh sandbox are refused");
        return;
    }
    if (!groups_ok) {
        conn_refuse(c, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                    "your process has more supplementary groups than lyhd accepts (64)");
        return;
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
        return;
    }
    /* Limits are answered with a frame so the client can say why. */
    if (s->n_slots > s->d->cfg.max_conns) {
        snprintf(msg, sizeof(msg),
                 "lyhd has too many connections (limit %u); try again shortly",
                 s->d->cfg.max_conns);
        log_warn("connection limit reached (%u); refused uid %u pid %d", s->d->cfg.max_conns,
                 cred.uid, cred.pid);
        audit_request(s->d, cred.uid, cred.pid, NULL, NULL, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                      "limit", msg);
        conn_refuse(c, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, msg);
        return;
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
        return;
    }
}

static void on_accept(evutil_socket_t lfd, short what, void *arg) {
    struct server *s = arg;

    /* Bounded: take what is waiting now, then let other events run. */
    for (int i = 0; i < 64 && !s->stopping; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            accept_one(s, fd);
            continue;
        }
        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
            return;
        if (errno == EMFILE || errno == ENFILE) {
            CLOSE_FD(s->reserve_fd);
            fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0)
                close(fd);
            reserve_fd_take(s);
            /* accept4 allocates the fd before it looks at the backlog: EMFILE
             * with nobody waiting. Keep listening so the next client is turned
             * away here instead of hanging in the backlog. */
            if (fd < 0)
                return;
            if (!s->accept_paused) {
                log_warn("out of file descriptors; not accepting until a connection closes");
                s->accept_paused = true;
                event_del(s->ev_accept);
            }
            return;
        }
        log_error("accept failed: %s", strerror(errno));
        return;
    }
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
    /* Create each missing component 0755; existing ones are left as they are. */
    for (char *p = dir + 1; ; p++) {
        char c = *p;
        if (c == '/' || c == '\0') {
            *p = '\0';
            if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
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
    s->reserve_fd = -1;
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
    reserve_fd_take(s);
    s->ev_accept = event_new(d->base, s->listen_fd, EV_READ | EV_PERSIST, on_accept, s);
    if (!s->ev_accept || event_add(s->ev_accept, NULL) < 0) {
        r = -ENOMEM;
        snprintf(why, whylen, "cannot register the listener with the event loop");
        unlinkat(s->dir_fd, s->name, 0);
        goto fail;
    }
    *ret = s;
    return 0;

fail:
    if (s->ev_accept)
        event_free(s->ev_accept);
    CLOSE_FD(s->listen_fd);
    CLOSE_FD(s->reserve_fd);
    CLOSE_FD(s->dir_fd);
    free(s);
    return r;
}

void server_stop(struct server *s) {
    if (!s || s->stopping)
        return;
    s->stopping = true;
    if (s->ev_accept)
        event_del(s->ev_accept);
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
    while (s->n_slots > 0)
        conn_close(s->slots[0].conn, "daemon shutting down"); /* removes the slot */
    if (s->ev_accept)
        event_free(s->ev_accept);
    CLOSE_FD(s->reserve_fd);
    CLOSE_FD(s->dir_fd);
    free(s->slots);
    free(s);
}
