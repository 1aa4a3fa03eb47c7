/* Small POSIX helpers the Darwin code shares. Darwin has no pipe2, no
 * SOCK_CLOEXEC and no accept4: descriptors are made and then marked CLOEXEC,
 * which is race-free in lyhd because it is single-threaded (no other thread
 * can fork in between). 0 or -errno. */
#ifndef LYH_PLATFORM_DARWIN_POSIX_H
#define LYH_PLATFORM_DARWIN_POSIX_H

#include <stdint.h>

int px_set_cloexec(int fd);
/* pipe(), both ends CLOEXEC; on failure nothing stays open. */
int px_pipe_cloexec(int fds[2]);
/* CLOCK_MONOTONIC in milliseconds. */
int64_t px_now_ms(void);

#endif
