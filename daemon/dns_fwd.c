/* The per-session DNS forwarder, its privileged half (see dns_fwd.h).
 *
 * The parent keeps what needs privilege or must not be forged: the listening
 * sockets (127.0.0.1:P and [::1]:P, UDP and TCP, marked with SO_MARK, which
 * needs CAP_NET_ADMIN: chain input knows lyhd's forwarder by it), the
 * session's nft sets, and the audit records. It never reads a query or an
 * answer: the protocol process (dns_relay.c) does, on duplicates of these
 * sockets handed over in PMSG_DNS_START, and tells the parent what it found
 * in PMSG_DNS_ANSWER and PMSG_DNS_RECORD. The parent keeps its own copies of
 * the sockets, so a protocol process that dies and is started again gets
 * them back at the same port, and nothing an agent sent in between is lost
 * beyond what the socket buffers could not hold.
 *
 * What the protocol process says is checked as if an attacker said it: an
 * answer is for a live session with a forwarder; with an allowlist, its name
 * must be one the session's allowlist and the admin policy allow (the same
 * check the relay made) and none of its addresses may lie in the ranges
 * chain s-<id> refuses (LAN, loopback, CGN, ...). The worst a compromised
 * protocol process can do here is put public addresses in an allowlisted
 * session's set under an allowed name (the allowlist then narrows less),
 * forge DNS records of sessions, or answer nothing: docs/security-model.md.
 *
 * Records are rate-limited here, per session: 500/s, bursts of 2000; what is
 * over is counted and said in one record (action "unrecorded") when
 * recording resumes and at the end, so the log stays bounded and nothing
 * vanishes silently. */
#include "daemon/dns_fwd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/dest_rule.h"
#include "common/dns_addr.h"
#include "common/dns_msg.h"
#include "common/dns_name.h"
#include "common/macros.h"
#include "daemon/audit.h"
#include "daemon/guard.h"
#include "daemon/log.h"
#include "daemon/lyhd.h"
#include "daemon/pmsg.h"
#include "daemon/policy.h"
#include "daemon/pproc.h"
#include "daemon/session.h"
#include "platform/linux/nft.h"

#define DNS_FWD_PORT_TRIES  16
#define DNS_FWD_MAPS        4096
#define DNS_FWD_REC_RATE    500
#define DNS_FWD_REC_BURST   2000
#define DNS_MAP_NAMES       256

struct dns_fwd {
    struct lyhd *d;
    struct session *s;
    int udp[2], tcp[2]; /* v4, v6 (-1: none); the protocol process reads duplicates */
    uint64_t n_dropped; /* queries the relay refused at its in-flight bound */
    uint64_t n_unrecorded; /* queries the record rate limit (or a full queue) left out */
    double rec_tokens;
    uint64_t rec_ms;
    uint64_t gap_ms;       /* when record_gaps last wrote */
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

/* ---- records ------------------------------------------------------------------------- */

/* Say what the limits left out: queries not recorded, queries dropped at the
 * in-flight bound. */
static void record_gaps(struct dns_fwd *f, bool now) {
    char kv[160] = "", n[24];
    uint64_t t = lyhd_mono_ms();
    if (!f->n_unrecorded && !f->n_dropped)
        return;
    /* at most one a second (the counts add up meanwhile) but at the end: the
     * protocol process must not buy a record per message */
    if (!now && f->gap_ms && t - f->gap_ms < 1000)
        return;
    f->gap_ms = t;
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
    record_gaps(f, false);
    return true;
}

void dns_fwd_on_record(struct lyhd *d, const struct pmsg_dns_record *m) {
    static const char *const actions[] = {
        [PDNS_ANSWERED] = "answered", [PDNS_DENIED] = "denied", [PDNS_NODATA] = "nodata",
        [PDNS_FAILED] = "failed",     [PDNS_REFUSED] = "refused",
    };
    static const char *const rcodes[] = {"NOERROR",  "FORMERR", "SERVFAIL",
                                         "NXDOMAIN", "NOTIMP",  "REFUSED"};
    struct session *s = session_find(d, m->session);
    struct dns_fwd *f = s ? s->dns : NULL;
    char kv[1600] = "", tbuf[16], rc[24], addrs[1100] = "";

    if (!f)
        return; /* ended since: its end is on record already */
    f->n_dropped += m->dropped_inflight;
    f->n_unrecorded += m->unsent;
    if (m->action == PDNS_NONE) {
        record_gaps(f, false);
        return;
    }
    if (!record_allowed(f))
        return;
    audit_kv(kv, sizeof(kv), "name", m->name[0] ? m->name : ".");
    audit_kv(kv, sizeof(kv), "type", dns_type_name(m->qtype, tbuf, sizeof(tbuf)));
    if (m->rcode < ARRAY_SIZE(rcodes))
        audit_kv(kv, sizeof(kv), "rcode", rcodes[m->rcode]);
    else {
        snprintf(rc, sizeof(rc), "%u", m->rcode);
        audit_kv(kv, sizeof(kv), "rcode", rc);
    }
    for (size_t i = 0; i < m->n_addrs; i++) {
        char ab[INET6_ADDRSTRLEN];
        size_t len = strlen(addrs);
        if (inet_ntop(m->addrs[i].family, m->addrs[i].addr, ab, sizeof(ab)))
            snprintf(addrs + len, sizeof(addrs) - len, "%s%s", len ? "," : "", ab);
    }
    if (addrs[0])
        audit_kv(kv, sizeof(kv), "answers", addrs);
    if (m->n_addrs)
        snprintf(rc, sizeof(rc), "%u", m->ttl > 9999999 ? 9999999 : m->ttl),
            audit_kv(kv, sizeof(kv), "ttl", rc);
    audit_kv(kv, sizeof(kv), "via", m->via_tcp ? "tcp" : "udp");
    if (m->resolver < s->spec.n_resolvers) {
        const struct dr_rule *r = &s->spec.resolvers[m->resolver];
        char ab[INET6_ADDRSTRLEN];
        if (inet_ntop(r->family, r->addr, ab, sizeof(ab)))
            audit_kv(kv, sizeof(kv), "resolver", ab);
    }
    if (m->n_kept_out) {
        snprintf(rc, sizeof(rc), "%u", m->n_kept_out);
        audit_kv(kv, sizeof(kv), "dropped", rc); /* private and such: rebinding */
    }
    audit_dns(d, s, m->action == PDNS_DENIED, actions[m->action], kv);
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

void dns_fwd_sets_emptied(struct dns_fwd *f) {
    if (!f)
        return;
    uint64_t now = lyhd_mono_ms();
    for (size_t i = 0; i < f->n_maps; i++)
        if (f->maps[i].expiry_ms > now)
            f->maps[i].expiry_ms = now;
}

/* Put what an allowed name resolved to in the session's set, with a timeout
 * of max(ttl, the floor) + grace, before the answer goes out (an immediate
 * connect finds it). An element's timeout only grows. -errno: nothing is
 * answered (SERVFAIL). */
static int fill_sets(struct dns_fwd *f, const char *name, int family, const struct pmsg_addr *addrs,
                     size_t n, uint32_t ttl) {
    struct lyhd *d = f->d;
    uint64_t now = lyhd_mono_ms();
    uint64_t secs = (uint64_t)(ttl > d->cfg.dns_min_ttl_s ? ttl : d->cfg.dns_min_ttl_s);
    if (secs > 86400)
        secs = 86400;
    uint64_t timeout_ms = (secs + d->cfg.dns_grace_s) * 1000, expiry = now + timeout_ms;
    uint8_t add[DNS_ANSWER_ADDRS][16], refresh[DNS_ANSWER_ADDRS][16];
    size_t n_add = 0, n_refresh = 0;
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
    if (r == 0 && n_refresh) {
        r = nft_domain_elems_add(d->guard->nft, set, family, (const uint8_t(*)[16])refresh,
                                 n_refresh, timeout_ms, true);
        /* one of them is gone after all (root flushed the set, say): the
         * delete failed the transaction; add them, whichever are there */
        if (r == -ENOENT)
            r = nft_domain_elems_add(d->guard->nft, set, family,
                                     (const uint8_t(*)[16])refresh, n_refresh, timeout_ms, false);
    }
    if (r < 0) {
        log_warn("session '%s': cannot add what '%s' resolved to to set %s: %s", f->s->row.id,
                 name, set, strerror(-r));
        return r;
    }
    for (size_t i = 0; i < n; i++) {
        struct dns_map *m = map_get(f, family, addrs[i].addr);
        if (!m)
            continue;
        if (m->expiry_ms < expiry)
            m->expiry_ms = expiry;
        map_name(m, name);
    }
    return 0;
}

int dns_fwd_on_answer(struct lyhd *d, const struct pmsg_dns_answer *m) {
    struct session *s = session_find(d, m->session);
    struct dns_fwd *f = s ? s->dns : NULL;
    int family = m->qtype == DNS_TYPE_A ? AF_INET : AF_INET6;

    if (!f)
        return -ENOENT;
    if (!s->spec.n_domains) {
        /* no allowlist: only remember the names, for the flow records */
        uint64_t expiry = lyhd_mono_ms() + (uint64_t)(m->ttl > 86400 ? 86400 : m->ttl) * 1000;
        for (size_t i = 0; i < m->n_addrs; i++) {
            struct dns_map *e = map_get(f, family, m->addrs[i].addr);
            if (!e)
                continue;
            if (e->expiry_ms < expiry)
                e->expiry_ms = expiry;
            map_name(e, m->name);
        }
        return 0;
    }
    /* An allowlist: the relay checked all of this; so do we, since it parses
     * what agents and resolvers send and may not be what it was. Its
     * addresses are only ever given once the parent said so. */
    if (!m->want_reply)
        return -EPROTO;
    if (!name_allowed(s, m->name)) {
        log_warn("session '%s': the protocol process asked to open addresses for '%s', "
                 "which the session may not resolve; refused",
                 s->row.id, m->name);
        return -EPERM;
    }
    for (size_t i = 0; i < m->n_addrs; i++) {
        /* LAN, loopback, link-local, CGN, multicast, documentation...: the
         * ranges chain s-<id> refuses anyway */
        if (dr_addr_blocked(m->addrs[i].family, m->addrs[i].addr)) {
            /* the relay keeps these out itself: only a compromised process asks */
            log_error("session '%s': the protocol process asked to open a blocked address for "
                      "'%s'; refused",
                      s->row.id, m->name);
            return -EBADMSG;
        }
    }
    return m->n_addrs ? fill_sets(f, m->name, family, m->addrs, m->n_addrs, m->ttl) : 0;
}

/* ---- the listening sockets -------------------------------------------------------------- */

/* Bind the four sockets on port (0: the kernel's pick for the first, the
 * same for the rest). -EADDRINUSE when one of them is taken. */
static int bind_all(struct dns_fwd *f, uint16_t port, uint16_t *ret_port) {
    for (int fam = 0; fam < 2; fam++)
        for (int k = 0; k < 2; k++) {
            static const uint8_t lo4[4] = {127, 0, 0, 1}, lo6[16] = {[15] = 1};
            int *fdp = k ? &f->tcp[fam] : &f->udp[fam];
            struct sockaddr_storage ss;
            socklen_t sl = dns_sockaddr(fam ? AF_INET6 : AF_INET, fam ? lo6 : lo4, port, &ss);
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

/* A session id into a message's field (exactly PMSG_ID_LEN characters). */
static int copy_id(char out[PMSG_ID_LEN + 1], const char *id) {
    if (strnlen(id, PMSG_ID_LEN + 1) != PMSG_ID_LEN)
        return -EINVAL;
    memcpy(out, id, PMSG_ID_LEN + 1);
    return 0;
}

static void close_all(struct dns_fwd *f) {
    for (int i = 0; i < 2; i++) {
        CLOSE_FD(f->udp[i]);
        CLOSE_FD(f->tcp[i]);
    }
}

int dns_fwd_announce(struct lyhd *d, struct session *s) {
    struct dns_fwd *f = s->dns;
    struct pmsg_dns_start m;
    uint8_t buf[PMSG_MAX_BYTES];
    int fds[4];
    size_t len, nfds = 0;
    int r;

    if (!f || !pproc_ready(d))
        return 0; /* said to the protocol process when it is (re)started */
    memset(&m, 0, sizeof(m));
    if (copy_id(m.session, s->row.id) < 0)
        return -EINVAL;
    snprintf(m.iface, sizeof(m.iface), "%s", s->spec.iface);
    const int order[4] = {f->udp[0], f->tcp[0], f->udp[1], f->tcp[1]};
    for (int i = 0; i < 4; i++)
        if (order[i] >= 0) {
            m.fd_mask |= (uint8_t)(1u << i);
            fds[nfds++] = order[i];
        }
    for (size_t i = 0; i < s->spec.n_resolvers && i < PMSG_RESOLVERS; i++) {
        m.resolvers[i].family = s->spec.resolvers[i].family;
        memcpy(m.resolvers[i].addr, s->spec.resolvers[i].addr, 16);
        m.n_resolvers++;
    }
    m.n_domains = (uint8_t)s->spec.n_domains;
    memcpy(m.domains, s->spec.domains, s->spec.domains_len);
    m.domains_len = s->spec.domains_len;
    if ((r = pmsg_encode_dns_start(&m, buf, sizeof(buf), &len)) < 0) {
        log_error("session '%s': cannot describe its DNS to the protocol process: %s", s->row.id,
                  strerror(-r));
        return r;
    }
    return pproc_send(d, buf, len, fds, nfds);
}

void dns_fwd_announce_all(struct lyhd *d) {
    struct session *s;
    TAILQ_FOREACH(s, &d->sessions, link)
        if (s->dns)
            (void)dns_fwd_announce(d, s);
}

int dns_fwd_send_policy(struct lyhd *d) {
    const struct policy *p = policy_current(d);
    struct pmsg_dns_policy m;
    uint8_t buf[PMSG_MAX_BYTES];
    size_t len;
    int r;

    if (!pproc_ready(d))
        return 0;
    memset(&m, 0, sizeof(m));
    for (size_t i = 0; i < p->n_deny_domains && i < PMSG_POLICY_DOMAINS; i++)
        snprintf(m.deny[m.n_deny++], PMSG_PATTERN_MAX, "%s", p->deny_domains[i]);
    for (size_t i = 0; i < p->n_domain_ceiling && i < PMSG_POLICY_DOMAINS; i++)
        snprintf(m.ceiling[m.n_ceiling++], PMSG_PATTERN_MAX, "%s", p->domain_ceiling[i]);
    if ((r = pmsg_encode_dns_policy(&m, buf, sizeof(buf), &len)) < 0)
        return r;
    return pproc_send(d, buf, len, NULL, 0);
}

/* Add s's resolvers to v4/v6 (each address once). */
static void add_resolvers(const struct session *s, uint8_t (*v4)[16], size_t *n4, uint8_t (*v6)[16],
                          size_t *n6) {
    for (size_t i = 0; i < s->spec.n_resolvers; i++) {
        const struct dr_rule *r = &s->spec.resolvers[i];
        bool four = r->family == AF_INET;
        uint8_t (*v)[16] = four ? v4 : v6;
        size_t *n = four ? n4 : n6, k = 0;
        while (k < *n && memcmp(v[k], r->addr, 16) != 0)
            k++;
        if (k == *n && *n < NFT_PROTO_RESOLVERS_MAX)
            memcpy(v[(*n)++], r->addr, 16);
    }
}

/* Sets proto4/proto6 hold the resolvers of every session whose DNS lyhd
 * forwards (those listed, but gone's, and a starting one not listed yet):
 * the protocol process may send there (UDP port 53) and through lo, nowhere
 * else (nft_render.h). Made anew after each start and end. A failure is
 * logged: the protocol process then cannot reach a new session's resolver
 * (its agent gets SERVFAIL; nothing opens). */
/* What the relay is told must fit its messages whole: a list cut short
 * would drop deny entries (fail open) or allowed names. */
_Static_assert(POLICY_MAX_DOMAINS <= PMSG_POLICY_DOMAINS, "the policy's domain lists fit DNS_POLICY");
_Static_assert(POLICY_DOMAIN_MAX + 1 <= PMSG_PATTERN_MAX, "a policy pattern fits DNS_POLICY");
_Static_assert(GSPEC_MAX_RESOLVERS <= PMSG_RESOLVERS, "a session's resolvers fit DNS_START");
_Static_assert(GSPEC_MAX_DOMAINS <= PMSG_DOMAINS && GSPEC_DOMAIN_BYTES <= PMSG_DOMAIN_BYTES,
               "a session's allowlist fits DNS_START");

static int addr_cmp(const void *a, const void *b) { return memcmp(a, b, 16); }

static void sync_resolvers(struct lyhd *d, const struct dns_fwd *gone,
                           const struct session *starting) {
    static uint8_t v4[NFT_PROTO_RESOLVERS_MAX][16], v6[NFT_PROTO_RESOLVERS_MAX][16];
    /* what the sets hold (the last lists put there): most starts and ends
     * leave them as they are, and cost no nft transaction */
    static uint8_t had4[NFT_PROTO_RESOLVERS_MAX][16], had6[NFT_PROTO_RESOLVERS_MAX][16];
    static size_t n_had4, n_had6;
    size_t n4 = 0, n6 = 0;
    const struct session *s;

    if (!d->guard || !d->guard->base.proto_uid || d->stopping)
        return; /* stopping: the next lyhd makes them anew as it adopts the sessions */
    if (starting)
        add_resolvers(starting, v4, &n4, v6, &n6);
    TAILQ_FOREACH(s, &d->sessions, link)
        if (s->dns && s->dns != gone)
            add_resolvers(s, v4, &n4, v6, &n6);
    qsort(v4, n4, sizeof(v4[0]), addr_cmp);
    qsort(v6, n6, sizeof(v6[0]), addr_cmp);
    if (!d->guard->proto_sets_stale && n4 == n_had4 && n6 == n_had6 &&
        memcmp(v4, had4, n4 * 16) == 0 && memcmp(v6, had6, n6 * 16) == 0)
        return;
    int r = nft_proto_resolvers_set(d->guard->nft, v4, n4, v6, n6);
    if (r < 0) {
        log_error("cannot let the protocol process reach the sessions' resolvers (%zu IPv4, %zu "
                  "IPv6): %s",
                  n4, n6, strerror(-r));
        d->guard->proto_sets_stale = true; /* try again at the next start or end */
        return;
    }
    memcpy(had4, v4, n4 * 16);
    memcpy(had6, v6, n6 * 16);
    n_had4 = n4;
    n_had6 = n6;
    d->guard->proto_sets_stale = false;
}

void dns_fwd_resolvers_sync(struct lyhd *d) {
    sync_resolvers(d, NULL, NULL);
}

void dns_fwd_free(struct dns_fwd *f) {
    if (!f)
        return;
    sync_resolvers(f->d, f, NULL);
    if (pproc_ready(f->d)) {
        struct pmsg_dns_stop m;
        uint8_t buf[64];
        size_t len;
        if (copy_id(m.session, f->s->row.id) == 0 && pmsg_encode_dns_stop(&m, buf, sizeof(buf), &len) == 0)
            (void)pproc_send(f->d, buf, len, NULL, 0);
    }
    record_gaps(f, true);
    close_all(f);
    free(f->maps);
    free(f->map_index);
    free(f);
}

unsigned dns_fwd_fds(const struct dns_fwd *f) {
    if (!f)
        return 0;
    unsigned n = 0;
    for (int i = 0; i < 2; i++)
        n += (f->udp[i] >= 0) + (f->tcp[i] >= 0);
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
        close_all(f);
        free(f);
        return r;
    }
    s->spec.dns_port = port;
    s->dns = f;
    sync_resolvers(d, NULL, s);
    /* The relay in the protocol process serves it from now on (or, if that
     * process is being started again, once it is: the sockets hold what
     * comes meanwhile). */
    (void)dns_fwd_announce(d, s);
    return 0;
}
