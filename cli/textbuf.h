/* textbuf: a bounded string builder and the CLI's escapers (for a terminal,
 * JSON, CSV). Pure: no I/O, no allocation; writes only into the caller's
 * buffer, and marks the builder full instead of overflowing it.
 *
 * One escaper per output form, used by every command: a string from the
 * daemon (argv0, cwd, a refusal reason, any detail another user could
 * influence) reads the same in `lyh audit --json` and `lyh sessions --json`. */
#ifndef LYH_CLI_TEXTBUF_H
#define LYH_CLI_TEXTBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/utf8.h" /* utf8_next, utf8_cp_unsafe */

struct sb {
    char *buf;
    size_t len;     /* capacity, NUL included */
    size_t pos;
    size_t pending; /* spaces owed before the next byte: padding is only
                       written when something follows it, so a line never
                       ends in blanks and never needs room for them */
    bool full;
};

/* Start on buf (len bytes, NUL included). -ENOSPC for no buffer. */
int sb_init(struct sb *s, char *buf, size_t len);
/* -ENOSPC when something did not fit (the text is then cut), else 0.
 * Blanks still owed at the end are dropped. */
int sb_finish(struct sb *s);
void sb_mem(struct sb *s, const char *p, size_t n);
void sb_puts(struct sb *s, const char *p);
void sb_putc(struct sb *s, char c);
/* Short pieces only (under 128 bytes formatted). */
void sb_printf(struct sb *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* n blanks between columns. */
void sb_gap(struct sb *s, size_t n);
/* Where the next column starts (counting blanks still owed). */
size_t sb_mark(const struct sb *s);
/* Blanks until the column that started at mark is width characters wide. */
void sb_pad(struct sb *s, size_t mark, size_t width);


/* For a terminal: printable ASCII and valid UTF-8 as they are; control
 * bytes, C1 controls, invalid bytes, bidi overrides and line separators as
 * \xNN or \uNNNN escapes. */
void sb_safe(struct sb *s, const char *str);
/* A JSON string literal (RFC 8259), quotes included; invalid UTF-8 becomes
 * U+FFFD, so the result is valid JSON whatever the bytes. */
void sb_json(struct sb *s, const char *str);
/* An RFC 4180 field: quoted when it holds a comma, a quote, CR or LF. */
void sb_csv(struct sb *s, const char *str);

/* Bytes sb_json may need for str, NUL included (6 per byte at worst). */
size_t sb_json_size(const char *str);

#endif
