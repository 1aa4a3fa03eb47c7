/* A launch's paths, looked up off the event loop: see run_paths.h. The
 * checks are the ones the loop made before (moved here unchanged); what is
 * new is who runs them. */
#include "daemon/run_paths.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/home_entry.h"
#include "common/macros.h"
#include "daemon/homes.h"
#include "daemon/lyhd.h" /* lyhd_mono_us: a clock any thread may read */

int run_refuse(struct run_refusal *f, int code, const char *fmt, ...) {
    va_list ap;

    if (f->code)
        return -1;
    va_start(ap, fmt);
    vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
    va_end(ap);
    f->code = code;
    return -1;
}

#define pfail(p, ...) run_refuse(&(p)->err, __VA_ARGS__)

/* Home (from the passwd entry, on the loop): a directory the user owns.
 * Opened as root, like before, but here: the lookup of its last name can be
 * made to wait like any other. */
static int check_home(struct run_paths *p) {
    _cleanup_close_ int fd = open(p->home, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat st;

    if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != p->uid)
        return pfail(p, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                     "home directory %s of uid %u is not a directory owned by that user", p->home,
                     p->uid);
    return 0;
}

/* 2 when path is one of the private roots (spawn.h spawn_tmp_roots) itself,
 * 1 when it lies below one, 0 otherwise. On the path as given (the agent will use it as given): a path
 * there needs showing again inside the private copy. */
static int in_private_tmp(const char *path) {
    for (size_t i = 0; i < SPAWN_TMP_N; i++) {
        size_t n = strlen(spawn_tmp_roots[i]);
        if (strncmp(path, spawn_tmp_roots[i], n) != 0)
            continue;
        if (path[n] == '\0' || (path[n] == '/' && path[n + 1] == '\0'))
            return 2;
        if (path[n] == '/')
            return 1;
    }
    return 0;
}

/* A granted directory under a private root is shown again there (spawn.h
 * expose); the root itself would expose everything the private copy hides. */
static int expose_if_private(struct run_paths *p, const char *what, const char *path, bool is_dir) {
    int k = in_private_tmp(path);

    if (k == 0)
        return 0;
    if (k == 2)
        return pfail(p, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                     "%s %s: the session gets a private %s of its own (so it cannot reach what "
                     "runs beside it there); give a directory of yours below it, or elsewhere",
                     what, path, path);
    if (!is_dir)
        return pfail(p, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                     "%s %s is a file under the session's private /tmp, /var/tmp or /dev/shm; "
                     "grant the directory that holds it",
                     what, path);
    if (p->n_expose >= RUN_MAX_EXPOSE)
        return pfail(p, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                     "too many granted directories under /tmp, /var/tmp and /dev/shm (at most %d)",
                     RUN_MAX_EXPOSE);
    p->expose[p->n_expose] = strdup(path);
    if (!p->expose[p->n_expose])
        return pfail(p, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
    p->n_expose++;
    return 0;
}

static int check_cwd(struct run_paths *p, const char *cwd) {
    _cleanup_close_ int fd = -1;

    if (cwd[0] != '/')
        return pfail(p, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "cwd '%s' is not an absolute path",
                    cwd);
    if (strlen(cwd) >= PATH_MAX)
        return pfail(p, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "cwd is too long");
    fd = open(cwd, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return pfail(p, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "cwd %s: %s", cwd, strerror(errno));
    return expose_if_private(p, "cwd", cwd, true);
}

/* Is the directory open as fd at or below one of the system trees ("/"
 * itself, not everything below it)? Decided on inodes (fsutil.h). */
static bool under_system_tree(int fd) {
    static const char *const system[] = {"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib64",
                                         "/boot", "/dev", "/proc", "/sys", "/run", "/var/run",
                                         "/var/lib", "/root"};
    struct fs_inode up[256];
    size_t n = fs_ancestors(fd, up, ARRAY_SIZE(up));

    if (fs_is_one_of(up, n ? 1 : 0, "/", true))
        return true;
    for (size_t i = 0; i < ARRAY_SIZE(system); i++)
        if (fs_is_one_of(up, n, system[i], true))
            return true;
    return false;
}

/* Policy.writable_prefixes: is the writable path open as fd at or below one
 * of the prefixes (a prefix that is a symlink does not count)? On inodes. An
 * empty list sets no prefix rule. */
static bool under_writable_prefix(const struct policy *pol, int fd) {
    struct fs_inode up[256];

    if (pol->n_writable == 0)
        return true;
    size_t n = fs_ancestors(fd, up, ARRAY_SIZE(up));
    for (size_t i = 0; i < pol->n_writable; i++)
        if (fs_is_one_of(up, n, pol->writable[i], false))
            return true;
    return false;
}

static int check_paths(struct run_paths *p, const Lianyaohu__V1__RunRequest *r,
                       const struct policy *pol) {
    uid_t caller = p->uid;

    if (r->n_writable > RUN_MAX_PATHS || r->n_read_only > RUN_MAX_PATHS ||
        r->n_agent_state_dirs > RUN_MAX_STATE_DIRS)
        return pfail(p, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                    "too many extra paths (at most %u writable, %u read-only, %u state dirs)",
                    RUN_MAX_PATHS, RUN_MAX_PATHS, RUN_MAX_STATE_DIRS);
    for (size_t i = 0; i < r->n_writable; i++) {
        const char *path = r->writable[i];
        _cleanup_close_ int fd = -1;
        struct stat st;
        if (path[0] != '/')
            return pfail(p, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                        "writable path '%s' is not absolute", path);
        fd = open(path, O_PATH | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
            return pfail(p, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "writable path %s: %s", path,
                        strerror(errno));
        if (st.st_uid != caller)
            return pfail(p, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                        "writable path %s is not owned by you (uid %u)", path, caller);
        if (S_ISDIR(st.st_mode) && under_system_tree(fd))
            return pfail(p, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                        "writable path %s lies in a system directory", path);
        /* a file: judged by the directory it is in */
        _cleanup_close_ int dfd = S_ISDIR(st.st_mode) ? -1 : fs_open_parent_dir(path);
        if (!under_writable_prefix(pol, S_ISDIR(st.st_mode) ? fd : dfd))
            return pfail(p, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                        "policy: writable path %s is not below any of writable_prefixes", path);
        if (expose_if_private(p, "writable path", path, S_ISDIR(st.st_mode)) < 0)
            return -1;
        if (ll_policy_add(&p->ll, LL_RW, path, 0) < 0)
            return pfail(p, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
    }
    for (size_t i = 0; i < r->n_read_only; i++) {
        const char *path = r->read_only[i];
        _cleanup_close_ int fd = -1;
        char who[300];
        if (path[0] != '/')
            return pfail(p, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                        "read-only path '%s' is not absolute", path);
        fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        bool is_dir = fd >= 0;
        if (fd < 0 && errno == ENOTDIR) {
            /* a file: judged by its directory */
            fd = fs_open_parent_dir(path);
            if (fd < 0)
                errno = -fd;
        }
        if (fd < 0)
            return pfail(p, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "read-only path %s: %s", path,
                        strerror(errno));
        /* not at, above or below another (human) user's home: on inodes,
         * against what the homes thread last read of the user database */
        int near = homes_near_other(p->homes, fd, caller, who, sizeof(who));
        if (near == -EAGAIN)
            return pfail(p, LIANYAOHU__V1__CODE__UNAVAILABLE,
                        "lyhd has not finished reading the user database; try again in a moment");
        if (near != 0)
            return pfail(p, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                        "read-only path %s is at, above or below the home of %s", path,
                        near > 0 ? who : "a user lyhd cannot tell");
        if (expose_if_private(p, "read-only path", path, is_dir) < 0)
            return -1;
        if (ll_policy_add(&p->ll, LL_RX, path, 0) < 0)
            return pfail(p, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
    }
    for (size_t i = 0; i < r->n_agent_state_dirs; i++) {
        const char *name = r->agent_state_dirs[i];
        char path[PATH_MAX];
        if (!name[0] || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            return pfail(p, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                        "agent state dir '%s' must be one name under your home", name);
        if (snprintf(path, sizeof(path), "%s/%s", p->home, name) >= (int)sizeof(path) ||
            ll_policy_add(&p->ll, LL_RW, path, LL_OPTIONAL) < 0)
            return pfail(p, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "agent state dir '%s' is too long",
                        name);
    }
    return 0;
}


/* Where things the agent must not reach wait for clients. A pathname Unix
 * socket needs no Landlock right to connect() to (through ABI 7), so a
 * service of the user's that runs outside the sandbox (their systemd, their
 * D-Bus session bus, a tmux or screen server, gpg-agent, ssh's control
 * masters, a container runtime) would act for the agent, unconfined. The
 * private /tmp (spawn.h) takes care of what lives in /tmp; these are the
 * other known places: directories are covered with an empty tmpfs, sockets
 * with /dev/null, each looked up in the child as the agent would. */
static const char *const hidden_places[] = {
    "/run/user",                                /* systemd --user, session bus, gpg, pipewire, podman, docker rootless */
    "/run/screen", "/var/run/screen",           /* GNU screen */
    "/run/docker.sock", "/run/docker",          /* root's container runtimes */
    "/run/containerd", "/run/podman", "/run/crio", "/run/lxd",
    "/var/snap/lxd/common/lxd/unix.socket",
    "/run/dbus/system_bus_socket",              /* the system bus */
    "/run/systemd/resolve/io.systemd.Resolve",  /* resolver side channels */
    "/run/systemd/resolve/io.systemd.Resolve.Monitor",
    "/run/nscd",
};

/* Sockets in the caller's home where such services listen (gpg-agent's, ssh
 * ControlMaster's), one level deep: found by listing, covered by name. */
static const char *const hidden_home_dirs[] = {".gnupg", ".ssh", ".ssh/sockets", ".ssh/cm"};

static void hide_add(struct run_paths *p, const char *path) {
    for (size_t i = 0; i < p->n_socks; i++)
        if (strcmp(p->socks[i], path) == 0)
            return; /* let through (--allow-socket) */
    if (p->n_hide < RUN_MAX_HIDE && (p->hide[p->n_hide] = strdup(path)))
        p->n_hide++;
}

/* An absolute path in one spelling: no empty, "." or ".." component, no
 * trailing '/' (but "/" itself), shorter than PATH_MAX. Paths compared as
 * strings (a socket below a deny path) must be so, or a trailing slash says
 * "not below" where the kernel says "below". */
static bool path_canonical(const char *path) {
    size_t n = strlen(path);
    if (path[0] != '/' || n >= PATH_MAX || (n > 1 && path[n - 1] == '/'))
        return false;
    for (const char *c = path + 1; *c;) {
        const char *e = strchr(c, '/');
        size_t len = e ? (size_t)(e - c) : strlen(c);
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        c += len + (e ? 1 : 0);
    }
    return true;
}

/* The sockets the caller lets through (--allow-socket): each an absolute,
 * canonical path to a socket (not a link; looked up as the caller), allowed
 * by the policy, not lyhd's own and not inside a deny path (whose cover
 * would have to be opened). */
static int pick_sockets(struct run_paths *p, const Lianyaohu__V1__RunRequest *r,
                        const struct policy *pol) {
    const int bad = LIANYAOHU__V1__CODE__INVALID_ARGUMENT;
    char why[POLICY_WHY_MAX];
    struct stat st;

    if (r->n_allow_sockets > RUN_MAX_SOCKETS)
        return pfail(p, bad, "too many sockets to let through (%zu, at most %d)",
                     r->n_allow_sockets, RUN_MAX_SOCKETS);
    for (size_t i = 0; i < r->n_allow_sockets; i++) {
        const char *path = r->allow_sockets[i];
        if (!path_canonical(path) || strcmp(path, "/") == 0)
            return pfail(p, bad, "socket '%.300s' must be an absolute path without '.', '..' or "
                                 "'//' components",
                         path);
        if (!policy_socket_ok(pol, path, why, sizeof(why)))
            return pfail(p, LIANYAOHU__V1__CODE__PERMISSION_DENIED, "%s", why);
        if (lstat(path, &st) < 0)
            return pfail(p, bad, "socket %.300s: %s", path, strerror(errno));
        if (S_ISLNK(st.st_mode))
            return pfail(p, bad, "%.300s is a symlink; name the socket it points to", path);
        if (!S_ISSOCK(st.st_mode))
            return pfail(p, bad, "%.300s is not a socket", path);
        /* by its real path: a symlink on the way would let a pattern or a
         * deny path judge one place and the mount take another */
        _cleanup_free_ char *real = realpath(path, NULL);
        if (!real || strcmp(real, path) != 0)
            return pfail(p, bad,
                         "%.300s goes through a symlink; name the socket by its real path%s%.300s%s",
                         path, real ? " (" : "", real ? real : "", real ? ")" : "");
        if (strcmp(path, p->socket_path) == 0)
            return pfail(p, bad, "%.300s is lyhd's own socket, which refuses agents", path);
        for (size_t k = 0; k < r->n_deny_paths; k++) {
            size_t dn = strlen(r->deny_paths[k]);
            if (strncmp(path, r->deny_paths[k], dn) == 0 && path[dn] == '/')
                return pfail(p, bad, "socket %.300s is inside deny path %.300s", path,
                             r->deny_paths[k]);
        }
        if (!(p->socks[p->n_socks] = strdup(path)))
            return pfail(p, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
        p->n_socks++;
    }
    return 0;
}

static void pick_hidden(struct run_paths *p) {
    struct stat st;

    for (size_t i = 0; i < ARRAY_SIZE(hidden_places); i++)
        if (lstat(hidden_places[i], &st) == 0 && (S_ISDIR(st.st_mode) || S_ISSOCK(st.st_mode)))
            hide_add(p, hidden_places[i]);
    /* lyhd's own socket: it refuses sandboxed peers anyway. */
    if (lstat(p->socket_path, &st) == 0 && S_ISSOCK(st.st_mode))
        hide_add(p, p->socket_path);
    for (size_t i = 0; i < ARRAY_SIZE(hidden_home_dirs); i++) {
        char dir[PATH_MAX];
        DIR *dh;
        if (snprintf(dir, sizeof(dir), "%s/%s", p->home, hidden_home_dirs[i]) >= (int)sizeof(dir))
            continue;
        dh = opendir(dir);
        if (!dh)
            continue;
        for (struct dirent *de; (de = readdir(dh));) {
            char path[PATH_MAX];
            if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
                continue;
            if (fstatat(dirfd(dh), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode))
                hide_add(p, path);
        }
        closedir(dh);
    }
}

/* The caller's deny paths, ahead of the fixed ones so they always fit. Each
 * is covered in the child's mount namespace before Landlock and the drop; a
 * cover only hides things from the agent, so whatever a path resolves to in
 * the end, it cannot widen anything. Deciding here: absolute, a directory
 * (a tmpfs cannot cover a file; naming a file would otherwise be ignored),
 * not a symlink (the cover must be where the user pointed), missing = skip. */
static int pick_denied(const Lianyaohu__V1__RunRequest *r,
                       struct run_paths *p) {
    const int bad = LIANYAOHU__V1__CODE__INVALID_ARGUMENT;
    struct stat st;

    if (r->n_deny_paths > RUN_MAX_DENY) {
        pfail(p, bad, "too many deny paths (%zu, at most %d)", r->n_deny_paths,
                      RUN_MAX_DENY);
        return -EINVAL;
    }
    for (size_t i = 0; i < r->n_deny_paths; i++) {
        const char *path = r->deny_paths[i];
        if (!path_canonical(path)) {
            pfail(p, bad,
                  "deny path '%.200s' must be an absolute path without '.', '..', '//' or a "
                  "trailing '/'",
                  path);
            return -EINVAL;
        }
        if (lstat(path, &st) < 0) {
            if (errno == ENOENT)
                continue; /* nothing there to hide */
            pfail(p, bad, "deny path '%.200s': %s", path, strerror(errno));
            return -EINVAL;
        }
        if (!S_ISDIR(st.st_mode)) {
            pfail(p, bad,
                          "deny path '%.200s' is %s; deny paths must be directories (deny the "
                          "directory that holds it)",
                          path, S_ISLNK(st.st_mode) ? "a symlink" : "not a directory");
            return -EINVAL;
        }
        p->hide[p->n_hide] = strdup(path);
        if (!p->hide[p->n_hide]) {
            pfail(p, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
            return -ENOMEM;
        }
        p->n_hide++;
    }
    return 0;
}

/* Entries of home kept read-only (daemon/protect.h): the built-in list, the
 * policy's protect_paths and the request's own, each checked as the policy's
 * are. Run as the caller (missing ones the built-in list names are made). A
 * --writable path inside one contradicts it: refused, not quietly narrowed. */
static int pick_protected(struct run_paths *p, const Lianyaohu__V1__RunRequest *r,
                          const struct policy *pol) {
    const int bad = LIANYAOHU__V1__CODE__INVALID_ARGUMENT;
    const char *names[RUN_MAX_PROTECT + POLICY_MAX_PROTECT];
    char canon[RUN_MAX_PROTECT][HE_NAME_MAX], why[400];
    size_t n = 0;

    if (r->n_protect > RUN_MAX_PROTECT)
        return pfail(p, bad, "too many protect entries (%zu, at most %d)", r->n_protect,
                     RUN_MAX_PROTECT);
    for (size_t i = 0; i < r->n_protect; i++) {
        if (he_check(r->protect[i], canon[i], why, sizeof(why)) < 0)
            return pfail(p, bad, "protect entry '%.200s': %s", r->protect[i], why);
        names[n++] = canon[i];
    }
    for (size_t i = 0; i < pol->n_protect; i++)
        names[n++] = pol->protect[i];
    if (prot_collect(p->home, p->uid, names, n, &p->prot, why, sizeof(why)) < 0)
        return pfail(p, LIANYAOHU__V1__CODE__FAILED_PRECONDITION, "%s", why);
    if (r->narrow_home && prot_agent_state(p->home, r->argv[0], why, sizeof(why)) < 0)
        return pfail(p, LIANYAOHU__V1__CODE__FAILED_PRECONDITION, "%s", why);
    for (size_t i = 0; i < r->n_writable; i++)
        if (prot_covers(&p->prot, r->writable[i]))
            return pfail(p, bad,
                         "writable path %.300s is protected: agents may not write it (it can "
                         "run code as you outside the sandbox); name a path outside it",
                         r->writable[i]);
    for (size_t i = 0; i < p->prot.n; i++)
        p->covers[i] = (struct spawn_cover){.path = p->prot.v[i].path, .ro = p->prot.v[i].ro};
    return 0;
}


/* ---- the work ------------------------------------------------------------------ */

static int take_list(char ***dst, size_t *n_dst, char *const *src, size_t n, size_t max,
                     const char *what, char *why, size_t whylen) {
    if (n > max) {
        snprintf(why, whylen, "too many %s (%zu, at most %zu)", what, n, max);
        return -EINVAL;
    }
    if (n == 0)
        return 0;
    if (!(*dst = calloc(n, sizeof(char *))))
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (strlen(src[i]) >= PATH_MAX) {
            snprintf(why, whylen, "one of the %s is too long (%zu bytes)", what, strlen(src[i]));
            return -EINVAL;
        }
        if (!((*dst)[i] = strdup(src[i])))
            return -ENOMEM;
        (*n_dst)++;
    }
    return 0;
}

int run_paths_take(struct run_paths *w, const Lianyaohu__V1__RunRequest *r, char *why,
                   size_t whylen) {
    Lianyaohu__V1__RunRequest *q = &w->rq;
    int k;

    if (r->n_argv < 1 || strlen(r->argv[0]) >= PATH_MAX || strlen(r->cwd) >= PATH_MAX) {
        snprintf(why, whylen, "%s",
                 r->n_argv < 1 ? "no command" : "the command or cwd is too long");
        return -EINVAL;
    }
    if (!(q->argv = calloc(1, sizeof(char *))) || !(q->argv[0] = strdup(r->argv[0])))
        return -ENOMEM;
    q->n_argv = 1;
    if (!(q->cwd = strdup(r->cwd)))
        return -ENOMEM;
    q->narrow_home = r->narrow_home;
    if ((k = take_list(&q->writable, &q->n_writable, r->writable, r->n_writable, RUN_MAX_PATHS,
                       "writable paths", why, whylen)) < 0 ||
        (k = take_list(&q->read_only, &q->n_read_only, r->read_only, r->n_read_only,
                       RUN_MAX_PATHS, "read-only paths", why, whylen)) < 0 ||
        (k = take_list(&q->agent_state_dirs, &q->n_agent_state_dirs, r->agent_state_dirs,
                       r->n_agent_state_dirs, RUN_MAX_STATE_DIRS, "agent state dirs", why,
                       whylen)) < 0 ||
        (k = take_list(&q->deny_paths, &q->n_deny_paths, r->deny_paths, r->n_deny_paths,
                       RUN_MAX_DENY, "deny paths", why, whylen)) < 0 ||
        (k = take_list(&q->protect, &q->n_protect, r->protect, r->n_protect, RUN_MAX_PROTECT,
                       "protect entries", why, whylen)) < 0 ||
        (k = take_list(&q->allow_sockets, &q->n_allow_sockets, r->allow_sockets,
                       r->n_allow_sockets, RUN_MAX_SOCKETS, "sockets to let through", why,
                       whylen)) < 0)
        return k;
    return 0;
}

/* Empty, owning nothing (INIT's strings are protobuf-c's static ""). */
static void rq_init(Lianyaohu__V1__RunRequest *q) {
    *q = (Lianyaohu__V1__RunRequest)LIANYAOHU__V1__RUN_REQUEST__INIT;
    q->cwd = NULL;
}

static void free_list(char **v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

int run_paths_collect(struct run_paths *p) {
    const Lianyaohu__V1__RunRequest *r = &p->rq;
    struct fs_ident root_ident;
    char why[512];

    p->t_began_us = lyhd_mono_us();
    if (check_home(p) < 0)
        return 0;
    /* the tmpdir's rules come by fd once the ruleset is built (rpc_run.c) */
    if (ll_policy_default(&(struct ll_defaults){.home = p->home,
                                                .cwd = r->cwd,
                                                .tmpdir = NULL,
                                                .narrow_home = r->narrow_home},
                          &p->ll) < 0) {
        pfail(p, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "cannot build the path policy");
        return 0;
    }
    /* The request's paths are looked up with the caller's file-system
     * identity, not root's: whatever the answer, it is one the caller could
     * have had by trying (a root lookup would tell whether something exists
     * in a directory the caller cannot read). */
    int k = fs_ident_enter(p->uid, p->gid, p->groups, p->n_groups, &root_ident);
    if (k < 0) {
        pfail(p, LIANYAOHU__V1__CODE__INTERNAL,
              "cannot look up your paths with your own identity: %s", strerror(-k));
        return 0;
    }
    if (check_cwd(p, r->cwd) == 0 && check_paths(p, r, &p->pol) == 0 && pick_denied(r, p) == 0 &&
        pick_protected(p, r, &p->pol) == 0 && pick_sockets(p, r, &p->pol) == 0) {
        pick_hidden(p);
        p->t_looked_up_us = lyhd_mono_us();
        why[0] = '\0';
        k = ll_ruleset_build(&p->ll, p->landlock_abi, &p->ll_fd, &p->ll_report, why, sizeof(why));
        if (k < 0) {
            /* A path of the request is wrong, or the kernel/memory failed us. */
            bool path_error = k == -ENOENT || k == -ENOTDIR || k == -EACCES || k == -ELOOP ||
                              k == -EINVAL || k == -ENAMETOOLONG;
            pfail(p,
                  path_error ? LIANYAOHU__V1__CODE__INVALID_ARGUMENT
                             : k == -ENOMEM ? LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED
                                            : LIANYAOHU__V1__CODE__INTERNAL,
                  "path policy: %s", why[0] ? why : strerror(-k));
        }
        p->t_built_us = lyhd_mono_us();
    }
    /* Left as it came. Should that fail, nothing is lost: the caller's
     * thread ends next and writes nothing of lyhd's (it logs nothing either:
     * the log is the loop's). */
    return fs_ident_leave(&root_ident);
}

void run_paths_clear(struct run_paths *p) {
    if (!p)
        return;
    for (size_t i = 0; i < p->n_hide; i++)
        free(p->hide[i]);
    p->n_hide = 0;
    for (size_t i = 0; i < p->n_expose; i++)
        free(p->expose[i]);
    p->n_expose = 0;
    for (size_t i = 0; i < p->n_socks; i++)
        free(p->socks[i]);
    p->n_socks = 0;
    prot_list_clear(&p->prot);
    ll_policy_free(&p->ll);
    ll_report_free(&p->ll_report);
    CLOSE_FD(p->ll_fd);
    homes_release(TAKE_PTR(p->homes));
    Lianyaohu__V1__RunRequest *q = &p->rq;
    free_list(q->argv, q->n_argv);
    free(q->cwd);
    free_list(q->writable, q->n_writable);
    free_list(q->read_only, q->n_read_only);
    free_list(q->agent_state_dirs, q->n_agent_state_dirs);
    free_list(q->deny_paths, q->n_deny_paths);
    free_list(q->protect, q->n_protect);
    free_list(q->allow_sockets, q->n_allow_sockets);
    rq_init(q);
}

/* ---- the job --------------------------------------------------------------------- */

struct run_paths_job {
    struct run_paths w;
    int efd;                 /* the thread's "done" */
    struct event *ev;        /* the loop's watch of it, with the time limit */
    run_paths_done_fn done;
    void *ud;
    unsigned refs;           /* the loop's, the thread's (under mu) */
    bool finished;           /* the thread's results are all written (under mu) */
    LIST_ENTRY(run_paths_job) link; /* on live until its thread has done its work */
    LIST_ENTRY(run_paths_job) handed_link; /* on handed until a kept thread takes it */
};

/* Jobs whose thread has not done its work, for the caps; the threads kept
 * waiting for a job, and the jobs handed to them (never more than wait, so
 * each has a thread: one whose wait ends looks at handed before it goes).
 * The loop and the threads, under mu. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t kept_cv = PTHREAD_COND_INITIALIZER;
static LIST_HEAD(, run_paths_job) live = LIST_HEAD_INITIALIZER(live);
static LIST_HEAD(, run_paths_job) handed = LIST_HEAD_INITIALIZER(handed);
static unsigned n_kept, n_handed;

struct run_paths_job *run_paths_new(void) {
    struct run_paths_job *j = calloc(1, sizeof(*j));

    if (!j)
        return NULL;
    j->w.ll_fd = -1;
    rq_init(&j->w.rq);
    j->efd = -1;
    j->refs = 1;
    return j;
}

struct run_paths *run_paths_of(struct run_paths_job *job) {
    return &job->w;
}

static void job_free(struct run_paths_job *j) {
    run_paths_clear(&j->w);
    CLOSE_FD(j->efd);
    free(j);
}

/* Drop one reference; the last frees. */
static void job_unref(struct run_paths_job *j) {
    pthread_mutex_lock(&mu);
    bool last = --j->refs == 0;
    pthread_mutex_unlock(&mu);
    if (last)
        job_free(j);
}

/* One job on this thread. false: the thread's identity is not root's again,
 * so it must end rather than wait for another. */
static bool job_do(struct run_paths_job *j) {
    uint64_t one = 1;
    int k = run_paths_collect(&j->w);

    /* the loop reads the results only after this (it may have given up:
     * then the eventfd, still open, is not watched any more); the mutex
     * orders the results before the loop's reading of them */
    pthread_mutex_lock(&mu);
    j->finished = true;
    LIST_REMOVE(j, link); /* counts no more: the loop may go on with it now */
    pthread_mutex_unlock(&mu);
    /* cannot fail (the counter is 0 or 1); logging is the loop's alone */
    (void)!write(j->efd, &one, sizeof(one));
    job_unref(j);
    return k == 0;
}

/* Wait up to RUN_PATHS_KEEP_S for a job handed to this thread; NULL: none
 * came, or enough threads wait already. */
static struct run_paths_job *job_wait(void) {
    struct run_paths_job *j;
    struct timespec until;

    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += RUN_PATHS_KEEP_S;
    pthread_mutex_lock(&mu);
    if (n_kept >= RUN_PATHS_KEEP) {
        pthread_mutex_unlock(&mu);
        return NULL;
    }
    n_kept++;
    /* woken (or not) until a job is handed, the time is up, or the wait
     * fails (EINVAL cannot be here: no spinning on it all the same) */
    while (!(j = LIST_FIRST(&handed)) &&
           pthread_cond_clockwait(&kept_cv, &mu, CLOCK_MONOTONIC, &until) == 0)
        ;
    if (!j)
        j = LIST_FIRST(&handed); /* handed as the wait ran out: still this one's */
    if (j) {
        LIST_REMOVE(j, handed_link);
        n_handed--;
    }
    n_kept--;
    pthread_mutex_unlock(&mu);
    return j;
}

static void *job_run(void *arg) {
    struct run_paths_job *j = arg;

    while (j && job_do(j))
        j = job_wait();
    return NULL;
}

static void on_done(evutil_socket_t fd, short what, void *arg) {
    struct run_paths_job *j = arg;
    (void)fd;

    event_free(TAKE_PTR(j->ev));
    pthread_mutex_lock(&mu);
    bool finished = j->finished;
    pthread_mutex_unlock(&mu);
    /* readable and not finished cannot be: taken as the time running out */
    j->done(j, !(what & EV_READ) || !finished, j->ud);
}

int run_paths_start(struct run_paths_job *j, struct event_base *base, run_paths_done_fn done,
                    void *ud) {
    struct timeval limit = {.tv_sec = RUN_PATHS_TIMEOUT_S};
    struct run_paths_job *o;
    unsigned mine = 0, all = 0;
    pthread_attr_t attr;
    pthread_t t;
    int r = 0;

    j->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (j->efd < 0)
        return -errno;
    j->ev = event_new(base, j->efd, EV_READ, on_done, j);
    if (!j->ev)
        return -ENOMEM;
    j->done = done;
    j->ud = ud;
    pthread_mutex_lock(&mu);
    LIST_FOREACH(o, &live, link) {
        all++;
        mine += o->w.uid == j->w.uid;
    }
    if (mine >= RUN_PATHS_PER_UID || all >= RUN_PATHS_MAX) {
        pthread_mutex_unlock(&mu);
        event_free(TAKE_PTR(j->ev));
        return mine >= RUN_PATHS_PER_UID ? -EUSERS : -EBUSY;
    }
    j->refs = 2;
    LIST_INSERT_HEAD(&live, j, link);
    if (n_handed < n_kept) {
        /* a thread waits with nothing handed to it yet: wake it */
        LIST_INSERT_HEAD(&handed, j, handed_link);
        n_handed++;
        pthread_cond_signal(&kept_cv);
    } else {
        /* one thread each: one that waits on a lock holds up no other */
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 1u << 20);
        r = lyhd_thread_start(&t, &attr, job_run, j);
        pthread_attr_destroy(&attr);
        if (r < 0) {
            LIST_REMOVE(j, link);
            j->refs = 1;
        }
    }
    pthread_mutex_unlock(&mu);
    if (r < 0 || event_add(j->ev, &limit) < 0) {
        if (r == 0) {
            /* the thread runs: it frees the job once it ends */
            event_free(TAKE_PTR(j->ev));
            return -ENOMEM;
        }
        event_free(TAKE_PTR(j->ev));
        return r;
    }
    return 0;
}

unsigned run_paths_kept(void) {
    pthread_mutex_lock(&mu);
    unsigned n = n_kept;
    pthread_mutex_unlock(&mu);
    return n;
}

unsigned run_paths_live(uid_t uid) {
    struct run_paths_job *o;
    unsigned n = 0;

    pthread_mutex_lock(&mu);
    LIST_FOREACH(o, &live, link)
        n += uid == (uid_t)-1 || o->w.uid == uid;
    pthread_mutex_unlock(&mu);
    return n;
}

void run_paths_drop(struct run_paths_job *j) {
    if (!j)
        return;
    if (j->ev)
        event_free(TAKE_PTR(j->ev));
    job_unref(j);
}
