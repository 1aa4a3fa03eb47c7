/* The pfctl driver (platform/darwin/pf.c) against a stand-in pfctl.
 *
 * PF does not exist on Linux, so this checks what the driver can get wrong on
 * its own: the exact pfctl calls and their order, the rules file (mode,
 * content, atomic replace), the enable token held per anchor and released,
 * and that every failure (vet refused, load refused, no token, a hung pfctl,
 * a missing pfctl) leaves nothing of ours behind. The stand-in is a shell
 * script that logs its argv and answers as pfctl does ("Token : N" after -E;
 * an anchor list after -s Anchors); files in its directory make one step
 * fail or hang. Whether PF enforces the anchor is checked on a Mac only. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/macros.h"
#include "golden_file.h"
#include "platform/darwin/pf.h"

struct fx {
    char dir[256];   /* the stand-in's control directory */
    char rules[300]; /* the driver's rules directory */
    char pfctl[300];
    struct pf *pf;
};

static const char script[] =
    "#!/bin/sh\n"
    "d='%s'\n"
    "echo \"$*\" >> \"$d/calls\"\n"
    "step=other\n"
    "case \"$1\" in\n"
    "  -n) step=vet ;;\n"
    "  -E) step=enable ;;\n"
    "  -X) step=release ;;\n"
    "  -a) case \"$3\" in -f) step=load ;; -F) step=flush ;; -s) step=list ;; esac ;;\n"
    "esac\n"
    "[ -f \"$d/hang-$step\" ] && exec sleep 30\n"
    "if [ -f \"$d/fail-$step\" ]; then cat \"$d/fail-$step\" >&2; exit 1; fi\n"
    "case $step in\n"
    "  vet) cp \"$3\" \"$d/vetted\" ;;\n"
    "  enable) echo 'pf enabled'\n"
    "          [ -f \"$d/notoken\" ] && exit 0\n"
    "          n=$(cat \"$d/next\" 2>/dev/null || echo 1000); echo \"Token : $n\"\n"
    "          echo $((n + 1)) > \"$d/next\" ;;\n"
    "  load) cp \"$4\" \"$d/loaded\" ;;\n"
    "  list) cat \"$d/anchors\" 2>/dev/null ;;\n"
    "esac\n"
    "exit 0\n";

static void put(const struct fx *x, const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", x->dir, name);
    FILE *f = fopen(p, "we");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void drop(const struct fx *x, const char *name) {
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", x->dir, name);
    unlink(p);
}

/* The calls the stand-in saw since the last reset, one per line. */
static char *calls(const struct fx *x) {
    char p[512];
    snprintf(p, sizeof(p), "%s/calls", x->dir);
    char *c = golden_read(p);
    return c ? c : strdup("");
}

/* Did the stand-in see a call whose first argument is opt? Not a substring
 * search: the calls carry paths in the stand-in's directory, whose random
 * mkdtemp suffix may well start with "X" or "E" ("lyh-pfdrv-X..." holds "-X"). */
static bool called(const char *c, const char *opt) {
    size_t n = strlen(opt);
    for (const char *l = c; l && *l;) {
        if (strncmp(l, opt, n) == 0 && (l[n] == ' ' || l[n] == '\n' || l[n] == '\0'))
            return true;
        l = strchr(l, '\n');
        l = l ? l + 1 : NULL;
    }
    return false;
}

static void reset_calls(const struct fx *x) {
    drop(x, "calls");
}

static bool exists_in(const char *dir, const char *name) {
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static int setup(void **state) {
    struct fx *x = calloc(1, sizeof(*x));
    assert_non_null(x);
    snprintf(x->dir, sizeof(x->dir), "/tmp/lyh-pfdrv-XXXXXX");
    assert_non_null(mkdtemp(x->dir));
    snprintf(x->rules, sizeof(x->rules), "%s/rules", x->dir);
    snprintf(x->pfctl, sizeof(x->pfctl), "%s/pfctl", x->dir);
    FILE *f = fopen(x->pfctl, "we");
    assert_non_null(f);
    fprintf(f, script, x->dir);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(x->pfctl, 0755), 0);
    char why[256] = "";
    struct pf_config cfg = {.pfctl = x->pfctl, .rules_dir = x->rules, .timeout_ms = 5000};
    assert_int_equal(pf_open(&cfg, &x->pf, why, sizeof(why)), 0);
    *state = x;
    return 0;
}

static int teardown(void **state) {
    struct fx *x = *state;
    pf_close(x->pf);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", x->dir);
    assert_int_equal(system(cmd), 0);
    free(x);
    return 0;
}

static struct pfr_input group_input(uint32_t uid) {
    struct pfr_input in = {.scope = PFR_SCOPE_GROUP,
                           .uid = uid,
                           .guard_gid = PFR_DEFAULT_GUARD_GID,
                           .iface = "utun4",
                           .has_peer = true};
    inet_pton(AF_INET, "10.9.0.1", in.peer);
    return in;
}

static void check_rules_file(const struct fx *x, const char *name, const struct pfr_input *in) {
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", x->rules, name);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    _cleanup_free_ char *want = NULL;
    assert_int_equal(pfr_render(in, &want), 0);
    _cleanup_free_ char *got = golden_read(p);
    assert_non_null(got);
    assert_string_equal(got, want);
}

static void test_load_replace_unload(void **state) {
    struct fx *x = *state;
    char why[512] = "";
    struct pfr_input in = group_input(501);

    assert_int_equal(pf_anchor_load(x->pf, &in, why, sizeof(why)), 0);
    _cleanup_free_ char *c1 = calls(x);
    char want[2048];
    snprintf(want, sizeof(want),
             "-n -f %s/.lianyaohu-501.pf.tmp\n"
             "-E\n"
             "-a com.apple/lianyaohu-501 -f %s/.lianyaohu-501.pf.tmp\n",
             x->rules, x->rules);
    assert_string_equal(c1, want);
    check_rules_file(x, "lianyaohu-501.pf", &in);
    assert_false(exists_in(x->rules, ".lianyaohu-501.pf.tmp"));
    /* what pfctl vetted and loaded is what was rendered */
    char p[512];
    snprintf(p, sizeof(p), "%s/loaded", x->dir);
    _cleanup_free_ char *loaded = golden_read(p);
    _cleanup_free_ char *rendered = NULL;
    assert_int_equal(pfr_render(&in, &rendered), 0);
    assert_string_equal(loaded, rendered);
    uint64_t tok = 0;
    assert_int_equal(pf_token_get(x->pf, PFR_SCOPE_GROUP, 501, &tok), 0);
    assert_true(tok == 1000);

    /* replace: no second enable, the same token, the new rules on record */
    reset_calls(x);
    in.policy.ipv6_blocked = true;
    assert_int_equal(pf_anchor_load(x->pf, &in, why, sizeof(why)), 0);
    _cleanup_free_ char *c2 = calls(x);
    assert_null(strstr(c2, "-E\n"));
    assert_non_null(strstr(c2, "-a com.apple/lianyaohu-501 -f "));
    check_rules_file(x, "lianyaohu-501.pf", &in);
    assert_int_equal(pf_token_get(x->pf, PFR_SCOPE_GROUP, 501, &tok), 0);
    assert_true(tok == 1000);

    /* a second uid gets its own anchor and token */
    struct pfr_input other = group_input(502);
    assert_int_equal(pf_anchor_load(x->pf, &other, why, sizeof(why)), 0);
    assert_int_equal(pf_token_get(x->pf, PFR_SCOPE_GROUP, 502, &tok), 0);
    assert_true(tok == 1001);

    /* unload: flush rules, then tables, then release exactly our token */
    reset_calls(x);
    assert_int_equal(pf_anchor_unload(x->pf, PFR_SCOPE_GROUP, 501, why, sizeof(why)), 0);
    _cleanup_free_ char *c3 = calls(x);
    assert_string_equal(c3, "-a com.apple/lianyaohu-501 -F rules\n"
                            "-a com.apple/lianyaohu-501 -F Tables\n"
                            "-X 1000\n");
    assert_false(exists_in(x->rules, "lianyaohu-501.pf"));
    assert_true(exists_in(x->rules, "lianyaohu-502.pf"));
    assert_int_equal(pf_token_get(x->pf, PFR_SCOPE_GROUP, 501, &tok), -ENOENT);
    assert_int_equal(pf_token_get(x->pf, PFR_SCOPE_GROUP, 502, &tok), 0);

    /* never anything global */
    assert_null(strstr(c1, "-F all"));
    assert_null(strstr(c3, "-F all"));
    assert_null(strstr(c3, "-d"));
}

static void test_vet_refused(void **state) {
    struct fx *x = *state;
    char why[512] = "";
    struct pfr_input in = group_input(600);

    put(x, "fail-vet", "pfctl: Syntax error in config file: pf rules not loaded\n");
    assert_int_equal(pf_anchor_load(x->pf, &in, why, sizeof(why)), -EIO);
    assert_non_null(strstr(why, "vet com.apple/lianyaohu-600"));
    assert_non_null(strstr(why, "Syntax error"));
    _cleanup_free_ char *c = calls(x);
    assert_false(called(c, "-E")); /* PF never enabled for a bad ruleset */
    assert_false(exists_in(x->rules, "lianyaohu-600.pf"));
    assert_false(exists_in(x->rules, ".lianyaohu-600.pf.tmp"));
    uint64_t tok;
    assert_int_equal(pf_token_get(x->pf, PFR_SCOPE_GROUP, 600, &tok), -ENOENT);
}

static void test_load_refused_releases_token(void **state) {
    struct fx *x = *state;
    char why[512] = "";
    struct pfr_input in = group_input(601);

    put(x, "fail-load", "pfctl: DIOCXCOMMIT: Device busy\n");
    assert_int_equal(pf_anchor_load(x->pf, &in, why, sizeof(why)), -EIO);
    assert_non_null(strstr(why, "Device busy"));
    _cleanup_free_ char *c = calls(x);
    assert_non_null(strstr(c, "-E\n"));
    assert_non_null(strstr(c, "-X 1000\n")); /* the reference we took is given back */
    assert_false(exists_in(x->rules, "lianyaohu-601.pf"));
    assert_false(exists_in(x->rules, ".lianyaohu-601.pf.tmp"));
    uint64_t tok;
    assert_int_equal(pf_token_get(x->pf, PFR_SCOPE_GROUP, 601, &tok), -ENOENT);
}

static void test_replace_refused_keeps_previous(void **state) {
    struct fx *x = *state;
    char why[512] = "";
    struct pfr_input in = group_input(602);

    assert_int_equal(pf_anchor_load(x->pf, &in, why, sizeof(why)), 0);
    struct pfr_input newer = in;
    newer.policy.ipv6_blocked = true;
    put(x, "fail-load", "pfctl: cannot load\n");
    reset_calls(x);
    assert_int_equal(pf_anchor_load(x->pf, &newer, why, sizeof(why)), -EIO);
    _cleanup_free_ char *c = calls(x);
    assert_false(called(c, "-X")); /* the anchor still holds its reference */
    check_rules_file(x, "lianyaohu-602.pf", &in); /* the record still shows what PF holds */
    uint64_t tok;
    assert_int_equal(pf_token_get(x->pf, PFR_SCOPE_GROUP, 602, &tok), 0);
}

static void test_no_token(void **state) {
    struct fx *x = *state;
    char why[512] = "";
    struct pfr_input in = group_input(603);

    put(x, "notoken", "");
    assert_int_equal(pf_anchor_load(x->pf, &in, why, sizeof(why)), -EPROTO);
    assert_non_null(strstr(why, "no enable token"));
    _cleanup_free_ char *c = calls(x);
    assert_null(strstr(c, "-a com.apple/lianyaohu-603 -f")); /* not loaded */
    assert_false(exists_in(x->rules, "lianyaohu-603.pf"));
}

static void test_hung_pfctl(void **state) {
    struct fx *x = *state;
    char why[512] = "";
    struct pfr_input in = group_input(604);
    struct pf *fast = NULL;
    struct pf_config cfg = {.pfctl = x->pfctl, .rules_dir = x->rules, .timeout_ms = 300};
    assert_int_equal(pf_open(&cfg, &fast, why, sizeof(why)), 0);

    put(x, "hang-vet", "");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(pf_anchor_load(fast, &in, why, sizeof(why)), -ETIMEDOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* killed at the deadline, not after the stand-in's 30 s sleep */
    assert_true(t1.tv_sec - t0.tv_sec < 10);
    assert_non_null(strstr(why, "did not finish within 300 ms"));
    assert_false(exists_in(x->rules, ".lianyaohu-604.pf.tmp"));
    pf_close(fast);
}

static void test_missing_pfctl(void **state) {
    struct fx *x = *state;
    char why[512] = "", nope[400];
    struct pf *p = NULL;
    snprintf(nope, sizeof(nope), "%s/no-such-pfctl", x->dir);
    struct pf_config cfg = {.pfctl = nope, .rules_dir = x->rules};
    assert_int_equal(pf_open(&cfg, &p, why, sizeof(why)), 0);
    struct pfr_input in = group_input(605);
    int r = pf_anchor_load(p, &in, why, sizeof(why));
    assert_true(r < 0);
    assert_non_null(strstr(why, "no-such-pfctl"));
    assert_false(exists_in(x->rules, ".lianyaohu-605.pf.tmp"));
    assert_false(exists_in(x->rules, "lianyaohu-605.pf"));
    pf_close(p);
}

static void test_reap(void **state) {
    struct fx *x = *state;
    char why[512] = "";

    struct pfr_input kept_in = group_input(501);
    assert_int_equal(pf_anchor_load(x->pf, &kept_in, why, sizeof(why)), 0);
    /* a dead lyhd's anchor 502, whose token lyhd adopted from its records */
    assert_int_equal(pf_token_adopt(x->pf, PFR_SCOPE_GROUP, 502, 4242), 0);
    assert_int_equal(pf_token_adopt(x->pf, PFR_SCOPE_GROUP, 502, 4243), -EEXIST);
    assert_int_equal(pf_token_adopt(x->pf, PFR_SCOPE_GROUP, 503, 0), -EINVAL);
    put(x, "anchors", "  com.apple/250.ApplicationFirewall\n"
                      "  com.apple/lianyaohu-501\n"
                      "  com.apple/lianyaohu-502\n"
                      "  com.apple/lianyaohu-user-7\n"
                      "  com.apple/lianyaohu-0501\n"
                      "  com.apple/lianyaohu-$(reboot)\n");
    /* stale files of dead anchors and a temporary left by a crash */
    char p[512];
    const char *stale[] = {"lianyaohu-502.pf", ".lianyaohu-9.pf.tmp", "lianyaohu-user-7.pf"};
    for (size_t i = 0; i < ARRAY_SIZE(stale); i++) {
        snprintf(p, sizeof(p), "%s/%s", x->rules, stale[i]);
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        close(fd);
    }
    snprintf(p, sizeof(p), "%s/unrelated.txt", x->rules);
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    close(fd);

    reset_calls(x);
    struct pfctl_anchor keep = {.name = "com.apple/lianyaohu-501", .well_formed = true,
                                .scope = PFR_SCOPE_GROUP, .uid = 501};
    struct pf_reap_report rep;
    assert_int_equal(pf_reap(x->pf, &keep, 1, &rep, why, sizeof(why)), 0);
    _cleanup_free_ char *c = calls(x);
    assert_string_equal(c, "-a com.apple -s Anchors\n"
                           "-a com.apple/lianyaohu-502 -F rules\n"
                           "-a com.apple/lianyaohu-502 -F Tables\n"
                           "-a com.apple/lianyaohu-user-7 -F rules\n"
                           "-a com.apple/lianyaohu-user-7 -F Tables\n"
                           "-a com.apple/lianyaohu-0501 -F rules\n"
                           "-a com.apple/lianyaohu-0501 -F Tables\n"
                           "-X 4242\n");
    assert_int_equal(rep.flushed, 3);
    assert_int_equal(rep.malformed, 1);
    assert_int_equal(rep.skipped_unsafe, 1);
    assert_int_equal(rep.tokens_released, 1);
    assert_int_equal(rep.files_removed, 3);
    assert_true(exists_in(x->rules, "lianyaohu-501.pf"));
    assert_true(exists_in(x->rules, "unrelated.txt"));
    for (size_t i = 0; i < ARRAY_SIZE(stale); i++)
        assert_false(exists_in(x->rules, stale[i]));
    uint64_t tok;
    assert_int_equal(pf_token_get(x->pf, PFR_SCOPE_GROUP, 501, &tok), 0);
    assert_int_equal(pf_token_get(x->pf, PFR_SCOPE_GROUP, 502, &tok), -ENOENT);

    /* a refused flush is reported and the rest still happens */
    put(x, "fail-flush", "pfctl: Operation not permitted\n");
    assert_int_equal(pf_token_adopt(x->pf, PFR_SCOPE_USER, 7, 555), 0);
    reset_calls(x);
    assert_int_equal(pf_reap(x->pf, &keep, 1, &rep, why, sizeof(why)), -EIO);
    assert_non_null(strstr(why, "Operation not permitted"));
    _cleanup_free_ char *c2 = calls(x);
    assert_non_null(strstr(c2, "-X 555\n"));
    assert_int_equal(rep.tokens_released, 1);
    assert_int_equal(rep.flushed, 0);
}

static void test_open_refuses_unsafe_dir(void **state) {
    struct fx *x = *state;
    char why[512] = "", d[400];
    struct pf *p = NULL;

    snprintf(d, sizeof(d), "%s/shared", x->dir);
    assert_int_equal(mkdir(d, 0700), 0);
    assert_int_equal(chmod(d, 0770), 0);
    struct pf_config cfg = {.pfctl = x->pfctl, .rules_dir = d};
    assert_int_equal(pf_open(&cfg, &p, why, sizeof(why)), -EPERM);
    assert_non_null(strstr(why, "writable by nobody else"));
    assert_null(p);

    struct pf_config rel = {.pfctl = "pfctl", .rules_dir = x->rules};
    assert_int_equal(pf_open(&rel, &p, why, sizeof(why)), -EINVAL);
    /* a symlink in place of the directory is not followed */
    snprintf(d, sizeof(d), "%s/link", x->dir);
    assert_int_equal(symlink(x->rules, d), 0);
    struct pf_config lnk = {.pfctl = x->pfctl, .rules_dir = d};
    assert_true(pf_open(&lnk, &p, why, sizeof(why)) < 0);
    assert_null(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_load_replace_unload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vet_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_refused_releases_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_refused_keeps_previous, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_token, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hung_pfctl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_pfctl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_refuses_unsafe_dir, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
