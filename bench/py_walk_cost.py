#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""BPF time per Python sample of two builds, alternating: a 3.11 thread 62 Python frames deep
burns CPU while `profd --pid` samples it at 999 Hz for SECONDS; the sampler program's run time
(kernel BPF statistics, enabled with BPF_ENABLE_STATS for the run) divided by the samples the
daemon received with Python frames. As root:

  sudo bench/py_walk_cost.py --before OLD_BUILD [--after build] [--rounds 3] [--seconds 8]
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PYTHON = "/root/.pyenv/versions/3.11.7/bin/python3.11"
DEEP = """
import sys, time
def rec(n):
    if n == 0:
        end = time.time() + float(sys.argv[1])
        s = 0
        while time.time() < end:
            for i in range(1000):
                s += i * i
        return s
    return rec(n - 1) + 1
rec(60)
"""


def stats_on():
    """Keep the kernel's BPF run-time statistics on while the returned fd is open."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint32 * 32)()  # union bpf_attr: enable_stats.type = BPF_STATS_RUN_TIME
    fd = libc.syscall(321, 32, attr, 128)  # __NR_bpf (x86_64), BPF_ENABLE_STATS
    if fd < 0:
        sys.exit(f"BPF_ENABLE_STATS failed: errno {ctypes.get_errno()}")
    return fd


def samplers():
    out = subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True, text=True,
                         check=True).stdout
    return {p["id"]: p for p in json.loads(out) if p.get("name") == "profd_sample"}


def prog_ids(pid):
    """The BPF programs process pid holds (its fds' fdinfo names them)."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids


def one(build, seconds, script):
    sock = os.path.join(tempfile.mkdtemp(prefix="profd-walk-"), "s.sock")
    target = subprocess.Popen([PYTHON, script, str(seconds + 4)])
    d = subprocess.Popen([os.path.join(build, "bin", "profd"), "--socket", sock, "-F", "999",
                          "--pid", str(target.pid)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        time.sleep(2)
        new = [i for i in samplers() if i in prog_ids(d.pid)]
        if len(new) != 1:
            sys.exit(f"expected one new sampler program, found {new}")
        p0 = samplers()[new[0]]
        st0 = json.loads(subprocess.run([os.path.join(build, "bin", "profctl"), "--socket", sock,
                                         "status", "--json"], capture_output=True,
                                        text=True).stdout)
        time.sleep(seconds)
        p1 = samplers()[new[0]]
        st1 = json.loads(subprocess.run([os.path.join(build, "bin", "profctl"), "--socket", sock,
                                         "status", "--json"], capture_output=True,
                                        text=True).stdout)
    finally:
        d.terminate()
        d.wait(20)
        target.kill()
        target.wait()
    ns = p1.get("run_time_ns", 0) - p0.get("run_time_ns", 0)
    py = st1["python_samples"] - st0["python_samples"]
    return ns / py if py else float("nan"), py


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8)
    a = ap.parse_args()
    fd = stats_on()
    script = os.path.join(tempfile.mkdtemp(prefix="profd-walk-"), "deep.py")
    with open(script, "w") as f:
        f.write(DEEP)
    res = {"before": [], "after": []}
    for r in range(a.rounds):
        for label, build in (("before", a.before), ("after", a.after)):
            ns, n = one(build, a.seconds, script)
            res[label].append(ns)
            print(f"round {r + 1} {label}: {ns:.0f} ns of BPF per Python sample ({n} samples)",
                  flush=True)
    b, f = statistics.median(res["before"]), statistics.median(res["after"])
    print(f"median: before {b:.0f} ns, after {f:.0f} ns, ratio {f / b:.2f}")
    os.close(fd)


if __name__ == "__main__":
    main()
