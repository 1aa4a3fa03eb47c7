/* Client side of the wire protocol. Owns the connection socket and a read
 * buffer; encodes with nanopb into a frame and sends it (with any fds) in a
 * single sendmsg, which is what the daemon relies on to match fds to frames. */
#include "cli/lyh_client.h"

#include <errno.h>
#include <poll.h>
#include <pb_decode.h>
#include <pb_encode.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/frame.h"
#include "common/lyh_limits.h"
#include "common/macros.h"

/* Requests carry callback fields (argv, env) and are bounded by the frame
 * buffer at encode time; responses are fully static and must fit a frame. */
_Static_assert(lianyaohu_v1_Response_size <= LYH_MAX_FRAME_BYTES,
               "the largest nanopb Response must fit one frame");

#define CLIENT_IN_BYTES (64u * 1024u)

struct lyh_client {
    int fd;
    uint64_t next_call_id;
    struct frame_reader reader;
    uint8_t *in; /* CLIENT_IN_BYTES, not zeroed: a calloc'd 64 KiB cost 16 page faults a call */
    size_t in_pos, in_len;
    uint8_t *out; /* one frame, LYH_MAX_FRAME_BYTES + header */
};

const char *lyh_client_socket_path(const char *explicit_path) {
    const char *env;

    if (explicit_path && explicit_path[0])
        return explicit_path;
    env = getenv(LYH_SOCKET_ENV);
    if (env && env[0])
        return env;
    return LYH_DEFAULT_SOCKET;
}

int lyh_client_connect(const char *path, struct lyh_client **ret) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct lyh_client *c;

    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->out = malloc(LYH_FRAME_HEADER_BYTES + LYH_MAX_FRAME_BYTES);
    c->in = malloc(CLIENT_IN_BYTES);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (!c->out || !c->in || c->fd < 0) {
        int r = c->out && c->in ? -errno : -ENOMEM;
        lyh_client_close(c);
        return r;
    }
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int r = -errno;
        lyh_client_close(c);
        return r;
    }
    frame_reader_init(&c->reader, LYH_MAX_FRAME_BYTES);
    c->next_call_id = 1;
    *ret = c;
    return 0;
}

void lyh_client_close(struct lyh_client *c) {
    if (!c)
        return;
    CLOSE_FD(c->fd);
    frame_reader_done(&c->reader);
    free(c->out);
    free(c->in);
    free(c);
}

int lyh_client_fd(const struct lyh_client *c) { return c->fd; }

bool lyh_client_buffered(const struct lyh_client *c) { return c->in_pos < c->in_len; }

int lyh_client_encode_request(const lianyaohu_v1_Request *req, uint8_t *buf, size_t buflen,
                              size_t *ret_len) {
    pb_ostream_t os;

    if (buflen < LYH_FRAME_HEADER_BYTES)
        return -ENOBUFS;
    os = pb_ostream_from_buffer(buf + LYH_FRAME_HEADER_BYTES, buflen - LYH_FRAME_HEADER_BYTES);
    if (!pb_encode(&os, lianyaohu_v1_Request_fields, req))
        return -EMSGSIZE;
    if (os.bytes_written > LYH_MAX_FRAME_BYTES)
        return -EMSGSIZE;
    frame_write_header(buf, (uint32_t)os.bytes_written);
    *ret_len = LYH_FRAME_HEADER_BYTES + os.bytes_written;
    return 0;
}

int lyh_client_send(struct lyh_client *c, lianyaohu_v1_Request *req, const int *fds, unsigned n_fds,
                    uint64_t *ret_call_id) {
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * LYH_MAX_FDS_PER_MESSAGE)];
    } ctl;
    size_t len = 0, off = 0;
    int r;

    if (n_fds > LYH_MAX_FDS_PER_MESSAGE)
        return -E2BIG;
    if (req->call_id == 0)
        req->call_id = c->next_call_id++;
    req->protocol_version = LYH_PROTOCOL_VERSION;
    req->fd_count = n_fds;
    r = lyh_client_encode_request(req, c->out, LYH_FRAME_HEADER_BYTES + LYH_MAX_FRAME_BYTES, &len);
    if (r < 0)
        return r;

    while (off < len) {
        struct iovec iov = {.iov_base = c->out + off, .iov_len = len - off};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        if (off == 0 && n_fds > 0) {
            memset(&ctl, 0, sizeof(ctl));
            mh.msg_control = ctl.buf;
            mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
            struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
            cm->cmsg_level = SOL_SOCKET;
            cm->cmsg_type = SCM_RIGHTS;
            cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
            memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
        }
        ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        off += (size_t)n;
    }
    if (ret_call_id)
        *ret_call_id = req->call_id;
    return 0;
}

int lyh_client_decode_response(const uint8_t *buf, size_t len, lianyaohu_v1_Response *resp) {
    pb_istream_t is = pb_istream_from_buffer(buf, len);

    if (!pb_decode(&is, lianyaohu_v1_Response_fields, resp))
        return -EBADMSG;
    return 0;
}

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int lyh_client_recv(struct lyh_client *c, lianyaohu_v1_Response *resp, int timeout_ms) {
    int64_t deadline = timeout_ms >= 0 ? mono_ms() + timeout_ms : -1;

    for (;;) {
        while (c->in_pos < c->in_len) {
            bool done = false;
            ssize_t used =
                frame_reader_feed(&c->reader, c->in + c->in_pos, c->in_len - c->in_pos, &done);
            if (used < 0)
                return -EBADMSG;
            c->in_pos += (size_t)used;
            if (done) {
                uint32_t len;
                _cleanup_free_ uint8_t *body = frame_reader_take(&c->reader, &len, NULL, NULL);
                return lyh_client_decode_response(body, len, resp);
            }
        }
        c->in_pos = c->in_len = 0;

        int wait = -1;
        if (deadline >= 0) {
            int64_t left = deadline - mono_ms();
            if (left <= 0)
                return -ETIMEDOUT;
            wait = (int)left;
        }
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int pr = poll(&p, 1, wait);
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (pr == 0)
            return -ETIMEDOUT;
        ssize_t n = read(c->fd, c->in, CLIENT_IN_BYTES);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -errno;
        }
        if (n == 0)
            return -ECONNRESET;
        c->in_len = (size_t)n;
    }
}

int lyh_client_call(struct lyh_client *c, lianyaohu_v1_Request *req, lianyaohu_v1_Response *resp,
                    int timeout_ms) {
    uint64_t id;
    int r = lyh_client_send(c, req, NULL, 0, &id);

    if (r < 0)
        return r;
    for (;;) {
        memset(resp, 0, sizeof(*resp));
        r = lyh_client_recv(c, resp, timeout_ms);
        if (r < 0)
            return r;
        if (resp->call_id == 0 || (resp->call_id == id && resp->end_of_stream))
            return 0;
    }
}

const char *lyh_code_name(int code) {
    static const char *const names[] = {
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
        "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
        "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
        "UNAUTHENTICATED",
    };
    if (code < 0 || (size_t)code >= ARRAY_SIZE(names))
        return "UNKNOWN_CODE";
    return names[code];
}
