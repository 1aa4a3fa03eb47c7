/* DNS message parsing and building for the per-session forwarder. Owns no
 * state: bytes in, structs or bytes out. It must never do I/O, allocate, log,
 * or read a byte it has not first checked is inside the buffer.
 *
 * Why it is safe on hostile input:
 *  - Every read goes through an explicit bound: a label's length byte is
 *    checked against what is left before its bytes are read, the 10 fixed
 *    bytes of a record and its rdata likewise, so a count or length that lies
 *    ends the parse with -EBADMSG instead of reading on.
 *  - A compression pointer must point below the start of the run of labels it
 *    ends (the name's own start, or the previous pointer's target) and at or
 *    past the header, and the run it reaches must end below that start too.
 *    Targets therefore strictly decrease and no name can revisit a byte:
 *    loops, self pointers and forward pointers are all refused, and
 *    DNS_MAX_POINTERS bounds the work besides. Every byte of a name so lies
 *    between the header and the name's own end, which is what lets a reply
 *    keep the answer and authority sections and drop what follows. Pointers
 *    into the header are refused because a reply we build rewrites the
 *    header: a name read through one would change meaning on the way.
 *  - The expanded name is counted as it is read (root byte included), so it
 *    never exceeds 255 wire bytes and its presentation form always fits in
 *    DNS_NAME_MAX: the buffer write cannot overflow whatever the labels say.
 *  - Labels 0x40 and 0x80 (extended and reserved types) are refused, not
 *    guessed at.
 *  - Work is bounded: a name costs at most 255 bytes and DNS_MAX_POINTERS
 *    jumps. One walk reads every record; the CNAME chain then makes at most
 *    8 more passes over the answer section and the addresses one, and those
 *    expand only the owners of CNAME, A or AAAA records.
 *
 * The builders copy bytes parsed here only in ranges the parser vouched for,
 * and check every length against cap before writing. */
#include "common/dns_msg.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#define DNS_WIRE_NAME_MAX 255
#define DNS_LABEL_MAX     63
#define DNS_CHAIN_STEPS   8
#define DNS_OPT_BYTES     11 /* root name, type, class, ttl, rdlength */

#define FLAG_QR 0x80 /* byte 2 */
#define FLAG_TC 0x02 /* byte 2 */
#define FLAG_RD 0x01 /* byte 2 */
#define FLAG_RA 0x80 /* byte 3 */

static uint16_t get16(const uint8_t *p) {
    return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static uint8_t lower(uint8_t c) {
    return (c >= 'A' && c <= 'Z') ? (uint8_t)(c - 'A' + 'a') : c;
}

static bool name_char_ok(uint8_t c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Read the name at off; its bytes must lie below len. *ret_end is the offset
 * just past the name where it sits (after its first pointer, or after its
 * root label). out receives the lower-cased presentation form; *ret_clean
 * says whether every label byte passed the character rule (out is only
 * meaningful then). Structural faults (bounds, label types, pointers,
 * length) are -EBADMSG.
 *
 * A pointer's target must lie below the start of the run of labels the
 * pointer ends, and the run it starts must end (with a root label or another
 * pointer) below that start as well: every byte of a name then lies between
 * the header and the name's own end, as it does when a compressor points to
 * names it wrote earlier. A reply that keeps a prefix of the message thus
 * keeps every byte its names are made of. */
static int name_read(const uint8_t *msg, size_t len, size_t off, bool allow_ptr,
                     char out[DNS_NAME_MAX], size_t *ret_end, bool *ret_clean) {
    size_t pos = off, run_start = off, bound = len, end = 0, wire = 1 /* the root byte */, o = 0;
    unsigned ptrs = 0;
    bool clean = true;

    for (;;) {
        if (pos >= bound)
            return -EBADMSG;
        uint8_t c = msg[pos];
        if ((c & 0xC0) == 0xC0) {
            if (!allow_ptr || bound - pos < 2)
                return -EBADMSG;
            size_t target = (size_t)(c & 0x3F) << 8 | msg[pos + 1];
            if (target < DNS_HEADER_BYTES || target >= run_start)
                return -EBADMSG;
            if (++ptrs > DNS_MAX_POINTERS)
                return -EBADMSG;
            if (end == 0)
                end = pos + 2;
            bound = run_start;
            pos = run_start = target;
            continue;
        }
        if (c & 0xC0) /* 0x40 extended, 0x80 reserved */
            return -EBADMSG;
        if (c == 0) {
            if (end == 0)
                end = pos + 1;
            break;
        }
        /* c <= 63 here. */
        wire += 1 + (size_t)c;
        if (wire > DNS_WIRE_NAME_MAX)
            return -EBADMSG;
        if ((size_t)c > bound - pos - 1)
            return -EBADMSG;
        /* wire <= 255 with the root byte counted keeps o + 1 + c <= 253. */
        if (o > 0)
            out[o++] = '.';
        for (size_t i = 1; i <= c; i++) {
            uint8_t ch = lower(msg[pos + i]);
            if (!name_char_ok(ch))
                clean = false;
            out[o++] = (char)ch;
        }
        pos += 1 + (size_t)c;
    }
    out[o] = '\0';
    *ret_end = end;
    *ret_clean = clean;
    return 0;
}

/* Check a normalised name ("" or lower-case labels of 1..63 allowed bytes
 * joined by single dots, at most 253 characters); *ret_wire is its
 * uncompressed wire length. */
static int name_check(const char *name, size_t *ret_wire) {
    size_t n = strnlen(name, DNS_NAME_MAX);
    size_t label = 0;

    if (n >= DNS_NAME_MAX)
        return -EINVAL;
    if (n == 0) {
        *ret_wire = 1;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)name[i];
        if (c == '.') {
            if (label == 0)
                return -EINVAL;
            label = 0;
            continue;
        }
        if (!name_char_ok(c) || ++label > DNS_LABEL_MAX)
            return -EINVAL;
    }
    if (label == 0) /* trailing dot */
        return -EINVAL;
    *ret_wire = n + 2; /* one length byte per label in place of the dots, plus two ends */
    return 0;
}

static void name_write(const char *name, uint8_t *p) {
    size_t o = 0;
    const char *s = name;

    while (*s) {
        const char *dot = strchr(s, '.');
        size_t l = dot ? (size_t)(dot - s) : strlen(s);
        p[o++] = (uint8_t)l;
        memcpy(p + o, s, l);
        o += l;
        s += l;
        if (*s == '.')
            s++;
    }
    p[o] = 0;
}

static void opt_write(uint8_t *p) {
    p[0] = 0; /* root */
    put16(p + 1, DNS_TYPE_OPT);
    put16(p + 3, DNS_EDNS_MAX);
    memset(p + 5, 0, 6); /* extended rcode 0, version 0, flags 0, rdlength 0 */
}

int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *ret) {
    struct dns_query q = {0};
    size_t off, end;
    bool clean;
    int r;

    if (len < DNS_HEADER_BYTES || (msg[2] & FLAG_QR))
        return -EINVAL;
    uint8_t opcode = (msg[2] >> 3) & 0x0F;
    uint16_t qd = get16(msg + 4), an = get16(msg + 6), ns = get16(msg + 8), ar = get16(msg + 10);
    if (qd != 1 || an != 0 || ns != 0 || ar > 1)
        return -EBADMSG;

    q.id = get16(msg);
    q.rd = msg[2] & FLAG_RD;
    q.udp_size = DNS_UDP_MAX;
    /* Nothing precedes the question for a pointer to reach. */
    r = name_read(msg, len, DNS_HEADER_BYTES, false, q.name, &end, &clean);
    if (r < 0)
        return r;
    if (!clean || len - end < 4)
        return -EBADMSG;
    q.qtype = get16(msg + end);
    q.qclass = get16(msg + end + 2);
    off = end + 4;
    q.question_len = off - DNS_HEADER_BYTES;

    if (ar == 1) {
        /* The OPT pseudo-record: root name, no pointer. */
        if (len - off < DNS_OPT_BYTES || msg[off] != 0 || get16(msg + off + 1) != DNS_TYPE_OPT)
            return -EBADMSG;
        uint16_t size = get16(msg + off + 3);
        uint16_t rdlen = get16(msg + off + 9);
        off += DNS_OPT_BYTES;
        if (len - off < rdlen)
            return -EBADMSG;
        off += rdlen;
        q.edns = true;
        q.udp_size = size < DNS_UDP_MAX ? DNS_UDP_MAX : size > DNS_EDNS_MAX ? DNS_EDNS_MAX : size;
    }
    if (off != len)
        return -EBADMSG;

    /* Well formed, but not something we serve: *ret is filled all the same
     * so that the NOTIMP reply can echo the question (see the header). */
    *ret = q;
    if (opcode != 0 || q.qclass != DNS_CLASS_IN)
        return -EPROTONOSUPPORT;
    return 0;
}

struct rr {
    size_t owner_off;
    uint16_t type, cls;
    uint32_t ttl;
    size_t rdata;
    uint16_t rdlen;
};

/* Where the name at off ends in place, without following its pointer: for
 * the passes after the first walk, which has read every name in full. */
static int name_skip(const uint8_t *msg, size_t len, size_t off, size_t *ret_end) {
    for (size_t pos = off; pos < len;) {
        uint8_t c = msg[pos];
        if ((c & 0xC0) == 0xC0) {
            if (len - pos < 2)
                return -EBADMSG;
            *ret_end = pos + 2;
            return 0;
        }
        if (c & 0xC0)
            return -EBADMSG;
        if (c == 0) {
            *ret_end = pos + 1;
            return 0;
        }
        pos += 1 + (size_t)c;
    }
    return -EBADMSG;
}

/* Read the record at *off and move *off past it. With owner, its name is read
 * in full (and checked); without, only skipped. */
static int rr_read(const uint8_t *msg, size_t len, size_t *off, struct rr *rr,
                   char owner[DNS_NAME_MAX], bool *ret_clean) {
    size_t end;
    int r = owner ? name_read(msg, len, *off, true, owner, &end, ret_clean)
                  : name_skip(msg, len, *off, &end);
    if (r < 0)
        return r;
    if (len - end < 10)
        return -EBADMSG;
    rr->owner_off = *off;
    rr->type = get16(msg + end);
    rr->cls = get16(msg + end + 2);
    rr->ttl = get32(msg + end + 4);
    rr->rdlen = get16(msg + end + 8);
    rr->rdata = end + 10;
    if (len - rr->rdata < rr->rdlen)
        return -EBADMSG;
    *off = rr->rdata + rr->rdlen;
    return 0;
}

/* Whether the record's owner passes the character rule and is one of names. */
static bool rr_owner_in(const uint8_t *msg, size_t len, const struct rr *rr,
                        char names[][DNS_NAME_MAX], size_t n) {
    char owner[DNS_NAME_MAX];
    size_t end;
    bool clean;

    if (name_read(msg, len, rr->owner_off, true, owner, &end, &clean) < 0 || !clean)
        return false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], owner) == 0)
            return true;
    return false;
}

/* A CNAME's rdata: exactly one name. */
static int rr_cname_target(const uint8_t *msg, const struct rr *rr, char out[DNS_NAME_MAX],
                           bool *ret_clean) {
    size_t end;
    /* Bound the read by the rdata, so the name cannot run on past it. */
    int r = name_read(msg, rr->rdata + rr->rdlen, rr->rdata, true, out, &end, ret_clean);
    if (r < 0)
        return r;
    if (end != rr->rdata + rr->rdlen)
        return -EBADMSG;
    return 0;
}

/* RFC 2181 section 8: a TTL with the top bit set is read as zero. */
static uint32_t ttl_value(uint32_t ttl) {
    return (ttl & 0x80000000u) ? 0 : ttl;
}

int dns_parse_answer(const uint8_t *msg, size_t len, uint16_t id, uint16_t qtype,
                     const char *name, struct dns_answer *ret) {
    struct dns_answer a = {0};
    struct rr rr;
    char chain[DNS_CHAIN_STEPS + 1][DNS_NAME_MAX], scratch[DNS_NAME_MAX];
    size_t n_chain = 1, off, end;
    uint32_t min_ttl = UINT32_MAX;
    bool clean;
    int r;

    /* The id first: bytes from someone who does not know it are not ours,
     * whatever else is wrong with them, and must not end the wait for the
     * resolver's answer as a malformed one would. */
    if (len >= 2 && get16(msg) != id)
        return -ESRCH;
    if (len < DNS_HEADER_BYTES || !(msg[2] & FLAG_QR) || ((msg[2] >> 3) & 0x0F) != 0)
        return -EBADMSG;
    uint16_t qd = get16(msg + 4), an = get16(msg + 6), ns = get16(msg + 8), ar = get16(msg + 10);
    if (qd != 1)
        return -ESRCH;

    a.id = id;
    a.tc = msg[2] & FLAG_TC;
    a.rcode = msg[3] & 0x0F;
    a.ancount = an;
    a.nscount = ns;
    /* The question sits at offset 12, where no pointer can be valid, so it
     * is uncompressed and as long as ours in wire form. */
    r = name_read(msg, len, DNS_HEADER_BYTES, true, a.name, &end, &clean);
    if (r < 0)
        return r;
    if (len - end < 4)
        return -EBADMSG;
    if (!clean || strcmp(a.name, name) != 0 || get16(msg + end) != qtype ||
        get16(msg + end + 2) != DNS_CLASS_IN)
        return -ESRCH;
    a.qtype = qtype;
    a.question_end = off = end + 4;

    /* Walk every record once: bounds, names, and the rdata we read later. */
    for (uint32_t i = 0; i < (uint32_t)an + ns + ar; i++) {
        if (i == (uint32_t)an + ns)
            a.authority_end = off;
        r = rr_read(msg, len, &off, &rr, scratch, &clean);
        if (r < 0)
            return r;
        if (rr.cls != DNS_CLASS_IN)
            continue;
        if ((rr.type == DNS_TYPE_A && rr.rdlen != 4) ||
            (rr.type == DNS_TYPE_AAAA && rr.rdlen != 16))
            return -EBADMSG;
        if (rr.type == DNS_TYPE_CNAME) {
            r = rr_cname_target(msg, &rr, scratch, &clean);
            if (r < 0)
                return r;
        }
    }
    if (ar == 0)
        a.authority_end = off;
    if (off != len)
        return -EBADMSG;

    /* The CNAME chain from the question's name. A CNAME moves the current
     * name when its owner is that name; records may come in any order, so
     * scan again while a scan moved it, at most DNS_CHAIN_STEPS steps. */
    memcpy(chain[0], a.name, sizeof(chain[0]));
    for (bool moved = true; moved && n_chain <= DNS_CHAIN_STEPS;) {
        moved = false;
        off = a.question_end;
        for (uint16_t i = 0; i < an && n_chain <= DNS_CHAIN_STEPS; i++) {
            r = rr_read(msg, len, &off, &rr, NULL, NULL);
            if (r < 0)
                return r;
            if (rr.type != DNS_TYPE_CNAME || rr.cls != DNS_CLASS_IN ||
                !rr_owner_in(msg, len, &rr, &chain[n_chain - 1], 1))
                continue;
            r = rr_cname_target(msg, &rr, chain[n_chain], &clean);
            if (r < 0)
                return r;
            /* A target we would have to compare but cannot: refuse. */
            if (!clean)
                return -EBADMSG;
            n_chain++;
            if (ttl_value(rr.ttl) < min_ttl)
                min_ttl = ttl_value(rr.ttl);
            moved = true;
        }
    }

    /* The addresses of any name on the chain. */
    uint16_t want = qtype == DNS_TYPE_A ? DNS_TYPE_A : qtype == DNS_TYPE_AAAA ? DNS_TYPE_AAAA : 0;
    off = a.question_end;
    for (uint16_t i = 0; i < an && want != 0; i++) {
        r = rr_read(msg, len, &off, &rr, NULL, NULL);
        if (r < 0)
            return r;
        if (rr.type != want || rr.cls != DNS_CLASS_IN ||
            !rr_owner_in(msg, len, &rr, chain, n_chain))
            continue;
        if (a.n_addrs == DNS_ANSWER_ADDRS) {
            a.n_addrs_dropped++;
            continue;
        }
        struct dns_addr *d = &a.addrs[a.n_addrs++];
        d->family = want == DNS_TYPE_A ? AF_INET : AF_INET6;
        memcpy(d->addr, msg + rr.rdata, rr.rdlen);
        if (ttl_value(rr.ttl) < min_ttl)
            min_ttl = ttl_value(rr.ttl);
    }
    a.min_ttl = min_ttl == UINT32_MAX ? 0 : min_ttl;

    *ret = a;
    return 0;
}

int dns_build_query(uint16_t id, const char *name, uint16_t qtype, uint8_t *buf, size_t cap,
                    size_t *ret_len) {
    size_t wire, n;
    int r = name_check(name, &wire);
    if (r < 0)
        return r;
    n = DNS_HEADER_BYTES + wire + 4 + DNS_OPT_BYTES;
    if (cap < n)
        return -ENOSPC;

    memset(buf, 0, DNS_HEADER_BYTES);
    put16(buf, id);
    buf[2] = FLAG_RD;
    put16(buf + 4, 1);  /* qdcount */
    put16(buf + 10, 1); /* arcount: the OPT */
    name_write(name, buf + DNS_HEADER_BYTES);
    put16(buf + DNS_HEADER_BYTES + wire, qtype);
    put16(buf + DNS_HEADER_BYTES + wire + 2, DNS_CLASS_IN);
    opt_write(buf + DNS_HEADER_BYTES + wire + 4);
    *ret_len = n;
    return 0;
}

/* Header, the agent's question and q's OPT with no records between: the
 * reply both builders fall back on. */
static int reply_empty(const struct dns_query *q, const uint8_t *query, size_t query_len,
                       uint8_t rcode, bool tc, uint8_t *buf, size_t cap, size_t *ret_len) {
    /* question_len came from parsing query: at least a root byte plus type
     * and class, inside the message. Check it anyway, the caller could pair
     * the wrong q and bytes. */
    if (rcode > 0x0F || query_len < DNS_HEADER_BYTES || q->question_len < 5 ||
        q->question_len > query_len - DNS_HEADER_BYTES)
        return -EINVAL;
    size_t n = DNS_HEADER_BYTES + q->question_len + (q->edns ? DNS_OPT_BYTES : 0);
    if (cap < n)
        return -ENOSPC;

    memset(buf, 0, DNS_HEADER_BYTES);
    put16(buf, q->id);
    /* The opcode is echoed: it is 0 unless this is a NOTIMP for another one. */
    buf[2] = (uint8_t)(FLAG_QR | (query[2] & 0x78) | (q->rd ? FLAG_RD : 0) | (tc ? FLAG_TC : 0));
    buf[3] = (uint8_t)(FLAG_RA | rcode);
    put16(buf + 4, 1);
    put16(buf + 10, q->edns ? 1 : 0);
    memcpy(buf + DNS_HEADER_BYTES, query + DNS_HEADER_BYTES, q->question_len);
    if (q->edns)
        opt_write(buf + DNS_HEADER_BYTES + q->question_len);
    *ret_len = n;
    return 0;
}

int dns_build_reply_empty(const struct dns_query *q, const uint8_t *query, size_t query_len,
                          uint8_t rcode, uint8_t *buf, size_t cap, size_t *ret_len) {
    return reply_empty(q, query, query_len, rcode, false, buf, cap, ret_len);
}

int dns_build_reply_from(const struct dns_query *q, const uint8_t *query, size_t query_len,
                         const struct dns_answer *a, const uint8_t *ans, size_t ans_len,
                         size_t limit, uint8_t *buf, size_t cap, size_t *ret_len) {
    /* The sections are copied to the same offsets they had upstream, so their
     * pointers (all below their own position and at or past the header, as
     * dns_parse_answer checked) land on the agent's question where they landed
     * on the resolver's: the same name and type, differing at most in the
     * case of letters, which reads the same. */
    if (a->question_end < DNS_HEADER_BYTES ||
        a->question_end - DNS_HEADER_BYTES != q->question_len ||
        a->authority_end < a->question_end || a->authority_end > ans_len ||
        a->qtype != q->qtype || strcmp(a->name, q->name) != 0)
        return -EINVAL;
    size_t body = a->authority_end - a->question_end;
    size_t n = DNS_HEADER_BYTES + q->question_len + body + (q->edns ? DNS_OPT_BYTES : 0);
    if (n > limit || n > DNS_MSG_MAX)
        return reply_empty(q, query, query_len, a->rcode, true, buf, cap, ret_len);
    if (cap < n)
        return -ENOSPC;

    size_t head;
    int r = reply_empty(q, query, query_len, a->rcode, a->tc, buf, cap, &head);
    if (r < 0)
        return r;
    put16(buf + 6, a->ancount);
    put16(buf + 8, a->nscount);
    if (q->edns) /* move the OPT reply_empty wrote to after the sections */
        memmove(buf + n - DNS_OPT_BYTES, buf + DNS_HEADER_BYTES + q->question_len, DNS_OPT_BYTES);
    memcpy(buf + DNS_HEADER_BYTES + q->question_len, ans + a->question_end, body);
    *ret_len = n;
    return 0;
}

int dns_build_reply_addrs(const struct dns_query *q, const uint8_t *query, size_t query_len,
                          const struct dns_addr *addrs, size_t n_addrs, uint32_t ttl,
                          size_t limit, uint8_t *buf, size_t cap, size_t *ret_len) {
    size_t rdlen = q->qtype == DNS_TYPE_A ? 4 : 16;
    int family = q->qtype == DNS_TYPE_A ? AF_INET : AF_INET6;
    if ((q->qtype != DNS_TYPE_A && q->qtype != DNS_TYPE_AAAA) || n_addrs > DNS_ANSWER_ADDRS ||
        ttl > 0x7fffffffu)
        return -EINVAL;
    for (size_t i = 0; i < n_addrs; i++)
        if (addrs[i].family != family)
            return -EINVAL;
    /* each record: a pointer to the question's name, type, class, ttl, rdata */
    size_t rr = 2 + 10 + rdlen;
    size_t n = DNS_HEADER_BYTES + q->question_len + n_addrs * rr + (q->edns ? DNS_OPT_BYTES : 0);
    if (n > limit || n > DNS_MSG_MAX)
        return reply_empty(q, query, query_len, DNS_RCODE_NOERROR, true, buf, cap, ret_len);
    if (cap < n)
        return -ENOSPC;
    size_t head;
    int r = reply_empty(q, query, query_len, DNS_RCODE_NOERROR, false, buf, cap, &head);
    if (r < 0)
        return r;
    put16(buf + 6, (uint16_t)n_addrs);
    uint8_t *p = buf + DNS_HEADER_BYTES + q->question_len;
    if (q->edns)
        memmove(buf + n - DNS_OPT_BYTES, p, DNS_OPT_BYTES);
    for (size_t i = 0; i < n_addrs; i++) {
        put16(p, 0xc000 | DNS_HEADER_BYTES);
        put16(p + 2, q->qtype);
        put16(p + 4, DNS_CLASS_IN);
        put16(p + 6, (uint16_t)(ttl >> 16));
        put16(p + 8, (uint16_t)ttl);
        put16(p + 10, (uint16_t)rdlen);
        memcpy(p + 12, addrs[i].addr, rdlen);
        p += rr;
    }
    *ret_len = n;
    return 0;
}

const char *dns_type_name(uint16_t type, char *buf, size_t len) {
    static const struct {
        uint16_t type;
        const char *name;
    } names[] = {
        {1, "A"},       {2, "NS"},     {5, "CNAME"},  {6, "SOA"},     {12, "PTR"},
        {15, "MX"},     {16, "TXT"},   {28, "AAAA"},  {33, "SRV"},    {35, "NAPTR"},
        {41, "OPT"},    {43, "DS"},    {46, "RRSIG"}, {48, "DNSKEY"}, {64, "SVCB"},
        {65, "HTTPS"},  {255, "ANY"},  {257, "CAA"},
    };

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].type == type)
            return names[i].name;
    snprintf(buf, len, "TYPE%u", (unsigned)type);
    return buf;
}
