/* The bounded string builder and the escapers (see textbuf.h). */
#include "cli/textbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void sb_mem(struct sb *s, const char *p, size_t n) {
    if (n == 0)
        return;
    if (s->full || s->pending + n >= s->len - s->pos) {
        s->full = true;
        return;
    }
    memset(s->buf + s->pos, ' ', s->pending);
    s->pos += s->pending;
    s->pending = 0;
    memcpy(s->buf + s->pos, p, n);
    s->pos += n;
    s->buf[s->pos] = '\0';
}

void sb_puts(struct sb *s, const char *p) { sb_mem(s, p, strlen(p)); }
void sb_putc(struct sb *s, char c) { sb_mem(s, &c, 1); }

void sb_printf(struct sb *s, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(tmp)) {
        s->full = true; /* only short pieces are formatted this way */
        return;
    }
    sb_mem(s, tmp, (size_t)n);
}

/* n blanks between columns. */
void sb_gap(struct sb *s, size_t n) { s->pending += n; }

/* Where the next column starts (counting blanks still owed). */
size_t sb_mark(const struct sb *s) { return s->pos + s->pending; }

/* Blanks until the column that started at `mark` is `width` characters wide
 * (characters = UTF-8 lead bytes: the sanitised text is valid UTF-8). */
void sb_pad(struct sb *s, size_t mark, size_t width) {
    size_t chars = 0;
    for (size_t i = mark; i < s->pos; i++)
        chars += ((unsigned char)s->buf[i] & 0xc0) != 0x80;
    chars += s->pos + s->pending - (mark > s->pos ? mark : s->pos);
    if (chars < width)
        s->pending += width - chars;
}

int sb_init(struct sb *s, char *buf, size_t len) {
    if (!buf || len == 0)
        return -ENOSPC;
    *s = (struct sb){.buf = buf, .len = len};
    buf[0] = '\0';
    return 0;
}

/* Blanks still owed at the end are dropped. */
int sb_finish(struct sb *s) { return s->full ? -ENOSPC : 0; }

/* For a terminal: see the file comment. */
void sb_safe(struct sb *s, const char *str) {
    const unsigned char *p = (const unsigned char *)str;
    size_t n = strlen(str);

    while (n > 0) {
        uint32_t cp;
        size_t l = utf8_next(p, n, &cp);
        if (l == 0 || (l == 1 && (cp < 0x20 || cp == 0x7f))) {
            sb_printf(s, "\\x%02x", p[0]);
            l = 1;
        } else if (utf8_cp_unsafe(cp)) {
            sb_printf(s, "\\u%04x", (unsigned)cp);
        } else {
            sb_mem(s, (const char *)p, l);
        }
        p += l;
        n -= l;
    }
}

/* A JSON string literal (RFC 8259), quotes included. */
void sb_json(struct sb *s, const char *str) {
    const unsigned char *p = (const unsigned char *)str;
    size_t n = strlen(str);

    sb_putc(s, '"');
    while (n > 0) {
        uint32_t cp;
        size_t l = utf8_next(p, n, &cp);
        if (l == 0) {
            sb_puts(s, "\\ufffd");
            l = 1;
        } else if (cp == '"') {
            sb_puts(s, "\\\"");
        } else if (cp == '\\') {
            sb_puts(s, "\\\\");
        } else if (cp == '\n') {
            sb_puts(s, "\\n");
        } else if (cp == '\r') {
            sb_puts(s, "\\r");
        } else if (cp == '\t') {
            sb_puts(s, "\\t");
        } else if (cp < 0x20 || cp == 0x7f) {
            sb_printf(s, "\\u%04x", (unsigned)cp);
        } else {
            sb_mem(s, (const char *)p, l);
        }
        p += l;
        n -= l;
    }
    sb_putc(s, '"');
}

/* An RFC 4180 field: quoted when it holds a comma, a quote, CR or LF. */
void sb_csv(struct sb *s, const char *str) {
    if (!strpbrk(str, ",\"\r\n")) {
        sb_puts(s, str);
        return;
    }
    sb_putc(s, '"');
    for (const char *p = str; *p; p++) {
        if (*p == '"')
            sb_putc(s, '"');
        sb_putc(s, *p);
    }
    sb_putc(s, '"');
}

size_t sb_json_size(const char *str) { return strlen(str) * 6 + 3; }
