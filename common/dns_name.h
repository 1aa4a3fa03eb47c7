/* Domain allowlist patterns: "name" (that name exactly) or "*.name" (any name
 * below it, not the name itself). Names are compared in the forwarder's
 * normalised form (common/dns_msg.h): lower case, labels of [a-z0-9_-],
 * joined by '.', no trailing dot. Pure; the CLI checks early, lyhd again. */
#ifndef LYH_COMMON_DNS_NAME_H
#define LYH_COMMON_DNS_NAME_H

#include <stdbool.h>
#include <stddef.h>

#define DNS_PATTERN_MAX 256 /* "*." + 253, with the NUL */

/* Check a pattern as a user wrote it ("Example.COM.", "*.npmjs.org") and
 * write its canonical form (lower case, no trailing dot) to canon
 * (DNS_PATTERN_MAX bytes). -EINVAL with a reason in why: empty, a label
 * empty, over 63 bytes or with a byte outside [A-Za-z0-9_-], over 253
 * bytes, a '*' anywhere but a leading "*." label, a bare "*" (every name:
 * that is no allowlist). */
int dn_pattern_check(const char *text, char *canon, char *why, size_t whylen);

/* Does the normalised name match the canonical pattern? */
bool dn_match(const char *pattern, const char *name);

/* Does an audit record's detail ("k=v k=v ...") name a match of pattern: the
 * name= of a dns record, or one of the comma-separated names= of a flow
 * record? Names longer than 253 bytes never match. */
bool dn_detail_has(const char *detail, const char *pattern);

#endif
