#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""profd against py-spy on a multi-threaded Python program (bench/py_work.py). As root:

  sudo bench/python_vs_pyspy.py shares [--seconds 30] [--work-rounds 780]
        one run of the target sampled at the same time by profd (--pid, 100 Hz) and by
        `py-spy record --rate 100 --format raw`; the self share of each Python function (the
        innermost Python frame of each sample) from each, side by side
  sudo bench/python_vs_pyspy.py slowdown [--rounds 11] [--work-rounds 200]
        wall time of the fixed-work target with no profiler, under profd --pid at 100 Hz and
        under py-spy record --rate 100 (blocking mode, its default), in random order within each
        round; the CPU time each profiler process used while the target ran

py-spy is not a dependency of profd: install it for this benchmark only (`pip install py-spy`).
It is looked up on PATH, then beside the target's interpreter (--python), or given by --py-spy.
"""
import argparse
import collections
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading

sys.dont_write_bytecode = True  # no __pycache__ left in the tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (the benchmark helpers: Profd, machine, quartiles)

TARGET = os.path.join(run.ROOT, "bench", "py_work.py")
DEFAULT_PYTHON = "/root/.pyenv/versions/3.11.7/bin/python3.11"
CLK_TCK = os.sysconf("SC_CLK_TCK")

# "NAME (FILE:LINE)": a Python frame as both profilers print it (profd: co_qualname from 3.11;
# py-spy: the function's name). Native frames ("sym", "sym_[k]", "[unknown] (lib+0x..)") never
# match: they do not end in a .py file.
PYFRAME = re.compile(r"^(?P<name>.+) \((?P<file>[^()]*\.py|<[^()]*>)(?::\d+)?\)$")


def cpu_ms(pid):
    """utime + stime of a process (all its threads, live and exited) in ms, from
    /proc/PID/stat; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except FileNotFoundError:
        return None
    rest = s[s.rindex(")") + 2:].split()
    # rest[0] is field 3 (state): utime and stime are fields 14 and 15.
    return (int(rest[11]) + int(rest[12])) * 1000 / CLK_TCK


class Target:
    """py_work.py --wait: started, then released with go(), then told to exit with finish()."""

    def __init__(self, python, rounds, threads):
        self.proc = subprocess.Popen([python, TARGET, "--wait", "--rounds", str(rounds),
                                      "--threads", str(threads)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "ready":
            raise SystemExit(f"bench: target did not start ({line})")
        self.pid = int(line[1])

    def go(self):
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()

    def wall(self):
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "wall":
            raise SystemExit(f"bench: target failed ({line})")
        return float(line[1])

    def finish(self):
        if self.proc.stdin.closed:
            self.proc.wait(30)
            return
        try:
            self.proc.stdin.write("\n")
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        self.proc.wait(30)


class PySpy:
    """py-spy record --pid, ready once it says that it samples."""

    def __init__(self, exe, pid, hz, out, duration=None, gil=False):
        cmd = [exe, "record", "--rate", str(hz), "--pid", str(pid), "--format", "raw",
               "-o", out]
        if duration:
            cmd += ["--duration", str(duration)]
        if gil:
            cmd.append("--gil")
        self.out = out
        # It writes its messages to stdout, errors to stderr.
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.log = []
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if not self.ready.wait(20):
            self.proc.kill()
            raise SystemExit("bench: py-spy did not start: " + " | ".join(self.log))

    def _read(self):
        for line in self.proc.stdout:
            self.log.append(line.strip())
            if "Sampling process" in line:
                self.ready.set()
        self.ready.set()  # exited: let the waiter see it

    def wait(self):
        """Wait until it has written its output (it stops when the target exits); returns its
        total CPU time in ms from the kernel's accounting of the reaped child."""
        _, status, ru = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.reader.join(5)
        if self.proc.returncode != 0:
            raise SystemExit("bench: py-spy failed: " + " | ".join(self.log))
        return (ru.ru_utime + ru.ru_stime) * 1000


def read_folded(text):
    rows = []
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            rows.append((stack.split(";"), int(n)))
    return rows


def self_shares(rows):
    """{(function, file): share} over the samples with a Python frame, by the innermost Python
    frame of each (native frames above it are ignored), the number of those samples and of the
    samples without one. A function is named by the last dotted component of its name
    (profd's Worker.compute and py-spy's compute both become compute) and its file by its base
    name (the two shorten paths differently)."""
    counts = collections.Counter()
    nopy = 0
    for frames, n in rows:
        for fr in reversed(frames):
            m = PYFRAME.match(fr)
            if m:
                name = m.group("name").rsplit(".", 1)[-1]
                counts[(name, os.path.basename(m.group("file")))] += n
                break
        else:
            nopy += n
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()} if total else {}, total, nopy


def find_pyspy(a):
    exe = a.py_spy or shutil.which("py-spy") or os.path.join(os.path.dirname(a.python),
                                                             "py-spy")
    if not os.access(exe, os.X_OK):
        raise SystemExit("bench: py-spy not found: pip install py-spy, or give --py-spy")
    return exe


def versions(a, pyspy):
    py = subprocess.run([a.python, "-VV"], capture_output=True, text=True).stdout.strip()
    ps = subprocess.run([pyspy, "--version"], capture_output=True, text=True).stdout.strip()
    print(f"target interpreter: {a.python}: {py}\npy-spy: {pyspy}: {ps}", flush=True)


def shares(a):
    run.machine()
    pyspy = find_pyspy(a)
    versions(a, pyspy)
    raw = os.path.join(a.tmp, "pyspy.raw")
    t = Target(a.python, a.work_rounds, a.threads)
    d = spy = None
    try:
        d = run.Profd(a.tmp, "--pid", str(t.pid), "--frequency", str(a.hz))
        d.settle()
        spy = PySpy(pyspy, t.pid, a.hz, raw, duration=a.seconds, gil=a.gil)
        t.go()
        wall = t.wall()
        t.finish()
        spy.wait()
        print("py-spy said: " + " | ".join(x for x in spy.log if x), flush=True)
        folded = d.ctl("dump", "flamegraph", "--pid", str(t.pid), "--format", "folded",
                       "--python-only")
    finally:
        if spy and spy.proc.poll() is None:
            spy.proc.kill()
        if d:
            d.stop()
        if t.proc.poll() is None:
            t.proc.kill()
    with open(raw) as f:
        pyspy_rows = read_folded(f.read())
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        with open(os.path.join(a.keep, "profd.folded"), "w") as f:
            f.write(folded)
        shutil.copy(raw, os.path.join(a.keep, "pyspy.folded"))
    sp, np_, nn_p = self_shares(read_folded(folded))
    ss, ns, nn_s = self_shares(pyspy_rows)
    print(f"\nshares: {a.threads} threads of py_work.py --rounds {a.work_rounds}, "
          f"wall {wall:.1f} s; profd --pid --frequency {a.hz} (whole run), py-spy record "
          f"--rate {a.hz} --duration {a.seconds}{' --gil' if a.gil else ''}, both at once")
    print(f"samples with a Python frame: profd {np_} (+{nn_p} without), py-spy {ns} "
          f"(+{nn_s} without); py-spy threads per tick: "
          f"{(ns + nn_s) / (min(wall, a.seconds) * a.hz):.2f}")
    keys = sorted(set(sp) | set(ss), key=lambda k: -max(sp.get(k, 0), ss.get(k, 0)))[:a.top]
    print(f"{'function (file)':<34} {'profd %':>8} {'py-spy %':>9} {'diff pts':>9}")
    worst = 0.0
    for k in keys:
        x, y = 100 * sp.get(k, 0), 100 * ss.get(k, 0)
        worst = max(worst, abs(x - y))
        print(f"{k[0] + ' (' + k[1] + ')':<34} {x:8.2f} {y:9.2f} {x - y:+9.2f}")
    rest_p = 100 * (1 - sum(sp.get(k, 0) for k in keys))
    rest_s = 100 * (1 - sum(ss.get(k, 0) for k in keys))
    print(f"{'(everything else)':<34} {rest_p:8.2f} {rest_s:9.2f} {rest_p - rest_s:+9.2f}")
    print(f"largest difference in the top {len(keys)}: {worst:.2f} points (target: within 3)")


def slowdown(a):
    run.machine()
    pyspy = find_pyspy(a)
    versions(a, pyspy)
    modes = ["none", "profd", "py-spy"]
    walls = {m: [] for m in modes}
    cpu = {m: [] for m in modes[1:]}       # profiler CPU ms while the target ran
    pct = {m: [] for m in modes[1:]}       # the same as % of one CPU over the target's wall time
    extra = {m: [] for m in modes[1:]}     # profd: daemon_cpu_ns; py-spy: whole life (rusage)
    samples = {m: [] for m in modes[1:]}
    for r in range(a.rounds):
        order = modes[:]
        random.shuffle(order)
        for m in order:
            t = Target(a.python, a.work_rounds, a.threads)
            d = spy = None
            try:
                if m == "none":
                    t.go()
                    walls[m].append(t.wall())
                elif m == "profd":
                    d = run.Profd(a.tmp, "--pid", str(t.pid), "--frequency", str(a.hz))
                    d.settle()
                    st0, c0 = d.status(), cpu_ms(d.proc.pid)
                    t.go()
                    walls[m].append(t.wall())
                    c1, st1 = cpu_ms(d.proc.pid), d.status()
                    cpu[m].append(c1 - c0)
                    extra[m].append((st1["daemon_cpu_ns"] - st0["daemon_cpu_ns"]) / 1e6)
                    samples[m].append(st1["samples_received"] - st0["samples_received"])
                else:
                    raw = os.path.join(a.tmp, "pyspy.raw")
                    spy = PySpy(pyspy, t.pid, a.hz, raw)
                    c0 = cpu_ms(spy.proc.pid)
                    t.go()
                    walls[m].append(t.wall())
                    c1 = cpu_ms(spy.proc.pid)
                    t.finish()
                    extra[m].append(spy.wait())
                    cpu[m].append(c1 - c0)
                    with open(raw) as f:
                        samples[m].append(sum(n for _, n in read_folded(f.read())))
                if m != "none":
                    pct[m].append(100 * cpu[m][-1] / (1000 * walls[m][-1]))
                t.finish()
            finally:
                if spy and spy.proc.poll() is None:
                    spy.proc.kill()
                if d:
                    d.stop()
                if t.proc.poll() is None:
                    t.proc.kill()
        print(f"round {r + 1:2}/{a.rounds} ({' '.join(order)}): " +
              ", ".join(f"{m} {walls[m][-1]:.3f}s" for m in modes) +
              "; CPU " + ", ".join(f"{m} {cpu[m][-1]:.0f} ms" for m in cpu), flush=True)
    base = statistics.median(walls["none"])
    print(f"\nslowdown: {a.threads} threads of py_work.py --rounds {a.work_rounds}, {a.rounds} "
          f"rounds, modes in random order within each round, profilers at {a.hz} Hz on the "
          f"target's pid")
    print(f"{'mode':<8} {'median s':>9} {'min s':>7} {'max s':>7} {'IQR s':>13} {'ratio':>7} "
          f"{'slowdown':>9} {'paired':>8} {'paired IQR':>15}")
    for m in modes:
        xs = walls[m]
        med = statistics.median(xs)
        q1, q3 = run.quartiles(xs)
        pr = [x / b for x, b in zip(xs, walls["none"])]
        p1, p3 = run.quartiles(pr)
        print(f"{m:<8} {med:9.3f} {min(xs):7.3f} {max(xs):7.3f} {q1:6.3f}-{q3:6.3f} "
              f"{med / base:7.4f} {100 * (med / base - 1):8.2f}% {statistics.median(pr):8.4f} "
              f"{p1:7.4f}-{p3:7.4f}")
    print("\nprofiler process CPU while the target ran (utime+stime from /proc/PID/stat, "
          f"{1000 // CLK_TCK} ms ticks):")
    for m in cpu:
        c, p = cpu[m], pct[m]
        print(f"{m:<8} median {statistics.median(c):7.1f} ms (min {min(c):.0f}, max {max(c):.0f})"
              f" = {statistics.median(p):5.2f}% of one CPU (min {min(p):.2f}, max {max(p):.2f});"
              f" samples per run median {statistics.median(samples[m]):.0f}")
    print(f"profd daemon_cpu_ns over the same windows: median "
          f"{statistics.median(extra['profd']):.1f} ms")
    print(f"py-spy whole life (attach to exit, rusage of the reaped child): median "
          f"{statistics.median(extra['py-spy']):.1f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=DEFAULT_PYTHON, help="interpreter of the target")
    ap.add_argument("--py-spy", help="py-spy executable")
    ap.add_argument("--hz", type=int, default=100)
    ap.add_argument("--threads", type=int, default=4)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("shares")
    s.add_argument("--seconds", type=int, default=30, help="py-spy --duration")
    s.add_argument("--work-rounds", type=int, default=800, help="about 30 s on 4 threads")
    s.add_argument("--top", type=int, default=10)
    s.add_argument("--keep", help="directory to keep both folded profiles in")
    s.add_argument("--gil", action="store_true",
                   help="py-spy --gil: only the thread holding the GIL (by default py-spy also "
                   "samples threads waiting for the GIL, which profd, sampling CPU time, does "
                   "not see)")
    w = sub.add_parser("slowdown")
    w.add_argument("--rounds", type=int, default=11)
    w.add_argument("--work-rounds", type=int, default=200, help="about 8 s on 4 threads")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench: run as root (profd needs BPF, py-spy ptrace)")
    with tempfile.TemporaryDirectory(prefix="profd-pybench-") as a.tmp:
        {"shares": shares, "slowdown": slowdown}[a.cmd](a)


if __name__ == "__main__":
    main()
