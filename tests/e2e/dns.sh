#!/bin/bash
# e2e: a session's DNS goes to its forwarder in lyhd, and from there only
# through the VPN interface (issue 20, first part), against the real daemon,
# nftables and a resolver the test runs beyond tun0:
#   1. whatever address the agent asks (its resolv.conf's, a LAN router, a
#      public resolver, the loopback stub 127.0.0.53), UDP or TCP, lyhd
#      answers, with what the VPN's resolver said; the LAN resolver and the
#      addresses asked never see a query
#   2. the upstream query leaves through tun0, to the resolver the system
#      names for tun0 (resolv.conf routed through it) or --dns
#   3. every query is in the audit log (kind dns, name, type, answers)
#   4. no resolver known for the interface: lyh run refuses, with the fix
#   5. malformed queries change nothing: the forwarder still answers
#   6. a domain allowlist: allowed names resolve and connect at once (100 of
#      100 fresh names, no race), *.x matches a.x not x, other names get
#      NXDOMAIN and never reach the resolver, private answers are dropped, an
#      address no allowed name resolved to is refused (and its record says
#      "dns=none"), allowed flows' records carry their name, two sessions'
#      sets are disjoint, and after TTL + grace a new connect is refused while
#      an open one goes on; a shorter TTL later never shortens an address's
#      time; TXT, HTTPS and MX get an empty answer and are never sent on
#   8. what an attacker's review tried: pipelined TCP queries answered at once
#      (a nested call per message crashed lyhd), a device-bound socket (its
#      rewritten DNS flow went out to the LAN), a local user outside the
#      sandbox using a session's forwarder, or taking over a session's DNS
#      flow (its port and destination, after the agent closed its socket), a
#      squatter on a session's forwarder port while lyhd restarts (it gets no
#      query, its forged answers never reach the agent, the session resolves
#      nothing until lyhd listens there again), and a resolver that is an
#      address of this machine
#   9. the protocol process: unprivileged, confined, restarted after kill -9
#  10. the protocol process's uid sends only to a resolver of a live session
#      (UDP 53): not to the LAN, not through lo, not elsewhere through the VPN
#   7. the admin policy: allowed_domains is a ceiling (a name outside it is
#      refused; without --allow-domain a session gets the ceiling),
#      always_deny_domains wins, and a running session follows a change at
#      once (what only a now-denied name opened leaves its set)
#
# usage: dns.sh BUILD_DIR     (as root; exits 77 = skipped otherwise)
# Safety: everything happens in the namespaces lib.sh makes.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: dns.sh needs root"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
lyh_init "${1:-}"

P="lyhdn-$$"
lyh_layout_up "$P" tun0 || lyh_die "network layout"
lyh_user_create || lyh_die "cannot create the test user"

# the VPN's resolver (exit side of tun0) and a LAN one that must stay silent
VPNLOG=$LYH_TMP/vpn-dns.log LANLOG=$LYH_TMP/lan-dns.log
: >"$VPNLOG"
: >"$LANLOG"
ip netns exec "$LYH_EXIT" /usr/bin/python3 "$HERE/dns_server.py" 10.77.0.2 53 "$VPNLOG" \
    allowed.test=11.77.0.1 v6.test=2a0e:77::2 exact.test=11.77.1.150 \
    priv.allowed.test=192.168.77.2,11.77.1.151 short.allowed.test=11.77.1.152/1 \
    long.allowed.test=11.77.1.160/60 shrt.allowed.test=11.77.1.160/1 \
    '*.allowed.test=11.77.1.{n}' </dev/null >/dev/null 2>&1 &
lyh_track_pid "$!"
ip netns exec "$LYH_LAN" /usr/bin/python3 "$HERE/dns_server.py" 192.168.77.2 53 "$LANLOG" \
    allowed.test=192.168.77.2 </dev/null >/dev/null 2>&1 &
lyh_track_pid "$!"
# an echo server on every address of the exit side (11.77.1.0/24 on its lo)
ip -n "$LYH_EXIT" addr add 11.77.1.0/24 dev lo || lyh_die "exit addresses"
# (each connection echoes until the client closes it)
ip netns exec "$LYH_EXIT" /usr/bin/python3 -c '
import socket, threading, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7778)); s.listen(64); print("serving", flush=True)
def echo(c):
    c.settimeout(60)
    try:
        while True:
            b = c.recv(4096)
            if not b: break
            c.sendall(b)
    except OSError: pass
    c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=echo, args=(c,), daemon=True).start()
' </dev/null >"$LYH_TMP/echo7778.log" 2>&1 &
lyh_track_pid "$!"
lyh_wait_until 5 grep -q serving "$LYH_TMP/echo7778.log" || lyh_die "echo server on 7778"
# short timeouts: an allowed name's address stays TTL + 2 s (no floor)
LYH_DAEMON_ARGS+=(--dns-min-ttl 0 --dns-grace 2)
lyh_daemon_start || lyh_die "lyhd does not start"
install -d -o "$LYH_UID" -g "$LYH_GID" -m 0700 "$LYH_HOME/proj"

# ask.py: the agent's own resolver calls, by hand, to any address
cat >"$LYH_TMP/ask.py" <<'PY'
import socket, struct, sys, random
def q(name, qtype=1):
    h = struct.pack("!HHHHHH", random.randint(0, 65535), 0x0100, 1, 0, 0, 0)
    return h + b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack("!HH", qtype, 1)
def addrs(r):
    an = struct.unpack("!H", r[6:8])[0]; rc = r[3] & 15
    i = 12
    while r[i]: i += 1 + r[i]
    i += 5; out = []
    for _ in range(an):
        i += 2 if r[i] & 0xc0 == 0xc0 else 0
        t, c, ttl, ln = struct.unpack("!HHIH", r[i:i + 10]); i += 10
        if t == 1: out.append(socket.inet_ntop(socket.AF_INET, r[i:i + ln]))
        if t == 28: out.append(socket.inet_ntop(socket.AF_INET6, r[i:i + ln]))
        i += ln
    return "rcode=%d %s" % (rc, ",".join(out))
for spec in sys.argv[1:]:
    proto, rest = spec.split(":", 1)
    if rest.startswith("["):
        addr, name = rest[1:rest.index("]")], rest[rest.index("]") + 2:]
        fam = socket.AF_INET6
    else:
        addr, name = rest.split(":", 1)
        fam = socket.AF_INET
    try:
        if proto == "udp":
            s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(5)
            s.sendto(q(name, 28 if name.startswith("v6") else 1), (addr, 53)); r = s.recv(4096)
        elif proto == "junk":
            s = socket.socket(fam, socket.SOCK_DGRAM); s.settimeout(1)
            for b in (b"", b"\0" * 5, b"\xff" * 40, q(name)[:20], q(name) + b"\xc0\x0c"):
                s.sendto(b, (addr, 53))
            print(spec, "sent"); continue
        else:
            s = socket.create_connection((addr, 53), timeout=5); m = q(name)
            s.sendall(struct.pack("!H", len(m)) + m); n = struct.unpack("!H", s.recv(2))[0]
            r = b""
            while len(r) < n: r += s.recv(n - len(r))
        print(spec, addrs(r))
    except Exception as e:
        print(spec, "error", type(e).__name__)
PY
chmod 0644 "$LYH_TMP/ask.py"
cp "$LYH_TMP/ask.py" "$LYH_HOME/proj/ask.py" && chown "$LYH_UID:$LYH_GID" "$LYH_HOME/proj/ask.py"

# conn.py: names resolved by glibc (getaddrinfo, as any program does) and
# connected to at once
cat >"$LYH_HOME/proj/conn.py" <<'PY'
import socket, sys, time
def res(name):
    try:
        return [a[4][0] for a in socket.getaddrinfo(name, 7778, socket.AF_INET, socket.SOCK_STREAM)]
    except socket.gaierror as e:
        return "gaierror"
def conn(addr, port=7778):
    try:
        s = socket.create_connection((addr, port), timeout=3); s.sendall(b"ping")
        ok = s.recv(16) == b"ping"
        return s if ok else None
    except OSError:
        return None
args = sys.argv[1:]
while args:
    op = args.pop(0)
    if op == "res":
        n = args.pop(0); print("res", n, res(n))
    elif op == "conn":
        n = args.pop(0); a = res(n)
        print("conn", n, "ok" if isinstance(a, list) and a and conn(a[0]) else "refused")
    elif op == "direct":
        a = args.pop(0); print("direct", a, "ok" if conn(a) else "refused")
    elif op == "race":
        k = int(args.pop(0)); ok = 0
        for i in range(1, k + 1):
            a = res("n%d.allowed.test" % i)
            if isinstance(a, list) and a and conn(a[0]):
                ok += 1
        print("race", ok, "of", k)
    elif op == "sleep":
        time.sleep(float(args.pop(0)))
    elif op == "hold":
        n = args.pop(0); wait = float(args.pop(0)); a = res(n)
        s = conn(a[0]) if isinstance(a, list) and a else None
        print("hold first", "ok" if s else "refused")
        time.sleep(wait)
        try:
            s.sendall(b"pong"); print("hold open", "ok" if s.recv(16) == b"pong" else "broken")
        except Exception:
            print("hold open broken")
        print("hold new", "ok" if conn(a[0]) else "refused")
    sys.stdout.flush()
PY
chown "$LYH_UID:$LYH_GID" "$LYH_HOME/proj/conn.py"

run_as() { # ARGS...: lyh run as the user from its project; output and "rc=N" last
    LYH_CMD_TIMEOUT=90 lyh_as_user sh -c 'cd proj && exec "$@"' sh "$LYH_LYH" --socket "$LYH_SOCK" \
        run "$@" </dev/null 2>&1
    echo "rc=$?"
}

# attack.py: queries made by hand (sections 6 and 8)
cat >"$LYH_HOME/proj/attack.py" <<'PY'
import socket, struct, sys, time
def q(name, qclass=1, i=0):
    return struct.pack("!HHHHHH", i, 0x0100, 1, 0, 0, 0) + \
        b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack("!HH", 1, qclass)
op = sys.argv[1]
if op == "pipeline":  # 300 CHAOS queries in one TCP write: each is answered at once (NOTIMP)
    s = socket.create_connection(("8.8.8.8", 53), timeout=10)
    m = b"".join(struct.pack("!H", len(x)) + x for x in (q("version.bind", 3, i) for i in range(300)))
    s.sendall(m); got = 0; buf = b""
    try:
        while got < 300:
            b = s.recv(65536)
            if not b: break
            buf += b
            while len(buf) >= 2 and len(buf) >= 2 + struct.unpack("!H", buf[:2])[0]:
                n = struct.unpack("!H", buf[:2])[0]; buf = buf[2 + n:]; got += 1
    except OSError: pass
    print("pipeline answered", got)
elif op == "bind":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"eth0"); print("bind allowed")
    except PermissionError: print("bind refused")
elif op == "ask":  # a query about every second: "ok ADDR" or "none", for N seconds
    end, i = time.time() + float(sys.argv[2]), 0
    while time.time() < end:  # connected, as glibc's resolver is
        t = time.time()
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(0.8)
            s.connect(("8.8.8.8", 53)); s.send(q("allowed.test", 1, i)); i = (i + 1) % 64
            r = s.recv(512); print("ask ok", socket.inet_ntoa(r[-4:]), flush=True)
        except OSError: print("ask none", flush=True)
        time.sleep(max(0.2, 1 - (time.time() - t)))
    print("ask done", flush=True)
elif op == "qtype":  # NAME TYPE...: one query each, "qtype T rcode=R an=N"
    name = sys.argv[2]
    for t in sys.argv[3:]:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5); s.connect(("8.8.8.8", 53))
        s.send(struct.pack("!HHHHHH", 5, 0x0100, 1, 0, 0, 0) +
               b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0" + struct.pack("!HH", int(t), 1))
        try: r = s.recv(4096); print("qtype", t, "rcode=%d" % (r[3] & 15), "an=%d" % struct.unpack("!H", r[6:8])[0])
        except OSError: print("qtype", t, "none")
elif op == "fixed":  # PORT [HOLD]: one query from a fixed local port, then the socket is closed
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)
    s.bind(("0.0.0.0", int(sys.argv[2])))
    try: s.sendto(q("allowed.test", 1, 1), ("8.8.8.8", 53))
    except OSError as e: print("fixed refused", e.errno); sys.exit(0)
    try: r = s.recv(512); print("fixed ok", socket.inet_ntoa(r[-4:]), flush=True)
    except OSError: print("fixed none", flush=True)
    s.close()
    if len(sys.argv) > 3:  # HOLD: the session stays that long, its socket closed
        print("fixed closed", flush=True); time.sleep(float(sys.argv[3]))
PY
chown "$LYH_UID:$LYH_GID" "$LYH_HOME/proj/attack.py"

# ---- 1. every query goes to lyhd ---------------------------------------------------------
echo "# 1. whatever the agent asks, lyhd answers (through the VPN's resolver)"
res=$(run_as --vpn tun0 --no-tui -- /usr/bin/python3 ask.py udp:192.168.77.2:allowed.test \
    udp:8.8.8.8:allowed.test udp:127.0.0.53:allowed.test udp:10.77.0.2:allowed.test \
    tcp:1.1.1.1:allowed.test tcp:192.168.77.2:allowed.test udp:8.8.8.8:nosuch.test \
    udp:8.8.8.8:Allowed.TEST 'udp:[2001:db8::53]:v6.test' 'tcp:[2001:db8::53]:allowed.test')
echo "$res" | sed 's/^/    /'
t_check "1: run ends 0" grep -qx "rc=0" <<<"$res"
for spec in udp:192.168.77.2 udp:8.8.8.8 udp:127.0.0.53 udp:10.77.0.2 tcp:1.1.1.1 tcp:192.168.77.2; do
    t_check "1: $spec is answered with the VPN resolver's address" \
        grep -qx "$spec:allowed.test rcode=0 11.77.0.1" <<<"$res"
done
t_check "1: a name the resolver does not know: NXDOMAIN" \
    grep -qx "udp:8.8.8.8:nosuch.test rcode=3 " <<<"$res"
t_check "1: a mixed-case query is answered" grep -qx "udp:8.8.8.8:Allowed.TEST rcode=0 11.77.0.1" <<<"$res"
t_check "1: an IPv6 resolver address is answered by lyhd too (UDP, AAAA)" \
    grep -qx "udp:\[2001:db8::53\]:v6.test rcode=0 2a0e:77::2" <<<"$res"
t_check "1: ... and over TCP" grep -qx "tcp:\[2001:db8::53\]:allowed.test rcode=0 11.77.0.1" <<<"$res"
t_check "1: the LAN resolver saw no query" test ! -s "$LANLOG"
t_check "1: the VPN's resolver saw them (UDP only, from lyhd)" \
    eval '[ "$(grep -c "^udp allowed.test 1$" "$VPNLOG")" -ge 7 ] && ! grep -q "^tcp" "$VPNLOG"'
res=$(run_as --vpn tun0 --no-tui -- /usr/bin/getent hosts allowed.test)
t_check "1: glibc's resolver (getent, resolv.conf as the host has it) works" \
    grep -q "^11.77.0.1 .*allowed.test" <<<"$res"

# ---- 2. only through tun0 ----------------------------------------------------------------
echo "# 2. upstream only through the VPN interface"
lyh_nft add table inet lyhdntest 2>/dev/null
lyh_nft add chain inet lyhdntest out '{ type filter hook output priority 100; }' &&
    lyh_nft add rule inet lyhdntest out udp dport 53 oifname tun0 counter &&
    lyh_nft add rule inet lyhdntest out udp dport 53 oifname != tun0 oifname != lo counter
res=$(run_as --vpn tun0 --no-tui -- /usr/bin/python3 ask.py udp:192.168.77.2:allowed.test)
t_check "2: answered" grep -q "rcode=0 11.77.0.1" <<<"$res"
cnt=$(lyh_nft list chain inet lyhdntest out)
t_check "2: the query left through tun0" \
    eval 'grep -q "oifname \"tun0\" counter packets [1-9]" <<<"$cnt"'
t_check "2: none left through another interface" \
    eval 'grep -q "oifname != \"lo\" counter packets 0 " <<<"$cnt"'
lyh_nft delete table inet lyhdntest
lyh_ip link set tun0 down
res=$(run_as --vpn tun0 --no-tui --allow-non-default-route -- /usr/bin/python3 ask.py udp:8.8.8.8:allowed.test 2>&1)
lyh_ip link set tun0 up
lyh_ip -4 route replace default via 10.77.0.2 dev tun0 2>/dev/null
t_check "2: tun0 down: the run is refused or the query fails, never answered via eth0 (LAN log empty)" \
    eval '! grep -q "rcode=0 11.77.0.1" <<<"$res" && test ! -s "$LANLOG"'

# ---- 3. audit ----------------------------------------------------------------------------
echo "# 3. every query is recorded"
aud=$(LYH_CMD_TIMEOUT=30 lyh_cli audit query --kind dns 2>&1)
t_check "3: a dns record names the query and its answer" \
    eval 'grep -q "allowed.test" <<<"$aud" && grep -q "11.77.0.1" <<<"$aud"'
t_check "3: the NXDOMAIN is recorded too" grep -q "nosuch.test" <<<"$aud"

# ---- 4. no resolver known ----------------------------------------------------------------
echo "# 4. no resolver known for the interface"
lyh_daemon_stop
echo "nameserver 192.168.77.2" >"$LYH_TMP/lan-resolv.conf"
LYH_RESOLV_CONF=$LYH_TMP/lan-resolv.conf
lyh_daemon_start || lyh_die "lyhd does not start (2)"
res=$(run_as --vpn tun0 --no-tui -- /bin/true)
t_check "4: refused (125), saying how to name one" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "no DNS resolver is known for tun0" <<<"$res" && grep -q -- "--dns ADDRESS" <<<"$res"'
res=$(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 ask.py udp:192.168.77.2:allowed.test)
t_check "4: --dns names it" grep -q "rcode=0 11.77.0.1" <<<"$res"
res=$(run_as --vpn tun0 --no-tui --dns 127.0.0.53 -- /bin/true)
t_check "4: a loopback --dns is refused (lyhd asks through tun0)" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "not a resolver" <<<"$res"'
t_check "4: the LAN resolver still saw nothing" test ! -s "$LANLOG"

# ---- 5. malformed queries ----------------------------------------------------------------
echo "# 5. malformed queries"
res=$(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 ask.py junk:8.8.8.8:allowed.test \
    udp:8.8.8.8:allowed.test)
t_check "5: after junk the forwarder still answers" grep -q "^udp:8.8.8.8:allowed.test rcode=0 11.77.0.1" <<<"$res"
t_check "5: lyhd still runs" lyh_alive "$LYH_DAEMON_PID"
# (the protocol process closes its copies when the parent's DNS_STOP arrives)
t_check "5: no leftover forwarder socket after the sessions ended" \
    lyh_wait_until 3 eval '! nsenter --net=/run/netns/$LYH_MAIN ss -Hulnp | grep -q "lyhd"'
# ---- 6. a domain allowlist ----------------------------------------------------------------
echo "# 6. a domain allowlist"
AL=(--vpn tun0 --no-tui --dns 10.77.0.2 --allow-domain '*.allowed.test' --allow-domain exact.test)
: >"$VPNLOG"
res=$(run_as "${AL[@]}" -- /usr/bin/python3 conn.py race 100 conn exact.test res allowed.test \
    res denied.test direct 11.77.0.1 direct 11.77.1.200 res priv.allowed.test conn priv.allowed.test)
echo "$res" | sed 's/^/    /'
t_check "6: 100 of 100 fresh allowed names connect right after they resolve" grep -qx "race 100 of 100" <<<"$res"
t_check "6: an exact name resolves and connects" grep -qx "conn exact.test ok" <<<"$res"
t_check "6: *.allowed.test does not match allowed.test itself" grep -qx "res allowed.test gaierror" <<<"$res"
t_check "6: another name is not found" grep -qx "res denied.test gaierror" <<<"$res"
t_check "6: ... and never reached the resolver" \
    eval '! grep -Eq " (denied\.test|allowed\.test) " "$VPNLOG"'
t_check "6: an address no allowed name resolved to is refused" grep -qx "direct 11.77.0.1 refused" <<<"$res"
t_check "6: ... in the allowed zone's range too" grep -qx "direct 11.77.1.200 refused" <<<"$res"
t_check "6: a private answer is dropped, the public one kept" \
    eval 'grep -qx "res priv.allowed.test \[.11.77.1.151.\]" <<<"$res" && grep -qx "conn priv.allowed.test ok" <<<"$res"'
aud=$(LYH_CMD_TIMEOUT=30 lyh_cli audit query --kind flow --verdict allowed 2>&1)
t_check "6: an allowed flow's record carries its name" grep -q "n7.allowed.test" <<<"$aud"
aud=$(LYH_CMD_TIMEOUT=30 lyh_cli audit query --name n7.allowed.test 2>&1)
t_check "6: audit query --name finds the query and the flow of that name, nothing else" \
    eval 'grep -q " dns .*name=n7.allowed.test" <<<"$aud" && grep -q " flow .*names=n7.allowed.test" <<<"$aud" && ! grep -q "n8.allowed" <<<"$aud"'
aud=$(LYH_CMD_TIMEOUT=30 lyh_cli audit query --name "*.allowed.test" --kind dns 2>&1)
t_check "6: ... and a wildcard, all the zone's queries" \
    eval '[ "$(grep -c "name=n[0-9]*.allowed.test" <<<"$aud")" -ge 100 ]'
aud=$(LYH_CMD_TIMEOUT=30 lyh_cli audit query --name exact.test --limit 1 2>&1)
echo "$aud" | sed "s/^/    /"
t_check "6: ... lyhd filters by name, so --limit counts matches (the newest exact.test record)" \
    eval '[ "$(grep -c . <<<"$aud")" = 1 ] && grep -q "names=exact.test" <<<"$aud"'
aud=$(LYH_CMD_TIMEOUT=30 lyh_cli audit query --kind flow --verdict denied 2>&1)
echo "$aud" | grep "11.77" | head -5 | sed 's/^/    /'
t_check "6: the refused one says no name resolved to it" \
    eval 'grep "11.77.0.1" <<<"$aud" | grep -q "dns=none"'
aud=$(LYH_CMD_TIMEOUT=30 lyh_cli audit query --kind dns --verdict denied 2>&1)
t_check "6: the denied query is recorded" grep -q "denied.test" <<<"$aud"
aud=$(LYH_CMD_TIMEOUT=30 lyh_cli audit summary --by-name 2>&1)
grep -E "^(NAME|exact.test|denied.test|n7.allowed.test) " <<<"$aud" | sed 's/^/    /'
t_check "6: audit summary --by-name counts a name's queries and its flows" \
    eval 'grep -Eq "^exact.test +[1-9][0-9]* +0 +0 +[1-9][0-9]* +0$" <<<"$aud"'
t_check "6: ... and a denied name's refused queries" \
    eval 'grep -Eq "^denied.test +([1-9][0-9]*) +\1 +0 +0 +0$" <<<"$aud"'
aud=$(LYH_CMD_TIMEOUT=30 lyh_cli audit summary --by-name --name "*.allowed.test" --json 2>&1)
t_check "6: ... --name keeps to the pattern (JSON, one object per name)" \
    eval '[ "$(grep -c "^{\"name\":\"n[0-9]*.allowed.test\"" <<<"$aud")" -ge 100 ] &&
          ! grep -q "exact.test" <<<"$aud"'

echo "# 6b. two sessions' sets are disjoint"
(run_as "${AL[@]}" -- /usr/bin/python3 conn.py conn n5.allowed.test sleep 6 >"$LYH_TMP/s1.out") &
S1=$!
lyh_wait_until 15 grep -q "conn n5.allowed.test" "$LYH_TMP/s1.out"
res=$(run_as "${AL[@]}" -- /usr/bin/python3 conn.py direct 11.77.1.5 conn n5.allowed.test)
wait "$S1"
t_check "6b: the first session reached n5" grep -qx "conn n5.allowed.test ok" "$LYH_TMP/s1.out"
t_check "6b: the second cannot reach its address before resolving the name itself" \
    grep -qx "direct 11.77.1.5 refused" <<<"$res"
t_check "6b: ... and can once it did" grep -qx "conn n5.allowed.test ok" <<<"$res"

echo "# 6c. after TTL + grace"
res=$(run_as "${AL[@]}" -- /usr/bin/python3 conn.py hold short.allowed.test 6)
echo "$res" | sed 's/^/    /'
t_check "6c: first connect ok" grep -qx "hold first ok" <<<"$res"
t_check "6c: the open flow goes on after the mapping expired" grep -qx "hold open ok" <<<"$res"
t_check "6c: a new connect is refused then" grep -qx "hold new refused" <<<"$res"
aud=$(LYH_CMD_TIMEOUT=30 lyh_cli audit query --kind flow --verdict denied 2>&1)
t_check "6c: its record says the mapping expired" \
    eval 'grep "11.77.1.152" <<<"$aud" | grep -q "dns=expired"'
res=$(run_as "${AL[@]}" -- /usr/bin/python3 conn.py res long.allowed.test res shrt.allowed.test \
    sleep 5 direct 11.77.1.160)
echo "$res" | sed 's/^/    /'
t_check "6c: a shorter TTL for the same address later never shortens its time (60 s, then 1 s)" \
    grep -qx "direct 11.77.1.160 ok" <<<"$res"
# other query types than A and AAAA: an empty answer, never asked upstream
: >"$VPNLOG"
res=$(run_as "${AL[@]}" -- /usr/bin/python3 attack.py qtype n5.allowed.test 16 65 15 28)
echo "$res" | sed 's/^/    /'
t_check "6c: TXT, HTTPS and MX of an allowed name: NOERROR with no records" \
    eval 'grep -qx "qtype 16 rcode=0 an=0" <<<"$res" && grep -qx "qtype 65 rcode=0 an=0" <<<"$res" &&
          grep -qx "qtype 15 rcode=0 an=0" <<<"$res"'
t_check "6c: ... never asked of the resolver (AAAA is)" \
    eval '! grep -Eq " (16|65|15)$" "$VPNLOG" && grep -q "n5.allowed.test 28$" "$VPNLOG"'
echo "# 6d. root flushes a session's set: its names resolve into it again"
# The second answer for a name renews its element (deleted and added again, for
# kernels before 6.12); with the element gone that delete fails, and lyhd adds it
# instead of failing the answer.
t6=$(sqlite3 -cmd '.timeout 5000' "$LYH_DB" "select coalesce(max(started_ms), 0) from sessions")
(run_as "${AL[@]}" -- /usr/bin/python3 conn.py conn n9.allowed.test sleep 3 conn n9.allowed.test \
    >"$LYH_TMP/s6d.out") &
S6D=$!
lyh_wait_until 15 grep -q "conn n9.allowed.test" "$LYH_TMP/s6d.out"
sid6=$(sqlite3 -cmd '.timeout 5000' "$LYH_DB" \
    "select id from sessions where state=2 and started_ms > $t6 limit 1" 2>/dev/null)
flushed=no
[ -n "$sid6" ] && lyh_nft flush set inet lianyaohu "a4-$sid6" && flushed=yes
t_eq "6d: root flushed the running session's set a4- (${sid6:-none found})" "$flushed" yes
wait "$S6D"
sed 's/^/    /' "$LYH_TMP/s6d.out"
t_eq "6d: the name connected before, and resolves and connects again after" \
    "$(grep -c '^conn n9.allowed.test ok$' "$LYH_TMP/s6d.out")" 2
t_check "6: no set of an ended session is left" \
    eval '! lyh_nft list sets inet lianyaohu 2>/dev/null | grep -Eq "a[46]-"'

# ---- 7. the admin policy -----------------------------------------------------------------
echo "# 7. the admin policy"
policy_set() { # TOML: as root (an admin), through the daemon
    printf '%s\n' "$1" >"$LYH_TMP/pol.toml"
    lyh_in_main "$LYH_LYH" --socket "$LYH_SOCK" policy set "$LYH_TMP/pol.toml" >/dev/null 2>&1
}
policy_set 'allowed_domains = ["*.allowed.test"]
always_deny_domains = ["n9.allowed.test"]' || t_fail "7: policy set" "refused"
res=$(run_as --vpn tun0 --no-tui --dns 10.77.0.2 --allow-domain exact.test -- /bin/true)
t_check "7: a name outside the ceiling is refused (125, says why)" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "outside the names the admin allows" <<<"$res"'
res=$(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 conn.py conn n3.allowed.test \
    res exact.test res n9.allowed.test direct 11.77.1.9)
echo "$res" | sed 's/^/    /'
t_check "7: without --allow-domain the session gets the ceiling" \
    eval 'grep -qx "conn n3.allowed.test ok" <<<"$res" && grep -qx "res exact.test gaierror" <<<"$res"'
t_check "7: always_deny_domains wins over the allowlist" grep -qx "res n9.allowed.test gaierror" <<<"$res"
t_check "7: ... and its address stays closed" grep -qx "direct 11.77.1.9 refused" <<<"$res"
policy_set 'allowed_domains = ["*.allowed.test"]' || t_fail "7: policy set (2)" "refused"
rm -f "$LYH_TMP/go"
(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 conn.py conn n20.allowed.test \
    sleep 4 direct 11.77.1.20 res n20.allowed.test conn n21.allowed.test >"$LYH_TMP/live.out") &
LIVE=$!
lyh_wait_until 15 grep -q "conn n20.allowed.test" "$LYH_TMP/live.out"
policy_set 'allowed_domains = ["*.allowed.test"]
always_deny_domains = ["n20.allowed.test"]' || t_fail "7: policy set (3)" "refused"
wait "$LIVE"
sed 's/^/    /' "$LYH_TMP/live.out"
t_check "7: a running session reached n20 before the change" grep -qx "conn n20.allowed.test ok" "$LYH_TMP/live.out"
t_check "7: after it, a new connect to n20's address is refused" \
    grep -qx "direct 11.77.1.20 refused" "$LYH_TMP/live.out"
t_check "7: ... and n20 no longer resolves" grep -qx "res n20.allowed.test gaierror" "$LYH_TMP/live.out"
t_check "7: ... while other allowed names still work" grep -qx "conn n21.allowed.test ok" "$LYH_TMP/live.out"

# the admin's resolvers: a second resolver beyond tun0 (11.77.2.53) that
# answers allowed.test differently, so an answer says who was asked
ADMLOG=$LYH_TMP/adm-dns.log
: >"$ADMLOG"
ip -n "$LYH_EXIT" addr add 11.77.2.53/32 dev lo || lyh_die "admin resolver address"
ip netns exec "$LYH_EXIT" /usr/bin/python3 "$HERE/dns_server.py" 11.77.2.53 53 "$ADMLOG" \
    allowed.test=11.77.0.33 </dev/null >/dev/null 2>&1 &
lyh_track_pid "$!"
lyh_wait_until 5 eval 'ip netns exec "$LYH_EXIT" ss -Huln | grep -q "11.77.2.53:53"'
printf 'dns_resolvers = ["127.0.0.1"]\n' >"$LYH_TMP/pol.toml"
res=$(lyh_in_main "$LYH_LYH" --socket "$LYH_SOCK" policy set "$LYH_TMP/pol.toml" 2>&1; echo "rc=$?")
t_check "7: a loopback address as the admin's resolver is refused, naming the field" \
    eval '! grep -qx "rc=0" <<<"$res" && grep -q "dns_resolvers\[0\]" <<<"$res"'
policy_set 'dns_resolvers = ["192.168.77.2", "11.77.2.53"]' || t_fail "7: policy set (4)" "refused"
res=$(run_as --vpn tun0 --no-tui -- /usr/bin/python3 ask.py udp:8.8.8.8:allowed.test)
echo "$res" | sed 's/^/    /'
t_check "7: the admin's resolver routed through tun0 is asked, not the system's" \
    eval 'grep -qx "udp:8.8.8.8:allowed.test rcode=0 11.77.0.33" <<<"$res" &&
          grep -q "^udp allowed.test 1$" "$ADMLOG" && test ! -s "$LANLOG"'
res=$(LYH_CMD_TIMEOUT=60 lyh_as_user "$LYH_LYH" --socket "$LYH_SOCK" doctor 2>&1)
t_check "7: lyh doctor names the admin's resolver for tun0" \
    grep -q "tun0: lyhd asks 11.77.2.53 (from the admin policy)" <<<"$res"
res=$(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /bin/true)
t_check "7: --dns naming a resolver outside the admin's list is refused (125, says why)" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "not one of the resolvers the admin allows" <<<"$res"'
res=$(run_as --vpn tun0 --no-tui --dns 11.77.2.53 -- /usr/bin/python3 ask.py udp:8.8.8.8:allowed.test)
t_check "7: --dns naming one of them is fine" grep -qx "udp:8.8.8.8:allowed.test rcode=0 11.77.0.33" <<<"$res"
policy_set 'dns_resolvers = ["192.168.77.2"]' || t_fail "7: policy set (5)" "refused"
res=$(run_as --vpn tun0 --no-tui -- /bin/true)
t_check "7: none of the admin's resolvers behind tun0: refused (125, says why)" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "none of the resolvers the admin names" <<<"$res" &&
          test ! -s "$LANLOG"'
policy_set '' || t_fail "7: policy back to the default" "refused"

# ---- 8. what an attacker's review tried ----------------------------------------------------
echo "# 8. attacks"
res=$(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 attack.py pipeline)
t_check "8: 300 pipelined TCP queries are all answered ($(grep pipeline <<<"$res"))" \
    grep -qx "pipeline answered 300" <<<"$res"
t_check "8: ... and lyhd still runs" lyh_alive "$LYH_DAEMON_PID"
res=$(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 attack.py bind)
t_check "8: the agent cannot bind a socket to a device (SO_BINDTODEVICE)" grep -qx "bind refused" <<<"$res"
res=$(run_as --vpn tun0 --no-tui --dns 10.77.0.1 -- /bin/true)
t_check "8: a resolver that is an address of this machine (tun0's) is refused" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "an address of this machine" <<<"$res"'

# a local user takes over a session's DNS flow: the agent asked from a fixed
# port and closed its socket; the user binds that port and asks the same
# address, which its conntrack entry would send on to the session's forwarder
# (NAT rules see new flows only), as the session, through its VPN
ctr() { # RULE-TEXT-REGEX: the packet count of that rule of chain output
    lyh_nft list chain inet lianyaohu output 2>/dev/null |
        sed -n "/$1/s/.* counter packets \([0-9]*\) .*/\1/p" | head -n 1
}
before=$(ctr 'ct direction original ct mark 0x80000000')
: >"$LYH_TMP/fixed.out"
(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 attack.py fixed 40999 6 \
    >"$LYH_TMP/fixed.out") &
FIXED=$!
lyh_wait_until 15 grep -q "^fixed closed" "$LYH_TMP/fixed.out"
res2=$(LYH_CMD_TIMEOUT=20 lyh_as_user /usr/bin/python3 -c '
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2); s.bind(("0.0.0.0", 40999))
try:
    s.sendto(struct.pack("!HHHHHH", 9, 0x100, 1, 0, 0, 0) + b"\x05exfil\x07allowed\x04test\x00\x00\x01\x00\x01", ("8.8.8.8", 53))
    s.recv(512); print("answered")
except OSError: print("nothing")' 2>&1)
after=$(ctr 'ct direction original ct mark 0x80000000')
res=$(cat "$LYH_TMP/fixed.out")
wait "$FIXED" || true
echo "    agent: $(grep "^fixed" <<<"$res" | head -n 1); local user: $res2; drops ${before:-?} -> ${after:-?}"
t_check "8: the agent's query from its fixed port was answered" grep -qx "fixed ok 11.77.0.1" <<<"$res"
t_check "8: a local user reusing the agent's port and destination gets nothing" \
    eval '[ "$res2" = nothing ] && ! grep -q "exfil" "$VPNLOG"'
t_check "8: ... stopped by the rule for a DNS flow's original direction from a host socket" \
    eval '[ -n "$after" ] && [ "$after" -gt "${before:-0}" ]'

# a session asks from the port and to the address another, ended, session
# asked from and to a moment ago: that flow's conntrack entry (which sent it
# to the ended session's forwarder) must be gone with it, not refuse the new
# session's query (an ephemeral port is reused so by chance)
res=$(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 attack.py fixed 40998)
res2=$(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 attack.py fixed 40998)
echo "    first session: $(grep "^fixed" <<<"$res"); second: $(grep "^fixed" <<<"$res2")"
t_check "8: a session asking from the port and to the address an ended session just used is answered" \
    eval 'grep -qx "fixed ok 11.77.0.1" <<<"$res" && grep -qx "fixed ok 11.77.0.1" <<<"$res2"'

# the same after the session's chain was rebuilt while it ran (its counters,
# which tell the teardown whether the session marked any DNS flow, began
# again at zero): the flow marked before the rebuild must still be forgotten.
# The session holds (up to 60 s) until the rebuild was seen, then is stopped,
# so the rebuild surely came while it ran.
: >"$LYH_TMP/fixed2.out"
(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 attack.py fixed 40997 60 \
    >"$LYH_TMP/fixed2.out") &
FIXED=$!
lyh_track_pid "$FIXED"
lyh_wait_until 15 grep -q "^fixed closed" "$LYH_TMP/fixed2.out"
sessions_now() {
    LYH_CMD_TIMEOUT=30 lyh_as_user "$LYH_LYH" --socket "$LYH_SOCK" sessions --json </dev/null 2>/dev/null |
        sed -n 's/^{"id":"\([0-9a-f]*\)".*/\1/p'
}
held=$(sessions_now)
nrebuilt=$(grep -c "rebuilt it and the chains of" "$LYH_DAEMON_LOG")
lyh_nft delete table inet lianyaohu
lyh_wait_until 20 eval '[ "$(grep -c "rebuilt it and the chains of" "$LYH_DAEMON_LOG")" -gt "$nrebuilt" ]'
rebuilt=$(grep "rebuilt it and the chains of" "$LYH_DAEMON_LOG" | tail -n 1)
still=$(sessions_now)
stopped=$(LYH_CMD_TIMEOUT=30 lyh_as_user "$LYH_LYH" --socket "$LYH_SOCK" stop --grace 0 "$held" </dev/null 2>&1; echo "rc=$?")
lyh_wait_until 15 eval '! kill -0 "$FIXED" 2>/dev/null'
wait "$FIXED" || true
res=$(cat "$LYH_TMP/fixed2.out")
res2=$(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 attack.py fixed 40997)
echo "    first session $held (chain rebuilt while it ran): $(grep "^fixed" <<<"$res" | head -n 1); second: $(grep "^fixed" <<<"$res2")"
echo "    ${rebuilt##*] }; stop: $(tr '\n' ' ' <<<"$stopped")"
t_check "8: the table was rebuilt with the one session's chain while that session still ran" \
    eval '[ -n "$held" ] && [ "$(wc -l <<<"$held")" = 1 ] && grep -q "chains of 1 session(s)" <<<"$rebuilt" &&
          [ "$(grep -c "rebuilt it and the chains of" "$LYH_DAEMON_LOG")" -gt "$nrebuilt" ] &&
          [ "$still" = "$held" ] && grep -qx "rc=0" <<<"$stopped"'
t_check "8: ... and a session whose predecessor's chain was rebuilt after its query is answered" \
    eval 'grep -qx "fixed ok 11.77.0.1" <<<"$res" && grep -qx "fixed ok 11.77.0.1" <<<"$res2"'

# a session asking every second, across a restart of lyhd with a squatter on
# its forwarder's port meanwhile; the squatter also forges answers to the
# agent's open queries (their ports read from /proc/net/udp, ids guessed)
: >"$LYH_TMP/ask.out"
(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 attack.py ask 30 >"$LYH_TMP/ask.out") &
ASK=$!
lyh_wait_until 15 grep -q "^ask ok" "$LYH_TMP/ask.out"
PORT=$(nsenter --net="/run/netns/$LYH_MAIN" ss -Hulnp 2>/dev/null | awk '/lyhd/ && $4 ~ /^127\.0\.0\.1:/ { sub(/.*:/, "", $4); print $4; exit }')
echo "    the session's forwarder port: $PORT"
# a local user outside the sandbox, straight at the forwarder
res=$(LYH_CMD_TIMEOUT=20 lyh_as_user /usr/bin/python3 -c '
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
s.sendto(struct.pack("!HHHHHH", 7, 0x100, 1, 0, 0, 0) + b"\x07allowed\x04test\x00\x00\x01\x00\x01", ("127.0.0.1", int(sys.argv[1])))
try: s.recv(512); print("answered")
except OSError: print("nothing")' "$PORT" 2>&1)
t_check "8: a local user outside the sandbox gets nothing from a session's forwarder" \
    eval '[ -n "$PORT" ] && [ "$res" = nothing ]'
forged0=$(ctr 'ct direction reply ct mark 0x80000000')
lyh_daemon_stop
lyh_as_user /usr/bin/python3 -c '
import os, socket, struct, sys, time
port = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", port))
s.settimeout(0.2); end = time.time() + float(sys.argv[2]); print("squatting", flush=True)
ans = b"\x07allowed\x04test\x00\x00\x01\x00\x01" + b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04" + bytes([6, 6, 6, 6])
sent = 0
while time.time() < end:
    try: d, peer = s.recvfrom(512); print("got", len(d), flush=True)
    except OSError: pass
    for line in open("/proc/net/udp").read().splitlines()[1:]:
        f = line.split()
        lport = int(f[1].split(":")[1], 16)
        if int(f[7]) != os.getuid() or lport == port: continue
        for dst in ("10.77.0.1", "127.0.0.1"):
            for i in range(40):
                try: s.sendto(struct.pack("!HHHHHH", i, 0x8180, 1, 1, 0, 0) + ans, (dst, lport)); sent += 1
                except OSError: pass
print("forged", sent, flush=True)' "$PORT" 8 >"$LYH_TMP/squat.out" 2>&1 &
SQ=$!
lyh_wait_until 5 grep -q squatting "$LYH_TMP/squat.out"
sleep 2
lyh_daemon_start || lyh_die "lyhd restart"
PORT_EL=$(lyh_nft list map inet lianyaohu dnsport 2>/dev/null | grep -c ": $PORT")
wait "$SQ" 2>/dev/null
forged1=$(ctr 'ct direction reply ct mark 0x80000000')
# lyh run ends with the old lyhd; the agent goes on, writing to the file
wait "$ASK" 2>/dev/null
lyh_wait_until 40 grep -q "^ask done" "$LYH_TMP/ask.out"
sed 's/^/    /' "$LYH_TMP/ask.out" | tr '\n' ' '; echo
echo "    squatter: $(grep forged "$LYH_TMP/squat.out"); forged answers dropped ${forged0:-?} -> ${forged1:-?}"
t_check "8: the squatter on the forwarder's port received none of the session's queries" \
    eval 'grep -q squatting "$LYH_TMP/squat.out" && ! grep -q "^got" "$LYH_TMP/squat.out"'
t_check "8: no forged answer reached the agent" \
    eval 'grep -q "^forged [1-9]" "$LYH_TMP/squat.out" && ! grep -q "6.6.6.6" "$LYH_TMP/ask.out"'
t_check "8: ... stopped by the rule for a DNS flow's reply direction from a socket not lyhd's" \
    eval '[ -n "$forged1" ] && [ "$forged1" -gt "${forged0:-0}" ]'
t_check "8: the restarted lyhd says it could not listen again" \
    lyh_daemon_log_has "cannot listen for the session's DNS queries on port $PORT again"
t_check "8: ... and keeps the session's DNS redirection (its queries go nowhere else)" \
    eval '[ "$PORT_EL" -ge 1 ]'
t_check "8: once the squatter is gone, lyhd listens there again and the session resolves" \
    eval 'lyh_daemon_log_has "lyhd answers its DNS queries again \\(port $PORT\\)" &&
          grep -q "^ask done" "$LYH_TMP/ask.out" &&
          [ "$(grep "^ask" "$LYH_TMP/ask.out" | tail -n 2 | head -n 1)" = "ask ok 11.77.0.1" ]'
t_check "8: while it could not, the session's queries got no answer from anyone" \
    eval 'grep -qz "ask ok 11.77.0.1.*ask none.*ask ok 11.77.0.1" "$LYH_TMP/ask.out"'

# a new session must never get the port another session's rules still name
# (its forwarder waits for it after a restart): a local user who holds the
# port across the restart and then leaves the kernel only that port to pick
# would otherwise have the new session's forwarder answer the old one's DNS
echo "# 8b. a waiting session's port is never given to a new session"
: >"$LYH_TMP/askA.out"
(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 attack.py ask 25 >"$LYH_TMP/askA.out") &
ASKA=$!
lyh_wait_until 15 grep -q "^ask ok" "$LYH_TMP/askA.out"
PA=$(nsenter --net="/run/netns/$LYH_MAIN" ss -Hulnp 2>/dev/null | awk '/lyhd/ && $4 ~ /^127\.0\.0\.1:/ { sub(/.*:/, "", $4); print $4; exit }')
echo "    session A's forwarder port: $PA"
lyh_daemon_stop
lyh_as_user /usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", int(sys.argv[1])))
print("holding", flush=True); time.sleep(float(sys.argv[2]))' "$PA" 1.5 >"$LYH_TMP/hold.out" 2>&1 &
HOLD=$!
lyh_wait_until 5 grep -q holding "$LYH_TMP/hold.out"
lyh_daemon_start || lyh_die "lyhd restart (8b)"
RANGE=$(nsenter --net="/run/netns/$LYH_MAIN" cat /proc/sys/net/ipv4/ip_local_port_range)
nsenter --net="/run/netns/$LYH_MAIN" sh -c "echo '$PA $PA' >/proc/sys/net/ipv4/ip_local_port_range"
wait "$HOLD" 2>/dev/null
again_before=$(grep -c "lyhd answers its DNS queries again" "$LYH_DAEMON_LOG")
res=$(run_as --vpn tun0 --no-tui --dns 11.77.2.53 -- /bin/true)
nsenter --net="/run/netns/$LYH_MAIN" sh -c "echo '$RANGE' >/proc/sys/net/ipv4/ip_local_port_range"
echo "    session B: $(grep -v "^rc=" <<<"$res" | tail -n 1) ($(tail -n 1 <<<"$res")); A had its port back before: $again_before"
wait "$ASKA" 2>/dev/null
lyh_wait_until 30 grep -q "^ask done" "$LYH_TMP/askA.out"
t_check "8b: the new session does not get the port (its launch is refused, with only that port free)" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "cannot listen for the session.s DNS queries" <<<"$res"'
t_check "8b: session A's queries were never answered by another session's resolver" \
    eval 'grep -q "^ask ok 11.77.0.1" "$LYH_TMP/askA.out" && ! grep -q "11.77.0.33" "$LYH_TMP/askA.out"'
t_check "8b: ... and A resolves again once lyhd has its port" \
    eval 'grep -q "^ask done" "$LYH_TMP/askA.out" &&
          [ "$(grep "^ask" "$LYH_TMP/askA.out" | tail -n 2 | head -n 1)" = "ask ok 11.77.0.1" ]'

# ---- 9. the protocol process ------------------------------------------------------------
# Queries and answers are parsed by lyhd's unprivileged protocol process; the
# parent (root) keeps the sockets, the sets and the audit log.
echo "# 9. the protocol process"
# --verbose: the protocol process logs too (a log line must not need a file)
lyh_daemon_stop
LYH_DAEMON_ARGS+=(--verbose)
lyh_daemon_start || lyh_die "lyhd does not start (9)"
proto_pid() { lyh_proto_pid; }
field() { awk -v k="$2:" '$1 == k { $1 = ""; sub(/^ /, ""); print }' "/proc/$1/status"; }
lyh_wait_until 10 proto_pid >/dev/null || t_fail "9: a protocol process runs" "none found"
PP=$(proto_pid)
PUID=$(id -u _lyhd 2>/dev/null)
echo "    protocol process $PP: Uid $(field "$PP" Uid), CapEff $(field "$PP" CapEff), Seccomp $(field "$PP" Seccomp), NoNewPrivs $(field "$PP" NoNewPrivs)"
t_check "9: it runs as _lyhd (uid $PUID), real, effective, saved and fs uid" \
    eval '[ -n "$PUID" ] && [ "$PUID" != 0 ] && [ "$(field "$PP" Uid)" = "$PUID $PUID $PUID $PUID" ]'
t_check "9: ... with no capabilities (CapEff, CapPrm, CapBnd of nothing it could use)" \
    eval '[ "$(field "$PP" CapEff)" = 0000000000000000 ] && [ "$(field "$PP" CapPrm)" = 0000000000000000 ]'
t_check "9: ... under a seccomp filter (mode 2) and no_new_privs" \
    eval '[ "$(field "$PP" Seccomp)" = 2 ] && [ "$(field "$PP" NoNewPrivs)" = 1 ]'
t_check "9: ... in no supplementary group" eval '[ -z "$(field "$PP" Groups)" ]'

# a session asking every second while the protocol process is killed: the
# parent starts another, which takes the session's sockets over
: >"$LYH_TMP/ask9.out"
(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 attack.py ask 14 >"$LYH_TMP/ask9.out") &
ASK9=$!
lyh_wait_until 15 grep -q "^ask ok" "$LYH_TMP/ask9.out"
PORT9=$(nsenter --net="/run/netns/$LYH_MAIN" ss -Hulnp 2>/dev/null | awk '$4 ~ /^127\.0\.0\.1:/ && /pid='"$PP"',/ { sub(/.*:/, "", $4); print $4; exit }')
t_check "9: the session's DNS socket is read by the protocol process (port ${PORT9:-none})" \
    eval '[ -n "$PORT9" ]'
PP=$(proto_pid)
kill -KILL "$PP"
lyh_wait_until 10 eval '[ -n "$(proto_pid)" ] && [ "$(proto_pid)" != "$PP" ]'
PP2=$(proto_pid)
echo "    killed $PP; the new one: ${PP2:-none}"
wait "$ASK9" 2>/dev/null
sed 's/^/    /' "$LYH_TMP/ask9.out" | tr '\n' ' '; echo
t_check "9: kill -9 of the protocol process: lyhd starts a new one" \
    eval '[ -n "$PP2" ] && [ "$PP2" != "$PP" ] && lyh_daemon_log_has "protocol process $PP was killed by signal 9"'
t_check "9: ... the session runs on, and resolves again through the new one" \
    eval 'grep -qx "rc=0" "$LYH_TMP/ask9.out" && grep -q "^ask done" "$LYH_TMP/ask9.out" &&
          [ "$(grep "^ask" "$LYH_TMP/ask9.out" | tail -n 2 | head -n 1)" = "ask ok 11.77.0.1" ]'
t_check "9: ... its end is on record" \
    eval '"$LYH_LYH" --socket "$LYH_SOCK" audit query --kind guard --json 2>/dev/null | grep -q "protocol_exit"'
t_check "9: lyhd itself still runs" lyh_alive "$LYH_DAEMON_PID"
# The guard's flow events are decoded in the protocol process, not by root:
# while it is stopped nothing of a session's refused connect is recorded
# (the events wait in the NFLOG socket), and once it runs again it is.
PP3=$(proto_pid)
lan_denied() { # read from audit.db itself: lyh's requests wait while the protocol process is stopped
    sqlite3 -readonly -cmd '.timeout 5000' "$LYH_STATE/audit.db" \
        'select count(*) from events where verdict = 2 and dport = 7719' 2>/dev/null
}
d0=$(lan_denied)
# the session starts first (the protocol process serves lyh's clients too):
# its agent connects once proj/go appears, which is after the process stopped
rm -f "$LYH_HOME/proj/go"
run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 -c '
import os, socket, time
end = time.monotonic() + 30
while not os.path.exists("go") and time.monotonic() < end:
    time.sleep(0.05)
s = socket.socket(); s.settimeout(2)
try: s.connect(("192.168.77.2", 7719)); print("lan open")
except OSError as e: print("lan refused", e.errno)' >"$LYH_TMP/stopped.out" &
STOPPED_RUN=$!
lyh_wait_until 20 eval '[ "$(lyh_live_rows)" -ge 1 ]'
kill -STOP "$PP3"
touch "$LYH_HOME/proj/go"
sleep 3 # the agent's connect (2 s at most) is refused meanwhile
d1=$(lan_denied)
kill -CONT "$PP3"
wait "$STOPPED_RUN"
res=$(cat "$LYH_TMP/stopped.out")
lyh_wait_until 10 eval '[ "$(lan_denied)" -gt "$d1" ]'
d2=$(lan_denied)
echo "    refused LAN connects on record: $d0 before, $d1 while the protocol process was stopped, $d2 after"
t_check "9: flow events are decoded by the protocol process: none recorded while it is stopped, all once it runs" \
    eval 'grep -q "^lan refused" <<<"$res" && [ "$d1" = "$d0" ] && [ "$d2" -gt "$d1" ]'
res=$(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /usr/bin/python3 ask.py junk:8.8.8.8:allowed.test udp:8.8.8.8:allowed.test)
t_check "9: the protocol process logs under its filter (a malformed query, then an answer)" \
    eval 'lyh_daemon_log_has "lyhd-protocol debug: session .*: malformed DNS query" &&
          grep -q "^udp:8.8.8.8:allowed.test rcode=0 11.77.0.1" <<<"$res"'
t_check "9: no protocol process was ever killed by its filter (SIGSYS)" \
    eval '! grep -q "killed by signal 31" "$LYH_TMP"/lyhd.*.log'

# ---- 10. where the protocol process may send ---------------------------------------------
# Were it taken over, its sockets must not be a way out: UDP port 53 to a
# resolver of a session lyhd forwards DNS for, nothing else, not even lo (any
# process of its uid: the probes below run as _lyhd).
echo "# 10. the protocol process's own traffic"
PGID=$(id -g _lyhd 2>/dev/null)
(run_as --vpn tun0 --no-tui --dns 10.77.0.2 -- /bin/sleep 8 >"$LYH_TMP/s10.out") &
S10=$!
lyh_wait_until 10 eval 'lyh_nft list set inet lianyaohu proto4 | grep -q "10\.77\.0\.2"'
p_lan=$(lyh_probe_as "$PUID" "$PGID" udp 192.168.77.2 "$LYH_PORT" 1500)
p_vpn=$(lyh_probe_as "$PUID" "$PGID" tcp 11.77.0.1 "$LYH_PORT" 1500)
p_res7=$(lyh_probe_as "$PUID" "$PGID" udp 10.77.0.2 "$LYH_PORT" 1500)
p_res53=$(lyh_probe_as "$PUID" "$PGID" udp 10.77.0.2 53 1500)
p_lo=$(lyh_probe_as "$PUID" "$PGID" udp 127.0.0.1 53 1500)
p_ctl=$(lyh_probe_as "$LYH_UID" "$LYH_GID" udp 192.168.77.2 "$LYH_PORT" 1500)
p_ctl2=$(lyh_probe_as "$LYH_UID" "$LYH_GID" tcp 11.77.0.1 "$LYH_PORT" 1500)
echo "    as _lyhd: LAN udp: $p_lan; VPN tcp: $p_vpn; resolver:$LYH_PORT: $p_res7; resolver:53: $p_res53; 127.0.0.1:53: $p_lo; control (the test user): $p_ctl, $p_ctl2"
t_check "10: the protocol process's uid cannot send to the LAN (the test user can)" \
    eval '[[ $p_lan == unreach* ]] && [[ $p_ctl == ok* ]]'
# (a dropped SYN is sent again until connect times out: anything but ok,
# where the test user's connect is answered)
t_check "10: ... nor through the VPN but to a resolver's port 53" \
    eval '[[ $p_vpn != ok* ]] && [[ $p_ctl2 == ok* ]] && [[ $p_res7 == unreach* ]]'
t_check "10: ... nor through lo (a local resolver would be a way around the VPN)" \
    eval '[[ $p_lo == unreach* ]]'
t_check "10: ... and it can ask the session's resolver" eval '[[ $p_res53 != unreach* ]]'
wait "$S10" 2>/dev/null
lyh_wait_until 5 eval '! lyh_nft list set inet lianyaohu proto4 | grep -q "10\.77\.0\.2"'
p_after=$(lyh_probe_as "$PUID" "$PGID" udp 10.77.0.2 53 1500)
t_check "10: once no session asks that resolver, neither may the protocol process ($p_after)" \
    eval '[[ $p_after == unreach* ]]'

# ---- 11. everything of a session goes at its end --------------------------------------------
# lyhd deletes what it installed for a session in one transaction, one round
# trip (nft_session_del_known). When root deletes a piece of it while it runs
# (here its element of map loopback), lyhd's check puts the session's rules
# back, and its end is that one transaction again. (Were a piece gone at the
# end, that transaction would change nothing, and lyhd would ask the kernel
# what is left and delete that: the same deletion as nft_guard.sh's
# del-session.)
echo "# 11. everything of a session goes at its end"
# A map of cgroup ids lists a key as its cgroup's path below /sys/fs/cgroup
# while that exists (nft takes it so too), else as the number.
sess_left() { # ID CGID CGPATH: the table's lines that name the session's objects or its cgroup
    { lyh_nft list table inet lianyaohu 2>/dev/null | grep -E -- "-$1([^0-9a-f]|\$)"
      for m in sessions served dnsport; do
          lyh_nft list map inet lianyaohu "$m" 2>/dev/null | grep -Ew -e "$2" -e "\"$3\""
      done; } | wc -l
}
running_sess() { # sets SID CGID CGP: the session that runs now (CGP: as nft names its cgroup)
    local cg
    read -r SID CGID cg < <(sqlite3 -separator ' ' -cmd '.timeout 5000' "$LYH_DB" \
        "select id, cgroup_id, cgroup from sessions where state=2 order by started_ms desc limit 1")
    CGP=${LYH_CGMNT#/sys/fs/cgroup}${cg:-}
    CGP=${CGP#/}
    [ -n "${SID:-}" ] && [ "${CGID:-0}" -gt 0 ] && [ -n "${cg:-}" ]
}
in_map() { lyh_nft list map inet lianyaohu "$1" 2>/dev/null | grep -Eqw -e "$CGID" -e "\"$CGP\""; }
lo_elem() { lyh_nft list map inet lianyaohu loopback 2>/dev/null | grep -E -- "jump lo-$SID([^0-9a-f]|\$)"; }
for how in kept tampered; do
    SID="" CGID="" CGP=""
    (run_as "${AL[@]}" -- /bin/sleep 4 >"$LYH_TMP/s11$how.out") &
    S11=$!
    lyh_wait_until 15 running_sess
    objs=$(lyh_nft list table inet lianyaohu 2>/dev/null | grep -Ec -- "(chain|set) (s|lo|a4|a6)-${SID:-x} ")
    t_eq "11 ($how): the running session has its chains s- and lo- and its sets a4- and a6-" "$objs" 4
    t_check "11 ($how): ... and its elements of maps sessions, served and dnsport" \
        eval 'in_map sessions && in_map served && in_map dnsport'
    if [ "$how" = tampered ]; then
        # lyhd's ruleset watch sees the change and puts the session's rules back
        # (boundary.sh 5b: its loopback flows meanwhile); what it kept of them
        # is then what it installed again, so its end is one transaction too
        lo_mark=$(lo_elem | grep -Eo -- "0x[0-9a-f]+ : jump lo-$SID" | grep -Eo '^0x[0-9a-f]+')
        deleted=no
        [ -n "$lo_mark" ] && lyh_nft delete element inet lianyaohu loopback "{ $lo_mark }" && deleted=yes
        t_eq "11 ($how): root deleted its element of map loopback (${lo_mark:-none found})" "$deleted" yes
        t_check "11 ($how): lyhd put the session's rules back while it ran" \
            lyh_daemon_log_has "session '${SID:-x}': part of its firewall rules was removed by someone else while it ran; put them back" 5
        t_check "11 ($how): ... with a loopback element of its own again" eval '[ -n "$(lo_elem)" ]'
    fi
    wait "$S11" 2>/dev/null
    t_check "11 ($how): it ran ($(tail -n 1 "$LYH_TMP/s11$how.out"))" grep -qx "rc=0" "$LYH_TMP/s11$how.out"
    lyh_wait_until 5 eval '[ "$(sess_left "$SID" "$CGID" "$CGP")" = 0 ]'
    t_eq "11 ($how): at its end, nothing of it is left in the table" \
        "$(sess_left "${SID:-x}" "${CGID:-x}" "${CGP:-x}")" 0
    searched() { lyh_daemon_log_has "session '${SID:-x}': its firewall rules were not as lyhd installed them at its end" "$1"; }
    t_check "11 ($how): one transaction of what lyhd kept did it (no search)" eval '! searched 1'
done

lyh_daemon_stop
t_check "9: lyhd's stop ends its protocol process too" eval '! kill -0 "$PP2" 2>/dev/null'
lyh_daemon_check_log
t_done
