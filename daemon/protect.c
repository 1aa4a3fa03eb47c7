/* Protected home entries: which mounts cover them (see protect.h). */
#include "daemon/protect.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/home_entry.h"
#include "common/macros.h"
#include "common/why.h"

void prot_list_clear(struct prot_list *l) {
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    l->n = 0;
}

/* Add a mount; a path already listed keeps its place (so it still precedes
 * what lies below it) and becomes read-only if this one is. */
static int add(struct prot_list *l, const char *path, bool ro) {
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].path, path) == 0) {
            l->v[i].ro |= ro;
            return 0;
        }
    if (l->n >= PROT_MAX)
        return -E2BIG;
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    l->v[l->n++] = (struct prot_mount){.path = p, .ro = ro};
    return 0;
}

/* Is dir the caller's (so an agent, being the caller, could chmod it)? */
static bool callers(const char *dir, uid_t uid) {
    struct stat st;
    return lstat(dir, &st) == 0 && st.st_uid == uid;
}

static int blocked(const char *dir, const char *what, int e, char *why, size_t whylen) {
    set_why(why, whylen,
            "cannot %s %s (%s): lyh must see the entries of your home it keeps read-only "
            "for agents; give it back its usual mode (chmod u+rwx %s)",
            what, dir, strerror(e), dir);
    return -e;
}

/* Pin every directory above path (not path itself) that sits in one of the
 * caller's: those an agent could rename away to put another in its place
 * (~/dotfiles above a symlinked ~/.bashrc's target). Outermost first. */
static int pin_above(struct prot_list *l, const char *path, uid_t uid) {
    char a[PATH_MAX], parent[PATH_MAX] = "/";
    size_t n = strlen(path);

    if (n >= sizeof(a))
        return 0;
    for (size_t i = 1; i < n; i++) {
        if (path[i] != '/')
            continue;
        memcpy(a, path, i);
        a[i] = '\0';
        if (callers(parent, uid)) {
            int r = add(l, a, false);
            if (r < 0)
                return r;
        }
        memcpy(parent, a, i + 1);
    }
    return 0;
}

/* One entry: walk name's components below home. */
static int one(struct prot_list *l, const char *home, uid_t uid, const char *name, bool create,
               char *why, size_t whylen) {
    char cur[PATH_MAX], next[PATH_MAX], comp[HE_NAME_MAX];
    const char *s = name;
    int k;

    if (snprintf(cur, sizeof(cur), "%s", home) >= (int)sizeof(cur))
        return 0;
    for (;;) {
        const char *slash = strchr(s, '/');
        size_t len = slash ? (size_t)(slash - s) : strlen(s);
        bool last = !slash;
        struct stat st;

        memcpy(comp, s, len);
        comp[len] = '\0';
        if (snprintf(next, sizeof(next), "%s/%s", cur, comp) >= (int)sizeof(next))
            return 0; /* too long to exist */
        if (lstat(next, &st) < 0) {
            if (errno != ENOENT) {
                int e = errno;
                /* not the caller's to see: nothing an agent could write
                 * either, unless the directory is theirs to chmod */
                return callers(cur, uid) ? blocked(cur, "look into", e, why, whylen) : 0;
            }
            if (!create)
                return 0;
            if (mkdir(next, 0700) < 0 && errno != EEXIST) {
                int e = errno;
                /* The user cannot make it here, so neither can the agent
                 * (it has at most the user's rights), unless the directory
                 * is the user's and its mode was changed. */
                if (e == EACCES || e == EPERM || e == EROFS)
                    return callers(cur, uid) ? blocked(cur, "create entries in", e, why, whylen)
                                             : 0;
                set_why(why, whylen, "cannot create %s (to keep agents from making it): %s",
                        next, strerror(e));
                return -e;
            }
            if (lstat(next, &st) < 0 || !S_ISDIR(st.st_mode))
                return 0;
        }
        if (last) {
            if ((k = add(l, next, true)) < 0)
                return k;
            if (S_ISLNK(st.st_mode)) {
                _cleanup_free_ char *target = realpath(next, NULL);
                if (target && ((k = pin_above(l, target, uid)) < 0 || (k = add(l, target, true)) < 0))
                    return k;
            }
            return 0;
        }
        if (!S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
            return 0; /* a file where a directory would be: nothing below it */
        if ((k = add(l, next, false)) < 0)
            return k;
        if (S_ISLNK(st.st_mode)) {
            _cleanup_free_ char *target = realpath(next, NULL);
            struct stat ts;
            if (!target || stat(target, &ts) < 0 || !S_ISDIR(ts.st_mode) ||
                strlen(target) >= sizeof(cur))
                return 0;
            if ((k = pin_above(l, target, uid)) < 0 || (k = add(l, target, false)) < 0)
                return k;
            memcpy(cur, target, strlen(target) + 1);
        } else {
            memcpy(cur, next, strlen(next) + 1);
        }
        s = slash + 1;
    }
}

int prot_collect(const char *home, uid_t uid, const char *const *names, size_t n_names,
                 struct prot_list *out, char *why, size_t whylen) {
    int k = 0;

    for (size_t i = 0; i < he_protect_defaults_count && k == 0; i++)
        k = one(out, home, uid, he_protect_defaults[i].name, he_protect_defaults[i].create, why,
                whylen);
    for (size_t i = 0; i < n_names && k == 0; i++)
        k = one(out, home, uid, names[i], false, why, whylen);
    if (k == -E2BIG)
        set_why(why, whylen, "more than %d mounts would be needed to protect the entries of your "
                             "home (paths.protect); name fewer",
                PROT_MAX);
    else if (k == -ENOMEM)
        set_why(why, whylen, "out of memory");
    return k;
}

int prot_agent_state(const char *home, const char *argv0, char *why, size_t whylen) {
    static const struct {
        const char *agent, *dir, *json;
    } known[] = {
        {"claude", ".claude", ".claude.json"},
        {"codex", ".codex", NULL},
        {"gemini", ".gemini", NULL},
    };
    const char *base = strrchr(argv0, '/');
    char path[PATH_MAX];

    base = base ? base + 1 : argv0;
    for (size_t i = 0; i < ARRAY_SIZE(known); i++) {
        if (strcmp(base, known[i].agent) != 0)
            continue;
        if (snprintf(path, sizeof(path), "%s/%s", home, known[i].dir) >= (int)sizeof(path))
            return 0;
        if (mkdir(path, 0700) < 0 && errno != EEXIST) {
            int e = errno;
            set_why(why, whylen, "cannot create %s for the agent's first run: %s", path,
                    strerror(e));
            return -e;
        }
        if (!known[i].json ||
            snprintf(path, sizeof(path), "%s/%s", home, known[i].json) >= (int)sizeof(path))
            return 0;
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            if (errno == EEXIST)
                return 0;
            int e = errno;
            set_why(why, whylen, "cannot create %s for the agent's first run: %s", path,
                    strerror(e));
            return -e;
        }
        int k = write(fd, "{}\n", 3) == 3 ? 0 : -EIO;
        close(fd);
        if (k < 0)
            set_why(why, whylen, "cannot write %s", path);
        return k;
    }
    return 0;
}

bool prot_covers(const struct prot_list *l, const char *path) {
    for (size_t i = 0; i < l->n; i++) {
        size_t n = strlen(l->v[i].path);
        if (l->v[i].ro && strncmp(path, l->v[i].path, n) == 0 && (path[n] == '\0' || path[n] == '/'))
            return true;
    }
    return false;
}
