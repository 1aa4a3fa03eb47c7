#!/bin/sh
# man_flags.sh BUILD_DIR SRC_DIR: every --flag the built lyh and lyhd print in
# their --help texts must be documented (as "Fl -flag") in docs/man/lyh.1 and
# docs/man/lyhd.8. Reads --help at test time, so a new flag or command without
# a man page entry fails here.
set -u
build=${1:?usage: man_flags.sh BUILD_DIR SRC_DIR}
src=${2:?usage: man_flags.sh BUILD_DIR SRC_DIR}
lyh=$build/cli/lyh
lyhd=$build/daemon/lyhd
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

for b in "$lyh" "$lyhd"; do
    [ -x "$b" ] || { echo "man_flags: $b is not built" >&2; exit 1; }
done

# Every help text lyh prints: the top level, each listed command, each
# subcommand of audit (and config/policy, whose --help covers theirs).
# LYH_SOCKET points nowhere: --help never needs the daemon.
export LYH_SOCKET="$tmp/no-daemon.sock"
"$lyh" --help >"$tmp/lyh.help" 2>&1 || { echo "man_flags: lyh --help failed" >&2; exit 1; }
cmds=$(sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z0-9-]*\) .*/\1/p' "$tmp/lyh.help")
[ -n "$cmds" ] || { echo "man_flags: no commands in lyh --help" >&2; exit 1; }
ncmds=0
for c in $cmds; do
    ncmds=$((ncmds + 1))
    "$lyh" "$c" --help >>"$tmp/lyh.help" 2>&1
done
audit_subs=$("$lyh" audit --help 2>/dev/null | sed -n 's/^  lyh audit \([a-z]*\).*/\1/p')
for s in $audit_subs; do
    "$lyh" audit "$s" --help >>"$tmp/lyh.help" 2>&1
done
"$lyh" config --help >>"$tmp/lyh.help" 2>&1
"$lyh" policy --help >>"$tmp/lyh.help" 2>&1
"$lyhd" --help >"$tmp/lyhd.help" 2>&1 || { echo "man_flags: lyhd --help failed" >&2; exit 1; }

# check HELP PAGE: print the missing flags, return their count via $missing.
check() {
    flags=$(grep -o -- '--[a-z][a-z0-9-]*' "$1" | sort -u)
    n=0
    m=0
    for f in $flags; do
        n=$((n + 1))
        name=${f#--}
        if ! grep -Eq "Fl -$name([^a-z0-9-]|\$)" "$2"; then
            echo "  missing in ${2#"$src"/}: $f"
            m=$((m + 1))
        fi
    done
    echo "$(basename "$2"): $n flags in --help, $((n - m)) documented, $m missing"
    missing=$((missing + m))
}

missing=0
echo "lyh: $ncmds commands ($(echo $cmds)), audit subcommands: $(echo $audit_subs)"
check "$tmp/lyh.help" "$src/docs/man/lyh.1"
check "$tmp/lyhd.help" "$src/docs/man/lyhd.8"

# Every command lyh lists has a section in lyh.1.
for c in $cmds; do
    if ! grep -Eq "^\.Ss lyh $c( |\$)" "$src/docs/man/lyh.1"; then
        echo "  missing in docs/man/lyh.1: a section for lyh $c"
        missing=$((missing + 1))
    fi
done

if [ "$missing" -ne 0 ]; then
    echo "man_flags: FAIL: $missing undocumented"
    exit 1
fi
echo "man_flags: ok"
