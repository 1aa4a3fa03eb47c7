/* Classifying client file descriptors (see fdkind.h).
 *
 * Why this exists: a client hands lyhd fds with SCM_RIGHTS, and lyhd closes
 * the ones it does not keep. A close can block: a TCP socket with SO_LINGER
 * and a full send queue waits up to the linger time, a file on FUSE waits for
 * the FUSE server's answer to FLUSH, a socket whose queue holds in-flight fds
 * takes their last references with it. Run needs terminals, pipes, AF_UNIX
 * sockets, regular files and the null-like devices; everything else is
 * refused, and whatever may block is closed off the event loop.
 *
 * Must never: ask a file system server anything (statx with
 * AT_STATX_DONT_SYNC, no fstatfs: FUSE answers that from user space). */
#include "platform/linux/fdkind.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "common/macros.h"

int fdk_mount_fstype(unsigned long long mnt_id, char *buf, size_t len) {
    _cleanup_(fclosep_) FILE *f = fopen("/proc/self/mountinfo", "re");
    _cleanup_free_ char *line = NULL;
    size_t cap = 0;

    if (!f)
        return -errno;
    /* Whole lines, however long (a mount point may be long and escaped):
     * a piece of one must never be read as a line of its own. */
    while (getline(&line, &cap, f) >= 0) {
        unsigned long long id;
        const char *sep;
        char type[128];
        if (sscanf(line, "%llu", &id) != 1 || id != mnt_id)
            continue;
        sep = strstr(line, " - ");
        if (!sep || sscanf(sep + 3, "%127s", type) != 1)
            return -EBADMSG;
        if (snprintf(buf, len, "%s", type) >= (int)len)
            return -ENAMETOOLONG;
        return 0;
    }
    return -ENOENT;
}

static void what(struct fdk_info *i, enum fdk_kind kind, bool may_block, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void what(struct fdk_info *i, enum fdk_kind kind, bool may_block, const char *fmt, ...) {
    va_list ap;

    i->kind = kind;
    i->close_may_block = may_block;
    va_start(ap, fmt);
    vsnprintf(i->what, sizeof(i->what), fmt, ap);
    va_end(ap);
}

static const char *family_name(int family) {
    switch (family) {
    case AF_INET: return "AF_INET";
    case AF_INET6: return "AF_INET6";
    case AF_NETLINK: return "AF_NETLINK";
    case AF_PACKET: return "AF_PACKET";
    case AF_VSOCK: return "AF_VSOCK";
    default: return NULL;
    }
}

static void classify_socket(int fd, struct fdk_info *i) {
    int family = -1, type = -1;
    socklen_t len = sizeof(family);

    (void)getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &len);
    len = sizeof(type);
    (void)getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len);
    const char *t = type == SOCK_STREAM ? "stream" : type == SOCK_DGRAM ? "datagram"
                  : type == SOCK_SEQPACKET ? "seqpacket" : type == SOCK_RAW ? "raw" : "other";
    if (family == AF_UNIX) {
        what(i, FDK_UNIX, true, "an AF_UNIX %s socket", t);
        return;
    }
    const char *f = family_name(family);
    if (f)
        what(i, FDK_REFUSED, true, "an %s %s socket", f, t);
    else
        what(i, FDK_REFUSED, true, "a socket of address family %d", family);
}

/* Character devices that are terminals or null-like: closing them never
 * waits (a serial line's close may wait to drain: those are refused). */
static void classify_chr(unsigned maj, unsigned min, struct fdk_info *i) {
    if (maj >= 136 && maj <= 143) {
        what(i, FDK_TTY, false, "a pseudo-terminal");
        return;
    }
    if (maj == 4 && min < 64) {
        what(i, FDK_TTY, false, "a virtual console");
        return;
    }
    if (maj == 5 && min <= 1) {
        what(i, FDK_TTY, false, min == 0 ? "/dev/tty" : "/dev/console");
        return;
    }
    if (maj == 1 && (min == 3 || min == 5 || min == 7 || min == 8 || min == 9)) {
        what(i, FDK_NULLDEV, false, "a null-like device");
        return;
    }
    what(i, FDK_REFUSED, true, "character device %u:%u", maj, min);
}

int fdk_classify(int fd, struct fdk_info *ret) {
    struct statx sx;
    struct fdk_info i = {0};

    if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_MNT_ID, &sx) < 0)
        return -errno;
    switch (sx.stx_mode & S_IFMT) {
    case S_IFIFO:
        what(&i, FDK_PIPE, false, "a pipe");
        break;
    case S_IFSOCK:
        classify_socket(fd, &i);
        break;
    case S_IFCHR:
        classify_chr(sx.stx_rdev_major, sx.stx_rdev_minor, &i);
        break;
    case S_IFREG: {
        char fstype[128];
        int r = (sx.stx_mask & STATX_MNT_ID) ? fdk_mount_fstype(sx.stx_mnt_id, fstype, sizeof(fstype))
                                             : -ENOSYS;
        if (r == -ENOENT || r == -ENOSYS)
            /* A mount of another namespace (a user's own FUSE mount in a
             * user namespace would be one) or an internal one: unknown. */
            what(&i, FDK_REFUSED, true, "a file on a file system lyhd cannot see");
        else if (r < 0)
            return r;
        else if (strncmp(fstype, "fuse", 4) == 0)
            what(&i, FDK_REFUSED, true, "a file on a FUSE file system (%s)", fstype);
        else
            what(&i, FDK_FILE, true, "a regular file");
        break;
    }
    case S_IFDIR:
        what(&i, FDK_REFUSED, true, "a directory");
        break;
    case S_IFBLK:
        what(&i, FDK_REFUSED, true, "block device %u:%u", sx.stx_rdev_major, sx.stx_rdev_minor);
        break;
    case S_IFLNK:
        what(&i, FDK_REFUSED, true, "a symbolic link");
        break;
    default:
        /* eventfd, epoll, signalfd, pidfd, ... (anonymous inodes) */
        what(&i, FDK_REFUSED, true, "a file of type %#o", sx.stx_mode & S_IFMT);
        break;
    }
    *ret = i;
    return 0;
}
