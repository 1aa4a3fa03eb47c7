/* Non-blocking syslog for audit records (see syslog_out.h). */
#include "daemon/syslog_out.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "audit/sd_format.h"
#include "daemon/log.h"

#define RECONNECT_MS 1000
#define FRAME_MAX 16384 /* a record's element is at most AUDIT_DETAIL_MAX + 1 KiB */

struct dgram {
    TAILQ_ENTRY(dgram) link;
    uint64_t lost_after;     /* records dropped right after this one: the queue was full */
    size_t len;
    char buf[];
};

struct syslog_out {
    struct event_base *base;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int fd;                  /* connected, or -1 */
    struct event *ev_write;  /* fd writable again (the queue waits for it) */
    struct event *ev_retry;  /* reconnect while records wait and no socket */
    TAILQ_HEAD(dgram_q, dgram) q;
    size_t q_bytes;
    uint64_t lost_first;     /* dropped with nothing queued: announced before the next */
    bool said_full;          /* lyhd's log said so for this stretch */
    bool said_gone;          /* ... that the socket is not there */
};

static void drain(struct syslog_out *so);

static void on_write(evutil_socket_t fd, short what, void *arg) {
    drain(arg);
}

static void on_retry(evutil_socket_t fd, short what, void *arg) {
    drain(arg);
}

static void disconnect(struct syslog_out *so) {
    if (so->ev_write) {
        event_free(so->ev_write);
        so->ev_write = NULL;
    }
    if (so->fd >= 0)
        close(so->fd);
    so->fd = -1;
}

/* Connect; false (and a log line, once per outage) when the socket is not there. */
static bool reconnect(struct syslog_out *so) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    disconnect(so);
    memcpy(sa.sun_path, so->path, sizeof(sa.sun_path));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        if (!so->said_gone)
            log_warn("syslog: cannot reach %s (%s); audit records for syslog wait (up to %u KiB) "
                     "and are sent once it is back",
                     so->path, strerror(e), SYSLOG_OUT_QUEUE_MAX / 1024);
        so->said_gone = true;
        return false;
    }
    so->ev_write = event_new(so->base, fd, EV_WRITE, on_write, so);
    if (!so->ev_write) {
        close(fd);
        return false;
    }
    so->fd = fd;
    if (so->said_gone)
        log_info("syslog: %s reached again", so->path);
    so->said_gone = false;
    return true;
}

/* A record that will never be sent: counted where it would have gone, right
 * after the last one that waits (or before the next one, with none waiting). */
static void count_lost(struct syslog_out *so, uint64_t n) {
    if (TAILQ_EMPTY(&so->q))
        so->lost_first += n;
    else
        TAILQ_LAST(&so->q, dgram_q)->lost_after += n;
}

/* Frame msg and queue it at the tail or, for a gap element, the head. A gap
 * element is queued past SYSLOG_OUT_QUEUE_MAX (it is small, and one at most
 * per stretch of losses): the collector must learn of the loss. */
static bool enqueue(struct syslog_out *so, int sev, const char *msg, bool gap) {
    char line[FRAME_MAX];
    struct tm tm;
    time_t now = time(NULL);

    localtime_r(&now, &tm);
    int k = audit_syslog_frame(line, sizeof(line), LOG_AUTHPRIV | sev, &tm, "lyhd", (long)getpid(),
                               msg);
    if (k < 0)
        return false;
    if (!gap && so->q_bytes + (size_t)k > SYSLOG_OUT_QUEUE_MAX) {
        if (!so->said_full)
            log_warn("syslog: %u KiB of audit records wait for %s, which is not reading; further "
                     "records are not forwarded until it reads again (audit.db has them all)",
                     SYSLOG_OUT_QUEUE_MAX / 1024, so->path);
        so->said_full = true;
        return false;
    }
    struct dgram *g = malloc(sizeof(*g) + (size_t)k);
    if (!g)
        return false;
    g->lost_after = 0;
    g->len = (size_t)k;
    memcpy(g->buf, line, (size_t)k);
    if (gap)
        TAILQ_INSERT_HEAD(&so->q, g, link);
    else
        TAILQ_INSERT_TAIL(&so->q, g, link);
    so->q_bytes += g->len;
    return true;
}

/* Queue, at the head, the element that tells the collector n records are
 * missing here; false when even that cannot be made (then they are counted
 * again, to be told with the next). */
static bool announce_lost(struct syslog_out *so, uint64_t n) {
    char msg[128];

    snprintf(msg, sizeof(msg), "[" AUDIT_SD_ID " kind=\"gap\" action=\"syslog\" lost=\"%" PRIu64 "\"]",
             n);
    if (!enqueue(so, LOG_WARNING, msg, true))
        return false;
    log_warn("syslog: %" PRIu64 " audit record(s) were not forwarded to %s (audit.db has them); "
             "forwarding again",
             n, so->path);
    so->said_full = false;
    return true;
}

/* Send what waits, in order, until the socket would block. */
static void drain(struct syslog_out *so) {
    bool retried = false;

    while (!TAILQ_EMPTY(&so->q)) {
        struct dgram *g = TAILQ_FIRST(&so->q);
        uint64_t lost = g->lost_after;
        if (so->fd < 0 && (retried || !reconnect(so)))
            break;
        if (send(so->fd, g->buf, g->len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                event_add(so->ev_write, NULL);
                return;
            }
            if (errno == EINTR)
                continue;
            if (errno != EMSGSIZE) { /* the reader is gone: reconnect once now */
                disconnect(so);
                if (!retried) {
                    retried = true;
                    if (reconnect(so))
                        continue;
                }
                break;
            }
            lost++; /* this one can never be sent */
        }
        TAILQ_REMOVE(&so->q, g, link);
        so->q_bytes -= g->len;
        free(g);
        if (lost && !announce_lost(so, lost))
            count_lost(so, lost);
    }
    if (!TAILQ_EMPTY(&so->q)) {
        struct timeval tv = {.tv_sec = RECONNECT_MS / 1000, .tv_usec = (RECONNECT_MS % 1000) * 1000};
        event_add(so->ev_retry, &tv);
    }
}

struct syslog_out *syslog_out_new(struct event_base *base, const char *path) {
    if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    struct syslog_out *so = calloc(1, sizeof(*so));
    if (!so)
        return NULL;
    so->base = base;
    so->fd = -1;
    TAILQ_INIT(&so->q);
    strcpy(so->path, path);
    so->ev_retry = evtimer_new(base, on_retry, so);
    if (!so->ev_retry) {
        free(so);
        errno = ENOMEM;
        return NULL;
    }
    return so;
}

void syslog_out_send(struct syslog_out *so, int sev, const char *msg) {
    bool idle = TAILQ_EMPTY(&so->q);

    if (so->lost_first && announce_lost(so, so->lost_first))
        so->lost_first = 0;
    if (!enqueue(so, sev, msg, false))
        count_lost(so, 1);
    /* with records waiting, the write or retry event is armed already */
    if (idle)
        drain(so);
}

void syslog_out_free(struct syslog_out *so) {
    if (!so)
        return;
    drain(so);
    if (!TAILQ_EMPTY(&so->q))
        log_warn("syslog: %zu bytes of audit records were not forwarded to %s at exit (audit.db "
                 "has them)",
                 so->q_bytes, so->path);
    while (!TAILQ_EMPTY(&so->q)) {
        struct dgram *g = TAILQ_FIRST(&so->q);
        TAILQ_REMOVE(&so->q, g, link);
        free(g);
    }
    disconnect(so);
    event_free(so->ev_retry);
    free(so);
}
