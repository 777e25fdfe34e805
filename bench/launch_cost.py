#!/usr/bin/env python3
"""CPU cost that libprofd_cupti.so and the daemon's launch probe add to each CUDA kernel launch,
measured without a GPU. Run as root after building the benchmark:

  cmake --build build --target profd profctl bench_launch
  sudo bench/launch_cost.py [--rounds 11] [--reps 5] [--iters 2000000] [--probe-iters 100000]
                            [--deep 100] [--bpf-stats]

bench/bench_launch.c plays CUDA's part over the fake libcupti of the tests: the launch callback
at API enter and exit of __cudaLaunchKernel, from a chain of five frames, ITERS times per
repetition. Each mode is a fresh process (and a fresh daemon where there is one); the modes run
in random order within each round:

  none        the fake libcupti only, libprofd_cupti.so not loaded: the fake invokes nothing
  idle        the library loaded, no daemon: nothing is subscribed
  rate1000    a daemon (profd --pid) has enabled collection; PROFD_CUPTI_LAUNCH_RATE=1000, the
              default: a launch fires the probe only when its thread's token bucket allows
  rate0       the same with PROFD_CUPTI_LAUNCH_RATE=0: every launch fires the USDT probe, and
              the daemon's BPF program captures the launching stack
  none-dN     none with N more frames under the launch (--deep N; 0 leaves both deep modes out)
  rate0-dN    rate0 with those frames: the stack capture walks every frame

The figure is the launching thread's CPU time per launch (CLOCK_THREAD_CPUTIME_ID, which also
counts the uprobe trap and the BPF program run in its context); wall time is printed beside it,
and so is the cost of one read of CLOCK_MONOTONIC, which the token bucket makes at every launch.
"ratio" is a mode's median over the median of its baseline (none, or none-dN for rate0-dN);
"paired" is the median over rounds of each round's median over the baseline's median of the same
round; "added" is the difference of the medians. The daemon's CPU is its daemon_cpu_ns over the
timed part (from `profctl status` right before and 300 ms after, which lets the 100 ms drain
timer take the last records), less its idle rate over the same time, measured just before the
timed part over --idle seconds.

--bpf-stats turns kernel.bpf_stats_enabled on for the run (and back off after) and reads the
launch program's run time from the daemon's file descriptors: the BPF part of the probe's cost.
The statistics themselves cost two clock reads per BPF run, so take the other figures from a
run without it.

This is the CPU side only: there is no driver, no real CUPTI and no GPU. What CUPTI itself costs
per launch (its callback dispatch, and the kernel instrumentation of CONCURRENT_KERNEL activity)
is not in these figures.
"""
import argparse
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Absolute: the library reports its own path as it was loaded, and the daemon takes only
# absolute ones.
BUILD = os.path.abspath(os.environ.get("PROFD_BUILD", os.path.join(ROOT, "build")))
PROFD = os.path.join(BUILD, "bin", "profd")
PROFCTL = os.path.join(BUILD, "bin", "profctl")
BENCH = os.path.join(BUILD, "bin", "bench_launch")
LIB = os.path.join(BUILD, "lib", "libprofd_cupti.so")
FAKE = os.path.join(BUILD, "lib", "libcupti_fake.so")
BPF_STATS = "/proc/sys/kernel/bpf_stats_enabled"


class Mode:
    def __init__(self, name, inject, rate, depth, probe_iters, base):
        self.name, self.inject, self.rate, self.depth = name, inject, rate, depth
        self.probe_iters, self.base = probe_iters, base
        self.cpu, self.wall, self.round_med, self.daemon = [], [], [], []


def make_modes(deep):
    modes = [Mode("none", False, None, 0, False, "none"),
             Mode("idle", True, None, 0, False, "none"),
             Mode("rate1000", True, 1000, 0, False, "none"),
             Mode("rate0", True, 0, 0, True, "none")]
    if deep:
        modes += [Mode(f"none-d{deep}", False, None, deep, True, f"none-d{deep}"),
                  Mode(f"rate0-d{deep}", True, 0, deep, True, f"none-d{deep}")]
    return modes


def ctl_status(sock):
    r = subprocess.run([PROFCTL, "--socket", sock, "status", "--json"], capture_output=True,
                       text=True, check=True)
    st = json.loads(r.stdout)
    return st["daemon_cpu_ns"], st.get("gpu_launches", 0)


def bpf_progs(pid):
    """run_time_ns and run_cnt of each BPF program the process holds, by program id."""
    progs = {}
    fddir = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fddir):
        try:
            with open(os.path.join(fddir, fd)) as f:
                kv = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        except OSError:
            continue
        if "prog_id" in kv and "run_cnt" in kv:
            progs[kv["prog_id"]] = (int(kv["run_time_ns"]), int(kv["run_cnt"]))
    return progs


def busiest_prog(before, after):
    """(ns, runs) of the program that ran most between the two readings: the launch probe."""
    best = (0, 0)
    for pid, (ns, cnt) in after.items():
        ns0, cnt0 = before.get(pid, (0, 0))
        if cnt - cnt0 > best[1]:
            best = (ns - ns0, cnt - cnt0)
    return best


def readline(proc, want):
    line = proc.stdout.readline()
    if not line.startswith(want):
        proc.kill()
        raise SystemExit(f"launch_cost: bench_launch said {line!r}, expected {want!r}")
    return line.split()


def run_mode(mode, args, tmp):
    """One process of bench_launch in this mode. Returns the per-repetition (cpu, wall) ns per
    launch, the clock yardstick, and for the modes with a daemon its CPU and probe counts."""
    sock = os.path.join(tmp, f"profd-{random.randrange(1 << 30)}.sock")
    env = dict(os.environ, PROFD_CUPTI_PATH=FAKE, PROFD_SOCKET=sock, PROFD_CUPTI_QUIET="1")
    env.pop("PROFD_CUPTI_LAUNCH_RATE", None)
    cmd = [BENCH, "--depth", str(mode.depth)]
    if mode.inject:
        cmd += ["--inject", LIB]
    if mode.rate is not None:
        cmd += ["--wait-enabled"]
        env["PROFD_CUPTI_LAUNCH_RATE"] = str(mode.rate)
    iters = args.probe_iters if mode.probe_iters else args.iters
    app = subprocess.Popen([*cmd, str(iters), str(args.reps)], env=env, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    daemon = None
    res = {}
    try:
        pid = int(readline(app, "pid")[1])
        if mode.rate is not None:
            # Started before the library loads, so that its first connect finds the daemon.
            daemon = subprocess.Popen([PROFD, "--socket", sock, "--quiet", "--pid", str(pid),
                                       "--frequency", str(args.frequency)])
            deadline = time.time() + 20
            while not os.path.exists(sock):
                if time.time() > deadline or daemon.poll() is not None:
                    raise SystemExit("launch_cost: profd did not start")
                time.sleep(0.02)
        app.stdin.write("load\n")
        app.stdin.flush()
        readline(app, "ready")
        if daemon:
            c0, _ = ctl_status(sock)
            t0 = time.monotonic()
            time.sleep(args.idle)
            c1, l1 = ctl_status(sock)
            idle_rate = (c1 - c0) / (time.monotonic() - t0)
            t1 = time.monotonic()
            p1 = bpf_progs(daemon.pid) if args.bpf_stats else {}
        app.stdin.write("go\n")
        app.stdin.flush()
        reps = []
        for _ in range(args.reps):
            f = readline(app, "rep")
            reps.append((float(f[2]), float(f[3])))
        res["reps"] = reps
        res["clock"] = float(readline(app, "clock")[1])
        total = int(readline(app, "done")[1])
        if daemon:
            p2 = bpf_progs(daemon.pid) if args.bpf_stats else {}
            time.sleep(0.3)
            c2, l2 = ctl_status(sock)
            window = time.monotonic() - t1
            res["daemon_ns"] = c2 - c1
            res["daemon_idle_ns"] = idle_rate * window
            res["launches"] = total
            res["probes"] = l2 - l1
            if args.bpf_stats:
                res["bpf_ns"], res["bpf_runs"] = busiest_prog(p1, p2)
        if app.wait(30) != 0:
            raise SystemExit(f"launch_cost: bench_launch ({mode.name}) failed")
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
        if daemon:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)
    return res


def quartiles(xs):
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return q[0], q[2]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def report(modes, clocks):
    by = {m.name: m for m in modes}
    print()
    print("thread CPU ns per launch (enter + exit callbacks), medians over all repetitions")
    print(f"{'mode':11s} {'median':>8s} {'IQR':>17s} {'min':>8s} {'max':>8s} {'wall med':>9s} "
          f"{'ratio':>7s} {'paired':>7s} {'paired IQR':>15s} {'added ns':>9s}")
    for m in modes:
        b = by[m.base]
        mid, bmid = med(m.cpu), med(b.cpu)
        q1, q3 = quartiles(m.cpu)
        paired = [x / y for x, y in zip(m.round_med, b.round_med)]
        p1, p3 = quartiles(paired)
        print(f"{m.name:11s} {mid:8.1f} {q1:8.1f}-{q3:8.1f} {min(m.cpu):8.1f} {max(m.cpu):8.1f} "
              f"{med(m.wall):9.1f} {mid / bmid:7.2f} {med(paired):7.2f} {p1:7.2f}-{p3:7.2f} "
              f"{mid - bmid:9.1f}")
    print(f"one clock_gettime(CLOCK_MONOTONIC) in the same processes: median {med(clocks):.1f} ns "
          "(the token bucket reads it at every launch)")
    print()
    print("daemon CPU over the timed part (daemon_cpu_ns) less its idle rate, medians over rounds")
    print(f"{'mode':11s} {'launches':>9s} {'probes':>7s} {'daemon ms':>9s} {'idle ms':>8s} "
          f"{'ns/launch':>10s} {'ns/probe':>9s} {'bpf ns/run':>11s}")
    for m in modes:
        if not m.daemon:
            continue
        net = [max(0.0, d["daemon_ns"] - d["daemon_idle_ns"]) for d in m.daemon]
        per_launch = [n / d["launches"] for n, d in zip(net, m.daemon)]
        per_probe = [n / d["probes"] for n, d in zip(net, m.daemon) if d["probes"]]
        bpf = [d["bpf_ns"] / d["bpf_runs"] for d in m.daemon if d.get("bpf_runs")]
        print(f"{m.name:11s} {med([d['launches'] for d in m.daemon]):9.0f} "
              f"{med([d['probes'] for d in m.daemon]):7.0f} "
              f"{med([d['daemon_ns'] for d in m.daemon]) / 1e6:9.2f} "
              f"{med([d['daemon_idle_ns'] for d in m.daemon]) / 1e6:8.2f} "
              f"{med(per_launch):10.2f} {med(per_probe):9.0f} {med(bpf):11.0f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per process")
    ap.add_argument("--iters", type=int, default=2000000, help="launches per repetition")
    ap.add_argument("--probe-iters", type=int, default=100000,
                    help="launches per repetition in the rate0 and deep modes")
    ap.add_argument("--deep", type=int, default=100,
                    help="extra frames in the deep modes (0: no deep modes)")
    ap.add_argument("--frequency", type=int, default=1,
                    help="the daemon's CPU sampling rate (Hz): low, so that the launch probe "
                    "is what its CPU figure measures")
    ap.add_argument("--idle", type=float, default=0.5,
                    help="seconds over which the daemon's idle CPU rate is measured")
    ap.add_argument("--bpf-stats", action="store_true",
                    help="turn kernel.bpf_stats_enabled on and report the BPF program's time")
    args = ap.parse_args()
    for f in (PROFD, PROFCTL, BENCH, LIB, FAKE):
        if not os.path.exists(f):
            raise SystemExit(f"launch_cost: {f} is missing; build profd, profctl and "
                             "bench_launch (PROFD_BUILD names the build directory)")
    if os.geteuid() != 0:
        raise SystemExit("launch_cost: run as root (the daemon loads BPF programs)")

    modes = make_modes(args.deep)
    load = open("/proc/loadavg").read().split()[:3]
    print(f"machine: nproc {os.cpu_count()}, kernel {platform.release()}, "
          f"load average before {' '.join(load)}", flush=True)
    print(f"launch_cost: {args.rounds} rounds x {len(modes)} modes, {args.reps} repetitions of "
          f"{args.iters} launches ({args.probe_iters} in rate0 and the deep modes) per process; "
          f"daemon at {args.frequency} Hz{'; BPF statistics on' if args.bpf_stats else ''}",
          flush=True)
    stats_was = None
    if args.bpf_stats:
        stats_was = open(BPF_STATS).read().strip()
        with open(BPF_STATS, "w") as f:
            f.write("1")
    t_start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="profd-launch-")
    clocks = []
    try:
        for r in range(args.rounds):
            order = modes[:]
            random.shuffle(order)
            parts = []
            for m in order:
                res = run_mode(m, args, tmp)
                c = [x[0] for x in res["reps"]]
                m.cpu += c
                m.wall += [x[1] for x in res["reps"]]
                m.round_med.append(statistics.median(c))
                clocks.append(res["clock"])
                txt = f"{m.name} {statistics.median(c):.1f}"
                if "daemon_ns" in res:
                    m.daemon.append(res)
                    txt += (f" (daemon {res['daemon_ns'] / 1e6:.1f} ms, idle share "
                            f"{res['daemon_idle_ns'] / 1e6:.1f} ms, {res['probes']} probes)")
                parts.append(txt)
            print(f"round {r + 1:2d}/{args.rounds}: ns/launch " + ", ".join(parts), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if stats_was is not None:
            with open(BPF_STATS, "w") as f:
                f.write(stats_was)
    report(modes, clocks)
    load = open("/proc/loadavg").read().split()[:3]
    print(f"\nbench time {time.monotonic() - t_start:.0f} s; load average after "
          f"{' '.join(load)}")


if __name__ == "__main__":
    sys.exit(main())
