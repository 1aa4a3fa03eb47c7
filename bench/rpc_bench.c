/* lyh_bench_rpc: RPC load generator for bench/run.
 *
 *   lyh_bench_rpc lyh SOCKET CLIENTS MS [DAEMON_PID]
 *       CLIENTS threads, each with its own connection (cli/lyh_client.h),
 *       call Capabilities back to back for MS milliseconds.
 *   lyh_bench_rpc floor CLIENTS MS REQ_BYTES RESP_BYTES
 *       the raw floor: a forked single-threaded poll() echo server on an
 *       AF_UNIX SOCK_STREAM socket (like lyhd's), CLIENTS threads writing
 *       REQ_BYTES and reading RESP_BYTES back per round trip.
 *   lyh_bench_rpc sizes SOCKET
 *       "req_bytes N resp_bytes M": one Capabilities call's frame sizes.
 *
 * Prints one line: "calls N secs S rps R p50_us A p99_us B cpu_ms C" (cpu_ms:
 * utime+stime the daemon and its protocol process, or the echo server, spent
 * during the run, from /proc/PID/stat). Exit 1 on any failed call. Bounded by MS (max 60000). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pb_encode.h>

#include "cli/lyh_client.h"
#include "common/lyh_limits.h"

#define MAX_CLIENTS 64
#define MAX_SAMPLES 2000000

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct worker {
    pthread_t th;
    const char *sock;
    int mode; /* 0 lyh, 1 floor */
    size_t req, resp;
    long long deadline;
    unsigned *lat; /* microseconds */
    size_t n, cap;
    int err;
};

static int full_io(int fd, void *buf, size_t len, bool wr) {
    size_t off = 0;
    while (off < len) {
        ssize_t k = wr ? write(fd, (char *)buf + off, len - off) : read(fd, (char *)buf + off, len - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        off += (size_t)k;
    }
    return 0;
}

static int unix_connect(const char *path) {
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return -1;
    return fd;
}

static void *run_worker(void *arg) {
    struct worker *w = arg;
    if (w->mode == 0) {
        struct lyh_client *c = NULL;
        lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
        lianyaohu_v1_Response *resp = calloc(1, sizeof(*resp));
        if (!req || !resp || lyh_client_connect(w->sock, &c) < 0) {
            w->err = 1;
            goto out;
        }
        while (now_ns() < w->deadline && w->n < w->cap) {
            memset(req, 0, sizeof(*req));
            req->which_method = lianyaohu_v1_Request_capabilities_tag;
            long long t0 = now_ns();
            if (lyh_client_call(c, req, resp, 5000) < 0 || resp->code != 0 ||
                resp->which_result != lianyaohu_v1_Response_capabilities_tag) {
                w->err = 1;
                break;
            }
            w->lat[w->n++] = (unsigned)((now_ns() - t0) / 1000);
        }
    out:
        lyh_client_close(c);
        free(req);
        free(resp);
        return NULL;
    }
    char buf[65536];
    memset(buf, 'q', sizeof(buf));
    int fd = unix_connect(w->sock);
    if (fd < 0) {
        w->err = 1;
        return NULL;
    }
    while (now_ns() < w->deadline && w->n < w->cap) {
        long long t0 = now_ns();
        if (full_io(fd, buf, w->req, true) < 0 || full_io(fd, buf, w->resp, false) < 0) {
            w->err = 1;
            break;
        }
        w->lat[w->n++] = (unsigned)((now_ns() - t0) / 1000);
    }
    close(fd);
    return NULL;
}

/* The floor's server: one thread, poll() over the listener and every client;
 * per client, once REQ bytes have arrived, write RESP bytes. */
static void echo_server(int lfd, size_t req, size_t resp) {
    struct pollfd p[MAX_CLIENTS + 1];
    size_t have[MAX_CLIENTS + 1];
    int n = 1;
    char buf[65536];
    memset(buf, 'r', sizeof(buf));
    p[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
    alarm(120);
    for (;;) {
        if (poll(p, (nfds_t)n, -1) < 0)
            continue;
        if ((p[0].revents & POLLIN) && n <= MAX_CLIENTS) {
            int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (c >= 0) {
                p[n] = (struct pollfd){ .fd = c, .events = POLLIN };
                have[n++] = 0;
            }
        }
        for (int i = 1; i < n; i++) {
            if (!p[i].revents)
                continue;
            ssize_t k = read(p[i].fd, buf, sizeof(buf));
            if (k <= 0 && !(k < 0 && errno == EAGAIN)) {
                close(p[i].fd);
                p[i] = p[n - 1];
                have[i] = have[n - 1];
                n--, i--;
                continue;
            }
            if (k > 0) {
                have[i] += (size_t)k;
                while (have[i] >= req) {
                    have[i] -= req;
                    if (write(p[i].fd, buf, resp) < 0)
                        break;
                }
            }
        }
    }
}

static int cmp_u(const void *a, const void *b) {
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

static long cpu_ticks(pid_t pid) {
    char path[64], buf[2048];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t k = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[k] = '\0';
    char *s = strrchr(buf, ')');
    if (!s)
        return -1;
    unsigned long ut = 0, st = 0;
    /* after ")": state(3) ... utime is field 14, stime 15 */
    if (sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (long)(ut + st);
}

/* The daemon's and its children's (lyhd's protocol process, which reads and
 * writes every client's bytes): both work for each call. */
static long daemon_ticks(pid_t pid) {
    char path[64];
    long t = cpu_ticks(pid), child;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    FILE *f = t >= 0 ? fopen(path, "r") : NULL;
    while (f && fscanf(f, "%ld", &child) == 1) {
        long c = cpu_ticks((pid_t)child);
        if (c > 0)
            t += c;
    }
    if (f)
        fclose(f);
    return t;
}

static int sizes(const char *sock) {
    struct lyh_client *c = NULL;
    lianyaohu_v1_Request *req = calloc(1, sizeof(*req));
    lianyaohu_v1_Response *resp = calloc(1, sizeof(*resp));
    uint8_t buf[4096];
    size_t reqlen = 0, resplen = 0;
    if (!req || !resp || lyh_client_connect(sock, &c) < 0)
        return 1;
    req->which_method = lianyaohu_v1_Request_capabilities_tag;
    req->protocol_version = LYH_PROTOCOL_VERSION;
    req->call_id = 1;
    if (lyh_client_encode_request(req, buf, sizeof(buf), &reqlen) < 0 || lyh_client_call(c, req, resp, 5000) < 0 ||
        !pb_get_encoded_size(&resplen, lianyaohu_v1_Response_fields, resp))
        return 1;
    printf("req_bytes %zu resp_bytes %zu client_response_struct_bytes %zu\n", reqlen,
           resplen + LYH_FRAME_HEADER_BYTES, sizeof(*resp));
    lyh_client_close(c);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "sizes") == 0)
        return sizes(argv[2]);
    bool floor_mode = argc == 6 && strcmp(argv[1], "floor") == 0;
    bool lyh_mode = (argc == 5 || argc == 6) && strcmp(argv[1], "lyh") == 0;
    if (!floor_mode && !lyh_mode) {
        fprintf(stderr, "usage: see the comment at the top of bench/rpc_bench.c\n");
        return 2;
    }
    int nc = atoi(floor_mode ? argv[2] : argv[3]);
    long ms = atol(floor_mode ? argv[3] : argv[4]);
    if (nc < 1 || nc > MAX_CLIENTS || ms < 1 || ms > 60000)
        return 2;
    size_t req = 0, resp = 0;
    pid_t pid = 0;
    char path[108] = "";
    const char *sock = NULL;
    if (floor_mode) {
        req = strtoul(argv[4], NULL, 10);
        resp = strtoul(argv[5], NULL, 10);
        if (req < 1 || req > 65536 || resp < 1 || resp > 65536)
            return 2;
        snprintf(path, sizeof(path), "/tmp/lyh-bench-floor.%d.sock", (int)getpid());
        unlink(path);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 128) < 0)
            return 1;
        pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0) {
            echo_server(lfd, req, resp);
            _exit(0);
        }
        close(lfd);
        sock = path;
    } else {
        sock = argv[2];
        if (argc == 6)
            pid = (pid_t)atoi(argv[5]);
    }
    struct worker w[MAX_CLIENTS];
    size_t cap = MAX_SAMPLES / (size_t)nc;
    long t_before = pid ? (floor_mode ? cpu_ticks(pid) : daemon_ticks(pid)) : -1;
    long long t0 = now_ns();
    for (int i = 0; i < nc; i++) {
        w[i] = (struct worker){ .sock = sock, .mode = floor_mode, .req = req, .resp = resp,
                                .deadline = t0 + ms * 1000000LL, .cap = cap };
        w[i].lat = malloc(cap * sizeof(unsigned));
        if (!w[i].lat || pthread_create(&w[i].th, NULL, run_worker, &w[i]) != 0)
            return 1;
    }
    size_t total = 0;
    int err = 0;
    for (int i = 0; i < nc; i++) {
        pthread_join(w[i].th, NULL);
        total += w[i].n;
        err |= w[i].err;
    }
    long long t1 = now_ns();
    long t_after = pid ? (floor_mode ? cpu_ticks(pid) : daemon_ticks(pid)) : -1;
    if (floor_mode) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        unlink(path);
    }
    unsigned *all = malloc((total ? total : 1) * sizeof(unsigned));
    if (!all)
        return 1;
    size_t k = 0;
    for (int i = 0; i < nc; i++) {
        memcpy(all + k, w[i].lat, w[i].n * sizeof(unsigned));
        k += w[i].n;
        free(w[i].lat);
    }
    qsort(all, total, sizeof(unsigned), cmp_u);
    double secs = (double)(t1 - t0) / 1e9;
    double cpu_ms = (t_before >= 0 && t_after >= 0) ? (double)(t_after - t_before) * 1000.0 / (double)sysconf(_SC_CLK_TCK) : -1;
    printf("calls %zu secs %.3f rps %.0f p50_us %u p99_us %u cpu_ms %.0f\n", total, secs,
           (double)total / secs, total ? all[total / 2] : 0, total ? all[(size_t)((double)total * 0.99)] : 0,
           cpu_ms);
    free(all);
    return err || total == 0;
}
