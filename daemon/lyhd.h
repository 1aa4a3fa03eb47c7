/* The daemon's context: configuration (set once from the command line) and
 * the long-lived objects every part of the daemon reaches through it. There
 * are no global option variables; everything hangs off struct lyhd. */
#ifndef LYHD_H
#define LYHD_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <sys/queue.h>

#include "daemon/session.h"

struct event_base;
struct store;
struct server;
struct guard;
struct sc_program;
struct audit;
struct policy;
struct closer;
struct homes;
struct spawner;
struct pproc;

struct lyhd_config {
    const char *socket_path;
    const char *state_dir;
    unsigned max_conns;          /* all connections */
    unsigned max_conns_per_uid;  /* per non-root uid */
    unsigned max_calls_per_conn; /* calls in flight on one connection */
    unsigned frame_timeout_ms;   /* time to finish a frame once it started */
    unsigned max_fds_per_msg;
    const char *admin_group;     /* NULL: only root is admin */
    gid_t admin_gid;
    uint32_t guard_gid;          /* the range's base: group _lianyaohu */
    uint32_t guard_gid_max;      /* guard_gid + LYH_GUARD_GID_SPAN - 1 */
    bool use_syslog;
    bool verbose;
    bool timing;          /* --timing: log each launch's and end's phases */
    bool allow_root_run;         /* let uid 0 use Run (never by default) */
    bool no_cgroup;              /* act as on a host without cgroup v2 (tests the fallback) */
    unsigned landlock_abi_max;   /* use at most this Landlock ABI (0: the kernel's) */
    unsigned hangup_grace_ms;    /* SIGHUP to SIGKILL when a client vanishes */
    const char *tmp_parent;      /* where per-launch tmpdirs go (default /tmp) */
    const char *resolv_conf;     /* nameservers routed through a VPN may be its resolvers */
    unsigned dns_min_ttl_s;      /* an allowed name's addresses stay at least this long */
    unsigned dns_grace_s;        /* ... plus this (caches, clock skew) */
    unsigned audit_flush_ms;     /* longest a record waits in the batch */
    unsigned audit_flow_rate;    /* log rules' events/s per session (0: measured) */
    unsigned audit_max_age_days; /* retention by age (0: none) */
    unsigned audit_max_mb;       /* retention by size (0: none) */
    bool syslog_audit;           /* forward every record to syslog (RFC 5424 SD) */
    const char *syslog_audit_socket; /* ... to this socket (NULL: /dev/log) */
    const char *syslog_socket;       /* --syslog to this socket (NULL: /dev/log) */
    const char *protocol_exe;    /* tests: run this as the protocol process (NULL: lyhd itself) */
};

struct lyhd {
    struct lyhd_config cfg;
    struct event_base *base;
    struct store *store;
    struct server *server;
    struct guard *guard;
    struct audit *audit;         /* NULL until audit_start */
    struct policy *policy;       /* owned: the admin policy in force (policy.h); NULL = default */
    struct session_list sessions;
    /* tmpdirs being emptied in the background (session.c); finished, bounded,
     * at shutdown */
    TAILQ_HEAD(tmpdir_jobs, tmpdir_job) tmpdir_jobs;
    struct sc_program *seccomp;  /* built once at startup, installed by each child */
    struct closer *closer;       /* closes client fds off the loop; NULL: inline (tests) */
    struct homes *homes;         /* other users' homes, read off the loop (homes.h) */
    struct spawner *spawner;     /* forks the agents (spawner.h); NULL: lyhd forks them */
    struct pproc *pproc;         /* the unprivileged protocol process (pproc.h); NULL: none */
    uid_t proto_uid;             /* its user _lyhd (pproc_user; 0: not known) */
    bool stopping;               /* sessions_shutdown runs: no per-session table upkeep */
    gid_t proto_gid;
    int landlock_abi;            /* 0: Landlock missing, Run refuses */
    unsigned fd_limit;           /* RLIMIT_NOFILE after raising it to the hard limit */
    unsigned fd_base;            /* fds lyhd itself held when it started serving */
    gid_t drop_gids[16];         /* groups an agent never keeps (docker, sudo, ...) */
    size_t n_drop_gids;
    uint64_t start_mono_ms;
    int lock_fd;
    /* Where the per-launch tmpdirs go: LYHD_TMP_NAME in cfg.tmp_parent, root's
     * and mode 0700, so no other user can take its lock (by reading it, or by
     * a rename out of it: that needs search permission only) and make the
     * launch's mkdir wait (fsutil.h fs_remove_tree_as); and its O_PATH fd. */
    char tmp_dir[PATH_MAX];
    int tmp_fd;
    int exit_code;
};

#define LYHD_TMP_NAME "lyhd"

/* Monotonic and wall clocks in milliseconds. */
uint64_t lyhd_mono_ms(void);
uint64_t lyhd_mono_us(void);
int64_t lyhd_wall_ms(void);
/* clock's now plus ms, for the timed waits of lyhd's threads. */
struct timespec lyhd_deadline(clockid_t clock, unsigned ms);
/* Join t, waiting at most ms: 0, or -ETIMEDOUT with the thread left behind
 * (lyhd is exiting; a thread stuck on a file system that hangs must not keep
 * it), or another -errno. */
int lyhd_join_within(pthread_t t, unsigned ms);
/* pthread_create with every signal blocked in the new thread (no signal of
 * the daemon's is ever delivered to it; the caller's mask is kept): 0 or
 * -errno. attr may be NULL. */
int lyhd_thread_start(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);

/* Is g one of the guard gids (any user's agents, or the base)? */
static inline bool lyhd_guard_gid(const struct lyhd_config *c, uint32_t g) {
    return g >= c->guard_gid && g <= c->guard_gid_max;
}

#endif
