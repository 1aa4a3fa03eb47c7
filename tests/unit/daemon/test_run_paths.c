/* daemon/run_paths.c: a launch's paths looked up by a thread of their own.
 * The request's path lists are copied within their bounds; the work, on a
 * home of the test's own, makes ~/.ssh, builds a ruleset and refuses a
 * missing cwd; a job's end reaches the loop through its event; a job the
 * loop lets go of first is freed by its thread (ASan: nothing leaks); a
 * thread kept for the next job has root's identity back and takes it. The
 * caps are exercised end to end (tests/e2e/hardening.sh §13): holding a
 * thread needs a lock held through FUSE. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/homes.h"
#include "daemon/run_paths.h"

static char root[64], home[96], passwd[96];

static void fill(struct run_paths *w, struct homes *h, const char *cwd) {
    Lianyaohu__V1__RunRequest r = LIANYAOHU__V1__RUN_REQUEST__INIT;
    char *argv[] = {"/bin/true"};
    char why[256];

    r.argv = argv;
    r.n_argv = 1;
    r.cwd = (char *)cwd;
    assert_int_equal(run_paths_take(w, &r, why, sizeof(why)), 0);
    policy_default(&w->pol);
    w->homes = homes_hold(h);
    snprintf(w->socket_path, sizeof(w->socket_path), "%s/no-socket", root);
    assert_int_equal(ll_probe(&w->landlock_abi), 0);
    w->uid = 65534; /* nobody: the thread takes an identity not root's */
    w->gid = 65534;
    snprintf(w->home, sizeof(w->home), "%s", home);
}

static void test_take(void **state) {
    (void)state;
    Lianyaohu__V1__RunRequest r = LIANYAOHU__V1__RUN_REQUEST__INIT;
    char *argv[] = {"/bin/true", "x"};
    char *many[RUN_MAX_PATHS + 1];
    char buf[RUN_MAX_PATHS + 1][32], why[256];
    char *longp = malloc(PATH_MAX + 1);
    struct run_paths_job *j = run_paths_new();
    struct run_paths *w = run_paths_of(j);

    for (size_t i = 0; i < RUN_MAX_PATHS + 1; i++) {
        snprintf(buf[i], sizeof(buf[i]), "/w%zu", i);
        many[i] = buf[i];
    }
    r.argv = argv;
    r.n_argv = 2;
    r.cwd = "/proj";
    r.writable = many;
    r.n_writable = RUN_MAX_PATHS;
    r.deny_paths = many;
    r.n_deny_paths = 2;
    r.narrow_home = true;
    assert_int_equal(run_paths_take(w, &r, why, sizeof(why)), 0);
    /* copies: the request may be freed before the thread reads them */
    buf[0][1] = 'X';
    assert_string_equal(w->rq.writable[0], "/w0");
    assert_int_equal(w->rq.n_writable, RUN_MAX_PATHS);
    assert_int_equal(w->rq.n_deny_paths, 2);
    assert_int_equal(w->rq.n_argv, 1); /* argv[0] only */
    assert_string_equal(w->rq.cwd, "/proj");
    assert_true(w->rq.narrow_home);
    run_paths_drop(j);

    /* one over a bound, and a path of PATH_MAX bytes: refused, naming it */
    j = run_paths_new();
    w = run_paths_of(j);
    r.n_writable = RUN_MAX_PATHS + 1;
    assert_int_equal(run_paths_take(w, &r, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "too many writable paths (17, at most 16)"));
    run_paths_drop(j);
    j = run_paths_new();
    w = run_paths_of(j);
    memset(longp, 'a', PATH_MAX);
    longp[0] = '/';
    longp[PATH_MAX] = '\0';
    r.n_writable = 1;
    r.deny_paths = &longp;
    r.n_deny_paths = 1;
    assert_int_equal(run_paths_take(w, &r, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "deny paths is too long"));
    run_paths_drop(j); /* what was copied before the refusal is freed */
    free(longp);
}

static void on_done(struct run_paths_job *job, bool timed_out, void *ud) {
    int *heard = ud;
    *heard = timed_out ? 2 : 1;
    (void)job;
}

static struct homes *setup(void) {
    struct homes *h = NULL;
    char cmd[300];
    FILE *f;

    snprintf(root, sizeof(root), "/tmp/lyh-runpaths-XXXXXX");
    assert_non_null(mkdtemp(root));
    snprintf(home, sizeof(home), "%s/home", root);
    assert_int_equal(chmod(root, 0755), 0);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s/proj' && chown -R 65534:65534 '%s'", home, home);
    assert_int_equal(system(cmd), 0);
    snprintf(passwd, sizeof(passwd), "%s/passwd", root);
    f = fopen(passwd, "w");
    assert_non_null(f);
    fprintf(f, "root:x:0:0:root:/root:/bin/sh\n");
    assert_int_equal(fclose(f), 0);
    assert_int_equal(homes_start(passwd, &h), 0);
    for (int i = 0; i < 1000 && homes_generation(h) < 1; i++)
        usleep(10 * 1000);
    return h;
}

/* The test's directory goes whatever the test's end: cmocka runs a test's
 * teardown after a failed assertion too. */
static int teardown_dir(void **state) {
    char cmd[128];
    (void)state;

    if (!root[0])
        return 0;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    root[0] = '\0';
    return system(cmd) == 0 ? 0 : -1;
}

static void test_collect(void **state) {
    (void)state;
    struct homes *h = setup();
    char cwd[PATH_MAX], ssh[PATH_MAX];
    struct stat st;

    snprintf(cwd, sizeof(cwd), "%s/proj", home);
    snprintf(ssh, sizeof(ssh), "%s/.ssh", home);
    struct run_paths_job *j = run_paths_new();
    struct run_paths *w = run_paths_of(j);
    fill(w, h, cwd);
    run_paths_collect(w);
    assert_int_equal(w->err.code, 0);
    assert_true(w->ll_fd >= 0);
    /* the protected entry that must exist is made, empty, 0700, by the
     * caller's identity (theirs, not root's) */
    assert_int_equal(stat(ssh, &st), 0);
    assert_true(S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700);
    assert_int_equal(st.st_uid, 65534);
    assert_true(w->prot.n > 0);
    run_paths_drop(j);

    /* a cwd that is not there: the refusal names it, nothing is built */
    snprintf(cwd, sizeof(cwd), "%s/nosuch", home);
    j = run_paths_new();
    w = run_paths_of(j);
    fill(w, h, cwd);
    run_paths_collect(w);
    assert_int_equal(w->err.code, LIANYAOHU__V1__CODE__INVALID_ARGUMENT);
    assert_non_null(strstr(w->err.msg, "nosuch: No such file or directory"));
    assert_int_equal(w->ll_fd, -1);
    run_paths_drop(j);
    homes_stop(h);
}

/* A thread's identity as /proc shows it: its Uid, Gid, Groups and CapEff
 * lines (the file-system uid and gid are their last fields). */
static void task_ident(const char *tid, char *out, size_t len) {
    char path[300], line[512];
    FILE *f;

    snprintf(path, sizeof(path), "/proc/self/task/%s/status", tid);
    out[0] = '\0';
    if (!(f = fopen(path, "r")))
        return; /* ended meanwhile */
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "Uid:", 4) || !strncmp(line, "Gid:", 4) ||
            !strncmp(line, "Groups:", 7) || !strncmp(line, "CapEff:", 7))
            strncat(out, line, len - strlen(out) - 1);
    fclose(f);
}

/* Threads of this process whose identity is not the main thread's (root's:
 * file-system uid and gid, groups, effective capabilities). */
static int threads_not_root(void) {
    char mine[2048], theirs[2048], me[32];
    struct dirent *d;
    int n = 0;
    DIR *dir = opendir("/proc/self/task");

    assert_non_null(dir);
    snprintf(me, sizeof(me), "%d", (int)getpid());
    task_ident(me, mine, sizeof(mine));
    assert_non_null(strstr(mine, "CapEff:"));
    while ((d = readdir(dir))) {
        if (d->d_name[0] == '.')
            continue;
        task_ident(d->d_name, theirs, sizeof(theirs));
        n += theirs[0] && strcmp(theirs, mine) != 0;
    }
    closedir(dir);
    return n;
}

static int threads_alive(void) {
    char line[256];
    int n = -1;
    FILE *f = fopen("/proc/self/status", "r");

    assert_non_null(f);
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n;
}

/* A job started and heard of, done without a refusal. */
static struct run_paths_job *job_done(struct event_base *base, struct homes *h, const char *cwd) {
    struct run_paths_job *j = run_paths_new();
    int heard = 0;

    fill(run_paths_of(j), h, cwd);
    assert_int_equal(run_paths_start(j, base, on_done, &heard), 0);
    for (int i = 0; i < 500 && !heard; i++)
        event_base_loop(base, EVLOOP_ONCE);
    assert_int_equal(heard, 1);
    assert_int_equal(run_paths_of(j)->err.code, 0);
    assert_true(run_paths_of(j)->ll_fd >= 0);
    return j;
}

static void test_job(void **state) {
    (void)state;
    struct homes *h = setup();
    struct event_base *base = event_base_new();
    char cwd[PATH_MAX];
    int heard = 0;

    snprintf(cwd, sizeof(cwd), "%s/proj", home);
    struct run_paths_job *j = job_done(base, h, cwd);
    /* the thread counts until it has let go of the job, just after the
     * event: soon */
    for (int i = 0; i < 500 && run_paths_live(65534) > 0; i++)
        usleep(1000);
    assert_int_equal(run_paths_live(65534), 0);
    run_paths_drop(j);

    /* its thread is kept, with root's identity back (no thread of this
     * process has another file-system uid or gid, other groups or other
     * effective capabilities than the main thread's), and takes the next
     * job */
    for (int i = 0; i < 500 && run_paths_kept() < 1; i++)
        usleep(1000);
    assert_int_equal(run_paths_kept(), 1);
    assert_int_equal(threads_not_root(), 0);
    int threads = threads_alive();
    j = job_done(base, h, cwd);
    assert_int_equal(threads_alive(), threads); /* none made */
    run_paths_drop(j);

    /* let go of before its end: the thread frees it (ASan would say if not),
     * and the homes table it holds outlives homes_stop until then */
    j = run_paths_new();
    fill(run_paths_of(j), h, cwd);
    assert_int_equal(run_paths_start(j, base, on_done, &heard), 0);
    run_paths_drop(j);
    homes_stop(h);
    for (int i = 0; i < 500 && run_paths_live((uid_t)-1) > 0; i++)
        usleep(10 * 1000);
    assert_int_equal(run_paths_live((uid_t)-1), 0);
    event_base_loop(base, EVLOOP_NONBLOCK);
    assert_int_equal(heard, 0); /* never called once dropped */
    event_base_free(base);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take),
        cmocka_unit_test_teardown(test_collect, teardown_dir),
        cmocka_unit_test_teardown(test_job, teardown_dir),
    };
    if (geteuid() != 0) {
        fprintf(stderr, "SKIP: the path thread takes the caller's groups (CAP_SETGID)\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
