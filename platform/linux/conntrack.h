/* conntrack: forget the flows of a session's DNS forwarder once it is gone.
 *
 * Chain dnsnat rewrites a session's port-53 flows to its forwarder (127.0.0.1
 * or ::1, port P). The rewrite lives in the flow's conntrack entry, which
 * outlives the session (30 s after a UDP answer, longer for TCP). A program of
 * a later session that asks the same address from the same local port (an
 * ephemeral port comes round again by chance) joins that entry: its query goes
 * to the dead forwarder's port, which its session's chain refuses. Forgetting
 * the entries when the forwarder closes gives its flow a new entry, rewritten
 * for its own session.
 *
 * Contract: 0 or -errno; no logging; blocks for at most CT_TIMEOUT_MS (a dump
 * of a large table is the slow part). */
#ifndef LYH_CONNTRACK_H
#define LYH_CONNTRACK_H

#include <stddef.h>
#include <stdint.h>

#define CT_TIMEOUT_MS 2000
/* The most entries one call deletes (a forwarder that took more queries in
 * the last minutes leaves the rest to time out). */
#define CT_FORGET_MAX 100000u

/* Delete every conntrack entry, of this network namespace, with mark (all 32
 * bits) and a reply direction from 127.0.0.1 or ::1, UDP or TCP source port
 * fwd_port (fwd_port > 0). *ret_n (may be NULL): how many went. An entry that
 * expired meanwhile is not an error. */
int ct_forget_forwarder(uint16_t fwd_port, uint32_t mark, unsigned *ret_n);

/* One conntrack message's payload (after struct nfgenmsg, len bytes): is it a
 * flow whose reply direction comes from 127.0.0.1 or ::1, UDP or TCP port
 * fwd_port? 1 yes, 0 no, -EBADMSG when its attributes are malformed. Exposed
 * for the unit test and the fuzzer. */
int ct_is_forwarder_flow(const void *attrs, size_t len, uint16_t fwd_port);

#endif
