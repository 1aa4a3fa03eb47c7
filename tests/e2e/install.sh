#!/usr/bin/env bash
# scripts/install and scripts/uninstall, and the systemd unit (tests/e2e/lib.sh):
#  (a) DESTDIR=... cmake --install: the exact tree and modes
#  (b) systemd-analyze verify on the unit (skipped without systemd-analyze)
#  (c) scripts/install into a temp prefix, unit dir, socket, state dir, pid file
#      and cgroup, lyhd started in a test network namespace (--netns), answers
#      `lyh capabilities`; a `lyh run` works under the unit's capability bounding
#      set; install again (idempotent)
#  (d) scripts/uninstall: the prefix and unit dir as before, the group as before,
#      the daemon gone; uninstall again (idempotent)
# Never touches /usr/local, /etc/systemd/system, the host's lyhd paths or firewall.
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
    left() { [ -z "$(find /tmp -maxdepth 1 -name 'lyh-*' -user "$LYH_UID" 2>/dev/null)" ]; }
    t_check "c: the session tmpdir was removed" lyh_wait_until 5 left
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
t_check "d: state dir kept (no --purge)" test -f "$STATE/state.db"
if out=$("$src/scripts/uninstall" "${uopts[@]}" --purge 2>&1); then
    t_pass "d: scripts/uninstall again (--purge)"
else
    t_fail "d: scripts/uninstall again (--purge)" "$out"
fi
t_check "d: --purge removed the state dir" test ! -e "$STATE"
t_eq "d: prefix still as before" "$(tree "$T/prefix")" "$before_prefix"

# ---- systemd for real (only when systemd is PID 1) ---------------------------------------
if [ "$(cat /proc/1/comm)" = systemd ]; then
    echo "SKIP systemd: a real unit start would put lyhd in the host network namespace (safety rule); run scripts/install by hand on a test machine"
else
    echo "SKIP systemd: PID 1 is $(cat /proc/1/comm), not systemd"
fi

t_done
exit $?
