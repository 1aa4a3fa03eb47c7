/* Daemon logging: stderr always, syslog when enabled. Only daemon/ logs. */
#ifndef LYHD_LOG_H
#define LYHD_LOG_H

#include <stdbool.h>
#include <stddef.h>

void log_init(bool use_syslog, bool verbose);
/* After log_init, in lyhd's protocol process: its lines say "lyhd-NAME"
 * (stderr) and its syslog ident is lyhd-protocol. name is kept (static). */
void log_set_process(const char *name);
/* --syslog's socket: /dev/log unless this names another (--syslog-socket).
 * Before log_init, which connects it. 0 or -ENAMETOOLONG. */
int log_syslog_path(const char *path);
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, the text of err (an errno, either sign; 0: none) ending the line
 * after ": " (OpenBSD's warn next to warnx). */
void log_debug_errno(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_info_errno(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_warn_errno(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_error_errno(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A broken internal invariant (a bug, never bad input or the environment):
 * log it and abort. The supervisor starts lyhd again (docs/architecture.md,
 * "Failure policy"). */
void log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* What every log line goes through: in, escaped so that it stays one line of
 * printable text (control bytes, DEL, C1 controls and bytes that are not UTF-8
 * as \xNN, a backslash as \\), into out (always terminated, cut only between
 * whole characters or escapes). Returns the length written. Pure. */
size_t log_escape(const char *in, char *out, size_t size);

#endif
