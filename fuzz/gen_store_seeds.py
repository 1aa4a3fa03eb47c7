#!/usr/bin/python3
"""Write the seed corpora fuzz/corpus/gspec/ and fuzz/corpus/policy/ (usage:
gen_store_seeds.py fuzz/corpus): valid blobs of the two forms lyhd keeps in
state.db, a session's guard spec (daemon/guard_spec.c) and the admin policy
(daemon/policy.c, a packed Policy message of proto/lianyaohu.proto, encoded
here by hand so that no protobuf module is needed)."""
import os
import struct
import sys

D = sys.argv[1]
G = os.path.join(D, "gspec")
P = os.path.join(D, "policy")
os.makedirs(G, exist_ok=True)
os.makedirs(P, exist_ok=True)

# ---- guard spec: u8 version, u8 flags, u8 iface length + bytes, three lists;
# version 2 adds u16 dns port, the resolvers list, u8 count + domains.


def rule(addr, prefix, pmin=0, pmax=0):
    return bytes([4 if len(addr) == 4 else 6, prefix]) + struct.pack(">HH", pmin, pmax) + bytes(addr)


def rules(*r):
    return bytes([len(r)]) + b"".join(r)


def s8(text):
    b = text.encode()
    return bytes([len(b)]) + b


def v6(*head, last=0):
    return bytes(head) + bytes(15 - len(head)) + bytes([last])


def gspec(flags, iface, lan, deny, allow, dns=None):
    b = bytes([2 if dns else 1, flags]) + s8(iface) + lan + deny + allow
    if dns:
        port, resolvers, domains = dns
        b += struct.pack(">H", port) + resolvers + bytes([len(domains)]) + b"".join(s8(d) for d in domains)
    return b


NONE = rules()
gspecs = {
    "v1_empty": gspec(0, "tun0", NONE, NONE, NONE),
    "v1_lists": gspec(3, "wg0", rules(rule([192, 168, 1, 0], 24)),
                      rules(rule(v6(0xfd), 8, 443, 443), rule([11, 77, 0, 9], 32)),
                      rules(rule([11, 0, 0, 0], 8, 443, 8443), rule(v6(0x20, 0x01, 0x0d, 0xb8), 32, 22, 22))),
    "v2_domains": gspec(1, "tun0", NONE, NONE, rules(rule([11, 77, 0, 1], 32, 443, 443)),
                        (5353, rules(rule([10, 77, 0, 2], 32), rule(v6(0xfd, last=0x53), 128)),
                         ["allowed.test", "*.example.org"])),
    "v2_no_domains": gspec(2, "ppp0", rules(rule([10, 0, 0, 0], 8)), NONE, NONE,
                           (40000, rules(rule([10, 77, 0, 2], 32)), [])),
}

# ---- policy: protobuf wire format (varint = 0, length-delimited = 2).


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def fv(num, n):
    return varint(num << 3) + varint(n)


def fb(num, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(num << 3 | 2) + varint(len(b)) + b


def dest(addr, prefix, pmin=0, pmax=0):
    b = fb(1, bytes(addr)) + fv(2, prefix)
    if pmin:
        b += fv(3, pmin)
    if pmax:
        b += fv(4, pmax)
    return b


def strs(num, *v):
    return b"".join(fb(num, x) for x in v)


policies = {
    "minimal": fb(1, "tun*"),
    # the built-in default's shape
    "default": strs(1, "tun*", "wg*", "utun*") + fv(2, 1) + fv(3, 1) + fv(4, 1) +
    fb(5, dest([10, 0, 0, 0], 8)) + fb(5, dest([192, 168, 0, 0], 16)) +
    fb(5, dest(v6(0xfd), 8)) + fv(9, 1) + fv(10, 64),
    "full": strs(1, "tun0", "wg-corp") + fv(4, 1) +
    fb(5, dest([192, 168, 1, 0], 24, 80, 90)) + fb(6, dest([1, 1, 1, 1], 32)) +
    fb(6, dest(v6(0x20, 0x01, 0x0d, 0xb8), 32, 443)) + strs(7, "AWS_*", "GITHUB_TOKEN") +
    strs(8, "/home", "/srv/data") + fv(10, 16) + fv(11, 30) + fv(12, 1 << 30) + fv(13, 5) +
    strs(14, ".aws", "~/.config/gh/") + strs(16, "/run/user/*/pipewire-0") +
    strs(17, "*.example.org", "allowed.test") + strs(18, "evil.test") +
    strs(19, "10.77.0.2", "2001:db8::53"),
    # spellings the daemon canonicalises (the stored form differs from these bytes)
    "noncanonical": fb(1, "tun*") + fv(15, 1) + strs(17, "Example.COM.") +
    strs(19, "2001:0db8:0:0::0053"),
}

for d, seeds in ((G, gspecs), (P, policies)):
    for k, v in seeds.items():
        with open(os.path.join(d, k), "wb") as f:
            f.write(v)
