#!/usr/bin/python3
"""Capabilities answered by the protocol process itself (daemon/proto_clients.c,
answer_capabilities), checked against a running lyhd whose parent this script
stops (SIGSTOP) for moments: whatever is answered while the parent is stopped
was answered by the protocol process. Raw frames, no protobuf library.

  1. on a new connection the first Capabilities goes to the parent; the
     second (the connection now idle) is answered with the same bytes but
     the call id
  2. parent stopped: Capabilities on the idle connection is answered; Status
     is not (until the parent runs again, then it is)
  3. parent running: Status and Capabilities pipelined in one write are
     answered in request order
  4. a connection with a stream open (AuditFollow): parent stopped,
     Capabilities is not answered there (the parent answers it once it runs)
  5. 200 Capabilities on one connection, all answered
  6. parent stopped: a Capabilities answered here and left unread by the
     client; the next one is not answered while the first still waits in the
     socket (an answer of the process's own goes only into an empty one, so
     its death never leaves half of one in front of the parent's next frame)
  adopt mode (a third argument, the protocol process's pid): a connection that
  made a call outlives that process (SIGKILL; the parent starts another,
  which adopts it); then Capabilities and AuditFollow in one write, and with
  the parent stopped a Capabilities is not answered past that stream (the
  counts of requests on both sides start again at the adoption)

usage: caps_local.py SOCKET PARENT_PID [PROTO_PID]   (as root; prints
"ok ..."/"FAIL ...", exits 1 on any failure). The parent is sent SIGCONT in
every case on the way out.
"""
import fcntl
import os
import select
import signal
import socket
import struct
import sys
import termios
import time

SOCK, PARENT = sys.argv[1], int(sys.argv[2])
PROTO = int(sys.argv[3]) if len(sys.argv) > 3 else 0
fails = 0


def check(name, cond, detail=""):
    global fails
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else " " + detail), flush=True)
    if not cond:
        fails += 1


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def request(call_id, method_field, body=b""):
    msg = b"\x08" + varint(call_id) + b"\x10\x01" + varint((method_field << 3) | 2) + varint(len(body)) + body
    return struct.pack(">BI", 0, len(msg)) + msg


def read_varint(msg, i):
    v, shift = 0, 0
    while True:
        b = msg[i]; i += 1
        v |= (b & 0x7F) << shift; shift += 7
        if b < 0x80:
            return v, i


def fields(msg):
    """Top-level fields of a protobuf message: {number: value} (last wins)."""
    out, i = {}, 0
    while i < len(msg):
        key, i = read_varint(msg, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(msg, i)
        elif wt == 2:
            n, i = read_varint(msg, i)
            v = msg[i:i + n]; i += n
        else:
            raise ValueError("wire type %d" % wt)
        out[num] = v
    return out


def recv_frame(s, timeout):
    """One response's fields, or None when nothing whole came in time."""
    end = time.monotonic() + timeout
    buf = b""
    want = 5
    while len(buf) < want:
        left = end - time.monotonic()
        if left <= 0 or not select.select([s], [], [], left)[0]:
            if buf:
                raise RuntimeError("a frame cut short")
            return None
        chunk = s.recv(want - len(buf))
        if not chunk:
            raise ConnectionError("lyhd closed the connection")
        buf += chunk
        if len(buf) == 5 and want == 5:
            want = 5 + struct.unpack(">I", buf[1:5])[0]
    return fields(buf[5:])


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(SOCK)
    return s


stopped = False


def stop():
    global stopped
    os.kill(PARENT, signal.SIGSTOP)
    stopped = True
    time.sleep(0.2)


def cont():
    global stopped
    os.kill(PARENT, signal.SIGCONT)
    stopped = False


def past_stream(c, call_id, label):
    """With a stream open on c: drain what it sent, stop the parent, ask
    Capabilities (call_id): not answered while the parent is stopped (the
    protocol process must not answer past the stream), answered after."""
    time.sleep(0.5)
    while recv_frame(c, 0.2) is not None:  # what the stream sends at once
        pass
    stop()
    c.sendall(request(call_id, 10))
    got = recv_frame(c, 0.7)
    check(label + ": parent stopped, a stream open: Capabilities is not answered past it",
          got is None, repr(got))
    cont()
    got = None
    end = time.monotonic() + 5
    while time.monotonic() < end:
        f = recv_frame(c, 1)
        if f is not None and f.get(1) == call_id:
            got = f
            break
    check(label + ": ... the parent answers it once it runs", got is not None and got.get(10), repr(got))


def adopt():
    c = connect()
    c.sendall(request(1, 10))
    check("adopt: a call before the protocol process ends", (recv_frame(c, 5) or {}).get(1) == 1)
    # the process tells the parent what it wrote within 5 ms (DRAINED); a
    # connection with answers not known to be written is closed, not adopted
    time.sleep(0.3)
    os.kill(PROTO, signal.SIGKILL)
    time.sleep(2.0)  # the parent starts the next one after 250 ms; it adopts the connection
    c.sendall(request(2, 10) + request(3, 18))
    r2 = recv_frame(c, 5)
    check("adopt: the connection outlived it (Capabilities answered)",
          r2 is not None and r2.get(1) == 2 and r2.get(10), repr(r2))
    past_stream(c, 4, "adopt")
    c.close()


try:
    if PROTO:
        adopt()
        raise SystemExit(1 if fails else 0)
    # 1
    a = connect()
    a.sendall(request(1, 10))
    r1 = recv_frame(a, 5)
    a.sendall(request(2, 10))
    r2 = recv_frame(a, 5)
    check("1: the first and second Capabilities are answered",
          r1 is not None and r2 is not None and r1.get(1) == 1 and r2.get(1) == 2, repr((r1, r2)))
    if r1 and r2:
        check("1: ... with the same reply (end of stream, the same CapabilitiesReply)",
              r1.get(4) == 1 and r2.get(4) == 1 and r1.get(10) and r1.get(10) == r2.get(10),
              repr((r1, r2)))
        caps = fields(r2.get(10, b""))
        check("1: ... which names this build and its limits", caps.get(1) == 1 and
              caps.get(2) and caps.get(6, 0) >= 1, repr(caps))

    # 2
    stop()
    a.sendall(request(3, 10))
    r3 = recv_frame(a, 3)
    check("2: parent stopped: Capabilities on the idle connection is answered (by the protocol process)",
          r3 is not None and r3.get(1) == 3 and r3.get(10) == (r2 or {}).get(10), repr(r3))
    a.sendall(request(4, 11))
    r4 = recv_frame(a, 0.7)
    check("2: ... (control: the parent is stopped) Status is not answered", r4 is None, repr(r4))
    cont()
    r4 = recv_frame(a, 5)
    check("2: ... and is once the parent runs again", r4 is not None and r4.get(1) == 4, repr(r4))

    # 3
    a.sendall(request(5, 11) + request(6, 10))
    r5, r6 = recv_frame(a, 5), recv_frame(a, 5)
    check("3: Status then Capabilities in one write: answered in request order",
          r5 is not None and r6 is not None and r5.get(1) == 5 and r6.get(1) == 6, repr((r5, r6)))

    # 4
    b = connect()
    b.sendall(request(1, 10))
    check("4: a second connection's Capabilities", (recv_frame(b, 5) or {}).get(1) == 1)
    b.sendall(request(2, 18))  # AuditFollow: a stream, in flight until cancelled
    past_stream(b, 3, "4")
    b.close()

    # 5
    n = 0
    for i in range(200):
        a.sendall(request(100 + i, 10))
        f = recv_frame(a, 5)
        if f is not None and f.get(1) == 100 + i and f.get(10):
            n += 1
    check("5: 200 Capabilities on one connection, all answered", n == 200, "%d answered" % n)
    a.sendall(request(400, 11))
    f = recv_frame(a, 5)
    check("5: ... and Status after them (the parent's count of bytes written is right)",
          f is not None and f.get(1) == 400 and f.get(11) is not None, repr(f))
    a.close()

    # 6
    def unread(s):
        return struct.unpack("i", fcntl.ioctl(s, termios.FIONREAD, b"\0\0\0\0"))[0]

    d = connect()
    d.sendall(request(1, 10))
    check("6: a third connection's Capabilities", (recv_frame(d, 5) or {}).get(1) == 1)
    stop()
    d.sendall(request(2, 10))
    first, end = 0, time.monotonic() + 3
    while first == 0 and time.monotonic() < end:
        select.select([d], [], [], 0.2)
        first = unread(d)
    check("6: parent stopped: Capabilities answered here, left unread", first > 5, "%d bytes" % first)
    d.sendall(request(3, 10))
    time.sleep(0.7)
    now = unread(d)
    check("6: ... the next is not answered while that answer waits in the socket",
          now == first, "%d bytes waiting, %d before" % (now, first))
    cont()
    r2, r3 = recv_frame(d, 5), recv_frame(d, 5)
    check("6: ... both answered in order once the parent runs",
          r2 is not None and r3 is not None and r2.get(1) == 2 and r3.get(1) == 3 and
          r2.get(10) and r2.get(10) == r3.get(10), repr((r2, r3)))
    d.close()
except Exception as e:  # noqa: BLE001
    check("no error talking to lyhd", False, repr(e))
finally:
    if stopped:
        cont()
sys.exit(1 if fails else 0)
