#!/bin/bash
# e2e: a compromised protocol process (issue 16). lyhd runs
# tests/e2e/evil_proto.py as its protocol process (--protocol-exe: as user
# _lyhd, no privilege); it runs the real protocol process behind it and
# passes their messages on (so lyh's clients are served), and does what an
# attacker who owns that process would: it takes a session's DNS sockets,
# asks the parent to open addresses for a name the session may not resolve,
# for a session that does not exist, without confirmation, forges audit
# records, and then sends one malformed message (a LAN address for an
# allowed name, a wrong version, a "client" socket of its own making, a
# request in an encoding protobuf-c does not make, a message only the parent
# may send, READY twice, an fd with a message that carries none), a
# different one per instance. Checks, against the real daemon and nftables:
#   1. each malformed message ends that process, lyhd starts another, lyhd
#      itself runs on and every end is on record (guard protocol_exit); an
#      fd it sends for the parent to close is held untouched until its
#      FDS_CLOSED, and closed then
#   2. nothing is installed: no address the hostile requests named is in any
#      set, the ruleset's chains and rules are as before, a session agent
#      probing those addresses (and the LAN) is refused every time; what the
#      parent must allow (an allowed name's public address, the documented
#      worst case) is reachable for that session alone
#   3. nothing is spawned: one session, one session cgroup, no process of
#      _lyhd but the current protocol process
#   4. the hostile requests got their precise refusals (EPERM, ENOENT)
#   4b. a root client's connection the process keeps open after root's lyh
#      ended: a query it sends again on it is not answered (the connection
#      is closed), and root's `lyh audit follow`, killed, is ended by the
#      parent's sweep though the process never says CONN_GONE
#   and, with the session's `lyh run` connected all along: its connection
#   outlives each protocol process (the next one adopts it) and the agent
#   ends 0. Then with lyhd's own protocol process:
#   5. the process that accepts lyh's clients is not root: uid _lyhd,
#      CapEff 0, seccomp mode 2; the parent polls neither the listening
#      socket nor a client's (its epoll set, /proc/PID/fdinfo)
#   6. kill -9 of it during a running session: the session stays guarded
#      (its agent's LAN probes are refused throughout), lyhd starts a new
#      one, `lyh sessions` shows the session, the attached `lyh run` goes on
#      and gets its exit status, and the session's end is on record
#   7. Capabilities on an idle connection is answered by the protocol process
#      (lyhd's parent stopped meanwhile), the same reply as the parent's, in
#      request order, never while a stream of that connection is open; the
#      parent's count of bytes written stays right (same protocol process)
#
# usage: privsep.sh BUILD_DIR     (as root; exits 77 = skipped otherwise)
# Safety: everything happens in the namespaces lib.sh makes.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: privsep.sh needs root"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
lyh_init "${1:-}"

P="lyhdp-$$"
lyh_layout_up "$P" tun0 || lyh_die "network layout"
lyh_user_create || lyh_die "cannot create the test user"
# the user the protocol process runs as (lib.sh removes it if this run made it)
if ! getent passwd _lyhd >/dev/null; then
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
        --user-group _lyhd || lyh_die "cannot create _lyhd"
fi
# an echo server on every address of the exit side (11.77.1.0/24 on its lo):
# an address that got into a set would answer
ip -n "$LYH_EXIT" addr add 11.77.1.0/24 dev lo || lyh_die "exit addresses"
lyh_serve "$LYH_EXIT" 0.0.0.0 7778 || lyh_die "echo server on 7778"

# the evil program where _lyhd can run it, its state where it can write
EVIL=$LYH_TMP/evil
install -d -m 0755 "$EVIL" && install -m 0755 "$HERE/evil_proto.py" "$EVIL/evil_proto.py" &&
    install -m 0755 "$LYH_LYHD" "$EVIL/lyhd" &&
    install -d -o _lyhd -g _lyhd -m 0700 "$EVIL/state" || lyh_die "evil program"
export LYH_EVIL_DIR=$EVIL/state LYH_EVIL_REAL=$EVIL/lyhd
evil_log() { cat "$EVIL/state/log" 2>/dev/null; }
# processes of _lyhd in this run's daemon cgroup (another lyhd on the host
# has its own protocol process)
ours_lyhd() {
    local p
    for p in $(pgrep -u _lyhd); do
        grep -q "/$LYH_P-d" "/proc/$p/cgroup" 2>/dev/null && printf '%s ' "$p"
    done
}
lyh_daemon_start --protocol-exe "$EVIL/evil_proto.py" || lyh_die "lyhd does not start"
install -d -o "$LYH_UID" -g "$LYH_GID" -m 0700 "$LYH_HOME/proj"

# the agent: connects every round to the addresses the hostile requests
# named (and the LAN), prints each that opens; ends when proj/stop appears
cat >"$LYH_HOME/proj/probe.py" <<'PY'
import os, socket, time
addrs = [("11.77.1.93", 7778), ("11.77.1.94", 7778), ("11.77.1.95", 7778), ("11.77.1.96", 7778),
         ("11.77.1.97", 7778), ("11.77.1.98", 7778), ("11.77.1.99", 7778), ("192.168.77.2", 7777)]
rounds, end = 0, time.monotonic() + 100
while not os.path.exists("stop") and time.monotonic() < end:
    rounds += 1
    for a in addrs:
        s = socket.socket(); s.settimeout(0.3)
        try:
            s.connect(a); print("open %s round %d" % (a[0], rounds), flush=True)
        except OSError:
            pass
        s.close()
    time.sleep(0.2)
print("probe done rounds %d" % rounds, flush=True)
PY
chown "$LYH_UID:$LYH_GID" "$LYH_HOME/proj/probe.py"

ruleset() { # the tables' chains, rules and set names (no elements, no counts), as JSON lines
    lyh_in_main nft -j list ruleset 2>/dev/null | /usr/bin/python3 -c '
import json, sys
def strip(x):  # what traffic changes: counters, quota use
    if isinstance(x, dict):
        return {k: 0 if k in ("packets", "bytes", "used") else strip(v) for k, v in x.items()}
    return [strip(i) for i in x] if isinstance(x, list) else x
for o in json.load(sys.stdin)["nftables"]:
    k = next(iter(o))
    if k == "metainfo":
        continue
    v = dict(o[k]); v.pop("handle", None); v.pop("elem", None)
    print(k, json.dumps(strip(v), sort_keys=True))'
}

(LYH_CMD_TIMEOUT=150 lyh_as_user sh -c 'cd proj && exec "$@"' sh "$LYH_LYH" --socket "$LYH_SOCK" \
    run --vpn tun0 --no-tui --dns 10.77.0.2 --allow-domain '*.allowed.test' -- \
    /usr/bin/python3 probe.py </dev/null >"$LYH_TMP/agent.out" 2>&1
 echo "rc=$?" >>"$LYH_TMP/agent.out") &
AGENT=$!
lyh_wait_until 20 eval 'evil_log | grep -q "dns_start"' || t_fail "a session starts" "$(evil_log; cat "$LYH_TMP/agent.out")"
BEFORE=$(ruleset)
SID=$(evil_log | awk '$2 == "dns_start" { print $3; exit }')
echo "# session $SID; the compromised protocol process at work"

# seven instances, one malformed message each (back-off 250 ms doubling)
MODES="lan-address bad-version conn-listener request-non-canonical parent-type ready-twice fd-attached"
lyh_wait_until 90 eval '[ "$(evil_log | grep -c "malformed sent")" -ge 7 ] &&
    [ "$(grep -c "it sent a message that makes no sense" "$LYH_DAEMON_LOG")" -ge 7 ]'
# the eighth only passes messages on and stays
lyh_wait_until 20 eval '[ "$(evil_log | grep -c " mode quiet ")" -ge 1 ]'
sleep 1.5 # the agent's last rounds run against the final state
AFTER=$(ruleset)
ELEMS=$(lyh_in_main nft list ruleset 2>/dev/null)
evil_log | grep -E "instance|malformed|survived|answered" | sed 's/^/    /'

# ---- 1. each malformed message ends the process; lyhd runs on -------------------------
for m in $MODES; do
    pid=$(evil_log | awk -v m="$m" '$2 == "instance" && $5 == m { print $1; exit }')
    t_check "1: $m: the parent ends that protocol process" \
        eval '[ -n "$pid" ] && evil_log | grep -q "^$pid malformed sent $m" &&
              ! evil_log | grep -q "^$pid survived" &&
              lyh_daemon_log_has "protocol process $pid: it sent a message that makes no sense" 1 &&
              lyh_daemon_log_has "protocol process $pid was killed by signal 9" 1'
done
t_check "1: no instance survived its malformed message" eval '! evil_log | grep -q survived'
# fds it sends are the parent's to act on only after its FDS_CLOSED (the
# protocol process's own close is then never the last, which could wait)
t_check "1: the parent holds the fds a message brought until FDS_CLOSED follows it" \
    eval 'evil_log | grep -q "fds: before FDS_CLOSED the parent held the fd"'
t_check "1: ... and closes them then" \
    eval 'evil_log | grep -q "fds: after FDS_CLOSED the parent closed the fd"'
t_check "1: lyhd itself still runs" lyh_alive "$LYH_DAEMON_PID"
t_check "1: ... and a new protocol process was started after the last" \
    eval 'evil_log | grep -q " mode quiet "'
t_check "1: every end is on record (audit kind guard, protocol_exit)" \
    eval '[ "$(lyh_in_main "$LYH_LYH" --socket "$LYH_SOCK" audit query --kind guard --json 2>/dev/null |
               grep -c protocol_exit)" -ge 7 ]'

# ---- 2. nothing is installed ------------------------------------------------------------
t_check "2: no address a hostile request named is in any set (11.77.1.94-99, 192.168.77.2)" \
    eval '! grep -Eq "11\.77\.1\.9[4-9]|192\.168\.77\.2([^0-9]|$)" <<<"$ELEMS"'
t_check "2: the ruleset's tables, chains, rules and sets are as before" \
    eval '[ -n "$BEFORE" ] && diff <(printf "%s\n" "$BEFORE") <(printf "%s\n" "$AFTER")'
t_check "2: the allowed name's public address is in the session's set (the worst case: an allowed name)" \
    eval 'grep -q "11\.77\.1\.93" <<<"$ELEMS"'

# ---- 3. nothing is spawned ----------------------------------------------------------------
PP=$(lyh_proto_pid)
t_check "3: one session, one session cgroup" \
    eval '[ "$(lyh_live_rows)" = 1 ] && [ "$(lyh_cg_sessions | wc -l)" = 1 ]'
PPC=$(cat "/proc/$PP/task/$PP/children" 2>/dev/null | tr -s ' ' | sed 's/ $//')
t_check "3: no process of _lyhd but the current protocol process ($PP) and the real one behind it ($PPC)" \
    eval '[ -n "$PP" ] && [ -n "$PPC" ] && [ "$(ours_lyhd | tr " " "\n" | sort -n | xargs)" = "$(printf "%s\n" $PP $PPC | sort -n | xargs)" ]'

# ---- 4. the hostile requests got precise refusals -------------------------------------
t_check "4: addresses for a name the session may not resolve: EPERM" \
    eval 'evil_log | grep -q "answered req 1 status -1$"'
t_check "4: for a session that does not exist: ENOENT" \
    eval 'evil_log | grep -q "answered req 2 status -2$"'
t_check "4: an allowed name's public address: granted" \
    eval 'evil_log | grep -q "answered req 6 status 0$"'
t_check "4: the parent says why (a name the session may not resolve)" \
    lyh_daemon_log_has "asked to open addresses for 'denied.test', which the session may not resolve" 1
t_check "4: ... and a blocked address" lyh_daemon_log_has "asked to open a blocked address" 1

# ---- 4b. a root client's connection kept open after it left ---------------------------
# The quiet instance holds back the CONN_GONE of root's next connection that
# made a request (evil_proto.py, state/hold). "replay": its query is sent
# again on it once root's lyh has exited; "keep": root's `lyh audit follow`
# is killed and its stream must not run on for nobody.
replay_ended() { evil_log | grep -q " held gone [0-9]* replay$" && [ "$(evil_log | grep -c " held closed ")" -ge 1 ]; }
keep_ended() { evil_log | grep -q " held gone [0-9]* keep$" && [ "$(evil_log | grep -c " held closed ")" -ge 2 ]; }
echo replay >"$EVIL/state/hold"
lyh_in_main "$LYH_LYH" --socket "$LYH_SOCK" status >/dev/null 2>&1
t_check "4b: a query sent again on a root client's connection after it left is not answered" \
    eval 'lyh_wait_until 5 replay_ended && ! evil_log | grep -q " held answered "'
# timeout as the job itself (not a function's subshell): its TERM reaches lyh
timeout -k 5 60 nsenter --net="/run/netns/$LYH_MAIN" "$LYH_LYH" --socket "$LYH_SOCK" audit follow \
    >"$LYH_TMP/follow.out" 2>&1 &
FOLLOW=$!
lyh_track_pid "$FOLLOW"
lyh_wait_until 5 eval '[ -s "$LYH_TMP/follow.out" ]' # it streams: its request reached the parent
echo keep >"$EVIL/state/hold"
kill -TERM "$FOLLOW" 2>/dev/null
wait "$FOLLOW" 2>/dev/null
T4B=$(date +%s%N)
t_check "4b: root's AuditFollow whose client left is ended by the parent, though the protocol process keeps it open" \
    lyh_wait_until 5 keep_ended
echo "# the stream ended $((($(date +%s%N) - T4B) / 1000000)) ms after its client"
evil_log | grep " held " | sort | uniq -c | sed 's/^/    /'
rm -f "$EVIL/state/hold"

# the agent: every probe of a refused address failed, the allowed one opened
touch "$LYH_HOME/proj/stop"
wait "$AGENT" 2>/dev/null
grep -E "probe done|rc=" "$LYH_TMP/agent.out" | sed 's/^/    /'
t_check "2: the agent ran through it all and ended 0 (its lyh run connected through 8 protocol processes)" \
    eval 'grep -qx "rc=0" "$LYH_TMP/agent.out" && grep -q "^probe done" "$LYH_TMP/agent.out"'
t_check "2: ... it never reached an address a hostile request named, nor the LAN" \
    eval '! grep -Eq "^open (11\.77\.1\.9[4-9]|192\.168\.77\.2) " "$LYH_TMP/agent.out"'
t_check "2: ... and reached the allowed name's address (the probe works)" \
    eval 'grep -q "^open 11\.77\.1\.93 " "$LYH_TMP/agent.out"'

lyh_daemon_stop
t_check "lyhd's stop ends its protocol process too" lyh_wait_until 5 eval '[ -z "$(ours_lyhd)" ]'
lyh_daemon_check_log

# ---- 5. lyhd's own protocol process holds the clients ------------------------------------
lyh_daemon_start || lyh_die "lyhd (its own protocol process) does not start"
rm -f "$LYH_HOME/proj/stop"
PP=$(lyh_proto_pid)
status_of() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }
# the socket inode of lyhd's listening socket, and which processes hold it
# (lyhd binds through its directory's fd: the address reads /proc/self/fd/N/NAME)
SNAME=${LYH_SOCK##*/}
LINODE=$(lyh_in_main ss -xlH 2>/dev/null | awk -v n="/$SNAME" 'substr($5, length($5) - length(n) + 1) == n { print $6; exit }')
holders() { # PIDS holding socket inode $1
    local p f
    for p in "$LYH_DAEMON_PID" $(cat "/proc/$LYH_DAEMON_PID/task/$LYH_DAEMON_PID/children" 2>/dev/null); do
        for f in /proc/$p/fd/*; do
            [ "$(readlink "$f" 2>/dev/null)" = "socket:[$1]" ] && { echo "$p ${f##*/}"; break; }
        done
    done
}
polled() { # does PID's epoll set hold fd N
    grep -hs "^tfd: *$2 " /proc/"$1"/fdinfo/* | grep -q .
}
echo "# listening socket inode $LINODE, held by (pid fd): $(holders "$LINODE" | xargs)"
PFD=$(holders "$LINODE" | awk -v p="$LYH_DAEMON_PID" '$1 == p { print $2 }')
QFD=$(holders "$LINODE" | awk -v p="$PP" '$1 == p { print $2 }')
t_check "5: the protocol process ($PP) holds the listening socket and polls it" \
    eval '[ -n "$LINODE" ] && [ -n "$QFD" ] && polled "$PP" "$QFD"'
t_check "5: ... as _lyhd, CapEff 0, seccomp mode 2" \
    eval '[ "$(status_of "$PP" Uid)" = "$(id -u _lyhd)" ] && [ "$(status_of "$PP" CapEff)" = 0000000000000000 ] && [ "$(status_of "$PP" Seccomp)" = 2 ]'
t_check "5: the parent keeps a copy for the next one (fd $PFD) and never polls it" \
    eval '[ -n "$PFD" ] && ! polled "$LYH_DAEMON_PID" "$PFD"'

# an agent that probes the LAN every round and stops when proj/stop appears
cat >"$LYH_HOME/proj/lan.py" <<'PY'
import os, socket, time
rounds, opened, end = 0, 0, time.monotonic() + 100
while not os.path.exists("stop") and time.monotonic() < end:
    rounds += 1
    s = socket.socket(); s.settimeout(0.3)
    try:
        s.connect(("192.168.77.2", 7777)); opened += 1
    except OSError:
        pass
    s.close()
    time.sleep(0.1)
print("lan rounds %d opened %d" % (rounds, opened), flush=True)
PY
chown "$LYH_UID:$LYH_GID" "$LYH_HOME/proj/lan.py"
(LYH_CMD_TIMEOUT=150 lyh_as_user sh -c 'cd proj && exec "$@"' sh "$LYH_LYH" --socket "$LYH_SOCK" \
    run --vpn tun0 --no-tui -- /usr/bin/python3 lan.py </dev/null >"$LYH_TMP/lan.out" 2>&1
 echo "rc=$?" >>"$LYH_TMP/lan.out") &
LAN_AGENT=$!
lyh_wait_until 20 eval '[ "$(lyh_live_rows)" = 1 ]' || t_fail "5: a session starts" "$(cat "$LYH_TMP/lan.out")"
CINODE=$(lyh_in_main ss -xH 2>/dev/null | awk -v n="/$SNAME" -v l="$LINODE" 'substr($5, length($5) - length(n) + 1) == n && $6 != l { print $6 }' | head -n 1)
CPFD=$(holders "$CINODE" | awk -v p="$LYH_DAEMON_PID" '$1 == p { print $2 }')
t_check "5: the parent polls no client connection either (its copy, fd $CPFD)" \
    eval '[ -n "$CPFD" ] && ! polled "$LYH_DAEMON_PID" "$CPFD"'
# the spawner (daemon/spawner.c): a root child of lyhd's that forked the agent as
# lyhd's child; lyhd never fell back to forking it itself
SPW=$(for p in $(cat "/proc/$LYH_DAEMON_PID/task/$LYH_DAEMON_PID/children" 2>/dev/null); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "--spawner" && echo "$p"; done | head -n 1)
AGENT=$(for p in /proc/[0-9]*; do
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q "^/usr/bin/python3 lan.py" && echo "${p#/proc/}"; done | head -n 1)
t_check "5: lyhd's spawner ($SPW) runs as root and forked the agent ($AGENT) as lyhd's child" \
    eval '[ -n "$SPW" ] && [ "$(status_of "$SPW" Uid | cut -f1)" = 0 ] && [ -n "$AGENT" ] &&
          [ "$(status_of "$AGENT" PPid)" = "$LYH_DAEMON_PID" ] && ! grep -q "launches fork from lyhd" "$LYH_DAEMON_LOG"'

# ---- 6. kill -9 of the protocol process during the session --------------------------------
kill -KILL "$PP"
lyh_wait_until 20 eval 'NPP=$(lyh_proto_pid) && [ -n "$NPP" ] && [ "$NPP" != "$PP" ]'
NPP=$(lyh_proto_pid)
t_check "6: lyhd runs on and started a new protocol process ($PP -> $NPP)" \
    eval 'lyh_alive "$LYH_DAEMON_PID" && [ -n "$NPP" ] && [ "$NPP" != "$PP" ]'
t_check "6: lyh sessions shows the session" \
    eval 'lyh_wait_until 10 eval "\"\$LYH_LYH\" --socket \"\$LYH_SOCK\" sessions 2>/dev/null | grep -q python3"'
t_check "6: the session's lyh run is still attached (its client did not end)" eval 'kill -0 "$LAN_AGENT" && ! grep -q "^rc=" "$LYH_TMP/lan.out"'
touch "$LYH_HOME/proj/stop"
wait "$LAN_AGENT" 2>/dev/null
sed 's/^/    /' "$LYH_TMP/lan.out"
t_check "6: the agent ran on and lyh run got its exit status 0" \
    eval 'grep -qx "rc=0" "$LYH_TMP/lan.out" && grep -q "^lan rounds" "$LYH_TMP/lan.out"'
t_check "6: the session stayed guarded: no LAN probe opened" eval 'grep -q "^lan rounds [0-9]* opened 0$" "$LYH_TMP/lan.out"'
on_record() { # KIND PATTERN: a record of that kind matching it
    "$LYH_LYH" --socket "$LYH_SOCK" audit query --kind "$1" --json 2>/dev/null | grep -q "$2"
}
t_check "6: the protocol process's end and the session's end are on record" \
    eval 'on_record guard protocol_exit && lyh_wait_until 10 on_record session "\"action\":\"end\""'

# ---- 7. Capabilities answered by the protocol process on an idle connection ---------------
# caps_local.py stops lyhd's parent (SIGSTOP, by the pid this script started)
# for moments: what is answered meanwhile the protocol process answered.
PP=$(lyh_proto_pid)
CAPS_OUT=$(LYH_CMD_TIMEOUT=60 lyh_in_main /usr/bin/python3 "$HERE/caps_local.py" "$LYH_SOCK" "$LYH_DAEMON_PID" 2>&1)
CAPS_RC=$?
kill -CONT "$LYH_DAEMON_PID" 2>/dev/null # whatever became of the script
sed 's/^/    /' <<<"$CAPS_OUT"
t_check "7: Capabilities on an idle connection is answered without the parent, the same reply, in order, never past a stream" \
    eval '[ "$CAPS_RC" = 0 ] && [ "$(grep -c "^ok " <<<"$CAPS_OUT")" -ge 10 ] && ! grep -q "^FAIL" <<<"$CAPS_OUT"'
t_check "7: ... and the protocol process is the same one throughout ($PP)" \
    eval '[ -n "$PP" ] && [ "$(lyh_proto_pid)" = "$PP" ] && lyh_alive "$LYH_DAEMON_PID"'
# a connection adopted by the next protocol process (caps_local.py kills this one)
CAPS_OUT=$(LYH_CMD_TIMEOUT=60 lyh_in_main /usr/bin/python3 "$HERE/caps_local.py" "$LYH_SOCK" "$LYH_DAEMON_PID" "$PP" 2>&1)
CAPS_RC=$?
kill -CONT "$LYH_DAEMON_PID" 2>/dev/null
sed 's/^/    /' <<<"$CAPS_OUT"
t_check "7: on a connection adopted after the protocol process died, Capabilities is still never answered past a stream" \
    eval '[ "$CAPS_RC" = 0 ] && [ "$(grep -c "^ok " <<<"$CAPS_OUT")" = 4 ] && ! grep -q "^FAIL" <<<"$CAPS_OUT"'
t_check "7: ... and a new protocol process runs" \
    lyh_wait_until 10 eval 'N=$(lyh_proto_pid) && [ -n "$N" ] && [ "$N" != "$PP" ]'

# ---- 7b. the agent the spawner made ---------------------------------------------------
# On x86_64 the spawner's child shares its memory until its exec, and makes
# itself not dumpable for its uid drop (security-model.md, "The child shares
# the spawner's memory"); the exec must give the agent back what any program
# of its user has: dumpable (PR_GET_DUMPABLE, 3, reads 1), and its own
# command found through its own PATH.
DUMP=$(LYH_CMD_TIMEOUT=30 lyh_as_user sh -c 'cd proj && exec "$@"' sh "$LYH_LYH" --socket "$LYH_SOCK" \
    run --vpn tun0 --no-tui -- python3 -c 'import ctypes; print("dumpable", ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))' \
    </dev/null 2>&1)
t_check "7b: the agent is dumpable as any program of its user, found through its PATH ($(grep -m1 dumpable <<<"$DUMP"))" \
    eval 'grep -qx "dumpable 1" <<<"$DUMP"'

# ---- 8. a session's end does not wait for the spawner ------------------------------------
# A tmpdir with something in it is emptied by a remover asked of the spawner,
# its answer taken by the loop when it comes (spawner_remove_tree_async). With
# the spawner stopped (SIGSTOP, by the pid lyhd's children list gives: a child
# of the daemon this script started), three sessions that each leave a file
# in their /tmp end: lyhd answers at once all the same (it used to wait up to
# 5 s per session for the answer), and when it gives the spawner up (no
# answer in 5 s) each tmpdir is emptied by a fork of lyhd's and each end is
# recorded. Later launches fork from lyhd. (A session that leaves nothing
# needs a remover too: its rmdirs may wait on a lock its user holds,
# hardening.sh 12.)
spawner_pid() {
    for p in $(cat "/proc/$LYH_DAEMON_PID/task/$LYH_DAEMON_PID/children" 2>/dev/null); do
        tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "--spawner" && echo "$p"
    done | head -n 1
}
SPW=$(spawner_pid)
rm -f "$LYH_HOME/proj/end8"
E8=()
for i in 1 2 3; do
    (LYH_CMD_TIMEOUT=90 lyh_as_user sh -c 'cd proj && exec "$@"' sh "$LYH_LYH" --socket "$LYH_SOCK" \
        run --vpn tun0 --no-tui -- /bin/sh -c 'echo left >/tmp/left8; i=0; while [ ! -e end8 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done' \
        </dev/null >"$LYH_TMP/end8.$i" 2>&1
     echo "rc=$?" >>"$LYH_TMP/end8.$i") &
    E8+=("$!")
    lyh_track_pid "$!"
done
if ! lyh_wait_until 30 eval '[ "$(lyh_live_rows)" = 3 ] && [ "$(lyh_tmpdirs | wc -l)" = 3 ]' || [ -z "$SPW" ]; then
    t_fail "8: three sessions run (spawner ${SPW:-not found})" "$(cat "$LYH_TMP"/end8.* 2>/dev/null | head -c 600)"
else
    N8=$(grep -c " ended (exit" "$LYH_DAEMON_LOG")
    kill -STOP "$SPW"
    T8=$(date +%s%N)
    touch "$LYH_HOME/proj/end8"
    for p in "${E8[@]}"; do lyh_wait_pid_gone 30 "$p"; done
    ok8=$(grep -lx 'rc=0' "$LYH_TMP"/end8.* 2>/dev/null | wc -l)
    t_eq "8: the three agents ended and their lyh run got status 0" "$ok8" 3
    # the teardowns ask the stopped spawner for their removers now; Status,
    # asked again and again meanwhile, must never wait for them (before, the
    # loop waited up to 5 s for each answer)
    max8=0 bad8=0
    for i in 1 2 3 4 5 6 7 8; do
        t0=$(date +%s%N)
        timeout 4 "$LYH_LYH" --socket "$LYH_SOCK" status >/dev/null 2>&1 || bad8=$((bad8 + 1))
        ms=$((($(date +%s%N) - t0) / 1000000))
        [ "$ms" -gt "$max8" ] && max8=$ms
        sleep 0.2
    done
    t_check "8: with the spawner stopped while three sessions end, lyhd answers Status at once (8 calls, slowest ${max8} ms)" \
        eval '[ "$bad8" = 0 ] && [ "$max8" -lt 2000 ]'
    t_check "8: ... the ends are under way: logged, rows not ended yet" \
        eval '[ "$(grep -c " ended (exit" "$LYH_DAEMON_LOG")" -ge $((N8 + 3)) ] && [ "$(lyh_live_rows)" = 3 ]'
    t_check "8: ... the three tmpdirs are still there (their removers are owed)" \
        eval '[ "$(lyh_tmpdirs | wc -l)" = 3 ]'
    t_check "8: lyhd gives the spawner up when it does not answer" \
        lyh_daemon_log_has "the spawner did not answer in time" 15
    t_check "8: ... the tmpdirs are emptied all the same, and every end is recorded" \
        lyh_wait_until 15 eval '[ -z "$(lyh_tmpdirs)" ] && [ "$(lyh_live_rows)" = 0 ]'
    t_check "8: ... the spawner is gone ($SPW)" lyh_wait_until 5 eval '[ ! -e "/proc/$SPW" ] || grep -q "^State:.*Z" "/proc/$SPW/status"'
    echo "# spawner stopped to everything removed: $((($(date +%s%N) - T8) / 1000000)) ms"
    t_check "8: a launch after that forks from lyhd and runs" \
        eval 'LYH_CMD_TIMEOUT=30 lyh_as_user "$LYH_LYH" --socket "$LYH_SOCK" run --vpn tun0 --no-tui -- /bin/sh -c "echo left >/tmp/left8" </dev/null >/dev/null 2>&1'
    # with no spawner to ask, its tmpdir's job forks its own remover on a
    # turn of its own (spawner_remove_tree_async never forks)
    t_check "8: ... and its end, with no spawner, empties its tmpdir and is recorded" \
        lyh_wait_until 15 eval '[ -z "$(lyh_tmpdirs)" ] && [ "$(lyh_live_rows)" = 0 ]'
    kill -CONT "$SPW" 2>/dev/null
fi
lyh_daemon_stop
lyh_daemon_check_log

# ---- 9. a protocol process that never says READY is ended, and the next one serves -----------
# The program lyhd runs as its protocol process: lyhd itself, but for its
# second start, which only sleeps (as a start stuck in its exec or set-up
# would: pproc_tick's READY deadline). The restart comes from the spawner.
cat >"$EVIL/mute.sh" <<EOS
#!/bin/sh
n=\$(cat "$EVIL/state/mute.n" 2>/dev/null || echo 0)
echo \$((n + 1)) >"$EVIL/state/mute.n"
[ "\$n" = 1 ] && exec sleep 600
exec "$EVIL/lyhd" "\$@"
EOS
chmod 0755 "$EVIL/mute.sh"
rm -f "$EVIL/state/mute.n"
lyh_daemon_start --protocol-exe "$EVIL/mute.sh" || lyh_die "lyhd with mute.sh does not start"
PP=$(lyh_proto_pid)
[ -n "$PP" ] || lyh_die "no protocol process to kill"
T9=$(date +%s)
kill -KILL "$PP"
t_check "9: a start that never says READY is ended after 30 s" \
    lyh_daemon_log_has "did not say it was ready in time" 45
t_check "9: ... and the next one serves (the mute one would sleep 600 s)" \
    lyh_wait_until 20 eval 'timeout 3 "$LYH_LYH" --socket "$LYH_SOCK" capabilities >/dev/null 2>&1'
T9=$(($(date +%s) - T9))
t_check "9: ... within 60 s of the kill (${T9} s)" test "$T9" -lt 60
t_eq "9: ... three starts in all (the first, the mute one, the next)" "$(cat "$EVIL/state/mute.n" 2>/dev/null)" 3
lyh_daemon_stop
lyh_daemon_check_log
t_done
