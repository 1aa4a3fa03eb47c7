/* lyh_bench_guard: install + remove one session's rules through the libnftnl
 * path lyhd uses (platform/linux/nft.c, one netlink socket kept open), N times.
 *
 *   lyh_bench_guard [--data] N IFACE [OTHERS]   (only inside a throwaway namespace)
 *
 * Creates the base table if missing, then prints one line per pair:
 * "MICROSECONDS" (render + nft_session_add + nft_session_del_known, as lyhd
 * deletes what it installed). With OTHERS, that many other sessions are
 * installed first (not timed) and removed at the end: the kernel validates
 * every chain a verdict map reaches at each install, so a pair's time grows
 * with the sessions beside it (docs/performance.md, "Growth: the kernel's
 * validation of the whole table"). --data: the same with the session in the
 * data layout (docs/guard-as-data.md: render + nft_data_add + nft_data_del,
 * on a base with it), lyhd's path for a session of the default policy. The
 * table is left for the namespace's deletion to remove. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "platform/linux/nft.h"
#include "platform/linux/nft_render.h"

/* Session i of this run ("other" ones apart from the timed ones). */
static int session_in(long i, bool other, const char *iface, const struct nftr_log_params *log,
                      struct nftr_chain **ret) {
    static char id[17];
    snprintf(id, sizeof(id), "%016lx", (other ? 0xbd00000000000000UL : 0xbe00000000000000UL) +
                                           (unsigned long)i);
    struct nftr_input in = { .scope = NFTR_SCOPE_SESSION, .session_id = id,
                             .cgroup_id = (other ? 500000 : 900000) + (uint64_t)i,
                             .iface = iface, .log = *log };
    return nftr_render_chain(&in, ret);
}

/* The same session in the data layout: a forwarder and a loopback slot of its
 * own (slots are keys of their own in the layout's maps). */
static int data_in(long i, bool other, long others, const char *iface,
                   const struct nftr_log_params *log, struct nftr_data **ret) {
    static char id[17];
    snprintf(id, sizeof(id), "%016lx", (other ? 0xbd00000000000000UL : 0xbe00000000000000UL) +
                                           (unsigned long)i);
    struct nftr_input in = { .scope = NFTR_SCOPE_SESSION, .session_id = id,
                             .cgroup_id = (other ? 500000 : 900000) + (uint64_t)i,
                             .iface = iface, .log = *log, .cgroup_level = 3,
                             .base_cgroup_id = 1, .dns_port = 20000,
                             .lo_slot = (uint32_t)(other ? i + 1 : others + 1) };
    return nftr_render_data(&in, ret);
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* one session's install + removal, as lyhd would do it; kept: for the others */
static int pair(struct nft *nf, bool data, long i, bool other, long others, const char *iface,
                const struct nftr_log_params *log, bool remove, void *kept) {
    int r;
    if (data) {
        struct nftr_data *d = NULL;
        if ((r = data_in(i, other, others, iface, log, &d)) == 0 && (r = nft_data_add(nf, d)) == 0 &&
            remove)
            r = nft_data_del(nf, d, NULL);
        if (r == 0 && kept)
            *(struct nftr_data **)kept = d;
        else
            nftr_data_free(d);
        return r;
    }
    struct nftr_chain *c = NULL;
    struct nft_session_objs objs;
    if ((r = session_in(i, other, iface, log, &c)) < 0 || (r = nft_session_add(nf, c)) < 0) {
        nftr_chain_free(c);
        return r;
    }
    /* what lyhd keeps and deletes by (guard_session_add, guard_session_del) */
    nft_session_objs_of(c, &objs);
    nftr_chain_free(c);
    if (kept)
        *(struct nft_session_objs *)kept = objs;
    return remove ? nft_session_del_known(nf, &objs, NULL) : 0;
}

int main(int argc, char **argv) {
    bool data = argc > 1 && strcmp(argv[1], "--data") == 0;
    argc -= data;
    argv += data;
    if (argc != 3 && argc != 4)
        return 2;
    long n = strtol(argv[1], NULL, 10);
    long others = argc == 4 ? strtol(argv[3], NULL, 10) : 0;
    if (n < 1 || n > 1000000 || others < 0 || others > 100000)
        return 2;
    struct nftr_log_params log = { .group = NFTR_DEFAULT_NFLOG_GROUP, .rate = NFTR_DEFAULT_LOG_RATE,
                                   .burst = NFTR_DEFAULT_LOG_BURST };
    struct nftr_base_params bp = { .guard_gid = NFTR_DEFAULT_GUARD_GID, .cgroupv2 = true,
                                   .cgroup_level = NFTR_DEFAULT_CGROUP_LEVEL, .log = log };
    if (data) {
        bp.cgroup_level = 3;
        bp.inbound = bp.dns = bp.data = true;
        bp.base_cgroup_id = 1;
    }
    struct nft *nf = NULL;
    unsigned flags = 0;
    int r = nft_open(&nf);
    if (r < 0 || (r = nft_ensure_base(nf, &bp, &flags)) < 0) {
        fprintf(stderr, "nft open/base: %s\n", strerror(-r));
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct nft_session_objs *other = calloc((size_t)others + 1, sizeof(*other));
    struct nftr_data **dother = calloc((size_t)others + 1, sizeof(*dother));
    if (!other || !dother)
        return 1;
    for (long i = 0; i < others; i++)
        if ((r = pair(nf, data, i, true, others, argv[2], &log, false,
                      data ? (void *)&dother[i] : (void *)&other[i])) < 0) {
            fprintf(stderr, "add other session %ld: %s\n", i, strerror(-r));
            return 1;
        }
    for (long i = 0; i < n; i++) {
        long long t0 = now_ns();
        if ((r = pair(nf, data, i, false, others, argv[2], &log, true, NULL)) < 0) {
            fprintf(stderr, "add/del: %s\n", strerror(-r));
            return 1;
        }
        printf("%lld\n", (now_ns() - t0) / 1000);
    }
    for (long i = 0; i < others; i++) {
        r = data ? nft_data_del(nf, dother[i], NULL) : nft_session_del_known(nf, &other[i], NULL);
        nftr_data_free(dother[i]);
        if (r < 0) {
            fprintf(stderr, "del other session %ld: %s\n", i, strerror(-r));
            return 1;
        }
    }
    free(dother);
    free(other);
    nft_close(nf);
    return 0;
}
