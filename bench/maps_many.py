#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The daemon's CPU while it profiles a process with more executable mappings than
--unwind-max-mappings (issue: described again every second, forever): BASE and NEW side by side.

  sudo bench/maps_many.py --base BASE_BUILD [--new build] [--maps 600] [--seconds 30] [--rounds 3]

One maps_many process (NEW's tests/fixtures/maps_many: MAPS more copies of its own code, spinning
in one of them); each round starts a daemon of each build on it (--pid, 99 Hz, sockets of their
own, at the same time: the same load for both), lets them describe it for 3 s, then reads each
daemon's CPU time (utime + stime of /proc/PID/stat) over SECONDS. Prints each round, the medians
and their ratio, and the load average.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(build, pid, tmp, name):
    sock = os.path.join(tmp, f"{name}.sock")
    log = open(os.path.join(tmp, f"{name}.log"), "w")
    p = subprocess.Popen([os.path.join(build, "bin", "profd"), "--socket", sock, "--pid",
                          str(pid), "--frequency", "99"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not os.path.exists(sock):
        if p.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"{name}: profd did not start (see {log.name})")
        time.sleep(0.1)
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="the baseline build directory")
    ap.add_argument("--new", default="build", help="the build under test (default: build)")
    ap.add_argument("--maps", type=int, default=600)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (BPF, perf events)")
    fx = subprocess.Popen([os.path.join(a.new, "tests", "fixtures", "maps_many"), str(a.maps)],
                          stdout=subprocess.PIPE, text=True)
    if fx.stdout.readline().strip() != f"mapped {a.maps}":
        sys.exit("maps_many did not start")
    with open(f"/proc/{fx.pid}/maps") as f:
        nx = sum(1 for line in f if line.split()[1][2] == "x")
    print(f"maps_many pid {fx.pid}: {nx} executable mappings; {a.seconds:.0f} s per round")
    res = {"base": [], "new": []}
    tmp = tempfile.mkdtemp(prefix="profd-maps-bench-")
    try:
        for r in range(a.rounds):
            ds = {"base": start(a.base, fx.pid, tmp, f"base{r}"),
                  "new": start(a.new, fx.pid, tmp, f"new{r}")}
            time.sleep(3)
            c0 = {k: cpu_s(p.pid) for k, p in ds.items()}
            time.sleep(a.seconds)
            c1 = {k: cpu_s(p.pid) for k, p in ds.items()}
            for k, p in ds.items():
                res[k].append(c1[k] - c0[k])
                p.terminate()
                p.wait(20)
            print(f"round {r + 1}: base {res['base'][-1]:.2f} s, new {res['new'][-1]:.2f} s "
                  f"of daemon CPU; load average {os.getloadavg()[0]:.2f}")
    finally:
        fx.kill()
        fx.wait()
    mb, mn = statistics.median(res["base"]), statistics.median(res["new"])
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"median daemon CPU over {a.seconds:.0f} s: base {mb:.2f} s "
          f"({100 * mb / a.seconds:.1f}% of a core), new {mn:.2f} s "
          f"({100 * mn / a.seconds:.1f}%); base/new {mb / mn if mn else float('inf'):.0f}x; "
          f"load average {load}")


if __name__ == "__main__":
    main()
