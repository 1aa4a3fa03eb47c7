/* Raw connections and hand-built frames for the e2e tests. Owns nothing
 * beyond the buffers it hands back. Deliberately independent of the daemon's
 * own encoder (protobuf-c) and of the client library's framing, so a bug there
 * cannot hide a bug in what the daemon accepts. */
#include "tests/e2e/daemon_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli/lyh_client.h"
#include "common/lyh_limits.h"

void dw_buf_free(struct dw_buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

void dw_bytes(struct dw_buf *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t ncap = b->cap ? b->cap : 64;
        while (ncap < b->len + n)
            ncap *= 2;
        uint8_t *np = realloc(b->p, ncap);
        if (!np)
            abort(); /* a test without memory cannot say anything useful */
        b->p = np;
        b->cap = ncap;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}

size_t dw_varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

void dw_varint(struct dw_buf *b, uint64_t v) {
    uint8_t tmp[10];
    size_t n = 0;

    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    dw_bytes(b, tmp, n);
}

void dw_tag(struct dw_buf *b, uint32_t field, unsigned wire_type) {
    dw_varint(b, (uint64_t)field << 3 | wire_type);
}

void dw_field_varint(struct dw_buf *b, uint32_t field, uint64_t v) {
    dw_tag(b, field, 0);
    dw_varint(b, v);
}

void dw_field_bytes(struct dw_buf *b, uint32_t field, const void *p, size_t n) {
    dw_tag(b, field, 2);
    dw_varint(b, n);
    dw_bytes(b, p, n);
}

void dw_request(struct dw_buf *b, const struct dw_req *r) {
    if (r->call_id)
        dw_field_varint(b, 1, r->call_id);
    if (r->version)
        dw_field_varint(b, 2, r->version);
    if (r->fd_count)
        dw_field_varint(b, 4, r->fd_count);
    if (r->method)
        dw_field_bytes(b, r->method, r->inner, r->inner_len);
}

void dw_frame(struct dw_buf *out, const uint8_t *body, size_t len) {
    uint8_t hdr[LYH_FRAME_HEADER_BYTES] = {
        LYH_FRAME_FLAGS_NONE,
        (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len,
    };
    dw_bytes(out, hdr, sizeof(hdr));
    dw_bytes(out, body, len);
}

void dw_simple_frame(struct dw_buf *out, uint64_t call_id, uint32_t method) {
    struct dw_buf body = {0};
    struct dw_req r = {.call_id = call_id, .version = LYH_PROTOCOL_VERSION, .method = method};

    dw_request(&body, &r);
    dw_frame(out, body.p, body.len);
    dw_buf_free(&body);
}

int dw_connect(const char *sock) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;

    if (strlen(sock) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

int dw_set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    return 0;
}

int dw_send_all(int fd, const void *buf, size_t len) {
    const uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                if (poll(&pfd, 1, DAEMON_IO_TIMEOUT_MS) <= 0)
                    return -ETIMEDOUT;
                continue;
            }
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int dw_send_fds(int fd, const void *buf, size_t len, const int *fds, unsigned n_fds) {
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * 32)];
    } ctl;
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n;

    if (n_fds > 32)
        return -E2BIG;
    if (n_fds > 0) {
        memset(&ctl, 0, sizeof(ctl));
        mh.msg_control = ctl.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * n_fds);
    }
    do
        n = sendmsg(fd, &mh, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -EMSGSIZE;
}

uint64_t dw_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void dw_sleep_ms(unsigned ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Read exactly n bytes before the deadline. -ENODATA on EOF before any byte
 * when at_boundary, else EOF is -ECONNRESET-like truncation (-EPIPE). */
static int read_exact(int fd, uint8_t *p, size_t n, uint64_t deadline, bool at_boundary) {
    size_t got = 0;

    while (got < n) {
        uint64_t now = dw_mono_ms();
        if (now >= deadline)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)(deadline - now));
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (pr == 0)
            return -ETIMEDOUT;
        ssize_t r = recv(fd, p + got, n - got, MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -errno;
        }
        if (r == 0)
            return (at_boundary && got == 0) ? -ENODATA : -EPIPE;
        got += (size_t)r;
    }
    return 0;
}

int dw_recv_frame(int fd, int timeout_ms, uint8_t **ret_body, uint32_t *ret_len) {
    uint64_t deadline = dw_mono_ms() + (uint64_t)timeout_ms;
    uint8_t hdr[LYH_FRAME_HEADER_BYTES];
    uint8_t *body = NULL;
    uint32_t len;
    int r;

    r = read_exact(fd, hdr, sizeof(hdr), deadline, true);
    if (r < 0)
        return r;
    if (hdr[0] != LYH_FRAME_FLAGS_NONE)
        return -EPROTO;
    len = (uint32_t)hdr[1] << 24 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 8 | hdr[4];
    if (len > LYH_MAX_FRAME_BYTES)
        return -EMSGSIZE;
    if (len > 0) {
        body = malloc(len);
        if (!body)
            return -ENOMEM;
        r = read_exact(fd, body, len, deadline, false);
        if (r < 0) {
            free(body);
            return r;
        }
    }
    *ret_body = body;
    *ret_len = len;
    return 0;
}

int dw_recv_response(int fd, int timeout_ms, lianyaohu_v1_Response *resp) {
    uint8_t *body = NULL;
    uint32_t len = 0;
    int r = dw_recv_frame(fd, timeout_ms, &body, &len);

    if (r < 0)
        return r;
    memset(resp, 0, sizeof(*resp));
    r = lyh_client_decode_response(body ? body : (const uint8_t *)"", len, resp);
    free(body);
    return r;
}

int dw_wait_closed(int fd, int timeout_ms, bool allow_reset) {
    uint64_t deadline = dw_mono_ms() + (uint64_t)timeout_ms;
    uint8_t b;

    for (;;) {
        uint64_t now = dw_mono_ms();
        if (now >= deadline)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)(deadline - now));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0)
            return -errno;
        if (pr == 0)
            return -ETIMEDOUT;
        ssize_t r = recv(fd, &b, 1, MSG_DONTWAIT);
        if (r == 0)
            return 0;
        if (r > 0)
            return -EPROTO;
        if (errno == EINTR || errno == EAGAIN)
            continue;
        if (errno == ECONNRESET && allow_reset)
            return 0;
        return -errno;
    }
}

bool dw_readable(int fd, int timeout_ms) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int pr;

    do
        pr = poll(&pfd, 1, timeout_ms);
    while (pr < 0 && errno == EINTR);
    return pr > 0;
}

int dw_call_once(const char *sock, uint64_t call_id, uint32_t method, lianyaohu_v1_Response *resp) {
    struct dw_buf f = {0};
    int fd = dw_connect(sock);
    int r;

    if (fd < 0)
        return fd;
    dw_simple_frame(&f, call_id, method);
    r = dw_send_all(fd, f.p, f.len);
    dw_buf_free(&f);
    if (r == 0)
        r = dw_recv_response(fd, DAEMON_IO_TIMEOUT_MS, resp);
    close(fd);
    return r;
}
