/* lyhd: the LianYaoHu root daemon. Parses flags into struct lyhd_config, opens
 * state, starts the listener and runs the libevent loop until a signal says
 * stop. Runs in the foreground; logs to stderr (and syslog with --syslog). */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/lyh_limits.h"
#include "common/macros.h"
#include "daemon/audit.h"
#include "daemon/closer.h"
#include "daemon/homes.h"
#include "daemon/dns_fwd.h"
#include "daemon/log.h"
#include "daemon/policy.h"
#include "daemon/lyhd.h"
#include "storage/sqlite_util.h"
#include "daemon/guard.h"
#include "daemon/rpc.h"
#include "daemon/session.h"
#include "daemon/pproc.h"
#include "daemon/proto.h"
#include "platform/linux/fsutil.h"
#include "platform/linux/landlock.h"
#include "platform/linux/seccomp.h"
#include "daemon/server.h"
#include "daemon/spawner.h"
#include "storage/dircheck.h"
#include "storage/store.h"

static void usage(FILE *f) {
    fprintf(f,
            "Usage: lyhd [OPTIONS]\n"
            "The LianYaoHu daemon: runs code agents confined to a VPN interface.\n"
            "Runs in the foreground as root; logs to stderr.\n\n"
            "  --socket PATH             listen here (default %s)\n"
            "  --state-dir DIR           state.db, audit.db and locks (default %s, created 0700)\n"
            "  --admin-group NAME        members may change the admin policy (default: root only)\n"
            "  --guard-gid GID           gid of guarded sockets (default %u)\n"
            "  --max-connections N       all connections (default 256)\n"
            "  --max-connections-per-uid N  per non-root user (default 32)\n"
            "  --max-calls-per-connection N calls in flight on one connection (default 16)\n"
            "  --frame-timeout-ms MS     time to finish a frame once started (default 5000)\n"
            "  --max-fds-per-message N   fds one request may carry (default and maximum %u)\n"
            "  --tmp-dir DIR             per-launch tmpdirs go in DIR/lyhd (default /tmp)\n"
            "  --dns-min-ttl S           an allowed name's addresses stay reachable at least\n"
            "                            S seconds after it resolved (default 300)\n"
            "  --dns-grace S             ... and S more than the answer's TTL (default 30)\n"
            "  --resolv-conf PATH        resolv.conf whose nameservers routed through a\n"
            "                            session's VPN may be its resolvers (default\n"
            "                            /etc/resolv.conf)\n"
            "  --hangup-grace-ms MS      SIGHUP to SIGKILL when a client vanishes (default 2000)\n"
            "  --allow-root-run          let uid 0 run agents (refused by default)\n"
            "  --no-cgroup               use the per-user fallback scope even with cgroup v2\n"
            "  --landlock-abi-max N      use at most Landlock ABI N (tests; a lower ABI is a\n"
            "                            weaker sandbox, which the policy refuses below 6)\n"
            "  --syslog                  also log to syslog\n"
            "  --syslog-socket PATH      ... to the unix datagram socket PATH instead of\n"
            "                            /dev/log (implies --syslog)\n"
            "  --syslog-audit            forward every audit record to syslog (RFC 5424 SD)\n"
            "  --syslog-audit-socket PATH  ... to the unix datagram socket PATH instead of\n"
            "                            /dev/log (implies --syslog-audit)\n"
            "  --audit-flush-ms MS       longest an audit record waits to be written (default 200)\n"
            "  --audit-flow-rate N       new flows a session may log per second through its VPN,\n"
            "                            one record each (default 0: a third of what audit.db's\n"
            "                            writes take, measured at start); beyond it they are\n"
            "                            counted in gap records\n"
            "  --audit-max-age-days N    drop audit records older than this (default 90, 0 = keep)\n"
            "  --audit-max-mb N          keep audit.db under this size (default 1024, 0 = no cap)\n"
            "  --protocol-exe PATH       tests only: run PATH as the protocol process (as user\n"
            "                            _lyhd, no privilege; it stands for a compromised one)\n"
            "  --timing                  log how long each phase of every launch and end took\n"
            "                            and every guard check (bench/run reads it)\n"
            "  --verbose                 debug logging\n"
            "  --version, --help\n",
            LYH_DEFAULT_SOCKET, LYH_DEFAULT_STATE_DIR, LYH_GUARD_GID_DEFAULT,
            LYH_MAX_FDS_PER_MESSAGE);
}

static int parse_uint(const char *opt, const char *s, unsigned min, unsigned max, unsigned *ret) {
    char *end = NULL;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || !end || *end || end == s || s[0] == '-' || v < min || v > max) {
        fprintf(stderr, "lyhd: %s wants a number from %u to %u, not '%s'\n", opt, min, max, s);
        return -EINVAL;
    }
    *ret = (unsigned)v;
    return 0;
}

/* Returns 0 to run, 1 to exit 0 (help/version), -EINVAL for usage errors. */
/* A syslog socket lyhd sends to must be in a directory only root can change
 * (every ancestor root's or sticky): in one a user may write, they could bind
 * the name first and read every record (argv, paths, names) or never read
 * them. 0, or -errno with the reason on stderr. */
static int check_syslog_dir(const char *opt, const char *path) {
    char dir[PATH_MAX], err[512];
    const char *slash = strrchr(path, '/');
    struct stat st;

    snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
    _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        fprintf(stderr, "lyhd: %s %s: cannot open its directory %s: %s\n", opt, path, dir,
                strerror(errno));
        return -errno;
    }
    if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        fprintf(stderr,
                "lyhd: %s %s: its directory %s is %s (mode %04o); a syslog socket lyhd sends "
                "records to must be in a directory only root can write\n",
                opt, path, dir, st.st_uid != 0 ? "not owned by root" : "writable by others",
                (unsigned)(st.st_mode & 07777));
        return -EPERM;
    }
    int r = storage_check_ancestors(fd, "syslog socket directory", dir, "the syslog socket", err,
                                    sizeof(err));
    if (r < 0)
        fprintf(stderr, "lyhd: %s %s: %s\n", opt, path, err);
    return r;
}

static int parse_args(int argc, char **argv, struct lyhd_config *cfg) {
    enum {
        O_SOCKET = 256, O_STATE, O_ADMIN, O_GUARD, O_MAXC, O_MAXCU, O_MAXCALLS, O_FRAME, O_MAXFDS,
        O_SYSLOG, O_VERBOSE, O_TIMING, O_VERSION, O_HELP, O_TMP, O_GRACE, O_ROOTRUN, O_NOCG,
        O_AFLUSH, O_AFRATE, O_AAGE, O_ASIZE, O_SYSLOG_AUDIT, O_LLMAX, O_RESOLV, O_DNSTTL, O_DNSGRACE,
        O_PEXE, O_SYSLOG_SOCK, O_SYSLOG_LOGSOCK,
    };
    static const struct option opts[] = {
        {"socket", required_argument, NULL, O_SOCKET},
        {"state-dir", required_argument, NULL, O_STATE},
        {"admin-group", required_argument, NULL, O_ADMIN},
        {"guard-gid", required_argument, NULL, O_GUARD},
        {"max-connections", required_argument, NULL, O_MAXC},
        {"max-connections-per-uid", required_argument, NULL, O_MAXCU},
        {"max-calls-per-connection", required_argument, NULL, O_MAXCALLS},
        {"frame-timeout-ms", required_argument, NULL, O_FRAME},
        {"max-fds-per-message", required_argument, NULL, O_MAXFDS},
        {"tmp-dir", required_argument, NULL, O_TMP},
        {"resolv-conf", required_argument, NULL, O_RESOLV},
        {"dns-min-ttl", required_argument, NULL, O_DNSTTL},
        {"dns-grace", required_argument, NULL, O_DNSGRACE},
        {"hangup-grace-ms", required_argument, NULL, O_GRACE},
        {"allow-root-run", no_argument, NULL, O_ROOTRUN},
        {"no-cgroup", no_argument, NULL, O_NOCG},
        {"landlock-abi-max", required_argument, NULL, O_LLMAX},
        {"syslog", no_argument, NULL, O_SYSLOG},
        {"syslog-audit", no_argument, NULL, O_SYSLOG_AUDIT},
        {"syslog-audit-socket", required_argument, NULL, O_SYSLOG_SOCK},
        {"syslog-socket", required_argument, NULL, O_SYSLOG_LOGSOCK},
        {"audit-flush-ms", required_argument, NULL, O_AFLUSH},
        {"audit-flow-rate", required_argument, NULL, O_AFRATE},
        {"audit-max-age-days", required_argument, NULL, O_AAGE},
        {"audit-max-mb", required_argument, NULL, O_ASIZE},
        {"protocol-exe", required_argument, NULL, O_PEXE},
        {"verbose", no_argument, NULL, O_VERBOSE},
        {"timing", no_argument, NULL, O_TIMING},
        {"version", no_argument, NULL, O_VERSION},
        {"help", no_argument, NULL, O_HELP},
        {0},
    };
    int c;

    *cfg = (struct lyhd_config){
        .socket_path = LYH_DEFAULT_SOCKET,
        .state_dir = LYH_DEFAULT_STATE_DIR,
        .max_conns = 256,
        .max_conns_per_uid = 32,
        .max_calls_per_conn = 16,
        .frame_timeout_ms = 5000,
        .max_fds_per_msg = LYH_MAX_FDS_PER_MESSAGE,
        .guard_gid = LYH_GUARD_GID_DEFAULT,
        .hangup_grace_ms = 2000,
        .tmp_parent = "/tmp",
        .resolv_conf = "/etc/resolv.conf",
        .dns_min_ttl_s = 300,
        .dns_grace_s = 30,
        .audit_flush_ms = 200,
        .audit_max_age_days = 90,
        .audit_max_mb = 1024,
    };
    /* The numeric options: a range and a field each, checked alike. */
    static const struct {
        int id;
        unsigned min, max;
        size_t off;
    } nums[] = {
#define NUM(id, min, max, field) {id, min, max, offsetof(struct lyhd_config, field)}
        NUM(O_DNSTTL, 0, 86400, dns_min_ttl_s),
        NUM(O_DNSGRACE, 0, 3600, dns_grace_s),
        NUM(O_GUARD, 1, 0x7ffffffe - LYH_GUARD_GID_SPAN, guard_gid),
        NUM(O_MAXC, 1, 65536, max_conns),
        NUM(O_MAXCU, 1, 65536, max_conns_per_uid),
        NUM(O_MAXCALLS, 1, 4096, max_calls_per_conn),
        NUM(O_FRAME, 10, 600000, frame_timeout_ms),
        NUM(O_MAXFDS, 0, LYH_MAX_FDS_PER_MESSAGE, max_fds_per_msg),
        NUM(O_GRACE, 0, 600000, hangup_grace_ms),
        NUM(O_LLMAX, 1, 255, landlock_abi_max),
        NUM(O_AFLUSH, 1, 10000, audit_flush_ms),
        NUM(O_AFRATE, 0, 10000000, audit_flow_rate),
        NUM(O_AAGE, 0, 36500, audit_max_age_days),
        NUM(O_ASIZE, 0, 1048576, audit_max_mb),
#undef NUM
    };
    _Static_assert(sizeof(cfg->guard_gid) == sizeof(unsigned), "guard_gid is an unsigned field");
    int idx = -1;
    while ((c = getopt_long(argc, argv, "", opts, &idx)) != -1) {
        bool num = false;
        for (size_t k = 0; k < ARRAY_SIZE(nums) && !num; k++) {
            if (nums[k].id != c)
                continue;
            char name[48];
            snprintf(name, sizeof(name), "--%s", idx >= 0 ? opts[idx].name : "?");
            if (parse_uint(name, optarg, nums[k].min, nums[k].max,
                           (unsigned *)(void *)((char *)cfg + nums[k].off)) < 0)
                return -EINVAL;
            num = true;
        }
        idx = -1;
        if (num)
            continue;
        switch (c) {
        case O_SOCKET: cfg->socket_path = optarg; break;
        case O_STATE: cfg->state_dir = optarg; break;
        case O_RESOLV: cfg->resolv_conf = optarg; break;
        case O_ADMIN: cfg->admin_group = optarg; break;
        case O_TMP: cfg->tmp_parent = optarg; break;
        case O_ROOTRUN: cfg->allow_root_run = true; break;
        case O_NOCG: cfg->no_cgroup = true; break;
        case O_SYSLOG: cfg->use_syslog = true; break;
        case O_SYSLOG_AUDIT: cfg->syslog_audit = true; break;
        case O_SYSLOG_LOGSOCK:
            cfg->use_syslog = true;
            cfg->syslog_socket = optarg;
            break;
        case O_SYSLOG_SOCK:
            cfg->syslog_audit = true;
            cfg->syslog_audit_socket = optarg;
            break;
        case O_PEXE: cfg->protocol_exe = optarg; break;
        case O_VERBOSE: cfg->verbose = true; break;
        case O_TIMING: cfg->timing = true; break;
        case O_VERSION: printf("lyhd %s (protocol %u)\n", LYH_VERSION, LYH_PROTOCOL_VERSION); return 1;
        case O_HELP: usage(stdout); return 1;
        default: usage(stderr); return -EINVAL;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "lyhd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return -EINVAL;
    }
    if (cfg->socket_path[0] != '/' || cfg->state_dir[0] != '/' || cfg->tmp_parent[0] != '/' ||
        cfg->resolv_conf[0] != '/' || (cfg->protocol_exe && cfg->protocol_exe[0] != '/') ||
        (cfg->syslog_audit_socket && cfg->syslog_audit_socket[0] != '/') ||
        (cfg->syslog_socket && cfg->syslog_socket[0] != '/')) {
        fprintf(stderr, "lyhd: --socket, --state-dir, --tmp-dir, --resolv-conf, "
                        "--syslog-socket, --syslog-audit-socket and --protocol-exe must be absolute paths\n");
        return -EINVAL;
    }
    if ((cfg->syslog_audit_socket &&
         check_syslog_dir("--syslog-audit-socket", cfg->syslog_audit_socket) < 0) ||
        (cfg->syslog_socket && check_syslog_dir("--syslog-socket", cfg->syslog_socket) < 0))
        return -EINVAL;
    if (cfg->admin_group) {
        struct group *g = getgrnam(cfg->admin_group);
        if (!g) {
            fprintf(stderr, "lyhd: --admin-group '%s' does not exist\n", cfg->admin_group);
            return -EINVAL;
        }
        cfg->admin_gid = g->gr_gid;
    }
    cfg->guard_gid_max = cfg->guard_gid + LYH_GUARD_GID_SPAN - 1;
    return 0;
}

/* One daemon per state dir: an flock held for the process's lifetime. */
static int take_lock(const char *state_dir, int *ret_fd) {
    char path[PATH_MAX];
    int fd;

    snprintf(path, sizeof(path), "%s/lyhd.lock", state_dir);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

/* The guard gid must be ours alone. Files an agent creates belong to it, so
 * another group holding that number, or any member of ours, could read what
 * agents of every user leave group-readable. A missing group is created
 * (groupadd, no shell: the name and number are ours, not the caller's). */
static int check_guard_group(const struct lyhd_config *cfg) {
    struct group *g, *n;
    struct passwd *pw;

    /* The users' guard gids above it are ours too: no group may hold one,
     * and no account may have one as its primary gid. */
    setgrent();
    while ((g = getgrent()))
        if (g->gr_gid > cfg->guard_gid && g->gr_gid <= cfg->guard_gid_max) {
            log_error("group '%s' has gid %u, inside the guard gids %u-%u that lyhd gives to "
                      "each user's agents; pick another range with --guard-gid",
                      g->gr_name, g->gr_gid, cfg->guard_gid, cfg->guard_gid_max);
            endgrent();
            return -EEXIST;
        }
    endgrent();
    setpwent();
    while ((pw = getpwent()))
        if (pw->pw_gid >= cfg->guard_gid && pw->pw_gid <= cfg->guard_gid_max) {
            log_error("user '%s' has primary gid %u, inside the guard gids %u-%u; pick another "
                      "range with --guard-gid",
                      pw->pw_name, pw->pw_gid, cfg->guard_gid, cfg->guard_gid_max);
            endpwent();
            return -EEXIST;
        }
    endpwent();
    g = getgrgid(cfg->guard_gid);

    if (g && strcmp(g->gr_name, LYH_GUARD_GROUP_NAME) != 0) {
        log_error("gid %u belongs to group '%s', not %s; pick a free gid with --guard-gid",
                  cfg->guard_gid, g->gr_name, LYH_GUARD_GROUP_NAME);
        return -EEXIST;
    }
    if (g && g->gr_mem && g->gr_mem[0]) {
        log_error("group %s (gid %u) has members (%s...); nobody may be a member of the guard "
                  "group",
                  LYH_GUARD_GROUP_NAME, cfg->guard_gid, g->gr_mem[0]);
        return -EEXIST;
    }
    n = getgrnam(LYH_GUARD_GROUP_NAME);
    if (n && n->gr_gid != cfg->guard_gid) {
        log_error("group %s exists with gid %u, but lyhd guards gid %u; use --guard-gid %u or fix "
                  "the group",
                  LYH_GUARD_GROUP_NAME, n->gr_gid, cfg->guard_gid, n->gr_gid);
        return -EEXIST;
    }
    if (!g) {
        char gid[16];
        char *argv[] = {(char *)"groupadd", (char *)"--system", (char *)"--gid", gid,
                        (char *)LYH_GUARD_GROUP_NAME, NULL};
        const char *tool = access("/usr/sbin/groupadd", X_OK) == 0 ? "/usr/sbin/groupadd"
                                                                     : "/sbin/groupadd";
        pid_t pid;
        int status = 0;

        snprintf(gid, sizeof(gid), "%u", cfg->guard_gid);
        bool ok = posix_spawn(&pid, tool, NULL, NULL, argv, (char *[]){NULL}) == 0 &&
                  waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        /* Another lyhd may have created it meanwhile: that is fine too. */
        if (!ok && (g = getgrgid(cfg->guard_gid)) && strcmp(g->gr_name, LYH_GUARD_GROUP_NAME) == 0)
            ok = true;
        if (!ok) {
            log_error("cannot create group %s (gid %u); create it with `groupadd --system --gid "
                      "%u %s`",
                      LYH_GUARD_GROUP_NAME, cfg->guard_gid, cfg->guard_gid, LYH_GUARD_GROUP_NAME);
            return -EIO;
        }
        log_info("created group %s (gid %u)", LYH_GUARD_GROUP_NAME, cfg->guard_gid);
    }
    return 0;
}

/* Groups whose membership is root-equivalent or reaches other users' data
 * through sockets and devices Landlock cannot mediate (a pathname AF_UNIX
 * connect needs no Landlock right: docker.sock, libvirt, the disk devices).
 * An agent never keeps them, whatever its user has. gid 0 is always dropped. */
static void collect_drop_groups(struct lyhd *d) {
    static const char *const names[] = {"docker", "lxd", "incus-admin", "libvirt", "kvm",
                                        "disk", "sudo", "wheel", "adm", "shadow", "systemd-journal"};
    d->n_drop_gids = 0;
    d->drop_gids[d->n_drop_gids++] = 0;
    for (size_t i = 0; i < ARRAY_SIZE(names) && d->n_drop_gids < ARRAY_SIZE(d->drop_gids); i++) {
        struct group *g = getgrnam(names[i]);
        if (g)
            d->drop_gids[d->n_drop_gids++] = g->gr_gid;
    }
}

/* Open fds of this process, once at startup (a directory read, not for hot paths). */
static unsigned count_open_fds(void) {
    DIR *dir = opendir("/proc/self/fd");
    unsigned n = 0;

    if (!dir)
        return 0;
    for (struct dirent *de; (de = readdir(dir));)
        n += de->d_name[0] != '.';
    closedir(dir);
    return n > 0 ? n - 1 : 0; /* the directory's own fd */
}

/* Each session and connection holds some of lyhd's fds: take the whole hard
 * limit (the soft one is often 1024), and remember what lyhd itself holds once
 * it is ready, for the budget Run keeps (rpc_run.c). */
static void raise_nofile(struct lyhd *d) {
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            log_info("open-file limit raised from %llu to %llu", (unsigned long long)was,
                     (unsigned long long)rl.rlim_max);
        else
            (void)getrlimit(RLIMIT_NOFILE, &rl);
    }
    d->fd_limit = rl.rlim_cur > 1u << 30 ? 1u << 30 : (unsigned)rl.rlim_cur;
}

/* Probe Landlock once (before the guard: its reconciliation needs nothing
 * of it, but a daemon without a usable sandbox should say so first). */
static void landlock_init(struct lyhd *d) {
    int r = ll_probe(&d->landlock_abi);

    if (r < 0) {
        d->landlock_abi = 0;
        log_warn("Landlock is not available (%s): Run will refuse to start agents", strerror(-r));
    } else if (d->cfg.landlock_abi_max && d->landlock_abi > (int)d->cfg.landlock_abi_max) {
        log_warn("using Landlock ABI %u of the kernel's %d (--landlock-abi-max)",
                 d->cfg.landlock_abi_max, d->landlock_abi);
        d->landlock_abi = (int)d->cfg.landlock_abi_max;
    }
}

/* Build the seccomp program once, after the guard decided whether sessions
 * may listen: every child only installs what was prepared here. */
static int seccomp_init_prog(struct lyhd *d) {
    struct sc_options o = {.arch = SC_ARCH_NATIVE, .allow_listen = d->guard->listeners};
    struct sc_program *prog = calloc(1, sizeof(*prog));
    int r;

    if (!prog)
        return -ENOMEM;
    r = sc_build(&o, prog);
    if (r < 0) {
        free(prog);
        log_error_errno(-r, "cannot build the seccomp filter");
        return r;
    }
    d->seccomp = prog;
    return 0;
}

static void sandbox_free(struct lyhd *d) {
    if (d->seccomp) {
        sc_program_free(d->seccomp);
        free(d->seccomp);
        d->seccomp = NULL;
    }
}

/* Returns how many sessions were left running. */
static unsigned sessions_shutdown(struct lyhd *d) {
    struct session *s;
    unsigned running = 0;

    if (!d->sessions.tqh_first && !d->sessions.tqh_last)
        return 0; /* never initialised */
    d->stopping = true;
    while ((s = TAILQ_FIRST(&d->sessions))) {
        TAILQ_REMOVE(&d->sessions, s, link);
        if (s->call) {
            s->call->on_disconnect = NULL;
            s->call->state = NULL;
            rpc_fail(s->call, LIANYAOHU__V1__CODE__UNAVAILABLE,
                     "lyhd is shutting down; the session keeps running, guarded");
            s->call = NULL;
        }
        if (!s->ev_teardown && !s->exited)
            running++;
        session_finish_now(s);
    }
    session_tmpdir_jobs_finish(d);
    return running;
}

/* A close that waits more than a second (a TCP socket's linger) is
 * interrupted; see daemon/closer.h. */
static void on_poke(evutil_socket_t fd, short what, void *arg) {
    struct lyhd *d = arg;
    closer_poke(d->closer, 1000);
    server_tick(d->server);
    pproc_tick(d);
}

static void on_signal(evutil_socket_t sig, short what, void *arg) {
    struct lyhd *d = arg;

    log_info("%s received; shutting down", strsignal((int)sig));
    server_stop(d->server);
    event_base_loopexit(d->base, NULL);
}

/* A child changed state: exits come through each one's pidfd; a terminal
 * session's agent that stopped is told to its client. */
static void on_sigchld(evutil_socket_t fd, short what, void *arg) {
    struct signalfd_siginfo si[16];

    /* one look at every session covers all that is queued */
    while (read(fd, si, sizeof(si)) > 0)
        ;
    session_on_sigchld(arg);
}

/* The end, after the loop (served: it ran) or a failed start. Running
 * sessions stay running and guarded (the next lyhd re-adopts them); sessions
 * already ending are finished now. They are detached from their calls
 * first, so closing connections does not hang them up. The guard's table
 * stays unless nothing runs that it guards. */
static void teardown(struct lyhd *d, struct event **ev_sig, size_t n_sig, struct event *ev_poke,
                     bool served) {
    if (served) /* the flow events the kernel sent until now, into audit.db */
        pproc_sync_flows(d, 1000);
    bool none_running = sessions_shutdown(d) == 0;
    server_free(d->server);
    d->server = NULL;
    /* Run once more so deferred connection releases happen before exit. */
    if (served)
        event_base_loop(d->base, EVLOOP_NONBLOCK);
    pproc_stop(d);
    spawner_stop(d);
    audit_stop(d);
    for (size_t i = 0; i < n_sig; i++) {
        if (!ev_sig[i])
            continue;
        /* the SIGCHLD watch owns its signalfd; a signal event's fd is the
         * signal's number */
        bool owns_fd = !(event_get_events(ev_sig[i]) & EV_SIGNAL);
        evutil_socket_t fd = event_get_fd(ev_sig[i]);
        event_free(ev_sig[i]);
        if (owns_fd)
            close(fd);
    }
    if (ev_poke)
        event_free(ev_poke);
    closer_stop(d->closer);
    homes_stop(d->homes);
    if (d->base)
        event_base_free(d->base);
    guard_free(d->guard, served && none_running);
    sandbox_free(d);
    store_close(d->store);
    free(d->policy);
    CLOSE_FD(d->tmp_fd);
    CLOSE_FD(d->lock_fd);
}

/* lyhd's own directory for the per-launch tmpdirs (lyhd.h tmp_dir). */
static int open_tmp_dir(struct lyhd *d) {
    const char *p = d->cfg.tmp_parent;
    if (snprintf(d->tmp_dir, sizeof(d->tmp_dir), "%s%s" LYHD_TMP_NAME, p,
                 p[strlen(p) - 1] == '/' ? "" : "/") >= (int)sizeof(d->tmp_dir) ||
        /* room for "/lyh-<id>" in state.db's row */
        strlen(d->tmp_dir) + sizeof("/lyh-") + SESSION_ID_LEN >
            sizeof(((struct store_session *)0)->tmpdir)) {
        log_error("--tmp-dir %s is too long", p);
        return -1;
    }
    int r = fs_open_own_dir(p, LYHD_TMP_NAME, 0700, &d->tmp_fd);
    if (r == -EPERM || r == -ENOTDIR)
        log_error("%s is not a directory of root's: someone else made it before lyhd could, "
                  "and lyhd does not keep sessions' files where another user decides. Remove "
                  "it (rm -r %s) and start lyhd again, or choose another --tmp-dir",
                  d->tmp_dir, d->tmp_dir);
    else if (r < 0)
        log_error_errno(-r, "cannot make or open %s (for the sessions' private /tmp; see "
                        "--tmp-dir)", d->tmp_dir);
    return r;
}

int main(int argc, char **argv) {
    struct lyhd d = {.lock_fd = -1, .tmp_fd = -1};
    struct event *ev_sig[4] = {0};
    struct event *ev_poke = NULL;
    const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
    const char *err = NULL;
    char why[512];
    int r;

    /* lyhd's own unprivileged half, started by the parent (proto_main.c) */
    if (argc > 1 && strcmp(argv[1], "--protocol-process") == 0)
        return proto_main(argc, argv);
    /* and its spawner (spawner.c) */
    if (argc > 1 && strcmp(argv[1], "--spawner") == 0)
        return spawner_main(argc, argv);
    sqlu_process_init();
    r = parse_args(argc, argv, &d.cfg);
    if (r != 0)
        return r > 0 ? 0 : 2;
    if (d.cfg.syslog_socket && log_syslog_path(d.cfg.syslog_socket) < 0) {
        fprintf(stderr, "lyhd: --syslog-socket %s: the path is too long for a socket\n",
                d.cfg.syslog_socket);
        return 2;
    }
    log_init(d.cfg.use_syslog, d.cfg.verbose);
    if (!rpc_table_verify()) {
        log_error("the RPC table is inconsistent (a method without a handler, or an owner-only "
                  "one without an owner lookup)");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    umask(0022);
    raise_nofile(&d);
    d.start_mono_ms = lyhd_mono_ms();

    /* Lock first, so a second daemon never touches state.db, then open it
     * (store_open checks the directory's ownership and mode). */
    struct stat sst; /* not an mkdir when it exists: that takes the parent's lock */
    if (stat(d.cfg.state_dir, &sst) < 0 && errno == ENOENT && mkdir(d.cfg.state_dir, 0700) < 0 &&
        errno != EEXIST) {
        log_error_errno(errno, "cannot create state dir %s", d.cfg.state_dir);
        return 1;
    }
    r = take_lock(d.cfg.state_dir, &d.lock_fd);
    if (r < 0) {
        if (r == -EWOULDBLOCK)
            log_error("another lyhd already uses state dir %s; stop it first", d.cfg.state_dir);
        else
            log_error_errno(-r, "cannot lock state dir %s", d.cfg.state_dir);
        return 1;
    }
    r = store_open(d.cfg.state_dir, &d.store, &err);
    if (r < 0) {
        log_error("cannot open state in %s: %s", d.cfg.state_dir, err ? err : strerror(-r));
        CLOSE_FD(d.lock_fd);
        return 1;
    }

    r = open_tmp_dir(&d);
    if (r < 0)
        goto fail;

    r = policy_load(&d, why, sizeof(why));
    if (r < 0) {
        log_error("admin policy: %s", why);
        goto fail;
    }
    d.base = event_base_new();
    if (!d.base) {
        log_error("cannot create the event loop");
        goto fail;
    }
    TAILQ_INIT(&d.sessions);
    TAILQ_INIT(&d.tmpdir_jobs);
    if (check_guard_group(&d.cfg) < 0)
        goto fail;
    landlock_init(&d);
    collect_drop_groups(&d);
    /* The protocol process's user: the guard's base chain names it. */
    r = pproc_user(&d, why, sizeof(why));
    if (r < 0) {
        log_error("%s", why);
        goto fail;
    }
    /* The audit log first: the guard's startup reconciliation records what it reaps. */
    r = audit_start(&d, why, sizeof(why));
    if (r < 0) {
        log_error("audit: %s", why);
        goto fail;
    }
    r = guard_init(&d, why, sizeof(why));
    if (r < 0) {
        log_error("egress guard: %s", why);
        goto fail;
    }
    /* the protocol process's resolvers: those of the sessions adopted */
    dns_fwd_resolvers_sync(&d);
    if (seccomp_init_prog(&d) < 0)
        goto fail;
    r = pproc_start(&d, why, sizeof(why));
    if (r < 0) {
        log_error("%s", why);
        goto fail;
    }
    (void)session_sweep_tmpdirs(&d);
    /* before the threads start: a fork then copies one thread's worth */
    spawner_start(&d);
    r = closer_start(&d.closer);
    if (r < 0) {
        log_error_errno(-r, "cannot start the threads that close client file descriptors");
        goto fail;
    }
    r = homes_start(NULL, &d.homes);
    if (r < 0) {
        log_error_errno(-r, "cannot start the thread that reads the user database");
        goto fail;
    }
    audit_measure_again(&d);
    ev_poke = event_new(d.base, -1, EV_PERSIST, on_poke, &d);
    if (!ev_poke || event_add(ev_poke, &(struct timeval){.tv_usec = 200 * 1000}) < 0) {
        log_error("cannot start the close watchdog timer");
        goto fail;
    }
    r = server_start(&d, &d.server, why, sizeof(why));
    if (r < 0) {
        log_error("%s", why);
        goto fail;
    }
    for (size_t i = 0; i < ARRAY_SIZE(sigs); i++) {
        ev_sig[i] = evsignal_new(d.base, sigs[i], on_signal, &d);
        if (!ev_sig[i] || event_add(ev_sig[i], NULL) < 0) {
            log_error("cannot install signal handlers");
            goto fail;
        }
    }
    /* SIGCHLD (a terminal session's agent stopped) through a signalfd, the
     * signal blocked: a handler would make every blocking poll() and read in
     * lyhd return EINTR whenever an agent stops or a child exits. What lyhd
     * starts unblocks it before exec (spawn.c, pproc.c). */
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    int sfd = sigprocmask(SIG_BLOCK, &chld, NULL) == 0
                  ? signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC)
                  : -1;
    ev_sig[3] = sfd >= 0 ? event_new(d.base, sfd, EV_READ | EV_PERSIST, on_sigchld, &d) : NULL;
    if (!ev_sig[3] || event_add(ev_sig[3], NULL) < 0) {
        log_error_errno(errno, "cannot watch SIGCHLD");
        if (sfd >= 0)
            close(sfd);
        goto fail;
    }
    /* What starting up freed (sqlite's schema parsing and migrations, the
     * reconcile, the measurement) goes back to the kernel before lyhd
     * idles: 2,032 -> 1,572 KiB of heap here. */
    malloc_trim(0);
    d.fd_base = count_open_fds();
    log_info("lyhd %s listening on %s (state %s, pid %d, %u of %u fds in use)", LYH_VERSION,
             d.cfg.socket_path, d.cfg.state_dir, getpid(), d.fd_base, d.fd_limit);

    if (event_base_dispatch(d.base) < 0) {
        log_error("event loop failed");
        d.exit_code = 1;
    }

    teardown(&d, ev_sig, ARRAY_SIZE(ev_sig), ev_poke, true);
    log_info("stopped");
    return d.exit_code;

fail:
    teardown(&d, ev_sig, ARRAY_SIZE(ev_sig), ev_poke, false);
    return 1;
}
