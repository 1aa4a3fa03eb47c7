/* Facts about processes from /proc. 0 or -errno; ret_* set only on success. */
#ifndef LYH_PROC_H
#define LYH_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* The process's start time (field 22 of /proc/PID/stat, clock ticks since
 * boot). A pid plus its start time names one process even across pid reuse.
 * -ENOENT when there is no such process, -ESRCH when it is a zombie. */
int proc_start_time(pid_t pid, uint64_t *ret);

#endif
