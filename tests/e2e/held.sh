#!/usr/bin/env bash
# End-to-end test of background sessions (lyh run -d/--name, lyh attach, ls,
# kill) through the real lyhd, nftables, Landlock and seccomp, on terminals
# tmux makes: detach and attach again with the output of meanwhile replayed
# (more than 128 KiB of it, and no more than the holder keeps), the window
# size, two sessions switched with the prefix key, the exit status through an
# attached terminal, another user and the sandboxed agent itself refused,
# root watching read-only, and lyhd stopped and restarted (SIGTERM and kill
# -9) while a terminal is attached and while none is: the agent runs on and
# is attachable again. A plain `lyh run` on a terminal survives a restart too.
#
# usage: held.sh BUILD_DIR     (as root; exits 77 = skipped otherwise)
# Network, daemon, user and safety rules come from lib.sh (read its header).
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: held.sh needs root"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
lyh_init "${1:-}"
command -v tmux >/dev/null 2>&1 || lyh_skip "tmux not installed"

P="lyhth-$$"
lyh_layout_up "$P" tun0 || lyh_die "network layout"
lyh_user_create || lyh_die "cannot create the test user"
lyh_daemon_start || lyh_die "lyhd does not start"
AGENT=$(lyh_user_install "$HERE/held_agent.sh" held_agent.sh) || lyh_die "cannot install the agent"
HDIR=/tmp/lyh-$LYH_UID # the test user's session directory

# The test user's tmux (its socket in the user's home) and root's (in ours).
TM=(tmux -f /dev/null -S "$LYH_HOME/tmux.sock")
TR=(tmux -f /dev/null -S "$LYH_TMP/tmux-root.sock")
cleanup_held() {
    lyh_as_user "${TM[@]}" kill-server >/dev/null 2>&1
    "${TR[@]}" kill-server >/dev/null 2>&1
    # the holders this test's user started (a user this test made, by name)
    pkill -KILL -u "$LYH_USER" -x lyh 2>/dev/null
    [ -d "$HDIR" ] && [ "$(stat -c %U "$HDIR")" = "$LYH_USER" ] && rm -rf "$HDIR"
}
lyh_on_cleanup cleanup_held

start_d() { # NAME [ARGS...]: lyh run -d --name NAME ... the agent NAME; output, then rc=
    local n=$1
    shift
    lyh_cli run -d --name "$n" --vpn tun0 "$@" -- /bin/sh "$AGENT" "$n" </dev/null 2>&1
    echo "rc=$?"
}
pane() { lyh_as_user "${TM[@]}" capture-pane -p -J -S - -t "$1" 2>/dev/null; }
keys() { # WINDOW KEYS...: tmux send-keys (as the user)
    local w=$1
    shift
    lyh_as_user "${TM[@]}" send-keys -t "$w" "$@"
}
line() { keys "$1" -l "$2"; keys "$1" Enter; } # WINDOW TEXT: a line typed
detach() { keys "$1" 'C-\'; keys "$1" d; }
attach_in() { # WINDOW CMD: a new tmux window (120x40) running CMD; its status to WINDOW.rc
    rm -f "$LYH_HOME/$1.rc"
    lyh_as_user "${TM[@]}" new-session -d -s "$1" -x 120 -y 40 \
        "$2; echo rc=\$? >$LYH_HOME/$1.rc; sleep 600" || lyh_die "cannot start tmux"
}
pane_has() { pane "$1" | grep -q -- "$2"; }
ls_json() { lyh_cli ls --json 2>&1; }
LYHC="$LYH_LYH --socket $LYH_SOCK"

# ---- 1. start in the background --------------------------------------------------------------
echo "# 1. lyh run -d --name: started, listed, running with no terminal"
res=$(start_d a)
printf '%s\n' "$res" | sed 's/^/  | /'
t_check "1: lyh run -d exits 0 and says how to attach" \
    eval 'grep -qx "rc=0" <<<"$res" && grep -q "session '"'a'"' runs in the background: lyh attach a" <<<"$res"'
t_check "1: lyh ls lists it, detached, with lyhd's session id and the command" \
    eval 'ls_json | grep -q "\"name\":\"a\",\"session\":\"[0-9a-f]\{16\}\".*\"attached\":false.*\"command\":\"/bin/sh $AGENT a\""'
sid_a=$(ls_json | sed -n 's/.*"name":"a","session":"\([0-9a-f]*\)".*/\1/p')
t_check "1: lyhd runs that session" eval "lyh_cli sessions | grep -q '^$sid_a '"
t_check "1: the socket directory is the user's, 0700" \
    eval '[ "$(stat -c "%U %a" "$HDIR")" = "$LYH_USER 700" ] && [ -S "$HDIR/a.sock" ]'
res=$(start_d a)
t_check "1: a second session of the same name is refused, and says why" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "a session named '"'a'"' is running" <<<"$res"'
res=$(start_d ../x)
t_check "1: a name that is not one is refused" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "a session name is 1 to 32" <<<"$res"'
res=$(lyh_cli run -d --no-tui --vpn tun0 -- /bin/true 2>&1 </dev/null; echo "rc=$?")
t_check "1: -d with --no-tui is refused" grep -q "contradict" <<<"$res"
# stdin, stdout and stderr closed: the holder's fds must not become its stdio
lyh_as_user sh -c "$LYH_LYH --socket $LYH_SOCK run -d --name closed --vpn tun0 -- /bin/sh $AGENT closed <&- >&- 2>&-"
t_check "1: started with stdio closed, the session still answers lyh ls" \
    lyh_wait_until 10 eval 'ls_json | grep -q "\"name\":\"closed\""'
res=$(lyh_cli kill closed 2>&1; echo "rc=$?")
t_check "1: ... and ends with lyh kill" eval 'grep -qx "rc=0" <<<"$res" && lyh_wait_until 10 sh -c "! test -e $HDIR/closed.sock"'

# ---- 2. attach: replay, keys, size, detach ---------------------------------------------------
echo "# 2. lyh attach: what was printed meanwhile, the keys, the size, Ctrl-\\ d"
attach_in t1 "$LYHC attach a"
lyh_wait_until 10 pane_has t1 "a agent-start"
t_check "2: the output of before the attach is shown (scrollback)" pane_has t1 "a agent-start"
line t1 "hello"
t_check "2: a line typed reaches the agent" lyh_wait_until 10 pane_has t1 "a got: hello"
t_check "2: lyh ls says attached" \
    lyh_wait_until 5 eval 'ls_json | grep -q "\"name\":\"a\".*\"attached\":true"'
line t1 "size"
t_check "2: the agent's pty has the terminal's size (40x120)" lyh_wait_until 10 pane_has t1 "a size 40 120"
lyh_as_user "${TM[@]}" resize-window -t t1 -x 100 -y 30 >/dev/null 2>&1
sleep 0.5
line t1 "size"
t_check "2: ... and follows it when it changes (30x100)" lyh_wait_until 10 pane_has t1 "a size 30 100"
detach t1
t_check "2: Ctrl-\\ d detaches, exit status 0" \
    eval 'lyh_wait_until 10 grep -qx "rc=0" "$LYH_HOME/t1.rc" && pane_has t1 "detached from '"'a'"'"'
t_check "2: the session runs on, detached" eval 'ls_json | grep -q "\"name\":\"a\".*\"attached\":false"'

# a terminal that takes no output (stdout a pipe nobody reads) holds nothing up
attach_in stuck "$LYHC attach --read-only a | sleep 600"
sleep 1
attach_in t1b "$LYHC attach a"
lyh_wait_until 10 pane_has t1b "a got: hello"
line t1b "huge" # more than its socket and the ring hold
sleep 4
line t1b "ping"
t_check "2: a terminal that reads nothing does not hold up the agent or the others" \
    lyh_wait_until 10 pane_has t1b "a got: ping"
t_check "2: ... nor lyh ls" lyh_wait_until 5 eval 'ls_json | grep -q "\"name\":\"a\""'
lyh_as_user "${TM[@]}" kill-session -t stuck >/dev/null 2>&1
detach t1b
lyh_wait_until 10 test -s "$LYH_HOME/t1b.rc"

# ---- 3. more than 128 KiB while detached -----------------------------------------------------
echo "# 3. scrollback: > 128 KiB printed while detached comes back on attach"
attach_in t2 "$LYHC attach a"
lyh_wait_until 10 pane_has t2 "a got: ping"
line t2 "big"
detach t2
lyh_wait_until 10 test -s "$LYH_HOME/t2.rc"
sleep 3 # the agent prints ~222 KB after a second
# attach with stdout to a file (stdin is the terminal): all of the replay
attach_in t3 "$LYHC attach --read-only a >$LYH_HOME/replay.out"
lyh_wait_until 20 grep -q "a big-done" "$LYH_HOME/replay.out"
detach t3
lyh_wait_until 10 test -s "$LYH_HOME/t3.rc"
nbig=$(tr -d '\r' <"$LYH_HOME/replay.out" | grep -c '^big-[0-9]\{6\}-x*$')
bytes=$(tr -d '\r' <"$LYH_HOME/replay.out" | grep '^big-' | wc -c)
echo "  replay: $nbig lines, $bytes bytes of them"
t_check "3: all 6000 lines (>= 128 KiB) printed while detached were replayed, in order" \
    eval '[ "$nbig" = 6000 ] && [ "$bytes" -ge 131072 ] &&
          tr -d "\r" <"$LYH_HOME/replay.out" | grep "^big-" | sort -c'
attach_in t4 "$LYHC attach a"
lyh_wait_until 10 pane_has t4 "a big-done"
line t4 "huge"
detach t4
lyh_wait_until 10 test -s "$LYH_HOME/t4.rc"
sleep 4
attach_in t5 "$LYHC attach --read-only a >$LYH_HOME/replay2.out"
lyh_wait_until 20 grep -q "a huge-done" "$LYH_HOME/replay2.out"
detach t5
lyh_wait_until 10 test -s "$LYH_HOME/t5.rc"
first=$(tr -d '\r' <"$LYH_HOME/replay2.out" | grep -m1 -o '^[a-z]*-[0-9]*' )
nhuge=$(tr -d '\r' <"$LYH_HOME/replay2.out" | grep -c '^huge-[0-9]\{6\}-x*$')
bytes=$(wc -c <"$LYH_HOME/replay2.out")
echo "  replay of a ring that wrapped: $bytes bytes, first line $first, $nhuge huge lines"
t_check "3: when more was printed than the holder keeps: the newest 256 KiB, from a line start" \
    eval '[ "$bytes" -le 270000 ] && [ "$bytes" -ge 250000 ] && [ "$nhuge" -ge 6000 ] &&
          tr -d "\r" <"$LYH_HOME/replay2.out" | grep -q "^huge-012000-" &&
          tr -d "\r" <"$LYH_HOME/replay2.out" | head -n 1 | grep -q "^huge-[0-9]\{6\}-x*$"'

# ---- 4. two sessions, switched ---------------------------------------------------------------
echo "# 4. Ctrl-\\ n / p switch between sessions"
res=$(start_d b)
t_check "4: a second session, b, starts" grep -qx "rc=0" <<<"$res"
attach_in t6 "$LYHC attach a"
lyh_wait_until 10 pane_has t6 "a huge-done"
keys t6 'C-\'
keys t6 n
lyh_wait_until 10 pane_has t6 "b agent-start"
line t6 "to-b"
t_check "4: Ctrl-\\ n: the next session (b) gets the keys" lyh_wait_until 10 pane_has t6 "b got: to-b"
keys t6 'C-\'
keys t6 p
sleep 1
line t6 "to-a"
t_check "4: Ctrl-\\ p: back to a" lyh_wait_until 10 pane_has t6 "a got: to-a"
detach t6

# ---- 5. who may attach -----------------------------------------------------------------------
echo "# 5. another user, the agent itself, root"
U1=$LYH_USER U1ID=$LYH_UID U1GID=$LYH_GID U1HOME=$LYH_HOME
lyh_user_create "lyht2$$" || lyh_die "cannot create the second user"
res=$(lyh_as_user "$LYH_LYH" attach --user "$U1" a 2>&1 </dev/null; echo "rc=$?")
t_check "5: another user cannot name the owner's sessions (--user is root's)" \
    eval 'grep -q "only root looks at another user" <<<"$res" && ! grep -qx "rc=0" <<<"$res"'
res=$(lyh_as_user /usr/bin/python3 -c '
import socket,sys
s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    s.connect(sys.argv[1]); print("connected")
except OSError as e:
    print("refused", e.errno)' "$HDIR/a.sock" 2>&1)
t_check "5: ... nor reach the socket (the directory is the owner's alone)" grep -q "^refused 13" <<<"$res"
LYH_USER=$U1 LYH_UID=$U1ID LYH_GID=$U1GID LYH_HOME=$U1HOME
# the agent, inside the sandbox: the user's /tmp is not its /tmp
res=$(lyh_cli run --no-tui --vpn tun0 -- /usr/bin/python3 -c '
import socket,sys
s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    s.connect(sys.argv[1]); s.send(bytes([5])); print("answer", s.recv(100))
except OSError as e:
    print("refused", e.errno)' "$HDIR/a.sock" 2>&1 </dev/null)
t_check "5: a sandboxed agent of the same user does not even see the socket" grep -q "^refused 2" <<<"$res"
# ... and were it shown the socket, the holder refuses a peer with the guard gid
res=$(lyh_cli run --no-tui --vpn tun0 --allow-socket "$HDIR/a.sock" -- /usr/bin/python3 -c '
import socket,sys,os
s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    s.connect(sys.argv[1]); s.send(bytes([5])); s.settimeout(3); print("answer", len(s.recv(200)), os.getgid())
except OSError as e:
    print("refused", e.errno)' "$HDIR/a.sock" 2>&1 </dev/null)
printf '%s\n' "$res" | sed 's/^/  | /'
t_check "5: a sandboxed peer (guard gid) gets no answer from the holder" \
    eval '! grep -q "^answer [1-9]" <<<"$res"'
"${TR[@]}" new-session -d -s r -x 120 -y 40 \
    "$LYH_LYH attach --user $LYH_USER a; echo rc=\$? >$LYH_TMP/r.rc; sleep 600" || lyh_die "root's tmux"
lyh_wait_until 10 eval '"${TR[@]}" capture-pane -p -t r | grep -q "a got"'
"${TR[@]}" send-keys -t r -l "from-root"
"${TR[@]}" send-keys -t r Enter
sleep 1
t_check "5: root watches (--user): the agent's output reaches it" \
    eval '"${TR[@]}" capture-pane -p -J -S - -t r | grep -q "a got: to-a"'
t_check "5: ... but its keys do not reach the agent" eval '! "${TR[@]}" capture-pane -p -J -S - -t r | grep -q "from-root"'
"${TR[@]}" send-keys -t r 'C-\'
"${TR[@]}" send-keys -t r d
lyh_wait_until 10 test -s "$LYH_TMP/r.rc"

# ---- 6. lyhd restarts --------------------------------------------------------------------------
echo "# 6. lyhd stops and starts again, with a terminal attached and without"
attach_in t7 "$LYHC attach a"
lyh_wait_until 10 pane_has t7 "a got: to-a"
lyh_daemon_stop || t_fail "6: lyhd stops on SIGTERM" "see above"
t_check "6: the attached terminal is told lyhd went away" \
    lyh_wait_until 10 pane_has t7 "lost contact with lyhd"
line t7 "while-down"
t_check "6: the agent runs on while lyhd is down (it answers)" lyh_wait_until 10 pane_has t7 "a got: while-down"
lyh_daemon_start || lyh_die "lyhd does not restart"
t_check "6: the restarted lyhd re-adopts both sessions" \
    eval 'lyh_daemon_log_has "re-adopted running session .$sid_a." 10'
line t7 "after-restart"
t_check "6: the same terminal goes on with the agent after the restart" \
    lyh_wait_until 10 pane_has t7 "a got: after-restart"
detach t7
lyh_wait_until 10 test -s "$LYH_HOME/t7.rc"
lyh_daemon_kill9
lyh_daemon_start || lyh_die "lyhd does not restart after kill -9"
attach_in t8 "$LYHC attach b"
t_check "6: after kill -9 and a restart, a detached session is attachable again" \
    lyh_wait_until 10 pane_has t8 "b got: to-b"
t_check "6: ... and says lyhd restarted while it ran" lyh_wait_until 5 pane_has t8 "lyhd restarted while"
line t8 "exit 3"
t_check "6: its end after the restart: status unknown, said so (125)" \
    eval 'lyh_wait_until 15 grep -qx "rc=125" "$LYH_HOME/t8.rc" && pane_has t8 "exit status is unknown"'
t_check "6: ... its holder is gone with it" eval 'lyh_wait_until 5 sh -c "! test -e $HDIR/b.sock"'

# ---- 7. kill, and the status through an attached terminal -------------------------------------
echo "# 7. lyh kill; lyh run --name attached here, with the agent's exit status"
res=$(lyh_cli kill --grace 2 a 2>&1; echo "rc=$?")
t_check "7: lyh kill a ends it (0)" grep -qx "rc=0" <<<"$res"
t_check "7: ... gone from lyh ls and from lyhd's sessions, its socket removed" \
    eval 'lyh_wait_until 10 sh -c "! test -e $HDIR/a.sock" && ! ls_json | grep -q "\"name\":\"a\"" &&
          ! lyh_cli sessions | grep -q "^$sid_a "'
res=$(lyh_cli kill a 2>&1; echo "rc=$?")
t_check "7: lyh kill of no such session: a usage error that says so" \
    eval 'grep -qx "rc=2" <<<"$res" && grep -q "no such session" <<<"$res"'
attach_in t9 "cd $LYH_HOME && $LYHC run --name c --vpn tun0 -- /bin/sh $AGENT c"
lyh_wait_until 15 pane_has t9 "c agent-start"
line t9 "exit 7"
t_check "7: lyh run --name on a terminal exits with the agent's status (7)" \
    lyh_wait_until 15 grep -qx "rc=7" "$LYH_HOME/t9.rc"

# ---- 8. a plain lyh run on a terminal survives a restart too -----------------------------------
echo "# 8. plain lyh run (no --name) across a restart of lyhd"
attach_in t10 "cd $LYH_HOME && $LYHC run --vpn tun0 -- /bin/sh $AGENT p"
lyh_wait_until 15 pane_has t10 "p agent-start"
lyh_daemon_stop || t_fail "8: lyhd stops on SIGTERM" "see above"
t_check "8: lyh run says it lost lyhd and stays" lyh_wait_until 10 pane_has t10 "the agent runs on, guarded"
line t10 "still-here"
t_check "8: the agent keeps its terminal" lyh_wait_until 10 pane_has t10 "p got: still-here"
lyh_daemon_start || lyh_die "lyhd does not restart"
line t10 "exit 4"
t_check "8: its end: lyh says the status is unknown and exits 125" \
    eval 'lyh_wait_until 15 grep -qx "rc=125" "$LYH_HOME/t10.rc" && pane_has t10 "exit status is unknown"'

# ---- 9. nothing left ---------------------------------------------------------------------------
echo "# 9. nothing left behind"
t_check "9: no holder process of the user is left" \
    lyh_wait_until 10 eval '! pgrep -u "$LYH_USER" -x lyh >/dev/null'
t_check "9: no socket is left in the session directory" \
    eval '[ -z "$(ls -A "$HDIR" 2>/dev/null)" ]'
if lyh_wait_until 10 eval 'lyh_cli sessions 2>/dev/null | grep -q "(no running sessions)"'; then
    t_pass "9: lyhd runs no session"
else
    t_fail "9: lyhd runs no session" "$(lyh_cli sessions 2>&1; tail -n 20 "$LYH_DAEMON_LOG")"
fi
san=""
for w in $(lyh_as_user "${TM[@]}" list-sessions -F '#S' 2>/dev/null); do
    pane "$w" | grep -q "Sanitizer" && san+="$w "
done
t_check "9: no sanitizer report on any terminal (lyh run, lyh attach)" [ -z "$san" ]
lyh_daemon_stop
t_done
exit $?
