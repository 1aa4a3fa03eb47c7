/* Sessions: one agent launch each, from Run to teardown.
 *
 * A session owns its kernel objects (cgroup, firewall chain, tmpdir, the
 * child's pidfd) and its state.db row. The row is written before each kernel
 * change it describes, so a crash at any point leaves enough for the reaper. */
#ifndef LYHD_SESSION_H
#define LYHD_SESSION_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "daemon/guard_spec.h"
#include "storage/store.h"

struct lyhd;
struct rpc_call;
struct event;
struct dns_fwd;

#define SESSION_ID_LEN 16 /* hex characters */

/* The phases of a launch and of an end, as lyhd measures them: each mark is
 * when that phase ended (the Run request's handler started at T_ENTRY). */
enum session_t {
    SESSION_T_ENTRY,    /* rpc_run called (the request decoded and checked) */
    SESSION_T_VALIDATED, /* the request checked on the loop (policy, destinations,
                          * interface, resolvers, environment) */
    SESSION_T_JOB_STARTED, /* the path thread started (its start returned) */
    SESSION_T_THREAD,   /* the path thread running (its own clock; it may come
                         * before T_JOB_STARTED) */
    SESSION_T_LOOKED_UP, /* the paths looked up, in the thread */
    SESSION_T_BUILT,    /* the Landlock ruleset built, in the thread */
    SESSION_T_HEARD,    /* the loop heard the thread was done */
    SESSION_T_CHECKED,  /* the rest of the checks: the session caps again, groups,
                         * the DNS forwarder started */
    SESSION_T_TMPDIR,   /* the guard gid and the private tmpdir made, on the loop
                         * beside the path thread (from T_JOB_STARTED) */
    SESSION_T_ROW,      /* the state.db row committed */
    SESSION_T_CGROUP,   /* the session cgroup made (and a shared chain taken) */
    SESSION_T_BEGUN,    /* the plan sent to the spawner, gated (the child makes its
                         * mounts), or found not to go that way */
    SESSION_T_NFT,      /* its chain installed (one nf_tables transaction) */
    SESSION_T_LANDLOCK, /* the tmpdir's Landlock rules added to the ruleset */
    SESSION_T_FORK,     /* the child made: the spawner's answer, the go sent (or the
                         * one-step spawn's fork) */
    SESSION_T_RECORDED, /* pid recorded in state.db, watched */
    SESSION_T_TELL_STARTED, /* the child's exec confirmed; RunStarted about to be sent
                             * (--timing's started_at: before the send, so that it
                             * comes before the client reads it) */
    SESSION_T_EXEC,     /* the child's exec confirmed; RunStarted sent */
    SESSION_T_EXIT,     /* the agent's exit seen */
    SESSION_T_TELL_EXITED, /* RunExited about to be sent (--timing's replied_at) */
    SESSION_T_REPLIED,  /* RunExited sent */
    SESSION_T_LAST,     /* the teardown's last turn on the loop began */
    SESSION_T_TORN,     /* everything removed (the tmpdir: asked for) */
    SESSION_T_COUNT,
};

struct nft_session_objs;

struct session {
    struct lyhd *d;
    struct store_session row; /* what state.db holds */
    struct gspec spec;
    struct rpc_call *call;    /* the Run call streaming to the client; NULL once gone */
    pid_t pid;
    int pidfd;
    int status_fd;            /* exec status pipe, until exec succeeded or failed */
    int pty_fd;               /* a dup of the pty slave for window size changes; -1 */
    struct event *ev_exit;
    struct event *ev_status;
    struct event *ev_grace;   /* SIGHUP sent, SIGKILL when this fires */
    struct event *ev_teardown;
    bool has_cgroup;
    bool has_chain;           /* guard rules of its own (row.chain names them: s-<id>) */
    bool data;                /* ... in the data layout (docs/guard-as-data.md): elements,
                               * named counters and chains d-<id>/a-<id>, no s-<id> */
    bool exec_ok;
    bool exited;
    bool adopted;             /* found alive at startup: no client, no exit status */
    bool dns_elem_lost;       /* adopted, its dnsport element could not be put back: retried */
    bool monitor;             /* Run asked for its refused flows (RunEvent.flow) */
    bool accept_unlogged;     /* its chain counts allowed flows without logging them
                               * (Policy.log_allowed_flows = false when it was built) */
    uint64_t monitor_dropped; /* monitor lines not sent: the client was not reading */
    uint64_t audit_after_id;  /* records compared with the counters: id > this */
    uint64_t settle_from_ms;  /* teardown: when the cgroup was found empty */
    uint32_t flows_sync;      /* teardown: the FLOWS_SYNC waited for (0: none) */
    bool flows_sync_asked;
    bool dns_flows_forgotten; /* teardown: its forwarder's conntrack entries deleted */
    bool dns_marks_counted;   /* its own chain's DNS-mark counters have counted every
                               * packet: built by this lyhd at launch, never rebuilt
                               * or replaced since (guard_dns_flows_marked) */
    bool stop_told;           /* its client heard of the agent's stop, not yet continued */
    bool audit_ended;         /* the end is on record */
    char path_note[400];      /* RunStarted note about its paths ("" none) */
    /* A launch that failed after its child was begun (rpc_run): the child
     * stops at the gate (SPAWN_STEP_GATE), and this is the answer then. */
    int start_fail_code;      /* 0: none */
    const char *child_way;    /* spawn_way_name: how its child was made (--timing) */
    char start_fail[1000];
    char proxy[DR_FORMAT_MAX]; /* proxy-only mode: its proxy, as text ("" none; not
                                * restored after a restart of lyhd) */
    uint32_t lo_slot;         /* its loopback marks' slot (0: none, no listeners) */
    struct nft_session_objs *nft_kept; /* owned: what guard_session_add installed, for a
                                        * delete in one round trip (NULL: ask the kernel) */
    struct dns_fwd *dns;      /* owned: its DNS forwarder (spec.dns_port), NULL: none */
    bool wants_dns;           /* Run: its DNS is to be forwarded (resolvers picked) */
    char sockets[1100];       /* the sockets it may reach although hidden, ", "-joined */
    uint64_t started_mono_ms;
    uint64_t t_us[SESSION_T_COUNT]; /* when each launch phase ended (lyhd_mono_us; 0: not) */
    unsigned teardown_tries;
    TAILQ_ENTRY(session) link;
};

TAILQ_HEAD(session_list, session);

/* Log one session's launch or end phases, with --timing (bench/run reads
 * them: docs/performance.md). */
void session_log_phases(const struct session *s, bool end);

/* Random id of SESSION_ID_LEN lowercase hex characters (getrandom). */
int session_new_id(char out[SESSION_ID_LEN + 1]);

/* Find a live session by id. */
struct session *session_find(struct lyhd *d, const char *id);

/* Watch a running child: its pidfd (exit) and, until exec, its status pipe. */
int session_watch(struct session *s);

/* The client went away: SIGHUP the session now, SIGKILL after the grace period. */
void session_hangup(struct session *s);

/* Start teardown (off the latency path): kill what is left in the cgroup,
 * remove chain, cgroup and tmpdir, record the end. Idempotent. */
void session_teardown(struct session *s);

/* At daemon shutdown: a session whose teardown is pending is torn down now
 * (without waiting for its cgroup to drain); a running one is left running
 * and guarded. Either way the object is freed. The caller has unlinked it. */
void session_finish_now(struct session *s);

/* At startup, after reconciliation: remove per-launch tmpdirs (lyh-<id> in
 * lyhd's directory in --tmp-dir, with the guard gid) whose session state.db
 * knows to be over, or does not know at all. Removal runs with the owner's rights, in the
 * background. Returns how many were found. */
unsigned session_sweep_tmpdirs(struct lyhd *d);
/* Remove the tmpdir path of uid's in the background (a remover:
 * fs_remove_tree_as), recording nothing: a launch's undo. */
void session_tmpdir_remove(struct lyhd *d, const char *path, uid_t uid);
/* At shutdown: wait for every tmpdir still being removed in the background
 * (2 s for all, then the removers left are killed), record what it ends, free
 * it. Accepts a lyhd whose list was never initialised. */
void session_tmpdir_jobs_finish(struct lyhd *d);

/* Release a session object (not its kernel objects). */
void session_free(struct session *s);
/* SIGCHLD: a terminal session whose agent's main process stopped (Ctrl-Z)
 * tells its client (RunEvent.stopped), which suspends itself as a shell job
 * would and sends SIGCONT when continued. */
void session_on_sigchld(struct lyhd *d);

/* File descriptors the session holds in lyhd (pidfd, status pipe, pty). */
unsigned session_fds(const struct session *s);

/* Count live sessions of uid (or all). */
unsigned session_count(struct lyhd *d, bool all, uid_t uid);

#endif
