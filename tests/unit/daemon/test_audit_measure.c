/* Unit tests for daemon/audit_measure.c: audit.db's write rate measured
 * again off the loop. With a real scratch file in a directory of the test's
 * own and a real event loop: the loop hears of a best that went up and, last
 * and once, that the thread is done; the scratch file is gone afterwards; a stop wakes a
 * thread that waits, at once; a directory that cannot take the file ends the
 * thread quietly; bad parameters start nothing and leave no fd. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "daemon/audit_measure.h"

struct seen {
    struct event_base *base; /* broken out of at the done call */
    uint64_t v[16];
    unsigned n;
    unsigned dones;       /* calls with done set */
    unsigned after_done;  /* calls after one with done set */
    unsigned measured;    /* at the done call */
    char why[256];        /* at the done call ("": none) */
    unsigned whys;        /* calls with a why */
};

static void better(uint64_t best, unsigned measured, bool done, const char *why, void *arg) {
    struct seen *s = arg;
    if (s->dones)
        s->after_done++;
    if (s->n < 16)
        s->v[s->n] = best;
    s->n++;
    if (why) {
        s->whys++;
        snprintf(s->why, sizeof(s->why), "%s", why);
    }
    if (done) {
        s->dones++;
        s->measured = measured;
        if (s->base)
            event_base_loopbreak(s->base);
    }
}

static unsigned entries(const char *dir) {
    DIR *d = opendir(dir);
    unsigned n = 0;
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static unsigned open_fds(void) {
    return entries("/proc/self/fd");
}

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct fx {
    char dir[64];
    struct event_base *base;
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    if (!f)
        return -1;
    snprintf(f->dir, sizeof(f->dir), "/tmp/lyh-measure.XXXXXX");
    if (!mkdtemp(f->dir) || !(f->base = event_base_new())) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    int rc = system(cmd);
    event_base_free(f->base);
    free(f);
    return rc == 0 ? 0 : -1;
}

/* the loop, until the done call or ms (a slow machine, a sanitizer: the
 * done call comes late, never too early) */
static void run_for(struct event_base *base, unsigned ms) {
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    event_base_loopexit(base, &tv);
    event_base_dispatch(base);
}

static void test_better_only(void **state) {
    struct fx *f = *state;
    struct seen s = {.base = f->base};
    struct audit_measure *m = NULL;
    struct audit_measure_params p = {.dir = f->dir, .batch = 64, .rounds = 2, .times = 4,
                                     .gap_ms = 20};

    assert_int_equal(audit_measure_start(f->base, &p, better, &s, &m), 0);
    assert_non_null(m);
    run_for(f->base, 30000);
    /* done, and the thread joined already: nothing more comes */
    run_for(f->base, 100);
    audit_measure_stop(m);
    assert_int_equal(s.whys, 0);
    /* the first measurement is always a better best than none; the last call
     * says done, after all four */
    assert_true(s.n >= 1);
    assert_true(s.n <= 5);
    assert_int_equal(s.dones, 1);
    assert_int_equal(s.after_done, 0);
    assert_int_equal(s.measured, 4);
    for (unsigned i = 0; i < s.n; i++) {
        assert_true(s.v[i] > 0);
        if (i > 0)
            assert_true(s.v[i] >= s.v[i - 1]);
    }
    /* the scratch file (and its -wal, -shm) is gone */
    assert_int_equal(entries(f->dir), 0);
}

static void test_stop_wakes(void **state) {
    struct fx *f = *state;
    struct seen s = {0};
    struct audit_measure *m = NULL;
    struct audit_measure_params p = {.dir = f->dir, .batch = 64, .rounds = 1, .times = 3,
                                     .gap_ms = 60000};
    unsigned fds = open_fds();

    assert_int_equal(audit_measure_start(f->base, &p, better, &s, &m), 0);
    run_for(f->base, 50);
    uint64_t t0 = mono_ms();
    audit_measure_stop(m);
    assert_true(mono_ms() - t0 < 1000);
    assert_int_equal(s.n, 0);
    assert_int_equal(entries(f->dir), 0);
    assert_int_equal(open_fds(), fds);
}

static void test_unwritable_dir(void **state) {
    struct fx *f = *state;
    struct seen s = {.base = f->base};
    struct audit_measure *m = NULL;
    char gone[96];
    snprintf(gone, sizeof(gone), "%s/not-there", f->dir);
    struct audit_measure_params p = {.dir = gone, .batch = 64, .rounds = 1, .times = 2,
                                     .gap_ms = 10};

    assert_int_equal(audit_measure_start(f->base, &p, better, &s, &m), 0);
    run_for(f->base, 30000);
    audit_measure_stop(m);
    /* the first measurement fails: told once that it is done, with nothing,
     * and why */
    assert_int_equal(s.n, 1);
    assert_int_equal(s.dones, 1);
    assert_int_equal(s.measured, 0);
    assert_int_equal(s.v[0], 0);
    assert_int_equal(s.whys, 1);
    assert_non_null(strstr(s.why, "not-there"));
    assert_int_equal(entries(f->dir), 0);
}

static void test_bad_params(void **state) {
    struct fx *f = *state;
    struct seen s = {0};
    struct audit_measure *m = NULL;
    unsigned fds = open_fds();
    struct audit_measure_params p = {.dir = f->dir, .batch = 64, .rounds = 1, .times = 0,
                                     .gap_ms = 10};

    assert_int_equal(audit_measure_start(f->base, &p, better, &s, &m), -EINVAL);
    p.times = 1;
    p.batch = 0;
    assert_int_equal(audit_measure_start(f->base, &p, better, &s, &m), -EINVAL);
    p.batch = 64;
    assert_int_equal(audit_measure_start(f->base, &p, NULL, &s, &m), -EINVAL);
    static char longdir[8192];
    memset(longdir, 'a', sizeof(longdir) - 1);
    longdir[0] = '/';
    p.dir = longdir;
    assert_int_equal(audit_measure_start(f->base, &p, better, &s, &m), -ENAMETOOLONG);
    assert_null(m);
    assert_int_equal(open_fds(), fds);
    audit_measure_stop(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_better_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_wakes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwritable_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_params, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
