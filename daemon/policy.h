/* The admin policy: a ceiling on what users may ask of Run and Install, as a
 * typed C struct. The daemon parses no text: a policy arrives as the
 * protobuf Policy message, is validated field by field into struct policy,
 * and is stored as the canonical packed message (re-encoded from the struct).
 *
 * Version 0 is the built-in default (no row in state.db): the behaviour lyhd
 * had before policies existed. Pure except policy_load (state.db).
 * Functions return 0 or -errno; ret_* are set only on success; why names the
 * Policy field that is wrong ("allowed_interface_patterns[2]: ..."). */
#ifndef LYHD_POLICY_H
#define LYHD_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dns_addr.h"
#include "common/home_entry.h"
#include "daemon/wire.h"
#include "platform/linux/nft_render.h"

struct lyhd;

/* Bounds: inside the nanopb client's (proto/lianyaohu.options), so lyh can
 * always decode what lyhd sends. always_deny is kept to half of a session's
 * deny list (GSPEC_MAX_DESTS), the rest stays the user's. */
#define POLICY_MAX_PATTERNS     32
#define POLICY_PATTERN_MAX      15 /* characters, IFNAMSIZ - 1 */
#define POLICY_MAX_CEILING      64
#define POLICY_MAX_ALWAYS_DENY  32
#define POLICY_MAX_ENV          32
#define POLICY_ENV_NAME_MAX     63
#define POLICY_MAX_WRITABLE     16
#define POLICY_MAX_PROTECT      32 /* protect_paths entries (common/home_entry.h grammar) */
#define POLICY_MAX_SOCKET_PATTERNS 16
#define POLICY_SOCKET_PATTERN_MAX  511
#define POLICY_PREFIX_MAX       511
#define POLICY_MAX_DOMAINS      32  /* allowed_domains, always_deny_domains */
#define POLICY_MAX_RESOLVERS    8   /* dns_resolvers */
#define POLICY_DOMAIN_MAX       127 /* characters of a pattern */
#define POLICY_MAX_SESSIONS     4096u
/* Built-in default of max_sessions_per_uid: far above one user's real work,
 * far below what would let one user take lyhd's fds from everyone else. */
#define POLICY_DEFAULT_SESSIONS 64u
/* Landlock ABI 6 (Linux 6.12) scopes abstract Unix sockets and signals. */
#define POLICY_DEFAULT_MIN_LANDLOCK_ABI 6u
#define POLICY_MAX_LANDLOCK_ABI 255u
#define POLICY_MAX_RETENTION_DAYS 36500u
#define POLICY_MIN_AUDIT_BYTES  (1ull << 20)
#define POLICY_MAX_AUDIT_BYTES  (1ull << 40)
#define POLICY_WHY_MAX          512

struct policy {
    uint64_t version;   /* 0: the built-in default */
    uint32_t set_by_uid;
    int64_t set_ms;
    char if_patterns[POLICY_MAX_PATTERNS][POLICY_PATTERN_MAX + 1];
    size_t n_if_patterns;
    bool permit_non_default_route;
    bool permit_no_firewall;
    bool permit_shared_user_firewall;
    bool forbid_proxy_only; /* no session in proxy-only mode (RunRequest.proxy) */
    bool permit_lan_proxy;  /* its proxy may be a LAN address; else loopback only */
    struct dr_rule lan_ceiling[POLICY_MAX_CEILING];
    size_t n_lan_ceiling;
    struct dr_rule always_deny[POLICY_MAX_ALWAYS_DENY];
    size_t n_always_deny;
    char env_block[POLICY_MAX_ENV][POLICY_ENV_NAME_MAX + 1];
    size_t n_env_block;
    char writable[POLICY_MAX_WRITABLE][POLICY_PREFIX_MAX + 1]; /* empty list: no prefix rule */
    size_t n_writable;
    char protect[POLICY_MAX_PROTECT][HE_NAME_MAX]; /* canonical, on top of the built-in list */
    size_t n_protect;
    bool forbid_allow_socket;
    char socket_patterns[POLICY_MAX_SOCKET_PATTERNS][POLICY_SOCKET_PATTERN_MAX + 1]; /* empty: any */
    size_t n_socket_patterns;
    char domain_ceiling[POLICY_MAX_DOMAINS][POLICY_DOMAIN_MAX + 1]; /* canonical; empty: none */
    size_t n_domain_ceiling;
    char deny_domains[POLICY_MAX_DOMAINS][POLICY_DOMAIN_MAX + 1];   /* canonical */
    size_t n_deny_domains;
    struct dr_rule resolvers[POLICY_MAX_RESOLVERS]; /* empty: the system's or the user's */
    char resolver_text[POLICY_MAX_RESOLVERS][DNS_ADDR_TEXT_MAX]; /* canonical */
    size_t n_resolvers;
    bool log_allowed_flows;
    uint32_t max_sessions_per_uid; /* 0: no limit */
    uint32_t min_landlock_abi;     /* 0: POLICY_DEFAULT_MIN_LANDLOCK_ABI */
    uint32_t audit_retention_days; /* 0: lyhd's --audit-max-age-days */
    uint64_t audit_max_bytes;      /* 0: lyhd's --audit-max-mb */
};

/* The built-in default (version 0). */
void policy_default(struct policy *ret);

/* Validate m completely into *ret (version fields zero). -EINVAL with why
 * naming the field. */
int policy_from_msg(const Lianyaohu__V1__Policy *m, struct policy *ret, char *why, size_t whylen);

/* A Policy message that borrows from p (valid while p and the holder live). */
struct policy_msg {
    Lianyaohu__V1__Policy m;
    char *pat[POLICY_MAX_PATTERNS];
    Lianyaohu__V1__DestRule dr[POLICY_MAX_CEILING + POLICY_MAX_ALWAYS_DENY];
    Lianyaohu__V1__DestRule *ceil[POLICY_MAX_CEILING];
    Lianyaohu__V1__DestRule *deny[POLICY_MAX_ALWAYS_DENY];
    char *env[POLICY_MAX_ENV];
    char *wr[POLICY_MAX_WRITABLE];
    char *prot[POLICY_MAX_PROTECT];
    char *sockpat[POLICY_MAX_SOCKET_PATTERNS];
    char *dceil[POLICY_MAX_DOMAINS];
    char *ddeny[POLICY_MAX_DOMAINS];
    char *res[POLICY_MAX_RESOLVERS];
};
void policy_to_msg(const struct policy *p, struct policy_msg *ret);

/* The canonical stored form: p packed as a Policy message. *ret: free(). */
int policy_pack(const struct policy *p, uint8_t **ret, size_t *ret_len);
/* Decode and validate a stored blob. -EBADMSG when it does not decode. */
int policy_unpack(const uint8_t *blob, size_t len, struct policy *ret, char *why, size_t whylen);

/* May a session let the socket at path (absolute) through? why says no. */
bool policy_socket_ok(const struct policy *p, const char *path, char *why, size_t whylen);

/* Does the interface name match one of the patterns? */
bool policy_iface_ok(const struct policy *p, const char *iface);
/* The lowest Landlock ABI Run accepts (min_landlock_abi, or the built-in 6). */
unsigned policy_min_landlock_abi(const struct policy *p);
/* "tun*, wg*, ..." (for messages). */
void policy_patterns_text(const struct policy *p, char *buf, size_t len);
/* Is the LAN exception d allowed: inside one lan_allow_ceiling entry and
 * overlapping no always_deny entry? why says which key refuses it. */
bool policy_lan_ok(const struct policy *p, const struct dr_rule *d, char *why, size_t whylen);
/* Do two destinations share any (address, port)? */
bool policy_dest_overlap(const struct dr_rule *a, const struct dr_rule *b);

/* Narrow a running session's spec to p: LAN exceptions outside the ceiling
 * or overlapping always_deny are dropped, always_deny joins the deny rules.
 * *ret_cut: its interface no longer matches (or the deny list would
 * overflow); then the spec is made reject-all (loopback only) and the
 * session must end. Returns true when the spec changed; why says what. */
struct gspec;
bool policy_narrow_spec(const struct policy *p, struct gspec *spec, bool *ret_cut, char *why,
                        size_t whylen);

/* Load the current version from state.db into d->policy (the default when
 * none is stored). At startup. -EBADMSG when the stored policy is invalid. */
int policy_load(struct lyhd *d, char *why, size_t whylen);

/* The policy in force: d->policy, or the built-in default when none was
 * loaded (test harnesses). Never NULL. */
const struct policy *policy_current(struct lyhd *d);

/* Effective audit retention: the policy's values when non-zero, else lyhd's
 * flags. Age in days (0: none), size in bytes (0: no cap). */
unsigned policy_audit_max_age_days(const struct lyhd *d);
uint64_t policy_audit_max_bytes(const struct lyhd *d);

/* May a session resolve name under p: not in always_deny_domains, and (when
 * the session has an allowlist: with_ceiling) within allowed_domains if it
 * has any. */
bool policy_domain_ok(const struct policy *p, const char *name, bool with_ceiling);
/* Does the ceiling allow the user's pattern (canonical)? true without one. */
bool policy_domain_pattern_ok(const struct policy *p, const char *pattern);

#endif
