#!/usr/bin/python3
"""A compromised protocol process, for tests/e2e/privsep.sh.

lyhd --protocol-exe runs this instead of its own protocol process: as user
_lyhd, fd 3 its socket to the parent, argv "--protocol-process 3 UID GID
FLAGS". It runs the real protocol process (LYH_EVIL_REAL: a copy of lyhd it
can execute) behind a socketpair of its own and passes every message between
the two unchanged, fds included, so lyhd's clients are served and the
sessions' DNS works: it sits where an attacker who owns the protocol
process sits. Each instance reads and bumps a counter in STATE_DIR (the env
var LYH_EVIL_DIR names it) and then, as that attacker would:
  1. learns the sessions from the parent's DNS_START messages (it keeps
     duplicates of their DNS sockets);
  2. sends well-formed but hostile requests of its own, each of which the
     parent must refuse without installing anything: addresses for a name
     the session may not resolve, for a session that does not exist, an
     answer that asks for no confirmation, records for a session that does
     not exist, a burst of forged records;
  3. sends one malformed message, a different kind per instance (the
     counter picks it), which must end it.
It also asks for what the parent must grant (an allowed name's public
address: the worst case of a compromised protocol process). Once every kind
was sent, an instance only passes messages on until the parent closes.
Its own requests use ids from EVIL_REQ up, so that the parent's answers to
them are told apart from those for the real process (logged, not passed).
Any instance also keeps a connection open after its client left, when
the test asks (STATE_DIR/hold names how, and goes once used): it holds back
the real process's CONN_GONE of the next connection that made a request,
and with "replay" sends that request again on it (as if the client were
still there), with "keep" only holds it (a stream of the client's would run
on); it logs "held gone", then "held answered" for any bytes the parent
sends that connection and "held closed" when the parent closes it, and
gives the parent its CONN_GONE then.
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
MODES = ["lan-address", "bad-version", "conn-listener", "request-non-canonical", "parent-type",
         "ready-twice", "fd-attached"]
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


EVIL_REQ = 0x7ff00000  # its own DNS_ANSWER ids (the real process counts up from 1)


def main():
    if len(sys.argv) not in (6, 7) or sys.argv[1] != "--protocol-process":
        return 2
    sock = socket.socket(fileno=int(sys.argv[2]))
    # the real protocol process, behind a socketpair: its fd 3
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    real = os.environ.get("LYH_EVIL_REAL", "/nonexistent")
    child = os.fork()
    if child == 0:
        os.dup2(theirs.fileno(), 3)
        os.closerange(4, 1024)
        os.execve(real, [real] + sys.argv[1:], dict(os.environ))
    theirs.close()
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

    sessions, kept, conns = [], [], []
    reqs, held = {}, {}  # a connection's last whole request; CONN_GONEs held back
    hold_path = os.path.join(STATE, "hold")
    marker_due = [False]  # the real process sent fds: its FDS_CLOSED comes next
    listener, next_id = [], [0]  # the listening socket it was handed; the next connection id

    def recv(s):
        fds = array.array("i")
        msg, anc, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(16 * fds.itemsize))
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
        return msg, list(fds)

    def forward(to, msg, fds):
        to.sendmsg([msg], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else [])

    # the real process says READY itself: its first message is passed on
    def read(timeout, until=lambda: False):
        end = time.monotonic() + timeout
        while not until():
            left = end - time.monotonic()
            if left <= 0:
                return
            ready = select.select([sock, ours], [], [], left)[0]
            if ours in ready:
                msg, fds = recv(ours)
                if not msg:
                    log("real protocol process gone")
                    sys.exit(0)
                if struct.unpack(">H", msg[:2])[0] == 6:  # CONN_OPEN: a client's connection
                    conns.append(struct.unpack(">Q", msg[8:16])[0])
                    next_id[0] = conns[-1] + 1
                t = struct.unpack(">H", msg[:2])[0]
                if t == 8 and not fds and len(msg) >= 24:  # REQUEST: id, total, offset, bytes
                    cid, total, offset = struct.unpack(">QII", msg[8:24])
                    if offset == 0 and total == len(msg) - 24:
                        reqs[cid] = msg
                if t == 7 and os.path.exists(hold_path):  # CONN_GONE
                    cid = struct.unpack(">Q", msg[8:16])[0]
                    if cid in reqs and not marker_due[0]:
                        with open(hold_path) as f:
                            how = f.read().strip()
                        os.unlink(hold_path)
                        held[cid] = msg
                        log("held gone %d %s" % (cid, how))
                        if how == "replay":
                            sock.send(reqs[cid])
                        continue
                marker_due[0] = bool(fds) or (marker_due[0] and struct.unpack(">H", msg[:2])[0] != 13)
                forward(sock, msg, fds)
                for fd in fds:
                    os.close(fd)
            if sock in ready:
                msg, fds = recv(sock)
                if not msg:
                    log("parent closed")
                    sys.exit(0)
                t = struct.unpack(">H", msg[:2])[0]
                if t in (72, 73) and struct.unpack(">Q", msg[8:16])[0] in held:  # OUT, CONN_CLOSE
                    cid = struct.unpack(">Q", msg[8:16])[0]
                    if t == 72:
                        log("held answered %d" % cid)
                    else:
                        log("held closed %d" % cid)
                        sock.send(held.pop(cid))
                    for fd in fds:
                        os.close(fd)
                    continue
                if t == 67 and struct.unpack(">I", msg[8:12])[0] >= EVIL_REQ:
                    req, status = struct.unpack(">Ii", msg[8:16])
                    log("answered req %d status %d" % (req - EVIL_REQ, status))
                    continue
                if t == 71:  # CONN_ADOPT: a client's connection from an earlier instance
                    conns.append(struct.unpack(">Q", msg[8:16])[0])
                if t == 70 and fds:  # LISTEN_START: lyhd's listening socket, and the first id
                    listener.append(os.dup(fds[0]))
                    next_id[0] = struct.unpack(">Q", msg[8:16])[0]
                if t == 64:
                    sid = msg[9:9 + msg[8]].decode()
                    sessions.append(sid)
                    log("dns_start %s fds %d" % (sid, len(fds)))
                    kept.extend(os.dup(fd) for fd in fds)  # a session's DNS sockets: ours too
                forward(ours, msg, fds)
                for fd in fds:
                    os.close(fd)

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
    sock.send(answer(EVIL_REQ + 6, sid, ALLOWED, [a4(11, 77, 1, 93)]))
    sock.send(answer(EVIL_REQ + 1, sid, "denied.test", [a4(11, 77, 1, 99)]))
    sock.send(answer(EVIL_REQ + 2, "ffffffffffffffff", ALLOWED, [a4(11, 77, 1, 98)]))
    sock.send(answer(EVIL_REQ + 3, sid, ALLOWED, [a4(11, 77, 1, 97)], want_reply=False))
    sock.send(record("ffffffffffffffff", "ghost.test"))
    for i in range(300):
        sock.send(record(sid, "forged-%d.test" % i))
    read(1.0)
    log("hostile sent")

    bad_fds = []
    if mode == "lan-address":
        bad = answer(EVIL_REQ + 4, sid, ALLOWED, [a4(11, 77, 1, 95), a4(192, 168, 77, 2)])
    elif mode == "bad-version":
        bad = dgram(3, record(sid, "x.test")[8:], version=2)
    elif mode == "conn-listener":
        # lyhd's own listening socket as a "client", under the right next id:
        # SO_PEERCRED on it names root (whoever called listen)
        bad, bad_fds = dgram(6, struct.pack(">Q", next_id[0])), listener[:1]
        log("conn-open of the listener as connection %d" % next_id[0])
    elif mode == "request-non-canonical":
        # Capabilities with call_id 1 as a two-byte varint: protobuf-c decodes it,
        # but it is not the encoding protobuf-c makes
        body = b"\x08\x81\x00\x10\x01\x52\x00"
        cid = conns[-1] if conns else 1
        log("request on connection %d" % cid)
        bad = dgram(8, struct.pack(">QII", cid, len(body), 0) + body)
    elif mode == "parent-type":
        bad = dgram(64, s(sid) + s("eth0") + b"\x01\x01" + a4(192, 168, 77, 2) + b"\x00" +
                    struct.pack(">H", 0))
    elif mode == "ready-twice":  # the real process said it once already
        bad = dgram(1, struct.pack(">I", os.getpid()))
    else:  # fd-attached: only the client connections' messages carry fds
        # First, well-formed: an fd for the parent to close (a pipe's write
        # end, ours closed), which it must hold untouched until our
        # FDS_CLOSED says we closed our copy, and close then.
        read(2, until=lambda: not marker_due[0])
        if conns and not marker_due[0]:
            r, w = os.pipe()
            forward(sock, dgram(11, struct.pack(">Q", conns[-1])), [w])  # FDS
            os.close(w)
            time.sleep(0.5)
            log("fds: before FDS_CLOSED the parent %s the fd" %
                ("closed" if select.select([r], [], [], 0)[0] else "held"))
            sock.send(dgram(13, struct.pack(">Q", conns[-1])))  # FDS_CLOSED
            log("fds: after FDS_CLOSED the parent %s the fd" %
                ("closed" if select.select([r], [], [], 2)[0] else "held"))
            os.close(r)
        else:
            log("fds: no connection to name")
        bad, bad_fds = record(sid, "with-fd.test"), [os.open("/dev/null", os.O_RDONLY)]
    read(2, until=lambda: not marker_due[0])  # never between the real process's pair
    log("malformed sent %s" % mode)  # before: the parent may end us at once
    forward(sock, bad, bad_fds)
    if mode == "conn-listener":  # the parent acts on it once we say our copy is closed
        os.close(bad_fds[0])
        sock.send(dgram(13, struct.pack(">Q", next_id[0])))  # FDS_CLOSED
    read(5)
    log("survived %s" % mode)
    return 3


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (BrokenPipeError, ConnectionResetError):
        log("parent gone")
        sys.exit(0)
