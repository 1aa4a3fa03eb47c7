#!/usr/bin/env bash
# bench/guard_layouts.sh [ROUNDS] [OTHERS]
# bench/guard_layouts.sh --data BUILD_DIR [ROUNDS]
#
# Layouts of the guard's table (bench/guard_layouts.py; docs/performance.md, "A session
# as data"; docs/guard-as-data.md). Not part of bench/run: lyhd uses layout C only.
#
# Without --data: what one session's install and removal cost the kernel in each
# layout, alone and beside OTHERS sessions of the same layout (default 20 rounds,
# 1000 others). The figure is the time nft's batch spends in sendmsg(2) (strace -T):
# nf_tables runs the whole transaction, its validation and its commit inside that
# call, so nft's own parsing and cache reads stay out. Medians of ROUNDS.
#
# --data: the data path of layouts C and H, each with 1000 sessions installed: iperf3
# and short TCP flows (BUILD_DIR's nft_guard_tool connrate) from session 0's cgroup
# out through tun0, rounds interleaved (default 5), medians. First the same probes
# through both must agree: session 0 reaches the exit's address and no LAN address,
# and a socket in a cgroup that is no session's reaches nothing.
#
# Root only; needs nft, strace (or, with --data, iperf3 and setpriv) and
# /usr/bin/python3. Everything happens in network namespaces made here, lyhgl<pid>
# (--data: lyhgl{C,H}<pid>, each with a veth tun0 into lyhgl{C,H}x<pid>, 11.77.0.2 ->
# 11.77.0.1). The sessions' cgroups are directories lyhgl<pid>/b/s<K>: nft takes a
# cgroupsv2 value from stat(2) of /sys/fs/cgroup/PATH. Without --data they are empty
# directories right below /sys/fs/cgroup; with --data they are real cgroups (in the
# cgroup v2 hierarchy, wherever it is mounted below /sys/fs/cgroup), and the measuring
# processes run in them as nobody with the guard's gid 2000000. All of it, and the
# servers started here, is removed on exit, whatever happens.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DATA=0 BUILD=""
if [ "${1:-}" = --data ]; then
    DATA=1 BUILD=${2:-}
    shift 2 2>/dev/null || shift
fi
ROUNDS=${1:-$([ "$DATA" = 1 ] && echo 5 || echo 20)}
OTHERS=${2:-1000}
TOOL=$BUILD/tests/e2e/nft_guard_tool
usage() {
    echo "usage: $0 [ROUNDS] [OTHERS]  |  $0 --data BUILD_DIR [ROUNDS]" >&2
    exit 2
}
case $ROUNDS$OTHERS in '' | *[!0-9]*) usage ;; esac
if [ "$ROUNDS" -lt 1 ] || [ "$ROUNDS" -gt 1000 ] || [ "$OTHERS" -gt 5000 ]; then
    echo "guard_layouts: ROUNDS 1..1000, OTHERS 0..5000" >&2
    exit 2
fi
if [ "$DATA" = 1 ] && [ "$ROUNDS" -gt 50 ]; then
    echo "guard_layouts: --data takes at most 50 rounds (its servers stop after 15 minutes)" >&2
    exit 2
fi
if [ "$DATA" = 1 ] && { [ -z "$BUILD" ] || [ ! -x "$TOOL" ]; }; then
    echo "guard_layouts: --data needs a build directory with tests/e2e/nft_guard_tool" >&2
    usage
fi
[ "$(id -u)" = 0 ] || { echo "guard_layouts: run it as root" >&2; exit 77; }
NEED=(nft:nftables ip:iproute2 nsenter:util-linux /usr/bin/python3:python3)
if [ "$DATA" = 1 ]; then NEED+=(iperf3:iperf3 setpriv:util-linux); else NEED+=(strace:strace); fi
for t in "${NEED[@]}"; do
    command -v "${t%%:*}" >/dev/null ||
        { echo "guard_layouts: ${t%%:*} is missing (apt-get install ${t#*:})" >&2; exit 77; }
done
[ -d /sys/fs/cgroup ] || { echo "guard_layouts: needs /sys/fs/cgroup" >&2; exit 77; }
REL=""
if [ "$DATA" = 1 ]; then
    CG2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
    case $CG2 in
    /sys/fs/cgroup) ;;
    /sys/fs/cgroup/*) REL=${CG2#/sys/fs/cgroup/}/ ;;
    *) echo "guard_layouts: --data needs the cgroup v2 hierarchy at or below /sys/fs/cgroup" >&2; exit 77 ;;
    esac
fi
CGNAME=${REL}lyhgl$$
CG=/sys/fs/cgroup/$CGNAME
NSS=(lyhgl$$)
[ "$DATA" = 1 ] && NSS=(lyhglC$$ lyhglCx$$ lyhglH$$ lyhglHx$$)
for n in "${NSS[@]}"; do
    if ip netns list | grep -qw "$n"; then echo "guard_layouts: namespace $n exists already" >&2; exit 1; fi
done
[ ! -e "$CG" ] || { echo "guard_layouts: $CG exists already" >&2; exit 1; }
TMP=$(mktemp -d /tmp/lyh-guardlayouts.XXXXXX) || exit 1
SRV=()
cleanup() {
    local p n
    for p in "${SRV[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${SRV[@]}"; do wait "$p" 2>/dev/null; done
    for n in "${NSS[@]}"; do ip netns del "$n" 2>/dev/null; done
    if [ -d "$CG" ]; then
        # the measuring processes ran to their end in the foreground: the cgroups are empty
        find "$CG" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null
        rmdir "$CG" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$DATA" = 1 ] && OTHERS=1000
mkdir -p "$CG/b" || exit 1
for ((k = 0; k <= OTHERS; k++)); do mkdir "$CG/b/s$k" || exit 1; done
gen() { /usr/bin/python3 "$HERE/guard_layouts.py" "$CGNAME" "$@"; }
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

if [ "$DATA" = 0 ]; then
    IN=(nsenter --net="/run/netns/${NSS[0]}")
    ip netns add "${NSS[0]}" || exit 1
    # the summed sendmsg time of one nft -f, in microseconds
    timed() {
        "${IN[@]}" strace -T -e trace=sendmsg -o "$TMP/st" nft -f "$1" || return 1
        awk -F'<' '/^sendmsg/ { sub(/>.*/, "", $NF); s += $NF } END { printf "%d\n", s * 1e6 }' "$TMP/st"
    }
    printf '%-6s %8s %12s %12s %8s\n' layout others install_us remove_us handles
    for lay in C H D P; do
        for others in 0 "$OTHERS"; do
            "${IN[@]}" nft flush ruleset || exit 1
            gen "$lay" base > "$TMP/base.nft" && "${IN[@]}" nft -f "$TMP/base.nft" || exit 1
            if [ "$others" -gt 0 ]; then
                gen "$lay" many "$others" > "$TMP/many.nft" && "${IN[@]}" nft -f "$TMP/many.nft" || exit 1
            fi
            gen "$lay" sess "$others" > "$TMP/add.nft" && gen "$lay" del "$others" > "$TMP/del.nft" || exit 1
            : > "$TMP/a"
            : > "$TMP/d"
            for ((r = 0; r < ROUNDS; r++)); do
                timed "$TMP/add.nft" >> "$TMP/a" || exit 1
                timed "$TMP/del.nft" >> "$TMP/d" || exit 1
            done
            printf '%-6s %8d %12s %12s %8s\n' "$lay" "$others" "$(median "$TMP/a")" "$(median "$TMP/d")" \
                "$("${IN[@]}" nft -a list table inet lyhgl | grep -c 'handle')"
        done
    done
    "${IN[@]}" nft flush ruleset
    exit 0
fi

for L in C H; do
    A=lyhgl$L$$ B=lyhgl${L}x$$
    ip netns add "$A" && ip netns add "$B" || exit 1
    ip link add tun0 netns "$A" type veth peer name eth0 netns "$B" || exit 1
    nsenter --net="/run/netns/$A" sh -c 'ip link set lo up && ip addr add 11.77.0.2/24 dev tun0 &&
        ip link set tun0 up && ip route add default dev tun0' || exit 1
    nsenter --net="/run/netns/$B" sh -c 'ip link set lo up && ip addr add 11.77.0.1/24 dev eth0 &&
        ip link set eth0 up' || exit 1
    gen "$L" base > "$TMP/base.nft" && nsenter --net="/run/netns/$A" nft -f "$TMP/base.nft" || exit 1
    gen "$L" many 1000 > "$TMP/many.nft" && nsenter --net="/run/netns/$A" nft -f "$TMP/many.nft" || exit 1
    timeout 900 nsenter --net="/run/netns/$B" iperf3 -s -B 11.77.0.1 >/dev/null 2>&1 &
    SRV+=($!)
    timeout 900 nsenter --net="/run/netns/$B" "$TOOL" serve 11.77.0.1 7001 890 >/dev/null 2>&1 &
    SRV+=($!)
done
sleep 1

# in_cg LAYOUT K CMD...: CMD in cgroup s<K>, in the layout's namespace, as nobody
# with the guard's gid (the shell moves itself there, then execs)
in_cg() {
    local L=$1 K=$2
    shift 2
    sh -c 'echo $$ > "$1" && n=$2 && shift 2 &&
        exec nsenter --net="$n" setpriv --reuid=65534 --regid=2000000 --clear-groups -- "$@"' \
        sh "$CG/b/s$K/cgroup.procs" "/run/netns/lyhgl$L$$" "$@"
}
# the probes: "<cgroup> <address> <port>" and what each must give
fail=0
while read -r k addr port want; do
    for L in C H; do
        got=$(in_cg "$L" "$k" "$TOOL" probe tcp "$addr" "$port" 1000 | awk '{ print $1 }')
        if [ "$got" != "$want" ]; then
            echo "guard_layouts: layout $L, cgroup s$k to $addr:$port gave '$got', not $want" >&2
            fail=1
        fi
    done
done <<'EOF'
0 11.77.0.1 7001 ok
0 10.1.2.3 7001 refused
0 192.168.1.1 7001 refused
1000 11.77.0.1 7001 refused
EOF
[ "$fail" = 0 ] || exit 1
echo "probes: both layouts let session 0 reach 11.77.0.1 only, and refused a cgroup that is no session's"

for ((r = 0; r < ROUNDS; r++)); do
    for L in C H; do
        in_cg "$L" 0 iperf3 -c 11.77.0.1 -t 3 -J > "$TMP/ip.json" || exit 1
        /usr/bin/python3 -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e6))' \
            "$TMP/ip.json" >> "$TMP/ip.$L" || exit 1
        in_cg "$L" 0 "$TOOL" connrate tcp 11.77.0.1 7001 2000 | awk '{ print $2 }' >> "$TMP/cr.$L" || exit 1
    done
done
printf '%-7s %14s %18s\n' layout iperf3_mbit tcp_flows_per_2s
for L in C H; do printf '%-7s %14s %18s\n' "$L" "$(median "$TMP/ip.$L")" "$(median "$TMP/cr.$L")"; done
