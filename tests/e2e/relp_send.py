#!/usr/bin/python3
"""Send syslog messages to a RELP listener as a hostile peer would: any
hostname, any text. For tests/e2e/fleet.sh (the collector's abuse test).

usage: relp_send.py HOST PORT HOSTNAME MESSAGE...

Each MESSAGE goes as one RFC 5424 message from HOSTNAME (tag lyhd, facility
authpriv) whose STRUCTURED-DATA field is MESSAGE. Exits 0 when the listener
acknowledged every one (RELP "200 OK"), 1 otherwise, 2 on bad usage.
Standard library only; every socket operation has a timeout.
"""
import re
import socket
import sys
import time


def frame(txnr, command, data):
    """A RELP frame: TXNR SP COMMAND SP DATALEN [SP DATA] LF."""
    if data:
        return b"%d %s %d %s\n" % (txnr, command, len(data), data)
    return b"%d %s 0\n" % (txnr, command)


def read_frame(sock, buf):
    """One frame from the listener: (txnr, command, data, rest of buf)."""
    while True:
        m = re.match(rb"(\d+) ([a-z]+) (\d+)", buf)
        if m:
            n, start = int(m.group(3)), m.end()
            need = start + 1 + n + 1 if n else start + 1
            if len(buf) >= need:
                data = buf[start + 1:start + 1 + n] if n else b""
                return int(m.group(1)), m.group(2), data, buf[need:]
        if len(buf) > 65536:
            raise ConnectionError("no RELP frame in what the listener sent")
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("the listener closed the connection")
        buf += chunk


def main():
    if len(sys.argv) < 5:
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    host, port, hostname = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
    sock = socket.create_connection((host, port), timeout=10)
    sock.settimeout(10)
    offer = b"relp_version=0\nrelp_software=lyh-test\ncommands=syslog"
    sock.sendall(frame(1, b"open", offer))
    buf = b""
    txnr, cmd, data, buf = read_frame(sock, buf)
    if txnr != 1 or cmd != b"rsp" or not data.startswith(b"200"):
        print("open refused: %r" % data, file=sys.stderr)
        return 1
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()).encode()
    ok = True
    for i, text in enumerate(sys.argv[4:], start=2):
        # PRI 84 = authpriv (10) * 8 + warning (4)
        msg = b"<84>1 %s %s lyhd 1 lyh-audit %s" % (stamp, hostname, text.encode())
        sock.sendall(frame(i, b"syslog", msg))
        txnr, cmd, data, buf = read_frame(sock, buf)
        if txnr != i or not data.startswith(b"200"):
            print("message %d refused: %r" % (i - 1, data), file=sys.stderr)
            ok = False
    sock.sendall(frame(len(sys.argv) - 2, b"close", b""))
    try:
        read_frame(sock, buf)
    except (ConnectionError, OSError):
        pass
    sock.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
