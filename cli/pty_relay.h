/* The terminal relay of `lyh run`: a fresh pty for the agent, the user's
 * terminal in raw mode, bytes relayed both ways, window size forwarded, and
 * the terminal restored on every way out (normal end, error, SIGTERM, SIGHUP). */
#ifndef LYH_PTY_RELAY_H
#define LYH_PTY_RELAY_H

#include <stdint.h>

struct pty_relay;
struct lyh_client;

/* Open a pty pair. The slave (CLOEXEC) goes to the daemon; its window size is
 * copied from our terminal and reported through rows/cols. */
int pty_relay_open(struct pty_relay **ret, int *ret_slave, uint32_t *rows, uint32_t *cols);
/* Raw mode on stdin and signal handlers (SIGWINCH resizes; SIGTERM/SIGHUP/SIGINT
 * are forwarded to the session once it is known). */
int pty_relay_start(struct pty_relay *r);
/* The session to forward signals to, over the client's connection. */
/* pid: the agent's main process (RunStarted.pid), the leader of its
 * process group; 0 unknown. */
void pty_relay_set_session(struct pty_relay *r, struct lyh_client *c, const char *session_id,
                           uint64_t pid);
/* Relay until fd is readable; fd < 0: until the pty closes (no process
 * holds its slave any more). 0 when it is, -errno on failure. */
int pty_relay_until_readable(struct pty_relay *r, int fd);
/* The connection to lyhd ended while the agent runs: signals go to the
 * agent's process group directly, Ctrl-Z is the agent's (nothing would
 * report a stop). */
void pty_relay_lost_daemon(struct pty_relay *r);
/* After the agent exited: copy what is left in the pty to stdout (bounded). */
void pty_relay_drain(struct pty_relay *r);
/* Put the terminal back as it was (idempotent). */
void pty_relay_restore(struct pty_relay *r);
/* The agent stopped (RunEvent.stopped): give the terminal back and stop lyh
 * itself (SIGTSTP) as a shell job; once continued, raw mode again, the
 * current window size to the pty and SIGCONT to the agent's process group.
 * Returns when lyh runs again. */
void pty_relay_suspend(struct pty_relay *r);
/* Hand the pty master over (a background session's holder keeps it): the
 * relay no longer closes it. Before pty_relay_start only. */
int pty_relay_take_master(struct pty_relay *r);
/* Restore and free. Accepts NULL. */
void pty_relay_free(struct pty_relay *r);

#endif
