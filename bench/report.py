#!/usr/bin/env python3
"""bench/report.py RESULTS JSON_OUT [META...]: the table and JSON of a bench/run.

RESULTS has one tab-separated line per fact (written by bench/run):
  row    ITEM KEY LABEL UNIT FILE        samples, one number a line -> median p10 p90 n
  val    ITEM KEY LABEL UNIT VALUE       a single measured value
  skip   ITEM KEY LABEL REASON
  ratio  ITEM KEY LABEL A B              median(A) / median(B)
  diff   ITEM KEY LABEL A B              median(A) - median(B) (unit of A)
  target KEY OP NUMBER TEXT              OP is <= or >=; checked on KEY's value
META are key=value pairs for the JSON header (date, nproc, ...).
"""
import json, sys

def pct(v, p):
    if not v:
        return None
    k = (len(v) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)

def main():
    res, out = sys.argv[1], sys.argv[2]
    meta = dict(a.split("=", 1) for a in sys.argv[3:])
    entries, by_key, targets = [], {}, []
    for line in open(res):
        f = line.rstrip("\n").split("\t")
        if not f or not f[0]:
            continue
        kind = f[0]
        if kind == "target":
            targets.append({"key": f[1], "op": f[2], "limit": float(f[3]), "text": f[4]})
            continue
        e = {"kind": kind, "item": f[1], "key": f[2], "label": f[3]}
        if kind == "row":
            e["unit"] = f[4]
            try:
                v = sorted(float(x) for x in open(f[5]).read().split())
            except OSError:
                v = []
            e.update(n=len(v), median=pct(v, .5), p10=pct(v, .1), p90=pct(v, .9))
            e["value"] = e["median"]
        elif kind == "val":
            e["unit"] = f[4]
            e["value"] = float(f[5]) if f[5] not in ("", "nan") else None
        elif kind == "skip":
            e["reason"] = f[4]
            e["value"] = None
        elif kind in ("ratio", "diff"):
            e["a"], e["b"] = f[4], f[5]
        entries.append(e)
        by_key[e["key"]] = e
    for e in entries:
        if e["kind"] in ("ratio", "diff"):
            a, b = by_key.get(e["a"]), by_key.get(e["b"])
            av = a and a.get("value")
            bv = b and b.get("value")
            if av is None or bv is None or (e["kind"] == "ratio" and bv == 0):
                e["value"] = None
                e["unit"] = "x" if e["kind"] == "ratio" else ""
            elif e["kind"] == "ratio":
                e["value"], e["unit"] = av / bv, "x"
            else:
                e["value"], e["unit"] = av - bv, a.get("unit", "")
    for t in targets:
        e = by_key.get(t["key"])
        v = e and e.get("value")
        if v is None:
            t["status"] = "not measured"
        else:
            ok = v <= t["limit"] if t["op"] == "<=" else v >= t["limit"]
            t["status"] = "met" if ok else "MISSED"
        t["value"] = v

    def num(x):
        if x is None:
            return "-"
        if abs(x) >= 100:
            return "%.0f" % x
        if abs(x) >= 10:
            return "%.1f" % x
        return "%.3g" % x

    lines = []
    lines.append("%-4s %-58s %10s %10s %10s %5s  %s" % ("item", "measurement", "median", "p10", "p90", "n", "unit"))
    item = None
    for e in entries:
        if e["item"] != item:
            item = e["item"]
            lines.append("")
        if e["kind"] == "skip":
            lines.append("%-4s %-58s %s" % (e["item"], e["label"], "skipped: " + e["reason"]))
        elif e["kind"] == "row":
            lines.append("%-4s %-58s %10s %10s %10s %5d  %s" % (e["item"], e["label"], num(e["median"]),
                         num(e["p10"]), num(e["p90"]), e["n"], e["unit"]))
        else:
            lines.append("%-4s %-58s %10s %10s %10s %5s  %s" % (e["item"], e["label"], num(e["value"]), "", "", "",
                         e.get("unit", "")))
    lines.append("")
    lines.append("targets:")
    for t in targets:
        lines.append("  %-12s %-52s %s %s (got %s)" % (t["status"], t["text"], t["op"], num(t["limit"]), num(t["value"])))
    print("\n".join(lines))
    with open(out, "w") as fh:
        json.dump({"meta": meta, "results": entries, "targets": targets}, fh, indent=1)
        fh.write("\n")

main()
