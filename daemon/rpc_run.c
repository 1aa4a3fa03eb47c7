/* Run: validate a launch request, prepare everything the child needs, record
 * the session, install its guard, spawn it and stream its events.
 *
 * The request is untrusted. Everything is rebuilt from what the daemon checks
 * itself: home from the peer uid's passwd entry, paths opened by fd, the
 * environment re-sanitized, destinations re-validated, the interface and its
 * routes asked of the kernel. Nothing from the client is passed on as text the
 * daemon has to parse.
 *
 * Order (the state.db row always precedes the kernel change it describes):
 *   validate -> tmpdir -> row (STARTING; names of tmpdir, cgroup and chain;
 *   spec) committed -> cgroup -> nft chain -> Landlock ruleset, env -> spawn ->
 *   row (cgroup id, pid, RUNNING) committed -> Started once exec succeeded.
 * Any failure before spawn undoes what was made, in reverse, and marks the row
 * ended, so nothing is left behind (no rule, cgroup, dir or fd). */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <dirent.h>
#include <grp.h>
#include <net/if.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "common/dest_rule.h"
#include "common/dns_addr.h"
#include "common/dns_name.h"
#include "common/env_policy.h"
#include "common/macros.h"
#include "daemon/homes.h"
#include "daemon/spawner.h"
#include "daemon/closer.h"
#include "daemon/dns_fwd.h"
#include "daemon/guard.h"
#include "daemon/dests.h"
#include "daemon/log.h"
#include "common/home_entry.h"
#include "daemon/policy.h"
#include "daemon/protect.h"
#include "daemon/lyhd.h"
#include "daemon/rpc.h"
#include "daemon/server.h"
#include "daemon/session.h"
#include "platform/ifaces.h"
#include "platform/linux/cgroup.h"
#include "platform/linux/dns_config.h"
#include "platform/linux/route.h"
#include "platform/linux/fsutil.h"
#include "platform/linux/landlock.h"
#include "platform/linux/nft.h"
#include "platform/linux/proc.h"
#include "platform/linux/spawn.h"

#define RUN_MAX_ARGV 256
#define RUN_MAX_ARG_BYTES (64u * 1024u)
#define RUN_MAX_ARGV_TOTAL (512u * 1024u)
#define RUN_MAX_PATHS 16
#define RUN_MAX_STATE_DIRS 16
#define RUN_MAX_DENY 8   /* the caller's deny paths (proto options bound the CLI to 8 too) */
#define RUN_MAX_HIDE (32 + RUN_MAX_DENY)
#define RUN_MAX_PROTECT 16 /* the caller's protect entries (as the proto options) */
#define RUN_MAX_SOCKETS 8  /* let-through sockets (SPAWN_MAX_SOCKETS, the proto options) */
#define RUN_MAX_EXPOSE (1 + 2 * RUN_MAX_PATHS)
_Static_assert(RUN_MAX_EXPOSE <= SPAWN_MAX_EXPOSE, "the spawn child shows at most SPAWN_MAX_EXPOSE");
_Static_assert(RUN_MAX_HIDE <= SPAWN_MAX_HIDE, "the spawn child covers at most SPAWN_MAX_HIDE");

/* Everything a launch needs, built up step by step; run_prep_free() undoes
 * what was made when the launch does not happen. */
struct run_prep {
    struct session *s;
    char home[PATH_MAX];
    char **envp;
    char **argv;       /* NULL-terminated view of the request's argv (strings borrowed) */
    struct ll_policy ll;
    struct ll_report ll_report;
    int ll_fd;
    int procs_fd;
    int cg_dir_fd;
    int stdio[3];
    int pty_fd;
    uid_t uid; /* the caller, whose fds stdio and pty_fd are */
    gid_t groups[LYH_MAX_PEER_GROUPS + 1];
    size_t n_groups;
    bool made_tmpdir, row_inserted, made_cgroup, added_chain, took_shared;
    char *hide[RUN_MAX_HIDE];
    size_t n_hide;
    char *expose[RUN_MAX_EXPOSE]; /* granted dirs under a private /tmp root */
    size_t n_expose;
    gid_t gid;             /* the caller's guard gid: the agent's gid */
    char *socks[RUN_MAX_SOCKETS]; /* sockets let through (--allow-socket) */
    size_t n_socks;
    struct prot_list prot; /* entries of home kept read-only, with their pins */
    struct spawn_cover covers[PROT_MAX];
    /* A refusal decided while the thread has the caller's file-system
     * identity: sent once it is root again (nothing writes lyhd's own files
     * in between, and the refusal is logged and audited). */
    int err_code;
    char err[1000];
    struct fs_ident root_ident; /* root's, while paths are looked up as the caller */
};

static int fail(struct rpc_call *call, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct rpc_call *call, int code, const char *fmt, ...) {
    char msg[1000];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    rpc_fail(call, code, "%s", msg);
    return -1;
}

/* Record a refusal for later (see run_prep.err). The first one wins. */
static int pfail(struct run_prep *p, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int pfail(struct run_prep *p, int code, const char *fmt, ...) {
    va_list ap;

    if (p->err_code)
        return -1;
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof(p->err), fmt, ap);
    va_end(ap);
    p->err_code = code;
    return -1;
}

/* The private /tmp, /var/tmp and /dev/shm are bind mounts of the tmpdir's
 * subdirectories: Landlock decides at a mount's root and does not see the
 * tmpdir above it, so each needs its own rule. Opened as root, through
 * lyhd's directory's fd: that is root's alone (0700, so no user can hold its
 * lock), where the caller's identity cannot go. */
static int tmp_rules(struct lyhd *d, const struct session *s, int ruleset, uint64_t handled) {
    const char *name = strrchr(s->row.tmpdir, '/');
    if (!name)
        return -EINVAL;
    _cleanup_close_ int tfd =
        openat(d->tmp_fd, name + 1, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tfd < 0)
        return -errno;
    for (size_t i = 0; i < SPAWN_TMP_N; i++) {
        _cleanup_close_ int fd =
            openat(tfd, spawn_tmp_subs[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return -errno;
        int k = ll_ruleset_add_dir(ruleset, handled, fd);
        if (k < 0)
            return k;
    }
    return 0;
}

/* Resolve paths as the caller from here (fsuid, fsgid, the groups the kernel
 * recorded at connect) until as_root_again(saved). */
static int as_caller(struct rpc_call *call, struct fs_ident *saved) {
    int k = fs_ident_enter(call->peer.uid, call->peer.gid, call->peer_groups, call->n_peer_groups,
                           saved);
    if (k < 0)
        rpc_fail(call, LIANYAOHU__V1__CODE__INTERNAL,
                 "cannot look up your paths with your own identity: %s", strerror(-k));
    return k;
}

/* A daemon thread left with a user's file-system identity would go on to
 * write its own files as that user: a broken invariant, so fatal. */
static void as_root_again(const struct fs_ident *saved) {
    int k = fs_ident_leave(saved);
    if (k < 0)
        log_fatal("cannot return to root's file-system identity: %s", strerror(-k));
}

/* ---- validation --------------------------------------------------------------- */

static int check_argv(struct rpc_call *call, const Lianyaohu__V1__RunRequest *r) {
    size_t total = 0;

    if (r->n_argv == 0)
        return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "no command to run");
    if (r->n_argv > RUN_MAX_ARGV)
        return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                    "too many arguments (%zu; at most %u)", r->n_argv, RUN_MAX_ARGV);
    for (size_t i = 0; i < r->n_argv; i++) {
        size_t n = strlen(r->argv[i]);
        if (n > RUN_MAX_ARG_BYTES)
            return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                        "argument %zu is %zu bytes (at most %u)", i, n, RUN_MAX_ARG_BYTES);
        total += n + 1;
    }
    if (r->argv[0][0] == '\0')
        return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "the command name is empty");
    if (total > RUN_MAX_ARGV_TOTAL)
        return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                    "arguments total %zu bytes (at most %u)", total, RUN_MAX_ARGV_TOTAL);
    return 0;
}

static int check_dests(struct rpc_call *call, const char *what, Lianyaohu__V1__DestRule **in,
                       size_t n, bool must_be_lan, struct dr_rule *out, size_t *ret_n) {
    char why[400];
    if (dests_from_msg(what, in, n, GSPEC_MAX_DESTS, must_be_lan, out, why, sizeof(why)) < 0)
        return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "%s", why);
    *ret_n = n;
    return 0;
}

/* The admin policy's ceiling (daemon/policy.h): a request over it is refused
 * naming the policy key, never narrowed silently. */
static int check_policy(struct lyhd *d, struct rpc_call *call, const Lianyaohu__V1__RunRequest *r,
                        const struct policy *pol) {
    const int denied = LIANYAOHU__V1__CODE__PERMISSION_DENIED;

    if (r->no_firewall && !pol->permit_no_firewall)
        return fail(call, denied, "policy: --no-firewall is not permitted (permit_no_firewall is off, "
                                  "policy version %llu)", (unsigned long long)pol->version);
    if (r->shared_user_firewall && !pol->permit_shared_user_firewall)
        return fail(call, denied,
                    "policy: --shared-user-firewall is not permitted (permit_shared_user_firewall is "
                    "off, policy version %llu)", (unsigned long long)pol->version);
    if (r->allow_non_default_route && !pol->permit_non_default_route)
        return fail(call, denied,
                    "policy: --allow-non-default-route is not permitted "
                    "(permit_allow_non_default_route is off, policy version %llu)",
                    (unsigned long long)pol->version);
    /* A name that is not plain is refused by the VPN check with its reason. */
    if (!r->no_firewall && ifc_name_supported(r->interface) && !policy_iface_ok(pol, r->interface)) {
        char pats[400];
        policy_patterns_text(pol, pats, sizeof(pats));
        return fail(call, denied, "policy: interface '%s' does not match allowed_interface_patterns (%s)",
                    r->interface, pats);
    }
    if (pol->max_sessions_per_uid && !r->print_firewall) {
        unsigned live = session_count(d, false, call->peer.uid);
        if (live >= pol->max_sessions_per_uid)
            return fail(call, denied,
                        "policy: uid %u has %u running session(s); max_sessions_per_uid is %u",
                        call->peer.uid, live, pol->max_sessions_per_uid);
    }
    return 0;
}

/* The fds a launch needs for a moment (tmpdir, cgroup dir and cgroup.procs,
 * the Landlock ruleset, the exec status pipe, the pidfd, the stdio copies). */
#define RUN_LAUNCH_FDS 10u

/* lyhd's open-file budget. Every running session holds 1 to 3 fds (pidfd,
 * exec status pipe until exec, pty) and its client's connection one. Kept
 * back: a reserve for lyhd's own work (state.db, audit.db, netlink, new
 * connections, a launch), and one user may hold at most half of the rest, so
 * a user running hundreds of sessions can never take the fds other users'
 * launches need (issue: one user reached 481 sessions and another's lyh run
 * failed with "Too many open files"). */
static int check_fd_budget(struct lyhd *d, struct rpc_call *call) {
    unsigned limit = d->fd_limit, reserve, share, mine = 0, all = 0;
    struct session *s;

    if (limit == 0)
        return 0; /* not measured (tests that run no main) */
    reserve = limit / 8 > 16 ? limit / 8 : 16;
    TAILQ_FOREACH(s, &d->sessions, link) {
        unsigned n = session_fds(s);
        all += n;
        if (s->row.uid == call->peer.uid)
            mine += n;
    }
    mine += server_conn_count_uid(d->server, call->peer.uid) + closer_pending(d->closer, call->peer.uid);
    all += server_conn_count(d->server) + closer_total_pending(d->closer);
    share = limit > reserve + d->fd_base ? (limit - reserve - d->fd_base) / 2 : 0;
    if (call->peer.uid != 0 && mine + RUN_LAUNCH_FDS > share)
        return fail(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                    "your sessions and connections hold %u of lyhd's file descriptors and one "
                    "user may hold at most %u (half of what lyhd can give out, so other users can "
                    "still start theirs); end a session first",
                    mine, share);
    if (d->fd_base + all + RUN_LAUNCH_FDS + reserve > limit)
        return fail(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                    "lyhd is close to its open-file limit (%u, %u in use); try again when sessions "
                    "have ended, or raise LimitNOFILE",
                    limit, d->fd_base + all);
    return 0;
}

/* LAN exceptions must be inside lan_allow_ceiling and clear of always_deny;
 * always_deny joins the session's deny rules. */
static int apply_policy_dests(struct rpc_call *call, const struct policy *pol, struct gspec *spec) {
    char why[POLICY_WHY_MAX];

    for (size_t i = 0; i < spec->n_lan; i++)
        if (!policy_lan_ok(pol, &spec->lan[i], why, sizeof(why)))
            return fail(call, LIANYAOHU__V1__CODE__PERMISSION_DENIED, "%s", why);
    if (spec->n_deny + pol->n_always_deny > GSPEC_MAX_DESTS)
        return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                    "too many deny rules: %zu of yours and %zu of the policy's always_deny (at most "
                    "%u together)",
                    spec->n_deny, pol->n_always_deny, GSPEC_MAX_DESTS);
    for (size_t i = 0; i < pol->n_always_deny; i++)
        spec->deny[spec->n_deny++] = pol->always_deny[i];
    return 0;
}

/* Proxy-only mode (RunRequest.proxy): no VPN interface; the session reaches
 * its proxy (a LAN exception of one port, checked against the policy with the
 * others by apply_policy_dests) and its own listeners, nothing else: no DNS
 * (the proxy resolves names), no VPN, no other LAN exception unless the
 * policy lets the proxy be on the LAN. Text of the proxy into ret_text. */
static int add_proxy(struct lyhd *d, struct rpc_call *call, const Lianyaohu__V1__RunRequest *r,
                     const struct policy *pol, struct gspec *spec, char ret_text[DR_FORMAT_MAX]) {
    const int bad = LIANYAOHU__V1__CODE__INVALID_ARGUMENT;
    const int denied = LIANYAOHU__V1__CODE__PERMISSION_DENIED;
    unsigned long long ver = (unsigned long long)pol->version;
    const Lianyaohu__V1__DestRule *m = r->proxy;
    char why[DR_WHY_MAX], txt[DR_FORMAT_MAX];
    struct dr_rule px;

    if (pol->forbid_proxy_only)
        return fail(call, denied,
                    "policy: proxy-only mode (--vpn none) is forbidden (forbid_proxy_only is on, "
                    "policy version %llu); pick a VPN interface",
                    ver);
    if (r->no_firewall || r->interface[0] || r->shared_user_firewall)
        return fail(call, bad,
                    "proxy-only mode (--vpn none) has no VPN interface and a firewall of the "
                    "session's own; it cannot be combined with %s",
                    r->no_firewall ? "--no-firewall" : r->interface[0] ? "an interface"
                                                                       : "--shared-user-firewall");
    if (r->n_allow || r->n_deny || r->n_dns || r->n_allow_domains || r->allow_non_default_route)
        return fail(call, bad,
                    "proxy-only mode (--vpn none) reaches its proxy and nothing else: "
                    "--allow-dest, --deny-dest, --dns, --allow-domain and "
                    "--allow-non-default-route do not apply; drop them or pick a VPN");
    if (!d->guard->have_cgroup)
        return fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                    "proxy-only mode needs a firewall chain of the session's own (cgroup v2), "
                    "which lyhd does not have here; see `lyh doctor`");
    if (dr_from_parts(m->addr.data, m->addr.len, m->prefix_len, m->port_min, m->port_max, &px,
                      why, sizeof(why)) < 0)
        return fail(call, bad, "proxy: %s", why);
    if (px.prefix_len != (px.family == AF_INET ? 32 : 128) || px.port_min == 0 ||
        px.port_max != px.port_min)
        return fail(call, bad, "proxy: one address and one port, such as 127.0.0.1:3128");
    dr_format(&px, txt, sizeof(txt));
    if (!dr_is_loopback(&px) && !dr_in_blocked_ranges(&px))
        return fail(call, bad,
                    "proxy: %s is neither on this machine nor on the LAN; a proxy elsewhere is "
                    "reached through a VPN: pick one instead of --vpn none",
                    txt);
    /* the proxy and the user's LAN exceptions alike: with no VPN, a LAN
     * address is where the agent's traffic leaves this machine */
    for (size_t i = 0; i <= spec->n_lan; i++) {
        const struct dr_rule *x = i < spec->n_lan ? &spec->lan[i] : &px;
        char xt[DR_FORMAT_MAX];
        if (dr_is_loopback(x) || pol->permit_lan_proxy)
            continue;
        dr_format(x, xt, sizeof(xt));
        return fail(call, denied,
                    "policy: %s %s is not on this machine (127.0.0.1 or ::1); in proxy-only mode "
                    "the admin policy allows loopback only (permit_lan_proxy is off, policy "
                    "version %llu); run the proxy on this machine",
                    i < spec->n_lan ? "LAN exception" : "the proxy", xt, ver);
    }
    if (spec->n_lan >= GSPEC_MAX_DESTS)
        return fail(call, bad, "too many LAN exceptions for proxy-only mode (at most %d)",
                    GSPEC_MAX_DESTS - 1);
    spec->lan[spec->n_lan++] = px;
    spec->deny_default = true;
    memcpy(ret_text, txt, sizeof(txt));
    return 0;
}

/* Home from the passwd entry of the peer uid: a directory the user owns. */
static int lookup_home(struct rpc_call *call, uid_t uid, struct run_prep *p) {
    struct passwd pw, *res = NULL;
    char buf[4096];
    _cleanup_close_ int fd = -1;
    struct stat st;

    if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
        return fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                    "uid %u has no passwd entry; lyh runs agents for real users only", uid);
    if (pw.pw_dir[0] != '/' || strlen(pw.pw_dir) >= sizeof(p->home))
        return fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                    "home directory of uid %u ('%s') is not an absolute path", uid, pw.pw_dir);
    fd = open(pw.pw_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != uid)
        return fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                    "home directory %s of uid %u is not a directory owned by that user", pw.pw_dir,
                    uid);
    snprintf(p->home, sizeof(p->home), "%s", pw.pw_dir);
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
static int expose_if_private(struct run_prep *p, const char *what, const char *path, bool is_dir) {
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

static int check_cwd(struct run_prep *p, const char *cwd) {
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

static int check_paths(struct lyhd *d, uid_t caller, struct run_prep *p,
                       const Lianyaohu__V1__RunRequest *r,
                       const struct policy *pol) {
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
        int near = homes_near_other(d->homes, fd, caller, who, sizeof(who));
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

static int take_stdio(struct rpc_call *call, struct run_prep *p, const Lianyaohu__V1__RunRequest *r) {
    unsigned want = r->pty ? 1 : 3;

    if (call->n_fds != want)
        return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                    "Run with pty=%s carries %u file descriptors, not %u", r->pty ? "true" : "false",
                    want, call->n_fds);
    if (r->pty) {
        p->pty_fd = rpc_take_fd(call, 0);
        if (!isatty(p->pty_fd))
            return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                        "pty=true but the fd passed is not a terminal");
        if (r->rows > 0 && r->cols > 0 && r->rows <= 10000 && r->cols <= 10000) {
            struct winsize ws = {.ws_row = (unsigned short)r->rows, .ws_col = (unsigned short)r->cols};
            (void)ioctl(p->pty_fd, TIOCSWINSZ, &ws);
        }
    } else {
        for (unsigned i = 0; i < 3; i++)
            p->stdio[i] = rpc_take_fd(call, i);
    }
    return 0;
}

static bool group_dropped(struct lyhd *d, gid_t g) {
    if (lyhd_guard_gid(&d->cfg, g) || (d->cfg.admin_group && g == d->cfg.admin_gid))
        return true;
    for (size_t i = 0; i < d->n_drop_gids; i++)
        if (d->drop_gids[i] == g)
            return true;
    return false;
}

/* The guard gid of uid's agents: its own, so that no two users' agents share
 * a group (files an agent makes belong to it; with one gid for all, user A's
 * agent could read user B's agent's 0640 files). Given on the first launch
 * and kept in state.db for good (one small transaction, once per user); a
 * recorded gid outside today's range (--guard-gid changed) is given anew. */
static int user_guard_gid(struct lyhd *d, struct rpc_call *call, uid_t uid, gid_t *ret) {
    uint32_t g = 0;
    int r = store_guard_gid_get(d->store, uid, &g);

    if (r == 0 && g > d->cfg.guard_gid && g <= d->cfg.guard_gid_max) {
        *ret = g;
        return 0;
    }
    if (r < 0 && r != -ENOENT)
        return fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "state.db: %s",
                    store_errmsg(d->store));
    r = store_begin(d->store);
    if (r == 0)
        r = store_guard_gid_free(d->store, d->cfg.guard_gid + 1, d->cfg.guard_gid_max, &g);
    if (r == 0)
        r = store_guard_gid_set(d->store, uid, g);
    if (r == 0)
        r = store_commit(d->store);
    if (r < 0) {
        int code = r == -ENOSPC ? LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED
                                : LIANYAOHU__V1__CODE__UNAVAILABLE;
        fail(call, code, "cannot give you a guard gid: %s", store_errmsg(d->store));
        store_rollback(d->store);
        return -1;
    }
    log_info("uid %u: agents run with guard gid %u", uid, g);
    *ret = g;
    return 0;
}

/* The child's supplementary groups: the peer's own (as the kernel recorded
 * them at connect), never the admin group, the guard gid or a group whose
 * membership would let the agent around the sandbox (see main.c). */
static void pick_groups(struct lyhd *d, struct rpc_call *call, struct run_prep *p) {
    p->n_groups = 0;
    for (size_t i = 0; i < call->n_peer_groups && p->n_groups < ARRAY_SIZE(p->groups); i++) {
        gid_t g = call->peer_groups[i];
        if (group_dropped(d, g))
            continue;
        p->groups[p->n_groups++] = g;
    }
    /* The user's primary group stays as a supplementary one, so group-owned
     * files keep working; the primary gid itself becomes the guard gid. */
    if (!group_dropped(d, call->peer.gid) && p->n_groups < ARRAY_SIZE(p->groups)) {
        bool dup = false;
        for (size_t i = 0; i < p->n_groups; i++)
            dup |= p->groups[i] == call->peer.gid;
        if (!dup)
            p->groups[p->n_groups++] = call->peer.gid;
    }
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

static void hide_add(struct run_prep *p, const char *path) {
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
static int pick_sockets(struct lyhd *d, struct run_prep *p, const Lianyaohu__V1__RunRequest *r,
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
        if (strcmp(path, d->cfg.socket_path) == 0)
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

static void pick_hidden(struct lyhd *d, struct run_prep *p) {
    struct stat st;

    for (size_t i = 0; i < ARRAY_SIZE(hidden_places); i++)
        if (lstat(hidden_places[i], &st) == 0 && (S_ISDIR(st.st_mode) || S_ISSOCK(st.st_mode)))
            hide_add(p, hidden_places[i]);
    /* lyhd's own socket: it refuses sandboxed peers anyway. */
    if (lstat(d->cfg.socket_path, &st) == 0 && S_ISSOCK(st.st_mode))
        hide_add(p, d->cfg.socket_path);
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
                       struct run_prep *p) {
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
static int pick_protected(struct run_prep *p, const Lianyaohu__V1__RunRequest *r,
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
    if (prot_collect(p->home, p->s->row.uid, names, n, &p->prot, why, sizeof(why)) < 0)
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

/* What RunStarted says about the paths: a cwd that is the home (all of it
 * writable) or protected (read-only). */
static void path_note(struct session *s, const struct run_prep *p,
                      const Lianyaohu__V1__RunRequest *r) {
    if (strcmp(r->cwd, p->home) == 0)
        snprintf(s->path_note, sizeof(s->path_note),
                 "the working directory is your home, so the agent may write all of it except the "
                 "protected entries (shell start-up files, ~/.ssh, git config, ...)%s; start it "
                 "from a project directory to keep the rest of your home out of its reach",
                 r->narrow_home ? "; --narrow-home does not narrow a session started here" : "");
    else if (prot_covers(&p->prot, r->cwd))
        snprintf(s->path_note, sizeof(s->path_note),
                 "the working directory %.200s is protected: the agent can read it, not write it",
                 r->cwd);
}

/* ---- undo ----------------------------------------------------------------------- */

static void run_prep_free(struct lyhd *d, struct run_prep *p) {
    struct session *s = p->s;

    envp_free(p->envp);
    free(p->argv);
    for (size_t i = 0; i < p->n_hide; i++)
        free(p->hide[i]);
    for (size_t i = 0; i < p->n_expose; i++)
        free(p->expose[i]);
    prot_list_clear(&p->prot);
    for (size_t i = 0; i < p->n_socks; i++)
        free(p->socks[i]);
    ll_policy_free(&p->ll);
    ll_report_free(&p->ll_report);
    CLOSE_FD(p->ll_fd);
    CLOSE_FD(p->procs_fd);
    CLOSE_FD(p->cg_dir_fd);
    /* The client's fds (the child has its own copies by now): off the loop. */
    for (int i = 0; i < 3; i++)
        closer_close(d->closer, p->uid, TAKE_FD(p->stdio[i]));
    closer_close(d->closer, p->uid, TAKE_FD(p->pty_fd));
    if (!s)
        return;
    /* Reverse order of creation. */
    if (p->added_chain && guard_session_del(d, s) < 0)
        log_error("undo: removing chain of session '%s' failed", s->row.id);
    if (p->made_cgroup)
        (void)cg_remove(&d->guard->cg, s->row.id);
    if (p->took_shared) {
        struct store_guard g;
        if (guard_shared_release(d, s->row.uid, s->row.scope, &g) < 0)
            log_error("undo: releasing the firewall of uid %u failed", s->row.uid);
    }
    if (p->made_tmpdir) {
        /* Nothing ran in it yet, but its user may hold a lock of it
         * already (fs_remove_tree_as): a remover, never an rmdir here. */
        session_tmpdir_remove(d, s->row.tmpdir, s->row.uid);
    }
    if (p->row_inserted) {
        s->row.state = STORE_SESSION_ENDED;
        s->row.ended_ms = lyhd_wall_ms();
        if (store_begin(d->store) == 0 && store_session_update(d->store, &s->row) == 0)
            (void)store_commit(d->store);
        else
            store_rollback(d->store);
    }
    session_free(s);
    p->s = NULL;
}

struct routed_via {
    struct route_sock *rs;
    int ifindex;
};

static bool routed_via(int family, const uint8_t *addr, void *ud) {
    const struct routed_via *rv = ud;
    int oif = 0;
    return route_get_oif(rv->rs, family, addr, &oif) == 0 && oif == rv->ifindex;
}

/* One of this machine's own addresses (tun0's, say): the kernel routes it
 * through lo, and lyhd's query would be answered by whatever listens here,
 * not by the VPN's resolver. */
static bool this_machine(struct lyhd *d, int family, const uint8_t *addr) {
    int oif = 0;
    unsigned lo = if_nametoindex("lo");
    return route_get_oif(d->guard->route, family, addr, &oif) == 0 && lo && oif == (int)lo;
}

/* The resolvers of a session whose DNS lyhd forwards: the request's (the
 * user's --dns / network.dns; under an admin's dns_resolvers, each one of
 * them), else the admin's that are routed through the interface, else what
 * the system says about the interface. None: refused, with the fix. */
static int pick_resolvers(struct lyhd *d, struct rpc_call *call, const Lianyaohu__V1__RunRequest *r,
                          const struct policy *pol, struct session *s, char *source,
                          size_t sourcelen) {
    struct gspec *g = &s->spec;
    unsigned ifindex = if_nametoindex(g->iface);
    struct routed_via rv = {.rs = d->guard->route, .ifindex = (int)ifindex};

    g->n_resolvers = 0;
    if (r->n_dns > GSPEC_MAX_RESOLVERS)
        return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                    "too many resolvers (%zu; at most %d)", r->n_dns, GSPEC_MAX_RESOLVERS);
    for (size_t i = 0; i < r->n_dns; i++) {
        struct dr_rule *d0 = &g->resolvers[g->n_resolvers];
        memset(d0, 0, sizeof(*d0));
        if (dns_addr_parse(r->dns[i], &d0->family, d0->addr, NULL) < 0)
            return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                        "--dns '%s' is not a resolver's address (an IPv4 or IPv6 address, not "
                        "loopback, link-local or multicast)",
                        r->dns[i]);
        d0->prefix_len = d0->family == AF_INET ? 32 : 128;
        if (this_machine(d, d0->family, d0->addr))
            return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                        "--dns '%s' is an address of this machine: lyhd would ask a service "
                        "here, not the VPN's resolver; name the resolver beyond the VPN",
                        r->dns[i]);
        bool listed = pol->n_resolvers == 0;
        for (size_t k = 0; k < pol->n_resolvers && !listed; k++)
            listed = pol->resolvers[k].family == d0->family &&
                     memcmp(pol->resolvers[k].addr, d0->addr, 16) == 0;
        if (!listed)
            return fail(call, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                        "policy: --dns '%s' is not one of the resolvers the admin allows "
                        "(dns_resolvers, policy version %llu; `lyh policy get` shows them); "
                        "leave --dns out to use theirs",
                        r->dns[i], (unsigned long long)pol->version);
        g->n_resolvers++;
    }
    if (g->n_resolvers) {
        snprintf(source, sourcelen, "--dns");
        return 0;
    }
    if (pol->n_resolvers) {
        for (size_t k = 0; k < pol->n_resolvers && g->n_resolvers < GSPEC_MAX_RESOLVERS; k++)
            if (ifindex && routed_via(pol->resolvers[k].family, pol->resolvers[k].addr, &rv))
                g->resolvers[g->n_resolvers++] = pol->resolvers[k];
        if (g->n_resolvers == 0)
            return fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                        "none of the resolvers the admin names (dns_resolvers, policy version "
                        "%llu) is reached through %s, so the agent could not resolve names "
                        "through it: ask the admin, or pick the interface their resolvers are "
                        "behind",
                        (unsigned long long)pol->version, g->iface);
        snprintf(source, sourcelen, "the admin policy");
        return 0;
    }
    size_t n = 0;
    if (ifindex == 0 || dnscfg_system(g->iface, (int)ifindex, d->cfg.resolv_conf, routed_via, &rv,
                                      g->resolvers, &n, source, sourcelen) < 0 ||
        n == 0)
        return fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                    "no DNS resolver is known for %s, so the agent could not resolve names "
                    "through it: name the VPN's resolver with `--dns ADDRESS` (a private "
                    "address inside the tunnel works) or `dns = [\"ADDRESS\"]` under "
                    "[network] in your config",
                    g->iface);
    /* what the system names may be one of this machine's addresses too */
    char mine[INET6_ADDRSTRLEN] = "";
    g->n_resolvers = 0;
    for (size_t i = 0; i < n; i++) {
        if (!this_machine(d, g->resolvers[i].family, g->resolvers[i].addr))
            g->resolvers[g->n_resolvers++] = g->resolvers[i];
        else if (!mine[0])
            (void)inet_ntop(g->resolvers[i].family, g->resolvers[i].addr, mine, sizeof(mine));
    }
    if (g->n_resolvers == 0)
        return fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                    "the DNS resolver %s names for %s (%s) is an address of this machine: "
                    "lyhd would ask a service here, not the VPN's resolver; name the resolver "
                    "beyond the VPN with `--dns ADDRESS` or `dns = [\"ADDRESS\"]` under "
                    "[network] in your config",
                    source, g->iface, mine);
    return 0;
}

/* The domain allowlist, canonical, into the spec. */
static int pick_domains(struct rpc_call *call, const Lianyaohu__V1__RunRequest *r,
                        const struct policy *pol, struct session *s) {
    if (r->n_allow_domains > GSPEC_MAX_DOMAINS)
        return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                    "too many allowed domains (%zu; at most %d)", r->n_allow_domains,
                    GSPEC_MAX_DOMAINS);
    for (size_t i = 0; i < r->n_allow_domains; i++) {
        char canon[DNS_PATTERN_MAX], why[160];
        if (dn_pattern_check(r->allow_domains[i], canon, why, sizeof(why)) < 0)
            return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "--allow-domain '%s': %s",
                        r->allow_domains[i], why);
        if (!policy_domain_pattern_ok(pol, canon))
            return fail(call, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                        "policy: --allow-domain '%s' is outside the names the admin allows "
                        "(allowed_domains, policy version %llu; `lyh policy get` shows them)",
                        canon, (unsigned long long)pol->version);
        bool dup = false;
        const char *p = s->spec.domains;
        for (size_t k = 0; k < s->spec.n_domains && !dup; k++, p += strlen(p) + 1)
            dup = strcmp(p, canon) == 0;
        if (!dup && gspec_add_domain(&s->spec, canon) < 0)
            return fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                        "the allowed domains take more than %d bytes together; allow a parent "
                        "with '*.' instead of many names",
                        GSPEC_DOMAIN_BYTES);
    }
    /* Under a ceiling, a session that names no domains gets the ceiling */
    for (size_t i = 0; r->n_allow_domains == 0 && i < pol->n_domain_ceiling; i++)
        if (gspec_add_domain(&s->spec, pol->domain_ceiling[i]) < 0)
            return fail(call, LIANYAOHU__V1__CODE__INTERNAL, "the policy's domains do not fit");
    return 0;
}

static int commit_row(struct lyhd *d, struct session *s, bool insert) {
    int r = store_begin(d->store);

    if (r == 0)
        r = insert ? store_session_insert(d->store, &s->row) : store_session_update(d->store, &s->row);
    if (r == 0)
        r = store_commit(d->store);
    if (r < 0)
        store_rollback(d->store);
    return r;
}

/* ---- the call --------------------------------------------------------------------- */

static void run_on_disconnect(struct rpc_call *call) {
    struct session *s = call->state;

    call->state = NULL;
    if (s)
        session_hangup(s);
}

static void print_firewall(struct lyhd *d, struct rpc_call *call, struct session *s) {
    struct nftr_chain *c = NULL;
    char *text = NULL;
    Lianyaohu__V1__RunEvent ev = LIANYAOHU__V1__RUN_EVENT__INIT;
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
    int r;

    s->row.cgroup_id = 1; /* a placeholder: the real id exists only once the cgroup does */
    r = guard_render_session(d, s, &c);
    if (r == 0)
        r = nftr_chain_text(c, &text);
    nftr_chain_free(c);
    if (r < 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "cannot render the rules: %s",
                 strerror(-r));
        return;
    }
    ev.event_case = LIANYAOHU__V1__RUN_EVENT__EVENT_FIREWALL;
    ev.firewall = text;
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_RUN_EVENT;
    resp.run_event = &ev;
    rpc_send(call, &resp, true);
    free(text);
}

void rpc_run(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    const Lianyaohu__V1__RunRequest *r = req->run;
    struct run_prep p = {.ll_fd = -1, .procs_fd = -1, .cg_dir_fd = -1, .stdio = {-1, -1, -1},
                         .pty_fd = -1, .uid = call->peer.uid};
    struct session *s = NULL;
    struct spawn_plan plan;
    struct spawn_pending sp = {.gate = -1};
    const struct policy *pol = policy_current(d);
    uint64_t t_entry = lyhd_mono_us();
    char why[512];
    int k;

    /* 1. Who and what. */
    if (call->peer.uid == 0 && !d->cfg.allow_root_run) {
        rpc_fail(call, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                 "lyh does not run agents as root; run lyh as your own user");
        goto out;
    }
    if (d->landlock_abi <= 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                 "this kernel has no Landlock, so the agent cannot be confined to its paths; "
                 "boot with lsm=...,landlock (see `lyh doctor`)");
        goto out;
    }
    if ((unsigned)d->landlock_abi < policy_min_landlock_abi(pol)) {
        if (d->landlock_abi < (int)POLICY_DEFAULT_MIN_LANDLOCK_ABI)
            rpc_fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                     "this kernel's Landlock is ABI %d; below ABI 6 (Linux 6.12) it cannot scope "
                     "abstract Unix sockets and signals, so an agent could reach X11's abstract "
                     "socket and signal your other processes. Boot a newer kernel, or an admin "
                     "may accept this with `min_landlock_abi = %d` in the policy (lyh policy set)",
                     d->landlock_abi, d->landlock_abi);
        else
            rpc_fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                     "policy: this kernel's Landlock is ABI %d, below min_landlock_abi %u "
                     "(policy version %llu); boot a newer kernel",
                     d->landlock_abi, policy_min_landlock_abi(pol),
                     (unsigned long long)pol->version);
        goto out;
    }
    if (check_argv(call, r) < 0 || lookup_home(call, call->peer.uid, &p) < 0)
        goto out;
    if (r->network_default != LIANYAOHU__V1__NETWORK_DEFAULT__NETWORK_DEFAULT_ALLOW &&
        r->network_default != LIANYAOHU__V1__NETWORK_DEFAULT__NETWORK_DEFAULT_DENY) {
        rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "unknown network_default %d",
                 r->network_default);
        goto out;
    }

    if (check_policy(d, call, r, pol) < 0 || (!r->print_firewall && check_fd_budget(d, call) < 0))
        goto out;

    s = calloc(1, sizeof(*s));
    if (!s) {
        rpc_fail(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    s->d = d;
    s->t_us[SESSION_T_ENTRY] = t_entry;
    s->row.policy_version = pol->version;
    s->accept_unlogged = !pol->log_allowed_flows;
    s->pidfd = s->status_fd = s->pty_fd = -1;
    p.s = s;
    if (session_new_id(s->row.id) < 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__INTERNAL, "no randomness for a session id");
        goto out;
    }
    s->row.uid = call->peer.uid;
    s->row.state = STORE_SESSION_STARTING;
    s->row.exit_code = -1;
    s->row.started_ms = lyhd_wall_ms();
    snprintf(s->row.argv0, sizeof(s->row.argv0), "%s", r->argv[0]);
    snprintf(s->row.cwd, sizeof(s->row.cwd), "%s", r->cwd);

    /* 2. Network: interface, routes, policy. */
    s->spec.deny_default =
        r->network_default == LIANYAOHU__V1__NETWORK_DEFAULT__NETWORK_DEFAULT_DENY;
    if (check_dests(call, "LAN exception", r->lan_allow, r->n_lan_allow, true, s->spec.lan,
                    &s->spec.n_lan) < 0 ||
        check_dests(call, "deny", r->deny, r->n_deny, false, s->spec.deny, &s->spec.n_deny) < 0 ||
        check_dests(call, "allow", r->allow, r->n_allow, false, s->spec.allow, &s->spec.n_allow) < 0 ||
        (r->proxy && add_proxy(d, call, r, pol, &s->spec, s->proxy) < 0) ||
        apply_policy_dests(call, pol, &s->spec) < 0)
        goto out;
    if (r->no_firewall) {
        s->row.scope = LIANYAOHU__V1__SCOPE__SCOPE_NONE;
        if (r->interface[0] || r->n_allow || r->n_deny || r->n_lan_allow) {
            rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                     "--no-firewall cannot be combined with an interface or destination rules");
            goto out;
        }
    } else {
        /* Scope: one chain per session (cgroup v2), else one per user shared
         * by the user's sessions (uid + guard gid), or the user-wide one. */
        s->row.scope = r->shared_user_firewall  ? LIANYAOHU__V1__SCOPE__SCOPE_USER
                       : d->guard->have_cgroup ? LIANYAOHU__V1__SCOPE__SCOPE_SESSION
                                               : LIANYAOHU__V1__SCOPE__SCOPE_UID_GID;
        /* A sandboxed socket is decided in `guarded`, never by the user-wide
         * chain; a --shared-user-firewall session gets a chain of its own with
         * the shared rules, found by its cgroup. Without cgroups there is no
         * way to tell its sockets from the user's other sessions'. */
        if (r->shared_user_firewall && !d->guard->have_cgroup) {
            rpc_fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                     "--shared-user-firewall needs cgroup v2, which lyhd does not have here; "
                     "use `lyh install` for your other processes and a plain `lyh run`");
            goto out;
        }
        /* proxy-only: no interface to check (add_proxy checked the rest) */
        k = r->proxy ? 0
                     : guard_check_vpn(d, r->interface, r->allow_non_default_route,
                                       &s->spec.ipv6_blocked, why, sizeof(why));
        if (k < 0) {
            rpc_fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION, "%s", why);
            goto out;
        }
        snprintf(s->row.interface, sizeof(s->row.interface), "%s", r->interface);
        snprintf(s->spec.iface, sizeof(s->spec.iface), "%s", r->interface);
        if (d->guard->have_cgroup)
            snprintf(s->row.chain, sizeof(s->row.chain), "%s%s", NFTR_SESSION_CHAIN_PREFIX,
                     s->row.id);
        /* Its DNS goes to a forwarder of its own (chain dnsnat), which asks
         * these resolvers through the interface. */
        if (r->proxy) {
            /* no DNS: the proxy resolves names (socks5h, CONNECT) */
        } else if (s->row.chain[0] && d->guard->base.dns) {
            char source[80];
            if (pick_resolvers(d, call, r, pol, s, source, sizeof(source)) < 0 ||
                pick_domains(call, r, pol, s) < 0)
                goto out;
            s->wants_dns = true;
            /* its port goes into the spec, and so into the rules; for a
             * printed ruleset a stand-in (nothing listens) */
            if (r->print_firewall) {
                s->spec.dns_port = 53053;
            } else {
                why[0] = '\0';
                k = dns_fwd_start(d, s, why, sizeof(why));
                if (k < 0) {
                    rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "%s", why);
                    goto out;
                }
            }
        } else if (r->n_allow_domains || pol->n_domain_ceiling) {
            rpc_fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                     "a domain allowlist (--allow-domain, or the admin's allowed_domains) needs "
                     "lyhd to forward the session's DNS, which it cannot do here (it needs cgroup "
                     "v2 and nftables NAT; see `lyh doctor`)");
            goto out;
        } else if (r->n_dns) {
            rpc_fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                     "--dns: lyhd cannot forward this session's DNS here (it needs cgroup v2 and "
                     "nftables NAT; see `lyh doctor`)");
            goto out;
        }
        k = gspec_encode(&s->spec, s->row.guard_spec, sizeof(s->row.guard_spec),
                         &s->row.guard_spec_len);
        if (k < 0) {
            rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                     "the session's rules (%zu LAN exceptions, %zu denied and %zu allowed "
                     "destinations, %zu domains) are more than lyhd can record (%d bytes); use "
                     "fewer or wider ones",
                     s->spec.n_lan, s->spec.n_deny, s->spec.n_allow, s->spec.n_domains,
                     STORE_GUARD_SPEC_MAX);
            goto out;
        }
    }
    /* Every session has a cgroup (a --no-firewall one too): it is how all
     * of it is found and killed at its end, setsid descendants included. */
    if (d->guard->have_cgroup &&
        (strlen(d->guard->cg.base) > 200 ||
         (size_t)snprintf(s->row.cgroup, sizeof(s->row.cgroup), "%.200s/%s", d->guard->cg.base,
                          s->row.id) >= sizeof(s->row.cgroup))) {
        rpc_fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                 "lyhd's cgroup path is too long to record (%zu bytes)", strlen(d->guard->cg.base));
        goto out;
    }
    if (r->print_firewall) {
        if (r->no_firewall)
            rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                     "--print-firewall with --no-firewall: there are no rules");
        else
            print_firewall(d, call, s);
        goto out;
    }

    /* 3. Paths and environment (checked before anything is created). */
    /* fits: main.c open_tmp_dir checked tmp_dir's length */
    if (snprintf(s->row.tmpdir, sizeof(s->row.tmpdir), "%s/lyh-%s", d->tmp_dir, s->row.id) >=
        (int)sizeof(s->row.tmpdir)) {
        rpc_fail(call, LIANYAOHU__V1__CODE__INTERNAL, "the tmpdir path is too long");
        goto out;
    }
    /* the tmpdir's rules come by fd once the ruleset is built (tmp_rules) */
    if (ll_policy_default(&(struct ll_defaults){.home = p.home,
                                                .cwd = r->cwd,
                                                .tmpdir = NULL,
                                                .narrow_home = r->narrow_home},
                          &p.ll) < 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "cannot build the path policy");
        goto out;
    }
    /* The request's paths are looked up with the caller's file-system
     * identity, not root's: whatever the answer, it is one the caller could
     * have had by trying (a root lookup would tell whether something exists
     * in a directory the caller cannot read). */
    if (as_caller(call, &p.root_ident) < 0)
        goto out;
    if (check_cwd(&p, r->cwd) == 0 && check_paths(d, call->peer.uid, &p, r, pol) == 0 &&
        pick_denied(r, &p) == 0 && pick_protected(&p, r, pol) == 0 &&
        pick_sockets(d, &p, r, pol) == 0)
        pick_hidden(d, &p);
    as_root_again(&p.root_ident);
    if (p.err_code) {
        rpc_fail(call, p.err_code, "%s", p.err);
        goto out;
    }
    path_note(s, &p, r);
    for (size_t i = 0; i < p.n_socks; i++) {
        size_t used = strlen(s->sockets);
        snprintf(s->sockets + used, sizeof(s->sockets) - used, "%s%s", i ? ", " : "", p.socks[i]);
    }
    if (take_stdio(call, &p, r) < 0)
        goto out;
    {
        struct envp_var vars[ENVP_MAX_VARS];
        if (r->n_env > ENVP_MAX_VARS) {
            rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "too many variables (%zu; at most %u)",
                     r->n_env, ENVP_MAX_VARS);
            goto out;
        }
        for (size_t i = 0; i < r->n_env; i++)
            vars[i] = (struct envp_var){.name = r->env[i]->name, .value = r->env[i]->value};
        struct envp_input ein = {.explicit_vars = vars,
                                 .n_explicit = r->n_env,
                                 .home = p.home,
                                 .pwd = r->cwd,
                                 /* its private /tmp (spawn.h private_tmp) */
                                 .tmpdir = "/tmp"};
        const char *extra[POLICY_MAX_ENV];
        for (size_t i = 0; i < pol->n_env_block; i++)
            extra[i] = pol->env_block[i];
        ein.extra_block = extra;
        ein.n_extra_block = pol->n_env_block;
        k = envp_build(&ein, &p.envp, why, sizeof(why));
        if (k < 0) {
            rpc_fail(call,
                     k == -EPERM ? LIANYAOHU__V1__CODE__PERMISSION_DENIED
                                 : LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                     "%s", why);
            goto out;
        }
    }
    pick_groups(d, call, &p);
    if (user_guard_gid(d, call, s->row.uid, &p.gid) < 0)
        goto out;

    /* 4. Make things, each recorded first. */
    s->t_us[SESSION_T_CHECKED] = lyhd_mono_us();
    {
        char name[64];
        snprintf(name, sizeof(name), "lyh-%s", s->row.id);
        k = fs_make_private_dir(d->tmp_fd, name, s->row.uid, p.gid,
                                spawn_tmp_subs, SPAWN_TMP_N);
        if (k < 0) {
            rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "cannot create the tmpdir %s: %s",
                     s->row.tmpdir, strerror(-k));
            goto out;
        }
        p.made_tmpdir = true;
    }
    s->t_us[SESSION_T_TMPDIR] = lyhd_mono_us();
    if (commit_row(d, s, true) < 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "state.db: %s", store_errmsg(d->store));
        goto out;
    }
    p.row_inserted = true;
    s->t_us[SESSION_T_ROW] = lyhd_mono_us();
    if (s->row.scope == LIANYAOHU__V1__SCOPE__SCOPE_USER ||
        s->row.scope == LIANYAOHU__V1__SCOPE__SCOPE_UID_GID) {
        struct store_guard g;
        k = guard_shared_acquire(d, s->row.uid, s->row.scope, &s->spec, &g, why, sizeof(why));
        if (k < 0) {
            rpc_fail(call,
                     k == -EEXIST ? LIANYAOHU__V1__CODE__FAILED_PRECONDITION
                                  : LIANYAOHU__V1__CODE__UNAVAILABLE,
                     "%s", why);
            goto out;
        }
        p.took_shared = true;
    }
    if (d->guard->have_cgroup) {
        k = guard_cgroup_create(d, s->row.id, &s->row.cgroup_id, &p.cg_dir_fd, &p.procs_fd);
        if (k < 0) {
            rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "cannot create the session cgroup: %s",
                     strerror(-k));
            goto out;
        }
        p.made_cgroup = true;
        s->has_cgroup = true;
        s->t_us[SESSION_T_CGROUP] = lyhd_mono_us();
    }

    /* 5. Spawn, in two steps where the spawner can (spawner.h): the child
     * makes its mounts while its chain goes in and its ruleset is built, and
     * runs nothing of the agent before the go. A failure from here on is
     * recorded (pfail) and closes the gate instead of sending the go: the
     * child stops there and ends like a session whose set-up failed, with
     * this failure as the answer (session.c on_status). */
    p.argv = calloc(r->n_argv + 1, sizeof(char *));
    if (!p.argv) {
        rpc_fail(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    memcpy(p.argv, r->argv, r->n_argv * sizeof(char *));
    plan = (struct spawn_plan){
        .argv = p.argv,
        .envp = p.envp,
        .stdio = {p.stdio[0], p.stdio[1], p.stdio[2]},
        .pty_fd = p.pty_fd,
        .cgroup_dir_fd = p.cg_dir_fd,
        .cgroup_procs_fd = p.procs_fd,
        .uid = s->row.uid,
        .gid = p.gid,
        .groups = p.groups,
        .n_groups = p.n_groups,
        .landlock_fd = -1, /* built below: it comes with the go */
        .landlock_handled = ll_handled_fs(d->landlock_abi),
        .seccomp = d->seccomp,
        .cwd = r->cwd,
        .hide = (const char *const *)p.hide,
        .n_hide = p.n_hide,
        .private_tmp = s->row.tmpdir,
        .expose = (const char *const *)p.expose,
        .n_expose = p.n_expose,
        .protect = p.covers,
        .n_protect = p.prot.n,
        .sockets = (const char *const *)p.socks,
        .n_sockets = p.n_socks,
    };
    spawner_begin(d, &plan, &sp);
    s->t_us[SESSION_T_BEGUN] = lyhd_mono_us();
    /* The row already names the cgroup and the chain (by session id);
     * their id is recorded with the pid below. A crash in between is safe:
     * the reaper finds the cgroup by name and the map element by the chain
     * it jumps to (guard_session_del). */
    if (d->guard->have_cgroup && s->row.chain[0]) {
        k = guard_session_add(d, s, why, sizeof(why));
        if (k < 0) {
            pfail(&p, LIANYAOHU__V1__CODE__UNAVAILABLE, "%s", why);
        } else {
            p.added_chain = true;
            s->has_chain = true;
        }
    }
    s->t_us[SESSION_T_NFT] = lyhd_mono_us();
    /* The ruleset's paths are opened as the caller too (see as_caller). */
    k = p.err_code ? 0 : fs_ident_enter(call->peer.uid, call->peer.gid, call->peer_groups,
                                        call->n_peer_groups, &p.root_ident);
    if (k < 0) {
        pfail(&p, LIANYAOHU__V1__CODE__INTERNAL,
              "cannot look up your paths with your own identity: %s", strerror(-k));
    } else if (!p.err_code) {
        k = ll_ruleset_build(&p.ll, d->landlock_abi, &p.ll_fd, &p.ll_report, why, sizeof(why));
        as_root_again(&p.root_ident);
        int kt = k == 0 ? tmp_rules(d, s, p.ll_fd, p.ll_report.handled_fs) : 0;
        if (kt < 0)
            pfail(&p, LIANYAOHU__V1__CODE__INTERNAL, "cannot give the agent its private /tmp: %s",
                  strerror(-kt));
        if (k < 0) {
            /* A path of the request is wrong, or the kernel/memory failed us. */
            bool path_error = k == -ENOENT || k == -ENOTDIR || k == -EACCES || k == -ELOOP ||
                              k == -EINVAL || k == -ENAMETOOLONG;
            pfail(&p,
                  path_error ? LIANYAOHU__V1__CODE__INVALID_ARGUMENT
                             : k == -ENOMEM ? LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED
                                            : LIANYAOHU__V1__CODE__INTERNAL,
                  "path policy: %s", why[0] ? why : strerror(-k));
        }
    }
    /* the child was told which rights the ruleset handles before it was
     * built (its devpts rules): they must be the ruleset's */
    if (!p.err_code && p.ll_report.handled_fs != plan.landlock_handled)
        pfail(&p, LIANYAOHU__V1__CODE__INTERNAL,
              "the Landlock ruleset handles other rights than announced (%#llx, not %#llx)",
              (unsigned long long)p.ll_report.handled_fs,
              (unsigned long long)plan.landlock_handled);
    s->t_us[SESSION_T_LANDLOCK] = lyhd_mono_us();
    if (p.err_code && !sp.begun) {
        rpc_fail(call, p.err_code, "%s", p.err);
        goto out;
    }
    k = p.err_code ? spawner_cancel(d, &sp, &plan, &s->pid, &s->pidfd, &s->status_fd)
                   : spawner_go(d, &sp, &plan, p.ll_fd, &s->pid, &s->pidfd, &s->status_fd);
    if (k < 0) {
        if (p.err_code)
            rpc_fail(call, p.err_code, "%s", p.err);
        else
            rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "cannot start the agent: %s",
                     strerror(-k));
        goto out;
    }
    /* The go could not be sent (the child stopped before the gate: EPIPE,
     * ECONNRESET, its status says why; anything else: this is the answer). */
    if (sp.go_err < 0 && sp.go_err != -EPIPE && sp.go_err != -ECONNRESET)
        pfail(&p, LIANYAOHU__V1__CODE__UNAVAILABLE,
              "cannot tell the agent's process to go on: %s", strerror(-sp.go_err));
    if (p.err_code) {
        /* stopped at the gate: its answer once it says so */
        s->start_fail_code = p.err_code;
        snprintf(s->start_fail, sizeof(s->start_fail), "%s", p.err);
    }
    /* From here the session exists: failures end it through teardown. */
    s->t_us[SESSION_T_FORK] = lyhd_mono_us();
    s->started_mono_ms = lyhd_mono_ms();
    (void)proc_start_time(s->pid, &s->row.pid_start);
    s->row.pid = s->pid;
    /* one that stops at the gate never runs: it stays STARTING to its end */
    s->row.state = s->start_fail_code ? STORE_SESSION_STARTING : STORE_SESSION_RUNNING;
    s->pty_fd = TAKE_FD(p.pty_fd);
    s->call = call;
    s->monitor = r->monitor;
    call->state = s;
    call->on_disconnect = run_on_disconnect;
    TAILQ_INSERT_TAIL(&d->sessions, s, link);
    p.s = NULL;
    if (commit_row(d, s, false) < 0)
        log_error("state.db: recording pid of session '%s' failed: %s", s->row.id,
                  store_errmsg(d->store));
    if (session_watch(s) < 0) {
        log_error("cannot watch session '%s'; ending it", s->row.id);
        kill(s->pid, SIGKILL);
        session_teardown(s);
        goto out;
    }
    s->t_us[SESSION_T_RECORDED] = lyhd_mono_us();
    if (s->start_fail_code)
        log_info("session '%s' of uid %u failed after its process was begun (pid %d stops "
                 "before it drops its privileges): %s",
                 s->row.id, s->row.uid, s->pid, s->start_fail);
    else
        log_info("session '%s' started for uid %u: %s in %s via %s (pid %d)", s->row.id,
                 s->row.uid, s->row.argv0, s->row.cwd,
                 s->row.interface[0] ? s->row.interface : "no firewall", s->pid);

out:
    /* a begun launch is always gone or cancelled above, its answer read:
     * one left would give the next launch this one's answer */
    if (sp.begun)
        log_fatal("a launch was left begun at the spawner");
    run_prep_free(d, &p);
}
