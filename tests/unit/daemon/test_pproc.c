/* The parent's side of the protocol process (daemon/pproc.c, dns_fwd.c),
 * with the test as a compromised protocol process: it sends what a process
 * that parses agents' bytes could send once it runs an attacker's code, and
 * the parent must open nothing. Here the parent has no nft socket at all
 * (d.guard is NULL): any path that would add a set element crashes the test.
 *
 * The session's forwarder sockets are real (SO_MARK needs root), in a network
 * namespace of the test's own; without root the test skips. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <event2/event.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/dns_fwd.h"
#include "daemon/lyhd.h"
#include "daemon/pmsg.h"
#include "daemon/pproc.h"
#include "daemon/session.h"
#include "tests/unit/daemon/lingering.h"

#define SID "0123456789abcdef"

static struct lyhd d;
static struct session *s;
static int peer = -1; /* the "protocol process" end */

static int setup(void **state) {
    (void)state;
    char why[256];
    int sv[2];

    memset(&d, 0, sizeof(d));
    d.cfg.dns_min_ttl_s = 60;
    d.base = event_base_new();
    TAILQ_INIT(&d.sessions);
    s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->d = &d;
    s->pidfd = s->status_fd = s->pty_fd = -1;
    strcpy(s->row.id, SID);
    strcpy(s->spec.iface, "tun0");
    s->spec.n_resolvers = 1;
    s->spec.resolvers[0] = (struct dr_rule){.family = AF_INET, .addr = {10, 77, 0, 2},
                                              .prefix_len = 32};
    assert_int_equal(gspec_add_domain(&s->spec, "allowed.test"), 0);
    TAILQ_INSERT_TAIL(&d.sessions, s, link);
    assert_int_equal(dns_fwd_start(&d, s, why, sizeof(why)), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
    assert_int_equal(pproc_attach_for_test(&d, sv[0]), 0);
    peer = sv[1];
    return 0;
}

static int teardown(void **state) {
    (void)state;
    TAILQ_REMOVE(&d.sessions, s, link);
    dns_fwd_free(s->dns);
    s->dns = NULL;
    free(s);
    pproc_stop(&d);
    close(peer);
    event_base_free(d.base);
    return 0;
}

/* What the parent answered to a DNS_ANSWER (or -EAGAIN: nothing). */
static int answered(uint32_t req) {
    uint8_t buf[PMSG_MAX_BYTES];
    int fds[PMSG_RECV_FDS];
    size_t len, nfds;
    uint16_t type;
    const uint8_t *pl;
    size_t pl_len;
    struct pmsg_dns_answered a;

    for (;;) {
        int r = pmsg_recv(peer, buf, sizeof(buf), &len, fds, &nfds);
        if (r < 0)
            return r;
        assert_int_equal(nfds, 0);
        assert_int_equal(pmsg_header(buf, len, &type, &pl, &pl_len), 0);
        if (type != PMSG_DNS_ANSWERED)
            continue; /* a STOP and such */
        assert_int_equal(pmsg_decode_dns_answered(pl, pl_len, &a), 0);
        assert_int_equal(a.req, req);
        return a.status;
    }
}

static size_t answer(uint8_t *buf, const char *session, const char *name, bool want_reply,
                     uint32_t req, const char *addr) {
    struct pmsg_dns_answer m;
    size_t len;
    memset(&m, 0, sizeof(m));
    strcpy(m.session, session);
    strcpy(m.name, name);
    m.want_reply = want_reply;
    m.req = req;
    m.qtype = 1;
    m.ttl = 60;
    m.n_addrs = 1;
    m.addrs[0].family = AF_INET;
    assert_int_equal(inet_pton(AF_INET, addr, m.addrs[0].addr), 1);
    assert_int_equal(pmsg_encode_dns_answer(&m, buf, PMSG_MAX_BYTES, &len), 0);
    return len;
}

static void test_malformed_ends_it(void **state) {
    (void)state;
    uint8_t buf[PMSG_MAX_BYTES];
    size_t len;

    /* not a message */
    assert_int_equal(pproc_dispatch(&d, (const uint8_t *)"\x00\x02\x00", 3, NULL, 0), -EBADMSG);
    /* READY twice */
    struct pmsg_ready r = {.pid = 1};
    assert_int_equal(pmsg_encode_ready(&r, buf, sizeof(buf), &len), 0);
    assert_int_equal(pproc_dispatch(&d, buf, len, NULL, 0), -EBADMSG);
    /* a DNS message with an fd (only the client connections' carry any): the
     * fd is taken (closed) with the refusal */
    len = answer(buf, SID, "allowed.test", true, 5, "11.77.0.1");
    int extra = dup(0);
    assert_true(extra >= 0);
    assert_int_equal(pproc_dispatch(&d, buf, len, &extra, 1), -EBADMSG);
    assert_int_equal(fcntl(extra, F_GETFD), -1);
    /* the parent's own messages, sent to it */
    struct pmsg_dns_stop st = {.session = SID};
    assert_int_equal(pmsg_encode_dns_stop(&st, buf, sizeof(buf), &len), 0);
    assert_int_equal(pproc_dispatch(&d, buf, len, NULL, 0), -EBADMSG);
    /* a reply asked for with request id 0 */
    len = answer(buf, SID, "allowed.test", true, 0, "11.77.0.1");
    assert_int_equal(pproc_dispatch(&d, buf, len, NULL, 0), -EBADMSG);
    /* nothing was answered to any of it */
    assert_int_equal(answered(0), -EAGAIN);
}

static void test_nothing_opens(void **state) {
    (void)state;
    uint8_t buf[PMSG_MAX_BYTES];
    size_t len;
    char note[256];

    /* no such session */
    len = answer(buf, "00000000000000aa", "allowed.test", true, 1, "11.77.0.1");
    assert_int_equal(pproc_dispatch(&d, buf, len, NULL, 0), 0);
    assert_int_equal(answered(1), -ENOENT);
    /* a name the session may not resolve */
    len = answer(buf, SID, "exfil.allowed.test", true, 2, "11.77.0.1");
    assert_int_equal(pproc_dispatch(&d, buf, len, NULL, 0), 0);
    assert_int_equal(answered(2), -EPERM);
    /* an allowed name, with addresses chain s-<id> refuses: the relay never
     * asks for one, so the process that does is ended (no answer) */
    const char *blocked[] = {"192.168.1.1", "127.0.0.1", "10.0.0.9", "100.64.0.1", "169.254.1.1",
                             "0.0.0.0", "224.0.0.251"};
    for (uint32_t i = 0; i < sizeof(blocked) / sizeof(blocked[0]); i++) {
        len = answer(buf, SID, "allowed.test", true, 10 + i, blocked[i]);
        assert_int_equal(pproc_dispatch(&d, buf, len, NULL, 0), -EBADMSG);
        assert_int_equal(answered(10 + i), -EAGAIN);
    }
    /* an allowlisted answer that asks for no reply opens nothing either */
    len = answer(buf, SID, "allowed.test", false, 0, "11.77.0.1");
    assert_int_equal(pproc_dispatch(&d, buf, len, NULL, 0), 0);
    assert_int_equal(answered(0), -EAGAIN);
    /* and no flow record names an address as resolved for the session */
    uint8_t a[16] = {11, 77, 0, 1};
    dns_fwd_flow_note(s->dns, AF_INET, a, note, sizeof(note));
    assert_non_null(strstr(note, "dns=none"));
    uint8_t b[16] = {192, 168, 1, 1};
    dns_fwd_flow_note(s->dns, AF_INET, b, note, sizeof(note));
    assert_non_null(strstr(note, "dns=none"));
}

/* /proc/PID/stat of a child, read as pproc_tick reads it. */
static bool child_dying(pid_t pid) {
    char path[32], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    assert_true(n > 0);
    buf[n] = '\0';
    return pproc_stat_dying(buf);
}

/* A /proc/PID/stat line (52 fields) with the given name, state, flags and
 * pending signals. */
static const char *stat_line(char *buf, size_t len, const char *comm, char state,
                             unsigned long flags, unsigned long pending) {
    snprintf(buf, len,
             "12 (%s) %c 1 1 1 0 -1 %lu 0 0 0 0 0 0 0 0 20 0 1 0 100 1000 10 "
             "18446744073709551615 1 1 0 0 0 %lu 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0",
             comm, state, flags, pending);
    return buf;
}

static void *sleeper(void *arg) {
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

/* A process whose first thread exited while another lives on (what a
 * protocol process killed with a thread in a FUSE FLUSH looks like) is
 * dying; a live one is not; the name, which the process chooses, cannot
 * make it look either way. */
static void test_dying_from_proc_stat(void **state) {
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        pthread_t t;
        /* a name that reads like a zombie's line to a careless parser */
        (void)prctl(PR_SET_NAME, "x) Z 1 1 1 0 -", 0, 0, 0);
        if (pthread_create(&t, NULL, sleeper, NULL) != 0)
            _exit(1);
        struct timespec ts = {0, 300 * 1000 * 1000};
        nanosleep(&ts, NULL);
        syscall(SYS_exit, 0); /* this thread only */
    }
    assert_false(child_dying(pid)); /* both threads live */
    bool seen = false;
    for (int i = 0; i < 100 && !seen; i++) { /* bounded: 2 s */
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
        seen = child_dying(pid);
    }
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    assert_true(seen);

    char l[512];
    assert_true(pproc_stat_dying(stat_line(l, sizeof(l), "lyhd", 'Z', 4194304, 0)));
    assert_true(pproc_stat_dying(stat_line(l, sizeof(l), "lyhd", 'D', 4194308, 0))); /* PF_EXITING */
    assert_false(pproc_stat_dying(stat_line(l, sizeof(l), "lyhd", 'D', 4194560, 0)));
    assert_false(pproc_stat_dying(stat_line(l, sizeof(l), "lyhd", 'S', 4194560, 1ul << 14)));
    /* SIGKILL pending: its first thread waits where no signal reaches it */
    assert_true(pproc_stat_dying(stat_line(l, sizeof(l), "lyhd", 'D', 4194560, 1ul << 8)));
    /* a name that holds a whole dying line, then a live one */
    char name[300];
    stat_line(name, sizeof(name), "a", 'Z', 4, 256);
    assert_false(pproc_stat_dying(stat_line(l, sizeof(l), name, 'S', 4194560, 0)));
    assert_false(pproc_stat_dying("12 (lyhd) Z 1 1 1 0 -1 4194304 0 0"));   /* cut short */
    assert_false(pproc_stat_dying("12 lyhd Z 1 1 1 0 -1 4"));
    assert_false(pproc_stat_dying(""));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_malformed_ends_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nothing_opens, setup, teardown),
        cmocka_unit_test(test_dying_from_proc_stat),
    };
    /* The forwarder's sockets only in a namespace of our own: never the host's. */
    if (unshare(CLONE_NEWNET) < 0 || !lo_up()) {
        printf("SKIP: needs root to make a network namespace (%s)\n", strerror(errno));
        return 77;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
