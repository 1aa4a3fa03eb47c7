/* Closing file descriptors a client handed lyhd, where a close cannot stall
 * the event loop. The parent runs one, and so does the protocol process
 * (closer_queue: it may not look at its fds; see proto_clients.c).
 *
 * close() of a client's fd can wait on someone else: a TCP socket with
 * SO_LINGER and a full send queue, a file on FUSE or NFS (FLUSH), a socket
 * whose queue holds in-flight fds whose last reference goes with it. The
 * event loop never makes such a close: fds that cannot block (pipes,
 * terminals, null devices; platform/linux/fdkind.h) are closed at once, the
 * rest by worker threads, one user's at a time per worker, so a user whose
 * close hangs stalls only their own later closes. A close that waits longer
 * than a second is interrupted with a signal (which ends a linger wait; a
 * FUSE server that never answers keeps its worker, see security-model.md). */
#ifndef LYHD_CLOSER_H
#define LYHD_CLOSER_H

#include <stdint.h>
#include <sys/types.h>

struct closer;

/* Start the workers (all signals blocked but the interrupt). 0 or -errno. */
int closer_start(struct closer **ret);
/* Ask the workers to finish what is queued and wait for them, at most about
 * two seconds in all; a worker still stuck in a close is left behind (the
 * process is exiting). Accepts NULL. */
void closer_stop(struct closer *c);

/* Close fd, which came from (or belongs to a connection of) uid. Never
 * blocks on the fd; takes ownership in every case. c NULL: closes at once
 * (tests that run no workers). */
void closer_close(struct closer *c, uid_t uid, int fd);
/* Close fd on a worker, whatever it is: for a caller that may not look at
 * its fds (the protocol process: its seccomp filter has no statx). Takes
 * ownership in every case (without workers or memory: closed at once). */
void closer_queue(struct closer *c, uid_t uid, int fd);
/* The same for n fds (each taken). */
void closer_close_all(struct closer *c, uid_t uid, const int *fds, size_t n);
/* Closes of uid's fds queued or running (for refusing a user who piles them). */
unsigned closer_pending(struct closer *c, uid_t uid);
/* Closes of everyone's fds queued or running: fds lyhd still holds. */
unsigned closer_total_pending(struct closer *c);
/* Interrupt any close that has run longer than max_ms (call it from a timer). */
void closer_poke(struct closer *c, uint64_t max_ms);

#endif
