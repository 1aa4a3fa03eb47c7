/* RFC 5424 structured data for audit records. Owns nothing; must never write
 * past size or produce an element a collector would misparse (an unescaped
 * quote or bracket in a value would let a sandboxed program that controls,
 * say, its argv[0] forge parameters). */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "audit/sd_format.h"

const char *audit_kind_name(int kind) {
    switch (kind) {
    case AUDIT_KIND_FLOW: return "flow";
    case AUDIT_KIND_SESSION: return "session";
    case AUDIT_KIND_POLICY: return "policy";
    case AUDIT_KIND_REQUEST: return "request";
    case AUDIT_KIND_GAP: return "gap";
    case AUDIT_KIND_GUARD: return "guard";
    case AUDIT_KIND_DNS: return "dns";
    default: return NULL;
    }
}

const char *audit_verdict_name(int verdict) {
    switch (verdict) {
    case AUDIT_VERDICT_ALLOWED: return "allowed";
    case AUDIT_VERDICT_DENIED: return "denied";
    default: return NULL;
    }
}

const char *audit_proto_name(int protocol) {
    switch (protocol) {
    case 1: return "icmp";
    case 6: return "tcp";
    case 17: return "udp";
    case 58: return "icmpv6";
    case 132: return "sctp";
    case 136: return "udplite";
    default: return NULL;
    }
}

struct out {
    char *buf;
    size_t size, off;
    bool full;
};

/* Keep room for ` truncated="1"`, the closing "]" and the NUL. */
#define SD_RESERVE 16

static void put_raw(struct out *o, const char *s, size_t n) {
    if (o->full || o->off + n + SD_RESERVE > o->size) {
        o->full = true;
        return;
    }
    memcpy(o->buf + o->off, s, n);
    o->off += n;
}

/* ` name="value"`: the value escaped per RFC 5424 and cut (never inside an
 * escape) when it does not fit; the closing quote always fits. */
static void param(struct out *o, const char *name, const char *value) {
    size_t nl = strlen(name);
    if (o->full || o->off + nl + 4 + SD_RESERVE > o->size) {
        o->full = true;
        return;
    }
    o->buf[o->off++] = ' ';
    memcpy(o->buf + o->off, name, nl);
    o->off += nl;
    o->buf[o->off++] = '=';
    o->buf[o->off++] = '"';
    for (const char *p = value; *p; p++) {
        bool esc = *p == '"' || *p == '\\' || *p == ']';
        size_t n = esc ? 2 : 1;
        if (o->off + n + 1 + SD_RESERVE > o->size) {
            o->full = true;
            break;
        }
        if (esc)
            o->buf[o->off++] = '\\';
        o->buf[o->off++] = *p;
    }
    o->buf[o->off++] = '"';
}

static void param_u(struct out *o, const char *name, uint64_t v) {
    char num[24];
    snprintf(num, sizeof(num), "%" PRIu64, v);
    param(o, name, num);
}

static void addr(const struct audit_rec *r, const uint8_t *a, char *buf, size_t size) {
    if (!inet_ntop(r->addr_len == 4 ? AF_INET : AF_INET6, a, buf, (socklen_t)size))
        buf[0] = '\0';
}

int audit_sd_format(const struct audit_rec *r, char *buf, size_t size) {
    struct out o = {.buf = buf, .size = size};
    char tbuf[40], a[INET6_ADDRSTRLEN];
    const char *name;

    if (size < 64)
        return -EINVAL;
    put_raw(&o, "[" AUDIT_SD_ID, strlen("[" AUDIT_SD_ID));
    param_u(&o, "id", r->id);
    time_t sec = (time_t)(r->time_us / 1000000);
    struct tm tm;
    if (gmtime_r(&sec, &tm)) {
        size_t n = strftime(tbuf, sizeof(tbuf), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(tbuf + n, sizeof(tbuf) - n, ".%06" PRId64 "Z", r->time_us % 1000000);
        param(&o, "time", tbuf);
    }
    name = audit_kind_name(r->kind);
    param(&o, "kind", name ? name : "unknown");
    if (r->action[0])
        param(&o, "action", r->action);
    if ((name = audit_verdict_name(r->verdict)))
        param(&o, "verdict", name);
    if (r->session[0])
        param(&o, "session", r->session);
    if (r->has_uid)
        param_u(&o, "uid", r->uid);
    if (r->kind == AUDIT_KIND_FLOW) {
        if ((name = audit_proto_name(r->protocol)))
            param(&o, "proto", name);
        else
            param_u(&o, "proto", r->protocol);
        if (r->addr_len == 4 || r->addr_len == 16) {
            addr(r, r->src, a, sizeof(a));
            param(&o, "src", a);
            addr(r, r->dst, a, sizeof(a));
            param(&o, "dst", a);
        }
        if (r->sport || r->dport) {
            param_u(&o, "sport", r->sport);
            param_u(&o, "dport", r->dport);
        }
    }
    if (r->iface[0])
        param(&o, "interface", r->iface);
    if (r->kind == AUDIT_KIND_GAP)
        param_u(&o, "missed", r->missed);
    if (r->kind == AUDIT_KIND_SESSION && r->action[0] && strcmp(r->action, "end") == 0) {
        param_u(&o, "allowed_packets", r->allowed_packets);
        param_u(&o, "allowed_bytes", r->allowed_bytes);
        param_u(&o, "denied_packets", r->denied_packets);
        param_u(&o, "denied_bytes", r->denied_bytes);
    }
    if (r->detail && r->detail[0])
        param(&o, "detail", r->detail);
    bool cut = o.full;
    if (cut) {
        /* SD_RESERVE keeps room for this. */
        static const char t[] = " truncated=\"1\"";
        memcpy(buf + o.off, t, sizeof(t) - 1);
        o.off += sizeof(t) - 1;
    }
    buf[o.off++] = ']';
    buf[o.off] = '\0';
    return cut ? -ENOSPC : 0;
}

static bool ident_ok(const char *s) {
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '_' || *s == '-'))
            return false;
    return true;
}

int audit_syslog_frame(char *buf, size_t size, int pri, const struct tm *tm, const char *ident,
                       long pid, const char *msg) {
    static const char mon[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

    if (pri < 0 || pri > 191 || !ident_ok(ident) || !tm || tm->tm_mon < 0 || tm->tm_mon > 11 ||
        !msg)
        return -EINVAL;
    int k = snprintf(buf, size, "<%d>%s %2d %02d:%02d:%02d %s[%ld]: %s", pri, mon[tm->tm_mon],
                     tm->tm_mday, tm->tm_hour, tm->tm_min, tm->tm_sec, ident, pid, msg);
    if (k < 0 || (size_t)k >= size) {
        if (size)
            buf[0] = '\0';
        return -ENOSPC;
    }
    return k;
}
