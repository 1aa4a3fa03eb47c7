/* cli/config.c: the user configuration of `lyh run`: whose home it is,
 * finding the files, validating them against the schema, the trust decision
 * for project files, the merge with provenance, and the trust file. It never
 * talks to the daemon and never logs (notes go to ctx->note); the only files
 * it writes are the trust file and its directory.
 *
 * Why the trust rule is safe: a project file is typically written by whoever
 * wrote the repository (or by an agent confined in it, since the project
 * directory is writable inside the sandbox). Anything it says that narrows
 * the sandbox can only hurt availability, so it always applies. Anything that
 * widens it applies only when the user approved this directory with the hash
 * of these exact bytes: the buffer that is hashed is the buffer that is
 * parsed, so an edit between the check and the use is impossible, and any
 * edit after the approval makes it stale. The trust file itself lives in the
 * user's config dir; the sandbox must not make that writable (docs/config.md). */
#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/config.h"
#include "cli/proxy.h"
#include "cli/toml.h"
#include "common/home_entry.h"
#include "common/dest_rule.h"
#include "common/dns_addr.h"
#include "common/dns_name.h"
#include "common/macros.h"

static void note(const struct cfg_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(const struct cfg_ctx *ctx, const char *fmt, ...) {
    va_list ap;

    if (!ctx->note)
        return;
    va_start(ap, fmt);
    vfprintf(ctx->note, fmt, ap);
    va_end(ap);
}

static int seterr(struct cfg_error *err, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int seterr(struct cfg_error *err, int r, const char *fmt, ...) {
    va_list ap;

    if (err) {
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        va_end(ap);
        /* a message quotes keys and values of files an agent may have
         * written: no control byte of theirs reaches a terminal */
        for (char *p = err->msg; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                *p = '?';
    }
    return r;
}

/* ---- lists ------------------------------------------------------------------------ */

static void item_clear(struct cfg_item *it) {
    free(it->value);
    free(it->origin);
    it->value = it->origin = NULL;
}

static void list_clear(struct cfg_list *l) {
    for (size_t i = 0; i < l->n; i++)
        item_clear(&l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

static int item_set(struct cfg_item *it, const char *value, const char *origin) {
    char *v = strdup(value), *o = strdup(origin);

    if (!v || !o) {
        free(v);
        free(o);
        return -ENOMEM;
    }
    item_clear(it);
    it->value = v;
    it->origin = o;
    return 0;
}

static int bool_set(struct cfg_bool *b, bool value, const char *origin) {
    char *o = strdup(origin);

    if (!o)
        return -ENOMEM;
    free(b->origin);
    b->origin = o;
    b->value = value;
    return 0;
}

/* Length of the part of s that identifies it for dedup: all of it, or the
 * NAME of NAME=value when by_name. */
static size_t key_len(const char *s, bool by_name) {
    const char *eq = by_name ? strchr(s, '=') : NULL;
    return eq ? (size_t)(eq - s) : strlen(s);
}

/* Append value, duplicates and all (a command's argv keeps them). */
static int list_append(struct cfg_list *l, const char *value, const char *origin) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        struct cfg_item *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n] = (struct cfg_item){0};
    int r = item_set(&l->v[l->n], value, origin);
    if (r == 0)
        l->n++;
    return r;
}

/* Append value unless already there. With by_name (env), a later NAME
 * replaces the earlier value and origin in place. */
static int list_add(struct cfg_list *l, const char *value, const char *origin, bool by_name) {
    size_t kl = key_len(value, by_name);

    for (size_t i = 0; i < l->n; i++) {
        if (key_len(l->v[i].value, by_name) == kl && memcmp(l->v[i].value, value, kl) == 0) {
            if (!by_name)
                return 0;
            return item_set(&l->v[i], value, origin);
        }
    }
    return list_append(l, value, origin);
}

void cfg_free(struct cfg *c) {
    if (!c)
        return;
    free(c->config_dir);
    free(c->global_path);
    free(c->trust_path);
    free(c->project_path);
    free(c->project_dir);
    item_clear(&c->vpn_interface);
    item_clear(&c->proxy);
    item_clear(&c->network_default);
    free(c->firewall.origin);
    free(c->shared_user_firewall.origin);
    free(c->allow_non_default_route.origin);
    free(c->narrow_home.origin);
    struct cfg_list *lists[] = {&c->command,  &c->env,      &c->allow,      &c->deny,
                                &c->lan_allow, &c->writable, &c->read_only, &c->paths_deny,
                                &c->agent_state_dirs, &c->host_ports, &c->protect,
                                &c->allow_sockets, &c->dns, &c->allow_domains, &c->ignored};
    for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
        list_clear(lists[i]);
    free(c);
}

/* ---- reading files ------------------------------------------------------------------ */

/* Read all of path (at most CFG_MAX_FILE bytes). -ENOENT when absent. Warns
 * when the file is group- or world-writable: someone else could then decide
 * what our sandbox looks like. */
static int read_file(const struct cfg_ctx *ctx, const char *path, char **ret, size_t *ret_len,
                     struct cfg_error *err) {
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    _cleanup_free_ char *buf = NULL;
    struct stat st;
    size_t len = 0;

    if (fd < 0) {
        if (errno == ENOENT)
            return -ENOENT;
        return seterr(err, -errno, "%s: cannot open: %s", path, strerror(errno));
    }
    if (fstat(fd, &st) < 0)
        return seterr(err, -errno, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return seterr(err, -EINVAL, "%s: not a regular file", path);
    if (st.st_size > (off_t)CFG_MAX_FILE)
        return seterr(err, -EFBIG, "%s:1:1: file is larger than 256 KiB (%lld bytes); refused",
                      path, (long long)st.st_size);
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        note(ctx, "lyh: warning: %s is %s-writable; anyone who can write it controls your sandbox\n",
             path, st.st_mode & S_IWOTH ? "world" : "group");
    buf = malloc(CFG_MAX_FILE + 1);
    if (!buf)
        return -ENOMEM;
    for (;;) {
        ssize_t k = read(fd, buf + len, CFG_MAX_FILE + 1 - len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return seterr(err, -errno, "%s: read failed: %s", path, strerror(errno));
        if (k == 0)
            break;
        len += (size_t)k;
        if (len > CFG_MAX_FILE)
            return seterr(err, -EFBIG, "%s:1:1: file is larger than 256 KiB; refused", path);
    }
    *ret = TAKE_PTR(buf);
    *ret_len = len;
    return 0;
}

static void sha256_hex(const char *buf, size_t len, char out[CFG_SHA256_HEX]) {
    struct sha256_ctx sc;
    uint8_t d[SHA256_DIGEST_SIZE];

    sha256_init(&sc);
    sha256_update(&sc, len, (const uint8_t *)buf);
    sha256_digest(&sc, sizeof(d), d);
    for (size_t i = 0; i < sizeof(d); i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

void cfg_sha256_hex(const char *buf, size_t len, char out[CFG_SHA256_HEX]) {
    sha256_hex(buf, len, out);
}

int cfg_hash_file(const char *path, char ret_hex[CFG_SHA256_HEX], struct cfg_error *err) {
    struct cfg_ctx quiet = {0};
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = read_file(&quiet, path, &buf, &len, err);

    if (r == -ENOENT)
        return seterr(err, r, "%s: no such file", path);
    if (r < 0)
        return r;
    sha256_hex(buf, len, ret_hex);
    return 0;
}

static int parse_file(const char *path, const char *buf, size_t len, struct toml_doc **ret,
                      struct cfg_error *err) {
    struct toml_error te = {0};
    int r = toml_parse(buf, len, CFG_MAX_FILE, ret, &te);

    if (r == -EFBIG)
        return seterr(err, r, "%s:1:1: file is larger than 256 KiB; refused", path);
    if (r < 0)
        return seterr(err, r, "%s:%u:%u: %s", path, te.line, te.column,
                      r == -EBADMSG ? te.msg : strerror(-r));
    return 0;
}

/* ---- whose home ------------------------------------------------------------------------ */

/* Why the environment is checked at all: lyh is often started with someone
 * else's environment (`sudo -u`, `su` without -, setpriv, a service manager
 * that keeps root's HOME). Reading "$HOME/.config/lianyaohu" then means
 * either a file the caller cannot open (a confusing failure) or, worse, a
 * file another user wrote, applied as if the caller had chosen it: their
 * widenings, their trust approvals. So a variable counts only when it names
 * a directory the real uid owns and can reach; the fallback is the passwd
 * home, which is what lyhd uses as the sandbox's $HOME (daemon/rpc_run.c
 * lookup_home), so the CLI and the daemon agree on whose files these are.
 * The check is on a path string and a stat, not an fd: it decides whose
 * directory the environment names, it is no sandbox boundary (lyhd checks
 * every request again), and a directory the caller owns cannot be swapped by
 * another unprivileged user without write access to its parent (in a sticky
 * /tmp, only its owner can rename it). */
static enum cfg_env_reject check_own_dir(const struct cfg_home_in *in, const char *path,
                                         int *ret_errno, uid_t *ret_owner) {
    struct stat st;

    if (path[0] != '/')
        return CFG_ENV_NOT_ABSOLUTE;
    if (in->stat_fn(path, &st) < 0) {
        *ret_errno = errno;
        return CFG_ENV_UNREACHABLE;
    }
    if (!S_ISDIR(st.st_mode))
        return CFG_ENV_NOT_DIR;
    if (st.st_uid != in->uid) {
        *ret_owner = st.st_uid;
        return CFG_ENV_NOT_OWNED;
    }
    return CFG_ENV_USED;
}

void cfg_pick_home(const struct cfg_home_in *in, struct cfg_home *out) {
    int e = 0;
    uid_t owner = 0;

    *out = (struct cfg_home){0};
    if (in->env_home && in->env_home[0]) {
        out->home_reject = check_own_dir(in, in->env_home, &out->home_errno, &out->home_owner);
        if (out->home_reject == CFG_ENV_USED)
            out->home = in->env_home;
    }
    if (!out->home && in->pw_home && in->pw_home[0] &&
        check_own_dir(in, in->pw_home, &e, &owner) == CFG_ENV_USED) {
        out->home = in->pw_home;
        out->home_from_passwd = true;
    }
    if (in->env_xdg && in->env_xdg[0]) {
        out->xdg_reject = check_own_dir(in, in->env_xdg, &out->xdg_errno, &out->xdg_owner);
        if (out->xdg_reject == CFG_ENV_USED)
            out->xdg_config_home = in->env_xdg;
    }
}

/* ---- paths ---------------------------------------------------------------------------- */

static int port_num(const char *s, size_t n, uint16_t *ret) {
    unsigned v = 0;
    if (n == 0 || n > 5 || (s[0] == '0'))
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v < 1 || v > 65535)
        return -EINVAL;
    *ret = (uint16_t)v;
    return 0;
}

int cfg_host_port_parse(const char *s, uint16_t *ret_min, uint16_t *ret_max, char *canon,
                        char *why, size_t whylen) {
    const char *dash = s ? strchr(s, '-') : NULL;
    uint16_t lo, hi;
    if (!s || strlen(s) > 11 ||
        port_num(s, dash ? (size_t)(dash - s) : strlen(s), &lo) < 0 ||
        (dash ? port_num(dash + 1, strlen(dash + 1), &hi) : (hi = lo, 0)) < 0) {
        snprintf(why, whylen, "a port is a number from 1 to 65535, or a range such as 8000-8099");
        return -EINVAL;
    }
    if (lo > hi) {
        snprintf(why, whylen, "the range runs backwards (%u-%u)", lo, hi);
        return -EINVAL;
    }
    if (ret_min)
        *ret_min = lo;
    if (ret_max)
        *ret_max = hi;
    if (canon) {
        if (lo == hi)
            snprintf(canon, 16, "%u", lo);
        else
            snprintf(canon, 16, "%u-%u", lo, hi);
    }
    return 0;
}

int cfg_config_dir(const struct cfg_ctx *ctx, char **ret) {
    char *p = NULL;
    int k;

    if (ctx->xdg_config_home && ctx->xdg_config_home[0] == '/')
        k = asprintf(&p, "%s/lianyaohu", ctx->xdg_config_home);
    else if (ctx->home && ctx->home[0] == '/')
        k = asprintf(&p, "%s/.config/lianyaohu", ctx->home);
    else
        return -ENOENT;
    if (k < 0)
        return -ENOMEM;
    *ret = p;
    return 0;
}

/* path without trailing slashes (but "/" stays "/"), into a new string. */
static char *strip_slashes(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    return strndup(path, n);
}

int cfg_find_project(const struct cfg_ctx *ctx, char **ret_path) {
    _cleanup_free_ char *dir = NULL, *home = NULL;

    if (!ctx->cwd || ctx->cwd[0] != '/')
        return -ENOENT;
    dir = strip_slashes(ctx->cwd);
    home = ctx->home ? strip_slashes(ctx->home) : NULL;
    if (!dir || (ctx->home && !home))
        return -ENOMEM;
    for (;;) {
        char *p = NULL;
        struct stat st;
        if (asprintf(&p, "%s%s" CFG_PROJECT_NAME, dir, strcmp(dir, "/") == 0 ? "" : "/") < 0)
            return -ENOMEM;
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
            *ret_path = p;
            return 0;
        }
        free(p);
        /* Stop after $HOME or /: a file above the user's home is not theirs. */
        if (strcmp(dir, "/") == 0 || (home && strcmp(dir, home) == 0))
            return -ENOENT;
        char *slash = strrchr(dir, '/');
        if (slash == dir)
            dir[1] = '\0';
        else
            *slash = '\0';
    }
}

/* Drop empty, "." and ".." components of an absolute path, in place. */
static void normalize(char *path) {
    char *out = path, *in = path;

    while (*in) {
        while (*in == '/')
            in++;
        char *end = strchrnul(in, '/');
        size_t n = (size_t)(end - in);
        if (n == 0 || (n == 1 && in[0] == '.')) {
            /* skip */
        } else if (n == 2 && in[0] == '.' && in[1] == '.') {
            while (out > path && *--out != '/')
                ;
        } else {
            *out++ = '/';
            memmove(out, in, n);
            out += n;
        }
        in = end;
    }
    if (out == path)
        *out++ = '/';
    *out = '\0';
}

/* A path from a file: "~/x" is under $HOME, a relative one under the file's
 * directory; "." and ".." are folded. Lexical only (a symlink is not looked
 * at): the daemon resolves and checks the real path. */
static char *resolve_path(const char *p, const char *base, const char *home) {
    char *out = NULL;
    int k;

    if (p[0] == '/')
        k = asprintf(&out, "%s", p);
    else if (p[0] == '~' && (p[1] == '/' || p[1] == '\0') && home)
        k = asprintf(&out, "%s/%s", home, p + 1);
    else
        k = asprintf(&out, "%s/%s", base, p);
    if (k < 0)
        return NULL;
    normalize(out);
    return out;
}

/* ---- the schema ------------------------------------------------------------------------ */

enum kind { K_STR, K_PROXY, K_BOOL, K_CMD, K_RULES, K_PATHS, K_NAMES, K_PORTS, K_HOMEREL, K_DEFAULT, K_ADDRS, K_DOMAINS };

struct field {
    const char *section, *name;
    enum kind kind;
    size_t off; /* into struct cfg */
    bool widens; /* every non-empty value widens (lists) */
    const char *desc; /* one line, for the editor */
};

#define F(sec, nm, k, member, w, d) {sec, nm, k, offsetof(struct cfg, member), w, d}
static const struct field fields[] = {
    F("defaults", "vpn_interface", K_STR, vpn_interface, true,
      "the VPN interface lyh run uses when --vpn is not given"),
    /* proxy-only mode's proxy: where all the agent's traffic goes */
    F("defaults", "proxy", K_PROXY, proxy, true,
      "proxy-only mode's local proxy (http://127.0.0.1:3128, socks5h://...)"),
    F("defaults", "firewall", K_BOOL, firewall, false,
      "false: no VPN guard, and the agent has no IP network at all"),
    F("defaults", "shared_user_firewall", K_BOOL, shared_user_firewall, false,
      "one firewall for all your processes (fallback)"),
    F("defaults", "allow_non_default_route", K_BOOL, allow_non_default_route, false,
      "skip the check that the VPN carries the IPv4 default route"),
    F("defaults", "command", K_CMD, command, true,
      "what lyh run starts when no command is given"),
    F("network", "default", K_DEFAULT, network_default, false,
      "allow or deny: destinations on no list"),
    F("network", "allow", K_RULES, allow, true,
      "destinations the agent may reach (makes the default deny)"),
    F("network", "deny", K_RULES, deny, false, "destinations always refused"),
    F("network", "lan_allow", K_RULES, lan_allow, true, "parts of the LAN the agent may reach"),
    F("network", "host_ports", K_PORTS, host_ports, true,
      "loopback ports of this machine's services the agent may reach"),
    /* a project naming the resolver would choose who hears the agent's names */
    F("network", "dns", K_ADDRS, dns, true, "the resolvers lyhd asks, through the VPN"),
    /* each name opens what it resolves to (with none, every address is open) */
    F("network", "allow_domains", K_DOMAINS, allow_domains, true,
      "only these names resolve (NAME or *.NAME)"),
    F("paths", "writable", K_PATHS, writable, true, "extra writable paths"),
    F("paths", "read_only", K_PATHS, read_only, true, "extra read-only paths"),
    F("paths", "deny", K_PATHS, paths_deny, false, "paths the agent may not read at all"),
    F("paths", "narrow_home", K_BOOL, narrow_home, false,
      "only the agent state dirs of $HOME are writable"),
    F("paths", "agent_state_dirs", K_NAMES, agent_state_dirs, true,
      "entries of $HOME writable with narrow_home"),
    F("paths", "protect", K_HOMEREL, protect, false, "more entries of $HOME kept read-only"),
    F("paths", "allow_sockets", K_PATHS, allow_sockets, true,
      "sockets of yours the agent may reach although lyh hides them"),
};
#undef F

size_t cfg_keys(struct cfg_key_info *out, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < ARRAY_SIZE(fields) && n < max; i++, n++) {
        const struct field *f = &fields[i];
        out[n] = (struct cfg_key_info){
            .section = f->section,
            .name = f->name,
            .desc = f->desc,
            .type = f->kind == K_BOOL ? CFG_KEY_BOOL
                    : f->kind == K_STR || f->kind == K_PROXY || f->kind == K_DEFAULT
                        ? CFG_KEY_STRING
                        : CFG_KEY_LIST,
            .global_only = strcmp(f->section, "defaults") == 0,
        };
    }
    return n;
}

/* Whether a bool value widens the sandbox. */
static bool bool_widens(const struct field *f, bool v) {
    if (strcmp(f->name, "firewall") == 0 || strcmp(f->name, "narrow_home") == 0)
        return !v;
    return v; /* shared_user_firewall, allow_non_default_route */
}

struct apply {
    const struct cfg_ctx *ctx;
    struct cfg *c;
    const char *path; /* the file */
    const char *dir;  /* its directory */
    bool project;
    bool trusted;     /* apply widenings */
    struct cfg_error *err;
};

static char *origin_of(const struct apply *a, struct toml_pos pos) {
    char *o = NULL;
    return asprintf(&o, "%s:%u", a->path, pos.line) < 0 ? NULL : o;
}

static int type_err(const struct apply *a, const char *key, const struct toml_value *v,
                    const char *want) {
    return seterr(a->err, -EINVAL, "%s:%u:%u: %s: expected %s, got %s", a->path, v->pos.line,
                  v->pos.column, key, want, toml_type_name(v->type));
}

/* A widening of an untrusted project: remember the key, apply nothing. */
static int ignore(struct apply *a, const char *key, struct toml_pos pos) {
    _cleanup_free_ char *o = origin_of(a, pos);
    return o ? list_add(&a->c->ignored, key, o, false) : -ENOMEM;
}

/* A string with no NUL bytes (C strings go on from here). */
static bool plain_string(const struct toml_value *v) {
    return v->type == TOML_STRING && strlen(v->u.string.ptr) == v->u.string.len;
}

static int apply_list_item(struct apply *a, const struct field *f, const char *key,
                           const struct toml_value *it, size_t idx, struct cfg_list *dst) {
    _cleanup_free_ char *o = origin_of(a, it->pos), *val = NULL;
    const char *s = it->u.string.ptr;

    if (!o)
        return -ENOMEM;
    switch (f->kind) {
    case K_RULES: {
        struct dr_rule r;
        char why[DR_WHY_MAX], canon[DR_FORMAT_MAX];
        if (dr_parse(s, &r, why, sizeof(why)) < 0)
            return seterr(a->err, -EINVAL, "%s:%u:%u: %s[%zu]: %s%s%s%s", a->path,
                          it->pos.line, it->pos.column, key, idx, strstr(why, s) ? "" : "'",
                          strstr(why, s) ? "" : s, strstr(why, s) ? "" : "': ", why);
        if (strcmp(f->name, "lan_allow") == 0 && !dr_in_blocked_ranges(&r))
            return seterr(a->err, -EINVAL,
                          "%s:%u:%u: %s[%zu]: '%s' is not inside a LAN or reserved range",
                          a->path, it->pos.line, it->pos.column, key, idx, s);
        if (dr_format(&r, canon, sizeof(canon)) < 0)
            return -EINVAL;
        return list_add(dst, canon, o, false);
    }
    case K_PATHS:
        if (!s[0])
            return seterr(a->err, -EINVAL, "%s:%u:%u: %s[%zu]: empty path", a->path,
                          it->pos.line, it->pos.column, key, idx);
        val = resolve_path(s, a->dir, a->ctx->home);
        if (!val)
            return -ENOMEM;
        if (strlen(val) >= 1024)
            return seterr(a->err, -EINVAL, "%s:%u:%u: %s[%zu]: path too long", a->path,
                          it->pos.line, it->pos.column, key, idx);
        return list_add(dst, val, o, false);
    case K_PORTS: {
        char why[128], canon[16];
        if (cfg_host_port_parse(s, NULL, NULL, canon, why, sizeof(why)) < 0)
            return seterr(a->err, -EINVAL, "%s:%u:%u: %s[%zu]: '%s': %s", a->path, it->pos.line,
                          it->pos.column, key, idx, s, why);
        return list_add(dst, canon, o, false);
    }
    case K_HOMEREL: {
        char why[200], canon[HE_NAME_MAX];
        if (he_check(s, canon, why, sizeof(why)) < 0)
            return seterr(a->err, -EINVAL, "%s:%u:%u: %s[%zu]: '%s' %s", a->path, it->pos.line,
                          it->pos.column, key, idx, s, why);
        return list_add(dst, canon, o, false);
    }
    case K_ADDRS: {
        char canon[DNS_ADDR_TEXT_MAX];
        uint8_t addr[16];
        int fam;
        if (dns_addr_parse(s, &fam, addr, canon) < 0)
            return seterr(a->err, -EINVAL,
                          "%s:%u:%u: %s[%zu]: '%s' is not a resolver's address (an IPv4 or IPv6 "
                          "address, not loopback, link-local or multicast)",
                          a->path, it->pos.line, it->pos.column, key, idx, s);
        return list_add(dst, canon, o, false);
    }
    case K_DOMAINS: {
        char canon[DNS_PATTERN_MAX], why[160];
        if (dn_pattern_check(s, canon, why, sizeof(why)) < 0)
            return seterr(a->err, -EINVAL, "%s:%u:%u: %s[%zu]: '%s': %s", a->path, it->pos.line,
                          it->pos.column, key, idx, s, why);
        return list_add(dst, canon, o, false);
    }
    case K_NAMES:
        if (!s[0] || strchr(s, '/') || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 ||
            strlen(s) >= 64)
            return seterr(a->err, -EINVAL,
                          "%s:%u:%u: %s[%zu]: '%s' must be one name under your home (no '/', "
                          "under 64 bytes)",
                          a->path, it->pos.line, it->pos.column, key, idx, s);
        return list_add(dst, s, o, false);
    case K_CMD:
        if (!s[0] && idx == 0)
            return seterr(a->err, -EINVAL, "%s:%u:%u: %s[0]: empty command", a->path,
                          it->pos.line, it->pos.column, key);
        /* argv keeps duplicates: append without dedup. */
        return list_append(dst, s, o);
    default:
        return -EINVAL;
    }
}

static int apply_field(struct apply *a, const struct field *f, const struct toml_value *v) {
    char key[64];
    void *dst = (char *)a->c + f->off;

    snprintf(key, sizeof(key), "%s.%s", f->section, f->name);
    switch (f->kind) {
    case K_STR: {
        if (!plain_string(v))
            return type_err(a, key, v, "a string");
        if (!v->u.string.ptr[0] || v->u.string.len >= 16)
            return seterr(a->err, -EINVAL, "%s:%u:%u: %s: an interface name of 1-15 bytes",
                          a->path, v->pos.line, v->pos.column, key);
        if (a->project && !a->trusted)
            return ignore(a, key, v->pos);
        _cleanup_free_ char *o = origin_of(a, v->pos);
        return o ? item_set(dst, v->u.string.ptr, o) : -ENOMEM;
    }
    case K_PROXY: {
        struct proxy_url px;
        char why[PROXY_WHY_MAX];
        if (!plain_string(v))
            return type_err(a, key, v, "a string");
        if (proxy_url_parse(v->u.string.ptr, &px, why, sizeof(why)) < 0)
            return seterr(a->err, -EINVAL, "%s:%u:%u: %s: %s", a->path, v->pos.line,
                          v->pos.column, key, why);
        if (a->project && !a->trusted)
            return ignore(a, key, v->pos);
        _cleanup_free_ char *o = origin_of(a, v->pos);
        return o ? item_set(dst, v->u.string.ptr, o) : -ENOMEM;
    }
    case K_DEFAULT: {
        if (!plain_string(v))
            return type_err(a, key, v, "a string");
        const char *s = v->u.string.ptr;
        if (strcmp(s, "allow") != 0 && strcmp(s, "deny") != 0)
            return seterr(a->err, -EINVAL, "%s:%u:%u: %s: expected \"allow\" or \"deny\", got \"%s\"",
                          a->path, v->pos.line, v->pos.column, key, s);
        if (a->project && !a->trusted && strcmp(s, "allow") == 0)
            return ignore(a, key, v->pos);
        _cleanup_free_ char *o = origin_of(a, v->pos);
        return o ? item_set(dst, s, o) : -ENOMEM;
    }
    case K_BOOL: {
        if (v->type != TOML_BOOL)
            return type_err(a, key, v, "a bool");
        if (a->project && !a->trusted && bool_widens(f, v->u.boolean))
            return ignore(a, key, v->pos);
        _cleanup_free_ char *o = origin_of(a, v->pos);
        return o ? bool_set(dst, v->u.boolean, o) : -ENOMEM;
    }
    default:
        break;
    }
    /* Lists of strings. */
    if (v->type != TOML_ARRAY)
        return type_err(a, key, v, "an array of strings");
    size_t n = toml_array_len(v);
    for (size_t i = 0; i < n; i++) {
        const struct toml_value *it = toml_array_at(v, i);
        if (!plain_string(it)) {
            char ik[96];
            snprintf(ik, sizeof(ik), "%s[%zu]", key, i);
            return type_err(a, ik, it, "a string");
        }
    }
    if (f->kind == K_CMD && n == 0)
        return seterr(a->err, -EINVAL, "%s:%u:%u: %s: empty command", a->path, v->pos.line,
                      v->pos.column, key);
    /* Validate every item even when the list will be ignored: an error is an
     * error whether or not the file is trusted. */
    struct cfg_list scratch = {0};
    struct cfg_list *target = dst;
    bool ignored = a->project && !a->trusted && f->widens && n > 0;
    if (ignored || f->kind == K_CMD)
        target = &scratch;
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i++)
        r = apply_list_item(a, f, key, toml_array_at(v, i), i, target);
    if (r == 0 && f->kind == K_CMD && !ignored) {
        /* The command is replaced as a whole. */
        list_clear(dst);
        *(struct cfg_list *)dst = scratch;
        scratch = (struct cfg_list){0};
    }
    list_clear(&scratch);
    if (r == 0 && ignored)
        r = ignore(a, key, v->pos);
    return r;
}

static bool env_name_ok(const char *s, size_t len) {
    if (len == 0 || len > 128 || strlen(s) != len || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (!(ch == '_' || (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
              (ch >= '0' && ch <= '9')))
            return false;
    }
    return true;
}

static int apply_env(struct apply *a, const struct toml_value *sec) {
    for (size_t i = 0; i < toml_table_len(sec); i++) {
        const struct toml_key *k;
        const struct toml_value *v = toml_table_at(sec, i, &k);
        char key[160];
        snprintf(key, sizeof(key), "env.%.*s", (int)(k->len > 140 ? 140 : k->len), k->name);
        if (!env_name_ok(k->name, k->len))
            return seterr(a->err, -EINVAL,
                          "%s:%u:%u: %s: not a variable name (letters, digits, '_')", a->path,
                          k->pos.line, k->pos.column, key);
        if (!plain_string(v))
            return type_err(a, key, v, "a string");
        if (a->project && !a->trusted) {
            int r = ignore(a, key, k->pos);
            if (r < 0)
                return r;
            continue;
        }
        _cleanup_free_ char *o = origin_of(a, k->pos), *nv = NULL;
        if (!o || asprintf(&nv, "%s=%s", k->name, v->u.string.ptr) < 0)
            return -ENOMEM;
        int r = list_add(&a->c->env, nv, o, true);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Check doc against the schema and apply it to a->c. */
static int apply_doc(struct apply *a, const struct toml_doc *doc) {
    const struct toml_value *root = toml_root(doc);

    for (size_t i = 0; i < toml_table_len(root); i++) {
        const struct toml_key *sk;
        const struct toml_value *sec = toml_table_at(root, i, &sk);
        const char *name = sk->name;
        int r;
        if (strcmp(name, "defaults") != 0 && strcmp(name, "env") != 0 &&
            strcmp(name, "network") != 0 && strcmp(name, "paths") != 0)
            return seterr(a->err, -EINVAL,
                          "%s:%u:%u: %s: unknown key (sections: defaults, env, network, paths)",
                          a->path, sk->pos.line, sk->pos.column, name);
        if (sec->type != TOML_TABLE)
            return type_err(a, name, sec, "a table");
        if (a->project && strcmp(name, "defaults") == 0)
            return seterr(a->err, -EINVAL,
                          "%s:%u:%u: defaults: the [defaults] section is only allowed in the "
                          "global config file",
                          a->path, sec->pos.line, sec->pos.column);
        if (strcmp(name, "env") == 0) {
            if ((r = apply_env(a, sec)) < 0)
                return r;
            continue;
        }
        for (size_t j = 0; j < toml_table_len(sec); j++) {
            const struct toml_key *k;
            const struct toml_value *v = toml_table_at(sec, j, &k);
            const struct field *f = NULL;
            for (size_t x = 0; x < ARRAY_SIZE(fields); x++)
                if (strcmp(fields[x].section, name) == 0 && strcmp(fields[x].name, k->name) == 0)
                    f = &fields[x];
            if (!f)
                return seterr(a->err, -EINVAL, "%s:%u:%u: %s.%s: unknown key", a->path,
                              k->pos.line, k->pos.column, name, k->name);
            if ((r = apply_field(a, f, v)) < 0)
                return r;
        }
    }
    return 0;
}

/* ---- the trust file ------------------------------------------------------------------------ */

/* trusted.toml:  [approved]  "/abs/dir" = "<sha256 hex>"  */
static int trust_read(const char *trust_path, struct toml_doc **ret, struct cfg_error *err) {
    struct cfg_ctx quiet = {0};
    _cleanup_free_ char *buf = NULL;
    struct toml_doc *doc = NULL;
    size_t len;
    int r = read_file(&quiet, trust_path, &buf, &len, err);

    if (r < 0)
        return r;
    if ((r = parse_file(trust_path, buf, len, &doc, err)) < 0)
        return r;
    const struct toml_value *root = toml_root(doc);
    for (size_t i = 0; i < toml_table_len(root); i++) {
        const struct toml_key *k;
        const struct toml_value *v = toml_table_at(root, i, &k);
        if (strcmp(k->name, "approved") != 0 || v->type != TOML_TABLE) {
            toml_free(doc);
            return seterr(err, -EINVAL, "%s:%u:%u: %s: unknown key (only [approved])", trust_path,
                          k->pos.line, k->pos.column, k->name);
        }
        for (size_t j = 0; j < toml_table_len(v); j++) {
            const struct toml_key *dk;
            const struct toml_value *h = toml_table_at(v, j, &dk);
            if (h->type != TOML_STRING || h->u.string.len != CFG_SHA256_HEX - 1) {
                toml_free(doc);
                return seterr(err, -EINVAL, "%s:%u:%u: approved.\"%s\": expected a SHA-256 hex string",
                              trust_path, h->pos.line, h->pos.column, dk->name);
            }
        }
    }
    *ret = doc;
    return 0;
}

int cfg_trust_get(const char *trust_path, const char *dir, char **ret, struct cfg_error *err) {
    struct toml_doc *doc = NULL;
    int r = trust_read(trust_path, &doc, err);

    if (r < 0)
        return r;
    const struct toml_value *h = toml_table_get(toml_table_get(toml_root(doc), "approved"), dir);
    char *s = h ? strdup(h->u.string.ptr) : NULL;
    toml_free(doc);
    if (!h)
        return -ENOENT;
    if (!s)
        return -ENOMEM;
    *ret = s;
    return 0;
}

/* A TOML basic string. */
static void toml_quote(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

static int mkdir_p(const char *path) {
    _cleanup_free_ char *p = strdup(path);

    if (!p)
        return -ENOMEM;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0700) < 0 && errno != EEXIST)
            return -errno;
        *s = '/';
    }
    if (mkdir(p, 0700) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Write path atomically: a 0600 temp file in the same directory, fsync,
 * rename over. */
static int write_atomic(const char *path, const char *data, size_t len) {
    _cleanup_free_ char *tmp = NULL, *dir = strdup(path);
    char *slash = dir ? strrchr(dir, '/') : NULL;
    int r;

    if (!dir)
        return -ENOMEM;
    if (slash && slash != dir) {
        *slash = '\0';
        if ((r = mkdir_p(dir)) < 0)
            return r;
    }
    if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
        return -ENOMEM;
    _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return -errno;
    r = 0;
    if (fchmod(fd, 0600) < 0)
        r = -errno;
    for (size_t off = 0; r == 0 && off < len;) {
        ssize_t k = write(fd, data + off, len - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            r = -errno;
        else
            off += (size_t)k;
    }
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (r == 0 && rename(tmp, path) < 0)
        r = -errno;
    if (r < 0)
        unlink(tmp);
    return r;
}

int cfg_trust_set(const char *trust_path, const char *dir, const char *sha256_hex,
                  struct cfg_error *err) {
    struct toml_doc *doc = NULL;
    _cleanup_free_ char *out = NULL;
    size_t outlen = 0;
    bool found = false;
    int r = trust_read(trust_path, &doc, err);

    if (r < 0 && r != -ENOENT)
        return r;
    FILE *f = open_memstream(&out, &outlen);
    if (!f) {
        toml_free(doc);
        return -ENOMEM;
    }
    fputs("# Written by `lyh config trust`: project directories whose .lianyaohu.toml may\n"
          "# widen the sandbox, with the SHA-256 of the approved file. Any edit of the\n"
          "# file makes its approval stale.\n[approved]\n",
          f);
    const struct toml_value *ap = doc ? toml_table_get(toml_root(doc), "approved") : NULL;
    for (size_t i = 0; i < toml_table_len(ap); i++) {
        const struct toml_key *k;
        const struct toml_value *h = toml_table_at(ap, i, &k);
        if (strcmp(k->name, dir) == 0) {
            found = true;
            continue;
        }
        toml_quote(f, k->name);
        fputs(" = ", f);
        toml_quote(f, h->u.string.ptr);
        fputc('\n', f);
    }
    toml_free(doc);
    if (sha256_hex) {
        toml_quote(f, dir);
        fputs(" = ", f);
        toml_quote(f, sha256_hex);
        fputc('\n', f);
    }
    if (fclose(f) != 0)
        return -ENOMEM;
    if (!sha256_hex && !found)
        return seterr(err, -ENOENT, "%s: no approval for %s", trust_path, dir);
    if ((r = write_atomic(trust_path, out, outlen)) < 0)
        return seterr(err, r, "%s: cannot write: %s", trust_path, strerror(-r));
    return 0;
}

/* ---- [defaults] vpn_interface, written by the picker ------------------------------------------ */

/* The table a header line opens ("defaults" for "  [ defaults ] # x"), into
 * name; false when line is no header. Quoted or dotted headers come back as
 * written: they never equal "defaults", and the parse of the result catches
 * a table the edit missed. */
static bool header_name(const char *line, size_t len, char *name, size_t namelen) {
    size_t i = 0, j;
    while (i < len && (line[i] == ' ' || line[i] == '\t'))
        i++;
    if (i >= len || line[i] != '[')
        return false;
    while (i < len && (line[i] == '[' || line[i] == ' ' || line[i] == '\t'))
        i++;
    for (j = i; j < len && line[j] != ']'; j++)
        ;
    while (j > i && (line[j - 1] == ' ' || line[j - 1] == '\t'))
        j--;
    snprintf(name, namelen, "%.*s", (int)(j - i), line + i);
    return true;
}

static bool is_key_line(const char *line, size_t len, const char *key) {
    size_t i = 0, kl = strlen(key);
    while (i < len && (line[i] == ' ' || line[i] == '\t'))
        i++;
    if (len - i < kl || memcmp(line + i, key, kl) != 0)
        return false;
    for (i += kl; i < len && (line[i] == ' ' || line[i] == '\t'); i++)
        ;
    return i < len && line[i] == '=';
}

static int builtins(struct cfg *c);
static char *dir_of(const char *path);
static bool same_table_except(const struct toml_value *a, const struct toml_value *b,
                              const char *skip_sec, const char *skip_key);

/* Are a and b the same value (strings, booleans, integers, arrays of them)? */
static bool same_value(const struct toml_value *a, const struct toml_value *b) {
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case TOML_STRING:
        return a->u.string.len == b->u.string.len &&
               memcmp(a->u.string.ptr, b->u.string.ptr, a->u.string.len) == 0;
    case TOML_BOOL: return a->u.boolean == b->u.boolean;
    case TOML_INTEGER: return a->u.integer == b->u.integer;
    case TOML_FLOAT: return memcmp(&a->u.floating, &b->u.floating, sizeof(double)) == 0;
    case TOML_ARRAY:
        if (toml_array_len(a) != toml_array_len(b))
            return false;
        for (size_t i = 0; i < toml_array_len(a); i++)
            if (!same_value(toml_array_at(a, i), toml_array_at(b, i)))
                return false;
        return true;
    case TOML_TABLE:
        return same_table_except(a, b, NULL, NULL);
    default: return false;
    }
}

/* Tables a and b hold the same keys with the same values, but for
 * skip_sec.skip_key (at the top level; NULLs: nothing skipped). */
static bool same_table_except(const struct toml_value *a, const struct toml_value *b,
                              const char *skip_sec, const char *skip_key) {
    for (int pass = 0; pass < 2; pass++) {
        const struct toml_value *x = pass ? b : a, *y = pass ? a : b;
        for (size_t i = 0; i < toml_table_len(x); i++) {
            const struct toml_key *k;
            const struct toml_value *v = toml_table_at(x, i, &k);
            const struct toml_value *w = toml_table_get(y, k->name);
            if (skip_sec && strcmp(k->name, skip_sec) == 0) {
                /* the section itself may appear or stay; its other keys may not change */
                if (v->type != TOML_TABLE || (w && w->type != TOML_TABLE))
                    return false;
                if (w && !same_table_except(v, w, NULL, skip_key))
                    return false;
                if (!w)
                    for (size_t j = 0; j < toml_table_len(v); j++) {
                        const struct toml_key *kk;
                        (void)toml_table_at(v, j, &kk);
                        if (strcmp(kk->name, skip_key) != 0)
                            return false;
                    }
                continue;
            }
            if (!skip_sec && skip_key && strcmp(k->name, skip_key) == 0)
                continue;
            if (!w || !same_value(v, w))
                return false;
        }
    }
    return true;
}

static bool bare_key_ok(const char *k) {
    size_t n = strlen(k);
    return n > 0 && n < 64 &&
           strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

int cfg_edit_set(const char *in, size_t len, const char *section, const char *key,
                 const char *value_toml, char **ret_out, struct cfg_error *err) {
    if (!bare_key_ok(section) || !bare_key_ok(key))
        return seterr(err, -EINVAL, "'%s.%s' is not a key lyh can write", section, key);
    if (value_toml && strpbrk(value_toml, "\n\r"))
        return seterr(err, -EINVAL, "%s.%s: a value on one line only", section, key);
    if (memchr(in, '\0', len))
        return seterr(err, -EINVAL, "the file has a NUL byte; edit it by hand");

    /* the file as it is: everything but the key must read back the same */
    _cleanup_(toml_freep) struct toml_doc *before = NULL;
    struct toml_error berr;
    if (toml_parse(in, len, CFG_MAX_FILE, &before, &berr) < 0)
        return seterr(err, -EINVAL, "the file is not valid TOML now; edit it by hand");
    /* what the value must read back as */
    _cleanup_(toml_freep) struct toml_doc *want_doc = NULL;
    _cleanup_free_ char *snippet = NULL;
    struct toml_error terr;
    const struct toml_value *want = NULL;
    if (value_toml) {
        if (asprintf(&snippet, "v = %s\n", value_toml) < 0)
            return -ENOMEM;
        if (toml_parse(snippet, strlen(snippet), CFG_MAX_FILE, &want_doc, &terr) < 0 ||
            !(want = toml_table_get(toml_root(want_doc), "v")))
            return seterr(err, -EINVAL, "%s.%s: %s is not a TOML value", section, key, value_toml);
    }

    _cleanup_free_ char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream(&out, &outlen);
    if (!f)
        return -ENOMEM;
    char cur[64] = "";
    bool done = !value_toml;
    for (size_t off = 0; off < len;) {
        const char *line = in + off, *nl = memchr(line, '\n', len - off);
        size_t ll = nl ? (size_t)(nl - line) : len - off;
        off += ll + (nl != NULL);
        if (header_name(line, ll, cur, sizeof(cur))) {
            fwrite(line, 1, ll, f);
            fputc('\n', f);
            if (!done && strcmp(cur, section) == 0) {
                fprintf(f, "%s = %s\n", key, value_toml);
                done = true;
            }
            continue;
        }
        /* the key's old line: the new one stands in its place */
        if (strcmp(cur, section) == 0 && is_key_line(line, ll, key))
            continue;
        fwrite(line, 1, ll, f);
        if (nl)
            fputc('\n', f);
    }
    if (!done)
        fprintf(f, "%s[%s]\n%s = %s\n", len == 0 ? "" : in[len - 1] == '\n' ? "\n" : "\n\n",
                section, key, value_toml);
    if (fclose(f) != 0)
        return -ENOMEM;

    /* The loader must read what the edit meant (a multi-line value or a
     * dotted key the line view did not see would not). */
    _cleanup_(toml_freep) struct toml_doc *doc = NULL;
    const struct toml_value *sec = NULL, *v = NULL;
    bool parsed = toml_parse(out, outlen, CFG_MAX_FILE, &doc, &terr) == 0;
    if (parsed)
        sec = toml_table_get(toml_root(doc), section);
    if (sec && sec->type == TOML_TABLE)
        v = toml_table_get(sec, key);
    if (!parsed || (value_toml ? !v || !same_value(v, want) : v != NULL) ||
        !same_table_except(toml_root(before), toml_root(doc), section, key)) {
        if (value_toml)
            return seterr(err, -EINVAL, "cannot set %s in it safely; edit it by hand: %s = %s "
                                        "under [%s]", key, key, value_toml, section);
        return seterr(err, -EINVAL, "cannot remove %s from it safely; edit it by hand", key);
    }
    *ret_out = TAKE_PTR(out);
    return 0;
}

int cfg_edit_default_vpn(const char *in, size_t len, const char *iface, char **ret_out,
                         struct cfg_error *err) {
    size_t il = strlen(iface);
    if (il == 0 || il >= 16 || strspn(iface, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                             "0123456789._@+-") != il)
        return seterr(err, -EINVAL, "'%s' cannot be saved as an interface name", iface);
    char value[24];
    snprintf(value, sizeof(value), "\"%s\"", iface);
    return cfg_edit_set(in, len, "defaults", "vpn_interface", value, ret_out, err);
}

char *cfg_toml_string(const char *s) {
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    if (!f)
        return NULL;
    toml_quote(f, s);
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* Apply a file's text to a scratch configuration, as the loader would;
 * trusted: every key applied (so every check runs), else a project file's
 * widenings are only listed, into widens (when not NULL). */
static int apply_text(const struct cfg_ctx *ctx, const char *path, const char *buf, size_t len,
                      bool project, bool trusted, char *widens, size_t wlen,
                      struct cfg_error *err) {
    _cleanup_free_ char *dir = dir_of(path);
    struct toml_doc *doc = NULL;
    int r;

    if (!dir)
        return -ENOMEM;
    if (len > CFG_MAX_FILE)
        return seterr(err, -EFBIG, "%s: larger than %u bytes", path, CFG_MAX_FILE);
    if ((r = parse_file(path, buf, len, &doc, err)) < 0)
        return r;
    struct cfg *scratch = calloc(1, sizeof(*scratch));
    if (!scratch) {
        toml_free(doc);
        return -ENOMEM;
    }
    struct apply a = {.ctx = ctx, .c = scratch, .path = path, .dir = dir, .project = project,
                      .trusted = trusted, .err = err};
    r = builtins(scratch);
    if (r == 0)
        r = apply_doc(&a, doc);
    if (r == 0 && widens)
        cfg_ignored_keys(scratch, widens, wlen);
    cfg_free(scratch);
    toml_free(doc);
    return r;
}

int cfg_check_text(const struct cfg_ctx *ctx, const char *path, const char *buf, size_t len,
                   bool project, struct cfg_error *err) {
    return apply_text(ctx, path, buf, len, project, true, NULL, 0, err);
}

int cfg_text_widenings(const struct cfg_ctx *ctx, const char *path, const char *buf, size_t len,
                       char *out, size_t outlen, struct cfg_error *err) {
    return apply_text(ctx, path, buf, len, true, false, out, outlen, err);
}

int cfg_value_text(const struct cfg *c, const char *section, const char *name, char *buf,
                   size_t len, const char **ret_origin) {
    const struct field *f = NULL;
    for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
        if (strcmp(fields[i].section, section) == 0 && strcmp(fields[i].name, name) == 0)
            f = &fields[i];
    if (!f || len == 0)
        return -ENOENT;
    const char *base = (const char *)c + f->off;
    buf[0] = '\0';
    *ret_origin = "built-in";
    switch (f->kind) {
    case K_BOOL: {
        const struct cfg_bool *b = (const struct cfg_bool *)base;
        snprintf(buf, len, "%s", b->value ? "true" : "false");
        if (b->origin)
            *ret_origin = b->origin;
        break;
    }
    case K_STR:
    case K_PROXY:
    case K_DEFAULT: {
        const struct cfg_item *it = (const struct cfg_item *)base;
        snprintf(buf, len, "%s", it->value ? it->value : "");
        *ret_origin = it->value && it->origin ? it->origin : "unset";
        break;
    }
    default: {
        const struct cfg_list *l = (const struct cfg_list *)base;
        size_t at = 0;
        for (size_t i = 0; i < l->n && at + 1 < len; i++) {
            int w = snprintf(buf + at, len - at, "%s%s", i ? ", " : "", l->v[i].value);
            at = w < 0 ? at : at + (size_t)w >= len ? len - 1 : at + (size_t)w;
        }
        *ret_origin = l->n ? l->v[0].origin : "empty";
        break;
    }
    }
    return 0;
}

int cfg_write_file(const char *path, const char *buf, size_t len, struct cfg_error *err) {
    struct stat st;
    int r;

    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
        return seterr(err, -ELOOP, "%s is a symbolic link; lyh does not replace it", path);
    if ((r = write_atomic(path, buf, len)) < 0)
        return seterr(err, r, "%s: cannot write: %s", path, strerror(-r));
    return 0;
}

int cfg_read_file(const char *path, char **ret, size_t *ret_len, struct cfg_error *err) {
    struct cfg_ctx quiet = {0};
    return read_file(&quiet, path, ret, ret_len, err);
}

int cfg_save_default_vpn(const char *path, const char *iface, struct cfg_error *err) {
    _cleanup_free_ char *buf = NULL, *out = NULL;
    size_t len = 0;
    struct stat st;
    int r;

    if (lstat(path, &st) == 0) {
        if (S_ISLNK(st.st_mode))
            return seterr(err, -ELOOP, "%s is a symbolic link; lyh does not replace it: add "
                                       "vpn_interface = \"%s\" under [defaults] by hand", path, iface);
        struct cfg_ctx quiet = {0};
        r = read_file(&quiet, path, &buf, &len, err);
        if (r < 0)
            return r;
    } else if (errno != ENOENT) {
        return seterr(err, -errno, "%s: cannot stat: %s", path, strerror(errno));
    }
    r = cfg_edit_default_vpn(buf ? buf : "", len, iface, &out, err);
    if (r < 0) {
        char why[CFG_ERR_MAX];
        snprintf(why, sizeof(why), "%s", err->msg);
        return seterr(err, r, "%s: %s", path, why);
    }
    if ((r = write_atomic(path, out, strlen(out))) < 0)
        return seterr(err, r, "%s: cannot write: %s", path, strerror(-r));
    return 0;
}

/* ---- the merge ------------------------------------------------------------------------------- */

static int builtins(struct cfg *c) {
    static const char b[] = "built-in";
    int r = 0;

    r = r ?: bool_set(&c->firewall, true, b);
    r = r ?: bool_set(&c->shared_user_firewall, false, b);
    r = r ?: bool_set(&c->allow_non_default_route, false, b);
    r = r ?: bool_set(&c->narrow_home, false, b);
    r = r ?: item_set(&c->network_default, "allow", b);
    r = r ?: list_add(&c->command, "claude", b, false);
    return r;
}

static int apply_cli_rules(const struct cfg_strv *sv, const char *opt, struct cfg_list *dst,
                           struct cfg_error *err) {
    static const char o[] = "command line";

    for (size_t i = 0; i < sv->n; i++) {
        struct dr_rule r;
        char why[DR_WHY_MAX], canon[DR_FORMAT_MAX];
        if (dr_parse(sv->v[i], &r, why, sizeof(why)) < 0)
            return seterr(err, -EINVAL, "%s %s: %s", opt, sv->v[i], why);
        if (strcmp(opt, "--lan-allow") == 0 && !dr_in_blocked_ranges(&r))
            return seterr(err, -EINVAL,
                          "--lan-allow %s is not inside a LAN or reserved range; only those are "
                          "blocked, so there is nothing to reopen",
                          sv->v[i]);
        if (dr_format(&r, canon, sizeof(canon)) < 0)
            return -EINVAL;
        int k = list_add(dst, canon, o, false);
        if (k < 0)
            return k;
    }
    return 0;
}

static int apply_cli(struct cfg *c, const struct cfg_cli *cli, struct cfg_error *err) {
    static const char o[] = "command line";
    int r = 0;

    if (cli->vpn)
        r = r ?: item_set(&c->vpn_interface, cli->vpn, o);
    if (cli->firewall >= 0)
        r = r ?: bool_set(&c->firewall, cli->firewall, o);
    if (cli->shared_user_firewall >= 0)
        r = r ?: bool_set(&c->shared_user_firewall, cli->shared_user_firewall, o);
    if (cli->allow_non_default_route >= 0)
        r = r ?: bool_set(&c->allow_non_default_route, cli->allow_non_default_route, o);
    if (cli->narrow_home >= 0)
        r = r ?: bool_set(&c->narrow_home, cli->narrow_home, o);
    if (cli->default_deny)
        r = r ?: item_set(&c->network_default, "deny", o);
    if (r == 0 && cli->command.n > 0) {
        list_clear(&c->command);
        for (size_t i = 0; i < cli->command.n && r == 0; i++)
            r = list_append(&c->command, cli->command.v[i], o);
    }
    for (size_t i = 0; i < cli->env.n && r == 0; i++)
        r = list_add(&c->env, cli->env.v[i], o, true);
    r = r ?: apply_cli_rules(&cli->allow, "--allow-dest", &c->allow, err);
    r = r ?: apply_cli_rules(&cli->deny, "--deny-dest", &c->deny, err);
    r = r ?: apply_cli_rules(&cli->lan_allow, "--lan-allow", &c->lan_allow, err);
    for (size_t i = 0; i < cli->host_ports.n && r == 0; i++) {
        char why[128], canon[16];
        if (cfg_host_port_parse(cli->host_ports.v[i], NULL, NULL, canon, why, sizeof(why)) < 0)
            r = seterr(err, -EINVAL, "--allow-host-port %s: %s", cli->host_ports.v[i], why);
        else
            r = list_add(&c->host_ports, canon, o, false);
    }
    for (size_t i = 0; i < cli->dns.n && r == 0; i++) {
        char canon[DNS_ADDR_TEXT_MAX];
        uint8_t addr[16];
        int fam;
        if (dns_addr_parse(cli->dns.v[i], &fam, addr, canon) < 0)
            r = seterr(err, -EINVAL,
                       "--dns %s: not a resolver's address (an IPv4 or IPv6 address, not "
                       "loopback, link-local or multicast)",
                       cli->dns.v[i]);
        else
            r = list_add(&c->dns, canon, o, false);
    }
    for (size_t i = 0; i < cli->allow_domains.n && r == 0; i++) {
        char canon[DNS_PATTERN_MAX], why[160];
        if (dn_pattern_check(cli->allow_domains.v[i], canon, why, sizeof(why)) < 0)
            r = seterr(err, -EINVAL, "--allow-domain %s: %s", cli->allow_domains.v[i], why);
        else
            r = list_add(&c->allow_domains, canon, o, false);
    }
    for (size_t i = 0; i < cli->writable.n && r == 0; i++)
        r = list_add(&c->writable, cli->writable.v[i], o, false);
    for (size_t i = 0; i < cli->read_only.n && r == 0; i++)
        r = list_add(&c->read_only, cli->read_only.v[i], o, false);
    for (size_t i = 0; i < cli->allow_sockets.n && r == 0; i++) {
        _cleanup_free_ char *v = strdup(cli->allow_sockets.v[i]);
        if (!v)
            return -ENOMEM;
        normalize(v); /* one spelling: lyhd compares paths as strings */
        r = list_add(&c->allow_sockets, v, o, false);
    }
    return r;
}

static char *dir_of(const char *path) {
    char *d = strdup(path);
    char *slash = d ? strrchr(d, '/') : NULL;

    if (slash == d && d)
        d[1] = '\0';
    else if (slash)
        *slash = '\0';
    return d;
}

/* Read, parse and apply one file. For a project file, decides trust first. */
static int load_file(const struct cfg_ctx *ctx, const struct cfg_cli *cli, struct cfg *c,
                     const char *path, bool project, struct cfg_error *err) {
    _cleanup_free_ char *buf = NULL, *dir = dir_of(path);
    struct toml_doc *doc = NULL;
    size_t len;
    int r;

    if (!dir)
        return -ENOMEM;
    r = read_file(ctx, path, &buf, &len, err);
    if (r < 0)
        return r;
    r = parse_file(path, buf, len, &doc, err);
    if (r < 0)
        return r;
    struct apply a = {.ctx = ctx, .c = c, .path = path, .dir = dir, .project = project,
                      .trusted = !project, .err = err};
    if (project) {
        sha256_hex(buf, len, c->project_sha256);
        c->project_dir = strdup(dir);
        if (!c->project_dir) {
            toml_free(doc);
            return -ENOMEM;
        }
        _cleanup_free_ char *approved = NULL;
        struct cfg_error terr;
        int k = cfg_trust_get(c->trust_path, dir, &approved, &terr);
        if (k < 0 && k != -ENOENT) {
            note(ctx, "lyh: warning: ignoring the trust file: %s\n", terr.msg);
        }
        if (cli->trust_project)
            c->trust = CFG_TRUST_ONCE;
        else if (k == 0 && strcmp(approved, c->project_sha256) == 0)
            c->trust = CFG_TRUST_APPROVED;
        else
            c->trust = k == 0 ? CFG_TRUST_STALE : CFG_TRUST_UNTRUSTED;
        a.trusted = c->trust == CFG_TRUST_APPROVED || c->trust == CFG_TRUST_ONCE;
        if (!a.trusted) {
            /* A dry run finds errors and the widenings; ask only when
             * there is something to ask about. */
            struct cfg *dry = calloc(1, sizeof(*dry));
            if (!dry) {
                toml_free(doc);
                return -ENOMEM;
            }
            a.c = dry;
            r = apply_doc(&a, doc);
            a.c = c;
            bool widens = dry->ignored.n > 0;
            /* what it would widen, named before the question */
            char keys[512];
            cfg_ignored_keys(dry, keys, sizeof(keys));
            cfg_free(dry);
            if (r < 0) {
                toml_free(doc);
                return r;
            }
            if (widens && ctx->ask) {
                _cleanup_free_ char *q = NULL;
                if (asprintf(&q, "%s%s widens the sandbox (%s); trust this file? [y/N] ", path,
                             c->trust == CFG_TRUST_STALE ? " changed since it was approved and"
                                                         : "",
                             keys) < 0) {
                    toml_free(doc);
                    return -ENOMEM;
                }
                if (ctx->ask(ctx->ask_data, q)) {
                    k = cfg_trust_set(c->trust_path, dir, c->project_sha256, &terr);
                    if (k < 0)
                        note(ctx, "lyh: warning: approval not saved: %s\n", terr.msg);
                    else
                        c->trust_exists = true;
                    c->trust = CFG_TRUST_APPROVED;
                    a.trusted = true;
                }
            }
        }
    }
    r = apply_doc(&a, doc);
    toml_free(doc);
    if (r == 0 && project && !a.trusted && c->ignored.n > 0 && ctx->note) {
        note(ctx, "lyh: %s is not trusted (%s); ignored:", path,
             c->trust == CFG_TRUST_STALE ? "approval is stale" : "no approval");
        for (size_t i = 0; i < c->ignored.n; i++)
            note(ctx, "%s %s", i ? "," : "", c->ignored.v[i].value);
        note(ctx, "\nlyh: approve it with `lyh config trust %s` (or --trust-project)\n", dir);
    }
    return r;
}

void cfg_ignored_keys(const struct cfg *c, char *buf, size_t len) {
    /* The schema's keys first (a handful: they always fit), then the [env]
     * entries as one count, so a file cannot hide a key such as
     * paths.allow_sockets behind many long variable names. */
    size_t envs = 0;
    buf[0] = '\0';
    for (size_t i = 0; c && i < c->ignored.n; i++) {
        const char *k = c->ignored.v[i].value;
        if (strncmp(k, "env.", 4) == 0) {
            envs++;
            continue;
        }
        size_t used = strlen(buf);
        if (used + strlen(k) + 8 >= len) {
            snprintf(buf + used, len - used, ", ...");
            return;
        }
        snprintf(buf + used, len - used, "%s%s", used ? ", " : "", k);
    }
    size_t used = strlen(buf);
    if (envs)
        snprintf(buf + used, len - used, "%senv (%zu variable%s)", used ? ", " : "", envs,
                 envs == 1 ? "" : "s");
}

int cfg_load(const struct cfg_ctx *ctx, const struct cfg_cli *cli, struct cfg **ret,
             struct cfg_error *err) {
    _cleanup_(cfg_freep) struct cfg *c = calloc(1, sizeof(*c));
    struct stat st;
    int r;

    if (!c)
        return -ENOMEM;
    if ((r = builtins(c)) < 0)
        return r;
    if ((r = cfg_config_dir(ctx, &c->config_dir)) < 0)
        return seterr(err, r, "cannot tell the config directory: neither $HOME nor the home of "
                              "your passwd entry is a directory you own; set HOME to your home "
                              "directory (or XDG_CONFIG_HOME to a directory you own)");
    if (asprintf(&c->trust_path, "%s/trusted.toml", c->config_dir) < 0)
        return -ENOMEM;
    if (cli->config_path)
        c->global_path = strdup(cli->config_path);
    else if (asprintf(&c->global_path, "%s/config.toml", c->config_dir) < 0)
        c->global_path = NULL;
    if (!c->global_path)
        return -ENOMEM;
    c->trust_exists = stat(c->trust_path, &st) == 0;
    if (c->trust_exists && (st.st_mode & (S_IWGRP | S_IWOTH)))
        note(ctx, "lyh: warning: %s is %s-writable; anyone who can write it controls your sandbox\n",
             c->trust_path, st.st_mode & S_IWOTH ? "world" : "group");
    if (!cli->no_config) {
        r = load_file(ctx, cli, c, c->global_path, false, err);
        if (r == -ENOENT && cli->config_path)
            return seterr(err, r, "%s: no such file (--config)", c->global_path);
        if (r < 0 && r != -ENOENT)
            return r;
        c->global_exists = r == 0;
        r = cfg_find_project(ctx, &c->project_path);
        if (r < 0 && r != -ENOENT)
            return r;
        if (r == 0 && (r = load_file(ctx, cli, c, c->project_path, true, err)) < 0)
            return r;
    }
    if ((r = apply_cli(c, cli, err)) < 0)
        return r;
    /* An allow list only means something with a deny default: unless some
     * layer chose the default, the list implies it (as --allow-dest does). */
    if (c->allow.n > 0 && strcmp(c->network_default.origin, "built-in") == 0 &&
        (r = item_set(&c->network_default, "deny", "built-in (implied by network.allow)")) < 0)
        return r;
    *ret = TAKE_PTR(c);
    return 0;
}

/* ---- print-back -------------------------------------------------------------------------------- */

static void origin_comment(FILE *f, bool origin, const char *o) {
    if (origin)
        fprintf(f, "  # %s", o);
    fputc('\n', f);
}

static void show_bool(FILE *f, const char *name, const struct cfg_bool *b, bool origin) {
    fprintf(f, "%s = %s", name, b->value ? "true" : "false");
    origin_comment(f, origin, b->origin);
}

static void show_list(FILE *f, const char *name, const struct cfg_list *l, bool origin) {
    fprintf(f, "%s = [", name);
    if (l->n == 0) {
        fputs("]\n", f);
        return;
    }
    fputc('\n', f);
    for (size_t i = 0; i < l->n; i++) {
        fputs("  ", f);
        toml_quote(f, l->v[i].value);
        fputc(',', f);
        origin_comment(f, origin, l->v[i].origin);
    }
    fputs("]\n", f);
}

static const char *trust_name(enum cfg_trust t) {
    switch (t) {
    case CFG_TRUST_APPROVED: return "trusted";
    case CFG_TRUST_ONCE: return "trusted for this run (--trust-project)";
    case CFG_TRUST_UNTRUSTED: return "not trusted: widenings ignored";
    case CFG_TRUST_STALE: return "not trusted, approval is stale: widenings ignored";
    default: return "";
    }
}

void cfg_show(FILE *f, const struct cfg *c, bool origin) {
    fprintf(f, "# global:  %s%s\n", c->global_path, c->global_exists ? "" : " (absent)");
    if (c->project_path)
        fprintf(f, "# project: %s (%s)\n", c->project_path, trust_name(c->trust));
    else
        fputs("# project: none\n", f);
    for (size_t i = 0; i < c->ignored.n; i++)
        fprintf(f, "# ignored: %s (%s)\n", c->ignored.v[i].value, c->ignored.v[i].origin);

    fputs("\n[defaults]\n", f);
    if (c->vpn_interface.value) {
        fputs("vpn_interface = ", f);
        toml_quote(f, c->vpn_interface.value);
        origin_comment(f, origin, c->vpn_interface.origin);
    } else {
        fputs("# vpn_interface is not set: lyh run picks one\n", f);
    }
    if (c->proxy.value) {
        fputs("proxy = ", f);
        toml_quote(f, c->proxy.value);
        origin_comment(f, origin, c->proxy.origin);
    }
    show_bool(f, "firewall", &c->firewall, origin);
    show_bool(f, "shared_user_firewall", &c->shared_user_firewall, origin);
    show_bool(f, "allow_non_default_route", &c->allow_non_default_route, origin);
    fputs("command = [", f);
    for (size_t i = 0; i < c->command.n; i++) {
        fputs(i ? ", " : "", f);
        toml_quote(f, c->command.v[i].value);
    }
    fputc(']', f);
    origin_comment(f, origin, c->command.n ? c->command.v[0].origin : "built-in");

    fputs("\n[env]\n", f);
    for (size_t i = 0; i < c->env.n; i++) {
        const char *s = c->env.v[i].value, *eq = strchr(s, '=');
        size_t nl = eq ? (size_t)(eq - s) : strlen(s);
        _cleanup_free_ char *name = strndup(s, nl);
        if (!name)
            continue;
        if (env_name_ok(name, nl))
            fputs(name, f);
        else
            toml_quote(f, name);
        fputs(" = ", f);
        toml_quote(f, eq ? eq + 1 : "");
        origin_comment(f, origin, c->env.v[i].origin);
    }

    fputs("\n[network]\ndefault = ", f);
    toml_quote(f, c->network_default.value);
    origin_comment(f, origin, c->network_default.origin);
    show_list(f, "allow", &c->allow, origin);
    show_list(f, "deny", &c->deny, origin);
    show_list(f, "lan_allow", &c->lan_allow, origin);
    show_list(f, "host_ports", &c->host_ports, origin);
    show_list(f, "dns", &c->dns, origin);
    show_list(f, "allow_domains", &c->allow_domains, origin);

    fputs("\n[paths]\n", f);
    show_list(f, "writable", &c->writable, origin);
    show_list(f, "read_only", &c->read_only, origin);
    show_list(f, "deny", &c->paths_deny, origin);
    show_bool(f, "narrow_home", &c->narrow_home, origin);
    show_list(f, "agent_state_dirs", &c->agent_state_dirs, origin);
    show_list(f, "protect", &c->protect, origin);
    show_list(f, "allow_sockets", &c->allow_sockets, origin);
}
