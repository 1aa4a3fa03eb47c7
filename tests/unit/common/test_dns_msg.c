/* DNS messages: queries with and without EDNS, name normalisation and the
 * name rules (pointers, label types and lengths, characters), answers with
 * CNAME chains in either order, truncation at every length, mismatches, the
 * address cap, and the builders: exact bytes, and replies that parse back. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "common/dns_msg.h"

/* A message under construction. */
struct mb {
    uint8_t b[8192];
    size_t n;
};

static void u8(struct mb *m, uint8_t v) {
    assert_true(m->n < sizeof(m->b));
    m->b[m->n++] = v;
}

static void u16(struct mb *m, uint16_t v) {
    u8(m, (uint8_t)(v >> 8));
    u8(m, (uint8_t)v);
}

static void u32(struct mb *m, uint32_t v) {
    u16(m, (uint16_t)(v >> 16));
    u16(m, (uint16_t)v);
}

static void raw(struct mb *m, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        u8(m, ((const uint8_t *)p)[i]);
}

/* "a.b" as labels, without the root: a pointer or the root follows. */
static void labels(struct mb *m, const char *dotted) {
    const char *s = dotted;
    while (*s) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        u8(m, (uint8_t)l);
        raw(m, s, l);
        s += l + (dot ? 1 : 0);
    }
}

static void dname(struct mb *m, const char *dotted) {
    labels(m, dotted);
    u8(m, 0);
}

static void ptr(struct mb *m, uint16_t off) {
    u16(m, (uint16_t)(0xC000 | off));
}

static void hdr(struct mb *m, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an, uint16_t ns,
                uint16_t ar) {
    m->n = 0;
    u16(m, id);
    u16(m, flags);
    u16(m, qd);
    u16(m, an);
    u16(m, ns);
    u16(m, ar);
}

/* Type, class, TTL, rdlength, after an owner name. */
static void rrfix(struct mb *m, uint16_t type, uint16_t cls, uint32_t ttl, uint16_t rdlen) {
    u16(m, type);
    u16(m, cls);
    u32(m, ttl);
    u16(m, rdlen);
}

static void question(struct mb *m, const char *name, uint16_t qtype, uint16_t qclass) {
    dname(m, name);
    u16(m, qtype);
    u16(m, qclass);
}

static void opt(struct mb *m, uint16_t size) {
    u8(m, 0);
    rrfix(m, DNS_TYPE_OPT, size, 0, 0);
}

/* An SOA's rdata for a.test (ns.a.test, mail.a.test, compressed to offset 16). */
static void soa(struct mb *m, uint16_t owner) {
    ptr(m, owner);
    rrfix(m, 6, DNS_CLASS_IN, 900, 32);
    raw(m, "\x02ns\xc0\x10\x04mail\xc0\x10", 12);
    u32(m, 1);
    u32(m, 7200);
    u32(m, 900);
    u32(m, 86400);
    u32(m, 60);
}

static void a_rr_at(struct mb *m, uint16_t owner, uint32_t ttl, uint8_t a, uint8_t b, uint8_t c,
                    uint8_t d) {
    ptr(m, owner);
    rrfix(m, DNS_TYPE_A, DNS_CLASS_IN, ttl, 4);
    u8(m, a);
    u8(m, b);
    u8(m, c);
    u8(m, d);
}

#define QUERY_FLAGS  0x0100 /* RD */
#define ANSWER_FLAGS 0x8180 /* QR, RD, RA */

static void test_query_plain(void **state) {
    /* A query for example.com A, as dig +noedns writes it. */
    static const uint8_t q_bytes[] = {
        0xab, 0xcd, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        7,    'e',  'x',  'a',  'm',  'p',  'l',  'e',  3,    'c',  'o',  'm',
        0,    0x00, 0x01, 0x00, 0x01,
    };
    struct dns_query q;

    assert_int_equal(dns_parse_query(q_bytes, sizeof(q_bytes), &q), 0);
    assert_int_equal(q.id, 0xabcd);
    assert_true(q.rd);
    assert_false(q.edns);
    assert_int_equal(q.udp_size, 512);
    assert_int_equal(q.qtype, DNS_TYPE_A);
    assert_int_equal(q.qclass, DNS_CLASS_IN);
    assert_string_equal(q.name, "example.com");
    assert_int_equal(q.question_len, 13 + 4);

    /* A trailing byte is refused. */
    uint8_t longer[sizeof(q_bytes) + 1];
    memcpy(longer, q_bytes, sizeof(q_bytes));
    longer[sizeof(q_bytes)] = 0;
    assert_int_equal(dns_parse_query(longer, sizeof(longer), &q), -EBADMSG);
}

static void test_query_edns(void **state) {
    struct mb m;
    struct dns_query q;

    hdr(&m, 7, 0, 1, 0, 0, 1);
    question(&m, "example.com", DNS_TYPE_AAAA, DNS_CLASS_IN);
    opt(&m, 4096);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), 0);
    assert_true(q.edns);
    assert_false(q.rd);
    assert_int_equal(q.udp_size, DNS_EDNS_MAX);
    assert_int_equal(q.qtype, DNS_TYPE_AAAA);
    assert_int_equal(q.question_len, 17);

    /* Small sizes are raised to 512, sizes in between kept. */
    hdr(&m, 7, 0, 1, 0, 0, 1);
    question(&m, "example.com", DNS_TYPE_A, DNS_CLASS_IN);
    opt(&m, 100);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), 0);
    assert_int_equal(q.udp_size, 512);
    m.b[m.n - 8] = 0x03; /* class 0x0300 = 768 */
    m.b[m.n - 7] = 0x00;
    assert_int_equal(dns_parse_query(m.b, m.n, &q), 0);
    assert_int_equal(q.udp_size, 768);

    /* An OPT with an option (a client cookie) in its rdata. */
    hdr(&m, 7, 0, 1, 0, 0, 1);
    question(&m, "example.com", DNS_TYPE_A, DNS_CLASS_IN);
    u8(&m, 0);
    rrfix(&m, DNS_TYPE_OPT, 1232, 0, 12);
    u16(&m, 10); /* COOKIE */
    u16(&m, 8);
    raw(&m, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), 0);
    assert_true(q.edns);
    /* ... whose rdlength runs past the end. */
    m.b[m.n - 13] = 13;
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);

    /* An OPT with a name, another additional record, two of them. */
    hdr(&m, 7, 0, 1, 0, 0, 1);
    question(&m, "example.com", DNS_TYPE_A, DNS_CLASS_IN);
    dname(&m, "x");
    rrfix(&m, DNS_TYPE_OPT, 1232, 0, 0);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);
    hdr(&m, 7, 0, 1, 0, 0, 1);
    question(&m, "example.com", DNS_TYPE_A, DNS_CLASS_IN);
    u8(&m, 0);
    rrfix(&m, DNS_TYPE_A, DNS_CLASS_IN, 0, 4);
    u32(&m, 0x01020304);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);
    hdr(&m, 7, 0, 1, 0, 0, 2);
    question(&m, "example.com", DNS_TYPE_A, DNS_CLASS_IN);
    opt(&m, 1232);
    opt(&m, 1232);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);
    /* The count says one, the bytes stop. */
    hdr(&m, 7, 0, 1, 0, 0, 1);
    question(&m, "example.com", DNS_TYPE_A, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);
}

static void test_query_mixed_case(void **state) {
    struct mb m;
    struct dns_query q;

    hdr(&m, 1, QUERY_FLAGS, 1, 0, 0, 0);
    question(&m, "WwW.ExAmPlE.CoM", DNS_TYPE_A, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), 0);
    assert_string_equal(q.name, "www.example.com");

    /* Underscores, hyphens and digits are host-name bytes. */
    hdr(&m, 1, QUERY_FLAGS, 1, 0, 0, 0);
    question(&m, "_sip._tcp.x-1.test", 33, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), 0);
    assert_string_equal(q.name, "_sip._tcp.x-1.test");

    /* The root. */
    hdr(&m, 1, QUERY_FLAGS, 1, 0, 0, 0);
    question(&m, "", 2, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), 0);
    assert_string_equal(q.name, "");
    assert_int_equal(q.question_len, 5);
}

static void test_query_refusals(void **state) {
    struct mb m;
    struct dns_query q;

    memset(&q, 0x5a, sizeof(q));
    hdr(&m, 1, QUERY_FLAGS, 1, 0, 0, 0);
    question(&m, "example.com", DNS_TYPE_A, DNS_CLASS_IN);
    for (size_t len = 0; len < DNS_HEADER_BYTES; len++)
        assert_int_equal(dns_parse_query(m.b, len, &q), -EINVAL);
    for (size_t len = DNS_HEADER_BYTES; len < m.n; len++)
        assert_int_equal(dns_parse_query(m.b, len, &q), -EBADMSG);
    assert_int_equal(q.id, 0x5a5a); /* untouched on failure */

    /* QR set: an answer is not a query. */
    hdr(&m, 1, 0x8100, 1, 0, 0, 0);
    question(&m, "example.com", DNS_TYPE_A, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EINVAL);

    /* Counts: no question, two, an answer record, an authority record. */
    hdr(&m, 1, QUERY_FLAGS, 0, 0, 0, 0);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);
    hdr(&m, 1, QUERY_FLAGS, 2, 0, 0, 0);
    question(&m, "a.test", DNS_TYPE_A, DNS_CLASS_IN);
    question(&m, "b.test", DNS_TYPE_A, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);
    hdr(&m, 1, QUERY_FLAGS, 1, 1, 0, 0);
    question(&m, "a.test", DNS_TYPE_A, DNS_CLASS_IN);
    a_rr_at(&m, 12, 1, 1, 2, 3, 4);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);
    hdr(&m, 1, QUERY_FLAGS, 1, 0, 1, 0);
    question(&m, "a.test", DNS_TYPE_A, DNS_CLASS_IN);
    a_rr_at(&m, 12, 1, 1, 2, 3, 4);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);

    /* Class CHAOS, opcode STATUS: well formed, not served, and q is filled
     * for the NOTIMP reply. */
    memset(&q, 0, sizeof(q));
    hdr(&m, 9, QUERY_FLAGS, 1, 0, 0, 0);
    question(&m, "version.bind", 16, 3);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EPROTONOSUPPORT);
    assert_int_equal(q.id, 9);
    assert_int_equal(q.qclass, 3);
    assert_string_equal(q.name, "version.bind");
    hdr(&m, 9, QUERY_FLAGS | (2 << 11), 1, 0, 0, 0);
    question(&m, "a.test", DNS_TYPE_A, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EPROTONOSUPPORT);
}

static void test_query_pointer_refused(void **state) {
    struct mb m;
    struct dns_query q;

    /* "www" then a pointer back to the header: nothing valid to point to. */
    hdr(&m, 1, QUERY_FLAGS, 1, 0, 0, 0);
    labels(&m, "www");
    ptr(&m, 4);
    u16(&m, DNS_TYPE_A);
    u16(&m, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);

    /* A pointer in the OPT's name, to the question's root byte. */
    hdr(&m, 1, QUERY_FLAGS, 1, 0, 0, 1);
    question(&m, "a.test", DNS_TYPE_A, DNS_CLASS_IN);
    ptr(&m, 12 + 7);
    rrfix(&m, DNS_TYPE_OPT, 1232, 0, 0);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);
}

static void test_label_types_and_lengths(void **state) {
    struct mb m;
    struct dns_query q;
    char l63[64], l64[65], name[300];

    memset(l63, 'a', 63);
    l63[63] = '\0';
    memset(l64, 'b', 64);
    l64[64] = '\0';

    hdr(&m, 1, QUERY_FLAGS, 1, 0, 0, 0);
    snprintf(name, sizeof(name), "%s.test", l63);
    question(&m, name, DNS_TYPE_A, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), 0);
    assert_string_equal(q.name, name);

    /* A 64-byte label's length byte is 0x40, an extended label type. */
    hdr(&m, 1, QUERY_FLAGS, 1, 0, 0, 0);
    snprintf(name, sizeof(name), "%s.test", l64);
    question(&m, name, DNS_TYPE_A, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);
    /* 0x80, reserved. */
    hdr(&m, 1, QUERY_FLAGS, 1, 0, 0, 0);
    u8(&m, 0x81);
    u8(&m, 'a');
    u8(&m, 0);
    u16(&m, DNS_TYPE_A);
    u16(&m, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);

    /* 255 bytes in wire form (63+63+63+61 and four length bytes and the
     * root): the longest name, 253 characters. */
    char l61[62];
    memset(l61, 'c', 61);
    l61[61] = '\0';
    snprintf(name, sizeof(name), "%s.%s.%s.%s", l63, l63, l63, l61);
    assert_int_equal(strlen(name), 253);
    hdr(&m, 1, QUERY_FLAGS, 1, 0, 0, 0);
    question(&m, name, DNS_TYPE_A, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), 0);
    assert_string_equal(q.name, name);
    assert_int_equal(q.question_len, 255 + 4);
    /* 256. */
    snprintf(name, sizeof(name), "%s.%s.%s.%sc", l63, l63, l63, l61);
    hdr(&m, 1, QUERY_FLAGS, 1, 0, 0, 0);
    question(&m, name, DNS_TYPE_A, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);
}

static void test_bad_characters(void **state) {
    static const char *const bad[] = {"a b", "a*", "caf\xc3\xa9", "tab\t", "semi;colon", "x/y"};
    struct mb m;
    struct dns_query q;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        hdr(&m, 1, QUERY_FLAGS, 1, 0, 0, 0);
        question(&m, bad[i], DNS_TYPE_A, DNS_CLASS_IN);
        assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);
    }
    /* A '.' and a NUL inside a label. */
    static const uint8_t dot[] = {3, 'a', '.', 'b', 4, 't', 'e', 's', 't', 0};
    static const uint8_t nul[] = {3, 'a', 0, 'b', 4, 't', 'e', 's', 't', 0};
    hdr(&m, 1, QUERY_FLAGS, 1, 0, 0, 0);
    raw(&m, dot, sizeof(dot));
    u16(&m, DNS_TYPE_A);
    u16(&m, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);
    hdr(&m, 1, QUERY_FLAGS, 1, 0, 0, 0);
    raw(&m, nul, sizeof(nul));
    u16(&m, DNS_TYPE_A);
    u16(&m, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EBADMSG);
}

/* Answers. The question www.a.test sits at offset 12; its labels start at
 * 12 (www), 16 (a), 18 (test). */
#define Q_OFF   12
#define Q_A_OFF 16
#define Q_END   (12 + 12 + 4)

static void answer_start(struct mb *m, uint16_t id, uint16_t an, uint16_t ns, uint16_t ar) {
    hdr(m, id, ANSWER_FLAGS, 1, an, ns, ar);
    question(m, "www.a.test", DNS_TYPE_A, DNS_CLASS_IN);
    assert_int_equal(m->n, Q_END);
}

static void test_answer_basic(void **state) {
    struct mb m;
    struct dns_answer a;

    answer_start(&m, 0x4242, 2, 0, 1);
    a_rr_at(&m, Q_OFF, 300, 192, 0, 2, 1);
    a_rr_at(&m, Q_OFF, 200, 192, 0, 2, 2);
    opt(&m, 1232);
    size_t an_end = m.n - 11;
    assert_int_equal(dns_parse_answer(m.b, m.n, 0x4242, DNS_TYPE_A, "www.a.test", &a), 0);
    assert_int_equal(a.id, 0x4242);
    assert_int_equal(a.rcode, 0);
    assert_false(a.tc);
    assert_int_equal(a.qtype, DNS_TYPE_A);
    assert_string_equal(a.name, "www.a.test");
    assert_int_equal(a.n_addrs, 2);
    assert_int_equal(a.n_addrs_dropped, 0);
    assert_int_equal(a.addrs[0].family, AF_INET);
    assert_memory_equal(a.addrs[0].addr, "\xc0\x00\x02\x01", 4);
    assert_memory_equal(a.addrs[1].addr, "\xc0\x00\x02\x02", 4);
    assert_int_equal(a.min_ttl, 200);
    assert_int_equal(a.question_end, Q_END);
    assert_int_equal(a.authority_end, an_end);
    assert_int_equal(a.ancount, 2);
    assert_int_equal(a.nscount, 0);

    /* The question's name compares case-insensitively. */
    m.b[12 + 1] = 'W';
    assert_int_equal(dns_parse_answer(m.b, m.n, 0x4242, DNS_TYPE_A, "www.a.test", &a), 0);
    assert_string_equal(a.name, "www.a.test");

    /* Trailing garbage after the last record. */
    u8(&m, 0);
    assert_int_equal(dns_parse_answer(m.b, m.n, 0x4242, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);

    /* NXDOMAIN with an SOA in authority, TC set: rcode and flag read. */
    hdr(&m, 5, ANSWER_FLAGS | 0x0200 | DNS_RCODE_NXDOMAIN, 1, 0, 1, 0);
    question(&m, "www.a.test", DNS_TYPE_A, DNS_CLASS_IN);
    soa(&m, Q_A_OFF);
    assert_int_equal(dns_parse_answer(m.b, m.n, 5, DNS_TYPE_A, "www.a.test", &a), 0);
    assert_int_equal(a.rcode, DNS_RCODE_NXDOMAIN);
    assert_true(a.tc);
    assert_int_equal(a.n_addrs, 0);
    assert_int_equal(a.min_ttl, 0);
    assert_int_equal(a.nscount, 1);
    assert_int_equal(a.authority_end, m.n);
}

static void test_answer_pointers(void **state) {
    struct mb m;
    struct dns_answer a;

    /* Forward: the owner points past itself. */
    answer_start(&m, 1, 1, 0, 0);
    ptr(&m, (uint16_t)(m.n + 2));
    rrfix(&m, DNS_TYPE_A, DNS_CLASS_IN, 1, 4);
    u32(&m, 0x01020304);
    assert_int_equal(dns_parse_answer(m.b, m.n, 1, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);

    /* To itself. */
    answer_start(&m, 1, 1, 0, 0);
    ptr(&m, (uint16_t)m.n);
    rrfix(&m, DNS_TYPE_A, DNS_CLASS_IN, 1, 4);
    u32(&m, 0x01020304);
    assert_int_equal(dns_parse_answer(m.b, m.n, 1, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);

    /* A loop: a label, then a pointer back to that label. */
    answer_start(&m, 1, 1, 0, 0);
    uint16_t here = (uint16_t)m.n;
    labels(&m, "x");
    ptr(&m, here);
    rrfix(&m, DNS_TYPE_A, DNS_CLASS_IN, 1, 4);
    u32(&m, 0x01020304);
    assert_int_equal(dns_parse_answer(m.b, m.n, 1, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);

    /* A two-name loop: the second name points back to the first, which
     * points forward to the second. */
    answer_start(&m, 1, 2, 0, 0);
    here = (uint16_t)m.n;
    labels(&m, "x");
    ptr(&m, (uint16_t)(here + 4 + 10 + 4));
    rrfix(&m, DNS_TYPE_A, DNS_CLASS_IN, 1, 4);
    u32(&m, 0x01020304);
    labels(&m, "y");
    ptr(&m, here);
    rrfix(&m, DNS_TYPE_A, DNS_CLASS_IN, 1, 4);
    u32(&m, 0x01020304);
    assert_int_equal(dns_parse_answer(m.b, m.n, 1, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);

    /* Into the header. */
    answer_start(&m, 1, 1, 0, 0);
    ptr(&m, 5);
    rrfix(&m, DNS_TYPE_A, DNS_CLASS_IN, 1, 4);
    u32(&m, 0x01020304);
    assert_int_equal(dns_parse_answer(m.b, m.n, 1, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);

    /* Backwards, but to a run that reaches over the pointer: the last rdata
     * byte of a TXT record is 3, the next owner is a pointer to it, and that
     * label of 3 would take in the pointer and a type byte of 0, which would
     * end the name. Structurally fine but for where it reads. */
    answer_start(&m, 1, 2, 0, 0);
    ptr(&m, Q_OFF);
    rrfix(&m, 16, DNS_CLASS_IN, 1, 2);
    u8(&m, 1);
    u8(&m, 3);
    here = (uint16_t)m.n;
    ptr(&m, (uint16_t)(here - 1));
    rrfix(&m, 0, DNS_CLASS_IN, 1, 0);
    assert_int_equal(dns_parse_answer(m.b, m.n, 1, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);
    m.b[here + 1] = Q_OFF; /* the same record pointing to the question: fine */
    assert_int_equal(dns_parse_answer(m.b, m.n, 1, DNS_TYPE_A, "www.a.test", &a), 0);

    /* A pointer cut in half at the end of the message. */
    answer_start(&m, 1, 1, 0, 0);
    u8(&m, 0xC0);
    assert_int_equal(dns_parse_answer(m.b, m.n, 1, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);

    /* A name that grows past 255 bytes through pointers: each owner is a
     * 60-byte label and a pointer to the previous owner. */
    char l60[61];
    memset(l60, 'z', 60);
    l60[60] = '\0';
    answer_start(&m, 1, 0, 4, 0);
    uint16_t prev = Q_OFF;
    for (int i = 0; i < 4; i++) {
        here = (uint16_t)m.n;
        labels(&m, l60);
        ptr(&m, prev);
        rrfix(&m, 16, DNS_CLASS_IN, 1, 0);
        prev = here;
    }
    /* www.a.test is 12 bytes; 12 + 3*61 = 195 fits, 12 + 4*61 = 256 does not. */
    assert_int_equal(dns_parse_answer(m.b, m.n, 1, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);
    m.b[11] = 0;
    m.b[9] = 3;
    size_t keep = Q_END + 3 * (61 + 2 + 10);
    assert_int_equal(dns_parse_answer(m.b, keep, 1, DNS_TYPE_A, "www.a.test", &a), 0);

    /* DNS_MAX_POINTERS chained pointers are followed, one more is not: each
     * authority owner is "p" and a pointer to the previous owner. */
    for (int n = DNS_MAX_POINTERS; n <= DNS_MAX_POINTERS + 1; n++) {
        answer_start(&m, 1, 0, (uint16_t)n, 0);
        prev = Q_OFF;
        for (int i = 0; i < n; i++) {
            here = (uint16_t)m.n;
            labels(&m, "p");
            ptr(&m, prev);
            rrfix(&m, 16, DNS_CLASS_IN, 1, 0);
            prev = here;
        }
        assert_int_equal(dns_parse_answer(m.b, m.n, 1, DNS_TYPE_A, "www.a.test", &a),
                         n == DNS_MAX_POINTERS ? 0 : -EBADMSG);
    }
}

/* www.a.test CNAME edge.cdn.test, edge.cdn.test A 203.0.113.3, with an A of
 * an unrelated name in between; reverse puts the A first. */
static void chain_answer(struct mb *m, bool reverse) {
    answer_start(m, 0x77, 3, 0, 0);
    uint16_t edge_at;
    if (!reverse) {
        ptr(m, Q_OFF);
        rrfix(m, DNS_TYPE_CNAME, DNS_CLASS_IN, 120, 15);
        edge_at = (uint16_t)m->n;
        dname(m, "edge.cdn.test");
        a_rr_at(m, Q_A_OFF, 5, 198, 51, 100, 9); /* a.test: not on the chain */
        a_rr_at(m, edge_at, 300, 203, 0, 113, 3);
    } else {
        edge_at = (uint16_t)m->n;
        dname(m, "edge.cdn.test");
        rrfix(m, DNS_TYPE_A, DNS_CLASS_IN, 300, 4);
        raw(m, "\xcb\x00\x71\x03", 4);
        a_rr_at(m, Q_A_OFF, 5, 198, 51, 100, 9);
        ptr(m, Q_OFF);
        rrfix(m, DNS_TYPE_CNAME, DNS_CLASS_IN, 120, 2);
        ptr(m, edge_at);
    }
}

static void test_cname_chain(void **state) {
    struct mb m;
    struct dns_answer a;

    for (int reverse = 0; reverse <= 1; reverse++) {
        chain_answer(&m, reverse);
        assert_int_equal(dns_parse_answer(m.b, m.n, 0x77, DNS_TYPE_A, "www.a.test", &a), 0);
        assert_int_equal(a.n_addrs, 1);
        assert_int_equal(a.addrs[0].family, AF_INET);
        assert_memory_equal(a.addrs[0].addr, "\xcb\x00\x71\x03", 4);
        assert_int_equal(a.min_ttl, 120);
        assert_int_equal(a.ancount, 3);

        /* Every shorter length fails, and never with success. */
        for (size_t len = 0; len < m.n; len++) {
            int r = dns_parse_answer(m.b, len, 0x77, DNS_TYPE_A, "www.a.test", &a);
            assert_true(r == -EBADMSG || r == -ESRCH || r == -EINVAL);
        }
    }

    /* A longer chain, given backwards: q -> c1 -> c2 -> c3, A of c3. */
    answer_start(&m, 9, 4, 0, 0);
    uint16_t c3 = (uint16_t)m.n;
    dname(&m, "c3.test");
    rrfix(&m, DNS_TYPE_A, DNS_CLASS_IN, 50, 4);
    raw(&m, "\x0a\x0b\x0c\x0d", 4);
    uint16_t c2 = (uint16_t)m.n;
    dname(&m, "c2.test");
    rrfix(&m, DNS_TYPE_CNAME, DNS_CLASS_IN, 40, 2);
    ptr(&m, c3);
    uint16_t c1 = (uint16_t)m.n;
    dname(&m, "c1.test");
    rrfix(&m, DNS_TYPE_CNAME, DNS_CLASS_IN, 4000, 2);
    ptr(&m, c2);
    ptr(&m, Q_OFF);
    rrfix(&m, DNS_TYPE_CNAME, DNS_CLASS_IN, 0x80000000u, 2); /* top bit: 0 */
    ptr(&m, c1);
    assert_int_equal(dns_parse_answer(m.b, m.n, 9, DNS_TYPE_A, "www.a.test", &a), 0);
    assert_int_equal(a.n_addrs, 1);
    assert_memory_equal(a.addrs[0].addr, "\x0a\x0b\x0c\x0d", 4);
    assert_int_equal(a.min_ttl, 0);
    m.b[m.n - 8] = 0; /* the last CNAME's TTL: 0x00000000 -> 60 */
    m.b[m.n - 5] = 60;
    assert_int_equal(dns_parse_answer(m.b, m.n, 9, DNS_TYPE_A, "www.a.test", &a), 0);
    assert_int_equal(a.min_ttl, 40);

    /* A CNAME loop ends after 8 steps, without addresses. */
    answer_start(&m, 9, 2, 0, 0);
    uint16_t x = (uint16_t)m.n;
    ptr(&m, Q_OFF);
    rrfix(&m, DNS_TYPE_CNAME, DNS_CLASS_IN, 10, 8);
    dname(&m, "x.test");
    ptr(&m, (uint16_t)(x + 12));
    rrfix(&m, DNS_TYPE_CNAME, DNS_CLASS_IN, 10, 2);
    ptr(&m, Q_OFF);
    assert_int_equal(dns_parse_answer(m.b, m.n, 9, DNS_TYPE_A, "www.a.test", &a), 0);
    assert_int_equal(a.n_addrs, 0);
    assert_int_equal(a.min_ttl, 10);
}

static void test_cname_rules(void **state) {
    struct mb m;
    struct dns_answer a;

    /* A CNAME on the chain whose target has a space: refused. */
    answer_start(&m, 3, 1, 0, 0);
    ptr(&m, Q_OFF);
    rrfix(&m, DNS_TYPE_CNAME, DNS_CLASS_IN, 10, 10);
    dname(&m, "a b.test");
    assert_int_equal(m.n, Q_END + 12 + 10);
    assert_int_equal(dns_parse_answer(m.b, m.n, 3, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);

    /* CNAME rdata longer than its name. */
    answer_start(&m, 3, 1, 0, 0);
    ptr(&m, Q_OFF);
    rrfix(&m, DNS_TYPE_CNAME, DNS_CLASS_IN, 10, 3);
    ptr(&m, Q_A_OFF);
    u8(&m, 0);
    assert_int_equal(dns_parse_answer(m.b, m.n, 3, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);

    /* An owner with odd bytes in authority, and one in the answer section:
     * never matched, not refused. */
    answer_start(&m, 3, 2, 1, 0);
    dname(&m, "we ird.test");
    rrfix(&m, DNS_TYPE_A, DNS_CLASS_IN, 10, 4);
    u32(&m, 0x01010101);
    a_rr_at(&m, Q_OFF, 30, 192, 0, 2, 7);
    dname(&m, "*.a.test");
    rrfix(&m, 16, DNS_CLASS_IN, 10, 2);
    raw(&m, "\x01x", 2);
    assert_int_equal(dns_parse_answer(m.b, m.n, 3, DNS_TYPE_A, "www.a.test", &a), 0);
    assert_int_equal(a.n_addrs, 1);
    assert_memory_equal(a.addrs[0].addr, "\xc0\x00\x02\x07", 4);
    assert_int_equal(a.min_ttl, 30);

    /* Records of class CH or unknown types are skipped; an A of class IN
     * with 5 bytes is not. */
    answer_start(&m, 3, 2, 0, 0);
    ptr(&m, Q_OFF);
    rrfix(&m, DNS_TYPE_A, 3, 10, 5);
    raw(&m, "abcde", 5);
    a_rr_at(&m, Q_OFF, 30, 192, 0, 2, 8);
    assert_int_equal(dns_parse_answer(m.b, m.n, 3, DNS_TYPE_A, "www.a.test", &a), 0);
    assert_int_equal(a.n_addrs, 1);
    m.b[Q_END + 2 + 2 + 1] = DNS_CLASS_IN;
    assert_int_equal(dns_parse_answer(m.b, m.n, 3, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);
}

static void test_aaaa(void **state) {
    struct mb m;
    struct dns_answer a;
    static const uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 0x42};

    hdr(&m, 6, ANSWER_FLAGS, 1, 2, 0, 0);
    question(&m, "www.a.test", DNS_TYPE_AAAA, DNS_CLASS_IN);
    a_rr_at(&m, Q_OFF, 30, 192, 0, 2, 1); /* an A in an AAAA answer: ignored */
    ptr(&m, Q_OFF);
    rrfix(&m, DNS_TYPE_AAAA, DNS_CLASS_IN, 99, 16);
    raw(&m, v6, 16);
    assert_int_equal(dns_parse_answer(m.b, m.n, 6, DNS_TYPE_AAAA, "www.a.test", &a), 0);
    assert_int_equal(a.n_addrs, 1);
    assert_int_equal(a.addrs[0].family, AF_INET6);
    assert_memory_equal(a.addrs[0].addr, v6, 16);
    assert_int_equal(a.min_ttl, 99);

    /* An AAAA of 4 bytes. */
    hdr(&m, 6, ANSWER_FLAGS, 1, 1, 0, 0);
    question(&m, "www.a.test", DNS_TYPE_AAAA, DNS_CLASS_IN);
    ptr(&m, Q_OFF);
    rrfix(&m, DNS_TYPE_AAAA, DNS_CLASS_IN, 99, 4);
    raw(&m, v6, 4);
    assert_int_equal(dns_parse_answer(m.b, m.n, 6, DNS_TYPE_AAAA, "www.a.test", &a), -EBADMSG);
}

static void test_answer_mismatch(void **state) {
    struct mb m;
    struct dns_answer a;

    memset(&a, 0x5a, sizeof(a));
    answer_start(&m, 0x1000, 1, 0, 0);
    a_rr_at(&m, Q_OFF, 30, 192, 0, 2, 1);
    assert_int_equal(dns_parse_answer(m.b, m.n, 0x1001, DNS_TYPE_A, "www.a.test", &a), -ESRCH);
    assert_int_equal(dns_parse_answer(m.b, m.n, 0x1000, DNS_TYPE_A, "www.b.test", &a), -ESRCH);
    assert_int_equal(dns_parse_answer(m.b, m.n, 0x1000, DNS_TYPE_A, "a.test", &a), -ESRCH);
    assert_int_equal(dns_parse_answer(m.b, m.n, 0x1000, DNS_TYPE_AAAA, "www.a.test", &a), -ESRCH);
    assert_int_equal(a.id, 0x5a5a); /* untouched on failure */
    /* Class CH in the question. */
    m.b[Q_END - 1] = 3;
    assert_int_equal(dns_parse_answer(m.b, m.n, 0x1000, DNS_TYPE_A, "www.a.test", &a), -ESRCH);
    m.b[Q_END - 1] = DNS_CLASS_IN;
    /* No question, or two. */
    m.b[5] = 0;
    assert_int_equal(dns_parse_answer(m.b, m.n, 0x1000, DNS_TYPE_A, "www.a.test", &a), -ESRCH);
    m.b[5] = 2;
    assert_int_equal(dns_parse_answer(m.b, m.n, 0x1000, DNS_TYPE_A, "www.a.test", &a), -ESRCH);
    m.b[5] = 1;
    /* The id is checked first: a short or query-shaped message with another
     * id is not ours rather than malformed. */
    assert_int_equal(dns_parse_answer(m.b, 2, 0x1001, DNS_TYPE_A, "www.a.test", &a), -ESRCH);
    assert_int_equal(dns_parse_answer(m.b, 2, 0x1000, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);
    m.b[2] &= 0x7f;
    assert_int_equal(dns_parse_answer(m.b, m.n, 0x1001, DNS_TYPE_A, "www.a.test", &a), -ESRCH);
    m.b[2] |= 0x80;
    /* QR clear, opcode 1. */
    m.b[2] &= 0x7f;
    assert_int_equal(dns_parse_answer(m.b, m.n, 0x1000, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);
    m.b[2] |= 0x80 | (1 << 3);
    assert_int_equal(dns_parse_answer(m.b, m.n, 0x1000, DNS_TYPE_A, "www.a.test", &a), -EBADMSG);
    m.b[2] &= (uint8_t)~(1 << 3);
    assert_int_equal(dns_parse_answer(m.b, m.n, 0x1000, DNS_TYPE_A, "www.a.test", &a), 0);
}

static void test_address_cap(void **state) {
    struct mb m;
    struct dns_answer a;

    answer_start(&m, 2, 20, 0, 0);
    for (int i = 0; i < 20; i++)
        a_rr_at(&m, Q_OFF, (uint32_t)(1000 - i), 10, 0, 0, (uint8_t)i);
    assert_int_equal(dns_parse_answer(m.b, m.n, 2, DNS_TYPE_A, "www.a.test", &a), 0);
    assert_int_equal(a.n_addrs, DNS_ANSWER_ADDRS);
    assert_int_equal(a.n_addrs_dropped, 4);
    assert_int_equal(a.addrs[15].addr[3], 15);
    assert_int_equal(a.min_ttl, 1000 - 15); /* over the addresses kept */
}

static void test_build_query(void **state) {
    static const uint8_t want[] = {
        0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
        3,    'w',  'w',  'w',  7,    'e',  'x',  'a',  'm',  'p',  'l',  'e',
        3,    'c',  'o',  'm',  0,    0x00, 0x1c, 0x00, 0x01,
        0,    0x00, 0x29, 0x04, 0xd0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    };
    uint8_t buf[512];
    size_t n = 0;
    struct dns_query q;

    assert_int_equal(
        dns_build_query(0x1234, "www.example.com", DNS_TYPE_AAAA, buf, sizeof(buf), &n), 0);
    assert_int_equal(n, sizeof(want));
    assert_memory_equal(buf, want, sizeof(want));
    assert_int_equal(dns_parse_query(buf, n, &q), 0);
    assert_string_equal(q.name, "www.example.com");
    assert_int_equal(q.qtype, DNS_TYPE_AAAA);
    assert_true(q.rd);
    assert_true(q.edns);
    assert_int_equal(q.udp_size, DNS_EDNS_MAX);

    /* Exactly enough room, one byte less. */
    assert_int_equal(dns_build_query(1, "www.example.com", 1, buf, sizeof(want), &n), 0);
    assert_int_equal(dns_build_query(1, "www.example.com", 1, buf, sizeof(want) - 1, &n), -ENOSPC);

    /* The root. */
    assert_int_equal(dns_build_query(1, "", 2, buf, sizeof(buf), &n), 0);
    assert_int_equal(n, 12 + 1 + 4 + 11);
    assert_int_equal(dns_parse_query(buf, n, &q), 0);
    assert_string_equal(q.name, "");

    /* Names that are not normalised. */
    char l64[70], long254[300];
    memset(l64, 'a', 64);
    l64[64] = '\0';
    memset(long254, 'a', 254);
    for (int i = 63; i < 254; i += 64)
        long254[i] = '.';
    long254[254] = '\0';
    const char *bad[] = {"Www.example.com", ".a", "a.", "a..b", ".", "a b", "a*.b", l64, long254};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(dns_build_query(1, bad[i], 1, buf, sizeof(buf), &n), -EINVAL);
    long254[253] = '\0'; /* 253 characters: the longest */
    assert_int_equal(dns_build_query(1, long254, 1, buf, sizeof(buf), &n), 0);
    assert_int_equal(dns_parse_query(buf, n, &q), 0);
    assert_string_equal(q.name, long254);
}

static void test_reply_empty(void **state) {
    struct mb m;
    struct dns_query q;
    struct dns_answer a;
    uint8_t buf[600];
    size_t n;

    /* With EDNS: question copied as the agent wrote it, OPT appended. */
    hdr(&m, 0xbeef, QUERY_FLAGS, 1, 0, 0, 1);
    question(&m, "WWW.a.test", DNS_TYPE_A, DNS_CLASS_IN);
    opt(&m, 4096);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), 0);
    assert_int_equal(dns_build_reply_empty(&q, m.b, m.n, DNS_RCODE_NXDOMAIN, buf, sizeof(buf), &n),
                     0);
    static const uint8_t want_hdr[] = {0xbe, 0xef, 0x81, 0x83, 0, 1, 0, 0, 0, 0, 0, 1};
    static const uint8_t want_opt[] = {0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0};
    assert_int_equal(n, 12 + 16 + 11);
    assert_memory_equal(buf, want_hdr, 12);
    assert_memory_equal(buf + 12, m.b + 12, 16);
    assert_memory_equal(buf + 28, want_opt, 11);
    assert_int_equal(dns_parse_answer(buf, n, 0xbeef, DNS_TYPE_A, "www.a.test", &a), 0);
    assert_int_equal(a.rcode, DNS_RCODE_NXDOMAIN);
    assert_int_equal(a.n_addrs, 0);

    /* Without EDNS and without RD. */
    hdr(&m, 0x0102, 0, 1, 0, 0, 0);
    question(&m, "www.a.test", DNS_TYPE_A, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), 0);
    assert_int_equal(dns_build_reply_empty(&q, m.b, m.n, DNS_RCODE_REFUSED, buf, sizeof(buf), &n),
                     0);
    static const uint8_t want_hdr2[] = {0x01, 0x02, 0x80, 0x85, 0, 1, 0, 0, 0, 0, 0, 0};
    assert_int_equal(n, 12 + 16);
    assert_memory_equal(buf, want_hdr2, 12);
    assert_memory_equal(buf + 12, m.b + 12, 16);

    /* Room, rcode, a q that does not belong to the bytes. */
    assert_int_equal(dns_build_reply_empty(&q, m.b, m.n, 0, buf, 27, &n), -ENOSPC);
    assert_int_equal(dns_build_reply_empty(&q, m.b, m.n, 16, buf, sizeof(buf), &n), -EINVAL);
    assert_int_equal(dns_build_reply_empty(&q, m.b, 20, 0, buf, sizeof(buf), &n), -EINVAL);

    /* NOTIMP to a CHAOS query: the question as it came. */
    hdr(&m, 0x0103, QUERY_FLAGS, 1, 0, 0, 0);
    question(&m, "version.bind", 16, 3);
    assert_int_equal(dns_parse_query(m.b, m.n, &q), -EPROTONOSUPPORT);
    assert_int_equal(
        dns_build_reply_empty(&q, m.b, m.n, DNS_RCODE_NOTIMP, buf, sizeof(buf), &n), 0);
    assert_int_equal(buf[3], 0x80 | DNS_RCODE_NOTIMP);
    assert_memory_equal(buf + 12, m.b + 12, m.n - 12);
}

/* The resolver's answer to the forwarder's query for www.a.test: a CNAME
 * (compressed into the question), two A records, an SOA in authority and an
 * OPT in additional. */
static void upstream_answer(struct mb *m, uint16_t id) {
    answer_start(m, id, 3, 1, 1);
    ptr(m, Q_OFF);
    rrfix(m, DNS_TYPE_CNAME, DNS_CLASS_IN, 600, 7);
    uint16_t edge = (uint16_t)m->n;
    labels(m, "edge");
    ptr(m, Q_A_OFF); /* edge.a.test */
    a_rr_at(m, edge, 60, 203, 0, 113, 3);
    a_rr_at(m, edge, 70, 203, 0, 113, 4);
    soa(m, Q_A_OFF);
    opt(m, 1232);
}

static void test_reply_from(void **state) {
    struct mb qm, am;
    struct dns_query q;
    struct dns_answer a, back;
    uint8_t buf[2048];
    size_t n;

    for (int edns = 0; edns <= 1; edns++) {
        hdr(&qm, 0xbeef, QUERY_FLAGS, 1, 0, 0, (uint16_t)edns);
        question(&qm, "WwW.A.tEsT", DNS_TYPE_A, DNS_CLASS_IN);
        if (edns)
            opt(&qm, 1400);
        assert_int_equal(dns_parse_query(qm.b, qm.n, &q), 0);

        upstream_answer(&am, 0x1111);
        assert_int_equal(dns_parse_answer(am.b, am.n, 0x1111, DNS_TYPE_A, q.name, &a), 0);
        assert_int_equal(a.n_addrs, 2);
        assert_int_equal(a.min_ttl, 60);

        assert_int_equal(dns_build_reply_from(&q, qm.b, qm.n, &a, am.b, am.n, q.udp_size, buf,
                                              sizeof(buf), &n),
                         0);
        assert_int_equal(n, am.n - 11 + (edns ? 11 : 0));
        assert_int_equal(buf[0], 0xbe);
        assert_int_equal(buf[1], 0xef);
        assert_int_equal(buf[2], 0x81);
        assert_int_equal(buf[3], 0x80);
        assert_int_equal(buf[11], edns);
        assert_memory_equal(buf + 12, qm.b + 12, q.question_len); /* the agent's case */
        assert_memory_equal(buf + a.question_end, am.b + a.question_end,
                            a.authority_end - a.question_end);

        assert_int_equal(dns_parse_answer(buf, n, 0xbeef, DNS_TYPE_A, q.name, &back), 0);
        assert_int_equal(back.n_addrs, 2);
        assert_memory_equal(back.addrs, a.addrs, sizeof(a.addrs));
        assert_int_equal(back.min_ttl, 60);
        assert_int_equal(back.ancount, 3);
        assert_int_equal(back.nscount, 1);
        assert_false(back.tc);

        /* No room: -ENOSPC, not a truncated reply. */
        assert_int_equal(dns_build_reply_from(&q, qm.b, qm.n, &a, am.b, am.n, q.udp_size, buf,
                                              n - 1, &n),
                         -ENOSPC);
    }

    /* An answer to another name or type, or a question of another length. */
    hdr(&qm, 0xbeef, QUERY_FLAGS, 1, 0, 0, 0);
    question(&qm, "ww.a.test", DNS_TYPE_A, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(qm.b, qm.n, &q), 0);
    assert_int_equal(
        dns_build_reply_from(&q, qm.b, qm.n, &a, am.b, am.n, 512, buf, sizeof(buf), &n), -EINVAL);
    hdr(&qm, 0xbeef, QUERY_FLAGS, 1, 0, 0, 0);
    question(&qm, "www.a.test", DNS_TYPE_AAAA, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(qm.b, qm.n, &q), 0);
    assert_int_equal(
        dns_build_reply_from(&q, qm.b, qm.n, &a, am.b, am.n, 512, buf, sizeof(buf), &n), -EINVAL);
}

static void test_reply_over_limit(void **state) {
    struct mb qm, am;
    struct dns_query q;
    struct dns_answer a, back;
    uint8_t buf[2048];
    size_t n;

    hdr(&qm, 0x5150, QUERY_FLAGS, 1, 0, 0, 0);
    question(&qm, "www.a.test", DNS_TYPE_A, DNS_CLASS_IN);
    assert_int_equal(dns_parse_query(qm.b, qm.n, &q), 0);
    assert_int_equal(q.udp_size, 512);

    /* 40 A records: 28 + 40 * 16 = 668 bytes. */
    answer_start(&am, 1, 40, 0, 0);
    for (int i = 0; i < 40; i++)
        a_rr_at(&am, Q_OFF, 30, 10, 0, 1, (uint8_t)i);
    assert_int_equal(dns_parse_answer(am.b, am.n, 1, DNS_TYPE_A, q.name, &a), 0);
    assert_int_equal(a.n_addrs_dropped, 24);

    assert_int_equal(
        dns_build_reply_from(&q, qm.b, qm.n, &a, am.b, am.n, q.udp_size, buf, sizeof(buf), &n), 0);
    assert_int_equal(n, 12 + q.question_len);
    static const uint8_t want_hdr[] = {0x51, 0x50, 0x83, 0x80, 0, 1, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(buf, want_hdr, 12);
    assert_int_equal(dns_parse_answer(buf, n, 0x5150, DNS_TYPE_A, q.name, &back), 0);
    assert_true(back.tc);
    assert_int_equal(back.n_addrs, 0);
    assert_int_equal(back.ancount, 0);
    assert_int_equal(back.rcode, DNS_RCODE_NOERROR);

    /* Over TCP the whole answer goes. */
    assert_int_equal(
        dns_build_reply_from(&q, qm.b, qm.n, &a, am.b, am.n, DNS_MSG_MAX, buf, sizeof(buf), &n), 0);
    assert_int_equal(n, am.n);
    assert_int_equal(dns_parse_answer(buf, n, 0x5150, DNS_TYPE_A, q.name, &back), 0);
    assert_false(back.tc);
    assert_int_equal(back.n_addrs, 16);
    assert_int_equal(back.n_addrs_dropped, 24);

    /* A truncated answer that fits is passed on truncated. */
    am.b[2] |= 0x02;
    assert_int_equal(dns_parse_answer(am.b, am.n, 1, DNS_TYPE_A, q.name, &a), 0);
    assert_int_equal(
        dns_build_reply_from(&q, qm.b, qm.n, &a, am.b, am.n, DNS_MSG_MAX, buf, sizeof(buf), &n), 0);
    assert_int_equal(buf[2] & 0x02, 0x02);
}

static void test_type_name(void **state) {
    char buf[12];

    assert_string_equal(dns_type_name(1, buf, sizeof(buf)), "A");
    assert_string_equal(dns_type_name(28, buf, sizeof(buf)), "AAAA");
    assert_string_equal(dns_type_name(5, buf, sizeof(buf)), "CNAME");
    assert_string_equal(dns_type_name(65, buf, sizeof(buf)), "HTTPS");
    assert_string_equal(dns_type_name(257, buf, sizeof(buf)), "CAA");
    assert_string_equal(dns_type_name(41, buf, sizeof(buf)), "OPT");
    assert_string_equal(dns_type_name(99, buf, sizeof(buf)), "TYPE99");
    assert_string_equal(dns_type_name(65535, buf, sizeof(buf)), "TYPE65535");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query_plain),
        cmocka_unit_test(test_query_edns),
        cmocka_unit_test(test_query_mixed_case),
        cmocka_unit_test(test_query_refusals),
        cmocka_unit_test(test_query_pointer_refused),
        cmocka_unit_test(test_label_types_and_lengths),
        cmocka_unit_test(test_bad_characters),
        cmocka_unit_test(test_answer_basic),
        cmocka_unit_test(test_answer_pointers),
        cmocka_unit_test(test_cname_chain),
        cmocka_unit_test(test_cname_rules),
        cmocka_unit_test(test_aaaa),
        cmocka_unit_test(test_answer_mismatch),
        cmocka_unit_test(test_address_cap),
        cmocka_unit_test(test_build_query),
        cmocka_unit_test(test_reply_empty),
        cmocka_unit_test(test_reply_from),
        cmocka_unit_test(test_reply_over_limit),
        cmocka_unit_test(test_type_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
