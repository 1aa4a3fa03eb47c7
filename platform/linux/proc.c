/* /proc readers. Never writes anything; never trusts the comm field, which
 * the process itself controls (it may contain spaces and parentheses), so
 * parsing starts after the last ')'. */
#include "platform/linux/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int proc_start_time(pid_t pid, uint64_t *ret) {
    char path[64], buf[1024];
    ssize_t n;
    int fd;
    char *p;

    if (pid <= 0)
        return -EINVAL;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ENOENT : -errno;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return n < 0 ? -errno : -EBADMSG;
    buf[n] = '\0';
    p = strrchr(buf, ')');
    if (!p)
        return -EBADMSG;
    /* After ") " come fields 3..: state is field 3, starttime is field 22.
     * A zombie (Z) or dead (X) process no longer runs: report it gone. */
    p++;
    while (*p == ' ')
        p++;
    if (*p == 'Z' || *p == 'X')
        return -ESRCH;
    for (int field = 3; field <= 22; field++) {
        while (*p == ' ')
            p++;
        if (!*p)
            return -EBADMSG;
        if (field == 22) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(p, &end, 10);
            if (errno || end == p)
                return -EBADMSG;
            *ret = v;
            return 0;
        }
        while (*p && *p != ' ')
            p++;
    }
    return -EBADMSG;
}

int proc_label(pid_t pid, char *buf, size_t len) {
    char path[64], raw[64];

    if (pid <= 0 || !buf || len < 2)
        return -EINVAL;
    /* comm, not cmdline: reading another process's cmdline reads its memory,
     * which that process can make hang (a page of a FUSE file that never
     * answers) and with it whoever reads it */
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return errno == ENOENT || errno == ESRCH ? -ENOENT : -errno;
    ssize_t n = read(fd, raw, sizeof(raw) - 1);
    close(fd);
    if (n <= 0)
        return -ENOENT;
    raw[n] = '\0';
    raw[strcspn(raw, "\n")] = '\0';
    size_t k = 0;
    for (; raw[k] && k < len - 1; k++)
        buf[k] = raw[k] >= 0x20 && raw[k] < 0x7f ? raw[k] : '?';
    buf[k] = '\0';
    return k ? 0 : -ENOENT;
}
