/* Failure messages for callers: functions that can fail in a way worth
 * explaining take (char *why, size_t whylen) and fill it on failure only. */
#ifndef LYH_WHY_H
#define LYH_WHY_H

#include <stddef.h>

/* Format into why (NULL or whylen 0: nothing). Always NUL-terminated. */
void set_why(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same, for a parser's refusal: returns -EINVAL. */
int why_einval(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
