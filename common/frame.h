/* Incremental frame reader and header writer (1 flag byte + 4-byte big-endian
 * length + body). Pure: no I/O, no logging. Used by the daemon's connection
 * code, the client library and the fuzz harness. */
#ifndef LYH_FRAME_H
#define LYH_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/lyh_limits.h"

struct frame_reader {
    uint8_t hdr[LYH_FRAME_HEADER_BYTES];
    uint32_t hdr_have;
    uint32_t len;        /* body length, valid once hdr_have == 5 */
    uint32_t have;       /* body bytes received */
    uint8_t *body;       /* owned; allocated once the header is valid */
    uint32_t max_len;    /* limit, <= LYH_MAX_FRAME_BYTES */
    uint64_t offset;     /* stream bytes consumed so far */
    uint64_t frame_start;/* stream offset of the current frame's flag byte */
};

/* Initialise with a body limit (0 = LYH_MAX_FRAME_BYTES). */
void frame_reader_init(struct frame_reader *r, uint32_t max_len);
/* Free the partial body, if any. Accepts a zeroed or half-used reader. */
void frame_reader_done(struct frame_reader *r);
/* True while a frame has started but is not complete. */
bool frame_reader_partial(const struct frame_reader *r);

/* Feed up to n bytes. Consumes bytes up to the end of one complete frame and
 * stops there. Returns the number of bytes consumed (>= 0) or:
 *   -EPROTO   flag byte not 0
 *   -EMSGSIZE length above the limit (refused before allocating)
 *   -ENOMEM
 * After an error the reader must not be fed again. When a frame is complete,
 * *ret_done is set to true; take the body with frame_reader_take(). */
ssize_t frame_reader_feed(struct frame_reader *r, const uint8_t *p, size_t n, bool *ret_done);

/* Take the completed body (caller frees; NULL when len == 0) and its length,
 * and reset for the next frame. Also returns the stream offsets [start, end)
 * of the frame, used to match SCM_RIGHTS fds to the frame they came with. */
uint8_t *frame_reader_take(struct frame_reader *r, uint32_t *ret_len, uint64_t *ret_start,
                           uint64_t *ret_end);

/* Write the 5-byte header for a body of len bytes (len <= LYH_MAX_FRAME_BYTES). */
void frame_write_header(uint8_t hdr[LYH_FRAME_HEADER_BYTES], uint32_t len);

#endif
