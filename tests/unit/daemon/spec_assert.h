/* cmocka assertions shared by the daemon's unit tests: destination rules and
 * guard specs compared field by field (struct dr_rule has padding, which is
 * no part of the value). Include after <cmocka.h>. */
#ifndef LYH_TEST_SPEC_ASSERT_H
#define LYH_TEST_SPEC_ASSERT_H

#include <stddef.h>

#include "common/dest_rule.h"
#include "daemon/guard_spec.h"

static inline void dests_equal(const struct dr_rule *a, const struct dr_rule *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(a[i].family, b[i].family);
        assert_memory_equal(a[i].addr, b[i].addr, 16);
        assert_int_equal(a[i].prefix_len, b[i].prefix_len);
        assert_int_equal(a[i].port_min, b[i].port_min);
        assert_int_equal(a[i].port_max, b[i].port_max);
    }
}

static inline void spec_equal(const struct gspec *a, const struct gspec *b) {
    assert_string_equal(a->iface, b->iface);
    assert_int_equal(a->deny_default, b->deny_default);
    assert_int_equal(a->ipv6_blocked, b->ipv6_blocked);
    assert_int_equal(a->n_lan, b->n_lan);
    dests_equal(a->lan, b->lan, a->n_lan);
    assert_int_equal(a->n_deny, b->n_deny);
    dests_equal(a->deny, b->deny, a->n_deny);
    assert_int_equal(a->n_allow, b->n_allow);
    dests_equal(a->allow, b->allow, a->n_allow);
    assert_int_equal(a->dns_port, b->dns_port);
    assert_int_equal(a->n_resolvers, b->n_resolvers);
    dests_equal(a->resolvers, b->resolvers, a->n_resolvers);
    assert_int_equal(a->n_domains, b->n_domains);
    assert_int_equal(a->domains_len, b->domains_len);
    assert_memory_equal(a->domains, b->domains, a->domains_len);
}

#endif
