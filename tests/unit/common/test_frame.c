/* Frame reader: partial frames byte by byte, two frames in one read, zero
 * length, the maximum, max+1, bad flag byte. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/frame.h"

static size_t make_frame(uint8_t *out, const uint8_t *body, uint32_t len) {
    frame_write_header(out, len);
    if (len)
        memcpy(out + LYH_FRAME_HEADER_BYTES, body, len);
    return LYH_FRAME_HEADER_BYTES + len;
}

static void test_header_encoding(void **state) {
    uint8_t h[5];
    frame_write_header(h, 0x01020304u);
    assert_int_equal(h[0], 0);
    assert_int_equal(h[1], 1);
    assert_int_equal(h[2], 2);
    assert_int_equal(h[3], 3);
    assert_int_equal(h[4], 4);
}

static void test_byte_by_byte(void **state) {
    struct frame_reader r;
    uint8_t buf[64];
    const uint8_t body[] = "hello frame";
    size_t n = make_frame(buf, body, sizeof(body));
    bool done = false;

    frame_reader_init(&r, 0);
    for (size_t i = 0; i < n; i++) {
        assert_false(done);
        ssize_t used = frame_reader_feed(&r, buf + i, 1, &done);
        assert_int_equal(used, 1);
        if (i + 1 < n)
            assert_true(frame_reader_partial(&r));
    }
    assert_true(done);
    uint32_t len;
    uint64_t start, end;
    uint8_t *b = frame_reader_take(&r, &len, &start, &end);
    assert_int_equal(len, sizeof(body));
    assert_memory_equal(b, body, sizeof(body));
    assert_int_equal(start, 0);
    assert_int_equal(end, n);
    assert_false(frame_reader_partial(&r));
    free(b);
    frame_reader_done(&r);
}

static void test_two_frames_one_read(void **state) {
    struct frame_reader r;
    uint8_t buf[64];
    size_t n1 = make_frame(buf, (const uint8_t *)"ab", 2);
    size_t n2 = make_frame(buf + n1, (const uint8_t *)"cde", 3);
    bool done;
    uint32_t len;
    uint64_t start, end;

    frame_reader_init(&r, 0);
    ssize_t used = frame_reader_feed(&r, buf, n1 + n2, &done);
    assert_int_equal(used, n1); /* stops at the end of the first frame */
    assert_true(done);
    uint8_t *b = frame_reader_take(&r, &len, &start, &end);
    assert_int_equal(len, 2);
    assert_memory_equal(b, "ab", 2);
    assert_int_equal(end, n1);
    free(b);
    used = frame_reader_feed(&r, buf + n1, n2, &done);
    assert_int_equal(used, n2);
    assert_true(done);
    b = frame_reader_take(&r, &len, &start, &end);
    assert_int_equal(len, 3);
    assert_memory_equal(b, "cde", 3);
    assert_int_equal(start, n1);
    assert_int_equal(end, n1 + n2);
    free(b);
    frame_reader_done(&r);
}

static void test_zero_length(void **state) {
    struct frame_reader r;
    uint8_t buf[5];
    bool done;
    uint32_t len = 99;

    frame_reader_init(&r, 0);
    make_frame(buf, NULL, 0);
    assert_int_equal(frame_reader_feed(&r, buf, 5, &done), 5);
    assert_true(done);
    uint8_t *b = frame_reader_take(&r, &len, NULL, NULL);
    assert_null(b);
    assert_int_equal(len, 0);
    frame_reader_done(&r);
}

static void test_max_and_over(void **state) {
    struct frame_reader r;
    uint8_t hdr[5];
    bool done;

    /* Exactly the maximum is accepted (the body is allocated and filled). */
    frame_reader_init(&r, 0);
    frame_write_header(hdr, LYH_MAX_FRAME_BYTES);
    assert_int_equal(frame_reader_feed(&r, hdr, 5, &done), 5);
    assert_false(done);
    uint8_t *body = calloc(1, LYH_MAX_FRAME_BYTES);
    assert_non_null(body);
    assert_int_equal(frame_reader_feed(&r, body, LYH_MAX_FRAME_BYTES, &done), LYH_MAX_FRAME_BYTES);
    assert_true(done);
    uint32_t len;
    free(frame_reader_take(&r, &len, NULL, NULL));
    assert_int_equal(len, LYH_MAX_FRAME_BYTES);
    free(body);
    frame_reader_done(&r);

    /* max+1 is refused at the header, before any allocation. */
    frame_reader_init(&r, 0);
    frame_write_header(hdr, LYH_MAX_FRAME_BYTES + 1);
    assert_int_equal(frame_reader_feed(&r, hdr, 5, &done), -EMSGSIZE);
    assert_null(r.body);
    frame_reader_done(&r);

    /* So is the largest 32-bit length, and a smaller configured limit holds. */
    frame_reader_init(&r, 0);
    memset(hdr, 0xff, 5);
    hdr[0] = 0;
    assert_int_equal(frame_reader_feed(&r, hdr, 5, &done), -EMSGSIZE);
    frame_reader_done(&r);
    frame_reader_init(&r, 100);
    frame_write_header(hdr, 101);
    assert_int_equal(frame_reader_feed(&r, hdr, 5, &done), -EMSGSIZE);
    frame_reader_done(&r);
}

static void test_garbage_flag(void **state) {
    struct frame_reader r;
    const uint8_t junk[] = {0x47, 0x45, 0x54, 0x20, 0x2f, 0x20}; /* "GET / " */
    const uint8_t compressed[] = {0x01, 0, 0, 0, 1, 0};
    bool done;

    frame_reader_init(&r, 0);
    assert_int_equal(frame_reader_feed(&r, junk, sizeof(junk), &done), -EPROTO);
    frame_reader_done(&r);
    frame_reader_init(&r, 0);
    assert_int_equal(frame_reader_feed(&r, compressed, sizeof(compressed), &done), -EPROTO);
    frame_reader_done(&r);
}

static void test_split_header(void **state) {
    struct frame_reader r;
    uint8_t buf[16];
    size_t n = make_frame(buf, (const uint8_t *)"xyz", 3);
    bool done;
    uint32_t len;

    frame_reader_init(&r, 0);
    assert_int_equal(frame_reader_feed(&r, buf, 3, &done), 3);
    assert_false(done);
    assert_int_equal(frame_reader_feed(&r, buf + 3, 4, &done), 4);
    assert_false(done);
    assert_int_equal(frame_reader_feed(&r, buf + 7, n - 7, &done), (ssize_t)(n - 7));
    assert_true(done);
    uint8_t *b = frame_reader_take(&r, &len, NULL, NULL);
    assert_memory_equal(b, "xyz", 3);
    free(b);
    frame_reader_done(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_encoding), cmocka_unit_test(test_byte_by_byte),
        cmocka_unit_test(test_two_frames_one_read), cmocka_unit_test(test_zero_length),
        cmocka_unit_test(test_max_and_over), cmocka_unit_test(test_garbage_flag),
        cmocka_unit_test(test_split_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
