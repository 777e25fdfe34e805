#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""What following a target's children costs: a shell that fork+execs /bin/true N times, timed
with no profd, with profd --pid SHELL --no-children (the sched_process_fork program runs for
every fork but adds nothing), and with profd --pid SHELL (every child is followed: a fork, an
exec and an exit record, its samples). Rounds interleave the three; medians of the loop's time
and the daemon's CPU time during the loop.

Usage: sudo bench/follow.py [--rounds 5] [--forks 3000] [--build build]
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


def run(profd, mode, forks, tmp):
    go = os.path.join(tmp, "go")
    if os.path.exists(go):
        os.unlink(go)
    loop = subprocess.Popen(
        ["bash", "-c", f'while [ ! -e {go} ]; do sleep 0.01; done; s=$(date +%s%N); '
         f'for i in $(seq {forks}); do /bin/true; done; e=$(date +%s%N); '
         'echo $(( (e-s)/1000000 ))'], stdout=subprocess.PIPE, text=True)
    pd = None
    if mode != "none":
        args = [profd, "--pid", str(loop.pid), "--socket", os.path.join(tmp, "s"), "-q"]
        if mode == "no-children":
            args.append("--no-children")
        pd = subprocess.Popen(args)
        time.sleep(1.5)
        c0 = cpu_ms(pd.pid)
    open(go, "w").close()
    ms = int(loop.communicate()[0])
    dc = None
    if pd:
        time.sleep(0.3)  # the last records drain within 100 ms
        dc = cpu_ms(pd.pid) - c0
        pd.terminate()
        pd.wait()
    return ms, dc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--forks", type=int, default=3000)
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    a = ap.parse_args()
    profd = os.path.join(a.build, "bin", "profd")
    tmp = tempfile.mkdtemp(prefix="profd-follow-")
    modes = ("none", "no-children", "children")
    res = {m: [] for m in modes}
    for _ in range(a.rounds):
        for m in modes:
            res[m].append(run(profd, m, a.forks, tmp))
    base = statistics.median(x[0] for x in res["none"])
    print(f"{a.forks} fork+exec of /bin/true, {a.rounds} rounds, medians")
    for m in modes:
        ms = statistics.median(x[0] for x in res[m])
        cpu = [x[1] for x in res[m] if x[1] is not None]
        line = f"{m:12s} loop {ms:6.0f} ms ({ms / base:.3f}x)"
        if cpu:
            c = statistics.median(cpu)
            line += f", daemon CPU {c:.0f} ms ({1000 * c / a.forks:.1f} us a process)"
        print(line)


if __name__ == "__main__":
    main()
