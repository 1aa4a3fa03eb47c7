/* The closer: worker threads that close client fds off the event loop (see
 * closer.h for why).
 *
 * Owns: its workers, the per-uid queues of fds to close, one mutex and one
 * condition variable. The event loop only ever takes the mutex for a queue
 * operation (no I/O under it); workers release it around the close itself.
 * A queue is worked by at most one worker at a time, so one uid's stuck
 * close holds one worker and that uid's later closes, never other users'
 * (unless every worker is stuck on a different user: CLOSER_THREADS of them).
 *
 * Must never: close an fd on the event loop that may block; touch anything
 * of the daemon's but its own queues (workers run beside the single-threaded
 * loop; they share nothing else with it). */
#include "daemon/closer.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "platform/linux/fdkind.h"

#define CLOSER_THREADS 4
#define CLOSER_MAX_QUEUES 1024 /* users with closes pending; beyond: one queue for the rest */
#define CLOSER_OVERFLOW ((uid_t)-2) /* that queue's key: it has a slot of its own */
#define CLOSER_INTERRUPT SIGUSR1

struct closer_job {
    int fd;
    struct closer_job *next;
};

struct closer_queue {
    uid_t uid;
    struct closer_job *head, *tail;
    unsigned pending;    /* queued + running */
    bool busy;           /* a worker is closing one of its fds */
    bool poked;
    pthread_t worker;
    uint64_t busy_since_ms;
};

struct closer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct closer_queue q[CLOSER_MAX_QUEUES + 1];
    size_t nq;
    pthread_t threads[CLOSER_THREADS];
    bool running[CLOSER_THREADS];
    unsigned live; /* workers that have not returned */
    unsigned started; /* workers that got to their loop */
    bool stopping;
};

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void on_interrupt(int sig) { (void)sig; }

static struct closer_queue *queue_of(struct closer *c, uid_t uid, bool create) {
    for (size_t i = 0; i < c->nq; i++)
        if (c->q[i].uid == uid)
            return &c->q[i];
    if (!create || c->nq == CLOSER_MAX_QUEUES + 1 ||
        (c->nq == CLOSER_MAX_QUEUES && uid != CLOSER_OVERFLOW))
        return NULL;
    c->q[c->nq] = (struct closer_queue){.uid = uid};
    return &c->q[c->nq++];
}

static void queue_drop_if_idle(struct closer *c, struct closer_queue *q) {
    if (q->pending || q->busy)
        return;
    *q = c->q[--c->nq];
}

static void *worker(void *arg) {
    struct closer *c = arg;

    pthread_mutex_lock(&c->mu);
    c->started++;
    pthread_cond_broadcast(&c->cv);
    for (;;) {
        struct closer_queue *q = NULL;
        for (size_t i = 0; i < c->nq && !q; i++)
            if (c->q[i].head && !c->q[i].busy)
                q = &c->q[i];
        if (!q) {
            if (c->stopping)
                break;
            pthread_cond_wait(&c->cv, &c->mu);
            continue;
        }
        struct closer_job *j = q->head;
        q->head = j->next;
        if (!q->head)
            q->tail = NULL;
        q->busy = true;
        q->poked = false;
        q->worker = pthread_self();
        q->busy_since_ms = mono_ms();
        uid_t uid = q->uid;
        pthread_mutex_unlock(&c->mu);

        close(j->fd); /* may wait: that is why it is here; EINTR still frees the fd */
        free(j);

        pthread_mutex_lock(&c->mu);
        q = queue_of(c, uid, false); /* the array may have moved entries */
        if (q) {
            q->busy = false;
            q->pending--;
            queue_drop_if_idle(c, q);
        }
        /* No one to wake: this worker looks for work again itself, and
         * takes this queue's next fd if another did not. (A broadcast
         * here woke every idle worker after every close, to find nothing:
         * a launch's three stdio fds cost 0.6 ms of wake-ups on a
         * 2-CPU machine, beside the launch.) */
    }
    c->live--;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int closer_start(struct closer **ret) {
    struct closer *c = calloc(1, sizeof(*c));
    struct sigaction sa = {.sa_handler = on_interrupt}; /* no SA_RESTART: interrupt the wait */
    sigset_t all, old;
    int r = 0;

    if (!c)
        return -ENOMEM;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    sigemptyset(&sa.sa_mask);
    if (sigaction(CLOSER_INTERRUPT, &sa, NULL) < 0) {
        r = -errno;
        goto fail;
    }
    /* Workers take no signal but the interrupt: SIGTERM and friends stay the
     * event loop's. */
    sigfillset(&all);
    sigdelset(&all, CLOSER_INTERRUPT);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (size_t i = 0; i < CLOSER_THREADS; i++) {
        r = -pthread_create(&c->threads[i], NULL, worker, c);
        if (r < 0)
            break;
        c->running[i] = true;
        c->live++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r < 0) {
        closer_stop(c);
        return r;
    }
    /* Back only once every worker runs its loop: the start of a thread
     * (glibc's rseq and robust-list calls) is over, so a seccomp filter the
     * caller installs next on all its threads (the protocol process) never
     * meets a worker still starting. Bounded: 2 s. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    pthread_mutex_lock(&c->mu);
    while (c->started < c->live)
        if (pthread_cond_timedwait(&c->cv, &c->mu, &until) == ETIMEDOUT)
            break;
    bool running = c->started == c->live;
    pthread_mutex_unlock(&c->mu);
    if (!running) {
        closer_stop(c);
        return -ETIMEDOUT;
    }
    *ret = c;
    return 0;
fail:
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
    return r;
}

void closer_stop(struct closer *c) {
    struct timespec until;
    bool all_done;

    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stopping = true;
    pthread_cond_broadcast(&c->cv);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 2;
    while (c->live > 0)
        if (pthread_cond_timedwait(&c->cv, &c->mu, &until) == ETIMEDOUT)
            break;
    all_done = c->live == 0;
    pthread_mutex_unlock(&c->mu);
    if (!all_done)
        return; /* a worker is stuck in a close; the process is exiting anyway */
    for (size_t i = 0; i < CLOSER_THREADS; i++)
        if (c->running[i])
            pthread_join(c->threads[i], NULL);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void closer_close_all(struct closer *c, uid_t uid, const int *fds, size_t n) {
    for (size_t i = 0; i < n; i++)
        closer_close(c, uid, fds[i]);
}

void closer_close(struct closer *c, uid_t uid, int fd) {
    struct fdk_info info;

    if (fd < 0)
        return;
    /* What cannot block is closed at once; so is everything without workers. */
    if (!c || (fdk_classify(fd, &info) == 0 && !info.close_may_block)) {
        close(fd);
        return;
    }
    closer_queue(c, uid, fd);
}

void closer_queue(struct closer *c, uid_t uid, int fd) {
    struct closer_job *j;
    struct closer_queue *q;

    if (fd < 0)
        return;
    if (!c) {
        close(fd);
        return;
    }
    j = malloc(sizeof(*j));
    pthread_mutex_lock(&c->mu);
    q = j && !c->stopping ? queue_of(c, uid, true) : NULL;
    if (!q && j && !c->stopping) /* as many users with closes pending as queues */
        q = queue_of(c, CLOSER_OVERFLOW, true);
    if (!q) {
        pthread_mutex_unlock(&c->mu);
        free(j);
        close(fd); /* out of memory, or stopping: the last resort */
        return;
    }
    j->fd = fd;
    j->next = NULL;
    /* One worker is woken for a queue that had nothing to do; a queue with
     * fds waiting already has one coming (or busy on it: it takes the next
     * itself). */
    bool wake = !q->head && !q->busy;
    if (q->tail)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    q->pending++;
    if (wake)
        pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

unsigned closer_pending(struct closer *c, uid_t uid) {
    struct closer_queue *q;
    unsigned n;

    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    q = queue_of(c, uid, false);
    n = q ? q->pending : 0;
    pthread_mutex_unlock(&c->mu);
    return n;
}

unsigned closer_total_pending(struct closer *c) {
    unsigned n = 0;

    if (!c)
        return 0;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nq; i++)
        n += c->q[i].pending;
    pthread_mutex_unlock(&c->mu);
    return n;
}

void closer_poke(struct closer *c, uint64_t max_ms) {
    uint64_t now = mono_ms();

    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nq; i++) {
        struct closer_queue *q = &c->q[i];
        if (q->busy && !q->poked && now - q->busy_since_ms > max_ms) {
            q->poked = true;
            pthread_kill(q->worker, CLOSER_INTERRUPT);
        }
    }
    pthread_mutex_unlock(&c->mu);
}
