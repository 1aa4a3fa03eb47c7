/* The admin policy as data: the built-in default, validation of a Policy
 * message into struct policy, the canonical stored form, and the matching
 * helpers Run and Install use. Owns no kernel object and never narrows a
 * request silently: callers refuse what is over the ceiling.
 *
 * Why validation is strict: a stored policy is security state that every
 * later Run is judged by, so nothing ambiguous may be stored (a pattern that
 * could never match an interface name, a prefix that is not normalised, a
 * destination with host bits set). Everything is checked before the row is
 * written; a stored blob is validated again when it is read back. */
#include <errno.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/dest_rule.h"
#include "common/env_policy.h"
#include "common/macros.h"
#include "common/vpn_names.h"
#include "daemon/guard_spec.h"
#include "daemon/lyhd.h"
#include "daemon/policy.h"
#include "daemon/dests.h"

#include "common/dns_addr.h"
#include "common/dns_name.h"
#include "storage/store.h"

static int bad(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t whylen, const char *fmt, ...) {
    va_list ap;
    if (why && whylen) {
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

void policy_default(struct policy *p) {
    memset(p, 0, sizeof(*p));
    /* The common VPN clients' interface names (common/vpn_names.h). */
    for (size_t i = 0; i < LYH_VPN_NAME_DEFAULTS; i++)
        snprintf(p->if_patterns[i], sizeof(p->if_patterns[i]), "%s", lyh_vpn_name_defaults[i]);
    p->n_if_patterns = LYH_VPN_NAME_DEFAULTS;
    /* Today's behaviour: each is the user's own choice and none widens what
     * the agent can reach beyond what the user can reach themselves. */
    p->permit_non_default_route = true;
    p->permit_no_firewall = true;
    p->permit_shared_user_firewall = true;
    /* Any LAN exception inside the blocked ranges, as before. */
    for (size_t i = 0; i < DR_BLOCKED_V4_COUNT; i++)
        p->lan_ceiling[p->n_lan_ceiling++] = dr_blocked_v4[i];
    for (size_t i = 0; i < DR_BLOCKED_V6_COUNT; i++)
        p->lan_ceiling[p->n_lan_ceiling++] = dr_blocked_v6[i];
    p->log_allowed_flows = true;
    p->max_sessions_per_uid = POLICY_DEFAULT_SESSIONS;
}

bool policy_socket_ok(const struct policy *p, const char *path, char *why, size_t whylen) {
    if (p->forbid_allow_socket) {
        snprintf(why, whylen, "policy: letting sockets through is forbidden (forbid_allow_socket)");
        return false;
    }
    if (p->n_socket_patterns == 0)
        return true;
    for (size_t i = 0; i < p->n_socket_patterns; i++)
        if (fnmatch(p->socket_patterns[i], path, FNM_PATHNAME) == 0)
            return true;
    snprintf(why, whylen, "policy: socket %.300s matches none of allow_socket_patterns (%zu %s)",
             path, p->n_socket_patterns, p->n_socket_patterns == 1 ? "entry" : "entries");
    return false;
}

unsigned policy_min_landlock_abi(const struct policy *p) {
    return p->min_landlock_abi ? p->min_landlock_abi : POLICY_DEFAULT_MIN_LANDLOCK_ABI;
}

/* ---- validation ---------------------------------------------------------------- */

static bool pattern_char_ok(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

static int check_pattern(const char *s, size_t i, char *why, size_t whylen) {
    size_t n = strlen(s);
    if (n == 0 || n > POLICY_PATTERN_MAX)
        return bad(why, whylen, "allowed_interface_patterns[%zu]: must be 1..%d characters", i,
                   POLICY_PATTERN_MAX);
    for (size_t k = 0; k < n; k++) {
        if (s[k] == '*' && k == n - 1)
            continue;
        if (!pattern_char_ok(s[k]))
            return bad(why, whylen,
                       "allowed_interface_patterns[%zu]: '%.*s' may hold only [A-Za-z0-9_.-] and "
                       "one trailing '*'",
                       i, (int)POLICY_PATTERN_MAX, s);
    }
    return 0;
}

/* Absolute, normalised (no empty, "." or ".." component, no trailing '/'),
 * not "/" and not at or below /proc, /sys or /dev. */
static int check_prefix(const char *s, size_t i, char *why, size_t whylen) {
    static const char *const refused[] = {"/proc", "/sys", "/dev"};
    size_t n = strlen(s);

    if (n == 0 || s[0] != '/')
        return bad(why, whylen, "writable_prefixes[%zu]: '%s' is not an absolute path", i, s);
    if (n > POLICY_PREFIX_MAX)
        return bad(why, whylen, "writable_prefixes[%zu]: longer than %d bytes", i,
                   POLICY_PREFIX_MAX);
    if (n == 1)
        return bad(why, whylen, "writable_prefixes[%zu]: '/' would allow every path", i);
    for (size_t k = 0; k < n; k++)
        if ((unsigned char)s[k] < 0x20 || s[k] == 0x7f)
            return bad(why, whylen, "writable_prefixes[%zu]: has a control character", i);
    if (s[n - 1] == '/')
        return bad(why, whylen, "writable_prefixes[%zu]: '%s' is not normalised (trailing '/')", i,
                   s);
    for (const char *c = s; *c;) {
        const char *e = strchr(c + 1, '/');
        size_t len = e ? (size_t)(e - c - 1) : strlen(c + 1);
        if (len == 0 || (len == 1 && c[1] == '.') || (len == 2 && c[1] == '.' && c[2] == '.'))
            return bad(why, whylen,
                       "writable_prefixes[%zu]: '%s' is not normalised (empty, '.' or '..' "
                       "component)",
                       i, s);
        c = e ? e : c + 1 + len;
    }
    for (size_t k = 0; k < ARRAY_SIZE(refused); k++) {
        size_t rl = strlen(refused[k]);
        if (strncmp(s, refused[k], rl) == 0 && (s[rl] == '\0' || s[rl] == '/'))
            return bad(why, whylen, "writable_prefixes[%zu]: '%s' is at or below %s", i, s,
                       refused[k]);
    }
    return 0;
}

int policy_from_msg(const Lianyaohu__V1__Policy *m, struct policy *ret, char *why, size_t whylen) {
    _cleanup_free_ struct policy *p = calloc(1, sizeof(*p));
    int r;

    if (!p)
        return -ENOMEM;
    if (!m)
        return bad(why, whylen, "policy: missing");
    if (m->n_allowed_interface_patterns == 0)
        return bad(why, whylen,
                   "allowed_interface_patterns: at least one pattern (e.g. \"tun*\"); with none "
                   "no guarded session could start");
    if (m->n_allowed_interface_patterns > POLICY_MAX_PATTERNS)
        return bad(why, whylen, "allowed_interface_patterns: %zu entries (at most %d)",
                   m->n_allowed_interface_patterns, POLICY_MAX_PATTERNS);
    for (size_t i = 0; i < m->n_allowed_interface_patterns; i++) {
        r = check_pattern(m->allowed_interface_patterns[i], i, why, whylen);
        if (r < 0)
            return r;
        snprintf(p->if_patterns[i], sizeof(p->if_patterns[i]), "%s", m->allowed_interface_patterns[i]);
    }
    p->n_if_patterns = m->n_allowed_interface_patterns;
    p->permit_non_default_route = m->permit_allow_non_default_route;
    p->permit_no_firewall = m->permit_no_firewall;
    p->permit_shared_user_firewall = m->permit_shared_user_firewall;
    p->forbid_proxy_only = m->forbid_proxy_only;
    p->permit_lan_proxy = m->permit_lan_proxy;
    r = dests_from_msg("lan_allow_ceiling", m->lan_allow_ceiling, m->n_lan_allow_ceiling,
                    POLICY_MAX_CEILING, true, p->lan_ceiling, why, whylen);
    if (r < 0)
        return r == -ENOMEM ? r : -EINVAL; /* too many (-E2BIG) is invalid too */
    p->n_lan_ceiling = m->n_lan_allow_ceiling;
    r = dests_from_msg("always_deny", m->always_deny, m->n_always_deny, POLICY_MAX_ALWAYS_DENY, false,
                    p->always_deny, why, whylen);
    if (r < 0)
        return r == -ENOMEM ? r : -EINVAL;
    p->n_always_deny = m->n_always_deny;
    if (m->n_extra_env_block > POLICY_MAX_ENV)
        return bad(why, whylen, "extra_env_block: %zu entries (at most %d)", m->n_extra_env_block,
                   POLICY_MAX_ENV);
    for (size_t i = 0; i < m->n_extra_env_block; i++) {
        char ewhy[ENVP_WHY_MAX];
        const char *e = m->extra_env_block[i];
        if (strlen(e) > POLICY_ENV_NAME_MAX)
            return bad(why, whylen, "extra_env_block[%zu]: longer than %d characters", i,
                       POLICY_ENV_NAME_MAX);
        if (envp_check_block_pattern(e, ewhy, sizeof(ewhy)) < 0)
            return bad(why, whylen, "extra_env_block[%zu]: %s", i, ewhy);
        snprintf(p->env_block[i], sizeof(p->env_block[i]), "%s", e);
    }
    p->n_env_block = m->n_extra_env_block;
    if (m->n_writable_prefixes > POLICY_MAX_WRITABLE)
        return bad(why, whylen, "writable_prefixes: %zu entries (at most %d)",
                   m->n_writable_prefixes, POLICY_MAX_WRITABLE);
    for (size_t i = 0; i < m->n_writable_prefixes; i++) {
        r = check_prefix(m->writable_prefixes[i], i, why, whylen);
        if (r < 0)
            return r;
        snprintf(p->writable[i], sizeof(p->writable[i]), "%s", m->writable_prefixes[i]);
    }
    p->n_writable = m->n_writable_prefixes;
    if (m->n_protect_paths > POLICY_MAX_PROTECT)
        return bad(why, whylen, "protect_paths: %zu entries (at most %d)", m->n_protect_paths,
                   POLICY_MAX_PROTECT);
    for (size_t i = 0; i < m->n_protect_paths; i++) {
        char pwhy[200];
        if (he_check(m->protect_paths[i], p->protect[i], pwhy, sizeof(pwhy)) < 0)
            return bad(why, whylen, "protect_paths[%zu]: '%.200s' %s", i, m->protect_paths[i],
                       pwhy);
    }
    p->n_protect = m->n_protect_paths;
    p->forbid_allow_socket = m->forbid_allow_socket;
    if (m->n_allow_socket_patterns > POLICY_MAX_SOCKET_PATTERNS)
        return bad(why, whylen, "allow_socket_patterns: %zu entries (at most %d)",
                   m->n_allow_socket_patterns, POLICY_MAX_SOCKET_PATTERNS);
    for (size_t i = 0; i < m->n_allow_socket_patterns; i++) {
        const char *pat = m->allow_socket_patterns[i];
        size_t n = strlen(pat);
        if (n == 0 || n > POLICY_SOCKET_PATTERN_MAX || (pat[0] != '/' && pat[0] != '*'))
            return bad(why, whylen,
                       "allow_socket_patterns[%zu]: an absolute path pattern (\"/run/user/*/"
                       "pipewire-0\"), at most %d bytes",
                       i, POLICY_SOCKET_PATTERN_MAX);
        for (size_t k = 0; k < n; k++)
            if ((unsigned char)pat[k] < 0x20 || pat[k] == 0x7f)
                return bad(why, whylen, "allow_socket_patterns[%zu]: has a control character", i);
        snprintf(p->socket_patterns[i], sizeof(p->socket_patterns[i]), "%s", pat);
    }
    p->n_socket_patterns = m->n_allow_socket_patterns;
    struct {
        const char *key;
        char *const *v;
        size_t n;
        char (*out)[POLICY_DOMAIN_MAX + 1];
        size_t *ret_n;
    } dl[] = {
        {"allowed_domains", m->allowed_domains, m->n_allowed_domains, p->domain_ceiling,
         &p->n_domain_ceiling},
        {"always_deny_domains", m->always_deny_domains, m->n_always_deny_domains, p->deny_domains,
         &p->n_deny_domains},
    };
    for (size_t l = 0; l < ARRAY_SIZE(dl); l++) {
        if (dl[l].n > POLICY_MAX_DOMAINS)
            return bad(why, whylen, "%s: %zu entries (at most %d)", dl[l].key, dl[l].n,
                       POLICY_MAX_DOMAINS);
        for (size_t i = 0; i < dl[l].n; i++) {
            char canon[DNS_PATTERN_MAX], dwhy[160];
            if (dn_pattern_check(dl[l].v[i], canon, dwhy, sizeof(dwhy)) < 0)
                return bad(why, whylen, "%s[%zu]: '%.130s': %s", dl[l].key, i, dl[l].v[i], dwhy);
            size_t clen = strlen(canon);
            if (clen > POLICY_DOMAIN_MAX)
                return bad(why, whylen, "%s[%zu]: longer than %d characters", dl[l].key, i,
                           POLICY_DOMAIN_MAX);
            memcpy(dl[l].out[i], canon, clen + 1);
        }
        *dl[l].ret_n = dl[l].n;
    }
    if (m->n_dns_resolvers > POLICY_MAX_RESOLVERS)
        return bad(why, whylen, "dns_resolvers: %zu entries (at most %d)", m->n_dns_resolvers,
                   POLICY_MAX_RESOLVERS);
    for (size_t i = 0; i < m->n_dns_resolvers; i++) {
        struct dr_rule *rd = &p->resolvers[i];
        memset(rd, 0, sizeof(*rd));
        if (dns_addr_parse(m->dns_resolvers[i], &rd->family, rd->addr, p->resolver_text[i]) < 0)
            return bad(why, whylen,
                       "dns_resolvers[%zu]: '%.60s' is not a resolver's address (an IPv4 or IPv6 "
                       "address, not loopback, link-local or multicast)",
                       i, m->dns_resolvers[i]);
        rd->prefix_len = rd->family == AF_INET ? 32 : 128;
    }
    p->n_resolvers = m->n_dns_resolvers;
    p->log_allowed_flows = m->log_allowed_flows;
    if (m->max_sessions_per_uid > POLICY_MAX_SESSIONS)
        return bad(why, whylen, "max_sessions_per_uid: %u is above %u (0 = no limit)",
                   m->max_sessions_per_uid, POLICY_MAX_SESSIONS);
    p->max_sessions_per_uid = m->max_sessions_per_uid;
    if (m->audit_retention_days > POLICY_MAX_RETENTION_DAYS)
        return bad(why, whylen, "audit_retention_days: %u is above %u (0 = lyhd's flag)",
                   m->audit_retention_days, POLICY_MAX_RETENTION_DAYS);
    p->audit_retention_days = m->audit_retention_days;
    if (m->audit_max_bytes != 0 &&
        (m->audit_max_bytes < POLICY_MIN_AUDIT_BYTES || m->audit_max_bytes > POLICY_MAX_AUDIT_BYTES))
        return bad(why, whylen,
                   "audit_max_bytes: %llu is outside 1 MiB..1 TiB (0 = lyhd's flag)",
                   (unsigned long long)m->audit_max_bytes);
    p->audit_max_bytes = m->audit_max_bytes;
    if (m->min_landlock_abi > POLICY_MAX_LANDLOCK_ABI)
        return bad(why, whylen, "min_landlock_abi: %u is above %u (0 = the built-in %u)",
                   m->min_landlock_abi, POLICY_MAX_LANDLOCK_ABI, POLICY_DEFAULT_MIN_LANDLOCK_ABI);
    p->min_landlock_abi = m->min_landlock_abi;
    memcpy(ret, p, sizeof(*p));
    return 0;
}

/* ---- the message form ------------------------------------------------------------- */

static void msg_dest(const struct dr_rule *d, Lianyaohu__V1__DestRule *out) {
    lianyaohu__v1__dest_rule__init(out);
    out->addr.data = (uint8_t *)d->addr;
    out->addr.len = d->family == AF_INET ? 4 : 16;
    out->prefix_len = d->prefix_len;
    out->port_min = d->port_min;
    out->port_max = d->port_max;
}

void policy_to_msg(const struct policy *p, struct policy_msg *h) {
    size_t k = 0;

    memset(h, 0, sizeof(*h));
    lianyaohu__v1__policy__init(&h->m);
    for (size_t i = 0; i < p->n_if_patterns; i++)
        h->pat[i] = (char *)p->if_patterns[i];
    h->m.n_allowed_interface_patterns = p->n_if_patterns;
    h->m.allowed_interface_patterns = h->pat;
    h->m.permit_allow_non_default_route = p->permit_non_default_route;
    h->m.permit_no_firewall = p->permit_no_firewall;
    h->m.permit_shared_user_firewall = p->permit_shared_user_firewall;
    h->m.forbid_proxy_only = p->forbid_proxy_only;
    h->m.permit_lan_proxy = p->permit_lan_proxy;
    for (size_t i = 0; i < p->n_lan_ceiling; i++) {
        msg_dest(&p->lan_ceiling[i], &h->dr[k]);
        h->ceil[i] = &h->dr[k++];
    }
    h->m.n_lan_allow_ceiling = p->n_lan_ceiling;
    h->m.lan_allow_ceiling = h->ceil;
    for (size_t i = 0; i < p->n_always_deny; i++) {
        msg_dest(&p->always_deny[i], &h->dr[k]);
        h->deny[i] = &h->dr[k++];
    }
    h->m.n_always_deny = p->n_always_deny;
    h->m.always_deny = h->deny;
    for (size_t i = 0; i < p->n_env_block; i++)
        h->env[i] = (char *)p->env_block[i];
    h->m.n_extra_env_block = p->n_env_block;
    h->m.extra_env_block = h->env;
    for (size_t i = 0; i < p->n_writable; i++)
        h->wr[i] = (char *)p->writable[i];
    h->m.n_writable_prefixes = p->n_writable;
    h->m.writable_prefixes = h->wr;
    for (size_t i = 0; i < p->n_protect; i++)
        h->prot[i] = (char *)p->protect[i];
    h->m.n_protect_paths = p->n_protect;
    h->m.protect_paths = h->prot;
    h->m.forbid_allow_socket = p->forbid_allow_socket;
    for (size_t i = 0; i < p->n_socket_patterns; i++)
        h->sockpat[i] = (char *)p->socket_patterns[i];
    h->m.n_allow_socket_patterns = p->n_socket_patterns;
    h->m.allow_socket_patterns = h->sockpat;
    for (size_t i = 0; i < p->n_domain_ceiling; i++)
        h->dceil[i] = (char *)p->domain_ceiling[i];
    h->m.n_allowed_domains = p->n_domain_ceiling;
    h->m.allowed_domains = h->dceil;
    for (size_t i = 0; i < p->n_deny_domains; i++)
        h->ddeny[i] = (char *)p->deny_domains[i];
    h->m.n_always_deny_domains = p->n_deny_domains;
    h->m.always_deny_domains = h->ddeny;
    for (size_t i = 0; i < p->n_resolvers; i++)
        h->res[i] = (char *)p->resolver_text[i];
    h->m.n_dns_resolvers = p->n_resolvers;
    h->m.dns_resolvers = h->res;
    h->m.log_allowed_flows = p->log_allowed_flows;
    h->m.max_sessions_per_uid = p->max_sessions_per_uid;
    h->m.audit_retention_days = p->audit_retention_days;
    h->m.audit_max_bytes = p->audit_max_bytes;
    h->m.min_landlock_abi = p->min_landlock_abi;
}

int policy_pack(const struct policy *p, uint8_t **ret, size_t *ret_len) {
    _cleanup_free_ struct policy_msg *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    policy_to_msg(p, h);
    size_t n = lianyaohu__v1__policy__get_packed_size(&h->m);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return -ENOMEM;
    lianyaohu__v1__policy__pack(&h->m, buf);
    *ret = buf;
    *ret_len = n;
    return 0;
}

int policy_unpack(const uint8_t *blob, size_t len, struct policy *ret, char *why, size_t whylen) {
    Lianyaohu__V1__Policy *m = lianyaohu__v1__policy__unpack(NULL, len, blob);
    int r;

    if (!m) {
        if (why && whylen)
            snprintf(why, whylen, "the stored policy does not decode");
        return -EBADMSG;
    }
    r = policy_from_msg(m, ret, why, whylen);
    lianyaohu__v1__policy__free_unpacked(m, NULL);
    return r;
}

/* ---- matching -------------------------------------------------------------------- */

bool policy_iface_ok(const struct policy *p, const char *iface) {
    for (size_t i = 0; i < p->n_if_patterns; i++) {
        const char *pat = p->if_patterns[i];
        size_t n = strlen(pat);
        if (n > 0 && pat[n - 1] == '*') {
            if (strncmp(iface, pat, n - 1) == 0)
                return true;
        } else if (strcmp(iface, pat) == 0) {
            return true;
        }
    }
    return false;
}

void policy_patterns_text(const struct policy *p, char *buf, size_t len) {
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < p->n_if_patterns && off < len; i++) {
        int k = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", p->if_patterns[i]);
        if (k < 0)
            break;
        off += (size_t)k;
    }
}

static bool bits_equal(const uint8_t *a, const uint8_t *b, unsigned bits) {
    unsigned full = bits / 8, rest = bits % 8;
    if (memcmp(a, b, full) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xffu << (8 - rest));
    return (a[full] & mask) == (b[full] & mask);
}

bool policy_dest_overlap(const struct dr_rule *a, const struct dr_rule *b) {
    if (a->family != b->family)
        return false;
    unsigned bits = a->prefix_len < b->prefix_len ? a->prefix_len : b->prefix_len;
    if (!bits_equal(a->addr, b->addr, bits))
        return false;
    /* No ports = every port (and every protocol). */
    if (a->port_min == 0 || b->port_min == 0)
        return true;
    return a->port_min <= b->port_max && b->port_min <= a->port_max;
}

bool policy_lan_ok(const struct policy *p, const struct dr_rule *d, char *why, size_t whylen) {
    char txt[DR_FORMAT_MAX];
    bool inside = false;

    dr_format(d, txt, sizeof(txt));
    for (size_t i = 0; i < p->n_always_deny; i++)
        if (policy_dest_overlap(d, &p->always_deny[i])) {
            char dt[DR_FORMAT_MAX];
            dr_format(&p->always_deny[i], dt, sizeof(dt));
            snprintf(why, whylen, "policy: LAN exception %s overlaps always_deny %s", txt, dt);
            return false;
        }
    for (size_t i = 0; i < p->n_lan_ceiling && !inside; i++)
        inside = dr_contains(&p->lan_ceiling[i], d);
    if (!inside)
        snprintf(why, whylen, "policy: LAN exception %s is not inside lan_allow_ceiling (%zu %s)",
                 txt, p->n_lan_ceiling, p->n_lan_ceiling == 1 ? "entry" : "entries");
    return inside;
}

static bool dest_eq(const struct dr_rule *a, const struct dr_rule *b) {
    return a->family == b->family && a->prefix_len == b->prefix_len &&
           a->port_min == b->port_min && a->port_max == b->port_max &&
           memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

bool policy_narrow_spec(const struct policy *p, struct gspec *spec, bool *ret_cut, char *why,
                        size_t whylen) {
    size_t keep = 0, dropped = 0, added = 0;
    char pats[400];
    bool cut = false;

    why[0] = '\0';
    if (!spec->iface[0] && p->forbid_proxy_only) {
        snprintf(why, whylen, "policy: proxy-only mode is now forbidden (forbid_proxy_only); "
                              "egress cut, session ended");
        cut = true;
    } else if (spec->iface[0] && !policy_iface_ok(p, spec->iface)) {
        policy_patterns_text(p, pats, sizeof(pats));
        snprintf(why, whylen,
                 "policy: interface '%s' no longer matches allowed_interface_patterns (%s); "
                 "egress cut, session ended",
                 spec->iface, pats);
        cut = true;
    }
    for (size_t i = 0; i < spec->n_lan; i++) {
        char lwhy[POLICY_WHY_MAX];
        /* proxy-only: a LAN address (its proxy) needs permit_lan_proxy */
        if (policy_lan_ok(p, &spec->lan[i], lwhy, sizeof(lwhy)) &&
            (spec->iface[0] || p->permit_lan_proxy || dr_is_loopback(&spec->lan[i])))
            spec->lan[keep++] = spec->lan[i];
        else
            dropped++;
    }
    spec->n_lan = keep;
    for (size_t i = 0; i < p->n_always_deny && !cut; i++) {
        bool have = false;
        for (size_t k = 0; k < spec->n_deny && !have; k++)
            have = dest_eq(&spec->deny[k], &p->always_deny[i]);
        if (have)
            continue;
        if (spec->n_deny >= GSPEC_MAX_DESTS) {
            snprintf(why, whylen,
                     "policy: always_deny does not fit the session's deny rules; egress cut, "
                     "session ended");
            cut = true;
            break;
        }
        spec->deny[spec->n_deny++] = p->always_deny[i];
        added++;
    }
    if (cut) {
        /* Loopback accept, everything else refused: no domain allowlist
         * either (its sets would accept what allowed names resolve to). */
        spec->deny_default = true;
        spec->n_allow = 0;
        spec->n_lan = 0;
        spec->n_domains = 0;
        spec->domains_len = 0;
        memset(spec->domains, 0, sizeof(spec->domains));
    } else if (dropped || added) {
        snprintf(why, whylen,
                 "policy: %zu LAN exception(s) outside lan_allow_ceiling or in always_deny "
                 "removed, %zu always_deny rule(s) added",
                 dropped, added);
    }
    *ret_cut = cut;
    return cut || dropped || added;
}

/* ---- state ------------------------------------------------------------------------ */

int policy_load(struct lyhd *d, char *why, size_t whylen) {
    struct store_policy_version v = {0};
    struct policy *p = calloc(1, sizeof(*p));
    int r;

    if (!p)
        return -ENOMEM;
    r = store_policy_current(d->store, &v);
    if (r == -ENOENT) {
        policy_default(p);
        r = 0;
    } else if (r == 0) {
        char pwhy[POLICY_WHY_MAX];
        r = policy_unpack(v.blob, v.blob_len, p, pwhy, sizeof(pwhy));
        if (r < 0)
            snprintf(why, whylen, "stored policy version %llu is not valid: %s",
                     (unsigned long long)v.version, pwhy);
        p->version = v.version;
        p->set_by_uid = v.set_by_uid;
        p->set_ms = v.set_ms;
    } else {
        snprintf(why, whylen, "state.db: %s", store_errmsg(d->store));
    }
    store_policy_version_free(&v);
    if (r < 0) {
        free(p);
        return r;
    }
    free(d->policy);
    d->policy = p;
    return 0;
}

const struct policy *policy_current(struct lyhd *d) {
    static struct policy fallback;
    static bool have_fallback;

    if (d->policy)
        return d->policy;
    if (!have_fallback) {
        policy_default(&fallback);
        have_fallback = true;
    }
    return &fallback;
}

unsigned policy_audit_max_age_days(const struct lyhd *d) {
    if (d->policy && d->policy->audit_retention_days)
        return d->policy->audit_retention_days;
    return d->cfg.audit_max_age_days;
}

uint64_t policy_audit_max_bytes(const struct lyhd *d) {
    if (d->policy && d->policy->audit_max_bytes)
        return d->policy->audit_max_bytes;
    return (uint64_t)d->cfg.audit_max_mb << 20;
}

bool policy_domain_ok(const struct policy *p, const char *name, bool with_ceiling) {
    for (size_t i = 0; i < p->n_deny_domains; i++)
        if (dn_match(p->deny_domains[i], name))
            return false;
    if (!with_ceiling || p->n_domain_ceiling == 0)
        return true;
    for (size_t i = 0; i < p->n_domain_ceiling; i++)
        if (dn_match(p->domain_ceiling[i], name))
            return true;
    return false;
}

bool policy_domain_pattern_ok(const struct policy *p, const char *pattern) {
    if (p->n_domain_ceiling == 0)
        return true;
    bool wild = strncmp(pattern, "*.", 2) == 0;
    for (size_t i = 0; i < p->n_domain_ceiling; i++) {
        const char *c = p->domain_ceiling[i];
        if (strcmp(c, pattern) == 0)
            return true;
        /* "*.b" holds "x.b" and "*.x.b": every name the pattern matches */
        if (strncmp(c, "*.", 2) == 0 && dn_match(c, wild ? pattern + 2 : pattern))
            return true;
    }
    return false;
}
