/* The walk both databases make before trusting a directory: nobody but root
 * and us may change a directory on the way to it (state.db's state dir,
 * audit.db's directory). Owns no state; must never decide anything from a
 * path string (the walk goes by fds, "..", from the directory itself). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macros.h"
#include "storage/store_int.h"

#define DIRCHECK_MAX_ANCESTORS 256

/* For messages only: what an fd points at, never used to decide anything. */
static const char *fd_name(int fd, char *buf, size_t len) {
    char proc[64];
    ssize_t n;

    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    n = readlink(proc, buf, len - 1);
    if (n < 0)
        return "(an ancestor directory)";
    buf[n] = '\0';
    return buf;
}

/* Owned by root or euid, and not writable by group/other unless sticky (where
 * others cannot rename or remove our entries). */
int storage_check_ancestors(int dirfd, const char *label, const char *dir, const char *what,
                            char *err, size_t errlen) {
    _cleanup_close_ int cur = -1;
    struct stat cst;
    uid_t euid = geteuid();

    cur = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
    if (cur < 0 || fstat(cur, &cst) < 0) {
        int e = errno;
        snprintf(err, errlen, "%s '%s': %s", label, dir, strerror(e));
        return -e;
    }
    for (int depth = 0; depth < DIRCHECK_MAX_ANCESTORS; depth++) {
        _cleanup_close_ int parent = -1;
        struct stat pst;
        char name[PATH_MAX];

        parent = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (parent < 0 || fstat(parent, &pst) < 0) {
            int e = errno;
            snprintf(err, errlen, "%s '%s': parent directory: %s", label, dir, strerror(e));
            return -e;
        }
        if (pst.st_dev == cst.st_dev && pst.st_ino == cst.st_ino)
            return 0; /* ".." of "/" is "/" */
        if (pst.st_uid != 0 && pst.st_uid != euid) {
            snprintf(err, errlen,
                     "%s '%s' is below '%s', owned by uid %u, who could replace it; %s must "
                     "live where only root can write",
                     label, dir, fd_name(parent, name, sizeof name), (unsigned)pst.st_uid, what);
            return -EPERM;
        }
        if ((pst.st_mode & (S_IWGRP | S_IWOTH)) && !(pst.st_mode & S_ISVTX)) {
            snprintf(err, errlen,
                     "%s '%s' is below '%s' (mode %04o), which others can write without the "
                     "sticky bit; %s must live where only root can write",
                     label, dir, fd_name(parent, name, sizeof name),
                     (unsigned)(pst.st_mode & 07777), what);
            return -EPERM;
        }
        CLOSE_FD(cur);
        cur = TAKE_FD(parent);
        cst = pst;
    }
    snprintf(err, errlen, "%s '%s': more than %d directories deep", label, dir,
             DIRCHECK_MAX_ANCESTORS);
    return -ELOOP;
}

int storage_open_private_dir(const char *dir, bool create, const char *label, const char *what,
                             char *err, size_t errlen, int *ret_fd) {
    _cleanup_close_ int fd = -1;
    struct stat st;
    bool created = false;
    uid_t euid = geteuid();

    if (create) {
        if (mkdir(dir, 0700) == 0)
            created = true;
        else if (errno != EEXIST) {
            int e = errno;
            snprintf(err, errlen, "cannot create %s '%s': %s", label, dir, strerror(e));
            return -e;
        }
    }
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        struct stat lst;

        if ((e == ELOOP || e == ENOTDIR) && lstat(dir, &lst) == 0 && S_ISLNK(lst.st_mode)) {
            snprintf(err, errlen, "%s '%s' is a symlink; give the real directory", label, dir);
            return -EPERM;
        }
        snprintf(err, errlen, "cannot open %s '%s': %s", label, dir, strerror(e));
        return -e;
    }
    if (fstat(fd, &st) < 0) {
        int e = errno;
        snprintf(err, errlen, "%s '%s': fstat: %s", label, dir, strerror(e));
        return -e;
    }
    /* mkdir's mode went through the umask; make it exactly 0700. */
    if (created && (st.st_mode & 07777) != 0700) {
        if (fchmod(fd, 0700) < 0) {
            int e = errno;
            snprintf(err, errlen, "%s '%s': chmod 0700: %s", label, dir, strerror(e));
            return -e;
        }
        st.st_mode = (st.st_mode & ~07777u) | 0700;
    }
    if (st.st_uid != euid) {
        snprintf(err, errlen,
                 "%s '%s' is owned by uid %u, not %u; %s must live in a directory only lyhd "
                 "can write (chown it, or pick another dir)",
                 label, dir, (unsigned)st.st_uid, (unsigned)euid, what);
        return -EPERM;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(err, errlen,
                 "%s '%s' is group/world writable (mode %04o); %s must live in a directory "
                 "only lyhd can write (chmod 0700 it)",
                 label, dir, (unsigned)(st.st_mode & 07777), what);
        return -EPERM;
    }
    int r = storage_check_ancestors(fd, label, dir, what, err, errlen);
    if (r < 0)
        return r;
    *ret_fd = TAKE_FD(fd);
    return 0;
}
