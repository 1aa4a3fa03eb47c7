/* Session cgroups (cgroup v2): one per session, under a subtree of the
 * daemon's own cgroup, wherever the cgroup2 hierarchy is mounted.
 *
 * The egress guard selects a session's chain by the cgroup id of the socket's
 * creator (nft `socket cgroupv2 level L`), so every process of the session
 * must live in (or below) the session cgroup, and the cgroup is also how the
 * daemon kills whatever a session leaves behind.
 *
 * Contract: 0 or -errno; ret_* set only on success; no logging. Blocking: plain
 * filesystem calls on cgroupfs (fast, never waits on other processes), except
 * cg_kill which polls briefly when cgroup.kill is missing. */
#ifndef LYH_CGROUP_H
#define LYH_CGROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct cg_root {
    char mount[PATH_MAX];  /* where cgroup2 is mounted, e.g. /sys/fs/cgroup */
    char base[PATH_MAX];   /* the sessions' parent, relative to the mount, e.g. /lyh */
    int base_fd;           /* O_PATH|O_DIRECTORY fd of the base; owned */
    uint64_t base_id;      /* the base's cgroup id (its inode number) */
    unsigned session_level;/* depth of a session cgroup below the root (for nft) */
    bool has_kill;         /* cgroup.kill exists (Linux >= 5.14) */
};

/* Find the cgroup2 mount (from /proc/self/mountinfo) and our own cgroup (from
 * /proc/self/cgroup, "0::PATH"), create the base "<own>/<subtree>" if missing
 * (0755, root-owned) and open it. -ENOENT: no cgroup2 hierarchy (the caller
 * falls back to per-uid scoping). */
int cg_open(const char *subtree, struct cg_root *ret);
void cg_close(struct cg_root *r); /* accepts a zeroed root */
/* The base was removed under us (cg_create answers -ENOENT: someone rmdir-ed
 * the empty subtree): create it again at the same path (same session level)
 * and reopen it. On failure r is unchanged. */
int cg_reopen_base(struct cg_root *r);
/* Remove the base itself if it is empty (no session cgroups). 0 if removed or
 * gone, -ENOTEMPTY/-EBUSY otherwise. */
int cg_remove_base(struct cg_root *r);

/* Create the session cgroup NAME (a single path component) and return its id
 * (the cgroup directory's inode number, which is what the kernel reports as
 * the cgroup id), an O_PATH fd of its directory (for clone3's
 * CLONE_INTO_CGROUP) and an fd of its cgroup.procs opened for writing (for a
 * child forked elsewhere to write "0" into before exec), both CLOEXEC.
 * -EEXIST if it exists. */
int cg_create(struct cg_root *r, const char *name, uint64_t *ret_id, int *ret_dir_fd,
              int *ret_procs_fd);
/* Id of an existing session cgroup; -ENOENT when absent. */
int cg_id(struct cg_root *r, const char *name, uint64_t *ret_id);
/* Does the cgroup (or a descendant) still hold processes? */
int cg_populated(struct cg_root *r, const char *name, bool *ret);
/* Kill every process in the cgroup (cgroup.kill, else SIGKILL each pid in
 * cgroup.procs until empty, bounded). Missing cgroup = nothing to kill = 0. */
int cg_kill(struct cg_root *r, const char *name);
/* Remove an empty session cgroup; -EBUSY while populated, 0 if already gone. */
int cg_remove(struct cg_root *r, const char *name);
/* Call fn for every session cgroup under the base. fn returning non-zero
 * stops the walk and that value is returned. */
int cg_foreach(struct cg_root *r, int (*fn)(const char *name, void *userdata), void *userdata);

/* Child side, async-signal-safe: move the calling process into the cgroup whose
 * cgroup.procs is open as procs_fd. */
int cg_enter(int procs_fd);

#endif
