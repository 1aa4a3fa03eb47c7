/* lyh install / lyh uninstall: the shared-user firewall, which confines every
 * socket of your user (not only those of a lyh session) to the VPN. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/vpn_pick.h"
#include "common/macros.h"

void usage_install(FILE *f) {
    fprintf(f, "Usage: lyh install [--vpn NAME] [--lan-allow RULE]... [--allow-non-default-route]\n"
               "Confine every socket of your user to the VPN (a shared firewall, refcounted:\n"
               "each install needs an uninstall). `lyh run --shared-user-firewall` uses it too.\n");
}

void usage_uninstall(FILE *f) {
    fprintf(f, "Usage: lyh uninstall\n"
               "Drop one reference on your shared firewall; the rules go with the last one.\n"
               "Refused while you have running sessions.\n");
}

int cmd_install(struct cli *cli, int argc, char **argv) {
    static const struct option opts[] = {
        {"vpn", required_argument, NULL, 'v'},
        {"lan-allow", required_argument, NULL, 'l'},
        {"allow-non-default-route", no_argument, NULL, 'a'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const char *vpn = NULL;
    int c, rc;

    _cleanup_free_ lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    _cleanup_free_ lianyaohu_v1_Response *resp = NULL;
    if (!req)
        return EXIT_DAEMON_ERROR;
    lianyaohu_v1_InstallRequest *in = &req->method.install;
    while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        switch (c) {
        case 'v': vpn = optarg; break;
        case 'l':
            if (cli_add_rule("--lan-allow", optarg, in->lan_allow, &in->lan_allow_count,
                             ARRAY_SIZE(in->lan_allow)) < 0)
                return EXIT_USAGE;
            break;
        case 'a': in->allow_non_default_route = true; break;
        case 'h': usage_install(stdout); return EXIT_OK;
        default: usage_install(stderr); return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s install: unexpected argument '%s'\n", cli->prog, argv[optind]);
        return EXIT_USAGE;
    }
    struct vpn_names names = {.n = 0};
    if (!vpn)
        vpn_names_from_policy(cli, &names);
    struct vpn_pick_in pin = {.explicit_name = vpn,
                              .interactive = isatty(0) && isatty(2),
                              .allow_non_default_route = in->allow_non_default_route,
                              .names = &names};
    rc = vpn_pick(&pin, in->interface, sizeof(in->interface));
    if (rc != EXIT_OK)
        return rc;
    rc = cli_unary(cli, req, lianyaohu_v1_Request_install_tag, lianyaohu_v1_Response_install_tag,
                   "a shared firewall", &resp);
    if (rc != EXIT_OK)
        return rc;
    printf("shared firewall %s via %s (%u reference%s)\n", resp->result.install.chain,
           in->interface, resp->result.install.refcount,
           resp->result.install.refcount == 1 ? "" : "s");
    return EXIT_OK;
}

int cmd_uninstall(struct cli *cli, int argc, char **argv) {
    bool json_unused;
    int rc = cli_json_only(cli, argc, argv, "uninstall", usage_uninstall, &json_unused);

    if (rc >= 0)
        return rc;
    _cleanup_free_ lianyaohu_v1_Response *resp = NULL;
    rc = cli_unary(cli, NULL, lianyaohu_v1_Request_uninstall_tag,
                   lianyaohu_v1_Response_uninstall_tag, "an uninstall result", &resp);
    if (rc != EXIT_OK)
        return rc;
    if (resp->result.uninstall.removed)
        printf("shared firewall removed\n");
    else
        printf("shared firewall kept (%u reference%s left)\n", resp->result.uninstall.refcount,
               resp->result.uninstall.refcount == 1 ? "" : "s");
    return EXIT_OK;
}
