/* lyh_bench_spawn: run commands interleaved and time each run.
 *
 *   lyh_bench_spawn ROUNDS LABEL CMD ARGS... [:: LABEL CMD ARGS...]...
 *
 * Each round runs every command once, in order, starting at a different one
 * each round (A B C, B C A, ...), so slow drift of a noisy machine spreads over
 * all sides. One line per run: "LABEL MICROSECONDS EXITSTATUS MAXRSS_KB FORK_AT"
 * (wall time from fork to reap; maxrss from wait4; FORK_AT the CLOCK_MONOTONIC
 * microsecond before the fork, the clock of lyh run --timing and lyhd
 * --timing). Children get /dev/null as stdin and stdout; stderr goes to
 * $SPAWN_ERR (appended) or /dev/null. Each child is killed by SIGALRM after
 * $SPAWN_TIMEOUT seconds (default 60), so every run is bounded.
 * $SPAWN_NOROTATE=1 keeps the order A B C every round (for commands that
 * depend on each other). */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CMDS 16

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s ROUNDS LABEL CMD ARGS... [:: LABEL CMD ARGS...]...\n", argv[0]);
        return 2;
    }
    long rounds = strtol(argv[1], NULL, 10);
    if (rounds < 1 || rounds > 100000)
        return 2;
    char *label[MAX_CMDS];
    char **cmd[MAX_CMDS];
    int n = 0;
    for (int i = 2; i < argc && n < MAX_CMDS;) {
        if (i + 1 >= argc)
            return 2;
        label[n] = argv[i];
        cmd[n] = &argv[i + 1];
        int j = i + 1;
        while (j < argc && strcmp(argv[j], "::") != 0)
            j++;
        if (j < argc)
            argv[j] = NULL;
        n++;
        i = j + 1;
    }
    const char *errpath = getenv("SPAWN_ERR");
    const char *tmo = getenv("SPAWN_TIMEOUT");
    unsigned timeout = tmo ? (unsigned)strtoul(tmo, NULL, 10) : 60;
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    int errfd = errpath ? open(errpath, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : devnull;
    if (devnull < 0 || errfd < 0)
        return 1;
    bool rotate = !getenv("SPAWN_NOROTATE");
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (long r = 0; r < rounds; r++) {
        for (int k = 0; k < n; k++) {
            int c = rotate ? (int)((r + k) % n) : k;
            long long t0 = now_ns();
            pid_t pid = fork();
            if (pid < 0)
                return 1;
            if (pid == 0) {
                dup2(devnull, 0);
                dup2(devnull, 1);
                dup2(errfd, 2);
                alarm(timeout);
                execvp(cmd[c][0], cmd[c]);
                _exit(127);
            }
            int st;
            struct rusage ru;
            while (wait4(pid, &st, 0, &ru) < 0)
                if (errno != EINTR)
                    return 1;
            long long t1 = now_ns();
            int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            printf("%s %lld %d %ld %lld\n", label[c], (t1 - t0) / 1000, rc, ru.ru_maxrss, t0 / 1000);
        }
    }
    return 0;
}
