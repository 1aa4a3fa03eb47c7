/* The protocol process (proto.h): start-up, confinement, and its messages.
 *
 * The parent runs `lyhd --protocol-process FD UID GID FLAGS` through a fresh
 * exec of its own binary (nothing of the parent's memory is inherited) with
 * FD a SOCK_SEQPACKET socket to it, already as UID:GID (the system user
 * _lyhd) with no supplementary groups and no_new_privs: this image never
 * runs as root. Before it reads a byte from anyone this process, in order:
 *   1. checks that it is UID:GID in every id, has no supplementary group and
 *      cannot become root again (so it holds no capability);
 *   2. sets no_new_privs and makes itself not dumpable (no ptrace, no core
 *      file from a process that held secrets of other users' sessions);
 *   3. gives up the file system entirely (Landlock: every right handled,
 *      none granted) and, where the kernel has Landlock's scopes, signals to
 *      and abstract sockets of processes outside it;
 *   4. installs its seccomp allowlist (platform/linux/seccomp_self.c).
 * Then it says PMSG_READY and serves. The parent gone (end of file on FD)
 * means exit. Everything it learns comes from the parent's messages; what
 * it sends back the parent checks again (pmsg.h).
 *
 * It exits with _exit: under a sanitizer build, LeakSanitizer's exit-time
 * check needs ptrace, which the filter (rightly) kills. */
#include "daemon/proto.h"

#include <errno.h>
#include <signal.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/macros.h"
#include "daemon/closer.h"
#include "daemon/log.h"
#include "platform/linux/landlock.h"
#include "platform/linux/seccomp_self.h"

int proto_send(struct proto *p, const uint8_t *buf, size_t len) {
    return pmsg_send(p->sock, buf, len, NULL, 0);
}

static void close_fds(int *fds, size_t n) {
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
}

/* One message from the parent. -EBADMSG: it makes no sense (fatal). */
static int dispatch(struct proto *p, const uint8_t *buf, size_t len, int *fds, size_t nfds) {
    uint16_t type;
    const uint8_t *pl;
    size_t pl_len;
    int r = pmsg_header(buf, len, &type, &pl, &pl_len);

    if (r == 0 && type == PMSG_NFLOG_START) {
        struct pmsg_sync m;
        if (nfds != 1 || pmsg_decode_sync(type, pl, pl_len, &m) < 0)
            goto bad;
        r = flows_start(p, fds[0]);
        if (r < 0)
            log_error_errno(-r, "cannot read the guard's flow events");
        return r == -EBADMSG ? r : 0;
    }
    if (r == 0 && type == PMSG_DNS_START) {
        struct pmsg_dns_start m;
        if ((r = pmsg_decode_dns_start(pl, pl_len, &m)) < 0)
            goto bad;
        r = relay_start(p, &m, fds, nfds);
        if (r < 0)
            log_error_errno(-r, "cannot serve the DNS of session '%s'", m.session);
        return r == -EBADMSG ? r : 0;
    }
    if (r == 0 && (type == PMSG_LISTEN_START || type == PMSG_CONN_ADOPT)) {
        struct pmsg_conn m;
        if (nfds != 1 || pmsg_decode_conn(type, pl, pl_len, &m) < 0)
            goto bad;
        r = type == PMSG_LISTEN_START ? clients_listen(p, &m, fds[0]) : clients_adopt(p, &m, fds[0]);
        if (r < 0 && r != -EBADMSG)
            log_error_errno(-r, "cannot serve lyhd's clients");
        return r == -EBADMSG ? r : 0;
    }
    if (r == 0 && nfds)
        r = -EBADMSG; /* fds with a message that takes none */
    if (r < 0)
        goto bad;
    switch (type) {
    case PMSG_DNS_STOP: {
        struct pmsg_dns_stop m;
        if ((r = pmsg_decode_dns_stop(pl, pl_len, &m)) < 0)
            return r;
        relay_stop(p, m.session);
        return 0;
    }
    case PMSG_DNS_POLICY: {
        struct pmsg_dns_policy m;
        if ((r = pmsg_decode_dns_policy(pl, pl_len, &m)) < 0)
            return r;
        p->policy = m;
        return 0;
    }
    case PMSG_FLOWS_SYNC: {
        struct pmsg_sync m;
        if ((r = pmsg_decode_sync(type, pl, pl_len, &m)) < 0)
            return r;
        flows_sync(p, m.id);
        return 0;
    }
    case PMSG_OUT:
    case PMSG_CONN_CLOSE:
    case PMSG_CONN_PAUSE: {
        struct pmsg_conn m;
        if ((r = pmsg_decode_conn(type, pl, pl_len, &m)) < 0)
            return r;
        clients_on_message(p, type, &m);
        return 0;
    }
    case PMSG_CAPS: {
        struct pmsg_caps m;
        if ((r = pmsg_decode_caps(pl, pl_len, &m)) < 0 || p->have_caps)
            return -EBADMSG; /* once, before LISTEN_START */
        struct caps_facts f = {.cgroup2 = m.flags & PMSG_CAPS_CGROUP2,
                               .listeners = m.flags & PMSG_CAPS_LISTENERS,
                               .landlock_abi = m.landlock_abi,
                               .max_fds = m.max_fds,
                               .max_calls = m.max_calls};
        caps_build(&f, &p->caps);
        p->have_caps = true;
        return 0;
    }
    case PMSG_DNS_ANSWERED: {
        struct pmsg_dns_answered m;
        if ((r = pmsg_decode_dns_answered(pl, pl_len, &m)) < 0)
            return r;
        relay_answered(p, &m);
        return 0;
    }
    default:
        return -EBADMSG;
    }
bad:
    close_fds(fds, nfds);
    return -EBADMSG;
}

static void on_parent_writable(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    clients_on_sock_writable(arg);
}

static void on_parent(evutil_socket_t fd, short what, void *arg) {
    (void)fd, (void)what;
    struct proto *p = arg;
    static uint8_t buf[PMSG_MAX_BYTES];

    for (int i = 0; i < 64; i++) {
        int fds[PMSG_RECV_FDS];
        size_t len, nfds = 0;
        int r = pmsg_recv(p->sock, buf, sizeof(buf), &len, fds, &nfds);
        if (r < 0)
            pmsg_close_fds(fds, nfds); /* the parent's: they never linger */
        if (r == -EAGAIN)
            return;
        if (r == -EPIPE || r == -ECONNRESET) { /* the parent is gone: so are we */
            event_base_loopbreak(p->base);
            return;
        }
        if (r < 0 || dispatch(p, buf, len, fds, nfds) < 0) {
            log_error("a message from lyhd makes no sense (%s): exiting",
                      r < 0 ? strerror(-r) : "malformed");
            event_base_loopbreak(p->base);
            return;
        }
    }
}

/* Steps 1 to 4 of the top of this file. why says which failed. */
static int confine(struct proto *p, uid_t uid, gid_t gid, char *why, size_t whylen) {
    uid_t ru = (uid_t)-1, eu = (uid_t)-1, su = (uid_t)-1;
    gid_t rg = (gid_t)-1, eg = (gid_t)-1, sg = (gid_t)-1;
    int abi = 0, r;

    if (uid == 0 || gid == 0) {
        snprintf(why, whylen, "will not run as root (uid %u, gid %u)", (unsigned)uid, (unsigned)gid);
        return -EPERM;
    }
    if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0 || ru != uid || eu != uid ||
        su != uid || rg != gid || eg != gid || sg != gid || getgroups(0, NULL) != 0) {
        snprintf(why, whylen,
                 "runs as uid %u gid %u (or with supplementary groups), not as %u:%u alone; "
                 "it is started by lyhd",
                 (unsigned)eu, (unsigned)eg, (unsigned)uid, (unsigned)gid);
        return -EPERM;
    }
    if (setuid(0) == 0 || setgid(0) == 0) {
        snprintf(why, whylen, "it could become root again");
        return -EPERM;
    }
    /* What libc reads from files on first use, read now: after this no file
     * opens (Landlock, and the filter kills on openat). The time zone: the
     * first gmtime_r of a log line, or syslog's localtime_r, would load
     * /etc/localtime. */
    tzset();
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
        r = -errno;
        snprintf(why, whylen, "prctl: %s", strerror(-r));
        return r;
    }
    if (ll_probe(&abi) == 0) {
        struct ll_policy none = {0};
        struct ll_report rep = {0};
        int fd = -1;
        char lw[256] = "";
        r = ll_ruleset_build(&none, abi, &fd, &rep, lw, sizeof(lw));
        if (r == 0)
            r = ll_restrict_self(fd);
        CLOSE_FD(fd);
        ll_report_free(&rep);
        if (r < 0) {
            snprintf(why, whylen, "Landlock: %s", lw[0] ? lw : strerror(-r));
            return r;
        }
    } else {
        log_warn("no Landlock on this kernel: the protocol process keeps file system access");
    }
    /* Its workers now: under the Landlock domain (threads made after it),
     * and the filter below goes on every thread (TSYNC). */
    if ((r = closer_start(&p->closer)) < 0) {
        snprintf(why, whylen, "cannot start the closer: %s", strerror(-r));
        return r;
    }
    if ((r = sc_confine_protocol_self()) < 0) {
        snprintf(why, whylen, "seccomp: %s", strerror(-r));
        return r;
    }
    return 0;
}

static int parse_num(const char *s, unsigned long max, unsigned long *ret) {
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || !*s || *end || v > max || s[0] == '-' || s[0] == '+')
        return -EINVAL;
    *ret = v;
    return 0;
}

int proto_main(int argc, char **argv) {
    struct proto p = {.sock = -1, .listen_fd = -1, .reserve_fd = -1};
    unsigned long fd, uid, gid, flags;
    char why[300];
    int type = 0;
    socklen_t tl = sizeof(type);

    if ((argc != 6 && argc != 7) || (argc == 7 && log_syslog_path(argv[6]) < 0) || parse_num(argv[2], 1024, &fd) < 0 || parse_num(argv[3], 0xfffffffe, &uid) < 0 ||
        parse_num(argv[4], 0xfffffffe, &gid) < 0 || parse_num(argv[5], 3, &flags) < 0) {
        fprintf(stderr, "lyhd: --protocol-process is started by lyhd itself\n");
        return 2;
    }
    log_init((flags & 2) != 0, (flags & 1) != 0);
    log_set_process("protocol");
    p.sock = (int)fd;
    if (getsockopt(p.sock, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_SEQPACKET) {
        log_error("fd %lu is not the socket to lyhd", fd);
        _exit(1);
    }
    TAILQ_INIT(&p.relays);
    TAILQ_INIT(&p.conns);
    TAILQ_INIT(&p.line);
    TAILQ_INIT(&p.outq);
    p.base = event_base_new();
    p.ev_sock = p.base ? event_new(p.base, p.sock, EV_READ | EV_PERSIST, on_parent, &p) : NULL;
    p.ev_sock_write = p.base ? event_new(p.base, p.sock, EV_WRITE, on_parent_writable, &p) : NULL;
    if (!p.ev_sock || !p.ev_sock_write || event_add(p.ev_sock, NULL) < 0) {
        log_error("cannot set up the event loop");
        _exit(1);
    }
    /* a client that closed before its answer was written is an error from
     * writev, not a signal that ends this process */
    signal(SIGPIPE, SIG_IGN);
    if (confine(&p, (uid_t)uid, (gid_t)gid, why, sizeof(why)) < 0) {
        log_error("cannot confine the protocol process: %s", why);
        _exit(1);
    }
    uint8_t buf[64];
    size_t len;
    struct pmsg_ready ready = {.pid = (uint32_t)getpid()};
    if (pmsg_encode_ready(&ready, buf, sizeof(buf), &len) < 0 || proto_send(&p, buf, len) < 0) {
        log_error("cannot reach lyhd");
        _exit(1);
    }
    log_debug("protocol process %d confined and ready (uid %lu)", getpid(), uid);
    event_base_dispatch(p.base);
    relay_free_all(&p);
    flows_free(&p);
    clients_free(&p);
    _exit(0);
}
