/* Small helpers used everywhere: cleanup attributes and ownership transfer. */
#ifndef LYH_MACROS_H
#define LYH_MACROS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd) {
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}
static inline void fclosep_(FILE **f) {
    if (*f)
        fclose(*f);
}
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* Hand ownership over: returns the value and resets the variable. */
#define TAKE_PTR(p)                 \
    ({                              \
        __typeof__(p) _tp_ = (p);   \
        (p) = NULL;                 \
        _tp_;                       \
    })
#define TAKE_FD(fd)                 \
    ({                              \
        int _tf_ = (fd);            \
        (fd) = -1;                  \
        _tf_;                       \
    })

/* Close an fd held in a variable and set it to -1. */
#define CLOSE_FD(fd)                \
    do {                            \
        if ((fd) >= 0) {            \
            close(fd);              \
            (fd) = -1;              \
        }                           \
    } while (0)

#endif
