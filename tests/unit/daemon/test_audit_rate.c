/* Unit tests for daemon/audit_rate.c, the request-record rate limit: one
 * user's flood does not silence another's refusals, the global limit holds
 * over many users, every record is either let through or counted against
 * the uid it was about (or, past the table, the overflow), counts come out
 * after the report delay (or at once with flush), and the fixed table gives
 * up only slots with nothing to report. Pure: times are passed in. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "daemon/audit_rate.h"

static const struct audit_rate_params params = {
    .uid_rate = 10, .uid_burst = 50, .all_rate = 50, .all_burst = 200, .report_ms = 1000,
};

/* What the test saw for a uid: sent, let through, and reported dropped. */
struct tally {
    uint64_t sent, kept, by_uid, by_all;
};

#define MAX_UIDS 4096
static struct tally tally[MAX_UIDS];
static uint64_t overflow;

static void reset_tally(void) {
    memset(tally, 0, sizeof(tally));
    overflow = 0;
}

static bool send_one(struct audit_rate *r, uint32_t uid, uint64_t now) {
    bool kept = audit_rate_admit(r, uid, now);

    if (uid >= MAX_UIDS) {
        fail_msg("uid %u out of the test's range", uid);
        return kept;
    }
    tally[uid].sent++;
    tally[uid].kept += kept;
    return kept;
}

static size_t collect(struct audit_rate *r, uint64_t now, bool flush) {
    struct audit_rate_drops d[8];
    size_t n, total = 0;

    for (int round = 0; round < 100; round++) {
        n = audit_rate_take(r, now, flush, d, ARRAY_SIZE(d));
        for (size_t i = 0; i < n; i++) {
            if (d[i].has_uid && d[i].uid >= MAX_UIDS) {
                fail_msg("uid %u out of the test's range", d[i].uid);
            } else if (d[i].has_uid) {
                assert_int_equal(d[i].by_table, 0);
                assert_true(d[i].by_uid + d[i].by_all > 0);
                tally[d[i].uid].by_uid += d[i].by_uid;
                tally[d[i].uid].by_all += d[i].by_all;
            } else {
                assert_int_equal(d[i].by_uid + d[i].by_all, 0);
                assert_true(d[i].by_table > 0);
                overflow += d[i].by_table;
            }
        }
        total += n;
        if (n < ARRAY_SIZE(d))
            return total;
    }
    fail_msg("audit_rate_take never ran dry");
    return total;
}

/* Nothing lost: each uid's records were kept or reported. */
static void check_accounted(uint64_t extra_overflow_ok) {
    uint64_t sent = 0, got = 0;

    for (uint32_t u = 0; u < MAX_UIDS; u++) {
        sent += tally[u].sent;
        got += tally[u].kept + tally[u].by_uid + tally[u].by_all;
        if (extra_overflow_ok == 0 && tally[u].sent != tally[u].kept + tally[u].by_uid +
                                                           tally[u].by_all)
            fail_msg("uid %u: %llu sent, %llu kept, %llu + %llu reported dropped", u,
                     (unsigned long long)tally[u].sent, (unsigned long long)tally[u].kept,
                     (unsigned long long)tally[u].by_uid, (unsigned long long)tally[u].by_all);
    }
    assert_int_equal(sent, got + overflow);
    if (extra_overflow_ok == 0)
        assert_int_equal(overflow, 0);
}

/* A uid's own bucket: its burst, then its rate. */
static void test_uid_bucket(void **state) {
    struct audit_rate r;

    (void)state;
    reset_tally();
    audit_rate_init(&r, &params);
    for (int i = 0; i < 50; i++)
        assert_true(send_one(&r, 1000, 1000));
    assert_false(send_one(&r, 1000, 1000));
    assert_false(send_one(&r, 1000, 1050));  /* half a token */
    assert_true(send_one(&r, 1000, 1100));   /* 100 ms at 10/s: one */
    assert_false(send_one(&r, 1000, 1100));
    assert_true(send_one(&r, 2000, 1100));   /* someone else: a bucket of their own */
    /* Reported a second after the first drop, not before. */
    assert_int_equal(collect(&r, 1999, false), 0);
    assert_int_equal(audit_rate_next_ms(&r, 1999), 1);
    assert_int_equal(collect(&r, 2000, false), 1);
    assert_int_equal(tally[1000].by_uid, 3);
    assert_int_equal(tally[1000].by_all, 0);
    assert_int_equal(audit_rate_next_ms(&r, 2000), UINT64_MAX);
    assert_int_equal(collect(&r, 5000, true), 0);
    check_accounted(0);
}

/* The case: user A floods refused requests for 10 s at 1000/s; user
 * B's single refusal in the middle is kept, and every one of A's is kept or
 * reported against A. */
static void test_flood_does_not_hide_another_user(void **state) {
    struct audit_rate r;
    uint64_t gaps = 0;

    (void)state;
    reset_tally();
    audit_rate_init(&r, &params);
    for (uint64_t t = 0; t < 10000; t++) {
        send_one(&r, 1000, t);
        if (t == 5000)
            assert_true(send_one(&r, 2000, t));
        gaps += collect(&r, t, false);
    }
    gaps += collect(&r, 10000, true);
    /* 50 at once, then 10/s for 10 s. */
    assert_true(tally[1000].kept >= 149 && tally[1000].kept <= 151);
    assert_int_equal(tally[1000].by_all, 0);
    /* One report a second, not one per record kept. */
    assert_true(gaps >= 9 && gaps <= 11);
    check_accounted(0);
}

/* Many uids together stay under the global limit; what the global limit
 * drops is counted against the uid it was about, apart from its own limit. */
static void test_global_cap(void **state) {
    struct audit_rate r;
    uint64_t kept = 0;

    (void)state;
    reset_tally();
    audit_rate_init(&r, &params);
    /* 20 uids, each 20/s (over their 10/s) for 10 s: 400/s offered. */
    for (uint64_t t = 0; t < 10000; t += 50) {
        for (uint32_t u = 0; u < 20; u++)
            kept += send_one(&r, 100 + u, t);
        collect(&r, t, false);
    }
    collect(&r, 10000, true);
    /* The global bucket: 200 at once, then 50/s over 9.95 s. */
    assert_true(kept <= 200 + 50 * 10);
    assert_true(kept >= 200 + 50 * 9);
    {
        uint64_t by_all = 0, by_uid = 0;

        for (uint32_t u = 0; u < 20; u++)
            by_all += tally[100 + u].by_all, by_uid += tally[100 + u].by_uid;
        assert_true(by_all > 0 && by_uid > 0);
    }
    check_accounted(0);
}

/* The table: a uid with nothing to report gives its slot up (least recently
 * seen first); one with drops to report never does; past that, the overflow. */
static void test_table(void **state) {
    struct audit_rate_params p = params;
    struct audit_rate r;
    bool found;

    (void)state;
    reset_tally();
    p.all_rate = p.all_burst = 1e9; /* only the per-uid buckets in play */
    audit_rate_init(&r, &p);
    /* 64 uids with drops to report: each over its own burst. */
    for (uint32_t u = 0; u < AUDIT_RATE_SLOTS; u++)
        for (int i = 0; i < 51; i++)
            send_one(&r, 500 + u, 1000 + u);
    /* A 65th uid finds no slot: dropped and counted in the overflow. */
    assert_false(send_one(&r, 900, 1100));
    assert_false(send_one(&r, 901, 1101));
    /* They come out: 64 named, one overflow. */
    assert_int_equal(collect(&r, 1100 + 1000, false), AUDIT_RATE_SLOTS + 1);
    assert_int_equal(overflow, 2);
    for (uint32_t u = 0; u < AUDIT_RATE_SLOTS; u++)
        assert_int_equal(tally[500 + u].by_uid, 1);
    /* Now slots may be reused: the least recently seen (uid 500) goes, and
     * comes back with a full bucket; uid 563 (seen last) keeps its slot and
     * its empty bucket. */
    assert_true(send_one(&r, 900, 3000));
    found = false;
    for (size_t i = 0; i < AUDIT_RATE_SLOTS; i++)
        found |= r.slot[i].used && r.slot[i].uid == 500;
    assert_false(found);
    assert_true(send_one(&r, 563, 3000));
    for (size_t i = 0; i < AUDIT_RATE_SLOTS; i++)
        if (r.slot[i].used && r.slot[i].uid == 563)
            assert_true(r.slot[i].tokens < 19.0); /* refilled 1.9 s at 10/s, less the one */
    collect(&r, 10000, true);
    /* The two the overflow counted are in no uid's tally. */
    tally[900].sent -= 1, tally[901].sent -= 1;
    overflow = 0;
    check_accounted(0);
}

/* A long random run over 2000 uids (so the table churns): every record is
 * kept, or reported against its uid or in the overflow; nothing else. */
static void test_random_accounting(void **state) {
    struct audit_rate r;
    uint64_t x = 88172645463325252ull, t = 0;

    (void)state;
    reset_tally();
    audit_rate_init(&r, &params);
    for (int i = 0; i < 300000; i++) {
        uint32_t uid;

        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        t += x % 3;
        /* A few heavy uids, many light ones. */
        uid = (x >> 8) % 4 ? (uint32_t)((x >> 16) % 8) : (uint32_t)((x >> 16) % MAX_UIDS);
        send_one(&r, uid, t);
        if (i % 97 == 0)
            collect(&r, t, false);
    }
    collect(&r, t, true);
    assert_int_equal(audit_rate_next_ms(&r, t), UINT64_MAX);
    check_accounted(1);
    print_message("random: %llu records in the overflow (table full of uids with drops)\n",
                  (unsigned long long)overflow);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uid_bucket),
        cmocka_unit_test(test_flood_does_not_hide_another_user),
        cmocka_unit_test(test_global_cap),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_random_accounting),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
