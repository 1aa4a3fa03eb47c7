/* The holder of a background session (cli/hold.h) and the pieces the `lyh`
 * commands use to reach it.
 *
 * What it must never do: take input from anyone but its user (or watch-only
 * from root), act for an agent (a sandboxed process of the same user has
 * the guard gid, which is none of the user's groups: refused), or end the
 * agent on its own account. It holds no privilege: it is the user's process
 * and can do nothing the user could not.
 *
 * One poll loop: the listening socket, the attached clients, the pty master
 * and lyhd's connection. The agent's output goes into a ring (the scrollback,
 * replayed on attach) and to every attached client. It ends when the agent
 * has: the pty reports that no process holds its slave any more, and lyhd
 * has said how it ended (or is gone: then the status is unknown). */
#include "cli/hold.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/lyh_client.h"
#include "common/macros.h"

#define HOLD_RING (256 * 1024)    /* scrollback kept for attach (the issue asks >= 128 KiB) */
#define HOLD_CLIENTS 4            /* attached at once */
#define HOLD_FIRST_MSG_MS 1000    /* a new connection's first message */
#define HOLD_EXIT_WAIT_MS 5000    /* after the pty closed: lyhd's word on the status */
#define HOLD_DRAIN_MS 1000        /* after lyhd's word: the pty's last output */

/* ---- the directory and the socket ---------------------------------------------- */

/* Where uid's directory lives: one place for every process of the user
 * (not $TMPDIR, which differs between a login, sudo, cron and a tmux pane,
 * and may be somewhere a sandbox can write), and for root's --user. */
static void dir_path(uid_t uid, char *buf, size_t len) {
    snprintf(buf, len, "/tmp/lyh-%u", (unsigned)uid);
}

/* Open uid's directory (O_DIRECTORY|O_NOFOLLOW: never a symlink) and check
 * the open directory itself, so what is checked is what is used. */
static int dir_open(uid_t uid, bool create, int *ret_fd, char *path, size_t plen, char *why,
                    size_t wlen) {
    struct stat st;

    dir_path(uid, path, plen);
    if (create && uid == getuid() && mkdir(path, 0700) < 0 && errno != EEXIST) {
        int k = -errno;
        snprintf(why, wlen, "cannot make %s: %s", path, strerror(-k));
        return k;
    }
    _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int k = -errno;
        snprintf(why, wlen, "%s: %s", path,
                 k == -ELOOP || k == -ENOTDIR ? "not a directory" : strerror(-k));
        return k == -ELOOP || k == -ENOTDIR ? -EPERM : k;
    }
    if (fstat(fd, &st) < 0)
        return -errno;
    /* someone else may have made it first (/tmp is everyone's): then it
     * is not ours to trust */
    if (st.st_uid != uid || (st.st_mode & 077)) {
        snprintf(why, wlen,
                 "%s belongs to uid %u with mode %04o, not to uid %u alone (someone else made "
                 "it first?); an admin can remove it",
                 path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)uid);
        return -EPERM;
    }
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int hold_dir(uid_t uid, bool create, char *buf, size_t len, char *why, size_t wlen) {
    int fd = -1;
    int k = dir_open(uid, create, &fd, buf, len, why, wlen);
    CLOSE_FD(fd);
    return k;
}

static int check_name(const char *name, char *why, size_t wlen) {
    if (hold_name_ok(name))
        return 0;
    snprintf(why, wlen,
             "'%s' is not a session name (1 to %d letters, digits, '_', '.' or '-', not "
             "starting with '.' or '-')",
             name, HOLD_NAME_MAX);
    return -EINVAL;
}

/* The address of entry in the open directory dirfd. */
static void entry_addr(int dirfd, const char *entry, struct sockaddr_un *sa) {
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", dirfd, entry);
}

static bool in_our_groups(gid_t g) {
    gid_t groups[NGROUPS_MAX];
    int n = getgroups(NGROUPS_MAX, groups);

    if (g == getgid() || g == getegid())
        return true;
    for (int i = 0; i < n; i++)
        if (groups[i] == g)
            return true;
    return false;
}

/* Connect to entry (NAME.sock) of uid's open directory: a socket of uid's,
 * not a symlink; no waiting (a full backlog is -EAGAIN); the listener must
 * be uid and, for the caller's own sessions, have one of the caller's
 * groups (an agent of the same user has the guard gid). */
static int connect_entry(int dirfd, uid_t uid, const char *entry, int *ret_fd) {
    struct sockaddr_un sa;
    struct ucred cr;
    socklen_t cl = sizeof(cr);
    struct stat st;

    if (fstatat(dirfd, entry, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    if (!S_ISSOCK(st.st_mode) || st.st_uid != uid)
        return -EPERM;
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    entry_addr(dirfd, entry, &sa);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return -errno;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0)
        return -errno;
    if (cr.uid != uid || (uid == getuid() && !in_our_groups(cr.gid)))
        return -EPERM;
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)
        return -errno;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int hold_connect(uid_t uid, const char *name, int *ret_fd) {
    char path[128], why[256], entry[HOLD_NAME_MAX + 8];
    int k;

    if ((k = check_name(name, why, sizeof(why))) < 0)
        return k;
    _cleanup_close_ int dirfd = -1;
    if ((k = dir_open(uid, false, &dirfd, path, sizeof(path), why, sizeof(why))) < 0)
        return k;
    snprintf(entry, sizeof(entry), "%s.sock", name);
    return connect_entry(dirfd, uid, entry, ret_fd);
}

/* Remove entry when nothing listens there any more (its holder was
 * SIGKILLed). Under the directory's lock: the caller holds it. */
static void reap_if_stale(int dirfd, const char *entry) {
    int fd = -1;
    if (connect_entry(dirfd, getuid(), entry, &fd) == -ECONNREFUSED)
        (void)unlinkat(dirfd, entry, 0);
    CLOSE_FD(fd);
}

/* How many sessions answer in the open directory. */
static size_t count_live(int dirfd) {
    _cleanup_close_ int dup = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
    DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
    size_t n = 0;

    if (!d)
        return 0;
    dup = -1; /* the DIR has it */
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.' || l <= 5 || strcmp(e->d_name + l - 5, ".sock") != 0)
            continue;
        int fd = -1, k = connect_entry(dirfd, getuid(), e->d_name, &fd);
        if (k == 0 || k == -EAGAIN) /* answers, or too busy to: alive */
            n++;
        CLOSE_FD(fd);
    }
    closedir(d);
    return n;
}

int hold_listen(const char *name, int *ret_fd, char *ret_path, size_t plen, char *why,
                size_t wlen) {
    char dir[128], entry[HOLD_NAME_MAX + 8], tmp[64];
    struct sockaddr_un sa;
    int k;

    if ((k = check_name(name, why, wlen)) < 0)
        return k;
    _cleanup_close_ int dirfd = -1;
    if ((k = dir_open(getuid(), true, &dirfd, dir, sizeof(dir), why, wlen)) < 0)
        return k;
    /* one lyh at a time makes, replaces or counts sessions (flock: let go
     * when dirfd closes, whatever happens) */
    if (flock(dirfd, LOCK_EX) < 0)
        return -errno;
    if (count_live(dirfd) >= HOLD_MAX_SESSIONS) {
        snprintf(why, wlen,
                 "you have %d background sessions, each holding one of the connections lyhd "
                 "allows a user; end one first (lyh ls, lyh kill NAME)",
                 HOLD_MAX_SESSIONS);
        return -EMFILE;
    }
    snprintf(entry, sizeof(entry), "%s.sock", name);
    snprintf(tmp, sizeof(tmp), ".new-%d.sock", (int)getpid());
    (void)unlinkat(dirfd, tmp, 0);
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* Bound and listening under a name no one looks for, then linked to
     * its own: NAME.sock never names a socket that refuses (a connect
     * between bind and listen would take it for a stale one), and link
     * never replaces a live session. */
    entry_addr(dirfd, tmp, &sa);
    mode_t old = umask(0177);
    k = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
    umask(old);
    if (k == 0 && listen(fd, 8) < 0)
        k = -errno;
    for (int tries = 0; k == 0 && tries < 2; tries++) {
        if (linkat(dirfd, tmp, dirfd, entry, 0) == 0)
            break;
        k = -errno;
        if (k != -EEXIST)
            break;
        reap_if_stale(dirfd, entry);
        k = faccessat(dirfd, entry, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ? -EADDRINUSE : 0;
    }
    (void)unlinkat(dirfd, tmp, 0);
    if (k == -EADDRINUSE || k == -EEXIST) {
        snprintf(why, wlen,
                 "a session named '%s' is running (lyh attach %s), or something else is at "
                 "%s/%s; pick another --name",
                 name, name, dir, entry);
        return -EADDRINUSE;
    }
    if (k < 0) {
        snprintf(why, wlen, "cannot listen at %s/%s: %s", dir, entry, strerror(-k));
        return k;
    }
    snprintf(ret_path, plen, "%s/%s", dir, entry);
    *ret_fd = TAKE_FD(fd);
    return 0;
}

static int cmp_name(const void *a, const void *b) { return strcmp(a, b); }

int hold_names(uid_t uid, char (*names)[HOLD_NAME_MAX + 1], size_t max, size_t *ret_n) {
    char dir[128], why[256];
    size_t n = 0;
    int k, dirfd = -1;

    if ((k = dir_open(uid, false, &dirfd, dir, sizeof(dir), why, sizeof(why))) < 0)
        return k;
    DIR *d = fdopendir(dirfd);
    if (!d) {
        k = -errno;
        close(dirfd);
        return k;
    }
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        size_t l = strlen(e->d_name);
        if (l <= 5 || strcmp(e->d_name + l - 5, ".sock") != 0 || l - 5 > HOLD_NAME_MAX)
            continue;
        memcpy(names[n], e->d_name, l - 5);
        names[n][l - 5] = '\0';
        if (hold_name_ok(names[n]))
            n++;
    }
    closedir(d);
    qsort(names, n, sizeof(names[0]), cmp_name);
    *ret_n = n;
    return 0;
}

void hold_reap(const char *name) {
    char dir[128], why[256], entry[HOLD_NAME_MAX + 8];
    _cleanup_close_ int dirfd = -1;

    if (!hold_name_ok(name) ||
        dir_open(getuid(), false, &dirfd, dir, sizeof(dir), why, sizeof(why)) < 0 ||
        flock(dirfd, LOCK_EX) < 0)
        return;
    snprintf(entry, sizeof(entry), "%s.sock", name);
    reap_if_stale(dirfd, entry);
}

/* ---- messages ------------------------------------------------------------------ */

/* One message as one datagram, with send(2)'s flags. */
static int send_msg(int fd, const struct hold_msg *m, int flags) {
    uint8_t buf[HOLD_MSG_MAX];
    int n = hold_msg_encode(m, buf, sizeof(buf));

    if (n < 0)
        return n;
    for (;;) {
        if (send(fd, buf, (size_t)n, MSG_NOSIGNAL | flags) == n)
            return 0;
        if (errno != EINTR)
            return -errno;
    }
}

int hold_send(int fd, const struct hold_msg *m) { return send_msg(fd, m, 0); }

int hold_recv(int fd, uint8_t *buf, struct hold_msg *m, int timeout_ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};

    for (;;) {
        int k = poll(&p, 1, timeout_ms);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -errno;
        if (k == 0)
            return -ETIMEDOUT;
        /* MSG_TRUNC: the datagram's real length, so an oversized one is
         * refused rather than read cut short */
        ssize_t n = recv(fd, buf, HOLD_MSG_MAX, MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0)
            return errno == ECONNRESET ? -ECONNRESET : -errno;
        if (n == 0)
            return -ECONNRESET;
        if (n > HOLD_MSG_MAX)
            return -EBADMSG;
        return hold_msg_decode(buf, (size_t)n, m);
    }
}

int hold_ask_info(uid_t uid, const char *name, struct hold_info *ret) {
    _cleanup_free_ uint8_t *buf = malloc(HOLD_MSG_MAX);
    _cleanup_close_ int fd = -1;
    struct hold_msg m = {.type = HOLD_INFO_ASK};
    int k;

    if (!buf)
        return -ENOMEM;
    if ((k = hold_connect(uid, name, &fd)) < 0 || (k = hold_send(fd, &m)) < 0 ||
        (k = hold_recv(fd, buf, &m, 2000)) < 0)
        return k;
    if (m.type != HOLD_INFO)
        return -EBADMSG;
    *ret = m.info;
    return 0;
}

/* ---- the holder ---------------------------------------------------------------- */

#define HOLD_SLOTS (HOLD_CLIENTS + 4) /* attached, and new ones saying what they want */

enum slot_state { SLOT_FREE, SLOT_NEW, SLOT_ATTACHED };

/* A connection. An attached one reads the ring from pos on: the holder
 * sends what it can without waiting and asks poll for the rest. */
struct slot {
    enum slot_state state;
    int fd;
    bool read_only;
    uint64_t pos;      /* ATTACHED: the next byte of the ring to send */
    uint64_t deadline; /* NEW: when it must have said what it wants */
};

struct holder {
    int listen_fd, master;
    struct lyh_client *lyhd; /* NULL once the connection ended */
    uint64_t call_id;
    struct hold_info info;
    char sock_path[160];
    struct slot sl[HOLD_SLOTS];
    uint8_t ring[HOLD_RING];
    uint64_t total; /* bytes ever written to the ring */
    bool exited, known;
    int32_t exit_code, signal;
    uint16_t rows, cols;
    uint8_t buf[HOLD_MSG_MAX];
    lianyaohu_v1_Response resp;
};

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One message without waiting: 0, -EAGAIN (no room now), or -errno. */
static int send_now(int fd, const struct hold_msg *m) { return send_msg(fd, m, MSG_DONTWAIT); }

static void update_attached(struct holder *h) {
    h->info.attached = false;
    for (size_t i = 0; i < HOLD_SLOTS; i++)
        if (h->sl[i].state == SLOT_ATTACHED && !h->sl[i].read_only)
            h->info.attached = true;
}

static void drop(struct holder *h, struct slot *c, uint8_t reason) {
    if (c->state == SLOT_FREE)
        return;
    if (reason) {
        struct hold_msg m = {.type = HOLD_DETACHED, .reason = reason};
        (void)send_now(c->fd, &m);
    }
    CLOSE_FD(c->fd);
    c->state = SLOT_FREE;
    update_attached(h);
}

/* Where a new client starts reading: the last HOLD_RING bytes; when the
 * ring has wrapped, from the first line start in them. */
static uint64_t replay_from(const struct holder *h) {
    uint64_t from = h->total > HOLD_RING ? h->total - HOLD_RING : 0;

    if (from > 0)
        for (uint64_t i = from; i < h->total && i < from + 4096; i++)
            if (h->ring[i % HOLD_RING] == '\n')
                return i + 1;
    return from;
}

/* Send an attached client what it has not had, as far as its socket takes
 * it now. A client whose unread output the ring has overwritten fell behind
 * by more than the scrollback: dropped (it attaches again for a fresh one). */
static void flush(struct holder *h, struct slot *c) {
    if (h->total - c->pos > HOLD_RING) {
        drop(h, c, 0);
        return;
    }
    while (c->pos < h->total) {
        uint8_t chunk[HOLD_DATA_MAX];
        size_t n = 0;
        while (n < sizeof(chunk) && c->pos + n < h->total) {
            chunk[n] = h->ring[(c->pos + n) % HOLD_RING];
            n++;
        }
        struct hold_msg m = {.type = HOLD_OUTPUT, .data = chunk, .len = n};
        int k = send_now(c->fd, &m);
        if (k == -EAGAIN)
            return; /* poll says when there is room */
        if (k < 0) {
            drop(h, c, 0);
            return;
        }
        c->pos += n;
    }
}

static void flush_all(struct holder *h) {
    for (size_t i = 0; i < HOLD_SLOTS; i++)
        if (h->sl[i].state == SLOT_ATTACHED)
            flush(h, &h->sl[i]);
}

/* A line for the user on every attached terminal (not queued: one that has
 * no room for it now misses it). */
static void note(struct holder *h, const char *text) {
    struct hold_msg m = {.type = HOLD_NOTE, .data = (const uint8_t *)text, .len = strlen(text)};
    for (size_t i = 0; i < HOLD_SLOTS; i++)
        if (h->sl[i].state == SLOT_ATTACHED)
            (void)send_now(h->sl[i].fd, &m);
}

static void ring_add(struct holder *h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        h->ring[(h->total + i) % HOLD_RING] = p[i];
    h->total += n;
    h->info.active = (uint64_t)time(NULL);
}

static void set_size(struct holder *h, uint16_t rows, uint16_t cols, bool redraw) {
    struct winsize ws = {.ws_row = rows, .ws_col = cols};

    if (h->master < 0)
        return;
    if (rows != h->rows || cols != h->cols) {
        (void)ioctl(h->master, TIOCSWINSZ, &ws);
        h->rows = rows;
        h->cols = cols;
        return; /* the kernel tells the foreground group (SIGWINCH) */
    }
    /* The same size: tell it anyway, so a full-screen agent draws its
     * screen again for the client that just attached. */
    pid_t pg = redraw ? tcgetpgrp(h->master) : -1;
    if (pg > 1)
        (void)kill(-pg, SIGWINCH);
}

static int peer_ok(int fd, bool *read_only) {
    struct ucred cr;
    socklen_t cl = sizeof(cr);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0)
        return -errno;
    if (cr.uid == getuid() && in_our_groups(cr.gid)) {
        *read_only = false;
        return 0;
    }
    if (cr.uid == 0) { /* an admin watches; only the owner types */
        *read_only = true;
        return 0;
    }
    return -EPERM;
}

static void on_accept(struct holder *h) {
    bool ro = false;
    int fd = accept4(h->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

    if (fd < 0)
        return;
    struct slot *c = NULL;
    for (size_t i = 0; i < HOLD_SLOTS && !c; i++)
        if (h->sl[i].state == SLOT_FREE)
            c = &h->sl[i];
    /* no slot, or not the user (an agent of the same user has the guard
     * gid; root only watches): closed at once */
    if (!c || peer_ok(fd, &ro) < 0) {
        close(fd);
        return;
    }
    *c = (struct slot){.state = SLOT_NEW, .fd = fd, .read_only = ro,
                       .deadline = mono_ms() + HOLD_FIRST_MSG_MS};
}

/* A new connection's first message says what it is for. */
static void on_first(struct holder *h, struct slot *c, const struct hold_msg *m) {
    if (m->type == HOLD_INFO_ASK) {
        struct hold_msg a = {.type = HOLD_INFO, .info = h->info};
        (void)send_now(c->fd, &a);
        drop(h, c, 0);
        return;
    }
    if (m->type != HOLD_ATTACH) {
        drop(h, c, 0);
        return;
    }
    size_t attached = 0;
    for (size_t i = 0; i < HOLD_SLOTS; i++)
        attached += h->sl[i].state == SLOT_ATTACHED;
    if (attached >= HOLD_CLIENTS) {
        drop(h, c, HOLD_GONE_FULL);
        return;
    }
    c->state = SLOT_ATTACHED;
    c->read_only = c->read_only || (m->flags & HOLD_ATTACH_READ_ONLY);
    c->pos = replay_from(h);
    update_attached(h);
    if (!c->read_only)
        set_size(h, m->rows, m->cols, true);
    if (h->lyhd == NULL && !h->exited) {
        struct hold_msg n = {.type = HOLD_NOTE,
                             .data = (const uint8_t *)"lyhd restarted while this session ran: "
                                                      "the agent runs on, guarded; when it "
                                                      "ends its exit status will be unknown"};
        n.len = strlen((const char *)n.data);
        (void)send_now(c->fd, &n);
    }
    flush(h, c);
}

/* Keys to the agent, without waiting: what its terminal has no room for
 * now (an agent that reads no input) is dropped, as keys typed into a
 * full terminal are. */
static void keys_in(struct holder *h, const uint8_t *p, size_t n) {
    while (n > 0 && h->master >= 0) {
        ssize_t w = write(h->master, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
    h->info.active = (uint64_t)time(NULL);
}

static void on_client(struct holder *h, struct slot *c) {
    struct hold_msg m;
    int k = hold_recv(c->fd, h->buf, &m, 0);

    if (k == -ETIMEDOUT)
        return;
    if (k < 0) {
        drop(h, c, 0);
        return;
    }
    if (c->state == SLOT_NEW) {
        on_first(h, c, &m);
        return;
    }
    switch (m.type) {
    case HOLD_INPUT:
        if (!c->read_only)
            keys_in(h, m.data, m.len);
        break;
    case HOLD_RESIZE:
        if (!c->read_only)
            set_size(h, m.rows, m.cols, false);
        break;
    case HOLD_DETACH:
        drop(h, c, HOLD_GONE_ASKED);
        break;
    default: /* not a message for an attached client */
        drop(h, c, 0);
        break;
    }
}

/* The agent's output: to the ring, then to the clients. False once the pty
 * reports that nothing holds its slave any more (EIO). */
static bool on_master(struct holder *h) {
    uint8_t chunk[HOLD_DATA_MAX];
    ssize_t n = read(h->master, chunk, sizeof(chunk));

    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (n <= 0)
        return false;
    ring_add(h, chunk, (size_t)n);
    flush_all(h);
    return true;
}

static void lyhd_gone(struct holder *h) {
    lyh_client_close(h->lyhd);
    h->lyhd = NULL;
    if (!h->exited) {
        h->info.lyhd_lost = true;
        note(h, "lost contact with lyhd (it stopped or restarted): the agent runs on, "
                "guarded; when it ends its exit status will be unknown");
    }
}

/* lyhd's responses to the Run call: the end of the agent, and Ctrl-Z (a
 * stopped agent has no shell here to continue it: it is continued). Only
 * RunEvent.exited ends the session here: lyhd going away, or its last word
 * when it shuts down ("the session keeps running"), leaves the agent to
 * run on. */
static void on_lyhd(struct holder *h) {
    memset(&h->resp, 0, sizeof(h->resp));
    int k = lyh_client_recv(h->lyhd, &h->resp, 50);

    if (k == -ETIMEDOUT)
        return;
    if (k < 0) {
        lyhd_gone(h);
        return;
    }
    if (h->resp.call_id != h->call_id && h->resp.call_id != 0)
        return;
    if (h->resp.code == lianyaohu_v1_Code_OK &&
        h->resp.which_result == lianyaohu_v1_Response_run_event_tag) {
        const lianyaohu_v1_RunEvent *ev = &h->resp.result.run_event;
        if (ev->which_event == lianyaohu_v1_RunEvent_exited_tag) {
            int64_t sig = ev->event.exited.signal, code = ev->event.exited.exit_code;
            h->exited = true;
            /* as lyh run reads it: a signal, else a code; anything else
             * (lyhd could not tell) is unknown */
            h->known = (sig > 0 && sig < 128) || (sig <= 0 && code >= 0 && code < 256);
            h->signal = sig > 0 && sig < 128 ? (int32_t)sig : 0;
            h->exit_code = h->known && !h->signal ? (int32_t)code : 0;
        } else if (ev->which_event == lianyaohu_v1_RunEvent_stopped_tag && h->info.pid > 1) {
            (void)kill(-(pid_t)h->info.pid, SIGCONT);
        }
    }
    if (h->resp.end_of_stream || h->resp.code != lianyaohu_v1_Code_OK)
        lyhd_gone(h);
}

static void close_other_fds(const int *keep, size_t n) {
    int top = 2;
    for (size_t i = 0; i < n; i++)
        if (keep[i] > top)
            top = keep[i];
    for (int fd = 3; fd <= top; fd++) {
        bool k = false;
        for (size_t i = 0; i < n; i++)
            k = k || keep[i] == fd;
        if (!k)
            close(fd);
    }
    (void)syscall(SYS_close_range, (unsigned)top + 1, ~0U, 0);
}

/* Its own session first (no terminal's signals reach it from now on), then
 * the dispositions, then the signals the caller blocked across fork. The
 * fds it keeps are above 2 (lyh's main makes sure 0-2 are open), so
 * /dev/null over stdio cannot replace one of them. */
static void become_daemon(struct hold_start *s) {
    int keep[3] = {s->listen_fd, s->master, lyh_client_fd(s->client)};
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    static const int ignored[] = {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTSTP,
                                  SIGTTIN, SIGTTOU, SIGWINCH};
    sigset_t none;

    (void)setsid();
    for (size_t i = 0; i < ARRAY_SIZE(ignored); i++)
        signal(ignored[i], SIG_IGN);
    signal(SIGCHLD, SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (null >= 0) {
        for (int fd = 0; fd < 3; fd++)
            (void)dup2(null, fd);
        if (null > 2)
            close(null);
    }
    close_other_fds(keep, ARRAY_SIZE(keep));
    (void)chdir("/");
}

void hold_run(struct hold_start *s) {
    struct winsize ws;
    bool master_open = true;
    uint64_t deadline = 0;

    become_daemon(s);
    struct holder *h = calloc(1, sizeof(*h));
    if (!h)
        _exit(1);
    h->listen_fd = s->listen_fd;
    h->master = s->master;
    h->lyhd = s->client;
    h->call_id = s->call_id;
    h->info = s->info;
    h->info.active = (uint64_t)time(NULL);
    snprintf(h->sock_path, sizeof(h->sock_path), "%s", s->sock_path);
    for (size_t i = 0; i < HOLD_SLOTS; i++)
        h->sl[i] = (struct slot){.state = SLOT_FREE, .fd = -1};
    if (ioctl(h->master, TIOCGWINSZ, &ws) == 0) {
        h->rows = ws.ws_row;
        h->cols = ws.ws_col;
    }
    (void)fcntl(h->master, F_SETFL, fcntl(h->master, F_GETFL) | O_NONBLOCK);
    (void)fcntl(h->listen_fd, F_SETFL, fcntl(h->listen_fd, F_GETFL) | O_NONBLOCK);

    for (;;) {
        uint64_t now = mono_ms();
        /* The end: the pty is closed and lyhd said how the agent ended (or
         * cannot any more, or did not within a few seconds); or lyhd said
         * so and the pty's last output had a moment to come. */
        if (!master_open && (h->exited || !h->lyhd)) {
            break;
        } else if (!master_open || h->exited) {
            if (!deadline)
                deadline = now + (master_open ? HOLD_DRAIN_MS : HOLD_EXIT_WAIT_MS);
            if (now >= deadline)
                break;
        }
        if (h->lyhd && lyh_client_buffered(h->lyhd)) {
            on_lyhd(h);
            continue;
        }
        uint64_t wake = deadline;
        struct pollfd p[3 + HOLD_SLOTS] = {
            {.fd = h->listen_fd, .events = POLLIN},
            {.fd = master_open ? h->master : -1, .events = POLLIN},
            {.fd = h->lyhd ? lyh_client_fd(h->lyhd) : -1, .events = POLLIN},
        };
        for (size_t i = 0; i < HOLD_SLOTS; i++) {
            struct slot *c = &h->sl[i];
            p[3 + i] = (struct pollfd){.fd = c->state == SLOT_FREE ? -1 : c->fd, .events = POLLIN};
            if (c->state == SLOT_ATTACHED && c->pos < h->total)
                p[3 + i].events |= POLLOUT;
            if (c->state == SLOT_NEW && (!wake || c->deadline < wake))
                wake = c->deadline;
        }
        int timeout = wake ? (int)(wake > now ? wake - now : 0) : -1;
        if (poll(p, ARRAY_SIZE(p), timeout) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            master_open = on_master(h);
        if (p[2].revents)
            on_lyhd(h);
        now = mono_ms();
        for (size_t i = 0; i < HOLD_SLOTS; i++) {
            struct slot *c = &h->sl[i];
            if (c->state == SLOT_FREE)
                continue;
            if (p[3 + i].revents & (POLLIN | POLLHUP | POLLERR))
                on_client(h, c);
            if (c->state == SLOT_ATTACHED && (p[3 + i].revents & POLLOUT))
                flush(h, c);
            if (c->state == SLOT_NEW && now >= c->deadline)
                drop(h, c, 0); /* said nothing within a second */
        }
        if (p[0].revents)
            on_accept(h);
    }

    /* Gone from the directory first, so no one attaches to a session that
     * ended; then the last output and the status to
     * whoever is attached. */
    if (h->sock_path[0])
        (void)unlink(h->sock_path);
    /* The last output: as long as some client keeps taking it (a second
     * without progress, or a minute in all, ends the wait) */
    uint64_t now = mono_ms(), until = now + HOLD_DRAIN_MS, hard = now + 60000;
    for (bool pending = true; pending && now < until && now < hard; now = mono_ms()) {
        struct pollfd p[HOLD_SLOTS];
        uint64_t before = 0, after = 0;
        pending = false;
        for (size_t i = 0; i < HOLD_SLOTS; i++) {
            struct slot *c = &h->sl[i];
            bool more = c->state == SLOT_ATTACHED && c->pos < h->total;
            p[i] = (struct pollfd){.fd = more ? c->fd : -1, .events = POLLOUT};
            pending = pending || more;
            before += more ? c->pos : 0;
        }
        if (!pending || poll(p, HOLD_SLOTS, 100) <= 0)
            continue;
        flush_all(h);
        for (size_t i = 0; i < HOLD_SLOTS; i++)
            after += p[i].fd >= 0 && h->sl[i].state == SLOT_ATTACHED ? h->sl[i].pos : 0;
        if (after > before)
            until = mono_ms() + HOLD_DRAIN_MS;
    }
    /* then the status, to each client that has taken all of it, once its
     * socket has room (a second at most) */
    struct hold_msg m = {.type = HOLD_EXIT,
                         .known = h->known,
                         .exit_code = h->known ? h->exit_code : 0,
                         .signal = h->known ? h->signal : 0};
    for (size_t i = 0; i < HOLD_SLOTS; i++) {
        struct slot *c = &h->sl[i];
        if (c->state == SLOT_ATTACHED && c->pos == h->total) {
            struct pollfd p = {.fd = c->fd, .events = POLLOUT};
            if (poll(&p, 1, 1000) > 0)
                (void)send_now(c->fd, &m);
        }
        CLOSE_FD(c->fd);
    }
    lyh_client_close(h->lyhd);
    _exit(0);
}
