/* The listener: socket setup (stale-socket probe, permissions), accept with
 * connection limits and an fd reserve, signal handling and orderly shutdown. */
#ifndef LYHD_SERVER_H
#define LYHD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct lyhd;
struct server;
struct conn;

/* Bind and listen on d->cfg.socket_path. Refuses (-EADDRINUSE, message in
 * why) when another instance answers on the socket, or the path exists and is
 * not a socket. A stale socket (connect refused) is replaced. */
int server_start(struct lyhd *d, struct server **ret, char *why, size_t whylen);
/* Stop accepting and unlink the socket (idempotent). */
void server_stop(struct server *s);
/* Close every connection and free. Accepts NULL. */
void server_free(struct server *s);

/* The protocol process's messages about connections (CONN_OPEN, CONN_GONE,
 * REQUEST, REFUSE, DRAINED, FDS; fds taken in every case). -EBADMSG: not
 * its to send (the caller ends the process). */
struct pmsg_conn;
int server_on_message(struct server *s, uint16_t type, const struct pmsg_conn *m, int *fds,
                      size_t nfds);
/* A connection message whose fds the kernel could not give us (out of fd
 * numbers): that client is turned away. -EBADMSG as above. */
int server_fds_lost(struct server *s, uint16_t type, const struct pmsg_conn *m);
/* A protocol process said READY: hand it the listening socket and every
 * connection it should serve. */
int server_protocol_ready(struct server *s);
/* The protocol process died: the connections it may have left mid-frame
 * close, the others wait for the next one. */
void server_protocol_gone(struct server *s);
/* shutdown(SHUT_RDWR) fd if it is a connection accepted on our listener
 * (else nothing): its client sees the end though another process (one left
 * behind, pproc.c) holds a copy. */
void server_shutdown_ours(struct server *s, int fd);
/* A message about connection id was lost with a protocol process that died
 * (drain_dead, pproc.c): that connection is closed rather than handed over. */
void server_conn_cut(struct server *s, uint64_t id);

/* Periodic (a timer of main.c): resume connections paused for their user's
 * pending closes, and accepting when an fd is free again. */
void server_tick(struct server *s);

/* Connection accounting, used by conn.c and the Status RPC. */
void server_conn_removed(struct server *s, struct conn *c);
unsigned server_conn_count(const struct server *s);
unsigned server_conn_count_uid(const struct server *s, uid_t uid);
bool server_stopping(const struct server *s);

#endif
