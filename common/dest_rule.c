/* Destination-rule text grammar, checks and print-back, and the blocked-range
 * tables. Owns nothing at run time: no allocation, no I/O, no logging, no
 * name resolution (a rule that needed DNS would be decided by whoever answers
 * the query, at a time nobody chose).
 *
 * Why it is safe to feed firewall rules from here:
 *  - The parser accepts one spelling per meaning and refuses the rest with a
 *    reason, instead of guessing. The dangerous guesses are the classic ones:
 *    "10.1.2.3/8" (did the user mean the host or the /8? refused, with the
 *    /8 suggested), "fd00::1:443" (IPv6 ports need brackets; when the tail
 *    cannot be an IPv6 group, e.g. ":80-90" or ":65535", it is refused as an
 *    unbracketed port; a tail that is a valid group is an address, which is
 *    why ports must be bracketed and the canonical form shows what was read),
 *    inet_aton's "10.1" or "0x0a.1.2.3" and octal "010.0.0.1" (IPv4 is
 *    checked as a strict dotted quad here before inet_pton, so the grammar
 *    does not depend on the libc), and host names.
 *  - Every input byte must be printable ASCII and the text is at most
 *    DR_TEXT_MAX bytes, so messages can quote it verbatim without passing
 *    terminal control bytes on, and work is bounded.
 *  - The daemon does not trust the client's parse: dr_from_parts() re-checks
 *    the wire form with the same invariants (dr_check), refusing host bits
 *    rather than masking them, so what is enforced is what was shown.
 *  - The blocked tables below are the only copy; the renderer and the LAN
 *    exception check read the same array, so they cannot drift. */
#include "common/dest_rule.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/macros.h"
#include "common/why.h"

#define V4(a, b, c, d, p) {.family = AF_INET, .addr = {a, b, c, d}, .prefix_len = p}
#define V6(p, ...) {.family = AF_INET6, .addr = {__VA_ARGS__}, .prefix_len = p}

/* Declared with DR_BLOCKED_V4_COUNT elements in the header: a different number
 * of initialisers here is a conflicting-type compile error. */
const struct dr_rule dr_blocked_v4[] = {
    V4(0, 0, 0, 0, 8),       /* "this network" (RFC 791) */
    V4(10, 0, 0, 0, 8),      /* private (RFC 1918) */
    V4(100, 64, 0, 0, 10),   /* carrier-grade NAT (RFC 6598) */
    V4(127, 0, 0, 0, 8),     /* loopback */
    V4(169, 254, 0, 0, 16),  /* link-local */
    V4(172, 16, 0, 0, 12),   /* private */
    V4(192, 0, 0, 0, 24),    /* IETF protocol assignments */
    V4(192, 0, 2, 0, 24),    /* TEST-NET-1 */
    V4(192, 88, 99, 0, 24),  /* 6to4 relay anycast */
    V4(192, 168, 0, 0, 16),  /* private */
    V4(198, 18, 0, 0, 15),   /* benchmarking */
    V4(198, 51, 100, 0, 24), /* TEST-NET-2 */
    V4(203, 0, 113, 0, 24),  /* TEST-NET-3 */
    V4(224, 0, 0, 0, 4),     /* multicast */
    V4(240, 0, 0, 0, 4),     /* reserved, broadcast */
};
const struct dr_rule dr_blocked_v6[] = {
    V6(128, 0),                                               /* ::/128 unspecified */
    V6(128, [15] = 1),                                        /* ::1/128 loopback */
    V6(96, [10] = 0xff, [11] = 0xff),                         /* ::ffff:0:0/96 IPv4-mapped */
    V6(48, 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01),               /* 64:ff9b:1::/48 local NAT64 */
    V6(64, 0x01, 0x00),                                       /* 100::/64 discard-only */
    V6(32, 0x20, 0x01, 0x0d, 0xb8),                           /* 2001:db8::/32 documentation */
    V6(7, 0xfc),                                              /* fc00::/7 unique local */
    V6(10, 0xfe, 0x80),                                       /* fe80::/10 link-local */
    V6(8, 0xff),                                              /* ff00::/8 multicast */
};
_Static_assert(ARRAY_SIZE(dr_blocked_v4) == DR_BLOCKED_V4_COUNT, "v4 table size");
_Static_assert(ARRAY_SIZE(dr_blocked_v6) == DR_BLOCKED_V6_COUNT, "v6 table size");


struct span {
    const char *p;
    size_t n;
};

static unsigned addr_len_of(int family) {
    return family == AF_INET ? 4u : 16u;
}

static unsigned max_prefix(int family) {
    return family == AF_INET ? 32u : 128u;
}

static const char *family_name(int family) {
    return family == AF_INET ? "IPv4" : "IPv6";
}

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

/* Zero every bit from `prefix` on. */
static void mask_addr(uint8_t a[16], unsigned prefix) {
    for (unsigned i = 0; i < 16; i++) {
        unsigned bit = i * 8;
        if (bit >= prefix)
            a[i] = 0;
        else if (prefix - bit < 8)
            a[i] &= (uint8_t)(0xffu << (8 - (prefix - bit)));
    }
}

/* Strict dotted quad, then inet_pton for the bytes. */
static bool parse_v4(struct span s, uint8_t out[16]) {
    char buf[16];
    unsigned parts = 0, digits = 0, val = 0;

    if (s.n == 0 || s.n >= sizeof(buf))
        return false;
    for (size_t i = 0; i <= s.n; i++) {
        if (i == s.n || s.p[i] == '.') {
            if (digits == 0 || val > 255 || ++parts > 4)
                return false;
            digits = val = 0;
            continue;
        }
        if (!is_digit(s.p[i]) || digits == 3 || (digits == 1 && val == 0))
            return false; /* not a digit, four digits, or a leading zero */
        val = val * 10 + (unsigned)(s.p[i] - '0');
        digits++;
    }
    if (parts != 4)
        return false;
    memcpy(buf, s.p, s.n);
    buf[s.n] = '\0';
    memset(out, 0, 16);
    return inet_pton(AF_INET, buf, out) == 1;
}

/* inet_pton(AF_INET6): RFC 4291 text forms (hex groups, one "::", a trailing
 * dotted quad); no zone index, no brackets. */
static bool parse_v6(struct span s, uint8_t out[16]) {
    char buf[INET6_ADDRSTRLEN];
    uint8_t tmp[16];

    if (s.n == 0 || s.n >= sizeof(buf))
        return false;
    memcpy(buf, s.p, s.n);
    buf[s.n] = '\0';
    if (inet_pton(AF_INET6, buf, tmp) != 1)
        return false;
    memcpy(out, tmp, 16);
    return true;
}

static bool looks_like_name(struct span s) {
    bool letter = false;
    for (size_t i = 0; i < s.n; i++) {
        char c = s.p[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            letter = true;
        else if (!is_digit(c) && c != '.' && c != '-' && c != '_')
            return false;
    }
    return letter;
}

/* Why s, which is not an address of the expected kind, was refused. */
static int addr_error(struct span s, char *why, size_t whylen) {
    if (memchr(s.p, '%', s.n))
        return why_einval(why, whylen,
                    "'%.*s': zone indexes ('%%...') are not supported; rules match on every "
                    "interface",
                    (int)s.n, s.p);
    if (looks_like_name(s))
        return why_einval(why, whylen, "'%.*s' is not an IP address; rules take addresses, not names",
                    (int)s.n, s.p);
    if (memchr(s.p, ':', s.n))
        return why_einval(why, whylen, "'%.*s' is not a valid IPv6 address", (int)s.n, s.p);
    return why_einval(why, whylen, "'%.*s' is not an IP address", (int)s.n, s.p);
}

static int parse_prefix(struct span s, int family, unsigned *ret, char *why, size_t whylen) {
    unsigned v = 0;

    if (s.n == 0)
        return why_einval(why, whylen, "missing prefix length after '/'");
    for (size_t i = 0; i < s.n; i++)
        if (!is_digit(s.p[i]))
            return why_einval(why, whylen, "prefix length '%.*s' is not a number", (int)s.n, s.p);
    if (s.n > 1 && s.p[0] == '0')
        return why_einval(why, whylen, "prefix length '/%.*s' has a leading zero", (int)s.n, s.p);
    if (s.n > 3)
        return why_einval(why, whylen, "prefix length /%.*s is out of range for %s (0-%u)", (int)s.n,
                    s.p, family_name(family), max_prefix(family));
    for (size_t i = 0; i < s.n; i++)
        v = v * 10 + (unsigned)(s.p[i] - '0');
    if (v > max_prefix(family))
        return why_einval(why, whylen, "prefix length /%u is out of range for %s (0-%u)", v,
                    family_name(family), max_prefix(family));
    *ret = v;
    return 0;
}

/* One port starting at s.p[*pos]; `after` names what precedes it. */
static int parse_one_port(struct span s, size_t *pos, const char *after, unsigned *ret,
                          char *why, size_t whylen) {
    size_t st = *pos, j = st;
    unsigned long v = 0;

    if (st == s.n)
        return why_einval(why, whylen, "missing port after %s", after);
    if (s.p[st] == '+')
        return why_einval(why, whylen, "port '%.*s' must not have a sign", (int)(s.n - st), s.p + st);
    if (s.p[st] == '-')
        return why_einval(why, whylen, "missing port before '-'");
    if (!is_digit(s.p[st]))
        return why_einval(why, whylen, "port '%.*s' is not a number", (int)(s.n - st), s.p + st);
    while (j < s.n && is_digit(s.p[j])) {
        if (v <= 65535)
            v = v * 10 + (unsigned long)(s.p[j] - '0');
        j++;
    }
    if (j - st > 1 && s.p[st] == '0')
        return why_einval(why, whylen, "port '%.*s' has a leading zero", (int)(j - st), s.p + st);
    if (v == 0)
        return why_einval(why, whylen, "port 0 is not a valid port; omit the port to mean any port");
    if (v > 65535)
        return why_einval(why, whylen, "port %.*s is out of range (1-65535)", (int)(j - st), s.p + st);
    *pos = j;
    *ret = (unsigned)v;
    return 0;
}

/* PORT or PORT-PORT, the whole span. */
static int parse_ports(struct span s, uint16_t *ret_min, uint16_t *ret_max, char *why,
                       size_t whylen) {
    size_t pos = 0;
    unsigned a, b;
    int r;

    r = parse_one_port(s, &pos, "':'", &a, why, whylen);
    if (r < 0)
        return r;
    b = a;
    if (pos < s.n && s.p[pos] == '-') {
        pos++;
        r = parse_one_port(s, &pos, "'-'", &b, why, whylen);
        if (r < 0)
            return r;
        if (pos == s.n && a > b)
            return why_einval(why, whylen, "port range %u-%u is reversed; write %u-%u", a, b, b, a);
    }
    if (pos < s.n)
        return why_einval(why, whylen, "unexpected '%.*s' after port %u", (int)(s.n - pos), s.p + pos,
                    b);
    *ret_min = (uint16_t)a;
    *ret_max = (uint16_t)b;
    return 0;
}

/* r has host bits set; `shown` is how the address appeared to the user. */
static int host_bits_error(const struct dr_rule *r, struct span shown, char *why,
                           size_t whylen) {
    struct dr_rule fixed = *r;
    char sug[DR_FORMAT_MAX];

    mask_addr(fixed.addr, fixed.prefix_len);
    if (dr_format(&fixed, sug, sizeof(sug)) < 0)
        return why_einval(why, whylen, "%.*s/%u has host bits set", (int)shown.n, shown.p,
                    r->prefix_len);
    return why_einval(why, whylen, "%.*s/%u has host bits set; did you mean %s?", (int)shown.n,
                shown.p, r->prefix_len, sug);
}

int dr_parse(const char *text, struct dr_rule *ret, char *why, size_t whylen) {
    struct dr_rule r = {0};
    struct span addr = {0}, pfx = {0}, port = {0};
    bool have_pfx = false, have_port = false;
    size_t len;

    if (!text || !ret)
        return why_einval(why, whylen, "no rule");
    len = strnlen(text, DR_TEXT_MAX + 1);
    if (len == 0)
        return why_einval(why, whylen, "empty rule; expected ADDR[/PREFIX][:PORT[-PORT]]");
    if (len > DR_TEXT_MAX)
        return why_einval(why, whylen, "rule is longer than %u characters", DR_TEXT_MAX);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == ' ')
            return why_einval(why, whylen, "rule '%.*s' contains a space at offset %zu", (int)len,
                        text, i);
        if (c < 0x20 || c >= 0x7f)
            return why_einval(why, whylen, "rule contains byte 0x%02x at offset %zu", c, i);
    }

    if (text[0] == '[') {
        /* [ADDR[/PREFIX]] optionally followed by :PORTS; IPv6 only. */
        const char *close = memchr(text, ']', len);
        if (!close)
            return why_einval(why, whylen, "missing ']' in '%s'", text);
        struct span inner = {text + 1, (size_t)(close - text - 1)};
        struct span after = {close + 1, (size_t)(text + len - close - 1)};
        if (inner.n == 0)
            return why_einval(why, whylen, "empty brackets in '%s'", text);
        const char *slash = memchr(inner.p, '/', inner.n);
        addr = (struct span){inner.p, slash ? (size_t)(slash - inner.p) : inner.n};
        if (slash) {
            have_pfx = true;
            pfx = (struct span){slash + 1, (size_t)(inner.p + inner.n - slash - 1)};
        }
        if (after.n > 0 && after.p[0] == ':') {
            have_port = true;
            port = (struct span){after.p + 1, after.n - 1};
        } else if (after.n > 0 && after.p[0] == '/') {
            const char *colon = memchr(after.p, ':', after.n);
            size_t pn = colon ? (size_t)(colon - after.p - 1) : after.n - 1;
            return why_einval(why, whylen,
                        "the prefix goes inside the brackets: write '[%.*s/%.*s]%s', not '%s'",
                        (int)inner.n, inner.p, (int)pn, after.p + 1, colon ? colon : "", text);
        } else if (after.n > 0) {
            return why_einval(why, whylen, "unexpected '%.*s' after ']' in '%s'", (int)after.n,
                        after.p, text);
        }
        if (parse_v4(addr, r.addr))
            return why_einval(why, whylen, "brackets are only for IPv6 addresses: write '%.*s%.*s'",
                        (int)inner.n, inner.p, (int)after.n, after.p);
        if (!parse_v6(addr, r.addr))
            return addr_error(addr, why, whylen);
        r.family = AF_INET6;
    } else {
        size_t run = strspn(text, "0123456789.");
        bool dotted = run > 0 && memchr(text, '.', run);
        size_t colons = 0;
        for (size_t i = 0; i < len; i++)
            colons += text[i] == ':';

        if (dotted && (text[run] == '\0' || text[run] == '/' || text[run] == ':')) {
            /* A.B.C.D[/PREFIX][:PORTS] */
            addr = (struct span){text, run};
            if (!parse_v4(addr, r.addr))
                return why_einval(why, whylen,
                            "'%.*s' is not a valid IPv4 address (four decimal parts 0-255, no "
                            "leading zeros)",
                            (int)run, text);
            r.family = AF_INET;
            const char *p = text + run;
            if (*p == '/') {
                size_t n = strcspn(p + 1, ":");
                have_pfx = true;
                pfx = (struct span){p + 1, n};
                p += 1 + n;
            }
            if (*p == ':') {
                have_port = true;
                port = (struct span){p + 1, (size_t)(text + len - p - 1)};
            }
        } else if (colons >= 2) {
            /* Unbracketed IPv6: ADDR[/PREFIX], never a port. */
            const char *slash = memchr(text, '/', len);
            addr = (struct span){text, slash ? (size_t)(slash - text) : len};
            if (slash) {
                have_pfx = true;
                pfx = (struct span){slash + 1, (size_t)(text + len - slash - 1)};
                const char *c = memchr(pfx.p, ':', pfx.n);
                if (c)
                    return why_einval(why, whylen,
                                "an IPv6 rule with a port needs brackets: write '[%.*s/%.*s]%s'",
                                (int)addr.n, addr.p, (int)(c - pfx.p), pfx.p, c);
            }
            if (!parse_v6(addr, r.addr)) {
                /* "fd00::1:80-90", "fd00::1:65535": a tail that cannot be a
                 * group after an address that parses means a port. */
                const char *lc = NULL;
                for (size_t i = 0; i < addr.n; i++)
                    if (addr.p[i] == ':')
                        lc = addr.p + i;
                struct span head = {addr.p, lc ? (size_t)(lc - addr.p) : 0};
                struct span tail = {lc ? lc + 1 : NULL,
                                    lc ? (size_t)(addr.p + addr.n - lc - 1) : 0};
                bool portish = tail.n > 0 && is_digit(tail.p[0]);
                for (size_t i = 0; i < tail.n; i++)
                    portish = portish && (is_digit(tail.p[i]) || tail.p[i] == '-');
                /* 1-4 digits would be a valid group: the address is broken
                 * elsewhere ("fd00:::1"), so no port advice. */
                portish = portish && (tail.n > 4 || memchr(tail.p, '-', tail.n));
                uint8_t scratch[16];
                if (portish && parse_v6(head, scratch))
                    return why_einval(why, whylen,
                                "an IPv6 rule with a port needs brackets: write '[%.*s]:%.*s'",
                                (int)head.n, head.p, (int)tail.n, tail.p);
                return addr_error(addr, why, whylen);
            }
            r.family = AF_INET6;
        } else {
            if (dotted && parse_v4((struct span){text, run}, r.addr))
                return why_einval(why, whylen, "unexpected '%s' after address %.*s", text + run,
                            (int)run, text);
            struct span tok = {text, strcspn(text, ":/")};
            if (tok.n == 0)
                return why_einval(why, whylen, "missing address in '%s'", text);
            return addr_error(tok, why, whylen);
        }
    }

    unsigned prefix = max_prefix(r.family);
    if (have_pfx) {
        int e = parse_prefix(pfx, r.family, &prefix, why, whylen);
        if (e < 0)
            return e;
    }
    r.prefix_len = (uint8_t)prefix;
    if (have_port) {
        if (port.n == 0)
            return why_einval(why, whylen, "missing port after ':'");
        int e = parse_ports(port, &r.port_min, &r.port_max, why, whylen);
        if (e < 0)
            return e;
    }
    uint8_t masked[16];
    memcpy(masked, r.addr, 16);
    mask_addr(masked, r.prefix_len);
    if (memcmp(masked, r.addr, 16) != 0)
        return host_bits_error(&r, addr, why, whylen);

    *ret = r;
    return 0;
}

int dr_check(const struct dr_rule *r, char *why, size_t whylen) {
    char a[INET6_ADDRSTRLEN];

    if (!r)
        return why_einval(why, whylen, "no rule");
    if (r->family != AF_INET && r->family != AF_INET6)
        return why_einval(why, whylen, "address family %d is neither IPv4 nor IPv6", r->family);
    if (r->prefix_len > max_prefix(r->family))
        return why_einval(why, whylen, "prefix length /%u is out of range for %s (0-%u)",
                    r->prefix_len, family_name(r->family), max_prefix(r->family));
    for (unsigned i = addr_len_of(r->family); i < 16; i++)
        if (r->addr[i] != 0)
            return why_einval(why, whylen, "IPv4 rule has bytes beyond the 4-byte address");
    if (r->port_min == 0 && r->port_max != 0)
        return why_einval(why, whylen, "port range without a first port (0-%u)", r->port_max);
    if (r->port_min > r->port_max)
        return why_einval(why, whylen, "port range %u-%u is reversed; write %u-%u", r->port_min,
                    r->port_max, r->port_max, r->port_min);
    uint8_t masked[16];
    memcpy(masked, r->addr, 16);
    mask_addr(masked, r->prefix_len);
    if (memcmp(masked, r->addr, 16) != 0) {
        if (!inet_ntop(r->family, r->addr, a, sizeof(a)))
            return why_einval(why, whylen, "rule has host bits set");
        return host_bits_error(r, (struct span){a, strlen(a)}, why, whylen);
    }
    return 0;
}

int dr_from_parts(const uint8_t *addr, size_t addr_len, uint32_t prefix_len, uint32_t port_min,
                  uint32_t port_max, struct dr_rule *ret, char *why, size_t whylen) {
    struct dr_rule r = {0};
    int e;

    if (!addr || !ret)
        return why_einval(why, whylen, "no rule");
    if (addr_len == 4)
        r.family = AF_INET;
    else if (addr_len == 16)
        r.family = AF_INET6;
    else
        return why_einval(why, whylen, "address must be 4 or 16 bytes, not %zu", addr_len);
    memcpy(r.addr, addr, addr_len);
    if (prefix_len > max_prefix(r.family))
        return why_einval(why, whylen, "prefix length /%u is out of range for %s (0-%u)", prefix_len,
                    family_name(r.family), max_prefix(r.family));
    r.prefix_len = (uint8_t)prefix_len;
    if (port_min == 0 && port_max != 0)
        return why_einval(why, whylen, "port range without a first port (0-%u)", port_max);
    if (port_min > 65535 || port_max > 65535)
        return why_einval(why, whylen, "port %u is out of range (1-65535)",
                    port_min > 65535 ? port_min : port_max);
    if (port_min != 0 && port_max == 0)
        port_max = port_min;
    r.port_min = (uint16_t)port_min;
    r.port_max = (uint16_t)port_max;
    e = dr_check(&r, why, whylen);
    if (e < 0)
        return e;
    *ret = r;
    return 0;
}

int dr_format(const struct dr_rule *r, char *buf, size_t len) {
    char a[INET6_ADDRSTRLEN], pfx[8] = "", ports[16] = "", out[DR_FORMAT_MAX];
    int n;

    if (!buf || dr_check(r, NULL, 0) < 0)
        return -EINVAL;
    if (!inet_ntop(r->family, r->addr, a, sizeof(a)))
        return -EINVAL;
    if (r->prefix_len != max_prefix(r->family))
        snprintf(pfx, sizeof(pfx), "/%u", r->prefix_len);
    if (r->port_min == r->port_max && r->port_min != 0)
        snprintf(ports, sizeof(ports), ":%u", r->port_min);
    else if (r->port_min != 0)
        snprintf(ports, sizeof(ports), ":%u-%u", r->port_min, r->port_max);
    bool brackets = r->family == AF_INET6 && r->port_min != 0;
    n = snprintf(out, sizeof(out), "%s%s%s%s%s", brackets ? "[" : "", a, pfx,
                 brackets ? "]" : "", ports);
    if (n < 0 || (size_t)n >= sizeof(out))
        return -EINVAL; /* cannot happen: DR_FORMAT_MAX covers the longest */
    if ((size_t)n >= len)
        return -ENOSPC;
    memcpy(buf, out, (size_t)n + 1);
    return 0;
}

bool dr_is_loopback(const struct dr_rule *r) {
    static const uint8_t one[16] = {[15] = 1};
    if (r->family == AF_INET)
        return r->prefix_len >= 8 && r->addr[0] == 127;
    return r->family == AF_INET6 && r->prefix_len == 128 && memcmp(r->addr, one, 16) == 0;
}

bool dr_equal(const struct dr_rule *a, const struct dr_rule *b) {
    return a && b && a->family == b->family && memcmp(a->addr, b->addr, 16) == 0 &&
           a->prefix_len == b->prefix_len && a->port_min == b->port_min &&
           a->port_max == b->port_max;
}

bool dr_contains(const struct dr_rule *outer, const struct dr_rule *inner) {
    if (dr_check(outer, NULL, 0) < 0 || dr_check(inner, NULL, 0) < 0)
        return false;
    if (outer->family != inner->family || outer->prefix_len > inner->prefix_len)
        return false;
    uint8_t a[16];
    memcpy(a, inner->addr, 16);
    mask_addr(a, outer->prefix_len);
    if (memcmp(a, outer->addr, 16) != 0)
        return false;
    /* No port = every port, 0-65535. */
    unsigned olo = outer->port_min, ohi = outer->port_min ? outer->port_max : 65535;
    unsigned ilo = inner->port_min, ihi = inner->port_min ? inner->port_max : 65535;
    return olo <= ilo && ihi <= ohi;
}

bool dr_in_blocked_ranges(const struct dr_rule *r) {
    if (dr_check(r, NULL, 0) < 0)
        return false;
    const struct dr_rule *t = r->family == AF_INET ? dr_blocked_v4 : dr_blocked_v6;
    size_t n = r->family == AF_INET ? DR_BLOCKED_V4_COUNT : DR_BLOCKED_V6_COUNT;
    /* The table entries have no ports, so containment ignores r's ports. */
    for (size_t i = 0; i < n; i++)
        if (dr_contains(&t[i], r))
            return true;
    return false;
}

bool dr_addr_blocked(int family, const uint8_t addr[16]) {
    struct dr_rule r;
    if ((family != AF_INET && family != AF_INET6) ||
        dr_from_parts(addr, family == AF_INET ? 4 : 16, family == AF_INET ? 32 : 128, 0, 0, &r,
                      NULL, 0) < 0)
        return true;
    return dr_in_blocked_ranges(&r);
}
