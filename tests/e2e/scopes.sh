#!/usr/bin/env bash
# e2e: the shared scopes of the egress guard, with the real lyhd in test namespaces.
#   1. the shared-user firewall: lyh install / uninstall and lyh run --shared-user-firewall
#      (LYH-U-<uid>: every socket of the user leaves only through tun0, inside lyh or not)
#   2. the per-user fallback without cgroup v2 (lyhd --no-cgroup: LYH-<uid>, uid + guard
#      gid, shared by the user's concurrent sessions, which must agree on their rules)
#   3. the reaper: a shared chain flushed by hand is rebuilt at restart; a chain state.db
#      does not know is removed
# usage: scopes.sh BUILD_DIR        (root; exit 77 = skipped)
set -u
# shellcheck source=tests/e2e/lib.sh
. "$(dirname "$0")/lib.sh"

lyh_init "${1:-}"
lyh_layout_up "lyhtest-sc-$$" || lyh_die "namespace layout"
lyh_user_create || lyh_die "test user"

lan() { lyh_probe_as "$LYH_UID" "$LYH_GID" tcp 192.168.77.2 "$LYH_PORT" 2000; }
vpn() { lyh_probe_as "$LYH_UID" "$LYH_GID" tcp 11.77.0.1 "$LYH_PORT" 2000; }
chains() { lyh_nft list table inet lianyaohu 2>/dev/null | awk '$1 == "chain" { print $2 }' | tr '\n' ' '; }
guard_rows() { sqlite3 -cmd '.timeout 5000' "$LYH_DB" 'select chain || ":" || refcount from guards' 2>&1 | tr '\n' ' '; }
expect() { # NAME GOT-PREFIX CMD...: PASS when the output of CMD starts with GOT-PREFIX
    local name=$1 want=$2 got
    shift 2
    got=$("$@" 2>&1)
    case $got in "$want"*) t_pass "$name" ;; *) t_fail "$name" "got: $got" ;; esac
}

# ---- 1. shared-user firewall ---------------------------------------------------------
lyh_daemon_start || lyh_die "lyhd"
expect "before install: the user's own process reaches the LAN" "ok" lan
out=$(lyh_cli install --vpn tun0 2>&1)
case $out in *"LYH-U-$LYH_UID"*"1 reference"*) t_pass "install: chain LYH-U-$LYH_UID, 1 reference" ;;
    *) t_fail "install" "$out" ;; esac
expect "after install: a plain process of the user is refused the LAN" "refused" lan
expect "after install: a plain process of the user reaches the VPN side" "ok" vpn
expect "another uid is untouched" "ok" lyh_probe_as 65534 65534 tcp 192.168.77.2 "$LYH_PORT" 2000
out=$(lyh_cli install --vpn tun0 --lan-allow 192.168.77.2 2>&1)
rc=$?
case "$rc:$out" in 1:*"other rules"*) t_pass "install with other rules refused" ;;
    *) t_fail "install with other rules refused" "rc=$rc $out" ;; esac
t_eq "guard row refcount 1" "$(guard_rows)" "LYH-U-$LYH_UID:1 "

agent=$(lyh_user_install /bin/sleep sleep) || lyh_die "install agent"
LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui --shared-user-firewall -- "$agent" 3 \
    </dev/null >"$LYH_TMP/shared-run.out" 2>&1 &
run_pid=$!
lyh_track_pid "$run_pid"
if lyh_wait_until 10 sh -c "sqlite3 -cmd '.timeout 2000' '$LYH_DB' 'select refcount from guards' | grep -qx 2"; then
    t_pass "a shared session takes a second reference"
else
    t_fail "a shared session takes a second reference" "$(guard_rows)"
fi
out=$(lyh_cli uninstall 2>&1)
rc=$?
case "$rc:$out" in 1:*"running session"*) t_pass "uninstall refused while a session runs" ;;
    *) t_fail "uninstall refused while a session runs" "rc=$rc $out" ;; esac
wait "$run_pid"
t_eq "shared session exit status" "$?" "0"
lyh_wait_until 5 sh -c "sqlite3 -cmd '.timeout 2000' '$LYH_DB' 'select refcount from guards' | grep -qx 1" ||
    true
t_eq "the session's reference is dropped at its end" "$(guard_rows)" "LYH-U-$LYH_UID:1 "

# ---- 1b. a session cannot get the user's own loopback connections refused ------------
# A session's flow through lo carries its mark, and chain input refuses it towards a
# host service it did not list; the conntrack entry stays. A host packet with the same
# addresses and ports joins that entry: chain output gives it back (clears the mark)
# before chain input judges it. The user-wide chain's dispatch sits at the head of
# output, ahead of that rule: its first rule must do the same, or the user's own
# connection from that port is refused as the session's.
HPORT=19$((RANDOM % 900 + 100)) SPORT=$((HPORT + 20))
# Sessions may listen here (else nothing is marked and there is nothing to plant).
t_check "1b: lyhd reports the listeners feature" \
    sh -c "'$LYH_LYH' --socket '$LYH_SOCK' capabilities | grep -q '^features:.* listeners\b'"
lyh_serve "$LYH_MAIN" 127.0.0.1 "$HPORT" || t_fail "1b: a host service on 127.0.0.1:$HPORT" "did not start"
fp=$(lyh_user_install "$(dirname "$0")/from_port.py" from_port.py) || lyh_die "install from_port.py"
# The session stays while the user connects: its chain lo-<id> judges what carries its mark.
done_f=$(dirname "$fp")/plant.done
# Its exit status: the script's, and 9 if it never saw the done file.
LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui -- /bin/sh -c "/usr/bin/python3 $fp $HPORT $SPORT plant
    rc=\$?; i=0; while [ ! -e $done_f ] && [ \$i -lt 300 ]; do sleep 0.1; i=\$((i + 1)); done
    [ -e $done_f ] && exit \$rc; exit 9" </dev/null >"$LYH_TMP/plant.out" 2>&1 &
plant_pid=$!
lyh_track_pid "$plant_pid"
lyh_wait_until 15 grep -q "^tcp " "$LYH_TMP/plant.out"
t_check "1b: the session's UDP and TCP from port $SPORT to the host service are refused ($(grep -E '^(udp|tcp) ' "$LYH_TMP/plant.out" | tr '\n' ' '))" \
    eval 'grep -q "^udp error .*No route to host" "$LYH_TMP/plant.out" &&
          grep -q "^tcp error .*Connection refused" "$LYH_TMP/plant.out"'
lyh_check_host_from_port "1b: from the same port the user's own process still reaches it while the session runs" \
    "$fp" "$HPORT" "$SPORT"
touch "$done_f"
wait "$plant_pid"
t_eq "1b: the session ends, having seen the user's try" "$?" 0

# ---- 3a. reaper: a flushed shared chain is rebuilt, an unknown chain removed -----------
lyh_daemon_stop || true
lyh_nft flush chain inet lianyaohu "LYH-U-$LYH_UID"
lyh_nft delete chain inet lianyaohu "LYH-U-$LYH_UID" 2>/dev/null ||
    lyh_nft delete table inet lianyaohu
lyh_nft add table inet lianyaohu 2>/dev/null
lyh_nft add chain inet lianyaohu LYH-U-4242 2>/dev/null
lyh_daemon_start || lyh_die "lyhd restart"
case " $(chains) " in *" LYH-U-$LYH_UID "*) t_pass "restart rebuilt the missing shared chain" ;;
    *) t_fail "restart rebuilt the missing shared chain" "chains: $(chains)" ;; esac
case " $(chains) " in *" LYH-U-4242 "*) t_fail "unknown chain LYH-U-4242 reaped" "chains: $(chains)" ;;
    *) t_pass "unknown chain LYH-U-4242 reaped" ;; esac
expect "after the rebuild the user is still refused the LAN" "refused" lan

out=$(lyh_cli uninstall 2>&1)
case $out in *"removed"*) t_pass "uninstall removes the last reference" ;; *) t_fail "uninstall" "$out" ;; esac
case " $(chains) " in *" LYH-U-"*) t_fail "no LYH-U chain left" "chains: $(chains)" ;;
    *) t_pass "no LYH-U chain left" ;; esac
t_eq "no guard row left" "$(guard_rows)" ""
expect "after uninstall the user reaches the LAN again" "ok" lan
out=$(lyh_cli uninstall 2>&1)
case $out in *"no shared firewall is installed"*) t_pass "uninstall with nothing installed: said so" ;;
    *) t_fail "uninstall with nothing installed" "$out" ;; esac
lyh_daemon_stop || t_fail "lyhd stop" "exit status"

# ---- 2. per-user fallback without cgroup v2 ------------------------------------------
lyh_daemon_start --no-cgroup || lyh_die "lyhd --no-cgroup"
probe=$(lyh_user_install "$LYH_PROBE_TOOL" probe) || lyh_die "install probe"
LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui -- "$agent" 30 </dev/null >"$LYH_TMP/fb1.out" 2>&1 &
fb1=$!
lyh_track_pid "$fb1"
if lyh_wait_until 10 sh -c "sqlite3 -cmd '.timeout 2000' '$LYH_DB' \"select chain from guards\" | grep -qx LYH-$LYH_UID"; then
    t_pass "fallback: the session uses chain LYH-$LYH_UID"
else
    t_fail "fallback: the session uses chain LYH-$LYH_UID" "$(guard_rows)"
fi
case " $(chains) " in *" s-"*) t_fail "fallback: no per-session chain" "$(chains)" ;;
    *) t_pass "fallback: no per-session chain" ;; esac
out=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui -- "$probe" probe tcp 192.168.77.2 "$LYH_PORT" 2000 </dev/null 2>&1)
case $out in *refused*) t_pass "fallback: a concurrent session with the same rules runs, LAN refused" ;;
    *) t_fail "fallback: concurrent session, LAN refused" "$out" ;; esac
out=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui -- "$probe" probe tcp 11.77.0.1 "$LYH_PORT" 2000 </dev/null 2>&1)
case $out in *ok*) t_pass "fallback: the VPN side is reachable" ;; *) t_fail "fallback: VPN side" "$out" ;; esac
out=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui --lan-allow 192.168.77.2 -- "$agent" 0 </dev/null 2>&1)
rc=$?
case "$rc:$out" in 125:*"other rules"*) t_pass "fallback: a concurrent session with other rules is refused" ;;
    *) t_fail "fallback: other rules refused" "rc=$rc $out; first session: $(cat "$LYH_TMP/fb1.out"); lyhd: $(tail -n 8 "$LYH_DAEMON_LOG")" ;; esac
# SIGTERM to lyh itself (not to the shell around it) is forwarded to the
# session with the Signal RPC; the agent ends and lyh exits 128+15.
lyh_pid=$(pgrep -u "$LYH_UID" -x -f "$LYH_LYH --socket $LYH_SOCK run --vpn tun0 --no-tui -- $agent 30" | head -n 1)
[ -n "$lyh_pid" ] && kill -TERM "$lyh_pid"
wait "$fb1"
t_eq "fallback: lyh forwards SIGTERM (exit 128+15)" "$?" "143"
lyh_wait_until 5 sh -c "[ -z \"\$(sqlite3 -cmd '.timeout 2000' '$LYH_DB' 'select chain from guards')\" ]" || true
if [ -z "$(guard_rows)" ]; then
    t_pass "fallback: the chain goes with the last session"
else
    t_fail "fallback: the chain goes with the last session" "rows: $(guard_rows)"; tail -n 8 "$LYH_DAEMON_LOG" >&2
fi
case " $(chains) " in *" LYH-$LYH_UID "*) t_fail "fallback: chain removed" "$(chains)" ;;
    *) t_pass "fallback: chain removed" ;; esac
expect "fallback: a guard-gid process outside any session cannot send" "refused" \
    lyh_probe_as "$LYH_UID" "$LYH_GUARD_GID" tcp 11.77.0.1 "$LYH_PORT" 2000
lyh_daemon_stop || t_fail "lyhd stop" "exit status"

t_done
exit $?
