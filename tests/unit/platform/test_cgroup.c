/* Session cgroups on the real cgroup2 hierarchy (root; skipped without
 * cgroup2). Creates its own base cgroup "lyhtest-<pid>" and removes it. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "platform/linux/cgroup.h"

static struct cg_root root;
static char subtree[64];

static int setup(void **state) {
    snprintf(subtree, sizeof(subtree), "lyhtest-%d", getpid());
    int k = cg_open(subtree, &root);
    if (k == -ENOENT) {
        fprintf(stderr, "no cgroup2 hierarchy here; skipping\n");
        return -1;
    }
    return k;
}

static int teardown(void **state) {
    char path[2 * PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s%s", root.mount, root.base);
    cg_close(&root);
    rmdir(path);
    return 0;
}

static int count_cb(const char *name, void *userdata) {
    (*(int *)userdata)++;
    return 0;
}

static void test_lifecycle(void **state) {
    uint64_t id = 0, id2 = 0;
    int procs = -1, dirfd = -1, pipefd[2], n = 0;
    bool pop = true;
    char path[2 * PATH_MAX + 16];
    struct stat st;

    assert_true(root.session_level >= 2);
    assert_int_equal(cg_create(&root, "s-1", &id, &dirfd, &procs), 0);
    assert_int_equal(cg_create(&root, "s-1", &id2, &dirfd, &procs), -EEXIST);
    struct stat dst;
    assert_int_equal(fstat(dirfd, &dst), 0); /* the directory's fd: same inode as the id */
    assert_int_equal((uint64_t)dst.st_ino, id);
    snprintf(path, sizeof(path), "%s%s/s-1", root.mount, root.base);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal((uint64_t)st.st_ino, id);
    assert_int_equal(cg_id(&root, "s-1", &id2), 0);
    assert_int_equal(id2, id);
    assert_int_equal(cg_populated(&root, "s-1", &pop), 0);
    assert_false(pop);

    /* A child enters the cgroup and forks a grandchild that lingers. */
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (cg_enter(procs) < 0)
            _exit(3);
        if (fork() == 0) {
            for (int i = 0; i < 600; i++)
                sleep(1);
            _exit(0);
        }
        (void)!write(pipefd[1], "x", 1);
        for (int i = 0; i < 600; i++)
            sleep(1);
        _exit(0);
    }
    char c;
    assert_int_equal(read(pipefd[0], &c, 1), 1);
    assert_int_equal(cg_populated(&root, "s-1", &pop), 0);
    assert_true(pop);
    assert_int_equal(cg_remove(&root, "s-1"), -EBUSY);
    assert_int_equal(cg_foreach(&root, count_cb, &n), 0);
    assert_int_equal(n, 1);

    assert_int_equal(cg_kill(&root, "s-1"), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
    /* The grandchild goes too; populated drops once the kernel reaps it. */
    for (int i = 0; i < 200 && pop; i++) {
        assert_int_equal(cg_populated(&root, "s-1", &pop), 0);
        if (pop)
            usleep(10000);
    }
    assert_false(pop);
    assert_int_equal(cg_remove(&root, "s-1"), 0);
    assert_int_equal(cg_remove(&root, "s-1"), 0); /* already gone is fine */
    assert_int_equal(cg_kill(&root, "s-1"), 0);   /* nothing to kill */
    assert_int_equal(cg_id(&root, "s-1", &id2), -ENOENT);
    close(procs);
    close(dirfd);
    close(pipefd[0]);
    close(pipefd[1]);
}

static void test_bad_names(void **state) {
    uint64_t id;
    int fd, dfd2;
    assert_int_equal(cg_create(&root, "../escape", &id, &dfd2, &fd), -EINVAL);
    assert_int_equal(cg_create(&root, "..", &id, &dfd2, &fd), -EINVAL);
    assert_int_equal(cg_create(&root, "", &id, &dfd2, &fd), -EINVAL);
    assert_int_equal(cg_remove(&root, "a/b"), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifecycle),
        cmocka_unit_test(test_bad_names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
