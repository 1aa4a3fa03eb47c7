#!/usr/bin/env bash
# End-to-end test of audit fairness for request records: user A floods the
# real lyhd with refused requests (AuditQuery for root's records, one
# connection, thousands a second) while user B makes one refused request.
#   - B's refusal is on record (A's flood does not use up B's budget);
#   - A's flood is bounded in the log, and every refused request of A is
#     either a request record or counted in a gap record about A, exactly
#     (checked in audit.db after an orderly stop, which writes what is left);
#   - A can read the gap records about A; B cannot.
#
# usage: audit_fair.sh BUILD_DIR     (as root; exits 77 = skipped otherwise)
#
# Network, daemon, user and safety rules come from lib.sh (read its header):
# lyhd lives in <p>-main only; this test sends nothing over the network.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: audit_fair.sh needs root"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
lyh_init "${1:-}"
[ -x /usr/bin/python3 ] || lyh_skip "/usr/bin/python3 is not installed"

FLOOD_SECS=4
P="lyhtf-$$"
lyh_layout_up "$P" tun0 || lyh_die "network layout"
lyh_user_create "lyhfa$$" || lyh_die "cannot create user A"
A_UID=$LYH_UID A_GID=$LYH_GID A_HOME=$LYH_HOME
lyh_user_create "lyhfb$$" || lyh_die "cannot create user B"
B_UID=$LYH_UID

# The flood: refused requests on one connection, 64 in flight at a time, for
# SECS seconds (bounded); prints how many were answered PERMISSION_DENIED
# and how many otherwise. Plain sockets and a hand-made protobuf encoding:
# Request{call_id=1, protocol_version=2, audit_query=17{has_uid=4, uid=5}}.
FLOOD=$LYH_TMP/flood.py
cat >"$FLOOD" <<'EOF'
import socket, struct, sys, time

from py_client import recv_exact  # copied beside this file

path, secs = sys.argv[1], float(sys.argv[2])

def varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)

def frame(call_id):
    q = b"\x20\x01\x28\x00"  # has_uid = true, uid = 0: root's records
    body = b"\x08" + varint(call_id) + b"\x10\x01" + b"\x8a\x01" + varint(len(q)) + q
    return struct.pack(">BI", 0, len(body)) + body

def code_of(body):  # field 2 (varint) of Response, 0 when absent
    i = 0
    while i < len(body):
        key, i = read_varint(body, i)
        field, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(body, i)
            if field == 2:
                return v
        elif wt == 2:
            n, i = read_varint(body, i)
            i += n
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        else:
            break
    return 0

def read_varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
s.connect(path)
denied = other = 0
call = 1
end = time.monotonic() + secs
while time.monotonic() < end and call < 10_000_000:
    s.sendall(b"".join(frame(call + k) for k in range(64)))
    call += 64
    for _ in range(64):
        flag, length = struct.unpack(">BI", recv_exact(s, 5))
        if flag != 0 or length > 1 << 20:
            raise ValueError("bad frame header")
        if code_of(recv_exact(s, length)) == 7:
            denied += 1
        else:
            other += 1
s.close()
print(denied, other)
EOF
chmod 0644 "$FLOOD"
install -m 0644 "$HERE/py_client.py" "$LYH_TMP/py_client.py"

# as_a CMD...: run CMD as user A in PREFIX-main, like lyh_as_user does for
# the last user created (which is B).
as_a() {
    (cd "$A_HOME" && exec timeout -k 5 60 nsenter --net="/run/netns/$LYH_MAIN" \
        setpriv --reuid="$A_UID" --regid="$A_GID" --init-groups \
        env -i HOME="$A_HOME" PATH=/usr/bin:/bin LANG=C "$@")
}
q_root() { "$LYH_LYH" --socket "$LYH_SOCK" audit "$@"; }

lyh_daemon_start || lyh_die "lyhd does not start"

# ---- 1. A floods, B makes one refused request in the middle ------------------------------

echo "# 1. user A floods refused requests, user B is refused once meanwhile"
as_a /usr/bin/python3 "$FLOOD" "$LYH_SOCK" "$FLOOD_SECS" >"$LYH_TMP/flood.out" 2>"$LYH_TMP/flood.err" &
FLOOD_PID=$!
lyh_track_pid "$FLOOD_PID"
sleep 1.5
lyh_cli audit query --uid 0 --json >"$LYH_TMP/b.out" 2>&1
rc=$?
if [ "$rc" = 1 ] && grep -qi "own uid" "$LYH_TMP/b.out"; then
    t_pass "1: B's request for root's records is refused"
else
    t_fail "1: B's request for root's records is refused" "rc=$rc $(cat "$LYH_TMP/b.out")"
fi
lyh_wait_pid_gone $((FLOOD_SECS + 30)) "$FLOOD_PID" || t_fail "1: the flood ends"
wait "$FLOOD_PID" 2>/dev/null
read -r A_DENIED A_OTHER <"$LYH_TMP/flood.out" 2>/dev/null
A_DENIED=${A_DENIED:-0} A_OTHER=${A_OTHER:-x}
if [ "$A_DENIED" -ge 1000 ] && [ "$A_OTHER" = 0 ]; then
    t_pass "1: A's flood: $A_DENIED refused requests in ${FLOOD_SECS} s"
else
    t_fail "1: A's flood: refused requests" "denied=$A_DENIED other=$A_OTHER $(head -c 300 "$LYH_TMP/flood.err")"
fi

# ---- 2. what each user sees -----------------------------------------------------------------

echo "# 2. B's refusal is on record; A sees its own gap; B does not"
lyh_wait_until 5 sh -c "'$LYH_LYH' --socket '$LYH_SOCK' audit query --kind request --uid $B_UID --json | grep -q refused"
q_root query --kind request --uid "$B_UID" --json >"$LYH_TMP/b_req.jsonl"
t_eq "2: B's one refused request is recorded despite A's flood" \
    "$(grep -c '"refused"' "$LYH_TMP/b_req.jsonl")" 1
# The rate limit reports a uid's drops a second after the first of them.
lyh_wait_until 5 sh -c "'$LYH_LYH' --socket '$LYH_SOCK' audit query --kind gap --uid $A_UID --json | grep -q '\"requests\"'"
as_a "$LYH_LYH" --socket "$LYH_SOCK" audit query --kind gap --json >"$LYH_TMP/a_gap.jsonl" 2>&1
if grep -q "\"action\":\"requests\".*\"uid\":$A_UID" "$LYH_TMP/a_gap.jsonl" &&
    grep -q 'dropped_by_uid_limit=' "$LYH_TMP/a_gap.jsonl"; then
    t_pass "2: A reads the gap records about A's dropped request records"
else
    t_fail "2: A reads the gap records about A's dropped request records" "$(head -c 600 "$LYH_TMP/a_gap.jsonl")"
fi
lyh_cli audit query --kind gap --json >"$LYH_TMP/b_gap.jsonl" 2>&1
if grep -q "\"uid\":$A_UID" "$LYH_TMP/b_gap.jsonl"; then
    t_fail "2: B does not see A's gap records" "$(head -c 600 "$LYH_TMP/b_gap.jsonl")"
else
    t_pass "2: B does not see A's gap records"
fi

# ---- 3. nothing lost silently: exact, after an orderly stop ----------------------------------

echo "# 3. every refused request of A is a record or counted in a gap about A"
lyh_daemon_stop
DB=$LYH_STATE/audit.db
a_rec=$(sqlite3 "$DB" "SELECT count(*) FROM events WHERE kind = 4 AND has_uid = 1 AND uid = $A_UID")
a_gap=$(sqlite3 "$DB" "SELECT coalesce(sum(missed), 0) FROM events WHERE kind = 5 AND action = 'requests' AND has_uid = 1 AND uid = $A_UID")
other_gap=$(sqlite3 "$DB" "SELECT coalesce(sum(missed), 0) FROM events WHERE kind = 5 AND action = 'requests' AND has_uid = 0")
t_eq "3: A: $a_rec recorded + $a_gap in gaps about A = $A_DENIED refused" "$((a_rec + a_gap))" "$A_DENIED"
t_eq "3: no request record was counted about no uid" "$other_gap" 0
# 20 at once, then 5/s: the flood did not take the log.
if [ "$a_rec" -ge 20 ] && [ "$a_rec" -le $((20 + 5 * (FLOOD_SECS + 2))) ]; then
    t_pass "3: A's request records are bounded by A's limit ($a_rec)"
else
    t_fail "3: A's request records are bounded by A's limit" "$a_rec records"
fi
t_eq "3: audit.db passes integrity_check" "$(sqlite3 "$DB" 'PRAGMA integrity_check' 2>&1)" ok

t_done
exit $?
