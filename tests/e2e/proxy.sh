#!/usr/bin/env bash
# End-to-end test of proxy-only mode (`lyh run --vpn none`) through the real
# lyhd, nftables, Landlock and seccomp: the agent reaches a VPN-side server
# only through a local HTTP CONNECT proxy (run by root outside the sandbox);
# its direct connects (VPN, LAN, another local service, DNS) are refused; the
# proxy comes from --env, the config file, or nowhere (refused without a
# terminal); a LAN proxy is refused until the admin policy permits it, the
# mode is refused once the policy forbids it, and a running proxy-only
# session is cut then.
#
# usage: proxy.sh BUILD_DIR     (as root; exits 77 = skipped otherwise)
# Network, daemon, user and safety rules come from lib.sh (read its header).
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: proxy.sh needs root"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
lyh_init "${1:-}"

P="lyhtx-$$"
PPORT=8118 # the proxy
OPORT=8119 # another service of the machine's, on loopback
lyh_layout_up "$P" tun0 || lyh_die "network layout"
lyh_user_create || lyh_die "cannot create the test user"
lyh_daemon_start || lyh_die "lyhd does not start"
AGENT=$(lyh_user_install "$HERE/proxy_agent.py" proxy_agent.py) || lyh_die "cannot install the agent"
lyh_root() { "$LYH_LYH" --socket "$LYH_SOCK" "$@"; }

# proxy NS ADDR LOG: the CONNECT proxy at ADDR:PPORT in NS (root, tracked)
proxy() {
    ip netns exec "$1" /usr/bin/python3 "$HERE/proxy_connect.py" "$2" "$PPORT" 600 </dev/null >"$3" 2>&1 &
    lyh_track_pid "$!"
    lyh_wait_until 5 grep -q serving "$3"
}
proxy "$LYH_MAIN" 127.0.0.1 "$LYH_TMP/proxy.log" || lyh_die "the proxy does not start: $(cat "$LYH_TMP/proxy.log")"
lyh_serve "$LYH_MAIN" 127.0.0.1 "$OPORT" || lyh_die "the other local service"

run_px() { # ARGS... (after --): lyh run --vpn none with the proxy from --env; output, rc= last
    LYH_CMD_TIMEOUT=60 lyh_cli run --vpn none --no-tui --env HTTPS_PROXY=http://127.0.0.1:$PPORT \
        -- /usr/bin/python3 "$AGENT" "$@" </dev/null 2>&1
    echo "rc=$?"
}
nothing_left() { # LABEL: no session row, chain or cgroup stays behind (a session's
    # teardown finishes just after its client got the exit status)
    lyh_wait_until 5 sh -c "[ \"\$(sqlite3 -cmd '.timeout 5000' '$LYH_DB' 'select count(*) from sessions where state<>4')\" = 0 ]"
    t_eq "$1: no live session row" "$(lyh_live_rows)" 0
    t_eq "$1: no session chain" "$(lyh_session_chains | wc -l)" 0
    t_eq "$1: no session cgroup" "$(lyh_cg_sessions | wc -l)" 0
}

# ---- 1. through the proxy, and nothing else ----------------------------------------------
echo "# 1. --vpn none --env HTTPS_PROXY=...: through the proxy only"
res=$(run_px via 11.77.0.1:7777)
printf '%s\n' "$res" | sed 's/^/  | /'
t_check "1: the start line says proxy-only through the proxy" \
    grep -q "proxy-only through 127.0.0.1:$PPORT (no VPN, no DNS)" <<<"$res"
t_check "1: the CONNECT to the VPN-side server is answered 200" grep -q "^status HTTP/1.1 200" <<<"$res"
t_check "1: ... and the server's echo comes back through the tunnel" grep -qx "echo through-proxy" <<<"$res"
t_check "1: the proxy opened that tunnel" grep -q "tunnel 11.77.0.1:7777 ok" "$LYH_TMP/proxy.log"
t_check "1: exit status 0" grep -qx "rc=0" <<<"$res"

res=$(run_px env)
t_check "1: the agent has the proxy in HTTPS_PROXY, ALL_PROXY, HTTP_PROXY" \
    eval 'grep -qx "HTTPS_PROXY http://127.0.0.1:$PPORT" <<<"$res" &&
          grep -qx "ALL_PROXY http://127.0.0.1:$PPORT" <<<"$res" &&
          grep -qx "HTTP_PROXY http://127.0.0.1:$PPORT" <<<"$res" &&
          grep -qx "https_proxy http://127.0.0.1:$PPORT" <<<"$res"'
t_check "1: ... and NO_PROXY names loopback (its own servers)" \
    grep -qx "NO_PROXY localhost,127.0.0.1,::1" <<<"$res"

for probe in "tcp 11.77.0.1 7777 VPN-side server, directly" "tcp 192.168.77.2 7777 LAN host" \
    "tcp 127.0.0.1 $OPORT another service on this machine" "tcp 10.77.0.2 53 the VPN peer's DNS port" \
    "udp 11.77.0.1 7777 VPN-side server over UDP" "udp 127.0.0.1 53 a local resolver" \
    "udp 10.77.0.2 53 the VPN peer's resolver"; do
    read -r proto addr port what <<<"$probe"
    res=$(run_px "$proto" "$addr" "$port")
    t_check "1: refused: $proto $addr:$port ($what): $(grep "^$proto " <<<"$res")" \
        eval 'grep -q "^$proto $addr $port " <<<"$res" && ! grep -q "^$proto $addr $port ok" <<<"$res"'
done
# control: the same probes succeed outside any session
t_check "1: control: the VPN-side server answers outside the sandbox" \
    grep -q '^ok' <<<"$(lyh_in_main "$LYH_TOOL" probe tcp 11.77.0.1 7777 3000 2>&1)"
t_check "1: control: the other local service answers outside the sandbox" \
    grep -q '^ok' <<<"$(lyh_in_main "$LYH_TOOL" probe tcp 127.0.0.1 "$OPORT" 3000 2>&1)"

fw=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn none --no-tui --env HTTPS_PROXY=http://127.0.0.1:$PPORT \
    --print-firewall -- true 2>&1)
t_check "1: --print-firewall: the proxy's port is accepted on loopback" \
    grep -q "ip daddr 127.0.0.1 tcp dport $PPORT" <<<"$fw"
t_check "1: ... and no VPN interface is named" eval '! grep -q tun0 <<<"$fw"'
rec=$(lyh_root audit query --kind session --json 2>&1)
t_check "1: the start record names the proxy and no interface" \
    eval 'grep -q "proxy=127.0.0.1:$PPORT" <<<"$rec" && grep -q "interface=none" <<<"$rec"'
nothing_left 1

# ---- 2. the proxy from the config file ----------------------------------------------------
echo "# 2. [defaults] vpn_interface = \"none\" and proxy = ... in the user's config"
CFG=$LYH_HOME/.config/lianyaohu
install -d -o "$LYH_UID" -g "$LYH_GID" -m 0700 "$LYH_HOME/.config" "$CFG"
printf '[defaults]\nvpn_interface = "none"\nproxy = "http://localhost:%s/"\n' "$PPORT" >"$CFG/config.toml"
chown "$LYH_UID:$LYH_GID" "$CFG/config.toml"
res=$(LYH_CMD_TIMEOUT=60 lyh_cli run --no-tui -- /usr/bin/python3 "$AGENT" via 11.77.0.1:7777 </dev/null 2>&1; echo "rc=$?")
t_check "2: no flag: proxy-only through the configured proxy" \
    eval 'grep -q "proxy-only through 127.0.0.1:$PPORT" <<<"$res" && grep -qx "echo through-proxy" <<<"$res"'
printf '[defaults]\nvpn_interface = "none"\nproxy = "http://proxy.example:3128"\n' >"$CFG/config.toml"
res=$(LYH_CMD_TIMEOUT=30 lyh_cli run --no-tui -- true </dev/null 2>&1; echo "rc=$?")
t_check "2: a proxy named by host name is refused at the file's line ($(head -1 <<<"$res"))" \
    eval 'grep -q "config.toml:3:.*defaults.proxy: .*is not an address" <<<"$res" && grep -qx "rc=125" <<<"$res"'
rm -f "$CFG/config.toml"
nothing_left 2

# ---- 3. refusals ---------------------------------------------------------------------------
echo "# 3. refusals: no proxy, widenings, a LAN proxy"
res=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn none --no-tui -- true </dev/null 2>&1; echo "rc=$?")
t_check "3: no proxy and no terminal: refused, saying how to give one" \
    eval 'grep -q "proxy-only mode needs a local proxy" <<<"$res" && grep -q "HTTPS_PROXY=http://127.0.0.1:PORT" <<<"$res" && grep -qx "rc=125" <<<"$res"'
res=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn none --no-tui --env HTTPS_PROXY=http://127.0.0.1:$PPORT \
    --allow-dest 11.77.0.1 -- true </dev/null 2>&1; echo "rc=$?")
t_check "3: --allow-dest with --vpn none: refused" \
    eval 'grep -q "reaches its proxy and nothing else" <<<"$res" && grep -qx "rc=125" <<<"$res"'
res=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn none --no-tui --env ALL_PROXY=socks5h://192.168.77.2:$PPORT \
    -- true </dev/null 2>&1; echo "rc=$?")
t_check "3: a LAN proxy: refused by the default policy ($(grep lyh <<<"$res" | head -1))" \
    eval 'grep -q "the proxy 192.168.77.2:$PPORT is not on this machine" <<<"$res" &&
          grep -q "permit_lan_proxy is off" <<<"$res" && grep -qx "rc=125" <<<"$res"'
res=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn none --no-tui --env HTTPS_PROXY=http://11.77.0.1:7777 \
    -- true </dev/null 2>&1; echo "rc=$?")
t_check "3: a proxy neither local nor on the LAN: refused" \
    grep -q "neither on this machine nor on the LAN" <<<"$res"
nothing_left 3

# ---- 4. the admin policy -------------------------------------------------------------------
echo "# 4. permit_lan_proxy, forbid_proxy_only"
proxy "$LYH_LAN" 192.168.77.2 "$LYH_TMP/proxy-lan.log" || lyh_die "the LAN proxy does not start"
cat >"$LYH_TMP/pol-lan.toml" <<POL
allowed_interface_patterns = ["tun*"]
lan_allow_ceiling = ["127.0.0.0/8", "192.168.77.0/24"]
permit_lan_proxy = true
log_allowed_flows = true
POL
lyh_root policy set "$LYH_TMP/pol-lan.toml" >/dev/null 2>&1 || t_fail "4: policy set (permit_lan_proxy)"
res=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn none --no-tui --env HTTPS_PROXY=http://192.168.77.2:$PPORT \
    -- /usr/bin/python3 "$AGENT" via 12.77.0.1:7777 </dev/null 2>&1; echo "rc=$?")
printf '%s\n' "$res" | sed 's/^/  | /'
# (the LAN proxy reaches what the LAN reaches: 12.77.0.1, on the LAN host)
t_check "4: with permit_lan_proxy, the LAN proxy carries the tunnel" grep -qx "echo through-proxy" <<<"$res"
t_check "4: ... and the start says the traffic leaves by the LAN" grep -q "proxy-only on the LAN" <<<"$res"
res=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn none --no-tui --env HTTPS_PROXY=http://192.168.77.2:$PPORT \
    -- /usr/bin/python3 "$AGENT" tcp 192.168.77.2 7777 </dev/null 2>&1)
t_check "4: ... the LAN host's other port stays refused" \
    eval 'grep -q "^tcp 192.168.77.2 7777 " <<<"$res" && ! grep -q "^tcp 192.168.77.2 7777 ok" <<<"$res"'

# a running proxy-only session, then the mode forbidden: refused and cut
LYH_CMD_TIMEOUT=60 lyh_cli run --vpn none --no-tui --env HTTPS_PROXY=http://127.0.0.1:$PPORT \
    -- sleep 40 </dev/null >"$LYH_TMP/long.out" 2>&1 &
long=$!
lyh_track_pid "$long"
t_check "4: a proxy-only session runs" lyh_wait_until 10 grep -q "proxy-only through" "$LYH_TMP/long.out"
printf 'forbid_proxy_only = true\n' >>"$LYH_TMP/pol-lan.toml"
out=$(lyh_root policy set "$LYH_TMP/pol-lan.toml" --dry-run 2>&1)
t_check "4: forbid_proxy_only, dry run: the running session would be cut" \
    grep -q "cut: .*proxy-only mode is now forbidden" <<<"$out"
lyh_root policy set "$LYH_TMP/pol-lan.toml" >/dev/null 2>&1 || t_fail "4: policy set (forbid_proxy_only)"
t_check "4: ... set: the session ends" lyh_wait_pid_gone 15 "$long"
cat "$LYH_TMP/long.out" | sed 's/^/  | /'
t_check "4: ... its client says why" grep -q "proxy-only mode is now forbidden" "$LYH_TMP/long.out"
t_check "4: ... and the audit has the cut" \
    grep -q '"action":"cut".*forbid_proxy_only' <<<"$(lyh_root audit query --kind policy --json 2>&1)"
res=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn none --no-tui --env HTTPS_PROXY=http://127.0.0.1:$PPORT \
    -- true </dev/null 2>&1; echo "rc=$?")
t_check "4: forbid_proxy_only: refused, naming the key" \
    eval 'grep -q "forbid_proxy_only is on" <<<"$res" && grep -qx "rc=125" <<<"$res"'
lyh_root policy rollback default >/dev/null 2>&1 || t_fail "4: rollback to the default policy"
nothing_left 4

lyh_daemon_stop
lyh_daemon_check_log
t_done
exit $?
