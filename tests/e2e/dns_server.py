#!/usr/bin/python3
"""A tiny authoritative DNS server for the e2e tests (UDP and TCP).

dns_server.py ADDR PORT LOG NAME=IP[,IP...] ...
Answers A/AAAA for the names given (lower case), NXDOMAIN for others, and
appends one line per query to LOG: "<proto> <name> <type>". Runs until killed.
Standard library only; written for the tests, not for the world."""
import socket
import struct
import sys
import threading

addr, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
table = {}
for arg in sys.argv[4:]:
    name, ips = arg.split("=", 1)
    table[name.lower()] = ips.split(",")
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
    for ip in table.get(name, []):
        fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
        if (qtype == 1 and fam == socket.AF_INET) or (qtype == 28 and fam == socket.AF_INET6):
            rd = socket.inet_pton(fam, ip)
            rrs.append(b"\xc0\x0c" + struct.pack("!HHIH", qtype, 1, 60, len(rd)) + rd)
    rcode = 0 if name in table else 3
    hdr = struct.pack("!HHHHHH", qid, 0x8400 | (flags & 0x0100) | rcode, 1, len(rrs), 0, 0)
    return hdr + question + b"".join(rrs)


class PROTO:
    name = "udp"


def serve_udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    while True:
        q, peer = s.recvfrom(4096)
        r = answer(q)
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
