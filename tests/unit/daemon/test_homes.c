/* daemon/homes.c with a passwd file of the test's own: a directory at,
 * above or below another human account's home is told, the caller's own
 * home and system accounts' are not, nothing is known before the first read,
 * an account added to the file is known within the poll interval, and so is a
 * home made after its account. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/homes.h"

static char root[64], passwd[96];

static void write_passwd(const char *extra) {
    char tmp[128];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.new", passwd);
    f = fopen(tmp, "w");
    assert_non_null(f);
    fprintf(f, "root:x:0:0:root:/root:/bin/sh\n");
    fprintf(f, "sys:x:3:3:sys:%s:/usr/sbin/nologin\n", root); /* a system account: not human */
    fprintf(f, "alice:x:1001:1001::%s/home/alice:/bin/sh\n", root);
    fprintf(f, "bob:x:1002:1002::%s/home/bob:/bin/sh\n", root);
    fprintf(f, "nobody:x:65534:65534::%s/home:/usr/sbin/nologin\n", root);
    if (extra)
        fputs(extra, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, passwd), 0); /* a new inode, as useradd leaves */
}

static int dir_fd(const char *rel) {
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

static int near(struct homes *h, const char *rel, uid_t caller, char *who, size_t wholen) {
    int fd = dir_fd(rel);
    int r = homes_near_other(h, fd, caller, who, wholen);
    close(fd);
    return r;
}

static void wait_generation(struct homes *h, unsigned at_least) {
    for (int i = 0; i < 1000 && homes_generation(h) < at_least; i++)
        usleep(10 * 1000);
    assert_true(homes_generation(h) >= at_least);
}

static void test_homes(void **state) {
    (void)state;
    struct homes *h = NULL;
    char who[300], cmd[400];

    snprintf(root, sizeof(root), "/tmp/lyh-homes-XXXXXX");
    assert_non_null(mkdtemp(root));
    snprintf(passwd, sizeof(passwd), "%s/passwd", root);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s/home/alice/src' '%s/home/bob/x' '%s/home/carol' '%s/other'",
             root, root, root, root);
    assert_int_equal(system(cmd), 0);
    write_passwd(NULL);

    assert_int_equal(homes_start(passwd, &h), 0);
    wait_generation(h, 1);

    /* bob asks: at, below and above alice's home are told, with her name */
    assert_int_equal(near(h, "home/alice", 1002, who, sizeof(who)), 1);
    assert_non_null(strstr(who, "alice ("));
    assert_int_equal(near(h, "home/alice/src", 1002, who, sizeof(who)), 1);
    assert_int_equal(near(h, "home", 1002, who, sizeof(who)), 1);
    assert_int_equal(near(h, ".", 1002, who, sizeof(who)), 1);
    /* his own home, a directory beside the homes: not */
    assert_int_equal(near(h, "home/bob/x", 1002, who, sizeof(who)), 0);
    assert_int_equal(near(h, "other", 1002, who, sizeof(who)), 0);
    /* a system account's home (root's tmpdir here) and nobody's do not count:
     * "other" lies below both and was not told above */

    /* carol is added: known within the poll interval */
    assert_int_equal(near(h, "home/carol", 1002, who, sizeof(who)), 0);
    unsigned g = homes_generation(h);
    char extra[400];
    snprintf(extra, sizeof(extra), "carol:x:1003:1003::%s/home/carol:/bin/sh\n", root);
    write_passwd(extra);
    wait_generation(h, g + 1);
    assert_int_equal(near(h, "home/carol", 1002, who, sizeof(who)), 1);
    assert_non_null(strstr(who, "carol ("));

    /* dave's account comes before his home (pam_mkhomedir, useradd): the
     * home is known once it is made, with the passwd file unchanged */
    snprintf(extra, sizeof(extra), "carol:x:1003:1003::%s/home/carol:/bin/sh\n"
             "dave:x:1004:1004::%s/dave-home:/bin/sh\n", root, root);
    g = homes_generation(h);
    write_passwd(extra);
    wait_generation(h, g + 1);
    g = homes_generation(h);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s/dave-home/w'", root);
    assert_int_equal(system(cmd), 0);
    wait_generation(h, g + 1);
    assert_int_equal(near(h, "dave-home/w", 1002, who, sizeof(who)), 1);
    assert_non_null(strstr(who, "dave ("));
    homes_stop(h);

    /* nothing read yet (a file that is not there): fail closed */
    assert_int_equal(unlink(passwd), 0);
    assert_int_equal(homes_start(passwd, &h), 0);
    usleep(50 * 1000);
    assert_int_equal(near(h, "other", 1002, who, sizeof(who)), -EAGAIN);
    homes_stop(h);

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_homes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
