/* Frame reassembly. Owns the body buffer of the frame being read; never reads
 * or writes a socket. The length is checked against the limit before the body
 * is allocated, so a hostile length costs nothing. */
#include "common/frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void frame_reader_init(struct frame_reader *r, uint32_t max_len) {
    memset(r, 0, sizeof(*r));
    r->max_len = (max_len == 0 || max_len > LYH_MAX_FRAME_BYTES) ? LYH_MAX_FRAME_BYTES : max_len;
}

void frame_reader_done(struct frame_reader *r) {
    free(r->body);
    r->body = NULL;
    r->hdr_have = r->have = r->len = 0;
}

bool frame_reader_partial(const struct frame_reader *r) {
    return r->hdr_have > 0;
}

ssize_t frame_reader_feed(struct frame_reader *r, const uint8_t *p, size_t n, bool *ret_done) {
    size_t used = 0;

    *ret_done = false;
    if (r->hdr_have < LYH_FRAME_HEADER_BYTES) {
        if (r->hdr_have == 0 && n > 0)
            r->frame_start = r->offset;
        while (r->hdr_have < LYH_FRAME_HEADER_BYTES && used < n)
            r->hdr[r->hdr_have++] = p[used++];
        if (r->hdr_have < LYH_FRAME_HEADER_BYTES) {
            r->offset += used;
            return (ssize_t)used;
        }
        if (r->hdr[0] != LYH_FRAME_FLAGS_NONE)
            return -EPROTO;
        r->len = (uint32_t)r->hdr[1] << 24 | (uint32_t)r->hdr[2] << 16 | (uint32_t)r->hdr[3] << 8 |
                 (uint32_t)r->hdr[4];
        if (r->len > r->max_len)
            return -EMSGSIZE;
        r->have = 0;
        if (r->len > 0) {
            r->body = malloc(r->len);
            if (!r->body)
                return -ENOMEM;
        }
    }

    size_t want = r->len - r->have;
    size_t take = n - used < want ? n - used : want;
    if (take > 0) {
        memcpy(r->body + r->have, p + used, take);
        r->have += (uint32_t)take;
        used += take;
    }
    r->offset += used;
    if (r->have == r->len)
        *ret_done = true;
    return (ssize_t)used;
}

uint8_t *frame_reader_take(struct frame_reader *r, uint32_t *ret_len, uint64_t *ret_start,
                           uint64_t *ret_end) {
    uint8_t *b = r->body;

    *ret_len = r->len;
    if (ret_start)
        *ret_start = r->frame_start;
    if (ret_end)
        *ret_end = r->offset;
    r->body = NULL;
    r->hdr_have = r->have = r->len = 0;
    return b;
}

void frame_write_header(uint8_t hdr[LYH_FRAME_HEADER_BYTES], uint32_t len) {
    hdr[0] = LYH_FRAME_FLAGS_NONE;
    hdr[1] = (uint8_t)(len >> 24);
    hdr[2] = (uint8_t)(len >> 16);
    hdr[3] = (uint8_t)(len >> 8);
    hdr[4] = (uint8_t)len;
}
