/* Which file a unix stream socket belongs to, from the kernel (SIOCUNIXFILE):
 * the parent of lyhd's two processes takes a client's socket from the
 * protocol process only if the kernel says it is a connection of lyhd's own
 * listening socket. Plain values, no library types. */
#ifndef LYH_PLATFORM_UNIXSOCK_H
#define LYH_PLATFORM_UNIXSOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The device and inode (as stat(2) gives them) of the socket file fd's
 * socket is bound to; an accepted connection shares its listener's. 0,
 * -ENOENT (not bound to a file: a socketpair, a client's own end), or
 * -errno (not a unix socket, no CAP_NET_ADMIN over its namespace). */
int unixsock_file_of(int fd, uint64_t *ret_dev, uint64_t *ret_ino);

/* Has the other end of the connected socket fd gone (closed or shut down
 * its writing)? A socket that cannot be polled counts as gone. */
bool unixsock_peer_gone(int fd);

/* The most fds one datagram carries (the kernel's SCM_MAX_FD). */
#define UNIXSOCK_MAX_FDS 253

/* sendmsg of one buffer with nfds (<= UNIXSOCK_MAX_FDS) fds in one
 * SCM_RIGHTS, MSG_NOSIGNAL added to flags, EINTR retried. What sendmsg
 * returns (-1 with errno). */
ssize_t unixsock_send_fds(int sock, const void *buf, size_t len, const int *fds, size_t nfds,
                          int flags);
/* recvmsg of one datagram into buf, its fds (close-on-exec) into
 * fds[UNIXSOCK_MAX_FDS]: room for all of them, so the kernel drops none
 * itself (it would release them in this thread), and every one is the
 * caller's whatever the return (*ret_nfds). *ret_msg_flags: recvmsg's
 * (MSG_TRUNC: the datagram was cut; MSG_CTRUNC: fds were, for want of fd
 * numbers). EINTR retried. What recvmsg returns (-1 with errno). */
ssize_t unixsock_recv_fds(int sock, void *buf, size_t cap, int flags, int *fds, size_t *ret_nfds,
                          int *ret_msg_flags);

#endif
