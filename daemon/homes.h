/* Other users' homes, known off the event loop.
 *
 * A read-only extra path of a launch must not be at, above or below another
 * human user's home (rpc_run.c). Deciding that needs every account's home,
 * and enumerating the user database (getpwent) may go to the network (LDAP,
 * NIS) or read a large file: never on the event loop. One thread of its own
 * reads it at start, again within HOMES_POLL_MS whenever the passwd file
 * changes or any account's home does (made, removed, something mounted on
 * it: one stat per account per poll), and at least every HOMES_MAX_AGE_MS (a
 * network directory's new accounts have no file to watch), and publishes
 * each home's inode and those of its ancestors; the loop only compares
 * inodes under a mutex. A read that fails half way (a backend error) is
 * never published: the last whole one stays.
 *
 * The cost of not asking on each launch: an account added (or a home moved)
 * a moment ago is known up to HOMES_POLL_MS later (HOMES_MAX_AGE_MS for a new
 * account of a network directory). Until the first read is done the check
 * says -EAGAIN and the launch is refused (fail closed). */
#ifndef LYHD_HOMES_H
#define LYHD_HOMES_H

#include <stddef.h>
#include <sys/types.h>

#define HOMES_POLL_MS    2000u
#define HOMES_MAX_AGE_MS (300u * 1000u)

struct homes;

/* Start the thread (all signals blocked in it). passwd_file NULL: the user
 * database through NSS (getpwent), watching /etc/passwd; a path (tests):
 * that file, read with fgetpwent. 0 or -errno. */
int homes_start(const char *passwd_file, struct homes **ret);
/* Stop the thread and free everything, once the last homes_hold() is
 * released. Accepts NULL. */
void homes_stop(struct homes *h);
/* Keep h (not its thread) for a thread of another's that may outlive the
 * loop (run_paths.c): freed at the last release. */
struct homes *homes_hold(struct homes *h); /* accepts NULL */
void homes_release(struct homes *h); /* accepts NULL */

/* Is the directory open as fd at, above or below the home of a human
 * account (uid >= 1000, not nobody, a home that is not "/") other than
 * caller's? 1 yes (who: "name (home)"), 0 no, -EAGAIN: the user database
 * was not read yet, -EIO: fd's ancestors cannot be told. */
int homes_near_other(struct homes *h, int fd, uid_t caller, char *who, size_t wholen);

/* Tests: how many times the database was read. */
unsigned homes_generation(struct homes *h);

#endif
