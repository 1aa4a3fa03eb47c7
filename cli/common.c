/* Helpers shared by subcommands: connecting with a useful error, unary calls
 * and streams (the one place that reads lyhd's answers and refusals and
 * turns them into messages and exit codes), JSON output. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/textbuf.h"
#include "common/dest_rule.h"
#include "common/closest.h"
#include "common/macros.h"

uint64_t cli_mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int cli_connect(struct cli *cli, struct lyh_client **ret) {
    int r = lyh_client_connect(cli->socket_path, ret);

    if (r == 0)
        return EXIT_OK;
    if (r == -ENOENT || r == -ECONNREFUSED)
        fprintf(stderr,
                "%s: lyhd is not running (nothing answers on %s).\n"
                "Start it as root with `lyhd` (or `systemctl start lyhd`), or point lyh at\n"
                "another socket with --socket PATH or LYH_SOCKET.\n",
                cli->prog, cli->socket_path);
    else if (r == -EACCES)
        fprintf(stderr, "%s: permission denied connecting to %s\n", cli->prog, cli->socket_path);
    else
        fprintf(stderr, "%s: cannot connect to %s: %s\n", cli->prog, cli->socket_path,
                strerror(-r));
    return EXIT_UNAVAILABLE;
}

void cli_say_closed(const struct cli *cli, const char *who) {
    fprintf(stderr,
            "%s: the socket at %s accepted the connection but closed it without an answer "
            "(an ssh forward whose far end is gone, or whose sshd refuses socket forwarding; "
            "or lyhd stopped)\n",
            who, cli->socket_path);
}

/* A daemon's error code as lyh's exit code: "out of room" and "cannot now"
 * are the daemon being unavailable; every other refusal is its answer. */
static int code_exit(int code) {
    return code == lianyaohu_v1_Code_RESOURCE_EXHAUSTED || code == lianyaohu_v1_Code_UNAVAILABLE
               ? EXIT_UNAVAILABLE
               : EXIT_DAEMON_ERROR;
}

int cli_call(struct lyh_client *c, lianyaohu_v1_Request *req, lianyaohu_v1_Response *resp) {
    memset(resp, 0, sizeof(*resp));
    int r = lyh_client_call(c, req, resp, 30000);
    if (r == -EPIPE || r == -ECONNRESET) {
        /* Refused at connect (one frame, then closed): read the reason. */
        memset(resp, 0, sizeof(*resp));
        if (lyh_client_recv(c, resp, 1000) == 0 && resp->code != lianyaohu_v1_Code_OK)
            r = 0;
    }
    return r;
}

int cli_unary(struct cli *cli, lianyaohu_v1_Request *req, pb_size_t method, pb_size_t result,
              const char *what, lianyaohu_v1_Response **ret_resp) {
    _cleanup_free_ lianyaohu_v1_Request *own = NULL;
    struct lyh_client *c = NULL;
    int rc, r;

    if (!req) {
        req = own = calloc(1, sizeof(*own));
        if (!req)
            return EXIT_DAEMON_ERROR;
    }
    _cleanup_free_ lianyaohu_v1_Response *resp = calloc(1, sizeof(*resp));
    if (!resp)
        return EXIT_DAEMON_ERROR;
    req->which_method = method;
    rc = cli_connect(cli, &c);
    if (rc != EXIT_OK)
        return rc;
    r = cli_call(c, req, resp);
    lyh_client_close(c);
    if (r == -ECONNRESET || r == -EPIPE) {
        cli_say_closed(cli, cli->prog);
        return EXIT_UNAVAILABLE;
    }
    if (r < 0) {
        fprintf(stderr, "%s: call to lyhd on %s failed: %s\n", cli->prog, cli->socket_path,
                strerror(-r));
        return EXIT_UNAVAILABLE;
    }
    if (resp->code != lianyaohu_v1_Code_OK) {
        cli_print_error(cli->prog, resp);
        return code_exit(resp->code);
    }
    if (resp->which_result != result) {
        fprintf(stderr, "%s: the daemon answered without %s\n", cli->prog, what);
        return EXIT_DAEMON_ERROR;
    }
    *ret_resp = TAKE_PTR(resp);
    return EXIT_OK;
}

int cli_stream(struct cli *cli, struct lyh_client *c, const char *who, lianyaohu_v1_Request *req,
               int timeout_ms, cli_stream_fn fn, void *ud) {
    struct lyh_client *own = NULL;
    uint64_t id = 0;
    bool answered = false;
    int r, rc;

    _cleanup_free_ lianyaohu_v1_Response *resp = calloc(1, sizeof(*resp));
    if (!resp)
        return EXIT_DAEMON_ERROR;
    if (!c) {
        rc = cli_connect(cli, &own);
        if (rc != EXIT_OK)
            return rc;
        c = own;
    }
    req->call_id = 0; /* a fresh id per call on this connection */
    r = lyh_client_send(c, req, NULL, 0, &id);
    if (r < 0 && r != -EPIPE && r != -ECONNRESET) {
        fprintf(stderr, "%s: sending the request to lyhd failed: %s\n", who, strerror(-r));
        rc = EXIT_UNAVAILABLE;
        goto out;
    }
    /* After EPIPE the daemon may have refused the connection with one frame
     * (call id 0) and closed it: the loop below reads that reason. */
    for (;;) {
        memset(resp, 0, sizeof(*resp));
        int rr = lyh_client_recv(c, resp, timeout_ms);
        if (rr == -ECONNRESET && !answered) {
            cli_say_closed(cli, who);
            rc = EXIT_UNAVAILABLE;
            break;
        }
        if (rr < 0) {
            fprintf(stderr, "%s: %s\n", who,
                    rr == -ECONNRESET  ? "lyhd closed the connection"
                    : rr == -ETIMEDOUT ? "lyhd did not answer in time"
                    : rr == -EBADMSG   ? "lyhd sent a response this lyh cannot decode"
                                       : strerror(-rr));
            rc = EXIT_UNAVAILABLE;
            break;
        }
        answered = true;
        if (r < 0 && resp->call_id != 0)
            continue;
        if (resp->call_id != id && resp->call_id != 0)
            continue;
        if (resp->code != lianyaohu_v1_Code_OK) {
            cli_print_error(who, resp);
            rc = code_exit(resp->code);
            break;
        }
        if (resp->call_id == 0) {
            fprintf(stderr, "%s: lyhd refused the connection\n", who);
            rc = EXIT_UNAVAILABLE;
            break;
        }
        rc = fn(resp, ud);
        if (rc != EXIT_OK || resp->end_of_stream)
            break;
    }
out:
    lyh_client_close(own);
    return rc;
}

void json_string(FILE *f, const char *s) {
    /* the one JSON escaper (cli/textbuf.c), which `lyh audit --json` uses too */
    size_t cap = sb_json_size(s);
    _cleanup_free_ char *buf = malloc(cap);
    struct sb sb;
    if (!buf || sb_init(&sb, buf, cap) < 0) {
        fputs("\"\"", f); /* out of memory: an empty string, still valid JSON */
        return;
    }
    sb_json(&sb, s);
    fputs(buf, f);
}

int cli_json_only(struct cli *cli, int argc, char **argv, const char *name, void (*usage)(FILE *),
                  bool *json) {
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'}, {0}};
    int c;

    *json = false;
    while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        if (c == 'j') {
            *json = true;
        } else if (c == 'h') {
            usage(stdout);
            return EXIT_OK;
        } else {
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s %s: unexpected argument '%s'\n", cli->prog, name, argv[optind]);
        return EXIT_USAGE;
    }
    return -1;
}

int cli_add_rule(const char *opt, const char *text, lianyaohu_v1_DestRule *arr,
                    pb_size_t *count, size_t max) {
    struct dr_rule r;
    char why[DR_WHY_MAX];

    if (dr_parse(text, &r, why, sizeof(why)) < 0) {
        fprintf(stderr, "lyh: %s %s: %s\n", opt, text, why);
        return -EINVAL;
    }
    if (strcmp(opt, "--lan-allow") == 0 && !dr_in_blocked_ranges(&r)) {
        fprintf(stderr,
                "lyh: --lan-allow %s is not inside a LAN or reserved range; only those are "
                "blocked, so there is nothing to reopen\n",
                text);
        return -EINVAL;
    }
    if (*count >= max) {
        fprintf(stderr, "lyh: too many %s rules (at most %zu)\n", opt, max);
        return -E2BIG;
    }
    cli_dest_msg(&r, &arr[(*count)++]);
    return 0;
}

void cli_dest_msg(const struct dr_rule *r, lianyaohu_v1_DestRule *d) {
    size_t alen = r->family == AF_INET ? 4 : 16;
    memcpy(d->addr.bytes, r->addr, alen);
    d->addr.size = (pb_size_t)alen;
    d->prefix_len = r->prefix_len;
    d->port_min = r->port_min;
    d->port_max = r->port_max;
}


void cli_print_error(const char *who, const lianyaohu_v1_Response *resp) {
    static const char *const plain[] = {
        [lianyaohu_v1_Code_CANCELLED] = "cancelled",
        [lianyaohu_v1_Code_INVALID_ARGUMENT] = "the request is not valid",
        [lianyaohu_v1_Code_DEADLINE_EXCEEDED] = "it took too long",
        [lianyaohu_v1_Code_NOT_FOUND] = "not found",
        [lianyaohu_v1_Code_ALREADY_EXISTS] = "it exists already",
        [lianyaohu_v1_Code_PERMISSION_DENIED] = "not allowed",
        [lianyaohu_v1_Code_RESOURCE_EXHAUSTED] = "lyhd is out of room for it; try again later",
        [lianyaohu_v1_Code_FAILED_PRECONDITION] = "not possible in this state",
        [lianyaohu_v1_Code_ABORTED] = "something changed meanwhile; try again",
        [lianyaohu_v1_Code_UNIMPLEMENTED] = "this lyhd does not know that",
        [lianyaohu_v1_Code_INTERNAL] = "lyhd failed (its log says more)",
        [lianyaohu_v1_Code_UNAVAILABLE] = "lyhd cannot do it now",
    };
    const char *m = resp->message;
    if (!m[0])
        m = resp->code >= 0 && (size_t)resp->code < ARRAY_SIZE(plain) && plain[resp->code]
                ? plain[resp->code]
                : "lyhd refused";
    fprintf(stderr, "%s: %s\n", who, m);
}

void cli_option_hint(const char *arg, const struct option *opts, char *buf, size_t len) {
    buf[0] = '\0';
    if (!arg || strncmp(arg, "--", 2) != 0)
        return;
    char word[64];
    snprintf(word, sizeof(word), "%s", arg + 2);
    word[strcspn(word, "=")] = '\0';
    const char *names[128];
    size_t n = 0;
    for (; opts[n].name && n < 128; n++)
        names[n] = opts[n].name;
    const char *near = closest_word(word, names, n);
    if (near)
        snprintf(buf, len, "; did you mean '--%s'?", near);
}
