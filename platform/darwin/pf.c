/* pf: the macOS egress guard's driver. Owns the rules directory, the pfctl
 * child processes it starts and the enable tokens it holds. It must never
 * build a shell command (pfctl gets an argv of fixed words, anchor names we
 * made and paths in our own directory), touch an anchor outside
 * PFR_ANCHOR_PREFIX, flush anything global (no `-F all`, which would drop every
 * state of the host), or log.
 *
 * Why pfctl and not /dev/pf: the ioctls that load a ruleset (DIOCXBEGIN,
 * DIOCADDRULE, ... with struct pf_rule) are private to macOS and change with
 * it; pfctl is the interface Apple keeps working, and its parser is what
 * vets our text. The cost is a process per step, a few milliseconds each, at
 * session start and end only.
 *
 * Why the order of pf_anchor_load(): vet before enabling, so a bad ruleset
 * never leaves PF toggled on; enable before loading, so the anchor never sits
 * loaded in a disabled PF believing it guards; load from a temporary file and
 * rename it over the record only once loaded, so the file always shows what
 * PF holds and a failed replace leaves the previous anchor and file as they
 * were. The enable token is PF's reference count: `pfctl -X TOKEN` drops our
 * reference only, so PF stays enabled for whoever else enabled it.
 */
#include "platform/darwin/pf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "common/macros.h"
#include "common/why.h"
#include "platform/darwin/posix.h"

struct pf_token {
    enum pfr_scope scope;
    uint32_t uid;
    uint64_t token;
};

struct pf {
    char pfctl[256];
    char dir[256];
    int dir_fd; /* O_DIRECTORY, CLOEXEC */
    int timeout_ms;
    struct pf_token *tokens; /* owned, n_tokens entries */
    size_t n_tokens;
};

/* ---- small helpers ------------------------------------------------------------------ */

/* The first line of pfctl's output, printable, for a `why`. */
static void first_line(const char *out, size_t len, char *buf, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < len && k + 1 < cap; i++) {
        char c = out[i];
        if (c == '\n') {
            if (k > 0)
                break;
            continue;
        }
        buf[k++] = (c >= 0x20 && c < 0x7f) ? c : '?';
    }
    buf[k] = '\0';
}

/* ---- running pfctl ------------------------------------------------------------------- */

struct run {
    char out[PF_OUTPUT_MAX];
    size_t len;
    int status; /* waitpid status */
};

/* Read the child's output until EOF or the deadline. */
static int drain(int fd, struct run *rn, int64_t deadline) {
    char scratch[4096];
    for (;;) {
        int64_t left = deadline - px_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, (int)(left > 1000 ? 1000 : left));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            continue;
        char *dst = rn->len < sizeof(rn->out) ? rn->out + rn->len : scratch;
        size_t room = rn->len < sizeof(rn->out) ? sizeof(rn->out) - rn->len : sizeof(scratch);
        ssize_t got = read(fd, dst, room);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return -errno;
        if (got == 0)
            return 0;
        if (dst != scratch)
            rn->len += (size_t)got;
    }
}

/* Run pfctl with argv (argv[0] is replaced by the configured path) and wait
 * for it, bounded by the timeout. stdin is /dev/null, stdout and stderr one
 * pipe. 0 when it ran and exited (check rn->status), else -errno. */
static int pfctl_run(struct pf *p, char *argv[], struct run *rn) {
    _cleanup_close_ int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0)
        return -errno;
    int fds[2];
    int r = px_pipe_cloexec(fds);
    if (r < 0)
        return r;
    _cleanup_close_ int rd = fds[0];
    _cleanup_close_ int wr = fds[1];

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    if ((r = posix_spawn_file_actions_init(&fa)) != 0)
        return -r;
    if ((r = posix_spawnattr_init(&attr)) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return -r;
    }
    sigset_t none, dflt;
    sigemptyset(&none);
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    sigaddset(&dflt, SIGCHLD);
    sigaddset(&dflt, SIGTERM);
    sigaddset(&dflt, SIGINT);
    sigaddset(&dflt, SIGHUP);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
#ifdef POSIX_SPAWN_CLOEXEC_DEFAULT
    /* Darwin: only the fds set up below reach pfctl, CLOEXEC or not. */
    flags |= POSIX_SPAWN_CLOEXEC_DEFAULT;
#endif
    r = posix_spawn_file_actions_adddup2(&fa, devnull, 0);
    if (r == 0)
        r = posix_spawn_file_actions_adddup2(&fa, wr, 1);
    if (r == 0)
        r = posix_spawn_file_actions_adddup2(&fa, wr, 2);
    if (r == 0)
        r = posix_spawnattr_setflags(&attr, flags);
    if (r == 0)
        r = posix_spawnattr_setsigmask(&attr, &none);
    if (r == 0)
        r = posix_spawnattr_setsigdefault(&attr, &dflt);

    /* A fixed environment: C locale so the output is the one we parse. */
    char *envp[] = {"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "LC_ALL=C", NULL};
    pid_t pid = -1;
    argv[0] = p->pfctl;
    if (r == 0)
        r = posix_spawn(&pid, p->pfctl, &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (r != 0)
        return -r;
    CLOSE_FD(wr);

    rn->len = 0;
    int64_t deadline = px_now_ms() + p->timeout_ms;
    int dr = drain(rd, rn, deadline);
    if (dr == -ETIMEDOUT)
        kill(pid, SIGKILL); /* our own child, by pid; reaped below */
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    if (dr < 0)
        return dr;
    rn->status = st;
    return 0;
}

static bool exited_ok(const struct run *rn) {
    return WIFEXITED(rn->status) && WEXITSTATUS(rn->status) == 0;
}

/* Run and require exit 0; `what` names the step in the message. */
static int pfctl_ok(struct pf *p, char *argv[], struct run *rn, const char *what,
                    char *why, size_t whylen) {
    int r = pfctl_run(p, argv, rn);
    if (r == -ETIMEDOUT) {
        set_why(why, whylen, "%s: pfctl did not finish within %d ms", what, p->timeout_ms);
        return r;
    }
    if (r < 0) {
        set_why(why, whylen, "%s: cannot run %s: %s", what, p->pfctl, strerror(-r));
        return r;
    }
    if (!exited_ok(rn)) {
        char line[200];
        first_line(rn->out, rn->len, line, sizeof(line));
        if (WIFEXITED(rn->status))
            set_why(why, whylen, "%s: pfctl exited %d: %s", what, WEXITSTATUS(rn->status),
                    line[0] ? line : "(no output)");
        else
            set_why(why, whylen, "%s: pfctl was killed by signal %d", what,
                    WIFSIGNALED(rn->status) ? WTERMSIG(rn->status) : 0);
        return -EIO;
    }
    return 0;
}

/* ---- tokens ---------------------------------------------------------------------------- */

static struct pf_token *token_find(const struct pf *p, enum pfr_scope scope, uint32_t uid) {
    for (size_t i = 0; i < p->n_tokens; i++)
        if (p->tokens[i].scope == scope && p->tokens[i].uid == uid)
            return &p->tokens[i];
    return NULL;
}

static int token_add(struct pf *p, enum pfr_scope scope, uint32_t uid, uint64_t token) {
    if (p->n_tokens >= SIZE_MAX / sizeof(*p->tokens) - 1)
        return -ENOMEM;
    struct pf_token *v = realloc(p->tokens, (p->n_tokens + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    p->tokens = v;
    p->tokens[p->n_tokens++] = (struct pf_token){.scope = scope, .uid = uid, .token = token};
    return 0;
}

static void token_drop(struct pf *p, struct pf_token *t) {
    size_t i = (size_t)(t - p->tokens);
    p->tokens[i] = p->tokens[--p->n_tokens];
}

int pf_token_get(const struct pf *p, enum pfr_scope scope, uint32_t uid, uint64_t *ret_token) {
    const struct pf_token *t = p ? token_find(p, scope, uid) : NULL;
    if (!t)
        return -ENOENT;
    *ret_token = t->token;
    return 0;
}

int pf_token_adopt(struct pf *p, enum pfr_scope scope, uint32_t uid, uint64_t token) {
    char name[PFR_NAME_MAX];
    if (!p || token == 0 || pfr_anchor_name(scope, uid, name) < 0)
        return -EINVAL;
    if (token_find(p, scope, uid))
        return -EEXIST;
    return token_add(p, scope, uid, token);
}

/* pfctl -X TOKEN */
static int token_release(struct pf *p, uint64_t token, const char *anchor, char *why,
                         size_t whylen) {
    char tok[24], what[PFR_NAME_MAX + 32];
    snprintf(tok, sizeof(tok), "%" PRIu64, token);
    snprintf(what, sizeof(what), "release PF for %s", anchor);
    char *argv[] = {NULL, "-X", tok, NULL};
    _cleanup_free_ struct run *rn = malloc(sizeof(*rn));
    if (!rn)
        return -ENOMEM;
    return pfctl_ok(p, argv, rn, what, why, whylen);
}

/* ---- open / close ------------------------------------------------------------------------ */

void pf_close(struct pf *p) {
    if (!p)
        return;
    CLOSE_FD(p->dir_fd);
    free(p->tokens);
    free(p);
}

static void pf_closep(struct pf **p) {
    pf_close(*p);
}

int pf_open(const struct pf_config *cfg, struct pf **ret, char *why, size_t whylen) {
    const char *pfctl = cfg && cfg->pfctl ? cfg->pfctl : PF_PFCTL_PATH;
    const char *dir = cfg && cfg->rules_dir ? cfg->rules_dir : PF_RULES_DIR;
    int timeout = cfg && cfg->timeout_ms > 0 ? cfg->timeout_ms : PF_TIMEOUT_MS;

    if (pfctl[0] != '/' || dir[0] != '/') {
        set_why(why, whylen, "pfctl and the rules directory must be absolute paths");
        return -EINVAL;
    }
    _cleanup_(pf_closep) struct pf *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->dir_fd = -1;
    p->timeout_ms = timeout;
    if (snprintf(p->pfctl, sizeof(p->pfctl), "%s", pfctl) >= (int)sizeof(p->pfctl) ||
        snprintf(p->dir, sizeof(p->dir), "%s", dir) >= (int)sizeof(p->dir)) {
        set_why(why, whylen, "pfctl or rules directory path too long");
        return -ENAMETOOLONG;
    }
    /* pfctl reads our files by name: nobody but us may be able to change
     * what a name in this directory designates. */
    struct stat st = {0};
    int r = px_open_private_dir(dir, 0700, &p->dir_fd, &st);
    if (r == -EPERM) {
        set_why(why, whylen,
                "%s must be owned by uid %u and writable by nobody else (it is uid %u, mode %03o)",
                dir, (unsigned)geteuid(), (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
        return r;
    }
    if (r < 0) {
        set_why(why, whylen, "cannot open %s: %s", dir, strerror(-r));
        return r;
    }
    *ret = TAKE_PTR(p);
    return 0;
}

/* ---- rules files ------------------------------------------------------------------------- */

/* "lianyaohu-501.pf" for "com.apple/lianyaohu-501" */
static void file_name(const char *anchor, char *buf, size_t cap, bool tmp) {
    const char *base = anchor + sizeof(PFR_ANCHOR_PARENT); /* past "com.apple/" */
    snprintf(buf, cap, "%s%s.pf%s", tmp ? "." : "", base, tmp ? ".tmp" : "");
}

static int write_all(int fd, const char *s, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Write text to <dir>/.<name>.pf.tmp, 0600, synced. */
static int write_tmp(struct pf *p, const char *tmpname, const char *text) {
    if (unlinkat(p->dir_fd, tmpname, 0) < 0 && errno != ENOENT)
        return -errno;
    _cleanup_close_ int fd =
        openat(p->dir_fd, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int r = write_all(fd, text, strlen(text));
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (r < 0)
        unlinkat(p->dir_fd, tmpname, 0);
    return r;
}

/* ---- load / unload ------------------------------------------------------------------------- */

int pf_anchor_load(struct pf *p, const struct pfr_input *in, char *why, size_t whylen) {
    char anchor[PFR_NAME_MAX], tmpname[PFR_NAME_MAX + 16], name[PFR_NAME_MAX + 16];
    char tmppath[sizeof(p->dir) + sizeof(tmpname) + 1];
    _cleanup_free_ char *text = NULL;
    int r;

    if (!p || !in) {
        set_why(why, whylen, "PF anchor: no input");
        return -EINVAL;
    }
    r = pfr_anchor_name(in->scope, in->uid, anchor);
    if (r == 0)
        r = pfr_render(in, &text);
    if (r < 0) {
        set_why(why, whylen, "PF anchor for uid %u: invalid guard request", (unsigned)in->uid);
        return r;
    }
    file_name(anchor, tmpname, sizeof(tmpname), true);
    file_name(anchor, name, sizeof(name), false);
    snprintf(tmppath, sizeof(tmppath), "%s/%s", p->dir, tmpname);

    r = write_tmp(p, tmpname, text);
    if (r < 0) {
        set_why(why, whylen, "PF anchor %s: cannot write %s: %s", anchor, tmppath, strerror(-r));
        return r;
    }

    _cleanup_free_ struct run *rn = malloc(sizeof(*rn));
    if (!rn) {
        unlinkat(p->dir_fd, tmpname, 0);
        return -ENOMEM;
    }
    char what[PFR_NAME_MAX + 32];

    /* 1. vet */
    snprintf(what, sizeof(what), "vet %s", anchor);
    char *vet[] = {NULL, "-n", "-f", tmppath, NULL};
    r = pfctl_ok(p, vet, rn, what, why, whylen);
    if (r < 0)
        goto fail;

    /* 2. enable, unless this anchor holds a reference already */
    uint64_t token = 0;
    bool new_token = false;
    if (!token_find(p, in->scope, in->uid)) {
        snprintf(what, sizeof(what), "enable PF for %s", anchor);
        char *en[] = {NULL, "-E", NULL};
        r = pfctl_ok(p, en, rn, what, why, whylen);
        if (r < 0)
            goto fail;
        r = pfctl_parse_token(rn->out, rn->len, &token);
        if (r < 0) {
            /* PF may now hold a reference we cannot name: say so, do not guess. */
            set_why(why, whylen, "enable PF for %s: pfctl -E printed no enable token", anchor);
            r = -EPROTO;
            goto fail;
        }
        r = token_add(p, in->scope, in->uid, token);
        if (r < 0) {
            token_release(p, token, anchor, NULL, 0);
            goto fail;
        }
        new_token = true;
    }

    /* 3. load: rules and tables of the anchor, one transaction */
    snprintf(what, sizeof(what), "load %s", anchor);
    char *load[] = {NULL, "-a", anchor, "-f", tmppath, NULL};
    r = pfctl_ok(p, load, rn, what, why, whylen);
    if (r < 0) {
        if (new_token) {
            token_release(p, token, anchor, NULL, 0);
            token_drop(p, token_find(p, in->scope, in->uid));
        }
        goto fail;
    }

    /* 4. the file now records what PF holds */
    if (renameat(p->dir_fd, tmpname, p->dir_fd, name) < 0) {
        /* Loaded and enabled: the guard is in place. The record is stale until
         * the next load or unload, which rewrites or removes it. */
        int e = errno;
        unlinkat(p->dir_fd, tmpname, 0);
        set_why(why, whylen, "PF anchor %s is loaded, but %s/%s could not be updated: %s", anchor,
                p->dir, name, strerror(e));
        return -e;
    }
    return 0;

fail:
    unlinkat(p->dir_fd, tmpname, 0);
    return r;
}

/* Flush rules and tables of one anchor; token and file are the caller's. */
static int flush_anchor(struct pf *p, const char *anchor, char *why, size_t whylen) {
    _cleanup_free_ struct run *rn = malloc(sizeof(*rn));
    if (!rn)
        return -ENOMEM;
    char what[PFR_NAME_MAX + 32];
    snprintf(what, sizeof(what), "flush %s", anchor);
    char *rules[] = {NULL, "-a", (char *)anchor, "-F", "rules", NULL};
    char *tables[] = {NULL, "-a", (char *)anchor, "-F", "Tables", NULL};
    int r = pfctl_ok(p, rules, rn, what, why, whylen);
    int k = pfctl_ok(p, tables, rn, what, r < 0 ? NULL : why, r < 0 ? 0 : whylen);
    return r < 0 ? r : k;
}

int pf_anchor_unload(struct pf *p, enum pfr_scope scope, uint32_t uid, char *why, size_t whylen) {
    char anchor[PFR_NAME_MAX], name[PFR_NAME_MAX + 16];
    if (!p || pfr_anchor_name(scope, uid, anchor) < 0) {
        set_why(why, whylen, "PF anchor: invalid scope or uid");
        return -EINVAL;
    }
    int first = flush_anchor(p, anchor, why, whylen);

    struct pf_token *t = token_find(p, scope, uid);
    if (t) {
        int r = token_release(p, t->token, anchor, first < 0 ? NULL : why, first < 0 ? 0 : whylen);
        if (r < 0 && first == 0)
            first = r;
        if (r == 0)
            token_drop(p, t);
    }
    file_name(anchor, name, sizeof(name), false);
    if (unlinkat(p->dir_fd, name, 0) < 0 && errno != ENOENT && first == 0) {
        first = -errno;
        set_why(why, whylen, "remove %s/%s: %s", p->dir, name, strerror(-first));
    }
    return first;
}

/* ---- reap --------------------------------------------------------------------------------- */

static bool kept(const struct pfctl_anchor *keep, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(keep[i].name, name) == 0)
            return true;
    return false;
}

/* Remove rules files (and temporaries) of anchors not kept. */
static int reap_files(struct pf *p, const struct pfctl_anchor *keep, size_t n_keep,
                      struct pf_reap_report *rep) {
    int fd = openat(p->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return -e;
    }
    static const char base[] = "lianyaohu-";
    int first = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        bool tmp = n[0] == '.';
        const char *b = tmp ? n + 1 : n;
        size_t len = strlen(b);
        if (strncmp(b, base, sizeof(base) - 1) != 0)
            continue;
        const char *suffix = tmp ? ".pf.tmp" : ".pf";
        size_t slen = strlen(suffix);
        if (len <= slen || strcmp(b + len - slen, suffix) != 0)
            continue;
        char anchor[PFR_NAME_MAX + 16];
        snprintf(anchor, sizeof(anchor), PFR_ANCHOR_PARENT "/%.*s", (int)(len - slen), b);
        if (!tmp && kept(keep, n_keep, anchor))
            continue;
        if (unlinkat(p->dir_fd, n, 0) < 0) {
            if (first == 0)
                first = -errno;
        } else {
            rep->files_removed++;
        }
    }
    closedir(d);
    return first;
}

int pf_reap(struct pf *p, const struct pfctl_anchor *keep, size_t n_keep,
            struct pf_reap_report *ret, char *why, size_t whylen) {
    struct pf_reap_report rep = {0};
    if (!p || (n_keep > 0 && !keep))
        return -EINVAL;

    _cleanup_free_ struct run *rn = malloc(sizeof(*rn));
    _cleanup_free_ struct pfctl_anchor *found = calloc(PF_ANCHORS_MAX, sizeof(*found));
    if (!rn || !found)
        return -ENOMEM;
    char *list[] = {NULL, "-a", PFR_ANCHOR_PARENT, "-s", "Anchors", NULL};
    int first = pfctl_ok(p, list, rn, "list PF anchors", why, whylen);
    size_t n = 0;
    if (first == 0) {
        int r = pfctl_parse_anchors(rn->out, rn->len, found, PF_ANCHORS_MAX, &n,
                                    &rep.skipped_unsafe);
        if (r == -ENOSPC) {
            /* Handle what fits; the next start gets the rest. */
            set_why(why, whylen, "more than %d lianyaohu anchors; reaped the first %d",
                    PF_ANCHORS_MAX, PF_ANCHORS_MAX);
            first = r;
            n = PF_ANCHORS_MAX;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (kept(keep, n_keep, found[i].name))
            continue;
        int r = flush_anchor(p, found[i].name, first < 0 ? NULL : why, first < 0 ? 0 : whylen);
        if (r < 0 && first == 0)
            first = r;
        if (r == 0) {
            rep.flushed++;
            if (!found[i].well_formed)
                rep.malformed++;
        }
    }
    /* Tokens held for anchors not kept (adopted from a dead lyhd's records). */
    for (size_t i = 0; i < p->n_tokens;) {
        char anchor[PFR_NAME_MAX];
        struct pf_token *t = &p->tokens[i];
        if (pfr_anchor_name(t->scope, t->uid, anchor) == 0 && kept(keep, n_keep, anchor)) {
            i++;
            continue;
        }
        int r = token_release(p, t->token, anchor, first < 0 ? NULL : why, first < 0 ? 0 : whylen);
        if (r < 0) {
            if (first == 0)
                first = r;
            i++;
            continue;
        }
        rep.tokens_released++;
        token_drop(p, t); /* moves the last entry to i: do not advance */
    }
    int r = reap_files(p, keep, n_keep, &rep);
    if (r < 0 && first == 0) {
        first = r;
        set_why(why, whylen, "remove stale rules files in %s: %s", p->dir, strerror(-r));
    }
    if (ret)
        *ret = rep;
    return first;
}
