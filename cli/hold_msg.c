/* The holder's messages, encoded and decoded (cli/hold_msg.h). Every field
 * has a fixed size or is bounded and checked here, so neither side ever acts
 * on a message it could not have been sent: the encoder decodes what it made
 * before handing it out. */
#include "cli/hold_msg.h"

#include <errno.h>
#include <string.h>

bool hold_name_ok(const char *s) {
    size_t n = strlen(s);

    if (n == 0 || n > HOLD_NAME_MAX || s[0] == '.' || s[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

static bool id_ok(const char *s) {
    size_t n = strlen(s);
    return n <= HOLD_ID_MAX && strspn(s, "0123456789abcdef") == n;
}

/* Printable ASCII only: the command is shown in `lyh ls` on a terminal. */
static bool command_ok(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            return false;
    return true;
}

struct rd {
    const uint8_t *p;
    size_t left;
    bool bad;
};

static const uint8_t *take(struct rd *r, size_t n) {
    if (r->bad || r->left < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

static uint64_t get(struct rd *r, size_t n) {
    const uint8_t *p = take(r, n);
    uint64_t v = 0;
    for (size_t i = 0; p && i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* A string: one length byte (at most max), then that many bytes. */
static void get_str(struct rd *r, char *out, size_t max) {
    size_t n = (size_t)get(r, 1);
    const uint8_t *p = n <= max ? take(r, n) : NULL;

    if (!p) {
        r->bad = true;
        out[0] = '\0';
        return;
    }
    memcpy(out, p, n);
    out[n] = '\0';
    if (memchr(out, '\0', n))
        r->bad = true;
}

int hold_msg_decode(const uint8_t *buf, size_t len, struct hold_msg *m) {
    struct rd r = {.p = buf, .left = len};

    memset(m, 0, sizeof(*m));
    if (len == 0 || len > HOLD_MSG_MAX)
        return -EBADMSG;
    m->type = (uint8_t)get(&r, 1);
    switch (m->type) {
    case HOLD_ATTACH:
    case HOLD_RESIZE:
        m->rows = (uint16_t)get(&r, 2);
        m->cols = (uint16_t)get(&r, 2);
        if (m->type == HOLD_ATTACH) {
            m->flags = (uint8_t)get(&r, 1);
            if (m->flags & ~HOLD_ATTACH_READ_ONLY)
                return -EBADMSG;
        }
        if (m->rows == 0 || m->cols == 0)
            return -EBADMSG;
        break;
    case HOLD_INPUT:
    case HOLD_OUTPUT:
    case HOLD_NOTE:
        m->data = r.p;
        m->len = r.left;
        if (m->len == 0 || m->len > HOLD_DATA_MAX)
            return -EBADMSG;
        r.left = 0;
        break;
    case HOLD_DETACH:
    case HOLD_INFO_ASK:
        break;
    case HOLD_INFO: {
        uint8_t flags = (uint8_t)get(&r, 1);
        if (flags & ~3u)
            return -EBADMSG;
        m->info.attached = flags & 1;
        m->info.lyhd_lost = flags & 2;
        m->info.pid = (uint32_t)get(&r, 4);
        m->info.started = get(&r, 8);
        m->info.active = get(&r, 8);
        get_str(&r, m->info.name, HOLD_NAME_MAX);
        get_str(&r, m->info.session_id, HOLD_ID_MAX);
        get_str(&r, m->info.command, HOLD_COMMAND_MAX);
        if (!r.bad && (!hold_name_ok(m->info.name) || !id_ok(m->info.session_id) ||
                       !command_ok(m->info.command)))
            return -EBADMSG;
        break;
    }
    case HOLD_EXIT: {
        uint8_t known = (uint8_t)get(&r, 1);
        m->exit_code = (int32_t)(uint32_t)get(&r, 4);
        m->signal = (int32_t)(uint32_t)get(&r, 4);
        if (known > 1 || m->signal < 0 || m->signal > 127 || m->exit_code < 0 ||
            m->exit_code > 255 || (!known && (m->exit_code || m->signal)))
            return -EBADMSG;
        m->known = known;
        break;
    }
    case HOLD_DETACHED:
        m->reason = (uint8_t)get(&r, 1);
        if (m->reason < HOLD_GONE_ASKED || m->reason > HOLD_GONE_FULL)
            return -EBADMSG;
        break;
    default:
        return -EBADMSG;
    }
    return r.bad || r.left ? -EBADMSG : 0;
}

struct wr {
    uint8_t *p;
    size_t left;
    bool bad;
};

static void put(struct wr *w, uint64_t v, size_t n) {
    if (w->bad || w->left < n) {
        w->bad = true;
        return;
    }
    for (size_t i = 0; i < n; i++)
        w->p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    w->p += n;
    w->left -= n;
}

static void put_bytes(struct wr *w, const void *p, size_t n) {
    if (w->bad || w->left < n) {
        w->bad = true;
        return;
    }
    if (n)
        memcpy(w->p, p, n);
    w->p += n;
    w->left -= n;
}

static void put_str(struct wr *w, const char *s) {
    size_t n = strnlen(s, 256);
    if (n > 255) {
        w->bad = true;
        return;
    }
    put(w, n, 1);
    put_bytes(w, s, n);
}

int hold_msg_encode(const struct hold_msg *m, uint8_t *buf, size_t cap) {
    struct wr w = {.p = buf, .left = cap < HOLD_MSG_MAX ? cap : HOLD_MSG_MAX};
    struct hold_msg back;

    put(&w, m->type, 1);
    switch (m->type) {
    case HOLD_ATTACH:
    case HOLD_RESIZE:
        put(&w, m->rows, 2);
        put(&w, m->cols, 2);
        if (m->type == HOLD_ATTACH)
            put(&w, m->flags, 1);
        break;
    case HOLD_INPUT:
    case HOLD_OUTPUT:
    case HOLD_NOTE:
        put_bytes(&w, m->data, m->len);
        break;
    case HOLD_INFO:
        put(&w, (m->info.attached ? 1u : 0u) | (m->info.lyhd_lost ? 2u : 0u), 1);
        put(&w, m->info.pid, 4);
        put(&w, m->info.started, 8);
        put(&w, m->info.active, 8);
        put_str(&w, m->info.name);
        put_str(&w, m->info.session_id);
        put_str(&w, m->info.command);
        break;
    case HOLD_EXIT:
        put(&w, m->known ? 1 : 0, 1);
        put(&w, (uint32_t)m->exit_code, 4);
        put(&w, (uint32_t)m->signal, 4);
        break;
    case HOLD_DETACHED:
        put(&w, m->reason, 1);
        break;
    default:
        break;
    }
    if (w.bad)
        return -EINVAL;
    size_t len = (size_t)(w.p - buf);
    if (hold_msg_decode(buf, len, &back) < 0)
        return -EINVAL;
    return (int)len;
}
