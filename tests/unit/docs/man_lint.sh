#!/bin/sh
# man_lint.sh SRC_DIR: mandoc -T lint reports nothing at WARNING level or above.
src=${1:?usage: man_lint.sh SRC_DIR}
if ! command -v mandoc >/dev/null 2>&1; then
    echo "man_lint: mandoc is not installed (apt-get install mandoc); skipped"
    exit 77
fi
rc=0
for p in lyh.1 lyhd.8 lianyaohu.toml.5; do
    out=$(mandoc -T lint -W warning "$src/docs/man/$p" 2>&1)
    if [ -n "$out" ]; then
        echo "$out"
        rc=1
    else
        echo "man_lint: $p clean"
    fi
    # And it renders.
    if ! mandoc -T utf8 "$src/docs/man/$p" >/dev/null 2>&1; then
        echo "man_lint: $p does not render"
        rc=1
    fi
done
exit $rc
