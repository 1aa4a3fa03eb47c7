/* libFuzzer: bytes as a datagram between lyhd's two processes (daemon/pmsg.c).
 * The header is checked, then every decoder gets the payload (the parent
 * runs the protocol process's ones (READY, DNS_ANSWER, DNS_RECORD, FLOWS,
 * FLOWS_SYNCED, and the client connections' CONN_OPEN, CONN_GONE, REQUEST,
 * REFUSE, DRAINED, FDS, MIDFRAME, FDS_CLOSED) on what a compromised process
 * may send; the others run in the protocol process). Whatever a decoder accepts must
 * encode again to exactly the same bytes (the layout is canonical: one
 * encoding per value), else abort(). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/pmsg.h"

static uint8_t out[PMSG_MAX_BYTES];

/* The payload of a fresh encoding must equal p. */
static void same(int r, const uint8_t *p, size_t len, size_t n) {
    if (r != 0 || n != len + PMSG_HDR_BYTES || memcmp(out + PMSG_HDR_BYTES, p, len) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint16_t type;
    const uint8_t *p = data;
    size_t len = size, n;

    if (size > PMSG_MAX_BYTES)
        return 0;
    /* a whole datagram, or (when the header is not valid) the bytes as a payload */
    if (pmsg_header(data, size, &type, &p, &len) != 0) {
        p = data;
        len = size;
    }
    static struct pmsg_ready ready;
    static struct pmsg_dns_answer answer;
    static struct pmsg_dns_record record;
    static struct pmsg_dns_start start;
    static struct pmsg_dns_stop stop;
    static struct pmsg_dns_policy policy;
    static struct pmsg_dns_answered answered;

    if (pmsg_decode_ready(p, len, &ready) == 0)
        same(pmsg_encode_ready(&ready, out, sizeof(out), &n), p, len, n);
    if (pmsg_decode_dns_answer(p, len, &answer) == 0) {
        if (strlen(answer.name) >= DNS_NAME_MAX || answer.n_addrs > DNS_ANSWER_ADDRS)
            abort();
        same(pmsg_encode_dns_answer(&answer, out, sizeof(out), &n), p, len, n);
    }
    if (pmsg_decode_dns_record(p, len, &record) == 0)
        same(pmsg_encode_dns_record(&record, out, sizeof(out), &n), p, len, n);
    if (pmsg_decode_dns_start(p, len, &start) == 0) {
        if (start.domains_len > PMSG_DOMAIN_BYTES || start.n_resolvers > PMSG_RESOLVERS)
            abort();
        same(pmsg_encode_dns_start(&start, out, sizeof(out), &n), p, len, n);
    }
    if (pmsg_decode_dns_stop(p, len, &stop) == 0)
        same(pmsg_encode_dns_stop(&stop, out, sizeof(out), &n), p, len, n);
    if (pmsg_decode_dns_policy(p, len, &policy) == 0)
        same(pmsg_encode_dns_policy(&policy, out, sizeof(out), &n), p, len, n);
    if (pmsg_decode_dns_answered(p, len, &answered) == 0)
        same(pmsg_encode_dns_answered(&answered, out, sizeof(out), &n), p, len, n);
    static struct pmsg_flows flows;
    if (pmsg_decode_flows(p, len, &flows) == 0) {
        if (flows.n > PMSG_FLOWS_MAX)
            abort();
        same(pmsg_encode_flows(&flows, out, sizeof(out), &n), p, len, n);
    }
    struct pmsg_caps caps;
    if (pmsg_decode_caps(p, len, &caps) == 0)
        same(pmsg_encode_caps(&caps, out, sizeof(out), &n), p, len, n);
    static const uint16_t sync_types[] = {PMSG_FLOWS_SYNC, PMSG_FLOWS_SYNCED, PMSG_NFLOG_START};
    for (size_t i = 0; i < sizeof(sync_types) / sizeof(sync_types[0]); i++) {
        struct pmsg_sync y;
        if (pmsg_decode_sync(sync_types[i], p, len, &y) == 0)
            same(pmsg_encode_sync(sync_types[i], &y, out, sizeof(out), &n), p, len, n);
    }
    static const uint16_t conn_types[] = {PMSG_CONN_OPEN, PMSG_CONN_GONE,   PMSG_REQUEST,
                                          PMSG_REFUSE,    PMSG_DRAINED,     PMSG_FDS,
                                          PMSG_MIDFRAME,  PMSG_FDS_CLOSED,
                                          PMSG_LISTEN_START, PMSG_CONN_ADOPT, PMSG_OUT,
                                          PMSG_CONN_CLOSE, PMSG_CONN_PAUSE};
    for (size_t i = 0; i < sizeof(conn_types) / sizeof(conn_types[0]); i++) {
        struct pmsg_conn c;
        if (pmsg_decode_conn(conn_types[i], p, len, &c) == 0) {
            if (c.id == 0 || c.data_len > PMSG_CHUNK || (c.data_len && (c.data < p || c.data + c.data_len > p + len)))
                abort();
            same(pmsg_encode_conn(conn_types[i], &c, out, sizeof(out), &n), p, len, n);
        }
    }
    return 0;
}
