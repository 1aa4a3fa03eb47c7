/* audit_names: `lyh audit summary --by-name`, counts per DNS name.
 *
 * A dns record names one query (detail name=N, action answered, denied,
 * nodata, refused or failed); a flow record of a session with a forwarder
 * names what its destination had resolved from (detail names=a,b). Both are
 * counted under each name they carry. Pure: no I/O, no connection; memory is
 * bounded by max_names (events about further names go to overflow totals). */
#ifndef LYH_AUDIT_NAMES_H
#define LYH_AUDIT_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "lianyaohu.pb.h"

#define AUDIT_NAMES_NAME_MAX 253 /* a DNS name's text, without the NUL */
#define AUDIT_NAMES_MAX 20000u

struct audit_name {
    char name[AUDIT_NAMES_NAME_MAX + 1]; /* "" : slot free (internal) */
    uint64_t queries;                    /* dns records of this name */
    uint64_t denied;                     /* ... refused by the allowlist or policy (NXDOMAIN) */
    uint64_t failed;                     /* ... the resolver did not answer (SERVFAIL) */
    uint64_t flows_allowed;              /* flow records naming it, verdict allowed */
    uint64_t flows_denied;               /* ... denied */
};

struct audit_names {
    struct audit_name *slots; /* owned */
    size_t n_slots;           /* a power of two */
    size_t n;                 /* distinct names stored */
    size_t max_names;
    uint64_t dns, flows;      /* records counted (a flow without names: not counted) */
    uint64_t overflow;        /* counts for names beyond max_names (or a crafted cluster) */
    uint64_t odd;             /* names that are not DNS names (not counted) */
    uint64_t seed;            /* of the hash (random) */
};

/* -ENOMEM, -EINVAL (max_names 0). */
int audit_names_init(struct audit_names *t, size_t max_names);
/* Count one event (others than dns and flow records are ignored). A name
 * matching pattern (NULL: any; "name" or "*.name", see dn_match) is counted.
 * -ENOMEM when the table could not grow. */
int audit_names_add(struct audit_names *t, const lianyaohu_v1_AuditEvent *ev, const char *pattern);
/* Compact into a sorted array (queries + flows descending, then name) in
 * place; afterwards the table can only be freed. */
void audit_names_sort(struct audit_names *t, const struct audit_name **ret, size_t *ret_n);
void audit_names_done(struct audit_names *t); /* accepts a zeroed table */

/* One line: the table's (padded like audit_names_header()) or a JSON object
 * {"name","queries","denied","failed","flows_allowed","flows_denied"}. */
const char *audit_names_header(void);
int audit_names_table_line(const struct audit_name *n, char *buf, size_t len);
int audit_names_json_line(const struct audit_name *n, char *buf, size_t len);

#endif
