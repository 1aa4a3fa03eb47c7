/* Turns frame bodies into protobuf-c Requests and Responses into frames.
 *
 * Why unknown fields are refused: protobuf's rule is to skip fields a decoder
 * does not know. For a sandbox that rule is dangerous: a newer client might
 * send a restriction (say, a deny rule in a field added later) and an older
 * daemon would silently run the agent without it. protobuf-c keeps unknown
 * fields on the message, so we walk the decoded tree and refuse the request
 * if any are present. */
#include "daemon/wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/frame.h"
#include "common/lyh_limits.h"

/* Nesting in our proto is shallow (Request > RunRequest > DestRule); anything
 * deeper than this is not ours. protobuf-c itself bounds recursion too. */
#define WIRE_MAX_DEPTH 16

int wire_request_decode(const uint8_t *buf, size_t len, LyhRequest **ret) {
    LyhRequest *req = lianyaohu__v1__request__unpack(NULL, len, buf);
    if (!req)
        return -EBADMSG;
    *ret = req;
    return 0;
}

void wire_request_free(LyhRequest *req) {
    if (req)
        lianyaohu__v1__request__free_unpacked(req, NULL);
}

static int find_unknown(const ProtobufCMessage *m, unsigned depth, struct wire_check *out) {
    const ProtobufCMessageDescriptor *d = m->descriptor;

    if (depth > WIRE_MAX_DEPTH) {
        out->verdict = WIRE_UNKNOWN_FIELD;
        out->field = 0;
        out->message = d->name;
        return 1;
    }
    if (m->n_unknown_fields > 0) {
        out->verdict = WIRE_UNKNOWN_FIELD;
        out->field = m->unknown_fields[0].tag;
        out->message = d->name;
        return 1;
    }
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        const char *base = (const char *)m;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            ProtobufCMessage *const *arr = *(ProtobufCMessage *const *const *)(base + f->offset);
            for (size_t j = 0; j < n; j++)
                if (arr[j] && find_unknown(arr[j], depth + 1, out))
                    return 1;
        } else {
            if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
                *(const uint32_t *)(base + f->quantifier_offset) != f->id)
                continue;
            const ProtobufCMessage *sub = *(ProtobufCMessage *const *)(base + f->offset);
            if (sub && find_unknown(sub, depth + 1, out))
                return 1;
        }
    }
    return 0;
}

/* A minimal protobuf wire walker, guided by the descriptor: it only needs to
 * find length-delimited fields and tell strings from submessages. The input
 * already decoded with protobuf-c, so malformed encodings just end the walk. */
static bool read_varint(const uint8_t *p, size_t len, size_t *off, uint64_t *ret) {
    uint64_t v = 0;

    for (unsigned shift = 0; shift < 64 && *off < len; shift += 7) {
        uint8_t b = p[(*off)++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *ret = v;
            return true;
        }
    }
    return false;
}

/* One field of an encoded message: its number, wire type and, for a
 * length-delimited one, its payload. False at the end or on bytes that do
 * not parse (the input already decoded, so that only ends the walk). */
struct wire_field {
    uint32_t number;
    unsigned type;
    const uint8_t *payload; /* wire type 2 only */
    size_t len;
};

static bool next_field(const uint8_t *p, size_t len, size_t *off, struct wire_field *f) {
    uint64_t key, n;

    if (*off >= len || !read_varint(p, len, off, &key))
        return false;
    f->number = (uint32_t)(key >> 3);
    f->type = (unsigned)(key & 7);
    f->payload = NULL;
    f->len = 0;
    switch (f->type) {
    case 0:
        return read_varint(p, len, off, &n);
    case 1:
        if (len - *off < 8)
            return false;
        *off += 8;
        return true;
    case 5:
        if (len - *off < 4)
            return false;
        *off += 4;
        return true;
    case 2:
        if (!read_varint(p, len, off, &n) || n > len - *off)
            return false;
        f->payload = p + *off;
        f->len = (size_t)n;
        *off += (size_t)n;
        return true;
    default:
        return false;
    }
}

static bool scan_nul(const uint8_t *p, size_t len, const ProtobufCMessageDescriptor *d,
                     unsigned depth, struct wire_check *out) {
    struct wire_field wf;
    size_t off = 0;

    if (depth > WIRE_MAX_DEPTH)
        return false;
    while (next_field(p, len, &off, &wf)) {
        if (wf.type != 2)
            continue;
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, wf.number);
        if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(wf.payload, 0, wf.len)) {
            out->verdict = WIRE_NUL_IN_STRING;
            out->field = f->id;
            out->message = d->name;
            return true;
        }
        if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
            scan_nul(wf.payload, wf.len, f->descriptor, depth + 1, out))
            return true;
    }
    return false;
}

bool wire_find_nul_string(const uint8_t *buf, size_t len, struct wire_check *ret) {
    return scan_nul(buf, len, &lianyaohu__v1__request__descriptor, 0, ret);
}

bool wire_find_second_method(const uint8_t *buf, size_t len, struct wire_check *ret) {
    struct wire_field wf;
    size_t off = 0;
    uint32_t first = 0;

    while (next_field(buf, len, &off, &wf)) {
        if (wf.number < LYH_METHOD_FIELD_MIN || wf.number > LYH_METHOD_FIELD_MAX)
            continue;
        if (first) {
            ret->verdict = WIRE_TWO_METHODS;
            ret->field = wf.number;
            ret->first = first;
            ret->message = lianyaohu__v1__request__descriptor.name;
            return true;
        }
        first = wf.number;
    }
    return false;
}

void wire_request_check(const LyhRequest *req, struct wire_check *ret) {
    ret->verdict = WIRE_OK;
    ret->field = 0;
    ret->message = NULL;

    /* An unknown method shows up as an unknown field of the envelope in the
     * method range while no known method is set. */
    if (req->method_case == LIANYAOHU__V1__REQUEST__METHOD__NOT_SET) {
        for (size_t i = 0; i < req->base.n_unknown_fields; i++) {
            uint32_t tag = req->base.unknown_fields[i].tag;
            if (tag >= LYH_METHOD_FIELD_MIN && tag <= LYH_METHOD_FIELD_MAX) {
                ret->verdict = WIRE_UNKNOWN_METHOD;
                ret->field = tag;
                ret->message = req->base.descriptor->name;
                return;
            }
        }
    }
    if (find_unknown(&req->base, 0, ret))
        return;
    if (req->method_case == LIANYAOHU__V1__REQUEST__METHOD__NOT_SET)
        ret->verdict = WIRE_NO_METHOD;
}

const char *wire_method_name(uint32_t method_case) {
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&lianyaohu__v1__request__descriptor, method_case);
    if (!f || method_case < LYH_METHOD_FIELD_MIN)
        return NULL;
    return f->name;
}

int wire_response_frame(const LyhResponse *resp, uint8_t **ret_buf, size_t *ret_len) {
    size_t n = lianyaohu__v1__response__get_packed_size(resp);
    if (n > LYH_MAX_FRAME_BYTES)
        return -EMSGSIZE;
    uint8_t *buf = malloc(LYH_FRAME_HEADER_BYTES + n);
    if (!buf)
        return -ENOMEM;
    frame_write_header(buf, (uint32_t)n);
    lianyaohu__v1__response__pack(resp, buf + LYH_FRAME_HEADER_BYTES);
    *ret_buf = buf;
    *ret_len = LYH_FRAME_HEADER_BYTES + n;
    return 0;
}

int wire_response_frame_into(const LyhResponse *resp, uint8_t *buf, size_t cap, size_t *ret_len) {
    size_t n = lianyaohu__v1__response__get_packed_size(resp);

    if (n > LYH_MAX_FRAME_BYTES || cap < LYH_FRAME_HEADER_BYTES || n > cap - LYH_FRAME_HEADER_BYTES)
        return -EMSGSIZE;
    frame_write_header(buf, (uint32_t)n);
    lianyaohu__v1__response__pack(resp, buf + LYH_FRAME_HEADER_BYTES);
    *ret_len = LYH_FRAME_HEADER_BYTES + n;
    return 0;
}

int wire_envelope_check(const LyhRequest *req, const uint8_t *buf, size_t len, unsigned n_fds,
                        bool fds_overflow, unsigned max_fds, char *msg, size_t msglen,
                        bool *ret_close) {
    struct wire_check chk;

    *ret_close = false;
    if (fds_overflow) {
        snprintf(msg, msglen,
                 "too many file descriptors with one message (limit %u); they were closed",
                 max_fds);
        return LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED;
    }
    if (req->fd_count != n_fds) {
        snprintf(msg, msglen,
                 "request says it carries %u file descriptors but %u arrived with it; send them "
                 "with the sendmsg that carries the frame",
                 req->fd_count, n_fds);
        return LIANYAOHU__V1__CODE__INVALID_ARGUMENT;
    }
    wire_request_check(req, &chk);
    switch (chk.verdict) {
    case WIRE_OK:
    case WIRE_NUL_IN_STRING:
    case WIRE_TWO_METHODS:
        break;
    case WIRE_UNKNOWN_METHOD:
        snprintf(msg, msglen, "method field %u is not known to lyhd %s (protocol %u)", chk.field,
                 LYH_VERSION, LYH_PROTOCOL_VERSION);
        return LIANYAOHU__V1__CODE__UNIMPLEMENTED;
    case WIRE_UNKNOWN_FIELD:
        snprintf(msg, msglen,
                 "field %u of %s is not known to lyhd %s (protocol %u); refusing rather than "
                 "ignoring it: upgrade lyhd or drop the option",
                 chk.field, chk.message, LYH_VERSION, LYH_PROTOCOL_VERSION);
        return LIANYAOHU__V1__CODE__FAILED_PRECONDITION;
    case WIRE_NO_METHOD:
        snprintf(msg, msglen, "request names no method");
        return LIANYAOHU__V1__CODE__INVALID_ARGUMENT;
    }
    if (wire_find_second_method(buf, len, &chk)) {
        const char *a = wire_method_name(chk.first), *b = wire_method_name(chk.field);
        snprintf(msg, msglen,
                 "request sets more than one method (field %u %s, then field %u %s); set "
                 "exactly one",
                 chk.first, a ? a : "(unknown)", chk.field, b ? b : "(unknown)");
        return LIANYAOHU__V1__CODE__INVALID_ARGUMENT;
    }
    if (wire_find_nul_string(buf, len, &chk)) {
        snprintf(msg, msglen, "field %u of %s contains a NUL byte; strings must not", chk.field,
                 chk.message);
        return LIANYAOHU__V1__CODE__INVALID_ARGUMENT;
    }
    if (req->protocol_version != LYH_PROTOCOL_VERSION) {
        snprintf(msg, msglen, "client speaks protocol %u, lyhd %s speaks protocol %u",
                 req->protocol_version, LYH_VERSION, LYH_PROTOCOL_VERSION);
        return LIANYAOHU__V1__CODE__FAILED_PRECONDITION;
    }
    /* Call ids are how responses find their call: a missing one is a protocol
     * error, answered at the connection level (a reused one is the parent's
     * to see: it knows the calls in flight). */
    if (req->call_id == 0) {
        snprintf(msg, msglen, "call_id must be non-zero");
        *ret_close = true;
        return LIANYAOHU__V1__CODE__INVALID_ARGUMENT;
    }
    return 0;
}
