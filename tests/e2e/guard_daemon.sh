#!/usr/bin/env bash
# End-to-end test of the egress guard as lyhd runs it: `lyh run --vpn tun0`
# sessions of an unprivileged user, their nftables chains and cgroups, the
# route preflight, and lyhd's startup reconciliation after crashes, restarts
# and tampering.
#
# usage: guard_daemon.sh BUILD_DIR     (as root; exits 77 = skipped otherwise)
#
# The network, the daemon, the user and every safety rule come from lib.sh
# (read its header): the daemon and all sessions live in the network namespace
# <p>-main only, every nft call names that namespace, and traffic goes only to
# the namespaces' own addresses:
#   VPN (tun0):  11.77.0.1 and 2a0e:77::2 in <p>-exit   -> must work
#   LAN (eth0):  192.168.77.2, fd77::2 in <p>-lan       -> refused at once
#   12.77.0.1:   public-looking, routed via eth0        -> refused (not the VPN)
#
# The agents are POSIX sh scripts in the test user's home (Landlock lets the
# agent exec only from system dirs and its rw dirs), driven through files:
#   agent.sh once LIST       run the probes of LIST, print "NAME RESULT MS", exit
#   agent.sh loop DIR SECS   write DIR/pid and DIR/cgroup, then answer every
#                            DIR/req.N (a probe list) with DIR/res.N, until
#                            DIR/stop exists or SECS have passed
# so "the session is still guarded" is checked by the session's own processes.
#
# Prints one PASS/FAIL line per check and "N passed, M failed"; exits 1 if any
# check failed.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: guard_daemon.sh needs root"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
lyh_init "${1:-}"

P="lyhtg-$$"
lyh_layout_up "$P" tun0 || lyh_die "network layout"
lyh_user_create || lyh_die "cannot create the test user"
PROBE=$(lyh_user_install "$LYH_PROBE_TOOL" probe) || lyh_die "cannot install the probe"
AGENT=$LYH_HOME/lyh-e2e/agent.sh
cat >"$AGENT" <<'EOF'
#!/bin/sh
# The agent of guard_daemon.sh (runs inside the sandbox as the test user).
probe=$HOME/lyh-e2e/probe
run_list() { # lines "NAME PROTO ADDR PORT" -> "NAME <probe result>"
    while read -r name proto addr port; do
        [ -n "$name" ] || continue
        out=$("$probe" probe "$proto" "$addr" "$port" 3000 2>&1)
        res=$(echo "$out" | grep -m 1 -E '^(ok|refused|unreach|timeout|error) ') ||
            res=$(echo "$out" | tr '\n' ' ' | cut -c 1-300)
        echo "$name $res"
    done <"$1"
}
case ${1:-} in
once)
    echo "cgroup $(sed -n 's/^0:://p' /proc/self/cgroup)"
    run_list "$2"
    exit 0
    ;;
loop)
    d=$2 max=$3 n=0
    echo $$ >"$d/.pid" && mv "$d/.pid" "$d/pid"
    sed -n 's/^0:://p' /proc/self/cgroup >"$d/.cgroup" && mv "$d/.cgroup" "$d/cgroup"
    while [ "$n" -lt $((max * 10)) ]; do
        [ -e "$d/stop" ] && exit 0
        for r in "$d"/req.*; do
            [ -e "$r" ] || continue
            k=${r##*/req.}
            [ -e "$d/res.$k" ] && continue
            run_list "$r" >"$d/.res.$k" && mv "$d/.res.$k" "$d/res.$k"
        done
        sleep 0.1
        n=$((n + 1))
    done
    exit 3
    ;;
esac
exit 2
EOF
chown "$LYH_UID:$LYH_GID" "$AGENT"
chmod 0755 "$AGENT"

lyh_daemon_start || lyh_die "lyhd does not start"

# ---- helpers ----------------------------------------------------------------------

# Probe lists: "NAME PROTO ADDR" words; port is always LYH_PORT.
VPN_PROBES="vpn-tcp:tcp:11.77.0.1 vpn-udp:udp:11.77.0.1"
LAN_PROBES="lan-tcp:tcp:192.168.77.2 lan-udp:udp:192.168.77.2"
ETH_PROBES="eth-tcp:tcp:12.77.0.1 eth-udp:udp:12.77.0.1"
ULA_PROBES="ula-tcp:tcp:fd77::2 ula-udp:udp:fd77::2"
V6_PROBES="v6-tcp:tcp:2a0e:77::2 v6-udp:udp:2a0e:77::2"

# write_list FILE SPEC...: a probe list file (readable by the agent).
write_list() {
    local f=$1 s n pr ad
    shift
    : >"$f"
    for s in "$@"; do
        # split NAME:PROTO:ADDR (ADDR may contain ':')
        n=${s%%:*}
        pr=${s#*:}
        ad=${pr#*:}
        pr=${pr%%:*}
        echo "$n $pr $ad $LYH_PORT" >>"$f"
    done
    chmod 0644 "$f"
}

# result_of RESULTS NAME: the "<result> <ms>" of probe NAME in RESULTS.
result_of() {
    awk -v n="$2" '$1 == n { $1 = ""; sub(/^ /, ""); print; exit }' <<<"$1"
}

# expect_ok CHECK RESULT: the probe got its echo back.
expect_ok() {
    case $2 in
    "ok "*) t_pass "$1 ($2)" ;;
    *) t_fail "$1" "${2:-no result}" ;;
    esac
}

# expect_fast_reject CHECK RESULT: refused (reset) or unreachable (icmp admin
# prohibited) in under 1 s, not a timeout.
expect_fast_reject() {
    local res ms
    read -r res ms _ <<<"$2"
    if { [ "$res" = refused ] || [ "$res" = unreach ]; } && [ "${ms:-99999}" -lt 1000 ] 2>/dev/null; then
        t_pass "$1 ($2)"
    else
        t_fail "$1" "${2:-no result}"
    fi
}

# check_results PREFIX RESULTS OKSPECS... -- REJECTSPECS...
check_results() {
    local pre=$1 res=$2 s mode=ok
    shift 2
    for s in "$@"; do
        if [ "$s" = -- ]; then mode=rej; continue; fi
        s=${s%%:*}
        if [ "$mode" = ok ]; then
            expect_ok "$pre: $s works" "$(result_of "$res" "$s")"
        else
            expect_fast_reject "$pre: $s refused at once" "$(result_of "$res" "$s")"
        fi
    done
}

# cli_clean ERRFILE NAME: t_fail if the lyh client's stderr holds a sanitizer report.
cli_clean() {
    local rep
    if rep=$(lyh_sanitizer_report "$1"); then
        t_fail "$2: lyh without sanitizer report" "$rep"
    fi
}

declare -A A_DIR A_SID A_PID A_CLIENT
REQ_N=0

# agent_start NAME [LYH RUN OPTIONS...]: start `lyh run --vpn tun0 --no-tui
# OPTIONS -- agent.sh loop` in the background; wait (15 s) until the agent
# runs. Sets A_DIR A_SID (session id) A_PID (agent pid) A_CLIENT (lyh pid).
agent_start() {
    local name=$1 d
    shift
    d=$LYH_HOME/lyh-e2e/$name
    rm -rf "$d"
    install -d -o "$LYH_UID" -g "$LYH_GID" -m 0755 "$d"
    A_DIR[$name]=$d A_SID[$name]="" A_PID[$name]="" A_CLIENT[$name]=""
    LYH_CMD_TIMEOUT=900 lyh_cli run --vpn tun0 --no-tui "$@" -- /bin/sh "$AGENT" loop "$d" 300 \
        >"$LYH_TMP/agent.$name.out" 2>"$LYH_TMP/agent.$name.err" </dev/null &
    A_CLIENT[$name]=$!
    lyh_track_pid "$!"
    if ! lyh_wait_until 15 test -s "$d/cgroup"; then
        t_fail "$name: session starts" "$(head -c 400 "$LYH_TMP/agent.$name.err")"
        return 1
    fi
    A_PID[$name]=$(cat "$d/pid")
    A_SID[$name]=$(basename "$(cat "$d/cgroup")")
    return 0
}

# agent_probe NAME SPEC...: have the agent run these probes now; sets RES to
# its results ("NAME RESULT MS" lines), empty if it did not answer within 30 s.
# (Not in $(...): the request counter must advance in this shell.)
agent_probe() {
    local name=$1 d
    shift
    d=${A_DIR[$name]}
    REQ_N=$((REQ_N + 1))
    RES=""
    write_list "$d/.req.$REQ_N" "$@"
    mv "$d/.req.$REQ_N" "$d/req.$REQ_N"
    lyh_wait_until 30 test -e "$d/res.$REQ_N" && RES=$(cat "$d/res.$REQ_N")
}

# agent_guarded CHECK NAME: the agent's VPN probes work, its LAN probes are refused at once.
agent_guarded() {
    agent_probe "$2" $VPN_PROBES $LAN_PROBES $ETH_PROBES
    check_results "$1" "$RES" $VPN_PROBES -- $LAN_PROBES $ETH_PROBES
}

# agent_stop NAME: ask the agent to exit; wait (10 s) until it is gone.
agent_stop() {
    local name=$1
    touch "${A_DIR[$name]}/stop"
    lyh_wait_pid_gone 10 "${A_PID[$name]}"
}

# agent_client_rc NAME: wait (15 s) for the lyh client of NAME; sets CLIENT_RC
# to its exit status. (Not in $(...): only this shell can wait for it.)
agent_client_rc() {
    local pid=${A_CLIENT[$1]}
    lyh_wait_pid_gone 15 "$pid"
    lyh_alive "$pid" && kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    CLIENT_RC=$?
}

# session_left SID: what is left of session SID (chain, map element, cgroup,
# tmpdir, live row); empty when nothing is.
session_left() {
    local sid=$1 st left=""
    lyh_session_chains | grep -Eqx "(s|a|d)-$sid" && left+="chain "
    lyh_session_elems | grep -q " s-$sid\$" && left+="map-element "
    [ -n "$(lyh_session_nft_left "$sid")" ] && left+="rules "
    [ -d "$LYH_CGBASE/$sid" ] && left+="cgroup "
    [ -e "$LYH_TMPROOT/lyh-$sid" ] && left+="tmpdir "
    st=$(sqlite3 -cmd '.timeout 5000' "$LYH_DB" "select state from sessions where id='$sid'" 2>&1)
    [ "$st" = 4 ] || left+="row(state=$st) "
    echo "$left"
}

# expect_session_gone CHECK SID: wait (10 s) until nothing of SID is left.
expect_session_gone() {
    # shellcheck disable=SC2034 # gone_sid is read inside the eval below
    local left gone_sid=$2
    if lyh_wait_until 10 eval '[ -z "$(session_left "$gone_sid")" ]'; then
        t_pass "$1"
    else
        left=$(session_left "$2")
        t_fail "$1" "left: $left"
    fi
}

# leaks: every leftover of every session; empty when clean.
leaks() {
    local out=""
    [ -n "$(lyh_session_chains)" ] && out+="chains: $(lyh_session_chains | tr '\n' ' ') "
    [ -n "$(lyh_session_elems)" ] && out+="map: $(lyh_session_elems | tr '\n' ' ') "
    [ -n "$(lyh_cg_sessions)" ] && out+="cgroups: $(lyh_cg_sessions | tr '\n' ' ') "
    [ -n "$(lyh_tmpdirs)" ] && out+="tmpdirs: $(lyh_tmpdirs | tr '\n' ' ') "
    [ "$(lyh_live_rows)" = 0 ] || out+="live rows: $(lyh_live_rows) "
    echo "$out"
}

# expect_no_leaks CHECK: wait (15 s) until no session leftovers remain.
expect_no_leaks() {
    if lyh_wait_until 15 eval '[ -z "$(leaks)" ]'; then
        t_pass "$1"
    else
        t_fail "$1" "$(leaks)"
    fi
}

# run_once NAME [LYH RUN OPTIONS...] -- SPEC...: one `lyh run ... -- agent.sh once`;
# sets RUN_RC RUN_OUT RUN_ERR.
run_once() {
    local name=$1 list o=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do o+=("$1"); shift; done
    shift
    list=$LYH_HOME/lyh-e2e/list.$name
    write_list "$list" "$@"
    LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui "${o[@]}" -- /bin/sh "$AGENT" once "$list" \
        >"$LYH_TMP/once.$name.out" 2>"$LYH_TMP/once.$name.err" </dev/null
    RUN_RC=$?
    RUN_OUT=$(cat "$LYH_TMP/once.$name.out")
    RUN_ERR=$(cat "$LYH_TMP/once.$name.err")
    cli_clean "$LYH_TMP/once.$name.err" "$name"
}

# unguarded_probe WHO SPEC: one probe outside any session: WHO = user | root.
unguarded_probe() {
    local n pr ad
    n=${2%%:*} pr=${2#*:}
    ad=${pr#*:} pr=${pr%%:*}
    if [ "$1" = user ]; then
        lyh_as_user "$PROBE" probe "$pr" "$ad" "$LYH_PORT" 3000 2>&1
    else
        lyh_in_main "$LYH_TOOL" probe "$pr" "$ad" "$LYH_PORT" 3000 2>&1
    fi
}

# ---- 1. a running session reaches the VPN only ------------------------------------

echo "# 1. traffic of a running session"
if agent_start s1; then
    S1=${A_SID[s1]}
    t_eq "1: agent runs in the session cgroup under lyhd's subtree" "$(cat "${A_DIR[s1]}/cgroup")" \
        "${LYH_CGBASE#"$LYH_CGMNT"}/$S1"
    agent_probe s1 $VPN_PROBES $LAN_PROBES $ETH_PROBES $ULA_PROBES $V6_PROBES
    check_results "1 (v6 default via tun0)" "$RES" $VPN_PROBES $V6_PROBES -- $LAN_PROBES $ETH_PROBES $ULA_PROBES
    if grep -q "IPv6 blocked" "$LYH_TMP/agent.s1.err"; then
        t_fail "1: IPv6 not blocked with the IPv6 default via tun0" "$(cat "$LYH_TMP/agent.s1.err")"
    else
        t_pass "1: IPv6 not blocked with the IPv6 default via tun0"
    fi
    # the guard touches only its sessions: the same probes, unguarded, while s1 runs
    for who in user root; do
        for s in $LAN_PROBES $ETH_PROBES $ULA_PROBES; do
            expect_ok "1: unguarded $who reaches ${s%%:*} while a session runs" "$(unguarded_probe $who "$s")"
        done
    done
    # still guarded after all that
    agent_guarded "1: session still guarded" s1
else
    S1=""
fi

# With the IPv6 default via eth0 a new session gets IPv6 blocked.
lyh_route6_default eth0
if agent_start s1b; then
    S1B=${A_SID[s1b]}
    if grep -q "; IPv6 blocked (its default route is not on tun0)" "$LYH_TMP/agent.s1b.err"; then
        t_pass "1: RunStarted says IPv6 is blocked (IPv6 default via eth0)"
    else
        t_fail "1: RunStarted says IPv6 is blocked (IPv6 default via eth0)" "$(cat "$LYH_TMP/agent.s1b.err")"
    fi
    agent_probe s1b $VPN_PROBES $V6_PROBES $ULA_PROBES $LAN_PROBES
    check_results "1 (v6 default via eth0)" "$RES" $VPN_PROBES -- $V6_PROBES $ULA_PROBES $LAN_PROBES
    expect_ok "1: unguarded user reaches 2a0e:77::2 (the refusal is the guard's)" \
        "$(unguarded_probe user v6-tcp:tcp:2a0e:77::2)"
    if [ -n "$S1" ]; then
        agent_probe s1 $V6_PROBES
        check_results "1: earlier session keeps its IPv6" "$RES" $V6_PROBES --
    fi
    agent_stop s1b
    agent_client_rc s1b
    t_eq "1: lyh exits with the agent's status (0)" "$CLIENT_RC" 0
    cli_clean "$LYH_TMP/agent.s1b.err" "1: s1b"
    expect_session_gone "1: s1b fully removed" "$S1B"
fi
lyh_route6_default tun0

# ---- 2. after the session ends -------------------------------------------------------

echo "# 2. after the session ends"
if [ -n "$S1" ]; then
    agent_stop s1 || t_fail "2: agent exits when asked"
    agent_client_rc s1
    t_eq "2: lyh exits 0 with the agent" "$CLIENT_RC" 0
    cli_clean "$LYH_TMP/agent.s1.err" "2: s1"
    expect_session_gone "2: chain, map element, cgroup, tmpdir and live row of the session are gone" "$S1"
    t_eq "2: no s-* chain in table inet lianyaohu" "$(lyh_session_chains)" ""
    t_eq "2: map sessions is empty" "$(lyh_session_elems)" ""
    if [ -d "$LYH_CGBASE/$S1" ]; then t_fail "2: session cgroup dir gone" "$LYH_CGBASE/$S1"; else t_pass "2: session cgroup dir gone"; fi
    if [ -e "$LYH_TMPROOT/lyh-$S1" ]; then t_fail "2: session tmpdir gone" "$LYH_TMPROOT/lyh-$S1"; else t_pass "2: session tmpdir gone"; fi
fi
for s in vpn-tcp:tcp:11.77.0.1 vpn-udp:udp:11.77.0.1 lan-tcp:tcp:192.168.77.2; do
    pr=${s#*:} ad=${pr#*:} pr=${pr%%:*}
    expect_fast_reject "2: gid $LYH_GUARD_GID outside any session cannot send (${s%%:*})" \
        "$(lyh_probe_as "$LYH_UID" "$LYH_GUARD_GID" "$pr" "$ad" "$LYH_PORT")"
done
expect_ok "2: same uid without the guard gid is not touched" \
    "$(lyh_probe_as "$LYH_UID" "$LYH_GID" tcp 192.168.77.2 "$LYH_PORT")"

# The tmpdir must go also when --tmp-dir is an ordinary root-owned 0755 dir
# (not sticky and world-writable like /tmp).
T755=$LYH_TMP/tmp755
mkdir -m 0755 "$T755"
if lyh_daemon_stop && lyh_daemon_start --tmp-dir "$T755"; then
    LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui -- /bin/sh -c 'echo x >"$TMPDIR/f"; echo "$TMPDIR"' \
        >"$LYH_TMP/t755.out" 2>"$LYH_TMP/t755.err" </dev/null
    rc=$? # not checked here: see "short-lived agents" in 5.
    # The agent's TMPDIR is its private /tmp; the tmpdir behind it is the row's.
    td=$(sqlite3 -cmd '.timeout 5000' "$LYH_DB" 'select tmpdir from sessions order by started_ms desc, rowid desc limit 1')
    if [ "${td#"$T755"/lyhd/lyh-}" != "$td" ] && lyh_daemon_log_has "session '${td#"$T755"/lyhd/lyh-}' of uid $LYH_UID ended" 10; then
        if lyh_wait_until 5 test ! -e "$td"; then
            t_pass "2: tmpdir removed with a root-owned 0755 --tmp-dir"
        else
            t_fail "2: tmpdir removed with a root-owned 0755 --tmp-dir" \
                "$td left ($(ls -a "$td" | tr '\n' ' ')); log: $(grep -i 'removal\|tmpdir' "$LYH_DAEMON_LOG" | tail -n 2)"
            rmdir "$td" 2>/dev/null
        fi
    else
        t_fail "2: session with a 0755 --tmp-dir runs" "rc=$rc out=$td err=$(cat "$LYH_TMP/t755.err")"
    fi
    lyh_daemon_stop
    lyh_daemon_start || lyh_die "lyhd does not restart"
fi

# ---- 3. route preflight through lyh run -----------------------------------------------

echo "# 3. route preflight"
rows0=$(sqlite3 "$LYH_DB" 'select count(*) from sessions')

# preflight_refused CHECK WANT_IN_MESSAGE: lyh run fails and leaves nothing.
preflight_refused() {
    # the session before this one ends its row after its last flow events
    # are in (settle, then the protocol process's FLOWS_SYNC): not this check's
    lyh_wait_until 5 eval '[ "$(lyh_live_rows)" = 0 ]'
    run_once pre -- vpn-tcp:tcp:11.77.0.1
    if [ "$RUN_RC" -ne 0 ] && grep -q -- "$2" <<<"$RUN_ERR" && ! grep -q '^cgroup ' <<<"$RUN_OUT"; then
        t_pass "$1 (rc $RUN_RC: $(head -n 1 <<<"$RUN_ERR"))"
    else
        t_fail "$1" "rc=$RUN_RC out=$RUN_OUT err=$RUN_ERR"
    fi
    t_eq "$1: no live row" "$(lyh_live_rows)" 0
    t_eq "$1: no row recorded at all" "$(sqlite3 "$LYH_DB" 'select count(*) from sessions')" "$rows0"
    t_eq "$1: no chain" "$(lyh_session_chains)" ""
    t_eq "$1: no cgroup" "$(lyh_cg_sessions)" ""
    t_eq "$1: no tmpdir" "$(lyh_tmpdirs)" ""
}

lyh_route4_default eth0
preflight_refused "3: default via eth0 refused, naming eth0" "eth0"

lyh_route4_default split-tun0
run_once split -- $VPN_PROBES $LAN_PROBES
if [ "$RUN_RC" = 0 ] && grep -q '^cgroup ' <<<"$RUN_OUT"; then
    t_pass "3: split default 0/1 + 128/1 via tun0 runs"
    check_results "3 (split)" "$RUN_OUT" $VPN_PROBES -- $LAN_PROBES
else
    t_fail "3: split default 0/1 + 128/1 via tun0 runs" "rc=$RUN_RC err=$RUN_ERR"
fi
rows0=$(sqlite3 "$LYH_DB" 'select count(*) from sessions')

lyh_route4_default none
lyh_ip route add 11.77.0.1/32 via 10.77.0.2 dev tun0
preflight_refused "3: host route via tun0 only (no default) refused" "no IPv4 route"
lyh_ip route del 11.77.0.1/32 via 10.77.0.2 dev tun0

lyh_route4_default eth0
lyh_ip route add 0.0.0.1/32 via 10.77.0.2 dev tun0
preflight_refused "3: host route 0.0.0.1 via tun0 + default via eth0 refused" "eth0"
lyh_ip route del 0.0.0.1/32 via 10.77.0.2 dev tun0

run_once nondefault --allow-non-default-route -- $ETH_PROBES $LAN_PROBES vpn-tcp:tcp:11.77.0.1
if [ "$RUN_RC" = 0 ] && grep -q '^cgroup ' <<<"$RUN_OUT"; then
    t_pass "3: --allow-non-default-route with default via eth0 runs"
    check_results "3 (non-default route)" "$RUN_OUT" -- $ETH_PROBES $LAN_PROBES vpn-tcp:tcp:11.77.0.1
else
    t_fail "3: --allow-non-default-route with default via eth0 runs" "rc=$RUN_RC err=$RUN_ERR"
fi
lyh_route4_default tun0
expect_no_leaks "3: nothing left after the preflight cases"

# ---- 4. crashes, restarts, tampering ---------------------------------------------------

echo "# 4. crash and restart"
if agent_start s4; then
    S4=${A_SID[s4]}
    agent_guarded "4: before the crash" s4
    lyh_daemon_kill9
    if lyh_alive "${A_PID[s4]}"; then t_pass "4: agent survives kill -9 of lyhd"; else t_fail "4: agent survives kill -9 of lyhd"; fi
    agent_client_rc s4
    rc=$CLIENT_RC
    if [ "$rc" = 125 ] && grep -q "lost contact with lyhd" "$LYH_TMP/agent.s4.err"; then
        t_pass "4: lyh reports the lost daemon (exit 125)"
    else
        t_fail "4: lyh reports the lost daemon (exit 125)" "rc=$rc $(cat "$LYH_TMP/agent.s4.err")"
    fi
    agent_guarded "4: no daemon running" s4
    expect_fast_reject "4: no daemon: gid $LYH_GUARD_GID outside the session still refused" \
        "$(lyh_probe_as "$LYH_UID" "$LYH_GUARD_GID" tcp 11.77.0.1 "$LYH_PORT")"
    lyh_daemon_start || lyh_die "lyhd does not restart after kill -9"
    if lyh_daemon_log_has "re-adopted running session '$S4'"; then
        t_pass "4: restarted lyhd re-adopts the session (log)"
    else
        t_fail "4: restarted lyhd re-adopts the session (log)" "$(cat "$LYH_DAEMON_LOG")"
    fi
    if lyh_cli sessions 2>&1 | grep -q "^$S4 "; then t_pass "4: lyh sessions lists the re-adopted session"; else t_fail "4: lyh sessions lists the re-adopted session" "$(lyh_cli sessions 2>&1)"; fi
    agent_guarded "4: after re-adoption" s4
    agent_stop s4
    expect_session_gone "4: re-adopted session's chain, cgroup, tmpdir and row go when it exits (pidfd)" "$S4"
    lyh_daemon_log_has "session '$S4' of uid $LYH_UID ended" ||
        t_fail "4: end of the re-adopted session logged" "$(tail -n 5 "$LYH_DAEMON_LOG")"
fi

# Stale objects: a chain and cgroups no session owns are reaped at startup.
lyh_nft add chain inet lianyaohu s-deadbeefdeadbeef
lyh_nft add rule inet lianyaohu s-deadbeefdeadbeef counter accept
mkdir "$LYH_CGBASE/deadbeefdeadbeef"
mkdir "$LYH_CGBASE/cafecafecafecafe"
# a leftover process in one of them (started by us, tracked; the daemon must kill it)
sh -c 'echo $$ > "$1/cgroup.procs" && exec sleep 300' sh "$LYH_CGBASE/cafecafecafecafe" &
STALE_PID=$!
disown "$STALE_PID" # no "Killed" job notice when lyhd kills it
lyh_track_pid "$STALE_PID"
lyh_wait_until 5 grep -qx "$STALE_PID" "$LYH_CGBASE/cafecafecafecafe/cgroup.procs"
lyh_daemon_stop
lyh_daemon_start || lyh_die "lyhd does not restart with stale objects"
if lyh_daemon_log_has "removed chain 's-deadbeefdeadbeef'" && ! lyh_session_chains | grep -q deadbeef; then
    t_pass "4: stale chain s-deadbeefdeadbeef reaped (log, table)"
else
    t_fail "4: stale chain s-deadbeefdeadbeef reaped" "chains: $(lyh_session_chains | tr '\n' ' ') log: $(grep deadbeef "$LYH_DAEMON_LOG")"
fi
if lyh_daemon_log_has "removed cgroup 'deadbeefdeadbeef'" && [ ! -d "$LYH_CGBASE/deadbeefdeadbeef" ]; then
    t_pass "4: stale empty cgroup reaped (log, dir)"
else
    t_fail "4: stale empty cgroup reaped" "$(grep -i cgroup "$LYH_DAEMON_LOG")"
fi
if lyh_wait_pid_gone 5 "$STALE_PID"; then
    t_pass "4: process in a stale cgroup killed"
else
    t_fail "4: process in a stale cgroup killed" "pid $STALE_PID alive"
fi
if lyh_wait_until 3 test ! -d "$LYH_CGBASE/cafecafecafecafe"; then
    t_pass "4: stale populated cgroup removed once its process is killed"
else
    t_fail "4: stale populated cgroup removed once its process is killed" \
        "dir left; log: $(grep -i cafecafe "$LYH_DAEMON_LOG" | tr '\n' ' ')"
    # let the next start try again (this is what the fix must avoid needing)
fi

# A table flushed by someone else while no lyhd ran is rebuilt at startup, with
# the chains of running sessions. (A flush while lyhd runs is rebuilt at once
# from the ruleset change notifications: tests/e2e/audit.sh, case 5.)
if agent_start s4f; then
    S4F=${A_SID[s4f]}
    agent_guarded "4: before the flush" s4f
    lyh_daemon_stop
    lyh_nft flush table inet lianyaohu
    lyh_daemon_start || lyh_die "lyhd does not restart after the flush"
    if lyh_daemon_log_has "table inet lianyaohu had been changed by someone else; rebuilt it"; then
        t_pass "4: flushed table rebuilt (log)"
    else
        t_fail "4: flushed table rebuilt (log)" "$(cat "$LYH_DAEMON_LOG")"
    fi
    if lyh_daemon_log_has "session '$S4F': firewall chain was missing; rebuilt"; then
        t_pass "4: chain of the running session restored (log)"
    else
        t_fail "4: chain of the running session restored (log)" "$(cat "$LYH_DAEMON_LOG")"
    fi
    # a default session is data (guard-as-data.md): its chains a- and d-, and
    # its cgroup's element of map sessions (continue: it decides nothing)
    t_eq "4: restored log chains and map element" \
        "$(lyh_session_rules "$S4F") $(lyh_session_chains | tr '\n' ' ')$(lyh_session_elems | wc -l)" \
        "data a-$S4F d-$S4F 1"
    agent_guarded "4: after the rebuild" s4f
    agent_stop s4f
    expect_session_gone "4: flushed-and-restored session removed when it ends" "$S4F"
fi

# 20 crash/restart cycles; the session ends while no daemon runs (even
# cycles) or after the restart (odd cycles).
cycles_ok=0
cycle_bad=""
for ((i = 1; i <= 20; i++)); do
    agent_start "c$i" || { cycle_bad+="[$i: no start] "; lyh_daemon_start >/dev/null 2>&1; continue; }
    sid=${A_SID[c$i]}
    lyh_daemon_kill9
    agent_client_rc "c$i"
    if ((i % 2 == 0)); then
        agent_stop "c$i"
        # the orphaned agent stays a zombie until init reaps it; wait for
        # that, so the restart meets a session whose process is gone
        lyh_wait_until 10 test ! -e "/proc/${A_PID[c$i]}"
        lyh_daemon_start || { cycle_bad+="[$i: no restart] "; break; }
        lyh_daemon_log_has "startup reconciliation: 0 session\(s\) re-adopted, 1 reaped" ||
            cycle_bad+="[$i: no reap log: $(grep -E 'reconcil|adopt|reap' "$LYH_DAEMON_LOG" | tr '\n' ' ')] "
    else
        lyh_daemon_start || { cycle_bad+="[$i: no restart] "; break; }
        lyh_daemon_log_has "re-adopted running session '$sid'" || cycle_bad+="[$i: no re-adopt log] "
        agent_stop "c$i"
    fi
    if lyh_wait_until 10 eval '[ -z "$(session_left "$sid")" ]'; then
        cycles_ok=$((cycles_ok + 1))
    else
        cycle_bad+="[$i: left $(session_left "$sid")] "
    fi
done
if [ "$cycles_ok" = 20 ] && [ -z "$cycle_bad" ]; then
    t_pass "4: 20 kill -9/restart cycles, each session fully removed"
else
    t_fail "4: 20 kill -9/restart cycles" "$cycles_ok ok; $cycle_bad"
fi
[ -n "$LYH_DAEMON_PID" ] || lyh_daemon_start || lyh_die "lyhd does not start after the cycles"
expect_no_leaks "4: after the cycles no chain, cgroup, tmpdir or live row is left"

# ---- 5. lifecycle ----------------------------------------------------------------------

echo "# 5. lifecycle"
BG=$LYH_HOME/lyh-e2e/bg
install -d -o "$LYH_UID" -g "$LYH_GID" -m 0755 "$BG"
LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui -- /bin/sh -c 'sleep 300 & echo $! > "$1/bgpid"; exit 0' sh "$BG" \
    >"$LYH_TMP/bg.out" 2>"$LYH_TMP/bg.err" </dev/null
rc=$?
bgpid=$(cat "$BG/bgpid" 2>/dev/null)
t_eq "5: lyh exits 0 with an agent that leaves a background child (124 = lyh hung)" "$rc" 0
cli_clean "$LYH_TMP/bg.err" "5: bg"
if [ -n "$bgpid" ] && lyh_wait_pid_gone 5 "$bgpid"; then
    t_pass "5: background child (sleep 300, pid $bgpid) killed when the session ends"
else
    t_fail "5: background child killed when the session ends" "pid '$bgpid' alive: $(cat /proc/"$bgpid"/cgroup 2>/dev/null)"
fi
expect_no_leaks "5: nothing left of the session with a background child"

# Short-lived agents: Started and Exited often reach lyh in one read(); lyh
# must still see Exited and exit with the agent's status, at once.
# Deterministic form: strace delays every poll() of lyh by 300 ms, so both
# events are queued before lyh reads the first one.
if command -v strace >/dev/null 2>&1; then
    LYH_CMD_TIMEOUT=8 lyh_as_user strace -f -qq -o /dev/null -E ASAN_OPTIONS=detect_leaks=0 \
        -e trace=poll -e inject=poll:delay_exit=300000 \
        "$LYH_LYH" --socket "$LYH_SOCK" run --vpn tun0 --no-tui -- /bin/sh -c 'exit 7' \
        >"$LYH_TMP/slow.out" 2>"$LYH_TMP/slow.err" </dev/null
    rc=$?
    if [ "$rc" = 7 ]; then
        t_pass "5: lyh reading slowly (Started and Exited in one read) exits with the agent's status"
    else
        t_fail "5: lyh reading slowly (Started and Exited in one read) exits with the agent's status" \
            "rc $rc$([ "$rc" = 124 ] && echo ': hung 8 s after the agent exited')"
    fi
else
    echo "SKIP 5: slow-reader check (no strace)"
fi
# The race is timing-dependent (about 1 run in 6 hangs here, 1 in 15 under
# ASan), so up to 100 runs, stopping at the second hang.
short_ok=0 short_bad="" short_n=0
for ((i = 1; i <= 100; i++)); do
    short_n=$i
    LYH_CMD_TIMEOUT=5 lyh_cli run --vpn tun0 --no-tui -- /bin/sh -c 'exit 7' \
        >"$LYH_TMP/short.out" 2>"$LYH_TMP/short.err" </dev/null
    rc=$?
    cli_clean "$LYH_TMP/short.err" "5: short-lived agent $i"
    if [ "$rc" = 7 ]; then
        short_ok=$((short_ok + 1))
    else
        short_bad+="[run $i: rc $rc$([ "$rc" = 124 ] && echo ' (hung 5 s after the agent exited)')] "
        [ "$(grep -o '\[run' <<<"$short_bad" | wc -l)" -ge 2 ] && break
    fi
done
if [ "$short_ok" = 100 ]; then
    t_pass "5: 100 short-lived agents: lyh exits with the agent's status (7) every time"
else
    t_fail "5: 100 short-lived agents: lyh exits with the agent's status (7) every time" \
        "$short_ok of $short_n ok; $short_bad"
fi
expect_no_leaks "5: nothing left of the short-lived sessions"

if agent_start s5; then
    S5=${A_SID[s5]}
    agent_guarded "5: before SIGTERM of lyhd" s5
    lyh_daemon_stop && t_pass "5: lyhd exits 0 on SIGTERM with a session running"
    if lyh_alive "${A_PID[s5]}"; then t_pass "5: session keeps running after SIGTERM of lyhd"; else t_fail "5: session keeps running after SIGTERM of lyhd"; fi
    agent_client_rc s5
    rc=$CLIENT_RC
    if [ "$rc" = 125 ] && grep -q "keeps running, guarded" "$LYH_TMP/agent.s5.err"; then
        t_pass "5: lyh hears the session keeps running (exit 125)"
    else
        t_fail "5: lyh hears the session keeps running (exit 125)" "rc=$rc $(cat "$LYH_TMP/agent.s5.err")"
    fi
    lyh_daemon_log_has "leaving session '$S5' of uid $LYH_UID running and guarded" ||
        t_fail "5: shutdown logs the session left running" "$(tail -n 5 "$LYH_DAEMON_LOG")"
    agent_guarded "5: stopped daemon, session still guarded" s5
    lyh_daemon_start || lyh_die "lyhd does not restart after SIGTERM"
    if lyh_daemon_log_has "re-adopted running session '$S5'"; then
        t_pass "5: restarted lyhd re-adopts the session"
    else
        t_fail "5: restarted lyhd re-adopts the session" "$(cat "$LYH_DAEMON_LOG")"
    fi
    agent_guarded "5: after re-adoption" s5
    agent_stop s5
    expect_session_gone "5: re-adopted session removed when it ends" "$S5"
fi

# ---- 5c. a restart after root pointed one data session's slot at another's ---------------

# Two sessions of the default policy (data: docs/guard-as-data.md). While lyhd
# is stopped, root changes A's element of map dlomark to B's loopback mark and
# deletes A's element of map dlogm. The restarted lyhd takes a session's slot
# only from elements that name it (here A's idrop element, whose value is its
# object idrop-<A>), finds A's rules not whole and puts them back, and leaves
# B's elements alone. (Until 2026-12-07, evening, the slot came from dlomark:
# A's repair deleted B's elements keyed by that mark.) Then root adds an
# element that would give A a second interface: lyhd's check takes it away.
echo "# 5c. a data session's slot element changed while lyhd was stopped"
mark5c() { # the mark whose refusals jump to the session's d-<id>
    lyh_nft list map inet lianyaohu dlogm 2>/dev/null | tr ',{}' '\n\n\n' |
        grep -E "jump d-$1([^0-9a-z-]|\$)" | grep -Eo '0x[0-9a-f]+' | head -n 1
}
slot5c() { # the value of the session's element of map dlomark
    lyh_nft_main list map inet lianyaohu dlomark 2>/dev/null | tr ',{}' '\n\n\n' |
        grep -F "\"$(lyh_nft_cgpath "$1")\" :" | grep -Eo '0x[0-9a-f]+' | head -n 1
}
by_mark5c() { # elements keyed by mark $1: maps dlogm, idrop, ilim, loopback
    local m
    for m in dlogm idrop ilim loopback; do
        lyh_nft list map inet lianyaohu "$m" 2>/dev/null | tr ',{}' '\n\n\n' | grep -E "^ *$1 :"
    done | wc -l
}
if agent_start s5a && agent_start s5b; then
    SA=${A_SID[s5a]} SB=${A_SID[s5b]}
    t_eq "5c: both sessions are data" "$(lyh_session_rules "$SA") $(lyh_session_rules "$SB")" "data data"
    mA=$(mark5c "$SA") mB=$(mark5c "$SB")
    t_eq "5c: B's four elements keyed by its mark ${mB:-none} are there" "$(by_mark5c "${mB:-none}")" 4
    lyh_daemon_stop
    tamper_rc=1
    if [ -n "$mA" ] && [ -n "$mB" ]; then
        lyh_nft_main delete element inet lianyaohu dlomark "{ \"$(lyh_nft_cgpath "$SA")\" }" &&
            lyh_nft_main add element inet lianyaohu dlomark "{ \"$(lyh_nft_cgpath "$SA")\" : $mB }" &&
            lyh_nft_main delete element inet lianyaohu dlogm "{ $mA }"
        tamper_rc=$?
    fi
    t_eq "5c: root set A's dlomark element to B's mark ($(slot5c "$SA")) and deleted A's dlogm one" \
        "$tamper_rc $(slot5c "$SA") $(mark5c "$SA")" "0 $mB "
    lyh_daemon_start || lyh_die "lyhd does not restart after SIGTERM"
    t_check "5c: lyhd re-adopts both" eval 'lyh_daemon_log_has "re-adopted running session .$SA." &&
        lyh_daemon_log_has "re-adopted running session .$SB."'
    t_check "5c: A's rules were put back" lyh_daemon_log_has "session '$SA': firewall chain was missing; rebuilt"
    t_eq "5c: A's dlomark and dlogm name one mark again" "$(slot5c "$SA")" "$(mark5c "$SA")"
    t_eq "5c: B's rules were left alone: its mark ${mB:-none}" "$(mark5c "$SB")" "$mB"
    t_eq "5c: B's four elements keyed by its mark are still there" "$(by_mark5c "${mB:-none}")" 4
    t_check "5c: B was not rebuilt" eval '! lyh_daemon_log_has "session .$SB.: firewall chain was missing"'
    agent_guarded "5c: A after the restart" s5a
    agent_guarded "5c: B after the restart" s5b
    # Root adds an element that would open a second interface to A (dvpn pairs
    # a cgroup with its VPN interface): lyhd's check finds more keyed by A's
    # cgroup than its rules hold, and puts A's rules back without it.
    ethif=$(ip -n "$LYH_MAIN" route get 12.77.0.1 2>/dev/null | grep -o 'dev [^ ]*' | cut -d' ' -f2)
    extra5c() { lyh_nft_main list set inet lianyaohu dvpn 2>/dev/null | grep -cF "\"$(lyh_nft_cgpath "$SA")\" . \"$ethif\""; }
    lyh_nft_main add element inet lianyaohu dvpn "{ \"$(lyh_nft_cgpath "$SA")\" . \"${ethif:-none}\" }"
    t_eq "5c: root added a dvpn element pairing A with ${ethif:-no interface}" "$?" 0
    lyh_wait_until 5 eval '[ "$(extra5c)" = 0 ]'
    t_eq "5c: lyhd took it away" "$(extra5c)" 0
    t_check "5c: ... saying it put A's rules back" \
        lyh_daemon_log_has "session '$SA': part of its firewall rules was removed by someone else while it ran; put them back"
    agent_guarded "5c: A after the added element" s5a
    # The same, while a rule of root's in lyhd's table jumps to A's log chain
    # d-<id>: that chain cannot be deleted (EBUSY), so A's rules cannot be put
    # back. What can go still goes, the added element with it, and A is refused
    # everything until root's rule is gone; then lyhd puts A back. (Until
    # 2026-12-07, late evening, the failed removal ended the repair before
    # anything keyed by A's cgroup was reaped: the element stayed.)
    lyh_nft_main add chain inet lianyaohu rootx &&
        lyh_nft_main add rule inet lianyaohu rootx jump "d-$SA" &&
        lyh_nft_main add element inet lianyaohu dvpn "{ \"$(lyh_nft_cgpath "$SA")\" . \"${ethif:-none}\" }"
    t_eq "5c: root's rule jumps to d-$SA, and the dvpn element is back" "$?" 0
    lyh_wait_until 5 eval '[ "$(extra5c)" = 0 ]'
    t_eq "5c: lyhd took the element away all the same" "$(extra5c)" 0
    t_check "5c: ... saying A's rules cannot be put back yet" lyh_daemon_log_has \
        "session '$SA': part of its firewall rules was removed by someone else, and what is left of them cannot be removed"
    agent_probe s5a $VPN_PROBES $LAN_PROBES $ETH_PROBES
    check_results "5c: A while root's rule names its chain" "$RES" -- $VPN_PROBES $LAN_PROBES $ETH_PROBES
    lyh_nft_main flush chain inet lianyaohu rootx && lyh_nft_main delete chain inet lianyaohu rootx
    t_eq "5c: root removed its rule" "$?" 0
    back5c() { grep -cF "session '$SA': part of its firewall rules was removed by someone else while it ran; put them back" "$LYH_DAEMON_LOG"; }
    lyh_wait_until 10 eval '[ "$(back5c)" -ge 2 ]'
    t_eq "5c: lyhd put A's rules back (a second time)" "$(back5c)" 2
    agent_guarded "5c: A put back after root's rule went" s5a
    agent_stop s5a
    agent_stop s5b
    expect_session_gone "5c: A removed when it ends" "$SA"
    expect_session_gone "5c: B removed when it ends" "$SB"
fi

# ---- 6. a path the ruleset refuses: before anything is made ---------------------------
# A writable path through a symlink the user made passes the request's checks
# (opened as the user) and fails in the ruleset's build (links are followed
# only if root made them). The build is the path thread's, before the launch
# makes anything (run_paths.c; it used to come after the child was begun, and
# the child was stopped at its gate): the client hears the path error, nothing
# of the agent runs, no child is begun, and nothing is left.

echo "# 6. a path the ruleset refuses"
lyh_as_user mkdir -p "$LYH_HOME/gate-dir"
lyh_as_user ln -sfn gate-dir "$LYH_HOME/gate-link"
rm -f "$LYH_HOME/gate-ran"
rows6=$(sqlite3 -cmd '.timeout 5000' "$LYH_DB" 'select count(*) from sessions')
LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui --writable "$LYH_HOME/gate-link" -- \
    /bin/sh -c "echo ran > '$LYH_HOME/gate-ran'" >"$LYH_TMP/gate.out" 2>"$LYH_TMP/gate.err" </dev/null
rc=$?
if [ "$rc" -ne 0 ] && grep -q 'not made by root' "$LYH_TMP/gate.err"; then
    t_pass "6: the client hears the ruleset's error (rc $rc: $(head -n 1 "$LYH_TMP/gate.err"))"
else
    t_fail "6: the client hears the ruleset's error" "rc=$rc err=$(cat "$LYH_TMP/gate.err")"
fi
t_check "6: the agent never ran" test ! -e "$LYH_HOME/gate-ran"
if lyh_daemon_log_has "setup failed at waiting for lyhd.s go"; then
    t_fail "6: no child was begun" "$(tail -n 20 "$LYH_DAEMON_LOG")"
else
    t_pass "6: no child was begun"
fi
t_eq "6: ... and no session was recorded" \
    "$(sqlite3 -cmd '.timeout 5000' "$LYH_DB" 'select count(*) from sessions')" "$rows6"
expect_no_leaks "6: no chain, map element, cgroup, tmpdir or live row left"
rm -rf "$LYH_HOME/gate-dir" "$LYH_HOME/gate-link"

# ---- the end ----------------------------------------------------------------------------

expect_no_leaks "end: no chain, map element, cgroup, tmpdir or live row left"
lyh_daemon_stop && t_pass "end: lyhd exits 0 on SIGTERM, no sanitizer report"
for f in "$LYH_TMP"/lyhd.*.log; do
    rep=$(lyh_sanitizer_report "$f") && t_fail "end: sanitizer report in $(basename "$f")" "$rep"
done
t_done
