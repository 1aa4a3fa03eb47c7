#!/bin/sh
# darwin_syntax.sh CC SRC_DIR: the Darwin-only sources, and the Darwin
# branches of the portable ones, compile on Linux with our warnings against
# platform/darwin/stub/apple.h (-DLYH_DARWIN_STUBS). So code that only runs on
# a Mac cannot rot unseen here. A file that fails prints the compiler's
# message and the test fails.
set -u
cc=${1:?usage: darwin_syntax.sh CC SRC_DIR}
src=${2:?usage: darwin_syntax.sh CC SRC_DIR}
flags="-std=gnu17 -fsyntax-only -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes
  -Wmissing-prototypes -Wformat=2 -Wpointer-arith -Wvla -Wno-unused-parameter
  -D_GNU_SOURCE -DLYH_VERSION=\"0\" -DLYH_DARWIN_STUBS -I$src
  -include $src/platform/darwin/darwin_sys.h"

# Darwin-only: never built on Linux otherwise (the Mac test tool too).
only="platform/darwin/route.c platform/darwin/rtmsg.c tests/darwin/darwin_tool.c"
# Portable files with Darwin branches (AF_LINK, F_GETPATH,
# POSIX_SPAWN_CLOEXEC_DEFAULT) that the stub header switches on.
branches="platform/ifaces.c platform/darwin/sandbox_exec.c platform/darwin/pf.c"

fail=0
n=0
for f in $only $branches; do
    n=$((n + 1))
    if [ ! -s "$src/$f" ]; then
        echo "FAIL $f: missing or empty"
        fail=1
        continue
    fi
    # shellcheck disable=SC2086
    if out=$($cc $flags -c "$src/$f" 2>&1); then
        echo "ok   $f"
    else
        echo "FAIL $f"
        echo "$out"
        fail=1
    fi
done
# The switches really are on in that build: a Darwin branch that silently
# fell back to the Linux one would make this check pointless.
probe='#ifndef F_GETPATH
#error F_GETPATH not declared by the stub
#endif
#ifndef POSIX_SPAWN_CLOEXEC_DEFAULT
#error POSIX_SPAWN_CLOEXEC_DEFAULT not declared by the stub
#endif
#ifndef AF_LINK
#error AF_LINK not declared by the stub
#endif
struct rt_msghdr probe_rtm;
struct sockaddr_dl probe_sdl;'
# shellcheck disable=SC2086
if out=$(printf '%s\n' "$probe" | $cc $flags -x c -c - 2>&1); then
    echo "ok   stub declarations are in effect"
else
    echo "FAIL stub declarations"
    echo "$out"
    fail=1
fi
# The Mac-only check script parses.
if sh -n "$src/tests/darwin/mac_checks.sh"; then
    echo "ok   tests/darwin/mac_checks.sh parses"
else
    echo "FAIL tests/darwin/mac_checks.sh does not parse"
    fail=1
fi
echo "darwin_syntax: $n files checked"
exit $fail
