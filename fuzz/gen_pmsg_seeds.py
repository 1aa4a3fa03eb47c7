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
}
for k, v in seeds.items():
    with open(os.path.join(D, k), "wb") as f:
        f.write(v)
