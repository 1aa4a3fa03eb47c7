/* state.db: the daemon's only authoritative state (sessions, guards with their
 * refcounts, reap log, policy versions). sqlite in WAL mode under the state
 * dir, schema by numbered migrations tracked with PRAGMA user_version.
 *
 * Contract: every function returns 0 or -errno and sets ret_* only on success;
 * nothing here logs. Where a function fails with a message worth showing, it
 * fills store->err (a static-size buffer, valid until the next call; read it
 * with store_errmsg()). store_open, which has no store yet, hands back a
 * message of its own.
 * Single-threaded: one struct store per process, used from the event loop.
 * Functions block on disk I/O (sqlite); they never wait on locks held by other
 * processes for more than the busy timeout (-EBUSY then).
 *
 * Errors common to the data functions below:
 *   -EINVAL   an argument is out of range or a string field is not
 *             NUL-terminated within its array, or a schema CHECK refused it
 *   -EEXIST   a UNIQUE key is already taken
 *   -ENOENT   no such row (get/update/delete)
 *   -EBUSY    another process holds the write lock past the busy timeout
 *   -EBADMSG  the database is corrupt (or a stored value does not fit its field)
 *   -ENOSPC, -EIO, -ENOMEM, -EROFS as the disk and sqlite report them */
#ifndef LYH_STORE_H
#define LYH_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct store;

/* The latest schema version this build creates (PRAGMA user_version). */
#define STORE_SCHEMA_VERSION 2

/* Size of the error message buffers (store->err, store_open's message). */
#define STORE_ERR_MAX 512

#define STORE_GUARD_SPEC_MAX 4096

/* Session states, as stored. A session's state never goes backwards (the
 * schema refuses it: an ENDED session coming back to life would reopen its
 * chain). */
enum store_session_state {
    STORE_SESSION_STARTING = 1, /* row written, kernel objects being created */
    STORE_SESSION_RUNNING = 2,  /* child exec'd */
    STORE_SESSION_ENDING = 3,   /* child gone, teardown pending */
    STORE_SESSION_ENDED = 4,    /* teardown done; kept for history */
};

/* String fields must be NUL-terminated within their arrays. */
struct store_session {
    char id[40];           /* e.g. "s-0001a2b3c4d5e6f7"; not empty */
    uint32_t uid;
    int64_t pid;           /* 0 until spawned */
    uint64_t pid_start;    /* /proc/PID/stat starttime, guards against pid reuse */
    int scope;             /* Lianyaohu__V1__Scope numbers, 1..4 (not UNSPECIFIED) */
    char interface[16];    /* "" allowed (SCOPE_NONE) */
    char chain[64];        /* nft chain name, "" when none */
    char cgroup[256];      /* cgroup path relative to the cgroup2 mount, "" when none */
    uint64_t cgroup_id;
    char tmpdir[256];
    char argv0[256];
    char cwd[4096];
    uint64_t policy_version; /* <= INT64_MAX */
    int state;             /* enum store_session_state */
    int64_t started_ms;
    int64_t ended_ms;      /* 0 while live */
    int32_t exit_code;     /* -1 unless exited normally */
    int32_t signal;
    /* What the session's firewall chain was rendered from (opaque to storage;
     * daemon/guard_spec.c), so the reaper can rebuild it after a flush. */
    uint8_t guard_spec[STORE_GUARD_SPEC_MAX];
    size_t guard_spec_len;
};

struct store_guard {
    uint32_t uid;
    int scope;             /* SCOPE_SESSION, SCOPE_UID_GID or SCOPE_USER (1..3) */
    char interface[16];    /* not empty */
    char chain[64];        /* unique, not empty */
    uint32_t refcount;
    char rules_hash[65];   /* lowercase hex digest of the rendered rules ("" allowed);
                            * mismatched requests are refused */
    int64_t created_ms;
    /* What the chain was rendered from (opaque to storage, as for sessions). */
    uint8_t guard_spec[STORE_GUARD_SPEC_MAX];
    size_t guard_spec_len;
};

struct store_policy_version {
    uint64_t version;
    uint8_t *blob;         /* owned: the packed Policy message; NULL when blob_len == 0 */
    size_t blob_len;
    uint32_t set_by_uid;
    int64_t set_ms;
};

/* Open (creating if needed) DIR/state.db, WAL mode, foreign keys on, busy
 * timeout 2 s, PRAGMA quick_check, then run migrations up to
 * STORE_SCHEMA_VERSION in one transaction.
 *
 * DIR is created with mode 0700 if missing (its parent must exist). DIR must be
 * a real directory (not a symlink) owned by the effective uid and not
 * group/world writable, every directory above it must be owned by root or the
 * effective uid and be either not group/world writable or sticky (like /tmp),
 * and the path must contain no symlinks: otherwise -EPERM. state.db is created
 * 0600 (an existing one is tightened to 0600; one owned by someone else, not a
 * regular file or with other hard links is -EPERM).
 *
 * Other failures: -EPROTO (a database newer than this build), -EBADMSG (a
 * corrupt file or not our database), -EBUSY (locked by another process),
 * -ENOTSUP (WAL unavailable), -errno from the filesystem. On failure
 * *ret_err_msg (if ret_err_msg is not NULL) points to a message that names the
 * path and says what to do; it is static storage, valid until the next
 * store_open in this thread. On success *ret_err_msg is left alone. */
int store_open(const char *dir, struct store **ret, const char **ret_err_msg);
/* Rolls back an open transaction, finalizes the statements, closes the
 * database. Accepts NULL. */
void store_close(struct store *s);

/* The message of the last failure, "" if the last call succeeded. */
const char *store_errmsg(const struct store *s);

/* One transaction per mutating request: begin (BEGIN IMMEDIATE, so -EBUSY is
 * reported here rather than at the first write), commit, rollback. Nested
 * begin is -EALREADY; commit without a transaction is -EINVAL. After a failed
 * commit the transaction may still be open: call store_rollback. Rollback
 * accepts "no transaction" (sqlite may already have rolled back by itself after
 * an I/O or disk-full error). Outside a transaction each call below is its own
 * transaction. */
int store_begin(struct store *s);
int store_commit(struct store *s);
void store_rollback(struct store *s);

/* Sessions. Insert: -EEXIST for a taken id. Update replaces every field but the
 * id: -ENOENT for an unknown id, -EINVAL for a state going backwards. */
int store_session_insert(struct store *s, const struct store_session *ss);
int store_session_update(struct store *s, const struct store_session *ss);
int store_session_get(struct store *s, const char *id, struct store_session *ret); /* -ENOENT */
/* Calls fn for every session whose state != ENDED, in start order (started_ms,
 * then id). The rows are read before the first call, so fn may call other store
 * functions (e.g. update the session it is given). fn returning non-zero stops
 * the walk and that value is returned. */
int store_session_foreach_live(struct store *s,
                               int (*fn)(const struct store_session *ss, void *userdata),
                               void *userdata);
/* Live sessions of uid_or_all, or of everyone when all is true. */
int store_session_count_live(struct store *s, uint32_t uid_or_all, bool all, uint32_t *ret);
/* The ids (any state) that start with prefix (1 to 16 lowercase hex digits),
 * of uid unless all, in id order: the first max (at most 64) into out, and in
 * *ret_n how many there are, counting up to max + 1 (more than max: the caller
 * says "and more"). */
int store_session_ids_by_prefix(struct store *s, const char *prefix, bool all, uint32_t uid,
                                char (*out)[17], size_t max, size_t *ret_n);
/* Delete ENDED sessions with ended_ms < cutoff_ms; returns the count through ret
 * (may be NULL). Live sessions are never pruned. */
int store_session_prune(struct store *s, int64_t cutoff_ms, uint32_t *ret);

/* Guards: one row per (uid, scope) for the shared fallbacks (SCOPE_UID_GID,
 * SCOPE_USER), or one per session chain (SCOPE_SESSION); chain names are
 * unique. */
/* The shared fallback guard of (uid, scope): -ENOENT; -EINVAL for SCOPE_SESSION,
 * which has one guard per session (use store_guard_get_by_chain). */
int store_guard_get(struct store *s, uint32_t uid, int scope, struct store_guard *ret);
int store_guard_get_by_chain(struct store *s, const char *chain, struct store_guard *ret);
/* Insert, or replace the row with the same chain. Replacing may change every
 * field but chain, uid and scope: a chain that exists for another (uid, scope),
 * or a second chain for the same shared (uid, scope), is -EEXIST. */
int store_guard_put(struct store *s, const struct store_guard *g);
int store_guard_delete(struct store *s, const char *chain); /* -ENOENT */
/* In insertion order; rows read before the first call, as for sessions. */
int store_guard_foreach(struct store *s, int (*fn)(const struct store_guard *g, void *userdata),
                        void *userdata);

/* Reap log: what startup reconciliation did (object, action, detail), stamped
 * with the wall clock. object and action must not be empty; detail may be NULL. */
int store_reap_log(struct store *s, const char *object, const char *action, const char *detail);

/* Policy versions: versions start at 1 and only grow. Blobs are at most 1 MiB
 * (-EINVAL above). ret is filled with an owned copy: free it with
 * store_policy_version_free. */
int store_policy_current(struct store *s, struct store_policy_version *ret); /* -ENOENT: none set */
/* -ENOENT for an unknown version. */
int store_policy_get(struct store *s, uint64_t version, struct store_policy_version *ret);
/* Appends a version (= current + 1) and returns it through ret_version (may be
 * NULL). blob may be NULL when len == 0. */
int store_policy_append(struct store *s, const uint8_t *blob, size_t len, uint32_t uid,
                        int64_t now_ms, uint64_t *ret_version);
/* Walk versions newest first, at most limit (0 = all). fn gets a borrowed view
 * valid during the call; rows are read before the first call, as for sessions. */
int store_policy_foreach(struct store *s, uint32_t limit,
                         int (*fn)(const struct store_policy_version *v, void *userdata),
                         void *userdata);
/* Frees the blob and resets the struct; accepts NULL. */
void store_policy_version_free(struct store_policy_version *v);

/* Per-user guard gids. get: -ENOENT. set: insert or replace uid's; -EEXIST
 * when another uid has gid. free: the lowest gid in [min, max] no uid has;
 * -ENOSPC when there is none. */
int store_guard_gid_get(struct store *s, uint32_t uid, uint32_t *ret);
int store_guard_gid_set(struct store *s, uint32_t uid, uint32_t gid);
int store_guard_gid_free(struct store *s, uint32_t min, uint32_t max, uint32_t *ret);

/* Key/value metadata (e.g. guard gid, last clean shutdown). Keys are 1..128
 * bytes, values at most 4096. get: -ENOENT; -ERANGE when value + NUL does not
 * fit in buflen (buf untouched then). */
int store_meta_get(struct store *s, const char *key, char *buf, size_t buflen);
int store_meta_set(struct store *s, const char *key, const char *value);

#endif
