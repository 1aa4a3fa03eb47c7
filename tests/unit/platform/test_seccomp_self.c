/* Unit tests for platform/linux/seccomp_self.c, the protocol process's own
 * allowlist, against the running kernel: each check runs in a forked child
 * that sets NO_NEW_PRIVS, installs the filter and makes one real system call.
 * Allowed calls must work; anything outside the list must kill the child
 * with SIGSYS (a denied call is never just an error). The filter covers
 * threads started before it too (the protocol process's closer): one that
 * opens a file afterwards kills the child; one that closes an fd (what the
 * closer's workers do) does not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/sockios.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "platform/linux/seccomp_self.h"

/* exit codes of a child that was not killed */
enum { CHILD_OK = 0, CHILD_SETUP = 90, CHILD_CALL_FAILED = 91 };

/* Fork, confine the child, run call(arg) there: the child's wait status. */
static int in_child(int (*call)(int), int arg) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || sc_confine_protocol_self() < 0)
            _exit(CHILD_SETUP);
        _exit(call(arg) == 0 ? CHILD_OK : CHILD_CALL_FAILED);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

static void expect_allowed(int st) {
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), CHILD_OK);
}

static void expect_killed(int st) {
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGSYS);
}

/* What a client's socket still holds unread (proto_clients.c): allowed, and
 * it reads 0 on an empty queue, the bytes after a write. */
static int outq(int fd) {
    int n = -1;
    if (ioctl(fd, SIOCOUTQ, &n) < 0 || n != 0)
        return -1;
    if (write(fd, "abc", 3) != 3 || ioctl(fd, SIOCOUTQ, &n) < 0 || n <= 0)
        return -1;
    return 0;
}

static int inq(int fd) {
    int n = -1;
    return ioctl(fd, FIONREAD, &n) < 0 || n != 0 ? -1 : 0;
}

static int tiocsti(int fd) {
    char c = 'x';
    (void)ioctl(fd, TIOCSTI, &c);
    return 0;
}

static int fionbio(int fd) {
    int on = 1;
    (void)ioctl(fd, FIONBIO, &on);
    return 0;
}

static int open_file(int unused) {
    (void)unused;
    (void)open("/etc/hostname", O_RDONLY | O_CLOEXEC);
    return 0;
}

static int udp_socket(int unused) {
    (void)unused;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    return s < 0 ? -1 : 0;
}

static int tcp_socket(int unused) {
    (void)unused;
    (void)socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    return 0;
}

/* A thread started before the filter: it waits for a byte on a pipe, then
 * makes its call; the child then ends as that call lets it. */
static int thread_call; /* 0: open a file, 1: close an fd */
static int thread_pipe[2], ready_pipe[2];

static void *thread_main(void *arg) {
    char c;
    (void)arg;
    /* running: glibc's start of the thread (rseq, the robust list) is over */
    if (write(ready_pipe[1], "r", 1) != 1 || read(thread_pipe[0], &c, 1) != 1)
        return NULL;
    if (thread_call == 0)
        (void)open("/etc/hostname", O_RDONLY | O_CLOEXEC);
    else
        (void)close(thread_pipe[1]);
    return NULL;
}

static int thread_child(int call) {
    pthread_t t;
    thread_call = call;
    char c;
    if (pipe2(thread_pipe, O_CLOEXEC) < 0 || pipe2(ready_pipe, O_CLOEXEC) < 0 ||
        pthread_create(&t, NULL, thread_main, NULL) != 0 || read(ready_pipe[0], &c, 1) != 1)
        _exit(CHILD_SETUP);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || sc_confine_protocol_self() < 0)
        _exit(CHILD_SETUP);
    if (write(thread_pipe[1], "x", 1) != 1)
        _exit(CHILD_CALL_FAILED);
    pthread_join(t, NULL);
    return 0;
}

static void test_threads_started_before(void **state) {
    (void)state;
    for (int call = 0; call < 2; call++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            _exit(thread_child(call) == 0 ? CHILD_OK : CHILD_CALL_FAILED);
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (call == 0)
            expect_killed(st);
        else
            expect_allowed(st);
    }
}

static void test_queue_ioctls_allowed(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    expect_allowed(in_child(outq, sv[0]));
    expect_allowed(in_child(inq, sv[0]));
    close(sv[0]);
    close(sv[1]);
}

static void test_other_ioctls_kill(void **state) {
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    expect_killed(in_child(tiocsti, sv[0]));
    expect_killed(in_child(fionbio, sv[0]));
    close(sv[0]);
    close(sv[1]);
}

static void test_files_and_streams_kill(void **state) {
    (void)state;
    expect_killed(in_child(open_file, 0));
    expect_killed(in_child(tcp_socket, 0));
    expect_allowed(in_child(udp_socket, 0)); /* the upstream queries' sockets */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_ioctls_allowed),
        cmocka_unit_test(test_other_ioctls_kill),
        cmocka_unit_test(test_files_and_streams_kill),
        cmocka_unit_test(test_threads_started_before),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
