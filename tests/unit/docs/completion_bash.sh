#!/bin/bash
# completion_bash.sh SRC_DIR: scripts/completions/lyh.bash loads cleanly and
# completes a few cases, driven through COMP_WORDS/COMP_CWORD.
src=${1:?usage: completion_bash.sh SRC_DIR}
comp=$src/scripts/completions/lyh.bash
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM # sh runs no EXIT trap on a fatal signal

# Loads without a word on stderr and registers the function.
out=$(bash --norc -c "source '$comp'; complete -p lyh" 2>"$tmp/err")
if [ -s "$tmp/err" ] || [ "$out" != "complete -F _lyh lyh" ]; then
    echo "completion_bash: loading failed: '$out'"
    cat "$tmp/err"
    exit 1
fi

# A fake /sys/class/net and a fake lyh that prints `lyh sessions --json`.
mkdir -p "$tmp/net/tun0" "$tmp/net/wg1" "$tmp/net/eth0" "$tmp/dir/sub"
touch "$tmp/dir/policy.toml"
cat >"$tmp/fakelyh" <<'FAKE'
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
chmod +x "$tmp/fakelyh"

fails=0
n=0
# expect "EXPECTED" WORDS...: completing the last word gives exactly EXPECTED.
expect() {
    want=$1
    shift
    n=$((n + 1))
    got=$(_LYH_SYS_NET=$tmp/net bash --norc -c '
        source "$0"
        COMP_WORDS=("${@}")
        COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        _lyh
        echo "${COMPREPLY[*]}"' "$comp" "$@" 2>&1)
    if [ "$got" = "$want" ]; then
        echo "ok   [$*] -> $got"
    else
        echo "FAIL [$*] -> '$got', want '$want'"
        fails=$((fails + 1))
    fi
}

expect "audit" lyh au
expect "query" lyh audit q
expect "--vpn" lyh run --v
expect "--socket" lyh --so
expect "stop status" lyh --socket /x st
expect "tun0 wg1 none" lyh run --vpn ""
expect "none" lyh run --vpn n
expect "" lyh install --vpn n
expect "wg1" lyh install --vpn w
expect "--uid" lyh audit follow --u
expect "" lyh audit follow --unt
expect "" lyh audit summary --ki
expect "--by-name" lyh audit summary --b
expect "--grace --help" lyh stop --
expect "--quiet" lyh run --qu
expect "--json --toml --help" lyh policy get --
expect "--csv" lyh audit query --c
expect "get" lyh policy g
expect "trust" lyh config tr
expect "--origin" lyh config show --o
expect "00112233aabbccdd ffeeddccbbaa9988" "$tmp/fakelyh" audit query --session ""
expect "ffeeddccbbaa9988" "$tmp/fakelyh" audit follow --session ff
expect "" "$tmp/no-such-lyh" audit query --session ""
expect "$tmp/dir/policy.toml $tmp/dir/sub" lyh policy set "$tmp/dir/"
expect "$tmp/dir/sub" lyh run --cwd "$tmp/dir/"
expect "--json --help" lyh doctor -
expect "attach" lyh att
expect "build review-2" "$tmp/fakelyh" attach ""
expect "review-2" "$tmp/fakelyh" kill r
expect "build" "$tmp/fakelyh" attach --read-only b
expect "--name" lyh run --nam

if [ "$fails" -ne 0 ]; then
    echo "completion_bash: $fails of $n cases failed"
    exit 1
fi
echo "completion_bash: $n cases ok"
