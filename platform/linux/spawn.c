/* The child side of a launch: from fork to execve.
 *
 * Owns: the ordered setup pipeline of the child. It must never allocate,
 * lock, log or call anything that is not async-signal-safe between fork and
 * execve (lyhd has closer threads besides its event loop, and libc state such
 * as malloc arenas is not ours to touch in a forked child). Every input was
 * prepared by the parent; the child only makes syscalls, credential changes
 * as raw syscalls (glibc's wrappers would try to apply them to the parent's
 * other threads).
 *
 * Why this order:
 *  - setsid first so the agent is never in the daemon's session or process
 *    group, and the pty (if any) can become its controlling terminal.
 *  - the child is born in the session cgroup (clone3 CLONE_INTO_CGROUP), so
 *    no socket can be made before the process is in place (the guard matches
 *    sockets by cgroup). Moving a process by writing cgroup.procs takes the
 *    kernel's cgroup_threadgroup_rwsem for writing, which waits for an RCU
 *    grace period whenever no move happened in the last one: measured here,
 *    5-22 ms after a pause of 20 ms or more against 0.05 ms back to back,
 *    most of a launch. Forking into the cgroup takes that lock for reading
 *    only. On kernels without CLONE_INTO_CGROUP (before 5.7) the child still
 *    moves itself, while it is root (cgroup.procs is root-owned).
 *  - the child comes from a raw clone3, not glibc's fork: the child only
 *    makes syscalls until execve, so nothing of glibc's per-thread state
 *    that fork would fix up is used.
 *  - setgroups, then setresgid, then setresuid: groups and gids can only be
 *    changed while we still hold CAP_SETGID, which setresuid drops.
 *  - the drop is verified: the real, effective and saved ids are all the
 *    target, regaining uid 0 fails, and no capability is left in any set.
 *  - NO_NEW_PRIVS, then seccomp, right after the mounts (the filter denies
 *    mounts and namespaces; everything after them is a syscall it allows:
 *    the gate's recvmsg, the credential calls, landlock, prctl, chdir,
 *    execve), so that the kernel compiles the filter while a gated child
 *    waits for lyhd's go rather than after it. NO_NEW_PRIVS is what a filter
 *    needs without CAP_SYS_ADMIN (sc_install checks it), and it keeps
 *    setuid binaries from raising privilege; set while root it changes
 *    nothing else, and the only exec is the agent's.
 *  - Landlock after the drop (as the user) and last before chdir and exec
 *    (chdir comes after it so that it is checked by Landlock as the user).
 * Any failure: write {step, errno} to the CLOEXEC status pipe and _exit(127).
 * A successful execve closes the pipe, so EOF tells the parent it worked. */
#include "platform/linux/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/sched.h> /* struct clone_args, CLONE_INTO_CGROUP */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/macros.h"
#include "platform/linux/cgroup.h"
#include "platform/linux/landlock.h"
#include "platform/linux/seccomp.h"
#include "platform/linux/unixsock.h"

const char *spawn_step_name(enum spawn_step s) {
    static const char *const names[] = {
        [SPAWN_STEP_NONE] = "none",
        [SPAWN_STEP_SETSID] = "setsid",
        [SPAWN_STEP_CTTY] = "controlling terminal",
        [SPAWN_STEP_STDIO] = "stdio",
        [SPAWN_STEP_CGROUP] = "session cgroup",
        [SPAWN_STEP_MOUNTS] = "mount namespace",
        [SPAWN_STEP_SETGROUPS] = "setgroups",
        [SPAWN_STEP_SETRESGID] = "setresgid",
        [SPAWN_STEP_SETRESUID] = "setresuid",
        [SPAWN_STEP_VERIFY_DROP] = "verify credential drop",
        [SPAWN_STEP_NO_NEW_PRIVS] = "no_new_privs",
        [SPAWN_STEP_LANDLOCK] = "landlock",
        [SPAWN_STEP_SECCOMP] = "seccomp",
        [SPAWN_STEP_CHDIR] = "chdir",
        [SPAWN_STEP_EXEC] = "execve",
        [SPAWN_STEP_GATE] = "waiting for lyhd's go",
    };
    if ((unsigned)s >= ARRAY_SIZE(names) || !names[s])
        return "unknown";
    return names[s];
}

static _Noreturn void child_fail(int status_fd, enum spawn_step step, int err) {
    struct spawn_failure f = {.step = step, .err = err};
    ssize_t n;

    do
        n = write(status_fd, &f, sizeof(f));
    while (n < 0 && errno == EINTR);
    _exit(127);
}

/* After setresuid: nothing can take us back. */
static int verify_drop(uid_t uid, gid_t gid) {
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

    if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
        return errno;
    if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid)
        return EPERM;
    if (uid != 0 && (syscall(SYS_setresuid, 0, 0, 0) == 0 || syscall(SYS_setresgid, 0, 0, 0) == 0))
        return EPERM;
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capget, &hdr, data) < 0)
        return errno;
    for (size_t i = 0; i < ARRAY_SIZE(data); i++)
        if (data[i].effective || data[i].permitted || data[i].inheritable)
            return EPERM;
    /* Ambient capabilities must be empty too (they survive exec). */
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return errno;
    return 0;
}

/* "/proc/self/fd/N" into buf (async-signal-safe: no snprintf). */
static void fd_path(int fd, char buf[static 32]) {
    static const char pre[] = "/proc/self/fd/";
    char digits[12];
    size_t n = 0, o = sizeof(pre) - 1;

    do
        digits[n++] = (char)('0' + fd % 10);
    while ((fd /= 10) > 0 && n < sizeof(digits));
    memcpy(buf, pre, o);
    while (n > 0)
        buf[o++] = digits[--n];
    buf[o] = '\0';
}

/* Resolve paths as the agent will (its uid, the guard gid, its groups) from
 * here until as_root(): a path a user pointed, through a symlink swapped in
 * after the parent's checks, at a place they cannot reach is not found (and
 * not revealed). Raw syscalls: this thread only. */
static void as_agent(const struct spawn_plan *p, int status_fd) {
    if (syscall(SYS_setgroups, p->n_groups, p->groups) < 0)
        child_fail(status_fd, SPAWN_STEP_MOUNTS, errno);
    (void)syscall(SYS_setfsgid, p->gid);
    (void)syscall(SYS_setfsuid, p->uid);
}

static void as_root(int status_fd) {
    (void)syscall(SYS_setfsuid, 0);
    (void)syscall(SYS_setfsgid, 0);
    if ((uid_t)syscall(SYS_setfsuid, (uid_t)-1) != 0)
        child_fail(status_fd, SPAWN_STEP_MOUNTS, EPERM);
}

static int mount_fd(const char *src, int fd, unsigned long flags, const char *type,
                    const char *data) {
    char path[32];
    fd_path(fd, path);
    return mount(src, path, type, flags, data);
}

/* mkdir -p of path (absolute) as the current fs identity; no allocation. */
static int mkdir_p(const char *path) {
    char buf[PATH_MAX];
    size_t n = strlen(path);

    if (n == 0 || n >= sizeof(buf) || path[0] != '/')
        return ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0700) < 0 && errno != EEXIST)
            return errno;
        buf[i] = c;
    }
    return 0;
}

const char *const spawn_tmp_subs[SPAWN_TMP_N] = {"tmp", "var-tmp", "shm"};
const char *const spawn_tmp_roots[SPAWN_TMP_N] = {"/tmp", "/var/tmp", "/dev/shm"};

/* The private /tmp, /var/tmp and /dev/shm: the session tmpdir's tmp, var-tmp
 * and shm bound over them, nosuid and nodev. What the agent runs beside (a
 * tmux or screen server, an emacs server, VS Code's IPC, X11's socket dir,
 * ssh-agent's) lives in the real ones and is out of its sight; its own files
 * go away with its tmpdir. Granted directories under them (its cwd, extra
 * paths) are shown again at the same path. All but the tmpdir opened as the
 * agent, mounted onto what was opened. */
static void private_tmp(const struct spawn_plan *p, int status_fd) {
    const char *const *sub = spawn_tmp_subs, *const *target = spawn_tmp_roots;
    int dfd, src[SPAWN_TMP_N], tfd[SPAWN_TMP_N], exp[SPAWN_MAX_EXPOSE];
    int err = 0;

    if (!p->private_tmp)
        return;
    if (p->n_expose > SPAWN_MAX_EXPOSE)
        child_fail(status_fd, SPAWN_STEP_MOUNTS, E2BIG);
    /* the tmpdir as root: it is root's, in lyhd's directory (root's, 0700:
     * nobody else could have changed a component), and only root can search
     * that; its tmp, var-tmp and shm as the agent */
    dfd = open(p->private_tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat dst;
    if (dfd >= 0 && (fstat(dfd, &dst) < 0 || dst.st_uid != 0)) {
        close(dfd); /* not the tmpdir lyhd made (lyhd's directory replaced?) */
        dfd = -1;
        errno = EPERM;
    }
    int dfd_err = dfd < 0 ? errno : 0;
    as_agent(p, status_fd);
    err = dfd_err;
    for (size_t i = 0; i < SPAWN_TMP_N; i++) {
        src[i] = dfd < 0 ? -1 : openat(dfd, sub[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        tfd[i] = open(target[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
        if ((src[i] < 0 || tfd[i] < 0) && !err)
            err = errno;
    }
    for (size_t i = 0; i < p->n_expose; i++) {
        exp[i] = open(p->expose[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (exp[i] < 0 && !err)
            err = errno;
    }
    as_root(status_fd);
    if (err)
        child_fail(status_fd, SPAWN_STEP_MOUNTS, err);
    for (size_t i = 0; i < SPAWN_TMP_N; i++) {
        char from[32];
        fd_path(src[i], from);
        if (mount_fd(from, tfd[i], MS_BIND, NULL, NULL) < 0 ||
            mount(NULL, target[i], NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV, NULL) < 0)
            child_fail(status_fd, SPAWN_STEP_MOUNTS, errno);
    }
    /* The granted directories again, at their own paths, inside the private
     * ones (their mount points are made there as the agent). */
    for (size_t i = 0; i < p->n_expose; i++) {
        char from[32];
        int mp;
        as_agent(p, status_fd);
        err = mkdir_p(p->expose[i]);
        mp = err ? -1 : open(p->expose[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (!err && mp < 0)
            err = errno;
        as_root(status_fd);
        if (err)
            child_fail(status_fd, SPAWN_STEP_MOUNTS, err);
        fd_path(exp[i], from);
        if (mount_fd(from, mp, MS_BIND | MS_REC, NULL, NULL) < 0)
            child_fail(status_fd, SPAWN_STEP_MOUNTS, errno);
        close(mp);
        close(exp[i]);
    }
    for (size_t i = 0; i < SPAWN_TMP_N; i++) {
        close(src[i]);
        close(tfd[i]);
    }
    if (dfd >= 0)
        close(dfd);
}

/* Keep entries of home read-only: each, looked up as the agent (its last
 * component not followed: a symlink is covered itself, so it cannot be
 * replaced), gets a bind mount of itself, made detached (open_tree), set
 * read-only, nosuid and nodev there (mount_setattr) and only then attached
 * onto the object that was opened (move_mount): no path is resolved as root
 * and no moment exists where the mount is attached but writable. A pin is
 * the same without the attributes. Recursive clones, so what an earlier step
 * mounted below an entry stays. A missing entry (gone since the daemon
 * looked) is skipped: there is nothing to write through. */
static void protect_home(const struct spawn_plan *p, int status_fd) {
    struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};

    if (p->n_protect > SPAWN_MAX_PROTECT)
        child_fail(status_fd, SPAWN_STEP_MOUNTS, E2BIG);
    /* As the agent throughout: only the opens resolve paths; open_tree,
     * mount_setattr and move_mount work on fds with empty paths, and what
     * they need (CAP_SYS_ADMIN) the file-system identity does not change.
     * One switch each way instead of one per entry (every syscall counts
     * on a launch). Each entry is still opened after the one before is in
     * place: an entry below an earlier one must be found in its new mount. */
    as_agent(p, status_fd);
    for (size_t i = 0; i < p->n_protect; i++) {
        int fd, tree;
        fd = open(p->protect[i].path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        /* lyhd saw it a moment ago: gone or out of sight now means someone
         * changed it meanwhile; an agent must not find it missing */
        if (fd < 0)
            child_fail(status_fd, SPAWN_STEP_MOUNTS, errno);
        tree = (int)syscall(SYS_open_tree, fd, "",
                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        if (tree < 0 ||
            (p->protect[i].ro &&
             syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &ro, sizeof(ro)) < 0) ||
            syscall(SYS_move_mount, tree, "", fd, "",
                    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
            child_fail(status_fd, SPAWN_STEP_MOUNTS, errno);
        close(tree);
        close(fd);
    }
    as_root(status_fd);
}

/* Sockets the user let through: each, looked up as the agent (the socket
 * itself, never a link), is cloned as a detached mount before anything is
 * covered, then attached again where the covers would hide it. */
static void sockets_take(const struct spawn_plan *p, int status_fd, int *trees) {
    if (p->n_sockets > SPAWN_MAX_SOCKETS)
        child_fail(status_fd, SPAWN_STEP_MOUNTS, E2BIG);
    for (size_t i = 0; i < p->n_sockets; i++) {
        struct stat st;
        as_agent(p, status_fd);
        int fd = open(p->sockets[i], O_PATH | O_NOFOLLOW | O_CLOEXEC);
        int err = fd < 0 ? errno : 0;
        as_root(status_fd);
        if (fd < 0)
            child_fail(status_fd, SPAWN_STEP_MOUNTS, err);
        if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
            child_fail(status_fd, SPAWN_STEP_MOUNTS, ENOTSOCK);
        trees[i] = (int)syscall(SYS_open_tree, fd, "",
                                OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (trees[i] < 0)
            child_fail(status_fd, SPAWN_STEP_MOUNTS, errno);
        close(fd);
    }
}

/* Is path below dir (a proper descendant)? */
static bool below(const char *path, const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    return strncmp(path, dir, n) == 0 && path[n] == '/' && path[n + 1] != '\0';
}

/* Attach tree onto a new empty file at rel (a path below the directory open
 * as dfd, its missing directories made 0755): made as the agent inside its
 * private /tmp (agent), as root inside a fresh cover; attached as root.
 * EEXIST: something is there already (the caller looks at what). */
static int graft(const struct spawn_plan *p, int status_fd, bool agent, int dfd, const char *rel,
                 int tree) {
    char buf[PATH_MAX];
    size_t n = strlen(rel);
    int cur = dup(dfd), k = 0;

    if (n == 0 || n >= sizeof(buf) || cur < 0) {
        if (cur >= 0)
            close(cur);
        return cur < 0 ? errno : ENAMETOOLONG;
    }
    memcpy(buf, rel, n + 1);
    char *comp = buf;
    if (agent)
        as_agent(p, status_fd);
    for (char *slash; (slash = strchr(comp, '/')); comp = slash + 1) {
        *slash = '\0';
        if (!*comp)
            continue;
        if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST) {
            k = errno;
            break;
        }
        int next = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            k = errno;
            break;
        }
        close(cur);
        cur = next;
    }
    if (k == 0) {
        int f = openat(cur, comp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (f < 0)
            k = errno;
        else
            close(f);
    }
    int t = k == 0 ? openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (k == 0 && t < 0)
        k = errno;
    if (agent)
        as_root(status_fd);
    if (k == 0 && syscall(SYS_move_mount, tree, "", t, "",
                          MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        k = errno;
    if (t >= 0)
        close(t);
    close(cur);
    return k;
}

/* The sockets the private /tmp, /var/tmp and /dev/shm hid: shown again at
 * their paths there (made as the agent, whose those directories are). */
static void sockets_in_private_tmp(const struct spawn_plan *p, int status_fd, int *trees) {
    static const char *const roots[] = {"/tmp", "/var/tmp", "/dev/shm"};
    for (size_t i = 0; i < p->n_sockets; i++) {
        for (size_t r = 0; trees[i] >= 0 && p->private_tmp && r < ARRAY_SIZE(roots); r++) {
            if (!below(p->sockets[i], roots[r]))
                continue;
            as_agent(p, status_fd);
            int dfd = open(roots[r], O_PATH | O_DIRECTORY | O_CLOEXEC);
            int err = dfd < 0 ? errno : 0;
            as_root(status_fd);
            if (dfd < 0)
                child_fail(status_fd, SPAWN_STEP_MOUNTS, err);
            err = graft(p, status_fd, true, dfd, p->sockets[i] + strlen(roots[r]) + 1, trees[i]);
            close(dfd);
            /* already there: a granted directory shown again holds it */
            if (err && err != EEXIST)
                child_fail(status_fd, SPAWN_STEP_MOUNTS, err);
        }
        if (trees[i] >= 0)
            close(trees[i]);
        trees[i] = -1;
    }
}

/* Hide what the agent must not reach: each place is looked up as the agent
 * (as_agent) and covered where it was found: a directory with an empty
 * read-only tmpfs, a socket with /dev/null (connect() then fails). The mount
 * goes onto the opened object, never onto a path string resolved as root. */
static void cover_hidden(const struct spawn_plan *p, int status_fd, int *trees) {
    int fds[SPAWN_MAX_HIDE];
    int err = 0;

    if (p->n_hide > SPAWN_MAX_HIDE)
        child_fail(status_fd, SPAWN_STEP_MOUNTS, E2BIG);
    if (p->n_hide == 0)
        return;
    as_agent(p, status_fd);
    for (size_t i = 0; i < p->n_hide; i++) {
        fds[i] = open(p->hide[i], O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fds[i] < 0 && errno != ENOENT && errno != EACCES && !err)
            err = errno;
    }
    as_root(status_fd);
    if (err)
        child_fail(status_fd, SPAWN_STEP_MOUNTS, err);
    for (size_t i = 0; i < p->n_hide; i++) {
        struct stat st;
        int k = 0;
        if (fds[i] < 0)
            continue;
        if (fstat(fds[i], &st) < 0)
            child_fail(status_fd, SPAWN_STEP_MOUNTS, errno);
        bool holds = false;
        for (size_t j = 0; S_ISDIR(st.st_mode) && j < p->n_sockets; j++)
            holds |= trees[j] >= 0 && below(p->sockets[j], p->hide[i]);
        if (S_ISDIR(st.st_mode) && !holds) {
            k = mount_fd("lyh-hidden", fds[i], MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                         "tmpfs", "size=4k,mode=0555");
        } else if (S_ISDIR(st.st_mode)) {
            /* an empty cover with the let-through sockets at their paths (a
             * skeleton of root's 0755 directories), then read-only. Made as a
             * detached tmpfs (fsopen/fsmount), attached onto the object
             * opened as the agent, and filled through the fd of its root:
             * no path is resolved as root, so nothing the user swaps in
             * (a symlink on the way) can take it elsewhere. */
            struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
            int fsfd = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC), top = -1;
            if (fsfd < 0 ||
                syscall(SYS_fsconfig, fsfd, FSCONFIG_SET_STRING, "size", "64k", 0) < 0 ||
                syscall(SYS_fsconfig, fsfd, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 ||
                syscall(SYS_fsconfig, fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
                (top = (int)syscall(SYS_fsmount, fsfd, FSMOUNT_CLOEXEC,
                                    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0 ||
                syscall(SYS_move_mount, top, "", fds[i], "",
                        MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                child_fail(status_fd, SPAWN_STEP_MOUNTS, errno);
            close(fsfd);
            size_t n = strlen(p->hide[i]);
            while (n > 1 && p->hide[i][n - 1] == '/')
                n--;
            for (size_t j = 0; j < p->n_sockets; j++) {
                if (trees[j] < 0 || !below(p->sockets[j], p->hide[i]))
                    continue;
                int e = graft(p, status_fd, false, top, p->sockets[j] + n + 1, trees[j]);
                if (e)
                    child_fail(status_fd, SPAWN_STEP_MOUNTS, e);
                close(trees[j]);
                trees[j] = -1;
            }
            if (syscall(SYS_mount_setattr, top, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0)
                child_fail(status_fd, SPAWN_STEP_MOUNTS, errno);
            close(top);
        } else if (S_ISSOCK(st.st_mode)) {
            k = mount_fd("/dev/null", fds[i], MS_BIND, NULL, NULL);
        }
        if (k < 0)
            child_fail(status_fd, SPAWN_STEP_MOUNTS, errno);
        close(fds[i]);
    }
}

int spawn_gate_wait(int gate_fd, int *ret_fd) {
    char byte = 0;
    int fds[UNIXSOCK_MAX_FDS];
    size_t nfds = 0;
    int fl = 0;
    ssize_t n = unixsock_recv_fds(gate_fd, &byte, 1, 0, fds, &nfds, &fl);
    int r = n == 0 ? -ECANCELED
            : n < 0 ? -errno
            : n != 1 || byte != 'G' || (fl & (MSG_TRUNC | MSG_CTRUNC)) || nfds != 1 ? -EPROTO
                                                                                    : 0;
    if (r < 0) {
        for (size_t i = 0; i < nfds; i++)
            close(fds[i]);
        return r;
    }
    *ret_fd = fds[0];
    return 0;
}

/* A gated plan's child: wait for the go and take the ruleset it carries.
 * Anything else stops the child before it has dropped a privilege or run a
 * byte of the agent. */
static int await_go(int gate_fd, int status_fd) {
    int fd = -1;
    int r = spawn_gate_wait(gate_fd, &fd);
    if (r < 0)
        child_fail(status_fd, SPAWN_STEP_GATE, -r);
    close(gate_fd);
    return fd;
}

int spawn_gate_go(int gate_fd, int landlock_fd) {
    if (gate_fd < 0 || landlock_fd < 0)
        return -EINVAL;
    ssize_t n = unixsock_send_fds(gate_fd, "G", 1, &landlock_fd, 1, MSG_DONTWAIT);
    return n == 1 ? 0 : n < 0 ? -errno : -EIO;
}

/* PATH of envp, or NULL. */
static const char *env_path(char *const *envp) {
    for (char *const *e = envp; *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            return *e + 5;
    return NULL;
}

/* A file that execve refused as no program it knows (ENOEXEC): run by
 * /bin/sh, as execvpe does. */
static int exec_sh(const char *file, char *const *argv, char *const *envp) {
    size_t n = 0;
    while (argv[n] && n < SPAWN_MAX_ARGV)
        n++;
    if (argv[n])
        return E2BIG;
    char *sh[SPAWN_MAX_ARGV + 2];
    sh[0] = (char *)"/bin/sh";
    sh[1] = (char *)file;
    for (size_t i = 1; i <= n; i++)
        sh[i + 1] = argv[i];
    execve("/bin/sh", sh, envp);
    return errno;
}

int spawn_exec_path(char *const *argv, char *const *envp) {
    const char *file = argv[0], *path = env_path(envp);
    size_t flen = strlen(file);
    bool denied = false;
    char buf[PATH_MAX];

    if (flen == 0)
        return ENOENT;
    if (strchr(file, '/')) {
        execve(file, argv, envp);
        return errno == ENOEXEC ? exec_sh(file, argv, envp) : errno;
    }
    if (flen >= NAME_MAX + 1)
        return ENAMETOOLONG;
    /* glibc's default when PATH is unset */
    for (const char *dir = path ? path : "/bin:/usr/bin", *end;; dir = end + 1) {
        end = strchr(dir, ':');
        size_t dlen = end ? (size_t)(end - dir) : strlen(dir);
        /* an empty entry is the working directory */
        if (dlen + 1 + flen + 1 <= sizeof(buf)) {
            memcpy(buf, dir, dlen);
            size_t o = dlen;
            if (o > 0)
                buf[o++] = '/';
            memcpy(buf + o, file, flen + 1);
            execve(buf, argv, envp);
            int e = errno == ENOEXEC ? exec_sh(buf, argv, envp) : errno;
            switch (e) {
            case EACCES:
                denied = true;
                break;
            case ENOENT:
            case ENOTDIR:
            case ESTALE:
            case ENODEV:
            case ETIMEDOUT:
                break;
            default:
                return e;
            }
        }
        if (!end)
            break;
    }
    return denied ? EACCES : ENOENT;
}

static _Noreturn void child(const struct spawn_plan *p, int status_fd, bool in_cgroup) {
    sigset_t all;
    int k;

    /* Signals: the daemon's handlers and mask must not leak into the agent.
     * Every signal is blocked until then (spawn_start). The spawner has
     * none to leak (it set them all to the default when it started). */
    for (int sig = 1; sig < NSIG && !p->signals_default; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    /* They stay blocked until the privileges are dropped (below): only root
     * can signal us until then, and during the drop a signal of the user's
     * must not dump our memory (see the drop). */

    if (setsid() < 0)
        child_fail(status_fd, SPAWN_STEP_SETSID, errno);

    if (p->pty_fd >= 0) {
        if (ioctl(p->pty_fd, TIOCSCTTY, 0) < 0)
            child_fail(status_fd, SPAWN_STEP_CTTY, errno);
        for (int i = 0; i < 3; i++)
            if (dup2(p->pty_fd, i) < 0)
                child_fail(status_fd, SPAWN_STEP_STDIO, errno);
    } else {
        /* dup2 onto 0..2 in an order that cannot clobber a source fd still
         * needed: move sources above 2 first. */
        int src[3];
        for (int i = 0; i < 3; i++) {
            src[i] = p->stdio[i] >= 0 ? fcntl(p->stdio[i], F_DUPFD_CLOEXEC, 3) : -1;
            if (p->stdio[i] >= 0 && src[i] < 0)
                child_fail(status_fd, SPAWN_STEP_STDIO, errno);
        }
        for (int i = 0; i < 3; i++) {
            if (src[i] < 0) {
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null < 0)
                    child_fail(status_fd, SPAWN_STEP_STDIO, errno);
                src[i] = null;
            }
            if (dup2(src[i], i) < 0)
                child_fail(status_fd, SPAWN_STEP_STDIO, errno);
        }
    }
    /* Everything else this process inherited dies at exec. */
    if (syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */) < 0 && errno != ENOSYS &&
        errno != EINVAL)
        child_fail(status_fd, SPAWN_STEP_STDIO, errno);

    if (!in_cgroup && p->cgroup_procs_fd >= 0 && cg_enter(p->cgroup_procs_fd) < 0)
        child_fail(status_fd, SPAWN_STEP_CGROUP, errno);

    /* A mount namespace of our own, slave to the host's so nothing we mount
     * goes back:
     *  - a private devpts instance over /dev/pts (and its ptmx over
     *    /dev/ptmx): the agent can make ptys of its own but never open the
     *    user's other terminals, whose devices its user owns;
     *  - the socket directories covered with an empty read-only tmpfs:
     *    Landlock does not mediate connect() on pathname sockets, and
     *    covering them keeps the agent from asking the user's systemd or
     *    D-Bus to start something unconfined.
     * The agent cannot undo it: seccomp denies mount/umount. */
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
        child_fail(status_fd, SPAWN_STEP_MOUNTS, errno);
    if (mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=0620") < 0 ||
        mount("/dev/pts/ptmx", "/dev/ptmx", NULL, MS_BIND, NULL) < 0)
        child_fail(status_fd, SPAWN_STEP_MOUNTS, errno);
    int trees[SPAWN_MAX_SOCKETS];
    sockets_take(p, status_fd, trees);
    protect_home(p, status_fd);
    cover_hidden(p, status_fd, trees);
    private_tmp(p, status_fd);
    sockets_in_private_tmp(p, status_fd, trees);

    /* The syscall filter now, while a gated child waits for lyhd's go anyway
     * (its compilation by the kernel is 0.1-0.2 ms): nothing this child does
     * from here on is a syscall it denies (no mount, no namespace; the
     * credential calls, landlock, prctl, chdir, execve are allowed), and it
     * holds from here to the agent's end all the same. no_new_privs first,
     * as the filter requires of a process without CAP_SYS_ADMIN: it only
     * keeps an exec from gaining privileges, and the only exec is the
     * agent's, after the drop. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        child_fail(status_fd, SPAWN_STEP_NO_NEW_PRIVS, errno);
    k = sc_install(p->seccomp);
    if (k < 0)
        child_fail(status_fd, SPAWN_STEP_SECCOMP, -k);
    int ll_fd = p->gated ? await_go(p->gate_fd, status_fd) : p->landlock_fd;
    k = ll_add_devpts_child(ll_fd, p->landlock_handled);
    if (k < 0)
        child_fail(status_fd, SPAWN_STEP_LANDLOCK, -k);

    /* Privilege drop: groups, then gids, then uid (which loses CAP_SETGID). */
    /* Raw syscalls, not glibc's wrappers: those apply credential changes to
     * every thread glibc knows of, and lyhd's other threads exist only in the
     * parent. This process has one thread, which the raw calls change. */
    if (syscall(SYS_setgroups, p->n_groups, p->groups) < 0)
        child_fail(status_fd, SPAWN_STEP_SETGROUPS, errno);
    if (syscall(SYS_setresgid, p->gid, p->gid, p->gid) < 0)
        child_fail(status_fd, SPAWN_STEP_SETRESGID, errno);
    /* Not dumpable whatever fs.suid_dumpable says, from the moment the user
     * could reach us: this process may share the spawner's memory until its
     * exec (spawn_start_shared), which the user must not read or write
     * through ptrace, /proc/PID/mem or a core dump. A change of the
     * effective uid sets the flag to that sysctl, so it is cleared between
     * two steps: first the real and effective uid (the saved one still
     * root: the user can neither trace us nor, with every signal blocked,
     * make us dump), then the flag, then the saved uid, which only drops
     * capabilities and leaves the flag alone. The exec sets it again as for
     * any program the user runs. */
    if (syscall(SYS_setresuid, p->uid, p->uid, (uid_t)-1) < 0 ||
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ||
        syscall(SYS_setresuid, p->uid, p->uid, p->uid) < 0)
        child_fail(status_fd, SPAWN_STEP_SETRESUID, errno);
    if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
        child_fail(status_fd, SPAWN_STEP_VERIFY_DROP, EPERM);
    k = verify_drop(p->uid, p->gid);
    if (k != 0)
        child_fail(status_fd, SPAWN_STEP_VERIFY_DROP, k);
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);

    k = ll_restrict_self(ll_fd);
    if (k < 0)
        child_fail(status_fd, SPAWN_STEP_LANDLOCK, -k);

    if (chdir(p->cwd) < 0)
        child_fail(status_fd, SPAWN_STEP_CHDIR, errno);
    child_fail(status_fd, SPAWN_STEP_EXEC, spawn_exec_path(p->argv, p->envp));
}

/* clone3 with a pidfd and, given a cgroup directory, into that cgroup; fork
 * semantics otherwise (no CLONE_VM: the child runs on a copy of our stack). 0
 * in the child, the pid in the parent, -1 with errno. */
static pid_t clone_into(int cgroup_dir_fd, bool clone_parent, int *ret_pidfd) {
    struct clone_args args = {
        .flags = CLONE_PIDFD | (cgroup_dir_fd >= 0 ? CLONE_INTO_CGROUP : 0) |
                 (clone_parent ? CLONE_PARENT : 0),
        .pidfd = (uint64_t)(uintptr_t)ret_pidfd,
        /* CLONE_PARENT takes the caller's own exit signal (clone3 refuses
         * one of ours): the spawner's, SIGCHLD */
        .exit_signal = clone_parent ? 0 : SIGCHLD,
        .cgroup = cgroup_dir_fd >= 0 ? (uint64_t)cgroup_dir_fd : 0,
    };
    return (pid_t)syscall(SYS_clone3, &args, sizeof(args));
}

pid_t spawn_sibling(int *ret_pidfd) {
    return clone_into(-1, true, ret_pidfd);
}

int spawn_start(const struct spawn_plan *p, pid_t *ret_pid, int *ret_pidfd, int *ret_status_fd) {
    int pipefd[2];
    pid_t pid;
    int pidfd = -1;
    bool in_cgroup = p->cgroup_dir_fd >= 0;

    if (!p->argv || !p->argv[0] || !p->seccomp || !p->cwd ||
        (p->gated ? p->gate_fd < 0 || p->landlock_fd >= 0 : p->landlock_fd < 0))
        return -EINVAL;
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return -errno;
    /* The child starts with every signal blocked and unblocks them only
     * once no handler of ours is left in it (child()): a signal that came
     * before would run the daemon's handler in the child. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid = clone_into(p->cgroup_dir_fd, p->clone_parent, &pidfd);
    if (pid < 0 && p->clone_parent) {
        int k = errno == E2BIG || errno == EINVAL ? -ENOSYS : -errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        close(pipefd[0]);
        close(pipefd[1]);
        return k; /* no fork fallback: fork cannot make a sibling */
    }
    if (pid < 0 && (errno == ENOSYS || errno == E2BIG || (errno == EINVAL && in_cgroup))) {
        /* No clone3 (before 5.3) or no CLONE_INTO_CGROUP (before 5.7): fork,
         * and the child moves itself. */
        in_cgroup = false;
        pidfd = -1;
        pid = fork();
    }
    if (pid != 0) {
        int e = errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        errno = e;
    }
    if (pid < 0) {
        int k = -errno;
        close(pipefd[0]);
        close(pipefd[1]);
        return k;
    }
    if (pid == 0) {
        close(pipefd[0]);
        child(p, pipefd[1], in_cgroup);
    }
    close(pipefd[1]);
    /* The child cannot be reaped before we wait for it, so its pid is ours.
     * (clone3's pidfd is CLOEXEC already.) */
    if (pidfd < 0)
        pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        int k = -errno;
        kill(pid, SIGKILL);
        close(pipefd[0]);
        return k;
    }
    if (fcntl(pidfd, F_SETFD, FD_CLOEXEC) < 0 ||
        fcntl(pipefd[0], F_SETFL, fcntl(pipefd[0], F_GETFL) | O_NONBLOCK) < 0) {
        int k = -errno;
        kill(pid, SIGKILL);
        close(pidfd);
        close(pipefd[0]);
        return k;
    }
    *ret_pid = pid;
    *ret_pidfd = pidfd;
    *ret_status_fd = pipefd[0];
    return 0;
}

/* ---- the child sharing its maker's memory (spawn_start_shared) ---------------------------- */

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define SPAWN_NO_SHARED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || !defined(__x86_64__)
#define SPAWN_NO_SHARED 1
#endif

#ifdef SPAWN_NO_SHARED
int spawn_start_shared(const struct spawn_plan *p, struct spawn_shared **ret_sh, pid_t *ret_pid,
                       int *ret_pidfd, int *ret_status_fd, int *ret_done_fd) {
    (void)p, (void)ret_sh, (void)ret_pid, (void)ret_pidfd, (void)ret_status_fd, (void)ret_done_fd;
    return -ENOSYS;
}
void spawn_shared_free(struct spawn_shared *sh) {
    (void)sh;
}
#else
/* long spawn_clone3_run(struct clone_args *args, size_t size, int (*fn)(void *),
 * void *arg): clone3; the child, on args->stack, returns nowhere: it calls
 * fn(arg) and exits with its value. The parent gets the pid or -errno, and no
 * errno is written. (glibc's clone() has no clone3 flags such as
 * CLONE_INTO_CGROUP; its clone3 is not exported.) */
__asm__(".pushsection .text\n"
        ".globl spawn_clone3_run\n"
        ".hidden spawn_clone3_run\n"
        ".type spawn_clone3_run, @function\n"
        "spawn_clone3_run:\n"
        "    movq %rcx, %r8\n" /* syscall clobbers rcx and r11, not r8 and r9 */
        "    movq %rdx, %r9\n"
        "    movl $435, %eax\n" /* SYS_clone3 */
        "    syscall\n"
        "    testq %rax, %rax\n"
        "    jnz 1f\n"
        "    xorl %ebp, %ebp\n" /* the child: outermost frame */
        "    movq %r8, %rdi\n"
        "    call *%r9\n"
        "    movl %eax, %edi\n"
        "    movl $60, %eax\n" /* SYS_exit */
        "    syscall\n"
        "    hlt\n"
        "1:  ret\n"
        ".size spawn_clone3_run, .-spawn_clone3_run\n"
        ".popsection\n");
long spawn_clone3_run(struct clone_args *args, size_t size, int (*fn)(void *), void *arg);
_Static_assert(SYS_clone3 == 435 && SYS_exit == 60, "x86_64 system call numbers");

#define SHARED_STACK (256u * 1024u)

/* One launch: this, a guard page, the child's stack, in one mapping. */
struct spawn_shared {
    struct clone_args args;
    struct spawn_plan plan; /* the caller's copy, which it may reuse at once (what it
                             * points to stays: spawn.h) */
    bool in_cgroup;
    int status_w; /* the child's copy is its own: the caller's is closed once it runs */
    int ready_w;  /* the launcher's: 'R' from the child, 'F' if the clone failed, 'E' at
                   * the end (the first one is read) */
    int done_w;   /* the launcher's: a byte once the child exec'd or ended */
    int done_r;
    pthread_t launcher; /* joined once done (its exit frees nothing: it never allocated) */
    int pidfd;    /* written by the kernel before the child runs */
    pid_t tid;    /* idem (CLONE_PARENT_SETTID) */
    size_t len;
};

static int shared_child(void *arg) {
    struct spawn_shared *sh = arg;
    int32_t m[2] = {'R', 0};

    if (write(sh->ready_w, m, sizeof(m)) != (ssize_t)sizeof(m))
        child_fail(sh->status_w, SPAWN_STEP_NONE, errno);
    child(&sh->plan, sh->status_w, sh->in_cgroup);
}

/* The launcher: held by the kernel from the clone to the child's exec or end
 * (CLONE_VFORK); the child runs on its thread pointer meanwhile. It takes no
 * lock and allocates nothing (so a child its process forks meanwhile finds no
 * lock of libc's taken), and touches sh only before its last write. It is
 * joined, so what its end frees is freed by the joiner. */
static void *launch(void *arg) {
    struct spawn_shared *sh = arg;
    int ready = sh->ready_w, done = sh->done_w;
    long r = spawn_clone3_run(&sh->args, sizeof(sh->args), shared_child, sh);
    int32_t m[2] = {r < 0 ? 'F' : 'E', r < 0 ? (int32_t)-r : 0};

    /* the caller may have read 'R' and gone on: a failed write is nothing */
    (void)!write(ready, m, sizeof(m));
    (void)!write(done, "D", 1);
    close(ready);
    close(done);
    return NULL;
}

static void close_pair(int fds[2]) {
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

int spawn_start_shared(const struct spawn_plan *p, struct spawn_shared **ret_sh, pid_t *ret_pid,
                       int *ret_pidfd, int *ret_status_fd, int *ret_done_fd) {
    int st[2] = {-1, -1}, ready[2] = {-1, -1}, done[2] = {-1, -1};
    long page = sysconf(_SC_PAGESIZE);
    struct spawn_shared *sh;
    pthread_attr_t attr;
    sigset_t all, old;
    int32_t m[2];
    ssize_t n;
    int k;

    if (!p->argv || !p->argv[0] || !p->seccomp || !p->cwd ||
        (p->gated ? p->gate_fd < 0 || p->landlock_fd >= 0 : p->landlock_fd < 0))
        return -EINVAL;
    if (page <= 0 || (size_t)page < sizeof(*sh))
        return -ENOSYS;
    size_t len = 2 * (size_t)page + SHARED_STACK;
    sh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (sh == MAP_FAILED)
        return -ENOSYS;
    /* the page after this struct stops a stack that grew too far; a fork
     * made meanwhile (a remover runs as another user) finds the plan struct
     * and the stack, with the paths the child looked up, zeroed */
    if (madvise(sh, len, MADV_WIPEONFORK) < 0) {
        munmap(sh, len);
        return -ENOSYS;
    }
    if (mprotect((char *)sh + page, (size_t)page, PROT_NONE) < 0 ||
        pipe2(st, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2(ready, O_CLOEXEC) < 0 ||
        pipe2(done, O_CLOEXEC) < 0) {
        k = -ENOSYS;
        goto fail;
    }
    sh->plan = *p;
    sh->len = len;
    sh->in_cgroup = p->cgroup_dir_fd >= 0;
    sh->status_w = st[1];
    sh->ready_w = ready[1];
    sh->done_w = done[1];
    sh->done_r = done[0];
    sh->pidfd = -1;
    sh->args = (struct clone_args){
        .flags = CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_PARENT_SETTID |
                 (sh->in_cgroup ? CLONE_INTO_CGROUP : 0) | (p->clone_parent ? CLONE_PARENT : 0),
        .pidfd = (uint64_t)(uintptr_t)&sh->pidfd,
        .parent_tid = (uint64_t)(uintptr_t)&sh->tid,
        .exit_signal = p->clone_parent ? 0 : SIGCHLD,
        .stack = (uint64_t)(uintptr_t)((char *)sh + 2 * page),
        .stack_size = SHARED_STACK,
        .cgroup = sh->in_cgroup ? (uint64_t)p->cgroup_dir_fd : 0,
    };
    /* The launcher, and so the child, starts with every signal blocked
     * (child() keeps them so until the drop). */
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64u * 1024u);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    k = pthread_create(&sh->launcher, &attr, launch, sh) == 0 ? 0 : -ENOSYS;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (k < 0)
        goto fail;
    /* From here the launcher owns ready[1] and done[1]. */
    do
        n = read(ready[0], m, sizeof(m));
    while (n < 0 && errno == EINTR);
    close(ready[0]);
    close(st[1]);
    if (n != (ssize_t)sizeof(m) || m[0] == 'F') {
        /* the clone failed (the launcher ends at once): nothing was made, and
         * the fork way may still work (no clone3, no CLONE_INTO_CGROUP, no
         * memory for a stack now) */
        k = n != (ssize_t)sizeof(m) ? -EIO : -ENOSYS;
        /* (-EIO cannot be: the launcher always writes its 8 bytes; should a
         * child exist all the same, it must not keep the join waiting) */
        if (k == -EIO && sh->pidfd >= 0) {
            (void)syscall(SYS_pidfd_send_signal, sh->pidfd, SIGKILL, NULL, 0);
            close(sh->pidfd);
        }
        close(st[0]);
        spawn_shared_free(sh);
        return k;
    }
    /* 'R' (or 'E': it ended before it said so): pid and pidfd were written
     * before it ran */
    *ret_pid = sh->tid;
    *ret_pidfd = sh->pidfd;
    *ret_status_fd = st[0];
    *ret_done_fd = done[0];
    *ret_sh = sh;
    return 0;

fail:
    close_pair(st);
    close_pair(ready);
    close_pair(done);
    munmap(sh, len);
    return k;
}

void spawn_shared_free(struct spawn_shared *sh) {
    if (!sh)
        return;
    (void)pthread_join(sh->launcher, NULL);
    close(sh->done_r);
    munmap(sh, sh->len);
}
#endif

int spawn_read_status(int status_fd, struct spawn_failure *ret) {
    struct spawn_failure f;
    ssize_t n;

    do
        n = read(status_fd, &f, sizeof(f));
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EAGAIN ? -EAGAIN : -errno;
    if (n == 0)
        return 0;
    if (n != sizeof(f)) {
        ret->step = SPAWN_STEP_NONE;
        ret->err = EPROTO;
        return 1;
    }
    *ret = f;
    return 1;
}
