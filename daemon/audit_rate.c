/* The request-record rate limit: a token bucket per uid in a fixed table,
 * and a global bucket. This file owns the arithmetic and the table; the
 * audit pipeline (daemon/audit.c) asks it before it records a request and
 * writes what it hands out as GAP records. It must never do I/O, read a
 * clock or allocate: it is unit-tested on its own (tests/unit/daemon).
 *
 * Why per uid and global: with only a global bucket, a client sending
 * garbage empties it and every other user's refusals go unrecorded (counted
 * in a gap, but not theirs to see). A bucket per uid stops one user; the
 * global one stops many together from flooding the log.
 *
 * Why a fixed table: the uids come from clients (SO_PEERCRED), and one user
 * with a range of subordinate uids can present thousands. 64 slots bound the
 * memory and the work (a linear search over 64 entries per record). A slot
 * is reused only when it has no drops to report, so no count is forgotten;
 * when all 64 have drops to report (64 uids over their limits within one
 * report interval), a record about a further uid is dropped and counted in
 * an overflow count about no uid. The slot given up loses only its bucket
 * state, and the global bucket still bounds what that gains.
 *
 * Why drops are reported after a delay: one GAP record per uid per
 * report_ms, not one before every record let through, so a sustained flood
 * adds a gap record per second rather than doubling the records. */
#include "daemon/audit_rate.h"

#include <string.h>

void audit_rate_init(struct audit_rate *r, const struct audit_rate_params *p) {
    memset(r, 0, sizeof(*r));
    r->p = *p;
    r->all_tokens = p->all_burst;
}

static void refill(double *tokens, uint64_t *at_ms, double rate, double burst, uint64_t now_ms) {
    if (now_ms > *at_ms) {
        *tokens += (double)(now_ms - *at_ms) * rate / 1000.0;
        if (*tokens > burst)
            *tokens = burst;
    }
    *at_ms = now_ms;
}

static bool has_drops(const struct audit_rate_slot *s) {
    return s->by_uid > 0 || s->by_all > 0;
}

/* The slot of uid, a new one, or NULL (the table is full of uids with drops
 * to report). */
static struct audit_rate_slot *slot_for(struct audit_rate *r, uint32_t uid, uint64_t now_ms) {
    struct audit_rate_slot *free_slot = NULL, *lru = NULL;

    for (size_t i = 0; i < AUDIT_RATE_SLOTS; i++) {
        struct audit_rate_slot *s = &r->slot[i];

        if (!s->used) {
            if (!free_slot)
                free_slot = s;
            continue;
        }
        if (s->uid == uid)
            return s;
        if (!has_drops(s) && (!lru || s->seen_ms < lru->seen_ms))
            lru = s;
    }
    if (!free_slot)
        free_slot = lru;
    if (!free_slot)
        return NULL;
    *free_slot = (struct audit_rate_slot){
        .used = true, .uid = uid, .tokens = r->p.uid_burst, .tokens_ms = now_ms,
        .seen_ms = now_ms,
    };
    return free_slot;
}

static void count_drop(uint64_t *counter, uint64_t *first_ms, bool had_drops, uint64_t now_ms) {
    if (!had_drops)
        *first_ms = now_ms;
    (*counter)++;
}

bool audit_rate_admit(struct audit_rate *r, uint32_t uid, uint64_t now_ms) {
    struct audit_rate_slot *s = slot_for(r, uid, now_ms);

    refill(&r->all_tokens, &r->all_ms, r->p.all_rate, r->p.all_burst, now_ms);
    if (!s) {
        count_drop(&r->overflow, &r->overflow_first_ms, r->overflow > 0, now_ms);
        return false;
    }
    s->seen_ms = now_ms;
    refill(&s->tokens, &s->tokens_ms, r->p.uid_rate, r->p.uid_burst, now_ms);
    if (s->tokens < 1.0) {
        count_drop(&s->by_uid, &s->first_drop_ms, has_drops(s), now_ms);
        return false;
    }
    /* The uid's token is taken only when the record is kept: a record the
     * global limit drops does not count against the uid's own. */
    if (r->all_tokens < 1.0) {
        count_drop(&s->by_all, &s->first_drop_ms, has_drops(s), now_ms);
        return false;
    }
    s->tokens -= 1.0;
    r->all_tokens -= 1.0;
    return true;
}

static bool due(uint64_t first_ms, uint64_t now_ms, uint64_t report_ms, bool flush) {
    return flush || now_ms < first_ms || now_ms - first_ms >= report_ms;
}

size_t audit_rate_take(struct audit_rate *r, uint64_t now_ms, bool flush,
                       struct audit_rate_drops *out, size_t max) {
    size_t n = 0;

    for (size_t i = 0; i < AUDIT_RATE_SLOTS && n < max; i++) {
        struct audit_rate_slot *s = &r->slot[i];

        if (!s->used || !has_drops(s) || !due(s->first_drop_ms, now_ms, r->p.report_ms, flush))
            continue;
        out[n++] = (struct audit_rate_drops){ .has_uid = true, .uid = s->uid,
                                              .by_uid = s->by_uid, .by_all = s->by_all };
        s->by_uid = s->by_all = 0;
    }
    if (n < max && r->overflow > 0 && due(r->overflow_first_ms, now_ms, r->p.report_ms, flush)) {
        out[n++] = (struct audit_rate_drops){ .by_table = r->overflow };
        r->overflow = 0;
    }
    return n;
}

static uint64_t wait_ms(uint64_t first_ms, uint64_t now_ms, uint64_t report_ms) {
    if (now_ms < first_ms || now_ms - first_ms >= report_ms)
        return 0;
    return report_ms - (now_ms - first_ms);
}

uint64_t audit_rate_next_ms(const struct audit_rate *r, uint64_t now_ms) {
    uint64_t best = UINT64_MAX;

    for (size_t i = 0; i < AUDIT_RATE_SLOTS; i++) {
        const struct audit_rate_slot *s = &r->slot[i];

        if (s->used && has_drops(s)) {
            uint64_t w = wait_ms(s->first_drop_ms, now_ms, r->p.report_ms);
            if (w < best)
                best = w;
        }
    }
    if (r->overflow > 0) {
        uint64_t w = wait_ms(r->overflow_first_ms, now_ms, r->p.report_ms);
        if (w < best)
            best = w;
    }
    return best;
}
