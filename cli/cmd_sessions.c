/* lyh sessions [--json]: running sessions (yours; all of them for an admin). */
#include <stdlib.h>
#include <time.h>

#include "cli/cli.h"
#include "common/macros.h"

void usage_sessions(FILE *f) {
    fprintf(f, "Usage: lyh sessions [--json]\n"
               "List running sessions: yours, or every user's for an admin.\n");
}

struct listing {
    bool json;
    int n;
};

static int print_session(const lianyaohu_v1_Response *resp, void *ud) {
    struct listing *l = ud;

    if (resp->which_result != lianyaohu_v1_Response_sessions_tag ||
        !resp->result.sessions.has_session)
        return EXIT_OK;
    const lianyaohu_v1_SessionInfo *s = &resp->result.sessions.session;
    l->n++;
    if (l->json) {
        printf("{\"id\":");
        json_string(stdout, s->id);
        printf(",\"uid\":%u,\"pid\":%llu,\"interface\":", s->uid, (unsigned long long)s->pid);
        json_string(stdout, s->interface);
        printf(",\"started_unix_ms\":%llu,\"argv0\":", (unsigned long long)s->started_unix_ms);
        json_string(stdout, s->argv0);
        printf(",\"cwd\":");
        json_string(stdout, s->cwd);
        printf("}\n");
    } else {
        char when[32];
        time_t t = (time_t)(s->started_unix_ms / 1000);
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
        printf("%-18s %-6u %-8llu %-8s %-19s %s (%s)\n", s->id, s->uid, (unsigned long long)s->pid,
               s->interface[0]                         ? s->interface
               : s->scope == lianyaohu_v1_Scope_SCOPE_NONE ? "-"
                                                           : "proxy", /* proxy-only */
               when, s->argv0, s->cwd);
    }
    return EXIT_OK;
}

int cmd_sessions(struct cli *cli, int argc, char **argv) {
    struct listing l = {0};
    char who[64];
    int rc;

    rc = cli_json_only(cli, argc, argv, "sessions", usage_sessions, &l.json);
    if (rc >= 0)
        return rc;

    _cleanup_free_ lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    if (!req)
        return EXIT_DAEMON_ERROR;
    req->which_method = lianyaohu_v1_Request_sessions_tag;
    /* the header only once lyhd is there to answer */
    struct lyh_client *c = NULL;
    rc = cli_connect(cli, &c);
    if (rc != EXIT_OK)
        return rc;
    if (!l.json)
        printf("%-18s %-6s %-8s %-8s %-19s %s\n", "SESSION", "UID", "PID", "VIA", "STARTED",
               "COMMAND (CWD)");
    snprintf(who, sizeof(who), "%s sessions", cli->prog);
    rc = cli_stream(cli, c, who, req, 30000, print_session, &l);
    lyh_client_close(c);
    if (rc != EXIT_OK)
        return rc;
    if (!l.json && l.n == 0)
        printf("(no running sessions)\n");
    return EXIT_OK;
}
