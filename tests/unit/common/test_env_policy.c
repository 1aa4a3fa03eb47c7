/* Environment policy: allowlist and block list (case-insensitive, substrings,
 * BASH_FUNC_ exports), explicit --env checks and their messages, forced
 * variables, de-duplication, name grammar, count and size caps, the
 * administrator's extra patterns. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/env_policy.h"
#include "common/macros.h"

#define UNTOUCHED "untouched"
#define SENTINEL ((char **)(uintptr_t)0x1)

static const char *const forced_tail[] = {
    "HOME=/sandbox/home", "PWD=/work/proj", "TMPDIR=/tmp/lyh-1", "TZ=UTC", "LIANYAOHU_SANDBOX=1",
};

static struct envp_input base_input(void) {
    return (struct envp_input){
        .home = "/sandbox/home",
        .pwd = "/work/proj",
        .tmpdir = "/tmp/lyh-1",
    };
}

/* envp must equal head[0..nhead) followed by the forced variables, then NULL. */
static void assert_envp(char **envp, const char *const *head, size_t nhead) {
    size_t i = 0;
    for (; i < nhead; i++) {
        assert_non_null(envp[i]);
        assert_string_equal(envp[i], head[i]);
    }
    for (size_t k = 0; k < ARRAY_SIZE(forced_tail); k++, i++) {
        assert_non_null(envp[i]);
        assert_string_equal(envp[i], forced_tail[k]);
    }
    assert_null(envp[i]);
}

static void test_inherit_allowlist(void **state) {
    static const char *const yes[] = {
        "HOME", "PATH", "TERM", "COLORTERM", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "USER",
        "LOGNAME", "SHELL", "EDITOR", "VISUAL", "PAGER", "NO_COLOR", "FORCE_COLOR",
        "TERM_PROGRAM", "COLUMNS", "LINES", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
        "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_USE_BEDROCK", "CODEX_HOME", "OPENAI_API_KEY",
        "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "DO_NOT_TRACK",
        "DISABLE_TELEMETRY", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME",
        "GIT_COMMITTER_EMAIL", "GIT_EDITOR", "GIT_PAGER", "GIT_TERMINAL_PROMPT",
    };
    static const char *const no[] = {
        /* not allowlisted: host credentials, proxies, XDG dirs, npm, git state */
        "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "http_proxy", "HTTPS_PROXY", "no_proxy",
        "ALL_PROXY", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "npm_config_registry",
        "NPM_CONFIG_REGISTRY", "GIT_DIR", "GIT_WORK_TREE", "GOOGLE_APPLICATION_CREDENTIALS",
        "OLDPWD", "LS_COLORS", "TMPDIR", "PWD",
        /* exact case only, and the prefix needs its underscore */
        "path", "Home", "LC", "anthropic_api_key",
        /* allowlisted prefix but blocked */
        "LC_TIMEZONE", "CLAUDE_MACHINE_ID", "ANTHROPIC_SERIAL", "OPENAI_WIFI",
        /* invalid */
        "", "1PATH", "PA TH", "PATH=", "LC_%",
    };
    for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
        if (!envp_inherit_ok(yes[i]))
            fail_msg("%s should be inherited", yes[i]);
        assert_false(envp_blocked(yes[i]));
    }
    for (size_t i = 0; i < ARRAY_SIZE(no); i++)
        if (envp_inherit_ok(no[i]))
            fail_msg("'%s' should not be inherited", no[i]);
    assert_false(envp_inherit_ok(NULL));
}

static void test_blocked_case_insensitive(void **state) {
    static const char *const blocked[] = {
        "LD_PRELOAD", "ld_preload", "Ld_Library_Path", "LD_AUDIT", "dyld_insert_libraries",
        "GLIBC_TUNABLES", "GCONV_PATH", "MALLOC_CHECK_", "malloc_trace", "LOCPATH", "NLSPATH",
        "HOSTALIASES", "RES_OPTIONS", "OPENSSL_CONF",
        "PYTHONPATH", "PythonStartup", "PYTHONHOME", "PERL5LIB", "PERL5OPT", "perllib",
        "RUBYOPT", "RUBYLIB", "LUA_INIT", "NODE_OPTIONS", "node_options", "NODE_PATH",
        "npm_config_node_options", "NPM_CONFIG_SCRIPT_SHELL", "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "DOTNET_STARTUP_HOOKS", "CORECLR_PROFILER_PATH",
        "COR_PROFILER_PATH",
        "BASH_ENV", "ENV", "env", "SHELLOPTS", "BASHOPTS", "PS4", "ps1", "ZDOTDIR", "IFS",
        "PROMPT_COMMAND", "FPATH", "LESSOPEN",
        "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0",
        "GIT_CONFIG_VALUE_0", "GIT_CONFIG_PARAMETERS", "GIT_SSH", "git_ssh_command",
        "GIT_EXEC_PATH", "GIT_ASKPASS", "GIT_PROXY_COMMAND", "GIT_EXTERNAL_DIFF",
        "GIT_TEMPLATE_DIR",
        "HOSTNAME", "hostname", "HOST", "SSH_AUTH_SOCK", "SSH_CONNECTION", "ssh_client",
        "SSH_ASKPASS", "DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS",
        "TZ", "tz", "TZDIR", "XPC_SERVICE_NAME", "XDG_RUNTIME_DIR", "XDG_SESSION_ID",
        "TMUX", "KITTY_LISTEN_ON", "SUDO_USER", "DOCKER_HOST", "TERM_SESSION_ID",
        "LIANYAOHU_SANDBOX", "lianyaohu_anything",
    };
    static const char *const not_blocked[] = {
        "HOME", "PATH", "TERM", "LANG", "ANTHROPIC_API_KEY", "GIT_AUTHOR_NAME", "EDITOR",
        "LD", "LDFLAGS", "TZX", "PS5", "ENVIRONMENT", "GIT_DIR", "AWS_PROFILE", "http_proxy",
        "PWD", "TMPDIR",
    };
    for (size_t i = 0; i < ARRAY_SIZE(blocked); i++) {
        if (!envp_blocked(blocked[i]))
            fail_msg("%s should be blocked", blocked[i]);
        assert_false(envp_inherit_ok(blocked[i]));
    }
    for (size_t i = 0; i < ARRAY_SIZE(not_blocked); i++)
        if (envp_blocked(not_blocked[i]))
            fail_msg("%s should not be blocked", not_blocked[i]);
    assert_true(envp_blocked(NULL));
}

static void test_bash_func(void **state) {
    char why[ENVP_WHY_MAX];

    assert_true(envp_blocked("BASH_FUNC_foo%%"));
    assert_true(envp_blocked("bash_func_foo()"));
    assert_int_equal(envp_check_explicit("BASH_FUNC_foo%%", "() { id; }", why, sizeof(why)),
                     -EPERM);
    assert_non_null(strstr(why, "'BASH_FUNC_foo%%'"));
    assert_non_null(strstr(why, "shell"));

    /* Inherited exported functions are dropped, not an error. */
    char *inh[] = {"BASH_FUNC_foo%%=() {  id" "\n" "}", "PATH=/bin", NULL};
    struct envp_input in = base_input();
    in.inherited = inh;
    _cleanup_(envp_freep) char **envp = NULL;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), 0);
    const char *want[] = {"PATH=/bin"};
    assert_envp(envp, want, ARRAY_SIZE(want));
}

static void test_identity_substrings(void **state) {
    /* EMACS and MACHINE are caught too: broad on purpose (fail closed). */
    static const char *const names[] = {
        "MAC_ADDRESS", "mac", "WLAN_MAC", "MACHINE_ID", "EMACS", "DEVICE_SERIAL",
        "serial_number", "WIFI_NAME", "my_wifi", "BSSID", "AP_BSSID", "SSID",
        "SYSTEM_TIMEZONE", "timezone", "LOCAL_IP", "MY_LOCAL_IP_ADDR", "BUILD_HOSTNAME",
    };
    char why[ENVP_WHY_MAX];
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        if (!envp_blocked(names[i]))
            fail_msg("%s should be blocked", names[i]);
        assert_int_equal(envp_check_explicit(names[i], "x", why, sizeof(why)), -EPERM);
        assert_non_null(strstr(why, names[i]));
    }
}

static void test_explicit_refused_with_name(void **state) {
    char why[ENVP_WHY_MAX];

    assert_int_equal(envp_check_explicit("LD_PRELOAD", "/tmp/x.so", why, sizeof(why)), -EPERM);
    assert_non_null(strstr(why, "'LD_PRELOAD'"));
    assert_non_null(strstr(why, "loader"));

    assert_int_equal(envp_check_explicit("NODE_OPTIONS", "--require /x.js", why, sizeof(why)),
                     -EPERM);
    assert_non_null(strstr(why, "'NODE_OPTIONS'"));
    assert_non_null(strstr(why, "interpreter"));

    assert_int_equal(envp_check_explicit("ld_preload", "x", why, sizeof(why)), -EPERM);
    assert_non_null(strstr(why, "'ld_preload'"));

    assert_int_equal(envp_check_explicit("TZ", "Asia/Shanghai", why, sizeof(why)), -EPERM);
    assert_non_null(strstr(why, "'TZ'"));
    assert_non_null(strstr(why, "TZ=UTC"));

    assert_int_equal(envp_check_explicit("GIT_CONFIG_COUNT", "1", why, sizeof(why)), -EPERM);
    assert_non_null(strstr(why, "git"));

    /* A NULL why is fine. */
    assert_int_equal(envp_check_explicit("LD_PRELOAD", "x", NULL, 0), -EPERM);
}

static void test_explicit_allowed(void **state) {
    /* Not allowlisted, but asked for: fine. why is left alone on success. */
    static const char *const names[] = {
        "AWS_PROFILE", "https_proxy", "HTTPS_PROXY", "XDG_CONFIG_HOME", "npm_config_registry",
        "GITHUB_TOKEN", "FOO", "_X", "a1", "HOME", "PWD", "TMPDIR",
    };
    char why[ENVP_WHY_MAX];
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        strcpy(why, UNTOUCHED);
        if (envp_check_explicit(names[i], "value with spaces\nand\tcontrol \x01 bytes", why,
                                sizeof(why)) != 0)
            fail_msg("%s refused: %s", names[i], why);
        assert_string_equal(why, UNTOUCHED);
    }
    assert_int_equal(envp_check_explicit("EMPTY", "", why, sizeof(why)), 0);
    assert_true(envp_is_forced("HOME"));
    assert_true(envp_is_forced("TZ"));
    assert_true(envp_is_forced("LIANYAOHU_SANDBOX"));
    assert_false(envp_is_forced("home"));
    assert_false(envp_is_forced("PATH"));
    assert_false(envp_is_forced(NULL));
}

static void test_invalid_names(void **state) {
    char why[ENVP_WHY_MAX];

    assert_int_equal(envp_check_explicit("", "x", why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "empty"));
    assert_int_equal(envp_check_explicit("1ABC", "x", why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "'1ABC' is not a valid environment variable name"));
    assert_int_equal(envp_check_explicit("A-B", "x", why, sizeof(why)), -EINVAL);
    assert_int_equal(envp_check_explicit("A B", "x", why, sizeof(why)), -EINVAL);
    assert_int_equal(envp_check_explicit("A=B", "x", why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "contains '='"));
    assert_int_equal(envp_check_explicit("\xc3\x84X", "x", why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "\\xc3\\x84X"));
    /* A terminal escape in a name is shown escaped, never raw. */
    assert_int_equal(envp_check_explicit("A\x1b[31m", "x", why, sizeof(why)), -EINVAL);
    assert_null(strchr(why, '\x1b'));
    assert_non_null(strstr(why, "A\\x1b[31m"));
    assert_int_equal(envp_check_explicit(NULL, "x", why, sizeof(why)), -EINVAL);
    assert_int_equal(envp_check_explicit("X", NULL, why, sizeof(why)), -EINVAL);
}

static void test_length_caps(void **state) {
    char why[ENVP_WHY_MAX];
    char name[ENVP_NAME_MAX + 2];
    _cleanup_free_ char *value = malloc(ENVP_VALUE_MAX + 2);
    assert_non_null(value);

    memset(name, 'A', ENVP_NAME_MAX);
    name[ENVP_NAME_MAX] = '\0';
    assert_int_equal(envp_check_explicit(name, "x", why, sizeof(why)), 0);
    name[ENVP_NAME_MAX] = 'A';
    name[ENVP_NAME_MAX + 1] = '\0';
    assert_int_equal(envp_check_explicit(name, "x", why, sizeof(why)), -ENAMETOOLONG);
    assert_non_null(strstr(why, "longer than 128"));

    memset(value, 'v', ENVP_VALUE_MAX);
    value[ENVP_VALUE_MAX] = '\0';
    assert_int_equal(envp_check_explicit("BIG", value, why, sizeof(why)), 0);
    value[ENVP_VALUE_MAX] = 'v';
    value[ENVP_VALUE_MAX + 1] = '\0';
    assert_int_equal(envp_check_explicit("BIG", value, why, sizeof(why)), -E2BIG);
    assert_non_null(strstr(why, "'BIG'"));
}

static void test_build_filters_and_forces(void **state) {
    char *inh[] = {
        "PATH=/usr/bin:/bin",
        "TZ=Asia/Shanghai", /* host zone: replaced by UTC */
        "HOME=/home/alice", /* replaced by the sandbox HOME */
        "HOSTNAME=alice-laptop",
        "LD_PRELOAD=/evil.so",
        "ANTHROPIC_API_KEY=sk-ant-123",
        "PWD=/home/alice/src",
        "TMPDIR=/var/folders/x",
        "LIANYAOHU_SANDBOX=0",
        "AWS_SECRET_ACCESS_KEY=secret",
        "SSH_AUTH_SOCK=/tmp/ssh-x/agent.1",
        "https_proxy=http://127.0.0.1:3128",
        "NOEQUALS",
        "=C:=C:\\",
        "LANG=en_US.UTF-8",
        NULL,
    };
    struct envp_var ex[] = {{"FOO", "bar=baz"}};
    struct envp_input in = base_input();
    in.inherited = inh;
    in.explicit_vars = ex;
    in.n_explicit = ARRAY_SIZE(ex);
    char why[ENVP_WHY_MAX] = UNTOUCHED;
    _cleanup_(envp_freep) char **envp = NULL;

    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), 0);
    assert_string_equal(why, UNTOUCHED);
    const char *want[] = {"PATH=/usr/bin:/bin", "ANTHROPIC_API_KEY=sk-ant-123",
                          "LANG=en_US.UTF-8", "FOO=bar=baz"};
    assert_envp(envp, want, ARRAY_SIZE(want));
}

static void test_build_explicit_tz_refused(void **state) {
    struct envp_var ex[] = {{"TZ", "Europe/Paris"}};
    struct envp_input in = base_input();
    in.explicit_vars = ex;
    in.n_explicit = 1;
    char why[ENVP_WHY_MAX];
    char **envp = SENTINEL;

    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), -EPERM);
    assert_ptr_equal(envp, SENTINEL); /* ret_* untouched on failure */
    assert_non_null(strstr(why, "'TZ'"));
}

static void test_build_names_first_refused(void **state) {
    struct envp_var ex[] = {{"OK", "1"}, {"LD_PRELOAD", "/x.so"}, {"NODE_OPTIONS", "-r x"}};
    struct envp_input in = base_input();
    in.explicit_vars = ex;
    in.n_explicit = ARRAY_SIZE(ex);
    char why[ENVP_WHY_MAX];
    char **envp = SENTINEL;

    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), -EPERM);
    assert_ptr_equal(envp, SENTINEL);
    assert_non_null(strstr(why, "'LD_PRELOAD'"));
    assert_null(strstr(why, "NODE_OPTIONS"));

    struct envp_var ex2[] = {{"OK", "1"}, {"BAD NAME", "x"}};
    in.explicit_vars = ex2;
    in.n_explicit = ARRAY_SIZE(ex2);
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "'BAD NAME'"));

    struct envp_var ex3[] = {{"OK", NULL}};
    in.explicit_vars = ex3;
    in.n_explicit = 1;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), -EINVAL);
    assert_ptr_equal(envp, SENTINEL);
}

static void test_build_dedupe(void **state) {
    char *inh[] = {"PATH=/a", "LANG=C", "PATH=/a2", NULL};
    struct envp_var ex[] = {
        {"PATH", "/b"}, {"X", "1"}, {"lang", "fr"}, {"X", "2"}, {"HOME", "/evil"}, {"PWD", "/p"},
    };
    struct envp_input in = base_input();
    in.inherited = inh;
    in.explicit_vars = ex;
    in.n_explicit = ARRAY_SIZE(ex);
    _cleanup_(envp_freep) char **envp = NULL;

    assert_int_equal(envp_build(&in, &envp, NULL, 0), 0);
    /* Later wins at the earlier position; names are case-sensitive; an
     * explicit HOME/PWD is replaced by the forced value, once. */
    const char *want[] = {"PATH=/b", "LANG=C", "X=2", "lang=fr"};
    assert_envp(envp, want, ARRAY_SIZE(want));
}

static void test_build_count_caps(void **state) {
    char why[ENVP_WHY_MAX];
    struct envp_var *ex = calloc(ENVP_MAX_VARS + 1, sizeof(*ex));
    char(*names)[16] = calloc(ENVP_MAX_VARS + 1, sizeof(*names));
    assert_non_null(ex);
    assert_non_null(names);
    for (size_t i = 0; i <= ENVP_MAX_VARS; i++) {
        snprintf(names[i], sizeof(names[i]), "V%zu", i);
        ex[i] = (struct envp_var){names[i], "x"};
    }
    struct envp_input in = base_input();
    in.explicit_vars = ex;

    /* Exactly the cap: fine, forced on top. */
    in.n_explicit = ENVP_MAX_VARS;
    char **envp = NULL;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), 0);
    size_t n = 0;
    while (envp[n])
        n++;
    assert_int_equal(n, ENVP_MAX_VARS + ENVP_FORCED_COUNT);
    envp_free(envp);

    /* One more request entry: refused before any work. */
    in.n_explicit = ENVP_MAX_VARS + 1;
    envp = SENTINEL;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), -E2BIG);
    assert_ptr_equal(envp, SENTINEL);
    assert_non_null(strstr(why, "too many"));

    /* Duplicates count once: 128 requests of one name and 1 inherited. */
    for (size_t i = 0; i < ENVP_MAX_VARS; i++)
        ex[i] = (struct envp_var){"SAME", names[i]};
    char *inh1[] = {"PATH=/bin", NULL};
    in.n_explicit = ENVP_MAX_VARS;
    in.inherited = inh1;
    envp = NULL;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), 0);
    assert_string_equal(envp[0], "PATH=/bin");
    assert_string_equal(envp[1], "SAME=V127");
    envp_free(envp);

    /* 128 inherited allowlisted + 1 distinct explicit: over the cap. */
    char **inh = calloc(ENVP_MAX_VARS + 1, sizeof(*inh));
    char(*lines)[24] = calloc(ENVP_MAX_VARS, sizeof(*lines));
    assert_non_null(inh);
    assert_non_null(lines);
    for (size_t i = 0; i < ENVP_MAX_VARS; i++) {
        snprintf(lines[i], sizeof(lines[i]), "LC_V%zu=x", i);
        inh[i] = lines[i];
    }
    in.inherited = inh;
    struct envp_var one[] = {{"EXTRA", "1"}};
    in.explicit_vars = one;
    in.n_explicit = 1;
    envp = SENTINEL;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), -E2BIG);
    assert_ptr_equal(envp, SENTINEL);
    assert_non_null(strstr(why, "'EXTRA'"));

    free(lines);
    free(inh);
    free(names);
    free(ex);
}

static void test_build_size_caps(void **state) {
    char why[ENVP_WHY_MAX];
    char **envp = SENTINEL;
    char *big = malloc(ENVP_VALUE_MAX + 16);
    assert_non_null(big);

    /* An allowlisted inherited value over the cap is an error naming it... */
    memcpy(big, "PATH=", 5);
    memset(big + 5, 'p', ENVP_VALUE_MAX + 1);
    big[5 + ENVP_VALUE_MAX + 1] = '\0';
    char *inh[] = {big, NULL};
    struct envp_input in = base_input();
    in.inherited = inh;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), -E2BIG);
    assert_ptr_equal(envp, SENTINEL);
    assert_non_null(strstr(why, "inherited"));
    assert_non_null(strstr(why, "'PATH'"));

    /* ...a non-allowlisted one is just dropped. */
    memcpy(big, "LS_COL", 6);
    big[6] = '=';
    envp = NULL;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), 0);
    assert_envp(envp, NULL, 0);
    envp_free(envp);

    /* Total size: 40 values of ENVP_VALUE_MAX bytes exceed ENVP_TOTAL_MAX. */
    memset(big, 'v', ENVP_VALUE_MAX);
    big[ENVP_VALUE_MAX] = '\0';
    struct envp_var ex[40];
    char names[40][8];
    for (size_t i = 0; i < 40; i++) {
        snprintf(names[i], sizeof(names[i]), "B%zu", i);
        ex[i] = (struct envp_var){names[i], big};
    }
    in = base_input();
    in.explicit_vars = ex;
    in.n_explicit = 40;
    envp = SENTINEL;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), -E2BIG);
    assert_ptr_equal(envp, SENTINEL);
    assert_non_null(strstr(why, "in total"));
    /* 30 of them fit (30 * 8196 < 256 KiB). */
    in.n_explicit = 30;
    envp = NULL;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), 0);
    assert_int_equal(strlen(envp[29]), 3 + 1 + ENVP_VALUE_MAX);
    envp_free(envp);
    free(big);
}

static void test_build_forced_paths(void **state) {
    char why[ENVP_WHY_MAX];
    char **envp = SENTINEL;
    struct envp_input in = base_input();

    in.home = NULL;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "HOME"));
    in = base_input();
    in.tmpdir = "tmp/relative";
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "TMPDIR"));
    assert_ptr_equal(envp, SENTINEL);
    assert_int_equal(envp_build(NULL, &envp, why, sizeof(why)), -EINVAL);
    in = base_input();
    assert_int_equal(envp_build(&in, NULL, why, sizeof(why)), -EINVAL);

    /* Nothing but the forced variables. */
    envp = NULL;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), 0);
    assert_envp(envp, NULL, 0);
    envp_free(envp);
    envp_free(NULL);
}

static void test_extra_block_patterns(void **state) {
    char why[ENVP_WHY_MAX];

    assert_int_equal(envp_check_block_pattern("AWS_*", why, sizeof(why)), 0);
    assert_int_equal(envp_check_block_pattern("GITHUB_TOKEN", why, sizeof(why)), 0);
    assert_int_equal(envp_check_block_pattern("*", why, sizeof(why)), 0);
    assert_int_equal(envp_check_block_pattern("", why, sizeof(why)), -EINVAL);
    assert_int_equal(envp_check_block_pattern("A-B*", why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "'A-B*'"));
    assert_int_equal(envp_check_block_pattern("*AWS", why, sizeof(why)), -EINVAL);
    assert_int_equal(envp_check_block_pattern("A**", why, sizeof(why)), -EINVAL);

    const char *pats[] = {"aws_*", "ANTHROPIC_BASE_URL"};
    char *inh[] = {"ANTHROPIC_BASE_URL=http://x", "ANTHROPIC_API_KEY=k", NULL};
    struct envp_var ex[] = {{"AWS_PROFILE", "dev"}};
    struct envp_input in = base_input();
    in.inherited = inh;
    in.extra_block = pats;
    in.n_extra_block = ARRAY_SIZE(pats);
    in.explicit_vars = ex;
    in.n_explicit = 1;
    char **envp = SENTINEL;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), -EPERM);
    assert_ptr_equal(envp, SENTINEL);
    assert_non_null(strstr(why, "'AWS_PROFILE'"));
    assert_non_null(strstr(why, "administrator"));
    assert_non_null(strstr(why, "'aws_*'"));

    /* Inherited matches are dropped silently. */
    in.n_explicit = 0;
    envp = NULL;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), 0);
    const char *want[] = {"ANTHROPIC_API_KEY=k"};
    assert_envp(envp, want, ARRAY_SIZE(want));
    envp_free(envp);

    /* "*" leaves only the forced variables; an invalid pattern fails. */
    const char *all[] = {"*"};
    in.extra_block = all;
    in.n_extra_block = 1;
    envp = NULL;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), 0);
    assert_envp(envp, NULL, 0);
    envp_free(envp);
    const char *bad[] = {"NOT VALID"};
    in.extra_block = bad;
    envp = SENTINEL;
    assert_int_equal(envp_build(&in, &envp, why, sizeof(why)), -EINVAL);
    assert_ptr_equal(envp, SENTINEL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inherit_allowlist),
        cmocka_unit_test(test_blocked_case_insensitive),
        cmocka_unit_test(test_bash_func),
        cmocka_unit_test(test_identity_substrings),
        cmocka_unit_test(test_explicit_refused_with_name),
        cmocka_unit_test(test_explicit_allowed),
        cmocka_unit_test(test_invalid_names),
        cmocka_unit_test(test_length_caps),
        cmocka_unit_test(test_build_filters_and_forces),
        cmocka_unit_test(test_build_explicit_tz_refused),
        cmocka_unit_test(test_build_names_first_refused),
        cmocka_unit_test(test_build_dedupe),
        cmocka_unit_test(test_build_count_caps),
        cmocka_unit_test(test_build_size_caps),
        cmocka_unit_test(test_build_forced_paths),
        cmocka_unit_test(test_extra_block_patterns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
