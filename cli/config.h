/* The layered user configuration of `lyh run` (docs/config.md).
 *
 * Layers, lowest first: built-ins, the global file ($XDG_CONFIG_HOME/
 * lianyaohu/config.toml, else ~/.config/lianyaohu/config.toml, or --config
 * PATH), the nearest project file (.lianyaohu.toml, walking up from cwd, the
 * walk stops after $HOME or /), the command line. Scalars: the highest layer
 * that sets one wins. Lists concatenate in layer order, deduplicated (the
 * first occurrence and its origin are kept). env: the highest layer wins per
 * NAME. [defaults] is allowed only in the global file.
 *
 * Trust: a project file's tightenings always apply; its widenings
 * (network.allow, network.lan_allow, network.default = "allow",
 * paths.writable, paths.read_only, paths.agent_state_dirs,
 * paths.narrow_home = false, env.*) only when trusted.toml, next to the
 * global config.toml, approves that directory with the SHA-256 of the file's
 * exact bytes (the bytes that were parsed: read once, hashed and parsed from
 * the same buffer), or with cli->trust_project.
 *
 * Conventions: 0 or -errno; ret_* set only on success; on failure *err (may
 * be NULL) holds one line naming file:line:column and the key. Nothing here
 * logs: warnings and notes (group/world-writable files, ignored keys) go to
 * ctx->note when it is not NULL. No global state. */
#ifndef LYH_CLI_CONFIG_H
#define LYH_CLI_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct stat;

/* Files larger than this are refused. */
#define CFG_MAX_FILE (256u * 1024u)
#define CFG_ERR_MAX 8192u
#define CFG_SHA256_HEX 65u /* 64 hex digits and the NUL */
#define CFG_PROJECT_NAME ".lianyaohu.toml"

struct cfg_error {
    char msg[CFG_ERR_MAX];
};

/* Who the loader is running for. Every pointer is borrowed. home and
 * xdg_config_home are the caller's own, as cfg_pick_home chose them: the
 * loader trusts them as given. */
struct cfg_ctx {
    const char *home;            /* the caller's home; NULL = none (walk to /) */
    const char *xdg_config_home; /* NULL or "" = unset */
    const char *cwd;             /* absolute; where the project walk starts */
    /* Asked once when an untrusted project file holds widenings; return true
     * for yes. NULL when there is no terminal to ask. */
    bool (*ask)(void *data, const char *question);
    void *ask_data;
    FILE *note; /* warnings and notes; NULL = silent */
};

/* Whose home: what the environment says, checked against the real uid.
 * Every pointer is borrowed. */
struct cfg_home_in {
    uid_t uid;            /* getuid() */
    const char *env_home; /* $HOME; NULL = unset */
    const char *env_xdg;  /* $XDG_CONFIG_HOME; NULL = unset */
    const char *pw_home;  /* the home of uid's passwd entry; NULL = no entry */
    /* stat(2) as the caller (injected by tests): 0 or -1 with errno. */
    int (*stat_fn)(const char *path, struct stat *st);
};

/* Why a variable that was set was not used. */
enum cfg_env_reject {
    CFG_ENV_USED = 0,     /* used, or unset/empty (nothing to reject) */
    CFG_ENV_NOT_ABSOLUTE, /* a relative path */
    CFG_ENV_UNREACHABLE,  /* stat failed: missing, or a directory above it is not
                           * searchable by the caller (errno in *_errno) */
    CFG_ENV_NOT_DIR,      /* exists but is not a directory */
    CFG_ENV_NOT_OWNED,    /* a directory of another uid (owner in *_owner) */
};

/* The decision. The strings are borrowed from the cfg_home_in. */
struct cfg_home {
    const char *home;            /* env_home or pw_home; NULL = neither is usable */
    bool home_from_passwd;       /* home is pw_home because env_home was not usable */
    const char *xdg_config_home; /* env_xdg when usable, else NULL */
    enum cfg_env_reject home_reject, xdg_reject;
    int home_errno, xdg_errno;   /* for CFG_ENV_UNREACHABLE */
    uid_t home_owner, xdg_owner; /* for CFG_ENV_NOT_OWNED */
};

/* Decide the caller's home and config base from the environment (pure: the
 * only I/O is in->stat_fn). $HOME is used when it is an absolute path to a
 * directory owned by in->uid that the caller can reach; otherwise the passwd
 * home, under the same test (as lyhd's home for the sandbox); otherwise
 * none. $XDG_CONFIG_HOME is used under the same test, else ignored (the
 * config dir is then home/.config). Never fails: out is always filled. */
void cfg_pick_home(const struct cfg_home_in *in, struct cfg_home *out);

/* What the command line said. Unset: NULL, 0 entries, or -1 for the bools. */
struct cfg_strv {
    const char *const *v;
    size_t n;
};

struct cfg_cli {
    const char *config_path; /* --config: the global file to use instead */
    bool no_config;          /* --no-config: no file at all */
    bool trust_project;      /* --trust-project: apply widenings this once */
    const char *vpn;
    int8_t firewall, shared_user_firewall, allow_non_default_route, narrow_home;
    bool default_deny; /* --allow-dest implies network.default = "deny" */
    struct cfg_strv command, env, allow, deny, lan_allow, writable, read_only;
    struct cfg_strv host_ports; /* --allow-host-port */
    struct cfg_strv allow_sockets; /* --allow-socket (absolute) */
    struct cfg_strv dns;           /* --dns */
    struct cfg_strv allow_domains; /* --allow-domain */
};
#define CFG_CLI_INIT                                                                        \
    {.firewall = -1, .shared_user_firewall = -1, .allow_non_default_route = -1,             \
     .narrow_home = -1}

/* One value and where it came from: "PATH:LINE", "built-in" or "command
 * line". Both strings are owned. */
struct cfg_item {
    char *value;
    char *origin;
};

struct cfg_list {
    struct cfg_item *v; /* owned */
    size_t n, cap;
};

struct cfg_bool {
    bool value;
    char *origin; /* owned */
};

enum cfg_trust {
    CFG_TRUST_NONE = 0, /* no project file */
    CFG_TRUST_APPROVED,
    CFG_TRUST_ONCE,      /* --trust-project */
    CFG_TRUST_UNTRUSTED, /* no approval */
    CFG_TRUST_STALE,     /* an approval for another version of the file */
};

/* The merged configuration. Every pointer is owned. */
struct cfg {
    char *config_dir, *global_path, *trust_path;
    bool global_exists, trust_exists;
    char *project_path; /* NULL when none was found (or --no-config) */
    char *project_dir;
    char project_sha256[CFG_SHA256_HEX];
    enum cfg_trust trust;

    struct cfg_item vpn_interface; /* value NULL when unset: lyh run picks */
    struct cfg_item proxy;         /* proxy-only mode's proxy URL, NULL when unset */
    struct cfg_bool firewall, shared_user_firewall, allow_non_default_route, narrow_home;
    struct cfg_list command; /* replaced as a whole, never concatenated */
    struct cfg_list env;     /* "NAME=value" */
    struct cfg_item network_default; /* "allow" or "deny" */
    struct cfg_list allow, deny, lan_allow; /* canonical DestRule text */
    struct cfg_list host_ports; /* "PORT" or "PORT-PORT": loopback ports of host services */
    struct cfg_list writable, read_only, paths_deny; /* absolute paths */
    struct cfg_list agent_state_dirs;                 /* names under $HOME */
    struct cfg_list protect; /* entries of $HOME kept read-only on top of the built-in list */
    struct cfg_list allow_sockets; /* sockets the agent may reach although hidden */
    struct cfg_list dns;           /* resolvers of the session's DNS forwarder (addresses) */
    struct cfg_list allow_domains; /* the domain allowlist (canonical patterns) */
    /* Widenings of an untrusted project file that were not applied: value is
     * the key ("network.allow", "env.TOKEN"), origin where it was. */
    struct cfg_list ignored;
};

/* Locate, read, validate, trust-check and merge. -EINVAL: a schema error
 * (unknown key, wrong type, bad value, [defaults] in a project file);
 * -EBADMSG: not TOML; -EFBIG: a file over CFG_MAX_FILE; -ENOENT: --config
 * names no file; other -errno from reading. *err says file:line:column: key. */
int cfg_load(const struct cfg_ctx *ctx, const struct cfg_cli *cli, struct cfg **ret,
             struct cfg_error *err);
void cfg_free(struct cfg *c);
static inline void cfg_freep(struct cfg **c) { cfg_free(*c); }

/* The merged configuration as TOML that parses again; with origin, a comment
 * after each value says where it came from. */
void cfg_show(FILE *f, const struct cfg *c, bool origin);

/* The directory of the global config and trust files. *ret is malloc'd. */
int cfg_config_dir(const struct cfg_ctx *ctx, char **ret);

/* A host port as --allow-host-port and network.host_ports take it: "PORT" or
 * "MIN-MAX", decimal, 1..65535, no sign, no spaces, no leading zeros. 0 with
 * the range (each ret_* may be NULL) and its canonical text in canon (16 bytes);
 * -EINVAL with a reason in why. */
int cfg_host_port_parse(const char *s, uint16_t *ret_min, uint16_t *ret_max, char *canon,
                        char *why, size_t whylen);
/* The nearest project file from ctx->cwd; -ENOENT when there is none. */
int cfg_find_project(const struct cfg_ctx *ctx, char **ret_path);
/* SHA-256 (hex) of len bytes at buf. */
void cfg_sha256_hex(const char *buf, size_t len, char out[CFG_SHA256_HEX]);
/* SHA-256 (hex) of the exact bytes of path (at most CFG_MAX_FILE). */
int cfg_hash_file(const char *path, char ret_hex[CFG_SHA256_HEX], struct cfg_error *err);
/* The keys of c's ignored widenings, ", "-joined into buf (len > 8 bytes),
 * the [env] ones as one count ("env (3 variables)"); "" for none. */
void cfg_ignored_keys(const struct cfg *c, char *buf, size_t len);
/* Record (sha256_hex not NULL) or remove (NULL) the approval for dir in the
 * trust file, written 0600 by temp file + rename, its directory created 0700.
 * Removing an absent approval is -ENOENT. */
int cfg_trust_set(const char *trust_path, const char *dir, const char *sha256_hex,
                  struct cfg_error *err);
/* The approved hash for dir: 0 with *ret (malloc'd), -ENOENT if none. */
int cfg_trust_get(const char *trust_path, const char *dir, char **ret, struct cfg_error *err);

/* The text of a config file (len bytes at in) with `[defaults] vpn_interface`
 * set to iface: the key's line replaced where it is, else put under an
 * existing [defaults], else a [defaults] section added at the end; every other
 * line as it was. The result must parse and name iface there, or -EINVAL
 * ("edit it by hand": a multi-line value, a dotted key, ...). iface: 1 to 15
 * of [A-Za-z0-9._@+-]. 0 with *ret_out (malloc'd, NUL-terminated). */
int cfg_edit_default_vpn(const char *in, size_t len, const char *iface, char **ret_out,
                         struct cfg_error *err);
/* The same on the file at path (the user's global config; absent: a new one),
 * written 0600 by temp file + rename. A symbolic link is refused (the rename
 * would replace it), as is a file over CFG_MAX_FILE. */
int cfg_save_default_vpn(const char *path, const char *iface, struct cfg_error *err);

/* ---- the editor's pieces (lyh config on a terminal) ---- */

enum cfg_key_type { CFG_KEY_STRING, CFG_KEY_BOOL, CFG_KEY_LIST };
struct cfg_key_info {
    const char *section, *name, *desc; /* static */
    enum cfg_key_type type;
    bool global_only; /* [defaults]: not in a project file */
};
/* The schema's keys ([env] aside), in the order lyh config show prints
 * them, into out (at most max). Returns how many. */
size_t cfg_keys(struct cfg_key_info *out, size_t max);
/* Set (value_toml: the value as TOML text, one line) or remove (NULL) key
 * in [section] of the file text in (len bytes): the key's line replaced
 * where it is, else put under the section's header, else the section added
 * at the end; every other line as it was. The result must parse and hold
 * exactly that value there (no such key when removing), else -EINVAL
 * ("edit it by hand"). 0 with *ret_out (malloc'd, NUL-terminated). */
int cfg_edit_set(const char *in, size_t len, const char *section, const char *key,
                 const char *value_toml, char **ret_out, struct cfg_error *err);
/* s as a TOML basic string, quoted and escaped (malloc'd; NULL: ENOMEM). */
char *cfg_toml_string(const char *s);
/* Check a config file's text as cfg_load checks it (path names it in the
 * messages; project: a project file's rules, every key checked as if
 * trusted). 0, or -EINVAL/-EBADMSG/-EFBIG with *err saying file:line:col. */
int cfg_check_text(const struct cfg_ctx *ctx, const char *path, const char *buf, size_t len,
                   bool project, struct cfg_error *err);
/* The keys a project file's text would widen, were it approved (as
 * cfg_ignored_keys says them; "" for none), into out. 0 or as
 * cfg_check_text. */
int cfg_text_widenings(const struct cfg_ctx *ctx, const char *path, const char *buf, size_t len,
                       char *out, size_t outlen, struct cfg_error *err);
/* The merged value of section.name in c as text (a list ", "-joined,
 * shortened to len) and where it came from (*ret_origin: borrowed from c,
 * or "built-in", "unset", "empty"). -ENOENT for a key that is not one. */
int cfg_value_text(const struct cfg *c, const char *section, const char *name, char *buf,
                   size_t len, const char **ret_origin);
/* Read a config file (at most CFG_MAX_FILE) / write one (0600, temp file +
 * rename, its directory made 0700; a symbolic link refused). */
int cfg_read_file(const char *path, char **ret, size_t *ret_len, struct cfg_error *err);
int cfg_write_file(const char *path, const char *buf, size_t len, struct cfg_error *err);

/* Storage for the strings a cfg_ctx made by cli_config_ctx points into; it
 * must outlive the ctx. */
struct cfg_ctx_buf {
    char cwd[PATH_MAX];
    char pw_home[PATH_MAX]; /* the passwd home, when that is the one used */
};

/* The context of this process (cmd_config.c): the caller's home and config
 * base (cfg_pick_home on getuid(), $HOME, $XDG_CONFIG_HOME and the passwd
 * entry; one note on stderr when a variable that was set is not used), the
 * current directory (or cwd_override, resolved) copied into buf->cwd, notes
 * to stderr, and the [y/N] question when may_ask and stdin and stderr are
 * both terminals. 0 or -errno (the directory could not be resolved). */
int cli_config_ctx(struct cfg_ctx *ctx, struct cfg_ctx_buf *buf, const char *cwd_override,
                   bool may_ask);

#endif
