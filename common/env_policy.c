/* The environment policy for the sandboxed agent. Owns the three name tables
 * (allowlist, block list, forced names) and the envp array envp_build()
 * returns (one allocation). It never reads the process environment, logs, or
 * touches the file system: the CLI and the daemon pass every input, so both
 * sides compute the same answer.
 *
 * What this is and is not. The environment is not the network boundary
 * (nftables and the route preflight are) and not a privilege boundary: the
 * agent's environment is applied by execve() after the credential drop,
 * PR_SET_NO_NEW_PRIVS, Landlock and seccomp, which all survive exec, so no
 * variable here can widen what the agent may do, and no setuid program can
 * honour a loader variable with raised privileges. The policy exists for
 * three narrower promises:
 *
 *  1. Host and session identity stay out of the agent (host name, time zone,
 *     display, SSH/D-Bus/tmux sockets, hardware identifiers). The block list
 *     fails closed: a broad substring rule that also catches an innocent name
 *     ("MACHINE", "EMACS" contain MAC) costs a user one explicit rename; a
 *     narrow rule that misses an identifier leaks it silently.
 *  2. Nothing the user did not see on the command line makes the agent load
 *     or run other code: loader, libc, interpreter, shell and git variables
 *     that inject code or commands are refused even from --env. A client that
 *     insists can still write `lyh run -- env LD_PRELOAD=x cmd`; that is
 *     deliberate and visible in argv, which the session records. The block is
 *     about not doing it silently, not about stopping the user from running
 *     their own code as themselves.
 *  3. The host environment, full of credentials the agent never needs
 *     (cloud keys, tokens, agent sockets), is default-deny: only allowlisted
 *     names are inherited.
 *
 * Explicit --env names need not be allowlisted: they come from the user, for
 * this one run, not from whatever the host shell happened to export; refusing
 * them would only push secrets into argv. They are still checked against the
 * block list, so promises 1 and 2 hold for them too, and the daemon re-checks
 * them, so a modified client gains nothing.
 *
 * The block list is matched case-insensitively with ASCII folding (not the
 * locale's toupper): several consumers read variables in either case (npm
 * honours npm_config_* in any case, Python and curl read http_proxy and
 * HTTP_PROXY), and a lower-case spelling of a blocked name is never needed.
 * The allowlist is matched exactly: it names the real variables. */
#include "common/env_policy.h"
#include "common/why.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"

enum how { EXACT, PREFIX, SUBSTR };

struct name_rule {
    const char *text; /* upper case in the block list */
    enum how how;
    const char *why; /* block list: shown to the user */
};

/* ---- allowlist (inherited variables only; exact case) ---------------------- */

static const struct name_rule allow_rules[] = {
    /* Operational: what a terminal program needs to find programs, draw and
     * speak the user's language. None identifies the host beyond what the
     * agent learns anyway (USER/LOGNAME equal getpwuid(getuid()), which the
     * agent can call). HOME is replaced by the forced value. */
    {"HOME", EXACT, NULL},
    {"PATH", EXACT, NULL},
    {"TERM", EXACT, NULL},
    {"COLORTERM", EXACT, NULL},
    {"LANG", EXACT, NULL},
    {"LANGUAGE", EXACT, NULL},
    {"LC_", PREFIX, NULL},
    {"USER", EXACT, NULL},
    {"LOGNAME", EXACT, NULL},
    {"SHELL", EXACT, NULL},
    /* The user's chosen programs for a role: visible, deliberate choices,
     * unlike the implicit hooks on the block list (LESSOPEN, GIT_SSH_COMMAND). */
    {"EDITOR", EXACT, NULL},
    {"VISUAL", EXACT, NULL},
    {"PAGER", EXACT, NULL},
    {"NO_COLOR", EXACT, NULL},
    {"FORCE_COLOR", EXACT, NULL},
    {"TERM_PROGRAM", EXACT, NULL},
    {"COLUMNS", EXACT, NULL},
    {"LINES", EXACT, NULL},
    /* Agent credentials and configuration: the reason the agent runs at all.
     * Whole prefixes because the vendors add variables often. */
    {"ANTHROPIC_", PREFIX, NULL},
    {"CLAUDE_", PREFIX, NULL},
    {"CODEX_", PREFIX, NULL},
    {"OPENAI_", PREFIX, NULL},
    {"GEMINI_", PREFIX, NULL},
    /* Gemini CLI's Google variables, by name: a GOOGLE_ prefix would also
     * pass GOOGLE_APPLICATION_CREDENTIALS, a path to a broad cloud
     * credential; pass that one explicitly if the agent needs it. */
    {"GOOGLE_API_KEY", EXACT, NULL},
    {"GOOGLE_CLOUD_PROJECT", EXACT, NULL},
    {"GOOGLE_CLOUD_LOCATION", EXACT, NULL},
    {"GOOGLE_GENAI_USE_VERTEXAI", EXACT, NULL},
    /* Opt-outs that make agents send less; dropping them would silently
     * turn telemetry back on. */
    {"DO_NOT_TRACK", EXACT, NULL},
    {"DISABLE_TELEMETRY", EXACT, NULL},
    {"DISABLE_ERROR_REPORTING", EXACT, NULL},
    {"DISABLE_AUTOUPDATER", EXACT, NULL},
    /* Git identity and interaction, by name rather than GIT_*: a prefix
     * would inherit GIT_DIR/GIT_INDEX_FILE/GIT_WORK_TREE (set when lyh runs
     * from a git hook, pointing the agent at another repository) along with
     * the command hooks on the block list. */
    {"GIT_AUTHOR_NAME", EXACT, NULL},
    {"GIT_AUTHOR_EMAIL", EXACT, NULL},
    {"GIT_COMMITTER_NAME", EXACT, NULL},
    {"GIT_COMMITTER_EMAIL", EXACT, NULL},
    {"GIT_EDITOR", EXACT, NULL},
    {"GIT_PAGER", EXACT, NULL},
    {"GIT_TERMINAL_PROMPT", EXACT, NULL},
    /* Deliberately absent (pass them with --env when wanted):
     *  - http_proxy/https_proxy/all_proxy/no_proxy, either case: the session
     *    chain accepts loopback, so an inherited proxy on 127.0.0.1 (a common
     *    host set-up) would carry every request out of the host's own
     *    interface instead of the VPN. A proxy describes the host's path to
     *    the network, not the VPN's; the user must choose it for the run.
     *  - XDG_CONFIG_HOME/XDG_CACHE_HOME/XDG_DATA_HOME/XDG_STATE_HOME: they
     *    point outside the forced HOME and would defeat narrow-home mode;
     *    agents fall back to $HOME/.config and friends.
     *  - NPM_CONFIG_*: a whole configuration namespace, including
     *    script-shell and node-options (blocked outright below).
     *  - AWS_*, GITHUB_TOKEN, KUBECONFIG, ...: broad host credentials. */
};

/* ---- block list (case-insensitive; applies to inherited and explicit) ------ */

#define R_ID "host or session identity"
#define R_SOCK "points at a host session service"
#define R_TZ "host identity (time zone); the sandbox sets TZ=UTC"
#define R_HW "may carry a hardware or network identifier"
#define R_LOADER "dynamic loader or libc code injection"
#define R_GLIBC "on glibc's list of variables unsafe for privileged programs"
#define R_INTERP "interpreter start-up code injection"
#define R_SHELL "shell start-up code injection"
#define R_CMD "makes a tool run a command implicitly"
#define R_GIT "makes git load configuration or run commands"
#define R_RESERVED "reserved for the sandbox's own markers"

static const struct name_rule block_rules[] = {
    /* Host and session identity. */
    {"HOSTNAME", SUBSTR, R_ID},
    {"HOST", EXACT, R_ID}, /* zsh and csh export it */
    {"TZ", EXACT, R_TZ},
    {"TZDIR", EXACT, R_TZ},
    {"TIMEZONE", SUBSTR, R_TZ},
    {"DISPLAY", EXACT, R_SOCK},
    {"WAYLAND_DISPLAY", EXACT, R_SOCK},
    {"WAYLAND_SOCKET", EXACT, R_SOCK},
    {"XAUTHORITY", EXACT, R_SOCK},
    {"XAUTHLOCALHOSTNAME", EXACT, R_ID},
    {"DBUS_SESSION_BUS_ADDRESS", EXACT, R_SOCK},
    {"DBUS_SYSTEM_BUS_ADDRESS", EXACT, R_SOCK},
    {"XDG_RUNTIME_DIR", EXACT, R_SOCK},
    {"XDG_SESSION_", PREFIX, R_ID},
    {"XDG_SEAT", EXACT, R_ID},
    {"XDG_VTNR", EXACT, R_ID},
    {"SSH_", PREFIX, R_SOCK}, /* SSH_AUTH_SOCK, SSH_CONNECTION, SSH_ASKPASS... */
    {"GPG_AGENT_INFO", EXACT, R_SOCK},
    {"KRB5CCNAME", EXACT, R_SOCK},
    {"DOCKER_HOST", EXACT, R_SOCK},
    {"TMUX", EXACT, R_SOCK},
    {"TMUX_PANE", EXACT, R_ID},
    {"STY", EXACT, R_SOCK},
    {"KITTY_", PREFIX, R_SOCK}, /* KITTY_LISTEN_ON: remote control */
    {"VSCODE_IPC_HOOK", PREFIX, R_SOCK},
    {"WINDOWID", EXACT, R_ID},
    {"TERM_SESSION_ID", EXACT, R_ID},
    {"ITERM_SESSION_ID", EXACT, R_ID},
    {"SUDO_", PREFIX, R_ID},
    {"XPC_", PREFIX, R_ID}, /* macOS launchd service names */
    {"SECURITYSESSIONID", EXACT, R_ID},
    {"__CF_USER_TEXT_ENCODING", EXACT, R_ID},
    /* Broad on purpose (fails closed, see the top of the file). */
    {"MAC", SUBSTR, R_HW},
    {"SERIAL", SUBSTR, R_HW},
    {"WIFI", SUBSTR, R_HW},
    {"SSID", SUBSTR, R_HW}, /* and BSSID */
    {"LOCAL_IP", SUBSTR, R_HW},

    /* Loader and libc. */
    {"LD_", PREFIX, R_LOADER},
    {"DYLD_", PREFIX, R_LOADER},
    {"GLIBC_", PREFIX, R_LOADER}, /* GLIBC_TUNABLES: CVE-2023-4911 */
    {"MALLOC_", PREFIX, R_GLIBC}, /* MALLOC_TRACE writes a file */
    {"GCONV_PATH", EXACT, R_LOADER},
    {"GETCONF_DIR", EXACT, R_GLIBC},
    {"HOSTALIASES", EXACT, R_GLIBC},
    {"LOCALDOMAIN", EXACT, R_GLIBC},
    {"LOCPATH", EXACT, R_GLIBC},
    {"NIS_PATH", EXACT, R_GLIBC},
    {"NLSPATH", EXACT, R_GLIBC},
    {"RESOLV_HOST_CONF", EXACT, R_GLIBC},
    {"RES_OPTIONS", EXACT, R_GLIBC},
    {"OPENSSL_", PREFIX, R_LOADER}, /* OPENSSL_CONF/OPENSSL_MODULES load engines */

    /* Interpreters and runtimes. */
    {"PYTHON", PREFIX, R_INTERP}, /* PYTHONPATH, PYTHONSTARTUP, PYTHONHOME... */
    {"PERL", PREFIX, R_INTERP},   /* PERL5LIB, PERL5OPT, PERLLIB, PERLDB_OPTS */
    {"RUBY", PREFIX, R_INTERP},   /* RUBYOPT, RUBYLIB */
    {"LUA_", PREFIX, R_INTERP},   /* LUA_INIT runs code */
    {"NODE_OPTIONS", EXACT, R_INTERP},
    {"NODE_PATH", EXACT, R_INTERP},
    {"NPM_CONFIG_NODE_OPTIONS", EXACT, R_INTERP},
    {"NPM_CONFIG_SCRIPT_SHELL", EXACT, R_CMD},
    {"JAVA_TOOL_OPTIONS", EXACT, R_INTERP},
    {"_JAVA_OPTIONS", EXACT, R_INTERP},
    {"JDK_JAVA_OPTIONS", EXACT, R_INTERP},
    {"DOTNET_STARTUP_HOOKS", EXACT, R_INTERP},
    {"COR_", PREFIX, R_INTERP},     /* COR_PROFILER_PATH loads a library */
    {"CORECLR_", PREFIX, R_INTERP}, /* CORECLR_PROFILER_PATH likewise */

    /* Shells. BASH_FUNC_ covers exported functions in both encodings
     * ("BASH_FUNC_f%%" and the older "BASH_FUNC_f()"). */
    {"BASH_FUNC_", PREFIX, R_SHELL},
    {"BASH_ENV", EXACT, R_SHELL},
    {"ENV", EXACT, R_SHELL},
    {"SHELLOPTS", EXACT, R_SHELL},
    {"BASHOPTS", EXACT, R_SHELL},
    {"BASH_LOADABLES_PATH", EXACT, R_SHELL},
    {"PROMPT_COMMAND", EXACT, R_SHELL},
    {"PS0", EXACT, R_SHELL}, /* prompts expand $(...) */
    {"PS1", EXACT, R_SHELL},
    {"PS2", EXACT, R_SHELL},
    {"PS3", EXACT, R_SHELL},
    {"PS4", EXACT, R_SHELL},
    {"ZDOTDIR", EXACT, R_SHELL},
    {"FPATH", EXACT, R_SHELL},
    {"IFS", EXACT, R_SHELL},
    {"LESSOPEN", EXACT, R_CMD},
    {"LESSCLOSE", EXACT, R_CMD},

    /* Git: GIT_CONFIG_COUNT/KEY_n/VALUE_n and GIT_CONFIG_PARAMETERS set any
     * option (core.sshCommand, core.fsmonitor, core.hooksPath,
     * credential.helper: commands on an ordinary `git status`); the others
     * name programs git runs by itself or hooks it installs. */
    {"GIT_CONFIG", PREFIX, R_GIT},
    {"GIT_SSH", PREFIX, R_GIT}, /* GIT_SSH, GIT_SSH_COMMAND, GIT_SSH_VARIANT */
    {"GIT_EXEC_PATH", EXACT, R_GIT},
    {"GIT_ASKPASS", EXACT, R_GIT},
    {"GIT_PROXY_COMMAND", EXACT, R_GIT},
    {"GIT_EXTERNAL_DIFF", EXACT, R_GIT},
    {"GIT_TEMPLATE_DIR", EXACT, R_GIT},

    /* Ours: a program in the sandbox must be able to trust these. */
    {"LIANYAOHU_", PREFIX, R_RESERVED},
};

/* Set by envp_build() after everything else, in this order. */
static const char *const forced_names[ENVP_FORCED_COUNT] = {
    "HOME", "PWD", "TMPDIR", "TZ", "LIANYAOHU_SANDBOX",
};

/* ---- helpers --------------------------------------------------------------- */


/* A name as it may appear in a message: printable ASCII kept, everything
 * else as \xNN (so a hostile name cannot drive the user's terminal), cut at
 * SHOW_MAX_IN input bytes. */
#define SHOW_MAX_IN 64u
#define SHOW_BUF (SHOW_MAX_IN * 4u + 4u)
static const char *show(const char *s, size_t n, char buf[static SHOW_BUF]) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n && i < SHOW_MAX_IN; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            buf[o++] = (char)c;
        } else {
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 0xf];
        }
    }
    if (n > SHOW_MAX_IN) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

static char ascii_upper(char c) {
    return (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
}

/* a[0..n) equals b[0..n) ignoring ASCII case. */
static bool eq_ci(const char *a, const char *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ascii_upper(a[i]) != ascii_upper(b[i]))
            return false;
    return true;
}

static bool rule_matches(const struct name_rule *r, const char *name, size_t n, bool ci) {
    size_t k = strlen(r->text);
    switch (r->how) {
    case EXACT:
        return n == k && (ci ? eq_ci(name, r->text, k) : memcmp(name, r->text, k) == 0);
    case PREFIX:
        return n >= k && (ci ? eq_ci(name, r->text, k) : memcmp(name, r->text, k) == 0);
    case SUBSTR:
        for (size_t i = 0; i + k <= n; i++)
            if (ci ? eq_ci(name + i, r->text, k) : memcmp(name + i, r->text, k) == 0)
                return true;
        return false;
    }
    return false;
}

static const struct name_rule *find_block(const char *name, size_t n) {
    for (size_t i = 0; i < ARRAY_SIZE(block_rules); i++)
        if (rule_matches(&block_rules[i], name, n, true))
            return &block_rules[i];
    return NULL;
}

static bool allowlisted(const char *name, size_t n) {
    for (size_t i = 0; i < ARRAY_SIZE(allow_rules); i++)
        if (rule_matches(&allow_rules[i], name, n, false))
            return true;
    return false;
}

static bool forced_n(const char *name, size_t n) {
    for (size_t i = 0; i < ENVP_FORCED_COUNT; i++)
        if (strlen(forced_names[i]) == n && memcmp(forced_names[i], name, n) == 0)
            return true;
    return false;
}

static bool name_start(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool name_char(char c) {
    return name_start(c) || (c >= '0' && c <= '9');
}

/* [A-Za-z_][A-Za-z0-9_]*, n >= 1. */
static bool valid_name(const char *name, size_t n) {
    if (n == 0 || !name_start(name[0]))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!name_char(name[i]))
            return false;
    return true;
}

/* An administrator pattern matches: "*" everything, "P*" prefix P, else the
 * exact name, all ignoring ASCII case. */
static const char *find_extra(const struct envp_input *in, const char *name, size_t n) {
    for (size_t i = 0; i < in->n_extra_block; i++) {
        const char *p = in->extra_block[i];
        size_t k = strlen(p);
        if (k > 0 && p[k - 1] == '*') {
            if (n >= k - 1 && eq_ci(name, p, k - 1))
                return p;
        } else if (n == k && eq_ci(name, p, k)) {
            return p;
        }
    }
    return NULL;
}

/* ---- public checks --------------------------------------------------------- */

bool envp_blocked(const char *name) {
    if (!name)
        return true;
    return find_block(name, strlen(name)) != NULL;
}

bool envp_is_forced(const char *name) {
    return name && forced_n(name, strlen(name));
}

static bool inherit_ok_n(const char *name, size_t n) {
    return n <= ENVP_NAME_MAX && valid_name(name, n) && allowlisted(name, n) &&
           !find_block(name, n);
}

bool envp_inherit_ok(const char *name) {
    if (!name)
        return false;
    size_t n = strnlen(name, ENVP_NAME_MAX + 1);
    return inherit_ok_n(name, n);
}

/* name is NUL-terminated; n = strnlen(name, ENVP_NAME_MAX + 1). The blocked
 * test comes before the grammar so "BASH_FUNC_f%%" is reported as what it is
 * (an exported shell function), not as a stray '%'. */
static int check_explicit_n(const char *name, size_t n, const char *value, char *why,
                            size_t whylen) {
    char b[SHOW_BUF];
    const struct name_rule *r;

    if (n == 0) {
        set_why(why, whylen, "empty environment variable name");
        return -EINVAL;
    }
    if (n > ENVP_NAME_MAX) {
        set_why(why, whylen, "environment variable name '%s' is longer than %u bytes",
                show(name, n, b), ENVP_NAME_MAX);
        return -ENAMETOOLONG;
    }
    r = find_block(name, n);
    if (r) {
        if (r->how == SUBSTR) /* say why an innocent-looking name is caught */
            set_why(why, whylen, "environment variable '%s' is blocked: %s (every name containing "
                    "'%s' is)", show(name, n, b), r->why, r->text);
        else
            set_why(why, whylen, "environment variable '%s' is blocked: %s", show(name, n, b),
                    r->why);
        return -EPERM;
    }
    if (!valid_name(name, n)) {
        if (memchr(name, '=', n))
            set_why(why, whylen,
                    "environment variable name '%s' contains '='; pass NAME=VALUE split at "
                    "the first '='",
                    show(name, n, b));
        else
            set_why(why, whylen,
                    "'%s' is not a valid environment variable name (letters, digits and '_', "
                    "not starting with a digit)",
                    show(name, n, b));
        return -EINVAL;
    }
    if (strnlen(value, ENVP_VALUE_MAX + 1) > ENVP_VALUE_MAX) {
        set_why(why, whylen, "value of environment variable '%s' is longer than %u bytes",
                show(name, n, b), ENVP_VALUE_MAX);
        return -E2BIG;
    }
    return 0;
}

int envp_check_explicit(const char *name, const char *value, char *why, size_t whylen) {
    if (!name || !value) {
        set_why(why, whylen, "environment variable without a name or value");
        return -EINVAL;
    }
    return check_explicit_n(name, strnlen(name, ENVP_NAME_MAX + 1), value, why, whylen);
}

int envp_check_block_pattern(const char *pattern, char *why, size_t whylen) {
    char b[SHOW_BUF];

    if (!pattern || !*pattern) {
        set_why(why, whylen, "empty environment block pattern");
        return -EINVAL;
    }
    size_t n = strnlen(pattern, ENVP_NAME_MAX + 1);
    if (n > ENVP_NAME_MAX) {
        set_why(why, whylen, "environment block pattern '%s' is longer than %u bytes",
                show(pattern, n, b), ENVP_NAME_MAX);
        return -ENAMETOOLONG;
    }
    size_t stem = pattern[n - 1] == '*' ? n - 1 : n;
    if (stem == 0) /* "*" alone: block everything not forced */
        return 0;
    if (!valid_name(pattern, stem)) {
        set_why(why, whylen,
                "environment block pattern '%s' must be a variable name, optionally ending "
                "in '*'",
                show(pattern, n, b));
        return -EINVAL;
    }
    return 0;
}

/* ---- envp_build ------------------------------------------------------------ */

/* References into the caller's strings; nothing here is owned. */
struct slot {
    const char *name;
    size_t nlen;
    const char *value;
    size_t vlen;
};

struct table {
    struct slot s[ENVP_MAX_VARS + ENVP_FORCED_COUNT];
    size_t n;
};

/* Insert or replace by exact name; replacing keeps the first position so the
 * output order is stable. The cap counts distinct names. */
static int table_put(struct table *t, const char *name, size_t nlen, const char *value,
                     size_t vlen, size_t cap, char *why, size_t whylen) {
    char b[SHOW_BUF];

    for (size_t i = 0; i < t->n; i++)
        if (t->s[i].nlen == nlen && memcmp(t->s[i].name, name, nlen) == 0) {
            t->s[i].value = value;
            t->s[i].vlen = vlen;
            return 0;
        }
    if (t->n >= cap) {
        set_why(why, whylen, "too many environment variables (limit %u) at '%s'", ENVP_MAX_VARS,
                show(name, nlen, b));
        return -E2BIG;
    }
    t->s[t->n++] = (struct slot){name, nlen, value, vlen};
    return 0;
}

static int check_forced_path(const char *what, const char *v, char *why, size_t whylen) {
    if (!v || v[0] != '/') {
        set_why(why, whylen, "sandbox %s must be an absolute path", what);
        return -EINVAL;
    }
    if (strnlen(v, ENVP_VALUE_MAX + 1) > ENVP_VALUE_MAX) {
        set_why(why, whylen, "sandbox %s is longer than %u bytes", what, ENVP_VALUE_MAX);
        return -E2BIG;
    }
    return 0;
}

static int add_inherited(struct table *t, const struct envp_input *in, char *why,
                         size_t whylen) {
    char b[SHOW_BUF];

    for (char *const *e = in->inherited; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e)
            continue;
        size_t nlen = (size_t)(eq - *e);
        /* Forced names are dropped here and set last. */
        if (!inherit_ok_n(*e, nlen) || forced_n(*e, nlen) || find_extra(in, *e, nlen))
            continue;
        size_t vlen = strnlen(eq + 1, ENVP_VALUE_MAX + 1);
        if (vlen > ENVP_VALUE_MAX) {
            /* Refused rather than dropped: a silently missing PATH would be
             * a confusing failure inside the agent. */
            set_why(why, whylen, "inherited environment variable '%s' is longer than %u bytes",
                    show(*e, nlen, b), ENVP_VALUE_MAX);
            return -E2BIG;
        }
        int r = table_put(t, *e, nlen, eq + 1, vlen, ENVP_MAX_VARS, why, whylen);
        if (r < 0)
            return r;
    }
    return 0;
}

static int add_explicit(struct table *t, const struct envp_input *in, char *why,
                        size_t whylen) {
    char b[SHOW_BUF], bp[SHOW_BUF];

    for (size_t i = 0; i < in->n_explicit; i++) {
        const struct envp_var *v = &in->explicit_vars[i];
        if (!v->name || !v->value) {
            set_why(why, whylen, "environment variable #%zu without a name or value", i + 1);
            return -EINVAL;
        }
        size_t nlen = strnlen(v->name, ENVP_NAME_MAX + 1);
        int r = check_explicit_n(v->name, nlen, v->value, why, whylen);
        if (r < 0)
            return r;
        const char *p = find_extra(in, v->name, nlen);
        if (p) {
            set_why(why, whylen,
                    "environment variable '%s' is blocked by the administrator's policy "
                    "(pattern '%s')",
                    show(v->name, nlen, b), show(p, strlen(p), bp));
            return -EPERM;
        }
        /* Accepted but replaced: HOME, PWD and TMPDIR are the sandbox's
         * (envp_is_forced lets the CLI warn); TZ and LIANYAOHU_* never get
         * here, they are blocked. */
        if (forced_n(v->name, nlen))
            continue;
        r = table_put(t, v->name, nlen, v->value, strlen(v->value), ENVP_MAX_VARS, why,
                      whylen);
        if (r < 0)
            return r;
    }
    return 0;
}

int envp_build(const struct envp_input *in, char ***ret_envp, char *why, size_t whylen) {
    _cleanup_free_ struct table *t = NULL;
    int r;

    if (!in || !ret_envp || (in->n_explicit && !in->explicit_vars) ||
        (in->n_extra_block && !in->extra_block)) {
        set_why(why, whylen, "invalid environment request");
        return -EINVAL;
    }
    if (in->n_explicit > ENVP_MAX_VARS) {
        set_why(why, whylen, "too many environment variables: %zu (limit %u)", in->n_explicit,
                ENVP_MAX_VARS);
        return -E2BIG;
    }
    r = check_forced_path("HOME", in->home, why, whylen);
    if (r < 0)
        return r;
    r = check_forced_path("PWD", in->pwd, why, whylen);
    if (r < 0)
        return r;
    r = check_forced_path("TMPDIR", in->tmpdir, why, whylen);
    if (r < 0)
        return r;
    for (size_t i = 0; i < in->n_extra_block; i++) {
        r = envp_check_block_pattern(in->extra_block[i], why, whylen);
        if (r < 0)
            return r;
    }

    t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    r = add_inherited(t, in, why, whylen);
    if (r < 0)
        return r;
    r = add_explicit(t, in, why, whylen);
    if (r < 0)
        return r;

    /* Forced last. No earlier slot has these names (both loops skip them),
     * so appending cannot create a duplicate; the table has room for them
     * beyond ENVP_MAX_VARS. */
    const char *forced_values[ENVP_FORCED_COUNT] = {in->home, in->pwd, in->tmpdir, "UTC", "1"};
    for (size_t i = 0; i < ENVP_FORCED_COUNT; i++) {
        r = table_put(t, forced_names[i], strlen(forced_names[i]), forced_values[i],
                      strlen(forced_values[i]), ARRAY_SIZE(t->s), why, whylen);
        if (r < 0)
            return r;
    }

    /* Every length is capped above, so this sum cannot overflow. */
    size_t strings = 0;
    for (size_t i = 0; i < t->n; i++)
        strings += t->s[i].nlen + 1 + t->s[i].vlen + 1;
    if (strings > ENVP_TOTAL_MAX) {
        set_why(why, whylen, "environment is larger than %u bytes in total", ENVP_TOTAL_MAX);
        return -E2BIG;
    }

    /* One block: the pointer array, then the strings it points into. */
    size_t ptrs = (t->n + 1) * sizeof(char *);
    char **envp = malloc(ptrs + strings);
    if (!envp)
        return -ENOMEM;
    char *p = (char *)envp + ptrs;
    for (size_t i = 0; i < t->n; i++) {
        envp[i] = p;
        memcpy(p, t->s[i].name, t->s[i].nlen);
        p += t->s[i].nlen;
        *p++ = '=';
        memcpy(p, t->s[i].value, t->s[i].vlen);
        p += t->s[i].vlen;
        *p++ = '\0';
    }
    envp[t->n] = NULL;
    *ret_envp = envp;
    return 0;
}

void envp_free(char **envp) {
    free(envp);
}
