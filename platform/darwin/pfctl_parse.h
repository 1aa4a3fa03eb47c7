/* pfctl_parse: reading what pfctl prints, as pure functions.
 *
 * pf.c runs pfctl and hands its output here; keeping the parsing apart makes it
 * testable (and fuzzable) on Linux, where no pfctl exists. Nothing here does
 * I/O, allocates or logs. Return convention: 0 or -errno; ret_* out-parameters
 * are written only on success. */
#ifndef LYH_PLATFORM_DARWIN_PFCTL_PARSE_H
#define LYH_PLATFORM_DARWIN_PFCTL_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "platform/darwin/pf_render.h"

/* The enable token from the output of `pfctl -E`: the line "Token : N" (any
 * spacing around the colon), N decimal, 1..20 digits, fitting 64 bits, not 0.
 * -ENOENT when no such line is present (pfctl printed no token: the caller must
 * not assume PF holds a reference for us), -ERANGE for a number out of range,
 * -EINVAL for NULL input. */
int pfctl_parse_token(const char *out, size_t len, uint64_t *ret_token);

/* One anchor of ours, parsed from its name. */
struct pfctl_anchor {
    char name[PFR_NAME_MAX]; /* as listed, e.g. "com.apple/lianyaohu-501" */
    bool well_formed;        /* scope and uid below are valid */
    enum pfr_scope scope;
    uint32_t uid;
};

/* Scan the output of `pfctl -a com.apple -s Anchors` (one anchor path per line,
 * leading blanks allowed) for anchors below PFR_ANCHOR_PREFIX. A name with our
 * prefix that is not exactly one of pfr_anchor_name()'s forms is still ours
 * (nothing else writes there) and is returned with well_formed = false, so the
 * reaper removes it too, unless it has characters outside [A-Za-z0-9._/-] or
 * does not fit PFR_NAME_MAX: such a line is skipped and counted in
 * *ret_skipped, never passed to pfctl. Lines of other anchors are ignored.
 * Writes at most cap entries; *ret_n is how many anchors were found (may exceed
 * cap: -ENOSPC then, with the first cap entries written). */
int pfctl_parse_anchors(const char *out, size_t len, struct pfctl_anchor *ret, size_t cap,
                        size_t *ret_n, size_t *ret_skipped);

#endif
