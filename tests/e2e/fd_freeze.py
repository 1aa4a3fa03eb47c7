#!/usr/bin/python3
"""Try to freeze lyhd's event loop with a client's file descriptors, as an
ordinary local user would (the e2e test runs it inside its own network
namespace; the TCP pair is on that namespace's loopback).

usage: fd_freeze.py SOCKET MODE SECONDS
  MODE ctrunc: one message with 5 fds, the last a TCP socket with SO_LINGER
               and a full send queue whose peer never reads: more fds than a
               frame may carry, so lyhd must not let the kernel drop the extra
               ones on its event loop (their last reference would block there).
  MODE flood:  on one connection, frames of [lingering TCP, file, file] then
               many of [file, file, file], to pile closes up behind a close
               that waits, until lyhd runs out of fds (it must stop reading
               from this user instead).
  MODE fuse:   (arguments FILE COUNT after SECONDS) COUNT frames on one
               connection, each with an fd of FILE (a file on a FUSE server
               that never answers FLUSH: every close of such an fd waits).
Holds its sockets for SECONDS, then exits. Prints what it sent.
"""
import os
import socket
import struct
import sys
import time


def lingering_tcp(srv, peers):
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    c.connect(srv.getsockname())
    p, _ = srv.accept()  # never read
    peers.append(p)
    c.setblocking(False)
    try:
        for _ in range(100000):
            c.send(b"x" * 65536)
    except BlockingIOError:
        pass
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 100000))
    return c.detach()


def frame(call_id, fd_count):
    def varint(n):
        out = b""
        while True:
            b, n = n & 0x7F, n >> 7
            if n:
                out += bytes([b | 0x80])
            else:
                return out + bytes([b])
    body = b"\x08" + varint(call_id) + b"\x10\x01"
    if fd_count:
        body += b"\x20" + varint(fd_count)
    body += b"\x52\x00"  # capabilities {}
    return b"\x00" + struct.pack(">I", len(body)) + body


def keep_busy(path, keep):
    """A burst of frames on a connection of its own keeps lyhd's loop busy for
    a moment, so fds sent right after are read only once our own copy of a
    socket among them is closed: lyhd's is then the last reference."""
    busy = socket.socket(socket.AF_UNIX)
    busy.connect(path)
    busy.setblocking(False)
    try:
        busy.send(b"".join(frame(i, 0) for i in range(1, 40000)))
    except BlockingIOError:
        pass
    keep.append(busy)


def main():
    path, mode, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    srv.bind(("127.0.0.1", 0))
    srv.listen(512)
    peers, keep = [], []
    t0 = time.time()
    if mode == "ctrunc":
        tcp = lingering_tcp(srv, peers)
        null = os.open("/dev/null", os.O_RDONLY)
        keep_busy(path, keep)
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        s.sendmsg([b"\x00"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                struct.pack("5i", null, null, null, null, tcp))])
        os.close(tcp)
        keep.append(s)
        print("sent 5 fds, one a lingering TCP socket", flush=True)
    elif mode == "flood":
        f = os.open("/etc/hostname", os.O_RDONLY)
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        keep.append(s)
        sent, cid = 0, 1
        try:
            while time.time() - t0 < min(secs, 10):
                tcp = lingering_tcp(srv, peers)
                if len(keep) < 30:
                    keep_busy(path, keep)
                s.sendmsg([frame(cid, 3)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                             struct.pack("3i", tcp, f, f))])
                os.close(tcp)
                cid += 1
                sent += 3
                for _ in range(200):
                    s.sendmsg([frame(cid, 3)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                                 struct.pack("3i", f, f, f))])
                    cid += 1
                    sent += 3
                s.setblocking(False)
                try:
                    while s.recv(1 << 20):
                        pass
                except (BlockingIOError, ConnectionError):
                    pass
                s.setblocking(True)
        except OSError as e:
            print("stopped sending:", e, flush=True)
        print("sent", sent, "fds in %.1f s" % (time.time() - t0), flush=True)
    elif mode == "fuse":
        f = os.open(sys.argv[4], os.O_RDONLY)
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        keep.append(s)
        sent = 0
        try:
            for cid in range(1, int(sys.argv[5]) + 1):
                s.sendmsg([frame(cid, 1)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                             struct.pack("i", f))])
                sent += 1
        except OSError as e:
            print("stopped sending:", e, flush=True)
        print("sent", sent, "fds of a FUSE file", flush=True)
        # f stays open: our own close would wait on the server too
    else:
        raise SystemExit(f"unknown mode {mode}")
    time.sleep(max(0.0, secs - (time.time() - t0)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
