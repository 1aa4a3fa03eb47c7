/* lyh capabilities [--json]: what the daemon speaks and implements. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/lyh_limits.h"
#include "common/macros.h"

void usage_capabilities(FILE *f) {
    fprintf(f, "Usage: lyh capabilities [--json]\n"
               "Show the daemon's protocol and build versions, features and limits.\n");
}

int cmd_capabilities(struct cli *cli, int argc, char **argv) {
    bool json;
    int rc;

    rc = cli_json_only(cli, argc, argv, "capabilities", usage_capabilities, &json);
    if (rc >= 0)
        return rc;

    _cleanup_free_ lianyaohu_v1_Response *resp = NULL;
    rc = cli_unary(cli, NULL, lianyaohu_v1_Request_capabilities_tag,
                   lianyaohu_v1_Response_capabilities_tag, "capabilities", &resp);
    if (rc != EXIT_OK)
        return rc;
    const lianyaohu_v1_CapabilitiesReply *cap = &resp->result.capabilities;
    if (json) {
        printf("{\"protocol_version\":%u,\"build_version\":", cap->protocol_version);
        json_string(stdout, cap->build_version);
        printf(",\"client_protocol_version\":%u,\"client_version\":", LYH_PROTOCOL_VERSION);
        json_string(stdout, LYH_VERSION);
        printf(",\"features\":[");
        for (pb_size_t i = 0; i < cap->features_count; i++) {
            if (i)
                putchar(',');
            json_string(stdout, cap->features[i]);
        }
        printf("],\"max_frame_bytes\":%u,\"max_fds_per_message\":%u,"
               "\"max_calls_per_connection\":%u}\n",
               cap->max_frame_bytes, cap->max_fds_per_message, cap->max_calls_per_connection);
        return EXIT_OK;
    }
    printf("daemon:    lyhd %s, protocol %u\n", cap->build_version, cap->protocol_version);
    printf("client:    lyh %s, protocol %u\n", LYH_VERSION, LYH_PROTOCOL_VERSION);
    printf("features: ");
    for (pb_size_t i = 0; i < cap->features_count; i++)
        printf(" %s", cap->features[i]);
    printf("\nlimits:    frame %u bytes, %u fds per message, %u calls per connection\n",
           cap->max_frame_bytes, cap->max_fds_per_message, cap->max_calls_per_connection);
    if (cap->protocol_version != LYH_PROTOCOL_VERSION)
        printf("warning:   protocol versions differ; upgrade the older side\n");
    return EXIT_OK;
}
