/* rtmsg: the routing-socket messages of the Darwin route preflight, as pure
 * functions: build an RTM_GET request for one address, and find the answer to
 * it in what the routing socket returned.
 *
 * Darwin-only layouts (struct rt_msghdr, sockaddrs that start with their
 * length): this compiles on Darwin, and on Linux only against the stub headers
 * (platform/darwin/darwin_sys.h, -DLYH_DARWIN_STUBS) for the syntax check and
 * the unit test. No I/O, no allocation, no logging. Return convention: 0 or
 * -errno; ret_* written only on success. */
#ifndef LYH_PLATFORM_DARWIN_RTMSG_H
#define LYH_PLATFORM_DARWIN_RTMSG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Big enough for a request and for any answer to one (header, up to
 * RTAX_MAX sockaddrs of at most 255 bytes each, rounded). */
#define RTMSG_BUF_MAX 2048

/* Build "route -n get ADDR": an RTM_GET with RTA_DST = addr and an empty
 * RTA_IFP, which asks the kernel to name the outgoing interface. family is
 * AF_INET (addr: 4 bytes) or AF_INET6 (16 bytes). Returns the message length
 * in *ret_len. -EAFNOSUPPORT, -ENOSPC. */
int rtmsg_build_get(int family, const void *addr, int seq, void *buf, size_t cap,
                    size_t *ret_len);

/* What the kernel answered. */
struct rtmsg_answer {
    int error;     /* 0, or -rtm_errno (-ESRCH: no route) */
    int flags;     /* rtm_flags */
    int ifindex;   /* from RTA_IFP, else rtm_index; 0 when neither names one */
};

/* Scan one read of the routing socket for the answer to request seq of
 * process pid (messages of other processes and of other types are skipped).
 * 0 when found; -EAGAIN when this read holds no answer to us; -EBADMSG for a
 * truncated or malformed message; -EPROTO for a version we do not know. */
int rtmsg_parse_get(const void *buf, size_t len, int seq, pid_t pid, struct rtmsg_answer *ret);

#endif
