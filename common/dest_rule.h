/* Destination rules for --allow-dest, --deny-dest and --lan-allow: the text
 * grammar, the typed form the protocol carries (RunRequest.allow/deny/
 * lan_allow, DestRule), canonical print-back, containment, and the one
 * definition of the blocked (LAN/reserved) ranges that the nftables renderer
 * also uses.
 *
 * Grammar (one form per family; anything else is refused with a message):
 *   IPv4:  A.B.C.D[/PREFIX][:PORT[-PORT]]      10.0.0.0/8:443, 192.0.2.1
 *   IPv6:  ADDR[/PREFIX]                      fd00::/8, ::1  (no port)
 *          [ADDR[/PREFIX]]:PORT[-PORT]        [fd00::/8]:80-90, [fd00::1]:443
 *          [ADDR[/PREFIX]]                    [fd00::1]  (same as unbracketed)
 * The brackets enclose the whole network, prefix included; `[fd00::]/8:443`
 * is refused with a pointer to `[fd00::/8]:443`. IPv4 is dotted quad only
 * (four decimal parts 0-255, no leading zeros). Host bits beyond the prefix
 * must be zero. Ports are 1-65535, decimal, no sign, no leading zeros; no
 * port means any port. Names are refused: rules take addresses.
 *
 * Pure: no I/O, no logging, no allocation, no DNS. Return convention: 0 or
 * -errno; ret_* and output buffers are written only on success; `why` (may
 * be NULL) gets a one-line message only on failure (DR_WHY_MAX suffices). */
#ifndef LYH_DEST_RULE_H
#define LYH_DEST_RULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h> /* AF_INET, AF_INET6 */

/* Longest rule text accepted by dr_parse(), without the NUL. */
#define DR_TEXT_MAX 128u
/* Enough for any dr_format() output, NUL included
 * ("[" 45-char address "/128]:65535-65535"). */
#define DR_FORMAT_MAX 72u
/* Enough for any message this module writes. */
#define DR_WHY_MAX 384u

struct dr_rule {
    int family;          /* AF_INET or AF_INET6 */
    uint8_t addr[16];    /* network order; IPv4 in addr[0..3], addr[4..15] zero;
                            bits beyond prefix_len zero */
    uint8_t prefix_len;  /* 0-32 (IPv4) or 0-128 (IPv6) */
    uint16_t port_min;   /* 0 = any port, and then port_max is 0 too */
    uint16_t port_max;   /* else 1 <= port_min <= port_max; a single port has
                            port_max == port_min */
};

/* Parse RULE per the grammar above. -EINVAL with a message on any error. */
int dr_parse(const char *text, struct dr_rule *ret, char *why, size_t whylen);

/* Build a rule from its wire form (DestRule): addr_len 4 or 16 picks the
 * family; port_min 0 = any port (port_max must then be 0); port_max 0 =
 * port_min. Everything is validated as dr_parse() would, host bits included
 * (refused, not masked): this is the daemon's authoritative check. -EINVAL. */
int dr_from_parts(const uint8_t *addr, size_t addr_len, uint32_t prefix_len, uint32_t port_min,
                  uint32_t port_max, struct dr_rule *ret, char *why, size_t whylen);

/* 0 when r satisfies every invariant of struct dr_rule, else -EINVAL. */
int dr_check(const struct dr_rule *r, char *why, size_t whylen);

/* Canonical text: inet_ntop's address (RFC 5952 for IPv6), "/P" unless the
 * prefix is the full length, ":P" or ":A-B" when ports are set, IPv6 in
 * brackets exactly when a port follows. dr_parse() of the output gives back
 * an equal rule. -EINVAL for an invalid rule, -ENOSPC when len is too small
 * (DR_FORMAT_MAX always suffices); buf is untouched on failure. */
int dr_format(const struct dr_rule *r, char *buf, size_t len);

/* Is r a loopback destination (inside 127.0.0.0/8, or ::1 itself)? */
bool dr_is_loopback(const struct dr_rule *r);

/* Field-wise equality (struct padding is never compared). */
bool dr_equal(const struct dr_rule *a, const struct dr_rule *b);

/* True when every (address, port) inner matches, outer matches too: same
 * family, outer's prefix no longer than inner's and covering it, and inner's
 * ports within outer's (no port = 0-65535). False for invalid rules. For
 * rules without ports this is plain prefix containment. */
bool dr_contains(const struct dr_rule *outer, const struct dr_rule *inner);

/* True when r's network lies entirely inside one blocked range of its family
 * (ports ignored): the condition for a --lan-allow exception, which can only
 * reopen what the blocked ranges close. A network spanning two adjacent
 * ranges (224.0.0.0/3) is refused: fail closed. False for invalid rules. */
bool dr_in_blocked_ranges(const struct dr_rule *r);
/* Is the host address addr (family AF_INET: addr[0..3], or AF_INET6) in a
 * blocked range: LAN, loopback, link-local, CGN, multicast, documentation...?
 * An address that is not one (bad family) counts as blocked. */
bool dr_addr_blocked(int family, const uint8_t addr[16]);

/* The destinations every session refuses unless a LAN exception reopens
 * them: this-network, private, CGN, loopback, link-local, IETF protocol
 * assignments, documentation, 6to4 relay anycast, benchmarking, multicast,
 * reserved (IPv4); unspecified, loopback, IPv4-mapped, local-use NAT64,
 * discard-only, documentation, ULA, link-local, multicast (IPv6). Any port.
 * The single definition: the nftables renderer builds its sets from these. */
#define DR_BLOCKED_V4_COUNT 15u
#define DR_BLOCKED_V6_COUNT 9u
extern const struct dr_rule dr_blocked_v4[DR_BLOCKED_V4_COUNT];
extern const struct dr_rule dr_blocked_v6[DR_BLOCKED_V6_COUNT];

#endif
