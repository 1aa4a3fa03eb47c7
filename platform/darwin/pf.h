/* pf: installs and removes the macOS egress guard, one PF anchor per uid and
 * scope, through pfctl(8).
 *
 * The rules come from pf_render.h; this module writes them to a root-only
 * file, has pfctl vet and load them, keeps PF enabled while an anchor of ours
 * is loaded (pfctl -E / -X with the enable token it returns, held per anchor),
 * and reaps what a dead lyhd left. It is plain POSIX (posix_spawn, pipes,
 * poll): on Darwin it drives the real /sbin/pfctl; the Linux unit tests run it
 * against a stand-in pfctl to check the sequence of calls and every failure
 * path (tests/unit/platform/test_pf_driver.c). Whether PF then enforces the
 * rules is verified on a Mac only (docs/security-model.md, "macOS").
 *
 * Contract for every function below: returns 0 or a negative errno; ret_*
 * parameters are set only on success; nothing logs; `why`/`whylen` (may be
 * NULL/0) receive one sentence naming the anchor and what pfctl said, on
 * failure only. Calls block while pfctl runs (each run is bounded by
 * pf_config.timeout_ms; pfctl answers in milliseconds). Needs root on Darwin.
 * Not thread-safe. */
#ifndef LYH_PLATFORM_DARWIN_PF_H
#define LYH_PLATFORM_DARWIN_PF_H

#include <stddef.h>
#include <stdint.h>

#include "platform/darwin/pf_render.h"
#include "platform/darwin/pfctl_parse.h"

#define PF_PFCTL_PATH      "/sbin/pfctl"
#define PF_RULES_DIR       "/var/run/lianyaohu"
#define PF_TIMEOUT_MS      10000
#define PF_OUTPUT_MAX      65536 /* bytes of pfctl output kept (the rest is read and dropped) */
#define PF_ANCHORS_MAX     4096  /* anchors of ours the reaper handles in one pass */

struct pf_config {
    const char *pfctl;     /* NULL: PF_PFCTL_PATH; an absolute path */
    const char *rules_dir; /* NULL: PF_RULES_DIR; created 0700 if missing */
    int timeout_ms;        /* 0: PF_TIMEOUT_MS */
};

struct pf;

/* Check the configuration and open (creating it 0700 if missing) the rules
 * directory. The directory must be a real directory owned by the effective
 * uid and writable by nobody else: -EPERM otherwise (a rules file there is
 * handed to pfctl by name). */
int pf_open(const struct pf_config *cfg, struct pf **ret, char *why, size_t whylen);
void pf_close(struct pf *p); /* NULL ok; leaves PF, the anchors and their tokens as they are */

/* Load (or replace) the anchor of in->scope and in->uid:
 *   1. render it (pf_render.h) and write <rules_dir>/<name>.pf, 0600, atomically;
 *   2. `pfctl -n -f FILE`: vet the file; PF is not touched;
 *   3. `pfctl -E`, unless this anchor already holds an enable token: PF stays
 *      enabled while the token is held, whoever else enables or disables it;
 *   4. `pfctl -a ANCHOR -f FILE`: replace the anchor's rules and tables in one
 *      transaction.
 * On failure nothing of ours changed: a token taken in step 3 is released, a
 * new file is removed, a replaced one restored. -EINVAL (input), -EIO (pfctl
 * refused: why has its first line), -ETIMEDOUT, -EPROTO (pfctl -E printed no
 * token), or the errno of a file operation. */
int pf_anchor_load(struct pf *p, const struct pfr_input *in, char *why, size_t whylen);

/* Remove an anchor: `pfctl -a ANCHOR -F rules`, `-F Tables`, then release its
 * token (`pfctl -X TOKEN`) and remove its file. Every step is tried; the first
 * error is returned. Flushing an anchor that does not exist succeeds (pfctl
 * flushes nothing). */
int pf_anchor_unload(struct pf *p, enum pfr_scope scope, uint32_t uid, char *why, size_t whylen);

/* The enable token an anchor holds. lyhd persists it (state.db) so that after
 * a restart it can adopt it again and release it. -ENOENT when none is held. */
int pf_token_get(const struct pf *p, enum pfr_scope scope, uint32_t uid, uint64_t *ret_token);
/* Hold `token` for an anchor (startup reconciliation). -EEXIST when the anchor
 * already holds one, -EINVAL for token 0. */
int pf_token_adopt(struct pf *p, enum pfr_scope scope, uint32_t uid, uint64_t token);

/* What pf_reap() did. */
struct pf_reap_report {
    size_t flushed;           /* anchors of ours not in keep, flushed */
    size_t malformed;         /* of those, names that were not one of our two forms */
    size_t skipped_unsafe;    /* listed names with our prefix never passed to pfctl */
    size_t tokens_released;   /* held tokens of anchors not in keep, released */
    size_t files_removed;     /* stale rules files removed */
};

/* Startup: every anchor below PFR_ANCHOR_PREFIX that `keep` does not name is
 * a dead lyhd's (`pfctl -a com.apple -s Anchors`): flush it, release the token
 * held for it (adopted before this call), and remove every rules file of an
 * anchor not kept. Continues past failures; returns the first error. */
int pf_reap(struct pf *p, const struct pfctl_anchor *keep, size_t n_keep,
            struct pf_reap_report *ret, char *why, size_t whylen);

#endif
