/* lyh sessions [--json]: running sessions (yours; all of them for an admin). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "common/macros.h"

void usage_sessions(FILE *f) {
    fprintf(f, "Usage: lyh sessions [--json]\n"
               "List running sessions: yours, or every user's for an admin.\n");
}

int cmd_sessions(struct cli *cli, int argc, char **argv) {
    bool json;
    struct lyh_client *c = NULL;
    uint64_t id;
    int rc, n = 0;

    rc = cli_json_only(cli, argc, argv, "sessions", usage_sessions, &json);
    if (rc >= 0)
        return rc;

    _cleanup_free_ lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    _cleanup_free_ lianyaohu_v1_Response *resp = calloc(1, sizeof(*resp));
    if (!req || !resp)
        return EXIT_DAEMON_ERROR;
    rc = cli_connect(cli, &c);
    if (rc != EXIT_OK)
        return rc;
    req->which_method = lianyaohu_v1_Request_sessions_tag;
    if (lyh_client_send(c, req, NULL, 0, &id) < 0) {
        lyh_client_close(c);
        return EXIT_UNAVAILABLE;
    }
    if (!json)
        printf("%-18s %-6s %-8s %-8s %-19s %s\n", "SESSION", "UID", "PID", "VIA", "STARTED",
               "COMMAND (CWD)");
    for (;;) {
        memset(resp, 0, sizeof(*resp));
        int r = lyh_client_recv(c, resp, 30000);
        if (r < 0) {
            fprintf(stderr, "%s sessions: %s\n", cli->prog, strerror(-r));
            lyh_client_close(c);
            return EXIT_UNAVAILABLE;
        }
        if (resp->call_id != id && resp->call_id != 0)
            continue;
        if (resp->code != lianyaohu_v1_Code_OK) {
            cli_print_error(cli->prog, resp);
            lyh_client_close(c);
            return EXIT_DAEMON_ERROR;
        }
        if (resp->which_result == lianyaohu_v1_Response_sessions_tag &&
            resp->result.sessions.has_session) {
            const lianyaohu_v1_SessionInfo *s = &resp->result.sessions.session;
            n++;
            if (json) {
                printf("{\"id\":");
                json_string(stdout, s->id);
                printf(",\"uid\":%u,\"pid\":%llu,\"interface\":", s->uid,
                       (unsigned long long)s->pid);
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
                printf("%-18s %-6u %-8llu %-8s %-19s %s (%s)\n", s->id, s->uid,
                       (unsigned long long)s->pid, s->interface[0] ? s->interface : "-", when,
                       s->argv0, s->cwd);
            }
        }
        if (resp->end_of_stream)
            break;
    }
    lyh_client_close(c);
    if (!json && n == 0)
        printf("(no running sessions)\n");
    return EXIT_OK;
}
