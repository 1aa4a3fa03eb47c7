/* See unixsock.h. SIOCUNIXFILE gives an O_PATH fd of the file a unix socket
 * is bound to (an accepted socket shares its listener's), whatever network
 * namespace the socket is in (sock_diag would see only lyhd's own: a client
 * in another namespace has its accepted socket there). It needs
 * CAP_NET_ADMIN over the socket's namespace, which root has. */
#include "platform/linux/unixsock.h"

#include <errno.h>
#include <linux/sockios.h>
#include <linux/un.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macros.h"

int unixsock_file_of(int fd, uint64_t *ret_dev, uint64_t *ret_ino) {
    struct stat st;
    _cleanup_close_ int pfd = ioctl(fd, SIOCUNIXFILE, 0);

    if (pfd < 0)
        return errno == ENOENT ? -ENOENT : -errno;
    if (fstat(pfd, &st) < 0)
        return -errno;
    if (!S_ISSOCK(st.st_mode))
        return -ENOTSOCK;
    *ret_dev = st.st_dev;
    *ret_ino = st.st_ino;
    return 0;
}

bool unixsock_peer_gone(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    int r = poll(&p, 1, 0);
    return r < 0 || (r > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)));
}

ssize_t unixsock_send_fds(int sock, const void *buf, size_t len, const int *fds, size_t nfds,
                          int flags) {
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int) * UNIXSOCK_MAX_FDS)];
    } c;
    struct iovec iov = {(void *)buf, len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n;

    if (nfds > UNIXSOCK_MAX_FDS) {
        errno = EINVAL;
        return -1;
    }
    if (nfds) {
        memset(&c, 0, CMSG_SPACE(sizeof(int) * nfds));
        mh.msg_control = c.b;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(h), fds, sizeof(int) * nfds);
    }
    do
        n = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
}

ssize_t unixsock_recv_fds(int sock, void *buf, size_t cap, int flags, int *fds, size_t *ret_nfds,
                          int *ret_msg_flags) {
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int) * UNIXSOCK_MAX_FDS)];
    } c;
    struct iovec iov = {buf, cap};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.b,
                        .msg_controllen = sizeof(c.b)};
    ssize_t n;
    size_t got = 0;

    do
        n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    for (struct cmsghdr *h = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; h; h = CMSG_NXTHDR(&mh, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k && got < UNIXSOCK_MAX_FDS; i++)
            memcpy(&fds[got++], CMSG_DATA(h) + i * sizeof(int), sizeof(int));
    }
    *ret_nfds = got;
    *ret_msg_flags = n >= 0 ? mh.msg_flags : 0;
    return n;
}
