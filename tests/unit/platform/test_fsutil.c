/* platform/linux/fsutil.c: the remover's fd closing where close_range is
 * missing (kernels before 5.9): nothing of lyhd's may stay open in a process
 * that then runs as the session's user. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/linux/fsutil.h"

static int is_open(int fd) {
    return fcntl(fd, F_GETFD) >= 0;
}

/* An fd number near the top of what this process may open (the soft
 * limit), so the test holds under `ulimit -n` as low as 64. */
static int high_fd(int below_top) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < 64)
        return -1;
    rlim_t top = rl.rlim_cur > 4096 ? 4096 : rl.rlim_cur;
    return (int)top - below_top;
}

/* In a child (its fds are its own): a pipe, a socketpair, one high fd and
 * one without CLOEXEC; after fs_close_fds_from(3) only 0-2 are left. */
static void test_close_fds_from(void **state) {
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int p[2], sp[2], code = 0, hi = high_fd(1);
        if (hi < 0 || pipe2(p, O_CLOEXEC) < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0 ||
            dup2(p[1], hi) != hi)
            _exit(10);
        if (!is_open(p[0]) || !is_open(sp[1]) || !is_open(hi))
            _exit(11);
        if (fs_close_fds_from(3) < 0)
            _exit(12);
        for (int fd = 3; fd <= hi; fd++)
            if (is_open(fd))
                code = 13;
        for (int fd = 0; fd < 3; fd++)
            if (!is_open(fd))
                code = 14;
        _exit(code);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* A first fd above some open ones leaves those alone. */
static void test_close_fds_from_keeps_below(void **state) {
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int hi = high_fd(2);
        if (hi <= 41 || dup2(0, 40) != 40 || dup2(0, 41) != 41 || dup2(0, hi) != hi)
            _exit(10);
        if (fs_close_fds_from(41) < 0)
            _exit(12);
        _exit(is_open(40) && !is_open(41) && !is_open(hi) ? 0 : 13);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_close_fds_from),
        cmocka_unit_test(test_close_fds_from_keeps_below),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
