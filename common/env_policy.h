/* Environment policy for the sandboxed agent: which inherited variables pass,
 * which names are refused even when asked for with --env, the variables the
 * sandbox forces, and the builder of the final envp array.
 *
 * Pure: no I/O, no logging, no getenv(); every input is an argument. Used by
 * the CLI (advisory: early, friendly errors) and by the daemon (authoritative:
 * it re-runs the same checks on whatever the client sent).
 *
 * Return convention: 0 or -errno. Out-parameters (ret_*) are set only on
 * success; a `why` buffer (may be NULL) receives a one-line message naming the
 * variable only on failure. ENVP_WHY_MAX bytes is always enough. */
#ifndef LYH_ENV_POLICY_H
#define LYH_ENV_POLICY_H

#include <stdbool.h>
#include <stddef.h>

/* Longest variable name, in bytes, without the NUL. */
#define ENVP_NAME_MAX 128u
/* Longest value, in bytes, without the NUL. */
#define ENVP_VALUE_MAX 8192u
/* Most inherited + explicit variables in one result, counted after
 * de-duplication; the forced variables come on top. */
#define ENVP_MAX_VARS 128u
/* Most bytes of "NAME=VALUE\0" strings in one result, forced ones included. */
#define ENVP_TOTAL_MAX (256u * 1024u)
/* HOME, PWD, TMPDIR, TZ, LIANYAOHU_SANDBOX. */
#define ENVP_FORCED_COUNT 5u
/* Enough for any message this module writes. */
#define ENVP_WHY_MAX 256u

/* One explicitly requested variable (`--env NAME=VALUE`, RunRequest.env).
 * Neither pointer is owned. C strings cannot carry NUL: the wire decoder must
 * refuse strings with an embedded NUL rather than hand over a truncated one. */
struct envp_var {
    const char *name;
    const char *value;
};

/* Everything envp_build() needs. No pointer is owned by the struct. */
struct envp_input {
    /* The host environment, "NAME=VALUE" strings, NULL-terminated (environ),
     * or NULL. Entries that are not allowlisted, are blocked, have no '=' or
     * an invalid name are dropped silently: nobody asked for them. */
    char *const *inherited;
    /* Explicitly requested variables; each must pass envp_check_explicit()
     * and the extra block patterns, else envp_build() fails naming it.
     * n_explicit <= ENVP_MAX_VARS. */
    const struct envp_var *explicit_vars;
    size_t n_explicit;
    /* Forced values, absolute paths (start with '/'), required. */
    const char *home;
    const char *pwd;
    const char *tmpdir;
    /* The administrator's extra block patterns (Policy.extra_env_block), each
     * valid per envp_check_block_pattern(), matched case-insensitively
     * against inherited and explicit names; may be NULL when n is 0. */
    const char *const *extra_block;
    size_t n_extra_block;
};

/* True when the name is on the built-in block list (case-insensitive). Does
 * not validate the name. NULL is treated as blocked. */
bool envp_blocked(const char *name);

/* True when the sandbox sets this name itself (HOME, PWD, TMPDIR, TZ,
 * LIANYAOHU_SANDBOX; exact, case-sensitive). envp_build() drops earlier
 * values of these; the CLI can use this to warn that `--env HOME=...` has no
 * effect. */
bool envp_is_forced(const char *name);

/* True when an inherited variable of this name may pass: a valid name, on
 * the allowlist and not blocked. */
bool envp_inherit_ok(const char *name);

/* Check one explicitly requested variable. Allowed unless the name is blocked
 * or invalid, or a length cap is exceeded; the allowlist does not apply.
 *   -EINVAL        NULL argument, empty name, characters outside
 *                  [A-Za-z_][A-Za-z0-9_]*
 *   -ENAMETOOLONG  name longer than ENVP_NAME_MAX
 *   -EPERM         name on the block list
 *   -E2BIG         value longer than ENVP_VALUE_MAX
 * Forced names (envp_is_forced) pass here except TZ, which is blocked; their
 * value is replaced by envp_build(). */
int envp_check_explicit(const char *name, const char *value, char *why, size_t whylen);

/* Validate one administrator block pattern: a name, or a name prefix followed
 * by '*' ("AWS_*"), or "*" alone (block every non-forced variable). -EINVAL
 * otherwise, -ENAMETOOLONG over ENVP_NAME_MAX. */
int envp_check_block_pattern(const char *pattern, char *why, size_t whylen);

/* Build the agent's environment: the inherited variables that pass, then the
 * explicit ones (checked), de-duplicated by exact name with the later value
 * winning at the earlier position, then the forced variables last, in the
 * order HOME, PWD, TMPDIR, TZ=UTC, LIANYAOHU_SANDBOX=1, replacing any earlier
 * value of those names.
 *
 * The CLI passes its environ as `inherited` and --env as explicit; the daemon
 * passes inherited = NULL and RunRequest.env as explicit, so whatever a
 * client sends is checked again against the block list and caps (the
 * allowlist protects the host environment, which only the CLI has).
 *
 * On success *ret_envp is a NULL-terminated array suitable for execve(),
 * made of ONE allocation (pointers and strings): free it with envp_free()
 * only, never an element.
 *   -EINVAL   NULL in/ret_envp, missing or relative forced path, an explicit
 *             var refused as above (the message names the first one)
 *   -EPERM    an explicit var blocked (built-in list or extra pattern)
 *   -E2BIG    more than ENVP_MAX_VARS variables, a value over
 *             ENVP_VALUE_MAX (inherited or explicit), or ENVP_TOTAL_MAX
 *   -ENAMETOOLONG, -ENOMEM */
int envp_build(const struct envp_input *in, char ***ret_envp, char *why, size_t whylen);

/* Free an array from envp_build(). Accepts NULL. */
void envp_free(char **envp);

static inline void envp_freep(char ***p) {
    envp_free(*p);
}

#endif
