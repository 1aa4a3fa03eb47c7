/* Rendering audit events: the table, JSON Lines and CSV forms, the one-line
 * `lyh run --monitor` form and the per-destination summary. Owns no state:
 * pure functions over their arguments (plus the process time zone for local
 * times), no I/O, no logging, no allocation except the summary table's
 * slots. The option parsers are audit_parse.c.
 *
 * Why the renderers are safe to point at a terminal: the strings in an event
 * come, in the end, from other users (a session's argv0 and cwd end up in the
 * detail) and from the daemon's peers, and an admin reads every user's
 * records. The table and monitor forms therefore pass only printable ASCII and
 * valid UTF-8 through, and write control bytes, C1 controls, invalid bytes and
 * the bidi overrides (which can make text read backwards) as escapes, so a
 * record can neither move the cursor nor disguise what it says. JSON escapes
 * per RFC 8259 and replaces invalid UTF-8 with U+FFFD, so every line is valid
 * JSON whatever the bytes; CSV quotes per RFC 4180 and passes bytes through
 * (a CSV reader, not a terminal, is its consumer). */
#include "cli/audit_fmt.h"
#include "cli/textbuf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/dest_rule.h"
#include "common/macros.h"
#include "common/why.h"

#define US_PER_S 1000000ull

/* The worst case per input byte is 6 output bytes (JSON \u00XX or \ufffd;
 * the table's \xNN is 4); the strings of an event plus a generous 1 KiB for
 * keys, numbers, addresses and padding must fit a line. */
_Static_assert((sizeof(((lianyaohu_v1_AuditEvent *)0)->detail) +
                sizeof(((lianyaohu_v1_AuditEvent *)0)->session_id) +
                sizeof(((lianyaohu_v1_AuditEvent *)0)->action) +
                sizeof(((lianyaohu_v1_AuditEvent *)0)->interface)) * 6 + 1024 <=
                   AUDIT_FMT_LINE_MAX,
               "AUDIT_FMT_LINE_MAX too small for the nanopb bounds of AuditEvent");

/* ---- pieces of an event ---------------------------------------------------------------- */

static bool is_flow(const lianyaohu_v1_AuditEvent *ev) {
    return ev->kind == lianyaohu_v1_EventKind_EVENT_KIND_FLOW;
}

/* Gaps lyhd writes for records that did exist: retention removed them
 * ("retention": missed counts records of any kind, removed), or the request
 * rate limit did not write them ("requests": request records, not flows). */
static bool is_gap_action(const lianyaohu_v1_AuditEvent *ev, const char *action) {
    return ev->kind == lianyaohu_v1_EventKind_EVENT_KIND_GAP && strcmp(ev->action, action) == 0;
}

static bool addr_text(const uint8_t *a, size_t n, char out[INET6_ADDRSTRLEN]) {
    if (n == 4)
        return inet_ntop(AF_INET, a, out, INET6_ADDRSTRLEN) != NULL;
    if (n == 16)
        return inet_ntop(AF_INET6, a, out, INET6_ADDRSTRLEN) != NULL;
    return false;
}

/* "10.0.0.1:53", "[fd00::1]:53", "10.0.0.1" (no port), "?" (no address). */
static void sb_endpoint(struct sb *s, const uint8_t *a, size_t n, uint32_t port) {
    char t[INET6_ADDRSTRLEN];

    if (!addr_text(a, n, t)) {
        sb_putc(s, '?');
        if (port)
            sb_printf(s, ":%u", port);
        return;
    }
    if (port == 0)
        sb_puts(s, t);
    else if (n == 16)
        sb_printf(s, "[%s]:%u", t, port);
    else
        sb_printf(s, "%s:%u", t, port);
}

static void sb_proto(struct sb *s, uint32_t proto) {
    const char *name = audit_fmt_proto_name(proto);
    if (name)
        sb_puts(s, name);
    else
        sb_printf(s, "%u", proto);
}

static const char *verdict_name(int v) {
    switch (v) {
    case lianyaohu_v1_Verdict_VERDICT_ALLOWED: return "allowed";
    case lianyaohu_v1_Verdict_VERDICT_DENIED: return "denied";
    default: return NULL;
    }
}

/* Local "YYYY-MM-DD HH:MM:SS.mmm" (with_date) or "HH:MM:SS". */
static void sb_local_time(struct sb *s, uint64_t us, bool with_date) {
    time_t t = (time_t)(us / US_PER_S);
    struct tm tm;
    char out[64];

    if (!localtime_r(&t, &tm) ||
        strftime(out, sizeof(out), with_date ? "%Y-%m-%d %H:%M:%S" : "%H:%M:%S", &tm) == 0) {
        sb_printf(s, "@%llu", (unsigned long long)(us / US_PER_S));
        return;
    }
    sb_puts(s, out);
    if (with_date)
        sb_printf(s, ".%03u", (unsigned)(us % US_PER_S / 1000));
}

/* RFC 3339 UTC with microseconds. */
static bool utc_time(uint64_t us, char out[40]) {
    time_t t = (time_t)(us / US_PER_S);
    struct tm tm;
    char base[32];

    if (!gmtime_r(&t, &tm) || strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        return false;
    snprintf(out, 40, "%s.%06uZ", base, (unsigned)(us % US_PER_S));
    return true;
}

/* ---- table ------------------------------------------------------------------------------ */

enum {
    W_KIND = 7,
    W_VERDICT = 8,
    W_SESSION = 18, /* "s:" + 16 hex */
    W_UID = 9,      /* "uid 65534" */
    W_PROTO = 7,
    W_FLOW = 47, /* "255.255.255.255:65535 -> 255.255.255.255:65535" is 45 */
};

static void sb_detail_extra(struct sb *s, const lianyaohu_v1_AuditEvent *ev);

int audit_fmt_table_line(const lianyaohu_v1_AuditEvent *ev, char *buf, size_t len) {
    struct sb s;
    size_t col;
    int r = sb_init(&s, buf, len);

    if (r < 0)
        return r;
    sb_local_time(&s, ev->time_unix_us, true);
    sb_gap(&s, 2);

    col = sb_mark(&s);
    const char *kn = audit_fmt_kind_name(ev->kind);
    if (kn)
        sb_puts(&s, kn);
    else
        sb_printf(&s, "kind%d", (int)ev->kind);
    sb_pad(&s, col, W_KIND);
    sb_gap(&s, 2);

    col = sb_mark(&s);
    if (is_flow(ev)) {
        const char *vn = verdict_name(ev->verdict);
        if (vn)
            sb_puts(&s, vn);
        else
            sb_printf(&s, "verdict%d", (int)ev->verdict);
    } else if (ev->action[0]) {
        sb_safe(&s, ev->action);
    } else {
        sb_putc(&s, '-');
    }
    sb_pad(&s, col, W_VERDICT);
    sb_gap(&s, 2);

    col = sb_mark(&s);
    if (ev->session_id[0]) {
        sb_puts(&s, "s:");
        sb_safe(&s, ev->session_id);
    } else {
        sb_putc(&s, '-');
    }
    sb_pad(&s, col, W_SESSION);
    sb_gap(&s, 2);

    col = sb_mark(&s);
    if (ev->has_uid)
        sb_printf(&s, "uid %u", ev->uid);
    else
        sb_puts(&s, "uid -");
    sb_pad(&s, col, W_UID);
    sb_gap(&s, 2);

    if (is_flow(ev)) {
        col = sb_mark(&s);
        sb_proto(&s, ev->protocol);
        sb_pad(&s, col, W_PROTO);
        sb_gap(&s, 2);
        col = sb_mark(&s);
        sb_endpoint(&s, ev->src_addr.bytes, ev->src_addr.size, ev->src_port);
        sb_puts(&s, " -> ");
        sb_endpoint(&s, ev->dst_addr.bytes, ev->dst_addr.size, ev->dst_port);
        sb_pad(&s, col, W_FLOW);
        sb_gap(&s, 2);
        if (ev->interface[0])
            sb_safe(&s, ev->interface);
        else
            sb_putc(&s, '-');
        if (ev->detail[0]) { /* the names its destination was resolved from */
            sb_gap(&s, 2);
            sb_safe(&s, ev->detail);
        }
    } else {
        if (ev->kind == lianyaohu_v1_EventKind_EVENT_KIND_GAP || ev->missed)
            sb_printf(&s, "%s=%llu%s", is_gap_action(ev, "retention") ? "removed" : "missed",
                      (unsigned long long)ev->missed, ev->detail[0] ? " " : "");
        sb_safe(&s, ev->detail);
        sb_detail_extra(&s, ev);
    }
    return sb_finish(&s);
}

static bool has_counters(const lianyaohu_v1_AuditEvent *ev) {
    if (ev->allowed_packets || ev->allowed_bytes || ev->denied_packets || ev->denied_bytes)
        return true;
    return ev->kind == lianyaohu_v1_EventKind_EVENT_KIND_SESSION &&
           strcmp(ev->action, "end") == 0;
}

/* The counters of a session end, after its detail, in the detail's key=value
 * style and with the JSON names. */
static void sb_detail_extra(struct sb *s, const lianyaohu_v1_AuditEvent *ev) {
    if (!has_counters(ev))
        return;
    if (s->pending == 0 && s->pos > 0 && s->buf[s->pos - 1] != ' ')
        sb_putc(s, ' ');
    sb_printf(s, "allowed_packets=%llu allowed_bytes=%llu ",
              (unsigned long long)ev->allowed_packets, (unsigned long long)ev->allowed_bytes);
    sb_printf(s, "denied_packets=%llu denied_bytes=%llu", (unsigned long long)ev->denied_packets,
              (unsigned long long)ev->denied_bytes);
}

/* ---- JSON and CSV: one record model, two spellings ---------------------------------------- */

enum vtype { V_ABSENT = 0, V_NULL, V_STR, V_UINT };
struct val {
    enum vtype t;
    const char *s;
    uint64_t u;
};

enum {
    F_ID, F_TIME, F_TIME_US, F_KIND, F_ACTION, F_SESSION, F_UID, F_VERDICT, F_FAMILY, F_PROTOCOL,
    F_SRC, F_DST, F_SPORT, F_DPORT, F_INTERFACE, F_DETAIL, F_APKT, F_ABYTES, F_DPKT, F_DBYTES,
    F_MISSED, F_COUNT
};

static const char *const field_names[F_COUNT] = {
    "id", "time", "time_unix_us", "kind", "action", "session", "uid", "verdict", "family",
    "protocol", "src", "dst", "sport", "dport", "interface", "detail", "allowed_packets",
    "allowed_bytes", "denied_packets", "denied_bytes", "missed",
};

struct rec {
    struct val v[F_COUNT];
    char time[40];
    char src[INET6_ADDRSTRLEN];
    char dst[INET6_ADDRSTRLEN];
};

static struct val vstr(const char *s) { return (struct val){.t = V_STR, .s = s}; }
static struct val vuint(uint64_t u) { return (struct val){.t = V_UINT, .u = u}; }
static struct val vnull(void) { return (struct val){.t = V_NULL}; }

/* Which keys a record has (docs/audit.md, "JSON Lines"): the common keys
 * always; for a flow every flow key, null or 0 when unset; for other kinds a
 * flow key only when set, the four counters for a session end (or when any is
 * set), and missed for a gap (or when set). */
static void build_rec(const lianyaohu_v1_AuditEvent *ev, struct rec *r) {
    bool flow = is_flow(ev);
    const char *name;

    memset(r, 0, sizeof(*r));
    r->v[F_ID] = vuint(ev->id);
    r->v[F_TIME] = utc_time(ev->time_unix_us, r->time) ? vstr(r->time) : vnull();
    r->v[F_TIME_US] = vuint(ev->time_unix_us);
    name = audit_fmt_kind_name(ev->kind);
    r->v[F_KIND] = name ? vstr(name) : vuint((uint64_t)ev->kind);
    r->v[F_ACTION] = vstr(ev->action);
    r->v[F_SESSION] = ev->session_id[0] ? vstr(ev->session_id) : vnull();
    r->v[F_UID] = ev->has_uid ? vuint(ev->uid) : vnull();
    r->v[F_DETAIL] = vstr(ev->detail);

    if (flow || ev->verdict) {
        name = verdict_name(ev->verdict);
        r->v[F_VERDICT] = name ? vstr(name) : ev->verdict ? vuint((uint64_t)ev->verdict) : vnull();
    }
    if (flow || ev->family) {
        r->v[F_FAMILY] = ev->family == AF_INET    ? vstr("ipv4")
                         : ev->family == AF_INET6 ? vstr("ipv6")
                         : ev->family             ? vuint(ev->family)
                                                  : vnull();
    }
    if (flow || ev->protocol) {
        name = audit_fmt_proto_name(ev->protocol);
        r->v[F_PROTOCOL] = name ? vstr(name) : vuint(ev->protocol);
    }
    if (flow || ev->src_addr.size)
        r->v[F_SRC] = addr_text(ev->src_addr.bytes, ev->src_addr.size, r->src) ? vstr(r->src)
                                                                                : vnull();
    if (flow || ev->dst_addr.size)
        r->v[F_DST] = addr_text(ev->dst_addr.bytes, ev->dst_addr.size, r->dst) ? vstr(r->dst)
                                                                                : vnull();
    if (flow || ev->src_port)
        r->v[F_SPORT] = vuint(ev->src_port);
    if (flow || ev->dst_port)
        r->v[F_DPORT] = vuint(ev->dst_port);
    if (flow || ev->interface[0])
        r->v[F_INTERFACE] = vstr(ev->interface);
    if (!flow && has_counters(ev)) {
        r->v[F_APKT] = vuint(ev->allowed_packets);
        r->v[F_ABYTES] = vuint(ev->allowed_bytes);
        r->v[F_DPKT] = vuint(ev->denied_packets);
        r->v[F_DBYTES] = vuint(ev->denied_bytes);
    }
    if (!flow && (ev->kind == lianyaohu_v1_EventKind_EVENT_KIND_GAP || ev->missed))
        r->v[F_MISSED] = vuint(ev->missed);
}

int audit_fmt_json_line(const lianyaohu_v1_AuditEvent *ev, char *buf, size_t len) {
    struct sb s;
    struct rec r;
    bool first = true;
    int e = sb_init(&s, buf, len);

    if (e < 0)
        return e;
    build_rec(ev, &r);
    sb_putc(&s, '{');
    for (size_t i = 0; i < F_COUNT; i++) {
        const struct val *v = &r.v[i];
        if (v->t == V_ABSENT)
            continue;
        if (!first)
            sb_putc(&s, ',');
        first = false;
        sb_printf(&s, "\"%s\":", field_names[i]);
        switch (v->t) {
        case V_NULL: sb_puts(&s, "null"); break;
        case V_STR: sb_json(&s, v->s); break;
        case V_UINT: sb_printf(&s, "%llu", (unsigned long long)v->u); break;
        case V_ABSENT: break;
        }
    }
    sb_putc(&s, '}');
    return sb_finish(&s);
}

const char *audit_fmt_csv_header(void) {
    return "id,time,time_unix_us,kind,action,session,uid,verdict,family,protocol,src,dst,sport,"
           "dport,interface,detail,allowed_packets,allowed_bytes,denied_packets,denied_bytes,"
           "missed";
}

int audit_fmt_csv_line(const lianyaohu_v1_AuditEvent *ev, char *buf, size_t len) {
    struct sb s;
    struct rec r;
    int e = sb_init(&s, buf, len);

    if (e < 0)
        return e;
    build_rec(ev, &r);
    for (size_t i = 0; i < F_COUNT; i++) {
        const struct val *v = &r.v[i];
        if (i > 0)
            sb_putc(&s, ',');
        if (v->t == V_STR)
            sb_csv(&s, v->s);
        else if (v->t == V_UINT)
            sb_printf(&s, "%llu", (unsigned long long)v->u);
    }
    return sb_finish(&s);
}

/* ---- monitor ----------------------------------------------------------------------------- */

#define V4(a, b, c, d, p) {.family = AF_INET, .addr = {a, b, c, d}, .prefix_len = p}
#define V6(p, ...) {.family = AF_INET6, .addr = {__VA_ARGS__}, .prefix_len = p}

/* Names for the blocked ranges a user meets most; any other blocked range
 * (common/dest_rule.c holds the one definition) is a "reserved address". */
static const struct {
    struct dr_rule net;
    const char *why;
} addr_reasons[] = {
    {V4(127, 0, 0, 0, 8), "loopback"},
    {V4(169, 254, 0, 0, 16), "link-local address"},
    {V4(10, 0, 0, 0, 8), "LAN address"},
    {V4(172, 16, 0, 0, 12), "LAN address"},
    {V4(192, 168, 0, 0, 16), "LAN address"},
    {V4(100, 64, 0, 0, 10), "LAN address (carrier-grade NAT range)"},
    {V4(224, 0, 0, 0, 4), "multicast"},
    {V6(128, [15] = 1), "loopback"},
    {V6(10, 0xfe, 0x80), "link-local address"},
    {V6(7, 0xfc), "LAN address"},
    {V6(8, 0xff), "multicast"},
    {V6(96, [10] = 0xff, [11] = 0xff), "IPv4-mapped address"},
};

static const char *addr_reason(const uint8_t *a, size_t n) {
    struct dr_rule host = {0};

    if (n != 4 && n != 16)
        return NULL;
    host.family = n == 4 ? AF_INET : AF_INET6;
    host.prefix_len = (uint8_t)(n * 8);
    memcpy(host.addr, a, n);
    for (size_t i = 0; i < ARRAY_SIZE(addr_reasons); i++)
        if (dr_contains(&addr_reasons[i].net, &host))
            return addr_reasons[i].why;
    return dr_in_blocked_ranges(&host) ? "reserved address" : NULL;
}

/* The value of key `key` in a detail of space-separated key=value pairs
 * (values with spaces in double quotes), copied into out; false if absent. */
static bool detail_value(const char *detail, const char *key, char *out, size_t outlen) {
    size_t kl = strlen(key);
    const char *p = detail;

    while (*p) {
        while (*p == ' ')
            p++;
        const char *tok = p;
        bool quoted = false;
        /* skip this pair, minding quotes */
        while (*p && (quoted || *p != ' ')) {
            if (*p == '"')
                quoted = !quoted;
            else if (*p == '\\' && quoted && p[1])
                p++;
            p++;
        }
        if ((size_t)(p - tok) > kl && strncmp(tok, key, kl) == 0 && tok[kl] == '=') {
            const char *v = tok + kl + 1, *end = p;
            if (*v == '"' && end - v >= 2 && end[-1] == '"') {
                v++;
                end--;
            }
            size_t n = (size_t)(end - v);
            if (n == 0 || outlen == 0)
                return false;
            if (n >= outlen)
                n = outlen - 1;
            memcpy(out, v, n);
            out[n] = '\0';
            return true;
        }
    }
    return false;
}

uint64_t audit_fmt_gap_flows(const lianyaohu_v1_AuditEvent *ev, uint64_t since_us,
                             uint64_t until_us) {
    char v[64];
    uint64_t n = 0, oldest = 0, newest = 0;

    if (ev->kind != lianyaohu_v1_EventKind_EVENT_KIND_GAP)
        return 0;
    if (strcmp(ev->action, "requests") == 0)
        return 0; /* refused requests, not flows */
    if (strcmp(ev->action, "retention") != 0)
        return ev->missed;
    /* Retention: only its flow records, and only when what it removed
     * overlaps the period (the gap is dated when it was written). */
    if (!detail_value(ev->detail, "flow", v, sizeof(v)) || audit_fmt_parse_u64(v, strlen(v), UINT64_MAX, &n) < 0)
        return 0;
    if (detail_value(ev->detail, "oldest", v, sizeof(v)) &&
        detail_value(ev->detail, "newest", v + 32, sizeof(v) - 32)) {
        char why[64];
        if (audit_fmt_parse_time(v, 0, &oldest, why, sizeof(why)) < 0 ||
            audit_fmt_parse_time(v + 32, 0, &newest, why, sizeof(why)) < 0)
            return n; /* cannot tell: count it (an upper bound) */
        if ((until_us && oldest >= until_us) || newest < since_us)
            return 0;
    }
    return n;
}

int audit_fmt_monitor_line_ctx(const lianyaohu_v1_AuditEvent *ev,
                               const struct audit_fmt_monitor_ctx *ctx, char *buf, size_t len) {
    struct sb s;
    int r = sb_init(&s, buf, len);

    if (r < 0)
        return r;
    sb_local_time(&s, ev->time_unix_us, false);
    sb_putc(&s, ' ');
    if (!is_flow(ev)) {
        const char *kn = audit_fmt_kind_name(ev->kind);
        if (ev->kind == lianyaohu_v1_EventKind_EVENT_KIND_GAP) {
            sb_printf(&s,
                      is_gap_action(ev, "retention") ? "gap: %llu records removed by retention"
                      : is_gap_action(ev, "requests") ? "gap: %llu request records were not logged"
                                                      : "gap: %llu flow events were not logged",
                      (unsigned long long)ev->missed);
            if (ev->detail[0]) {
                sb_puts(&s, " (");
                sb_safe(&s, ev->detail);
                sb_putc(&s, ')');
            }
            return sb_finish(&s);
        }
        if (kn)
            sb_puts(&s, kn);
        else
            sb_printf(&s, "kind%d", (int)ev->kind);
        if (ev->action[0]) {
            sb_putc(&s, ' ');
            sb_safe(&s, ev->action);
        }
        if (ev->detail[0]) {
            sb_putc(&s, ' ');
            sb_safe(&s, ev->detail);
        }
        return sb_finish(&s);
    }

    const char *vn = verdict_name(ev->verdict);
    sb_puts(&s, vn ? vn : "flow");
    sb_putc(&s, ' ');
    sb_proto(&s, ev->protocol);
    sb_putc(&s, ' ');
    sb_endpoint(&s, ev->dst_addr.bytes, ev->dst_addr.size, ev->dst_port);
    if (ev->verdict != lianyaohu_v1_Verdict_VERDICT_DENIED)
        return sb_finish(&s);

    char given[256];
    const char *why = addr_reason(ev->dst_addr.bytes, ev->dst_addr.size);
    sb_puts(&s, " (");
    if (why) {
        sb_puts(&s, why);
    } else if (detail_value(ev->detail, "why", given, sizeof(given)) ||
               detail_value(ev->detail, "reason", given, sizeof(given))) {
        sb_safe(&s, given);
    } else if (detail_value(ev->detail, "dns", given, sizeof(given)) &&
               strcmp(given, "none") == 0) {
        sb_puts(&s, "no allowed name resolved to it in this session");
    } else if (detail_value(ev->detail, "dns", given, sizeof(given)) &&
               strcmp(given, "expired") == 0) {
        char names[200] = "", ago[32] = "";
        detail_value(ev->detail, "names", names, sizeof(names));
        detail_value(ev->detail, "expired_s_ago", ago, sizeof(ago));
        sb_puts(&s, "the mapping for ");
        sb_safe(&s, names);
        sb_puts(&s, " expired ");
        sb_safe(&s, ago);
        sb_puts(&s, " s ago");
    } else if (ctx && ctx->ipv6_blocked && ev->dst_addr.size == 16) {
        sb_puts(&s, "IPv6 blocked");
    } else if (ctx && ctx->vpn && ev->interface[0] && strcmp(ctx->vpn, ev->interface) != 0) {
        sb_puts(&s, "not via the VPN interface: ");
        sb_safe(&s, ev->interface);
    } else if (!(ctx && ctx->vpn) && ev->interface[0]) {
        sb_puts(&s, "policy deny or not via the VPN; out ");
        sb_safe(&s, ev->interface);
    } else {
        sb_puts(&s, "policy deny");
    }
    sb_putc(&s, ')');
    return sb_finish(&s);
}

int audit_fmt_monitor_line(const lianyaohu_v1_AuditEvent *ev, char *buf, size_t len) {
    return audit_fmt_monitor_line_ctx(ev, NULL, buf, len);
}

/* ---- summary ------------------------------------------------------------------------------- */

#define SUM_MIN_SLOTS 1024u

int audit_fmt_sum_init(struct audit_fmt_sum *s, size_t max_dests) {
    if (max_dests == 0 || max_dests > SIZE_MAX / 4 / sizeof(struct audit_fmt_dest))
        return -EINVAL;
    *s = (struct audit_fmt_sum){.max_dests = max_dests};
    s->slots = calloc(SUM_MIN_SLOTS, sizeof(*s->slots));
    if (!s->slots)
        return -ENOMEM;
    s->n_slots = SUM_MIN_SLOTS;
    return 0;
}

void audit_fmt_sum_done(struct audit_fmt_sum *s) {
    if (!s)
        return;
    free(s->slots);
    s->slots = NULL;
    s->n_slots = s->n = 0;
}

static bool dest_key_eq(const struct audit_fmt_dest *a, const struct audit_fmt_dest *b) {
    return a->addr_len == b->addr_len && a->family == b->family && a->protocol == b->protocol &&
           a->port == b->port && memcmp(a->addr, b->addr, a->addr_len) == 0;
}

/* FNV-1a over the key fields. */
static uint64_t dest_hash(const struct audit_fmt_dest *d) {
    uint64_t h = 1469598103934665603ull;
    uint8_t key[16 + 13];
    size_t n = 0;

    key[n++] = d->addr_len;
    memcpy(key + n, d->addr, d->addr_len);
    n += d->addr_len;
    memcpy(key + n, &d->family, 4);
    n += 4;
    memcpy(key + n, &d->protocol, 4);
    n += 4;
    memcpy(key + n, &d->port, 4);
    n += 4;
    for (size_t i = 0; i < n; i++)
        h = (h ^ key[i]) * 1099511628211ull;
    return h;
}

/* The slot holding key, or the empty slot where it belongs. */
static struct audit_fmt_dest *sum_find(struct audit_fmt_dest *slots, size_t n_slots,
                                       const struct audit_fmt_dest *key) {
    size_t i = (size_t)dest_hash(key) & (n_slots - 1);
    while (slots[i].used && !dest_key_eq(&slots[i], key))
        i = (i + 1) & (n_slots - 1);
    return &slots[i];
}

static int sum_grow(struct audit_fmt_sum *s) {
    size_t n = s->n_slots * 2;
    struct audit_fmt_dest *slots = calloc(n, sizeof(*slots));

    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].used)
            *sum_find(slots, n, &s->slots[i]) = s->slots[i];
    free(s->slots);
    s->slots = slots;
    s->n_slots = n;
    return 0;
}

int audit_fmt_sum_add(struct audit_fmt_sum *s, const lianyaohu_v1_AuditEvent *ev) {
    struct audit_fmt_dest key = {.used = 1};
    bool allowed = ev->verdict == lianyaohu_v1_Verdict_VERDICT_ALLOWED;

    if (!is_flow(ev))
        return 0;
    if (!allowed && ev->verdict != lianyaohu_v1_Verdict_VERDICT_DENIED) {
        s->other++;
        return 0;
    }
    key.addr_len = ev->dst_addr.size == 4 || ev->dst_addr.size == 16 ? (uint8_t)ev->dst_addr.size
                                                                       : 0;
    memcpy(key.addr, ev->dst_addr.bytes, key.addr_len);
    key.family = ev->family;
    key.protocol = ev->protocol;
    key.port = ev->dst_port;

    struct audit_fmt_dest *d = sum_find(s->slots, s->n_slots, &key);
    if (!d->used) {
        if (s->n >= s->max_dests) {
            s->flows++;
            s->overflow_events++;
            *(allowed ? &s->overflow_allowed : &s->overflow_denied) += 1;
            return 0;
        }
        /* Keep the load at most one half, so probes stay short. */
        if ((s->n + 1) * 2 > s->n_slots) {
            int r = sum_grow(s);
            if (r < 0)
                return r;
            d = sum_find(s->slots, s->n_slots, &key);
        }
        *d = key;
        s->n++;
    }
    s->flows++;
    *(allowed ? &d->allowed : &d->denied) += 1;
    return 0;
}

static int dest_cmp(const void *pa, const void *pb) {
    const struct audit_fmt_dest *a = pa, *b = pb;
    uint64_t ta = a->allowed + a->denied, tb = b->allowed + b->denied;

    if (ta != tb)
        return ta > tb ? -1 : 1;
    if (a->addr_len != b->addr_len)
        return a->addr_len < b->addr_len ? -1 : 1;
    int c = memcmp(a->addr, b->addr, a->addr_len);
    if (c)
        return c;
    if (a->port != b->port)
        return a->port < b->port ? -1 : 1;
    if (a->protocol != b->protocol)
        return a->protocol < b->protocol ? -1 : 1;
    if (a->family != b->family)
        return a->family < b->family ? -1 : 1;
    return 0;
}

void audit_fmt_sum_sort(struct audit_fmt_sum *s, const struct audit_fmt_dest **ret,
                        size_t *ret_n) {
    size_t n = 0;

    for (size_t i = 0; i < s->n_slots; i++)
        if (s->slots[i].used)
            s->slots[n++] = s->slots[i];
    if (n > 0)
        qsort(s->slots, n, sizeof(*s->slots), dest_cmp);
    *ret = s->slots;
    *ret_n = n;
}

const char *audit_fmt_sum_table_header(void) {
    return "DESTINATION                                      PROTO       ALLOWED      DENIED"
           "       TOTAL";
}

int audit_fmt_sum_table_line(const struct audit_fmt_dest *d, char *buf, size_t len) {
    struct sb s;
    int r = sb_init(&s, buf, len);

    if (r < 0)
        return r;
    sb_endpoint(&s, d->addr, d->addr_len, d->port);
    sb_pad(&s, 0, W_FLOW);
    sb_gap(&s, 2);
    size_t col = sb_mark(&s);
    sb_proto(&s, d->protocol);
    sb_pad(&s, col, W_PROTO);
    sb_printf(&s, "  %10llu  %10llu  %10llu", (unsigned long long)d->allowed,
              (unsigned long long)d->denied, (unsigned long long)(d->allowed + d->denied));
    return sb_finish(&s);
}

int audit_fmt_sum_json_line(const struct audit_fmt_dest *d, char *buf, size_t len) {
    struct sb s;
    char a[INET6_ADDRSTRLEN];
    const char *pn = audit_fmt_proto_name(d->protocol);
    int r = sb_init(&s, buf, len);

    if (r < 0)
        return r;
    sb_puts(&s, "{\"family\":");
    if (d->family == AF_INET)
        sb_puts(&s, "\"ipv4\"");
    else if (d->family == AF_INET6)
        sb_puts(&s, "\"ipv6\"");
    else if (d->family)
        sb_printf(&s, "%u", d->family);
    else
        sb_puts(&s, "null");
    sb_puts(&s, ",\"dst\":");
    if (addr_text(d->addr, d->addr_len, a))
        sb_json(&s, a);
    else
        sb_puts(&s, "null");
    sb_printf(&s, ",\"dport\":%u,\"protocol\":", d->port);
    if (pn)
        sb_json(&s, pn);
    else
        sb_printf(&s, "%u", d->protocol);
    sb_printf(&s, ",\"allowed\":%llu,\"denied\":%llu,\"total\":%llu}",
              (unsigned long long)d->allowed, (unsigned long long)d->denied,
              (unsigned long long)(d->allowed + d->denied));
    return sb_finish(&s);
}
