/* Do the daemon's codec (protobuf-c) and the CLI's codec (nanopb) describe
 * the same protocol, and does the test table cover all of it?
 *
 * Checked against the sources of truth, read at test time: the .proto text
 * (every message, enum and rpc must have a row / an envelope member), the
 * .options file (every bound must be the one nanopb compiled in, every line
 * must name a real field), the descriptor graph reachable from Request and
 * Response, and common/lyh_limits.h. Also probes that the nanopb runtime
 * library was built with the same pb_size_t as the headers we compile with:
 * a mismatch links fine and then misreads every descriptor.
 *
 * Paths to the .proto and .options come from compile definitions. */
#include <ctype.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <pb_common.h>
#include <pb_decode.h>
#include <pb_encode.h>

#include "lianyaohu.pb-c.h"
#include "lianyaohu.pb.h"

#include "common/lyh_limits.h"

#include "codec_reflect.h"
#include "codec_table.h"

#ifndef LYH_PROTO_FILE
#error LYH_PROTO_FILE must name proto/lianyaohu.proto
#endif
#ifndef LYH_PROTO_OPTIONS_FILE
#error LYH_PROTO_OPTIONS_FILE must name proto/lianyaohu.options
#endif

/* Structs above 64 KiB need a 32-bit pb_size_t in the headers *and* in the
 * nanopb runtime library; the nanopb generator refuses otherwise. */
_Static_assert(sizeof(pb_size_t) >= 4 || sizeof(lianyaohu_v1_Request) <= 0xffff,
               "nanopb structs exceed 64 KiB: PB_FIELD_32BIT is needed, for the generated "
               "code, for this test and for the nanopb runtime library alike");
/* Every reply has a static nanopb size (no callbacks on the CLI's decoding
 * side), and the largest must fit the frame both sides accept. */
_Static_assert(lianyaohu_v1_Response_size <= LYH_MAX_FRAME_BYTES, "max Response exceeds a frame");

/* ---- small helpers -------------------------------------------------------- */

static char *slurp(const char *path) {
    FILE *f = fopen(path, "re");
    if (!f)
        fail_msg("cannot open %s", path);
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 16384;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        if (r == 0)
            break;
        n += r;
    }
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* A tiny .proto tokenizer: identifiers (dots allowed), numbers, single
 * punctuation; comments and string literals dropped. Enough to find
 * `message X {`, `enum X {` and `rpc X(A) returns (stream? B)`. */
struct tokens {
    char **t;
    size_t n, cap;
};

static void tok_add(struct tokens *tk, const char *s, size_t len) {
    if (tk->n == tk->cap) {
        tk->cap = tk->cap ? tk->cap * 2 : 256;
        tk->t = realloc(tk->t, tk->cap * sizeof(*tk->t));
        assert_non_null(tk->t);
    }
    tk->t[tk->n] = strndup(s, len);
    assert_non_null(tk->t[tk->n]);
    tk->n++;
}

static void tokenize(const char *s, struct tokens *tk) {
    while (*s) {
        if (isspace((unsigned char)*s)) {
            s++;
        } else if (s[0] == '/' && s[1] == '/') {
            while (*s && *s != '\n')
                s++;
        } else if (s[0] == '/' && s[1] == '*') {
            const char *e = strstr(s + 2, "*/");
            s = e ? e + 2 : s + strlen(s);
        } else if (*s == '"' || *s == '\'') {
            char q = *s++;
            while (*s && *s != q)
                s += (*s == '\\' && s[1]) ? 2 : 1;
            if (*s)
                s++;
        } else if (isalnum((unsigned char)*s) || *s == '_' || *s == '.') {
            const char *b = s;
            while (isalnum((unsigned char)*s) || *s == '_' || *s == '.')
                s++;
            tok_add(tk, b, (size_t)(s - b));
        } else {
            tok_add(tk, s, 1);
            s++;
        }
    }
}

static void tok_free(struct tokens *tk) {
    for (size_t i = 0; i < tk->n; i++)
        free(tk->t[i]);
    free(tk->t);
}

static bool is_ident(const char *s) { return isalpha((unsigned char)s[0]) || s[0] == '_'; }

static const ProtobufCFieldDescriptor *oneof_member_of_type(const ProtobufCMessageDescriptor *env,
                                                            const ProtobufCMessageDescriptor *type) {
    for (unsigned i = 0; i < env->n_fields; i++)
        if ((env->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            env->fields[i].descriptor == type)
            return &env->fields[i];
    return NULL;
}

/* ---- tests ------------------------------------------------------------------- */

/* Before anything else: does the nanopb library read descriptors the way our
 * headers lay them out? With a pb_size_t mismatch (headers built with
 * PB_FIELD_32BIT, Debian's libprotobuf-nanopb.a without, or the reverse) the
 * iterator fields land at other offsets and nothing else here means anything. */
static void test_nanopb_runtime_abi(void **state) {
    lianyaohu_v1_EnvVar ev;
    pb_field_iter_t it;
    memset(&ev, 0, sizeof(ev));
    memset(&it, 0xa5, sizeof(it));
    bool begun = pb_field_iter_begin(&it, &lianyaohu_v1_EnvVar_msg, &ev);
    if (!begun || it.descriptor != &lianyaohu_v1_EnvVar_msg || it.message != &ev || it.tag != 1 ||
        it.pData != ev.name || it.data_size != sizeof(ev.name))
        fail_msg("nanopb runtime disagrees with pb.h (sizeof(pb_size_t) = %zu here): "
                 "iter tag %u data_size %u, pData %s; the library and the generated code "
                 "must be built with the same PB_FIELD_32BIT setting",
                 sizeof(pb_size_t), (unsigned)it.tag, (unsigned)it.data_size,
                 it.pData == ev.name ? "right" : "wrong");
    assert_true(pb_field_iter_next(&it));
    assert_int_equal(it.tag, 2);
    assert_ptr_equal(it.pData, ev.value);
    assert_int_equal(it.data_size, sizeof(ev.value));

    /* And a real encode/decode through the library. */
    static const uint8_t want[] = { 0x0a, 0x01, 'K', 0x12, 0x02, 'v', 'w' };
    uint8_t buf[32];
    strcpy(ev.name, "K");
    strcpy(ev.value, "vw");
    pb_ostream_t os = pb_ostream_from_buffer(buf, sizeof(buf));
    assert_true(pb_encode(&os, &lianyaohu_v1_EnvVar_msg, &ev));
    assert_int_equal(os.bytes_written, sizeof(want));
    assert_memory_equal(buf, want, sizeof(want));
    lianyaohu_v1_EnvVar back;
    memset(&back, 0x5a, sizeof(back));
    pb_istream_t is = pb_istream_from_buffer(want, sizeof(want));
    assert_true(pb_decode(&is, &lianyaohu_v1_EnvVar_msg, &back));
    assert_string_equal(back.name, "K");
    assert_string_equal(back.value, "vw");
}

/* Every `message`/`enum` of the .proto has a row, every row is in the .proto. */
static void test_table_matches_proto_file(void **state) {
    char *text = slurp(LYH_PROTO_FILE);
    struct tokens tk = { 0 };
    size_t n_msg = 0, n_enum = 0;
    tokenize(text, &tk);
    for (size_t i = 0; i + 2 < tk.n; i++) {
        bool msg = strcmp(tk.t[i], "message") == 0, en = strcmp(tk.t[i], "enum") == 0;
        if ((!msg && !en) || !is_ident(tk.t[i + 1]) || strcmp(tk.t[i + 2], "{") != 0)
            continue;
        if (msg) {
            n_msg++;
            if (!codec_msg_by_name(tk.t[i + 1]))
                fail_msg("message %s of %s has no row in codec_table.c (LYH_MESSAGES)",
                         tk.t[i + 1], LYH_PROTO_FILE);
        } else {
            n_enum++;
            if (!codec_enum_by_name(tk.t[i + 1]))
                fail_msg("enum %s of %s has no row in codec_table.c (LYH_ENUMS)", tk.t[i + 1],
                         LYH_PROTO_FILE);
        }
    }
    /* Rows are unique, so equal counts mean every row is declared too. */
    for (size_t i = 0; i < codec_n_msgs; i++)
        for (size_t j = i + 1; j < codec_n_msgs; j++)
            assert_ptr_not_equal(codec_msgs[i].pc, codec_msgs[j].pc);
    if (n_msg != codec_n_msgs || n_enum != codec_n_enums)
        fail_msg("%s declares %zu messages and %zu enums; the table has %zu and %zu",
                 LYH_PROTO_FILE, n_msg, n_enum, codec_n_msgs, codec_n_enums);
    print_message("proto declares %zu messages and %zu enums, all in the table\n", n_msg, n_enum);
    tok_free(&tk);
    free(text);
}

/* Every rpc of the service travels in the envelope: its request type is a
 * Request.method member, its reply type a Response.result member. */
static void test_rpcs_covered_by_envelope(void **state) {
    char *text = slurp(LYH_PROTO_FILE);
    struct tokens tk = { 0 };
    size_t n_rpc = 0;
    tokenize(text, &tk);
    for (size_t i = 0; i + 8 < tk.n; i++) {
        if (strcmp(tk.t[i], "rpc") != 0)
            continue;
        /* rpc Name ( Req ) returns ( [stream] Reply ) */
        const char *name = tk.t[i + 1], *req = tk.t[i + 3];
        size_t r = i + 7;
        if (strcmp(tk.t[r], "stream") == 0)
            r++;
        const char *reply = tk.t[r];
        const struct codec_msg *mreq = codec_msg_by_name(req), *mrep = codec_msg_by_name(reply);
        if (!mreq || !mrep)
            fail_msg("rpc %s: %s or %s has no table row", name, req, reply);
        if (!oneof_member_of_type(&lianyaohu__v1__request__descriptor, mreq->pc))
            fail_msg("rpc %s: no Request.method member of type %s", name, req);
        if (!oneof_member_of_type(&lianyaohu__v1__response__descriptor, mrep->pc))
            fail_msg("rpc %s: no Response.result member of type %s", name, reply);
        n_rpc++;
    }
    assert_true(n_rpc > 0);
    print_message("%zu rpcs, each carried by a Request.method and a Response.result member\n",
                  n_rpc);
    tok_free(&tk);
    free(text);
}

static void walk(const ProtobufCMessageDescriptor *d, const ProtobufCMessageDescriptor **seen,
                 size_t *n, size_t cap) {
    for (size_t i = 0; i < *n; i++)
        if (seen[i] == d)
            return;
    assert_true(*n < cap);
    seen[(*n)++] = d;
    if (!codec_msg_by_pc(d))
        fail_msg("%s is reachable from the envelope but has no table row", d->name);
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type == PROTOBUF_C_TYPE_MESSAGE)
            walk(f->descriptor, seen, n, cap);
        else if (f->type == PROTOBUF_C_TYPE_ENUM && !codec_enum_by_pc(f->descriptor))
            fail_msg("enum %s (used by %s.%s) has no table row",
                     ((const ProtobufCEnumDescriptor *)f->descriptor)->name, d->name, f->name);
    }
}

/* Everything reachable from the two envelopes is in the table, and every row
 * is reachable (a message that never travels would be tested for nothing). */
static void test_table_matches_descriptor_graph(void **state) {
    const ProtobufCMessageDescriptor *seen[256];
    size_t n = 0;
    walk(&lianyaohu__v1__request__descriptor, seen, &n, 256);
    walk(&lianyaohu__v1__response__descriptor, seen, &n, 256);
    for (size_t i = 0; i < codec_n_msgs; i++) {
        bool found = false;
        for (size_t j = 0; j < n; j++)
            found = found || seen[j] == codec_msgs[i].pc;
        if (!found)
            fail_msg("%s is not reachable from Request or Response", codec_msgs[i].name);
    }
    assert_int_equal(n, codec_n_msgs);
}

/* Field by field, the two generators agree (numbers, types, labels, storage). */
static void test_schemas_agree(void **state) {
    for (size_t i = 0; i < codec_n_msgs; i++) {
        struct codec_diag d;
        if (!codec_schema_check(&codec_msgs[i], &d))
            fail_msg("%s", d.msg);
    }
}

static void test_enums_agree(void **state) {
    for (size_t i = 0; i < codec_n_enums; i++) {
        const struct codec_enum *e = &codec_enums[i];
        char full[128];
        long lo = e->pc->values[0].value, hi = lo;
        snprintf(full, sizeof(full), "lianyaohu.v1.%s", e->name);
        assert_string_equal(e->pc->name, full);
        for (unsigned k = 0; k < e->pc->n_values; k++) {
            if (e->pc->values[k].value < lo)
                lo = e->pc->values[k].value;
            if (e->pc->values[k].value > hi)
                hi = e->pc->values[k].value;
        }
        if (lo != e->nano_min || hi != e->nano_max)
            fail_msg("enum %s: protobuf-c %ld..%ld, nanopb %ld..%ld", e->name, lo, hi,
                     e->nano_min, e->nano_max);
        /* proto3: the first value is 0, the default both codecs omit. */
        assert_int_equal(e->pc->values[0].value, 0);
    }
}

/* ---- options file -------------------------------------------------------------- */

struct bound {
    long max_size, max_count; /* -1: not given */
    bool callback;            /* type:FT_CALLBACK */
};

static void parse_bound_tokens(char *rest, struct bound *b, const char *line_for_msg) {
    b->max_size = b->max_count = -1;
    b->callback = false;
    for (char *save = NULL, *tok = strtok_r(rest, " \t", &save); tok;
         tok = strtok_r(NULL, " \t", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon)
            fail_msg("options: cannot read '%s' in: %s", tok, line_for_msg);
        *colon = '\0';
        if (strcmp(tok, "type") == 0) {
            if (strcmp(colon + 1, "FT_CALLBACK") != 0)
                fail_msg("options: this test handles type:FT_CALLBACK only: %s", line_for_msg);
            b->callback = true;
            continue;
        }
        char *end;
        long v = strtol(colon + 1, &end, 10);
        if (*end)
            fail_msg("options: %s is not a number in: %s", colon + 1, line_for_msg);
        if (strcmp(tok, "max_size") == 0)
            b->max_size = v;
        else if (strcmp(tok, "max_length") == 0)
            b->max_size = v + 1;
        else if (strcmp(tok, "max_count") == 0)
            b->max_count = v;
        else
            fail_msg("options: this test does not know option '%s' (extend "
                     "test_bounds_match_options_file): %s", tok, line_for_msg);
    }
}

struct named_bound {
    const struct codec_msg *msg;
    uint32_t field;
    struct bound b;
};

/* Every bound nanopb compiled in is the one the .options file asks for
 * (named line, else the `*` default), and every named line matches a field:
 * nanopb ignores a line with a misspelt name and falls back to the default. */
static void test_bounds_match_options_file(void **state) {
    char *text = slurp(LYH_PROTO_OPTIONS_FILE);
    struct bound def = { -1, -1, false };
    struct named_bound named[256];
    size_t n_named = 0, n_checked = 0, n_callback = 0;

    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char copy[512];
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        snprintf(copy, sizeof(copy), "%s", line);
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            continue;
        char *name = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        if (*p)
            *p++ = '\0';
        struct bound b;
        parse_bound_tokens(p, &b, copy);
        if (strcmp(name, "*") == 0) {
            def = b;
            continue;
        }
        static const char pkg[] = "lianyaohu.v1.";
        if (strncmp(name, pkg, sizeof(pkg) - 1) != 0)
            fail_msg("options: %s is not in package lianyaohu.v1", name);
        char *dot = strrchr(name, '.');
        *dot = '\0';
        const struct codec_msg *m = codec_msg_by_name(name + sizeof(pkg) - 1);
        if (!m)
            fail_msg("options: no message %s (line: %s)", name, copy);
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field_by_name(m->pc, dot + 1);
        if (!f)
            fail_msg("options: no field %s in %s (nanopb would silently use the default)",
                     dot + 1, m->name);
        assert_true(n_named < 256);
        named[n_named++] = (struct named_bound){ m, f->id, b };
    }
    if (def.max_size < 0 || def.max_count < 0)
        fail_msg("options: no `*` line with default max_size and max_count");

    for (size_t i = 0; i < codec_n_msgs; i++) {
        const struct codec_msg *m = &codec_msgs[i];
        void *nano = calloc(1, m->nano_size ? m->nano_size : 1);
        assert_non_null(nano);
        for (unsigned k = 0; k < m->pc->n_fields; k++) {
            const ProtobufCFieldDescriptor *f = &m->pc->fields[k];
            bool repeated = f->label == PROTOBUF_C_LABEL_REPEATED;
            bool sized = f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES;
            struct bound want = def;
            want.callback = false;
            for (size_t j = 0; j < n_named; j++) {
                if (named[j].msg != m || named[j].field != f->id)
                    continue;
                if (named[j].b.max_size >= 0)
                    want.max_size = named[j].b.max_size;
                if (named[j].b.max_count >= 0)
                    want.max_count = named[j].b.max_count;
                want.callback = want.callback || named[j].b.callback;
            }
            pb_field_iter_t it;
            assert_true(codec_nano_field(m->nano, nano, f->id, &it));
            bool is_cb = PB_ATYPE(it.type) == PB_ATYPE_CALLBACK;
            if (is_cb != want.callback)
                fail_msg("%s.%s: nanopb %s a callback, the options file says %s", m->name,
                         f->name, is_cb ? "made it" : "did not make it",
                         want.callback ? "type:FT_CALLBACK" : "nothing of the sort");
            if (is_cb) {
                n_callback++;
                continue;
            }
            if (!repeated && !sized)
                continue;
            if (repeated && it.array_size != want.max_count)
                fail_msg("%s.%s: nanopb max_count %u, options say %ld", m->name, f->name,
                         (unsigned)it.array_size, want.max_count);
            if (f->type == PROTOBUF_C_TYPE_STRING && it.data_size != want.max_size)
                fail_msg("%s.%s: nanopb max_size %u, options say %ld", m->name, f->name,
                         (unsigned)it.data_size, want.max_size);
            /* Bytes: the decoder accepts up to data_size - header, which
             * includes any tail padding of PB_BYTES_ARRAY_T(n). */
            if (f->type == PROTOBUF_C_TYPE_BYTES &&
                (codec_nano_max_len(&it) < (size_t)want.max_size ||
                 codec_nano_max_len(&it) >= (size_t)want.max_size + sizeof(pb_size_t)))
                fail_msg("%s.%s: nanopb accepts %zu bytes, options say %ld", m->name, f->name,
                         codec_nano_max_len(&it), want.max_size);
            n_checked++;
        }
        free(nano);
    }
    print_message("%zu bounded fields match the options file (%zu named lines, %zu callback "
                  "fields)\n",
                  n_checked, n_named, n_callback);
    free(text);
}

/* The daemon classifies an unknown Request field by number: 10..99 is an
 * unknown method (UNIMPLEMENTED), anything else FAILED_PRECONDITION. That only
 * works if every method lives in that range and no other field does. */
static void test_envelope_field_ranges(void **state) {
    const ProtobufCMessageDescriptor *d = &lianyaohu__v1__request__descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        bool method = (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
        bool in_range = f->id >= LYH_METHOD_FIELD_MIN && f->id <= LYH_METHOD_FIELD_MAX;
        if (method != in_range)
            fail_msg("Request.%s = %u: %s", f->name, f->id,
                     method ? "a method outside LYH_METHOD_FIELD_MIN..MAX"
                            : "a non-method field inside the method range");
        if (method && f->type != PROTOBUF_C_TYPE_MESSAGE)
            fail_msg("Request.%s: a method must be a message", f->name);
    }
    for (size_t i = 0; i < codec_n_msgs; i++)
        if (codec_msgs[i].nano_max_encoded > LYH_MAX_FRAME_BYTES)
            fail_msg("%s: largest nanopb encoding %zu bytes exceeds the frame limit %u",
                     codec_msgs[i].name, codec_msgs[i].nano_max_encoded,
                     (unsigned)LYH_MAX_FRAME_BYTES);
    print_message("max encoded Response %u bytes (Request: unbounded by nanopb, callbacks), "
                  "frame limit %u\n",
                  (unsigned)lianyaohu_v1_Response_size, (unsigned)LYH_MAX_FRAME_BYTES);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nanopb_runtime_abi),
        cmocka_unit_test(test_table_matches_proto_file),
        cmocka_unit_test(test_rpcs_covered_by_envelope),
        cmocka_unit_test(test_table_matches_descriptor_graph),
        cmocka_unit_test(test_schemas_agree),
        cmocka_unit_test(test_enums_agree),
        cmocka_unit_test(test_bounds_match_options_file),
        cmocka_unit_test(test_envelope_field_ranges),
    };
    return cmocka_run_group_tests_name("codec_schema", tests, NULL, NULL);
}
