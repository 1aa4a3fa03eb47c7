/* The spawner: a small root process of lyhd's own that forks each session's
 * first process, so that the daemon itself never forks on a launch.
 *
 * Why: a fork copies the forking process's page tables and write-protects
 * its memory; the daemon then takes a page fault on every page it writes
 * while the child lives, and each such fault must shoot down the other
 * CPUs' TLB entries (lyhd has threads, and the child runs on another CPU).
 * Measured on a 2-CPU guest: the fork took 1.1 ms and lyhd spent about a
 * third of its CPU time per launch in those faults (docs/performance.md).
 * The spawner is lyhd executed again (`lyhd --spawner 3`), before lyhd has
 * sessions or caches: a few anonymous pages, one thread, nothing to fault.
 *
 * It gets the whole spawn_plan from the parent over a socketpair (strings
 * and numbers in one datagram, the plan's fds with it), runs
 * spawn_start_shared (the child shares its memory until its exec: no fork;
 * spawn_start where it cannot) with clone_parent set, so the child is lyhd's
 * child (lyhd reaps it and watches its pidfd as before), and sends back the
 * pid, the pidfd and the status pipe. It trusts the parent (who made it, as root) and no one else
 * can reach its socket. If it is missing or fails, the launch forks from
 * lyhd as before (same child, same steps; only slower); so does a launch
 * without a session cgroup (the cgroup is how a child made by a spawner
 * whose answer was lost is found and killed), and one whose plan does not
 * fit the socket now. */
#ifndef LYHD_SPAWNER_H
#define LYHD_SPAWNER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "platform/linux/spawn.h"

struct lyhd;
struct sc_program;

/* How a child was made. The spawner's answer says which of its two ways it
 * took; lyhd --timing logs it on the launch line, so that a launch falling
 * back to the slower fork (a sanitizer build, fs.suid_dumpable not 0)
 * shows. */
enum spawn_way {
    SPAWN_WAY_LYHD = 0,   /* forked by lyhd itself (no spawner, or one that cannot) */
    SPAWN_WAY_FORK = 1,   /* forked by the spawner */
    SPAWN_WAY_SHARED = 2, /* by the spawner, sharing its memory until the exec */
};
const char *spawn_way_name(enum spawn_way w);

/* Start it (fork + exec of /proc/self/exe). Failure is logged and leaves
 * launches forking from lyhd. */
void spawner_start(struct lyhd *d);
/* End it (its socket closed: it exits) and reap it. */
void spawner_stop(struct lyhd *d);

/* spawn_start(), through the spawner when there is one. Same contract. */
int spawner_spawn(struct lyhd *d, const struct spawn_plan *p, pid_t *ret_pid, int *ret_pidfd,
                  int *ret_status_fd);

/* A launch in two steps, so that the child makes its mounts while lyhd
 * installs the session's firewall and builds its Landlock ruleset:
 * spawner_begin sends the plan (landlock_fd -1) gated (spawn_plan.gated);
 * the child stops at the gate. Then exactly one of spawner_go or
 * spawner_cancel, with the spawner_spawn contract. spawner_go takes the
 * spawner's answer and only then sends the go with the ruleset (go_err: how
 * sending it went, 0 or -errno; -EPIPE/-ECONNRESET: the child had stopped
 * already, its status pipe says why); spawner_cancel closes the gate (the
 * child stops there, SPAWN_STEP_GATE) and takes the answer all the same. A
 * launch the spawner cannot take (none, no cgroup, too big, no socket now)
 * is not begun (sp->begun false): spawner_go then spawns it the one-step
 * way with the ruleset, and spawner_cancel returns -ECANCELED (nothing was
 * made). Nothing else is sent to the spawner while a launch is begun. */
struct spawn_pending {
    bool begun;
    int gate;   /* the parent's end, until the go or the cancel */
    int go_err; /* spawner_go: sending the go (0, or -errno) */
    enum spawn_way way; /* spawner_go, spawner_cancel: how the child was made */
};
void spawner_begin(struct lyhd *d, struct spawn_plan *p, struct spawn_pending *sp);
int spawner_go(struct lyhd *d, struct spawn_pending *sp, struct spawn_plan *p, int landlock_fd,
               pid_t *ret_pid, int *ret_pidfd, int *ret_status_fd);
int spawner_cancel(struct lyhd *d, struct spawn_pending *sp, struct spawn_plan *p, pid_t *ret_pid,
                   int *ret_pidfd, int *ret_status_fd);

/* fs_remove_tree_as(), with the remover made by the spawner (a child of
 * lyhd's all the same, waited on through the pidfd): a fork of lyhd itself
 * costs it a page-table copy and a copy-on-write fault on every page it
 * writes while the child lives, at every session's end. Falls back to
 * fs_remove_tree_as where the spawner cannot. Same contract. */
int spawner_remove_tree(struct lyhd *d, const char *path, uid_t uid, gid_t gid, pid_t *ret_pid,
                        int *ret_pidfd);
/* The same without waiting on the loop for the spawner's clone (~2 ms on a
 * slow machine, at every session's end): done(arg, r, pid, pidfd) gets the
 * spawner's answer later, from the event loop (or from spawner_settle, or
 * from spawner_stop when the spawner fails or goes). done may run inside
 * another caller's work (a Run's transaction): it must only take the pidfd
 * and arm events, never write state.db, wait or fork. So, unlike
 * spawner_remove_tree, neither this nor done makes a fallback: -EIO (no
 * spawner, or it failed and was given up, or the request could not be left
 * owed: a launch begun, no memory; then before this returns) and -ENOSYS (it
 * cannot make lyhd's children here) tell done that nothing was made, and the
 * owner calls fs_remove_tree_as on a turn of its own. This never forks. */
typedef void (*spawner_rm_done)(void *arg, int r, pid_t pid, int pidfd);
void spawner_remove_tree_async(struct lyhd *d, const char *path, uid_t uid, gid_t gid,
                               spawner_rm_done done, void *arg);
/* Take every owed answer now (each at most SPAWNER_TIMEOUT_MS): before
 * anything whose answer must be the next datagram, and at shutdown. */
void spawner_settle(struct lyhd *d);
/* Its request's codec (exposed for the unit test): 0, -EINVAL/-ENOBUFS
 * (encode), -EBADMSG (decode: another magic, a path that is not absolute,
 * not NUL-terminated at the datagram's end or too long). The path points
 * into buf. */
int spawner_encode_rm(const char *path, uid_t uid, gid_t gid, uint8_t *buf, size_t cap,
                      size_t *ret_len);
int spawner_decode_rm(const uint8_t *buf, size_t len, uid_t *ret_uid, gid_t *ret_gid,
                      const char **ret_path);

/* Start the protocol process (pproc.c) as a child of lyhd's made by the
 * spawner, whose fd table holds no client's fd that a close could hang on:
 * x's exe_fd and sock (the process's end of its pair) go along. 0 with its
 * pid and pidfd; -ENOSYS: the spawner cannot now (none, a launch begun, it
 * failed and was given up, or it cannot make lyhd's children here): nothing
 * was made, fork from lyhd; other -errno: this start failed. */
struct pproc_exec;
int spawner_start_protocol(struct lyhd *d, const struct pproc_exec *x, int sock, pid_t *ret_pid,
                           int *ret_pidfd);
/* Its request's codec (exposed for the unit test): 0, -EINVAL/-ENOBUFS
 * (encode), -EBADMSG (decode: another magic, root's uid or gid, fds that do
 * not match, neither a binary's fd nor an absolute path, no argv). fds:
 * sock, then the binary's fd (when x has one). x's strings point into buf;
 * its argv and envp arrays are the caller's to free. */
int spawner_encode_pp(const struct pproc_exec *x, int sock, uint8_t *buf, size_t cap,
                      size_t *ret_len, int *fds, size_t *ret_nfds);
int spawner_decode_pp(const uint8_t *buf, size_t len, const int *fds, size_t nfds,
                      struct pproc_exec *x, int *ret_sock);

/* `lyhd --spawner FD`: the spawner's own main. */
int spawner_main(int argc, char **argv);

/* The plan as bytes and fds (exposed for the unit test and the fuzzer):
 * encode into buf (cap bytes), the fds to send in fds[SPAWNER_FDS] (*ret_nfds
 * of them). 0, -ENOBUFS or -EINVAL. */
#define SPAWNER_FDS 8
#define SPAWNER_MAX_BYTES (2u << 20)
int spawner_encode(const struct spawn_plan *p, uint8_t *buf, size_t cap, size_t *ret_len, int *fds,
                   size_t *ret_nfds);

/* What a decoded plan's arrays live in (spawner_storage_free releases it;
 * the strings point into the datagram). */
struct spawner_storage {
    char **argv, **envp;
    const char **hide, **expose, **sockets;
    struct spawn_cover *protect;
    gid_t *groups;
    struct sc_program *seccomp;
};
void spawner_storage_free(struct spawner_storage *st);

/* Decode what spawner_encode made (with the fds that came along, in order)
 * into *p, whose strings and arrays point into buf (which must end in a NUL
 * byte past len) and the storage st. 0, -ENOMEM, or -EBADMSG (anything
 * malformed, fds that do not match); st is released on failure. */
int spawner_decode(const uint8_t *buf, size_t len, const int *fds, size_t nfds,
                   struct spawner_storage *st, struct spawn_plan *p);

#endif
