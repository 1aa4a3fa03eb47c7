#!/bin/bash
# e2e: a real agent under lyh run (issue 20): Claude Code (the npm package,
# which scripts/deps installs pinned into /opt/lianyaohu-test/claude-code) run
# as `lyh run --allow-domain api.anthropic.com -- claude -p ...` in the test
# namespaces. The VPN's resolver (the test's, beyond tun0) answers
# api.anthropic.com with a test address where a TCP listener stands in for
# the API. Checked: the agent's query reaches that resolver through lyhd, its
# connection attempt reaches that address through tun0 (the listener sees it),
# other names it asks for get NXDOMAIN and never reach the resolver, and the
# audit log has the query and the flow with its name.
#
# usage: agent_claude.sh BUILD_DIR     (as root; exits 77 = skipped otherwise,
# and when Claude Code is not installed outside CI; in CI that is a failure)
# Safety: everything happens in the namespaces lib.sh makes; the API key is a
# dummy, and nothing leaves them.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: agent_claude.sh needs root"
    exit 77
fi
CLAUDE=${LYH_CLAUDE:-/opt/lianyaohu-test/claude-code/node_modules/.bin/claude}
if ! "$CLAUDE" --version >/dev/null 2>&1; then
    if [ -n "${CI:-}" ]; then
        echo "FAIL: Claude Code is not installed at $CLAUDE (scripts/deps installs it)"
        exit 1
    fi
    echo "SKIP: Claude Code is not installed at $CLAUDE (scripts/deps installs it)"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
lyh_init "${1:-}"

P="lyhcc-$$"
lyh_layout_up "$P" tun0 || lyh_die "network layout"
lyh_user_create || lyh_die "cannot create the test user"

API=11.77.1.77
VPNLOG=$LYH_TMP/vpn-dns.log
: >"$VPNLOG"
ip -n "$LYH_EXIT" addr add "$API/32" dev lo || lyh_die "API address"
ip netns exec "$LYH_EXIT" /usr/bin/python3 "$HERE/dns_server.py" 10.77.0.2 53 "$VPNLOG" \
    "api.anthropic.com=$API" </dev/null >/dev/null 2>&1 &
lyh_track_pid "$!"
# the stand-in API: logs each connection (and its first bytes: a TLS hello)
ip netns exec "$LYH_EXIT" /usr/bin/python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 443)); s.listen(16); print("serving", flush=True)
while True:
    c, peer = s.accept(); c.settimeout(5)
    try: first = c.recv(5)
    except OSError: first = b""
    print("connect from %s first %s" % (peer[0], first.hex()), flush=True)
    c.close()
' "$API" </dev/null >"$LYH_TMP/api.log" 2>&1 &
lyh_track_pid "$!"
lyh_wait_until 5 grep -q serving "$LYH_TMP/api.log" || lyh_die "API stand-in"
lyh_daemon_start || lyh_die "lyhd does not start"
install -d -o "$LYH_UID" -g "$LYH_GID" -m 0700 "$LYH_HOME/proj"

echo "# Claude Code $("$CLAUDE" --version 2>/dev/null) under lyh run"
LYH_CMD_TIMEOUT=120 lyh_as_user sh -c 'cd proj && exec "$@"' sh "$LYH_LYH" --socket "$LYH_SOCK" \
    run --vpn tun0 --no-tui --dns 10.77.0.2 --allow-domain api.anthropic.com \
    --env ANTHROPIC_API_KEY=sk-ant-lyh-test-not-a-key -- "$CLAUDE" -p "say hello" \
    </dev/null >"$LYH_TMP/claude.out" 2>&1 &
RUN=$!
lyh_track_pid "$RUN"
lyh_wait_until 90 grep -q "^connect from" "$LYH_TMP/api.log"
# it retries for a while: end it once its first attempt is in
sleep 1
kill -TERM "$RUN" 2>/dev/null
lyh_wait_pid_gone 30 "$RUN" || kill -KILL "$RUN" 2>/dev/null
wait "$RUN" 2>/dev/null
echo "  agent said: $(head -c 300 "$LYH_TMP/claude.out" | tr '\n' ' ')"
echo "  API stand-in: $(head -n 3 "$LYH_TMP/api.log" | tr '\n' ' ')"

t_check "the query for api.anthropic.com reached the VPN's resolver (through lyhd)" \
    grep -q "^udp api.anthropic.com 1$" "$VPNLOG"
t_check "the agent's connection reached the test address through tun0" \
    grep -q "^connect from 10.77.0.1 first 16" "$LYH_TMP/api.log"
t_check "no other name reached the resolver (the rest got NXDOMAIN from lyhd)" \
    eval '! grep -v " api.anthropic.com " "$VPNLOG" | grep -q .'
aud=$(LYH_CMD_TIMEOUT=30 lyh_cli audit query 2>&1)
t_check "the audit log has the answered query" \
    eval 'grep "dns" <<<"$aud" | grep -q "name=api.anthropic.com.*answers=$API"'
t_check "... and the flow, with its name" \
    eval 'grep "flow" <<<"$aud" | grep "$API:443" | grep -q "names=api.anthropic.com"'
echo "  names it was refused: $(grep -o 'denied .*name=[^ ]*' <<<"$aud" | sed 's/.*name=//' | sort -u | tr '\n' ' ')"
lyh_daemon_stop
lyh_daemon_check_log
t_done
