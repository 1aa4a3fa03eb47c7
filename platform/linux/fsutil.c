/* Per-launch directories: creation as root (fresh, then handed to the user),
 * removal as the user.
 *
 * Why removal runs as the user: the tree lives in a directory the agent could
 * write, so it may hold symlinks, bind-style tricks or a renamed parent. A root
 * process walking it could be steered into deleting elsewhere; a process with
 * the user's own uid can only delete what the user could delete anyway. */
#include "platform/linux/fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int fs_make_private_dir(const char *parent, const char *name, uid_t uid, gid_t gid) {
    int pfd, fd, k = 0;

    if (!name[0] || name[0] == '.' || strchr(name, '/'))
        return -EINVAL;
    pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
        return -errno;
    if (mkdirat(pfd, name, 0700) < 0) {
        k = -errno;
        close(pfd);
        return k;
    }
    fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchown(fd, uid, gid) < 0 || fchmod(fd, 0700) < 0) {
        k = -errno;
        if (fd >= 0)
            close(fd);
        unlinkat(pfd, name, AT_REMOVEDIR);
        close(pfd);
        return k;
    }
    close(fd);
    close(pfd);
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st;
    if (ftw->level == 0)
        return 0; /* the directory itself: the parent removes it */
    if (type == FTW_DP)
        return rmdir(path) < 0 && errno != ENOENT ? -1 : 0;
    return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
}

int fs_remove_tree_as(const char *path, uid_t uid, gid_t gid, pid_t *ret_pid, int *ret_pidfd) {
    pid_t pid;
    int pidfd;

    if (path[0] != '/')
        return -EINVAL;
    pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* The daemon is single-threaded, so libc (nftw allocates) is usable here. */
        if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
            _exit(2);
        if (uid != 0 && setresuid(0, 0, 0) == 0)
            _exit(2);
        /* FTW_PHYS: never follow symlinks; FTW_MOUNT: stay on this file system. */
        _exit(nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == 0 || errno == ENOENT ? 0
                                                                                              : 1);
    }
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        int k = -errno;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return k;
    }
    *ret_pid = pid;
    *ret_pidfd = pidfd;
    return 0;
}

int fs_remove_empty_dir(const char *path) {
    if (rmdir(path) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}
