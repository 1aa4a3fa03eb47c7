/* The daemon's egress guard: the nftables table, the session cgroups, and the
 * startup reconciliation between state.db and the kernel.
 *
 * Order of every change: state.db first (one transaction), then the kernel.
 * So after a crash the reaper finds in state.db at least everything that may
 * exist in the kernel. */
#ifndef LYHD_GUARD_H
#define LYHD_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/linux/cgroup.h"
#include "daemon/guard_spec.h"
#include "platform/linux/nft_render.h"
#include "storage/store.h"

struct lyhd;
struct session;
struct nft;
struct nft_counters;
struct route_sock;

struct guard {
    struct nft *nft;          /* one netlink socket for the daemon's lifetime */
    struct route_sock *route; /* one rtnetlink socket for preflights */
    /* The last preflight that passed (guard_check_vpn), kept while the
     * kernel announces no change of links, addresses, routes or rules on
     * route_watch (-1: none, nothing kept) and for at most
     * GUARD_VPN_CHECK_KEEP_MS. */
    int route_watch;
    struct {
        bool valid, allow_non_default_route, ipv6_blocked;
        char iface[16];
        uint64_t at_ms;
    } vpn_ok;
    struct cg_root cg;
    bool have_cgroup;         /* cgroup v2 usable: session scope */
    struct nftr_base_params base;
    /* The log rules of session and shared chains: base.log's, and for the
     * new flows out of the VPN interface (shared by their rules) the rate
     * audit_flow_rate set at start (raised later by guard_set_flow_rate when
     * audit.db's writes, measured again, went faster). Not in the base itself (the
     * catch-all's), which stays fixed: probe_base compares the base rule by
     * rule, and a measurement differing at each start must not make every
     * restart rebuild the table. Chains of adopted sessions keep the rate
     * they were made with. */
    struct nftr_log_params flow_log;
    /* Sessions may listen (seccomp lets bind/listen/accept through): the
     * base's input chain refuses every packet for a session's socket from
     * any interface but lo. Decided once at startup; when false,
     * listeners_why says why in plain words (RunStarted note, log). */
    bool listeners;
    /* Sets proto4/proto6 may not hold what dns_fwd last put there (the table
     * was made anew): dns_fwd fills them again. */
    bool proto_sets_stale;
    char listeners_why[200];
    /* The next loopback slot to give a session (its conntrack marks, see
     * nft_render.h): counted on from a random start. */
    uint32_t next_slot;
    /* Ruleset change notifications: after a change not lyhd's own (its nft
     * socket's port is in each notice), a lost notice, and once a minute, the
     * base is checked again shortly; if someone else removed or changed our
     * table it is rebuilt with every live chain, and that is on record. */
    int watch_fd;
    struct event *ev_watch;
    struct event *ev_check;
    struct event *ev_sweep;  /* a check once a minute whatever was announced */
    const char *check_why;   /* what the next check is for (--timing) */
    /* Adopted sessions whose DNS forwarder could not listen again: retried. */
    struct event *ev_dns_retry;
    /* The last launch probe (guard_launch_probe): when, and what it found. */
    uint64_t probe_ms;
    char probe_problem[500];
};

/* Open nft and cgroups, make sure the base table exists (rebuilding it if
 * someone flushed it, logged), then reconcile: live sessions whose processes
 * run are re-adopted (their chains rebuilt if missing), the rest torn down,
 * chains and cgroups state.db does not know are removed. Before serving. */
int guard_init(struct lyhd *d, char *why, size_t whylen);
/* The rate of the new flows out of the VPN interface that the chains made
 * from now on log (and half a second's worth as their burst, at least the
 * base's); chains already in place keep theirs. No guard yet: nothing. */
void guard_set_flow_rate(struct lyhd *d, unsigned rate);
/* Accepts NULL. With remove_base (no session left running) the empty cgroup
 * subtree is removed too, so a stopped lyhd leaves nothing behind. */
void guard_free(struct guard *g, bool remove_base);

/* Is iface a usable VPN interface and do the kernel's routes use it (see
 * platform/linux/route.h)? Says whether IPv6 must be blocked. why names the
 * interface and what is wrong. */
int guard_check_vpn(struct lyhd *d, const char *iface, bool allow_non_default_route,
                    bool *ret_ipv6_blocked, char *why, size_t whylen);

/* Packets the session chain's DNS forwarder rules counted (each gives its
 * flow the DNS mark): an answer only for a session's own chain built once by
 * this lyhd (s->dns_marks_counted); -ESTALE for one rebuilt, replaced or
 * shared (its counters began later or count others), else 0 or -errno (no
 * chain, no such counted rule). */
int guard_dns_flows_marked(struct lyhd *d, const struct session *s, uint64_t *ret);

/* How long a passed preflight is kept at most, changes or not (guard.c). */
#define GUARD_VPN_CHECK_KEEP_MS 10000

/* Would a launch get its cgroup now? Creates and removes a probe cgroup (as
 * Run does, base rebuilt if someone removed it), at most once per
 * GUARD_PROBE_MS (the last answer is given meanwhile: Status answers anyone).
 * problem: "" when it worked (or there is no cgroup v2 to probe), else what
 * fails every launch and what to do, in plain words. */
#define GUARD_PROBE_MS 2000
void guard_launch_probe(struct lyhd *d, char *problem, size_t len);
/* Create the session cgroup name (cg_create). When the cgroup subtree
 * vanished while lyhd runs (someone removed the empty base, e.g. another
 * lyhd sharing lyhd's cgroup), it is created again at the same path first,
 * logged and on record; without that every later launch would fail. */
int guard_cgroup_create(struct lyhd *d, const char *name, uint64_t *ret_id, int *ret_dir_fd,
                        int *ret_procs_fd);

/* The shared chain of g (LYH-U-<uid>, LYH-<uid>) rendered from spec, as it
 * is installed (for replacing it in a batch: live narrowing). */
int guard_render_shared(struct lyhd *d, const struct store_guard *g, const struct gspec *spec,
                        bool accept_unlogged, struct nftr_chain **ret);
/* Put spec into the guard row g (encoded spec and its rules hash). */
int guard_shared_set_spec(struct store_guard *g, const struct gspec *spec);

/* Render the chain a session's scope uses, from its spec (pure; for
 * --print-firewall too). */
int guard_render_session(struct lyhd *d, const struct session *s, struct nftr_chain **ret);
/* Render the session in the data layout, when it gets it (a session of its own
 * chain with the default policy on a base with it: guard-as-data.md); -EINVAL
 * when it does not. */
int guard_render_data(struct lyhd *d, const struct session *s, struct nftr_data **ret);
/* The session's own counters (its chain's, or its named counters in the data
 * layout). */
int guard_session_counters(struct lyhd *d, const struct session *s, struct nft_counters *ret);
/* Install the session's chain (the row must already be committed with chain set). */
int guard_session_add(struct lyhd *d, struct session *s, char *why, size_t whylen);
/* Remove the session's chain (and map element). Missing = done. */
int guard_session_del(struct lyhd *d, struct session *s);

/* The shared-user scope (--shared-user-firewall, Install): one chain LYH-U-<uid>
 * that matches every socket of the user, refcounted in state.db by explicit
 * installs and by the sessions that use it. A request whose rules differ from
 * the installed ones is refused (-EEXIST, why says how): the scope is shared,
 * so one user cannot hold two different policies at once. */
/* scope: SCOPE_USER (LYH-U-<uid>, every socket of the user) or SCOPE_UID_GID
 * (LYH-<uid>, the user's guard-gid sockets: the fallback without cgroup v2,
 * shared by the user's concurrent sessions). */
int guard_shared_acquire(struct lyhd *d, uint32_t uid, int scope, const struct gspec *spec,
                         struct store_guard *ret, char *why, size_t whylen);
/* Drop one reference; the chain goes with the last. -ENOENT when none. */
int guard_shared_release(struct lyhd *d, uint32_t uid, int scope, struct store_guard *ret);

#endif
