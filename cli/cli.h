/* Shared pieces of the `lyh` subcommands. */
#ifndef LYH_CLI_H
#define LYH_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

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
    uint64_t main_us; /* CLOCK_MONOTONIC when main() began (lyh run --timing) */
};

/* CLOCK_MONOTONIC in microseconds: the clock lyhd's --timing uses too. */
uint64_t cli_mono_us(void);

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
/* One call on the open connection c (30 s timeout); a refusal at connect
 * (one frame, then the daemon closes) is read as the answer. Prints nothing.
 * 0 with resp->code set (OK or the daemon's error), or the transport -errno.
 * resp is caller-allocated. */
int cli_call(struct lyh_client *c, lianyaohu_v1_Request *req, lianyaohu_v1_Response *resp);

/* One unary call of method (a lianyaohu_v1_Request_*_tag, set here) on a
 * connection of its own, whose answer must carry result (a
 * lianyaohu_v1_Response_*_tag). req: the request with its fields filled, or
 * NULL for a method that has none. Prints transport errors, the daemon's
 * refusal, and "PROG: the daemon answered without WHAT" to stderr. Returns an
 * exit code; on EXIT_OK only, *ret_resp is the answer (heap; the caller
 * frees it). Blocks up to 30 s. */
int cli_unary(struct cli *cli, lianyaohu_v1_Request *req, pb_size_t method, pb_size_t result,
              const char *what, lianyaohu_v1_Response **ret_resp);

/* Called with each OK response of a stream (the final one too, whatever its
 * result); returns EXIT_OK to go on, else the exit code to stop with. resp is
 * the caller's scratch: valid until the callback returns. */
typedef int (*cli_stream_fn)(const lianyaohu_v1_Response *resp, void *ud);

/* Send req (its method set) on c, or on a connection of its own when c is
 * NULL, and hand each response of that call to fn until the end of the
 * stream. Responses of other calls are skipped. Messages on stderr start with
 * who ("lyh audit query"): transport errors, the daemon's refusal. timeout_ms
 * bounds the wait for each response (< 0: forever). Returns an exit code: the
 * daemon's refusal as cli_unary's, a transport failure EXIT_UNAVAILABLE, or
 * what fn returned. */
int cli_stream(struct cli *cli, struct lyh_client *c, const char *who, lianyaohu_v1_Request *req,
               int timeout_ms, cli_stream_fn fn, void *ud);

/* Parse the options of a command that takes only [--json] [--help]. Returns
 * -1 to go on (with *json set), or the exit code to return now. */
int cli_json_only(struct cli *cli, int argc, char **argv, const char *name, void (*usage)(FILE *),
                  bool *json);

/* Parse a destination RULE for option opt (--allow-dest, --deny-dest,
 * --lan-allow) and append it to arr (count < max). Prints why on failure. */
int cli_add_rule(const char *opt, const char *text, lianyaohu_v1_DestRule *arr, pb_size_t *count,
                 size_t max);
/* r (valid) as a DestRule message. */
struct dr_rule;
void cli_dest_msg(const struct dr_rule *r, lianyaohu_v1_DestRule *d);

/* "WHO: the socket at PATH accepted the connection but closed it without an
 * answer (an ssh forward ...)": the peer closed before answering anything. */
void cli_say_closed(const struct cli *cli, const char *who);

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
/* The full-screen editor of the config files (config_ui.c); the caller made
 * sure stdin and stdout are terminals. Returns an exit code. */
int config_edit(void);
int cmd_status(struct cli *cli, int argc, char **argv);
void usage_status(FILE *f);
int cmd_doctor(struct cli *cli, int argc, char **argv);
void usage_doctor(FILE *f);
int cmd_attach(struct cli *cli, int argc, char **argv);
void usage_attach(FILE *f);
int cmd_ls(struct cli *cli, int argc, char **argv);
void usage_ls(FILE *f);
int cmd_kill(struct cli *cli, int argc, char **argv);
void usage_kill(FILE *f);
/* Attach this terminal to uid's background session name (cmd_attach.c),
 * following Ctrl-\ n/p to the others. Returns the exit code: the agent's
 * status when it ended while attached (*ended set; 125 when lyhd could not
 * tell it), EXIT_OK when detached, else lyh's own. */
int hold_attach_session(uid_t uid, const char *name, bool read_only, bool *ended);

#endif
