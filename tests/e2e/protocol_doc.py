#!/usr/bin/python3
"""docs/protocol.md against a running lyhd: the feature table lists exactly the
features lyhd reports, and the worked example's Capabilities answer is the
frame lyhd sends for the example's request (byte for byte when this host has
the example's host-dependent features, field by field otherwise).

usage: protocol_doc.py DOC PROTO_DIR SOCKET
"""
import re
import shutil
import socket
import struct
import sys

sys.dont_write_bytecode = True  # importing py_client must leave no __pycache__ in the source tree
from py_client import gen_module, recv_exact  # noqa: E402 (same directory: the framing helpers)


def section(doc, name):
    m = re.search(rf"<!-- {name} -->\n(.*?)<!-- /{name} -->", doc, re.S)
    if not m:
        raise SystemExit(f"FAIL docs/protocol.md has no <!-- {name} --> block")
    return m.group(1)


def doc_features(doc):
    names = re.findall(r"^\| `([a-z0-9-]+|landlock-abi-N)` \|", section(doc, "features"), re.M)
    return names


def doc_example_bytes(doc):
    block = section(doc, "capabilities-answer")
    data = bytearray()
    for line in block.splitlines():
        for tok in line.split():
            if re.fullmatch(r"[0-9a-f]{2}", tok):
                data.append(int(tok, 16))
            else:
                break
    return bytes(data)


def doc_example_request(doc):
    m = re.search(r"Written out as one frame: `([0-9a-f ]+)`", doc)
    if not m:
        raise SystemExit("FAIL docs/protocol.md: no 'Written out as one frame' request")
    return bytes.fromhex(m.group(1).replace(" ", ""))


def main():
    doc_path, proto_dir, path = sys.argv[1:4]
    doc = open(doc_path, encoding="utf-8").read()
    pb, tmp = gen_module(proto_dir)
    try:
        return check_doc(doc, pb, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_doc(doc, pb, path):
    failures = 0

    def check(name, cond, detail=""):
        nonlocal failures
        print(("ok   " if cond else "FAIL ") + name + ("" if cond else f": {detail}"))
        failures += 0 if cond else 1

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(path)
    sock.sendall(doc_example_request(doc))
    hdr = recv_exact(sock, 5)
    live = hdr + recv_exact(sock, struct.unpack(">I", hdr[1:])[0])
    sock.close()
    live_resp = pb.Response.FromString(live[5:])
    live_feats = list(live_resp.capabilities.features)

    names = doc_features(doc)
    check("the feature table is not empty", len(names) >= 10, f"{names}")
    fixed = [n for n in names if n != "landlock-abi-N"]
    live_fixed = [f for f in live_feats if not re.fullmatch(r"landlock-abi-\d+", f)]
    check("every feature lyhd reports is in the table", set(live_fixed) <= set(fixed),
          f"missing from the doc: {sorted(set(live_fixed) - set(fixed))}")
    check("every feature in the table is reported by lyhd", set(fixed) <= set(live_fixed),
          f"documented but not reported: {sorted(set(fixed) - set(live_fixed))}")
    has_ll = any(re.fullmatch(r"landlock-abi-\d+", f) for f in live_feats)
    check("landlock-abi-N is documented and reported", has_ll and "landlock-abi-N" in names,
          f"reported {live_feats}")

    ex = doc_example_bytes(doc)
    check("the example frame's length field matches its body",
          len(ex) >= 5 and ex[0] == 0 and struct.unpack(">I", ex[1:5])[0] == len(ex) - 5,
          f"header says {struct.unpack('>I', ex[1:5])[0] if len(ex) >= 5 else '?'}, "
          f"body has {len(ex) - 5} bytes")
    try:
        ex_resp = pb.Response.FromString(ex[5:])
    except Exception as e:  # noqa: BLE001
        check("the example decodes as a Response", False, str(e))
        return 1
    a, b = ex_resp.capabilities, live_resp.capabilities
    for field in ("protocol_version", "build_version", "max_frame_bytes",
                  "max_fds_per_message", "max_calls_per_connection"):
        check(f"example {field} is lyhd's", getattr(a, field) == getattr(b, field),
              f"doc {getattr(a, field)!r}, lyhd {getattr(b, field)!r}")
    norm = lambda fs: [re.sub(r"^landlock-abi-\d+$", "landlock-abi-N", f) for f in fs]  # noqa: E731
    check("example features are lyhd's (in order)", norm(a.features) == norm(b.features),
          f"doc {list(a.features)}, lyhd {live_feats}")
    check("example is an OK end-of-stream answer to call 1",
          ex_resp.call_id == 1 and ex_resp.code == 0 and ex_resp.end_of_stream)
    if list(a.features) == live_feats:
        check("example bytes are lyhd's, byte for byte", ex == live,
              f"doc {ex.hex(' ')}\nlyhd {live.hex(' ')}")
    else:
        print("skip byte-for-byte compare: this host's features differ from the example's "
              f"({live_feats})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
