/* The protocol process's seccomp allowlist (see seccomp_self.h).
 *
 * Unlike the agent's filter (seccomp.c, a denylist: an agent is any program),
 * this one confines our own code, whose system calls we know: a libevent
 * loop (epoll) over sockets the parent handed over or that it makes itself
 * (UDP to a session's resolvers), its log on stderr and syslog, memory,
 * clocks and getrandom. It opens no file, executes nothing, creates no
 * process, changes no identity, touches no other process. A call outside the
 * list kills the process (SIGSYS): it is either our bug, which the parent
 * logs and answers by starting a new one, or an attacker who got code
 * execution, who must get no further. A foreign syscall ABI kills it too.
 *
 * Argument rules: socket() only for AF_INET/AF_INET6 datagram sockets (the
 * upstream queries) and AF_UNIX datagram (syslog's /dev/log), protocol 0;
 * ioctl() only TCGETS (isatty on stderr), FIONREAD and SIOCOUTQ (is what it
 * wrote to a client all read: proto_clients.c); setsockopt() only
 * SO_BINDTODEVICE; fcntl() only the fd and file flags; tgkill() only to
 * itself, prlimit64() only its own. Compared on the low 32 bits, as the
 * kernel reads an int (see seccomp.c). */
#include "platform/linux/seccomp_self.h"

#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "common/macros.h"

static const char *const allowed[] = {
    /* I/O on the descriptors it holds */
    "read", "write", "readv", "writev", "close", "recvfrom", "recvmsg", "sendto", "sendmsg",
    "sendmmsg", "recvmmsg", "accept4", "accept", "getsockname", "getpeername",
    "getsockopt", "connect", "fstat", "newfstatat", "lseek", "dup",
    /* the event loop */
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "epoll_ctl", "epoll_create1", "poll", "ppoll",
    "eventfd2", "pipe2",
    /* memory */
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise",
    /* time, randomness, identity of itself */
    "clock_gettime", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "getrandom",
    "getpid", "gettid", "getuid", "geteuid", "getgid", "getegid",
    /* signals to itself and their return; futexes (libc locks) */
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "futex",
    "restart_syscall", "sched_yield",
    "exit", "exit_group",
    /* and, with their arguments checked below: socket, setsockopt, fcntl,
     * ioctl, tgkill, prlimit64. Not shutdown: the sockets it serves are the
     * parent's own (handed over, not copies), and a shutdown, a filter or a
     * lock set on one would outlive this process. */
};

/* (arg i & m) == v, on the low 32 bits only (an int argument) */
#define MASKED32(i, m, v)                                                                     \
    ((struct scmp_arg_cmp){.arg = (i), .op = SCMP_CMP_MASKED_EQ,                            \
                           .datum_a = (uint32_t)(m), .datum_b = (uint32_t)(v)})

static void ctx_releasep(scmp_filter_ctx *c) {
    if (*c)
        seccomp_release(*c);
}

int sc_confine_protocol_self(void) {
    _cleanup_(ctx_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
    int r;

    if (!ctx)
        return -ENOMEM;
    /* every thread of it (its closer's workers, started before) */
    if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) < 0)
        return r;
    if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0)
        return r;
    for (size_t i = 0; i < ARRAY_SIZE(allowed); i++) {
        int nr = seccomp_syscall_resolve_name(allowed[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture (e.g. epoll_pwait2 on an old libseccomp) */
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) < 0)
            return r;
    }
    /* socket(domain, type, ...): the type's low bits without the flags */
    const uint32_t type_mask = ~(uint32_t)(SOCK_NONBLOCK | SOCK_CLOEXEC);
    const struct {
        int domain, type;
    } sockets[] = {{AF_INET, SOCK_DGRAM}, {AF_INET6, SOCK_DGRAM}, {AF_UNIX, SOCK_DGRAM}};
    for (size_t i = 0; i < ARRAY_SIZE(sockets); i++) {
        struct scmp_arg_cmp c[3] = {
            MASKED32(0, 0xffffffffu, sockets[i].domain),
            MASKED32(1, type_mask, sockets[i].type),
            MASKED32(2, 0xffffffffu, 0), /* the default protocol: UDP, not UDP-Lite */
        };
        if ((r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 3, c)) < 0)
            return r;
    }
    const unsigned long ioctls[] = {TCGETS, FIONREAD, SIOCOUTQ};
    for (size_t i = 0; i < ARRAY_SIZE(ioctls); i++) {
        struct scmp_arg_cmp c = MASKED32(1, 0xffffffffu, ioctls[i]);
        if ((r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, &c)) < 0)
            return r;
    }
    /* setsockopt: only SO_BINDTODEVICE (its upstream sockets onto the
     * session's VPN interface); never a filter, a lock or a buffer size */
    struct scmp_arg_cmp so[2] = {MASKED32(1, 0xffffffffu, SOL_SOCKET),
                                 MASKED32(2, 0xffffffffu, SO_BINDTODEVICE)};
    if ((r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, SCMP_SYS(setsockopt), 2, so)) < 0)
        return r;
    /* fcntl: flags and close-on-exec (libevent), no owner, no lease, no lock */
    const int fcmds[] = {F_GETFD, F_SETFD, F_GETFL, F_SETFL};
    for (size_t i = 0; i < ARRAY_SIZE(fcmds); i++) {
        struct scmp_arg_cmp c = MASKED32(1, 0xffffffffu, fcmds[i]);
        if ((r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1, &c)) < 0)
            return r;
    }
    /* signals to itself only (abort, raise); its own limits only */
    struct scmp_arg_cmp self = MASKED32(0, 0xffffffffu, (uint32_t)getpid());
    if ((r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, &self)) < 0)
        return r;
    struct scmp_arg_cmp zero = MASKED32(0, 0xffffffffu, 0);
    if ((r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 1, &zero)) < 0)
        return r;
    return seccomp_load(ctx);
}
