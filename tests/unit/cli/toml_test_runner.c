/* Runs cli/toml.c against the toml-test conformance corpus (toml-lang/toml-test),
 * the files listed in tests/files-toml-1.0.0: every valid/X.toml must parse and
 * its tree, rendered as toml-test's tagged JSON, must equal valid/X.json; every
 * invalid/X.toml must be refused.
 *
 * The corpus is not in the repository. Where it is: the first argument, else
 * $LYH_TOML_TEST_DIR, else /work/shared/toml-test. When that default is
 * missing the test is skipped (exit 77, ctest's SKIP_RETURN_CODE); a corpus
 * named explicitly (argument or variable) must exist.
 *
 * Comparison follows toml-test's rules: the rendered tree and the expected
 * file are both read as JSON and compared as values; tables regardless of key
 * order, integers and floats by value (nan equals nan, -0 differs from 0),
 * datetimes after normalising the spellings RFC 3339 allows (t/T/space,
 * z/Z/+00:00/-00:00, trailing zeros of the fraction).
 *
 * Usage: toml_test_runner [-v] [CORPUS_DIR]   (-v: print every refusal's message) */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/toml.h"
#include "common/macros.h"

#ifndef DEFAULT_CORPUS
#define DEFAULT_CORPUS "/work/shared/toml-test"
#endif
#define FILE_LIST "tests/files-toml-1.0.0"
#define INPUT_MAX (256u * 1024u)
#define JSON_DEPTH_MAX 256
#define EXIT_SKIP 77

/* Files of the 1.0.0 list this parser knowingly gets wrong, each with why.
 * Kept empty; an entry here is reported but does not fail the run. */
static const struct {
    const char *path;
    const char *reason;
} known_unsupported[] = {
    {NULL, NULL},
};

/* ---- a growable string ------------------------------------------------------------ */

struct sbuf {
    char *s; /* owns */
    size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        size_t room = b->cap - b->len;
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0)
            abort();
        if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap - b->len <= (size_t)n)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s)
            abort();
        b->s = s;
        b->cap = cap;
    }
}

/* Any byte, NUL included. */
static void sb_putc(struct sbuf *b, char c) {
    if (b->cap - b->len < 2) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        char *s = realloc(b->s, cap);
        if (!s)
            abort();
        b->s = s;
        b->cap = cap;
    }
    b->s[b->len++] = c;
    b->s[b->len] = '\0';
}

/* ---- rendering a TOML tree as tagged JSON ------------------------------------------- */

static void render_json_string(struct sbuf *b, const char *s, size_t len) {
    sb_printf(b, "\"");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            sb_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            sb_printf(b, "\\u%04x", c);
        else
            sb_printf(b, "%c", c);
    }
    sb_printf(b, "\"");
}

static void render_datetime(struct sbuf *b, const struct toml_value *v) {
    const struct toml_datetime *dt = &v->u.datetime;
    if (v->type != TOML_LOCAL_TIME)
        sb_printf(b, "%04u-%02u-%02u", dt->year, dt->month, dt->day);
    if (v->type == TOML_LOCAL_DATE)
        return;
    if (v->type != TOML_LOCAL_TIME)
        sb_printf(b, "T");
    sb_printf(b, "%02u:%02u:%02u", dt->hour, dt->minute, dt->second);
    if (dt->nanosecond) {
        char frac[16];
        snprintf(frac, sizeof(frac), "%09u", (unsigned)dt->nanosecond);
        size_t n = strlen(frac);
        while (n > 1 && frac[n - 1] == '0')
            n--;
        sb_printf(b, ".%.*s", (int)n, frac);
    }
    if (v->type == TOML_DATETIME) {
        int off = dt->offset_minutes;
        if (off == 0)
            sb_printf(b, "Z");
        else
            sb_printf(b, "%c%02d:%02d", off < 0 ? '-' : '+', abs(off) / 60, abs(off) % 60);
    }
}

/* The shortest %g that reads back as the same double. */
static void render_float(struct sbuf *b, double d) {
    char s[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, sizeof(s), "%.*g", prec, d);
        if (strtod(s, NULL) == d)
            break;
    }
    sb_printf(b, "\"%s\"", s);
}

static const char *tag_name(enum toml_type t) {
    switch (t) {
    case TOML_STRING:
        return "string";
    case TOML_INTEGER:
        return "integer";
    case TOML_FLOAT:
        return "float";
    case TOML_BOOL:
        return "bool";
    case TOML_DATETIME:
        return "datetime";
    case TOML_LOCAL_DATETIME:
        return "datetime-local";
    case TOML_LOCAL_DATE:
        return "date-local";
    case TOML_LOCAL_TIME:
        return "time-local";
    default:
        return "?";
    }
}

/* Recursion is bounded by TOML_MAX_DEPTH (the parser's guarantee). */
static void render(struct sbuf *b, const struct toml_value *v) {
    if (v->type == TOML_TABLE) {
        const struct toml_key *k;
        const struct toml_value *item;
        sb_printf(b, "{");
        for (size_t i = 0; (item = toml_table_at(v, i, &k)); i++) {
            if (i)
                sb_printf(b, ",");
            render_json_string(b, k->name, k->len);
            sb_printf(b, ":");
            render(b, item);
        }
        sb_printf(b, "}");
        return;
    }
    if (v->type == TOML_ARRAY) {
        const struct toml_value *item;
        sb_printf(b, "[");
        for (size_t i = 0; (item = toml_array_at(v, i)); i++) {
            if (i)
                sb_printf(b, ",");
            render(b, item);
        }
        sb_printf(b, "]");
        return;
    }
    sb_printf(b, "{\"type\":\"%s\",\"value\":", tag_name(v->type));
    switch (v->type) {
    case TOML_STRING:
        render_json_string(b, v->u.string.ptr, v->u.string.len);
        break;
    case TOML_INTEGER:
        sb_printf(b, "\"%lld\"", (long long)v->u.integer);
        break;
    case TOML_FLOAT:
        if (isnan(v->u.floating))
            sb_printf(b, "\"nan\"");
        else if (isinf(v->u.floating))
            sb_printf(b, "\"%sinf\"", v->u.floating < 0 ? "-" : "");
        else
            render_float(b, v->u.floating);
        break;
    case TOML_BOOL:
        sb_printf(b, "\"%s\"", v->u.boolean ? "true" : "false");
        break;
    default:
        sb_printf(b, "\"");
        render_datetime(b, v);
        sb_printf(b, "\"");
        break;
    }
    sb_printf(b, "}");
}

/* ---- a small JSON reader (objects, arrays, strings: all tagged JSON uses) ---------- */

enum json_type { J_OBJECT, J_ARRAY, J_STRING };

struct json {
    enum json_type type;
    char *str; /* owns; J_STRING: the bytes */
    size_t len;
    size_t n;            /* J_OBJECT, J_ARRAY: members */
    char **keys;         /* owns, J_OBJECT; key i has length key_lens[i] */
    size_t *key_lens;    /* owns */
    struct json **items; /* owns */
};

static void json_free(struct json *j) {
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++) {
        if (j->keys)
            free(j->keys[i]);
        json_free(j->items[i]);
    }
    free(j->keys);
    free(j->key_lens);
    free(j->items);
    free(j->str);
    free(j);
}

struct jreader {
    const char *p, *end;
};

static void jws(struct jreader *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static void put_utf8(struct sbuf *b, uint32_t cp) {
    if (cp < 0x80) {
        sb_putc(b, (char)cp);
    } else if (cp < 0x800) {
        sb_putc(b, (char)(0xC0 | (cp >> 6)));
        sb_putc(b, (char)(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        sb_putc(b, (char)(0xE0 | (cp >> 12)));
        sb_putc(b, (char)(0x80 | ((cp >> 6) & 0x3F)));
        sb_putc(b, (char)(0x80 | (cp & 0x3F)));
    } else {
        sb_putc(b, (char)(0xF0 | (cp >> 18)));
        sb_putc(b, (char)(0x80 | ((cp >> 12) & 0x3F)));
        sb_putc(b, (char)(0x80 | ((cp >> 6) & 0x3F)));
        sb_putc(b, (char)(0x80 | (cp & 0x3F)));
    }
}

static int hex4(const char *s, const char *end, uint32_t *ret) {
    uint32_t v = 0;
    if (end - s < 4)
        return -EINVAL;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (uint32_t)(c - 'A' + 10);
        else
            return -EINVAL;
    }
    *ret = v;
    return 0;
}

/* At '"'. The result may contain NUL bytes ("\u0000"): use the length. */
static int jstring(struct jreader *r, char **ret, size_t *ret_len) {
    struct sbuf b = {0};
    r->p++;
    sb_printf(&b, "%s", "");
    while (r->p < r->end && *r->p != '"') {
        char c = *r->p++;
        if (c != '\\') {
            sb_putc(&b, c);
            continue;
        }
        if (r->p >= r->end)
            goto bad;
        c = *r->p++;
        uint32_t cp;
        switch (c) {
        case '"':
        case '\\':
        case '/':
            sb_putc(&b, c);
            break;
        case 'b':
            sb_putc(&b, '\b');
            break;
        case 'f':
            sb_putc(&b, '\f');
            break;
        case 'n':
            sb_putc(&b, '\n');
            break;
        case 'r':
            sb_putc(&b, '\r');
            break;
        case 't':
            sb_putc(&b, '\t');
            break;
        case 'u':
            if (hex4(r->p, r->end, &cp) < 0)
                goto bad;
            r->p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' ||
                    hex4(r->p + 2, r->end, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
                    goto bad;
                r->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            put_utf8(&b, cp);
            break;
        default:
            goto bad;
        }
    }
    if (r->p >= r->end)
        goto bad;
    r->p++;
    *ret = b.s;
    *ret_len = b.len;
    return 0;
bad:
    free(b.s);
    return -EINVAL;
}

static int jvalue(struct jreader *r, int depth, struct json **ret) {
    struct json *j;
    int rc;

    if (depth > JSON_DEPTH_MAX)
        return -ELOOP;
    jws(r);
    if (r->p >= r->end)
        return -EINVAL;
    j = calloc(1, sizeof(*j));
    if (!j)
        abort();
    if (*r->p == '"') {
        j->type = J_STRING;
        rc = jstring(r, &j->str, &j->len);
        if (rc < 0)
            goto bad;
        *ret = j;
        return 0;
    }
    if (*r->p != '{' && *r->p != '[') {
        rc = -EINVAL;
        goto bad;
    }
    bool obj = *r->p == '{';
    char close = obj ? '}' : ']';
    j->type = obj ? J_OBJECT : J_ARRAY;
    r->p++;
    jws(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        *ret = j;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        size_t klen = 0;
        struct json *item;
        jws(r);
        if (obj) {
            if (r->p >= r->end || *r->p != '"') {
                rc = -EINVAL;
                goto bad;
            }
            rc = jstring(r, &key, &klen);
            if (rc < 0)
                goto bad;
            jws(r);
            if (r->p >= r->end || *r->p != ':') {
                free(key);
                rc = -EINVAL;
                goto bad;
            }
            r->p++;
        }
        rc = jvalue(r, depth + 1, &item);
        if (rc < 0) {
            free(key);
            goto bad;
        }
        j->items = realloc(j->items, (j->n + 1) * sizeof(*j->items));
        if (!j->items)
            abort();
        if (obj) {
            j->keys = realloc(j->keys, (j->n + 1) * sizeof(*j->keys));
            j->key_lens = realloc(j->key_lens, (j->n + 1) * sizeof(*j->key_lens));
            if (!j->keys || !j->key_lens)
                abort();
            j->keys[j->n] = key;
            j->key_lens[j->n] = klen;
        }
        j->items[j->n++] = item;
        jws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == close) {
            r->p++;
            break;
        }
        rc = -EINVAL;
        goto bad;
    }
    *ret = j;
    return 0;
bad:
    json_free(j);
    return rc;
}

static int json_parse(const char *s, size_t len, struct json **ret) {
    struct jreader r = {s, s + len};
    struct json *j;
    int rc = jvalue(&r, 0, &j);
    if (rc < 0)
        return rc;
    jws(&r);
    if (r.p != r.end) {
        json_free(j);
        return -EINVAL;
    }
    *ret = j;
    return 0;
}

/* ---- comparing ------------------------------------------------------------------------ */

static const struct json *member(const struct json *obj, const char *key, size_t len) {
    for (size_t i = 0; i < obj->n; i++)
        if (obj->key_lens[i] == len && memcmp(obj->keys[i], key, len) == 0)
            return obj->items[i];
    return NULL;
}

/* {"type": "...", "value": "..."} with both strings. */
static bool is_tagged(const struct json *j, const char **type, const struct json **value) {
    if (j->type != J_OBJECT || j->n != 2)
        return false;
    const struct json *t = member(j, "type", 4), *v = member(j, "value", 5);
    if (!t || !v || t->type != J_STRING || v->type != J_STRING)
        return false;
    *type = t->str;
    *value = v;
    return true;
}

/* RFC 3339 spellings that mean the same: T for t or space, Z for z, +00:00
 * and -00:00; no trailing zeros in the fraction. */
static void normalise_datetime(const char *in, char *out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; in[i] && n + 1 < cap; i++) {
        char c = in[i];
        if (c == 't' || (c == ' ' && i == 10))
            c = 'T';
        if (c == 'z')
            c = 'Z';
        out[n++] = c;
    }
    out[n] = '\0';
    char *dot = strchr(out, '.');
    if (dot) {
        char *e = dot + 1;
        while (*e >= '0' && *e <= '9')
            e++;
        char *z = e;
        while (z > dot + 1 && z[-1] == '0')
            z--;
        if (z == dot + 1)
            z = dot;
        memmove(z, e, strlen(e) + 1);
    }
    size_t l = strlen(out);
    if (l >= 6 && (strcmp(out + l - 6, "+00:00") == 0 || strcmp(out + l - 6, "-00:00") == 0))
        strcpy(out + l - 6, "Z");
}

static bool scalar_equal(const char *type, const struct json *want, const struct json *got) {
    if (strcmp(type, "string") == 0 || strcmp(type, "bool") == 0)
        return want->len == got->len && memcmp(want->str, got->str, want->len) == 0;
    if (strcmp(type, "integer") == 0) {
        char *e1, *e2;
        errno = 0;
        long long a = strtoll(want->str, &e1, 10), b = strtoll(got->str, &e2, 10);
        return errno == 0 && *e1 == '\0' && *e2 == '\0' && a == b;
    }
    if (strcmp(type, "float") == 0) {
        char *e1, *e2;
        double a = strtod(want->str, &e1), b = strtod(got->str, &e2);
        if (*e1 || *e2)
            return false;
        if (isnan(a) || isnan(b))
            return isnan(a) && isnan(b);
        return a == b && signbit(a) == signbit(b);
    }
    if (strcmp(type, "datetime") == 0 || strcmp(type, "datetime-local") == 0 ||
        strcmp(type, "date-local") == 0 || strcmp(type, "time-local") == 0) {
        char a[128], b[128];
        normalise_datetime(want->str, a, sizeof(a));
        normalise_datetime(got->str, b, sizeof(b));
        return strcmp(a, b) == 0;
    }
    return false;
}

/* Writes where the first difference is into why. */
static bool json_equal(const struct json *want, const struct json *got, struct sbuf *why,
                       const char *path) {
    const char *wt, *gt;
    const struct json *wv, *gv;
    bool wtag = is_tagged(want, &wt, &wv), gtag = is_tagged(got, &gt, &gv);

    if (wtag || gtag) {
        if (!wtag || !gtag) {
            sb_printf(why, "%s: tagged value on one side only", path);
            return false;
        }
        if (strcmp(wt, gt) != 0) {
            sb_printf(why, "%s: type %s expected, got %s", path, wt, gt);
            return false;
        }
        if (!scalar_equal(wt, wv, gv)) {
            sb_printf(why, "%s: %s '%s' expected, got '%s'", path, wt, wv->str, gv->str);
            return false;
        }
        return true;
    }
    if (want->type != got->type) {
        sb_printf(why, "%s: JSON type differs", path);
        return false;
    }
    if (want->n != got->n) {
        sb_printf(why, "%s: %zu members expected, got %zu", path, want->n, got->n);
        return false;
    }
    for (size_t i = 0; i < want->n; i++) {
        char sub[512];
        const struct json *g;
        if (want->type == J_OBJECT) {
            snprintf(sub, sizeof(sub), "%s.%s", path, want->keys[i]);
            g = member(got, want->keys[i], want->key_lens[i]);
            if (!g) {
                sb_printf(why, "%s: missing", sub);
                return false;
            }
        } else {
            snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
            g = got->items[i];
        }
        if (!json_equal(want->items[i], g, why, sub))
            return false;
    }
    return true;
}

/* ---- the run ---------------------------------------------------------------------------- */

static int read_file(const char *path, char **ret, size_t *ret_len) {
    _cleanup_(fclosep_) FILE *f = fopen(path, "rbe");
    struct sbuf b = {0};
    char chunk[8192];
    size_t n;

    if (!f)
        return -errno;
    sb_printf(&b, "%s", "");
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (b.cap - b.len <= n) {
            size_t cap = b.cap * 2;
            while (cap - b.len <= n)
                cap *= 2;
            char *s = realloc(b.s, cap);
            if (!s)
                abort();
            b.s = s;
            b.cap = cap;
        }
        memcpy(b.s + b.len, chunk, n);
        b.len += n;
        b.s[b.len] = '\0';
    }
    if (ferror(f)) {
        free(b.s);
        return -EIO;
    }
    *ret = b.s;
    *ret_len = b.len;
    return 0;
}

static const char *known_reason(const char *rel) {
    for (size_t i = 0; known_unsupported[i].path; i++)
        if (strcmp(known_unsupported[i].path, rel) == 0)
            return known_unsupported[i].reason;
    return NULL;
}

/* 0 passed, 1 failed (reason in why). */
static int run_valid(const char *dir, const char *rel, struct sbuf *why) {
    char path[4096], jpath[4096];
    _cleanup_free_ char *toml = NULL, *expect = NULL;
    size_t tlen, jlen;
    struct toml_error err = {0};
    _cleanup_toml_ struct toml_doc *doc = NULL;
    struct sbuf out = {0};
    struct json *want = NULL, *got = NULL;
    int rc;

    int pn = snprintf(path, sizeof(path), "%s/tests/%s", dir, rel);
    int jn = pn > 5 && (size_t)pn < sizeof(path)
                 ? snprintf(jpath, sizeof(jpath), "%.*s.json", pn - 5, path)
                 : -1;
    if (jn < 0 || (size_t)jn >= sizeof(jpath)) {
        sb_printf(why, "path too long");
        return 1;
    }
    if ((rc = read_file(path, &toml, &tlen)) < 0 || (rc = read_file(jpath, &expect, &jlen)) < 0) {
        sb_printf(why, "cannot read: %s", strerror(-rc));
        return 1;
    }
    rc = toml_parse(toml, tlen, INPUT_MAX, &doc, &err);
    if (rc < 0) {
        sb_printf(why, "refused at %u:%u: %s", err.line, err.column, err.msg);
        return 1;
    }
    render(&out, toml_root(doc));
    if (json_parse(expect, jlen, &want) < 0) {
        sb_printf(why, "cannot read the expected JSON");
        free(out.s);
        return 1;
    }
    if (json_parse(out.s, out.len, &got) < 0) {
        sb_printf(why, "rendered JSON does not parse: %s", out.s);
        json_free(want);
        free(out.s);
        return 1;
    }
    bool same = json_equal(want, got, why, "$");
    if (!same)
        sb_printf(why, "\n      got: %.400s", out.s);
    json_free(want);
    json_free(got);
    free(out.s);
    return same ? 0 : 1;
}

static int run_invalid(const char *dir, const char *rel, bool verbose, struct sbuf *why) {
    char path[4096];
    _cleanup_free_ char *toml = NULL;
    size_t tlen;
    struct toml_error err = {0};
    struct toml_doc *doc = NULL;
    int rc;

    int pn = snprintf(path, sizeof(path), "%s/tests/%s", dir, rel);
    if (pn < 0 || (size_t)pn >= sizeof(path)) {
        sb_printf(why, "path too long");
        return 1;
    }
    if ((rc = read_file(path, &toml, &tlen)) < 0) {
        sb_printf(why, "cannot read: %s", strerror(-rc));
        return 1;
    }
    rc = toml_parse(toml, tlen, INPUT_MAX, &doc, &err);
    if (rc == 0) {
        toml_free(doc);
        sb_printf(why, "accepted");
        return 1;
    }
    if (rc != -EBADMSG) {
        sb_printf(why, "refused with %s, not EBADMSG", strerror(-rc));
        return 1;
    }
    if (err.line == 0 || err.column == 0 || err.msg[0] == '\0') {
        sb_printf(why, "refused without a position or message");
        return 1;
    }
    if (verbose)
        printf("  %-55s %u:%u: %s\n", rel, err.line, err.column, err.msg);
    return 0;
}

int main(int argc, char **argv) {
    bool verbose = false, explicit_dir = true;
    const char *dir = NULL;
    char list[4096];
    struct stat st;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0)
            verbose = true;
        else
            dir = argv[i];
    }
    if (!dir)
        dir = getenv("LYH_TOML_TEST_DIR");
    if (!dir || !*dir) {
        dir = DEFAULT_CORPUS;
        explicit_dir = false;
    }
    snprintf(list, sizeof(list), "%s/%s", dir, FILE_LIST);
    if (stat(list, &st) < 0) {
        if (!explicit_dir) {
            printf("SKIP: toml-test corpus not found at %s (set LYH_TOML_TEST_DIR or pass "
                   "the directory)\n",
                   dir);
            return EXIT_SKIP;
        }
        fprintf(stderr, "toml-test corpus: %s: %s\n", list, strerror(errno));
        return 2;
    }

    char src[4096], *srcbuf = NULL;
    size_t srclen;
    snprintf(src, sizeof(src), "%s/SOURCE", dir);
    if (read_file(src, &srcbuf, &srclen) == 0) {
        srcbuf[strcspn(srcbuf, "\n")] = '\0';
        printf("corpus %s (toml-test %s), TOML 1.0.0 file list\n", dir, srcbuf);
    }
    free(srcbuf);

    _cleanup_(fclosep_) FILE *f = fopen(list, "re");
    if (!f) {
        fprintf(stderr, "%s: %s\n", list, strerror(errno));
        return 2;
    }
    unsigned valid = 0, valid_ok = 0, invalid = 0, invalid_ok = 0, known = 0;
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\r\n")] = '\0';
        size_t n = strlen(line);
        if (n < 5 || strcmp(line + n - 5, ".toml") != 0)
            continue;
        bool is_valid = strncmp(line, "valid/", 6) == 0;
        if (!is_valid && strncmp(line, "invalid/", 8) != 0)
            continue;
        struct sbuf why = {0};
        int failed = is_valid ? run_valid(dir, line, &why) : run_invalid(dir, line, verbose, &why);
        const char *reason = known_reason(line);
        if (is_valid) {
            valid++;
            valid_ok += !failed;
        } else {
            invalid++;
            invalid_ok += !failed;
        }
        if (failed && reason) {
            known++;
            printf("KNOWN  %s: %s (%s)\n", line, why.s, reason);
        } else if (failed) {
            printf("FAIL   %s: %s\n", line, why.s);
        } else if (reason) {
            printf("NOTE   %s passes but is listed as known-unsupported: drop it from the list\n",
                   line);
        }
        free(why.s);
    }
    printf("valid: %u/%u passed, invalid: %u/%u refused", valid_ok, valid, invalid_ok, invalid);
    if (known)
        printf(" (%u known-unsupported)", known);
    printf("\n");
    if (valid == 0 || invalid == 0) {
        fprintf(stderr, "%s lists no tests\n", list);
        return 1;
    }
    return valid_ok + invalid_ok + known == valid + invalid ? 0 : 1;
}
