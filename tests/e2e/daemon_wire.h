/* Wire side of the lyhd end-to-end tests: raw Unix-socket connections and
 * hand-built protobuf, so tests can send what no well-behaved client would
 * (partial frames, bad flag bytes, unknown fields, fds that do not match).
 * Well-behaved calls go through the real client library (cli/lyh_client.h).
 *
 * Contract: 0 or -errno; every read is bounded by a timeout; every fd is
 * CLOEXEC; sends use MSG_NOSIGNAL. Nothing here calls cmocka. */
#ifndef DAEMON_WIRE_H
#define DAEMON_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lianyaohu.pb.h"

#define DAEMON_IO_TIMEOUT_MS 5000

/* A growable byte buffer for hand-encoded protobuf. Owns p. */
struct dw_buf {
    uint8_t *p;
    size_t len, cap;
};
void dw_buf_free(struct dw_buf *b);
void dw_bytes(struct dw_buf *b, const void *p, size_t n);
void dw_varint(struct dw_buf *b, uint64_t v);
/* Wire types: 0 varint, 2 length-delimited. */
void dw_tag(struct dw_buf *b, uint32_t field, unsigned wire_type);
void dw_field_varint(struct dw_buf *b, uint32_t field, uint64_t v);
void dw_field_bytes(struct dw_buf *b, uint32_t field, const void *p, size_t n);
/* Size of v as a varint. */
size_t dw_varint_len(uint64_t v);

/* A Request envelope. Zero fields are left out (proto3); method is the field
 * number of the method (10 = capabilities ...), sent as an empty message
 * (or with the given inner bytes). */
struct dw_req {
    uint64_t call_id;
    uint32_t version;
    uint32_t fd_count;
    uint32_t method;
    const uint8_t *inner; /* body of the method message, may be NULL */
    size_t inner_len;
};
void dw_request(struct dw_buf *b, const struct dw_req *r);
/* Frame header (flag 0, big-endian length) then body. */
void dw_frame(struct dw_buf *out, const uint8_t *body, size_t len);
/* A framed request with protocol version 1 and an empty method message. */
void dw_simple_frame(struct dw_buf *out, uint64_t call_id, uint32_t method);

/* Blocking connect (CLOEXEC). Returns the fd or -errno. */
int dw_connect(const char *sock);
int dw_set_nonblock(int fd);
int dw_send_all(int fd, const void *buf, size_t len);
/* One sendmsg carrying buf and n_fds fds (SCM_RIGHTS). Short writes are an
 * error (-EMSGSIZE): tests keep these small. */
int dw_send_fds(int fd, const void *buf, size_t len, const int *fds, unsigned n_fds);

/* Read one frame (body malloc'd, NULL for an empty one). -ENODATA: clean EOF;
 * -ECONNRESET; -ETIMEDOUT; -EPROTO: non-zero flag byte. */
int dw_recv_frame(int fd, int timeout_ms, uint8_t **ret_body, uint32_t *ret_len);
/* Read and decode one Response (nanopb). */
int dw_recv_response(int fd, int timeout_ms, lianyaohu_v1_Response *resp);
/* Wait until the peer closes: 0 on EOF (or ECONNRESET when allow_reset),
 * -ETIMEDOUT, -EPROTO when data arrives instead. */
int dw_wait_closed(int fd, int timeout_ms, bool allow_reset);
/* Has the peer closed or sent something within timeout_ms (poll only)? */
bool dw_readable(int fd, int timeout_ms);

/* Connect, send a simple request, read one response, close. */
int dw_call_once(const char *sock, uint64_t call_id, uint32_t method, lianyaohu_v1_Response *resp);

uint64_t dw_mono_ms(void);
void dw_sleep_ms(unsigned ms);

#endif
