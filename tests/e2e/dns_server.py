#!/usr/bin/python3
"""A tiny authoritative DNS server for the e2e tests (UDP and TCP).

dns_server.py ADDR PORT LOG NAME=IP[,IP...][/TTL] ... [*.ZONE=PREFIX.{n}]
Answers A/AAAA for the names given (lower case; TTL 60 unless given),
"nN.ZONE" with PREFIX.N for a "*.ZONE=PREFIX.{n}" entry, NXDOMAIN for others, and
appends one line per query to LOG: "<proto> <name> <type>". Runs until killed.
Standard library only; written for the tests, not for the world."""
import socket
import struct
import sys
import threading

addr, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
table, ttls, zones = {}, {}, {}
for arg in sys.argv[4:]:
    name, ips = arg.split("=", 1)
    ttl = 60
    if "/" in ips:
        ips, t = ips.split("/", 1)
        ttl = int(t)
    if name.startswith("*."):
        zones[name[2:].lower()] = ips
        continue
    table[name.lower()] = ips.split(",")
    ttls[name.lower()] = ttl


def lookup(name):
    if name in table:
        return table[name], ttls[name]
    head, _, zone = name.partition(".")
    if zone in zones and head[:1] == "n" and head[1:].isdigit():
        return [zones[zone].replace("{n}", head[1:])], 60
    return None, 0
lock = threading.Lock()


def answer(q):
    if len(q) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", q[:6])
    if qd != 1:
        return None
    i, labels = 12, []
    while i < len(q) and q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode("ascii", "replace"))
        i += 1 + q[i]
    qname_end = i + 1
    qtype, _qclass = struct.unpack("!HH", q[qname_end:qname_end + 4])
    question = q[12:qname_end + 4]
    name = ".".join(labels).lower()
    with lock, open(log, "a") as f:
        f.write("%s %s %d\n" % (PROTO.name, name, qtype))
    rrs = []
    ips, ttl = lookup(name)
    for ip in ips or []:
        fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
        if (qtype == 1 and fam == socket.AF_INET) or (qtype == 28 and fam == socket.AF_INET6):
            rd = socket.inet_pton(fam, ip)
            rrs.append(b"\xc0\x0c" + struct.pack("!HHIH", qtype, 1, ttl, len(rd)) + rd)
    rcode = 0 if ips is not None else 3
    hdr = struct.pack("!HHHHHH", qid, 0x8400 | (flags & 0x0100) | rcode, 1, len(rrs), 0, 0)
    return hdr + question + b"".join(rrs)


class PROTO:
    name = "udp"


def serve_udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    while True:
        q, peer = s.recvfrom(4096)
        try:
            r = answer(q)
        except Exception:  # a query it cannot answer: none, and go on
            r = None
        if r:
            s.sendto(r, peer)


def serve_tcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(8)
    while True:
        c, _ = s.accept()
        c.settimeout(5)
        try:
            n = struct.unpack("!H", c.recv(2))[0]
            q = b""
            while len(q) < n:
                q += c.recv(n - len(q))
            r = answer(q)
            if r:
                c.sendall(struct.pack("!H", len(r)) + r)
        except Exception:
            pass
        c.close()


threading.Thread(target=serve_tcp, daemon=True).start()
serve_udp()
