/* nft: installs and removes the egress guard in table `inet lianyaohu`.
 *
 * Every change is one nf_tables netlink transaction (NFNL_MSG_BATCH_BEGIN .. END):
 * it applies completely or not at all. Every message asks for an ACK and every ACK
 * is checked; if building any message fails, nothing is sent. Operations that act
 * on what they read first (ensure_base, the deletes) pin the ruleset generation they
 * read in the batch, so a concurrent change makes them retry instead of acting on
 * stale state. The rules come from nft_render.h; this module only encodes them.
 *
 * Contract for every function below: returns 0 or a negative errno (as the kernel
 * reported it for the first failing message, or -ENOMEM, -EINVAL, -EPROTO ...);
 * ret_* parameters are set only on success; nothing logs; calls block on the
 * netlink socket (a kernel round trip, no timeouts needed: nf_tables answers
 * synchronously). After a failed change nothing was changed, with one exception:
 * -ENOBUFS / -EPROTO from a change mean its ACKs were lost and the outcome is
 * unknown (re-read the state; the receive buffer is sized so this should not happen).
 * Needs CAP_NET_ADMIN in the network namespace of the caller; the socket and its
 * table belong to the network namespace nft_open() ran in. Not thread-safe.
 */
#ifndef LYH_PLATFORM_LINUX_NFT_H
#define LYH_PLATFORM_LINUX_NFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/linux/nft_render.h"

struct nft;

/* Open the (one, CLOEXEC) netfilter netlink socket and keep it for later calls. */
int nft_open(struct nft **ret);
void nft_close(struct nft *n); /* NULL ok */

/* The netlink port of n's socket: the kernel writes it into the header of
 * every change notification that n's requests caused. */
uint32_t nft_portid(const struct nft *n);

/* A netlink socket subscribed to the nftables change notifications of this
 * network namespace (NFNLGRP_NFTABLES): readable after any ruleset change,
 * ours included. Non-blocking, CLOEXEC; the caller closes the fd. */
int nft_watch_open(int *ret_fd);
/* Read what is queued without blocking (bounded). Returns how many
 * notifications were read that own_portid's socket did not cause and that do
 * not name another table than lyhd's (a generation message, which names none,
 * is not counted; an overrun, a datagram cut short or bytes that are not whole
 * messages count as one: something may have changed), or -errno on a socket
 * error. own_portid 0 counts every notification but other tables'. */
int nft_watch_drain(int fd, uint32_t own_portid);
/* The same count for one datagram of len bytes (any alignment). Pure. */
int nft_watch_foreign(const uint8_t *buf, size_t len, uint32_t own_portid);

/* nft_ensure_base() *ret_flags */
enum {
    NFT_BASE_CREATED = 1u << 0, /* the table was missing and has been created */
    NFT_BASE_REBUILT = 1u << 1, /* the table existed without our shape (flushed, a set
                                 * emptied, a base rule missing or foreign, dormant,
                                 * other parameters): it was deleted and built again
                                 * in the same transaction. All session and uid chains
                                 * are gone; re-add the live ones. Worth an audit record. */
};

/* Make sure the table has its base objects: sets lan4/lan6 with their elements, map
 * sessions (if p->cgroupv2), chains output and guarded with their rules. If the
 * table already has exactly that shape, nothing is changed and *ret_flags is 0.
 * Chains of sessions and uid scopes are not inspected. */
int nft_ensure_base(struct nft *n, const struct nftr_base_params *p, unsigned *ret_flags);

/* Session scope, one transaction: chain s-<id> with its rules, and the element
 * { cgroup_id : jump s-<id> } of map sessions; with c->lo_mark also chain lo-<id>
 * and the element { lo_mark : jump lo-<id> } of map loopback. -EEXIST if a chain
 * or an element already exists (nothing changed). -EINVAL if c is not a session
 * chain. */
int nft_session_add(struct nft *n, const struct nftr_chain *c);

/* Remove what exists of a session, one transaction: the map element of cgroup_id
 * (only if it jumps to `name`), then flush and delete chain `name`; likewise chain
 * lo-<id> and the element of map loopback that jumps to it (found by the mark of
 * cgroup_id, else by a scan of that map). cgroup_id 0 = unknown: chain only
 * (nft_list_sessions() tells which ids jump where). -ENOENT if none exists; -EBUSY if the element of cgroup_id jumps to another chain or the
 * chain is still referenced from elsewhere (nothing changed). name must be "s-*". */
int nft_session_del(struct nft *n, const char *name, uint64_t cgroup_id, uint32_t lo_mark);

/* What nft_session_add installed for a session, as its caller keeps it (the
 * chain is freed once installed): nft_session_objs_of fills it from the
 * chain nft_session_add took. */
struct nft_session_objs {
    char name[NFTR_NAME_MAX]; /* s-<id> */
    uint64_t cgroup_id;       /* its element of map sessions (and served, dnsport) */
    uint32_t lo_mark;         /* 0: no chain lo-<id>, loopback or served element */
    bool dns;                 /* its element of map dnsport */
    bool sets;                /* its domain sets a4-<id> and a6-<id> */
};
void nft_session_objs_of(const struct nftr_chain *c, struct nft_session_objs *ret);

/* Remove exactly o, one transaction and one round trip (nft_session_del
 * first asks the kernel what exists: nine more). Its elements are deleted by
 * key, whatever they jump to: only for what this process installed and kept
 * (a cgroup id is never another cgroup's, and a loopback mark is refused to a
 * second session while its element exists). When any of it is missing (or a
 * chain is still referenced), the transaction changes nothing and
 * nft_session_del does it; *ret_searched (may be NULL) says so. -EINVAL if o
 * is not a session's. */
int nft_session_del_known(struct nft *n, const struct nft_session_objs *o, bool *ret_searched);

/* A data session (docs/guard-as-data.md; the base with params.data), one
 * transaction: its named counters and limits, its log chains d-<id> (and
 * a-<id>) with their rule, then its elements, dlive's last. -EEXIST if any of
 * them exists (nothing changed), -EINVAL if d is not a data session's. */
int nft_data_add(struct nft *n, const struct nftr_data *d);

/* Remove d: its elements, its chains, its objects, in one transaction. When
 * some of it is gone already, or is named by something else, that changes
 * nothing, and each piece is removed in a transaction of its own instead,
 * what closes the session first (dlive, dvpn, dvpn6): *ret_searched (may be
 * NULL) says so. 0 once nothing of it is left, -ENOENT if nothing of it was
 * there, else the first error (what could be removed is gone). */
int nft_data_del(struct nft *n, const struct nftr_data *d, bool *ret_searched);

/* The data sessions' elements as the table holds them (every set of the layout,
 * and maps sessions, loopback, served, dnsport): what the check after a
 * foreign change and the startup's reconciliation compare with what a session
 * should have, and what the reaping of leftovers reads. About 24 dumps. */
struct nft_data_pieces;
int nft_data_pieces_read(struct nft *n, struct nft_data_pieces **ret);
void nft_data_pieces_free(struct nft_data_pieces *p); /* NULL ok */
/* Whether every element of d is there, with d's value, and no other element of
 * the layout's sets is keyed by d's cgroup. */
bool nft_data_pieces_whole(const struct nft_data_pieces *p, const struct nftr_data *d);
/* How many elements of the layout's sets (not maps sessions, loopback, served,
 * dnsport) are keyed by cgroup cg: a chain session's cgroup should have none. */
size_t nft_data_pieces_keyed(const struct nft_data_pieces *p, uint64_t cg);
/* The cgroup and the loopback mark of data session id, from elements that name
 * it: the cgroup from map dlog's jump to its d-<id> (else alog's to its
 * a-<id>), the mark from map dlogm's jump to its d-<id> (else the element of
 * map idrop or ilim whose value is its object), each 0 when none tells. The
 * mark is never taken from map dlomark: that element is keyed by a cgroup, and
 * a value someone changed would hand over another session's mark. -ENOENT if
 * no element names it. */
int nft_data_pieces_owner(const struct nft_data_pieces *p, const char *id, uint64_t *ret_cgroup_id,
                          uint32_t *ret_mark);
/* Remove whatever is left of data session id: every element keyed by its
 * cgroup in p, every element keyed by a mark alone that names its chain or
 * object, its `continue` elements of map sessions and, when set downmark pairs
 * mark with its cgroup, of map loopback (never a chain session's jump), its
 * chains and its objects, each in a transaction of its own (what is gone
 * already is skipped). 0 when something was removed, -ENOENT when nothing
 * was there, else the first error. For leftovers whose session lyhd has no
 * record of. */
int nft_data_reap(struct nft *n, const struct nft_data_pieces *p, const char *id, uint64_t cgroup_id,
                  uint32_t mark);
/* Remove every element of the layout's own sets (not maps sessions, loopback,
 * served, dnsport) keyed by cgroup cgroup_id in p: what a session that is not
 * a data session should not have. Same return values. */
int nft_data_reap_keyed(struct nft *n, const struct nft_data_pieces *p, uint64_t cgroup_id);

/* Uid scopes (NFTR_SCOPE_UID, NFTR_SCOPE_SHARED_USER), one transaction: chain
 * LYH-<uid> / LYH-U-<uid> with its rules, and the dispatch rule inserted at the
 * head of guarded / output, tagged (rule userdata comment) with the chain name.
 * -EEXIST if the chain exists. */
int nft_uid_chain_add(struct nft *n, const struct nftr_chain *c);

/* Remove a uid scope, one transaction: every dispatch rule tagged with its chain
 * name (found by that tag in guarded / output), then flush and delete the chain.
 * -ENOENT if neither the chain nor a dispatch rule exists. */
int nft_uid_chain_del(struct nft *n, enum nftr_scope scope, uint32_t uid);
/* uid's chain of c's scope and its dispatch replaced by c in one transaction (what
 * exists of the old ones removed, c installed), so the uid is never
 * unguarded in between: brings an older dispatch rule up to date. */
int nft_uid_chain_replace(struct nft *n, uint32_t uid, const struct nftr_chain *c);

/* A data session's rules replaced (live narrowing): its pieces `old` removed,
 * and the session installed anew, as a chain session (chain) or as data
 * (data; exactly one of the two). */
struct nft_data_swap {
    const struct nftr_data *old;
    const struct nftr_chain *chain;
    const struct nftr_data *data;
};

/* Replace the rules of existing chains, all in one transaction: for each chain,
 * flush its rules and append c->rules. Dispatch (map element, jump rule) is not
 * touched. The chains' counters start again at zero. In the same transaction,
 * each swap's data session is removed and installed anew. -ENOENT (nothing
 * changed) if one of the chains, or a piece of an old data session, does not
 * exist; -EINVAL for a base chain name, nothing to do, or a swap that is not
 * one. */
int nft_chains_replace(struct nft *n, const struct nftr_chain *const *chains, size_t count,
                       const struct nft_data_swap *swaps, size_t n_swaps);

/* Names of all chains in the table (output and guarded included), in kernel order.
 * *ret_names is a NULL-terminated array owned by the caller: nft_names_free().
 * -ENOENT if the table does not exist. */
int nft_list_chains(struct nft *n, char ***ret_names, size_t *ret_n);
void nft_names_free(char **names); /* NULL ok */

/* The elements of map sessions: cgroup id -> chain name. *ret is owned by the
 * caller: free(). For the startup reaper. -ENOENT without table or map. */
struct nft_session_elem {
    uint64_t cgroup_id;
    char chain[NFTR_NAME_MAX];
    uint32_t value; /* maps served and dnsport: the mark, the port (host order) */
};
int nft_list_sessions(struct nft *n, struct nft_session_elem **ret, size_t *ret_n);
/* The elements of map loopback, the same way: cgroup_id holds the mark, chain
 * the lo-<id> it jumps to. No map (sessions may not listen): none, 0. */
int nft_list_loopback(struct nft *n, struct nft_session_elem **ret, size_t *ret_n);
/* The elements of map served (cgroup id -> value: the served mark) and of map
 * dnsport (cgroup id -> value: the forwarder's port), chain "". No such map
 * (sessions may not listen; no DNS forwarding): none, 0. */
int nft_list_served(struct nft *n, struct nft_session_elem **ret, size_t *ret_n);
int nft_list_dnsport(struct nft *n, struct nft_session_elem **ret, size_t *ret_n);

/* Delete the whole table, one transaction. -ENOENT if it does not exist. */
int nft_table_delete(struct nft *n);

/* Sum of the counters of a chain's verdict rules (rules with a counter that end in
 * accept, resp. reject), and of its accept log rules (new flows each should have
 * logged; the rate limit may have thinned out the events, not the count).
 * -ENOENT without chain. */
struct nft_counters {
    uint64_t accept_packets;
    uint64_t accept_bytes;
    uint64_t reject_packets; /* every rejected packet is also a log event */
    uint64_t reject_bytes;
    uint64_t accept_flows;   /* new flows accepted: each one an allowed log event */
};
int nft_chain_counters(struct nft *n, const char *chain, struct nft_counters *ret);
/* The same for data session id, from its named counters: accepted packets
 * acct + dnsc (as a chain session counts its DNS flows' among them), new
 * flows anew + lnew, refusals refused + idrop (on input too, which a chain
 * session's lo-<id> does not count). *ret_dns (may be NULL): the packets of
 * its DNS flows. -ENOENT when a counter is missing. */
int nft_data_counters(struct nft *n, const char *id, struct nft_counters *ret, uint64_t *ret_dns);
/* Packets counted by the chain's rules that set the conntrack mark to mark
 * (`ct mark set MARK`). -ENOENT without chain; -ENODATA when no rule sets it
 * or one that does has no counter (nothing to go by). */
int nft_chain_mark_packets(struct nft *n, const char *chain, uint32_t mark, uint64_t *ret);

/* After a failed batch: which message the kernel refused first, e.g.
 * "rule 3 of chain s-abc", or "the transaction (commit or generation)" when the
 * kernel refused the batch as a whole; "" when nothing was refused (e.g. -ENOMEM
 * while building). Storage inside n, valid until the next call. For the log line. */
const char *nft_last_error_object(const struct nft *n);

/* A session's domain set (a4-<id> / a6-<id>): add count addresses (network
 * order; family's length used) with a timeout, in one transaction that waits
 * for the kernel's answer, so a connect after it finds them. refresh: they
 * are in the set already (the caller's record says so), and their timeout is
 * to be set anew (deleted and added again: before Linux 6.12 a re-add does
 * not touch the timeout). At most 64 at a time. */
int nft_domain_elems_add(struct nft *n, const char *set, int family, const uint8_t (*addrs)[16],
                         size_t count, uint64_t timeout_ms, bool refresh);
/* Remove addresses from a session's domain set (a narrowing); one
 * transaction; -ENOENT when one is not there (then nothing is removed). */
int nft_domain_elems_del(struct nft *n, const char *set, int family, const uint8_t (*addrs)[16],
                         size_t count);

/* Make a session's element of map dnsport send its DNS flows to port (added,
 * or replaced when it names another port, in one transaction). 0 when it was
 * already so, 1 when it was put there, -errno. */
int nft_session_dns_set(struct nft *n, uint64_t cgroup_id, uint16_t port);

/* Sets proto4/proto6 (nft_render.h): exactly these addresses (network
 * order, 4 or 16 bytes used), replacing what they held, in one transaction.
 * -E2BIG over NFT_PROTO_RESOLVERS_MAX of a family. */
#define NFT_PROTO_RESOLVERS_MAX 1024
int nft_proto_resolvers_set(struct nft *n, const uint8_t (*v4)[16], size_t n4,
                            const uint8_t (*v6)[16], size_t n6);

/* 1 if set or map `name` exists in the table, 0 if not, -errno. */
int nft_set_exists(struct nft *n, const char *name);

#endif
