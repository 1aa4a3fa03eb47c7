/* dns_msg: the DNS messages lyhd's per-session forwarder reads and writes.
 *
 * Pure functions: bytes in, plain structs or bytes out; no I/O, no logging, no
 * allocation. Queries come from a sandboxed agent and answers from a resolver
 * beyond the VPN: both are untrusted, so every length is checked against the
 * buffer before it is read, compression pointers only ever point backwards
 * (below the labels they end, never into the header) and are followed at most
 * DNS_MAX_POINTERS times, and a name is at most 255 bytes in wire form.
 * fuzz/fuzz_dns.c feeds both parsers arbitrary bytes and checks that what the
 * builders make of their results parses again.
 *
 * Names are kept in presentation form: lower case, labels joined by '.', no
 * trailing dot ("" is the root). A label holding a byte outside [a-z0-9_-]
 * after lower-casing (a '.', a space, a control byte...) makes the name
 * refused (-EBADMSG): such a name can't be matched against an allowlist
 * honestly nor shown in the audit log as is, and no real host name has one.
 *
 * Every function returns 0 or -errno; ret_* are set only on success (one
 * exception, dns_parse_query's -EPROTONOSUPPORT, says so). */
#ifndef LYH_COMMON_DNS_MSG_H
#define LYH_COMMON_DNS_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNS_NAME_MAX      254  /* presentation form, with the NUL */
#define DNS_HEADER_BYTES  12
#define DNS_UDP_MAX       512  /* a reply to a query without EDNS */
#define DNS_EDNS_MAX      1232 /* what the forwarder offers and accepts over UDP */
#define DNS_MSG_MAX       65535
#define DNS_MAX_POINTERS  16
#define DNS_ANSWER_ADDRS  16   /* addresses kept from one answer */

#define DNS_TYPE_A     1
#define DNS_TYPE_CNAME 5
#define DNS_TYPE_AAAA  28
#define DNS_TYPE_OPT   41
#define DNS_CLASS_IN   1

#define DNS_RCODE_NOERROR  0
#define DNS_RCODE_FORMERR  1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_NOTIMP   4
#define DNS_RCODE_REFUSED  5

/* A query as the agent sent it. */
struct dns_query {
    uint16_t id;
    bool rd;                  /* recursion desired */
    bool edns;                /* it carried an OPT record */
    uint16_t udp_size;        /* what it can take over UDP: 512, or its EDNS size
                               * clamped to 512..DNS_EDNS_MAX */
    uint16_t qtype;
    uint16_t qclass;
    char name[DNS_NAME_MAX];  /* normalised as above */
    size_t question_len;      /* bytes of the question in the query, after the header */
};

/* One address of an answer (network byte order). */
struct dns_addr {
    int family; /* AF_INET or AF_INET6 */
    uint8_t addr[16];
};

/* What a resolver answered to one question. */
struct dns_answer {
    uint16_t id;
    uint8_t rcode;
    bool tc;                          /* truncated */
    uint16_t qtype;
    char name[DNS_NAME_MAX];          /* the question it answers, normalised */
    /* A / AAAA records of the question's name, following the CNAME chain from
     * it (a record counts only if its owner is the name or a CNAME target
     * reached from it, in order, within 8 steps); at most DNS_ANSWER_ADDRS. */
    struct dns_addr addrs[DNS_ANSWER_ADDRS];
    size_t n_addrs;
    size_t n_addrs_dropped;           /* more than DNS_ANSWER_ADDRS */
    uint32_t min_ttl;                 /* over the records used (CNAMEs and
                                       * addresses); 0 when there are none */
    /* Bytes of the answer and authority sections (for a reply that passes
     * them on): they start right after the question. */
    size_t question_end;              /* offset of the first answer record */
    size_t authority_end;             /* offset just past the authority section */
    uint16_t ancount, nscount;
};

/* Parse a query: QR = 0, opcode 0 (QUERY), exactly one question, no answer or
 * authority records, at most one additional record and it must be an OPT with
 * the root name (any other additional record: -EBADMSG). The question's name
 * must not be compressed (nothing precedes it). Class must be IN and opcode 0
 * (else -EPROTONOSUPPORT, answer NOTIMP: for that one error *ret is filled
 * all the same, the message being otherwise well formed, so that
 * dns_build_reply_empty can answer it). A message too short for its counts,
 * a bad name, trailing bytes after the records: -EBADMSG. Under 12 bytes or
 * QR set: -EINVAL (no reply is possible or due). */
int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *ret);

/* Parse a resolver's reply to the question (qtype, name) sent with id: QR set,
 * opcode 0, the same id (-ESRCH), exactly one question equal to ours (name
 * compared case-insensitively, qtype and class IN; else -ESRCH), every record
 * well formed up to the end of the additional section (-EBADMSG). Records of
 * other classes or types are skipped, not refused. A, AAAA rdata of the wrong
 * length: -EBADMSG. The id is checked before anything else, so that bytes
 * sent by someone who does not know it are always -ESRCH (not ours), never
 * -EBADMSG. Under 12 bytes, QR clear or opcode not 0: -EBADMSG; a question
 * count other than 1: -ESRCH.
 *
 * Every record's owner must be a well-formed wire name (bounds, label types,
 * pointers, length: else -EBADMSG), but the character rule applies only to
 * the names we compare: an owner with odd bytes is not refused, it simply
 * never matches the question or the chain, so its record is never used. The
 * target of a CNAME on the chain is compared in turn, and one that fails the
 * character rule refuses the answer (-EBADMSG). The rdata of a class-IN CNAME
 * anywhere must be exactly one well-formed name. Names inside other rdata
 * (NS, MX, SOA...) are not read. */
int dns_parse_answer(const uint8_t *msg, size_t len, uint16_t id, uint16_t qtype,
                     const char *name, struct dns_answer *ret);

/* Write the query lyhd sends upstream: id, RD, one question (name, qtype, IN),
 * and an OPT record offering DNS_EDNS_MAX bytes. buf holds cap bytes; *ret_len
 * is the message's length. -EINVAL for a name that is not a valid normalised
 * name (labels of 1..63 bytes of [a-z0-9_-], at most 253 characters; "" is
 * the root), -ENOSPC if cap is too small. */
int dns_build_query(uint16_t id, const char *name, uint16_t qtype, uint8_t *buf, size_t cap,
                    size_t *ret_len);

/* Write a reply to q carrying only a header, q's question (copied from the
 * query's bytes, so its case is the agent's) and, when q had one, an OPT
 * record: rcode, QR, RA, RD and the opcode copied. For refusals, NXDOMAIN,
 * SERVFAIL and NOERROR with no data. query/query_len are the bytes q was
 * parsed from. -EINVAL for an rcode over 15 or a q that does not fit query,
 * -ENOSPC if cap is too small. */
int dns_build_reply_empty(const struct dns_query *q, const uint8_t *query, size_t query_len,
                          uint8_t rcode, uint8_t *buf, size_t cap, size_t *ret_len);

/* Write the reply to q from a resolver's answer a (parsed from ans/ans_len):
 * the agent's id and question, the answer's rcode, its answer and authority
 * sections as they were (their compression pointers into the question stay
 * valid: the question has the same length, and pointers past it are shifted
 * by nothing, as the header is the same size), no additional section but q's
 * OPT when it had one. TC is the answer's (a truncated answer passed on says
 * so). If that exceeds limit (q->udp_size over UDP, or DNS_MSG_MAX over TCP),
 * the reply is the empty one with TC set instead, with the answer's rcode.
 *
 * The resolver's question must be the same length as the agent's (it is the
 * same name, compared case-insensitively), which dns_parse_answer made sure of
 * when given q's name and type: a and q naming another name or type, or
 * questions of different lengths, are -EINVAL. -ENOSPC if cap is too small.
 * Names in rdata the parser did not read (NS, MX, SOA...) are passed on as
 * the resolver wrote them. */
int dns_build_reply_from(const struct dns_query *q, const uint8_t *query, size_t query_len,
                         const struct dns_answer *a, const uint8_t *ans, size_t ans_len,
                         size_t limit, uint8_t *buf, size_t cap, size_t *ret_len);

/* Write a reply to q (an A or AAAA question) that answers q's name itself
 * with addrs (all of q's type's family, at most DNS_ANSWER_ADDRS), each with
 * ttl: what the forwarder sends when it answers from what it kept of the
 * resolver's answer (a CNAME chain flattened, some addresses dropped).
 * Over limit: the empty reply with TC set. */
int dns_build_reply_addrs(const struct dns_query *q, const uint8_t *query, size_t query_len,
                          const struct dns_addr *addrs, size_t n_addrs, uint32_t ttl,
                          size_t limit, uint8_t *buf, size_t cap, size_t *ret_len);

/* "A", "AAAA", "CNAME", "MX", ... or "TYPE<n>" into buf (at least 12 bytes). */
const char *dns_type_name(uint16_t type, char *buf, size_t len);

#endif
