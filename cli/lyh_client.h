/* The LianYaoHu client library: connect to lyhd, make calls, read streams.
 * nanopb-based, no allocation while decoding. Used by `lyh` and usable by any
 * scripted C client (one header, link liblyhclient.a + nanopb).
 *
 * Contract: functions return 0 or -errno. All calls block (with the timeouts
 * given). One struct lyh_client per connection; not thread-safe. Requests and
 * responses are the nanopb structs from lianyaohu.pb.h; they are large
 * (static bounds), so allocate them on the heap. */
#ifndef LYH_CLIENT_H
#define LYH_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lianyaohu.pb.h"

struct lyh_client;

/* The socket to use: explicit path if not NULL, else $LYH_SOCKET, else the default. */
const char *lyh_client_socket_path(const char *explicit_path);

/* Connect. -ENOENT / -ECONNREFUSED mean no daemon is listening there. */
int lyh_client_connect(const char *path, struct lyh_client **ret);
void lyh_client_close(struct lyh_client *c); /* accepts NULL */
int lyh_client_fd(const struct lyh_client *c);

/* Send one request. Fills call_id (fresh, unless the caller set one),
 * protocol_version and fd_count; fds (may be NULL) travel with SCM_RIGHTS in
 * the same sendmsg as the frame. Returns the call id through ret_call_id. */
int lyh_client_send(struct lyh_client *c, lianyaohu_v1_Request *req, const int *fds, unsigned n_fds,
                    uint64_t *ret_call_id);

/* Read the next response of any call. timeout_ms < 0 waits forever.
 * -ETIMEDOUT, -ECONNRESET (daemon closed), -EBADMSG (undecodable). */
int lyh_client_recv(struct lyh_client *c, lianyaohu_v1_Response *resp, int timeout_ms);

/* True when bytes already read from the socket wait in the client's buffer:
 * the next lyh_client_recv() may return without the socket becoming readable,
 * so callers that poll the fd must check this first. */
bool lyh_client_buffered(const struct lyh_client *c);

/* Send and wait for the final response of that call (unary calls). Responses
 * of other calls that arrive meanwhile are dropped. A connection-level refusal
 * (call id 0, e.g. too many connections) is returned as that response. */
int lyh_client_call(struct lyh_client *c, lianyaohu_v1_Request *req, lianyaohu_v1_Response *resp,
                    int timeout_ms);

/* Decode one frame body (no header) into resp. Pure; for tests and fuzzing. */
int lyh_client_decode_response(const uint8_t *buf, size_t len, lianyaohu_v1_Response *resp);
/* Encode a request into buf (header included); returns the frame length
 * through ret_len. Pure. */
int lyh_client_encode_request(const lianyaohu_v1_Request *req, uint8_t *buf, size_t buflen,
                              size_t *ret_len);

/* Name of a status code ("OK", "INVALID_ARGUMENT", ...). */
const char *lyh_code_name(int code);

#endif
