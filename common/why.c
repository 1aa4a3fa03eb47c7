/* The one formatter behind every `why` out-parameter. */
#include "common/why.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

void set_why(char *why, size_t whylen, const char *fmt, ...) {
    va_list ap;

    if (!why || whylen == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

int why_einval(char *why, size_t whylen, const char *fmt, ...) {
    va_list ap;

    if (why && whylen > 0) {
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}
