#!/usr/bin/python3
"""A tiny HTTP CONNECT proxy for tests/e2e/proxy.sh: listens on ADDR:PORT for
SECONDS, answers each CONNECT host:port with 200 and relays both ways; logs a
line per tunnel ("tunnel HOST:PORT ok|error"). Root runs it in the test's main
namespace: it is the user's proxy outside the sandbox."""
import select
import socket
import sys
import threading
import time

addr, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
srv = socket.socket(fam, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((addr, port))
srv.listen(16)
srv.settimeout(0.5)
print("serving", flush=True)


def relay(a, b, until):
    while time.monotonic() < until:
        r, _, _ = select.select([a, b], [], [], 0.5)
        for s in r:
            data = s.recv(4096)
            if not data:
                return
            (b if s is a else a).sendall(data)


def handle(c):
    until = time.monotonic() + 30
    try:
        c.settimeout(5)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 8192:
            chunk = c.recv(1024)
            if not chunk:
                return
            head += chunk
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) < 2 or parts[0] != b"CONNECT":
            c.sendall(b"HTTP/1.1 405 CONNECT only\r\n\r\n")
            return
        host, _, p = parts[1].decode().rpartition(":")
        try:
            u = socket.create_connection((host.strip("[]"), int(p)), timeout=5)
        except OSError as e:
            print("tunnel", parts[1].decode(), "error", e.errno, flush=True)
            c.sendall(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
            return
        print("tunnel", parts[1].decode(), "ok", flush=True)
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        relay(c, u, until)
        u.close()
    except OSError:
        pass
    finally:
        c.close()


end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        c, _ = srv.accept()
    except socket.timeout:
        continue
    threading.Thread(target=handle, args=(c,), daemon=True).start()
