/* One audit record as an RFC 5424 STRUCTURED-DATA element, for lyhd
 * --syslog-audit: `[lyh@32473 id="12" kind="flow" ...]`. Pure; no I/O.
 * (32473 is the enterprise number RFC 5612 reserves for examples and
 * documentation; a site that forwards to a SIEM may map it.) */
#ifndef LYH_SD_FORMAT_H
#define LYH_SD_FORMAT_H

#include <stddef.h>
#include <time.h>

#include "storage/audit_db.h"

#define AUDIT_SD_ID "lyh@32473"

/* Write the element into buf (always NUL-terminated and well-formed when size
 * >= 64). Param values escape '"', '\\' and ']' as RFC 5424 §6.3.3 says.
 * Returns 0, or -ENOSPC when the detail had to be cut to fit (the element is
 * still complete and carries truncated="1"), -EINVAL when size < 64. */
int audit_sd_format(const struct audit_rec *r, char *buf, size_t size);

/* One syslog datagram for the local socket (/dev/log), as glibc's syslog(3)
 * writes it (RFC 3164): `<PRI>Mmm dd hh:mm:ss IDENT[PID]: MSG`, tm the local
 * time, in the C locale's month names. Returns the length written (no NUL
 * counted; buf is NUL-terminated), or -ENOSPC when it does not fit (buf then
 * holds ""), -EINVAL for a pri outside 0..191 or an ident that is empty or has
 * a character outside [A-Za-z0-9._-]. */
int audit_syslog_frame(char *buf, size_t size, int pri, const struct tm *tm, const char *ident,
                       long pid, const char *msg);

/* Name of a kind / verdict / protocol as the CLI and docs spell them
 * ("flow", "denied", "tcp"); NULL when unknown (protocol: print the number). */
const char *audit_kind_name(int kind);
const char *audit_verdict_name(int verdict);
const char *audit_proto_name(int protocol);

#endif
