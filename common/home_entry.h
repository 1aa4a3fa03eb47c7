/* Entries of a user's home named relative to it (".ssh", ".config/git"): the
 * grammar the CLI, the policy file and the daemon share for paths.protect and
 * the policy's protect_paths, and the built-in list of entries that act
 * outside the sandbox.
 *
 * A name is checked, never resolved here: no I/O, no allocation. */
#ifndef LYH_HOME_ENTRY_H
#define LYH_HOME_ENTRY_H

#include <stdbool.h>
#include <stddef.h>

#define HE_NAME_MAX 200 /* canonical name, with the NUL */

/* "NAME" or "~/NAME", NAME one or more '/'-separated components, none empty,
 * "." or "..", printable ASCII without '\\' (a trailing '/' is dropped). 0 with
 * the canonical form (no "~/", no trailing '/') in canon (HE_NAME_MAX bytes),
 * or -EINVAL with a reason in why. */
int he_check(const char *in, char *canon, char *why, size_t whylen);

/* The built-in protected entries: what, written by an agent, would run as the
 * user outside the sandbox later (shell start-up files, git's config, ssh's,
 * systemd user units, autostart and desktop entries, the PATH directories in
 * home, editors' start-up files) or widen the next sandbox (lyh's own config
 * and trust store). `create`: a missing one is made (an empty directory, mode
 * 0700) so that it can be covered too; the others are covered only when they
 * exist (creating an empty ~/.bash_profile would shadow ~/.profile). */
struct he_default {
    const char *name;
    bool create;
};
extern const struct he_default he_protect_defaults[];
extern const size_t he_protect_defaults_count;

#endif
