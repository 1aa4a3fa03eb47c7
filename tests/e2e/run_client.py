#!/usr/bin/python3
"""A raw Run client for the e2e tests (python3-protobuf, the module generated
by protoc from proto/lianyaohu.proto): sends one RunRequest built from JSON,
with three file descriptors of a chosen kind, as a script in another language
would, bypassing every check the lyh CLI makes first.

usage: run_client.py PYMOD_DIR SOCKET JSON [FD_KIND]

JSON keys are RunRequest field names (argv, cwd, interface, read_only,
writable, deny_paths, no_firewall, ...). FD_KIND picks the three fds sent as
stdio: devnull (default), pipe, or one of the kinds lyhd must refuse (tcp,
udp, dir). Prints one line, "CODE MESSAGE", for the call's final answer
(RunEvent.started answers are skipped; an exited session prints "OK exit N").
Exit 0 whenever lyhd answered.
"""
import json
import os
import socket
import struct
import sys

from py_client import recv_exact  # installed beside this file by the test


def make_fds(kind, keep):
    if kind == "devnull":
        f = os.open("/dev/null", os.O_RDWR)
        keep.append(f)
        return [f, f, f]
    if kind == "pipe":
        r, w = os.pipe()
        keep.extend([r, w])
        return [r, w, w]
    if kind in ("tcp", "udp"):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
        keep.append(s)
        return [s.fileno()] * 3
    if kind == "dir":
        f = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
        keep.append(f)
        return [f, f, f]
    raise SystemExit(f"unknown fd kind {kind}")


def main():
    mod, path, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    kind = sys.argv[4] if len(sys.argv) > 4 else "devnull"
    sys.path.insert(0, mod)
    import lianyaohu_pb2 as pb  # noqa: E402

    req = pb.Request(call_id=1, protocol_version=1, fd_count=3)
    for k, v in spec.items():
        f = getattr(req.run, k)
        if isinstance(v, list):
            f.extend(v)
        else:
            setattr(req.run, k, v)
    req.run.SetInParent()
    keep = []
    fds = make_fds(kind, keep)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(path)
    body = req.SerializeToString()
    frame = struct.pack(">BI", 0, len(body)) + body
    sock.sendmsg([frame], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))])
    for _ in range(100):
        flag, length = struct.unpack(">BI", recv_exact(sock, 5))
        resp = pb.Response.FromString(recv_exact(sock, length))
        if resp.code != 0:
            print(pb.Code.Name(resp.code), resp.message)
            return 0
        ev = resp.run_event
        if ev.WhichOneof("event") == "exited":
            print("OK exit", ev.exited.exit_code)
            return 0
        if resp.end_of_stream:
            print("OK", resp.message)
            return 0
    print("NO_ANSWER")
    return 0


if __name__ == "__main__":
    sys.exit(main())
