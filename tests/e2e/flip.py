#!/usr/bin/python3
"""As a user: exchange two names (RENAME_EXCHANGE) as fast as possible for
SECONDS, to race lyhd's checks of a path against its later use.

usage: flip.py PATH_A PATH_B SECONDS
"""
import ctypes
import sys
import time

RENAME_EXCHANGE = 2
AT_FDCWD = -100


def main():
    libc = ctypes.CDLL(None, use_errno=True)
    a, b, secs = sys.argv[1].encode(), sys.argv[2].encode(), float(sys.argv[3])
    end, n = time.time() + secs, 0
    while time.time() < end:
        for _ in range(200):
            libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
            n += 1
    # Leave A as it was (an even number of exchanges).
    if n % 2:
        libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
    print("exchanges", n, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
