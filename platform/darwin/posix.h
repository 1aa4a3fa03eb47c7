/* Small POSIX helpers the Darwin code shares. Darwin has no pipe2, no
 * SOCK_CLOEXEC and no accept4: descriptors are made and then marked CLOEXEC,
 * which is race-free in lyhd because it is single-threaded (no other thread
 * can fork in between). 0 or -errno. */
#ifndef LYH_PLATFORM_DARWIN_POSIX_H
#define LYH_PLATFORM_DARWIN_POSIX_H

#include <stdint.h>
#include <sys/stat.h>

int px_set_cloexec(int fd);
/* pipe(), both ends CLOEXEC; on failure nothing stays open. */
int px_pipe_cloexec(int fds[2]);
/* Open dir (O_DIRECTORY, CLOEXEC, never through a symlink), creating it with
 * mode first if missing. It must be owned by the euid and writable by nobody
 * else (-EPERM): the caller hands files in it to other programs by name.
 * *ret_st (may be NULL) is its stat, also when the check fails with -EPERM. */
int px_open_private_dir(const char *dir, mode_t mode, int *ret_fd, struct stat *ret_st);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t px_now_ms(void);

#endif
