/* End-to-end tests of lyhd: each case starts the real daemon (argv[1]) on a
 * fresh temp socket and state dir, talks to it over the Unix socket (through
 * the client library for well-behaved calls, with raw frames for hostile
 * ones), and stops it with SIGTERM in the teardown, which fails the case
 * unless lyhd exits 0, unlinks its socket and left no sanitizer report on its
 * stderr.
 *
 * usage: test_daemon PATH-TO-LYHD   (as root: lyhd is a root daemon, and the
 * per-uid case creates a throwaway user) */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/lyh_client.h"
#include "common/frame.h"
#include "common/lyh_limits.h"
#include "common/macros.h"
#include "tests/e2e/daemon_harness.h"
#include "tests/e2e/daemon_wire.h"

/* Method field numbers of Request. */
#define M_CAPABILITIES 10u
#define M_STATUS 11u
#define M_RUN 13u
#define M_AUDIT_QUERY 17u
#define M_AUDIT_FOLLOW 18u
#define M_CANCEL 22u

#define TIMEOUT DAEMON_IO_TIMEOUT_MS
#define MAX_TRACKED 512

struct fixture {
    struct lyhd_proc d;          /* the daemon under test */
    struct lyhd_proc other;      /* a second lyhd (lifecycle cases) */
    lianyaohu_v1_Response *resp; /* owned; big, so on the heap */
    int fds[MAX_TRACKED];        /* client fds, closed by the teardown */
};

/* ---- fixture ------------------------------------------------------------ */

/* Kill what still runs (by pid), remove the temp dirs and the test user, free.
 * Used by the teardown and by a setup that failed (cmocka runs no teardown
 * after a failed setup). */
static void fixture_free(struct fixture *f) {
    if (!f)
        return;
    for (size_t i = 0; i < MAX_TRACKED; i++)
        if (f->fds[i] >= 0)
            close(f->fds[i]);
    daemon_cleanup(&f->d);
    daemon_cleanup(&f->other);
    daemon_user_remove();
    free(f->resp);
    free(f);
}

static int fixture_new(void **state, struct fixture **ret) {
    struct fixture *f = calloc(1, sizeof(*f));

    *state = NULL;
    if (!f)
        return -1;
    for (size_t i = 0; i < MAX_TRACKED; i++)
        f->fds[i] = -1;
    f->resp = calloc(1, sizeof(*f->resp));
    if (!f->resp || daemon_prepare(&f->d) < 0 || daemon_prepare(&f->other) < 0) {
        print_error("cannot set up the fixture: %s\n", strerror(errno));
        fixture_free(f);
        return -1;
    }
    *state = f;
    *ret = f;
    return 0;
}

static int setup_with(void **state, const char *const *extra, unsigned nofile) {
    struct fixture *f;

    if (fixture_new(state, &f) < 0)
        return -1;
    f->d.nofile = nofile;
    if (daemon_start(&f->d, extra) < 0) {
        print_error("lyhd did not start\n");
        fixture_free(f);
        *state = NULL;
        return -1;
    }
    return 0;
}

static int setup_default(void **state) { return setup_with(state, NULL, 0); }

static int setup_none(void **state) {
    struct fixture *f;
    return fixture_new(state, &f);
}

static int setup_frame_timeout(void **state) {
    static const char *const a[] = {"--frame-timeout-ms", "300", NULL};
    return setup_with(state, a, 0);
}

static int setup_frame_timeout_600(void **state) {
    static const char *const a[] = {"--frame-timeout-ms", "600", NULL};
    return setup_with(state, a, 0);
}

static int setup_load(void **state) {
    static const char *const a[] = {"--max-connections", "512", NULL};
    return setup_with(state, a, 0);
}

static int setup_per_uid(void **state) {
    static const char *const a[] = {"--max-connections-per-uid", "4", NULL};
    return setup_with(state, a, 0);
}

static int setup_max3(void **state) {
    static const char *const a[] = {"--max-connections", "3", NULL};
    return setup_with(state, a, 0);
}

/* Few enough fds that the test can exhaust them with connections. */
#define LOW_NOFILE 48
/* A connection costs lyhd two fds: the protocol process's socket and the
 * parent's duplicate of it (daemon/server.c). */
#define FDS_PER_CONN 2
static int setup_low_nofile(void **state) { return setup_with(state, NULL, LOW_NOFILE); }

/* Stop the daemon(s) and judge the stop: exit 0, socket unlinked, no
 * sanitizer report. A non-zero return fails the case. */
static int teardown(void **state) {
    struct fixture *f = *state;
    int r = 0;

    if (!f)
        return 0;
    for (size_t i = 0; i < MAX_TRACKED; i++)
        CLOSE_FD(f->fds[i]);
    if (daemon_stop(&f->d) < 0)
        r = -1;
    if (daemon_stop(&f->other) < 0)
        r = -1;
    fixture_free(f);
    *state = NULL;
    return r;
}

/* ---- helpers ------------------------------------------------------------ */

/* Remember a client fd so a failing case does not leak it. */
static int track(struct fixture *f, int fd) {
    assert_true(fd >= 0);
    for (size_t i = 0; i < MAX_TRACKED; i++) {
        if (f->fds[i] < 0) {
            f->fds[i] = fd;
            return fd;
        }
    }
    fail_msg("too many tracked fds");
    return -1;
}

static void untrack_close(struct fixture *f, int fd) {
    for (size_t i = 0; i < MAX_TRACKED; i++)
        if (f->fds[i] == fd)
            f->fds[i] = -1;
    close(fd);
}

static int conn(struct fixture *f) {
    int fd = dw_connect(f->d.sock);
    if (fd < 0)
        fail_msg("connect %s: %s", f->d.sock, strerror(-fd));
    return track(f, fd);
}

static void send_bytes(int fd, const void *p, size_t n) {
    int r = dw_send_all(fd, p, n);
    if (r < 0)
        fail_msg("send: %s", strerror(-r));
}

/* Sends one simple frame; returns 0 or -errno (the buffer is freed either
 * way, so a caller's fail_msg leaks nothing). */
static int try_send_simple(int fd, uint64_t call_id, uint32_t method) {
    struct dw_buf b = {0};

    dw_simple_frame(&b, call_id, method);
    int r = dw_send_all(fd, b.p, b.len);
    dw_buf_free(&b);
    return r < 0 ? r : 0;
}

static void send_simple(int fd, uint64_t call_id, uint32_t method) {
    int r = try_send_simple(fd, call_id, method);
    if (r < 0)
        fail_msg("send: %s", strerror(-r));
}

static void send_request(int fd, const struct dw_req *req) {
    struct dw_buf body = {0}, fr = {0};

    dw_request(&body, req);
    dw_frame(&fr, body.p, body.len);
    int r = dw_send_all(fd, fr.p, fr.len);
    dw_buf_free(&body);
    dw_buf_free(&fr);
    if (r < 0)
        fail_msg("send: %s", strerror(-r));
}

/* Read one response and check its call id, code and (if not NULL) that its
 * message contains want_msg. */
static void expect_resp(int fd, lianyaohu_v1_Response *resp, uint64_t call_id, int code,
                        const char *want_msg) {
    int r = dw_recv_response(fd, TIMEOUT, resp);

    if (r < 0)
        fail_msg("no response (expected call %llu %s): %s", (unsigned long long)call_id,
                 lyh_code_name(code), strerror(-r));
    if ((int)resp->code != code || resp->call_id != call_id)
        fail_msg("expected call %llu %s, got call %llu %s: \"%s\"", (unsigned long long)call_id,
                 lyh_code_name(code), (unsigned long long)resp->call_id,
                 lyh_code_name((int)resp->code), resp->message);
    assert_true(resp->end_of_stream);
    if (want_msg && !strstr(resp->message, want_msg))
        fail_msg("message \"%s\" does not mention \"%s\"", resp->message, want_msg);
}

static void expect_closed(int fd, bool allow_reset) {
    int r = dw_wait_closed(fd, TIMEOUT, allow_reset);
    if (r < 0)
        fail_msg("expected lyhd to close the connection: %s",
                 r == -EPROTO ? "it sent data instead" : strerror(-r));
}

/* A fresh connection is answered: the daemon survived whatever came before. */
static void expect_daemon_answers(struct fixture *f) {
    int r = dw_call_once(f->d.sock, 4242, M_CAPABILITIES, f->resp);

    if (r < 0)
        fail_msg("lyhd no longer answers a fresh connection: %s", strerror(-r));
    assert_int_equal(f->resp->code, lianyaohu_v1_Code_OK);
    assert_int_equal(f->resp->call_id, 4242);
    assert_int_equal(f->resp->which_result, lianyaohu_v1_Response_capabilities_tag);
}

/* lyhd's fd count with no client connected: ask Status on a connection of
 * our own until it is the only one left (earlier connections are closed
 * asynchronously), count, and subtract ours. Checks the count after we close. */
static int fd_baseline(struct fixture *f) {
    int fd = conn(f);
    int n = -1;

    for (unsigned i = 1; i <= 200; i++) {
        send_simple(fd, i, M_STATUS);
        expect_resp(fd, f->resp, i, lianyaohu_v1_Code_OK, NULL);
        assert_int_equal(f->resp->which_result, lianyaohu_v1_Response_status_tag);
        if (f->resp->result.status.connections == 1) {
            /* A closed connection's socket is released by a closer worker
             * (daemon/closer.c) a moment after it leaves the list: wait
             * until the count holds still for 100 ms. */
            int last = -1;
            for (unsigned k = 0; k < 300; k++) {
                int now = daemon_fd_count(f->d.pid);
                if (now == last)
                    break;
                last = now;
                dw_sleep_ms(100);
            }
            n = last - FDS_PER_CONN;
            break;
        }
        dw_sleep_ms(10);
    }
    if (n < 0)
        fail_msg("lyhd kept reporting other connections open");
    untrack_close(f, fd);
    assert_int_equal(daemon_wait_fd_count(f->d.pid, n, 3000), n);
    return n;
}

static void expect_fd_count(struct fixture *f, int want, const char *when) {
    int n = daemon_wait_fd_count(f->d.pid, want, 3000);
    if (n != want)
        fail_msg("lyhd has %d fds open %s, expected %d", n, when, want);
}

/* lyhd writes some log lines after acting (a close the client sees first). */
static bool log_soon_contains(const char *path, const char *needle) {
    for (unsigned i = 0; i < 200; i++) {
        if (daemon_log_contains(path, needle))
            return true;
        dw_sleep_ms(10);
    }
    return false;
}

/* /dev/null opened n times (CLOEXEC), to pass with SCM_RIGHTS. */
static void open_devnull(int *fds, unsigned n) {
    for (unsigned i = 0; i < n; i++) {
        fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(fds[i] >= 0);
    }
}

static void close_all(int *fds, unsigned n) {
    for (unsigned i = 0; i < n; i++)
        close(fds[i]);
}

/* A heap Request for the client library (the struct is large). */
static lianyaohu_v1_Request *new_request(uint32_t method_tag) {
    lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    assert_non_null(req);
    req->which_method = (pb_size_t)method_tag;
    return req;
}

/* One unary call through the client library. */
static void lib_call(struct lyh_client *c, uint32_t method_tag, lianyaohu_v1_Response *resp,
                     int want_code) {
    lianyaohu_v1_Request *req = new_request(method_tag);
    int r = lyh_client_call(c, req, resp, TIMEOUT);
    uint64_t id = req->call_id;

    free(req);
    if (r < 0)
        fail_msg("lyh_client_call: %s", strerror(-r));
    if ((int)resp->code != want_code || resp->call_id != id)
        fail_msg("expected call %llu %s, got call %llu %s: \"%s\"", (unsigned long long)id,
                 lyh_code_name(want_code), (unsigned long long)resp->call_id,
                 lyh_code_name((int)resp->code), resp->message);
}

static struct lyh_client *lib_connect(struct fixture *f) {
    struct lyh_client *c = NULL;
    int r = lyh_client_connect(f->d.sock, &c);
    if (r < 0)
        fail_msg("lyh_client_connect: %s", strerror(-r));
    return c;
}

/* ---- the client library against the daemon ------------------------------ */

static void test_capabilities_and_status(void **state) {
    struct fixture *f = *state;
    struct lyh_client *c = lib_connect(f);
    bool fd_passing = false;

    lib_call(c, lianyaohu_v1_Request_capabilities_tag, f->resp, lianyaohu_v1_Code_OK);
    assert_int_equal(f->resp->which_result, lianyaohu_v1_Response_capabilities_tag);
    assert_true(f->resp->end_of_stream);
    const lianyaohu_v1_CapabilitiesReply *caps = &f->resp->result.capabilities;
    assert_int_equal(caps->protocol_version, LYH_PROTOCOL_VERSION);
    assert_int_equal(caps->max_frame_bytes, LYH_MAX_FRAME_BYTES);
    assert_int_equal(caps->max_fds_per_message, LYH_MAX_FDS_PER_MESSAGE);
    assert_true(caps->max_calls_per_connection >= 1);
    assert_true(caps->build_version[0] != '\0');
    for (pb_size_t i = 0; i < caps->features_count; i++)
        if (!strcmp(caps->features[i], "fd-passing"))
            fd_passing = true;
    assert_true(fd_passing);

    lib_call(c, lianyaohu_v1_Request_status_tag, f->resp, lianyaohu_v1_Code_OK);
    assert_int_equal(f->resp->which_result, lianyaohu_v1_Response_status_tag);
    const lianyaohu_v1_StatusReply *st = &f->resp->result.status;
    assert_int_equal(st->pid, (uint64_t)f->d.pid);
    assert_string_equal(st->state_dir, f->d.state);
    assert_true(st->connections >= 1);
    assert_true(st->connections_of_caller >= 1);
    lyh_client_close(c);

    /* Anyone may connect (requests are authorized one by one); the state is
     * root's alone. */
    struct stat sb;
    assert_int_equal(lstat(f->d.sock, &sb), 0);
    assert_true(S_ISSOCK(sb.st_mode));
    assert_int_equal(sb.st_mode & 07777, 0666);
    assert_int_equal(lstat(f->d.state, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(sb.st_mode & 07777, 0700);
}

/* ---- framing -------------------------------------------------------------- */

static void test_frame_byte_by_byte(void **state) {
    struct fixture *f = *state;
    struct dw_buf b = {0};
    int fd = conn(f);

    dw_simple_frame(&b, 77, M_CAPABILITIES);
    for (size_t i = 0; i < b.len; i++) {
        send_bytes(fd, b.p + i, 1);
        dw_sleep_ms(20); /* far below the 5 s frame timeout */
        if (i + 1 < b.len)
            assert_false(dw_readable(fd, 0)); /* nothing before the frame is whole */
    }
    dw_buf_free(&b);
    expect_resp(fd, f->resp, 77, lianyaohu_v1_Code_OK, NULL);
    assert_int_equal(f->resp->which_result, lianyaohu_v1_Response_capabilities_tag);
}

static void test_two_frames_one_write(void **state) {
    struct fixture *f = *state;
    struct dw_buf b = {0};
    int fd = conn(f);

    dw_simple_frame(&b, 5, M_CAPABILITIES);
    dw_simple_frame(&b, 6, M_STATUS);
    send_bytes(fd, b.p, b.len);
    dw_buf_free(&b);
    expect_resp(fd, f->resp, 5, lianyaohu_v1_Code_OK, NULL);
    assert_int_equal(f->resp->which_result, lianyaohu_v1_Response_capabilities_tag);
    expect_resp(fd, f->resp, 6, lianyaohu_v1_Code_OK, NULL);
    assert_int_equal(f->resp->which_result, lianyaohu_v1_Response_status_tag);
}

static void test_ten_pipelined(void **state) {
    struct fixture *f = *state;
    struct dw_buf b = {0};
    bool seen[10] = {false};
    int fd = conn(f);

    for (unsigned i = 0; i < 10; i++)
        dw_simple_frame(&b, 1000 + i, i % 2 ? M_STATUS : M_CAPABILITIES);
    send_bytes(fd, b.p, b.len);
    dw_buf_free(&b);
    for (unsigned i = 0; i < 10; i++) {
        int r = dw_recv_response(fd, TIMEOUT, f->resp);
        if (r < 0)
            fail_msg("answer %u of 10 missing: %s", i + 1, strerror(-r));
        assert_int_equal(f->resp->code, lianyaohu_v1_Code_OK);
        assert_true(f->resp->call_id >= 1000 && f->resp->call_id < 1010);
        unsigned k = (unsigned)(f->resp->call_id - 1000);
        assert_false(seen[k]);
        seen[k] = true;
        assert_int_equal(f->resp->which_result, k % 2 ? lianyaohu_v1_Response_status_tag
                                                      : lianyaohu_v1_Response_capabilities_tag);
    }
    assert_false(dw_readable(fd, 100)); /* exactly ten answers */
}

static void test_zero_length_frame(void **state) {
    struct fixture *f = *state;
    static const uint8_t hdr[LYH_FRAME_HEADER_BYTES] = {0, 0, 0, 0, 0};
    int fd = conn(f);

    send_bytes(fd, hdr, sizeof(hdr));
    expect_resp(fd, f->resp, 0, lianyaohu_v1_Code_INVALID_ARGUMENT, "names no method");
    send_simple(fd, 8, M_CAPABILITIES); /* still usable */
    expect_resp(fd, f->resp, 8, lianyaohu_v1_Code_OK, NULL);
}

static void test_frame_of_exactly_max(void **state) {
    struct fixture *f = *state;
    struct dw_buf body = {0}, fr = {0};
    struct dw_req req = {.call_id = 31, .version = LYH_PROTOCOL_VERSION, .method = M_CAPABILITIES};
    int fd = conn(f);

    /* A valid Capabilities request padded to the limit with one unknown
     * length-delimited field 200. */
    dw_request(&body, &req);
    size_t tag_len = dw_varint_len(200u << 3 | 2);
    size_t pad = LYH_MAX_FRAME_BYTES - body.len - tag_len - 3;
    assert_int_equal(dw_varint_len(pad), 3);
    uint8_t *zeros = calloc(1, pad);
    assert_non_null(zeros);
    dw_field_bytes(&body, 200, zeros, pad);
    free(zeros);
    assert_int_equal(body.len, LYH_MAX_FRAME_BYTES);
    dw_frame(&fr, body.p, body.len);
    dw_buf_free(&body);
    send_bytes(fd, fr.p, fr.len);
    dw_buf_free(&fr);

    expect_resp(fd, f->resp, 31, lianyaohu_v1_Code_FAILED_PRECONDITION, "field 200");
    assert_non_null(strstr(f->resp->message, "lianyaohu.v1.Request"));
    send_simple(fd, 32, M_CAPABILITIES); /* the connection stays open */
    expect_resp(fd, f->resp, 32, lianyaohu_v1_Code_OK, NULL);
}

static void test_frame_over_max_closes(void **state) {
    struct fixture *f = *state;
    const uint32_t len = LYH_MAX_FRAME_BYTES + 1;
    const uint8_t hdr[LYH_FRAME_HEADER_BYTES] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16),
                                                 (uint8_t)(len >> 8), (uint8_t)len};
    int fd = conn(f);

    send_bytes(fd, hdr, sizeof(hdr));
    expect_closed(fd, false); /* read returns 0: no answer, no reset */
    expect_daemon_answers(f);
}

static void test_bad_flag_byte_closes(void **state) {
    struct fixture *f = *state;
    static const uint8_t hdr[LYH_FRAME_HEADER_BYTES] = {0x01, 0, 0, 0, 0};
    int fd = conn(f);

    send_bytes(fd, hdr, sizeof(hdr));
    expect_closed(fd, false);
    expect_daemon_answers(f);
}

static void test_not_protobuf_closes(void **state) {
    struct fixture *f = *state;
    static const uint8_t junk[] = {0, 0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    int fd = conn(f);

    send_bytes(fd, junk, sizeof(junk));
    expect_closed(fd, false);
    expect_daemon_answers(f);
}

/* ---- unknown fields and envelope checks ------------------------------------ */

static void test_unknown_field_in_run_request(void **state) {
    struct fixture *f = *state;
    struct dw_buf inner = {0};
    int fd = conn(f);

    dw_field_varint(&inner, 99, 1);
    struct dw_req req = {.call_id = 41, .version = LYH_PROTOCOL_VERSION, .method = M_RUN,
                         .inner = inner.p, .inner_len = inner.len};
    send_request(fd, &req);
    dw_buf_free(&inner);
    expect_resp(fd, f->resp, 41, lianyaohu_v1_Code_FAILED_PRECONDITION, "99");
    assert_non_null(strstr(f->resp->message, "lianyaohu.v1.RunRequest"));
    send_simple(fd, 42, M_CAPABILITIES);
    expect_resp(fd, f->resp, 42, lianyaohu_v1_Code_OK, NULL);
}

static void test_unknown_method(void **state) {
    struct fixture *f = *state;
    int fd = conn(f);

    send_simple(fd, 51, 60);
    expect_resp(fd, f->resp, 51, lianyaohu_v1_Code_UNIMPLEMENTED, "60");
    send_simple(fd, 52, M_CAPABILITIES); /* connection kept */
    expect_resp(fd, f->resp, 52, lianyaohu_v1_Code_OK, NULL);
}

static void test_protocol_version_2(void **state) {
    struct fixture *f = *state;
    struct dw_req req = {.call_id = 71, .version = 2, .method = M_CAPABILITIES};
    int fd = conn(f);

    send_request(fd, &req);
    expect_resp(fd, f->resp, 71, lianyaohu_v1_Code_FAILED_PRECONDITION, "protocol 2");
    send_simple(fd, 72, M_CAPABILITIES);
    expect_resp(fd, f->resp, 72, lianyaohu_v1_Code_OK, NULL);
}

/* A missing call id is a protocol error: refused at the connection level
 * (call id 0), then the connection is closed (conn.c: any answer carrying
 * that id could be mistaken for another call's). */
static void test_call_id_zero(void **state) {
    struct fixture *f = *state;
    struct dw_req req = {.call_id = 0, .version = LYH_PROTOCOL_VERSION, .method = M_CAPABILITIES};
    int fd = conn(f);

    send_request(fd, &req);
    expect_resp(fd, f->resp, 0, lianyaohu_v1_Code_INVALID_ARGUMENT, "call_id must be non-zero");
    expect_closed(fd, true);
    expect_daemon_answers(f);
}

static void test_unknown_field_nested_repeated(void **state) {
    struct fixture *f = *state;
    struct dw_buf rule = {0}, run = {0};
    int fd = conn(f);

    /* Request.run.allow[1] (a DestRule) carries field 50: the walk must look
     * into every element of repeated messages. */
    static const uint8_t v4[4] = {10, 0, 0, 0};
    struct dw_buf ok_rule = {0};
    dw_field_bytes(&ok_rule, 1, v4, sizeof(v4));
    dw_field_varint(&ok_rule, 2, 8);
    dw_field_bytes(&rule, 1, v4, sizeof(v4));
    dw_field_varint(&rule, 50, 1);
    dw_field_bytes(&run, 9, ok_rule.p, ok_rule.len);
    dw_field_bytes(&run, 9, rule.p, rule.len);
    struct dw_req req = {.call_id = 43, .version = LYH_PROTOCOL_VERSION, .method = M_RUN,
                         .inner = run.p, .inner_len = run.len};
    send_request(fd, &req);
    dw_buf_free(&ok_rule);
    dw_buf_free(&rule);
    dw_buf_free(&run);
    expect_resp(fd, f->resp, 43, lianyaohu_v1_Code_FAILED_PRECONDITION,
                "field 50 of lianyaohu.v1.DestRule");
}

static void test_unknown_envelope_field(void **state) {
    struct fixture *f = *state;
    struct dw_buf body = {0}, fr = {0};
    int fd = conn(f);

    /* Field 5 of Request is outside the method range: refused, not a method. */
    dw_field_varint(&body, 1, 44);
    dw_field_varint(&body, 2, LYH_PROTOCOL_VERSION);
    dw_field_varint(&body, 5, 1);
    dw_field_bytes(&body, M_CAPABILITIES, NULL, 0);
    dw_frame(&fr, body.p, body.len);
    send_bytes(fd, fr.p, fr.len);
    dw_buf_free(&body);
    dw_buf_free(&fr);
    expect_resp(fd, f->resp, 44, lianyaohu_v1_Code_FAILED_PRECONDITION,
                "field 5 of lianyaohu.v1.Request");
    send_simple(fd, 45, M_CAPABILITIES);
    expect_resp(fd, f->resp, 45, lianyaohu_v1_Code_OK, NULL);
}

static void test_cancel_unknown_call(void **state) {
    struct fixture *f = *state;
    struct dw_buf inner = {0};
    int fd = conn(f);

    dw_field_varint(&inner, 1, 999);
    struct dw_req req = {.call_id = 46, .version = LYH_PROTOCOL_VERSION, .method = 22,
                         .inner = inner.p, .inner_len = inner.len};
    send_request(fd, &req);
    dw_buf_free(&inner);
    expect_resp(fd, f->resp, 46, lianyaohu_v1_Code_NOT_FOUND, "999");
}

/* Two method fields in one envelope: protobuf keeps the last, so the client
 * and lyhd could disagree about what was asked. Refused, connection kept. */
static void test_two_methods_refused(void **state) {
    struct fixture *f = *state;
    static const uint32_t pairs[][2] = {{M_STATUS, M_CAPABILITIES}, {M_CAPABILITIES, M_CAPABILITIES}};
    int fd = conn(f);

    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        struct dw_buf body = {0}, fr = {0};
        struct dw_req req = {.call_id = 60 + i, .version = LYH_PROTOCOL_VERSION, .method = pairs[i][0]};
        dw_request(&body, &req);
        dw_field_bytes(&body, pairs[i][1], NULL, 0);
        dw_frame(&fr, body.p, body.len);
        send_bytes(fd, fr.p, fr.len);
        dw_buf_free(&body);
        dw_buf_free(&fr);
        expect_resp(fd, f->resp, 60 + i, lianyaohu_v1_Code_INVALID_ARGUMENT, "more than one method");
    }
    send_simple(fd, 70, M_CAPABILITIES); /* still usable */
    expect_resp(fd, f->resp, 70, lianyaohu_v1_Code_OK, NULL);
}

/* An audit filter is checked like a policy rule: a destination with host bits
 * below its prefix is refused, not masked (10.1.2.3/8 does not mean 10/8);
 * a session id is 16 lowercase hex digits or a prefix of one, looked up (a
 * prefix that matches nothing is NOT_FOUND, never an empty answer). */
static void test_audit_filter_strict(void **state) {
    struct fixture *f = *state;
    static const uint8_t host_bits[4] = {10, 1, 2, 3}, net[4] = {10, 0, 0, 0};
    struct {
        const uint8_t *addr;
        const char *session;
        int code;
        const char *msg;
    } cases[] = {
        {host_bits, NULL, lianyaohu_v1_Code_INVALID_ARGUMENT, "host bits"},
        {net, NULL, lianyaohu_v1_Code_OK, NULL},
        /* a prefix is looked up (none of this daemon's sessions has it) */
        {NULL, "63e5", lianyaohu_v1_Code_NOT_FOUND, "no session starts with '63e5'"},
        {NULL, "63E5", lianyaohu_v1_Code_INVALID_ARGUMENT, "1 to 16 lowercase hex digits"},
        {NULL, "63e5a1b2c3d4e5f6a", lianyaohu_v1_Code_INVALID_ARGUMENT, "prefix of one"},
        {NULL, "63e5a1b2c3d4e5f6", lianyaohu_v1_Code_OK, NULL},
    };
    int fd = conn(f);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct dw_buf dst = {0}, q = {0};
        if (cases[i].addr) {
            dw_field_bytes(&dst, 1, cases[i].addr, 4);
            dw_field_varint(&dst, 2, 8);
            dw_field_bytes(&q, 7, dst.p, dst.len);
        }
        if (cases[i].session)
            dw_field_bytes(&q, 3, cases[i].session, strlen(cases[i].session));
        struct dw_req req = {.call_id = 80 + i, .version = LYH_PROTOCOL_VERSION, .method = M_AUDIT_QUERY,
                             .inner = q.p, .inner_len = q.len};
        send_request(fd, &req);
        dw_buf_free(&dst);
        dw_buf_free(&q);
        /* A query that matches nothing ends with one OK. */
        expect_resp(fd, f->resp, 80 + i, cases[i].code, cases[i].msg);
    }
}

/* With every call slot of a connection held by streams, a Cancel is still
 * taken: it is how the client frees a slot. */
static void test_cancel_with_all_slots_busy(void **state) {
    struct fixture *f = *state;
    const unsigned limit = 16; /* lyhd's default --max-calls-per-connection */
    bool refused = false, cancel_ok = false, cancelled = false;
    int fd = conn(f);

    for (unsigned i = 1; i <= limit + 1; i++)
        send_simple(fd, i, M_AUDIT_FOLLOW);
    struct dw_buf inner = {0};
    dw_field_varint(&inner, 1, 1);
    struct dw_req req = {.call_id = 100, .version = LYH_PROTOCOL_VERSION, .method = M_CANCEL,
                         .inner = inner.p, .inner_len = inner.len};
    send_request(fd, &req);
    dw_buf_free(&inner);
    /* Follows may stream records meanwhile (the refusal is one): skip those. */
    for (int n = 0; n < 200 && !(refused && cancel_ok && cancelled); n++) {
        int r = dw_recv_response(fd, TIMEOUT, f->resp);
        if (r < 0)
            fail_msg("no more responses (refused %d, cancel ok %d, cancelled %d): %s", refused,
                     cancel_ok, cancelled, strerror(-r));
        if (!f->resp->end_of_stream)
            continue;
        if (f->resp->call_id == limit + 1) {
            assert_int_equal(f->resp->code, lianyaohu_v1_Code_RESOURCE_EXHAUSTED);
            refused = true;
        } else if (f->resp->call_id == 100) {
            if (f->resp->code != lianyaohu_v1_Code_OK)
                fail_msg("Cancel with %u streams open: %s \"%s\"", limit,
                         lyh_code_name((int)f->resp->code), f->resp->message);
            cancel_ok = true;
        } else if (f->resp->call_id == 1) {
            assert_int_equal(f->resp->code, lianyaohu_v1_Code_CANCELLED);
            cancelled = true;
        } else {
            fail_msg("call %llu ended unexpectedly: %s", (unsigned long long)f->resp->call_id,
                     lyh_code_name((int)f->resp->code));
        }
    }
    assert_true(refused && cancel_ok && cancelled);
    /* The freed slot takes a new call. */
    send_simple(fd, 200, M_CAPABILITIES);
    for (int n = 0; n < 200; n++) {
        assert_int_equal(dw_recv_response(fd, TIMEOUT, f->resp), 0);
        if (f->resp->call_id == 200)
            break;
    }
    assert_int_equal(f->resp->call_id, 200);
    assert_int_equal(f->resp->code, lianyaohu_v1_Code_OK);
}

/* A client that pipelines requests and reads no answer: lyhd stops reading
 * its requests once 2 MiB of answers wait for it, below what it would buffer
 * (8 MiB), keeps the connection, and answers every request, in order, once
 * the client reads. (Dropped at 8 MiB before: a busy client that reads, only
 * slower than it asks, lost its connection.) */
static void test_output_backpressure_non_reader(void **state) {
    struct fixture *f = *state;
    struct dw_buf frame = {0};
    uint64_t sent = 0;
    bool stalled = false;
    int fd = conn(f);

    assert_int_equal(dw_set_nonblock(fd), 0);
    while (sent < 400000 && !stalled) {
        frame.len = 0;
        dw_simple_frame(&frame, sent + 1, M_CAPABILITIES);
        ssize_t n = send(fd, frame.p, frame.len, MSG_NOSIGNAL);
        if (n == (ssize_t)frame.len) {
            sent++;
            continue;
        }
        if (n >= 0)
            fail_msg("a partial send of a %zu-byte frame", frame.len);
        if (errno != EAGAIN)
            fail_msg("send after %llu requests: %s", (unsigned long long)sent, strerror(errno));
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        stalled = poll(&p, 1, 3000) == 0; /* not read for 3 s: lyhd stopped */
    }
    dw_buf_free(&frame);
    if (!stalled)
        fail_msg("lyhd read all %llu requests of a client that reads no answer",
                 (unsigned long long)sent);

    uint64_t got = 0, bytes = 0, deadline = dw_mono_ms() + 60000;
    assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK), 0);
    while (got < sent && dw_mono_ms() < deadline) {
        lianyaohu_v1_Response resp;
        uint8_t *body = NULL;
        uint32_t len = 0;
        int r = dw_recv_frame(fd, 10000, &body, &len);
        if (r < 0)
            fail_msg("answer %llu of %llu: %s", (unsigned long long)got + 1,
                     (unsigned long long)sent, strerror(-r));
        memset(&resp, 0, sizeof(resp));
        r = lyh_client_decode_response(body ? body : (const uint8_t *)"", len, &resp);
        free(body);
        assert_int_equal(r, 0);
        assert_int_equal(resp.call_id, got + 1);
        assert_int_equal(resp.code, lianyaohu_v1_Code_OK);
        bytes += LYH_FRAME_HEADER_BYTES + len;
        got++;
    }
    assert_int_equal(got, sent);
    print_message("stalled after %llu requests (%llu bytes of answers)\n",
                  (unsigned long long)sent, (unsigned long long)bytes);
    /* the pause mark (2 MiB) and what was read before it, not the 8 MiB limit */
    assert_true(bytes < (6u << 20));
    assert_false(log_soon_contains(f->d.log, "does not read its responses"));
    expect_daemon_answers(f);
}

/* ---- a frame that never finishes (lyhd --frame-timeout-ms 300) ------------ */

static void test_frame_timeout(void **state) {
    struct fixture *f = *state;
    uint8_t partial[LYH_FRAME_HEADER_BYTES + 10] = {0, 0, 0, 0, 100};
    int slow = conn(f);

    uint64_t t0 = dw_mono_ms();
    send_bytes(slow, partial, sizeof(partial));

    /* Meanwhile another client is answered at once. */
    int r = dw_call_once(f->d.sock, 91, M_CAPABILITIES, f->resp);
    uint64_t answered = dw_mono_ms() - t0;
    assert_int_equal(r, 0);
    assert_int_equal(f->resp->code, lianyaohu_v1_Code_OK);
    if (answered >= 250)
        fail_msg("another client waited %llu ms behind an unfinished frame",
                 (unsigned long long)answered);
    assert_false(dw_readable(slow, 0)); /* not dropped before its time */

    int cr = dw_wait_closed(slow, 2000, false);
    uint64_t closed = dw_mono_ms() - t0;
    if (cr < 0)
        fail_msg("connection with an unfinished frame not closed after %llu ms: %s",
                 (unsigned long long)closed, strerror(-cr));
    if (closed < 250)
        fail_msg("closed after %llu ms, before the 300 ms frame timeout",
                 (unsigned long long)closed);
    assert_true(log_soon_contains(f->d.log, "did not finish a frame within 300 ms"));
    expect_daemon_answers(f);
}

/* The frame timeout counts from the start of each frame: a frame that begins
 * in the read that completes the previous one gets its own full time. */
static void test_frame_timeout_restarts_per_frame(void **state) {
    struct fixture *f = *state;
    struct dw_buf a = {0}, b = {0}, mid = {0};
    int fd = conn(f);

    dw_simple_frame(&a, 111, M_CAPABILITIES);
    dw_simple_frame(&b, 112, M_CAPABILITIES);
    uint64_t t0 = dw_mono_ms();
    send_bytes(fd, a.p, 3);                 /* frame A starts at 0 ms */
    dw_sleep_ms(400);
    dw_bytes(&mid, a.p + 3, a.len - 3);
    dw_bytes(&mid, b.p, 3);
    send_bytes(fd, mid.p, mid.len);         /* A ends, B starts at 400 ms */
    dw_buf_free(&mid);
    expect_resp(fd, f->resp, 111, lianyaohu_v1_Code_OK, NULL);
    uint64_t now = dw_mono_ms() - t0;
    if (now < 800)
        dw_sleep_ms((unsigned)(800 - now));
    /* B is 400 ms old, well inside its 600 ms. */
    int r = dw_send_all(fd, b.p + 3, b.len - 3);
    dw_buf_free(&a);
    dw_buf_free(&b);
    if (r == 0)
        r = dw_recv_response(fd, TIMEOUT, f->resp);
    if (r < 0)
        fail_msg("lyhd dropped frame B 400 ms after it started, with a 600 ms frame timeout "
                 "(%s): the previous frame's timer was not restarted",
                 strerror(-r));
    assert_int_equal(f->resp->call_id, 112);
    assert_int_equal(f->resp->code, lianyaohu_v1_Code_OK);
}

/* ---- fd passing ------------------------------------------------------------- */

/* Send a Capabilities frame with fd_count and n_fds fds in one sendmsg; check
 * the answer, that lyhd closed the fds (count back to baseline + this
 * connection), and after closing, the baseline. */
static void fd_case(struct fixture *f, uint32_t fd_count, unsigned n_fds, int want_code,
                    const char *want_msg) {
    int base = fd_baseline(f);
    int fds[16];
    struct dw_buf body = {0}, fr = {0};
    struct dw_req req = {.call_id = 101, .version = LYH_PROTOCOL_VERSION, .fd_count = fd_count,
                         .method = M_CAPABILITIES};
    int fd = conn(f);

    assert_true(n_fds <= 16);
    open_devnull(fds, n_fds);
    dw_request(&body, &req);
    dw_frame(&fr, body.p, body.len);
    int r = dw_send_fds(fd, fr.p, fr.len, fds, n_fds);
    dw_buf_free(&body);
    dw_buf_free(&fr);
    close_all(fds, n_fds); /* lyhd holds its own references now */
    assert_int_equal(r, 0);

    expect_resp(fd, f->resp, 101, want_code, want_msg);
    expect_fd_count(f, base + FDS_PER_CONN, "after answering (passed fds not closed)");
    send_simple(fd, 102, M_CAPABILITIES); /* the connection is still good */
    expect_resp(fd, f->resp, 102, lianyaohu_v1_Code_OK, NULL);
    untrack_close(f, fd);
    expect_fd_count(f, base, "after the client closed");
}

/* Only the kinds Run needs are taken (issue: a client's lingering TCP socket
 * froze lyhd's event loop in close for 18 s): anything else is refused by
 * name, closed off the loop, and the connection stays usable. */
static void test_fds_refused_kinds(void **state) {
    struct fixture *f = *state;
    struct {
        int fd;
        const char *what;
    } cases[] = {
        {socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), "an AF_INET stream socket"},
        {socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0), "an AF_INET6 datagram socket"},
        {open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC), "a directory"},
        {eventfd(0, EFD_CLOEXEC), "a file of type"},
    };
    int base = fd_baseline(f);
    int fd = conn(f);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct dw_buf body = {0}, fr = {0};
        struct dw_req req = {.call_id = 120 + i, .version = LYH_PROTOCOL_VERSION, .fd_count = 1,
                             .method = M_CAPABILITIES};
        assert_true(cases[i].fd >= 0);
        dw_request(&body, &req);
        dw_frame(&fr, body.p, body.len);
        assert_int_equal(dw_send_fds(fd, fr.p, fr.len, &cases[i].fd, 1), 0);
        dw_buf_free(&body);
        dw_buf_free(&fr);
        close(cases[i].fd);
        expect_resp(fd, f->resp, 120 + i, lianyaohu_v1_Code_INVALID_ARGUMENT, cases[i].what);
        assert_non_null(strstr(f->resp->message, "file descriptor 1 of 1 is"));
    }
    expect_fd_count(f, base + FDS_PER_CONN, "after the refusals (a refused fd was kept)");
    send_simple(fd, 130, M_CAPABILITIES);
    expect_resp(fd, f->resp, 130, lianyaohu_v1_Code_OK, NULL);
    untrack_close(f, fd);
    expect_fd_count(f, base, "after the client closed");
}

static void test_fds_count_mismatch(void **state) {
    fd_case(*state, 0, 2, lianyaohu_v1_Code_INVALID_ARGUMENT, "2 arrived");
}

static void test_fds_matching_unused(void **state) {
    fd_case(*state, 2, 2, lianyaohu_v1_Code_OK, NULL);
}

static void test_fds_over_limit(void **state) {
    fd_case(*state, 4, 4, lianyaohu_v1_Code_RESOURCE_EXHAUSTED, "too many file descriptors");
}

/* More fds than lyhd's control buffer holds: the kernel truncates (and drops
 * the rest); lyhd must still refuse rather than run with fewer. */
static void test_fds_truncated_control(void **state) {
    fd_case(*state, 10, 10, lianyaohu_v1_Code_RESOURCE_EXHAUSTED, "too many file descriptors");
}

static void test_fds_then_close_without_frame(void **state) {
    struct fixture *f = *state;
    int base = fd_baseline(f);
    uint8_t partial[LYH_FRAME_HEADER_BYTES + 3] = {0, 0, 0, 0, 100, 1, 2, 3};
    int fds[2];
    int fd = conn(f);

    open_devnull(fds, 2);
    assert_int_equal(dw_send_fds(fd, partial, sizeof(partial), fds, 2), 0);
    close_all(fds, 2);
    /* lyhd has read them (data without a whole frame stays unanswered)... */
    expect_fd_count(f, base + FDS_PER_CONN + 2, "while holding the fds of a partial frame");
    untrack_close(f, fd);
    /* ...and lets them go with the connection. */
    expect_fd_count(f, base, "after the client closed mid-frame");
    expect_daemon_answers(f);
}

/* fds sent a few at a time with single bytes of a frame that never
 * completes: lyhd queues at most 16, then refuses the connection. */
static void test_fds_flood_without_frame(void **state) {
    struct fixture *f = *state;
    int base = fd_baseline(f);
    static const uint8_t bytes[6] = {0, 0, 0, 0, 100, 7};
    int fd = conn(f);

    for (unsigned i = 0; i < sizeof(bytes); i++) {
        int fds[3];
        open_devnull(fds, 3);
        int r = dw_send_fds(fd, &bytes[i], 1, fds, 3);
        close_all(fds, 3);
        assert_int_equal(r, 0);
    }
    expect_resp(fd, f->resp, 0, lianyaohu_v1_Code_RESOURCE_EXHAUSTED, "file descriptors");
    expect_closed(fd, true);
    untrack_close(f, fd);
    expect_fd_count(f, base, "after refusing an fd flood");
    expect_daemon_answers(f);
}

/* ---- load (lyhd --max-connections 512) ---------------------------------------- */

#define LOAD_N 200

struct load_conn {
    int fd;
    struct frame_reader reader;
    bool answered;
};

/* Send method on every connection at once, then collect every answer
 * (call id = base + index) with poll. */
static void load_phase(struct fixture *f, struct load_conn *lc, uint32_t method, uint64_t base) {
    struct pollfd *pfd = calloc(LOAD_N, sizeof(*pfd));
    uint8_t buf[4096];
    unsigned left = LOAD_N;
    uint64_t deadline = dw_mono_ms() + 60000;

    assert_non_null(pfd);
    for (unsigned i = 0; i < LOAD_N; i++) {
        lc[i].answered = false;
        send_simple(lc[i].fd, base + i, method);
    }
    while (left > 0) {
        if (dw_mono_ms() >= deadline) {
            free(pfd);
            fail_msg("%u of %u connections got no answer to method %u", left, LOAD_N, method);
        }
        for (unsigned i = 0; i < LOAD_N; i++) {
            pfd[i].fd = lc[i].answered ? -1 : lc[i].fd;
            pfd[i].events = POLLIN;
            pfd[i].revents = 0;
        }
        int pr = poll(pfd, LOAD_N, 1000);
        if (pr < 0 && errno == EINTR)
            continue;
        assert_true(pr >= 0);
        for (unsigned i = 0; i < LOAD_N && pr > 0; i++) {
            if (!pfd[i].revents)
                continue;
            ssize_t n = recv(lc[i].fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (n <= 0) {
                free(pfd);
                fail_msg("connection %u closed by lyhd (%s)", i, n < 0 ? strerror(errno) : "EOF");
            }
            size_t off = 0;
            while (off < (size_t)n) {
                bool done = false;
                ssize_t used = frame_reader_feed(&lc[i].reader, buf + off, (size_t)n - off, &done);
                assert_true(used >= 0);
                off += (size_t)used;
                if (!done)
                    continue;
                uint32_t len;
                uint8_t *body = frame_reader_take(&lc[i].reader, &len, NULL, NULL);
                memset(f->resp, 0, sizeof(*f->resp));
                int r = lyh_client_decode_response(body ? body : (const uint8_t *)"", len, f->resp);
                free(body);
                assert_int_equal(r, 0);
                if (lc[i].answered || f->resp->call_id != base + i ||
                    f->resp->code != lianyaohu_v1_Code_OK) {
                    free(pfd);
                    fail_msg("connection %u: unexpected answer call %llu %s \"%s\"", i,
                             (unsigned long long)f->resp->call_id,
                             lyh_code_name((int)f->resp->code), f->resp->message);
                }
                if (method == M_STATUS) {
                    /* Every connection was open and answered before any Status. */
                    assert_int_equal(f->resp->which_result, lianyaohu_v1_Response_status_tag);
                    assert_int_equal(f->resp->result.status.connections, LOAD_N);
                    assert_int_equal(f->resp->result.status.connections_of_caller, LOAD_N);
                } else {
                    assert_int_equal(f->resp->which_result,
                                     lianyaohu_v1_Response_capabilities_tag);
                }
                lc[i].answered = true;
                left--;
            }
        }
    }
    free(pfd);
}

static void test_load_200_connections(void **state) {
    struct fixture *f = *state;
    int base = fd_baseline(f);
    struct load_conn *lc = calloc(LOAD_N, sizeof(*lc));

    assert_non_null(lc);
    for (unsigned i = 0; i < LOAD_N; i++) {
        lc[i].fd = conn(f);
        assert_int_equal(dw_set_nonblock(lc[i].fd), 0);
        frame_reader_init(&lc[i].reader, LYH_MAX_FRAME_BYTES);
    }
    load_phase(f, lc, M_CAPABILITIES, 1);    /* ids 1..200 */
    load_phase(f, lc, M_STATUS, 1 + LOAD_N); /* ids 201..400: 400 answers in all */
    expect_fd_count(f, base + FDS_PER_CONN * LOAD_N, "with 200 clients");
    for (unsigned i = 0; i < LOAD_N; i++) {
        frame_reader_done(&lc[i].reader);
        untrack_close(f, lc[i].fd);
    }
    free(lc);
    expect_fd_count(f, base, "after 200 clients closed");
    expect_daemon_answers(f);
}

/* ---- per-uid cap (lyhd --max-connections-per-uid 4) --------------------------- */

static void child_say(int wfd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void child_say(int wfd, const char *fmt, ...) {
    char line[512];
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    (void)!write(wfd, line, (size_t)n);
}

#define CHILD_FAIL(...)               \
    do {                              \
        child_say(out, "FAIL " __VA_ARGS__); \
        _exit(1);                     \
    } while (0)

/* Runs as the test user; reports "ok ..." or "FAIL ..." lines on out. */
static void per_uid_child(const char *sock, uid_t uid, gid_t gid, int out, int in) {
    struct lyh_client *cs[4] = {0};
    lianyaohu_v1_Response *resp = calloc(1, sizeof(*resp));
    lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    char go;

    /* One process boundary, one direction: drop for good. */
    if (!resp || !req || setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0 ||
        getuid() != uid || geteuid() != uid)
        CHILD_FAIL("cannot become uid %u: %s", uid, strerror(errno));

    for (unsigned i = 0; i < 4; i++) {
        int r = lyh_client_connect(sock, &cs[i]);
        if (r < 0)
            CHILD_FAIL("connect %u: %s", i + 1, strerror(-r));
        memset(req, 0, sizeof(*req));
        req->which_method = lianyaohu_v1_Request_capabilities_tag;
        r = lyh_client_call(cs[i], req, resp, TIMEOUT);
        if (r < 0 || resp->code != lianyaohu_v1_Code_OK || resp->call_id != req->call_id)
            CHILD_FAIL("connection %u of 4 not served: %s %s \"%s\"", i + 1,
                       r < 0 ? strerror(-r) : "", lyh_code_name((int)resp->code), resp->message);
    }

    /* The fifth: refused with a frame (call id 0), then closed. */
    int fd = dw_connect(sock);
    if (fd < 0)
        CHILD_FAIL("connect 5: %s", strerror(-fd));
    struct dw_buf b = {0};
    dw_simple_frame(&b, 5, M_CAPABILITIES);
    (void)dw_send_all(fd, b.p, b.len); /* may already be closed: EPIPE is fine */
    dw_buf_free(&b);
    int r = dw_recv_response(fd, TIMEOUT, resp);
    if (r < 0)
        CHILD_FAIL("connection 5: no refusal frame: %s", strerror(-r));
    if (resp->code != lianyaohu_v1_Code_RESOURCE_EXHAUSTED || resp->call_id != 0 ||
        !strstr(resp->message, "per user") || !strstr(resp->message, "limit 4"))
        CHILD_FAIL("connection 5: got call %llu %s \"%s\", want call 0 RESOURCE_EXHAUSTED "
                   "naming the per-user limit 4",
                   (unsigned long long)resp->call_id, lyh_code_name((int)resp->code),
                   resp->message);
    r = dw_wait_closed(fd, TIMEOUT, true);
    if (r < 0)
        CHILD_FAIL("connection 5 not closed after the refusal: %s", strerror(-r));
    close(fd);

    memset(req, 0, sizeof(*req));
    req->which_method = lianyaohu_v1_Request_status_tag;
    r = lyh_client_call(cs[0], req, resp, TIMEOUT);
    if (r < 0 || resp->code != lianyaohu_v1_Code_OK)
        CHILD_FAIL("status: %s \"%s\"", r < 0 ? strerror(-r) : "", resp->message);
    if (resp->result.status.connections_of_caller != 4)
        CHILD_FAIL("status says the test user has %u connections, not 4",
                   resp->result.status.connections_of_caller);
    child_say(out, "ok capped at 4");

    /* The parent (root) now opens 10; it tells us when. */
    struct pollfd p = {.fd = in, .events = POLLIN};
    if (poll(&p, 1, 60000) != 1 || read(in, &go, 1) != 1)
        CHILD_FAIL("no word from the parent");
    memset(req, 0, sizeof(*req));
    req->which_method = lianyaohu_v1_Request_status_tag;
    r = lyh_client_call(cs[1], req, resp, TIMEOUT);
    if (r < 0 || resp->code != lianyaohu_v1_Code_OK)
        CHILD_FAIL("second status: %s \"%s\"", r < 0 ? strerror(-r) : "", resp->message);
    /* Root's 10 connections are root's business: a non-admin sees only its own. */
    if (resp->result.status.connections_of_caller != 4 || resp->result.status.connections != 4 ||
        !resp->result.status.own_only || resp->result.status.audit_db_bytes != 0)
        CHILD_FAIL("second status: caller %u (want 4), connections %u (want 4: its own), "
                   "own_only %d (want 1), audit_db_bytes %llu (want 0)",
                   resp->result.status.connections_of_caller, resp->result.status.connections,
                   resp->result.status.own_only, (unsigned long long)resp->result.status.audit_db_bytes);
    for (unsigned i = 0; i < 4; i++)
        lyh_client_close(cs[i]);
    free(req);
    free(resp);
    child_say(out, "ok done");
    _exit(0);
}

/* Read one line from the child (bounded). */
static void read_child_line(int fd, char *line, size_t len) {
    size_t n = 0;
    uint64_t deadline = dw_mono_ms() + 60000;

    while (n + 1 < len) {
        uint64_t now = dw_mono_ms();
        if (now >= deadline)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(deadline - now)) <= 0)
            break;
        ssize_t r = read(fd, line + n, 1);
        if (r <= 0)
            break;
        if (line[n] == '\n')
            break;
        n++;
    }
    line[n] = '\0';
}

static void test_per_uid_cap(void **state) {
    struct fixture *f = *state;
    struct lyh_client *root[10] = {0};
    int to_parent[2], to_child[2];
    char line[512];
    uid_t uid;
    gid_t gid;
    int st = 0;

    if (geteuid() != 0)
        skip();
    int r = daemon_user_create(&uid, &gid);
    if (r < 0)
        fail_msg("cannot create the test user: %s", strerror(-r));
    assert_int_equal(pipe2(to_parent, O_CLOEXEC), 0);
    assert_int_equal(pipe2(to_child, O_CLOEXEC), 0);
    track(f, to_parent[0]);
    track(f, to_child[1]);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(to_parent[0]);
        close(to_child[1]);
        per_uid_child(f->d.sock, uid, gid, to_parent[1], to_child[0]);
        _exit(1);
    }
    close(to_parent[1]);
    close(to_child[0]);

    read_child_line(to_parent[0], line, sizeof(line));
    if (strncmp(line, "ok", 2) != 0) {
        kill(pid, SIGKILL);
        (void)daemon_wait_exit(pid, 5000, &st);
        fail_msg("test user (uid %u): %s", uid, line[0] ? line : "no report");
    }

    /* Root is not capped per uid (the global cap, 256 here, still holds). */
    for (unsigned i = 0; i < 10; i++) {
        root[i] = lib_connect(f);
        lib_call(root[i], lianyaohu_v1_Request_capabilities_tag, f->resp, lianyaohu_v1_Code_OK);
    }
    lib_call(root[0], lianyaohu_v1_Request_status_tag, f->resp, lianyaohu_v1_Code_OK);
    assert_int_equal(f->resp->result.status.connections_of_caller, 10);
    assert_int_equal(f->resp->result.status.connections, 14);
    assert_false(f->resp->result.status.own_only);

    assert_int_equal(write(to_child[1], "g", 1), 1);
    read_child_line(to_parent[0], line, sizeof(line));
    r = daemon_wait_exit(pid, 30000, &st);
    if (r < 0) {
        kill(pid, SIGKILL);
        (void)daemon_wait_exit(pid, 5000, &st);
    }
    if (strncmp(line, "ok", 2) != 0)
        fail_msg("test user (uid %u): %s", uid, line[0] ? line : "no report");
    assert_int_equal(r, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    for (unsigned i = 0; i < 10; i++)
        lyh_client_close(root[i]);
    daemon_user_remove();
}

/* ---- global connection limit (lyhd --max-connections 3) ----------------------- */

static void test_connection_limit(void **state) {
    struct fixture *f = *state;
    struct lyh_client *c[3] = {0};

    (void)fd_baseline(f); /* the startup probe's connection is gone */
    for (unsigned i = 0; i < 3; i++) {
        c[i] = lib_connect(f);
        lib_call(c[i], lianyaohu_v1_Request_capabilities_tag, f->resp, lianyaohu_v1_Code_OK);
    }
    /* The fourth is refused with a frame before it says anything. */
    int fd = conn(f);
    expect_resp(fd, f->resp, 0, lianyaohu_v1_Code_RESOURCE_EXHAUSTED, "too many connections");
    assert_non_null(strstr(f->resp->message, "limit 3"));
    expect_closed(fd, false);
    untrack_close(f, fd);

    lyh_client_close(c[0]);
    c[0] = NULL;
    /* Closing is asynchronous: wait until lyhd counts two. */
    bool two = false;
    for (unsigned i = 0; i < 200 && !two; i++) {
        lib_call(c[1], lianyaohu_v1_Request_status_tag, f->resp, lianyaohu_v1_Code_OK);
        two = f->resp->result.status.connections == 2;
        if (!two)
            dw_sleep_ms(10);
    }
    assert_true(two);
    c[0] = lib_connect(f);
    lib_call(c[0], lianyaohu_v1_Request_capabilities_tag, f->resp, lianyaohu_v1_Code_OK);
    for (unsigned i = 0; i < 3; i++)
        lyh_client_close(c[i]);
}

/* ---- out of fds (lyhd under RLIMIT_NOFILE 48) ---------------------------------- */

/* Connect and ask Capabilities: 1 answered OK, 0 turned away (closed, or a
 * RESOURCE_EXHAUSTED refusal with call id 0), -ETIMEDOUT left hanging. */
static int try_client(struct fixture *f, uint64_t call_id, int *ret_fd) {
    int fd = conn(f);
    struct dw_buf b = {0};
    int r;

    dw_simple_frame(&b, call_id, M_CAPABILITIES);
    r = dw_send_all(fd, b.p, b.len);
    dw_buf_free(&b);
    if (r == 0)
        r = dw_recv_response(fd, 2000, f->resp);
    *ret_fd = fd;
    if (r == 0 && f->resp->code == lianyaohu_v1_Code_OK && f->resp->call_id == call_id)
        return 1;
    if (r == 0 && f->resp->code == lianyaohu_v1_Code_RESOURCE_EXHAUSTED && f->resp->call_id == 0)
        return 0;
    if (r == -ENODATA || r == -ECONNRESET || r == -EPIPE)
        return 0;
    if (r == -ETIMEDOUT)
        return -ETIMEDOUT;
    fail_msg("call %llu: unexpected %s \"%s\" (%s)", (unsigned long long)call_id,
             lyh_code_name((int)f->resp->code), f->resp->message, strerror(-r));
    return -EPROTO;
}

/* Out of fds, a client is turned away, never left hanging: the parent
 * (server.c) answers RESOURCE_EXHAUSTED with call id 0 when it had no fd
 * number for the connection's socket; the protocol process
 * (proto_clients.c), when accept() fails with EMFILE, frees its reserve fd,
 * accepts and closes the waiting connection, stops accepting, and starts
 * again once a connection closes. */
static void test_out_of_fds(void **state) {
    struct fixture *f = *state;
    int served[LOW_NOFILE];
    unsigned n_served = 0;
    int fd = -1, r = 1;

    (void)fd_baseline(f);
    for (unsigned i = 0; i < LOW_NOFILE && r == 1; i++) {
        r = try_client(f, 500 + i, &fd);
        if (r == 1)
            served[n_served++] = fd;
    }
    assert_true(n_served >= 5 && n_served < LOW_NOFILE);
    assert_true(log_soon_contains(f->d.log, "out of file descriptors"));
    /* The first client lyhd has no fd for is turned away, not left hanging. */
    if (r == -ETIMEDOUT)
        fail_msg("lyhd is out of fds after %u clients and left the next one hanging "
                 "instead of turning it away with its reserve fd",
                 n_served);
    untrack_close(f, fd);

    /* Later ones may wait in the backlog while lyhd does not accept, or be
     * turned away too; either way, once a connection closes, lyhd serves
     * again. */
    int later = conn(f);
    /* The turn-away may come before the request is written: then the send
     * fails with EPIPE or ECONNRESET, which is the same answer. */
    int sr = try_send_simple(later, 900, M_CAPABILITIES);
    if (sr < 0 && sr != -EPIPE && sr != -ECONNRESET)
        fail_msg("send: %s", strerror(-sr));
    bool waited = sr == 0 && !dw_readable(later, 300);
    if (!waited) {
        /* turned away: a refusal with call id 0 (the parent had no fd for
         * it) or the end of the stream (the protocol process had none) */
        int rr = dw_recv_response(later, 2000, f->resp);
        if (rr == 0)
            assert_true(f->resp->code == lianyaohu_v1_Code_RESOURCE_EXHAUSTED &&
                        f->resp->call_id == 0);
        expect_closed(later, true);
        untrack_close(f, later);
    }
    untrack_close(f, served[--n_served]);
    if (waited) {
        expect_resp(later, f->resp, 900, lianyaohu_v1_Code_OK, NULL);
        assert_true(log_soon_contains(f->d.log, "accepting connections"));
        untrack_close(f, later);
    } else {
        bool ok = false;
        for (unsigned i = 0; i < 100 && !ok; i++) {
            int c;
            ok = try_client(f, 901 + i, &c) == 1;
            untrack_close(f, c);
            if (!ok)
                dw_sleep_ms(20);
        }
        assert_true(ok);
    }
    while (n_served > 0)
        untrack_close(f, served[--n_served]);
    /* The closed connections' fds are released by the closer's thread, a
     * moment after lyhd let them go: until then a client may still be
     * turned away. Within a second lyhd answers. */
    for (unsigned i = 0; i < 50; i++) {
        int c;
        if (try_client(f, 1000 + i, &c) == 1) {
            untrack_close(f, c);
            break;
        }
        untrack_close(f, c);
        dw_sleep_ms(20);
    }
    expect_daemon_answers(f);
}

/* ---- lifecycle ------------------------------------------------------------------ */

static void expect_exit(pid_t pid, int code) {
    int st = 0;
    int r = daemon_wait_exit(pid, DAEMON_EXIT_TIMEOUT_MS, &st);
    if (r < 0) {
        kill(pid, SIGKILL);
        (void)daemon_wait_exit(pid, DAEMON_EXIT_TIMEOUT_MS, &st);
        fail_msg("lyhd (pid %d) still running, expected it to exit %d", pid, code);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != code)
        fail_msg("lyhd wait status 0x%x, expected exit %d", st, code);
}

static bool path_exists(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0;
}

/* A second lyhd in f->other with these args; expected to exit at once. */
static void run_other(struct fixture *f, const char *sock, const char *state_dir, int want_exit) {
    const char *args[] = {"--socket", sock, "--state-dir", state_dir, NULL};
    pid_t pid = daemon_spawn(args, f->other.log, 0);

    assert_true(pid > 0);
    f->other.pid = pid;
    expect_exit(pid, want_exit);
    f->other.pid = 0;
    assert_false(daemon_log_has_sanitizer_report(f->other.log));
}

static void test_sigterm_clean_exit(void **state) {
    struct fixture *f = *state;
    uint8_t partial[LYH_FRAME_HEADER_BYTES + 2] = {0, 0, 0, 0, 50, 1, 2};
    struct lyh_client *c = lib_connect(f);
    int mid_frame = conn(f);

    lib_call(c, lianyaohu_v1_Request_status_tag, f->resp, lianyaohu_v1_Code_OK);
    send_bytes(mid_frame, partial, sizeof(partial));
    /* Exit 0, socket unlinked, no sanitizer report, with clients connected. */
    assert_int_equal(daemon_stop(&f->d), 0);
    assert_false(path_exists(f->d.sock));
    expect_closed(lyh_client_fd(c), true);
    expect_closed(mid_frame, true);
    assert_true(daemon_log_contains(f->d.log, "shutting down"));
    lyh_client_close(c);
}

static void test_second_daemon_same_socket(void **state) {
    struct fixture *f = *state;

    run_other(f, f->d.sock, f->other.state, 1);
    assert_true(daemon_log_contains(f->other.log, "another lyhd"));
    assert_true(daemon_log_contains(f->other.log, "already serving"));
    assert_true(path_exists(f->d.sock)); /* not taken away from the first */
    expect_daemon_answers(f);
}

static void test_second_daemon_same_state_dir(void **state) {
    struct fixture *f = *state;

    run_other(f, f->other.sock, f->d.state, 1);
    assert_true(daemon_log_contains(f->other.log, "another lyhd already uses state dir"));
    assert_false(path_exists(f->other.sock));
    expect_daemon_answers(f);
}

/* The refused second instance must not touch the running one's state: the
 * lock decides before state.db is opened (let alone migrated). Observable:
 * store_open tightens state.db to 0600, so a loosened mode must survive. */
static void test_second_daemon_leaves_state_alone(void **state) {
    struct fixture *f = *state;
    char db[192];
    struct stat sb;

    snprintf(db, sizeof(db), "%s/state.db", f->d.state);
    assert_int_equal(lstat(db, &sb), 0);
    assert_int_equal(chmod(db, 0640), 0);
    run_other(f, f->other.sock, f->d.state, 1);
    assert_true(daemon_log_contains(f->other.log, "another lyhd already uses state dir"));
    assert_int_equal(lstat(db, &sb), 0);
    int mode = (int)(sb.st_mode & 07777);
    assert_int_equal(chmod(db, 0600), 0);
    if (mode != 0640)
        fail_msg("the refused second lyhd changed state.db (mode 0640 -> 0%o): it opened the "
                 "running daemon's database before taking the state dir lock",
                 mode);
    expect_daemon_answers(f);
}

static void test_stale_socket_replaced(void **state) {
    struct fixture *f = *state;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    /* What a crashed lyhd leaves: a socket file nobody listens on. */
    assert_true(s >= 0);
    memcpy(sa.sun_path, f->d.sock, strlen(f->d.sock) + 1);
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(s);
    assert_true(path_exists(f->d.sock));
    assert_int_equal(dw_connect(f->d.sock), -ECONNREFUSED);

    assert_int_equal(daemon_start(&f->d, NULL), 0);
    expect_daemon_answers(f);
}

static void test_socket_path_not_a_socket(void **state) {
    struct fixture *f = *state;
    int fd = open(f->d.sock, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

    assert_true(fd >= 0);
    close(fd);
    run_other(f, f->d.sock, f->d.state, 1);
    assert_true(daemon_log_contains(f->other.log, "not a socket"));
    assert_true(path_exists(f->d.sock)); /* someone's file: left alone */
    assert_int_equal(unlink(f->d.sock), 0);
}

static void state_dir_mode_case(struct fixture *f, mode_t mode) {
    assert_int_equal(mkdir(f->d.state, 0700), 0);
    assert_int_equal(chmod(f->d.state, mode), 0);
    run_other(f, f->d.sock, f->d.state, 1);
    assert_false(path_exists(f->d.sock));
    assert_true(daemon_log_contains(f->other.log, f->d.state));
}

static void test_state_dir_world_writable(void **state) { state_dir_mode_case(*state, 0777); }
static void test_state_dir_group_writable(void **state) { state_dir_mode_case(*state, 0770); }

/* The socket's directory must be one only root can change: in a directory
 * others can write (even a sticky one), someone could put their own socket
 * at the name while lyhd is stopped, or a symlink the old chmod followed. */
static void socket_dir_mode_case(struct fixture *f, mode_t mode) {
    char dir[160], sock[200];

    snprintf(dir, sizeof(dir), "%s/sockdir", f->d.dir);
    snprintf(sock, sizeof(sock), "%s/lyhd.sock", dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(chmod(dir, mode), 0);
    run_other(f, sock, f->d.state, 1);
    assert_false(path_exists(sock));
    assert_true(daemon_log_contains(f->other.log, "socket directory"));
    assert_true(daemon_log_contains(f->other.log, dir));
    assert_int_equal(rmdir(dir), 0);
}

static void test_socket_dir_world_writable(void **state) { socket_dir_mode_case(*state, 0777); }
static void test_socket_dir_sticky(void **state) { socket_dir_mode_case(*state, 01777); }
static void test_socket_dir_group_writable(void **state) { socket_dir_mode_case(*state, 0775); }

/* A directory reached through a root-made symlink (as /var/run -> /run) is
 * fine: the checks and the bind go by the directory opened, and the socket
 * is 0666 from the umask, not from a chmod. */
static void test_socket_dir_via_symlink(void **state) {
    struct fixture *f = *state;
    char real[100], link[100];
    struct stat sb;

    snprintf(real, sizeof(real), "%s/realrun", f->d.dir);
    snprintf(link, sizeof(link), "%s/run", f->d.dir);
    assert_int_equal(mkdir(real, 0755), 0);
    assert_int_equal(symlink(real, link), 0);
    snprintf(f->d.sock, sizeof(f->d.sock), "%s/lyhd.sock", link);
    assert_int_equal(daemon_start(&f->d, NULL), 0);
    expect_daemon_answers(f);
    assert_int_equal(lstat(f->d.sock, &sb), 0);
    assert_true(S_ISSOCK(sb.st_mode));
    assert_int_equal(sb.st_mode & 07777, 0666);
    assert_int_equal(daemon_stop(&f->d), 0);
    assert_false(path_exists(f->d.sock));
}

static void test_bad_flag_exits_2(void **state) {
    struct fixture *f = *state;
    const char *args[] = {"--socket", f->d.sock, "--state-dir", f->d.state,
                          "--max-connections", "0", NULL};
    pid_t pid = daemon_spawn(args, f->other.log, 0);

    assert_true(pid > 0);
    f->other.pid = pid;
    expect_exit(pid, 2);
    f->other.pid = 0;
    assert_true(daemon_log_contains(f->other.log, "--max-connections"));
    assert_false(path_exists(f->d.sock));
    assert_false(path_exists(f->d.state));
}

/* A syslog socket in a directory a user could write (they would bind the
 * name first and read every record) is refused at start, naming it; one
 * in a directory only root writes (the sticky /tmp above it is fine) is
 * taken. */
static void test_syslog_socket_dir(void **state) {
    struct fixture *f = *state;
    static const mode_t bad[] = {0777, 01777, 0775};
    char dir[160], sock[200];

    snprintf(dir, sizeof(dir), "%s/logdir", f->d.dir);
    snprintf(sock, sizeof(sock), "%s/log.sock", dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    for (int opt = 0; opt < 2; opt++) {
        const char *name = opt ? "--syslog-socket" : "--syslog-audit-socket";
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            const char *args[] = {"--socket", f->d.sock, "--state-dir", f->d.state, name, sock,
                                  NULL};
            assert_int_equal(chmod(dir, bad[i]), 0);
            pid_t pid = daemon_spawn(args, f->other.log, 0);
            assert_true(pid > 0);
            f->other.pid = pid;
            expect_exit(pid, 2);
            f->other.pid = 0;
            assert_true(daemon_log_contains(f->other.log, name));
            assert_true(daemon_log_contains(f->other.log, "only root can write"));
            assert_false(path_exists(f->d.sock));
        }
    }
    assert_int_equal(chmod(dir, 0755), 0);
    const char *ok[] = {"--syslog-audit-socket", sock, NULL};
    assert_int_equal(daemon_start(&f->d, ok), 0);
    expect_daemon_answers(f);
    assert_int_equal(daemon_stop(&f->d), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* ---- main --------------------------------------------------------------------- */

#define T(fn, setup) cmocka_unit_test_setup_teardown(fn, setup, teardown)

static bool puser_existed = true, group_existed = true;

/* lyhd creates its protocol process's user and its guard group when they
 * are missing: remove what this run caused. */
static void forget_puser(void) {
    if (!group_existed && getgrnam("_lianyaohu")) {
        char *argv[] = {(char *)"/usr/sbin/groupdel", (char *)"_lianyaohu", NULL};
        pid_t pid;
        int st;
        if (posix_spawn(&pid, argv[0], NULL, NULL, argv, (char *[]){NULL}) == 0)
            waitpid(pid, &st, 0);
    }
    if (puser_existed || !getpwnam("_lyhd"))
        return;
    for (int i = 0; i < 2; i++) {
        const char *tool = i ? "/usr/sbin/groupdel" : "/usr/sbin/userdel";
        char *argv[] = {(char *)tool, (char *)"_lyhd", NULL};
        pid_t pid;
        int st;
        if (i == 1 && !getgrnam("_lyhd"))
            break;
        if (posix_spawn(&pid, tool, NULL, NULL, argv, (char *[]){NULL}) == 0)
            waitpid(pid, &st, 0);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH-TO-LYHD\n", argv[0]);
        return 2;
    }
    if (access(argv[1], X_OK) < 0) {
        fprintf(stderr, "%s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    daemon_set_binary(argv[1]);
    signal(SIGPIPE, SIG_IGN);
    /* lyhd creates the user of its protocol process (_lyhd) when missing: if
     * it did so during these tests, it goes again at the end */
    puser_existed = getpwnam("_lyhd") != NULL;
    group_existed = getgrnam("_lianyaohu") != NULL;
    atexit(forget_puser);

    const struct CMUnitTest tests[] = {
        T(test_capabilities_and_status, setup_default),
        /* framing */
        T(test_frame_byte_by_byte, setup_default),
        T(test_two_frames_one_write, setup_default),
        T(test_ten_pipelined, setup_default),
        T(test_zero_length_frame, setup_default),
        T(test_frame_of_exactly_max, setup_default),
        T(test_frame_over_max_closes, setup_default),
        T(test_bad_flag_byte_closes, setup_default),
        T(test_not_protobuf_closes, setup_default),
        /* unknown fields, envelope */
        T(test_unknown_field_in_run_request, setup_default),
        T(test_unknown_method, setup_default),
        T(test_protocol_version_2, setup_default),
        T(test_call_id_zero, setup_default),
        T(test_unknown_field_nested_repeated, setup_default),
        T(test_unknown_envelope_field, setup_default),
        T(test_cancel_unknown_call, setup_default),
        T(test_two_methods_refused, setup_default),
        T(test_audit_filter_strict, setup_default),
        T(test_cancel_with_all_slots_busy, setup_default),
        T(test_output_backpressure_non_reader, setup_default),
        /* frame timeout */
        T(test_frame_timeout, setup_frame_timeout),
        T(test_frame_timeout_restarts_per_frame, setup_frame_timeout_600),
        /* fds */
        T(test_fds_count_mismatch, setup_default),
        T(test_fds_refused_kinds, setup_default),
        T(test_fds_matching_unused, setup_default),
        T(test_fds_over_limit, setup_default),
        T(test_fds_truncated_control, setup_default),
        T(test_fds_then_close_without_frame, setup_default),
        T(test_fds_flood_without_frame, setup_default),
        /* limits */
        T(test_load_200_connections, setup_load),
        T(test_per_uid_cap, setup_per_uid),
        T(test_connection_limit, setup_max3),
        T(test_out_of_fds, setup_low_nofile),
        /* lifecycle */
        T(test_sigterm_clean_exit, setup_default),
        T(test_second_daemon_same_socket, setup_default),
        T(test_second_daemon_same_state_dir, setup_default),
        T(test_second_daemon_leaves_state_alone, setup_default),
        T(test_stale_socket_replaced, setup_none),
        T(test_socket_path_not_a_socket, setup_none),
        T(test_state_dir_world_writable, setup_none),
        T(test_state_dir_group_writable, setup_none),
        T(test_socket_dir_world_writable, setup_none),
        T(test_syslog_socket_dir, setup_none),
        T(test_socket_dir_sticky, setup_none),
        T(test_socket_dir_group_writable, setup_none),
        T(test_socket_dir_via_symlink, setup_none),
        T(test_bad_flag_exits_2, setup_none),
    };
    return cmocka_run_group_tests_name("lyhd e2e", tests, NULL, NULL);
}
