/* pfctl_parse: the two things lyhd reads from pfctl's output, the enable token
 * and the list of our anchors. Pure; the input is untrusted text of bounded
 * length (pf.c caps what it reads) and is never assumed to be NUL-terminated.
 *
 * Why strict: a token we misread is a reference on PF's enable count we can
 * never release (PF stays enabled after lyhd is gone) or, worse, someone
 * else's reference we release; an anchor name we misread is an anchor pfctl
 * would be told to flush. So the token must be the one "Token : N" line, and an
 * anchor name must carry our prefix and consist of safe characters only. */
#include "platform/darwin/pfctl_parse.h"

#include <errno.h>
#include <string.h>

/* The next line of [*pos, end) without its '\n'; false at the end. */
static bool next_line(const char **pos, const char *end, const char **ret_s, size_t *ret_n) {
    if (*pos >= end)
        return false;
    const char *s = *pos;
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
    *pos = nl ? nl + 1 : end;
    if (n > 0 && s[n - 1] == '\r')
        n--;
    *ret_s = s;
    *ret_n = n;
    return true;
}

static bool blank(char c) {
    return c == ' ' || c == '\t';
}

/* Drop leading and trailing blanks of [*s, *s + *n). */
static void trim(const char **s, size_t *n) {
    while (*n > 0 && blank(**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && blank((*s)[*n - 1]))
        (*n)--;
}

int pfctl_parse_token(const char *out, size_t len, uint64_t *ret_token) {
    if (!out || !ret_token)
        return -EINVAL;
    const char *pos = out, *end = out + len, *s;
    size_t n;

    while (next_line(&pos, end, &s, &n)) {
        trim(&s, &n);
        if (n < 5 || memcmp(s, "Token", 5) != 0)
            continue;
        s += 5;
        n -= 5;
        trim(&s, &n);
        if (n == 0 || *s != ':')
            continue;
        s++;
        n--;
        trim(&s, &n);
        if (n == 0 || n > 20)
            return n == 0 ? -ENOENT : -ERANGE;
        uint64_t v = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i] < '0' || s[i] > '9')
                return -ENOENT; /* "Token : abc" is no token we could release */
            unsigned dgt = (unsigned)(s[i] - '0');
            if (v > (UINT64_MAX - dgt) / 10)
                return -ERANGE;
            v = v * 10 + dgt;
        }
        if (v == 0)
            return -ERANGE;
        *ret_token = v;
        return 0;
    }
    return -ENOENT;
}

static bool name_char_ok(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-' || c == '/';
}

/* Decimal uid of 1..10 digits, no leading zero, below UINT32_MAX. */
static bool parse_uid(const char *s, size_t n, uint32_t *ret) {
    if (n < 1 || n > 10 || (s[0] == '0' && n > 1))
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v >= UINT32_MAX)
        return false;
    *ret = (uint32_t)v;
    return true;
}

static bool has_dotdot(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == '.' && s[i + 1] == '.')
            return true;
    return false;
}

static void classify(struct pfctl_anchor *a, const char *s, size_t n) {
    static const size_t plen = sizeof(PFR_ANCHOR_PREFIX) - 1;
    static const size_t ulen = sizeof(PFR_ANCHOR_USER_PREFIX) - 1;

    a->well_formed = false;
    if (n > ulen && memcmp(s, PFR_ANCHOR_USER_PREFIX, ulen) == 0) {
        if (parse_uid(s + ulen, n - ulen, &a->uid)) {
            a->scope = PFR_SCOPE_USER;
            a->well_formed = true;
        }
    } else if (parse_uid(s + plen, n - plen, &a->uid)) {
        a->scope = PFR_SCOPE_GROUP;
        a->well_formed = true;
    }
    if (!a->well_formed) {
        a->scope = 0;
        a->uid = 0;
    }
}

int pfctl_parse_anchors(const char *out, size_t len, struct pfctl_anchor *ret, size_t cap,
                        size_t *ret_n, size_t *ret_skipped) {
    static const size_t plen = sizeof(PFR_ANCHOR_PREFIX) - 1;
    if (!out || !ret_n || (cap > 0 && !ret))
        return -EINVAL;
    const char *pos = out, *end = out + len, *s;
    size_t n, found = 0, skipped = 0;

    while (next_line(&pos, end, &s, &n)) {
        trim(&s, &n);
        if (n < plen || memcmp(s, PFR_ANCHOR_PREFIX, plen) != 0)
            continue;
        bool safe = n < PFR_NAME_MAX;
        for (size_t i = 0; safe && i < n; i++)
            safe = name_char_ok(s[i]);
        /* "com.apple/lianyaohu-1/x" would be a sub-anchor, ".." a path trick:
         * neither is a name we create, neither goes to pfctl. */
        if (safe && (memchr(s + plen, '/', n - plen) || has_dotdot(s, n)))
            safe = false;
        if (!safe) {
            skipped++;
            continue;
        }
        if (found < cap) {
            struct pfctl_anchor *a = &ret[found];
            memcpy(a->name, s, n);
            a->name[n] = '\0';
            classify(a, s, n);
        }
        found++;
    }
    *ret_n = found;
    if (ret_skipped)
        *ret_skipped = skipped;
    return found > cap ? -ENOSPC : 0;
}
