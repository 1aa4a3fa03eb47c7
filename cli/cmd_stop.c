/* lyh stop [--grace SECONDS] ID: end one of your running sessions the way a
 * terminal user would: SIGTERM to the agent's process group, then SIGKILL
 * when it has not ended after the grace period. When the agent's main
 * process is gone, lyhd ends the session and kills what is left in its
 * cgroup. ID is a session id or a unique prefix of one (as `lyh sessions`
 * shows them; an "s:" prefix as the audit table prints it is accepted). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/macros.h"

#define STOP_DEFAULT_GRACE_S 10
#define STOP_MAX_GRACE_S 3600
#define STOP_KILL_WAIT_MS 5000
#define STOP_POLL_MS 100
#define STOP_MAX_SESSIONS 4096

void usage_stop(FILE *f) {
    fprintf(f, "Usage: lyh stop [--grace SECONDS] ID\n"
               "End one of your running sessions: SIGTERM to the agent, then SIGKILL after\n"
               "the grace period (default %d s; 0: at once). ID is a session id or a unique\n"
               "prefix of one of yours, as `lyh sessions` shows them (another user's\n"
               "session, for an admin: its whole id).\n"
               "Exit codes: 0 the session ended, 1 lyhd refused or it did not end,\n"
               "2 usage (an ID that matches no running session, or several), 69 no lyhd.\n",
               STOP_DEFAULT_GRACE_S);
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct id_list {
    char (*ids)[17];
    uint32_t *uids; /* NULL: not wanted */
    size_t max, n;
};

static int add_id(const lianyaohu_v1_Response *resp, void *ud) {
    struct id_list *l = ud;

    if (resp->which_result == lianyaohu_v1_Response_sessions_tag &&
        resp->result.sessions.has_session && l->n < l->max) {
        if (l->uids)
            l->uids[l->n] = resp->result.sessions.session.uid;
        snprintf(l->ids[l->n++], sizeof(l->ids[0]), "%.16s", resp->result.sessions.session.id);
    }
    return EXIT_OK;
}

/* The ids of the running sessions lyhd shows this user, into ids (at most
 * max). 0, or an exit code with the reason printed. */
static int list_ids(struct cli *cli, struct lyh_client *c, lianyaohu_v1_Request *req,
                    char (*ids)[17], uint32_t *uids, size_t max, size_t *ret_n) {
    struct id_list l = {.ids = ids, .uids = uids, .max = max};
    char who[64];

    memset(req, 0, sizeof(*req));
    req->which_method = lianyaohu_v1_Request_sessions_tag;
    snprintf(who, sizeof(who), "%s stop", cli->prog);
    int rc = cli_stream(cli, c, who, req, 30000, add_id, &l);
    if (rc != EXIT_OK)
        return rc;
    *ret_n = l.n;
    return EXIT_OK;
}

static bool listed(char (*ids)[17], size_t n, const char *id) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(ids[i], id) == 0)
            return true;
    return false;
}

/* Signal the session; NOT_FOUND (its agent already exited) is not an error. */
static int send_signal(struct cli *cli, struct lyh_client *c, lianyaohu_v1_Request *req,
                       lianyaohu_v1_Response *resp, const char *id, int sig) {
    memset(req, 0, sizeof(*req));
    req->which_method = lianyaohu_v1_Request_signal_tag;
    snprintf(req->method.signal.session_id, sizeof(req->method.signal.session_id), "%s", id);
    req->method.signal.which_what = lianyaohu_v1_SignalRequest_signal_tag;
    req->method.signal.what.signal = sig;
    int r = cli_call(c, req, resp);
    if (r < 0) {
        fprintf(stderr, "%s stop: lyhd: %s\n", cli->prog, strerror(-r));
        return EXIT_UNAVAILABLE;
    }
    if (resp->code != lianyaohu_v1_Code_OK && resp->code != lianyaohu_v1_Code_NOT_FOUND) {
        char who[64];
        snprintf(who, sizeof(who), "%s stop", cli->prog);
        cli_print_error(who, resp);
        return EXIT_DAEMON_ERROR;
    }
    return EXIT_OK;
}

/* Wait up to ms for the session to leave the list: 1 gone, 0 not, or an
 * exit code (negated). */
static int wait_gone(struct cli *cli, struct lyh_client *c, lianyaohu_v1_Request *req,
                     char (*ids)[17], const char *id, uint64_t ms) {
    uint64_t end = now_ms() + ms;
    for (;;) {
        size_t n = 0;
        int rc = list_ids(cli, c, req, ids, NULL, STOP_MAX_SESSIONS, &n);
        if (rc != EXIT_OK)
            return -rc;
        if (!listed(ids, n, id))
            return 1;
        if (now_ms() >= end)
            return 0;
        struct timespec ts = {0, STOP_POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int cmd_stop(struct cli *cli, int argc, char **argv) {
    static const struct option opts[] = {
        {"grace", required_argument, NULL, 'g'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    long grace = STOP_DEFAULT_GRACE_S;
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
        switch (c) {
        case 'g': {
            char *end = NULL;
            errno = 0;
            grace = strtol(optarg, &end, 10);
            if (errno || !end || *end || end == optarg || grace < 0 || grace > STOP_MAX_GRACE_S) {
                fprintf(stderr, "%s stop: --grace '%s': seconds from 0 to %d\n", cli->prog,
                        optarg, STOP_MAX_GRACE_S);
                return EXIT_USAGE;
            }
            break;
        }
        case 'h': usage_stop(stdout); return EXIT_OK;
        case ':':
            fprintf(stderr, "%s stop: option '%s' needs a value\n", cli->prog, argv[optind - 1]);
            return EXIT_USAGE;
        default:
            fprintf(stderr, "%s stop: unknown option '%s'\n\n", cli->prog, argv[optind - 1]);
            usage_stop(stderr);
            return EXIT_USAGE;
        }
    }
    if (argc - optind != 1) {
        usage_stop(stderr);
        return EXIT_USAGE;
    }
    const char *want = argv[optind];
    if (strncmp(want, "s:", 2) == 0)
        want += 2;
    size_t wl = strlen(want);
    if (wl == 0 || wl > 16 || strspn(want, "0123456789abcdefABCDEF") != wl) {
        fprintf(stderr, "%s stop: '%s' is not a session id (up to 16 hexadecimal digits, as "
                        "`lyh sessions` shows them)\n",
                cli->prog, argv[optind]);
        return EXIT_USAGE;
    }
    char prefix[17];
    for (size_t i = 0; i <= wl; i++)
        prefix[i] = (char)(want[i] >= 'A' && want[i] <= 'F' ? want[i] - 'A' + 'a' : want[i]);

    _cleanup_free_ lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    _cleanup_free_ lianyaohu_v1_Response *resp = calloc(1, sizeof(*resp));
    _cleanup_free_ char(*ids)[17] = calloc(STOP_MAX_SESSIONS, sizeof(*ids));
    struct lyh_client *cl = NULL;
    if (!req || !resp || !ids)
        return EXIT_DAEMON_ERROR;
    int rc = cli_connect(cli, &cl);
    if (rc != EXIT_OK)
        return rc;

    /* the one running session the prefix names: among the caller's own (an
     * admin sees every user's sessions; another user's is stopped only by
     * its whole id) */
    _cleanup_free_ uint32_t *uids = calloc(STOP_MAX_SESSIONS, sizeof(*uids));
    if (!uids) {
        lyh_client_close(cl);
        return EXIT_DAEMON_ERROR;
    }
    size_t n = 0, hits = 0, hit = 0;
    uint32_t me = (uint32_t)getuid();
    rc = list_ids(cli, cl, req, ids, uids, STOP_MAX_SESSIONS, &n);
#define CANDIDATE(i) (strncmp(ids[i], prefix, wl) == 0 && (wl == 16 || uids[i] == me))
    for (size_t i = 0; rc == EXIT_OK && i < n; i++)
        if (CANDIDATE(i))
            hits++, hit = i;
    if (rc == EXIT_OK && hits != 1) {
        if (hits == 0)
            fprintf(stderr, "%s stop: no running session of yours is '%s' (`lyh sessions` "
                            "lists them)\n",
                    cli->prog, prefix);
        else {
            fprintf(stderr, "%s stop: '%s' names %zu sessions; give more digits:", cli->prog,
                    prefix, hits);
            for (size_t i = 0; i < n; i++)
                if (CANDIDATE(i))
                    fprintf(stderr, " %s", ids[i]);
            fputc('\n', stderr);
        }
        rc = EXIT_USAGE;
    }
#undef CANDIDATE
    char id[17];
    if (rc == EXIT_OK) {
        snprintf(id, sizeof(id), "%s", ids[hit]);
        if (uids[hit] != me)
            printf("session %s is uid %u's\n", id, uids[hit]);
        rc = send_signal(cli, cl, req, resp, id, grace ? SIGTERM : SIGKILL);
        /* an agent stopped with ^Z would sleep through the grace period */
        if (rc == EXIT_OK && grace)
            rc = send_signal(cli, cl, req, resp, id, SIGCONT);
    }
    int gone = 0;
    if (rc == EXIT_OK) {
        gone = wait_gone(cli, cl, req, ids, id,
                         grace ? (uint64_t)grace * 1000 : STOP_KILL_WAIT_MS);
        if (gone < 0)
            rc = -gone;
    }
    bool killed = !grace;
    if (rc == EXIT_OK && !gone && grace) {
        killed = true;
        rc = send_signal(cli, cl, req, resp, id, SIGKILL);
        if (rc == EXIT_OK) {
            gone = wait_gone(cli, cl, req, ids, id, STOP_KILL_WAIT_MS);
            if (gone < 0)
                rc = -gone;
        }
    }
    if (rc == EXIT_OK && !gone) {
        fprintf(stderr, "%s stop: session %s did not end after SIGKILL; lyhd's log may say why\n",
                cli->prog, id);
        rc = EXIT_DAEMON_ERROR;
    }
    if (rc == EXIT_OK)
        printf("session %s ended (%s)\n", id,
               killed ? "SIGKILL" : "SIGTERM");
    lyh_client_close(cl);
    return rc;
}
