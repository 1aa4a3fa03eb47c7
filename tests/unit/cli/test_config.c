/* cli/config.c: the merge and its provenance (golden files), the trust file
 * (approve, stale, revoke, the question), widenings of untrusted project
 * files stripped and named, every schema error with file:line:column and key,
 * dedup, the project walk and its stop at $HOME, and whose home it is
 * (cfg_pick_home, with an injected stat and with the real one). Everything runs in a temp
 * dir with an injected HOME, XDG_CONFIG_HOME and cwd; no daemon, no network.
 * LYH_UPDATE_GOLDEN=1 rewrites the golden files. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/config.h"
#include "cli/toml.h"
#include "common/macros.h"

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must be defined"
#endif

struct env {
    char root[64];
    char home[128], xdg[128], proj[160], sub[192], trust[192], global[192];
    struct cfg_ctx ctx;
    char *notes;
    size_t notes_len;
    FILE *note;
    int asked;
    bool answer;
    char question[1024]; /* the last one asked */
};

static bool ask_cb(void *data, const char *q) {
    struct env *e = data;
    e->asked++;
    snprintf(e->question, sizeof(e->question), "%s", q);
    return e->answer;
}

static void write_file(const char *path, const char *text, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int setup(void **state) {
    struct env *e = calloc(1, sizeof(*e));
    snprintf(e->root, sizeof(e->root), "/tmp/lyh-cfg-XXXXXX");
    assert_non_null(mkdtemp(e->root));
    snprintf(e->home, sizeof(e->home), "%s/home", e->root);
    snprintf(e->xdg, sizeof(e->xdg), "%s/xdg", e->root);
    snprintf(e->proj, sizeof(e->proj), "%s/proj", e->home);
    snprintf(e->sub, sizeof(e->sub), "%s/src/deep", e->proj);
    snprintf(e->trust, sizeof(e->trust), "%s/lianyaohu/trusted.toml", e->xdg);
    snprintf(e->global, sizeof(e->global), "%s/lianyaohu/config.toml", e->xdg);
    char p[256];
    assert_int_equal(mkdir(e->home, 0700), 0);
    assert_int_equal(mkdir(e->xdg, 0700), 0);
    snprintf(p, sizeof(p), "%s/lianyaohu", e->xdg);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(mkdir(e->proj, 0700), 0);
    snprintf(p, sizeof(p), "%s/src", e->proj);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(mkdir(e->sub, 0700), 0);
    e->note = open_memstream(&e->notes, &e->notes_len);
    e->ctx = (struct cfg_ctx){.home = e->home, .xdg_config_home = e->xdg, .cwd = e->sub,
                              .note = e->note};
    *state = e;
    return 0;
}

static int teardown(void **state) {
    struct env *e = *state;
    char cmd[128];
    fclose(e->note);
    free(e->notes);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->root);
    assert_int_equal(system(cmd), 0);
    free(e);
    return 0;
}

static const char *notes(struct env *e) {
    fflush(e->note);
    return e->notes ? e->notes : "";
}

static void proj_file(struct env *e, const char *text) {
    char p[256];
    snprintf(p, sizeof(p), "%s/.lianyaohu.toml", e->proj);
    write_file(p, text, 0644);
}

static struct cfg *load_ok(struct env *e, const struct cfg_cli *cli) {
    struct cfg *c = NULL;
    struct cfg_error err = {{0}};
    int r = cfg_load(&e->ctx, cli, &c, &err);
    if (r != 0)
        print_error("cfg_load: %d: %s\n", r, err.msg);
    assert_int_equal(r, 0);
    return c;
}

/* The show output with the temp root replaced by @ROOT@. */
static char *show(const struct cfg *c, bool origin, const char *root) {
    char *buf = NULL, *out;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cfg_show(f, c, origin);
    fclose(f);
    out = calloc(1, len + 1);
    size_t rl = strlen(root), o = 0;
    for (size_t i = 0; i < len;) {
        if (strncmp(buf + i, root, rl) == 0) {
            memcpy(out + o, "@ROOT@", 6);
            o += 6;
            i += rl;
        } else {
            out[o++] = buf[i++];
        }
    }
    out[o] = '\0';
    /* The printed form must parse again. */
    struct toml_doc *doc = NULL;
    struct toml_error te = {0};
    if (toml_parse(buf, len, CFG_MAX_FILE, &doc, &te) != 0)
        print_error("show output does not parse: %u:%u: %s\n%s", te.line, te.column, te.msg, buf);
    assert_non_null(doc);
    toml_free(doc);
    free(buf);
    return out;
}

static void golden(const char *name, const char *got) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", GOLDEN_DIR, name);
    if (getenv("LYH_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs(got, f);
        fclose(f);
    }
    _cleanup_free_ char *want = slurp(path);
    assert_non_null(want);
    if (strcmp(want, got) != 0)
        print_error("golden %s differs; got:\n%s", name, got);
    assert_string_equal(want, got);
}

static const char global_text[] = "# global\n"
                                  "[defaults]\n"
                                  "vpn_interface = \"wg0\"\n"
                                  "shared_user_firewall = true\n"
                                  "command = [\"claude\", \"--resume\"]\n"
                                  "\n"
                                  "[env]\n"
                                  "EDITOR = \"vim\"\n"
                                  "LANG = \"C.UTF-8\"\n"
                                  "\n"
                                  "[network]\n"
                                  "deny = [\"10.0.0.0/8\", \"192.0.2.7\"]\n"
                                  "allow = [\"192.0.2.1:443\"]\n"
                                  "\n"
                                  "[paths]\n"
                                  "read_only = [\"/opt/sdk\"]\n"
                                  "agent_state_dirs = [\".claude\"]\n";

static const char proj_text[] = "[network]\n"
                                "default = \"deny\"\n"
                                "allow = [\"198.51.100.0/24\", \"192.0.2.1:443\"]\n"
                                "deny = [\"10.0.0.0/8\", \"[fd00::/8]:80-90\"]\n"
                                "lan_allow = [\"192.168.1.0/24\"]\n"
                                "host_ports = [\"5432\", \"8000-8099\"]\n"
                                "[paths]\n"
                                "writable = [\"build\", \"~/cache\"]\n"
                                "read_only = [\"/opt/sdk/\"]\n"
                                "narrow_home = true\n"
                                "agent_state_dirs = [\".cargo\"]\n"
                                "protect = [\"~/.npmrc\"]\n"
                                "[env]\n"
                                "LANG = \"en_US.UTF-8\"\n"
                                "TOKEN = \"x\"\n";

static void approve(struct env *e) {
    char p[256], hex[CFG_SHA256_HEX];
    struct cfg_error err = {{0}};
    snprintf(p, sizeof(p), "%s/.lianyaohu.toml", e->proj);
    assert_int_equal(cfg_hash_file(p, hex, &err), 0);
    assert_int_equal(cfg_trust_set(e->trust, e->proj, hex, &err), 0);
}

/* Global + trusted project + flags: every kind of origin. */
static void test_golden_merge_origin(void **state) {
    struct env *e = *state;
    static const char *const allow[] = {"203.0.113.5", "192.0.2.1:443"};
    static const char *const deny[] = {"10.0.0.0/8"};
    static const char *const envv[] = {"LANG=fr_FR.UTF-8", "DEBUG=1"};
    static const char *const cmd[] = {"bash", "-l"};
    static const char *const wr[] = {"/tmp/out"};
    struct cfg_cli cli = CFG_CLI_INIT;

    write_file(e->global, global_text, 0600);
    proj_file(e, proj_text);
    approve(e);
    cli.vpn = "tun3";
    cli.narrow_home = 1;
    cli.default_deny = true;
    cli.allow = (struct cfg_strv){allow, 2};
    cli.deny = (struct cfg_strv){deny, 1};
    cli.env = (struct cfg_strv){envv, 2};
    cli.command = (struct cfg_strv){cmd, 2};
    cli.writable = (struct cfg_strv){wr, 1};
    _cleanup_(cfg_freep) struct cfg *c = load_ok(e, &cli);
    assert_int_equal(c->trust, CFG_TRUST_APPROVED);
    _cleanup_free_ char *o = show(c, true, e->root);
    golden("config_show_origin.toml", o);
    _cleanup_free_ char *p = show(c, false, e->root);
    golden("config_show_plain.toml", p);
    assert_string_equal(notes(e), "");
}

/* Global + untrusted project, no flags: widenings ignored and listed. */
static void test_golden_untrusted(void **state) {
    struct env *e = *state;
    struct cfg_cli cli = CFG_CLI_INIT;

    write_file(e->global, global_text, 0600);
    proj_file(e, proj_text);
    _cleanup_(cfg_freep) struct cfg *c = load_ok(e, &cli);
    assert_int_equal(c->trust, CFG_TRUST_UNTRUSTED);
    _cleanup_free_ char *o = show(c, true, e->root);
    golden("config_show_untrusted.toml", o);
}

static void test_widening_stripped(void **state) {
    struct env *e = *state;
    struct cfg_cli cli = CFG_CLI_INIT;
    char want[1024];

    proj_file(e, proj_text);
    _cleanup_(cfg_freep) struct cfg *c = load_ok(e, &cli);
    assert_int_equal(c->trust, CFG_TRUST_UNTRUSTED);
    snprintf(want, sizeof(want),
             "lyh: %s/.lianyaohu.toml is not trusted (no approval); ignored: network.allow, "
             "network.lan_allow, network.host_ports, paths.writable, paths.read_only, paths.agent_state_dirs, "
             "env.LANG, env.TOKEN\n"
             "lyh: approve it with `lyh config trust %s` (or --trust-project)\n",
             e->proj, e->proj);
    assert_string_equal(notes(e), want);
    /* The tightenings applied. */
    assert_string_equal(c->network_default.value, "deny");
    assert_int_equal(c->deny.n, 2);
    assert_string_equal(c->deny.v[1].value, "[fd00::/8]:80-90");
    assert_true(c->narrow_home.value);
    assert_int_equal(c->protect.n, 1); /* a narrowing: applies untrusted, canonical */
    assert_string_equal(c->protect.v[0].value, ".npmrc");
    /* The widenings did not. */
    assert_int_equal(c->allow.n, 0);
    assert_int_equal(c->lan_allow.n, 0);
    assert_int_equal(c->host_ports.n, 0);
    assert_int_equal(c->writable.n, 0);
    assert_int_equal(c->read_only.n, 0);
    assert_int_equal(c->agent_state_dirs.n, 0);
    assert_int_equal(c->env.n, 0);
    assert_int_equal(c->ignored.n, 8);
}

static void test_widening_values(void **state) {
    struct env *e = *state;
    struct cfg_cli cli = CFG_CLI_INIT;

    /* default = "allow" and narrow_home = false widen; the global's deny
     * default and narrow home stay. */
    write_file(e->global, "[network]\ndefault = \"deny\"\n[paths]\nnarrow_home = true\n", 0600);
    proj_file(e, "[network]\ndefault = \"allow\"\n[paths]\nnarrow_home = false\n");
    _cleanup_(cfg_freep) struct cfg *c = load_ok(e, &cli);
    assert_string_equal(c->network_default.value, "deny");
    assert_true(c->narrow_home.value);
    assert_int_equal(c->ignored.n, 2);
    assert_string_equal(c->ignored.v[0].value, "network.default");
    assert_string_equal(c->ignored.v[1].value, "paths.narrow_home");
    assert_non_null(strstr(notes(e), "ignored: network.default, paths.narrow_home\n"));
}

static void test_trust_approve_stale_revoke(void **state) {
    struct env *e = *state;
    struct cfg_cli cli = CFG_CLI_INIT;
    struct cfg_error err = {{0}};
    struct stat st;
    char p[256];

    proj_file(e, "[network]\nallow = [\"192.0.2.1\"]\n");
    approve(e);
    assert_int_equal(stat(e->trust, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    {
        _cleanup_(cfg_freep) struct cfg *c = load_ok(e, &cli);
        assert_int_equal(c->trust, CFG_TRUST_APPROVED);
        assert_int_equal(c->allow.n, 1);
        assert_string_equal(c->network_default.value, "deny"); /* implied by allow */
        assert_string_equal(c->network_default.origin, "built-in (implied by network.allow)");
        assert_string_equal(notes(e), "");
    }
    /* Any edit, even a comment, makes the approval stale. */
    snprintf(p, sizeof(p), "%s/.lianyaohu.toml", e->proj);
    write_file(p, "[network]\nallow = [\"192.0.2.1\"]\n# edited\n", 0644);
    {
        _cleanup_(cfg_freep) struct cfg *c = load_ok(e, &cli);
        assert_int_equal(c->trust, CFG_TRUST_STALE);
        assert_int_equal(c->allow.n, 0);
        assert_non_null(strstr(notes(e), "is not trusted (approval is stale); ignored: network.allow\n"));
    }
    /* Revoke: the approval is gone; revoking again is -ENOENT. */
    approve(e);
    assert_int_equal(cfg_trust_set(e->trust, e->proj, NULL, &err), 0);
    _cleanup_free_ char *h = NULL;
    assert_int_equal(cfg_trust_get(e->trust, e->proj, &h, &err), -ENOENT);
    assert_int_equal(cfg_trust_set(e->trust, e->proj, NULL, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "no approval for"));
    {
        _cleanup_(cfg_freep) struct cfg *c = load_ok(e, &cli);
        assert_int_equal(c->trust, CFG_TRUST_UNTRUSTED);
    }
    /* Other approvals survive a revoke. */
    assert_int_equal(cfg_trust_set(e->trust, "/elsewhere", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", &err), 0);
    approve(e);
    assert_int_equal(cfg_trust_set(e->trust, e->proj, NULL, &err), 0);
    assert_int_equal(cfg_trust_get(e->trust, "/elsewhere", &h, &err), 0);
    assert_int_equal(strlen(h), 64);
}

static void test_trust_ask(void **state) {
    struct env *e = *state;
    struct cfg_cli cli = CFG_CLI_INIT;

    e->ctx.ask = ask_cb;
    e->ctx.ask_data = e;
    /* Only tightenings: nothing to ask. */
    proj_file(e, "[network]\ndeny = [\"192.0.2.1\"]\n");
    {
        _cleanup_(cfg_freep) struct cfg *c = load_ok(e, &cli);
        assert_int_equal(e->asked, 0);
        assert_int_equal(c->deny.n, 1);
    }
    /* N: widenings ignored, nothing written. */
    proj_file(e, "[network]\nallow = [\"192.0.2.1\"]\n");
    {
        _cleanup_(cfg_freep) struct cfg *c = load_ok(e, &cli);
        assert_int_equal(e->asked, 1);
        /* the question names what the file would widen */
        assert_non_null(strstr(e->question, "widens the sandbox (network.allow); trust"));
        assert_int_equal(c->allow.n, 0);
        assert_int_equal(access(e->trust, F_OK), -1);
    }
    /* y: approved and written; the next load asks nothing. */
    e->answer = true;
    {
        _cleanup_(cfg_freep) struct cfg *c = load_ok(e, &cli);
        assert_int_equal(e->asked, 2);
        assert_int_equal(c->trust, CFG_TRUST_APPROVED);
        assert_int_equal(c->allow.n, 1);
    }
    {
        _cleanup_(cfg_freep) struct cfg *c = load_ok(e, &cli);
        assert_int_equal(e->asked, 2);
        assert_int_equal(c->allow.n, 1);
    }
    /* many long [env] names cannot push a key out of the question */
    e->answer = false;
    {
        char text[2048] = "[paths]\nallow_sockets = [\"/run/x.sock\"]\n[env]\n";
        for (int i = 0; i < 8; i++) {
            size_t used = strlen(text);
            snprintf(text + used, sizeof(text) - used, "V%d%0120d = \"x\"\n", i, 0);
        }
        proj_file(e, text);
        _cleanup_(cfg_freep) struct cfg *c = load_ok(e, &cli);
        assert_int_equal(e->asked, 3);
        assert_non_null(strstr(e->question, "(paths.allow_sockets, env (8 variables))"));
        assert_int_equal(c->env.n, 0); /* answered no: none applied */
    }
}

static void test_trust_project_flag(void **state) {
    struct env *e = *state;
    struct cfg_cli cli = CFG_CLI_INIT;

    proj_file(e, "[env]\nTOKEN = \"x\"\n");
    cli.trust_project = true;
    _cleanup_(cfg_freep) struct cfg *c = load_ok(e, &cli);
    assert_int_equal(c->trust, CFG_TRUST_ONCE);
    assert_int_equal(c->env.n, 1);
    assert_string_equal(c->env.v[0].value, "TOKEN=x");
    assert_int_equal(access(e->trust, F_OK), -1); /* nothing recorded */
}

/* Each case: file text, whether it is the project file, the message after
 * "PATH:". */
static void schema_error(struct env *e, bool project, const char *text, const char *want) {
    struct cfg_cli cli = CFG_CLI_INIT;
    struct cfg *c = (struct cfg *)0x1;
    struct cfg_error err = {{0}};
    char p[256], full[1024];

    if (project) {
        proj_file(e, text);
        snprintf(p, sizeof(p), "%s/.lianyaohu.toml", e->proj);
        unlink(e->global);
    } else {
        write_file(e->global, text, 0600);
        snprintf(p, sizeof(p), "%s", e->global);
        snprintf(full, sizeof(full), "%s/.lianyaohu.toml", e->proj);
        unlink(full);
    }
    int r = cfg_load(&e->ctx, &cli, &c, &err);
    assert_int_equal(r, strstr(want, "expected ']'") ? -EBADMSG : -EINVAL);
    assert_ptr_equal(c, (struct cfg *)0x1);
    snprintf(full, sizeof(full), "%s:%s", p, want);
    if (strcmp(err.msg, full) != 0)
        print_error("got:  %s\nwant: %s\n", err.msg, full);
    assert_string_equal(err.msg, full);
}

static void test_schema_errors(void **state) {
    struct env *e = *state;

    schema_error(e, false, "[network]\nalow = []\n", "2:1: network.alow: unknown key");
    schema_error(e, false, "\n[nework]\n",
                 "2:2: nework: unknown key (sections: defaults, env, network, paths)");
    schema_error(e, false, "x = 1\n",
                 "1:1: x: unknown key (sections: defaults, env, network, paths)");
    schema_error(e, false, "network = 3\n", "1:11: network: expected a table, got integer");
    schema_error(e, false, "[defaults]\nfirewall = \"yes\"\n",
                 "2:12: defaults.firewall: expected a bool, got string");
    schema_error(e, false, "[defaults]\nvpn_interface = 7\n",
                 "2:17: defaults.vpn_interface: expected a string, got integer");
    schema_error(e, false, "[defaults]\ncommand = \"claude\"\n",
                 "2:11: defaults.command: expected an array of strings, got string");
    schema_error(e, false, "[paths]\nwritable = [\"/a\", 3]\n",
                 "2:19: paths.writable[1]: expected a string, got integer");
    schema_error(e, false, "[network]\ndefault = \"maybe\"\n",
                 "2:11: network.default: expected \"allow\" or \"deny\", got \"maybe\"");
    schema_error(e, false, "[env]\nFOO = 1\n", "2:7: env.FOO: expected a string, got integer");
    schema_error(e, false, "[env]\n\"A-B\" = \"x\"\n",
                 "2:1: env.A-B: not a variable name (letters, digits, '_')");
    schema_error(e, false, "[network]\nallow = [\"10.0.0.1\", \"example.com\"]\n",
                 "2:22: network.allow[1]: 'example.com' is not an IP address; rules take addresses, not "
                 "names");
    schema_error(e, false, "[network]\nlan_allow = [\"8.8.8.8\"]\n",
                 "2:14: network.lan_allow[0]: '8.8.8.8' is not inside a LAN or reserved range");
    schema_error(e, false, "[network]\nhost_ports = [\"5432\", \"0\"]\n",
                 "2:23: network.host_ports[1]: '0': a port is a number from 1 to 65535, or a "
                 "range such as 8000-8099");
    schema_error(e, false, "[network]\nhost_ports = [\"90-80\"]\n",
                 "2:15: network.host_ports[0]: '90-80': the range runs backwards (90-80)");
    schema_error(e, false, "[paths]\nprotect = [\".config/../x\"]\n",
                 "2:12: paths.protect[0]: '.config/../x' empty, \".\", \"..\" and \"~\" components are "
                 "not allowed");
    schema_error(e, false, "[paths]\nprotect = [\"/etc\"]\n",
                 "2:12: paths.protect[0]: '/etc' must be relative to your home (\"~/NAME\" or "
                 "\"NAME\")");
    schema_error(e, false, "[paths]\nagent_state_dirs = [\"a/b\"]\n",
                 "2:21: paths.agent_state_dirs[0]: 'a/b' must be one name under your home (no "
                 "'/', under 64 bytes)");
    /* [defaults] only in the global file; errors in an untrusted project
     * file are errors all the same. */
    schema_error(e, true, "[network]\ndeny = []\n\n[defaults]\nfirewall = false\n",
                 "4:1: defaults: the [defaults] section is only allowed in the global config "
                 "file");
    schema_error(e, true, "[network]\nallow = [\"10.0.0.0/33\"]\n",
                 "2:10: network.allow[0]: '10.0.0.0/33': prefix length /33 is out of range for "
                 "IPv4 (0-32)");
    schema_error(e, true, "[paths]\nwritable = [\"\"]\n", "2:13: paths.writable[0]: empty path");
    /* TOML syntax errors carry the parser's position. */
    schema_error(e, false, "[network\n", "1:9: expected ']' to close the table header, found newline");
}

static void test_too_large(void **state) {
    struct env *e = *state;
    struct cfg_cli cli = CFG_CLI_INIT;
    struct cfg *c = NULL;
    struct cfg_error err = {{0}};
    char *big = malloc(CFG_MAX_FILE + 2);
    char want[512];

    memset(big, '#', CFG_MAX_FILE + 1);
    big[CFG_MAX_FILE + 1] = '\0';
    write_file(e->global, big, 0600);
    free(big);
    assert_int_equal(cfg_load(&e->ctx, &cli, &c, &err), -EFBIG);
    snprintf(want, sizeof(want), "%s:1:1: file is larger than 256 KiB (262145 bytes); refused",
             e->global);
    assert_string_equal(err.msg, want);
}

static void test_dedup(void **state) {
    struct env *e = *state;
    static const char *const allow[] = {"192.0.2.1/32", "192.0.2.2"};
    static const char *const envv[] = {"A=cli"};
    static const char *const ro[] = {"/opt/sdk"};
    struct cfg_cli cli = CFG_CLI_INIT;

    write_file(e->global,
               "[network]\nallow = [\"192.0.2.1\", \"192.0.2.1/32\", \"[::1]\", \"::1/128\"]\n"
               "[paths]\nread_only = [\"/opt/sdk\", \"/opt/sdk/\", \"~/x\"]\n"
               "agent_state_dirs = [\".a\", \".a\"]\n[env]\nA = \"global\"\nB = \"global\"\n",
               0600);
    proj_file(e, "[network]\nallow = [\"192.0.2.1\"]\n[paths]\nread_only = [\"../x\"]\n"
                 "[env]\nB = \"project\"\n");
    approve(e);
    cli.allow = (struct cfg_strv){allow, 2};
    cli.env = (struct cfg_strv){envv, 1};
    cli.read_only = (struct cfg_strv){ro, 1};
    _cleanup_(cfg_freep) struct cfg *c = load_ok(e, &cli);
    assert_int_equal(c->allow.n, 3);
    assert_string_equal(c->allow.v[0].value, "192.0.2.1");
    assert_string_equal(c->allow.v[1].value, "::1");
    assert_string_equal(c->allow.v[2].value, "192.0.2.2");
    assert_string_equal(c->allow.v[2].origin, "command line");
    /* "~/x" (global) and "../x" from the project dir ($HOME/proj) are one path. */
    assert_int_equal(c->read_only.n, 2);
    assert_string_equal(c->read_only.v[0].value, "/opt/sdk");
    char hx[256];
    snprintf(hx, sizeof(hx), "%s/x", e->home);
    assert_string_equal(c->read_only.v[1].value, hx);
    assert_string_equal(c->read_only.v[1].origin + strlen(e->global), ":4");
    assert_int_equal(c->agent_state_dirs.n, 1);
    /* env: the highest layer wins per NAME, order of first appearance kept. */
    assert_int_equal(c->env.n, 2);
    assert_string_equal(c->env.v[0].value, "A=cli");
    assert_string_equal(c->env.v[0].origin, "command line");
    assert_string_equal(c->env.v[1].value, "B=project");
}

static void test_project_walk(void **state) {
    struct env *e = *state;
    _cleanup_free_ char *p = NULL;
    char above[256], inhome[256], want[256];

    /* A file above $HOME is never picked up. */
    snprintf(above, sizeof(above), "%s/.lianyaohu.toml", e->root);
    write_file(above, "[network]\ndeny = [\"192.0.2.1\"]\n", 0644);
    assert_int_equal(cfg_find_project(&e->ctx, &p), -ENOENT);
    e->ctx.cwd = e->home;
    assert_int_equal(cfg_find_project(&e->ctx, &p), -ENOENT);
    /* One in $HOME is; the nearest wins. */
    snprintf(inhome, sizeof(inhome), "%s/.lianyaohu.toml", e->home);
    write_file(inhome, "", 0644);
    e->ctx.cwd = e->sub;
    assert_int_equal(cfg_find_project(&e->ctx, &p), 0);
    assert_string_equal(p, inhome);
    free(p);
    p = NULL;
    proj_file(e, "");
    assert_int_equal(cfg_find_project(&e->ctx, &p), 0);
    snprintf(want, sizeof(want), "%s/.lianyaohu.toml", e->proj);
    assert_string_equal(p, want);
    free(p);
    p = NULL;
    /* Outside $HOME the walk goes on to /: from root/xdg it finds root's. */
    e->ctx.cwd = e->xdg;
    assert_int_equal(cfg_find_project(&e->ctx, &p), 0);
    assert_string_equal(p, above);
}

static void test_files_and_flags(void **state) {
    struct env *e = *state;
    struct cfg_cli cli = CFG_CLI_INIT;
    struct cfg_error err = {{0}};
    struct cfg *c = NULL;
    char alt[256];

    write_file(e->global, "[defaults]\nvpn_interface = \"wg0\"\n", 0620);
    proj_file(e, "[network]\ndeny = [\"192.0.2.1\"]\n");
    {
        _cleanup_(cfg_freep) struct cfg *c1 = load_ok(e, &cli);
        assert_string_equal(c1->vpn_interface.value, "wg0");
        char want[512];
        snprintf(want, sizeof(want),
                 "lyh: warning: %s is group-writable; anyone who can write it controls your "
                 "sandbox\n",
                 e->global);
        assert_string_equal(notes(e), want);
    }
    /* --no-config: built-ins and flags only. */
    cli.no_config = true;
    {
        _cleanup_(cfg_freep) struct cfg *c2 = load_ok(e, &cli);
        assert_null(c2->vpn_interface.value);
        assert_null(c2->project_path);
        assert_int_equal(c2->deny.n, 0);
        assert_string_equal(c2->command.v[0].value, "claude");
        assert_string_equal(c2->command.v[0].origin, "built-in");
    }
    /* --config PATH replaces the global file; a missing one is an error. */
    cli.no_config = false;
    snprintf(alt, sizeof(alt), "%s/alt.toml", e->root);
    write_file(alt, "[defaults]\nvpn_interface = \"tun9\"\nfirewall = false\n", 0600);
    cli.config_path = alt;
    {
        _cleanup_(cfg_freep) struct cfg *c3 = load_ok(e, &cli);
        assert_string_equal(c3->vpn_interface.value, "tun9");
        assert_false(c3->firewall.value);
        assert_int_equal(c3->deny.n, 1); /* the project still applies */
    }
    snprintf(alt, sizeof(alt), "%s/missing.toml", e->root);
    assert_int_equal(cfg_load(&e->ctx, &cli, &c, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "missing.toml: no such file (--config)"));
    /* $XDG_CONFIG_HOME unset: ~/.config/lianyaohu. */
    e->ctx.xdg_config_home = NULL;
    _cleanup_free_ char *dir = NULL;
    assert_int_equal(cfg_config_dir(&e->ctx, &dir), 0);
    char want[256];
    snprintf(want, sizeof(want), "%s/.config/lianyaohu", e->home);
    assert_string_equal(dir, want);
}

/* ---- whose home (cfg_pick_home) ------------------------------------------------------ */

/* A filesystem for the injected stat: path, then what stat says. */
struct fake_node {
    const char *path;
    int err; /* 0: exists with mode and uid */
    mode_t mode;
    uid_t uid;
};
static const struct fake_node fake_fs[] = {
    {"/root", 0, S_IFDIR | 0700, 0},                    /* root's, as on Debian */
    {"/root/.config", EACCES, 0, 0},                    /* under a dir bob cannot search */
    {"/home/bob", 0, S_IFDIR | 0755, 1001},
    {"/home/bob/.config", 0, S_IFDIR | 0700, 1001},
    {"/home/bob/alt", 0, S_IFDIR | 0700, 1001},         /* a HOME of bob's, not the passwd one */
    {"/home/bob/file", 0, S_IFREG | 0600, 1001},
    {"/home/alice", 0, S_IFDIR | 0700, 1002},
    {"/home/alice/.config", 0, S_IFDIR | 0755, 1002},   /* readable, but alice's */
    {"/tmp", 0, S_IFDIR | 01777, 0},
    {"/nonexistent", ENOENT, 0, 0},
};

static int fake_stat(const char *path, struct stat *st) {
    for (size_t i = 0; i < ARRAY_SIZE(fake_fs); i++) {
        if (strcmp(fake_fs[i].path, path) != 0)
            continue;
        if (fake_fs[i].err) {
            errno = fake_fs[i].err;
            return -1;
        }
        *st = (struct stat){.st_mode = fake_fs[i].mode, .st_uid = fake_fs[i].uid};
        return 0;
    }
    errno = ENOENT;
    return -1;
}

static struct cfg_home pick(const char *home, const char *xdg, const char *pw_home) {
    struct cfg_home_in in = {.uid = 1001, .env_home = home, .env_xdg = xdg, .pw_home = pw_home,
                             .stat_fn = fake_stat};
    struct cfg_home h;
    memset(&h, 0x5a, sizeof(h)); /* every field must be set */
    cfg_pick_home(&in, &h);
    return h;
}

static void test_home_own(void **state) {
    (void)state;
    struct cfg_home h = pick("/home/bob", NULL, "/home/bob");
    assert_string_equal(h.home, "/home/bob");
    assert_false(h.home_from_passwd);
    assert_int_equal(h.home_reject, CFG_ENV_USED);
    assert_null(h.xdg_config_home);
    assert_int_equal(h.xdg_reject, CFG_ENV_USED);
    /* A HOME of one's own that is not the passwd one is the caller's word. */
    h = pick("/home/bob/alt", "/home/bob/.config", "/home/bob");
    assert_string_equal(h.home, "/home/bob/alt");
    assert_false(h.home_from_passwd);
    assert_string_equal(h.xdg_config_home, "/home/bob/.config");
    assert_int_equal(h.xdg_reject, CFG_ENV_USED);
}

static void test_home_of_someone_else(void **state) {
    (void)state;
    /* `setpriv --reuid bob` from a root shell: HOME=/root (0700, root's). */
    struct cfg_home h = pick("/root", NULL, "/home/bob");
    assert_string_equal(h.home, "/home/bob");
    assert_true(h.home_from_passwd);
    assert_int_equal(h.home_reject, CFG_ENV_NOT_OWNED);
    assert_int_equal(h.home_owner, 0);
    /* Readable does not make it bob's. */
    h = pick("/home/alice", NULL, "/home/bob");
    assert_string_equal(h.home, "/home/bob");
    assert_int_equal(h.home_reject, CFG_ENV_NOT_OWNED);
    assert_int_equal(h.home_owner, 1002);
    h = pick("/tmp", NULL, "/home/bob");
    assert_string_equal(h.home, "/home/bob");
    assert_int_equal(h.home_reject, CFG_ENV_NOT_OWNED);
}

static void test_home_unset_or_bad(void **state) {
    (void)state;
    struct cfg_home h = pick(NULL, NULL, "/home/bob");
    assert_string_equal(h.home, "/home/bob");
    assert_true(h.home_from_passwd);
    assert_int_equal(h.home_reject, CFG_ENV_USED); /* unset: nothing to say */
    h = pick("", NULL, "/home/bob");
    assert_string_equal(h.home, "/home/bob");
    assert_int_equal(h.home_reject, CFG_ENV_USED);
    h = pick("home/bob", NULL, "/home/bob");
    assert_string_equal(h.home, "/home/bob");
    assert_int_equal(h.home_reject, CFG_ENV_NOT_ABSOLUTE);
    h = pick("/nonexistent", NULL, "/home/bob");
    assert_string_equal(h.home, "/home/bob");
    assert_int_equal(h.home_reject, CFG_ENV_UNREACHABLE);
    assert_int_equal(h.home_errno, ENOENT);
    h = pick("/root/.config", NULL, "/home/bob");
    assert_string_equal(h.home, "/home/bob");
    assert_int_equal(h.home_reject, CFG_ENV_UNREACHABLE);
    assert_int_equal(h.home_errno, EACCES);
    h = pick("/home/bob/file", NULL, "/home/bob");
    assert_string_equal(h.home, "/home/bob");
    assert_int_equal(h.home_reject, CFG_ENV_NOT_DIR);
    /* The passwd home passes the same test as lyhd's: else there is none. */
    h = pick("/root", NULL, "/nonexistent");
    assert_null(h.home);
    assert_false(h.home_from_passwd);
    h = pick(NULL, NULL, "/home/alice");
    assert_null(h.home);
    h = pick(NULL, NULL, NULL);
    assert_null(h.home);
}

static void test_xdg_of_someone_else(void **state) {
    (void)state;
    struct cfg_home h = pick("/home/bob", "/home/alice/.config", "/home/bob");
    assert_string_equal(h.home, "/home/bob");
    assert_null(h.xdg_config_home);
    assert_int_equal(h.xdg_reject, CFG_ENV_NOT_OWNED);
    assert_int_equal(h.xdg_owner, 1002);
    /* Under a directory bob cannot search. */
    h = pick("/root", "/root/.config", "/home/bob");
    assert_null(h.xdg_config_home);
    assert_int_equal(h.xdg_reject, CFG_ENV_UNREACHABLE);
    assert_int_equal(h.xdg_errno, EACCES);
    h = pick("/home/bob", "rel/cfg", "/home/bob");
    assert_null(h.xdg_config_home);
    assert_int_equal(h.xdg_reject, CFG_ENV_NOT_ABSOLUTE);
    h = pick("/home/bob", "/nonexistent", "/home/bob");
    assert_null(h.xdg_config_home);
    assert_int_equal(h.xdg_reject, CFG_ENV_UNREACHABLE);
    h = pick("/home/bob", "", "/home/bob");
    assert_null(h.xdg_config_home);
    assert_int_equal(h.xdg_reject, CFG_ENV_USED);

    /* And the loader then reads bob's files, not root's or alice's. */
    h = pick("/root", "/home/alice/.config", "/home/bob");
    struct cfg_ctx ctx = {.home = h.home, .xdg_config_home = h.xdg_config_home, .cwd = "/tmp"};
    _cleanup_free_ char *dir = NULL;
    assert_int_equal(cfg_config_dir(&ctx, &dir), 0);
    assert_string_equal(dir, "/home/bob/.config/lianyaohu");
}

/* The real stat(2) on real directories: the test's own temp home is its
 * uid's, and is someone else's for any other uid. */
static void test_home_real_stat(void **state) {
    struct env *e = *state;
    struct cfg_home_in in = {.uid = getuid(), .env_home = e->home, .env_xdg = e->xdg,
                             .pw_home = NULL, .stat_fn = stat};
    struct cfg_home h;

    cfg_pick_home(&in, &h);
    assert_string_equal(h.home, e->home);
    assert_string_equal(h.xdg_config_home, e->xdg);
    in.uid = getuid() + 1;
    in.pw_home = e->proj; /* not that uid's either */
    cfg_pick_home(&in, &h);
    assert_null(h.home);
    assert_null(h.xdg_config_home);
    assert_int_equal(h.home_reject, CFG_ENV_NOT_OWNED);
    assert_int_equal(h.xdg_reject, CFG_ENV_NOT_OWNED);
    assert_int_equal(h.xdg_owner, getuid());
    /* With no home at all, the loader says what to do. */
    struct cfg_ctx ctx = {.home = h.home, .xdg_config_home = h.xdg_config_home, .cwd = e->sub};
    struct cfg_cli cli = CFG_CLI_INIT;
    struct cfg_error err = {{0}};
    struct cfg *c = NULL;
    assert_int_equal(cfg_load(&ctx, &cli, &c, &err), -ENOENT);
    assert_null(c);
    assert_non_null(strstr(err.msg, "set HOME to your home directory"));
}

static void test_host_port_parse(void **state) {
    (void)state;
    static const struct {
        const char *in, *canon;
        uint16_t lo, hi;
    } good[] = {{"1", "1", 1, 1}, {"5432", "5432", 5432, 5432}, {"65535", "65535", 65535, 65535},
                {"8000-8099", "8000-8099", 8000, 8099}, {"80-80", "80", 80, 80}};
    static const char *const bad[] = {"", "0", "65536", "-1", "+80", " 80", "80 ", "080",
                                      "80-", "-80", "80-70", "1-2-3", "0x50", "8o", "99999999999"};
    char why[128], canon[16];
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        uint16_t lo = 0, hi = 0;
        assert_int_equal(cfg_host_port_parse(good[i].in, &lo, &hi, canon, why, sizeof(why)), 0);
        assert_string_equal(canon, good[i].canon);
        assert_int_equal(lo, good[i].lo);
        assert_int_equal(hi, good[i].hi);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        assert_int_equal(cfg_host_port_parse(bad[i], NULL, NULL, canon, why, sizeof(why)), -EINVAL);
        assert_true(why[0] != '\0');
    }
}

/* ---- [defaults] vpn_interface, as the picker's `s` writes it ---------------------------------- */

static void edit_is(const char *in, const char *iface, const char *want) {
    struct cfg_error err = {{0}};
    char *out = NULL;
    assert_int_equal(cfg_edit_default_vpn(in, strlen(in), iface, &out, &err), 0);
    assert_string_equal(out, want);
    free(out);
}

static void test_edit_default_vpn(void **state) {
    (void)state;
    /* an empty file; one without [defaults], with and without a last newline */
    edit_is("", "wg0", "[defaults]\nvpn_interface = \"wg0\"\n");
    edit_is("# mine\n[network]\ndefault = \"deny\"\n", "tun0",
            "# mine\n[network]\ndefault = \"deny\"\n\n[defaults]\nvpn_interface = \"tun0\"\n");
    edit_is("[network]\ndefault = \"deny\"", "tun0",
            "[network]\ndefault = \"deny\"\n\n[defaults]\nvpn_interface = \"tun0\"\n");
    /* [defaults] without the key: right under its header, the rest as it was */
    edit_is("[defaults]\nfirewall = true # keep\n[env]\nA = \"1\"\n", "wg0",
            "[defaults]\nvpn_interface = \"wg0\"\nfirewall = true # keep\n[env]\nA = \"1\"\n");
    /* the key there: replaced where it was, comments elsewhere untouched */
    edit_is("# top\n[ defaults ]  # d\n  vpn_interface   =  'old0' # was\ncommand = [\"x\"]\n",
            "tailscale0",
            "# top\n[ defaults ]  # d\nvpn_interface = \"tailscale0\"\ncommand = [\"x\"]\n");
    /* vpn_interface under another table is not ours to touch */
    edit_is("[network]\nvpn_interface_note = 1\n", "wg0",
            "[network]\nvpn_interface_note = 1\n\n[defaults]\nvpn_interface = \"wg0\"\n");

    struct cfg_error err = {{0}};
    char *out = NULL;
    /* a dotted key the line view does not see: the parse of the result says no */
    const char *dotted = "defaults.vpn_interface = \"old\"\n";
    assert_int_equal(cfg_edit_default_vpn(dotted, strlen(dotted), "wg0", &out, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "edit it by hand"));
    assert_null(out);
    /* a multi-line value whose lines look like a key */
    const char *ml = "[defaults]\ncommand = [\n\"a\",\n]\nvpn_interface = \"\"\"x\n\"\"\"\n";
    assert_int_equal(cfg_edit_default_vpn(ml, strlen(ml), "wg0", &out, &err), -EINVAL);
    /* names that cannot be written as given */
    const char *bad[] = {"", "a\"b", "tun 0", "0123456789abcdef", "x\\y", "wg0\n"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(cfg_edit_default_vpn("", 0, bad[i], &out, &err), -EINVAL);
    /* not TOML at all to begin with */
    const char *broken = "[defaults\nx = \n";
    assert_int_equal(cfg_edit_default_vpn(broken, strlen(broken), "wg0", &out, &err), -EINVAL);
    assert_null(out);
}

/* ---- the editor's pieces: any key set or removed, a text checked as the loader checks ---- */

static void set_is(const char *in, const char *sec, const char *key, const char *val,
                   const char *want) {
    struct cfg_error err = {{0}};
    char *out = NULL;
    int r = cfg_edit_set(in, strlen(in), sec, key, val, &out, &err);
    if (r != 0)
        fail_msg("%s.%s = %s: %s", sec, key, val ? val : "(remove)", err.msg);
    assert_string_equal(out, want);
    free(out);
}

static void test_edit_set(void **state) {
    struct env *e = *state;
    struct cfg_error err = {{0}};
    char *out = NULL;

    set_is("", "network", "allow", "[\"10.0.0.5:443\", \"192.168.1.0/24\"]",
           "[network]\nallow = [\"10.0.0.5:443\", \"192.168.1.0/24\"]\n");
    set_is("[paths]\nnarrow_home = false # mine\nwritable = [\"/srv\"]\n", "paths", "narrow_home",
           "true", "[paths]\nnarrow_home = true\nwritable = [\"/srv\"]\n");
    /* removing: the line goes, the rest stays */
    set_is("[paths]\nnarrow_home = true\nwritable = [\"/srv\"]\n", "paths", "narrow_home", NULL,
           "[paths]\nwritable = [\"/srv\"]\n");
    set_is("[paths]\n", "paths", "deny", NULL, "[paths]\n"); /* nothing to remove */
    /* what cannot be written safely, or is no value */
    const char *ml = "[network]\nallow = [\n\"10.0.0.1\",\n]\n";
    assert_int_equal(cfg_edit_set(ml, strlen(ml), "network", "allow", "[]", &out, &err), -EINVAL);
    assert_int_equal(cfg_edit_set(ml, strlen(ml), "network", "allow", NULL, &out, &err), -EINVAL);
    assert_int_equal(cfg_edit_set("", 0, "network", "allow", "[\"a\"", &out, &err), -EINVAL);
    assert_int_equal(cfg_edit_set("", 0, "network", "allow", "1\n[x]", &out, &err), -EINVAL);
    assert_int_equal(cfg_edit_set("", 0, "net work", "allow", "1", &out, &err), -EINVAL);
    /* a header and a key line inside a multi-line string are not the file's:
     * an edit that would change another key (here [env] deny) is refused */
    const char *trick = "[env]\nNOTE = \'\'\'\n[network]\ndeny = \"keep me\"\n\'\'\'\n"
                        "deny = \"an env var\"\n";
    assert_int_equal(cfg_edit_set(trick, strlen(trick), "network", "deny", "[\"10.0.0.0/8\"]",
                                  &out, &err), -EINVAL);
    assert_int_equal(cfg_edit_set(trick, strlen(trick), "network", "deny", NULL, &out, &err),
                     -EINVAL);
    /* a control byte of a file's key does not reach the message */
    const char *esc = "[network]\n\"\\u001b]2;x\\u0007\" = 1\n";
    assert_int_equal(cfg_check_text(&e->ctx, "/x/c.toml", esc, strlen(esc), false, &err), -EINVAL);
    for (const char *p = err.msg; *p; p++)
        assert_true((unsigned char)*p >= 0x20 && *p != 0x7f);
    assert_null(out);
    /* quoting */
    char *q = cfg_toml_string("a\"b\\c\n");
    assert_string_equal(q, "\"a\\\"b\\\\c\\n\"");
    free(q);

    /* the loader's checks on a text: file:line:col and the key */
    const char *ok = "[network]\ndeny = [\"10.0.0.0/8\"]\n[paths]\nnarrow_home = true\n";
    assert_int_equal(cfg_check_text(&e->ctx, "/x/config.toml", ok, strlen(ok), false, &err), 0);
    const char *bad_rule = "[network]\ndeny = [\"10.0.0.0/33\"]\n";
    assert_int_equal(cfg_check_text(&e->ctx, "/x/config.toml", bad_rule, strlen(bad_rule), false,
                                    &err), -EINVAL);
    assert_non_null(strstr(err.msg, "/x/config.toml:2"));
    const char *unknown = "[paths]\nnarow_home = true\n";
    assert_int_equal(cfg_check_text(&e->ctx, "/x/c.toml", unknown, strlen(unknown), false, &err),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "unknown key"));
    const char *defaults = "[defaults]\nvpn_interface = \"tun0\"\n";
    assert_int_equal(cfg_check_text(&e->ctx, "/p/.lianyaohu.toml", defaults, strlen(defaults), true,
                                    &err), -EINVAL);
    assert_non_null(strstr(err.msg, "only allowed in the global"));
    assert_int_equal(cfg_check_text(&e->ctx, "/x/c.toml", defaults, strlen(defaults), false, &err),
                     0);

    /* the key table: every key once, the [defaults] ones global only */
    struct cfg_key_info keys[64];
    size_t n = cfg_keys(keys, 64);
    assert_true(n >= 20);
    for (size_t i = 0; i < n; i++) {
        assert_non_null(keys[i].desc);
        assert_int_equal(keys[i].global_only, strcmp(keys[i].section, "defaults") == 0);
        for (size_t j = i + 1; j < n; j++)
            assert_false(strcmp(keys[i].section, keys[j].section) == 0 &&
                         strcmp(keys[i].name, keys[j].name) == 0);
    }
}

static void test_save_default_vpn(void **state) {
    struct env *e = *state;
    struct cfg_error err = {{0}};
    struct stat st;

    /* no file yet (nor its directory): made, 0600 */
    char dir[256];
    snprintf(dir, sizeof(dir), "%s/lianyaohu", e->xdg);
    assert_int_equal(rmdir(dir), 0);
    assert_int_equal(cfg_save_default_vpn(e->global, "wg0", &err), 0);
    _cleanup_free_ char *t = slurp(e->global);
    assert_string_equal(t, "[defaults]\nvpn_interface = \"wg0\"\n");
    assert_int_equal(stat(e->global, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    /* and the loader takes it */
    struct cfg_cli cli = {0};
    struct cfg *c = NULL;
    assert_int_equal(cfg_load(&e->ctx, &cli, &c, &err), 0);
    assert_string_equal(c->vpn_interface.value, "wg0");
    cfg_free(c);
    /* again, another name: replaced, not added */
    assert_int_equal(cfg_save_default_vpn(e->global, "tun0", &err), 0);
    free(t);
    t = slurp(e->global);
    assert_string_equal(t, "[defaults]\nvpn_interface = \"tun0\"\n");
    /* a symbolic link is refused, and what it points to is left alone */
    char real[256];
    snprintf(real, sizeof(real), "%s/real.toml", e->root);
    write_file(real, "# dotfiles\n", 0600);
    assert_int_equal(unlink(e->global), 0);
    assert_int_equal(symlink(real, e->global), 0);
    assert_int_equal(cfg_save_default_vpn(e->global, "wg0", &err), -ELOOP);
    assert_non_null(strstr(err.msg, "symbolic link"));
    free(t);
    t = slurp(real);
    assert_string_equal(t, "# dotfiles\n");
    /* a file that does not parse: refused, unchanged, no temp file left */
    assert_int_equal(unlink(e->global), 0);
    write_file(e->global, "[defaults\n", 0600);
    assert_int_equal(cfg_save_default_vpn(e->global, "wg0", &err), -EINVAL);
    assert_non_null(strstr(err.msg, e->global));
    free(t);
    t = slurp(e->global);
    assert_string_equal(t, "[defaults\n");
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_port_parse),
        cmocka_unit_test(test_edit_default_vpn),
        cmocka_unit_test_setup_teardown(test_edit_set, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_default_vpn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_golden_merge_origin, setup, teardown),
        cmocka_unit_test_setup_teardown(test_golden_untrusted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_widening_stripped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_widening_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trust_approve_stale_revoke, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trust_ask, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trust_project_flag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_schema_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_large, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dedup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_project_walk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files_and_flags, setup, teardown),
        cmocka_unit_test(test_home_own),
        cmocka_unit_test(test_home_of_someone_else),
        cmocka_unit_test(test_home_unset_or_bad),
        cmocka_unit_test(test_xdg_of_someone_else),
        cmocka_unit_test_setup_teardown(test_home_real_stat, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
