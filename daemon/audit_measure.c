/* audit_measure: audit.db's write rate measured again, off the loop
 * (audit_measure.h). */
#include "daemon/audit_measure.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "common/macros.h"
#include "daemon/lyhd.h"
#include "storage/audit_db.h"

struct audit_measure {
    struct audit_measure_params p;
    char dir[PATH_MAX];
    audit_measure_fn better;
    void *arg;
    int efd;               /* the thread -> the loop: the best went up */
    struct event *ev;
    pthread_t thread;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t cv;     /* CLOCK_MONOTONIC */
    bool stopping;         /* under mu */
    uint64_t best;         /* under mu: the thread's best so far */
    unsigned measured;     /* under mu: measurements that worked */
    bool done;             /* under mu: the thread measures no more */
    char why[256];         /* under mu: why a measurement failed ("": none) */
    bool told_done;        /* the loop's: `better` had its last call */
};

static void tell(struct audit_measure *m) {
    uint64_t one = 1;
    /* cannot fill up (the loop reads it); a failure leaves the loop untold,
     * with the start's figure */
    (void)!write(m->efd, &one, sizeof(one));
}

static void *run(void *arg) {
    struct audit_measure *m = arg;

    for (unsigned i = 0; i < m->p.times; i++) {
        struct timespec until = lyhd_deadline(CLOCK_MONOTONIC, m->p.gap_ms);
        pthread_mutex_lock(&m->mu);
        /* until stopped or the time is up (any error ends the wait: no spin) */
        while (!m->stopping && pthread_cond_timedwait(&m->cv, &m->mu, &until) == 0)
            ;
        bool stop = m->stopping;
        pthread_mutex_unlock(&m->mu);
        if (stop)
            break;

        uint64_t took = 0;
        char why[sizeof(m->why)] = "";
        if (audit_db_measure(m->dir, m->p.batch, m->p.rounds, &took, why, sizeof(why)) < 0) {
            pthread_mutex_lock(&m->mu);
            snprintf(m->why, sizeof(m->why), "%s", why[0] ? why : "failed");
            pthread_mutex_unlock(&m->mu);
            break; /* the figures so far stay */
        }
        pthread_mutex_lock(&m->mu);
        bool up = took > m->best;
        if (up)
            m->best = took;
        m->measured++;
        pthread_mutex_unlock(&m->mu);
        if (up)
            tell(m);
    }
    /* this thread's malloc arena kept the scratch file's pages (sqlite's
     * cache): ~240 KiB of lyhd's RSS for good, measured; give them back */
    malloc_trim(0);
    pthread_mutex_lock(&m->mu);
    bool stopped = m->stopping;
    m->done = !stopped;
    pthread_mutex_unlock(&m->mu);
    if (!stopped)
        tell(m);
    return NULL;
}

static void on_better(evutil_socket_t fd, short what, void *arg) {
    struct audit_measure *m = arg;
    uint64_t n;

    (void)what;
    if (read(fd, &n, sizeof(n)) != (ssize_t)sizeof(n))
        return;
    if (m->told_done)
        return;
    pthread_mutex_lock(&m->mu);
    uint64_t best = m->best;
    unsigned measured = m->measured;
    bool done = m->done;
    char why[sizeof(m->why)];
    memcpy(why, m->why, sizeof(why));
    pthread_mutex_unlock(&m->mu);
    if (done) {
        m->told_done = true;
        /* after saying so the thread only returns: joined here, so that it
         * is gone before anyone hears it is done (its stack, its arena) */
        if (lyhd_join_within(m->thread, 1000) == 0)
            m->running = false;
    }
    m->better(best, measured, done, done && why[0] ? why : NULL, m->arg);
}

static void free_measure(struct audit_measure *m) {
    if (m->ev)
        event_free(m->ev);
    CLOSE_FD(m->efd);
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

int audit_measure_start(struct event_base *base, const struct audit_measure_params *p,
                        audit_measure_fn better, void *arg, struct audit_measure **ret) {
    struct audit_measure *m;
    pthread_condattr_t ca;
    int r;

    if (!p->dir || p->times == 0 || p->batch == 0 || p->rounds == 0 || !better)
        return -EINVAL;
    if (!audit_db_threadsafe()) /* a connection of its own in another thread */
        return -ENOTSUP;
    m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->efd = -1;
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (snprintf(m->dir, sizeof(m->dir), "%s", p->dir) >= (int)sizeof(m->dir)) {
        free_measure(m);
        return -ENAMETOOLONG;
    }
    m->p = *p;
    m->p.dir = m->dir;
    m->better = better;
    m->arg = arg;
    m->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (m->efd < 0) {
        r = -errno;
        free_measure(m);
        return r;
    }
    m->ev = event_new(base, m->efd, EV_READ | EV_PERSIST, on_better, m);
    if (!m->ev || event_add(m->ev, NULL) < 0) {
        free_measure(m);
        return -ENOMEM;
    }
    r = lyhd_thread_start(&m->thread, NULL, run, m);
    if (r < 0) {
        free_measure(m);
        return r;
    }
    m->running = true;
    *ret = m;
    return 0;
}

void audit_measure_stop(struct audit_measure *m) {
    if (!m)
        return;
    /* the loop hears nothing more, whatever the thread does from here */
    if (m->ev) {
        event_free(m->ev);
        m->ev = NULL;
    }
    if (m->running) {
        pthread_mutex_lock(&m->mu);
        m->stopping = true;
        pthread_cond_signal(&m->cv);
        pthread_mutex_unlock(&m->mu);
        if (lyhd_join_within(m->thread, 2000) < 0)
            return;
    }
    free_measure(m);
}
