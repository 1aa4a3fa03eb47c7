/* daemon/spawner.c's plan codec: a plan round-trips (every field, the fds in
 * their places), and what the decoder must refuse it refuses: a cut
 * datagram, another magic, fds that do not match the mask, a string
 * without its NUL or with one inside, lists beyond the spawn limits, a
 * seccomp program that is not whole instructions, a plan with both or
 * neither of the Landlock ruleset and the gate that brings it. */
#include <setjmp.h> /* cmocka needs these first */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/pproc.h"
#include "daemon/spawner.h"
#include "platform/linux/seccomp.h"
#include "platform/linux/unixsock.h"

static uint8_t buf[1 << 16];
static const uint8_t bpf[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static void plan_of(struct spawn_plan *p, struct sc_program *sc) {
    static char *argv[] = {"/bin/echo", "hi there", NULL};
    static char *envp[] = {"PATH=/usr/bin", "A=", NULL};
    static const char *hide[] = {"/run/user/1000", "/var/run/docker.sock"};
    static const char *expose[] = {"/tmp/work"};
    static const char *socks[] = {"/run/user/1000/bus"};
    static const struct spawn_cover covers[] = {{"/home/u/.bashrc", true}, {"/home/u/.config", false}};
    static const gid_t groups[] = {1000, 27};

    *sc = (struct sc_program){.bpf = (unsigned char *)bpf, .len = sizeof(bpf),
                              .arch = SC_ARCH_X86_64};
    *p = (struct spawn_plan){
        .argv = argv, .envp = envp, .stdio = {10, -1, 12}, .pty_fd = -1, .cgroup_dir_fd = 14,
        .cgroup_procs_fd = -1, .uid = 1000, .gid = 2000001, .groups = groups, .n_groups = 2,
        .landlock_fd = 16, .landlock_handled = 0x1234567890ull, .seccomp = sc, .cwd = "/home/u",
        .hide = hide, .n_hide = 2, .private_tmp = "/tmp/lyh-x", .expose = expose, .n_expose = 1,
        .protect = covers, .n_protect = 2, .sockets = socks, .n_sockets = 1,
    };
}

static void test_round_trip(void **state) {
    (void)state;
    struct spawn_plan p, q;
    struct sc_program sc;
    struct spawner_storage st;
    int fds[SPAWNER_FDS];
    size_t len, nfds;

    plan_of(&p, &sc);
    assert_int_equal(spawner_encode(&p, buf, sizeof(buf) - 1, &len, fds, &nfds), 0);
    assert_int_equal(nfds, 4);
    int in[4] = {10, 12, 14, 16}; /* as received: other numbers would do */
    assert_memory_equal(fds, in, sizeof(in));
    buf[len] = '\0';
    assert_int_equal(spawner_decode(buf, len, in, 4, &st, &q), 0);
    assert_string_equal(q.argv[0], "/bin/echo");
    assert_string_equal(q.argv[1], "hi there");
    assert_null(q.argv[2]);
    assert_string_equal(q.envp[1], "A=");
    assert_null(q.envp[2]);
    assert_true(q.stdio[0] == 10 && q.stdio[1] == -1 && q.stdio[2] == 12);
    assert_true(q.pty_fd == -1 && q.cgroup_dir_fd == 14 && q.cgroup_procs_fd == -1 &&
                q.landlock_fd == 16);
    assert_true(q.uid == 1000 && q.gid == 2000001 && q.n_groups == 2 && q.groups[1] == 27);
    assert_true(q.landlock_handled == 0x1234567890ull);
    assert_string_equal(q.cwd, "/home/u");
    assert_string_equal(q.private_tmp, "/tmp/lyh-x");
    assert_true(q.n_hide == 2 && strcmp(q.hide[1], "/var/run/docker.sock") == 0);
    assert_true(q.n_expose == 1 && strcmp(q.expose[0], "/tmp/work") == 0);
    assert_true(q.n_sockets == 1 && strcmp(q.sockets[0], "/run/user/1000/bus") == 0);
    assert_true(q.n_protect == 2 && q.protect[0].ro && !q.protect[1].ro &&
                strcmp(q.protect[1].path, "/home/u/.config") == 0);
    assert_true(q.seccomp->len == sizeof(bpf) && memcmp(q.seccomp->bpf, bpf, sizeof(bpf)) == 0 &&
                q.seccomp->arch == SC_ARCH_X86_64);
    assert_false(q.clone_parent); /* the spawner sets it, never the wire */
    spawner_storage_free(&st);

    /* no private tmp */
    p.private_tmp = NULL;
    assert_int_equal(spawner_encode(&p, buf, sizeof(buf) - 1, &len, fds, &nfds), 0);
    buf[len] = '\0';
    assert_int_equal(spawner_decode(buf, len, in, 4, &st, &q), 0);
    assert_null(q.private_tmp);
    spawner_storage_free(&st);

    /* too big for the buffer */
    assert_int_equal(spawner_encode(&p, buf, 40, &len, fds, &nfds), -ENOBUFS);
}

/* A gated plan carries the gate where the ruleset was; a plan must carry
 * exactly one of them, on either side. */
static void test_gated(void **state) {
    (void)state;
    struct spawn_plan p, q;
    struct sc_program sc;
    struct spawner_storage st;
    int fds[SPAWNER_FDS];
    size_t len, nfds;

    plan_of(&p, &sc);
    p.landlock_fd = -1;
    p.gated = true;
    p.gate_fd = 18;
    assert_int_equal(spawner_encode(&p, buf, sizeof(buf) - 1, &len, fds, &nfds), 0);
    assert_int_equal(nfds, 4);
    int in[4] = {10, 12, 14, 18};
    assert_memory_equal(fds, in, sizeof(in));
    buf[len] = '\0';
    assert_int_equal(spawner_decode(buf, len, in, 4, &st, &q), 0);
    assert_true(q.gated && q.gate_fd == 18 && q.landlock_fd == -1 && q.cgroup_dir_fd == 14);
    spawner_storage_free(&st);

    /* the encoder refuses both and neither, and so does spawn_start (before
     * it makes anything) */
    p.landlock_fd = 16;
    assert_int_equal(spawner_encode(&p, buf, sizeof(buf) - 1, &len, fds, &nfds), -EINVAL);
    pid_t pid;
    int pidfd, status_fd;
    assert_int_equal(spawn_start(&p, &pid, &pidfd, &status_fd), -EINVAL);
    p.landlock_fd = -1;
    p.gate_fd = -1;
    assert_int_equal(spawn_start(&p, &pid, &pidfd, &status_fd), -EINVAL);
    p.gate_fd = 18;
    p.landlock_fd = 16;
    p.landlock_fd = -1;
    p.gated = false;
    assert_int_equal(spawner_encode(&p, buf, sizeof(buf) - 1, &len, fds, &nfds), -EINVAL);

    /* the decoder too: the mask's ruleset bit (6) and gate bit (7) are the
     * 5th word; both set with five fds, then neither with three */
    p.gated = true;
    assert_int_equal(spawner_encode(&p, buf, sizeof(buf) - 1, &len, fds, &nfds), 0);
    buf[len] = '\0';
    uint32_t mask;
    memcpy(&mask, buf + 20, sizeof(mask));
    assert_int_equal(mask, (1u << 0) | (1u << 2) | (1u << 4) | (1u << 7));
    uint32_t both = mask | (1u << 6), neither = mask & ~(1u << 7);
    int five[5] = {10, 12, 14, 16, 18}, three[3] = {10, 12, 14};
    memcpy(buf + 20, &both, sizeof(both));
    assert_int_equal(spawner_decode(buf, len, five, 5, &st, &q), -EBADMSG);
    memcpy(buf + 20, &neither, sizeof(neither));
    assert_int_equal(spawner_decode(buf, len, three, 3, &st, &q), -EBADMSG);
    memcpy(buf + 20, &mask, sizeof(mask));
    assert_int_equal(spawner_decode(buf, len, in, 4, &st, &q), 0);
    spawner_storage_free(&st);
}

static void test_refused(void **state) {
    (void)state;
    struct spawn_plan p, q;
    struct sc_program sc;
    struct spawner_storage st;
    int fds[SPAWNER_FDS], in[4] = {10, 12, 14, 16};
    size_t len, nfds;

    plan_of(&p, &sc);
    assert_int_equal(spawner_encode(&p, buf, sizeof(buf) - 1, &len, fds, &nfds), 0);
    buf[len] = '\0';
    /* every cut short of the whole */
    for (size_t n = 0; n < len; n++) {
        uint8_t saved = buf[n];
        buf[n] = '\0';
        assert_int_equal(spawner_decode(buf, n, in, 4, &st, &q), -EBADMSG);
        buf[n] = saved;
    }
    /* fds: one too few, one too many */
    assert_int_equal(spawner_decode(buf, len, in, 3, &st, &q), -EBADMSG);
    int five[5] = {10, 12, 14, 16, 18};
    assert_int_equal(spawner_decode(buf, len, five, 5, &st, &q), -EBADMSG);
    /* another magic */
    buf[0] ^= 1;
    assert_int_equal(spawner_decode(buf, len, in, 4, &st, &q), -EBADMSG);
    buf[0] ^= 1;
    /* a NUL inside a string: argv[1]'s bytes ("hi there") get one */
    uint8_t *at = memmem(buf, len, "hi there", 8);
    assert_non_null(at);
    at[2] = '\0';
    assert_int_equal(spawner_decode(buf, len, in, 4, &st, &q), -EBADMSG);
    at[2] = ' ';
    /* a string that lost its NUL */
    at[8] = 'x';
    assert_int_equal(spawner_decode(buf, len, in, 4, &st, &q), -EBADMSG);
    at[8] = '\0';
    assert_int_equal(spawner_decode(buf, len, in, 4, &st, &q), 0);
    spawner_storage_free(&st);
    /* a program that is not whole instructions */
    sc.len = 12;
    assert_int_equal(spawner_encode(&p, buf, sizeof(buf) - 1, &len, fds, &nfds), 0);
    buf[len] = '\0';
    assert_int_equal(spawner_decode(buf, len, in, 4, &st, &q), -EBADMSG);
    sc.len = sizeof(bpf);
    /* more hide entries than a launch may have */
    const char *many[SPAWN_MAX_HIDE + 1];
    for (size_t i = 0; i < SPAWN_MAX_HIDE + 1; i++)
        many[i] = "/x";
    p.hide = many;
    p.n_hide = SPAWN_MAX_HIDE + 1;
    assert_int_equal(spawner_encode(&p, buf, sizeof(buf) - 1, &len, fds, &nfds), 0);
    buf[len] = '\0';
    assert_int_equal(spawner_decode(buf, len, in, 4, &st, &q), -EBADMSG);
}

/* The tmpdir remover's request: round trip, and what the spawner refuses. */
static void test_remove_request(void **state) {
    (void)state;
    uid_t uid;
    gid_t gid;
    const char *path;
    size_t len;

    assert_int_equal(spawner_encode_rm("/tmp/lyh-0123", 1000, 2000001, buf, sizeof(buf), &len), 0);
    assert_int_equal(spawner_decode_rm(buf, len, &uid, &gid, &path), 0);
    assert_true(uid == 1000 && gid == 2000001);
    assert_string_equal(path, "/tmp/lyh-0123");
    /* cut anywhere, or one byte more */
    for (size_t n = 0; n < len; n++)
        assert_int_equal(spawner_decode_rm(buf, n, &uid, &gid, &path), -EBADMSG);
    buf[len] = 0;
    assert_int_equal(spawner_decode_rm(buf, len + 1, &uid, &gid, &path), -EBADMSG);
    /* a plan's magic */
    buf[0] ^= 2;
    assert_int_equal(spawner_decode_rm(buf, len, &uid, &gid, &path), -EBADMSG);
    buf[0] ^= 2;
    /* a NUL inside the path, a relative path */
    buf[len - 3] = '\0';
    assert_int_equal(spawner_decode_rm(buf, len, &uid, &gid, &path), -EBADMSG);
    assert_int_equal(spawner_encode_rm("tmp/x", 1, 1, buf, sizeof(buf), &len), -EINVAL);
    assert_int_equal(spawner_encode_rm("/tmp/x", 1, 1, buf, sizeof(buf), &len), 0);
    buf[16] = 'x'; /* the path's first byte: "xtmp/x" */
    assert_int_equal(spawner_decode_rm(buf, len, &uid, &gid, &path), -EBADMSG);
    assert_int_equal(spawner_encode_rm("/tmp/x", 1, 1, buf, 12, &len), -ENOBUFS);
}

/* The protocol process's start: round trip (a binary's fd, or a path), and
 * what the spawner refuses: root, fds that do not match what it says, both
 * or neither of a binary and an absolute path, anything cut or longer. */
static void test_protocol_request(void **state) {
    (void)state;
    char *argv[] = {"lyhd", "--protocol-process", "3", "999", "998", "1", NULL};
    char *envp[] = {"TZ=UTC", "LANG=C.UTF-8", NULL};
    struct pproc_exec x = {.uid = 999, .gid = 998, .exe_fd = 9, .argv = argv, .envp = envp}, y;
    int fds[2], sock = -1;
    size_t len, nfds;

    assert_int_equal(spawner_encode_pp(&x, 7, buf, sizeof(buf), &len, fds, &nfds), 0);
    assert_true(nfds == 2 && fds[0] == 7 && fds[1] == 9);
    assert_int_equal(spawner_decode_pp(buf, len, fds, nfds, &y, &sock), 0);
    assert_true(sock == 7 && y.exe_fd == 9 && y.uid == 999 && y.gid == 998 && !y.path);
    for (int i = 0; argv[i]; i++)
        assert_string_equal(y.argv[i], argv[i]);
    assert_null(y.argv[6]);
    assert_string_equal(y.envp[1], "LANG=C.UTF-8");
    assert_null(y.envp[2]);
    free(y.argv);
    free(y.envp);
    /* the binary's fd missing, or one fd more */
    assert_int_equal(spawner_decode_pp(buf, len, fds, 1, &y, &sock), -EBADMSG);
    int three[3] = {7, 9, 11};
    assert_int_equal(spawner_decode_pp(buf, len, three, 3, &y, &sock), -EBADMSG);
    /* cut anywhere, or one byte more */
    for (size_t n = 0; n < len; n++)
        assert_int_equal(spawner_decode_pp(buf, n, fds, nfds, &y, &sock), -EBADMSG);
    buf[len] = 0;
    assert_int_equal(spawner_decode_pp(buf, len + 1, fds, nfds, &y, &sock), -EBADMSG);
    /* another request's magic */
    buf[0] ^= 2;
    assert_int_equal(spawner_decode_pp(buf, len, fds, nfds, &y, &sock), -EBADMSG);
    buf[0] ^= 2;
    /* root */
    x.uid = 0;
    assert_int_equal(spawner_encode_pp(&x, 7, buf, sizeof(buf), &len, fds, &nfds), 0);
    assert_int_equal(spawner_decode_pp(buf, len, fds, nfds, &y, &sock), -EBADMSG);
    x.uid = 999;
    /* a path instead of the binary's fd: absolute only */
    x.exe_fd = -1;
    x.path = "/usr/libexec/evil";
    assert_int_equal(spawner_encode_pp(&x, 7, buf, sizeof(buf), &len, fds, &nfds), 0);
    assert_int_equal(nfds, 1);
    assert_int_equal(spawner_decode_pp(buf, len, fds, nfds, &y, &sock), 0);
    assert_string_equal(y.path, "/usr/libexec/evil");
    assert_int_equal(y.exe_fd, -1);
    free(y.argv);
    free(y.envp);
    buf[len - 2 - strlen("usr/libexec/evil")] = 'x'; /* "xusr/libexec/evil" */
    assert_int_equal(spawner_decode_pp(buf, len, fds, nfds, &y, &sock), -EBADMSG);
    x.path = "evil";
    assert_int_equal(spawner_encode_pp(&x, 7, buf, sizeof(buf), &len, fds, &nfds), -EINVAL);
    x.path = "/e";
    assert_int_equal(spawner_encode_pp(&x, 7, buf, 20, &len, fds, &nfds), -ENOBUFS);
    /* no program name */
    argv[0] = NULL;
    assert_int_equal(spawner_encode_pp(&x, 7, buf, sizeof(buf), &len, fds, &nfds), -EINVAL);
}

/* The gate itself (platform/linux/spawn.c), over a socketpair: the go with
 * its one fd, and what stops a child instead. */
static void test_gate(void **state) {
    (void)state;
    int sv[2], fd = -1, devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(devnull >= 0);

    /* the go */
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(spawn_gate_go(sv[0], devnull), 0);
    close(sv[0]); /* a go then the end: the go still arrives first */
    assert_int_equal(spawn_gate_wait(sv[1], &fd), 0);
    struct stat a, b;
    assert_true(fstat(fd, &a) == 0 && fstat(devnull, &b) == 0 && a.st_ino == b.st_ino);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    close(fd);
    close(sv[1]);

    /* the end without a go */
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    close(sv[0]);
    assert_int_equal(spawn_gate_wait(sv[1], &fd), -ECANCELED);
    close(sv[1]);

    /* another byte; no fd; two fds */
    int two[2] = {devnull, devnull};
    struct {
        const char *byte;
        const int *fds;
        size_t nfds;
    } bad[] = {{"g", &devnull, 1}, {"G", NULL, 0}, {"G", two, 2}};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        assert_int_equal(unixsock_send_fds(sv[0], bad[i].byte, 1, bad[i].fds, bad[i].nfds, 0), 1);
        assert_int_equal(spawn_gate_wait(sv[1], &fd), -EPROTO);
        close(sv[0]);
        close(sv[1]);
    }
    /* the sender refuses what is no go */
    assert_int_equal(spawn_gate_go(-1, devnull), -EINVAL);
    assert_int_equal(spawn_gate_go(sv[0], -1), -EINVAL);
    close(devnull);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_gated),
        cmocka_unit_test(test_remove_request),
        cmocka_unit_test(test_protocol_request),
        cmocka_unit_test(test_gate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
