/* Unit tests for platform/linux/landlock.c against the running kernel.
 *
 * A scratch tree under /tmp (root-owned, 0700):
 *   A/          read-write in the test policy
 *   A/link  ->  ../C (a symlink inside A pointing out of it)
 *   B/b.txt     B is read-only with execute
 *   C           the bait: in no rule
 * Rulesets are built in the parent; each check runs in a forked child that
 * sets NO_NEW_PRIVS, calls ll_restrict_self() and makes real syscalls. A
 * failed check is one line on a pipe and exit status 1. As root (CI), DAC
 * allows everything here, so every EACCES seen is Landlock's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/linux/landlock.h"

extern char **environ;

static int abi;
static char root[] = "/tmp/lyh-ll-test-XXXXXX";
static char A[PATH_MAX], B[PATH_MAX], C[PATH_MAX];

static const char *at(const char *rel) {
    static char buf[4][PATH_MAX];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, PATH_MAX, "%s/%s", root, rel);
    return b;
}

static void write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* ---- child harness ------------------------------------------------------------- */

static int msg_fd = -1;

#define CHECK(cond, ...)                                                               \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            int e_ = errno;                                                            \
            dprintf(msg_fd, "%s:%d: ", __FILE__, __LINE__);                            \
            dprintf(msg_fd, __VA_ARGS__);                                              \
            dprintf(msg_fd, " (errno %d: %s)\n", e_, strerror(e_));                    \
            _exit(1);                                                                  \
        }                                                                              \
    } while (0)

#define EXPECT_ERR(expr, e)                                                            \
    do {                                                                               \
        errno = 0;                                                                     \
        long r_ = (long)(expr);                                                        \
        CHECK(r_ == -1 && errno == (e), "%s returned %ld, want -1/%s", #expr, r_, #e); \
    } while (0)

/* An open that must work; the fd is closed. */
#define EXPECT_OPEN(path, flags)                                                       \
    do {                                                                               \
        int fd_ = open((path), (flags) | O_CLOEXEC, 0644);                             \
        CHECK(fd_ >= 0, "open('%s', %s)", (path), #flags);                             \
        close(fd_);                                                                    \
    } while (0)

#define EXPECT_OPEN_DENIED(path, flags) EXPECT_ERR(open((path), (flags) | O_CLOEXEC, 0644), EACCES)

enum { NO_NNP = 1 };

static int ruleset_fd = -1; /* the child's ruleset */

static void in_child(void (*fn)(void), int flags) {
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        msg_fd = p[1];
        if (!(flags & NO_NNP)) {
            CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "PR_SET_NO_NEW_PRIVS");
            int k = ll_restrict_self(ruleset_fd);
            errno = k < 0 ? -k : 0;
            CHECK(k == 0, "ll_restrict_self");
        }
        fn();
        _exit(0);
    }
    close(p[1]);
    char msg[4096];
    size_t used = 0;
    ssize_t n;
    while (used < sizeof(msg) - 1 &&
           ((n = read(p[0], msg + used, sizeof(msg) - 1 - used)) > 0 || (n < 0 && errno == EINTR)))
        if (n > 0)
            used += (size_t)n;
    msg[used] = '\0';
    close(p[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        assert_int_equal(errno, EINTR);
    if (WIFSIGNALED(status))
        fail_msg("child killed by signal %d; %s", WTERMSIG(status), msg);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("child failed: %s", msg[0] ? msg : "(no message)");
}

/* Build p into ruleset_fd (closing the previous one); the report is freed. */
static void build(const struct ll_policy *p, int at_abi) {
    struct ll_report rep = {0};
    char why[512] = "";
    if (ruleset_fd >= 0)
        close(ruleset_fd);
    ruleset_fd = -1;
    int k = ll_ruleset_build(p, at_abi, &ruleset_fd, &rep, why, sizeof(why));
    if (k != 0)
        fail_msg("ll_ruleset_build: %s (%s)", strerror(-k), why);
    int fl = fcntl(ruleset_fd, F_GETFD);
    assert_true(fl >= 0 && (fl & FD_CLOEXEC));
    ll_report_free(&rep);
}

/* ---- setup --------------------------------------------------------------------- */

static int group_setup(void **state) {
    (void)state;
    if (ll_probe(&abi) != 0)
        return -1;
    if (!mkdtemp(root))
        return -1;
    snprintf(A, sizeof(A), "%s/A", root);
    snprintf(B, sizeof(B), "%s/B", root);
    snprintf(C, sizeof(C), "%s/C", root);
    if (mkdir(A, 0755) < 0 || mkdir(B, 0755) < 0 || symlink("../C", at("A/link")) < 0)
        return -1;
    write_file(at("B/b.txt"), "bee");
    write_file(C, "secret");
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path) == 0 ? 0 : -1;
}

static int group_teardown(void **state) {
    (void)state;
    if (ruleset_fd >= 0)
        close(ruleset_fd);
    return nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

/* ---- probe ----------------------------------------------------------------------- */

static void test_probe(void **state) {
    (void)state;
    int v = 0;
    assert_int_equal(ll_probe(&v), 0);
    assert_true(v >= 1);
    assert_int_equal(v, abi);
    assert_int_equal(ll_probe(NULL), -EINVAL);
    print_message("kernel Landlock ABI %d (enforced at %d)\n", v, v > LL_ABI_MAX ? LL_ABI_MAX : v);
}

/* ---- the scratch tree -------------------------------------------------------------- */

static void child_tree(void) {
    char buf[16] = {0};

    /* A: read-write. */
    int fd = open(at("A/new"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0, "create A/new");
    CHECK(write(fd, "ok", 2) == 2, "write A/new");
    close(fd);
    EXPECT_OPEN(at("A/new"), O_WRONLY | O_TRUNC);
    CHECK(mkdir(at("A/d"), 0755) == 0, "mkdir A/d");
    CHECK(rename(at("A/new"), at("A/d/new")) == 0, "rename inside A");
    CHECK(unlink(at("A/d/new")) == 0 && rmdir(at("A/d")) == 0, "remove inside A");
    EXPECT_ERR(mknod(at("A/null"), S_IFCHR | 0666, makedev(1, 3)), EACCES);

    /* B: read-only. */
    fd = open(at("B/b.txt"), O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0 && read(fd, buf, sizeof(buf) - 1) == 3 && strcmp(buf, "bee") == 0, "read B/b.txt");
    close(fd);
    DIR *d = opendir(B);
    CHECK(d != NULL, "opendir B");
    closedir(d);
    EXPECT_OPEN_DENIED(at("B/b.txt"), O_WRONLY);
    EXPECT_OPEN_DENIED(at("B/b.txt"), O_RDWR);
    EXPECT_OPEN_DENIED(at("B/new"), O_WRONLY | O_CREAT);
    EXPECT_ERR(unlink(at("B/b.txt")), EACCES);
    EXPECT_ERR(mkdir(at("B/d"), 0755), EACCES);

    /* C: in no rule, however it is reached. */
    EXPECT_OPEN_DENIED(C, O_RDONLY);
    EXPECT_OPEN_DENIED(C, O_WRONLY);
    EXPECT_OPEN_DENIED(at("A/link"), O_RDONLY);
    EXPECT_OPEN_DENIED(at("A/link"), O_WRONLY);
    EXPECT_OPEN_DENIED(at("A/../C"), O_RDONLY);
    EXPECT_OPEN_DENIED(at("A/../C"), O_WRONLY);
    /* A link made now can point anywhere but opens nothing new. */
    CHECK(symlink(C, at("A/link2")) == 0, "symlink in A");
    EXPECT_OPEN_DENIED(at("A/link2"), O_RDONLY);
    /* Nor can C be pulled into A by a hard link or a rename. */
    errno = 0;
    CHECK(link(C, at("A/hard")) == -1 && (errno == EXDEV || errno == EACCES), "link C into A");
    errno = 0;
    CHECK(rename(C, at("A/moved")) == -1 && (errno == EXDEV || errno == EACCES), "rename C into A");
    /* The tree's root itself is not listed. */
    CHECK(opendir(root) == NULL && errno == EACCES, "opendir root");

    /* /dev/null: a rule on a file. */
    EXPECT_OPEN("/dev/null", O_WRONLY);
    EXPECT_OPEN("/dev/null", O_RDONLY);
    EXPECT_OPEN_DENIED("/dev/zero", O_RDONLY);
}

static struct ll_policy tree_policy(void) {
    struct ll_policy p = {0};
    assert_int_equal(ll_policy_add(&p, LL_RW, A, 0), 0);
    assert_int_equal(ll_policy_add(&p, LL_RX, B, 0), 0);
    assert_int_equal(ll_policy_add(&p, LL_RW, "/dev/null", 0), 0);
    return p;
}

static void test_tree(void **state) {
    (void)state;
    struct ll_policy p = tree_policy();
    build(&p, abi);
    in_child(child_tree, 0);
    ll_policy_free(&p);
    unlink(at("A/link2"));
}

/* ---- scopes (ABI 6) ----------------------------------------------------------------- */

static struct sockaddr_un abstract_addr;
static socklen_t abstract_len;

static void child_scopes(void) {
    /* Signals to a process outside the domain (our parent). */
    EXPECT_ERR(kill(getppid(), 0), EPERM);
    /* ... but not to ourselves or our own children. */
    CHECK(kill(getpid(), 0) == 0, "kill self");
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        pause();
        _exit(0);
    }
    CHECK(kill(pid, SIGKILL) == 0, "kill own child");
    waitpid(pid, NULL, 0);

    /* The parent's abstract socket is out of reach. */
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(s >= 0, "socket(AF_UNIX)");
    EXPECT_ERR(connect(s, (struct sockaddr *)&abstract_addr, abstract_len), EPERM);
    close(s);
}

static void test_scopes(void **state) {
    (void)state;
    if (abi < 6) {
        print_message("note: ABI %d has no scopes\n", abi);
        skip();
    }
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(l >= 0);
    memset(&abstract_addr, 0, sizeof(abstract_addr));
    abstract_addr.sun_family = AF_UNIX;
    int n = snprintf(abstract_addr.sun_path + 1, sizeof(abstract_addr.sun_path) - 1,
                     "lyh-ll-test-%d", (int)getpid());
    abstract_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    assert_int_equal(bind(l, (struct sockaddr *)&abstract_addr, abstract_len), 0);
    assert_int_equal(listen(l, 4), 0);

    struct ll_policy p = tree_policy();
    build(&p, abi);
    in_child(child_scopes, 0);
    ll_policy_free(&p);
    close(l);
}

/* ---- required, optional, refused paths ------------------------------------------------ */

static void test_required_missing(void **state) {
    (void)state;
    struct ll_policy p = tree_policy();
    const char *missing = at("missing");
    assert_int_equal(ll_policy_add(&p, LL_RX, missing, 0), 0);
    struct ll_report rep = {.n_rules = 99};
    int fd = -42;
    char why[512] = "";
    assert_int_equal(ll_ruleset_build(&p, abi, &fd, &rep, why, sizeof(why)), -ENOENT);
    assert_non_null(strstr(why, missing));
    assert_int_equal(fd, -42);         /* untouched on failure */
    assert_int_equal(rep.n_rules, 99); /* untouched on failure */
    print_message("why: %s\n", why);
    ll_policy_free(&p);
}

static void test_optional_missing(void **state) {
    (void)state;
    struct ll_policy p = tree_policy();
    const char *missing = at("missing");
    assert_int_equal(ll_policy_add(&p, LL_RW, missing, LL_OPTIONAL), 0);
    struct ll_report rep = {0};
    int fd = -1;
    char why[512] = "";
    assert_int_equal(ll_ruleset_build(&p, abi, &fd, &rep, why, sizeof(why)), 0);
    assert_true(fd >= 0);
    assert_int_equal(rep.n_rules, 3);
    assert_int_equal(rep.n_skipped, 1);
    assert_string_equal(rep.skipped[0].path, missing);
    assert_int_equal(rep.skipped[0].err, -ENOENT);
    assert_int_equal(rep.abi, abi > LL_ABI_MAX ? LL_ABI_MAX : abi);
    close(fd);
    ll_report_free(&rep);
    ll_report_free(&rep);
    ll_report_free(NULL);
    ll_policy_free(&p);
}

static void test_bad_paths(void **state) {
    (void)state;
    static const char *const bad[] = {"tmp", "./tmp", "/tmp/./x", "/tmp/../etc", "/tmp/.."};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct ll_policy p = {0};
        /* Refused even when optional: a policy names canonical paths. */
        for (unsigned opt = 0; opt <= LL_OPTIONAL; opt += LL_OPTIONAL) {
            assert_int_equal(ll_policy_add(&p, LL_RX, bad[i], opt), 0);
            struct ll_report rep = {0};
            int fd = -1;
            char why[512] = "";
            int k = ll_ruleset_build(&p, abi, &fd, &rep, why, sizeof(why));
            if (opt) {
                assert_int_equal(k, 0);
                assert_int_equal(rep.n_skipped, 1);
                assert_int_equal(rep.skipped[0].err, -EINVAL);
                close(fd);
                ll_report_free(&rep);
            } else {
                assert_int_equal(k, -EINVAL);
                assert_non_null(strstr(why, bad[i]));
            }
            ll_policy_free(&p);
        }
    }
    /* "/" may be read-only, never writable (however it is spelled). */
    struct ll_policy p = {0};
    assert_int_equal(ll_policy_add(&p, LL_RW, "//", 0), 0);
    char why[512] = "";
    int fd = -1;
    struct ll_report rep = {0};
    assert_int_equal(ll_ruleset_build(&p, abi, &fd, &rep, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "root directory"));
    ll_policy_free(&p);
    assert_int_equal(ll_policy_add(&p, LL_RX, "/", 0), 0);
    assert_int_equal(ll_ruleset_build(&p, abi, &fd, &rep, why, sizeof(why)), 0);
    assert_int_equal(rep.n_rules, 1);
    close(fd);
    ll_report_free(&rep);
    ll_policy_free(&p);

    assert_int_equal(ll_policy_add(&p, LL_RX, "", 0), -EINVAL);
    assert_int_equal(ll_policy_add(&p, LL_RX, NULL, 0), -EINVAL);
    assert_int_equal(ll_policy_add(&p, (enum ll_access)9, "/tmp", 0), -EINVAL);
    assert_int_equal(p.n_rx, 0);
    assert_int_equal(ll_ruleset_build(&p, 0, &fd, &rep, NULL, 0), -EINVAL);
    ll_policy_free(&p);
}

/* Symlinks: followed only when root made them where only root can change
 * them. The scratch root is root-owned and 0700. */
static void child_read_b_via_link(void) {
    EXPECT_OPEN(at("B/b.txt"), O_RDONLY);
    EXPECT_OPEN_DENIED(at("B/b.txt"), O_WRONLY);
    EXPECT_OPEN_DENIED(C, O_RDONLY);
}

static void test_symlinks(void **state) {
    (void)state;
    if (geteuid() != 0) {
        print_message("note: needs root (root-owned links)\n");
        skip();
    }
    struct ll_report rep = {0};
    char why[512];
    int fd;

    /* Root's link in a root-only directory: followed, the rule is on B. */
    assert_int_equal(symlink("B", at("rootlink")), 0);
    struct ll_policy p = {0};
    assert_int_equal(ll_policy_add(&p, LL_RX, at("rootlink"), 0), 0);
    build(&p, abi);
    in_child(child_read_b_via_link, 0);
    ll_policy_free(&p);

    /* A link owned by someone else: refused, naming the path... */
    assert_int_equal(symlink("B", at("userlink")), 0);
    assert_int_equal(lchown(at("userlink"), 65534, 65534), 0);
    assert_int_equal(ll_policy_add(&p, LL_RX, at("userlink"), 0), 0);
    why[0] = '\0';
    assert_int_equal(ll_ruleset_build(&p, abi, &fd, &rep, why, sizeof(why)), -ELOOP);
    assert_non_null(strstr(why, at("userlink")));
    print_message("why: %s\n", why);
    ll_policy_free(&p);

    /* ... also as an intermediate component ... */
    assert_int_equal(ll_policy_add(&p, LL_RX, at("userlink/b.txt"), 0), 0);
    assert_int_equal(ll_ruleset_build(&p, abi, &fd, &rep, why, sizeof(why)), -ELOOP);
    ll_policy_free(&p);

    /* ... and skipped when optional. */
    assert_int_equal(ll_policy_add(&p, LL_RX, at("userlink"), LL_OPTIONAL), 0);
    assert_int_equal(ll_ruleset_build(&p, abi, &fd, &rep, why, sizeof(why)), 0);
    assert_int_equal(rep.n_rules, 0);
    assert_int_equal(rep.n_skipped, 1);
    assert_int_equal(rep.skipped[0].err, -ELOOP);
    close(fd);
    ll_report_free(&rep);
    ll_policy_free(&p);

    /* Root's link in a directory others can write (not sticky): refused. */
    assert_int_equal(mkdir(at("pub"), 0755), 0);
    assert_int_equal(chmod(at("pub"), 0777), 0);
    assert_int_equal(symlink("../B", at("pub/link")), 0);
    assert_int_equal(ll_policy_add(&p, LL_RX, at("pub/link"), 0), 0);
    assert_int_equal(ll_ruleset_build(&p, abi, &fd, &rep, why, sizeof(why)), -ELOOP);
    /* Sticky: only root can replace root's entry, so it is followed. */
    assert_int_equal(chmod(at("pub"), 01777), 0);
    assert_int_equal(ll_ruleset_build(&p, abi, &fd, &rep, why, sizeof(why)), 0);
    assert_int_equal(rep.n_rules, 1);
    close(fd);
    ll_report_free(&rep);
    ll_policy_free(&p);

    /* A link loop ends. */
    assert_int_equal(symlink("loop", at("loop")), 0);
    assert_int_equal(ll_policy_add(&p, LL_RX, at("loop"), 0), 0);
    assert_int_equal(ll_ruleset_build(&p, abi, &fd, &rep, why, sizeof(why)), -ELOOP);
    ll_policy_free(&p);

    /* The system's own links, where there are any (merged /usr). */
    struct stat st;
    if (lstat("/lib64", &st) == 0 && S_ISLNK(st.st_mode)) {
        assert_int_equal(ll_policy_add(&p, LL_RX, "/lib64", 0), 0);
        assert_int_equal(ll_ruleset_build(&p, abi, &fd, &rep, why, sizeof(why)), 0);
        assert_int_equal(rep.n_rules, 1);
        close(fd);
        ll_report_free(&rep);
        ll_policy_free(&p);
    }
}

/* Files get file rights only: an RW rule on a regular file and on devices. */
static void child_file_rules(void) {
    EXPECT_OPEN(at("B/b.txt"), O_RDWR);
    EXPECT_OPEN_DENIED(at("B/other"), O_WRONLY | O_CREAT);
    EXPECT_OPEN("/dev/urandom", O_RDONLY);
    EXPECT_OPEN_DENIED("/dev/random", O_RDONLY);
}

static void test_file_rules(void **state) {
    (void)state;
    struct ll_policy p = {0};
    assert_int_equal(ll_policy_add(&p, LL_RW, at("B/b.txt"), 0), 0);
    assert_int_equal(ll_policy_add(&p, LL_RW, "/dev/urandom", 0), 0);
    build(&p, abi);
    in_child(child_file_rules, 0);
    ll_policy_free(&p);
}

/* The ABI table: what each ABI handles. */
static void test_abi_table(void **state) {
    (void)state;
    struct ll_policy p = tree_policy();
    struct ll_report rep = {0};
    int fd;
    char why[256];

    assert_int_equal(ll_ruleset_build(&p, 1, &fd, &rep, why, sizeof(why)), 0);
    assert_int_equal(rep.abi, 1);
    assert_int_equal(rep.handled_fs, (1ULL << 13) - 1); /* EXECUTE .. MAKE_SYM */
    assert_int_equal(rep.scoped, 0);
    close(fd);
    ll_report_free(&rep);

    if (abi >= 6) {
        assert_int_equal(ll_ruleset_build(&p, 6, &fd, &rep, why, sizeof(why)), 0);
        assert_int_equal(rep.handled_fs, (1ULL << 16) - 1); /* .. REFER, TRUNCATE, IOCTL_DEV */
        assert_int_equal(rep.scoped, 3); /* ABSTRACT_UNIX_SOCKET | SIGNAL */
        close(fd);
        ll_report_free(&rep);
    }
    /* A kernel newer than this file: enforced at what we know. */
    if (abi >= LL_ABI_MAX) {
        assert_int_equal(ll_ruleset_build(&p, LL_ABI_MAX + 5, &fd, &rep, why, sizeof(why)), 0);
        assert_int_equal(rep.abi, LL_ABI_MAX);
        close(fd);
        ll_report_free(&rep);
    }
    ll_policy_free(&p);
}

/* ---- restrict ------------------------------------------------------------------------ */

static void child_restrict_without_nnp(void) {
    /* Root could restrict without NO_NEW_PRIVS; ll_restrict_self refuses. */
    CHECK(ll_restrict_self(ruleset_fd) == -EPERM, "ll_restrict_self without NO_NEW_PRIVS");
    CHECK(ll_restrict_self(-1) == -EBADF, "ll_restrict_self(-1)");
    EXPECT_OPEN(C, O_RDONLY); /* still unrestricted */
}

static void test_restrict_requires_nnp(void **state) {
    (void)state;
    struct ll_policy p = tree_policy();
    build(&p, abi);
    in_child(child_restrict_without_nnp, NO_NNP);
    ll_policy_free(&p);
}

/* ---- the default policy ---------------------------------------------------------------- */

static void child_default(void) {
    int st;

    /* Programs run: /bin/true through the root-made /bin and /lib64 links. */
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        char *argv[] = {"true", NULL};
        execve("/bin/true", argv, environ);
        _exit(126);
    }
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "exec /bin/true: status 0x%x", st);

    /* Home, cwd and tmpdir are writable. */
    EXPECT_OPEN(at("home/f"), O_WRONLY | O_CREAT);
    EXPECT_OPEN(at("home/proj/f"), O_WRONLY | O_CREAT);
    EXPECT_OPEN(at("tmpdir/f"), O_WRONLY | O_CREAT);
    /* The system is read-only, even to root. */
    EXPECT_OPEN("/etc/passwd", O_RDONLY);
    EXPECT_OPEN_DENIED("/etc/passwd", O_WRONLY);
    EXPECT_OPEN_DENIED("/etc/lyh-ll-test", O_WRONLY | O_CREAT);
    EXPECT_OPEN_DENIED("/usr/lyh-ll-test", O_WRONLY | O_CREAT);
    EXPECT_OPEN("/etc/resolv.conf", O_RDONLY);
    /* Outside the policy: nothing. */
    EXPECT_OPEN_DENIED(C, O_RDONLY);
    static const char *const outside[] = {"/root", "/var/log", "/var/lib", "/srv", "/mnt"};
    for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++) {
        struct stat so;
        if (stat(outside[i], &so) < 0)
            continue;
        errno = 0;
        CHECK(opendir(outside[i]) == NULL && errno == EACCES, "opendir %s", outside[i]);
    }
    /* Devices. */
    EXPECT_OPEN("/dev/null", O_RDWR);
    EXPECT_OPEN("/dev/urandom", O_RDONLY);
    struct stat sb;
    if (stat("/dev/mem", &sb) == 0)
        EXPECT_OPEN_DENIED("/dev/mem", O_RDONLY);
    if (stat("/dev/kmsg", &sb) == 0)
        EXPECT_OPEN_DENIED("/dev/kmsg", O_RDONLY);
    /* /proc: our own entries read, no write, others' sensitive entries not. */
    EXPECT_OPEN("/proc/self/status", O_RDONLY);
    EXPECT_OPEN("/proc/self/environ", O_RDONLY);
    EXPECT_OPEN("/proc/cpuinfo", O_RDONLY);
    EXPECT_OPEN_DENIED("/proc/self/oom_score_adj", O_WRONLY);
    EXPECT_OPEN_DENIED("/proc/sys/kernel/hostname", O_WRONLY);
    errno = 0;
    int fd = open("/proc/1/root/etc/passwd", O_RDONLY | O_CLOEXEC);
    CHECK(fd < 0 && (errno == EACCES || errno == EPERM), "/proc/1/root reachable");
    errno = 0;
    fd = open("/proc/1/environ", O_RDONLY | O_CLOEXEC);
    CHECK(fd < 0 && (errno == EACCES || errno == EPERM), "/proc/1/environ readable");
    char dummy[8];
    errno = 0;
    CHECK(readlink("/proc/1/cwd", dummy, sizeof(dummy)) < 0 && (errno == EACCES || errno == EPERM),
          "/proc/1/cwd readable");
    /* A pipe reopened through /proc/self/fd (bash's /dev/fd/N) still works. */
    int pp[2];
    CHECK(pipe2(pp, O_CLOEXEC) == 0, "pipe");
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", pp[1]);
    EXPECT_OPEN(path, O_WRONLY);
    close(pp[0]);
    close(pp[1]);
}

static void child_narrow(void) {
    EXPECT_OPEN(at("home2/.cache/f"), O_WRONLY | O_CREAT);
    EXPECT_OPEN(at("home2/.claude.json"), O_RDWR);
    EXPECT_OPEN_DENIED(at("home2/secret"), O_RDONLY);
    EXPECT_OPEN_DENIED(at("home2/new"), O_WRONLY | O_CREAT);
    errno = 0;
    CHECK(opendir(at("home2")) == NULL && errno == EACCES, "opendir narrow home");
    EXPECT_OPEN(at("home2/proj/f"), O_WRONLY | O_CREAT);
}

/* The scratch tree lives under /tmp, which the default policy grants in
 * full: take that one entry out so the tree's own boundaries show. */
static void drop_tmp(struct ll_policy *p) {
    for (size_t i = 0; i < p->n_rw; i++) {
        if (strcmp(p->rw[i].path, "/tmp") != 0)
            continue;
        free(p->rw[i].path);
        memmove(&p->rw[i], &p->rw[i + 1], (p->n_rw - i - 1) * sizeof(p->rw[0]));
        p->n_rw--;
        return;
    }
    fail_msg("no /tmp in the default policy");
}

static void test_default_policy(void **state) {
    (void)state;
    assert_int_equal(mkdir(at("home"), 0755), 0);
    assert_int_equal(mkdir(at("home/proj"), 0755), 0);
    assert_int_equal(mkdir(at("tmpdir"), 0700), 0);

    struct ll_policy p = {0};
    struct ll_defaults d = {.home = at("home"), .cwd = at("home/proj"), .tmpdir = at("tmpdir")};
    assert_int_equal(ll_policy_default(&d, &p), 0);
    assert_true(p.n_rw > 0 && p.n_rx > 0);
    drop_tmp(&p);

    struct ll_report rep = {0};
    char why[512] = "";
    int fd = -1;
    int k = ll_ruleset_build(&p, abi, &fd, &rep, why, sizeof(why));
    if (k != 0)
        fail_msg("default policy: %s (%s)", strerror(-k), why);
    print_message("default policy: %zu rules, ABI %d, handled 0x%llx, scoped 0x%llx\n",
                  rep.n_rules, rep.abi, (unsigned long long)rep.handled_fs,
                  (unsigned long long)rep.scoped);
    for (size_t i = 0; i < rep.n_skipped; i++)
        print_message("  skipped %s: %s\n", rep.skipped[i].path, strerror(-rep.skipped[i].err));
    ll_report_free(&rep);
    if (ruleset_fd >= 0)
        close(ruleset_fd);
    ruleset_fd = fd;
    in_child(child_default, 0);
    ll_policy_free(&p);

    /* Narrow home: only the agent entries (and cwd) under home. */
    assert_int_equal(mkdir(at("home2"), 0755), 0);
    assert_int_equal(mkdir(at("home2/.cache"), 0755), 0);
    assert_int_equal(mkdir(at("home2/proj"), 0755), 0);
    write_file(at("home2/.claude.json"), "{}");
    write_file(at("home2/secret"), "key");
    d = (struct ll_defaults){.home = at("home2/"), .cwd = at("home2/proj"),
                             .tmpdir = at("tmpdir"), .narrow_home = true};
    assert_int_equal(ll_policy_default(&d, &p), 0);
    drop_tmp(&p);
    build(&p, abi);
    in_child(child_narrow, 0);
    ll_policy_free(&p);

    d.cwd = NULL;
    assert_int_equal(ll_policy_default(&d, &p), -EINVAL);
    assert_int_equal(ll_policy_default(NULL, &p), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe),
        cmocka_unit_test(test_tree),
        cmocka_unit_test(test_scopes),
        cmocka_unit_test(test_required_missing),
        cmocka_unit_test(test_optional_missing),
        cmocka_unit_test(test_bad_paths),
        cmocka_unit_test(test_symlinks),
        cmocka_unit_test(test_file_rules),
        cmocka_unit_test(test_abi_table),
        cmocka_unit_test(test_restrict_requires_nnp),
        cmocka_unit_test(test_default_policy),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
