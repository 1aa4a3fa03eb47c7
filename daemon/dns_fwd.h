/* dns_fwd: a session's DNS forwarder.
 *
 * Chain dnsnat sends every port-53 flow of a session (UDP and TCP, to any
 * address: a LAN router, a public resolver, 127.0.0.53) to 127.0.0.1:P or
 * [::1]:P, where this forwarder listens; P identifies the session. Each query
 * is parsed (common/dns_msg.c), asked again by lyhd from a socket bound to the
 * session's VPN interface, to the resolvers chosen for it, and the answer is
 * checked (id, question) before it goes back. Nothing the agent sent is
 * passed upstream as bytes: lyhd writes its own query from the parsed
 * question. Every query is recorded (audit kind dns).
 *
 * A query never leaves by another interface: the upstream socket is bound to
 * the interface (SO_BINDTODEVICE), so without a route through it the send
 * fails instead of finding another way. */
#ifndef LYHD_DNS_FWD_H
#define LYHD_DNS_FWD_H

#include <stddef.h>
#include <stdint.h>

struct lyhd;
struct session;
struct dns_fwd;

/* Start the forwarder of s (s->spec: iface, resolvers). port 0: pick a free
 * one (then set s->spec.dns_port); else listen on that port (a restarted lyhd
 * taking its sessions back). why says what failed. */
int dns_fwd_start(struct lyhd *d, struct session *s, char *why, size_t whylen);

/* Stop listening, drop every query in flight, free. Accepts NULL. */
void dns_fwd_free(struct dns_fwd *f);

/* For a flow record of the session to addr: "names=a.example,b.example"
 * (what resolved to it for the session), and with an allowlist
 * "dns=expired names=... expired_s_ago=N" (its set element is gone) or
 * "dns=none" (no name did); else "". buf holds len bytes. */
void dns_fwd_flow_note(struct dns_fwd *f, int family, const uint8_t *addr, char *buf,
                       size_t len);

/* The admin policy changed: addresses that only names it no longer allows had
 * opened leave the session's sets (with an allowlist), and their mappings
 * count as expired. Returns how many left. Accepts NULL. */
size_t dns_fwd_policy_changed(struct dns_fwd *f);

/* fds the forwarder holds (listeners, upstream sockets, TCP clients). */
unsigned dns_fwd_fds(const struct dns_fwd *f);

#endif
