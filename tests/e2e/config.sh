#!/usr/bin/env bash
# End-to-end test of the user configuration as lyh run applies it, through the
# real lyhd: a global config.toml with [paths] deny (the directory is covered
# in the session), and an untrusted project .lianyaohu.toml whose tightening
# (network.deny) applies while its widening is ignored and named; and lyh run
# as a user who kept root's HOME (/root, 0700) or another user's readable
# HOME and XDG_CONFIG_HOME: the user's own passwd home and config are used.
#
# usage: config.sh BUILD_DIR     (as root; exits 77 = skipped otherwise)
# Network, daemon, user and safety rules come from lib.sh (read its header).
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: config.sh needs root"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
lyh_init "${1:-}"

P="lyhtc-$$"
lyh_layout_up "$P" tun0 || lyh_die "network layout"
lyh_user_create || lyh_die "cannot create the test user"
PROBE=$(lyh_user_install "$LYH_PROBE_TOOL" probe) || lyh_die "cannot install the probe"
lyh_daemon_start || lyh_die "lyhd does not start"

# as_user_file PATH CONTENT: a file of the test user (dirs 0700, file 0600).
as_user_file() {
    install -d -o "$LYH_UID" -g "$LYH_GID" -m 0700 "$(dirname "$1")"
    printf '%s' "$2" >"$1"
    chown "$LYH_UID:$LYH_GID" "$1"
    chmod 0600 "$1"
}

# ---- 1. [paths] deny from the global file --------------------------------------------------

echo "# 1. paths.deny covers the directory inside the session"
as_user_file "$LYH_HOME/secret/key.txt" "hunter2"
as_user_file "$LYH_HOME/open/note.txt" "visible"
as_user_file "$LYH_HOME/.config/lianyaohu/config.toml" '[paths]
deny = ["~/secret"]
'
out=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui -- /bin/sh -c \
    'echo "n=$(ls -A "$HOME/secret" | wc -l)"; cat "$HOME/secret/key.txt" 2>/dev/null || echo unreadable
     (echo x >"$HOME/secret/new") 2>/dev/null && echo written || echo unwritable
     cat "$HOME/open/note.txt"' 2>&1)
t_eq "1: the denied directory looks empty, its file unreadable, nothing can be written; others stay" \
    "$(echo "$out" | grep -E '^(n=|unreadable|written|unwritable|visible|hunter2)' | tr '\n' ' ')" \
    "n=0 unreadable unwritable visible "
t_check "1: outside the session the file is untouched" grep -qx hunter2 "$LYH_HOME/secret/key.txt"
as_user_file "$LYH_HOME/.config/lianyaohu/config.toml" '[paths]
deny = ["~/open/note.txt"]
'
out=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui -- /bin/true 2>&1)
rc=$?
if [ "$rc" != 0 ] && grep -q "deny paths must be directories" <<<"$out"; then
    t_pass "1: a file as deny path is refused, not ignored"
else
    t_fail "1: a file as deny path is refused" "rc=$rc $out"
fi
rm -f "$LYH_HOME/.config/lianyaohu/config.toml"

# ---- 2. an untrusted project file ----------------------------------------------------------

echo "# 2. project .lianyaohu.toml, untrusted: tightenings apply, widenings are named"
as_user_file "$LYH_HOME/proj/.lianyaohu.toml" '[network]
deny = ["11.77.0.1"]
[paths]
writable = ["~/open"]
'
out=$(cd / && LYH_CMD_TIMEOUT=30 lyh_as_user sh -c "cd '$LYH_HOME/proj' && '$LYH_LYH' --socket '$LYH_SOCK' run --vpn tun0 --no-tui -- '$PROBE' probe tcp 11.77.0.1 $LYH_PORT 3000" 2>&1)
t_check "2: network.deny from the untrusted project applies (refused)" grep -q '^refused ' <<<"$out"
t_check "2: the ignored widening is named (paths.writable)" grep -q 'paths.writable' <<<"$out"
out=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui -- "$PROBE" probe tcp 11.77.0.1 "$LYH_PORT" 3000 2>&1)
t_check "2: outside the project the destination works" grep -q '^ok ' <<<"$out"
tres=$(LYH_CMD_TIMEOUT=30 lyh_as_user "$LYH_LYH" config trust "$LYH_HOME/proj" 2>&1)
echo "$tres" | sed 's/^/    /'
t_check "2: lyh config trust names what the approval lets the file widen" \
    grep -q "^approved .*/proj/.lianyaohu.toml (sha256 [0-9a-f]*); it widens: paths.writable;" <<<"$tres"
LYH_CMD_TIMEOUT=30 lyh_as_user "$LYH_LYH" config revoke "$LYH_HOME/proj" >/dev/null 2>&1 ||
    t_fail "2: config revoke" "failed"

# ---- 3. whose home: lyh started with someone else's environment ---------------------------

echo "# 3. HOME and XDG_CONFIG_HOME of another user: lyh uses the caller's passwd home"
# as_user_env HOME XDG CMD...: as lyh_as_user, but with the HOME (and, when
# not empty, XDG_CONFIG_HOME) given, as after `setpriv --reuid` from a root
# shell, which keeps root's environment.
as_user_env() {
    local h=$1 x=$2
    shift 2
    (cd "$LYH_HOME" && exec timeout -k 5 30 nsenter --net="/run/netns/$LYH_MAIN" \
        setpriv --reuid="$LYH_UID" --regid="$LYH_GID" --init-groups \
        env -i HOME="$h" ${x:+XDG_CONFIG_HOME="$x"} USER="$LYH_USER" LOGNAME="$LYH_USER" \
        PATH=/usr/bin:/bin LANG=C LYH_SOCKET="$LYH_SOCK" "$@")
}
# root's home as on a fresh Debian: root-owned, mode 0700. /root itself when
# it is that (it is never changed here), else a stand-in of the same kind.
roothome=/root
if [ "$(stat -c '%u %a' /root 2>/dev/null)" != "0 700" ]; then
    roothome=$LYH_TMP/roothome
    install -d -o 0 -g 0 -m 0700 "$roothome"
    echo "# /root is not root's with mode 0700 here; using $roothome instead"
fi
as_user_file "$LYH_HOME/.config/lianyaohu/config.toml" '[defaults]
command = ["/bin/echo", "own-config"]
'
out=$(as_user_env "$roothome" "" "$LYH_LYH" --socket "$LYH_SOCK" run --vpn tun0 --no-tui -- \
    /bin/sh -c 'echo "home=$HOME"; "$1" probe tcp 11.77.0.1 '"$LYH_PORT"' 3000' sh "$PROBE" 2>&1)
rc=$?
if [ "$rc" = 0 ] && grep -qx "home=$LYH_HOME" <<<"$out" && grep -q '^ok ' <<<"$out"; then
    t_pass "3: HOME=$roothome (root's, 0700) inherited: lyh run works, through the VPN, in the user's home"
else
    t_fail "3: HOME=$roothome inherited: lyh run works" "rc=$rc $out"
fi
t_check "3: one note names the HOME that was not used and the one that is" \
    grep -q "^lyh: note: \$HOME ($roothome) is owned by uid 0, not by you; using $LYH_HOME" <<<"$out"
out=$(as_user_env "$roothome" "" "$LYH_LYH" --socket "$LYH_SOCK" run --vpn tun0 --no-tui 2>&1)
t_eq "3: the user's own config.toml applies (its default command ran)" \
    "$(grep -x 'own-config' <<<"$out")" "own-config"
# A readable home and config dir of root's, with a config that would show.
foreign=$LYH_TMP/foreign
install -d -o 0 -g 0 -m 0755 "$foreign" "$foreign/.config" "$foreign/.config/lianyaohu"
printf '[defaults]\ncommand = ["/bin/echo", "foreign-config"]\n' >"$foreign/.config/lianyaohu/config.toml"
chmod 0644 "$foreign/.config/lianyaohu/config.toml"
out=$(as_user_env "$foreign" "$foreign/.config" "$LYH_LYH" --socket "$LYH_SOCK" run --vpn tun0 \
    --no-tui 2>&1)
t_eq "3: another user's readable config is not read as the caller's (HOME and XDG_CONFIG_HOME)" \
    "$(grep -xE '(own|foreign)-config' <<<"$out" | tr '\n' ' ')" "own-config "
t_check "3: the ignored XDG_CONFIG_HOME is named in the same note" \
    grep -q "\$XDG_CONFIG_HOME ($foreign/.config) is owned by uid 0, not by you; ignored" <<<"$out"
out=$(as_user_env "$LYH_HOME" "" "$LYH_LYH" --socket "$LYH_SOCK" run --vpn tun0 --no-tui 2>&1)
if grep -qx own-config <<<"$out" && ! grep -q 'lyh: note' <<<"$out"; then
    t_pass "3: the user's own HOME: used, no note"
else
    t_fail "3: the user's own HOME: used, no note" "$out"
fi
# The user's own config, unreadable: an error that names it, never skipped.
chmod 0000 "$LYH_HOME/.config/lianyaohu/config.toml"
out=$(as_user_env "$roothome" "" "$LYH_LYH" --socket "$LYH_SOCK" run --vpn tun0 --no-tui 2>&1)
rc=$?
if [ "$rc" = 125 ] && grep -q "$LYH_HOME/.config/lianyaohu/config.toml: cannot open: Permission denied" <<<"$out"; then
    t_pass "3: an unreadable config of the user's own stays an error with its path"
else
    t_fail "3: an unreadable config of the user's own stays an error" "rc=$rc $out"
fi
rm -f "$LYH_HOME/.config/lianyaohu/config.toml"

lyh_daemon_stop
t_done
exit $?
