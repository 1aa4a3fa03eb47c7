/* Golden, syntax and semantic tests for the Seatbelt profile renderer (no
 * sandbox-exec on Linux).
 *
 * Each golden case renders one profile and compares it byte for byte with
 * tests/unit/platform/golden/<case>.sb. LYH_UPDATE_GOLDEN=1 rewrites the golden
 * files instead (review the diff!); by default a mismatch fails and prints both.
 *
 * Every rendering also goes through an independent SBPL reader written here
 * (it shares no code with sbpl_render.c): an s-expression tokenizer and parser
 * (strings with \" and \\ escapes, #"..." regex literals, #o octal numbers,
 * symbols, ; comments), then a shape check of the profile (version, deny
 * default, then only allow/deny forms of known operations and filters), then
 * semantic checks on the parsed forms: the layer order the renderer promises
 * (grants, narrowing denials, the UTC carve-back, the setuid deny, the user's
 * deny paths last), what is writable, and that every path string round-trips.
 * The reader has its own negative tests, so it cannot silently accept
 * everything. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "golden_file.h"
#include "platform/agent_paths.h"
#include "platform/darwin/sbpl_render.h"

#ifndef LYH_DARWIN_GOLDEN_DIR
#error "LYH_DARWIN_GOLDEN_DIR must name tests/unit/platform/golden"
#endif

/* ---- golden files ------------------------------------------------------------------ */

static void check_golden(const char *name, const char *text) {
    golden_check(LYH_DARWIN_GOLDEN_DIR, name, "sb", text);
}

/* ---- the s-expression reader --------------------------------------------------------- */

enum sx_type { SX_LIST = 1, SX_SYM, SX_STR, SX_REGEX, SX_NUM };

struct sx {
    enum sx_type type;
    char *text; /* owns. SYM: the name; STR: unescaped; REGEX: as written; NUM: as written */
    unsigned long num;
    struct sx **kids; /* owns, SX_LIST only */
    size_t n, cap;
    size_t line;
};

static void sx_free(struct sx *x) {
    if (!x)
        return;
    for (size_t i = 0; i < x->n; i++)
        sx_free(x->kids[i]);
    free(x->kids);
    free(x->text);
    free(x);
}

static void sx_freep(struct sx **x) {
    sx_free(*x);
}
#define _cleanup_sx_ _cleanup_(sx_freep)

static struct sx *sx_new(enum sx_type type, size_t line) {
    struct sx *x = calloc(1, sizeof(*x));
    assert_non_null(x);
    x->type = type;
    x->line = line;
    return x;
}

static void sx_add(struct sx *list, struct sx *kid) {
    if (list->n == list->cap) {
        list->cap = list->cap ? 2 * list->cap : 8;
        list->kids = realloc(list->kids, list->cap * sizeof(*list->kids));
        assert_non_null(list->kids);
    }
    list->kids[list->n++] = kid;
}

struct sx_reader {
    const char *s;
    size_t i, line;
    char why[256];
};

#define SX_FAIL(rd, ...)                                                                   \
    do {                                                                                   \
        int o_ = snprintf((rd)->why, sizeof((rd)->why), "line %zu: ", (rd)->line);         \
        snprintf((rd)->why + o_, sizeof((rd)->why) - (size_t)o_, __VA_ARGS__);             \
        return -1;                                                                         \
    } while (0)

static bool sx_delim(char c) {
    return c == '\0' || c == ' ' || c == '\n' || c == '\t' || c == '(' || c == ')' || c == ';';
}

static bool sx_sym_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("*+-._/:<>=!?", c));
}

/* "..." with \" and \\ as the only escapes (the renderer needs no other);
 * *out gets the unescaped bytes. For a regex literal (raw) a backslash keeps
 * itself and the byte after it: the regex engine reads them, not the reader. */
static int sx_string(struct sx_reader *rd, bool raw, char **out) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_non_null(m);
    rd->i++; /* the opening quote */
    for (;;) {
        unsigned char c = (unsigned char)rd->s[rd->i];
        if (c == '\0') {
            fclose(m);
            free(buf);
            SX_FAIL(rd, "unterminated string");
        }
        if (c < 0x20 || c == 0x7f) {
            fclose(m);
            free(buf);
            SX_FAIL(rd, "control byte 0x%02x in a string", c);
        }
        rd->i++;
        if (c == '"')
            break;
        if (c == '\\') {
            char e = rd->s[rd->i];
            if (raw && e != '\0' && (unsigned char)e >= 0x20) {
                fputc('\\', m);
                fputc(e, m);
                rd->i++;
                continue;
            }
            if (e != '"' && e != '\\') {
                fclose(m);
                free(buf);
                SX_FAIL(rd, "bad escape '\\%c' in a string", e ? e : '0');
            }
            fputc(e, m);
            rd->i++;
            continue;
        }
        fputc(c, m);
    }
    fclose(m);
    *out = buf;
    return 0;
}

static int sx_read(struct sx_reader *rd, struct sx *root) {
    struct sx *stack[32];
    size_t depth = 0;
    struct sx *cur = root;
    for (;;) {
        char c = rd->s[rd->i];
        if (c == '\0')
            break;
        if (c == '\n') {
            rd->line++;
            rd->i++;
            continue;
        }
        if (c == ' ' || c == '\t') {
            rd->i++;
            continue;
        }
        if (c == ';') {
            while (rd->s[rd->i] && rd->s[rd->i] != '\n')
                rd->i++;
            continue;
        }
        if (c == '(') {
            if (depth == ARRAY_SIZE(stack))
                SX_FAIL(rd, "nested too deep");
            struct sx *l = sx_new(SX_LIST, rd->line);
            sx_add(cur, l);
            stack[depth++] = cur;
            cur = l;
            rd->i++;
            continue;
        }
        if (c == ')') {
            if (depth == 0)
                SX_FAIL(rd, "unbalanced ')'");
            cur = stack[--depth];
            rd->i++;
            continue;
        }
        struct sx *a;
        if (c == '"') {
            a = sx_new(SX_STR, rd->line);
            sx_add(cur, a);
            if (sx_string(rd, false, &a->text) < 0)
                return -1;
        } else if (c == '#' && rd->s[rd->i + 1] == '"') {
            a = sx_new(SX_REGEX, rd->line);
            sx_add(cur, a);
            rd->i++;
            if (sx_string(rd, true, &a->text) < 0)
                return -1;
        } else if (c == '#' && rd->s[rd->i + 1] == 'o') {
            size_t start = rd->i += 2;
            unsigned long v = 0;
            while (rd->s[rd->i] >= '0' && rd->s[rd->i] <= '7' && rd->i - start < 11)
                v = v * 8 + (unsigned long)(rd->s[rd->i++] - '0');
            if (rd->i == start || !sx_delim(rd->s[rd->i]))
                SX_FAIL(rd, "bad octal number");
            a = sx_new(SX_NUM, rd->line);
            sx_add(cur, a);
            a->num = v;
            a->text = strndup(rd->s + start - 2, rd->i - start + 2);
        } else if (c >= '0' && c <= '9') {
            size_t start = rd->i;
            unsigned long v = 0;
            while (rd->s[rd->i] >= '0' && rd->s[rd->i] <= '9' && rd->i - start < 9)
                v = v * 10 + (unsigned long)(rd->s[rd->i++] - '0');
            if (!sx_delim(rd->s[rd->i]))
                SX_FAIL(rd, "bad number");
            a = sx_new(SX_NUM, rd->line);
            sx_add(cur, a);
            a->num = v;
            a->text = strndup(rd->s + start, rd->i - start);
        } else if (sx_sym_char(c)) {
            size_t start = rd->i;
            while (sx_sym_char(rd->s[rd->i]))
                rd->i++;
            a = sx_new(SX_SYM, rd->line);
            sx_add(cur, a);
            a->text = strndup(rd->s + start, rd->i - start);
        } else {
            SX_FAIL(rd, "unexpected byte 0x%02x", (unsigned char)c);
        }
        if (!sx_delim(rd->s[rd->i]))
            SX_FAIL(rd, "no delimiter after an atom");
    }
    if (depth > 0)
        SX_FAIL(rd, "unbalanced '(' (%zu open at the end)", depth);
    return 0;
}

/* ---- the profile's shape --------------------------------------------------------------- */

static const char *const sb_ops[] = {
    "default", "file-read*", "file-read-data", "file-read-metadata", "file-write*",
    "file-map-executable", "file-ioctl", "process-fork", "process-exec", "process-exec*",
    "process-info*", "signal", "pseudo-tty", "ipc-posix-sem", "ipc-posix-shm", "mach-lookup",
    "sysctl-read", "sysctl-write", "network-outbound", "network-inbound", "network-bind",
    "system-socket", "socket-ioctl",
};

static bool in_list(const char *s, const char *const *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, v[i]) == 0)
            return true;
    return false;
}

static bool is_sym(const struct sx *x, const char *name) {
    return x && x->type == SX_SYM && (!name || strcmp(x->text, name) == 0);
}

static const char *head(const struct sx *x) {
    return x && x->type == SX_LIST && x->n > 0 && x->kids[0]->type == SX_SYM ? x->kids[0]->text
                                                                            : NULL;
}

/* "HOST:PORT" of a network filter: HOST * or localhost, PORT * or 1..65535. */
static bool sb_hostport(const char *s) {
    const char *colon = strrchr(s, ':');
    if (!colon)
        return false;
    size_t hl = (size_t)(colon - s);
    if (!((hl == 1 && s[0] == '*') || (hl == 9 && strncmp(s, "localhost", 9) == 0)))
        return false;
    const char *p = colon + 1;
    if (strcmp(p, "*") == 0)
        return true;
    if (!p[0] || p[0] == '0' || strlen(p) > 5 || strspn(p, "0123456789") != strlen(p))
        return false;
    return atol(p) <= 65535;
}

static int sb_filter(struct sx_reader *rd, const struct sx *f) {
    static const char *const str1[] = {"literal", "subpath", "path-literal", "global-name",
                                       "sysctl-name", "sysctl-name-prefix"};
    static const char *const net_kinds[] = {"ip", "ip4", "ip6", "tcp", "tcp4", "tcp6",
                                            "udp", "udp4", "udp6", "unix-socket"};
    static const char *const targets[] = {"same-sandbox", "self", "children", "parent",
                                          "others"};
    const char *h = head(f);
    rd->line = f->line;
    if (f->type != SX_LIST)
        SX_FAIL(rd, "a filter must be a list");
    if (!h)
        SX_FAIL(rd, "a filter list without a head symbol");
    if (in_list(h, str1, ARRAY_SIZE(str1))) {
        if (f->n != 2 || f->kids[1]->type != SX_STR || !f->kids[1]->text[0])
            SX_FAIL(rd, "(%s STRING) takes one string", h);
        if (strstr(h, "literal") || strcmp(h, "subpath") == 0)
            if (f->kids[1]->text[0] != '/')
                SX_FAIL(rd, "(%s \"%s\") is not an absolute path", h, f->kids[1]->text);
    } else if (strcmp(h, "regex") == 0) {
        if (f->n != 2 || f->kids[1]->type != SX_REGEX)
            SX_FAIL(rd, "(regex #\"...\") takes one regex literal");
        if (f->kids[1]->text[0] != '^')
            SX_FAIL(rd, "regex not anchored at the start");
    } else if (strcmp(h, "require-any") == 0 || strcmp(h, "require-all") == 0 ||
               strcmp(h, "require-not") == 0) {
        if (f->n < 2 || (strcmp(h, "require-not") == 0 && f->n != 2))
            SX_FAIL(rd, "(%s) with a wrong number of filters", h);
        for (size_t i = 1; i < f->n; i++)
            if (sb_filter(rd, f->kids[i]) < 0)
                return -1;
    } else if (strcmp(h, "file-mode") == 0) {
        if (f->n != 2 || f->kids[1]->type != SX_NUM || f->kids[1]->num > 07777)
            SX_FAIL(rd, "(file-mode #oNNNN) takes one mode");
    } else if (strcmp(h, "target") == 0) {
        if (f->n != 2 || f->kids[1]->type != SX_SYM ||
            !in_list(f->kids[1]->text, targets, ARRAY_SIZE(targets)))
            SX_FAIL(rd, "(target WHO) takes a known symbol");
    } else if (strcmp(h, "remote") == 0 || strcmp(h, "local") == 0) {
        if (f->n != 3 || f->kids[1]->type != SX_SYM ||
            !in_list(f->kids[1]->text, net_kinds, ARRAY_SIZE(net_kinds)))
            SX_FAIL(rd, "(%s KIND ADDRESS) with an unknown kind", h);
        if (strcmp(f->kids[1]->text, "unix-socket") == 0) {
            if (f->kids[2]->type != SX_LIST || strcmp(head(f->kids[2]) ? head(f->kids[2]) : "",
                                                     "path-literal") != 0)
                SX_FAIL(rd, "(%s unix-socket (path-literal ...))", h);
            if (sb_filter(rd, f->kids[2]) < 0)
                return -1;
        } else if (f->kids[2]->type != SX_STR || !sb_hostport(f->kids[2]->text)) {
            SX_FAIL(rd, "(%s %s \"HOST:PORT\") with a bad address", h, f->kids[1]->text);
        }
    } else {
        SX_FAIL(rd, "unknown filter '%s'", h);
    }
    return 0;
}

/* (version 1) (deny default) then (allow|deny OP... FILTER...)*. */
static int sb_shape(struct sx_reader *rd, const struct sx *root) {
    if (root->n < 2)
        SX_FAIL(rd, "fewer than two forms");
    for (size_t i = 0; i < root->n; i++) {
        const struct sx *f = root->kids[i];
        rd->line = f->line;
        if (f->type != SX_LIST)
            SX_FAIL(rd, "a top-level atom");
    }
    const struct sx *v = root->kids[0];
    rd->line = v->line;
    if (v->n != 2 || !is_sym(v->kids[0], "version") || v->kids[1]->type != SX_NUM ||
        strcmp(v->kids[1]->text, "1") != 0)
        SX_FAIL(rd, "the first form is not (version 1)");
    const struct sx *dd = root->kids[1];
    rd->line = dd->line;
    if (dd->n != 2 || !is_sym(dd->kids[0], "deny") || !is_sym(dd->kids[1], "default"))
        SX_FAIL(rd, "the second form is not (deny default)");

    for (size_t i = 2; i < root->n; i++) {
        const struct sx *f = root->kids[i];
        rd->line = f->line;
        const char *h = head(f);
        if (!h || (strcmp(h, "allow") != 0 && strcmp(h, "deny") != 0))
            SX_FAIL(rd, "a form that is neither allow nor deny");
        size_t k = 1;
        for (; k < f->n && f->kids[k]->type == SX_SYM; k++) {
            if (!in_list(f->kids[k]->text, sb_ops, ARRAY_SIZE(sb_ops)))
                SX_FAIL(rd, "unknown operation '%s'", f->kids[k]->text);
            if (strcmp(f->kids[k]->text, "default") == 0)
                SX_FAIL(rd, "'default' after the second form");
        }
        if (k == 1)
            SX_FAIL(rd, "(%s) without an operation", h);
        for (; k < f->n; k++) {
            if (f->kids[k]->type != SX_LIST)
                SX_FAIL(rd, "an operation or atom after the filters");
            if (sb_filter(rd, f->kids[k]) < 0)
                return -1;
        }
    }
    return 0;
}

/* Read and shape-check text; on success *ret is the list of top-level forms. */
static int sb_parse(const char *text, struct sx **ret, char why[256]) {
    struct sx_reader rd = {.s = text, .line = 1};
    struct sx *root = sx_new(SX_LIST, 0);
    int r = sx_read(&rd, root);
    if (r == 0)
        r = sb_shape(&rd, root);
    if (r < 0) {
        snprintf(why, 256, "%s", rd.why);
        sx_free(root);
        return -1;
    }
    *ret = root;
    return 0;
}

static struct sx *sb_parse_ok(const char *text) {
    char why[256];
    struct sx *root = NULL;
    if (sb_parse(text, &root, why) < 0)
        fail_msg("SBPL check failed: %s\n%s", why, text);
    return root;
}

/* ---- queries on parsed forms ---------------------------------------------------------- */

static bool has_op(const struct sx *f, const char *op) {
    for (size_t k = 1; k < f->n && f->kids[k]->type == SX_SYM; k++)
        if (strcmp(f->kids[k]->text, op) == 0)
            return true;
    return false;
}

static size_t n_ops(const struct sx *f) {
    size_t k = 1;
    while (k < f->n && f->kids[k]->type == SX_SYM)
        k++;
    return k - 1;
}

static bool is_allow(const struct sx *f) {
    return strcmp(head(f), "allow") == 0;
}

/* The string argument of the form's filter number i (0-based) of kind `kind`, or NULL. */
static const char *filter_arg(const struct sx *f, size_t i, const char *kind) {
    size_t k = 1 + n_ops(f) + i;
    if (k >= f->n || strcmp(head(f->kids[k]), kind) != 0)
        return NULL;
    return f->kids[k]->kids[1]->text;
}

static size_t n_filters(const struct sx *f) {
    return f->n - 1 - n_ops(f);
}

/* Does some form (head allow or deny, with op) carry (kind "path")? */
static bool has_filter(const struct sx *root, const char *action, const char *op, const char *kind,
                       const char *path) {
    for (size_t i = 2; i < root->n; i++) {
        const struct sx *f = root->kids[i];
        if (strcmp(head(f), action) != 0 || !has_op(f, op))
            continue;
        for (size_t j = 0; j < n_filters(f); j++) {
            const char *a = filter_arg(f, j, kind);
            if (a && strcmp(a, path) == 0)
                return true;
        }
    }
    return false;
}

static bool under(const char *path, const char *dir) {
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && path[n] == '/';
}

static char *join(const char *a, const char *b) {
    char *s = NULL;
    assert_true(asprintf(&s, "%s/%s", a, b) > 0);
    return s;
}

static bool is_setuid_deny(const struct sx *f) {
    if (is_allow(f) || !has_op(f, "process-exec*") || n_ops(f) != 1 || n_filters(f) != 1)
        return false;
    const struct sx *ra = f->kids[2];
    if (strcmp(head(ra), "require-any") != 0 || ra->n != 3)
        return false;
    return strcmp(head(ra->kids[1]), "file-mode") == 0 && ra->kids[1]->kids[1]->num == 04000 &&
           strcmp(head(ra->kids[2]), "file-mode") == 0 && ra->kids[2]->kids[1]->num == 02000;
}

static bool is_utc_allow(const struct sx *f) {
    if (!is_allow(f) || !has_op(f, "file-read*") || n_ops(f) != 1 || n_filters(f) == 0)
        return false;
    for (size_t j = 0; j < n_filters(f); j++) {
        const struct sx *r = f->kids[2 + j];
        if (strcmp(head(r), "regex") != 0 ||
            strncmp(r->kids[1]->text, "^/private/var/db/timezone/", 26) != 0)
            return false;
    }
    return true;
}

/* The order sbpl_render.c promises and what each layer may say. */
static void check_semantics(const struct sbplr_input *in, const struct sx *root) {
    size_t first_deny = 0, utc = 0, setuid = 0;
    for (size_t i = 2; i < root->n; i++) {
        const struct sx *f = root->kids[i];
        if (!is_allow(f) && !first_deny)
            first_deny = i;
        if (is_utc_allow(f)) {
            assert_int_equal(utc, 0); /* one carve-back */
            utc = i;
        }
        if (is_setuid_deny(f)) {
            assert_int_equal(setuid, 0);
            setuid = i;
        }
    }
    assert_true(first_deny > 2);
    /* grants: only allows before the first narrowing denial */
    for (size_t i = 2; i < first_deny; i++)
        assert_true(is_allow(root->kids[i]));
    /* narrowing denials, then the UTC carve-back right after them */
    assert_true(utc > first_deny);
    for (size_t i = first_deny; i < utc; i++)
        assert_false(is_allow(root->kids[i]));
    /* then the setuid deny */
    assert_int_equal(setuid, utc + 1);
    /* then the user's deny paths, last; no allow after the setuid deny */
    for (size_t i = setuid + 1; i < root->n; i++)
        assert_false(is_allow(root->kids[i]));
    const struct sx *last = root->kids[root->n - 1];
    if (in->n_deny == 0) {
        assert_int_equal(setuid, root->n - 1);
    } else {
        assert_int_equal(setuid + 3, root->n);
        /* the ancestors of every deny path may not be renamed away: exactly
         * their proper ancestors but "/", as literals, write ops only */
        const struct sx *anc = root->kids[setuid + 1];
        assert_false(is_allow(anc));
        assert_int_equal(n_ops(anc), 1);
        assert_true(has_op(anc, "file-write*"));
        /* every filter is a proper ancestor (not "/") of some deny path,
         * no two are equal, and every such ancestor is there */
        size_t want = 0;
        for (size_t j = 0; j < in->n_deny; j++) {
            for (const char *c = in->deny[j] + 1; (c = strchr(c, '/')); c++) {
                size_t len = (size_t)(c - in->deny[j]);
                bool found = false;
                for (size_t k = 0; k < n_filters(anc) && !found; k++) {
                    const char *a = filter_arg(anc, k, "literal");
                    assert_non_null(a);
                    found = strlen(a) == len && memcmp(a, in->deny[j], len) == 0;
                }
                assert_true(found);
            }
        }
        for (size_t k = 0; k < n_filters(anc); k++) {
            const char *a = filter_arg(anc, k, "literal");
            bool is_anc = false;
            for (size_t j = 0; j < in->n_deny && !is_anc; j++)
                is_anc = strncmp(a, in->deny[j], strlen(a)) == 0 && in->deny[j][strlen(a)] == '/';
            assert_true(is_anc && strcmp(a, "/") != 0);
            for (size_t k2 = 0; k2 < k; k2++)
                assert_string_not_equal(a, filter_arg(anc, k2, "literal"));
            want++;
        }
        assert_int_equal(n_filters(anc), want);
        assert_false(is_allow(last));
        assert_true(has_op(last, "file-read*") && has_op(last, "file-write*") &&
                    has_op(last, "process-exec*"));
        assert_int_equal(n_filters(last), in->n_deny);
        for (size_t j = 0; j < in->n_deny; j++) {
            const char *a = filter_arg(last, j, "subpath");
            assert_non_null(a);
            assert_string_equal(a, in->deny[j]); /* unescaped by the reader: a round trip */
        }
    }

    /* the narrowing layer names what the header says */
    for (size_t i = first_deny; i < utc; i++)
        assert_true(n_ops(root->kids[i]) >= 1);
    assert_true(has_filter(root, "deny", "file-read*", "literal", "/private/etc/localtime"));
    _cleanup_free_ char *gp = join(in->home, "Library/Preferences/.GlobalPreferences.plist");
    _cleanup_free_ char *byhost = join(in->home, "Library/Preferences/ByHost");
    assert_true(has_filter(root, "deny", "file-read*", "literal", gp));
    assert_true(has_filter(root, "deny", "file-read*", "subpath", byhost));
    static const char *const denied_ops[] = {"system-socket", "socket-ioctl", "sysctl-write"};
    for (size_t k = 0; k < ARRAY_SIZE(denied_ops); k++) {
        bool found = false;
        for (size_t i = first_deny; i < utc; i++)
            found |= has_op(root->kids[i], denied_ops[k]) && n_filters(root->kids[i]) == 0;
        assert_true(found);
    }

    /* what is writable: exactly the trees the header lists */
    static const char *const entries[] = AGENT_NARROW_HOME_ENTRIES;
    static const char *const shared_rw[] = {"/opt/homebrew", "/private/tmp", "/private/var/tmp",
                                            "/dev/fd"};
    for (size_t i = 2; i < root->n; i++) {
        const struct sx *f = root->kids[i];
        if (!is_allow(f) || !has_op(f, "file-write*"))
            continue;
        for (size_t j = 0; j < n_filters(f); j++) {
            const struct sx *flt = f->kids[1 + n_ops(f) + j];
            const char *kind = head(flt), *p = flt->kids[1]->text;
            if (strcmp(kind, "subpath") != 0) {
                /* device files only */
                assert_true(strcmp(kind, "literal") == 0 || strcmp(kind, "regex") == 0);
                assert_true(strncmp(p, "/dev/", 5) == 0 || strncmp(p, "^/dev/", 6) == 0);
                continue;
            }
            bool ok = strcmp(p, in->cwd) == 0 || strcmp(p, in->tmpdir) == 0 ||
                      in_list(p, shared_rw, ARRAY_SIZE(shared_rw)) ||
                      in_list(p, in->writable, in->n_writable);
            if (strcmp(p, in->home) == 0) {
                assert_false(in->narrow_home);
                ok = true;
            } else if (under(p, in->home) && !ok) {
                const char *name = p + strlen(in->home) + 1;
                ok = in_list(name, in->state_dirs, in->n_state_dirs) ||
                     (in->narrow_home && in_list(name, entries, ARRAY_SIZE(entries)));
            }
            if (!ok)
                fail_msg("unexpected writable subpath \"%s\"", p);
            /* never an ancestor of home in narrow mode */
            if (in->narrow_home)
                assert_false(under(in->home, p));
        }
    }
    if (in->narrow_home) {
        for (size_t k = 0; k < ARRAY_SIZE(entries); k++) {
            _cleanup_free_ char *p = join(in->home, entries[k]);
            assert_true(has_filter(root, "allow", "file-write*", "subpath", p));
        }
    } else {
        assert_true(has_filter(root, "allow", "file-write*", "subpath", in->home));
    }
    for (size_t k = 0; k < in->n_state_dirs; k++) {
        _cleanup_free_ char *p = join(in->home, in->state_dirs[k]);
        assert_true(has_filter(root, "allow", "file-write*", "subpath", p));
    }
    assert_true(has_filter(root, "allow", "file-write*", "subpath", in->cwd));
    assert_true(has_filter(root, "allow", "file-write*", "subpath", in->tmpdir));
    for (size_t k = 0; k < in->n_writable; k++)
        assert_true(has_filter(root, "allow", "file-write*", "subpath", in->writable[k]));
    /* read-only extras: readable and mappable, in a form that grants no write */
    for (size_t k = 0; k < in->n_read_only; k++) {
        assert_true(has_filter(root, "allow", "file-read*", "subpath", in->read_only[k]));
        assert_true(has_filter(root, "allow", "file-map-executable", "subpath", in->read_only[k]));
        if (!in_list(in->read_only[k], in->writable, in->n_writable))
            assert_false(has_filter(root, "allow", "file-write*", "subpath", in->read_only[k]));
    }

    /* listening on loopback only */
    for (size_t i = 2; i < root->n; i++) {
        const struct sx *f = root->kids[i];
        if (!is_allow(f) || !(has_op(f, "network-bind") || has_op(f, "network-inbound")))
            continue;
        assert_int_equal(n_filters(f), 1);
        const struct sx *l = f->kids[1 + n_ops(f)];
        assert_string_equal(head(l), "local");
        assert_string_equal(l->kids[2]->text, "localhost:*");
    }
}

/* ---- inputs ---------------------------------------------------------------------------- */

static struct sbplr_input base_input(void) {
    return (struct sbplr_input){
        .home = "/Users/alice",
        .cwd = "/Users/alice/src/proj",
        .tmpdir = "/private/var/folders/xy/abc123/T/lyh-7f3a9c01",
    };
}

static void render_check(const struct sbplr_input *in, const char *golden) {
    _cleanup_free_ char *text = NULL;
    assert_int_equal(sbplr_render(in, &text), 0);
    assert_non_null(text);
    assert_true(text[strlen(text) - 1] == '\n');
    _cleanup_sx_ struct sx *root = sb_parse_ok(text);
    check_semantics(in, root);
    if (golden)
        check_golden(golden, text);
}

/* ---- golden cases -------------------------------------------------------------------- */

static void test_default(void **state) {
    struct sbplr_input in = base_input();
    render_check(&in, "default");
}

static void test_narrow_home(void **state) {
    static const char *const dirs[] = {".aider", ".ollama", "Library"};
    struct sbplr_input in = base_input();
    in.narrow_home = true;
    in.state_dirs = dirs;
    in.n_state_dirs = ARRAY_SIZE(dirs);
    render_check(&in, "narrow_home");
}

static void test_extra_paths(void **state) {
    static const char *const rw[] = {"/Volumes/work/shared", "/Users/alice/.cargo"};
    static const char *const ro[] = {"/Volumes/datasets", "/opt/local"};
    static const char *const deny[] = {"/Users/alice/.ssh", "/Users/alice/.aws",
                                       "/Users/alice/src/proj/secrets"};
    struct sbplr_input in = base_input();
    in.writable = rw;
    in.n_writable = ARRAY_SIZE(rw);
    in.read_only = ro;
    in.n_read_only = ARRAY_SIZE(ro);
    in.deny = deny;
    in.n_deny = ARRAY_SIZE(deny);
    render_check(&in, "extra_paths");
}

static void test_escaping(void **state) {
    static const char *const dirs[] = {"st\"ate\\dir"};
    static const char *const rw[] = {"/Users/o\"brien/My \"Projects\"\\2024"};
    static const char *const ro[] = {"/Volumes/back\\slash", "/Volumes/caf\xc3\xa9 (1)"};
    static const char *const deny[] = {"/Users/o\"brien/\"quoted\"", "/Users/o\"brien/a\\\"b"};
    struct sbplr_input in = {
        .home = "/Users/o\"brien",
        .cwd = "/Users/o\"brien/src/we\"ird\\dir",
        .tmpdir = "/private/tmp/lyh \\ \"t\"",
        .state_dirs = dirs,
        .n_state_dirs = ARRAY_SIZE(dirs),
        .writable = rw,
        .n_writable = ARRAY_SIZE(rw),
        .read_only = ro,
        .n_read_only = ARRAY_SIZE(ro),
        .deny = deny,
        .n_deny = ARRAY_SIZE(deny),
    };
    render_check(&in, "escaping");

    /* and in narrow-home mode, where home is joined with every entry */
    in.narrow_home = true;
    render_check(&in, NULL);

    /* the escaped forms as they appear in the text */
    _cleanup_free_ char *text = NULL;
    assert_int_equal(sbplr_render(&in, &text), 0);
    assert_non_null(strstr(text, "(subpath \"/Users/o\\\"brien/src/we\\\"ird\\\\dir\")"));
    assert_non_null(strstr(text, "(subpath \"/Users/o\\\"brien/a\\\\\\\"b\")"));
    assert_null(strstr(text, "brien/a\\\"b\""));
}

/* The longest lists render and check (no golden). */
static void test_max_lists(void **state) {
    char names[SBPLR_PATHS_MAX][32], paths[SBPLR_PATHS_MAX][48];
    const char *dirs[SBPLR_PATHS_MAX], *list[SBPLR_PATHS_MAX];
    for (size_t i = 0; i < SBPLR_PATHS_MAX; i++) {
        snprintf(names[i], sizeof(names[i]), ".state%zu", i);
        snprintf(paths[i], sizeof(paths[i]), "/Volumes/v%zu", i);
        dirs[i] = names[i];
        list[i] = paths[i];
    }
    struct sbplr_input in = base_input();
    in.state_dirs = dirs;
    in.n_state_dirs = SBPLR_PATHS_MAX;
    in.writable = list;
    in.n_writable = SBPLR_PATHS_MAX;
    in.read_only = list;
    in.n_read_only = SBPLR_PATHS_MAX;
    in.deny = list;
    in.n_deny = SBPLR_PATHS_MAX;
    render_check(&in, NULL);
}

/* ---- validation ----------------------------------------------------------------------- */

static void expect_einval(const struct sbplr_input *in) {
    char *text = (char *)0x1;
    assert_int_equal(sbplr_render(in, &text), -EINVAL);
    assert_ptr_equal(text, (char *)0x1); /* untouched on failure */
}

static const char *const bad_paths[] = {
    "Users/alice", "", ".", "./x", "/Users/alice/", "/Users//alice", "//Users", "/Users/./alice",
    "/Users/../alice", "/Users/alice/.", "/Users/alice/..", "/Users/al\x01ice", "/Users/al\nice",
    ("/Users/al\x7f" "ice"), "/Users/al\tice", "/Users/alice\x1f",
};

static void test_path_valid(void **state) {
    static const char *const good[] = {"/", "/Users/alice", "/a", "/.hidden", "/a/..b/...",
                                       "/with space", "/q\"uote", "/back\\slash", "/caf\xc3\xa9"};
    for (size_t i = 0; i < ARRAY_SIZE(good); i++)
        if (!sbplr_path_valid(good[i]))
            fail_msg("\"%s\" refused", good[i]);
    for (size_t i = 0; i < ARRAY_SIZE(bad_paths); i++)
        if (sbplr_path_valid(bad_paths[i]))
            fail_msg("bad path #%zu accepted", i);
    assert_false(sbplr_path_valid(NULL));

    char long_path[SBPLR_PATH_MAX + 1];
    long_path[0] = '/';
    memset(long_path + 1, 'a', SBPLR_PATH_MAX - 2);
    long_path[SBPLR_PATH_MAX - 1] = '\0'; /* 1023 bytes: fits */
    assert_true(sbplr_path_valid(long_path));
    long_path[SBPLR_PATH_MAX - 1] = 'a';
    long_path[SBPLR_PATH_MAX] = '\0'; /* 1024 bytes: too long */
    assert_false(sbplr_path_valid(long_path));
}

static void test_invalid(void **state) {
    expect_einval(NULL);
    struct sbplr_input in;

    for (size_t i = 0; i < ARRAY_SIZE(bad_paths); i++) {
        const char *one[] = {bad_paths[i]};
        in = base_input();
        in.home = bad_paths[i];
        expect_einval(&in);
        in = base_input();
        in.cwd = bad_paths[i];
        expect_einval(&in);
        in = base_input();
        in.tmpdir = bad_paths[i];
        expect_einval(&in);
        in = base_input();
        in.writable = one;
        in.n_writable = 1;
        expect_einval(&in);
        in = base_input();
        in.read_only = one;
        in.n_read_only = 1;
        expect_einval(&in);
        in = base_input();
        in.deny = one;
        in.n_deny = 1;
        expect_einval(&in);
    }

    /* "/" grants everything: refused wherever a path is granted or denied */
    static const char *const root_only[] = {"/"};
    static const char *const with_root[] = {"/Volumes/x", "/"};
    in = base_input();
    in.home = "/";
    expect_einval(&in);
    in = base_input();
    in.cwd = "/";
    expect_einval(&in);
    in = base_input();
    in.tmpdir = "/";
    expect_einval(&in);
    in = base_input();
    in.writable = root_only;
    in.n_writable = 1;
    expect_einval(&in);
    in = base_input();
    in.read_only = with_root;
    in.n_read_only = 2;
    expect_einval(&in);
    in = base_input();
    in.deny = root_only;
    in.n_deny = 1;
    expect_einval(&in);

    /* NULL where a path is needed */
    in = base_input();
    in.home = NULL;
    expect_einval(&in);
    in = base_input();
    in.cwd = NULL;
    expect_einval(&in);
    in = base_input();
    in.tmpdir = NULL;
    expect_einval(&in);
    static const char *const null_entry[] = {NULL};
    in = base_input();
    in.writable = null_entry;
    in.n_writable = 1;
    expect_einval(&in);

    /* state dirs: one component */
    char long_name[257];
    memset(long_name, 'n', 256);
    long_name[256] = '\0';
    const char *const bad_names[] = {"a/b", "..", ".", "", "/abs", "x/", "a\x01", "a\x7f", NULL,
                                     long_name};
    for (size_t i = 0; i < ARRAY_SIZE(bad_names); i++) {
        const char *one[] = {bad_names[i]};
        in = base_input();
        in.state_dirs = one;
        in.n_state_dirs = 1;
        expect_einval(&in);
    }
    long_name[255] = '\0'; /* 255 bytes: fine */
    const char *ok_name[] = {long_name};
    in = base_input();
    in.state_dirs = ok_name;
    in.n_state_dirs = 1;
    char *text = NULL;
    assert_int_equal(sbplr_render(&in, &text), 0);
    free(text);

    /* NULL lists with a count */
    in = base_input();
    in.n_state_dirs = 1;
    expect_einval(&in);
    in = base_input();
    in.n_writable = 1;
    expect_einval(&in);
    in = base_input();
    in.n_read_only = 1;
    expect_einval(&in);
    in = base_input();
    in.n_deny = 1;
    expect_einval(&in);

    /* one entry over the limit, in each list */
    const char *many[SBPLR_PATHS_MAX + 1];
    for (size_t i = 0; i <= SBPLR_PATHS_MAX; i++)
        many[i] = "/Volumes/x";
    const char *many_names[SBPLR_PATHS_MAX + 1];
    for (size_t i = 0; i <= SBPLR_PATHS_MAX; i++)
        many_names[i] = ".x";
    in = base_input();
    in.state_dirs = many_names;
    in.n_state_dirs = SBPLR_PATHS_MAX + 1;
    expect_einval(&in);
    in = base_input();
    in.writable = many;
    in.n_writable = SBPLR_PATHS_MAX + 1;
    expect_einval(&in);
    in = base_input();
    in.read_only = many;
    in.n_read_only = SBPLR_PATHS_MAX + 1;
    expect_einval(&in);
    in = base_input();
    in.deny = many;
    in.n_deny = SBPLR_PATHS_MAX + 1;
    expect_einval(&in);

    /* a home too long for home/<name>/Library/Preferences/... */
    char long_home[SBPLR_PATH_MAX];
    long_home[0] = '/';
    memset(long_home + 1, 'h', SBPLR_PATH_MAX - 256 - 48 - 1);
    long_home[SBPLR_PATH_MAX - 256 - 48] = '\0'; /* strlen 720: 720+304 >= 1024 */
    in = base_input();
    in.home = long_home;
    expect_einval(&in);
    long_home[SBPLR_PATH_MAX - 256 - 48 - 1] = '\0'; /* 719 fits */
    in.home = long_home;
    text = NULL;
    assert_int_equal(sbplr_render(&in, &text), 0);
    free(text);
}

/* ---- the reader's own tests ------------------------------------------------------------ */

#define PRE "(version 1)\n(deny default)\n"

static void expect_reject(const char *text, const char *why) {
    char got[256];
    struct sx *root = NULL;
    if (sb_parse(text, &root, got) == 0) {
        sx_free(root);
        fail_msg("reader accepted a bad profile:\n%s", text);
    }
    if (!strstr(got, why))
        fail_msg("reader refused for '%s', expected '%s', in\n%s", got, why, text);
}

static void test_reader_accepts(void **state) {
    _cleanup_sx_ struct sx *root = sb_parse_ok(
        "; a comment (with \"unbalanced\" things ((\n" PRE
        "(allow file-read* file-write* (subpath \"/a\\\"b\\\\c\") (literal \"/x\"))  ; tail\n"
        "(allow file-read* (regex #\"^/a\\.b\\\"c$\"))\n"
        "(deny process-exec* (require-any (file-mode #o4000) (file-mode #o2000)))\n"
        "(allow network-outbound (remote tcp \"*:443\") (remote unix-socket (path-literal "
        "\"/var/run/x\")))\n"
        "(allow signal (target same-sandbox))\n"
        "(allow sysctl-read (sysctl-name \"hw.ncpu\") (sysctl-name-prefix \"hw.optional.\"))\n"
        "(deny file-read* (require-all (require-not (literal \"/y\")) (subpath \"/z\")))\n"
        "(allow mach-lookup (global-name \"com.apple.x\"))\n");
    assert_int_equal(root->n, 10);
    const struct sx *f = root->kids[2];
    assert_string_equal(f->kids[3]->kids[1]->text, "/a\"b\\c");
    assert_string_equal(root->kids[3]->kids[2]->kids[1]->text, "^/a\\.b\\\"c$");
    assert_int_equal(root->kids[4]->kids[2]->kids[1]->kids[1]->num, 04000);
    assert_true(is_setuid_deny(root->kids[4]));
}

static void test_reader_rejects(void **state) {
    static const struct {
        const char *text, *why;
    } bad[] = {
        /* reading */
        {PRE "(allow file-read*\n", "unbalanced '('"},
        {PRE "(allow file-read* (subpath \"/a\")\n", "unbalanced '('"},
        {PRE "(allow file-read*))\n", "unbalanced ')'"},
        {PRE ")(allow file-read*\n", "unbalanced ')'"},
        {PRE "(allow file-read* (subpath \"/a))", "unterminated string"},
        {PRE "(allow file-read* (subpath \"/a\\\"))", "unterminated string"},
        {PRE "(allow file-read* (subpath \"/a\\nb\"))\n", "bad escape"},
        {PRE "(allow file-read* (subpath \"/a\nb\"))\n", "control byte"},
        {PRE "(allow file-read* (regex #\"^/a))", "unterminated string"},
        {PRE "(deny process-exec* (file-mode #o4008))\n", "bad octal"},
        {PRE "(deny process-exec* (file-mode #o))\n", "bad octal"},
        {PRE "(deny process-exec* (file-mode #x10))\n", "unexpected byte"},
        {PRE "(allow file-read* (subpath \"/a\"\"/b\"))\n", "no delimiter"},
        {PRE "(allow file-read* (subpath '/a))\n", "unexpected byte"},
        {PRE "(allow file-read* [subpath \"/a\"])\n", "unexpected byte"},
        {PRE "(allow file-read* (subpath \"/a\")) \x01\n", "unexpected byte"},
        {PRE "(version 1x)\n", "bad number"},
        /* shape */
        {"", "fewer than two forms"},
        {"(deny default)\n(version 1)\n", "not (version 1)"},
        {"(version 2)\n(deny default)\n", "not (version 1)"},
        {"(version \"1\")\n(deny default)\n", "not (version 1)"},
        {"(version 1)\n(allow default)\n", "not (deny default)"},
        {"(version 1)\n(deny default file-read*)\n", "not (deny default)"},
        {PRE "allow\n", "top-level atom"},
        {PRE "(permit file-read*)\n", "neither allow nor deny"},
        {PRE "((allow file-read*))\n", "neither allow nor deny"},
        {PRE "(allow)\n", "without an operation"},
        {PRE "(allow (subpath \"/a\") file-read*)\n", "without an operation"},
        {PRE "(allow file-read* (subpath \"/a\") file-write*)\n", "after the filters"},
        {PRE "(allow file-reed*)\n", "unknown operation 'file-reed*'"},
        {PRE "(allow network*)\n", "unknown operation"},
        {PRE "(allow default)\n", "'default' after the second form"},
        {PRE "(allow file-read* \"/a\")\n", "after the filters"},
        /* filters */
        {PRE "(allow file-read* (subpaths \"/a\"))\n", "unknown filter 'subpaths'"},
        {PRE "(allow file-read* (\"/a\"))\n", "without a head symbol"},
        {PRE "(allow file-read* ())\n", "without a head symbol"},
        {PRE "(allow file-read* (subpath /a))\n", "takes one string"},
        {PRE "(allow file-read* (subpath \"/a\" \"/b\"))\n", "takes one string"},
        {PRE "(allow file-read* (subpath \"\"))\n", "takes one string"},
        {PRE "(allow file-read* (literal \"a\"))\n", "not an absolute path"},
        {PRE "(allow file-read* (regex \"^/a\"))\n", "one regex literal"},
        {PRE "(allow file-read* (regex #\"/a\"))\n", "not anchored"},
        {PRE "(deny process-exec* (file-mode \"4000\"))\n", "one mode"},
        {PRE "(deny process-exec* (file-mode #o17777))\n", "one mode"},
        {PRE "(deny process-exec* (require-any))\n", "wrong number of filters"},
        {PRE "(deny file-read* (require-not (literal \"/a\") (literal \"/b\")))\n",
         "wrong number of filters"},
        {PRE "(deny file-read* (require-any (literal \"/a\") \"/b\"))\n", "must be a list"},
        {PRE "(deny file-read* (require-any (bogus \"/a\")))\n", "unknown filter 'bogus'"},
        {PRE "(allow signal (target everyone))\n", "known symbol"},
        {PRE "(allow network-outbound (remote sctp \"*:*\"))\n", "unknown kind"},
        {PRE "(allow network-outbound (remote tcp \"example.com:443\"))\n", "bad address"},
        {PRE "(allow network-outbound (remote tcp \"*:99999\"))\n", "bad address"},
        {PRE "(allow network-outbound (remote tcp \"*\"))\n", "bad address"},
        {PRE "(allow network-outbound (remote unix-socket \"/var/run/x\"))\n", "unix-socket"},
        {PRE "(allow network-bind (local ip))\n", "unknown kind"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        expect_reject(bad[i].text, bad[i].why);
}

/* Mistakes in real output are caught: each mutation of a rendered profile must
 * fail the check. */
static void test_reader_mutations(void **state) {
    static const char *const deny[] = {"/Users/o\"brien/x"};
    struct sbplr_input in = base_input();
    in.home = "/Users/o\"brien";
    in.cwd = "/Users/o\"brien/src";
    in.deny = deny;
    in.n_deny = 1;
    _cleanup_free_ char *text = NULL;
    assert_int_equal(sbplr_render(&in, &text), 0);
    _cleanup_sx_ struct sx *ok = sb_parse_ok(text);
    assert_non_null(ok); /* the unmutated text parses */

    static const struct {
        const char *from, *to, *why;
    } mut[] = {
        {"(version 1)", "(version 2)", "not (version 1)"},
        {"(deny default)\n", "", "not (deny default)"},
        {"(allow process-fork)", "(allow process-fork", "unbalanced '('"},
        {"(allow pseudo-tty)", "(allow pseudo-tty))", "unbalanced ')'"},
        {"file-write*", "file-writ*", "unknown operation 'file-writ*'"},
        {"(subpath \"/System\")", "(subpaths \"/System\")", "unknown filter"},
        {"o\\\"brien", "o\"brien", "no delimiter"},
        {"\\.dat$\"", "\\.dat$", "control byte 0x0a in a string"},
        {"(file-mode #o4000)", "(file-mode #o4008)", "bad octal"},
        {"(target same-sandbox)", "(target)", "known symbol"},
        {"(remote tcp \"*:*\")", "(remote tcp \"*:*:x\")", "bad address"},
        {"(literal \"/dev/null\")", "(literal \"dev/null\")", "not an absolute path"},
        {"(allow ipc-posix-sem)", "(allow)", "without an operation"},
        {"(allow ipc-posix-sem)", "(permit ipc-posix-sem)", "neither allow nor deny"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(mut); i++) {
        const char *at = strstr(text, mut[i].from);
        if (!at)
            fail_msg("mutation #%zu: '%s' not in the rendered text", i, mut[i].from);
        char *bad = NULL;
        assert_true(asprintf(&bad, "%.*s%s%s", (int)(at - text), text, mut[i].to,
                             at + strlen(mut[i].from)) > 0);
        expect_reject(bad, mut[i].why);
        free(bad);
    }
}

/* The semantic checks catch what the shape check cannot. */
static void test_semantics_reject(void **state) {
    struct sbplr_input in = base_input();
    _cleanup_free_ char *text = NULL;
    assert_int_equal(sbplr_render(&in, &text), 0);
    _cleanup_sx_ struct sx *root = sb_parse_ok(text);
    /* the UTC carve-back and the setuid deny are found where the renderer puts them */
    size_t utc = 0, setuid = 0;
    for (size_t i = 2; i < root->n; i++) {
        if (is_utc_allow(root->kids[i]))
            utc = i;
        if (is_setuid_deny(root->kids[i]))
            setuid = i;
    }
    assert_true(utc > 2);
    assert_int_equal(setuid, root->n - 1);
    /* forms the predicates must not take for them */
    _cleanup_sx_ struct sx *other = sb_parse_ok(
        PRE "(deny process-exec* (require-any (file-mode #o4000) (file-mode #o0002)))\n"
            "(allow file-read* (regex #\"^/private/var/db/timezone/.*\") (literal \"/x\"))\n"
            "(deny process-exec (require-any (file-mode #o4000) (file-mode #o2000)))\n");
    for (size_t i = 2; i < other->n; i++) {
        assert_false(is_setuid_deny(other->kids[i]));
        assert_false(is_utc_allow(other->kids[i]));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reader_accepts),
        cmocka_unit_test(test_reader_rejects),
        cmocka_unit_test(test_reader_mutations),
        cmocka_unit_test(test_semantics_reject),
        cmocka_unit_test(test_default),
        cmocka_unit_test(test_narrow_home),
        cmocka_unit_test(test_extra_paths),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_max_lists),
        cmocka_unit_test(test_path_valid),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
