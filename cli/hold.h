/* Background sessions: the holder, a process of the user's own that keeps a
 * session's pty master and its scrollback, stays connected to lyhd for the
 * session's Run call, and serves `lyh attach`, `lyh ls` and `lyh kill` on a
 * socket in the user's session directory. It outlives the `lyh run` that
 * started it, every client that attaches, and lyhd itself: a restart of lyhd
 * (which re-adopts the running agent) leaves the pty where it was.
 *
 * The directory: /tmp/lyh-UID, mode 0700, owned by the
 * user (as tmux's /tmp/tmux-UID: it is there after logout, unlike
 * /run/user/UID; logind's KillUserProcesses=yes ends the holder at logout as
 * it ends tmux). An agent never sees it: the sandbox has a private /tmp. */
#ifndef LYH_HOLD_H
#define LYH_HOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cli/hold_msg.h"

struct lyh_client;

/* The session directory of uid (/tmp/lyh-UID), created (0700) when
 * missing and uid is ours;
 * refused (-EPERM) when it is not a directory of uid's that only uid can
 * enter, with the reason in why. Its path into buf. 0 or -errno. */
int hold_dir(uid_t uid, bool create, char *buf, size_t len, char *why, size_t wlen);
/* Listen for the session name in the caller's directory: -EADDRINUSE when
 * a holder answers there (a socket nobody answers on is replaced), -EMFILE
 * at HOLD_MAX_SESSIONS live sessions. The socket's path into ret_path. 0 or
 * -errno, with the reason in why. */
int hold_listen(const char *name, int *ret_fd, char *ret_path, size_t plen, char *why,
                size_t wlen);
/* Background sessions a user may have at once: each holds one of the 32
 * connections lyhd allows a user, and the user needs a few for everything
 * else. */
#define HOLD_MAX_SESSIONS 24
/* Connect to the holder of uid's session name (SOCK_SEQPACKET, CLOEXEC) and
 * check who listens: uid itself, outside any sandbox (its gid one of ours
 * when uid is ours). -ENOENT no such session, -ECONNREFUSED its holder is
 * gone, -EAGAIN too busy to accept, -EPERM not a socket of uid's or the
 * listener is not uid's. Never waits. */
int hold_connect(uid_t uid, const char *name, int *ret_fd);
/* Remove the caller's session socket name if nothing answers there (its
 * holder was killed). */
void hold_reap(const char *name);
/* The names of uid's sessions (sockets in its directory), sorted. At most
 * max. 0 or -errno (-ENOENT: no directory, so no sessions). */
int hold_names(uid_t uid, char (*names)[HOLD_NAME_MAX + 1], size_t max, size_t *ret_n);

/* One message as one datagram; 0 or -errno. */
int hold_send(int fd, const struct hold_msg *m);
/* The next message, waiting up to timeout_ms (< 0: forever); buf holds
 * HOLD_MSG_MAX bytes and m->data points into it. -ETIMEDOUT, -ECONNRESET
 * (closed), -EBADMSG. */
int hold_recv(int fd, uint8_t *buf, struct hold_msg *m, int timeout_ms);
/* Ask a holder what it holds. 0 or -errno. */
int hold_ask_info(uid_t uid, const char *name, struct hold_info *ret);

struct hold_start {
    int listen_fd;             /* from hold_listen */
    char sock_path[160];       /* ... and its path (removed when the holder ends) */
    int master;                /* the pty master */
    struct lyh_client *client; /* the connection the Run call was made on */
    uint64_t call_id;
    struct hold_info info;     /* name, session id, pid, command, started */
};

/* Become the holder: never returns (exits 0 after the agent ended). Call
 * in a child of its own after fork(): it starts a new session, closes every
 * fd but those in s, and points stdio at /dev/null. */
__attribute__((noreturn)) void hold_run(struct hold_start *s);

#endif
