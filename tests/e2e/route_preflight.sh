#!/usr/bin/env bash
# End-to-end test of the route preflight and VPN interface validation
# (platform/linux/route.c, ifaces.c) against the real kernel.
#
#   route_preflight.sh /path/to/route_preflight_test
#
# Needs root (exits 77 = skipped otherwise). Safety rules, by construction:
#  - Every network change is made inside namespaces this script created
#    (lyhtest-rp-$$-{main,lan,exit}): every `ip` call names one of them with
#    -n, and the veths are created inside "main" with their peers moved
#    straight into "lan"/"exit". The host's own routes, interfaces and
#    firewall are never touched.
#  - No traffic is sent: the test program only asks the kernel for routes
#    and links; IPv6 DAD and router solicitations are switched off in the
#    namespaces before any link comes up.
#  - Every loop is bounded; the EXIT trap deletes exactly the namespaces that
#    were created here, also when a case or the setup fails.
# Prints one line per case and "N passed, M failed"; exits 1 if any failed.
set -u

BIN=${1:-${ROUTE_PREFLIGHT_TEST:-}}
if [ -z "$BIN" ] || [ ! -x "$BIN" ]; then
    echo "usage: $0 /path/to/route_preflight_test" >&2
    exit 2
fi
case "$BIN" in /*) ;; *) BIN="$PWD/$BIN" ;; esac
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: route_preflight.sh needs root (network namespaces)"
    exit 77
fi
if ! command -v ip >/dev/null 2>&1; then
    echo "SKIP: iproute2 'ip' not found"
    exit 77
fi

P="lyhtest-rp-$$"
NS="$P-main"  # the namespace the daemon would live in: eth0 + tun0
LAN="$P-lan"  # the LAN behind eth0 (192.168.77.0/24, fd77::/64)
EXIT="$P-exit" # the VPN exit behind tun0 (10.77.0.0/30, fd77:77::/64)
CREATED=()

cleanup() {
    local ns
    for ns in "${CREATED[@]}"; do
        ip netns del "$ns" 2>/dev/null || echo "warning: could not delete namespace $ns" >&2
    done
    CREATED=()
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

PASS=0
FAIL=0

die() {
    echo "FAIL setup: $*"
    echo "$PASS passed, $((FAIL + 1)) failed"
    exit 1
}

mkns() {
    # Only a namespace we created ourselves is ever deleted by cleanup().
    ip netns add "$1" || die "ip netns add $1"
    CREATED+=("$1")
    ip -n "$1" link set lo up || die "lo up in $1"
    local k
    for k in all default; do
        ip netns exec "$1" sysctl -qw "net.ipv6.conf.$k.dad_transmits=0" \
            "net.ipv6.conf.$k.router_solicitations=0" "net.ipv6.conf.$k.accept_ra=0" \
            >/dev/null 2>&1 || true
    done
}

m() { ip -n "$NS" "$@" || die "ip -n main $*"; }

mkns "$NS"
mkns "$LAN"
mkns "$EXIT"

m link add eth0 type veth peer name lan0 netns "$LAN"
m link add tun0 type veth peer name exit0 netns "$EXIT"
m addr add 192.168.77.2/24 dev eth0
m -6 addr add fd77::2/64 dev eth0 nodad
m addr add 10.77.0.1/30 dev tun0
m -6 addr add fd77:77::1/64 dev tun0 nodad
m link set eth0 up
m link set tun0 up
ip -n "$LAN" addr add 192.168.77.1/24 dev lan0 || die lan addr
ip -n "$LAN" -6 addr add fd77::1/64 dev lan0 nodad || die lan addr6
ip -n "$LAN" link set lan0 up || die lan up
ip -n "$EXIT" addr add 10.77.0.2/30 dev exit0 || die exit addr
ip -n "$EXIT" -6 addr add fd77:77::2/64 dev exit0 nodad || die exit addr6
ip -n "$EXIT" link set exit0 up || die exit up

# Remove every route a case added (ours are proto boot; the kernel's own
# connected and local routes are proto kernel and stay).
reset_routes() {
    ip -n "$NS" -4 route flush proto boot 2>/dev/null
    ip -n "$NS" -6 route flush proto boot 2>/dev/null
    [ -z "$(ip -n "$NS" route show proto boot)" ] || die "IPv4 routes left after reset"
    [ -z "$(ip -n "$NS" -6 route show proto boot)" ] || die "IPv6 routes left after reset"
}

# case LABEL -- routes... -- test program arguments...
#   routes: "4:ARGS" or "6:ARGS" for `ip -n main -4/-6 route add ARGS` (word-split)
run_case() {
    local label=$1
    shift
    [ "$1" = "--" ] || die "run_case $label: missing --"
    shift
    reset_routes
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        local fam=${1%%:*} spec=${1#*:}
        # shellcheck disable=SC2086 # the route spec is meant to be word-split
        ip -n "$NS" "-$fam" route add $spec || die "$label: route add -$fam $spec"
        shift
    done
    [ "${1:-}" = "--" ] || die "run_case $label: missing second --"
    shift
    expect "$label" "$@"
}

# expect LABEL test-program-arguments...: run inside the main namespace.
expect() {
    local label=$1 out rc
    shift
    out=$(ip netns exec "$NS" "$BIN" "$@" 2>&1)
    rc=$?
    out=$(printf '%s' "$out" | tr '\n' ' ')
    if [ $rc -eq 0 ]; then
        PASS=$((PASS + 1))
        echo "PASS $label: $out"
    else
        FAIL=$((FAIL + 1))
        echo "FAIL $label (exit $rc): $out"
    fi
}

GW4_ETH="via 192.168.77.1 dev eth0"
GW4_TUN="via 10.77.0.2 dev tun0"
GW6_ETH="via fd77::1 dev eth0"

# --- IPv4 -------------------------------------------------------------------------
run_case "(a) default via eth0 refused" -- "4:default $GW4_ETH" -- \
    preflight tun0 --error ENETUNREACH --why "default IPv4 route uses eth0, not tun0"

run_case "(b) split default 0/1+128/1 via tun0 accepted (eth0 default kept)" -- \
    "4:default $GW4_ETH" "4:0.0.0.0/1 $GW4_TUN" "4:128.0.0.0/1 $GW4_TUN" -- \
    preflight tun0 --ok --ipv4-checked yes --note4 ""

run_case "(b2) split default via tun0 without any default route accepted" -- \
    "4:0.0.0.0/1 $GW4_TUN" "4:128.0.0.0/1 dev tun0" -- preflight tun0 --ok --ipv4-checked yes

run_case "(c) host route 0.0.0.1/32 via tun0 + default via eth0 refused" -- \
    "4:default $GW4_ETH" "4:0.0.0.1/32 $GW4_TUN" -- \
    preflight tun0 --error ENETUNREACH \
    --why "IPv4 route for 128.0.0.1 uses eth0, not tun0 (split default incomplete)"

run_case "(c2) only 128.0.0.0/1 via tun0 + default via eth0 refused" -- \
    "4:default $GW4_ETH" "4:128.0.0.0/1 $GW4_TUN" -- \
    preflight tun0 --error ENETUNREACH \
    --why "IPv4 route for 0.0.0.1 uses eth0, not tun0 (split default incomplete)"

run_case "(c3) no IPv4 default route refused" -- -- \
    preflight tun0 --error ENETUNREACH --why "no IPv4 route for 0.0.0.1 (no default route)"

run_case "(c4) only 0.0.0.0/1 via tun0, nothing else, refused" -- "4:0.0.0.0/1 $GW4_TUN" -- \
    preflight tun0 --error ENETUNREACH \
    --why "no IPv4 route for 128.0.0.1 (split default incomplete)"

run_case "(c5) blackhole default refused" -- "4:blackhole default" -- \
    preflight tun0 --error ENETUNREACH --why "IPv4 route for 0.0.0.1 is a blackhole route"

run_case "(c6) unreachable 128.0.0.0/1 refused" -- "4:default $GW4_TUN" "4:unreachable 128.0.0.0/1" -- \
    preflight tun0 --error ENETUNREACH --why "IPv4 route for 128.0.0.1 is an unreachable route"

# ECMP picks a next hop per flow hash (seeded at boot), so the resolved
# route for the probe address may be either leg; every wording names eth0.
run_case "(c7) multipath default over tun0 and eth0 refused" -- \
    "4:default nexthop $GW4_TUN weight 255 nexthop $GW4_ETH weight 1" -- \
    preflight tun0 --error ENETUNREACH \
    --why "IPv4 route for 0.0.0.1 is multipath and a next hop uses eth0, not tun0" \
    --why "IPv4 route for 128.0.0.1 is multipath and a next hop uses eth0, not tun0" \
    --why "IPv4 route for 0.0.0.1 uses eth0, not tun0" \
    --why "IPv4 route for 128.0.0.1 uses eth0, not tun0 (split default incomplete)"

run_case "(d) plain default via tun0 accepted" -- "4:default $GW4_TUN" -- \
    preflight tun0 --ok --ipv4-checked yes

run_case "(d2) default dev tun0 (no gateway) accepted" -- "4:default dev tun0" -- \
    preflight tun0 --ok --ipv4-checked yes

run_case "(d3) multipath default with both next hops on tun0 accepted" -- \
    "4:default nexthop via 10.77.0.2 dev tun0 nexthop via 10.77.1.1 dev tun0 onlink" -- \
    preflight tun0 --ok --ipv4-checked yes

run_case "(d4) route_oif_for 0.0.0.1 -> tun0" -- "4:default $GW4_TUN" -- oif 4 0.0.0.1 --is tun0
run_case "(d5) route_oif_for own address -> lo" -- -- oif 4 10.77.0.1 --is lo
run_case "(d6) route_oif_for without route -> ENETUNREACH" -- -- oif 4 8.8.8.8 --error ENETUNREACH
run_case "(d7) route_oif_for IPv6 without route -> ENETUNREACH" -- -- \
    oif 6 2000:: --error ENETUNREACH

# --- IPv6 -------------------------------------------------------------------------
run_case "(e1) IPv6 default via eth0 -> IPv6 blocked with note" -- \
    "4:default $GW4_TUN" "6:default $GW6_ETH" -- \
    preflight tun0 --ok --ipv6 blocked \
    --note6 "IPv6 blocked for this session: default IPv6 route uses eth0, not tun0"

run_case "(e2) IPv6 default via tun0 -> not blocked" -- \
    "4:default $GW4_TUN" "6:default dev tun0" -- preflight tun0 --ok --ipv6 open --note6 ""

run_case "(e3) no IPv6 route -> IPv6 blocked with note" -- "4:default $GW4_TUN" -- \
    preflight tun0 --ok --ipv6 blocked --note6 "IPv6 blocked for this session: no IPv6 default route"

run_case "(e4) IPv6 split ::/1 + 8000::/1 via tun0 (eth0 default kept) -> not blocked" -- \
    "4:default $GW4_TUN" "6:default $GW6_ETH" "6:::/1 via fd77:77::2 dev tun0" "6:8000::/1 dev tun0" -- \
    preflight tun0 --ok --ipv6 open

run_case "(e5) IPv6 only 2000::/3 via tun0 + default via eth0 -> blocked" -- \
    "4:default $GW4_TUN" "6:default $GW6_ETH" "6:2000::/3 dev tun0" -- \
    preflight tun0 --ok --ipv6 blocked \
    --note6 "IPv6 blocked for this session: IPv6 route for 8000:: uses eth0, not tun0 (split default incomplete)"

run_case "(e6) IPv6 unreachable default -> blocked" -- "4:default $GW4_TUN" "6:unreachable default" -- \
    preflight tun0 --ok --ipv6 blocked \
    --note6 "IPv6 blocked for this session: IPv6 route for 2000:: is an unreachable route"

run_case "(e7) IPv6 default via tun0, IPv4 default via eth0 still refused" -- \
    "4:default $GW4_ETH" "6:default dev tun0" -- \
    preflight tun0 --error ENETUNREACH --why "default IPv4 route uses eth0, not tun0"

# --- allow_non_default_route -------------------------------------------------------------
run_case "(f) allow_non_default_route skips IPv4 with note" -- "4:default $GW4_ETH" -- \
    preflight tun0 --allow-non-default --ok --ipv4-checked no \
    --note4 "IPv4 traffic not routed to tun0 will be refused, not steered" --ipv6 blocked

run_case "(f2) allow_non_default_route without any route, IPv6 via tun0" -- "6:default dev tun0" -- \
    preflight tun0 --allow-non-default --ok --ipv4-checked no --ipv6 open

# --- interface identity ----------------------------------------------------------------
run_case "(i1) index of another interface (rename race) refused" -- "4:default $GW4_TUN" -- \
    preflight tun0 --index-of eth0 --error ENODEV --why-contains "is now 'eth0', not 'tun0'"

# --- validate_vpn ----------------------------------------------------------------------
reset_routes
expect "(g1) validate addressed tun0 ok" validate tun0 --ok
expect "(g2) validate lo refused by name" validate lo --error EINVAL \
    --why "'lo' is the loopback interface, not a VPN"
expect "(g3) validate missing tun9" validate tun9 --error ENODEV \
    --why-contains "interface 'tun9' does not exist; did you mean 'tun0'? (interfaces here: "

m addr flush dev tun0
expect "(g4) validate unaddressed tun0" validate tun0 --error EADDRNOTAVAIL \
    --why "interface 'tun0' has no address" --why "interface 'tun0' has no address (only link-local)"

m link set tun0 down
expect "(g5) validate down tun0" validate tun0 --error ENETDOWN --why "interface 'tun0' is down"

# Up again with no configured address: the kernel gives the veth an IPv6
# link-local address, which must not count. Wait (bounded) for it.
m link set tun0 up
ll=""
for _ in $(seq 1 50); do
    ll=$(ip -n "$NS" -6 addr show dev tun0 scope link)
    [ -n "$ll" ] && break
    sleep 0.1
done
if [ -n "$ll" ]; then
    expect "(g6) validate tun0 with only a link-local address" validate tun0 --error EADDRNOTAVAIL \
        --why "interface 'tun0' has no address (only link-local)"
else
    echo "SKIP (g6): kernel added no link-local address to tun0"
fi

# A real tun device nobody has opened: up, addressed, no carrier. Still the
# VPN interface (its daemon may be reconnecting), and routes via it count.
if ip -n "$NS" tuntap add mode tun dev tun5 2>/dev/null; then
    m addr add 10.55.0.1/24 dev tun5
    m link set tun5 up
    expect "(g7) validate real tun without carrier ok" validate tun5 --ok
    run_case "(g8) preflight via real tun without carrier accepted" -- "4:default dev tun5" -- \
        preflight tun5 --ok --ipv4-checked yes --ipv6 blocked
    m link set tun5 down
    expect "(g9) validate down real tun" validate tun5 --error ENETDOWN --why "interface 'tun5' is down"
else
    echo "SKIP (g7-g9): cannot create a tun device (/dev/net/tun)"
fi

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
