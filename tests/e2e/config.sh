#!/usr/bin/env bash
# End-to-end test of the user configuration as lyh run applies it, through the
# real lyhd: a global config.toml with [paths] deny (the directory is covered
# in the session), and an untrusted project .lianyaohu.toml whose tightening
# (network.deny) applies while its widening is ignored and named.
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

lyh_daemon_stop
t_done
exit $?
