/* See posix.h. */
#include "platform/darwin/posix.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
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

int px_open_private_dir(const char *dir, mode_t mode, int *ret_fd, struct stat *ret_st) {
    if (mkdir(dir, mode) < 0 && errno != EEXIST)
        return -errno;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (ret_st)
        *ret_st = st;
    if (st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
        close(fd);
        return -EPERM;
    }
    *ret_fd = fd;
    return 0;
}
