/* lyh run: start an agent in a sandbox whose network leaves only through the
 * chosen VPN interface.
 *
 * The CLI turns options into typed fields (the daemon parses no text), filters
 * its own environment through the allowlist, picks the interface, and hands
 * the daemon either a pty slave (when stdin is a terminal) or its own stdio.
 * With a pty the real terminal goes to raw mode and bytes are relayed both
 * ways; the agent never holds the user's terminal, so TIOCSTI from inside
 * cannot type into the user's shell. Every exit path restores the terminal. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pb_encode.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/audit_fmt.h"
#include "cli/cli.h"
#include "cli/textbuf.h"
#include "cli/config.h"
#include "cli/hold.h"
#include "cli/pty_relay.h"
#include "cli/vpn_pick.h"
#include "cli/proxy.h"
#include "common/dest_rule.h"
#include "common/env_policy.h"
#include "common/lyh_limits.h"
#include "common/macros.h"

extern char **environ;

#define RUN_MAX_ENV 128
#define RUN_MAX_FLAG_LIST 128 /* per list option; the request's own bounds apply later */

struct run_opts {
    const char *vpn;
    const char *cwd;
    const char *env[RUN_MAX_ENV]; /* NAME=VALUE: --env merged with the config's [env] */
    size_t n_env;
    /* The list options as given; merged with the config before use. */
    const char *allow[RUN_MAX_FLAG_LIST], *deny[RUN_MAX_FLAG_LIST], *lan[RUN_MAX_FLAG_LIST];
    const char *host_ports[RUN_MAX_FLAG_LIST];
    const char *dns[RUN_MAX_FLAG_LIST];
    const char *domains[RUN_MAX_FLAG_LIST];
    const char *sockets[RUN_MAX_FLAG_LIST];
    /* relative ones made absolute (allocated when there are: zeroing 128
     * KiB of stack at every launch cost 35 page faults) */
    char (*sockets_abs)[1024];
    const char *writable[RUN_MAX_FLAG_LIST], *read_only[RUN_MAX_FLAG_LIST];
    size_t n_allow, n_deny, n_lan, n_writable, n_read_only, n_host_ports, n_sockets, n_dns, n_domains;
    bool no_firewall, shared_user, allow_non_default, narrow_home;
    bool print_firewall, print_policy, no_tui, monitor;
    const char *monitor_to; /* --monitor-to: a file, or fd:N */
    const char *name;       /* --name: a background session (cli/hold.h) */
    bool detach;            /* -d: ... not attached here */
    char **argv;
    int argc;
};

void usage_run(FILE *f) {
    fprintf(f,
            "Usage: lyh run [OPTIONS] [-- COMMAND [ARGS...]]\n"
            "Start COMMAND (default: claude) so it reaches the network only through a VPN.\n\n"
            "  --vpn NAME                 the VPN interface (one the admin policy allows:\n"
            "                             tun*, wg*, tailscale*, ... by default); else picked\n"
            "  --vpn none                 proxy-only: no VPN; the agent reaches only the proxy in\n"
            "                             --env HTTPS_PROXY=URL (or [defaults] proxy), on loopback\n"
            "  --cwd PATH                 working directory (default: the current one)\n"
            "  --env NAME=VALUE           set a variable for the agent (repeatable)\n"
            "  --allow-dest RULE          with a deny-default policy: allow this destination\n"
            "  --deny-dest RULE           refuse this destination\n"
            "  --lan-allow RULE           reopen part of the LAN (must lie in a blocked range)\n"
            "  --allow-host-port PORT[-PORT]  let the agent reach a service of this machine on\n"
            "                             127.0.0.1 and ::1 at that port (repeatable)\n"
            "  --allow-domain NAME        only names on this list resolve, and on the VPN the\n"
            "                             agent reaches only what they resolved to (NAME\n"
            "                             exactly, or *.NAME: any name below it; repeatable)\n"
            "  --dns ADDRESS              the resolver lyhd asks, through the VPN, for the\n"
            "                             agent's DNS queries (repeatable; default: the\n"
            "                             interface's resolver as the system knows it)\n"
            "  --allow-socket PATH        let the agent reach this socket of yours although lyh\n"
            "                             hides its place (what listens acts for the agent)\n"
            "  --writable PATH            extra writable path (yours, outside system dirs)\n"
            "  --read-only PATH           extra read-only path\n"
            "  --narrow-home              only agent state dirs of $HOME are writable\n"
            "  --allow-non-default-route  skip the IPv4 default-route check (traffic not\n"
            "                             routed to the VPN is refused, not steered)\n"
            "  --no-firewall              no VPN: the agent gets no IP network at all,\n"
            "                             only the filesystem and syscall sandbox (warns)\n"
            "  --shared-user-firewall     one firewall for all your processes (fallback)\n"
            "  --print-firewall           print the rules that would be installed, then exit\n"
            "  --print-policy             print the effective policy, then exit\n"
            "  --no-tui                   no pty and no picker, even on a terminal\n"
            "  --name NAME                a background session: it runs on when this terminal\n"
            "                             detaches (Ctrl-\\ d) or closes, and when lyhd\n"
            "                             restarts; lyh attach NAME, lyh ls, lyh kill NAME\n"
            "  -d, --detach               start it in the background, not attached here (the\n"
            "                             name defaults to the command's)\n"
            "  --monitor                  print each refused flow on stderr as it happens (in a\n"
            "                             terminal session: when the agent ends, as it would\n"
            "                             draw over the agent's screen)\n"
            "  --monitor-to FILE|fd:N     --monitor, each line to FILE (appended) or fd N,\n"
            "                             as it happens (tail -f it in a second pane)\n"
            "  --quiet                    fewer notes at start (warnings, errors and --monitor\n"
            "                             still print)\n"
            "  --timing                   at the end, print on stderr when each step of the\n"
            "                             launch happened (CLOCK_MONOTONIC microseconds, the\n"
            "                             clock of lyhd --timing; for bench/run)\n"
            "  --config PATH              the global config file to use (lianyaohu.toml(5))\n"
            "  --no-config                read no config file at all\n"
            "  --trust-project            apply the project file's widenings this once\n"
            "Options not given come from the config files; list options add to them.\n"
            "RULE is ADDR[/PREFIX][:PORT[-PORT]], IPv6 in brackets when a port follows:\n"
            "  192.168.1.0/24   10.0.0.5:443   [fd00::/8]:80-90\n"
            "lyh exits with the agent's status (128+N when killed by signal N).\n");
}

/* ---- nanopb callbacks for the unbounded fields --------------------------------- */

struct strv {
    char **v;
    size_t n;
};

static bool encode_argv(pb_ostream_t *os, const pb_field_iter_t *field, void *const *arg) {
    const struct strv *sv = *arg;

    for (size_t i = 0; i < sv->n; i++)
        if (!pb_encode_tag_for_field(os, field) ||
            !pb_encode_string(os, (const pb_byte_t *)sv->v[i], strlen(sv->v[i])))
            return false;
    return true;
}

static bool encode_cfg_list(pb_ostream_t *os, const pb_field_iter_t *field, void *const *arg) {
    const struct cfg_list *l = *arg;

    for (size_t i = 0; i < l->n; i++)
        if (!pb_encode_tag_for_field(os, field) ||
            !pb_encode_string(os, (const pb_byte_t *)l->v[i].value, strlen(l->v[i].value)))
            return false;
    return true;
}

struct envv {
    lianyaohu_v1_EnvVar *v;
    size_t n;
};

static bool encode_env(pb_ostream_t *os, const pb_field_iter_t *field, void *const *arg) {
    const struct envv *ev = *arg;

    for (size_t i = 0; i < ev->n; i++)
        if (!pb_encode_tag_for_field(os, field) ||
            !pb_encode_submessage(os, lianyaohu_v1_EnvVar_fields, &ev->v[i]))
            return false;
    return true;
}

/* ---- building the request -------------------------------------------------------- */

static int add_path(const char *opt, const char *path, char (*arr)[1024], pb_size_t *count,
                    size_t max) {
    char abs[PATH_MAX];

    if (path[0] != '/') {
        if (!realpath(path, abs)) {
            fprintf(stderr, "lyh run: %s %s: %s\n", opt, path, strerror(errno));
            return -errno;
        }
        path = abs;
    }
    if (strlen(path) >= 1024) {
        fprintf(stderr, "lyh run: %s %s: path too long\n", opt, path);
        return -ENAMETOOLONG;
    }
    if (*count >= max) {
        fprintf(stderr, "lyh run: too many %s paths (at most %zu)\n", opt, max);
        return -E2BIG;
    }
    memcpy(arr[(*count)++], path, strlen(path) + 1);
    return 0;
}

/* What lyh says once the session started (unless --quiet): the variables of
 * the caller's environment the allowlist kept from the agent, by name. */
static char env_note[768];
static char env_names[480]; /* the names for it, ", "-joined */
static bool quiet;

/* --timing: when each step of this launch happened, in CLOCK_MONOTONIC
 * microseconds (lyhd's --timing clock), printed on stderr at the end, so
 * that bench/run can set lyh's own steps beside lyhd's phases. */
enum { T_MAIN, T_READY, T_CONNECTED, T_STARTED, T_EXITED, T_DONE, T_COUNT };
static uint64_t t_at[T_COUNT];
static bool timing;

static void t_mark(int step) {
    if (timing)
        t_at[step] = cli_mono_us();
}

/* Where --monitor lines go: a place of their own (--monitor-to), stderr, or,
 * in a terminal session whose stderr is that terminal, nowhere until the
 * agent has ended: a line printed meanwhile would draw over a full-screen
 * agent (vim, Claude Code). The held ones are the last MON_HOLD. */
#define MON_HOLD 64
static FILE *mon_out;   /* NULL: held */
static bool mon_crlf;   /* stderr under a raw-mode relay */
static char mon_held[MON_HOLD][1024];
static uint64_t mon_total;
static char mon_session[40];

static void mon_line(const char *line) {
    if (mon_out) {
        fprintf(mon_out, "lyh: %s%s", line, mon_crlf ? "\r\n" : "\n");
        fflush(mon_out);
        return;
    }
    snprintf(mon_held[mon_total % MON_HOLD], sizeof(mon_held[0]), "%s", line);
    mon_total++;
}

/* The held lines, once the terminal is the user's again. */
static void mon_flush_held(void) {
    if (mon_out || !mon_total)
        return;
    fprintf(stderr, "lyh: %llu refused flow%s while the agent ran%s:\n",
            (unsigned long long)mon_total, mon_total == 1 ? "" : "s",
            mon_total > MON_HOLD ? " (the last ones below)" : "");
    uint64_t first = mon_total > MON_HOLD ? mon_total - MON_HOLD : 0;
    for (uint64_t i = first; i < mon_total; i++)
        fprintf(stderr, "lyh: %s\n", mon_held[i % MON_HOLD]);
    if (mon_total > MON_HOLD && mon_session[0])
        fprintf(stderr, "lyh: all of them: lyh audit query --session %s --verdict denied\n",
                mon_session);
}

/* --monitor-to DEST: "fd:N" (N > 2, open) or a path, appended to (made 0600).
 * Returns the stream or NULL with the reason printed. */
static FILE *mon_open(const char *dest) {
    FILE *f = NULL;
    if (strncmp(dest, "fd:", 3) == 0) {
        char *end = NULL;
        errno = 0;
        long n = strtol(dest + 3, &end, 10);
        if (errno || !end || *end || end == dest + 3 || n < 3 || n > INT_MAX ||
            fcntl((int)n, F_GETFL) < 0) {
            fprintf(stderr, "lyh run: --monitor-to %s: not an open file descriptor above 2\n",
                    dest);
            return NULL;
        }
        int fd = fcntl((int)n, F_DUPFD_CLOEXEC, 3);
        f = fd >= 0 ? fdopen(fd, "a") : NULL;
        if (!f && fd >= 0)
            close(fd);
    } else {
        /* A file of the user's own, as named: not through a symlink, not a
         * FIFO or device (an agent may plant one in a directory it can
         * write, to aim lyh, which runs outside the sandbox, at a file it
         * cannot write, or to make lyh block). */
        struct stat st;
        int fd = open(dest, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW |
                                O_NONBLOCK,
                      0600);
        if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid())) {
            fprintf(stderr, "lyh run: --monitor-to %s: not a regular file of yours\n", dest);
            close(fd);
            return NULL;
        }
        if (fd < 0 && errno == ELOOP) {
            fprintf(stderr, "lyh run: --monitor-to %s: a symbolic link; name the file itself\n",
                    dest);
            return NULL;
        }
        f = fd >= 0 ? fdopen(fd, "a") : NULL;
        if (!f && fd >= 0)
            close(fd);
    }
    if (!f)
        fprintf(stderr, "lyh run: --monitor-to %s: %s\n", dest, strerror(errno));
    return f;
}

/* The one line lyh prints when the session started (unless --quiet): where
 * it runs and what holds it. The daemon's notes are warnings (something
 * weaker than usual) and print even with --quiet. */
static void start_line(const lianyaohu_v1_RunStarted *st, char *out, size_t len) {
    struct sb b;
    if (sb_init(&b, out, len) < 0)
        return;
    sb_printf(&b, "session %.40s", st->session_id);
    if (st->proxy[0])
        sb_printf(&b, " proxy-only through %.56s (no VPN, no DNS): Landlock ABI %u; %s; ",
                  st->proxy, st->landlock_abi,
                  st->listeners ? "local servers on loopback" : "no local servers");
    else if (st->interface[0])
        sb_printf(&b, " on %.16s: Landlock ABI %u; %s; ", st->interface, st->landlock_abi,
                  st->listeners ? "local servers on loopback" : "no local servers");
    else
        sb_printf(&b, " with no VPN guard (no network): Landlock ABI %u; ", st->landlock_abi);
    if (st->resolvers_count) {
        sb_puts(&b, "DNS through lyhd (asks");
        for (pb_size_t i = 0; i < st->resolvers_count; i++)
            sb_printf(&b, "%s%.46s", i ? ", " : " ", st->resolvers[i]);
        sb_putc(&b, ')');
        if (st->allowed_domains)
            sb_printf(&b, ", only %u allowed name%s", st->allowed_domains,
                      st->allowed_domains == 1 ? "" : "s");
    } else if (!st->proxy[0]) {
        sb_puts(&b, "DNS not through lyhd");
    } else {
        sb_puts(&b, "names resolved by the proxy");
    }
    if (st->interface[0] && st->ipv6_blocked)
        sb_printf(&b, "; IPv6 blocked (its default route is not on %.16s)", st->interface);
    else if (st->interface[0])
        sb_printf(&b, "; IPv6 through %.16s", st->interface);
    (void)sb_finish(&b);
}

/* Add name to the note's list (at most 12 names shown). A name that is not
 * a plain one ([A-Za-z0-9_]) is shown as '?'s: it goes to a terminal. */
static void note_dropped(const char *name, size_t *count, size_t *shown) {
    size_t used = strlen(env_names), len = strlen(name);
    if (*shown < 12 && used + len + 3 < sizeof(env_names)) {
        char *p = env_names + used;
        if (used) {
            memcpy(p, ", ", 2);
            p += 2;
        }
        for (size_t i = 0; i < len; i++) {
            char ch = name[i];
            *p++ = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                           (ch >= '0' && ch <= '9') || ch == '_'
                       ? ch
                       : '?';
        }
        *p = '\0';
        (*shown)++;
    }
    (*count)++;
}

/* The environment to send: what the allowlist lets through from ours, then
 * --env (refused early here when the daemon would refuse it anyway). */
static int build_env(const struct run_opts *o, struct envv *ret) {
    size_t cap = RUN_MAX_ENV, n = 0, dropped = 0, shown = 0;
    lianyaohu_v1_EnvVar *v = calloc(cap, sizeof(*v));
    char why[ENVP_WHY_MAX];

    if (!v)
        return -ENOMEM;
    env_note[0] = env_names[0] = '\0';
    for (char **e = environ; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        char name[ENVP_NAME_MAX + 1];
        if (!eq || (size_t)(eq - *e) > ENVP_NAME_MAX)
            continue;
        memcpy(name, *e, (size_t)(eq - *e));
        name[eq - *e] = '\0';
        if (envp_is_forced(name))
            continue;
        if (!envp_inherit_ok(name)) {
            /* names only, never values; a name --env gives again is passed */
            bool asked = false;
            for (size_t i = 0; i < o->n_env && !asked; i++)
                asked = strncmp(o->env[i], name, strlen(name)) == 0 &&
                        o->env[i][strlen(name)] == '=';
            if (!asked)
                note_dropped(name, &dropped, &shown);
            continue;
        }
        if (strlen(eq + 1) >= sizeof(v[0].value) || n >= cap) {
            fprintf(stderr, "lyh run: note: not passing %s (too long or too many variables)\n",
                    name);
            continue;
        }
        if (strlen(name) >= sizeof(v[n].name))
            continue;
        memcpy(v[n].name, name, strlen(name) + 1);
        memcpy(v[n].value, eq + 1, strlen(eq + 1) + 1);
        n++;
    }
    if (dropped)
        snprintf(env_note, sizeof(env_note),
                 "%zu of your environment variables are not passed to the agent (not on the "
                 "allowlist; --env NAME=VALUE passes one): %s%s",
                 dropped, env_names, dropped > shown ? ", ..." : "");
    for (size_t i = 0; i < o->n_env; i++) {
        const char *eq = strchr(o->env[i], '=');
        char name[ENVP_NAME_MAX + 1];
        if (!eq || eq == o->env[i] || (size_t)(eq - o->env[i]) > ENVP_NAME_MAX) {
            fprintf(stderr, "lyh run: --env wants NAME=VALUE, not '%s'\n", o->env[i]);
            free(v);
            return -EINVAL;
        }
        memcpy(name, o->env[i], (size_t)(eq - o->env[i]));
        name[eq - o->env[i]] = '\0';
        if (envp_check_explicit(name, eq + 1, why, sizeof(why)) < 0) {
            fprintf(stderr, "lyh run: --env %s refused: %s\n", name, why);
            free(v);
            return -EPERM;
        }
        if (strlen(eq + 1) >= sizeof(v[0].value) || n >= cap) {
            fprintf(stderr, "lyh run: --env %s: value too long or too many variables\n", name);
            free(v);
            return -E2BIG;
        }
        if (envp_is_forced(name))
            fprintf(stderr, "lyh run: note: %s is set by the sandbox; --env %s has no effect\n",
                    name, name);
        if (strlen(name) >= sizeof(v[n].name)) {
            fprintf(stderr, "lyh run: --env %s: name too long\n", name);
            free(v);
            return -E2BIG;
        }
        memcpy(v[n].name, name, strlen(name) + 1);
        memcpy(v[n].value, eq + 1, strlen(eq + 1) + 1);
        n++;
    }
    ret->v = v;
    ret->n = n;
    return 0;
}

/* ---- talking to the daemon ------------------------------------------------------ */

static volatile sig_atomic_t pending_signal;

static void on_forward_signal(int sig) { pending_signal = sig; }

static int send_signal(struct lyh_client *c, const char *session_id, int sig) {
    _cleanup_free_ lianyaohu_v1_Request *req = calloc(1, sizeof(*req));

    if (!req)
        return -ENOMEM;
    req->which_method = lianyaohu_v1_Request_signal_tag;
    snprintf(req->method.signal.session_id, sizeof(req->method.signal.session_id), "%s",
             session_id);
    req->method.signal.which_what = lianyaohu_v1_SignalRequest_signal_tag;
    req->method.signal.what.signal = sig;
    return lyh_client_send(c, req, NULL, 0, NULL);
}

/* Set when follow_run returns the agent's own status (which passes through
 * unchanged); everything else cmd_run returns is lyh's and becomes 125-127. */
static bool agent_status;

/* Exit code for an error answer: the agent not starting (lyhd's spawn
 * failure, "the agent could not start: ...") is 127 when the command was not
 * found, else 126; anything else lyhd refused is 125 (cmd_run maps it). */
static int error_exit(const lianyaohu_v1_Response *resp) {
    static const char nostart[] = "the agent could not start:";
    cli_print_error("lyh run", resp);
    if (strncmp(resp->message, nostart, sizeof(nostart) - 1) == 0)
        return resp->code == lianyaohu_v1_Code_NOT_FOUND ? EXIT_RUN_NOT_FOUND : EXIT_RUN_CANNOT;
    if (resp->code == lianyaohu_v1_Code_UNAVAILABLE)
        return EXIT_UNAVAILABLE;
    return EXIT_DAEMON_ERROR;
}

/* lyhd went away while the agent runs (it re-adopts the session when it
 * starts again): the pty is ours, so the agent keeps its terminal here
 * until it ends; its exit status is then unknown. */
static int run_on_without_lyhd(struct pty_relay *relay, const char *why) {
    fprintf(stderr,
            "\r\nlyh: lost contact with lyhd (%.200s): the agent runs on, guarded, in this "
            "terminal; when it ends its exit status will be unknown\r\n",
            why);
    pty_relay_lost_daemon(relay);
    int k = pty_relay_until_readable(relay, -1);
    pty_relay_restore(relay);
    if (k < 0)
        fprintf(stderr, "lyh run: terminal relay failed: %s\n", strerror(-k));
    else
        fprintf(stderr, "lyh run: the agent ended; its exit status is unknown (lyhd "
                        "restarted while it ran)\n");
    return EXIT_UNAVAILABLE;
}

/* Read responses of call `id` until the end; returns the process exit code. */
static int follow_run(const struct cli *cli, struct lyh_client *c, uint64_t id,
                      struct pty_relay *relay) {
    bool answered = false; /* anything came back on the connection */
    _cleanup_free_ lianyaohu_v1_Response *resp = calloc(1, sizeof(*resp));
    char session_id[40] = "";
    char vpn[16] = "";
    bool ipv6_blocked = false;
    int daemon_fd = lyh_client_fd(c);

    if (!resp)
        return EXIT_DAEMON_ERROR;
    for (;;) {
        /* Wait for the daemon, relaying the terminal meanwhile; a response
         * already in the client's buffer needs no waiting. */
        if (lyh_client_buffered(c)) {
            /* fall through to recv */
        } else if (relay) {
            int k = pty_relay_until_readable(relay, daemon_fd);
            if (k < 0) {
                fprintf(stderr, "lyh run: terminal relay failed: %s\n", strerror(-k));
                return EXIT_DAEMON_ERROR;
            }
        } else {
            struct pollfd p = {.fd = daemon_fd, .events = POLLIN};
            int k = poll(&p, 1, 200);
            if (k < 0 && errno != EINTR)
                return EXIT_DAEMON_ERROR;
            if (pending_signal && session_id[0]) {
                int sig = pending_signal;
                pending_signal = 0;
                (void)send_signal(c, session_id, sig);
            }
            if (k <= 0)
                continue;
        }
        memset(resp, 0, sizeof(*resp));
        int r = lyh_client_recv(c, resp, 30000);
        if (r == -ETIMEDOUT)
            continue;
        if (r == -ECONNRESET && !answered) {
            /* closed before a word: not a session that was lost */
            if (relay)
                pty_relay_restore(relay);
            cli_say_closed(cli, "lyh run");
            return EXIT_UNAVAILABLE;
        }
        if (r < 0 && relay && session_id[0])
            return run_on_without_lyhd(relay, r == -ECONNRESET ? "connection closed" : strerror(-r));
        if (r < 0) {
            fprintf(stderr,
                    "lyh run: lost contact with lyhd (%s); if the agent still runs it stays "
                    "guarded\n",
                    r == -ECONNRESET ? "connection closed" : strerror(-r));
            if (relay)
                pty_relay_drain(relay);
            return EXIT_UNAVAILABLE;
        }
        answered = true;
        if (resp->call_id != id && resp->call_id != 0)
            continue; /* an answer to a Signal call */
        /* lyhd's last word when it shuts down (the session keeps running):
         * with the pty here, so does this terminal */
        if (resp->code == lianyaohu_v1_Code_UNAVAILABLE && relay && session_id[0])
            return run_on_without_lyhd(relay, resp->message);
        if (resp->code != lianyaohu_v1_Code_OK) {
            if (relay)
                pty_relay_restore(relay);
            return error_exit(resp);
        }
        if (resp->which_result != lianyaohu_v1_Response_run_event_tag) {
            if (resp->end_of_stream)
                return EXIT_DAEMON_ERROR;
            continue;
        }
        const lianyaohu_v1_RunEvent *ev = &resp->result.run_event;
        switch (ev->which_event) {
        case lianyaohu_v1_RunEvent_firewall_tag:
            fputs(ev->event.firewall, stdout);
            return EXIT_OK;
        case lianyaohu_v1_RunEvent_started_tag:
            t_mark(T_STARTED);
            snprintf(session_id, sizeof(session_id), "%s", ev->event.started.session_id);
            snprintf(mon_session, sizeof(mon_session), "%s", session_id);
            snprintf(vpn, sizeof(vpn), "%s", ev->event.started.interface);
            ipv6_blocked = ev->event.started.ipv6_blocked;
            if (relay)
                pty_relay_set_session(relay, c, session_id, ev->event.started.pid);
            if (!quiet) {
                char line[512];
                start_line(&ev->event.started, line, sizeof(line));
                fprintf(stderr, "lyh: %s\r\n", line);
            }
            for (pb_size_t i = 0; i < ev->event.started.notes_count; i++)
                fprintf(stderr, "lyh: %s\r\n", ev->event.started.notes[i]);
            if (!quiet && env_note[0])
                fprintf(stderr, "lyh: %s\r\n", env_note);
            break;
        case lianyaohu_v1_RunEvent_flow_tag: {
            char line[1024];
            struct audit_fmt_monitor_ctx mc = {.vpn = vpn, .ipv6_blocked = ipv6_blocked};
            if (audit_fmt_monitor_line_ctx(&ev->event.flow, &mc, line, sizeof(line)) >= 0)
                mon_line(line);
            break;
        }
        case lianyaohu_v1_RunEvent_stopped_tag:
            /* Ctrl-Z: the agent stopped; so do we, until `fg` */
            if (relay) {
                pty_relay_drain(relay);
                pty_relay_suspend(relay);
            }
            break;
        case lianyaohu_v1_RunEvent_exited_tag:
            t_mark(T_EXITED);
            if (relay)
                pty_relay_drain(relay);
            if (ev->event.exited.signal > 0) {
                agent_status = true;
                return 128 + ev->event.exited.signal;
            }
            if (ev->event.exited.exit_code < 0)
                return EXIT_DAEMON_ERROR; /* no status known: lyh's failure */
            agent_status = true;
            return ev->event.exited.exit_code;
        default:
            break;
        }
        if (resp->end_of_stream)
            return EXIT_DAEMON_ERROR;
    }
}

static void print_policy(const struct run_opts *o, const lianyaohu_v1_RunRequest *rr,
                         const struct strv *argv) {
    char buf[DR_FORMAT_MAX];
    const struct {
        const char *name;
        const lianyaohu_v1_DestRule *v;
        pb_size_t n;
    } lists[] = {{"lan_allow", rr->lan_allow, rr->lan_allow_count},
                 {"deny", rr->deny, rr->deny_count},
                 {"allow", rr->allow, rr->allow_count}};

    printf("command    =");
    for (size_t i = 0; i < argv->n; i++)
        printf(" %s", argv->v[i]);
    printf("\ninterface  = %s\n", rr->no_firewall ? "(none: --no-firewall)"
                                   : rr->has_proxy ? "(none: proxy-only)"
                                                   : rr->interface);
    if (rr->has_proxy) {
        struct dr_rule px;
        if (dr_from_parts(rr->proxy.addr.bytes, rr->proxy.addr.size, rr->proxy.prefix_len,
                          rr->proxy.port_min, rr->proxy.port_max, &px, NULL, 0) == 0 &&
            dr_format(&px, buf, sizeof(buf)) == 0)
            printf("proxy      = %s\n", buf);
    }
    printf("cwd        = %s\n", rr->cwd);
    printf("default    = %s\n",
           rr->network_default == lianyaohu_v1_NetworkDefault_NETWORK_DEFAULT_DENY ? "deny"
                                                                                   : "allow");
    for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
        printf("%-10s =", lists[l].name);
        for (pb_size_t i = 0; i < lists[l].n; i++) {
            struct dr_rule r;
            if (dr_from_parts(lists[l].v[i].addr.bytes, lists[l].v[i].addr.size,
                              lists[l].v[i].prefix_len, lists[l].v[i].port_min,
                              lists[l].v[i].port_max, &r, NULL, 0) == 0 &&
                dr_format(&r, buf, sizeof(buf)) == 0)
                printf(" %s", buf);
        }
        printf("\n");
    }
    printf("writable   =");
    for (pb_size_t i = 0; i < rr->writable_count; i++)
        printf(" %s", rr->writable[i]);
    printf("\nread_only  =");
    for (pb_size_t i = 0; i < rr->read_only_count; i++)
        printf(" %s", rr->read_only[i]);
    printf("\nnarrow_home = %s\n", rr->narrow_home ? "true" : "false");
    (void)o;
}

static int flag_list_add(const char *opt, const char *arg, const char **arr, size_t *n) {
    if (*n >= RUN_MAX_FLAG_LIST) {
        fprintf(stderr, "lyh run: too many %s (at most %d)\n", opt, RUN_MAX_FLAG_LIST);
        return -E2BIG;
    }
    arr[(*n)++] = arg;
    return 0;
}

/* The option name to blame for a merged value: the flag, or the config key. */
static const char *blame(const struct cfg_item *it, const char *opt, const char *key) {
    return strcmp(it->origin, "command line") == 0 ? opt : key;
}

/* Load the configuration and fill what the flags did not: the request's
 * switches and lists, the interface and the environment (o). The flags'
 * lists were merged into the config's, deduplicated. */
static int apply_config(const struct cfg_cli *ccli, const char *cwd, bool may_ask,
                        lianyaohu_v1_RunRequest *rr, struct run_opts *o, struct cfg **ret) {
    _cleanup_(cfg_freep) struct cfg *c = NULL;
    struct cfg_error err = {{0}};
    struct cfg_ctx ctx;
    struct cfg_ctx_buf ctxbuf;
    int r;

    if ((r = cli_config_ctx(&ctx, &ctxbuf, cwd, may_ask)) < 0) {
        fprintf(stderr, "lyh run: %s: %s\n", cwd, strerror(-r));
        return EXIT_USAGE;
    }
    if ((r = cfg_load(&ctx, ccli, &c, &err)) < 0) {
        fprintf(stderr, "lyh run: %s\n", err.msg[0] ? err.msg : strerror(-r));
        return EXIT_USAGE;
    }
    /* A tightening: never dropped, so more than fit is an error. */
    if (c->paths_deny.n > ARRAY_SIZE(rr->deny_paths)) {
        fprintf(stderr, "lyh run: too many paths.deny entries (at most %zu)\n",
                ARRAY_SIZE(rr->deny_paths));
        return EXIT_USAGE;
    }
    for (size_t i = 0; i < c->paths_deny.n; i++) {
        if (strlen(c->paths_deny.v[i].value) >= sizeof(rr->deny_paths[0])) {
            fprintf(stderr, "lyh run: paths.deny %s: path too long\n", c->paths_deny.v[i].value);
            return EXIT_USAGE;
        }
        snprintf(rr->deny_paths[i], sizeof(rr->deny_paths[i]), "%s", c->paths_deny.v[i].value);
    }
    rr->deny_paths_count = (pb_size_t)c->paths_deny.n;
    rr->no_firewall = !c->firewall.value;
    rr->shared_user_firewall = c->shared_user_firewall.value;
    rr->allow_non_default_route = c->allow_non_default_route.value;
    rr->narrow_home = c->narrow_home.value;
    rr->network_default = strcmp(c->network_default.value, "deny") == 0
                              ? lianyaohu_v1_NetworkDefault_NETWORK_DEFAULT_DENY
                              : lianyaohu_v1_NetworkDefault_NETWORK_DEFAULT_ALLOW;
    for (size_t i = 0; i < c->allow.n; i++)
        if (cli_add_rule(blame(&c->allow.v[i], "--allow-dest", "network.allow"),
                         c->allow.v[i].value, rr->allow, &rr->allow_count,
                         ARRAY_SIZE(rr->allow)) < 0)
            return EXIT_USAGE;
    for (size_t i = 0; i < c->deny.n; i++)
        if (cli_add_rule(blame(&c->deny.v[i], "--deny-dest", "network.deny"), c->deny.v[i].value,
                         rr->deny, &rr->deny_count, ARRAY_SIZE(rr->deny)) < 0)
            return EXIT_USAGE;
    for (size_t i = 0; i < c->lan_allow.n; i++)
        if (cli_add_rule("--lan-allow", c->lan_allow.v[i].value, rr->lan_allow,
                         &rr->lan_allow_count, ARRAY_SIZE(rr->lan_allow)) < 0)
            return EXIT_USAGE;
    /* A host port is a LAN exception on the loopback addresses 127.0.0.1 and
     * ::1 (not all of 127/8: another user's process may listen at the same
     * port on 127.0.0.2); the admin's lan_allow_ceiling bounds it like any
     * other. */
    for (size_t i = 0; i < c->host_ports.n; i++) {
        char rule[40];
        const char *v = c->host_ports.v[i].value;
        const char *who = blame(&c->host_ports.v[i], "--allow-host-port", "network.host_ports");
        snprintf(rule, sizeof(rule), "127.0.0.1:%s", v);
        if (cli_add_rule(who, rule, rr->lan_allow, &rr->lan_allow_count,
                         ARRAY_SIZE(rr->lan_allow)) < 0)
            return EXIT_USAGE;
        snprintf(rule, sizeof(rule), "[::1]:%s", v);
        if (cli_add_rule(who, rule, rr->lan_allow, &rr->lan_allow_count,
                         ARRAY_SIZE(rr->lan_allow)) < 0)
            return EXIT_USAGE;
    }
    for (size_t i = 0; i < c->writable.n; i++)
        if (add_path(blame(&c->writable.v[i], "--writable", "paths.writable"),
                     c->writable.v[i].value, rr->writable, &rr->writable_count,
                     ARRAY_SIZE(rr->writable)) < 0)
            return EXIT_USAGE;
    for (size_t i = 0; i < c->read_only.n; i++)
        if (add_path(blame(&c->read_only.v[i], "--read-only", "paths.read_only"),
                     c->read_only.v[i].value, rr->read_only, &rr->read_only_count,
                     ARRAY_SIZE(rr->read_only)) < 0)
            return EXIT_USAGE;
    if (c->agent_state_dirs.n > ARRAY_SIZE(rr->agent_state_dirs)) {
        fprintf(stderr, "lyh run: too many paths.agent_state_dirs (at most %zu)\n",
                ARRAY_SIZE(rr->agent_state_dirs));
        return EXIT_USAGE;
    }
    for (size_t i = 0; i < c->agent_state_dirs.n; i++)
        snprintf(rr->agent_state_dirs[rr->agent_state_dirs_count++],
                 sizeof(rr->agent_state_dirs[0]), "%s", c->agent_state_dirs.v[i].value);
    if (c->dns.n > ARRAY_SIZE(rr->dns)) {
        fprintf(stderr, "lyh run: at most %zu resolvers (--dns, network.dns)\n",
                ARRAY_SIZE(rr->dns));
        return EXIT_USAGE;
    }
    for (size_t i = 0; i < c->dns.n; i++)
        snprintf(rr->dns[rr->dns_count++], sizeof(rr->dns[0]), "%s", c->dns.v[i].value);
    if (c->allow_sockets.n > ARRAY_SIZE(rr->allow_sockets)) {
        fprintf(stderr, "lyh run: too many sockets to let through (at most %zu)\n",
                ARRAY_SIZE(rr->allow_sockets));
        return EXIT_USAGE;
    }
    for (size_t i = 0; i < c->allow_sockets.n; i++) {
        if (strlen(c->allow_sockets.v[i].value) >= sizeof(rr->allow_sockets[0])) {
            fprintf(stderr, "lyh run: socket path too long: %s\n", c->allow_sockets.v[i].value);
            return EXIT_USAGE;
        }
        snprintf(rr->allow_sockets[rr->allow_sockets_count++], sizeof(rr->allow_sockets[0]), "%s",
                 c->allow_sockets.v[i].value);
    }
    if (c->protect.n > ARRAY_SIZE(rr->protect)) {
        fprintf(stderr, "lyh run: too many paths.protect entries (at most %zu)\n",
                ARRAY_SIZE(rr->protect));
        return EXIT_USAGE;
    }
    for (size_t i = 0; i < c->protect.n; i++)
        snprintf(rr->protect[rr->protect_count++], sizeof(rr->protect[0]), "%s",
                 c->protect.v[i].value);
    /* lyh's config directory, wherever XDG_CONFIG_HOME put it below the
     * home (lyhd protects ~/.config/lianyaohu itself): an agent that wrote
     * config.toml or trusted.toml there would widen the next session */
    if (c->config_dir && ctx.home && rr->protect_count < ARRAY_SIZE(rr->protect)) {
        size_t hn = strlen(ctx.home);
        const char *rel = c->config_dir + hn + 1;
        if (strncmp(c->config_dir, ctx.home, hn) == 0 && c->config_dir[hn] == '/' && *rel &&
            strcmp(rel, ".config/lianyaohu") != 0 && strlen(rel) < sizeof(rr->protect[0]))
            snprintf(rr->protect[rr->protect_count++], sizeof(rr->protect[0]), "%s", rel);
    }
    o->vpn = c->vpn_interface.value;
    if (c->env.n > RUN_MAX_ENV) {
        fprintf(stderr, "lyh run: too many environment variables (at most %d)\n", RUN_MAX_ENV);
        return EXIT_USAGE;
    }
    o->n_env = c->env.n;
    for (size_t i = 0; i < c->env.n; i++)
        o->env[i] = c->env.v[i].value;
    *ret = TAKE_PTR(c);
    return EXIT_OK;
}

/* Proxy-only mode (--vpn none): the proxy from --env / [env]
 * (HTTPS_PROXY, ALL_PROXY, HTTP_PROXY), else [defaults] proxy, else asked on
 * a terminal; without one, refused. It goes to lyhd as the one address the
 * agent may reach, and to the agent as its proxy variables (those it was not
 * given), with NO_PROXY naming loopback (its own servers). */
static char proxy_env_buf[PROXY_ENV_NAMES][PROXY_URL_MAX + 16];
static int setup_proxy(struct run_opts *o, const struct cfg *conf, bool ask,
                       lianyaohu_v1_RunRequest *rr) {
    const char *name = NULL, *url = proxy_from_env(o->env, o->n_env, &name), *from;
    char line[PROXY_URL_MAX], why[PROXY_WHY_MAX], from_buf[64];
    struct proxy_url px;

    if (url) {
        snprintf(from_buf, sizeof(from_buf), "%s in the agent's environment", name);
        from = from_buf;
    } else if (conf->proxy.value) {
        url = conf->proxy.value;
        from = conf->proxy.origin;
    } else if (ask && isatty(STDIN_FILENO) && isatty(STDERR_FILENO)) {
        fprintf(stderr, "Proxy-only mode: the agent reaches a proxy on this machine and nothing "
                        "else.\nProxy URL (such as http://127.0.0.1:3128 or "
                        "socks5h://127.0.0.1:1080; empty to cancel): ");
        if (!fgets(line, sizeof(line), stdin) || line[0] == '\n' || line[0] == '\0') {
            fprintf(stderr, "\nlyh run: cancelled\n");
            return EXIT_USAGE;
        }
        line[strcspn(line, "\r\n")] = '\0';
        url = line;
        from = "your answer";
    } else {
        fprintf(stderr,
                "lyh run: proxy-only mode needs a local proxy, and none is configured: add\n"
                "  proxy = \"http://127.0.0.1:PORT\"\nunder [defaults] in %s, or pass "
                "--env HTTPS_PROXY=http://127.0.0.1:PORT (or ALL_PROXY=socks5h://...)\n",
                conf->global_path ? conf->global_path : "your config file");
        return EXIT_USAGE;
    }
    if (proxy_url_parse(url, &px, why, sizeof(why)) < 0) {
        fprintf(stderr, "lyh run: proxy (from %s): %s\n", from, why);
        return EXIT_USAGE;
    }
    if (rr->allow_count || rr->dns_count || conf->allow_domains.n) {
        fprintf(stderr, "lyh run: proxy-only mode (--vpn none) reaches its proxy and nothing "
                        "else: --allow-dest, --dns and --allow-domain (or network.allow, "
                        "network.dns, network.allow_domains) do not apply; drop them or pick a "
                        "VPN\n");
        return EXIT_USAGE;
    }
    /* refusals add nothing where nothing else is reachable */
    rr->deny_count = 0;
    rr->allow_non_default_route = false;
    rr->interface[0] = '\0';
    rr->has_proxy = true;
    cli_dest_msg(&px.dest, &rr->proxy);
    for (size_t k = 0; k < PROXY_ENV_NAMES; k++) {
        size_t l = strlen(proxy_env_names[k]);
        bool given = false;
        for (size_t i = 0; i < o->n_env && !given; i++)
            given = strncmp(o->env[i], proxy_env_names[k], l) == 0 && o->env[i][l] == '=';
        if (given)
            continue;
        if (o->n_env >= RUN_MAX_ENV) {
            fprintf(stderr, "lyh run: too many environment variables (at most %d)\n",
                    RUN_MAX_ENV);
            return EXIT_USAGE;
        }
        snprintf(proxy_env_buf[k], sizeof(proxy_env_buf[k]), "%s=%s", proxy_env_names[k],
                 k < 6 ? url : PROXY_NO_PROXY);
        o->env[o->n_env++] = proxy_env_buf[k];
    }
    return EXIT_OK;
}

static int run_main(struct cli *cli, int argc, char **argv);

/* ---- background sessions (cli/hold.h) ------------------------------------------ */

/* --name and -d: what they cannot go with. */
static int check_held(const struct run_opts *o, const lianyaohu_v1_RunRequest *rr) {
    if (!o->name && !o->detach)
        return EXIT_OK;
    if (o->name && !hold_name_ok(o->name)) {
        fprintf(stderr,
                "lyh run: --name '%s': a session name is 1 to %d letters, digits, '_', '.' or "
                "'-', not starting with '.' or '-'\n",
                o->name, HOLD_NAME_MAX);
        return EXIT_USAGE;
    }
    if (rr->print_firewall || o->print_policy)
        return EXIT_OK; /* nothing runs */
    if (o->no_tui) {
        fprintf(stderr, "lyh run: --no-tui and --name/-d contradict each other: a background "
                        "session runs on a terminal of its own\n");
        return EXIT_USAGE;
    }
    if (rr->monitor) {
        fprintf(stderr, "lyh run: --monitor is not for background sessions: watch refused "
                        "flows with lyh audit follow (or lyh audit query --session ID)\n");
        return EXIT_USAGE;
    }
    if (!o->detach && !isatty(STDIN_FILENO)) {
        fprintf(stderr, "lyh run: --name without -d attaches the session here, and stdin is not "
                        "a terminal; add -d to start it in the background\n");
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* A background session's socket, until the holder takes it. */
struct held {
    char name[HOLD_NAME_MAX + 1];
    int fd;
    char path[160];
};

/* Listen for the session: the name given, else the command's own (its
 * base name, made a valid name), then NAME-2, NAME-3, ... */
static int held_listen(const struct run_opts *o, const struct strv *av, struct held *hd) {
    char why[512], base[HOLD_NAME_MAX - 2] = "";
    int k;

    if (o->name) {
        snprintf(hd->name, sizeof(hd->name), "%s", o->name);
        if ((k = hold_listen(hd->name, &hd->fd, hd->path, sizeof(hd->path), why, sizeof(why))) <
            0) {
            fprintf(stderr, "lyh run: %s\n", why);
            return EXIT_USAGE;
        }
        return EXIT_OK;
    }
    const char *cmd = strrchr(av->v[0], '/') ? strrchr(av->v[0], '/') + 1 : av->v[0];
    size_t n = 0;
    for (; *cmd && n < HOLD_NAME_MAX - 3; cmd++) { /* room for "-99" */
        char ch = *cmd;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || (n > 0 && (ch == '.' || ch == '-'));
        if (ok)
            base[n++] = ch;
    }
    base[n] = '\0';
    if (!n)
        snprintf(base, sizeof(base), "agent");
    for (unsigned i = 1; i < 100; i++) {
        if (i == 1)
            snprintf(hd->name, sizeof(hd->name), "%s", base);
        else
            snprintf(hd->name, sizeof(hd->name), "%s-%u", base, i);
        k = hold_listen(hd->name, &hd->fd, hd->path, sizeof(hd->path), why, sizeof(why));
        if (k == 0)
            return EXIT_OK;
        if (k != -EADDRINUSE) {
            fprintf(stderr, "lyh run: %s\n", why);
            return EXIT_USAGE;
        }
    }
    fprintf(stderr, "lyh run: sessions %s to %s-99 all run; give one a --name\n", base, base);
    return EXIT_USAGE;
}

/* The holder never started: its socket goes. */
static void held_unlisten(struct held *hd) {
    if (hd->fd < 0)
        return;
    (void)unlink(hd->path);
    CLOSE_FD(hd->fd);
}

/* After the Run request with the pty slave: wait for lyhd's RunStarted (or
 * its refusal), then fork the holder, which keeps the connection, the pty
 * master and the listening socket. Returns an exit code; with -d at once,
 * else after attaching here. */
static int start_held(struct lyh_client **cp, uint64_t id, int *master, struct held *hd,
                      const struct run_opts *o, const struct strv *av) {
    struct lyh_client *c = *cp;
    const char *name = hd->name;
    _cleanup_free_ lianyaohu_v1_Response *resp = calloc(1, sizeof(*resp));
    struct hold_start hs = {.listen_fd = hd->fd, .master = *master, .client = c, .call_id = id};

    if (!resp)
        return EXIT_DAEMON_ERROR;
    for (;;) {
        memset(resp, 0, sizeof(*resp));
        int r = lyh_client_recv(c, resp, 30000);
        if (r < 0) {
            fprintf(stderr, "lyh run: no answer from lyhd: %s\n",
                    r == -ECONNRESET ? "the connection closed" : strerror(-r));
            return EXIT_UNAVAILABLE;
        }
        if (resp->call_id != id && resp->call_id != 0)
            continue;
        if (resp->code != lianyaohu_v1_Code_OK)
            return error_exit(resp);
        if (resp->which_result == lianyaohu_v1_Response_run_event_tag &&
            resp->result.run_event.which_event == lianyaohu_v1_RunEvent_started_tag)
            break;
        if (resp->end_of_stream)
            return EXIT_DAEMON_ERROR;
    }
    const lianyaohu_v1_RunStarted *st = &resp->result.run_event.event.started;
    if (!quiet) {
        char line[512];
        start_line(st, line, sizeof(line));
        fprintf(stderr, "lyh: %s\n", line);
    }
    for (pb_size_t i = 0; i < st->notes_count; i++)
        fprintf(stderr, "lyh: %s\n", st->notes[i]);
    if (!quiet && env_note[0])
        fprintf(stderr, "lyh: %s\n", env_note);

    snprintf(hs.info.name, sizeof(hs.info.name), "%s", name);
    snprintf(hs.sock_path, sizeof(hs.sock_path), "%s", hd->path);
    if (strlen(st->session_id) <= HOLD_ID_MAX &&
        strspn(st->session_id, "0123456789abcdef") == strlen(st->session_id))
        memcpy(hs.info.session_id, st->session_id, strlen(st->session_id) + 1);
    hs.info.pid = st->pid <= INT32_MAX ? (uint32_t)st->pid : 0;
    hs.info.started = (uint64_t)time(NULL);
    /* the command line for lyh ls: its words, shortened, printable */
    size_t at = 0;
    for (size_t i = 0; i < av->n && at < HOLD_COMMAND_MAX; i++) {
        int w = snprintf(hs.info.command + at, HOLD_COMMAND_MAX + 1 - at, "%s%s", i ? " " : "",
                         av->v[i]);
        at = w < 0 ? at : at + (size_t)w > HOLD_COMMAND_MAX ? HOLD_COMMAND_MAX : at + (size_t)w;
    }
    for (char *p = hs.info.command; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            *p = '?';

    /* The holder: a grandchild (so no zombie waits on this lyh, and it is
     * nobody's job), in a session of its own before any signal of this
     * terminal's can reach it: they stay blocked across the forks. */
    sigset_t all, old;
    sigfillset(&all);
    fflush(NULL);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t pid = fork();
    if (pid == 0) {
        pid_t g = fork();
        if (g == 0)
            hold_run(&hs); /* never returns; unblocks the signals */
        _exit(g < 0 ? 1 : 0);
    }
    int forked = pid > 0 ? -1 : -errno;
    if (pid > 0) {
        int wst = 0;
        while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
            ;
        forked = WIFEXITED(wst) && WEXITSTATUS(wst) == 0 ? 0 : -ECHILD;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (forked < 0) {
        fprintf(stderr, "lyh run: cannot start the session's holder: %s; the agent ends with "
                        "this lyh\n",
                strerror(-forked));
        return EXIT_DAEMON_ERROR;
    }
    /* the holder has them now: this process keeps no copy (the session is
     * the holder's to end, not ours) */
    CLOSE_FD(*master);
    CLOSE_FD(hd->fd);
    lyh_client_close(c);
    *cp = NULL;
    if (o->detach) {
        fprintf(stderr,
                "lyh: session '%s' runs in the background: lyh attach %s (then Ctrl-\\ d "
                "detaches), lyh ls, lyh kill %s\n",
                name, name, name);
        return EXIT_OK;
    }
    bool ended = false;
    int rc = hold_attach_session(getuid(), name, false, &ended);
    agent_status = ended;
    return rc;
}

/* lyh run's exit status: the agent's, or one of lyh's own (lyh(1), EXIT
 * STATUS): 125 lyh or lyhd refused or failed, 126 the command cannot run,
 * 127 it was not found. */
int cmd_run(struct cli *cli, int argc, char **argv) {
    agent_status = false;
    quiet = false;
    timing = false;
    memset(t_at, 0, sizeof(t_at));
    t_at[T_MAIN] = cli->main_us;
    int rc = run_main(cli, argc, argv);
    if (timing) {
        t_mark(T_DONE);
        fprintf(stderr,
                "lyh: timing (CLOCK_MONOTONIC us): main %" PRIu64 " ready %" PRIu64
                " connected %" PRIu64 " started %" PRIu64 " exited %" PRIu64 " done %" PRIu64 "\n",
                t_at[T_MAIN], t_at[T_READY], t_at[T_CONNECTED], t_at[T_STARTED], t_at[T_EXITED],
                t_at[T_DONE]);
    }
    if (agent_status || rc == EXIT_OK || rc == EXIT_RUN_CANNOT || rc == EXIT_RUN_NOT_FOUND)
        return rc;
    return EXIT_RUN_REFUSED;
}

static void run_opts_done(struct run_opts *o) {
    free(o->sockets_abs);
}

static int run_main(struct cli *cli, int argc, char **argv) {
    enum {
        O_VPN = 256, O_CWD, O_ENV, O_NOFW, O_SHARED, O_NONDEFAULT, O_ALLOW, O_DENY, O_LAN, O_HOSTPORT, O_SOCKET, O_DNS, O_DOMAIN,
        O_WRITABLE, O_RO, O_NARROW, O_PRINTFW, O_PRINTPOL, O_NOTUI, O_MONITOR, O_HELP,
        O_CONFIG, O_NOCONFIG, O_TRUSTPROJ, O_SOCKPATH, O_QUIET, O_MONITOR_TO, O_NAME, O_TIMING,
    };
    static const struct option opts[] = {
        {"vpn", required_argument, NULL, O_VPN},
        {"cwd", required_argument, NULL, O_CWD},
        {"env", required_argument, NULL, O_ENV},
        {"no-firewall", no_argument, NULL, O_NOFW},
        {"shared-user-firewall", no_argument, NULL, O_SHARED},
        {"allow-non-default-route", no_argument, NULL, O_NONDEFAULT},
        {"allow-dest", required_argument, NULL, O_ALLOW},
        {"deny-dest", required_argument, NULL, O_DENY},
        {"lan-allow", required_argument, NULL, O_LAN},
        {"allow-host-port", required_argument, NULL, O_HOSTPORT},
        {"allow-socket", required_argument, NULL, O_SOCKET},
        {"dns", required_argument, NULL, O_DNS},
        {"allow-domain", required_argument, NULL, O_DOMAIN},
        {"writable", required_argument, NULL, O_WRITABLE},
        {"read-only", required_argument, NULL, O_RO},
        {"narrow-home", no_argument, NULL, O_NARROW},
        {"print-firewall", no_argument, NULL, O_PRINTFW},
        {"print-policy", no_argument, NULL, O_PRINTPOL},
        {"no-tui", no_argument, NULL, O_NOTUI},
        {"monitor", no_argument, NULL, O_MONITOR},
        {"monitor-to", required_argument, NULL, O_MONITOR_TO},
        {"help", no_argument, NULL, O_HELP},
        {"config", required_argument, NULL, O_CONFIG},
        {"no-config", no_argument, NULL, O_NOCONFIG},
        {"trust-project", no_argument, NULL, O_TRUSTPROJ},
        {"socket", required_argument, NULL, O_SOCKPATH}, /* lyh's, also after `run` */
        {"quiet", no_argument, NULL, O_QUIET},
        {"timing", no_argument, NULL, O_TIMING},
        {"name", required_argument, NULL, O_NAME},
        {"detach", no_argument, NULL, 'd'},
        {0},
    };
    _cleanup_(run_opts_done) struct run_opts o = {0};
    struct cfg_cli ccli = CFG_CLI_INIT;
    _cleanup_(cfg_freep) struct cfg *conf = NULL;
    _cleanup_free_ char **cmdv = NULL;
    _cleanup_free_ lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    lianyaohu_v1_RunRequest *rr;
    struct strv av;
    struct envv ev = {0};
    char cwd[PATH_MAX];
    int c, rc;

    if (!req)
        return EXIT_DAEMON_ERROR;
    rr = &req->method.run;
    req->which_method = lianyaohu_v1_Request_run_tag;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:d", opts, NULL)) != -1) {
        int k = 0;
        switch (c) {
        case O_VPN: o.vpn = optarg; break;
        case O_NAME: o.name = optarg; break;
        case 'd': o.detach = true; break;
        case O_SOCKPATH: cli->socket_path = lyh_client_socket_path(optarg); break;
        case O_CWD: o.cwd = optarg; break;
        case O_ENV:
            if (o.n_env >= RUN_MAX_ENV) {
                fprintf(stderr, "lyh run: too many --env (at most %d)\n", RUN_MAX_ENV);
                return EXIT_USAGE;
            }
            o.env[o.n_env++] = optarg;
            break;
        case O_NOFW: ccli.firewall = 0; break;
        case O_SHARED: ccli.shared_user_firewall = 1; break;
        case O_NONDEFAULT: ccli.allow_non_default_route = 1; break;
        case O_ALLOW:
            k = flag_list_add("--allow-dest", optarg, o.allow, &o.n_allow);
            ccli.default_deny = true;
            break;
        case O_DENY: k = flag_list_add("--deny-dest", optarg, o.deny, &o.n_deny); break;
        case O_LAN: k = flag_list_add("--lan-allow", optarg, o.lan, &o.n_lan); break;
        case O_HOSTPORT:
            k = flag_list_add("--allow-host-port", optarg, o.host_ports, &o.n_host_ports);
            break;
        case O_SOCKET: k = flag_list_add("--allow-socket", optarg, o.sockets, &o.n_sockets); break;
        case O_DNS: k = flag_list_add("--dns", optarg, o.dns, &o.n_dns); break;
        case O_DOMAIN: k = flag_list_add("--allow-domain", optarg, o.domains, &o.n_domains); break;
        case O_WRITABLE: k = flag_list_add("--writable", optarg, o.writable, &o.n_writable); break;
        case O_RO: k = flag_list_add("--read-only", optarg, o.read_only, &o.n_read_only); break;
        case O_NARROW: ccli.narrow_home = 1; break;
        case O_CONFIG: ccli.config_path = optarg; break;
        case O_NOCONFIG: ccli.no_config = true; break;
        case O_TRUSTPROJ: ccli.trust_project = true; break;
        case O_PRINTFW: rr->print_firewall = true; break;
        case O_MONITOR: rr->monitor = true; break;
        case O_MONITOR_TO:
            rr->monitor = true;
            o.monitor_to = optarg;
            break;
        case O_PRINTPOL: o.print_policy = true; break;
        case O_NOTUI: o.no_tui = true; break;
        case O_QUIET: quiet = true; break;
        case O_TIMING: timing = true; break;
        case O_HELP: usage_run(stdout); return EXIT_OK;
        case ':':
            fprintf(stderr, "lyh run: option '%s' needs a value\n", argv[optind - 1]);
            return EXIT_USAGE;
        default: {
            char hint[96];
            cli_option_hint(argv[optind - 1], opts, hint, sizeof(hint));
            fprintf(stderr, "lyh run: unknown option '%s'%s (see lyh run --help)\n",
                    argv[optind - 1], hint);
            return EXIT_USAGE;
        }
        }
        if (k < 0)
            return EXIT_USAGE;
    }
    if (optind < argc) {
        ccli.command.v = (const char *const *)(argv + optind);
        ccli.command.n = (size_t)(argc - optind);
    }
    if ((rc = check_held(&o, rr)) != EXIT_OK)
        return rc;

    /* Working directory. */
    if (o.cwd) {
        if (!realpath(o.cwd, cwd)) {
            fprintf(stderr, "lyh run: --cwd %s: %s\n", o.cwd, strerror(errno));
            return EXIT_USAGE;
        }
    } else if (!getcwd(cwd, sizeof(cwd))) {
        fprintf(stderr, "lyh run: cannot tell the current directory: %s\n", strerror(errno));
        return EXIT_USAGE;
    }
    if (strlen(cwd) >= sizeof(rr->cwd)) {
        fprintf(stderr, "lyh run: the working directory path is too long\n");
        return EXIT_USAGE;
    }
    snprintf(rr->cwd, sizeof(rr->cwd), "%s", cwd);

    /* The configuration: files under the flags (the project walk starts at
     * the agent's working directory). */
    ccli.env = (struct cfg_strv){o.env, o.n_env};
    ccli.allow = (struct cfg_strv){o.allow, o.n_allow};
    ccli.deny = (struct cfg_strv){o.deny, o.n_deny};
    ccli.lan_allow = (struct cfg_strv){o.lan, o.n_lan};
    ccli.host_ports = (struct cfg_strv){o.host_ports, o.n_host_ports};
    ccli.dns = (struct cfg_strv){o.dns, o.n_dns};
    ccli.allow_domains = (struct cfg_strv){o.domains, o.n_domains};
    /* a relative socket path is the caller's cwd's (no symlink resolved:
     * lyhd wants the socket itself) */
    for (size_t i = 0; i < o.n_sockets; i++) {
        if (o.sockets[i][0] == '/')
            continue;
        if (!o.sockets_abs && !(o.sockets_abs = calloc(RUN_MAX_FLAG_LIST, sizeof(*o.sockets_abs)))) {
            fprintf(stderr, "lyh run: out of memory\n");
            return EXIT_DAEMON_ERROR;
        }
        if ((size_t)snprintf(o.sockets_abs[i], sizeof(o.sockets_abs[i]), "%s/%s", cwd,
                             o.sockets[i]) >= sizeof(o.sockets_abs[i])) {
            fprintf(stderr, "lyh run: --allow-socket %s: path too long\n", o.sockets[i]);
            return EXIT_USAGE;
        }
        o.sockets[i] = o.sockets_abs[i];
    }
    ccli.allow_sockets = (struct cfg_strv){o.sockets, o.n_sockets};
    ccli.writable = (struct cfg_strv){o.writable, o.n_writable};
    ccli.read_only = (struct cfg_strv){o.read_only, o.n_read_only};
    ccli.vpn = o.vpn;
    bool vpn_flag = o.vpn != NULL, nofw_flag = ccli.firewall == 0;
    rc = apply_config(&ccli, cwd, !o.no_tui, rr, &o, &conf);
    if (rc != EXIT_OK)
        return rc;
    cmdv = calloc(conf->command.n + 1, sizeof(*cmdv));
    if (!cmdv)
        return EXIT_DAEMON_ERROR;
    for (size_t i = 0; i < conf->command.n; i++)
        cmdv[i] = conf->command.v[i].value;
    av.v = cmdv;
    av.n = conf->command.n;
    if (strcmp(conf->command.v[0].origin, "built-in") == 0 && !rr->print_firewall &&
        !o.print_policy)
        fprintf(stderr, "lyh run: no command given; running `claude`\n");

    /* Interface. */
    if (rr->no_firewall) {
        if (vpn_flag && nofw_flag) {
            fprintf(stderr, "lyh run: --no-firewall and --vpn contradict each other\n");
            return EXIT_USAGE;
        }
        fprintf(stderr, "lyh run: warning: --no-firewall: no VPN guard, so the agent has no IP "
                        "network at all (every socket it opens is refused, loopback too); the "
                        "filesystem and syscall sandbox still apply\n");
        o.vpn = NULL; /* a configured interface does not matter without a firewall */
    } else {
        char picked[16];
        bool interactive = !o.no_tui && isatty(STDIN_FILENO) && isatty(STDERR_FILENO);
        /* `s` in the picker saves to the global config, unless config
         * files are off (--no-config) */
        struct vpn_names names = {.n = 0};
        if (!o.vpn) /* which names are VPNs is the admin policy's word */
            vpn_names_from_policy(cli, &names);
        struct vpn_pick_in pin = {.explicit_name = o.vpn,
                                  .interactive = interactive,
                                  .allow_non_default_route = rr->allow_non_default_route,
                                  .save_path = ccli.no_config ? NULL : conf->global_path,
                                  .names = &names};
        rc = vpn_pick(&pin, picked, sizeof(picked));
        if (rc != EXIT_OK)
            return rc;
        snprintf(rr->interface, sizeof(rr->interface), "%s", picked);
        if (strcmp(picked, VPN_PICK_NONE) == 0 &&
            (rc = setup_proxy(&o, conf, !o.no_tui, rr)) != EXIT_OK)
            return rc;
    }

    if (o.print_policy) {
        print_policy(&o, rr, &av);
        return EXIT_OK;
    }
    if (build_env(&o, &ev) < 0)
        return EXIT_USAGE;
    rr->argv.funcs.encode = encode_argv;
    rr->argv.arg = &av;
    rr->env.funcs.encode = encode_env;
    rr->env.arg = &ev;
    if (conf && conf->allow_domains.n) {
        rr->allow_domains.funcs.encode = encode_cfg_list;
        rr->allow_domains.arg = &conf->allow_domains;
    }

    bool held = (o.name || o.detach) && !rr->print_firewall;
    bool use_pty = held || (!o.no_tui && !rr->print_firewall && isatty(STDIN_FILENO));
    struct held hd = {.fd = -1};
    if (held && (rc = held_listen(&o, &av, &hd)) != EXIT_OK) {
        free(ev.v);
        return rc;
    }
    struct lyh_client *client = NULL;
    t_mark(T_READY);
    rc = cli_connect(cli, &client);
    if (rc != EXIT_OK) {
        held_unlisten(&hd);
        free(ev.v);
        return rc;
    }

    struct pty_relay *relay = NULL;
    int fds[3] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO};
    unsigned n_fds = 3;
    uint64_t id = 0;
    int slave = -1;

    if (rr->print_firewall)
        n_fds = 0;
    if (use_pty) {
        int k = pty_relay_open(&relay, &slave, &rr->rows, &rr->cols);
        if (k < 0) {
            fprintf(stderr, "lyh run: cannot open a pty: %s\n", strerror(-k));
            held_unlisten(&hd);
            lyh_client_close(client);
            free(ev.v);
            return EXIT_DAEMON_ERROR;
        }
        rr->pty = true;
        fds[0] = slave;
        n_fds = 1;
    }
    t_mark(T_CONNECTED); /* before the send: lyhd may act on it before we run again */
    int k = lyh_client_send(client, req, fds, n_fds, &id);
    if (slave >= 0)
        close(slave); /* the daemon has its own copy now */
    free(ev.v);
    if (k == -EPIPE || k == -ECONNRESET) {
        /* The daemon refused the connection (it answers such refusals with
         * one frame, then closes): show its reason rather than the EPIPE. */
        _cleanup_free_ lianyaohu_v1_Response *why = calloc(1, sizeof(*why));
        if (why && lyh_client_recv(client, why, 1000) == 0 && why->code != lianyaohu_v1_Code_OK) {
            held_unlisten(&hd);
            pty_relay_free(relay);
            lyh_client_close(client);
            return error_exit(why);
        }
    }
    if (k == -EPIPE || k == -ECONNRESET) {
        cli_say_closed(cli, "lyh run");
        held_unlisten(&hd);
        pty_relay_free(relay);
        lyh_client_close(client);
        return EXIT_UNAVAILABLE;
    }
    if (k < 0) {
        fprintf(stderr, "lyh run: sending the request failed: %s\n",
                k == -EMSGSIZE ? "it is larger than 1 MiB" : strerror(-k));
        held_unlisten(&hd);
        pty_relay_free(relay);
        lyh_client_close(client);
        return k == -EMSGSIZE ? EXIT_USAGE : EXIT_UNAVAILABLE;
    }
    if (held) {
        int master = pty_relay_take_master(relay);
        pty_relay_free(relay);
        rc = start_held(&client, id, &master, &hd, &o, &av);
        CLOSE_FD(master);
        held_unlisten(&hd); /* still ours: the holder never started */
        lyh_client_close(client);
        return rc;
    }

    /* --monitor's lines: their own place, else stderr unless that is the
     * terminal the agent draws on (then held until it ends) */
    if (rr->monitor) {
        if (o.monitor_to) {
            mon_out = mon_open(o.monitor_to);
            if (!mon_out) {
                pty_relay_free(relay);
                lyh_client_close(client);
                return EXIT_USAGE;
            }
        } else if (!relay || !isatty(STDERR_FILENO)) {
            mon_out = stderr;
            mon_crlf = relay != NULL;
        } else if (!quiet) {
            fprintf(stderr, "lyh: --monitor: refused flows are listed when the agent ends (here "
                            "they would draw over its screen); to watch them live, use "
                            "--monitor-to FILE, or lyh audit follow in a second pane\n");
        }
    }
    if (relay) {
        k = pty_relay_start(relay);
        if (k < 0) {
            fprintf(stderr, "lyh run: cannot put the terminal in raw mode: %s\n", strerror(-k));
            pty_relay_free(relay);
            lyh_client_close(client);
            return EXIT_DAEMON_ERROR;
        }
    } else {
        struct sigaction sa = {.sa_handler = on_forward_signal};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
    }
    rc = follow_run(cli, client, id, relay);
    pty_relay_free(relay); /* restores the terminal */
    lyh_client_close(client);
    mon_flush_held();
    if (mon_out && mon_out != stderr)
        fclose(mon_out);
    return rc;
}
