#!/bin/bash
# Run a command against a throwaway lyhd.
#
# usage: run_with_lyhd.sh LYHD COMMAND [ARGS...]
#
# Starts LYHD, in a throwaway network namespace, on a socket and state dir in
# a fresh temp dir, waits (bounded) until it is listening, runs COMMAND with
# every "@SOCKET@" in its arguments replaced by the socket path, then stops
# lyhd with SIGTERM (by its pid) and checks that it exited 0, unlinked its
# socket and left no sanitizer report.
# Exits with COMMAND's status, or 1 if COMMAND passed but lyhd misbehaved.
set -u

if [ $# -lt 2 ]; then
    echo "usage: $0 LYHD COMMAND [ARGS...]" >&2
    exit 2
fi
lyhd=$1
shift

tmp=$(mktemp -d /tmp/lyhd-run.XXXXXX) || exit 1
sock=$tmp/lyhd.sock
log=$tmp/lyhd.log
pid=

# Running and not a zombie (kill -0 also succeeds on an unreaped child).
alive() {
    local st
    st=$(sed -n 's/^.*) \(.\).*$/\1/p' "/proc/$1/stat" 2>/dev/null)
    [ -n "$st" ] && [ "$st" != Z ]
}

# lyhd creates the user of its protocol process (_lyhd) and the guard group
# (_lianyaohu) when missing: what it made here goes again
puser_existed=0 group_existed=0
getent passwd _lyhd >/dev/null 2>&1 && puser_existed=1
getent group _lianyaohu >/dev/null 2>&1 && group_existed=1

cleanup() {
    if [ -n "$pid" ] && alive "$pid"; then
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    fi
    rm -rf "$tmp"
    if [ "$puser_existed" = 0 ] && getent passwd _lyhd >/dev/null 2>&1; then
        userdel _lyhd 2>/dev/null
        getent group _lyhd >/dev/null 2>&1 && groupdel _lyhd 2>/dev/null
    fi
    if [ "$group_existed" = 0 ] && getent group _lianyaohu >/dev/null 2>&1; then
        groupdel _lianyaohu 2>/dev/null
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
    echo "run_with_lyhd: $*" >&2
    if [ -f "$log" ]; then
        echo "----- lyhd stderr -----" >&2
        cat "$log" >&2
        echo "----- end -----" >&2
    fi
}

# In a network namespace of its own: lyhd installs its nftables table at
# startup, and a test must not touch the host's firewall. unshare execs lyhd,
# so $! is lyhd's pid.
unshare --net -- "$lyhd" --socket "$sock" --state-dir "$tmp/state" --tmp-dir "$tmp" </dev/null >/dev/null 2>"$log" &
pid=$!

# lyhd logs "listening on" only after bind, listen and registering the
# listener, so from then on a connect is answered. 100 x 50 ms.
ready=
for _ in $(seq 100); do
    if ! alive "$pid"; then
        wait "$pid"
        fail "lyhd exited during startup (status $?)"
        pid=
        exit 1
    fi
    if [ -S "$sock" ] && grep -q "listening on" "$log"; then
        ready=1
        break
    fi
    sleep 0.05
done
if [ -z "$ready" ]; then
    fail "lyhd did not start listening on $sock in 5 s"
    exit 1
fi

args=()
for a in "$@"; do
    args+=("${a//@SOCKET@/$sock}")
done
"${args[@]}"
rc=$?

kill -TERM "$pid"
stopped=
for _ in $(seq 200); do
    if ! alive "$pid"; then
        stopped=1
        break
    fi
    sleep 0.05
done
if [ -z "$stopped" ]; then
    fail "lyhd ignored SIGTERM for 10 s"
    [ "$rc" -ne 0 ] || rc=1
    exit "$rc"
fi
wait "$pid"
lrc=$?
pid=

bad=
if [ "$lrc" -ne 0 ]; then
    bad="lyhd exited $lrc on SIGTERM"
elif [ -e "$sock" ]; then
    bad="lyhd left its socket $sock behind"
elif grep -qE "ERROR: AddressSanitizer|runtime error:|LeakSanitizer" "$log"; then
    bad="lyhd's stderr has a sanitizer report"
fi
if [ -n "$bad" ]; then
    fail "$bad"
    [ "$rc" -ne 0 ] || rc=1
fi
exit "$rc"
