/* pmsg: the messages between lyhd's privileged parent and its unprivileged
 * protocol process (docs/architecture.md, "Two processes").
 *
 * They travel over a SOCK_SEQPACKET socketpair: one message per datagram, its
 * file descriptors in the same sendmsg. A message is an 8-byte header (u16
 * type, u16 PMSG_VERSION, u32 payload length, all big-endian) and a payload
 * of fixed layout: integers big-endian, strings as a u8 length and that many
 * bytes (no NUL inside), lists as a u8 count and that many entries. The
 * decoders are strict: every length is checked before it is read, every
 * field against its range, and bytes left over are an error. The parent
 * decodes what the protocol process sends as it would an attacker's bytes:
 * that process parses what agents and clients send, and may be compromised.
 *
 * Pure but for pmsg_send and pmsg_recv (the socket I/O). 0 or -errno;
 * ret_* are set only on success. */
#ifndef LYHD_PMSG_H
#define LYHD_PMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dns_msg.h"

#define PMSG_VERSION     1
#define PMSG_HDR_BYTES   8
#define PMSG_MAX_BYTES   16384 /* a whole datagram, header included */
#define PMSG_MAX_FDS     4
#define PMSG_ID_LEN      16    /* a session id: lowercase hex */
#define PMSG_IFNAME_MAX  16    /* IFNAMSIZ, with the NUL */
#define PMSG_RESOLVERS   4
#define PMSG_DOMAINS     128   /* a session's allowlist */
#define PMSG_DOMAIN_BYTES 3072 /* its patterns, each with its NUL */
#define PMSG_POLICY_DOMAINS 32 /* each list of the admin policy */
#define PMSG_PATTERN_MAX 128   /* a policy pattern, with its NUL */
#define PMSG_FLOWS_MAX   128   /* flow events in one FLOWS message */

enum pmsg_type {
    /* protocol process -> parent */
    PMSG_READY = 1,      /* it runs confined and takes requests */
    PMSG_DNS_ANSWER = 2, /* what an allowed name resolved to (reply: DNS_ANSWERED) */
    PMSG_DNS_RECORD = 3, /* a query's outcome, for the audit log */
    PMSG_FLOWS = 4,      /* flow events it read from NFLOG, for the audit log */
    PMSG_FLOWS_SYNCED = 5, /* every event queued when FLOWS_SYNC came was sent */
    PMSG_CONN_OPEN = 6,    /* a client connected (its socket comes along) */
    PMSG_CONN_GONE = 7,    /* a client's connection is closed (on our side) */
    PMSG_REQUEST = 8,      /* a piece of a client's request, checked and encoded again */
    PMSG_REFUSE = 9,       /* a request refused before the parent (its fds come along) */
    PMSG_DRAINED = 10,     /* bytes of OUT written to the client */
    PMSG_FDS = 11,         /* fds a client sent that no request takes: for the parent to close */
    PMSG_MIDFRAME = 12,    /* it has read part of a frame of this client's (not yet a REQUEST) */
    PMSG_FDS_CLOSED = 13,  /* it closed its copies of the fds of the message before, or
                            * queued them on its closer (all but sockets) (always
                            * the next one after a message with fds; the parent acts on
                            * that message only now) */
    /* parent -> protocol process */
    PMSG_DNS_START = 64,    /* serve a session's DNS (its listening sockets come along) */
    PMSG_DNS_STOP = 65,     /* stop serving it */
    PMSG_DNS_POLICY = 66,   /* the admin policy's domain lists */
    PMSG_DNS_ANSWERED = 67, /* the addresses of a DNS_ANSWER are in place (or not) */
    PMSG_NFLOG_START = 68,  /* read the guard's flow events (the NFLOG socket comes along) */
    PMSG_FLOWS_SYNC = 69,   /* send what is queued now, then FLOWS_SYNCED */
    PMSG_LISTEN_START = 70, /* accept clients (lyhd's listening socket comes along) */
    PMSG_CONN_ADOPT = 71,   /* serve a connection an earlier protocol process served */
    PMSG_OUT = 72,          /* bytes for a client (whole frames, or a piece of one) */
    PMSG_CONN_CLOSE = 73,   /* close a connection */
    PMSG_CONN_PAUSE = 74,   /* stop or start reading from a connection */
    PMSG_CAPS = 75,         /* what a Capabilities answer says (it may answer those itself) */
};

struct pmsg_ready {
    uint32_t pid; /* its own view; the parent knows the real one */
};

struct pmsg_addr {
    int family; /* AF_INET or AF_INET6 */
    uint8_t addr[16];
};

/* An answer to an A or AAAA query of a session: the addresses the protocol
 * process will give the agent. With want_reply the agent waits until the
 * parent said they are in the session's set (an allowlist); without, they
 * only name flows in the audit log. */
struct pmsg_dns_answer {
    uint32_t req;
    char session[PMSG_ID_LEN + 1];
    char name[DNS_NAME_MAX];
    bool want_reply;
    uint16_t qtype; /* DNS_TYPE_A or DNS_TYPE_AAAA: the family of every address */
    uint32_t ttl;
    uint8_t n_addrs; /* 0..DNS_ANSWER_ADDRS */
    struct pmsg_addr addrs[DNS_ANSWER_ADDRS];
};

enum pmsg_dns_action {
    PDNS_NONE = 0, /* no query: only the counts below */
    PDNS_ANSWERED,
    PDNS_DENIED,
    PDNS_NODATA,
    PDNS_FAILED,
    PDNS_REFUSED,
    PDNS_ACTION_MAX = PDNS_REFUSED,
};

struct pmsg_dns_record {
    char session[PMSG_ID_LEN + 1];
    uint8_t action; /* enum pmsg_dns_action */
    uint8_t rcode;
    uint16_t qtype;
    bool via_tcp;
    uint8_t resolver;   /* index of the resolver asked; 0xff: none */
    uint16_t n_kept_out; /* answer addresses kept from the agent (private ones) */
    uint32_t ttl;
    uint32_t dropped_inflight; /* queries refused at the in-flight bound since the last record */
    uint32_t unsent;           /* records it could not send since the last one */
    char name[DNS_NAME_MAX];
    uint8_t n_addrs;
    struct pmsg_addr addrs[DNS_ANSWER_ADDRS];
};

/* Listening sockets that come with DNS_START, in this order, those in mask. */
enum { PMSG_FD_UDP4 = 1, PMSG_FD_TCP4 = 2, PMSG_FD_UDP6 = 4, PMSG_FD_TCP6 = 8 };

struct pmsg_dns_start {
    char session[PMSG_ID_LEN + 1];
    char iface[PMSG_IFNAME_MAX];
    uint8_t fd_mask;
    uint8_t n_resolvers; /* 1..PMSG_RESOLVERS */
    struct pmsg_addr resolvers[PMSG_RESOLVERS];
    uint8_t n_domains;   /* 0: no allowlist */
    char domains[PMSG_DOMAIN_BYTES]; /* n_domains NUL-terminated patterns */
    size_t domains_len;
};

struct pmsg_dns_stop {
    char session[PMSG_ID_LEN + 1];
};

struct pmsg_dns_policy {
    uint8_t n_deny, n_ceiling;
    char deny[PMSG_POLICY_DOMAINS][PMSG_PATTERN_MAX];
    char ceiling[PMSG_POLICY_DOMAINS][PMSG_PATTERN_MAX];
};

struct pmsg_dns_answered {
    uint32_t req;
    int32_t status; /* 0, or -errno: the agent gets SERVFAIL */
};

/* One event of the guard's log rules as the protocol process decoded it
 * from NFLOG (audit/nflog.h): which rule (from the log prefix) and what the
 * packet's headers and the kernel's attributes said. Fields a flag does not
 * announce are 0. */
struct pmsg_flow {
    uint8_t verdict;                /* 1 allowed, 2 denied */
    uint8_t origin;                 /* enum nflog_origin_kind */
    char session[PMSG_ID_LEN + 1];  /* NFLOG_ORIGIN_SESSION; "" otherwise */
    uint32_t uid;                   /* NFLOG_ORIGIN_UID: the chain's uid; 0 otherwise */
    bool has_time, has_skuid, has_seq, has_ports;
    int64_t time_us;                /* >= 0 */
    uint32_t skuid;                 /* the sending socket's owner (NFULA_UID) */
    uint32_t seq;                   /* NFULA_SEQ */
    uint32_t oif;
    uint8_t family;                 /* AF_INET, AF_INET6, or 0: no usable L3 header */
    uint8_t protocol;
    uint8_t src[16], dst[16];       /* the family's length used */
    uint16_t sport, dport;          /* has_ports (needs a family) */
};

struct pmsg_flows {
    uint32_t overruns; /* the socket's ENOBUFS since the last FLOWS */
    uint32_t bad;      /* NFLOG messages that did not decode, since the last */
    uint32_t unsent;   /* events read but not sent (the parent's queue was full) */
    uint8_t n;         /* 0..PMSG_FLOWS_MAX */
    struct pmsg_flow v[PMSG_FLOWS_MAX];
};

/* CAPS: the facts of this daemon a CapabilitiesReply tells (caps.h), so
 * the protocol process can answer Capabilities on an idle connection (OUT's
 * PMSG_OUT_IDLE) without a round trip through the parent. */
enum { PMSG_CAPS_CGROUP2 = 1, PMSG_CAPS_LISTENERS = 2 };
struct pmsg_caps {
    uint8_t flags;        /* PMSG_CAPS_* */
    uint8_t landlock_abi; /* 0: none */
    uint8_t max_fds;      /* per message: 0..LYH_MAX_FDS_PER_MESSAGE (--max-fds-per-message) */
    uint16_t max_calls;   /* in flight per connection: 1..4096 */
};

/* FLOWS_SYNC and FLOWS_SYNCED */
struct pmsg_sync {
    uint32_t id;
};

/* The client connections' messages (CONN_*, REQUEST, REFUSE, DRAINED, FDS,
 * MIDFRAME, LISTEN_START, OUT): one layout, the fields each type uses. A
 * connection's id is chosen by the protocol process, counting up from
 * LISTEN_START's first_id; never 0. A request larger than one datagram comes
 * in pieces, in order and together (no other connection message between
 * them), its fds with the last. */
#define PMSG_CHUNK       (PMSG_MAX_BYTES - 64) /* bytes of REQUEST or OUT in one datagram */
#define PMSG_TEXT_MAX    256                   /* REFUSE's text, with its NUL */
#define PMSG_REQUEST_MAX (1u << 20)            /* a whole request (LYH_MAX_FRAME_BYTES) */

enum { PMSG_REFUSE_CLOSE = 1 }; /* REFUSE: answer with call id 0 and close the connection */
/* OUT: these bytes end at a frame's end, the parent holds nothing more for
 * the connection and no call of it is in flight, as of its count-th request
 * (REQUEST or REFUSE) from the protocol process */
enum { PMSG_OUT_IDLE = 1 };

struct pmsg_conn {
    uint64_t id;
    uint64_t call_id;    /* REFUSE: the call it answers (0 with PMSG_REFUSE_CLOSE; may
                          * be 0 without: a request that said 0 and failed earlier) */
    uint32_t total;      /* REQUEST: the whole request's length (<= PMSG_REQUEST_MAX) */
    uint32_t offset;     /* REQUEST: where this piece starts */
    uint32_t count;      /* DRAINED: bytes written (>= 1); LISTEN_START: the frame
                          * timeout in ms (>= 1); CONN_PAUSE: 1 stop, 0 start;
                          * OUT: requests and refusals of this connection the
                          * parent has taken (mod 2^32) */
    uint8_t code;        /* REFUSE: the status (1..16); LISTEN_START: fds per request (1..3) */
    uint8_t flags;       /* REFUSE: PMSG_REFUSE_*; OUT: PMSG_OUT_* */
    char text[PMSG_TEXT_MAX]; /* REFUSE: what the client is told: printable ASCII, 1..255 */
    const uint8_t *data; /* REQUEST, OUT: the bytes (into the caller's buffer) */
    size_t data_len;     /* REQUEST: 1..PMSG_CHUNK (0 only for an empty request); OUT: 1.. */
};

/* Encoders: the whole datagram (header and payload) into buf. -ENOBUFS when
 * it does not fit, -EINVAL for a field out of range. */
int pmsg_encode_ready(const struct pmsg_ready *m, uint8_t *buf, size_t cap, size_t *ret_len);
int pmsg_encode_dns_answer(const struct pmsg_dns_answer *m, uint8_t *buf, size_t cap,
                           size_t *ret_len);
int pmsg_encode_dns_record(const struct pmsg_dns_record *m, uint8_t *buf, size_t cap,
                           size_t *ret_len);
int pmsg_encode_dns_start(const struct pmsg_dns_start *m, uint8_t *buf, size_t cap,
                          size_t *ret_len);
int pmsg_encode_dns_stop(const struct pmsg_dns_stop *m, uint8_t *buf, size_t cap,
                         size_t *ret_len);
int pmsg_encode_dns_policy(const struct pmsg_dns_policy *m, uint8_t *buf, size_t cap,
                           size_t *ret_len);
int pmsg_encode_dns_answered(const struct pmsg_dns_answered *m, uint8_t *buf, size_t cap,
                             size_t *ret_len);
int pmsg_encode_flows(const struct pmsg_flows *m, uint8_t *buf, size_t cap, size_t *ret_len);
/* type: PMSG_FLOWS_SYNC, PMSG_FLOWS_SYNCED; PMSG_NFLOG_START (id 0: it has
 * no payload) */
int pmsg_encode_sync(uint16_t type, const struct pmsg_sync *m, uint8_t *buf, size_t cap,
                     size_t *ret_len);
int pmsg_encode_caps(const struct pmsg_caps *m, uint8_t *buf, size_t cap, size_t *ret_len);

/* type: one of the connection messages above. */
int pmsg_encode_conn(uint16_t type, const struct pmsg_conn *m, uint8_t *buf, size_t cap,
                     size_t *ret_len);

/* The header of a datagram: its type, and where its payload is. -EBADMSG
 * for a short datagram, another version, or a length that disagrees. */
int pmsg_header(const uint8_t *buf, size_t len, uint16_t *ret_type, const uint8_t **ret_payload,
                size_t *ret_payload_len);

/* Decoders of a payload (from pmsg_header): -EBADMSG for anything malformed. */
int pmsg_decode_ready(const uint8_t *p, size_t len, struct pmsg_ready *ret);
int pmsg_decode_dns_answer(const uint8_t *p, size_t len, struct pmsg_dns_answer *ret);
int pmsg_decode_dns_record(const uint8_t *p, size_t len, struct pmsg_dns_record *ret);
int pmsg_decode_dns_start(const uint8_t *p, size_t len, struct pmsg_dns_start *ret);
int pmsg_decode_dns_stop(const uint8_t *p, size_t len, struct pmsg_dns_stop *ret);
int pmsg_decode_dns_policy(const uint8_t *p, size_t len, struct pmsg_dns_policy *ret);
int pmsg_decode_dns_answered(const uint8_t *p, size_t len, struct pmsg_dns_answered *ret);
int pmsg_decode_flows(const uint8_t *p, size_t len, struct pmsg_flows *ret);
int pmsg_decode_sync(uint16_t type, const uint8_t *p, size_t len, struct pmsg_sync *ret);
int pmsg_decode_caps(const uint8_t *p, size_t len, struct pmsg_caps *ret);
/* m->data points into p. */
int pmsg_decode_conn(uint16_t type, const uint8_t *p, size_t len, struct pmsg_conn *ret);
/* Is type one of the connection messages? */
bool pmsg_conn_type(uint16_t type);

/* Is s a session id: PMSG_ID_LEN lowercase hex characters? */
bool pmsg_id_ok(const char *s);

/* Send one datagram with nfds (<= PMSG_MAX_FDS) fds. Never blocks:
 * -EAGAIN when the peer's queue is full. */
int pmsg_send(int sock, const uint8_t *buf, size_t len, const int *fds, size_t nfds);

/* Close fds a possibly compromised peer sent: a socket's close never
 * lingers (SO_LINGER 0: a socket it set to linger would block the closer). */
void pmsg_close_fds(const int *fds, size_t n);

/* Room for every fd one datagram can carry: the kernel's SCM_MAX_FD. A
 * smaller control buffer would let the kernel drop the rest itself, and the
 * last reference to a file dropped that way is released in the receiving
 * thread (a lingering socket's close would run on the parent's loop). */
#define PMSG_RECV_FDS 253 /* UNIXSOCK_MAX_FDS */

/* Receive one datagram into buf (PMSG_MAX_BYTES) and its fds (close-on-exec)
 * into fds[PMSG_RECV_FDS]. Every fd that came is the caller's, whatever the
 * return (*ret_nfds says how many; the caller closes them on an error).
 * A datagram that was cut, or more than PMSG_MAX_FDS fds: -EBADMSG. Fds the
 * kernel could not give us (we are out of fd numbers): the message is in
 * buf, not all its fds are, -EMFILE. 0 bytes: the peer is gone (-EPIPE).
 * -EAGAIN when none is waiting. */
int pmsg_recv(int sock, uint8_t *buf, size_t cap, size_t *ret_len, int *fds, size_t *ret_nfds);

#endif
