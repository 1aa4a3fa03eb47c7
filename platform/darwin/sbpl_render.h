/* sbpl_render: the macOS process sandbox of a session, as a Seatbelt profile.
 *
 * A pure renderer: validated paths in, an SBPL profile (the Scheme dialect
 * sandbox-exec(1) reads) out. No I/O, no globals, no logging; it builds and is
 * golden-tested on Linux (tests/unit/platform/test_sbpl_render.c). The Darwin
 * driver (platform/darwin/sandbox_exec.c) writes it and execs the agent under
 * /usr/bin/sandbox-exec.
 *
 * What the profile grants mirrors the Linux sandbox (DESIGN.md "Sandbox"):
 * deny by default; read/write $HOME (or, narrow-home, only the agent state
 * entries of platform/agent_paths.h), the cwd, the per-launch tmpdir,
 * /opt/homebrew, /private/tmp, /private/var/tmp and the policy's writable
 * paths; read-only system and developer tool paths and the policy's read-only
 * paths; outbound TCP/UDP (PF decides where it may go) and the mDNSResponder
 * socket; bind and inbound on loopback only; a sysctl read allowlist. It denies
 * system (kernel control/event) sockets, socket ioctls, sysctl writes, the
 * time zone and preference files that identify the host (UTC is carved back),
 * exec of setuid/setgid files, and last the user's deny paths.
 *
 * Seatbelt evaluates the rules of a profile so that the last matching rule
 * wins; the renderer relies on that order (see sbpl_render.c).
 *
 * Paths must be canonical as the kernel names them (Seatbelt matches resolved
 * paths: /tmp is /private/tmp on macOS): absolute, no empty, "." or ".."
 * component, no trailing '/', no byte below 0x20 or 0x7f, shorter than
 * SBPLR_PATH_MAX. The Darwin driver gets them from open directory fds
 * (F_GETPATH). Return convention: 0 or -errno; *ret is set only on success. */
#ifndef LYH_PLATFORM_DARWIN_SBPL_RENDER_H
#define LYH_PLATFORM_DARWIN_SBPL_RENDER_H

#include <stdbool.h>
#include <stddef.h>

#define SBPLR_PATH_MAX  1024 /* MAXPATHLEN on Darwin, with the NUL */
#define SBPLR_PATHS_MAX 64   /* entries per list */

struct sbplr_input {
    const char *home;   /* the caller's home */
    const char *cwd;    /* the agent's working directory */
    const char *tmpdir; /* the per-launch tmpdir */
    bool narrow_home;   /* only the agent state entries of home are writable */
    /* Extra names under home made writable (RunRequest.agent_state_dirs): one
     * component each, no '/', not "." or "..". */
    const char *const *state_dirs;
    size_t n_state_dirs;
    const char *const *writable; /* extra read/write subpaths */
    size_t n_writable;
    const char *const *read_only; /* extra read-only subpaths (with map-executable) */
    size_t n_read_only;
    const char *const *deny; /* neither read nor write, whatever granted them */
    size_t n_deny;
};

/* True when path satisfies the rules above. Pure. */
bool sbplr_path_valid(const char *path);

/* Validate `in` and render the profile, '\n'-terminated lines. *ret is newly
 * allocated (free()). -EINVAL when a path or name breaks the rules or a list is
 * longer than SBPLR_PATHS_MAX (nothing rendered), -ENOMEM. */
int sbplr_render(const struct sbplr_input *in, char **ret);

#endif
