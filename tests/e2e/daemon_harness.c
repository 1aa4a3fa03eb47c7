/* Runs lyhd for the e2e tests and judges how it stopped. Owns the temp dirs
 * it makes, the lyhd processes it forks (ended only by their pid) and the
 * throwaway user it creates. Must never kill anything it did not start or
 * leave a user behind: the user is removed by the test's teardown and, should
 * the test die first, by an atexit handler. */
#include "tests/e2e/daemon_harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lianyaohu.pb.h"
#include "tests/e2e/daemon_wire.h"

static const char *lyhd_path;

void daemon_set_binary(const char *path) { lyhd_path = path; }
const char *daemon_binary(void) { return lyhd_path; }

int daemon_prepare(struct lyhd_proc *p) {
    char tmpl[] = "/tmp/lyhd-e2e-XXXXXX";

    memset(p, 0, sizeof(*p));
    if (!mkdtemp(tmpl))
        return -errno;
    /* Traversable for the per-uid test's unprivileged user; still root-owned
     * and not writable by others, as store_open wants for the parents. */
    if (chmod(tmpl, 0755) < 0) {
        int r = -errno;
        rmdir(tmpl);
        return r;
    }
    snprintf(p->dir, sizeof(p->dir), "%s", tmpl);
    snprintf(p->sock, sizeof(p->sock), "%s/lyhd.sock", tmpl);
    snprintf(p->state, sizeof(p->state), "%s/state", tmpl);
    snprintf(p->log, sizeof(p->log), "%s/lyhd.log", tmpl);
    return 0;
}

pid_t daemon_spawn(const char *const *args, const char *logpath, unsigned nofile) {
    const char *argv[32];
    size_t n = 0;
    pid_t pid;

    /* --tmp-dir: the log's directory (the test's own), unless given: lyhd
     * would otherwise make /tmp/lyhd on the host */
    char tmpdir[PATH_MAX];
    bool has_tmp = false;
    snprintf(tmpdir, sizeof(tmpdir), "%s", logpath);
    char *slash = strrchr(tmpdir, '/');
    if (slash && slash != tmpdir)
        *slash = '\0';
    argv[n++] = lyhd_path;
    for (size_t i = 0; args && args[i] && n < sizeof(argv) / sizeof(argv[0]) - 3; i++) {
        has_tmp = has_tmp || strcmp(args[i], "--tmp-dir") == 0;
        argv[n++] = args[i];
    }
    if (!has_tmp && slash && slash != tmpdir) {
        argv[n++] = "--tmp-dir";
        argv[n++] = tmpdir;
    }
    argv[n] = NULL;

    pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        int log = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (devnull < 0 || log < 0)
            _exit(126);
        if (dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 || dup2(log, 2) < 0)
            _exit(126);
        if (nofile) {
            struct rlimit rl = {.rlim_cur = nofile, .rlim_max = nofile};
            if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                _exit(126);
        }
        /* A throwaway network namespace: lyhd installs its nftables table
         * and reads routes at startup, and tests must not touch the host's.
         * Pathname Unix sockets work across network namespaces. */
        if (unshare(CLONE_NEWNET) < 0) {
            dprintf(2, "test harness: unshare(CLONE_NEWNET): %s\n", strerror(errno));
            _exit(125);
        }
        /* The test ignores SIGPIPE; lyhd must start from defaults. */
        signal(SIGPIPE, SIG_DFL);
        execv(lyhd_path, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

int daemon_wait_exit(pid_t pid, int timeout_ms, int *ret_status) {
    uint64_t deadline = dw_mono_ms() + (uint64_t)timeout_ms;

    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            *ret_status = st;
            return 0;
        }
        if (r < 0 && errno != EINTR)
            return -errno;
        if (dw_mono_ms() >= deadline)
            return -ETIMEDOUT;
        dw_sleep_ms(10);
    }
}

int daemon_start(struct lyhd_proc *p, const char *const *extra) {
    const char *args[32];
    size_t n = 0;
    lianyaohu_v1_Response *resp = NULL;
    int r = -ETIMEDOUT;

    args[n++] = "--socket";
    args[n++] = p->sock;
    args[n++] = "--state-dir";
    args[n++] = p->state;
    for (size_t i = 0; extra && extra[i] && n < sizeof(args) / sizeof(args[0]) - 1; i++)
        args[n++] = extra[i];
    args[n] = NULL;

    pid_t pid = daemon_spawn(args, p->log, p->nofile);
    if (pid < 0)
        return pid;
    p->pid = pid;

    resp = calloc(1, sizeof(*resp));
    if (!resp)
        return -ENOMEM;
    for (int i = 0; i < DAEMON_START_TRIES; i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            p->pid = 0;
            fprintf(stderr, "lyhd exited during startup (status 0x%x); its stderr:\n", st);
            daemon_log_dump(p->log);
            r = -ECHILD;
            break;
        }
        if (dw_call_once(p->sock, 1, 10, resp) == 0 && resp->code == lianyaohu_v1_Code_OK &&
            resp->call_id == 1) {
            r = 0;
            break;
        }
        dw_sleep_ms(50);
    }
    free(resp);
    if (r == -ETIMEDOUT) {
        fprintf(stderr, "lyhd did not answer on %s in time; its stderr:\n", p->sock);
        daemon_log_dump(p->log);
    }
    return r;
}

int daemon_stop(struct lyhd_proc *p) {
    struct stat st;
    int status = 0;
    int r, ret = 0;

    if (p->pid <= 0)
        return 0;
    if (kill(p->pid, SIGTERM) < 0) {
        fprintf(stderr, "kill(%d, SIGTERM): %s\n", p->pid, strerror(errno));
        ret = -errno;
    }
    r = daemon_wait_exit(p->pid, DAEMON_EXIT_TIMEOUT_MS, &status);
    if (r == -ETIMEDOUT) {
        fprintf(stderr, "lyhd (pid %d) ignored SIGTERM for %d ms; killing it\n", p->pid,
                DAEMON_EXIT_TIMEOUT_MS);
        kill(p->pid, SIGKILL);
        (void)daemon_wait_exit(p->pid, DAEMON_EXIT_TIMEOUT_MS, &status);
        ret = -ETIMEDOUT;
    } else if (r < 0) {
        ret = r;
    }
    p->pid = 0;
    if (ret == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        fprintf(stderr, "lyhd did not exit 0 on SIGTERM (wait status 0x%x)\n", status);
        ret = -EPROTO;
    }
    if (lstat(p->sock, &st) == 0) {
        fprintf(stderr, "lyhd left its socket %s behind\n", p->sock);
        ret = -EEXIST;
    }
    if (daemon_log_has_sanitizer_report(p->log)) {
        fprintf(stderr, "lyhd's stderr has a sanitizer report\n");
        ret = -EPROTO;
    }
    if (ret < 0)
        daemon_log_dump(p->log);
    return ret;
}

static void rm_rf_at(int dfd, const char *name) {
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        DIR *d = fdopendir(fd);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d)))
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                    rm_rf_at(dirfd(d), e->d_name);
            closedir(d);
        } else {
            close(fd);
        }
        (void)unlinkat(dfd, name, AT_REMOVEDIR);
    } else {
        (void)unlinkat(dfd, name, 0);
    }
}

void daemon_cleanup(struct lyhd_proc *p) {
    if (p->pid > 0) {
        int st;
        kill(p->pid, SIGKILL);
        (void)daemon_wait_exit(p->pid, DAEMON_EXIT_TIMEOUT_MS, &st);
        p->pid = 0;
    }
    if (p->dir[0]) {
        rm_rf_at(AT_FDCWD, p->dir);
        p->dir[0] = '\0';
    }
}

/* Whole file as a string (capped), or NULL. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "re");
    char *buf;
    size_t n;

    if (!f)
        return NULL;
    buf = malloc(1u << 20);
    if (!buf) {
        fclose(f);
        return NULL;
    }
    n = fread(buf, 1, (1u << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

bool daemon_log_contains(const char *path, const char *needle) {
    char *s = slurp(path);
    bool found = s && strstr(s, needle);

    free(s);
    return found;
}

bool daemon_log_has_sanitizer_report(const char *path) {
    return daemon_log_contains(path, "ERROR: AddressSanitizer") ||
           daemon_log_contains(path, "runtime error:") ||
           daemon_log_contains(path, "LeakSanitizer");
}

void daemon_log_dump(const char *path) {
    char *s = slurp(path);

    fprintf(stderr, "----- %s -----\n%s----- end -----\n", path, s ? s : "(unreadable)\n");
    free(s);
}

static int fds_of(pid_t pid) {
    char path[64];
    DIR *d;
    struct dirent *e;
    int n = 0;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    d = opendir(path);
    if (!d)
        return -errno;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* lyhd's and its protocol process's (its only long-lived child): that is
 * where a client's socket and the fds it sent live now. */
int daemon_fd_count(pid_t pid) {
    char path[64];
    int n = fds_of(pid);
    FILE *f;
    long child;

    if (n < 0)
        return n;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    f = fopen(path, "re");
    while (f && fscanf(f, "%ld", &child) == 1) {
        int k = fds_of((pid_t)child);
        if (k > 0)
            n += k;
    }
    if (f)
        fclose(f);
    return n;
}

int daemon_wait_fd_count(pid_t pid, int want, int timeout_ms) {
    uint64_t deadline = dw_mono_ms() + (uint64_t)timeout_ms;
    int n;

    for (;;) {
        n = daemon_fd_count(pid);
        if (n == want || dw_mono_ms() >= deadline)
            return n;
        dw_sleep_ms(10);
    }
}

int daemon_run(const char *const *argv) {
    int st = 0;
    pid_t pid = fork();

    if (pid < 0)
        return -errno;
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (devnull >= 0)
            dup2(devnull, 1);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (daemon_wait_exit(pid, 30000, &st) < 0) {
        kill(pid, SIGKILL);
        (void)daemon_wait_exit(pid, 5000, &st);
        return -ETIMEDOUT;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static char test_user[32];
static pid_t test_user_owner; /* only the process that created it removes it */

void daemon_user_remove(void) {
    if (!test_user[0] || getpid() != test_user_owner)
        return;
    const char *del[] = {"/usr/sbin/userdel", test_user, NULL};
    (void)daemon_run(del);
    /* USERGROUPS_ENAB removes the user's group with it; make sure. */
    if (getgrnam(test_user)) {
        const char *gdel[] = {"/usr/sbin/groupdel", test_user, NULL};
        (void)daemon_run(gdel);
    }
    test_user[0] = '\0';
}

int daemon_user_create(uid_t *ret_uid, gid_t *ret_gid) {
    static bool registered;
    struct passwd *pw;
    int r;

    if (!test_user[0]) {
        snprintf(test_user, sizeof(test_user), "lyhtest-%d", (int)getpid());
        test_user_owner = getpid();
        if (!registered) {
            atexit(daemon_user_remove);
            registered = true;
        }
        const char *add[] = {"/usr/sbin/useradd", "--system", "--no-create-home", "--shell",
                             "/usr/sbin/nologin", test_user, NULL};
        r = daemon_run(add);
        if (r != 0) {
            fprintf(stderr, "useradd %s failed (%d)\n", test_user, r);
            test_user[0] = '\0';
            return r < 0 ? r : -EIO;
        }
    }
    pw = getpwnam(test_user);
    if (!pw)
        return -ENOENT;
    *ret_uid = pw->pw_uid;
    *ret_gid = pw->pw_gid;
    return 0;
}
