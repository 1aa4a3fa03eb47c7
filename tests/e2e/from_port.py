#!/usr/bin/python3
"""From a fixed source port, talk to a loopback service: for UDP, then TCP,
bind 127.0.0.1:SPORT, connect to 127.0.0.1:PORT, send WORD, print
"udp|tcp ANSWER" (or "udp|tcp error WHY"). Run inside a session it leaves
conntrack entries behind at SPORT; run as a host process after it, it shows
whether the host still reaches the service from that port.

usage: from_port.py PORT SPORT WORD
"""
import socket
import sys


def main():
    port, sport, word = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode()
    for kind, name in ((socket.SOCK_DGRAM, "udp"), (socket.SOCK_STREAM, "tcp")):
        s = socket.socket(socket.AF_INET, kind)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.settimeout(2)
        try:
            s.bind(("127.0.0.1", sport))
            s.connect(("127.0.0.1", port))
            s.send(word)
            print(name, s.recv(64).decode() or "empty", flush=True)
        except OSError as e:
            print(name, "error", e, flush=True)
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
