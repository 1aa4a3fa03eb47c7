/* platform/linux/proc.c: a process's start time and its label, read from
 * /proc for this test process and a child it made (no root needed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/linux/proc.h"

static void test_start_time(void **state) {
    (void)state;
    uint64_t a = 0, b = 0;
    assert_int_equal(proc_start_time(getpid(), &a), 0);
    assert_int_equal(proc_start_time(getpid(), &b), 0);
    assert_true(a > 0 && a == b);
    assert_int_equal(proc_start_time(getppid(), &b), 0);
    assert_true(b <= a);
}

static void test_label(void **state) {
    (void)state;
    char buf[80];
    /* this process: its comm, the name it was run as (at most 15 chars) */
    assert_int_equal(proc_label(getpid(), buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "test_proc"));
    /* cut to the buffer */
    char small[5];
    assert_int_equal(proc_label(getpid(), small, sizeof(small)), 0);
    assert_int_equal(strlen(small), 4);
    /* a child whose name (comm) carries a terminal escape and a byte over
     * 0x7f: shown as printable ASCII only */
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t c = fork();
    assert_true(c >= 0);
    if (c == 0) {
        prctl(PR_SET_NAME, (unsigned long)"x\x1b[31my\xff", 0, 0, 0);
        (void)!write(p[1], "r", 1);
        pause();
        _exit(0);
    }
    char r;
    assert_int_equal(read(p[0], &r, 1), 1);
    close(p[0]);
    close(p[1]);
    assert_int_equal(proc_label(c, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "x?[31my?");
    kill(c, SIGKILL);
    assert_int_equal(waitpid(c, NULL, 0), c);
    /* gone, and nonsense */
    assert_int_equal(proc_label(c, buf, sizeof(buf)), -ENOENT);
    assert_int_equal(proc_label(0, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(proc_label(getpid(), buf, 1), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_time),
        cmocka_unit_test(test_label),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
