/* Parsing `lyh audit`'s filter options (--since/--until, --port, --proto,
 * --kind, --verdict, --dst, --uid, --limit, --session): pure functions over
 * their arguments (plus the process time zone for local times), no I/O, no
 * logging, no allocation. The renderers are audit_fmt.c.
 *
 * Why the time parser is strict: a filter that silently read "2026-12-01T25:00"
 * as the next day, or "30" as 30 seconds when 30 minutes was meant, would show
 * the wrong records with no sign of it. One spelling per meaning, every field
 * range-checked, and a local time that does not exist is refused rather than
 * shifted by mktime. */
#include "cli/audit_fmt.h"

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


static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Refuse what cannot be quoted back safely: messages echo the text. */
static int check_text(const char *text, size_t max, const char *what, char *why, size_t whylen) {
    if (!text || !text[0])
        return why_einval(why, whylen, "empty %s", what);
    size_t n = strnlen(text, max + 1);
    if (n > max)
        return why_einval(why, whylen, "%s is longer than %zu characters", what, max);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 || c >= 0x7f)
            return why_einval(why, whylen, "%s contains byte 0x%02x at offset %zu", what, c, i);
    }
    return 0;
}

/* See audit_fmt.h. */
int audit_fmt_parse_u64(const char *s, size_t n, uint64_t max, uint64_t *ret) {
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
        return why_einval(why, whylen, "expected seconds since 1970 after '@', e.g. @1733000000");
    r = audit_fmt_parse_u64(p, n, MAX_UNIX_S, &s);
    if (r == -ERANGE)
        return why_einval(why, whylen, "after the year 9999");
    if (r < 0)
        return why_einval(why, whylen,
                    "expected seconds since 1970 after '@' (digits, optionally .FRACTION)");
    if (dot) {
        const char *q = dot;
        if (!fraction(&q, &us) || *q)
            return why_einval(why, whylen, "expected digits after '.'");
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
            return why_einval(why, whylen,
                        "not a duration: expected a number before '%c' (like 30s, 15m, "
                        "2h, 7d, 1h30m)", *p);
        if (p[n] == '\0')
            return why_einval(why, whylen,
                        "a duration needs a unit (s, m, h, d or w), e.g. %.*ss or %.*sm", (int)n, p, (int)n, p);
        size_t u = 0;
        while (u < ARRAY_SIZE(units) && units[u].unit != p[n])
            u++;
        if (u == ARRAY_SIZE(units))
            return why_einval(why, whylen,
                        "unknown duration unit '%c' (use s, m, h, d or w: 30s 15m 2h 7d 1w)", p[n]);
        if (u < next_unit)
            return why_einval(why, whylen,
                        "duration units go from largest to smallest, each once (w d h m s), "
                        "e.g. 1d12h");
        next_unit = u + 1;
        if (audit_fmt_parse_u64(p, n, UINT64_MAX / US_PER_S / units[u].secs, &v) < 0)
            return why_einval(why, whylen, "reaches before 1970");
        v *= units[u].secs;
        if (total > UINT64_MAX / US_PER_S - v)
            return why_einval(why, whylen, "reaches before 1970");
        total += v;
        p += n + 1;
    }
    if (total * US_PER_S > now_us)
        return why_einval(why, whylen, "reaches before 1970");
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
        return why_einval(why, whylen, "expected a date YYYY-MM-DD");
    if (mo < 1 || mo > 12)
        return why_einval(why, whylen, "month %02u is out of range (01-12)", mo);
    if (d < 1 || d > days_in_month(y, mo))
        return why_einval(why, whylen, "day %02u is out of range for %04u-%02u (01-%02u)",
                    d, y, mo, days_in_month(y, mo));
    if (y < 1970)
        return why_einval(why, whylen, "before 1970");
    if (*p == 'T' || *p == 't' || *p == ' ') {
        p++;
        if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &mi))
            return why_einval(why, whylen, "expected a time HH:MM[:SS] after the date");
        if (*p == ':') {
            p++;
            if (!digits(&p, 2, &s))
                return why_einval(why, whylen, "expected two digits of seconds");
            if (*p == '.' && !fraction(&p, &frac_us))
                return why_einval(why, whylen, "expected digits after '.'");
        }
        if (h > 23)
            return why_einval(why, whylen, "hour %02u is out of range (00-23)", h);
        if (mi > 59)
            return why_einval(why, whylen, "minute %02u is out of range (00-59)", mi);
        if (s > 60)
            return why_einval(why, whylen, "second %02u is out of range (00-60)", s);
        if (*p == 'Z' || *p == 'z') {
            p++;
            have_zone = true;
        } else if (*p == '+' || *p == '-') {
            sign = *p++ == '+' ? 1 : -1;
            if (!digits(&p, 2, &oh) || *p++ != ':' || !digits(&p, 2, &om))
                return why_einval(why, whylen, "expected a UTC offset as +HH:MM or -HH:MM");
            if (oh > 23 || om > 59)
                return why_einval(why, whylen, "UTC offset %c%02u:%02u is out of range",
                            sign > 0 ? '+' : '-', oh, om);
            have_zone = true;
        }
    }
    if (*p)
        return why_einval(why, whylen,
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
                return why_einval(why, whylen, "before 1970");
            return why_einval(why, whylen,
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
            return why_einval(why, whylen,
                        "second 60 only exists as a leap second, at 23:59:60 UTC on the "
                        "last day of a month");
    }
    if (t < 0)
        return why_einval(why, whylen, "before 1970");
    if ((uint64_t)t > MAX_UNIX_S)
        return why_einval(why, whylen, "after the year 9999");
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
        r = why_einval(why, whylen,
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
        return why_einval(why, whylen, "expected a port number (1-65535) or a range N-M");
    if (s[0] == '+')
        return why_einval(why, whylen, "a port has no sign");
    r = audit_fmt_parse_u64(s, n, 1000000, &v);
    if (r == -EINVAL)
        return why_einval(why, whylen, "port '%.*s' is not a number", (int)n, s);
    if (r == -ERANGE || v > 65535)
        return why_einval(why, whylen, "port %.*s is out of range (1-65535)", (int)n, s);
    if (n > 1 && s[0] == '0')
        return why_einval(why, whylen, "port '%.*s' has a leading zero", (int)n, s);
    if (v == 0)
        return why_einval(why, whylen, "port 0 is not a port; omit --port to match any port");
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
            return why_einval(why, whylen, "the range is reversed; write %u-%u", b, a);
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
    r = audit_fmt_parse_u64(text, strlen(text), 1000, &v);
    if (r == -EINVAL)
        return why_einval(why, whylen,
                    "unknown protocol (use tcp, udp, icmp, icmpv6, sctp, udplite or a "
                    "number 1-255)");
    if (r == -ERANGE || v > 255)
        return why_einval(why, whylen, "out of range (1-255)");
    if (v == 0)
        return why_einval(why, whylen,
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
    return why_einval(why, whylen,
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
        return why_einval(why, whylen, "unknown verdict (use allowed or denied)");
    return 0;
}

int audit_fmt_parse_dst(const char *text, lianyaohu_v1_DestRule *ret, char *why, size_t whylen) {
    struct dr_rule r;
    char drwhy[DR_WHY_MAX];

    if (dr_parse(text, &r, drwhy, sizeof(drwhy)) < 0)
        return why_einval(why, whylen, "%s", drwhy);
    if (r.port_min != 0)
        return why_einval(why, whylen, "give the port with --port, not in --dst");
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
    r = audit_fmt_parse_u64(text, strlen(text), UINT32_MAX - 1, &v);
    if (r == -ERANGE)
        return why_einval(why, whylen, "out of range (0-4294967294)");
    if (r < 0)
        return why_einval(why, whylen, "not a uid or a user name");
    *ret = (uint32_t)v;
    return 0;
}

int audit_fmt_parse_limit(const char *text, uint32_t *ret, char *why, size_t whylen) {
    uint64_t v = 0;
    int r = check_text(text, 32, "limit", why, whylen);

    if (r < 0)
        return r;
    r = audit_fmt_parse_u64(text, strlen(text), UINT32_MAX, &v);
    if (r == -ERANGE)
        return why_einval(why, whylen, "out of range (1-4294967295)");
    if (r < 0)
        return why_einval(why, whylen, "not a number");
    if (v == 0)
        return why_einval(why, whylen, "limit 0 would show nothing; omit --limit for no limit");
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
        return why_einval(why, whylen,
                    "not a session id or a prefix of one (up to 16 hexadecimal digits, as "
                    "`lyh sessions` shows them)");
    for (size_t i = 0; i <= n; i++)
        id[i] = p[i] >= 'A' && p[i] <= 'F' ? (char)(p[i] - 'A' + 'a') : p[i];
    if (retlen <= n)
        return why_einval(why, whylen, "too long");
    memcpy(ret, id, n + 1);
    return 0;
}
