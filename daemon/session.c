/* Session lifecycle after spawn: exec status, exit, hang-up, teardown.
 *
 * Owns: struct session objects on d->sessions and the events that watch them.
 * Every state change is recorded in state.db before (or, for the end, right
 * after) the kernel change it describes.
 *
 * Teardown is off the latency path: the client gets its Exited event first;
 * killing leftovers, removing the chain, the cgroup and the tmpdir follow from
 * a zero timer. While leftovers are being killed the session's chain stays in
 * place, so nothing of the session is ever unguarded; even after the chain is
 * gone a straggler with the guard gid matches no session and is rejected. */
#include "daemon/audit.h"
#include "daemon/dns_fwd.h"
#include "daemon/session.h"
#include "daemon/spawner.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macros.h"
#include "daemon/guard.h"
#include "daemon/log.h"
#include "daemon/lyhd.h"
#include "daemon/policy.h"
#include "daemon/rpc.h"
#include "platform/linux/cgroup.h"
#include "platform/linux/conntrack.h"
#include "platform/linux/fsutil.h"
#include "platform/linux/nft_render.h"
#include "platform/linux/spawn.h"

/* Waiting for a killed cgroup to empty: 250 x 20 ms. */
#define TEARDOWN_POLL_MS 20
#define TEARDOWN_MAX_TRIES 250
#define SESSION_FLOWS_SYNC_MS 1000 /* longest wait for the protocol process's last flow events */

int session_new_id(char out[SESSION_ID_LEN + 1]) {
    static const char hex[] = "0123456789abcdef";
    uint8_t b[SESSION_ID_LEN / 2];

    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
        return -errno;
    for (size_t i = 0; i < sizeof(b); i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[SESSION_ID_LEN] = '\0';
    return 0;
}

struct session *session_find(struct lyhd *d, const char *id) {
    struct session *s;

    TAILQ_FOREACH(s, &d->sessions, link)
        if (strcmp(s->row.id, id) == 0)
            return s;
    return NULL;
}

unsigned session_fds(const struct session *s) {
    return (s->pidfd >= 0) + (s->status_fd >= 0) + (s->pty_fd >= 0) + dns_fwd_fds(s->dns);
}

unsigned session_count(struct lyhd *d, bool all, uid_t uid) {
    struct session *s;
    unsigned n = 0;

    TAILQ_FOREACH(s, &d->sessions, link)
        if (all || s->row.uid == uid)
            n++;
    return n;
}

void session_free(struct session *s) {
    if (!s)
        return;
    if (s->ev_exit)
        event_free(s->ev_exit);
    if (s->ev_status)
        event_free(s->ev_status);
    if (s->ev_grace)
        event_free(s->ev_grace);
    if (s->ev_teardown)
        event_free(s->ev_teardown);
    dns_fwd_free(s->dns);
    free(s->nft_kept);
    CLOSE_FD(s->pidfd);
    CLOSE_FD(s->status_fd);
    CLOSE_FD(s->pty_fd);
    free(s);
}

/* Record a row in its own transaction (outside any request). */
static int save_store_row(struct lyhd *d, const struct store_session *row) {
    struct store *st = d->store;
    int r = store_begin(st);

    if (r == 0)
        r = store_session_update(st, row);
    if (r == 0)
        r = store_commit(st);
    if (r < 0) {
        log_error("state.db update of session '%s' failed: %s", row->id, store_errmsg(st));
        store_rollback(st);
    }
    return r;
}

static int save_row(struct session *s) { return save_store_row(s->d, &s->row); }

/* A tmpdir being removed by a helper child (fs_remove_tree_as: lyhd's loop
 * never removes a directory itself, since a user can make that wait). A
 * session's row is marked ENDED only once its remover is over, so a crash
 * in between leaves the row ENDING and the next start reaps the session,
 * tmpdir included. */
/* How long a remover may take (a user can make it wait: it runs as them,
 * and the locks on its way can be theirs). One still at work then (300,000
 * empty files take 3 s to remove here) is given TMPDIR_REMOVE_MAX_MS more at
 * a time, up to TMPDIR_REMOVE_LONG_MS in all, while its user has fewer than
 * TMPDIR_LONG_PER_UID so given: a stopped one never gets there (its root
 * half kills it at once, FS_RM_STOPPED), and whatever a remover leaves, the
 * next start removes, with the same time again. */
#define TMPDIR_REMOVE_MAX_MS 10000
#define TMPDIR_REMOVE_LONG_MS 300000
#define TMPDIR_LONG_PER_UID 4
#define TMPDIR_REMOVE_SYNC_MS 2000
/* How long a SIGKILLed remover may take to be gone. */
#define TMPDIR_KILLED_MS 500

struct tmpdir_job {
    struct lyhd *d;
    struct event *ev;
    struct event *ev_timeout;
    int pidfd;
    char path[PATH_MAX];
    uid_t uid; /* the tmpdir's owner, whose rights the remover has */
    gid_t gid;
    bool end_row;
    struct store_session row; /* ENDED once the directory is gone */
    bool listed;              /* in d->tmpdir_jobs (running in the background) */
    bool asked;               /* the spawner's answer is owed (on_remover) */
    bool wait_now;            /* no watch on the remover: on_tmpdir_timeout waits for it */
    bool make_own;            /* the spawner made none: on_tmpdir_timeout forks one */
    bool long_job;            /* given more than TMPDIR_REMOVE_MAX_MS (on_tmpdir_timeout) */
    uint64_t watch_ms;        /* when its remover was watched (tmpdir_job_watch) */
    TAILQ_ENTRY(tmpdir_job) link;
};

/* The remover is over (si: how; NULL: none could be made); then the row
 * says the session is over. What it left, the next start removes. */
static void tmpdir_job_finish(struct tmpdir_job *j, const siginfo_t *si) {
    if (!si)
        log_warn("%s was not removed; the next start of lyhd removes it", j->path);
    else if (si->si_code == CLD_EXITED && si->si_status == FS_RM_MOUNTED)
        log_warn("%s has a file system mounted on it; it stays until that is unmounted "
                 "(the next start of lyhd removes it then)", j->path);
    else if (si->si_code == CLD_EXITED && si->si_status == FS_RM_STOPPED)
        log_warn("the remover of %s was stopped (by uid %u: it runs as them), so it was "
                 "killed; the next start of lyhd removes what is left", j->path, j->uid);
    else if (si->si_code != CLD_EXITED || si->si_status != FS_RM_GONE)
        log_warn("removing %s did not finish cleanly (%s %d); the next start of lyhd removes "
                 "what is left",
                 j->path, si->si_code == CLD_EXITED ? "status" : "signal", si->si_status);
    if (j->end_row)
        (void)save_store_row(j->d, &j->row);
}

static void tmpdir_job_free(struct tmpdir_job *j) {
    if (!j)
        return;
    if (j->listed)
        TAILQ_REMOVE(&j->d->tmpdir_jobs, j, link);
    if (j->ev)
        event_free(j->ev);
    if (j->ev_timeout)
        event_free(j->ev_timeout);
    CLOSE_FD(j->pidfd);
    free(j);
}

static void tmpdir_job_wait(struct tmpdir_job *j, int ms);
static void tmpdir_job_watch(struct tmpdir_job *j, int pidfd);

/* The spawner made no remover (it failed, or cannot make lyhd's children
 * here): a fork of lyhd's, on the job's own turn (never inside the work
 * that took the spawner's answer: a Run's, whose request that fork's copy of
 * lyhd would hold). 0, or the job is over (freed). */
static int tmpdir_job_make_own(struct tmpdir_job *j, bool watch) {
    pid_t pid;
    int pidfd = -1;

    j->make_own = false;
    int r = fs_remove_tree_as(j->path, spawn_tmp_subs, SPAWN_TMP_N, j->uid, j->gid, &pid, &pidfd);
    if (r < 0) {
        log_warn_errno(-r, "cannot remove %s", j->path);
        tmpdir_job_finish(j, NULL);
        tmpdir_job_free(j);
        return -1;
    }
    if (watch) {
        tmpdir_job_watch(j, pidfd);
    } else {
        j->pidfd = pidfd;
    }
    return 0;
}

/* May j's remover, at work for ran ms, go on? Within TMPDIR_REMOVE_LONG_MS,
 * and while its user has fewer than TMPDIR_LONG_PER_UID removers that went
 * on (a walk of the jobs, only here: no launch waits on it). */
static bool tmpdir_job_may_go_on(const struct tmpdir_job *j, uint64_t ran) {
    const struct tmpdir_job *o;
    unsigned n = 0;

    if (ran >= TMPDIR_REMOVE_LONG_MS)
        return false;
    if (j->long_job)
        return true;
    TAILQ_FOREACH(o, &j->d->tmpdir_jobs, link)
        if (o->long_job && o->uid == j->uid)
            n++;
    return n < TMPDIR_LONG_PER_UID;
}

/* The remover ran over its time (its user may make it wait): kill it;
 * its exit then finishes the job. Also the job's own turn to finish when
 * its remover could not be made or watched, or to make one (on_remover). */
static void on_tmpdir_timeout(evutil_socket_t fd, short what, void *arg) {
    struct tmpdir_job *j = arg;

    if (j->asked) { /* cannot last: the spawner answers or is given up within 5 s */
        struct timeval tv = {.tv_sec = 1};
        (void)event_add(j->ev_timeout, &tv);
        return;
    }
    if (j->make_own) {
        (void)tmpdir_job_make_own(j, true);
        return;
    }
    if (j->pidfd < 0 || j->wait_now) {
        event_del(j->ev);
        tmpdir_job_wait(j, TMPDIR_REMOVE_SYNC_MS);
        tmpdir_job_free(j);
        return;
    }
    uint64_t ran = lyhd_mono_ms() - j->watch_ms;
    if (tmpdir_job_may_go_on(j, ran)) {
        struct timeval tv = {.tv_sec = TMPDIR_REMOVE_MAX_MS / 1000};
        if (!j->long_job)
            log_info("removing %s takes over %d ms; it may go on for up to %d s", j->path,
                     TMPDIR_REMOVE_MAX_MS, TMPDIR_REMOVE_LONG_MS / 1000);
        j->long_job = true;
        if (event_add(j->ev_timeout, &tv) == 0)
            return;
    }
    /* Its exit finishes the job; one that waits on a directory a user holds
     * ends only once they let go (fs_remove_tree_as): until then the row
     * stays ENDING, and nothing on the loop waits for it. */
    log_warn("removing %s took over %llu ms; killing the remover (the next start of lyhd "
             "removes what is left)", j->path, (unsigned long long)ran);
    (void)syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
}

/* Has the process behind pidfd ended, waiting until the monotonic time
 * end_ms at most? */
static bool pidfd_ended_by(int pidfd, uint64_t end_ms) {
    uint64_t now = lyhd_mono_ms();
    struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
    return poll(&pfd, 1, now < end_ms ? (int)(end_ms - now) : 0) == 1;
}

/* The job's remover, killed already, by end_ms: reap it and finish the job
 * (none: finish). One that a SIGKILL does not end waits on a lock a user
 * holds (fs_remove_tree_as): it is left to end by itself, and the row stays
 * ENDING for the next start (no wait here may be unbounded). */
static void tmpdir_job_reap_by(struct tmpdir_job *j, uint64_t end_ms) {
    siginfo_t si = {0};

    if (j->pidfd < 0)
        tmpdir_job_finish(j, NULL);
    else if (pidfd_ended_by(j->pidfd, end_ms))
        tmpdir_job_finish(j, waitid(P_PIDFD, (id_t)j->pidfd, &si, WEXITED) == 0 ? &si : NULL);
    else
        log_warn("the remover of %s does not end (it waits on a directory a user holds); "
                 "left to end by itself, and the next start of lyhd removes it",
                 j->path);
}

/* Wait for the remover at most ms, then kill it; then reap it (none: finish). */
static void tmpdir_job_wait(struct tmpdir_job *j, int ms) {
    if (j->pidfd >= 0 && !pidfd_ended_by(j->pidfd, lyhd_mono_ms() + (uint64_t)ms)) {
        log_warn("removing %s took over %d ms; killing the remover", j->path, ms);
        (void)syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
    }
    tmpdir_job_reap_by(j, lyhd_mono_ms() + TMPDIR_KILLED_MS);
}

static void on_tmpdir_emptied(evutil_socket_t fd, short what, void *arg) {
    struct tmpdir_job *j = arg;
    siginfo_t si = {0};

    tmpdir_job_finish(j, waitid(P_PIDFD, (id_t)j->pidfd, &si, WEXITED) == 0 ? &si : NULL);
    tmpdir_job_free(j);
}

/* The spawner's answer (spawner_remove_tree_async): watch the remover. This
 * may run inside someone else's work (a Run's transaction, spawner.h): the
 * job finishes only from its own events, never here. */
static void on_remover(void *arg, int r, pid_t pid, int pidfd) {
    struct tmpdir_job *j = arg;
    struct timeval now = {0};

    (void)pid;
    j->asked = false;
    if (r == -EIO || r == -ENOSYS) {
        j->make_own = true; /* spawner.h: nothing was made */
        (void)event_add(j->ev_timeout, &now);
        return;
    }
    if (r < 0) {
        log_warn_errno(-r, "cannot remove %s", j->path);
        (void)event_add(j->ev_timeout, &now); /* finish (no remover) */
        return;
    }
    tmpdir_job_watch(j, pidfd);
}

/* Watch the remover pidfd (the job's now): its exit finishes the job, and it
 * has TMPDIR_REMOVE_MAX_MS from now. */
static void tmpdir_job_watch(struct tmpdir_job *j, int pidfd) {
    struct timeval now = {0};
    struct timeval tv = {.tv_sec = TMPDIR_REMOVE_MAX_MS / 1000};

    j->pidfd = pidfd;
    j->watch_ms = lyhd_mono_ms();
    if (event_assign(j->ev, j->d->base, j->pidfd, EV_READ, on_tmpdir_emptied, j) < 0 ||
        event_add(j->ev, NULL) < 0 || event_add(j->ev_timeout, &tv) < 0) {
        j->wait_now = true;
        (void)event_add(j->ev_timeout, &now);
    }
}

/* The gid of the tmpdir path, looked at without entering what may be mounted
 * on it (fs_stat_here): the user's guard gid fs_make_private_dir gave it, or
 * the base one (a directory of an older lyhd, or one that cannot be read). */
static gid_t tmpdir_gid(struct lyhd *d, const char *path) {
    const char *base = strrchr(path, '/');
    _cleanup_close_ int pfd = fs_open_parent_dir(path);
    struct stat st;
    if (base && pfd >= 0 && fs_stat_here(pfd, base + 1, &st) == 0 && lyhd_guard_gid(&d->cfg, st.st_gid))
        return st.st_gid;
    return d->cfg.guard_gid;
}

/* Remove path (a per-launch tmpdir, owned by uid) in a remover
 * (fs_remove_tree_as: the empty directories by name as root, anything else
 * with uid's rights only); then, when end_row is given, record it (its state
 * already ENDED). sync (shutdown): the remover is made now and waited for by
 * session_tmpdir_jobs_finish; else the loop hears when it is done. Never an
 * rmdir here: a user can make one wait as long as they like. */
static void tmpdir_remove(struct lyhd *d, const char *path, uid_t uid,
                          const struct store_session *end_row, bool sync) {
    struct tmpdir_job *j;
    pid_t pid;
    int r;

    j = calloc(1, sizeof(*j));
    if (!j) {
        log_error("out of memory removing %s; the next start removes it", path);
        return;
    }
    j->d = d;
    j->pidfd = -1;
    j->uid = uid;
    snprintf(j->path, sizeof(j->path), "%s", path);
    if (end_row) {
        j->end_row = true;
        j->row = *end_row;
    }
    /* as its owner: the uid, and the gid fs_make_private_dir gave it (the
     * user's guard gid; the base one for a directory of an older lyhd) */
    gid_t gid = tmpdir_gid(d, j->path);
    j->gid = gid;
    if (!sync) {
        /* In the background: the spawner's answer too (its clone of itself
         * is ~2 ms of a slow machine, at every session's end). The pidfd's
         * event is filled in when the answer comes (on_remover). */
        struct timeval tv = {.tv_sec = TMPDIR_REMOVE_MAX_MS / 1000};
        j->ev = event_new(d->base, -1, 0, on_tmpdir_emptied, j);
        j->ev_timeout = evtimer_new(d->base, on_tmpdir_timeout, j);
        if (j->ev && j->ev_timeout && event_add(j->ev_timeout, &tv) == 0) {
            TAILQ_INSERT_TAIL(&d->tmpdir_jobs, j, link);
            j->listed = true;
            j->asked = true;
            spawner_remove_tree_async(d, j->path, uid, gid, on_remover, j);
            return;
        }
    }
    r = spawner_remove_tree(d, j->path, uid, gid, &pid, &j->pidfd);
    if (r < 0) {
        log_warn_errno(-r, "cannot remove %s", j->path);
        tmpdir_job_finish(j, NULL);
        tmpdir_job_free(j);
        return;
    }
    /* Shutdown: session_tmpdir_jobs_finish waits for it, with the others,
     * under one deadline for all. Without that list, wait here, bounded. */
    if (d->tmpdir_jobs.tqh_last) {
        TAILQ_INSERT_TAIL(&d->tmpdir_jobs, j, link);
        j->listed = true;
        return;
    }
    tmpdir_job_wait(j, TMPDIR_REMOVE_SYNC_MS);
    tmpdir_job_free(j);
}

void session_tmpdir_remove(struct lyhd *d, const char *path, uid_t uid) {
    tmpdir_remove(d, path, uid, NULL, false);
}

void session_tmpdir_jobs_finish(struct lyhd *d) {
    struct tmpdir_job *j, *next;

    if (!d->tmpdir_jobs.tqh_last)
        return; /* never initialised */
    spawner_settle(d); /* every job knows its remover (or has none, or must make one) */
    /* Bounded in all, whatever users hold: the removers have
     * TMPDIR_REMOVE_SYNC_MS together, then those killed TMPDIR_KILLED_MS
     * together; one still there waits on a directory a user holds
     * (fs_remove_tree_as) and is left, its row ENDING for the next start. */
    uint64_t end = lyhd_mono_ms() + TMPDIR_REMOVE_SYNC_MS;
    for (j = TAILQ_FIRST(&d->tmpdir_jobs); j; j = next) {
        next = TAILQ_NEXT(j, link);
        if (j->ev) /* none for one listed at shutdown (tmpdir_remove) */
            event_del(j->ev);
        if (j->ev_timeout)
            event_del(j->ev_timeout);
        if (j->make_own && tmpdir_job_make_own(j, false) < 0)
            continue; /* over, and freed */
        if (j->pidfd >= 0 && !pidfd_ended_by(j->pidfd, end)) {
            log_warn("removing %s took too long at shutdown; killing the remover", j->path);
            (void)syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
        }
    }
    end = lyhd_mono_ms() + TMPDIR_KILLED_MS;
    while ((j = TAILQ_FIRST(&d->tmpdir_jobs))) {
        tmpdir_job_reap_by(j, end);
        tmpdir_job_free(j);
    }
}

/* Is name what session_new_id() makes, behind "lyh-"? */
static bool tmpdir_name(const char *name, char id[SESSION_ID_LEN + 1]) {
    if (strncmp(name, "lyh-", 4) != 0 || strlen(name + 4) != SESSION_ID_LEN)
        return false;
    for (size_t i = 0; i < SESSION_ID_LEN; i++) {
        char c = name[4 + i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
        id[i] = c;
    }
    id[SESSION_ID_LEN] = '\0';
    return true;
}

unsigned session_sweep_tmpdirs(struct lyhd *d) {
    /* Only lyhd's own directory. An older lyhd made them in --tmp-dir
     * itself: a reading of that (/tmp) can be made to wait by any user (a
     * reader queues behind a writer they hold waiting), so the tmpdirs of
     * its sessions are removed only where state.db has them (the
     * reconciliation), the rest left to the administrator (operate.md). */
    const char *parent = d->tmp_dir;
    DIR *dir = opendir(parent);
    unsigned n = 0;

    if (!dir) {
        log_warn("cannot read %s to remove tmpdirs of ended sessions: %s", parent,
                 strerror(errno));
        return 0;
    }
    for (struct dirent *de; (de = readdir(dir));) {
        char id[SESSION_ID_LEN + 1], path[PATH_MAX];
        struct store_session row;
        struct stat st;

        if (!tmpdir_name(de->d_name, id))
            continue;
        /* Ours: a real directory (never a symlink) with the guard gid, as
         * fs_make_private_dir made it; and no live session owns it (the
         * reconciliation before this re-adopted or reaped every live row).
         * Nobody but root can make anything here (0700). */
        int r = fs_stat_here(dirfd(dir), de->d_name, &st);
        if (r == -EXDEV)
            log_warn("%s/%s has a file system mounted on it; left as it is", parent,
                     de->d_name);
        if (r < 0 || !S_ISDIR(st.st_mode) || !lyhd_guard_gid(&d->cfg, st.st_gid) || session_find(d, id))
            continue;
        r = store_session_get(d->store, id, &row);
        if (r == 0 && row.state != STORE_SESSION_ENDED)
            continue;
        if (r < 0 && r != -ENOENT)
            continue; /* cannot tell: leave it */
        if (snprintf(path, sizeof(path), "%s/%s", parent, de->d_name) >= (int)sizeof(path))
            continue; /* cannot be: main.c open_tmp_dir bounds tmp_dir */
        log_warn("removing %s: its session is %s", path, r == 0 ? "over" : "unknown to state.db");
        (void)store_reap_log(d->store, path, "removed",
                             r == 0 ? "tmpdir of an ended session" : "tmpdir of an unknown session");
        /* Its user: the row's, else the owner of its tmp (the tmpdir is
         * root's; a remover given uid 0 only removes empty directories) */
        char sub[NAME_MAX + 16];
        struct stat sst;
        uid_t owner = 0;
        snprintf(sub, sizeof(sub), "%s/%s", de->d_name, spawn_tmp_subs[0]);
        if (r == 0)
            owner = row.uid;
        else if (fs_stat_here(dirfd(dir), sub, &sst) == 0)
            owner = sst.st_uid;
        tmpdir_remove(d, path, owner, NULL, false);
        n++;
    }
    closedir(dir);
    return n;
}

static void teardown_run(struct session *s, bool may_wait);

static void teardown_step(evutil_socket_t fd, short what, void *arg) {
    teardown_run(arg, true);
}

void session_finish_now(struct session *s) {
    if (s->ev_teardown || s->exited) {
        teardown_run(s, false);
        return;
    }
    log_info("leaving session '%s' of uid %u running and guarded", s->row.id, s->row.uid);
    session_free(s);
}

/* may_wait: poll the cgroup until it drains (event loop running); the list
 * unlink and free happen here too unless the caller already unlinked it. */
static void teardown_run(struct session *s, bool may_wait) {
    struct lyhd *d = s->d;
    bool populated = false;
    int r;

    s->t_us[SESSION_T_LAST] = lyhd_mono_us(); /* the last turn's is what stays */
    /* 1. Nothing of the session may survive it. */
    if (s->has_cgroup) {
        r = cg_kill(&d->guard->cg, s->row.id);
        if (r < 0)
            log_warn_errno(-r, "killing cgroup of session '%s' failed", s->row.id);
        r = cg_populated(&d->guard->cg, s->row.id, &populated);
        if (may_wait && r == 0 && populated && ++s->teardown_tries < TEARDOWN_MAX_TRIES) {
            struct timeval tv = {.tv_usec = TEARDOWN_POLL_MS * 1000};
            event_add(s->ev_teardown, &tv);
            return;
        }
        if (populated)
            log_error("session '%s': processes survive cgroup.kill; removing its rules anyway "
                      "(they keep the guard gid and match no session, so they cannot send)",
                      s->row.id);
    } else if (s->pid > 0) {
        kill(-s->pid, SIGKILL);
    }

    /* Its forwarder is of no use any more: the conntrack entries that send
     * flows there go now (before the client, told of the exit, can start
     * another session), or a later session's query that happens to reuse
     * one's addresses and ports (an ephemeral port come round) would follow
     * it to this port and be refused. Nothing of the session runs, so no new
     * ones come. */
    if (s->dns && s->spec.dns_port && !s->dns_flows_forgotten) {
        unsigned n = 0;
        uint64_t marked = 1;
        s->dns_flows_forgotten = true;
        /* Only the session's forwarder rules give its flows the DNS mark, and
         * they count what they mark: none counted, none to forget (and no
         * walk of the whole conntrack table, ~3 ms of CPU here). */
        if (s->has_chain && guard_dns_flows_marked(d, s, &marked) == 0 && marked == 0)
            r = 0;
        else
            r = ct_forget_forwarder(s->spec.dns_port, NFTR_DNS_FLOW_MARK, &n);
        if (r < 0)
            log_warn("forgetting the DNS flows of session '%s' (port %u) failed: %s; they "
                     "expire by themselves", s->row.id, s->spec.dns_port, strerror(-r));
        else if (n)
            log_debug("session '%s': %u DNS flow(s) forgotten", s->row.id, n);
    }

    /* 2. The end, on record, while the chain and its counters still exist. The
     * kernel sends its last flow events in batches; give it that long first. */
    if (!s->audit_ended) {
        /* Measured from when nothing of the session runs any more. */
        uint64_t settle = audit_settle_ms(d), now = lyhd_mono_ms();
        if (!s->settle_from_ms)
            s->settle_from_ms = now;
        if (may_wait && s->ev_teardown && now - s->settle_from_ms < settle) {
            struct timeval tv = {.tv_usec = (suseconds_t)((settle - (now - s->settle_from_ms)) * 1000)};
            event_add(s->ev_teardown, &tv);
            return;
        }
        /* ... and the protocol process, which reads them, has sent them all
         * (at most a second: a hung one costs a gap in the record, not the
         * session's end) */
        if (may_wait && s->ev_teardown && !s->flows_sync_asked) {
            s->flows_sync_asked = true;
            s->flows_sync = audit_flows_sync(d);
        }
        if (may_wait && s->ev_teardown && !audit_flows_synced_since(d, s->flows_sync) &&
            now - s->settle_from_ms < settle + SESSION_FLOWS_SYNC_MS) {
            struct timeval tv = {.tv_usec = 5 * 1000};
            event_add(s->ev_teardown, &tv);
            return;
        }
        audit_session_ended(d, s);
        s->audit_ended = true;
    }

    /* 3. Rules, cgroup, tmpdir. */
    if (s->has_chain) {
        r = guard_session_del(d, s);
        if (r < 0)
            log_error("removing firewall chain of session '%s' failed: %s", s->row.id,
                      strerror(-r));
        else
            s->has_chain = false;
    }
    if (s->has_cgroup) {
        r = cg_remove(&d->guard->cg, s->row.id);
        if (r < 0)
            log_warn_errno(-r, "removing cgroup of session '%s' failed", s->row.id);
    }
    if (s->row.scope == LIANYAOHU__V1__SCOPE__SCOPE_USER ||
        s->row.scope == LIANYAOHU__V1__SCOPE__SCOPE_UID_GID) {
        struct store_guard g;
        r = guard_shared_release(d, s->row.uid, s->row.scope, &g);
        if (r < 0 && r != -ENOENT)
            log_error("releasing the firewall of uid %u failed: %s", s->row.uid,
                      strerror(-r));
    }
    /* 4. The end, in state.db, once the tmpdir is gone (tmpdir_remove). */
    s->row.state = STORE_SESSION_ENDED;
    s->row.ended_ms = lyhd_wall_ms();
    if (s->row.tmpdir[0])
        tmpdir_remove(d, s->row.tmpdir, s->row.uid, &s->row, !may_wait);
    else
        (void)save_row(s);
    log_info("session '%s' of uid %u ended (exit %d, signal %d)", s->row.id, s->row.uid,
             s->row.exit_code, s->row.signal);
    s->t_us[SESSION_T_TORN] = lyhd_mono_us();
    session_log_phases(s, true);
    if (may_wait)
        TAILQ_REMOVE(&d->sessions, s, link);
    session_free(s);
}

/* The time between two marks in microseconds, or 0 when either is missing. */
static unsigned long long phase(const struct session *s, enum session_t from, enum session_t to) {
    return s->t_us[from] && s->t_us[to] >= s->t_us[from] ? s->t_us[to] - s->t_us[from] : 0;
}

void session_log_phases(const struct session *s, bool end) {
    if (!s->d->cfg.timing)
        return;
    if (!end) {
        /* a cgroup-less session has no cgroup mark: that phase is 0 */
        enum session_t before_begin = s->t_us[SESSION_T_CGROUP] ? SESSION_T_CGROUP : SESSION_T_ROW;
        log_info("launch %s phases (us): checks %llu tmpdir %llu state_db %llu cgroup %llu begin %llu "
                 "nft %llu landlock %llu fork %llu record %llu exec %llu total %llu -- within checks: "
                 "validate %llu thread_start %llu lookups %llu ruleset %llu handback %llu "
                 "checks_rest %llu -- at (CLOCK_MONOTONIC us): entry_at %llu started_at %llu -- "
                 "child made by %s",
                 s->row.id, phase(s, SESSION_T_ENTRY, SESSION_T_CHECKED),
                 phase(s, SESSION_T_JOB_STARTED, SESSION_T_TMPDIR), phase(s, SESSION_T_CHECKED, SESSION_T_ROW),
                 phase(s, SESSION_T_ROW, SESSION_T_CGROUP), phase(s, before_begin, SESSION_T_BEGUN),
                 phase(s, SESSION_T_BEGUN, SESSION_T_NFT),
                 phase(s, SESSION_T_NFT, SESSION_T_LANDLOCK), phase(s, SESSION_T_LANDLOCK, SESSION_T_FORK),
                 phase(s, SESSION_T_FORK, SESSION_T_RECORDED),
                 phase(s, SESSION_T_RECORDED, SESSION_T_EXEC), phase(s, SESSION_T_ENTRY, SESSION_T_EXEC),
                 phase(s, SESSION_T_ENTRY, SESSION_T_VALIDATED),
                 phase(s, SESSION_T_VALIDATED, SESSION_T_THREAD),
                 phase(s, SESSION_T_THREAD, SESSION_T_LOOKED_UP),
                 phase(s, SESSION_T_LOOKED_UP, SESSION_T_BUILT),
                 phase(s, SESSION_T_BUILT, SESSION_T_HEARD),
                 phase(s, SESSION_T_HEARD, SESSION_T_CHECKED),
                 (unsigned long long)s->t_us[SESSION_T_ENTRY],
                 (unsigned long long)s->t_us[SESSION_T_TELL_STARTED],
                 s->child_way ? s->child_way : "nothing");
        return;
    }
    /* last_turn: how long the loop was held by the teardown's last turn
     * (the rules, cgroup and tmpdir; the earlier turns only poll) */
    log_info("end %s phases (us): exit_to_reply %llu teardown %llu last_turn %llu -- at "
             "(CLOCK_MONOTONIC us): exit_at %llu replied_at %llu",
             s->row.id, phase(s, SESSION_T_EXIT, SESSION_T_REPLIED),
             phase(s, SESSION_T_REPLIED, SESSION_T_TORN), phase(s, SESSION_T_LAST, SESSION_T_TORN),
             (unsigned long long)s->t_us[SESSION_T_EXIT],
             (unsigned long long)s->t_us[SESSION_T_TELL_EXITED]);
}

void session_teardown(struct session *s) {
    struct timeval zero = {0};

    if (s->ev_teardown)
        return; /* already under way */
    if (s->call) {
        s->call->on_disconnect = NULL;
        s->call->state = NULL;
        rpc_fail(s->call, LIANYAOHU__V1__CODE__ABORTED, "session ended");
        s->call = NULL;
    }
    if (s->ev_grace)
        event_del(s->ev_grace);
    if (s->row.state < STORE_SESSION_ENDING) {
        s->row.state = STORE_SESSION_ENDING;
        (void)save_row(s);
    }
    s->ev_teardown = evtimer_new(s->d->base, teardown_step, s);
    if (!s->ev_teardown || event_add(s->ev_teardown, &zero) < 0) {
        log_error("cannot schedule teardown of session '%s'; doing it now", s->row.id);
        teardown_run(s, true);
    }
}

/* One RunEvent to the session's Run call (end: the last one). */
static void send_event(struct rpc_call *call, Lianyaohu__V1__RunEvent *ev, bool end) {
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;

    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_RUN_EVENT;
    resp.run_event = ev;
    rpc_send(call, &resp, end);
}

static void send_started(struct session *s) {
    Lianyaohu__V1__RunStarted st = LIANYAOHU__V1__RUN_STARTED__INIT;
    Lianyaohu__V1__RunEvent ev = LIANYAOHU__V1__RUN_EVENT__INIT;
    char *notes[7], *resolvers[GSPEC_MAX_RESOLVERS];
    char ll[300], ls[300], sk[1300], res[GSPEC_MAX_RESOLVERS][INET6_ADDRSTRLEN];
    size_t n = 0;

    if (!s->call)
        return;
    st.session_id = s->row.id;
    st.pid = (uint64_t)s->pid;
    st.scope = s->row.scope;
    st.interface = s->row.interface;
    st.proxy = s->proxy;
    st.ipv6_blocked = s->spec.ipv6_blocked;
    st.landlock_abi = (uint32_t)s->d->landlock_abi;
    st.listeners = s->d->guard->listeners;
    bool lan_proxy = false;
    for (size_t i = 0; s->proxy[0] && i < s->spec.n_lan; i++)
        lan_proxy |= !dr_is_loopback(&s->spec.lan[i]);
    if (lan_proxy)
        notes[n++] = "proxy-only on the LAN (the admin policy permits it): what the agent "
                     "sends through the proxy leaves this machine by its LAN, not a VPN";
    if (s->d->landlock_abi < (int)POLICY_DEFAULT_MIN_LANDLOCK_ABI) {
        snprintf(ll, sizeof(ll),
                 "Landlock ABI %d (the admin policy accepts it): abstract Unix sockets and signals "
                 "are not scoped, so the agent can reach abstract sockets such as X11's and "
                 "signal your other processes",
                 s->d->landlock_abi);
        notes[n++] = ll;
    }
    if (!s->d->guard->listeners) {
        snprintf(ls, sizeof(ls),
                 "the agent cannot run local servers on this host (bind, listen and accept are "
                 "denied): %s",
                 s->d->guard->listeners_why);
        notes[n++] = ls;
    }
    if (s->path_note[0])
        notes[n++] = s->path_note;
    /* the DNS it gets, for the client's start line */
    for (size_t i = 0; s->dns && i < s->spec.n_resolvers && i < GSPEC_MAX_RESOLVERS; i++) {
        char *a = res[st.n_resolvers];
        if (inet_ntop(s->spec.resolvers[i].family, s->spec.resolvers[i].addr, a, sizeof(res[0])))
            resolvers[st.n_resolvers++] = a;
    }
    st.resolvers = resolvers;
    st.allowed_domains = s->dns ? (uint32_t)s->spec.n_domains : 0;
    if (s->sockets[0]) {
        snprintf(sk, sizeof(sk),
                 "the agent can reach these sockets of yours (--allow-socket), and what listens "
                 "there acts for it outside the sandbox: %s",
                 s->sockets);
        notes[n++] = sk;
    }
    st.n_notes = n;
    st.notes = notes;
    ev.event_case = LIANYAOHU__V1__RUN_EVENT__EVENT_STARTED;
    ev.started = &st;
    send_event(s->call, &ev, false);
}

static void send_exited(struct session *s) {
    Lianyaohu__V1__RunExited ex = LIANYAOHU__V1__RUN_EXITED__INIT;
    Lianyaohu__V1__RunEvent ev = LIANYAOHU__V1__RUN_EVENT__INIT;
    struct rpc_call *call = s->call;

    if (!call)
        return;
    s->call = NULL;
    call->on_disconnect = NULL;
    call->state = NULL;
    ex.exit_code = s->row.exit_code;
    ex.signal = s->row.signal;
    ex.duration_ms = lyhd_mono_ms() - s->started_mono_ms;
    ev.event_case = LIANYAOHU__V1__RUN_EVENT__EVENT_EXITED;
    ev.exited = &ex;
    send_event(call, &ev, true);
}

static void on_status(evutil_socket_t fd, short what, void *arg) {
    struct session *s = arg;
    struct spawn_failure f;
    int r = spawn_read_status(s->status_fd, &f);

    if (r == -EAGAIN)
        return;
    event_del(s->ev_status);
    CLOSE_FD(s->status_fd);
    /* A launch lyhd failed after the child was begun never got the go: an
     * end of the pipe without a record is its death at the gate, not an
     * exec (killed meanwhile, say). */
    if (r == 0 && s->start_fail_code) {
        r = 1;
        f = (struct spawn_failure){.step = SPAWN_STEP_GATE, .err = ECANCELED};
    }
    if (r == 0) {
        s->exec_ok = true;
        audit_session_started(s->d, s);
        s->t_us[SESSION_T_TELL_STARTED] = lyhd_mono_us();
        send_started(s);
        s->t_us[SESSION_T_EXEC] = lyhd_mono_us();
        session_log_phases(s, false);
        return;
    }
    if (r < 0) {
        f.step = SPAWN_STEP_NONE;
        f.err = -r;
    }
    log_warn("session '%s' of uid %u: sandbox setup failed at %s: %s", s->row.id, s->row.uid,
             spawn_step_name(f.step), strerror(f.err));
    if (s->call) {
        struct rpc_call *call = s->call;
        s->call = NULL;
        call->on_disconnect = NULL;
        call->state = NULL;
        if (s->start_fail_code) /* lyhd failed it (rpc_run); the child stopped */
            rpc_fail(call, s->start_fail_code, "%s", s->start_fail);
        else if (f.step == SPAWN_STEP_EXEC && f.err == ENOENT)
            rpc_fail(call, LIANYAOHU__V1__CODE__NOT_FOUND,
                     "the agent could not start: command '%s' not found (is it on PATH?)",
                     s->row.argv0);
        else if (f.step == SPAWN_STEP_EXEC)
            rpc_fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                     "the agent could not start: cannot run '%s': %s", s->row.argv0,
                     strerror(f.err));
        else
            rpc_fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                     "the agent could not start: %s failed: %s", spawn_step_name(f.step),
                     strerror(f.err));
    }
}

static void on_child_exit(evutil_socket_t fd, short what, void *arg) {
    struct session *s = arg;
    siginfo_t si = {0};

    /* The status pipe may still hold the child's last word: read it first. */
    if (s->status_fd >= 0)
        on_status(s->status_fd, EV_READ, s);
    if (waitid(P_PIDFD, (id_t)s->pidfd, &si, WEXITED | WNOHANG) < 0) {
        if (errno != ECHILD)
            return;
        /* Not our child (re-adopted after a restart): it ended, status unknown. */
        si.si_code = 0;
        si.si_status = 0;
    } else if (si.si_pid == 0) {
        return; /* not exited yet */
    }
    event_del(s->ev_exit);
    s->exited = true;
    s->t_us[SESSION_T_EXIT] = lyhd_mono_us();
    if (si.si_code == 0) {
        s->row.exit_code = -1;
        s->row.signal = 0;
    } else if (si.si_code == CLD_EXITED) {
        s->row.exit_code = si.si_status;
        s->row.signal = 0;
    } else {
        s->row.exit_code = -1;
        s->row.signal = si.si_status;
    }
    s->t_us[SESSION_T_TELL_EXITED] = lyhd_mono_us();
    send_exited(s);
    s->t_us[SESSION_T_REPLIED] = lyhd_mono_us();
    session_teardown(s);
}

static void send_stopped(struct session *s, int sig) {
    Lianyaohu__V1__RunStopped st = LIANYAOHU__V1__RUN_STOPPED__INIT;
    Lianyaohu__V1__RunEvent ev = LIANYAOHU__V1__RUN_EVENT__INIT;

    st.signal = sig;
    ev.event_case = LIANYAOHU__V1__RUN_EVENT__EVENT_STOPPED;
    ev.stopped = &st;
    send_event(s->call, &ev, false);
}

void session_on_sigchld(struct lyhd *d) {
    struct session *s;

    /* Only our own children report stops (an adopted session's agent is
     * not: ECHILD), and only a terminal session's client can act on it. */
    TAILQ_FOREACH(s, &d->sessions, link) {
        siginfo_t si = {0};
        if (s->pidfd < 0 || s->exited || !s->call || s->pty_fd < 0)
            continue;
        if (waitid(P_PIDFD, (id_t)s->pidfd, &si, WSTOPPED | WCONTINUED | WNOHANG) < 0 ||
            !si.si_pid)
            continue;
        /* one word per stop: an agent that stops and continues itself in a
         * loop does not flood its client */
        if (si.si_code == CLD_STOPPED && !s->stop_told) {
            s->stop_told = true;
            send_stopped(s, si.si_status);
        } else if (si.si_code == CLD_CONTINUED) {
            s->stop_told = false;
        }
    }
}

static void on_grace(evutil_socket_t fd, short what, void *arg) {
    struct session *s = arg;

    log_info("session '%s' did not end after SIGHUP; killing it", s->row.id);
    if (s->has_cgroup)
        (void)cg_kill(&s->d->guard->cg, s->row.id);
    else if (s->pid > 0)
        kill(-s->pid, SIGKILL);
}

void session_hangup(struct session *s) {
    struct timeval tv = {
        .tv_sec = s->d->cfg.hangup_grace_ms / 1000,
        .tv_usec = (s->d->cfg.hangup_grace_ms % 1000) * 1000,
    };

    s->call = NULL;
    if (s->exited || s->pid <= 0)
        return;
    log_info("client of session '%s' went away; hanging up", s->row.id);
    /* The agent leads its own session and process group (setsid). */
    kill(-s->pid, SIGHUP);
    kill(-s->pid, SIGCONT);
    if (!s->ev_grace)
        s->ev_grace = evtimer_new(s->d->base, on_grace, s);
    if (s->ev_grace)
        event_add(s->ev_grace, &tv);
}

int session_watch(struct session *s) {
    s->ev_exit = event_new(s->d->base, s->pidfd, EV_READ | EV_PERSIST, on_child_exit, s);
    if (!s->ev_exit || event_add(s->ev_exit, NULL) < 0)
        return -ENOMEM;
    if (s->status_fd >= 0) {
        s->ev_status = event_new(s->d->base, s->status_fd, EV_READ | EV_PERSIST, on_status, s);
        if (!s->ev_status || event_add(s->ev_status, NULL) < 0)
            return -ENOMEM;
    }
    return 0;
}
