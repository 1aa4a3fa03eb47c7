#!/usr/bin/env bash
# Launch latency of `lyh run --vpn tun0 -- /bin/true` against bare /bin/true,
# interleaved (A B A B ...) in one run, in test namespaces made by
# tests/e2e/lib.sh (nothing touches the host's network).
#   bench/launch.sh BUILD_DIR [N]      (root; N = launches per side, default 50)
# Prints medians and p90 in microseconds and lyh's overhead over bare true.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=tests/e2e/lib.sh
. "$here/tests/e2e/lib.sh"
n=${2:-50}
lyh_init "${1:-}"
lyh_layout_up "lyhbench-$$" || lyh_die "namespace layout"
lyh_user_create || lyh_die "test user"
lyh_daemon_start || lyh_die "lyhd"

cat >"$LYH_TMP/loop.sh" <<EOS
for i in \$(seq $n); do
  s=\$(date +%s%N); "$LYH_LYH" --socket "$LYH_SOCK" run --vpn tun0 --no-tui -- /bin/true </dev/null 2>/dev/null
  rc=\$?; e=\$(date +%s%N); echo "lyh \$(( (e - s) / 1000 )) \$rc"
  s=\$(date +%s%N); /bin/true; e=\$(date +%s%N); echo "true \$(( (e - s) / 1000 )) 0"
done
EOS
LYH_CMD_TIMEOUT=600 lyh_as_user /bin/sh "$LYH_TMP/loop.sh" >"$LYH_TMP/samples" || lyh_die "loop"
fails=$(awk '$3 != 0' "$LYH_TMP/samples" | wc -l)
stat() { # SIDE -> "median p90"
    awk -v s="$1" '$1 == s { print $2 }' "$LYH_TMP/samples" | sort -n |
        awk '{ v[NR] = $1 } END { m = v[int((NR + 1) / 2)]; p = v[int(NR * 0.9 + 0.5)]; print m, p }'
}
read -r lm lp < <(stat lyh)
read -r tm tp < <(stat true)
printf '%-40s %10s %10s\n' "launch ($n each, interleaved)" "median us" "p90 us"
printf '%-40s %10s %10s\n' "lyh run --vpn tun0 -- /bin/true" "$lm" "$lp"
printf '%-40s %10s %10s\n' "/bin/true" "$tm" "$tp"
printf 'overhead over bare true: %s us (median); failed launches: %s\n' "$((lm - tm))" "$fails"
[ "$fails" -eq 0 ] && t_pass "all launches succeeded" || t_fail "launches" "$fails failed"
lyh_daemon_stop || t_fail "lyhd stop" "exit status"
t_done
exit $?
