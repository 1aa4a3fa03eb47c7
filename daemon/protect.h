/* Entries of the caller's home that an agent may not write, in any mode: what
 * would run as the user outside the sandbox later (shell start-up files, git
 * and ssh config, systemd user units, ...) or widen the next sandbox (lyh's
 * own config). common/home_entry.h has the built-in list; the policy's
 * protect_paths and the request's protect add to it.
 *
 * Landlock cannot carve a read-only hole into a writable home (its rules only
 * add), so these are mounts in the session's own mount namespace
 * (platform/linux/spawn.c): each entry is covered with a read-only bind
 * mount of itself, and every directory (or symlink) on the way to it below
 * home is pinned with a plain bind mount of itself, which the agent cannot
 * rename or remove (a mount point is busy): otherwise renaming ~/.config
 * away and making a new ~/.config/git/config would get around the cover.
 * A symlinked entry is covered itself (so it cannot be replaced) and so is
 * what it points to. */
#ifndef LYH_DAEMON_PROTECT_H
#define LYH_DAEMON_PROTECT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PROT_MAX 160 /* mounts per launch */

struct prot_mount {
    char *path; /* owned, absolute */
    bool ro;    /* false: a pin (a bind mount of itself, writable as before) */
};

/* In mount order: a pin always precedes what lies below it. */
struct prot_list {
    struct prot_mount v[PROT_MAX];
    size_t n;
};

void prot_list_clear(struct prot_list *l); /* frees the paths; NULL ok */

/* Look up (and where the built-in list says so, create: an empty directory,
 * mode 0700) each entry below home, with the file-system identity of the
 * thread (the caller's, uid: run it between fs_ident_enter and _leave). names
 * are canonical (he_check) extras on top of the built-in list; duplicates are
 * fine. A missing entry is skipped. One lyh cannot look into or create in a
 * directory of uid's (an agent could chmod it and go on) fails the whole
 * launch; one of someone else's is skipped (the agent cannot change it
 * either). The caller-owned directories above a symlink's target are pinned
 * too. 0, or -E2BIG (too many mounts) / -ENOMEM / -EACCES / -errno with a
 * reason in why. */
int prot_collect(const char *home, uid_t uid, const char *const *names, size_t n_names,
                 struct prot_list *out, char *why, size_t whylen);

/* Narrow-home mode: make the state entries of the agent argv0 names (its
 * base name: claude, codex, gemini) when missing, so that its first run can
 * write them: ~/.claude/ and ~/.claude.json (holding "{}"), ~/.codex/,
 * ~/.gemini/. Other commands: nothing. Run as the caller. 0 or -errno with
 * a reason in why. */
int prot_agent_state(const char *home, const char *argv0, char *why, size_t whylen);

/* Is path (absolute, canonical) at or below a read-only entry of l? */
bool prot_covers(const struct prot_list *l, const char *path);

#endif
