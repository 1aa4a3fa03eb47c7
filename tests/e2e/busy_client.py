#!/usr/bin/python3
"""Keep lyhd as busy as one local user can with cheap requests: CONNS
connections, each with its send buffer kept full of pipelined Capabilities
frames, answers read as they come (so lyhd never drops it for not reading).
Another user's request must still be answered at once: requests are taken
from the clients in turn, not in the order their bytes arrived.

usage: busy_client.py SOCKET CONNS SECONDS
Prints how many answers it read. Exits 0 after SECONDS, 1 if it could not
connect or lyhd answered nothing.
"""
import selectors
import socket
import struct
import sys
import time


def frame(call_id):
    body = b"\x08" + bytes([call_id % 127 + 1]) + b"\x10\x01\x52\x00"  # capabilities {}
    return b"\x00" + struct.pack(">I", len(body)) + body


def main():
    path, conns, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    chunk = b"".join(frame(i) for i in range(1, 4097))
    sel = selectors.DefaultSelector()
    socks = []
    for _ in range(conns):
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, [0])
        socks.append(s)
    answered = 0
    t_end = time.time() + secs
    while time.time() < t_end:
        for key, ev in sel.select(timeout=0.5):
            s = key.fileobj
            try:
                if ev & selectors.EVENT_WRITE:
                    s.send(chunk)
                if ev & selectors.EVENT_READ:
                    got = s.recv(1 << 20)
                    if not got:
                        sel.unregister(s)
                        continue
                    answered += len(got)
            except BlockingIOError:
                pass
            except OSError as e:
                print("connection dropped:", e, flush=True)
                sel.unregister(s)
    print(f"read {answered} bytes of answers on {conns} connections", flush=True)
    return 0 if answered else 1


if __name__ == "__main__":
    sys.exit(main())
