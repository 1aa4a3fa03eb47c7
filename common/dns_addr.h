/* A resolver's address as lyh takes it (--dns, network.dns, the system's
 * files): an IPv4 or IPv6 literal, no port or scope, and one lyhd can ask
 * from a socket bound to the VPN interface: not unspecified, loopback,
 * multicast, link-local or IPv4-mapped. The CLI checks early, lyhd again.
 * Pure. 0 or -EINVAL. */
#ifndef LYH_COMMON_DNS_ADDR_H
#define LYH_COMMON_DNS_ADDR_H

#include <stdint.h>
#include <sys/socket.h>

#define DNS_ADDR_TEXT_MAX 46 /* INET6_ADDRSTRLEN */

/* *ret_family AF_INET (addr[0..3]) or AF_INET6; canon (DNS_ADDR_TEXT_MAX
 * bytes, may be NULL) gets the canonical spelling. */
int dns_addr_parse(const char *text, int *ret_family, uint8_t addr[16], char *canon);

/* addr (AF_INET: 4 bytes, AF_INET6: 16, network order) and port into *ss;
 * returns the sockaddr's length. */
socklen_t dns_sockaddr(int family, const void *addr, uint16_t port, struct sockaddr_storage *ss);

#endif
