/* The messages between a background session's holder and `lyh attach`/`ls`/
 * `kill` (cli/hold_msg.c): every type round-trips, and what neither side
 * could have sent is refused. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "cli/hold_msg.h"

static uint8_t buf[HOLD_MSG_MAX + 16];

static struct hold_msg round_trip(const struct hold_msg *in) {
    struct hold_msg out;
    int n = hold_msg_encode(in, buf, sizeof(buf));
    assert_true(n > 0);
    assert_int_equal(hold_msg_decode(buf, (size_t)n, &out), 0);
    assert_int_equal(out.type, in->type);
    return out;
}

static void refused(const uint8_t *b, size_t n) {
    struct hold_msg m;
    assert_int_equal(hold_msg_decode(b, n, &m), -EBADMSG);
}

static void test_round_trips(void **state) {
    (void)state;
    struct hold_msg m = {.type = HOLD_ATTACH, .rows = 40, .cols = 132, .flags = HOLD_ATTACH_READ_ONLY};
    struct hold_msg o = round_trip(&m);
    assert_int_equal(o.rows, 40);
    assert_int_equal(o.cols, 132);
    assert_int_equal(o.flags, HOLD_ATTACH_READ_ONLY);

    m = (struct hold_msg){.type = HOLD_RESIZE, .rows = 1, .cols = 65535};
    o = round_trip(&m);
    assert_int_equal(o.cols, 65535);

    static uint8_t big[HOLD_DATA_MAX];
    memset(big, 'x', sizeof(big));
    m = (struct hold_msg){.type = HOLD_OUTPUT, .data = big, .len = sizeof(big)};
    o = round_trip(&m);
    assert_int_equal(o.len, HOLD_DATA_MAX);
    assert_memory_equal(o.data, big, HOLD_DATA_MAX);

    m = (struct hold_msg){.type = HOLD_INPUT, .data = (const uint8_t *)"\x1c", .len = 1};
    o = round_trip(&m);
    assert_int_equal(o.data[0], 0x1c);

    m = (struct hold_msg){.type = HOLD_INFO,
                          .info = {.name = "build-2", .session_id = "0123456789abcdef",
                                   .command = "claude --resume", .pid = 4242,
                                   .started = 1764800000, .active = 1764800100,
                                   .attached = true, .lyhd_lost = true}};
    o = round_trip(&m);
    assert_string_equal(o.info.name, "build-2");
    assert_string_equal(o.info.session_id, "0123456789abcdef");
    assert_string_equal(o.info.command, "claude --resume");
    assert_int_equal(o.info.pid, 4242);
    assert_int_equal(o.info.active, 1764800100);
    assert_true(o.info.attached && o.info.lyhd_lost);

    m = (struct hold_msg){.type = HOLD_EXIT, .known = true, .signal = 9};
    o = round_trip(&m);
    assert_true(o.known);
    assert_int_equal(o.signal, 9);
    m = (struct hold_msg){.type = HOLD_EXIT, .known = false};
    o = round_trip(&m);
    assert_false(o.known);

    m = (struct hold_msg){.type = HOLD_DETACHED, .reason = HOLD_GONE_FULL};
    assert_int_equal(round_trip(&m).reason, HOLD_GONE_FULL);
    m = (struct hold_msg){.type = HOLD_DETACH};
    round_trip(&m);
    m = (struct hold_msg){.type = HOLD_INFO_ASK};
    round_trip(&m);
}

static void test_refused(void **state) {
    (void)state;
    refused((const uint8_t *)"", 0);
    refused((const uint8_t *)"\x63", 1);                      /* unknown type */
    refused((const uint8_t *)"\x04\x00", 2);                  /* DETACH with a byte after */
    refused((const uint8_t *)"\x01\x00\x00\x00\x50\x00", 6);  /* ATTACH with 0 rows */
    refused((const uint8_t *)"\x01\x00\x18\x00\x50\x02", 6);  /* ATTACH, unknown flag */
    refused((const uint8_t *)"\x01\x00\x18\x00\x50", 5);      /* ATTACH cut short */
    refused((const uint8_t *)"\x03\x00\x18\x00", 4);          /* RESIZE cut short */
    refused((const uint8_t *)"\x02", 1);                      /* INPUT of nothing */
    refused((const uint8_t *)"\x13\x00", 2);                  /* DETACHED, reason 0 */
    refused((const uint8_t *)"\x13\x03", 2);                  /* DETACHED, unknown reason */
    /* EXIT: unknown status with a code; a signal out of range; a code above 255 */
    refused((const uint8_t *)"\x12\x00\x00\x00\x00\x01\x00\x00\x00\x00", 10);
    refused((const uint8_t *)"\x12\x01\x00\x00\x00\x00\x00\x00\x00\x80", 10);
    refused((const uint8_t *)"\x12\x01\x00\x00\x01\x00\x00\x00\x00\x00", 10);

    /* OUTPUT over the data bound */
    static uint8_t over[HOLD_DATA_MAX + 2];
    memset(over, 'y', sizeof(over));
    over[0] = HOLD_OUTPUT;
    refused(over, sizeof(over));

    /* INFO: a name with a slash (it names a socket file), an id that is
     * not hexadecimal, a command with an escape byte, a length past the end */
    struct hold_msg m = {.type = HOLD_INFO, .info = {.name = "a", .session_id = "ab", .command = "c"}};
    int n = hold_msg_encode(&m, buf, sizeof(buf));
    assert_true(n > 0);
    size_t name_at = 1 + 1 + 4 + 8 + 8 + 1; /* type, flags, pid, started, active, length */
    assert_int_equal(buf[name_at], 'a');
    buf[name_at] = '/';
    refused(buf, (size_t)n);
    buf[name_at] = 'a';
    buf[name_at + 2] = 'X'; /* the id's first byte */
    refused(buf, (size_t)n);
    buf[name_at + 2] = 'a';
    buf[(size_t)n - 1] = 0x1b; /* the command's byte */
    refused(buf, (size_t)n);
    buf[(size_t)n - 1] = 'c';
    buf[(size_t)n - 2] = 9; /* the command's length */
    refused(buf, (size_t)n);
    buf[(size_t)n - 2] = 1;
    assert_int_equal(hold_msg_decode(buf, (size_t)n, &m), 0);
    buf[0] = 0x11;
    refused(buf, (size_t)n - 1); /* one byte short */
}

static void test_encoder_checks(void **state) {
    (void)state;
    struct hold_msg m = {.type = HOLD_INFO, .info = {.name = "../x", .session_id = "ab"}};
    assert_int_equal(hold_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
    m = (struct hold_msg){.type = HOLD_ATTACH, .rows = 0, .cols = 80};
    assert_int_equal(hold_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
    m = (struct hold_msg){.type = HOLD_OUTPUT, .data = buf, .len = 0};
    assert_int_equal(hold_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
    m = (struct hold_msg){.type = HOLD_DETACH};
    assert_int_equal(hold_msg_encode(&m, buf, 0), -EINVAL); /* no room */
    m = (struct hold_msg){.type = 99};
    assert_int_equal(hold_msg_encode(&m, buf, sizeof(buf)), -EINVAL);
}

static void test_names(void **state) {
    (void)state;
    assert_true(hold_name_ok("claude"));
    assert_true(hold_name_ok("a.b_c-9"));
    assert_true(hold_name_ok("12345678901234567890123456789012")); /* 32 */
    assert_false(hold_name_ok("123456789012345678901234567890123"));
    assert_false(hold_name_ok(""));
    assert_false(hold_name_ok(".hidden"));
    assert_false(hold_name_ok("-d"));
    assert_false(hold_name_ok("a/b"));
    assert_false(hold_name_ok("a b"));
    assert_false(hold_name_ok("caf\xc3\xa9"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_encoder_checks),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests_name("hold_msg", tests, NULL, NULL);
}
