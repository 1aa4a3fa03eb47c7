/* seccomp: the syscall half of the agent's confinement.
 *
 * Owns: the policy tables below, their compilation with libseccomp into
 * classic BPF, and the installation of those bytes. It never installs a
 * filter on the daemon itself (sc_build only exports), never allocates or
 * calls libseccomp in sc_install (the forked child), never kills the agent
 * for a native syscall, and never logs.
 *
 * The filter is a denylist over a default of ALLOW: the agent is an ordinary
 * program (node, python, compilers, git) and an allowlist would break it
 * with every libc or runtime update. What is denied is what lets a process
 * leave the sandbox or attack the kernel or other processes, and what the
 * other layers cannot express:
 *  - servers (bind, listen, accept), unless the caller says the firewall
 *    keeps the network from the session's sockets (sc_options.allow_listen:
 *    lyhd's chain input refuses every packet for them from any interface
 *    but lo). Without that, a listener would be reachable from the LAN;
 *  - mounts, chroot, pivot_root, namespaces (unshare, setns, clone with a
 *    CLONE_NEW* flag): a new user namespace hands out capabilities over new
 *    mount/net namespaces, and with them a way around Landlock's view of the
 *    filesystem and nftables' view of sockets, plus a large kernel surface;
 *  - other processes' memory (ptrace, process_vm_*, process_madvise,
 *    pidfd_getfd);
 *  - known unprivileged kernel attack surface (bpf, perf_event_open,
 *    userfaultfd, io_uring, keyrings);
 *  - file handles (open_by_handle_at opens by inode number, past any path
 *    rule; name_to_handle_at is its other half);
 *  - host administration (reboot, kexec, modules, swap, acct, syslog): the
 *    agent has no capabilities, this is depth;
 *  - terminal injection (TIOCSTI, TIOCLINUX): push keystrokes into the input
 *    of a terminal the agent can open (DESIGN.md: the agent never holds the
 *    user's terminal, this is depth);
 *  - sockets other than unix, and TCP/UDP over IPv4/IPv6: no raw packets,
 *    no netlink (routes, firewall, audit), no packet sockets, no exotic
 *    families with their own kernel code; of the IP protocols only TCP,
 *    UDP, MPTCP and ping sockets (add_protocol_rules());
 *  - SO_ATTACH_REUSEPORT_CBPF/EBPF (see arg_rules).
 * Denials answer EPERM so agents fail cleanly and say why (DESIGN.md).
 *
 * Never matched, for any argument: the credential and capability calls
 * (setgroups, setres[ug]id, getres[ug]id, capget, prctl), landlock_*,
 * recvmsg, chdir, execve. The spawn child installs this filter before its
 * uid drop (platform/linux/spawn.c), and its check that the drop cannot be
 * undone must get the kernel's answer, not ours (test_spawn_steps_allowed).
 *
 * Exceptions to EPERM, and why:
 *  - clone3 answers ENOSYS. Its flags are in a struct in user memory, which
 *    a seccomp filter cannot read, so we cannot tell a thread from a new
 *    namespace. EPERM would break thread creation (glibc >= 2.34 tries
 *    clone3 first and gives up on EPERM); ENOSYS is the kernel's own "not
 *    implemented", on which glibc and other runtimes fall back to clone(),
 *    whose flags are a register we do check.
 *  - A foreign syscall ABI kills the process (SCMP_ACT_KILL_PROCESS): the
 *    i386 ABI through int 0x80 (or arm32 compat) and x32 (the 0x40000000 bit
 *    on x86_64; libseccomp routes it to the bad-arch action when x32 is not
 *    in the filter). The tables are written in native numbers, so a foreign
 *    ABI would bypass all of them; no agent built for the host uses one,
 *    and a 32-bit binary could not run anyway (every syscall of it would be
 *    refused). Only an exploit or a mistake issues such a call, and a kill
 *    (SIGSYS, exit 159 at the CLI, recorded by the kernel's audit) is the
 *    clearer outcome than a failing syscall that code might retry or ignore.
 *
 * Arguments, and the 32-bit truncation: the BPF sees each argument as the
 * full 64-bit register, while the kernel reads an int or unsigned int
 * parameter from its low 32 bits only. A rule that denies one value must
 * therefore compare only the low 32 bits (masked), or 0x1_00005412 would
 * pass as "not TIOCSTI" and still be TIOCSTI to the kernel. A rule that
 * allows only some values may compare all 64 bits: a value with junk in the
 * high half is then denied, which is safe. Both are used below, each said.
 * libseccomp allows one comparison per argument per rule and rules of one
 * action are ORed, which is why "not in a set" is spelled as several rules. */
#include "platform/linux/seccomp.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/macros.h"

#if defined(__x86_64__) && !defined(__ILP32__)
#define SC_ARCH_THIS SC_ARCH_X86_64
#elif defined(__aarch64__)
#define SC_ARCH_THIS SC_ARCH_AARCH64
#else
#define SC_ARCH_THIS SC_ARCH_NATIVE /* unsupported: sc_build refuses */
#endif

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

_Static_assert(SOCK_STREAM == 1 && SOCK_DGRAM == 2 && SOCK_RAW == 3,
               "the socket type rules below assume the Linux values");

/* ---- the policy ------------------------------------------------------------------ */

/* Denied outright with EPERM. Reasons at the top of this file. */
static const char *const deny_servers[] = {"bind", "listen", "accept", "accept4"};
static const char *const deny_always[] = {
    /* mounts, old and new API, and changing the root */
    "mount", "umount", "umount2", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
    "open_tree", "mount_setattr", "pivot_root", "chroot",
    /* namespaces (clone: see arg_rules) */
    "unshare", "setns",
    /* other processes */
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd",
    /* kernel attack surface */
    "perf_event_open", "bpf", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register",
    /* file handles */
    "open_by_handle_at", "name_to_handle_at",
    /* keyrings */
    "keyctl", "add_key", "request_key",
    /* host administration */
    "reboot", "kexec_load", "kexec_file_load", "acct", "syslog", "swapon", "swapoff",
    "init_module", "finit_module", "delete_module",
};

struct arg_rule {
    const char *syscall;
    int err;                   /* errno returned */
    unsigned n_cmp;            /* comparisons, ANDed; 0: every call */
    struct scmp_arg_cmp cmp[2];
};

/* Plain initializers (not libseccomp's compound-literal macros) so the
 * table is a constant expression. */
#define CMP(i, o, a, b) {.arg = (i), .op = (o), .datum_a = (scmp_datum_t)(a), .datum_b = (scmp_datum_t)(b)}
#define EQ(i, v) CMP(i, SCMP_CMP_EQ, v, 0)
#define NE(i, v) CMP(i, SCMP_CMP_NE, v, 0)
#define GT(i, v) CMP(i, SCMP_CMP_GT, v, 0)
#define MASKED(i, m, v) CMP(i, SCMP_CMP_MASKED_EQ, m, v) /* (arg & m) == v */

/* clone() with a namespace flag. clone_flags is an unsigned long, and each
 * test is one bit below bit 32, so truncation cannot hide it. CLONE_NEWTIME
 * (0x80) is not a clone() flag (that bit is part of the exit signal); it can
 * only come through clone3 or unshare, both refused. */
#define CLONE_NS(flag) {"clone", EPERM, 1, {MASKED(0, (flag), (flag))}}

/* socket(AF_INET/AF_INET6, type): the kernel takes type & 0xf (SOCK_TYPE_MASK)
 * as the type and refuses any other bit but SOCK_NONBLOCK|SOCK_CLOEXEC, so
 * masking with 0xf is "type without its flags". Denied: 0, 3 (SOCK_RAW) and
 * 4..15 (RDM, SEQPACKET, DCCP, PACKET, ...), leaving STREAM (1) and DGRAM
 * (2). A low mask is immune to truncation; the family is compared in full,
 * and a family with junk in its high half is denied by the GT rule below. */
#define INET_TYPES(fam)                                                                  \
    {"socket", EPERM, 2, {EQ(0, fam), MASKED(1, 0xf, 0)}},                               \
    {"socket", EPERM, 2, {EQ(0, fam), MASKED(1, 0xf, SOCK_RAW)}},                        \
    {"socket", EPERM, 2, {EQ(0, fam), MASKED(1, 0xc, 0x4)}},                             \
    {"socket", EPERM, 2, {EQ(0, fam), MASKED(1, 0x8, 0x8)}}

static const struct arg_rule arg_rules[] = {
    /* See the top of this file. */
    {"clone3", ENOSYS, 0, {{0}}},

    CLONE_NS(CLONE_NEWNS),
    CLONE_NS(CLONE_NEWCGROUP),
    CLONE_NS(CLONE_NEWUTS),
    CLONE_NS(CLONE_NEWIPC),
    CLONE_NS(CLONE_NEWUSER),
    CLONE_NS(CLONE_NEWPID),
    CLONE_NS(CLONE_NEWNET),

    /* ioctl(fd, unsigned int cmd): deny two values, so compare the low 32
     * bits only. */
    {"ioctl", EPERM, 1, {MASKED(1, 0xffffffffu, TIOCSTI)}},
    {"ioctl", EPERM, 1, {MASKED(1, 0xffffffffu, TIOCLINUX)}},

    /* socket(domain): allowed are AF_UNIX (1), AF_INET (2), AF_INET6 (10).
     * An allow-set, so compared in full: everything above 10 (including any
     * value with junk in the high half), 0, and 3..9 spelled out. */
    {"socket", EPERM, 1, {GT(0, AF_INET6)}},
    {"socket", EPERM, 1, {EQ(0, AF_UNSPEC)}},
    {"socket", EPERM, 1, {EQ(0, AF_AX25)}},
    {"socket", EPERM, 1, {EQ(0, AF_IPX)}},
    {"socket", EPERM, 1, {EQ(0, AF_APPLETALK)}},
    {"socket", EPERM, 1, {EQ(0, AF_NETROM)}},
    {"socket", EPERM, 1, {EQ(0, AF_BRIDGE)}},
    {"socket", EPERM, 1, {EQ(0, AF_ATMPVC)}},
    {"socket", EPERM, 1, {EQ(0, AF_X25)}},
    INET_TYPES(AF_INET),
    INET_TYPES(AF_INET6),

    /* setsockopt(SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF/EBPF): a program that
     * picks the receiving socket of a SO_REUSEPORT group. nftables' UDP
     * lookup runs without it, so chain input would judge one socket and the
     * kernel deliver to another (a session's, sharing a port with a host
     * process of its user). level and optname are ints: low 32 bits. */
    {"setsockopt", EPERM, 2, {MASKED(1, 0xffffffffu, SOL_SOCKET), MASKED(2, 0xffffffffu, 51)}},
    {"setsockopt", EPERM, 2, {MASKED(1, 0xffffffffu, SOL_SOCKET), MASKED(2, 0xffffffffu, 52)}},
    /* setsockopt(SOL_SOCKET, SO_BINDTODEVICE/SO_BINDTOIFINDEX): a socket
     * bound to the LAN device sends what the routing table would not (a
     * rewritten DNS flow to 127.0.0.1 goes out of it, to the LAN). Chain
     * dnsout drops that; the agent has no business choosing a device. */
    {"setsockopt", EPERM, 2, {MASKED(1, 0xffffffffu, SOL_SOCKET), MASKED(2, 0xffffffffu, 25)}},
    {"setsockopt", EPERM, 2, {MASKED(1, 0xffffffffu, SOL_SOCKET), MASKED(2, 0xffffffffu, 62)}},

    /* socketpair: AF_UNIX only (an allow-set of one: compared in full). */
    {"socketpair", EPERM, 1, {NE(0, AF_UNIX)}},

    /* personality: see add_personality_rules(). */
};

_Static_assert(AF_UNIX == 1 && AF_INET == 2 && AF_INET6 == 10 && AF_AX25 == 3 && AF_X25 == 9,
               "the socket domain rules above assume the Linux values");
_Static_assert(SOL_SOCKET == 1, "the setsockopt rules above assume the Linux value");
#ifdef SO_ATTACH_REUSEPORT_CBPF
_Static_assert(SO_ATTACH_REUSEPORT_CBPF == 51 && SO_ATTACH_REUSEPORT_EBPF == 52,
               "the setsockopt rules above assume the Linux values");
#endif
_Static_assert(SO_BINDTODEVICE == 25, "the setsockopt rules above assume the Linux value");
#ifdef SO_BINDTOIFINDEX
_Static_assert(SO_BINDTOIFINDEX == 62, "the setsockopt rules above assume the Linux value");
#endif

/* personality(unsigned int persona): allowed are the query 0xffffffff and
 * PER_LINUX (0), which every agent already has (the daemon's persona,
 * inherited), so setting it changes nothing; everything else (PER_BSD,
 * READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE, ...) is EPERM.
 * The kernel reads only the low 32 bits, so the rule must too: "low 32 bits
 * neither all 0 nor all 1". With one masked comparison per rule that is 32
 * rules: deny when bit k is set and bit k+1 (mod 32) is clear. A 32-bit word
 * that is neither all 0 nor all 1 has such a pair (walk up cyclically from
 * any 1 bit until the first 0), and the two allowed words have none. */
static int add_personality_rules(scmp_filter_ctx ctx) {
    int nr = seccomp_syscall_resolve_name("personality");
    if (nr == __NR_SCMP_ERROR)
        return -EOPNOTSUPP;
    for (unsigned k = 0; k < 32; k++) {
        uint64_t bit = 1ull << k, next = 1ull << ((k + 1) % 32);
        const struct scmp_arg_cmp c = MASKED(0, bit | next, bit);
        int r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1, &c);
        if (r < 0)
            return r;
    }
    return 0;
}

/* socket(AF_INET/AF_INET6, type, protocol): allowed are the protocols the
 * firewall can tell apart by their socket (nftables' socket lookup knows TCP
 * and UDP; MPTCP's subflows are TCP) and ping sockets: 0 (the type's
 * default), ICMP, TCP, UDP, ICMPv6, MPTCP. Others (UDP-Lite, SCTP, ...) would
 * receive from the LAN past chain input, whose socket lookup never finds them.
 * libseccomp compares an argument once per rule, so the denied values are
 * spelled as aligned blocks (arg & ~(size-1)) == start, computed below,
 * and everything above the largest allowed value by one GT (which also
 * catches junk in the high half). */
static const unsigned inet_protocols[] = {0, 1 /* ICMP */, 6 /* TCP */, 17 /* UDP */,
                                          58 /* ICMPv6 */, 262 /* MPTCP */};
#define INET_PROTOCOL_MAX 262u

static bool protocol_allowed_in(unsigned lo, unsigned size) {
    for (size_t i = 0; i < ARRAY_SIZE(inet_protocols); i++)
        if (inet_protocols[i] >= lo && inet_protocols[i] < lo + size)
            return true;
    return false;
}

static int add_protocol_rules(scmp_filter_ctx ctx) {
    static const int families[] = {AF_INET, AF_INET6};
    int nr = seccomp_syscall_resolve_name("socket");
    if (nr == __NR_SCMP_ERROR)
        return -EOPNOTSUPP;
    for (size_t f = 0; f < ARRAY_SIZE(families); f++) {
        struct scmp_arg_cmp c[2] = {EQ(0, families[f]), GT(2, INET_PROTOCOL_MAX)};
        int r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, 2, c);
        if (r < 0)
            return r;
        for (unsigned v = 0; v <= INET_PROTOCOL_MAX;) {
            unsigned size = 1;
            if (protocol_allowed_in(v, 1)) {
                v++;
                continue;
            }
            /* the largest aligned block from v holding no allowed value */
            while (v % (size * 2) == 0 && !protocol_allowed_in(v, size * 2) &&
                   v + size * 2 <= INET_PROTOCOL_MAX + 1)
                size *= 2;
            c[1] = (struct scmp_arg_cmp)MASKED(2, 0xffffffffu & ~(size - 1), v);
            r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, 2, c);
            if (r < 0)
                return r;
            v += size;
        }
    }
    return 0;
}

/* ---- compile ---------------------------------------------------------------------- */


static void ctx_releasep(scmp_filter_ctx *ctx) {
    if (*ctx)
        seccomp_release(*ctx);
}

static int arch_token(enum sc_arch a, uint32_t *ret) {
    switch (a) {
    case SC_ARCH_X86_64:
        *ret = SCMP_ARCH_X86_64;
        return 0;
    case SC_ARCH_AARCH64:
        *ret = SCMP_ARCH_AARCH64;
        return 0;
    default:
        return -EOPNOTSUPP;
    }
}

static int resolve(const char *name, int *ret) {
    int nr = seccomp_syscall_resolve_name(name);
    /* An unknown name means a libseccomp older than the table: refuse to
     * build a filter that silently lacks a rule. (A syscall that exists but
     * not on this arch resolves to a negative pseudo number, which
     * libseccomp accepts and leaves out of the filter.) */
    if (nr == __NR_SCMP_ERROR)
        return -EOPNOTSUPP;
    *ret = nr;
    return 0;
}

/* Every syscall of names answers EPERM. */
static int deny_all(scmp_filter_ctx ctx, const char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int nr, k = resolve(names[i], &nr);
        if (k < 0)
            return k;
        k = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
        if (k < 0)
            return k;
    }
    return 0;
}

/* Read the exported program back from the memfd. */
static int read_program(int fd, unsigned char **ret, size_t *ret_len) {
    struct stat st;

    if (fstat(fd, &st) < 0)
        return -errno;
    if (st.st_size <= 0 || (size_t)st.st_size % sizeof(struct sock_filter) != 0)
        return -EIO;
    if ((size_t)st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS)
        return -E2BIG;
    size_t len = (size_t)st.st_size;
    _cleanup_free_ unsigned char *buf = malloc(len);
    if (!buf)
        return -ENOMEM;
    for (size_t off = 0; off < len;) {
        ssize_t n = pread(fd, buf + off, len - off, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EIO;
        off += (size_t)n;
    }
    *ret = TAKE_PTR(buf);
    *ret_len = len;
    return 0;
}

int sc_build(const struct sc_options *o, struct sc_program *ret) {
    enum sc_arch want = o ? o->arch : SC_ARCH_NATIVE;
    uint32_t token, native;
    int k, nr;

    if (!ret)
        return -EINVAL;
    if (SC_ARCH_THIS == SC_ARCH_NATIVE)
        return -EOPNOTSUPP;
    if (want == SC_ARCH_NATIVE)
        want = SC_ARCH_THIS;
    k = arch_token(want, &token);
    if (k < 0)
        return k;
    k = arch_token(SC_ARCH_THIS, &native);
    if (k < 0)
        return k;
    /* The libseccomp we link must agree on what native is. */
    if (seccomp_arch_native() != native)
        return -EOPNOTSUPP;

    _cleanup_(ctx_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        return -ENOMEM;
    /* Any syscall ABI but the one we add below: kill (see the top). */
    k = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (k < 0)
        return k;
    /* A binary tree over the syscall numbers, not one long chain: the
     * kernel runs the program for every syscall number when it installs it
     * (to cache the ones always allowed) and for each call the cache does
     * not decide (ioctl, socket, clone, ...); both walk a few nodes now. */
    k = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    if (k < 0)
        return k;
    if (token != native) {
        k = seccomp_arch_add(ctx, token);
        if (k < 0)
            return k;
        k = seccomp_arch_remove(ctx, SCMP_ARCH_NATIVE);
        if (k < 0)
            return k;
    }

    k = deny_all(ctx, deny_always, ARRAY_SIZE(deny_always));
    if (k == 0 && !(o && o->allow_listen))
        k = deny_all(ctx, deny_servers, ARRAY_SIZE(deny_servers));
    if (k < 0)
        return k;
    for (size_t i = 0; i < ARRAY_SIZE(arg_rules); i++) {
        const struct arg_rule *r = &arg_rules[i];
        k = resolve(r->syscall, &nr);
        if (k < 0)
            return k;
        k = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO((uint32_t)r->err), nr, r->n_cmp, r->cmp);
        if (k < 0)
            return k;
    }
    k = add_personality_rules(ctx);
    if (k < 0)
        return k;
    k = add_protocol_rules(ctx);
    if (k < 0)
        return k;

    /* libseccomp 2.5 exports only to an fd; a memfd keeps it off disk. */
    _cleanup_close_ int mfd = memfd_create("lyh-seccomp", MFD_CLOEXEC);
    if (mfd < 0)
        return -errno;
    k = seccomp_export_bpf(ctx, mfd);
    if (k < 0)
        return k;
    unsigned char *bpf = NULL;
    size_t len = 0;
    k = read_program(mfd, &bpf, &len);
    if (k < 0)
        return k;
    *ret = (struct sc_program){.bpf = bpf, .len = len, .arch = want};
    return 0;
}

void sc_program_free(struct sc_program *p) {
    if (!p)
        return;
    free(p->bpf);
    *p = (struct sc_program){0};
}

/* ---- install (forked child: syscalls only) ----------------------------------------- */

int sc_install(const struct sc_program *p) {
    if (!p || !p->bpf || p->len == 0 || p->len % sizeof(struct sock_filter) != 0 ||
        p->len / sizeof(struct sock_filter) > BPF_MAXINSNS)
        return -EINVAL;
    /* A program for another arch would kill us at the next syscall. */
    if (SC_ARCH_THIS == SC_ARCH_NATIVE || p->arch != SC_ARCH_THIS)
        return -EINVAL;
    /* Required by the kernel unless we still hold CAP_SYS_ADMIN, which after
     * the drop would be the bug: check it ourselves. */
    int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
    if (nnp < 0)
        return -errno;
    if (nnp != 1)
        return -EPERM;

    struct sock_fprog prog = {
        .len = (unsigned short)(p->len / sizeof(struct sock_filter)),
        .filter = (struct sock_filter *)(void *)p->bpf,
    };
    long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog);
    if (r < 0)
        return -errno;
    /* TSYNC: a positive value is a thread that could not be synchronised. */
    if (r > 0)
        return -EBUSY;
    return 0;
}
