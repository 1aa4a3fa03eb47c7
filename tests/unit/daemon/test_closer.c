/* daemon/closer.c: a close that would block (a TCP socket with SO_LINGER and
 * a full send queue, as a client could hand lyhd) never runs on the caller's
 * thread, stalls only its own user's later closes, and is interrupted by the
 * watchdog. The TCP pair lives on the loopback of a network namespace this
 * test makes (root); without root the test skips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "daemon/closer.h"
#include "tests/unit/daemon/lingering.h"

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void test_lingering_close_off_the_caller(void **state) {
    struct closer *c = NULL;
    int server, listener, sp[2];
    uint64_t t0, dt;
    (void)state;

    assert_int_equal(closer_start(&c), 0);
    int fd = lingering_socket(&server, &listener);

    /* The caller (the event loop) is back at once. */
    t0 = now_ms();
    closer_close(c, 1001, fd);
    dt = now_ms() - t0;
    assert_true(dt < 100);
    assert_int_equal(closer_pending(c, 1001), 1);

    /* Another user's close that may block (an AF_UNIX socket) is not held up
     * behind the first user's. */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    close(sp[1]);
    closer_close(c, 1002, sp[0]);
    for (int i = 0; i < 100 && closer_pending(c, 1002); i++)
        usleep(10000);
    assert_int_equal(closer_pending(c, 1002), 0);
    assert_int_equal(closer_pending(c, 1001), 1); /* still lingering */

    /* The watchdog's interrupt ends the linger wait. */
    usleep(300 * 1000);
    closer_poke(c, 200);
    for (int i = 0; i < 200 && closer_pending(c, 1001); i++)
        usleep(10000);
    assert_int_equal(closer_pending(c, 1001), 0);
    assert_true(now_ms() - t0 < 5000); /* not the 30 s linger */

    closer_stop(c);
    close(server);
    close(listener);
}

/* An AF_UNIX socket (a kind whose close may block): closed through the
 * workers, never at once. Its peer is closed already. */
static int unix_fd(void) {
    int sp[2];

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    close(sp[1]);
    return sp[0];
}

/* Wake-ups: an fd queued behind a busy queue wakes nobody and is closed by
 * that queue's worker once its close returns; fds of other users queued at
 * once, several each, are all closed meanwhile by the idle workers. No fd is
 * left behind. */
static void test_queued_behind_a_busy_queue(void **state) {
    struct closer *c = NULL;
    int server, listener, mine[3], others[2][4];
    (void)state;

    assert_int_equal(closer_start(&c), 0);
    closer_close(c, 1001, lingering_socket(&server, &listener));
    usleep(50 * 1000); /* its worker is in the close */
    for (int i = 0; i < 3; i++)
        closer_close(c, 1001, mine[i] = unix_fd());
    for (int u = 0; u < 2; u++)
        for (int i = 0; i < 4; i++)
            closer_close(c, 1002 + (uid_t)u, others[u][i] = unix_fd());
    for (int i = 0; i < 200 && closer_total_pending(c) > 4; i++)
        usleep(10000);
    assert_int_equal(closer_pending(c, 1002), 0);
    assert_int_equal(closer_pending(c, 1003), 0);
    for (int u = 0; u < 2; u++)
        for (int i = 0; i < 4; i++)
            assert_int_equal(fcntl(others[u][i], F_GETFD), -1);
    /* the lingering one and the three behind it */
    assert_int_equal(closer_pending(c, 1001), 4);
    for (int i = 0; i < 3; i++)
        assert_true(fcntl(mine[i], F_GETFD) >= 0);

    closer_poke(c, 0);
    for (int i = 0; i < 200 && closer_pending(c, 1001); i++)
        usleep(10000);
    assert_int_equal(closer_pending(c, 1001), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(fcntl(mine[i], F_GETFD), -1);
    closer_stop(c);
    close(server);
    close(listener);
}

static void test_safe_kinds_close_at_once(void **state) {
    struct closer *c = NULL;
    int p[2];
    (void)state;

    assert_int_equal(closer_start(&c), 0);
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    closer_close(c, 1001, p[0]);
    assert_int_equal(closer_pending(c, 1001), 0);
    assert_int_equal(fcntl(p[0], F_GETFD), -1); /* closed before the call returned */
    close(p[1]);
    closer_stop(c);
    /* Without workers (tests, startup): closed inline. */
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    closer_close(NULL, 1001, p[1]);
    assert_int_equal(fcntl(p[1], F_GETFD), -1);
    close(p[0]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lingering_close_off_the_caller),
        cmocka_unit_test(test_queued_behind_a_busy_queue),
        cmocka_unit_test(test_safe_kinds_close_at_once),
    };
    /* Loopback TCP only in a namespace of our own: never the host's. */
    if (unshare(CLONE_NEWNET) < 0 || !lo_up()) {
        printf("SKIP: needs root to make a network namespace (%s)\n", strerror(errno));
        return 77;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
