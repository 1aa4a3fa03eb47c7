/* Generic reflection over both codecs, for the codec-agreement tests.
 *
 * The protobuf-c message descriptor drives everything; for each of its fields
 * the nanopb field with the same number is looked up with pb_field_iter_find.
 * codec_fill() writes one logical value into a protobuf-c message and a nanopb
 * struct at once, within the nanopb bounds read from the nanopb descriptor;
 * codec_cross_equal() compares a protobuf-c message with a nanopb struct field
 * by field. Neither uses the encoders, so the round trips built on them test
 * the encoders and decoders rather than themselves.
 *
 * Contract: functions returning bool return false and fill a struct
 * codec_diag with a path ("Request.run.env[1].name") and what differed. They
 * never abort; the cmocka test decides. Nothing here logs. */
#ifndef LYH_TEST_CODEC_REFLECT_H
#define LYH_TEST_CODEC_REFLECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <pb.h>
#include <protobuf-c/protobuf-c.h>

#include "codec_table.h"

/* Deepest nesting the filler descends to (the proto has no recursion; this
 * keeps a future recursive message finite). */
#define CODEC_MAX_DEPTH 8
/* Callback fields have no nanopb bound (only the frame bounds them); in
 * CODEC_MAX mode they get this many elements of this many bytes. */
#define CODEC_CB_MAX_COUNT 64
#define CODEC_CB_MAX_LEN 1024

struct codec_diag {
    char msg[1024];
};

/* Every allocation made for a generated protobuf-c message, freed at once
 * (generated messages are not owned by protobuf-c's allocator, so they are
 * not freed with protobuf_c_message_free_unpacked). */
struct codec_arena {
    void **ptrs;
    size_t n, cap;
};
void *codec_arena_alloc(struct codec_arena *a, size_t n); /* zeroed; aborts on OOM */
void codec_arena_free(struct codec_arena *a);             /* accepts a zeroed arena */

enum codec_mode {
    CODEC_SMALL,  /* every field set: short strings, 2-3 elements */
    CODEC_SPARSE, /* about half the fields set, chosen by hash */
    CODEC_MAX,    /* every field at its nanopb bound, extreme numbers */
};
const char *codec_mode_name(enum codec_mode m);

/* Number of oneof variants codec_fill() knows for a message: the largest
 * oneof's member count + 1 (the last variant leaves every oneof unset);
 * 1 for a message without oneofs. */
unsigned codec_variants(const ProtobufCMessageDescriptor *d);

/* Fill pc (initialised with protobuf_c_message_init) and nano (zeroed, size
 * t->nano_size) with the same deterministic value. Allocations for pc go to
 * the arena. */
bool codec_fill(const struct codec_msg *t, ProtobufCMessage *pc, void *nano, enum codec_mode mode,
                unsigned variant, struct codec_arena *a, struct codec_diag *d);

/* Compare field by field; also fails when pc kept unknown fields.
 *
 * nanopb callback fields (FT_CALLBACK in the .options file) hold a test-owned
 * list behind pb_callback_t.arg, installed by codec_fill() or by
 * codec_nano_prepare_decode(). A callback field with no list (nanopb wiped it:
 * it memsets a oneof member's struct when that member is decoded, callbacks
 * included) is counted in *ret_skipped when ret_skipped is not NULL, and is an
 * error otherwise. */
bool codec_cross_equal(const struct codec_msg *t, const ProtobufCMessage *pc, const void *nano,
                       size_t *ret_skipped, struct codec_diag *d);

/* Before pb_decode: give every callback field reachable through singular and
 * repeated static submessages a decode callback with an empty list (arena
 * owned). Callback fields under a oneof cannot be prepared (see above). */
void codec_nano_prepare_decode(const struct codec_msg *t, void *nano, struct codec_arena *a);
/* After pb_decode, before pb_encode: switch every installed callback list from
 * decoding to encoding (pb_callback_t holds one function pointer). */
void codec_nano_callbacks_to_encode(const struct codec_msg *t, void *nano);

/* Do the two generators agree on this message's schema: the same field
 * numbers, matching wire types and labels, static (non-callback) nanopb
 * storage, scalar sizes, submessage types, and packing of repeated scalars? */
bool codec_schema_check(const struct codec_msg *t, struct codec_diag *d);

/* protobuf-c pack into a malloc'd buffer (never NULL, even for 0 bytes). */
uint8_t *codec_pc_pack(const ProtobufCMessage *m, size_t *ret_len);
/* nanopb encode into a malloc'd buffer; false and d set on error. */
bool codec_nano_encode(const struct codec_msg *t, const void *nano, uint8_t **ret_buf,
                       size_t *ret_len, struct codec_diag *d);
/* nanopb decode of the whole buffer into nano (size t->nano_size); false with
 * nanopb's error text in d on failure. With an arena, callback fields are
 * prepared first (codec_nano_prepare_decode). */
bool codec_nano_decode(const struct codec_msg *t, const uint8_t *buf, size_t len, void *nano,
                       struct codec_arena *a, struct codec_diag *d);
/* protobuf-c unpack with the default allocator (free with
 * protobuf_c_message_free_unpacked(m, NULL)); NULL on failure. */
ProtobufCMessage *codec_pc_unpack(const struct codec_msg *t, const uint8_t *buf, size_t len);

/* Compare two encodings; on difference describe the first differing byte. */
bool codec_bytes_equal(const char *what, const uint8_t *a, size_t alen, const uint8_t *b,
                       size_t blen, struct codec_diag *d);

/* The nanopb field with this number, or false. */
bool codec_nano_field(const pb_msgdesc_t *desc, void *msg, uint32_t tag, pb_field_iter_t *it);
/* Largest string length / bytes length a static nanopb field accepts when
 * decoding (string: data_size - 1 for the NUL; bytes: data_size minus the size
 * header, which may include tail padding). 0 for callback fields. */
size_t codec_nano_max_len(const pb_field_iter_t *it);

#endif
