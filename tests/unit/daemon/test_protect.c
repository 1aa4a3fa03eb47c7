/* daemon/protect.c and common/home_entry.c: which home entries are covered
 * read-only, which directories are pinned on the way, what is created. Runs
 * on a scratch home under /tmp with the test's own identity. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/home_entry.h"
#include "daemon/protect.h"

static char home[64];

static int setup(void **state) {
    (void)state;
    snprintf(home, sizeof(home), "/tmp/lyh-prot-XXXXXX");
    return mkdtemp(home) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", home);
    return system(cmd) == 0 ? 0 : -1;
}

static void mk(const char *rel, bool dir) {
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", home, rel);
    if (dir)
        assert_int_equal(mkdir(p, 0700), 0);
    else {
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fclose(f);
    }
}

/* The index of home/rel in l, or -1. */
static int find(const struct prot_list *l, const char *rel, bool *ro) {
    char p[PATH_MAX];
    if (rel[0] == '/')
        snprintf(p, sizeof(p), "%s", rel);
    else
        snprintf(p, sizeof(p), "%s/%s", home, rel);
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].path, p) == 0) {
            if (ro)
                *ro = l->v[i].ro;
            return (int)i;
        }
    return -1;
}

static bool is_dir(const char *rel) {
    char p[PATH_MAX];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", home, rel);
    return lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700;
}

static bool exists(const char *rel) {
    char p[PATH_MAX];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", home, rel);
    return lstat(p, &st) == 0;
}

static void test_fresh_home(void **state) {
    (void)state;
    struct prot_list l = {.n = 0};
    char why[300];
    mk(".bashrc", false);
    mk(".profile", false);
    assert_int_equal(prot_collect(home, getuid(), NULL, 0, &l, why, sizeof(why)), 0);
    bool ro = false;
    /* existing files: covered; missing ones that would shadow others: not made */
    assert_true(find(&l, ".bashrc", &ro) >= 0 && ro);
    assert_true(find(&l, ".profile", &ro) >= 0 && ro);
    assert_false(exists(".bash_profile"));
    assert_int_equal(find(&l, ".bash_profile", NULL), -1);
    assert_false(exists(".gitconfig"));
    /* directories the list creates: made 0700 and covered; their parents pinned first */
    assert_true(is_dir(".config/lianyaohu"));
    assert_true(is_dir(".config/systemd/user"));
    assert_true(is_dir(".local/share/systemd/user"));
    assert_true(is_dir(".ssh"));
    int cfg = find(&l, ".config", &ro);
    assert_true(cfg >= 0 && !ro);
    int lyh = find(&l, ".config/lianyaohu", &ro);
    assert_true(lyh > cfg && ro);
    int sd = find(&l, ".config/systemd", &ro);
    assert_true(sd > cfg && !ro);
    assert_true(find(&l, ".config/systemd/user", &ro) > sd && ro);
    assert_true(find(&l, ".local", &ro) >= 0 && !ro);
    /* the home itself is never a mount of ours */
    assert_int_equal(find(&l, home, NULL), -1);
    assert_true(prot_covers(&l, "/nonexistent") == false);
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/.ssh/config", home);
    assert_true(prot_covers(&l, p));
    snprintf(p, sizeof(p), "%s/.sshx", home);
    assert_false(prot_covers(&l, p));
    snprintf(p, sizeof(p), "%s/.config", home);
    assert_false(prot_covers(&l, p)); /* pinned, not read-only */
    prot_list_clear(&l);
}

/* A symlinked entry is covered itself (it cannot be replaced) and so is its
 * target; a symlinked directory on the way is pinned and followed. */
static void test_symlinks(void **state) {
    (void)state;
    struct prot_list l = {.n = 0};
    char why[300], p[PATH_MAX], t[PATH_MAX];
    mk("dotfiles", true);
    mk("dotfiles/bashrc", false);
    mk("dotfiles/config", true);
    snprintf(p, sizeof(p), "%s/.bashrc", home);
    assert_int_equal(symlink("dotfiles/bashrc", p), 0);
    snprintf(p, sizeof(p), "%s/.config", home);
    assert_int_equal(symlink("dotfiles/config", p), 0);
    assert_int_equal(prot_collect(home, getuid(), NULL, 0, &l, why, sizeof(why)), 0);
    bool ro = false;
    assert_true(find(&l, ".bashrc", &ro) >= 0 && ro);
    snprintf(t, sizeof(t), "%s/dotfiles/bashrc", home);
    char *real = realpath(t, NULL);
    assert_non_null(real);
    assert_true(find(&l, real, &ro) >= 0 && ro);
    free(real);
    int link = find(&l, ".config", &ro);
    assert_true(link >= 0 && !ro);
    /* the directory above the dotfile's target is pinned (renaming
     * ~/dotfiles away would put another bashrc behind the link), before
     * the target's own cover */
    int dot = find(&l, "dotfiles", &ro);
    assert_true(dot >= 0 && !ro);
    snprintf(t, sizeof(t), "%s/dotfiles/bashrc", home);
    real = realpath(t, NULL);
    assert_non_null(real);
    assert_true(find(&l, real, NULL) > dot);
    free(real);
    /* ~/.config/lianyaohu was made inside the link's target */
    assert_true(is_dir("dotfiles/config/lianyaohu"));
    snprintf(t, sizeof(t), "%s/dotfiles/config/lianyaohu", home);
    real = realpath(t, NULL);
    assert_non_null(real);
    assert_true(find(&l, real, &ro) > link && ro);
    free(real);
    prot_list_clear(&l);
}

/* Extra names (policy, request) are covered only when they exist; a name
 * listed twice is one mount; a file where a directory would be stops the walk. */
static void test_extras(void **state) {
    (void)state;
    struct prot_list l = {.n = 0};
    char why[300];
    mk(".npmrc", false);
    mk(".local", false); /* a file: nothing below it, and no error */
    const char *names[] = {".npmrc", ".npmrc", ".missing/x", ".local/y"};
    assert_int_equal(prot_collect(home, getuid(), names, 4, &l, why, sizeof(why)), 0);
    bool ro = false;
    assert_true(find(&l, ".npmrc", &ro) >= 0 && ro);
    size_t count = 0;
    for (size_t i = 0; i < l.n; i++)
        count += strstr(l.v[i].path, ".npmrc") != NULL;
    assert_int_equal(count, 1);
    assert_false(exists(".missing"));
    assert_int_equal(find(&l, ".local/y", NULL), -1);
    prot_list_clear(&l);
}

/* A directory of the caller's that lyh cannot look into (an earlier agent
 * chmod-ed it) fails the launch instead of leaving what is below uncovered;
 * as root the test cannot be refused a lookup, so only as a user. */
static void test_blocked_fails_closed(void **state) {
    (void)state;
    struct prot_list l = {.n = 0};
    char why[300], p[PATH_MAX];
    if (geteuid() == 0)
        skip();
    mk(".config", true);
    snprintf(p, sizeof(p), "%s/.config", home);
    assert_int_equal(chmod(p, 0), 0);
    assert_int_equal(prot_collect(home, getuid(), NULL, 0, &l, why, sizeof(why)), -EACCES);
    assert_non_null(strstr(why, "chmod u+rwx"));
    prot_list_clear(&l);
    assert_int_equal(chmod(p, 0700), 0);
    /* someone else's directory lyh cannot look into is nothing to cover */
    assert_int_equal(prot_collect(home, getuid() + 1, NULL, 0, &l, why, sizeof(why)), 0);
    prot_list_clear(&l);
}

static void test_he_check(void **state) {
    (void)state;
    char c[HE_NAME_MAX], why[200];
    static const struct {
        const char *in, *out;
    } good[] = {{".npmrc", ".npmrc"}, {"~/.config/foo/", ".config/foo"}, {"a/b c/d", "a/b c/d"}};
    static const char *const bad[] = {"", "~/", "/etc", "~//x", "a//b", "./a", "a/..", "a/./b",
                                      "a\\b", "a\nb", "\xc3\xa9",
                                      /* would not come back as itself (fuzz_policy) */
                                      "~/~/x", "~", "a/~/b"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        assert_int_equal(he_check(good[i].in, c, why, sizeof(why)), 0);
        assert_string_equal(c, good[i].out);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(he_check(bad[i], c, why, sizeof(why)), -EINVAL);
    char longname[HE_NAME_MAX + 10];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    assert_int_equal(he_check(longname, c, why, sizeof(why)), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fresh_home, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlinks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extras, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blocked_fails_closed, setup, teardown),
        cmocka_unit_test(test_he_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
