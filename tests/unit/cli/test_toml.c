/* cli/toml.c: every value type with exact values, positions of values, keys
 * and errors (exact messages), the table-definition rules, the depth bound,
 * the size cap, strict UTF-8 and control characters, lookups, and the
 * contract (ret_doc and err untouched where they must be, input that is not
 * NUL-terminated). The toml-test corpus is run by toml_test_runner.c. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/toml.h"
#include "common/macros.h"

#define LIMIT (256u * 1024u)

static struct toml_doc *parse_ok(const char *text) {
    struct toml_doc *doc = NULL;
    struct toml_error err = {0};
    int r = toml_parse(text, strlen(text), LIMIT, &doc, &err);
    if (r != 0)
        print_error("unexpected refusal of <<%s>>: %d at %u:%u: %s\n", text, r, err.line,
                    err.column, err.msg);
    assert_int_equal(r, 0);
    assert_non_null(doc);
    return doc;
}

/* Refused with -EBADMSG at line:col with exactly msg. */
static void refused(const char *text, uint32_t line, uint32_t col, const char *msg) {
    struct toml_doc *doc = (struct toml_doc *)0x1;
    struct toml_error err = {0};
    int r = toml_parse(text, strlen(text), LIMIT, &doc, &err);
    if (r != -EBADMSG || err.line != line || err.column != col || strcmp(err.msg, msg) != 0)
        print_error("<<%s>>: got %d at %u:%u: %s\n", text, r, err.line, err.column, err.msg);
    assert_int_equal(r, -EBADMSG);
    assert_ptr_equal(doc, (struct toml_doc *)0x1); /* untouched */
    assert_string_equal(err.msg, msg);
    assert_int_equal(err.line, line);
    assert_int_equal(err.column, col);
}

/* Refused with -EBADMSG, whatever the message. */
static void refused_any(const char *text, size_t len) {
    struct toml_doc *doc = NULL;
    struct toml_error err = {0};
    int r = toml_parse(text, len, LIMIT, &doc, &err);
    if (r != -EBADMSG)
        print_error("<<%.*s>> was not refused (%d)\n", (int)len, text, r);
    assert_int_equal(r, -EBADMSG);
    assert_null(doc);
    assert_true(err.line > 0 && err.column > 0 && err.msg[0]);
}

static const struct toml_value *get(const struct toml_doc *doc, const char *key) {
    const struct toml_value *v = toml_table_get(toml_root(doc), key);
    if (!v)
        print_error("no key '%s'\n", key);
    assert_non_null(v);
    return v;
}

static void assert_pos(struct toml_pos p, uint32_t line, uint32_t col) {
    assert_int_equal(p.line, line);
    assert_int_equal(p.column, col);
}

/* ---- values -------------------------------------------------------------------------- */

static void test_strings(void **state) {
    (void)state;
    _cleanup_toml_ struct toml_doc *doc = parse_ok(
        "basic = \"tab\\there \\\"q\\\" \\\\ \\u00e9\\U0001F600\"\n"
        "literal = 'C:\\path\\no\\escapes'\n"
        "ml = \"\"\"\nfirst\r\nsecond \\\n    \t  joined\"\"\"\n"
        "mll = '''\n  keep \\n as is\n'''\n"
        "quotes = \"\"\"\"two\"\" inside\"\"\"\"\n"
        "lquotes = ''''one' ''''\n"
        "nul = \"a\\u0000b\"\n"
        "empty = \"\"\n");
    const struct toml_value *v = get(doc, "basic");
    assert_int_equal(v->type, TOML_STRING);
    assert_string_equal(v->u.string.ptr, "tab\there \"q\" \\ \xc3\xa9\xf0\x9f\x98\x80");
    assert_string_equal(get(doc, "literal")->u.string.ptr, "C:\\path\\no\\escapes");
    /* The first newline is trimmed, CRLF becomes LF, a line-ending backslash
     * eats the newline and the indentation after it. */
    assert_string_equal(get(doc, "ml")->u.string.ptr, "first\nsecond joined");
    assert_string_equal(get(doc, "mll")->u.string.ptr, "  keep \\n as is\n");
    assert_string_equal(get(doc, "quotes")->u.string.ptr, "\"two\"\" inside\"");
    assert_string_equal(get(doc, "lquotes")->u.string.ptr, "'one' '");
    v = get(doc, "nul");
    assert_int_equal(v->u.string.len, 3);
    assert_memory_equal(v->u.string.ptr, "a\0b", 4);
    v = get(doc, "empty");
    assert_int_equal(v->u.string.len, 0);
    assert_string_equal(v->u.string.ptr, "");
}

static void test_integers(void **state) {
    (void)state;
    _cleanup_toml_ struct toml_doc *doc = parse_ok(
        "a = 42\nb = +17\nc = -0\nd = 1_000_000\n"
        "max = 9223372036854775807\nmin = -9223372036854775808\n"
        "hex = 0xDEAD_beef\noct = 0o755\nbin = 0b1101\nhexmax = 0x7fffffffffffffff\n"
        "hexzero = 0x0001\n");
    assert_int_equal(get(doc, "a")->type, TOML_INTEGER);
    assert_int_equal(get(doc, "a")->u.integer, 42);
    assert_int_equal(get(doc, "b")->u.integer, 17);
    assert_int_equal(get(doc, "c")->u.integer, 0);
    assert_int_equal(get(doc, "d")->u.integer, 1000000);
    assert_true(get(doc, "max")->u.integer == INT64_MAX);
    assert_true(get(doc, "min")->u.integer == INT64_MIN);
    assert_int_equal(get(doc, "hex")->u.integer, 0xDEADBEEF);
    assert_int_equal(get(doc, "oct")->u.integer, 0755);
    assert_int_equal(get(doc, "bin")->u.integer, 13);
    assert_true(get(doc, "hexmax")->u.integer == INT64_MAX);
    assert_int_equal(get(doc, "hexzero")->u.integer, 1);

    refused("x = 9223372036854775808", 1, 5,
            "integer overflow: 9223372036854775808 does not fit in 64 bits");
    refused("x = -9223372036854775809", 1, 5,
            "integer overflow: -9223372036854775809 does not fit in 64 bits");
    refused("x = 0x8000000000000000", 1, 5,
            "integer overflow: 0x8000000000000000 does not fit in 64 bits");
    refused("x = 012", 1, 5, "leading zeros are not allowed in a number");
    refused("x = -0x1", 1, 5, "a hexadecimal integer cannot have a sign");
    refused("x = 1__0", 1, 6, "'_' in a number must be between two digits");
    refused("x = 1_", 1, 6, "'_' in a number must be between two digits");
    refused("x = 0o8", 1, 7, "expected a digit in an integer");
    refused("x = 0b102", 1, 9, "invalid character '2' in a binary integer");
    refused("x = 0X1", 1, 6, "invalid character 'X' in a number");
}

static void test_floats(void **state) {
    (void)state;
    _cleanup_toml_ struct toml_doc *doc = parse_ok(
        "a = 3.1415\nb = -0.0\nc = 5e+22\nd = 1e06\ne = 6.626e-34\nf = 224_617.445_991\n"
        "g = inf\nh = -inf\ni = nan\nj = -nan\nk = 0e0\nl = 1e-400\n");
    assert_int_equal(get(doc, "a")->type, TOML_FLOAT);
    assert_true(get(doc, "a")->u.floating == 3.1415);
    assert_true(get(doc, "b")->u.floating == 0.0 && signbit(get(doc, "b")->u.floating));
    assert_true(get(doc, "c")->u.floating == 5e22);
    assert_true(get(doc, "d")->u.floating == 1e6);
    assert_true(get(doc, "e")->u.floating == 6.626e-34);
    assert_true(get(doc, "f")->u.floating == 224617.445991);
    assert_true(isinf(get(doc, "g")->u.floating) && get(doc, "g")->u.floating > 0);
    assert_true(isinf(get(doc, "h")->u.floating) && get(doc, "h")->u.floating < 0);
    assert_true(isnan(get(doc, "i")->u.floating));
    assert_true(isnan(get(doc, "j")->u.floating));
    assert_true(get(doc, "k")->u.floating == 0.0);
    assert_true(get(doc, "l")->u.floating == 0.0); /* underflow rounds to zero */

    refused("x = 1e400", 1, 5, "float out of range: 1e400");
    refused("x = 1.", 1, 7, "expected a digit in the fraction of a float");
    refused("x = .5", 1, 5, "expected a value, found '.'");
    refused("x = 1e", 1, 7, "expected a digit in the exponent of a float");
    refused("x = 1._5", 1, 7, "'_' in a number must be between two digits");
    refused("x = 01.5", 1, 5, "leading zeros are not allowed in a number");
    refused("x = infinity", 1, 5, "invalid value 'infinity'");
    refused("x = NaN", 1, 5, "expected a value, found 'N'");
}

static void test_bools(void **state) {
    (void)state;
    _cleanup_toml_ struct toml_doc *doc = parse_ok("t = true\nf = false\n");
    assert_int_equal(get(doc, "t")->type, TOML_BOOL);
    assert_true(get(doc, "t")->u.boolean);
    assert_false(get(doc, "f")->u.boolean);
    refused("x = True", 1, 5, "expected a value, found 'T'");
    refused("x = truex", 1, 5, "invalid value 'truex' (expected true or false)");
}

static void test_datetimes(void **state) {
    (void)state;
    _cleanup_toml_ struct toml_doc *doc = parse_ok(
        "odt = 1979-05-27T07:32:00.999999-07:30\n"
        "space = 1979-05-27 07:32:00z\n"
        "ldt = 1979-05-27t00:32:00.123456789123\n"
        "ld = 2000-02-29\n"
        "lt = 23:59:60.5\n");
    const struct toml_value *v = get(doc, "odt");
    assert_int_equal(v->type, TOML_DATETIME);
    assert_int_equal(v->u.datetime.year, 1979);
    assert_int_equal(v->u.datetime.month, 5);
    assert_int_equal(v->u.datetime.day, 27);
    assert_int_equal(v->u.datetime.hour, 7);
    assert_int_equal(v->u.datetime.minute, 32);
    assert_int_equal(v->u.datetime.second, 0);
    assert_int_equal(v->u.datetime.nanosecond, 999999000);
    assert_int_equal(v->u.datetime.offset_minutes, -(7 * 60 + 30));
    v = get(doc, "space");
    assert_int_equal(v->type, TOML_DATETIME);
    assert_int_equal(v->u.datetime.offset_minutes, 0);
    assert_int_equal(v->u.datetime.hour, 7);
    v = get(doc, "ldt");
    assert_int_equal(v->type, TOML_LOCAL_DATETIME);
    assert_int_equal(v->u.datetime.nanosecond, 123456789); /* past 9 digits: truncated */
    v = get(doc, "ld");
    assert_int_equal(v->type, TOML_LOCAL_DATE);
    assert_int_equal(v->u.datetime.year, 2000);
    assert_int_equal(v->u.datetime.month, 2);
    assert_int_equal(v->u.datetime.day, 29);
    assert_int_equal(v->u.datetime.hour, 0);
    v = get(doc, "lt");
    assert_int_equal(v->type, TOML_LOCAL_TIME);
    assert_int_equal(v->u.datetime.hour, 23);
    assert_int_equal(v->u.datetime.second, 60);
    assert_int_equal(v->u.datetime.nanosecond, 500000000);
    assert_int_equal(v->u.datetime.year, 0);

    refused("d = 1900-02-29", 1, 13, "invalid date: day 29 out of range for 1900-02");
    refused("d = 2021-13-01", 1, 10, "invalid date: month 13 out of range");
    refused("d = 1979-05-27T07:32Z", 1, 21, "invalid time: seconds are required (HH:MM:SS)");
    refused("t = 24:00:00", 1, 5, "invalid time: hour 24 out of range");
    refused("t = 12:00:61", 1, 11, "invalid time: second 61 out of range");
    refused("d = 1979-05-27T07:32:00+24:00", 1, 24, "invalid time offset: out of range");
    refused("d = 1979-05-27T07:32:00+0700", 1, 24,
            "invalid time offset: expected +HH:MM or -HH:MM");
    refused("d = 1979-05-27T07:32:00.Z", 1, 25, "invalid time: expected digits after '.'");
    refused("d = 1979-05-27 x", 1, 16, "expected a newline after a value, found 'x'");
}

static void test_arrays_and_inline_tables(void **state) {
    (void)state;
    _cleanup_toml_ struct toml_doc *doc = parse_ok(
        "a = [ 1, 'two', [3.0], {x = 4}, ]\n"
        "b = [ # comment\n  1,\n\n  2 # two\n]\n"
        "c = []\n"
        "p = { x = 1, y.z = 2, s = { t = true } }\n");
    const struct toml_value *a = get(doc, "a");
    assert_int_equal(a->type, TOML_ARRAY);
    assert_int_equal(toml_array_len(a), 4);
    assert_int_equal(toml_array_at(a, 0)->u.integer, 1);
    assert_string_equal(toml_array_at(a, 1)->u.string.ptr, "two");
    assert_true(toml_array_at(toml_array_at(a, 2), 0)->u.floating == 3.0);
    assert_int_equal(toml_table_get(toml_array_at(a, 3), "x")->u.integer, 4);
    assert_null(toml_array_at(a, 4));
    const struct toml_value *b = get(doc, "b");
    assert_int_equal(toml_array_len(b), 2);
    assert_int_equal(toml_array_at(b, 1)->u.integer, 2);
    assert_int_equal(toml_array_len(get(doc, "c")), 0);
    const struct toml_value *p = get(doc, "p");
    assert_int_equal(p->type, TOML_TABLE);
    assert_int_equal(toml_table_get(toml_table_get(p, "y"), "z")->u.integer, 2);
    assert_true(toml_table_get(toml_table_get(p, "s"), "t")->u.boolean);

    refused("a = [1 2]", 1, 8, "expected ',' or ']' in an array, found '2'");
    refused("a = [1,,2]", 1, 8, "expected a value, found ','");
    refused("a = [1,\n", 2, 1, "expected a value, found end of input");
    refused("a = [1\n", 2, 1, "unterminated array (opened at 1:5)");
    refused("p = {x = 1,}", 1, 12, "trailing comma in an inline table");
    refused("p = {x = 1\n}", 1, 11, "expected ',' or '}' in an inline table, found newline");
    refused("p = {\nx = 1}", 1, 6, "expected a key, found newline");
    refused("p = {x = 1, x = 2}", 1, 13, "duplicate key 'x' (first defined at 1:6)");
}

/* ---- positions ----------------------------------------------------------------------- */

static void test_positions(void **state) {
    (void)state;
    /* Columns count code points; CRLF ends a line like LF; a BOM is not a column. */
    _cleanup_toml_ struct toml_doc *doc = parse_ok(
        "\xef\xbb\xbf"
        "a = 1\r\n"
        "\"\xc3\xa9t\xc3\xa9\" = \"\xe2\x82\xac\" # comment\n"
        "[t]\n"
        "  x.y = [1,\n"
        "    2]\n"
        "[[arr]]\n");
    const struct toml_key *k;
    const struct toml_value *root = toml_root(doc), *v;

    v = toml_table_at(root, 0, &k);
    assert_string_equal(k->name, "a");
    assert_pos(k->pos, 1, 1);
    assert_pos(v->pos, 1, 5);

    v = toml_table_at(root, 1, &k);
    assert_string_equal(k->name, "\xc3\xa9t\xc3\xa9");
    assert_pos(k->pos, 2, 1);
    assert_pos(v->pos, 2, 9);

    const struct toml_value *t = toml_table_at(root, 2, &k);
    assert_string_equal(k->name, "t");
    assert_pos(k->pos, 3, 2);
    assert_pos(t->pos, 3, 1); /* a header's table: the '[' */
    const struct toml_value *x = toml_table_at(t, 0, &k);
    assert_pos(k->pos, 4, 3);
    assert_pos(x->pos, 4, 3); /* a table implied by a dotted key: the key part */
    toml_table_at(x, 0, &k);
    assert_pos(k->pos, 4, 5);
    v = toml_table_get(x, "y");
    assert_pos(v->pos, 4, 9);
    assert_pos(toml_array_at(v, 1)->pos, 5, 5);

    const struct toml_value *arr = get(doc, "arr");
    assert_pos(arr->pos, 6, 1);
    assert_pos(toml_array_at(arr, 0)->pos, 6, 1);

    /* Errors point at the offending character, in code points. */
    refused("a = 1\n\xe2\x82\xac\xe2\x82\xac = 2", 2, 1,
            "expected a key or a table header, found U+20AC");
    refused("\"\xc3\xa9\" = 1\nb = \"\xc3\xa9\\q\"", 2, 7, "invalid escape \\q");
    refused("a = 1\r\nb c = 2", 2, 3, "expected '=' after key, found 'c'");
    refused("a = 1 # \x01", 1, 9, "control character U+0001 in comment");
}

/* ---- errors -------------------------------------------------------------------------- */

static void test_syntax_errors(void **state) {
    (void)state;
    refused("key", 1, 4, "expected '=' after key, found end of input");
    refused("key value", 1, 5, "expected '=' after key, found 'v'");
    refused("a =", 1, 4, "expected a value, found end of input");
    refused("a = 1 b = 2", 1, 7, "expected a newline after a value, found 'b'");
    refused("= 1", 1, 1, "expected a key or a table header, found '='");
    refused("a.=1", 1, 3, "expected a key, found '='");
    refused("[a] b = 1", 1, 5, "expected a newline after a table header, found 'b'");
    refused("[a", 1, 3, "expected ']' to close the table header, found end of input");
    refused("[[a]", 1, 4, "expected ']]' to close the array-of-tables header, found ']'");
    refused("[]", 1, 2, "expected a key, found ']'");
    refused("\"\"\"k\"\"\" = 1", 1, 1, "a multi-line string cannot be a key");
    refused("s = \"abc\\q\"", 1, 9, "invalid escape \\q");
    refused("s = \"\\uD800\"", 1, 6, "invalid escape \\uD800: not a Unicode scalar value");
    refused("s = \"\\U00110000\"", 1, 6, "invalid escape \\U00110000: not a Unicode scalar value");
    refused("s = \"\\u12\"", 1, 6, "invalid escape \\u: expected 4 hex digits");
    refused("s = \"\\x41\"", 1, 6, "invalid escape \\x"); /* TOML 1.1 only */
    refused("s = \"\\e\"", 1, 6, "invalid escape \\e");   /* TOML 1.1 only */
    refused("s = \"abc\ndef\"", 1, 9,
            "unterminated string (opened at 1:5): newline before the closing quote");
    refused("s = \"\"\"abc", 1, 11, "unterminated string (opened at 1:5)");
    refused("s = \"\"\"a \\ b\"\"\"", 1, 10,
            "invalid escape: '\\' followed by whitespace must end the line");
    refused("s = \"\"\"\"\"\"\"\"\"", 1, 13, "expected a newline after a value, found '\"'");
    refused("s = \"a\tb\x7f\"", 1, 9, "control character U+007F in a string must be escaped");
    refused("s = '''a\x0b'''", 1, 9, "control character U+000B in a string must be escaped");
    refused("a = 1\rb = 2", 1, 6, "carriage return not followed by a line feed");
    refused("s = \"\"\"a\rb\"\"\"", 1, 9, "carriage return not followed by a line feed");
}

static void test_utf8(void **state) {
    (void)state;
    static const char *const bad[] = {
        "s = \"\xc0\xaf\"",             /* overlong '/' */
        "s = \"\xe0\x80\xaf\"",         /* overlong, three bytes */
        "s = \"\xed\xa0\x80\"",         /* surrogate U+D800 */
        "s = \"\xf4\x90\x80\x80\"",     /* U+110000 */
        "s = \"\xf5\x80\x80\x80\"",     /* lead byte past F4 */
        "s = \"\x80\"",                 /* lone continuation byte */
        "# \xe2\x82",                   /* truncated at the end */
        "s = '\xff'",
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        refused_any(bad[i], strlen(bad[i]));
    refused("a = 1\ns = \"\xe2\x82\xac\xc0\xaf\"", 2, 7, "invalid UTF-8: byte 0xC0");
    refused("a = 1\n# \xe2\x82", 2, 3, "invalid UTF-8: truncated sequence");
    /* NUL is a control character wherever it is. */
    refused_any("a = \"x\0\"", 8);
    refused_any("a = 1 #\0", 8);
    refused_any("\0", 1);
    /* Four-byte code points are fine, in keys (quoted) and values. */
    _cleanup_toml_ struct toml_doc *doc = parse_ok("\"\xf0\x9f\x98\x80\" = '\xf4\x8f\xbf\xbf'");
    assert_string_equal(get(doc, "\xf0\x9f\x98\x80")->u.string.ptr, "\xf4\x8f\xbf\xbf");
}

/* ---- the table rules ----------------------------------------------------------------- */

static void test_duplicates_and_redefinition(void **state) {
    (void)state;
    refused("a = 1\nb = 2\na = 3", 3, 1, "duplicate key 'a' (first defined at 1:1)");
    refused("x = 1\n\"x\" = 2", 2, 1, "duplicate key 'x' (first defined at 1:1)");
    refused("x = 1\n'x' = 2", 2, 1, "duplicate key 'x' (first defined at 1:1)");
    refused("[t]\n  a.b = 1\n  a.b = 2", 3, 5, "duplicate key 'a.b' (first defined at 2:5)");
    refused("[a]\n[b]\n[a]", 3, 2, "table 'a' already defined at 1:1");
    refused("[a]\nb = 1\n[a.b]", 3, 4, "key 'a.b' is an integer (defined at 2:1), not a table");
    refused("a = {}\n[a]", 2, 2, "table 'a' already defined at 1:5 inline");
    refused("a = {b = 1}\n[a.c]", 2, 2,
            "cannot add to 'a': it is an inline table (defined at 1:5)");
    refused("a = {b = {c = 1}}\na.b.d = 2", 2, 1,
            "cannot add keys to inline table 'a' (defined at 1:5)");
    refused("a = {b = {c = 1}, b.d = 2}", 1, 19,
            "cannot add keys to inline table 'b' (defined at 1:10)");
    refused("a.b = 1\n[a]", 2, 2, "table 'a' already defined at 1:1 by dotted keys");
    refused("[x]\na.b = 1\n[x.a]", 3, 4, "table 'x.a' already defined at 2:1 by dotted keys");
    refused("[a.b.c]\n[a]\nb.d = 1", 3, 1,
            "cannot add keys to table 'b' (defined at 1:4) with dotted keys");
    refused("[a.b]\n[a]\nb.c = 1", 3, 1,
            "cannot add keys to table 'b' (defined at 1:1) with dotted keys");
    refused("a = []\n[[a]]", 2, 3, "cannot append to 'a': it is an array (defined at 1:5)");
    refused("a = [{}]\n[a.b]", 2, 2, "cannot add to 'a': it is an array (defined at 1:5)");
    refused("[[a]]\n[a]", 2, 2, "key 'a' is an array of tables (defined at 1:3), not a table");
    refused("[a]\n[[a]]", 2, 3, "cannot append to 'a': it is a table (defined at 1:1)");
    refused("[[a.b]]\n[a]\nb.c = 1", 3, 1,
            "key 'b' is an array of tables (defined at 1:5), not a table");
    refused("a = 1\na.b = 2", 2, 1, "key 'a' is an integer (defined at 1:1), not a table");

    /* And what the spec allows. */
    _cleanup_toml_ struct toml_doc *doc = parse_ok(
        "[x.y.z]\n[x]\n"                                      /* super-table after */
        "[fruit]\napple.color = 'red'\napple.taste.sweet = true\n"
        "[fruit.apple.texture]\nsmooth = true\n"              /* sub-table of a dotted table */
        "[[arr]]\nn = 1\n[arr.sub]\nm = 1\n[[arr]]\nn = 2\n" /* headers enter the last element */
        "[[arr.inner]]\nk = 1\n");
    const struct toml_value *fruit = get(doc, "fruit");
    const struct toml_value *apple = toml_table_get(fruit, "apple");
    assert_string_equal(toml_table_get(apple, "color")->u.string.ptr, "red");
    assert_true(toml_table_get(toml_table_get(apple, "texture"), "smooth")->u.boolean);
    const struct toml_value *arr = get(doc, "arr");
    assert_int_equal(toml_array_len(arr), 2);
    assert_int_equal(toml_table_get(toml_table_get(toml_array_at(arr, 0), "sub"), "m")->u.integer,
                     1);
    assert_null(toml_table_get(toml_array_at(arr, 1), "sub"));
    const struct toml_value *inner = toml_table_get(toml_array_at(arr, 1), "inner");
    assert_int_equal(toml_table_get(toml_array_at(inner, 0), "k")->u.integer, 1);
    assert_non_null(toml_table_get(get(doc, "x"), "y"));
}

static void test_many_keys(void **state) {
    (void)state;
    /* Enough keys for the hash index; every one found, the repeat refused. */
    size_t n = 3000;
    char *text = malloc(n * 16 + 32);
    assert_non_null(text);
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(text + len, "k%zu = %zu\n", i, i);
    struct toml_doc *doc = NULL;
    struct toml_error err;
    assert_int_equal(toml_parse(text, len, LIMIT, &doc, &err), 0);
    const struct toml_value *root = toml_root(doc);
    assert_int_equal(toml_table_len(root), n);
    for (size_t i = 0; i < n; i++) {
        char key[16];
        const struct toml_key *k;
        snprintf(key, sizeof(key), "k%zu", i);
        assert_int_equal(toml_table_get(root, key)->u.integer, (int64_t)i);
        assert_int_equal(toml_table_at(root, i, &k)->u.integer, (int64_t)i); /* insertion order */
        assert_string_equal(k->name, key);
    }
    assert_null(toml_table_get(root, "k3000"));
    toml_free(doc);
    len += (size_t)sprintf(text + len, "k1234 = 0\n");
    doc = NULL;
    assert_int_equal(toml_parse(text, len, LIMIT, &doc, &err), -EBADMSG);
    assert_null(doc);
    assert_string_equal(err.msg, "duplicate key 'k1234' (first defined at 1235:1)");
    assert_int_equal(err.line, 3001);
    free(text);
}

/* ---- bounds -------------------------------------------------------------------------- */

/* "a = " then depth '[' (or "{b=") and their closers. */
static char *nested(size_t depth, bool tables) {
    char *s = malloc(depth * 4 + 16);
    assert_non_null(s);
    size_t n = (size_t)sprintf(s, "a = ");
    for (size_t i = 0; i < depth; i++)
        n += (size_t)sprintf(s + n, "%s", tables ? "{b=" : "[");
    n += (size_t)sprintf(s + n, "1");
    for (size_t i = 0; i < depth; i++)
        s[n++] = tables ? '}' : ']';
    s[n] = '\0';
    return s;
}

static void test_depth(void **state) {
    (void)state;
    char *s = nested(TOML_MAX_DEPTH, false);
    struct toml_doc *doc = parse_ok(s);
    const struct toml_value *v = get(doc, "a");
    for (unsigned i = 1; i < TOML_MAX_DEPTH; i++)
        v = toml_array_at(v, 0);
    assert_int_equal(toml_array_at(v, 0)->u.integer, 1);
    toml_free(doc);
    free(s);

    s = nested(TOML_MAX_DEPTH + 1, false);
    refused(s, 1, 5 + TOML_MAX_DEPTH, "nesting deeper than 64 levels");
    free(s);
    s = nested(TOML_MAX_DEPTH, true);
    toml_free(parse_ok(s));
    free(s);
    s = nested(TOML_MAX_DEPTH + 1, true);
    refused(s, 1, 5 + 3 * TOML_MAX_DEPTH, "nesting deeper than 64 levels");
    free(s);
    s = nested(100000, false); /* far deeper: refused at 65, no stack used beyond */
    refused(s, 1, 5 + TOML_MAX_DEPTH, "nesting deeper than 64 levels");
    free(s);

    /* Headers and dotted keys nest too: 64 tables deep is fine, 65 is not. */
    char buf[1024];
    size_t n = 0;
    n += (size_t)sprintf(buf + n, "[");
    for (unsigned i = 0; i < TOML_MAX_DEPTH; i++)
        n += (size_t)sprintf(buf + n, "%sk", i ? "." : "");
    sprintf(buf + n, "]\nx = 1\n");
    toml_free(parse_ok(buf));
    sprintf(buf + n, ".k]\n");
    refused(buf, 1, 2 + 2 * TOML_MAX_DEPTH, "nesting deeper than 64 levels");

    n = 0;
    for (unsigned i = 0; i < TOML_MAX_DEPTH; i++)
        n += (size_t)sprintf(buf + n, "k.");
    sprintf(buf + n, "x = 1\n"); /* 64 tables, then a key */
    toml_free(parse_ok(buf));
    sprintf(buf + n, "k.x = 1\n");
    refused(buf, 1, 1 + 2 * TOML_MAX_DEPTH, "nesting deeper than 64 levels");
    /* An array of tables counts its array: [[a]] puts the table at depth 2. */
    n = 0;
    n += (size_t)sprintf(buf + n, "[[");
    for (unsigned i = 0; i < TOML_MAX_DEPTH - 1; i++)
        n += (size_t)sprintf(buf + n, "%sk", i ? "." : "");
    sprintf(buf + n, "]]\n");
    toml_free(parse_ok(buf)); /* 62 tables, the array at 63, its table at 64 */
    sprintf(buf + n, ".k]]\n");
    refused(buf, 1, 3 + 2 * (TOML_MAX_DEPTH - 1), "nesting deeper than 64 levels");
}

static void test_size_cap(void **state) {
    (void)state;
    struct toml_doc *doc = (struct toml_doc *)0x1;
    struct toml_error err = {.line = 9, .column = 9};
    const char *text = "a = 1\n";

    assert_int_equal(toml_parse(text, 6, 5, &doc, &err), -EFBIG);
    assert_ptr_equal(doc, (struct toml_doc *)0x1);
    assert_string_equal(err.msg, "input is 6 bytes, more than the limit of 5");
    assert_int_equal(err.line, 0);
    assert_int_equal(err.column, 0);
    /* Refused before looking: invalid bytes over the cap still get EFBIG. */
    assert_int_equal(toml_parse("\xff\xff\xff", 3, 2, &doc, &err), -EFBIG);

    doc = NULL;
    assert_int_equal(toml_parse(text, 6, 6, &doc, NULL), 0); /* exactly the cap */
    toml_free(doc);

    /* 256 KiB + 1 with the caller's cap. */
    size_t big = LIMIT + 1;
    char *buf = malloc(big);
    assert_non_null(buf);
    memset(buf, '#', big);
    doc = NULL;
    assert_int_equal(toml_parse(buf, big, LIMIT, &doc, &err), -EFBIG);
    assert_null(doc);
    /* The cap itself: one comment line of 256 KiB parses. */
    assert_int_equal(toml_parse(buf, LIMIT, LIMIT, &doc, &err), 0);
    assert_int_equal(toml_table_len(toml_root(doc)), 0);
    toml_free(doc);
    free(buf);
}

/* ---- contract and lookups ------------------------------------------------------------ */

static void test_contract(void **state) {
    (void)state;
    struct toml_doc *doc = NULL;
    struct toml_error err = {.line = 7, .column = 8, .msg = "untouched"};

    toml_free(NULL);
    assert_int_equal(toml_parse("a = 1", 5, LIMIT, NULL, &err), -EINVAL);
    assert_int_equal(toml_parse(NULL, 1, LIMIT, &doc, &err), -EINVAL);
    assert_null(doc);

    /* Success leaves err alone; an empty input (even NULL, 0) is an empty table. */
    assert_int_equal(toml_parse(NULL, 0, LIMIT, &doc, &err), 0);
    assert_string_equal(err.msg, "untouched");
    assert_int_equal(err.line, 7);
    assert_int_equal(toml_root(doc)->type, TOML_TABLE);
    assert_int_equal(toml_table_len(toml_root(doc)), 0);
    toml_free(doc);

    /* err may be NULL on failure. */
    doc = NULL;
    assert_int_equal(toml_parse("a = ", 4, LIMIT, &doc, NULL), -EBADMSG);
    assert_null(doc);

    /* Only len bytes are read: "a = 12" of "a = 12xyz", and a cut string
     * is unterminated rather than read past. */
    char heap[9];
    memcpy(heap, "a = 12xyz", 9); /* not NUL-terminated */
    assert_int_equal(toml_parse(heap, 6, LIMIT, &doc, &err), 0);
    assert_int_equal(toml_table_get(toml_root(doc), "a")->u.integer, 12);
    toml_free(doc);
    doc = NULL;
    memcpy(heap, "s = \"abc\"", 9);
    assert_int_equal(toml_parse(heap, 8, LIMIT, &doc, &err), -EBADMSG);
    assert_string_equal(err.msg, "unterminated string (opened at 1:5)");

    /* The tree does not point into the input. */
    char *copy = strdup("k = 'value'\n");
    assert_int_equal(toml_parse(copy, strlen(copy), LIMIT, &doc, &err), 0);
    memset(copy, 'x', strlen(copy));
    free(copy);
    assert_string_equal(toml_table_get(toml_root(doc), "k")->u.string.ptr, "value");
    toml_free(doc);
}

static void test_lookups(void **state) {
    (void)state;
    _cleanup_toml_ struct toml_doc *doc =
        parse_ok("z = 1\na = 2\n\"\" = 3\n\"n\\u0000ul\" = 4\n"
                 "[net]\ndns = ['1.1.1.1', '9.9.9.9']\n");
    const struct toml_value *root = toml_root(doc);
    const struct toml_key *k = NULL;

    assert_int_equal(toml_table_len(root), 5);
    /* Insertion order, not sorted. */
    assert_int_equal(toml_table_at(root, 0, &k)->u.integer, 1);
    assert_string_equal(k->name, "z");
    assert_int_equal(toml_table_at(root, 1, NULL)->u.integer, 2);
    assert_null(toml_table_at(root, 5, &k));
    assert_int_equal(toml_table_get(root, "")->u.integer, 3);
    assert_null(toml_table_get(root, "n")); /* the NUL is part of the key */
    assert_int_equal(toml_table_get_n(root, "n\0ul", 4)->u.integer, 4);
    /* Chaining through missing keys and wrong types gives NULL. */
    const struct toml_value *dns = toml_table_get(toml_table_get(root, "net"), "dns");
    assert_int_equal(toml_array_len(dns), 2);
    assert_string_equal(toml_array_at(dns, 1)->u.string.ptr, "9.9.9.9");
    assert_null(toml_table_get(toml_table_get(root, "nope"), "dns"));
    assert_null(toml_table_get(toml_table_get(root, "z"), "dns"));
    assert_null(toml_array_at(toml_table_get(root, "net"), 0));
    assert_int_equal(toml_array_len(NULL), 0);
    assert_int_equal(toml_table_len(dns), 0);
    assert_null(toml_table_get(NULL, "x"));
    assert_null(toml_table_get(root, NULL));
    assert_null(toml_root(NULL));

    assert_string_equal(toml_type_name(TOML_LOCAL_DATETIME), "local datetime");
    assert_string_equal(toml_type_name(TOML_TABLE), "table");
    assert_string_equal(toml_type_name((enum toml_type)99), "?");
}

static void test_tricky_accepted(void **state) {
    (void)state;
    _cleanup_toml_ struct toml_doc *doc = parse_ok(
        "1.2 = 'dotted numbers'\n"              /* key 1, subkey 2 */
        "true = 'key named true'\n"
        "inf = nan\n"
        "1979-05-27 = 'date-like key'\n"
        "\"a.b\" . c = 'quoted dot'\n"
        "lit = '\"'\n"
        "s = \"\"\" \\\n\n   \"\"\"\n"            /* only a line-ending backslash: empty */
        "t = '''\n'''\n"                        /* only the trimmed newline: empty */
        "[ spaced . 'header' ]\n"
        "[\"\"]\n"
        "x = 0\n");
    const struct toml_value *root = toml_root(doc);
    assert_string_equal(toml_table_get(get(doc, "1"), "2")->u.string.ptr, "dotted numbers");
    assert_string_equal(get(doc, "true")->u.string.ptr, "key named true");
    assert_true(isnan(get(doc, "inf")->u.floating));
    assert_string_equal(get(doc, "1979-05-27")->u.string.ptr, "date-like key");
    assert_string_equal(toml_table_get(get(doc, "a.b"), "c")->u.string.ptr, "quoted dot");
    assert_string_equal(get(doc, "lit")->u.string.ptr, "\"");
    assert_string_equal(get(doc, "s")->u.string.ptr, " ");
    assert_string_equal(get(doc, "t")->u.string.ptr, "");
    assert_non_null(toml_table_get(toml_table_get(root, "spaced"), "header"));
    assert_int_equal(toml_table_get(toml_table_get(root, ""), "x")->u.integer, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_floats),
        cmocka_unit_test(test_bools),
        cmocka_unit_test(test_datetimes),
        cmocka_unit_test(test_arrays_and_inline_tables),
        cmocka_unit_test(test_positions),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_duplicates_and_redefinition),
        cmocka_unit_test(test_many_keys),
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_size_cap),
        cmocka_unit_test(test_contract),
        cmocka_unit_test(test_lookups),
        cmocka_unit_test(test_tricky_accepted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
