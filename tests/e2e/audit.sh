#!/usr/bin/env bash
# End-to-end test of the audit pipeline: flows a session makes and is refused,
# as NFLOG delivers them to the real lyhd, written to audit.db and read back
# through `lyh audit query/follow` and `lyh run --monitor`; the session records
# and their totals against the chain's own counters; a burst of short flows
# (every one recorded or in a gap record); kill -9 of lyhd during a burst; the log
# rules' rate (measured at start; a flood thins its own records, not another's).
#
# usage: audit.sh BUILD_DIR     (as root; exits 77 = skipped otherwise)
#
# Network, daemon, user and safety rules come from lib.sh (read its header):
# lyhd and the sessions live in <p>-main only and traffic goes only to the
# test namespaces' addresses:
#   11.77.0.1 (exit, via tun0)    allowed
#   192.168.77.2 (lan, eth0)      refused: LAN
#   12.77.0.1 (via eth0)          refused: not the VPN
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: audit.sh needs root"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
lyh_init "${1:-}"
command -v sqlite3 >/dev/null || lyh_skip "sqlite3 is not installed (scripts/deps installs it)"

P="lyhta-$$"
lyh_layout_up "$P" tun0 || lyh_die "network layout"
lyh_user_create || lyh_die "cannot create the test user"
lyh_user_install "$LYH_PROBE_TOOL" probe >/dev/null || lyh_die "cannot install the probe"
AGENT=$LYH_HOME/lyh-e2e/agent.sh
# The agent: runs command files DIR/req.N (each line: arguments of the probe
# tool, e.g. "probe tcp ADDR PORT MS" or "burst ADDR PORT N PPS"), answers with
# DIR/res.N (the first output line of each), until DIR/stop exists or SECS
# have passed.
cat >"$AGENT" <<'EOF'
#!/bin/sh
probe=$HOME/lyh-e2e/probe
d=$1 max=$2 n=0
sed -n 's/^0:://p' /proc/self/cgroup >"$d/.cgroup" && mv "$d/.cgroup" "$d/cgroup"
while [ "$n" -lt $((max * 20)) ]; do
    [ -e "$d/stop" ] && exit 0
    for r in "$d"/req.*; do
        [ -e "$r" ] || continue
        k=${r##*/req.}
        [ -e "$d/res.$k" ] && continue
        while read -r args; do
            # shellcheck disable=SC2086
            [ -n "$args" ] && "$probe" $args 2>&1 | head -n 1
        done <"$r" >"$d/.res.$k"
        mv "$d/.res.$k" "$d/res.$k"
    done
    sleep 0.05
    n=$((n + 1))
done
exit 3
EOF
chown "$LYH_UID:$LYH_GID" "$AGENT"
chmod 0755 "$AGENT"

# JSON Lines checks (Debian's python3: the stdlib json module only).
J=$LYH_TMP/jl.py
cat >"$J" <<'EOF'
import json, sys
cmd, path = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(path) if l.strip()]
if cmd == "flows":        # sorted "verdict proto dst dport" of flow rows
    out = sorted("%s %s %s %s" % (r["verdict"], r["protocol"], r["dst"], r["dport"])
                 for r in rows if r["kind"] == "flow")
    print("\n".join(out))
elif cmd == "count":      # count [KIND [VERDICT]]
    k = sys.argv[3] if len(sys.argv) > 3 else None
    v = sys.argv[4] if len(sys.argv) > 4 else None
    print(sum(1 for r in rows if (k is None or r["kind"] == k) and (v is None or r.get("verdict") == v)))
elif cmd == "field":      # field KIND ACTION NAME: NAME of the last such row
    k, a, name = sys.argv[3:6]
    sel = [r for r in rows if r["kind"] == k and r.get("action") == a]
    print(sel[-1].get(name, "") if sel else "")
elif cmd == "detail":     # detail KIND ACTION KEY: KEY=value from the detail
    k, a, key = sys.argv[3:6]
    sel = [r for r in rows if r["kind"] == k and r.get("action") == a]
    val = ""
    if sel:
        import shlex
        for kv in shlex.split(sel[-1].get("detail", "")):
            if kv.startswith(key + "="):
                val = kv[len(key) + 1:]
    print(val)
elif cmd == "sum_missed":  # sum_missed KEY: KEY=value summed over gap rows
    key, tot = sys.argv[3], 0
    import shlex
    for r in rows:
        if r["kind"] == "gap":
            for kv in shlex.split(r.get("detail", "")):
                if kv.startswith(key + "="):
                    tot += int(kv[len(key) + 1:])
    print(tot)
elif cmd == "ids_ascending":
    ids = [r["id"] for r in rows]
    print("yes" if ids == sorted(ids) and len(set(ids)) == len(ids) else "no")
EOF
jl() { /usr/bin/python3 "$J" "$@"; }

counter_field() { # "k=v k=v" KEY
    echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

lyh_daemon_start || lyh_die "lyhd does not start"

declare -A A_DIR A_SID A_CLIENT
REQ_N=0
# agent_start NAME [RUN OPTIONS...]: `lyh run --vpn tun0 --no-tui OPTIONS -- agent`
# in the background; waits (15 s) for the agent; sets A_DIR A_SID A_CLIENT.
agent_start() {
    local name=$1 d
    shift
    d=$LYH_HOME/lyh-e2e/$name
    rm -rf "$d"
    install -d -o "$LYH_UID" -g "$LYH_GID" -m 0755 "$d"
    A_DIR[$name]=$d
    LYH_CMD_TIMEOUT=600 lyh_cli run --vpn tun0 --no-tui "$@" -- /bin/sh "$AGENT" "$d" 300 \
        >"$LYH_TMP/agent.$name.out" 2>"$LYH_TMP/agent.$name.err" </dev/null &
    A_CLIENT[$name]=$!
    lyh_track_pid "$!"
    if ! lyh_wait_until 15 test -s "$d/cgroup"; then
        t_fail "$name: session starts" "$(head -c 400 "$LYH_TMP/agent.$name.err")"
        return 1
    fi
    A_SID[$name]=$(basename "$(cat "$d/cgroup")")
}
# agent_send NAME LINE...: hand the agent these lines without waiting; the
# answer will be ${A_DIR[NAME]}/res.$REQ_N.
agent_send() {
    local d=${A_DIR[$1]}
    shift
    REQ_N=$((REQ_N + 1))
    printf '%s\n' "$@" >"$d/.req.$REQ_N"
    chmod 0644 "$d/.req.$REQ_N"
    mv "$d/.req.$REQ_N" "$d/req.$REQ_N"
}
# agent_do NAME SECONDS LINE...: have the agent run these lines; RES = its answer.
agent_do() {
    local name=$1 secs=$2
    shift 2
    agent_send "$name" "$@"
    RES=""
    lyh_wait_until "$secs" test -e "${A_DIR[$name]}/res.$REQ_N" && RES=$(cat "${A_DIR[$name]}/res.$REQ_N")
}
# agent_stop NAME: end the agent, wait (20 s) for its lyh run to return.
agent_stop() {
    touch "${A_DIR[$1]}/stop"
    lyh_wait_pid_gone 20 "${A_CLIENT[$1]}" || t_fail "$1: lyh run returns after the agent stops"
    wait "${A_CLIENT[$1]}" 2>/dev/null
}
# session_ended SID: wait (15 s) until its end record is committed.
session_ended() {
    lyh_wait_until 15 sh -c "'$LYH_LYH' --socket '$LYH_SOCK' audit query --session '$1' --kind session --json | grep -q '\"end\"'"
}
# q_root ARGS...: lyh audit ARGS as root (admin: sees every uid).
q_root() { "$LYH_LYH" --socket "$LYH_SOCK" audit "$@"; }

# ---- 1. a session's flows, exactly ------------------------------------------------------

echo "# 1. allowed and refused flows of one session"
if agent_start s1; then
    S1=${A_SID[s1]}
    agent_do s1 30 "probe tcp 11.77.0.1 $LYH_PORT 3000" "probe udp 11.77.0.1 $LYH_PORT 3000" \
        "probe tcp 192.168.77.2 $LYH_PORT 3000" "probe udp 12.77.0.1 $LYH_PORT 3000"
    want_res=$(printf 'ok\nok\nrefused\n') # udp to a refused destination: unreach or refused
    got_res=$(echo "$RES" | awk '{print $1}' | head -n 3)
    t_eq "1: probes behave (ok ok refused)" "$got_res" "$want_res"
    sleep 0.3 # the agent is idle now: the counters stay put
    CNT=$(lyh_in_main "$LYH_TOOL" counters "s-$S1")
    agent_stop s1
    session_ended "$S1" || t_fail "1: the session end is recorded" "$(tail -n 5 "$LYH_DAEMON_LOG")"
    lyh_cli audit query --session "$S1" --json >"$LYH_TMP/q1.jsonl" 2>"$LYH_TMP/q1.err"
    rc=$?
    t_eq "1: lyh audit query --session exits 0" "$rc" 0
    want=$(printf '%s\n' "allowed tcp 11.77.0.1 $LYH_PORT" "allowed udp 11.77.0.1 $LYH_PORT" \
        "denied tcp 192.168.77.2 $LYH_PORT" "denied udp 12.77.0.1 $LYH_PORT" | sort)
    t_eq "1: exactly the four flows (verdict, protocol, destination, port)" \
        "$(jl flows "$LYH_TMP/q1.jsonl")" "$want"
    t_eq "1: one start and one end record" \
        "$(jl count "$LYH_TMP/q1.jsonl" session)" 2
    t_eq "1: start record names the argv0" \
        "$(jl detail "$LYH_TMP/q1.jsonl" session start argv0)" /bin/sh
    t_eq "1: end: allowed packets = the chain's counter" \
        "$(jl field "$LYH_TMP/q1.jsonl" session end allowed_packets)" "$(counter_field "$CNT" accept_packets)"
    t_eq "1: end: allowed bytes = the chain's counter" \
        "$(jl field "$LYH_TMP/q1.jsonl" session end allowed_bytes)" "$(counter_field "$CNT" accept_bytes)"
    t_eq "1: end: denied packets = the chain's counter" \
        "$(jl field "$LYH_TMP/q1.jsonl" session end denied_packets)" "$(counter_field "$CNT" reject_packets)"
    t_eq "1: end: denied bytes = the chain's counter" \
        "$(jl field "$LYH_TMP/q1.jsonl" session end denied_bytes)" "$(counter_field "$CNT" reject_bytes)"
    t_eq "1: end: allowed flows counted = recorded (2)" \
        "$(jl detail "$LYH_TMP/q1.jsonl" session end allowed_flows_counted)/$(jl detail "$LYH_TMP/q1.jsonl" session end allowed_flows)" "2/2"
    t_eq "1: no gap record for this session" "$(jl count "$LYH_TMP/q1.jsonl" gap)" 0
    t_eq "1: ids ascending, no duplicates" "$(jl ids_ascending "$LYH_TMP/q1.jsonl")" yes
    t_eq "1: exit status recorded" "$(jl detail "$LYH_TMP/q1.jsonl" session end exit)" 0

    # Filters narrow it exactly.
    lyh_cli audit query --session "$S1" --verdict denied --dst 192.168.77.0/24 --port "$LYH_PORT" \
        --json >"$LYH_TMP/q1f.jsonl"
    t_eq "1: --verdict denied --dst 192.168.77.0/24 --port: the LAN flow only" \
        "$(jl flows "$LYH_TMP/q1f.jsonl")" "denied tcp 192.168.77.2 $LYH_PORT"
    lyh_cli audit query --session "$S1" --proto udp --json >"$LYH_TMP/q1u.jsonl"
    t_eq "1: --proto udp" "$(jl flows "$LYH_TMP/q1u.jsonl")" \
        "$(printf '%s\n' "allowed udp 11.77.0.1 $LYH_PORT" "denied udp 12.77.0.1 $LYH_PORT")"
    lyh_cli audit query --session "$S1" --kind flow --limit 1 --json >"$LYH_TMP/q1l.jsonl"
    t_eq "1: --limit 1 gives one record" "$(jl count "$LYH_TMP/q1l.jsonl")" 1
    lyh_cli audit query --session "$S1" --since 1h --json >"$LYH_TMP/q1s.jsonl"
    t_eq "1: --since 1h keeps them" "$(jl count "$LYH_TMP/q1s.jsonl" flow)" 4
    lyh_cli audit query --session "$S1" --until 1h --json >"$LYH_TMP/q1t.jsonl"
    t_eq "1: --until 1h (an hour ago) drops them" "$(jl count "$LYH_TMP/q1t.jsonl")" 0
    lyh_cli audit query --session "$S1" >"$LYH_TMP/q1.txt"
    if grep -q "192.168.77.2:$LYH_PORT" "$LYH_TMP/q1.txt" && [ "$(wc -l <"$LYH_TMP/q1.txt")" -ge 6 ]; then
        t_pass "1: table output lists the flows"
    else
        t_fail "1: table output lists the flows" "$(cat "$LYH_TMP/q1.txt")"
    fi
    lyh_cli audit query --session "$S1" --csv >"$LYH_TMP/q1.csv"
    t_eq "1: --csv: header + 6 rows" "$(wc -l <"$LYH_TMP/q1.csv")" 7

    # Who sees what.
    q_root query --session "$S1" --json >"$LYH_TMP/q1r.jsonl"
    t_eq "1: root sees the same records" "$(jl count "$LYH_TMP/q1r.jsonl")" "$(jl count "$LYH_TMP/q1.jsonl")"
    (cd / && LYH_CMD_TIMEOUT=30 timeout 30 setpriv --reuid=65534 --regid=65534 --clear-groups \
        "$LYH_LYH" --socket "$LYH_SOCK" audit query --session "$S1" --json) >"$LYH_TMP/q1n.jsonl" 2>&1
    t_eq "1: another user sees none of them" "$(wc -l <"$LYH_TMP/q1n.jsonl")" 0
    lyh_cli audit query --uid 0 --json >"$LYH_TMP/q1x.out" 2>&1
    rc=$?
    if [ "$rc" = 1 ] && grep -qi "own uid" "$LYH_TMP/q1x.out"; then
        t_pass "1: asking for another uid is refused (exit 1, says why)"
    else
        t_fail "1: asking for another uid is refused" "rc=$rc $(cat "$LYH_TMP/q1x.out")"
    fi
    lyh_wait_until 3 sh -c "'$LYH_LYH' --socket '$LYH_SOCK' audit query --kind request --uid $LYH_UID --json | grep -q AuditQuery"
    q_root query --kind request --uid "$LYH_UID" --json >"$LYH_TMP/q1req.jsonl"
    if grep -q '"refused"' "$LYH_TMP/q1req.jsonl" && grep -q 'AuditQuery' "$LYH_TMP/q1req.jsonl"; then
        t_pass "1: the refused request is on record (kind request)"
    else
        t_fail "1: the refused request is on record" "$(cat "$LYH_TMP/q1req.jsonl")"
    fi
fi

# ---- 2. follow and --monitor ------------------------------------------------------------

echo "# 2. lyh audit follow, lyh run --monitor"
LYH_CMD_TIMEOUT=60 lyh_cli audit follow --kind flow --verdict denied --limit 0 --json >"$LYH_TMP/follow.jsonl" \
    2>"$LYH_TMP/follow.err" &
FOLLOW=$!
lyh_track_pid "$FOLLOW"
sleep 0.5
if agent_start s2 --monitor; then
    agent_do s2 30 "probe tcp 192.168.77.2 $LYH_PORT 3000" "probe tcp 11.77.0.1 $LYH_PORT 3000"
    if lyh_wait_until 5 grep -q "192.168.77.2" "$LYH_TMP/agent.s2.err"; then
        t_pass "2: --monitor prints the refused flow on lyh's stderr"
    else
        t_fail "2: --monitor prints the refused flow" "$(cat "$LYH_TMP/agent.s2.err")"
    fi
    if grep -q "11.77.0.1" "$LYH_TMP/agent.s2.err"; then
        t_fail "2: --monitor prints refused flows only" "$(cat "$LYH_TMP/agent.s2.err")"
    else
        t_pass "2: --monitor prints refused flows only"
    fi
    if lyh_wait_until 5 grep -q "\"${A_SID[s2]}\"" "$LYH_TMP/follow.jsonl"; then
        t_eq "2: follow streams the new refused flow (and nothing else)" \
            "$(jl flows "$LYH_TMP/follow.jsonl")" "denied tcp 192.168.77.2 $LYH_PORT"
    else
        t_fail "2: follow streams the new refused flow" "$(cat "$LYH_TMP/follow.jsonl" "$LYH_TMP/follow.err")"
    fi
    agent_stop s2
fi
lyh_stop_pid "$FOLLOW" 5

# ---- 3. a burst of short flows -----------------------------------------------------------

echo "# 3. burst: every flow recorded or in a gap record"
if agent_start s3; then
    S3=${A_SID[s3]}
    agent_do s3 60 "burst 11.77.0.1 20000 5000 0" "burst 192.168.77.2 20000 3000 0"
    t_eq "3: the agent sent 5000 allowed datagrams" "$(echo "$RES" | head -n 1)" "sent 5000"
    sleep 0.3
    CNT=$(lyh_in_main "$LYH_TOOL" counters "s-$S3")
    agent_stop s3
    session_ended "$S3" || t_fail "3: the session end is recorded"
    q_root query --session "$S3" --json >"$LYH_TMP/q3.jsonl"
    na=$(jl count "$LYH_TMP/q3.jsonl" flow allowed)
    nd=$(jl count "$LYH_TMP/q3.jsonl" flow denied)
    ma=$(jl sum_missed "$LYH_TMP/q3.jsonl" allowed_missed)
    md=$(jl sum_missed "$LYH_TMP/q3.jsonl" denied_missed)
    t_eq "3: counters saw 5000 new allowed flows" "$(counter_field "$CNT" accept_flows)" 5000
    t_eq "3: counters saw 3000 refused packets" "$(counter_field "$CNT" reject_packets)" 3000
    t_eq "3: allowed: recorded + missed = 5000 (recorded $na)" "$((na + ma))" 5000
    t_eq "3: refused: recorded + missed = 3000 (recorded $nd)" "$((nd + md))" 3000
    if [ "$na" -gt 0 ] && [ "$nd" -gt 0 ]; then
        t_pass "3: flows of both verdicts recorded ($na allowed, $nd refused)"
    else
        t_fail "3: flows of both verdicts recorded" "$na allowed, $nd refused"
    fi
fi

# ---- 4. kill -9 during a burst -----------------------------------------------------------

echo "# 4. kill -9 of lyhd during a burst"
if agent_start s4; then
    S4=${A_SID[s4]}
    agent_send s4 "burst 11.77.0.1 30000 8000 4000"
    n4=$REQ_N
    sleep 0.7
    lyh_daemon_kill9
    sleep 0.3
    lyh_daemon_start || lyh_die "lyhd does not restart after kill -9"
    lyh_wait_until 10 test -e "${A_DIR[s4]}/res.$n4"
    t_eq "4: the agent's burst completed" "$(cat "${A_DIR[s4]}/res.$n4" 2>/dev/null)" "sent 8000"
    sleep 0.3
    CNT=$(lyh_in_main "$LYH_TOOL" counters "s-$S4")
    agent_stop s4
    session_ended "$S4" || t_fail "4: the session end is recorded after the restart"
    ic=$(sqlite3 "$LYH_STATE/audit.db" 'PRAGMA integrity_check' 2>&1)
    t_eq "4: audit.db passes integrity_check" "$ic" ok
    q_root query --kind gap --json >"$LYH_TMP/q4g.jsonl"
    if grep -q '"unclean"' "$LYH_TMP/q4g.jsonl"; then t_pass "4: gap record action unclean"; else
        t_fail "4: gap record action unclean" "$(cat "$LYH_TMP/q4g.jsonl")"; fi
    q_root query --session "$S4" --json >"$LYH_TMP/q4.jsonl"
    na=$(jl count "$LYH_TMP/q4.jsonl" flow allowed)
    ma=$(jl sum_missed "$LYH_TMP/q4.jsonl" allowed_missed)
    t_eq "4: counters saw 8000 new flows" "$(counter_field "$CNT" accept_flows)" 8000
    t_eq "4: recorded + missed = 8000 (recorded $na)" "$((na + ma))" 8000
fi

# ---- 5. someone flushes the ruleset while lyhd runs -----------------------------------------

echo "# 5. nft flush ruleset during a session: rebuilt at once, on record"
if agent_start s5; then
    S5=${A_SID[s5]}
    lyh_nft flush ruleset
    if lyh_wait_until 3 eval '[ -n "$(lyh_session_rules "$S5")" ]'; then
        t_pass "5: the session's rules are back after the flush ($(lyh_session_rules "$S5"))"
    else
        t_fail "5: the session's rules are back after the flush" "$(lyh_nft list ruleset 2>&1 | head -20)"
    fi
    agent_do s5 30 "probe tcp 192.168.77.2 $LYH_PORT 3000" "probe tcp 11.77.0.1 $LYH_PORT 3000"
    t_eq "5: after the rebuild: LAN refused, VPN works" "$(echo "$RES" | awk '{print $1}' | tr '\n' ' ')" "refused ok "
    lyh_wait_until 3 sh -c "'$LYH_LYH' --socket '$LYH_SOCK' audit query --kind guard --json | grep -q 'while lyhd ran'"
    q_root query --kind guard --json >"$LYH_TMP/q5.jsonl"
    if grep -q '"rebuilt"' "$LYH_TMP/q5.jsonl" && grep -q 'while lyhd ran' "$LYH_TMP/q5.jsonl"; then
        t_pass "5: the rebuild is on record (kind guard, action rebuilt)"
    else
        t_fail "5: the rebuild is on record" "$(cat "$LYH_TMP/q5.jsonl")"
    fi
    agent_stop s5
    session_ended "$S5" || t_fail "5: the session end is recorded"
    q_root query --session "$S5" --json >"$LYH_TMP/q5s.jsonl"
    t_eq "5: no false gap after the rebuild (counters restarted with it)" "$(jl count "$LYH_TMP/q5s.jsonl" gap)" 0
fi

# ---- 6. the log rules' rate: measured, and each session's own --------------------------------

echo "# 6. the log rules' rate limit: from a measurement, one bucket per session"
# measured at start, then four more times off the loop, a second apart; the
# best is kept, and said once the measuring is over
DONE_RE='audit: audit.db takes [0-9]* flow records/s here (the best of its start.s measurement and'
lyh_wait_until 20 grep -q "$DONE_RE" "$LYH_DAEMON_LOG"
LINE=$(grep "$DONE_RE" "$LYH_DAEMON_LOG" | tail -n 1)
TOOK=$(sed -n 's/.*audit.db takes \([0-9]*\) flow records.*/\1/p' <<<"$LINE")
RATE=$(sed -n 's/.*each session logs up to \([0-9]*\) new flows.*/\1/p' <<<"$LINE")
if [ -n "$TOOK" ] && [ -n "$RATE" ]; then
    t_check "6: lyhd measured four more times (${LINE##*] })" grep -q "measurement and 4 more" <<<"$LINE"
    want=$((TOOK / 3))
    [ "$want" -lt 2000 ] && want=2000
    [ "$want" -gt 1000000 ] && want=1000000
    t_eq "6: the rate is a third of the best audit.db took ($TOOK records/s)" "$RATE" "$want"
    [ -e "$LYH_STATE/audit-measure.db" ] && t_fail "6: the measurement's scratch file is gone" "$(ls -l "$LYH_STATE")"
else
    t_fail "6: lyhd logged its measurement" "$(grep audit "$LYH_DAEMON_LOG" | head -5)"
    RATE=0
fi
# log_rates SID: "<what> rate R/second burst B packets" per log bucket of the
# session: its chain's log rules, or (a data session: guard-as-data.md) its limits
log_rates() {
    if [ "$(lyh_session_rules "$1")" = data ]; then
        for k in alim llim dlim ilim; do
            lyh_nft list limit inet lianyaohu "$k-$1" 2>/dev/null | grep -Eo 'rate [0-9]+/second burst [0-9]+ packets' |
                sed "s/^/$k /"
        done
    else
        lyh_nft list chain inet lianyaohu "s-$1" | grep -Eo '(oifname "tun0" ct state new counter packets [0-9]+ bytes [0-9]+ )?limit rate [0-9]+/second burst [0-9]+ packets log prefix "[^"]*"' |
            sed -E 's/^oifname "tun0".*limit /alim /; s/^limit /other /; s/ log prefix "lyh:[0-9a-f]*:(.) "/ \1/'
    fi
}
if agent_start s6; then
    burst=$((RATE / 2 > 1000 ? RATE / 2 : 1000))
    t_check "6: the session logs its VPN flows at that rate" grep -q "^alim rate $RATE/second burst $burst packets" \
        <<<"$(log_rates "${A_SID[s6]}")"
    agent_stop s6
fi
# A flood in one session thins out its own records, not another's.
lyh_daemon_stop
lyh_daemon_start --audit-flow-rate 400 || lyh_die "lyhd does not start with --audit-flow-rate 400"
grep -q "each session logs up to 400 new flows/s through its VPN interface (--audit-flow-rate)" "$LYH_DAEMON_LOG" ||
    t_fail "6: lyhd says the rate it was given" "$(grep audit "$LYH_DAEMON_LOG" | head -5)"
if agent_start s6a && agent_start s6b; then
    SA=${A_SID[s6a]} SB=${A_SID[s6b]}
    agent_send s6a "burst 11.77.0.1 20000 16000 4000"
    na6=$REQ_N
    sleep 0.5
    agent_do s6b 30 "burst 11.77.0.1 21000 300 100"
    t_eq "6: the quiet session sent its 300" "$RES" "sent 300"
    lyh_wait_until 30 test -e "${A_DIR[s6a]}/res.$na6"
    t_eq "6: the flooding session sent its 16000" "$(cat "${A_DIR[s6a]}/res.$na6" 2>/dev/null)" "sent 16000"
    CH=$(log_rates "$SA")
    t_check "6: the flood's session logs its VPN flows at 400/s" grep -q '^alim rate 400/second burst 1000 packets' <<<"$CH"
    # every other log bucket keeps the fixed rate: they do not add up to the VPN's
    t_eq "6: no other bucket has the VPN's rate" "$(grep -c 'rate 400/second' <<<"$CH")" 1
    t_check "6: the refusals keep 2000/s" grep -Eq '^(dlim|other) rate 2000/second burst 1000 packets( D)?$' <<<"$CH"
    agent_stop s6a
    agent_stop s6b
    session_ended "$SA" || t_fail "6: the flood's end is recorded"
    session_ended "$SB" || t_fail "6: the quiet session's end is recorded"
    q_root query --session "$SA" --json >"$LYH_TMP/q6a.jsonl"
    q_root query --session "$SB" --json >"$LYH_TMP/q6b.jsonl"
    na=$(jl count "$LYH_TMP/q6a.jsonl" flow allowed)
    ma=$(jl sum_missed "$LYH_TMP/q6a.jsonl" allowed_missed)
    nb=$(jl count "$LYH_TMP/q6b.jsonl" flow allowed)
    mb=$(jl sum_missed "$LYH_TMP/q6b.jsonl" allowed_missed)
    t_eq "6: the flood: recorded + in gap records = 16000 (recorded $na)" "$((na + ma))" 16000
    # 4 s at 4000/s against 400/s and a bucket of 1000: about 2,600 recorded
    if [ "$na" -ge 1000 ] && [ "$na" -le 6000 ]; then
        t_pass "6: the flood's records were thinned to its own rate ($na of 16000)"
    else
        t_fail "6: the flood's records were thinned to its own rate" "$na recorded, $ma missed"
    fi
    t_eq "6: the quiet session beside it: all 300 recorded" "$nb" 300
    t_eq "6: ... and nothing of it in a gap record" "$mb" 0
fi

lyh_daemon_stop
t_done
exit $?
