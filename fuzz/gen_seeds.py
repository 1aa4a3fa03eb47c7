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

# NFLOG: nfnetlink_log packet messages as the kernel sends them (netlink and
# attribute headers in host order, values in network order, 4-byte padding).
N = os.path.join(here, "corpus", "nflog")
os.makedirs(N, exist_ok=True)
NFULA_PACKET_HDR, NFULA_TIMESTAMP, NFULA_IFINDEX_OUTDEV, NFULA_PAYLOAD = 1, 3, 5, 9
NFULA_PREFIX, NFULA_UID, NFULA_SEQ, NFULA_GID = 10, 11, 12, 14
PKT_TYPE, NLMSG_ERROR, NLMSG_DONE = 4 << 8, 2, 3


def pad4(b):
    return b + bytes(-len(b) % 4)


def nla(t, v):
    return pad4(struct.pack("=HH", 4 + len(v), t) + v)


def nlmsg(t, body, seq=0):
    return pad4(struct.pack("=IHHII", 16 + len(body), t, 0, seq, 0) + body)


def nflog_pkt(family, prefix, seq, l3):
    attrs = (nla(NFULA_PACKET_HDR, struct.pack(">HBB", 0x0800 if family == 2 else 0x86DD, 3, 0))
             + nla(NFULA_PREFIX, prefix + b"\0") + nla(NFULA_IFINDEX_OUTDEV, struct.pack(">I", 3))
             + nla(NFULA_TIMESTAMP, struct.pack(">QQ", 1700000000, 123456))
             + nla(NFULA_UID, struct.pack(">I", 1000)) + nla(NFULA_GID, struct.pack(">I", 1000))
             + nla(NFULA_SEQ, struct.pack(">I", seq)) + nla(NFULA_PAYLOAD, l3))
    return nlmsg(PKT_TYPE, struct.pack("=BB", family, 0) + struct.pack(">H", 7) + attrs)  # nfgenmsg, group 7


def ip4(proto, l4):
    return struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 1, 0x4000, 64, proto, 0,
                       bytes([10, 0, 0, 1]), bytes([93, 184, 216, 34])) + l4


def ip6(nh, l4):
    return (struct.pack(">IHBB", 0x60000000, len(l4), nh, 64) + bytes([0x20, 1, 0xd, 0xb8] + [0] * 11 + [1])
            + bytes([0x26, 6, 0x47, 0] + [0] * 11 + [1]) + l4)


tcp = struct.pack(">HHIIBBHHH", 40000, 443, 1, 0, 0x50, 0x02, 65535, 0, 0)
udp = struct.pack(">HHHH", 5353, 53, 12, 0) + b"data"
hbh = struct.pack(">BB6s", 17, 0, bytes([1, 4, 0, 0, 0, 0]))
nf = {}
nf["v4_tcp"] = nflog_pkt(2, b"lyh:0123456789abcdef:A ", 0, ip4(6, tcp))
nf["v6_udp"] = nflog_pkt(10, b"lyh:LYH-U-1000:D ", 1, ip6(17, udp))
nf["v6_hbh_udp"] = nflog_pkt(10, b"lyh:LYH-1000:A ", 2, ip6(0, hbh + udp))
nf["v4_icmp"] = nflog_pkt(2, b"lyh:nosession:D ", 3, ip4(1, bytes([8, 0, 0, 0, 0, 1, 0, 1])))
nf["multi"] = (nflog_pkt(2, b"lyh:0123456789abcdef:D ", 4, ip4(17, udp))
               + nflog_pkt(10, b"lyh:0123456789abcdef:D ", 5, ip6(6, tcp))
               + nflog_pkt(2, b"lyh:LYH-0:A ", 6, ip4(6, tcp))
               + nlmsg(NLMSG_DONE, struct.pack("=BBH", 0, 0, 0)))
nf["truncated"] = nf["v4_tcp"][:len(nf["v4_tcp"]) - 30]
nf["error"] = nlmsg(NLMSG_ERROR, struct.pack("=i", -1) + nlmsg(PKT_TYPE, b"")[:16], seq=1)
nf["prefix"] = b"lyh:LYH-U-4294967294:A "
for k, v in nf.items():
    open(os.path.join(N, k), "wb").write(v)

subprocess.run(["rm", "-rf", tmp], check=False)
print(f"{len(raw) + 2} request seeds, {len(resps)} response seeds, {len(nf)} nflog seeds")
