/* platform/linux/fsutil.c: the remover's fd closing where close_range is
 * missing (kernels before 5.9): nothing of lyhd's may stay open in a process
 * that then runs as the session's user. And fs_remove_bare_dir, which root
 * runs on a session's tmpdir (a directory its user controls): it removes
 * empty directories by name or nothing, whatever was put in their place;
 * fs_remove_tree_as, the process that does it and empties what else is there
 * as the user; fs_open_own_dir, lyhd's directory for the tmpdirs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
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

static const char *const subs[] = {"tmp", "var-tmp", "shm"};

struct tree {
    char base[64]; /* a fresh directory for one test */
    char dir[96];  /* base/lyh-x, the tmpdir */
};

static void tree_new(struct tree *t, bool with_subs) {
    snprintf(t->base, sizeof(t->base), "/tmp/lyh-fsutil.XXXXXX");
    assert_non_null(mkdtemp(t->base));
    snprintf(t->dir, sizeof(t->dir), "%s/lyh-x", t->base);
    assert_int_equal(mkdir(t->dir, 0700), 0);
    for (size_t i = 0; with_subs && i < 3; i++) {
        char p[128];
        snprintf(p, sizeof(p), "%s/%s", t->dir, subs[i]);
        assert_int_equal(mkdir(p, 0700), 0);
    }
}

static void touch(const char *path) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

static bool exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static void tree_free(struct tree *t) {
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->base);
    assert_int_equal(system(cmd), 0);
}

/* What a session that wrote nothing leaves: all of it goes. */
static void test_bare_dir_removed(void **state) {
    (void)state;
    struct tree t;
    tree_new(&t, true);
    assert_int_equal(fs_remove_bare_dir(t.dir, subs, 3), 0);
    assert_false(exists(t.dir));
    /* gone already: nothing to do */
    assert_int_equal(fs_remove_bare_dir(t.dir, subs, 3), 0);
    /* a subdirectory missing (the agent removed it) is no reason to stop */
    tree_free(&t);
    tree_new(&t, false);
    assert_int_equal(fs_remove_bare_dir(t.dir, subs, 3), 0);
    assert_false(exists(t.dir));
    tree_free(&t);
}

/* A file anywhere in it: -ENOTEMPTY, and the file stays for the remover. */
static void test_bare_dir_not_empty(void **state) {
    (void)state;
    struct tree t;
    char p[160];
    tree_new(&t, true);
    snprintf(p, sizeof(p), "%s/var-tmp/f", t.dir);
    touch(p);
    assert_int_equal(fs_remove_bare_dir(t.dir, subs, 3), -ENOTEMPTY);
    assert_true(exists(p));
    tree_free(&t);

    tree_new(&t, true);
    snprintf(p, sizeof(p), "%s/other", t.dir);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(fs_remove_bare_dir(t.dir, subs, 3), -ENOTEMPTY);
    assert_true(exists(p));
    tree_free(&t);
}

/* Symlinks in place of a subdirectory or of the tmpdir itself, to empty
 * directories elsewhere: never followed, and nothing elsewhere goes. */
static void test_bare_dir_symlinks(void **state) {
    (void)state;
    struct tree t;
    char victim[128], p[160];
    tree_new(&t, true);
    snprintf(victim, sizeof(victim), "%s/victim", t.base);
    assert_int_equal(mkdir(victim, 0700), 0);
    snprintf(p, sizeof(p), "%s/tmp", t.dir);
    assert_int_equal(rmdir(p), 0);
    assert_int_equal(symlink(victim, p), 0);
    assert_int_equal(fs_remove_bare_dir(t.dir, subs, 3), -ENOTDIR);
    assert_true(exists(victim));
    assert_true(exists(p));
    tree_free(&t);

    tree_new(&t, false);
    snprintf(victim, sizeof(victim), "%s/victim", t.base);
    assert_int_equal(mkdir(victim, 0700), 0);
    snprintf(p, sizeof(p), "%s/tmp", victim);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(rmdir(t.dir), 0);
    assert_int_equal(symlink(victim, t.dir), 0);
    assert_int_equal(fs_remove_bare_dir(t.dir, subs, 3), -ENOTDIR);
    assert_true(exists(p));
    assert_true(exists(t.dir));
    /* fs_stat_here sees the link itself, as lstat would */
    struct stat st;
    int bfd = open(t.base, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(bfd >= 0);
    assert_int_equal(fs_stat_here(bfd, "lyh-x", &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(fs_stat_here(bfd, "victim", &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(fs_stat_here(bfd, "none", &st), -ENOENT);
    assert_int_equal(fs_stat_here(bfd, "..", &st), -EXDEV); /* nothing above dirfd */
    close(bfd);
    tree_free(&t);

    assert_int_equal(fs_remove_bare_dir("/tmp/", subs, 3), -EINVAL);
    assert_int_equal(fs_remove_bare_dir("/tmp/..", subs, 3), -EINVAL);
}

/* A file system mounted over the tmpdir (a user's FUSE mount would be): not
 * entered, nothing in it removed. Root and a mount namespace of its own (a
 * child's); skipped where there are none. */
static void test_bare_dir_mount(void **state) {
    (void)state;
    if (geteuid() != 0)
        skip();
    struct tree t;
    tree_new(&t, false);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char p[160];
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
            _exit(77);
        if (mount("lyh-fsutil", t.dir, "tmpfs", 0, "size=64k") < 0)
            _exit(77);
        snprintf(p, sizeof(p), "%s/tmp", t.dir);
        if (mkdir(p, 0700) < 0)
            _exit(10);
        int r = fs_remove_bare_dir(t.dir, subs, 3);
        if (r != -EXDEV)
            _exit(11);
        struct stat st;
        int bfd = open(t.base, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (bfd < 0 || fs_stat_here(bfd, "lyh-x", &st) != -EXDEV)
            _exit(13);
        _exit(exists(p) ? 0 : 12);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    tree_free(&t);
    if (WEXITSTATUS(st) == 77)
        skip();
    assert_int_equal(WEXITSTATUS(st), 0);
}

static int remover_status(const char *path, uid_t uid, gid_t gid) {
    pid_t pid;
    int pidfd, st = -1;
    assert_int_equal(fs_remove_tree_as(path, subs, 3, uid, gid, &pid, &pidfd), 0);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    close(pidfd);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void chown_tree(const char *path, uid_t uid) {
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "chown -hR %u:%u '%s'", (unsigned)uid, (unsigned)uid, path);
    assert_int_equal(system(cmd), 0);
}

/* The remover: empty directories as root; what the user left, as the user
 * (a symlink out is removed, never followed); what the user may not remove
 * stays, and says so. Root only (it changes uid). */
static void test_remove_tree_as(void **state) {
    (void)state;
    if (geteuid() != 0)
        skip();
    struct tree t;
    char p[200], outside[200];
    const uid_t nobody = 65534;

    tree_new(&t, true);
    chown_tree(t.dir, nobody);
    assert_int_equal(remover_status(t.dir, nobody, nobody), FS_RM_GONE);
    assert_false(exists(t.dir));
    tree_free(&t);

    tree_new(&t, true);
    snprintf(outside, sizeof(outside), "%s/outside", t.base);
    touch(outside);
    assert_int_equal(chmod(t.base, 0711), 0); /* the user's half goes through it */
    snprintf(p, sizeof(p), "%s/tmp/deep", t.dir);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/tmp/deep/link", t.dir);
    assert_int_equal(symlink(outside, p), 0);
    snprintf(p, sizeof(p), "%s/shm/f", t.dir);
    touch(p);
    chown_tree(t.dir, nobody);
    assert_int_equal(remover_status(t.dir, nobody, nobody), FS_RM_GONE);
    assert_false(exists(t.dir));
    assert_true(exists(outside));
    tree_free(&t);

    /* a root-owned file in a root-owned directory: not the user's to remove */
    tree_new(&t, true);
    assert_int_equal(chmod(t.base, 0711), 0);
    chown_tree(t.dir, nobody);
    snprintf(p, sizeof(p), "%s/var-tmp/rootdir", t.dir);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/var-tmp/rootdir/f", t.dir);
    touch(p);
    assert_int_equal(remover_status(t.dir, nobody, nobody), FS_RM_LEFT);
    assert_true(exists(p));
    /* given uid 0, it removes empty directories only, and walks nothing */
    snprintf(p, sizeof(p), "%s/var-tmp/f", t.dir);
    touch(p);
    assert_int_equal(remover_status(t.dir, 0, 0), FS_RM_LEFT);
    assert_true(exists(p));
    tree_free(&t);

    /* as lyhd makes it (fs_make_private_dir): the tmpdir root's, 0711, the
     * user cannot list it; what they left in the subdirectories goes */
    tree_new(&t, false);
    assert_int_equal(rmdir(t.dir), 0);
    assert_int_equal(chmod(t.base, 0711), 0);
    int bfd = open(t.base, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(bfd >= 0);
    assert_int_equal(fs_make_private_dir(bfd, "lyh-x", nobody, nobody, subs, 3), 0);
    assert_int_equal(fs_make_private_dir(bfd, "lyh-x", nobody, nobody, subs, 3), -EEXIST);
    close(bfd);
    struct stat st;
    assert_int_equal(stat(t.dir, &st), 0);
    assert_int_equal(st.st_uid, 0);
    assert_int_equal(st.st_gid, nobody);
    assert_int_equal(st.st_mode & 07777, 0711);
    snprintf(p, sizeof(p), "%s/var-tmp", t.dir);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_uid, nobody);
    assert_int_equal(st.st_mode & 07777, 0700);
    snprintf(p, sizeof(p), "%s/var-tmp/d", t.dir);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/var-tmp/d/f", t.dir);
    touch(p);
    snprintf(p, sizeof(p), "%s/var-tmp/d", t.dir);
    chown_tree(p, nobody);
    assert_int_equal(remover_status(t.dir, nobody, nobody), FS_RM_GONE);
    assert_false(exists(t.dir));
    tree_free(&t);
}

/* The first child of pid (/proc/PID/task/PID/children), waited for up to
 * 2 s; 0 if none came, -1 if this kernel does not list children. */
static pid_t first_child(pid_t pid) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    for (int i = 0; i < 2000; i++) {
        FILE *f = fopen(path, "r");
        int c = 0;
        if (!f)
            return errno == ENOENT && i == 0 ? -1 : 0;
        int n = fscanf(f, "%d", &c);
        fclose(f);
        if (n == 1 && c > 0)
            return (pid_t)c;
        usleep(1000);
    }
    return 0;
}

/* The user's half stopped (its user can: it runs as them): the root half
 * kills it at once and says so (FS_RM_STOPPED); what it had not removed
 * stays for the next start. Root only. */
static void test_remove_tree_as_stopped(void **state) {
    (void)state;
    if (geteuid() != 0)
        skip();
    struct tree t;
    char p[200];
    const uid_t nobody = 65534;

    tree_new(&t, true);
    assert_int_equal(chmod(t.base, 0711), 0);
    /* enough files that the walk is still going when it is stopped */
    for (int i = 0; i < 50000; i++) {
        snprintf(p, sizeof(p), "%s/tmp/f%d", t.dir, i);
        int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        close(fd);
    }
    chown_tree(t.dir, nobody);
    pid_t pid, child;
    int pidfd, st = -1;
    assert_int_equal(fs_remove_tree_as(t.dir, subs, 3, nobody, nobody, &pid, &pidfd), 0);
    child = first_child(pid);
    if (child < 0) {
        (void)waitpid(pid, &st, 0);
        close(pidfd);
        tree_free(&t);
        skip(); /* no /proc/PID/task/PID/children here */
    }
    assert_true(child > 0);
    assert_int_equal(kill(child, SIGSTOP), 0);
    struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
    int ended = poll(&pfd, 1, 5000);
    if (ended != 1) /* (never a test left waiting: let both go) */
        (void)kill(child, SIGKILL);
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_int_equal(ended, 1); /* the root half did not wait on its stopped half */
    close(pidfd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), FS_RM_STOPPED);
    assert_true(exists(t.dir));
    /* reaped by the root half: gone, not left stopped */
    assert_int_equal(kill(child, 0), -1);
    assert_int_equal(errno, ESRCH);
    tree_free(&t);
}

/* lyhd's directory for the tmpdirs: made root's and 0711, its mode set again
 * when it differs; refused when it is a symlink or someone else's. */
static void test_open_own_dir(void **state) {
    (void)state;
    struct tree t;
    struct stat st;
    char p[160];
    int fd = -1;

    tree_new(&t, false);
    snprintf(p, sizeof(p), "%s/own", t.base);
    assert_int_equal(fs_open_own_dir(t.base, "own", 0711, &fd), geteuid() == 0 ? 0 : -EPERM);
    if (geteuid() != 0) {
        tree_free(&t);
        skip();
    }
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0711);
    close(fd);
    assert_int_equal(chmod(p, 0755), 0);
    assert_int_equal(fs_open_own_dir(t.base, "own", 0711, &fd), 0);
    close(fd);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0711);
    /* someone else's (made first, in a world-writable parent) */
    assert_int_equal(chmod(p, 0755), 0);
    assert_int_equal(chown(p, 65534, 65534), 0);
    fd = -1;
    assert_int_equal(fs_open_own_dir(t.base, "own", 0711, &fd), -EPERM);
    assert_int_equal(fd, -1);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755); /* and left as it was */
    /* a symlink to a directory of root's */
    assert_int_equal(symlink(t.dir, strcat(strcpy(p, t.base), "/link")), 0);
    assert_int_equal(fs_open_own_dir(t.base, "link", 0711, &fd), -ENOTDIR);
    assert_int_equal(fs_open_own_dir(t.base, "a/b", 0711, &fd), -EINVAL);
    assert_int_equal(fs_open_own_dir(t.base, "..", 0711, &fd), -EINVAL);
    tree_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_close_fds_from),
        cmocka_unit_test(test_close_fds_from_keeps_below),
        cmocka_unit_test(test_bare_dir_removed),
        cmocka_unit_test(test_bare_dir_not_empty),
        cmocka_unit_test(test_bare_dir_symlinks),
        cmocka_unit_test(test_bare_dir_mount),
        cmocka_unit_test(test_remove_tree_as),
        cmocka_unit_test(test_remove_tree_as_stopped),
        cmocka_unit_test(test_open_own_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
