/* Daemon logging: stderr always, syslog when enabled. Only daemon/ logs. */
#ifndef LYHD_LOG_H
#define LYHD_LOG_H

#include <stdbool.h>

void log_init(bool use_syslog, bool verbose);
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
