/* The audit pipeline inside lyhd: NFLOG in, batches to audit.db, streams out.
 *
 * Owns the NFLOG socket, the in-memory batch, audit.db, the retention timer
 * and the query/follow streams. It never blocks the loop on anything but
 * audit.db's own disk I/O: the NFLOG socket is non-blocking and read a
 * bounded number of times per wakeup, a query sends one page and yields, and
 * pruning deletes a bounded number of rows per tick.
 *
 * Accounting argument (why no event disappears unexplained):
 *  - Every packet a log rule of ours sees is counted by a counter in the same
 *    chain (the verdict counter for rejects, the log rule's own counter for
 *    accepts, see platform/linux/nft_render.c). At session end the records of
 *    the session are counted in audit.db and compared; a shortfall (the rate
 *    limit, an overrun, a crash of lyhd) becomes a GAP record with the exact
 *    number per verdict.
 *  - The kernel numbers the events it sends (NFULNL_CFG_F_SEQ); a jump in the
 *    numbers is events dropped before we read them (socket overrun), recorded
 *    at once as a GAP record (which session they belonged to is unknowable;
 *    the session-end comparison then names the session).
 *  - A batch that cannot be written is kept and retried; records that do not
 *    fit while it is stuck are counted and recorded as a GAP once writing
 *    works again.
 *  - Request records are rate-limited per uid and in all (audit_rate.c);
 *    what the limits drop is counted per uid and written as a GAP record
 *    about that uid, so the user it concerns can see it.
 *  - Retention counts what it removes in audit.db itself, in the transaction
 *    that removes it, and writes GAP records per uid (storage/audit_db.c). */
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <syslog.h>
#include <time.h>

#include <event2/event.h>

#include "audit/nflog.h"
#include "audit/sd_format.h"
#include "common/macros.h"
#include "common/utf8.h"
#include "daemon/audit.h"
#include "daemon/audit_measure.h"
#include "daemon/dns_fwd.h"
#include "daemon/audit_rate.h"
#include "daemon/guard.h"
#include "daemon/log.h"
#include "daemon/lyhd.h"
#include "daemon/pmsg.h"
#include "daemon/policy.h"
#include "daemon/pproc.h"
#include "daemon/rpc.h"
#include "daemon/session.h"
#include "daemon/syslog_out.h"
#include "platform/linux/nft.h"
#include "platform/linux/proc.h"

#define AUDIT_FLUSH_COUNT 512      /* write when the batch holds this many */
#define AUDIT_BATCH_MAX 16384      /* beyond this (audit.db stuck), count and drop */
#define AUDIT_PAGE 256             /* records per page of a stream */
#define AUDIT_OUT_HIGH (1u << 20)  /* pause a stream while this much output is queued */
/* a stream alone (at most the mark and a page of rows of at most 1 KiB)
 * never makes conn.c stop reading its connection's requests */
_Static_assert(AUDIT_OUT_HIGH + AUDIT_PAGE * 1024u < CONN_OUT_RESUME,
               "a stream's own output must stay below the answers pause");
/* More events than NFLOG's 16 MiB socket can hold (a copy is >= 100 bytes) */
#define AUDIT_SEQ_GAP_MAX (UINT32_C(1) << 20)
#define AUDIT_PRUNE_ROWS 2000      /* rows per retention step */
#define AUDIT_PRUNE_IDLE_S 10      /* retention check interval when nothing to do */
#define AUDIT_PRUNE_GAP_DELAY_S 600 /* one retention gap per uid per 10 minutes at most */
#define AUDIT_IFCACHE 32
/* The log rules' rate limit (audit_flow_rate): 1/AUDIT_FLOW_SHARE of what
 * audit.db's writes took at start, within these bounds; the fastest of
 * AUDIT_MEASURE_ROUNDS batches of AUDIT_FLUSH_COUNT records written to a
 * scratch file beside it. */
#define AUDIT_FLOW_SHARE 3u
#define AUDIT_FLOW_RATE_MIN 2000u
#define AUDIT_FLOW_RATE_MAX 1000000u
#define AUDIT_MEASURE_ROUNDS 5
/* ... and measured again off the loop, keeping the best (audit_measure.h):
 * four more times, one second apart */
#define AUDIT_REMEASURE_TIMES 4
#define AUDIT_REMEASURE_GAP_MS 1000
#define NFLOG_RCVBUF (16u << 20)
#define NFLOG_COPY 128
#define NFLOG_QTHRESH 64
#define NFLOG_FLUSH_MS 10

struct audit_stream {
    struct audit *a;
    struct rpc_call *call;
    struct audit_filter f;
    uint64_t remaining;  /* with limited: records still to send */
    bool limited;
    bool follow;
    bool idle;           /* follow: caught up, waiting for the next commit */
    bool in_pump;        /* inside audit_db_page: a vanished client only marks it */
    bool gone;
    uint64_t admin_checked_ms; /* an admin's stream: rights last checked */
    struct event *ev;
    TAILQ_ENTRY(audit_stream) link;
};

struct ifcache_ent {
    uint32_t index;
    char name[IF_NAMESIZE];
};

struct audit {
    struct lyhd *d;
    struct audit_db *db;
    struct nflog *nl;         /* bound here, read by the protocol process */
    uint32_t next_seq;        /* NFULA_SEQ expected next (nflog_seq_advance) */
    uint32_t sync_asked;      /* the last FLOWS_SYNC sent */
    uint32_t sync_done;       /* the last FLOWS_SYNCED received */
    struct event *ev_flush;
    struct event *ev_prune;
    struct audit_rec *batch;  /* owned, cap entries; batch[i].detail owned (malloc) */
    size_t n, cap;
    uint64_t dropped;         /* records not kept while audit.db was not writable */
    bool write_failing;
    uint64_t last_fail_log_ms;
    struct nflog_read_stats st;
    uint64_t lost_recorded;   /* st.lost already turned into GAP records */
    uint64_t lost_note_ms;    /* when note_lost last wrote one */
    struct event *ev_lost;    /* writes a held-back one */
    struct audit_rate rate;   /* request records: per-uid and global buckets */
    struct event *ev_rate;    /* writes the rate limit's drops as gap records */
    struct syslog_out *so;    /* --syslog-audit: where committed records also go */
    struct ifcache_ent ifc[AUDIT_IFCACHE];
    unsigned ifc_next;
    TAILQ_HEAD(, audit_stream) streams;
    unsigned flow_rate;       /* the log rules' limit, events/s (audit_flow_rate) */
    uint64_t took;            /* the best measurement of audit.db's writes, records/s (0: none) */
    struct audit_measure *measure; /* measuring again, off the loop */
};

static int64_t wall_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Session ids are SESSION_ID_LEN (16) hex characters; the row's field is wider. */
static void copy_sid(char dst[17], const char *id) {
    size_t n = strnlen(id, 16);
    memcpy(dst, id, n);
    dst[n] = '\0';
}

/* ---- details -------------------------------------------------------------------- */

/* How one character of a value is written: as it is, or escaped (a
 * backslash before '"' and '\\'; \xNN for a byte that is not valid UTF-8 or
 * starts a control, bidi or separator code point, see utf8_cp_unsafe). Its
 * bytes in esc, their count returned; *used: how many input bytes. */
static size_t kv_unit(const unsigned char *p, size_t n, char esc[5], size_t *used) {
    uint32_t cp = 0;
    size_t l = utf8_next(p, n, &cp);

    if (l == 0 || utf8_cp_unsafe(cp)) {
        snprintf(esc, 5, "\\x%02x", p[0]);
        *used = 1;
        return 4;
    }
    *used = l;
    if (cp == '"' || cp == '\\') {
        esc[0] = '\\';
        esc[1] = (char)cp;
        return 2;
    }
    memcpy(esc, p, l);
    return l;
}

void audit_kv(char *buf, size_t size, const char *key, const char *value) {
    const unsigned char *v = (const unsigned char *)value;
    size_t off = strnlen(buf, size), n = strlen(value), used;
    bool quote = n == 0;
    char esc[5];

    if (off + 1 >= size)
        return;
    for (size_t i = 0; i < n && !quote; i += used)
        quote = kv_unit(v + i, n - i, esc, &used) != used || v[i] == ' ' || v[i] == '=';
    int k = snprintf(buf + off, size - off, "%s%s=%s", off ? " " : "", key, quote ? "\"" : "");
    if (k < 0 || (size_t)k >= size - off) {
        buf[off] = '\0';
        return;
    }
    off += (size_t)k;
    for (size_t i = 0; i < n; i += used) {
        size_t el = kv_unit(v + i, n - i, esc, &used);
        if (off + el + 2 > size)
            break; /* cut at a whole character or escape, keeping the closing quote */
        memcpy(buf + off, esc, el);
        off += el;
    }
    if (quote && off + 1 < size)
        buf[off++] = '"';
    buf[off] = '\0';
}

static void kv_u64(char *buf, size_t size, const char *key, uint64_t v) {
    char num[24];
    snprintf(num, sizeof(num), "%" PRIu64, v);
    audit_kv(buf, size, key, num);
}

/* ---- the batch ------------------------------------------------------------------ */

static void flush(struct audit *a);
static void streams_wake(struct audit *a);

static void arm_flush(struct audit *a, unsigned ms) {
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    if (!evtimer_pending(a->ev_flush, NULL))
        evtimer_add(a->ev_flush, &tv);
}

/* Copy rec (and its detail) into the batch. */
static void push(struct audit *a, const struct audit_rec *rec) {
    if (a->n == a->cap) {
        a->dropped++;
        return;
    }
    struct audit_rec *r = &a->batch[a->n];
    *r = *rec;
    r->id = 0;
    r->detail = NULL;
    if (rec->detail && rec->detail[0]) {
        r->detail = strdup(rec->detail);
        if (!r->detail) {
            a->dropped++;
            return;
        }
    }
    a->n++;
    if (a->n >= AUDIT_FLUSH_COUNT && !a->write_failing)
        flush(a);
    else
        arm_flush(a, a->d->cfg.audit_flush_ms);
}

static void syslog_rec(struct audit *a, const struct audit_rec *rec) {
    char line[AUDIT_DETAIL_MAX + 1024];
    int k = audit_sd_format(rec, line, sizeof(line));

    if (k < 0 && k != -ENOSPC) /* -ENOSPC: cut, still a complete element */
        return;
    int sev = rec->verdict == AUDIT_VERDICT_DENIED || rec->kind == AUDIT_KIND_GAP ? LOG_WARNING
                                                                                  : LOG_INFO;
    syslog_out_send(a->so, sev, line);
}

static void forward_syslog(struct audit *a, size_t n) {
    if (!a->so)
        return;
    for (size_t i = 0; i < n; i++)
        syslog_rec(a, &a->batch[i]);
}

static void free_batch(struct audit *a) {
    for (size_t i = 0; i < a->n; i++)
        free((char *)a->batch[i].detail);
    a->n = 0;
}

/* Write the batch; then, if records had to be dropped meanwhile, write a gap
 * record saying how many (a second round, so it does not wait for a timer). */
static void flush(struct audit *a) {
    if (!a->db)
        return;
    for (int round = 0; round < 2; round++) {
        if (a->n > 0) {
            int r = audit_db_append(a->db, a->batch, a->n);
            if (r == -EINVAL) {
                /* We built a record the schema refuses: a bug. Retrying would
                 * wedge the log for good; drop the batch and say so. */
                log_error("audit.db refused a batch of %zu record(s) as invalid (%s); dropping "
                          "it; this is a bug",
                          a->n, audit_db_errmsg(a->db));
                a->dropped += a->n;
                free_batch(a);
            } else if (r < 0) {
                uint64_t now = lyhd_mono_ms();
                if (!a->write_failing || now - a->last_fail_log_ms > 10000) {
                    log_error("audit.db: writing %zu record(s) failed: %s; keeping them and "
                              "retrying",
                              a->n, audit_db_errmsg(a->db));
                    a->last_fail_log_ms = now;
                }
                a->write_failing = true;
                arm_flush(a, 1000);
                return;
            } else {
                if (a->write_failing)
                    log_info("audit.db: writing works again");
                a->write_failing = false;
                forward_syslog(a, a->n);
                free_batch(a);
                streams_wake(a);
            }
        }
        if (a->dropped == 0)
            return;
        char detail[128] = "";
        struct audit_rec g = {.time_us = wall_us(), .kind = AUDIT_KIND_GAP, .missed = a->dropped};
        snprintf(g.action, sizeof(g.action), "unwritable");
        audit_kv(detail, sizeof(detail), "reason", "audit.db could not take these records");
        g.detail = detail;
        a->dropped = 0;
        push(a, &g);
    }
}

static void on_flush(evutil_socket_t fd, short what, void *arg) {
    flush(arg);
}

void audit_note(struct lyhd *d, int kind, const char *session, bool has_uid, uint32_t uid,
                const char *action, const char *fmt, ...) {
    struct audit *a = d->audit;
    char detail[AUDIT_DETAIL_MAX];
    struct audit_rec r = {.time_us = wall_us(), .kind = (uint8_t)kind, .has_uid = has_uid,
                          .uid = uid};
    va_list ap;

    if (!a)
        return;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    copy_sid(r.session, session ? session : "");
    snprintf(r.action, sizeof(r.action), "%s", action ? action : "");
    r.detail = detail;
    push(a, &r);
}

void audit_dns(struct lyhd *d, const struct session *s, bool denied, const char *action,
               const char *detail) {
    struct audit *a = d->audit;
    struct audit_rec r = {.time_us = wall_us(), .kind = AUDIT_KIND_DNS, .has_uid = true,
                          .uid = s->row.uid,
                          .verdict = denied ? AUDIT_VERDICT_DENIED : AUDIT_VERDICT_ALLOWED,
                          .detail = detail};
    if (!a)
        return;
    copy_sid(r.session, s->row.id);
    snprintf(r.iface, sizeof(r.iface), "%s", s->spec.iface);
    snprintf(r.action, sizeof(r.action), "%s", action);
    push(a, &r);
}

/* Request records: each uid 5/s (bursts of 20), all together 50/s (bursts
 * of 200); what is dropped is written per uid a second after the first drop. */
#define AUDIT_REQ_UID_RATE 5
#define AUDIT_REQ_UID_BURST 20
#define AUDIT_REQ_RATE 50
#define AUDIT_REQ_BURST 200
#define AUDIT_REQ_REPORT_MS 1000

static const struct audit_rate_params req_rate = {
    .uid_rate = AUDIT_REQ_UID_RATE,
    .uid_burst = AUDIT_REQ_UID_BURST,
    .all_rate = AUDIT_REQ_RATE,
    .all_burst = AUDIT_REQ_BURST,
    .report_ms = AUDIT_REQ_REPORT_MS,
};

static void push_rate_gap(struct audit *a, const struct audit_rate_drops *d) {
    char gd[384] = "", limits[96];
    struct audit_rec g = {.time_us = wall_us(), .kind = AUDIT_KIND_GAP, .has_uid = d->has_uid,
                          .uid = d->uid, .missed = d->by_uid + d->by_all + d->by_table};

    snprintf(g.action, sizeof(g.action), "requests");
    if (d->has_uid) {
        audit_kv(gd, sizeof(gd), "reason", "request records over the rate limit");
        kv_u64(gd, sizeof(gd), "dropped_by_uid_limit", d->by_uid);
        kv_u64(gd, sizeof(gd), "dropped_by_global_limit", d->by_all);
    } else {
        audit_kv(gd, sizeof(gd), "reason",
                 "request records of more uids over the rate limit at once than lyhd tracks");
        kv_u64(gd, sizeof(gd), "dropped_table_full", d->by_table);
    }
    snprintf(limits, sizeof(limits), "%d/s per uid (burst %d), %d/s in all (burst %d)",
             AUDIT_REQ_UID_RATE, AUDIT_REQ_UID_BURST, AUDIT_REQ_RATE, AUDIT_REQ_BURST);
    audit_kv(gd, sizeof(gd), "limits", limits);
    g.detail = gd;
    push(a, &g);
}

/* Write the rate limit's drops that are due (all of them with flush) as gap
 * records; come back when the next ones are. */
static void report_rate_drops(struct audit *a, bool flush) {
    struct audit_rate_drops d[16];
    uint64_t now = lyhd_mono_ms(), next;
    size_t n;

    /* Bounded: the table has 64 slots and an overflow, 16 at a time. */
    for (int round = 0; round < (AUDIT_RATE_SLOTS + 1 + 15) / 16; round++) {
        n = audit_rate_take(&a->rate, now, flush, d, ARRAY_SIZE(d));
        for (size_t i = 0; i < n; i++)
            push_rate_gap(a, &d[i]);
        if (n < ARRAY_SIZE(d))
            break;
    }
    next = audit_rate_next_ms(&a->rate, now);
    if (next != UINT64_MAX && !flush) {
        struct timeval tv = {.tv_sec = (time_t)(next / 1000),
                             .tv_usec = (suseconds_t)(next % 1000) * 1000};
        evtimer_add(a->ev_rate, &tv);
    }
}

static void on_rate(evutil_socket_t fd, short what, void *arg) {
    report_rate_drops(arg, false);
}

bool audit_request(struct lyhd *d, uid_t uid, pid_t pid, const char *label, const char *method,
                   int code,
                   const char *action, const char *why) {
    struct audit *a = d->audit;
    char detail[1024] = "";
    char num[24];

    if (!a)
        return false;
    if (!audit_rate_admit(&a->rate, (uint32_t)uid, lyhd_mono_ms())) {
        if (!evtimer_pending(a->ev_rate, NULL))
            report_rate_drops(a, false);
        return false;
    }
    if (method)
        audit_kv(detail, sizeof(detail), "method", method);
    snprintf(num, sizeof(num), "%d", code);
    audit_kv(detail, sizeof(detail), "code", num);
    snprintf(num, sizeof(num), "%d", (int)pid);
    audit_kv(detail, sizeof(detail), "pid", num);
    char now[32];
    if (!label || !label[0]) /* not read at connect: now */
        label = proc_label(pid, now, sizeof(now)) == 0 ? now : "?";
    audit_kv(detail, sizeof(detail), "proc", label);
    audit_kv(detail, sizeof(detail), "why", why);
    audit_note(d, AUDIT_KIND_REQUEST, NULL, true, uid, action, "%s", detail);
    return true;
}

/* ---- NFLOG ---------------------------------------------------------------------- */

static const char *ifname(struct audit *a, uint32_t index) {
    if (index == 0)
        return "";
    for (unsigned i = 0; i < AUDIT_IFCACHE; i++)
        if (a->ifc[i].index == index)
            return a->ifc[i].name;
    struct ifcache_ent *e = &a->ifc[a->ifc_next++ % AUDIT_IFCACHE];
    if (!if_indextoname(index, e->name))
        snprintf(e->name, sizeof(e->name), "if%" PRIu32, index);
    e->index = index;
    return e->name;
}

static void rec_to_event(const struct audit_rec *r, Lianyaohu__V1__AuditEvent *ev) {
    ev->id = r->id;
    ev->time_unix_us = r->time_us > 0 ? (uint64_t)r->time_us : 0;
    ev->kind = r->kind;
    ev->session_id = (char *)r->session;
    ev->has_uid = r->has_uid;
    ev->uid = r->uid;
    ev->verdict = r->verdict;
    ev->family = r->family;
    ev->protocol = r->protocol;
    ev->src_addr.data = (uint8_t *)r->src;
    ev->src_addr.len = r->addr_len;
    ev->dst_addr.data = (uint8_t *)r->dst;
    ev->dst_addr.len = r->addr_len;
    ev->src_port = r->sport;
    ev->dst_port = r->dport;
    ev->interface = (char *)r->iface;
    ev->action = (char *)r->action;
    ev->detail = (char *)(r->detail ? r->detail : "");
    ev->allowed_packets = r->allowed_packets;
    ev->allowed_bytes = r->allowed_bytes;
    ev->denied_packets = r->denied_packets;
    ev->denied_bytes = r->denied_bytes;
    ev->missed = r->missed;
}

/* --monitor: a refused flow of this session, to its Run call. */
static void monitor_send(struct session *s, const struct audit_rec *r) {
    Lianyaohu__V1__AuditEvent ev = LIANYAOHU__V1__AUDIT_EVENT__INIT;
    Lianyaohu__V1__RunEvent re = LIANYAOHU__V1__RUN_EVENT__INIT;
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;

    rec_to_event(r, &ev);
    re.event_case = LIANYAOHU__V1__RUN_EVENT__EVENT_FLOW;
    re.flow = &ev;
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_RUN_EVENT;
    resp.run_event = &re;
    rpc_send(s->call, &resp, false);
}

/* One flow event from the protocol process (decoded and checked by pmsg.c):
 * a record, its session's names and uid looked up here. Its time is the
 * kernel's when it came with one and is within an hour of ours (the
 * protocol process may lie; a record is not placed far from when it came). */
static void on_flow(struct audit *a, const struct pmsg_flow *f) {
    struct session *s = NULL;
    struct audit_rec r = {.kind = AUDIT_KIND_FLOW};
    int64_t now = wall_us();

    r.time_us = f->has_time && f->time_us > now - 3600 * INT64_C(1000000) &&
                        f->time_us < now + 3600 * INT64_C(1000000)
                    ? f->time_us
                    : now;
    r.verdict = f->verdict;
    r.family = f->family;
    r.protocol = f->protocol;
    r.addr_len = f->family == AF_INET ? 4 : f->family == AF_INET6 ? 16 : 0;
    memcpy(r.src, f->src, sizeof(r.src));
    memcpy(r.dst, f->dst, sizeof(r.dst));
    if (f->has_ports) {
        r.sport = f->sport;
        r.dport = f->dport;
    }
    if (f->origin == NFLOG_ORIGIN_SESSION) {
        memcpy(r.session, f->session, sizeof(r.session));
        s = session_find(a->d, f->session);
        if (s) {
            r.has_uid = true;
            r.uid = s->row.uid;
        }
    } else if (f->origin == NFLOG_ORIGIN_UID) {
        r.has_uid = true;
        r.uid = f->uid;
    }
    if (!r.has_uid && f->has_skuid) {
        r.has_uid = true;
        r.uid = f->skuid;
    }
    snprintf(r.iface, sizeof(r.iface), "%s", ifname(a, f->oif));
    /* the name(s) its destination was resolved from in this session */
    char names[400] = "";
    if (s && s->dns && r.addr_len) {
        dns_fwd_flow_note(s->dns, r.family, r.dst, names, sizeof(names));
        r.detail = names[0] ? names : NULL;
    }
    push(a, &r);
    if (s && s->monitor && s->call && r.verdict == AUDIT_VERDICT_DENIED) {
        /* A client that stopped reading (a paused terminal) must not fill its
         * output limit, which would close the connection and hang the session
         * up: drop monitor lines then (the log has them all). */
        if (!s->call->conn || conn_out_pending(s->call->conn) > AUDIT_OUT_HIGH)
            s->monitor_dropped++;
        else
            monitor_send(s, &r);
    }
}

static void note_lost(struct audit *a, bool now_or_never) {
    uint64_t now = lyhd_mono_ms();
    if (a->st.lost <= a->lost_recorded)
        return;
    /* one record a second at most (the counts add up meanwhile; the prune
     * timer and the stop write what waits) */
    if (!now_or_never && a->lost_note_ms && now - a->lost_note_ms < 1000) {
        if (a->ev_lost && !evtimer_pending(a->ev_lost, NULL)) {
            struct timeval tv = {0, (suseconds_t)(1000 - (now - a->lost_note_ms)) * 1000};
            evtimer_add(a->ev_lost, &tv);
        }
        return;
    }
    a->lost_note_ms = now;
    char detail[160] = "";
    char ov[24];
    struct audit_rec g = {.time_us = wall_us(), .kind = AUDIT_KIND_GAP,
                          .missed = a->st.lost - a->lost_recorded};
    snprintf(g.action, sizeof(g.action), "overrun");
    audit_kv(detail, sizeof(detail), "reason", "the kernel dropped flow events before lyhd read them");
    snprintf(ov, sizeof(ov), "%" PRIu64, a->st.overruns);
    audit_kv(detail, sizeof(detail), "overruns_total", ov);
    g.detail = detail;
    a->lost_recorded = a->st.lost;
    log_warn("audit: the kernel dropped %" PRIu64 " flow event(s) (socket overrun); recorded as a gap",
             g.missed);
    push(a, &g);
}

static void on_lost(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    note_lost(arg, true);
}

int audit_on_flows(struct lyhd *d, const struct pmsg_flows *m) {
    struct audit *a = d->audit;
    if (!a)
        return 0;
    /* The sequence numbers are the kernel's count of events: a gap is
     * events lost, however many protocol processes came and went. One
     * larger than the socket could ever hold is a lie (it would make the
     * real numbers that follow look old), and ends the process. */
    for (size_t i = 0; i < m->n; i++)
        if (m->v[i].has_seq && m->v[i].seq - a->next_seq > AUDIT_SEQ_GAP_MAX &&
            m->v[i].seq - a->next_seq < UINT32_C(0x80000000))
            return -EBADMSG;
    for (size_t i = 0; i < m->n; i++) {
        if (m->v[i].has_seq)
            a->st.lost += nflog_seq_advance(&a->next_seq, m->v[i].seq);
        on_flow(a, &m->v[i]);
    }
    a->st.packets += m->n;
    a->st.overruns += m->overruns;
    a->st.bad += m->bad;
    a->st.lost += m->unsent; /* read, but never reached us */
    note_lost(a, false);
    return 0;
}

int audit_nflog_fd(const struct lyhd *d) {
    return d->audit ? nflog_fd(d->audit->nl) : -ENODEV;
}

uint32_t audit_flows_sync(struct lyhd *d) {
    struct audit *a = d->audit;
    uint8_t buf[32];
    size_t len;

    if (!a || !pproc_ready(d))
        return 0;
    if (++a->sync_asked == 0)
        a->sync_asked = 1;
    struct pmsg_sync m = {.id = a->sync_asked};
    if (pmsg_encode_sync(PMSG_FLOWS_SYNC, &m, buf, sizeof(buf), &len) < 0 ||
        pproc_send(d, buf, len, NULL, 0) < 0)
        return 0;
    return m.id;
}

bool audit_flows_synced_since(const struct lyhd *d, uint32_t id) {
    const struct audit *a = d->audit;
    return !a || id == 0 || (int32_t)(a->sync_done - id) >= 0;
}

int audit_flows_synced(struct lyhd *d, uint32_t id) {
    struct audit *a = d->audit;
    if (!a)
        return 0;
    /* only an answer to a question asked, and not one answered already */
    if (id == 0 || (int32_t)(id - a->sync_asked) > 0 || (int32_t)(id - a->sync_done) <= 0)
        return -EBADMSG;
    a->sync_done = id;
    return 0;
}

/* ---- sessions ------------------------------------------------------------------- */

static const char *scope_name(int scope) {
    switch (scope) {
    case LIANYAOHU__V1__SCOPE__SCOPE_SESSION: return "session";
    case LIANYAOHU__V1__SCOPE__SCOPE_UID_GID: return "uid";
    case LIANYAOHU__V1__SCOPE__SCOPE_USER: return "user";
    case LIANYAOHU__V1__SCOPE__SCOPE_NONE: return "none";
    default: return "unknown";
    }
}

void audit_session_started(struct lyhd *d, const struct session *s) {
    char detail[AUDIT_DETAIL_MAX] = "";
    char num[32];

    snprintf(num, sizeof(num), "%d", (int)s->pid);
    audit_kv(detail, sizeof(detail), "pid", num);
    audit_kv(detail, sizeof(detail), "argv0", s->row.argv0);
    audit_kv(detail, sizeof(detail), "cwd", s->row.cwd);
    audit_kv(detail, sizeof(detail), "scope", scope_name(s->row.scope));
    audit_kv(detail, sizeof(detail), "interface", s->row.interface[0] ? s->row.interface : "none");
    if (s->proxy[0])
        audit_kv(detail, sizeof(detail), "proxy", s->proxy);
    snprintf(num, sizeof(num), "%" PRIu64, s->row.policy_version);
    audit_kv(detail, sizeof(detail), "policy_version", num);
    snprintf(num, sizeof(num), "%d", d->landlock_abi);
    audit_kv(detail, sizeof(detail), "landlock_abi", num);
    if (d->landlock_abi < (int)POLICY_DEFAULT_MIN_LANDLOCK_ABI)
        audit_kv(detail, sizeof(detail), "landlock_scoping", "none");
    audit_kv(detail, sizeof(detail), "ipv6_blocked", s->spec.ipv6_blocked ? "yes" : "no");
    audit_kv(detail, sizeof(detail), "listeners", d->guard && d->guard->listeners ? "yes" : "no");
    if (s->sockets[0])
        audit_kv(detail, sizeof(detail), "sockets", s->sockets);
    audit_note(d, AUDIT_KIND_SESSION, s->row.id, true, s->row.uid, "start", "%s", detail);
}

unsigned audit_settle_ms(const struct lyhd *d) {
    return d->audit ? 2 * NFLOG_FLUSH_MS + 10 : 0;
}

static int count_flows(struct audit *a, const struct session *s, int verdict, uint64_t *ret) {
    struct audit_filter f = {.kind = AUDIT_KIND_FLOW, .verdict = (uint8_t)verdict,
                             .after_id = s->audit_after_id};
    copy_sid(f.session, s->row.id);
    return audit_db_count(a->db, &f, ret);
}

/* The session-end gap: what the counters saw and the log does not hold. */
static void push_session_gap(struct audit *a, const struct session *s, uint64_t miss_a,
                             uint64_t miss_d, const char *reason) {
    char gd[384] = "";
    struct audit_rec g = {.time_us = wall_us(), .kind = AUDIT_KIND_GAP, .has_uid = true,
                          .uid = s->row.uid, .missed = miss_a + miss_d};
    copy_sid(g.session, s->row.id);
    snprintf(g.action, sizeof(g.action), "session");
    kv_u64(gd, sizeof(gd), "allowed_missed", miss_a);
    kv_u64(gd, sizeof(gd), "denied_missed", miss_d);
    audit_kv(gd, sizeof(gd), "reason", reason);
    g.detail = gd;
    push(a, &g);
}

void audit_session_ended(struct lyhd *d, struct session *s) {
    struct audit *a = d->audit;
    char detail[768] = "";
    char num[32];
    struct nft_counters c = {0};
    bool have_counters = false;
    struct audit_rec end = {.kind = AUDIT_KIND_SESSION, .has_uid = true, .uid = s->row.uid};

    if (!a)
        return;
    /* Everything the kernel sent about the session was read before (the
     * teardown's FLOWS_SYNC, session.c); what is still missing shows below. */
    /* A chain of its own (the session scope; a --shared-user-firewall session
     * with cgroups) counts exactly this session's verdicts. */
    if (s->has_chain && s->row.chain[0]) {
        int r = guard_session_counters(d, s, &c);
        if (r == 0)
            have_counters = true;
        else
            log_warn_errno(-r, "audit: counters of session '%s' unreadable", s->row.id);
    }
    if (s->exited && s->row.signal == 0 && s->row.exit_code >= 0) {
        snprintf(num, sizeof(num), "%d", s->row.exit_code);
        audit_kv(detail, sizeof(detail), "exit", num);
    } else if (s->row.signal > 0) {
        snprintf(num, sizeof(num), "%d", s->row.signal);
        audit_kv(detail, sizeof(detail), "signal", num);
    } else {
        audit_kv(detail, sizeof(detail), "exit", "unknown");
    }
    if (!s->exec_ok && !s->adopted)
        audit_kv(detail, sizeof(detail), "started", "no");
    snprintf(num, sizeof(num), "%" PRId64,
             s->row.started_ms > 0 ? lyhd_wall_ms() - s->row.started_ms : 0);
    audit_kv(detail, sizeof(detail), "duration_ms", num);
    const char *totals = have_counters ? "counters"
                         : s->row.chain[0]                                     ? "unavailable"
                         : s->row.scope == LIANYAOHU__V1__SCOPE__SCOPE_NONE    ? "none"
                                                                               : "shared-chain";
    audit_kv(detail, sizeof(detail), "totals", totals);
    if (s->monitor_dropped)
        kv_u64(detail, sizeof(detail), "monitor_dropped", s->monitor_dropped);

    /* Compare what the counters saw with what audit.db holds for the session
     * (since its chain was last built: a rebuilt chain's counters start at 0). */
    if (have_counters) {
        uint64_t got_a = 0, got_d = 0;
        kv_u64(detail, sizeof(detail), "allowed_flows_counted", c.accept_flows);
        kv_u64(detail, sizeof(detail), "denied_events_counted", c.reject_packets);
        flush(a);
        if (!a->write_failing && count_flows(a, s, AUDIT_VERDICT_ALLOWED, &got_a) == 0 &&
            count_flows(a, s, AUDIT_VERDICT_DENIED, &got_d) == 0) {
            /* With Policy.log_allowed_flows off the chain counts allowed flows
             * without logging them: none is missing, none was meant to come. */
            uint64_t miss_a = s->accept_unlogged        ? 0
                              : c.accept_flows > got_a ? c.accept_flows - got_a
                                                       : 0;
            if (s->accept_unlogged)
                audit_kv(detail, sizeof(detail), "allowed_log", "off");
            uint64_t miss_d = c.reject_packets > got_d ? c.reject_packets - got_d : 0;
            kv_u64(detail, sizeof(detail), "allowed_flows", got_a);
            kv_u64(detail, sizeof(detail), "denied_events", got_d);
            if (miss_a + miss_d > 0)
                push_session_gap(a, s, miss_a, miss_d,
                                 "log rate limit, kernel overrun, lyhd restart or retention; "
                                 "totals are exact");
        } else {
            /* Cannot count what is on record: say so rather than claim nothing
             * is missing. The counted totals above still stand. */
            audit_kv(detail, sizeof(detail), "recorded", "unknown");
            log_warn("audit: cannot count the records of session '%s': %s", s->row.id,
                     audit_db_errmsg(a->db));
            push_session_gap(a, s, 0, 0,
                             "audit.db could not be counted at session end; compare "
                             "allowed_flows_counted and denied_events_counted of the end record");
        }
    }
    end.time_us = wall_us();
    copy_sid(end.session, s->row.id);
    snprintf(end.action, sizeof(end.action), "end");
    snprintf(end.iface, sizeof(end.iface), "%s", s->row.interface);
    end.allowed_packets = c.accept_packets;
    end.allowed_bytes = c.accept_bytes;
    end.denied_packets = c.reject_packets;
    end.denied_bytes = c.reject_bytes;
    end.detail = detail;
    push(a, &end);
    flush(a);
}

void audit_session_chain_built(struct lyhd *d, struct session *s) {
    struct audit *a = d->audit;
    uint64_t last = 0;

    if (!a)
        return;
    flush(a);
    if (audit_db_last_id(a->db, &last) == 0)
        s->audit_after_id = last;
}

/* ---- retention ------------------------------------------------------------------ */

static int syslog_row(const struct audit_rec *rec, void *ud) {
    syslog_rec(ud, rec);
    return 0;
}

/* Retention wrote gap records into audit.db itself (in the transaction that
 * removed what they count): forward them to syslog like every other record,
 * and tell the followers. */
static void retention_gaps_written(struct audit *a, const struct audit_prune_result *res) {
    log_debug("audit.db retention wrote %u gap record(s)", res->gaps);
    if (a->so) {
        struct audit_filter f = {.kind = AUDIT_KIND_GAP, .after_id = res->first_gap_id - 1};
        if (audit_db_page(a->db, &f, res->gaps, syslog_row, a) < 0)
            log_warn("audit.db: reading retention gap records back for syslog failed: %s",
                     audit_db_errmsg(a->db));
    }
    streams_wake(a);
}

/* One retention step (flush: only write what was removed and not yet
 * written down, at shutdown). Returns whether more work is waiting. */
static bool retention_step(struct audit *a, bool flush) {
    /* The admin policy's retention overrides the flags when it sets one. */
    unsigned days = policy_audit_max_age_days(a->d);
    struct audit_retention p = {
        .now_us = wall_us(),
        .max_age_days = days,
        .max_bytes = flush ? 0 : policy_audit_max_bytes(a->d),
        .max_rows = flush ? 0 : AUDIT_PRUNE_ROWS,
        .gap_delay_us = (int64_t)AUDIT_PRUNE_GAP_DELAY_S * 1000000,
        .flush_gaps = flush,
    };
    struct audit_prune_result res = {0};
    int r;

    if (days && !flush)
        p.older_than_us = p.now_us - (int64_t)days * 86400 * 1000000;
    r = audit_db_prune(a->db, &p, &res);
    if (r < 0) {
        log_warn("audit.db retention step failed: %s", audit_db_errmsg(a->db));
        return false;
    }
    if (res.deleted > 0)
        log_debug("audit.db retention removed %u record(s)", res.deleted);
    if (res.gaps > 0)
        retention_gaps_written(a, &res);
    return res.deleted > 0 || (res.gaps > 0 && res.gaps_pending);
}

static void on_prune(evutil_socket_t fd, short what, void *arg) {
    struct audit *a = arg;
    struct timeval tv = {.tv_sec = AUDIT_PRUNE_IDLE_S};

    if (retention_step(a, false))
        tv = (struct timeval){.tv_usec = 20000}; /* more may be due: soon, not at once */
    memset(a->ifc, 0, sizeof(a->ifc)); /* interfaces come and go; names are re-read */
    note_lost(a, false);
    evtimer_add(a->ev_prune, &tv);
}

/* A third of what audit.db's writes took, within the bounds. */
static unsigned flow_rate_of(uint64_t took) {
    uint64_t share = took / AUDIT_FLOW_SHARE;
    return share < AUDIT_FLOW_RATE_MIN   ? AUDIT_FLOW_RATE_MIN
           : share > AUDIT_FLOW_RATE_MAX ? AUDIT_FLOW_RATE_MAX
                                         : (unsigned)share;
}

/* The rate every session's log rules get. Under a flood of new flows
 * lyhd's cost is mostly audit.db's inserts (nearly all of the parent's CPU
 * in a profile, and the parent was 95% of lyhd's), so the limit follows
 * what the writes take on this machine now, measured on a scratch file
 * beside audit.db: a third of it. The whole path takes less than the
 * writes alone (the kernel's logging, the protocol process's decoding, the
 * relay, a big file's deeper indexes, and the flooding process itself on
 * the same CPUs): on a 2-CPU machine the scratch file took ~280k records/s
 * and the path, with the flood beside it, ~110k/s. A third keeps one
 * session's flood below that, so other sessions' records still get
 * through; beyond it the chain still counts every flow and the shortfall
 * is a gap record. A measurement that fails (audit.db's directory cannot
 * take writes, so appends will fail too) keeps the floor. */
static void set_flow_rate(struct audit *a) {
    char why[AUDIT_DB_ERR_MAX] = "";
    uint64_t took = 0;
    int r;

    if (a->d->cfg.audit_flow_rate) {
        a->flow_rate = a->d->cfg.audit_flow_rate;
        log_info("audit: each session logs up to %u new flows/s through its VPN interface "
                 "(--audit-flow-rate); beyond that they are counted in gap records",
                 a->flow_rate);
        return;
    }
    r = audit_db_measure(a->d->cfg.state_dir, AUDIT_FLUSH_COUNT, AUDIT_MEASURE_ROUNDS, &took, why,
                         sizeof(why));
    if (r < 0) {
        a->flow_rate = AUDIT_FLOW_RATE_MIN;
        log_warn("audit: cannot measure what audit.db takes (%s); each session logs up to %u new "
                 "flows/s",
                 why, a->flow_rate);
        return;
    }
    a->took = took;
    a->flow_rate = flow_rate_of(took);
    log_info("audit: audit.db takes %" PRIu64 " flow records/s here (measured now); each session "
             "logs up to %u new flows/s through its VPN interface, beyond that they are counted in "
             "gap records",
             took, a->flow_rate);
}

/* The measurements off the loop: a better figure than the best so far gives
 * sessions started from then on a higher rate (running ones keep theirs);
 * the last call says what was kept. */
static void on_measured_again(uint64_t took, unsigned measured, bool done, const char *why,
                              void *arg) {
    struct audit *a = arg;

    if (took > a->took) {
        a->took = took;
        a->flow_rate = flow_rate_of(took);
        guard_set_flow_rate(a->d, a->flow_rate);
    }
    if (why)
        log_warn("audit: measuring audit.db's writes again failed after %u time(s): %s", measured,
                 why);
    if (done)
        log_info("audit: audit.db takes %" PRIu64 " flow records/s here (the best of its start's "
                 "measurement and %u more while lyhd ran); each session logs up to %u new flows/s "
                 "through its VPN interface, beyond that they are counted in gap records",
                 a->took, measured, a->flow_rate);
}

void audit_measure_again(struct lyhd *d) {
    struct audit *a = d->audit;

    if (!a || !a->took || a->measure)
        return;
    struct audit_measure_params mp = {.dir = d->cfg.state_dir,
                                      .batch = AUDIT_FLUSH_COUNT,
                                      .rounds = AUDIT_MEASURE_ROUNDS,
                                      .times = AUDIT_REMEASURE_TIMES,
                                      .gap_ms = AUDIT_REMEASURE_GAP_MS};
    int k = audit_measure_start(d->base, &mp, on_measured_again, a, &a->measure);
    if (k < 0)
        log_warn("audit: cannot measure audit.db's writes again later (%s); the rate measured at "
                 "start stays",
                 strerror(-k));
}

unsigned audit_flow_rate(const struct lyhd *d) {
    return d->audit && d->audit->flow_rate ? d->audit->flow_rate : AUDIT_FLOW_RATE_MIN;
}

int audit_bytes(struct lyhd *d, uint64_t *ret_bytes) {
    if (!d->audit || !d->audit->db)
        return -ENODEV;
    return audit_db_size(d->audit->db, ret_bytes);
}

void audit_retention(const struct lyhd *d, unsigned *ret_days, uint64_t *ret_max_bytes) {
    *ret_days = policy_audit_max_age_days(d);
    *ret_max_bytes = policy_audit_max_bytes(d);
}

/* ---- streams -------------------------------------------------------------------- */

static void stream_free(struct audit_stream *st) {
    if (!st)
        return;
    TAILQ_REMOVE(&st->a->streams, st, link);
    if (st->ev)
        event_free(st->ev);
    if (st->call) {
        st->call->on_disconnect = NULL;
        st->call->state = NULL;
    }
    free(st);
}

/* The connection went away (maybe from inside a send of ours: a failed write
 * closes it at once). The call is freed by the connection; the stream goes now,
 * or when the page it is sending returns. */
static void stream_gone(struct rpc_call *call) {
    struct audit_stream *st = call->state;
    if (!st)
        return;
    st->call = NULL;
    if (st->in_pump)
        st->gone = true;
    else
        stream_free(st);
}

static int send_row(const struct audit_rec *rec, void *ud) {
    struct audit_stream *st = ud;
    Lianyaohu__V1__AuditEvent ev = LIANYAOHU__V1__AUDIT_EVENT__INIT;
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;

    rec_to_event(rec, &ev);
    resp.result_case = LIANYAOHU__V1__RESPONSE__RESULT_AUDIT_EVENT;
    resp.audit_event = &ev;
    st->f.after_id = rec->id;
    rpc_send(st->call, &resp, false);
    return st->gone || st->call->finished ? 1 : 0;
}

static void stream_end(struct audit_stream *st) {
    struct rpc_call *call = st->call;
    LyhResponse end = LIANYAOHU__V1__RESPONSE__INIT;

    stream_free(st);
    rpc_send(call, &end, true);
}

/* The next page after the loop polled again: a zero timer rather than
 * activating the event, because libevent runs events activated from a callback
 * in the same pass, so a stream would never yield to I/O until it is done. */
static void next_page(struct audit_stream *st) {
    static const struct timeval zero = {0, 0};
    evtimer_add(st->ev, &zero);
}

static void pump(evutil_socket_t fd, short what, void *arg) {
    struct audit_stream *st = arg;
    unsigned max = AUDIT_PAGE;

    if (!st->call)
        return;
    /* An admin's follow sees every user's records: it ends when the rights
     * do (checked at most once a second), as a new request would be refused. */
    if (st->follow && st->call->peer_is_admin &&
        lyhd_mono_ms() - st->admin_checked_ms >= 1000) {
        st->admin_checked_ms = lyhd_mono_ms();
        if (!conn_admin_now(st->a->d, st->call->peer.uid)) {
            struct rpc_call *call = st->call;
            stream_free(st);
            rpc_fail(call, LIANYAOHU__V1__CODE__PERMISSION_DENIED,
                     "your admin rights were revoked; this follow ends (a new one shows your own "
                     "records)");
            return;
        }
    }
    if (conn_out_pending(st->call->conn) > AUDIT_OUT_HIGH) {
        struct timeval tv = {.tv_usec = 2000};
        evtimer_add(st->ev, &tv);
        return;
    }
    if (st->limited && st->remaining < max)
        max = (unsigned)st->remaining;
    st->in_pump = true;
    int n = max ? audit_db_page(st->a->db, &st->f, max, send_row, st) : 0;
    st->in_pump = false;
    if (st->gone || !st->call || st->call->finished) {
        stream_free(st);
        return;
    }
    if (n < 0) {
        struct rpc_call *call = st->call;
        struct audit_db *db = st->a->db;
        log_warn("audit.db: reading for uid %u failed: %s", call->peer.uid, audit_db_errmsg(db));
        stream_free(st);
        rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "audit.db: %s", audit_db_errmsg(db));
        return;
    }
    if (st->limited) {
        st->remaining -= (unsigned)n;
        if (st->remaining == 0) {
            if (!st->follow) {
                stream_end(st);
                return;
            }
            /* The backlog is sent; anything after it is new: go on unlimited. */
            st->limited = false;
            next_page(st);
            return;
        }
    }
    if ((unsigned)n < max) {
        if (!st->follow) {
            stream_end(st);
            return;
        }
        st->idle = true; /* caught up: streams_wake() after the next commit */
        return;
    }
    next_page(st);
}

static void streams_wake(struct audit *a) {
    struct audit_stream *st;
    TAILQ_FOREACH(st, &a->streams, link) {
        if (st->follow && st->idle) {
            st->idle = false;
            next_page(st);
        }
    }
}

int audit_stream_start(struct lyhd *d, struct rpc_call *call, const struct audit_filter *f,
                       uint32_t limit, bool follow) {
    struct audit *a = d->audit;
    _cleanup_free_ struct audit_stream *st = NULL;
    int r;

    if (!a || !a->db)
        return -ENODEV;
    /* what was logged before the question is in the answer: a record may
     * wait up to --audit-flush-ms in the batch otherwise (a session that
     * just ended would be missing from `lyh run ...; lyh audit query`) */
    if (a->n > 0 && !a->write_failing)
        flush(a);
    st = calloc(1, sizeof(*st));
    if (!st)
        return -ENOMEM;
    st->a = a;
    st->call = call;
    st->f = *f;
    st->follow = follow;
    if (limit > 0) {
        uint64_t start = 0;
        r = audit_db_tail_start(a->db, f, limit, &start);
        if (r < 0)
            return r;
        if (start > st->f.after_id)
            st->f.after_id = start;
        st->limited = true;
        st->remaining = limit;
    } else if (follow && f->after_id == 0) {
        /* Follow without a backlog: only what is committed from now on. */
        r = audit_db_last_id(a->db, &st->f.after_id);
        if (r < 0)
            return r;
    }
    st->ev = evtimer_new(d->base, pump, st);
    if (!st->ev)
        return -ENOMEM;
    TAILQ_INSERT_TAIL(&a->streams, st, link);
    call->state = st;
    call->on_disconnect = stream_gone;
    next_page(st);
    TAKE_PTR(st);
    return 0;
}

/* ---- start / stop --------------------------------------------------------------- */

int audit_start(struct lyhd *d, char *why, size_t whylen) {
    _cleanup_free_ struct audit *a = calloc(1, sizeof(*a));
    char path[4096];
    char msg[AUDIT_DB_ERR_MAX] = "";
    bool was_clean = true;
    int r;

    if (!a) {
        snprintf(why, whylen, "out of memory");
        return -ENOMEM;
    }
    a->d = d;
    TAILQ_INIT(&a->streams);
    a->cap = AUDIT_BATCH_MAX;
    a->batch = calloc(a->cap, sizeof(a->batch[0]));
    a->ev_flush = evtimer_new(d->base, on_flush, a);
    a->ev_prune = evtimer_new(d->base, on_prune, a);
    a->ev_rate = evtimer_new(d->base, on_rate, a);
    a->ev_lost = evtimer_new(d->base, on_lost, a);
    audit_rate_init(&a->rate, &req_rate);
    if (!a->batch || !a->ev_flush || !a->ev_prune || !a->ev_rate || !a->ev_lost) {
        snprintf(why, whylen, "out of memory");
        r = -ENOMEM;
        goto fail;
    }
    if (snprintf(path, sizeof(path), "%s/audit.db", d->cfg.state_dir) >= (int)sizeof(path)) {
        snprintf(why, whylen, "state dir path too long");
        r = -ENAMETOOLONG;
        goto fail;
    }
    r = audit_db_open(path, &a->db, &was_clean, msg, sizeof(msg));
    if (r < 0) {
        snprintf(why, whylen, "cannot open %s: %s", path, msg[0] ? msg : strerror(-r));
        goto fail;
    }
    set_flow_rate(a);
    struct nflog_params np = {
        .group = NFTR_DEFAULT_NFLOG_GROUP,
        .copy_range = NFLOG_COPY,
        .rcvbuf = NFLOG_RCVBUF,
        .qthresh = NFLOG_QTHRESH,
        .flush_ms = NFLOG_FLUSH_MS,
    };
    r = nflog_open(&np, &a->nl);
    if (r < 0) {
        snprintf(why, whylen,
                 r == -EBUSY ? "cannot listen to NFLOG group %u: another process (ulogd? another "
                               "lyhd in this network namespace?) already does; stop it first"
                             : "cannot listen to NFLOG group %u: %s",
                 np.group, strerror(-r));
        goto fail;
    }
    if (d->cfg.syslog_audit) {
        const char *sp = d->cfg.syslog_audit_socket ? d->cfg.syslog_audit_socket : SYSLOG_OUT_DEFAULT;
        a->so = syslog_out_new(d->base, sp);
        if (!a->so) {
            r = -errno;
            snprintf(why, whylen, "--syslog-audit-socket %s: %s", sp, strerror(errno));
            goto fail;
        }
    }
    /* Not read here: the protocol process decodes it (PMSG_NFLOG_START). */
    struct timeval tv = {.tv_sec = 1};
    evtimer_add(a->ev_prune, &tv);
    d->audit = TAKE_PTR(a);
    if (!was_clean)
        audit_note(d, AUDIT_KIND_GAP, NULL, false, 0, "unclean",
                   "reason=\"lyhd stopped without closing audit.db (crash or kill -9): records "
                   "of its last unflushed batch (at most %u ms or %u records) may be missing; "
                   "session end records say exactly how many flows\"",
                   d->cfg.audit_flush_ms, AUDIT_FLUSH_COUNT);
    return 0;

fail:
    syslog_out_free(a->so);
    nflog_close(a->nl);
    /* Not close: that would mark the file clean and hide an earlier crash. */
    audit_db_abandon(a->db);
    if (a->ev_flush)
        event_free(a->ev_flush);
    if (a->ev_prune)
        event_free(a->ev_prune);
    if (a->ev_rate)
        event_free(a->ev_rate);
    if (a->ev_lost)
        event_free(a->ev_lost);
    free(a->batch);
    return r;
}

void audit_stop(struct lyhd *d) {
    struct audit *a = d->audit;

    if (!a)
        return;
    audit_measure_stop(a->measure);
    note_lost(a, true);
    report_rate_drops(a, true);
    flush(a);
    /* What retention removed and has not written down yet: now, so it does
     * not wait for the next lyhd (it would not be lost: audit.db keeps the
     * counts). Bounded: 256 gap records a step. */
    for (int i = 0; i < 64 && retention_step(a, true); i++)
        ;
    if (a->n > 0)
        log_error("audit.db: %zu record(s) could not be written at shutdown", a->n);
    while (!TAILQ_EMPTY(&a->streams)) {
        struct audit_stream *st = TAILQ_FIRST(&a->streams);
        struct rpc_call *call = st->call;
        stream_free(st);
        if (call)
            rpc_fail(call, LIANYAOHU__V1__CODE__UNAVAILABLE, "lyhd is stopping");
    }
    event_free(a->ev_flush);
    event_free(a->ev_prune);
    event_free(a->ev_rate);
    event_free(a->ev_lost);
    syslog_out_free(a->so);
    nflog_close(a->nl);
    /* Only a complete write marks the database clean. */
    if (a->n == 0)
        audit_db_close(a->db);
    else
        audit_db_abandon(a->db);
    free_batch(a);
    free(a->batch);
    free(a);
    d->audit = NULL;
}
