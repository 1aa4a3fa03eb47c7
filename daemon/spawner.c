/* The spawner (spawner.h says why): the parent's side (start, a launch's
 * round trip, stop) and the spawner's own loop, with the plan's codec they
 * share.
 *
 * Owns (parent): the spawner's pid and the parent's end of the socketpair.
 * Owns (spawner): one receive buffer, the fds of the plan in hand, and the
 * launches whose child still shares its memory (shared_launch).
 *
 * The wire: one SOCK_SEQPACKET datagram per launch (the plan, its fds in one
 * SCM_RIGHTS), one back: int32 result (0 or -errno) and int32 pid, with the
 * pidfd and the status pipe's read end on success. Native byte order: both
 * ends are the same binary. The parent waits for the answer (at most
 * SPAWNER_TIMEOUT_MS); the spawner answers within a clone3. A gated plan
 * (spawner_begin) carries the child's end of a gate instead of the Landlock
 * ruleset; its answer is read before the parent sends the go (spawner_go) or
 * after it closed the gate (spawner_cancel), and nothing else is sent to the
 * spawner meanwhile. A second request: empty a tmpdir as its user
 * (spawner_remove_tree), answered with the remover's pid and pidfd; its
 * answer may be left owed (spawner_remove_tree_async): the loop takes it
 * when it comes, and every owed answer is taken before anything else is
 * sent, so the next datagram is always the oldest owed answer's.
 *
 * Must never: let a launch fail because the spawner failed (the parent
 * falls back to spawn_start); read anything but its socket (spawner). */
#include "daemon/spawner.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macros.h"
#include "daemon/log.h"
#include "daemon/pproc.h"
#include "daemon/lyhd.h"
#include "platform/linux/fsutil.h"
#include "platform/linux/seccomp.h"
#include "platform/linux/unixsock.h"

#define SPAWNER_MAGIC 0x4c595350u    /* "LYSP": a plan */
#define SPAWNER_RM_MAGIC 0x4c595352u /* "LYSR": empty a tmpdir as its user */
#define SPAWNER_PP_MAGIC 0x4c595351u /* "LYSQ": start the protocol process */
#define SPAWNER_TIMEOUT_MS 5000
#define SPAWNER_MAX_STRV 65536u /* entries of one list: far above what Run lets through */

/* ---- the codec -------------------------------------------------------------------------- */

struct enc {
    uint8_t *p;
    size_t cap, len;
    bool over;
};

static void put(struct enc *e, const void *v, size_t n) {
    if (e->over || n > e->cap - e->len) {
        e->over = true;
        return;
    }
    memcpy(e->p + e->len, v, n);
    e->len += n;
}
static void put32(struct enc *e, uint32_t v) { put(e, &v, sizeof(v)); }
static void put64(struct enc *e, uint64_t v) { put(e, &v, sizeof(v)); }
static void put_str(struct enc *e, const char *s) {
    size_t n = strlen(s);
    if (n > UINT32_MAX - 1) {
        e->over = true;
        return;
    }
    put32(e, (uint32_t)n);
    put(e, s, n + 1);
}
static void put_strv(struct enc *e, const char *const *v, size_t n) {
    put32(e, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        put_str(e, v[i]);
}

int spawner_encode(const struct spawn_plan *p, uint8_t *buf, size_t cap, size_t *ret_len, int *fds,
                   size_t *ret_nfds) {
    struct enc e = {.p = buf, .cap = cap};
    const int pfd[SPAWNER_FDS] = {p->stdio[0],      p->stdio[1],         p->stdio[2],
                                  p->pty_fd,        p->cgroup_dir_fd,    p->cgroup_procs_fd,
                                  p->landlock_fd,   p->gated ? p->gate_fd : -1};
    uint32_t mask = 0;
    size_t nfds = 0, n_argv = 0, n_envp = 0;

    if (!p->argv || !p->envp || !p->cwd || !p->seccomp || !p->seccomp->bpf || p->n_groups > 65536 ||
        (p->gated ? p->gate_fd < 0 || p->landlock_fd >= 0 : p->landlock_fd < 0))
        return -EINVAL;
    while (p->argv[n_argv])
        n_argv++;
    while (p->envp[n_envp])
        n_envp++;
    for (size_t i = 0; i < SPAWNER_FDS; i++)
        if (pfd[i] >= 0) {
            mask |= 1u << i;
            fds[nfds++] = pfd[i];
        }
    put32(&e, SPAWNER_MAGIC);
    put32(&e, (uint32_t)p->uid);
    put32(&e, (uint32_t)p->gid);
    put64(&e, p->landlock_handled);
    put32(&e, mask);
    put32(&e, (uint32_t)p->n_groups);
    for (size_t i = 0; i < p->n_groups; i++)
        put32(&e, (uint32_t)p->groups[i]);
    put_strv(&e, (const char *const *)p->argv, n_argv);
    put_strv(&e, (const char *const *)p->envp, n_envp);
    put_str(&e, p->cwd);
    put32(&e, p->private_tmp ? 1 : 0);
    if (p->private_tmp)
        put_str(&e, p->private_tmp);
    put_strv(&e, p->hide, p->n_hide);
    put_strv(&e, p->expose, p->n_expose);
    put_strv(&e, p->sockets, p->n_sockets);
    put32(&e, (uint32_t)p->n_protect);
    for (size_t i = 0; i < p->n_protect; i++) {
        put32(&e, p->protect[i].ro ? 1 : 0);
        put_str(&e, p->protect[i].path);
    }
    put32(&e, (uint32_t)p->seccomp->arch);
    put32(&e, (uint32_t)p->seccomp->len);
    put(&e, p->seccomp->bpf, p->seccomp->len);
    if (e.over)
        return -ENOBUFS;
    *ret_len = e.len;
    *ret_nfds = nfds;
    return 0;
}

struct dec {
    const uint8_t *p;
    size_t len, off;
    bool bad;
};

static void get(struct dec *d, void *v, size_t n) {
    if (d->bad || d->len - d->off < n) {
        d->bad = true;
        memset(v, 0, n);
        return;
    }
    memcpy(v, d->p + d->off, n);
    d->off += n;
}
static uint32_t get32(struct dec *d) {
    uint32_t v;
    get(d, &v, sizeof(v));
    return v;
}
static uint64_t get64(struct dec *d) {
    uint64_t v;
    get(d, &v, sizeof(v));
    return v;
}
/* A string: its length, its bytes (no NUL among them), its NUL. */
static const char *get_str(struct dec *d) {
    uint32_t n = get32(d);
    if (d->bad || n >= d->len - d->off || d->p[d->off + n] != '\0' ||
        memchr(d->p + d->off, '\0', n)) {
        d->bad = true;
        return NULL;
    }
    const char *s = (const char *)d->p + d->off;
    d->off += (size_t)n + 1;
    return s;
}
/* A list of strings into a NULL-terminated array of its own. */
static const char **get_strv(struct dec *d, size_t *ret_n) {
    uint32_t n = get32(d);
    const char **v;
    if (d->bad || n > SPAWNER_MAX_STRV || n > d->len - d->off ||
        !(v = calloc((size_t)n + 1, sizeof(*v)))) {
        d->bad = true;
        return NULL;
    }
    for (uint32_t i = 0; i < n && !d->bad; i++)
        v[i] = get_str(d);
    if (d->bad) {
        free(v);
        return NULL;
    }
    *ret_n = n;
    return v;
}

void spawner_storage_free(struct spawner_storage *st) {
    free(st->argv);
    free(st->envp);
    free(st->hide);
    free(st->expose);
    free(st->sockets);
    free(st->protect);
    free(st->groups);
    if (st->seccomp)
        st->seccomp->bpf = NULL; /* points into the datagram */
    free(st->seccomp);
    memset(st, 0, sizeof(*st));
}

int spawner_decode(const uint8_t *buf, size_t len, const int *fds, size_t nfds,
                   struct spawner_storage *st, struct spawn_plan *p) {
    struct dec d = {.p = buf, .len = len};
    size_t n_argv = 0, n_envp = 0, used = 0;
    uint32_t mask, n;
    int pfd[SPAWNER_FDS];

    memset(st, 0, sizeof(*st));
    memset(p, 0, sizeof(*p));
    if (get32(&d) != SPAWNER_MAGIC)
        return -EBADMSG;
    p->uid = (uid_t)get32(&d);
    p->gid = (gid_t)get32(&d);
    p->landlock_handled = get64(&d);
    mask = get32(&d);
    if (mask >> SPAWNER_FDS)
        d.bad = true;
    for (size_t i = 0; i < SPAWNER_FDS; i++)
        pfd[i] = (mask & (1u << i)) && used < nfds ? fds[used++] : -1;
    if (used != nfds || (size_t)__builtin_popcount(mask) != nfds)
        d.bad = true;
    /* the ruleset or the gate that brings it: exactly one */
    if ((pfd[6] >= 0) == (pfd[7] >= 0))
        d.bad = true;
    n = get32(&d);
    if (!d.bad && (n > 65536 || n > (len - d.off) / 4))
        d.bad = true;
    if (!d.bad && !(st->groups = calloc(n ? n : 1, sizeof(gid_t))))
        goto nomem;
    for (uint32_t i = 0; i < n && !d.bad; i++)
        st->groups[i] = (gid_t)get32(&d);
    p->n_groups = n;
    st->argv = (char **)get_strv(&d, &n_argv);
    st->envp = (char **)get_strv(&d, &n_envp);
    p->cwd = get_str(&d);
    uint32_t has_tmp = get32(&d);
    if (has_tmp > 1)
        d.bad = true;
    else if (has_tmp == 1)
        p->private_tmp = get_str(&d);
    st->hide = get_strv(&d, &p->n_hide);
    st->expose = get_strv(&d, &p->n_expose);
    st->sockets = get_strv(&d, &p->n_sockets);
    n = get32(&d);
    if (!d.bad && (n > SPAWN_MAX_PROTECT || p->n_hide > SPAWN_MAX_HIDE ||
                   p->n_expose > SPAWN_MAX_EXPOSE || p->n_sockets > SPAWN_MAX_SOCKETS ||
                   n_argv == 0))
        d.bad = true;
    if (!d.bad && !(st->protect = calloc(n ? n : 1, sizeof(*st->protect))))
        goto nomem;
    for (uint32_t i = 0; i < n && !d.bad; i++) {
        uint32_t ro = get32(&d);
        st->protect[i].ro = ro == 1;
        st->protect[i].path = get_str(&d);
        if (ro > 1)
            d.bad = true;
    }
    p->n_protect = n;
    uint32_t arch = get32(&d);
    uint32_t bpf_len = get32(&d);
    if (!d.bad && (bpf_len == 0 || bpf_len % 8 != 0 || bpf_len != len - d.off ||
                   (arch != SC_ARCH_X86_64 && arch != SC_ARCH_AARCH64)))
        d.bad = true;
    if (d.bad) {
        spawner_storage_free(st);
        return -EBADMSG;
    }
    if (!(st->seccomp = calloc(1, sizeof(*st->seccomp))))
        goto nomem;
    st->seccomp->bpf = (unsigned char *)buf + d.off; /* the program is read, never written */
    st->seccomp->len = bpf_len;
    st->seccomp->arch = (enum sc_arch)arch;
    p->argv = st->argv;
    p->envp = st->envp;
    p->groups = st->groups;
    p->hide = st->hide;
    p->expose = st->expose;
    p->sockets = st->sockets;
    p->protect = st->protect;
    p->seccomp = st->seccomp;
    p->stdio[0] = pfd[0], p->stdio[1] = pfd[1], p->stdio[2] = pfd[2];
    p->pty_fd = pfd[3];
    p->cgroup_dir_fd = pfd[4];
    p->cgroup_procs_fd = pfd[5];
    p->landlock_fd = pfd[6];
    p->gated = pfd[7] >= 0;
    p->gate_fd = pfd[7];
    return 0;
nomem:
    spawner_storage_free(st);
    return -ENOMEM;
}

int spawner_encode_rm(const char *path, uid_t uid, gid_t gid, uint8_t *buf, size_t cap,
                      size_t *ret_len) {
    struct enc e = {.p = buf, .cap = cap};

    if (!path || path[0] != '/' || strlen(path) >= PATH_MAX)
        return -EINVAL;
    put32(&e, SPAWNER_RM_MAGIC);
    put32(&e, (uint32_t)uid);
    put32(&e, (uint32_t)gid);
    put_str(&e, path);
    if (e.over)
        return -ENOBUFS;
    *ret_len = e.len;
    return 0;
}

int spawner_decode_rm(const uint8_t *buf, size_t len, uid_t *ret_uid, gid_t *ret_gid,
                      const char **ret_path) {
    struct dec d = {.p = buf, .len = len};

    if (get32(&d) != SPAWNER_RM_MAGIC)
        return -EBADMSG;
    uid_t uid = (uid_t)get32(&d);
    gid_t gid = (gid_t)get32(&d);
    const char *path = get_str(&d);
    if (d.bad || !path || d.off != len || path[0] != '/' || strlen(path) >= PATH_MAX)
        return -EBADMSG;
    *ret_uid = uid;
    *ret_gid = gid;
    *ret_path = path;
    return 0;
}

int spawner_encode_pp(const struct pproc_exec *x, int sock, uint8_t *buf, size_t cap,
                      size_t *ret_len, int *fds, size_t *ret_nfds) {
    struct enc e = {.p = buf, .cap = cap};
    size_t n_argv = 0, n_envp = 0;

    if (sock < 0 || !x->argv || !x->argv[0] || !x->envp ||
        (x->exe_fd < 0 && (!x->path || x->path[0] != '/')))
        return -EINVAL;
    while (x->argv[n_argv])
        n_argv++;
    while (x->envp[n_envp])
        n_envp++;
    put32(&e, SPAWNER_PP_MAGIC);
    put32(&e, (uint32_t)x->uid);
    put32(&e, (uint32_t)x->gid);
    put32(&e, x->exe_fd >= 0 ? 1 : 0);
    put_strv(&e, (const char *const *)x->argv, n_argv);
    put_strv(&e, (const char *const *)x->envp, n_envp);
    put_str(&e, x->exe_fd >= 0 ? "" : x->path);
    if (e.over)
        return -ENOBUFS;
    fds[0] = sock;
    fds[1] = x->exe_fd;
    *ret_nfds = x->exe_fd >= 0 ? 2 : 1;
    *ret_len = e.len;
    return 0;
}

int spawner_decode_pp(const uint8_t *buf, size_t len, const int *fds, size_t nfds,
                      struct pproc_exec *x, int *ret_sock) {
    struct dec d = {.p = buf, .len = len};
    size_t n_argv = 0, n_envp = 0;

    memset(x, 0, sizeof(*x));
    if (get32(&d) != SPAWNER_PP_MAGIC)
        return -EBADMSG;
    x->uid = (uid_t)get32(&d);
    x->gid = (gid_t)get32(&d);
    uint32_t has_exe = get32(&d);
    x->argv = (char **)get_strv(&d, &n_argv);
    x->envp = (char **)get_strv(&d, &n_envp);
    x->path = get_str(&d);
    /* never root, an exe fd or an absolute path (not both), the fds it
     * says, a program name */
    if (d.bad || d.off != len || x->uid == 0 || x->gid == 0 || has_exe > 1 ||
        nfds != 1 + has_exe || n_argv == 0 ||
        (has_exe ? x->path[0] != '\0' : x->path[0] != '/')) {
        free(x->argv);
        free(x->envp);
        memset(x, 0, sizeof(*x));
        return -EBADMSG;
    }
    x->exe_fd = has_exe ? fds[1] : -1;
    if (has_exe)
        x->path = NULL;
    *ret_sock = fds[0];
    return 0;
}

/* ---- the spawner's own loop --------------------------------------------------------------- */

/* lyhd takes the answers in order: one lost would make every later one the
 * answer to the wrong request. So an answer that cannot go (after a few
 * tries, should the kernel be short of memory for a moment) ends the
 * spawner: lyhd sees its end and gives it up for good (it forks from then
 * on), and what the lost answer named is handled as for any answer that did
 * not come (take_answer: an agent's child is killed through its cgroup; a
 * remover runs out and stays a zombie of lyhd's until lyhd ends). */
static void reply(int sock, int32_t r, int32_t pid, enum spawn_way way, const int *fds,
                  size_t nfds) {
    int32_t v[3] = {r, pid, r == 0 ? (int32_t)way : 0};
    for (int i = 0; i < 5; i++) {
        ssize_t n = unixsock_send_fds(sock, v, sizeof(v), fds, nfds, 0);
        if (n == (ssize_t)sizeof(v))
            return;
        if (n >= 0 || (errno != EINTR && errno != ENOBUFS && errno != ENOMEM))
            break;
        usleep(1000);
    }
    _exit(1);
}

/* Empty a tmpdir as its user in a child that is lyhd's (CLONE_PARENT): lyhd
 * waits on its pidfd and reaps it as it did its own fork's. A request that
 * carries fds or does not decode is refused, nothing made. */
static void remove_tree(int sock, const uint8_t *buf, size_t n, int fl, int *fds, size_t nfds) {
    uid_t uid;
    gid_t gid;
    const char *path;
    int pidfd = -1;
    pid_t pid = -1;
    int r = nfds || (fl & (MSG_TRUNC | MSG_CTRUNC)) ? -EBADMSG
                                                    : spawner_decode_rm(buf, n, &uid, &gid, &path);
    for (size_t i = 0; i < nfds; i++)
        close(fds[i]);
    if (r == 0) {
        pid = spawn_sibling(&pidfd);
        if (pid == 0)
            fs_remove_tree_child(path, spawn_tmp_subs, SPAWN_TMP_N, uid, gid);
        if (pid < 0)
            r = errno == ENOSYS || errno == E2BIG || errno == EINVAL ? -ENOSYS : -errno;
    }
    reply(sock, r, r == 0 ? pid : -1, SPAWN_WAY_FORK, &pidfd, r == 0 ? 1 : 0);
    if (r == 0)
        close(pidfd);
}

/* Start the protocol process in a child that is lyhd's (CLONE_PARENT), from
 * this process's fd table, which never holds a client's FUSE file or
 * lingering socket (pproc.c says why that matters). */
static void start_protocol(int sock, const uint8_t *buf, size_t n, int fl, int *fds, size_t nfds) {
    struct pproc_exec x;
    int psock = -1, pidfd = -1;
    pid_t pid = -1;
    int r = (fl & (MSG_TRUNC | MSG_CTRUNC)) ? -EBADMSG
                                            : spawner_decode_pp(buf, n, fds, nfds, &x, &psock);
    if (r == 0) {
        pid = spawn_sibling(&pidfd);
        if (pid == 0)
            pproc_exec_child(psock, &x);
        if (pid < 0)
            r = errno == ENOSYS || errno == E2BIG || errno == EINVAL ? -ENOSYS : -errno;
        free(x.argv);
        free(x.envp);
    }
    for (size_t i = 0; i < nfds; i++)
        close(fds[i]);
    reply(sock, r, r == 0 ? pid : -1, SPAWN_WAY_FORK, &pidfd, r == 0 ? 1 : 0);
    if (r == 0)
        close(pidfd);
}

/* Launches whose child shares the spawner's memory until its exec
 * (spawn_start_shared): each plan's datagram is copied to a mapping of its
 * own that outlives the answer, zeroed in any child the spawner forks
 * meanwhile (MADV_WIPEONFORK: a remover runs as another user with no exec
 * to replace its copy), and zeroed and unmapped once the child is done. */
#define SPAWNER_SHARED_MAX 64
#define SPAWNER_SHARED_PER_UID 8 /* one user cannot take them all (a child parked on FUSE) */
#define SPAWNER_SHARED_WATCH_MS 250 /* fs.suid_dumpable read again, while any is in flight */
struct shared_launch {
    struct spawn_shared *sh;
    int done_fd;
    int pidfd; /* a copy of the answer's: to kill it (may_share) */
    uid_t uid;
    uint8_t *copy;
    size_t copy_len;
    struct spawner_storage st;
};
static struct shared_launch shared[SPAWNER_SHARED_MAX];
static size_t n_shared;

static void shared_release(size_t i) {
    struct shared_launch *l = &shared[i];
    if (l->pidfd >= 0)
        close(l->pidfd);
    spawn_shared_free(l->sh); /* closes done_fd */
    spawner_storage_free(&l->st);
    explicit_bzero(l->copy, l->copy_len);
    munmap(l->copy, l->copy_len);
    shared[i] = shared[--n_shared];
}

/* May a child share the spawner's memory now? Every process sharing it
 * shares its dumpable flag, and a credential change of any of them (a
 * child's switch to the agent's file-system identity around each path it
 * opens, its uid drop) sets that flag to fs.suid_dumpable: a child already
 * running as its user would be traceable, or dump the spawner's memory at a
 * signal, if that were not 0. Read at every launch: root may change it. */
static bool may_share(void) {
    char c = 0;
    int fd = open("/proc/sys/fs/suid_dumpable", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, &c, 1);
    close(fd);
    return n == 1 && c == '0';
}

/* Wait for the next request; release the launches whose child is done.
 * While any is in flight, fs.suid_dumpable is read again every
 * SPAWNER_SHARED_WATCH_MS: should root set it to anything but 0, a child
 * already running as its user would become traceable at the next credential
 * change of another (may_share), so every child still sharing this memory
 * is killed (its launch fails as one whose set-up was killed). */
static void shared_wait(int sock) {
    for (;;) {
        struct pollfd pfd[SPAWNER_SHARED_MAX + 1];
        pfd[0] = (struct pollfd){.fd = sock, .events = POLLIN};
        for (size_t i = 0; i < n_shared; i++)
            pfd[i + 1] = (struct pollfd){.fd = shared[i].done_fd, .events = POLLIN};
        int pr = poll(pfd, n_shared + 1, n_shared ? SPAWNER_SHARED_WATCH_MS : -1);
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            return; /* the receive says what is wrong */
        }
        if (n_shared && !may_share())
            for (size_t i = 0; i < n_shared; i++)
                if (shared[i].pidfd >= 0)
                    (void)syscall(SYS_pidfd_send_signal, shared[i].pidfd, SIGKILL, NULL, 0);
        if (pr == 0)
            continue;
        for (size_t i = n_shared; i > 0; i--)
            if (pfd[i].revents)
                shared_release(i - 1);
        if (pfd[0].revents)
            return;
    }
}

/* What every child the spawner makes from a plan is: lyhd's child (lyhd
 * reaps it and watches its pidfd), and with no disposition to reset (the
 * spawner keeps every one the default). */
static void plan_as_lyhds(struct spawn_plan *plan) {
    plan->clone_parent = true;
    plan->signals_default = true;
}

/* A plan, its child made sharing the spawner's memory where it can be
 * (shared_launch), else as a fork of the spawner; *ret_way says which. 0 or
 * -errno, as spawn_start. */
static int launch_plan(const uint8_t *buf, size_t n, const int *fds, size_t nfds, pid_t *ret_pid,
                       int *ret_pidfd, int *ret_status_fd, enum spawn_way *ret_way) {
    struct spawner_storage st;
    struct spawn_plan plan;
    size_t len = (n + 1 + 4095) & ~(size_t)4095;
    uint8_t *copy = NULL;
    int r;

    if (n_shared < SPAWNER_SHARED_MAX && may_share()) {
        copy = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (copy == MAP_FAILED || madvise(copy, len, MADV_WIPEONFORK) < 0) {
            if (copy != MAP_FAILED)
                munmap(copy, len);
            copy = NULL;
        }
    }
    if (copy) {
        memcpy(copy, buf, n);
        copy[n] = '\0';
        r = spawner_decode(copy, n, fds, nfds, &st, &plan);
        size_t mine = 0;
        for (size_t i = 0; r == 0 && i < n_shared; i++)
            mine += shared[i].uid == plan.uid;
        if (r == 0 && mine >= SPAWNER_SHARED_PER_UID)
            r = -ENOSYS;
        else if (r == 0) {
            struct shared_launch *l = &shared[n_shared];
            plan_as_lyhds(&plan);
            r = spawn_start_shared(&plan, &l->sh, ret_pid, ret_pidfd, ret_status_fd, &l->done_fd);
            if (r == 0) {
                l->pidfd = fcntl(*ret_pidfd, F_DUPFD_CLOEXEC, 3);
                /* Without a copy the fs.suid_dumpable watch could not end
                 * it: end it now (lyhd sees its agent killed at once). */
                if (l->pidfd < 0)
                    (void)syscall(SYS_pidfd_send_signal, *ret_pidfd, SIGKILL, NULL, 0);
                l->uid = plan.uid;
                l->copy = copy;
                l->copy_len = len;
                l->st = st;
                n_shared++;
                *ret_way = SPAWN_WAY_SHARED;
                return 0;
            }
        }
        spawner_storage_free(&st);
        explicit_bzero(copy, len);
        munmap(copy, len);
        if (r != -ENOSYS)
            return r;
        /* nothing made: the fork way, from buf (a fork finds the copy wiped) */
    }
    r = spawner_decode(buf, n, fds, nfds, &st, &plan);
    if (r == 0) {
        plan_as_lyhds(&plan);
        r = spawn_start(&plan, ret_pid, ret_pidfd, ret_status_fd);
        spawner_storage_free(&st);
    }
    *ret_way = SPAWN_WAY_FORK;
    return r;
}

int spawner_main(int argc, char **argv) {
    int sock;
    uint8_t *buf;

    if (argc != 3 || strcmp(argv[1], "--spawner") != 0 || (sock = atoi(argv[2])) < 3)
        return 2;
    /* its children (the agents) never see it, even before their exec */
    if (fcntl(sock, F_SETFD, FD_CLOEXEC) < 0)
        return 1;
    (void)prctl(PR_SET_NAME, "lyhd-spawner", 0, 0, 0); /* not "exe" (/proc/self/exe) in ps */
    /* never dumpable, from the start: a child sharing this memory that
     * crashed before any credential change of a sharer would dump it */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        return 1;
    buf = malloc(SPAWNER_MAX_BYTES + 1);
    if (!buf)
        return 1;
    /* every disposition the default (an ignored one survives exec), so the
     * children need not reset them one by one; replies use MSG_NOSIGNAL */
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    for (;;) {
        int fds[UNIXSOCK_MAX_FDS];
        size_t nfds = 0;
        int fl = 0;
        shared_wait(sock);
        ssize_t n = unixsock_recv_fds(sock, buf, SPAWNER_MAX_BYTES, 0, fds, &nfds, &fl);
        if (n <= 0) {
            for (size_t i = 0; i < nfds; i++)
                close(fds[i]);
            free(buf);
            return 0; /* lyhd is gone or stopped us */
        }
        buf[n] = '\0';
        uint32_t magic = 0;
        if (n >= 4)
            memcpy(&magic, buf, sizeof(magic));
        if (magic == SPAWNER_RM_MAGIC) {
            remove_tree(sock, buf, (size_t)n, fl, fds, nfds);
            explicit_bzero(buf, (size_t)n);
            continue;
        }
        if (magic == SPAWNER_PP_MAGIC) {
            start_protocol(sock, buf, (size_t)n, fl, fds, nfds);
            continue;
        }
        pid_t pid = -1;
        int out[2] = {-1, -1};
        enum spawn_way way = SPAWN_WAY_FORK;
        int r = (fl & (MSG_TRUNC | MSG_CTRUNC))
                    ? -EBADMSG
                    : launch_plan(buf, (size_t)n, fds, nfds, &pid, &out[0], &out[1], &way);
        for (size_t i = 0; i < nfds; i++)
            close(fds[i]);
        reply(sock, r, r == 0 ? pid : -1, way, out, r == 0 ? 2 : 0);
        if (r == 0) {
            close(out[0]);
            close(out[1]);
        }
        /* A plan holds a user's argv and environment (tokens, often): the
         * next child made here (a remover runs as another user, with no
         * exec to replace its memory) must not find it in its copy. */
        explicit_bzero(buf, (size_t)n);
    }
}

/* ---- the parent's side -------------------------------------------------------------------- */

/* A remover request whose answer is owed (spawner_remove_tree_async). */
struct rm_owed {
    spawner_rm_done done;
    void *arg;
    TAILQ_ENTRY(rm_owed) link;
};

struct spawner {
    int sock;
    pid_t pid;
    bool begun; /* a gated plan's answer is owed: nothing else may be sent */
    uint8_t *buf; /* SPAWNER_MAX_BYTES, kept: no mapping made and unmapped per launch */
    struct event *ev_owed; /* the socket, read while owed is not empty (at most SPAWNER_TIMEOUT_MS) */
    TAILQ_HEAD(, rm_owed) owed; /* oldest first: the spawner answers in order */
};

static void owed_answered(struct rm_owed *o, int r, pid_t pid, int pidfd);

void spawner_start(struct lyhd *d) {
    int sv[2];
    struct spawner *s = calloc(1, sizeof(*s));

    if (!s || !(s->buf = malloc(SPAWNER_MAX_BYTES))) {
        free(s);
        return;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        log_warn_errno(errno, "cannot make the spawner's socket; launches fork from lyhd");
        free(s->buf);
        free(s);
        return;
    }
    /* room for a large plan; without it, a launch too big for the default
     * forks from lyhd (spawner_spawn) */
    int big = SPAWNER_MAX_BYTES + 65536;
    if (setsockopt(sv[0], SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0)
        log_debug("spawner socket: no larger send buffer (%s)", strerror(errno));
    pid_t pid = fork();
    if (pid == 0) {
        /* async-signal-safe only until exec (lyhd may have threads) */
        static char arg0[] = "lyhd", arg1[] = "--spawner", arg2[] = "3";
        char *args[] = {arg0, arg1, arg2, NULL};
        char *env[] = {NULL};
        sigset_t none;
        if ((sv[1] == 3 ? fcntl(3, F_SETFD, 0) : dup2(sv[1], 3)) < 0)
            _exit(127);
        syscall(SYS_close_range, 4u, ~0u, 0u);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve("/proc/self/exe", args, env);
        _exit(127);
    }
    close(sv[1]);
    if (pid < 0) {
        log_warn_errno(errno, "cannot start the spawner; launches fork from lyhd");
        close(sv[0]);
        free(s->buf);
        free(s);
        return;
    }
    s->sock = sv[0];
    s->pid = pid;
    TAILQ_INIT(&s->owed);
    d->spawner = s;
    log_debug("spawner %d started", pid);
}

void spawner_stop(struct lyhd *d) {
    struct spawner *s = d->spawner;
    struct rm_owed *o;
    if (!s)
        return;
    d->spawner = NULL;
    if (s->ev_owed)
        event_free(s->ev_owed);
    close(s->sock); /* end of file: it exits */
    bool gone = false;
    for (int i = 0; i < 20 && !gone; i++) {
        gone = waitpid(s->pid, NULL, WNOHANG) == s->pid;
        if (!gone)
            usleep(10 * 1000);
    }
    if (!gone) {
        /* bounded here too: a process stuck in the kernel takes SIGKILL
         * only when it leaves it; then it stays a zombie until lyhd ends */
        kill(s->pid, SIGKILL);
        for (int i = 0; i < 20 && !gone; i++) {
            gone = waitpid(s->pid, NULL, WNOHANG) == s->pid;
            if (!gone)
                usleep(10 * 1000);
        }
        if (!gone)
            log_warn("the spawner (pid %d) did not end; left behind", s->pid);
    }
    /* Owed answers will not come: each owner makes its remover itself (a
     * remover the spawner made all the same runs as the same user on the
     * same tree: harmless). d->spawner is gone already, so nothing done does
     * can reach s. */
    while ((o = TAILQ_FIRST(&s->owed))) {
        TAILQ_REMOVE(&s->owed, o, link);
        owed_answered(o, -EIO, -1, -1);
    }
    free(s->buf);
    free(s);
}

/* The spawner failed us: end it, and fork from lyhd from now on. */
static void give_up(struct lyhd *d, const char *why, int err) {
    log_warn("the spawner %s (%s); launches fork from lyhd from now on", why,
             strerror(err > 0 ? err : -err));
    if (d->spawner)
        kill(d->spawner->pid, SIGKILL);
    spawner_stop(d);
}

/* Send the plan. 1: sent (its answer is owed); 0: not sent, nothing made
 * (the launch forks from lyhd). */
static int send_plan(struct lyhd *d, const struct spawn_plan *p) {
    struct spawner *s;
    int fds[SPAWNER_FDS];
    size_t len = 0, nfds = 0;

    spawner_settle(d); /* the plan's answer must be the next one */
    s = d->spawner;
    /* Only a launch with a session cgroup: if the spawner's answer were
     * lost, what it made must be found and killed, and the cgroup is how. */
    if (!s || s->begun || p->cgroup_dir_fd < 0)
        return 0;
    if (spawner_encode(p, s->buf, SPAWNER_MAX_BYTES, &len, fds, &nfds) < 0) {
        explicit_bzero(s->buf, SPAWNER_MAX_BYTES); /* what it wrote before it stopped */
        return 0; /* too big for one datagram: this launch forks from here */
    }
    ssize_t n = unixsock_send_fds(s->sock, s->buf, len, fds, nfds, MSG_DONTWAIT);
    /* the plan holds the user's argv and environment (tokens, often): not
     * kept in lyhd's memory, which a fallback remover forks a copy of */
    explicit_bzero(s->buf, len);
    if (n != (ssize_t)len) {
        int e = n < 0 ? errno : EIO;
        /* a datagram too big for the socket or for the kernel's memory
         * now is this launch's trouble, not the spawner's: it forks from
         * here, the next one tries the spawner again (nothing was queued,
         * so no child was made) */
        if (e != EMSGSIZE && e != ENOBUFS && e != ENOMEM && e != EAGAIN)
            give_up(d, "did not take a launch", e);
        return 0;
    }
    return 1;
}

/* The spawner's answer to the plan sent: a clone3 away. 0 with the child's
 * pid, pidfd and status pipe, and how it was made (a remover or the
 * protocol process, ret_way NULL, is always forked); -ENOSYS: it cannot
 * make lyhd's children here (nothing was made: fork from lyhd); other
 * -errno: the launch fails (what it may have made was killed through the
 * cgroup). */
static int take_answer(struct lyhd *d, int cgroup_dir_fd, pid_t *ret_pid, int *ret_pidfd,
                       int *ret_status_fd, enum spawn_way *ret_way) {
    size_t want = ret_status_fd ? 2 : 1; /* a remover has no status pipe */
    struct spawner *s = d->spawner;
    int32_t v[3];
    int got[UNIXSOCK_MAX_FDS];
    size_t ngot = 0;
    int fl = 0;
    struct pollfd pfd = {.fd = s->sock, .events = POLLIN};
    uint64_t deadline = lyhd_mono_ms() + SPAWNER_TIMEOUT_MS;
    int pr;
    ssize_t n;
    do {
        uint64_t now = lyhd_mono_ms();
        pr = now >= deadline ? 0 : poll(&pfd, 1, (int)(deadline - now));
    } while (pr < 0 && errno == EINTR);
    n = pr > 0 ? unixsock_recv_fds(s->sock, v, sizeof(v), MSG_DONTWAIT, got, &ngot, &fl) : -1;
    bool ok = n == (ssize_t)sizeof(v) && !(fl & (MSG_TRUNC | MSG_CTRUNC)) &&
              (v[0] == 0 ? ngot == want && v[1] > 0 &&
                               (v[2] == SPAWN_WAY_FORK || (ret_way && v[2] == SPAWN_WAY_SHARED))
                         : ngot == 0 && v[0] < 0 && v[2] == 0);
    if (!ok) {
        for (size_t i = 0; i < ngot; i++)
            close(got[i]);
        give_up(d, pr == 0 ? "did not answer in time" : "answered nonsense",
                pr == 0 ? ETIMEDOUT : EPROTO);
        /* It may have made the child all the same: never a second one. What
         * is in the session's cgroup is killed, and this launch fails (its
         * clean-up removes the cgroup; such a child is lyhd's, unreaped: a
         * zombie until lyhd ends, once, since the spawner is not used
         * again). */
        int k = cgroup_dir_fd >= 0 ? openat(cgroup_dir_fd, "cgroup.kill", O_WRONLY | O_CLOEXEC) : -1;
        if (k >= 0) {
            (void)!write(k, "1", 1);
            close(k);
        }
        return -EIO;
    }
    if (v[0] == -ENOSYS) { /* no clone3 here: it cannot make lyhd's child */
        give_up(d, "cannot make lyhd's children on this kernel", ENOSYS);
        return -ENOSYS;
    }
    if (v[0] < 0)
        return v[0];
    /* the status pipe is non-blocking and both are close-on-exec already
     * (set by the spawner on the same open files, and on receipt) */
    *ret_pid = v[1];
    *ret_pidfd = got[0];
    if (ret_status_fd)
        *ret_status_fd = got[1];
    if (ret_way)
        *ret_way = (enum spawn_way)v[2];
    return 0;
}

const char *spawn_way_name(enum spawn_way w) {
    switch (w) {
    case SPAWN_WAY_FORK: return "spawner_fork";
    case SPAWN_WAY_SHARED: return "spawner_shared";
    case SPAWN_WAY_LYHD: break;
    }
    return "lyhd_fork";
}

/* ---- remover answers left owed --------------------------------------------------------- */

/* Hand o's answer to its owner and free o. No answer from the spawner
 * (-EIO: it failed and was given up; -ENOSYS: it cannot make lyhd's children
 * here) is handed over as such: the owner makes its remover on a turn of its
 * own (spawner.h), not inside whatever work took this answer. */
static void owed_answered(struct rm_owed *o, int r, pid_t pid, int pidfd) {
    o->done(o->arg, r, pid, pidfd);
    free(o);
}

/* Take the oldest owed answer (waiting for it at most SPAWNER_TIMEOUT_MS). */
static void take_owed(struct lyhd *d) {
    struct spawner *s = d->spawner;
    struct rm_owed *o = s ? TAILQ_FIRST(&s->owed) : NULL;
    pid_t pid = -1;
    int pidfd = -1;

    if (!o)
        return;
    TAILQ_REMOVE(&s->owed, o, link);
    if (TAILQ_EMPTY(&s->owed))
        event_del(s->ev_owed);
    /* on failure take_answer gives the spawner up: s is freed then, and the
     * answers owed after o are handed over by spawner_stop */
    int r = take_answer(d, -1, &pid, &pidfd, NULL, NULL);
    owed_answered(o, r, pid, pidfd);
}

void spawner_settle(struct lyhd *d) {
    /* bounded: each turn removes one, and spawner_stop empties the rest */
    while (d->spawner && !TAILQ_EMPTY(&d->spawner->owed))
        take_owed(d);
}

/* The socket is readable (an answer, or the spawner's end), or the oldest
 * owed answer is SPAWNER_TIMEOUT_MS late (the persistent event's timeout
 * starts again at each answer). */
static void on_owed(evutil_socket_t fd, short what, void *arg) {
    struct lyhd *d = arg;

    (void)fd;
    if (what & EV_TIMEOUT) {
        give_up(d, "did not answer in time", ETIMEDOUT);
        return;
    }
    take_owed(d);
}

void spawner_remove_tree_async(struct lyhd *d, const char *path, uid_t uid, gid_t gid,
                               spawner_rm_done done, void *arg) {
    const struct timeval tv = {.tv_sec = SPAWNER_TIMEOUT_MS / 1000,
                               .tv_usec = (SPAWNER_TIMEOUT_MS % 1000) * 1000};
    struct spawner *s = d->spawner;
    struct rm_owed *o = NULL;
    size_t len = 0;

    if (!s || s->begun || !(o = calloc(1, sizeof(*o))))
        goto now;
    if (!s->ev_owed && !(s->ev_owed = event_new(d->base, s->sock, EV_READ | EV_PERSIST, on_owed, d)))
        goto now;
    if (spawner_encode_rm(path, uid, gid, s->buf, SPAWNER_MAX_BYTES, &len) < 0)
        goto now;
    ssize_t n = unixsock_send_fds(s->sock, s->buf, len, NULL, 0, MSG_DONTWAIT);
    explicit_bzero(s->buf, len);
    if (n != (ssize_t)len) {
        int e = n < 0 ? errno : EIO;
        if (e != EMSGSIZE && e != ENOBUFS && e != ENOMEM && e != EAGAIN)
            give_up(d, "did not take a tmpdir to empty", e); /* s is gone */
        goto now;
    }
    *o = (struct rm_owed){.done = done, .arg = arg};
    bool first = TAILQ_EMPTY(&s->owed);
    TAILQ_INSERT_TAIL(&s->owed, o, link);
    /* sent, but the loop cannot watch for it: take it here */
    if (first && event_add(s->ev_owed, &tv) < 0)
        spawner_settle(d);
    return;
now:
    /* Nothing made: the owner forks its remover on a turn of its own
     * (spawner.h), never here, where a Run may be under way. */
    free(o);
    done(arg, -EIO, -1, -1);
}

/* spawner_spawn, saying how the child was made. */
static int spawn_one_step(struct lyhd *d, const struct spawn_plan *p, pid_t *ret_pid,
                          int *ret_pidfd, int *ret_status_fd, enum spawn_way *ret_way) {
    *ret_way = SPAWN_WAY_LYHD;
    if (send_plan(d, p) == 1) {
        int r = take_answer(d, p->cgroup_dir_fd, ret_pid, ret_pidfd, ret_status_fd, ret_way);
        if (r != -ENOSYS)
            return r;
    }
    return spawn_start(p, ret_pid, ret_pidfd, ret_status_fd);
}

int spawner_spawn(struct lyhd *d, const struct spawn_plan *p, pid_t *ret_pid, int *ret_pidfd,
                  int *ret_status_fd) {
    enum spawn_way way;

    return spawn_one_step(d, p, ret_pid, ret_pidfd, ret_status_fd, &way);
}

void spawner_begin(struct lyhd *d, struct spawn_plan *p, struct spawn_pending *sp) {
    int sv[2];

    *sp = (struct spawn_pending){.gate = -1};
    if (!d->spawner || p->cgroup_dir_fd < 0 || p->landlock_fd >= 0)
        return;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return; /* no gate: the launch goes the one-step way */
    p->gated = true;
    p->gate_fd = sv[1];
    int r = send_plan(d, p);
    p->gated = false;
    p->gate_fd = -1;
    close(sv[1]); /* the child's end went with the plan (or nowhere) */
    if (r != 1) {
        close(sv[0]);
        return;
    }
    sp->gate = sv[0];
    sp->begun = true;
    d->spawner->begun = true;
}

/* Take the answer to a gated plan; the gate stays open. */
static int gated_answer(struct lyhd *d, struct spawn_pending *sp, struct spawn_plan *p,
                        pid_t *ret_pid, int *ret_pidfd, int *ret_status_fd) {
    sp->begun = false;
    if (d->spawner)
        d->spawner->begun = false;
    return take_answer(d, p->cgroup_dir_fd, ret_pid, ret_pidfd, ret_status_fd, &sp->way);
}

int spawner_start_protocol(struct lyhd *d, const struct pproc_exec *x, int sock, pid_t *ret_pid,
                           int *ret_pidfd) {
    struct spawner *s;
    int fds[2];
    size_t len = 0, nfds = 0;

    spawner_settle(d); /* this answer must be the next one */
    s = d->spawner;
    if (!s || s->begun || spawner_encode_pp(x, sock, s->buf, SPAWNER_MAX_BYTES, &len, fds, &nfds) < 0)
        return -ENOSYS;
    ssize_t n = unixsock_send_fds(s->sock, s->buf, len, fds, nfds, MSG_DONTWAIT);
    if (n != (ssize_t)len) {
        int e = n < 0 ? errno : EIO;
        if (e != EMSGSIZE && e != ENOBUFS && e != ENOMEM && e != EAGAIN)
            give_up(d, "did not take the protocol process to start", e);
        return -ENOSYS;
    }
    /* -EIO (given up): it may have made one all the same, which ends at
     * the end of file of its socket; this start fails, the next forks */
    return take_answer(d, -1, ret_pid, ret_pidfd, NULL, NULL);
}

int spawner_remove_tree(struct lyhd *d, const char *path, uid_t uid, gid_t gid, pid_t *ret_pid,
                        int *ret_pidfd) {
    struct spawner *s;
    size_t len = 0;

    spawner_settle(d); /* this answer must be the next one */
    s = d->spawner;
    if (!s || s->begun || spawner_encode_rm(path, uid, gid, s->buf, SPAWNER_MAX_BYTES, &len) < 0)
        return fs_remove_tree_as(path, spawn_tmp_subs, SPAWN_TMP_N, uid, gid, ret_pid, ret_pidfd);
    ssize_t n = unixsock_send_fds(s->sock, s->buf, len, NULL, 0, MSG_DONTWAIT);
    explicit_bzero(s->buf, len);
    if (n != (ssize_t)len) {
        int e = n < 0 ? errno : EIO;
        if (e != EMSGSIZE && e != ENOBUFS && e != ENOMEM && e != EAGAIN)
            give_up(d, "did not take a tmpdir to empty", e);
        return fs_remove_tree_as(path, spawn_tmp_subs, SPAWN_TMP_N, uid, gid, ret_pid, ret_pidfd);
    }
    int r = take_answer(d, -1, ret_pid, ret_pidfd, NULL, NULL);
    /* no clone3 here, or the spawner given up (no answer, or nonsense): a
     * fork of lyhd's does it (a remover the spawner may have made after all
     * runs as the same user on the same tree: harmless) */
    if (r == -ENOSYS || r == -EIO)
        return fs_remove_tree_as(path, spawn_tmp_subs, SPAWN_TMP_N, uid, gid, ret_pid, ret_pidfd);
    return r;
}


int spawner_go(struct lyhd *d, struct spawn_pending *sp, struct spawn_plan *p, int landlock_fd,
               pid_t *ret_pid, int *ret_pidfd, int *ret_status_fd) {
    sp->go_err = 0;
    sp->way = SPAWN_WAY_LYHD;
    if (!sp->begun) {
        p->landlock_fd = landlock_fd;
        return spawn_one_step(d, p, ret_pid, ret_pidfd, ret_status_fd, &sp->way);
    }
    /* The answer first: the go goes only to a child lyhd knows and watches.
     * Without one, the gate closes unopened and whatever the spawner may
     * have made stops there by itself. */
    int r = gated_answer(d, sp, p, ret_pid, ret_pidfd, ret_status_fd);
    if (r == 0) {
        /* A child that stopped before the gate (its set-up failed) has
         * closed its end (EPIPE, ECONNRESET): its status pipe says why. */
        sp->go_err = spawn_gate_go(sp->gate, landlock_fd);
    }
    CLOSE_FD(sp->gate);
    if (r != -ENOSYS)
        return r;
    /* it made nothing (no clone3 here) and is gone: fork from lyhd */
    sp->way = SPAWN_WAY_LYHD;
    p->landlock_fd = landlock_fd;
    return spawn_start(p, ret_pid, ret_pidfd, ret_status_fd);
}

int spawner_cancel(struct lyhd *d, struct spawn_pending *sp, struct spawn_plan *p, pid_t *ret_pid,
                   int *ret_pidfd, int *ret_status_fd) {
    if (!sp->begun)
        return -ECANCELED;
    CLOSE_FD(sp->gate); /* the child stops at the gate */
    int r = gated_answer(d, sp, p, ret_pid, ret_pidfd, ret_status_fd);
    return r == -ENOSYS ? -ECANCELED : r; /* nothing was made */
}
