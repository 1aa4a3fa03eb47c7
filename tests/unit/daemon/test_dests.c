/* Destination lists from the wire (daemon/dests.c): the one check Run,
 * Install and the admin policy share. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "daemon/dests.h"

static Lianyaohu__V1__DestRule rule(uint8_t *addr, size_t len, uint32_t prefix, uint32_t pmin,
                                    uint32_t pmax) {
    Lianyaohu__V1__DestRule r = LIANYAOHU__V1__DEST_RULE__INIT;
    r.addr.data = addr;
    r.addr.len = len;
    r.prefix_len = prefix;
    r.port_min = pmin;
    r.port_max = pmax;
    return r;
}

static void test_lists(void **state) {
    (void)state;
    uint8_t lan[4] = {192, 168, 1, 0}, pub[4] = {8, 8, 8, 8}, host_bits[4] = {10, 0, 0, 1};
    Lianyaohu__V1__DestRule a = rule(lan, 4, 24, 443, 0), b = rule(pub, 4, 32, 0, 0),
                            c = rule(host_bits, 4, 8, 0, 0);
    Lianyaohu__V1__DestRule *list[3] = {&a, &b, &c};
    struct dr_rule out[3];
    char why[400];

    /* the first two: fine as deny rules */
    why[0] = 0;
    int r0 = dests_from_msg("deny", list, 2, 3, false, out, why, sizeof(why));
    if (r0 != 0)
        fail_msg("%s", why);
    assert_int_equal(out[0].prefix_len, 24);
    assert_int_equal(out[0].port_min, 443);
    assert_int_equal(out[0].port_max, 443); /* port_max 0 = port_min */
    assert_int_equal(out[1].family, AF_INET);
    /* a public address is no LAN exception; named, numbered from 1 */
    assert_int_equal(dests_from_msg("LAN exception", list, 2, 3, true, out, why, sizeof(why)),
                     -EINVAL);
    assert_non_null(strstr(why, "LAN exception rule 2: 8.8.8.8"));
    /* host bits beyond the prefix are refused, not masked */
    assert_int_equal(dests_from_msg("allow", list, 3, 3, false, out, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "allow rule 3"));
    /* more than room */
    assert_int_equal(dests_from_msg("deny", list, 3, 2, false, out, why, sizeof(why)), -E2BIG);
    /* a missing entry */
    list[1] = NULL;
    assert_int_equal(dests_from_msg("deny", list, 2, 3, false, out, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "deny rule 2 is missing"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
