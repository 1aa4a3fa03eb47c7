/* What a CapabilitiesReply says, from a few facts of this daemon: built by
 * the parent (rpc_capabilities) and by the protocol process (from PMSG_CAPS,
 * for a Capabilities call on an idle connection), so both say the same. */
#ifndef LYHD_CAPS_H
#define LYHD_CAPS_H

#include <stdbool.h>

#include "lianyaohu.pb-c.h"

#define CAPS_FIXED_FEATURES 15

struct caps_facts {
    bool cgroup2;       /* the session scope (cgroup v2) works here */
    bool listeners;     /* sessions may listen */
    int landlock_abi;   /* 0: none */
    unsigned max_fds;   /* per message */
    unsigned max_calls; /* in flight per connection */
};

/* The reply and the storage its pointers point into. */
struct caps_reply {
    Lianyaohu__V1__CapabilitiesReply msg;
    char *feat[CAPS_FIXED_FEATURES + 3];
    char landlock[32];
};

/* Fill r from f (pure). r must not move while r->msg is used. */
void caps_build(const struct caps_facts *f, struct caps_reply *r);

struct lyhd;
/* The parent's facts. */
void caps_facts_of(const struct lyhd *d, struct caps_facts *f);

#endif
