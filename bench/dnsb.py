#!/usr/bin/python3
"""DNS load for bench/run item 8 (standard library only).

dnsb.py lat N ADDR          N sequential A queries (nN.bench.test) to ADDR:53;
                            prints one line per answered query: "q <us>"
dnsb.py rate N ADDR WINDOW  N queries, at most WINDOW outstanding, over one
                            UDP socket; prints "rate <answered> <sent> <us>"
"""
import select
import socket
import struct
import sys
import time


def query(i):
    name = "n%d.bench.test" % (i % 250 + 1)
    body = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    return struct.pack("!HHHHHH", i & 0xFFFF, 0x0100, 1, 0, 0, 0) + body + struct.pack("!HH", 1, 1)


mode, n, addr = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((addr, 53))
if mode == "lat":
    s.settimeout(2)
    for i in range(n):
        t = time.perf_counter_ns()
        s.send(query(i))
        try:
            while True:
                r = s.recv(2048)
                if r[:2] == struct.pack("!H", i & 0xFFFF):
                    break
            print("q %d" % ((time.perf_counter_ns() - t) // 1000))
        except socket.timeout:
            pass
else:
    window = int(sys.argv[4])
    s.setblocking(False)
    sent = answered = 0
    t0 = time.perf_counter_ns()
    deadline = time.monotonic() + 30
    while answered < n and time.monotonic() < deadline:
        while sent < n and sent - answered < window:
            try:
                s.send(query(sent))
                sent += 1
            except BlockingIOError:
                break
        got = 0
        try:
            while True:
                s.recv(2048)
                answered += 1
                got += 1
        except BlockingIOError:
            pass
        # nothing came and nothing can be sent: wait for answers; a second of
        # silence ends the run (what is outstanding then counts as lost)
        if not got and (sent == n or sent - answered >= window):
            if not select.select([s], [], [], 1.0)[0]:
                break
    print("rate %d %d %d" % (answered, sent, (time.perf_counter_ns() - t0) // 1000))
