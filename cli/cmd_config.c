/* lyh config: show the merged configuration (with origins), the file paths,
 * and approve or revoke a project file. Also the process-side glue the loader
 * needs (HOME, XDG_CONFIG_HOME, cwd, the terminal question), shared with lyh
 * run. Never talks to the daemon. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/config.h"
#include "common/macros.h"

void usage_config(FILE *f) {
    fprintf(f,
            "Usage: lyh config show [--origin] [--config PATH] [--no-config] [--trust-project]\n"
            "       lyh config path\n"
            "       lyh config trust [DIR]\n"
            "       lyh config revoke [DIR]\n"
            "The layered configuration of lyh run (docs/config.md): built-ins, the global\n"
            "file, the nearest %s (walking up to $HOME), the command line.\n\n"
            "  show      print the merged configuration as TOML; --origin adds where each\n"
            "            value came from (file:line, built-in, command line)\n"
            "  path      the global, trust and project file paths and whether they exist\n"
            "  trust     approve DIR's project file as it is now (its SHA-256), so that its\n"
            "            widenings apply; DIR defaults to the nearest project file's\n"
            "  revoke    remove that approval\n",
            CFG_PROJECT_NAME);
}

static bool ask_tty(void *data, const char *question) {
    char line[16];

    (void)data;
    fprintf(stderr, "lyh: %s", question);
    fflush(stderr);
    if (!fgets(line, sizeof(line), stdin))
        return false;
    return line[0] == 'y' || line[0] == 'Y';
}

int cli_config_ctx(struct cfg_ctx *ctx, char *cwd, size_t cwdlen, const char *cwd_override,
                   bool may_ask) {
    *ctx = (struct cfg_ctx){.home = getenv("HOME"),
                            .xdg_config_home = getenv("XDG_CONFIG_HOME"),
                            .note = stderr};
    if (cwd_override) {
        if (!realpath(cwd_override, cwd))
            return -errno;
    } else if (!getcwd(cwd, cwdlen)) {
        return -errno;
    }
    ctx->cwd = cwd;
    if (may_ask && isatty(STDIN_FILENO) && isatty(STDERR_FILENO))
        ctx->ask = ask_tty;
    return 0;
}

static int config_show(int argc, char **argv) {
    enum { O_ORIGIN = 256, O_CONFIG, O_NOCONFIG, O_TRUST, O_HELP };
    static const struct option opts[] = {
        {"origin", no_argument, NULL, O_ORIGIN},       {"config", required_argument, NULL, O_CONFIG},
        {"no-config", no_argument, NULL, O_NOCONFIG},  {"trust-project", no_argument, NULL, O_TRUST},
        {"help", no_argument, NULL, O_HELP},           {0},
    };
    struct cfg_cli cli = CFG_CLI_INIT;
    _cleanup_(cfg_freep) struct cfg *c = NULL;
    struct cfg_error err = {{0}};
    struct cfg_ctx ctx;
    char cwd[PATH_MAX];
    bool origin = false;
    int ch, r;

    while ((ch = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        switch (ch) {
        case O_ORIGIN: origin = true; break;
        case O_CONFIG: cli.config_path = optarg; break;
        case O_NOCONFIG: cli.no_config = true; break;
        case O_TRUST: cli.trust_project = true; break;
        case O_HELP: usage_config(stdout); return EXIT_OK;
        default: usage_config(stderr); return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "lyh config show: unexpected argument '%s'\n", argv[optind]);
        return EXIT_USAGE;
    }
    if ((r = cli_config_ctx(&ctx, cwd, sizeof(cwd), NULL, false)) < 0) {
        fprintf(stderr, "lyh config: cannot tell the current directory: %s\n", strerror(-r));
        return EXIT_USAGE;
    }
    ctx.note = NULL; /* show lists what is ignored itself */
    if ((r = cfg_load(&ctx, &cli, &c, &err)) < 0) {
        fprintf(stderr, "lyh config: %s\n", err.msg[0] ? err.msg : strerror(-r));
        return EXIT_USAGE;
    }
    cfg_show(stdout, c, origin);
    return EXIT_OK;
}

static int config_path(void) {
    struct cfg_cli cli = CFG_CLI_INIT;
    _cleanup_(cfg_freep) struct cfg *c = NULL;
    _cleanup_free_ char *project = NULL;
    struct cfg_error err = {{0}};
    struct cfg_ctx ctx;
    char cwd[PATH_MAX];
    struct stat st;
    int r;

    if ((r = cli_config_ctx(&ctx, cwd, sizeof(cwd), NULL, false)) < 0) {
        fprintf(stderr, "lyh config: cannot tell the current directory: %s\n", strerror(-r));
        return EXIT_USAGE;
    }
    cli.no_config = true; /* paths only: nothing is read */
    if ((r = cfg_load(&ctx, &cli, &c, &err)) < 0) {
        fprintf(stderr, "lyh config: %s\n", err.msg[0] ? err.msg : strerror(-r));
        return EXIT_USAGE;
    }
    printf("global   %s (%s)\n", c->global_path,
           stat(c->global_path, &st) == 0 ? "exists" : "absent");
    printf("trust    %s (%s)\n", c->trust_path, c->trust_exists ? "exists" : "absent");
    if (cfg_find_project(&ctx, &project) == 0)
        printf("project  %s (exists)\n", project);
    else
        printf("project  none (no %s from %s up to $HOME)\n", CFG_PROJECT_NAME, cwd);
    return EXIT_OK;
}

/* trust / revoke: the directory given, or the nearest project file's. */
static int config_trust(int argc, char **argv, bool approve) {
    const char *verb = approve ? "trust" : "revoke";
    struct cfg_error err = {{0}};
    _cleanup_free_ char *dir = NULL, *path = NULL, *cdir = NULL, *tpath = NULL;
    char hex[CFG_SHA256_HEX];
    struct cfg_ctx ctx;
    char cwd[PATH_MAX];
    int r;

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage_config(stdout);
        return EXIT_OK;
    }
    if (argc > 2) {
        fprintf(stderr, "lyh config %s: at most one DIR\n", verb);
        return EXIT_USAGE;
    }
    if ((r = cli_config_ctx(&ctx, cwd, sizeof(cwd), argc == 2 ? argv[1] : NULL, false)) < 0) {
        fprintf(stderr, "lyh config %s: %s: %s\n", verb, argc == 2 ? argv[1] : ".", strerror(-r));
        return EXIT_USAGE;
    }
    if (argc == 2) {
        dir = strdup(cwd);
        if (!dir || asprintf(&path, "%s/%s", cwd, CFG_PROJECT_NAME) < 0)
            return EXIT_DAEMON_ERROR;
    } else {
        if (cfg_find_project(&ctx, &path) < 0) {
            fprintf(stderr, "lyh config %s: no %s from %s up to $HOME; name the DIR\n", verb,
                    CFG_PROJECT_NAME, cwd);
            return EXIT_USAGE;
        }
        dir = strdup(path);
        if (!dir)
            return EXIT_DAEMON_ERROR;
        *strrchr(dir, '/') = '\0';
        if (!dir[0])
            strcpy(dir, "/");
    }
    if (cfg_config_dir(&ctx, &cdir) < 0 || asprintf(&tpath, "%s/trusted.toml", cdir) < 0) {
        fprintf(stderr, "lyh config %s: cannot tell the config directory ($HOME unset?)\n", verb);
        return EXIT_USAGE;
    }
    if (approve && cfg_hash_file(path, hex, &err) < 0) {
        fprintf(stderr, "lyh config trust: %s\n", err.msg);
        return EXIT_USAGE;
    }
    if ((r = cfg_trust_set(tpath, dir, approve ? hex : NULL, &err)) < 0) {
        fprintf(stderr, "lyh config %s: %s\n", verb, err.msg[0] ? err.msg : strerror(-r));
        return r == -ENOENT ? EXIT_USAGE : EXIT_DAEMON_ERROR;
    }
    if (approve)
        printf("approved %s (sha256 %s); any edit makes the approval stale\n", path, hex);
    else
        printf("revoked the approval for %s\n", dir);
    return EXIT_OK;
}

int cmd_config(struct cli *cli, int argc, char **argv) {
    (void)cli;
    if (argc < 2) {
        usage_config(stderr);
        return EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "show") == 0)
        return config_show(argc - 1, argv + 1);
    if (strcmp(sub, "path") == 0) {
        if (argc > 2) {
            fprintf(stderr, "lyh config path: unexpected argument '%s'\n", argv[2]);
            return EXIT_USAGE;
        }
        return config_path();
    }
    if (strcmp(sub, "trust") == 0)
        return config_trust(argc - 1, argv + 1, true);
    if (strcmp(sub, "revoke") == 0)
        return config_trust(argc - 1, argv + 1, false);
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
        usage_config(stdout);
        return EXIT_OK;
    }
    fprintf(stderr, "lyh config: unknown subcommand '%s'\n\n", sub);
    usage_config(stderr);
    return EXIT_USAGE;
}
