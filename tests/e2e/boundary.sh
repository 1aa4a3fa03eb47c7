#!/usr/bin/env bash
# e2e: the session's local boundary (issue 15): what runs beside the agent on
# the same machine, as the same user, is out of its reach.
#   1. a tmux server of the user (its socket in /tmp/tmux-UID) cannot be asked
#      to run anything: the session's /tmp, /var/tmp and /dev/shm are private
#   2. sockets at the known places (the user's runtime dir, ~/.gnupg, ~/.ssh,
#      root's container runtime, the system bus) are hidden; --allow-socket
#      lets one through at its path (and the policy can bound or forbid it)
#   3. the private /tmp: nothing of the host's shows, nothing of the agent's
#      stays, a cwd below /tmp still works
#   4. the agent's own servers (0.0.0.0 and ::, TCP and UDP) answer a host
#      process and the agent on lo, and are refused from the LAN, the VPN
#      side and another session; with --no-cgroup (no way to tell its
#      sockets apart) servers stay denied and lyh run says so
#   6. entries of home that would run code as the user later (shell start-up
#      files, git and ssh config, systemd user units, lyh's own config) are
#      read-only in the default and the narrow-home mode, the policy's and the
#      user's additions too; a --narrow-home first run makes the agent's state
#   7. user A's agent cannot read or write user B's agent's group-readable
#      files: each user's agents have a guard gid of their own
#   5. through lo a session reaches only its own servers, the host ports it
#      listed (--allow-host-port) and the resolver's port: not a service of
#      the same user on 127.0.0.1, ::1 or the host's LAN address, not even by
#      answering a datagram it forged in the service's name
#
# usage: boundary.sh BUILD_DIR     (as root; exits 77 = skipped otherwise)
# Safety: everything network-related happens in the namespaces lib.sh makes;
# the files this makes outside them (a /run/user/UID dir, a /run/docker.sock
# stand-in when none exists) are removed at the end.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: boundary.sh needs root"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
lyh_init "${1:-}"
command -v tmux >/dev/null 2>&1 || lyh_skip "tmux not installed"

P="lyhtb-$$"
lyh_layout_up "$P" tun0 || lyh_die "network layout"
lyh_user_create || lyh_die "cannot create the test user"
lyh_daemon_start || lyh_die "lyhd does not start"

MADE=()   # files and dirs made outside the test's own dirs, removed at the end
undo_made() {
    local i
    for ((i = ${#MADE[@]} - 1; i >= 0; i--)); do rm -rf -- "${MADE[$i]}"; done
}
lyh_on_cleanup undo_made
stop_tmux() {
    lyh_as_user tmux -f /dev/null kill-server >/dev/null 2>&1
    # the server's socket dir, the test user's own (its uid may be reused later)
    [ -d "/tmp/tmux-$LYH_UID" ] && [ "$(stat -c %U "/tmp/tmux-$LYH_UID")" = "$LYH_USER" ] &&
        rm -rf "/tmp/tmux-$LYH_UID"
}
lyh_on_cleanup stop_tmux

in_session() { # CMD...: run CMD inside a session (no pty), its output on stdout
    LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui -- "$@" </dev/null 2>&1
}
# connect_unix PATH: from wherever it runs, "ok", or the error's name
CONNECT='import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print("ok")
except OSError as e:
    import errno; print(errno.errorcode.get(e.errno, e.errno))'
# serve_unix [--root] PATH: a listener of the test user (or root) at PATH
# (background, tracked)
serve_unix() {
    local as=lyh_as_user
    if [ "$1" = --root ]; then as=""; shift; fi
    $as /usr/bin/python3 -c 'import socket, sys, time, os
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8); open(sys.argv[1] + ".up", "w").close()
end = time.time() + 300
while time.time() < end:
    s.settimeout(1)
    try:
        c, _ = s.accept(); c.close()
    except OSError:
        pass' "$1" >/dev/null 2>&1 &
    lyh_track_pid "$!"
    lyh_wait_until 5 test -e "$1.up"
}

# ---- 1. tmux -------------------------------------------------------------------------
echo "# 1. the user's tmux server cannot be asked to run anything"
lyh_as_user tmux -f /dev/null new-session -d -s lyhtest 'sleep 300' || lyh_die "cannot start tmux"
lyh_as_user tmux -f /dev/null run-shell "touch $LYH_HOME/outside.mark"
t_check "1: control: outside lyh, tmux run-shell runs a command" test -e "$LYH_HOME/outside.mark"
out=$(in_session /bin/sh -c "tmux -f /dev/null run-shell 'touch $LYH_HOME/escaped.mark'; ls -d /tmp/tmux-$LYH_UID")
sleep 0.5
t_check "1: from a session, tmux run-shell runs nothing" test ! -e "$LYH_HOME/escaped.mark"
t_check "1: ... the server's socket dir is not in the session's /tmp" grep -q "No such file" <<<"$out"
stop_tmux

# ---- 2. sockets at the known places ----------------------------------------------------
echo "# 2. sockets at the known places are hidden"
printf '%s\n' "$CONNECT" >"$LYH_TMP/connect.py"
# In the user's home: the session's /tmp is a private one.
CONNECT_PY=$(lyh_user_install "$LYH_TMP/connect.py" connect.py) || lyh_die "cannot install connect.py"
install -d -o "$LYH_UID" -g "$LYH_GID" -m 0700 "$LYH_HOME/.gnupg" "$LYH_HOME/.ssh"
if [ ! -e "/run/user/$LYH_UID" ]; then
    install -d -o "$LYH_UID" -g "$LYH_GID" -m 0700 "/run/user/$LYH_UID" && MADE+=("/run/user/$LYH_UID")
fi
SOCKS=("$LYH_HOME/.gnupg/S.gpg-agent" "$LYH_HOME/.ssh/cm-lyhtest" "/run/user/$LYH_UID/bus")
for s in "${SOCKS[@]}"; do serve_unix "$s" || lyh_die "listener at $s"; done
if [ ! -e /run/docker.sock ]; then
    MADE+=(/run/docker.sock /run/docker.sock.up)
    serve_unix --root /run/docker.sock && chmod 0666 /run/docker.sock # as for the docker group
fi
[ -S /run/docker.sock ] && SOCKS+=(/run/docker.sock)
for s in "${SOCKS[@]}"; do
    ctl=$(lyh_as_user /usr/bin/python3 "$CONNECT_PY" "$s")
    got=$(in_session /usr/bin/python3 "$CONNECT_PY" "$s" | tail -n 1)
    if [ "$ctl" = ok ] && [ "$got" != ok ]; then
        t_pass "2: $s: reachable outside lyh, not from a session ($got)"
    else
        t_fail "2: $s: reachable outside lyh, not from a session" "outside: $ctl, session: $got"
    fi
done

# --allow-socket lets one through, at its path, and only that one: in the
# runtime dir (a covered directory), in /tmp (the private one), in ~/.gnupg
# (a covered socket). Each is said at start and recorded.
TMPS=/tmp/lyh-allow-$$
install -d -o "$LYH_UID" -g "$LYH_GID" -m 0700 "$TMPS" && MADE+=("$TMPS")
ALLOWED=("/run/user/$LYH_UID/pipewire-0" "$TMPS/agent.sock" "$LYH_HOME/.gnupg/S.gpg-agent")
for s in "${ALLOWED[@]:0:2}"; do serve_unix "$s" || lyh_die "listener at $s"; done
RUNDIR_BEFORE=$(ls -A "/run/user/$LYH_UID")
flags=()
for s in "${ALLOWED[@]}"; do flags+=(--allow-socket "$s"); done
out=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui "${flags[@]}" -- sh -c \
    "for s in ${ALLOWED[*]} /run/user/$LYH_UID/bus; do r=\$(/usr/bin/python3 $CONNECT_PY \$s); echo \"\$s \$r\"; done" \
    </dev/null 2>&1)
echo "$out" | sed 's/^/#   /'
for s in "${ALLOWED[@]}"; do
    t_check "2: --allow-socket $s: reachable from the session" grep -qx "$s ok" <<<"$out"
done
t_check "2: ... the runtime dir's other sockets stay hidden" eval '! grep -qx "/run/user/$LYH_UID/bus ok" <<<"$out"'
t_check "2: ... lyh run says which sockets act for the agent" grep -q "can reach these sockets of yours.*pipewire-0" <<<"$out"
t_check "2: ... the start record names them" sh -c "'$LYH_LYH' --socket '$LYH_SOCK' audit query --kind session --json | grep -q 'sockets=.*pipewire-0'"
t_check "2: ... and the runtime dir outside is as it was ($(ls -A "/run/user/$LYH_UID" | tr '\n' ' '))" \
    [ "$(ls -A "/run/user/$LYH_UID")" = "$RUNDIR_BEFORE" ]
ln -sf "$TMPS/agent.sock" "$TMPS/link.sock"
out=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui --allow-socket "$TMPS/link.sock" -- /bin/true </dev/null 2>&1)
t_check "2: --allow-socket of a symlink is refused, and says why" grep -q "is a symlink; name the socket it points to" <<<"$out"
out=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui --allow-socket "$LYH_HOME/.profile" -- /bin/true </dev/null 2>&1)
t_check "2: --allow-socket of a file is refused" grep -q "is not a socket" <<<"$out"
printf 'allowed_interface_patterns = ["tun*", "wg*"]\nallow_socket_patterns = ["/run/user/*/pipewire-0"]\n' >"$LYH_TMP/sockpol.toml"
"$LYH_LYH" --socket "$LYH_SOCK" policy set "$LYH_TMP/sockpol.toml" >/dev/null 2>&1 || t_fail "2: policy set allow_socket_patterns" "refused"
out=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui --allow-socket "$TMPS/agent.sock" -- /bin/true </dev/null 2>&1)
t_check "2: a socket outside the policy's allow_socket_patterns is refused" grep -q "matches none of allow_socket_patterns" <<<"$out"
out=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui --allow-socket "/run/user/$LYH_UID/pipewire-0" -- /bin/true </dev/null 2>&1; echo "rc=$?")
t_check "2: ... one inside them is not ($(tail -n 1 <<<"$out"))" grep -qx "rc=0" <<<"$out"
printf 'allowed_interface_patterns = ["tun*", "wg*"]\nforbid_allow_socket = true\n' >"$LYH_TMP/sockpol.toml"
"$LYH_LYH" --socket "$LYH_SOCK" policy set "$LYH_TMP/sockpol.toml" >/dev/null 2>&1 || t_fail "2: policy set forbid_allow_socket" "refused"
out=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui --allow-socket "/run/user/$LYH_UID/pipewire-0" -- /bin/true </dev/null 2>&1)
t_check "2: forbid_allow_socket refuses every --allow-socket" grep -q "letting sockets through is forbidden" <<<"$out"
printf 'allowed_interface_patterns = ["tun*", "wg*"]\n' >"$LYH_TMP/sockpol.toml"
"$LYH_LYH" --socket "$LYH_SOCK" policy set "$LYH_TMP/sockpol.toml" >/dev/null 2>&1

# A client of its own (not lyh, which normalises paths) sends what it likes:
# a deny path spelled with a trailing '/', which a string comparison would
# not see as holding the socket (the child then opened the cover's place by
# path as root: a symlink swapped in there made root create the placeholder
# elsewhere, found in review); a socket named through a symlink.
PYMOD=$LYH_TMP/py
chmod 755 "$LYH_TMP" && install -d -m 0755 "$LYH_TMP/bin" "$PYMOD" &&
    protoc -I"$HERE/../../proto" --python_out="$PYMOD" "$HERE/../../proto/lianyaohu.proto" &&
    install -m 0755 "$HERE/run_client.py" "$HERE/py_client.py" "$LYH_TMP/bin/" || lyh_die "run_client.py"
raw_run() { lyh_as_user /usr/bin/python3 -B "$LYH_TMP/bin/run_client.py" "$PYMOD" "$LYH_SOCK" "$1" 2>&1 | tail -n 1; }
lyh_as_user sh -c 'mkdir -p ~/real && ln -sfn real ~/lnk'
serve_unix "$LYH_HOME/real/s" || lyh_die "listener at ~/real/s"
base='"argv": ["/bin/true"], "interface": "tun0", "cwd": "'"$LYH_HOME"'"'
out=$(raw_run "{$base, \"deny_paths\": [\"$LYH_HOME/real/\"], \"allow_sockets\": [\"$LYH_HOME/real/s\"]}")
t_check "2: a deny path with a trailing '/' is refused ($out)" grep -q "^INVALID_ARGUMENT deny path .* trailing '/'" <<<"$out"
out=$(raw_run "{$base, \"allow_sockets\": [\"$LYH_HOME/lnk/s\"]}")
t_check "2: a socket named through a symlink is refused ($out)" grep -q "^INVALID_ARGUMENT .*goes through a symlink" <<<"$out"
out=$(raw_run "{$base, \"allow_sockets\": [\"$LYH_HOME/real/s\"]}")
t_check "2: the same socket by its real path is not ($out)" grep -q "^OK" <<<"$out"

# ---- 3. the private /tmp ---------------------------------------------------------------
echo "# 3. the session's /tmp, /var/tmp and /dev/shm are its own"
HOSTFILE=/tmp/lyh-bnd-host-$$
echo host >"$HOSTFILE" && chmod 0644 "$HOSTFILE"
MADE+=("$HOSTFILE")
# Where a broken build would write (removed at the end whatever the outcome).
MADE+=(/tmp/lyh-bnd-agent-$$ /var/tmp/lyh-bnd-agent-$$ /dev/shm/lyh-bnd-agent-$$)
out=$(in_session /bin/sh -c "echo TMPDIR=\$TMPDIR; cat $HOSTFILE 2>&1; for d in /tmp /var/tmp /dev/shm; do echo agent >\$d/lyh-bnd-agent-$$ && echo wrote \$d; done")
t_check "3: TMPDIR is /tmp" grep -qx "TMPDIR=/tmp" <<<"$out"
t_check "3: a file in the host's /tmp does not show" grep -q "No such file" <<<"$out"
t_eq "3: the agent writes its /tmp, /var/tmp and /dev/shm" "$(grep -c '^wrote ' <<<"$out")" 3
for d in /tmp /var/tmp /dev/shm; do
    t_check "3: what it wrote in $d is not in the host's" test ! -e "$d/lyh-bnd-agent-$$"
done
sid=$(sqlite3 -cmd '.timeout 5000' "$LYH_DB" 'select id from sessions order by started_ms desc, rowid desc limit 1')
lyh_wait_until 10 test ! -e "$LYH_TMPROOT/lyh-$sid"
t_check "3: ... and goes with the session's tmpdir" test ! -e "$LYH_TMPROOT/lyh-$sid"
# A project below /tmp is still the agent's cwd, at the same path.
PROJ=/tmp/lyh-bnd-proj-$$
install -d -o "$LYH_UID" -g "$LYH_GID" -m 0755 "$PROJ" && MADE+=("$PROJ")
out=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui --cwd "$PROJ" -- /bin/sh -c 'pwd; echo made >made' </dev/null 2>&1)
t_check "3: a cwd below /tmp works (same path)" grep -qx "$PROJ" <<<"$out"
t_check "3: ... and what the agent writes there is in the real directory" test -e "$PROJ/made"
out=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui --cwd /tmp -- /bin/true </dev/null 2>&1)
t_check "3: cwd /tmp itself is refused, saying why" grep -q "private /tmp of its own" <<<"$out"

# LOPROBE PROTO:ADDR:PORT...: from inside a session, one line per target:
# "PROTO:ADDR:PORT ok" (an echo came back) or the error's name or "timeout".
LOPROBE='import socket, sys, errno
for t in sys.argv[1:]:
    proto, rest = t.split(":", 1)
    addr, port = rest.rsplit(":", 1)
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM)
    s.settimeout(1.5)
    try:
        s.connect((addr, int(port))); s.send(b"hi")
        print(t, "ok" if s.recv(16) else "empty", flush=True)
    except socket.timeout:
        print(t, "timeout", flush=True)
    except OSError as e:
        print(t, errno.errorcode.get(e.errno, e.errno), flush=True)
    s.close()'

# ---- 4. the agent's own servers ---------------------------------------------------------
echo "# 4. the agent's servers: reachable on lo (by the host and by itself), never from the network"
LPORT=18$((RANDOM % 900 + 100))
# A TCP+UDP echo server on the wildcard v4 and v6 addresses, inside the
# session; it first checks that it can reach itself on 127.0.0.1.
SERVER='import socket, sys, threading, time
port = int(sys.argv[1])
socks = []
for fam, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
    t = socket.socket(fam, socket.SOCK_STREAM); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    u = socket.socket(fam, socket.SOCK_DGRAM)
    if fam == socket.AF_INET6:
        t.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1); u.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    t.bind((addr, port)); t.listen(16); u.bind((addr, port)); socks += [t, u]
# port+1: one dual-stack TCP socket (IPv4 arrives on the IPv6 socket);
# port+2: MPTCP (its subflows are sockets the kernel makes), when the kernel has it
d = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); d.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
d.bind(("::", port + 1)); d.listen(16); socks.append(d)
try:
    m = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262); m.bind(("0.0.0.0", port + 2)); m.listen(16); socks.append(m)
    print("mptcp yes", flush=True)
except OSError as e:
    print("mptcp no", e, flush=True)
def tcp(s):
    while True:
        c, _ = s.accept(); c.settimeout(2)
        try: c.sendall(c.recv(512))
        except OSError: pass
        c.close()
def udp(s):
    while True:
        d, a = s.recvfrom(512); s.sendto(d, a)
for s in socks:
    threading.Thread(target=tcp if s.type == socket.SOCK_STREAM else udp, args=(s,), daemon=True).start()
c = socket.create_connection(("127.0.0.1", port), timeout=2); c.sendall(b"me"); print("self", c.recv(8).decode(), flush=True)
print("serving", flush=True)
time.sleep(40)'
LOUT=$LYH_TMP/listener.out
LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui -- /usr/bin/python3 -c "$SERVER" "$LPORT" </dev/null >"$LOUT" 2>&1 &
LPID=$!
lyh_track_pid "$LPID"
if lyh_wait_until 15 grep -q '^serving' "$LOUT"; then
    t_pass "4: the agent binds and listens on 0.0.0.0 and :: (TCP and UDP)"
    t_check "4: ... and reaches its own server on 127.0.0.1" grep -qx "self me" "$LOUT"
    from() { # NS PROTO ADDR -> "<result> <ms>"
        timeout 10 nsenter --net="/run/netns/$1" "$LYH_TOOL" probe "$2" "$3" "$LPORT" 1500 2>&1
    }
    for proto in tcp udp; do
        for a in 127.0.0.1 ::1; do
            out=$(from "$LYH_MAIN" $proto $a)
            t_check "4: a host process reaches it at $a ($proto)" grep -q '^ok ' <<<"$out"
        done
        for where in "$LYH_LAN 192.168.77.1" "$LYH_LAN fd77::1" "$LYH_EXIT 10.77.0.1" "$LYH_EXIT 2a0e:77::1"; do
            read -r ns a <<<"$where"
            out=$(from "$ns" $proto "$a")
            if grep -Eq '^(refused|unreach) ' <<<"$out"; then
                t_pass "4: refused from ${ns##*-} to $a ($proto: $out)"
            else
                t_fail "4: refused from ${ns##*-} to $a ($proto)" "$out"
            fi
        done
    done
    said_denied() { grep -q 'cannot run local servers' "$LOUT"; }
    from1() { timeout 10 nsenter --net="/run/netns/$1" "$LYH_TOOL" probe tcp "$2" "$3" 1500 2>&1; }
    out=$(from1 "$LYH_MAIN" 127.0.0.1 $((LPORT + 1)))
    t_check "4: a dual-stack server answers a host process on 127.0.0.1 ($out)" grep -q '^ok ' <<<"$out"
    out=$(from1 "$LYH_LAN" 192.168.77.1 $((LPORT + 1)))
    t_check "4: a dual-stack server is refused from the LAN over IPv4 ($out)" grep -q '^refused ' <<<"$out"
    if grep -q '^mptcp yes' "$LOUT"; then
        out=$(from1 "$LYH_MAIN" 127.0.0.1 $((LPORT + 2)))
        t_check "4: an MPTCP server answers a host process on 127.0.0.1 ($out)" grep -q '^ok ' <<<"$out"
        out=$(from1 "$LYH_LAN" 192.168.77.1 $((LPORT + 2)))
        t_check "4: an MPTCP server is refused from the LAN ($out)" grep -q '^refused ' <<<"$out"
    else
        echo "# no MPTCP in this kernel: $(grep '^mptcp' "$LOUT")"
    fi
    t_check "4: lyh run did not say servers are denied" eval '! said_denied'
    # Another session on the same machine cannot reach this one's servers.
    out=$(in_session /usr/bin/python3 -c "$LOPROBE" tcp:127.0.0.1:"$LPORT" udp:127.0.0.1:"$LPORT" tcp:::1:"$LPORT")
    for t in tcp:127.0.0.1 udp:127.0.0.1 tcp:::1; do
        t_check "4: another session is refused at $t:$LPORT" \
            grep -Eq "^$t:$LPORT (ECONNREFUSED|EHOSTUNREACH|EACCES|EPERM|timeout)\$" <<<"$out"
    done
    # ... even when it lists that port: a listed port names a host service
    out=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui --allow-host-port "$LPORT" -- \
        /usr/bin/python3 -c "$LOPROBE" tcp:127.0.0.1:"$LPORT" udp:127.0.0.1:"$LPORT" </dev/null 2>&1)
    for t in tcp:127.0.0.1 udp:127.0.0.1; do
        t_check "4: another session listing the port is refused at $t:$LPORT too" \
            grep -Eq "^$t:$LPORT (ECONNREFUSED|EHOSTUNREACH|EACCES|EPERM|timeout)\$" <<<"$out"
    done
    has_listeners() { lyh_in_main "$LYH_LYH" --socket "$LYH_SOCK" capabilities | grep -q '^features:.* listeners\b'; }
    t_check "4: lyhd reports the listeners feature" has_listeners
else
    t_fail "4: the agent binds and listens on 0.0.0.0 and :: (TCP and UDP)" "$(cat "$LOUT")"
fi
lyh_stop_pid "$LPID"
wait "$LPID" 2>/dev/null

# ---- 5. loopback: only the session's own servers, listed ports and the resolver -----------
echo "# 5. through lo a session reaches its own servers and the host ports it lists, nothing else"
HPORT=19$((RANDOM % 900 + 100))
APORT=$((HPORT + 1))
# A service of the same user outside the session: TCP and UDP echo on one
# address, and a line per connection or datagram in its log.
HOSTSRV='import socket, sys, threading, time
addr, port, log = sys.argv[1], int(sys.argv[2]), sys.stdout
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
t = socket.socket(fam, socket.SOCK_STREAM); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
u = socket.socket(fam, socket.SOCK_DGRAM)
t.bind((addr, port)); t.listen(16); u.bind((addr, port))
def tcp():
    while True:
        c, a = t.accept(); log.write("tcp %d %s\n" % (port, a[0])); c.settimeout(2)
        try: c.sendall(c.recv(64))
        except OSError: pass
        c.close()
def udp():
    while True:
        d, a = u.recvfrom(64); log.write("udp %d %s %r\n" % (port, a[0], d)); u.sendto(d, a)
threading.Thread(target=tcp, daemon=True).start(); threading.Thread(target=udp, daemon=True).start()
log.write("up %d %s\n" % (port, addr)); log.flush()
while True:
    time.sleep(0.2); log.flush()'
HLOG=$LYH_TMP/hostsrv.log   # the services' stdout (root opens it; they run as the user)
: >"$HLOG"
for a in 127.0.0.1 ::1; do
    for p in "$HPORT" "$APORT"; do
        LYH_CMD_TIMEOUT=200 lyh_as_user /usr/bin/python3 -u -c "$HOSTSRV" "$a" "$p" >>"$HLOG" 2>&1 &
        lyh_track_pid "$!"
    done
done
LYH_CMD_TIMEOUT=200 lyh_as_user /usr/bin/python3 -u -c "$HOSTSRV" 192.168.77.1 "$HPORT" >>"$HLOG" 2>&1 &
lyh_track_pid "$!"
lyh_wait_until 10 eval '[ "$(grep -c "^up " "$HLOG")" -ge 5 ]'
t_check "5: five host services are up" [ "$(grep -c "^up " "$HLOG")" -eq 5 ]
out=$(lyh_in_main "$LYH_TOOL" probe tcp 127.0.0.1 "$HPORT" 1500 2>&1)
t_check "5: the host service answers outside a session ($out)" grep -q '^ok ' <<<"$out"
seen() { grep -c "^\(tcp\|udp\) $1 " "$HLOG"; }
lyh_wait_until 5 eval '[ "$(seen "$HPORT")" -ge 1 ]'
before=$(seen "$HPORT")

# In one session: the unlisted port, the listed one, the host's LAN address,
# its own server on both loopback addresses, and a forged reply: a datagram
# sent with the host service's address as its source (IP_PKTINFO, from a
# socket on 127.0.0.2 at the service's port) to a socket of its own, which
# answers it: the answer must not reach the service.
OWN='import socket, sys, struct, threading, errno, subprocess
hport, loprobe = int(sys.argv[1]), sys.argv[2]
own = []
for fam, a in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    t = socket.socket(fam, socket.SOCK_STREAM); t.bind((a, 0)); t.listen(4)
    u = socket.socket(fam, socket.SOCK_DGRAM); u.bind((a, t.getsockname()[1]))
    own.append((a, t, u))
def serve(t, u):
    def tcp():
        while True:
            c, _ = t.accept(); c.sendall(c.recv(16)); c.close()
    def udp():
        while True:
            d, a = u.recvfrom(16); u.sendto(d, a)
    threading.Thread(target=tcp, daemon=True).start(); threading.Thread(target=udp, daemon=True).start()
targets = []
for a, t, u in own:
    serve(t, u)
    targets += ["tcp:%s:%d" % (a, t.getsockname()[1]), "udp:%s:%d" % (a, t.getsockname()[1])]
for a in ("127.0.0.1", "::1"):
    for p in (hport, hport + 1):
        targets += ["tcp:%s:%d" % (a, p), "udp:%s:%d" % (a, p)]
targets += ["tcp:192.168.77.1:%d" % hport, "tcp:127.0.0.2:%d" % hport]
out = subprocess.run([sys.executable, "-c", loprobe] + targets, capture_output=True, text=True, timeout=60)
print(out.stdout, end="", flush=True)
# the forged reply
b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); b.bind(("127.0.0.1", 0)); b.settimeout(2)
f = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    f.bind(("127.0.0.2", hport))
    # IP_PKTINFO (8): struct in_pktinfo { ifindex, spec_dst (the source), addr }
    pktinfo = struct.pack("I4s4s", 0, socket.inet_aton("127.0.0.1"), socket.inet_aton("0.0.0.0"))
    f.sendmsg([b"forged"], [(socket.IPPROTO_IP, 8, pktinfo)], 0, ("127.0.0.1", b.getsockname()[1]))
    d, src = b.recvfrom(16)
    print("forge-src %s:%d" % src, flush=True)
    b.sendto(b"forged-answer", src)
    print("forge-answer sent", flush=True)
except OSError as e:
    print("forge", errno.errorcode.get(e.errno, e.errno), flush=True)'
out=$(LYH_CMD_TIMEOUT=90 lyh_cli run --vpn tun0 --no-tui --allow-host-port "$APORT" -- \
    /usr/bin/python3 -c "$OWN" "$HPORT" "$LOPROBE" </dev/null 2>&1)
echo "$out" | sed 's/^/#   /'
for pr in tcp udp; do
    for a in 127.0.0.1 ::1; do
        t_check "5: its own $pr server on $a answers it" grep -Eq "^$pr:$a:[0-9]+ ok\$" <<<"$out"
        t_check "5: a host service on $a:$HPORT ($pr) is refused" \
            grep -Eq "^$pr:$a:$HPORT (ECONNREFUSED|EHOSTUNREACH|EACCES|EPERM|timeout)\$" <<<"$out"
        t_check "5: the listed host port $a:$APORT ($pr) answers" grep -q "^$pr:$a:$APORT ok\$" <<<"$out"
    done
done
t_check "5: the host's LAN address through lo is refused" \
    grep -Eq "^tcp:192.168.77.1:$HPORT (ECONNREFUSED|EHOSTUNREACH|EACCES|EPERM|timeout)\$" <<<"$out"
t_check "5: 127.0.0.2 at the host service's port is refused" \
    grep -Eq "^tcp:127.0.0.2:$HPORT (ECONNREFUSED|EHOSTUNREACH|EACCES|EPERM|timeout)\$" <<<"$out"
t_check "5: the forged datagram arrived from the service's address" grep -qx "forge-src 127.0.0.1:$HPORT" <<<"$out"
t_check "5: ... and the answer to it did not reach the service" eval '! grep -q forged "$HLOG"'
after=$(seen "$HPORT")
t_check "5: the services on $HPORT saw nothing of the session ($before before, $after after)" \
    [ "$after" -eq "$before" ]
n_listed=$(seen "$APORT")
t_check "5: the services on the listed port saw its 4 probes ($n_listed)" [ "$n_listed" -eq 4 ]
# What the review of the first loopback rules found, each tried for real:
#   A. a forged datagram to its own socket on a LISTED port, answered towards
#      the unlisted service (the listed flow carried no mark);
#   B. joining a flow a host client keeps with the service (same addresses
#      and ports, source forged): no new flow, no check;
#   C. leaving refused flows behind at a host client's next source port, so
#      that the host's own connection is then refused as the session's.
CPORT=$((HPORT + 10)) PPORT=$((HPORT + 20))
HOSTCLI='import socket, sys, time
port, cport = int(sys.argv[1]), int(sys.argv[2])
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.bind(("127.0.0.1", cport)); c.connect(("127.0.0.1", port))
c.settimeout(2); c.send(b"client-hello"); print("client", c.recv(64).decode(), flush=True)
time.sleep(20)'
LYH_CMD_TIMEOUT=40 lyh_as_user /usr/bin/python3 -u -c "$HOSTCLI" "$HPORT" "$CPORT" >"$LYH_TMP/hostcli.out" 2>&1 &
lyh_track_pid "$!"
lyh_wait_until 5 grep -q "^client client-hello" "$LYH_TMP/hostcli.out"
t_check "5: a host client talks to the service ($(cat "$LYH_TMP/hostcli.out"))" grep -q "^client client-hello" "$LYH_TMP/hostcli.out"
ATTACKS='import socket, struct, sys, errno
hport, aport, cport, pport = map(int, sys.argv[1:5])
pk = struct.pack("I4s4s", 0, socket.inet_aton("127.0.0.1"), bytes(4))  # IP_PKTINFO source 127.0.0.1
def res(name, f):
    try:
        print(name, f(), flush=True)
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno), flush=True)
def a():
    s1 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s1.bind(("127.0.0.2", aport)); s1.settimeout(2)
    s2 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s2.bind(("127.0.0.3", hport))
    s2.sendmsg([b"prime"], [(socket.IPPROTO_IP, 8, pk)], 0, ("127.0.0.2", aport))
    d, src = s1.recvfrom(64)
    s1.sendto(b"attack-A", src)
    return "sent-to-%s:%d" % src
def b():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.2", cport))
    s.sendmsg([b"attack-B"], [(socket.IPPROTO_IP, 8, pk)], 0, ("127.0.0.1", hport))
    return "sent"
def c(kind):
    s = socket.socket(socket.AF_INET, kind); s.bind(("127.0.0.1", pport)); s.settimeout(2)
    s.connect(("127.0.0.1", hport)); s.send(b"attack-C")
    return s.recv(64).decode() or "empty"
res("A", a)
res("B", b)
res("C-udp", lambda: c(socket.SOCK_DGRAM))
res("C-tcp", lambda: c(socket.SOCK_STREAM))'
# The session stays until the host process below has tried (C): its chain lo-<id> judges
# what carries its mark only while it runs.
# (in the user's home: the session has a /tmp of its own)
printf '%s\n' "$ATTACKS" >"$LYH_TMP/attacks.py"
attacks=$(lyh_user_install "$LYH_TMP/attacks.py" attacks.py) || lyh_die "install attacks.py"
done_f=$(dirname "$attacks")/attacks.done
LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui --allow-host-port "$APORT" -- /bin/sh -c \
    "/usr/bin/python3 $attacks $HPORT $APORT $CPORT $PPORT
    rc=\$?; i=0; while [ ! -e $done_f ] && [ \$i -lt 300 ]; do sleep 0.1; i=\$((i + 1)); done
    [ -e $done_f ] && exit \$rc; exit 9" </dev/null >"$LYH_TMP/attacks.out" 2>&1 &
attacks_pid=$!
lyh_track_pid "$attacks_pid"
lyh_wait_until 20 grep -q "^C-tcp " "$LYH_TMP/attacks.out"
out=$(cat "$LYH_TMP/attacks.out")
echo "$out" | sed 's/^/#   /'
t_check "5: (A) the forged datagram on the listed port came from the service's address" \
    grep -qx "A sent-to-127.0.0.1:$HPORT" <<<"$out"
t_check "5: (A) ... and its answer never reached the service" eval '! grep -q attack-A "$HLOG"'
t_check "5: (B) a datagram joining the host client's flow never reached the service" \
    eval '! grep -q attack-B "$HLOG"'
t_check "5: (C) the session's own datagram and connection to the service are refused" \
    eval '! grep -Eq "^C-(udp|tcp) attack-C" <<<"$out" && ! grep -q attack-C "$HLOG"'
install -m 0755 "$HERE/from_port.py" "$LYH_TMP/bin/from_port.py"
lyh_check_host_from_port "5: (C) from the same source port a host process still reaches the service" \
    "$LYH_TMP/bin/from_port.py" "$HPORT" "$PPORT"
touch "$done_f"
wait "$attacks_pid"
t_eq "5: the attacking session ends, having seen the host's try (9: it did not)" "$?" 0
t_check "5: the refusals are in the audit log" \
    sh -c "'$LYH_LYH' --socket '$LYH_SOCK' audit query --verdict denied --port $HPORT --json | grep -q '127.0.0.1'"

# 5b. Root deletes a piece of a running session's rules that its flows through
# lo need: for a session with chains, its element of map loopback (its flows
# still carry its mark but meet no chain lo-<id> on input: chain input refuses
# them; until 2026-12-07 it let them reach any host service; nft_guard.sh checks
# that rule alone); for a data session (the default policy: guard-as-data.md),
# its element of set downmark, which pairs its mark with its cgroup (without
# it, its flows through lo are refused on output). lyhd's ruleset watch puts the
# session's rules back, so that its own servers answer it again.
LOTRY='import socket, sys, os, time, errno
hport, go = int(sys.argv[1]), sys.argv[2]
own = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
own.bind(("127.0.0.1", 0))
own.listen(4)
kept = socket.create_connection(own.getsockname(), timeout=2)  # before the change
kept_peer = own.accept()[0]
kept_peer.settimeout(2)
open(go + ".ready", "w").close()
for i in range(300):
    if os.path.exists(go):
        break
    time.sleep(0.1)
else:
    print("no-go", flush=True)
    sys.exit(9)
tries = [(socket.SOCK_STREAM, "tcp", hport), (socket.SOCK_DGRAM, "udp", hport),
         (socket.SOCK_STREAM, "own", own.getsockname()[1])]
for kind, name, port in tries:
    s = socket.socket(socket.AF_INET, kind)
    s.settimeout(2)
    try:
        s.connect(("127.0.0.1", port))
        if name == "own":
            own.accept()[0].close()
            print(name, "ok", flush=True)
            continue
        s.send(b"tampered-" + name.encode())
        print(name, s.recv(64).decode() or "empty", flush=True)
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, "timeout"), flush=True)
try:
    kept.send(b"still")
    print("kept", kept_peer.recv(16).decode() or "empty", flush=True)
except OSError as e:
    print("kept", errno.errorcode.get(e.errno, "timeout"), flush=True)'
printf '%s\n' "$LOTRY" >"$LYH_TMP/lotry.py"
lotry=$(lyh_user_install "$LYH_TMP/lotry.py" lotry.py) || lyh_die "install lotry.py"
go_f=$(dirname "$lotry")/lotry.go
rm -f "$go_f" "$go_f.ready"
# (a session of §4 still runs: this one is the first started after now)
t5=$(sqlite3 -cmd '.timeout 5000' "$LYH_DB" "select coalesce(max(started_ms), 0) from sessions")
LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui -- /usr/bin/python3 "$lotry" "$HPORT" "$go_f" \
    </dev/null >"$LYH_TMP/lotry.out" 2>&1 &
lotry_pid=$!
lyh_track_pid "$lotry_pid"
running_sid() {
    SID5=$(sqlite3 -cmd '.timeout 5000' "$LYH_DB" \
        "select id from sessions where state=2 and started_ms > ${t5:-0} limit 1" 2>/dev/null)
    [ -n "$SID5" ]
}
# nft reads and prints a cgroup as a path below /sys/fs/cgroup, in the mount
# namespace it runs in: nsenter, not ip netns exec (which remounts /sys)
nft5() { nsenter --net="/run/netns/$LYH_MAIN" nft "$@"; }
cg5() { # the session's cgroup as nft names it
    local cg
    cg=$(sqlite3 -cmd '.timeout 5000' "$LYH_DB" "select cgroup from sessions where id='${SID5:-x}'" 2>/dev/null)
    local base=${LYH_CGMNT#/sys/fs/cgroup}
    base=${base#/}
    if [ -n "$base" ]; then echo "$base$cg"; else echo "${cg#/}"; fi
}
lo_mark_of() { # the session's loopback mark: its loopback element, or (data) its dlomark one
    if [ "$layout5" = data ]; then
        nft5 list map inet lianyaohu dlomark 2>/dev/null | tr ',' '\n' |
            grep -F "\"$(cg5)\" :" | grep -Eo ': 0x[0-9a-f]+' | grep -Eo '0x[0-9a-f]+'
    else
        lyh_nft list map inet lianyaohu loopback 2>/dev/null |
            grep -Eo -- "0x[0-9a-f]+ : jump lo-${SID5:-x}([^0-9a-f]|\$)" | grep -Eo '^0x[0-9a-f]+'
    fi
}
SID5=""
lyh_wait_until 15 running_sid
lyh_wait_until 15 test -e "$go_f.ready"
layout5=$(lyh_session_rules "$SID5")
lo_mark5=$(lo_mark_of)
# A change of someone else's that leaves the session's rules whole: lyhd's
# check (20 ms later) leaves them alone.
lyh_nft add table inet lyhbnd5 && lyh_nft delete table inet lyhbnd5
sleep 0.5
t_check "5b: a change elsewhere in nftables leaves the running session's rules alone" \
    eval '! grep -q "put them back" "$LYH_DAEMON_LOG" && [ -n "$lo_mark5" ] && [ "$(lo_mark_of)" = "$lo_mark5" ]'
deleted=no
if [ "$layout5" = data ]; then
    [ -n "$lo_mark5" ] && nft5 delete element inet lianyaohu downmark "{ $lo_mark5 . \"$(cg5)\" }" &&
        deleted=yes
else
    [ -n "$lo_mark5" ] && lyh_nft delete element inet lianyaohu loopback "{ $lo_mark5 }" && deleted=yes
fi
t_eq "5b: root deleted the element its flows through lo need (${layout5:-no rules}, ${lo_mark5:-none found})" \
    "$deleted" yes
put_back() { grep -qF "session '${SID5:-x}': part of its firewall rules was removed by someone else while it ran; put them back" "$LYH_DAEMON_LOG"; }
lyh_wait_until 5 eval 'put_back && [ -n "$(lo_mark_of)" ]'
t_check "5b: lyhd saw it and put the session's rules back, under the same mark ($(lo_mark_of))" \
    eval 'put_back && [ "$(lo_mark_of)" = "$lo_mark5" ]'
install -o "$LYH_UID" -g "$LYH_GID" -m 0644 /dev/null "$go_f"
wait "$lotry_pid"
out=$(cat "$LYH_TMP/lotry.out")
echo "$out" | sed 's/^/#   /'
for pr in tcp udp; do
    t_check "5b: its $pr flow to the host service on 127.0.0.1:$HPORT is refused" \
        grep -Eq "^$pr (ECONNREFUSED|EHOSTUNREACH|EACCES|EPERM|timeout)\$" <<<"$out"
done
t_check "5b: ... and the service saw nothing of it" eval '! grep -q tampered "$HLOG"'
t_check "5b: its own server on 127.0.0.1 answers it again" grep -qx "own ok" <<<"$out"
t_check "5b: its connection to its own server from before goes on (the same marks)" \
    grep -qx "kept still" <<<"$out"
t_check "5b: the repair is in the audit log" \
    lyh_wait_until 3 sh -c "'$LYH_LYH' --socket '$LYH_SOCK' audit query --kind guard --json | grep 's-$SID5' | grep -q 'session.s rules was missing'"

# ---- 6. what would run as the user later stays read-only ---------------------------------
echo "# 6. shell start-up files, git, ssh, systemd user units, lyh's own config: read-only"
lyh_as_user sh -c 'printf "[user]\n\tname = t\n" >~/.gitconfig && mkdir -p ~/dotfiles ~/proj &&
    echo "# z" >~/dotfiles/zshrc && ln -s dotfiles/zshrc ~/.zshrc && echo "registry=x" >~/.npmrc &&
    echo "alias ll=ls" >~/.bash_aliases' ||
    t_fail "6: the user's dotfiles" "cannot make them"
sum_before=$(cd "$LYH_HOME" && cat .bashrc .profile .gitconfig dotfiles/zshrc .npmrc .bash_aliases | md5sum)
# WRITES: each attempt's errno name, or "ok"
WRITES='import os, errno
h = os.environ["HOME"]
def j(p): return os.path.join(h, p)
def tryit(name, f):
    try:
        f(); print(name, "ok", flush=True)
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno), flush=True)
def append(p):
    with open(j(p), "a") as fh: fh.write("echo pwned\n")
def create(p):
    with open(j(p), "w") as fh: fh.write("x\n")
def over(p):
    create("evil"); os.rename(j("evil"), j(p))
tryit("append-bashrc", lambda: append(".bashrc"))
tryit("append-profile", lambda: append(".profile"))
tryit("append-gitconfig", lambda: append(".gitconfig"))
tryit("append-zshrc-link", lambda: append(".zshrc"))
tryit("unlink-zshrc-link", lambda: os.unlink(j(".zshrc")))
tryit("rename-over-bashrc", lambda: over(".bashrc"))
tryit("unlink-bashrc", lambda: os.unlink(j(".bashrc")))
tryit("create-lyh-config", lambda: create(".config/lianyaohu/config.toml"))
tryit("create-lyh-trust", lambda: create(".config/lianyaohu/trusted.toml"))
tryit("create-git-config", lambda: create(".config/git/config"))
tryit("create-user-unit", lambda: create(".config/systemd/user/evil.service"))
tryit("create-local-bin", lambda: create(".local/bin/ls"))
tryit("create-ssh-keys", lambda: create(".ssh/authorized_keys"))
tryit("rename-config-away", lambda: os.rename(j(".config"), j(".config.old")))
tryit("rename-local-away", lambda: os.rename(j(".local"), j(".local.old")))
tryit("rename-dotfiles-dir", lambda: os.rename(j("dotfiles"), j("dotfiles.old")))
tryit("append-bash-aliases", lambda: append(".bash_aliases"))
tryit("append-npmrc", lambda: append(".npmrc"))
tryit("write-notes", lambda: create("notes.txt"))'
PROTECTED="append-bashrc append-profile append-gitconfig append-zshrc-link unlink-zshrc-link
    rename-over-bashrc unlink-bashrc create-lyh-config create-lyh-trust create-git-config
    create-user-unit create-local-bin create-ssh-keys rename-config-away rename-local-away
    rename-dotfiles-dir append-bash-aliases"
refused() { grep -Eq "^$1 (EROFS|EBUSY|EACCES|EPERM|EXDEV)\$" <<<"$2"; }
for mode in default narrow; do
    flag=()
    [ "$mode" = narrow ] && flag=(--narrow-home --cwd "$LYH_HOME/proj")
    out=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui "${flag[@]}" -- /usr/bin/python3 -c "$WRITES" </dev/null 2>&1)
    echo "$out" | sed 's/^/#   /'
    for w in $PROTECTED; do
        t_check "6 ($mode): $w is refused" refused "$w" "$out"
    done
    if [ "$mode" = default ]; then
        t_check "6 ($mode): ~/.npmrc is writable (not on the list)" grep -qx "append-npmrc ok" <<<"$out"
        t_check "6 ($mode): the rest of home is writable" grep -qx "write-notes ok" <<<"$out"
        t_check "6 ($mode): lyh run says a session in the home may write all of it" \
            grep -q "the working directory is your home" <<<"$out"
    else
        t_check "6 ($mode): the rest of home is not" refused write-notes "$out"
        out=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui --narrow-home -- /bin/true </dev/null 2>&1)
        t_check "6 ($mode): lyh run says --narrow-home does not narrow a session in the home" \
            grep -q "narrow-home does not narrow a session started here" <<<"$out"
    fi
done
# An agent that takes away lyh's view of a pinned directory (chmod 0) must not
# leave the next session unprotected below it: the next launch is refused.
out=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui -- sh -c 'chmod 0 ~/.config/systemd ~/.local && echo chmodded' </dev/null 2>&1)
t_check "6: an agent can chmod a pinned directory ($(tail -n 1 <<<"$out"))" grep -qx chmodded <<<"$out"
second=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui -- sh -c 'chmod 700 ~/.local; echo >~/.local/bin/git; echo ran' </dev/null 2>&1)
t_check "6: ... and the next launch is refused, saying what to do ($(tail -n 1 <<<"$second"))" \
    eval 'grep -q "chmod u+rwx" <<<"$second" && ! grep -qx ran <<<"$second"'
t_check "6: ... so nothing landed in ~/.local/bin" test ! -e "$LYH_HOME/.local/bin/git"
lyh_as_user chmod 700 "$LYH_HOME/.config/systemd" "$LYH_HOME/.local"

# Undo what the default mode's notes.txt and the npmrc line did; keep the rest
lyh_as_user sh -c 'rm -f ~/notes.txt; echo "registry=x" >~/.npmrc'
sum_after=$(cd "$LYH_HOME" && cat .bashrc .profile .gitconfig dotfiles/zshrc .npmrc .bash_aliases | md5sum)
t_check "6: the protected files are unchanged outside" [ "$sum_before" = "$sum_after" ]
t_check "6: ~/.config/lianyaohu was made (empty, the user's, 0700)" \
    eval '[ "$(stat -c %U:%a "$LYH_HOME/.config/lianyaohu")" = "$LYH_USER:700" ] && [ -z "$(ls -A "$LYH_HOME/.config/lianyaohu")" ]'
t_check "6: ~/.config and ~/.local are where they were" test -d "$LYH_HOME/.config/git" -a -d "$LYH_HOME/.local/bin"
t_check "6: the dotfile link is still a link" test -L "$LYH_HOME/.zshrc"

# The user's own additions (paths.protect) and the admin's (protect_paths).
lyh_as_user sh -c 'mkdir -p ~/.config/lianyaohu 2>/dev/null; true'
out=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui --writable "$LYH_HOME/.ssh" -- /bin/true </dev/null 2>&1)
t_check "6: --writable ~/.ssh is refused, and says why" grep -q "is protected: agents may not write it" <<<"$out"
printf 'allowed_interface_patterns = ["tun*"]\nprotect_paths = ["~/.npmrc"]\n' >"$LYH_TMP/protect.toml"
"$LYH_LYH" --socket "$LYH_SOCK" policy set "$LYH_TMP/protect.toml" >/dev/null 2>&1 ||
    t_fail "6: policy set protect_paths" "$("$LYH_LYH" --socket "$LYH_SOCK" policy set "$LYH_TMP/protect.toml" 2>&1)"
out=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui -- /usr/bin/python3 -c "$WRITES" </dev/null 2>&1)
t_check "6: the policy's protect_paths keeps ~/.npmrc read-only" refused append-npmrc "$out"
printf 'allowed_interface_patterns = ["tun*", "wg*"]\n' >"$LYH_TMP/protect0.toml"
"$LYH_LYH" --socket "$LYH_SOCK" policy set "$LYH_TMP/protect0.toml" >/dev/null 2>&1

# --narrow-home on a first run: the agent's own state is made and writable.
FAKE='#!/usr/bin/python3
import json, os
h = os.environ["HOME"]
os.makedirs(os.path.join(h, ".claude", "projects"), exist_ok=True)
with open(os.path.join(h, ".claude", "settings.json"), "w") as f: f.write("{}")
with open(os.path.join(h, ".claude.json")) as f: cfg = json.load(f)
cfg["firstRun"] = False
with open(os.path.join(h, ".claude.json"), "w") as f: json.dump(cfg, f)
print("claude state ok", flush=True)'
lyh_as_user sh -c 'rm -rf ~/.claude ~/.claude.json; cat >~/proj/claude; chmod 755 ~/proj/claude' <<<"$FAKE"
out=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui --narrow-home --cwd "$LYH_HOME/proj" -- ./claude </dev/null 2>&1)
t_check "6: --narrow-home first run without ~/.claude works ($(tail -n 1 <<<"$out"))" grep -qx "claude state ok" <<<"$out"
t_check "6: ... and its state is the user's" eval '[ "$(stat -c %U "$LYH_HOME/.claude.json")" = "$LYH_USER" ] && grep -q firstRun "$LYH_HOME/.claude.json"'
t_check "6: a session started elsewhere gets no note about the home" eval '! grep -q "working directory is your home" <<<"$out"'

# ---- 7. no identity shared across users -------------------------------------------------
echo "# 7. each user's agents have a gid of their own: A's agent cannot read B's agent's files"
A_VARS=("$LYH_USER" "$LYH_UID" "$LYH_GID" "$LYH_HOME")
as_user() { LYH_USER=$1 LYH_UID=$2 LYH_GID=$3 LYH_HOME=$4; }
if lyh_user_create "lyhtb$$"; then
    B_VARS=("$LYH_USER" "$LYH_UID" "$LYH_GID" "$LYH_HOME")
    SHARE=/srv/lyh-share-$$
    MADE+=("$SHARE")
    install -d -m 0755 "$SHARE" && install -d -o "${B_VARS[1]}" -g "${B_VARS[2]}" -m 0755 "$SHARE/b"
    outb=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui --writable "$SHARE/b" -- \
        sh -c "umask 007; echo secret >$SHARE/b/s660; chmod 640 $SHARE/b/s660; cp $SHARE/b/s660 $SHARE/b/s640; id -g" </dev/null 2>&1)
    B_AGENT=$(grep -E "^[0-9]+$" <<<"$outb" | tail -n 1) # lyh's notes share the output
    as_user "${A_VARS[@]}"
    chmod 660 "$SHARE/b/s660"
    outa=$(LYH_CMD_TIMEOUT=60 lyh_cli run --vpn tun0 --no-tui --read-only "$SHARE/b" -- \
        sh -c "cat $SHARE/b/s640 2>&1; echo more >>$SHARE/b/s660 2>&1; cat $SHARE/b/s660 2>&1; id -g" </dev/null 2>&1)
    A_AGENT=$(grep -E "^[0-9]+$" <<<"$outa" | tail -n 1)
    echo "$outa" | sed 's/^/#   A: /'
    t_check "7: B's agent has a guard gid of B's own ($B_AGENT)" lyh_user_guard_gid "$B_AGENT"
    t_check "7: A's agent has another one ($A_AGENT)" eval 'lyh_user_guard_gid "$A_AGENT" && [ "$A_AGENT" != "$B_AGENT" ]'
    t_check "7: B's agent's file belongs to B's agent gid" [ "$(stat -c %g "$SHARE/b/s640")" = "$B_AGENT" ]
    t_check "7: A's agent cannot read B's agent's 0640 file" \
        eval '! grep -q secret <<<"$outa" && grep -q "s640: Permission denied" <<<"$outa"'
    t_check "7: nor append to a 0660 one" eval '[ "$(cat "$SHARE/b/s660")" = secret ]'
    out=$(lyh_as_user cat "$SHARE/b/s640" 2>&1)
    t_check "7: (outside lyh, A cannot read it either)" grep -q "Permission denied" <<<"$out"
    gids=$(sqlite3 -cmd '.timeout 5000' "$LYH_DB" "select uid || ':' || gid from guard_gids order by uid" 2>&1)
    t_check "7: state.db keeps one gid per user ($(tr '\n' ' ' <<<"$gids"))" \
        eval 'grep -qx "${A_VARS[1]}:$A_AGENT" <<<"$gids" && grep -qx "${B_VARS[1]}:$B_AGENT" <<<"$gids"'
else
    t_fail "7: a second test user" "useradd failed"
fi
as_user "${A_VARS[@]}"

# A session started while servers are allowed keeps its seccomp filter: a
# lyhd that cannot keep the network off them any more (here --no-cgroup)
# must end it at startup, not adopt it.
LYH_CMD_TIMEOUT=90 lyh_cli run --vpn tun0 --no-tui -- /bin/sleep 60 </dev/null >"$LYH_TMP/sleeper.out" 2>&1 &
lyh_track_pid "$!"
sleeper_pid() { sqlite3 -cmd '.timeout 5000' "$LYH_DB" "select pid from sessions where argv0 like '%sleep' and state <> 4 order by started_ms desc limit 1" 2>/dev/null; }
lyh_wait_until 10 eval '[ -n "$(sleeper_pid)" ]'
SLEEPER=$(sleeper_pid)

lyh_daemon_stop

# Without cgroup v2 lyhd cannot tell a session's sockets from others': servers
# stay denied, and lyh run says why.
echo "# 4b. where the firewall cannot keep the network off, servers stay denied"
lyh_daemon_start --no-cgroup || lyh_die "lyhd --no-cgroup does not start"
if [ -n "$SLEEPER" ]; then
    lyh_wait_until 5 eval '! kill -0 "$SLEEPER" 2>/dev/null'
    t_check "4b: a running session that may listen is ended, not adopted" eval '! kill -0 "$SLEEPER" 2>/dev/null'
    t_check "4b: ... and lyhd says why" grep -q "may run servers, and this lyhd cannot keep the network from them" "$LYH_DAEMON_LOG"
else
    t_fail "4b: a running session to re-adopt" "no live session row for the sleeper: $(cat "$LYH_TMP/sleeper.out")"
fi
out=$(in_session /usr/bin/python3 -c 'import socket, errno
s = socket.socket()
try:
    s.bind(("0.0.0.0", 0)); s.listen(1); print("bound")
except OSError as e:
    print("bind:", errno.errorcode.get(e.errno, e.errno))')
t_check "4b: bind is refused (EPERM)" grep -qx "bind: EPERM" <<<"$out"
t_check "4b: lyh run says why" grep -q "cannot run local servers on this host" <<<"$out"
no_listeners() { ! lyh_in_main "$LYH_LYH" --socket "$LYH_SOCK" capabilities | grep -q '^features:.* listeners\b'; }
t_check "4b: lyhd does not report the listeners feature" no_listeners
lyh_daemon_stop
t_done
