#!/usr/bin/python3
"""The agent of tests/e2e/proxy.sh, run inside `lyh run --vpn none`:
  env                    the proxy variables it was given
  via HOST:PORT          a CONNECT through $HTTPS_PROXY, then an echo
  tcp ADDR PORT          a direct TCP connect: "ok" or the errno's name
  udp ADDR PORT          a direct UDP send: "ok" or the errno's name"""
import errno
import os
import socket
import sys


def err(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__


mode = sys.argv[1]
if mode == "env":
    for n in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "HTTP_PROXY", "NO_PROXY", "no_proxy"):
        print(n, os.environ.get(n, "-"))
elif mode == "via":
    hp = os.environ["HTTPS_PROXY"].split("://", 1)[1].rstrip("/").rsplit("@", 1)[-1]
    h, _, p = hp.rpartition(":")
    try:
        s = socket.create_connection((h.strip("[]"), int(p)), timeout=5)
        s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (sys.argv[2].encode(), sys.argv[2].encode()))
        resp = b""
        while b"\r\n\r\n" not in resp:
            chunk = s.recv(1024)
            if not chunk:
                break
            resp += chunk
        print("status", resp.split(b"\r\n")[0].decode(), flush=True)
        s.sendall(b"through-proxy")
        print("echo", s.recv(64).decode(), flush=True)
    except OSError as e:
        print("via", err(e))
elif mode == "tcp":
    try:
        socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=3).close()
        print("tcp", sys.argv[2], sys.argv[3], "ok")
    except OSError as e:
        print("tcp", sys.argv[2], sys.argv[3], err(e))
elif mode == "udp":
    fam = socket.AF_INET6 if ":" in sys.argv[2] else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(2)
    try:
        s.sendto(b"q", (sys.argv[2], int(sys.argv[3])))
        s.recv(64)
        print("udp", sys.argv[2], sys.argv[3], "ok")
    except OSError as e:
        print("udp", sys.argv[2], sys.argv[3], err(e))
