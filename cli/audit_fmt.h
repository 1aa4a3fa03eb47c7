/* The pure half of `lyh audit`: parsing the filter options and rendering audit
 * events (table, JSON Lines, CSV, the one-line `lyh run --monitor` form) and
 * the per-destination summary. No I/O, no logging, no connection: everything
 * here is unit-tested without a daemon (tests/unit/cli/test_audit_fmt.c).
 * The output formats are specified in docs/audit.md ("CLI output").
 *
 * Contract. Functions that can fail return 0 or -errno and write ret_* and
 * output buffers only on success (a buffer that was too small may hold a
 * partial line: treat its content as undefined). Parsers return -EINVAL and
 * put a one-line reason in `why` (may be NULL; AUDIT_FMT_WHY_MAX suffices);
 * the reason names neither the flag nor the whole value: the caller prints
 * both in front of it ("--port '70000': port 70000 is out of range").
 * Renderers write one line without its terminator and return -ENOSPC when len
 * is too small; AUDIT_FMT_LINE_MAX is always enough for any event. Local times
 * use the process time zone (TZ, localtime_r). */
#ifndef LYH_AUDIT_FMT_H
#define LYH_AUDIT_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lianyaohu.pb.h"

#define AUDIT_FMT_WHY_MAX 384u
/* Enough for any line rendered from any decodable AuditEvent, NUL included
 * (checked at compile time against the nanopb bounds in audit_fmt.c). */
#define AUDIT_FMT_LINE_MAX 40960u

/* ---- parsing options ---------------------------------------------------------- */

/* --since / --until. now_us is "now" (microseconds since the epoch; the caller
 * reads the clock once so both flags use the same now). Forms:
 *   DURATION   one or more NUMBER UNIT with UNIT s m h d w: 30s 15m 2h 7d 1h30m;
 *              now minus that (it must not reach before 1970)
 *   @SECONDS[.FRACTION]   a unix time: @1733000000, @1733000000.25
 *   0          the beginning of the log (returns 0, which the protocol reads as
 *              "open"; same as @0)
 *   RFC 3339   DATE[(T|t|space)HH:MM[:SS[.FRACTION]]][Z|z|+HH:MM|-HH:MM]
 *              with DATE = YYYY-MM-DD (1970-9999). Without a zone it is local
 *              time; a local time that does not exist (skipped by a DST
 *              change) is refused. Seconds 60 (a leap second) are accepted
 *              only where one can be (23:59:60 UTC on the last day of a month)
 *              and mean the second after (POSIX time has no leap seconds).
 * Fractions are truncated to microseconds. */
int audit_fmt_parse_time(const char *text, uint64_t now_us, uint64_t *ret_us, char *why,
                         size_t whylen);

/* --port N or N-M: decimal 1-65535, no sign or leading zero, N <= M. */
int audit_fmt_parse_port(const char *text, uint16_t *ret_min, uint16_t *ret_max, char *why,
                         size_t whylen);

/* --proto: tcp udp icmp icmpv6 sctp udplite (any case), or a number 1-255.
 * 0 is refused: the protocol reads protocol 0 as "any". */
int audit_fmt_parse_proto(const char *text, uint32_t *ret, char *why, size_t whylen);

/* A decimal number without sign, the whole of s[0..n); *ret <= max. -ERANGE
 * when larger, -EINVAL when not a number. */
int audit_fmt_parse_u64(const char *s, size_t n, uint64_t max, uint64_t *ret);

/* --kind flow|session|policy|request|gap|guard. */
int audit_fmt_parse_kind(const char *text, lianyaohu_v1_EventKind *ret, char *why,
                         size_t whylen);

/* --verdict allowed|denied. */
int audit_fmt_parse_verdict(const char *text, lianyaohu_v1_Verdict *ret, char *why,
                            size_t whylen);

/* --dst ADDR[/PREFIX] with the grammar of common/dest_rule.h, minus ports
 * (--port says those): fills addr (4 or 16 bytes) and prefix_len, and zeroes
 * the ports. Host bits must be zero, as for every rule. */
int audit_fmt_parse_dst(const char *text, lianyaohu_v1_DestRule *ret, char *why, size_t whylen);

/* --uid: a decimal uid 0-4294967294 (user names are resolved by the caller). */
int audit_fmt_parse_uid(const char *text, uint32_t *ret, char *why, size_t whylen);

/* --limit: decimal 1-4294967295. */
int audit_fmt_parse_limit(const char *text, uint32_t *ret, char *why, size_t whylen);

/* --session: a session id as `lyh sessions` shows it (16 hexadecimal
 * digits; lyhd takes 1-16), optionally with the table's "s:" prefix; upper
 * case is folded. Writes the id (without "s:") into ret (retlen >= 17). */
int audit_fmt_parse_session(const char *text, char *ret, size_t retlen, char *why,
                            size_t whylen);

/* ---- names ------------------------------------------------------------------- */

/* "flow", "session", ...; NULL for a kind without a name (unspecified or new). */
const char *audit_fmt_kind_name(int kind);
/* "tcp", "udp", "icmp", "icmpv6", "sctp", "udplite"; NULL otherwise. */
const char *audit_fmt_proto_name(uint32_t proto);

/* ---- rendering one event ----------------------------------------------------- */

/* The table line, local time, columns padded to fixed widths, no trailing
 * blanks; every string from the event is made safe for a terminal (control
 * bytes, C1 controls, invalid UTF-8 and bidi controls become \xNN / \uNNNN).
 *   flow:  TIME  KIND  VERDICT  SESSION  UID  PROTO  SRC -> DST  IFACE
 *   other: TIME  KIND  ACTION  SESSION  UID  DETAIL
 * e.g. (one line)
 *   2026-12-01 10:00:00.123  flow     denied    s:0123456789abcdef  uid 1000   udp
 *   10.0.0.1:5353 -> 192.168.1.5:53                  eth0 */
int audit_fmt_table_line(const lianyaohu_v1_AuditEvent *ev, char *buf, size_t len);

/* One JSON object (a JSON Lines record). Keys and which appear per kind: see
 * docs/audit.md. Strings are escaped per RFC 8259; invalid UTF-8 becomes
 * U+FFFD. */
int audit_fmt_json_line(const lianyaohu_v1_AuditEvent *ev, char *buf, size_t len);

/* One CSV record (RFC 4180 quoting; the caller ends it with CRLF), the columns
 * of audit_fmt_csv_header(). */
int audit_fmt_csv_line(const lianyaohu_v1_AuditEvent *ev, char *buf, size_t len);
/* The header record, without its CRLF. */
const char *audit_fmt_csv_header(void);

/* `lyh run --monitor`: "HH:MM:SS denied tcp 192.168.1.5:443 (LAN address)",
 * local time. The reason comes from the destination: loopback, link-local,
 * LAN, multicast, reserved; else a `why=` or `reason=` key in the detail;
 * else "policy deny" (the interface the flow would have left by is added when
 * there is one, since the daemon also refuses flows not routed via the VPN).
 * Non-flow events (notes) render as "HH:MM:SS KIND ACTION DETAIL", a gap as
 * "HH:MM:SS gap: N flow events were not logged (DETAIL)". */
int audit_fmt_monitor_line(const lianyaohu_v1_AuditEvent *ev, char *buf, size_t len);

/* What the caller of --monitor knows about its session, for sharper reasons:
 * with vpn set, a public destination refused on another interface is "not via
 * the VPN interface (eth0)" and one on the VPN is "policy deny"; with
 * ipv6_blocked, a public IPv6 destination is "IPv6 blocked". */
struct audit_fmt_monitor_ctx {
    const char *vpn;   /* the session's VPN interface, or NULL */
    bool ipv6_blocked; /* RunStarted.ipv6_blocked */
};
int audit_fmt_monitor_line_ctx(const lianyaohu_v1_AuditEvent *ev,
                               const struct audit_fmt_monitor_ctx *ctx, char *buf, size_t len);

/* ---- summary: counts per destination ------------------------------------------ */

struct audit_fmt_dest {
    uint8_t used;       /* slot taken (internal) */
    uint8_t addr_len;   /* 0, 4 or 16 */
    uint8_t addr[16];
    uint32_t family;    /* as in the event */
    uint32_t protocol;
    uint32_t port;      /* destination port, 0 when none */
    uint64_t allowed;   /* flow events with verdict allowed */
    uint64_t denied;    /* ... denied */
};

/* An open-addressing hash table keyed by (family, address, port, protocol).
 * Memory is bounded by max_dests: once that many distinct destinations are
 * stored, events for new ones are only counted in the overflow totals. Owns
 * slots; audit_fmt_sum_done() frees, accepts a zeroed or half-built table. */
struct audit_fmt_sum {
    struct audit_fmt_dest *slots; /* owned */
    size_t n_slots;               /* a power of two */
    size_t n;                     /* distinct destinations stored */
    size_t max_dests;
    uint64_t flows;               /* flow events seen (allowed or denied) */
    uint64_t other;               /* flow events with another verdict, not counted */
    uint64_t overflow_events;     /* flows to destinations beyond max_dests */
    uint64_t overflow_allowed, overflow_denied;
};

#define AUDIT_FMT_SUM_MAX_DESTS 100000u

/* -ENOMEM, -EINVAL (max_dests 0). */
/* How many flows a gap record may have hidden from the period [since_us,
 * until_us) (until 0 = open): its `missed` for a flow gap; 0 for `requests`
 * gaps (refused requests, not flows); for `retention` gaps the flow records
 * removed (flow=N), and only when what was removed (oldest..newest) overlaps
 * the period. 0 for anything that is not a gap. */
uint64_t audit_fmt_gap_flows(const lianyaohu_v1_AuditEvent *ev, uint64_t since_us,
                             uint64_t until_us);

int audit_fmt_sum_init(struct audit_fmt_sum *s, size_t max_dests);
/* Count one event; events that are not flows are ignored. -ENOMEM when the
 * table could not grow (the event is then not counted). */
int audit_fmt_sum_add(struct audit_fmt_sum *s, const lianyaohu_v1_AuditEvent *ev);
/* Compact the table into a sorted array (total descending, then address,
 * port, protocol ascending) in place; the table can only be freed afterwards.
 * ret points into s->slots. */
void audit_fmt_sum_sort(struct audit_fmt_sum *s, const struct audit_fmt_dest **ret,
                        size_t *ret_n);
void audit_fmt_sum_done(struct audit_fmt_sum *s);

/* One summary line: "DESTINATION  PROTO  ALLOWED  DENIED  TOTAL" padded like
 * audit_fmt_sum_table_header(), or one JSON object
 * {"family","dst","dport","protocol","allowed","denied","total"}. */
int audit_fmt_sum_table_line(const struct audit_fmt_dest *d, char *buf, size_t len);
const char *audit_fmt_sum_table_header(void);
int audit_fmt_sum_json_line(const struct audit_fmt_dest *d, char *buf, size_t len);

#endif
