#!/usr/bin/env bash
# scripts/install and scripts/uninstall, and the systemd unit (tests/e2e/lib.sh):
#  (a) DESTDIR=... cmake --install: the exact tree and modes
#  (b) systemd-analyze verify on the unit (skipped without systemd-analyze)
#  (c) scripts/install into a temp prefix, unit dir, socket, state dir, pid file
#      and cgroup, lyhd started in a test network namespace (--netns), answers
#      `lyh capabilities`; a `lyh run` works under the unit's capability bounding
#      set; the installed `lyh doctor --json` passes (exit 0, daemon, protocol,
#      nftables, cgroup2, vpn:tun0 ok); install again (idempotent)
#  (d) scripts/uninstall: the prefix and unit dir as before, the group as before,
#      the daemon gone; uninstall again (idempotent)
#  (e) systemd for real when PID 1 is not systemd: a systemd booted by
#      systemd-nspawn on an overlay of /, in the test network namespace;
#      scripts/install there starts lyhd through the unit, doctor and a guarded
#      `lyh run` work through it, scripts/uninstall removes it
# Never touches /usr/local, /etc/systemd/system, the host's lyhd paths or firewall
# ((e) uses the real paths only inside the container's overlay).
#
#   tests/e2e/install.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
# shellcheck source=tests/e2e/lib.sh
. "$here/lib.sh"
lyh_init "${1:-}"

T=$LYH_TMP/inst
mkdir -m 0755 "$T"
PREFIX=$T/prefix/usr
UNITDIR=$T/etc/systemd/system
SOCK=$T/run/lyhd.sock
STATE=$T/state
PIDF=$T/run/lyhd.pid
CG=$LYH_CGMNT/lyhi$$-d
mkdir -p "$T/run" "$T/etc"
opts=(--prefix "$PREFIX" --build "$LYH_BUILD" --socket "$SOCK" --state-dir "$STATE"
    --unit-dir "$UNITDIR" --pid-file "$PIDF" --cgroup "$CG" --no-systemd)

# If anything fails, uninstall what we installed (the daemon first).
_inst_cleanup() {
    [ -f "$PREFIX/share/lianyaohu/install-manifest.txt" ] || [ -f "$PIDF" ] || return 0
    "$src/scripts/uninstall" --prefix "$PREFIX" --state-dir "$STATE" --unit-dir "$UNITDIR" \
        --pid-file "$PIDF" --no-systemd >/dev/null 2>&1
    [ -d "$CG" ] && _lyh_cg_reap "$CG"
}
lyh_on_cleanup _inst_cleanup

tree() { # DIR: "mode type path" of everything under DIR, sorted
    [ -d "$1" ] || { echo "(none)"; return 0; }
    (cd "$1" && find . -printf '%m %y %p\n' | sort)
}

# ---- (a) DESTDIR install -----------------------------------------------------------
D=$T/destdir
if out=$(DESTDIR=$D cmake --install "$LYH_BUILD" --prefix /usr/local 2>&1); then
    t_pass "a: DESTDIR cmake --install"
else
    t_fail "a: DESTDIR cmake --install" "$out"
fi
# Every file the install rules place (docs/CMakeLists.txt adds the man pages and
# completions): a new install() rule must be added here.
want="755 d .
755 d ./usr
755 d ./usr/local
755 d ./usr/local/bin
755 d ./usr/local/lib
755 d ./usr/local/lib/systemd
755 d ./usr/local/lib/systemd/system
755 d ./usr/local/lib/tmpfiles.d
755 d ./usr/local/libexec
755 d ./usr/local/libexec/lianyaohu
755 d ./usr/local/share
755 d ./usr/local/share/doc
755 d ./usr/local/share/doc/lianyaohu
755 d ./usr/local/share/bash-completion
755 d ./usr/local/share/bash-completion/completions
755 d ./usr/local/share/man
755 d ./usr/local/share/man/man1
755 d ./usr/local/share/man/man5
755 d ./usr/local/share/man/man8
755 d ./usr/local/share/zsh
755 d ./usr/local/share/zsh/site-functions
644 f ./usr/local/share/bash-completion/completions/lyh
644 f ./usr/local/share/man/man1/lyh.1
644 f ./usr/local/share/man/man5/lianyaohu.toml.5
644 f ./usr/local/share/man/man8/lyhd.8
644 f ./usr/local/share/zsh/site-functions/_lyh
755 f ./usr/local/bin/lyh
644 f ./usr/local/lib/systemd/system/lyhd.service
644 f ./usr/local/lib/tmpfiles.d/lianyaohu.conf
755 f ./usr/local/libexec/lianyaohu/lyhd
644 f ./usr/local/share/doc/lianyaohu/operate.md"
t_eq "a: exact tree and modes" "$(tree "$D" | sort)" "$(echo "$want" | sort)"
u=$D/usr/local/lib/systemd/system/lyhd.service
t_check "a: unit names the prefix" grep -qx 'ExecStart=/usr/local/libexec/lianyaohu/lyhd --socket /var/run/lianyaohu-helper.sock --state-dir /var/lib/lianyaohu' "$u"
for k in 'Type=simple' 'Restart=on-failure' 'Delegate=yes' 'NoNewPrivileges=yes' 'ProtectSystem=full' \
    'CapabilityBoundingSet=CAP_NET_ADMIN CAP_SETUID CAP_SETGID CAP_KILL CAP_SYS_ADMIN CAP_CHOWN CAP_FOWNER CAP_DAC_READ_SEARCH'; do
    t_check "a: unit has $k" grep -qx "$k" "$u"
done

# ---- (c) install for real (into temp paths, lyhd in a test namespace) ----------------
before_prefix=$(tree "$T/prefix")
before_units=$(tree "$T/etc")
group_before=$(getent group _lianyaohu || true)
puser_before=$(getent passwd _lyhd || true)
tmpd_before=present
[ -e /tmp/lyhd ] || tmpd_before=absent
lyh_layout_up "lyhi$$" || lyh_die "network layout failed"
if out=$("$src/scripts/install" "${opts[@]}" --netns "$LYH_MAIN" 2>&1); then
    t_pass "c: scripts/install"
else
    t_fail "c: scripts/install" "$out"
fi
echo "$out" | sed 's/^/    /'
pid=$(cat "$PIDF" 2>/dev/null)
t_check "c: lyhd runs from the prefix" test "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$PREFIX/libexec/lianyaohu/lyhd"
ns_self=$(stat -L -c %i /proc/self/ns/net)
ns_test=$(stat -L -c %i "/run/netns/$LYH_MAIN")
t_eq "c: lyhd is in the test namespace" "$(stat -L -c %i "/proc/$pid/ns/net" 2>/dev/null)" "$ns_test"
[ "$ns_self" != "$ns_test" ] || t_fail "c: test namespace differs from ours"
t_check "c: lyhd in its cgroup" grep -qx "0::${CG#"$LYH_CGMNT"}" "/proc/$pid/cgroup"
capbnd=$(sed -n 's/^CapBnd:\t//p' "/proc/$pid/status")
t_eq "c: lyhd capability bounding set" "$capbnd" "00000000002010ed"
t_check "c: lyhd has no_new_privs" grep -qx 'NoNewPrivs:.1' "/proc/$pid/status"
t_check "c: installed lyh capabilities answers" lyh_in_main "$PREFIX/bin/lyh" --socket "$SOCK" capabilities
t_check "c: group _lianyaohu is gid 2000000" test "$(getent group _lianyaohu | cut -d: -f3)" = 2000000
t_check "c: unit installed 0644" test "$(stat -c %a "$UNITDIR/lyhd.service" 2>/dev/null)" = 644
t_check "c: unit ExecStart has the test paths" grep -qx "ExecStart=$PREFIX/libexec/lianyaohu/lyhd --socket $SOCK --state-dir $STATE" "$UNITDIR/lyhd.service"
t_check "c: manifest lists lyhd" grep -qx "$PREFIX/libexec/lianyaohu/lyhd" "$PREFIX/share/lianyaohu/install-manifest.txt"

# A session through the installed daemon, under the unit's bounding set and no_new_privs.
if lyh_user_create; then
    # A 0700 home and a project below it: lyhd opens the cwd O_PATH through it
    # (CAP_DAC_READ_SEARCH), makes the session tmpdir (CAP_CHOWN, CAP_FOWNER).
    chmod 0700 "$LYH_HOME"
    install -d -o "$LYH_UID" -g "$LYH_GID" -m 0700 "$LYH_HOME/proj"
    ok=$(LYH_CMD_TIMEOUT=30 lyh_as_user /bin/sh -c 'cd proj && exec "$@"' sh "$PREFIX/bin/lyh" \
        --socket "$SOCK" run --vpn tun0 --no-tui -- \
        /bin/sh -c 'echo x >"$TMPDIR/f" && echo y >written && echo ok-$(id -u)' 2>&1)
    t_check "c: the session wrote into its project" test -f "$LYH_HOME/proj/written"
    t_eq "c: lyh run under the unit's capabilities" "$(echo "$ok" | tr -d '\r' | grep '^ok-' | head -n 1)" "ok-$LYH_UID"
    [ "$(echo "$ok" | grep -c '^ok-')" -ge 1 ] || echo "    lyh run said: $ok"
    left() { [ -z "$(find /tmp/lyhd -maxdepth 1 -name 'lyh-*' 2>/dev/null)" ]; }
    t_check "c: the session tmpdir was removed" lyh_wait_until 5 left

    # The installed lyh's doctor, as the user, against the installed daemon, in
    # the test layout (tun0 carries both default routes): a guarded run would work
    # (exit 0, no check fails); daemon and protocol (lyh and lyhd of one install),
    # nftables, cgroup2 (lyhd in a cgroup of its own, as Delegate=yes gives it) and
    # the VPN preflight through tun0 are ok.
    doc=$(LYH_CMD_TIMEOUT=30 lyh_as_user "$PREFIX/bin/lyh" --socket "$SOCK" doctor --json 2>"$T/doctor.err")
    rc=$?
    t_eq "c: installed lyh doctor --json exits 0" "$rc" 0
    # "NAME STATUS" per check, then "ok true|false"; "invalid" if it is not that JSON.
    dsum=$(printf '%s' "$doc" | /usr/bin/python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
    for c in d["checks"]:
        print(c["name"], c["status"])
    print("ok", str(d["ok"]).lower())
except Exception as e:
    print("invalid", type(e).__name__, e)' 2>&1)
    dstatus() { echo "$dsum" | awk -v n="$1" '$1 == n { print $2 }'; }
    echo "$dsum" | sed 's/^/    doctor: /'
    t_eq "c: doctor output is the JSON of docs/doctor.md" "$(echo "$dsum" | grep -c '^invalid')" 0
    t_eq "c: doctor ok is true" "$(dstatus ok)" true
    for n in daemon protocol nftables cgroup2 vpn:tun0; do
        t_eq "c: doctor check '$n' is ok" "$(dstatus "$n")" ok
    done
    t_eq "c: no doctor check fails" "$(echo "$dsum" | awk '$1 != "ok" && $2 != "ok" && $2 != "warn"')" ""
    if [ "$rc" != 0 ] || [ "$(dstatus ok)" != true ]; then
        echo "    doctor said: $doc"
        sed 's/^/    doctor stderr: /' "$T/doctor.err"
    fi
else
    t_fail "c: test user" "useradd failed"
fi

# ---- (b) systemd-analyze verify (needs the binaries the unit names: the real prefix) ----
if command -v systemd-analyze >/dev/null 2>&1; then
    t_check "b: systemd-analyze verify (prefix unit)" systemd-analyze verify "$PREFIX/lib/systemd/system/lyhd.service"
    t_check "b: systemd-analyze verify (installed unit)" systemd-analyze verify "$UNITDIR/lyhd.service"
else
    echo "SKIP b: systemd-analyze not installed (Debian package systemd)"
fi

# Twice is harmless: same daemon, same files.
files1=$(tree "$T/prefix")
if out=$("$src/scripts/install" "${opts[@]}" --netns "$LYH_MAIN" 2>&1); then
    t_pass "c: scripts/install again"
else
    t_fail "c: scripts/install again" "$out"
fi
t_eq "c: same daemon after the second install" "$(cat "$PIDF" 2>/dev/null)" "$pid"
t_eq "c: same files after the second install" "$(tree "$T/prefix")" "$files1"
t_check "c: answers after the second install" lyh_in_main "$PREFIX/bin/lyh" --socket "$SOCK" capabilities

# An upgrade (the installed lyhd older than the build's): replaced, and the
# running daemon restarted on the new binary.
touch -d @0 "$PREFIX/libexec/lianyaohu/lyhd"
if out=$("$src/scripts/install" "${opts[@]}" --netns "$LYH_MAIN" 2>&1); then
    t_pass "c: scripts/install over an older lyhd"
else
    t_fail "c: scripts/install over an older lyhd" "$out"
fi
npid=$(cat "$PIDF" 2>/dev/null)
t_check "c: old daemon gone after the upgrade" lyh_wait_pid_gone 5 "$pid"
t_check "c: new daemon runs the new binary" test "$(readlink "/proc/$npid/exe" 2>/dev/null)" = "$PREFIX/libexec/lianyaohu/lyhd"
t_check "c: answers after the upgrade" lyh_in_main "$PREFIX/bin/lyh" --socket "$SOCK" capabilities
pid=$npid

# ---- (d) uninstall ------------------------------------------------------------------
uopts=(--prefix "$PREFIX" --state-dir "$STATE" --unit-dir "$UNITDIR" --pid-file "$PIDF" --no-systemd)
if out=$("$src/scripts/uninstall" "${uopts[@]}" 2>&1); then
    t_pass "d: scripts/uninstall"
else
    t_fail "d: scripts/uninstall" "$out"
fi
echo "$out" | sed 's/^/    /'
t_check "d: daemon gone" lyh_wait_pid_gone 5 "$pid"
t_check "d: socket gone" test ! -e "$SOCK"
t_check "d: pid file gone" test ! -e "$PIDF"
t_check "d: cgroup gone" test ! -e "$CG"
t_eq "d: prefix as before" "$(tree "$T/prefix")" "$before_prefix"
t_eq "d: unit dir as before" "$(tree "$T/etc")" "$before_units"
t_eq "d: group as before" "$(getent group _lianyaohu || true)" "$group_before"
t_eq "d: the protocol process's user as before" "$(getent passwd _lyhd || true)" "$puser_before"
t_check "d: state dir kept (no --purge)" test -f "$STATE/state.db"
if [ "$tmpd_before" = absent ]; then
    t_check "d: /tmp/lyhd, which the daemon made, removed" test ! -e /tmp/lyhd
fi
# --purge while a process of _lyhd runs (another lyhd's protocol process, here a
# sleep): userdel refuses; uninstall says so and finishes the rest. The user as
# lyhd makes it when missing (the uninstall above removed install's).
getent passwd _lyhd >/dev/null ||
    useradd --system --no-create-home --shell /usr/sbin/nologin --user-group _lyhd ||
    t_fail "d: make _lyhd as lyhd does" "useradd failed"
if getent passwd _lyhd >/dev/null; then
    setpriv --reuid=_lyhd --regid=_lyhd --clear-groups sleep 60 </dev/null >/dev/null 2>&1 &
    busy=$!
    lyh_track_pid "$busy"
    lyh_wait_until 5 pgrep -u _lyhd -x sleep >/dev/null
    if out=$("$src/scripts/uninstall" "${uopts[@]}" --purge 2>&1); then
        t_pass "d: scripts/uninstall --purge with a process of _lyhd running"
    else
        t_fail "d: scripts/uninstall --purge with a process of _lyhd running" "$out"
    fi
    t_check "d: ... says it kept the user, and why" grep -qE "kept user _lyhd: userdel refused \(a process of it still runs: ([0-9]+ )*$busy( [0-9]+)*\)" <<<"$out"
    t_check "d: ... and removed the state dir all the same" test ! -e "$STATE"
    lyh_stop_pid "$busy" 5
fi
if out=$("$src/scripts/uninstall" "${uopts[@]}" --purge 2>&1); then
    t_pass "d: scripts/uninstall again (--purge)"
else
    t_fail "d: scripts/uninstall again (--purge)" "$out"
fi
t_eq "d: --purge removed _lyhd once nothing of it ran" "$(getent passwd _lyhd || true)" ""
t_check "d: --purge removed the state dir" test ! -e "$STATE"
t_eq "d: prefix still as before" "$(tree "$T/prefix")" "$before_prefix"

# ---- (e) systemd for real -------------------------------------------------------------
# When systemd is not PID 1 here (containers, this CI), boot a systemd of our own:
# systemd-nspawn runs /lib/systemd/systemd as PID 1 of a container whose root is
# an overlay of / (writes go to a tmpfs; the overlay, the tmpfs and nspawn's
# runtime dir under /run live in a mount namespace of their own and vanish with
# it) and whose network namespace is the test's $LYH_MAIN
# (--network-namespace-path; nothing is given a pid). It boots into
# lyh-e2e.target: sysinit.target and lyh-e2e.service, which runs the driver
# below (scripts/install with the real paths, all inside the overlay: the unit,
# lyhd under it, doctor and a guarded `lyh run` as a user, scripts/uninstall),
# then powers the container off. Results come back as PASS/FAIL lines through a
# bind-mounted directory. Bounded: the driver 150 s, nspawn 180 s.
# With systemd as PID 1 the section is skipped: this set-up (nspawn --keep-unit in
# a cgroup we make, not a scope from the host's systemd) is verified only on hosts
# without it.
SD=$T/sd
sd_pid=""
sd_cgs=()
_sd_cleanup() { # nspawn (ours, by pid), then whatever is left in the cgroups we made
    local cg i p
    [ -n "$sd_pid" ] && lyh_stop_pid "$sd_pid" 10
    for cg in "${sd_cgs[@]}"; do
        [ -d "$cg" ] || continue
        for ((i = 0; i < 50; i++)); do
            p=$(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null)
            [ -z "$p" ] && break
            [ -e "$cg/cgroup.kill" ] && echo 1 >"$cg/cgroup.kill" 2>/dev/null
            # shellcheck disable=SC2086 # a list of pids, all in our container's cgroup
            kill -KILL $p 2>/dev/null
            sleep 0.1
        done
        find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null
        [ -d "$cg" ] && echo "WARNING: could not remove cgroup $cg" >&2
    done
    return 0
}

sd_skip=""
if [ "$(cat /proc/1/comm)" = systemd ]; then
    sd_skip="PID 1 is systemd: the container set-up is verified only without it (a unit start on this host would put lyhd in the host network namespace); run scripts/install by hand on a test machine"
elif ! command -v systemd-nspawn >/dev/null 2>&1; then
    sd_skip="PID 1 is $(cat /proc/1/comm), and systemd-nspawn (Debian package systemd-container) is not installed"
elif [ ! -x /lib/systemd/systemd ] || ! command -v unshare >/dev/null 2>&1; then
    sd_skip="PID 1 is $(cat /proc/1/comm), and /lib/systemd/systemd or unshare is missing"
elif ! grep -qw overlay /proc/filesystems; then
    sd_skip="PID 1 is $(cat /proc/1/comm), and the kernel has no overlay file system"
fi
# nspawn mounts a tmpfs on the container's /tmp: a source or build dir there
# (a CI clone, say) is bound in at the same path.
sd_binds=()
for d in "$src" "$LYH_BUILD"; do
    case $d/ in /tmp/*) sd_binds+=("--bind=$d") ;; esac
done

if [ -n "$sd_skip" ]; then
    echo "SKIP e: $sd_skip"
else
    lyh_on_cleanup _sd_cleanup
    mkdir -p "$SD/out" "$SD/root" "$SD/stage/etc/systemd/system"
    : >"$SD/netns"
    # A cgroup of our own for nspawn, in cgroup v2 and, on a hybrid host, in the
    # named v1 hierarchy systemd uses: nspawn --keep-unit runs the container there.
    sd_cgs=("$LYH_CGMNT/lyhi$$-sd")
    v1=$(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup" && $(i + 3) ~ /(^|,)name=systemd(,|$)/) print $5; break } }' /proc/self/mountinfo | head -n 1)
    [ -n "$v1" ] && sd_cgs+=("$v1/lyhi$$-sd")
    for cg in "${sd_cgs[@]}"; do mkdir "$cg" || lyh_die "mkdir $cg"; done

    cat >"$SD/stage/etc/systemd/system/lyh-e2e.target" <<'EOF'
[Unit]
Description=lianyaohu e2e: sysinit and the test driver, nothing else
Requires=sysinit.target lyh-e2e.service
After=sysinit.target lyh-e2e.service
EOF
    cat >"$SD/stage/etc/systemd/system/lyh-e2e.service" <<EOF
[Unit]
Description=lianyaohu e2e driver (tests/e2e/install.sh)
DefaultDependencies=no
Requires=sysinit.target
After=sysinit.target
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Service]
Type=oneshot
TimeoutStartSec=150
ExecStart=/bin/bash /lyh-e2e-driver "$src" "$LYH_BUILD" "$LYH_PROBE_TOOL"
EOF
    # The driver, inside the container (systemd is PID 1 there). Same PASS/FAIL
    # lines as t_pass/t_fail, into /lyh-e2e-out/result.
    cat >"$SD/stage/lyh-e2e-driver" <<'EOF'
#!/bin/bash
set -u
src=$1 build=$2 probe_tool=$3
O=/lyh-e2e-out
R=$O/result
exec >"$O/driver.log" 2>&1
ok() { echo "PASS $1" >>"$R"; }
no() { echo "FAIL $1: $(printf '%s' "${2:-}" | tr '\n' '|' | cut -c1-600)" >>"$R"; }
check() { local n=$1 out; shift; if out=$("$@" 2>&1); then ok "$n"; else no "$n" "$out"; fi; }
eq() { if [ "$2" = "$3" ]; then ok "$1"; else no "$1" "got '$2', want '$3'"; fi; }
trap 'journalctl --no-pager -b -u lyhd.service >"$O/journal" 2>&1' EXIT
had_group=$(getent group _lianyaohu)

eq "PID 1 is systemd" "$(cat /proc/1/comm)" systemd
check "systemd runs the system (/run/systemd/system)" test -d /run/systemd/system
stat -L -c %i /proc/self/ns/net >"$O/netns"
grep '^Cap' /proc/self/status

# 1. scripts/install with its real paths (in the overlay), through systemctl
out=$("$src/scripts/install" --build "$build" 2>&1)
rc=$?
echo "$out"
eq "scripts/install exits 0" "$rc" 0
check "scripts/install started the unit" grep -qx 'scripts/install: systemctl enable --now lyhd.service' <<<"$out"
check "lyhd.service is active" systemctl -q is-active lyhd.service
check "lyhd.service is enabled" systemctl -q is-enabled lyhd.service
pid=$(systemctl show -P MainPID lyhd.service)
echo "$pid $(stat -L -c %i "/proc/$pid/ns/net" 2>/dev/null)" >"$O/lyhd"
eq "lyhd runs the installed binary" "$(readlink "/proc/$pid/exe")" /usr/local/libexec/lianyaohu/lyhd
eq "lyhd is in the unit's cgroup" "$(grep '^0::' "/proc/$pid/cgroup")" "0::/system.slice/lyhd.service"
eq "lyhd capability bounding set (CapabilityBoundingSet=)" "$(sed -n 's/^CapBnd:\t//p' "/proc/$pid/status")" 00000000002010ed
check "lyhd has no_new_privs (NoNewPrivileges=yes)" grep -qx 'NoNewPrivs:.1' "/proc/$pid/status"
eq "/etc is read-only for lyhd (ProtectSystem=full)" "$(findmnt --task "$pid" -n -o OPTIONS -T /etc | cut -d, -f1)" ro
check "lyh capabilities answers on the default socket" /usr/local/bin/lyh capabilities
# Delegate=yes: systemd marks the cgroup it hands over (xattr trusted.delegate).
cgmnt=$(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") print $5; break } }' /proc/self/mountinfo | head -n 1)
eq "lyhd's cgroup is delegated to it (Delegate=yes)" "$(/usr/bin/python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "trusted.delegate").decode())' \
    "$cgmnt/system.slice/lyhd.service" 2>&1)" 1

# 2. a user: doctor and a guarded run through the unit's lyhd
u=lyhs$$
if useradd -m -U -s /bin/sh "$u"; then
    uid=$(id -u "$u") gid=$(id -g "$u") home=$(getent passwd "$u" | cut -d: -f6)
    chmod 0700 "$home"
    install -d -o "$uid" -g "$gid" -m 0755 "$home/bin"
    install -o "$uid" -g "$gid" -m 0755 "$probe_tool" "$home/bin/probe"
    as_user() {
        (cd "$home" && timeout -k 5 60 setpriv --reuid="$uid" --regid="$gid" --init-groups \
            env -i HOME="$home" USER="$u" LOGNAME="$u" PATH=/usr/bin:/bin LANG=C "$@")
    }
    doc=$(as_user /usr/local/bin/lyh doctor --json)
    eq "lyh doctor --json exits 0" "$?" 0
    dsum=$(printf '%s' "$doc" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
for c in d["checks"]:
    print(c["name"], c["status"])
print("ok", str(d["ok"]).lower())' 2>&1)
    echo "$dsum"
    for n in ok:true daemon:ok protocol:ok nftables:ok cgroup2:ok vpn:tun0:ok; do
        eq "doctor: ${n%:*} is ${n##*:}" "$(awk -v n="${n%:*}" '$1 == n { print $2 }' <<<"$dsum")" "${n##*:}"
    done
    run=$(as_user /usr/local/bin/lyh run --vpn tun0 --no-tui -- /bin/sh -c \
        'echo "id $(id -u)"; grep "^0::" /proc/self/cgroup; echo "vpn $("$0" probe tcp 11.77.0.1 7777 3000)"; echo "lan $("$0" probe tcp 192.168.77.2 7777 3000)"' \
        "$home/bin/probe" 2>&1)
    rc=$?
    echo "$run"
    run=$(tr -d '\r' <<<"$run")
    eq "lyh run exits 0" "$rc" 0
    eq "lyh run: the agent runs as the user" "$(grep '^id ' <<<"$run")" "id $uid"
    check "lyh run: the session has a cgroup of its own under lyhd.service" grep -qE '^0::/system.slice/lyhd.service/lyh/[^/]+$' <<<"$run"
    check "lyh run: tun0 reaches 11.77.0.1" grep -qE '^vpn ok ' <<<"$run"
    check "lyh run: the LAN is refused" grep -qE '^lan (refused|unreach) ' <<<"$run"
else
    no "useradd" "useradd $u failed"
fi

# 3. scripts/uninstall: the unit stopped and gone, the files gone
out=$("$src/scripts/uninstall" 2>&1)
rc=$?
echo "$out"
eq "scripts/uninstall exits 0" "$rc" 0
eq "lyhd.service is gone" "$(systemctl show -P LoadState lyhd.service)" not-found
check "lyhd has exited" sh -c "! kill -0 $pid 2>/dev/null"
check "no unit file left" test ! -e /etc/systemd/system/lyhd.service
check "no multi-user.target.wants link left" test ! -e /etc/systemd/system/multi-user.target.wants/lyhd.service
check "no lyhd left" test ! -e /usr/local/libexec/lianyaohu
check "no lyh left" test ! -e /usr/local/bin/lyh
eq "the group as before" "$(getent group _lianyaohu)" "$had_group"
echo done >"$O/done"
EOF

    sd_failed=$T_FAILED
    echo "# e: booting systemd in a container (systemd-nspawn, network namespace $LYH_MAIN)"
    # In a mount namespace of our own: join our cgroups, put a tmpfs over /run
    # (nspawn's runtime files; the test namespace is bound to $SD/netns first),
    # the overlay of / on a tmpfs upper layer, then exec nspawn.
    # shellcheck disable=SC2016 # the inner script expands its own arguments
    timeout -k 5 200 unshare --mount --propagation private -- bash -c '
        set -e
        SD=$1 NS=$2 MACHINE=$3 BINDS=$4
        shift 4
        for cg in "$@"; do echo $$ >"$cg/cgroup.procs"; done
        mount --bind "/run/netns/$NS" "$SD/netns"
        mount -t tmpfs -o mode=0755 tmpfs /run
        mount -t tmpfs -o mode=0755 tmpfs "$SD/root"
        mkdir "$SD/root/upper" "$SD/root/work" "$SD/root/merged"
        cp -a "$SD/stage/." "$SD/root/upper/"
        mount -t overlay overlay -o "lowerdir=/,upperdir=$SD/root/upper,workdir=$SD/root/work" "$SD/root/merged"
        # nspawn keeps CAP_NET_ADMIN only for networks it makes itself (lyhd needs
        # it: nftables, NFLOG), and its syscall allow-list has no Landlock calls
        # (lyhd: "Landlock is not available (Operation not permitted)").
        exec timeout -k 5 180 systemd-nspawn --quiet --register=no --keep-unit --machine="$MACHINE" \
            -D "$SD/root/merged" --network-namespace-path="$SD/netns" --bind="$SD/out:/lyh-e2e-out" \
            --capability=CAP_NET_ADMIN \
            --system-call-filter="landlock_create_ruleset landlock_add_rule landlock_restrict_self" \
            $BINDS -b systemd.unit=lyh-e2e.target' \
        bash "$SD" "$LYH_MAIN" "lyhi$$" "${sd_binds[*]}" "${sd_cgs[@]}" </dev/null >"$SD/console.log" 2>&1 &
    sd_pid=$!
    wait "$sd_pid"
    rc=$?
    sd_pid=""
    t_eq "e: the container powered off by itself (nspawn exit status)" "$rc" 0
    t_check "e: the driver ran to its end" test -f "$SD/out/done"
    [ -f "$SD/out/result" ] && while IFS= read -r line; do
        case $line in
        "PASS "*) t_pass "e: ${line#PASS }" ;;
        "FAIL "*) n=${line#FAIL }; t_fail "e: ${n%%: *}" "${n#*: }" ;;
        esac
    done <"$SD/out/result"
    t_eq "e: the container ran in the test namespace" "$(cat "$SD/out/netns" 2>/dev/null)" "$ns_test"
    t_eq "e: lyhd ran in the test namespace" "$(cut -d' ' -f2 "$SD/out/lyhd" 2>/dev/null)" "$ns_test"
    if [ "$T_FAILED" -gt "$sd_failed" ]; then
        for f in console.log out/driver.log out/journal; do
            [ -f "$SD/$f" ] && { echo "    --- $f (last 30 lines)"; tail -n 30 "$SD/$f" | sed 's/^/    /'; }
        done
    fi
    _sd_cleanup
    sd_cgs=()
fi

t_done
exit $?
