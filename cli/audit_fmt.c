/* Parsing `lyh audit` options and rendering audit events. Owns no state: pure
 * functions over their arguments (plus the process time zone for local times),
 * no I/O, no logging, no allocation except the summary table's slots.
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
 * (a CSV reader, not a terminal, is its consumer).
 *
 * Why the time parser is strict: a filter that silently read "2026-12-01T25:00"
 * as the next day, or "30" as 30 seconds when 30 minutes was meant, would show
 * the wrong records with no sign of it. One spelling per meaning, every field
 * range-checked, and a local time that does not exist is refused rather than
 * shifted by mktime. */
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
/* 9999-12-31T23:59:59Z: the last second RFC 3339's four-digit year can name. */
#define MAX_UNIX_S 253402300799ull
#define TIME_TEXT_MAX 64u

/* The worst case per input byte is 6 output bytes (JSON \u00XX or \ufffd;
 * the table's \xNN is 4); the strings of an event plus a generous 1 KiB for
 * keys, numbers, addresses and padding must fit a line. */
_Static_assert((sizeof(((lianyaohu_v1_AuditEvent *)0)->detail) +
                sizeof(((lianyaohu_v1_AuditEvent *)0)->session_id) +
                sizeof(((lianyaohu_v1_AuditEvent *)0)->action) +
                sizeof(((lianyaohu_v1_AuditEvent *)0)->interface)) * 6 + 1024 <=
                   AUDIT_FMT_LINE_MAX,
               "AUDIT_FMT_LINE_MAX too small for the nanopb bounds of AuditEvent");

__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t whylen, const char *fmt,
                                                      ...) {
    if (why && whylen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Refuse what cannot be quoted back safely: messages echo the text. */
static int check_text(const char *text, size_t max, const char *what, char *why, size_t whylen) {
    if (!text || !text[0])
        return fail(why, whylen, "empty %s", what);
    size_t n = strnlen(text, max + 1);
    if (n > max)
        return fail(why, whylen, "%s is longer than %zu characters", what, max);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 || c >= 0x7f)
            return fail(why, whylen, "%s contains byte 0x%02x at offset %zu", what, c, i);
    }
    return 0;
}

/* A decimal number without sign, whole string; *ret <= max. -ERANGE when
 * larger, -EINVAL when not a number. */
static int parse_u64(const char *s, size_t n, uint64_t max, uint64_t *ret) {
    uint64_t v = 0;

    if (n == 0)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(s[i]))
            return -EINVAL;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (max - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *ret = v;
    return 0;
}

/* ---- time ------------------------------------------------------------------------ */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static unsigned days_in_month(unsigned y, unsigned m) {
    static const unsigned dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : dm[m - 1];
}

/* n digits at *p into ret (n <= 4), advancing p. */
static bool digits(const char **p, unsigned n, unsigned *ret) {
    unsigned v = 0;
    for (unsigned i = 0; i < n; i++) {
        if (!is_digit((*p)[i]))
            return false;
        v = v * 10 + (unsigned)((*p)[i] - '0');
    }
    *p += n;
    *ret = v;
    return true;
}

/* ".DIGITS" at *p: microseconds (truncated), advancing p. */
static bool fraction(const char **p, uint64_t *ret_us) {
    const char *s = *p + 1;
    uint64_t us = 0;
    unsigned n = 0;

    while (is_digit(s[n])) {
        if (n < 6)
            us = us * 10 + (uint64_t)(s[n] - '0');
        n++;
    }
    if (n == 0)
        return false;
    for (unsigned i = n; i < 6; i++)
        us *= 10;
    *p = s + n;
    *ret_us = us;
    return true;
}

static int parse_unix(const char *text, uint64_t *ret_us, char *why, size_t whylen) {
    const char *p = text + 1, *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    uint64_t s, us = 0;
    int r;

    if (n == 0)
        return fail(why, whylen, "expected seconds since 1970 after '@', e.g. @1733000000");
    r = parse_u64(p, n, MAX_UNIX_S, &s);
    if (r == -ERANGE)
        return fail(why, whylen, "after the year 9999");
    if (r < 0)
        return fail(why, whylen,
                    "expected seconds since 1970 after '@' (digits, optionally .FRACTION)");
    if (dot) {
        const char *q = dot;
        if (!fraction(&q, &us) || *q)
            return fail(why, whylen, "expected digits after '.'");
    }
    *ret_us = s * US_PER_S + us;
    return 0;
}

static int parse_duration(const char *text, uint64_t now_us, uint64_t *ret_us, char *why,
                          size_t whylen) {
    static const struct {
        char unit;
        uint64_t secs;
    } units[] = {{'w', 604800}, {'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}};
    const char *p = text;
    size_t next_unit = 0; /* units must come largest first, each once */
    uint64_t total = 0;

    while (*p) {
        size_t n = strspn(p, "0123456789");
        uint64_t v;
        if (n == 0)
            return fail(why, whylen,
                        "not a duration: expected a number before '%c' (like 30s, 15m, "
                        "2h, 7d, 1h30m)", *p);
        if (p[n] == '\0')
            return fail(why, whylen,
                        "a duration needs a unit (s, m, h, d or w), e.g. %.*ss or %.*sm", (int)n, p, (int)n, p);
        size_t u = 0;
        while (u < ARRAY_SIZE(units) && units[u].unit != p[n])
            u++;
        if (u == ARRAY_SIZE(units))
            return fail(why, whylen,
                        "unknown duration unit '%c' (use s, m, h, d or w: 30s 15m 2h 7d 1w)", p[n]);
        if (u < next_unit)
            return fail(why, whylen,
                        "duration units go from largest to smallest, each once (w d h m s), "
                        "e.g. 1d12h");
        next_unit = u + 1;
        if (parse_u64(p, n, UINT64_MAX / US_PER_S / units[u].secs, &v) < 0)
            return fail(why, whylen, "reaches before 1970");
        v *= units[u].secs;
        if (total > UINT64_MAX / US_PER_S - v)
            return fail(why, whylen, "reaches before 1970");
        total += v;
        p += n + 1;
    }
    if (total * US_PER_S > now_us)
        return fail(why, whylen, "reaches before 1970");
    *ret_us = now_us - total * US_PER_S;
    return 0;
}

static int parse_rfc3339(const char *text, uint64_t *ret_us, char *why, size_t whylen) {
    const char *p = text;
    unsigned y, mo, d, h = 0, mi = 0, s = 0, oh = 0, om = 0;
    uint64_t frac_us = 0;
    bool have_zone = false;
    int sign = 0;

    if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' ||
        !digits(&p, 2, &d))
        return fail(why, whylen, "expected a date YYYY-MM-DD");
    if (mo < 1 || mo > 12)
        return fail(why, whylen, "month %02u is out of range (01-12)", mo);
    if (d < 1 || d > days_in_month(y, mo))
        return fail(why, whylen, "day %02u is out of range for %04u-%02u (01-%02u)",
                    d, y, mo, days_in_month(y, mo));
    if (y < 1970)
        return fail(why, whylen, "before 1970");
    if (*p == 'T' || *p == 't' || *p == ' ') {
        p++;
        if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &mi))
            return fail(why, whylen, "expected a time HH:MM[:SS] after the date");
        if (*p == ':') {
            p++;
            if (!digits(&p, 2, &s))
                return fail(why, whylen, "expected two digits of seconds");
            if (*p == '.' && !fraction(&p, &frac_us))
                return fail(why, whylen, "expected digits after '.'");
        }
        if (h > 23)
            return fail(why, whylen, "hour %02u is out of range (00-23)", h);
        if (mi > 59)
            return fail(why, whylen, "minute %02u is out of range (00-59)", mi);
        if (s > 60)
            return fail(why, whylen, "second %02u is out of range (00-60)", s);
        if (*p == 'Z' || *p == 'z') {
            p++;
            have_zone = true;
        } else if (*p == '+' || *p == '-') {
            sign = *p++ == '+' ? 1 : -1;
            if (!digits(&p, 2, &oh) || *p++ != ':' || !digits(&p, 2, &om))
                return fail(why, whylen, "expected a UTC offset as +HH:MM or -HH:MM");
            if (oh > 23 || om > 59)
                return fail(why, whylen, "UTC offset %c%02u:%02u is out of range",
                            sign > 0 ? '+' : '-', oh, om);
            have_zone = true;
        }
    }
    if (*p)
        return fail(why, whylen,
                    "unexpected '%s' (expected YYYY-MM-DD[THH:MM[:SS[.FRACTION]]][Z|+HH:MM])", p);

    /* A leap second is computed as :59 plus one second: the second after it. */
    unsigned sec = s == 60 ? 59 : s;
    int64_t t;
    if (have_zone) {
        t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
        t -= (int64_t)sign * (oh * 3600 + om * 60);
    } else {
        struct tm tm = {.tm_year = (int)y - 1900, .tm_mon = (int)mo - 1, .tm_mday = (int)d,
                        .tm_hour = (int)h, .tm_min = (int)mi, .tm_sec = (int)sec,
                        .tm_isdst = -1};
        struct tm back;
        time_t lt = mktime(&tm);
        if (lt == (time_t)-1 || !localtime_r(&lt, &back) || back.tm_year != (int)y - 1900 ||
            back.tm_mon != (int)mo - 1 || back.tm_mday != (int)d || back.tm_hour != (int)h ||
            back.tm_min != (int)mi || back.tm_sec != (int)sec) {
            if (lt == (time_t)-1 && y == 1970)
                return fail(why, whylen, "before 1970");
            return fail(why, whylen,
                        "does not exist in the local time zone (skipped by a daylight "
                        "saving change); give a UTC offset, e.g. %.*s+01:00", (int)(p - text), text);
        }
        t = (int64_t)lt;
    }
    if (s == 60) {
        t += 1;
        struct tm g;
        time_t tt = (time_t)t;
        if (t % 86400 != 0 || !gmtime_r(&tt, &g) || g.tm_mday != 1)
            return fail(why, whylen,
                        "second 60 only exists as a leap second, at 23:59:60 UTC on the "
                        "last day of a month");
    }
    if (t < 0)
        return fail(why, whylen, "before 1970");
    if ((uint64_t)t > MAX_UNIX_S)
        return fail(why, whylen, "after the year 9999");
    *ret_us = (uint64_t)t * US_PER_S + frac_us;
    return 0;
}

int audit_fmt_parse_time(const char *text, uint64_t now_us, uint64_t *ret_us, char *why,
                         size_t whylen) {
    uint64_t us = 0;
    int r = check_text(text, TIME_TEXT_MAX, "time", why, whylen);

    if (r < 0)
        return r;
    if (strcmp(text, "0") == 0)
        us = 0;
    else if (text[0] == '@')
        r = parse_unix(text, &us, why, whylen);
    else if (strlen(text) >= 5 && strspn(text, "0123456789") == 4 && !strchr("wdhms", text[4]))
        r = parse_rfc3339(text, &us, why, whylen);
    else if (is_digit(text[0]))
        r = parse_duration(text, now_us, &us, why, whylen);
    else
        r = fail(why, whylen,
                 "not a time: expected a duration (30s, 15m, 2h, 7d), an RFC 3339 time "
                 "(2026-12-01T10:00:00Z, or local without a zone) or @UNIXTIME");
    if (r < 0)
        return r;
    *ret_us = us;
    return 0;
}

/* ---- other options ----------------------------------------------------------------- */

static int one_port(const char *whole, const char *s, size_t n, unsigned *ret, char *why,
                    size_t whylen) {
    uint64_t v = 0;
    int r;

    if (n == 0)
        return fail(why, whylen, "expected a port number (1-65535) or a range N-M");
    if (s[0] == '+')
        return fail(why, whylen, "a port has no sign");
    r = parse_u64(s, n, 1000000, &v);
    if (r == -EINVAL)
        return fail(why, whylen, "port '%.*s' is not a number", (int)n, s);
    if (r == -ERANGE || v > 65535)
        return fail(why, whylen, "port %.*s is out of range (1-65535)", (int)n, s);
    if (n > 1 && s[0] == '0')
        return fail(why, whylen, "port '%.*s' has a leading zero", (int)n, s);
    if (v == 0)
        return fail(why, whylen, "port 0 is not a port; omit --port to match any port");
    *ret = (unsigned)v;
    return 0;
}

int audit_fmt_parse_port(const char *text, uint16_t *ret_min, uint16_t *ret_max, char *why,
                         size_t whylen) {
    unsigned a, b;
    int r = check_text(text, 32, "port", why, whylen);

    if (r < 0)
        return r;
    const char *dash = strchr(text, '-');
    size_t n = dash ? (size_t)(dash - text) : strlen(text);
    r = one_port(text, text, n, &a, why, whylen);
    if (r < 0)
        return r;
    b = a;
    if (dash) {
        r = one_port(text, dash + 1, strlen(dash + 1), &b, why, whylen);
        if (r < 0)
            return r;
        if (a > b)
            return fail(why, whylen, "the range is reversed; write %u-%u", b, a);
    }
    *ret_min = (uint16_t)a;
    *ret_max = (uint16_t)b;
    return 0;
}

static const struct {
    const char *name;
    uint32_t num;
} protos[] = {{"icmp", 1}, {"tcp", 6}, {"udp", 17}, {"icmpv6", 58}, {"sctp", 132}, {"udplite", 136}};

const char *audit_fmt_proto_name(uint32_t proto) {
    for (size_t i = 0; i < ARRAY_SIZE(protos); i++)
        if (protos[i].num == proto)
            return protos[i].name;
    return NULL;
}

int audit_fmt_parse_proto(const char *text, uint32_t *ret, char *why, size_t whylen) {
    uint64_t v = 0;
    int r = check_text(text, 32, "protocol", why, whylen);

    if (r < 0)
        return r;
    for (size_t i = 0; i < ARRAY_SIZE(protos); i++)
        if (strcasecmp(text, protos[i].name) == 0) {
            *ret = protos[i].num;
            return 0;
        }
    r = parse_u64(text, strlen(text), 1000, &v);
    if (r == -EINVAL)
        return fail(why, whylen,
                    "unknown protocol (use tcp, udp, icmp, icmpv6, sctp, udplite or a "
                    "number 1-255)");
    if (r == -ERANGE || v > 255)
        return fail(why, whylen, "out of range (1-255)");
    if (v == 0)
        return fail(why, whylen,
                    "protocol 0 cannot be searched for (0 means any protocol in a query); omit "
                    "--proto");
    *ret = (uint32_t)v;
    return 0;
}

static const char *const kind_names[] = {
    [lianyaohu_v1_EventKind_EVENT_KIND_FLOW] = "flow",
    [lianyaohu_v1_EventKind_EVENT_KIND_SESSION] = "session",
    [lianyaohu_v1_EventKind_EVENT_KIND_POLICY] = "policy",
    [lianyaohu_v1_EventKind_EVENT_KIND_REQUEST] = "request",
    [lianyaohu_v1_EventKind_EVENT_KIND_GAP] = "gap",
    [lianyaohu_v1_EventKind_EVENT_KIND_GUARD] = "guard",
    [lianyaohu_v1_EventKind_EVENT_KIND_DNS] = "dns",
};

const char *audit_fmt_kind_name(int kind) {
    if (kind < 0 || (size_t)kind >= ARRAY_SIZE(kind_names))
        return NULL;
    return kind_names[kind];
}

int audit_fmt_parse_kind(const char *text, lianyaohu_v1_EventKind *ret, char *why,
                         size_t whylen) {
    int r = check_text(text, 32, "kind", why, whylen);

    if (r < 0)
        return r;
    for (size_t i = 0; i < ARRAY_SIZE(kind_names); i++)
        if (kind_names[i] && strcmp(text, kind_names[i]) == 0) {
            *ret = (lianyaohu_v1_EventKind)i;
            return 0;
        }
    return fail(why, whylen,
                "unknown kind (use flow, session, policy, request, gap, guard or dns)");
}

int audit_fmt_parse_verdict(const char *text, lianyaohu_v1_Verdict *ret, char *why,
                            size_t whylen) {
    int r = check_text(text, 32, "verdict", why, whylen);

    if (r < 0)
        return r;
    if (strcmp(text, "allowed") == 0)
        *ret = lianyaohu_v1_Verdict_VERDICT_ALLOWED;
    else if (strcmp(text, "denied") == 0)
        *ret = lianyaohu_v1_Verdict_VERDICT_DENIED;
    else
        return fail(why, whylen, "unknown verdict (use allowed or denied)");
    return 0;
}

int audit_fmt_parse_dst(const char *text, lianyaohu_v1_DestRule *ret, char *why, size_t whylen) {
    struct dr_rule r;
    char drwhy[DR_WHY_MAX];

    if (dr_parse(text, &r, drwhy, sizeof(drwhy)) < 0)
        return fail(why, whylen, "%s", drwhy);
    if (r.port_min != 0)
        return fail(why, whylen, "give the port with --port, not in --dst");
    size_t alen = r.family == AF_INET ? 4 : 16;
    memset(ret, 0, sizeof(*ret));
    memcpy(ret->addr.bytes, r.addr, alen);
    ret->addr.size = (pb_size_t)alen;
    ret->prefix_len = r.prefix_len;
    return 0;
}

int audit_fmt_parse_uid(const char *text, uint32_t *ret, char *why, size_t whylen) {
    uint64_t v = 0;
    int r = check_text(text, 32, "uid", why, whylen);

    if (r < 0)
        return r;
    r = parse_u64(text, strlen(text), UINT32_MAX - 1, &v);
    if (r == -ERANGE)
        return fail(why, whylen, "out of range (0-4294967294)");
    if (r < 0)
        return fail(why, whylen, "not a uid or a user name");
    *ret = (uint32_t)v;
    return 0;
}

int audit_fmt_parse_limit(const char *text, uint32_t *ret, char *why, size_t whylen) {
    uint64_t v = 0;
    int r = check_text(text, 32, "limit", why, whylen);

    if (r < 0)
        return r;
    r = parse_u64(text, strlen(text), UINT32_MAX, &v);
    if (r == -ERANGE)
        return fail(why, whylen, "out of range (1-4294967295)");
    if (r < 0)
        return fail(why, whylen, "not a number");
    if (v == 0)
        return fail(why, whylen, "limit 0 would show nothing; omit --limit for no limit");
    *ret = (uint32_t)v;
    return 0;
}

int audit_fmt_parse_session(const char *text, char *ret, size_t retlen, char *why,
                            size_t whylen) {
    int r = check_text(text, 64, "session id", why, whylen);
    char id[17];

    if (r < 0)
        return r;
    const char *p = strncmp(text, "s:", 2) == 0 ? text + 2 : text;
    size_t n = strlen(p);
    if (n == 0 || n > 16 || strspn(p, "0123456789abcdefABCDEF") != n)
        return fail(why, whylen,
                    "not a session id or a prefix of one (up to 16 hexadecimal digits, as "
                    "`lyh sessions` shows them)");
    for (size_t i = 0; i <= n; i++)
        id[i] = p[i] >= 'A' && p[i] <= 'F' ? (char)(p[i] - 'A' + 'a') : p[i];
    if (retlen <= n)
        return fail(why, whylen, "too long");
    memcpy(ret, id, n + 1);
    return 0;
}

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
    if (!detail_value(ev->detail, "flow", v, sizeof(v)) || parse_u64(v, strlen(v), UINT64_MAX, &n) < 0)
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
