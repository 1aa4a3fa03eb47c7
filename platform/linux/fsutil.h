/* File system helpers for per-launch directories. 0 or -errno; ret_* set only
 * on success; no logging. */
#ifndef LYH_FSUTIL_H
#define LYH_FSUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <stdint.h>
#include <sys/types.h>

/* Create NAME in the directory parent_fd as a fresh directory, root's with
 * the group gid and mode 0711, with the subdirectories subs[0..n_subs)
 * (0700, uid:gid) inside it: the user may use those, not change NAME itself
 * nor open it for reading. Fails with -EEXIST if anything is already there
 * (never reuses what someone else made). The parent is expected to be root's
 * alone (fs_open_own_dir): a mkdir takes the parent's lock, which a user
 * could otherwise hold (fs_remove_tree_as). The subdirectories
 * are made through the new directory's fd while it is still root's, so the
 * user cannot swap it for something else in between, nor hold its lock. */
int fs_make_private_dir(int parent_fd, const char *name, uid_t uid, gid_t gid,
                        const char *const *subs, size_t n_subs);

/* Open parent/name, a directory of root's, making it when missing, with the
 * permission bits mode (set when they differ): an O_PATH fd in *ret_fd. Never
 * follows a symlink nor enters a mount point. -EPERM when it belongs to
 * someone else (made before root could in a world-writable parent: not to be
 * trusted), -ENOTDIR when it is not a directory or a symlink. */
int fs_open_own_dir(const char *parent, const char *name, mode_t mode, int *ret_fd);

/* Close every fd from first up that /proc/self/fd lists (what close_range
 * does, for kernels before 5.9). 0, or -1 with errno when /proc cannot be
 * read (nothing closed then). */
int fs_close_fds_from(int first);

/* Remove a per-launch tmpdir path (what fs_make_private_dir made) in a child
 * process, which closes every inherited fd first. As root it removes path by
 * name when path holds nothing but its empty subdirectories subs[0..n_subs)
 * (fs_remove_bare_dir). Otherwise a child of its own drops to uid:gid (no
 * supplementary groups) and removes everything below path without following
 * symlinks, so root never walks a tree a user controls; then root removes the
 * empty directories by name again. uid 0 makes no such child (path is left).
 *
 * Why a process, even for an rmdir: an rmdir takes the lock of the
 * directory and of its parent, and a user can hold the lock of a directory
 * they can read, shared, for as long as they like (a getdents64 on it into a
 * buffer mapped from a FUSE file whose server does not answer the page
 * fault). Whoever removes must be free to wait; lyhd's loop is not. That
 * child may wait, and so may the user's half, which the user can also signal
 * or stop (a stopped one is killed at once: FS_RM_STOPPED): the caller must
 * bound the wait (and SIGKILL it, through the pidfd, when over: the user's
 * half dies with it). Returns the child's pid and a
 * pidfd (CLOEXEC) to wait on; its exit status is an FS_RM_* below. */
#define FS_RM_MAX_SUBS 8 /* n_subs at most */
enum {
    FS_RM_GONE = 0,    /* path is gone (or was not there) */
    FS_RM_LEFT = 1,    /* something in it could not be removed */
    FS_RM_FAILED = 2,  /* the child could not set itself up: nothing tried */
    FS_RM_MOUNTED = 3, /* a file system is mounted on path: left as it is */
    FS_RM_STOPPED = 4, /* the user's half was stopped (by its user): killed, the rest left */
};
int fs_remove_tree_as(const char *path, const char *const *subs, size_t n_subs, uid_t uid,
                      gid_t gid, pid_t *ret_pid, int *ret_pidfd);
/* What that child does, for a process that forked it another way (lyhd's
 * spawner): remove path, then _exit with an FS_RM_* status. */
_Noreturn void fs_remove_tree_child(const char *path, const char *const *subs, size_t n_subs,
                                    uid_t uid, gid_t gid);

/* The calling thread's file-system identity, for deciding a path as a user
 * would: fsuid, fsgid and the supplementary groups. */
#define FS_IDENT_MAX_GROUPS 80
struct fs_ident {
    uid_t fsuid;
    gid_t fsgid;
    gid_t groups[FS_IDENT_MAX_GROUPS];
    size_t n_groups;
    uint32_t cap_eff[2]; /* the effective capabilities, as capget gives them */
};

/* Make the calling THREAD resolve paths as uid:gid with groups (raw setgroups,
 * setfsgid, setfsuid: other threads keep theirs). A non-zero fsuid also drops
 * the file-system capabilities (DAC override, DAC read-search, fowner, ...)
 * from the effective set, so permission checks are exactly the user's. The
 * previous identity goes to *saved. Only path lookups and opens belong in
 * between: nothing that writes lyhd's own files. -E2BIG for too many groups. */
int fs_ident_enter(uid_t uid, gid_t gid, const gid_t *groups, size_t n_groups,
                   struct fs_ident *saved);
/* Back to *saved (fsuid 0 raises the file-system capabilities again, from
 * the permitted set: the effective set must then be what it was, or this
 * fails). A failure here leaves the thread with an identity other than the
 * one it had: the caller must treat it as fatal. */
int fs_ident_leave(const struct fs_ident *saved);

/* ---- deciding on inodes, never on path strings ---- */

/* A file's identity. */
struct fs_inode {
    dev_t dev;
    ino_t ino;
};

/* The directory open as fd and its ancestors up to "/" (walked with "..",
 * O_PATH), fd's own first, at most max of them. 0 when fd cannot be read. */
size_t fs_ancestors(int fd, struct fs_inode *ret, size_t max);

bool fs_inode_in(const struct fs_inode *v, size_t n, struct fs_inode id);

/* Is the directory dir (opened following symlinks or not) one of anc[0..n)?
 * With anc from fs_ancestors: is the walked directory at or below dir. A dir
 * that cannot be opened is not. */
bool fs_is_one_of(const struct fs_inode *anc, size_t n, const char *dir, bool follow);

/* O_PATH fd of the directory path is in (path itself dropped: "/a/b" gives
 * "/a", "/a" gives "/"). -errno. */
int fs_open_parent_dir(const char *path);

/* Remove the directory path when it holds nothing but the empty
 * subdirectories subs[0..n_subs) (what fs_make_private_dir made): each by
 * name, then path itself, as the caller (root), without a walk. Safe on a
 * directory a user controls: rmdir follows no symlink and removes nothing but
 * an empty directory, and path is opened without crossing a mount point
 * (RESOLVE_NO_XDEV: a file system mounted over it, a FUSE one say, is never
 * asked anything) nor following a symlink. 0: gone (or not there). Otherwise
 * -errno (-ENOTEMPTY: something else is in it; -EXDEV, -ENOTDIR,
 * -ENOSYS: not a plain directory here, or no openat2) and path is left with
 * what could not go, for fs_remove_tree_as. It may wait on a lock a user
 * holds (above): call it only where waiting is allowed. */
int fs_remove_bare_dir(const char *path, const char *const *subs, size_t n_subs);

/* fstat of dirfd/name as it is in dirfd's file system: no symlink followed,
 * no mount point crossed (openat2 O_PATH, RESOLVE_NO_XDEV), so a file system
 * a user mounted there (FUSE) is never asked anything. A symlink is stat'ed
 * itself (as lstat would); -EXDEV for a mount point. Without openat2 (before
 * Linux 5.6, so no Landlock and no sessions either) an fstatat. */
int fs_stat_here(int dirfd, const char *name, struct stat *ret);

#endif
