/* Process side of the lyhd end-to-end tests: run a real lyhd on a throwaway
 * socket and state dir, stop it and check how it stopped, count its open fds,
 * and create/remove a throwaway unprivileged user.
 *
 * Contract: functions return 0 or -errno (a message goes to stderr when a check
 * fails, so a failing test says why); nothing here calls cmocka, so the
 * helpers also work in forked children. Every wait is bounded. */
#ifndef DAEMON_HARNESS_H
#define DAEMON_HARNESS_H

#include <stdbool.h>
#include <sys/types.h>

/* Generous enough for a sanitizer build on a loaded machine. */
#define DAEMON_START_TRIES 100   /* x 50 ms until lyhd answers */
#define DAEMON_EXIT_TIMEOUT_MS 10000

struct lyhd_proc {
    pid_t pid;          /* 0 when not running */
    char dir[64];       /* owned temp dir holding everything below ("" = none) */
    char sock[128];
    char state[128];
    char log[128];      /* lyhd's stderr */
    unsigned nofile;    /* RLIMIT_NOFILE for lyhd, 0 = inherit */
};

/* The lyhd binary (argv[1] of the test). */
void daemon_set_binary(const char *path);
const char *daemon_binary(void);

/* Make the temp dir (0755 so an unprivileged test user can reach the socket)
 * and fill in the paths; starts nothing. */
int daemon_prepare(struct lyhd_proc *p);

/* Start lyhd with --socket p->sock --state-dir p->state and the extra args
 * (NULL-terminated, may be NULL); stderr goes to p->log. Waits (bounded) until
 * it answers a Capabilities call. -ECHILD if it exited instead, -ETIMEDOUT. */
int daemon_start(struct lyhd_proc *p, const char *const *extra);

/* fork+exec lyhd with exactly these args (argv[0] excluded, NULL-terminated)
 * in a new network namespace of its own (lyhd's nftables table and routes
 * stay off the host), stdin/stdout on /dev/null, stderr appended to logpath.
 * Returns the pid or -errno. nofile as in struct lyhd_proc. */
pid_t daemon_spawn(const char *const *args, const char *logpath, unsigned nofile);

/* Wait for pid to exit: 0 and the wait status, -ETIMEDOUT (still running). */
int daemon_wait_exit(pid_t pid, int timeout_ms, int *ret_status);

/* SIGTERM, wait, and check: exit status 0, the socket file gone, no sanitizer
 * report on its stderr. 0 when all hold. p->pid is 0 afterwards. */
int daemon_stop(struct lyhd_proc *p);

/* Whatever state: kill a still-running lyhd (SIGKILL, by pid) and remove the
 * temp dir. Safe to call twice. */
void daemon_cleanup(struct lyhd_proc *p);

/* Does the file contain needle (a sanitizer report, an error message)? */
bool daemon_log_contains(const char *path, const char *needle);
/* "ERROR: AddressSanitizer", "runtime error:" or "LeakSanitizer" in the file. */
bool daemon_log_has_sanitizer_report(const char *path);
/* Copy the file to stderr (to explain a failure). */
void daemon_log_dump(const char *path);

/* Entries in /proc/PID/fd, with those of its children (the protocol
 * process, which holds the clients' sockets and what they sent), or -errno. */
int daemon_fd_count(pid_t pid);
/* Poll until the count equals want (bounded); returns the last count seen. */
int daemon_wait_fd_count(pid_t pid, int want, int timeout_ms);

/* Run argv (argv[0] an absolute path) and wait (bounded): its exit status, or
 * -errno. stdout goes to /dev/null. */
int daemon_run(const char *const *argv);

/* A throwaway system user lyhtest-<pid>: created once, removed by
 * daemon_user_remove() and, as a last resort, at exit. */
int daemon_user_create(uid_t *ret_uid, gid_t *ret_gid);
void daemon_user_remove(void);

#endif
