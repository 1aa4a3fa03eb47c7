/* sandbox_exec: starts an agent on macOS, as the caller and under a session's
 * Seatbelt profile, by exec'ing /usr/bin/sandbox-exec.
 *
 * Split like platform/linux/spawn.h: the caller renders the profile
 * (sbpl_render.h) and prepares everything before sbx_spawn(); the forked child
 * only makes syscalls, in one ordered pipeline (setsid, controlling tty, stdio,
 * supplementary groups, setgid(guard gid), setuid(caller), a check that the
 * drop cannot be undone, chdir, execve of sandbox-exec). sandbox-exec applies
 * the profile to itself and execs the agent, which inherits it with every
 * descendant. The egid is the guard gid, so the agent's sockets match the PF
 * anchor (`user U group G`).
 *
 * Plain POSIX: on Darwin the real sandbox-exec runs; the Linux unit tests run
 * the same code with a stand-in for sandbox-exec to check the drop, the
 * arguments and the error reporting (tests/unit/platform/test_sandbox_exec.c).
 *
 * Contract: 0 or -errno; ret_* set only on success; nothing logs. A failure in
 * the child is reported through the status pipe, as struct sbx_failure. */
#ifndef LYH_PLATFORM_DARWIN_SANDBOX_EXEC_H
#define LYH_PLATFORM_DARWIN_SANDBOX_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "platform/darwin/sbpl_render.h"

#define SBX_SANDBOX_EXEC "/usr/bin/sandbox-exec"
/* Profiles: root's files, read by sandbox-exec after the drop. The directory
 * is 0711 (no listing) and a file is named by the session's unguessable id. */
#define SBX_PROFILE_DIR  "/var/run/lianyaohu-profiles"
#define SBX_SESSION_ID_MAX 48

/* The kernel's name of what fd designates: F_GETPATH on Darwin (the resolved
 * path Seatbelt matches, /private/tmp for /tmp), /proc/self/fd elsewhere.
 * -ENAMETOOLONG, or -EINVAL when the name is not a path the profile can carry
 * (sbplr_path_valid). */
int sbx_fd_path(int fd, char buf[static SBPLR_PATH_MAX]);

/* Open (creating it 0711 if missing) the profile directory; it must be owned
 * by the effective uid and writable by nobody else (-EPERM). *ret_fd is
 * O_DIRECTORY, CLOEXEC, the caller's. */
int sbx_profile_dir_open(const char *dir, int *ret_fd);

/* Write profile text to <dir>/<session_id>.sb, mode 0644, atomically (a
 * temporary name, fsync, rename). session_id: 1..SBX_SESSION_ID_MAX of
 * [a-z0-9_-]. The full path goes to ret_path. */
int sbx_profile_write(int dir_fd, const char *dir, const char *session_id, const char *profile,
                      char *ret_path, size_t cap);
/* Remove it; -ENOENT when absent. */
int sbx_profile_remove(int dir_fd, const char *session_id);

/* argv for the exec: {sandbox_exec, "-f", profile_path, "--", argv...}, NULL-
 * terminated. *ret is one allocation (free()); its strings are borrowed from
 * the arguments, which must outlive it. */
int sbx_argv(const char *sandbox_exec, const char *profile_path, char *const *argv,
             char ***ret);

enum sbx_step {
    SBX_STEP_NONE = 0,
    SBX_STEP_SETSID,
    SBX_STEP_CTTY,
    SBX_STEP_STDIO,
    SBX_STEP_SETGROUPS,
    SBX_STEP_SETGID,
    SBX_STEP_SETUID,
    SBX_STEP_VERIFY_DROP,
    SBX_STEP_CHDIR,
    SBX_STEP_EXEC,
};

const char *sbx_step_name(enum sbx_step s);

struct sbx_plan {
    char *const *argv; /* from sbx_argv(): argv[0] is sandbox-exec's absolute path */
    char *const *envp;
    int stdio[3];      /* used when pty_fd < 0 */
    int pty_fd;        /* >= 0: pty slave, becomes the controlling tty and stdio */
    uid_t uid;         /* the caller; not 0 */
    gid_t gid;         /* the guard gid: real, effective and saved; not 0 */
    const gid_t *groups; /* the caller's supplementary groups */
    size_t n_groups;
    const char *cwd;   /* entered as the caller, after the drop */
};

struct sbx_failure {
    int step; /* enum sbx_step */
    int err;  /* errno */
};

/* Fork and run the pipeline. *ret_pid and *ret_status_fd (CLOEXEC read end of
 * the status pipe) are the caller's. -EINVAL for a plan that would not drop
 * privileges (uid or gid 0, no argv, relative argv[0] or cwd). */
int sbx_spawn(const struct sbx_plan *p, pid_t *ret_pid, int *ret_status_fd);

/* Read the status pipe (blocking). 1 when a failure record was read (into
 * *ret), 0 on EOF (the exec succeeded), -errno on a read error. */
int sbx_read_status(int status_fd, struct sbx_failure *ret);

#endif
