/* "Did you mean": the candidate closest to a mistyped word. Pure. */
#ifndef LYH_CLOSEST_H
#define LYH_CLOSEST_H

#include <stddef.h>

/* The candidate closest to word (at most 2 edits away, or word of 2 or more
 * characters is the start of it), or NULL. Words of 64 bytes or more never
 * match. */
const char *closest_word(const char *word, const char *const *cands, size_t n);

#endif
