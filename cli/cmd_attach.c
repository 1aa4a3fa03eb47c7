/* lyh attach, lyh ls, lyh kill: the background sessions' commands. Each
 * talks to a session's holder (cli/hold.c) over its socket in the user's
 * session directory; `kill` then asks lyhd to end the session, as `lyh stop`
 * does.
 *
 * attach puts the terminal in raw mode and relays: the holder's output to
 * stdout, the keys to the holder. The prefix key (Ctrl-\) is ours: then `d`
 * detaches, `n`/`p` move to the next or previous session, the prefix again
 * sends it to the agent; anything else after it is dropped. Every way out
 * restores the terminal. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/hold.h"
#include "common/macros.h"

#define PREFIX_KEY 0x1c /* Ctrl-\ */
#define MAX_SESSIONS 256

void usage_attach(FILE *f) {
    fprintf(f, "Usage: lyh attach [--read-only] [--user USER] [NAME]\n"
               "Attach this terminal to a background session (lyh run -d --name NAME): what\n"
               "it printed meanwhile is shown again, then it runs here. NAME may be left out\n"
               "when you have one session only.\n"
               "Keys: Ctrl-\\ d detaches (the session runs on), Ctrl-\\ n / Ctrl-\\ p move to\n"
               "the next / previous session, Ctrl-\\ Ctrl-\\ sends Ctrl-\\ itself.\n"
               "  --read-only   watch only: your keys do not reach the agent\n"
               "  --user USER   (root) another user's session, always read-only\n"
               "Exit status: the agent's when it ends while attached, 0 when you detach.\n");
}

void usage_ls(FILE *f) {
    fprintf(f, "Usage: lyh ls [--json] [--user USER]\n"
               "List your background sessions: name, lyhd's session id, the agent's pid,\n"
               "whether a terminal is attached, how long since it last printed or read,\n"
               "and the command. --user USER (root): another user's.\n");
}

void usage_kill(FILE *f) {
    fprintf(f, "Usage: lyh kill [--grace SECONDS] NAME\n"
               "End the background session NAME as lyh stop ends a session: SIGTERM to the\n"
               "agent, SIGKILL after the grace period (default 10 s).\n");
}

/* ---- the terminal ---------------------------------------------------------------- */

static struct termios saved_tio;
static bool tio_raw;
static int sig_pipe[2] = {-1, -1};

static void tio_restore(void) {
    if (tio_raw) {
        (void)tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
        tio_raw = false;
    }
}

static void on_sig(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    (void)!write(sig_pipe[1], &b, 1);
    errno = saved;
}

static int tio_setup(void) {
    static bool once;
    struct termios raw;

    if (!once) {
        if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
            return -errno;
        struct sigaction sa = {.sa_handler = on_sig, .sa_flags = SA_RESTART};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGWINCH, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        /* a closed stdout (lyh attach | head) is an error to return, not a
         * death that leaves the terminal raw */
        signal(SIGPIPE, SIG_IGN);
        atexit(tio_restore);
        once = true;
    }
    if (tcgetattr(STDIN_FILENO, &saved_tio) < 0)
        return -errno;
    raw = saved_tio;
    cfmakeraw(&raw);
    if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) < 0)
        return -errno;
    tio_raw = true;
    return 0;
}

static void term_size(uint16_t *rows, uint16_t *cols) {
    struct winsize ws;
    *rows = 24;
    *cols = 80;
    if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
        *rows = ws.ws_row;
        *cols = ws.ws_col;
    }
}

static int write_out(const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(STDOUT_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            struct pollfd pf = {.fd = STDOUT_FILENO, .events = POLLOUT};
            (void)poll(&pf, 1, 100);
            continue;
        }
        if (w < 0)
            return -errno;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ---- attach ---------------------------------------------------------------------- */

enum attach_end { ATTACH_DETACHED, ATTACH_NEXT, ATTACH_PREV, ATTACH_ENDED, ATTACH_FAILED };

struct attach {
    int fd;
    bool read_only, after_prefix;
    uint8_t buf[HOLD_MSG_MAX];
    struct hold_msg m;
    int status; /* ATTACH_ENDED: the exit code to return */
};

static int send_keys(struct attach *a, const uint8_t *p, size_t n) {
    while (n > 0) {
        size_t c = n < HOLD_DATA_MAX ? n : HOLD_DATA_MAX;
        struct hold_msg m = {.type = HOLD_INPUT, .data = p, .len = c};
        int k = hold_send(a->fd, &m);
        if (k < 0)
            return k;
        p += c;
        n -= c;
    }
    return 0;
}

/* The user's keys: the prefix and what follows it are ours. Returns -1 to
 * go on, else the attach_end. */
static int keys(struct attach *a) {
    uint8_t in[4096], out[4096];
    size_t n_out = 0;
    ssize_t n = read(STDIN_FILENO, in, sizeof(in));

    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? -1 : ATTACH_DETACHED;
    if (n == 0)
        return ATTACH_DETACHED; /* no more keys: leave the session running */
    for (ssize_t i = 0; i < n; i++) {
        uint8_t b = in[i];
        int end = -1;
        if (a->after_prefix) {
            a->after_prefix = false;
            if (b == 'd' || b == 'D')
                end = ATTACH_DETACHED;
            else if (b == 'n' || b == 'N')
                end = ATTACH_NEXT;
            else if (b == 'p' || b == 'P')
                end = ATTACH_PREV;
            else if (b == PREFIX_KEY)
                out[n_out++] = b;
        } else if (b == PREFIX_KEY) {
            a->after_prefix = true;
        } else {
            out[n_out++] = b;
        }
        if (end >= 0) {
            if (!a->read_only && n_out)
                (void)send_keys(a, out, n_out);
            return end;
        }
    }
    if (!a->read_only && n_out && send_keys(a, out, n_out) < 0)
        return ATTACH_FAILED;
    return -1;
}

/* The holder's messages. Returns -1 to go on, else the attach_end. */
static int from_holder(struct attach *a, const char *name) {
    int k = hold_recv(a->fd, a->buf, &a->m, 0);

    if (k == -ETIMEDOUT)
        return -1;
    if (k < 0) {
        tio_restore();
        fprintf(stderr, "\r\nlyh: the connection to session '%s' ended (%s): this terminal "
                        "fell behind its output, or its holder was killed; lyh ls shows "
                        "whether it still runs\n",
                name, k == -ECONNRESET ? "closed" : strerror(-k));
        return ATTACH_FAILED;
    }
    switch (a->m.type) {
    case HOLD_OUTPUT:
        return write_out(a->m.data, a->m.len) < 0 ? ATTACH_FAILED : -1;
    case HOLD_NOTE: { /* printable bytes only: no escape reaches the terminal this way */
        char text[512];
        size_t n = 0;
        for (size_t i = 0; i < a->m.len && n < sizeof(text) - 1; i++)
            text[n++] = a->m.data[i] >= 0x20 && a->m.data[i] < 0x7f ? (char)a->m.data[i] : '?';
        text[n] = '\0';
        fprintf(stderr, "\r\nlyh: %s\r\n", text);
        return -1;
    }
    case HOLD_EXIT:
        tio_restore();
        if (!a->m.known) {
            fprintf(stderr, "lyh: session '%s' ended; its exit status is unknown (lyhd "
                            "restarted while it ran)\n",
                    name);
            a->status = EXIT_RUN_REFUSED;
        } else {
            a->status = a->m.signal ? 128 + a->m.signal : a->m.exit_code;
        }
        return ATTACH_ENDED;
    case HOLD_DETACHED:
        tio_restore();
        if (a->m.reason == HOLD_GONE_FULL)
            fprintf(stderr, "lyh: session '%s' has as many terminals attached as it serves "
                            "(4); detach one first\n",
                    name);
        return a->m.reason == HOLD_GONE_ASKED ? ATTACH_DETACHED : ATTACH_FAILED;
    default:
        tio_restore();
        fprintf(stderr, "lyh: session '%s' sent what a holder does not send; detached\n", name);
        return ATTACH_FAILED;
    }
}

static int attach_one(uid_t uid, const char *name, bool read_only, int *status) {
    _cleanup_free_ struct attach *a = calloc(1, sizeof(*a));
    int k, end = -1;

    if (!a)
        return ATTACH_FAILED;
    a->read_only = read_only;
    a->fd = -1;
    if ((k = hold_connect(uid, name, &a->fd)) < 0) {
        if (k == -ENOENT || k == -ECONNREFUSED)
            fprintf(stderr, "lyh attach: no session named '%s' (lyh ls lists them)\n", name);
        else
            fprintf(stderr, "lyh attach: session '%s': %s\n", name,
                    k == -EPERM   ? "its socket is not one your own lyh serves; not attached"
                    : k == -EAGAIN ? "its holder is too busy to answer; try again"
                                   : strerror(-k));
        if (k == -ECONNREFUSED && uid == getuid())
            hold_reap(name);
        return ATTACH_FAILED;
    }
    a->m = (struct hold_msg){.type = HOLD_ATTACH, .flags = read_only ? HOLD_ATTACH_READ_ONLY : 0};
    term_size(&a->m.rows, &a->m.cols);
    if ((k = tio_setup()) < 0) {
        fprintf(stderr, "lyh attach: cannot put the terminal in raw mode: %s\n", strerror(-k));
        close(a->fd);
        return ATTACH_FAILED;
    }
    if ((k = hold_send(a->fd, &a->m)) < 0) {
        tio_restore();
        fprintf(stderr, "lyh attach: session '%s': %s\n", name, strerror(-k));
        close(a->fd);
        return ATTACH_FAILED;
    }
    while (end < 0) {
        struct pollfd p[3] = {
            {.fd = a->fd, .events = POLLIN},
            {.fd = STDIN_FILENO, .events = POLLIN},
            {.fd = sig_pipe[0], .events = POLLIN},
        };
        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            end = ATTACH_FAILED;
            break;
        }
        if (p[0].revents)
            end = from_holder(a, name);
        if (end < 0 && p[1].revents)
            end = keys(a);
        if (end < 0 && p[2].revents) {
            unsigned char sig;
            while (end < 0 && read(sig_pipe[0], &sig, 1) == 1) {
                if (sig == SIGWINCH && !read_only) {
                    struct hold_msg m = {.type = HOLD_RESIZE};
                    term_size(&m.rows, &m.cols);
                    (void)hold_send(a->fd, &m);
                } else if (sig != SIGWINCH) {
                    end = ATTACH_DETACHED; /* our terminal went away: the session stays */
                }
            }
        }
    }
    if (end == ATTACH_DETACHED || end == ATTACH_NEXT || end == ATTACH_PREV) {
        struct hold_msg m = {.type = HOLD_DETACH};
        (void)hold_send(a->fd, &m);
        /* what a full-screen agent may have switched on is the agent's,
         * not this terminal's any more: main screen, cursor shown, no mouse
         * reports, no bracketed paste, attributes reset */
        static const char reset[] = "\033[?1049l\033[?25h\033[?1000l\033[?1002l\033[?1003l"
                                    "\033[?1006l\033[?2004l\033[0m";
        (void)write_out((const uint8_t *)reset, sizeof(reset) - 1);
    }
    tio_restore();
    close(a->fd);
    if (end == ATTACH_DETACHED)
        fprintf(stderr, "\r\nlyh: detached from '%s'; it runs on (lyh attach %s)\n", name, name);
    *status = a->status;
    return end;
}

int hold_attach_session(uid_t uid, const char *name, bool read_only, bool *ended) {
    char names[MAX_SESSIONS][HOLD_NAME_MAX + 1];
    char cur[HOLD_NAME_MAX + 1];
    int status = 0;

    if (!isatty(STDIN_FILENO)) {
        fprintf(stderr, "lyh attach: needs a terminal (stdin is not one)\n");
        return EXIT_USAGE;
    }
    snprintf(cur, sizeof(cur), "%s", name);
    for (unsigned hops = 0; hops < 10000; hops++) {
        int end = attach_one(uid, cur, read_only, &status);
        if (end == ATTACH_ENDED) {
            *ended = true;
            return status;
        }
        if (end == ATTACH_DETACHED)
            return EXIT_OK;
        if (end == ATTACH_FAILED)
            return EXIT_DAEMON_ERROR;
        size_t n = 0, at = 0;
        if (hold_names(uid, names, MAX_SESSIONS, &n) < 0 || n == 0)
            return EXIT_OK;
        for (size_t i = 0; i < n; i++)
            if (strcmp(names[i], cur) == 0)
                at = i;
        at = end == ATTACH_NEXT ? (at + 1) % n : (at + n - 1) % n;
        snprintf(cur, sizeof(cur), "%s", names[at]);
    }
    return EXIT_OK;
}

/* --user USER: only root looks at another user's sessions. */
static int pick_uid(const char *cmd, const char *user, uid_t *ret) {
    if (!user) {
        *ret = getuid();
        return EXIT_OK;
    }
    struct passwd *pw = getpwnam(user);
    if (!pw) {
        fprintf(stderr, "lyh %s: no user '%s'\n", cmd, user);
        return EXIT_USAGE;
    }
    if (getuid() != 0 && pw->pw_uid != getuid()) {
        fprintf(stderr, "lyh %s: --user %s: only root looks at another user's sessions\n", cmd,
                user);
        return EXIT_USAGE;
    }
    *ret = pw->pw_uid;
    return EXIT_OK;
}

/* The session a command names, or the only one there is. */
static int pick_name(const char *cmd, uid_t uid, int argc, char **argv, char *out) {
    char names[MAX_SESSIONS][HOLD_NAME_MAX + 1];
    size_t n = 0;

    if (argc == 1) {
        if (!hold_name_ok(argv[0])) {
            fprintf(stderr, "lyh %s: '%s' is not a session name\n", cmd, argv[0]);
            return EXIT_USAGE;
        }
        snprintf(out, HOLD_NAME_MAX + 1, "%s", argv[0]);
        return EXIT_OK;
    }
    int k = hold_names(uid, names, MAX_SESSIONS, &n);
    if (k < 0 && k != -ENOENT) {
        fprintf(stderr, "lyh %s: %s\n", cmd, strerror(-k));
        return EXIT_DAEMON_ERROR;
    }
    if (n == 1) {
        snprintf(out, HOLD_NAME_MAX + 1, "%s", names[0]);
        return EXIT_OK;
    }
    if (n == 0)
        fprintf(stderr, "lyh %s: no background sessions (start one with lyh run -d --name NAME)\n",
                cmd);
    else {
        fprintf(stderr, "lyh %s: %zu sessions; name one:", cmd, n);
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, " %s", names[i]);
        fprintf(stderr, "\n");
    }
    return EXIT_USAGE;
}

/* The options attach and ls share: one switch (--read-only, --json) and
 * --user. Returns -1 to go on, else the exit code. */
static int parse_opts(int argc, char **argv, const char *cmd, const char *flag_name,
                      void (*usage)(FILE *), bool *flag, const char **user) {
    const struct option opts[] = {
        {flag_name, no_argument, NULL, 'f'},
        {"user", required_argument, NULL, 'u'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
        switch (c) {
        case 'f': *flag = true; break;
        case 'u': *user = optarg; break;
        case 'h': usage(stdout); return EXIT_OK;
        case ':':
            fprintf(stderr, "lyh %s: option '%s' needs a value\n", cmd, argv[optind - 1]);
            return EXIT_USAGE;
        default:
            fprintf(stderr, "lyh %s: unknown option '%s'\n\n", cmd, argv[optind - 1]);
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    return -1;
}

int cmd_attach(struct cli *cli, int argc, char **argv) {
    bool ro = false;
    const char *user = NULL;
    char name[HOLD_NAME_MAX + 1];
    uid_t uid;
    int rc;

    (void)cli;
    if ((rc = parse_opts(argc, argv, "attach", "read-only", usage_attach, &ro, &user)) >= 0)
        return rc;
    if (argc - optind > 1) {
        usage_attach(stderr);
        return EXIT_USAGE;
    }
    if ((rc = pick_uid("attach", user, &uid)) != EXIT_OK ||
        (rc = pick_name("attach", uid, argc - optind, argv + optind, name)) != EXIT_OK)
        return rc;
    bool ended = false;
    return hold_attach_session(uid, name, ro || uid != getuid(), &ended);
}

static void fmt_idle(uint64_t secs, char *buf, size_t len) {
    if (secs < 120)
        snprintf(buf, len, "%llus", (unsigned long long)secs);
    else if (secs < 7200)
        snprintf(buf, len, "%llum", (unsigned long long)(secs / 60));
    else if (secs < 172800)
        snprintf(buf, len, "%lluh", (unsigned long long)(secs / 3600));
    else
        snprintf(buf, len, "%llud", (unsigned long long)(secs / 86400));
}

int cmd_ls(struct cli *cli, int argc, char **argv) {
    char names[MAX_SESSIONS][HOLD_NAME_MAX + 1];
    bool json = false;
    const char *user = NULL;
    size_t n = 0;
    uid_t uid;
    int rc;

    (void)cli;
    if ((rc = parse_opts(argc, argv, "ls", "json", usage_ls, &json, &user)) >= 0)
        return rc;
    if (argc != optind) {
        usage_ls(stderr);
        return EXIT_USAGE;
    }
    if ((rc = pick_uid("ls", user, &uid)) != EXIT_OK)
        return rc;
    int k = hold_names(uid, names, MAX_SESSIONS, &n);
    if (k < 0 && k != -ENOENT) {
        char dir[128], why[256];
        (void)hold_dir(uid, false, dir, sizeof(dir), why, sizeof(why));
        fprintf(stderr, "lyh ls: %s\n", k == -EPERM ? why : strerror(-k));
        return EXIT_DAEMON_ERROR;
    }
    if (!json && n)
        printf("%-16s %-16s %-8s %-9s %-5s %s\n", "NAME", "SESSION", "PID", "STATE", "IDLE",
               "COMMAND");
    uint64_t now = (uint64_t)time(NULL);
    for (size_t i = 0; i < n; i++) {
        struct hold_info in;
        int k2 = hold_ask_info(uid, names[i], &in);
        if (k2 == -ECONNREFUSED && uid == getuid())
            hold_reap(names[i]); /* its holder was killed */
        if (k2 < 0)
            continue; /* ended meanwhile */
        if (json) {
            printf("{\"name\":");
            json_string(stdout, in.name);
            printf(",\"session\":");
            json_string(stdout, in.session_id);
            printf(",\"pid\":%u,\"attached\":%s,\"lyhd_lost\":%s,\"started_unix\":%llu,"
                   "\"active_unix\":%llu,\"command\":",
                   in.pid, in.attached ? "true" : "false", in.lyhd_lost ? "true" : "false",
                   (unsigned long long)in.started, (unsigned long long)in.active);
            json_string(stdout, in.command);
            printf("}\n");
        } else {
            char idle[24];
            fmt_idle(now > in.active ? now - in.active : 0, idle, sizeof(idle));
            printf("%-16s %-16s %-8u %-9s %-5s %s\n", in.name, in.session_id, in.pid,
                   in.attached ? "attached" : "detached", idle, in.command);
        }
    }
    return EXIT_OK;
}

int cmd_kill(struct cli *cli, int argc, char **argv) {
    static const struct option opts[] = {
        {"grace", required_argument, NULL, 'g'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const char *grace = NULL;
    char name[HOLD_NAME_MAX + 1];
    struct hold_info in;
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
        switch (c) {
        case 'g': grace = optarg; break;
        case 'h': usage_kill(stdout); return EXIT_OK;
        case ':':
            fprintf(stderr, "lyh kill: option '%s' needs a value\n", argv[optind - 1]);
            return EXIT_USAGE;
        default:
            fprintf(stderr, "lyh kill: unknown option '%s'\n\n", argv[optind - 1]);
            usage_kill(stderr);
            return EXIT_USAGE;
        }
    }
    if (argc - optind != 1) {
        usage_kill(stderr);
        return EXIT_USAGE;
    }
    if ((rc = pick_name("kill", getuid(), 1, argv + optind, name)) != EXIT_OK)
        return rc;
    int k = hold_ask_info(getuid(), name, &in);
    if (k < 0) {
        fprintf(stderr, "lyh kill: %s\n",
                k == -ENOENT || k == -ECONNREFUSED ? "no such session (lyh ls lists them)"
                                                   : strerror(-k));
        if (k == -ECONNREFUSED)
            hold_reap(name);
        return EXIT_USAGE;
    }
    if (!in.session_id[0]) {
        fprintf(stderr, "lyh kill: session '%s' has no session id yet\n", name);
        return EXIT_DAEMON_ERROR;
    }
    /* lyhd ends it (the whole cgroup, recorded), as lyh stop does */
    char *sv[5] = {"stop"};
    int sc = 1;
    if (grace) {
        sv[sc++] = "--grace";
        sv[sc++] = (char *)grace;
    }
    sv[sc++] = in.session_id;
    sv[sc] = NULL;
    optind = 0; /* getopt starts over for cmd_stop's own options */
    return cmd_stop(cli, sc, sv);
}
