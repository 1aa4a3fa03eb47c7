/* libFuzzer: bytes as the admin policy stored in state.db (daemon/policy.c),
 * the blob policy_load validates at every start. Whatever policy_unpack
 * accepts must pack, unpack again and pack to the same bytes: the stored form
 * is the canonical one, so a second trip changes nothing; else abort(). (Not
 * a memcmp of the structs: struct dr_rule has padding. Not the input bytes:
 * unpacking canonicalises domains and resolvers and drops unknown fields.)
 * Then the matching helpers Run and Install use run on the policy. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/guard_spec.h"
#include "daemon/policy.h"

/* A stored policy at its largest (every list full) packs to well under this. */
#define FUZZ_POLICY_MAX 65536

/* buf holds a NUL within len. */
static void terminated(const char *buf, size_t len) {
    if (!memchr(buf, '\0', len))
        abort();
}

/* The helpers, on inputs of the kind lyhd gives them. */
static void use(const struct policy *p) {
    static struct gspec spec;
    char why[POLICY_WHY_MAX], text[400], small[8];
    bool cut;

    policy_patterns_text(p, text, sizeof(text));
    terminated(text, sizeof(text));
    policy_patterns_text(p, small, sizeof(small));
    terminated(small, sizeof(small));
    (void)policy_iface_ok(p, "tun0");
    if (policy_min_landlock_abi(p) == 0 || policy_min_landlock_abi(p) > POLICY_MAX_LANDLOCK_ABI)
        abort();
    why[0] = '\0';
    if (!policy_socket_ok(p, "/run/user/1000/pipewire-0", why, sizeof(why)))
        terminated(why, sizeof(why));
    (void)policy_domain_ok(p, "www.example.com", true);
    (void)policy_domain_ok(p, "www.example.com", false);
    (void)policy_domain_pattern_ok(p, "*.example.com");
    (void)policy_domain_pattern_ok(p, "example.com");

    /* A running session asking for the policy's own ceiling as LAN
     * exceptions, narrowed to the policy. */
    memset(&spec, 0, sizeof(spec));
    memcpy(spec.iface, "tun0", sizeof("tun0"));
    for (size_t i = 0; i < p->n_lan_ceiling && spec.n_lan < GSPEC_MAX_DESTS; i++)
        spec.lan[spec.n_lan++] = p->lan_ceiling[i];
    spec.allow[0] = (struct dr_rule){.family = AF_INET, .addr = {11}, .prefix_len = 8};
    spec.n_allow = 1;
    policy_narrow_spec(p, &spec, &cut, why, sizeof(why));
    terminated(why, sizeof(why));
    if (spec.n_deny > GSPEC_MAX_DESTS || spec.n_lan > GSPEC_MAX_DESTS ||
        (cut && (!spec.deny_default || spec.n_allow || spec.n_lan)))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static struct policy p, again;
    uint8_t *b1 = NULL, *b2 = NULL;
    size_t n1, n2;
    char why[POLICY_WHY_MAX];

    if (size > FUZZ_POLICY_MAX)
        return 0;
    why[0] = '\0';
    if (policy_unpack(data, size, &p, why, sizeof(why)) != 0) {
        terminated(why, sizeof(why));
        return 0;
    }
    if (p.n_if_patterns == 0 || p.n_if_patterns > POLICY_MAX_PATTERNS ||
        p.n_lan_ceiling > POLICY_MAX_CEILING || p.n_always_deny > POLICY_MAX_ALWAYS_DENY ||
        p.n_env_block > POLICY_MAX_ENV || p.n_writable > POLICY_MAX_WRITABLE ||
        p.n_protect > POLICY_MAX_PROTECT || p.n_socket_patterns > POLICY_MAX_SOCKET_PATTERNS ||
        p.n_domain_ceiling > POLICY_MAX_DOMAINS || p.n_deny_domains > POLICY_MAX_DOMAINS ||
        p.n_resolvers > POLICY_MAX_RESOLVERS)
        abort();
    if (policy_pack(&p, &b1, &n1) != 0 || policy_unpack(b1, n1, &again, why, sizeof(why)) != 0 ||
        policy_pack(&again, &b2, &n2) != 0 || n1 != n2 || memcmp(b1, b2, n1) != 0)
        abort();
    use(&p);
    free(b1);
    free(b2);
    return 0;
}
