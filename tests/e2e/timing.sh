#!/usr/bin/env bash
# End-to-end test of the launch's timing marks that bench/run puts together
# (`lyh run --timing`, `lyhd --timing`, bench/launch_steps.py): through the
# real lyhd, a launch's marks as lyh saw them and as lyhd logged them line up
# on one clock, in the order the launch goes (lyh connects before lyhd's handler
# begins, which is before RunStarted is handed on, which is before lyh reads
# it; the exit seen before RunExited is handed on, before lyh reads it);
# bench/launch_steps.py matches every launch of a timed loop to its lines and
# refuses one whose marks go backwards; a launch lyhd refuses still gets its
# line (nothing started: zeros), and without --timing lyh prints none.
# lyhd's line says how the child was made (the spawner's way with shared
# memory where it can be; its fork where not).
#
# usage: timing.sh BUILD_DIR     (as root; exits 77 = skipped otherwise)
# Network, daemon, user and safety rules come from lib.sh (read its header).
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: timing.sh needs root"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
lyh_init "${1:-}"
[ -x "$LYH_BUILD/bench/lyh_bench_spawn" ] || lyh_skip "no bench/lyh_bench_spawn in the build (LYH_BENCH=OFF)"
command -v python3 >/dev/null || lyh_skip "python3 is not installed (bench/launch_steps.py)"
LYH_DAEMON_ARGS=(--timing)

P="lyhtt-$$"
lyh_layout_up "$P" tun0 || lyh_die "network layout"
lyh_user_create || lyh_die "cannot create the test user"
lyh_daemon_start || lyh_die "lyhd does not start"
SPAWN=$LYH_TMP/bin/lyh_bench_spawn
install -m 0755 "$LYH_BUILD/bench/lyh_bench_spawn" "$SPAWN" || lyh_die "copy lyh_bench_spawn"
install -d -o "$LYH_UID" -g "$LYH_GID" -m 0700 "$LYH_HOME/t" || lyh_die "work dir"
RUN=("$LYH_LYH" --socket "$LYH_SOCK" run --vpn tun0 --no-tui)

# mark NAME LINE: the value after NAME in LINE
mark() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' <<<"$2"; }

# ---- 1. one launch: lyh's marks and lyhd's, in order ----------------------------------------

echo "# 1. lyh run --timing -- /bin/true"
lyh_as_user "${RUN[@]}" --timing -- /bin/true </dev/null >/dev/null 2>"$LYH_HOME/t/1.err"
t_eq "1: the agent's status" "$?" 0
tl=$(grep '^lyh: timing (CLOCK_MONOTONIC us): ' "$LYH_HOME/t/1.err")
t_eq "1: lyh printed one timing line" "$(printf '%s' "$tl" | grep -c .)" 1
m=() ok=1
for k in main ready connected started exited done; do
    v=$(mark "$k" "$tl")
    [[ "$v" =~ ^[1-9][0-9]*$ ]] || ok=0
    m+=("${v:-0}")
done
t_eq "1: all six marks are there and not zero ($tl)" "$ok" 1
inorder() { local a=$1; shift; for b in "$@"; do [ "$a" -le "$b" ] || return 1; a=$b; done; }
t_check "1: main <= ready <= connected <= started <= exited <= done" inorder "${m[@]}"
sid=$(sed -n 's/^lyh: session \([0-9a-f]*\) on .*/\1/p' "$LYH_HOME/t/1.err")
t_check "1: lyh named its session ($sid)" test -n "$sid"
# the end line comes with the teardown; a line is read once the next one is
# there or after a pause, never while it may still be written
lyh_wait_until 10 grep -q "lyhd info: end $sid phases" "$LYH_DAEMON_LOG"
sleep 0.2
ll=$(grep "lyhd info: launch $sid phases" "$LYH_DAEMON_LOG")
el=$(grep "lyhd info: end $sid phases" "$LYH_DAEMON_LOG")
entry=$(mark entry_at "$ll") started=$(mark started_at "$ll")
exit_at=$(mark exit_at "$el") replied=$(mark replied_at "$el")
t_check "1: lyhd logged entry_at, started_at, exit_at, replied_at ($entry $started $exit_at $replied)" \
    eval '[[ "$entry$started$exit_at$replied" =~ ^[0-9]+$ ]] && [ "$entry" -gt 0 ] && [ "$replied" -gt 0 ]'
t_check "1: lyh connected <= lyhd's handler began <= RunStarted handed on <= lyh read it" \
    inorder "${m[2]}" "${entry:-0}" "${started:-0}" "${m[3]}"
t_check "1: RunStarted handed on <= the exit seen <= RunExited handed on <= lyh read it" \
    inorder "${started:-0}" "${exit_at:-0}" "${replied:-0}" "${m[4]}"
# How the child was made: sharing the spawner's memory wherever it can be
# (x86_64, no sanitizer, fs.suid_dumpable 0), else the spawner's fork; never
# lyhd's own fork while the spawner runs. A silent fall back would otherwise
# show only as a slower launch.
way=$(sed -n 's/.* -- child made by \([a-z_]*\)$/\1/p' <<<"$ll")
dumpable=$(cat /proc/sys/fs/suid_dumpable)
want=spawner_fork
[ "$(uname -m)" = x86_64 ] && [ "$LYH_SANITIZED" = 0 ] && [ "$dumpable" = 0 ] && want=spawner_shared
t_eq "1: lyhd says how the child was made (x86_64 $(uname -m), sanitized $LYH_SANITIZED, fs.suid_dumpable $dumpable)" \
    "$way" "$want"

# ---- 2. bench/run's steps: every launch matched; marks that go backwards refused ---------------

echo "# 2. launch_steps.py over five launches timed by lyh_bench_spawn"
: >"$LYH_HOME/t/2.err"
chown "$LYH_UID" "$LYH_HOME/t/2.err"
lyh_as_user env SPAWN_ERR="$LYH_HOME/t/2.err" "$SPAWN" 5 lyh "${RUN[@]}" --timing -- /bin/true \
    :: true /bin/true >"$LYH_TMP/2.spawn"
t_eq "2: every run passed" "$(awk '$3 != 0' "$LYH_TMP/2.spawn" | wc -l)" 0
t_eq "2: every line carries the fork's moment" "$(awk 'NF != 5 || $5 !~ /^[0-9]+$/' "$LYH_TMP/2.spawn" | wc -l)" 0
mkdir -p "$LYH_TMP/steps"
ok=0
python3 "$HERE/../../bench/launch_steps.py" --wait 5 "$LYH_TMP/2.spawn" "$LYH_HOME/t/2.err" \
    "$LYH_DAEMON_LOG" "$LYH_TMP/steps" >"$LYH_TMP/2.out" 2>"$LYH_TMP/2.perr" && ok=1
t_eq "2: launch_steps.py matched every launch ($(cat "$LYH_TMP/2.out" "$LYH_TMP/2.perr"))" \
    "$ok:$(cat "$LYH_TMP/2.out")" "1:matched 5 of 5"
t_eq "2: a value per launch for each of the ten steps" \
    "$(for f in start prepare connect hop_in lyhd agent reply hop_back finish hop_started; do
           wc -l <"$LYH_TMP/steps/step.$f" 2>/dev/null || echo none
       done | sort -u)" 5
# the same files with the first launch's started_at moved before its entry_at:
# the script must say so and fail, not print a negative step
first=$(awk '$1 == "lyh" { print $5; exit }' "$LYH_TMP/2.spawn")
fconn=""
while read -r l; do
    [ "$(mark main "$l")" -ge "${first:-0}" ] && fconn=$(mark connected "$l") && break
done < <(grep -E "^lyh: timing " "$LYH_HOME/t/2.err")
fsid=$(grep -E "lyhd info: launch [0-9a-f]+ phases" "$LYH_DAEMON_LOG" |
    awk -v c="${fconn:-0}" '{ for (i = 1; i < NF; i++) if ($i == "entry_at" && $(i + 1) >= c) { print $5; exit } }')
t_check "2: the first launch's session found in lyhd's log ($fsid)" test -n "$fsid"
sed -E "/lyhd info: launch $fsid phases/ s/started_at [0-9]+/started_at 1/" \
    "$LYH_DAEMON_LOG" >"$LYH_TMP/2.badlog"
mkdir -p "$LYH_TMP/steps-bad"
python3 "$HERE/../../bench/launch_steps.py" "$LYH_TMP/2.spawn" "$LYH_HOME/t/2.err" "$LYH_TMP/2.badlog" \
    "$LYH_TMP/steps-bad" >"$LYH_TMP/2b.out" 2>&1
rc=$?
t_eq "2: a started_at before its entry_at: launch_steps.py fails" "$rc" 1
t_check "2: ... saying which session's marks are out of order ($(head -c 200 "$LYH_TMP/2b.out"))" \
    grep -q "session $fsid: marks out of order" "$LYH_TMP/2b.out"
t_eq "2: ... and writes no step files" "$(find "$LYH_TMP/steps-bad" -type f | wc -l)" 0

# ---- 3. a refused launch, and no --timing -------------------------------------------------------

echo "# 3. refused, and without --timing"
lyh_as_user "$LYH_LYH" --socket "$LYH_SOCK" run --vpn nosuch0 --no-tui --timing -- /bin/true \
    </dev/null >/dev/null 2>"$LYH_HOME/t/3.err"
rc=$?
t_check "3: a refused launch fails ($rc)" test "$rc" -ne 0
tl=$(grep '^lyh: timing ' "$LYH_HOME/t/3.err")
t_check "3: ... and still prints its line, nothing started ($tl)" \
    eval '[ "$(mark started "$tl")" = 0 ] && [ "$(mark exited "$tl")" = 0 ] && [ "$(mark main "$tl")" -gt 0 ]'
lyh_as_user "${RUN[@]}" -- /bin/true </dev/null >/dev/null 2>"$LYH_HOME/t/4.err"
t_eq "3: without --timing, no timing line" "$(grep -c 'timing' "$LYH_HOME/t/4.err")" 0

# ---- 4. the ruleset watch: lyhd's own changes and other tables' start no check ---------------

echo "# 4. the ruleset watch"
# every launch and end above was a transaction of lyhd's, each announced to its
# watch; a check comes 20 ms after a change it counts
sleep 0.3
t_eq "4: no guard check after lyhd's own launches and ends" \
    "$(grep -c "guard check after a ruleset change not lyhd's own" "$LYH_DAEMON_LOG")" 0
# another program's change to a table of its own cannot touch lyhd's: no check
lyh_nft add table inet lyhwatch && lyh_nft delete table inet lyhwatch
sleep 0.3
t_eq "4: a change by another program to a table of its own starts no check" \
    "$(grep -c "guard check after a ruleset change not lyhd's own" "$LYH_DAEMON_LOG")" 0
# ... its change to lyhd's table does
lyh_nft add chain inet lianyaohu lyhwatch && lyh_nft delete chain inet lianyaohu lyhwatch
t_check "4: a change by another program to lyhd's table is checked" \
    lyh_wait_until 5 grep -q "guard check after a ruleset change not lyhd's own or a lost notice: [0-9]* us (flags 0)" \
    "$LYH_DAEMON_LOG"
t_eq "4: ... and leaves lyhd's table as it was (nothing rebuilt)" \
    "$(grep -c 'rebuilt it and the chains of' "$LYH_DAEMON_LOG")" 0

t_done
exit $?
