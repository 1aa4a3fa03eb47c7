/* lyh status [--json]: uptime, connections, sessions, guards. */
#include <stdlib.h>

#include "cli/cli.h"
#include "common/macros.h"

void usage_status(FILE *f) {
    fprintf(f, "Usage: lyh status [--json]\n"
               "Show the daemon's uptime, connections, sessions and firewall guards.\n");
}

static const char *scope_name(int scope) {
    switch (scope) {
    case lianyaohu_v1_Scope_SCOPE_SESSION: return "session";
    case lianyaohu_v1_Scope_SCOPE_UID_GID: return "uid+gid";
    case lianyaohu_v1_Scope_SCOPE_USER: return "user";
    case lianyaohu_v1_Scope_SCOPE_NONE: return "none";
    default: return "unspecified";
    }
}

int cmd_status(struct cli *cli, int argc, char **argv) {
    bool json;
    int rc;

    rc = cli_json_only(cli, argc, argv, "status", usage_status, &json);
    if (rc >= 0)
        return rc;

    _cleanup_free_ lianyaohu_v1_Response *resp = NULL;
    rc = cli_unary(cli, NULL, lianyaohu_v1_Request_status_tag, lianyaohu_v1_Response_status_tag,
                   "a status", &resp);
    if (rc != EXIT_OK)
        return rc;
    const lianyaohu_v1_StatusReply *st = &resp->result.status;
    if (json) {
        printf("{\"uptime_ms\":%llu,\"pid\":%llu,\"connections\":%u,\"connections_of_caller\":%u,"
               "\"sessions\":%u,\"own_only\":%s,\"state_dir\":",
               (unsigned long long)st->uptime_ms, (unsigned long long)st->pid, st->connections,
               st->connections_of_caller, st->sessions, st->own_only ? "true" : "false");
        json_string(stdout, st->state_dir);
        printf(",\"guards\":[");
        for (pb_size_t i = 0; i < st->guards_count; i++) {
            const lianyaohu_v1_GuardInfo *g = &st->guards[i];
            printf("%s{\"uid\":%u,\"scope\":\"%s\",\"interface\":", i ? "," : "", g->uid,
                   scope_name(g->scope));
            json_string(stdout, g->interface);
            printf(",\"chain\":");
            json_string(stdout, g->chain);
            printf(",\"refcount\":%u}", g->refcount);
        }
        printf("]}\n");
        return EXIT_OK;
    }
    unsigned long long up = (unsigned long long)st->uptime_ms / 1000;
    printf("lyhd pid %llu, up %llud %02lluh%02llum%02llus, state in %s\n",
           (unsigned long long)st->pid, up / 86400, up / 3600 % 24, up / 60 % 60, up % 60,
           st->state_dir);
    /* A non-admin is told only about their own connections and sessions. */
    if (st->own_only) {
        printf("connections: %u (yours; other users' are shown to admins only)\n",
               st->connections_of_caller);
        printf("sessions:    %u running (yours)\n", st->sessions);
    } else {
        printf("connections: %u (yours: %u)\n", st->connections, st->connections_of_caller);
        printf("sessions:    %u running\n", st->sessions);
    }
    printf("guards:      %u\n", (unsigned)st->guards_count);
    for (pb_size_t i = 0; i < st->guards_count; i++) {
        const lianyaohu_v1_GuardInfo *g = &st->guards[i];
        printf("  %-12s uid %-6u %-8s via %-8s refs %u\n", g->chain, g->uid, scope_name(g->scope),
               g->interface, g->refcount);
    }
    return EXIT_OK;
}
