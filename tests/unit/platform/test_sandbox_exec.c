/* The macOS launch (platform/darwin/sandbox_exec.c), run on Linux.
 *
 * Profile files (mode, atomic write, names), the argv handed to sandbox-exec,
 * and the forked child's pipeline: as root, a stand-in for sandbox-exec
 * reports the ids, groups, cwd and environment it runs with and then execs
 * the agent, so the credential drop and the exact arguments are checked for
 * real; failures in the child come back through the status pipe. That
 * Seatbelt enforces the profile is checked on a Mac only. */
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
#include <sys/wait.h>
#include <unistd.h>

#include "common/macros.h"
#include "platform/darwin/sandbox_exec.h"

static char tmpdir[64];

static int setup(void **state) {
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/lyh-sbx-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    return chmod(tmpdir, 0755);
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_argv(void **state) {
    (void)state;
    char *agent[] = {"-rf", "x", NULL}; /* looks like an option: must stay the agent's */
    char **v = NULL;

    assert_int_equal(sbx_argv(SBX_SANDBOX_EXEC, "/p/s.sb", agent, &v), 0);
    assert_string_equal(v[0], "/usr/bin/sandbox-exec");
    assert_string_equal(v[1], "-f");
    assert_string_equal(v[2], "/p/s.sb");
    assert_string_equal(v[3], "--");
    assert_string_equal(v[4], "-rf");
    assert_string_equal(v[5], "x");
    assert_null(v[6]);
    free(v);

    char *empty[] = {NULL};
    assert_int_equal(sbx_argv(SBX_SANDBOX_EXEC, "/p/s.sb", empty, &v), -EINVAL);
    assert_int_equal(sbx_argv("sandbox-exec", "/p/s.sb", agent, &v), -EINVAL);
    assert_int_equal(sbx_argv(SBX_SANDBOX_EXEC, "s.sb", agent, &v), -EINVAL);
}

static void test_profile_files(void **state) {
    (void)state;
    char dir[128], path[256];
    int fd = -1;

    snprintf(dir, sizeof(dir), "%s/profiles", tmpdir);
    assert_int_equal(sbx_profile_dir_open(dir, &fd), 0);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0711);

    mode_t old = umask(077); /* the profile must stay readable after the drop */
    assert_int_equal(sbx_profile_write(fd, dir, "abc-123_x", "(version 1)\n", path, sizeof(path)),
                     0);
    umask(old);
    char want[256];
    snprintf(want, sizeof(want), "%s/abc-123_x.sb", dir);
    assert_string_equal(path, want);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    assert_int_equal(st.st_uid, geteuid());
    char buf[64] = "";
    FILE *f = fopen(path, "re");
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    assert_string_equal(buf, "(version 1)\n");
    snprintf(want, sizeof(want), "%s/.abc-123_x.sb.tmp", dir);
    assert_int_equal(access(want, F_OK), -1);

    /* replace in place, then remove */
    assert_int_equal(sbx_profile_write(fd, dir, "abc-123_x", "(version 1)\n;2\n", path,
                                       sizeof(path)),
                     0);
    assert_int_equal(sbx_profile_remove(fd, "abc-123_x"), 0);
    assert_int_equal(sbx_profile_remove(fd, "abc-123_x"), -ENOENT);

    /* names that could leave the directory or collide are refused */
    const char *bad[] = {"", "../x", "a/b", "ABC", ".hidden", "a b",
                         "0123456789012345678901234567890123456789012345678"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(sbx_profile_write(fd, dir, bad[i], "x", path, sizeof(path)), -EINVAL);
    assert_int_equal(sbx_profile_write(fd, dir, "ok", "x", path, 8), -ENAMETOOLONG);
    close(fd);

    /* a directory others may write is refused */
    snprintf(dir, sizeof(dir), "%s/open", tmpdir);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(chmod(dir, 0777), 0);
    assert_int_equal(sbx_profile_dir_open(dir, &fd), -EPERM);
    assert_int_equal(sbx_profile_dir_open("relative", &fd), -EINVAL);
}

static void test_fd_path(void **state) {
    (void)state;
    char buf[SBPLR_PATH_MAX];
    int fd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(sbx_fd_path(fd, buf), 0);
    char *canon = realpath(tmpdir, NULL); /* /private/tmp/... on a Mac */
    assert_non_null(canon);
    assert_string_equal(buf, canon);
    free(canon);
    assert_true(sbplr_path_valid(buf));
    close(fd);
    assert_true(sbx_fd_path(-1, buf) < 0);
}

/* A stand-in for /usr/bin/sandbox-exec: checks its own arguments the way
 * the real one parses them, reports what it runs as, then execs the agent. */
static const char stand_in[] = "#!/bin/sh\n"
                               "[ \"$1\" = -f ] || exit 90\n"
                               "[ -r \"$2\" ] || exit 91\n"
                               "[ \"$3\" = -- ] || exit 92\n"
                               "p=$2; shift 3\n"
                               "echo \"ids=$(id -u)/$(id -g) groups=$(id -G) cwd=$(pwd)"
                               " profile=$p env=$LYH_T path=$PATH\"\n"
                               "exec \"$@\"\n";

static void write_file(const char *path, const char *text, mode_t mode) {
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
}

struct launched {
    int status;
    struct sbx_failure fail;
    int failed; /* sbx_read_status() */
    char out[512];
};

static void launch(const char *cwd, const char *sbx, struct launched *ret) {
    char exe[128], prof[128], work[128];
    snprintf(exe, sizeof(exe), "%s/%s", tmpdir, sbx);
    snprintf(prof, sizeof(prof), "%s/s.sb", tmpdir);
    snprintf(work, sizeof(work), "%s/%s", tmpdir, cwd);
    char *agent[] = {"/bin/echo", "agent ran", NULL};
    char **argv = NULL;
    assert_int_equal(sbx_argv(exe, prof, agent, &argv), 0);
    char *envp[] = {"LYH_T=sanitized", "PATH=/usr/bin:/bin", NULL};
    int out[2];
    assert_int_equal(pipe(out), 0);
    const gid_t groups[] = {424244, 424245};
    struct sbx_plan plan = {.argv = argv,
                            .envp = envp,
                            .stdio = {-1, out[1], out[1]},
                            .pty_fd = -1,
                            .uid = 424242,
                            .gid = 424243,
                            .groups = groups,
                            .n_groups = ARRAY_SIZE(groups),
                            .cwd = work};
    pid_t pid = -1;
    int status_fd = -1;
    assert_int_equal(sbx_spawn(&plan, &pid, &status_fd), 0);
    close(out[1]);
    ret->failed = sbx_read_status(status_fd, &ret->fail);
    close(status_fd);
    ssize_t n, got = 0;
    while ((n = read(out[0], ret->out + got, sizeof(ret->out) - 1 - (size_t)got)) > 0)
        got += n;
    ret->out[got] = '\0';
    close(out[0]);
    assert_int_equal(waitpid(pid, &ret->status, 0), pid);
    free(argv);
}

static void test_spawn(void **state) {
    (void)state;
    if (geteuid() != 0)
        skip(); /* the drop needs root */
    char p[128];
    snprintf(p, sizeof(p), "%s/sandbox-exec", tmpdir);
    write_file(p, stand_in, 0755);
    snprintf(p, sizeof(p), "%s/s.sb", tmpdir);
    write_file(p, "(version 1)\n(deny default)\n", 0644);
    snprintf(p, sizeof(p), "%s/work", tmpdir);
    assert_int_equal(mkdir(p, 0755), 0);

    struct launched l;
    launch("work", "sandbox-exec", &l);
    assert_int_equal(l.failed, 0); /* the exec happened */
    assert_true(WIFEXITED(l.status) && WEXITSTATUS(l.status) == 0);
    char want[512];
    char *canon = realpath(tmpdir, NULL); /* the shell's pwd is the resolved path */
    assert_non_null(canon);
    snprintf(want, sizeof(want),
             "ids=424242/424243 groups=424243 424244 424245 cwd=%s/work profile=%s/s.sb"
             " env=sanitized path=/usr/bin:/bin\nagent ran\n",
             canon, tmpdir);
    free(canon);
    assert_string_equal(l.out, want);

    /* a cwd the caller cannot enter: reported, nothing exec'd */
    launch("missing", "sandbox-exec", &l);
    assert_int_equal(l.failed, 1);
    assert_int_equal(l.fail.step, SBX_STEP_CHDIR);
    assert_int_equal(l.fail.err, ENOENT);
    assert_string_equal(sbx_step_name(l.fail.step), "chdir");
    assert_true(WIFEXITED(l.status) && WEXITSTATUS(l.status) == 127);
    assert_string_equal(l.out, "");

    /* no sandbox-exec: the agent does not run without it */
    launch("work", "no-such-sandbox-exec", &l);
    assert_int_equal(l.failed, 1);
    assert_int_equal(l.fail.step, SBX_STEP_EXEC);
    assert_int_equal(l.fail.err, ENOENT);
    assert_string_equal(l.out, "");
}

static void test_spawn_refuses_plans(void **state) {
    (void)state;
    char *agent[] = {"/bin/true", NULL};
    char **argv = NULL;
    assert_int_equal(sbx_argv(SBX_SANDBOX_EXEC, "/p/s.sb", agent, &argv), 0);
    char *envp[] = {NULL};
    struct sbx_plan ok = {.argv = argv, .envp = envp, .stdio = {-1, -1, -1}, .pty_fd = -1,
                          .uid = 1000, .gid = 2000000, .cwd = "/"};
    pid_t pid = -1;
    int fd = -1;

    struct sbx_plan p = ok;
    p.uid = 0; /* would not drop */
    assert_int_equal(sbx_spawn(&p, &pid, &fd), -EINVAL);
    p = ok;
    p.gid = 0;
    assert_int_equal(sbx_spawn(&p, &pid, &fd), -EINVAL);
    p = ok;
    p.cwd = "relative";
    assert_int_equal(sbx_spawn(&p, &pid, &fd), -EINVAL);
    /* the agent itself, without sandbox-exec in front of it */
    p = ok;
    p.argv = agent;
    assert_int_equal(sbx_spawn(&p, &pid, &fd), -EINVAL);
    assert_int_equal(pid, -1);
    free(argv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argv),
        cmocka_unit_test(test_profile_files),
        cmocka_unit_test(test_fd_path),
        cmocka_unit_test(test_spawn),
        cmocka_unit_test(test_spawn_refuses_plans),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
