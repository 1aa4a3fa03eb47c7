/* audit.db: the audit log (flow events and the daemon's own records), a
 * sqlite database of its own beside state.db, so that a burst of flows never
 * contends with the state the daemon's correctness depends on, and so that
 * retention can prune it without touching state.
 *
 * Writes come in batches (audit_db_append: one transaction per call); the
 * caller owns batching and timing. Reads go through a second connection, so in
 * WAL mode a query never blocks the writer; each page of a query is its own
 * short statement (keyset pagination on id), so a long answer holds no read
 * transaction open and never sits in memory.
 *
 * Records are append-only here: nothing but retention (audit_db_prune) ever
 * deletes, and nothing updates a record. audit.db also keeps, per kind,
 * session and uid, how many records it holds (so retention can find the
 * heaviest writer at once) and what retention removed but has not yet
 * written down as GAP records; both change only with the records they count.
 *
 * Contract as in store.h: 0 or -errno, ret_* set only on success, no logging;
 * db->err / audit_db_errmsg() carries a message for the last failure.
 * Single-threaded; blocks on disk I/O. */
#ifndef LYH_AUDIT_DB_H
#define LYH_AUDIT_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct audit_db;

#define AUDIT_DB_ERR_MAX 512
#define AUDIT_DETAIL_MAX 5120   /* bytes incl. NUL; longer details are cut */

/* Same numbers as lianyaohu.v1.EventKind / Verdict. */
enum audit_kind {
    AUDIT_KIND_FLOW = 1,
    AUDIT_KIND_SESSION = 2,
    AUDIT_KIND_POLICY = 3,
    AUDIT_KIND_REQUEST = 4,
    AUDIT_KIND_GAP = 5,
    AUDIT_KIND_GUARD = 6,
    AUDIT_KIND_DNS = 7,
};
enum audit_verdict {
    AUDIT_VERDICT_NONE = 0,
    AUDIT_VERDICT_ALLOWED = 1,
    AUDIT_VERDICT_DENIED = 2,
};

/* One record. Strings are NUL-terminated within their arrays; detail is owned
 * by whoever filled the struct (audit_db copies it). */
struct audit_rec {
    uint64_t id;            /* set by audit_db_append; ignored on input */
    int64_t time_us;        /* wall clock */
    uint8_t kind;           /* enum audit_kind, required */
    uint8_t verdict;        /* enum audit_verdict */
    uint8_t family;         /* 0, AF_INET, AF_INET6 */
    uint8_t protocol;
    uint8_t addr_len;       /* 0, 4 or 16: length of src and dst */
    uint8_t src[16];
    uint8_t dst[16];
    uint16_t sport;
    uint16_t dport;
    bool has_uid;
    uint32_t uid;
    char session[17];       /* "" when the record is about no session */
    char iface[16];
    char action[16];
    const char *detail;     /* NULL or "" for none */
    uint64_t allowed_packets, allowed_bytes, denied_packets, denied_bytes;
    uint64_t missed;
};

/* A query. Zero fields match anything. */
struct audit_filter {
    int64_t since_us;       /* time_us >= since_us (0: open) */
    int64_t until_us;       /* time_us <  until_us (0: open) */
    char session[17];
    bool has_uid;
    uint32_t uid;
    uint8_t kind;
    uint8_t verdict;
    uint8_t protocol;
    uint8_t dst_len;        /* 0: any destination; 4 or 16 */
    uint8_t dst[16];        /* host bits beyond dst_prefix are ignored */
    uint8_t dst_prefix;     /* 0..32 / 0..128 */
    uint16_t port_min;      /* dport in [port_min, port_max]; 0: any */
    uint16_t port_max;
    uint64_t after_id;      /* id > after_id */
    char name[256];         /* a canonical name pattern (dn_pattern_check) its detail
                             * names (dn_detail_has); "": any */
};

/* Open or create path (0600, parent must exist and be root-only like the
 * state dir), WAL, schema by user_version. ret_was_clean: the previous lyhd
 * closed it with audit_db_close (false after a crash or kill -9, and true on
 * a new database). -EPROTO for a newer schema; why gets a message. */
int audit_db_open(const char *path, struct audit_db **ret, bool *ret_was_clean, char *why,
                  size_t whylen);

/* Flush nothing (the caller has appended what it holds), mark the database
 * clean, close both connections. Accepts NULL. */
void audit_db_close(struct audit_db *db);

const char *audit_db_errmsg(const struct audit_db *db);

/* Append n records in one transaction, assigning recs[i].id in order. All or
 * nothing: on failure no record of the batch is stored and no id is set.
 * -EINVAL when a record is invalid (kind 0, addr_len not 0/4/16, a string not
 * terminated); nothing is stored then either. */
int audit_db_append(struct audit_db *db, struct audit_rec *recs, size_t n);

/* How many flow records a second audit_db_append takes on this machine, in
 * DIR (audit.db's directory, so the same filesystem), now: rounds batches of
 * n synthetic records (one session, consecutive destinations: a scan's
 * shape), each appended and committed as lyhd writes its batches, into a
 * scratch file DIR/AUDIT_MEASURE_NAME made for it and removed after (as is
 * one an earlier call left). audit.db is never touched. DIR must be a
 * directory the caller has checked (lyhd: audit.db's own, opened just
 * before): the leftovers are removed before audit_db_open checks it. The fastest
 * round's rate: other work on the machine only slows a round down, so the
 * fastest is the nearest to what the machine can do. A new file's indexes are shallow, so a big audit.db takes
 * somewhat fewer. */
#define AUDIT_MEASURE_NAME "audit-measure.db"
#define AUDIT_MEASURE_MAX 4096
#define AUDIT_MEASURE_ROUNDS_MAX 9
int audit_db_measure(const char *dir, size_t n, unsigned rounds, uint64_t *ret_per_s, char *why,
                     size_t whylen);
/* May a connection be used from a thread other than the others' (the sqlite
 * library built with threads; connections are opened NOMUTEX, one thread
 * each)? */
bool audit_db_threadsafe(void);

/* Validate a filter (prefix within the address length, port range ordered,
 * strings terminated). */
int audit_filter_check(const struct audit_filter *f);

/* One page: call fn for each record with id > f->after_id that matches f, in
 * ascending id, at most max records. fn returns 0 to go on or non-zero to
 * stop early. rec->detail points into sqlite memory valid only during fn
 * (never NULL: "" for none). fn may call other audit_db functions, appends
 * included (the page reads a snapshot and will not see them). Returns the
 * number of records delivered (counting the one fn stopped at), or -errno. */
typedef int (*audit_row_fn)(const struct audit_rec *rec, void *ud);
int audit_db_page(struct audit_db *db, const struct audit_filter *f, unsigned max, audit_row_fn fn,
                  void *ud);

/* For "the newest n matching records": the after_id to start from so that a
 * walk of pages yields exactly the last n (0 when fewer than n match; in
 * general f->after_id, so a filter that has one keeps it). n == 0 gives the
 * highest id stored (or f->after_id if higher): a walk from there yields only
 * what is appended later. */
int audit_db_tail_start(struct audit_db *db, const struct audit_filter *f, unsigned n,
                        uint64_t *ret_after_id);

/* Diagnostics: sqlite's plan (EXPLAIN QUERY PLAN details, joined with "; ")
 * for f's page query, or its tail query, into buf. -ERANGE if it does not fit. */
int audit_db_explain(struct audit_db *db, const struct audit_filter *f, bool tail, char *buf,
                     size_t buflen);

/* How many records match f (id > f->after_id included). Blocks for as long
 * as sqlite needs to count them through the best index. */
int audit_db_count(struct audit_db *db, const struct audit_filter *f, uint64_t *ret_n);

/* Close without marking the database clean (records the caller holds could
 * not be written: the next open reports was_clean false). Accepts NULL. */
void audit_db_abandon(struct audit_db *db);

/* Highest id stored (0 when empty). */
int audit_db_last_id(struct audit_db *db, uint64_t *ret_id);

/* Bytes the records use (page_count - freelist_count) * page_size. */
int audit_db_size(struct audit_db *db, uint64_t *ret_bytes);

/* Retention, one bounded step, in one transaction:
 *  1. by age: up to max_rows of the records older than older_than_us, oldest
 *     (by time_us) first, whatever their kind;
 *  2. by size, while the records use more than max_bytes, with what is left
 *     of max_rows: flow records first, those of the uid with the most flow
 *     records and of its session with the most first (oldest of it first);
 *     then request records the same way (heaviest uid first); only when no
 *     flow or request record is left, the oldest of the rest (session,
 *     policy, guard and gap records);
 *  3. what was removed is counted per (why, uid, kind) in audit.db itself,
 *     in the same transaction, and written as GAP records (action
 *     "retention", one per why and uid, has_uid as the records had it) once
 *     the first uncounted removal is gap_delay_us old, or now with flush_gaps
 *     (at most 256 gap records per step; ret->gaps_pending says more wait);
 *  4. freed pages go back to the file system (a bounded incremental vacuum).
 * Age retention never looks at kinds; size retention never removes a
 * lifecycle, policy, guard or gap record while a flow or request record is
 * left. Meant to be called from a timer until ret->deleted is 0 and
 * ret->gaps_pending is false. Blocks for one step of disk I/O. */
struct audit_retention {
    int64_t now_us;         /* wall clock of this step; the gap records carry it */
    int64_t older_than_us;  /* age limit: time_us below this goes (0: none) */
    unsigned max_age_days;  /* what older_than_us stands for, named in the gap records */
    uint64_t max_bytes;     /* size cap (0: none) */
    unsigned max_rows;      /* records one step may remove (0: remove none) */
    int64_t gap_delay_us;   /* coalesce removals this long into one gap per uid (0: none) */
    bool flush_gaps;        /* write every counted removal as gap records now */
};

struct audit_prune_result {
    unsigned deleted;       /* records removed by this step */
    unsigned gaps;          /* gap records written: ids first_gap_id .. first_gap_id+gaps-1 */
    uint64_t first_gap_id;
    bool gaps_pending;      /* counted removals still to be written as gap records */
};

int audit_db_prune(struct audit_db *db, const struct audit_retention *p,
                   struct audit_prune_result *ret);

/* Diagnostics and tests: sqlite's plan for the two lookups that choose the
 * heaviest writer (the uid with most records of kind, then its session),
 * joined with "; ". */
int audit_db_explain_heaviest(struct audit_db *db, char *buf, size_t buflen);

#endif
