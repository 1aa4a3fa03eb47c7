#!/bin/sh
# The agent of held.sh (inside the sandbox, on the session's pty): says its
# name, then answers each line it reads.
name=$1
echo "$name agent-start"
while IFS= read -r line; do
    case $line in
    size) echo "$name size $(stty size)" ;;
    big) # ~222 KB on the pty (CRLF), more than the 128 KiB asked for
        sleep 1
        seq -f "big-%06g-xxxxxxxxxxxxxxxxxxxxxxxxx" 1 6000
        echo "$name big-done" ;;
    huge) # ~450 KB: more than the holder keeps
        sleep 1
        seq -f "huge-%06g-xxxxxxxxxxxxxxxxxxxxxxxx" 1 12000
        echo "$name huge-done" ;;
    "exit "*) exit "${line#exit }" ;;
    *) echo "$name got: $line" ;;
    esac
done
echo "$name eof"
