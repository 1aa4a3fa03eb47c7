/* The agent's seccomp filter: compiled once in the daemon with libseccomp,
 * exported as classic BPF bytes, installed by the forked child.
 *
 * The policy is fixed (seccomp.c): a denylist of syscalls that answer EPERM
 * (clone3 answers ENOSYS), argument-masked rules for clone, socket,
 * socketpair, ioctl and personality, and any foreign syscall ABI (i386 via
 * int 0x80, x32, a non-native arch) kills the process.
 *
 * Return convention: 0 or -errno; ret_* written only on success; nothing
 * logs. No libseccomp or <linux/...> type appears here. */
#ifndef LYH_SECCOMP_H
#define LYH_SECCOMP_H

#include <stdbool.h>
#include <stddef.h>

/* Architectures the policy was written and reviewed for. */
enum sc_arch {
    SC_ARCH_NATIVE = 0, /* the one this binary runs on (x86_64 or aarch64) */
    SC_ARCH_X86_64,
    SC_ARCH_AARCH64,
};

struct sc_options {
    /* SC_ARCH_NATIVE for a program to install. Another supported arch only
     * builds a program (e.g. to check on an x86_64 CI that the table compiles
     * for aarch64); sc_install() refuses it. */
    enum sc_arch arch;
    /* Let bind, listen, accept and accept4 through: only when the firewall
     * refuses every packet for the session's sockets from any interface but
     * lo (lyhd's chain input). Default false: servers denied. */
    bool allow_listen;
};

/* A compiled filter: the instructions of a struct sock_fprog, as bytes. */
struct sc_program {
    unsigned char *bpf; /* owned; len bytes, a whole number of struct sock_filter */
    size_t len;
    enum sc_arch arch;  /* resolved: never SC_ARCH_NATIVE */
};

/* Compile the policy (o may be NULL: native). On success *ret owns its bytes
 * (release with sc_program_free()). Does not touch the calling process's own
 * filter. -EOPNOTSUPP on an architecture other than x86_64/aarch64 or when the
 * linked libseccomp does not know a syscall of the table (we refuse a weaker
 * filter), -E2BIG if the program exceeds the kernel's instruction limit,
 * -ENOMEM, or libseccomp's error. */
int sc_build(const struct sc_options *o, struct sc_program *ret);

/* Install p on the calling thread (and, with TSYNC, its siblings; a forked
 * child has none). For the forked child: PR_SET_NO_NEW_PRIVS must already be
 * set (-EPERM otherwise, checked here). Syscalls only: async-signal-safe, no
 * allocation. -EINVAL for an empty, malformed or foreign-arch program, or
 * the kernel's error. Filters only ever add up: there is no uninstall. */
int sc_install(const struct sc_program *p);

/* Free the bytes and zero *p. Accepts NULL and a zeroed program. */
void sc_program_free(struct sc_program *p);

#endif
