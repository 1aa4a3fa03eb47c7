/* Shared pieces of the `lyh` subcommands. */
#ifndef LYH_CLI_H
#define LYH_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "cli/lyh_client.h"

/* Exit codes. */
enum {
    EXIT_OK = 0,
    EXIT_DAEMON_ERROR = 1, /* the daemon answered with an error */
    EXIT_USAGE = 2,
    EXIT_UNAVAILABLE = 69, /* EX_UNAVAILABLE: no daemon to talk to */
    /* lyh run, as docker run and shells do: the agent's own status passes
     * through; these are lyh's */
    EXIT_RUN_REFUSED = 125,   /* lyh or lyhd refused, or failed */
    EXIT_RUN_CANNOT = 126,    /* the command cannot run (not executable, setup failed) */
    EXIT_RUN_NOT_FOUND = 127, /* the command was not found */
};

struct cli {
    const char *socket_path; /* resolved: --socket, $LYH_SOCKET, default */
    const char *prog;
};

struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(struct cli *cli, int argc, char **argv);
    void (*usage)(FILE *f);
};

/* A daemon's refusal for people: "WHO: MESSAGE", plain words without the
 * status name (lyhd's messages say what and why; --json output keeps the
 * code). An empty message gets a plain reading of the code. */
void cli_print_error(const char *who, const lianyaohu_v1_Response *resp);

/* Connect or print why not (and how to start the daemon); returns an exit code
 * (EXIT_OK on success). */
int cli_connect(struct cli *cli, struct lyh_client **ret);
/* One unary call. Prints transport errors and daemon errors to stderr; returns
 * EXIT_OK only when the daemon answered OK. resp is caller-allocated. */
int cli_unary(struct cli *cli, lianyaohu_v1_Request *req, lianyaohu_v1_Response *resp);

/* Parse the options of a command that takes only [--json] [--help]. Returns
 * -1 to go on (with *json set), or the exit code to return now. */
int cli_json_only(struct cli *cli, int argc, char **argv, const char *name, void (*usage)(FILE *),
                  bool *json);

/* Parse a destination RULE for option opt (--allow-dest, --deny-dest,
 * --lan-allow) and append it to arr (count < max). Prints why on failure. */
int cli_add_rule(const char *opt, const char *text, lianyaohu_v1_DestRule *arr, pb_size_t *count,
                 size_t max);

/* The candidate closest to word (a typo: at most 2 edits, or word is the
 * start of it), or NULL. For "did you mean". */
const char *cli_closest(const char *word, const char *const *cands, size_t n);

/* For an unknown long option arg ("--vnp", "--vnp=x"): "; did you mean
 * '--vpn'?" into buf when one of opts (ended by a zero entry) is close, else
 * "". */
struct option;
void cli_option_hint(const char *arg, const struct option *opts, char *buf, size_t len);

/* Print s as a JSON string literal (with quotes). */
void json_string(FILE *f, const char *s);

int cmd_capabilities(struct cli *cli, int argc, char **argv);
void usage_capabilities(FILE *f);
int cmd_install(struct cli *cli, int argc, char **argv);
void usage_install(FILE *f);
int cmd_uninstall(struct cli *cli, int argc, char **argv);
void usage_uninstall(FILE *f);
int cmd_run(struct cli *cli, int argc, char **argv);
void usage_run(FILE *f);
int cmd_sessions(struct cli *cli, int argc, char **argv);
void usage_sessions(FILE *f);
int cmd_stop(struct cli *cli, int argc, char **argv);
void usage_stop(FILE *f);
int cmd_audit(struct cli *cli, int argc, char **argv);
void usage_audit(FILE *f);
int cmd_policy(struct cli *cli, int argc, char **argv);
void usage_policy(FILE *f);
int cmd_config(struct cli *cli, int argc, char **argv);
void usage_config(FILE *f);
int cmd_status(struct cli *cli, int argc, char **argv);
void usage_status(FILE *f);
int cmd_doctor(struct cli *cli, int argc, char **argv);
void usage_doctor(FILE *f);

#endif
