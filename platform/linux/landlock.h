/* Landlock for a launch: probe the kernel's ABI, turn a path policy into a
 * ruleset fd before fork, and enforce it in the child.
 *
 * Split across fork: ll_probe() once at daemon start; ll_policy_default() and
 * ll_ruleset_build() per launch in the daemon (they allocate, open files and
 * may block on the filesystem); ll_restrict_self() in the forked child after
 * the credential drop and PR_SET_NO_NEW_PRIVS (syscalls only).
 *
 * Return convention: 0 or -errno. ret_* out-parameters are written only on
 * success. Nothing here logs. `why`/`whylen` receive one human sentence
 * naming the offending path (may be NULL/0); they are written on failure
 * only and are always NUL-terminated. */
#ifndef LYH_LANDLOCK_H
#define LYH_LANDLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The highest Landlock ABI whose rights this file knows. A newer kernel is
 * enforced at this ABI (and the report says so). */
#define LL_ABI_MAX 7

/* How a path may be used by the agent. */
enum ll_access {
    LL_RW, /* read, write, create, remove, rename, execute (not mknod) */
    LL_RX, /* read-only, with execute */
};

enum ll_path_flags {
    LL_OPTIONAL = 1u << 0, /* missing or not usable: skipped and reported, not an error */
    LL_NOEXEC = 1u << 1,   /* never grant execute (used for /proc) */
};

struct ll_path {
    char *path;     /* owned; absolute, no "." or ".." component */
    unsigned flags; /* enum ll_path_flags */
};

struct ll_policy {
    struct ll_path *rw; /* owned, n_rw entries */
    size_t n_rw;
    struct ll_path *rx; /* owned, n_rx entries */
    size_t n_rx;
};

/* Append a copy of `path` to the list for `a`. The path is checked only when
 * the ruleset is built. -EINVAL for a NULL/empty path or unknown access,
 * -ENOMEM. On failure p is unchanged. */
int ll_policy_add(struct ll_policy *p, enum ll_access a, const char *path, unsigned flags);

/* Free what the policy owns and zero it. Accepts NULL, a zeroed and a
 * half-built policy. */
void ll_policy_free(struct ll_policy *p);

/* Inputs of the default policy. All paths absolute, borrowed. */
struct ll_defaults {
    const char *home;   /* the caller's home directory */
    const char *cwd;    /* the agent's working directory */
    const char *tmpdir; /* the per-launch tmpdir; NULL: granted by fd (ll_ruleset_add_dir) */
    bool narrow_home;   /* only the agent state entries under home, not all of it */
};

/* The default policy of a launch (DESIGN.md "Sandbox (Linux)"):
 *   rw: home (or, narrow: home/{.claude,.claude.json,.codex,.gemini,.config,
 *       .cache,.local,.npm}, each optional), cwd, tmpdir, /tmp, /var/tmp,
 *       /dev/shm, /dev/{null,zero,full,random,urandom,tty} (/dev/pts and
 *       /dev/ptmx only of the session's own devpts: ll_add_devpts_child);
 *   rx: /usr, /bin, /sbin, /lib, /lib64, /etc, /opt; /proc read-only without
 *       execute; /etc/resolv.conf's target and /run/systemd/resolve,
 *       /run/resolvconf read-only without execute.
 * home, cwd, tmpdir, /tmp, /usr, /etc and /dev/null are required; the rest is
 * optional. Add the policy's extra paths with ll_policy_add() afterwards.
 * -EINVAL when home or cwd is missing or tmpdir empty, -ENAMETOOLONG, -ENOMEM. */
int ll_policy_default(const struct ll_defaults *d, struct ll_policy *ret);

/* An optional path that got no rule, and why. */
struct ll_skipped {
    char *path; /* owned */
    int err;    /* -errno: -ENOENT missing, -ELOOP symlink not made by root, ... */
};

/* What ll_ruleset_build() enforced. */
struct ll_report {
    int abi;             /* ABI whose rights are enforced: min(kernel ABI, LL_ABI_MAX) */
    uint64_t handled_fs; /* LANDLOCK_ACCESS_FS_* handled (denied unless a rule allows) */
    uint64_t scoped;     /* LANDLOCK_SCOPE_* (0 below ABI 6) */
    size_t n_rules;      /* rules added */
    struct ll_skipped *skipped; /* owned, n_skipped entries */
    size_t n_skipped;
};

/* Free what the report owns and zero it. Accepts NULL and a zeroed report. */
void ll_report_free(struct ll_report *r);

/* The kernel's highest Landlock ABI (>= 1). -EOPNOTSUPP when Landlock is not
 * built in or not enabled at boot: the launch must then fail. */
int ll_probe(int *ret_abi);

/* Build a ruleset for policy p at ABI abi (from ll_probe(); values above
 * LL_ABI_MAX are enforced at LL_ABI_MAX). Every path is resolved one
 * component at a time by fd: a symlink is followed only when root made it in
 * a directory only root can change (e.g. /lib64 -> usr/lib64); any other
 * symlink, a "." or ".." component or a relative path is refused. A required
 * path that is missing or refused fails the build, naming it in why; an
 * optional one is recorded in ret->skipped. Non-directories get file rights
 * only, device files no execute.
 * On success *ret_fd is a CLOEXEC ruleset fd owned by the caller (rules may
 * still be added to it until restrict) and *ret is filled (free it with
 * ll_report_free()). Blocks on the filesystem. -EINVAL bad abi or path,
 * -ENOENT/-ENOTDIR/-EACCES/-ELOOP for a required path, -ENOMEM, or the
 * kernel's error. */
/* The file-system rights a ruleset for this ABI handles (what
 * ll_ruleset_build reports as handled_fs), known before it is built. */
uint64_t ll_handled_fs(int abi);

int ll_ruleset_build(const struct ll_policy *p, int abi, int *ret_fd, struct ll_report *ret,
                     char *why, size_t whylen);

/* Allow everything but what is never granted (mknod) beneath the directory
 * dirfd (an O_PATH fd is enough), to a ruleset ll_ruleset_build made;
 * handled = ll_report.handled_fs. For a directory the caller opened itself
 * where the request's identity could not (lyhd's own, root's alone). */
int ll_ruleset_add_dir(int ruleset_fd, uint64_t handled, int dirfd);

/* Child side, before ll_restrict_self: allow the session's private devpts
 * instance (/dev/pts and /dev/ptmx as mounted in its own mount namespace).
 * handled = ll_report.handled_fs. Syscalls only. */
int ll_add_devpts_child(int ruleset_fd, uint64_t handled);

/* Enforce ruleset_fd on the calling thread and its future children. For the
 * forked child: PR_SET_NO_NEW_PRIVS must already be set (-EPERM otherwise,
 * checked here and not left to the kernel, which would also accept
 * CAP_SYS_ADMIN). Syscalls only: async-signal-safe, no allocation. The fd
 * stays open (it is CLOEXEC). -EBADF, -EINVAL, or the kernel's error. */
int ll_restrict_self(int ruleset_fd);

#endif
