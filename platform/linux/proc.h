/* Facts about processes from /proc. 0 or -errno; ret_* set only on success. */
#ifndef LYH_PROC_H
#define LYH_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* The process's start time (field 22 of /proc/PID/stat, clock ticks since
 * boot). A pid plus its start time names one process even across pid reuse.
 * -ENOENT when there is no such process, -ESRCH when it is a zombie. */
int proc_start_time(pid_t pid, uint64_t *ret);

/* What the process calls itself: its comm (/proc/PID/comm, at most 15
 * characters: "sshd", "python3"), into buf (len > 1), every byte outside
 * printable ASCII as '?', cut to len - 1. Never its cmdline: that read
 * touches the process's memory, which it can make hang. For the record only:
 * the process may set it to anything, and the pid may be another process's
 * by then. -ENOENT when it is gone. */
int proc_label(pid_t pid, char *buf, size_t len);

#endif
