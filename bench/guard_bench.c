/* lyh_bench_guard: install + remove one session's chain through the libnftnl
 * path lyhd uses (platform/linux/nft.c, one netlink socket kept open), N times.
 *
 *   lyh_bench_guard N IFACE        (run it only inside a throwaway namespace)
 *
 * Creates the base table if missing, then prints one line per pair:
 * "MICROSECONDS" (render + nft_session_add + nft_session_del_known, as lyhd
 * deletes what it installed). The table is
 * left for the namespace's deletion to remove. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "platform/linux/nft.h"
#include "platform/linux/nft_render.h"

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    long n = strtol(argv[1], NULL, 10);
    if (n < 1 || n > 1000000)
        return 2;
    struct nftr_log_params log = { .group = NFTR_DEFAULT_NFLOG_GROUP, .rate = NFTR_DEFAULT_LOG_RATE,
                                   .burst = NFTR_DEFAULT_LOG_BURST };
    struct nftr_base_params bp = { .guard_gid = NFTR_DEFAULT_GUARD_GID, .cgroupv2 = true,
                                   .cgroup_level = NFTR_DEFAULT_CGROUP_LEVEL, .log = log };
    struct nft *nf = NULL;
    unsigned flags = 0;
    int r = nft_open(&nf);
    if (r < 0 || (r = nft_ensure_base(nf, &bp, &flags)) < 0) {
        fprintf(stderr, "nft open/base: %s\n", strerror(-r));
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (long i = 0; i < n; i++) {
        char id[17];
        snprintf(id, sizeof(id), "%016lx", 0xbe00000000000000UL + (unsigned long)i);
        uint64_t cg = 900000 + (uint64_t)i;
        long long t0 = now_ns();
        struct nftr_input in = { .scope = NFTR_SCOPE_SESSION, .session_id = id, .cgroup_id = cg,
                                 .iface = argv[2], .log = log };
        struct nftr_chain *c = NULL;
        struct nft_session_objs kept;
        if ((r = nftr_render_chain(&in, &c)) < 0 || (r = nft_session_add(nf, c)) < 0) {
            fprintf(stderr, "add: %s\n", strerror(-r));
            nftr_chain_free(c);
            return 1;
        }
        /* what lyhd keeps and deletes by (guard_session_add, guard_session_del) */
        nft_session_objs_of(c, &kept);
        nftr_chain_free(c);
        if ((r = nft_session_del_known(nf, &kept, NULL)) < 0) {
            fprintf(stderr, "del: %s\n", strerror(-r));
            return 1;
        }
        printf("%lld\n", (now_ns() - t0) / 1000);
    }
    nft_close(nf);
    return 0;
}
