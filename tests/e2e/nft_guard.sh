#!/usr/bin/env bash
# End-to-end test of the nftables egress guard (platform/linux/nft.c) against the
# real kernel, inside private network namespaces only.
#
# usage: nft_guard.sh PATH/TO/nft_guard_tool      (as root; exits 77 = skipped otherwise)
#
# Layout (all created here, all removed on exit, even on failure):
#   <p>-main   the "host": tun0 (veth, the VPN) and eth0 (veth, the LAN); the table
#              under test lives here; probes run here in cgroups below <cg>/
#   <p>-exit   peer of tun0: exit servers on 11.77.0.1 and 2a0e:77::2 (tcp+udp 7777,
#              tcp 7779). 11.0.0.0/8 and 2a0e:77::/64 are public-looking space that is
#              in none of the blocked sets; the addresses exist only in these
#              namespaces, so no packet can leave the machine.
#   <p>-lan    peer of eth0: servers on 192.168.77.2, fd77::2 and 12.77.0.1 (12.77.0.0/24
#              is routed via eth0: "a public address reached over the LAN interface")
#   <p>-cmpa, <p>-cmpb   empty namespaces to compare nft's reading of the rendered
#              text with what nft.c installs
#   <p>-data   a second "host" for the data layout (docs/guard-as-data.md), loaded
#              from its rendered text: tun0 to <p>-exit (10.78.0.0/30, 2a0f:78::/64),
#              eth0 to <p>-lan (192.168.78.0/24)
# Safety: every ip/nft command names one of these namespaces (ip -n / ip netns exec /
# nsenter --net=/run/netns/...); nft is used only to inspect, and in <p>-main to play
# the third party that flushes our table. nsenter (not ip netns exec) runs the probes,
# because ip netns exec remounts /sys and would hide the cgroup hierarchy.
set -u

TOOL=${1:-${NFT_GUARD_TOOL:-}}
P="lyhtest-nft-$$"
MAIN="$P-main" EXIT="$P-exit" LAN="$P-lan" CMPA="$P-cmpa" CMPB="$P-cmpb" DATA="$P-data"
GID=2000000
TMP=""
NETNS=()
PIDS=()
CGROUPS=()
pass=0
failed=0

skip() { echo "SKIP: $*"; exit 77; }
ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1${2:+: $2}"; }

cleanup() {
    local pid ns cg i
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null
    done
    for ns in "${NETNS[@]}"; do
        ip netns del "$ns" 2>/dev/null
    done
    # deepest first; probes are short-lived, give them a moment to leave
    for ((i = ${#CGROUPS[@]} - 1; i >= 0; i--)); do
        cg=${CGROUPS[$i]}
        for _ in $(seq 1 50); do
            [ -d "$cg" ] || break
            rmdir "$cg" 2>/dev/null && break
            sleep 0.1
        done
    done
    [ -n "$TMP" ] && rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" = 0 ] || skip "needs root"
[ -n "$TOOL" ] && [ -x "$TOOL" ] || skip "no nft_guard_tool given"
for c in ip nft nsenter setpriv timeout awk; do
    command -v "$c" >/dev/null || skip "$c not installed"
done
TMP=$(mktemp -d /tmp/lyh-nft-e2e.XXXXXX)

# ---- cgroup v2: find the mount, do not assume it --------------------------------------
read -r CGROOT CGMNT < <(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") print $4, $5; break } }' /proc/self/mountinfo | head -n 1)
[ -n "${CGMNT:-}" ] || skip "no cgroup2 mount"
# depth of the mount's root inside the hierarchy (non-zero inside a cgroup namespace)
ROOTDEPTH=0
[ "$CGROOT" != "/" ] && ROOTDEPTH=$(echo "$CGROOT" | tr -s '/' '\n' | grep -c .)
CGP="$CGMNT/$P"
mkdir "$CGP" || skip "cannot create a cgroup under $CGMNT"
CGROUPS+=("$CGP")
for c in sess-a sess-b sess-c sess-d none; do
    mkdir "$CGP/$c" && CGROUPS+=("$CGP/$c")
done
mkdir "$CGP/sess-a/child" && CGROUPS+=("$CGP/sess-a/child")
LEVEL=$((ROOTDEPTH + 2)) # <cg>/sess-x sits two levels below the hierarchy root

cgid() {
    local id ino
    id=$("$TOOL" cgroup-id "$1") || return 1
    ino=$(stat -c %i "$1")
    [ "$id" = "$ino" ] || { echo "cgroup id $id != inode $ino for $1" >&2; return 1; }
    echo "$id"
}
IDA=$(cgid "$CGP/sess-a") && IDB=$(cgid "$CGP/sess-b") && IDC=$(cgid "$CGP/sess-c") &&
    IDD=$(cgid "$CGP/sess-d") ||
    skip "cannot read cgroup ids"

# ---- namespaces ------------------------------------------------------------------------
for ns in "$MAIN" "$EXIT" "$LAN" "$CMPA" "$CMPB" "$DATA"; do
    ip netns add "$ns" || { echo "cannot create netns $ns"; exit 1; }
    NETNS+=("$ns")
    ip -n "$ns" link set lo up
done
setup_net() {
    ip -n "$MAIN" link add tun0 type veth peer name e0 netns "$EXIT" &&
    ip -n "$MAIN" addr add 10.77.0.1/30 dev tun0 &&
    ip -n "$MAIN" addr add 2a0e:77::1/64 dev tun0 nodad &&
    ip -n "$MAIN" link set tun0 up &&
    ip -n "$EXIT" addr add 10.77.0.2/30 dev e0 &&
    ip -n "$EXIT" addr add 2a0e:77::2/64 dev e0 nodad &&
    ip -n "$EXIT" addr add 11.77.0.1/32 dev lo &&
    ip -n "$EXIT" link set e0 up &&
    ip -n "$MAIN" route add default via 10.77.0.2 dev tun0 &&
    ip -n "$MAIN" -6 route add default via 2a0e:77::2 dev tun0 &&
    ip -n "$MAIN" link add eth0 type veth peer name l0 netns "$LAN" &&
    ip -n "$MAIN" addr add 192.168.77.1/24 dev eth0 &&
    ip -n "$MAIN" addr add fd77::1/64 dev eth0 nodad &&
    ip -n "$MAIN" link set eth0 up &&
    ip -n "$LAN" addr add 192.168.77.2/24 dev l0 &&
    ip -n "$LAN" addr add fd77::2/64 dev l0 nodad &&
    ip -n "$LAN" addr add 12.77.0.1/32 dev lo &&
    ip -n "$LAN" link set l0 up &&
    ip -n "$MAIN" route add 12.77.0.0/24 via 192.168.77.2 dev eth0 &&
    ip -n "$DATA" link add tun0 type veth peer name e1 netns "$EXIT" &&
    ip -n "$DATA" addr add 10.78.0.1/30 dev tun0 &&
    ip -n "$DATA" addr add 2a0f:78::1/64 dev tun0 nodad &&
    ip -n "$DATA" link set tun0 up &&
    ip -n "$EXIT" addr add 10.78.0.2/30 dev e1 &&
    ip -n "$EXIT" addr add 2a0f:78::2/64 dev e1 nodad &&
    ip -n "$EXIT" link set e1 up &&
    ip -n "$DATA" route add default via 10.78.0.2 dev tun0 &&
    ip -n "$DATA" -6 route add default via 2a0f:78::2 dev tun0 &&
    ip -n "$DATA" link add eth0 type veth peer name l1 netns "$LAN" &&
    ip -n "$DATA" addr add 192.168.78.1/24 dev eth0 &&
    ip -n "$DATA" link set eth0 up &&
    ip -n "$LAN" addr add 192.168.78.2/24 dev l1 &&
    ip -n "$LAN" link set l1 up
}
setup_net || { echo "network setup failed"; exit 1; }

serve() { # NS ADDR PORT
    nsenter --net="/run/netns/$1" "$TOOL" serve "$2" "$3" 300 >"$TMP/serve.$1.$2.$3" 2>&1 &
    PIDS+=("$!")
}
serve "$EXIT" 11.77.0.1 7777
serve "$EXIT" 11.77.0.1 7779
serve "$EXIT" 2a0e:77::2 7777
serve "$LAN" 192.168.77.2 7777
serve "$LAN" fd77::2 7777
serve "$LAN" 12.77.0.1 7777
serve "$LAN" 192.168.78.2 7777
serve "$MAIN" 127.0.0.1 7778
serve "$DATA" 127.0.0.1 7778
# lyhd's DNS forwarders for data sessions c and d, as chain input knows them (their mark)
for port in 5353 5354; do
    nsenter --net="/run/netns/$DATA" "$TOOL" serve 127.0.0.1 $port 300 1280919620 >"$TMP/serve.fwd.$port" 2>&1 &
    PIDS+=("$!")
done
for f in "$TMP"/serve.*; do
    for _ in $(seq 1 50); do
        grep -q serving "$f" && break
        sleep 0.1
    done
    grep -q serving "$f" || { echo "server did not start: $f: $(cat "$f")"; exit 1; }
done

T() { nsenter --net="/run/netns/$MAIN" "$TOOL" "$@"; }
NFT() { ip netns exec "$MAIN" nft "$@"; }

# run_probe CGROUP UID GID PROTO ADDR PORT -> "<result> <ms>"
run_probe() {
    local cg=$1 uid=$2 gid=$3
    shift 3
    timeout 10 nsenter --net="/run/netns/${PNS:-$MAIN}" \
        sh -c 'echo $$ > "$1/cgroup.procs" || exit 99; shift; exec "$@"' sh "$cg" \
        setpriv --reuid="$uid" --regid="$gid" --clear-groups "$TOOL" probe "$@" 3000 2>&1
}
expect_ok() { # NAME probe-args...
    local name=$1 out
    shift
    out=$(run_probe "$@")
    case $out in
    "ok "*) ok "$name" ;;
    *) bad "$name" "$out" ;;
    esac
}
expect_fast_reject() { # refused or unreachable, answered in < 1 s (not a timeout)
    local name=$1 out res ms
    shift
    out=$(run_probe "$@")
    read -r res ms _ <<<"$out"
    if { [ "$res" = refused ] || [ "$res" = unreach ]; } && [ "${ms:-99999}" -lt 1000 ] 2>/dev/null; then
        ok "$name ($out)"
    else
        bad "$name" "$out"
    fi
}
expect_eq() { # NAME GOT WANT
    if [ "$2" = "$3" ]; then ok "$1"; else bad "$1" "got '$2', want '$3'"; fi
}
has_line() { grep -qx -- "$2" <<<"$1"; }
counter_field() { # "k=v k=v" KEY
    tr ' ' '\n' <<<"$1" | awk -F= -v k="$2" '$1 == k { print $2 }'
}
norm() { sed -E 's/packets [0-9]+ bytes [0-9]+/packets 0 bytes 0/'; }

A="$CGP/sess-a" B="$CGP/sess-b" C="$CGP/sess-c" D="$CGP/sess-d" NONE="$CGP/none"

# ---- base --------------------------------------------------------------------------------
# The base with chain input: packets for sockets below $CGP (the sessions'
# parent, one level above them) from any interface but lo are refused.
IDBASE=$(cgid "$CGP") || skip "cannot read the cgroup id of $CGP"
BASE=(--level "$LEVEL" --inbound "$IDBASE" "$P")
expect_eq "base: created in an empty namespace" "$(T base "${BASE[@]}" 2>&1)" created
expect_eq "base: idempotent" "$(T base "${BASE[@]}" 2>&1)" unchanged

# ---- the text form parses and means what nft.c installs ------------------------------------
{ "$TOOL" render-base --level "$LEVEL"; "$TOOL" render-session x 4242 tun0 --deny 11.77.0.1/32,7779 \
    --lan-exception 192.168.77.0/24 --allow 11.77.0.0/16,7000-7999 --deny-default --block-ipv6; } >"$TMP/text.nft"
if ip netns exec "$CMPA" nft -c -f "$TMP/text.nft" 2>"$TMP/parse.err"; then
    ok "text: rendered base + session parse with nft -c"
else
    bad "text: rendered base + session parse with nft -c" "$(head -n 3 "$TMP/parse.err")"
fi
{ "$TOOL" render-base --level "$LEVEL"; "$TOOL" render-session x 4242 tun0 --deny 11.77.0.1/32,7779 \
    --lan-exception 192.168.77.0/24 --block-ipv6; "$TOOL" render-uid 65534 tun0; "$TOOL" render-shared 1000 wg0; } >"$TMP/cmp.nft"
ip netns exec "$CMPA" nft -f "$TMP/cmp.nft"
C2() { nsenter --net="/run/netns/$CMPB" "$TOOL" "$@"; }
C2 base --level "$LEVEL" >/dev/null && C2 add-session x 4242 tun0 --deny 11.77.0.1/32,7779 \
    --lan-exception 192.168.77.0/24 --block-ipv6 && C2 add-uid 65534 tun0 && C2 add-shared 1000 wg0
same=1
for obj in "set inet lianyaohu lan4" "set inet lianyaohu lan6" "chain inet lianyaohu output" \
    "chain inet lianyaohu guarded" "chain inet lianyaohu s-x" "chain inet lianyaohu LYH-65534" \
    "chain inet lianyaohu LYH-U-1000"; do
    # shellcheck disable=SC2086
    a=$(ip netns exec "$CMPA" nft list $obj 2>&1 | norm)
    # shellcheck disable=SC2086
    b=$(ip netns exec "$CMPB" nft list $obj 2>&1 | norm)
    if [ "$a" != "$b" ]; then
        same=0
        bad "text: nft's reading of the text equals the installed $obj" "$(diff <(echo "$a") <(echo "$b") | head -n 6 | tr '\n' '|')"
    fi
done
[ "$same" = 1 ] && ok "text: nft's reading of the rendered text equals what nft.c installed (sets, base, session, uid chains)"

# ---- sessions ------------------------------------------------------------------------------
T add-session a "$IDA" tun0 --deny 11.77.0.1/32,7779 && ok "add session a" || bad "add session a"
T add-session b "$IDB" tun0 --block-ipv6 --lan-exception 192.168.77.2/32,7777 --lan-exception 127.0.0.0/8,7778 &&
    ok "add session b (ipv6 blocked, LAN exception)" || bad "add session b"
T add-session c "$IDC" tun0 --deny-default --allow 11.77.0.1/32,7777 &&
    ok "add session c (deny-default)" || bad "add session c"
chains=$(T list)
if has_line "$chains" s-a && has_line "$chains" s-b && has_line "$chains" s-c; then
    ok "list shows s-a s-b s-c"
else
    bad "list shows s-a s-b s-c" "$(echo $chains)"
fi
sessions=$(T sessions)
if has_line "$sessions" "$IDA s-a" && has_line "$sessions" "$IDB s-b"; then
    ok "map sessions holds the cgroup ids"
else
    bad "map sessions holds the cgroup ids" "$(echo $sessions)"
fi

nflog_start() { # NS FILE: records of NFLOG group 7 in NS, one line each
    nsenter --net="/run/netns/$1" "$TOOL" nflog 7 60 100000 >"$2" 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 1 50); do
        grep -q listening "$2" && return 0
        sleep 0.1
    done
    bad "nflog listener in $1" "$(cat "$2")"
}
nflog_start "$MAIN" "$TMP/nflog"

expect_ok "a: tcp via tun0 to 11.77.0.1" "$A" 0 $GID tcp 11.77.0.1 7777
expect_ok "a: udp via tun0 to 11.77.0.1" "$A" 0 $GID udp 11.77.0.1 7777
expect_ok "a: tcp ipv6 via tun0 to 2a0e:77::2" "$A" 0 $GID tcp 2a0e:77::2 7777
expect_fast_reject "a: a host service on 127.0.0.1 is refused (not listed)" "$A" 0 $GID tcp 127.0.0.1 7778
expect_ok "b: a listed host port on 127.0.0.1 is reached" "$B" 0 $GID tcp 127.0.0.1 7778
expect_fast_reject "a: tcp to LAN 192.168.77.2 rejected at once" "$A" 0 $GID tcp 192.168.77.2 7777
expect_fast_reject "a: udp to LAN 192.168.77.2 rejected at once" "$A" 0 $GID udp 192.168.77.2 7777
expect_fast_reject "a: tcp to 12.77.0.1 routed via eth0 rejected" "$A" 0 $GID tcp 12.77.0.1 7777
expect_fast_reject "a: udp to 12.77.0.1 routed via eth0 rejected" "$A" 0 $GID udp 12.77.0.1 7777
expect_fast_reject "a: tcp ipv6 to LAN fd77::2 rejected" "$A" 0 $GID tcp fd77::2 7777
expect_fast_reject "a: policy deny 11.77.0.1:7779 rejected" "$A" 0 $GID tcp 11.77.0.1 7779
expect_ok "a: sub-cgroup of the session is the session (level $LEVEL)" "$A/child" 0 $GID tcp 11.77.0.1 7777
expect_ok "b: tcp via tun0" "$B" 0 $GID tcp 11.77.0.1 7777
expect_fast_reject "b: ipv6 blocked" "$B" 0 $GID tcp 2a0e:77::2 7777
expect_ok "b: LAN exception 192.168.77.2:7777 tcp" "$B" 0 $GID tcp 192.168.77.2 7777
expect_ok "b: LAN exception 192.168.77.2:7777 udp" "$B" 0 $GID udp 192.168.77.2 7777
expect_fast_reject "b: rest of the LAN still rejected (12.77.0.1)" "$B" 0 $GID tcp 12.77.0.1 7777
expect_ok "c: deny-default allows 11.77.0.1:7777" "$C" 0 $GID tcp 11.77.0.1 7777
expect_fast_reject "c: deny-default rejects 11.77.0.1:7779" "$C" 0 $GID tcp 11.77.0.1 7779
expect_fast_reject "c: deny-default rejects ipv6 2a0e:77::2" "$C" 0 $GID tcp 2a0e:77::2 7777
expect_ok "no guard gid: LAN untouched (tcp)" "$NONE" 0 0 tcp 192.168.77.2 7777
expect_ok "no guard gid: LAN untouched (udp)" "$NONE" 0 0 udp 192.168.77.2 7777
expect_fast_reject "guard gid in a cgroup with no session: rejected" "$NONE" 0 $GID tcp 11.77.0.1 7777
expect_fast_reject "guard gid above the session level: rejected" "$CGP" 0 $GID tcp 11.77.0.1 7777

cnt=$(T counters s-a)
ap=$(counter_field "$cnt" accept_packets)
rp=$(counter_field "$cnt" reject_packets)
if [ "${ap:-0}" -gt 0 ] && [ "${rp:-0}" -gt 0 ]; then ok "counters of s-a: $cnt"; else bad "counters of s-a" "$cnt"; fi
cnt=$(T counters guarded)
rp=$(counter_field "$cnt" reject_packets)
if [ "${rp:-0}" -gt 0 ]; then ok "counters of guarded (no session): $cnt"; else bad "counters of guarded" "$cnt"; fi
# The DNS-mark count a teardown may skip its conntrack walk on
# (nft_chain_mark_packets): a chain without a mark rule has no count; a
# counted `ct mark set <mark>` rule (counter right after the set, as lyhd
# writes it) gives one; a rule beside it that could set that mark uncounted
# takes it away: a mark from a register the reader cannot tell (meta mark), a
# counter with a match between the set and it (it counts only some of the
# marked packets), two counters in the rule (the one read need not be the one
# that counts), a second mark set in one rule, a jump or a verdict map (the
# chain it leads to may set it). The rules are added by hand to the
# namespace's own table, each removed after its check.
DNSMARK=0x80000000
mark_count() { local mp rc; mp=$(T mark-packets s-c "${1:-$DNSMARK}"); rc=$?; echo "$mp rc=$rc"; }
drop_hand_rules() { # the rules with comment "lyh-hand" in s-c
    local h
    for h in $(NFT -a list chain inet lianyaohu s-c 2>/dev/null | awk '/comment "lyh-hand"/ { print $NF }'); do
        NFT delete rule inet lianyaohu s-c handle "$h"
    done
}
expect_eq "mark count: no mark rule in s-c: cannot tell" "$(mark_count)" "cannot tell rc=3"
NFT add rule inet lianyaohu s-c ip daddr 10.99.99.99 ct mark set $DNSMARK counter accept
expect_eq "mark count: a counted ct mark rule is read" "$(mark_count)" "packets 0 rc=0"
expect_eq "mark count: another mark is not that rule's" "$(mark_count 0x1)" "cannot tell rc=3"
NFT add rule inet lianyaohu s-c ip daddr 10.99.99.98 ct mark set meta mark counter accept comment '"lyh-hand"'
expect_eq "mark count: a mark set from another register: cannot tell" "$(mark_count)" "cannot tell rc=3"
drop_hand_rules
expect_eq "mark count: ... read again once that rule is gone" "$(mark_count)" "packets 0 rc=0"
NFT add rule inet lianyaohu s-c ct mark set $DNSMARK ip daddr 10.99.99.97 counter accept comment '"lyh-hand"'
expect_eq "mark count: a match between the set and its counter: cannot tell" "$(mark_count)" "cannot tell rc=3"
drop_hand_rules
NFT add rule inet lianyaohu s-c counter ct mark set $DNSMARK ip daddr 10.99.99.95 counter comment '"lyh-hand"'
expect_eq "mark count: two counters, the last after a match: cannot tell" "$(mark_count)" "cannot tell rc=3"
drop_hand_rules
NFT add rule inet lianyaohu s-c ct mark set $DNSMARK ip daddr 10.99.99.93 ct mark set 0x1 counter comment '"lyh-hand"'
expect_eq "mark count: a second mark set in one rule: cannot tell" "$(mark_count)" "cannot tell rc=3"
drop_hand_rules
NFT add chain inet lianyaohu lyh-hand-target
NFT add rule inet lianyaohu s-c ip daddr 10.99.99.96 jump lyh-hand-target comment '"lyh-hand"'
expect_eq "mark count: a jump to another chain: cannot tell" "$(mark_count)" "cannot tell rc=3"
drop_hand_rules
NFT add rule inet lianyaohu s-c ip daddr 10.99.99.94 meta l4proto vmap '{ udp : jump lyh-hand-target }' comment '"lyh-hand"'
expect_eq "mark count: a verdict map that may jump: cannot tell" "$(mark_count)" "cannot tell rc=3"
drop_hand_rules
NFT delete chain inet lianyaohu lyh-hand-target
for h in $(NFT -a list chain inet lianyaohu s-c 2>/dev/null | awk '/10\.99\.99\.99/ { print $NF }'); do
    NFT delete rule inet lianyaohu s-c handle "$h"
done
mp=$(NFT list ruleset 2>&1 | grep -c '10\.99\.99\|lyh-hand')
expect_eq "mark count: the hand-made rules and chain are gone" "$mp" 0

# The fast rules (nft_render.c (0a)): b's TCP flows to 11.77.0.1 went through
# its IPv4 TCP one after their first packet; a (a deny rule) and c
# (deny-default) have none, so the refusals above were decided by the rest.
fastpk=$(nsenter --net="/run/netns/$MAIN" nft list chain inet lianyaohu s-b 2>&1 |
    awk '/ct state established,related ip daddr != @lan4 tcp dport != 53 counter/ {
        for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1) }')
if [ "${fastpk:-0}" -gt 0 ] 2>/dev/null; then ok "b: established TCP packets met the fast rule first ($fastpk)"; else
    bad "b: fast rule counter" "${fastpk:-none}"; fi
for ch in s-a s-c; do
    lst=$(nsenter --net="/run/netns/$MAIN" nft list chain inet lianyaohu "$ch" 2>&1)
    n=$(grep -c 'ct state established,related ip6\{0,1\} daddr != @lan' <<<"$lst")
    grep -q "chain $ch {" <<<"$lst" || n="no chain $ch"
    expect_eq "$ch: no fast rule (its policy refuses some VPN destinations)" "$n" 0
done

# NFLOG: the prefixes name the session and the verdict (log events may be sampled by
# the limit; at this rate they are not)
logged=0
for _ in $(seq 1 30); do
    # b has the fast rules: its new flows are still logged (lyh:b:A)
    if grep -qxF '[lyh:a:A ]' "$TMP/nflog" && grep -qxF '[lyh:a:D ]' "$TMP/nflog" &&
        grep -qxF '[lyh:b:A ]' "$TMP/nflog" &&
        grep -qxF '[lyh:c:D ]' "$TMP/nflog" && grep -qxF '[lyh:nosession:D ]' "$TMP/nflog"; then
        logged=1
        break
    fi
    sleep 0.1
done
if [ "$logged" = 1 ]; then
    ok "nflog group 7: lyh:a:A, lyh:a:D, lyh:b:A, lyh:c:D, lyh:nosession:D seen"
else
    bad "nflog prefixes" "$(sort "$TMP/nflog" | uniq -c | tr '\n' '|')"
fi

# The limit thins out log events, never verdicts: with 1 log/s, burst 1, ten rejected
# SYNs are all rejected at once and all counted, but at most a few are logged.
T add-session d "$IDD" tun0 --log-rate 1,1 && ok "add session d (log rate 1/s)" || bad "add session d"
fast=0
for _ in $(seq 1 10); do
    out=$(run_probe "$D" 0 $GID tcp 192.168.77.2 7777)
    read -r res ms _ <<<"$out"
    [ "$res" = refused ] && [ "${ms:-99999}" -lt 1000 ] && fast=$((fast + 1))
done
expect_eq "d: 10 of 10 LAN connects rejected at once despite the log limit" "$fast" 10
okc=0
for _ in $(seq 1 5); do
    run_probe "$D" 0 $GID tcp 11.77.0.1 7777 >/dev/null && okc=$((okc + 1))
done
expect_eq "d: 5 of 5 VPN connects accepted despite the log limit" "$okc" 5
rp=$(counter_field "$(T counters s-d)" reject_packets)
expect_eq "d: reject counter exact (10) although logging is sampled" "$rp" 10
for _ in $(seq 1 30); do
    grep -qxF '[lyh:d:D ]' "$TMP/nflog" && break
    sleep 0.1
done
nd=$(grep -cxF '[lyh:d:D ]' "$TMP/nflog")
if [ "$nd" -ge 1 ] && [ "$nd" -le 4 ]; then ok "d: $nd of 10 rejects logged (rate-limited)"; else bad "d: rejects logged" "$nd"; fi
T del-session d "$IDD" >/dev/null || bad "del session d"

# ---- atomicity: a batch with an invalid element changes nothing ----------------------------
before=$(NFT list table inet lianyaohu)
out=$(T add-session dup "$IDA" tun0 2>&1)
rc=$?
after=$(NFT list table inet lianyaohu)
if [ $rc -ne 0 ] && grep -q "File exists" <<<"$out" && [ "$before" = "$after" ] && ! has_line "$(T list)" s-dup; then
    ok "atomic: duplicate cgroup element fails, chain s-dup not created, table unchanged"
else
    bad "atomic: duplicate cgroup element" "rc=$rc out=$out"
fi
out=$(T add-session a 999999 tun0 2>&1)
rc=$?
after=$(NFT list table inet lianyaohu)
if [ $rc -ne 0 ] && [ "$before" = "$after" ] && ! grep -q '^999999 ' <<<"$(T sessions)"; then
    ok "atomic: existing chain fails, its element not added, table unchanged"
else
    bad "atomic: existing chain" "rc=$rc out=$out"
fi

# ---- uid and shared-user scopes --------------------------------------------------------------
T add-uid 65534 tun0 && ok "add uid scope LYH-65534" || bad "add uid scope"
expect_ok "uid scope: tcp via tun0" "$NONE" 65534 $GID tcp 11.77.0.1 7777
expect_fast_reject "uid scope: LAN rejected" "$NONE" 65534 $GID tcp 192.168.77.2 7777
expect_eq "base: unchanged with dispatch rules present" "$(T base "${BASE[@]}" 2>&1)" unchanged
T del-uid 65534 && ok "del uid scope" || bad "del uid scope"
expect_fast_reject "uid scope gone: same process rejected by guarded" "$NONE" 65534 $GID tcp 11.77.0.1 7777
if NFT list chain inet lianyaohu guarded | grep -q LYH-65534; then bad "uid dispatch rule removed"; else ok "uid dispatch rule removed"; fi
T add-shared 65534 tun0 && ok "add shared-user scope LYH-U-65534" || bad "add shared-user scope"
expect_fast_reject "shared-user: LAN rejected without the guard gid" "$NONE" 65534 0 tcp 192.168.77.2 7777
expect_ok "shared-user: tcp via tun0 without the guard gid" "$NONE" 65534 0 tcp 11.77.0.1 7777
expect_ok "shared-user: other uids untouched" "$NONE" 0 0 tcp 192.168.77.2 7777
T del-shared 65534 && ok "del shared-user scope" || bad "del shared-user scope"
expect_ok "shared-user gone: LAN reachable again" "$NONE" 65534 0 tcp 192.168.77.2 7777

# ---- session removal -------------------------------------------------------------------------
T del-session a "$IDA" && ok "del session a" || bad "del session a"
has_line "$(T list)" s-a && bad "s-a gone" || ok "s-a gone"
expect_fast_reject "a gone: guarded socket in its cgroup rejected by guarded" "$A" 0 $GID tcp 11.77.0.1 7777
expect_ok "b unaffected by a's removal" "$B" 0 $GID tcp 11.77.0.1 7777
out=$(T del-session a "$IDA" 2>&1)
[ $? -ne 0 ] && grep -q "No such file" <<<"$out" && ok "del session a again: ENOENT" || bad "del session a again" "$out"
T del-session b "$IDB" && T del-session c "$IDC" && ok "del sessions b c" || bad "del sessions b c"
left=$(T list | grep '^s-')
expect_eq "no s-* chain left" "$left" ""
expect_eq "map sessions empty" "$(T sessions)" ""
expect_fast_reject "no sessions at all: guarded socket rejected" "$B" 0 $GID udp 11.77.0.1 7777

# ---- inbound: a session's listener answers lo only ---------------------------------------------
# Listeners (TCP and UDP echo) inside session a's cgroup, as the guard gid, on
# the wildcard v4 and v6 addresses.
serve_in() { # CGROUP UID GID ADDR PORT
    local f
    f="$TMP/serve-in.${PNS:-$MAIN}.$(basename "$1").$4.$5"
    nsenter --net="/run/netns/${PNS:-$MAIN}" sh -c 'echo $$ > "$1/cgroup.procs" || exit 99; shift; exec "$@"' \
        sh "$1" setpriv --reuid="$2" --regid="$3" --clear-groups "$TOOL" serve "$4" "$5" 60 >"$f" 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 1 50); do
        grep -q serving "$f" && return 0
        sleep 0.1
    done
    bad "listener $4:$5 in $(basename "$1") did not start" "$(cat "$f")"
    return 1
}
probe_from() { # NS PROTO ADDR PORT -> "<result> <ms>"
    timeout 10 nsenter --net="/run/netns/$1" "$TOOL" probe "$2" "$3" "$4" 1500 2>&1
}
expect_from() { # NAME WANT(ok|refused|timeout) NS PROTO ADDR PORT
    local name=$1 want=$2 out res
    shift 2
    out=$(probe_from "$@")
    read -r res _ <<<"$out"
    case $want:$res in
    ok:ok | timeout:timeout | refused:refused | refused:unreach) ok "$name ($out)" ;;
    *) bad "$name" "want $want, got $out" ;;
    esac
}
T add-session a "$IDA" tun0 --loopback "$LEVEL" "$IDBASE" >/dev/null || bad "add session a again (may listen)"
serve_in "$A" 0 $GID 0.0.0.0 8801
serve_in "$A" 0 $GID :: 8801
# The control: a listener of the host, outside the sessions' parent cgroup.
serve "$MAIN" 0.0.0.0 8802
for _ in $(seq 1 50); do grep -q serving "$TMP/serve.$MAIN.0.0.0.0.8802" && break; sleep 0.1; done
for proto in tcp udp; do
    expect_from "inbound: control listener (no session) reached from the LAN ($proto)" ok "$LAN" $proto 192.168.77.1 8802
    expect_from "inbound: session listener refused from the LAN ($proto v4)" refused "$LAN" $proto 192.168.77.1 8801
    expect_from "inbound: session listener refused from the LAN ($proto v6)" refused "$LAN" $proto fd77::1 8801
    expect_from "inbound: session listener refused from the VPN side ($proto v4)" refused "$EXIT" $proto 10.77.0.1 8801
    expect_from "inbound: session listener refused from the VPN side ($proto v6)" refused "$EXIT" $proto 2a0e:77::1 8801
    expect_ok "inbound: session listener reached by a host process on 127.0.0.1 ($proto)" "$NONE" 0 0 $proto 127.0.0.1 8801
    expect_ok "inbound: session listener reached by a host process on ::1 ($proto)" "$NONE" 0 0 $proto ::1 8801
    out=$(run_probe "$NONE" 0 0 $proto 192.168.77.1 8801)
    case $out in
    "ok "*) bad "inbound: a session listener does not answer a host process at the host's LAN address ($proto)" "$out" ;;
    *) ok "inbound: a session listener does not answer a host process at the host's LAN address ($proto: $out)" ;;
    esac
    expect_ok "inbound: session listener reached by its own session on 127.0.0.1 ($proto)" "$A" 0 $GID $proto 127.0.0.1 8801
    expect_fast_reject "loopback: the session cannot reach the host's LAN address through lo ($proto)" "$A" 0 $GID $proto 192.168.77.1 8802
    expect_fast_reject "loopback: a session that may listen still cannot reach a host service on 127.0.0.1 ($proto)" "$A" 0 $GID $proto 127.0.0.1 7778
done
c=$(NFT list chain inet lianyaohu "lo-a" | grep -c 'counter packets [1-9]')
[ "$c" -ge 2 ] && ok "loopback: chain lo-a accepted its own and refused the host's ($c rules hit)" || bad "loopback: chain lo-a counted" "$(NFT list chain inet lianyaohu lo-a)"
# A session cannot make itself the reply side of a flow to reach a host
# service at the host's LAN address through lo: it sends from one of its
# sockets to another with that address forged as the source (IP_PKTINFO),
# then answers it from the other socket.
serve "$MAIN" 192.168.77.1 8803
serve "$MAIN" fd77::1 8803
for f in "$TMP/serve.$MAIN.192.168.77.1.8803" "$TMP/serve.$MAIN.fd77::1.8803"; do
    for _ in $(seq 1 50); do grep -q serving "$f" && break; sleep 0.1; done
done
FORGE='import socket, struct, sys
fam = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
lo = "::1" if fam == socket.AF_INET6 else "127.0.0.1"
svc, port = sys.argv[1], int(sys.argv[2])
s2 = socket.socket(fam, socket.SOCK_DGRAM); s2.bind((lo, port + 100)); s2.settimeout(1)
s1 = socket.socket(fam, socket.SOCK_DGRAM); s1.bind((lo, port))
if fam == socket.AF_INET:
    cm = (socket.IPPROTO_IP, 8, struct.pack("I4s4s", 0, socket.inet_aton(svc), bytes(4)))
else:
    cm = (socket.IPPROTO_IPV6, socket.IPV6_PKTINFO, socket.inet_pton(fam, svc) + struct.pack("I", 0))
s1.sendmsg([b"prime"], [cm], 0, (lo, port + 100))
try:
    print("primed", s2.recvfrom(64)[1][0])
    s2.sendto(b"hello", (svc, port)); print("answer", s2.recvfrom(64)[0])
except OSError as e:
    print("refused", e)'
for svc in 192.168.77.1 fd77::1; do
    out=$(timeout 10 nsenter --net="/run/netns/$MAIN" sh -c 'echo $$ > "$1/cgroup.procs" || exit 99; shift; exec "$@"' \
        sh "$A" setpriv --reuid=0 --regid=$GID --clear-groups /usr/bin/python3 -c "$FORGE" "$svc" 8803 2>&1)
    if grep -q "^primed $svc" <<<"$out" && ! grep -q "^answer" <<<"$out"; then
        ok "loopback: a forged reply-side flow does not reach the host's service at $svc ($(tail -n 1 <<<"$out"))"
    else
        bad "loopback: a forged reply-side flow does not reach the host's service at $svc" "$(tr '\n' '|' <<<"$out")"
    fi
done
# Root deletes session a's element of map loopback: its flows through lo still
# carry its mark, and no chain lo-a judges them on input. Chain input refuses
# them (at once: the refusal's answers pass), never lets them land on a host
# service; the element put back, lo-a judges again.
LOMARK=$(NFT list map inet lianyaohu loopback | grep -Eo '0x[0-9a-f]+ : jump lo-a\b' | grep -Eo '^0x[0-9a-f]+')
if [ -n "$LOMARK" ] && NFT delete element inet lianyaohu loopback "{ $LOMARK }"; then
    ok "loopback: root deleted session a's element of map loopback ($LOMARK)"
    for proto in tcp udp; do
        expect_fast_reject "loopback: without its element, session a still cannot reach a host service on 127.0.0.1 ($proto)" \
            "$A" 0 $GID $proto 127.0.0.1 8802
    done
    c=$(NFT list chain inet lianyaohu input | grep 'lyh:nosession:D' | grep -Ec 'ct mark (0x80000000/2|& 0xc0000000 == 0x80000000)')
    [ "$c" = 1 ] && ok "loopback: chain input logs such a flow under the nosession prefix" ||
        bad "loopback: chain input's rule for a flow no element takes" "$(NFT list chain inet lianyaohu input)"
    NFT add element inet lianyaohu loopback "{ $LOMARK : jump lo-a }" || bad "put session a's loopback element back"
    expect_ok "loopback: with its element back, session a reaches its own listener again" "$A" 0 $GID tcp 127.0.0.1 8801
else
    bad "loopback: delete session a's element of map loopback" "$(NFT list map inet lianyaohu loopback)"
fi
c=$(NFT list chain inet lianyaohu input | grep -c 'counter packets [1-9]')
[ "$c" -ge 2 ] && ok "inbound: chain input counted the refusals ($c rules hit)" || bad "inbound: chain input counted the refusals" "$(NFT list chain inet lianyaohu input)"
# Second layer alone: without chain input's rules the listener sees the SYN
# and the datagram, but its answers (direction reply, not on lo) are dropped.
NFT flush chain inet lianyaohu input
expect_from "reply drop alone: LAN TCP handshake never completes" timeout "$LAN" tcp 192.168.77.1 8801
expect_from "reply drop alone: LAN UDP gets no answer" timeout "$LAN" udp 192.168.77.1 8801
expect_from "reply drop alone: VPN side v6 TCP handshake never completes" timeout "$EXIT" tcp 2a0e:77::1 8801
# ... and, with nothing marking a host process's flow as served by the session,
# the session may not answer it on lo either: closed, not open
out=$(run_probe "$NONE" 0 0 tcp 127.0.0.1 8801)
case $out in
"ok "*) bad "reply drop alone: without chain input the session answers nobody on lo" "$out" ;;
*) ok "reply drop alone: without chain input the session answers nobody on lo ($out)" ;;
esac
expect_eq "emptied chain input is rebuilt" "$(T base "${BASE[@]}" 2>&1)" rebuilt
expect_from "after the rebuild: LAN refused again" refused "$LAN" tcp 192.168.77.1 8801
NFT delete chain inet lianyaohu input
expect_eq "missing chain input is rebuilt" "$(T base "${BASE[@]}" 2>&1)" rebuilt
expect_eq "base without inbound: chain input is removed" "$(T base --level "$LEVEL" 2>&1)" rebuilt
NFT list chain inet lianyaohu input >/dev/null 2>&1 && bad "chain input gone without inbound" || ok "chain input gone without inbound"
expect_eq "base with inbound again" "$(T base "${BASE[@]}" 2>&1)" rebuilt

# ---- tampering: rebuild, fail closed ------------------------------------------------------------
T add-session a "$IDA" tun0 >/dev/null
NFT flush table inet lianyaohu
expect_eq "flushed table is rebuilt" "$(T base "${BASE[@]}" 2>&1)" rebuilt
expect_fast_reject "after rebuild: session chain gone, guarded socket rejected" "$A" 0 $GID tcp 11.77.0.1 7777
NFT flush set inet lianyaohu lan4
expect_eq "emptied lan4 is rebuilt" "$(T base "${BASE[@]}" 2>&1)" rebuilt
NFT insert rule inet lianyaohu output accept
expect_eq "foreign rule in output: rebuilt" "$(T base "${BASE[@]}" 2>&1)" rebuilt
T delete-table && ok "delete table" || bad "delete table"
NFT list table inet lianyaohu >/dev/null 2>&1 && bad "table gone" || ok "table gone"
expect_eq "missing table is created" "$(T base "${BASE[@]}" 2>&1)" created

# ---- the data layout (docs/guard-as-data.md) ----------------------------------------------
# (lyhd's layout for a session of the default policy.) Sessions c and d (cgroups sess-c, sess-d) as data, d
# with IPv6 blocked, in <p>-data: first from the rendered text (nft reads a cgroupsv2
# value as a path below /sys/fs/cgroup), then through nft.c, which must install the
# same table; the probes run against nft.c's.
case $CGMNT in
/sys/fs/cgroup | /sys/fs/cgroup/*) REL=${CGP#/sys/fs/cgroup/} ;;
*) REL="" ;;
esac
# nsenter: ip netns exec remounts /sys, and nft reads cgroup paths there
DN() { nsenter --net="/run/netns/$DATA" nft "$@"; }
# data_elem VERB SET KEY: add or delete one element of session c or d
data_elem() { DN "$1" element inet lianyaohu "$2" "{ $3 }"; }
if [ -z "$REL" ]; then
    echo "note: the data layout's section needs the cgroup2 hierarchy below /sys/fs/cgroup; not run"
else
    DBASE=(--level "$LEVEL" --inbound "$IDBASE" "$REL" --dns --data)
    { "$TOOL" render-base "${DBASE[@]}" &&
        "$TOOL" render-data c "$IDC" tun0 --loopback "$LEVEL" "$IDBASE" --dns-port 5353 --cgroup-path "$REL/sess-c" &&
        "$TOOL" render-data d "$IDD" tun0 --loopback "$LEVEL" "$IDBASE" --dns-port 5354 --cgroup-path "$REL/sess-d" \
            --block-ipv6; } >"$TMP/data.nft"
    if DN -f "$TMP/data.nft" 2>"$TMP/data.err"; then
        ok "data: the rendered base and two data sessions load"
    else
        bad "data: the rendered base and two data sessions load" "$(head -n 3 "$TMP/data.err" | tr '\n' '|')"
    fi
    # the same base refuses a session that is not the default policy
    if "$TOOL" render-data e 4242 tun0 --loopback "$LEVEL" "$IDBASE" --dns-port 5355 --deny 11.77.0.1/32 >/dev/null 2>&1 ||
        "$TOOL" render-data e 4242 tun0 --dns-port 5355 >/dev/null 2>&1 ||
        "$TOOL" render-data e 4242 tun0 --loopback "$LEVEL" "$IDBASE" >/dev/null 2>&1; then
        bad "data: a session with a list, without listeners or without a forwarder is no data session"
    else
        ok "data: a session with a list, without listeners or without a forwarder is no data session"
    fi
    CGC="$REL/sess-c"
    DN list table inet lianyaohu 2>&1 | norm >"$TMP/data.text"
    DT() { nsenter --net="/run/netns/$DATA" "$TOOL" "$@"; }
    DSESS_C=(c "$IDC" tun0 --loopback "$LEVEL" "$IDBASE" --dns-port 5353)
    DSESS_D=(d "$IDD" tun0 --loopback "$LEVEL" "$IDBASE" --dns-port 5354 --block-ipv6)
    DN delete table inet lianyaohu
    expect_eq "data: nft.c creates the base" "$(DT base "${DBASE[@]}" 2>&1)" created
    DT add-data "${DSESS_C[@]}" && DT add-data "${DSESS_D[@]}" && ok "data: nft.c installs two data sessions" ||
        bad "data: nft.c installs two data sessions"
    if diff "$TMP/data.text" <(DN list table inet lianyaohu 2>&1 | norm) >"$TMP/data.diff"; then
        ok "data: nft.c installed exactly what the text says (sets, maps, chains, objects, elements)"
    else
        bad "data: nft.c installed exactly what the text says" "$(head -n 8 "$TMP/data.diff" | tr '\n' '|')"
    fi
    expect_eq "data: the base with the data layout is unchanged on a second look" "$(DT base "${DBASE[@]}" 2>&1)" unchanged
    before=$(DN list table inet lianyaohu | norm)
    out=$(DT add-data "${DSESS_C[@]}" 2>&1) && bad "data: a second install of c fails" ||
        ok "data: a second install of c fails (${out#error: })"
    expect_eq "data: ... and changes nothing" "$(DN list table inet lianyaohu | norm)" "$before"
    DN list table inet lianyaohu >/dev/null 2>&1 || REL=""
fi
if [ -n "$REL" ]; then
    PNS=$DATA
    nflog_start "$DATA" "$TMP/nflog.data"
    expect_ok "data: c reaches the VPN (tcp)" "$C" 0 $GID tcp 11.77.0.1 7777
    expect_ok "data: c reaches the VPN (udp)" "$C" 0 $GID udp 11.77.0.1 7777
    expect_ok "data: c reaches the VPN over IPv6" "$C" 0 $GID tcp 2a0e:77::2 7777
    expect_ok "data: d reaches the VPN over IPv4" "$D" 0 $GID tcp 11.77.0.1 7777
    expect_fast_reject "data: d has IPv6 blocked (no dvpn6 element)" "$D" 0 $GID tcp 2a0e:77::2 7777
    expect_fast_reject "data: c is refused the LAN (tcp)" "$C" 0 $GID tcp 192.168.78.2 7777
    expect_fast_reject "data: c is refused the LAN (udp)" "$C" 0 $GID udp 192.168.78.2 7777
    expect_fast_reject "data: c is refused a host service on 127.0.0.1" "$C" 0 $GID tcp 127.0.0.1 7778
    expect_fast_reject "data: c is refused a host service on 127.0.0.1 (udp)" "$C" 0 $GID udp 127.0.0.1 7778
    expect_fast_reject "data: a guarded socket in no session's cgroup is refused" "$NONE" 0 $GID tcp 11.77.0.1 7777
    # DNS: port 53 anywhere goes to the session's own forwarder, and only there
    expect_ok "data: c's DNS (udp, any address) reaches its forwarder" "$C" 0 $GID udp 11.77.0.1 53
    expect_ok "data: c's DNS (tcp) reaches its forwarder" "$C" 0 $GID tcp 11.77.0.1 53
    expect_ok "data: d's DNS reaches its forwarder" "$D" 0 $GID udp 192.168.78.2 53
    out=$(run_probe "$C" 0 $GID udp 127.0.0.1 5354)
    case $out in
    "ok "*) bad "data: c cannot reach d's forwarder directly" "$out" ;;
    *) ok "data: c cannot reach d's forwarder directly ($out)" ;;
    esac
    # a chain session beside them, in the same table: each decides its own
    DT add-session a "$IDA" tun0 --loopback "$LEVEL" "$IDBASE" && ok "data: a chain session a beside them" ||
        bad "data: a chain session a beside them"
    expect_ok "data: chain session a reaches the VPN" "$A" 0 $GID tcp 11.77.0.1 7777
    expect_fast_reject "data: chain session a is refused the LAN" "$A" 0 $GID tcp 192.168.78.2 7777
    out=$(DT add-session z "$IDC" tun0 2>&1) && bad "data: a chain session cannot take a data session's cgroup" ||
        ok "data: a chain session cannot take a data session's cgroup (${out#error: })"
    # listeners: c's own server is c's alone, and a host process may reach it
    serve_in "$C" 0 $GID 127.0.0.1 8811
    serve_in "$C" 0 $GID ::1 8811
    expect_ok "data: c reaches its own listener (tcp)" "$C" 0 $GID tcp 127.0.0.1 8811
    expect_ok "data: c reaches its own listener (udp)" "$C" 0 $GID udp 127.0.0.1 8811
    expect_ok "data: c reaches its own listener on ::1" "$C" 0 $GID tcp ::1 8811
    pkts() { DN list counter inet lianyaohu "$1" 2>/dev/null | grep -Eo 'packets [0-9]+' | grep -Eo '[0-9]+'; }
    before=$(pkts idrop-c)
    expect_fast_reject "data: d is refused c's listener (tcp)" "$D" 0 $GID tcp 127.0.0.1 8811
    expect_fast_reject "data: d is refused c's listener (udp)" "$D" 0 $GID udp 127.0.0.1 8811
    expect_eq "data: d's refusals on input are not counted as c's" "$(pkts idrop-c)" "${before:-missing}"
    expect_ok "data: a host process reaches c's listener" "$NONE" 0 0 tcp 127.0.0.1 8811
    expect_ok "data: a host process reaches c's listener (udp)" "$NONE" 0 0 udp 127.0.0.1 8811
    serve_in "$A" 0 $GID 127.0.0.1 8812
    expect_ok "data: chain session a reaches its own listener" "$A" 0 $GID tcp 127.0.0.1 8812
    expect_fast_reject "data: chain session a is refused c's listener" "$A" 0 $GID tcp 127.0.0.1 8811
    expect_fast_reject "data: c is refused chain session a's listener" "$C" 0 $GID tcp 127.0.0.1 8812
    # records and counts: each bucket the session's own (refusals through lo
    # are decided on input: idrop)
    for obj in acct-c anew-c lnew-c refused-c idrop-c idrop-d; do
        n=$(pkts "$obj")
        [ "${n:-0}" -gt 0 ] 2>/dev/null && ok "data: counter $obj counted ($n packets)" ||
            bad "data: counter $obj counted" "$(DN list counter inet lianyaohu "$obj" 2>&1 | tr '\n' ' ')"
    done
    for pfx in "lyh:c:A " "lyh:c:D " "lyh:d:D "; do
        grep -qF "[$pfx]" "$TMP/nflog.data" && ok "data: NFLOG has a record prefixed '$pfx'" ||
            bad "data: NFLOG has a record prefixed '$pfx'" "$(sort "$TMP/nflog.data" | uniq -c | head -n 5 | tr '\n' '|')"
    done
    # presence opens, absence closes: root deletes one element, the access it
    # gave is gone at once; put back, it returns
    absent() { # NAME SET KEY PROBE-ARGS...
        local name=$1 set=$2 key=$3
        shift 3
        if data_elem delete "$set" "$key"; then
            expect_fast_reject "data: without its $set element, $name is refused" "$@"
            data_elem add "$set" "$key" || bad "data: put the $set element back"
            expect_ok "data: with its $set element back, $name is reached again" "$@"
        else
            bad "data: delete c's element of $set"
        fi
    }
    absent "the VPN" dvpn "\"$CGC\" . \"tun0\"" "$C" 0 $GID tcp 11.77.0.1 7777
    absent "the VPN (IPv6)" dvpn6 "\"$CGC\" . \"tun0\"" "$C" 0 $GID tcp 2a0e:77::2 7777
    absent "the VPN (its counter)" acct "\"$CGC\" : \"acct-c\"" "$C" 0 $GID udp 11.77.0.1 7777
    absent "anything" dlive "\"$CGC\"" "$C" 0 $GID tcp 11.77.0.1 7777
    absent "the VPN (its new flows' counter)" anew "\"$CGC\" : \"anew-c\"" "$C" 0 $GID udp 11.77.0.1 7777
    absent "its DNS (the redirection)" dnsport "\"$CGC\" : 5353" "$C" 0 $GID udp 11.77.0.1 53
    absent "its DNS (its forwarder's port)" dfwd "5353 . \"$CGC\"" "$C" 0 $GID udp 11.77.0.1 53
    absent "its DNS (its counter)" dnsc "\"$CGC\" : \"dnsc-c\"" "$C" 0 $GID tcp 11.77.0.1 53
    LOC=$(DN list map inet lianyaohu dlomark | grep -Eo ': 0x[0-9a-f]+' | head -n 1)
    absent "its own listener (its new flows' mark)" dlomark "\"$CGC\" $LOC" "$C" 0 $GID tcp 127.0.0.1 8811
    absent "its own listener (its mark paired with its cgroup)" downmark "${LOC#: } . \"$CGC\"" "$C" 0 $GID udp 127.0.0.1 8811
    # its slot is taken in map loopback (a chain session cannot have it too),
    # and that element decides nothing: without it chain dlo still judges
    CMARK=${LOC#: }
    out=$(DT add-session z "$IDC" tun0 --loopback "$LEVEL" "$IDBASE" 2>&1) &&
        bad "data: a chain session cannot take a data session's loopback slot" ||
        ok "data: a chain session cannot take a data session's loopback slot (${out#error: })"
    if data_elem delete loopback "$CMARK"; then
        expect_ok "data: without its loopback element, c still reaches its own listener" "$C" 0 $GID tcp 127.0.0.1 8811
        expect_fast_reject "data: without its loopback element, d is still refused c's listener" "$D" 0 $GID tcp 127.0.0.1 8811
        data_elem add loopback "$CMARK : continue"
    else
        bad "data: delete c's element of map loopback"
    fi
    # a lost counter or log jump stops the count or the record, never the decision
    if data_elem delete refused "\"$CGC\" : \"refused-c\""; then
        expect_fast_reject "data: without its refused element, c is still refused the LAN" "$C" 0 $GID tcp 192.168.78.2 7777
        data_elem add refused "\"$CGC\" : \"refused-c\""
    fi
    if data_elem delete dlog "\"$CGC\" : jump d-c"; then
        expect_fast_reject "data: without its dlog element, c is still refused the LAN" "$C" 0 $GID tcp 192.168.78.2 7777
        data_elem add dlog "\"$CGC\" : jump d-c"
    fi
    if data_elem delete alog "\"$CGC\" : jump a-c"; then
        expect_ok "data: without its alog element, c still reaches the VPN" "$C" 0 $GID tcp 11.77.0.1 7777
        data_elem add alog "\"$CGC\" : jump a-c"
    fi
    # removal: all of c and nothing of d, even with a piece of c gone before;
    # a second removal fails and changes nothing
    data_elem delete alog "\"$CGC\" : jump a-c"
    out=$(DT del-data "${DSESS_C[@]}" 2>&1)
    expect_eq "data: nft.c removes session c, with a piece gone, piece by piece" "$?:$out" "0:piece by piece"
    left=$(DN list table inet lianyaohu | grep -Ec -- '-c\b|sess-c')
    expect_eq "data: nothing of c is left (elements, chains, objects)" "$left" 0
    expect_fast_reject "data: c, removed, is refused the VPN" "$C" 0 $GID tcp 11.77.0.1 7777
    expect_ok "data: d still reaches the VPN" "$D" 0 $GID tcp 11.77.0.1 7777
    before=$(DN list table inet lianyaohu | norm)
    out=$(DT del-data "${DSESS_C[@]}" 2>&1) && bad "data: a second removal of c fails" ||
        ok "data: a second removal of c fails (${out#error: })"
    expect_eq "data: ... and changes nothing" "$(DN list table inet lianyaohu | norm)" "$before"
    DN flush chain inet lianyaohu dlo
    expect_eq "data: an emptied chain dlo is rebuilt" "$(DT base "${DBASE[@]}" 2>&1)" rebuilt
    DN flush chain inet lianyaohu dalog
    expect_eq "data: an emptied chain dalog is rebuilt" "$(DT base "${DBASE[@]}" 2>&1)" rebuilt
    expect_eq "data: ... with its lookup of map alog" \
        "$(DN list chain inet lianyaohu dalog | grep -c 'vmap @alog')" 1
    PNS=""
fi

echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
