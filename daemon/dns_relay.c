/* The DNS relay: the unprivileged half of a session's DNS forwarder, in the
 * protocol process (proto.h). The privileged half is dns_fwd.c in the parent.
 *
 * Owns: reading the agent's queries from the listening sockets the parent
 * made (127.0.0.1:P and [::1]:P, UDP and TCP, marked so that chain input
 * knows them), parsing them, asking the session's resolvers from a socket
 * bound to its VPN interface (a fresh one, with a fresh source port and id,
 * per try), parsing the answers, and writing the replies. It never changes
 * the firewall: with an allowlist, the addresses an answer gives go to the
 * parent (PMSG_DNS_ANSWER), which checks the name and the addresses again
 * and puts them in the session's set; only then does the agent get its
 * answer. Every query's outcome goes to the parent (PMSG_DNS_RECORD), which
 * writes the audit record.
 *
 * Bounds: RELAY_INFLIGHT queries per session (more: dropped, counted),
 * RELAY_TCP_CLIENTS TCP connections (more: closed), a TCP client idle
 * RELAY_TCP_IDLE_MS is closed. A resolver that does not answer in
 * RELAY_TRY_MS is asked again, then the next one; after RELAY_TRIES tries the
 * agent gets SERVFAIL. An answer that does not match the question (id, name,
 * type) is ignored, as a spoofed one would be; a malformed one fails the try.
 * An answer with TC set is SERVFAIL (the upstream side speaks UDP only, with
 * an EDNS size of 1232 bytes). The parent has RELAY_PARENT_MS to confirm an
 * allowlisted answer, else SERVFAIL. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/dest_rule.h"
#include "common/dns_addr.h"
#include "common/dns_msg.h"
#include "common/dns_name.h"
#include "common/macros.h"
#include "daemon/log.h"
#include "daemon/proto.h"

#define RELAY_INFLIGHT    256
#define RELAY_TCP_CLIENTS 16
#define RELAY_TCP_IDLE_MS 10000
#define RELAY_TRY_MS      2000
#define RELAY_TRIES       3
#define RELAY_PARENT_MS   2000

/* A TCP client: 2-byte length, message; one query at a time. */
struct dns_tcp {
    struct relay *f;
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
    struct relay *f;
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
    size_t n_kept_out; /* answer addresses kept out (private, loopback, ...) */
    /* waiting for the parent (req != 0): the answer to give then */
    uint32_t req;
    struct dns_addr keep[DNS_ANSWER_ADDRS];
    size_t n_keep;
    struct dns_addr all[DNS_ANSWER_ADDRS]; /* what the resolver said, for the record */
    size_t n_all;
    uint32_t ttl;
    TAILQ_ENTRY(dns_query_ctx) link;
};

struct relay {
    struct proto *p;
    char session[PMSG_ID_LEN + 1];
    char iface[PMSG_IFNAME_MAX];
    struct pmsg_addr resolvers[PMSG_RESOLVERS];
    size_t n_resolvers;
    char domains[PMSG_DOMAIN_BYTES];
    size_t n_domains;
    int udp[2], tcp[2]; /* v4, v6 (-1: none) */
    struct event *ev_udp[2], *ev_tcp[2];
    struct event *ev_resume; /* accepting again after EMFILE */
    TAILQ_HEAD(, dns_query_ctx) queries;
    TAILQ_HEAD(, dns_tcp) clients;
    unsigned n_queries, n_clients;
    uint32_t n_dropped; /* queries refused at the in-flight bound, not yet said */
    uint32_t n_unsent;  /* records the parent's queue did not take, not yet said */
    TAILQ_ENTRY(relay) link;
};

static void query_free(struct dns_query_ctx *c);
static void tcp_free(struct dns_tcp *t);
static void tcp_done(struct dns_tcp *t);

/* ---- records ------------------------------------------------------------------------- */

/* Tell the parent what became of a query (action) or, with c NULL, only the
 * counts not said yet. The parent renders, rate-limits and writes it. */
static void record(struct relay *f, struct dns_query_ctx *c, uint8_t action, uint8_t rcode,
                   const struct dns_answer *a) {
    struct pmsg_dns_record m;
    uint8_t buf[PMSG_MAX_BYTES];
    size_t len;

    memset(&m, 0, sizeof(m));
    memcpy(m.session, f->session, sizeof(m.session));
    m.action = c ? action : PDNS_NONE;
    m.resolver = 0xff;
    m.dropped_inflight = f->n_dropped;
    m.unsent = f->n_unsent;
    if (c) {
        m.rcode = rcode & 15;
        m.qtype = c->q.qtype;
        m.via_tcp = c->via_tcp;
        snprintf(m.name, sizeof(m.name), "%s", c->q.name);
        if (f->n_resolvers && c->tries)
            m.resolver = (uint8_t)(c->resolver % f->n_resolvers);
        m.n_kept_out = (uint16_t)(c->n_kept_out > 0xffff ? 0xffff : c->n_kept_out);
    }
    for (size_t i = 0; a && i < a->n_addrs && i < DNS_ANSWER_ADDRS; i++) {
        m.addrs[i].family = a->addrs[i].family;
        memcpy(m.addrs[i].addr, a->addrs[i].addr, 16);
        m.n_addrs++;
    }
    if (a && a->n_addrs)
        m.ttl = a->min_ttl;
    if (pmsg_encode_dns_record(&m, buf, sizeof(buf), &len) < 0 ||
        proto_send(f->p, buf, len) < 0) {
        f->n_unsent += c != NULL;
        return;
    }
    f->n_dropped = f->n_unsent = 0;
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

static void reply_empty(struct dns_query_ctx *c, uint8_t rcode, uint8_t action) {
    uint8_t out[DNS_UDP_MAX + 64];
    size_t len;
    if (dns_build_reply_empty(&c->q, c->raw, c->raw_len, rcode, out, sizeof(out), &len) == 0)
        send_reply(c, out, len);
    record(c->f, c, action, rcode, NULL);
}

/* ---- names ---------------------------------------------------------------------------- */

/* The admin policy (always_deny_domains for every session, allowed_domains
 * as the ceiling of an allowlist) and the session's own allowlist. The
 * parent checks an allowlisted answer's name again before anything opens. */
static bool name_allowed(const struct relay *f, const char *name) {
    const struct pmsg_dns_policy *pol = &f->p->policy;
    for (size_t i = 0; i < pol->n_deny; i++)
        if (dn_match(pol->deny[i], name))
            return false;
    if (!f->n_domains)
        return true;
    bool in_ceiling = pol->n_ceiling == 0;
    for (size_t i = 0; i < pol->n_ceiling && !in_ceiling; i++)
        in_ceiling = dn_match(pol->ceiling[i], name);
    if (!in_ceiling)
        return false;
    const char *p = f->domains;
    for (size_t i = 0; i < f->n_domains; i++) {
        if (dn_match(p, name))
            return true;
        p += strlen(p) + 1;
    }
    return false;
}

/* Hand the answer's addresses to the parent; want_reply: the agent waits for
 * its word (c->req set, the timer armed). -errno: the agent gets SERVFAIL. */
static int tell_parent(struct dns_query_ctx *c, const struct dns_addr *addrs, size_t n,
                       uint32_t ttl, bool want_reply) {
    struct pmsg_dns_answer m;
    uint8_t buf[PMSG_MAX_BYTES];
    size_t len;
    int r;

    memset(&m, 0, sizeof(m));
    memcpy(m.session, c->f->session, sizeof(m.session));
    snprintf(m.name, sizeof(m.name), "%s", c->q.name);
    m.qtype = c->q.qtype;
    m.ttl = ttl;
    m.want_reply = want_reply;
    for (size_t i = 0; i < n && i < DNS_ANSWER_ADDRS; i++) {
        if (addrs[i].family != (c->q.qtype == DNS_TYPE_A ? AF_INET : AF_INET6))
            continue; /* cannot be: the parser keeps the question's type */
        m.addrs[m.n_addrs].family = addrs[i].family;
        memcpy(m.addrs[m.n_addrs].addr, addrs[i].addr, 16);
        m.n_addrs++;
    }
    if (want_reply) {
        if (++c->f->p->next_req == 0)
            c->f->p->next_req = 1;
        m.req = c->f->p->next_req;
    }
    if ((r = pmsg_encode_dns_answer(&m, buf, sizeof(buf), &len)) < 0 ||
        (r = proto_send(c->f->p, buf, len)) < 0)
        return r;
    if (want_reply) {
        c->req = m.req;
        struct timeval tv = {RELAY_PARENT_MS / 1000, (RELAY_PARENT_MS % 1000) * 1000};
        if (evtimer_add(c->ev_timer, &tv) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* ---- upstream ------------------------------------------------------------------------ */

static int try_upstream(struct dns_query_ctx *c);

static void on_up_timer(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct dns_query_ctx *c = arg;
    if (c->req) { /* the parent did not confirm in time */
        log_warn("session '%s': no word from lyhd about '%s' in time; SERVFAIL", c->f->session,
                 c->q.name);
        reply_empty(c, DNS_RCODE_SERVFAIL, PDNS_FAILED);
        query_free(c);
        return;
    }
    if (try_upstream(c) < 0) {
        reply_empty(c, DNS_RCODE_SERVFAIL, PDNS_FAILED);
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
            log_debug("session '%s': resolver's answer for '%s' %s", c->f->session, c->q.name,
                      r < 0 ? "is malformed" : "was truncated");
            break;
        }
        /* the answer is in: no more tries */
        event_free(c->ev_up);
        c->ev_up = NULL;
        CLOSE_FD(c->up_fd);
        event_del(c->ev_timer);
        if (c->f->n_domains) {
            /* An allowlist: only the addresses an allowed name may open, put
             * in the session's set by the parent before the agent hears of
             * them; the CNAME chain flattened under the name asked. */
            if (a.rcode != DNS_RCODE_NOERROR) {
                reply_empty(c, a.rcode, PDNS_ANSWERED);
                query_free(c);
                return;
            }
            for (size_t k = 0; k < a.n_addrs; k++) {
                if (dr_addr_blocked(a.addrs[k].family, a.addrs[k].addr))
                    c->n_kept_out++;
                else
                    c->keep[c->n_keep++] = a.addrs[k];
            }
            c->ttl = a.min_ttl;
            memcpy(c->all, a.addrs, sizeof(c->all));
            c->n_all = a.n_addrs;
            if (tell_parent(c, c->keep, c->n_keep, a.min_ttl, true) < 0) {
                reply_empty(c, DNS_RCODE_SERVFAIL, PDNS_FAILED);
                query_free(c);
            }
            return;
        }
        uint8_t out[DNS_MSG_MAX];
        size_t len;
        size_t limit = c->udp_fd >= 0 ? c->q.udp_size : DNS_MSG_MAX;
        r = dns_build_reply_from(&c->q, c->raw, c->raw_len, &a, buf, (size_t)n, limit, out,
                                 sizeof(out), &len);
        if (r < 0) {
            reply_empty(c, DNS_RCODE_SERVFAIL, PDNS_FAILED);
            query_free(c);
            return;
        }
        /* the names of the addresses, for flow records: no need to wait */
        if (a.n_addrs)
            (void)tell_parent(c, a.addrs, a.n_addrs, a.min_ttl, false);
        send_reply(c, out, len);
        record(c->f, c, PDNS_ANSWERED, a.rcode, &a);
        query_free(c);
        return;
    }
    /* failed try: the next resolver at once */
    event_del(c->ev_timer);
    on_up_timer(-1, 0, c);
}

/* Send the query to the next resolver; -errno when out of tries. */
static int try_upstream(struct dns_query_ctx *c) {
    struct relay *f = c->f;

    if (c->ev_up) {
        event_free(c->ev_up);
        c->ev_up = NULL;
    }
    CLOSE_FD(c->up_fd);
    while (c->tries < RELAY_TRIES * f->n_resolvers && c->tries < 8) {
        c->resolver = c->tries % f->n_resolvers;
        c->tries++;
        const struct pmsg_addr *r = &f->resolvers[c->resolver];
        struct sockaddr_storage ss;
        socklen_t sl = dns_sockaddr(r->family, r->addr, 53, &ss);
        uint8_t msg[DNS_UDP_MAX];
        size_t len;
        if (getrandom(&c->up_id, sizeof(c->up_id), 0) != sizeof(c->up_id) ||
            dns_build_query(c->up_id, c->q.name, c->q.qtype, msg, sizeof(msg), &len) < 0)
            return -EIO;
        int fd = socket(r->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -errno;
        /* Out through the VPN interface only: no route through it, no send.
         * (Without privilege since Linux 5.7, on a socket not bound yet.) */
        if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, f->iface, strlen(f->iface)) < 0 ||
            connect(fd, (struct sockaddr *)&ss, sl) < 0 || send(fd, msg, len, MSG_DONTWAIT) < 0) {
            log_debug_errno(errno, "session '%s': resolver try %u", f->session, c->tries);
            close(fd);
            continue;
        }
        c->up_fd = fd;
        c->ev_up = event_new(f->p->base, fd, EV_READ | EV_PERSIST, on_up_read, c);
        if (!c->ev_up || event_add(c->ev_up, NULL) < 0)
            return -ENOMEM;
        struct timeval tv = {RELAY_TRY_MS / 1000, (RELAY_TRY_MS % 1000) * 1000};
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

void relay_answered(struct proto *p, const struct pmsg_dns_answered *m) {
    struct relay *f;
    struct dns_query_ctx *c;
    TAILQ_FOREACH(f, &p->relays, link)
        TAILQ_FOREACH(c, &f->queries, link) {
            if (c->req != m->req || m->req == 0)
                continue;
            uint8_t out[DNS_MSG_MAX];
            size_t len;
            size_t limit = c->udp_fd >= 0 ? c->q.udp_size : DNS_MSG_MAX;
            struct dns_answer a = {.n_addrs = c->n_all, .min_ttl = c->ttl};
            memcpy(a.addrs, c->all, sizeof(c->all));
            if (m->status < 0 || dns_build_reply_addrs(&c->q, c->raw, c->raw_len, c->keep,
                                                       c->n_keep, c->ttl, limit, out, sizeof(out),
                                                       &len) < 0) {
                reply_empty(c, DNS_RCODE_SERVFAIL, PDNS_FAILED);
            } else {
                send_reply(c, out, len);
                record(f, c, PDNS_ANSWERED, DNS_RCODE_NOERROR, &a);
            }
            query_free(c);
            return;
        }
    /* a query that timed out or a session gone since: nothing to do */
}

/* One query from the agent: answer it or send it on. */
static void handle(struct relay *f, const uint8_t *msg, size_t len, int udp_fd,
                   const struct sockaddr_storage *peer, socklen_t peer_len, struct dns_tcp *tcp) {
    struct dns_query q;
    int r = dns_parse_query(msg, len, &q);
    if (r == -EINVAL || r == -EBADMSG) {
        log_debug("session '%s': malformed DNS query (%zu bytes) dropped", f->session, len);
        return;
    }
    if (f->n_queries >= RELAY_INFLIGHT) {
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
    TAILQ_INSERT_TAIL(&f->queries, c, link);
    f->n_queries++;
    if (tcp) {
        tcp->busy = true; /* one at a time: the next waits in the socket */
        event_del(tcp->ev);
    }
    if (r == -EPROTONOSUPPORT) {
        reply_empty(c, DNS_RCODE_NOTIMP, PDNS_REFUSED);
        query_free(c);
        return;
    }
    /* An allowlist: a name it does not allow is never sent upstream (no DNS
     * exfiltration); other types than A and AAAA have no data (no TXT
     * tunnel, no HTTPS records with ECH keys or address hints). */
    if (!name_allowed(f, q.name)) {
        reply_empty(c, DNS_RCODE_NXDOMAIN, PDNS_DENIED);
        query_free(c);
        return;
    }
    if (f->n_domains && q.qtype != DNS_TYPE_A && q.qtype != DNS_TYPE_AAAA) {
        reply_empty(c, DNS_RCODE_NOERROR, PDNS_NODATA);
        query_free(c);
        return;
    }
    c->ev_timer = evtimer_new(f->p->base, on_up_timer, c);
    if (!c->ev_timer || try_upstream(c) < 0) {
        reply_empty(c, DNS_RCODE_SERVFAIL, PDNS_FAILED);
        query_free(c);
    }
}

/* ---- listeners ----------------------------------------------------------------------- */

static void on_udp(evutil_socket_t fd, short what, void *arg) {
    (void)what;
    struct relay *f = arg;
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
        struct timeval tv = {RELAY_TCP_IDLE_MS / 1000, 0};
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
    struct timeval tv = {RELAY_TCP_IDLE_MS / 1000, 0};
    evtimer_add(t->ev_idle, &tv);
    tcp_next(t);
}

static void on_accept(evutil_socket_t lfd, short what, void *arg) {
    (void)what;
    struct relay *f = arg;
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
    if (f->n_clients >= RELAY_TCP_CLIENTS) {
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
    t->ev = event_new(f->p->base, fd, EV_READ | EV_PERSIST, on_tcp_read, t);
    t->ev_idle = evtimer_new(f->p->base, on_tcp_idle, t);
    t->ev_next = evtimer_new(f->p->base, on_tcp_next, t);
    struct timeval tv = {RELAY_TCP_IDLE_MS / 1000, 0};
    if (!t->ev || !t->ev_idle || !t->ev_next || event_add(t->ev, NULL) < 0 ||
        evtimer_add(t->ev_idle, &tv) < 0)
        tcp_free(t);
}

static void on_resume(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct relay *f = arg;
    for (int i = 0; i < 2; i++)
        if (f->ev_tcp[i])
            event_add(f->ev_tcp[i], NULL);
}

static void relay_free(struct relay *f) {
    if (!f)
        return;
    while (!TAILQ_EMPTY(&f->queries))
        query_free(TAILQ_FIRST(&f->queries));
    while (!TAILQ_EMPTY(&f->clients))
        tcp_free(TAILQ_FIRST(&f->clients));
    if (f->n_dropped || f->n_unsent)
        record(f, NULL, PDNS_NONE, 0, NULL);
    for (int i = 0; i < 2; i++) {
        if (f->ev_udp[i])
            event_free(f->ev_udp[i]);
        if (f->ev_tcp[i])
            event_free(f->ev_tcp[i]);
        CLOSE_FD(f->udp[i]);
        CLOSE_FD(f->tcp[i]);
    }
    if (f->ev_resume)
        event_free(f->ev_resume);
    free(f);
}

void relay_stop(struct proto *p, const char *session) {
    struct relay *f;
    TAILQ_FOREACH(f, &p->relays, link)
        if (strcmp(f->session, session) == 0) {
            TAILQ_REMOVE(&p->relays, f, link);
            relay_free(f);
            return;
        }
}

void relay_free_all(struct proto *p) {
    while (!TAILQ_EMPTY(&p->relays)) {
        struct relay *f = TAILQ_FIRST(&p->relays);
        TAILQ_REMOVE(&p->relays, f, link);
        relay_free(f);
    }
}

int relay_start(struct proto *p, const struct pmsg_dns_start *m, int *fds, size_t nfds) {
    struct relay *f = calloc(1, sizeof(*f));
    size_t k = 0;
    int r = 0;

    relay_stop(p, m->session);
    if (!f) {
        for (size_t i = 0; i < nfds; i++)
            close(fds[i]);
        return -ENOMEM;
    }
    f->p = p;
    memcpy(f->session, m->session, sizeof(f->session));
    memcpy(f->iface, m->iface, sizeof(f->iface));
    memcpy(f->resolvers, m->resolvers, sizeof(f->resolvers));
    f->n_resolvers = m->n_resolvers;
    memcpy(f->domains, m->domains, m->domains_len);
    f->n_domains = m->n_domains;
    f->udp[0] = f->udp[1] = f->tcp[0] = f->tcp[1] = -1;
    TAILQ_INIT(&f->queries);
    TAILQ_INIT(&f->clients);
    /* the fds in the order of the mask's bits: udp4, tcp4, udp6, tcp6 */
    static const uint8_t bits[4] = {PMSG_FD_UDP4, PMSG_FD_TCP4, PMSG_FD_UDP6, PMSG_FD_TCP6};
    for (size_t i = 0; i < 4; i++) {
        if (!(m->fd_mask & bits[i]))
            continue;
        int *slot = (i & 1) ? &f->tcp[i / 2] : &f->udp[i / 2];
        if (k < nfds)
            *slot = fds[k++];
        else
            r = -EBADMSG;
    }
    for (; k < nfds; k++) /* more than the mask said */
        close(fds[k]), r = -EBADMSG;
    f->ev_resume = evtimer_new(p->base, on_resume, f);
    if (!f->ev_resume && r == 0)
        r = -ENOMEM;
    for (int i = 0; i < 2 && r == 0; i++) {
        if (f->udp[i] >= 0) {
            f->ev_udp[i] = event_new(p->base, f->udp[i], EV_READ | EV_PERSIST, on_udp, f);
            if (!f->ev_udp[i] || event_add(f->ev_udp[i], NULL) < 0)
                r = -ENOMEM;
        }
        if (f->tcp[i] >= 0) {
            f->ev_tcp[i] = event_new(p->base, f->tcp[i], EV_READ | EV_PERSIST, on_accept, f);
            if (!f->ev_tcp[i] || event_add(f->ev_tcp[i], NULL) < 0)
                r = -ENOMEM;
        }
    }
    if (r < 0) {
        relay_free(f);
        return r;
    }
    TAILQ_INSERT_TAIL(&p->relays, f, link);
    return 0;
}
