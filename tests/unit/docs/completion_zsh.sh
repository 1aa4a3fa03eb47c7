#!/bin/sh
# completion_zsh.sh SRC_DIR: scripts/completions/_lyh
#  1. starts with '#compdef lyh' and parses (zsh -n);
#  2. loads through compinit in a non-interactive `zsh -f` (fpath pointing at
#     scripts/completions): nothing on stderr, registered as $_comps[lyh], and
#     `autoload +X _lyh` takes it from this file;
#  3. completes for real: each case types a line into an interactive
#     `zsh -f -i` on a pseudo-terminal (zsh/zpty), presses TAB (complete-word),
#     and a wrapper around compadd records every match the completion system
#     offered; the sorted matches must be exactly the expected ones and the
#     completion must write nothing on stderr.
# Skipped (77) only when zsh is not installed (Debian package zsh, scripts/deps).
src=${1:?usage: completion_zsh.sh SRC_DIR}
comp=$src/scripts/completions/_lyh
if ! command -v zsh >/dev/null 2>&1; then
    echo "completion_zsh: zsh is not installed; skipped"
    exit 77
fi
head -1 "$comp" | grep -qx '#compdef lyh' ||
    { echo "completion_zsh: first line is not '#compdef lyh'"; exit 1; }
zsh -n "$comp" || { echo "completion_zsh: zsh -n $comp failed"; exit 1; }

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM # sh runs no EXIT trap on a fatal signal
export HOME="$tmp" # no ~/.zcompdump or history of the caller's

# ---- 2. compinit in a non-interactive zsh -f ----------------------------------------
# shellcheck disable=SC2016 # the zsh script expands its own parameters
out=$(cd "$tmp" && timeout -k 2 20 zsh -f -c '
    fpath=("$1/scripts/completions" $fpath)
    autoload -Uz compinit && compinit -u -D || { print "compinit failed"; exit 1; }
    [[ $_comps[lyh] == _lyh ]] || { print "_comps[lyh] is ${_comps[lyh]:-unset}"; exit 1; }
    autoload -Uz +X _lyh || { print "autoload +X _lyh failed"; exit 1; }
    zmodload zsh/parameter
    print -r -- "$functions_source[_lyh]"' zsh "$src" 2>"$tmp/load.err")
rc=$?
if [ "$rc" -ne 0 ] || [ -s "$tmp/load.err" ] || [ "$out" != "$comp" ]; then
    echo "completion_zsh: loading through compinit failed (status $rc): '$out', want '$comp'"
    cat "$tmp/load.err"
    exit 1
fi
echo "ok   compinit registers _lyh from $comp"

# ---- 3. completion on a pty --------------------------------------------------------
# The interactive shell sources init.zsh: compinit, TAB = complete-word, and
# compadd wrapped: calls that only ask for matches (-O, -A, -D: _describe and
# _arguments filtering) pass through; the others add their matches, which
# `builtin compadd -A` (same arguments, same matching against the prefix)
# records first. comppostfuncs writes the record to $_T_DIR/out at the end of
# the completion.
cat >"$tmp/init.zsh" <<'EOF'
PS1='' PROMPT='' RPROMPT='' PS2=''
exec 2>>"$_T_DIR/err"
fpath=("$_T_SRC/scripts/completions" $fpath)
autoload -Uz compinit && compinit -u -D
zstyle ':completion:*' insert-tab false
typeset -ga _t_hits
compadd() {
    if (( ${#${(M)@[1,(i)--]:#-[OAD]*}} )); then
        builtin compadd "$@"
        return
    fi
    local -a _t_m
    builtin compadd -A _t_m "$@"
    _t_hits+=("${_t_m[@]}")
    builtin compadd "$@"
}
_t_report() {
    print -rl -- "${(@ou)_t_hits}" >"$_T_DIR/out.tmp" && mv "$_T_DIR/out.tmp" "$_T_DIR/out"
    _t_hits=()
}
comppostfuncs=(_t_report)
bindkey '^I' complete-word
EOF
# drive.zsh LINE: type LINE and TAB on a pty, wait (10 s at most) for the
# record, print it. The pty's output is drained (bounded) so the shell never
# blocks on a full terminal, and kept in $_T_DIR/pty for a failure message.
cat >"$tmp/drive.zsh" <<'EOF'
zmodload zsh/zpty || exit 3
zpty t zsh -f -i || exit 3
zpty -w t "source ${(q)_T_DIR:h:h}/init.zsh"
zpty -w -n t "$1"$'\t'
integer i j
for i in {1..100}; do
    for j in {1..200}; do zpty -r -t t chunk 2>/dev/null || break; print -rn -- "$chunk" >>"$_T_DIR/pty"; done
    [[ -f $_T_DIR/out ]] && break
    sleep 0.1
done
zpty -d t
[[ -f $_T_DIR/out ]] || { print -r -- "no completion after 10 s"; exit 1; }
print -r -- "${(j: :)${(f)"$(<$_T_DIR/out)"}}"
EOF

# A fake /sys/class/net and a fake lyh (named lyh, so compdef dispatches to
# _lyh) that prints `lyh sessions --json`.
mkdir -p "$tmp/net/tun0" "$tmp/net/wg1" "$tmp/net/eth0" "$tmp/fake" "$tmp/dir/sub" "$tmp/cases"
touch "$tmp/dir/policy.toml"
cat >"$tmp/fake/lyh" <<'FAKE'
#!/bin/sh
if [ "$1 $2" = "ls --json" ]; then
    echo '{"name":"build","session":"00112233aabbccdd","pid":42,"attached":false}'
    echo '{"name":"review-2","session":"ffeeddccbbaa9988","pid":43,"attached":true}'
    exit 0
fi
[ "$1 $2" = "sessions --json" ] || exit 2
echo '{"id":"00112233aabbccdd","uid":1000,"pid":42,"interface":"tun0"}'
echo '{"id":"ffeeddccbbaa9988","uid":1000,"pid":43,"interface":"wg1"}'
FAKE
chmod +x "$tmp/fake/lyh"

fails=0
n=0
# expect "EXPECTED" LINE: TAB at the end of LINE offers exactly EXPECTED
# (sorted, space-separated).
expect() {
    want=$1 line=$2
    n=$((n + 1))
    d=$tmp/cases/$n
    mkdir "$d"
    got=$(cd "$tmp" && _LYH_SYS_NET=$tmp/net _T_DIR=$d _T_SRC=$src timeout -k 2 20 \
        zsh -f "$tmp/drive.zsh" "$line" 2>&1)
    # the shell on the pty may say this as `zpty -d` takes the pty away
    # after the record was made (seen under load): not the completion's word
    if [ -s "$d/err" ]; then
        grep -v 'error on TTY read: Input/output error' "$d/err" >"$d/err.real" || true
        mv "$d/err.real" "$d/err"
    fi
    if [ "$got" = "$want" ] && [ ! -s "$d/err" ]; then
        echo "ok   [$line] -> $got"
    else
        echo "FAIL [$line] -> '$got', want '$want'"
        [ -s "$d/err" ] && sed 's/^/    stderr: /' "$d/err"
        [ -s "$d/pty" ] && { cat "$d/pty"; echo; } | tr -d '\r' |
            sed 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1b[()][A-Z0-9]//g' | tail -n 5 | sed 's/^/    pty: /'
        fails=$((fails + 1))
    fi
}

expect "attach audit capabilities config doctor install kill ls policy run sessions status stop uninstall" "lyh "
expect "audit" "lyh au"
expect "query" "lyh audit q"
expect "export follow query summary" "lyh audit "
expect "--vpn" "lyh run --v"
expect "--socket" "lyh --so"
expect "status stop" "lyh --socket /x st"
expect "none tun0 wg1" "lyh run --vpn "
expect "none" "lyh run --vpn n"
expect "wg1" "lyh install --vpn w"
expect "--uid" "lyh audit follow --u"
expect "--help --json --toml" "lyh policy get --"
expect "--csv" "lyh audit query --c"
expect "--by-name" "lyh audit summary --b"
expect "--grace --help" "lyh stop --"
expect "get" "lyh policy g"
expect "trust" "lyh config tr"
expect "--origin" "lyh config show --o"
expect "--help --json" "lyh doctor -"
expect "00112233aabbccdd ffeeddccbbaa9988" "$tmp/fake/lyh audit query --session "
expect "ffeeddccbbaa9988" "$tmp/fake/lyh audit follow --session=ff"
expect "policy.toml sub" "lyh policy set $tmp/dir/"
expect "build review-2" "$tmp/fake/lyh attach "
expect "review-2" "$tmp/fake/lyh kill r"
expect "--detach" "lyh run --det"

if [ "$fails" -ne 0 ]; then
    echo "completion_zsh: $fails of $n cases failed"
    exit 1
fi
echo "completion_zsh: loads, and $n completion cases ok"
