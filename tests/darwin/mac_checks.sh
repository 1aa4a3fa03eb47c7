#!/bin/sh
# mac_checks.sh TOOL GOLDEN_DIR: what only a Mac can check (docs/security-model.md,
# "macOS"). Run by ctest on macOS (tests/darwin/CMakeLists.txt); exit 77 = skipped.
#
#  1. Seatbelt compiles every golden profile (sandbox-exec -f FILE /usr/bin/true).
#  2. A rendered profile enforces what it promises, run as the calling user:
#     writes inside cwd work and outside do not, deny paths are unreadable,
#     /etc/localtime is hidden and the UTC zone readable, setuid programs do
#     not run, kern.uuid is unreadable and uname works, listening works on
#     loopback only.
#  3. The routing socket answers (route_oif_for 127.0.0.1 is lo0) and the
#     preflight refuses lo0 as a VPN, naming the interface actually used.
#  4. As root: pfctl vets every golden anchor (pfctl -n: PF is not changed).
#     With LYH_DARWIN_PF=1 also: load, show and unload the anchor of an unused
#     uid through pf.c (this enables PF while loaded, with our own token).
set -u
tool=${1:?usage: mac_checks.sh TOOL GOLDEN_DIR}
golden=${2:?usage: mac_checks.sh TOOL GOLDEN_DIR}

if [ "$(uname -s)" != Darwin ] || [ ! -x /usr/bin/sandbox-exec ]; then
    echo "mac_checks: needs macOS with /usr/bin/sandbox-exec; skipped"
    exit 77
fi
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1${2:+: $2}"; fails=$((fails + 1)); }
expect_ok() { # NAME CMD...
    name=$1; shift
    if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "$out"; fi
}
expect_refused() { # NAME CMD...
    name=$1; shift
    if out=$("$@" 2>&1); then fail "$name" "succeeded: $out"; else pass "$name"; fi
}

root=$(mktemp -d "${TMPDIR:-/tmp}/lyh-mac.XXXXXX") || exit 1
trap 'chmod -R u+w "$root" 2>/dev/null; rm -rf "$root"' EXIT INT TERM

# ---- 1. every golden profile compiles -----------------------------------------
n=0
for sb in "$golden"/*.sb; do
    [ -f "$sb" ] || continue
    n=$((n + 1))
    expect_ok "seatbelt compiles $(basename "$sb")" /usr/bin/sandbox-exec -f "$sb" /usr/bin/true
done
[ "$n" -gt 0 ] || fail "golden profiles" "none found in $golden"

# ---- 2. a rendered profile, enforced ------------------------------------------------
mkdir -p "$root/home/work/secret" "$root/home/tmp" "$root/outside"
echo hidden > "$root/home/work/secret/file"
printf '#!/bin/sh\necho ran\n' > "$root/home/work/secret/tool"
chmod 755 "$root/home/work/secret/tool"
echo visible > "$root/home/work/file"
canon() { "$tool" canon "$1"; }
H=$(canon "$root/home") && W=$(canon "$root/home/work") && T=$(canon "$root/home/tmp") &&
    S=$(canon "$root/home/work/secret") || { fail "canonical paths"; exit 1; }
# home is the test's directory, so outside/ is outside every grant
"$tool" sbpl "$H/h" "$W" "$T" deny "$S" > "$root/p.sb" || { fail "render"; exit 1; }
mkdir -p "$root/home/h"
box() { /usr/bin/sandbox-exec -f "$root/p.sb" "$@"; }

expect_ok "write inside cwd" box /usr/bin/touch "$W/new"
expect_ok "read inside cwd" box /bin/cat "$W/file"
expect_ok "write the per-launch tmpdir" box /usr/bin/touch "$T/new"
expect_refused "write outside every grant" box /usr/bin/touch "$root/outside/x"
expect_refused "read a deny path" box /bin/cat "$S/file"
expect_refused "list a deny path" box /bin/ls "$S"
expect_refused "exec inside a deny path" box "$S/tool"
expect_refused "rename an ancestor of a deny path" box /bin/mv "$W" "$W.moved"
expect_refused "read /etc/localtime" box /bin/cat /etc/localtime
expect_refused "readlink /etc/localtime" box /usr/bin/readlink /etc/localtime
utc=$(ls -d /var/db/timezone/tz/*/zoneinfo/UTC 2>/dev/null | head -n 1)
if [ -n "$utc" ]; then
    expect_ok "read the UTC zone" box /bin/cat "$utc"
else
    echo "skip read the UTC zone: no /var/db/timezone/tz/*/zoneinfo/UTC"
fi
# /bin/ps is setuid root on macOS: runs outside, must not inside
if [ -u /bin/ps ] && /bin/ps -p $$ >/dev/null 2>&1; then
    expect_refused "exec a setuid program (/bin/ps)" box /bin/ps -p 1
else
    echo "skip setuid exec: /bin/ps is not setuid here"
fi
expect_refused "sysctl kern.uuid" box /usr/sbin/sysctl -n kern.uuid
expect_ok "uname -a" box /usr/bin/uname -a
if [ -x /usr/bin/perl ]; then
    listen='use IO::Socket::INET; IO::Socket::INET->new(LocalAddr => $ARGV[0], LocalPort => 0, Listen => 1) or exit 1'
    expect_ok "listen on loopback" box /usr/bin/perl -e "$listen" 127.0.0.1
    expect_refused "listen on all addresses" box /usr/bin/perl -e "$listen" 0.0.0.0
fi

# ---- 3. the routing socket ------------------------------------------------------------
if out=$("$tool" oif 127.0.0.1 2>&1) && [ "$out" = lo0 ]; then
    pass "route to 127.0.0.1 is lo0"
else
    fail "route to 127.0.0.1 is lo0" "$out"
fi
if out=$("$tool" preflight lo0 2>&1); then
    fail "preflight refuses lo0" "$out"
else
    case $out in *"refused: "*) pass "preflight refuses lo0 ($out)" ;; *) fail "preflight refuses lo0" "$out" ;; esac
fi

# ---- 4. PF ------------------------------------------------------------------------------
if [ "$(id -u)" = 0 ]; then
    for pf in "$golden"/*.pf; do
        [ -f "$pf" ] || continue
        expect_ok "pfctl -n vets $(basename "$pf")" /sbin/pfctl -n -f "$pf"
    done
    if [ "${LYH_DARWIN_PF:-0}" = 1 ]; then
        if out=$("$tool" pfcycle 4294000000 utun99999 2>&1); then
            case $out in
            *"block return out quick on ! utun99999"*"unloaded"*) pass "pf.c load/show/unload" ;;
            *) fail "pf.c load/show/unload" "$out" ;;
            esac
            # nothing left in the anchor after the unload
            after=$(printf '%s\n' "$out" | sed -n '/^unloaded/,$p' | sed -n '/^--- rules/,/^--- end/p' | grep -c 'quick' || true)
            [ "$after" = 0 ] && pass "anchor empty after unload" || fail "anchor empty after unload" "$out"
        else
            fail "pf.c load/show/unload" "$out"
        fi
    else
        echo "skip PF load: set LYH_DARWIN_PF=1 to load and unload a test anchor"
    fi
else
    echo "skip PF: run as root to vet the golden anchors with pfctl -n"
fi

echo "mac_checks: $fails failure(s)"
[ "$fails" = 0 ]
