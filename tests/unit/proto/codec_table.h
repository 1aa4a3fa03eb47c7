/* The list of every message and enum of proto/lianyaohu.proto, with the
 * protobuf-c descriptor (daemon side) and the nanopb descriptor (CLI side) of
 * each. test_codec_schema checks that this list matches the .proto file and
 * the descriptor graph, so a message added to the proto without a row here
 * fails the tests instead of going untested. */
#ifndef LYH_TEST_CODEC_TABLE_H
#define LYH_TEST_CODEC_TABLE_H

#include <stddef.h>

#include <pb.h>
#include <protobuf-c/protobuf-c.h>

struct codec_msg {
    const char *name;                       /* proto short name, e.g. "Request" */
    const ProtobufCMessageDescriptor *pc;   /* protobuf-c */
    const pb_msgdesc_t *nano;               /* nanopb */
    size_t nano_size;                       /* sizeof the nanopb struct */
    size_t nano_max_encoded;                /* lianyaohu_v1_<name>_size; 0 when nanopb
                                             * cannot bound it (callback fields) */
};

struct codec_enum {
    const char *name;
    const ProtobufCEnumDescriptor *pc;
    long nano_min, nano_max;                /* _lianyaohu_v1_<name>_MIN/_MAX */
};

extern const struct codec_msg codec_msgs[];
extern const size_t codec_n_msgs;
extern const struct codec_enum codec_enums[];
extern const size_t codec_n_enums;

/* Row lookups; NULL when the descriptor or name has no row. */
const struct codec_msg *codec_msg_by_pc(const ProtobufCMessageDescriptor *d);
const struct codec_msg *codec_msg_by_nano(const pb_msgdesc_t *d);
const struct codec_msg *codec_msg_by_name(const char *name);
const struct codec_enum *codec_enum_by_pc(const ProtobufCEnumDescriptor *d);
const struct codec_enum *codec_enum_by_name(const char *name);

#endif
