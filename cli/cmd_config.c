/* lyh config: show the merged configuration (with origins), the file paths,
 * and approve or revoke a project file. Also the process-side glue the loader
 * needs (whose home: HOME, XDG_CONFIG_HOME and the passwd entry checked
 * against the real uid; cwd; the terminal question), shared with lyh run.
 * Never talks to the daemon. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/config.h"
#include "common/macros.h"

void usage_config(FILE *f) {
    fprintf(f,
            "Usage: lyh config [edit]\n"
            "       lyh config show [--origin] [--config PATH] [--no-config] [--trust-project]\n"
            "       lyh config path\n"
            "       lyh config trust [DIR]\n"
            "       lyh config revoke [DIR]\n"
            "The layered configuration of lyh run (lianyaohu.toml(5)): built-ins, the global\n"
            "file, the nearest %s (walking up to $HOME), the command line.\n\n"
            "  edit      (also plain `lyh config` on a terminal) a full-screen editor of the\n"
            "            global file and the project file: every key, its value, where it\n"
            "            comes from; values checked as you type; saving the project file\n"
            "            approves it (after showing what it widens). Not on a terminal,\n"
            "            `lyh config` is `lyh config show`\n"
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

/* Why a variable was not used, for the note. */
static const char *reject_text(enum cfg_env_reject why, int e, uid_t owner, char *buf,
                               size_t len) {
    switch (why) {
    case CFG_ENV_NOT_ABSOLUTE: return "not an absolute path";
    case CFG_ENV_NOT_DIR: return "not a directory";
    case CFG_ENV_UNREACHABLE:
        if (e == ENOENT || e == ENOTDIR)
            return "missing";
        snprintf(buf, len, "out of your reach (%s)", strerror(e));
        break;
    case CFG_ENV_NOT_OWNED:
        snprintf(buf, len, "owned by uid %u, not by you", (unsigned)owner);
        break;
    case CFG_ENV_USED: snprintf(buf, len, "used"); break;
    }
    return buf;
}

/* One line on stderr when $HOME or $XDG_CONFIG_HOME was set but not used.
 * Why say it at all: the usual cause is running lyh with someone else's
 * environment (sudo -u, su without -, setpriv), and then the files that shape
 * the sandbox are not the ones the caller may think (root's config.toml with
 * its paths.deny no longer applies, for one). Silently switching would hide
 * that; failing would break the common `sudo -u USER lyh run`. So: use the
 * caller's own files, and say so once, naming the variable and the directory
 * used. It goes to stderr only, so stdout (the TOML of `lyh config show`, an
 * agent's output) stays clean; no caller of this has a --json mode (lyh
 * doctor --json never reads the config). HOME unset falls back to passwd
 * without a word: that is what every program does. */
static void home_note(const struct cfg_home_in *in, const struct cfg_home *h) {
    char b1[160], b2[160];
    bool home_rejected = h->home_reject != CFG_ENV_USED;
    bool xdg_rejected = h->xdg_reject != CFG_ENV_USED;

    if (!home_rejected && !xdg_rejected)
        return;
    fputs("lyh: note:", stderr);
    if (home_rejected) {
        fprintf(stderr, " $HOME (%s) is %s; ", in->env_home,
                reject_text(h->home_reject, h->home_errno, h->home_owner, b1, sizeof(b1)));
        if (h->home)
            fprintf(stderr, "using %s, the home of uid %u in passwd", h->home, (unsigned)in->uid);
        else
            fprintf(stderr, "uid %u has no home of its own in passwd either", (unsigned)in->uid);
    }
    if (xdg_rejected)
        fprintf(stderr, "%s $XDG_CONFIG_HOME (%s) is %s; ignored", home_rejected ? ";" : "",
                in->env_xdg,
                reject_text(h->xdg_reject, h->xdg_errno, h->xdg_owner, b2, sizeof(b2)));
    fputc('\n', stderr);
}

int cli_config_ctx(struct cfg_ctx *ctx, struct cfg_ctx_buf *buf, const char *cwd_override,
                   bool may_ask) {
    struct passwd pw, *pwres = NULL;
    char pwbuf[16384];
    struct cfg_home h;
    struct cfg_home_in in = {.uid = getuid(),
                             .env_home = getenv("HOME"),
                             .env_xdg = getenv("XDG_CONFIG_HOME"),
                             .stat_fn = stat};

    /* $HOME first: the passwd lookup (NSS: nsswitch.conf, nscd's socket,
     * /etc/passwd, maybe a module to load) is on every `lyh run`'s path, and
     * only needed when $HOME is unset or not the caller's own directory. */
    cfg_pick_home(&in, &h);
    /* The real uid: whose files these are. lyh is not set-uid, so it is also
     * the effective uid, the one lyhd reads from SO_PEERCRED and whose passwd
     * home it gives the sandbox. */
    if (!h.home && getpwuid_r(in.uid, &pw, pwbuf, sizeof(pwbuf), &pwres) == 0 && pwres &&
        strlen(pw.pw_dir) < sizeof(buf->pw_home)) {
        memcpy(buf->pw_home, pw.pw_dir, strlen(pw.pw_dir) + 1);
        in.pw_home = buf->pw_home;
        cfg_pick_home(&in, &h);
    }
    home_note(&in, &h);
    *ctx = (struct cfg_ctx){.home = h.home, .xdg_config_home = h.xdg_config_home, .note = stderr};
    if (cwd_override) {
        if (!realpath(cwd_override, buf->cwd))
            return -errno;
    } else if (!getcwd(buf->cwd, sizeof(buf->cwd))) {
        return -errno;
    }
    ctx->cwd = buf->cwd;
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
    struct cfg_ctx_buf buf;
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
    if ((r = cli_config_ctx(&ctx, &buf, NULL, false)) < 0) {
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
    struct cfg_ctx_buf buf;
    struct stat st;
    int r;

    if ((r = cli_config_ctx(&ctx, &buf, NULL, false)) < 0) {
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
        printf("project  none (no %s from %s up to $HOME)\n", CFG_PROJECT_NAME, buf.cwd);
    return EXIT_OK;
}

/* trust / revoke: the directory given, or the nearest project file's. */
static int config_trust(int argc, char **argv, bool approve) {
    const char *verb = approve ? "trust" : "revoke";
    struct cfg_error err = {{0}};
    _cleanup_free_ char *dir = NULL, *path = NULL, *cdir = NULL, *tpath = NULL;
    char hex[CFG_SHA256_HEX];
    struct cfg_ctx ctx;
    struct cfg_ctx_buf buf;
    int r;

    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage_config(stdout);
        return EXIT_OK;
    }
    if (argc > 2) {
        fprintf(stderr, "lyh config %s: at most one DIR\n", verb);
        return EXIT_USAGE;
    }
    if ((r = cli_config_ctx(&ctx, &buf, argc == 2 ? argv[1] : NULL, false)) < 0) {
        fprintf(stderr, "lyh config %s: %s: %s\n", verb, argc == 2 ? argv[1] : ".", strerror(-r));
        return EXIT_USAGE;
    }
    if (argc == 2) {
        dir = strdup(buf.cwd);
        if (!dir || asprintf(&path, "%s/%s", buf.cwd, CFG_PROJECT_NAME) < 0)
            return EXIT_DAEMON_ERROR;
    } else {
        if (cfg_find_project(&ctx, &path) < 0) {
            fprintf(stderr, "lyh config %s: no %s from %s up to $HOME; name the DIR\n", verb,
                    CFG_PROJECT_NAME, buf.cwd);
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
        fprintf(stderr,
                "lyh config %s: cannot tell the config directory: neither $HOME nor your passwd "
                "home is a directory you own; set HOME to your home directory\n",
                verb);
        return EXIT_USAGE;
    }
    if (approve && cfg_hash_file(path, hex, &err) < 0) {
        fprintf(stderr, "lyh config trust: %s\n", err.msg);
        return EXIT_USAGE;
    }
    /* what the approval lets the file do: its widenings, read as they are
     * now (untrusted, asking nothing) */
    char widens[512] = "";
    if (approve) {
        struct cfg_cli cli = CFG_CLI_INIT;
        _cleanup_(cfg_freep) struct cfg *c = NULL;
        struct cfg_ctx lctx = ctx;
        lctx.ask = NULL;
        lctx.note = NULL;
        if (argc == 2)
            lctx.cwd = dir;
        if (cfg_load(&lctx, &cli, &c, &err) < 0) {
            fprintf(stderr, "lyh config trust: %s\n", err.msg);
            return EXIT_USAGE;
        }
        cfg_ignored_keys(c, widens, sizeof(widens));
    }
    if ((r = cfg_trust_set(tpath, dir, approve ? hex : NULL, &err)) < 0) {
        fprintf(stderr, "lyh config %s: %s\n", verb, err.msg[0] ? err.msg : strerror(-r));
        return r == -ENOENT ? EXIT_USAGE : EXIT_DAEMON_ERROR;
    }
    if (approve)
        printf("approved %s (sha256 %s); it widens: %s; any edit makes the approval stale\n",
               path, hex, widens[0] ? widens : "nothing (only tightenings, or approved before)");
    else
        printf("revoked the approval for %s\n", dir);
    return EXIT_OK;
}

int cmd_config(struct cli *cli, int argc, char **argv) {
    (void)cli;
    bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    if (argc < 2) /* the editor on a terminal, else what it would show */
        return tty ? config_edit() : config_show(argc, argv);
    const char *sub = argv[1];
    if (strcmp(sub, "edit") == 0) {
        if (argc > 2) {
            fprintf(stderr, "lyh config edit: unexpected argument '%s'\n", argv[2]);
            return EXIT_USAGE;
        }
        if (!tty) {
            fprintf(stderr, "lyh config edit: needs a terminal (stdin and stdout); lyh config "
                            "show prints the configuration\n");
            return EXIT_USAGE;
        }
        return config_edit();
    }
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
