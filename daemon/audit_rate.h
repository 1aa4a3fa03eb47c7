/* The rate limit on request records (refused requests, limits hit): a token
 * bucket per uid, so one user's flood of bad requests cannot push another
 * user's refusals out of the log, and a global bucket over all of them, so
 * many uids together cannot flood it either.
 *
 * Pure: no I/O, no clock (the caller passes a monotonic time in ms), no
 * allocation (a fixed table of AUDIT_RATE_SLOTS uids). Nothing it drops is
 * lost silently: every dropped record is counted against the uid it was
 * about (or, when the table is full of uids with drops still to report,
 * in an overflow count about no uid), and audit_rate_take hands the counts
 * out to be written as GAP records. */
#ifndef LYHD_AUDIT_RATE_H
#define LYHD_AUDIT_RATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AUDIT_RATE_SLOTS 64

struct audit_rate_params {
    double uid_rate;     /* records per second one uid may have recorded, sustained */
    double uid_burst;    /* and at once */
    double all_rate;     /* the same for all uids together */
    double all_burst;
    uint64_t report_ms;  /* hand a uid's drops out this long after the first of them */
};

/* Drops to write down: about uid (has_uid), or the overflow (has_uid false). */
struct audit_rate_drops {
    bool has_uid;
    uint32_t uid;
    uint64_t by_uid;    /* over the uid's own limit */
    uint64_t by_all;    /* within it, but over the global limit */
    uint64_t by_table;  /* the overflow: the table was full of uids with drops to report */
};

struct audit_rate_slot {
    bool used;
    uint32_t uid;
    double tokens;
    uint64_t tokens_ms;      /* when tokens was last brought up to date */
    uint64_t seen_ms;        /* last record about this uid: least recently seen goes first */
    uint64_t by_uid, by_all; /* drops not handed out yet */
    uint64_t first_drop_ms;  /* the first of them */
};

struct audit_rate {
    struct audit_rate_params p;
    struct audit_rate_slot slot[AUDIT_RATE_SLOTS];
    double all_tokens;
    uint64_t all_ms;
    uint64_t overflow;       /* drops about uids that found no slot */
    uint64_t overflow_first_ms;
};

/* Both buckets start full. */
void audit_rate_init(struct audit_rate *r, const struct audit_rate_params *p);

/* A record about uid at now_ms: true = record it (a token of the uid's bucket
 * and one of the global bucket are taken); false = do not, it is counted.
 * A uid not in the table takes a free slot, else the slot of the uid seen
 * least recently among those with no drops to report (its bucket state goes:
 * it comes back with a full bucket, which the global bucket still bounds);
 * when every slot has drops to report, the record is dropped and counted in
 * the overflow. now_ms must not go backwards. */
bool audit_rate_admit(struct audit_rate *r, uint32_t uid, uint64_t now_ms);

/* Hand out drops to be recorded, and forget them: those whose first drop is
 * at least report_ms old, or all of them with flush. At most max entries
 * into out (the rest stay for the next call); returns how many. */
size_t audit_rate_take(struct audit_rate *r, uint64_t now_ms, bool flush,
                       struct audit_rate_drops *out, size_t max);

/* Milliseconds from now_ms until audit_rate_take will have something
 * (0: now); UINT64_MAX when no drop is waiting. */
uint64_t audit_rate_next_ms(const struct audit_rate *r, uint64_t now_ms);

#endif
