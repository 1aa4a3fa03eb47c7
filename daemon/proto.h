/* The unprivileged protocol process: its context (see proto_main.c).
 *
 * lyhd's parent starts it (a fresh exec of lyhd as `--protocol-process`) as
 * the system user _lyhd, with no capabilities, no file system access and a
 * seccomp allowlist; it parses what agents send (their DNS queries) and what
 * resolvers answer, and asks the parent, in pmsg messages, for the little
 * that needs privilege. Nothing here includes lyhd.h: this process holds none
 * of the parent's state. */
#ifndef LYHD_PROTO_H
#define LYHD_PROTO_H

#include <stdint.h>
#include <sys/queue.h>

#include "daemon/caps.h"
#include "daemon/pmsg.h"

struct event_base;
struct event;
struct relay;
struct flow_reader;
struct pconn;
struct outmsg;

struct proto {
    struct event_base *base;
    int sock; /* to the parent */
    struct event *ev_sock;
    struct pmsg_dns_policy policy; /* the admin policy's domain lists */
    TAILQ_HEAD(relay_list, relay) relays;
    uint32_t next_req;
    struct flow_reader *flows; /* NULL until NFLOG_START */
    /* proto_clients.c: lyhd's clients (after LISTEN_START) */
    int listen_fd;  /* -1 until LISTEN_START */
    int reserve_fd; /* a spare fd for when there are none (proto_clients.c) */
    bool accept_paused;
    struct event *ev_accept, *ev_accept_retry, *ev_sock_write, *ev_drained;
    struct event *ev_serve; /* takes the next turns of the clients in line */
    uint64_t next_id;
    unsigned frame_timeout_ms, max_fds;
    bool have_caps;         /* PMSG_CAPS came: Capabilities may be answered here */
    struct caps_reply caps; /* what it says (proto_clients.c) */
    TAILQ_HEAD(pconn_list, pconn) conns;
    unsigned n_conns;
    /* clients with bytes to read that wait for room in the queue for the
     * parent, in the order they came to wait: each is read in turn */
    TAILQ_HEAD(pconn_line, pconn) line;
    TAILQ_HEAD(outmsg_list, outmsg) outq; /* for the parent, in order */
    size_t outq_bytes;
    unsigned outq_n;
    /* the connection of the last message with fds sent, while its
     * FDS_CLOSED is not (0: none due); it goes before anything else queued */
    uint64_t fds_closed_due;
    /* its copies of clients' fds that may wait in a close (all but sockets:
     * a FUSE file's FLUSH waits in every close) close here, on worker
     * threads; a user with too many behind is not read meanwhile */
    struct closer *closer;
    struct event *ev_closes; /* while some wait: resumes them, pokes the workers */
};

/* Send one message to the parent (encoded by the caller). -errno. */
int proto_send(struct proto *p, const uint8_t *buf, size_t len);

/* Entry point of `lyhd --protocol-process FD UID GID FLAGS`: does not
 * return to main's daemon path; its result is the exit status. */
int proto_main(int argc, char **argv);

/* dns_relay.c: one relay per session whose DNS lyhd forwards. */
/* Serve m->session on the listening sockets fds (taken, in the order of
 * m->fd_mask's bits; nfds of them). A session served already is replaced. */
int relay_start(struct proto *p, const struct pmsg_dns_start *m, int *fds, size_t nfds);
/* Stop serving a session (queries in flight are dropped). Unknown: nothing. */
void relay_stop(struct proto *p, const char *session);
/* The parent put (or could not put) an answer's addresses in place. */
void relay_answered(struct proto *p, const struct pmsg_dns_answered *m);
/* Every relay, at exit. */
void relay_free_all(struct proto *p);

/* flow_relay.c: the guard's flow events. Read the NFLOG socket fd (taken)
 * and send what it holds as FLOWS messages; -EBADMSG for a second socket. */
int flows_start(struct proto *p, int fd);
/* Read everything queued now, send it, then FLOWS_SYNCED with id. */
void flows_sync(struct proto *p, uint32_t id);
void flows_free(struct proto *p);

/* proto_clients.c: the client connections. Accept on lyhd's listening
 * socket fd (taken) with the settings of LISTEN_START. -EBADMSG: a second. */
int clients_listen(struct proto *p, const struct pmsg_conn *m, int fd);
/* Serve a connection an earlier protocol process served (fd taken).
 * -EBADMSG for an id this process could have chosen itself or serves. */
int clients_adopt(struct proto *p, const struct pmsg_conn *m, int fd);
/* OUT, CONN_CLOSE, CONN_PAUSE for a connection (one that ended here already:
 * nothing). */
void clients_on_message(struct proto *p, uint16_t type, const struct pmsg_conn *m);
/* The socket to the parent can take more (its write event). */
void clients_on_sock_writable(struct proto *p);
void clients_free(struct proto *p);

#endif
