/* libFuzzer: the macOS backend's parsers and the profile renderer's escaping.
 *
 * The first byte picks the target; the rest is its input:
 *   0  pfctl -E output -> pfctl_parse_token
 *   1  pfctl -s Anchors output -> pfctl_parse_anchors; every name returned
 *      carries our prefix and only safe characters (it goes to pfctl's argv)
 *   2  a routing-socket read -> rtmsg_parse_get (stub layouts)
 *   3  three NUL-separated paths -> sbplr_render; whenever they are accepted,
 *      the profile's parentheses balance outside string literals, so no path
 *      can end a string early and add a rule. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "platform/darwin/pfctl_parse.h"
#include "platform/darwin/rtmsg.h"
#include "platform/darwin/sbpl_render.h"

#define FUZZ_MAX (64u * 1024u)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void anchors(const char *s, size_t n) {
    struct pfctl_anchor a[32];
    size_t found = 0, skipped = 0;
    if (pfctl_parse_anchors(s, n, a, 32, &found, &skipped) < 0 && found <= 32)
        __builtin_trap(); /* only -ENOSPC may fail, and only past the cap */
    size_t plen = strlen(PFR_ANCHOR_PREFIX);
    for (size_t i = 0; i < found && i < 32; i++) {
        if (strncmp(a[i].name, PFR_ANCHOR_PREFIX, plen) != 0 ||
            strspn(a[i].name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/") !=
                strlen(a[i].name) ||
            strchr(a[i].name + plen, '/') || strstr(a[i].name, ".."))
            __builtin_trap();
    }
}

/* Parentheses outside "..." and #"..." literals. */
static void balanced(const char *t) {
    long depth = 0;
    for (const char *p = t; *p; p++) {
        if (*p == ';') { /* comment to end of line */
            while (p[1] && p[1] != '\n')
                p++;
        } else if (*p == '"') {
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1])
                    p++;
            if (!*p)
                __builtin_trap(); /* unterminated string */
        } else if (*p == '(') {
            depth++;
        } else if (*p == ')' && --depth < 0) {
            __builtin_trap();
        }
    }
    if (depth != 0)
        __builtin_trap();
}

static void profile(const char *s, size_t n) {
    const char *parts[3] = {"/h", "/c", "/t"};
    size_t k = 0;
    for (size_t i = 0; i < n && k < 3; k++) {
        parts[k] = s + i;
        i += strnlen(s + i, n - i) + 1;
    }
    struct sbplr_input in = {.home = parts[0], .cwd = parts[1], .tmpdir = parts[2],
                             .deny = &parts[2], .n_deny = 1};
    char *text = NULL;
    if (sbplr_render(&in, &text) == 0) {
        balanced(text);
        free(text);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > FUZZ_MAX)
        return 0;
    /* a NUL-terminated copy: the targets must not need it, ASan sees overreads */
    char *buf = malloc(size);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    size_t n = size - 1;
    uint64_t tok;
    struct rtmsg_answer ans;
    switch (data[0] % 4) {
    case 0:
        pfctl_parse_token(buf, n, &tok);
        break;
    case 1:
        anchors(buf, n);
        break;
    case 2:
        rtmsg_parse_get(buf, n, 1, 100, &ans);
        break;
    case 3:
        profile(buf, n);
        break;
    }
    free(buf);
    return 0;
}
