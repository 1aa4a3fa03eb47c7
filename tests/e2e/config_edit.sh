#!/usr/bin/env bash
# End-to-end test of `lyh config` on a terminal (tmux): the full-screen editor
# shows every key with its value, origin and description; a boolean toggles;
# an invalid value is shown with the loader's error as it is typed and is
# not applied; saving writes the global file and `lyh config show` reflects
# it; saving the project file shows what it widens, asks, and approves it in
# the trust store (or, declined, writes nothing); not on a terminal,
# `lyh config` prints what `lyh config show` prints.
#
# No daemon, no network: a HOME of its own under a temp dir, the caller's
# uid. usage: config_edit.sh BUILD_DIR
set -u

B=${1:?usage: config_edit.sh BUILD_DIR}
LYH=$(cd "$B" && pwd)/cli/lyh
[ -x "$LYH" ] || { echo "no $LYH"; exit 2; }
command -v tmux >/dev/null 2>&1 || { echo "SKIP: tmux not installed"; exit 77; }

T=$(mktemp -d /tmp/lyh-cfgedit.XXXXXX) || exit 1
TM=(tmux -f /dev/null -S "$T/tmux.sock")
cleanup() {
    "${TM[@]}" kill-server >/dev/null 2>&1
    case $T in /tmp/lyh-cfgedit.*) rm -rf "$T" ;; esac
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

H=$T/home
mkdir -m 0700 "$H" "$H/proj" || exit 1
printf '[network]\ndeny = ["10.0.0.0/8"]\n' >"$H/proj/.lianyaohu.toml"
G=$H/.config/lianyaohu/config.toml
TRUST=$H/.config/lianyaohu/trusted.toml
E=(env -i HOME="$H" PATH=/usr/bin:/bin TERM=xterm LANG=C)

pass=0 fail=0
t_check() { # NAME CMD...
    local name=$1
    shift
    if "$@" >/dev/null 2>&1; then
        echo "PASS $name"
        pass=$((pass + 1))
    else
        echo "FAIL $name"
        screen | sed 's/^/    | /' | grep -v '^    | *$' | head -n 30
        fail=$((fail + 1))
    fi
}
wait_until() { # SECONDS CMD...: bounded
    local i n=$(($1 * 10))
    shift
    for ((i = 0; i < n; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    "$@" >/dev/null 2>&1
}
screen() { "${TM[@]}" capture-pane -p -t ed 2>/dev/null; }
has() { screen | grep -q -- "$1"; }
keys() { "${TM[@]}" send-keys -t ed "$@"; sleep 0.15; }
row() { # N: the cursor to row N (0: the first key)
    local i
    for ((i = 0; i < 25; i++)); do "${TM[@]}" send-keys -t ed k; done
    for ((i = 0; i < $1; i++)); do "${TM[@]}" send-keys -t ed j; done
    sleep 0.2
}
open_editor() {
    rm -f "$T/rc"
    "${TM[@]}" kill-session -t ed >/dev/null 2>&1
    "${TM[@]}" new-session -d -s ed -x 170 -y 40 \
        "cd $H/proj && ${E[*]} $LYH config; echo rc=\$? >$T/rc; sleep 600" || exit 1
    wait_until 10 has "lyh config: global file"
}
# the rows, in the schema's order
R_LAN=9 R_ALLOW=7 R_NARROW=16

echo "# 1. the editor: every key, its value, where it comes from, what it is"
open_editor
t_check "1: the global file is edited first, its path shown" has "lyh config: global file $G"
t_check "1: a key the project sets: its value and file:line" \
    eval 'screen | grep -q "^network.deny  *10.0.0.0/8  *.lianyaohu.toml:2  *destinations always refused"'
t_check "1: a built-in: value and origin" \
    eval 'screen | grep -q "^defaults.firewall  *true  *built-in  *false: no VPN guard"'
t_check "1: all 20 keys are rows" eval '[ "$(screen | grep -c "^\(defaults\|network\|paths\)\.")" = 20 ]'

echo "# 2. toggle, an invalid value shown and not applied, a valid one, save"
row $R_NARROW
keys Space
t_check "2: Space toggles paths.narrow_home (true, this file)" \
    eval 'screen | grep -q "^paths.narrow_home  *true  *this file:"'
row $R_LAN
keys Enter
keys -l "192.168.1.300"
t_check "2: an invalid address: the loader's error under the line, as typed" \
    has "error: .*network.lan_allow\[0\]: '192.168.1.300'"
keys Enter
t_check "2: ... Enter does not apply it" has "network.lan_allow = 192.168.1.300"
keys Escape
t_check "2: Esc: not changed" eval 'has "not changed" && ! screen | grep -q "^network.lan_allow .*192.168.1.300"'
keys Enter
keys -l "192.168.1.10:8080, 192.168.1.0/30"
t_check "2: a valid list: ok" has "ok: Enter applies"
keys Enter
t_check "2: ... applied to the row (the column shortens it)" eval 'screen | grep -q "^network.lan_allow  *192.168.1.10:8080, 192.168.1.0 *this file:"'
t_check "2: nothing written before s" test ! -e "$G"
keys s
t_check "2: s saves the global file" eval 'has "saved $G" && test -f "$G"'
keys q
t_check "2: q quits (0)" wait_until 5 grep -qx "rc=0" "$T/rc"
t_check "2: no sanitizer report on the terminal" eval '! has Sanitizer'
show=$(cd "$H/proj" && "${E[@]}" "$LYH" config show 2>&1)
t_check "2: lyh config show reflects it" \
    eval 'grep -q "^narrow_home = true" <<<"$show" && grep -q "\"192.168.1.10:8080\"" <<<"$show" &&
          grep -q "\"192.168.1.0/30\"" <<<"$show"'
t_check "2: the invalid value never reached the file; the file is 0600" \
    eval '! grep -q "192.168.1.300" "$G" && [ "$(stat -c %a "$G")" = 600 ]'

echo "# 3. the project file: saving shows what it widens and approves it"
open_editor
keys Tab
t_check "3: Tab: the project file" has "lyh config: project file $H/proj/.lianyaohu.toml"
row 1
keys Enter
keys -l "http://127.0.0.1:3128"
t_check "3: [defaults] is refused in a project file, inline" has "belongs in the global file only"
keys Escape
row $R_ALLOW
keys Enter
keys -l "10.9.9.9:443"
keys Enter
keys s
t_check "3: s shows the whole file, names the widening, and asks" \
    eval 'has "and approve it in your trust store? With the approval it widens:" &&
          has "^  network.allow" && has "| allow = \[\"10.9.9.9:443\"\]" && has "y: save and approve"'
keys n
t_check "3: n: not saved, not approved" \
    eval 'has "not saved" && ! grep -q "10.9.9.9" "$H/proj/.lianyaohu.toml" && ! grep -qs "$H/proj" "$TRUST"'
keys s
keys w
t_check "3: w: saved, not approved" \
    eval 'has "not approved: its widenings stay ignored" && grep -q "10.9.9.9:443" "$H/proj/.lianyaohu.toml" &&
          ! grep -qs "$H/proj" "$TRUST"'
row $R_NARROW
keys Space
keys s
keys y
t_check "3: y: saved and approved" \
    eval 'has "and approved it" && grep -q "narrow_home = false" "$H/proj/.lianyaohu.toml" && grep -q "$H/proj" "$TRUST"'
keys q
wait_until 5 test -s "$T/rc"
t_check "3: quits 0, no sanitizer report" eval 'grep -qx "rc=0" "$T/rc" && ! has Sanitizer'
show=$(cd "$H/proj" && "${E[@]}" "$LYH" config show 2>&1)
t_check "3: lyh config show: the widening applies (trusted)" \
    eval 'grep -q "\"10.9.9.9:443\"" <<<"$show" && ! grep -q "not trusted" <<<"$show"'

echo "# 4. unsaved changes; not on a terminal"
open_editor
row $R_NARROW
keys Space
keys q
t_check "4: q with unsaved changes asks again" has "unsaved changes: s saves, q again quits"
keys q
t_check "4: ... the second q quits, nothing written" \
    eval 'wait_until 5 grep -qx "rc=0" "$T/rc" && grep -q "^narrow_home = true" "$G"'
plain=$(cd "$H/proj" && "${E[@]}" "$LYH" config </dev/null 2>&1)
t_check "4: not on a terminal, lyh config prints lyh config show" [ "$plain" = "$show" ]

echo "# 5. a hostile project file (an agent can write it): its control bytes never act"
printf '[paths]\nwritable = ["~/\\u0008\\u0008  \\u001b[2J/.."]\n' >"$H/proj/.lianyaohu.toml"
open_editor
keys Tab
t_check "5: the row shows the control bytes as ?, not the screen they would draw" \
    eval 'screen | grep -q "^paths.writable  *~/??  ?\[2J/\.\.  *this file:2"'
row 13
keys Enter
t_check "5: such a value is not edited on the line (it would not come back the same)" \
    has "edit the file by hand"
keys q
wait_until 5 test -s "$T/rc"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
