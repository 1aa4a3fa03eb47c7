/* A launch's paths, looked up off the event loop.
 *
 * Everything a Run decides from the caller's own file tree (its cwd, its
 * writable and read-only paths, its deny paths and sockets, the protected
 * entries of its home, some of which are made, the sockets to hide in it, and
 * the Landlock ruleset, whose build opens every granted path) is looked up as
 * the caller, and the caller can make any such lookup wait for as long as they
 * like: they can hold the lock of their own home (a getdents64 into a buffer
 * mapped from a FUSE file that never answers; docs/security-model.md,
 * "Directory locks a user holds"), and an mkdir there, or a lookup queued
 * behind a change of theirs, then waits uninterruptibly. On lyhd's loop that
 * stopped lyhd for everyone.
 *
 * So a thread of its own does it, one per launch, with the caller's
 * file-system identity (fs_ident_enter: per thread) and nothing of the loop's
 * but what the job holds: a copy of the policy, the request (owned), a hold on
 * the homes table. The loop hears the end through an eventfd, or gives up
 * after RUN_PATHS_TIMEOUT_S; a job given up is the thread's to free when it
 * ends (a thread waiting uninterruptibly cannot be ended). Such jobs count
 * against RUN_PATHS_PER_UID and RUN_PATHS_MAX until their thread has done
 * its work, so held locks cost lyhd a bounded number of threads per user.
 *
 * A thread that has done its job, and has root's identity back, waits up to
 * RUN_PATHS_KEEP_S for another, at most RUN_PATHS_KEEP of them: waking one
 * costs a launch less than making one. A job goes to a waiting thread only,
 * never into a queue behind a busy one, so a lookup that hangs still holds
 * up no other launch. */
#ifndef LYHD_RUN_PATHS_H
#define LYHD_RUN_PATHS_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "platform/linux/fsutil.h"
#include "daemon/policy.h"
#include "daemon/protect.h"
#include "daemon/wire.h"
#include "platform/linux/landlock.h"
#include "platform/linux/spawn.h"

#define RUN_MAX_PATHS 16
#define RUN_MAX_STATE_DIRS 16
#define RUN_MAX_DENY 8   /* the caller's deny paths (proto options bound the CLI to 8 too) */
#define RUN_MAX_HIDE (32 + RUN_MAX_DENY)
#define RUN_MAX_PROTECT 16 /* the caller's protect entries (as the proto options) */
#define RUN_MAX_SOCKETS 8  /* let-through sockets (SPAWN_MAX_SOCKETS, the proto options) */
#define RUN_MAX_EXPOSE (1 + 2 * RUN_MAX_PATHS)
_Static_assert(RUN_MAX_EXPOSE <= SPAWN_MAX_EXPOSE, "the spawn child shows at most SPAWN_MAX_EXPOSE");
_Static_assert(RUN_MAX_HIDE <= SPAWN_MAX_HIDE, "the spawn child covers at most SPAWN_MAX_HIDE");

#define RUN_PATHS_TIMEOUT_S 20 /* the loop's wait for a job; then the launch fails */
#define RUN_PATHS_PER_UID 32   /* jobs of one uid whose thread has not done its work */
#define RUN_PATHS_MAX 1024     /* jobs of all uids whose thread has not done its work */
#define RUN_PATHS_KEEP 2       /* threads kept waiting for the next job */
#define RUN_PATHS_KEEP_S 10    /* how long one waits; then it ends */

struct homes;
struct event_base;

/* A refusal decided where it cannot be sent yet (in the path thread; with
 * the caller's identity; after the child was begun): the first one wins. */
struct run_refusal {
    int code; /* Code; 0: none */
    char msg[1000];
};
/* Record it (if none is yet); returns -1. */
int run_refuse(struct run_refusal *f, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* What the thread reads (set before run_paths_start, never changed after)
 * and what it makes (the loop's once it heard the end; until then nobody
 * else touches the job). */
struct run_paths {
    /* in */
    Lianyaohu__V1__RunRequest rq; /* the request's paths, copied (run_paths_take) */
    struct policy pol;            /* a copy: an update may free the loop's */
    struct homes *homes;          /* held (homes_hold) */
    char socket_path[PATH_MAX];   /* lyhd's own */
    int landlock_abi;
    uid_t uid;
    gid_t gid;
    gid_t groups[FS_IDENT_MAX_GROUPS]; /* the caller's, as the kernel recorded them */
    size_t n_groups;
    char home[PATH_MAX];          /* from the passwd entry; checked by the thread */
    /* out */
    struct ll_policy ll;
    struct ll_report ll_report;
    int ll_fd;                    /* the ruleset, without the tmpdir's rules */
    char *hide[RUN_MAX_HIDE];
    size_t n_hide;
    char *expose[RUN_MAX_EXPOSE]; /* granted dirs under a private /tmp root */
    size_t n_expose;
    char *socks[RUN_MAX_SOCKETS]; /* sockets let through (--allow-socket) */
    size_t n_socks;
    struct prot_list prot;        /* entries of home kept read-only, with their pins */
    struct spawn_cover covers[PROT_MAX];
    struct run_refusal err;
    /* when the thread began, had the paths looked up, had the ruleset built
     * (lyhd_mono_us: lyhd --timing) */
    uint64_t t_began_us, t_looked_up_us, t_built_us;
};

struct run_paths_job;

/* Called on the loop once: done (ok) or given up (timed out). The job is the
 * callee's: run_paths_drop() it. */
typedef void (*run_paths_done_fn)(struct run_paths_job *job, bool timed_out, void *ud);

/* A new job: its in-fields to fill, then run_paths_start. NULL: out of
 * memory. */
struct run_paths_job *run_paths_new(void);
struct run_paths *run_paths_of(struct run_paths_job *job);
/* Start the thread. -EUSERS: uid has RUN_PATHS_PER_UID jobs whose thread has
 * not done its work (-EBUSY: all uids have RUN_PATHS_MAX); -errno otherwise. On
 * failure the job is still the caller's to drop. */
int run_paths_start(struct run_paths_job *job, struct event_base *base, run_paths_done_fn done,
                    void *ud);
/* The loop is done with the job (heard or not): freed now if its thread ended,
 * else by the thread when it does. Accepts NULL. */
void run_paths_drop(struct run_paths_job *job);

/* Copy what the thread reads of r (cwd, argv[0], narrow_home and the path
 * lists, each list within its bound and each string shorter than PATH_MAX)
 * into w->rq: a job given up on may outlive the request. 0, or -EINVAL /
 * -ENOMEM with a reason in why (a refusal of the request, INVALID_ARGUMENT,
 * for -EINVAL). */
int run_paths_take(struct run_paths *w, const Lianyaohu__V1__RunRequest *r, char *why,
                   size_t whylen);

/* Jobs of uid ((uid_t)-1: of all) whose thread has not done its work (the
 * open-file budget, tests); a job the loop hears of is not counted. */
unsigned run_paths_live(uid_t uid);

/* Threads waiting for a job (tests). */
unsigned run_paths_kept(void);

/* The work itself, on the calling thread (tests; the job's thread). 0, or
 * -errno when the thread could not take its own file-system identity back:
 * it must not do anything more as root. */
int run_paths_collect(struct run_paths *w);

/* Free what w owns (not w). */
void run_paths_clear(struct run_paths *w);

#endif
