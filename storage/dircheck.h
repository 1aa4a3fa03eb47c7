/* Directory checks before trusting a place: nobody but root (and the euid)
 * may change a directory on the way to it. Used by both databases and by the
 * daemon for its socket directory. No logging; 0 or -errno with err set. */
#ifndef LYH_STORAGE_DIRCHECK_H
#define LYH_STORAGE_DIRCHECK_H

#include <stdbool.h>
#include <stddef.h>

/* dircheck.c: walk from dirfd up to "/": every directory on the way must be
 * owned by root or the euid and not writable by group/other unless sticky.
 * 0, or -EPERM / -ELOOP / -errno with err naming label ("state dir"), dir and
 * what lives there ("security state"). */
int storage_check_ancestors(int dirfd, const char *label, const char *dir, const char *what,
                            char *err, size_t errlen);

/* dircheck.c: open dir (O_DIRECTORY, CLOEXEC, never through a symlink),
 * creating it 0700 first when create is set; it must be owned by the euid,
 * not group/world writable, and pass storage_check_ancestors(). The fd goes
 * to *ret_fd; on failure err names label, dir and what lives there. */
int storage_open_private_dir(const char *dir, bool create, const char *label, const char *what,
                             char *err, size_t errlen, int *ret_fd);

#endif
