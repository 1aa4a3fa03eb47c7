# shellcheck shell=bash
# tests/e2e/lib.sh: shared shell functions for end-to-end tests that drive the
# real lyhd and lyh inside throwaway network namespaces.
#
# Source it from a bash script (after `set -u` if you like), then:
#
#   lyh_init BUILD_DIR          check root and tools, find lyhd/lyh/nft_guard_tool
#   lyh_layout_up PREFIX [V6]   namespaces PREFIX-main/-exit/-lan, links, servers
#   lyh_user_create             an unprivileged test user with a home
#   lyh_daemon_start            lyhd inside PREFIX-main, in a cgroup of its own
#   ... t_pass / t_fail ...
#   t_done; exit $?             prints "N passed, M failed"
#
# Safety rules, by construction:
#  - Every network change names one of the namespaces created here (ip -n NS,
#    ip netns exec NS, nsenter --net=/run/netns/NS). The host namespace's
#    firewall, routes and interfaces are never touched. nsenter and
#    `ip link set netns` are only ever given namespace names/paths, never pids.
#  - Traffic goes only to loopback or to addresses that exist only in these
#    namespaces (10.77.0.0/30, 11.77.0.1, 12.77.0.1, 192.168.77.0/24,
#    2a0e:77::/64, fd77::/64).
#  - Every loop is bounded in count and time.
#  - The EXIT trap installed by lyh_init kills only processes this library
#    started (by pid, or by cgroup.kill of the cgroups its own daemons made),
#    deletes only its namespaces, removes its users, temp dirs and cgroups,
#    also on failure, SIGINT or SIGTERM.
#
# Globals set here (read them, do not assign them):
#   LYH_BUILD LYH_LYHD LYH_LYH LYH_TOOL     binaries (LYH_LYH is a copy anyone can run)
#   LYH_PROBE_TOOL LYH_SANITIZED            nft_guard_tool for inside the sandbox; 1 = ASan build
#   LYH_TMP                                 root-owned scratch dir of this run (0755)
#   LYH_P LYH_MAIN LYH_EXIT LYH_LAN         prefix and namespace names
#   LYH_SOCK LYH_STATE LYH_TMPDIR           lyhd's --socket, --state-dir, --tmp-dir
#   LYH_TMPROOT                             where lyhd puts the tmpdirs: LYH_TMPDIR/lyhd
#   LYH_DB                                  $LYH_STATE/state.db
#   LYH_CGMNT                               the cgroup2 mount point
#   LYH_DCG                                 cgroup dir the daemons run in (ours)
#   LYH_CGBASE                              $LYH_DCG/lyh: lyhd's session subtree
#   LYH_DAEMON_PID LYH_DAEMON_LOG           the current daemon and its stderr
#   LYH_USER LYH_UID LYH_GID LYH_HOME       the test user
#   LYH_GUARD_GID                           2000000 (the base; users' agents get one above)
#   LYH_GUARD_GID_MAX                       the top of the guard gid range
# Tunables (set before sourcing or before the call):
#   LYH_SERVE_SECONDS (3600)  lifetime of the echo servers
#   LYH_CMD_TIMEOUT (120)     bound for lyh_as_user / lyh_in_main commands
#   LYH_DAEMON_ARGS ()        extra lyhd arguments (array)
#   LYH_DAEMON_PREFIX ()      a command lyhd is started through (array; e.g.
#                             prlimit --nofile=80:80 --)

LYH_GUARD_GID=2000000
LYH_GUARD_GID_MAX=$((LYH_GUARD_GID + 65535)) # each user's agents get a gid above the base
LYH_SERVE_SECONDS=${LYH_SERVE_SECONDS:-3600}
LYH_CMD_TIMEOUT=${LYH_CMD_TIMEOUT:-120}
LYH_PORT=7777

LYH_BUILD="" LYH_LYHD="" LYH_LYH="" LYH_TOOL="" LYH_PROBE_TOOL="" LYH_SANITIZED=0 LYH_TMP=""
LYH_P="" LYH_MAIN="" LYH_EXIT="" LYH_LAN=""
LYH_SOCK="" LYH_STATE="" LYH_TMPDIR="" LYH_TMPROOT="" LYH_DB=""
LYH_CGMNT="" LYH_DCG="" LYH_CGBASE=""
LYH_DAEMON_PID="" LYH_DAEMON_LOG="" LYH_DAEMON_N=0
LYH_USER="" LYH_UID="" LYH_GID="" LYH_HOME=""
if ! declare -p LYH_DAEMON_ARGS >/dev/null 2>&1; then LYH_DAEMON_ARGS=(); fi
if ! declare -p LYH_DAEMON_PREFIX >/dev/null 2>&1; then LYH_DAEMON_PREFIX=(); fi

_LYH_PIDS=()      # every background process we started
_LYH_NETNS=()     # namespaces we created
_LYH_USERS=()     # users we created
_LYH_DIRS=()      # temp dirs to remove (rm -rf)
_LYH_GROUP_EXISTED=1 # did _lianyaohu exist before this run (set by lyh_init)
_LYH_PUSER_EXISTED=1 # did _lyhd (the protocol process's user) exist before this run
_LYH_CGDIRS=()    # cgroup dirs we created (removed deepest first)
_LYH_HOOKS=()     # functions to call first in cleanup
_LYH_CLEANED=0
T_PASSED=0
T_FAILED=0

# ---- accounting -------------------------------------------------------------------

# t_pass NAME: count a passed check and print "PASS NAME".
t_pass() {
    T_PASSED=$((T_PASSED + 1))
    echo "PASS $1"
}

# t_fail NAME [DETAIL]: count a failed check and print "FAIL NAME: DETAIL"
# (DETAIL is squashed onto one line and cut at 600 characters).
t_fail() {
    local d=${2:-}
    T_FAILED=$((T_FAILED + 1))
    d=$(printf '%s' "$d" | tr '\n' '|' | cut -c1-600)
    echo "FAIL $1${d:+: $d}"
}

# t_check NAME CMD...: PASS if CMD exits 0, else FAIL with its output.
# (Its locals have names no test uses, so a check's `eval '... "$out"'` reads
# the caller's variable, not an empty local.)
t_check() {
    local _tc_name=$1 _tc_out
    shift
    if _tc_out=$("$@" 2>&1); then t_pass "$_tc_name"; else t_fail "$_tc_name" "$_tc_out"; fi
}

# t_eq NAME GOT WANT: PASS if the strings are equal.
t_eq() {
    if [ "$2" = "$3" ]; then t_pass "$1"; else t_fail "$1" "got '$2', want '$3'"; fi
}

# t_done: print the final line "N passed, M failed"; returns 1 if any failed.
t_done() {
    echo "$T_PASSED passed, $T_FAILED failed"
    [ "$T_FAILED" -eq 0 ]
}

# lyh_die MSG: a setup step failed: count it, print the final line, exit 1
# (the EXIT trap still cleans up).
lyh_die() {
    t_fail "setup" "$*"
    t_done
    exit 1
}

# lyh_skip MSG: print "SKIP: MSG" and exit 77 (ctest's SKIP_RETURN_CODE).
lyh_skip() {
    echo "SKIP: $*"
    exit 77
}

# ---- small helpers ----------------------------------------------------------------

# lyh_alive PID: true if PID exists and is not a zombie.
lyh_alive() {
    local st
    [ -n "${1:-}" ] || return 1
    st=$(sed -n 's/^.*) \(.\).*$/\1/p' "/proc/$1/stat" 2>/dev/null)
    [ -n "$st" ] && [ "$st" != Z ]
}

# lyh_wait_until SECONDS CMD...: poll CMD every 0.1 s until it succeeds
# (return 0) or SECONDS have passed (return 1). Bounded in count and time.
lyh_wait_until() {
    local secs=$1 i n
    shift
    n=$((secs * 10))
    for ((i = 0; i < n; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    "$@" >/dev/null 2>&1
}

# lyh_wait_pid_gone SECONDS PID: wait until PID is gone or a zombie (return 0),
# at most SECONDS (return 1).
lyh_wait_pid_gone() {
    local secs=$1 pid=$2 i
    for ((i = 0; i < secs * 10; i++)); do
        lyh_alive "$pid" || return 0
        sleep 0.1
    done
    ! lyh_alive "$pid"
}

# lyh_track_pid PID: have cleanup kill PID (a process this script started).
lyh_track_pid() {
    _LYH_PIDS+=("$1")
}

# lyh_on_cleanup FUNC: call FUNC at the start of cleanup (before processes die).
lyh_on_cleanup() {
    _LYH_HOOKS+=("$1")
}

# lyh_stop_pid PID [SECONDS]: SIGTERM PID, wait up to SECONDS (5), then SIGKILL;
# reaps it if it is our child. Only for pids this script started.
lyh_stop_pid() {
    local pid=$1 secs=${2:-5} i
    lyh_alive "$pid" || { wait "$pid" 2>/dev/null; return 0; }
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < secs * 10; i++)); do
        lyh_alive "$pid" || break
        sleep 0.1
    done
    lyh_alive "$pid" && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 0
}

# lyh_proto_pid: the pid of the current lyhd's protocol process (its child
# running --protocol-process); fails when there is none.
lyh_proto_pid() {
    local p
    [ -n "$LYH_DAEMON_PID" ] || return 1
    for p in /proc/[0-9]*; do
        [ "$(awk '/^PPid:/ { print $2 }' "$p/status" 2>/dev/null)" = "$LYH_DAEMON_PID" ] || continue
        tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -- "--protocol-process" && { echo "${p#/proc/}"; return 0; }
    done
    return 1
}

# lyh_sanitizer_report FILE: true (and prints the first report lines) if FILE
# holds an ASan, UBSan or LeakSanitizer report.
lyh_sanitizer_report() {
    [ -f "$1" ] || return 1
    grep -qE 'ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|UndefinedBehaviorSanitizer|SUMMARY: (Address|Leak|UndefinedBehavior)Sanitizer' "$1" || return 1
    grep -m 8 -E 'Sanitizer|runtime error|#[0-9] ' "$1"
    return 0
}

# ---- init -------------------------------------------------------------------------

# lyh_init BUILD_DIR: exit 77 unless root with ip, nft, nsenter, setpriv,
# useradd, sqlite3 and a cgroup2 mount; find the binaries in BUILD_DIR
# (daemon/lyhd, cli/lyh; LYH_TOOL = tests/e2e/nft_guard_tool, else compiled
# with the build's compiler and flags into BUILD_DIR/tests/e2e/guard_nft_guard_tool;
# LYH_PROBE_TOOL = the copy to run inside the sandbox: LYH_TOOL, or in a
# sanitizer build one linked with guard_asan_defaults.c, because LeakSanitizer
# cannot run under the sandbox's seccomp filter); make LYH_TMP; install the
# cleanup traps.
lyh_init() {
    local b=${1:-} c src san
    [ "$(id -u)" = 0 ] || lyh_skip "needs root"
    [ -n "$b" ] && [ -d "$b" ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
    LYH_BUILD=$(cd "$b" && pwd)
    for c in ip nft nsenter setpriv useradd userdel sqlite3 timeout awk stat install; do
        command -v "$c" >/dev/null 2>&1 || lyh_skip "$c not installed"
    done
    LYH_LYHD=$LYH_BUILD/daemon/lyhd
    [ -x "$LYH_LYHD" ] && [ -x "$LYH_BUILD/cli/lyh" ] || lyh_skip "no lyhd/lyh in $LYH_BUILD"
    LYH_CGMNT=$(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") print $5; break } }' /proc/self/mountinfo | head -n 1)
    [ -n "$LYH_CGMNT" ] || lyh_skip "no cgroup2 mount"

    getent group _lianyaohu >/dev/null 2>&1 || _LYH_GROUP_EXISTED=0
    getent passwd _lyhd >/dev/null 2>&1 || _LYH_PUSER_EXISTED=0
    trap _lyh_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP

    LYH_TMP=$(mktemp -d /tmp/lyh-e2e.XXXXXX) || lyh_skip "mktemp failed"
    _LYH_DIRS+=("$LYH_TMP")
    chmod 0755 "$LYH_TMP"
    mkdir -m 0755 "$LYH_TMP/bin"
    install -m 0755 "$LYH_BUILD/cli/lyh" "$LYH_TMP/bin/lyh"
    LYH_LYH=$LYH_TMP/bin/lyh

    src=$(sed -n 's/^lianyaohu_SOURCE_DIR:STATIC=//p' "$LYH_BUILD/CMakeCache.txt")
    san=$(sed -n 's/^LYH_SANITIZE:BOOL=//p' "$LYH_BUILD/CMakeCache.txt")
    case $san in ON | on | TRUE | true | 1 | YES | yes) LYH_SANITIZED=1 ;; *) LYH_SANITIZED=0 ;; esac
    if [ -x "$LYH_BUILD/tests/e2e/nft_guard_tool" ]; then
        LYH_TOOL=$LYH_BUILD/tests/e2e/nft_guard_tool
    else
        LYH_TOOL=$LYH_BUILD/tests/e2e/guard_nft_guard_tool
        _lyh_build_tool "$src" "$LYH_TOOL" || lyh_skip "cannot build nft_guard_tool: $(head -c 600 "$LYH_TMP/tool-build.log")"
    fi
    LYH_PROBE_TOOL=$LYH_TOOL
    if [ "$LYH_SANITIZED" = 1 ]; then
        LYH_PROBE_TOOL=$LYH_BUILD/tests/e2e/guard_nft_guard_tool_sandbox
        _lyh_build_tool "$src" "$LYH_PROBE_TOOL" "$src/tests/e2e/guard_asan_defaults.c" ||
            lyh_skip "cannot build the sandbox probe: $(head -c 600 "$LYH_TMP/tool-build.log")"
    fi
}

# _lyh_build_tool SRC_DIR OUT [EXTRA.c...]: compile SRC_DIR/tests/e2e/nft_guard_tool.c
# (plus EXTRA sources) with the build's compiler and our warning flags (and the
# sanitizers when the build has them), linked with the build's platform and
# common libraries; only when OUT is missing or older than its inputs.
_lyh_build_tool() {
    local src=$1 out=$2 cc f fresh=1
    shift 2
    [ -n "$src" ] && [ -f "$src/tests/e2e/nft_guard_tool.c" ] || { echo "no nft_guard_tool.c" >"$LYH_TMP/tool-build.log"; return 1; }
    for f in "$src/tests/e2e/nft_guard_tool.c" "$@" "$LYH_BUILD/platform/liblyh_platform.a" \
        "$LYH_BUILD/common/liblyh_common.a"; do
        [ -x "$out" ] && [ ! "$f" -nt "$out" ] || fresh=0
    done
    [ "$fresh" = 1 ] && return 0
    cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$LYH_BUILD/CMakeCache.txt")
    local flags=(-std=gnu17 -O2 -g -D_GNU_SOURCE -DLYH_VERSION=\"0.1.0\" -Wall -Wextra -Werror
        -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wpointer-arith -Wvla
        -Wno-unused-parameter)
    [ "$LYH_SANITIZED" = 1 ] && flags+=("-fsanitize=address,undefined" -fno-omit-frame-pointer)
    mkdir -p "$(dirname "$out")"
    "${cc:-cc}" "${flags[@]}" -I"$src" -o "$out.tmp.$$" "$src/tests/e2e/nft_guard_tool.c" "$@" \
        "$LYH_BUILD/platform/liblyh_platform.a" "$LYH_BUILD/common/liblyh_common.a" \
        -lmnl -lnftnl -lseccomp >"$LYH_TMP/tool-build.log" 2>&1 && mv "$out.tmp.$$" "$out"
}

# ---- network layout ---------------------------------------------------------------

# lyh_netns_add NAME: create namespace NAME (recorded for cleanup), lo up,
# IPv6 DAD and router solicitations off.
lyh_netns_add() {
    ip netns add "$1" || return 1
    _LYH_NETNS+=("$1")
    ip -n "$1" link set lo up
    ip netns exec "$1" sh -c 'for k in all default; do
        sysctl -qw net.ipv6.conf.$k.accept_dad=0 net.ipv6.conf.$k.router_solicitations=0 \
            net.ipv6.conf.$k.accept_ra=0; done' >/dev/null 2>&1
    return 0
}

# lyh_layout_up PREFIX [V6DEFAULT]: build the test network.
#   PREFIX-main  the "host" (lyhd and lyh run here, via nsenter):
#     tun0 = veth to PREFIX-exit: 10.77.0.1/30, 2a0e:77::1/64; IPv4 default via tun0
#     eth0 = veth to PREFIX-lan: 192.168.77.1/24, fd77::1/64; 12.77.0.0/24 via eth0
#     IPv6 default via V6DEFAULT: tun0 (default), eth0, or none
#   PREFIX-exit  e0 = 10.77.0.2/30, 2a0e:77::2/64; 11.77.0.1/32 on lo
#   PREFIX-lan   l0 = 192.168.77.2/24, fd77::2/64; 12.77.0.1/32 on lo
# Echo servers (tcp+udp, port LYH_PORT=7777, nft_guard_tool serve) on
# 11.77.0.1 and 2a0e:77::2 in exit, 192.168.77.2, fd77::2 and 12.77.0.1 in lan.
# Sets LYH_P, LYH_MAIN, LYH_EXIT, LYH_LAN. Returns 1 on any failure.
lyh_layout_up() {
    local p=$1 v6=${2:-tun0} a
    LYH_P=$p LYH_MAIN=$p-main LYH_EXIT=$p-exit LYH_LAN=$p-lan
    lyh_netns_add "$LYH_MAIN" && lyh_netns_add "$LYH_EXIT" && lyh_netns_add "$LYH_LAN" || return 1
    ip -n "$LYH_MAIN" link add tun0 type veth peer name e0 netns "$LYH_EXIT" &&
        ip -n "$LYH_MAIN" addr add 10.77.0.1/30 dev tun0 &&
        ip -n "$LYH_MAIN" addr add 2a0e:77::1/64 dev tun0 nodad &&
        ip -n "$LYH_MAIN" link set tun0 up &&
        ip -n "$LYH_EXIT" addr add 10.77.0.2/30 dev e0 &&
        ip -n "$LYH_EXIT" addr add 2a0e:77::2/64 dev e0 nodad &&
        ip -n "$LYH_EXIT" addr add 11.77.0.1/32 dev lo &&
        ip -n "$LYH_EXIT" link set e0 up &&
        ip -n "$LYH_EXIT" route add default via 10.77.0.1 dev e0 &&
        ip -n "$LYH_MAIN" link add eth0 type veth peer name l0 netns "$LYH_LAN" &&
        ip -n "$LYH_MAIN" addr add 192.168.77.1/24 dev eth0 &&
        ip -n "$LYH_MAIN" addr add fd77::1/64 dev eth0 nodad &&
        ip -n "$LYH_MAIN" link set eth0 up &&
        ip -n "$LYH_LAN" addr add 192.168.77.2/24 dev l0 &&
        ip -n "$LYH_LAN" addr add fd77::2/64 dev l0 nodad &&
        ip -n "$LYH_LAN" addr add 12.77.0.1/32 dev lo &&
        ip -n "$LYH_LAN" link set l0 up &&
        ip -n "$LYH_LAN" route add default via 192.168.77.1 dev l0 &&
        ip -n "$LYH_MAIN" route add 12.77.0.0/24 via 192.168.77.2 dev eth0 &&
        lyh_route4_default tun0 && lyh_route6_default "$v6" || return 1
    for a in "$LYH_EXIT 11.77.0.1" "$LYH_EXIT 2a0e:77::2" "$LYH_LAN 192.168.77.2" \
        "$LYH_LAN fd77::2" "$LYH_LAN 12.77.0.1"; do
        # shellcheck disable=SC2086
        lyh_serve $a "$LYH_PORT" || return 1
    done
    return 0
}

# lyh_serve NS ADDR PORT: start a tcp+udp echo server in namespace NS (pid
# recorded), wait (5 s) until it serves. Returns 1 if it did not start.
lyh_serve() {
    local ns=$1 addr=$2 port=$3 log
    log=$LYH_TMP/serve.$ns.$addr.$port
    ip netns exec "$ns" "$LYH_TOOL" serve "$addr" "$port" "$LYH_SERVE_SECONDS" </dev/null >"$log" 2>&1 &
    lyh_track_pid "$!"
    lyh_wait_until 5 grep -q serving "$log" || { echo "server $ns $addr:$port: $(cat "$log")" >&2; return 1; }
}

# lyh_route4_default MODE: set PREFIX-main's IPv4 "default" to MODE:
#   tun0 | eth0        default via the VPN peer / the LAN router
#   split-tun0         0.0.0.0/1 + 128.0.0.0/1 via tun0, no default
#   none               no default and no split routes
# Other routes (connected, 12.77.0.0/24, host routes you added) stay.
lyh_route4_default() {
    local r
    for r in default 0.0.0.0/1 128.0.0.0/1; do
        ip -n "$LYH_MAIN" -4 route del "$r" 2>/dev/null
    done
    case $1 in
    tun0) ip -n "$LYH_MAIN" -4 route add default via 10.77.0.2 dev tun0 ;;
    eth0) ip -n "$LYH_MAIN" -4 route add default via 192.168.77.2 dev eth0 ;;
    split-tun0)
        ip -n "$LYH_MAIN" -4 route add 0.0.0.0/1 via 10.77.0.2 dev tun0 &&
            ip -n "$LYH_MAIN" -4 route add 128.0.0.0/1 via 10.77.0.2 dev tun0
        ;;
    none) return 0 ;;
    *) echo "lyh_route4_default: bad mode $1" >&2; return 1 ;;
    esac
}

# lyh_route6_default tun0|eth0|none: set PREFIX-main's IPv6 default route.
lyh_route6_default() {
    ip -n "$LYH_MAIN" -6 route del default 2>/dev/null
    case $1 in
    tun0) ip -n "$LYH_MAIN" -6 route add default via 2a0e:77::2 dev tun0 ;;
    eth0) ip -n "$LYH_MAIN" -6 route add default via fd77::2 dev eth0 ;;
    none) return 0 ;;
    *) echo "lyh_route6_default: bad mode $1" >&2; return 1 ;;
    esac
}

# lyh_ip ARGS...: `ip -n PREFIX-main ARGS` (e.g. lyh_ip route add 0.0.0.1/32 dev tun0).
lyh_ip() {
    ip -n "$LYH_MAIN" "$@"
}

# lyh_nft ARGS...: nft inside PREFIX-main (inspection, or playing the third
# party that tampers with our table). Never the host's nft.
lyh_nft() {
    [ -n "$LYH_MAIN" ] || return 2
    ip netns exec "$LYH_MAIN" nft "$@"
}

# lyh_in_main CMD...: run CMD as root in PREFIX-main's network namespace only
# (nsenter keeps the mount namespace, so cgroups stay visible), bounded by
# LYH_CMD_TIMEOUT.
lyh_in_main() {
    [ -n "$LYH_MAIN" ] || return 2
    timeout -k 5 "$LYH_CMD_TIMEOUT" nsenter --net="/run/netns/$LYH_MAIN" "$@"
}

# lyh_probe_as UID GID PROTO ADDR PORT [TIMEOUT_MS]: one probe from PREFIX-main
# by a process with that uid and gid (no supplementary groups), outside any
# session; prints "ok <ms>" | "refused <ms>" | "unreach <ms>" | "timeout <ms>" ...
lyh_probe_as() {
    local uid=$1 gid=$2
    shift 2
    lyh_in_main setpriv --reuid="$uid" --regid="$gid" --clear-groups "$LYH_TOOL" probe "$1" "$2" "$3" "${4:-3000}" 2>&1
}

# lyh_session_chains: the s-* chains of table inet lianyaohu in PREFIX-main
# (one a line; empty if none or no table).
lyh_session_chains() {
    lyh_in_main "$LYH_TOOL" list 2>/dev/null | grep -E '^(s|a|d)-'
}

# lyh_session_rules SID: the layout of session SID's rules in the table: "data"
# (chain d-SID: docs/guard-as-data.md), "chains" (chain s-SID), "" none.
lyh_session_rules() {
    local chains
    chains=$(lyh_in_main "$LYH_TOOL" list 2>/dev/null)
    if grep -qx "d-$1" <<<"$chains"; then
        echo data
    elif grep -qx "s-$1" <<<"$chains"; then
        echo chains
    fi
}

# lyh_nft_cgpath SID: session SID's cgroup as nft names it (a path below the
# cgroup2 mount), for `nft add element` of a cgroupsv2 key.
lyh_nft_cgpath() {
    local cg base
    cg=$(sqlite3 -cmd '.timeout 5000' "$LYH_DB" "select cgroup from sessions where id='$1'" 2>/dev/null)
    base=${LYH_CGMNT#/sys/fs/cgroup}
    base=${base#/}
    if [ -n "$base" ]; then echo "$base$cg"; else echo "${cg#/}"; fi
}

# lyh_nft_main ARGS...: nft in PREFIX-main by nsenter --net (nft reads a
# cgroupsv2 value below /sys/fs/cgroup, which `ip netns exec` remounts).
lyh_nft_main() {
    nsenter --net="/run/netns/$LYH_MAIN" nft "$@"
}

# lyh_session_nft_left SID: lines of table inet lianyaohu that name session SID
# or its cgroup id (state.db), counters aside: its chains, objects, elements.
lyh_session_nft_left() {
    local cgid
    cgid=$(sqlite3 -cmd '.timeout 5000' "$LYH_DB" "select cgroup_id from sessions where id='$1'" 2>/dev/null)
    lyh_nft list table inet lianyaohu 2>/dev/null | grep -v 'packets [0-9]' |
        grep -Ew -e "$1" ${cgid:+-e "$cgid"}
}

# lyh_session_elems: the elements of map sessions ("<cgroup id> <chain>" lines).
lyh_session_elems() {
    lyh_in_main "$LYH_TOOL" sessions 2>/dev/null
}

# lyh_live_rows: number of state.db sessions not ENDED (state <> 4).
lyh_live_rows() {
    sqlite3 -cmd '.timeout 5000' "$LYH_DB" 'select count(*) from sessions where state<>4' 2>&1
}

# lyh_cg_sessions: names of the session cgroups under lyhd's subtree.
lyh_cg_sessions() {
    [ -n "$LYH_CGBASE" ] && [ -d "$LYH_CGBASE" ] || return 0
    find "$LYH_CGBASE" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null
}

# lyh_tmpdirs: per-launch tmpdirs (lyh-*) left in lyhd's directory in its
# --tmp-dir, or in --tmp-dir itself (where an older lyhd made them), as paths
# relative to --tmp-dir.
lyh_tmpdirs() {
    [ -n "$LYH_TMPDIR" ] && [ -d "$LYH_TMPDIR" ] || return 0
    find "$LYH_TMPDIR" -mindepth 1 -maxdepth 2 -name 'lyh-*' -printf '%P\n' 2>/dev/null
}

# ---- the daemon -------------------------------------------------------------------

# lyh_daemon_setup: make the daemon's state: socket dir, --state-dir,
# --tmp-dir (mode 1777 like /tmp, unless LYH_TMPDIR_MODE says otherwise) and
# the cgroup LYH_DCG=<cgroup2>/PREFIX-d the daemons run in, so lyhd's session
# subtree LYH_CGBASE=LYH_DCG/lyh is this test's alone. Called by
# lyh_daemon_start the first time; keeps state across restarts.
lyh_daemon_setup() {
    [ -n "$LYH_SOCK" ] && return 0
    [ -n "$LYH_P" ] || { echo "lyh_daemon_setup: call lyh_layout_up first" >&2; return 1; }
    mkdir -m 0755 "$LYH_TMP/run" || return 1
    LYH_SOCK=$LYH_TMP/run/lyhd.sock
    LYH_STATE=$LYH_TMP/state
    LYH_DB=$LYH_STATE/state.db
    LYH_TMPDIR=$LYH_TMP/tmp
    LYH_TMPROOT=$LYH_TMPDIR/lyhd
    mkdir -m "${LYH_TMPDIR_MODE:-1777}" "$LYH_TMPDIR" || return 1
    chmod "${LYH_TMPDIR_MODE:-1777}" "$LYH_TMPDIR"
    LYH_DCG=$LYH_CGMNT/$LYH_P-d
    mkdir "$LYH_DCG" || return 1
    _LYH_CGDIRS+=("$LYH_DCG")
    LYH_CGBASE=$LYH_DCG/lyh
}

# lyh_daemon_start [ARGS...]: start lyhd inside PREFIX-main (nsenter --net),
# in cgroup LYH_DCG, with --socket LYH_SOCK --state-dir LYH_STATE --tmp-dir
# LYH_TMPDIR, LYH_DAEMON_ARGS and ARGS; stderr to a new LYH_DAEMON_LOG. Waits
# (10 s, 20 s under ASan) until `lyh capabilities` answers. Returns 1 (after a
# t_fail) if it exits or does not answer.
lyh_daemon_start() {
    local i n
    lyh_daemon_setup || { t_fail "lyhd start" "setup failed"; return 1; }
    if [ -n "$LYH_DAEMON_PID" ] && lyh_alive "$LYH_DAEMON_PID"; then
        t_fail "lyhd start" "a daemon (pid $LYH_DAEMON_PID) is still running"
        return 1
    fi
    LYH_DAEMON_N=$((LYH_DAEMON_N + 1))
    LYH_DAEMON_LOG=$LYH_TMP/lyhd.$LYH_DAEMON_N.log
    # the sessions' resolver: the exit namespace's end of tun0 (whether one
    # answers there is up to the test); LYH_RESOLV_CONF to use another file
    if [ -z "${LYH_RESOLV_CONF:-}" ]; then
        LYH_RESOLV_CONF=$LYH_TMP/resolv.conf
        echo "nameserver 10.77.0.2" >"$LYH_RESOLV_CONF"
    fi
    nsenter --net="/run/netns/$LYH_MAIN" sh -c 'echo $$ > "$1/cgroup.procs" || exit 99; shift; exec "$@"' \
        sh "$LYH_DCG" "${LYH_DAEMON_PREFIX[@]}" "$LYH_LYHD" --socket "$LYH_SOCK" --state-dir "$LYH_STATE" --tmp-dir "$LYH_TMPDIR" \
        --resolv-conf "$LYH_RESOLV_CONF" "${LYH_DAEMON_ARGS[@]}" "$@" </dev/null >/dev/null 2>"$LYH_DAEMON_LOG" &
    LYH_DAEMON_PID=$!
    lyh_track_pid "$LYH_DAEMON_PID"
    n=100
    [ "$LYH_SANITIZED" = 1 ] && n=200
    for ((i = 0; i < n; i++)); do
        if ! lyh_alive "$LYH_DAEMON_PID"; then
            wait "$LYH_DAEMON_PID" 2>/dev/null
            t_fail "lyhd start ($LYH_DAEMON_N)" "exited during startup (status $?): $(tail -n 5 "$LYH_DAEMON_LOG")"
            LYH_DAEMON_PID=""
            return 1
        fi
        if [ -S "$LYH_SOCK" ] && lyh_in_main "$LYH_LYH" --socket "$LYH_SOCK" capabilities >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.1
    done
    t_fail "lyhd start ($LYH_DAEMON_N)" "no answer to 'lyh capabilities': $(tail -n 5 "$LYH_DAEMON_LOG")"
    return 1
}

# lyh_daemon_check_log [NAME]: t_fail if the current daemon log holds a
# sanitizer report. Returns 1 then.
lyh_daemon_check_log() {
    local rep
    if rep=$(lyh_sanitizer_report "$LYH_DAEMON_LOG"); then
        t_fail "${1:-lyhd $LYH_DAEMON_N}: no sanitizer report" "$LYH_DAEMON_LOG: $rep"
        return 1
    fi
    return 0
}

# lyh_daemon_stop: SIGTERM the daemon, wait (15 s) for it to exit; t_fail
# unless it exited 0, unlinked its socket and logged no sanitizer report.
# Returns 1 on any of those failures.
lyh_daemon_stop() {
    local pid=$LYH_DAEMON_PID i rc
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 150; i++)); do
        lyh_alive "$pid" || break
        sleep 0.1
    done
    if lyh_alive "$pid"; then
        t_fail "lyhd $LYH_DAEMON_N: exits on SIGTERM" "still running after 15 s"
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        LYH_DAEMON_PID=""
        return 1
    fi
    wait "$pid"
    rc=$?
    LYH_DAEMON_PID=""
    if [ "$rc" -ne 0 ]; then
        t_fail "lyhd $LYH_DAEMON_N: exit status 0 on SIGTERM" "status $rc: $(tail -n 5 "$LYH_DAEMON_LOG")"
        lyh_daemon_check_log
        return 1
    fi
    if [ -e "$LYH_SOCK" ]; then
        t_fail "lyhd $LYH_DAEMON_N: socket removed on SIGTERM" "$LYH_SOCK left behind"
        return 1
    fi
    lyh_daemon_check_log || return 1
    return 0
}

# lyh_daemon_kill9: SIGKILL the daemon (a crash), reap it; t_fail on a
# sanitizer report logged before. The socket file stays (as after a crash).
lyh_daemon_kill9() {
    local pid=$LYH_DAEMON_PID
    [ -n "$pid" ] || return 0
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    LYH_DAEMON_PID=""
    lyh_daemon_check_log
}

# lyh_daemon_log_has ERE [SECONDS]: wait (default 5 s) until the current
# daemon log has a line matching ERE.
lyh_daemon_log_has() {
    lyh_wait_until "${2:-5}" grep -qE -- "$1" "$LYH_DAEMON_LOG"
}

# ---- the test user ----------------------------------------------------------------

# lyh_user_create [NAME]: create an unprivileged user (useradd -m, own group,
# /bin/sh) named NAME (default lyht<pid>), removed with userdel -r at cleanup.
# Sets LYH_USER LYH_UID LYH_GID LYH_HOME.
lyh_user_create() {
    local name=${1:-lyht$$}
    useradd -m -U -s /bin/sh "$name" >/dev/null 2>&1 || return 1
    _LYH_USERS+=("$name")
    LYH_USER=$name
    LYH_UID=$(id -u "$name")
    LYH_GID=$(id -g "$name")
    LYH_HOME=$(getent passwd "$name" | cut -d: -f6)
    [ -n "$LYH_HOME" ] && [ -d "$LYH_HOME" ] || return 1
}

# lyh_user_install SRC NAME: copy SRC to LYH_HOME/lyh-e2e/NAME, owned by the
# test user, mode 0755 (Landlock lets the agent exec from $HOME, not from the
# build tree). Prints the path.
lyh_user_install() {
    local d=$LYH_HOME/lyh-e2e
    install -d -o "$LYH_UID" -g "$LYH_GID" -m 0755 "$d" &&
        install -o "$LYH_UID" -g "$LYH_GID" -m 0755 "$1" "$d/$2" &&
        echo "$d/$2"
}

# lyh_as_user CMD...: run CMD in PREFIX-main as the test user (setpriv
# --reuid --regid --init-groups), cwd its home, a small clean environment
# (HOME USER LOGNAME PATH LANG=C LYH_SOCKET), bounded by LYH_CMD_TIMEOUT.
lyh_as_user() {
    [ -n "$LYH_MAIN" ] && [ -n "$LYH_USER" ] || return 2
    (cd "$LYH_HOME" && exec timeout -k 5 "$LYH_CMD_TIMEOUT" nsenter --net="/run/netns/$LYH_MAIN" \
        setpriv --reuid="$LYH_UID" --regid="$LYH_GID" --init-groups \
        env -i HOME="$LYH_HOME" USER="$LYH_USER" LOGNAME="$LYH_USER" PATH=/usr/bin:/bin LANG=C \
        LYH_SOCKET="$LYH_SOCK" "$@")
}

# lyh_user_guard_gid GID: is GID one lyhd gives a user's agents (above the base,
# inside the range)?
lyh_user_guard_gid() {
    [ -n "$1" ] && [ "$1" -gt "$LYH_GUARD_GID" ] 2>/dev/null && [ "$1" -le "$LYH_GUARD_GID_MAX" ]
}

# lyh_check_host_from_port LABEL FROM_PORT_PY PORT SPORT: as the test user, outside lyh,
# from_port.py from 127.0.0.1:SPORT to the echo service at 127.0.0.1:PORT; one check
# that UDP is answered, one that TCP is.
lyh_check_host_from_port() {
    local out
    out=$(lyh_as_user /usr/bin/python3 "$2" "$3" "$4" host 2>&1)
    t_check "$1, UDP ($(echo $out))" grep -qx "udp host" <<<"$out"
    t_check "$1, TCP" grep -qx "tcp host" <<<"$out"
}

# lyh_cli ARGS...: the lyh CLI as the test user against LYH_SOCK.
lyh_cli() {
    lyh_as_user "$LYH_LYH" --socket "$LYH_SOCK" "$@"
}

# ---- cleanup ----------------------------------------------------------------------

# Kill every process in a cgroup dir we own (cgroup.kill, else SIGKILL of
# cgroup.procs), bounded; then rmdir it.
_lyh_cg_reap() {
    local cg=$1 i p
    [ -d "$cg" ] || return 0
    for ((i = 0; i < 50; i++)); do
        grep -q '^populated 0' "$cg/cgroup.events" 2>/dev/null && break
        if [ -e "$cg/cgroup.kill" ]; then
            echo 1 >"$cg/cgroup.kill" 2>/dev/null
        else
            for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        fi
        sleep 0.1
    done
    rmdir "$cg" 2>/dev/null
}

# _lyh_descendants PID...: the descendants (children, their children...) of
# those PIDs that are still children of this shell (a pid we hold that died
# and was reused is someone else's), from one `ps` listing taken before
# anything is killed.
_lyh_descendants() {
    ps -e -o pid=,ppid= | awk -v roots="$*" -v shell="$$" '
        BEGIN { n = split(roots, r, " "); for (i = 1; i <= n; i++) cand[r[i]] = 1 }
        { kid[NR] = $1; par[NR] = $2; if (($1 in cand) && $2 == shell) want[$1] = 1 }
        END {
            do {
                more = 0
                for (i = 1; i <= NR; i++)
                    if ((par[i] in want) && !(kid[i] in want)) { want[kid[i]] = 1; print kid[i]; more = 1 }
            } while (more)
        }'
}

_lyh_cleanup() {
    local h pid ns u d i cg
    [ "$_LYH_CLEANED" = 1 ] && return
    _LYH_CLEANED=1
    trap '' INT TERM HUP
    for h in "${_LYH_HOOKS[@]}"; do "$h" 2>/dev/null; done
    # 1. processes we started, by pid (servers, clients, daemons), and what
    # they started (a backgrounded function runs its command in a subshell
    # of the subshell: `timeout` would outlive the pid we hold)
    local kids=()
    [ "${#_LYH_PIDS[@]}" -gt 0 ] && mapfile -t kids < <(_lyh_descendants "${_LYH_PIDS[@]}")
    _LYH_PIDS+=("${kids[@]}")
    for pid in "${_LYH_PIDS[@]}"; do
        lyh_alive "$pid" && kill -TERM "$pid" 2>/dev/null
    done
    for ((i = 0; i < 30; i++)); do
        d=0
        for pid in "${_LYH_PIDS[@]}"; do lyh_alive "$pid" && d=1; done
        [ "$d" = 0 ] && break
        sleep 0.1
    done
    for pid in "${_LYH_PIDS[@]}"; do
        lyh_alive "$pid" && kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    # 2. sanitizer reports of daemons that exited in between
    for d in "$LYH_TMP"/lyhd.*.log; do
        [ -f "$d" ] && lyh_sanitizer_report "$d" >/dev/null &&
            echo "WARNING: sanitizer report in $d (see above)" >&2
    done
    # 3. agents our daemons left: the session cgroups under our subtree, then
    # anything left in the daemons' own cgroup (only our lyhd ever ran there)
    if [ -n "$LYH_DCG" ] && [ -d "$LYH_DCG" ]; then
        if [ -d "$LYH_CGBASE" ]; then
            for cg in "$LYH_CGBASE"/*/; do
                [ -d "$cg" ] && _lyh_cg_reap "${cg%/}"
            done
            rmdir "$LYH_CGBASE" 2>/dev/null
        fi
    fi
    for ((i = ${#_LYH_CGDIRS[@]} - 1; i >= 0; i--)); do
        _lyh_cg_reap "${_LYH_CGDIRS[$i]}"
        [ -d "${_LYH_CGDIRS[$i]}" ] && echo "WARNING: could not remove cgroup ${_LYH_CGDIRS[$i]}" >&2
    done
    # 4. namespaces, users, dirs
    for ns in "${_LYH_NETNS[@]}"; do
        ip netns del "$ns" 2>/dev/null || echo "WARNING: could not delete namespace $ns" >&2
    done
    for u in "${_LYH_USERS[@]}"; do
        userdel -r "$u" >/dev/null 2>&1 || userdel -f -r "$u" >/dev/null 2>&1 ||
            echo "WARNING: could not remove user $u" >&2
        getent group "$u" >/dev/null 2>&1 && groupdel "$u" 2>/dev/null
    done
    for d in "${_LYH_DIRS[@]}"; do
        [ -n "$d" ] && case $d in /tmp/lyh-e2e.*) rm -rf "$d" ;; esac
    done
    # 5. lyhd creates its guard group when missing: remove it if we caused that
    [ "$_LYH_GROUP_EXISTED" = 1 ] || groupdel _lianyaohu 2>/dev/null
    # ... and the protocol process's user
    if [ "$_LYH_PUSER_EXISTED" = 0 ] && getent passwd _lyhd >/dev/null 2>&1; then
        userdel _lyhd 2>/dev/null
        getent group _lyhd >/dev/null 2>&1 && groupdel _lyhd 2>/dev/null
    fi
}
