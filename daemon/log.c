/* One line per event on stderr (journald adds its own timestamps; for a
 * terminal we add a short one), mirrored to syslog with --syslog. The logger's
 * settings are the only process-wide state outside struct lyhd: they are set
 * once at startup, before the event loop runs. */
#include "daemon/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>
#include <time.h>

static struct {
    bool syslog;
    bool verbose;
} log_cfg;

void log_init(bool use_syslog, bool verbose) {
    log_cfg.syslog = use_syslog;
    log_cfg.verbose = verbose;
    if (use_syslog)
        openlog("lyhd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

__attribute__((format(printf, 3, 0)))
static void vlog(int prio, const char *tag, const char *fmt, va_list ap) {
    char line[2048];
    struct timespec ts;
    struct tm tm;

    vsnprintf(line, sizeof(line), fmt, ap);
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    fprintf(stderr, "%02d:%02d:%02d.%03ld lyhd %s: %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
            ts.tv_nsec / 1000000, tag, line);
    if (log_cfg.syslog)
        syslog(prio, "%s", line);
}

#define LOG_FN(name, prio, tag, gate)      \
    void name(const char *fmt, ...) {      \
        va_list ap;                        \
        if (!(gate))                       \
            return;                        \
        va_start(ap, fmt);                 \
        vlog(prio, tag, fmt, ap);          \
        va_end(ap);                        \
    }

LOG_FN(log_debug, LOG_DEBUG, "debug", log_cfg.verbose)
LOG_FN(log_info, LOG_INFO, "info", true)
LOG_FN(log_warn, LOG_WARNING, "warning", true)
LOG_FN(log_error, LOG_ERR, "error", true)
