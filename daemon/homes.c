/* Other users' homes, read by a thread of their own (homes.h says why).
 *
 * Owns: the thread, the published table (each human account's uid, a label,
 * and the inodes of its home and of the home's ancestors), one mutex and one
 * condition variable. The thread builds a new table without the mutex and
 * swaps it in under it; the loop reads the table under it (comparisons
 * only: no I/O under the mutex on either side).
 *
 * Must never: enumerate the user database or open a home on the loop; touch
 * anything of the daemon's but its own table. */
#include "daemon/homes.h"
#include "daemon/lyhd.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/macros.h"
#include "platform/linux/fsutil.h"

#define HOMES_DEPTH 256 /* ancestors kept per home (as fs_ancestors' callers do) */

struct home {
    uid_t uid;
    char label[300];     /* "name (home)" */
    char *dir;           /* the account's home as the database says */
    struct fs_inode at;  /* what dir was at the read ({0, 0}: it did not open) */
    size_t n;            /* 0: the home did not open (not compared; watched) */
    struct fs_inode *up; /* [0] the home, then its ancestors up to "/" */
};

struct table {
    struct home *v;
    size_t n;
};

struct stamp {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    bool ok;
};

struct homes {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool running, stopping;
    char *file; /* NULL: NSS */
    struct table *table; /* NULL until the first read */
    unsigned generation;
    unsigned holds; /* homes_hold()s not yet released, homes_stop's own included */
};

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void table_free(struct table *t) {
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i].up);
        free(t->v[i].dir);
    }
    free(t->v);
    free(t);
}

static struct stamp stamp_of(const char *path) {
    struct stat st;
    struct stamp s = {0};
    if (stat(path, &st) == 0)
        s = (struct stamp){st.st_dev, st.st_ino, st.st_size, st.st_mtim, true};
    return s;
}

static bool stamp_same(const struct stamp *a, const struct stamp *b) {
    return a->ok == b->ok && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* One account into t, if it is a human one; its home's inode chain when it
 * opens (one that does not is kept, to be watched: a home made or mounted
 * after the account appears must not go unseen). 0, or -ENOMEM. */
static int add_account(struct table *t, size_t *cap, const struct passwd *pw) {
    struct fs_inode up[HOMES_DEPTH];
    size_t n = 0;

    /* Human accounts only: system users have homes like /bin or /. */
    if (pw->pw_uid < 1000 || pw->pw_uid == 65534 || !pw->pw_dir || pw->pw_dir[0] != '/' ||
        strcmp(pw->pw_dir, "/") == 0)
        return 0;
    int fd = open(pw->pw_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        n = fs_ancestors(fd, up, ARRAY_SIZE(up));
        close(fd);
    }
    if (t->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        struct home *nv = reallocarray(t->v, ncap, sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        t->v = nv;
        *cap = ncap;
    }
    struct home *h = &t->v[t->n];
    *h = (struct home){.uid = pw->pw_uid, .n = n};
    if (!(h->dir = strdup(pw->pw_dir)) || (n && !(h->up = malloc(n * sizeof(*h->up))))) {
        free(h->dir);
        return -ENOMEM;
    }
    if (n) {
        memcpy(h->up, up, n * sizeof(*h->up));
        h->at = up[0];
    }
    snprintf(h->label, sizeof(h->label), "%s (%s)", pw->pw_name, pw->pw_dir);
    t->n++;
    return 0;
}

/* Has any home changed since t was read: made, removed, or something else
 * mounted or moved there (a login's mount, a home made after its
 * account)? One stat per account, by this thread. */
static bool homes_moved(const struct table *t) {
    struct stat st;
    for (size_t i = 0; t && i < t->n; i++) {
        const struct home *o = &t->v[i];
        bool there = stat(o->dir, &st) == 0 && S_ISDIR(st.st_mode);
        if (there != (o->n > 0) ||
            (there && (st.st_dev != o->at.dev || st.st_ino != o->at.ino)))
            return true;
    }
    return false;
}

/* Read the whole database. NULL: out of memory (the old table stays). */
static struct table *scan(const char *file) {
    struct table *t = calloc(1, sizeof(*t));
    size_t cap = 0, bufsize = 16384;
    char *buf = malloc(bufsize);
    struct passwd pw, *res;
    FILE *f = NULL;
    int r = 0;

    if (!t || !buf)
        goto fail;
    if (file) {
        if (!(f = fopen(file, "re")))
            goto fail;
    } else {
        setpwent();
    }
    for (;;) {
        int e = f ? fgetpwent_r(f, &pw, buf, bufsize, &res) : getpwent_r(&pw, buf, bufsize, &res);
        if (e == ERANGE && bufsize < (1u << 20)) {
            char *nb = realloc(buf, bufsize * 4);
            if (!nb) {
                r = -ENOMEM;
                break;
            }
            buf = nb;
            bufsize *= 4;
            continue;
        }
        if (e == ENOENT || (e == 0 && !res))
            break; /* the end */
        if (e != 0) {
            /* a backend that failed half way (or an entry beyond 1 MiB):
             * never a table with accounts missing; the old one stays */
            r = -e;
            break;
        }
        if ((r = add_account(t, &cap, &pw)) < 0)
            break;
    }
    if (f)
        fclose(f);
    else
        endpwent();
    if (r < 0)
        goto fail;
    free(buf);
    return t;
fail:
    free(buf);
    table_free(t);
    return NULL;
}

static void *run(void *arg) {
    struct homes *h = arg;
    const char *watch = h->file ? h->file : "/etc/passwd";
    struct stamp seen = {0};
    uint64_t built = 0;

    for (;;) {
        /* Only this thread writes h->table: it reads its own without the
         * mutex, and does its stat()s outside it. */
        struct stamp now = stamp_of(watch);
        bool need = !h->table || !stamp_same(&now, &seen) || homes_moved(h->table) ||
                    mono_ms() - built >= HOMES_MAX_AGE_MS;
        if (need) {
            struct table *t = scan(h->file);
            if (t) {
                pthread_mutex_lock(&h->mu);
                struct table *old = h->table;
                h->table = t;
                h->generation++;
                pthread_mutex_unlock(&h->mu);
                table_free(old);
                seen = now;
                built = mono_ms();
                continue; /* look again at once: it may have changed meanwhile */
            }
            /* out of memory, a backend failure, or the file is gone: the
             * old table stays; try again after the wait */
        }
        struct timespec until = lyhd_deadline(CLOCK_MONOTONIC, HOMES_POLL_MS);
        pthread_mutex_lock(&h->mu);
        if (!h->stopping)
            pthread_cond_timedwait(&h->cv, &h->mu, &until);
        bool stop = h->stopping;
        pthread_mutex_unlock(&h->mu);
        if (stop)
            break;
    }
    return NULL;
}

int homes_start(const char *passwd_file, struct homes **ret) {
    struct homes *h = calloc(1, sizeof(*h));
    pthread_condattr_t ca;
    int r;

    if (!h)
        return -ENOMEM;
    if (passwd_file && !(h->file = strdup(passwd_file))) {
        free(h);
        return -ENOMEM;
    }
    pthread_mutex_init(&h->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
    r = lyhd_thread_start(&h->thread, NULL, run, h);
    if (r < 0) {
        homes_stop(h);
        return r;
    }
    h->running = true;
    h->holds = 1; /* homes_stop's */
    *ret = h;
    return 0;
}

static void homes_free(struct homes *h) {
    table_free(h->table);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h->file);
    free(h);
}

struct homes *homes_hold(struct homes *h) {
    if (!h)
        return NULL;
    pthread_mutex_lock(&h->mu);
    h->holds++;
    pthread_mutex_unlock(&h->mu);
    return h;
}

void homes_release(struct homes *h) {
    if (!h)
        return;
    pthread_mutex_lock(&h->mu);
    bool last = --h->holds == 0;
    pthread_mutex_unlock(&h->mu);
    if (last)
        homes_free(h);
}

void homes_stop(struct homes *h) {
    if (!h)
        return;
    if (h->running) {
        pthread_mutex_lock(&h->mu);
        h->stopping = true;
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
        /* a read stuck on a network directory could hold this up: the
         * daemon is exiting, so it waits two seconds at most and then
         * leaves the thread (and what it may still touch) behind */
        if (lyhd_join_within(h->thread, 2000) < 0)
            return;
        h->running = false;
        homes_release(h);
        return;
    }
    homes_free(h); /* a failed start: nobody holds it */
}

int homes_near_other(struct homes *h, int fd, uid_t caller, char *who, size_t wholen) {
    struct fs_inode mine[HOMES_DEPTH];
    size_t n_mine = fs_ancestors(fd, mine, ARRAY_SIZE(mine));
    int hit = 0;

    if (n_mine == 0)
        return -EIO;
    pthread_mutex_lock(&h->mu);
    if (!h->table) {
        pthread_mutex_unlock(&h->mu);
        return -EAGAIN;
    }
    for (size_t i = 0; i < h->table->n && !hit; i++) {
        const struct home *o = &h->table->v[i];
        if (o->uid == caller || o->n == 0)
            continue;
        if (fs_inode_in(mine, n_mine, o->up[0]) || fs_inode_in(o->up, o->n, mine[0])) {
            snprintf(who, wholen, "%s", o->label);
            hit = 1;
        }
    }
    pthread_mutex_unlock(&h->mu);
    return hit;
}

unsigned homes_generation(struct homes *h) {
    pthread_mutex_lock(&h->mu);
    unsigned g = h->generation;
    pthread_mutex_unlock(&h->mu);
    return g;
}
