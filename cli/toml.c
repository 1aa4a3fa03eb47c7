/* The TOML 1.0.0 parser: bytes in, a tree of values out. This file owns the
 * grammar, the table-definition rules and the document's memory (one arena
 * per document). It must never do I/O, log, keep global state, read past the
 * buffer it was given, or recurse without a bound.
 *
 * Why it is safe on hostile input (config files can come from anywhere the
 * user copied them from):
 * - Size first: len is checked against max_len before anything else, and all
 *   allocation is proportional to the input (each node needs input bytes).
 * - The whole buffer is validated as UTF-8 before parsing, so later code can
 *   treat every byte >= 0x80 as part of a well-formed code point; control
 *   characters are refused where the spec refuses them (everywhere outside a
 *   comment or string, and there all but tab, plus LF in multi-line strings).
 *   A bare CR is refused everywhere (CR is only half of a CRLF), multi-line
 *   strings included: the 1.0.0 prose is loose there, its ABNF and 1.1 are not.
 * - Recursion happens only for arrays and inline tables, and every container
 *   (including those made by headers and dotted keys) checks its depth
 *   against TOML_MAX_DEPTH before it exists, so the parser's stack and any
 *   recursive walk of the tree are bounded (toml_free walks nothing: it drops
 *   the arena's chunks).
 * - Time is near-linear: tables of more than a few keys get a hash index, so
 *   a file of many keys or many [[headers]] is not quadratic.
 * - Every read goes through the cursor (p < end checked); the buffer need not
 *   be NUL-terminated.
 *
 * Strictness choices the spec leaves open, made the strict way: seconds are
 * required in times (1.0.0), inline tables are one line with no trailing
 * comma (1.0.0), a float that overflows to infinity is refused, an integer
 * outside int64 is refused. Newlines inside multi-line strings are returned
 * as LF whether the file used LF or CRLF.
 *
 * The table rules (TOML 1.0.0, "Table" and "Keys"): a table is defined once,
 * by a header, by dotted keys, or inline. Flags on each table record how it
 * came to be, and three walks enforce the rules:
 * - a header path walks through anything but an inline table or a static
 *   array (an array of tables is entered at its last element) and creates
 *   IMPLICIT tables; its last part may define an IMPLICIT table once;
 * - a dotted key walks only through DOTTED tables (made by dotted keys,
 *   which can only be reached from the section that made them), so it never
 *   adds to a table a header defined or implied;
 * - INLINE tables and static arrays are sealed: nothing walks into them. */
#include "cli/toml.h"

#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ------------------------------------------------------------------------ */

#define ARENA_CHUNK 16384u

struct arena_chunk {
    struct arena_chunk *next;
    size_t used;
    size_t cap;
    alignas(max_align_t) unsigned char data[];
};

struct toml_doc {
    struct arena_chunk *chunks; /* owns: every node, key and string of the doc */
    struct toml_value root;
};

static void *arena_alloc(struct toml_doc *doc, size_t size, size_t align) {
    struct arena_chunk *c = doc->chunks;
    size_t off;

    if (size == 0)
        size = 1;
    if (c) {
        off = (c->used + align - 1) & ~(align - 1);
        if (off <= c->cap && c->cap - off >= size) {
            c->used = off + size;
            return c->data + off;
        }
    }
    size_t cap = size > ARENA_CHUNK ? size : ARENA_CHUNK;
    if (cap > SIZE_MAX - sizeof(*c))
        return NULL;
    struct arena_chunk *n = malloc(sizeof(*n) + cap);
    if (!n)
        return NULL;
    n->cap = cap;
    n->used = size;
    if (c && size > ARENA_CHUNK) {
        /* A big block gets a chunk of its own behind the current one, so the
         * current chunk's free tail stays usable. */
        n->next = c->next;
        c->next = n;
    } else {
        n->next = c;
        doc->chunks = n;
    }
    return n->data;
}

void toml_free(struct toml_doc *doc) {
    if (!doc)
        return;
    struct arena_chunk *c = doc->chunks;
    while (c) {
        struct arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(doc);
}

/* ---- parser state ----------------------------------------------------------------- */

#define TF_IMPLICIT 0x1u /* implied by a header path, not (yet) defined */
#define TF_DEFINED 0x2u  /* defined by a [header], or a [[header]] element, or the root */
#define TF_DOTTED 0x4u   /* made by a dotted key */
#define TF_INLINE 0x8u   /* an inline table: sealed */
#define AF_AOT 0x1u      /* an array of tables made by [[header]]; others are static */

/* A key of more parts nests deeper than TOML_MAX_DEPTH wherever it is; one
 * part more than that still parses, so the depth check reports it. */
#define KEY_PARTS_MAX (TOML_MAX_DEPTH + 2u)
#define SHOW_MAX 64u

struct key_part {
    const char *name; /* in the arena */
    size_t len;
    struct toml_pos pos;
};

struct key_path {
    struct key_part part[KEY_PARTS_MAX];
    size_t n;
};

struct parser {
    const unsigned char *p;
    const unsigned char *end;
    uint32_t line;
    uint32_t col;
    struct toml_doc *doc;
    struct toml_error *err;
    struct toml_value *cur; /* the table the current section's keys go into */
    unsigned char *buf;     /* owns: scratch for decoding strings and floats */
    size_t buf_len;
    size_t buf_cap;
};

static struct toml_pos here(const struct parser *ps) {
    return (struct toml_pos){ps->line, ps->col};
}

__attribute__((format(printf, 3, 4))) static int fail(struct parser *ps, struct toml_pos pos,
                                                      const char *fmt, ...) {
    if (ps->err) {
        va_list ap;
        ps->err->line = pos.line;
        ps->err->column = pos.column;
        va_start(ap, fmt);
        vsnprintf(ps->err->msg, sizeof(ps->err->msg), fmt, ap);
        va_end(ap);
    }
    return -EBADMSG;
}

static int fail_nomem(struct parser *ps) {
    if (ps->err) {
        ps->err->line = ps->line;
        ps->err->column = ps->col;
        snprintf(ps->err->msg, sizeof(ps->err->msg), "out of memory");
    }
    return -ENOMEM;
}

static bool at_end(const struct parser *ps) { return ps->p >= ps->end; }

/* The byte k ahead of the cursor, or -1 past the end. */
static int peek(const struct parser *ps, size_t k) {
    return (size_t)(ps->end - ps->p) > k ? ps->p[k] : -1;
}

static void adv(struct parser *ps) {
    unsigned char c = *ps->p++;
    if (c == '\n') {
        ps->line++;
        ps->col = 1;
    } else if ((c & 0xC0) != 0x80) {
        ps->col++;
    }
}

static void adv_n(struct parser *ps, size_t n) {
    while (n-- > 0)
        adv(ps);
}

/* The code point at s (valid UTF-8, checked up front). */
static uint32_t decode_cp(const unsigned char *s, const unsigned char *end) {
    uint32_t c = s[0];
    size_t n = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
    if (n == 0)
        return c;
    c &= 0x3Fu >> n;
    for (size_t i = 1; i <= n && s + i < end; i++)
        c = (c << 6) | (s[i] & 0x3Fu);
    return c;
}

/* "'x'", "newline", "end of input" or "U+0007": what the cursor is on, for messages. */
static const char *describe(const struct parser *ps, char *buf, size_t len) {
    if (at_end(ps))
        return "end of input";
    unsigned char c = *ps->p;
    if (c == '\n' || (c == '\r' && peek(ps, 1) == '\n'))
        return "newline";
    if (c > 0x20 && c < 0x7F)
        snprintf(buf, len, "'%c'", c);
    else
        snprintf(buf, len, "U+%04X", (unsigned)decode_cp(ps->p, ps->end));
    return buf;
}

/* A key for a message: printable characters as they are, others escaped,
 * long keys cut. */
static void show_append(char *out, size_t cap, size_t *n, const char *name, size_t len) {
    for (size_t i = 0; i < len && *n + 8 < cap; i++) {
        unsigned char c = (unsigned char)name[i];
        if (*n >= SHOW_MAX && (c & 0xC0) != 0x80) { /* cut between code points */
            *n += (size_t)snprintf(out + *n, cap - *n, "...");
            return;
        }
        if (c < 0x20 || c == 0x7F || c == '\'' || c == '\\')
            *n += (size_t)snprintf(out + *n, cap - *n, "\\x%02X", c);
        else
            out[(*n)++] = (char)c;
    }
    out[*n] = '\0';
}

/* Parts 0..last of a key path, joined with dots. */
static const char *show_path(const struct key_path *kp, size_t last, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i <= last && i < kp->n && n < SHOW_MAX; i++) {
        if (i > 0 && n + 1 < cap) {
            out[n++] = '.';
            out[n] = '\0';
        }
        show_append(out, cap, &n, kp->part[i].name, kp->part[i].len);
    }
    return out;
}

/* ---- scratch buffer --------------------------------------------------------------- */

static int buf_put(struct parser *ps, const void *data, size_t len) {
    if (ps->buf_cap - ps->buf_len < len) {
        size_t need = ps->buf_len + len;
        size_t cap = ps->buf_cap ? ps->buf_cap : 256;
        while (cap < need)
            cap *= 2;
        unsigned char *n = realloc(ps->buf, cap);
        if (!n)
            return fail_nomem(ps);
        ps->buf = n;
        ps->buf_cap = cap;
    }
    memcpy(ps->buf + ps->buf_len, data, len);
    ps->buf_len += len;
    return 0;
}

static int buf_byte(struct parser *ps, unsigned char c) { return buf_put(ps, &c, 1); }

/* Copy the scratch buffer into the arena, NUL-terminated. */
static int buf_take(struct parser *ps, const char **ret, size_t *ret_len) {
    char *s = arena_alloc(ps->doc, ps->buf_len + 1, 1);
    if (!s)
        return fail_nomem(ps);
    if (ps->buf_len)
        memcpy(s, ps->buf, ps->buf_len);
    s[ps->buf_len] = '\0';
    *ret = s;
    *ret_len = ps->buf_len;
    return 0;
}

/* ---- tree building ------------------------------------------------------------------ */

static uint32_t hash_key(const char *s, size_t len) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

static struct toml_entry *table_find(const struct toml_table *t, const char *name, size_t len) {
    if (t->index_) {
        uint32_t mask = t->index_cap_ - 1;
        for (uint32_t i = hash_key(name, len) & mask;; i = (i + 1) & mask) {
            uint32_t slot = t->index_[i];
            if (slot == 0)
                return NULL;
            struct toml_entry *e = &t->entries[slot - 1];
            if (e->key.len == len && memcmp(e->key.name, name, len) == 0)
                return e;
        }
    }
    for (size_t i = 0; i < t->len; i++) {
        struct toml_entry *e = &t->entries[i];
        if (e->key.len == len && memcmp(e->key.name, name, len) == 0)
            return e;
    }
    return NULL;
}

#define INDEX_FROM 8u

static int table_reindex(struct parser *ps, struct toml_table *t, uint32_t cap) {
    uint32_t *idx = arena_alloc(ps->doc, (size_t)cap * sizeof(*idx), alignof(uint32_t));
    if (!idx)
        return fail_nomem(ps);
    memset(idx, 0, (size_t)cap * sizeof(*idx));
    for (size_t k = 0; k < t->len; k++) {
        const struct toml_entry *e = &t->entries[k];
        uint32_t i = hash_key(e->key.name, e->key.len) & (cap - 1);
        while (idx[i] != 0)
            i = (i + 1) & (cap - 1);
        idx[i] = (uint32_t)k + 1;
    }
    t->index_ = idx;
    t->index_cap_ = cap;
    return 0;
}

/* Grow an arena vector to hold one more element (doubling; the old block
 * stays in the arena, so at most as much again is wasted). */
static int vec_grow(struct parser *ps, void **items, size_t *cap, size_t len, size_t elem) {
    if (len < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 4;
    if (ncap > UINT32_MAX / 2 || ncap > SIZE_MAX / elem)
        return fail_nomem(ps);
    void *n = arena_alloc(ps->doc, ncap * elem, alignof(max_align_t));
    if (!n)
        return fail_nomem(ps);
    if (len)
        memcpy(n, *items, len * elem);
    *items = n;
    *cap = ncap;
    return 0;
}

/* The caller has checked that the key is absent. */
static int table_insert(struct parser *ps, struct toml_table *t, const struct key_part *k,
                        struct toml_value *v) {
    int r = vec_grow(ps, (void **)&t->entries, &t->cap_, t->len, sizeof(*t->entries));
    if (r < 0)
        return r;
    t->entries[t->len] = (struct toml_entry){
        .key = {.name = k->name, .len = k->len, .pos = k->pos},
        .value = v,
    };
    t->len++;
    if (t->len >= INDEX_FROM && (size_t)t->len * 2 > t->index_cap_) {
        if (t->index_cap_ >= UINT32_C(1) << 30)
            return fail_nomem(ps);
        uint32_t cap = t->index_cap_ ? t->index_cap_ * 2 : 32;
        return table_reindex(ps, t, cap);
    }
    if (t->index_) {
        uint32_t mask = t->index_cap_ - 1;
        uint32_t i = hash_key(k->name, k->len) & mask;
        while (t->index_[i] != 0)
            i = (i + 1) & mask;
        t->index_[i] = (uint32_t)t->len;
    }
    return 0;
}

static int array_push(struct parser *ps, struct toml_array *a, struct toml_value *v) {
    int r = vec_grow(ps, (void **)&a->items, &a->cap_, a->len, sizeof(*a->items));
    if (r < 0)
        return r;
    a->items[a->len++] = v;
    return 0;
}

static uint16_t container_depth(const struct toml_value *v) {
    return v->type == TOML_TABLE ? v->u.table.depth_ : v->u.array.depth_;
}

static int new_value(struct parser *ps, enum toml_type type, struct toml_pos pos,
                     struct toml_value **ret) {
    struct toml_value *v = arena_alloc(ps->doc, sizeof(*v), alignof(struct toml_value));
    if (!v)
        return fail_nomem(ps);
    memset(v, 0, sizeof(*v));
    v->type = type;
    v->pos = pos;
    *ret = v;
    return 0;
}

/* A table or array one level below parent (a table or array). */
static int new_container(struct parser *ps, enum toml_type type, const struct toml_value *parent,
                         struct toml_pos pos, uint8_t flags, struct toml_value **ret) {
    unsigned depth = container_depth(parent) + 1u;
    struct toml_value *v;
    if (depth > TOML_MAX_DEPTH)
        return fail(ps, pos, "nesting deeper than %u levels", TOML_MAX_DEPTH);
    int r = new_value(ps, type, pos, &v);
    if (r < 0)
        return r;
    if (type == TOML_TABLE) {
        v->u.table.depth_ = (uint16_t)depth;
        v->u.table.flags_ = flags;
    } else {
        v->u.array.depth_ = (uint16_t)depth;
        v->u.array.flags_ = flags;
    }
    *ret = v;
    return 0;
}

/* A new table or array under key k of table t. */
static int add_container(struct parser *ps, struct toml_value *t, const struct key_part *k,
                         enum toml_type type, uint8_t flags, struct toml_value **ret) {
    struct toml_value *v = NULL;
    int r = new_container(ps, type, t, k->pos, flags, &v);
    if (r < 0)
        return r;
    r = table_insert(ps, &t->u.table, k, v);
    if (r < 0)
        return r;
    *ret = v;
    return 0;
}

/* What a value is, for "already defined as ..." messages. */
static const char *what(const struct toml_value *v) {
    if (v->type == TOML_TABLE) {
        if (v->u.table.flags_ & TF_INLINE)
            return "an inline table";
        return "a table";
    }
    if (v->type == TOML_ARRAY)
        return v->u.array.flags_ & AF_AOT ? "an array of tables" : "an array";
    switch (v->type) {
    case TOML_STRING:
        return "a string";
    case TOML_INTEGER:
        return "an integer";
    case TOML_FLOAT:
        return "a float";
    case TOML_BOOL:
        return "a bool";
    case TOML_DATETIME:
        return "a datetime";
    case TOML_LOCAL_DATETIME:
        return "a local datetime";
    case TOML_LOCAL_DATE:
        return "a local date";
    case TOML_LOCAL_TIME:
        return "a local time";
    default:
        return "a value";
    }
}

/* ---- whitespace, comments, newlines --------------------------------------------- */

static void skip_ws(struct parser *ps) {
    while (!at_end(ps) && (*ps->p == ' ' || *ps->p == '\t'))
        adv(ps);
}

static bool is_control(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7F; }

/* At '#': the comment up to (not including) its newline. */
static int skip_comment(struct parser *ps) {
    adv(ps);
    while (!at_end(ps) && *ps->p != '\n') {
        unsigned char c = *ps->p;
        if (c == '\r' && peek(ps, 1) == '\n')
            return 0;
        if (is_control(c))
            return fail(ps, here(ps), "control character U+%04X in comment", c);
        adv(ps);
    }
    return 0;
}

/* Consume one newline if the cursor is on one; 1 if it did, 0 if not. */
static int eat_newline(struct parser *ps) {
    if (at_end(ps))
        return 0;
    if (*ps->p == '\n') {
        adv(ps);
        return 1;
    }
    if (*ps->p == '\r') {
        if (peek(ps, 1) != '\n')
            return fail(ps, here(ps), "carriage return not followed by a line feed");
        adv_n(ps, 2);
        return 1;
    }
    return 0;
}

/* Whitespace, comments and newlines (inside arrays). */
static int skip_ws_comments_newlines(struct parser *ps) {
    for (;;) {
        skip_ws(ps);
        if (at_end(ps))
            return 0;
        int r;
        if (*ps->p == '#') {
            r = skip_comment(ps);
            if (r < 0)
                return r;
            continue;
        }
        r = eat_newline(ps);
        if (r < 0)
            return r;
        if (r == 0)
            return 0;
    }
}

/* After a key/value pair or a header: optional comment, then a newline or the end. */
static int end_of_line(struct parser *ps, const char *after) {
    char d[16];
    skip_ws(ps);
    if (at_end(ps))
        return 0;
    if (*ps->p == '#') {
        int r = skip_comment(ps);
        if (r < 0)
            return r;
    }
    if (at_end(ps))
        return 0;
    int r = eat_newline(ps);
    if (r < 0)
        return r;
    if (r == 0)
        return fail(ps, here(ps), "expected a newline after %s, found %s", after,
                    describe(ps, d, sizeof(d)));
    return 0;
}

/* ---- strings ------------------------------------------------------------------------ */

static int hexval(int c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int put_utf8(struct parser *ps, uint32_t cp) {
    unsigned char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (unsigned char)(0xC0 | (cp >> 6));
        b[1] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (cp >> 12));
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (unsigned char)(0xF0 | (cp >> 18));
        b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return buf_put(ps, b, n);
}

/* At '\\' in a basic string. multiline allows the line-ending backslash. */
static int escape(struct parser *ps, bool multiline) {
    struct toml_pos pos = here(ps);
    char d[16];
    adv(ps);
    if (at_end(ps))
        return fail(ps, pos, "unterminated string: input ends after '\\'");
    unsigned char c = *ps->p;
    switch (c) {
    case 'b':
        adv(ps);
        return buf_byte(ps, '\b');
    case 't':
        adv(ps);
        return buf_byte(ps, '\t');
    case 'n':
        adv(ps);
        return buf_byte(ps, '\n');
    case 'f':
        adv(ps);
        return buf_byte(ps, '\f');
    case 'r':
        adv(ps);
        return buf_byte(ps, '\r');
    case '"':
        adv(ps);
        return buf_byte(ps, '"');
    case '\\':
        adv(ps);
        return buf_byte(ps, '\\');
    case 'u':
    case 'U': {
        size_t n = c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (size_t i = 1; i <= n; i++) {
            int h = hexval(peek(ps, i));
            if (h < 0)
                return fail(ps, pos, "invalid escape \\%c: expected %zu hex digits", c, n);
            cp = (cp << 4) | (uint32_t)h;
        }
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return fail(ps, pos, "invalid escape \\%c%.*s: not a Unicode scalar value", c,
                        (int)n, (const char *)ps->p + 1);
        adv_n(ps, n + 1);
        return put_utf8(ps, cp);
    }
    default:
        break;
    }
    if (multiline && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
        /* Line-ending backslash: only whitespace may follow it on its line;
         * it eats every space, tab and newline up to the next other character. */
        skip_ws(ps);
        int r = eat_newline(ps);
        if (r < 0)
            return r;
        if (r == 0)
            return fail(ps, pos, "invalid escape: '\\' followed by whitespace must end the line");
        for (;;) {
            skip_ws(ps);
            r = eat_newline(ps);
            if (r < 0)
                return r;
            if (r == 0)
                return 0;
        }
    }
    if (c > 0x20 && c < 0x7F)
        return fail(ps, pos, "invalid escape \\%c", c);
    return fail(ps, pos, "invalid escape: '\\' followed by %s", describe(ps, d, sizeof(d)));
}

static int string_char(struct parser *ps, unsigned char c, struct toml_pos start) {
    if (is_control(c)) {
        if (c == '\n' || c == '\r')
            return fail(ps, here(ps),
                        "unterminated string (opened at %u:%u): newline before the closing quote",
                        start.line, start.column);
        return fail(ps, here(ps), "control character U+%04X in a string must be escaped", c);
    }
    int r = buf_byte(ps, c);
    adv(ps);
    return r;
}

/* At the opening quote of any of the four string kinds; the decoded text
 * ends up in the scratch buffer. allow_multiline is false for keys. */
static int parse_string(struct parser *ps, bool allow_multiline) {
    struct toml_pos start = here(ps);
    unsigned char q = *ps->p;
    bool literal = q == '\'';
    bool multiline = peek(ps, 1) == q && peek(ps, 2) == q;
    int r;

    ps->buf_len = 0;
    if (multiline) {
        if (!allow_multiline)
            return fail(ps, start, "a multi-line string cannot be a key");
        adv_n(ps, 3);
        /* A newline right after the opening delimiter is trimmed. */
        r = eat_newline(ps);
        if (r < 0)
            return r;
    } else {
        adv(ps);
    }
    for (;;) {
        if (at_end(ps))
            return fail(ps, here(ps), "unterminated string (opened at %u:%u)", start.line,
                        start.column);
        unsigned char c = *ps->p;
        if (c == q) {
            if (!multiline) {
                adv(ps);
                return 0;
            }
            size_t n = 0;
            while (peek(ps, n) == q)
                n++;
            if (n < 3) {
                for (size_t i = 0; i < n; i++) {
                    r = buf_byte(ps, q);
                    if (r < 0)
                        return r;
                }
                adv_n(ps, n);
                continue;
            }
            /* Up to two quotes right before the closing delimiter belong to
             * the string; a sixth quote is left for the caller to refuse. */
            size_t extra = n - 3 > 2 ? 2 : n - 3;
            for (size_t i = 0; i < extra; i++) {
                r = buf_byte(ps, q);
                if (r < 0)
                    return r;
            }
            adv_n(ps, extra + 3);
            return 0;
        }
        if (c == '\\' && !literal) {
            r = escape(ps, multiline);
        } else if (multiline && (c == '\n' || c == '\r')) {
            r = eat_newline(ps);
            if (r >= 0)
                r = buf_byte(ps, '\n');
        } else {
            r = string_char(ps, c, start);
        }
        if (r < 0)
            return r;
    }
}

/* ---- keys ----------------------------------------------------------------------------- */

static bool is_bare(int c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
}

static int parse_key_part(struct parser *ps, struct key_part *ret) {
    struct key_part k = {.pos = here(ps)};
    char d[16];
    int r;

    if (!at_end(ps) && (*ps->p == '"' || *ps->p == '\'')) {
        r = parse_string(ps, false);
        if (r < 0)
            return r;
    } else {
        ps->buf_len = 0;
        while (!at_end(ps) && is_bare(*ps->p)) {
            r = buf_byte(ps, *ps->p);
            if (r < 0)
                return r;
            adv(ps);
        }
        if (ps->buf_len == 0)
            return fail(ps, k.pos, "expected a key, found %s", describe(ps, d, sizeof(d)));
    }
    r = buf_take(ps, &k.name, &k.len);
    if (r < 0)
        return r;
    *ret = k;
    return 0;
}

/* key = simple-key *( ws '.' ws simple-key ); leaves the cursor after the
 * last part (no trailing whitespace eaten). */
static int parse_key(struct parser *ps, struct key_path *kp) {
    kp->n = 0;
    for (;;) {
        if (kp->n == KEY_PARTS_MAX)
            return fail(ps, here(ps), "nesting deeper than %u levels", TOML_MAX_DEPTH);
        int r = parse_key_part(ps, &kp->part[kp->n]);
        if (r < 0)
            return r;
        kp->n++;
        const unsigned char *save = ps->p;
        uint32_t line = ps->line, col = ps->col;
        skip_ws(ps);
        if (at_end(ps) || *ps->p != '.') {
            /* Give the whitespace back: the caller decides what may follow. */
            ps->p = save;
            ps->line = line;
            ps->col = col;
            return 0;
        }
        adv(ps);
        skip_ws(ps);
    }
}

/* ---- numbers and dates ------------------------------------------------------------ */

static bool is_digit(int c) { return c >= '0' && c <= '9'; }

static bool is_token_char(int c) {
    return is_bare(c) || c == '+' || c == '.' || c == ':';
}

struct token {
    const char *s;
    size_t n;
    struct toml_pos pos;
};

/* Tokens are ASCII, so the column of s[i] is pos.column + i. */
static struct toml_pos tok_pos(const struct token *t, size_t i) {
    return (struct toml_pos){t->pos.line, t->pos.column + (uint32_t)i};
}

/* digits with single underscores between them, starting at s[*i]; the digit
 * kind is given by base. Returns the number of digits, or -EBADMSG. */
static int scan_digits(struct parser *ps, const struct token *t, size_t *i, int base,
                       const char *what_part) {
    size_t start = *i, digits = 0;
    for (;;) {
        if (*i >= t->n)
            break;
        int c = t->s[*i];
        int v = hexval(c);
        if (c == '_') {
            if (digits == 0 || *i + 1 >= t->n || hexval(t->s[*i + 1]) < 0 ||
                hexval(t->s[*i + 1]) >= base)
                return fail(ps, tok_pos(t, *i),
                            "'_' in a number must be between two digits");
            (*i)++;
            continue;
        }
        if (v < 0 || v >= base)
            break;
        digits++;
        (*i)++;
    }
    if (digits == 0)
        return fail(ps, tok_pos(t, start), "expected a digit in %s", what_part);
    return (int)(digits > INT_MAX ? INT_MAX : digits);
}

static int parse_prefixed_int(struct parser *ps, const struct token *t, size_t i, bool sign,
                              struct toml_value *v) {
    int base = t->s[i + 1] == 'x' ? 16 : t->s[i + 1] == 'o' ? 8 : 2;
    const char *name = base == 16 ? "hexadecimal" : base == 8 ? "octal" : "binary";
    if (sign)
        return fail(ps, t->pos, "%s %s integer cannot have a sign", base == 8 ? "an" : "a", name);
    i += 2;
    size_t start = i;
    int r = scan_digits(ps, t, &i, base, "an integer");
    if (r < 0)
        return r;
    if (i != t->n)
        return fail(ps, tok_pos(t, i), "invalid character '%c' in %s %s integer", t->s[i],
                    base == 8 ? "an" : "a", name);
    uint64_t acc = 0;
    for (size_t k = start; k < t->n; k++) {
        if (t->s[k] == '_')
            continue;
        uint64_t d = (uint64_t)hexval(t->s[k]);
        if (acc > ((uint64_t)INT64_MAX - d) / (uint64_t)base)
            return fail(ps, t->pos, "integer overflow: %.*s does not fit in 64 bits",
                        (int)(t->n > 40 ? 40 : t->n), t->s);
        acc = acc * (uint64_t)base + d;
    }
    v->type = TOML_INTEGER;
    v->u.integer = (int64_t)acc;
    return 0;
}

static int parse_number(struct parser *ps, const struct token *t, struct toml_value *v) {
    size_t i = 0;
    bool sign = false, neg = false, is_float = false;
    int r;

    if (t->s[0] == '+' || t->s[0] == '-') {
        sign = true;
        neg = t->s[0] == '-';
        i = 1;
    }
    size_t rest = t->n - i;
    if (rest == 3 && (memcmp(t->s + i, "inf", 3) == 0 || memcmp(t->s + i, "nan", 3) == 0)) {
        v->type = TOML_FLOAT;
        v->u.floating = t->s[i] == 'i' ? INFINITY : NAN;
        if (neg)
            v->u.floating = -v->u.floating;
        return 0;
    }
    if (rest >= 2 && t->s[i] == '0' && (t->s[i + 1] == 'x' || t->s[i + 1] == 'o' ||
                                        t->s[i + 1] == 'b'))
        return parse_prefixed_int(ps, t, i, sign, v);
    if (i >= t->n || !is_digit(t->s[i]))
        return fail(ps, tok_pos(t, i), "invalid value '%.*s'", (int)(t->n > 40 ? 40 : t->n),
                    t->s);
    size_t int_start = i;
    r = scan_digits(ps, t, &i, 10, "a number");
    if (r < 0)
        return r;
    if (t->s[int_start] == '0' && i - int_start > 1)
        return fail(ps, tok_pos(t, int_start), "leading zeros are not allowed in a number");
    if (i < t->n && t->s[i] == '.') {
        is_float = true;
        i++;
        r = scan_digits(ps, t, &i, 10, "the fraction of a float");
        if (r < 0)
            return r;
    }
    if (i < t->n && (t->s[i] == 'e' || t->s[i] == 'E')) {
        is_float = true;
        i++;
        if (i < t->n && (t->s[i] == '+' || t->s[i] == '-'))
            i++;
        r = scan_digits(ps, t, &i, 10, "the exponent of a float");
        if (r < 0)
            return r;
    }
    if (i != t->n && (t->s[i] == '-' || t->s[i] == ':'))
        return fail(ps, tok_pos(t, i),
                    "invalid character '%c' in a number (a date is YYYY-MM-DD, a time HH:MM:SS)",
                    t->s[i]);
    if (i != t->n)
        return fail(ps, tok_pos(t, i), "invalid character '%c' in a number", t->s[i]);

    if (!is_float) {
        uint64_t acc = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        for (size_t k = int_start; k < t->n; k++) {
            if (t->s[k] == '_')
                continue;
            uint64_t d = (uint64_t)(t->s[k] - '0');
            if (acc > (limit - d) / 10)
                return fail(ps, t->pos, "integer overflow: %.*s does not fit in 64 bits",
                            (int)(t->n > 40 ? 40 : t->n), t->s);
            acc = acc * 10 + d;
        }
        v->type = TOML_INTEGER;
        /* -(2^63) is representable; negate in unsigned arithmetic to get there. */
        v->u.integer = neg ? (int64_t)(0 - acc) : (int64_t)acc;
        return 0;
    }

    /* The syntax is checked, so strtod sees only [+-]digits[.digits][e[+-]digits];
     * the C locale keeps '.' the decimal point whatever the process set. */
    ps->buf_len = 0;
    for (size_t k = 0; k < t->n; k++) {
        if (t->s[k] != '_') {
            r = buf_byte(ps, (unsigned char)t->s[k]);
            if (r < 0)
                return r;
        }
    }
    r = buf_byte(ps, '\0');
    if (r < 0)
        return r;
    locale_t c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (c_locale == (locale_t)0)
        return fail_nomem(ps);
    double d = strtod_l((const char *)ps->buf, NULL, c_locale);
    freelocale(c_locale);
    if (isinf(d))
        return fail(ps, t->pos, "float out of range: %.*s", (int)(t->n > 40 ? 40 : t->n), t->s);
    v->type = TOML_FLOAT;
    v->u.floating = d;
    return 0;
}

/* n digits at s[i], as a number; -1 if they are not all digits. */
static int digits_at(const struct token *t, size_t i, size_t n) {
    int v = 0;
    if (i + n > t->n)
        return -1;
    for (size_t k = 0; k < n; k++) {
        if (!is_digit(t->s[i + k]))
            return -1;
        v = v * 10 + (t->s[i + k] - '0');
    }
    return v;
}

static bool is_leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static int days_in_month(int y, int m) {
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* HH:MM:SS[.fraction] at s[*i]. */
static int parse_time(struct parser *ps, const struct token *t, size_t *i,
                      struct toml_datetime *dt) {
    size_t s = *i;
    int h = digits_at(t, s, 2), m = digits_at(t, s + 3, 2);
    if (h < 0 || s + 2 >= t->n || t->s[s + 2] != ':' || m < 0)
        return fail(ps, tok_pos(t, s), "invalid time: expected HH:MM:SS");
    if (s + 5 >= t->n || t->s[s + 5] != ':')
        return fail(ps, tok_pos(t, s + 5), "invalid time: seconds are required (HH:MM:SS)");
    int sec = digits_at(t, s + 6, 2);
    if (sec < 0)
        return fail(ps, tok_pos(t, s + 6), "invalid time: expected HH:MM:SS");
    if (h > 23)
        return fail(ps, tok_pos(t, s), "invalid time: hour %d out of range", h);
    if (m > 59)
        return fail(ps, tok_pos(t, s + 3), "invalid time: minute %d out of range", m);
    if (sec > 60)
        return fail(ps, tok_pos(t, s + 6), "invalid time: second %d out of range", sec);
    dt->hour = (uint8_t)h;
    dt->minute = (uint8_t)m;
    dt->second = (uint8_t)sec;
    *i = s + 8;
    if (*i < t->n && t->s[*i] == '.') {
        size_t k = *i + 1, nd = 0;
        uint32_t ns = 0;
        while (k < t->n && is_digit(t->s[k])) {
            if (nd < 9) {
                ns = ns * 10 + (uint32_t)(t->s[k] - '0');
                nd++;
            }
            k++;
        }
        if (k == *i + 1)
            return fail(ps, tok_pos(t, k), "invalid time: expected digits after '.'");
        while (nd++ < 9)
            ns *= 10;
        dt->nanosecond = ns;
        *i = k;
    }
    return 0;
}

static int parse_datetime(struct parser *ps, const struct token *t, struct toml_value *v) {
    struct toml_datetime dt = {0};
    size_t i = 0;
    int r;

    if (t->s[2] == ':') {
        r = parse_time(ps, t, &i, &dt);
        if (r < 0)
            return r;
        if (i != t->n)
            return fail(ps, tok_pos(t, i), "invalid character '%c' after a local time", t->s[i]);
        v->type = TOML_LOCAL_TIME;
        v->u.datetime = dt;
        return 0;
    }

    int y = digits_at(t, 0, 4), mo = digits_at(t, 5, 2), d = digits_at(t, 8, 2);
    if (y < 0 || mo < 0 || t->n < 10 || t->s[7] != '-' || d < 0)
        return fail(ps, t->pos, "invalid date: expected YYYY-MM-DD");
    if (mo < 1 || mo > 12)
        return fail(ps, tok_pos(t, 5), "invalid date: month %d out of range", mo);
    if (d < 1 || d > days_in_month(y, mo))
        return fail(ps, tok_pos(t, 8), "invalid date: day %d out of range for %04d-%02d", d, y,
                    mo);
    dt.year = (uint16_t)y;
    dt.month = (uint8_t)mo;
    dt.day = (uint8_t)d;
    if (t->n == 10) {
        v->type = TOML_LOCAL_DATE;
        v->u.datetime = dt;
        return 0;
    }
    if (t->s[10] != 'T' && t->s[10] != 't' && t->s[10] != ' ')
        return fail(ps, tok_pos(t, 10), "invalid character '%c' after a date", t->s[10]);
    i = 11;
    r = parse_time(ps, t, &i, &dt);
    if (r < 0)
        return r;
    if (i == t->n) {
        v->type = TOML_LOCAL_DATETIME;
        v->u.datetime = dt;
        return 0;
    }
    if (t->s[i] == 'Z' || t->s[i] == 'z') {
        i++;
    } else if (t->s[i] == '+' || t->s[i] == '-') {
        int oh = digits_at(t, i + 1, 2), om = digits_at(t, i + 4, 2);
        if (oh < 0 || i + 3 >= t->n || t->s[i + 3] != ':' || om < 0)
            return fail(ps, tok_pos(t, i), "invalid time offset: expected +HH:MM or -HH:MM");
        if (oh > 23 || om > 59)
            return fail(ps, tok_pos(t, i), "invalid time offset: out of range");
        int off = oh * 60 + om;
        dt.offset_minutes = (int16_t)(t->s[i] == '-' ? -off : off);
        i += 6;
    } else {
        return fail(ps, tok_pos(t, i), "invalid character '%c' in a date-time", t->s[i]);
    }
    if (i != t->n)
        return fail(ps, tok_pos(t, i), "invalid character '%c' after a date-time", t->s[i]);
    v->type = TOML_DATETIME;
    v->u.datetime = dt;
    return 0;
}

/* A number, a date or a time: one token of [A-Za-z0-9_+-.:], where a date
 * followed by a space and a time is one token too (the spec allows a space
 * for the T). */
static int parse_scalar_token(struct parser *ps, struct toml_value *v) {
    struct token t = {.s = (const char *)ps->p, .pos = here(ps)};
    size_t n = 0;
    while (is_token_char(peek(ps, n)))
        n++;
    if (n == 10 && peek(ps, 4) == '-' && peek(ps, 10) == ' ' && is_digit(peek(ps, 11)) &&
        is_digit(peek(ps, 12)) && peek(ps, 13) == ':') {
        n++;
        while (is_token_char(peek(ps, n)))
            n++;
    }
    t.n = n;
    adv_n(ps, n);
    if (n >= 5 && digits_at(&t, 0, 4) >= 0 && t.s[4] == '-')
        return parse_datetime(ps, &t, v);
    if (n >= 3 && digits_at(&t, 0, 2) >= 0 && t.s[2] == ':')
        return parse_datetime(ps, &t, v);
    return parse_number(ps, &t, v);
}

/* ---- values ------------------------------------------------------------------------ */

static int parse_value(struct parser *ps, const struct toml_value *parent,
                       struct toml_value **ret);
static int parse_keyval(struct parser *ps, struct toml_value *table);

static int parse_array(struct parser *ps, const struct toml_value *parent,
                       struct toml_value **ret) {
    struct toml_value *a;
    char d[16];
    int r = new_container(ps, TOML_ARRAY, parent, here(ps), 0, &a);
    if (r < 0)
        return r;
    adv(ps);
    for (;;) {
        r = skip_ws_comments_newlines(ps);
        if (r < 0)
            return r;
        if (!at_end(ps) && *ps->p == ']')
            break;
        struct toml_value *item;
        r = parse_value(ps, a, &item);
        if (r < 0)
            return r;
        r = array_push(ps, &a->u.array, item);
        if (r < 0)
            return r;
        r = skip_ws_comments_newlines(ps);
        if (r < 0)
            return r;
        if (!at_end(ps) && *ps->p == ',') {
            adv(ps);
            continue;
        }
        if (!at_end(ps) && *ps->p == ']')
            break;
        if (at_end(ps))
            return fail(ps, here(ps), "unterminated array (opened at %u:%u)", a->pos.line,
                        a->pos.column);
        return fail(ps, here(ps), "expected ',' or ']' in an array, found %s",
                    describe(ps, d, sizeof(d)));
    }
    adv(ps);
    *ret = a;
    return 0;
}

static int parse_inline_table(struct parser *ps, const struct toml_value *parent,
                              struct toml_value **ret) {
    struct toml_value *t;
    char d[16];
    int r = new_container(ps, TOML_TABLE, parent, here(ps), TF_INLINE, &t);
    if (r < 0)
        return r;
    adv(ps);
    skip_ws(ps);
    if (!at_end(ps) && *ps->p == '}') {
        adv(ps);
        *ret = t;
        return 0;
    }
    for (;;) {
        r = parse_keyval(ps, t);
        if (r < 0)
            return r;
        skip_ws(ps);
        if (!at_end(ps) && *ps->p == ',') {
            adv(ps);
            skip_ws(ps);
            if (!at_end(ps) && *ps->p == '}')
                return fail(ps, here(ps), "trailing comma in an inline table");
            continue;
        }
        if (!at_end(ps) && *ps->p == '}')
            break;
        if (at_end(ps))
            return fail(ps, here(ps), "unterminated inline table (opened at %u:%u)",
                        t->pos.line, t->pos.column);
        return fail(ps, here(ps), "expected ',' or '}' in an inline table, found %s",
                    describe(ps, d, sizeof(d)));
    }
    adv(ps);
    *ret = t;
    return 0;
}

static int parse_value(struct parser *ps, const struct toml_value *parent,
                       struct toml_value **ret) {
    struct toml_pos pos = here(ps);
    struct toml_value *v;
    char d[16];
    int r;

    if (at_end(ps))
        return fail(ps, pos, "expected a value, found end of input");
    unsigned char c = *ps->p;
    if (c == '[')
        return parse_array(ps, parent, ret);
    if (c == '{')
        return parse_inline_table(ps, parent, ret);
    r = new_value(ps, TOML_STRING, pos, &v);
    if (r < 0)
        return r;
    if (c == '"' || c == '\'') {
        r = parse_string(ps, true);
        if (r < 0)
            return r;
        r = buf_take(ps, &v->u.string.ptr, &v->u.string.len);
    } else if (c == 't' || c == 'f') {
        const char *word = c == 't' ? "true" : "false";
        size_t n = strlen(word);
        if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0 ||
            is_bare(peek(ps, n))) {
            size_t k = 0;
            while (k < 40 && is_bare(peek(ps, k)))
                k++;
            return fail(ps, pos, "invalid value '%.*s' (expected true or false)", (int)k,
                        (const char *)ps->p);
        }
        adv_n(ps, n);
        v->type = TOML_BOOL;
        v->u.boolean = c == 't';
    } else if (is_digit(c) || c == '+' || c == '-' || c == 'i' || c == 'n') {
        r = parse_scalar_token(ps, v);
    } else {
        return fail(ps, pos, "expected a value, found %s", describe(ps, d, sizeof(d)));
    }
    if (r < 0)
        return r;
    *ret = v;
    return 0;
}

/* ---- key/value pairs and headers -------------------------------------------------- */

/* One dotted-key part below t: an existing table made by dotted keys, or a new one. */
static int dotted_descend(struct parser *ps, struct toml_value *t, const struct key_path *kp,
                          size_t i, struct toml_value **ret) {
    char path[SHOW_MAX * 2];
    const struct key_part *k = &kp->part[i];
    struct toml_entry *e = table_find(&t->u.table, k->name, k->len);

    if (!e)
        return add_container(ps, t, k, TOML_TABLE, TF_DOTTED, ret);
    struct toml_value *v = e->value;
    show_path(kp, i, path, sizeof(path));
    if (v->type != TOML_TABLE)
        return fail(ps, k->pos, "key '%s' is %s (defined at %u:%u), not a table", path, what(v),
                    e->key.pos.line, e->key.pos.column);
    if (v->u.table.flags_ & TF_INLINE)
        return fail(ps, k->pos, "cannot add keys to inline table '%s' (defined at %u:%u)", path,
                    v->pos.line, v->pos.column);
    if (!(v->u.table.flags_ & TF_DOTTED))
        return fail(ps, k->pos,
                    "cannot add keys to table '%s' (defined at %u:%u) with dotted keys", path,
                    v->pos.line, v->pos.column);
    *ret = v;
    return 0;
}

/* key = value into table (the current section's table or an inline table).
 * The cursor is on the key; it is left after the value. */
static int parse_keyval(struct parser *ps, struct toml_value *table) {
    struct key_path kp;
    char path[SHOW_MAX * 2], d[16];
    struct toml_value *t = table, *v;
    int r;

    r = parse_key(ps, &kp);
    if (r < 0)
        return r;
    skip_ws(ps);
    if (at_end(ps) || *ps->p != '=')
        return fail(ps, here(ps), "expected '=' after key, found %s",
                    describe(ps, d, sizeof(d)));
    adv(ps);
    skip_ws(ps);
    for (size_t i = 0; i + 1 < kp.n; i++) {
        r = dotted_descend(ps, t, &kp, i, &t);
        if (r < 0)
            return r;
    }
    const struct key_part *last = &kp.part[kp.n - 1];
    struct toml_entry *e = table_find(&t->u.table, last->name, last->len);
    if (e)
        return fail(ps, last->pos, "duplicate key '%s' (first defined at %u:%u)",
                    show_path(&kp, kp.n - 1, path, sizeof(path)), e->key.pos.line,
                    e->key.pos.column);
    r = parse_value(ps, t, &v);
    if (r < 0)
        return r;
    return table_insert(ps, &t->u.table, last, v);
}

/* One header-path part below t: through tables (not inline ones) and into
 * the last element of an array of tables; missing tables are implied. */
static int header_descend(struct parser *ps, struct toml_value *t, const struct key_path *kp,
                          size_t i, struct toml_value **ret) {
    char path[SHOW_MAX * 2];
    const struct key_part *k = &kp->part[i];
    struct toml_entry *e = table_find(&t->u.table, k->name, k->len);

    if (!e)
        return add_container(ps, t, k, TOML_TABLE, TF_IMPLICIT, ret);
    struct toml_value *v = e->value;
    show_path(kp, i, path, sizeof(path));
    if (v->type == TOML_TABLE && !(v->u.table.flags_ & TF_INLINE)) {
        *ret = v;
        return 0;
    }
    if (v->type == TOML_ARRAY && (v->u.array.flags_ & AF_AOT)) {
        *ret = v->u.array.items[v->u.array.len - 1];
        return 0;
    }
    return fail(ps, k->pos, "cannot add to '%s': it is %s (defined at %u:%u)", path, what(v),
                v->pos.line, v->pos.column);
}

/* At '[': a [table] or [[array of tables]] header; makes it the current section. */
static int parse_header(struct parser *ps) {
    struct toml_pos pos = here(ps);
    struct key_path kp;
    char path[SHOW_MAX * 2], d[16];
    struct toml_value *t = &ps->doc->root;
    bool aot = peek(ps, 1) == '[';
    int r;

    adv_n(ps, aot ? 2 : 1);
    skip_ws(ps);
    r = parse_key(ps, &kp);
    if (r < 0)
        return r;
    skip_ws(ps);
    if (aot ? !(peek(ps, 0) == ']' && peek(ps, 1) == ']') : peek(ps, 0) != ']')
        return fail(ps, here(ps), "expected '%s' to close the %s header, found %s",
                    aot ? "]]" : "]", aot ? "array-of-tables" : "table",
                    describe(ps, d, sizeof(d)));
    adv_n(ps, aot ? 2 : 1);
    r = end_of_line(ps, "a table header");
    if (r < 0)
        return r;

    for (size_t i = 0; i + 1 < kp.n; i++) {
        r = header_descend(ps, t, &kp, i, &t);
        if (r < 0)
            return r;
    }
    const struct key_part *last = &kp.part[kp.n - 1];
    struct toml_entry *e = table_find(&t->u.table, last->name, last->len);
    show_path(&kp, kp.n - 1, path, sizeof(path));
    if (!aot) {
        if (!e) {
            struct toml_value *n;
            r = add_container(ps, t, last, TOML_TABLE, TF_DEFINED, &n);
            if (r < 0)
                return r;
            n->pos = pos;
            ps->cur = n;
            return 0;
        }
        struct toml_value *v = e->value;
        if (v->type == TOML_TABLE && v->u.table.flags_ == TF_IMPLICIT) {
            v->u.table.flags_ = TF_DEFINED;
            v->pos = pos;
            ps->cur = v;
            return 0;
        }
        if (v->type == TOML_TABLE)
            return fail(ps, last->pos, "table '%s' already defined at %u:%u%s", path,
                        v->pos.line, v->pos.column,
                        v->u.table.flags_ & TF_DOTTED   ? " by dotted keys"
                        : v->u.table.flags_ & TF_INLINE ? " inline"
                                                        : "");
        return fail(ps, last->pos, "key '%s' is %s (defined at %u:%u), not a table", path,
                    what(v), e->key.pos.line, e->key.pos.column);
    }

    struct toml_value *arr;
    if (!e) {
        r = add_container(ps, t, last, TOML_ARRAY, AF_AOT, &arr);
        if (r < 0)
            return r;
        arr->pos = pos;
    } else if (e->value->type == TOML_ARRAY && (e->value->u.array.flags_ & AF_AOT)) {
        arr = e->value;
    } else {
        return fail(ps, last->pos, "cannot append to '%s': it is %s (defined at %u:%u)", path,
                    what(e->value), e->value->pos.line, e->value->pos.column);
    }
    struct toml_value *n;
    r = new_container(ps, TOML_TABLE, arr, last->pos, TF_DEFINED, &n);
    if (r < 0)
        return r;
    n->pos = pos;
    r = array_push(ps, &arr->u.array, n);
    if (r < 0)
        return r;
    ps->cur = n;
    return 0;
}

/* ---- the document ---------------------------------------------------------------- */

/* Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static int check_utf8(struct parser *ps) {
    const unsigned char *s = ps->p, *end = ps->end;
    uint32_t line = 1, col = 1;
    while (s < end) {
        unsigned char c = *s;
        size_t n;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            if (c == '\n') {
                line++;
                col = 0;
            }
            s++;
            col++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF)
            n = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else {
            return fail(ps, (struct toml_pos){line, col}, "invalid UTF-8: byte 0x%02X", c);
        }
        if ((size_t)(end - s) <= n)
            return fail(ps, (struct toml_pos){line, col}, "invalid UTF-8: truncated sequence");
        for (size_t k = 1; k <= n; k++) {
            unsigned char b = s[k];
            if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF))
                return fail(ps, (struct toml_pos){line, col},
                            "invalid UTF-8: byte 0x%02X in a sequence", b);
        }
        s += n + 1;
        col++;
    }
    return 0;
}

static int parse_document(struct parser *ps) {
    char d[16];
    int r = check_utf8(ps);
    if (r < 0)
        return r;
    if (ps->end - ps->p >= 3 && memcmp(ps->p, "\xEF\xBB\xBF", 3) == 0)
        ps->p += 3; /* the byte order mark: allowed at the start, not a column */
    for (;;) {
        skip_ws(ps);
        if (at_end(ps))
            return 0;
        unsigned char c = *ps->p;
        if (c == '#') {
            r = end_of_line(ps, "a comment");
        } else if (c == '\n' || c == '\r') {
            r = eat_newline(ps);
        } else if (c == '[') {
            r = parse_header(ps);
        } else if (is_bare(c) || c == '"' || c == '\'') {
            r = parse_keyval(ps, ps->cur);
            if (r >= 0)
                r = end_of_line(ps, "a value");
        } else {
            return fail(ps, here(ps), "expected a key or a table header, found %s",
                        describe(ps, d, sizeof(d)));
        }
        if (r < 0)
            return r;
    }
}

int toml_parse(const char *buf, size_t len, size_t max_len, struct toml_doc **ret_doc,
               struct toml_error *err) {
    if (!ret_doc || (!buf && len > 0))
        return -EINVAL;
    if (len > max_len) {
        if (err) {
            err->line = 0;
            err->column = 0;
            snprintf(err->msg, sizeof(err->msg), "input is %zu bytes, more than the limit of %zu",
                     len, max_len);
        }
        return -EFBIG;
    }
    struct toml_doc *doc = calloc(1, sizeof(*doc));
    if (!doc) {
        if (err) {
            *err = (struct toml_error){0};
            snprintf(err->msg, sizeof(err->msg), "out of memory");
        }
        return -ENOMEM;
    }
    doc->root.type = TOML_TABLE;
    doc->root.pos = (struct toml_pos){1, 1};
    doc->root.u.table.flags_ = TF_DEFINED;

    /* buf may be NULL when len is 0 (and NULL + 0 is undefined). */
    const unsigned char *start = buf ? (const unsigned char *)buf : (const unsigned char *)"";
    struct parser ps = {
        .p = start,
        .end = start + len,
        .line = 1,
        .col = 1,
        .doc = doc,
        .err = err,
        .cur = &doc->root,
    };
    int r = parse_document(&ps);
    free(ps.buf);
    if (r < 0) {
        toml_free(doc);
        return r;
    }
    *ret_doc = doc;
    return 0;
}

/* ---- lookups ---------------------------------------------------------------------- */

const struct toml_value *toml_root(const struct toml_doc *doc) { return doc ? &doc->root : NULL; }

const struct toml_value *toml_table_get_n(const struct toml_value *table, const char *key,
                                          size_t keylen) {
    if (!table || table->type != TOML_TABLE || (!key && keylen > 0))
        return NULL;
    const struct toml_entry *e = table_find(&table->u.table, key ? key : "", keylen);
    return e ? e->value : NULL;
}

const struct toml_value *toml_table_get(const struct toml_value *table, const char *key) {
    if (!key)
        return NULL;
    return toml_table_get_n(table, key, strlen(key));
}

size_t toml_table_len(const struct toml_value *table) {
    return table && table->type == TOML_TABLE ? table->u.table.len : 0;
}

const struct toml_value *toml_table_at(const struct toml_value *table, size_t i,
                                       const struct toml_key **ret_key) {
    if (i >= toml_table_len(table))
        return NULL;
    const struct toml_entry *e = &table->u.table.entries[i];
    if (ret_key)
        *ret_key = &e->key;
    return e->value;
}

size_t toml_array_len(const struct toml_value *array) {
    return array && array->type == TOML_ARRAY ? array->u.array.len : 0;
}

const struct toml_value *toml_array_at(const struct toml_value *array, size_t i) {
    if (i >= toml_array_len(array))
        return NULL;
    return array->u.array.items[i];
}

const char *toml_type_name(enum toml_type type) {
    switch (type) {
    case TOML_TABLE:
        return "table";
    case TOML_ARRAY:
        return "array";
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
        return "local datetime";
    case TOML_LOCAL_DATE:
        return "local date";
    case TOML_LOCAL_TIME:
        return "local time";
    }
    return "?";
}
