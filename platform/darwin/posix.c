/* See posix.h. */
#include "platform/darwin/posix.h"

#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

int px_set_cloexec(int fd) {
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0)
        return -errno;
    return 0;
}

int px_pipe_cloexec(int fds[2]) {
    if (pipe(fds) < 0)
        return -errno;
    int r = px_set_cloexec(fds[0]);
    if (r == 0)
        r = px_set_cloexec(fds[1]);
    if (r < 0) {
        close(fds[0]);
        close(fds[1]);
    }
    return r;
}

int64_t px_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
