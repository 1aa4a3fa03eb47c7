/* libFuzzer: bytes as an agent's query (dns_parse_query) and as a resolver's
 * answer (dns_parse_answer, for the id in the first two bytes, and for
 * "example.com" or the name the bytes' own question holds). Whatever parses
 * goes through the builders, and what they build must parse again with the
 * same meaning: abort() if not. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dns_msg.h"
#include "common/dns_name.h"

static uint8_t out[DNS_MSG_MAX + 64];

static void check_query(const uint8_t *data, size_t size) {
    struct dns_query q, up;
    struct dns_answer a;
    uint8_t qbuf[512];
    size_t n;

    int r = dns_parse_query(data, size, &q);
    if (r != 0 && r != -EPROTONOSUPPORT)
        return;
    if (strlen(q.name) >= DNS_NAME_MAX || q.question_len < 5 || q.question_len > size - 12 ||
        q.udp_size < DNS_UDP_MAX || q.udp_size > DNS_EDNS_MAX)
        abort();
    char tbuf[12];
    const char *tn = dns_type_name(q.qtype, tbuf, sizeof(tbuf));
    if (strlen(tn) >= sizeof(tbuf))
        abort();
    uint8_t rcode = r == 0 ? DNS_RCODE_NXDOMAIN : DNS_RCODE_NOTIMP;
    if (dns_build_reply_empty(&q, data, size, rcode, out, sizeof(out), &n) != 0)
        abort();
    if (r != 0)
        return;
    if (dns_parse_answer(out, n, q.id, q.qtype, q.name, &a) != 0 || a.rcode != rcode ||
        a.n_addrs != 0 || a.ancount != 0)
        abort();
    /* The forwarder's own query for the same question. */
    if (dns_build_query((uint16_t)(q.id ^ 0x5555), q.name, q.qtype, qbuf, sizeof(qbuf), &n) != 0)
        abort();
    if (dns_parse_query(qbuf, n, &up) != 0 || strcmp(up.name, q.name) != 0 || up.qtype != q.qtype ||
        !up.edns)
        abort();
}

static void check_answer(const uint8_t *data, size_t size, uint16_t qtype, const char *name) {
    struct dns_answer a, b;
    struct dns_query q;
    uint8_t qbuf[512];
    size_t qn, n;

    uint16_t id = size >= 2 ? (uint16_t)(data[0] << 8 | data[1]) : 0;
    if (dns_parse_answer(data, size, id, qtype, name, &a) != 0)
        return;
    if (strcmp(a.name, name) != 0 || a.n_addrs > DNS_ANSWER_ADDRS ||
        a.question_end > a.authority_end || a.authority_end > size)
        abort();

    /* The agent's query for that question, with or without EDNS. */
    if (dns_build_query(0xa9e7, a.name, qtype, qbuf, sizeof(qbuf), &qn) != 0)
        abort();
    bool edns = size & 1;
    if (!edns) {
        qn -= 11;
        qbuf[11] = 0;
    }
    if (dns_parse_query(qbuf, qn, &q) != 0)
        abort();
    size_t limit = (size & 2) ? q.udp_size : DNS_MSG_MAX;
    if (dns_build_reply_from(&q, qbuf, qn, &a, data, size, limit, out, sizeof(out), &n) != 0)
        abort();
    if (n > limit || dns_parse_answer(out, n, q.id, qtype, q.name, &b) != 0)
        abort();
    size_t full = 12 + q.question_len + (a.authority_end - a.question_end) + (edns ? 11 : 0);
    if (full <= limit && full <= DNS_MSG_MAX) {
        if (b.n_addrs != a.n_addrs || b.n_addrs_dropped != a.n_addrs_dropped ||
            b.min_ttl != a.min_ttl || b.tc != a.tc || b.rcode != a.rcode ||
            memcmp(b.addrs, a.addrs, a.n_addrs * sizeof(a.addrs[0])) != 0)
            abort();
    } else if (!b.tc || b.n_addrs != 0 || b.ancount != 0 || b.rcode != a.rcode) {
        abort();
    }
    /* With an allowlist the forwarder answers with what it kept, the CNAME
     * chain flattened under the name asked: the same addresses come back. */
    if ((qtype == DNS_TYPE_A || qtype == DNS_TYPE_AAAA) && a.rcode == DNS_RCODE_NOERROR) {
        uint32_t ttl = a.min_ttl & 0x7fffffffu;
        if (dns_build_reply_addrs(&q, qbuf, qn, a.addrs, a.n_addrs, ttl, limit, out, sizeof(out),
                                  &n) != 0)
            abort();
        if (n > limit || dns_parse_answer(out, n, q.id, qtype, q.name, &b) != 0)
            abort();
        if (!b.tc && (b.n_addrs != a.n_addrs ||
                      memcmp(b.addrs, a.addrs, a.n_addrs * sizeof(a.addrs[0])) != 0 ||
                      (a.n_addrs && b.min_ttl != ttl)))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static uint8_t qcopy[DNS_HEADER_BYTES + 260];
    struct dns_query q;

    if (size > DNS_MSG_MAX)
        return 0;
    check_query(data, size);
    check_answer(data, size, DNS_TYPE_A, "example.com");

    /* The bytes' own question, as a query on its own: the header made a
     * query's, then the labels up to the root and four bytes. */
    if (size <= DNS_HEADER_BYTES)
        return 0;
    size_t end = DNS_HEADER_BYTES;
    while (end < size && data[end] != 0 && data[end] < 64)
        end += 1 + data[end];
    end += 1 + 4;
    if (end > size || end - DNS_HEADER_BYTES > sizeof(qcopy) - DNS_HEADER_BYTES)
        return 0;
    memcpy(qcopy, data, end);
    qcopy[2] &= 0x7f;
    memcpy(qcopy + 4, "\0\1\0\0\0\0\0\0", 8);
    if (dns_parse_query(qcopy, end, &q) != 0)
        return 0;
    check_answer(data, size, DNS_TYPE_A, q.name);
    if (q.qtype != DNS_TYPE_A)
        check_answer(data, size, q.qtype, q.name);
    /* The allowlist's matcher on a name the parser accepted: a pattern of
     * it matches it exactly, "*." + it matches nothing shorter. */
    char canon[DNS_PATTERN_MAX], star[DNS_PATTERN_MAX + 2];
    if (q.name[0] && dn_pattern_check(q.name, canon, NULL, 0) == 0) {
        if (strcmp(canon, q.name) != 0 || !dn_match(canon, q.name))
            abort();
        snprintf(star, sizeof(star), "*.%s", q.name);
        if (dn_pattern_check(star, canon, NULL, 0) == 0 && dn_match(canon, q.name))
            abort();
    }
    return 0;
}
