/* platform/linux/fdkind.c: which client fds lyhd takes, and which closes may
 * wait on someone else (issue: a client's lingering TCP socket froze the
 * event loop's close for 18 s). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "platform/linux/fdkind.h"

static void expect_kind(int fd, enum fdk_kind kind, bool may_block, const char *what) {
    struct fdk_info i;

    assert_true(fd >= 0);
    assert_int_equal(fdk_classify(fd, &i), 0);
    if (i.kind != kind || i.close_may_block != may_block || !strstr(i.what, what))
        fail_msg("fd %d: kind %d may_block %d \"%s\", want kind %d may_block %d \"%s\"", fd,
                 i.kind, i.close_may_block, i.what, kind, may_block, what);
    close(fd);
}

static void test_kinds_run_takes(void **state) {
    int p[2], sp[2];
    char tmpl[] = "/tmp/lyh-fdkind-XXXXXX";
    (void)state;

    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    expect_kind(p[0], FDK_PIPE, false, "pipe");
    expect_kind(p[1], FDK_PIPE, false, "pipe");
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    /* A unix socket may carry in-flight fds: its close may block. */
    expect_kind(sp[0], FDK_UNIX, true, "AF_UNIX stream socket");
    close(sp[1]);
    expect_kind(open("/dev/null", O_RDWR | O_CLOEXEC), FDK_NULLDEV, false, "null-like");
    expect_kind(open("/dev/zero", O_RDONLY | O_CLOEXEC), FDK_NULLDEV, false, "null-like");
    expect_kind(open("/dev/urandom", O_RDONLY | O_CLOEXEC), FDK_NULLDEV, false, "null-like");
    int f = mkstemp(tmpl);
    assert_true(f >= 0);
    unlink(tmpl);
    expect_kind(f, FDK_FILE, true, "regular file");
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    assert_true(m >= 0);
    assert_int_equal(grantpt(m), 0);
    assert_int_equal(unlockpt(m), 0);
    expect_kind(open(ptsname(m), O_RDWR | O_NOCTTY | O_CLOEXEC), FDK_TTY, false, "pseudo-terminal");
    close(m);
}

static void test_kinds_refused(void **state) {
    (void)state;
    /* Only created, never connected: no traffic. */
    expect_kind(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), FDK_REFUSED, true,
                "AF_INET stream socket");
    expect_kind(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0), FDK_REFUSED, true,
                "AF_INET6 datagram socket");
    expect_kind(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC), FDK_REFUSED, true, "directory");
    expect_kind(eventfd(0, EFD_CLOEXEC), FDK_REFUSED, true, "file of type");
    /* memfd: a file on an internal mount, not one lyhd can see. */
    expect_kind(memfd_create("lyh-test", MFD_CLOEXEC), FDK_REFUSED, true, "cannot see");
    /* A character device that is neither a terminal nor null-like. */
    int kmsg = open("/dev/kmsg", O_RDONLY | O_CLOEXEC);
    if (kmsg >= 0)
        expect_kind(kmsg, FDK_REFUSED, true, "character device 1:11");
}

static void test_mount_fstype(void **state) {
    char buf[64];
    (void)state;
    assert_int_equal(fdk_mount_fstype(0xffffffffull, buf, sizeof(buf)), -ENOENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kinds_run_takes),
        cmocka_unit_test(test_kinds_refused),
        cmocka_unit_test(test_mount_fstype),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
