#!/usr/bin/env bash
# End-to-end test of `lyh doctor` through the real lyhd (a state that fails
# every launch, root told to ask as the user): as the test user in
# the lib.sh layout every check is ok or warn (exit 0), the expected checks are
# there and tun0 is listed and passes the daemon's route preflight; with the
# daemon stopped, doctor exits 69 and says how to start it.
#
# usage: doctor.sh BUILD_DIR     (as root; exits 77 = skipped otherwise)
# Network, daemon, user and safety rules come from lib.sh (read its header).
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: doctor.sh needs root"
    exit 77
fi
# shellcheck source=tests/e2e/lib.sh
. "$HERE/lib.sh"
command -v jq >/dev/null || lyh_skip "jq is not installed"
lyh_init "${1:-}"

P="lyhtd-$$"
lyh_layout_up "$P" tun0 || lyh_die "network layout"
lyh_user_create || lyh_die "cannot create the test user"
lyh_daemon_start || lyh_die "lyhd does not start"
# lyhd measures audit.db's writes again for a few seconds after its start and
# may raise the flow rate meanwhile: the doctor is asked once that is over
lyh_wait_until 20 grep -q "audit: audit.db takes [0-9]* flow records/s here (the best of" "$LYH_DAEMON_LOG" ||
    lyh_die "lyhd did not finish measuring audit.db's writes: $(grep audit "$LYH_DAEMON_LOG" | head -5)"

# ---- 1. everything a guarded run needs is there --------------------------------------------

echo "# 1. lyh doctor --json as the user, daemon running"
out=$(LYH_CMD_TIMEOUT=30 lyh_cli doctor --json 2>"$LYH_TMP/doctor.err")
rc=$?
t_eq "1: exit status 0" "$rc" 0
if jq -e . >/dev/null 2>&1 <<<"$out"; then t_pass "1: the output is JSON"; else t_fail "1: the output is JSON" "$out"; fi
t_eq "1: ok is true" "$(jq -r .ok <<<"$out")" true
t_eq "1: no check fails" "$(jq -r '[.checks[] | select(.status != "ok" and .status != "warn")] | length' <<<"$out")" 0
for n in daemon protocol landlock seccomp cgroup2 nftables audit launch vpn vpn:tun0 resolver; do
    t_eq "1: check '$n' present once" "$(jq --arg n "$n" '[.checks[] | select(.name == $n)] | length' <<<"$out")" 1
done
for n in daemon protocol landlock seccomp nftables launch vpn vpn:tun0; do
    t_eq "1: check '$n' is ok" "$(jq -r --arg n "$n" '.checks[] | select(.name == $n) | .status' <<<"$out")" ok
done
t_check "1: tun0 is listed as a VPN" grep -q 'tun0' <<<"$(jq -r '.checks[] | select(.name == "vpn") | .detail' <<<"$out")"
t_check "1: the landlock check names the ABI" grep -qE '^ABI [0-9]+: ' <<<"$(jq -r '.checks[] | select(.name == "landlock") | .detail' <<<"$out")"
t_check "1: the audit check gives the retention" grep -q 'retention 90 days' <<<"$(jq -r '.checks[] | select(.name == "audit") | .detail' <<<"$out")"
# the flow rate lyhd measured and logged at start
frate=$(sed -n 's/.*each session logs up to \([0-9]*\) new flows.*/\1/p' "$LYH_DAEMON_LOG" | tail -n 1)
t_check "1: the audit check gives the flow rate lyhd logged (${frate:-none})" \
    grep -q "recorded one by one up to ${frate:-none}/s" <<<"$(jq -r '.checks[] | select(.name == "audit") | .detail' <<<"$out")"
rdet=$(jq -r '.checks[] | select(.name == "resolver") | .detail' <<<"$out")
rst=$(jq -r '.checks[] | select(.name == "resolver") | .status' <<<"$out")
t_check "1: the resolver check says what lyhd will ask for tun0 ($rst: $rdet)" \
    eval '{ [ "$rst" = ok ] && grep -q "tun0: lyhd asks " <<<"$rdet"; } ||
          { [ "$rst" = warn ] && grep -q "tun0: no resolver known" <<<"$rdet"; }'
t_eq "1: every check has a detail" "$(jq '[.checks[] | select(.detail == "")] | length' <<<"$out")" 0
t_eq "1: every warn or fail says what to do" "$(jq '[.checks[] | select(.status != "ok" and .fix == "")] | length' <<<"$out")" 0
t_eq "1: no session was started" "$(lyh_live_rows)" 0
t_eq "1: ... and the launch probe left no cgroup" "$(lyh_cg_sessions | wc -l)" 0
t_eq "1: no 'user' check for a normal user" "$(jq '[.checks[] | select(.name == "user")] | length' <<<"$out")" 0

out=$(LYH_CMD_TIMEOUT=30 lyh_cli doctor 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/  | /'
t_eq "1: text mode exits 0 too" "$rc" 0
t_check "1: text mode: one line per check" grep -qE '^ok +landlock +ABI' <<<"$out"

# ---- 2. routes that do not fit ------------------------------------------------------------

echo "# 2. IPv6 default on the LAN: a warning; IPv4 default on the LAN: a failure"
lyh_route6_default eth0 || lyh_die "IPv6 default via eth0"
out=$(LYH_CMD_TIMEOUT=30 lyh_cli doctor --json 2>&1)
rc=$?
t_eq "2: IPv6 off the VPN: still exit 0" "$rc" 0
t_eq "2: vpn:tun0 warns" "$(jq -r '.checks[] | select(.name == "vpn:tun0") | .status' <<<"$out")" warn
t_check "2: and says IPv6 is blocked" grep -q 'IPv6 does not' <<<"$(jq -r '.checks[] | select(.name == "vpn:tun0") | .detail' <<<"$out")"
lyh_route4_default eth0 || lyh_die "IPv4 default via eth0"
out=$(LYH_CMD_TIMEOUT=30 lyh_cli doctor --json 2>&1)
rc=$?
t_eq "2: IPv4 off the VPN: exit 1" "$rc" 1
t_eq "2: vpn fails" "$(jq -r '.checks[] | select(.name == "vpn") | .status' <<<"$out")" fail
t_check "2: vpn:tun0 gives the daemon's reason" grep -q 'would be refused' <<<"$(jq -r '.checks[] | select(.name == "vpn:tun0") | .detail' <<<"$out")"
lyh_route4_default tun0 && lyh_route6_default tun0 || lyh_die "routes back to tun0"

echo "# 2b. a state that fails every launch: no session cgroup can be made"
echo 0 >"$LYH_CGBASE/cgroup.max.descendants" || lyh_die "cgroup.max.descendants"
sleep 2.1 # the probe's last answer is kept 2 s
out=$(LYH_CMD_TIMEOUT=30 lyh_cli doctor --json 2>&1)
rc=$?
echo "$out" | jq -r '.checks[] | select(.name == "launch") | "  | \(.status) \(.detail)"'
t_eq "2b: exit 1" "$rc" 1
t_eq "2b: launch fails" "$(jq -r '.checks[] | select(.name == "launch") | .status' <<<"$out")" fail
t_check "2b: ... naming the subtree, the cause and what to do" \
    grep -qF "under $LYH_CGBASE (Resource temporarily unavailable), so every lyh run fails: its cgroup.max.descendants" \
    <<<"$(jq -r '.checks[] | select(.name == "launch") | .detail' <<<"$out")"
res=$(LYH_CMD_TIMEOUT=30 lyh_cli run --vpn tun0 --no-tui -- /bin/true 2>&1; echo "rc=$?")
t_check "2b: ... and indeed lyh run fails (125)" grep -qx "rc=125" <<<"$res"
echo max >"$LYH_CGBASE/cgroup.max.descendants"
sleep 2.1
out=$(LYH_CMD_TIMEOUT=30 lyh_cli doctor --json 2>&1)
t_eq "2b: fixed: launch ok again" "$(jq -r '.checks[] | select(.name == "launch") | .status' <<<"$out")" ok
out=$(LYH_CMD_TIMEOUT=30 lyh_in_main "$LYH_LYH" --socket "$LYH_SOCK" doctor --json 2>&1)
t_eq "2b: doctor as root: a 'user' warning" "$(jq -r '.checks[] | select(.name == "user") | .status' <<<"$out")" warn
t_check "2b: ... saying lyh runs agents as a normal user" \
    grep -q "lyh runs agents as a normal user" <<<"$(jq -r '.checks[] | select(.name == "user") | .detail' <<<"$out")"

# ---- 3. no daemon ---------------------------------------------------------------------------

echo "# 3. lyh doctor with the daemon stopped"
lyh_daemon_stop
out=$(LYH_CMD_TIMEOUT=30 lyh_cli doctor 2>&1)
rc=$?
t_eq "3: exit status 69" "$rc" 69
t_check "3: says the daemon is unreachable" grep -q 'lyhd is unreachable' <<<"$out"
t_check "3: says how to start it" grep -q 'systemctl start lyhd' <<<"$out"
t_check "3: the local checks still run (tun0 listed)" grep -qE '^warn +vpn +VPN interfaces: tun0' <<<"$out"

t_done
exit $?
