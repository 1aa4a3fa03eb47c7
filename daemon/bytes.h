/* Big-endian byte writing and reading with bounds, for the binary forms lyhd
 * keeps (the guard spec in state.db) and sends (the messages between its two
 * processes). A writer or reader that would pass its end is marked bad and
 * moves no further; callers check bad once at the end. Header-only. */
#ifndef LYHD_BYTES_H
#define LYHD_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct bw {
    uint8_t *p;
    size_t cap, off;
    bool bad;
};

static inline void bw_put(struct bw *w, const void *src, size_t n) {
    if (w->bad || n > w->cap - w->off) {
        w->bad = true;
        return;
    }
    if (n)
        memcpy(w->p + w->off, src, n);
    w->off += n;
}
static inline void bw_put8(struct bw *w, uint8_t v) { bw_put(w, &v, 1); }
static inline void bw_put16(struct bw *w, uint16_t v) {
    uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    bw_put(w, b, 2);
}
static inline void bw_put32(struct bw *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    bw_put(w, b, 4);
}

struct br {
    const uint8_t *p;
    size_t len, off;
    bool bad;
};

/* The next n bytes, or NULL (and bad) when fewer are left. */
static inline const uint8_t *br_take(struct br *r, size_t n) {
    if (r->bad || n > r->len - r->off) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *at = r->p + r->off;
    r->off += n;
    return at;
}
/* Into dst; zeros when fewer are left. */
static inline void br_get(struct br *r, void *dst, size_t n) {
    const uint8_t *b = br_take(r, n);
    if (b)
        memcpy(dst, b, n);
    else
        memset(dst, 0, n);
}
static inline uint8_t br_get8(struct br *r) {
    const uint8_t *b = br_take(r, 1);
    return b ? b[0] : 0;
}
static inline uint16_t br_get16(struct br *r) {
    const uint8_t *b = br_take(r, 2);
    return b ? (uint16_t)(b[0] << 8 | b[1]) : 0;
}
static inline uint32_t br_get32(struct br *r) {
    const uint8_t *b = br_take(r, 4);
    return b ? (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3] : 0;
}
/* Every byte read, none too many. */
static inline bool br_done(const struct br *r) { return !r->bad && r->off == r->len; }

#endif
