/* Request decoding and response encoding for the daemon (protobuf-c).
 * Pure: no I/O, no logging; shared by the connection code and the fuzz harness. */
#ifndef LYHD_WIRE_H
#define LYHD_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lianyaohu.pb-c.h"

typedef Lianyaohu__V1__Request LyhRequest;
typedef Lianyaohu__V1__Response LyhResponse;

/* Result of checking a decoded request. */
enum wire_verdict {
    WIRE_OK = 0,
    WIRE_UNKNOWN_METHOD,  /* a method field number this build does not know */
    WIRE_UNKNOWN_FIELD,   /* any other field this build does not know */
    WIRE_NO_METHOD,       /* no method set at all */
    WIRE_NUL_IN_STRING,   /* a string field carries a NUL byte */
    WIRE_TWO_METHODS,     /* more than one method field (protobuf would keep the last) */
};

struct wire_check {
    enum wire_verdict verdict;
    uint32_t field;       /* offending field number */
    uint32_t first;       /* WIRE_TWO_METHODS: the method field that came first */
    const char *message;  /* full name of the message that carried it (static) */
};

/* Decode one frame body. Returns 0 and *ret (free with wire_request_free), or
 * -EBADMSG when the bytes are not a Request (the caller closes the connection).
 * protobuf-c consumes the whole buffer or fails. */
int wire_request_decode(const uint8_t *buf, size_t len, LyhRequest **ret);
void wire_request_free(LyhRequest *req); /* accepts NULL */

/* Scan the encoded request for string fields holding a NUL byte. C strings
 * would silently cut them short (a path "a\0b" would read as "a"), so such a
 * request is refused rather than half-read. Sets *ret only when one is found
 * (verdict WIRE_NUL_IN_STRING); returns true then. The bytes must already
 * have decoded as a Request. */
bool wire_find_nul_string(const uint8_t *buf, size_t len, struct wire_check *ret);

/* Scan the encoded envelope for a second method field (the same one twice,
 * or two different ones). protobuf keeps the last of a oneof, so a client
 * could believe it asked for one thing while lyhd does another: such a
 * request is refused. Sets *ret (WIRE_TWO_METHODS) and returns true when
 * found. The bytes must already have decoded as a Request. */
bool wire_find_second_method(const uint8_t *buf, size_t len, struct wire_check *ret);

/* Walk the whole decoded request (depth-bounded) and report the first field the
 * daemon does not know. Unknown field numbers in the method range of the
 * envelope, with no method set, mean an unknown method. */
void wire_request_check(const LyhRequest *req, struct wire_check *ret);

/* The checks of a request's envelope that need nothing but its bytes and
 * how many fds came with it, in the order of protocol.md's table: fds (too
 * many: overflow, or not what fd_count says), an unknown method or field, no
 * method, two methods, a NUL in a string, the protocol version, a call id of
 * 0. The bytes must have decoded as req. 0 when all pass; else the status
 * code to answer, the text in msg, and *ret_close when the answer carries
 * call id 0 and the connection closes. Both lyhd processes run it: the
 * protocol process on what a client sent, the parent again on what the
 * protocol process sent. */
int wire_envelope_check(const LyhRequest *req, const uint8_t *buf, size_t len, unsigned n_fds,
                        bool fds_overflow, unsigned max_fds, char *msg, size_t msglen,
                        bool *ret_close);

/* Name of a method case ("capabilities", ...), or NULL when unknown. */
const char *wire_method_name(uint32_t method_case);

/* Encode a response into a newly allocated buffer that begins with the 5-byte
 * frame header. Returns 0 or -ENOMEM / -EMSGSIZE (the packed response would
 * exceed LYH_MAX_FRAME_BYTES). */
int wire_response_frame(const LyhResponse *resp, uint8_t **ret_buf, size_t *ret_len);
/* The same into a caller's buffer (no allocation): -EMSGSIZE when it does not
 * fit in cap bytes. For answers that must go out when memory is short. */
int wire_response_frame_into(const LyhResponse *resp, uint8_t *buf, size_t cap, size_t *ret_len);

#endif
