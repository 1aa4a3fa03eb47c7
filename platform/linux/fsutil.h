/* File system helpers for per-launch directories. 0 or -errno; ret_* set only
 * on success; no logging. */
#ifndef LYH_FSUTIL_H
#define LYH_FSUTIL_H

#include <stddef.h>
#include <sys/types.h>

/* Create DIR/NAME as a fresh directory (mode 0700) owned by uid:gid. Fails
 * with -EEXIST if anything is already there (never reuses what someone else
 * made). The parent is expected to be a sticky world-writable dir like /tmp. */
int fs_make_private_dir(const char *parent, const char *name, uid_t uid, gid_t gid);

/* Remove a directory tree with the privileges of uid:gid only: a child process
 * drops to that user (no supplementary groups) and removes the tree without
 * following symlinks, so root never walks a tree a user controls. Returns the
 * child's pid and a pidfd (CLOEXEC) to wait on; the exit status is 0 when the
 * tree is gone. */
int fs_remove_tree_as(const char *path, uid_t uid, gid_t gid, pid_t *ret_pid, int *ret_pidfd);

#endif
