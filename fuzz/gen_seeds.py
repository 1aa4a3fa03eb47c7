#!/usr/bin/python3
"""Regenerate the seed corpora in fuzz/corpus/ from proto/lianyaohu.proto.
Needs protoc and python3-protobuf (scripts/deps installs both).
usage: fuzz/gen_seeds.py"""
import os
import struct
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
proto = os.path.join(here, "..", "proto")
tmp = tempfile.mkdtemp()
subprocess.run(["protoc", f"-I{proto}", f"--python_out={tmp}", os.path.join(proto, "lianyaohu.proto")],
               check=True)
sys.path.insert(0, tmp)
import lianyaohu_pb2 as pb  # noqa: E402

R = os.path.join(here, "corpus", "request")
S = os.path.join(here, "corpus", "response")
os.makedirs(R, exist_ok=True)
os.makedirs(S, exist_ok=True)


def frame(b):
    return struct.pack(">BI", 0, len(b)) + b


reqs = {}
r = pb.Request(call_id=1, protocol_version=1); r.capabilities.SetInParent(); reqs["capabilities"] = r
r = pb.Request(call_id=2, protocol_version=1); r.status.SetInParent(); reqs["status"] = r
r = pb.Request(call_id=3, protocol_version=1, fd_count=3)
run = r.run
run.argv.extend(["claude", "--help"]); run.interface = "tun0"; run.cwd = "/home/u/p"
run.env.add(name="TERM", value="xterm")
run.allow.add(addr=bytes([11, 0, 0, 0]), prefix_len=8, port_min=443)
run.writable.append("/home/u/x"); run.pty = True; run.rows = 24; run.cols = 80
reqs["run"] = r
r = pb.Request(call_id=4, protocol_version=1); r.signal.session_id = "s-1"; r.signal.window.rows = 50
reqs["signal"] = r
r = pb.Request(call_id=5, protocol_version=1); q = r.audit_query
q.since_unix_us = 1; q.verdict = pb.VERDICT_DENIED; q.dst.addr = bytes(16); q.dst.prefix_len = 64
reqs["audit_query"] = r
r = pb.Request(call_id=6, protocol_version=1); p = r.policy_update.policy
p.allowed_interface_patterns.append("tun*"); p.always_deny.add(addr=bytes([1, 1, 1, 1]), prefix_len=32)
r.policy_update.expect_version = 3
reqs["policy_update"] = r
r = pb.Request(call_id=7, protocol_version=1); r.cancel.call_id = 5; reqs["cancel"] = r
raw = {k: v.SerializeToString() for k, v in reqs.items()}
raw["unknown_field"] = bytes([8, 9, 16, 1, 90, 3, 0xE8, 4, 1])   # field 77 inside Status
raw["unknown_method"] = bytes([8, 10, 16, 1, 0xE2, 3, 0])        # Request field 60
for k, v in raw.items():
    open(os.path.join(R, k), "wb").write(frame(v))
open(os.path.join(R, "two_frames"), "wb").write(frame(raw["status"]) + frame(raw["capabilities"]))
open(os.path.join(R, "empty"), "wb").write(frame(b""))

resps = {}
x = pb.Response(call_id=1, end_of_stream=True); c = x.capabilities
c.protocol_version = 1; c.build_version = "0.1.0"; c.features.extend(["a", "b"]); resps["capabilities"] = x
x = pb.Response(call_id=2, end_of_stream=True); x.status.uptime_ms = 5
x.status.guards.add(uid=1000, scope=pb.SCOPE_USER, interface="tun0", refcount=1, chain="LYH-U-1000")
resps["status"] = x
x = pb.Response(call_id=3); x.run_event.started.session_id = "s-1"
x.run_event.started.notes.append("IPv6 blocked"); resps["started"] = x
x = pb.Response(call_id=3, end_of_stream=True); x.run_event.exited.exit_code = 3; resps["exited"] = x
x = pb.Response(call_id=4); e = x.audit_event
e.kind = pb.EVENT_KIND_FLOW; e.dst_addr = bytes([11, 0, 0, 1]); e.dst_port = 443; e.detail = "x"
resps["audit"] = x
x = pb.Response(call_id=5, code=pb.PERMISSION_DENIED, message="no", end_of_stream=True); resps["error"] = x
x = pb.Response(call_id=6, end_of_stream=True); x.sessions.session.id = "s-2"; x.sessions.session.cwd = "/tmp"
resps["sessions"] = x
for k, v in resps.items():
    open(os.path.join(S, k), "wb").write(v.SerializeToString())
subprocess.run(["rm", "-rf", tmp], check=False)
print(f"{len(raw) + 2} request seeds, {len(resps)} response seeds")
