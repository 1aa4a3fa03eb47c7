/* Start a session's first process: fork, then in the child one ordered,
 * checked pipeline that ends in execve. Everything the child needs is
 * prepared by the caller before spawn_start() (a gated plan's Landlock ruleset
 * comes later, with the go: see gated); the child only makes syscalls.
 *
 * Contract: spawn_start returns 0 or -errno (fork/pidfd/pipe failures only).
 * A failure inside the child is not a return value: the child writes a
 * struct spawn_failure to the status pipe and exits 127; the parent reads it
 * with spawn_read_status() when the status fd becomes readable. EOF without a
 * record means execve succeeded. Nothing here logs. */
#ifndef LYH_SPAWN_H
#define LYH_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Directories one launch may cover (the caller's deny paths and the fixed ones). */
#define SPAWN_MAX_HIDE 64
/* Granted directories one launch may show again inside its private /tmp. */
#define SPAWN_MAX_EXPOSE 40
/* Mounts that keep entries of home read-only (and pin their ancestors). */
#define SPAWN_MAX_PROTECT 160
/* Sockets the user lets through (--allow-socket). */
#define SPAWN_MAX_SOCKETS 8
/* Arguments of the agent's command (rpc_run.c lets no more through). */
#define SPAWN_MAX_ARGV 256

/* One of them: path bound onto itself, read-only (ro) or as it was (a pin:
 * a mount point cannot be renamed or removed). */
struct spawn_cover {
    const char *path;
    bool ro;
};

struct sc_program;

/* The steps of the child pipeline, in order. */
enum spawn_step {
    SPAWN_STEP_NONE = 0,
    SPAWN_STEP_SETSID,
    SPAWN_STEP_CTTY,
    SPAWN_STEP_STDIO,
    SPAWN_STEP_CGROUP,
    SPAWN_STEP_MOUNTS,
    SPAWN_STEP_SETGROUPS,
    SPAWN_STEP_SETRESGID,
    SPAWN_STEP_SETRESUID,
    SPAWN_STEP_VERIFY_DROP,
    SPAWN_STEP_NO_NEW_PRIVS,
    SPAWN_STEP_LANDLOCK,
    SPAWN_STEP_SECCOMP,
    SPAWN_STEP_CHDIR,
    SPAWN_STEP_EXEC,
    SPAWN_STEP_GATE, /* waiting for the go (gated plans): it did not come */
};

const char *spawn_step_name(enum spawn_step s);

struct spawn_plan {
    char *const *argv;          /* argv[0] is looked up in PATH of envp */
    char *const *envp;
    int stdio[3];               /* stdin, stdout, stderr; used when pty_fd < 0 */
    int pty_fd;                 /* >= 0: pty slave, becomes the controlling tty and stdio */
    int cgroup_dir_fd;          /* >= 0: the session cgroup's directory: the child is
                                 * created in it (clone3 CLONE_INTO_CGROUP) */
    int cgroup_procs_fd;        /* >= 0: its cgroup.procs, written by the child when
                                 * the kernel has no CLONE_INTO_CGROUP (before 5.7) */
    uid_t uid;                  /* the caller */
    gid_t gid;                  /* the guard gid: real, effective and saved */
    const gid_t *groups;        /* the caller's supplementary groups */
    size_t n_groups;
    int landlock_fd;            /* ready ruleset (must be >= 0: no Landlock, no launch),
                                 * or -1 in a gated plan: it comes with the go */
    uint64_t landlock_handled;  /* its handled rights (rules for the private devpts) */
    const struct sc_program *seccomp; /* ready program (required) */
    const char *cwd;            /* entered as the caller, after the drop */
    /* Places to hide in a mount namespace of the session's own (sockets
     * Landlock cannot mediate: the user's runtime dir with its systemd and
     * D-Bus buses, container runtimes, resolver side channels, agent
     * sockets): a directory is covered with an empty read-only tmpfs, a
     * socket with /dev/null; what is neither, or missing, is left. */
    const char *const *hide; /* at most SPAWN_MAX_HIDE */
    size_t n_hide;
    /* The session's private /tmp, /var/tmp and /dev/shm: its tmpdir, whose
     * subdirectories tmp, var-tmp and shm are bound over them (NULL: none). */
    const char *private_tmp;
    /* Directories under /tmp, /var/tmp or /dev/shm the session was granted
     * (its cwd, --writable and --read-only paths there): shown again at the
     * same path inside the private ones. At most SPAWN_MAX_EXPOSE. */
    const char *const *expose;
    size_t n_expose;
    /* Entries of home kept read-only, in order (pins before what lies
     * below them); each looked up as the agent, bound onto itself. At most
     * SPAWN_MAX_PROTECT. */
    const struct spawn_cover *protect;
    size_t n_protect;
    /* Sockets the user lets through (--allow-socket): absolute paths of
     * sockets (not links), looked up as the agent before anything is
     * covered and shown again at their paths after: inside a covered
     * directory (the runtime dir) or the private /tmp. At most
     * SPAWN_MAX_SOCKETS; none may lie inside another hide entry than a
     * directory cover. */
    const char *const *sockets;
    size_t n_sockets;
    /* The child's parent is the caller's parent (clone3 CLONE_PARENT): set
     * by lyhd's spawner, so that lyhd itself reaps and watches the agent.
     * Needs clone3: without it spawn_start fails with -ENOSYS. */
    bool clone_parent;
    /* The caller has no signal handler and ignores no signal: the child
     * need not set every disposition to the default (the spawner). */
    bool signals_default;
    /* A gated plan: the child makes its mounts and installs its seccomp
     * filter, then waits on gate_fd (its
     * end of a SOCK_SEQPACKET pair) for the go, one byte 'G' that carries the
     * Landlock ruleset (SCM_RIGHTS), before it drops its privileges and
     * execs; the end of the pair instead (the caller closed its end, or
     * died) stops it there (SPAWN_STEP_GATE, ECANCELED). So its set-up runs
     * while the caller installs what must be in place before the agent runs
     * (the session's firewall) and builds the ruleset. */
    bool gated;
    int gate_fd;
};

/* The go of a gated plan: send the ruleset through the caller's end of the
 * gate. 0 or -errno (a child that already stopped: -EPIPE/-ECONNRESET; its
 * status pipe says why). */
int spawn_gate_go(int gate_fd, int landlock_fd);
/* The child's side: wait on gate_fd for the go. 0 with the ruleset's fd
 * (CLOEXEC); -ECANCELED: the other end closed; -EPROTO: anything but one
 * byte 'G' with exactly one fd (any fds that came are closed); -errno. */
int spawn_gate_wait(int gate_fd, int *ret_fd);

/* execvpe(argv[0], argv, envp) without environ: the search goes through
 * envp's PATH (glibc's default without one), a file execve refuses as no
 * program (ENOEXEC) is run by /bin/sh, and the errno that execvpe would leave
 * is returned (EACCES when one was found but could not be run). Writes no
 * memory but its stack (spawn_start_shared's child). Returns only on
 * failure. */
int spawn_exec_path(char *const *argv, char *const *envp);

struct spawn_failure {
    int step;  /* enum spawn_step */
    int err;   /* errno */
};

/* Fork and run the pipeline. On success *ret_pid, *ret_pidfd (CLOEXEC, for
 * poll: readable when the child exits) and *ret_status_fd (CLOEXEC, non-blocking
 * read end of the status pipe) are the caller's. The child is made with a raw
 * clone3 where possible and makes only syscalls, so the caller may have other
 * threads. */
int spawn_start(const struct spawn_plan *p, pid_t *ret_pid, int *ret_pidfd, int *ret_status_fd);

/* spawn_start with a child that shares the caller's memory until its exec:
 * clone3 CLONE_VM|CLONE_VFORK, made by a thread of its own (the launcher),
 * which the kernel holds until the child has exec'd or ended. So no page table
 * is copied, neither side takes a copy-on-write fault, and the exec tears no
 * copied address space down (about 1 ms less from the clone to the exec on a
 * 2-CPU guest, docs/performance.md), while the caller's other threads go on.
 * The child writes nothing of the caller's but its own stack (a mapping made
 * here) and errno, which is the held launcher's (the child runs on its thread
 * pointer); spawn_exec_path spares environ.
 *
 * *p is copied; all it points to must stay as it is (and be zeroed by the
 * caller if it holds secrets) until *ret_done_fd is readable: the child reads
 * it until its exec; then spawn_shared_free(*ret_sh) (closes done). Same
 * results as spawn_start otherwise; -ENOSYS: nothing was made, and the fork
 * way may still work (not x86_64, a sanitizer's build, no clone3, no memory
 * or thread for it now): use spawn_start, with a plan that is not in memory a
 * fork wipes. The launcher takes no lock and allocates nothing, so a child
 * the caller's other threads fork meanwhile finds no libc lock taken (the
 * spawner's removers run malloc). Every process sharing this memory shares
 * its dumpable flag, which a credential change of any of them resets to
 * fs.suid_dumpable: use it only while that reads 0 (spawner.c). */
struct spawn_shared;
int spawn_start_shared(const struct spawn_plan *p, struct spawn_shared **ret_sh, pid_t *ret_pid,
                       int *ret_pidfd, int *ret_status_fd, int *ret_done_fd);
void spawn_shared_free(struct spawn_shared *sh);

/* The session tmpdir's subdirectories (spawn_tmp_subs) bound over the
 * private /tmp, /var/tmp and /dev/shm (spawn_tmp_roots), in that order. */
#define SPAWN_TMP_N 3
extern const char *const spawn_tmp_subs[SPAWN_TMP_N];
extern const char *const spawn_tmp_roots[SPAWN_TMP_N];

/* A plain fork whose child is the caller's parent's child (clone3
 * CLONE_PARENT, with a pidfd): 0 in the child, its pid in the caller, -1
 * with errno (ENOSYS, E2BIG, EINVAL: no clone3 here). For lyhd's spawner,
 * which makes lyhd's other short-lived children too (the tmpdir remover). */
pid_t spawn_sibling(int *ret_pidfd);

/* Read the status pipe. Returns 1 when a failure record was read (into *ret),
 * 0 on EOF (exec succeeded), -EAGAIN when nothing is there yet. */
int spawn_read_status(int status_fd, struct spawn_failure *ret);

#endif
