#!/usr/bin/python3
"""A compromised protocol process, for tests/e2e/privsep.sh.

lyhd --protocol-exe runs this instead of its own protocol process: as user
_lyhd, fd 3 its socket to the parent, argv "--protocol-process 3 UID GID
FLAGS". Each instance reads and bumps a counter in STATE_DIR (the env var
LYH_EVIL_DIR names it) and then, as a protocol process an attacker controls
would:
  1. says READY, learns the sessions from the parent's DNS_START messages
     (their DNS sockets come along);
  2. sends well-formed but hostile requests, each of which the parent must
     refuse without installing anything: addresses for a name the session
     may not resolve, for a session that does not exist, an answer that
     asks for no confirmation, records for a session that does not exist, a
     burst of forged records;
  3. sends one malformed message, a different kind per instance (the
     counter picks it), which must end it.
It also asks for what the parent must grant (an allowed name's public
address: the worst case of a compromised protocol process). Once every kind
was sent, an instance only says READY and reads until the parent closes.
It logs every step and every reply to STATE_DIR/log, one line each. If the
parent has not ended it 5 s after the malformed message it logs
"survived MODE" and exits 3.
(The parent's messages are version 1 of daemon/pmsg.h.)"""
import array
import os
import select
import socket
import struct
import sys
import time

STATE = os.environ.get("LYH_EVIL_DIR", "/nonexistent")
LOGF = os.path.join(STATE, "log")

# the ways to end it, one per instance, in order
MODES = ["lan-address", "bad-version", "long-length", "parent-type", "ready-twice", "fd-attached"]
ALLOWED = "n1.allowed.test"  # the test's session allows *.allowed.test


def log(line):
    with open(LOGF, "a") as f:
        f.write("%d %s\n" % (os.getpid(), line))


def dgram(t, payload, version=1, length=None):
    return struct.pack(">HHI", t, version, len(payload) if length is None else length) + payload


def s(text):
    b = text.encode()
    return bytes([len(b)]) + b


def a4(*o):
    return b"\x04" + bytes(o)


def answer(req, sid, name, addrs, want_reply=True):
    return dgram(2, struct.pack(">I", req) + s(sid) + s(name) + (b"\x01" if want_reply else b"\x00") +
                 struct.pack(">HIB", 1, 300, len(addrs)) + b"".join(addrs))


def record(sid, name):
    return dgram(3, s(sid) + bytes([1, 0]) + struct.pack(">H", 1) + b"\x00\x00" +
                 struct.pack(">HIII", 0, 300, 0, 0) + s(name) + b"\x01" + a4(11, 77, 1, 96))


def main():
    if len(sys.argv) != 6 or sys.argv[1] != "--protocol-process":
        return 2
    sock = socket.socket(fileno=int(sys.argv[2]))
    path = os.path.join(STATE, "n")
    try:
        with open(path) as f:
            n = int(f.read().strip() or "0")
    except FileNotFoundError:
        n = 0
    with open(path, "w") as f:
        f.write("%d\n" % (n + 1))
    mode = MODES[n] if n < len(MODES) else "quiet"
    log("instance %d mode %s uid %d" % (n, mode, os.getuid()))
    sock.send(dgram(1, struct.pack(">I", os.getpid())))

    sessions, kept = [], []

    def read(timeout, until=lambda: False):
        end = time.monotonic() + timeout
        while not until():
            left = end - time.monotonic()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                return
            fds = array.array("i")
            msg, anc, _, _ = sock.recvmsg(65536, socket.CMSG_SPACE(16 * fds.itemsize))
            if not msg:
                log("parent closed")
                sys.exit(0)
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
            kept.extend(fds)  # a session's DNS sockets: ours now
            t = struct.unpack(">H", msg[:2])[0]
            if t == 64:
                sid = msg[9:9 + msg[8]].decode()
                sessions.append(sid)
                log("dns_start %s fds %d" % (sid, len(fds)))
            elif t == 67:
                req, status = struct.unpack(">Ii", msg[8:16])
                log("answered req %d status %d" % (req, status))
            else:
                log("message type %d" % t)

    if mode == "quiet":
        read(300)
        return 0
    # the first instance waits for the test's session
    read(30 if n == 0 else 2, until=lambda: sessions)
    read(0.3)
    if not sessions:
        log("no session")
        return 4
    sid = sessions[0]
    sock.send(answer(6, sid, ALLOWED, [a4(11, 77, 1, 93)]))
    sock.send(answer(1, sid, "denied.test", [a4(11, 77, 1, 99)]))
    sock.send(answer(2, "ffffffffffffffff", ALLOWED, [a4(11, 77, 1, 98)]))
    sock.send(answer(3, sid, ALLOWED, [a4(11, 77, 1, 97)], want_reply=False))
    sock.send(record("ffffffffffffffff", "ghost.test"))
    for i in range(300):
        sock.send(record(sid, "forged-%d.test" % i))
    read(1.0)
    log("hostile sent")

    if mode == "lan-address":
        bad = answer(4, sid, ALLOWED, [a4(11, 77, 1, 95), a4(192, 168, 77, 2)])
    elif mode == "bad-version":
        bad = dgram(3, record(sid, "x.test")[8:], version=2)
    elif mode == "long-length":
        bad = dgram(2, answer(5, sid, ALLOWED, [a4(11, 77, 1, 94)])[8:], length=4000)
    elif mode == "parent-type":
        bad = dgram(64, s(sid) + s("eth0") + b"\x01\x01" + a4(192, 168, 77, 2) + b"\x00" +
                    struct.pack(">H", 0))
    elif mode == "ready-twice":
        bad = dgram(1, struct.pack(">I", os.getpid()))
    else:
        bad = None
    log("malformed sent %s" % mode)  # before: the parent may end us at once
    if bad is None:
        devnull = os.open("/dev/null", os.O_RDONLY)
        sock.sendmsg([record(sid, "with-fd.test")],
                     [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [devnull]))])
    else:
        sock.send(bad)
    read(5)
    log("survived %s" % mode)
    return 3


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BrokenPipeError, ConnectionResetError):
        log("parent gone")
        sys.exit(0)
