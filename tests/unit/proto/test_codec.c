/* Codec agreement: every request and response type encoded by nanopb (the
 * CLI) decodes identically with protobuf-c (the daemon), and back.
 *
 * Generic part, one cmocka test per message type: for each mode (small,
 * sparse, at the nanopb bounds) and each oneof variant, codec_fill() builds
 * the same logical value as a protobuf-c message P and a nanopb struct N, then
 *   A = protobuf-c pack(P), B = nanopb encode(N), A == B byte for byte
 *       (both encoders write known fields in field-number order);
 *   nanopb decode(A) equals P, protobuf-c unpack(B) equals N (cross-codec,
 *       field by field), and re-encoding each decoded value gives A again;
 *   every prefix of A is accepted or refused by both decoders alike.
 * Then, per field, the nanopb bound: a string/bytes/array at its bound
 * decodes in nanopb, one more is refused (protobuf-c takes both: the daemon
 * enforces its own limits).
 *
 * Hand-written part: each method / each result with an empty submessage
 * (oneof presence), unknown fields kept by protobuf-c (the daemon refuses
 * requests with them), open enums, defaults inside oneofs, crafted inputs
 * where the decoders could plausibly differ (duplicates, merges, wire-type
 * confusion, oversized varints), and two protobuf-c behaviours daemon code
 * must know about. */
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

/* Prefix sweeps are quadratic; skip them for large encodings. */
#define PREFIX_SWEEP_MAX 4096

static const struct codec_msg *row(const char *name) {
    const struct codec_msg *m = codec_msg_by_name(name);
    if (!m)
        fail_msg("no table row %s", name);
    return m;
}

static void *xcalloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    assert_non_null(p);
    return p;
}

static ProtobufCMessage *pc_new(struct codec_arena *a, const struct codec_msg *t) {
    ProtobufCMessage *m = codec_arena_alloc(a, t->pc->sizeof_message);
    protobuf_c_message_init(t->pc, m);
    return m;
}

/* ---- generic round trip ---------------------------------------------------- */

struct rt_stats {
    size_t cases, min_len, max_len, prefixes, skipped;
};

/* Both decoders must agree on whether each prefix of buf is a message, and on
 * its value when it is. nanopb decodes into one struct reused across
 * prefixes, as a client reusing its buffer would: pb_decode must reset it. */
static void prefix_sweep(const struct codec_msg *t, const uint8_t *buf, size_t len, const char *ctx,
                         struct rt_stats *st) {
    void *n = xcalloc(t->nano_size);
    struct codec_arena a = { 0 };
    for (size_t l = 0; l < len; l++) {
        struct codec_diag d;
        size_t skipped = 0;
        ProtobufCMessage *p = codec_pc_unpack(t, buf, l);
        bool nok = codec_nano_decode(t, buf, l, n, &a, &d);
        if ((p != NULL) != nok)
            fail_msg("%s: prefix %zu/%zu: protobuf-c %s, nanopb %s (%s)", ctx, l, len,
                     p ? "accepts" : "refuses", nok ? "accepts" : "refuses", nok ? "" : d.msg);
        if (p && !codec_cross_equal(t, p, n, &skipped, &d))
            fail_msg("%s: prefix %zu/%zu decodes differently: %s", ctx, l, len, d.msg);
        if (p)
            protobuf_c_message_free_unpacked(p, NULL);
        st->prefixes++;
    }
    codec_arena_free(&a);
    free(n);
}

static void roundtrip(const struct codec_msg *t, enum codec_mode mode, unsigned variant,
                      struct rt_stats *st) {
    struct codec_arena a = { 0 };
    struct codec_diag d;
    char ctx[128];
    uint8_t *A, *B, *A2, *B2;
    size_t alen, blen, a2len, b2len;
    snprintf(ctx, sizeof(ctx), "%s/%s/variant %u", t->name, codec_mode_name(mode), variant);

    ProtobufCMessage *P = pc_new(&a, t);
    void *N = xcalloc(t->nano_size);
    size_t skipped = 0;
    if (!codec_fill(t, P, N, mode, variant, &a, &d))
        fail_msg("%s: fill: %s", ctx, d.msg);
    if (!codec_cross_equal(t, P, N, NULL, &d)) /* the two walks agree with each other */
        fail_msg("%s: fill not consistent: %s", ctx, d.msg);
    assert_true(protobuf_c_message_check(P));

    A = codec_pc_pack(P, &alen);
    assert_non_null(A);
    if (!codec_nano_encode(t, N, &B, &blen, &d))
        fail_msg("%s: %s", ctx, d.msg);
    if (!codec_bytes_equal("protobuf-c pack vs nanopb encode", A, alen, B, blen, &d))
        fail_msg("%s: %s", ctx, d.msg);
    if (t->nano_max_encoded && blen > t->nano_max_encoded)
        fail_msg("%s: %zu bytes, above lianyaohu_v1_%s_size = %zu", ctx, blen, t->name,
                 t->nano_max_encoded);
    if (blen > LYH_MAX_FRAME_BYTES)
        fail_msg("%s: %zu bytes, above the frame limit", ctx, blen);

    /* protobuf-c -> nanopb. Callback fields that nanopb cannot decode (under a
     * oneof: Request.run.argv/env) are counted, not compared; the CLI only
     * encodes those, and the re-encoding then lacks them, so it is compared
     * only when nothing was skipped. */
    void *N2 = xcalloc(t->nano_size);
    if (!codec_nano_decode(t, A, alen, N2, &a, &d))
        fail_msg("%s: nanopb cannot decode protobuf-c's bytes: %s", ctx, d.msg);
    if (!codec_cross_equal(t, P, N2, &skipped, &d))
        fail_msg("%s: protobuf-c -> nanopb: %s", ctx, d.msg);
    codec_nano_callbacks_to_encode(t, N2);
    if (!codec_nano_encode(t, N2, &B2, &b2len, &d))
        fail_msg("%s: re-encode: %s", ctx, d.msg);
    if (!skipped && !codec_bytes_equal("nanopb re-encode of decoded bytes", A, alen, B2, b2len, &d))
        fail_msg("%s: %s", ctx, d.msg);
    st->skipped += skipped;

    /* nanopb -> protobuf-c: the direction the CLI uses, nothing skipped. */
    ProtobufCMessage *P2 = codec_pc_unpack(t, B, blen);
    if (!P2)
        fail_msg("%s: protobuf-c cannot unpack nanopb's %zu bytes", ctx, blen);
    if (!codec_cross_equal(t, P2, N, NULL, &d))
        fail_msg("%s: nanopb -> protobuf-c: %s", ctx, d.msg);
    A2 = codec_pc_pack(P2, &a2len);
    assert_non_null(A2);
    if (!codec_bytes_equal("protobuf-c re-pack of unpacked bytes", B, blen, A2, a2len, &d))
        fail_msg("%s: %s", ctx, d.msg);

    if (mode != CODEC_MAX && alen <= PREFIX_SWEEP_MAX)
        prefix_sweep(t, A, alen, ctx, st);

    st->cases++;
    if (st->cases == 1 || alen < st->min_len)
        st->min_len = alen;
    if (alen > st->max_len)
        st->max_len = alen;

    protobuf_c_message_free_unpacked(P2, NULL);
    free(A);
    free(B);
    free(A2);
    free(B2);
    free(N2);
    free(N);
    codec_arena_free(&a);
}

static size_t oneof_members_total(const ProtobufCMessageDescriptor *d) {
    size_t n = 0;
    for (unsigned i = 0; i < d->n_fields; i++)
        n += (d->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
    return n;
}

static void test_roundtrip(void **state) {
    const struct codec_msg *t = *state;
    struct rt_stats st = { 0 };
    unsigned nv = codec_variants(t->pc);
    for (int mode = CODEC_SMALL; mode <= CODEC_MAX; mode++)
        for (unsigned v = 0; v < nv; v++)
            roundtrip(t, (enum codec_mode)mode, v, &st);
    print_message("%-20s %2zu cases (%u variants x 3 modes, %zu oneof members), %zu..%zu bytes, "
                  "%zu prefixes%s\n",
                  t->name, st.cases, nv, oneof_members_total(t->pc), st.min_len, st.max_len,
                  st.prefixes,
                  st.skipped ? ", callback fields under a oneof not decodable by nanopb" : "");
}

/* ---- nanopb bounds, per field ---------------------------------------------------- */

/* Set only field f of a fresh protobuf-c message: a string or bytes of len
 * bytes, or count elements of a repeated field (short strings, 1 byte, empty
 * submessages, 1). */
static ProtobufCMessage *one_field(struct codec_arena *a, const struct codec_msg *t,
                                   const ProtobufCFieldDescriptor *f, size_t len, size_t count) {
    ProtobufCMessage *m = pc_new(a, t);
    char *base = (char *)m;
    size_t n = f->label == PROTOBUF_C_LABEL_REPEATED ? count : 1;
    size_t es = f->type == PROTOBUF_C_TYPE_STRING   ? sizeof(char *)
                : f->type == PROTOBUF_C_TYPE_BYTES  ? sizeof(ProtobufCBinaryData)
                : f->type == PROTOBUF_C_TYPE_MESSAGE ? sizeof(ProtobufCMessage *)
                : f->type == PROTOBUF_C_TYPE_UINT64 || f->type == PROTOBUF_C_TYPE_INT64 ||
                          f->type == PROTOBUF_C_TYPE_SINT64 || f->type == PROTOBUF_C_TYPE_FIXED64 ||
                          f->type == PROTOBUF_C_TYPE_SFIXED64 || f->type == PROTOBUF_C_TYPE_DOUBLE
                    ? 8
                    : 4;
    char *vals = codec_arena_alloc(a, n * es);
    for (size_t k = 0; k < n; k++) {
        char *slot = vals + k * es;
        if (f->type == PROTOBUF_C_TYPE_STRING) {
            size_t l = f->label == PROTOBUF_C_LABEL_REPEATED ? 1 : len;
            char *s = codec_arena_alloc(a, l + 1);
            memset(s, 'x', l);
            memcpy(slot, &s, sizeof(s));
        } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
            size_t l = f->label == PROTOBUF_C_LABEL_REPEATED ? 1 : len;
            ProtobufCBinaryData bd = { .len = l, .data = codec_arena_alloc(a, l) };
            memset(bd.data, 0xb7, l);
            memcpy(slot, &bd, sizeof(bd));
        } else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
            const struct codec_msg *sub = codec_msg_by_pc(f->descriptor);
            assert_non_null(sub);
            ProtobufCMessage *s = pc_new(a, sub);
            memcpy(slot, &s, sizeof(s));
        } else {
            uint32_t one = 1;
            memcpy(slot, &one, sizeof(one)); /* little-endian: 1 in 4 or 8 bytes */
        }
    }
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
        memcpy(base + f->quantifier_offset, &count, sizeof(count));
        memcpy(base + f->offset, &vals, sizeof(vals));
    } else {
        memcpy(base + f->offset, vals, es);
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t id = f->id;
            memcpy(base + f->quantifier_offset, &id, sizeof(id));
        }
    }
    return m;
}

/* at_bound: must decode in nanopb (and equal); over: nanopb must refuse.
 * protobuf-c unpacks both: it has no bounds. */
static void check_bound(const struct codec_msg *t, const ProtobufCFieldDescriptor *f, size_t len,
                        size_t count, bool at_bound, size_t *n_checked) {
    struct codec_arena a = { 0 };
    struct codec_diag d;
    size_t blen;
    ProtobufCMessage *m = one_field(&a, t, f, len, count);
    uint8_t *buf = codec_pc_pack(m, &blen);
    void *n = xcalloc(t->nano_size);
    bool ok = codec_nano_decode(t, buf, blen, n, &a, &d);
    if (at_bound && !ok)
        fail_msg("%s.%s at its nanopb bound (len %zu, count %zu) does not decode: %s", t->name,
                 f->name, len, count, d.msg);
    if (at_bound && !codec_cross_equal(t, m, n, NULL, &d))
        fail_msg("%s.%s at its bound: %s", t->name, f->name, d.msg);
    if (!at_bound && ok)
        fail_msg("%s.%s past its nanopb bound (len %zu, count %zu) decodes in nanopb", t->name,
                 f->name, len, count);
    if (!at_bound && !strstr(d.msg, "overflow"))
        fail_msg("%s.%s past its bound fails for another reason: %s", t->name, f->name, d.msg);
    ProtobufCMessage *p = codec_pc_unpack(t, buf, blen);
    if (!p)
        fail_msg("%s.%s: protobuf-c refuses %zu bytes", t->name, f->name, blen);
    protobuf_c_message_free_unpacked(p, NULL);
    (*n_checked)++;
    free(n);
    free(buf);
    codec_arena_free(&a);
}

static void test_nanopb_bounds_every_field(void **state) {
    size_t n_checked = 0, n_callback = 0;
    for (size_t i = 0; i < codec_n_msgs; i++) {
        const struct codec_msg *t = &codec_msgs[i];
        void *scratch = xcalloc(t->nano_size);
        for (unsigned k = 0; k < t->pc->n_fields; k++) {
            const ProtobufCFieldDescriptor *f = &t->pc->fields[k];
            pb_field_iter_t it;
            assert_true(codec_nano_field(t->nano, scratch, f->id, &it));
            if (PB_ATYPE(it.type) == PB_ATYPE_CALLBACK) {
                /* No nanopb bound: many elements must still go through. */
                check_bound(t, f, 1, CODEC_CB_MAX_COUNT * 4, true, &n_checked);
                n_callback++;
            } else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
                check_bound(t, f, 1, it.array_size, true, &n_checked);
                check_bound(t, f, 1, (size_t)it.array_size + 1, false, &n_checked);
            } else if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES) {
                size_t max = codec_nano_max_len(&it);
                check_bound(t, f, max, 1, true, &n_checked);
                check_bound(t, f, max + 1, 1, false, &n_checked);
            }
        }
        free(scratch);
    }
    print_message("%zu bound checks (each bounded field at its bound and one past; %zu callback "
                  "fields with %d elements)\n",
                  n_checked, n_callback, CODEC_CB_MAX_COUNT * 4);
}

/* The brief's named case, spelt out: EnvVar.name. nanopb strings carry the
 * NUL, so max_size 128 holds 127 bytes. */
static void test_envvar_name_boundary(void **state) {
    const struct codec_msg *t = row("EnvVar");
    lianyaohu_v1_EnvVar n;
    pb_field_iter_t it;
    char name[4096];
    assert_true(codec_nano_field(t->nano, &n, lianyaohu_v1_EnvVar_name_tag, &it));
    size_t max = it.data_size - 1;
    assert_int_equal(it.data_size, sizeof(n.name));
    assert_true(max + 2 <= sizeof(name));

    for (int over = 0; over <= 1; over++) {
        Lianyaohu__V1__EnvVar ev = LIANYAOHU__V1__ENV_VAR__INIT;
        struct codec_diag d;
        size_t len = max + (size_t)over, blen;
        memset(name, 'N', len);
        name[len] = '\0';
        ev.name = name;
        ev.value = "v";
        uint8_t *buf = codec_pc_pack(&ev.base, &blen);
        memset(&n, 0, sizeof(n));
        bool ok = codec_nano_decode(t, buf, blen, &n, NULL, &d);
        if (!over) {
            if (!ok)
                fail_msg("EnvVar.name of %zu bytes refused: %s", len, d.msg);
            assert_int_equal(strlen(n.name), max);
            assert_string_equal(n.value, "v");
        } else {
            assert_false(ok);
            assert_non_null(strstr(d.msg, "string overflow"));
        }
        /* The daemon's decoder has no such bound; its own validation does. */
        Lianyaohu__V1__EnvVar *back = lianyaohu__v1__env_var__unpack(NULL, blen, buf);
        assert_non_null(back);
        assert_int_equal(strlen(back->name), len);
        lianyaohu__v1__env_var__free_unpacked(back, NULL);
        free(buf);
    }
}

/* ---- envelopes: each method / result with an empty submessage ---------------------- */

static size_t put_varint(uint8_t *p, uint64_t v) {
    size_t n = 0;
    do {
        p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

/* An empty submessage in a oneof is "set": it must travel as key + length 0
 * and come back as set on both sides (the daemon dispatches on which method
 * is set, most requests are empty messages). */
static void check_envelope_members(const struct codec_msg *t, uint64_t call_id) {
    size_t members = 0;
    for (unsigned i = 0; i < t->pc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &t->pc->fields[i];
        if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
            continue;
        struct codec_arena a = { 0 };
        struct codec_diag d;
        size_t skipped = 0; /* empty submessages: their callback lists stay empty */
        uint8_t want[32];
        size_t wlen = 0;
        want[wlen++] = 0x08; /* call_id, field 1 varint */
        wlen += put_varint(want + wlen, call_id);
        wlen += put_varint(want + wlen, (uint64_t)f->id << 3 | 2);
        want[wlen++] = 0x00;

        /* protobuf-c side */
        const struct codec_msg *sub = codec_msg_by_pc(f->descriptor);
        assert_non_null(sub);
        ProtobufCMessage *p = pc_new(&a, t);
        ProtobufCMessage *s = pc_new(&a, sub);
        uint32_t id = f->id;
        const ProtobufCFieldDescriptor *f1 = protobuf_c_message_descriptor_get_field(t->pc, 1);
        assert_non_null(f1);
        assert_int_equal(f1->type, PROTOBUF_C_TYPE_UINT64); /* call_id */
        memcpy((char *)p + f1->offset, &call_id, sizeof(call_id));
        memcpy((char *)p + f->quantifier_offset, &id, sizeof(id));
        memcpy((char *)p + f->offset, &s, sizeof(s));
        size_t alen;
        uint8_t *A = codec_pc_pack(p, &alen);
        if (!codec_bytes_equal(f->name, want, wlen, A, alen, &d))
            fail_msg("%s.%s empty, protobuf-c: %s", t->name, f->name, d.msg);

        /* nanopb side, built by hand */
        void *n = xcalloc(t->nano_size);
        pb_field_iter_t it;
        pb_size_t which = (pb_size_t)f->id;
        assert_true(codec_nano_field(t->nano, n, 1, &it));
        memcpy(it.pData, &call_id, sizeof(call_id));
        assert_true(codec_nano_field(t->nano, n, f->id, &it));
        memcpy(it.pSize, &which, sizeof(which));
        uint8_t *B;
        size_t blen;
        if (!codec_nano_encode(t, n, &B, &blen, &d))
            fail_msg("%s", d.msg);
        if (!codec_bytes_equal(f->name, want, wlen, B, blen, &d))
            fail_msg("%s.%s empty, nanopb: %s", t->name, f->name, d.msg);

        /* across */
        ProtobufCMessage *p2 = codec_pc_unpack(t, B, blen);
        assert_non_null(p2);
        uint32_t got;
        memcpy(&got, (char *)p2 + f->quantifier_offset, sizeof(got));
        if (got != f->id)
            fail_msg("%s.%s: protobuf-c case %u after nanopb encode", t->name, f->name, got);
        ProtobufCMessage *s2;
        memcpy(&s2, (char *)p2 + f->offset, sizeof(s2));
        assert_non_null(s2);
        assert_int_equal(protobuf_c_message_get_packed_size(s2), 0);
        if (!codec_cross_equal(t, p2, n, &skipped, &d))
            fail_msg("%s", d.msg);
        void *n2 = xcalloc(t->nano_size);
        if (!codec_nano_decode(t, A, alen, n2, &a, &d))
            fail_msg("%s", d.msg);
        assert_true(codec_nano_field(t->nano, n2, f->id, &it));
        memcpy(&which, it.pSize, sizeof(which));
        if (which != f->id)
            fail_msg("%s.%s: nanopb which %u after protobuf-c pack", t->name, f->name,
                     (unsigned)which);
        if (!codec_cross_equal(t, p, n2, &skipped, &d))
            fail_msg("%s", d.msg);

        protobuf_c_message_free_unpacked(p2, NULL);
        free(n2);
        free(n);
        free(A);
        free(B);
        codec_arena_free(&a);
        members++;
    }
    print_message("%s: %zu oneof members, each set to an empty message, agree\n", t->name, members);
}

static void test_request_each_method_empty(void **state) {
    check_envelope_members(row("Request"), 42);
}

static void test_response_each_result_empty(void **state) {
    check_envelope_members(row("Response"), 4242);
}

/* ---- unknown fields ------------------------------------------------------------------ */

static uint8_t *nano_encode_or_die(const struct codec_msg *t, const void *n, size_t *len,
                                   size_t extra) {
    struct codec_diag d;
    uint8_t *b;
    if (!codec_nano_encode(t, n, &b, len, &d))
        fail_msg("%s", d.msg);
    b = realloc(b, *len + extra);
    assert_non_null(b);
    return b;
}

/* The daemon refuses a request carrying a field it does not know; it can only
 * do so because protobuf-c keeps unknown fields instead of dropping them. */
static void test_unknown_field_top_level(void **state) {
    lianyaohu_v1_Request *r = xcalloc(sizeof(*r));
    size_t len;
    r->call_id = 7;
    r->protocol_version = LYH_PROTOCOL_VERSION;
    r->which_method = lianyaohu_v1_Request_capabilities_tag;
    uint8_t *b = nano_encode_or_die(row("Request"), r, &len, 16);
    len += put_varint(b + len, 999u << 3 | 0); /* field 999, varint */
    len += put_varint(b + len, 1);

    Lianyaohu__V1__Request *p = lianyaohu__v1__request__unpack(NULL, len, b);
    assert_non_null(p);
    assert_int_equal(p->method_case, LIANYAOHU__V1__REQUEST__METHOD_CAPABILITIES);
    assert_int_equal(p->base.n_unknown_fields, 1);
    assert_int_equal(p->base.unknown_fields[0].tag, 999);
    assert_int_equal(p->base.unknown_fields[0].wire_type, PROTOBUF_C_WIRE_TYPE_VARINT);
    /* ... and packs them back: the bytes survive a daemon-side round trip. */
    size_t plen;
    uint8_t *again = codec_pc_pack(&p->base, &plen);
    assert_int_equal(plen, len);
    assert_memory_equal(again, b, len);
    free(again);
    lianyaohu__v1__request__free_unpacked(p, NULL);

    /* nanopb skips unknown fields silently: the CLI accepts replies from a
     * newer daemon. */
    struct codec_diag d;
    memset(r, 0, sizeof(*r));
    assert_true(codec_nano_decode(row("Request"), b, len, r, NULL, &d));
    assert_int_equal(r->which_method, lianyaohu_v1_Request_capabilities_tag);
    assert_int_equal(r->call_id, 7);
    free(b);
    free(r);
}

/* An unknown field inside a method's message, e.g. a newer client's Run
 * option: it sits in the submessage's unknown fields, not the envelope's. */
static void test_unknown_field_nested(void **state) {
    lianyaohu_v1_RunRequest *run = xcalloc(sizeof(*run));
    size_t rlen;
    strcpy(run->cwd, "/tmp");
    uint8_t *rb = nano_encode_or_die(row("RunRequest"), run, &rlen, 16);
    rlen += put_varint(rb + rlen, 999u << 3 | 2); /* field 999, length-delimited "hi" */
    rb[rlen++] = 2;
    rb[rlen++] = 'h';
    rb[rlen++] = 'i';

    uint8_t *b = malloc(rlen + 16);
    assert_non_null(b);
    size_t len = 0;
    b[len++] = 0x08;
    b[len++] = 0x01;
    len += put_varint(b + len, (uint64_t)lianyaohu_v1_Request_run_tag << 3 | 2);
    len += put_varint(b + len, rlen);
    memcpy(b + len, rb, rlen);
    len += rlen;

    Lianyaohu__V1__Request *p = lianyaohu__v1__request__unpack(NULL, len, b);
    assert_non_null(p);
    assert_int_equal(p->base.n_unknown_fields, 0);
    assert_int_equal(p->method_case, LIANYAOHU__V1__REQUEST__METHOD_RUN);
    assert_string_equal(p->run->cwd, "/tmp");
    assert_int_equal(p->run->base.n_unknown_fields, 1);
    assert_int_equal(p->run->base.unknown_fields[0].tag, 999);
    assert_int_equal(p->run->base.unknown_fields[0].wire_type,
                     PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED);
    assert_int_equal(p->run->base.unknown_fields[0].len, 3); /* length prefix + "hi" */
    lianyaohu__v1__request__free_unpacked(p, NULL);
    free(b);
    free(rb);
    free(run);
}

/* A method number this build does not know, in the method range: no method
 * case set, one unknown field with that number (the daemon answers
 * UNIMPLEMENTED). */
static void test_unknown_method_number(void **state) {
    const ProtobufCMessageDescriptor *d = &lianyaohu__v1__request__descriptor;
    uint32_t tag = 0;
    for (uint32_t t = LYH_METHOD_FIELD_MIN; t <= LYH_METHOD_FIELD_MAX && !tag; t++)
        if (!protobuf_c_message_descriptor_get_field(d, t))
            tag = t;
    assert_true(tag != 0);
    uint8_t b[16];
    size_t len = 0;
    b[len++] = 0x08;
    b[len++] = 0x05;
    len += put_varint(b + len, (uint64_t)tag << 3 | 2);
    b[len++] = 0x00;
    Lianyaohu__V1__Request *p = lianyaohu__v1__request__unpack(NULL, len, b);
    assert_non_null(p);
    assert_int_equal(p->method_case, LIANYAOHU__V1__REQUEST__METHOD__NOT_SET);
    assert_int_equal(p->base.n_unknown_fields, 1);
    assert_int_equal(p->base.unknown_fields[0].tag, tag);
    lianyaohu__v1__request__free_unpacked(p, NULL);
}

/* All four wire types of unknown fields are kept with their payloads. */
static void test_unknown_field_wire_types(void **state) {
    static const uint8_t b[] = {
        0x08, 0x01,                                     /* call_id = 1 */
        0xc0, 0x3e, 0x96, 0x01,                         /* 1000 varint 150 */
        0xc9, 0x3e, 1, 2, 3, 4, 5, 6, 7, 8,             /* 1001 fixed64 */
        0xd2, 0x3e, 0x03, 'a', 'b', 'c',                /* 1002 length-delimited */
        0xdd, 0x3e, 9, 8, 7, 6,                         /* 1003 fixed32 */
    };
    static const struct { uint32_t tag; ProtobufCWireType wt; size_t len; } want[] = {
        { 1000, PROTOBUF_C_WIRE_TYPE_VARINT, 2 },
        { 1001, PROTOBUF_C_WIRE_TYPE_64BIT, 8 },
        { 1002, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, 4 },
        { 1003, PROTOBUF_C_WIRE_TYPE_32BIT, 4 },
    };
    Lianyaohu__V1__Request *p = lianyaohu__v1__request__unpack(NULL, sizeof(b), b);
    assert_non_null(p);
    assert_int_equal(p->base.n_unknown_fields, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(p->base.unknown_fields[i].tag, want[i].tag);
        assert_int_equal(p->base.unknown_fields[i].wire_type, want[i].wt);
        assert_int_equal(p->base.unknown_fields[i].len, want[i].len);
    }
    size_t plen;
    uint8_t *again = codec_pc_pack(&p->base, &plen);
    assert_int_equal(plen, sizeof(b));
    assert_memory_equal(again, b, sizeof(b));
    free(again);
    lianyaohu__v1__request__free_unpacked(p, NULL);

    lianyaohu_v1_Request *r = xcalloc(sizeof(*r));
    struct codec_diag d;
    assert_true(codec_nano_decode(row("Request"), b, sizeof(b), r, NULL, &d));
    assert_int_equal(r->call_id, 1);
    assert_int_equal(r->which_method, 0);
    free(r);
}

/* ---- values that are easy to lose --------------------------------------------------- */

/* proto3 enums are open: an out-of-range number (a newer peer's value)
 * survives both decoders and both encoders unchanged. (Negative numbers do
 * not in nanopb: see "negative enum number" in the crafted inputs.) */
static void test_open_enums(void **state) {
    Lianyaohu__V1__RunStarted rs = LIANYAOHU__V1__RUN_STARTED__INIT;
    Lianyaohu__V1__RunEvent ev = LIANYAOHU__V1__RUN_EVENT__INIT;
    Lianyaohu__V1__Response resp = LIANYAOHU__V1__RESPONSE__INIT;
    struct codec_diag d;
    const struct codec_msg *t = row("Response");
    resp.call_id = 1;
    resp.code = (Lianyaohu__V1__Code)1000;
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_RUN_EVENT;
    resp.run_event = &ev;
    ev.event_case = LIANYAOHU__V1__RUN_EVENT__EVENT_STARTED;
    ev.started = &rs;
    rs.scope = (Lianyaohu__V1__Scope)77;
    size_t alen, blen;
    uint8_t *A = codec_pc_pack(&resp.base, &alen), *B;

    lianyaohu_v1_Response *n = xcalloc(sizeof(*n));
    if (!codec_nano_decode(t, A, alen, n, NULL, &d))
        fail_msg("%s", d.msg);
    int32_t code, scope;
    memcpy(&code, &n->code, sizeof(code));
    memcpy(&scope, &n->result.run_event.event.started.scope, sizeof(scope));
    assert_int_equal(code, 1000);
    assert_int_equal(scope, 77);
    if (!codec_cross_equal(t, &resp.base, n, NULL, &d))
        fail_msg("%s", d.msg);
    if (!codec_nano_encode(t, n, &B, &blen, &d))
        fail_msg("%s", d.msg);
    if (!codec_bytes_equal("open enums", A, alen, B, blen, &d))
        fail_msg("%s", d.msg);
    Lianyaohu__V1__Response *p = lianyaohu__v1__response__unpack(NULL, blen, B);
    assert_non_null(p);
    assert_int_equal(p->code, 1000);
    assert_int_equal(p->run_event->started->scope, 77);
    assert_int_equal(p->base.n_unknown_fields, 0);
    lianyaohu__v1__response__free_unpacked(p, NULL);
    free(A);
    free(B);
    free(n);
}

/* A oneof member at its default value is still "set" and travels: signal 0
 * (SignalRequest.what) and an empty firewall string (RunEvent.event). */
static void test_oneof_members_at_default(void **state) {
    struct codec_diag d;
    {
        static const uint8_t want[] = { 0x0a, 0x01, 's', 0x10, 0x00 };
        lianyaohu_v1_SignalRequest n = lianyaohu_v1_SignalRequest_init_zero;
        strcpy(n.session_id, "s");
        n.which_what = lianyaohu_v1_SignalRequest_signal_tag;
        n.what.signal = 0;
        uint8_t *B;
        size_t blen;
        assert_true(codec_nano_encode(row("SignalRequest"), &n, &B, &blen, &d));
        assert_int_equal(blen, sizeof(want));
        assert_memory_equal(B, want, sizeof(want));
        Lianyaohu__V1__SignalRequest *p = lianyaohu__v1__signal_request__unpack(NULL, blen, B);
        assert_non_null(p);
        assert_int_equal(p->what_case, LIANYAOHU__V1__SIGNAL_REQUEST__WHAT_SIGNAL);
        assert_int_equal(p->signal, 0);
        size_t alen;
        uint8_t *A = codec_pc_pack(&p->base, &alen);
        assert_int_equal(alen, sizeof(want));
        assert_memory_equal(A, want, sizeof(want));
        free(A);
        free(B);
        lianyaohu__v1__signal_request__free_unpacked(p, NULL);
    }
    {
        static const uint8_t want[] = { 0x22, 0x00 };
        lianyaohu_v1_RunEvent *n = xcalloc(sizeof(*n));
        n->which_event = lianyaohu_v1_RunEvent_firewall_tag;
        uint8_t *B;
        size_t blen;
        assert_true(codec_nano_encode(row("RunEvent"), n, &B, &blen, &d));
        assert_int_equal(blen, sizeof(want));
        assert_memory_equal(B, want, sizeof(want));
        Lianyaohu__V1__RunEvent *p = lianyaohu__v1__run_event__unpack(NULL, blen, B);
        assert_non_null(p);
        assert_int_equal(p->event_case, LIANYAOHU__V1__RUN_EVENT__EVENT_FIREWALL);
        assert_string_equal(p->firewall, "");
        size_t alen;
        uint8_t *A = codec_pc_pack(&p->base, &alen);
        assert_int_equal(alen, sizeof(want));
        assert_memory_equal(A, want, sizeof(want));
        free(A);
        free(B);
        free(n);
        lianyaohu__v1__run_event__free_unpacked(p, NULL);
    }
}

/* Two protobuf-c behaviours the daemon's encoder side must know about, pinned
 * here so a library upgrade that changes them is noticed:
 *  - a oneof string member pointing at protobuf_c_empty_string (the value the
 *    generated INIT macros use) is treated as unset and NOT packed, although
 *    the case is set: the CLI would see no event at all. Use a literal "" or
 *    an allocated string for an empty RunEvent.firewall;
 *  - a oneof message member left NULL with its case set is dropped the same
 *    way: the CLI would see a Response without a result. */
static void test_pc_oneof_members_dropped(void **state) {
    struct codec_diag d;
    Lianyaohu__V1__RunEvent ev = LIANYAOHU__V1__RUN_EVENT__INIT;
    ev.event_case = LIANYAOHU__V1__RUN_EVENT__EVENT_FIREWALL;
    ev.firewall = (char *)protobuf_c_empty_string;
    assert_int_equal(lianyaohu__v1__run_event__get_packed_size(&ev), 0);
    static char empty_literal[] = "";
    ev.firewall = empty_literal;
    assert_int_equal(lianyaohu__v1__run_event__get_packed_size(&ev), 2);

    Lianyaohu__V1__Response resp = LIANYAOHU__V1__RESPONSE__INIT;
    resp.call_id = 3;
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_SIGNAL;
    resp.signal = NULL;
    size_t alen;
    uint8_t *A = codec_pc_pack(&resp.base, &alen);
    lianyaohu_v1_Response *n = xcalloc(sizeof(*n));
    assert_true(codec_nano_decode(row("Response"), A, alen, n, NULL, &d));
    assert_int_equal(n->call_id, 3);
    assert_int_equal(n->which_result, 0);
    free(n);
    free(A);
}

/* ---- crafted inputs -------------------------------------------------------------------- */

enum expect {
    SAME,       /* both decode, to equal values; re-encodings equal `canon` */
    BOTH_FAIL,  /* both refuse */
    PC_ONLY,    /* documented divergence: protobuf-c accepts, nanopb refuses */
    DIFFER,     /* documented divergence: both accept, values differ; protobuf-c
                 * re-packs to `canon`, nanopb re-encodes to `canon_nano` */
};

struct crafted {
    const char *what;
    const char *msg;
    const char *hex;
    enum expect expect;
    const char *canon;      /* SAME, DIFFER: protobuf-c's (SAME: both) re-encoding */
    const char *canon_nano; /* DIFFER: nanopb's re-encoding */
};

static const struct crafted crafted[] = {
    { "scalar twice: last wins", "DestRule", "10 01 10 02", SAME, "10 02", NULL },
    { "string twice: last wins", "EnvVar", "0a 01 61 0a 02 62 63", SAME, "0a 02 62 63", NULL },
    { "oneof scalar then message: last wins", "SignalRequest", "10 05 1a 02 08 03", SAME,
      "1a 02 08 03", NULL },
    { "oneof message then scalar: last wins", "SignalRequest", "1a 02 08 03 10 05", SAME,
      "10 05", NULL },
    /* A submessage that occurs twice must be merged (protobuf spec:
     * "as if with MergeFrom"). nanopb does. protobuf-c 1.4 merges repeated
     * fields, strings and submessages of the earlier occurrence but drops its
     * numeric scalars, and replaces a oneof member's message outright. Only a
     * hand-made client sends this (no encoder repeats a field); the daemon
     * then acts on what protobuf-c kept. */
    { "submessage twice: repeated fields appended", "PolicyUpdateRequest",
      "0a 03 0a 01 61 0a 05 0a 01 62 50 07", SAME, "0a 08 0a 01 61 0a 01 62 50 07", NULL },
    { "submessage twice: earlier scalars", "AuditFollowRequest", "0a 02 50 05 0a 02 28 07",
      DIFFER, "0a 02 28 07", "0a 04 28 07 50 05" },
    { "oneof message twice", "SignalRequest", "1a 02 08 03 1a 02 10 04", DIFFER, "1a 02 10 04",
      "1a 04 08 03 10 04" },
    { "Request.run twice", "Request", "6a 07 1a 02 2f 61 80 01 01 6a 03 88 01 05", DIFFER,
      "6a 03 88 01 05", "6a 0a 1a 02 2f 61 80 01 01 88 01 05" },
    { "fields out of order", "DestRule", "20 09 0a 01 ff 10 08", SAME, "0a 01 ff 10 08 20 09",
      NULL },
    { "int32 -1 as 10-byte varint", "RunExited", "08 ff ff ff ff ff ff ff ff ff 01", SAME,
      "08 ff ff ff ff ff ff ff ff ff 01", NULL },
    { "int32 -1 as 5-byte varint (old encoders)", "RunExited", "08 ff ff ff ff 0f", SAME,
      "08 ff ff ff ff ff ff ff ff ff 01", NULL },
    { "explicit default value on the wire", "DestRule", "10 00", SAME, "", NULL },
    { "bool as varint 2", "InstallRequest", "10 02", SAME, "10 01", NULL },
    /* Both decoders keep C strings: bytes after an embedded NUL vanish in both
     * (the daemon cannot tell "a\0b" from "a"). Neither checks UTF-8. */
    { "embedded NUL in a string", "EnvVar", "0a 03 61 00 62", SAME, "0a 01 61", NULL },
    { "invalid UTF-8 in a string", "EnvVar", "0a 02 c3 28", SAME, "0a 02 c3 28", NULL },
    { "string field sent as varint", "EnvVar", "08 05", BOTH_FAIL, NULL, NULL },
    { "uint32 field sent as length-delimited", "DestRule", "12 01 00", BOTH_FAIL, NULL, NULL },
    { "submessage field sent as varint", "AuditFollowRequest", "08 01", BOTH_FAIL, NULL, NULL },
    { "length past the end", "EnvVar", "0a 05 61", BOTH_FAIL, NULL, NULL },
    { "truncated varint", "DestRule", "10 ff", BOTH_FAIL, NULL, NULL },
    { "field number 0", "DestRule", "00 01", BOTH_FAIL, NULL, NULL },
    { "wire type 6", "DestRule", "0e 01", BOTH_FAIL, NULL, NULL },
    { "submessage longer than its parent", "PolicyUpdateRequest", "0a 03 0a 07 61", BOTH_FAIL,
      NULL, NULL },
    /* A varint above 2^32 in a uint32 field: protobuf-c keeps the low 32 bits
     * (the proto3 rule: as if cast in C++), nanopb refuses the message. Only a
     * hand-made client can send this; the daemon sees fd_count 1 here. */
    { "uint32 field carrying 2^32 + 1", "Request", "20 81 80 80 80 10", PC_ONLY, NULL, NULL },
    /* Same class: a bool carrying a varint above 32 bits. */
    { "bool field carrying 2^35", "InstallRequest", "10 80 80 80 80 80 01", PC_ONLY, NULL,
      NULL },
    /* nanopb stores enums without negative values as unsigned (UENUM): a
     * negative number, legal for an open proto3 enum, fails the whole
     * message in nanopb; protobuf-c keeps it. The daemon must only send
     * values the CLI's enum knows the sign of (any it defines). */
    { "negative enum number", "RunStarted", "18 fe ff ff ff ff ff ff ff ff 01", PC_ONLY, NULL,
      NULL },
};

static size_t unhex(const char *s, uint8_t *out, size_t cap) {
    size_t n = 0;
    while (*s) {
        if (*s == ' ') {
            s++;
            continue;
        }
        unsigned v;
        if (sscanf(s, "%2x", &v) != 1 || n == cap)
            fail_msg("bad hex in test table: %s", s);
        out[n++] = (uint8_t)v;
        s += 2;
    }
    return n;
}

static void test_crafted_inputs(void **state) {
    size_t divergences = 0;
    for (size_t i = 0; i < sizeof(crafted) / sizeof(crafted[0]); i++) {
        const struct crafted *c = &crafted[i];
        const struct codec_msg *t = row(c->msg);
        uint8_t in[64], canon[64];
        size_t len = unhex(c->hex, in, sizeof(in));
        struct codec_diag d;
        void *n = xcalloc(t->nano_size);
        struct codec_arena a = { 0 };
        ProtobufCMessage *p = codec_pc_unpack(t, in, len);
        bool nok = codec_nano_decode(t, in, len, n, &a, &d);
        bool want_pc = c->expect != BOTH_FAIL;
        bool want_nano = c->expect == SAME || c->expect == DIFFER;
        if ((p != NULL) != want_pc || nok != want_nano)
            fail_msg("%s (%s: %s): protobuf-c %s, nanopb %s%s%s; expected protobuf-c %s, "
                     "nanopb %s",
                     c->what, c->msg, c->hex, p ? "accepts" : "refuses",
                     nok ? "accepts" : "refuses", nok ? "" : ": ", nok ? "" : d.msg,
                     want_pc ? "accepts" : "refuses", want_nano ? "accepts" : "refuses");
        if (c->expect == SAME || c->expect == DIFFER) {
            bool same = codec_cross_equal(t, p, n, NULL, &d);
            if (c->expect == SAME && !same)
                fail_msg("%s: decoded differently: %s", c->what, d.msg);
            if (c->expect == DIFFER && same)
                fail_msg("%s: now decodes the same in both: make it SAME", c->what);
            codec_nano_callbacks_to_encode(t, n);
            uint8_t canon_nano[64];
            size_t clen = unhex(c->canon, canon, sizeof(canon)), alen, blen;
            size_t cnlen = c->expect == DIFFER
                               ? unhex(c->canon_nano, canon_nano, sizeof(canon_nano))
                               : clen;
            if (c->expect == SAME)
                memcpy(canon_nano, canon, clen);
            uint8_t *A = codec_pc_pack(p, &alen), *B;
            if (!codec_nano_encode(t, n, &B, &blen, &d))
                fail_msg("%s", d.msg);
            if (!codec_bytes_equal("protobuf-c re-pack", canon, clen, A, alen, &d) ||
                !codec_bytes_equal("nanopb re-encode", canon_nano, cnlen, B, blen, &d))
                fail_msg("%s: %s", c->what, d.msg);
            free(A);
            free(B);
        }
        if (c->expect == PC_ONLY || c->expect == DIFFER)
            divergences++;
        if (p)
            protobuf_c_message_free_unpacked(p, NULL);
        codec_arena_free(&a);
        free(n);
    }
    print_message("%zu crafted inputs, %zu documented divergences\n",
                  sizeof(crafted) / sizeof(crafted[0]), divergences);
}

int main(void) {
    static const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_nanopb_bounds_every_field),
        cmocka_unit_test(test_envvar_name_boundary),
        cmocka_unit_test(test_request_each_method_empty),
        cmocka_unit_test(test_response_each_result_empty),
        cmocka_unit_test(test_unknown_field_top_level),
        cmocka_unit_test(test_unknown_field_nested),
        cmocka_unit_test(test_unknown_method_number),
        cmocka_unit_test(test_unknown_field_wire_types),
        cmocka_unit_test(test_open_enums),
        cmocka_unit_test(test_oneof_members_at_default),
        cmocka_unit_test(test_pc_oneof_members_dropped),
        cmocka_unit_test(test_crafted_inputs),
    };
    size_t nfixed = sizeof(fixed) / sizeof(fixed[0]);
    struct CMUnitTest *tests = calloc(codec_n_msgs + nfixed, sizeof(*tests));
    char (*names)[64] = calloc(codec_n_msgs, sizeof(*names));
    if (!tests || !names)
        return 1;
    for (size_t i = 0; i < codec_n_msgs; i++) {
        snprintf(names[i], sizeof(names[i]), "roundtrip_%s", codec_msgs[i].name);
        tests[i] = (struct CMUnitTest){
            .name = names[i],
            .test_func = test_roundtrip,
            .initial_state = (void *)&codec_msgs[i],
        };
    }
    memcpy(tests + codec_n_msgs, fixed, sizeof(fixed));
    int rc = _cmocka_run_group_tests("codec", tests, codec_n_msgs + nfixed, NULL, NULL);
    free(tests);
    free(names);
    return rc;
}
