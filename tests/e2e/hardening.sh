#!/usr/bin/env bash
# End-to-end checks of lyhd's hardening (issue 14): what a local user or a
# crash could otherwise leave behind or take from other users.
#
# usage: hardening.sh BUILD_DIR     (as root; exits 77 = skipped otherwise)
#
# The network, the daemon, the users and every safety rule come from lib.sh
# (read its header): lyhd and every session live in the namespace <p>-main;
# traffic goes only to the namespaces' own addresses.
#
# Prints one PASS/FAIL line per check and "N passed, M failed"; exits 1 if any
# check failed.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: hardening.sh needs root"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
lyh_init "${1:-}"

P="lyhth-$$"
lyh_layout_up "$P" tun0 || lyh_die "network layout"
lyh_user_create || lyh_die "cannot create the test user"
lyh_daemon_start || lyh_die "lyhd does not start"

# last_sid: the newest session id in state.db.
last_sid() {
    sqlite3 -cmd '.timeout 5000' "$LYH_DB" 'select id from sessions order by started_ms desc, rowid desc limit 1'
}

# ---- 1. tmpdirs of sessions that are over --------------------------------------------

echo "# 1. tmpdirs of ended sessions are removed at startup"
lyh_cli run --vpn tun0 --no-tui -- /bin/true </dev/null >/dev/null 2>"$LYH_TMP/t1.err"
t_eq "1: a session runs and ends" "$?" 0
sid=$(last_sid)
lyh_wait_until 5 eval '[ -z "$(lyh_tmpdirs)" ]'
t_eq "1: its tmpdir is gone when it ends" "$(lyh_tmpdirs)" ""
t_eq "1: ... and only then its row says ENDED" \
    "$(sqlite3 -cmd '.timeout 5000' "$LYH_DB" "select state from sessions where id='$sid'")" 4
# What a crash between the end and the removal left (the row says ENDED, the
# directory with a file the agent wrote is still there), what an agent could
# plant (guard gid, no session), and things that are not ours.
ended=$LYH_TMPDIR/lyh-$sid
unknown=$LYH_TMPDIR/lyh-0123456789abcdef
usergid=$LYH_TMPDIR/lyh-fedcba9876543210
notours=$LYH_TMPDIR/lyh-notanidatall1234
install -d -o "$LYH_UID" -g "$LYH_GUARD_GID" -m 0700 "$ended" "$unknown" "$ended/sub"
echo work >"$ended/sub/file"
chown -R "$LYH_UID:$LYH_GUARD_GID" "$ended"
install -d -o "$LYH_UID" -g "$LYH_GID" -m 0700 "$usergid"
install -d -o "$LYH_UID" -g "$LYH_GUARD_GID" -m 0700 "$notours"
ln -s "$LYH_HOME" "$LYH_TMPDIR/lyh-aaaaaaaaaaaaaaaa"
lyh_daemon_stop
lyh_daemon_start || lyh_die "lyhd does not restart"
if lyh_wait_until 5 test ! -e "$ended"; then t_pass "1: tmpdir of an ENDED session removed at startup"; else t_fail "1: tmpdir of an ENDED session removed at startup" "$(ls -la "$ended")"; fi
if lyh_wait_until 5 test ! -e "$unknown"; then t_pass "1: guard-gid tmpdir unknown to state.db removed"; else t_fail "1: guard-gid tmpdir unknown to state.db removed"; fi
t_check "1: a lyh-<id> dir with the user's own gid is left alone" test -d "$usergid"
t_check "1: a dir not named lyh-<16 hex> is left alone" test -d "$notours"
t_check "1: a symlink named like a tmpdir is left alone" test -L "$LYH_TMPDIR/lyh-aaaaaaaaaaaaaaaa"
t_check "1: ... and what it points to too" test -d "$LYH_HOME"
t_check "1: the removal is logged" grep -q "removing $ended: its session is over" "$LYH_DAEMON_LOG"
rm -rf "$usergid" "$notours" "$LYH_TMPDIR/lyh-aaaaaaaaaaaaaaaa"

# ---- 2. the cgroup subtree removed under lyhd -------------------------------------

echo "# 2. a vanished cgroup subtree is created again"
# Another lyhd sharing lyhd's cgroup (or an admin) removes the empty subtree.
lyh_wait_until 5 eval '[ -z "$(lyh_cg_sessions)" ]'
t_check "2: the subtree is removed while no session runs" rmdir "$LYH_CGBASE"
lyh_cli run --vpn tun0 --no-tui -- /bin/sh -c 'sed -n "s/^0:://p" /proc/self/cgroup' \
    </dev/null >"$LYH_TMP/t2.out" 2>"$LYH_TMP/t2.err"
rc=$?
t_eq "2: the next launch works" "$rc" 0
t_check "2: ... in a session cgroup under the recreated subtree" grep -q "/lyh/$(last_sid)\$" "$LYH_TMP/t2.out"
t_check "2: lyhd logs that it created the subtree again" \
    grep -q "cgroup subtree .* had been removed by someone else; created it again" "$LYH_DAEMON_LOG"
sleep 0.5 # the audit batch
t_check "2: the audit log has a guard record of it" \
    sh -c "'$LYH_LYH' --socket '$LYH_SOCK' audit query --kind guard --json | grep rebuilt | grep -q 'cgroup subtree'"

lyh_daemon_stop
t_done
