/* Per-launch directories: creation as root (fresh, then handed to the user),
 * removal as the user.
 *
 * Why removal runs as the user: the tree lives in a directory the agent could
 * write, so it may hold symlinks, bind-style tricks or a renamed parent. A root
 * process walking it could be steered into deleting elsewhere; a process with
 * the user's own uid can only delete what the user could delete anyway.
 * Root only ever removes empty directories by name (fs_remove_bare_dir), and
 * never on lyhd's loop: a user can hold a directory's lock (fsutil.h). */
#include "platform/linux/fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <limits.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/macros.h"

int fs_make_private_dir(int parent_fd, const char *name, uid_t uid, gid_t gid,
                        const char *const *subs, size_t n_subs) {
    int fd, k = 0;

    if (!name[0] || name[0] == '.' || strchr(name, '/'))
        return -EINVAL;
    if (mkdirat(parent_fd, name, 0700) < 0)
        return -errno;
    fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    for (size_t i = 0; fd >= 0 && i < n_subs && k == 0; i++) {
        if (!subs[i][0] || subs[i][0] == '.' || strchr(subs[i], '/'))
            k = -EINVAL;
        else if (mkdirat(fd, subs[i], 0700) < 0 ||
                 fchownat(fd, subs[i], uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
            k = -errno;
    }
    /* The tmpdir stays root's (its gid the user's, for fs_remove_tree_as's
     * caller), searchable only: the user reaches its subdirectories but
     * cannot open it for reading, so cannot hold its lock while root's
     * rmdir of it waits with its parent's lock taken (fsutil.h). */
    if (fd < 0 || k < 0 || fchown(fd, 0, gid) < 0 || fchmod(fd, 0711) < 0) {
        k = k < 0 ? k : -errno;
        for (size_t i = 0; fd >= 0 && i < n_subs; i++)
            (void)unlinkat(fd, subs[i], AT_REMOVEDIR);
        if (fd >= 0)
            close(fd);
        unlinkat(parent_fd, name, AT_REMOVEDIR);
        return k;
    }
    close(fd);
    return 0;
}

/* Set by rm_one when something could not go; the walk goes on (one entry
 * the user may not remove, a directory of mode 000 say, must not keep the
 * rest). */
static bool rm_failed;

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st;
    if (ftw->level == 0)
        return 0; /* the directory walked: root removes it */
    if ((type == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT)
        rm_failed = true;
    return 0;
}

int fs_close_fds_from(int first) {
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *e;

    if (!dir)
        return -1;
    for (;;) {
        char *end;
        long fd;

        errno = 0;
        if (!(e = readdir(dir)))
            break;
        fd = strtol(e->d_name, &end, 10);
        if (*end == '\0' && end != e->d_name && fd >= first && fd <= INT_MAX && fd != dirfd(dir))
            (void)close((int)fd);
    }
    /* a listing cut short may have left an fd of lyhd's open: fail */
    int err = errno;
    closedir(dir);
    return err ? -1 : 0;
}

static int open_here(int dirfd, const char *name, bool dir);
static int open_dir_here(int dirfd, const char *name);

/* The user's half of a removal: drop to uid:gid and remove everything below
 * each directory of fds[0..n) (-1: none), without following a symlink. They
 * are O_PATH fds root opened: the tmpdir's subdirectories, then the tmpdir
 * itself (an older lyhd's was the user's and may hold more; lyhd's own is
 * root's and cannot be read: a walk of it sees nothing). The path to them
 * goes through lyhd's directory, which only root may search. Never returns. */
_Noreturn static void empty_as(const int *fds, size_t n, uid_t uid, gid_t gid, pid_t root_stage) {
    /* Not dumpable whatever fs.suid_dumpable says: this process holds a
     * copy of its parent's memory, which its user must not read through
     * ptrace or /proc/PID/mem. A change of the effective uid sets the flag
     * to that sysctl, so it is cleared between the two steps: first the real
     * and effective uid (the saved one still root, so the user cannot trace
     * it yet), then the flag, then the saved uid (which only drops
     * capabilities: that leaves the flag alone). */
    if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, gid, gid, gid) < 0 ||
        syscall(SYS_setresuid, uid, uid, -1) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ||
        syscall(SYS_setresuid, uid, uid, uid) < 0)
        _exit(FS_RM_FAILED);
    if (uid != 0 && syscall(SYS_setresuid, 0, 0, 0) == 0)
        _exit(FS_RM_FAILED);
    if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
        _exit(FS_RM_FAILED);
    /* The change of credentials cleared any parent-death signal: set it now,
     * so that killing the root half (lyhd does, when over time) ends this
     * one too; and the root half may already be gone. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != root_stage)
        _exit(FS_RM_FAILED);
    /* FTW_PHYS: never follow symlinks; FTW_MOUNT: stay on this file system. */
    rm_failed = false;
    for (size_t i = 0; i < n; i++)
        if (fds[i] >= 0 && (fchdir(fds[i]) < 0 ||
                            nftw(".", rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0))
            rm_failed = true;
    _exit(rm_failed ? FS_RM_LEFT : FS_RM_GONE);
}

static int rm_status(int r) {
    return r == 0 ? FS_RM_GONE : r == -EXDEV ? FS_RM_MOUNTED : FS_RM_LEFT;
}

void fs_remove_tree_child(const char *path, const char *const *subs, size_t n_subs, uid_t uid,
                          gid_t gid) {
    /* Nothing of lyhd's may stay with a process its user can signal, stop
     * or trace once it runs as them: close every fd first. The process is a
     * fork (glibc's, or the spawner's clone3), so malloc is usable (nftw
     * allocates); the credential calls are raw syscalls, for this thread
     * alone (lyhd's other threads exist only in the parent). */
    if (syscall(SYS_close_range, 3u, ~0u, 0u) < 0 && (errno != ENOSYS || fs_close_fds_from(3) < 0))
        _exit(FS_RM_FAILED);
    (void)prctl(PR_SET_NAME, "lyhd-remover", 0, 0, 0); /* what ps shows, whoever forked it */
    /* As root, by name: the empty directories lyhd made (most sessions
     * leave nothing else). This may wait as long as a user holds one of
     * their locks (fsutil.h): here, not on lyhd's loop. */
    int r = fs_remove_bare_dir(path, subs, n_subs);
    if (r == 0 || r == -EXDEV)
        _exit(rm_status(r));
    /* Anything else in it: emptied with the user's rights only, then the
     * empty directories as root again. */
    if (uid == 0) /* never a walk of this tree as root */
        _exit(FS_RM_LEFT);
    int fds[FS_RM_MAX_SUBS + 1];
    const char *name = strrchr(path, '/');
    int pfd = fs_open_parent_dir(path);
    if (n_subs > FS_RM_MAX_SUBS || !name || pfd < 0)
        _exit(FS_RM_FAILED);
    /* Only what is root's or uid's: a tmpdir someone else made in its place
     * (lyhd's directory removed under it, say) must not have uid remove
     * whatever that someone points it at. */
    struct stat st;
    fds[n_subs] = open_dir_here(pfd, name + 1);
    close(pfd);
    if (fds[n_subs] >= 0 &&
        (fstat(fds[n_subs], &st) < 0 || (st.st_uid != 0 && st.st_uid != uid)))
        _exit(FS_RM_LEFT);
    for (size_t i = 0; i < n_subs; i++) {
        fds[i] = fds[n_subs] < 0 ? -1 : open_dir_here(fds[n_subs], subs[i]);
        if (fds[i] >= 0 && (fstat(fds[i], &st) < 0 || st.st_uid != uid)) {
            close(fds[i]);
            fds[i] = -1;
        }
    }
    pid_t self = getpid(), pid = fork();
    if (pid < 0)
        _exit(FS_RM_FAILED);
    if (pid == 0)
        empty_as(fds, n_subs + 1, uid, gid, self);
    /* Its user can stop it (SIGSTOP: it runs as them), and a stopped
     * remover would only wait to be killed at its deadline; one that is
     * working is given longer (session.c). So a stop is answered at once:
     * it is killed, and what it left is the next start's. */
    int wst;
    bool stopped = false;
    for (;;) {
        if (waitpid(pid, &wst, WUNTRACED) < 0) {
            if (errno == EINTR)
                continue;
            _exit(FS_RM_FAILED);
        }
        if (!WIFSTOPPED(wst))
            break;
        stopped = true;
        (void)kill(pid, SIGKILL);
    }
    r = fs_remove_bare_dir(path, subs, n_subs);
    _exit(r != 0 && r != -EXDEV && stopped ? FS_RM_STOPPED : rm_status(r));
}

int fs_remove_tree_as(const char *path, const char *const *subs, size_t n_subs, uid_t uid,
                      gid_t gid, pid_t *ret_pid, int *ret_pidfd) {
    pid_t pid;
    int pidfd;

    if (path[0] != '/')
        return -EINVAL;
    pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0)
        fs_remove_tree_child(path, subs, n_subs, uid, gid);
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        int k = -errno;
        /* no waiting here: the child may already wait on a lock a user
         * holds, which a SIGKILL does not end (left a zombie until then) */
        kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, WNOHANG);
        return k;
    }
    *ret_pid = pid;
    *ret_pidfd = pidfd;
    return 0;
}

/* Raw syscalls on purpose: glibc's setgroups()/setfsuid() wrappers apply
 * setgroups to every thread of the process; the raw calls change only this
 * one, which is the point (lyhd's other threads keep root's identity). */
/* This thread's effective capabilities (raw capget: per thread). */
static int cap_effective(uint32_t eff[2]) {
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];

    if (syscall(SYS_capget, &h, d) < 0)
        return -errno;
    eff[0] = d[0].effective;
    eff[1] = d[1].effective;
    return 0;
}

int fs_ident_enter(uid_t uid, gid_t gid, const gid_t *groups, size_t n_groups,
                   struct fs_ident *saved) {
    int n;

    if (n_groups > FS_IDENT_MAX_GROUPS)
        return -E2BIG;
    n = cap_effective(saved->cap_eff);
    if (n < 0)
        return n;
    n = getgroups(FS_IDENT_MAX_GROUPS, saved->groups);
    if (n < 0)
        return -errno;
    saved->n_groups = (size_t)n;
    saved->fsuid = (uid_t)syscall(SYS_setfsuid, (uid_t)-1);
    saved->fsgid = (gid_t)syscall(SYS_setfsgid, (gid_t)-1);
    if (syscall(SYS_setgroups, n_groups, groups) < 0)
        return -errno;
    (void)syscall(SYS_setfsgid, gid);
    (void)syscall(SYS_setfsuid, uid);
    /* setfsuid/setfsgid report failure only through the value they return
     * next time: ask again (-1 changes nothing and returns the current one). */
    if ((uid_t)syscall(SYS_setfsuid, (uid_t)-1) != uid ||
        (gid_t)syscall(SYS_setfsgid, (gid_t)-1) != gid) {
        /* Half switched and unable to go back: never go on like that. */
        if (fs_ident_leave(saved) < 0)
            abort();
        return -EPERM;
    }
    return 0;
}

int fs_ident_leave(const struct fs_ident *saved) {
    (void)syscall(SYS_setfsuid, saved->fsuid);
    (void)syscall(SYS_setfsgid, saved->fsgid);
    if (syscall(SYS_setgroups, saved->n_groups, saved->groups) < 0)
        return -errno;
    if ((uid_t)syscall(SYS_setfsuid, (uid_t)-1) != saved->fsuid ||
        (gid_t)syscall(SYS_setfsgid, (gid_t)-1) != saved->fsgid)
        return -EPERM;
    uint32_t eff[2] = {0, 0};
    int k = cap_effective(eff);
    if (k < 0)
        return k;
    return eff[0] == saved->cap_eff[0] && eff[1] == saved->cap_eff[1] ? 0 : -EPERM;
}

/* O_PATH fd of dirfd/name without following a symlink or crossing a mount
 * point; dir: a directory only. -errno. */
static int open_here(int dirfd, const char *name, bool dir) {
    struct open_how how = {
        .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC | (dir ? O_DIRECTORY : 0),
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    int fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
    return fd < 0 ? -errno : fd;
}

int fs_stat_here(int dirfd, const char *name, struct stat *ret) {
    _cleanup_close_ int fd = open_here(dirfd, name, false);
    /* no openat2: before Linux 5.6 (no Landlock either, so no sessions), or a
     * seccomp filter of a container's that refuses it */
    if (fd == -ENOSYS || fd == -EPERM)
        return fstatat(dirfd, name, ret, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
    if (fd < 0)
        return fd;
    return fstat(fd, ret) < 0 ? -errno : 0;
}

/* open_here for a directory, or where there is no openat2 (fs_stat_here) an
 * O_PATH openat that follows no symlink (it may cross a mount point). */
static int open_dir_here(int dirfd, const char *name) {
    int fd = open_here(dirfd, name, true);
    if (fd == -ENOSYS || fd == -EPERM) {
        fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            fd = -errno;
    }
    return fd;
}

int fs_open_own_dir(const char *parent, const char *name, mode_t mode, int *ret_fd) {
    struct stat st;

    if (!name[0] || name[0] == '.' || strchr(name, '/'))
        return -EINVAL;
    _cleanup_close_ int pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
        return -errno;
    /* open first: an mkdir takes the parent's lock even when the name
     * exists, and a user can hold that of /tmp */
    _cleanup_close_ int fd = open_dir_here(pfd, name);
    if (fd == -ENOENT) {
        if (mkdirat(pfd, name, 0700) < 0 && errno != EEXIST)
            return -errno;
        fd = open_dir_here(pfd, name);
    }
    if (fd == -ELOOP)
        return -ENOTDIR; /* a symlink */
    if (fd < 0)
        return fd;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (st.st_uid != 0)
        return -EPERM;
    if ((st.st_mode & 07777) != mode) { /* through fd: never a name that may have changed */
        _cleanup_close_ int rfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (rfd < 0 || fchmod(rfd, mode) < 0)
            return -errno;
    }
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int fs_remove_bare_dir(const char *path, const char *const *subs, size_t n_subs) {
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    if (!name[0] || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return -EINVAL;
    _cleanup_close_ int pfd = fs_open_parent_dir(path);
    if (pfd < 0)
        return pfd;
    _cleanup_close_ int fd = open_here(pfd, name, true);
    if (fd < 0)
        return fd == -ENOENT ? 0 : fd;
    for (size_t i = 0; i < n_subs; i++)
        if (unlinkat(fd, subs[i], AT_REMOVEDIR) < 0 && errno != ENOENT)
            return -errno;
    if (unlinkat(pfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

size_t fs_ancestors(int fd, struct fs_inode *ret, size_t max) {
    int cur = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    size_t n = 0;

    while (cur >= 0 && n < max) {
        struct stat st, ust;
        if (fstat(cur, &st) < 0)
            break;
        ret[n++] = (struct fs_inode){st.st_dev, st.st_ino};
        int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (up < 0 || fstat(up, &ust) < 0 || (ust.st_dev == st.st_dev && ust.st_ino == st.st_ino)) {
            if (up >= 0)
                close(up);
            break; /* "/" is its own parent */
        }
        close(cur);
        cur = up;
    }
    if (cur >= 0)
        close(cur);
    return n;
}

bool fs_inode_in(const struct fs_inode *v, size_t n, struct fs_inode id) {
    for (size_t i = 0; i < n; i++)
        if (v[i].dev == id.dev && v[i].ino == id.ino)
            return true;
    return false;
}

bool fs_is_one_of(const struct fs_inode *anc, size_t n, const char *dir, bool follow) {
    struct stat st;
    int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
    if (fd < 0)
        return false;
    bool hit = fstat(fd, &st) == 0 && fs_inode_in(anc, n, (struct fs_inode){st.st_dev, st.st_ino});
    close(fd);
    return hit;
}

int fs_open_parent_dir(const char *path) {
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
        return -ENAMETOOLONG;
    char *slash = strrchr(dir, '/');
    if (!slash)
        return -EINVAL;
    if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}
