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
#include "daemon/session.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macros.h"
#include "daemon/guard.h"
#include "daemon/log.h"
#include "daemon/lyhd.h"
#include "daemon/rpc.h"
#include "platform/linux/cgroup.h"
#include "platform/linux/fsutil.h"
#include "platform/linux/spawn.h"

/* Waiting for a killed cgroup to empty: 250 x 20 ms. */
#define TEARDOWN_POLL_MS 20
#define TEARDOWN_MAX_TRIES 250

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
    CLOSE_FD(s->pidfd);
    CLOSE_FD(s->status_fd);
    CLOSE_FD(s->pty_fd);
    free(s);
}

/* Record the row in its own transaction (outside any request). */
static int save_row(struct session *s) {
    struct store *st = s->d->store;
    int r = store_begin(st);

    if (r == 0)
        r = store_session_update(st, &s->row);
    if (r == 0)
        r = store_commit(st);
    if (r < 0) {
        log_error("state.db update of session '%s' failed: %s", s->row.id, store_errmsg(st));
        store_rollback(st);
    }
    return r;
}

/* Reap a helper child (the tmpdir remover) when its pidfd says it is done. */
struct child_watch {
    struct event *ev;
    int pidfd;
    char path[256];
};

/* The user emptied the tmpdir; root removes the empty directory (its parent
 * may not be writable by the user). */
static void tmpdir_emptied(const char *path, const siginfo_t *si) {
    int r;

    if (si->si_code != CLD_EXITED || si->si_status != 0)
        log_warn("emptying %s did not finish cleanly (status %d)", path, si->si_status);
    r = fs_remove_empty_dir(path);
    if (r < 0)
        log_warn("cannot remove %s: %s", path, strerror(-r));
}

static void on_child_done(evutil_socket_t fd, short what, void *arg) {
    struct child_watch *w = arg;
    siginfo_t si = {0};

    if (waitid(P_PIDFD, (id_t)w->pidfd, &si, WEXITED) == 0)
        tmpdir_emptied(w->path, &si);
    event_free(w->ev);
    close(w->pidfd);
    free(w);
}

static void remove_tmpdir(struct session *s, bool sync) {
    struct child_watch *w;
    pid_t pid;
    int pidfd, r;

    if (!s->row.tmpdir[0])
        return;
    r = fs_remove_tree_as(s->row.tmpdir, s->row.uid, s->d->cfg.guard_gid, &pid, &pidfd);
    if (r < 0) {
        log_warn("cannot remove tmpdir %s of session '%s': %s", s->row.tmpdir, s->row.id,
                 strerror(-r));
        return;
    }
    w = sync ? NULL : calloc(1, sizeof(*w));
    if (w)
        w->ev = event_new(s->d->base, pidfd, EV_READ, on_child_done, w);
    if (!w || !w->ev || event_add(w->ev, NULL) < 0) {
        /* Cannot watch it (or shutting down): wait here (it is a short rm). */
        siginfo_t si = {0};
        if (waitid(P_PIDFD, (id_t)pidfd, &si, WEXITED) == 0)
            tmpdir_emptied(s->row.tmpdir, &si);
        close(pidfd);
        if (w && w->ev)
            event_free(w->ev);
        free(w);
        return;
    }
    w->pidfd = pidfd;
    snprintf(w->path, sizeof(w->path), "%s", s->row.tmpdir);
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

    /* 1. Nothing of the session may survive it. */
    if (s->has_cgroup) {
        r = cg_kill(&d->guard->cg, s->row.id);
        if (r < 0)
            log_warn("killing cgroup of session '%s' failed: %s", s->row.id, strerror(-r));
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
            log_warn("removing cgroup of session '%s' failed: %s", s->row.id, strerror(-r));
    }
    if (s->row.scope == LIANYAOHU__V1__SCOPE__SCOPE_USER ||
        s->row.scope == LIANYAOHU__V1__SCOPE__SCOPE_UID_GID) {
        struct store_guard g;
        r = guard_shared_release(d, s->row.uid, s->row.scope, &g);
        if (r < 0 && r != -ENOENT)
            log_error("releasing the firewall of uid %u failed: %s", s->row.uid,
                      strerror(-r));
    }
    remove_tmpdir(s, !may_wait);

    /* 4. The end, in state.db. */
    s->row.state = STORE_SESSION_ENDED;
    s->row.ended_ms = lyhd_wall_ms();
    (void)save_row(s);
    log_info("session '%s' of uid %u ended (exit %d, signal %d)", s->row.id, s->row.uid,
             s->row.exit_code, s->row.signal);
    if (may_wait)
        TAILQ_REMOVE(&d->sessions, s, link);
    session_free(s);
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

static void send_started(struct session *s) {
    Lianyaohu__V1__RunStarted st = LIANYAOHU__V1__RUN_STARTED__INIT;
    Lianyaohu__V1__RunEvent ev = LIANYAOHU__V1__RUN_EVENT__INIT;
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
    char *notes[2];
    char v6[160];
    size_t n = 0;

    if (!s->call)
        return;
    st.session_id = s->row.id;
    st.pid = (uint64_t)s->pid;
    st.scope = s->row.scope;
    st.interface = s->row.interface;
    st.ipv6_blocked = s->spec.ipv6_blocked;
    st.landlock_abi = (uint32_t)s->d->landlock_abi;
    if (s->spec.ipv6_blocked && s->row.interface[0]) {
        snprintf(v6, sizeof(v6), "IPv6 is blocked for this session (its default route does not "
                                 "use %s)", s->row.interface);
        notes[n++] = v6;
    }
    st.n_notes = n;
    st.notes = notes;
    ev.event_case = LIANYAOHU__V1__RUN_EVENT__EVENT_STARTED;
    ev.started = &st;
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_RUN_EVENT;
    resp.run_event = &ev;
    rpc_send(s->call, &resp, false);
}

static void send_exited(struct session *s) {
    Lianyaohu__V1__RunExited ex = LIANYAOHU__V1__RUN_EXITED__INIT;
    Lianyaohu__V1__RunEvent ev = LIANYAOHU__V1__RUN_EVENT__INIT;
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
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
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_RUN_EVENT;
    resp.run_event = &ev;
    rpc_send(call, &resp, true);
}

static void on_status(evutil_socket_t fd, short what, void *arg) {
    struct session *s = arg;
    struct spawn_failure f;
    int r = spawn_read_status(s->status_fd, &f);

    if (r == -EAGAIN)
        return;
    event_del(s->ev_status);
    CLOSE_FD(s->status_fd);
    if (r == 0) {
        s->exec_ok = true;
        audit_session_started(s->d, s);
        send_started(s);
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
        rpc_fail(call,
                 f.step == SPAWN_STEP_EXEC && f.err == ENOENT ? LIANYAOHU__V1__CODE__NOT_FOUND
                                                              : LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                 "the agent could not start: %s failed: %s%s", spawn_step_name(f.step),
                 strerror(f.err),
                 f.step == SPAWN_STEP_EXEC && f.err == ENOENT ? " (is it on PATH?)" : "");
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
    send_exited(s);
    session_teardown(s);
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
