/* The daemon's audit pipeline: NFLOG flow events and the daemon's own records
 * (sessions, guards, requests refused, gaps) go into one in-memory batch,
 * written to audit.db in one transaction when the batch is full or a short
 * timer fires, and at shutdown. Queries and follows stream from audit.db a
 * page at a time, yielding to the loop between pages.
 *
 * Nothing is lost silently: events the kernel dropped (sequence gaps, socket
 * overruns), events the rate limit thinned out (counters versus records at
 * session end) and records that could not be written become GAP records. */
#ifndef LYHD_AUDIT_H
#define LYHD_AUDIT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "storage/audit_db.h"

struct lyhd;
struct session;
struct rpc_call;

/* Open audit.db in the state dir and bind the NFLOG group in this network
 * namespace. Before guard_init (which records reap actions). why says what
 * failed and what to do. */
int audit_start(struct lyhd *d, char *why, size_t whylen);
/* Measure audit.db's writes again, four times in the next seconds, in a
 * thread (audit_measure.h): the best figure sets the flow log rate of the
 * sessions started after it. After every fork of lyhd's (its children are
 * made with one thread); nothing when the rate was given or not measured. */
void audit_measure_again(struct lyhd *d);
/* Read what the kernel still holds, write the batch, mark audit.db clean,
 * close. After the last session and call are gone. Accepts a daemon whose
 * audit never started. */
void audit_stop(struct lyhd *d);

/* Queue a record the daemon makes (copied; detail is printf-formatted,
 * key=value pairs, see audit_kv()). */
void audit_note(struct lyhd *d, int kind, const char *session, bool has_uid, uint32_t uid,
                const char *action, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* A DNS query of session s (kind dns; verdict denied when the allowlist
 * refused the name, else allowed): action answered, denied, nodata, failed,
 * refused; detail key=value pairs (name, type, rcode, answers, ...). */
void audit_dns(struct lyhd *d, const struct session *s, bool denied, const char *action,
               const char *detail);
/* A request refused (action "refused": PERMISSION_DENIED, INVALID_ARGUMENT) or
 * a limit hit (action "limit"): who, which method, why. Rate-limited per uid
 * and in all (a client spamming bad requests cannot flood the log, nor push
 * another user's refusals out of it); what the limits drop is counted per
 * uid and written, within about a second, as a GAP record (action
 * "requests") about that uid. method may be NULL (refused at connect);
 * label: what the peer called itself when it connected (proc_label), NULL or
 * "" to read it now.
 * Returns whether the record was kept (false: the limits dropped it, or the
 * audit is not running), so a caller can hold its own log line to the same
 * limits. */
bool audit_request(struct lyhd *d, uid_t uid, pid_t pid, const char *label, const char *method,
                   int code,
                   const char *action, const char *why);

/* Append ` key=value` to buf (quoted and escaped when needed), never
 * overflowing; for building details. */
void audit_kv(char *buf, size_t size, const char *key, const char *value);

/* New flows through its VPN interface each session may log per second, one
 * record each (their log rules share it; every other log rule keeps the
 * fixed NFTR_DEFAULT_LOG_RATE); --audit-flow-rate, else a third of what
 * audit.db's writes took in a measurement at audit_start. Above it the chain
 * still counts them, and they go in gap records. */
unsigned audit_flow_rate(const struct lyhd *d);

/* Session lifecycle: start (after exec), and end: called by teardown while
 * the session's chain still exists; drains the kernel's queued events, reads
 * the chain's counters, records the end and a gap when the records fall short
 * of the counters. */
void audit_session_started(struct lyhd *d, const struct session *s);
void audit_session_ended(struct lyhd *d, struct session *s);
/* The session's chain was (re)built with fresh counters (startup rebuild):
 * only records after this point are compared with them at the end. */
void audit_session_chain_built(struct lyhd *d, struct session *s);
/* How long teardown should wait after the exit before audit_session_ended,
 * so the kernel's last batch of events has been sent (ms). */
unsigned audit_settle_ms(const struct lyhd *d);

/* Flow events come decoded from the protocol process (flow_relay.c), which
 * reads the NFLOG socket audit_start bound (audit_nflog_fd). */
struct pmsg_flows;
/* -EBADMSG: a sequence number no kernel sent (the caller ends the process). */
int audit_on_flows(struct lyhd *d, const struct pmsg_flows *m);
int audit_nflog_fd(const struct lyhd *d);
/* Ask the protocol process to send every event queued now: the id to wait
 * for (audit_flows_synced_since), 0 when there is nothing to wait for (no
 * protocol process). */
uint32_t audit_flows_sync(struct lyhd *d);
bool audit_flows_synced_since(const struct lyhd *d, uint32_t id);
/* Its answer (FLOWS_SYNCED). -EBADMSG: an id never asked, or answered already. */
int audit_flows_synced(struct lyhd *d, uint32_t id);

/* For Status. audit_bytes: bytes audit.db's records use; -ENODEV when audit
 * is not running, or audit.db's error. audit_retention: the effective limits
 * retention applies (the admin policy's when it sets one, else the flags; 0 =
 * none), exactly what the prune timer uses. Neither logs nor blocks beyond
 * one sqlite page-count read. */
int audit_bytes(struct lyhd *d, uint64_t *ret_bytes);
void audit_retention(const struct lyhd *d, unsigned *ret_days, uint64_t *ret_max_bytes);

/* Stream the records matching f (checked, authorized) to call, oldest first:
 * limit > 0 = only the newest limit of them. follow: then keep streaming new
 * records as they are committed, until the client cancels or goes away. The
 * stream owns nothing of the caller's. */
int audit_stream_start(struct lyhd *d, struct rpc_call *call, const struct audit_filter *f,
                       uint32_t limit, bool follow);

#endif
