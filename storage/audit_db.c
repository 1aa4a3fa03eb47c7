/* audit.db: the audit log's database. This file owns where the file may live
 * (the same checks as the state dir's), opening it on two connections, the
 * schema (one numbered migration, tracked with PRAGMA user_version), batched
 * appends, filtered keyset-paged reads, and retention.
 *
 * Must never: log (failures fill db->sq.err; the daemon logs once, at its
 * boundary), format a value into SQL (the query text is assembled from
 * constant fragments chosen by which filter fields are set; every value is a
 * bound parameter), update or delete a record other than through retention,
 * or keep a read transaction open between calls.
 *
 * ---- Schema (user_version 3; docs/audit.md) ----------------------------------------
 *
 * events: one row per record, never updated, deleted only by audit_db_prune.
 * No column is NULL: "absent" is 0, '' or x'' (a zero-length BLOB).
 *   id        INTEGER PRIMARY KEY AUTOINCREMENT: arrival order. AUTOINCREMENT so an
 *             id is never given twice, even after retention emptied the table: a
 *             follower holding after_id must never see ids go backwards.
 *   time_us   wall clock (µs since the epoch) the writer stamped. Not monotonic
 *             in id: flows are stamped when the kernel saw them and arrive in
 *             batches, so neighbours may be a few seconds out of id order (and
 *             the clock itself may step).
 *   kind      1..7, enum audit_kind (= lianyaohu.v1.EventKind).
 *   verdict   0..2, enum audit_verdict; 0 for records that decide nothing.
 *   session   the session id (at most 16 bytes), '' when about no session.
 *   has_uid   1 when uid is known. Then uid is the uid (0 is root); else uid is 0.
 *   uid       0..4294967295.
 *   family    0 (no address), 4 (IPv4) or 6 (IPv6): the IP version, not an AF_*
 *             number (those differ between platforms). audit_rec carries AF_*.
 *   protocol  IP protocol number (6 tcp, 17 udp, 1 icmp, 58 icmpv6), 0 none.
 *   src, dst  the addresses in network byte order: 4 or 16 bytes, or x'' for
 *             none; both have the same length.
 *   sport, dport  0..65535, 0 when the protocol has no ports.
 *   iface     interface name ('' none), at most 15 bytes.
 *   action    short verb ('' none), at most 15 bytes.
 *   detail    free text ('' none), at most AUDIT_DETAIL_MAX-1 = 5119 bytes, cut
 *             on a UTF-8 boundary by audit_db_append.
 *   a_pkts, a_bytes, d_pkts, d_bytes  allowed / denied packets and bytes.
 *   missed    events lost before they reached us (GAP records).
 *             The counters are unsigned 64-bit values stored as their int64 bits.
 * meta(key, value): 'clean' is 0 while a lyhd has the file open and 1 after
 * audit_db_close, so the next open can tell a crash (and record a gap).
 *
 * Version 2 (migration_2) adds what fair retention needs:
 *   writers(kind, session, has_uid, uid, n)   how many records events holds
 *             with that kind, session and uid; a row only while n > 0.
 *   writer_uids(kind, has_uid, uid, n)        the same summed over sessions.
 *             Both change in the transaction that appends or deletes the
 *             records they count (account() below, the only writer), so they
 *             are exact; the migration fills them from the records there are.
 *   pruned(reason, lim, has_uid, uid, kind, n, oldest_us, newest_us, since_us)
 *             records retention removed that no GAP record names yet: reason
 *             1 = age (lim = the days), 2 = size (lim = the byte cap); since_us
 *             is when the first of them went. Written in the transaction of
 *             the removal and emptied in the transaction that writes the GAP
 *             records, so a crash in between loses no count.
 * Why tables rather than counting: the heaviest writer is asked for on every
 * size-retention step, and a GROUP BY over events reads every row (seconds
 * on a big log). The counts cost an upsert per distinct (kind, session, uid)
 * per appended batch (a batch is sorted by key, not one upsert per record).
 * Version 3 widened the kinds (DNS). The events CHECKs are spelled without
 * IN lists since (checks_without_in_lists: the same rules, ~1.75x faster
 * appends), a change of text only, so the version stays.
 *
 * Indexes. Every sqlite index ends with the rowid, so an index on (x) is the
 * index on (x, id) (measured: declaring (session, id) stores id twice and is 5%
 * bigger for the same order). An equality on the indexed columns therefore
 * walks the matching rows in id order: `x = ? AND id > ? ORDER BY id LIMIT ?`
 * is a seek and a short forward walk, no sort, and the tail query (ORDER BY id
 * DESC LIMIT 1 OFFSET n-1) a short backward one.
 *   events_session (session)          per-session log, the commonest question.
 *   events_uid     (has_uid, uid)     a user's records: every non-admin query.
 *                  Not (uid, verdict): with only uid bound that order is
 *                  (verdict, id), and every page would sort all of the user's
 *                  rows. verdict is filtered on the uid walk instead.
 *   events_dst     (dst)              who talked to this one address.
 *   events_kind    (kind) WHERE kind <> 1   the non-flow records (sessions,
 *                  policy, requests, gaps, guards): a small partial index that
 *                  flows, the bulk of the appends, never touch.
 *   events_time    (time_us)          retention by age, oldest first.
 *   events_nosession (kind, has_uid, uid) WHERE session = ''   (version 2)
 *                  records about no session: size retention walks one uid's
 *                  session-less flows (shared-chain and no-session ones) or
 *                  its requests through it, oldest first, as events_session
 *                  serves one session's. Partial: flows of sessions, the bulk,
 *                  never touch it, and only a query that says session = ''
 *                  literally can use it (no audit query does: an empty
 *                  session filter means "any").
 *   writers_heavy (kind, has_uid, uid, n), writer_uids_heavy (kind, n)
 *                  the heaviest uid of a kind and that uid's heaviest session:
 *                  each one seek to the end of a range, O(log writers).
 *
 * Query plans. Without statistics sqlite's planner guesses, and a wrong guess
 * here is not a few percent: an index whose order is not id order makes every
 * page sort all its matches (quadratic over a walk), and it preferred events_uid
 * over events_session for `session = ? AND uid = ?` in a test. So the query
 * text decides: at most one field drives an index (session, else an exact
 * destination, else a non-flow kind, else uid, else none), and every other term
 * is written with its column behind unary + so that no index can use it. With
 * no driver the walk is the rowid range id > after_id. Either way the rows come
 * in id order and nothing is sorted (tests/unit/storage/test_audit_db.c checks
 * the plan of every shape). The cost of a walk over all pages is then bounded:
 * an indexed shape reads only the rows its driving field matches; any other
 * shape reads each record at most once over the whole walk (a page resumes
 * where the last one stopped), though one page may read far when matches are
 * sparse. Time bounds and address prefixes never drive: a range over time_us
 * or dst is not in id order.
 * Measured on 10M generated records (tmpfs, -O2): a session's newest 100 take
 * 0.1 ms (p50; p95 0.2 ms), a uid's 0.09 ms, an exact destination's 0.23 ms;
 * a filter with no indexed field that matches nothing reads the whole table,
 * about 1 s. events_dst is the costly index to keep: destinations are spread
 * wide, so each batch dirties leaves all over it (appends ran ~1.9x faster
 * without it, 92k vs 48k records/s at 300k records).
 *
 * ---- Connections and durability ---------------------------------------------------
 *
 * The writer appends, prunes and keeps the clean flag; the reader (opened
 * SQLITE_OPEN_READONLY once the writer has created the schema) answers queries.
 * WAL lets a reader's statement run while the writer commits, and each page is
 * its own statement, reset before we return, so no read transaction outlives a
 * call (a long one would hold back checkpoints and let the WAL grow).
 *
 * synchronous = NORMAL on the writer: in WAL mode a commit is then written to
 * the WAL but not fsynced; the WAL is synced at checkpoints. A crash of lyhd
 * (kill -9, abort) loses nothing committed: the commit is in the kernel's page
 * cache. Only a power loss or an OS crash can lose the last batch(es), and it
 * cannot corrupt the file (WAL frames carry checksums; a torn tail is dropped).
 * For an audit log flushed in batches that is the right trade: FULL would put
 * an fsync in every batch on the path that drains the kernel's flow queue, and
 * falling behind there means the kernel drops events, which is a worse hole
 * than the last second before a power cut (when the kernel's own queue, and the
 * batch we were holding, are lost anyway). The hole is not silent: the clean
 * flag is cleared with a synced commit at open, so after a power cut it reads
 * 0 and the next start can record a gap.
 *
 * auto_vacuum = INCREMENTAL, set before the first table exists (it cannot be
 * switched later without a full VACUUM), so retention can hand freed pages back
 * to the filesystem in bounded steps (PRAGMA incremental_vacuum(N)); the file
 * shrinks when the WAL is checkpointed.
 *
 * Where the file may live: as for state.db (store.c): the directory must be
 * ours and not writable by others, and so must every directory above it unless
 * sticky; sqlite opens the path with SQLITE_OPEN_NOFOLLOW, so the name it
 * opens is the path we checked. We create audit.db ourselves, 0600, with
 * O_EXCL, and refuse an existing one that is not a regular file of ours or
 * that others may write (someone else could have planted records). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/dns_name.h"
#include "common/macros.h"
#include "storage/audit_db.h"
#include "storage/dircheck.h"
#include "storage/sqlite_util.h"

#define ADB_SCHEMA_VERSION 3
/* PRAGMA application_id "LYHA" (state.db is "LYH1"). */
#define ADB_APPLICATION_ID 0x4c594841
#define ADB_BUSY_TIMEOUT_MS 2000
_Static_assert(AUDIT_DB_ERR_MAX == SQLU_ERR_MAX, "audit_db_errmsg is struct sqlu's err");
/* Pages prune hands back per call: 8 MiB at 4 KiB pages. A constant in the SQL
 * text, as a PRAGMA argument cannot be a parameter. */
#define ADB_VACUUM_SQL "PRAGMA incremental_vacuum(2048)"

/* ---- the schema ---------------------------------------------------------------------- */

static const char migration_1[] =
    "CREATE TABLE meta ("
    "  key   TEXT NOT NULL PRIMARY KEY CHECK (length(CAST(key AS BLOB)) BETWEEN 1 AND 64),"
    "  value INTEGER NOT NULL"
    ") STRICT, WITHOUT ROWID;"
    "INSERT INTO meta (key, value) VALUES ('clean', 0);"

    "CREATE TABLE events ("
    "  id       INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  time_us  INTEGER NOT NULL,"
    "  kind     INTEGER NOT NULL CHECK (kind BETWEEN 1 AND 6),"
    "  verdict  INTEGER NOT NULL CHECK (verdict BETWEEN 0 AND 2),"
    "  session  TEXT NOT NULL CHECK (length(CAST(session AS BLOB)) <= 16),"
    "  has_uid  INTEGER NOT NULL CHECK (has_uid IN (0, 1)),"
    "  uid      INTEGER NOT NULL CHECK (uid BETWEEN 0 AND 4294967295"
    "                                   AND (has_uid = 1 OR uid = 0)),"
    "  family   INTEGER NOT NULL CHECK (family IN (0, 4, 6)),"
    "  protocol INTEGER NOT NULL CHECK (protocol BETWEEN 0 AND 255),"
    "  src      BLOB NOT NULL CHECK (length(src) IN (0, 4, 16)),"
    "  dst      BLOB NOT NULL CHECK (length(dst) IN (0, 4, 16) AND length(dst) = length(src)),"
    "  sport    INTEGER NOT NULL CHECK (sport BETWEEN 0 AND 65535),"
    "  dport    INTEGER NOT NULL CHECK (dport BETWEEN 0 AND 65535),"
    "  iface    TEXT NOT NULL CHECK (length(CAST(iface AS BLOB)) <= 15),"
    "  action   TEXT NOT NULL CHECK (length(CAST(action AS BLOB)) <= 15),"
    "  detail   TEXT NOT NULL CHECK (length(CAST(detail AS BLOB)) <= 5119),"
    "  a_pkts   INTEGER NOT NULL,"
    "  a_bytes  INTEGER NOT NULL,"
    "  d_pkts   INTEGER NOT NULL,"
    "  d_bytes  INTEGER NOT NULL,"
    "  missed   INTEGER NOT NULL"
    ") STRICT;"
    "CREATE INDEX events_time ON events (time_us);"
    "CREATE INDEX events_session ON events (session);"
    "CREATE INDEX events_uid ON events (has_uid, uid);"
    "CREATE INDEX events_dst ON events (dst);"
    "CREATE INDEX events_kind ON events (kind) WHERE kind <> 1;"

    "PRAGMA application_id = 1280919617;" /* ADB_APPLICATION_ID */
    "PRAGMA user_version = 1;";

_Static_assert(ADB_APPLICATION_ID == 1280919617, "migration_1 spells the application id");
_Static_assert(AUDIT_DETAIL_MAX - 1 == 5119, "migration_1 spells the detail limit");
_Static_assert(AUDIT_KIND_GUARD == 6 && AUDIT_VERDICT_DENIED == 2, "migration_1 spells the enums");

/* Fair retention (see the top of the file). The counts are filled from the
 * records there are: one GROUP BY over events, once (measured: 1.5 s for a
 * million records on tmpfs). */
static const char migration_2[] =
    "CREATE TABLE writers ("
    "  kind    INTEGER NOT NULL CHECK (kind BETWEEN 1 AND 6),"
    "  session TEXT NOT NULL CHECK (length(CAST(session AS BLOB)) <= 16),"
    "  has_uid INTEGER NOT NULL CHECK (has_uid IN (0, 1)),"
    "  uid     INTEGER NOT NULL CHECK (uid BETWEEN 0 AND 4294967295),"
    "  n       INTEGER NOT NULL CHECK (n > 0),"
    "  PRIMARY KEY (kind, session, has_uid, uid)"
    ") STRICT, WITHOUT ROWID;"
    "CREATE INDEX writers_heavy ON writers (kind, has_uid, uid, n);"
    "CREATE TABLE writer_uids ("
    "  kind    INTEGER NOT NULL CHECK (kind BETWEEN 1 AND 6),"
    "  has_uid INTEGER NOT NULL CHECK (has_uid IN (0, 1)),"
    "  uid     INTEGER NOT NULL CHECK (uid BETWEEN 0 AND 4294967295),"
    "  n       INTEGER NOT NULL CHECK (n > 0),"
    "  PRIMARY KEY (kind, has_uid, uid)"
    ") STRICT, WITHOUT ROWID;"
    "CREATE INDEX writer_uids_heavy ON writer_uids (kind, n);"
    "CREATE TABLE pruned ("
    "  reason    INTEGER NOT NULL CHECK (reason IN (1, 2)),"
    "  lim       INTEGER NOT NULL CHECK (lim >= 0),"
    "  has_uid   INTEGER NOT NULL CHECK (has_uid IN (0, 1)),"
    "  uid       INTEGER NOT NULL CHECK (uid BETWEEN 0 AND 4294967295),"
    "  kind      INTEGER NOT NULL CHECK (kind BETWEEN 1 AND 6),"
    "  n         INTEGER NOT NULL CHECK (n > 0),"
    "  oldest_us INTEGER NOT NULL,"
    "  newest_us INTEGER NOT NULL,"
    "  since_us  INTEGER NOT NULL,"
    "  PRIMARY KEY (reason, lim, has_uid, uid, kind)"
    ") STRICT, WITHOUT ROWID;"
    "CREATE INDEX events_nosession ON events (kind, has_uid, uid) WHERE session = '';"
    "INSERT INTO writers (kind, session, has_uid, uid, n)"
    "  SELECT kind, session, has_uid, uid, count(*) FROM events"
    "  GROUP BY kind, session, has_uid, uid;"
    "INSERT INTO writer_uids (kind, has_uid, uid, n)"
    "  SELECT kind, has_uid, uid, sum(n) FROM writers GROUP BY kind, has_uid, uid;"
    "PRAGMA user_version = 2;";

/* DNS records (kind 7): the kind columns' CHECK widened. SQLite cannot alter a
 * CHECK, so each table is built anew and filled from the old one; the next
 * record id stays above every id handed out before (sqlite_sequence kept), so
 * a follower's after_id never sees an id twice. */
static const char migration_3[] =
    "CREATE TEMP TABLE seq_v3 AS SELECT seq FROM sqlite_sequence WHERE name = 'events';"
    "CREATE TABLE events_v3 ("
    "  id       INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  time_us  INTEGER NOT NULL,"
    "  kind     INTEGER NOT NULL CHECK (kind BETWEEN 1 AND 7),"
    "  verdict  INTEGER NOT NULL CHECK (verdict BETWEEN 0 AND 2),"
    "  session  TEXT NOT NULL CHECK (length(CAST(session AS BLOB)) <= 16),"
    "  has_uid  INTEGER NOT NULL CHECK (has_uid IN (0, 1)),"
    "  uid      INTEGER NOT NULL CHECK (uid BETWEEN 0 AND 4294967295"
    "                                   AND (has_uid = 1 OR uid = 0)),"
    "  family   INTEGER NOT NULL CHECK (family IN (0, 4, 6)),"
    "  protocol INTEGER NOT NULL CHECK (protocol BETWEEN 0 AND 255),"
    "  src      BLOB NOT NULL CHECK (length(src) IN (0, 4, 16)),"
    "  dst      BLOB NOT NULL CHECK (length(dst) IN (0, 4, 16) AND length(dst) = length(src)),"
    "  sport    INTEGER NOT NULL CHECK (sport BETWEEN 0 AND 65535),"
    "  dport    INTEGER NOT NULL CHECK (dport BETWEEN 0 AND 65535),"
    "  iface    TEXT NOT NULL CHECK (length(CAST(iface AS BLOB)) <= 15),"
    "  action   TEXT NOT NULL CHECK (length(CAST(action AS BLOB)) <= 15),"
    "  detail   TEXT NOT NULL CHECK (length(CAST(detail AS BLOB)) <= 5119),"
    "  a_pkts   INTEGER NOT NULL,"
    "  a_bytes  INTEGER NOT NULL,"
    "  d_pkts   INTEGER NOT NULL,"
    "  d_bytes  INTEGER NOT NULL,"
    "  missed   INTEGER NOT NULL"
    ") STRICT;"
    "INSERT INTO events_v3 SELECT * FROM events;"
    "DROP TABLE events;"
    "ALTER TABLE events_v3 RENAME TO events;"
    "CREATE TABLE writers_v3 ("
    "  kind    INTEGER NOT NULL CHECK (kind BETWEEN 1 AND 7),"
    "  session TEXT NOT NULL CHECK (length(CAST(session AS BLOB)) <= 16),"
    "  has_uid INTEGER NOT NULL CHECK (has_uid IN (0, 1)),"
    "  uid     INTEGER NOT NULL CHECK (uid BETWEEN 0 AND 4294967295),"
    "  n       INTEGER NOT NULL CHECK (n > 0),"
    "  PRIMARY KEY (kind, session, has_uid, uid)"
    ") STRICT, WITHOUT ROWID;"
    "INSERT INTO writers_v3 SELECT * FROM writers;"
    "DROP TABLE writers;"
    "ALTER TABLE writers_v3 RENAME TO writers;"
    "CREATE TABLE writer_uids_v3 ("
    "  kind    INTEGER NOT NULL CHECK (kind BETWEEN 1 AND 7),"
    "  has_uid INTEGER NOT NULL CHECK (has_uid IN (0, 1)),"
    "  uid     INTEGER NOT NULL CHECK (uid BETWEEN 0 AND 4294967295),"
    "  n       INTEGER NOT NULL CHECK (n > 0),"
    "  PRIMARY KEY (kind, has_uid, uid)"
    ") STRICT, WITHOUT ROWID;"
    "INSERT INTO writer_uids_v3 SELECT * FROM writer_uids;"
    "DROP TABLE writer_uids;"
    "ALTER TABLE writer_uids_v3 RENAME TO writer_uids;"
    "CREATE TABLE pruned_v3 ("
    "  reason    INTEGER NOT NULL CHECK (reason IN (1, 2)),"
    "  lim       INTEGER NOT NULL CHECK (lim >= 0),"
    "  has_uid   INTEGER NOT NULL CHECK (has_uid IN (0, 1)),"
    "  uid       INTEGER NOT NULL CHECK (uid BETWEEN 0 AND 4294967295),"
    "  kind      INTEGER NOT NULL CHECK (kind BETWEEN 1 AND 7),"
    "  n         INTEGER NOT NULL CHECK (n > 0),"
    "  oldest_us INTEGER NOT NULL,"
    "  newest_us INTEGER NOT NULL,"
    "  since_us  INTEGER NOT NULL,"
    "  PRIMARY KEY (reason, lim, has_uid, uid, kind)"
    ") STRICT, WITHOUT ROWID;"
    "INSERT INTO pruned_v3 SELECT * FROM pruned;"
    "DROP TABLE pruned;"
    "ALTER TABLE pruned_v3 RENAME TO pruned;"
    "DELETE FROM sqlite_sequence WHERE name = 'events';"
    "INSERT INTO sqlite_sequence (name, seq) SELECT 'events', max(coalesce((SELECT max(seq)"
    "  FROM seq_v3), 0), coalesce((SELECT max(id) FROM events), 0));"
    "DROP TABLE temp.seq_v3;"
    "CREATE INDEX events_time ON events (time_us);"
    "CREATE INDEX events_session ON events (session);"
    "CREATE INDEX events_uid ON events (has_uid, uid);"
    "CREATE INDEX events_dst ON events (dst);"
    "CREATE INDEX events_kind ON events (kind) WHERE kind <> 1;"
    "CREATE INDEX events_nosession ON events (kind, has_uid, uid) WHERE session = '';"
    "CREATE INDEX writers_heavy ON writers (kind, has_uid, uid, n);"
    "CREATE INDEX writer_uids_heavy ON writer_uids (kind, n);"
    "PRAGMA user_version = 3;";

_Static_assert(AUDIT_KIND_DNS == 7, "migration_3 spells the enum");

static const struct sqlu_migration migrations[] = {
    { 1, migration_1 },
    { 2, migration_2 },
    { 3, migration_3 },
};
_Static_assert(ARRAY_SIZE(migrations) == ADB_SCHEMA_VERSION, "one migration per version");

/* ---- statements ------------------------------------------------------------------------ */

#define EVENT_COLS                                                                           \
    "time_us, kind, verdict, session, has_uid, uid, family, protocol, src, dst, sport, "     \
    "dport, iface, action, detail, a_pkts, a_bytes, d_pkts, d_bytes, missed"
/* What retention reads of a row it removes (struct wrow). */
#define PRUNE_COLS "id, time_us, kind, session, has_uid, uid"

/* Prepared once at open. W_ on the writer, R_ on the reader. */
enum adb_stmt {
    W_BEGIN,
    W_COMMIT,
    W_ROLLBACK,
    W_INSERT,
    W_SET_CLEAN,
    W_SEL_AGE,
    W_SEL_OLDEST,
    W_SEL_SESSION,
    W_SEL_NOSESSION,
    W_DELETE_ID,
    W_HEAVY_UID,
    W_HEAVY_SESSION,
    W_COUNT_ADD,
    W_COUNT_DROP,
    W_COUNT_SUB,
    W_UIDCOUNT_ADD,
    W_UIDCOUNT_DROP,
    W_UIDCOUNT_SUB,
    W_PRUNED_ADD,
    W_PRUNED_DUE,
    W_PRUNED_LIST,
    W_PRUNED_DEL,
    W_ID_RANGE,
    W_PAGE_COUNT,
    W_FREELIST_COUNT,
    W_PAGE_SIZE,
    W_VACUUM,
    R_LAST_ID,
    ADB_STMT__MAX,
};

static const char *const stmt_sql[ADB_STMT__MAX] = {
    [W_BEGIN] = "BEGIN IMMEDIATE",
    [W_COMMIT] = "COMMIT",
    [W_ROLLBACK] = "ROLLBACK",
    [W_INSERT] = "INSERT INTO events (" EVENT_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                 "?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
    [W_SET_CLEAN] = "UPDATE meta SET value = ?1 WHERE key = 'clean'",
    /* Retention selects the rows a step removes (PRUNE_COLS, read into C,
     * counted, then deleted by id), each from one index in a fixed order:
     * age: oldest by the time the record carries, through events_time, so a
     * call with nothing to do reads one index entry. */
    [W_SEL_AGE] = "SELECT " PRUNE_COLS " FROM events WHERE time_us < :cutoff "
                  "ORDER BY time_us, id LIMIT :limit",
    /* Size, last resort: oldest by arrival, from the start of the rowid b-tree. */
    [W_SEL_OLDEST] = "SELECT " PRUNE_COLS " FROM events ORDER BY id LIMIT :limit",
    /* Size: one writer's oldest, a session's through events_session (its few
     * non-flow records are skipped), records about no session through the
     * partial events_nosession. INDEXED BY: a planner's guess must not turn
     * this into a scan; sqlite refuses to prepare it if the index is gone. */
    [W_SEL_SESSION] = "SELECT " PRUNE_COLS " FROM events INDEXED BY events_session "
                      "WHERE session = :session AND +kind = :kind AND +has_uid = :has_uid "
                      "AND +uid = :uid ORDER BY id LIMIT :limit",
    [W_SEL_NOSESSION] = "SELECT " PRUNE_COLS " FROM events INDEXED BY events_nosession "
                        "WHERE session = '' AND kind = :kind AND has_uid = :has_uid "
                        "AND uid = :uid ORDER BY id LIMIT :limit",
    [W_DELETE_ID] = "DELETE FROM events WHERE id = :id",
    [W_HEAVY_UID] = "SELECT has_uid, uid, n FROM writer_uids WHERE kind = :kind "
                    "ORDER BY n DESC LIMIT 1",
    [W_HEAVY_SESSION] = "SELECT session, n FROM writers WHERE kind = :kind AND "
                        "has_uid = :has_uid AND uid = :uid ORDER BY n DESC LIMIT 1",
    /* The counts: add (upsert), or take away (drop the row when nothing is
     * left, else subtract). */
    [W_COUNT_ADD] = "INSERT INTO writers (kind, session, has_uid, uid, n) "
                    "VALUES (:kind, :session, :has_uid, :uid, :n) "
                    "ON CONFLICT (kind, session, has_uid, uid) DO UPDATE SET n = n + excluded.n",
    [W_COUNT_DROP] = "DELETE FROM writers WHERE kind = :kind AND session = :session AND "
                     "has_uid = :has_uid AND uid = :uid AND n <= :n",
    [W_COUNT_SUB] = "UPDATE writers SET n = n - :n WHERE kind = :kind AND session = :session "
                    "AND has_uid = :has_uid AND uid = :uid",
    [W_UIDCOUNT_ADD] = "INSERT INTO writer_uids (kind, has_uid, uid, n) "
                       "VALUES (:kind, :has_uid, :uid, :n) "
                       "ON CONFLICT (kind, has_uid, uid) DO UPDATE SET n = n + excluded.n",
    [W_UIDCOUNT_DROP] = "DELETE FROM writer_uids WHERE kind = :kind AND has_uid = :has_uid "
                        "AND uid = :uid AND n <= :n",
    [W_UIDCOUNT_SUB] = "UPDATE writer_uids SET n = n - :n WHERE kind = :kind AND "
                       "has_uid = :has_uid AND uid = :uid",
    [W_PRUNED_ADD] = "INSERT INTO pruned (reason, lim, has_uid, uid, kind, n, oldest_us, "
                     "newest_us, since_us) VALUES (:reason, :lim, :has_uid, :uid, :kind, :n, "
                     ":oldest, :newest, :now) "
                     "ON CONFLICT (reason, lim, has_uid, uid, kind) DO UPDATE SET "
                     "n = n + excluded.n, oldest_us = min(oldest_us, excluded.oldest_us), "
                     "newest_us = max(newest_us, excluded.newest_us)",
    [W_PRUNED_DUE] = "SELECT min(since_us) FROM pruned",
    [W_PRUNED_LIST] = "SELECT reason, lim, has_uid, uid, kind, n, oldest_us, newest_us "
                      "FROM pruned ORDER BY reason, lim, has_uid, uid, kind",
    [W_PRUNED_DEL] = "DELETE FROM pruned WHERE reason = :reason AND lim = :lim AND "
                     "has_uid = :has_uid AND uid = :uid",
    /* Two subqueries: min() and max() are each one seek only on their own. */
    [W_ID_RANGE] = "SELECT (SELECT min(id) FROM events), (SELECT max(id) FROM events)",
    [W_PAGE_COUNT] = "PRAGMA page_count",
    [W_FREELIST_COUNT] = "PRAGMA freelist_count",
    [W_PAGE_SIZE] = "PRAGMA page_size",
    [W_VACUUM] = ADB_VACUUM_SQL,
    [R_LAST_ID] = "SELECT max(id) FROM events",
};

/* A filter's shape: which fields are set. The query text depends only on it,
 * so one prepared statement per shape and form (page, tail, count) is cached,
 * prepared on first use. Measured: preparing one costs about 24 µs, a page of
 * 100 rows 0.1-1 ms, so preparing per page would also do; the cache is 48 KiB
 * of pointers and saves it. */
enum {
    Q_SINCE = 1u << 0,
    Q_UNTIL = 1u << 1,
    Q_SESSION = 1u << 2,
    Q_UID = 1u << 3,
    Q_KIND = 1u << 4,
    Q_KIND_RARE = 1u << 5,  /* with Q_KIND: a kind other than FLOW */
    Q_VERDICT = 1u << 6,
    Q_PROTOCOL = 1u << 7,
    Q_DST_HOST = 1u << 8,   /* a whole address: dst = ? */
    Q_DST_NET = 1u << 9,    /* a shorter prefix: a BLOB range */
    Q_PORT = 1u << 10,
    Q_NAME = 1u << 11,      /* a DNS name pattern in the detail (lyh_has_name) */
    Q__SHAPES = 1u << 12,
};

/* What a shape's statement answers. */
enum query_form {
    QF_PAGE,  /* the rows, ascending, LIMIT :limit */
    QF_TAIL,  /* the id of the :offset+1-th newest */
    QF_COUNT, /* how many */
    QF__MAX,
};

/* What may use an index, in order of preference (see the top of the file). */
enum adb_driver { D_SESSION, D_DST, D_KIND, D_UID, D_ROWID };

static const struct query_term {
    unsigned bit;
    int driver;            /* the driver that uses this term's index, -1: none */
    const char *indexed;   /* when it drives */
    const char *plain;     /* otherwise: columns behind unary +, no index can use it */
} query_terms[] = {
    { Q_SESSION, D_SESSION, "session = :session", "+session = :session" },
    { Q_DST_HOST, D_DST, "dst = :dst", "+dst = :dst" },
    /* The partial index is usable only when the query repeats its WHERE. */
    { Q_KIND, D_KIND, "kind = :kind AND kind <> 1", "+kind = :kind" },
    { Q_UID, D_UID, "has_uid = 1 AND uid = :uid", "+has_uid = 1 AND +uid = :uid" },
    { Q_VERDICT, -1, NULL, "+verdict = :verdict" },
    { Q_PROTOCOL, -1, NULL, "+protocol = :protocol" },
    /* BLOBs compare by memcmp, then the shorter first: a 4-byte address can
     * fall between two 16-byte bounds (and a 16-byte one between two 4-byte
     * bounds) whenever the prefix is shorter than 32 bits, hence the length. */
    { Q_DST_NET, -1, NULL, "+dst BETWEEN :dst_lo AND :dst_hi AND length(dst) = :dst_len" },
    { Q_PORT, -1, NULL, "+dport BETWEEN :port_min AND :port_max" },
    { Q_SINCE, -1, NULL, "+time_us >= :since" },
    { Q_UNTIL, -1, NULL, "+time_us < :until" },
    { Q_NAME, -1, NULL, "lyh_has_name(detail, :name)" },
};

struct audit_db {
    sqlite3 *w;                          /* owned: the writer */
    sqlite3 *r;                          /* owned: the reader, SQLITE_OPEN_READONLY */
    sqlite3_stmt *stmt[ADB_STMT__MAX];   /* owned */
    sqlite3_stmt *shape[QF__MAX][Q__SHAPES]; /* owned, on r; prepared on first use */
    bool opened;                         /* fully open: close marks the file clean */
    struct sqlu sq;                      /* path, err, last sqlite code */
};

/* ---- errors ----------------------------------------------------------------------------- */

static int corrupt(struct audit_db *db, int64_t id, const char *what) {
    char detail[128];

    snprintf(detail, sizeof detail, "record %lld: %s out of range", (long long)id, what);
    return sqlu_corrupt(&db->sq, detail);
}

const char *audit_db_errmsg(const struct audit_db *db) {
    return db ? db->sq.err : "";
}

/* ---- small sqlite helpers ------------------------------------------------------------------ */

/* A cached single-integer statement (NULL reads as 0). */
static int stmt_int(struct audit_db *db, enum adb_stmt which, int64_t *ret) {
    _cleanup_reset_ sqlite3_stmt *st = db->stmt[which];
    return sqlu_step_int(&db->sq, st, ret);
}

static void rollback(struct audit_db *db);

static int begin(struct audit_db *db, const char *what) {
    _cleanup_reset_ sqlite3_stmt *st = db->stmt[W_BEGIN];

    /* Every function that begins a transaction ends it; one still open is
     * what a failed ROLLBACK left behind. Drop it rather than fail every
     * later append with "cannot start a transaction within a transaction". */
    if (!sqlite3_get_autocommit(db->w))
        rollback(db);
    return sqlu_step_done(&db->sq, st, what);
}

static int commit(struct audit_db *db, const char *what) {
    _cleanup_reset_ sqlite3_stmt *st = db->stmt[W_COMMIT];
    return sqlu_step_done(&db->sq, st, what);
}

/* Accepts "no transaction": sqlite rolls back by itself after some I/O and
 * disk-full errors. A failing ROLLBACK leaves nothing better to do, and the
 * first error is the one worth reporting. */
static void rollback(struct audit_db *db) {
    _cleanup_reset_ sqlite3_stmt *st = db->stmt[W_ROLLBACK];

    if (!sqlite3_get_autocommit(db->w))
        (void)sqlite3_step(st);
}

/* ---- where the file lives ----------------------------------------------------------------- */

static int open_dir(struct audit_db *db, const char *dir, int *ret_fd) {
    char err[AUDIT_DB_ERR_MAX];
    int r = storage_open_private_dir(dir, false, "audit dir", "the audit log", err, sizeof err,
                                     ret_fd);
    return r < 0 ? sqlu_errf(&db->sq, r, "%s", err) : 0;
}

/* Create the file 0600 with O_EXCL (so a new file is one we made), or check
 * the one that is there. (A new file is a new database: migrate() sees an
 * empty version-0 file and reports it clean.) */
static int prepare_file(struct audit_db *db, int dirfd, const char *base) {
    /* O_NONBLOCK: a FIFO planted under the name must not hang us before the
     * checks below refuse it. */
    const int oflags = O_RDWR | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC;
    _cleanup_close_ int fd = -1;
    bool created = true;
    struct stat st;

    fd = openat(dirfd, base, oflags | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST) {
        created = false;
        fd = openat(dirfd, base, oflags);
    }
    if (fd < 0) {
        if (errno == ELOOP)
            return sqlu_errf(&db->sq, -EPERM, "%s is a symlink; move it away", db->sq.path);
        if (errno == EISDIR)
            return sqlu_errf(&db->sq, -EPERM, "%s is not a regular file; move it away",
                             db->sq.path);
        return sqlu_errf(&db->sq, -errno, "cannot open %s: %s", db->sq.path, strerror(errno));
    }
    if (fstat(fd, &st) < 0)
        return sqlu_errf(&db->sq, -errno, "%s: fstat: %s", db->sq.path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return sqlu_errf(&db->sq, -EPERM, "%s is not a regular file; move it away", db->sq.path);
    if (st.st_uid != geteuid())
        return sqlu_errf(&db->sq, -EPERM,
                         "%s is owned by uid %u, not %u; someone else made it: move it away "
                         "(lyhd starts a new audit log)",
                         db->sq.path, (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_nlink != 1)
        return sqlu_errf(&db->sq, -EPERM, "%s has %lu hard links; move it away", db->sq.path,
                         (unsigned long)st.st_nlink);
    if (!created && (st.st_mode & (S_IWGRP | S_IWOTH)))
        return sqlu_errf(&db->sq, -EPERM,
                         "%s is group/world writable (mode %04o), so its records cannot be "
                         "trusted; move it away (lyhd starts a new audit log), or chmod 0600 it "
                         "if you know nobody else wrote to it",
                         db->sq.path, (unsigned)(st.st_mode & 07777));
    /* Exactly 0600: the umask may have taken bits, and records name other
     * users' flows, so group/world read goes too. */
    if ((st.st_mode & 07777) != 0600 && fchmod(fd, 0600) < 0)
        return sqlu_errf(&db->sq, -errno, "%s: chmod 0600: %s", db->sq.path, strerror(errno));
    return 0;
}

/* ---- opening ----------------------------------------------------------------------------- */

/* lyh_has_name(detail, pattern): 1 when the detail names a match. */
static void sql_has_name(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
    (void)argc;
    const unsigned char *detail = sqlite3_value_text(argv[0]);
    const unsigned char *pattern = sqlite3_value_text(argv[1]);
    sqlite3_result_int(ctx, detail && pattern &&
                                dn_detail_has((const char *)detail, (const char *)pattern));
}

static int open_conn(struct audit_db *db, sqlite3 **ret, bool readonly) {
    int r = sqlu_open(&db->sq, ret, readonly, readonly ? "open (reader)" : "open", "audit dir");
    return r < 0 ? r : sqlu_exec(&db->sq, *ret, "PRAGMA cell_size_check = ON", "set pragmas");
}

static int check_version(struct audit_db *db, int64_t version) {
    if (version > ADB_SCHEMA_VERSION)
        return sqlu_errf(&db->sq, -EPROTO,
                         "%s: audit.db schema version %lld is newer than this lyhd (%d); upgrade "
                         "lyhd or move the file away",
                         db->sq.path, (long long)version, ADB_SCHEMA_VERSION);
    if (version < 0)
        return sqlu_errf(&db->sq, -EBADMSG,
                         "%s: invalid schema version %lld, not a lianyaohu audit database; move "
                         "it away and restart lyhd",
                         db->sq.path, (long long)version);
    return 0;
}

/* Is this file ours (or empty)? Read before anything changes it, and again
 * under the write lock. ret_empty: version 0 and no schema at all. */
static int check_identity(struct audit_db *db, int64_t *ret_version, bool *ret_empty) {
    int64_t version = 0, app_id = 0, objects = 0;
    int r;

    r = sqlu_query_int(&db->sq, db->w, "PRAGMA user_version", &version);
    if (r < 0)
        return r;
    r = check_version(db, version);
    if (r < 0)
        return r;
    r = sqlu_query_int(&db->sq, db->w, "PRAGMA application_id", &app_id);
    if (r < 0)
        return r;
    if (version > 0 && app_id != ADB_APPLICATION_ID)
        return sqlu_errf(&db->sq, -EBADMSG,
                         "%s is not a lianyaohu audit database (application_id %lld); move it "
                         "away and restart lyhd",
                         db->sq.path, (long long)app_id);
    if (version == 0) {
        /* Version 0 must be an empty file (ours, from a first start that died
         * before its first commit), not another program's database. */
        r = sqlu_query_int(&db->sq, db->w, "SELECT count(*) FROM sqlite_schema", &objects);
        if (r < 0)
            return r;
        if (objects > 0)
            return sqlu_errf(&db->sq, -EBADMSG,
                             "%s holds %lld tables or indexes but no lianyaohu schema; it is not "
                             "an audit database: move it away and restart lyhd",
                             db->sq.path, (long long)objects);
    }
    *ret_version = version;
    *ret_empty = version == 0;
    return 0;
}

/* The events table's CHECKs without IN lists, the same rules (family 0, 4
 * or 6; address lengths 0, 4 or 16, dst's equal to src's) spelled as
 * comparisons. sqlite checks `x IN (a, b, c)` by building a temporary
 * b-tree of the list for every row it writes (three per record here,
 * OpenEphemeral in EXPLAIN); without them an append of a flood's records
 * went from ~100k to ~175k records/s (lyh_bench_auditgen, one session, 512
 * per transaction, this 2-CPU machine).
 *
 * The rows do not change, so the table's definition is rewritten in place,
 * as sqlite documents for changes that leave the file's content valid
 * (lang_altertable.html, "Making Other Kinds Of Table Schema Changes"): in
 * the migration's transaction, with writable_schema on for this one UPDATE
 * and the schema cookie bumped so every connection parses it again. A
 * rebuild (migration_3's way) would copy every record: minutes at startup
 * on a big log. user_version stays 3: the rules are the same, so an older
 * lyhd still opens the file. Each replaced text must occur exactly once in
 * what version 3 wrote, and a file must have all old texts or all new ones,
 * so a schema someone else edited is refused, not patched. */
#define EVENTS_TABLE_SQL "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = 'events'"

static const struct {
    const char *from, *to;
} in_list_checks[] = {
    { "CHECK (family IN (0, 4, 6))", "CHECK (family = 0 OR family = 4 OR family = 6)" },
    { "CHECK (length(src) IN (0, 4, 16))",
      "CHECK (length(src) = 0 OR length(src) = 4 OR length(src) = 16)" },
    /* src's own CHECK bounds its length, so equal lengths say the rest */
    { "CHECK (length(dst) IN (0, 4, 16) AND length(dst) = length(src))",
      "CHECK (length(dst) = length(src))" },
};

/* The table's text with every in_list_checks replacement made, into out. */
static int checks_text(struct audit_db *db, const char *old, char *out, size_t size) {
    char buf[2][4096];
    const char *cur = old;

    if (strlen(old) >= sizeof buf[0])
        return sqlu_errf(&db->sq, -EBADMSG, "%s: the events table's definition is not the one "
                         "lyhd wrote; move the file away and restart lyhd", db->sq.path);
    for (size_t i = 0; i < ARRAY_SIZE(in_list_checks); i++) {
        const char *at = strstr(cur, in_list_checks[i].from);
        char *dst = buf[i % 2];
        int n;

        if (!at || strstr(at + 1, in_list_checks[i].from))
            return sqlu_errf(&db->sq, -EBADMSG, "%s: the events table's definition is not the "
                             "one lyhd wrote (no single '%s'); move the file away and restart "
                             "lyhd", db->sq.path, in_list_checks[i].from);
        n = snprintf(dst, sizeof buf[0], "%.*s%s%s", (int)(at - cur), cur, in_list_checks[i].to,
                     at + strlen(in_list_checks[i].from));
        if (n < 0 || (size_t)n >= sizeof buf[0])
            return sqlu_errf(&db->sq, -EBADMSG, "%s: the events table's definition is too long",
                             db->sq.path);
        cur = dst;
    }
    if (strlen(cur) >= size)
        return sqlu_errf(&db->sq, -EBADMSG, "%s: the events table's definition is too long",
                         db->sq.path);
    memcpy(out, cur, strlen(cur) + 1);
    return 0;
}

static int checks_rewrite(struct audit_db *db, const char *text) {
    _cleanup_finalize_ sqlite3_stmt *st = NULL;
    int64_t cookie = 0;
    char sql[64];
    int rc, r;

    r = sqlu_query_int(&db->sq, db->w, "PRAGMA schema_version", &cookie);
    if (r < 0)
        return r;
    r = sqlu_exec(&db->sq, db->w, "PRAGMA writable_schema = ON", "CHECKs' rewrite: writable_schema");
    if (r < 0)
        return r;
    rc = sqlite3_prepare_v2(db->w, "UPDATE sqlite_schema SET sql = ?1 WHERE type = 'table' AND "
                            "name = 'events'", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return sqlu_fail(&db->sq, db->w, rc, "CHECKs' rewrite: prepare");
    rc = sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
    if (rc != SQLITE_OK)
        return sqlu_fail(&db->sq, db->w, rc, "CHECKs' rewrite: bind");
    r = sqlu_step_done(&db->sq, st, "rewrite the events table's CHECKs");
    if (r < 0)
        return r;
    if (sqlite3_changes(db->w) != 1)
        return sqlu_errf(&db->sq, -EBADMSG, "%s: the CHECKs' rewrite changed %d tables, not 1",
                         db->sq.path, sqlite3_changes(db->w));
    snprintf(sql, sizeof sql, "PRAGMA schema_version = %lld", (long long)cookie + 1);
    r = sqlu_exec(&db->sq, db->w, sql, "CHECKs' rewrite: schema_version");
    if (r < 0)
        return r;
    return sqlu_exec(&db->sq, db->w, "PRAGMA writable_schema = OFF",
                     "CHECKs' rewrite: writable_schema off");
}

static int checks_without_in_lists(struct audit_db *db) {
    char old[4096], text[4096];
    size_t n_new = 0;
    int r, r2;

    r = sqlu_query_text(&db->sq, db->w, EVENTS_TABLE_SQL, old, sizeof old);
    if (r < 0)
        return r;
    for (size_t i = 0; i < ARRAY_SIZE(in_list_checks); i++)
        n_new += strstr(old, in_list_checks[i].to) != NULL;
    if (n_new == ARRAY_SIZE(in_list_checks))
        return 0; /* done at an earlier start */
    if (n_new != 0)
        return sqlu_errf(&db->sq, -EBADMSG, "%s: the events table's definition is not the one "
                         "lyhd wrote; move the file away and restart lyhd", db->sq.path);
    r = checks_text(db, old, text, sizeof text);
    if (r < 0)
        return r;
    /* DEFENSIVE (sqlu_open) forbids writable_schema: off for the rewrite
     * alone, on again whatever happened. */
    if (sqlite3_db_config(db->w, SQLITE_DBCONFIG_DEFENSIVE, 0, (int *)NULL) != SQLITE_OK)
        return sqlu_errf(&db->sq, -EIO, "%s: the CHECKs' rewrite cannot leave defensive mode",
                         db->sq.path);
    r = checks_rewrite(db, text);
    if (r < 0)
        (void)sqlite3_exec(db->w, "PRAGMA writable_schema = OFF", NULL, NULL, NULL);
    r2 = sqlite3_db_config(db->w, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
    if (r < 0)
        return r;
    if (r2 != SQLITE_OK)
        return sqlu_errf(&db->sq, -EIO, "%s: the CHECKs' rewrite cannot return to defensive mode",
                         db->sq.path);
    /* the new text parses (the next statement reads the schema again) and
     * is the one meant */
    r = sqlu_query_text(&db->sq, db->w, EVENTS_TABLE_SQL, old, sizeof old);
    if (r < 0)
        return r;
    if (strcmp(old, text) != 0)
        return sqlu_errf(&db->sq, -EBADMSG, "%s: the CHECKs' rewrite did not take", db->sq.path);
    return 0;
}

/* Under the write lock: migrations, then the clean flag read and cleared. */
struct migrate_args {
    struct audit_db *db;
    bool created;    /* out: this call created the schema */
    bool was_clean;  /* out */
};

static int migrate_in_transaction(void *ud) {
    struct migrate_args *a = ud;
    struct audit_db *db = a->db;
    int64_t version = 0, clean = 0;
    bool created = false;
    int r;

    r = check_identity(db, &version, &created);
    if (r < 0)
        return r;
    r = sqlu_migrate(&db->sq, db->w, migrations, ARRAY_SIZE(migrations), NULL, &version);
    if (r < 0)
        return r;
    r = checks_without_in_lists(db);
    if (r < 0)
        return r;

    r = sqlu_query_int(&db->sq, db->w, "SELECT value FROM meta WHERE key = 'clean'", &clean);
    if (r < 0)
        return r;
    r = sqlu_exec(&db->sq, db->w, "UPDATE meta SET value = 0 WHERE key = 'clean'", "mark unclean");
    if (r < 0)
        return r;
    a->created = created;
    a->was_clean = created || clean == 1;
    return 0;
}

static int migrate(struct audit_db *db, bool *ret_new, bool *ret_was_clean) {
    struct migrate_args a = { .db = db };
    int r = sqlu_transaction(&db->sq, db->w, "migration", migrate_in_transaction, &a);

    if (r < 0)
        return r;
    *ret_new = a.created;
    *ret_was_clean = a.was_clean;
    return 0;
}

static int setup_writer(struct audit_db *db) {
    int64_t version = 0;
    bool empty = false;
    int r;

    /* The first read: a corrupt or foreign file shows up here. Look at the
     * version and the application id before changing anything (even the
     * journal mode) in a file a newer lyhd or another program wrote. */
    r = check_identity(db, &version, &empty);
    if (r < 0)
        return r;
    /* Before the first table exists, or it never takes. */
    if (empty) {
        r = sqlu_exec(&db->sq, db->w, "PRAGMA auto_vacuum = INCREMENTAL", "set auto_vacuum");
        if (r < 0)
            return r;
    }

    r = sqlu_wal(&db->sq, db->w, "audit dir");
    if (r < 0)
        return r;

    /* synchronous FULL only until open() has committed clean = 0 (then
     * NORMAL, see the top of the file): that one commit must reach the disk
     * before any append, or a power cut could take it with the appends and
     * leave the file looking cleanly closed. secure_delete FAST: zero deleted
     * records in pages that are written anyway, but do not write freed pages
     * only to zero them (Debian builds sqlite with secure_delete ON); retention
     * gives those back to the filesystem. The WAL is truncated to 64 MiB after
     * a checkpoint so a burst does not leave a big file behind. (A bigger page
     * cache than the default 2 MiB made no measurable difference to appends.) */
    return sqlu_exec(&db->sq, db->w,
                     "PRAGMA synchronous = FULL;"
                     "PRAGMA secure_delete = FAST;"
                     "PRAGMA journal_size_limit = 67108864;",
                     "set pragmas");
}

static int prepare_statements(struct audit_db *db) {
    int r;

    /* The writer's statements, then the reader's one. */
    _Static_assert(R_LAST_ID == ADB_STMT__MAX - 1, "the reader's statement comes last");
    r = sqlu_prepare_all(&db->sq, db->w, stmt_sql, db->stmt, R_LAST_ID);
    if (r < 0)
        return r;
    return sqlu_prepare_all(&db->sq, db->r, stmt_sql + R_LAST_ID, db->stmt + R_LAST_ID, 1);
}

static int open_internal(struct audit_db *db, const char *path, bool *ret_was_clean) {
    _cleanup_close_ int dirfd = -1;
    char dir[PATH_MAX];
    const char *slash, *base;
    int64_t av = 0;
    bool fresh = false, was_clean = false;
    int n, r;

    r = sqlu_init(&db->sq, ADB_BUSY_TIMEOUT_MS, ", which starts a new audit log");
    if (r < 0)
        return r;
    n = snprintf(db->sq.path, sizeof db->sq.path, "%s", path);
    if (n < 0 || (size_t)n >= sizeof db->sq.path)
        return sqlu_errf(&db->sq, -ENAMETOOLONG, "audit db path is too long");
    slash = strrchr(path, '/');
    base = slash ? slash + 1 : path;
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return sqlu_errf(&db->sq, -EINVAL, "audit db path '%s' does not name a file", path);
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);

    r = open_dir(db, dir, &dirfd);
    if (r < 0)
        return r;
    r = prepare_file(db, dirfd, base);
    if (r < 0)
        return r;
    r = open_conn(db, &db->w, false);
    if (r < 0)
        return r;
    r = setup_writer(db);
    if (r < 0)
        return r;
    r = migrate(db, &fresh, &was_clean);
    if (r < 0)
        return r;
    r = sqlu_exec(&db->sq, db->w, "PRAGMA synchronous = NORMAL", "set synchronous");
    if (r < 0)
        return r;
    if (fresh) {
        r = sqlu_query_int(&db->sq, db->w, "PRAGMA auto_vacuum", &av);
        if (r < 0)
            return r;
        if (av != 2)
            return sqlu_errf(&db->sq, -ENOTSUP,
                             "%s: sqlite did not enable incremental auto_vacuum (%lld)",
                             db->sq.path, (long long)av);
    }
    /* The reader comes second: READONLY cannot create the schema or the WAL. */
    r = open_conn(db, &db->r, true);
    if (r < 0)
        return r;
    /* the reader's name filter (Q_NAME): C, not LIKE, so it matches exactly
     * as lyh's --name does (common/dns_name.c) */
    int rc = sqlite3_create_function_v2(db->r, "lyh_has_name", 2,
                                        SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                        NULL, sql_has_name, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return sqlu_fail(&db->sq, db->r, rc, "register lyh_has_name");
    r = prepare_statements(db);
    if (r < 0)
        return r;
    *ret_was_clean = was_clean;
    return 0;
}

static void audit_db_closep(struct audit_db **p) {
    audit_db_close(*p);
}

int audit_db_open(const char *path, struct audit_db **ret, bool *ret_was_clean, char *why,
                  size_t whylen) {
    _cleanup_(audit_db_closep) struct audit_db *db = NULL;
    bool was_clean = false;
    int r;

    if (!path || !*path || !ret) {
        if (why && whylen)
            snprintf(why, whylen, "audit_db_open: no path given");
        return -EINVAL;
    }
    db = calloc(1, sizeof *db);
    if (!db) {
        if (why && whylen)
            snprintf(why, whylen, "audit_db_open: out of memory");
        return -ENOMEM;
    }
    r = open_internal(db, path, &was_clean);
    if (r < 0) {
        if (why && whylen)
            snprintf(why, whylen, "%s", db->sq.err);
        return r;
    }
    db->opened = true;
    db->sq.err[0] = '\0';
    if (ret_was_clean)
        *ret_was_clean = was_clean;
    *ret = TAKE_PTR(db);
    return 0;
}

static void close_internal(struct audit_db *db, bool mark_clean) {
    if (!db)
        return;
    for (size_t form = 0; form < QF__MAX; form++)
        for (size_t i = 0; i < Q__SHAPES; i++)
            (void)sqlite3_finalize(db->shape[form][i]);
    (void)sqlite3_finalize(db->stmt[R_LAST_ID]);
    db->stmt[R_LAST_ID] = NULL;
    (void)sqlite3_close_v2(db->r);

    sqlu_rollback_open(db->w);
    /* Only a database we fully opened is ours to mark; a failure leaves the
     * flag at 0, which the next open reads as "not clean": the safe side. */
    if (mark_clean && db->opened && db->stmt[W_SET_CLEAN]) {
        sqlite3_stmt *st = db->stmt[W_SET_CLEAN];

        if (sqlite3_bind_int(st, 1, 1) == SQLITE_OK)
            (void)sqlite3_step(st);
        (void)sqlite3_reset(st);
    }
    for (size_t i = 0; i < ADB_STMT__MAX; i++)
        (void)sqlite3_finalize(db->stmt[i]);
    /* The last connection checkpoints the WAL and removes it. */
    (void)sqlite3_close_v2(db->w);
    free(db);
}

void audit_db_close(struct audit_db *db) {
    close_internal(db, true);
}

void audit_db_abandon(struct audit_db *db) {
    close_internal(db, false);
}

/* ---- the counts (writers, writer_uids) --------------------------------------------------------- */

/* Whose records: what writers counts by. has_uid false has uid 0, as stored. */
struct wkey {
    uint8_t kind;
    bool has_uid;
    uint32_t uid;
    char session[17];
};

/* A record appended or removed, as the counts and the gap records see it. */
struct wrow {
    int64_t id;
    int64_t time_us;
    struct wkey k;
};

/* Why retention removed records: the key of pruned, and the step's time. */
enum { PRUNE_AGE = 1, PRUNE_SIZE = 2 };
struct prune_why {
    int reason;     /* PRUNE_AGE or PRUNE_SIZE */
    int64_t lim;    /* the days, or the byte cap */
    int64_t now_us;
};

/* :kind :has_uid :uid :session (those the statement has). The session is
 * bound SQLITE_STATIC: the caller's key outlives the statement's reset. */
static int bind_key(struct audit_db *db, sqlite3_stmt *st, const struct wkey *k) {
    int r;

    r = sqlu_bind_named_i64(&db->sq, st, ":kind", k->kind);
    if (r >= 0)
        r = sqlu_bind_named_i64(&db->sq, st, ":has_uid", k->has_uid ? 1 : 0);
    if (r >= 0)
        r = sqlu_bind_named_i64(&db->sq, st, ":uid", k->has_uid ? (int64_t)k->uid : 0);
    if (r >= 0)
        r = sqlu_bind_named_text(&db->sq, st, ":session", k->session, SQLITE_STATIC);
    return r;
}

/* By kind, uid, then session (so a uid's rows, and within them a session's,
 * are runs), then id. */
static int wrow_cmp(const void *pa, const void *pb) {
    const struct wrow *a = pa, *b = pb;
    int c;

    if (a->k.kind != b->k.kind)
        return a->k.kind < b->k.kind ? -1 : 1;
    if (a->k.has_uid != b->k.has_uid)
        return a->k.has_uid < b->k.has_uid ? -1 : 1;
    if (a->k.uid != b->k.uid)
        return a->k.uid < b->k.uid ? -1 : 1;
    c = strcmp(a->k.session, b->k.session);
    if (c != 0)
        return c;
    return a->id < b->id ? -1 : a->id > b->id;
}

static bool same_uid_key(const struct wkey *a, const struct wkey *b) {
    return a->kind == b->kind && a->has_uid == b->has_uid && a->uid == b->uid;
}

/* Add delta (> 0) to the count of k, or take -delta away, at the session
 * level (writers) or the uid level (writer_uids). Taking away more than
 * there is drops the row: a count that ran ahead of the records (which
 * account() never lets happen) heals instead of going negative. */
static int count_step(struct audit_db *db, enum adb_stmt which, const struct wkey *k,
                      int64_t n) {
    _cleanup_reset_ sqlite3_stmt *st = db->stmt[which];
    int r;

    r = bind_key(db, st, k);
    if (r >= 0)
        r = sqlu_bind_named_i64(&db->sq, st, ":n", n);
    return r < 0 ? r : sqlu_step_done(&db->sq, st, "count audit records");
}

static int count_change(struct audit_db *db, const struct wkey *k, bool uid_level, int64_t delta) {
    int r;

    if (delta == 0)
        return 0;
    if (delta > 0)
        return count_step(db, uid_level ? W_UIDCOUNT_ADD : W_COUNT_ADD, k, delta);
    r = count_step(db, uid_level ? W_UIDCOUNT_DROP : W_COUNT_DROP, k, -delta);
    if (r < 0 || sqlite3_changes(db->w) > 0)
        return r;
    return count_step(db, uid_level ? W_UIDCOUNT_SUB : W_COUNT_SUB, k, -delta);
}

/* Removals not yet on record: add n records of k to pruned under why. */
static int pruned_add(struct audit_db *db, const struct prune_why *why, const struct wkey *k,
                      int64_t n, int64_t oldest, int64_t newest) {
    _cleanup_reset_ sqlite3_stmt *st = db->stmt[W_PRUNED_ADD];
    const struct {
        const char *name;
        int64_t v;
    } v[] = {
        { ":reason", why->reason }, { ":lim", why->lim },       { ":n", n },
        { ":oldest", oldest },      { ":newest", newest },      { ":now", why->now_us },
    };
    int r = bind_key(db, st, k);

    for (size_t i = 0; i < ARRAY_SIZE(v) && r >= 0; i++)
        r = sqlu_bind_named_i64(&db->sq, st, v[i].name, v[i].v);
    return r < 0 ? r : sqlu_step_done(&db->sq, st, "count what retention removed");
}

/* Count rows (appended: sign +1; removed: sign -1, and then also in pruned
 * under why) in writers and writer_uids: one statement per distinct session
 * and per distinct uid, not per row. Sorts rows. In the caller's
 * transaction. */
static int account(struct audit_db *db, struct wrow *rows, size_t n, int sign,
                   const struct prune_why *why) {
    int r;

    qsort(rows, n, sizeof *rows, wrow_cmp);
    for (size_t i = 0, j; i < n; i = j) {
        int64_t oldest = rows[i].time_us, newest = rows[i].time_us;

        for (j = i; j < n && same_uid_key(&rows[i].k, &rows[j].k); j++) {
            if (rows[j].time_us < oldest)
                oldest = rows[j].time_us;
            if (rows[j].time_us > newest)
                newest = rows[j].time_us;
        }
        r = count_change(db, &rows[i].k, true, sign * (int64_t)(j - i));
        if (r < 0)
            return r;
        for (size_t a = i, b; a < j; a = b) {
            for (b = a; b < j && strcmp(rows[a].k.session, rows[b].k.session) == 0; b++)
                ;
            r = count_change(db, &rows[a].k, false, sign * (int64_t)(b - a));
            if (r < 0)
                return r;
        }
        if (why) {
            r = pruned_add(db, why, &rows[i].k, (int64_t)(j - i), oldest, newest);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

static int account_recs(struct audit_db *db, const struct audit_rec *recs, size_t n) {
    _cleanup_free_ struct wrow *rows = calloc(n ? n : 1, sizeof *rows);

    if (!rows)
        return sqlu_errf(&db->sq, -ENOMEM, "append: out of memory counting %zu records", n);
    for (size_t i = 0; i < n; i++) {
        rows[i].id = (int64_t)i;
        rows[i].time_us = recs[i].time_us;
        rows[i].k.kind = recs[i].kind;
        rows[i].k.has_uid = recs[i].has_uid;
        rows[i].k.uid = recs[i].has_uid ? recs[i].uid : 0;
        memcpy(rows[i].k.session, recs[i].session, sizeof rows[i].k.session);
    }
    return account(db, rows, n, +1, NULL);
}

/* ---- records in ----------------------------------------------------------------------------- */

/* Bytes of detail kept: at most AUDIT_DETAIL_MAX - 1, never ending inside a
 * UTF-8 sequence (a cut may not split a character; bytes that were not UTF-8
 * to begin with are kept as they are). */
static size_t detail_len(const char *d) {
    size_t n;

    if (!d)
        return 0;
    n = strnlen(d, AUDIT_DETAIL_MAX);
    if (n < AUDIT_DETAIL_MAX)
        return n;
    n = AUDIT_DETAIL_MAX - 1;
    /* d[n] is the first byte cut: back up while it continues a sequence,
     * at most 3 bytes (the longest sequence is 4). */
    for (int i = 0; i < 3 && ((unsigned char)d[n] & 0xc0) == 0x80; i++)
        n--;
    return n;
}

static bool terminated(const char *s, size_t size) {
    return strnlen(s, size) < size;
}

static int family_code(uint8_t family) {
    switch (family) {
    case 0:
        return 0;
    case AF_INET:
        return 4;
    case AF_INET6:
        return 6;
    default:
        return -1;
    }
}

static int rec_check(struct audit_db *db, const struct audit_rec *r, size_t i) {
    const char *bad = NULL;

    if (r->kind < AUDIT_KIND_FLOW || r->kind > AUDIT_KIND_DNS)
        bad = "kind is not 1..7";
    else if (r->verdict > AUDIT_VERDICT_DENIED)
        bad = "verdict is not 0..2";
    else if (family_code(r->family) < 0)
        bad = "family is not 0, AF_INET or AF_INET6";
    else if (r->addr_len != 0 && r->addr_len != 4 && r->addr_len != 16)
        bad = "addr_len is not 0, 4 or 16";
    else if (!terminated(r->session, sizeof r->session))
        bad = "session is not NUL-terminated";
    else if (!terminated(r->iface, sizeof r->iface))
        bad = "iface is not NUL-terminated";
    else if (!terminated(r->action, sizeof r->action))
        bad = "action is not NUL-terminated";
    if (bad)
        return sqlu_errf(&db->sq, -EINVAL, "audit record %zu of the batch: %s (kind %u)", i, bad,
                         (unsigned)r->kind);
    return 0;
}

static int bind_rec(struct audit_db *db, sqlite3_stmt *st, const struct audit_rec *r) {
    /* Parameters as numbered in W_INSERT (EVENT_COLS order). The unsigned
     * 64-bit counters go in as their int64 bits. */
    const struct {
        int idx;
        int64_t v;
    } ints[] = {
        { 1, r->time_us },
        { 2, r->kind },
        { 3, r->verdict },
        { 5, r->has_uid ? 1 : 0 },
        { 6, r->has_uid ? (int64_t)r->uid : 0 },
        { 7, family_code(r->family) },
        { 8, r->protocol },
        { 11, r->sport },
        { 12, r->dport },
        { 16, (int64_t)r->allowed_packets },
        { 17, (int64_t)r->allowed_bytes },
        { 18, (int64_t)r->denied_packets },
        { 19, (int64_t)r->denied_bytes },
        { 20, (int64_t)r->missed },
    };
    /* SQLITE_STATIC: the statement is reset (bindings cleared) before
     * audit_db_append returns, while recs is still the caller's. A
     * zero-length address is bound from "" so it is a BLOB, not NULL. */
    const void *src = r->addr_len ? (const void *)r->src : "";
    const void *dst = r->addr_len ? (const void *)r->dst : "";
    int rc = SQLITE_OK;

    for (size_t i = 0; i < ARRAY_SIZE(ints) && rc == SQLITE_OK; i++)
        rc = sqlite3_bind_int64(st, ints[i].idx, ints[i].v);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 4, r->session, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_blob(st, 9, src, r->addr_len, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_blob(st, 10, dst, r->addr_len, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 13, r->iface, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 14, r->action, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 15, r->detail ? r->detail : "", (int)detail_len(r->detail),
                               SQLITE_STATIC);
    return rc == SQLITE_OK ? 0 : sqlu_fail(&db->sq, db->w, rc, "bind an audit record");
}

/* Insert the records and count them (the counts move with the records, in
 * the caller's transaction). */
static int append_in_transaction(struct audit_db *db, const struct audit_rec *recs, size_t n,
                                 int64_t *ids) {
    sqlite3_stmt *st = db->stmt[W_INSERT];

    for (size_t i = 0; i < n; i++) {
        _cleanup_reset_ sqlite3_stmt *cur = st;
        int r;

        r = bind_rec(db, cur, &recs[i]);
        if (r < 0)
            return r;
        r = sqlu_step_done(&db->sq, cur, "append an audit record");
        if (r < 0)
            return r;
        ids[i] = sqlite3_last_insert_rowid(db->w);
    }
    return account_recs(db, recs, n);
}

int audit_db_append(struct audit_db *db, struct audit_rec *recs, size_t n) {
    _cleanup_free_ int64_t *ids = NULL;
    int r;

    db->sq.err[0] = '\0';
    if (n == 0)
        return 0;
    if (!recs)
        return sqlu_errf(&db->sq, -EINVAL, "append: no records given");
    for (size_t i = 0; i < n; i++) {
        r = rec_check(db, &recs[i], i);
        if (r < 0)
            return r;
    }
    ids = calloc(n, sizeof *ids);
    if (!ids)
        return sqlu_errf(&db->sq, -ENOMEM, "append: out of memory for %zu ids", n);

    r = begin(db, "begin an append");
    if (r < 0)
        return r;
    r = append_in_transaction(db, recs, n, ids);
    if (r >= 0)
        r = commit(db, "commit an append");
    if (r < 0) {
        rollback(db);
        return r;
    }
    /* Only now are the ids real. */
    for (size_t i = 0; i < n; i++)
        recs[i].id = (uint64_t)ids[i];
    return 0;
}

static void measure_recs(struct audit_rec *recs, size_t n, size_t round) {
    struct timespec now;

    clock_gettime(CLOCK_REALTIME, &now);
    for (size_t i = 0; i < n; i++) {
        struct audit_rec *a = &recs[i];
        size_t k = round * n + i;

        *a = (struct audit_rec){
            .time_us = (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000 + (int64_t)i,
            .kind = AUDIT_KIND_FLOW,
            .verdict = AUDIT_VERDICT_DENIED,
            .family = AF_INET,
            .protocol = 17,
            .addr_len = 4,
            .src = { 10, 0, 0, 1 },
            .dst = { 10, (uint8_t)(k >> 16), (uint8_t)(k >> 8), (uint8_t)k },
            .sport = (uint16_t)(40000 + k % 20000),
            .dport = 443,
            .has_uid = true,
            .uid = 65534,
            .session = "measure",
            .iface = "tun0",
        };
    }
}

static void measure_unlink(int dirfd) {
    static const char *const names[] = { AUDIT_MEASURE_NAME, AUDIT_MEASURE_NAME "-wal",
                                         AUDIT_MEASURE_NAME "-shm", AUDIT_MEASURE_NAME "-journal" };

    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        (void)unlinkat(dirfd, names[i], 0);
}

bool audit_db_threadsafe(void) { return sqlite3_threadsafe() != 0; }

int audit_db_measure(const char *dir, size_t n, unsigned rounds, uint64_t *ret_per_s, char *why,
                     size_t whylen) {
    _cleanup_free_ struct audit_rec *recs = NULL;
    _cleanup_close_ int dirfd = -1;
    struct audit_db *db = NULL;
    uint64_t best = 0;
    char path[PATH_MAX];
    int r = 0;

    if (n == 0 || n > AUDIT_MEASURE_MAX || rounds == 0 || rounds > AUDIT_MEASURE_ROUNDS_MAX) {
        snprintf(why, whylen, "measure: %zu records in %u rounds is not 1..%d in 1..%d", n, rounds,
                 AUDIT_MEASURE_MAX, AUDIT_MEASURE_ROUNDS_MAX);
        return -EINVAL;
    }
    if (snprintf(path, sizeof path, "%s/%s", dir, AUDIT_MEASURE_NAME) >= (int)sizeof path) {
        snprintf(why, whylen, "measure: the directory's path is too long");
        return -ENAMETOOLONG;
    }
    recs = calloc(n, sizeof *recs);
    if (!recs) {
        snprintf(why, whylen, "measure: out of memory for %zu records", n);
        return -ENOMEM;
    }
    dirfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0) {
        r = -errno;
        snprintf(why, whylen, "measure: cannot open %s: %s", dir, strerror(errno));
        return r;
    }
    /* a scratch file of an earlier start that did not finish */
    measure_unlink(dirfd);
    r = audit_db_open(path, &db, NULL, why, whylen);
    for (unsigned i = 0; r == 0 && i < rounds; i++) {
        struct timespec t0, t1;

        measure_recs(recs, n, i);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        r = audit_db_append(db, recs, n);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (r < 0) {
            snprintf(why, whylen, "%s", audit_db_errmsg(db));
            break;
        }
        int64_t ns = (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec);
        uint64_t rate = (uint64_t)((double)n * 1e9 / (double)(ns > 0 ? ns : 1));

        if (rate > best)
            best = rate;
    }
    audit_db_abandon(db); /* nothing to mark clean: the file goes */
    measure_unlink(dirfd);
    if (r < 0)
        return r;
    *ret_per_s = best;
    return 0;
}

/* ---- filters ---------------------------------------------------------------------------------- */

static const char *filter_problem(const struct audit_filter *f) {
    uint16_t hi;

    if (!f)
        return "no filter given";
    if (!terminated(f->session, sizeof f->session))
        return "session is not NUL-terminated";
    if (!f->has_uid && f->uid != 0)
        return "uid given without has_uid";
    if (f->kind > AUDIT_KIND_DNS)
        return "kind is not 0..7";
    if (!terminated(f->name, sizeof f->name))
        return "name is not NUL-terminated";
    if (f->name[0]) {
        char canon[DNS_PATTERN_MAX], why[160];
        if (dn_pattern_check(f->name, canon, why, sizeof(why)) < 0 || strcmp(canon, f->name) != 0)
            return "name is not a canonical name pattern";
    }
    if (f->verdict > AUDIT_VERDICT_DENIED)
        return "verdict is not 0..2";
    if (f->dst_len != 0 && f->dst_len != 4 && f->dst_len != 16)
        return "dst_len is not 0, 4 or 16";
    if (f->dst_prefix > f->dst_len * 8)
        return "dst_prefix is longer than the address";
    hi = f->port_max ? f->port_max : f->port_min;
    if (f->port_min > hi)
        return "port_min is above port_max";
    return NULL;
}

int audit_filter_check(const struct audit_filter *f) {
    return filter_problem(f) ? -EINVAL : 0;
}

static unsigned filter_shape(const struct audit_filter *f) {
    unsigned s = 0;

    if (f->since_us)
        s |= Q_SINCE;
    if (f->until_us)
        s |= Q_UNTIL;
    if (f->session[0])
        s |= Q_SESSION;
    if (f->has_uid)
        s |= Q_UID;
    if (f->kind)
        s |= Q_KIND | (f->kind != AUDIT_KIND_FLOW ? Q_KIND_RARE : 0);
    if (f->verdict)
        s |= Q_VERDICT;
    if (f->protocol)
        s |= Q_PROTOCOL;
    if (f->dst_len)
        s |= f->dst_prefix == f->dst_len * 8 ? Q_DST_HOST : Q_DST_NET;
    if (f->port_min || f->port_max)
        s |= Q_PORT;
    if (f->name[0])
        s |= Q_NAME;
    return s;
}

static enum adb_driver shape_driver(unsigned shape) {
    if (shape & Q_SESSION)
        return D_SESSION;
    if (shape & Q_DST_HOST)
        return D_DST;
    if (shape & Q_KIND_RARE)
        return D_KIND;
    if (shape & Q_UID)
        return D_UID;
    return D_ROWID;
}

struct sqlbuf {
    char s[1024];
    size_t len;
    bool overflow;
};

static void sb_add(struct sqlbuf *b, const char *t) {
    size_t n = strlen(t);

    if (b->len + n >= sizeof b->s) {
        b->overflow = true;
        return;
    }
    memcpy(b->s + b->len, t, n + 1);
    b->len += n;
}

/* The query for a shape, from constant fragments only. */
static int shape_sql(struct audit_db *db, unsigned shape, enum query_form form, bool explain,
                     struct sqlbuf *b) {
    static const char *const select[QF__MAX] = {
        [QF_PAGE] = "SELECT id, " EVENT_COLS,
        [QF_TAIL] = "SELECT id",
        [QF_COUNT] = "SELECT count(*)",
    };
    static const char *const order[QF__MAX] = {
        [QF_PAGE] = " ORDER BY id LIMIT :limit",
        [QF_TAIL] = " ORDER BY id DESC LIMIT 1 OFFSET :offset",
        [QF_COUNT] = "",
    };
    enum adb_driver d = shape_driver(shape);

    b->len = 0;
    b->s[0] = '\0';
    b->overflow = false;
    if (explain)
        sb_add(b, "EXPLAIN QUERY PLAN ");
    sb_add(b, select[form]);
    sb_add(b, " FROM events WHERE id > :after");
    for (size_t i = 0; i < ARRAY_SIZE(query_terms); i++) {
        const struct query_term *t = &query_terms[i];

        if (!(shape & t->bit))
            continue;
        sb_add(b, " AND ");
        sb_add(b, t->driver == (int)d && t->indexed ? t->indexed : t->plain);
    }
    sb_add(b, order[form]);
    if (b->overflow)
        return sqlu_errf(&db->sq, -EOVERFLOW, "audit query for shape %#x does not fit", shape);
    return 0;
}

/* A statement for the shape, and whether the caller owns it (a fresh one when
 * the cached one is running: fn called us again from inside a page). */
struct qstmt {
    sqlite3_stmt *st;
    bool owned;
};

static void qstmt_done(struct qstmt *q) {
    if (!q->st)
        return;
    if (q->owned) {
        (void)sqlite3_finalize(q->st);
    } else {
        (void)sqlite3_reset(q->st);
        (void)sqlite3_clear_bindings(q->st);
    }
    q->st = NULL;
}

static int shape_stmt(struct audit_db *db, unsigned shape, enum query_form form,
                      struct qstmt *ret) {
    sqlite3_stmt **slot = &db->shape[form][shape];
    struct sqlbuf b;
    sqlite3_stmt *st = NULL;
    int r, rc;

    if (*slot && !sqlite3_stmt_busy(*slot)) {
        *ret = (struct qstmt){ *slot, false };
        return 0;
    }
    r = shape_sql(db, shape, form, false, &b);
    if (r < 0)
        return r;
    rc = sqlite3_prepare_v3(db->r, b.s, -1, *slot ? 0 : SQLITE_PREPARE_PERSISTENT, &st, NULL);
    if (rc != SQLITE_OK)
        return sqlu_fail(&db->sq, db->r, rc, "prepare an audit query");
    if (!*slot) {
        *slot = st;
        *ret = (struct qstmt){ st, false };
    } else {
        *ret = (struct qstmt){ st, true };
    }
    return 0;
}

/* The destination prefix as a BLOB range: host bits cleared / set. */
static void dst_bounds(const struct audit_filter *f, uint8_t lo[16], uint8_t hi[16]) {
    for (unsigned b = 0; b < f->dst_len; b++) {
        unsigned keep = f->dst_prefix <= b * 8u ? 0 : f->dst_prefix - b * 8u;
        uint8_t mask = keep >= 8 ? 0xff : (uint8_t)(0xff00u >> keep);

        lo[b] = f->dst[b] & mask;
        hi[b] = (uint8_t)(f->dst[b] | (uint8_t)~mask);
    }
}

/* Bind every parameter the statement has from f (after_id <= INT64_MAX). */
static int bind_filter(struct audit_db *db, sqlite3_stmt *st, const struct audit_filter *f) {
    const struct {
        const char *name;
        int64_t v;
    } ints[] = {
        { ":after", (int64_t)f->after_id },
        { ":since", f->since_us },
        { ":until", f->until_us },
        { ":uid", f->uid },
        { ":kind", f->kind },
        { ":verdict", f->verdict },
        { ":protocol", f->protocol },
        { ":dst_len", f->dst_len },
        { ":port_min", f->port_min },
        { ":port_max", f->port_max ? f->port_max : f->port_min },
    };
    uint8_t lo[16] = { 0 }, hi[16] = { 0 };
    int r;

    dst_bounds(f, lo, hi);
    for (size_t k = 0; k < ARRAY_SIZE(ints); k++) {
        r = sqlu_bind_named_i64(&db->sq, st, ints[k].name, ints[k].v);
        if (r < 0)
            return r;
    }
    r = sqlu_bind_named_text(&db->sq, st, ":session", f->session, SQLITE_TRANSIENT);
    if (r >= 0)
        r = sqlu_bind_named_text(&db->sq, st, ":name", f->name, SQLITE_TRANSIENT);
    if (r >= 0)
        r = sqlu_bind_named_blob(&db->sq, st, ":dst", lo, f->dst_len, SQLITE_TRANSIENT);
    if (r >= 0)
        r = sqlu_bind_named_blob(&db->sq, st, ":dst_lo", lo, f->dst_len, SQLITE_TRANSIENT);
    if (r >= 0)
        r = sqlu_bind_named_blob(&db->sq, st, ":dst_hi", hi, f->dst_len, SQLITE_TRANSIENT);
    return r;
}

static int check_filter(struct audit_db *db, const struct audit_filter *f) {
    const char *why = filter_problem(f);
    return why ? sqlu_errf(&db->sq, -EINVAL, "invalid audit filter: %s", why) : 0;
}

/* The statement for f's shape and form (shape_stmt), with f bound. */
static int filter_stmt(struct audit_db *db, const struct audit_filter *f, enum query_form form,
                       struct qstmt *ret) {
    int r = shape_stmt(db, filter_shape(f), form, ret);
    return r < 0 ? r : bind_filter(db, ret->st, f);
}

/* ---- records out ---------------------------------------------------------------------------- */

static int column_str(struct audit_db *db, sqlite3_stmt *st, int col, int64_t id, char *out,
                      size_t size, const char *name) {
    int r = sqlu_column_text_copy(st, col, out, size);

    if (r == -ENOMEM)
        return sqlu_errf(&db->sq, -ENOMEM, "read %s: out of memory", name);
    return r < 0 ? corrupt(db, id, name) : 0;
}

/* Fill rec from a page row. rec->detail points into the statement's row. */
static int read_rec(struct audit_db *db, sqlite3_stmt *st, struct audit_rec *rec) {
    static const struct {
        int col;
        const char *name;
        int64_t min, max;
    } ranges[] = {
        { 2, "kind", AUDIT_KIND_FLOW, AUDIT_KIND_DNS },
        { 3, "verdict", 0, AUDIT_VERDICT_DENIED },
        { 5, "has_uid", 0, 1 },
        { 6, "uid", 0, UINT32_MAX },
        { 8, "protocol", 0, UINT8_MAX },
        { 11, "sport", 0, UINT16_MAX },
        { 12, "dport", 0, UINT16_MAX },
    };
    int64_t v[ARRAY_SIZE(ranges)];
    int64_t id = sqlite3_column_int64(st, 0), family = sqlite3_column_int64(st, 7);
    const void *src, *dst;
    size_t src_len, dst_len, detail_bytes;
    int r;

    memset(rec, 0, sizeof *rec);
    if (id <= 0)
        return corrupt(db, id, "id");
    for (size_t i = 0; i < ARRAY_SIZE(ranges); i++) {
        v[i] = sqlite3_column_int64(st, ranges[i].col);
        if (v[i] < ranges[i].min || v[i] > ranges[i].max)
            return corrupt(db, id, ranges[i].name);
    }
    rec->id = (uint64_t)id;
    rec->time_us = sqlite3_column_int64(st, 1);
    rec->kind = (uint8_t)v[0];
    rec->verdict = (uint8_t)v[1];
    rec->has_uid = v[2] == 1;
    rec->uid = (uint32_t)v[3];
    rec->protocol = (uint8_t)v[4];
    rec->sport = (uint16_t)v[5];
    rec->dport = (uint16_t)v[6];
    switch (family) {
    case 0:
        rec->family = 0;
        break;
    case 4:
        rec->family = AF_INET;
        break;
    case 6:
        rec->family = AF_INET6;
        break;
    default:
        return corrupt(db, id, "family");
    }

    r = sqlu_column_blob(st, 9, &src, &src_len);
    if (r >= 0)
        r = sqlu_column_blob(st, 10, &dst, &dst_len);
    if (r == -ENOMEM)
        return sqlu_errf(&db->sq, -ENOMEM, "read address: out of memory");
    if (r < 0 || (src_len != 0 && src_len != 4 && src_len != 16) || dst_len != src_len)
        return corrupt(db, id, "address");
    rec->addr_len = (uint8_t)src_len;
    memcpy(rec->src, src, src_len);
    memcpy(rec->dst, dst, dst_len);

    r = column_str(db, st, 4, id, rec->session, sizeof rec->session, "session");
    if (r < 0)
        return r;
    r = column_str(db, st, 13, id, rec->iface, sizeof rec->iface, "iface");
    if (r < 0)
        return r;
    r = column_str(db, st, 14, id, rec->action, sizeof rec->action, "action");
    if (r < 0)
        return r;
    r = sqlu_column_text(st, 15, &rec->detail, &detail_bytes);
    if (r == -ENOMEM)
        return sqlu_errf(&db->sq, -ENOMEM, "read detail: out of memory");
    if (r < 0)
        return corrupt(db, id, "detail");

    rec->allowed_packets = (uint64_t)sqlite3_column_int64(st, 16);
    rec->allowed_bytes = (uint64_t)sqlite3_column_int64(st, 17);
    rec->denied_packets = (uint64_t)sqlite3_column_int64(st, 18);
    rec->denied_bytes = (uint64_t)sqlite3_column_int64(st, 19);
    rec->missed = (uint64_t)sqlite3_column_int64(st, 20);
    return 0;
}

int audit_db_page(struct audit_db *db, const struct audit_filter *f, unsigned max, audit_row_fn fn,
                  void *ud) {
    _cleanup_(qstmt_done) struct qstmt q = { 0 };
    int delivered = 0, r;

    db->sq.err[0] = '\0';
    r = check_filter(db, f);
    if (r < 0)
        return r;
    if (!fn)
        return sqlu_errf(&db->sq, -EINVAL, "audit page: no callback given");
    if (max == 0 || f->after_id >= INT64_MAX)
        return 0;
    if (max > (unsigned)INT_MAX)
        max = INT_MAX;
    r = filter_stmt(db, f, QF_PAGE, &q);
    if (r < 0)
        return r;
    r = sqlu_bind_named_i64(&db->sq, q.st, ":limit", max);
    if (r < 0)
        return r;

    for (;;) {
        struct audit_rec rec;
        int rc = sqlite3_step(q.st);

        if (rc == SQLITE_DONE)
            break;
        if (rc != SQLITE_ROW)
            return sqlu_fail(&db->sq, db->r, rc, "read audit records");
        r = read_rec(db, q.st, &rec);
        if (r < 0)
            return r;
        delivered++;
        if (fn(&rec, ud) != 0)
            break;
    }
    return delivered;
}

int audit_db_tail_start(struct audit_db *db, const struct audit_filter *f, unsigned n,
                        uint64_t *ret_after_id) {
    _cleanup_(qstmt_done) struct qstmt q = { 0 };
    int64_t last = 0;
    int r, rc;

    db->sq.err[0] = '\0';
    r = check_filter(db, f);
    if (r < 0)
        return r;
    if (!ret_after_id)
        return sqlu_errf(&db->sq, -EINVAL, "audit tail: no result given");
    if (f->after_id >= INT64_MAX) {
        *ret_after_id = f->after_id;
        return 0;
    }
    if (n == 0) {
        /* The newest 0: start past everything there is. */
        r = stmt_int(db, R_LAST_ID, &last);
        if (r < 0)
            return r;
        *ret_after_id = (uint64_t)last > f->after_id ? (uint64_t)last : f->after_id;
        return 0;
    }
    r = filter_stmt(db, f, QF_TAIL, &q);
    if (r < 0)
        return r;
    r = sqlu_bind_named_i64(&db->sq, q.st, ":offset", (int64_t)n - 1);
    if (r < 0)
        return r;
    rc = sqlite3_step(q.st);
    if (rc == SQLITE_DONE) {
        *ret_after_id = f->after_id; /* fewer than n match: all of them */
        return 0;
    }
    if (rc != SQLITE_ROW)
        return sqlu_fail(&db->sq, db->r, rc, "find the newest %u audit records", n);
    last = sqlite3_column_int64(q.st, 0);
    if (last <= 0 || (uint64_t)last <= f->after_id)
        return corrupt(db, last, "id");
    *ret_after_id = (uint64_t)last - 1;
    return 0;
}

int audit_db_count(struct audit_db *db, const struct audit_filter *f, uint64_t *ret_n) {
    _cleanup_(qstmt_done) struct qstmt q = { 0 };
    int64_t n;
    int r, rc;

    db->sq.err[0] = '\0';
    r = check_filter(db, f);
    if (r < 0)
        return r;
    if (!ret_n)
        return sqlu_errf(&db->sq, -EINVAL, "audit count: no result given");
    if (f->after_id >= INT64_MAX) {
        *ret_n = 0;
        return 0;
    }
    r = filter_stmt(db, f, QF_COUNT, &q);
    if (r < 0)
        return r;
    rc = sqlite3_step(q.st);
    if (rc != SQLITE_ROW)
        return sqlu_fail(&db->sq, db->r, rc, "count audit records");
    n = sqlite3_column_int64(q.st, 0);
    if (n < 0)
        return corrupt(db, 0, "count");
    *ret_n = (uint64_t)n;
    return 0;
}

/* Append the details of an EXPLAIN QUERY PLAN's rows to buf (*used bytes
 * of it taken), joined with "; ". */
static int plan_rows(struct audit_db *db, sqlite3_stmt *st, char *buf, size_t buflen,
                     size_t *used, const char *what) {
    int rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const unsigned char *d = sqlite3_column_text(st, 3);
        int n = snprintf(buf + *used, buflen - *used, "%s%s", *used ? "; " : "",
                         d ? (const char *)d : "");

        if (n < 0 || (size_t)n >= buflen - *used)
            return sqlu_errf(&db->sq, -ERANGE, "explain: the plan does not fit in %zu bytes",
                             buflen);
        *used += (size_t)n;
    }
    if (rc != SQLITE_DONE)
        return sqlu_fail(&db->sq, sqlite3_db_handle(st), rc, "%s", what);
    return 0;
}

int audit_db_explain(struct audit_db *db, const struct audit_filter *f, bool tail, char *buf,
                     size_t buflen) {
    _cleanup_finalize_ sqlite3_stmt *st = NULL;
    struct sqlbuf b;
    size_t used = 0;
    int r, rc;

    db->sq.err[0] = '\0';
    r = check_filter(db, f);
    if (r < 0)
        return r;
    if (!buf || buflen == 0)
        return sqlu_errf(&db->sq, -EINVAL, "explain: no buffer given");
    r = shape_sql(db, filter_shape(f), tail ? QF_TAIL : QF_PAGE, true, &b);
    if (r < 0)
        return r;
    rc = sqlite3_prepare_v2(db->r, b.s, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return sqlu_fail(&db->sq, db->r, rc, "prepare an audit query plan");
    r = bind_filter(db, st, f);
    if (r < 0)
        return r;
    buf[0] = '\0';
    return plan_rows(db, st, buf, buflen, &used, "explain an audit query");
}

int audit_db_last_id(struct audit_db *db, uint64_t *ret_id) {
    int64_t id = 0;
    int r;

    db->sq.err[0] = '\0';
    if (!ret_id)
        return sqlu_errf(&db->sq, -EINVAL, "last id: no result given");
    r = stmt_int(db, R_LAST_ID, &id);
    if (r < 0)
        return r;
    if (id < 0)
        return corrupt(db, id, "id");
    *ret_id = (uint64_t)id;
    return 0;
}

/* ---- size and retention ------------------------------------------------------------------- */

static int used_bytes(struct audit_db *db, uint64_t *ret) {
    int64_t pages = 0, free_pages = 0, page_size = 0;
    int r;

    r = stmt_int(db, W_PAGE_COUNT, &pages);
    if (r < 0)
        return r;
    r = stmt_int(db, W_FREELIST_COUNT, &free_pages);
    if (r < 0)
        return r;
    r = stmt_int(db, W_PAGE_SIZE, &page_size);
    if (r < 0)
        return r;
    if (pages < 0 || free_pages < 0 || free_pages > pages || page_size <= 0)
        return sqlu_errf(&db->sq, -EBADMSG, "%s: page counts make no sense (%lld, %lld free)",
                         db->sq.path, (long long)pages, (long long)free_pages);
    *ret = (uint64_t)(pages - free_pages) * (uint64_t)page_size;
    return 0;
}

int audit_db_size(struct audit_db *db, uint64_t *ret_bytes) {
    uint64_t bytes = 0;
    int r;

    db->sq.err[0] = '\0';
    if (!ret_bytes)
        return sqlu_errf(&db->sq, -EINVAL, "size: no result given");
    r = used_bytes(db, &bytes);
    if (r < 0)
        return r;
    *ret_bytes = bytes;
    return 0;
}

#define ADB_PRUNE_ROWS_MAX 65536u  /* a step removes at most this many, whatever max_rows says */
#define ADB_PICKS_PER_STEP 64       /* heaviest-writer choices per step */
#define ADB_GAPS_PER_STEP 256       /* retention gap records written per step */

/* Read one PRUNE_COLS row of a writer statement. */
static int read_wrow(struct audit_db *db, sqlite3_stmt *st, struct wrow *w) {
    int64_t id = sqlite3_column_int64(st, 0), kind = sqlite3_column_int64(st, 2);
    int64_t has_uid = sqlite3_column_int64(st, 4), uid = sqlite3_column_int64(st, 5);
    char session[sizeof w->k.session];
    int r;

    if (id <= 0)
        return corrupt(db, id, "id");
    if (kind < AUDIT_KIND_FLOW || kind > AUDIT_KIND_DNS)
        return corrupt(db, id, "kind");
    if (has_uid < 0 || has_uid > 1 || uid < 0 || uid > UINT32_MAX)
        return corrupt(db, id, "uid");
    r = sqlu_column_text_copy(st, 3, session, sizeof session);
    if (r == -ENOMEM)
        return sqlu_errf(&db->sq, -ENOMEM, "read session: out of memory");
    if (r < 0)
        return corrupt(db, id, "session");
    memset(w, 0, sizeof *w);
    w->id = id;
    w->time_us = sqlite3_column_int64(st, 1);
    w->k.kind = (uint8_t)kind;
    w->k.has_uid = has_uid == 1;
    w->k.uid = (uint32_t)uid;
    memcpy(w->k.session, session, sizeof session);
    return 0;
}

/* Remove the rows st selects (bound by the caller, :limit at most cap):
 * read them, delete each by id, count them out of writers and into pruned.
 * *ret_n = rows removed. st is reset, bindings cleared. */
static int remove_selected(struct audit_db *db, sqlite3_stmt *st, const struct prune_why *why,
                           struct wrow *rows, size_t cap, uint64_t *ret_n) {
    size_t n = 0;
    int r, rc;

    {
        _cleanup_reset_ sqlite3_stmt *cur = st;

        while ((rc = sqlite3_step(cur)) == SQLITE_ROW) {
            if (n == cap)
                return sqlu_errf(&db->sq, -EBADMSG, "%s: retention selected more than %zu rows",
                                 db->sq.path, cap);
            r = read_wrow(db, cur, &rows[n]);
            if (r < 0)
                return r;
            n++;
        }
        if (rc != SQLITE_DONE)
            return sqlu_fail(&db->sq, db->w, rc, "select old audit records");
    }
    for (size_t i = 0; i < n; i++) {
        _cleanup_reset_ sqlite3_stmt *del = db->stmt[W_DELETE_ID];

        r = sqlu_bind_named_i64(&db->sq, del, ":id", rows[i].id);
        if (r >= 0)
            r = sqlu_step_done(&db->sq, del, "delete old audit records");
        if (r < 0)
            return r;
        if (sqlite3_changes(db->w) != 1)
            return sqlu_errf(&db->sq, -EBADMSG,
                             "%s: record %lld vanished while retention removed it", db->sq.path,
                             (long long)rows[i].id);
    }
    r = account(db, rows, n, -1, why);
    if (r < 0)
        return r;
    *ret_n = n;
    return 0;
}

/* Age: the oldest (by time_us) up to limit records older than the cutoff. */
static int remove_old(struct audit_db *db, const struct audit_retention *p, struct wrow *rows,
                      uint64_t limit, uint64_t *ret_n) {
    sqlite3_stmt *st = db->stmt[W_SEL_AGE];
    const struct prune_why why = { PRUNE_AGE, p->max_age_days, p->now_us };
    int r;

    r = sqlu_bind_named_i64(&db->sq, st, ":cutoff", p->older_than_us);
    if (r >= 0)
        r = sqlu_bind_named_i64(&db->sq, st, ":limit", (int64_t)limit);
    if (r < 0) {
        sqlite3_clear_bindings(st);
        return r;
    }
    return remove_selected(db, st, &why, rows, limit, ret_n);
}

/* Size: up to limit of the oldest records of the heaviest writer of kind:
 * the uid with the most records of kind, and of its records the session
 * with the most. ret_none: no record of kind is left. A count that names
 * records which are not there is dropped (and the step goes on). */
static int remove_heaviest(struct audit_db *db, uint8_t kind, const struct prune_why *why,
                           struct wrow *rows, uint64_t limit, uint64_t *ret_n, bool *ret_none) {
    struct wkey k = { .kind = kind };
    int64_t n_uid = 0, n_ses = 0;
    sqlite3_stmt *sel;
    int r, rc;

    *ret_n = 0;
    *ret_none = false;
    {
        _cleanup_reset_ sqlite3_stmt *st = db->stmt[W_HEAVY_UID];

        r = bind_key(db, st, &k);
        if (r < 0)
            return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
            *ret_none = true;
            return 0;
        }
        if (rc != SQLITE_ROW)
            return sqlu_fail(&db->sq, db->w, rc, "find the heaviest writer");
        k.has_uid = sqlite3_column_int64(st, 0) == 1;
        k.uid = (uint32_t)sqlite3_column_int64(st, 1);
        n_uid = sqlite3_column_int64(st, 2);
    }
    {
        _cleanup_reset_ sqlite3_stmt *st = db->stmt[W_HEAVY_SESSION];

        r = bind_key(db, st, &k);
        if (r < 0)
            return r;
        rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) /* the uid's count has no sessions behind it */
            return count_change(db, &k, true, -n_uid);
        if (rc != SQLITE_ROW)
            return sqlu_fail(&db->sq, db->w, rc, "find the heaviest session");
        r = sqlu_column_text_copy(st, 0, k.session, sizeof k.session);
        if (r == -ENOMEM)
            return sqlu_errf(&db->sq, -ENOMEM, "read session: out of memory");
        if (r < 0)
            return sqlu_errf(&db->sq, -EBADMSG, "%s: a session id in writers is too long",
                             db->sq.path);
        n_ses = sqlite3_column_int64(st, 1);
    }
    if (n_ses <= 0)
        return sqlu_errf(&db->sq, -EBADMSG, "%s: writers holds a count of %lld", db->sq.path,
                         (long long)n_ses);
    if (limit > (uint64_t)n_ses)
        limit = (uint64_t)n_ses;
    sel = db->stmt[k.session[0] ? W_SEL_SESSION : W_SEL_NOSESSION];
    r = bind_key(db, sel, &k);
    if (r >= 0)
        r = sqlu_bind_named_i64(&db->sq, sel, ":limit", (int64_t)limit);
    if (r < 0) {
        sqlite3_clear_bindings(sel);
        return r;
    }
    r = remove_selected(db, sel, why, rows, limit, ret_n);
    if (r < 0 || *ret_n > 0)
        return r;
    /* Counted but not there: drop the count. */
    r = count_change(db, &k, false, -n_ses);
    return r < 0 ? r : count_change(db, &k, true, -n_ses);
}

/* How many records to delete so the size falls under max_bytes: the excess
 * over the average record's share of the file (indexes included).
 * The id range counts holes too, so it over-counts records, under-estimates
 * each one's share and errs on deleting more; deleting frees less than that
 * share (index pages thin out before they empty), and the next call makes up
 * a short one. */
static int size_excess_rows(struct audit_db *db, uint64_t max_bytes, uint64_t *ret) {
    _cleanup_reset_ sqlite3_stmt *st = db->stmt[W_ID_RANGE];
    uint64_t bytes = 0, rows, per_row;
    int64_t lo, hi;
    int r, rc;

    *ret = 0;
    r = used_bytes(db, &bytes);
    if (r < 0 || bytes <= max_bytes)
        return r;
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW)
        return sqlu_fail(&db->sq, db->w, rc, "find the id range");
    if (sqlite3_column_type(st, 0) == SQLITE_NULL)
        return 0; /* nothing left to delete: the schema alone is over budget */
    lo = sqlite3_column_int64(st, 0);
    hi = sqlite3_column_int64(st, 1);
    if (lo <= 0 || hi < lo)
        return corrupt(db, lo, "id");
    rows = (uint64_t)(hi - lo) + 1;
    per_row = bytes / rows ? bytes / rows : 1;
    *ret = (bytes - max_bytes) / per_row + 1;
    return 0;
}

/* Size: remove up to budget records so the size falls under p->max_bytes,
 * in the order the header gives: the heaviest writers' flow records, then
 * their request records, and only when neither kind is left, the oldest of
 * the rest. Each choice of a writer takes at most an eighth of the budget,
 * so one writer is not cut far below the next heaviest in one step. */
static int remove_for_size(struct audit_db *db, const struct audit_retention *p,
                           struct wrow *rows, uint64_t budget, uint64_t *ret_n) {
    static const uint8_t tiers[] = { AUDIT_KIND_FLOW, AUDIT_KIND_REQUEST };
    const struct prune_why why = { PRUNE_SIZE,
                                   p->max_bytes > INT64_MAX ? INT64_MAX : (int64_t)p->max_bytes,
                                   p->now_us };
    uint64_t want = 0, done = 0, n = 0, chunk = budget / 8 ? budget / 8 : 1;
    unsigned picks = 0;
    bool all_gone = true;
    int r;

    *ret_n = 0;
    r = size_excess_rows(db, p->max_bytes, &want);
    if (r < 0 || want == 0)
        return r;
    if (want > budget)
        want = budget;
    for (size_t t = 0; t < ARRAY_SIZE(tiers) && done < want; t++) {
        bool none = false;

        while (done < want && picks < ADB_PICKS_PER_STEP) {
            uint64_t lim = want - done < chunk ? want - done : chunk;

            picks++;
            r = remove_heaviest(db, tiers[t], &why, rows, lim, &n, &none);
            if (r < 0)
                return r;
            if (none)
                break;
            done += n;
        }
        if (!none)
            all_gone = false;
    }
    if (done < want && all_gone) {
        /* No flow and no request record is left: the oldest of the rest. */
        sqlite3_stmt *st = db->stmt[W_SEL_OLDEST];

        r = sqlu_bind_named_i64(&db->sq, st, ":limit", (int64_t)(want - done));
        if (r < 0) {
            sqlite3_clear_bindings(st);
            return r;
        }
        r = remove_selected(db, st, &why, rows, want - done, &n);
        if (r < 0)
            return r;
        done += n;
    }
    *ret_n = done;
    return 0;
}

/* ---- retention gap records ---- */

static const char *const kind_names[] = {
    [AUDIT_KIND_FLOW] = "flow",       [AUDIT_KIND_SESSION] = "session",
    [AUDIT_KIND_POLICY] = "policy",   [AUDIT_KIND_REQUEST] = "request",
    [AUDIT_KIND_GAP] = "gap",         [AUDIT_KIND_GUARD] = "guard",
    [AUDIT_KIND_DNS] = "dns",
};

/* One gap record being built: one (reason, lim, uid) of pruned. */
struct gap_build {
    int reason;
    int64_t lim;
    bool has_uid;
    uint32_t uid;
    uint64_t n[AUDIT_KIND_DNS + 1];
    int64_t oldest, newest;
    char detail[512];
};

static void fmt_utc(char *buf, size_t len, int64_t us) {
    time_t t = (time_t)(us / 1000000 - (us % 1000000 < 0 ? 1 : 0));
    struct tm tm;

    if (!gmtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, len, "@%lld", (long long)(us / 1000000));
}

/* key=value pairs as daemon/audit.c writes them (docs/audit.md). */
static void gap_detail(struct gap_build *g) {
    char oldest[40], newest[40];
    size_t off;
    int k;

    if (g->reason == PRUNE_AGE)
        k = snprintf(g->detail, sizeof g->detail,
                     "reason=\"retention: older than %lld days\" max_age_days=%lld",
                     (long long)g->lim, (long long)g->lim);
    else
        k = snprintf(g->detail, sizeof g->detail,
                     "reason=\"retention: audit.db over its size cap\" max_bytes=%lld",
                     (long long)g->lim);
    off = k > 0 ? (size_t)k : 0;
    for (int kind = AUDIT_KIND_FLOW; kind <= AUDIT_KIND_DNS; kind++) {
        if (!g->n[kind] || off >= sizeof g->detail)
            continue;
        k = snprintf(g->detail + off, sizeof g->detail - off, " %s=%llu", kind_names[kind],
                     (unsigned long long)g->n[kind]);
        off += k > 0 ? (size_t)k : 0;
    }
    fmt_utc(oldest, sizeof oldest, g->oldest);
    fmt_utc(newest, sizeof newest, g->newest);
    if (off < sizeof g->detail)
        snprintf(g->detail + off, sizeof g->detail - off, " oldest=%s newest=%s", oldest, newest);
}

/* Write what pruned counts as GAP records (action "retention", one per
 * reason, limit and uid, at most ADB_GAPS_PER_STEP) and take it out of
 * pruned, when the oldest count is gap_delay_us old, or at once with
 * flush_gaps. In the caller's transaction. */
static int write_gaps(struct audit_db *db, const struct audit_retention *p,
                      struct audit_prune_result *res) {
    _cleanup_free_ struct gap_build *g = NULL;
    _cleanup_free_ struct audit_rec *recs = NULL;
    _cleanup_free_ int64_t *ids = NULL;
    size_t ng = 0;
    bool more = false;
    int64_t since;
    int r, rc;

    {
        _cleanup_reset_ sqlite3_stmt *st = db->stmt[W_PRUNED_DUE];

        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW)
            return sqlu_fail(&db->sq, db->w, rc, "look for uncounted removals");
        if (sqlite3_column_type(st, 0) == SQLITE_NULL)
            return 0;
        since = sqlite3_column_int64(st, 0);
    }
    /* A clock that stepped back must not hold them for as long as it stepped. */
    if (!p->flush_gaps && p->gap_delay_us > 0 && since <= p->now_us &&
        p->now_us - since < p->gap_delay_us) {
        res->gaps_pending = true;
        return 0;
    }
    g = calloc(ADB_GAPS_PER_STEP, sizeof *g);
    recs = calloc(ADB_GAPS_PER_STEP, sizeof *recs);
    ids = calloc(ADB_GAPS_PER_STEP, sizeof *ids);
    if (!g || !recs || !ids)
        return sqlu_errf(&db->sq, -ENOMEM, "retention: out of memory for gap records");
    {
        _cleanup_reset_ sqlite3_stmt *st = db->stmt[W_PRUNED_LIST];

        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            int reason = sqlite3_column_int(st, 0);
            int64_t lim = sqlite3_column_int64(st, 1), n = sqlite3_column_int64(st, 5);
            bool has_uid = sqlite3_column_int64(st, 2) == 1;
            uint32_t uid = (uint32_t)sqlite3_column_int64(st, 3);
            int kind = sqlite3_column_int(st, 4);
            int64_t oldest = sqlite3_column_int64(st, 6), newest = sqlite3_column_int64(st, 7);
            struct gap_build *cur = ng ? &g[ng - 1] : NULL;

            if (kind < AUDIT_KIND_FLOW || kind > AUDIT_KIND_DNS || n <= 0)
                return sqlu_errf(&db->sq, -EBADMSG, "%s: pruned holds kind %d, count %lld",
                                 db->sq.path, kind, (long long)n);
            if (!cur || cur->reason != reason || cur->lim != lim || cur->has_uid != has_uid ||
                cur->uid != uid) {
                if (ng == ADB_GAPS_PER_STEP) {
                    more = true;
                    break;
                }
                cur = &g[ng++];
                *cur = (struct gap_build){ .reason = reason, .lim = lim, .has_uid = has_uid,
                                           .uid = uid, .oldest = oldest, .newest = newest };
            }
            cur->n[kind] += (uint64_t)n;
            if (oldest < cur->oldest)
                cur->oldest = oldest;
            if (newest > cur->newest)
                cur->newest = newest;
        }
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return sqlu_fail(&db->sq, db->w, rc, "read uncounted removals");
    }
    for (size_t i = 0; i < ng; i++) {
        struct audit_rec *rec = &recs[i];

        gap_detail(&g[i]);
        rec->time_us = p->now_us;
        rec->kind = AUDIT_KIND_GAP;
        rec->has_uid = g[i].has_uid;
        rec->uid = g[i].uid;
        snprintf(rec->action, sizeof rec->action, "retention");
        rec->detail = g[i].detail;
        for (int kind = AUDIT_KIND_FLOW; kind <= AUDIT_KIND_DNS; kind++)
            rec->missed += g[i].n[kind];
    }
    r = append_in_transaction(db, recs, ng, ids);
    if (r < 0)
        return r;
    for (size_t i = 0; i < ng; i++) {
        _cleanup_reset_ sqlite3_stmt *st = db->stmt[W_PRUNED_DEL];
        struct wkey k = { .has_uid = g[i].has_uid, .uid = g[i].uid };

        r = bind_key(db, st, &k);
        if (r >= 0)
            r = sqlu_bind_named_i64(&db->sq, st, ":reason", g[i].reason);
        if (r >= 0)
            r = sqlu_bind_named_i64(&db->sq, st, ":lim", g[i].lim);
        if (r >= 0)
            r = sqlu_step_done(&db->sq, st, "clear counted removals");
        if (r < 0)
            return r;
    }
    res->gaps = (unsigned)ng;
    res->first_gap_id = ng ? (uint64_t)ids[0] : 0;
    res->gaps_pending = more;
    return 0;
}

static int prune_in_transaction(struct audit_db *db, const struct audit_retention *p,
                                struct wrow *rows, unsigned max_rows,
                                struct audit_prune_result *res, bool *ret_vacuumed) {
    uint64_t deleted = 0, n = 0;
    int64_t free_pages = 0;
    int r;

    if (p->older_than_us != 0 && max_rows > 0) {
        r = remove_old(db, p, rows, max_rows, &n);
        if (r < 0)
            return r;
        deleted += n;
    }
    if (p->max_bytes != 0 && deleted < max_rows) {
        r = remove_for_size(db, p, rows, max_rows - deleted, &n);
        if (r < 0)
            return r;
        deleted += n;
    }
    r = write_gaps(db, p, res);
    if (r < 0)
        return r;
    /* Hand back at most ADB_VACUUM_SQL's pages per call, so one call stays
     * short. Free pages left over are not lost: appends reuse them first, and
     * the next call with work to do gives more back. */
    r = stmt_int(db, W_FREELIST_COUNT, &free_pages);
    if (r < 0)
        return r;
    if (free_pages > 0) {
        _cleanup_reset_ sqlite3_stmt *st = db->stmt[W_VACUUM];
        int rc;

        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            ;
        if (rc != SQLITE_DONE)
            return sqlu_fail(&db->sq, db->w, rc, "give freed pages back");
    }
    res->deleted = (unsigned)deleted;
    *ret_vacuumed = free_pages > 0;
    return 0;
}

int audit_db_prune(struct audit_db *db, const struct audit_retention *p,
                   struct audit_prune_result *ret) {
    struct audit_prune_result res = { 0 };
    _cleanup_free_ struct wrow *rows = NULL;
    unsigned max_rows;
    bool vacuumed = false;
    int r;

    db->sq.err[0] = '\0';
    if (!p || !ret)
        return sqlu_errf(&db->sq, -EINVAL, "prune: no parameters or no result given");
    max_rows = p->max_rows < ADB_PRUNE_ROWS_MAX ? p->max_rows : ADB_PRUNE_ROWS_MAX;
    if (p->older_than_us == 0 && p->max_bytes == 0)
        max_rows = 0;
    if (max_rows > 0) {
        rows = calloc(max_rows, sizeof *rows);
        if (!rows)
            return sqlu_errf(&db->sq, -ENOMEM, "prune: out of memory for %u rows", max_rows);
    }
    r = begin(db, "begin a prune");
    if (r < 0)
        return r;
    r = prune_in_transaction(db, p, rows, max_rows, &res, &vacuumed);
    if (r >= 0)
        r = commit(db, "commit a prune");
    if (r < 0) {
        rollback(db);
        return r;
    }
    /* In WAL mode the file shrinks when a checkpoint copies the truncation
     * back. PASSIVE never waits; if a reader holds an old snapshot it does
     * what it can, and the next auto-checkpoint finishes. Its failure loses
     * nothing, so it is not the prune's. */
    if (vacuumed)
        (void)sqlite3_wal_checkpoint_v2(db->w, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    *ret = res;
    return 0;
}

int audit_db_explain_heaviest(struct audit_db *db, char *buf, size_t buflen) {
    static const enum adb_stmt which[] = { W_HEAVY_UID, W_HEAVY_SESSION, W_SEL_SESSION,
                                           W_SEL_NOSESSION };
    size_t used = 0;

    db->sq.err[0] = '\0';
    if (!buf || buflen == 0)
        return sqlu_errf(&db->sq, -EINVAL, "explain: no buffer given");
    buf[0] = '\0';
    for (size_t i = 0; i < ARRAY_SIZE(which); i++) {
        _cleanup_finalize_ sqlite3_stmt *st = NULL;
        char sql[1024];
        int r, rc;

        snprintf(sql, sizeof sql, "EXPLAIN QUERY PLAN %s", stmt_sql[which[i]]);
        rc = sqlite3_prepare_v2(db->w, sql, -1, &st, NULL);
        if (rc != SQLITE_OK)
            return sqlu_fail(&db->sq, db->w, rc, "prepare a retention plan");
        r = plan_rows(db, st, buf, buflen, &used, "explain a retention query");
        if (r < 0)
            return r;
    }
    return 0;
}
