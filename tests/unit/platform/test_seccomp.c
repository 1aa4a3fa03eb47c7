/* Unit tests for platform/linux/seccomp.c against the running kernel: the
 * program is built once, and every check runs in a forked child that sets
 * NO_NEW_PRIVS, installs it and makes the real syscall. A child reports a
 * failed check as one line on a pipe and exit status 1; the parent turns
 * that into a cmocka failure. The children never return into cmocka.
 *
 * Runs as root in CI, which matters: with CAP_SYS_ADMIN most denied calls
 * would succeed or fail with something other than EPERM, so EPERM proves the
 * filter. A control child without the filter makes the same table of calls
 * to show that (entries the host itself refuses with EPERM, e.g. io_uring
 * disabled by sysctl, are reported and not counted). Arguments are chosen so
 * that the unfiltered calls are harmless (bad fds, NULL pointers, invalid
 * flags) or touch only a scratch directory or the child itself. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/linux/seccomp.h"

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

extern char **environ;

static struct sc_program prog;
static struct sc_program prog_listen; /* allow_listen: servers let through */
static int listen_fd = -1;     /* 127.0.0.1, set up by the parent */
static struct sockaddr_in listen_addr;
static char scratch[] = "/tmp/lyh-sc-test-XXXXXX";

/* ---- child harness ------------------------------------------------------------- */

static int msg_fd = -1; /* child side of the report pipe */

#define CHECK(cond, ...)                                                               \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            int e_ = errno;                                                            \
            dprintf(msg_fd, "%s:%d: ", __FILE__, __LINE__);                            \
            dprintf(msg_fd, __VA_ARGS__);                                              \
            dprintf(msg_fd, " (errno %d: %s)\n", e_, strerror(e_));                    \
            _exit(1);                                                                  \
        }                                                                              \
    } while (0)

/* expr must fail with errno e. */
#define EXPECT_ERR(expr, e)                                                            \
    do {                                                                               \
        errno = 0;                                                                     \
        long r_ = (long)(expr);                                                        \
        CHECK(r_ == -1 && errno == (e), "%s returned %ld, want -1/%s", #expr, r_, #e); \
    } while (0)

/* expr must not fail. */
#define EXPECT_OK(expr)                                                                \
    do {                                                                               \
        errno = 0;                                                                     \
        long r_ = (long)(expr);                                                        \
        CHECK(r_ >= 0, "%s failed", #expr);                                            \
    } while (0)

enum { FILTERED = 1, NO_NNP = 2, LISTEN = 4 /* with FILTERED: prog_listen */ };

/* Run fn in a child (with the filter when FILTERED) and return its wait
 * status; the child's report is copied to out. */
static int run_child(void (*fn)(void), int flags, char *out, size_t outlen) {
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        msg_fd = p[1];
        /* A fault in the child is the child's result: it must die of it,
         * not be caught by cmocka's handler and run the remaining tests. */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        signal(SIGILL, SIG_DFL);
        if (!(flags & NO_NNP))
            CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "PR_SET_NO_NEW_PRIVS");
        if (flags & FILTERED) {
            int k = sc_install(flags & LISTEN ? &prog_listen : &prog);
            errno = k < 0 ? -k : 0;
            CHECK(k == 0, "sc_install");
        }
        fn();
        _exit(0);
    }
    close(p[1]);
    size_t used = 0;
    for (;;) {
        ssize_t n = read(p[0], out + used, outlen - 1 - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        used += (size_t)n;
        if (used == outlen - 1)
            break;
    }
    out[used] = '\0';
    close(p[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        assert_int_equal(errno, EINTR);
    return status;
}

/* The child must exit 0. */
static void in_child(void (*fn)(void), int flags) {
    char msg[4096];
    int status = run_child(fn, flags, msg, sizeof(msg));
    if (WIFSIGNALED(status))
        fail_msg("child killed by signal %d; %s", WTERMSIG(status), msg);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("child failed: %s", msg[0] ? msg : "(no message)");
}

/* ---- setup --------------------------------------------------------------------- */

static int group_setup(void **state) {
    (void)state;
    if (sc_build(NULL, &prog) != 0 ||
        sc_build(&(struct sc_options){.allow_listen = true}, &prog_listen) != 0)
        return -1;
    if (!mkdtemp(scratch))
        return -1;
    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd < 0)
        return -1;
    listen_addr.sin_family = AF_INET;
    listen_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(listen_addr);
    if (bind(listen_fd, (struct sockaddr *)&listen_addr, sizeof(listen_addr)) < 0 ||
        listen(listen_fd, 16) < 0 ||
        getsockname(listen_fd, (struct sockaddr *)&listen_addr, &len) < 0)
        return -1;
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    sc_program_free(&prog);
    sc_program_free(&prog_listen);
    if (listen_fd >= 0)
        close(listen_fd);
    rmdir(scratch);
    return 0;
}

/* ---- the program itself ---------------------------------------------------------- */

static void test_program_shape(void **state) {
    (void)state;
    assert_non_null(prog.bpf);
    assert_true(prog.len > 0);
    assert_int_equal(prog.len % 8, 0); /* sizeof(struct sock_filter) */
    assert_true(prog.len / 8 <= 4096); /* BPF_MAXINSNS */
    assert_true(prog.arch == SC_ARCH_X86_64 || prog.arch == SC_ARCH_AARCH64);

    /* Both supported arches compile (names resolve, rules are accepted). */
    struct sc_program other = {0};
    struct sc_options o = {.arch = prog.arch == SC_ARCH_X86_64 ? SC_ARCH_AARCH64 : SC_ARCH_X86_64};
    assert_int_equal(sc_build(&o, &other), 0);
    assert_true(other.len > 0);
    assert_int_equal(other.arch, o.arch);
    /* ... but a foreign program is never installed. */
    assert_int_equal(sc_install(&other), -EINVAL);
    sc_program_free(&other);
    sc_program_free(&other); /* idempotent */
    sc_program_free(NULL);

    struct sc_program empty = {0};
    assert_int_equal(sc_install(&empty), -EINVAL);
    assert_int_equal(sc_install(NULL), -EINVAL);
    struct sc_options bad = {.arch = (enum sc_arch)42};
    assert_int_equal(sc_build(&bad, &other), -EOPNOTSUPP);
}

static void child_install_without_nnp(void) {
    /* Root could install without NO_NEW_PRIVS; sc_install refuses anyway. */
    CHECK(sc_install(&prog) == -EPERM, "sc_install without NO_NEW_PRIVS did not refuse");
    CHECK(prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == 0, "a filter got installed anyway");
}

static void test_install_requires_nnp(void **state) {
    (void)state;
    in_child(child_install_without_nnp, NO_NNP);
}

/* ---- denied: the named calls -------------------------------------------------------- */

/* PTRACE_ATTACH pid; if it ever succeeds (no filter), detach at once so
 * the target keeps running. */
static long ptrace_attach(pid_t pid) {
    long r = syscall(SYS_ptrace, 16L /* PTRACE_ATTACH */, (long)pid, 0L, 0L);
    if (r == 0) {
        int e = errno;
        waitpid(pid, NULL, __WALL);
        syscall(SYS_ptrace, 17L /* PTRACE_DETACH */, (long)pid, 0L, (long)SIGCONT);
        errno = e;
    }
    return r;
}

static void child_denied_named(void) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(s >= 0, "socket(AF_INET, SOCK_STREAM)");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    EXPECT_ERR(bind(s, (struct sockaddr *)&a, sizeof(a)), EPERM);
    EXPECT_ERR(listen(s, 1), EPERM);
    EXPECT_ERR(accept(listen_fd, NULL, NULL), EPERM);
    EXPECT_ERR(accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC), EPERM);
    close(s);

    /* bind is refused for unix sockets too: its family is not visible to
     * the filter (the argument is an fd). */
    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(u >= 0, "socket(AF_UNIX)");
    struct sockaddr_un ua = {.sun_family = AF_UNIX, .sun_path = "\0lyh-sc-test"};
    EXPECT_ERR(bind(u, (struct sockaddr *)&ua, sizeof(ua)), EPERM);
    close(u);

    EXPECT_ERR(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(0x0003 /* ETH_P_ALL */)), EPERM);
    EXPECT_ERR(socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, 0), EPERM);
    EXPECT_ERR(socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP), EPERM);
    EXPECT_ERR(socket(AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6), EPERM);
    EXPECT_ERR(socket(AF_INET, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), EPERM);
    EXPECT_ERR(socket(AF_INET, SOCK_PACKET | SOCK_CLOEXEC, 0), EPERM);
    /* IP protocols nftables' socket lookup does not know (chain input could
     * not refuse what reaches them): every value but the allowed six */
    static const int fams[] = {AF_INET, AF_INET6};
    for (size_t f = 0; f < 2; f++) {
        for (int proto = 0; proto <= 1024; proto++) {
            if (proto == 0 || proto == IPPROTO_ICMP || proto == IPPROTO_TCP ||
                proto == IPPROTO_UDP || proto == IPPROTO_ICMPV6 || proto == 262 /* MPTCP */)
                continue;
            errno = 0;
            int k = socket(fams[f], SOCK_DGRAM | SOCK_CLOEXEC, proto);
            CHECK(k < 0 && errno == EPERM, "socket(%d, SOCK_DGRAM, %d) returned %d", fams[f], proto, k);
        }
        EXPECT_ERR(socket(fams[f], SOCK_STREAM, 132 /* SCTP */), EPERM);
        EXPECT_ERR(socket(fams[f], SOCK_DGRAM, 136 /* UDP-Lite */), EPERM);
        EXPECT_ERR(socket(fams[f], SOCK_STREAM, 0x7fffffff), EPERM);
        EXPECT_ERR(socket(fams[f], SOCK_STREAM, -1), EPERM);
    }
    /* a BPF program choosing a SO_REUSEPORT group's receiver */
    int rs = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    CHECK(rs >= 0, "socket(AF_INET, SOCK_DGRAM)");
    int one = 1;
    EXPECT_ERR(setsockopt(rs, SOL_SOCKET, 51 /* SO_ATTACH_REUSEPORT_CBPF */, &one, sizeof(one)), EPERM);
    EXPECT_ERR(setsockopt(rs, SOL_SOCKET, SO_BINDTODEVICE, "lo", 3), EPERM);
    EXPECT_ERR(setsockopt(rs, SOL_SOCKET, 62 /* SO_BINDTOIFINDEX */, &one, sizeof(one)), EPERM);
    EXPECT_ERR(setsockopt(rs, SOL_SOCKET, 52 /* SO_ATTACH_REUSEPORT_EBPF */, &one, sizeof(one)), EPERM);
    EXPECT_OK(setsockopt(rs, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)));
    close(rs);
    EXPECT_ERR(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0 /* NETLINK_ROUTE */), EPERM);
    EXPECT_ERR(socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, 0), EPERM);
    EXPECT_ERR(socket(AF_UNSPEC, SOCK_STREAM, 0), EPERM);
    EXPECT_ERR(socket(AF_BRIDGE, SOCK_STREAM, 0), EPERM);
    EXPECT_ERR(socket(40 /* AF_VSOCK */, SOCK_STREAM, 0), EPERM);
    EXPECT_ERR(socket(38 /* AF_ALG */, SOCK_SEQPACKET, 0), EPERM);
    int sv[2];
    EXPECT_ERR(socketpair(AF_INET, SOCK_STREAM, 0, sv), EPERM);
    EXPECT_ERR(socketpair(AF_NETLINK, SOCK_RAW, 0, sv), EPERM);

    EXPECT_ERR(unshare(CLONE_NEWUSER), EPERM);
    EXPECT_ERR(unshare(CLONE_NEWNS), EPERM);
    EXPECT_ERR(setns(0, 0), EPERM);

    long pid = syscall(SYS_clone, (long)(CLONE_NEWNET | SIGCHLD), 0L, 0L, 0L, 0L);
    if (pid == 0)
        _exit(0);
    CHECK(pid == -1 && errno == EPERM, "clone(CLONE_NEWNET) returned %ld", pid);
    pid = syscall(SYS_clone, (long)(CLONE_NEWUSER | CLONE_NEWPID | SIGCHLD), 0L, 0L, 0L, 0L);
    if (pid == 0)
        _exit(0);
    CHECK(pid == -1 && errno == EPERM, "clone(CLONE_NEWUSER|CLONE_NEWPID) returned %ld", pid);

    /* clone3: ENOSYS, so libc falls back to clone(). */
    uint64_t args[11] = {0}; /* struct clone_args, CLONE_ARGS_SIZE_VER2 */
    args[4] = SIGCHLD;       /* exit_signal */
    pid = syscall(SYS_clone3, args, sizeof(args));
    if (pid == 0)
        _exit(0);
    CHECK(pid == -1 && errno == ENOSYS, "clone3 returned %ld", pid);

    EXPECT_ERR(mount("none", scratch, "tmpfs", 0, NULL), EPERM);
    EXPECT_ERR(umount2(scratch, MNT_DETACH), EPERM);
    EXPECT_ERR(chroot(scratch), EPERM);

    /* ptrace(PTRACE_ATTACH) on the parent; should it ever work, let go. */
    errno = 0;
    long r = ptrace_attach(getppid());
    CHECK(r == -1 && errno == EPERM, "ptrace(PTRACE_ATTACH, parent) returned %ld", r);

    char buf[8];
    static char there[8];
    struct iovec local = {buf, sizeof(buf)}, remote = {there, sizeof(there)};
    EXPECT_ERR(process_vm_readv(getppid(), &local, 1, &remote, 1, 0), EPERM);
    EXPECT_ERR(process_vm_writev(getppid(), &local, 1, &remote, 1, 0), EPERM);

    union bpf_attr battr;
    memset(&battr, 0, sizeof(battr));
    battr.map_type = BPF_MAP_TYPE_ARRAY;
    battr.key_size = 4;
    battr.value_size = 4;
    battr.max_entries = 1;
    EXPECT_ERR(syscall(SYS_bpf, BPF_MAP_CREATE, &battr, sizeof(battr)), EPERM);

    unsigned char params[120] = {0}; /* struct io_uring_params */
    EXPECT_ERR(syscall(SYS_io_uring_setup, 1, params), EPERM);

    EXPECT_ERR(syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0), EPERM);

    struct perf_event_attr pattr;
    memset(&pattr, 0, sizeof(pattr));
    pattr.type = PERF_TYPE_SOFTWARE;
    pattr.size = sizeof(pattr);
    pattr.config = PERF_COUNT_SW_CPU_CLOCK;
    pattr.disabled = 1;
    EXPECT_ERR(syscall(SYS_perf_event_open, &pattr, 0, -1, -1, 0), EPERM);

    EXPECT_ERR(syscall(SYS_userfaultfd, O_CLOEXEC), EPERM);

    /* TIOCSTI / TIOCLINUX on a pty of our own. */
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    CHECK(m >= 0, "posix_openpt");
    CHECK(grantpt(m) == 0 && unlockpt(m) == 0, "grantpt/unlockpt");
    int pts = open(ptsname(m), O_RDWR | O_NOCTTY | O_CLOEXEC);
    CHECK(pts >= 0, "open pty slave");
    char c = 'x';
    EXPECT_ERR(ioctl(pts, TIOCSTI, &c), EPERM);
    EXPECT_ERR(ioctl(m, TIOCSTI, &c), EPERM);
    char sub = 0;
    EXPECT_ERR(ioctl(pts, TIOCLINUX, &sub), EPERM);
    close(pts);
    close(m);

    EXPECT_ERR(personality(PER_BSD), EPERM);
    EXPECT_ERR(personality(PER_LINUX | ADDR_NO_RANDOMIZE), EPERM);
    EXPECT_ERR(personality(PER_LINUX | READ_IMPLIES_EXEC), EPERM);
    EXPECT_ERR(personality(PER_LINUX32), EPERM);
    EXPECT_ERR(personality(0xfffffffe), EPERM);
}

static void test_denied_named(void **state) {
    (void)state;
    in_child(child_denied_named, FILTERED);
}

/* ---- denied: every unconditional entry, with a control ------------------------------- */

struct call {
    const char *name;
    long nr;
    long a[6];
};

#define C(n, ...) {#n, SYS_##n, {__VA_ARGS__}}
/* Arguments that make each call fail harmlessly without the filter. */
static const struct call table[] = {
    C(bind, -1, 0, 0),
    C(listen, -1, 0),
    C(accept, -1, 0, 0),
    C(accept4, -1, 0, 0, 0),
    C(mount, 0, 0, 0, 0, 0),
#ifdef SYS_umount
    C(umount, 0),
#endif
    C(umount2, 0, 0),
    C(fsopen, 0, 0),
    C(fsconfig, -1, 0, 0, 0, 0),
    C(fsmount, -1, 0, 0),
    C(fspick, -1, 0, 0),
    C(move_mount, -1, 0, -1, 0, 0),
    C(open_tree, -1, 0, 0),
    C(mount_setattr, -1, 0, 0, 0, 0),
    C(pivot_root, 0, 0),
    C(chroot, 0),
    C(unshare, -1),
    C(setns, -1, 0),
    C(ptrace, -1, 0, 0, 0),
    C(process_vm_readv, 0, 0, 0, 0, 0, -1),
    C(process_vm_writev, 0, 0, 0, 0, 0, -1),
    C(process_madvise, -1, 0, 0, 0, -1),
    C(pidfd_getfd, -1, -1, 0),
    C(perf_event_open, 0, 0, -1, -1, 0),
    C(bpf, -1, 0, 0),
    C(userfaultfd, -1),
    C(io_uring_setup, 0, 0),
    C(io_uring_enter, -1, 0, 0, 0, 0, 0),
    C(io_uring_register, -1, 0, 0, 0),
    C(open_by_handle_at, -1, 0, 0),
    C(name_to_handle_at, -1, 0, 0, 0, 0),
    C(keyctl, -1, 0, 0, 0, 0),
    C(add_key, 0, 0, 0, 0, 0),
    C(request_key, 0, 0, 0, 0),
    C(reboot, 0, 0, 0, 0),
    C(kexec_load, 0, 0, 0, -1),
    C(kexec_file_load, -1, -1, 0, 0, -1),
    C(acct, 1),
    C(syslog, -1, 0, 0),
    C(swapon, 0, 0),
    C(swapoff, 0),
    C(init_module, 0, 0, 0),
    C(finit_module, -1, 0, 0),
    C(delete_module, 0, 0),
};
#define N_CALLS (sizeof(table) / sizeof(table[0]))

static void child_table(void) {
    int errs[N_CALLS];
    for (size_t i = 0; i < N_CALLS; i++) {
        const long *a = table[i].a;
        errno = 0;
        long r = syscall(table[i].nr, a[0], a[1], a[2], a[3], a[4], a[5]);
        errs[i] = r == -1 ? errno : 0;
    }
    CHECK(write(msg_fd, errs, sizeof(errs)) == (ssize_t)sizeof(errs), "write results");
}

static void table_results(int flags, int errs[N_CALLS]) {
    char raw[sizeof(int) * N_CALLS + 1];
    int status = run_child(child_table, flags, raw, sizeof(raw));
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    memcpy(errs, raw, sizeof(int) * N_CALLS);
}

static void test_denied_table(void **state) {
    (void)state;
    int control[N_CALLS], filtered[N_CALLS];
    unsigned proven = 0;

    table_results(0, control);
    table_results(FILTERED, filtered);
    for (size_t i = 0; i < N_CALLS; i++) {
        if (filtered[i] != EPERM)
            fail_msg("%s: errno %d (%s) under the filter, want EPERM", table[i].name, filtered[i],
                     strerror(filtered[i]));
        if (control[i] == EPERM)
            print_message("note: %s is EPERM on this host without the filter too\n",
                          table[i].name);
        else
            proven++;
    }
    print_message("%u of %zu denials proven against a control\n", proven, N_CALLS);
}

/* ---- the 32-bit truncation ----------------------------------------------------------- */

static void child_truncation(void) {
    const long hi = (long)(1UL << 32);
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    CHECK(m >= 0, "posix_openpt");
    char c = 'x';
    /* The kernel reads cmd as unsigned int: these are TIOCSTI to it. */
    EXPECT_ERR(syscall(SYS_ioctl, m, hi | TIOCSTI, &c), EPERM);
    EXPECT_ERR(syscall(SYS_ioctl, m, (long)0xffffffff00000000UL | TIOCSTI, &c), EPERM);
    EXPECT_ERR(syscall(SYS_ioctl, m, hi | TIOCLINUX, &c), EPERM);
    close(m);
    /* Families and types with junk in the high half. */
    EXPECT_ERR(syscall(SYS_socket, hi | AF_PACKET, SOCK_RAW, 0), EPERM);
    EXPECT_ERR(syscall(SYS_socket, hi | AF_INET, SOCK_STREAM, 0), EPERM); /* fail-safe */
    EXPECT_ERR(syscall(SYS_socket, AF_INET, hi | SOCK_RAW, IPPROTO_ICMP), EPERM);
    EXPECT_ERR(syscall(SYS_socketpair, hi | AF_UNIX, SOCK_STREAM, 0, (long)0), EPERM);
    /* personality: only the low 32 bits matter, to the kernel and to us. */
    EXPECT_ERR(syscall(SYS_personality, hi | PER_BSD), EPERM);
    EXPECT_OK(syscall(SYS_personality, (long)0xffffffffffffffffUL)); /* query */
    EXPECT_OK(syscall(SYS_personality, hi | 0xffffffffL));             /* query */
    /* clone: the namespace bits are low bits, whatever the high half says. */
    long pid = syscall(SYS_clone, hi | CLONE_NEWUSER | SIGCHLD, 0L, 0L, 0L, 0L);
    if (pid == 0)
        _exit(0);
    CHECK(pid == -1 && errno == EPERM, "clone(hi|CLONE_NEWUSER) returned %ld", pid);
}

static void test_truncation(void **state) {
    (void)state;
    in_child(child_truncation, FILTERED);
}

/* ---- allowed -------------------------------------------------------------------------- */

static void *thread_fn(void *arg) { return arg; }

static void child_allowed(void) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(s >= 0, "socket(AF_INET, SOCK_STREAM|SOCK_CLOEXEC)");
    CHECK(connect(s, (struct sockaddr *)&listen_addr, sizeof(listen_addr)) == 0,
          "connect to the parent's loopback listener");
    close(s);

    int fd;
    EXPECT_OK(fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    close(fd);
    EXPECT_OK(fd = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP));
    close(fd);
    EXPECT_OK(fd = socket(AF_INET, SOCK_DGRAM, IPPROTO_UDP));
    close(fd);
    /* MPTCP and ping sockets: not EPERM (the kernel may still refuse them:
     * MPTCP disabled, ping_group_range) */
    fd = socket(AF_INET, SOCK_STREAM, 262);
    CHECK(fd >= 0 || errno != EPERM, "socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)");
    if (fd >= 0)
        close(fd);
    fd = socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP);
    CHECK(fd >= 0 || errno != EPERM, "socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP)");
    if (fd >= 0)
        close(fd);
    errno = 0;
    fd = socket(AF_INET6, SOCK_DGRAM, 0);
    CHECK(fd >= 0 || errno == EAFNOSUPPORT, "socket(AF_INET6, SOCK_DGRAM)");
    if (fd >= 0)
        close(fd);
    fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0 || errno == EAFNOSUPPORT, "socket(AF_INET6, SOCK_STREAM)");
    if (fd >= 0)
        close(fd);
    EXPECT_OK(fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    close(fd);
    EXPECT_OK(fd = socket(AF_UNIX, SOCK_DGRAM, 0));
    close(fd);
    int sv[2];
    EXPECT_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
    close(sv[0]);
    close(sv[1]);

    /* fork (plain clone) */
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0)
        _exit(7);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 7, "fork child");

    /* execve */
    pid = fork();
    CHECK(pid >= 0, "fork for execve");
    if (pid == 0) {
        char *argv[] = {"true", NULL};
        execve("/bin/true", argv, environ);
        _exit(126);
    }
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "execve /bin/true: status 0x%x", st);

    /* Threads and posix_spawn: glibc tries clone3 first and must fall back. */
    pthread_t t;
    int pe = pthread_create(&t, NULL, thread_fn, NULL);
    errno = pe;
    CHECK(pe == 0, "pthread_create");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    char *argv[] = {"true", NULL};
    pe = posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ);
    errno = pe;
    CHECK(pe == 0, "posix_spawn");
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "spawned true");

    /* Terminal ioctls other than TIOCSTI/TIOCLINUX. */
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    CHECK(m >= 0 && grantpt(m) == 0 && unlockpt(m) == 0, "pty");
    int pts = open(ptsname(m), O_RDWR | O_NOCTTY | O_CLOEXEC);
    CHECK(pts >= 0, "open pty slave");
    struct winsize ws = {.ws_row = 24, .ws_col = 80};
    EXPECT_OK(ioctl(m, TIOCSWINSZ, &ws));
    memset(&ws, 0, sizeof(ws));
    EXPECT_OK(ioctl(pts, TIOCGWINSZ, &ws));
    CHECK(ws.ws_row == 24 && ws.ws_col == 80, "TIOCGWINSZ");
    int n;
    EXPECT_OK(ioctl(m, FIONREAD, &n));
    close(pts);
    close(m);

    EXPECT_OK(personality(0xffffffff));
    EXPECT_OK(personality(PER_LINUX));
}

/* allow_listen: bind, listen and accept work (what keeps the network off is
 * lyhd's chain input); everything else is denied as before. */
static void child_listen(void) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(s >= 0, "socket(AF_INET, SOCK_STREAM)");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    EXPECT_OK(bind(s, (struct sockaddr *)&a, sizeof(a)));
    EXPECT_OK(listen(s, 1));
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t len = sizeof(a);
    CHECK(c >= 0 && getsockname(s, (struct sockaddr *)&a, &len) == 0, "getsockname");
    EXPECT_OK(connect(c, (struct sockaddr *)&a, sizeof(a)));
    int got = accept4(s, NULL, NULL, SOCK_CLOEXEC);
    CHECK(got >= 0, "accept4 of its own connection");
    close(got);
    close(c);
    close(s);
    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un ua = {.sun_family = AF_UNIX, .sun_path = "\0lyh-sc-test-listen"};
    EXPECT_OK(bind(u, (struct sockaddr *)&ua, sizeof(ua)));
    close(u);
    /* the rest of the policy holds */
    EXPECT_ERR(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(0x0003)), EPERM);
    EXPECT_ERR(unshare(CLONE_NEWNET), EPERM);
    EXPECT_ERR(syscall(SYS_io_uring_setup, 1, NULL), EPERM);
}

static void test_allow_listen(void **state) {
    (void)state;
    in_child(child_listen, FILTERED | LISTEN);
    /* and the default program still refuses them (test_denied_named) */
    assert_true(prog_listen.len < prog.len);
}

static void test_allowed(void **state) {
    (void)state;
    in_child(child_allowed, FILTERED);
    /* Drain what the child connected, so the backlog stays empty. */
    int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c >= 0)
        close(c);
}

/* ---- what the spawn child does under the filter ---------------------------------------- */

/* platform/linux/spawn.c installs the filter right after its mounts, as root,
 * and only then waits for the go, drops its credentials, verifies the drop,
 * restricts itself with Landlock and execs. None of that may be a syscall
 * the filter touches, not even for some arguments: verify_drop asks the
 * kernel whether uid 0 can be had back and which capabilities are left, and
 * a filter's answer in its place would pass it without the kernel's word.
 * So here, as root under the filter, each call gets the kernel's answer:
 * regaining ids and reading capabilities work while root, and fail or read
 * empty only once the credentials are gone. */
static void child_spawn_steps(void) {
    int sp[2], fd = -1, nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    char c = 'G', cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = &c, .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                       .msg_controllen = sizeof(cbuf)};
    struct cmsghdr *cm;
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct cap[2];
    uid_t r, e, sv;
    gid_t g = 65534;

    /* the gate: one byte with an fd, over a SOCK_SEQPACKET pair */
    EXPECT_OK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp));
    memset(cbuf, 0, sizeof(cbuf));
    cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &nul, sizeof(int));
    CHECK(sendmsg(sp[0], &m, 0) == 1, "sendmsg of the go");
    c = 0;
    m.msg_controllen = sizeof(cbuf);
    CHECK(recvmsg(sp[1], &m, MSG_CMSG_CLOEXEC) == 1 && c == 'G', "recvmsg of the go");
    cm = CMSG_FIRSTHDR(&m);
    CHECK(cm && cm->cmsg_type == SCM_RIGHTS, "the go's fd");
    memcpy(&fd, CMSG_DATA(cm), sizeof(int));
    EXPECT_OK(close(fd));
    EXPECT_OK(close(sp[0]));
    EXPECT_OK(close(sp[1]));

    /* a Landlock ruleset and a rule on an O_PATH fd (the devpts rules) */
    struct landlock_ruleset_attr ra = {.handled_access_fs = LANDLOCK_ACCESS_FS_READ_FILE};
    int rs = (int)syscall(SYS_landlock_create_ruleset, &ra, sizeof(ra), 0);
    CHECK(rs >= 0 || errno == ENOSYS || errno == EOPNOTSUPP, "landlock_create_ruleset");
    if (rs >= 0) {
        int dir = open("/", O_PATH | O_CLOEXEC | O_DIRECTORY);
        struct landlock_path_beneath_attr pb = {.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE,
                                                .parent_fd = dir};
        EXPECT_OK(syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0));
        EXPECT_OK(close(dir));
    }

    /* still root: the kernel lets every id be had, and shows capabilities */
    EXPECT_OK(syscall(SYS_setresuid, 0, 0, 0));
    EXPECT_OK(syscall(SYS_setresgid, 0, 0, 0));
    memset(cap, 0, sizeof(cap));
    EXPECT_OK(syscall(SYS_capget, &h, cap));
    CHECK(cap[0].effective != 0, "capget read no capability as root");
    EXPECT_OK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0));

    /* the drop, as spawn.c does it */
    EXPECT_OK(syscall(SYS_setgroups, 1, &g));
    EXPECT_OK(syscall(SYS_setresgid, 65534, 65534, 65534));
    EXPECT_OK(syscall(SYS_setresuid, 65534, 65534, -1));
    EXPECT_OK(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0));
    EXPECT_OK(syscall(SYS_setresuid, 65534, 65534, 65534));
    CHECK(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0, "PR_GET_DUMPABLE");
    EXPECT_OK(getresuid(&r, &e, &sv));
    CHECK(r == 65534 && e == 65534 && sv == 65534, "getresuid");

    /* verify_drop's questions, now answered no by the kernel */
    EXPECT_ERR(syscall(SYS_setresuid, 0, 0, 0), EPERM);
    EXPECT_ERR(syscall(SYS_setresgid, 0, 0, 0), EPERM);
    h.pid = 0;
    memset(cap, 0xff, sizeof(cap)); /* what the kernel must overwrite */
    EXPECT_OK(syscall(SYS_capget, &h, cap));
    CHECK(cap[0].effective == 0 && cap[0].permitted == 0, "capabilities left after the drop");

    sigset_t none;
    sigemptyset(&none);
    EXPECT_OK(sigprocmask(SIG_SETMASK, &none, NULL));
    CHECK(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1, "PR_GET_NO_NEW_PRIVS");
    if (rs >= 0)
        EXPECT_OK(syscall(SYS_landlock_restrict_self, rs, 0));
    EXPECT_OK(chdir("/"));
    char *argv[] = {"/bin/true", NULL}, *envp[] = {NULL};
    execve(argv[0], argv, envp);
    CHECK(0, "execve");
}

static void test_spawn_steps_allowed(void **state) {
    (void)state;
    if (geteuid() != 0) {
        print_message("(skipped: the spawn child's steps need root)\n");
        return;
    }
    in_child(child_spawn_steps, FILTERED);
}

/* ---- foreign syscall ABIs: killed ------------------------------------------------------ */

#if defined(__x86_64__)
static void child_int80(void) {
    long ret;
    /* i386 getpid (20) through the 32-bit entry. */
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
    dprintf(msg_fd, "int 0x80 returned %ld", ret);
    _exit(3);
}

static void child_x32(void) {
    long r = syscall(0x40000000L | 39L /* x32 getpid */);
    dprintf(msg_fd, "x32 getpid returned %ld (errno %d)", r, errno);
    _exit(3);
}

static void test_foreign_abi(void **state) {
    (void)state;
    char msg[256];

    /* Control: does this kernel have the i386 entry at all? */
    int status = run_child(child_int80, 0, msg, sizeof(msg));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
        status = run_child(child_int80, FILTERED, msg, sizeof(msg));
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSYS)
            fail_msg("int 0x80 under the filter: status 0x%x, %s", status, msg);
    } else {
        print_message("note: no i386 syscall entry here (status 0x%x); int 0x80 not tested\n",
                      status);
    }
    /* x32: refused by the filter whether or not the kernel has x32. */
    status = run_child(child_x32, FILTERED, msg, sizeof(msg));
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSYS)
        fail_msg("x32 syscall under the filter: status 0x%x, %s", status, msg);
}
#else
static void test_foreign_abi(void **state) {
    (void)state;
    skip();
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_program_shape),
        cmocka_unit_test(test_install_requires_nnp),
        cmocka_unit_test(test_denied_named),
        cmocka_unit_test(test_denied_table),
        cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_allowed),
        cmocka_unit_test(test_allow_listen),
        cmocka_unit_test(test_spawn_steps_allowed),
        cmocka_unit_test(test_foreign_abi),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
