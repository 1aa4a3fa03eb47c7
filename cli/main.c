/* lyh: the LianYaoHu command line. A thin client: every decision that matters
 * is made (again) by the daemon; what lyh checks is advisory. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/lyh_limits.h"
#include "common/macros.h"


static const struct cli_command commands[] = {
    {"capabilities", "protocol, version, features and limits of the daemon", cmd_capabilities,
     usage_capabilities},
    {"run", "start an agent confined to your VPN (lyh run --help)", cmd_run, usage_run},
    {"install", "confine every socket of your user to the VPN (shared firewall)", cmd_install,
     usage_install},
    {"uninstall", "drop a reference on your shared firewall", cmd_uninstall, usage_uninstall},
    {"sessions", "your running sessions (all of them for an admin)", cmd_sessions,
     usage_sessions},
    {"status", "daemon uptime, connections, sessions and guards", cmd_status, usage_status},
    {"doctor", "check what a guarded run needs, and what to fix", cmd_doctor, usage_doctor},
    {"audit", "query, follow, summarize and export the audit log", cmd_audit, usage_audit},
    {"policy", "the admin policy: get, set, history, rollback", cmd_policy, usage_policy},
    {"config", "your config files: show, path, trust, revoke (docs/config.md)", cmd_config, usage_config},
};

static void usage(FILE *f) {
    fprintf(f,
            "Usage: lyh [--socket PATH] COMMAND [ARGS]\n"
            "Run code agents that can reach the network only through your VPN.\n\n"
            "Commands:\n");
    for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
        fprintf(f, "  %-14s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\nOptions:\n"
            "  --socket PATH  the daemon's socket (else $%s, else %s)\n"
            "  --version      print the version\n"
            "  --help         this help; `lyh COMMAND --help` for a command\n"
            "\nExit codes: 0 ok, 1 the daemon reported a failure, 2 usage error,\n"
            "69 the daemon is unavailable. lyh run exits with the agent's status;\n"
            "its own failures are 125 (lyh or lyhd refused), 126 (the command cannot\n"
            "run) and 127 (the command was not found).\n",
            LYH_SOCKET_ENV, LYH_DEFAULT_SOCKET);
}

int main(int argc, char **argv) {
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    struct cli cli = {.prog = "lyh"};
    const char *socket_opt = NULL;
    int c;

    /* "+": stop at the first non-option, the subcommand. */
    while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        switch (c) {
        case 's': socket_opt = optarg; break;
        case 'V': printf("lyh %s (protocol %u)\n", LYH_VERSION, LYH_PROTOCOL_VERSION); return EXIT_OK;
        case 'h': usage(stdout); return EXIT_OK;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    cli.socket_path = lyh_client_socket_path(socket_opt);
    const char *name = argv[optind];
    for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
        if (strcmp(commands[i].name, name) == 0) {
            int sub_argc = argc - optind;
            char **sub_argv = argv + optind;
            optind = 1; /* restart getopt for the subcommand */
            return commands[i].run(&cli, sub_argc, sub_argv);
        }
    }
    fprintf(stderr, "lyh: unknown command '%s'\n\n", name);
    usage(stderr);
    return EXIT_USAGE;
}
