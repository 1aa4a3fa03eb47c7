#!/usr/bin/python3
"""Write the seed corpus fuzz/corpus/dns/ (usage: gen_dns_seeds.py fuzz/corpus/dns):
queries and answers built by hand, for fuzz_dns."""
import os
import struct
import sys

D = sys.argv[1]
os.makedirs(D, exist_ok=True)


def hdr(i, flags, qd, an, ns, ar):
    return struct.pack(">HHHHHH", i, flags, qd, an, ns, ar)


def name(n):
    return b"".join(bytes([len(l)]) + l.encode() for l in n.split(".") if l) + b"\0"


def ptr(off):
    return struct.pack(">H", 0xC000 | off)


def rr(owner, t, ttl, rdata, cls=1):
    return owner + struct.pack(">HHIH", t, cls, ttl, len(rdata)) + rdata


OPT = b"\0" + struct.pack(">HHIH", 41, 1232, 0, 0)
Q = name("example.com") + struct.pack(">HH", 1, 1)  # at 12; "com" at 20
seeds = {}
seeds["query_a"] = hdr(0x1234, 0x0100, 1, 0, 0, 0) + Q
seeds["query_edns_cookie"] = (hdr(0x2345, 0x0100, 1, 0, 0, 1) + name("www.example.com")
                              + struct.pack(">HH", 28, 1) + b"\0"
                              + struct.pack(">HHIH", 41, 4096, 0, 12) + struct.pack(">HH", 10, 8)
                              + bytes(range(8)))
seeds["query_mixed_case"] = hdr(0x3456, 0x0100, 1, 0, 0, 1) + name("WwW.ExAmPlE.CoM") + struct.pack(">HH", 1, 1) + OPT
seeds["query_chaos"] = hdr(0x4567, 0x0100, 1, 0, 0, 0) + name("version.bind") + struct.pack(">HH", 16, 3)
seeds["answer_a"] = (hdr(0x1234, 0x8180, 1, 2, 0, 1) + Q + rr(ptr(12), 1, 300, bytes([192, 0, 2, 1]))
                     + rr(ptr(12), 1, 200, bytes([192, 0, 2, 2])) + OPT)
# example.com CNAME edge.cdn.example.net, then edge's A records; and the same
# records in reverse order.
cn_target = name("edge.cdn.example.net")
cname = rr(ptr(12), 5, 120, cn_target)
edge_off = 12 + len(Q) + 12
seeds["answer_cname"] = (hdr(0x5678, 0x8180, 1, 3, 0, 0) + Q + cname
                         + rr(ptr(edge_off), 1, 60, bytes([203, 0, 113, 3]))
                         + rr(ptr(edge_off), 1, 60, bytes([203, 0, 113, 4])))
edge = name("edge.cdn.example.net")
rev_a = rr(edge, 1, 60, bytes([203, 0, 113, 3]))
seeds["answer_cname_reverse"] = (hdr(0x6789, 0x8180, 1, 2, 0, 0) + Q + rev_a
                                 + rr(ptr(12), 5, 120, ptr(12 + len(Q))))
soa = (name("ns.example.com")[:3] + ptr(20) + b"\x0ahostmaster" + ptr(12)
       + struct.pack(">IIIII", 1, 7200, 900, 86400, 60))
seeds["answer_nxdomain_soa"] = hdr(0x789a, 0x8183, 1, 0, 1, 1) + Q + rr(ptr(12), 6, 900, soa) + OPT
seeds["answer_aaaa"] = (hdr(0x89ab, 0x8180, 1, 1, 0, 0) + name("example.com") + struct.pack(">HH", 28, 1)
                        + rr(ptr(12), 28, 3600, bytes([0x20, 1, 0xd, 0xb8] + [0] * 11 + [1])))
seeds["answer_many"] = (hdr(0x9abc, 0x8180, 1, 20, 0, 0) + Q
                        + b"".join(rr(ptr(12), 1, 30, bytes([10, 0, 0, i])) for i in range(20)))
# Owners that chain pointers: each "p" and a pointer to the one before.
chain, prev, off = b"", 12, 12 + len(Q)
for i in range(16):
    rec = rr(b"\x01p" + ptr(prev), 16, 10, b"\x01x")
    chain += rec
    prev, off = off, off + len(rec)
seeds["answer_pointer_chain"] = hdr(0xabcd, 0x8180, 1, 0, 16, 0) + Q + chain
# One more: 17 pointers in the last owner, refused.
seeds["answer_pointer_chain_17"] = (hdr(0xabce, 0x8180, 1, 0, 17, 0) + Q + chain
                                    + rr(b"\x01p" + ptr(prev), 16, 10, b"\x01x"))
seeds["answer_truncated_tc"] = hdr(0xbcde, 0x8380, 1, 0, 0, 0) + Q
for k, v in seeds.items():
    open(os.path.join(D, k), "wb").write(v)
print(f"{len(seeds)} dns seeds")
