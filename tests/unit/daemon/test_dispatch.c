/* The RPC dispatcher (daemon/rpc_table.c) with the real table, a real
 * connection (daemon/conn.c) whose protocol process is the test (a
 * SOCK_SEQPACKET pair: requests go in as PMSG_REQUEST, answers come out as
 * PMSG_OUT) and a real state.db: a mutating call's held
 * answer that cannot be kept (out of memory) must undo the change and still
 * answer, never leave the client waiting. realloc is wrapped (-Wl,--wrap) so
 * the test decides when it fails. And over a fake table (rpc_dispatch_in):
 * the flags are the authorization (admin, owner, unknown methods), a
 * mutating call's write is kept only when it succeeded, a unary handler that
 * forgets to answer still answers, a malformed table is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pwd.h>
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/frame.h"
#include "common/macros.h"
#include "common/lyh_limits.h"
#include "daemon/conn.h"
#include "daemon/lyhd.h"
#include "daemon/pmsg.h"
#include "daemon/policy.h"
#include "daemon/pproc.h"
#include "daemon/rpc.h"
#include "storage/store.h"

void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);

static bool fail_realloc;
static unsigned realloc_calls;

void *__wrap_realloc(void *p, size_t n) {
    realloc_calls++;
    if (fail_realloc)
        return NULL;
    return __real_realloc(p, n);
}

struct fx {
    struct lyhd d;
    char dir[64];
    int peer;   /* the protocol process's end */
    int client; /* the client's socket (the connection's duplicate is the other end) */
    struct conn *c;
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    const char *err = NULL;
    int sv[2];
    struct conn *c = NULL;
    struct ucred cred = {.pid = getpid(), .uid = 0, .gid = 0};

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/lyh-dispatch-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    assert_int_equal(store_open(f->dir, &f->d.store, &err), 0);
    f->d.cfg.max_calls_per_conn = 16;
    f->d.cfg.max_fds_per_msg = LYH_MAX_FDS_PER_MESSAGE;
    f->d.cfg.frame_timeout_ms = 5000;
    f->d.base = event_base_new();
    assert_non_null(f->d.base);
    TAILQ_INIT(&f->d.sessions);
    TAILQ_INIT(&f->d.tmpdir_jobs);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(conn_new(&f->d, 1, sv[0], &cred, &c), 0);
    f->client = sv[1];
    f->c = c;
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(pproc_attach_for_test(&f->d, sv[0]), 0);
    f->peer = sv[1];
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    char cmd[128];

    /* the protocol process says the client went away */
    conn_close(f->c, "test over");
    conn_release(f->c);
    close(f->client);
    pproc_stop(&f->d);
    close(f->peer);
    for (int i = 0; i < 3; i++)
        event_base_loop(f->d.base, EVLOOP_NONBLOCK);
    event_base_free(f->d.base);
    store_close(f->d.store);
    free(f->d.policy);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* Send a PolicyUpdate with an empty (all-default) policy as call_id. */
static void send_policy_update(struct fx *f, uint64_t call_id) {
    Lianyaohu__V1__Request req = LIANYAOHU__V1__REQUEST__INIT;
    Lianyaohu__V1__PolicyUpdateRequest u = LIANYAOHU__V1__POLICY_UPDATE_REQUEST__INIT;
    Lianyaohu__V1__Policy pol = LIANYAOHU__V1__POLICY__INIT;
    uint8_t buf[4096];
    size_t n;

    char *pats[] = {(char *)"tun*"};

    pol.n_allowed_interface_patterns = 1;
    pol.allowed_interface_patterns = pats;
    u.policy = &pol;
    req.protocol_version = LYH_PROTOCOL_VERSION;
    req.call_id = call_id;
    req.method_case = LIANYAOHU__V1__REQUEST__METHOD_POLICY_UPDATE;
    req.policy_update = &u;
    n = lianyaohu__v1__request__get_packed_size(&req);
    assert_true(n <= PMSG_CHUNK);
    lianyaohu__v1__request__pack(&req, buf);
    struct pmsg_conn m = {.id = 1, .total = (uint32_t)n, .data = buf, .data_len = n};
    assert_int_equal(conn_on_request(f->c, &m, NULL, 0), 0);
}

/* Run the loop until one response frame arrived (bounded), decode it. */
static Lianyaohu__V1__Response *read_response(struct fx *f) {
    uint8_t buf[65536];
    size_t have = 0;

    for (int i = 0; i < 100; i++) {
        uint8_t dg[PMSG_MAX_BYTES];
        int fds[PMSG_RECV_FDS];
        size_t len, nfds = 0;
        uint16_t type;
        const uint8_t *pl;
        size_t pl_len;
        struct pmsg_conn m;

        event_base_loop(f->d.base, EVLOOP_NONBLOCK);
        if (pmsg_recv(f->peer, dg, sizeof(dg), &len, fds, &nfds) == 0) {
            assert_int_equal(nfds, 0);
            assert_int_equal(pmsg_header(dg, len, &type, &pl, &pl_len), 0);
            if (type == PMSG_CONN_CLOSE)
                fail_msg("lyhd closed the connection instead of answering");
            if (type != PMSG_OUT)
                continue; /* what a policy change tells it (its domain lists) */
            assert_int_equal(pmsg_decode_conn(type, pl, pl_len, &m), 0);
            assert_true(m.id == 1 && have + m.data_len <= sizeof(buf));
            memcpy(buf + have, m.data, m.data_len);
            have += m.data_len;
            /* the "protocol process" wrote it to the client */
            assert_int_equal(conn_drained(f->c, (uint32_t)m.data_len), 0);
        }
        if (have >= LYH_FRAME_HEADER_BYTES) {
            uint32_t flen = (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 | buf[4];
            if (have >= LYH_FRAME_HEADER_BYTES + flen)
                return lianyaohu__v1__response__unpack(NULL, flen, buf + LYH_FRAME_HEADER_BYTES);
        }
        usleep(2000);
    }
    fail_msg("no answer from the dispatcher");
    return NULL;
}

static uint64_t stored_version(struct fx *f) {
    struct store_policy_version v = {0};
    uint64_t ver;
    int r = store_policy_current(f->d.store, &v);

    if (r == -ENOENT)
        return 0;
    assert_int_equal(r, 0);
    ver = v.version;
    store_policy_version_free(&v);
    return ver;
}

static void test_held_answer_lost_undoes_the_change(void **state) {
    struct fx *f = *state;
    Lianyaohu__V1__Response *resp;

    realloc_calls = 0;
    fail_realloc = true;
    send_policy_update(f, 7);
    resp = read_response(f);
    fail_realloc = false;
    assert_non_null(resp);
    /* The held final answer was the one realloc this call made. */
    assert_int_equal(realloc_calls, 1);
    assert_int_equal(resp->call_id, 7);
    assert_int_equal(resp->code, LIANYAOHU__V1__CODE__RESOURCE_EXHAUSTED);
    assert_true(resp->end_of_stream);
    assert_non_null(strstr(resp->message, "nothing was changed"));
    lianyaohu__v1__response__free_unpacked(resp, NULL);
    /* Nothing was changed: not in state.db, not in memory. */
    assert_int_equal(stored_version(f), 0);
    assert_int_equal(policy_current(&f->d)->version, 0);

    /* The same request with memory to spare: applied and answered. */
    send_policy_update(f, 8);
    resp = read_response(f);
    assert_non_null(resp);
    assert_int_equal(resp->call_id, 8);
    assert_int_equal(resp->code, LIANYAOHU__V1__CODE__OK);
    lianyaohu__v1__response__free_unpacked(resp, NULL);
    assert_int_equal(stored_version(f), 1);
    assert_int_equal(policy_current(&f->d)->version, 1);
}

/* ---- the dispatcher over a fake table (rpc_dispatch_in) --------------------------------- */

enum { F_OPEN = 1, F_ADMIN, F_OWNED, F_MUTATE, F_SILENT, F_STREAM };

static unsigned handled, owner_asked;
static uid_t owner_is = 1000;
static int owner_r;

static void answer_ok(struct rpc_call *call) {
    LyhResponse resp = LIANYAOHU__V1__RESPONSE__INIT;
    rpc_send(call, &resp, true);
}

static void h_ok(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    (void)d, (void)req;
    handled++;
    answer_ok(call);
}

/* Writes to state.db, then answers ok, or refuses when the request's call id
 * is odd: the dispatcher keeps the write only when the call succeeded. */
static void h_mutate(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    (void)req;
    handled++;
    assert_int_equal(store_meta_set(d->store, "fake", call->call_id & 1 ? "refused" : "kept"), 0);
    if (call->call_id & 1)
        rpc_fail(call, LIANYAOHU__V1__CODE__INVALID_ARGUMENT, "no");
    else
        answer_ok(call);
}

static void h_silent(struct lyhd *d, struct rpc_call *call, const LyhRequest *req) {
    (void)d, (void)call, (void)req;
    handled++; /* a bug: a unary handler that does not answer */
}

static int owner_of(struct lyhd *d, const LyhRequest *req, uid_t *ret_owner) {
    (void)d, (void)req;
    owner_asked++;
    *ret_owner = owner_is;
    return owner_r;
}

static const struct rpc_method fake[] = {
    {F_OPEN, "Open", 0, h_ok, NULL},
    {F_ADMIN, "Admin", RPC_ADMIN, h_ok, NULL},
    {F_OWNED, "Owned", RPC_OWNER, h_ok, owner_of},
    {F_MUTATE, "Mutate", RPC_ADMIN | RPC_MUTATES, h_mutate, NULL},
    {F_SILENT, "Silent", 0, h_silent, NULL},
    {F_STREAM, "Stream", RPC_STREAMING, h_silent, NULL},
};

/* Dispatch method as uid (admin or not) on a call with no connection; the
 * final code (-1: none yet), how many handlers ran. */
static int call_as(struct fx *f, uint32_t method, uid_t uid, bool admin, uint64_t id) {
    struct rpc_call *call = calloc(1, sizeof(*call));
    LyhRequest req = LIANYAOHU__V1__REQUEST__INIT;
    assert_non_null(call);
    call->call_id = id;
    call->peer.uid = uid;
    call->peer_is_admin = admin;
    call->final_code = -1;
    req.method_case = method;
    handled = owner_asked = 0;
    call->in_dispatch = true; /* the caller frees it (as conn.c does) */
    rpc_dispatch_in(fake, ARRAY_SIZE(fake), &f->d, call, &req);
    int code = call->finished ? call->final_code : -1;
    rpc_call_free(call);
    return code;
}

static void test_fake_table_authorization(void **state) {
    struct fx *f = *state;
    assert_true(rpc_table_verify_in(fake, ARRAY_SIZE(fake)));
    assert_true(rpc_table_verify());

    /* a method the table lacks: UNIMPLEMENTED, nothing runs */
    assert_int_equal(call_as(f, 99, 1000, false, 2), LIANYAOHU__V1__CODE__UNIMPLEMENTED);
    assert_int_equal(handled, 0);
    assert_int_equal(call_as(f, F_OPEN, 1000, false, 2), LIANYAOHU__V1__CODE__OK);
    assert_int_equal(handled, 1);
    /* admin rows: refused before the handler for a non-admin */
    assert_int_equal(call_as(f, F_ADMIN, 1000, false, 2), LIANYAOHU__V1__CODE__PERMISSION_DENIED);
    assert_int_equal(handled, 0);
    assert_int_equal(call_as(f, F_ADMIN, 0, true, 2), LIANYAOHU__V1__CODE__OK);
    assert_int_equal(handled, 1);
    /* owner rows: the object's owner, asked of owner_of; an admin is not asked */
    owner_r = 0;
    assert_int_equal(call_as(f, F_OWNED, 1000, false, 2), LIANYAOHU__V1__CODE__OK);
    assert_int_equal(owner_asked, 1);
    assert_int_equal(handled, 1);
    assert_int_equal(call_as(f, F_OWNED, 1001, false, 2), LIANYAOHU__V1__CODE__PERMISSION_DENIED);
    assert_int_equal(handled, 0);
    owner_r = -ENOENT;
    assert_int_equal(call_as(f, F_OWNED, 1000, false, 2), LIANYAOHU__V1__CODE__NOT_FOUND);
    assert_int_equal(handled, 0);
    owner_r = -EIO; /* cannot tell: refused, never run */
    assert_int_equal(call_as(f, F_OWNED, 1000, false, 2), LIANYAOHU__V1__CODE__PERMISSION_DENIED);
    assert_int_equal(handled, 0);
    assert_int_equal(call_as(f, F_OWNED, 1001, true, 2), LIANYAOHU__V1__CODE__OK);
    assert_int_equal(owner_asked, 0);
    owner_r = 0;
    /* a unary handler that does not answer: the client still hears (INTERNAL);
     * a stream may answer later */
    assert_int_equal(call_as(f, F_SILENT, 1000, false, 2), LIANYAOHU__V1__CODE__INTERNAL);
    assert_int_equal(call_as(f, F_STREAM, 1000, false, 2), -1);
}

static void test_fake_table_transaction(void **state) {
    struct fx *f = *state;
    char v[32] = "";

    /* refused (odd id): its write is rolled back */
    assert_int_equal(call_as(f, F_MUTATE, 0, true, 3), LIANYAOHU__V1__CODE__INVALID_ARGUMENT);
    assert_int_equal(handled, 1);
    assert_int_equal(store_meta_get(f->d.store, "fake", v, sizeof(v)), -ENOENT);
    /* a non-admin never gets as far as the transaction */
    assert_int_equal(call_as(f, F_MUTATE, 1000, false, 4), LIANYAOHU__V1__CODE__PERMISSION_DENIED);
    assert_int_equal(store_meta_get(f->d.store, "fake", v, sizeof(v)), -ENOENT);
    /* succeeded: kept */
    assert_int_equal(call_as(f, F_MUTATE, 0, true, 4), LIANYAOHU__V1__CODE__OK);
    assert_int_equal(store_meta_get(f->d.store, "fake", v, sizeof(v)), 0);
    assert_string_equal(v, "kept");
}

/* A table with a row twice, a row without a handler, an owner row that
 * cannot name its owner, a query that mutates or is owner-checked: each
 * refused (lyhd would not start). lyhd's own table passes. */
static void test_table_verify_refuses(void **state) {
    (void)state;
    const struct rpc_method twice[] = {{F_OPEN, "A", 0, h_ok, NULL}, {F_OPEN, "B", 0, h_ok, NULL}};
    const struct rpc_method none[] = {{F_OPEN, "A", 0, NULL, NULL}};
    const struct rpc_method owner[] = {{F_OWNED, "A", RPC_OWNER, h_ok, NULL}};
    const struct rpc_method qmut[] = {{F_MUTATE, "A", RPC_QUERY | RPC_MUTATES, h_ok, NULL}};
    const struct rpc_method qown[] = {{F_OWNED, "A", RPC_QUERY | RPC_OWNER, h_ok, owner_of}};
    const struct rpc_method query[] = {{F_OPEN, "A", RPC_QUERY | RPC_STREAMING, h_ok, NULL}};
    assert_false(rpc_table_verify_in(twice, ARRAY_SIZE(twice)));
    assert_false(rpc_table_verify_in(none, ARRAY_SIZE(none)));
    assert_false(rpc_table_verify_in(owner, ARRAY_SIZE(owner)));
    assert_false(rpc_table_verify_in(qmut, ARRAY_SIZE(qmut)));
    assert_false(rpc_table_verify_in(qown, ARRAY_SIZE(qown)));
    assert_true(rpc_table_verify_in(query, ARRAY_SIZE(query)));
    assert_true(rpc_table_verify());
}

/* Who is an admin is asked of the group database at each request: root
 * always; with no --admin-group nobody else; a user whose primary group it is
 * (from passwd now, not the connection's credentials). The member-list case
 * and a revocation on an open connection are in tests/e2e/policy.sh. */
static void test_admin_now(void **state) {
    struct fx *f = *state;
    struct passwd *pw = getpwnam("daemon");
    if (!pw)
        pw = getpwuid(1);
    assert_non_null(pw);
    uid_t u = pw->pw_uid;
    gid_t g = pw->pw_gid;

    f->d.cfg.admin_group = NULL;
    assert_true(conn_admin_now(&f->d, 0));
    assert_false(conn_admin_now(&f->d, u));
    f->d.cfg.admin_group = "lyh-test-admins";
    f->d.cfg.admin_gid = g;
    assert_true(conn_admin_now(&f->d, u));
    f->d.cfg.admin_gid = g + 4242;
    assert_false(conn_admin_now(&f->d, u));
    /* a uid with no passwd entry: not an admin, whatever its groups */
    assert_false(conn_admin_now(&f->d, 4000000000u));
    f->d.cfg.admin_group = NULL;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_held_answer_lost_undoes_the_change, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fake_table_authorization, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fake_table_transaction, setup, teardown),
        cmocka_unit_test(test_table_verify_refuses),
        cmocka_unit_test_setup_teardown(test_admin_now, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
