/* The per-session DNS forwarder (see dns_fwd.h).
 *
 * Sockets: a UDP socket and a TCP listener on 127.0.0.1:P, and on [::1]:P
 * when the host has IPv6 loopback. Per query in flight: one upstream UDP
 * socket, bound to the VPN interface and connected to the resolver (a fresh
 * source port each time), one timer. Bounds: DNS_FWD_INFLIGHT queries per
 * session (more: SERVFAIL at once), DNS_FWD_TCP_CLIENTS TCP connections
 * (more: closed), a TCP client idle DNS_FWD_TCP_IDLE_MS is closed.
 *
 * A resolver that does not answer in DNS_FWD_TRY_MS is asked again, then the
 * next one; after DNS_FWD_TRIES tries the agent gets SERVFAIL. An answer that
 * does not match the question (id, name, type) is ignored, as a spoofed one
 * would be; a malformed one fails the try. An answer with TC set is SERVFAIL
 * (the upstream side speaks UDP only, with an EDNS size of 1232 bytes). */
#include "daemon/dns_fwd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/dest_rule.h"
#include "common/dns_msg.h"
#include "common/dns_name.h"
#include "common/macros.h"
#include "daemon/audit.h"
#include "daemon/log.h"
#include "daemon/policy.h"
#include "daemon/lyhd.h"
#include "daemon/session.h"
#include "platform/linux/nft.h"
#include "daemon/guard.h"

#define DNS_FWD_INFLIGHT    256
#define DNS_FWD_TCP_CLIENTS 16
#define DNS_FWD_TCP_IDLE_MS 10000
#define DNS_FWD_TRY_MS      2000
#define DNS_FWD_TRIES       3
#define DNS_FWD_PORT_TRIES  16
#define DNS_FWD_MAPS        4096
/* audit records per session: 500/s, bursts of 2000; what is over is counted
 * and said in one record (action "unrecorded") when recording resumes and at
 * the end, so the log stays bounded and nothing vanishes silently */
#define DNS_FWD_REC_RATE    500
#define DNS_FWD_REC_BURST   2000
#define DNS_MAP_NAMES       256

struct dns_fwd;

/* A TCP client: 2-byte length, message; one query at a time. */
struct dns_tcp {
    struct dns_fwd *f;
    int fd;
    struct event *ev;
    struct event *ev_idle;
    struct event *ev_next; /* the next buffered message, on a later loop turn */
    bool dead;             /* to be closed on that turn (never freed under a caller) */
    uint8_t buf[2 + DNS_MSG_MAX];
    size_t have;
    bool busy; /* a query of it is in flight */
    TAILQ_ENTRY(dns_tcp) link;
};

struct dns_query_ctx {
    struct dns_fwd *f;
    struct dns_query q;
    /* the agent's header and question (copied back into every reply); the
     * rest of its query is not needed after parsing */
    uint8_t raw[DNS_HEADER_BYTES + DNS_NAME_MAX + 6];
    size_t raw_len;
    bool via_tcp;
    /* the reply goes to: a UDP peer on listener fd (udp_fd >= 0), or tcp */
    int udp_fd;
    struct sockaddr_storage peer;
    socklen_t peer_len;
    struct dns_tcp *tcp;
    uint16_t up_id;
    int up_fd;
    struct event *ev_up;
    struct event *ev_timer;
    unsigned tries;
    size_t resolver;
    size_t n_dropped; /* answer addresses kept out (private, loopback, ...) */
    uint64_t start_ms;
    TAILQ_ENTRY(dns_query_ctx) link;
};

struct dns_fwd {
    struct lyhd *d;
    struct session *s;
    int udp[2], tcp[2]; /* v4, v6 (-1: none) */
    struct event *ev_udp[2], *ev_tcp[2];
    struct event *ev_resume; /* accepting again after EMFILE */
    TAILQ_HEAD(, dns_query_ctx) queries;
    TAILQ_HEAD(, dns_tcp) clients;
    unsigned n_queries, n_clients;
    uint64_t n_dropped; /* queries refused at the in-flight bound */
    uint64_t n_unrecorded; /* queries the record rate limit left out */
    double rec_tokens;
    uint64_t rec_ms;
    /* What names resolved to for this session: address -> names, expiry
     * (the kernel set element's, with an allowlist). DNS_FWD_MAPS at most;
     * when full, the entry that expired first goes. */
    struct dns_map *maps;
    size_t n_maps;
    /* An open-addressing index over maps (slot: its position + 1, 0 empty):
     * every flow record looks its address up. */
    uint16_t *map_index;
};

struct dns_map {
    int family;
    uint8_t addr[16];
    char names[DNS_MAP_NAMES]; /* ","-joined, the newest first */
    uint64_t expiry_ms;        /* monotonic */
};

static void query_free(struct dns_query_ctx *c);
static void tcp_free(struct dns_tcp *t);
static void tcp_done(struct dns_tcp *t);

/* addr (AF_INET: 4 bytes, AF_INET6: 16) and port into a sockaddr; its length. */
static socklen_t sockaddr_of(int family, const void *addr, uint16_t port,
                             struct sockaddr_storage *ss) {
    memset(ss, 0, sizeof(*ss));
    if (family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        memcpy(&in->sin_addr, addr, 4);
        return sizeof(*in);
    }
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    memcpy(&in6->sin6_addr, addr, 16);
    return sizeof(*in6);
}

/* ---- replies ------------------------------------------------------------------------- */

/* Say what the limits left out: queries not recorded, queries dropped at the
 * in-flight bound. */
static void record_gaps(struct dns_fwd *f) {
    char kv[160] = "", n[24];
    if (!f->n_unrecorded && !f->n_dropped)
        return;
    snprintf(n, sizeof(n), "%llu", (unsigned long long)f->n_unrecorded);
    audit_kv(kv, sizeof(kv), "unrecorded", n);
    snprintf(n, sizeof(n), "%llu", (unsigned long long)f->n_dropped);
    audit_kv(kv, sizeof(kv), "dropped_inflight", n);
    audit_dns(f->d, f->s, false, "unrecorded", kv);
    f->n_unrecorded = f->n_dropped = 0;
}

static bool record_allowed(struct dns_fwd *f) {
    uint64_t now = lyhd_mono_ms();
    if (f->rec_ms == 0)
        f->rec_tokens = DNS_FWD_REC_BURST;
    else
        f->rec_tokens += (double)(now - f->rec_ms) * DNS_FWD_REC_RATE / 1000.0;
    if (f->rec_tokens > DNS_FWD_REC_BURST)
        f->rec_tokens = DNS_FWD_REC_BURST;
    f->rec_ms = now;
    if (f->rec_tokens < 1) {
        f->n_unrecorded++;
        return false;
    }
    f->rec_tokens -= 1;
    record_gaps(f);
    return true;
}

static void record(struct dns_query_ctx *c, const char *action, uint8_t rcode,
                   const struct dns_answer *a) {
    struct session *s = c->f->s;
    if (!record_allowed(c->f))
        return;
    char kv[1600] = "", tbuf[16], rc[24], addrs[1100] = "";
    const char *rcodes[] = {"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"};

    audit_kv(kv, sizeof(kv), "name", c->q.name[0] ? c->q.name : ".");
    audit_kv(kv, sizeof(kv), "type", dns_type_name(c->q.qtype, tbuf, sizeof(tbuf)));
    if (rcode < ARRAY_SIZE(rcodes))
        audit_kv(kv, sizeof(kv), "rcode", rcodes[rcode]);
    else {
        snprintf(rc, sizeof(rc), "%u", rcode);
        audit_kv(kv, sizeof(kv), "rcode", rc);
    }
    for (size_t i = 0; a && i < a->n_addrs; i++) {
        char ab[INET6_ADDRSTRLEN];
        size_t len = strlen(addrs);
        if (inet_ntop(a->addrs[i].family, a->addrs[i].addr, ab, sizeof(ab)))
            snprintf(addrs + len, sizeof(addrs) - len, "%s%s", len ? "," : "", ab);
    }
    if (addrs[0])
        audit_kv(kv, sizeof(kv), "answers", addrs);
    if (a && a->n_addrs)
        snprintf(rc, sizeof(rc), "%u", a->min_ttl > 9999999 ? 9999999 : a->min_ttl),
            audit_kv(kv, sizeof(kv), "ttl", rc);
    audit_kv(kv, sizeof(kv), "via", c->via_tcp ? "tcp" : "udp");
    if (c->f->s->spec.n_resolvers && c->tries) {
        const struct nftr_dest *r = &s->spec.resolvers[c->resolver % s->spec.n_resolvers];
        char ab[INET6_ADDRSTRLEN];
        if (inet_ntop(r->family, r->addr, ab, sizeof(ab)))
            audit_kv(kv, sizeof(kv), "resolver", ab);
    }
    if (c->n_dropped) {
        snprintf(rc, sizeof(rc), "%zu", c->n_dropped);
        audit_kv(kv, sizeof(kv), "dropped", rc); /* private and such: rebinding */
    }
    audit_dns(c->f->d, s, strcmp(action, "denied") == 0, action, kv);
}

static void send_reply(struct dns_query_ctx *c, const uint8_t *msg, size_t len) {
    if (c->udp_fd >= 0) {
        /* a full socket buffer drops it, as the network would */
        (void)sendto(c->udp_fd, msg, len, MSG_DONTWAIT, (struct sockaddr *)&c->peer, c->peer_len);
        return;
    }
    struct dns_tcp *t = c->tcp;
    if (!t)
        return;
    uint8_t hdr[2] = {(uint8_t)(len >> 8), (uint8_t)len};
    struct iovec iov[2] = {{hdr, 2}, {(void *)msg, len}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
    ssize_t n = sendmsg(t->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    c->tcp = NULL;
    if (n != (ssize_t)(len + 2)) { /* a client that does not read its answer is dropped */
        t->dead = true;
        event_active(t->ev_next, EV_TIMEOUT, 0);
    } else {
        tcp_done(t);
    }
}

static void reply_empty(struct dns_query_ctx *c, uint8_t rcode, const char *action) {
    uint8_t out[DNS_UDP_MAX + 64];
    size_t len;
    if (dns_build_reply_empty(&c->q, c->raw, c->raw_len, rcode, out, sizeof(out), &len) == 0)
        send_reply(c, out, len);
    record(c, action, rcode, NULL);
}

/* ---- what names resolved to -------------------------------------------------------- */

#define DNS_FWD_MAP_SLOTS (2 * DNS_FWD_MAPS) /* a power of two: at most half full */

static size_t map_slot(int family, const uint8_t *addr) {
    size_t len = family == AF_INET ? 4 : 16;
    uint32_t h = 2166136261u ^ (uint32_t)family; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ addr[i]) * 16777619u;
    return h & (DNS_FWD_MAP_SLOTS - 1);
}

static void index_put(struct dns_fwd *f, size_t pos) {
    size_t i = map_slot(f->maps[pos].family, f->maps[pos].addr);
    while (f->map_index[i])
        i = (i + 1) & (DNS_FWD_MAP_SLOTS - 1);
    f->map_index[i] = (uint16_t)(pos + 1);
}

static struct dns_map *map_find(struct dns_fwd *f, int family, const uint8_t *addr) {
    size_t len = family == AF_INET ? 4 : 16;
    if (!f->map_index)
        return NULL;
    for (size_t i = map_slot(family, addr); f->map_index[i]; i = (i + 1) & (DNS_FWD_MAP_SLOTS - 1)) {
        struct dns_map *m = &f->maps[f->map_index[i] - 1];
        if (m->family == family && memcmp(m->addr, addr, len) == 0)
            return m;
    }
    return NULL;
}

/* The entry of addr, made if need be (the one that expired first makes room). */
static struct dns_map *map_get(struct dns_fwd *f, int family, const uint8_t *addr) {
    struct dns_map *m = map_find(f, family, addr);
    if (m)
        return m;
    if (!f->maps) {
        f->maps = calloc(DNS_FWD_MAPS, sizeof(*f->maps));
        f->map_index = calloc(DNS_FWD_MAP_SLOTS, sizeof(*f->map_index));
        if (!f->maps || !f->map_index) {
            free(f->maps);
            free(f->map_index);
            f->maps = NULL;
            f->map_index = NULL;
            return NULL;
        }
    }
    bool evict = f->n_maps >= DNS_FWD_MAPS;
    if (!evict) {
        m = &f->maps[f->n_maps++];
    } else {
        m = &f->maps[0];
        for (size_t i = 1; i < f->n_maps; i++)
            if (f->maps[i].expiry_ms < m->expiry_ms)
                m = &f->maps[i];
    }
    memset(m, 0, sizeof(*m));
    m->family = family;
    memcpy(m->addr, addr, family == AF_INET ? 4 : 16);
    if (evict) { /* the old address leaves the index: build it again (as rare as full) */
        memset(f->map_index, 0, DNS_FWD_MAP_SLOTS * sizeof(*f->map_index));
        for (size_t i = 0; i < f->n_maps; i++)
            index_put(f, i);
    } else {
        index_put(f, (size_t)(m - f->maps));
    }
    return m;
}

/* name first in m's list (once). */
static void map_name(struct dns_map *m, const char *name) {
    char old[DNS_MAP_NAMES];
    snprintf(old, sizeof(old), "%s", m->names);
    snprintf(m->names, sizeof(m->names), "%s", name);
    for (char *save = NULL, *t = strtok_r(old, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t used = strlen(m->names);
        if (strcmp(t, name) == 0 || used + 1 + strlen(t) >= sizeof(m->names))
            continue;
        snprintf(m->names + used, sizeof(m->names) - used, ",%s", t);
    }
}

void dns_fwd_flow_note(struct dns_fwd *f, int family, const uint8_t *addr, char *buf,
                       size_t len) {
    buf[0] = '\0';
    if (!f || (family != AF_INET && family != AF_INET6))
        return;
    const struct dns_map *m = map_find(f, family, addr);
    uint64_t now = lyhd_mono_ms();
    if (!m) {
        /* with an allowlist, why a new flow to it was refused */
        if (f->s->spec.n_domains)
            audit_kv(buf, len, "dns", "none"); /* no name of this session resolved to it */
        return;
    }
    if (m->expiry_ms > now || !f->s->spec.n_domains) {
        audit_kv(buf, len, "names", m->names);
        return;
    }
    char ago[32];
    snprintf(ago, sizeof(ago), "%llu", (unsigned long long)((now - m->expiry_ms) / 1000));
    audit_kv(buf, len, "dns", "expired");
    audit_kv(buf, len, "names", m->names);
    audit_kv(buf, len, "expired_s_ago", ago);
}

static bool name_allowed(const struct session *s, const char *name) {
    /* the admin policy in force: always_deny_domains for every session, the
     * ceiling for one with an allowlist */
    if (!policy_domain_ok(policy_current(s->d), name, s->spec.n_domains > 0))
        return false;
    if (!s->spec.n_domains)
        return true;
    const char *p = s->spec.domains;
    for (size_t i = 0; i < s->spec.n_domains; i++) {
        if (dn_match(p, name))
            return true;
        p += strlen(p) + 1;
    }
    return false;
}

size_t dns_fwd_policy_changed(struct dns_fwd *f) {
    if (!f)
        return 0;
    uint64_t now = lyhd_mono_ms();
    size_t gone = 0;
    for (size_t i = 0; i < f->n_maps; i++) {
        struct dns_map *m = &f->maps[i];
        if (m->expiry_ms <= now)
            continue;
        bool keep = false;
        char names[DNS_MAP_NAMES];
        snprintf(names, sizeof(names), "%s", m->names);
        for (char *save = NULL, *t = strtok_r(names, ",", &save); t && !keep;
             t = strtok_r(NULL, ",", &save))
            keep = name_allowed(f->s, t);
        if (keep)
            continue;
        if (f->s->spec.n_domains) {
            char set[NFTR_NAME_MAX];
            uint8_t a[1][16];
            memcpy(a[0], m->addr, 16);
            snprintf(set, sizeof(set), "%s%s",
                     m->family == AF_INET ? NFTR_DOMAIN_SET4_PREFIX : NFTR_DOMAIN_SET6_PREFIX,
                     f->s->row.id);
            int r = nft_domain_elems_del(f->d->guard->nft, set, m->family,
                                         (const uint8_t(*)[16])a, 1);
            if (r < 0 && r != -ENOENT) {
                log_error("session '%s': cannot remove an address from set %s: %s",
                          f->s->row.id, set, strerror(-r));
                continue;
            }
        }
        m->expiry_ms = now;
        gone++;
    }
    return gone;
}

/* An address no allowed name may open: LAN, loopback, link-local, CGN,
 * multicast, documentation... (the ranges chain s-<id> refuses anyway). */
static bool addr_blocked(const struct dns_addr *a) {
    struct dr_rule r;
    if (dr_from_parts(a->addr, a->family == AF_INET ? 4 : 16, a->family == AF_INET ? 32 : 128, 0, 0,
                      &r, NULL, 0) < 0)
        return true;
    return dr_in_blocked_ranges(&r);
}

/* Put what an allowed name resolved to in the session's set, with a timeout
 * of max(ttl, the floor) + grace, before the answer goes out (an immediate
 * connect finds it). An element's timeout only grows. -errno: nothing is
 * answered (SERVFAIL). */
static int fill_sets(struct dns_query_ctx *c, const struct dns_addr *addrs, size_t n, uint32_t ttl) {
    struct dns_fwd *f = c->f;
    struct lyhd *d = f->d;
    uint64_t now = lyhd_mono_ms();
    uint64_t secs = (uint64_t)(ttl > d->cfg.dns_min_ttl_s ? ttl : d->cfg.dns_min_ttl_s);
    if (secs > 86400)
        secs = 86400;
    uint64_t timeout_ms = (secs + d->cfg.dns_grace_s) * 1000, expiry = now + timeout_ms;
    uint8_t add[DNS_ANSWER_ADDRS][16], refresh[DNS_ANSWER_ADDRS][16];
    size_t n_add = 0, n_refresh = 0;
    int family = c->q.qtype == DNS_TYPE_A ? AF_INET : AF_INET6;
    char set[NFTR_NAME_MAX];

    snprintf(set, sizeof(set), "%s%s", family == AF_INET ? NFTR_DOMAIN_SET4_PREFIX : NFTR_DOMAIN_SET6_PREFIX,
             f->s->row.id);
    for (size_t i = 0; i < n; i++) {
        const struct dns_map *m = map_find(f, family, addrs[i].addr);
        if (m && m->expiry_ms >= expiry)
            continue; /* its element outlives this answer already */
        if (m && m->expiry_ms > now + 1000)
            memcpy(refresh[n_refresh++], addrs[i].addr, 16);
        else
            memcpy(add[n_add++], addrs[i].addr, 16);
    }
    int r = 0;
    if (n_add)
        r = nft_domain_elems_add(d->guard->nft, set, family, (const uint8_t(*)[16])add, n_add,
                                 timeout_ms, false);
    if (r == 0 && n_refresh)
        r = nft_domain_elems_add(d->guard->nft, set, family, (const uint8_t(*)[16])refresh,
                                 n_refresh, timeout_ms, true);
    if (r < 0) {
        log_warn("session '%s': cannot add what '%s' resolved to to set %s: %s", f->s->row.id,
                 c->q.name, set, strerror(-r));
        return r;
    }
    for (size_t i = 0; i < n; i++) {
        struct dns_map *m = map_get(f, family, addrs[i].addr);
        if (!m)
            continue;
        if (m->expiry_ms < expiry)
            m->expiry_ms = expiry;
        map_name(m, c->q.name);
    }
    return 0;
}

/* Without an allowlist: only remember the names, for the flow records. */
static void note_names(struct dns_query_ctx *c, const struct dns_answer *a) {
    uint64_t expiry = lyhd_mono_ms() + (uint64_t)(a->min_ttl > 86400 ? 86400 : a->min_ttl) * 1000;
    for (size_t i = 0; i < a->n_addrs; i++) {
        struct dns_map *m = map_get(c->f, a->addrs[i].family, a->addrs[i].addr);
        if (!m)
            continue;
        if (m->expiry_ms < expiry)
            m->expiry_ms = expiry;
        map_name(m, c->q.name);
    }
}

/* The answer for a session with an allowlist: only the addresses an allowed
 * name may open, put in its set first; the CNAME chain flattened under the
 * name asked. */
static int answer_allowlisted(struct dns_query_ctx *c, const struct dns_answer *a, uint8_t *out,
                              size_t cap, size_t *ret_len) {
    size_t limit = c->udp_fd >= 0 ? c->q.udp_size : DNS_MSG_MAX;
    struct dns_addr keep[DNS_ANSWER_ADDRS];
    size_t n = 0;

    if (a->rcode != DNS_RCODE_NOERROR)
        return dns_build_reply_empty(&c->q, c->raw, c->raw_len, a->rcode, out, cap, ret_len);
    for (size_t i = 0; i < a->n_addrs; i++) {
        if (addr_blocked(&a->addrs[i]))
            c->n_dropped++;
        else
            keep[n++] = a->addrs[i];
    }
    if (n) {
        int r = fill_sets(c, keep, n, a->min_ttl);
        if (r < 0)
            return r;
    }
    return dns_build_reply_addrs(&c->q, c->raw, c->raw_len, keep, n, a->min_ttl, limit, out, cap,
                                 ret_len);
}

/* ---- upstream ------------------------------------------------------------------------ */

static int try_upstream(struct dns_query_ctx *c);

static void on_up_timer(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct dns_query_ctx *c = arg;
    if (try_upstream(c) < 0) {
        reply_empty(c, DNS_RCODE_SERVFAIL, "failed");
        query_free(c);
    }
}

static void on_up_read(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    struct dns_query_ctx *c = arg;
    uint8_t buf[DNS_MSG_MAX];

    for (int i = 0; i < 8; i++) {
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            /* ECONNREFUSED and the like: this try failed, try again later */
            break;
        }
        struct dns_answer a;
        int r = dns_parse_answer(buf, (size_t)n, c->up_id, c->q.qtype, c->q.name, &a);
        if (r == -ESRCH || r == -EINVAL)
            continue; /* not ours (or not an answer): keep waiting */
        if (r < 0 || a.tc) {
            log_debug("session '%s': resolver's answer for '%s' %s", c->f->s->row.id, c->q.name,
                      r < 0 ? "is malformed" : "was truncated");
            break;
        }
        uint8_t out[DNS_MSG_MAX];
        size_t len;
        size_t limit = c->udp_fd >= 0 ? c->q.udp_size : DNS_MSG_MAX;
        if (c->f->s->spec.n_domains) {
            r = answer_allowlisted(c, &a, out, sizeof(out), &len);
        } else {
            r = dns_build_reply_from(&c->q, c->raw, c->raw_len, &a, buf, (size_t)n, limit, out,
                                     sizeof(out), &len);
            if (r == 0)
                note_names(c, &a);
        }
        if (r < 0)
            break;
        send_reply(c, out, len);
        record(c, "answered", a.rcode, &a);
        query_free(c);
        return;
    }
    /* failed try: the next resolver at once */
    event_del(c->ev_timer);
    on_up_timer(-1, 0, c);
}

/* Send the query to the next resolver; -errno when out of tries. */
static int try_upstream(struct dns_query_ctx *c) {
    struct session *s = c->f->s;

    if (c->ev_up) {
        event_free(c->ev_up);
        c->ev_up = NULL;
    }
    CLOSE_FD(c->up_fd);
    while (c->tries < DNS_FWD_TRIES * s->spec.n_resolvers && c->tries < 8) {
        c->resolver = c->tries % s->spec.n_resolvers;
        c->tries++;
        const struct nftr_dest *r = &s->spec.resolvers[c->resolver];
        struct sockaddr_storage ss;
        socklen_t sl = sockaddr_of(r->family, r->addr, 53, &ss);
        uint8_t msg[DNS_UDP_MAX];
        size_t len;
        if (getrandom(&c->up_id, sizeof(c->up_id), 0) != sizeof(c->up_id) ||
            dns_build_query(c->up_id, c->q.name, c->q.qtype, msg, sizeof(msg), &len) < 0)
            return -EIO;
        int fd = socket(r->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -errno;
        /* out through the VPN interface only: no route through it, no send */
        if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, s->spec.iface, strlen(s->spec.iface)) <
                0 ||
            connect(fd, (struct sockaddr *)&ss, sl) < 0 || send(fd, msg, len, MSG_DONTWAIT) < 0) {
            log_debug("session '%s': resolver try %u: %s", s->row.id, c->tries, strerror(errno));
            close(fd);
            continue;
        }
        c->up_fd = fd;
        c->ev_up = event_new(c->f->d->base, fd, EV_READ | EV_PERSIST, on_up_read, c);
        if (!c->ev_up || event_add(c->ev_up, NULL) < 0)
            return -ENOMEM;
        struct timeval tv = {DNS_FWD_TRY_MS / 1000, (DNS_FWD_TRY_MS % 1000) * 1000};
        if (evtimer_add(c->ev_timer, &tv) < 0)
            return -ENOMEM;
        return 0;
    }
    return -ETIMEDOUT;
}

static void query_free(struct dns_query_ctx *c) {
    if (!c)
        return;
    if (c->ev_up)
        event_free(c->ev_up);
    if (c->ev_timer)
        event_free(c->ev_timer);
    CLOSE_FD(c->up_fd);
    TAILQ_REMOVE(&c->f->queries, c, link);
    c->f->n_queries--;
    struct dns_tcp *t = c->tcp;
    free(c);
    if (t)
        tcp_done(t);
}

/* One query from the agent: answer it or send it on. */
static void handle(struct dns_fwd *f, const uint8_t *msg, size_t len, int udp_fd,
                   const struct sockaddr_storage *peer, socklen_t peer_len, struct dns_tcp *tcp) {
    struct dns_query q;
    int r = dns_parse_query(msg, len, &q);
    if (r == -EINVAL || r == -EBADMSG) {
        log_debug("session '%s': malformed DNS query (%zu bytes) dropped", f->s->row.id, len);
        return;
    }
    if (f->n_queries >= DNS_FWD_INFLIGHT) {
        f->n_dropped++;
        return;
    }
    struct dns_query_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->f = f;
    c->q = q;
    c->up_fd = -1;
    c->udp_fd = udp_fd;
    c->tcp = tcp;
    size_t keep = DNS_HEADER_BYTES + q.question_len;
    if (keep > sizeof(c->raw) || keep > len) { /* cannot be: the parser bounds a question */
        free(c);
        return;
    }
    memcpy(c->raw, msg, keep);
    c->raw_len = keep;
    c->via_tcp = tcp != NULL;
    if (peer) {
        c->peer = *peer;
        c->peer_len = peer_len;
    }
    c->start_ms = lyhd_mono_ms();
    TAILQ_INSERT_TAIL(&f->queries, c, link);
    f->n_queries++;
    if (tcp) {
        tcp->busy = true; /* one at a time: the next waits in the socket */
        event_del(tcp->ev);
    }
    if (r == -EPROTONOSUPPORT) {
        reply_empty(c, DNS_RCODE_NOTIMP, "refused");
        query_free(c);
        return;
    }
    /* An allowlist: a name it does not allow is never sent upstream (no DNS
     * exfiltration); other types than A and AAAA have no data (no TXT
     * tunnel, no HTTPS records with ECH keys or address hints). */
    if (!name_allowed(f->s, q.name)) {
        reply_empty(c, DNS_RCODE_NXDOMAIN, "denied");
        query_free(c);
        return;
    }
    if (f->s->spec.n_domains && q.qtype != DNS_TYPE_A && q.qtype != DNS_TYPE_AAAA) {
        reply_empty(c, DNS_RCODE_NOERROR, "nodata");
        query_free(c);
        return;
    }
    c->ev_timer = evtimer_new(f->d->base, on_up_timer, c);
    if (!c->ev_timer || try_upstream(c) < 0) {
        reply_empty(c, DNS_RCODE_SERVFAIL, "failed");
        query_free(c);
    }
}

/* ---- listeners ----------------------------------------------------------------------- */

static void on_udp(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    struct dns_fwd *f = arg;
    uint8_t buf[DNS_MSG_MAX];
    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage peer;
        socklen_t pl = sizeof(peer);
        ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&peer, &pl);
        if (n < 0)
            return;
        handle(f, buf, (size_t)n, fd, &peer, pl, NULL);
    }
}

static void tcp_free(struct dns_tcp *t) {
    if (!t)
        return;
    struct dns_query_ctx *c;
    TAILQ_FOREACH(c, &t->f->queries, link)
        if (c->tcp == t)
            c->tcp = NULL; /* its answer has nowhere to go */
    if (t->ev)
        event_free(t->ev);
    if (t->ev_idle)
        event_free(t->ev_idle);
    if (t->ev_next)
        event_free(t->ev_next);
    CLOSE_FD(t->fd);
    TAILQ_REMOVE(&t->f->clients, t, link);
    t->f->n_clients--;
    free(t);
}

static void on_tcp_idle(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct dns_tcp *t = arg;
    if (t->busy) {
        struct timeval tv = {DNS_FWD_TCP_IDLE_MS / 1000, 0};
        evtimer_add(t->ev_idle, &tv);
        return;
    }
    tcp_free(t);
}

/* A whole message in the buffer and none in flight: handle it. */
static void tcp_next(struct dns_tcp *t) {
    if (t->busy || t->dead || t->have < 2)
        return;
    size_t len = (size_t)t->buf[0] << 8 | t->buf[1];
    if (len < DNS_HEADER_BYTES) {
        tcp_free(t);
        return;
    }
    if (t->have < 2 + len)
        return;
    /* handle() copies what it keeps (the header and question), and it may
     * answer at once and so come back here through tcp_done, which only
     * schedules: parsed in place, consumed after */
    handle(t->f, t->buf + 2, len, -1, NULL, 0, t);
    memmove(t->buf, t->buf + 2 + len, t->have - 2 - len);
    t->have -= 2 + len;
}

static void on_tcp_next(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct dns_tcp *t = arg;
    if (t->dead)
        tcp_free(t);
    else
        tcp_next(t);
}

/* Its query was answered (or dropped): read on. The next buffered message is
 * handled on a later turn of the loop, never from inside this answer (a
 * client pipelining queries that are answered at once would otherwise nest
 * one call per message). */
static void tcp_done(struct dns_tcp *t) {
    t->busy = false;
    if (t->dead)
        return;
    /* never freed here: a caller up the stack may still hold t */
    if (event_add(t->ev, NULL) < 0)
        t->dead = true;
    event_active(t->ev_next, EV_TIMEOUT, 0);
}

static void on_tcp_read(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    struct dns_tcp *t = arg;
    ssize_t n = recv(fd, t->buf + t->have, sizeof(t->buf) - t->have, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        tcp_free(t);
        return;
    }
    if (n < 0)
        return;
    t->have += (size_t)n;
    struct timeval tv = {DNS_FWD_TCP_IDLE_MS / 1000, 0};
    evtimer_add(t->ev_idle, &tv);
    tcp_next(t);
}

static void on_accept(evutil_socket_t lfd, short what, void *arg) {
    (void)what;
    struct dns_fwd *f = arg;
    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            /* out of fds: stop accepting for a second instead of spinning */
            for (int i = 0; i < 2; i++)
                if (f->ev_tcp[i])
                    event_del(f->ev_tcp[i]);
            struct timeval tv = {1, 0};
            evtimer_add(f->ev_resume, &tv);
        }
        return;
    }
    if (f->n_clients >= DNS_FWD_TCP_CLIENTS) {
        close(fd);
        return;
    }
    struct dns_tcp *t = calloc(1, sizeof(*t));
    if (!t) {
        close(fd);
        return;
    }
    t->f = f;
    t->fd = fd;
    TAILQ_INSERT_TAIL(&f->clients, t, link);
    f->n_clients++;
    t->ev = event_new(f->d->base, fd, EV_READ | EV_PERSIST, on_tcp_read, t);
    t->ev_idle = evtimer_new(f->d->base, on_tcp_idle, t);
    t->ev_next = evtimer_new(f->d->base, on_tcp_next, t);
    struct timeval tv = {DNS_FWD_TCP_IDLE_MS / 1000, 0};
    if (!t->ev || !t->ev_idle || !t->ev_next || event_add(t->ev, NULL) < 0 ||
        evtimer_add(t->ev_idle, &tv) < 0)
        tcp_free(t);
}

/* Bind the four sockets on port (0: the kernel's pick for the first, the
 * same for the rest). -EADDRINUSE when one of them is taken. */
static int bind_all(struct dns_fwd *f, uint16_t port, uint16_t *ret_port) {
    for (int fam = 0; fam < 2; fam++)
        for (int k = 0; k < 2; k++) {
            static const uint8_t lo4[4] = {127, 0, 0, 1}, lo6[16] = {[15] = 1};
            int *fdp = k ? &f->tcp[fam] : &f->udp[fam];
            struct sockaddr_storage ss;
            socklen_t sl = sockaddr_of(fam ? AF_INET6 : AF_INET, fam ? lo6 : lo4, port, &ss);
            int fd = socket(fam ? AF_INET6 : AF_INET,
                            (k ? SOCK_STREAM : SOCK_DGRAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0)
                return -errno;
            int one = 1;
            uint32_t mark = NFTR_DNS_FWD_SOCKET_MARK;
            if (fam)
                (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
            /* The mark (settable with CAP_NET_ADMIN, or CAP_NET_RAW since
             * Linux 5.17) is how chain input tells lyhd's forwarder from
             * anyone else's socket at that port;
             * the listener binds again past its own TIME_WAIT connections
             * after a restart (UDP does not need it, and must not share). */
            if (setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, sizeof(mark)) < 0 ||
                (k && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)) {
                int e = -errno;
                close(fd);
                return e;
            }
            if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || (k && listen(fd, 16) < 0)) {
                int e = -errno;
                close(fd);
                /* no IPv6 loopback on this host: IPv4 only */
                if (fam == 1 && (e == -EADDRNOTAVAIL || e == -EAFNOSUPPORT))
                    break;
                return e;
            }
            *fdp = fd;
            if (port == 0) {
                struct sockaddr_in got;
                socklen_t gl = sizeof(got);
                if (getsockname(fd, (struct sockaddr *)&got, &gl) < 0)
                    return -errno;
                port = ntohs(got.sin_port);
            }
        }
    *ret_port = port;
    return 0;
}

static void on_resume(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct dns_fwd *f = arg;
    for (int i = 0; i < 2; i++)
        if (f->ev_tcp[i])
            event_add(f->ev_tcp[i], NULL);
}

static void close_all(struct dns_fwd *f) {
    for (int i = 0; i < 2; i++) {
        if (f->ev_udp[i])
            event_free(f->ev_udp[i]);
        if (f->ev_tcp[i])
            event_free(f->ev_tcp[i]);
        f->ev_udp[i] = f->ev_tcp[i] = NULL;
        CLOSE_FD(f->udp[i]);
        CLOSE_FD(f->tcp[i]);
    }
}

void dns_fwd_free(struct dns_fwd *f) {
    if (!f)
        return;
    record_gaps(f);
    while (!TAILQ_EMPTY(&f->queries))
        query_free(TAILQ_FIRST(&f->queries));
    while (!TAILQ_EMPTY(&f->clients))
        tcp_free(TAILQ_FIRST(&f->clients));
    close_all(f);
    if (f->ev_resume)
        event_free(f->ev_resume);
    free(f->maps);
    free(f->map_index);
    free(f);
}

unsigned dns_fwd_fds(const struct dns_fwd *f) {
    if (!f)
        return 0;
    unsigned n = f->n_clients;
    const struct dns_query_ctx *c;
    for (int i = 0; i < 2; i++)
        n += (f->udp[i] >= 0) + (f->tcp[i] >= 0);
    TAILQ_FOREACH(c, &f->queries, link)
        n += c->up_fd >= 0;
    return n;
}

static bool port_named_by_other(struct lyhd *d, const struct session *s, uint16_t port) {
    const struct session *o;
    TAILQ_FOREACH(o, &d->sessions, link)
        if (o != s && o->spec.dns_port == port)
            return true;
    return false;
}

int dns_fwd_start(struct lyhd *d, struct session *s, char *why, size_t whylen) {
    struct dns_fwd *f = calloc(1, sizeof(*f));
    uint16_t port = 0;
    int r = -EADDRINUSE;

    if (!f)
        return -ENOMEM;
    f->d = d;
    f->s = s;
    f->udp[0] = f->udp[1] = f->tcp[0] = f->tcp[1] = -1;
    TAILQ_INIT(&f->queries);
    TAILQ_INIT(&f->clients);
    for (int i = 0; i < (s->spec.dns_port ? 1 : DNS_FWD_PORT_TRIES) && r == -EADDRINUSE; i++) {
        close_all(f);
        r = bind_all(f, s->spec.dns_port, &port);
        /* A port another session's rules name (its forwarder could not
         * listen there again after a restart, and waits for it) is never
         * given to this one: that session's DNS flows would land here. A
         * local user can steer the kernel's pick by holding every other
         * port while lyhd restarts. */
        if (r == 0 && !s->spec.dns_port && port_named_by_other(d, s, port))
            r = -EADDRINUSE;
    }
    if (r < 0) {
        if (s->spec.dns_port)
            snprintf(why, whylen, "cannot listen for the session's DNS queries on port %u again: %s",
                     s->spec.dns_port, strerror(-r));
        else
            snprintf(why, whylen, "cannot listen for the session's DNS queries: %s", strerror(-r));
        dns_fwd_free(f);
        return r;
    }
    f->ev_resume = evtimer_new(d->base, on_resume, f);
    if (!f->ev_resume)
        r = -ENOMEM;
    for (int i = 0; i < 2; i++) {
        if (f->udp[i] >= 0) {
            f->ev_udp[i] = event_new(d->base, f->udp[i], EV_READ | EV_PERSIST, on_udp, f);
            if (!f->ev_udp[i] || event_add(f->ev_udp[i], NULL) < 0)
                r = -ENOMEM;
        }
        if (f->tcp[i] >= 0) {
            f->ev_tcp[i] = event_new(d->base, f->tcp[i], EV_READ | EV_PERSIST, on_accept, f);
            if (!f->ev_tcp[i] || event_add(f->ev_tcp[i], NULL) < 0)
                r = -ENOMEM;
        }
    }
    if (r < 0) {
        snprintf(why, whylen, "cannot watch the DNS forwarder's sockets: %s", strerror(-r));
        dns_fwd_free(f);
        return r;
    }
    s->spec.dns_port = port;
    s->dns = f;
    return 0;
}
