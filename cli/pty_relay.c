/* The pty relay. Owns the pty master, the saved terminal state and a self-pipe
 * that turns signals into readable bytes, so all work happens in one poll loop
 * and no handler does more than write(2).
 *
 * Why a pty at all: handing the agent the user's own terminal would let it
 * push input into the user's shell (TIOCSTI) or reconfigure the terminal after
 * lyh exits. With a pty of its own the agent only ever talks to us. */
#include "cli/pty_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/lyh_client.h"
#include "common/macros.h"

struct pty_relay {
    int master;
    struct termios saved;
    bool raw;
    int sigpipe[2];
    struct lyh_client *client;
    char session_id[40];
    pid_t agent_pgrp; /* the agent's own process group (0: unknown) */
    bool lost;        /* the connection to lyhd ended while the agent ran */
};

/* The only process-wide state: where signal handlers write (set once). */
static int relay_sig_fd = -1;
static struct pty_relay *relay_active;

static void on_signal(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (relay_sig_fd >= 0)
        (void)!write(relay_sig_fd, &b, 1);
    errno = saved;
}

static void restore_at_exit(void) {
    if (relay_active)
        pty_relay_restore(relay_active);
}

int pty_relay_open(struct pty_relay **ret, int *ret_slave, uint32_t *rows, uint32_t *cols) {
    struct pty_relay *r = calloc(1, sizeof(*r));
    struct winsize ws;
    int slave;

    if (!r)
        return -ENOMEM;
    r->sigpipe[0] = r->sigpipe[1] = -1;
    r->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (r->master < 0 || grantpt(r->master) < 0 || unlockpt(r->master) < 0)
        goto fail;
    slave = open(ptsname(r->master), O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0)
        goto fail;
    /* The agent's terminal starts like ours (line discipline, size). */
    if (tcgetattr(STDIN_FILENO, &r->saved) == 0)
        (void)tcsetattr(slave, TCSANOW, &r->saved);
    /* no terminal (a background session started from a script): 24x80
     * until one attaches */
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
        ws = (struct winsize){.ws_row = 24, .ws_col = 80};
    (void)ioctl(r->master, TIOCSWINSZ, &ws);
    *rows = ws.ws_row;
    *cols = ws.ws_col;
    if (pipe2(r->sigpipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        close(slave);
        goto fail;
    }
    *ret = r;
    *ret_slave = slave;
    return 0;
fail:;
    int k = -errno;
    pty_relay_free(r);
    return k;
}

int pty_relay_start(struct pty_relay *r) {
    struct termios raw = r->saved;
    struct sigaction sa = {.sa_handler = on_signal};

    relay_sig_fd = r->sigpipe[1];
    relay_active = r;
    atexit(restore_at_exit);
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGWINCH, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    cfmakeraw(&raw);
    if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) < 0)
        return -errno;
    r->raw = true;
    return 0;
}

void pty_relay_set_session(struct pty_relay *r, struct lyh_client *c, const char *session_id,
                           uint64_t pid) {
    r->client = c;
    r->agent_pgrp = pid > 0 && pid <= INT32_MAX ? (pid_t)pid : 0;
    snprintf(r->session_id, sizeof(r->session_id), "%s", session_id);
}

static void forward(struct pty_relay *r, int sig) {
    lianyaohu_v1_Request *req;

    if (sig == SIGWINCH) {
        struct winsize ws;
        if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0)
            (void)ioctl(r->master, TIOCSWINSZ, &ws);
        return;
    }
    if (!r->client && r->lost && r->agent_pgrp > 1) {
        /* lyhd is gone: the agent is the user's own process, signalled
         * directly (SIGSTOP is not sent: nothing would report it) */
        if (sig != SIGSTOP)
            (void)kill(-r->agent_pgrp, sig);
        return;
    }
    if (!r->client || !r->session_id[0])
        return;
    req = calloc(1, sizeof(*req));
    if (!req)
        return;
    req->which_method = lianyaohu_v1_Request_signal_tag;
    snprintf(req->method.signal.session_id, sizeof(req->method.signal.session_id), "%s",
             r->session_id);
    req->method.signal.which_what = lianyaohu_v1_SignalRequest_signal_tag;
    req->method.signal.what.signal = sig;
    (void)lyh_client_send(r->client, req, NULL, 0, NULL);
    free(req);
}

static int copy(int from, int to) {
    char buf[16384];
    ssize_t n = read(from, buf, sizeof(buf));

    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 0 : -errno;
    if (n == 0)
        return -EPIPE;
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                struct pollfd p = {.fd = to, .events = POLLOUT};
                (void)poll(&p, 1, 100);
                continue;
            }
            return -errno;
        }
        off += w;
    }
    return 0;
}

/* The user's keys to the agent. The agent's process group has no
 * job-control parent inside its session (lyhd started it), so the kernel
 * discards the SIGTSTP its terminal would send on Ctrl-Z: when that group is
 * the terminal's foreground and the terminal is in a mode where the key
 * suspends (ISIG, VSUSP), lyh asks lyhd to stop it with SIGSTOP instead, and
 * lyhd's RunEvent.stopped then suspends lyh (pty_relay_suspend). A job of a
 * shell inside (its own group, the shell its parent) gets the key as usual,
 * and the shell handles it. Other bytes go through unchanged. */
static int keys_in(struct pty_relay *r) {
    unsigned char buf[16384];
    struct termios t;
    ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));

    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 0 : -errno;
    if (n == 0)
        return -EPIPE;
    bool susp = !r->lost && r->agent_pgrp > 0 && tcgetpgrp(r->master) == r->agent_pgrp &&
                tcgetattr(r->master, &t) == 0 && (t.c_lflag & ISIG) &&
                t.c_cc[VSUSP] != _POSIX_VDISABLE;
    ssize_t from = 0;
    for (ssize_t i = 0; i <= n; i++) {
        if (i < n && !(susp && buf[i] == t.c_cc[VSUSP]))
            continue;
        for (ssize_t off = from; off < i;) {
            ssize_t w = write(r->master, buf + off, (size_t)(i - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && errno == EAGAIN) {
                struct pollfd p = {.fd = r->master, .events = POLLOUT};
                (void)poll(&p, 1, 100);
                continue;
            }
            if (w < 0)
                return -errno;
            off += w;
        }
        if (i < n)
            forward(r, SIGSTOP);
        from = i + 1;
    }
    return 0;
}

int pty_relay_until_readable(struct pty_relay *r, int fd) {
    bool stdin_open = true, master_open = true;

    for (;;) {
        struct pollfd p[4] = {
            {.fd = fd, .events = POLLIN},
            {.fd = r->sigpipe[0], .events = POLLIN},
            {.fd = master_open ? r->master : -1, .events = POLLIN},
            {.fd = stdin_open ? STDIN_FILENO : -1, .events = POLLIN},
        };
        if (poll(p, 4, -1) < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (p[1].revents & POLLIN) {
            unsigned char sig;
            while (read(r->sigpipe[0], &sig, 1) == 1)
                forward(r, sig);
        }
        /* Output first, so what the agent printed before it exits is shown. */
        if (p[2].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (copy(r->master, STDOUT_FILENO) < 0)
                master_open = false; /* EIO: no slave holder left */
        }
        if (p[3].revents & (POLLIN | POLLHUP | POLLERR)) {
            if (keys_in(r) < 0)
                stdin_open = false;
        }
        if (p[0].revents || (fd < 0 && !master_open))
            return 0;
    }
}

void pty_relay_lost_daemon(struct pty_relay *r) {
    r->client = NULL;
    r->lost = true;
}

void pty_relay_drain(struct pty_relay *r) {
    /* Bounded: at most ~200 ms or until the pty reports no more output. */
    for (int i = 0; i < 20; i++) {
        struct pollfd p = {.fd = r->master, .events = POLLIN};
        if (poll(&p, 1, 10) <= 0)
            break;
        if (copy(r->master, STDOUT_FILENO) < 0)
            break;
    }
}

void pty_relay_suspend(struct pty_relay *r) {
    struct sigaction dfl = {.sa_handler = SIG_DFL}, old;
    struct termios raw = r->saved;

    pty_relay_restore(r);
    /* Stop as a shell job stops: the shell takes the terminal back and says
     * so; `fg` continues us. In an orphaned process group (no job control)
     * the kernel discards the signal and we go on at once. */
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGTSTP, &dfl, &old);
    (void)kill(getpid(), SIGTSTP);
    sigaction(SIGTSTP, &old, NULL);
    /* Continued (in the background, tcsetattr stops us again with SIGTTOU,
     * as it would any program that wants the terminal) */
    cfmakeraw(&raw);
    if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
        r->raw = true;
    forward(r, SIGWINCH); /* the size may have changed meanwhile */
    forward(r, SIGCONT);
}

int pty_relay_take_master(struct pty_relay *r) { return TAKE_FD(r->master); }

void pty_relay_restore(struct pty_relay *r) {
    if (r && r->raw) {
        (void)tcsetattr(STDIN_FILENO, TCSAFLUSH, &r->saved);
        r->raw = false;
    }
}

void pty_relay_free(struct pty_relay *r) {
    if (!r)
        return;
    pty_relay_restore(r);
    if (relay_active == r) {
        relay_active = NULL;
        relay_sig_fd = -1;
        signal(SIGWINCH, SIG_DFL);
    }
    CLOSE_FD(r->master);
    CLOSE_FD(r->sigpipe[0]);
    CLOSE_FD(r->sigpipe[1]);
    free(r);
}
