/* The daemon's clocks, in milliseconds, and the deadlines, joins and starts
 * of its threads (declared in lyhd.h). Part of lyhd_core, so tests that link
 * the core get the real ones. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "daemon/lyhd.h"

uint64_t lyhd_mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t lyhd_mono_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int64_t lyhd_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec lyhd_deadline(clockid_t clock, unsigned ms) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

int lyhd_join_within(pthread_t t, unsigned ms) {
    struct timespec until = lyhd_deadline(CLOCK_MONOTONIC, ms);
    return -pthread_clockjoin_np(t, NULL, CLOCK_MONOTONIC, &until);
}

int lyhd_thread_start(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = -pthread_create(t, attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}
