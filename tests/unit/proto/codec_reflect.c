/* Reflection over protobuf-c and nanopb descriptors: fill both codecs' structs
 * with one value, compare them across codecs, check the two schemas agree.
 *
 * This file owns the mapping between the two generators' views of a field
 * (protobuf-c: label/type/quantifier_offset; nanopb: htype/ltype/pSize/pData).
 * It must never call an encoder or decoder to decide what a value is: the
 * tests built on it compare encoders and decoders against these independent
 * walks, so a walk that went through a codec would test the codec against
 * itself.
 *
 * Values are deterministic (a splitmix64 hash of the field path), never the
 * proto3 default (so every set field reaches the wire), and stay within the
 * nanopb bounds read from the nanopb descriptor: the bounds the CLI decodes
 * with, which the daemon's replies must respect. */
#include "codec_reflect.h"

#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pb_common.h>
#include <pb_decode.h>
#include <pb_encode.h>

static bool nano_is_callback(const pb_field_iter_t *it) {
    return PB_ATYPE(it->type) == PB_ATYPE_CALLBACK;
}

static bool nano_has_flag(const pb_field_iter_t *it) {
    return PB_HTYPE(it->type) == PB_HTYPE_OPTIONAL && it->pSize != NULL;
}

/* ---- diagnostics ----------------------------------------------------------- */

struct path {
    char s[512];
    size_t n;
};

__attribute__((format(printf, 2, 3)))
static size_t path_push(struct path *p, const char *fmt, ...) {
    size_t old = p->n;
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(p->s + p->n, sizeof(p->s) - p->n, fmt, ap);
    va_end(ap);
    if (r > 0)
        p->n += (size_t)r < sizeof(p->s) - p->n ? (size_t)r : sizeof(p->s) - p->n - 1;
    return old;
}

static void path_pop(struct path *p, size_t old) {
    p->n = old;
    p->s[old] = '\0';
}

__attribute__((format(printf, 3, 4)))
static bool diag(struct codec_diag *d, const struct path *p, const char *fmt, ...) {
    int n = snprintf(d->msg, sizeof(d->msg), "%s: ", p ? p->s : "");
    if (n < 0 || (size_t)n >= sizeof(d->msg))
        return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg + n, sizeof(d->msg) - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

/* ---- arena ----------------------------------------------------------------- */

void *codec_arena_alloc(struct codec_arena *a, size_t n) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        void **p = realloc(a->ptrs, cap * sizeof(*p));
        if (!p)
            abort();
        a->ptrs = p;
        a->cap = cap;
    }
    void *m = calloc(1, n ? n : 1);
    if (!m)
        abort();
    a->ptrs[a->n++] = m;
    return m;
}

void codec_arena_free(struct codec_arena *a) {
    for (size_t i = 0; i < a->n; i++)
        free(a->ptrs[i]);
    free(a->ptrs);
    a->ptrs = NULL;
    a->n = a->cap = 0;
}

const char *codec_mode_name(enum codec_mode m) {
    switch (m) {
    case CODEC_SMALL: return "small";
    case CODEC_SPARSE: return "sparse";
    case CODEC_MAX: return "max";
    }
    return "?";
}

/* ---- deterministic values ---------------------------------------------------- */

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t mix2(uint64_t a, uint64_t b) { return mix(a ^ mix(b)); }

/* ---- field kinds -------------------------------------------------------------- */

static bool pc_is_signed(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_ENUM:
        return true;
    default:
        return false;
    }
}

static bool pc_is_scalar(ProtobufCType t) {
    return t != PROTOBUF_C_TYPE_STRING && t != PROTOBUF_C_TYPE_BYTES && t != PROTOBUF_C_TYPE_MESSAGE;
}

/* Size of one element in a protobuf-c struct (or in its repeated array). */
static size_t pc_elem_size(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_FLOAT:
        return 4;
    case PROTOBUF_C_TYPE_ENUM:
        return sizeof(int); /* protobuf-c forces enums to int size */
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    }
    return 0;
}

/* The nanopb ltype the nanopb generator picks for a proto type. */
static unsigned nano_ltype_for(ProtobufCType t) {
    switch (t) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_ENUM:
        return PB_LTYPE_VARINT;
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_UINT64:
        return PB_LTYPE_UVARINT;
    case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SINT64:
        return PB_LTYPE_SVARINT;
    case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_SFIXED32: case PROTOBUF_C_TYPE_FLOAT:
        return PB_LTYPE_FIXED32;
    case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_DOUBLE:
        return PB_LTYPE_FIXED64;
    case PROTOBUF_C_TYPE_BOOL:
        return PB_LTYPE_BOOL;
    case PROTOBUF_C_TYPE_STRING:
        return PB_LTYPE_STRING;
    case PROTOBUF_C_TYPE_BYTES:
        return PB_LTYPE_BYTES;
    case PROTOBUF_C_TYPE_MESSAGE:
        return PB_LTYPE_SUBMESSAGE;
    }
    return 0xff;
}

/* A scalar travels between the codecs as a canonical uint64: signed types
 * sign-extended, unsigned zero-extended, floats as their bit pattern. */
static void pc_put_scalar(void *dst, ProtobufCType t, uint64_t u) {
    if (t == PROTOBUF_C_TYPE_BOOL) {
        protobuf_c_boolean b = u != 0;
        memcpy(dst, &b, sizeof(b));
    } else if (pc_elem_size(t) == 4) {
        uint32_t x = (uint32_t)u;
        memcpy(dst, &x, sizeof(x));
    } else {
        memcpy(dst, &u, sizeof(u));
    }
}

static uint64_t pc_get_scalar(const void *src, ProtobufCType t) {
    if (t == PROTOBUF_C_TYPE_BOOL) {
        protobuf_c_boolean b;
        memcpy(&b, src, sizeof(b));
        return b != 0;
    }
    if (pc_elem_size(t) == 4) {
        uint32_t x;
        memcpy(&x, src, sizeof(x));
        return pc_is_signed(t) ? (uint64_t)(int64_t)(int32_t)x : x;
    }
    uint64_t u;
    memcpy(&u, src, sizeof(u));
    return u;
}

static void nano_put_scalar(void *dst, const pb_field_iter_t *it, uint64_t u) {
    if (PB_LTYPE(it->type) == PB_LTYPE_BOOL) {
        bool b = u != 0;
        memcpy(dst, &b, sizeof(b));
        return;
    }
    switch (it->data_size) {
    case 1: { uint8_t x = (uint8_t)u; memcpy(dst, &x, 1); break; }
    case 2: { uint16_t x = (uint16_t)u; memcpy(dst, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)u; memcpy(dst, &x, 4); break; }
    default: memcpy(dst, &u, 8); break;
    }
}

static uint64_t nano_get_scalar(const void *src, const pb_field_iter_t *it, bool sign) {
    if (PB_LTYPE(it->type) == PB_LTYPE_BOOL) {
        bool b;
        memcpy(&b, src, sizeof(b));
        return b;
    }
    switch (it->data_size) {
    case 1: { uint8_t x; memcpy(&x, src, 1); return sign ? (uint64_t)(int64_t)(int8_t)x : x; }
    case 2: { uint16_t x; memcpy(&x, src, 2); return sign ? (uint64_t)(int64_t)(int16_t)x : x; }
    case 4: { uint32_t x; memcpy(&x, src, 4); return sign ? (uint64_t)(int64_t)(int32_t)x : x; }
    default: { uint64_t x; memcpy(&x, src, 8); return x; }
    }
}

static uint64_t gen_scalar(const ProtobufCFieldDescriptor *f, enum codec_mode mode, uint64_t h,
                           size_t idx) {
    bool max = mode == CODEC_MAX;
    bool neg = (h >> 20) & 1;
    switch (f->type) {
    case PROTOBUF_C_TYPE_BOOL:
        return 1;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumDescriptor *e = f->descriptor;
        int best = e->values[0].value;
        if (max) {
            for (unsigned i = 0; i < e->n_values; i++)
                if (e->values[i].value > best)
                    best = e->values[i].value;
        } else if (e->n_values > 1) {
            best = e->values[1 + h % (e->n_values - 1)].value; /* never the 0 default */
        }
        return (uint64_t)(int64_t)best;
    }
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32: {
        static const int32_t ext[] = { INT32_MIN, INT32_MAX, -1 };
        int32_t v = max ? ext[idx % 3] : (int32_t)(h % 100000) + 1;
        return (uint64_t)(int64_t)(!max && neg ? -v : v);
    }
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
        if (max)
            return UINT32_MAX;
        return neg ? 0x80000000u | (uint32_t)(h & 0xffff) : 1 + (uint32_t)(h % 100000);
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64: {
        static const int64_t ext[] = { INT64_MIN, INT64_MAX, -1 };
        int64_t v = max ? ext[idx % 3] : (int64_t)((h >> 8) % 10000000000000ull) + 1;
        return (uint64_t)(!max && neg ? -v : v);
    }
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
        if (max)
            return UINT64_MAX;
        return neg ? h | (1ull << 63) : 1 + h % 1000000;
    case PROTOBUF_C_TYPE_FLOAT: {
        float v = max ? FLT_MAX : (float)(h % 4096 + 1) / 8.0f;
        uint32_t bits;
        if (neg)
            v = -v;
        memcpy(&bits, &v, sizeof(bits));
        return bits;
    }
    case PROTOBUF_C_TYPE_DOUBLE: {
        double v = max ? DBL_MAX : (double)(h % 1000000 + 1) / 16.0;
        uint64_t bits;
        if (neg)
            v = -v;
        memcpy(&bits, &v, sizeof(bits));
        return bits;
    }
    default:
        return 0;
    }
}

static void gen_text(char *s, size_t len, uint64_t h) {
    static const char alphabet[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
    for (size_t i = 0; i < len; i++)
        s[i] = alphabet[mix2(h, i) % (sizeof(alphabet) - 1)];
    s[len] = '\0';
}

/* ---- oneofs ------------------------------------------------------------------- */

/* Members of the oneof that field i belongs to: *ret_n of them, i at *ret_pos. */
static void oneof_members(const ProtobufCMessageDescriptor *d, unsigned i, unsigned *ret_n,
                          unsigned *ret_pos) {
    unsigned n = 0, pos = 0;
    for (unsigned j = 0; j < d->n_fields; j++) {
        if (!(d->fields[j].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ||
            d->fields[j].quantifier_offset != d->fields[i].quantifier_offset)
            continue;
        if (j == i)
            pos = n;
        n++;
    }
    *ret_n = n;
    *ret_pos = pos;
}

unsigned codec_variants(const ProtobufCMessageDescriptor *d) {
    unsigned most = 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        if (!(d->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
            continue;
        unsigned n, pos;
        oneof_members(d, i, &n, &pos);
        if (n > most)
            most = n;
    }
    return most + 1;
}

/* Variant v selects member v % (n + 1) of each oneof; n means none. */
static bool oneof_selected(const ProtobufCMessageDescriptor *d, unsigned i, unsigned variant) {
    unsigned n, pos;
    oneof_members(d, i, &n, &pos);
    return variant % (n + 1) == pos;
}

/* ---- nanopb field access ---------------------------------------------------------- */

bool codec_nano_field(const pb_msgdesc_t *desc, void *msg, uint32_t tag, pb_field_iter_t *it) {
    return pb_field_iter_begin(it, desc, msg) && pb_field_iter_find(it, tag);
}

size_t codec_nano_max_len(const pb_field_iter_t *it) {
    if (nano_is_callback(it))
        return 0;
    if (PB_LTYPE(it->type) == PB_LTYPE_STRING)
        return it->data_size ? (size_t)it->data_size - 1 : 0;
    if (PB_LTYPE(it->type) == PB_LTYPE_BYTES)
        return (size_t)it->data_size - offsetof(pb_bytes_array_t, bytes);
    return 0;
}


/* ---- callback fields --------------------------------------------------------------- */

/* What a nanopb callback field holds in these tests: its elements, as
 * strings/bytes (len + data, strings NUL-terminated) or nanopb structs of the
 * submessage type. The CLI does the same with its own arrays. */
struct cb_item {
    size_t len;
    void *data;
};

struct cb_list {
    unsigned ltype;                 /* PB_LTYPE_STRING, _BYTES or _SUBMESSAGE */
    const struct codec_msg *sub;    /* submessage row */
    struct codec_arena *arena;      /* owns items and their data */
    size_t n, cap;
    struct cb_item *items;
};

static struct cb_list *cb_list_new(struct codec_arena *a, const pb_field_iter_t *it) {
    struct cb_list *l = codec_arena_alloc(a, sizeof(*l));
    l->ltype = PB_LTYPE_IS_SUBMSG(it->type) ? PB_LTYPE_SUBMESSAGE : PB_LTYPE(it->type);
    l->sub = it->submsg_desc ? codec_msg_by_nano(it->submsg_desc) : NULL;
    l->arena = a;
    return l;
}

static struct cb_item *cb_list_add(struct cb_list *l) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        struct cb_item *items = codec_arena_alloc(l->arena, cap * sizeof(*items));
        if (l->n)
            memcpy(items, l->items, l->n * sizeof(*items));
        l->items = items;
        l->cap = cap;
    }
    return &l->items[l->n++];
}

static bool cb_encode(pb_ostream_t *s, const pb_field_t *field, void *const *arg) {
    const struct cb_list *l = *arg;
    for (size_t i = 0; i < l->n; i++) {
        if (!pb_encode_tag_for_field(s, field))
            return false;
        if (l->ltype == PB_LTYPE_SUBMESSAGE) {
            if (!pb_encode_submessage(s, field->submsg_desc, l->items[i].data))
                return false;
        } else if (!pb_encode_string(s, l->items[i].data, l->items[i].len)) {
            return false;
        }
    }
    return true;
}

static bool cb_decode(pb_istream_t *s, const pb_field_t *field, void **arg) {
    struct cb_list *l = *arg;
    struct cb_item *item = cb_list_add(l);
    if (l->ltype == PB_LTYPE_SUBMESSAGE) {
        if (!l->sub)
            return false;
        item->data = codec_arena_alloc(l->arena, l->sub->nano_size);
        codec_nano_prepare_decode(l->sub, item->data, l->arena);
        return pb_decode(s, l->sub->nano, item->data);
    }
    item->len = s->bytes_left;
    item->data = codec_arena_alloc(l->arena, item->len + 1);
    return pb_read(s, item->data, item->len);
}

static void cb_set(void *pData, struct cb_list *l, bool encode) {
    pb_callback_t cb;
    memset(&cb, 0, sizeof(cb));
    if (encode)
        cb.funcs.encode = cb_encode;
    else
        cb.funcs.decode = cb_decode;
    cb.arg = l;
    memcpy(pData, &cb, sizeof(cb));
}

static struct cb_list *cb_get(const void *pData) {
    pb_callback_t cb;
    memcpy(&cb, pData, sizeof(cb));
    return cb.arg;
}

void codec_nano_prepare_decode(const struct codec_msg *t, void *nano, struct codec_arena *a) {
    pb_field_iter_t it;
    if (!pb_field_iter_begin(&it, t->nano, nano))
        return;
    do {
        if (nano_is_callback(&it)) {
            cb_set(it.pData, cb_list_new(a, &it), false);
        } else if (PB_LTYPE_IS_SUBMSG(it.type) && PB_HTYPE(it.type) != PB_HTYPE_ONEOF) {
            /* Singular submessages are decoded in place (NOINIT) and repeated
             * elements are set to defaults, which leaves callbacks alone; a
             * oneof member is memset first, so preparing it is pointless. */
            const struct codec_msg *sub = codec_msg_by_nano(it.submsg_desc);
            size_t n = PB_HTYPE(it.type) == PB_HTYPE_REPEATED ? it.array_size : 1;
            for (size_t k = 0; sub && k < n; k++)
                codec_nano_prepare_decode(sub, (char *)it.pData + k * it.data_size, a);
        }
    } while (pb_field_iter_next(&it));
}

void codec_nano_callbacks_to_encode(const struct codec_msg *t, void *nano) {
    pb_field_iter_t it;
    if (!pb_field_iter_begin(&it, t->nano, nano))
        return;
    do {
        if (nano_is_callback(&it)) {
            struct cb_list *l = cb_get(it.pData);
            if (!l)
                continue;
            cb_set(it.pData, l, true);
            for (size_t k = 0; l->sub && k < l->n; k++)
                codec_nano_callbacks_to_encode(l->sub, l->items[k].data);
        } else if (PB_LTYPE_IS_SUBMSG(it.type)) {
            const struct codec_msg *sub = codec_msg_by_nano(it.submsg_desc);
            size_t n = 1;
            pb_size_t sz = 0;
            bool has = true;
            if (PB_HTYPE(it.type) == PB_HTYPE_REPEATED) {
                memcpy(&sz, it.pSize, sizeof(sz));
                n = sz;
            } else if (PB_HTYPE(it.type) == PB_HTYPE_ONEOF) {
                memcpy(&sz, it.pSize, sizeof(sz));
                n = sz == it.tag;
            } else if (nano_has_flag(&it)) {
                memcpy(&has, it.pSize, sizeof(has));
                n = has;
            }
            for (size_t k = 0; sub && k < n; k++)
                codec_nano_callbacks_to_encode(sub, (char *)it.pData + k * it.data_size);
        }
    } while (pb_field_iter_next(&it));
}

/* ---- filling ---------------------------------------------------------------------- */

struct fill_ctx {
    enum codec_mode mode;
    struct codec_arena *arena;
    struct codec_diag *d;
    struct path path;
};

static bool fill_msg(struct fill_ctx *c, const struct codec_msg *t, ProtobufCMessage *pc,
                     void *nano, unsigned variant, unsigned depth, uint64_t seed);

static size_t pick_len(const struct fill_ctx *c, size_t max, uint64_t h) {
    if (max == 0)
        return 0;
    if (c->mode == CODEC_MAX)
        return max;
    return 1 + (size_t)((h >> 9) % (max < 15 ? max : 15));
}

/* One value (a singular field, a oneof member or one repeated element). */
static bool fill_value(struct fill_ctx *c, const ProtobufCFieldDescriptor *f,
                       const pb_field_iter_t *it, void *pcdst, void *nanodst, uint64_t h,
                       unsigned variant, unsigned depth, size_t idx) {
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        size_t len = pick_len(c, codec_nano_max_len(it), h);
        char *s = codec_arena_alloc(c->arena, len + 1);
        gen_text(s, len, h);
        memcpy(pcdst, &s, sizeof(s));
        memcpy(nanodst, s, len + 1);
        return true;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        size_t len = pick_len(c, codec_nano_max_len(it), h);
        uint8_t *b = codec_arena_alloc(c->arena, len);
        for (size_t i = 0; i < len; i++)
            b[i] = (uint8_t)mix2(h, i); /* any byte, NUL included */
        ProtobufCBinaryData bd = { .len = len, .data = b };
        memcpy(pcdst, &bd, sizeof(bd));
        pb_size_t size = (pb_size_t)len;
        memcpy(nanodst, &size, sizeof(size));
        memcpy((uint8_t *)nanodst + offsetof(pb_bytes_array_t, bytes), b, len);
        return true;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const struct codec_msg *sub = codec_msg_by_pc(f->descriptor);
        if (!sub)
            return diag(c->d, &c->path, "message type %s has no row in codec_table.c",
                        ((const ProtobufCMessageDescriptor *)f->descriptor)->name);
        if (it->submsg_desc != sub->nano)
            return diag(c->d, &c->path, "nanopb submessage descriptor is not %s", sub->name);
        ProtobufCMessage *m = codec_arena_alloc(c->arena, sub->pc->sizeof_message);
        protobuf_c_message_init(sub->pc, m);
        memcpy(pcdst, &m, sizeof(m));
        return fill_msg(c, sub, m, nanodst, variant + f->id + (unsigned)idx, depth + 1, h);
    }
    default: {
        uint64_t u = gen_scalar(f, c->mode, h, idx);
        pc_put_scalar(pcdst, f->type, u);
        nano_put_scalar(nanodst, it, u);
        return true;
    }
    }
}

/* One element of a callback field: the protobuf-c element and a list item. */
static bool fill_cb_value(struct fill_ctx *c, const ProtobufCFieldDescriptor *f,
                          const pb_field_iter_t *it, struct cb_list *l, void *pcdst, uint64_t h,
                          unsigned variant, unsigned depth, size_t idx) {
    struct cb_item *item = cb_list_add(l);
    if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
        const struct codec_msg *sub = codec_msg_by_pc(f->descriptor);
        if (!sub || l->sub != sub)
            return diag(c->d, &c->path, "callback submessage has no matching table row");
        ProtobufCMessage *m = codec_arena_alloc(c->arena, sub->pc->sizeof_message);
        protobuf_c_message_init(sub->pc, m);
        memcpy(pcdst, &m, sizeof(m));
        item->data = codec_arena_alloc(c->arena, sub->nano_size);
        return fill_msg(c, sub, m, item->data, variant + f->id + (unsigned)idx, depth + 1, h);
    }
    size_t len = pick_len(c, CODEC_CB_MAX_LEN, h);
    uint8_t *b = codec_arena_alloc(c->arena, len + 1);
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        gen_text((char *)b, len, h);
        memcpy(pcdst, &b, sizeof(b));
    } else {
        for (size_t i = 0; i < len; i++)
            b[i] = (uint8_t)mix2(h, i);
        ProtobufCBinaryData bd = { .len = len, .data = b };
        memcpy(pcdst, &bd, sizeof(bd));
    }
    item->len = len;
    item->data = b;
    return true;
}

static bool fill_msg(struct fill_ctx *c, const struct codec_msg *t, ProtobufCMessage *pc,
                     void *nano, unsigned variant, unsigned depth, uint64_t seed) {
    for (unsigned i = 0; i < t->pc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &t->pc->fields[i];
        pb_field_iter_t it;
        uint64_t h = mix2(seed, f->id);
        size_t mark = path_push(&c->path, ".%s", f->name);
        char *pcfield = (char *)pc + f->offset;
        bool ok = true;

        if (!codec_nano_field(t->nano, nano, f->id, &it))
            return diag(c->d, &c->path, "no nanopb field %u", f->id);
        /* A callback field left unset still gets an (empty) list, so that the
         * comparison can tell "no elements" from "not decodable". */
        if (nano_is_callback(&it))
            cb_set(it.pData, cb_list_new(c->arena, &it), true);
        /* At the depth bound submessages stay unset (a oneof member that is a
         * message is then not selected either). */
        if (f->type == PROTOBUF_C_TYPE_MESSAGE && depth + 1 >= CODEC_MAX_DEPTH)
            goto next;

        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (!oneof_selected(t->pc, i, variant))
                goto next;
            uint32_t id = f->id;
            pb_size_t which = (pb_size_t)f->id;
            memcpy((char *)pc + f->quantifier_offset, &id, sizeof(id));
            memcpy(it.pSize, &which, sizeof(which));
            ok = fill_value(c, f, &it, pcfield, it.pData, h, variant, depth, 0);
        } else if (c->mode == CODEC_SPARSE && (h & 1)) {
            goto next;
        } else if (nano_is_callback(&it)) {
            /* Schema check: callbacks are repeated string/bytes/message. */
            size_t count = c->mode == CODEC_MAX ? CODEC_CB_MAX_COUNT : 2 + (size_t)((h >> 7) % 2);
            size_t es = pc_elem_size(f->type);
            char *elems = codec_arena_alloc(c->arena, count * es);
            struct cb_list *l = cb_list_new(c->arena, &it);
            for (size_t k = 0; ok && k < count; k++) {
                size_t m2 = path_push(&c->path, "[%zu]", k);
                ok = fill_cb_value(c, f, &it, l, elems + k * es, mix2(h, k + 1),
                                   variant + (unsigned)k, depth, k);
                path_pop(&c->path, m2);
            }
            memcpy((char *)pc + f->quantifier_offset, &count, sizeof(count));
            memcpy(pcfield, &elems, sizeof(elems));
            cb_set(it.pData, l, true);
        } else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t count = c->mode == CODEC_MAX ? it.array_size : 2 + (size_t)((h >> 7) % 2);
            size_t es = pc_elem_size(f->type);
            if (count > it.array_size)
                count = it.array_size;
            char *elems = codec_arena_alloc(c->arena, count * es);
            for (size_t k = 0; ok && k < count; k++) {
                size_t m2 = path_push(&c->path, "[%zu]", k);
                ok = fill_value(c, f, &it, elems + k * es, (char *)it.pData + k * it.data_size,
                                mix2(h, k + 1), variant + (unsigned)k, depth, k);
                path_pop(&c->path, m2);
            }
            pb_size_t cnt = (pb_size_t)count;
            memcpy((char *)pc + f->quantifier_offset, &count, sizeof(count));
            memcpy(pcfield, &elems, sizeof(elems));
            memcpy(it.pSize, &cnt, sizeof(cnt));
        } else {
            ok = fill_value(c, f, &it, pcfield, it.pData, h, variant, depth, 0);
            if (nano_has_flag(&it)) {
                bool has = true;
                memcpy(it.pSize, &has, sizeof(has));
            }
            /* proto3 `optional` scalars carry a has_ flag in protobuf-c too
             * (strings and messages use the pointer instead). */
            if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
                f->type != PROTOBUF_C_TYPE_MESSAGE) {
                protobuf_c_boolean has = 1;
                memcpy((char *)pc + f->quantifier_offset, &has, sizeof(has));
            }
        }
        if (!ok)
            return false;
    next:
        path_pop(&c->path, mark);
    }
    return true;
}

bool codec_fill(const struct codec_msg *t, ProtobufCMessage *pc, void *nano, enum codec_mode mode,
                unsigned variant, struct codec_arena *a, struct codec_diag *d) {
    struct fill_ctx c = { .mode = mode, .arena = a, .d = d };
    path_push(&c.path, "%s", t->name);
    return fill_msg(&c, t, pc, nano, variant, 0, mix2(variant, (uint64_t)mode + 1));
}

/* ---- comparing --------------------------------------------------------------------- */

struct eq_ctx {
    struct codec_diag *d;
    struct path path;
    size_t *skipped;
};

static bool eq_msg(struct eq_ctx *c, const struct codec_msg *t, const ProtobufCMessage *pc,
                   const void *nano, unsigned depth);

static bool eq_value(struct eq_ctx *c, const ProtobufCFieldDescriptor *f, const pb_field_iter_t *it,
                     const void *pcsrc, const void *nanosrc, unsigned depth) {
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s;
        memcpy(&s, pcsrc, sizeof(s));
        if (!s)
            s = "";
        size_t nl = strnlen(nanosrc, it->data_size);
        if (nl == it->data_size)
            return diag(c->d, &c->path, "nanopb string not NUL-terminated within %u bytes",
                        (unsigned)it->data_size);
        if (strcmp(s, nanosrc) != 0)
            return diag(c->d, &c->path, "string: protobuf-c \"%.40s\" (len %zu) vs nanopb \"%.40s\" (len %zu)",
                        s, strlen(s), (const char *)nanosrc, nl);
        return true;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        ProtobufCBinaryData bd;
        pb_size_t size;
        memcpy(&bd, pcsrc, sizeof(bd));
        memcpy(&size, nanosrc, sizeof(size));
        if (bd.len != size)
            return diag(c->d, &c->path, "bytes length: protobuf-c %zu vs nanopb %u", bd.len,
                        (unsigned)size);
        if (size && memcmp(bd.data, (const uint8_t *)nanosrc + offsetof(pb_bytes_array_t, bytes),
                           size) != 0)
            return diag(c->d, &c->path, "bytes content differs");
        return true;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *m;
        memcpy(&m, pcsrc, sizeof(m));
        const struct codec_msg *sub = codec_msg_by_pc(f->descriptor);
        if (!sub)
            return diag(c->d, &c->path, "no table row for the submessage type");
        if (!m)
            return diag(c->d, &c->path, "protobuf-c submessage pointer is NULL");
        if (depth + 1 > CODEC_MAX_DEPTH * 2)
            return diag(c->d, &c->path, "nesting deeper than %d", CODEC_MAX_DEPTH * 2);
        return eq_msg(c, sub, m, nanosrc, depth + 1);
    }
    default: {
        uint64_t a = pc_get_scalar(pcsrc, f->type);
        uint64_t b = nano_get_scalar(nanosrc, it, pc_is_signed(f->type));
        if (a != b)
            return diag(c->d, &c->path, "value: protobuf-c %llu (0x%llx) vs nanopb %llu (0x%llx)",
                        (unsigned long long)a, (unsigned long long)a, (unsigned long long)b,
                        (unsigned long long)b);
        return true;
    }
    }
}

/* A repeated protobuf-c field against a nanopb callback list. */
static bool eq_cb(struct eq_ctx *c, const ProtobufCFieldDescriptor *f, const pb_field_iter_t *it,
                  const char *pcbase, unsigned depth) {
    const struct cb_list *l = cb_get(it->pData);
    size_t n, es = pc_elem_size(f->type);
    const char *elems;
    if (!l) {
        if (!c->skipped)
            return diag(c->d, &c->path, "nanopb callback field has no list (not decoded)");
        (*c->skipped)++;
        return true;
    }
    memcpy(&n, pcbase + f->quantifier_offset, sizeof(n));
    memcpy(&elems, pcbase + f->offset, sizeof(elems));
    if (n != l->n)
        return diag(c->d, &c->path, "count: protobuf-c %zu vs nanopb callback list %zu", n, l->n);
    for (size_t k = 0; k < n; k++) {
        const struct cb_item *item = &l->items[k];
        const char *slot = elems + k * es;
        size_t m2 = path_push(&c->path, "[%zu]", k);
        if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
            const ProtobufCMessage *m;
            memcpy(&m, slot, sizeof(m));
            if (!m || !l->sub)
                return diag(c->d, &c->path, "NULL element");
            if (!eq_msg(c, l->sub, m, item->data, depth + 1))
                return false;
        } else {
            const uint8_t *data;
            size_t len;
            if (f->type == PROTOBUF_C_TYPE_STRING) {
                const char *str;
                memcpy(&str, slot, sizeof(str));
                data = (const uint8_t *)(str ? str : "");
                len = strlen((const char *)data);
            } else {
                ProtobufCBinaryData bd;
                memcpy(&bd, slot, sizeof(bd));
                data = bd.data;
                len = bd.len;
            }
            if (len != item->len || (len && memcmp(data, item->data, len) != 0))
                return diag(c->d, &c->path, "element differs: protobuf-c %zu bytes vs nanopb %zu",
                            len, item->len);
        }
        path_pop(&c->path, m2);
    }
    return true;
}

static bool eq_msg(struct eq_ctx *c, const struct codec_msg *t, const ProtobufCMessage *pc,
                   const void *nano, unsigned depth) {
    if (pc->descriptor != t->pc)
        return diag(c->d, &c->path, "protobuf-c message is a %s, expected %s",
                    pc->descriptor->name, t->pc->name);
    if (pc->n_unknown_fields)
        return diag(c->d, &c->path, "protobuf-c kept %u unknown field(s), first tag %u",
                    pc->n_unknown_fields, pc->unknown_fields[0].tag);
    for (unsigned i = 0; i < t->pc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &t->pc->fields[i];
        const char *pcbase = (const char *)pc;
        pb_field_iter_t it;
        size_t mark = path_push(&c->path, ".%s", f->name);
        bool ok = true;

        if (!pb_field_iter_begin_const(&it, t->nano, nano) || !pb_field_iter_find(&it, f->id))
            return diag(c->d, &c->path, "no nanopb field %u", f->id);

        if (nano_is_callback(&it)) {
            ok = eq_cb(c, f, &it, pcbase, depth);
        } else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t pcase;
            pb_size_t which;
            memcpy(&pcase, pcbase + f->quantifier_offset, sizeof(pcase));
            memcpy(&which, it.pSize, sizeof(which));
            if ((pcase == f->id) != (which == f->id))
                return diag(c->d, &c->path, "oneof: protobuf-c case %u vs nanopb which %u",
                            pcase, (unsigned)which);
            if (pcase == f->id)
                ok = eq_value(c, f, &it, pcbase + f->offset, it.pData, depth);
        } else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n;
            pb_size_t cnt;
            const char *elems;
            size_t es = pc_elem_size(f->type);
            memcpy(&n, pcbase + f->quantifier_offset, sizeof(n));
            memcpy(&cnt, it.pSize, sizeof(cnt));
            memcpy(&elems, pcbase + f->offset, sizeof(elems));
            if (n != cnt)
                return diag(c->d, &c->path, "count: protobuf-c %zu vs nanopb %u", n, (unsigned)cnt);
            for (size_t k = 0; ok && k < n; k++) {
                size_t m2 = path_push(&c->path, "[%zu]", k);
                ok = eq_value(c, f, &it, elems + k * es, (const char *)it.pData + k * it.data_size,
                              depth);
                path_pop(&c->path, m2);
            }
        } else if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
            const void *m;
            memcpy(&m, pcbase + f->offset, sizeof(m));
            bool has = true;
            if (nano_has_flag(&it))
                memcpy(&has, it.pSize, sizeof(has));
            if ((m != NULL) != has)
                return diag(c->d, &c->path, "presence: protobuf-c %s vs nanopb has_=%d",
                            m ? "set" : "NULL", has);
            if (m)
                ok = eq_value(c, f, &it, pcbase + f->offset, it.pData, depth);
        } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING) {
            protobuf_c_boolean pch;
            bool nh = false;
            memcpy(&pch, pcbase + f->quantifier_offset, sizeof(pch));
            if (nano_has_flag(&it))
                memcpy(&nh, it.pSize, sizeof(nh));
            if ((pch != 0) != nh)
                return diag(c->d, &c->path, "presence: protobuf-c has_=%d vs nanopb has_=%d",
                            pch, nh);
            if (nh)
                ok = eq_value(c, f, &it, pcbase + f->offset, it.pData, depth);
        } else {
            ok = eq_value(c, f, &it, pcbase + f->offset, it.pData, depth);
        }
        if (!ok)
            return false;
        path_pop(&c->path, mark);
    }
    return true;
}

bool codec_cross_equal(const struct codec_msg *t, const ProtobufCMessage *pc, const void *nano,
                       size_t *ret_skipped, struct codec_diag *d) {
    struct eq_ctx c = { .d = d, .skipped = ret_skipped };
    path_push(&c.path, "%s", t->name);
    return eq_msg(&c, t, pc, nano, 0);
}

/* ---- codec calls -------------------------------------------------------------------- */

uint8_t *codec_pc_pack(const ProtobufCMessage *m, size_t *ret_len) {
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        abort();
    if (protobuf_c_message_pack(m, buf) != n) {
        free(buf);
        return NULL;
    }
    *ret_len = n;
    return buf;
}

bool codec_nano_encode(const struct codec_msg *t, const void *nano, uint8_t **ret_buf,
                       size_t *ret_len, struct codec_diag *d) {
    size_t n;
    if (!pb_get_encoded_size(&n, t->nano, nano))
        return diag(d, NULL, "%s: pb_get_encoded_size failed", t->name);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        abort();
    pb_ostream_t os = pb_ostream_from_buffer(buf, n);
    if (!pb_encode(&os, t->nano, nano) || os.bytes_written != n) {
        diag(d, NULL, "%s: pb_encode failed: %s", t->name, PB_GET_ERROR(&os));
        free(buf);
        return false;
    }
    *ret_buf = buf;
    *ret_len = n;
    return true;
}

bool codec_nano_decode(const struct codec_msg *t, const uint8_t *buf, size_t len, void *nano,
                       struct codec_arena *a, struct codec_diag *d) {
    static const uint8_t empty[1];
    if (a)
        codec_nano_prepare_decode(t, nano, a);
    pb_istream_t is = pb_istream_from_buffer(len ? buf : empty, len);
    if (!pb_decode(&is, t->nano, nano))
        return diag(d, NULL, "%s: pb_decode failed: %s", t->name, PB_GET_ERROR(&is));
    if (is.bytes_left != 0)
        return diag(d, NULL, "%s: pb_decode left %zu bytes", t->name, is.bytes_left);
    return true;
}

ProtobufCMessage *codec_pc_unpack(const struct codec_msg *t, const uint8_t *buf, size_t len) {
    static const uint8_t empty[1];
    return protobuf_c_message_unpack(t->pc, NULL, len, len ? buf : empty);
}

bool codec_bytes_equal(const char *what, const uint8_t *a, size_t alen, const uint8_t *b,
                       size_t blen, struct codec_diag *d) {
    size_t n = alen < blen ? alen : blen;
    size_t i = 0;
    while (i < n && a[i] == b[i])
        i++;
    if (i == n && alen == blen)
        return true;
    char ha[3 * 8 + 1] = "", hb[3 * 8 + 1] = "";
    for (size_t k = 0; k < 8; k++) {
        if (i + k < alen)
            snprintf(ha + 3 * k, sizeof(ha) - 3 * k, "%02x ", a[i + k]);
        if (i + k < blen)
            snprintf(hb + 3 * k, sizeof(hb) - 3 * k, "%02x ", b[i + k]);
    }
    return diag(d, NULL, "%s: lengths %zu vs %zu, first difference at byte %zu: [%s] vs [%s]",
                what, alen, blen, i, ha, hb);
}

/* ---- schema ------------------------------------------------------------------------- */

bool codec_schema_check(const struct codec_msg *t, struct codec_diag *d) {
    struct path p = { .n = 0 };
    char full[128];
    bool ok = false;
    void *nano = calloc(1, t->nano_size ? t->nano_size : 1);
    if (!nano)
        abort();

    path_push(&p, "%s", t->name);
    snprintf(full, sizeof(full), "lianyaohu.v1.%s", t->name);
    if (strcmp(t->pc->name, full) != 0) {
        diag(d, &p, "protobuf-c descriptor is %s", t->pc->name);
        goto out;
    }
    if (t->pc->n_fields != t->nano->field_count) {
        diag(d, &p, "protobuf-c has %u fields, nanopb %u", t->pc->n_fields,
             (unsigned)t->nano->field_count);
        goto out;
    }
    for (unsigned i = 0; i < t->pc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &t->pc->fields[i];
        pb_field_iter_t it;
        size_t mark = path_push(&p, ".%s", f->name);
        unsigned lt, ht;

        if (!codec_nano_field(t->nano, nano, f->id, &it)) {
            diag(d, &p, "field %u missing in nanopb", f->id);
            goto out;
        }
        lt = PB_LTYPE(it.type);
        ht = PB_HTYPE(it.type);
        /* Which fields may be callbacks is the options file's business
         * (test_codec_schema checks it); here: only kinds the reflection
         * handles, and never a pointer (the CLI does not allocate). */
        if (nano_is_callback(&it)) {
            if (f->label != PROTOBUF_C_LABEL_REPEATED || pc_is_scalar(f->type) ||
                (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) {
                diag(d, &p, "callback field of a kind this test does not handle "
                            "(only repeated string/bytes/message)");
                goto out;
            }
        } else if (PB_ATYPE(it.type) != PB_ATYPE_STATIC) {
            diag(d, &p, "nanopb field is allocated (atype 0x%x)", PB_ATYPE(it.type));
            goto out;
        }
        /* nanopb maps an enum without negative values to an unsigned varint
         * (UENUM); protobuf-c treats every enum as int32. */
        bool uenum = f->type == PROTOBUF_C_TYPE_ENUM && lt == PB_LTYPE_UVARINT;
        if (uenum) {
            const ProtobufCEnumDescriptor *e = f->descriptor;
            for (unsigned k = 0; k < e->n_values; k++)
                if (e->values[k].value < 0) {
                    diag(d, &p, "unsigned nanopb enum with a negative value");
                    goto out;
                }
        }
        if (lt != nano_ltype_for(f->type) && !uenum &&
            !(f->type == PROTOBUF_C_TYPE_MESSAGE && lt == PB_LTYPE_SUBMSG_W_CB)) {
            diag(d, &p, "protobuf-c type %d maps to nanopb ltype 0x%x, got 0x%x", (int)f->type,
                 nano_ltype_for(f->type), lt);
            goto out;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (ht != PB_HTYPE_ONEOF) {
                diag(d, &p, "oneof member in protobuf-c, htype 0x%x in nanopb", ht);
                goto out;
            }
        } else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            if (ht != PB_HTYPE_REPEATED ||
                (!nano_is_callback(&it) && (it.pSize == NULL || it.pSize == &it.array_size))) {
                diag(d, &p, "repeated in protobuf-c, not a counted array in nanopb");
                goto out;
            }
            /* nanopb always writes repeated scalars packed; protobuf-c only when
             * the field is packed (the proto3 default). A [packed=false] field
             * would make the two encodings differ (both still decode either). */
            if (pc_is_scalar(f->type) && !(f->flags & PROTOBUF_C_FIELD_FLAG_PACKED)) {
                diag(d, &p, "unpacked repeated scalar: nanopb would pack it, protobuf-c not");
                goto out;
            }
        } else if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->label == PROTOBUF_C_LABEL_OPTIONAL) {
            if (!nano_has_flag(&it)) {
                diag(d, &p, "field has presence in protobuf-c but no has_ in nanopb");
                goto out;
            }
        } else if (f->label == PROTOBUF_C_LABEL_NONE) {
            if (ht != PB_HTYPE_SINGULAR || it.pSize != NULL) {
                diag(d, &p, "proto3 singular in protobuf-c, htype 0x%x in nanopb", ht);
                goto out;
            }
        } else {
            diag(d, &p, "label %d is not proto3", (int)f->label);
            goto out;
        }

        if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
            const struct codec_msg *sub = codec_msg_by_pc(f->descriptor);
            if (!sub || it.submsg_desc != sub->nano) {
                diag(d, &p, "submessage %s: %s", ((const ProtobufCMessageDescriptor *)f->descriptor)->name,
                     sub ? "nanopb points at another descriptor" : "no table row");
                goto out;
            }
        } else if (f->type == PROTOBUF_C_TYPE_ENUM) {
            if (it.data_size != 1 && it.data_size != 2 && it.data_size != 4) {
                diag(d, &p, "nanopb enum is %u bytes", (unsigned)it.data_size);
                goto out;
            }
        } else if (f->type == PROTOBUF_C_TYPE_BOOL) {
            if (it.data_size != sizeof(bool)) {
                diag(d, &p, "nanopb bool is %u bytes", (unsigned)it.data_size);
                goto out;
            }
        } else if (pc_is_scalar(f->type) && it.data_size != pc_elem_size(f->type)) {
            diag(d, &p, "scalar is %zu bytes in protobuf-c, %u in nanopb", pc_elem_size(f->type),
                 (unsigned)it.data_size);
            goto out;
        } else if (!pc_is_scalar(f->type) && !nano_is_callback(&it) &&
                   codec_nano_max_len(&it) == 0) {
            diag(d, &p, "nanopb bound is 0");
            goto out;
        }
        path_pop(&p, mark);
    }
    ok = true;
out:
    free(nano);
    return ok;
}
