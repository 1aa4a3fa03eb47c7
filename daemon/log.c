/* One line per event on stderr (journald adds its own timestamps; for a
 * terminal we add a short one), mirrored to syslog with --syslog. The logger's
 * settings are the only process-wide state outside struct lyhd: they are set
 * once at startup, before the event loop runs (the syslog socket's state and
 * its count of unsent lines go with them).
 *
 * Not syslog(3) for the mirror: it blocks while /dev/log's queue is full, and
 * /dev/log is every local user's to fill. Each line goes as one non-blocking
 * datagram (framed as glibc frames it); a line the socket does not take now is
 * counted, not waited for (stderr has it), and the next line that gets through
 * is preceded by one that says how many did not. A socket that is gone is
 * tried again at most once a second.
 *
 * Log lines carry strings a client chose (paths, argv[0], interface names,
 * refusal reasons that quote them). Every line is escaped as a whole before it
 * is written, so no client can end a line early, start a forged one, or send
 * terminal escape sequences to whoever reads the log: control bytes, DEL, C1
 * controls and bytes that are not UTF-8 become \xNN, and a backslash becomes
 * \\ so the escaping cannot itself be imitated. */
#include "daemon/log.h"

#include "common/utf8.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "audit/sd_format.h"

static struct {
    bool syslog;
    bool verbose;
    const char *process; /* "" for the parent, else which of its processes */
    const char *ident;   /* syslog's tag */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int fd;              /* connected to path, or -1 */
    time_t retry_at;     /* while fd < 0: no attempt before (CLOCK_MONOTONIC s) */
    uint64_t unsent;     /* lines not sent since the last one that was */
} log_cfg = {.process = "", .ident = "lyhd", .path = "/dev/log", .fd = -1};

static bool sys_connect(void);

/* With syslog, the socket is connected now, before a process confines itself
 * (as openlog's LOG_NDELAY did): the protocol process may not reach it after. */
void log_init(bool use_syslog, bool verbose) {
    log_cfg.syslog = use_syslog;
    log_cfg.verbose = verbose;
    if (use_syslog)
        (void)sys_connect();
}

void log_set_process(const char *name) {
    log_cfg.process = name;
    log_cfg.ident = "lyhd-protocol";
}

int log_syslog_path(const char *path) {
    if (strlen(path) >= sizeof(log_cfg.path))
        return -ENAMETOOLONG;
    strcpy(log_cfg.path, path);
    if (log_cfg.fd >= 0)
        close(log_cfg.fd);
    log_cfg.fd = -1;
    log_cfg.retry_at = 0;
    return 0;
}

static time_t mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static bool sys_connect(void) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};

    if (log_cfg.fd >= 0)
        return true;
    if (mono_s() < log_cfg.retry_at)
        return false;
    memcpy(sa.sun_path, log_cfg.path, sizeof(sa.sun_path));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        if (fd >= 0)
            close(fd);
        log_cfg.retry_at = mono_s() + 1;
        return false;
    }
    log_cfg.fd = fd;
    return true;
}

/* One datagram, never waiting; false when it was not sent. A socket whose
 * reader is gone (syslog restarted) is reconnected once, now. */
static bool sys_send1(int prio, const char *msg) {
    char dgram[2600];
    struct tm tm;
    time_t now = time(NULL);

    localtime_r(&now, &tm);
    int k = audit_syslog_frame(dgram, sizeof(dgram), LOG_DAEMON | prio, &tm, log_cfg.ident,
                               (long)getpid(), msg);
    if (k < 0)
        return false;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!sys_connect())
            return false;
        if (send(log_cfg.fd, dgram, (size_t)k, MSG_DONTWAIT | MSG_NOSIGNAL) == k)
            return true;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EMSGSIZE)
            return false;
        close(log_cfg.fd);
        log_cfg.fd = -1;
    }
    return false;
}

static void sys_send(int prio, const char *line) {
    if (log_cfg.unsent) {
        char note[160];
        snprintf(note, sizeof(note),
                 "%" PRIu64 " earlier log line(s) were not sent to syslog (it was not reading or "
                 "not there); lyhd's standard error has them",
                 log_cfg.unsent);
        if (!sys_send1(LOG_WARNING, note)) {
            log_cfg.unsent++;
            return;
        }
        log_cfg.unsent = 0;
    }
    if (!sys_send1(prio, line))
        log_cfg.unsent++;
}


size_t log_escape(const char *in, char *out, size_t size) {
    const unsigned char *p = (const unsigned char *)in;
    size_t n = strlen(in), o = 0;

    if (size == 0)
        return 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t ul = p[i] >= 0x80 ? utf8_next(p + i, n - i, &cp) : 0;
        /* C1 controls, bidi overrides, line separators: escaped like C0 ones */
        bool c1 = ul != 0 && utf8_cp_unsafe(cp);
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

/* err: 0, or an errno (either sign) whose text ends the line. */
__attribute__((format(printf, 4, 0)))
static void vlog(int prio, const char *tag, int err, const char *fmt, va_list ap) {
    char raw[2048], line[2048];
    struct timespec ts;
    struct tm tm;

    int n = vsnprintf(raw, sizeof(raw), fmt, ap);
    if (err && n >= 0 && (size_t)n < sizeof(raw))
        snprintf(raw + n, sizeof(raw) - (size_t)n, ": %s", strerror(err < 0 ? -err : err));
    log_escape(raw, line, sizeof(line));
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    fprintf(stderr, "%02d:%02d:%02d.%03ld lyhd%s%s %s: %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
            ts.tv_nsec / 1000000, log_cfg.process[0] ? "-" : "", log_cfg.process, tag, line);
    if (log_cfg.syslog)
        sys_send(prio, line);
}

#define LOG_FN(name, prio, tag, gate)                       \
    void name(const char *fmt, ...) {                       \
        va_list ap;                                         \
        if (!(gate))                                        \
            return;                                         \
        va_start(ap, fmt);                                  \
        vlog(prio, tag, 0, fmt, ap);                        \
        va_end(ap);                                         \
    }                                                       \
    void name##_errno(int err, const char *fmt, ...) {      \
        va_list ap;                                         \
        if (!(gate))                                        \
            return;                                         \
        va_start(ap, fmt);                                  \
        vlog(prio, tag, err, fmt, ap);                      \
        va_end(ap);                                         \
    }

LOG_FN(log_debug, LOG_DEBUG, "debug", log_cfg.verbose)
LOG_FN(log_info, LOG_INFO, "info", true)
LOG_FN(log_warn, LOG_WARNING, "warning", true)
LOG_FN(log_error, LOG_ERR, "error", true)

void log_fatal(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlog(LOG_CRIT, "fatal", 0, fmt, ap);
    va_end(ap);
    /* a broken invariant: no state of this process is trusted any more, not
     * even for an orderly shutdown; the supervisor starts lyhd again and the
     * startup reaping repairs from state.db */
    abort();
}
