/* Landlock: the filesystem half of the agent's confinement.
 *
 * Owns: the table of Landlock rights per ABI, the default path policy, the
 * resolution of policy paths to fds, and the ruleset fd until it is handed to
 * the caller. It never creates, changes or removes anything on the
 * filesystem (a missing optional path is skipped, never made), never follows
 * a symlink it cannot attribute to root, never logs, and restricts nothing in
 * the daemon itself: only ll_restrict_self(), called in the forked child,
 * enforces anything.
 *
 * Why this is safe:
 *  - Deny by default. Every right the enforced ABI knows is "handled", so
 *    anything not granted below is refused, including rights added by ABIs
 *    we enforce but grant nowhere (mknod of devices).
 *  - Rules are bound to inodes through fds we opened ourselves, one path
 *    component at a time with O_PATH|O_NOFOLLOW, never to path strings:
 *    there is no check-then-use window, and what the kernel enforces is
 *    exactly what we looked at.
 *  - Symlinks: a previous session's agent (or anything else running as the
 *    user) can plant a symlink in the user's own directories, e.g. replace
 *    a narrow-home entry ~/.cache with a link to ~ or ~/.ssh, to widen the
 *    next session. So a link is followed only when root owns it and it sits
 *    in a root-owned directory nobody else can write (or a sticky one, where
 *    nobody else can replace root's entry): such a link is the
 *    administrator's choice (/lib64 -> usr/lib64 on merged-/usr systems,
 *    /etc/resolv.conf -> ../run/systemd/resolve/stub-resolv.conf). Any other
 *    link refuses the path (required) or skips it (optional). Skipping a
 *    link loses nothing when its target is covered by another rule, which
 *    is the case for the merged-/usr links (Landlock checks the resolved
 *    path, so /lib64/ld-linux-x86-64.so.2 is allowed by the /usr rule), and
 *    fails closed otherwise. "." and ".." in a policy path are refused:
 *    a policy names canonical paths; ".." inside a root-made link target is
 *    walked physically, as the kernel would.
 *  - Landlock only ever narrows: a rule cannot give the agent more than its
 *    uid already has, so a wrong rule here can widen the sandbox up to the
 *    user's own rights, never beyond them.
 *  - Non-directories get file rights only (the kernel refuses directory
 *    rights on them), device nodes never execute, nothing may create device
 *    nodes.
 *
 * /proc: the whole of /proc is read-only (no write, no execute), rather than
 * only the agent's own /proc/<pid>. A rule on /proc/<pid> could only cover
 * the agent's first process (a rule is bound to an inode, and each child
 * process has its own /proc/<pid>), so every subprocess's /proc/self would
 * be refused and ordinary tools break (libuv's /proc/self/stat, mountinfo,
 * cgroup, /proc/cpuinfo, meminfo). Reading other processes' sensitive
 * entries is not what this rule grants: /proc/PID/{root,cwd,exe,fd,environ,
 * mem,maps,...} are gated by ptrace_may_access(), and Landlock (since ABI 1)
 * refuses ptrace access to any process outside the agent's own domain, even
 * one of the same uid (the user's shell, the lyh CLI) and even for root; DAC
 * and Yama add to that. So /proc/1/root and /proc/<daemon>/root stay
 * unreachable. What stays readable is what /proc shows any unprivileged
 * process: other processes' cmdline/stat/status (hidden where the admin
 * mounts /proc with hidepid=invisible) and system-wide tables such as
 * /proc/net of the host network namespace. No write means no
 * /proc/self/attr, oom_score_adj or /proc/sys changes.
 *
 * Network (ABI 4): Landlock's TCP bind/connect rules are deliberately not
 * handled. They match only TCP port numbers, not destinations or the output
 * interface, and do not cover UDP; the agent needs connect() to arbitrary
 * ports through the VPN, so the rule would have to allow everything. The
 * network policy is the nftables session chain (daemon), and bind/listen are
 * refused by seccomp. Handling it here would add a second, weaker policy to
 * keep in step with the first.
 *
 * Scopes (ABI 6): both are enforced.
 *  - LANDLOCK_SCOPE_SIGNAL: the agent cannot signal processes outside its
 *    domain (the user's other processes of the same uid, the CLI relaying
 *    its terminal). Its own descendants are in its domain; tty signals
 *    (Ctrl-C) and SIGCHLD to the daemon come from the kernel and are not
 *    affected.
 *  - LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET: abstract sockets live in the
 *    network namespace, outside the filesystem, so neither our rules nor DAC
 *    guard them, and the agent shares the host's network namespace. Without
 *    the scope it could connect to any abstract listener on the host: an X11
 *    server (@/tmp/.X11-unix/X0: keystrokes into the desktop), a D-Bus bus
 *    on an abstract address (ask the user's systemd to start an unconfined
 *    process), container shims. Agents (node, python, git, compilers,
 *    package managers) do not reach outside through abstract sockets, and
 *    processes inside the sandbox can still use them among themselves. GUI
 *    programs started by the agent lose abstract X11; that is intended.
 *    Pathname unix sockets are not covered by Landlock at ABI 7: connect()
 *    to one needs no Landlock right, only DAC, so the user's own sockets
 *    (session bus, systemd --user, ssh-agent) stay reachable. Closing that
 *    needs a newer Landlock right or a mount namespace, not this file.
 *
 * ABI 7 adds no access rights, only audit-logging flags for
 * landlock_restrict_self(); we pass none (the kernel default), so denials of
 * the agent after exec are not sent to the kernel log. */
#include "platform/linux/landlock.h"
#include "common/why.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/macros.h"
#include "platform/agent_paths.h"

/* This machine's <linux/landlock.h> stops at ABI 2. The values below are
 * kernel UAPI, fixed forever once released; they are only ever passed to a
 * kernel that reported an ABI at which it knows them (see abi_rows), so an
 * older kernel never sees an unknown bit. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13) /* ABI 2 */
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1) /* ABI 6 */
#endif

/* struct landlock_ruleset_attr as of ABI 6. The header here has only the
 * first field; the kernel takes the size we pass and reads only that much,
 * so we pass exactly the fields the enforced ABI knows (attr_size()). */
struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net; /* ABI 4; always 0, see the top of this file */
    uint64_t scoped;             /* ABI 6 */
};

#define FS_ABI1                                                                           \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                         \
     LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |                         \
     LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |                     \
     LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |                         \
     LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |                         \
     LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |                       \
     LANDLOCK_ACCESS_FS_MAKE_SYM)

/* What each ABI adds. Rights for ABI n are the union of rows 1..n. */
static const struct abi_row {
    uint64_t fs;
    uint64_t scoped;
} abi_rows[LL_ABI_MAX + 1] = {
    [1] = {.fs = FS_ABI1},
    [2] = {.fs = LANDLOCK_ACCESS_FS_REFER},
    [3] = {.fs = LANDLOCK_ACCESS_FS_TRUNCATE},
    [4] = {0}, /* LANDLOCK_ACCESS_NET_*: not handled, see the top of this file */
    [5] = {.fs = LANDLOCK_ACCESS_FS_IOCTL_DEV},
    [6] = {.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL},
    [7] = {0}, /* audit-logging flags only */
    /* ABI 8+: add a row (and raise LL_ABI_MAX) under #ifdef of the new
     * constant once the headers define it; until then a newer kernel is
     * enforced at LL_ABI_MAX. */
};

/* The only rights the kernel accepts on a non-directory. */
#define FS_FILE                                                                           \
    (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |                         \
     LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |                         \
     LANDLOCK_ACCESS_FS_IOCTL_DEV)
/* Handled everywhere, granted nowhere: the agent makes no device nodes. */
#define FS_NEVER (LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_BLOCK)
#define FS_RX (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)

#define MAX_SYMLINKS 40 /* the kernel's own limit on links in one lookup */


/* ---- policy ------------------------------------------------------------------ */

static void path_list_free(struct ll_path **items, size_t *n) {
    for (size_t k = 0; *items && k < *n; k++)
        free((*items)[k].path);
    free(*items);
    *items = NULL;
    *n = 0;
}

void ll_policy_free(struct ll_policy *p) {
    if (!p)
        return;
    path_list_free(&p->rw, &p->n_rw);
    path_list_free(&p->rx, &p->n_rx);
}

static void ll_policy_freep(struct ll_policy *p) { ll_policy_free(p); }

int ll_policy_add(struct ll_policy *p, enum ll_access a, const char *path, unsigned flags) {
    struct ll_path **items;
    size_t *n;

    if (!p || !path || !*path)
        return -EINVAL;
    switch (a) {
    case LL_RW:
        items = &p->rw;
        n = &p->n_rw;
        break;
    case LL_RX:
        items = &p->rx;
        n = &p->n_rx;
        break;
    default:
        return -EINVAL;
    }
    _cleanup_free_ char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    /* Grow by one: policies are tens of entries, built once per launch. */
    struct ll_path *grown = reallocarray(*items, *n + 1, sizeof(**items));
    if (!grown)
        return -ENOMEM;
    *items = grown;
    grown[*n] = (struct ll_path){.path = TAKE_PTR(copy), .flags = flags};
    (*n)++;
    return 0;
}

/* home/name, with home's trailing slashes dropped. */
static int add_under(struct ll_policy *p, enum ll_access a, const char *home, const char *name,
                     unsigned flags) {
    char buf[PATH_MAX];
    size_t len = strlen(home);

    while (len > 1 && home[len - 1] == '/')
        len--;
    int n = snprintf(buf, sizeof(buf), "%.*s/%s", (int)len, home, name);
    if (n < 0 || (size_t)n >= sizeof(buf))
        return -ENAMETOOLONG;
    return ll_policy_add(p, a, buf, flags);
}

/* platform/agent_paths.h: the same entries the macOS profile grants. */
static const char *const narrow_home_entries[] = AGENT_NARROW_HOME_ENTRIES;
_Static_assert(ARRAY_SIZE(narrow_home_entries) == AGENT_NARROW_HOME_COUNT,
               "AGENT_NARROW_HOME_COUNT");

static const struct {
    enum ll_access access;
    const char *path;
    unsigned flags;
} system_paths[] = {
    {LL_RW, "/tmp", 0},
    {LL_RW, "/var/tmp", LL_OPTIONAL},
    {LL_RW, "/dev/shm", LL_OPTIONAL},
    {LL_RW, "/dev/null", 0},
    {LL_RW, "/dev/zero", LL_OPTIONAL},
    {LL_RW, "/dev/full", LL_OPTIONAL},
    {LL_RW, "/dev/random", LL_OPTIONAL},
    {LL_RW, "/dev/urandom", LL_OPTIONAL},
    {LL_RW, "/dev/tty", LL_OPTIONAL},
    {LL_RX, "/usr", 0},
    /* Links into /usr on merged-/usr systems (followed: root made them). */
    {LL_RX, "/bin", LL_OPTIONAL},
    {LL_RX, "/sbin", LL_OPTIONAL},
    {LL_RX, "/lib", LL_OPTIONAL},
    {LL_RX, "/lib64", LL_OPTIONAL},
    {LL_RX, "/etc", 0},
    {LL_RX, "/opt", LL_OPTIONAL},
    /* See the top of this file. */
    {LL_RX, "/proc", LL_OPTIONAL | LL_NOEXEC},
    /* The resolver: /etc covers /etc/resolv.conf itself, but when it is a
     * link this rule is on its target (root made the link). The target file
     * may be replaced by rename while the session runs, which would orphan a
     * rule on the old inode, so the directories of the usual managers are
     * granted as well. */
    {LL_RX, "/etc/resolv.conf", LL_OPTIONAL | LL_NOEXEC},
    {LL_RX, "/run/systemd/resolve", LL_OPTIONAL | LL_NOEXEC},
    {LL_RX, "/run/resolvconf", LL_OPTIONAL | LL_NOEXEC},
};

int ll_policy_default(const struct ll_defaults *d, struct ll_policy *ret) {
    _cleanup_(ll_policy_freep) struct ll_policy p = {0};
    int k;

    if (!d || !ret || !d->home || !*d->home || !d->cwd || !*d->cwd || (d->tmpdir && !*d->tmpdir))
        return -EINVAL;

    if (d->narrow_home) {
        for (size_t i = 0; i < ARRAY_SIZE(narrow_home_entries); i++) {
            k = add_under(&p, LL_RW, d->home, narrow_home_entries[i], LL_OPTIONAL);
            if (k < 0)
                return k;
        }
    } else {
        k = ll_policy_add(&p, LL_RW, d->home, 0);
        if (k < 0)
            return k;
    }
    k = ll_policy_add(&p, LL_RW, d->cwd, 0);
    if (k < 0)
        return k;
    k = d->tmpdir ? ll_policy_add(&p, LL_RW, d->tmpdir, 0) : 0;
    if (k < 0)
        return k;
    for (size_t i = 0; i < ARRAY_SIZE(system_paths); i++) {
        k = ll_policy_add(&p, system_paths[i].access, system_paths[i].path, system_paths[i].flags);
        if (k < 0)
            return k;
    }
    *ret = p;
    p = (struct ll_policy){0};
    return 0;
}

/* ---- report ------------------------------------------------------------------ */

void ll_report_free(struct ll_report *r) {
    if (!r)
        return;
    for (size_t k = 0; r->skipped && k < r->n_skipped; k++)
        free(r->skipped[k].path);
    free(r->skipped);
    *r = (struct ll_report){0};
}

static void ll_report_freep(struct ll_report *r) { ll_report_free(r); }

static int report_skip(struct ll_report *r, const char *path, int err) {
    _cleanup_free_ char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    struct ll_skipped *grown = reallocarray(r->skipped, r->n_skipped + 1, sizeof(*grown));
    if (!grown)
        return -ENOMEM;
    r->skipped = grown;
    grown[r->n_skipped++] = (struct ll_skipped){.path = TAKE_PTR(copy), .err = err};
    return 0;
}

/* ---- path resolution ---------------------------------------------------------- */

/* A policy path is absolute and canonical: no "." or ".." component. Empty
 * components (repeated slashes) are harmless and ignored. */
static int check_policy_path(const char *path, char *why, size_t whylen) {
    if (path[0] != '/') {
        set_why(why, whylen, "path '%s' is not absolute", path);
        return -EINVAL;
    }
    if (strlen(path) >= PATH_MAX) {
        set_why(why, whylen, "path '%.64s...' is too long", path);
        return -ENAMETOOLONG;
    }
    for (const char *c = path; *c;) {
        while (*c == '/')
            c++;
        size_t len = strcspn(c, "/");
        if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.')) {
            set_why(why, whylen, "path '%s' has a '.' or '..' component", path);
            return -EINVAL;
        }
        c += len;
    }
    return 0;
}

/* Could only root have made this link, and can only root replace it? */
static bool link_is_roots(const struct stat *dir, const struct stat *link) {
    if (link->st_uid != 0 || dir->st_uid != 0)
        return false;
    /* Writable by others: they could swap the link, unless the directory is
     * sticky, where only root (owner of link and directory) may. */
    if ((dir->st_mode & (S_IWGRP | S_IWOTH)) && !(dir->st_mode & S_ISVTX))
        return false;
    return true;
}

/* The common case in one system call: a path with no symlink anywhere
 * (RESOLVE_NO_SYMLINKS), which is what the walk below would open too, one
 * component at a time. Any failure (a link on the way, a missing entry, a
 * kernel without openat2) leaves the path to the walk, which follows the
 * links root made and says precisely what is wrong. */
static int open_plain(const char *path, int *ret_fd, struct stat *ret_st) {
    struct open_how how = {
        .flags = O_PATH | O_CLOEXEC,
        .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    _cleanup_close_ int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
    if (fd < 0 || fstat(fd, ret_st) < 0)
        return -1;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

/* Open `path` as an O_PATH fd, walking one component at a time so that no
 * symlink is followed by the kernel on our behalf. *ret_st is the fstat of
 * the result. Errors name `path` in why. */
static int resolve(const char *path, int *ret_fd, struct stat *ret_st, char *why, size_t whylen) {
    char rest[PATH_MAX];   /* what is left to walk; link targets are spliced in front */
    char name[NAME_MAX + 1];
    char target[PATH_MAX];
    struct stat st = {0};
    size_t pos = 0;
    unsigned links = 0;
    int k;

    k = check_policy_path(path, why, whylen);
    if (k < 0)
        return k;
    if (open_plain(path, ret_fd, ret_st) == 0)
        return 0;
    memcpy(rest, path, strlen(path) + 1);

    _cleanup_close_ int cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cur < 0 || fstat(cur, &st) < 0) {
        k = -errno;
        set_why(why, whylen, "cannot open '/' for '%s': %s", path, strerror(-k));
        return k;
    }
    for (;;) {
        while (rest[pos] == '/')
            pos++;
        if (!rest[pos])
            break;
        size_t len = strcspn(rest + pos, "/");
        if (len > NAME_MAX) {
            set_why(why, whylen, "path '%s' has a component longer than %d bytes", path, NAME_MAX);
            return -ENAMETOOLONG;
        }
        memcpy(name, rest + pos, len);
        name[len] = '\0';
        pos += len;
        size_t after = pos;
        while (rest[after] == '/')
            after++;
        bool last = rest[after] == '\0';

        /* Only a root-made link target can bring "." or ".." here (policy
         * paths were checked); ".." is walked physically, as the kernel does. */
        if (strcmp(name, ".") == 0)
            continue;
        _cleanup_close_ int next = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 || fstat(next, &st) < 0) {
            k = -errno;
            set_why(why, whylen, "path '%s': '%s': %s", path, name, strerror(-k));
            return k;
        }
        if (S_ISLNK(st.st_mode)) {
            struct stat dir;
            if (fstat(cur, &dir) < 0) {
                k = -errno;
                set_why(why, whylen, "path '%s': %s", path, strerror(-k));
                return k;
            }
            if (!link_is_roots(&dir, &st)) {
                set_why(why, whylen,
                        "path '%s': '%s' is a symlink not made by root; not followed", path, name);
                return -ELOOP;
            }
            if (++links > MAX_SYMLINKS) {
                set_why(why, whylen, "path '%s': too many levels of symlinks", path);
                return -ELOOP;
            }
            ssize_t n = readlinkat(next, "", target, sizeof(target));
            if (n < 0) {
                k = -errno;
                set_why(why, whylen, "path '%s': readlink '%s': %s", path, name, strerror(-k));
                return k;
            }
            size_t tail = strlen(rest + pos);
            if (n == 0 || (size_t)n >= sizeof(target) || (size_t)n + 1 + tail >= sizeof(rest)) {
                set_why(why, whylen, "path '%s': symlink '%s' target is empty or too long", path,
                        name);
                return n == 0 ? -ENOENT : -ENAMETOOLONG;
            }
            /* rest = target + "/" + what was left after the link. */
            memmove(rest + n + 1, rest + pos, tail + 1);
            memcpy(rest, target, (size_t)n);
            rest[n] = '/';
            pos = 0;
            st = dir; /* st describes cur again */
            if (target[0] == '/') {
                CLOSE_FD(cur);
                cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (cur < 0 || fstat(cur, &st) < 0) {
                    k = -errno;
                    set_why(why, whylen, "cannot open '/' for '%s': %s", path, strerror(-k));
                    return k;
                }
            }
            continue;
        }
        if (!last && !S_ISDIR(st.st_mode)) {
            set_why(why, whylen, "path '%s': '%s' is not a directory", path, name);
            return -ENOTDIR;
        }
        CLOSE_FD(cur);
        cur = TAKE_FD(next);
    }
    /* st describes cur: the last component opened, or "/" itself. */
    *ret_fd = TAKE_FD(cur);
    *ret_st = st;
    return 0;
}

/* ---- ruleset ------------------------------------------------------------------ */

static uint64_t rights_for(enum ll_access a, unsigned flags, const struct stat *st,
                           uint64_t handled) {
    uint64_t r = a == LL_RW ? handled & ~FS_NEVER : FS_RX & handled;

    if (flags & LL_NOEXEC)
        r &= ~LANDLOCK_ACCESS_FS_EXECUTE;
    if (!S_ISDIR(st->st_mode))
        r &= FS_FILE;
    if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode))
        r &= ~LANDLOCK_ACCESS_FS_EXECUTE;
    return r;
}

static size_t attr_size(int abi) {
    if (abi >= 6)
        return sizeof(struct ll_ruleset_attr);
    if (abi >= 4)
        return offsetof(struct ll_ruleset_attr, scoped);
    return offsetof(struct ll_ruleset_attr, handled_access_net);
}

static int add_path(int ruleset, const struct ll_path *e, enum ll_access a, uint64_t handled,
                    struct ll_report *rep, char *why, size_t whylen) {
    _cleanup_close_ int fd = -1;
    struct stat st;
    int k;

    bool optional = e->flags & LL_OPTIONAL;

    /* An optional path's reason goes to the report, not to why. */
    k = resolve(e->path, &fd, &st, optional ? NULL : why, optional ? 0 : whylen);
    if (k < 0)
        return optional && k != -ENOMEM ? report_skip(rep, e->path, k) : k;
    /* A writable "/" would make every other write rule moot (e.g. a launch
     * from cwd "/"): refuse it, by inode, whatever path led there. */
    struct stat rootst;
    if (a == LL_RW && stat("/", &rootst) == 0 && st.st_dev == rootst.st_dev &&
        st.st_ino == rootst.st_ino) {
        if (optional)
            return report_skip(rep, e->path, -EINVAL);
        set_why(why, whylen, "path '%s' is the root directory; it cannot be writable", e->path);
        return -EINVAL;
    }
    struct landlock_path_beneath_attr pb = {
        .allowed_access = rights_for(a, e->flags, &st, handled),
        .parent_fd = fd,
    };
    if (pb.allowed_access == 0)
        return report_skip(rep, e->path, -EINVAL);
    if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0) {
        k = -errno;
        set_why(why, whylen, "landlock rule for '%s': %s", e->path, strerror(-k));
        return k;
    }
    rep->n_rules++;
    return 0;
}

uint64_t ll_handled_fs(int abi) {
    uint64_t fs = 0;
    for (int v = 1; v <= abi && v <= LL_ABI_MAX; v++)
        fs |= abi_rows[v].fs;
    return fs;
}

int ll_ruleset_build(const struct ll_policy *p, int abi, int *ret_fd, struct ll_report *ret,
                     char *why, size_t whylen) {
    _cleanup_(ll_report_freep) struct ll_report rep = {0};
    struct ll_ruleset_attr attr = {0};
    int k;

    if (!p || !ret_fd || !ret || abi < 1) {
        set_why(why, whylen, "invalid Landlock policy or ABI %d", abi);
        return -EINVAL;
    }
    rep.abi = abi > LL_ABI_MAX ? LL_ABI_MAX : abi;
    rep.handled_fs = ll_handled_fs(rep.abi);
    for (int v = 1; v <= rep.abi; v++)
        rep.scoped |= abi_rows[v].scoped;
    attr.handled_access_fs = rep.handled_fs;
    attr.scoped = rep.scoped;

    /* The kernel makes ruleset fds O_CLOEXEC unconditionally. */
    _cleanup_close_ int ruleset =
        (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size(rep.abi), 0);
    if (ruleset < 0) {
        k = -errno;
        set_why(why, whylen, "landlock_create_ruleset (ABI %d): %s", rep.abi, strerror(-k));
        return k;
    }
    for (size_t i = 0; i < p->n_rw; i++) {
        k = add_path(ruleset, &p->rw[i], LL_RW, rep.handled_fs, &rep, why, whylen);
        if (k < 0)
            return k;
    }
    for (size_t i = 0; i < p->n_rx; i++) {
        k = add_path(ruleset, &p->rx[i], LL_RX, rep.handled_fs, &rep, why, whylen);
        if (k < 0)
            return k;
    }
    *ret_fd = TAKE_FD(ruleset);
    *ret = rep;
    rep = (struct ll_report){0};
    return 0;
}

/* ---- probe and enforce ---------------------------------------------------------- */

int ll_probe(int *ret_abi) {
    if (!ret_abi)
        return -EINVAL;
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (v < 0) {
        /* ENOSYS: not built in; EOPNOTSUPP: built in but not enabled (lsm=). */
        if (errno == ENOSYS || errno == EOPNOTSUPP)
            return -EOPNOTSUPP;
        return -errno;
    }
    if (v < 1 || v > INT_MAX)
        return -EOPNOTSUPP;
    *ret_abi = (int)v;
    return 0;
}

int ll_restrict_self(int ruleset_fd) {
    if (ruleset_fd < 0)
        return -EBADF;
    /* Without NO_NEW_PRIVS a setuid binary could be exec'd with the domain
     * in place; the kernel refuses that unless we still hold CAP_SYS_ADMIN,
     * which after the drop would itself be the bug. Refuse both. */
    int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
    if (nnp < 0)
        return -errno;
    if (nnp != 1)
        return -EPERM;
    if (syscall(SYS_landlock_restrict_self, ruleset_fd, 0) < 0)
        return -errno;
    return 0;
}

/* The session's own devpts instance (spawn.c mounts it in the child's mount
 * namespace over /dev/pts, with /dev/ptmx bound to its ptmx). The host's
 * /dev/pts is never in the policy: the agent's user owns the pts devices of
 * its other terminals, so a rule on the host instance would let the agent
 * read the user's keystrokes and type into them. Rules for the private
 * instance can only be added in the child, after the mount: the paths then
 * name its inodes. Syscalls only. */
int ll_ruleset_add_dir(int ruleset_fd, uint64_t handled, int dirfd) {
    struct landlock_path_beneath_attr pb = {.allowed_access = handled & ~FS_NEVER,
                                            .parent_fd = dirfd};
    return syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0
               ? -errno
               : 0;
}

int ll_add_devpts_child(int ruleset_fd, uint64_t handled) {
    struct landlock_path_beneath_attr pb;
    int fd, k = 0;

    fd = open("/dev/pts", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    pb = (struct landlock_path_beneath_attr){.allowed_access = handled & ~FS_NEVER, .parent_fd = fd};
    if (syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
        k = -errno;
    close(fd);
    if (k < 0)
        return k;
    fd = open("/dev/ptmx", O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    pb = (struct landlock_path_beneath_attr){
        .allowed_access = handled & FS_FILE & ~LANDLOCK_ACCESS_FS_EXECUTE, .parent_fd = fd};
    if (syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
        k = -errno;
    close(fd);
    return k;
}
