/* The admin policy file (TOML) to the typed Policy message, and back. Owns no
 * state and does no I/O; it must never accept a key it does not know or a
 * value of the wrong type (a typo in a policy file must not silently leave a
 * ceiling at its default). The daemon validates the message again; what is
 * checked here is what gives a file:line:column message. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "cli/policy_toml.h"
#include "cli/toml.h"
#include "common/dest_rule.h"
#include "common/macros.h"
#include "common/vpn_names.h"

struct ctx {
    const char *name;
    char *err;
    size_t errlen;
};

static int fail(const struct ctx *c, const struct toml_pos *pos, const char *key, int r,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail(const struct ctx *c, const struct toml_pos *pos, const char *key, int r,
                const char *fmt, ...) {
    char what[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s:%u:%u: %s: %s", c->name, pos ? pos->line : 0,
             pos ? pos->column : 0, key, what);
    return r;
}

static void dest_from_rule(const struct dr_rule *r, lianyaohu_v1_DestRule *d) {
    size_t alen = r->family == AF_INET ? 4 : 16;
    memset(d, 0, sizeof(*d));
    memcpy(d->addr.bytes, r->addr, alen);
    d->addr.size = (pb_size_t)alen;
    d->prefix_len = r->prefix_len;
    d->port_min = r->port_min;
    d->port_max = r->port_max;
}

/* The built-in policy (version 0), as docs/admin.md and daemon/policy.c
 * define it: a key the file leaves out keeps this value. */
static void policy_builtin(lianyaohu_v1_Policy *p) {
    memset(p, 0, sizeof(*p));
    for (size_t i = 0; i < LYH_VPN_NAME_DEFAULTS; i++)
        snprintf(p->allowed_interface_patterns[i], sizeof(p->allowed_interface_patterns[i]), "%s",
                 lyh_vpn_name_defaults[i]);
    p->allowed_interface_patterns_count = LYH_VPN_NAME_DEFAULTS;
    p->permit_allow_non_default_route = true;
    p->permit_no_firewall = true;
    p->permit_shared_user_firewall = true;
    for (size_t i = 0; i < DR_BLOCKED_V4_COUNT; i++)
        dest_from_rule(&dr_blocked_v4[i], &p->lan_allow_ceiling[p->lan_allow_ceiling_count++]);
    for (size_t i = 0; i < DR_BLOCKED_V6_COUNT; i++)
        dest_from_rule(&dr_blocked_v6[i], &p->lan_allow_ceiling[p->lan_allow_ceiling_count++]);
    p->log_allowed_flows = true;
    p->max_sessions_per_uid = 64; /* daemon/policy.h POLICY_DEFAULT_SESSIONS */
}

static int want_type(const struct ctx *c, const struct toml_value *v, const char *key,
                     enum toml_type t) {
    if (v->type != t)
        return fail(c, &v->pos, key, -EBADMSG, "expected %s, found %s", toml_type_name(t),
                    toml_type_name(v->type));
    return 0;
}

static int get_bool(const struct ctx *c, const struct toml_value *v, const char *key, bool *out) {
    int r = want_type(c, v, key, TOML_BOOL);
    if (r == 0)
        *out = v->u.boolean;
    return r;
}

static int get_u(const struct ctx *c, const struct toml_value *v, const char *key, uint64_t max,
                 uint64_t *out) {
    int r = want_type(c, v, key, TOML_INTEGER);
    if (r < 0)
        return r;
    if (v->u.integer < 0 || (uint64_t)v->u.integer > max)
        return fail(c, &v->pos, key, -EBADMSG, "%" PRId64 " is out of range (0..%" PRIu64 ")",
                    v->u.integer, max);
    *out = (uint64_t)v->u.integer;
    return 0;
}

/* An array of at most max entries; its length in *ret_n. */
static int want_array(const struct ctx *c, const struct toml_value *v, const char *key,
                      size_t max, size_t *ret_n) {
    int r = want_type(c, v, key, TOML_ARRAY);
    if (r < 0)
        return r;
    size_t n = toml_array_len(v);
    if (n > max)
        return fail(c, &v->pos, key, -E2BIG, "%zu entries (at most %zu)", n, max);
    *ret_n = n;
    return 0;
}

/* An array of strings into a fixed char[count][size] field. */
static int get_strings(const struct ctx *c, const struct toml_value *v, const char *key,
                       char *base, size_t size, size_t max, pb_size_t *count) {
    size_t n = 0;
    int r = want_array(c, v, key, max, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++) {
        const struct toml_value *it = toml_array_at(v, i);
        if ((r = want_type(c, it, key, TOML_STRING)) < 0)
            return r;
        if (it->u.string.len == 0 || it->u.string.len >= size ||
            memchr(it->u.string.ptr, '\0', it->u.string.len))
            return fail(c, &it->pos, key, -EBADMSG,
                        "entry %zu must be 1 to %zu bytes without NUL", i, size - 1);
        memcpy(base + i * size, it->u.string.ptr, it->u.string.len + 1);
    }
    *count = (pb_size_t)n;
    return 0;
}

static int get_dests(const struct ctx *c, const struct toml_value *v, const char *key,
                     lianyaohu_v1_DestRule *arr, size_t max, pb_size_t *count) {
    size_t n = 0;
    int r = want_array(c, v, key, max, &n);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++) {
        const struct toml_value *it = toml_array_at(v, i);
        struct dr_rule rule;
        char why[DR_WHY_MAX];
        if ((r = want_type(c, it, key, TOML_STRING)) < 0)
            return r;
        if (memchr(it->u.string.ptr, '\0', it->u.string.len) ||
            dr_parse(it->u.string.ptr, &rule, why, sizeof(why)) < 0)
            return fail(c, &it->pos, key, -EBADMSG, "'%.80s': %s", it->u.string.ptr,
                        memchr(it->u.string.ptr, '\0', it->u.string.len) ? "contains NUL" : why);
        dest_from_rule(&rule, &arr[i]);
    }
    *count = (pb_size_t)n;
    return 0;
}

int policy_from_toml(const char *name, const char *buf, size_t len, lianyaohu_v1_Policy *ret,
                     char *err, size_t errlen) {
    struct ctx c = {.name = name, .err = err, .errlen = errlen};
    struct toml_error te = {0};
    _cleanup_toml_ struct toml_doc *doc = NULL;
    lianyaohu_v1_Policy p;
    uint64_t u = 0;
    int r;

    r = toml_parse(buf, len, POLICY_FILE_MAX, &doc, &te);
    if (r < 0) {
        if (r == -EFBIG)
            snprintf(err, errlen, "%s: larger than %u KiB; a policy file is small", name,
                     POLICY_FILE_MAX / 1024);
        else
            snprintf(err, errlen, "%s:%u:%u: %s", name, te.line, te.column, te.msg);
        return r;
    }
    policy_builtin(&p);
    const struct toml_value *root = toml_root(doc);
    for (size_t i = 0; i < toml_table_len(root); i++) {
        const struct toml_key *k = NULL;
        const struct toml_value *v = toml_table_at(root, i, &k);
        const char *key = k->name;
        if (memchr(k->name, '\0', k->len))
            return fail(&c, &k->pos, "key", -EBADMSG, "contains NUL");
        /* each key is its field's name: the macros spell it once */
#define KEY(field) (strcmp(key, #field) == 0)
#define BOOL(field) get_bool(&c, v, key, &p.field)
#define DESTS(field) get_dests(&c, v, key, p.field, ARRAY_SIZE(p.field), &p.field##_count)
#define STRINGS(field)                                                                        \
    get_strings(&c, v, key, &p.field[0][0], sizeof(p.field[0]), ARRAY_SIZE(p.field),          \
                &p.field##_count)
        if (KEY(allowed_interface_patterns))
            r = STRINGS(allowed_interface_patterns);
        else if (KEY(permit_allow_non_default_route))
            r = BOOL(permit_allow_non_default_route);
        else if (KEY(permit_no_firewall))
            r = BOOL(permit_no_firewall);
        else if (KEY(permit_shared_user_firewall))
            r = BOOL(permit_shared_user_firewall);
        else if (KEY(forbid_proxy_only))
            r = BOOL(forbid_proxy_only);
        else if (KEY(permit_lan_proxy))
            r = BOOL(permit_lan_proxy);
        else if (KEY(lan_allow_ceiling))
            r = DESTS(lan_allow_ceiling);
        else if (KEY(always_deny))
            r = DESTS(always_deny);
        else if (KEY(extra_env_block))
            r = STRINGS(extra_env_block);
        else if (KEY(writable_prefixes))
            r = STRINGS(writable_prefixes);
        else if (KEY(forbid_allow_socket))
            r = BOOL(forbid_allow_socket);
        else if (KEY(allow_socket_patterns))
            r = STRINGS(allow_socket_patterns);
        else if (KEY(allowed_domains))
            r = STRINGS(allowed_domains);
        else if (KEY(always_deny_domains))
            r = STRINGS(always_deny_domains);
        else if (KEY(dns_resolvers))
            r = STRINGS(dns_resolvers);
        else if (KEY(protect_paths))
            r = STRINGS(protect_paths);
        else if (KEY(log_allowed_flows))
            r = BOOL(log_allowed_flows);
        else if (KEY(max_sessions_per_uid)) {
            if ((r = get_u(&c, v, key, UINT32_MAX, &u)) == 0)
                p.max_sessions_per_uid = (uint32_t)u;
        } else if (KEY(min_landlock_abi)) {
            if ((r = get_u(&c, v, key, 255, &u)) == 0)
                p.min_landlock_abi = (uint32_t)u;
        } else if (KEY(audit_retention_days)) {
            if ((r = get_u(&c, v, key, UINT32_MAX, &u)) == 0)
                p.audit_retention_days = (uint32_t)u;
        } else if (KEY(audit_max_bytes)) {
            if ((r = get_u(&c, v, key, INT64_MAX, &u)) == 0)
                p.audit_max_bytes = u;
        } else
            r = fail(&c, &k->pos, key, -EBADMSG,
                     "unknown key (lianyaohu.toml(5) lists the policy keys)");
#undef STRINGS
#undef DESTS
#undef BOOL
#undef KEY
        if (r < 0)
            return r;
    }
    *ret = p;
    return 0;
}

static void print_strings(FILE *f, const char *key, const char *base, size_t size, pb_size_t n) {
    fprintf(f, "%s = [", key);
    for (pb_size_t i = 0; i < n; i++) {
        fprintf(f, "%s\"", i ? ", " : "");
        /* TOML basic string: escape what must be escaped. */
        for (const char *s = base + i * size; *s; s++) {
            unsigned char ch = (unsigned char)*s;
            if (ch == '"' || ch == '\\')
                fprintf(f, "\\%c", ch);
            else if (ch < 0x20 || ch == 0x7f)
                fprintf(f, "\\u%04x", ch);
            else
                fputc(ch, f);
        }
        fputc('"', f);
    }
    fprintf(f, "]\n");
}

static void print_dests(FILE *f, const char *key, const lianyaohu_v1_DestRule *v, pb_size_t n) {
    fprintf(f, "%s = [", key);
    for (pb_size_t i = 0; i < n; i++) {
        struct dr_rule r;
        char buf[DR_FORMAT_MAX];
        if (dr_from_parts(v[i].addr.bytes, v[i].addr.size, v[i].prefix_len, v[i].port_min,
                          v[i].port_max, &r, NULL, 0) < 0 ||
            dr_format(&r, buf, sizeof(buf)) < 0)
            snprintf(buf, sizeof(buf), "invalid");
        fprintf(f, "%s\"%s\"", i ? ", " : "", buf);
    }
    fprintf(f, "]\n");
}

void policy_print_toml(FILE *f, const lianyaohu_v1_Policy *p) {
#define BOOL(field) fprintf(f, #field " = %s\n", p->field ? "true" : "false")
#define DESTS(field) print_dests(f, #field, p->field, p->field##_count)
#define STRINGS(field) \
    print_strings(f, #field, &p->field[0][0], sizeof(p->field[0]), p->field##_count)
    STRINGS(allowed_interface_patterns);
    BOOL(permit_allow_non_default_route);
    BOOL(permit_no_firewall);
    BOOL(permit_shared_user_firewall);
    BOOL(forbid_proxy_only);
    BOOL(permit_lan_proxy);
    DESTS(lan_allow_ceiling);
    DESTS(always_deny);
    STRINGS(extra_env_block);
    STRINGS(writable_prefixes);
    STRINGS(protect_paths);
    BOOL(forbid_allow_socket);
    STRINGS(allow_socket_patterns);
    STRINGS(allowed_domains);
    STRINGS(always_deny_domains);
    STRINGS(dns_resolvers);
    BOOL(log_allowed_flows);
#undef STRINGS
#undef DESTS
#undef BOOL
    fprintf(f, "max_sessions_per_uid = %" PRIu32 "\n", p->max_sessions_per_uid);
    fprintf(f, "audit_retention_days = %" PRIu32 "\n", p->audit_retention_days);
    fprintf(f, "audit_max_bytes = %" PRIu64 "\n", p->audit_max_bytes);
    fprintf(f, "min_landlock_abi = %" PRIu32 "\n", p->min_landlock_abi);
}
