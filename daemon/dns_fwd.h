/* dns_fwd: a session's DNS forwarder (its privileged half; the queries and
 * answers themselves are read in the protocol process, dns_relay.c).
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
struct pmsg_dns_answer;
struct pmsg_dns_record;

/* Start the forwarder of s (s->spec: iface, resolvers). port 0: pick a free
 * one (then set s->spec.dns_port); else listen on that port (a restarted lyhd
 * taking its sessions back). why says what failed. */
int dns_fwd_start(struct lyhd *d, struct session *s, char *why, size_t whylen);

/* Tell the protocol process to serve s (its sockets go along). Nothing when
 * that process is not running: it hears of every session when it starts. */
int dns_fwd_announce(struct lyhd *d, struct session *s);
/* Every session with a forwarder (the protocol process just started). */
void dns_fwd_announce_all(struct lyhd *d);
/* The admin policy's domain lists, to the protocol process. */
int dns_fwd_send_policy(struct lyhd *d);

/* The protocol process's word, checked again (see dns_fwd.c): the addresses
 * an answer gave (with an allowlist put in the session's set; -EPERM for a
 * name the session may not resolve, -ENOENT for no such session, -EBADMSG
 * for an address in the ranges chain s-<id> refuses: the relay keeps those
 * out itself, so only a compromised protocol process asks),
 * and a query's outcome for the audit log. */
int dns_fwd_on_answer(struct lyhd *d, const struct pmsg_dns_answer *m);
void dns_fwd_on_record(struct lyhd *d, const struct pmsg_dns_record *m);

/* Stop listening (the protocol process is told), free. Accepts NULL. */
void dns_fwd_free(struct dns_fwd *f);
/* Sets proto4/proto6 from every forwarding session's resolvers (after the
 * table was made anew; starts and ends keep them by themselves). */
void dns_fwd_resolvers_sync(struct lyhd *d);

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

/* The session's rules were installed anew (the table rebuilt, or a piece of
 * them put back), so its domain sets are empty: every mapping counts as
 * expired, and the next answer for a name adds its addresses afresh instead
 * of renewing elements that are gone (whose delete would fail the answer).
 * Accepts NULL. */
void dns_fwd_sets_emptied(struct dns_fwd *f);

/* fds the forwarder holds (listeners, upstream sockets, TCP clients). */
unsigned dns_fwd_fds(const struct dns_fwd *f);

#endif
