/* Numbered schema migrations for state.db, tracked with PRAGMA user_version.
 *
 * This file owns the schema: every table, index, CHECK and trigger of state.db
 * is created here and nowhere else. Migration N brings a version N-1 database
 * to version N and ends by setting user_version = N; all pending migrations
 * run in one BEGIN IMMEDIATE transaction, so a crash or an error leaves the
 * file at its old version, never half-migrated, and two processes cannot race
 * the same migration. A migration, once released, is never edited: change the
 * schema by appending migration N+1 and bumping STORE_SCHEMA_VERSION.
 *
 * The SQL here is constant text (no values are ever formatted into it).
 * Must never: log, or touch a database whose user_version is newer than this
 * build (that would silently break the newer lyhd's invariants).
 *
 * Why the CHECKs: sqlite is the only authoritative state, and the reaper acts on
 * what it reads back at startup. The constraints keep values inside what the C
 * structs can hold (byte lengths, via CAST AS BLOB, since length() of TEXT
 * counts characters) and inside the enums, so a bug in the daemon fails at the
 * write instead of being read back as a strange security decision. */
#include <errno.h>
#include <stdio.h>

#include "storage/store_int.h"

/* PRAGMA application_id: "LYH1". A non-zero user_version with another id is
 * someone else's database. */
#define STORE_APPLICATION_ID 0x4c594831

static const char migration_1[] =
    /* Key/value metadata. */
    "CREATE TABLE meta ("
    "  key   TEXT NOT NULL PRIMARY KEY"
    "        CHECK (length(CAST(key AS BLOB)) BETWEEN 1 AND 128),"
    "  value TEXT NOT NULL CHECK (length(CAST(value AS BLOB)) <= 4096)"
    ") STRICT, WITHOUT ROWID;"

    /* Sessions: written before the kernel objects they describe, so the reaper
     * can always find what a dead instance left behind. */
    "CREATE TABLE sessions ("
    "  id             TEXT NOT NULL PRIMARY KEY"
    "                 CHECK (length(CAST(id AS BLOB)) BETWEEN 1 AND 39),"
    "  uid            INTEGER NOT NULL CHECK (uid BETWEEN 0 AND 4294967295),"
    "  pid            INTEGER NOT NULL CHECK (pid >= 0),"
    "  pid_start      INTEGER NOT NULL," /* uint64 stored as its int64 bits */
    "  scope          INTEGER NOT NULL CHECK (scope BETWEEN 1 AND 4),"
    "  interface      TEXT NOT NULL CHECK (length(CAST(interface AS BLOB)) <= 15),"
    "  chain          TEXT NOT NULL CHECK (length(CAST(chain AS BLOB)) <= 63),"
    "  cgroup         TEXT NOT NULL CHECK (length(CAST(cgroup AS BLOB)) <= 255),"
    "  cgroup_id      INTEGER NOT NULL," /* uint64 stored as its int64 bits */
    "  tmpdir         TEXT NOT NULL CHECK (length(CAST(tmpdir AS BLOB)) <= 255),"
    "  argv0          TEXT NOT NULL CHECK (length(CAST(argv0 AS BLOB)) <= 255),"
    "  cwd            TEXT NOT NULL CHECK (length(CAST(cwd AS BLOB)) <= 4095),"
    "  policy_version INTEGER NOT NULL CHECK (policy_version >= 0),"
    "  state          INTEGER NOT NULL CHECK (state BETWEEN 1 AND 4),"
    "  started_ms     INTEGER NOT NULL,"
    "  ended_ms       INTEGER NOT NULL,"
    "  exit_code      INTEGER NOT NULL CHECK (exit_code BETWEEN -2147483648 AND 2147483647),"
    "  signal         INTEGER NOT NULL CHECK (signal BETWEEN -2147483648 AND 2147483647),"
    "  guard_spec     BLOB NOT NULL CHECK (length(guard_spec) <= 4096)"
    ") STRICT;"
    /* Live-session lookups: the walk in start order, the per-uid count, and
     * pruning of ended ones. The queries repeat these WHERE terms literally so
     * the planner can use the partial indexes. */
    "CREATE INDEX sessions_live ON sessions (started_ms, id) WHERE state <> 4;"
    "CREATE INDEX sessions_live_uid ON sessions (uid) WHERE state <> 4;"
    "CREATE INDEX sessions_ended ON sessions (ended_ms) WHERE state = 4;"
    /* STARTING -> RUNNING -> ENDING -> ENDED, possibly skipping a step, never
     * back: a session the reaper ended must not come back to life. */
    "CREATE TRIGGER sessions_state_forward BEFORE UPDATE OF state ON sessions"
    "  WHEN NEW.state < OLD.state"
    "  BEGIN SELECT RAISE(ABORT, 'session state cannot go backwards'); END;"

    /* Guards: the refcounted nft chains. Chain names are unique; the shared
     * fallbacks (scope 2 = uid+gid, 3 = user) have one row per (uid, scope),
     * session chains (scope 1) one per session. */
    "CREATE TABLE guards ("
    "  id         INTEGER PRIMARY KEY,"
    "  chain      TEXT NOT NULL UNIQUE"
    "             CHECK (length(CAST(chain AS BLOB)) BETWEEN 1 AND 63),"
    "  uid        INTEGER NOT NULL CHECK (uid BETWEEN 0 AND 4294967295),"
    "  scope      INTEGER NOT NULL CHECK (scope BETWEEN 1 AND 3),"
    "  interface  TEXT NOT NULL CHECK (length(CAST(interface AS BLOB)) BETWEEN 1 AND 15),"
    "  refcount   INTEGER NOT NULL CHECK (refcount BETWEEN 0 AND 4294967295),"
    "  rules_hash TEXT NOT NULL"
    "             CHECK (length(rules_hash) <= 64 AND rules_hash NOT GLOB '*[^0-9a-f]*'),"
    "  created_ms INTEGER NOT NULL,"
    "  guard_spec BLOB NOT NULL CHECK (length(guard_spec) <= 4096)"
    ") STRICT;"
    "CREATE UNIQUE INDEX guards_shared ON guards (uid, scope) WHERE scope <> 1;"

    /* Reap log: what startup reconciliation found and did. */
    "CREATE TABLE reap_log ("
    "  id     INTEGER PRIMARY KEY,"
    "  at_ms  INTEGER NOT NULL,"
    "  object TEXT NOT NULL CHECK (length(CAST(object AS BLOB)) BETWEEN 1 AND 4096),"
    "  action TEXT NOT NULL CHECK (length(CAST(action AS BLOB)) BETWEEN 1 AND 64),"
    "  detail TEXT NOT NULL CHECK (length(CAST(detail AS BLOB)) <= 4096)"
    ") STRICT;"

    /* Policy versions: append-only history, version = max + 1. 1 MiB matches
     * the largest frame, which bounds any policy a client can send. */
    "CREATE TABLE policy_versions ("
    "  version    INTEGER PRIMARY KEY CHECK (version >= 1),"
    "  blob       BLOB NOT NULL CHECK (length(blob) <= 1048576),"
    "  set_by_uid INTEGER NOT NULL CHECK (set_by_uid BETWEEN 0 AND 4294967295),"
    "  set_ms     INTEGER NOT NULL"
    ") STRICT;"

    "PRAGMA application_id = 1280919601;" /* STORE_APPLICATION_ID */
    "PRAGMA user_version = 1;";

/* Version 2: one guard gid per user. The agent runs with it as its gid, so
 * files an agent creates belong to that group: a gid shared by all users'
 * agents let user A's agent read user B's agent's 0640 files. A gid, once
 * given, stays the user's (lyhd reassigns only one outside its range). */
static const char migration_2[] =
    "CREATE TABLE guard_gids ("
    "  uid INTEGER NOT NULL PRIMARY KEY CHECK (uid BETWEEN 0 AND 4294967295),"
    "  gid INTEGER NOT NULL UNIQUE CHECK (gid BETWEEN 1 AND 4294967294)"
    ") STRICT;"
    "PRAGMA user_version = 2;";

static const struct sqlu_migration migrations[] = {
    { 1, migration_1 },
    { 2, migration_2 },
};

_Static_assert(ARRAY_SIZE(migrations) == STORE_SCHEMA_VERSION,
               "one migration per schema version, the last one is STORE_SCHEMA_VERSION");
_Static_assert(STORE_APPLICATION_ID == 1280919601, "migration_1 spells the application id");

static int check_version(struct store *s, int64_t version) {
    if (version > STORE_SCHEMA_VERSION)
        return sqlu_errf(&s->sq, -EPROTO,
                         "state.db schema version %lld is newer than this lyhd (%d); "
                         "upgrade lyhd or move the file away (%s)",
                         (long long)version, STORE_SCHEMA_VERSION, s->sq.path);
    if (version < 0)
        return sqlu_errf(&s->sq, -EBADMSG,
                         "%s: invalid schema version %lld, not a lianyaohu state database; "
                         "move it away and restart lyhd",
                         s->sq.path, (long long)version);
    return 0;
}

int store_read_version(struct store *s, int64_t *ret) {
    int64_t version = 0;
    int r;

    r = sqlu_query_int(&s->sq, s->db, "PRAGMA user_version", &version);
    if (r < 0)
        return r;
    r = check_version(s, version);
    if (r < 0)
        return r;
    *ret = version;
    return 0;
}

static int migrate_in_transaction(void *ud) {
    struct store *s = ud;
    int64_t version = 0, app_id = 0;
    int r;

    /* Read again under the write lock: another process may have migrated
     * between our first look and BEGIN IMMEDIATE. */
    r = store_read_version(s, &version);
    if (r < 0)
        return r;

    r = sqlu_query_int(&s->sq, s->db, "PRAGMA application_id", &app_id);
    if (r < 0)
        return r;
    if (version > 0 && app_id != STORE_APPLICATION_ID)
        return sqlu_errf(&s->sq, -EBADMSG,
                         "%s is not a lianyaohu state database (application_id %lld); "
                         "move it away and restart lyhd",
                         s->sq.path, (long long)app_id);

    /* A plain SQL error in a migration means the file holds objects we did
     * not expect (e.g. another program's tables in a version-0 file). */
    return sqlu_migrate(&s->sq, s->db, migrations, ARRAY_SIZE(migrations),
                        "move the file away and restart lyhd", &version);
}

int store_migrate(struct store *s) {
    /* Nothing of a failed migration may stay: the rollback restores the old
     * schema and user_version. */
    return sqlu_transaction(&s->sq, s->db, "migration", migrate_in_transaction, s);
}
