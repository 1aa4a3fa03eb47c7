/* Paths both sandboxes agree on, whatever the kernel mechanism: Landlock on
 * Linux (platform/linux/landlock.c), Seatbelt on macOS
 * (platform/darwin/sbpl_render.c). Plain data, no functions. */
#ifndef LYH_PLATFORM_AGENT_PATHS_H
#define LYH_PLATFORM_AGENT_PATHS_H

#include <stddef.h>

/* What an agent keeps under $HOME in narrow-home mode: Claude Code, Codex,
 * Gemini CLI, and the cache directories their tools write. The only entries
 * of home an agent may write when narrow_home is set (each one optional: a
 * missing entry gets no rule; lyhd makes the launched agent's own). Not
 * ~/.config or ~/.local as a whole: lyh's own config, git's, systemd user
 * units, autostart entries and ~/.local/bin live there. */
#define AGENT_NARROW_HOME_ENTRIES                                                             \
    { ".claude", ".claude.json", ".codex", ".gemini", ".cache", ".npm" }
#define AGENT_NARROW_HOME_COUNT 6u

#endif
