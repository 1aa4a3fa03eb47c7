/* audit_measure: what audit.db's writes take on this machine, measured again
 * after lyhd's start, off its event loop.
 *
 * lyhd sets each session's flow log rate from a measurement of ~10 ms at its
 * start (audit.c, set_flow_rate). A slow moment of the disk or the CPUs then
 * set a low rate for the whole run (177k records/s in one run against 311k an
 * hour before, same machine). This thread measures again (the same scratch
 * file beside audit.db, the same batches: audit_db_measure) `times` more
 * times, `gap_ms` apart, the first `gap_ms` after the start, and tells the
 * loop each time its best so far went up, and once when it is done; the loop
 * keeps the better of that and the start's figure (a slow moment only ever
 * slows a batch down).
 *
 * Contract: one thread, every signal blocked; it touches nothing but the
 * scratch file (which nothing else uses once the start's measurement is done)
 * and its own fields under a mutex; `better` runs on the loop, never in the
 * thread. A failed measurement ends the thread (the figures so far stay), and
 * the last call says why. audit_measure_stop wakes a waiting thread and joins it (a
 * measurement under way, bounded by the scratch file's writes, is finished
 * first; a thread still not done after two seconds, on a disk that hangs, is
 * left behind with its memory, as lyhd is exiting); NULL is fine. */
#ifndef LYH_DAEMON_AUDIT_MEASURE_H
#define LYH_DAEMON_AUDIT_MEASURE_H

#include <stdbool.h>
#include <stdint.h>

struct event_base;
struct audit_measure;

/* On the loop: best_per_s is the thread's best so far (0: none yet); done
 * once, with the last call, when the thread has measured all it will (by
 * then it has been joined), never after a stop; why (done only) says what
 * failed when a measurement ended it early, else NULL. */
typedef void (*audit_measure_fn)(uint64_t best_per_s, unsigned measured, bool done,
                                 const char *why, void *arg);

struct audit_measure_params {
    const char *dir;  /* audit.db's directory (copied) */
    unsigned batch;   /* records per batch (audit_db_measure's n) */
    unsigned rounds;  /* batches per measurement, the fastest kept */
    unsigned times;   /* measurements */
    unsigned gap_ms;  /* before each */
};

/* 0 and *ret, or -errno (no thread then; -ENOTSUP: the sqlite library was
 * built without threads). */
int audit_measure_start(struct event_base *base, const struct audit_measure_params *p,
                        audit_measure_fn better, void *arg, struct audit_measure **ret);
void audit_measure_stop(struct audit_measure *m);

#endif
