/* The guard's flow events, read in the protocol process (proto.h).
 *
 * The parent opens and binds the NFLOG group (that needs CAP_NET_ADMIN) and
 * hands the socket over; the bytes in it come from packets agents send, so
 * they are decoded here (audit/nflog_decode.c), never as root. Each event
 * whose log prefix is one of the guard's becomes a fixed-layout pmsg_flow;
 * up to PMSG_FLOWS_MAX go in one FLOWS message, sent when a read round ends
 * or the batch is full. The parent re-checks every field, keeps the sequence
 * bookkeeping (so events lost while no protocol process ran still count),
 * and writes audit.db.
 *
 * The socket can only be read from here: nfnetlink refuses every request
 * of a sender without CAP_NET_ADMIN, so this process cannot reconfigure the
 * group or reach nftables through it. */
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "audit/nflog.h"
#include "daemon/log.h"
#include "daemon/pmsg.h"
#include "daemon/proto.h"

#define FLOW_READS_PER_WAKEUP 16
#define FLOW_SYNC_ROUNDS      64 /* a sync reads at most this many rounds */

struct flow_reader {
    struct proto *p;
    struct nflog *nl;
    struct event *ev;
    struct nflog_read_stats st;   /* what nflog_read counted */
    uint64_t overruns_sent, bad_sent;
    uint32_t unsent;              /* events read that could not be sent */
    struct pmsg_flows batch;
};

static void flush(struct flow_reader *f) {
    static uint8_t buf[PMSG_MAX_BYTES];
    size_t len;
    uint64_t ov = f->st.overruns - f->overruns_sent, bad = f->st.bad - f->bad_sent;

    if (f->batch.n == 0 && ov == 0 && bad == 0 && f->unsent == 0)
        return;
    f->batch.overruns = ov > UINT32_MAX ? UINT32_MAX : (uint32_t)ov;
    f->batch.bad = bad > UINT32_MAX ? UINT32_MAX : (uint32_t)bad;
    f->batch.unsent = f->unsent;
    if (pmsg_encode_flows(&f->batch, buf, sizeof(buf), &len) == 0 &&
        proto_send(f->p, buf, len) == 0) {
        f->overruns_sent += f->batch.overruns;
        f->bad_sent += f->batch.bad;
        f->unsent = 0;
    } else {
        /* said in the next message that gets through */
        f->unsent = f->unsent > UINT32_MAX - f->batch.n ? UINT32_MAX : f->unsent + f->batch.n;
    }
    f->batch.n = 0;
}

static void on_pkt(const struct nflog_pkt *pkt, void *ud) {
    struct flow_reader *f = ud;
    struct nflog_origin o;

    if (nflog_prefix_parse(pkt->prefix, &o) < 0)
        return; /* not one of the guard's rules (someone else logs to the group) */
    struct pmsg_flow *e = &f->batch.v[f->batch.n];
    memset(e, 0, sizeof(*e));
    e->verdict = (uint8_t)o.verdict;
    e->origin = (uint8_t)o.kind;
    if (o.kind == NFLOG_ORIGIN_SESSION)
        memcpy(e->session, o.session, sizeof(e->session));
    if (o.kind == NFLOG_ORIGIN_UID)
        e->uid = o.uid;
    e->has_time = pkt->has_time && pkt->time_us >= 0;
    e->time_us = e->has_time ? pkt->time_us : 0;
    e->has_skuid = pkt->has_uid;
    e->skuid = pkt->has_uid ? pkt->uid : 0;
    e->has_seq = pkt->has_seq;
    e->seq = pkt->has_seq ? pkt->seq : 0;
    e->oif = pkt->oif;
    if (pkt->addr_len == 4 || pkt->addr_len == 16) {
        e->family = pkt->addr_len == 4 ? AF_INET : AF_INET6;
        e->protocol = pkt->protocol;
        memcpy(e->src, pkt->src, pkt->addr_len);
        memcpy(e->dst, pkt->dst, pkt->addr_len);
        if (pkt->has_ports) {
            e->has_ports = true;
            e->sport = pkt->sport;
            e->dport = pkt->dport;
        }
    }
    if (++f->batch.n == PMSG_FLOWS_MAX)
        flush(f);
}

/* One round of reads; 1 when more is queued. */
static int read_round(struct flow_reader *f) {
    int r = nflog_read(f->nl, FLOW_READS_PER_WAKEUP, on_pkt, f, &f->st);
    flush(f);
    if (r < 0)
        log_warn_errno(-r, "reading flow events failed");
    return r;
}

static void on_readable(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    (void)read_round(arg);
}

int flows_start(struct proto *p, int fd) {
    struct flow_reader *f;
    int r;

    if (p->flows) {
        close(fd);
        return -EBADMSG; /* one socket per process */
    }
    f = calloc(1, sizeof(*f));
    if (!f) {
        close(fd);
        return -ENOMEM;
    }
    f->p = p;
    if ((r = nflog_adopt(fd, &f->nl)) < 0) {
        close(fd);
        free(f);
        return r;
    }
    f->ev = event_new(p->base, fd, EV_READ | EV_PERSIST, on_readable, f);
    if (!f->ev || event_add(f->ev, NULL) < 0) {
        if (f->ev)
            event_free(f->ev);
        nflog_close(f->nl);
        free(f);
        return -ENOMEM;
    }
    p->flows = f;
    /* what queued while no protocol process read */
    (void)read_round(f);
    return 0;
}

void flows_sync(struct proto *p, uint32_t id) {
    struct pmsg_sync m = {.id = id};
    uint8_t buf[32];
    size_t len;

    for (int i = 0; p->flows && i < FLOW_SYNC_ROUNDS && read_round(p->flows) > 0; i++)
        ;
    if (pmsg_encode_sync(PMSG_FLOWS_SYNCED, &m, buf, sizeof(buf), &len) == 0)
        (void)proto_send(p, buf, len);
}

void flows_free(struct proto *p) {
    struct flow_reader *f = p->flows;
    if (!f)
        return;
    event_free(f->ev);
    nflog_close(f->nl);
    free(f);
    p->flows = NULL;
}
