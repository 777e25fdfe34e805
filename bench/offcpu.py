#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""What --off-cpu costs a context-switch-heavy program: PAIRS processes, each two threads passing
a byte over pipes (tests/fixtures/offcpu.c pingpong-count ROUNDS), timed with no profd, with
profd --pid (CPU sampling only: nothing attached to the scheduler) and with profd --pid
--off-cpu (default --off-cpu-min 10us; and, with --min, that value too). Rounds interleave the
modes; medians of the elapsed time, of the pairs' CPU time (user + system: where the BPF
programs' cost lands, and less sensitive than elapsed time to other load on a shared machine),
of the machine's context switches per second (/proc/stat ctxt) and of the daemon's CPU time
during the run.

With --against DIR, "off-cpu then" runs DIR's profd --off-cpu (another build, say of the
commit before a change) in the same interleaved rounds, so a change's effect is measured side
by side on a noisy machine.

Usage: sudo bench/offcpu.py [--rounds 5] [--pairs 1] [--count 100000] [--cpu 0]
                            [--build build] [--min 1us] [--against DIR]
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time


def cpu_ms(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000 // os.sysconf("SC_CLK_TCK")


def ctxt():
    for line in open("/proc/stat"):
        if line.startswith("ctxt "):
            return int(line.split()[1])
    return 0


def run(profd, fixture, mode, pairs, count, cpu, tmp, against=None):
    go = os.path.join(tmp, "go")
    if os.path.exists(go):
        os.unlink(go)
    # A parent that waits, then starts the pairs: profd --pid follows them from their start.
    cmd = (f'while [ ! -e {go} ]; do sleep 0.01; done; '
           f'for i in $(seq {pairs}); do taskset -c {cpu} {fixture} pingpong-count {count} & done; '
           'wait')
    parent = subprocess.Popen(["bash", "-c", cmd], stdout=subprocess.PIPE, text=True)
    pd = None
    if mode == "off-cpu then":
        profd = os.path.join(against, "bin", "profd")
    if mode != "none":
        args = [profd, "--pid", str(parent.pid), "--socket", os.path.join(tmp, "s"), "-q"]
        if mode.startswith("off-cpu"):
            args.append("--off-cpu")
        if mode.startswith("off-cpu ") and mode != "off-cpu then":
            args += ["--off-cpu-min", mode.split()[1]]
        pd = subprocess.Popen(args)
        time.sleep(2.0)
        c0 = cpu_ms(pd.pid)
    x0, t0 = ctxt(), time.monotonic()
    open(go, "w").close()
    out = parent.communicate()[0]
    wall = time.monotonic() - t0
    x1 = ctxt()
    secs = max(float(l.split("seconds=")[1].split()[0]) for l in out.splitlines()
               if "seconds=" in l)
    # The pairs' own CPU time (getrusage in the fixture): where the BPF programs' cost lands.
    cpu = sum(float(l.split("cpu=")[1].split()[0]) for l in out.splitlines() if "cpu=" in l)
    dc = None
    if pd:
        time.sleep(0.3)  # the last records drain within 100 ms
        dc = cpu_ms(pd.pid) - c0
        pd.terminate()
        pd.wait()
    return secs, (x1 - x0) / wall, dc, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=1)
    ap.add_argument("--count", type=int, default=100000)
    ap.add_argument("--cpu", default="0",
                    help="CPUs the pairs run on (taskset -c; default 0: every switch is a real "
                    "one, and the threads' placement does not change the figures)")
    ap.add_argument("--min", default=None, help="also measure --off-cpu-min MIN")
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    ap.add_argument("--against", default=None,
                    help="another build directory whose profd --off-cpu runs beside this one's")
    a = ap.parse_args()
    profd = os.path.join(a.build, "bin", "profd")
    fixture = os.path.join(a.build, "tests", "fixtures", "offcpu")
    tmp = tempfile.mkdtemp(prefix="profd-offcpu-")
    modes = ["none", "cpu-only", "off-cpu"] + ([f"off-cpu {a.min}"] if a.min else []) + \
        (["off-cpu then"] if a.against else [])
    res = {m: [] for m in modes}
    for r in range(a.rounds):
        for m in modes:
            res[m].append(run(profd, fixture, m, a.pairs, a.count, a.cpu, tmp, a.against))
            s, x, dc, cpu = res[m][-1]
            print(f"round {r + 1} {m:>14}: {s:.3f} s, CPU {cpu:.3f} s, {x / 1000:.0f}k switches/s"
                  + (f", daemon {dc} ms CPU" if dc is not None else ""), flush=True)
    base = statistics.median(v[0] for v in res["none"])
    cbase = statistics.median(v[3] for v in res["none"])
    print(f"\n{a.pairs} pairs x {a.count} round trips, {a.rounds} rounds, medians:")
    print(f"{'mode':>14}  {'time s':>8}  {'vs none':>8}  {'CPU s':>7}  {'vs none':>8}  "
          f"{'switches/s':>11}  {'daemon CPU':>10}")
    for m in modes:
        s = statistics.median(v[0] for v in res[m])
        c = statistics.median(v[3] for v in res[m])
        x = statistics.median(v[1] for v in res[m])
        dcs = [v[2] for v in res[m] if v[2] is not None]
        dc = f"{statistics.median(dcs):.0f} ms" if dcs else "-"
        print(f"{m:>14}  {s:8.3f}  {(s / base - 1) * 100:+7.1f}%  {c:7.3f}  "
              f"{(c / cbase - 1) * 100:+7.1f}%  {x / 1000:10.0f}k  {dc:>10}")


if __name__ == "__main__":
    main()
