#!/usr/bin/env python3
"""Split each `lyh run --timing` launch of bench/run's item 1 into steps.

    launch_steps.py [--wait SECONDS] SPAWN_OUT LYH_ERR LYHD_LOG OUTDIR

SPAWN_OUT: lyh_bench_spawn's lines ("LABEL US RC MAXRSS FORK_AT"); the runs
labelled "lyh" are the launches. LYH_ERR: their stderr, with one
"lyh: timing (CLOCK_MONOTONIC us): main M ready R connected C started T
exited X done D" line each. LYHD_LOG: lyhd --timing's log, with a "launch ID
phases" line (entry_at, started_at) and an "end ID phases" line (exit_at,
replied_at) per session. All of them read CLOCK_MONOTONIC, so one launch's
marks line up; a launch's lines are found by time (lyh's main within the
run, lyhd's entry between lyh's connect and its end), not by order. Every mark
of a process is taken before it tells the next one (lyh marks "connected"
before its send, lyhd its started_at and replied_at before theirs), so each
follows the one before it even when the sender loses its CPU right after.

Writes OUTDIR/step.NAME, one value (us) per launch, for these steps, which
follow one another and add up to the launch's wall time:

  start     fork to lyh's main (the exec, the loader)
  prepare   main to the request built (options, config files, environment)
  connect   the connect
  hop_in    the request sent through the protocol process to lyhd's Run handler
  lyhd      the handler to RunStarted handed on (lyhd's "total" less the send)
  agent     RunStarted handed on to the agent's exit seen (its run)
  reply     the exit seen to RunExited handed on
  hop_back  RunExited, its send included, through the protocol process to lyh
  finish    lyh's end: RunExited read to reaped (its exit)

and step.hop_started (RunStarted handed on to lyh reading it; beside the
chain, while the agent runs). Prints "matched N of M". Exit 1 when a
launch's lines are missing or its marks go backwards: the figures would be
wrong. --wait: lyhd's lines of the last launches may still be on their way
(an end line comes with its teardown, ~40 ms after the reply): LYHD_LOG is
read again every 0.25 s until every launch has its lines, for at most
SECONDS; marks that go backwards fail at once.
"""
import re
import sys
import time

STEPS = ["start", "prepare", "connect", "hop_in", "lyhd", "agent", "reply", "hop_back", "finish"]


def read_lyhd(path):
    """lyhd's launch lines (id, entry_at, started_at) and end lines by id."""
    launches, ends = [], {}
    lpat = re.compile(r"launch ([0-9a-f]+) phases .* entry_at (\d+) started_at (\d+)")
    epat = re.compile(r"end ([0-9a-f]+) phases .* exit_at (\d+) replied_at (\d+)")
    for line in open(path, errors="replace"):
        m = lpat.search(line)
        if m:
            launches.append((m.group(1), int(m.group(2)), int(m.group(3))))
            continue
        m = epat.search(line)
        if m:
            ends[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return launches, ends


def steps(runs, lyh, launches, ends):
    """(steps, None), or (None, (missing_lyhd_lines, why))."""
    out = {s: [] for s in STEPS + ["hop_started"]}
    for fork_at, reaped_at in runs:
        t = next((t for t in lyh if fork_at <= t["main"] <= reaped_at), None)
        if t is None:
            return None, (False, f"no lyh timing line for the run forked at {fork_at}")
        la = next((la for la in launches if t["connected"] <= la[1] <= t["done"]), None)
        if la is None or la[0] not in ends:
            return None, (True, f"no lyhd launch and end lines for the run forked at {fork_at}")
        sid, entry_at, started_at = la
        exit_at, replied_at = ends[sid]
        marks = [fork_at, t["main"], t["ready"], t["connected"], entry_at, started_at, exit_at,
                 replied_at, t["exited"], reaped_at]
        if any(b < a for a, b in zip(marks, marks[1:])) or t["started"] < started_at:
            return None, (False, f"session {sid}: marks out of order: {marks}")
        for name, a, b in zip(STEPS, marks, marks[1:]):
            out[name].append(b - a)
        out["hop_started"].append(t["started"] - started_at)
    return out, None


def main():
    args = sys.argv[1:]
    wait = 0.0
    if len(args) == 6 and args[0] == "--wait":
        try:
            wait = float(args[1])
        except ValueError:
            wait = -1.0
        args = args[2:]
    if len(args) != 4 or not 0 <= wait <= 600:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    spawn_out, lyh_err, lyhd_log, outdir = args

    runs = []  # (fork_at, reaped_at)
    for line in open(spawn_out):
        f = line.split()
        if len(f) >= 5 and f[0] == "lyh" and f[2] == "0":
            runs.append((int(f[4]), int(f[4]) + int(f[1])))

    keys = ["main", "ready", "connected", "started", "exited", "done"]
    lyh = []
    pat = re.compile(r"lyh: timing \(CLOCK_MONOTONIC us\): " + " ".join(k + r" (\d+)" for k in keys))
    for line in open(lyh_err, errors="replace"):
        m = pat.search(line)
        if m:
            lyh.append(dict(zip(keys, map(int, m.groups()))))

    deadline = time.monotonic() + wait
    while True:
        out, err = steps(runs, lyh, *read_lyhd(lyhd_log))
        if out is not None or not err[0] or time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    if out is None:
        print(err[1], file=sys.stderr)
        return 1

    for name, vals in out.items():
        with open(f"{outdir}/step.{name}", "w") as fh:
            fh.writelines(f"{v}\n" for v in vals)
    print(f"matched {len(runs)} of {len(runs)}")
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main())
