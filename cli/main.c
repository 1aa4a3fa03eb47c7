/* lyh: the LianYaoHu command line. A thin client: every decision that matters
 * is made (again) by the daemon; what lyh checks is advisory. */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/closest.h"
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
    {"stop", "end one of your sessions: SIGTERM, then SIGKILL", cmd_stop, usage_stop},
    {"attach", "attach this terminal to a background session (lyh run -d)", cmd_attach,
     usage_attach},
    {"ls", "your background sessions: name, state, idle time", cmd_ls, usage_ls},
    {"kill", "end a background session by name", cmd_kill, usage_kill},
    {"status", "daemon uptime, connections, sessions and guards", cmd_status, usage_status},
    {"doctor", "check what a guarded run needs, and what to fix", cmd_doctor, usage_doctor},
    {"audit", "query, follow, summarize and export the audit log", cmd_audit, usage_audit},
    {"policy", "the admin policy: get, set, history, rollback", cmd_policy, usage_policy},
    {"config", "your config files: show, path, trust, revoke (lianyaohu.toml(5))", cmd_config, usage_config},
};

/* Take "--socket PATH" / "--socket=PATH" out of a subcommand's arguments
 * (before a "--", which ends lyh's), the last one winning. -1: no value. */
static int take_socket(int *argc, char **argv, const char **ret) {
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            while (i < *argc)
                argv[out++] = argv[i++];
            break;
        }
        if (strcmp(argv[i], "--socket") == 0) {
            if (i + 1 >= *argc)
                return -1;
            *ret = argv[++i];
        } else if (strncmp(argv[i], "--socket=", 9) == 0) {
            *ret = argv[i] + 9;
        } else {
            argv[out++] = argv[i];
        }
    }
    argv[out] = NULL;
    *argc = out;
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "Usage: lyh [--socket PATH] COMMAND [ARGS]   (--socket may follow COMMAND too)\n"
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
    uint64_t main_us = cli_mono_us();
    /* fds 0-2 open (on /dev/null if closed), so no socket or pty of ours
     * is ever taken for stdio (a background session's holder points stdio
     * at /dev/null, which would replace it) */
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) < 0)
            return EXIT_USAGE;

    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    struct cli cli = {.prog = "lyh", .main_us = main_us};
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
    const char *name = argv[optind];
    for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
        if (strcmp(commands[i].name, name) == 0) {
            int sub_argc = argc - optind;
            char **sub_argv = argv + optind;
            /* --socket may follow the command too (lyh status --socket X).
             * lyh run takes it among its own options: what follows them is
             * the agent's command line, never lyh's. */
            if (strcmp(name, "run") != 0 && take_socket(&sub_argc, sub_argv, &socket_opt) < 0) {
                fprintf(stderr, "lyh %s: option '--socket' needs a value\n", name);
                return EXIT_USAGE;
            }
            cli.socket_path = lyh_client_socket_path(socket_opt);
            optind = 1; /* restart getopt for the subcommand */
            return commands[i].run(&cli, sub_argc, sub_argv);
        }
    }
    const char *names[ARRAY_SIZE(commands)];
    for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
        names[i] = commands[i].name;
    const char *near = closest_word(name, names, ARRAY_SIZE(names));
    if (near)
        fprintf(stderr, "lyh: unknown command '%s'; did you mean '%s'?\n\n", name, near);
    else
        fprintf(stderr, "lyh: unknown command '%s'\n\n", name);
    usage(stderr);
    return EXIT_USAGE;
}
