#!/bin/bash
# e2e: what a new user meets first (issue 17), against the real daemon:
#   1. lyh run's exit status: the agent's own passes through; lyh's own
#      failures are 125 (refused), 126 (cannot run), 127 (not found, named);
#      refusals are said in plain words, without gRPC status names
#   2. with two VPN interfaces up and stdin not a terminal, lyh never
#      prompts (stdin is the agent's): it refuses and lists --vpn choices
#   3. everyday commands: lyh stop ID (a unique prefix; SIGTERM, then
#      SIGKILL after --grace; an ambiguous prefix lists the candidates), and
#      lyh audit query --session PREFIX the same way,
#      --socket after the command, "did you mean" for a mistyped command
#   4. interface names: the admin policy decides which are VPNs; by default
#      the common clients' (tailscale0 works), not eth*, and an admin can
#      allow another
#   5. one start line (session, interface, enforcement, DNS, IPv6); the
#      variables the allowlist keeps from the agent are named once at start
#      (never their values); --quiet prints neither
#   6. the picker on a terminal (tmux): a detail pane, an interface lyh run
#      would refuse shown with its fix and not pickable, digits move the
#      marker, s saves the pick as [defaults] vpn_interface, q cancels;
#      --monitor never drawn over the agent; Ctrl-Z and fg
#
# usage: first_hour.sh BUILD_DIR     (as root; exits 77 = skipped otherwise)
# Safety: everything happens in the namespaces lib.sh makes.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: first_hour.sh needs root"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
lyh_init "${1:-}"

P="lyhfh-$$"
lyh_layout_up "$P" tun0 || lyh_die "network layout"
lyh_user_create || lyh_die "cannot create the test user"
lyh_daemon_start || lyh_die "lyhd does not start"
install -d -o "$LYH_UID" -g "$LYH_GID" -m 0700 "$LYH_HOME/proj"

run_rc() { # ARGS...: lyh run as the user from its project; output and "rc=N" last
    LYH_CMD_TIMEOUT=60 lyh_as_user sh -c 'cd proj && exec "$@"' sh "$LYH_LYH" --socket "$LYH_SOCK" \
        run "$@" </dev/null 2>&1
    echo "rc=$?"
}

# ---- 1. exit status ----------------------------------------------------------------------
echo "# 1. lyh run's exit status"
res=$(run_rc --vpn tun0 --no-tui -- /bin/sh -c 'exit 3')
t_check "1: the agent's own status passes through (3)" grep -qx "rc=3" <<<"$res"
res=$(run_rc --vpn tun0 --no-tui -- /bin/sh -c 'exit 125')
t_check "1: ... even when it is 125" grep -qx "rc=125" <<<"$res"
res=$(run_rc --vpn tun0 --no-tui -- no-such-command-lyh)
t_check "1: a command that is not found: 127, and the message names it" \
    eval 'grep -qx "rc=127" <<<"$res" && grep -q "no-such-command-lyh.* not found" <<<"$res"'
lyh_as_user sh -c 'echo "echo hi" >proj/notexec && chmod 0644 proj/notexec'
res=$(run_rc --vpn tun0 --no-tui -- ./notexec)
t_check "1: a command that cannot run (not executable): 126, named" \
    eval 'grep -qx "rc=126" <<<"$res" && grep -q "cannot run .\./notexec.: Permission denied" <<<"$res"'
res=$(run_rc --vpn tunn0 --no-tui -- /bin/true)
t_check "1: a mistyped --vpn: 125, did you mean, and the interfaces there are" \
    eval 'grep -qx "rc=125" <<<"$res" &&
          grep -q "interface .tunn0. does not exist; did you mean .tun0.? (interfaces here: .*tun0" <<<"$res"'
res=$(run_rc --vpn 'no such' --no-tui -- /bin/true)
t_check "1: a bad --vpn: 125" grep -qx "rc=125" <<<"$res"
res=$(run_rc --no-such-option -- /bin/true)
t_check "1: an unknown option: 125" grep -qx "rc=125" <<<"$res"
res=$(run_rc --vnp tun0 -- /bin/true)
t_check "1: a mistyped option: did you mean (125)" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "unknown option .--vnp.; did you mean .--vpn.?" <<<"$res"'
res=$(run_rc --vpn tun0 --no-tui --writable /nonexistent-lyh -- /bin/true)
t_check "1: a request lyhd refuses: 125" grep -qx "rc=125" <<<"$res"
t_check "1: ... said in plain words, without a status name ($(head -n 1 <<<"$res"))" \
    eval 'grep -q "^lyh run: writable path /nonexistent-lyh" <<<"$res" && ! grep -Eq "INVALID_ARGUMENT|FAILED_PRECONDITION|PERMISSION_DENIED" <<<"$res"'
res=$(LYH_CMD_TIMEOUT=20 lyh_as_user "$LYH_LYH" --socket /nonexistent/lyh.sock run --vpn tun0 --no-tui -- /bin/true </dev/null 2>&1; echo "rc=$?")
t_check "1: no daemon: 125" grep -qx "rc=125" <<<"$res"
# a socket that accepts and closes at once, as an ssh forward whose far end
# is gone does
CLOSER="$LYH_HOME/closer.sock"
lyh_as_user /usr/bin/python3 -c 'import socket, sys, time, os
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8)
open(sys.argv[1] + ".up", "w").close(); end = time.time() + 60
while time.time() < end:
    s.settimeout(1)
    try: c, _ = s.accept(); c.close()
    except OSError: pass' "$CLOSER" >/dev/null 2>&1 &
lyh_track_pid "$!"
lyh_wait_until 5 test -e "$CLOSER.up"
res=$(LYH_CMD_TIMEOUT=20 lyh_as_user "$LYH_LYH" --socket "$CLOSER" status </dev/null 2>&1; echo "rc=$?")
t_check "1: a socket that accepts and closes: said so, pointing at an ssh forward (69)" \
    eval 'grep -qx "rc=69" <<<"$res" &&
          grep -q "the socket at $CLOSER accepted the connection but closed it without an answer (an ssh forward" <<<"$res" &&
          ! grep -q "Start it as root" <<<"$res"'
res=$(LYH_CMD_TIMEOUT=20 lyh_as_user "$LYH_LYH" --socket "$CLOSER" run --vpn tun0 --no-tui -- /bin/true </dev/null 2>&1; echo "rc=$?")
t_check "1: ... lyh run too (125)" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "accepted the connection but closed it" <<<"$res"'

# ---- 2. no prompt on a non-terminal --------------------------------------------------------
echo "# 2. two VPN interfaces, stdin a pipe: no prompt"
ip -n "$LYH_MAIN" link add wg0 type veth peer name wgp0 netns "$LYH_EXIT" &&
    ip -n "$LYH_MAIN" addr add 10.88.0.1/30 dev wg0 && ip -n "$LYH_MAIN" link set wg0 up &&
    ip -n "$LYH_EXIT" link set wgp0 up || lyh_die "a second VPN interface"
res=$(printf '1\nhello\n' | LYH_CMD_TIMEOUT=30 lyh_as_user sh -c 'cd proj && exec "$@"' sh "$LYH_LYH" \
    --socket "$LYH_SOCK" run -- cat 2>&1; echo "rc=$?")
echo "$res" | sed 's/^/#   /'
t_check "2: refused (125)" grep -qx "rc=125" <<<"$res"
t_check "2: ... naming the choices as --vpn options" \
    eval 'grep -q -- "--vpn tun0" <<<"$res" && grep -q -- "--vpn wg0" <<<"$res"'
t_check "2: ... and nothing of stdin was read as an answer (no agent ran)" eval '! grep -qx hello <<<"$res"'
res=$(printf 'hello\n' | LYH_CMD_TIMEOUT=30 lyh_as_user sh -c 'cd proj && exec "$@"' sh "$LYH_LYH" \
    --socket "$LYH_SOCK" run --vpn tun0 -- cat 2>/dev/null; echo "rc=$?")
t_check "2: with --vpn, the agent gets all of stdin" eval 'grep -qx hello <<<"$res" && grep -qx "rc=0" <<<"$res"'
res=$(run_rc --vpn wg0 --dns 10.88.0.2 --no-tui -- /bin/true)
t_check "2: wg0 (not the default route): 125, with the reason and both ways out" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "default IPv4 route uses tun0, not wg0; route your VPN as the default" <<<"$res" &&
          grep -q -- "or run with --allow-non-default-route" <<<"$res" && ! grep -q FAILED_PRECONDITION <<<"$res"'

# ---- 3. everyday commands ------------------------------------------------------------------
echo "# 3. lyh stop, options after the command, did you mean"
lyh_u() { # ARGS...: lyh as the user, with its socket given after the command
    local cmd=$1
    shift
    LYH_CMD_TIMEOUT=60 lyh_as_user "$LYH_LYH" "$cmd" --socket "$LYH_SOCK" "$@" </dev/null 2>&1
}
ids() { lyh_u sessions --json | sed -n 's/^{"id":"\([0-9a-f]*\)".*/\1/p'; }
# 17 sessions: two of them share their first digit (16 values)
RUNS=()
for i in $(seq 1 17); do
    (run_rc --vpn tun0 --no-tui -- /bin/sleep 300 >"$LYH_TMP/s$i.out") &
    RUNS+=("$!")
done
lyh_wait_until 60 eval '[ "$(ids | wc -l)" -ge 17 ]'
all=$(ids)
t_check "3: --socket after the command (lyh sessions --socket S): 17 running" \
    eval '[ "$(wc -l <<<"$all")" = 17 ]'
dup=$(cut -c1 <<<"$all" | sort | uniq -d | head -n 1)
res=$(lyh_u stop "$dup"; echo "rc=$?")
t_check "3: an ambiguous prefix ('$dup'): usage error listing the candidates" \
    eval 'grep -qx "rc=2" <<<"$res" && grep -q "names [0-9]* sessions" <<<"$res" &&
          [ "$(grep -o "\b$dup[0-9a-f]\{15\}\b" <<<"$res" | wc -l)" -ge 2 ]'
one=$(head -n 1 <<<"$all")
pre=$one
for k in $(seq 1 16); do # its shortest unique prefix
    [ "$(grep -c "^${one:0:$k}" <<<"$all")" = 1 ] && { pre=${one:0:$k}; break; }
done
res=$(lyh_u stop "$pre"; echo "rc=$?")
t_check "3: lyh stop '$pre' (a unique prefix) ends that session with SIGTERM" \
    eval 'grep -qx "session $one ended (SIGTERM)" <<<"$res" && grep -qx "rc=0" <<<"$res" &&
          ! ids | grep -qx "$one"'
res=$(lyh_u stop "$pre"; echo "rc=$?")
t_check "3: ... stopping it again: no such running session (2)" \
    eval 'grep -qx "rc=2" <<<"$res" && grep -q "no running session of yours is" <<<"$res"'
res=$(lyh_u stop "not-an-id"; echo "rc=$?")
t_check "3: an id that is not hex: usage error" \
    eval 'grep -qx "rc=2" <<<"$res" && grep -q "is not a session id" <<<"$res"'
# an agent that ignores SIGTERM: SIGKILL after the grace
(run_rc --vpn tun0 --no-tui -- /bin/sh -c 'trap "" TERM; while :; do sleep 0.2; done' >"$LYH_TMP/ign.out") &
RUNS+=("$!")
lyh_wait_until 30 eval '[ "$(ids | wc -l)" -ge 17 ]'
ign=$(comm -13 <(sort <<<"$all") <(ids | sort) | head -n 1)
res=$(lyh_u stop --grace 1 "$ign"; echo "rc=$?")
t_check "3: an agent that ignores SIGTERM is killed after --grace 1" \
    eval 'grep -qx "session $ign ended (SIGKILL)" <<<"$res" && grep -qx "rc=0" <<<"$res"'
for id in $(ids); do
    lyh_u stop --grace 0 "$id" >/dev/null
done
lyh_wait_until 30 eval '[ -z "$(ids)" ]'
t_check "3: lyh stop --grace 0 ends every other one at once" eval '[ -z "$(ids)" ]'
# session ids by prefix in the audit log too (the sessions have ended)
res=$(lyh_u audit query --session "${one:0:12}" --kind session; echo "rc=$?")
t_check "3: lyh audit query --session PREFIX: that session's records" \
    eval 'grep -qx "rc=0" <<<"$res" && grep -q "$one" <<<"$res" &&
          [ -z "$(grep -o "\b[0-9a-f]\{16\}\b" <<<"$res" | grep -vx "$one")" ]'
res=$(lyh_u audit query --session "$dup"; echo "rc=$?")
echo "$res" | sed 's/^/    /' | head -n 3
t_check "3: ... an ambiguous one: refused, naming candidates" \
    eval '! grep -qx "rc=0" <<<"$res" && grep -q "is the start of several session ids" <<<"$res" &&
          [ "$(grep -o "\b$dup[0-9a-f]\{15\}\b" <<<"$res" | wc -l)" -ge 2 ]'
alt=${one:0:9}$([ "${one:9:1}" = 0 ] && echo 1 || echo 0)
res=$(lyh_u audit query --session "$alt"; echo "rc=$?")
t_check "3: ... one that matches none: said so, in plain words" \
    eval '! grep -qx "rc=0" <<<"$res" && grep -q "no session of yours starts with .$alt." <<<"$res" &&
          ! grep -q "NOT_FOUND" <<<"$res"'
wait "${RUNS[@]}"
t_check "3: ... and their lyh run ended with the agent's signal (143 SIGTERM, 137 SIGKILL)" \
    eval 'grep -qx "rc=143" "$LYH_TMP/s1.out" || grep -qx "rc=137" "$LYH_TMP/s1.out"'
res=$(LYH_CMD_TIMEOUT=20 lyh_as_user "$LYH_LYH" stauts 2>&1; echo "rc=$?")
t_check "3: a mistyped command: did you mean (2)" \
    eval 'grep -q "unknown command .stauts.; did you mean .status.?" <<<"$res" && grep -qx "rc=2" <<<"$res"'
res=$(LYH_CMD_TIMEOUT=20 lyh_as_user "$LYH_LYH" audit query --sesion 12 2>&1; echo "rc=$?")
t_check "3: ... and a mistyped audit option (2)" \
    eval 'grep -q "did you mean .--session.?" <<<"$res" && grep -qx "rc=2" <<<"$res"'

# ---- 4. interface names --------------------------------------------------------------------
echo "# 4. which interfaces are VPNs: the policy's word"
for ifn in tailscale0:10.89.0.1 eth9:10.90.0.1; do
    n=${ifn%%:*} a=${ifn#*:}
    ip -n "$LYH_MAIN" link add "$n" type veth peer name "p$n" netns "$LYH_EXIT" &&
        ip -n "$LYH_MAIN" addr add "$a/30" dev "$n" && ip -n "$LYH_MAIN" link set "$n" up &&
        ip -n "$LYH_EXIT" link set "p$n" up || lyh_die "interface $n"
done
res=$(run_rc --vpn tailscale0 --allow-non-default-route --dns 10.89.0.2 --no-tui -- /bin/true)
echo "$res" | sed "s/^/    /"
t_check "4: tailscale0 is a VPN by default (runs, 0)" grep -qx "rc=0" <<<"$res"
res=$(run_rc --vpn eth9 --allow-non-default-route --dns 10.90.0.2 --no-tui -- /bin/true)
t_check "4: eth9 is not: refused (125), naming the patterns" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "eth9.*allowed_interface_patterns (tun\*, wg\*, tailscale\*" <<<"$res"'
res=$(run_rc --vpn lo --allow-non-default-route --no-tui -- /bin/true)
echo "$res" | sed "s/^/    /"
t_check "4: lo never is (125)" eval 'grep -qx "rc=125" <<<"$res" && grep -Eq "loopback|does not match" <<<"$res"'
printf 'allowed_interface_patterns = ["eth9"]\n' >"$LYH_TMP/pol.toml"
lyh_in_main "$LYH_LYH" --socket "$LYH_SOCK" policy set "$LYH_TMP/pol.toml" >/dev/null 2>&1 ||
    t_fail "4: policy set" "refused"
res=$(run_rc --vpn eth9 --allow-non-default-route --dns 10.90.0.2 --no-tui -- /bin/true)
t_check "4: an admin who allows eth9: it runs (0)" grep -qx "rc=0" <<<"$res"
res=$(run_rc --allow-non-default-route --dns 10.90.0.2 --no-tui -- /bin/true)
t_check "4: ... and with no --vpn lyh offers the policy's names: eth9 is the only one, taken" \
    eval 'grep -qx "rc=0" <<<"$res" && grep -q "^lyh: session [0-9a-f]* on eth9:" <<<"$res"'
res=$(LYH_CMD_TIMEOUT=30 lyh_cli doctor --json 2>/dev/null)
t_check "4: ... and so does lyh doctor (vpn lists eth9, not tun0)" \
    eval 'jq -r ".checks[] | select(.name == \"vpn\") | .detail" <<<"$res" | grep -q "eth9" &&
          ! jq -r ".checks[] | select(.name == \"vpn\") | .detail" <<<"$res" | grep -q "tun0"'
res=$(run_rc --vpn tun0 --no-tui -- /bin/true)
t_check "4: ... and then tun0 is refused (125)" grep -qx "rc=125" <<<"$res"
printf 'allowed_interface_patterns = ["*"]\n' >"$LYH_TMP/pol.toml"
lyh_in_main "$LYH_LYH" --socket "$LYH_SOCK" policy set "$LYH_TMP/pol.toml" >/dev/null 2>&1 ||
    t_fail "4: policy set (2)" "refused"
res=$(run_rc --vpn lo --allow-non-default-route --dns 10.77.0.2 --no-tui -- /bin/true)
t_check "4: even a policy of '*' never makes lo a VPN (125, says why)" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "loopback interface, not a VPN" <<<"$res"'
: >"$LYH_TMP/pol.toml"
lyh_in_main "$LYH_LYH" --socket "$LYH_SOCK" policy set "$LYH_TMP/pol.toml" >/dev/null 2>&1 ||
    t_fail "4: policy reset" "refused"

# ---- 5. dropped variables, --quiet -----------------------------------------------------------
echo "# 5. what the agent does not get, said once; --quiet"
run_env() { # ARGS...: lyh run with two variables the allowlist does not pass
    LYH_CMD_TIMEOUT=60 lyh_as_user sh -c 'cd proj && exec env GITHUB_TOKEN=topsecret-lyh \
        LYH_TEST_UNLISTED=alsosecret "$@"' sh "$LYH_LYH" --socket "$LYH_SOCK" run "$@" </dev/null
}
aout=$(run_env --vpn tun0 --no-tui -- /usr/bin/env 2>"$LYH_TMP/err5")
err=$(cat "$LYH_TMP/err5")
echo "$err" | sed 's/^/    /'
t_check "5: the note names them, with the count" \
    eval 'grep -q "^lyh: [0-9]* of your environment variables are not passed to the agent.*GITHUB_TOKEN" <<<"$err" &&
          grep -q "LYH_TEST_UNLISTED" <<<"$err"'
t_check "5: one start line: session, interface, Landlock, local servers, DNS, IPv6" \
    eval '[ "$(grep -c "^lyh: session " <<<"$err")" = 1 ] &&
          grep -Eq "^lyh: session [0-9a-f]{16} on tun0: Landlock ABI [0-9]+; (local servers on loopback|no local servers); DNS through lyhd \(asks [0-9a-f.:, ]+\); IPv6 (through tun0|blocked .*)$" <<<"$(tr -d "\r" <<<"$err")"'
t_check "5: ... and no separate IPv6 or DNS note" \
    eval '! grep -q "IPv6 is blocked\|lyhd answers the agent" <<<"$err"'
t_check "5: ... never their values, and the agent has neither" \
    eval '! grep -q "secret" <<<"$err" && ! grep -q "secret" <<<"$aout" && grep -q "^HOME=" <<<"$aout"'
aout=$(run_env --vpn tun0 --no-tui --env GITHUB_TOKEN=given -- /usr/bin/env 2>"$LYH_TMP/err5")
t_check "5: a variable given with --env is passed and not listed as dropped" \
    eval 'grep -qx "GITHUB_TOKEN=given" <<<"$aout" && ! grep -q "GITHUB_TOKEN" "$LYH_TMP/err5"'
aout=$(run_env --vpn tun0 --no-tui --quiet -- /bin/echo agent-ran 2>"$LYH_TMP/err5")
t_check "5: --quiet: the agent runs and lyh prints nothing" \
    eval 'grep -qx "agent-ran" <<<"$aout" && [ ! -s "$LYH_TMP/err5" ]'
# ---- 6. the picker, on a terminal ------------------------------------------------------------
echo "# 6. the picker (tmux): what each interface is, rows lyh would refuse, digits, save as default"
for n in tailscale0 eth9; do ip -n "$LYH_MAIN" link del "$n" 2>/dev/null; done
TM=(tmux -f /dev/null -L lyhfh)
stop_tmux() {
    lyh_as_user "${TM[@]}" kill-server >/dev/null 2>&1
    # the server's socket dir, the test user's own (its uid may be reused later)
    [ -d "/tmp/tmux-$LYH_UID" ] && [ "$(stat -c %U "/tmp/tmux-$LYH_UID")" = "$LYH_USER" ] &&
        rm -rf "/tmp/tmux-$LYH_UID"
}
lyh_on_cleanup stop_tmux
screen() { lyh_as_user "${TM[@]}" capture-pane -p -t pick 2>/dev/null; }
keys() { lyh_as_user "${TM[@]}" send-keys -t pick "$@"; sleep 0.3; }
tm_run() { # ARGS...: lyh run ARGS in a new tmux session "pick", from proj; its status to pick.rc
    rm -f "$LYH_HOME/pick.rc"
    lyh_as_user "${TM[@]}" kill-session -t pick 2>/dev/null
    lyh_as_user "${TM[@]}" new-session -d -s pick -x 160 -y 40 \
        "cd proj && $LYH_LYH --socket $LYH_SOCK run $*; echo rc=\$? >$LYH_HOME/pick.rc; sleep 60" ||
        lyh_die "cannot start tmux"
}
CONF="$LYH_HOME/.config/lianyaohu/config.toml"
rm -f "$CONF"
tm_run -- /bin/echo agent-picked
lyh_wait_until 10 eval 'screen | grep -q "Pick the VPN interface"'
scr=$(screen)
echo "$scr" | sed -n '1,12p' | sed 's/^/    | /'
t_check "6: both interfaces listed, the marker on the first (tun0)" \
    eval 'grep -q "^> 1) tun0 .*IPv4 default" <<<"$scr" && grep -q "^  2) wg0 " <<<"$scr"'
t_check "6: wg0 (no default route) is shown as one lyh run cannot use" \
    grep -q "2) wg0 .*cannot be used: not the IPv4 default route" <<<"$scr"
t_check "6: the detail pane: tun0's address, its routes, a resolver line" \
    eval 'grep -q "tun0: 10.77.0.1" <<<"$scr" && grep -q "IPv4 .*carries the default route" <<<"$scr" &&
          grep -q "resolver " <<<"$scr"'
keys 2
scr=$(screen)
t_check "6: a digit moves the marker (and runs nothing)" \
    eval 'grep -q "^> 2) wg0" <<<"$scr" && grep -q "wg0: 10.88.0.1" <<<"$scr" && [ ! -e "$LYH_HOME/pick.rc" ]'
t_check "6: ... the pane says why wg0 cannot be used and what to do" \
    eval 'grep -q "lyh run refuses wg0" <<<"$scr" && grep -q -- "--allow-non-default-route" <<<"$scr"'
keys Enter
t_check "6: Enter on wg0 picks nothing: the picker stays" \
    eval 'screen | grep -q "^> 2) wg0" && [ ! -e "$LYH_HOME/pick.rc" ]'
keys Up
keys s
lyh_wait_until 20 test -s "$LYH_HOME/pick.rc"
scr=$(screen)
echo "$scr" | grep -v '^$' | tail -n 4 | sed 's/^/    | /'
t_check "6: s on tun0 runs the agent there (0)" \
    eval 'grep -qx "rc=0" "$LYH_HOME/pick.rc" && grep -q "agent-picked" <<<"$scr"'
t_check "6: ... and saves it as the default, saying where" \
    eval 'grep -qx "vpn_interface = \"tun0\"" "$CONF" && grep -q "^\[defaults\]" "$CONF" &&
          grep -q "saved vpn_interface = \"tun0\"" <<<"$scr"'
res=$(run_rc -- /bin/echo by-default)
t_check "6: the next lyh run, stdin not a terminal, takes the saved default without asking" \
    eval 'grep -qx "by-default" <<<"$res" && grep -qx "rc=0" <<<"$res"'
rm -f "$CONF"
tm_run -- /bin/echo agent-picked
lyh_wait_until 10 eval 'screen | grep -q "Pick the VPN interface"'
keys q
lyh_wait_until 10 test -s "$LYH_HOME/pick.rc"
scr=$(screen)
t_check "6: q cancels: nothing ran, lyh's own status (125), nothing saved" \
    eval 'grep -qx "rc=125" "$LYH_HOME/pick.rc" && grep -q "lyh: cancelled" <<<"$scr" &&
          ! grep -q "agent-picked" <<<"$scr" && [ ! -e "$CONF" ]'

# the picker's last row: proxy-only, which asks for the proxy on the terminal
tm_run -- /bin/echo agent-none
lyh_wait_until 10 eval 'screen | grep -q "Pick the VPN interface"'
keys 3
scr=$(screen)
t_check "6: the picker offers none (proxy-only) last, with its own pane" \
    eval 'grep -q "^> 3) none .*proxy-only: no VPN" <<<"$scr" && grep -q "none: proxy-only mode" <<<"$scr"'
keys Enter
lyh_wait_until 10 eval 'screen | grep -q "Proxy URL"'
keys "socks5h://127.0.0.1:1080" Enter
lyh_wait_until 20 test -s "$LYH_HOME/pick.rc"
scr=$(screen)
echo "$scr" | grep "lyh: session" | sed 's/^/    | /'
t_check "6: ... Enter asks for the proxy on the terminal, and the agent runs proxy-only through it" \
    eval 'grep -qx "rc=0" "$LYH_HOME/pick.rc" && grep -q "agent-none" <<<"$scr" &&
          grep -q "proxy-only through 127.0.0.1:1080" <<<"$scr" && [ ! -e "$CONF" ]'

# --monitor in a terminal session: never drawn over the agent's screen
echo "# 6b. --monitor in a terminal session"
PROBE='import socket, time
s = socket.socket(); s.settimeout(2)
try: s.connect(("192.168.77.2", 80))
except OSError as e: print("probe refused", e.errno, flush=True)
time.sleep(4); print("agent done", flush=True)'
printf '%s\n' "$PROBE" >"$LYH_TMP/probe.py"
PROBE_PY=$(lyh_user_install "$LYH_TMP/probe.py" probe.py) || lyh_die "cannot install probe.py"
rm -f "$LYH_HOME/mon.log"
tm_run --vpn tun0 --monitor -- /usr/bin/python3 "$PROBE_PY"
lyh_wait_until 15 eval 'screen | grep -q "probe refused"'
sleep 1.5 # the refused flow's record has reached lyh by now (the agent sleeps on)
during=$(screen)
lyh_wait_until 15 test -s "$LYH_HOME/pick.rc"
after=$(screen)
echo "$after" | grep "lyh: " | sed 's/^/    | /'
t_check "6b: in a terminal session too, one start line (session, interface, Landlock, DNS)" \
    eval '[ "$(grep -c "^lyh: session [0-9a-f]\{16\} on tun0: Landlock ABI [0-9]*; .*DNS through lyhd" <<<"$during")" = 1 ]'
t_check "6b: while the agent runs, --monitor draws nothing on its terminal" \
    eval 'grep -q "probe refused" <<<"$during" && ! grep -q "192.168.77.2" <<<"$during" &&
          grep -q "refused flows are listed when the agent ends" <<<"$during"'
t_check "6b: ... and lists the refused flow once it has ended" \
    eval 'grep -q "1 refused flow while the agent ran" <<<"$after" && grep -q "192.168.77.2" <<<"$after"'
tm_run --vpn tun0 --monitor-to "$LYH_HOME/mon.log" -- /usr/bin/python3 "$PROBE_PY"
lyh_wait_until 15 eval 'screen | grep -q "probe refused"'
lyh_wait_until 3 grep -q "192.168.77.2" "$LYH_HOME/mon.log"
live=$( [ ! -e "$LYH_HOME/pick.rc" ] && grep -c "192.168.77.2" "$LYH_HOME/mon.log")
lyh_wait_until 15 test -s "$LYH_HOME/pick.rc"
t_check "6b: --monitor-to FILE: the line is in the file while the agent still runs" \
    eval '[ "${live:-0}" = 1 ] && [ "$(stat -c %a "$LYH_HOME/mon.log")" = 600 ]'
t_check "6b: ... and never on the terminal" eval '! screen | grep -q "192.168.77.2"'

# Ctrl-Z in a terminal session: the agent stops, and lyh with it, as a shell
# job; fg continues both
echo "# 6c. Ctrl-Z and fg"
rm -f "$LYH_HOME/pick.rc"
lyh_as_user "${TM[@]}" kill-session -t pick
lyh_as_user "${TM[@]}" new-session -d -s pick -x 160 -y 40 "cd proj && exec bash --norc --noprofile -i" ||
    lyh_die "cannot start tmux (bash)"
lyh_wait_until 10 eval 'screen | grep -q "\\$ *$\|\$ *$"'
keys "$LYH_LYH --socket $LYH_SOCK run --vpn tun0 -- /bin/sh -c 'echo agent-started; sleep 3; echo agent-resumed'" Enter
lyh_wait_until 15 eval 'screen | grep -q "^agent-started"'
keys C-z
lyh_wait_until 10 eval 'screen | grep -q "Stopped"'
states=$(for cg in $(lyh_cg_sessions); do
    while read -r p; do ps -o stat= -p "$p"; done <"$LYH_CGBASE/$cg/cgroup.procs"
done | cut -c1 | sort -u | tr -d '\n')
sleep 4 # longer than the agent's sleep: stopped, it must not have gone on
scr=$(screen)
echo "$scr" | grep -v '^$' | tail -n 3 | sed 's/^/    | /'
t_check "6c: Ctrl-Z stops the agent (its processes: $states) and gives the shell back (Stopped)" \
    eval '[ "$states" = T ] && grep -q "Stopped" <<<"$scr" && ! grep -q "^agent-resumed" <<<"$scr"'
keys fg Enter
lyh_wait_until 15 eval 'screen | grep -q "^agent-resumed"'
keys "echo rc=\$? >$LYH_HOME/pick.rc" Enter
lyh_wait_until 10 test -s "$LYH_HOME/pick.rc"
screen | grep -v '^$' | tail -n 4 | sed 's/^/    | /'
t_check "6c: fg: the agent goes on and ends, and so does lyh (0)" \
    eval 'screen | grep -q "^agent-resumed" && grep -qx "rc=0" "$LYH_HOME/pick.rc"'
# a shell as the agent: Ctrl-Z is its business (its job stops, lyh does not)
rm -f "$LYH_HOME/pick.rc"
lyh_as_user "${TM[@]}" send-keys -t pick C-l
keys "$LYH_LYH --socket $LYH_SOCK run --vpn tun0 -- /bin/bash --norc --noprofile -i; echo rc=\$? >$LYH_HOME/pick.rc" Enter
lyh_wait_until 15 eval '[ "$(screen | grep -c "bash-5")" -ge 2 ]'
keys "sleep 30" Enter
sleep 0.5
keys C-z
lyh_wait_until 10 eval 'screen | grep -q "Stopped *sleep 30"'
keys "echo inner-still-here" Enter
lyh_wait_until 10 eval 'screen | grep -q "^inner-still-here"'
scr=$(screen)
t_check "6c: with a shell as the agent, Ctrl-Z stops its job and the shell goes on (lyh is not stopped)" \
    eval 'grep -q "Stopped *sleep 30" <<<"$scr" && grep -q "^inner-still-here" <<<"$scr" &&
          ! grep -q "Stopped .*lyh --socket" <<<"$scr"'
keys "kill -9 %1" Enter
sleep 0.5
keys "exit 0" Enter
lyh_wait_until 3 test -s "$LYH_HOME/pick.rc" || keys "exit 0" Enter # "There are stopped jobs."
lyh_wait_until 10 test -s "$LYH_HOME/pick.rc"
screen | grep -v '^$' | tail -n 4 | sed 's/^/    | /'
t_check "6c: ... and exit ends the session (0)" grep -qx "rc=0" "$LYH_HOME/pick.rc"

lyh_as_user sh -c 'echo mine >"$HOME/target.txt" && ln -sf "$HOME/target.txt" "$HOME/mon-link.log" &&
    mkfifo "$HOME/mon.fifo"'
res=$(run_rc --vpn tun0 --no-tui --monitor-to "$LYH_HOME/mon-link.log" -- /bin/true)
t_check "6b: --monitor-to through a symbolic link (an agent could plant one): refused (125), the target untouched" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "a symbolic link" <<<"$res" && [ "$(cat "$LYH_HOME/target.txt")" = mine ]'
res=$(run_rc --vpn tun0 --no-tui --monitor-to "$LYH_HOME/mon.fifo" -- /bin/true)
t_check "6b: --monitor-to a FIFO: refused at once (125), no hang" grep -qx "rc=125" <<<"$res"
res=$(run_rc --vpn tun0 --no-tui --monitor-to fd:9 -- /bin/true)
t_check "6b: --monitor-to fd:N that is not open: refused (125), saying so" \
    eval 'grep -qx "rc=125" <<<"$res" && grep -q "not an open file descriptor" <<<"$res"'
stop_tmux

lyh_daemon_stop
t_done
