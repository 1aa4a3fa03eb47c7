/* Which file a unix stream socket belongs to, from the kernel (SIOCUNIXFILE):
 * the parent of lyhd's two processes takes a client's socket from the
 * protocol process only if the kernel says it is a connection of lyhd's own
 * listening socket. Plain values, no library types. */
#ifndef LYH_PLATFORM_UNIXSOCK_H
#define LYH_PLATFORM_UNIXSOCK_H

#include <stdbool.h>
#include <stdint.h>

/* The device and inode (as stat(2) gives them) of the socket file fd's
 * socket is bound to; an accepted connection shares its listener's. 0,
 * -ENOENT (not bound to a file: a socketpair, a client's own end), or
 * -errno (not a unix socket, no CAP_NET_ADMIN over its namespace). */
int unixsock_file_of(int fd, uint64_t *ret_dev, uint64_t *ret_ino);

/* Has the other end of the connected socket fd gone (closed or shut down
 * its writing)? A socket that cannot be polled counts as gone. */
bool unixsock_peer_gone(int fd);

#endif
