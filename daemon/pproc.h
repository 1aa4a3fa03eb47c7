/* pproc: the parent's side of the protocol process (proto.h): starting it,
 * starting it again when it dies, and its messages.
 *
 * The parent reads what that process sends as it would an attacker's bytes
 * (pmsg.c decodes strictly; dns_fwd.c checks the content). A message that
 * does not decode, or one that is not the protocol process's to send, ends
 * the process (SIGKILL) and a new one is started: the parent never tries to
 * make sense of a confused peer. Either way no session loses its guard: the
 * firewall does not depend on the protocol process at all. */
#ifndef LYHD_PPROC_H
#define LYHD_PPROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct lyhd;

#define LYHD_PROTO_USER "_lyhd"

/* What the protocol process is started with. */
struct pproc_exec {
    uid_t uid;
    gid_t gid;
    int exe_fd;       /* lyhd's own binary (execveat); -1: path */
    const char *path; /* --protocol-exe (tests only) */
    char **argv, **envp;
};
/* In a child just forked (by lyhd, or by the spawner: spawner.h): sock
 * becomes fd 3, every other fd above 2 closes at the exec, its own session,
 * no signal blocked or handled, x's user for good with no new privileges,
 * then the exec. Never returns (status 126: the credentials failed, 127:
 * the rest). Async-signal-safe. */
_Noreturn void pproc_exec_child(int sock, const struct pproc_exec *x);

/* Find (or create, as useradd --system) the protocol process's user, into
 * d->proto_uid/proto_gid: before the guard, whose base chain names it. */
int pproc_user(struct lyhd *d, char *why, size_t whylen);
/* Start the process as that user; it is ready when it says so
 * (pproc_ready). why says what failed. */
int pproc_start(struct lyhd *d, char *why, size_t whylen);
/* At shutdown: close the socket (the process exits on end of file), reap it
 * (SIGKILL after 1 s). Accepts a daemon whose pproc never started. */
void pproc_stop(struct lyhd *d);

/* At shutdown, before the sessions' last records: wait (at most timeout_ms,
 * serving its messages) until the protocol process sent every flow event
 * queued now. */
void pproc_sync_flows(struct lyhd *d, unsigned timeout_ms);

/* Every 200 ms (the parent's watchdog tick): a process that was killed, or
 * whose first thread is gone, and whose exit has not come 2 s later (a
 * thread of it waits in a FUSE FLUSH, which no signal ends) is left behind
 * to be reaped when it ends, and the next one starts (at most 8 left behind
 * at once). */
void pproc_tick(struct lyhd *d);
/* Does /proc/PID/stat's text say the process is exiting, or is a zombie
 * leader waiting for its other threads? Exposed for tests. */
bool pproc_stat_dying(const char *stat);

/* Is the protocol process up and confined (it said READY)? */
bool pproc_ready(const struct lyhd *d);
/* Bytes queued in the socket to it and not yet read, at most (SIZE_MAX: no
 * process, or cannot tell): exact when it is limit or more, else a bound
 * that may be above the true figure (the kernel is asked only when the
 * bound reaches limit). */
size_t pproc_queued(struct lyhd *d, size_t limit);
/* Its pid (0: none). */
pid_t pproc_pid(const struct lyhd *d);

/* Send one encoded message with nfds fds (duplicated into the receiver; the
 * caller keeps its own). -ENOTCONN when the process is not ready; a full
 * queue (-EAGAIN: it does not read) ends the process, to be started again. */
int pproc_send(struct lyhd *d, const uint8_t *buf, size_t len, const int *fds, size_t nfds);

/* Close fds the protocol process sent that belong to no connection, off the
 * loop (the closer, under its user's queue): such an fd may be a client's
 * lingering socket or FUSE file, and the process may be compromised. */
void pproc_drop_fds(struct lyhd *d, const int *fds, size_t nfds);

/* Tests: take sock as the socket of a protocol process that said READY
 * (no process behind it; pproc_stop closes sock). */
int pproc_attach_for_test(struct lyhd *d, int sock);
/* Tests: what the parent does with the unread messages of a process that
 * died (before server_protocol_gone). */
void pproc_drain_for_test(struct lyhd *d);

/* The parent's handling of one datagram from the protocol process (decode,
 * check, act) and the fds that came with it (taken in every case). Exposed
 * for tests and fuzz/fuzz_pmsg.c. -EBADMSG: malformed or not its to send
 * (the caller then ends the process). */
int pproc_dispatch(struct lyhd *d, const uint8_t *buf, size_t len, int *fds, size_t nfds);

/* One datagram as it came off the socket (r: pmsg_recv's 0 or -EMFILE), in
 * the order they came: a message with fds is held until the FDS_CLOSED
 * after it, then dispatched (pmsg.h: the parent never acts on such fds
 * before the protocol process closed its copies). Exposed for tests.
 * -EBADMSG as pproc_dispatch, or an FDS_CLOSED out of turn. */
int pproc_take(struct lyhd *d, int r, const uint8_t *buf, size_t len, int *fds, size_t nfds);

#endif
