/* Session cgroups under the daemon's own cgroup subtree.
 *
 * Owns: the base directory fd and the session cgroups below it. Never touches
 * cgroups outside the base, never enables controllers (we only need the
 * hierarchy for identity and for killing), and never follows a symlink: all
 * access below the base is relative to the base fd with O_NOFOLLOW.
 *
 * Why under our own cgroup: under systemd with Delegate=yes that subtree is
 * ours to manage; without systemd (tests, containers) it is wherever lyhd was
 * started. Either way we do not assume /sys/fs/cgroup: the mount point comes
 * from mountinfo (this matters on hybrid hosts where cgroup2 sits at
 * /sys/fs/cgroup/unified). */
#include "platform/linux/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/macros.h"

static int valid_name(const char *name) {
    if (!name[0] || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
        strlen(name) > 200)
        return -EINVAL;
    return 0;
}

/* The first cgroup2 mount in mountinfo (field 9 is the fs type after " - "). */
static int find_mount(char *out, size_t outlen) {
    _cleanup_(fclosep_) FILE *f = NULL;
    char line[4096];

    f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        char *sep = strstr(line, " - ");
        char mnt[PATH_MAX];
        if (!sep || strncmp(sep + 3, "cgroup2 ", 8) != 0)
            continue;
        /* fields: id parent major:minor root mountpoint ... */
        if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
            continue;
        /* mountinfo escapes spaces as \040; a cgroup mount with one is not ours to guess. */
        if (strchr(mnt, '\\'))
            continue;
        if (snprintf(out, outlen, "%s", mnt) >= (int)outlen)
            return -ENAMETOOLONG;
        return 0;
    }
    return -ENOENT;
}

static int own_cgroup(char *out, size_t outlen) {
    _cleanup_(fclosep_) FILE *f = NULL;
    char line[4096];

    f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "0::", 3) != 0)
            continue;
        line[strcspn(line, "\n")] = '\0';
        if (snprintf(out, outlen, "%s", line + 3) >= (int)outlen)
            return -ENAMETOOLONG;
        return 0;
    }
    return -ENOENT;
}

/* The base's and the sessions' directories: root's alone. Another user could
 * otherwise hold such a directory's lock for as long as they like and so make
 * lyhd's mkdir or rmdir in it wait, the whole loop with it (fsutil.h
 * fs_remove_tree_as): by reading it, or, with search permission only, by a
 * rename out of it into a directory whose lock they hold (rename locks both
 * parents before it checks any permission). */
#define CG_DIR_MODE 0700

static int narrow_session_dir(const char *name, void *userdata);

/* Create the base (r->mount + r->base) if missing and open it into
 * r->base_fd; it must be root's. */
static int open_base(struct cg_root *r) {
    char path[PATH_MAX * 2 + 2];
    struct stat st;
    int fd;

    if (snprintf(path, sizeof(path), "%s%s", r->mount, r->base) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    /* open first: an mkdir takes the parent's lock even when the base
     * exists, and lyhd's own cgroup directory is readable by all */
    fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        if (mkdir(path, CG_DIR_MODE) < 0 && errno != EEXIST)
            return -errno;
        fd = open(path, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || st.st_uid != 0) {
        close(fd);
        return -EPERM; /* a base someone else created is not ours to trust */
    }
    r->base_fd = fd;
    r->base_id = (uint64_t)st.st_ino;
    r->has_kill = faccessat(fd, "cgroup.kill", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
    if ((st.st_mode & 07777) != CG_DIR_MODE) {
        /* an older lyhd's base, 0755, and its sessions': those first, so
         * that a start cut short here does it all again (through the fd) */
        int k = cg_foreach(r, narrow_session_dir, r);
        if (k == 0) {
            int rfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            k = rfd < 0 || fchmod(rfd, CG_DIR_MODE) < 0 ? -errno : 0;
            if (rfd >= 0)
                close(rfd);
        }
        if (k < 0) {
            close(fd);
            r->base_fd = -1;
            return k;
        }
    }
    return 0;
}

int cg_open(const char *subtree, struct cg_root *ret) {
    struct cg_root r = {.base_fd = -1};
    char own[PATH_MAX];
    int k;

    if (valid_name(subtree) < 0)
        return -EINVAL;
    k = find_mount(r.mount, sizeof(r.mount));
    if (k < 0)
        return k;
    k = own_cgroup(own, sizeof(own));
    if (k < 0)
        return k;
    /* "/" becomes "" so the base reads "/lyh", not "//lyh". */
    if (snprintf(r.base, sizeof(r.base), "%s/%s", strcmp(own, "/") == 0 ? "" : own, subtree) >=
        (int)sizeof(r.base))
        return -ENAMETOOLONG;
    k = open_base(&r);
    if (k < 0)
        return k;
    /* Depth of <base>/<session>: one per component of the base, plus one. */
    r.session_level = 1;
    for (const char *p = r.base; *p; p++)
        if (*p == '/')
            r.session_level++;
    *ret = r;
    return 0;
}

int cg_reopen_base(struct cg_root *r) {
    struct cg_root n = *r;
    int k;

    n.base_fd = -1;
    k = open_base(&n);
    if (k < 0)
        return k;
    cg_close(r);
    *r = n;
    return 0;
}

int cg_remove_base(struct cg_root *r) {
    char path[PATH_MAX * 2 + 2];

    if (snprintf(path, sizeof(path), "%s%s", r->mount, r->base) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    if (rmdir(path) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

void cg_close(struct cg_root *r) {
    if (r->base_fd > 0)
        close(r->base_fd);
    r->base_fd = -1;
}

static int session_dir(struct cg_root *r, const char *name, int *ret_fd) {
    int fd;

    if (valid_name(name) < 0)
        return -EINVAL;
    fd = openat(r->base_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    *ret_fd = fd;
    return 0;
}

/* Open a control file of a session cgroup (relative to its O_PATH dir fd). */
static int open_control(int dirfd, const char *file, int flags) {
    int fd = openat(dirfd, file, flags | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int cg_id(struct cg_root *r, const char *name, uint64_t *ret_id) {
    _cleanup_close_ int dfd = -1;
    struct stat st;
    int k = session_dir(r, name, &dfd);

    if (k < 0)
        return k;
    if (fstat(dfd, &st) < 0)
        return -errno;
    *ret_id = (uint64_t)st.st_ino;
    return 0;
}

int cg_create(struct cg_root *r, const char *name, uint64_t *ret_id, int *ret_dir_fd,
              int *ret_procs_fd) {
    _cleanup_close_ int dfd = -1;
    struct stat st;
    int k, pfd;

    if (valid_name(name) < 0)
        return -EINVAL;
    if (mkdirat(r->base_fd, name, CG_DIR_MODE) < 0)
        return -errno;
    k = session_dir(r, name, &dfd);
    if (k < 0)
        goto fail;
    if (fstat(dfd, &st) < 0) {
        k = -errno;
        goto fail;
    }
    pfd = open_control(dfd, "cgroup.procs", O_WRONLY);
    if (pfd < 0) {
        k = pfd;
        goto fail;
    }
    *ret_id = (uint64_t)st.st_ino;
    *ret_dir_fd = TAKE_FD(dfd);
    *ret_procs_fd = pfd;
    return 0;
fail:
    (void)unlinkat(r->base_fd, name, AT_REMOVEDIR);
    return k;
}

static int read_small(int dirfd, const char *file, char *buf, size_t len) {
    _cleanup_close_ int fd = open_control(dirfd, file, O_RDONLY);
    ssize_t n;

    if (fd < 0)
        return fd;
    n = read(fd, buf, len - 1);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return (int)n;
}

int cg_populated(struct cg_root *r, const char *name, bool *ret) {
    _cleanup_close_ int dfd = -1;
    char buf[512];
    const char *p;
    int k = session_dir(r, name, &dfd);

    if (k < 0)
        return k;
    k = read_small(dfd, "cgroup.events", buf, sizeof(buf));
    if (k < 0)
        return k;
    p = strstr(buf, "populated ");
    if (!p)
        return -EBADMSG;
    *ret = p[10] == '1';
    return 0;
}

int cg_kill(struct cg_root *r, const char *name) {
    _cleanup_close_ int dfd = -1;
    int k = session_dir(r, name, &dfd);

    if (k == -ENOENT)
        return 0;
    if (k < 0)
        return k;
    if (r->has_kill) {
        _cleanup_close_ int fd = open_control(dfd, "cgroup.kill", O_WRONLY);
        if (fd < 0)
            return fd;
        if (write(fd, "1", 1) != 1)
            return -errno;
        return 0;
    }
    /* Older kernels: SIGKILL what cgroup.procs lists until it is empty. A
     * process forking in a loop could race one pass, so repeat, bounded. */
    for (int pass = 0; pass < 100; pass++) {
        char buf[8192];
        bool any = false;
        k = read_small(dfd, "cgroup.procs", buf, sizeof(buf));
        if (k < 0)
            return k;
        for (char *tok = strtok(buf, "\n"); tok; tok = strtok(NULL, "\n")) {
            long pid = strtol(tok, NULL, 10);
            if (pid > 1 && kill((pid_t)pid, SIGKILL) == 0)
                any = true;
        }
        if (!any)
            return 0;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    return -EBUSY;
}

int cg_remove(struct cg_root *r, const char *name) {
    if (valid_name(name) < 0)
        return -EINVAL;
    if (unlinkat(r->base_fd, name, AT_REMOVEDIR) < 0)
        return errno == ENOENT ? 0 : -errno;
    return 0;
}

int cg_foreach(struct cg_root *r, int (*fn)(const char *name, void *userdata), void *userdata) {
    int fd = openat(r->base_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d;
    struct dirent *de;
    int k = 0;

    if (fd < 0)
        return -errno;
    d = fdopendir(fd);
    if (!d) {
        k = -errno;
        close(fd);
        return k;
    }
    while ((de = readdir(d))) {
        if (de->d_type != DT_DIR || de->d_name[0] == '.')
            continue;
        k = fn(de->d_name, userdata);
        if (k != 0)
            break;
    }
    closedir(d);
    return k;
}

static int narrow_session_dir(const char *name, void *userdata) {
    const struct cg_root *r = userdata;
    return fchmodat(r->base_fd, name, CG_DIR_MODE, 0) < 0 && errno != ENOENT ? -errno : 0;
}

int cg_enter(int procs_fd) {
    if (write(procs_fd, "0", 1) != 1)
        return -errno;
    return 0;
}
