/* One line per event on stderr (journald adds its own timestamps; for a
 * terminal we add a short one), mirrored to syslog with --syslog. The logger's
 * settings are the only process-wide state outside struct lyhd: they are set
 * once at startup, before the event loop runs.
 *
 * Log lines carry strings a client chose (paths, argv[0], interface names,
 * refusal reasons that quote them). Every line is escaped as a whole before it
 * is written, so no client can end a line early, start a forged one, or send
 * terminal escape sequences to whoever reads the log: control bytes, DEL, C1
 * controls and bytes that are not UTF-8 become \xNN, and a backslash becomes
 * \\ so the escaping cannot itself be imitated. */
#include "daemon/log.h"

#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <syslog.h>
#include <time.h>

static struct {
    bool syslog;
    bool verbose;
    const char *process; /* "" for the parent, else which of its processes */
} log_cfg = {.process = ""};

void log_init(bool use_syslog, bool verbose) {
    log_cfg.syslog = use_syslog;
    log_cfg.verbose = verbose;
    if (use_syslog)
        openlog("lyhd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

void log_set_process(const char *name) {
    log_cfg.process = name;
    if (log_cfg.syslog) {
        closelog();
        openlog("lyhd-protocol", LOG_PID | LOG_NDELAY, LOG_DAEMON);
    }
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if there is
 * none: overlong forms, surrogates and code points above U+10FFFF are not. */
static size_t utf8_len(const unsigned char *p, size_t n) {
    size_t len;
    uint32_t cp;

    if (p[0] < 0xc2 || p[0] > 0xf4)
        return 0;
    len = p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : 4;
    if (len > n)
        return 0;
    cp = p[0] & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

size_t log_escape(const char *in, char *out, size_t size) {
    const unsigned char *p = (const unsigned char *)in;
    size_t n = strlen(in), o = 0;

    if (size == 0)
        return 0;
    for (size_t i = 0; i < n;) {
        size_t ul = p[i] >= 0x80 ? utf8_len(p + i, n - i) : 0;
        /* U+0080..U+009F (C1 controls) are escaped like C0 ones. */
        bool c1 = ul == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0;
        char esc[5];
        const char *chunk;
        size_t cl;

        if (p[i] == '\\') {
            chunk = "\\\\";
            cl = 2;
        } else if (p[i] < 0x20 || p[i] == 0x7f || (p[i] >= 0x80 && (ul == 0 || c1))) {
            snprintf(esc, sizeof(esc), "\\x%02x", p[i]);
            chunk = esc;
            cl = 4;
        } else {
            chunk = (const char *)p + i;
            cl = ul ? ul : 1;
        }
        if (o + cl >= size)
            break; /* cut at a whole character or escape, never inside one */
        memcpy(out + o, chunk, cl);
        o += cl;
        i += chunk == (const char *)p + i ? cl : 1;
    }
    out[o] = '\0';
    return o;
}

__attribute__((format(printf, 3, 0)))
static void vlog(int prio, const char *tag, const char *fmt, va_list ap) {
    char raw[2048], line[2048];
    struct timespec ts;
    struct tm tm;

    vsnprintf(raw, sizeof(raw), fmt, ap);
    log_escape(raw, line, sizeof(line));
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    fprintf(stderr, "%02d:%02d:%02d.%03ld lyhd%s%s %s: %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
            ts.tv_nsec / 1000000, log_cfg.process[0] ? "-" : "", log_cfg.process, tag, line);
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
