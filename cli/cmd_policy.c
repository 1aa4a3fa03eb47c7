/* lyh policy get|set|history|rollback: the admin policy. Reading it is for
 * everyone; set and rollback need root or the admin group (the daemon
 * decides). set reads a TOML file (cli/policy_toml.c) into the typed message. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/policy_toml.h"
#include "common/dest_rule.h"
#include "common/macros.h"

void usage_policy(FILE *f) {
    fprintf(f, "Usage: lyh policy get [--json|--toml]\n"
               "       lyh policy set FILE|- [--expect-version N] [--dry-run] [--json]\n"
               "       lyh policy diff FILE|- [--json]\n"
               "       lyh policy history [--json]\n"
               "       lyh policy rollback VERSION|default [--expect-version N] [--dry-run] [--json]\n"
               "Show the admin policy in force (--toml: as a file `set` reads back), set it\n"
               "from a TOML file (- = stdin; keys in lianyaohu.toml(5); a key left out keeps\n"
               "its built-in default), list every stored version (newest last), or make a\n"
               "stored version current again (a new version with its content; default: the\n"
               "built-in policy's). set and\n"
               "rollback are for root and the admin group.\n"
               "--expect-version N: refuse (ABORTED) unless version N is the current one.\n"
               "--dry-run (set, rollback) and diff change nothing: they say whether a new\n"
               "version would be made, diff the lines of `get --toml` it would change, and\n"
               "both name the running sessions it would narrow or cut (admins only).\n"
               "set and rollback to the content in force make no new version and say so\n"
               "(exit 0; --json: {\"version\":N,\"changed\":false}).\n");
}

static void dest_text(const lianyaohu_v1_DestRule *d, char *buf, size_t len) {
    struct dr_rule r;
    if (dr_from_parts(d->addr.bytes, d->addr.size, d->prefix_len, d->port_min, d->port_max, &r, NULL,
                      0) < 0 ||
        dr_format(&r, buf, len) < 0)
        snprintf(buf, len, "(invalid)");
}


/* "  name<pad> = a b c" then `none` or `some` (by whether count is 0);
 * entries lie stride bytes apart from base, each printed after prefix. */
static void print_list(const char *name, const char *base, size_t stride, pb_size_t count,
                       const char *prefix, const char *none, const char *some) {
    printf("  %-30s =", name);
    for (pb_size_t i = 0; i < count; i++)
        printf(" %s%s", prefix, base + (size_t)i * stride);
    printf("%s\n", count ? some : none);
}
static void print_text(const lianyaohu_v1_PolicyReply *p) {
    const lianyaohu_v1_Policy *m = &p->policy;
    char buf[DR_FORMAT_MAX];

    if (p->version == 0) {
        printf("version 0 (built-in default: no policy has been set)\n");
    } else {
        char when[32] = "?";
        time_t t = (time_t)(p->set_unix_ms / 1000);
        struct tm tm;
        if (localtime_r(&t, &tm))
            strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
        printf("version %" PRIu64 " (set by uid %u at %s)\n", p->version, p->set_by_uid, when);
    }
    printf("  allowed_interface_patterns     =");
    for (pb_size_t i = 0; i < m->allowed_interface_patterns_count; i++)
        printf(" %s", m->allowed_interface_patterns[i]);
    printf("\n  permit_allow_non_default_route = %s\n", m->permit_allow_non_default_route ? "yes" : "no");
    printf("  permit_no_firewall             = %s\n", m->permit_no_firewall ? "yes" : "no");
    printf("  permit_shared_user_firewall    = %s\n", m->permit_shared_user_firewall ? "yes" : "no");
    printf("  forbid_proxy_only              = %s\n", m->forbid_proxy_only ? "yes" : "no");
    printf("  permit_lan_proxy               = %s\n", m->permit_lan_proxy ? "yes" : "no");
    printf("  lan_allow_ceiling              =");
    for (pb_size_t i = 0; i < m->lan_allow_ceiling_count; i++) {
        dest_text(&m->lan_allow_ceiling[i], buf, sizeof(buf));
        printf(" %s", buf);
    }
    printf("%s\n  always_deny                    =", m->lan_allow_ceiling_count ? "" : " (none)");
    for (pb_size_t i = 0; i < m->always_deny_count; i++) {
        dest_text(&m->always_deny[i], buf, sizeof(buf));
        printf(" %s", buf);
    }
    printf("%s\n", m->always_deny_count ? "" : " (none)");
#define LIST(field, prefix, none) \
    print_list(#field, &m->field[0][0], sizeof(m->field[0]), m->field##_count, prefix, none, "")
    LIST(extra_env_block, "", " (none)");
    LIST(writable_prefixes, "", " (no prefix rule)");
    print_list("protect_paths", &m->protect_paths[0][0], sizeof(m->protect_paths[0]),
               m->protect_paths_count, "~/", " (the built-in list)", " (and the built-in list)");
    printf("  forbid_allow_socket            = %s\n", m->forbid_allow_socket ? "yes" : "no");
    LIST(allow_socket_patterns, "", " (any path)");
    LIST(allowed_domains, "", " (no ceiling)");
    LIST(always_deny_domains, "", " (none)");
    LIST(dns_resolvers, "", " (the system's, or the user's --dns)");
#undef LIST
    printf("  log_allowed_flows              = %s\n", m->log_allowed_flows ? "yes" : "no");
    if (m->max_sessions_per_uid)
        printf("  max_sessions_per_uid           = %u\n", m->max_sessions_per_uid);
    else
        printf("  max_sessions_per_uid           = 0 (no limit)\n");
    printf("  audit_retention_days           = %u%s\n", m->audit_retention_days,
           m->audit_retention_days ? "" : " (lyhd's --audit-max-age-days)");
    printf("  audit_max_bytes                = %" PRIu64 "%s\n", m->audit_max_bytes,
           m->audit_max_bytes ? "" : " (lyhd's --audit-max-mb)");
    printf("  min_landlock_abi               = %u%s\n", m->min_landlock_abi,
           m->min_landlock_abi ? "" : " (the built-in 6: abstract sockets and signals scoped)");
}

static void json_dests(const lianyaohu_v1_DestRule *v, pb_size_t n) {
    char buf[DR_FORMAT_MAX];
    printf("[");
    for (pb_size_t i = 0; i < n; i++) {
        dest_text(&v[i], buf, sizeof(buf));
        printf("%s", i ? "," : "");
        json_string(stdout, buf);
    }
    printf("]");
}

static void json_strings(const char *v, size_t stride, pb_size_t n) {
    printf("[");
    for (pb_size_t i = 0; i < n; i++) {
        printf("%s", i ? "," : "");
        json_string(stdout, v + i * stride);
    }
    printf("]");
}

static void print_json(const lianyaohu_v1_PolicyReply *p) {
    const lianyaohu_v1_Policy *m = &p->policy;
    printf("{\"version\":%" PRIu64 ",\"set_by_uid\":%u,\"set_unix_ms\":%" PRIu64 ",\"policy\":{",
           p->version, p->set_by_uid, p->set_unix_ms);
    printf("\"allowed_interface_patterns\":");
    json_strings(&m->allowed_interface_patterns[0][0], sizeof(m->allowed_interface_patterns[0]),
                 m->allowed_interface_patterns_count);
    printf(",\"permit_allow_non_default_route\":%s,\"permit_no_firewall\":%s,"
           "\"permit_shared_user_firewall\":%s",
           m->permit_allow_non_default_route ? "true" : "false",
           m->permit_no_firewall ? "true" : "false", m->permit_shared_user_firewall ? "true" : "false");
    printf(",\"forbid_proxy_only\":%s,\"permit_lan_proxy\":%s,\"lan_allow_ceiling\":",
           m->forbid_proxy_only ? "true" : "false", m->permit_lan_proxy ? "true" : "false");
    json_dests(m->lan_allow_ceiling, m->lan_allow_ceiling_count);
    printf(",\"always_deny\":");
    json_dests(m->always_deny, m->always_deny_count);
    printf(",\"extra_env_block\":");
    json_strings(&m->extra_env_block[0][0], sizeof(m->extra_env_block[0]), m->extra_env_block_count);
    printf(",\"writable_prefixes\":");
    json_strings(&m->writable_prefixes[0][0], sizeof(m->writable_prefixes[0]),
                 m->writable_prefixes_count);
    printf(",\"protect_paths\":");
    json_strings(&m->protect_paths[0][0], sizeof(m->protect_paths[0]), m->protect_paths_count);
    printf(",\"forbid_allow_socket\":%s,\"allow_socket_patterns\":",
           m->forbid_allow_socket ? "true" : "false");
    json_strings(&m->allow_socket_patterns[0][0], sizeof(m->allow_socket_patterns[0]),
                 m->allow_socket_patterns_count);
    printf(",\"allowed_domains\":");
    json_strings(&m->allowed_domains[0][0], sizeof(m->allowed_domains[0]),
                 m->allowed_domains_count);
    printf(",\"always_deny_domains\":");
    json_strings(&m->always_deny_domains[0][0], sizeof(m->always_deny_domains[0]),
                 m->always_deny_domains_count);
    printf(",\"dns_resolvers\":");
    json_strings(&m->dns_resolvers[0][0], sizeof(m->dns_resolvers[0]), m->dns_resolvers_count);
    printf(",\"log_allowed_flows\":%s,\"max_sessions_per_uid\":%u,\"audit_retention_days\":%u,"
           "\"audit_max_bytes\":%" PRIu64 ",\"min_landlock_abi\":%u}}\n",
           m->log_allowed_flows ? "true" : "false", m->max_sessions_per_uid,
           m->audit_retention_days, m->audit_max_bytes, m->min_landlock_abi);
}

static void print_reply(const lianyaohu_v1_PolicyReply *p, bool json) {
    if (json)
        print_json(p);
    else
        print_text(p);
}

static int policy_get(struct cli *cli, int argc, char **argv) {
    bool json = false, toml = argc == 2 && strcmp(argv[1], "--toml") == 0;
    int rc = toml ? -1 : cli_json_only(cli, argc, argv, "policy get", usage_policy, &json);
    if (rc >= 0)
        return rc;
    _cleanup_free_ lianyaohu_v1_Response *resp = NULL;
    rc = cli_unary(cli, NULL, lianyaohu_v1_Request_policy_get_tag, lianyaohu_v1_Response_policy_tag,
                   "a policy", &resp);
    if (rc != EXIT_OK)
        return rc;
    if (toml) {
        printf("# lianyaohu admin policy, version %" PRIu64 "\n", resp->result.policy.version);
        policy_print_toml(stdout, &resp->result.policy.policy);
    } else {
        print_reply(&resp->result.policy, json);
    }
    return EXIT_OK;
}

struct history {
    bool json;
    int n;
};

static int history_version(const lianyaohu_v1_Response *resp, void *ud) {
    struct history *h = ud;

    if (resp->which_result == lianyaohu_v1_Response_policy_tag) {
        if (h->n++ && !h->json)
            printf("\n");
        print_reply(&resp->result.policy, h->json);
    }
    return EXIT_OK;
}

static int policy_history(struct cli *cli, int argc, char **argv) {
    struct history h = {0};
    int rc = cli_json_only(cli, argc, argv, "policy history", usage_policy, &h.json);
    if (rc >= 0)
        return rc;
    _cleanup_free_ lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    if (!req)
        return EXIT_DAEMON_ERROR;
    req->which_method = lianyaohu_v1_Request_policy_history_tag;
    char who[64];
    snprintf(who, sizeof(who), "%s policy history", cli->prog);
    rc = cli_stream(cli, NULL, who, req, 30000, history_version, &h);
    if (rc != EXIT_OK)
        return rc;
    if (!h.json && h.n == 0)
        printf("(no policy has been set: version 0, the built-in default, is in force)\n");
    return EXIT_OK;
}

static int parse_version(const char *what, const char *s, uint64_t *ret) {
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !end || *end || s[0] == '-' || s[0] == '\0') {
        fprintf(stderr, "lyh policy: %s '%s' is not a version number\n", what, s);
        return -1;
    }
    *ret = v;
    return 0;
}

/* The options of set and rollback: one argument and [--expect-version N]
 * (*ret_has says whether it was given: 0 is a version too, the built-in
 * default's). Returns an exit code to return now, or -1 with *ret_arg set. */
static int one_arg_and_expect(int argc, char **argv, const char **ret_arg, uint64_t *ret_expect,
                              bool *ret_has, bool *ret_json, bool *ret_dry) {
    static const struct option opts[] = {
        {"expect-version", required_argument, NULL, 'e'},
        {"json", no_argument, NULL, 'j'},
        {"dry-run", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    int c;

    /* Options may follow the argument: optind 0 makes glibc's getopt start
     * over in its permuting mode (main() parsed with "+"). */
    optind = 0;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'e':
            if (parse_version("--expect-version", optarg, ret_expect) < 0)
                return EXIT_USAGE;
            *ret_has = true;
            break;
        case 'j': *ret_json = true; break;
        case 'n': *ret_dry = true; break;
        case 'h': usage_policy(stdout); return EXIT_OK;
        default: usage_policy(stderr); return EXIT_USAGE;
        }
    }
    if (optind + 1 != argc) {
        usage_policy(stderr);
        return EXIT_USAGE;
    }
    *ret_arg = argv[optind];
    return -1;
}

/* The PolicyUpdate call of set and rollback (req carries the new content),
 * with their --expect-version. Returns an exit code; the answer in *ret_resp. */
static int policy_update(struct cli *cli, lianyaohu_v1_Request *req, bool has_expect,
                         uint64_t expect, lianyaohu_v1_Response **ret_resp) {
    if (has_expect) {
        req->method.policy_update.which_expect = lianyaohu_v1_PolicyUpdateRequest_expect_version_tag;
        req->method.policy_update.expect.expect_version = expect;
    }
    return cli_unary(cli, req, lianyaohu_v1_Request_policy_update_tag,
                     lianyaohu_v1_Response_policy_tag, "a policy", ret_resp);
}

/* What a set or rollback did: a new version, or none (the content was in
 * force already). */
static int update_said(const lianyaohu_v1_PolicyReply *p, bool json) {
    if (json)
        printf("{\"version\":%" PRIu64 ",\"changed\":%s}\n", p->version,
               p->unchanged ? "false" : "true");
    else if (p->unchanged)
        printf("policy version %" PRIu64 " is already in force with this content; nothing "
               "changed\n",
               p->version);
    else
        printf("policy version %" PRIu64 " is now in force\n", p->version);
    return EXIT_OK;
}

/* Two renderings of a policy, line by line (diff). */
struct diff_lines {
    const char *a, *b; /* the one in force, the one asked for */
};

/* Is line (len bytes) one of text's lines? */
static bool has_line(const char *text, const char *line, size_t len) {
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        if (l == len && memcmp(p, line, len) == 0)
            return true;
        p = nl ? nl + 1 : NULL;
    }
    return false;
}

/* Each line of from that to lacks, as "SIGN line" (JSON: a string of a list). */
static void diff_side(const char *from, const char *to, const char *sign, bool json, bool *first) {
    for (const char *p = from; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        if (l && p[0] != '#' && !has_line(to, p, l)) {
            char line[600];
            snprintf(line, sizeof(line), "%.*s", (int)(l < 590 ? l : 590), p);
            if (json) {
                fputs(*first ? "" : ",", stdout);
                json_string(stdout, line);
                *first = false;
            } else {
                printf("%s %s\n", sign, line);
            }
        }
        p = nl ? nl + 1 : NULL;
    }
}

/* What a dry run answered: whether anything would change, the lines (diff),
 * and the sessions it would narrow or cut. */
static int dry_said(const lianyaohu_v1_PolicyReply *p, bool json, const struct diff_lines *dl) {
    if (json) {
        printf("{\"version\":%" PRIu64 ",\"changed\":%s", p->version,
               p->unchanged ? "false" : "true");
        if (dl) {
            bool first = true;
            printf(",\"removed\":[");
            diff_side(dl->a, dl->b, "-", true, &first);
            first = true;
            printf("],\"added\":[");
            diff_side(dl->b, dl->a, "+", true, &first);
            printf("]");
        }
        printf(",\"effects\":[");
        for (pb_size_t i = 0; i < p->effects_count; i++) {
            const lianyaohu_v1_PolicyEffect *e = &p->effects[i];
            printf("%s{\"session\":", i ? "," : "");
            json_string(stdout, e->session_id);
            printf(",\"chain\":");
            json_string(stdout, e->chain);
            printf(",\"uid\":%" PRIu32 ",\"cut\":%s,\"why\":", e->uid, e->cut ? "true" : "false");
            json_string(stdout, e->why);
            printf("}");
        }
        printf("]}\n");
        return EXIT_OK;
    }
    if (p->unchanged) {
        printf("nothing would change: policy version %" PRIu64 " is in force with this content\n",
               p->version);
        return EXIT_OK;
    }
    if (dl) {
        bool first = true;
        diff_side(dl->a, dl->b, "-", false, &first);
        diff_side(dl->b, dl->a, "+", false, &first);
    }
    printf("would replace policy version %" PRIu64 " (nothing was changed)\n", p->version);
    if (!p->effects_count)
        printf("running sessions: none would be narrowed or cut\n");
    for (pb_size_t i = 0; i < p->effects_count; i++) {
        const lianyaohu_v1_PolicyEffect *e = &p->effects[i];
        char what[128];
        if (e->session_id[0])
            snprintf(what, sizeof(what), "session %.16s of uid %" PRIu32, e->session_id, e->uid);
        else
            snprintf(what, sizeof(what), "firewall %.63s of uid %" PRIu32, e->chain, e->uid);
        printf("  %s %s: %s\n", e->cut ? "cut:     " : "narrowed:", what, e->why);
    }
    return EXIT_OK;
}

static int policy_rollback(struct cli *cli, int argc, char **argv) {
    uint64_t to = 0, expect = 0;
    bool has_expect = false;
    const char *arg = NULL;
    bool json = false, dry = false;
    int rc = one_arg_and_expect(argc, argv, &arg, &expect, &has_expect, &json, &dry);

    if (rc >= 0)
        return rc;
    bool builtin = strcmp(arg, "default") == 0;
    if (!builtin && (parse_version("VERSION", arg, &to) < 0 || to == 0)) {
        if (to == 0)
            fprintf(stderr, "lyh policy rollback: VERSION must be a stored version (1 or more), "
                            "or default (the built-in policy)\n");
        return EXIT_USAGE;
    }
    _cleanup_free_ lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    _cleanup_free_ lianyaohu_v1_Response *resp = NULL;
    if (!req)
        return EXIT_DAEMON_ERROR;
    req->method.policy_update.rollback_to = to;
    req->method.policy_update.rollback_to_default = builtin;
    req->method.policy_update.dry_run = dry;
    rc = policy_update(cli, req, has_expect, expect, &resp);
    if (rc != EXIT_OK)
        return rc;
    if (dry)
        return dry_said(&resp->result.policy, json, NULL);
    if (json || resp->result.policy.unchanged)
        return update_said(&resp->result.policy, json);
    if (builtin)
        printf("policy version %" PRIu64 " is now in force (the built-in default)\n",
               resp->result.policy.version);
    else
        printf("policy version %" PRIu64 " is now in force (the content of version %" PRIu64
               ")\n",
               resp->result.policy.version, to);
    return EXIT_OK;
}

/* The whole file (or stdin), at most POLICY_FILE_MAX bytes; a bigger one is
 * refused rather than cut. */
static int read_input(const char *path, char **ret, size_t *ret_len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "re");
    if (!f)
        return -errno;
    _cleanup_free_ char *buf = malloc(POLICY_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, POLICY_FILE_MAX + 1, f) : 0;
    int err = buf ? (ferror(f) ? -EIO : 0) : -ENOMEM;
    if (f != stdin)
        fclose(f);
    if (err < 0)
        return err;
    if (n > POLICY_FILE_MAX)
        return -EFBIG;
    *ret = TAKE_PTR(buf);
    *ret_len = n;
    return 0;
}

/* The file's policy asked of lyhd as a dry run (diff) or set (dry: as a
 * dry run). 0 with *ret_resp, or an exit code. */
static int set_from_file(struct cli *cli, const char *who, const char *path, bool has_expect,
                         uint64_t expect, bool dry, lianyaohu_v1_Response **ret_resp) {
    const char *name = strcmp(path, "-") == 0 ? "<stdin>" : path;
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = read_input(path, &buf, &len);
    if (r < 0) {
        fprintf(stderr, "%s %s: %s: %s\n", cli->prog, who, name,
                r == -EFBIG ? "larger than 256 KiB; a policy file is small" : strerror(-r));
        return EXIT_USAGE;
    }
    _cleanup_free_ lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    char err[512];
    if (!req)
        return EXIT_DAEMON_ERROR;
    r = policy_from_toml(name, buf, len, &req->method.policy_update.policy, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "%s %s: %s\n", cli->prog, who, err);
        return EXIT_USAGE;
    }
    req->method.policy_update.has_policy = true;
    req->method.policy_update.dry_run = dry;
    return policy_update(cli, req, has_expect, expect, ret_resp);
}

/* lyh policy diff FILE [--json]: the lines of `policy get --toml` that the
 * file would change, and what it would do to running sessions (a dry run:
 * lyhd checks the file and normalizes it; nothing changes). */
static int policy_diff(struct cli *cli, int argc, char **argv) {
    uint64_t expect = 0;
    bool has_expect = false, json = false, dry = true;
    const char *path = NULL;
    int rc = one_arg_and_expect(argc, argv, &path, &expect, &has_expect, &json, &dry);
    if (rc >= 0)
        return rc;
    _cleanup_free_ lianyaohu_v1_Response *cur = NULL, *next = NULL;
    rc = cli_unary(cli, NULL, lianyaohu_v1_Request_policy_get_tag,
                   lianyaohu_v1_Response_policy_tag, "a policy", &cur);
    if (rc != EXIT_OK)
        return rc;
    rc = set_from_file(cli, "policy diff", path, has_expect, expect, true, &next);
    if (rc != EXIT_OK)
        return rc;
    _cleanup_free_ char *a = NULL, *b = NULL;
    size_t al = 0, bl = 0;
    FILE *fa = open_memstream(&a, &al), *fb = open_memstream(&b, &bl);
    if (!fa || !fb) {
        if (fa)
            fclose(fa);
        if (fb)
            fclose(fb);
        return EXIT_DAEMON_ERROR;
    }
    policy_print_toml(fa, &cur->result.policy.policy);
    policy_print_toml(fb, &next->result.policy.policy);
    fclose(fa);
    fclose(fb);
    struct diff_lines dl = {.a = a, .b = b};
    return dry_said(&next->result.policy, json, &dl);
}

static int policy_set(struct cli *cli, int argc, char **argv) {
    uint64_t expect = 0;
    bool has_expect = false;
    const char *path = NULL;
    bool json = false, dry = false;
    int orc = one_arg_and_expect(argc, argv, &path, &expect, &has_expect, &json, &dry);

    if (orc >= 0)
        return orc;
    _cleanup_free_ lianyaohu_v1_Response *resp = NULL;
    int rc = set_from_file(cli, "policy set", path, has_expect, expect, dry, &resp);
    if (rc != EXIT_OK)
        return rc;
    if (dry)
        return dry_said(&resp->result.policy, json, NULL);
    return update_said(&resp->result.policy, json);
}

int cmd_policy(struct cli *cli, int argc, char **argv) {
    if (argc < 2) {
        usage_policy(stderr);
        return EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0) {
        usage_policy(stdout);
        return EXIT_OK;
    }
    /* The subcommand's own options start after its name. */
    if (strcmp(sub, "get") == 0)
        return policy_get(cli, argc - 1, argv + 1);
    if (strcmp(sub, "set") == 0)
        return policy_set(cli, argc - 1, argv + 1);
    if (strcmp(sub, "history") == 0)
        return policy_history(cli, argc - 1, argv + 1);
    if (strcmp(sub, "rollback") == 0)
        return policy_rollback(cli, argc - 1, argv + 1);
    if (strcmp(sub, "diff") == 0)
        return policy_diff(cli, argc - 1, argv + 1);
    fprintf(stderr, "lyh policy: unknown subcommand '%s'\n", sub);
    usage_policy(stderr);
    return EXIT_USAGE;
}
