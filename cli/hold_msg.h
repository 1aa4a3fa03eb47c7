/* The messages between a background session's holder (cli/hold.c) and the
 * `lyh` commands that talk to it (attach, ls, kill). One message per
 * SOCK_SEQPACKET datagram: a type byte, then fixed fields in network byte
 * order, then for some types a byte string up to the end of the datagram.
 * Pure: no I/O, no allocation; the decoder takes any bytes (the peer is the
 * same user, or root, but is checked all the same: fuzz/fuzz_hold_msg.c). */
#ifndef LYH_HOLD_MSG_H
#define LYH_HOLD_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest datagram either side sends or accepts. */
#define HOLD_MSG_MAX (16384 + 64)
/* The largest byte string in an INPUT or OUTPUT message. */
#define HOLD_DATA_MAX 16384
#define HOLD_NAME_MAX 32     /* a session's name: [A-Za-z0-9_.-], not starting with . or - */
#define HOLD_ID_MAX 16       /* lyhd's session id: hexadecimal digits */
#define HOLD_COMMAND_MAX 200 /* the agent's command line, shortened */

enum hold_msg_type {
    /* to the holder */
    HOLD_ATTACH = 1,   /* rows, cols; flags: HOLD_ATTACH_* */
    HOLD_INPUT = 2,    /* data: keys for the agent */
    HOLD_RESIZE = 3,   /* rows, cols */
    HOLD_DETACH = 4,   /* (nothing) */
    HOLD_INFO_ASK = 5, /* (nothing): the holder answers HOLD_INFO and closes */
    /* from the holder */
    HOLD_OUTPUT = 16,   /* data: what the agent wrote (the scrollback first) */
    HOLD_INFO = 17,     /* info */
    HOLD_EXIT = 18,     /* the agent ended: status */
    HOLD_DETACHED = 19, /* reason: HOLD_GONE_* (the holder closes next) */
    HOLD_NOTE = 20,     /* data: a line for the user (lyhd lost, ...) */
};

#define HOLD_ATTACH_READ_ONLY 1u /* watch only: the holder drops this client's input */

enum hold_gone {
    HOLD_GONE_ASKED = 1, /* the client asked */
    HOLD_GONE_FULL = 2,  /* as many clients as the holder serves are attached */
};

struct hold_info {
    char name[HOLD_NAME_MAX + 1];
    char session_id[HOLD_ID_MAX + 1];
    char command[HOLD_COMMAND_MAX + 1];
    uint32_t pid;          /* the agent's main process */
    uint64_t started;      /* seconds since the epoch */
    uint64_t active;       /* last output or input, seconds since the epoch */
    bool attached;
    bool lyhd_lost;        /* the holder's connection to lyhd ended before the agent */
};

struct hold_msg {
    uint8_t type;
    uint16_t rows, cols;    /* ATTACH, RESIZE */
    uint8_t flags;          /* ATTACH */
    uint8_t reason;         /* DETACHED */
    const uint8_t *data;    /* INPUT, OUTPUT, NOTE: points into the decoded buffer */
    size_t len;
    struct hold_info info;  /* INFO */
    /* EXIT: known false when the status is unknown (lyhd restarted while
     * the agent ran); else exit_code, or signal > 0 when killed */
    bool known;
    int32_t exit_code, signal;
};

/* Decode one datagram. 0, or -EBADMSG (unknown type, wrong length, a name or
 * id or command that is not what it must be, data of length 0 or above
 * HOLD_DATA_MAX). m->data points into buf. */
int hold_msg_decode(const uint8_t *buf, size_t len, struct hold_msg *m);
/* Encode m into buf (HOLD_MSG_MAX bytes is always enough). Returns the length,
 * or -EINVAL when m could not be decoded back (the same checks). */
int hold_msg_encode(const struct hold_msg *m, uint8_t *buf, size_t cap);
/* Is s a valid session name? */
bool hold_name_ok(const char *s);

#endif
