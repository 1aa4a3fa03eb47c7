#!/bin/sh
# completion_zsh.sh SRC_DIR: scripts/completions/_lyh parses (zsh -n).
src=${1:?usage: completion_zsh.sh SRC_DIR}
if ! command -v zsh >/dev/null 2>&1; then
    echo "completion_zsh: zsh is not installed; skipped"
    exit 77
fi
head -1 "$src/scripts/completions/_lyh" | grep -qx '#compdef lyh' ||
    { echo "completion_zsh: first line is not '#compdef lyh'"; exit 1; }
zsh -n "$src/scripts/completions/_lyh" || exit 1
echo "completion_zsh: ok"
