#include "common/dns_name.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int fail(char *why, size_t whylen, const char *msg) {
    if (why && whylen)
        snprintf(why, whylen, "%s", msg);
    return -EINVAL;
}

int dn_pattern_check(const char *text, char *canon, char *why, size_t whylen) {
    char buf[DNS_PATTERN_MAX];
    size_t len = text ? strlen(text) : 0;

    if (len == 0)
        return fail(why, whylen, "an empty name");
    if (len >= sizeof(buf))
        return fail(why, whylen, "a name longer than 253 characters");
    memcpy(buf, text, len + 1);
    if (len > 1 && buf[len - 1] == '.')
        buf[--len] = '\0';
    const char *p = buf;
    if (strncmp(buf, "*.", 2) == 0)
        p += 2;
    else if (strcmp(buf, "*") == 0)
        return fail(why, whylen, "'*' alone would allow every name: leave the allowlist empty");
    if (strlen(p) > 253)
        return fail(why, whylen, "a name longer than 253 characters");
    size_t label = 0;
    for (char *c = (char *)p;; c++) {
        if (*c == '.' || *c == '\0') {
            if (label == 0)
                return fail(why, whylen, "an empty label (two dots, or a dot at the start)");
            if (label > 63)
                return fail(why, whylen, "a label longer than 63 characters");
            if (*c == '\0')
                break;
            label = 0;
            continue;
        }
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
        if (*c == '*')
            return fail(why, whylen, "'*' only as the first label, as in *.example.com");
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'))
            return fail(why, whylen,
                        "a character other than letters, digits, '-' and '_' (write an "
                        "internationalised name in its xn-- form)");
        label++;
    }
    if (canon)
        memcpy(canon, buf, len + 1);
    return 0;
}

bool dn_detail_has(const char *detail, const char *pattern) {
    for (const char *p = detail; p && *p;) {
        const char *end = strchr(p, ' ');
        size_t len = end ? (size_t)(end - p) : strlen(p), k = 0;
        if (len > 5 && strncmp(p, "name=", 5) == 0)
            k = 5;
        else if (len > 6 && strncmp(p, "names=", 6) == 0)
            k = 6;
        /* each comma-separated value of the pair */
        for (size_t i = k; k && i < len;) {
            size_t j = i;
            while (j < len && p[j] != ',')
                j++;
            char name[254];
            if (j - i < sizeof(name)) {
                memcpy(name, p + i, j - i);
                name[j - i] = '\0';
                if (dn_match(pattern, name))
                    return true;
            }
            i = j + 1;
        }
        p = end ? end + 1 : NULL;
    }
    return false;
}

bool dn_match(const char *pattern, const char *name) {
    if (strncmp(pattern, "*.", 2) != 0)
        return strcmp(pattern, name) == 0;
    const char *suffix = pattern + 1; /* ".example.com" */
    size_t sl = strlen(suffix), nl = strlen(name);
    return nl > sl && strcmp(name + nl - sl, suffix) == 0;
}
