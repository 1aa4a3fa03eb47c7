/* sandbox_exec: the macOS launch of an agent. Owns the profile files it
 * writes and the forked child until execve. It must never run the agent
 * without the profile (the child execs sandbox-exec or nothing), leave the
 * child a way back to root, or log.
 *
 * Why sandbox-exec and not sandbox_init(3): the profile is our own SBPL, and
 * the only public way to apply custom SBPL is sandbox-exec (sandbox_init
 * takes Apple's named profiles only; the functions that compile SBPL are
 * private). Why a file and not `-p PROFILE`: argv is readable by every user
 * (ps on macOS is setuid root), and the profile names the user's paths.
 *
 * Why the drop is setgid then setuid: Darwin has no setresuid; as root,
 * setgid and setuid set real, effective and saved ids at once. The group
 * list first (it needs root), the uid last (after it nothing else can be
 * changed), then a check that setuid(0) now fails. There is no
 * no_new_privs on Darwin; the profile refuses exec of setuid/setgid files.
 */
#include "platform/darwin/sandbox_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macros.h"
#include "platform/darwin/posix.h"

/* ---- paths ---------------------------------------------------------------------------- */

int sbx_fd_path(int fd, char buf[static SBPLR_PATH_MAX]) {
    char tmp[SBPLR_PATH_MAX + 1];
#ifdef F_GETPATH
    /* Darwin: the vnode's path as the kernel names it (MAXPATHLEN buffer). */
    if (fcntl(fd, F_GETPATH, tmp) < 0)
        return -errno;
    tmp[SBPLR_PATH_MAX] = '\0';
#else
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, tmp, sizeof(tmp));
    if (n < 0)
        return -errno;
    if ((size_t)n >= sizeof(tmp))
        return -ENAMETOOLONG;
    tmp[n] = '\0';
#endif
    if (strlen(tmp) >= SBPLR_PATH_MAX)
        return -ENAMETOOLONG;
    if (!sbplr_path_valid(tmp))
        return -EINVAL; /* e.g. "/x (deleted)" is still valid; control bytes are not */
    memcpy(buf, tmp, strlen(tmp) + 1);
    return 0;
}

/* ---- profile files ------------------------------------------------------------------------ */

static bool session_id_valid(const char *id) {
    size_t n = id ? strlen(id) : 0;
    if (n < 1 || n > SBX_SESSION_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return false;
    }
    return true;
}

int sbx_profile_dir_open(const char *dir, int *ret_fd) {
    if (!dir || dir[0] != '/')
        return -EINVAL;
    /* sandbox-exec reads a profile by name after the drop: only we may be
     * able to change what a name here designates. */
    return px_open_private_dir(dir, 0711, ret_fd, NULL);
}

int sbx_profile_write(int dir_fd, const char *dir, const char *session_id, const char *profile,
                      char *ret_path, size_t cap) {
    char name[SBX_SESSION_ID_MAX + 8], tmp[SBX_SESSION_ID_MAX + 16];
    if (dir_fd < 0 || !dir || !profile || !session_id_valid(session_id))
        return -EINVAL;
    snprintf(name, sizeof(name), "%s.sb", session_id);
    snprintf(tmp, sizeof(tmp), ".%s.sb.tmp", session_id);
    int n = snprintf(ret_path, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap)
        return -ENAMETOOLONG;

    if (unlinkat(dir_fd, tmp, 0) < 0 && errno != ENOENT)
        return -errno;
    _cleanup_close_ int fd =
        openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int r = 0;
    /* the umask must not narrow it: sandbox-exec reads it as the caller */
    if (fchmod(fd, 0644) < 0)
        r = -errno;
    for (const char *s = profile, *end = profile + strlen(profile); r == 0 && s < end;) {
        ssize_t w = write(fd, s, (size_t)(end - s));
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            r = -errno;
        else
            s += w;
    }
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (r == 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
        r = -errno;
    if (r < 0)
        unlinkat(dir_fd, tmp, 0);
    return r;
}

int sbx_profile_remove(int dir_fd, const char *session_id) {
    char name[SBX_SESSION_ID_MAX + 8];
    if (dir_fd < 0 || !session_id_valid(session_id))
        return -EINVAL;
    snprintf(name, sizeof(name), "%s.sb", session_id);
    return unlinkat(dir_fd, name, 0) < 0 ? -errno : 0;
}

int sbx_argv(const char *sandbox_exec, const char *profile_path, char *const *argv,
             char ***ret) {
    if (!sandbox_exec || sandbox_exec[0] != '/' || !profile_path || profile_path[0] != '/' ||
        !argv || !argv[0])
        return -EINVAL;
    size_t n = 0;
    while (argv[n])
        n++;
    if (n > 4096)
        return -E2BIG;
    char **v = calloc(n + 5, sizeof(*v));
    if (!v)
        return -ENOMEM;
    v[0] = (char *)sandbox_exec;
    v[1] = "-f";
    v[2] = (char *)profile_path;
    v[3] = "--"; /* an agent argv starting with '-' is never an option of sandbox-exec */
    for (size_t i = 0; i < n; i++)
        v[4 + i] = argv[i];
    *ret = v;
    return 0;
}

/* ---- the child ---------------------------------------------------------------------------- */

const char *sbx_step_name(enum sbx_step s) {
    static const char *const names[] = {
        [SBX_STEP_NONE] = "none",         [SBX_STEP_SETSID] = "setsid",
        [SBX_STEP_CTTY] = "controlling tty", [SBX_STEP_STDIO] = "stdio",
        [SBX_STEP_SETGROUPS] = "setgroups", [SBX_STEP_SETGID] = "setgid",
        [SBX_STEP_SETUID] = "setuid",     [SBX_STEP_VERIFY_DROP] = "verify drop",
        [SBX_STEP_CHDIR] = "chdir",       [SBX_STEP_EXEC] = "execve",
    };
    if ((unsigned)s >= ARRAY_SIZE(names) || !names[s])
        return "unknown";
    return names[s];
}

static _Noreturn void child_fail(int status_fd, enum sbx_step step, int err) {
    struct sbx_failure f = {.step = step, .err = err};
    ssize_t n;
    do
        n = write(status_fd, &f, sizeof(f));
    while (n < 0 && errno == EINTR);
    _exit(127);
}

/* After setuid: every id is the caller's or the guard gid's, and root is gone
 * for good. */
static int verify_drop(uid_t uid, gid_t gid) {
    if (getuid() != uid || geteuid() != uid || getgid() != gid || getegid() != gid)
        return EPERM;
    if (setuid(0) == 0 || seteuid(0) == 0 || setgid(0) == 0)
        return EPERM;
    return 0;
}

/* Put the three sources on 0..2 without clobbering one still needed. */
static int stdio_to_012(const int stdio[3]) {
    int src[3];
    for (int i = 0; i < 3; i++) {
        src[i] = stdio[i] >= 0 ? fcntl(stdio[i], F_DUPFD_CLOEXEC, 3)
                               : open("/dev/null", O_RDWR | O_CLOEXEC);
        if (src[i] < 0)
            return errno;
    }
    for (int i = 0; i < 3; i++)
        if (dup2(src[i], i) < 0)
            return errno;
    return 0;
}

static _Noreturn void child(const struct sbx_plan *p, int status_fd) {
    sigset_t none;
    int k;

    /* The daemon's handlers and mask must not reach the agent. */
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);

    if (setsid() < 0)
        child_fail(status_fd, SBX_STEP_SETSID, errno);
    if (p->pty_fd >= 0) {
        if (ioctl(p->pty_fd, TIOCSCTTY, 0) < 0)
            child_fail(status_fd, SBX_STEP_CTTY, errno);
        int pty[3] = {p->pty_fd, p->pty_fd, p->pty_fd};
        if ((k = stdio_to_012(pty)) != 0)
            child_fail(status_fd, SBX_STEP_STDIO, k);
    } else if ((k = stdio_to_012(p->stdio)) != 0) {
        child_fail(status_fd, SBX_STEP_STDIO, k);
    }

    /* Privilege drop: groups, gid, uid; nothing privileged after this. */
    if (setgroups((int)p->n_groups, p->groups) < 0)
        child_fail(status_fd, SBX_STEP_SETGROUPS, errno);
    if (setgid(p->gid) < 0)
        child_fail(status_fd, SBX_STEP_SETGID, errno);
    if (setuid(p->uid) < 0)
        child_fail(status_fd, SBX_STEP_SETUID, errno);
    if ((k = verify_drop(p->uid, p->gid)) != 0)
        child_fail(status_fd, SBX_STEP_VERIFY_DROP, k);

    if (chdir(p->cwd) < 0)
        child_fail(status_fd, SBX_STEP_CHDIR, errno);
    /* sandbox-exec applies the profile to itself, then execs the agent. */
    execve(p->argv[0], p->argv, p->envp);
    child_fail(status_fd, SBX_STEP_EXEC, errno);
}

int sbx_spawn(const struct sbx_plan *p, pid_t *ret_pid, int *ret_status_fd) {
    /* The shape sbx_argv() makes: the child execs sandbox-exec with a profile
     * or nothing, never the agent directly. */
    bool shaped = p && p->argv && p->argv[0] && p->argv[0][0] == '/' && p->argv[1] &&
                  strcmp(p->argv[1], "-f") == 0 && p->argv[2] && p->argv[2][0] == '/' &&
                  p->argv[3] && strcmp(p->argv[3], "--") == 0 && p->argv[4];
    if (!shaped || !p->envp || p->uid == 0 ||
        p->gid == 0 || !p->cwd || p->cwd[0] != '/' || (p->n_groups > 0 && !p->groups) ||
        p->n_groups > 65536)
        return -EINVAL;

    int fds[2];
    int r = px_pipe_cloexec(fds);
    if (r < 0)
        return r;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return -e;
    }
    if (pid == 0) {
        close(fds[0]);
        child(p, fds[1]);
    }
    close(fds[1]);
    *ret_pid = pid;
    *ret_status_fd = fds[0];
    return 0;
}

int sbx_read_status(int status_fd, struct sbx_failure *ret) {
    struct sbx_failure f;
    size_t got = 0;
    while (got < sizeof(f)) {
        ssize_t n = read(status_fd, (char *)&f + got, sizeof(f) - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got == 0)
        return 0;
    if (got != sizeof(f))
        return -EPROTO;
    *ret = f;
    return 1;
}
