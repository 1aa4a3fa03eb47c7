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
 *   validate, env (rpc_run) -> the paths and the Landlock ruleset, by a thread
 *   of their own (run_paths.h), the loop going on meanwhile, making the guard
 *   gid and the tmpdir beside it (make_beside) -> (run_checked)
 *   row (STARTING; names of tmpdir, cgroup and chain; spec)
 *   committed -> cgroup -> spawn begun -> nft chain -> the tmpdir's Landlock
 *   rules -> the go -> row (cgroup id, pid, RUNNING) committed -> Started once
 *   exec succeeded.
 * Any failure before spawn undoes what was made, in reverse, and marks the row
 * ended, so nothing is left behind (no rule, cgroup, dir or fd). */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
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
#include "daemon/policy.h"
#include "daemon/protect.h"
#include "daemon/run_paths.h"
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
_Static_assert(RUN_MAX_ARGV <= SPAWN_MAX_ARGV, "the child runs at most SPAWN_MAX_ARGV arguments");
#define RUN_MAX_ARG_BYTES (64u * 1024u)
#define RUN_MAX_ARGV_TOTAL (512u * 1024u)
/* Everything a launch needs, built up step by step; run_prep_free() undoes
 * what was made when the launch does not happen. On the heap: the launch
 * waits for its paths (run_paths.h) with the loop going on. */
struct run_prep {
    struct lyhd *d;
    struct rpc_call *call;
    struct session *s;
    char home[PATH_MAX];
    char **envp;
    char **argv;       /* the request's argv, copied, NULL-terminated */
    int procs_fd;
    int cg_dir_fd;
    int stdio[3];
    int pty_fd;
    uid_t uid; /* the caller, whose fds stdio and pty_fd are */
    gid_t groups[LYH_MAX_PEER_GROUPS + 1];
    size_t n_groups;
    bool made_tmpdir, row_inserted, made_cgroup, added_chain, took_shared;
    gid_t gid;             /* the caller's guard gid: the agent's gid */
    uint64_t policy_version; /* the policy the launch was checked against */
    bool monitor;          /* the request's */
    /* The paths, looked up by a thread of their own (run_paths.h): the job
     * is running while the launch waits, and the loop's once it is done,
     * with its results (w) and its copy of the request's cwd (w->rq). The
     * request itself is freed when rpc_run returns: what the launch keeps of
     * it is copied (argv, the environment built, the paths). */
    struct run_paths_job *job;
    struct run_paths *w;
    /* A refusal that cannot be sent when it is decided: the work beside
     * the path thread (make_beside), answered after the thread's own
     * refusals; one decided after the spawn began, sent once the child is
     * cancelled. */
    struct run_refusal err;
};
_Static_assert(LYH_MAX_PEER_GROUPS <= FS_IDENT_MAX_GROUPS, "the caller's groups fit a job's");

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

/* A refusal for later (see run_prep.err). */
#define pfail(p, ...) run_refuse(&(p)->err, __VA_ARGS__)

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

/* max_sessions_per_uid. */
static int check_session_cap(struct lyhd *d, struct rpc_call *call, const struct policy *pol) {
    if (pol->max_sessions_per_uid) {
        unsigned live = session_count(d, false, call->peer.uid);
        if (live >= pol->max_sessions_per_uid)
            return fail(call, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                        "policy: uid %u has %u running session(s); max_sessions_per_uid is %u",
                        call->peer.uid, live, pol->max_sessions_per_uid);
    }
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
    if (!r->print_firewall)
        return check_session_cap(d, call, pol);
    return 0;
}

/* The fds a launch needs for a moment (tmpdir, cgroup dir and cgroup.procs,
 * the Landlock ruleset, the exec status pipe, the pidfd, the stdio copies). */
#define RUN_LAUNCH_FDS 10u
#define RUN_WAITING_FDS 4u /* a launch waiting for its paths (run_paths.h) */

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
    /* launches waiting for their paths: their stdio and the job's eventfd
     * (their connections are counted above) */
    mine += run_paths_live(call->peer.uid) * RUN_WAITING_FDS;
    all += run_paths_live((uid_t)-1) * RUN_WAITING_FDS;
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

/* Home from the passwd entry of the peer uid (that it is a directory the
 * user owns is the path job's to check: run_paths.c). */
static int lookup_home(struct rpc_call *call, uid_t uid, struct run_prep *p) {
    struct passwd pw, *res = NULL;
    char buf[4096];

    if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
        return fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                    "uid %u has no passwd entry; lyh runs agents for real users only", uid);
    if (pw.pw_dir[0] != '/' || strlen(pw.pw_dir) >= sizeof(p->home))
        return fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                    "home directory of uid %u ('%s') is not an absolute path", uid, pw.pw_dir);
    snprintf(p->home, sizeof(p->home), "%s", pw.pw_dir);
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
static int user_guard_gid(struct lyhd *d, struct run_refusal *f, uid_t uid, gid_t *ret) {
    uint32_t g = 0;
    int r = store_guard_gid_get(d->store, uid, &g);

    if (r == 0 && g > d->cfg.guard_gid && g <= d->cfg.guard_gid_max) {
        *ret = g;
        return 0;
    }
    if (r < 0 && r != -ENOENT)
        return run_refuse(f, LIANYAOHU__V1__CODE__UNAVAILABLE, "state.db: %s",
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
        run_refuse(f, code, "cannot give you a guard gid: %s", store_errmsg(d->store));
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
    else if (prot_covers(&p->w->prot, r->cwd))
        snprintf(s->path_note, sizeof(s->path_note),
                 "the working directory %.200s is protected: the agent can read it, not write it",
                 r->cwd);
}

/* ---- undo ----------------------------------------------------------------------- */

/* Undo what was made and free p (the path job too, or leave it to its
 * thread when that has not ended). Accepts NULL. */
static void run_prep_free(struct run_prep *p) {
    if (!p)
        return;
    struct lyhd *d = p->d;
    struct session *s = p->s;

    /* the environment and arguments often carry tokens: not left in freed
     * memory (a remover lyhd forks itself copies its memory) */
    for (char **e = p->envp; e && *e; e++)
        explicit_bzero(*e, strlen(*e));
    envp_free(p->envp);
    for (char **a = p->argv; a && *a; a++) {
        explicit_bzero(*a, strlen(*a));
        free(*a);
    }
    free(p->argv);
    run_paths_drop(TAKE_PTR(p->job));
    p->w = NULL;
    CLOSE_FD(p->procs_fd);
    CLOSE_FD(p->cg_dir_fd);
    /* The client's fds (the child has its own copies by now): off the loop. */
    for (int i = 0; i < 3; i++)
        closer_close(d->closer, p->uid, TAKE_FD(p->stdio[i]));
    closer_close(d->closer, p->uid, TAKE_FD(p->pty_fd));
    if (!s) {
        free(p);
        return;
    }
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
    free(p);
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
    /* In the data layout (a default policy: guard-as-data.md) its elements
     * and log chains, which lyhd's base rules read; its loopback slot too is
     * a placeholder then. */
    struct nftr_data *dd = NULL;
    uint32_t slot = s->lo_slot;
    if (!s->lo_slot && d->guard->listeners)
        s->lo_slot = 1;
    r = guard_render_data(d, s, &dd);
    s->lo_slot = slot;
    if (r == 0) {
        char *elems = NULL;
        r = nftr_data_text(dd, &elems);
        if (r == 0 && asprintf(&text,
                               "# the default policy: a session as data, decided by the rules "
                               "every such session shares\n# (nft list table inet " NFTR_TABLE
                               "; docs/guard-as-data.md)\n%s",
                               elems) < 0) {
            text = NULL;
            r = -ENOMEM;
        }
        free(elems);
    } else {
        r = guard_render_session(d, s, &c);
        if (r == 0)
            r = nftr_chain_text(c, &text);
    }
    nftr_data_free(dd);
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

/* The launch, once its paths are looked up (or given up on): the rest of
 * the checks, then what rpc_run's order says. */
static void run_checked(struct run_paths_job *job, bool timed_out, void *ud) {
    struct run_prep *p = ud;
    struct lyhd *d = p->d;
    struct rpc_call *call = p->call;
    struct session *s = p->s;
    struct run_paths *w = run_paths_of(job);
    const Lianyaohu__V1__RunRequest *r = &w->rq; /* the copy: cwd, narrow_home, paths */
    const struct policy *pol = policy_current(d);
    struct spawn_plan plan;
    struct spawn_pending sp = {.gate = -1};
    char why[512];
    int k;

    call->state = NULL;
    call->on_disconnect = NULL;
    if (timed_out) {
        log_info("uid %u: a launch's paths were not looked up within %d s; it fails", p->uid,
                 RUN_PATHS_TIMEOUT_S);
        rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE,
                 "lyhd could not look up this launch's paths within %d s: something holds a lock "
                 "in one of them (a process stuck on a FUSE file system that does not answer, "
                 "say); nothing was started",
                 RUN_PATHS_TIMEOUT_S);
        goto out;
    }
    p->w = w;
    s->t_us[SESSION_T_THREAD] = w->t_began_us;
    s->t_us[SESSION_T_LOOKED_UP] = w->t_looked_up_us;
    s->t_us[SESSION_T_BUILT] = w->t_built_us;
    s->t_us[SESSION_T_HEARD] = lyhd_mono_us();
    /* first: a refusal of the thread's may rest on the old policy's copy */
    if (pol->version != p->policy_version) {
        rpc_fail(call, LIANYAOHU__V1__CODE__ABORTED,
                 "the admin policy changed (version %llu, now %llu) while lyhd looked up this "
                 "launch's paths; run it again",
                 (unsigned long long)p->policy_version, (unsigned long long)pol->version);
        goto out;
    }
    if (w->err.code) {
        rpc_fail(call, w->err.code, "%s", w->err.msg);
        goto out;
    }
    /* Counted again: the launches that waited with this one may have become
     * sessions meanwhile. */
    if (check_session_cap(d, call, pol) < 0 || check_fd_budget(d, call) < 0)
        goto out;
    path_note(s, p, r);
    for (size_t i = 0; i < w->n_socks; i++) {
        size_t used = strlen(s->sockets);
        snprintf(s->sockets + used, sizeof(s->sockets) - used, "%s%s", i ? ", " : "", w->socks[i]);
    }
    pick_groups(d, call, p);
    /* what was made beside the thread (make_beside) */
    if (p->err.code) {
        rpc_fail(call, p->err.code, "%s", p->err.msg);
        goto out;
    }
    /* Its DNS forwarder (see rpc_run), and the spec again with its port
     * (the same size as with the stand-in rpc_run checked). */
    if (s->wants_dns) {
        why[0] = '\0';
        k = dns_fwd_start(d, s, why, sizeof(why));
        if (k < 0) {
            rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "%s", why);
            goto out;
        }
        k = gspec_encode(&s->spec, s->row.guard_spec, sizeof(s->row.guard_spec),
                         &s->row.guard_spec_len);
        if (k < 0) {
            rpc_fail(call, LIANYAOHU__V1__CODE__INTERNAL,
                     "the session's rules with its DNS port do not fit what lyhd records (%d "
                     "bytes); this is a bug",
                     STORE_GUARD_SPEC_MAX);
            goto out;
        }
    }

    /* 4. Make things, each recorded first (the tmpdir was, beside the
     * thread). */
    s->t_us[SESSION_T_CHECKED] = lyhd_mono_us();
    if (commit_row(d, s, true) < 0) {
        rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "state.db: %s", store_errmsg(d->store));
        goto out;
    }
    p->row_inserted = true;
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
        p->took_shared = true;
    }
    if (d->guard->have_cgroup) {
        k = guard_cgroup_create(d, s->row.id, &s->row.cgroup_id, &p->cg_dir_fd, &p->procs_fd);
        if (k < 0) {
            rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "cannot create the session cgroup: %s",
                     strerror(-k));
            goto out;
        }
        p->made_cgroup = true;
        s->has_cgroup = true;
        s->t_us[SESSION_T_CGROUP] = lyhd_mono_us();
    }

    /* 5. Spawn, in two steps where the spawner can (spawner.h): the child
     * makes its mounts while its chain goes in and its ruleset is built, and
     * runs nothing of the agent before the go. A failure from here on is
     * recorded (run_refuse) and closes the gate instead of sending the go: the
     * child stops there and ends like a session whose set-up failed, with
     * this failure as the answer (session.c on_status). */
    plan = (struct spawn_plan){
        .argv = p->argv,
        .envp = p->envp,
        .stdio = {p->stdio[0], p->stdio[1], p->stdio[2]},
        .pty_fd = p->pty_fd,
        .cgroup_dir_fd = p->cg_dir_fd,
        .cgroup_procs_fd = p->procs_fd,
        .uid = s->row.uid,
        .gid = p->gid,
        .groups = p->groups,
        .n_groups = p->n_groups,
        .landlock_fd = -1, /* built below: it comes with the go */
        .landlock_handled = ll_handled_fs(d->landlock_abi),
        .seccomp = d->seccomp,
        .cwd = w->rq.cwd,
        .hide = (const char *const *)w->hide,
        .n_hide = w->n_hide,
        .private_tmp = s->row.tmpdir,
        .expose = (const char *const *)w->expose,
        .n_expose = w->n_expose,
        .protect = w->covers,
        .n_protect = w->prot.n,
        .sockets = (const char *const *)w->socks,
        .n_sockets = w->n_socks,
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
            pfail(p, LIANYAOHU__V1__CODE__UNAVAILABLE, "%s", why);
        } else {
            p->added_chain = true;
            s->has_chain = true;
        }
    }
    s->t_us[SESSION_T_NFT] = lyhd_mono_us();
    /* The ruleset came built from the path job; the tmpdir's rules go in by
     * fd, as root (tmp_rules). */
    if (!p->err.code) {
        k = tmp_rules(d, s, w->ll_fd, w->ll_report.handled_fs);
        if (k < 0)
            pfail(p, LIANYAOHU__V1__CODE__INTERNAL, "cannot give the agent its private /tmp: %s",
                  strerror(-k));
    }
    /* the child was told which rights the ruleset handles before it was
     * built (its devpts rules): they must be the ruleset's */
    if (!p->err.code && w->ll_report.handled_fs != plan.landlock_handled)
        pfail(p, LIANYAOHU__V1__CODE__INTERNAL,
              "the Landlock ruleset handles other rights than announced (%#llx, not %#llx)",
              (unsigned long long)w->ll_report.handled_fs,
              (unsigned long long)plan.landlock_handled);
    s->t_us[SESSION_T_LANDLOCK] = lyhd_mono_us();
    if (p->err.code && !sp.begun) {
        rpc_fail(call, p->err.code, "%s", p->err.msg);
        goto out;
    }
    k = p->err.code ? spawner_cancel(d, &sp, &plan, &s->pid, &s->pidfd, &s->status_fd)
                   : spawner_go(d, &sp, &plan, w->ll_fd, &s->pid, &s->pidfd, &s->status_fd);
    if (k < 0) {
        if (p->err.code)
            rpc_fail(call, p->err.code, "%s", p->err.msg);
        else
            rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "cannot start the agent: %s",
                     strerror(-k));
        goto out;
    }
    /* The go could not be sent (the child stopped before the gate: EPIPE,
     * ECONNRESET, its status says why; anything else: this is the answer). */
    if (sp.go_err < 0 && sp.go_err != -EPIPE && sp.go_err != -ECONNRESET)
        pfail(p, LIANYAOHU__V1__CODE__UNAVAILABLE,
              "cannot tell the agent's process to go on: %s", strerror(-sp.go_err));
    if (p->err.code) {
        /* stopped at the gate: its answer once it says so */
        s->start_fail_code = p->err.code;
        snprintf(s->start_fail, sizeof(s->start_fail), "%s", p->err.msg);
    }
    /* From here the session exists: failures end it through teardown. */
    s->t_us[SESSION_T_FORK] = lyhd_mono_us();
    s->child_way = spawn_way_name(sp.way);
    s->started_mono_ms = lyhd_mono_ms();
    (void)proc_start_time(s->pid, &s->row.pid_start);
    s->row.pid = s->pid;
    /* one that stops at the gate never runs: it stays STARTING to its end */
    s->row.state = s->start_fail_code ? STORE_SESSION_STARTING : STORE_SESSION_RUNNING;
    s->pty_fd = TAKE_FD(p->pty_fd);
    s->call = call;
    s->monitor = p->monitor;
    call->state = s;
    call->on_disconnect = run_on_disconnect;
    TAILQ_INSERT_TAIL(&d->sessions, s, link);
    p->s = NULL;
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
    run_prep_free(p);
}

/* What a launch makes that does not rest on its paths, on the loop while the
 * path thread looks them up (on two CPUs the two run side by side): the
 * caller's guard gid, then the private tmpdir (before the row, as it always
 * was: a tmpdir without a row is swept at lyhd's start). A failure waits in
 * p->err for run_checked, which answers it after the thread's refusals, in
 * the order the checks had when they ran one after the other. */
static void make_beside(struct lyhd *d, struct run_prep *p) {
    struct session *s = p->s;
    char name[64];
    int k;

    if (user_guard_gid(d, &p->err, s->row.uid, &p->gid) < 0)
        return;
    snprintf(name, sizeof(name), "lyh-%s", s->row.id);
    k = fs_make_private_dir(d->tmp_fd, name, s->row.uid, p->gid, spawn_tmp_subs, SPAWN_TMP_N);
    if (k < 0) {
        pfail(p, LIANYAOHU__V1__CODE__UNAVAILABLE, "cannot create the tmpdir %s: %s",
              s->row.tmpdir, strerror(-k));
        return;
    }
    p->made_tmpdir = true;
    s->t_us[SESSION_T_TMPDIR] = lyhd_mono_us();
}

/* The client went away (or cancelled) while the paths were looked up:
 * nothing was made yet but the tmpdir (make_beside), which goes with it. */
static void run_waiting_gone(struct rpc_call *call) {
    struct run_prep *p = call->state;

    call->state = NULL;
    run_prep_free(p);
}

void rpc_run(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    const Lianyaohu__V1__RunRequest *r = req->run;
    struct run_prep *p = calloc(1, sizeof(*p));
    struct session *s = NULL;
    const struct policy *pol = policy_current(d);
    uint64_t t_entry = lyhd_mono_us();
    char why[512];
    int k;

    if (!p) {
        rpc_fail(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    *p = (struct run_prep){.d = d, .call = call, .procs_fd = -1, .cg_dir_fd = -1,
                           .stdio = {-1, -1, -1}, .pty_fd = -1, .uid = call->peer.uid,
                           .policy_version = pol->version};

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
    if (check_argv(call, r) < 0 || lookup_home(call, call->peer.uid, p) < 0)
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
    p->s = s;
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
            /* Its port goes into the spec, and so into the rules. Its
             * forwarder starts once the paths are looked up (run_checked):
             * it must be a listed session's by the next turn of the loop (the
             * resolvers the protocol process may ask are rebuilt from the
             * listed sessions). Until then a stand-in: for a printed ruleset
             * (nothing listens) and for the size check below. */
            s->spec.dns_port = 53053;
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
        if (s->wants_dns && !r->print_firewall)
            s->spec.dns_port = 0; /* its forwarder's, in run_checked */
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
    if (take_stdio(call, p, r) < 0)
        goto out;
    /* What the launch keeps of the request (rpc_run returns while its paths
     * are looked up, and the request is freed then). */
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
                                 .home = p->home,
                                 .pwd = r->cwd,
                                 /* its private /tmp (spawn.h private_tmp) */
                                 .tmpdir = "/tmp"};
        const char *extra[POLICY_MAX_ENV];
        for (size_t i = 0; i < pol->n_env_block; i++)
            extra[i] = pol->env_block[i];
        ein.extra_block = extra;
        ein.n_extra_block = pol->n_env_block;
        k = envp_build(&ein, &p->envp, why, sizeof(why));
        if (k < 0) {
            rpc_fail(call,
                     k == -EPERM ? LIANYAOHU__V1__CODE__PERMISSION_DENIED
                                 : LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                     "%s", why);
            goto out;
        }
    }
    p->argv = calloc(r->n_argv + 1, sizeof(char *));
    if (!p->argv) {
        rpc_fail(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < r->n_argv; i++)
        if (!(p->argv[i] = strdup(r->argv[i]))) {
            rpc_fail(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
            goto out;
        }
    p->monitor = r->monitor;

    /* 3. Paths, by a thread of their own (run_paths.h); the launch goes on in
     * run_checked once they are looked up. */
    p->job = run_paths_new();
    if (!p->job) {
        rpc_fail(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    struct run_paths *w = run_paths_of(p->job);
    k = run_paths_take(w, r, why, sizeof(why));
    if (k < 0) {
        rpc_fail(call,
                 k == -EINVAL ? LIANYAOHU__V1__CODE__INVALID_ARGUMENT
                              : LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                 "%s", k == -EINVAL ? why : "out of memory");
        goto out;
    }
    w->pol = *pol;
    w->homes = homes_hold(d->homes);
    snprintf(w->socket_path, sizeof(w->socket_path), "%s", d->cfg.socket_path);
    w->landlock_abi = d->landlock_abi;
    w->uid = call->peer.uid;
    w->gid = call->peer.gid;
    memcpy(w->groups, call->peer_groups, call->n_peer_groups * sizeof(gid_t));
    w->n_groups = call->n_peer_groups;
    memcpy(w->home, p->home, sizeof(w->home));
    s->t_us[SESSION_T_VALIDATED] = lyhd_mono_us();
    k = run_paths_start(p->job, d->base, run_checked, p);
    if (k < 0) {
        if (k == -EUSERS)
            rpc_fail(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                     "%d launches of yours are still waiting for lyhd to look up their paths "
                     "(something holds a lock in one of them: a process stuck on a FUSE file "
                     "system that does not answer, say); try again once they are done",
                     RUN_PATHS_PER_UID);
        else if (k == -EBUSY)
            rpc_fail(call, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED,
                     "lyhd is waiting for the paths of %d launches already (something holds "
                     "locks in them); try again later",
                     RUN_PATHS_MAX);
        else
            rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE,
                     "cannot look up the launch's paths: %s", strerror(-k));
        goto out;
    }
    call->state = p;
    call->on_disconnect = run_waiting_gone;
    s->t_us[SESSION_T_JOB_STARTED] = lyhd_mono_us();
    make_beside(d, p);
    return;

out:
    run_prep_free(p);
}
