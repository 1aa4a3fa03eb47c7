#!/usr/bin/python3
"""Write the seed corpus fuzz/corpus/pmsg/ (usage: gen_pmsg_seeds.py fuzz/corpus/pmsg):
one valid datagram of each message between lyhd's two processes (daemon/pmsg.h)."""
import os
import struct
import sys

D = sys.argv[1]
os.makedirs(D, exist_ok=True)


def dgram(t, payload):
    return struct.pack(">HHI", t, 1, len(payload)) + payload


def s(text):
    b = text.encode()
    return bytes([len(b)]) + b


def a4(*o):
    return b"\x04" + bytes(o)


SID = s("0123456789abcdef")
seeds = {
    "ready": dgram(1, struct.pack(">I", 4242)),
    "answer_a": dgram(2, struct.pack(">I", 7) + SID + s("n1.allowed.test") + b"\x01" +
                      struct.pack(">HIB", 1, 300, 2) + a4(11, 77, 0, 1) + a4(11, 77, 0, 2)),
    "answer_aaaa": dgram(2, struct.pack(">I", 0) + SID + s("v6.test") + b"\x00" +
                         struct.pack(">HIB", 28, 60, 1) + b"\x06" + bytes(15) + b"\x01"),
    "record": dgram(3, SID + bytes([1, 0]) + struct.pack(">H", 1) + b"\x00\x00" +
                    struct.pack(">HIII", 0, 300, 0, 0) + s("allowed.test") + b"\x01" + a4(11, 77, 0, 1)),
    "record_gap": dgram(3, SID + bytes([0, 0]) + struct.pack(">H", 0) + b"\x00\xff" +
                        struct.pack(">HIII", 0, 0, 12, 3) + s("") + b"\x00"),
    "start": dgram(64, SID + s("tun0") + b"\x03\x01" + a4(10, 77, 0, 2) + b"\x02" +
                   struct.pack(">H", 27) + b"allowed.test\0*.example.org\0"),
    "stop": dgram(65, SID),
    "policy": dgram(66, b"\x01" + s("*.evil.test") + b"\x02" + s("*.example.org") + s("allowed.test")),
    "answered": dgram(67, struct.pack(">Ii", 7, -1)),
    # FLOWS: overruns, bad, unsent, n, then per event: verdict, origin,
    # session, uid, flags (time 1, skuid 2, seq 4, ports 8), time (u64),
    # skuid, seq, oif, family (0/4/6), protocol, src, dst, sport, dport
    "flows": dgram(4, struct.pack(">IIIB", 0, 1, 0, 3) +
                   b"\x02\x01" + SID + struct.pack(">IB", 0, 15) +
                   struct.pack(">QIII", 1796280226103105, 1001, 41, 3) + b"\x04\x06" +
                   bytes([10, 77, 0, 1]) + bytes([192, 168, 77, 2]) + struct.pack(">HH", 40000, 7777) +
                   b"\x01\x02" + s("") + struct.pack(">IB", 1001, 5) +
                   struct.pack(">QIII", 1796280226103200, 0, 42, 3) + b"\x06\x11" +
                   bytes(15) + b"\x01" + bytes(15) + b"\x02" + bytes(4) +
                   b"\x02\x03" + s("") + struct.pack(">IB", 0, 0) +
                   struct.pack(">QIII", 0, 0, 0, 0) + b"\x00\x00" + bytes(4)),
    "flows_synced": dgram(5, struct.pack(">I", 3)),
    "nflog_start": dgram(68, b""),
    "flows_sync": dgram(69, struct.pack(">I", 3)),
    # the client connections: u64 id first
    "conn_open": dgram(6, struct.pack(">Q", 1)),
    "conn_gone": dgram(7, struct.pack(">Q", 1)),
    # REQUEST: id, total, offset, bytes (Capabilities, call id 1, protocol 1)
    "request": dgram(8, struct.pack(">QII", 1, 6, 0) + b"\x08\x01\x10\x01\x52\x00"),
    "request_piece": dgram(8, struct.pack(">QII", 2, 40000, 16320) + bytes(100)),
    # REFUSE: id, call id, code, flags, text
    "refuse": dgram(9, struct.pack(">QQBB", 1, 7, 3, 0) + s("request names no method")),
    "refuse_close": dgram(9, struct.pack(">QQBB", 1, 0, 3, 1) + s("call_id must be non-zero")),
    "drained": dgram(10, struct.pack(">QI", 1, 4096)),
    "fds": dgram(11, struct.pack(">Q", 1)),
    "midframe": dgram(12, struct.pack(">Q", 1)),
    "listen_start": dgram(70, struct.pack(">QIB", 1, 5000, 3)),
    "conn_adopt": dgram(71, struct.pack(">Q", 3)),
    # OUT: id, requests taken, flags (1: idle), bytes
    "out": dgram(72, struct.pack(">QIB", 1, 0, 0) + b"\x00\x00\x00\x00\x02\x08\x01"),
    "out_idle": dgram(72, struct.pack(">QIB", 1, 4, 1) + b"\x00\x00\x00\x00\x02\x08\x01"),
    "conn_close": dgram(73, struct.pack(">Q", 1)),
    "conn_pause": dgram(74, struct.pack(">QB", 1, 1)),
    # CAPS: flags (cgroup2, listeners), Landlock ABI, fds per message, calls per connection
    "caps": dgram(75, struct.pack(">BBBH", 3, 7, 3, 16)),
}
for k, v in seeds.items():
    with open(os.path.join(D, k), "wb") as f:
        f.write(v)
