/* The internal messages' codec and socket I/O (see pmsg.h).
 *
 * Owns the byte layout of every message between the two lyhd processes. It
 * must never trust a length it has not checked, never accept a field out of
 * range, and never leave bytes unread: the parent runs these decoders on
 * what a possibly compromised protocol process sent. fuzz/fuzz_pmsg.c feeds
 * every decoder arbitrary bytes and encodes what they accept again. */
#include "daemon/pmsg.h"

#include "platform/linux/unixsock.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/dns_name.h"
#include "common/lyh_limits.h"
#include "common/macros.h"
#include "daemon/bytes.h"
#include "platform/ifaces.h"

/* ---- writing ------------------------------------------------------------------------- */

/* A string of at most max-1 bytes (so that it fits max with its NUL). */
static int put_str(struct bw *w, const char *s, size_t max) {
    size_t n = strnlen(s, max);
    if (n >= max || n > 255)
        return -EINVAL;
    bw_put8(w, (uint8_t)n);
    bw_put(w, s, n);
    return 0;
}
static int put_addr(struct bw *w, const struct pmsg_addr *a) {
    if (a->family != AF_INET && a->family != AF_INET6)
        return -EINVAL;
    bw_put8(w, a->family == AF_INET ? 4 : 6);
    bw_put(w, a->addr, a->family == AF_INET ? 4 : 16);
    return 0;
}

static void begin(struct bw *w, uint8_t *buf, size_t cap, uint16_t type) {
    *w = (struct bw){.p = buf, .cap = cap};
    bw_put16(w, type);
    bw_put16(w, PMSG_VERSION);
    bw_put32(w, 0); /* the payload's length, set by finish */
}

static int finish(struct bw *w, int r, size_t *ret_len) {
    if (r < 0)
        return r;
    if (w->bad || w->off > PMSG_MAX_BYTES)
        return -ENOBUFS;
    uint32_t n = (uint32_t)(w->off - PMSG_HDR_BYTES);
    w->p[4] = (uint8_t)(n >> 24), w->p[5] = (uint8_t)(n >> 16), w->p[6] = (uint8_t)(n >> 8),
    w->p[7] = (uint8_t)n;
    *ret_len = w->off;
    return 0;
}

/* ---- reading ------------------------------------------------------------------------- */

/* A string into out (max bytes with the NUL): no NUL inside, not longer. */
static void get_str(struct br *r, char *out, size_t max) {
    uint8_t n = br_get8(r);
    const uint8_t *b = br_take(r, n);
    out[0] = '\0';
    if (!b || n >= max || memchr(b, '\0', n)) {
        r->bad = true;
        return;
    }
    memcpy(out, b, n);
    out[n] = '\0';
}
static void get_bool(struct br *r, bool *out) {
    uint8_t v = br_get8(r);
    if (v > 1)
        r->bad = true;
    *out = v == 1;
}
static void get_addr(struct br *r, struct pmsg_addr *a) {
    uint8_t f = br_get8(r);
    memset(a, 0, sizeof(*a));
    if (f != 4 && f != 6) {
        r->bad = true;
        return;
    }
    a->family = f == 4 ? AF_INET : AF_INET6;
    const uint8_t *b = br_take(r, f == 4 ? 4 : 16);
    if (b)
        memcpy(a->addr, b, f == 4 ? 4 : 16);
}
static void get_id(struct br *r, char out[PMSG_ID_LEN + 1]) {
    get_str(r, out, PMSG_ID_LEN + 1);
    if (!r->bad && !pmsg_id_ok(out))
        r->bad = true;
}
static int done(const struct br *r) { return r->bad || r->off != r->len ? -EBADMSG : 0; }

bool pmsg_id_ok(const char *s) {
    for (size_t i = 0; i < PMSG_ID_LEN; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[PMSG_ID_LEN] == '\0';
}

/* A DNS name as dns_msg.h keeps it: [a-z0-9_-] labels joined by single
 * dots, no dot at either end ("" is the root). */
static bool name_ok(const char *n) {
    size_t len = strlen(n);
    if (len == 0)
        return true;
    if (len >= DNS_NAME_MAX || n[0] == '.' || n[len - 1] == '.')
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = n[i];
        if (c == '.' ? n[i + 1] == '.'
                     : !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return false;
    }
    return true;
}

int pmsg_header(const uint8_t *buf, size_t len, uint16_t *ret_type, const uint8_t **ret_payload,
                size_t *ret_payload_len) {
    struct br r = {.p = buf, .len = len};
    uint16_t type = br_get16(&r), version = br_get16(&r);
    uint32_t n = br_get32(&r);
    if (r.bad || len > PMSG_MAX_BYTES || version != PMSG_VERSION || n != len - PMSG_HDR_BYTES)
        return -EBADMSG;
    *ret_type = type;
    *ret_payload = buf + PMSG_HDR_BYTES;
    *ret_payload_len = n;
    return 0;
}

/* ---- the messages -------------------------------------------------------------------- */

int pmsg_encode_ready(const struct pmsg_ready *m, uint8_t *buf, size_t cap, size_t *ret_len) {
    struct bw w;
    begin(&w, buf, cap, PMSG_READY);
    bw_put32(&w, m->pid);
    return finish(&w, 0, ret_len);
}

int pmsg_decode_ready(const uint8_t *p, size_t len, struct pmsg_ready *ret) {
    struct br r = {.p = p, .len = len};
    struct pmsg_ready m = {.pid = br_get32(&r)};
    if (done(&r) < 0)
        return -EBADMSG;
    *ret = m;
    return 0;
}

static int family_of(uint16_t qtype) {
    return qtype == DNS_TYPE_A ? AF_INET : qtype == DNS_TYPE_AAAA ? AF_INET6 : -1;
}

int pmsg_encode_dns_answer(const struct pmsg_dns_answer *m, uint8_t *buf, size_t cap,
                           size_t *ret_len) {
    struct bw w;
    int r = 0;
    if (!pmsg_id_ok(m->session) || !name_ok(m->name) || family_of(m->qtype) < 0 ||
        m->n_addrs > DNS_ANSWER_ADDRS)
        return -EINVAL;
    begin(&w, buf, cap, PMSG_DNS_ANSWER);
    bw_put32(&w, m->req);
    put_str(&w, m->session, PMSG_ID_LEN + 1);
    put_str(&w, m->name, DNS_NAME_MAX);
    bw_put8(&w, m->want_reply);
    bw_put16(&w, m->qtype);
    bw_put32(&w, m->ttl);
    bw_put8(&w, m->n_addrs);
    for (size_t i = 0; i < m->n_addrs && r == 0; i++)
        r = m->addrs[i].family == family_of(m->qtype) ? put_addr(&w, &m->addrs[i]) : -EINVAL;
    return finish(&w, r, ret_len);
}

int pmsg_decode_dns_answer(const uint8_t *p, size_t len, struct pmsg_dns_answer *ret) {
    struct br r = {.p = p, .len = len};
    struct pmsg_dns_answer m;
    memset(&m, 0, sizeof(m));
    m.req = br_get32(&r);
    get_id(&r, m.session);
    get_str(&r, m.name, DNS_NAME_MAX);
    get_bool(&r, &m.want_reply);
    m.qtype = br_get16(&r);
    m.ttl = br_get32(&r);
    m.n_addrs = br_get8(&r);
    if (r.bad || !name_ok(m.name) || family_of(m.qtype) < 0 || m.n_addrs > DNS_ANSWER_ADDRS)
        return -EBADMSG;
    for (size_t i = 0; i < m.n_addrs; i++) {
        get_addr(&r, &m.addrs[i]);
        if (!r.bad && m.addrs[i].family != family_of(m.qtype))
            return -EBADMSG;
    }
    if (done(&r) < 0)
        return -EBADMSG;
    *ret = m;
    return 0;
}

int pmsg_encode_dns_record(const struct pmsg_dns_record *m, uint8_t *buf, size_t cap,
                           size_t *ret_len) {
    struct bw w;
    int r = 0;
    if (!pmsg_id_ok(m->session) || m->action > PDNS_ACTION_MAX || !name_ok(m->name) ||
        m->n_addrs > DNS_ANSWER_ADDRS)
        return -EINVAL;
    begin(&w, buf, cap, PMSG_DNS_RECORD);
    put_str(&w, m->session, PMSG_ID_LEN + 1);
    bw_put8(&w, m->action);
    bw_put8(&w, m->rcode);
    bw_put16(&w, m->qtype);
    bw_put8(&w, m->via_tcp);
    bw_put8(&w, m->resolver);
    bw_put16(&w, m->n_kept_out);
    bw_put32(&w, m->ttl);
    bw_put32(&w, m->dropped_inflight);
    bw_put32(&w, m->unsent);
    put_str(&w, m->name, DNS_NAME_MAX);
    bw_put8(&w, m->n_addrs);
    for (size_t i = 0; i < m->n_addrs && r == 0; i++)
        r = put_addr(&w, &m->addrs[i]);
    return finish(&w, r, ret_len);
}

int pmsg_decode_dns_record(const uint8_t *p, size_t len, struct pmsg_dns_record *ret) {
    struct br r = {.p = p, .len = len};
    struct pmsg_dns_record m;
    memset(&m, 0, sizeof(m));
    get_id(&r, m.session);
    m.action = br_get8(&r);
    m.rcode = br_get8(&r);
    m.qtype = br_get16(&r);
    get_bool(&r, &m.via_tcp);
    m.resolver = br_get8(&r);
    m.n_kept_out = br_get16(&r);
    m.ttl = br_get32(&r);
    m.dropped_inflight = br_get32(&r);
    m.unsent = br_get32(&r);
    get_str(&r, m.name, DNS_NAME_MAX);
    m.n_addrs = br_get8(&r);
    if (r.bad || m.action > PDNS_ACTION_MAX || m.rcode > 15 || !name_ok(m.name) ||
        m.n_addrs > DNS_ANSWER_ADDRS || (m.resolver >= PMSG_RESOLVERS && m.resolver != 0xff))
        return -EBADMSG;
    for (size_t i = 0; i < m.n_addrs; i++)
        get_addr(&r, &m.addrs[i]);
    if (done(&r) < 0)
        return -EBADMSG;
    *ret = m;
    return 0;
}

/* n NUL-terminated patterns packed in buf (len bytes), each shorter than max. */
static bool packed_ok(const char *buf, size_t len, size_t n, size_t max) {
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const char *end = memchr(buf + off, '\0', len - off);
        if (!end || (size_t)(end - (buf + off)) + 1 > max || end == buf + off)
            return false;
        off = (size_t)(end - buf) + 1;
    }
    return off == len;
}

int pmsg_encode_dns_start(const struct pmsg_dns_start *m, uint8_t *buf, size_t cap,
                          size_t *ret_len) {
    struct bw w;
    int r = 0;
    if (!pmsg_id_ok(m->session) || !ifc_name_supported(m->iface) || m->fd_mask > 15 ||
        m->n_resolvers == 0 || m->n_resolvers > PMSG_RESOLVERS || m->n_domains > PMSG_DOMAINS ||
        m->domains_len > PMSG_DOMAIN_BYTES ||
        !packed_ok(m->domains, m->domains_len, m->n_domains, DNS_PATTERN_MAX))
        return -EINVAL;
    begin(&w, buf, cap, PMSG_DNS_START);
    put_str(&w, m->session, PMSG_ID_LEN + 1);
    put_str(&w, m->iface, PMSG_IFNAME_MAX);
    bw_put8(&w, m->fd_mask);
    bw_put8(&w, m->n_resolvers);
    for (size_t i = 0; i < m->n_resolvers && r == 0; i++)
        r = put_addr(&w, &m->resolvers[i]);
    bw_put8(&w, m->n_domains);
    bw_put16(&w, (uint16_t)m->domains_len);
    bw_put(&w, m->domains, m->domains_len);
    return finish(&w, r, ret_len);
}

int pmsg_decode_dns_start(const uint8_t *p, size_t len, struct pmsg_dns_start *ret) {
    struct br r = {.p = p, .len = len};
    struct pmsg_dns_start m;
    memset(&m, 0, sizeof(m));
    get_id(&r, m.session);
    get_str(&r, m.iface, PMSG_IFNAME_MAX);
    m.fd_mask = br_get8(&r);
    m.n_resolvers = br_get8(&r);
    if (r.bad || !ifc_name_supported(m.iface) || m.fd_mask > 15 || m.n_resolvers == 0 ||
        m.n_resolvers > PMSG_RESOLVERS)
        return -EBADMSG;
    for (size_t i = 0; i < m.n_resolvers; i++)
        get_addr(&r, &m.resolvers[i]);
    m.n_domains = br_get8(&r);
    m.domains_len = br_get16(&r);
    if (r.bad || m.n_domains > PMSG_DOMAINS || m.domains_len > PMSG_DOMAIN_BYTES)
        return -EBADMSG;
    const uint8_t *d = br_take(&r, m.domains_len);
    if (!d)
        return -EBADMSG;
    memcpy(m.domains, d, m.domains_len);
    if (!packed_ok(m.domains, m.domains_len, m.n_domains, DNS_PATTERN_MAX) || done(&r) < 0)
        return -EBADMSG;
    *ret = m;
    return 0;
}

int pmsg_encode_dns_stop(const struct pmsg_dns_stop *m, uint8_t *buf, size_t cap,
                         size_t *ret_len) {
    struct bw w;
    if (!pmsg_id_ok(m->session))
        return -EINVAL;
    begin(&w, buf, cap, PMSG_DNS_STOP);
    put_str(&w, m->session, PMSG_ID_LEN + 1);
    return finish(&w, 0, ret_len);
}

int pmsg_decode_dns_stop(const uint8_t *p, size_t len, struct pmsg_dns_stop *ret) {
    struct br r = {.p = p, .len = len};
    struct pmsg_dns_stop m;
    get_id(&r, m.session);
    if (done(&r) < 0)
        return -EBADMSG;
    *ret = m;
    return 0;
}

int pmsg_encode_dns_policy(const struct pmsg_dns_policy *m, uint8_t *buf, size_t cap,
                           size_t *ret_len) {
    struct bw w;
    int r = 0;
    if (m->n_deny > PMSG_POLICY_DOMAINS || m->n_ceiling > PMSG_POLICY_DOMAINS)
        return -EINVAL;
    begin(&w, buf, cap, PMSG_DNS_POLICY);
    bw_put8(&w, m->n_deny);
    for (size_t i = 0; i < m->n_deny && r == 0; i++)
        r = m->deny[i][0] ? put_str(&w, m->deny[i], PMSG_PATTERN_MAX) : -EINVAL;
    bw_put8(&w, m->n_ceiling);
    for (size_t i = 0; i < m->n_ceiling && r == 0; i++)
        r = m->ceiling[i][0] ? put_str(&w, m->ceiling[i], PMSG_PATTERN_MAX) : -EINVAL;
    return finish(&w, r, ret_len);
}

int pmsg_decode_dns_policy(const uint8_t *p, size_t len, struct pmsg_dns_policy *ret) {
    struct br r = {.p = p, .len = len};
    struct pmsg_dns_policy *m = ret, tmp;
    memset(&tmp, 0, sizeof(tmp));
    tmp.n_deny = br_get8(&r);
    if (tmp.n_deny > PMSG_POLICY_DOMAINS)
        return -EBADMSG;
    for (size_t i = 0; i < tmp.n_deny && !r.bad; i++)
        get_str(&r, tmp.deny[i], PMSG_PATTERN_MAX), r.bad |= !tmp.deny[i][0];
    tmp.n_ceiling = br_get8(&r);
    if (tmp.n_ceiling > PMSG_POLICY_DOMAINS)
        return -EBADMSG;
    for (size_t i = 0; i < tmp.n_ceiling && !r.bad; i++)
        get_str(&r, tmp.ceiling[i], PMSG_PATTERN_MAX), r.bad |= !tmp.ceiling[i][0];
    if (done(&r) < 0)
        return -EBADMSG;
    *m = tmp;
    return 0;
}

int pmsg_encode_dns_answered(const struct pmsg_dns_answered *m, uint8_t *buf, size_t cap,
                             size_t *ret_len) {
    struct bw w;
    if (m->status > 0)
        return -EINVAL;
    begin(&w, buf, cap, PMSG_DNS_ANSWERED);
    bw_put32(&w, m->req);
    bw_put32(&w, (uint32_t)m->status);
    return finish(&w, 0, ret_len);
}

int pmsg_decode_dns_answered(const uint8_t *p, size_t len, struct pmsg_dns_answered *ret) {
    struct br r = {.p = p, .len = len};
    struct pmsg_dns_answered m = {.req = br_get32(&r)};
    m.status = (int32_t)br_get32(&r);
    if (done(&r) < 0 || m.status > 0)
        return -EBADMSG;
    *ret = m;
    return 0;
}

/* ---- the socket ---------------------------------------------------------------------- */

int pmsg_send(int sock, const uint8_t *buf, size_t len, const int *fds, size_t nfds) {
    if (nfds > PMSG_MAX_FDS || len > PMSG_MAX_BYTES)
        return -EINVAL;
    ssize_t n = unixsock_send_fds(sock, buf, len, fds, nfds, MSG_DONTWAIT);
    if (n == (ssize_t)len)
        return 0;
    return n >= 0 ? -EIO /* a seqpacket datagram is sent whole or not at all */ : -errno;
}

void pmsg_close_fds(const int *fds, size_t n) {
    static const struct linger now = {.l_onoff = 1, .l_linger = 0};
    for (size_t i = 0; i < n; i++) {
        (void)setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &now, sizeof(now)); /* not a socket: ENOTSOCK */
        close(fds[i]);
    }
}

int pmsg_recv(int sock, uint8_t *buf, size_t cap, size_t *ret_len, int *fds, size_t *ret_nfds) {
    int fl = 0;
    ssize_t n = unixsock_recv_fds(sock, buf, cap, MSG_DONTWAIT, fds, ret_nfds, &fl);

    if (n < 0)
        return -errno;
    *ret_len = (size_t)n;
    if ((fl & MSG_TRUNC) || *ret_nfds > PMSG_MAX_FDS)
        return -EBADMSG;
    if (fl & MSG_CTRUNC)
        return -EMFILE; /* the kernel had no fd numbers left for us: not all came */
    if (n == 0 && *ret_nfds == 0)
        return -EPIPE;
    return 0;
}

/* ---- flow events --------------------------------------------------------------------- */

enum { FL_TIME = 1, FL_SKUID = 2, FL_SEQ = 4, FL_PORTS = 8 };

static size_t family_len(uint8_t family) {
    return family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
}

/* Every field as the decoder requires it: one encoding per event. */
static bool flow_ok(const struct pmsg_flow *f) {
    size_t al = family_len(f->family);
    bool sid = f->origin == 1;
    static const uint8_t zero[16];
    return (f->verdict == 1 || f->verdict == 2) && f->origin >= 1 && f->origin <= 3 &&
           (sid ? pmsg_id_ok(f->session) : f->session[0] == '\0') &&
           (f->origin == 2 || f->uid == 0) && (f->has_time ? f->time_us >= 0 : f->time_us == 0) &&
           (f->has_skuid || f->skuid == 0) && (f->has_seq || f->seq == 0) &&
           (f->family == 0 || al != 0) && (al || f->protocol == 0) &&
           memcmp(f->src + al, zero, 16 - al) == 0 && memcmp(f->dst + al, zero, 16 - al) == 0 &&
           (f->has_ports ? al != 0 : f->sport == 0 && f->dport == 0);
}

int pmsg_encode_flows(const struct pmsg_flows *m, uint8_t *buf, size_t cap, size_t *ret_len) {
    struct bw w;
    if (m->n > PMSG_FLOWS_MAX)
        return -EINVAL;
    for (size_t i = 0; i < m->n; i++)
        if (!flow_ok(&m->v[i]))
            return -EINVAL;
    begin(&w, buf, cap, PMSG_FLOWS);
    bw_put32(&w, m->overruns);
    bw_put32(&w, m->bad);
    bw_put32(&w, m->unsent);
    bw_put8(&w, m->n);
    for (size_t i = 0; i < m->n; i++) {
        const struct pmsg_flow *f = &m->v[i];
        size_t al = family_len(f->family);
        bw_put8(&w, f->verdict);
        bw_put8(&w, f->origin);
        put_str(&w, f->session, PMSG_ID_LEN + 1);
        bw_put32(&w, f->uid);
        bw_put8(&w, (uint8_t)((f->has_time ? FL_TIME : 0) | (f->has_skuid ? FL_SKUID : 0) |
                              (f->has_seq ? FL_SEQ : 0) | (f->has_ports ? FL_PORTS : 0)));
        bw_put32(&w, (uint32_t)((uint64_t)f->time_us >> 32));
        bw_put32(&w, (uint32_t)f->time_us);
        bw_put32(&w, f->skuid);
        bw_put32(&w, f->seq);
        bw_put32(&w, f->oif);
        bw_put8(&w, (uint8_t)(al == 4 ? 4 : al == 16 ? 6 : 0));
        bw_put8(&w, f->protocol);
        bw_put(&w, f->src, al);
        bw_put(&w, f->dst, al);
        bw_put16(&w, f->sport);
        bw_put16(&w, f->dport);
    }
    return finish(&w, 0, ret_len);
}

int pmsg_decode_flows(const uint8_t *p, size_t len, struct pmsg_flows *ret) {
    struct br r = {.p = p, .len = len};
    ret->overruns = br_get32(&r);
    ret->bad = br_get32(&r);
    ret->unsent = br_get32(&r);
    ret->n = br_get8(&r);
    if (r.bad || ret->n > PMSG_FLOWS_MAX)
        return -EBADMSG;
    for (size_t i = 0; i < ret->n && !r.bad; i++) {
        struct pmsg_flow *f = &ret->v[i];
        memset(f, 0, sizeof(*f));
        f->verdict = br_get8(&r);
        f->origin = br_get8(&r);
        uint8_t sl = br_get8(&r);
        const uint8_t *sb = br_take(&r, sl);
        /* no NUL inside: the string it makes must be all of those bytes
         * (one encoding per value; fuzz_pmsg found "\0..." read as "") */
        if (!sb || (sl != 0 && sl != PMSG_ID_LEN) || (sl && memchr(sb, '\0', sl)))
            return -EBADMSG;
        memcpy(f->session, sb, sl);
        f->uid = br_get32(&r);
        uint8_t flags = br_get8(&r);
        if (flags & ~(FL_TIME | FL_SKUID | FL_SEQ | FL_PORTS))
            return -EBADMSG;
        f->has_time = flags & FL_TIME;
        f->has_skuid = flags & FL_SKUID;
        f->has_seq = flags & FL_SEQ;
        f->has_ports = flags & FL_PORTS;
        uint64_t hi = br_get32(&r), lo = br_get32(&r);
        f->time_us = (int64_t)(hi << 32 | lo);
        f->skuid = br_get32(&r);
        f->seq = br_get32(&r);
        f->oif = br_get32(&r);
        uint8_t fam = br_get8(&r);
        if (fam != 0 && fam != 4 && fam != 6)
            return -EBADMSG;
        f->family = fam == 4 ? AF_INET : fam == 6 ? AF_INET6 : 0;
        f->protocol = br_get8(&r);
        br_get(&r, f->src, family_len(f->family));
        br_get(&r, f->dst, family_len(f->family));
        f->sport = br_get16(&r);
        f->dport = br_get16(&r);
        if (!r.bad && !flow_ok(f))
            return -EBADMSG;
    }
    return done(&r);
}

static bool sync_type(uint16_t type) {
    return type == PMSG_FLOWS_SYNC || type == PMSG_FLOWS_SYNCED || type == PMSG_NFLOG_START;
}

int pmsg_encode_sync(uint16_t type, const struct pmsg_sync *m, uint8_t *buf, size_t cap,
                     size_t *ret_len) {
    struct bw w;
    if (!sync_type(type) || (type == PMSG_NFLOG_START && m->id != 0))
        return -EINVAL;
    begin(&w, buf, cap, type);
    if (type != PMSG_NFLOG_START)
        bw_put32(&w, m->id);
    return finish(&w, 0, ret_len);
}

int pmsg_decode_sync(uint16_t type, const uint8_t *p, size_t len, struct pmsg_sync *ret) {
    struct br r = {.p = p, .len = len};
    if (!sync_type(type))
        return -EBADMSG;
    ret->id = type == PMSG_NFLOG_START ? 0 : br_get32(&r);
    return done(&r);
}

static bool caps_ok(const struct pmsg_caps *m) {
    return (m->flags & ~(PMSG_CAPS_CGROUP2 | PMSG_CAPS_LISTENERS)) == 0 &&
           m->max_fds <= LYH_MAX_FDS_PER_MESSAGE && m->max_calls >= 1 && m->max_calls <= 4096;
}

int pmsg_encode_caps(const struct pmsg_caps *m, uint8_t *buf, size_t cap, size_t *ret_len) {
    struct bw w;
    if (!caps_ok(m))
        return -EINVAL;
    begin(&w, buf, cap, PMSG_CAPS);
    bw_put8(&w, m->flags);
    bw_put8(&w, m->landlock_abi);
    bw_put8(&w, m->max_fds);
    bw_put16(&w, m->max_calls);
    return finish(&w, 0, ret_len);
}

int pmsg_decode_caps(const uint8_t *p, size_t len, struct pmsg_caps *ret) {
    struct br r = {.p = p, .len = len};
    struct pmsg_caps m;
    m.flags = br_get8(&r);
    m.landlock_abi = br_get8(&r);
    m.max_fds = br_get8(&r);
    m.max_calls = br_get16(&r);
    if (done(&r) < 0 || !caps_ok(&m))
        return -EBADMSG;
    *ret = m;
    return 0;
}

/* ---- client connections -------------------------------------------------------------- */

bool pmsg_conn_type(uint16_t type) {
    return (type >= PMSG_CONN_OPEN && type <= PMSG_FDS_CLOSED) ||
           (type >= PMSG_LISTEN_START && type <= PMSG_CONN_PAUSE);
}

static bool text_ok(const char *t) {
    size_t n = strnlen(t, PMSG_TEXT_MAX);
    if (n == 0 || n >= PMSG_TEXT_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (t[i] < 0x20 || t[i] > 0x7e)
            return false;
    return true;
}


/* Every field as the decoder requires it: one encoding per message. */
static bool conn_ok(uint16_t type, const struct pmsg_conn *m) {
    bool id = m->id != 0;
    switch (type) {
    case PMSG_CONN_OPEN:
    case PMSG_CONN_GONE:
    case PMSG_FDS:
    case PMSG_MIDFRAME:
    case PMSG_FDS_CLOSED:
    case PMSG_CONN_ADOPT:
    case PMSG_CONN_CLOSE:
        return id;
    case PMSG_CONN_PAUSE:
        return id && m->count <= 1;
    case PMSG_DRAINED:
        return id && m->count >= 1;
    case PMSG_REQUEST:
        return id && m->total <= PMSG_REQUEST_MAX && m->data_len <= PMSG_CHUNK &&
               (m->data_len >= 1 || m->total == 0) && m->offset <= m->total &&
               m->data_len <= m->total - m->offset;
    case PMSG_OUT:
        return id && m->data_len >= 1 && m->data_len <= PMSG_CHUNK &&
               (m->flags & ~PMSG_OUT_IDLE) == 0;
    case PMSG_REFUSE:
        return id && m->code >= 1 && m->code <= 16 && (m->flags & ~PMSG_REFUSE_CLOSE) == 0 &&
               (!(m->flags & PMSG_REFUSE_CLOSE) || m->call_id == 0) &&
               text_ok(m->text);
    case PMSG_LISTEN_START:
        return id && m->count >= 1 && m->code >= 1 && m->code <= 3;
    default:
        return false;
    }
}

int pmsg_encode_conn(uint16_t type, const struct pmsg_conn *m, uint8_t *buf, size_t cap,
                     size_t *ret_len) {
    struct bw w;
    int r = 0;
    if (!pmsg_conn_type(type) || !conn_ok(type, m))
        return -EINVAL;
    begin(&w, buf, cap, type);
    bw_put32(&w, (uint32_t)(m->id >> 32));
    bw_put32(&w, (uint32_t)m->id);
    switch (type) {
    case PMSG_CONN_PAUSE:
        bw_put8(&w, (uint8_t)m->count);
        break;
    case PMSG_DRAINED:
        bw_put32(&w, m->count);
        break;
    case PMSG_REQUEST:
        bw_put32(&w, m->total);
        bw_put32(&w, m->offset);
        bw_put(&w, m->data, m->data_len);
        break;
    case PMSG_OUT:
        bw_put32(&w, m->count);
        bw_put8(&w, m->flags);
        bw_put(&w, m->data, m->data_len);
        break;
    case PMSG_REFUSE:
        bw_put32(&w, (uint32_t)(m->call_id >> 32));
        bw_put32(&w, (uint32_t)m->call_id);
        bw_put8(&w, m->code);
        bw_put8(&w, m->flags);
        r = put_str(&w, m->text, PMSG_TEXT_MAX);
        break;
    case PMSG_LISTEN_START:
        bw_put32(&w, m->count);
        bw_put8(&w, m->code);
        break;
    }
    return finish(&w, r, ret_len);
}

int pmsg_decode_conn(uint16_t type, const uint8_t *p, size_t len, struct pmsg_conn *ret) {
    struct br r = {.p = p, .len = len};
    struct pmsg_conn m;
    uint64_t hi, lo;

    memset(&m, 0, sizeof(m));
    if (!pmsg_conn_type(type))
        return -EBADMSG;
    hi = br_get32(&r), lo = br_get32(&r);
    m.id = hi << 32 | lo;
    switch (type) {
    case PMSG_CONN_PAUSE:
        m.count = br_get8(&r);
        break;
    case PMSG_DRAINED:
        m.count = br_get32(&r);
        break;
    case PMSG_REQUEST:
        m.total = br_get32(&r);
        m.offset = br_get32(&r);
        if (!r.bad) { /* the rest is the data */
            m.data_len = r.len - r.off;
            m.data = br_take(&r, m.data_len);
        }
        break;
    case PMSG_OUT:
        m.count = br_get32(&r);
        m.flags = br_get8(&r);
        if (!r.bad) {
            m.data_len = r.len - r.off;
            m.data = br_take(&r, m.data_len);
        }
        break;
    case PMSG_REFUSE:
        hi = br_get32(&r), lo = br_get32(&r);
        m.call_id = hi << 32 | lo;
        m.code = br_get8(&r);
        m.flags = br_get8(&r);
        get_str(&r, m.text, PMSG_TEXT_MAX);
        break;
    case PMSG_LISTEN_START:
        m.count = br_get32(&r);
        m.code = br_get8(&r);
        break;
    }
    if (done(&r) < 0 || !conn_ok(type, &m))
        return -EBADMSG;
    *ret = m;
    return 0;
}
