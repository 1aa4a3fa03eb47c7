/* A strict TOML 1.0.0 parser for the CLI's configuration files.
 *
 * Contract.
 * - toml_parse() reads len bytes at buf (no NUL terminator needed; NUL bytes
 *   in the input are refused like any other control character) and builds a
 *   tree of values owned by one struct toml_doc. The tree never points into
 *   buf: the caller may free buf as soon as toml_parse() returns.
 * - Returns 0 and sets *ret_doc on success; on failure *ret_doc is untouched
 *   and, if err is not NULL, *err holds a position and a one-line message:
 *     -EFBIG    len > max_len; refused before a single byte is looked at
 *               (err->line and err->column are 0)
 *     -EBADMSG  the input is not valid TOML 1.0.0 (bad UTF-8, syntax, a
 *               redefined key or table, an out-of-range number or date,
 *               nesting deeper than TOML_MAX_DEPTH)
 *     -ENOMEM   out of memory
 *     -EINVAL   bad arguments (ret_doc NULL, or buf NULL with len > 0)
 *   On success *err is untouched.
 * - Memory is bounded by the input: every node comes from input bytes, so
 *   max_len bounds the tree (a few tens of bytes of tree per input byte at
 *   worst). Nesting (tables and arrays, wherever they come from: headers,
 *   dotted keys, inline values) is bounded by TOML_MAX_DEPTH, so code that
 *   walks the tree recursively needs at most that many frames.
 * - Positions are 1-based; a column counts Unicode code points from the start
 *   of the line (a tab counts one; a UTF-8 byte order mark at the start of the
 *   input is not counted).
 * - Pure: no I/O, no logging, no global state; thread-safe on distinct docs.
 *   A doc is immutable once returned and may be read from several threads.
 * - toml_free() accepts NULL. Every pointer obtained from a doc dies with it. */
#ifndef LYH_TOML_H
#define LYH_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/macros.h"

/* Deepest nesting accepted. The root table is at depth 0; a table or array is
 * one deeper than the table or array holding it. */
#define TOML_MAX_DEPTH 64u
/* Enough for every message toml_parse() writes, NUL included. */
#define TOML_ERROR_MSG_MAX 256u

struct toml_pos {
    uint32_t line;   /* 1-based */
    uint32_t column; /* 1-based, in code points */
};

struct toml_error {
    uint32_t line;   /* where the problem is; 0 when it has no position */
    uint32_t column;
    char msg[TOML_ERROR_MSG_MAX]; /* e.g. "duplicate key 'x' (first defined at 3:1)" */
};

enum toml_type {
    TOML_TABLE = 1,
    TOML_ARRAY,
    TOML_STRING,
    TOML_INTEGER,
    TOML_FLOAT,
    TOML_BOOL,
    TOML_DATETIME,       /* offset date-time: 1979-05-27T07:32:00-07:00 */
    TOML_LOCAL_DATETIME, /* 1979-05-27T07:32:00 */
    TOML_LOCAL_DATE,     /* 1979-05-27 */
    TOML_LOCAL_TIME,     /* 07:32:00 */
};

/* The fields a type does not have are 0 (a local date has no time, a local
 * time no date, only TOML_DATETIME has an offset). Digits of a fraction past
 * the ninth are dropped (the spec allows truncation). Leap second 60 is
 * accepted as written: RFC 3339 allows it, and TOML does not say which
 * minutes may have one. */
struct toml_datetime {
    uint16_t year;   /* 0-9999 */
    uint8_t month;   /* 1-12 */
    uint8_t day;     /* 1-31, valid for the month and year */
    uint8_t hour;    /* 0-23 */
    uint8_t minute;  /* 0-59 */
    uint8_t second;  /* 0-60 */
    uint32_t nanosecond;
    int16_t offset_minutes; /* -1439..1439; Z, +00:00 and -00:00 are all 0 */
};

struct toml_value;

struct toml_key {
    const char *name; /* NUL-terminated, but may contain NUL bytes ("\u0000"): use len */
    size_t len;
    struct toml_pos pos; /* where this key first appears */
};

struct toml_entry {
    struct toml_key key;
    struct toml_value *value;
};

/* Read the public fields; the others belong to toml.c. */
struct toml_table {
    struct toml_entry *entries; /* in insertion order */
    size_t len;
    size_t cap_;
    uint32_t *index_; /* hash index over entries, NULL while the table is small */
    uint32_t index_cap_;
    uint16_t depth_;
    uint8_t flags_;
};

struct toml_array {
    struct toml_value **items;
    size_t len;
    size_t cap_;
    uint16_t depth_;
    uint8_t flags_;
};

struct toml_value {
    enum toml_type type;
    /* Scalars, arrays and inline tables: the first character of the value.
     * A table from a [header] or [[header]]: the header's '['. A table only
     * implied by a header or a dotted key: the key part that implied it. */
    struct toml_pos pos;
    union {
        struct toml_table table;
        struct toml_array array;
        struct {
            const char *ptr; /* NUL-terminated, valid UTF-8, may contain NUL bytes: use len */
            size_t len;
        } string;
        int64_t integer;
        double floating;
        bool boolean;
        struct toml_datetime datetime;
    } u;
};

struct toml_doc;

int toml_parse(const char *buf, size_t len, size_t max_len, struct toml_doc **ret_doc,
               struct toml_error *err);
void toml_free(struct toml_doc *doc);
static inline void toml_freep(struct toml_doc **doc) { toml_free(*doc); }
#define _cleanup_toml_ _cleanup_(toml_freep)

/* The root table (never NULL for a doc toml_parse() returned). */
const struct toml_value *toml_root(const struct toml_doc *doc);

/* Lookups. They return NULL when v is NULL or not of the container type, when
 * the key is absent or the index out of range, so lookups chain:
 * toml_table_get(toml_table_get(root, "net"), "dns"). */
const struct toml_value *toml_table_get(const struct toml_value *table, const char *key);
const struct toml_value *toml_table_get_n(const struct toml_value *table, const char *key,
                                          size_t keylen);
/* Number of keys (0 if not a table). */
size_t toml_table_len(const struct toml_value *table);
/* The i-th key in insertion order; *ret_key (may be NULL) is set when the
 * result is not NULL. */
const struct toml_value *toml_table_at(const struct toml_value *table, size_t i,
                                       const struct toml_key **ret_key);
/* Number of items (0 if not an array). */
size_t toml_array_len(const struct toml_value *array);
const struct toml_value *toml_array_at(const struct toml_value *array, size_t i);

/* "table", "array", "string", "integer", "float", "bool", "datetime",
 * "local datetime", "local date", "local time"; "?" for anything else. */
const char *toml_type_name(enum toml_type type);

#endif
