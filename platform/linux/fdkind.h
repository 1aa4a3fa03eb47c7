/* What kind of file a descriptor a client passed is, without waiting on
 * anyone: the daemon takes only the kinds Run needs, and closes every other
 * one where a close cannot stall its event loop.
 *
 * Contract: 0 or -errno; ret set only on success; no logging. Never blocks on
 * another process: attributes come from statx with AT_STATX_DONT_SYNC (cached,
 * so a FUSE or NFS server is not asked) and the mount from /proc/self/mountinfo. */
#ifndef LYH_FDKIND_H
#define LYH_FDKIND_H

#include <stdbool.h>
#include <stddef.h>

enum fdk_kind {
    FDK_PIPE = 1,  /* a pipe or FIFO */
    FDK_UNIX,      /* an AF_UNIX socket */
    FDK_TTY,       /* a terminal: a pty slave, a virtual console, /dev/tty, /dev/console */
    FDK_NULLDEV,   /* /dev/null, zero, full, random, urandom */
    FDK_FILE,      /* a regular file on a mount lyhd can see that is not FUSE */
    FDK_REFUSED,   /* anything else: what says which */
};

struct fdk_info {
    enum fdk_kind kind;
    /* A close of it may wait on someone else: a socket (SO_LINGER, or fds in
     * flight in its queue whose last reference would go), a file (flush to
     * a remote or FUSE server), anything unknown. Pipes and the terminal and
     * null devices above never wait. */
    bool close_may_block;
    char what[96]; /* "a pipe", "an AF_INET stream socket", "a directory", ... */
};

int fdk_classify(int fd, struct fdk_info *ret);

/* The file system type of the mount with this id in /proc/self/mountinfo
 * ("ext4", "fuse.sshfs"), into buf. -ENOENT: not a mount of this namespace. */
int fdk_mount_fstype(unsigned long long mnt_id, char *buf, size_t len);

#endif
