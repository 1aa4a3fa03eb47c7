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
#include "platform/linux/nft_render.h"

struct lyhd;
struct session;
struct nft;
struct route_sock;

struct guard {
    struct nft *nft;          /* one netlink socket for the daemon's lifetime */
    struct route_sock *route; /* one rtnetlink socket for preflights */
    struct cg_root cg;
    bool have_cgroup;         /* cgroup v2 usable: session scope */
    struct nftr_base_params base;
};

/* Open nft and cgroups, make sure the base table exists (rebuilding it if
 * someone flushed it, logged), then reconcile: live sessions whose processes
 * run are re-adopted (their chains rebuilt if missing), the rest torn down,
 * chains and cgroups state.db does not know are removed. Before serving. */
int guard_init(struct lyhd *d, char *why, size_t whylen);
void guard_free(struct guard *g); /* accepts NULL */

/* Render the chain of a session from its spec (pure, for --print-firewall too). */
int guard_render_session(struct lyhd *d, const struct session *s, struct nftr_chain **ret);
/* Install the session's chain (the row must already be committed with chain set). */
int guard_session_add(struct lyhd *d, struct session *s, char *why, size_t whylen);
/* Remove the session's chain (and map element). Missing = done. */
int guard_session_del(struct lyhd *d, struct session *s);

#endif
