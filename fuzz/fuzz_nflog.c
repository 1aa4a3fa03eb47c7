/* libFuzzer: bytes as the kernel would hand them to the daemon's NFLOG
 * socket, through the nfnetlink_log decoder (every message of the buffer,
 * every field read), and the same bytes as a log prefix. The decoder must
 * never read past the buffer, whatever the lengths inside it say. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "audit/nflog.h"

/* Read every field, so that a value built from bytes outside the buffer
 * would be seen by the sanitizers. */
static void touch(const struct nflog_pkt *p, void *ud) {
    uint64_t *sum = ud;
    uint64_t s = (uint64_t)p->time_us + p->uid + p->gid + p->seq + p->oif + p->iif + p->family +
                 p->protocol + p->addr_len + p->sport + p->dport + p->ip_len + p->has_time +
                 p->has_uid + p->has_gid + p->has_seq + p->has_ports;
    for (size_t i = 0; i < p->addr_len && i < sizeof(p->src); i++)
        s += (uint64_t)p->src[i] * 3 + p->dst[i];
    size_t n = strlen(p->prefix);
    if (n >= sizeof(p->prefix))
        abort();
    struct nflog_origin o;
    if (nflog_prefix_parse(p->prefix, &o) == 0)
        s += o.kind + o.uid + o.verdict + strlen(o.session) + strlen(o.chain);
    *sum += s + n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char prefix[65537];
    uint64_t sum = 0, bad = 0;

    if (size > 65536)
        return 0;
    (void)nflog_decode_buf_count(data, size, touch, &sum, &bad);
    struct nflog_pkt p;
    if (nflog_decode(data, size, &p) == 0)
        touch(&p, &sum);

    memcpy(prefix, data, size);
    prefix[size] = '\0';
    struct nflog_origin o;
    if (nflog_prefix_parse(prefix, &o) == 0 && (o.kind < 1 || o.kind > 3))
        abort();
    return 0;
}
