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
#include <sys/ioctl.h>
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
