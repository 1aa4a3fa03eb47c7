/* Signal: deliver a signal or a window size to a running session. Owner-only
 * (the table checks that through rpc_signal_owner). */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "daemon/lyhd.h"
#include "daemon/rpc.h"
#include "daemon/session.h"

int rpc_signal_owner(struct lyhd *d, const LyhRequest *req, uid_t *ret_owner) {
    struct session *s = session_find(d, req->signal->session_id);

    if (!s || s->row.state >= STORE_SESSION_ENDING)
        return -ENOENT;
    *ret_owner = s->row.uid;
    return 0;
}

/* Signals a client may forward: the ones a terminal user can send. */
static bool signal_allowed(int sig) {
    switch (sig) {
    case SIGINT: case SIGTERM: case SIGHUP: case SIGQUIT: case SIGTSTP: case SIGSTOP:
    case SIGCONT: case SIGWINCH: case SIGUSR1: case SIGUSR2: case SIGKILL:
        return true;
    default:
        return false;
    }
}

void rpc_signal(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    const Lianyaohu__V1__SignalRequest *sr = req->signal;
    struct session *s = session_find(d, sr->session_id);
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
    Lianyaohu__V1__SignalReply rep = LIANYAOHU__V1__SIGNAL_REPLY__INIT;

    if (!s || s->pid <= 0 || s->exited) {
        rpc_fail(call, LIANYAOHU__V1__CODE__NOT_FOUND, "session '%s' is not running",
                 sr->session_id);
        return;
    }
    switch (sr->what_case) {
    case LIANYAOHU__V1__SIGNAL_REQUEST__WHAT_SIGNAL:
        if (!signal_allowed(sr->signal)) {
            rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                     "signal %d cannot be forwarded (allowed: INT TERM HUP QUIT TSTP STOP CONT "
                     "WINCH USR1 USR2 KILL)",
                     sr->signal);
            return;
        }
        /* To the agent's process group: that is what a terminal would do. */
        if (sr->signal == SIGCONT)
            s->stop_told = false; /* the next stop is told again */
        if (kill(-s->pid, sr->signal) < 0 && errno != ESRCH) {
            rpc_fail(call, LIANYAOHU__V1__CODE__INTERNAL, "kill: %s", strerror(errno));
            return;
        }
        break;
    case LIANYAOHU__V1__SIGNAL_REQUEST__WHAT_WINDOW: {
        struct winsize ws = {.ws_row = (unsigned short)sr->window->rows,
                             .ws_col = (unsigned short)sr->window->cols};
        if (sr->window->rows == 0 || sr->window->cols == 0 || sr->window->rows > 10000 ||
            sr->window->cols > 10000) {
            rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT,
                     "window size %ux%u is out of range", sr->window->rows, sr->window->cols);
            return;
        }
        if (s->pty_fd < 0) {
            rpc_fail(call, LIANYAOHU__V1__CODE__FAILED_PRECONDITION,
                     "session '%s' has no terminal", sr->session_id);
            return;
        }
        if (ioctl(s->pty_fd, TIOCSWINSZ, &ws) < 0) {
            rpc_fail(call, LIANYAOHU__V1__CODE__INTERNAL, "TIOCSWINSZ: %s", strerror(errno));
            return;
        }
        break;
    }
    default:
        rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "Signal names neither a signal nor "
                                                              "a window size");
        return;
    }
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_SIGNAL;
    resp.signal = &rep;
    rpc_send(call, &resp, true);
}
