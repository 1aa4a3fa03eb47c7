#!/usr/bin/env bash
# bench/guard_layouts.sh [ROUNDS] [OTHERS]: what one session's install and removal
# cost the kernel in three layouts of the guard's table (bench/guard_layouts.py),
# alone and beside OTHERS sessions of the same layout (default 20 rounds, 1000).
#
# The figure is the time nft's batch spends in sendmsg(2) (strace -T): nf_tables
# runs the whole transaction, its validation and its commit inside that call, so
# nft's own parsing and cache reads stay out. Medians of ROUNDS installs and removals.
#
# Root only; needs nft, strace and /usr/bin/python3. Everything happens in a network
# namespace made here (lyhgl<pid>). The sessions' cgroups are empty directories
# /sys/fs/cgroup/lyhgl<pid>/b/s<K>: nft takes a cgroupsv2 value from stat(2) of
# /sys/fs/cgroup/PATH, and no process ever joins them. Both are removed on exit,
# whatever happens. Not part of bench/run: it
# measures layouts lyhd does not use (docs/performance.md, "A session as data").
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROUNDS=${1:-20}
OTHERS=${2:-1000}
case $ROUNDS$OTHERS in *[!0-9]*) echo "usage: $0 [ROUNDS] [OTHERS]" >&2; exit 2 ;; esac
if [ "$ROUNDS" -lt 1 ] || [ "$ROUNDS" -gt 1000 ] || [ "$OTHERS" -gt 5000 ]; then
    echo "guard_layouts: ROUNDS 1..1000, OTHERS 0..5000" >&2
    exit 2
fi
[ "$(id -u)" = 0 ] || { echo "guard_layouts: run it as root" >&2; exit 77; }
for t in nft:nftables strace:strace ip:iproute2 nsenter:util-linux /usr/bin/python3:python3; do
    command -v "${t%%:*}" >/dev/null ||
        { echo "guard_layouts: ${t%%:*} is missing (apt-get install ${t#*:})" >&2; exit 77; }
done
[ -d /sys/fs/cgroup ] || { echo "guard_layouts: needs /sys/fs/cgroup" >&2; exit 77; }

NS=lyhgl$$
CGNAME=lyhgl$$
CG=/sys/fs/cgroup/$CGNAME
if [ -e "$CG" ] || ip netns list | grep -qw "$NS"; then
    echo "guard_layouts: $CG or namespace $NS exists already" >&2
    exit 1
fi
TMP=$(mktemp -d /tmp/lyh-guardlayouts.XXXXXX) || exit 1
cleanup() {
    ip netns del "$NS" 2>/dev/null
    if [ -d "$CG" ]; then
        find "$CG" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null
        rmdir "$CG" 2>/dev/null
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$NS" || exit 1
IN=(nsenter --net="/run/netns/$NS")
mkdir -p "$CG/b" || exit 1
for ((k = 0; k <= OTHERS; k++)); do mkdir "$CG/b/s$k" || exit 1; done

gen() { /usr/bin/python3 "$HERE/guard_layouts.py" "$CGNAME" "$@"; }
# the summed sendmsg time of one nft -f, in microseconds
timed() {
    "${IN[@]}" strace -T -e trace=sendmsg -o "$TMP/st" nft -f "$1" || return 1
    awk -F'<' '/^sendmsg/ { sub(/>.*/, "", $NF); s += $NF } END { printf "%d\n", s * 1e6 }' "$TMP/st"
}
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

printf '%-6s %8s %12s %12s %8s\n' layout others install_us remove_us handles
for lay in C H D P; do
    for others in 0 "$OTHERS"; do
        "${IN[@]}" nft flush ruleset || exit 1
        gen "$lay" base > "$TMP/base.nft" && "${IN[@]}" nft -f "$TMP/base.nft" || exit 1
        if [ "$others" -gt 0 ]; then
            gen "$lay" many "$others" > "$TMP/many.nft" && "${IN[@]}" nft -f "$TMP/many.nft" || exit 1
        fi
        gen "$lay" sess "$others" > "$TMP/add.nft" && gen "$lay" del "$others" > "$TMP/del.nft" || exit 1
        : > "$TMP/a"; : > "$TMP/d"
        for ((r = 0; r < ROUNDS; r++)); do
            timed "$TMP/add.nft" >> "$TMP/a" || exit 1
            timed "$TMP/del.nft" >> "$TMP/d" || exit 1
        done
        printf '%-6s %8d %12s %12s %8s\n' "$lay" "$others" "$(median < "$TMP/a")" "$(median < "$TMP/d")" \
            "$("${IN[@]}" nft -a list table inet lyhgl | grep -c 'handle')"
    done
done
"${IN[@]}" nft flush ruleset
