/* UTF-8 for the places that show or store text someone else chose (an
 * agent's argv, a path, a DNS name): one decoder, one notion of a code
 * point that must not be shown as it is. Pure. */
#ifndef LYH_UTF8_H
#define LYH_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The valid UTF-8 sequence at p (n >= 1 bytes left): its length and code
 * point, or 0 when p does not start one (overlong forms, surrogates and code
 * points above U+10FFFF are invalid, RFC 3629). */
size_t utf8_next(const unsigned char *p, size_t n, uint32_t *ret_cp);

/* A code point that changes how the text around it reads: C0 and C1
 * controls, DEL, bidi overrides, isolates and marks, line and paragraph
 * separators. Shown escaped, never as it is. */
bool utf8_cp_unsafe(uint32_t cp);

#endif
