/* lyh audit query|follow|summary|export: read the daemon's audit log.
 *
 * This file owns the option grammar of the four subcommands, the streaming
 * calls (AuditQuery, AuditFollow) and what is printed; the parsing of each
 * value and the rendering of each event live in audit_fmt.c, which is pure
 * and unit-tested. It decides nothing about access: the daemon shows a
 * non-admin only their own records whatever the filter says.
 *
 * Memory stays bounded however long the log: events are printed as they
 * arrive, and the summary keeps one counter pair per distinct destination,
 * capped at AUDIT_FMT_SUM_MAX_DESTS. */
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/audit_fmt.h"
#include "cli/cli.h"
#include "cli/audit_names.h"
#include "common/dns_name.h"
#include "common/macros.h"

/* Between two responses of a query: generous, since a selective filter over a
 * large log can keep the daemon searching for a while. */
#define AUDIT_RECV_TIMEOUT_MS 120000
/* follow shows this many existing records first unless --limit or --since
 * says otherwise (like tail -f). */
#define FOLLOW_DEFAULT_BACKLOG 10

enum {
    OPT_SINCE = 1u << 0,
    OPT_UNTIL = 1u << 1,
    OPT_SESSION = 1u << 2,
    OPT_UID = 1u << 3,
    OPT_VERDICT = 1u << 4,
    OPT_DST = 1u << 5,
    OPT_PORT = 1u << 6,
    OPT_PROTO = 1u << 7,
    OPT_KIND = 1u << 8,
    OPT_LIMIT = 1u << 9,
    OPT_JSON = 1u << 10,
    OPT_CSV = 1u << 11,
    OPT_HELP = 1u << 12,
    OPT_NAME = 1u << 13,
    OPT_BY_NAME = 1u << 14,
};
#define OPT_FILTERS                                                                           \
    (OPT_SINCE | OPT_UNTIL | OPT_SESSION | OPT_UID | OPT_VERDICT | OPT_DST | OPT_PORT |      \
     OPT_PROTO | OPT_KIND)

enum out_format { OUT_TABLE, OUT_JSON, OUT_CSV };

struct audit_opts {
    lianyaohu_v1_AuditQueryRequest q; /* the filter as sent */
    unsigned given;                   /* OPT_* seen */
    enum out_format out;
    char name[DNS_PATTERN_MAX];       /* --name: canonical pattern, "" none */
};

struct sub {
    const char *name;
    unsigned opts;
    int (*run)(struct cli *cli, struct audit_opts *o);
    const char *synopsis;
    const char *about;
};

/* ---- usage ----------------------------------------------------------------------- */

static const struct {
    unsigned opt;
    const char *text;
} opt_help[] = {
    {OPT_SINCE, "  --since WHEN          records at or after WHEN\n"},
    {OPT_UNTIL, "  --until WHEN          records before WHEN\n"},
    {OPT_SESSION, "  --session ID          one session: its id or a unique prefix of it\n"},
    {OPT_UID, "  --uid UID|USER        records about this user (others' need admin)\n"},
    {OPT_VERDICT, "  --verdict allowed|denied\n"},
    {OPT_DST, "  --dst ADDR[/PREFIX]   destination address or network (10.0.0.0/8, fd00::/8)\n"},
    {OPT_PORT, "  --port N[-M]          destination port or range (1-65535)\n"},
    {OPT_PROTO, "  --proto P             tcp, udp, icmp, icmpv6, sctp, udplite or 1-255\n"},
    {OPT_KIND, "  --kind K              flow, session, policy, request, gap, guard or dns\n"},
    {OPT_NAME, "  --name NAME|*.NAME    DNS queries of that name and flows to what it resolved\n"
               "                        to (*.NAME: names below NAME, not NAME itself)\n"},
    {OPT_BY_NAME, "  --by-name             count per DNS name (queries, and flows to what it\n"
                  "                        resolved to) instead of per destination; --name NAME\n"
                  "                        or *.NAME counts only those names\n"},
    {OPT_LIMIT, "  --limit N             only the newest N matching records (oldest first)\n"},
    {OPT_JSON, "  --json                JSON Lines, one object per record\n"},
    {OPT_CSV, "  --csv                 CSV (RFC 4180) with a header row\n"},
    {OPT_HELP, "  --help                this help\n"},
};

static const char time_help[] =
    "WHEN is a duration back from now (30s, 15m, 2h, 7d, 1w, 1h30m), an RFC 3339 time\n"
    "(2026-12-01T10:00:00Z, 2026-12-01T10:00:00+01:00, or local time without a zone:\n"
    "2026-12-01 10:00, 2026-12-01), a unix time (@1733000000), or 0 for the beginning.\n";

static int run_query(struct cli *cli, struct audit_opts *o);
static int run_follow(struct cli *cli, struct audit_opts *o);
static int run_summary(struct cli *cli, struct audit_opts *o);
static int run_export(struct cli *cli, struct audit_opts *o);

static const struct sub subs[] = {
    {"query", OPT_FILTERS | OPT_NAME | OPT_LIMIT | OPT_JSON | OPT_CSV | OPT_HELP, run_query,
     "lyh audit query [FILTERS] [--limit N] [--json|--csv]",
     "Print the audit records that match, oldest first (all of them without --limit).\n"},
    {"follow", (OPT_FILTERS & ~OPT_UNTIL) | OPT_NAME | OPT_LIMIT | OPT_JSON | OPT_HELP, run_follow,
     "lyh audit follow [FILTERS] [--limit N] [--json]",
     "Print the newest matching records (10; with --since all since then; --limit N: N;\n"
     "--limit 0: none), then each new one as it is logged, until interrupted (Ctrl-C).\n"},
    {"summary", (OPT_FILTERS & ~OPT_KIND) | OPT_BY_NAME | OPT_NAME | OPT_JSON | OPT_HELP,
     run_summary, "lyh audit summary [FILTERS] [--by-name [--name NAME|*.NAME]] [--json]",
     "Count flow records per destination (address, port, protocol), allowed and denied,\n"
     "busiest first. At most 100000 distinct destinations are listed. With --by-name:\n"
     "per DNS name, its queries (denied: refused by the allowlist or policy; failed: no\n"
     "answer from the resolver) and the flows to what it resolved to; at most 20000\n"
     "names are listed.\n"},
    {"export", OPT_FILTERS | OPT_JSON | OPT_HELP, run_export,
     "lyh audit export --since WHEN [FILTERS]",
     "Write every matching record as JSON Lines (the --json format) to stdout. --since\n"
     "is required; --since 0 exports the whole log. --json is accepted and changes nothing.\n"},
};

static void usage_sub(FILE *f, const struct sub *s) {
    fprintf(f, "Usage: %s\n%s\n", s->synopsis, s->about);
    for (size_t i = 0; i < ARRAY_SIZE(opt_help); i++)
        if (s->opts & opt_help[i].opt)
            fputs(opt_help[i].text, f);
    fprintf(f, "\n%s", time_help);
}

void usage_audit(FILE *f) {
    fprintf(f, "Usage: lyh audit COMMAND [OPTIONS]\n"
               "Read the audit log: flows allowed and denied, sessions, guards, policy changes,\n"
               "refused requests, and gaps where records were lost.\n\nCommands:\n");
    for (size_t i = 0; i < ARRAY_SIZE(subs); i++)
        fprintf(f, "  %s\n", subs[i].synopsis);
    fprintf(f, "\nFILTERS (not every command takes every one; `lyh audit COMMAND --help`):\n");
    for (size_t i = 0; i < ARRAY_SIZE(opt_help); i++)
        fputs(opt_help[i].text, f);
    fprintf(f, "\n%s", time_help);
    fprintf(f, "Output formats: lyh(1), \"lyh audit\". A non-admin sees only their own\n"
               "records. Exit codes: 0 ok, 1 the daemon refused, 2 usage, 69 no daemon.\n");
}

/* ---- options ----------------------------------------------------------------------- */

static uint64_t now_unix_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A uid, or a user name looked up locally. */
static int parse_uid_or_name(const char *text, uint32_t *ret, char *why, size_t whylen) {
    if (audit_fmt_parse_uid(text, ret, why, whylen) == 0)
        return 0;
    if (text[0] == '\0' || strspn(text, "0123456789") == strlen(text))
        return -EINVAL; /* a number out of range: why says so */
    char buf[4096];
    struct passwd pw, *res = NULL;
    if (getpwnam_r(text, &pw, buf, sizeof(buf), &res) == 0 && res) {
        *ret = (uint32_t)res->pw_uid;
        return 0;
    }
    snprintf(why, whylen, "neither a uid nor a known user name");
    return -EINVAL;
}

/* A value as the user typed it, control bytes escaped (it may be anything). */
static void print_value(FILE *f, const char *v) {
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
}

static int parse_opts(struct cli *cli, const struct sub *s, int argc, char **argv,
                      struct audit_opts *o) {
    static const struct {
        struct option o;
        unsigned bit;
    } table[] = {
        {{"since", required_argument, NULL, 0}, OPT_SINCE},
        {{"until", required_argument, NULL, 0}, OPT_UNTIL},
        {{"session", required_argument, NULL, 0}, OPT_SESSION},
        {{"uid", required_argument, NULL, 0}, OPT_UID},
        {{"verdict", required_argument, NULL, 0}, OPT_VERDICT},
        {{"dst", required_argument, NULL, 0}, OPT_DST},
        {{"port", required_argument, NULL, 0}, OPT_PORT},
        {{"proto", required_argument, NULL, 0}, OPT_PROTO},
        {{"kind", required_argument, NULL, 0}, OPT_KIND},
        {{"name", required_argument, NULL, 0}, OPT_NAME},
        {{"by-name", no_argument, NULL, 0}, OPT_BY_NAME},
        {{"limit", required_argument, NULL, 0}, OPT_LIMIT},
        {{"json", no_argument, NULL, 0}, OPT_JSON},
        {{"csv", no_argument, NULL, 0}, OPT_CSV},
        {{"help", no_argument, NULL, 0}, OPT_HELP},
    };
    struct option longopts[ARRAY_SIZE(table) + 1];
    const char *since_text = NULL, *until_text = NULL;
    uint64_t now = now_unix_us();
    uint16_t port_min = 0, port_max = 0;
    char why[AUDIT_FMT_WHY_MAX];
    int c, idx;

    for (size_t i = 0; i < ARRAY_SIZE(table); i++)
        longopts[i] = table[i].o;
    memset(&longopts[ARRAY_SIZE(table)], 0, sizeof(longopts[0]));
    memset(o, 0, sizeof(*o));

    opterr = 0;
    optind = 1;
    while ((idx = -1, c = getopt_long(argc, argv, "+:", longopts, &idx)) != -1) {
        if (c == '?') {
            char hint[96];
            cli_option_hint(argv[optind - 1], longopts, hint, sizeof(hint));
            fprintf(stderr, "%s audit %s: unknown option '%s'%s (see lyh audit %s --help)\n",
                    cli->prog, s->name, argv[optind - 1], hint, s->name);
            return EXIT_USAGE;
        }
        if (c == ':') {
            fprintf(stderr, "%s audit %s: option '%s' needs a value\n", cli->prog, s->name,
                    argv[optind - 1]);
            return EXIT_USAGE;
        }
        const char *flag = table[idx].o.name;
        unsigned bit = table[idx].bit;
        if (!(s->opts & bit)) {
            fprintf(stderr, "%s audit %s: --%s is not an option of %s (see lyh audit %s --help)\n",
                    cli->prog, s->name, flag, s->name, s->name);
            return EXIT_USAGE;
        }
        if (bit == OPT_HELP) {
            usage_sub(stdout, s);
            return EXIT_OK;
        }
        if (o->given & bit) {
            fprintf(stderr, "%s audit %s: --%s is given twice\n", cli->prog, s->name, flag);
            return EXIT_USAGE;
        }
        o->given |= bit;

        int r = 0;
        switch (bit) {
        case OPT_SINCE:
            since_text = optarg;
            r = audit_fmt_parse_time(optarg, now, &o->q.since_unix_us, why, sizeof(why));
            break;
        case OPT_UNTIL:
            until_text = optarg;
            r = audit_fmt_parse_time(optarg, now, &o->q.until_unix_us, why, sizeof(why));
            if (r == 0 && o->q.until_unix_us == 0) {
                snprintf(why, sizeof(why),
                         "the beginning of the log: nothing is before it; omit --until for "
                         "no upper bound");
                r = -EINVAL;
            }
            break;
        case OPT_SESSION:
            r = audit_fmt_parse_session(optarg, o->q.session_id, sizeof(o->q.session_id), why,
                                        sizeof(why));
            break;
        case OPT_UID:
            r = parse_uid_or_name(optarg, &o->q.uid, why, sizeof(why));
            o->q.has_uid = r == 0;
            break;
        case OPT_VERDICT: r = audit_fmt_parse_verdict(optarg, &o->q.verdict, why, sizeof(why)); break;
        case OPT_DST: r = audit_fmt_parse_dst(optarg, &o->q.dst, why, sizeof(why)); break;
        case OPT_PORT: r = audit_fmt_parse_port(optarg, &port_min, &port_max, why, sizeof(why)); break;
        case OPT_PROTO: r = audit_fmt_parse_proto(optarg, &o->q.protocol, why, sizeof(why)); break;
        case OPT_KIND: r = audit_fmt_parse_kind(optarg, &o->q.kind, why, sizeof(why)); break;
        case OPT_NAME:
            /* lyhd filters (so --limit counts matches); lyh again, for an
             * older lyhd that does not know the field */
            r = dn_pattern_check(optarg, o->name, why, sizeof(why));
            snprintf(o->q.name, sizeof(o->q.name), "%s", r == 0 ? o->name : "");
            break;
        case OPT_LIMIT:
            /* follow --limit 0: no backlog, only what is logged from now on. */
            if (s->run == run_follow && strcmp(optarg, "0") == 0)
                o->q.limit = 0;
            else
                r = audit_fmt_parse_limit(optarg, &o->q.limit, why, sizeof(why));
            break;
        case OPT_JSON: o->out = OUT_JSON; break;
        case OPT_CSV: o->out = OUT_CSV; break;
        case OPT_BY_NAME: break;
        }
        if (r < 0) {
            fprintf(stderr, "%s audit %s: --%s '", cli->prog, s->name, flag);
            print_value(stderr, optarg);
            fprintf(stderr, "': %s\n", why);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s audit %s: unexpected argument '%s'\n", cli->prog, s->name,
                argv[optind]);
        return EXIT_USAGE;
    }
    if (s->run == run_summary && (o->given & OPT_NAME) && !(o->given & OPT_BY_NAME)) {
        fprintf(stderr, "%s audit summary: --name counts per name: add --by-name\n", cli->prog);
        return EXIT_USAGE;
    }
    if ((o->given & OPT_JSON) && (o->given & OPT_CSV)) {
        fprintf(stderr, "%s audit %s: --json and --csv exclude each other\n", cli->prog, s->name);
        return EXIT_USAGE;
    }
    if ((o->given & OPT_SINCE) && (o->given & OPT_UNTIL) &&
        o->q.since_unix_us >= o->q.until_unix_us) {
        fprintf(stderr, "%s audit %s: --since %s is not before --until %s\n", cli->prog, s->name,
                since_text, until_text);
        return EXIT_USAGE;
    }
    if (o->given & (OPT_DST | OPT_PORT)) {
        o->q.has_dst = true; /* addr stays empty with --port alone: any address */
        o->q.dst.port_min = port_min;
        o->q.dst.port_max = port_max;
    }
    return -1;
}

/* ---- the stream ----------------------------------------------------------------------- */

/* Called per event; returns EXIT_OK to go on, else the exit code to stop with. */
typedef int (*event_fn)(const lianyaohu_v1_AuditEvent *ev, void *ud);

struct event_sink {
    event_fn fn;
    void *ud;
};

static int on_response(const lianyaohu_v1_Response *resp, void *ud) {
    const struct event_sink *s = ud;

    if (resp->which_result != lianyaohu_v1_Response_audit_event_tag)
        return EXIT_OK;
    return s->fn(&resp->result.audit_event, s->ud);
}

/* Send req on c (NULL: a connection of its own) and hand each AuditEvent of
 * its stream to fn until the final response. Prints why on failure; returns
 * an exit code. */
static int audit_stream(struct cli *cli, const char *sub, struct lyh_client *c,
                        lianyaohu_v1_Request *req, int timeout_ms, event_fn fn, void *ud) {
    struct event_sink s = {fn, ud};
    char who[64];

    snprintf(who, sizeof(who), "%s audit %s", cli->prog, sub);
    return cli_stream(cli, c, who, req, timeout_ms, on_response, &s);
}

/* ---- printing records --------------------------------------------------------------------- */

struct printer {
    struct cli *cli;
    const char *sub;
    const char *name; /* --name pattern, NULL: all */
    enum out_format out;
    bool flush; /* after each line (follow) */
    uint64_t n;
    char line[AUDIT_FMT_LINE_MAX];
};

static int print_event(const lianyaohu_v1_AuditEvent *ev, void *ud) {
    struct printer *p = ud;
    int r;

    if (p->name && !dn_detail_has(ev->detail, p->name))
        return EXIT_OK;

    switch (p->out) {
    case OUT_JSON: r = audit_fmt_json_line(ev, p->line, sizeof(p->line)); break;
    case OUT_CSV: r = audit_fmt_csv_line(ev, p->line, sizeof(p->line)); break;
    default: r = audit_fmt_table_line(ev, p->line, sizeof(p->line)); break;
    }
    if (r < 0) { /* cannot happen: AUDIT_FMT_LINE_MAX covers every event */
        fprintf(stderr, "%s audit %s: record %llu does not fit a line\n", p->cli->prog, p->sub,
                (unsigned long long)ev->id);
        return EXIT_DAEMON_ERROR;
    }
    if (p->n == 0 && p->out == OUT_CSV)
        printf("%s\r\n", audit_fmt_csv_header());
    fputs(p->line, stdout);
    fputs(p->out == OUT_CSV ? "\r\n" : "\n", stdout);
    if (p->flush)
        fflush(stdout);
    if (ferror(stdout)) {
        fprintf(stderr, "%s audit %s: writing to stdout failed: %s\n", p->cli->prog, p->sub,
                strerror(errno));
        return EXIT_DAEMON_ERROR;
    }
    p->n++;
    return EXIT_OK;
}

static int finish_output(struct printer *p, int rc) {
    if (fflush(stdout) != 0 && rc == EXIT_OK) {
        fprintf(stderr, "%s audit %s: writing to stdout failed: %s\n", p->cli->prog, p->sub,
                strerror(errno));
        return EXIT_DAEMON_ERROR;
    }
    return rc;
}

static int print_records(struct cli *cli, const char *sub, struct audit_opts *o, bool follow) {
    _cleanup_free_ lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    _cleanup_free_ struct printer *p = calloc(1, sizeof(*p));
    int rc;

    if (!req || !p)
        return EXIT_DAEMON_ERROR;
    p->cli = cli;
    p->sub = sub;
    p->name = o->name[0] ? o->name : NULL;
    p->out = o->out;
    p->flush = follow;
    if (follow) {
        req->which_method = lianyaohu_v1_Request_audit_follow_tag;
        req->method.audit_follow.has_filter = true;
        req->method.audit_follow.filter = o->q;
    } else {
        req->which_method = lianyaohu_v1_Request_audit_query_tag;
        req->method.audit_query = o->q;
    }
    rc = audit_stream(cli, sub, NULL, req, follow ? -1 : AUDIT_RECV_TIMEOUT_MS, print_event, p);
    if (rc == EXIT_OK && p->n == 0 && p->out == OUT_CSV)
        printf("%s\r\n", audit_fmt_csv_header()); /* a valid, empty table */
    rc = finish_output(p, rc);
    if (rc == EXIT_OK && p->n == 0 && p->out == OUT_TABLE && !follow)
        fprintf(stderr, "%s audit %s: no matching records\n", cli->prog, sub);
    return rc;
}

static int run_query(struct cli *cli, struct audit_opts *o) {
    return print_records(cli, "query", o, false);
}

/* lyhd's follow sends the newest `limit` matches first and none with limit 0
 * (then everything new). So: no --limit means 10, or with --since every
 * match since then; --limit 0 passes "none" through. */
static int run_follow(struct cli *cli, struct audit_opts *o) {
    if (!(o->given & OPT_LIMIT))
        o->q.limit = (o->given & OPT_SINCE) ? UINT32_MAX : FOLLOW_DEFAULT_BACKLOG;
    return print_records(cli, "follow", o, true);
}

static int run_export(struct cli *cli, struct audit_opts *o) {
    if (!(o->given & OPT_SINCE)) {
        fprintf(stderr, "%s audit export: --since is required, e.g. --since 7d or "
                        "--since 2026-12-01 (--since 0 exports the whole log)\n",
                cli->prog);
        return EXIT_USAGE;
    }
    o->out = OUT_JSON;
    return print_records(cli, "export", o, false);
}

/* ---- summary ------------------------------------------------------------------------------ */

struct sum_ctx {
    struct cli *cli;
    const lianyaohu_v1_AuditQueryRequest *q; /* the selection */
    struct audit_fmt_sum sum;
    uint64_t gaps, missed;
};

static int sum_event(const lianyaohu_v1_AuditEvent *ev, void *ud) {
    struct sum_ctx *s = ud;

    if (audit_fmt_sum_add(&s->sum, ev) < 0) {
        fprintf(stderr, "%s audit summary: out of memory after %zu destinations\n", s->cli->prog,
                s->sum.n);
        return EXIT_DAEMON_ERROR;
    }
    return EXIT_OK;
}

/* A gap of another session or user than the selection did not hide any of
 * its flows; a gap about no session or no user may have. */
static int gap_event(const lianyaohu_v1_AuditEvent *ev, void *ud) {
    struct sum_ctx *s = ud;
    const lianyaohu_v1_AuditQueryRequest *q = s->q;

    /* the selection may name its session by a prefix (lyhd found it unique) */
    if (q->session_id[0] && ev->session_id[0] &&
        strncmp(q->session_id, ev->session_id, strlen(q->session_id)) != 0)
        return EXIT_OK;
    if (q->has_uid && ev->has_uid && q->uid != ev->uid)
        return EXIT_OK;
    uint64_t n = audit_fmt_gap_flows(ev, q->since_unix_us, q->until_unix_us);
    if (n) {
        s->gaps++;
        s->missed += n;
    }
    return EXIT_OK;
}

/* ---- summary per name ---------------------------------------------------------------------- */

struct names_ctx {
    struct cli *cli;
    struct audit_names t;
    const char *pattern;
};

static int names_event(const lianyaohu_v1_AuditEvent *ev, void *ud) {
    struct names_ctx *n = ud;
    if (audit_names_add(&n->t, ev, n->pattern) < 0) {
        fprintf(stderr, "%s audit summary: out of memory after %zu names\n", n->cli->prog, n->t.n);
        return EXIT_DAEMON_ERROR;
    }
    return EXIT_OK;
}

static int run_summary_names(struct cli *cli, struct audit_opts *o) {
    _cleanup_free_ lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    char line[512];
    struct names_ctx n = {.cli = cli, .pattern = o->name[0] ? o->name : NULL};
    struct lyh_client *c = NULL;
    bool json = o->out == OUT_JSON;
    int rc = EXIT_OK;

    if (!req || audit_names_init(&n.t, AUDIT_NAMES_MAX) < 0) {
        fprintf(stderr, "%s audit summary: out of memory\n", cli->prog);
        return EXIT_DAEMON_ERROR;
    }
    rc = cli_connect(cli, &c);
    /* the queries (kind dns), then the flows (their records carry names=) */
    static const lianyaohu_v1_EventKind kinds[] = {lianyaohu_v1_EventKind_EVENT_KIND_DNS,
                                                   lianyaohu_v1_EventKind_EVENT_KIND_FLOW};
    for (size_t k = 0; k < ARRAY_SIZE(kinds) && rc == EXIT_OK; k++) {
        memset(req, 0, sizeof(*req));
        req->which_method = lianyaohu_v1_Request_audit_query_tag;
        req->method.audit_query = o->q;
        req->method.audit_query.kind = kinds[k];
        rc = audit_stream(cli, "summary", c, req, AUDIT_RECV_TIMEOUT_MS, names_event, &n);
    }
    if (rc == EXIT_OK) {
        const struct audit_name *v;
        size_t cnt;
        audit_names_sort(&n.t, &v, &cnt);
        if (!json)
            printf("%s\n", audit_names_header());
        for (size_t i = 0; i < cnt; i++)
            if ((json ? audit_names_json_line(&v[i], line, sizeof(line))
                      : audit_names_table_line(&v[i], line, sizeof(line))) == 0)
                printf("%s\n", line);
        FILE *notes = json ? stderr : stdout;
        if (!json)
            printf("%llu dns records, %llu flow records with names, %zu names\n",
                   (unsigned long long)n.t.dns, (unsigned long long)n.t.flows, cnt);
        if (n.t.overflow)
            fprintf(notes, "note: more than %u distinct names; %llu counts for further names "
                           "are not listed\n",
                    AUDIT_NAMES_MAX, (unsigned long long)n.t.overflow);
        if (fflush(stdout) != 0) {
            fprintf(stderr, "%s audit summary: writing to stdout failed: %s\n", cli->prog,
                    strerror(errno));
            rc = EXIT_DAEMON_ERROR;
        }
    }
    lyh_client_close(c);
    audit_names_done(&n.t);
    return rc;
}

static int run_summary(struct cli *cli, struct audit_opts *o) {
    if (o->given & OPT_BY_NAME)
        return run_summary_names(cli, o);
    _cleanup_free_ lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    _cleanup_free_ char *line = malloc(AUDIT_FMT_LINE_MAX);
    struct sum_ctx s = {.cli = cli, .q = &o->q};
    struct lyh_client *c = NULL;
    bool json = o->out == OUT_JSON;
    int rc, grc;

    if (!req || !line || audit_fmt_sum_init(&s.sum, AUDIT_FMT_SUM_MAX_DESTS) < 0) {
        fprintf(stderr, "%s audit summary: out of memory\n", cli->prog);
        return EXIT_DAEMON_ERROR;
    }
    rc = cli_connect(cli, &c);
    if (rc != EXIT_OK)
        goto out;

    req->which_method = lianyaohu_v1_Request_audit_query_tag;
    req->method.audit_query = o->q;
    req->method.audit_query.kind = lianyaohu_v1_EventKind_EVENT_KIND_FLOW;
    rc = audit_stream(cli, "summary", c, req, AUDIT_RECV_TIMEOUT_MS, sum_event, &s);
    if (rc != EXIT_OK)
        goto out;

    /* Flows the log lost in the period are in no count: find the gaps. A gap
     * names at most a session and a user, never a destination, so the query
     * takes only the time range and gap_event() applies session and user. */
    memset(req, 0, sizeof(*req));
    req->which_method = lianyaohu_v1_Request_audit_query_tag;
    req->method.audit_query.since_unix_us = o->q.since_unix_us;
    req->method.audit_query.until_unix_us = o->q.until_unix_us;
    req->method.audit_query.kind = lianyaohu_v1_EventKind_EVENT_KIND_GAP;
    grc = audit_stream(cli, "summary", c, req, AUDIT_RECV_TIMEOUT_MS, gap_event, &s);

    const struct audit_fmt_dest *d;
    size_t n;
    audit_fmt_sum_sort(&s.sum, &d, &n);
    if (!json)
        printf("%s\n", audit_fmt_sum_table_header());
    for (size_t i = 0; i < n; i++) {
        int r = json ? audit_fmt_sum_json_line(&d[i], line, AUDIT_FMT_LINE_MAX)
                     : audit_fmt_sum_table_line(&d[i], line, AUDIT_FMT_LINE_MAX);
        if (r == 0)
            printf("%s\n", line);
    }
    /* Notes go to stdout with the table, to stderr beside JSON (which stays
     * one object per destination). */
    FILE *notes = json ? stderr : stdout;
    if (!json)
        printf("%llu flow records, %zu destinations\n", (unsigned long long)s.sum.flows, n);
    if (s.sum.overflow_events)
        fprintf(notes,
                "note: more than %u distinct destinations; %llu flow records (%llu allowed, "
                "%llu denied) to further destinations are counted here but not listed\n",
                AUDIT_FMT_SUM_MAX_DESTS, (unsigned long long)s.sum.overflow_events,
                (unsigned long long)s.sum.overflow_allowed,
                (unsigned long long)s.sum.overflow_denied);
    if (s.sum.other)
        fprintf(notes, "note: %llu flow records without a verdict were not counted\n",
                (unsigned long long)s.sum.other);
    if (s.gaps)
        fprintf(notes,
                "note: %llu gap record(s) of this period say up to %llu flow events are not "
                "in the log (an overrun gap and a session's end gap may count the same ones); "
                "the counts are lower bounds\n",
                (unsigned long long)s.gaps, (unsigned long long)s.missed);
    if (grc != EXIT_OK)
        fprintf(notes, "note: could not check the period for lost records (see above)\n");
    rc = grc;
    if (fflush(stdout) != 0 && rc == EXIT_OK) {
        fprintf(stderr, "%s audit summary: writing to stdout failed: %s\n", cli->prog,
                strerror(errno));
        rc = EXIT_DAEMON_ERROR;
    }
out:
    lyh_client_close(c);
    audit_fmt_sum_done(&s.sum);
    return rc;
}

/* ---- entry --------------------------------------------------------------------------------- */

int cmd_audit(struct cli *cli, int argc, char **argv) {
    if (argc < 2) {
        usage_audit(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage_audit(stdout);
        return EXIT_OK;
    }
    for (size_t i = 0; i < ARRAY_SIZE(subs); i++) {
        if (strcmp(argv[1], subs[i].name) != 0)
            continue;
        struct audit_opts *o = calloc(1, sizeof(*o));
        if (!o)
            return EXIT_DAEMON_ERROR;
        int rc = parse_opts(cli, &subs[i], argc - 1, argv + 1, o);
        if (rc < 0)
            rc = subs[i].run(cli, o);
        free(o);
        return rc;
    }
    fprintf(stderr, "%s audit: unknown command '%s' (query, follow, summary or export)\n\n",
            cli->prog, argv[1]);
    usage_audit(stderr);
    return EXIT_USAGE;
}
