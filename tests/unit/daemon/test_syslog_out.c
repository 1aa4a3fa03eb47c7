/* daemon/syslog_out.c, the audit records' non-blocking way to syslog, against
 * a real unix datagram socket standing for /dev/log: records arrive in order
 * and framed as syslog(3) frames them; a reader that stops reading never
 * blocks the caller, and what the bounded queue could not hold is announced
 * by one gap element exactly where the records are missing; a reader that
 * goes away and comes back gets what waited. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "daemon/syslog_out.h"

struct fix {
    char dir[64];
    char path[96];
    int rd; /* the "syslog daemon": a bound, non-blocking datagram socket */
    struct event_base *base;
    struct syslog_out *so;
};

static int bind_reader(struct fix *f) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static int setup(void **state) {
    struct fix *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/lyh-syslog-test.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/log.sock", f->dir);
    f->rd = bind_reader(f);
    f->base = event_base_new();
    assert_non_null(f->base);
    f->so = syslog_out_new(f->base, f->path);
    assert_non_null(f->so);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fix *f = *state;

    syslog_out_free(f->so);
    event_base_free(f->base);
    if (f->rd >= 0)
        close(f->rd);
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What the reader got: each datagram's message (after "lyhd[PID]: "), in order. */
struct got {
    char **msg;
    size_t n, cap;
};

static void got_free(struct got *g) {
    for (size_t i = 0; i < g->n; i++)
        free(g->msg[i]);
    free(g->msg);
    memset(g, 0, sizeof(*g));
}

/* Read every datagram waiting; checks each one's frame (PRI authpriv.info or
 * .warning, ident lyhd with our pid). Returns how many were read. */
static size_t read_all(struct fix *f, struct got *g) {
    static char buf[65536];
    char ident[64];
    size_t k = 0;

    snprintf(ident, sizeof(ident), " lyhd[%ld]: ", (long)getpid());
    for (;;) {
        ssize_t r = recv(f->rd, buf, sizeof(buf) - 1, 0);
        if (r < 0) {
            assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
            return k;
        }
        buf[r] = '\0';
        assert_true(strncmp(buf, "<86>", 4) == 0 || strncmp(buf, "<84>", 4) == 0);
        char *m = strstr(buf, ident);
        assert_non_null(m);
        if (g->n == g->cap) {
            g->cap = g->cap ? g->cap * 2 : 64;
            g->msg = realloc(g->msg, g->cap * sizeof(*g->msg));
            assert_non_null(g->msg);
        }
        g->msg[g->n] = strdup(m + strlen(ident));
        assert_non_null(g->msg[g->n]);
        g->n++;
        k++;
    }
}

/* Read and run the loop until want datagrams arrived (at most secs). */
static void pump(struct fix *f, struct got *g, size_t want, double secs) {
    double end = now_s() + secs;

    while (g->n < want && now_s() < end) {
        read_all(f, g);
        event_base_loop(f->base, EVLOOP_NONBLOCK);
        struct pollfd p = {.fd = f->rd, .events = POLLIN};
        poll(&p, 1, 10);
    }
    read_all(f, g);
}

/* Read and run the loop until nothing arrived for quiet seconds (at most secs). */
static void pump_quiet(struct fix *f, struct got *g, double quiet, double secs) {
    double end = now_s() + secs, last = now_s();

    while (now_s() < end && now_s() - last < quiet) {
        if (read_all(f, g))
            last = now_s();
        event_base_loop(f->base, EVLOOP_NONBLOCK);
        struct pollfd p = {.fd = f->rd, .events = POLLIN};
        poll(&p, 1, 10);
    }
}

static void test_in_order_and_framed(void **state) {
    struct fix *f = *state;
    struct got g = {0};

    syslog_out_send(f->so, 6, "[lyh@32473 id=\"1\" kind=\"session\"]");
    syslog_out_send(f->so, 4, "[lyh@32473 id=\"2\" kind=\"flow\" verdict=\"denied\"]");
    syslog_out_send(f->so, 6, "[lyh@32473 id=\"3\" kind=\"session\"]");
    pump(f, &g, 3, 5);
    assert_int_equal(g.n, 3);
    assert_string_equal(g.msg[0], "[lyh@32473 id=\"1\" kind=\"session\"]");
    assert_string_equal(g.msg[1], "[lyh@32473 id=\"2\" kind=\"flow\" verdict=\"denied\"]");
    assert_string_equal(g.msg[2], "[lyh@32473 id=\"3\" kind=\"session\"]");
    got_free(&g);
}

/* A reader that does not read: the caller never blocks; the queue holds what
 * it can (bounded); the rest is one gap element right after the last record
 * that was kept; once the reader reads, everything kept arrives in order. */
static void test_full_queue_is_one_gap_in_place(void **state) {
    struct fix *f = *state;
    struct got g = {0};
    enum { N = 6000 }; /* ~6 MB of records against a 4 MiB queue */
    char msg[1100];
    char pad[1001];

    memset(pad, 'x', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    double t0 = now_s();
    for (int i = 0; i < N; i++) {
        snprintf(msg, sizeof(msg), "[lyh@32473 id=\"%d\" detail=\"%s\"]", i, pad);
        syslog_out_send(f->so, 6, msg);
    }
    /* not a timing goal: only that nothing waited for the reader */
    assert_true(now_s() - t0 < 30);
    pump_quiet(f, &g, 0.5, 20);

    size_t kept = 0;
    while (kept < g.n && strstr(g.msg[kept], "kind=\"gap\"") == NULL) {
        int id = -1;
        assert_int_equal(sscanf(g.msg[kept], "[lyh@32473 id=\"%d\"", &id), 1);
        assert_int_equal(id, (int)kept); /* in order, none skipped */
        kept++;
    }
    assert_true(kept > 0 && kept < N);
    /* the queue's bound held, and was used: beyond the datagrams the socket
     * itself took (max_dgram_qlen), the queue kept between 3.5 and 4 MiB */
    size_t qlen = 512;
    FILE *fp = fopen("/proc/sys/net/unix/max_dgram_qlen", "r");
    if (fp) {
        assert_int_equal(fscanf(fp, "%zu", &qlen), 1);
        fclose(fp);
    }
    assert_true(kept <= qlen + 1 + SYSLOG_OUT_QUEUE_MAX / 1000);
    assert_true(kept >= SYSLOG_OUT_QUEUE_MAX / 1200);
    assert_int_equal(g.n, kept + 1); /* one gap element, last */
    char want[128];
    snprintf(want, sizeof(want), "[lyh@32473 kind=\"gap\" action=\"syslog\" lost=\"%zu\"]",
             (size_t)N - kept);
    assert_string_equal(g.msg[kept], want);

    /* and records flow again after it, with no second gap */
    syslog_out_send(f->so, 6, "[lyh@32473 id=\"after\"]");
    pump(f, &g, kept + 2, 5);
    assert_int_equal(g.n, kept + 2);
    assert_string_equal(g.msg[kept + 1], "[lyh@32473 id=\"after\"]");
    got_free(&g);
}

/* The syslog daemon restarts: records wait, then arrive in order from the
 * reconnect timer, with nothing lost and no gap. */
static void test_reader_gone_then_back(void **state) {
    struct fix *f = *state;
    struct got g = {0};

    syslog_out_send(f->so, 6, "[lyh@32473 id=\"1\"]");
    pump(f, &g, 1, 5);
    assert_int_equal(g.n, 1);
    close(f->rd);
    f->rd = -1;
    unlink(f->path);
    syslog_out_send(f->so, 6, "[lyh@32473 id=\"2\"]");
    syslog_out_send(f->so, 6, "[lyh@32473 id=\"3\"]");
    event_base_loop(f->base, EVLOOP_NONBLOCK);
    f->rd = bind_reader(f);
    pump(f, &g, 3, 5); /* the retry runs once a second */
    assert_int_equal(g.n, 3);
    assert_string_equal(g.msg[1], "[lyh@32473 id=\"2\"]");
    assert_string_equal(g.msg[2], "[lyh@32473 id=\"3\"]");
    got_free(&g);
}

/* A record that cannot be framed (longer than any syslog datagram) with
 * nothing waiting: the next record is preceded by a gap element for it. */
static void test_lost_with_nothing_queued(void **state) {
    struct fix *f = *state;
    struct got g = {0};
    size_t big = 64 * 1024;
    char *m = malloc(big + 1);

    assert_non_null(m);
    memset(m, 'y', big);
    m[big] = '\0';
    syslog_out_send(f->so, 6, m);
    free(m);
    syslog_out_send(f->so, 6, "[lyh@32473 id=\"next\"]");
    pump(f, &g, 2, 5);
    assert_int_equal(g.n, 2);
    assert_string_equal(g.msg[0], "[lyh@32473 kind=\"gap\" action=\"syslog\" lost=\"1\"]");
    assert_string_equal(g.msg[1], "[lyh@32473 id=\"next\"]");
    got_free(&g);
}

/* A path that cannot be a unix socket address is refused at once. */
static void test_path_too_long(void **state) {
    (void)state;
    char p[200];
    struct event_base *b = event_base_new();

    assert_non_null(b);
    memset(p, 'a', sizeof(p) - 1);
    p[0] = '/';
    p[sizeof(p) - 1] = '\0';
    errno = 0;
    assert_null(syslog_out_new(b, p));
    assert_int_equal(errno, ENAMETOOLONG);
    event_base_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_in_order_and_framed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_queue_is_one_gap_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_gone_then_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lost_with_nothing_queued, setup, teardown),
        cmocka_unit_test(test_path_too_long),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
