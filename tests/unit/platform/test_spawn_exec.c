/* platform/linux/spawn.c spawn_exec_path: the agent's command found as
 * execvpe would find it, through the PATH of the environment it is given
 * (not the caller's environ). Each case runs in a forked child that execs
 * through it; the exit status and an output file say what ran. No root. */
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/linux/spawn.h"

static char dir[] = "/tmp/lyh-spawnexec.XXXXXX";

/* Run argv with envp through spawn_exec_path in a child: its exit status, or
 * 200 + the errno it returned. */
static int run(char *const *argv, char *const *envp) {
    pid_t pid = fork();
    int st;
    if (pid == 0) {
        int e = spawn_exec_path(argv, envp);
        _exit(200 + (e > 50 ? 50 : e));
    }
    assert_true(pid > 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void put(const char *name, const char *text, mode_t mode) {
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(chmod(p, mode), 0);
}

static int setup(void **state) {
    (void)state;
    if (!mkdtemp(dir))
        return -1;
    char sub[256];
    snprintf(sub, sizeof(sub), "%s/bin", dir);
    if (mkdir(sub, 0755) < 0)
        return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_path_of_envp(void **state) {
    (void)state;
    char path[300];
    /* a script found in the second entry, the first missing */
    put("bin/lyhx", "#!/bin/sh\nexit 7\n", 0755);
    snprintf(path, sizeof(path), "PATH=/nonexistent-lyh:%s/bin", dir);
    char *env[] = {path, NULL};
    char *argv[] = {"lyhx", NULL};
    assert_int_equal(run(argv, env), 7);
    /* not found: ENOENT, though the caller's own PATH has /bin */
    char *env2[] = {"PATH=/nonexistent-lyh", NULL};
    char *argv2[] = {"true", NULL};
    assert_int_equal(run(argv2, env2), 200 + ENOENT);
    /* no PATH at all: glibc's default, /bin:/usr/bin */
    char *env3[] = {"HOME=/", NULL};
    assert_int_equal(run(argv2, env3), 0);
}

static void test_eacces_remembered(void **state) {
    (void)state;
    char path[300];
    /* found first but not executable, nothing after it: EACCES, not ENOENT
     * (root may run anything with an x bit: give it none) */
    put("bin/lyhnox", "#!/bin/sh\nexit 3\n", 0644);
    snprintf(path, sizeof(path), "PATH=%s/bin:/nonexistent-lyh", dir);
    char *env[] = {path, NULL};
    char *argv[] = {"lyhnox", NULL};
    assert_int_equal(run(argv, env), 200 + EACCES);
    /* ... past later entries that do not have it */
    snprintf(path, sizeof(path), "PATH=%s/bin:/nonexistent-lyh:/bin", dir);
    char *env2[] = {path, NULL};
    assert_int_equal(run(argv, env2), 200 + EACCES);
    /* ... and a later entry that has one it can run wins */
    put("bin/true", "", 0644);
    snprintf(path, sizeof(path), "PATH=%s/bin:/bin:/usr/bin", dir);
    char *env3[] = {path, NULL};
    char *argv3[] = {"true", NULL};
    assert_int_equal(run(argv3, env3), 0);
}

static void test_slash_and_enoexec(void **state) {
    (void)state;
    char file[300], out[300], cmd[600];
    /* a name with a slash is run as it is, PATH not looked at */
    put("direct", "#!/bin/sh\nexit 5\n", 0755);
    snprintf(file, sizeof(file), "%s/direct", dir);
    char *env[] = {"PATH=/nonexistent-lyh", NULL};
    char *argv[] = {file, NULL};
    assert_int_equal(run(argv, env), 5);
    /* no #! line: ENOEXEC, then /bin/sh runs it with the arguments */
    snprintf(out, sizeof(out), "%s/out", dir);
    snprintf(cmd, sizeof(cmd), "echo \"$1 $2\" > '%s'\nexit 9\n", out);
    put("noshebang", cmd, 0755);
    snprintf(file, sizeof(file), "%s/noshebang", dir);
    char *argv2[] = {file, "a1", "a2", NULL};
    assert_int_equal(run(argv2, env), 9);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    char line[64] = "";
    assert_non_null(fgets(line, sizeof(line), f));
    fclose(f);
    assert_string_equal(line, "a1 a2\n");
    /* an empty name */
    char *argv3[] = {"", NULL};
    assert_int_equal(run(argv3, env), 200 + ENOENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_of_envp),
        cmocka_unit_test(test_eacces_remembered),
        cmocka_unit_test(test_slash_and_enoexec),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
