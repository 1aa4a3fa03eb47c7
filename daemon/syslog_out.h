/* The audit records' way to syslog (lyhd --syslog-audit): one datagram per
 * record to the local syslog socket (/dev/log, or --syslog-audit-socket PATH),
 * framed as glibc's syslog(3) frames it (audit_syslog_frame), facility
 * authpriv, ident lyhd.
 *
 * Not syslog(3): that one blocks the caller while the socket's queue is full,
 * and a syslog daemon that stops reading would then stop lyhd's loop, every
 * session's requests with it. Here nothing blocks: what the socket does not
 * take now waits, in order, in a queue of at most SYSLOG_OUT_QUEUE_MAX bytes,
 * sent as the socket becomes writable; a socket that is gone (the syslog daemon
 * restarting) is reconnected once a second while records wait. What the queue
 * cannot hold is counted, said in lyhd's log, and announced to the collector
 * by a gap element (`[lyh@32473 kind="gap" action="syslog" lost="N"]`) as
 * soon as records flow again. audit.db keeps every record either way. */
#ifndef LYHD_SYSLOG_OUT_H
#define LYHD_SYSLOG_OUT_H

#include <stddef.h>
#include <stdint.h>

#define SYSLOG_OUT_QUEUE_MAX (4u << 20) /* bytes of datagrams waiting */
#define SYSLOG_OUT_DEFAULT "/dev/log"

struct event_base;
struct syslog_out;

/* A sender to the unix datagram socket at path (copied; at most 107 bytes).
 * Connects lazily. NULL with errno on failure (ENAMETOOLONG, ENOMEM). */
struct syslog_out *syslog_out_new(struct event_base *base, const char *path);
/* Queue one message at severity sev (LOG_INFO, LOG_WARNING...). */
void syslog_out_send(struct syslog_out *so, int sev, const char *msg);
/* One last non-blocking attempt to send what waits, then free. NULL is fine. */
void syslog_out_free(struct syslog_out *so);

#endif
