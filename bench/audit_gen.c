/* lyh_bench_auditgen: fill an audit.db with N synthetic flow records for
 * bench/run's query timing (lyhd stopped; the parent dir is the state dir).
 *
 *   lyh_bench_auditgen PATH N SESSIONS UID [BATCH]
 *
 * Records are spread round-robin over SESSIONS session ids "be000000<8 hex>"
 * (so each session's records are spread through the whole file, the hard case
 * for "the newest 100 of a session"), one per microsecond ending now, to
 * 10.x.y.z destinations and ports 1024.., verdicts mostly allowed. Batches of
 * 100000 per transaction (audit_db_append: one transaction per call), or
 * BATCH (lyhd writes 512 at a time). Prints the records written and the
 * append rate (records/s, the appends alone). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "storage/audit_db.h"
#include "storage/sqlite_util.h"

#define BATCH 100000

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6)
        return 2;
    sqlu_process_init();
    size_t batch = argc == 6 ? strtoul(argv[5], NULL, 10) : BATCH;
    if (batch == 0 || batch > BATCH)
        return 2;
    unsigned long long n = strtoull(argv[2], NULL, 10);
    unsigned long sessions = strtoul(argv[3], NULL, 10);
    unsigned long uid = strtoul(argv[4], NULL, 10);
    if (n == 0 || n > 100000000ULL || sessions == 0 || sessions > 1000000)
        return 2;
    struct audit_db *db = NULL;
    bool clean;
    char why[256] = "";
    int r = audit_db_open(argv[1], &db, &clean, why, sizeof(why));
    if (r < 0) {
        fprintf(stderr, "audit_db_open: %d %s\n", r, why);
        return 1;
    }
    struct audit_rec *v = calloc(BATCH, sizeof(*v));
    if (!v)
        return 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long t_end = (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
    long long t = t_end - (long long)n;
    unsigned long long done = 0;
    long long append_ns = 0;
    uint32_t x = 2463534242u;
    while (done < n) {
        size_t k = 0;
        for (; k < batch && done < n; k++, done++) {
            struct audit_rec *a = &v[k];
            memset(a, 0, sizeof(*a));
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            a->time_us = t++;
            a->kind = AUDIT_KIND_FLOW;
            a->verdict = (x & 15) == 0 ? AUDIT_VERDICT_DENIED : AUDIT_VERDICT_ALLOWED;
            a->family = AF_INET;
            a->protocol = (x & 1) ? 6 : 17;
            a->addr_len = 4;
            a->src[0] = 10, a->src[1] = 77, a->src[3] = 1;
            a->dst[0] = 10, a->dst[1] = (uint8_t)(x >> 8), a->dst[2] = (uint8_t)(x >> 16), a->dst[3] = (uint8_t)(x >> 24);
            a->sport = (uint16_t)(32768 + (x & 16383));
            a->dport = (uint16_t)(1024 + ((x >> 4) & 4095));
            a->has_uid = true;
            a->uid = (uint32_t)uid;
            snprintf(a->session, sizeof(a->session), "be000000%08lx", (unsigned long)(done % sessions));
            snprintf(a->iface, sizeof(a->iface), "tun0");
        }
        struct timespec a0, a1;
        clock_gettime(CLOCK_MONOTONIC, &a0);
        r = audit_db_append(db, v, k);
        clock_gettime(CLOCK_MONOTONIC, &a1);
        append_ns += (a1.tv_sec - a0.tv_sec) * 1000000000LL + (a1.tv_nsec - a0.tv_nsec);
        if (r < 0) {
            fprintf(stderr, "append: %d %s\n", r, audit_db_errmsg(db));
            return 1;
        }
    }
    audit_db_close(db);
    free(v);
    printf("wrote %llu\nrate %.0f\n", n, append_ns > 0 ? (double)n * 1e9 / (double)append_ns : 0.0);
    return 0;
}
