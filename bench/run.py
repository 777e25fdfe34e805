#!/usr/bin/env python3
"""profd benchmarks. Run as root after building (cmake --build build):

  sudo bench/run.py overhead [--rounds 13] [--work 450]
        slowdown of a CPU-bound program under profd at 99 and 999 Hz and under perf at 999 Hz,
        the work_a share each reports (true value 0.75), daemon CPU per sample
  sudo bench/run.py busy [--seconds 30]
        daemon CPU per sample at 999 Hz with both CPUs running the CPU-bound program
  sudo bench/run.py soak [--minutes 10]
        daemon RSS over time at 99 Hz system-wide, CPU per sample, dump latency
  sudo bench/run.py hour [--minutes 8] [--load exec|steady]
        emulated hour of system-wide 99 Hz samples (999 Hz, 100 ms buckets, every CPU busy with
        exec-heavy shell loops or with the CPU-bound program) and the latency of `profctl dump`
        over all of it
  sudo bench/run.py churn [--minutes 30] [--every 10] [--perf-map-mib 150] [--base BUILD]
        daemon RSS (VmRSS, VmHWM), CPU and counters every 10 s at 99 Hz system-wide on a hostile
        machine: exec storms, forks, thread storms, a binary replaced under its path while it
        runs, corrupted copies of a library mapped and run, and, from a user created for the
        run (and removed after it), code named only by a huge, growing perf map full of garbage
        and a perf map that is a symbolic link to a root-only file; then RSS, CPU per sample and
        status/dump latency (loads in bench/churn.c and bench/churn_load.py)

profd always runs system-wide (no --pid). Every timing is a median over runs made in the same
invocation, reported beside a baseline from the same invocation: the machine is shared and
its speed drifts, so absolute times mean little.
"""
import argparse
import json
import os
import platform
import pwd
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("PROFD_BUILD", os.path.join(ROOT, "build"))
PROFD = os.path.join(BUILD, "bin", "profd")
PROFCTL = os.path.join(BUILD, "bin", "profctl")

# Exec-heavy loads: many short-lived processes from many binaries and libraries, so the daemon
# sees a steady stream of new processes, mappings and distinct stacks, as on a busy host.
EXEC_LOADS = [
    "while :; do find /usr -name '*.so*' 2>/dev/null | xargs -n 20 ls -l > /dev/null; done",
    "while :; do for m in json email http.client xml.dom.minidom sqlite3 argparse; do "
    "python3 -c \"import $m\"; done; find /usr/share -type f 2>/dev/null | head -3000 | "
    "xargs -n 50 wc -c > /dev/null; done",
]

MiB = 2**20


def machine():
    model = "?"
    mem = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                break
    load = open("/proc/loadavg").read().split()[:3]
    print(f"machine: nproc {os.cpu_count()}, kernel {platform.release()}, CPU {model}, "
          f"memory {mem}, load average before {' '.join(load)}", flush=True)


def build_work(tmp):
    exe = os.path.join(tmp, "work")
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-fno-inline",
                    "-fno-optimize-sibling-calls", os.path.join(ROOT, "bench", "work.c"),
                    "-o", exe], check=True)
    return exe


class Profd:
    def __init__(self, tmp, *args, log=None, build=None):
        """With log (a path), profd logs at its default level into that file instead of
        logging only errors to our stderr. build: another build directory (a baseline)."""
        self.sock = os.path.join(tmp, f"profd-{random.randrange(1 << 30)}.sock")
        profd = os.path.join(build, "bin", "profd") if build else PROFD
        self.profctl = os.path.join(build, "bin", "profctl") if build else PROFCTL
        if log:
            with open(log, "w") as f:
                self.proc = subprocess.Popen([profd, "--socket", self.sock, *args], stdout=f,
                                             stderr=f)
        else:
            self.proc = subprocess.Popen([profd, "--socket", self.sock, "--quiet", *args])
        deadline = time.time() + 20
        while not os.path.exists(self.sock):
            if time.time() > deadline or self.proc.poll() is not None:
                raise SystemExit("bench: profd did not start")
            time.sleep(0.02)

    def ctl(self, *args):
        return subprocess.run([self.profctl, "--socket", self.sock, *args], capture_output=True,
                              text=True, check=True).stdout

    def status(self):
        return json.loads(self.ctl("status", "--json"))

    def settle(self, limit=10.0):
        """Wait until the start-up scan of running processes is over (under 2% of a CPU), so
        that it does not land inside a timed run."""
        deadline = time.time() + limit
        prev = self.status()["daemon_cpu_ns"]
        while time.time() < deadline:
            time.sleep(0.25)
            cur = self.status()["daemon_cpu_ns"]
            if cur - prev < 5_000_000:
                return
            prev = cur

    def wakeups(self):
        """Context switches of the daemon so far: about one per wakeup of its event loop."""
        n = 0
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    n += int(line.split()[1])
        return n

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


def start_loads(cmds):
    # Own session each, so that killpg also ends the finds, xargs and pythons they started.
    return [subprocess.Popen(["sh", "-c", c], start_new_session=True) for c in cmds]


def stop_loads(loads):
    for p in loads:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def run_work(work, rounds, prefix=()):
    r = subprocess.run([*prefix, work, str(rounds)], capture_output=True, text=True, check=True)
    return float(r.stdout.strip().splitlines()[-1])


def folded_split(text):
    """Share of work_a among samples under work_a or work_b, and their count."""
    a = b = 0
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        if "work_a" in frames:
            a += int(n)
        elif "work_b" in frames:
            b += int(n)
    return a / (a + b) if a + b else float("nan"), a + b


def perf_split(data):
    """Share of work_a from `perf report --children`, whose first column is the share of samples
    with the symbol anywhere on the stack:  '    75.04%     0.00%  [.] work_a'."""
    out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--children", "--sort",
                          "sym", "-g", "none"], capture_output=True, text=True).stdout
    pct = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+([\d.]+)%\s+\[\.\]\s+(\S+)\s*$", line)
        if m:
            pct[m.group(3)] = float(m.group(1))
    a, b = pct.get("work_a", 0.0), pct.get("work_b", 0.0)
    return a / (a + b) if a + b else float("nan")


def quartiles(xs):
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[2]


def overhead(args):
    machine()
    tmp = args.tmp
    work = build_work(tmp)
    modes = ["none", "profd-99", "profd-999"] + (["perf-999"] if shutil.which("perf") else [])
    times = {m: [] for m in modes}
    splits = {m: [] for m in modes if m != "none"}
    per_sample = {m: [] for m in modes if m.startswith("profd")}
    for r in range(args.rounds):
        order = modes[:]
        random.shuffle(order)
        for m in order:
            if m == "none":
                times[m].append(run_work(work, args.work))
            elif m.startswith("profd"):
                hz = m.split("-")[1]
                d = Profd(tmp, "--frequency", hz)
                try:
                    d.settle()
                    st0 = d.status()
                    p = subprocess.Popen([work, str(args.work)], stdout=subprocess.PIPE,
                                         text=True)
                    out, _ = p.communicate()
                    st1 = d.status()
                    times[m].append(float(out.strip()))
                    s, _ = folded_split(d.ctl("dump", "flamegraph", "--format", "folded",
                                              "--pid", str(p.pid)))
                    splits[m].append(s)
                    ds = st1["samples_received"] - st0["samples_received"]
                    if ds > 0:
                        per_sample[m].append((st1["daemon_cpu_ns"] - st0["daemon_cpu_ns"]) / ds)
                finally:
                    d.stop()
            else:
                data = os.path.join(tmp, "perf.data")
                times[m].append(run_work(work, args.work,
                                         ["perf", "record", "-q", "-F", "999", "-g", "-o", data,
                                          "--"]))
                splits[m].append(perf_split(data))
        print(f"round {r + 1:2}/{args.rounds} ({' '.join(order)}): " +
              ", ".join(f"{m} {times[m][-1]:.3f}s" for m in modes), flush=True)
    base = statistics.median(times["none"])
    print(f"\nworkload: work {args.work} (work_a 75% + work_b 25% of iterations), "
          f"{args.rounds} rounds, modes in random order within each round, profd system-wide")
    print(f"{'mode':<10} {'median s':>9} {'min s':>7} {'max s':>7} {'IQR s':>13} "
          f"{'ratio':>7} {'slowdown':>9} {'paired':>8} {'work_a share':>13}")
    for m in modes:
        xs = times[m]
        med = statistics.median(xs)
        q1, q3 = quartiles(xs)
        # Ratio of each run to the baseline run of the same round: drift of the machine's
        # speed between rounds cancels out.
        paired = statistics.median(x / b for x, b in zip(xs, times["none"]))
        sp = "-"
        if m in splits:
            v = [s for s in splits[m] if s == s]
            sp = f"{statistics.median(v):.3f}" if v else "nan"
        print(f"{m:<10} {med:9.3f} {min(xs):7.3f} {max(xs):7.3f} {q1:6.3f}-{q3:6.3f} "
              f"{med / base:7.4f} {100 * (med / base - 1):8.2f}% {paired:8.4f} {sp:>13}")
    for m in splits:
        v = [s for s in splits[m] if s == s]
        if v:
            print(f"work_a share {m}: median {statistics.median(v):.4f}, "
                  f"min {min(v):.4f}, max {max(v):.4f} (true 0.75)")
    for m, v in per_sample.items():
        if v:
            print(f"daemon CPU per sample {m} (one CPU busy): median {statistics.median(v):.0f} "
                  f"ns, min {min(v):.0f}, max {max(v):.0f} over {len(v)} runs")


def cpu_per_sample(st0, st1):
    ds = st1["samples_received"] - st0["samples_received"]
    return (st1["daemon_cpu_ns"] - st0["daemon_cpu_ns"]) / ds if ds > 0 else float("nan"), ds


def busy(args):
    machine()
    tmp = args.tmp
    work = build_work(tmp)
    d = Profd(tmp, "--frequency", str(args.hz))
    loads = []
    try:
        d.settle()
        loop = f"while :; do {work} 1000 > /dev/null; done"
        loads = start_loads([loop] * os.cpu_count())
        time.sleep(2)
        per = []
        st0 = d.status()
        first, w0 = st0, d.wakeups()
        t0 = time.time()
        while time.time() - t0 < args.seconds:
            time.sleep(args.seconds / 5)
            st1 = d.status()
            c, n = cpu_per_sample(st0, st1)
            per.append(c)
            print(f"  interval: {n} samples, {c:.0f} ns daemon CPU per sample", flush=True)
            st0 = st1
        print(f"\nbusy: {args.hz} Hz system-wide, {os.cpu_count()} copies of work looping, "
              f"{args.seconds:.0f} s in 5 intervals")
        print(f"daemon CPU per sample: median {statistics.median(per):.0f} ns, "
              f"min {min(per):.0f}, max {max(per):.0f}; lost {st1['samples_lost_ringbuf']}, "
              f"stacks {st1['stacks']}")
        n = st1["samples_received"] - first["samples_received"]
        print(f"daemon context switches per sample: {(d.wakeups() - w0) / max(1, n):.3f}")
    finally:
        stop_loads(loads)
        d.stop()


def soak(args):
    machine()
    tmp = args.tmp
    d = Profd(tmp, "--frequency", str(args.hz))
    loads = start_loads(["while :; do ls -R /usr/share > /dev/null; done"] * args.load)
    try:
        t0 = time.time()
        series = []
        st0 = d.status()
        while time.time() - t0 < args.minutes * 60:
            time.sleep(args.every)
            st = d.status()
            series.append((time.time() - t0, st["daemon_rss_bytes"], st["samples_received"]))
            print(f"t={series[-1][0]:6.0f}s rss={st['daemon_rss_bytes'] / MiB:7.2f} MiB "
                  f"samples={st['samples_received']} stacks={st['stacks']} "
                  f"processes={st['processes']} store={st['store_bytes'] / MiB:.2f} MiB",
                  flush=True)
        stop_loads(loads)
        st1 = d.status()
        cpu, _ = cpu_per_sample(st0, st1)
        lat = []
        for _ in range(5):
            t = time.time()
            d.ctl("dump", "flamegraph", "--format", "folded", "-o", os.path.join(tmp, "x"))
            lat.append(time.time() - t)
        rss = [s[1] for s in series]

        def rss_at(minute):
            for t, r, _ in series:
                if t >= minute * 60 - args.every / 2:
                    return f"{r / MiB:.2f} MiB"
            return "-"

        half = rss[len(rss) // 2:]
        print(f"\nsoak: {args.minutes:g} min system-wide at {args.hz} Hz with {args.load} "
              f"busy shell loop(s) (ls -R /usr/share)")
        print(f"samples: {st1['samples_received']}, stacks {st1['stacks']}, "
              f"lost {st1['samples_lost_ringbuf']}, evicted {st1['samples_evicted']}")
        print(f"daemon CPU per sample: {cpu:.0f} ns (everything the daemon did: start-up scan, "
              f"idle wakeups, status polls)")
        print(f"RSS at 2/5/10 min: {rss_at(2)} / {rss_at(5)} / {rss_at(10)}; peak "
              f"{max(rss) / MiB:.2f} MiB; second half min/max "
              f"{min(half) / MiB:.2f}/{max(half) / MiB:.2f} MiB")
        print(f"profctl dump (folded, whole window): median {statistics.median(lat) * 1000:.0f} "
              f"ms of 5 (min {min(lat) * 1000:.0f}, max {max(lat) * 1000:.0f})")
    finally:
        stop_loads(loads)
        d.stop()


def time_dump(d, fmt, path, n):
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        d.ctl("dump", "flamegraph", "--format", fmt, "-o", path)
        lat.append(time.perf_counter() - t)
    return lat


def hour(args):
    """One hour at 99 Hz on 2 CPUs is 712,800 samples in 3,600 one-second buckets. At 999 Hz
    with 100 ms buckets both CPUs busy produce the same number of samples in as many buckets in
    about 6 minutes."""
    machine()
    tmp = args.tmp
    target = 99 * 3600 * os.cpu_count()
    d = Profd(tmp, "--frequency", "999", "--bucket", "100ms")
    loads = []
    try:
        d.settle()
        st0 = d.status()
        w0 = d.wakeups()
        if args.load == "exec":
            cmds = EXEC_LOADS[:os.cpu_count()]
        else:
            work = build_work(tmp)
            cmds = [f"while :; do {work} 1000 > /dev/null; done"] * os.cpu_count()
        loads = start_loads(cmds)
        t0 = time.time()
        prev = st0
        per = []
        while time.time() - t0 < args.minutes * 60:
            time.sleep(args.every)
            st = d.status()
            c, n = cpu_per_sample(prev, st)
            per.append(c)
            prev = st
            print(f"t={time.time() - t0:5.0f}s samples={st['samples_received']} "
                  f"(+{n}, {c:.0f} ns CPU each) stacks={st['stacks']} "
                  f"processes={st['processes']} rss={st['daemon_rss_bytes'] / MiB:.1f} MiB "
                  f"store={st['store_bytes'] / MiB:.1f} MiB", flush=True)
            if st["samples_received"] - st0["samples_received"] >= target:
                break
        stop_loads(loads)
        loads = []
        w1 = d.wakeups()
        time.sleep(1)
        st1 = d.status()
        cpu, nsamples = cpu_per_sample(st0, st1)
        span = (st1["newest_ns"] - st1["oldest_ns"]) / 1e9
        folded = os.path.join(tmp, "hour.folded")
        svg = os.path.join(tmp, "hour.svg")
        lat_f = time_dump(d, "folded", folded, args.dumps)
        lat_s = time_dump(d, "svg", svg, args.dumps)
        # Baseline from the same run: a status round trip, i.e. process start-up and connect.
        lat_0 = []
        for _ in range(args.dumps):
            t = time.perf_counter()
            d.status()
            lat_0.append(time.perf_counter() - t)
        lines = sum(1 for _ in open(folded))
        kind = "exec-heavy shell loops" if args.load == "exec" else "loops of the work program"
        print(f"\nhour (emulated): 999 Hz, 100 ms buckets, {len(cmds)} {kind}, "
              f"{time.time() - t0:.0f} s")
        print(f"samples received: {nsamples} (target {target}), lost "
              f"{st1['samples_lost_ringbuf']}, evicted {st1['samples_evicted']}; data span "
              f"{span:.1f} s = {span * 10:.0f} buckets of 100 ms")
        print(f"stacks {st1['stacks']}, frames {st1['frames']}, processes {st1['processes']}, "
              f"store {st1['store_bytes'] / MiB:.1f} MiB, daemon RSS "
              f"{st1['daemon_rss_bytes'] / MiB:.1f} MiB")
        print(f"daemon CPU per sample under this load: {cpu:.0f} ns overall; per interval "
              f"median {statistics.median(per):.0f}, min {min(per):.0f}, max {max(per):.0f}; "
              f"{(w1 - w0) / max(1, nsamples):.3f} context switches per sample")
        print(f"output: folded {os.path.getsize(folded) / MiB:.1f} MiB ({lines} lines), "
              f"svg {os.path.getsize(svg) / MiB:.1f} MiB")
        for name, lat in (("status (baseline)", lat_0), ("dump --format folded", lat_f),
                          ("dump --format svg", lat_s)):
            print(f"profctl {name:<21} median {statistics.median(lat) * 1000:7.1f} ms of "
                  f"{len(lat)} (min {min(lat) * 1000:.1f}, max {max(lat) * 1000:.1f})")
        if args.hold:
            # Keep the loaded daemon for profiling its dumps by hand.
            print(f"holding the daemon (pid {d.proc.pid}, socket {d.sock}) for {args.hold:.0f} s",
                  flush=True)
            time.sleep(args.hold)
    finally:
        stop_loads(loads)
        d.stop()


def proc_status(pid, keys):
    """Fields of /proc/PID/status in bytes (those given in kB) or as numbers."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in keys:
                v = v.split()
                out[k] = int(v[0]) * (1024 if len(v) > 1 and v[1] == "kB" else 1)
    return out


def processes_created():
    """Processes and threads the machine created since boot (every engineer's, not only ours)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("processes "):
                return int(line.split()[1])
    return 0


def build_churn(tmp):
    src = os.path.join(ROOT, "bench")
    out = {"churn": os.path.join(tmp, "churn"), "churn_b": os.path.join(tmp, "churn_b"),
           "lib": os.path.join(tmp, "libchurn.so")}
    fp = ["-g", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls"]
    subprocess.run(["cc", "-O1", *fp, "-fno-inline", os.path.join(src, "churn.c"), "-o",
                    out["churn"], "-pthread", "-ldl"], check=True)
    subprocess.run(["cc", "-O2", *fp, "-DCHURN_VARIANT=2", os.path.join(src, "churn.c"), "-o",
                    out["churn_b"], "-pthread", "-ldl"], check=True)
    subprocess.run(["cc", "-O1", *fp, "-fPIC", "-shared", os.path.join(src, "churn_lib.c"), "-o",
                    out["lib"]], check=True)
    for p in out.values():
        os.chmod(p, 0o755)
    return out


# Each churn part and the count (a key of its counts file) whose rate the table at the end shows.
CHURN_PARTS = [("execs", "processes"), ("forks", "forks"), ("threads", "threads"),
               ("replace", "replaced"), ("run", "runs"), ("elf", "copies"), ("jit", "appends"),
               ("jitlink", "jit_calls")]


def cpu_seconds(pid):
    """CPU time of a process and of the children it has reaped, from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return float("nan")
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def read_counts(cdir):
    out = {}
    for name, _ in CHURN_PARTS:
        try:
            with open(os.path.join(cdir, name)) as f:
                out[name] = json.load(f)
        except (OSError, ValueError):
            out[name] = {}
    return out


def folded_by_root(text):
    """Samples per root frame (the process name in a system-wide dump)."""
    by = {}
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        if stack:
            root = stack.split(";", 1)[0]
            by[root] = by.get(root, 0) + int(n)
    return by


def folded_count(text, pred):
    """Samples whose stack has a frame for which pred holds, and the names of those frames."""
    total = hit = 0
    names = {}
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        total += int(n)
        frames = [f for f in stack.split(";") if pred(f)]
        if frames:
            hit += int(n)
            for f in set(frames):
                names[f] = names.get(f, 0) + int(n)
    return total, hit, names


def slope_mib_min(points):
    """Least-squares slope of (seconds, bytes) points in MiB a minute."""
    n = len(points)
    if n < 2:
        return float("nan")
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    den = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (v - mv) for t, v in points) / den * 60 / MiB if den else float("nan")


def unbounded(rss, st):
    """RSS less what grows within a bound of its own: the store (its cap), the symbols of the
    ELF cache and the perf maps (their budgets) and the trace ring (its size)."""
    return rss - sum(st.get(k, 0) for k in ("store_bytes", "symbol_bytes", "perf_map_bytes",
                                             "trace_ring_bytes"))


def print_side_by_side(series, base_series):
    """RSS of this build and of the baseline (--base), sampled at the same moments, and the
    part of each outside the bounded caches."""
    new = [(t, rss, st) for t, rss, _, st in series]
    print(f"{'MiB':<30} {'baseline':>10} {'this build':>10}   (outside the bounded caches)")
    rows = [(f"at minute {m}", [i for i, p in enumerate(new) if p[0] >= m * 60 - 1])
            for m in (1, 2, 5, 10, 15, 20, 30)]
    for name, at in rows + [("at the end", [len(new) - 1])]:
        if not at:
            continue
        b, n = base_series[at[0]], new[at[0]]
        print(f"RSS {name:<26} {b[1] / MiB:10.1f} {n[1] / MiB:10.1f}   "
              f"{unbounded(b[1], b[2]) / MiB:10.1f} {unbounded(n[1], n[2]) / MiB:10.1f}")
    # From minute 2: the start-up scan and the first heap growth are over by then.
    late_b = [p for p in base_series if p[0] >= 120]
    late_n = [p for p in new if p[0] >= 120]
    # Baselines that show the owners too (a build after they came): the processes each holds.
    if base_series[-1][2].get("memory"):
        def held(st):
            return {m["name"]: m.get("count", 0) for m in st.get("memory", [])}
        per = ["ingest", "python", "unwinder", "symbolizer"]
        print("processes held (baseline / this build): " + ", ".join(per))
        for name, at in rows + [("at the end", [len(new) - 1])]:
            if at:
                hb, hn = held(base_series[at[0]][2]), held(new[at[0]][2])
                print(f"  {name:<26} " + ", ".join(f"{hb.get(k, 0)} / {hn.get(k, 0)}"
                                                    for k in per))
    print(f"{'growth from minute 2, a minute':<30} "
          f"{slope_mib_min([(t, r) for t, r, _ in late_b]):10.3f} "
          f"{slope_mib_min([(t, r) for t, r, _ in late_n]):10.3f}   "
          f"{slope_mib_min([(t, unbounded(r, s)) for t, r, s in late_b]):10.3f} "
          f"{slope_mib_min([(t, unbounded(r, s)) for t, r, s in late_n]):10.3f}"
          "  (least squares)")


def churn(args):
    """A system-wide daemon on a hostile, churning machine: exec storms, forks, thread storms,
    binaries replaced under their path, corrupted ELFs mapped and run, huge and hostile perf
    maps of a non-root user. Prints the daemon's memory and counters every --every s."""
    machine()
    tmp = args.tmp
    os.chmod(tmp, 0o711)  # the unprivileged user runs the helper and writes its counts
    bins = build_churn(tmp)
    cdir = os.path.join(tmp, "counts")
    os.mkdir(cdir)
    os.chmod(cdir, 0o1777)
    elf_dir = os.path.join(tmp, "elf")
    os.mkdir(elf_dir)
    rdir = os.path.join(tmp, "replaced")
    os.mkdir(rdir)
    victim = os.path.join(rdir, "victim")
    shutil.copy(bins["churn"], victim)
    os.chmod(victim, 0o755)
    # Root-only, in perf-map syntax, covering every address: whatever the daemon names from it
    # it read through the symlink that it must not follow.
    secret = os.path.join(tmp, "root-only.map")
    with open(os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        f.write("0 7fffffffffff ROOT_ONLY_SECRET_SYMBOL\n")
    log = os.path.join(tmp, "profd.log")
    load_py = [sys.executable, os.path.join(ROOT, "bench", "churn_load.py")]
    user = f"profd-churn-{os.getpid()}"
    made_user = False
    loads, perf_maps = [], []
    d = base = None
    base_series = []  # (t, VmRSS, status) of the baseline daemon (--base)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    old_term = signal.signal(signal.SIGTERM, on_term)
    old_hup = signal.signal(signal.SIGHUP, on_term)
    try:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", user], check=True)
        made_user = True
        pw = pwd.getpwnam(user)
        d = Profd(tmp, "--frequency", str(args.hz), log=log)
        d.settle()
        if args.base:
            # The same loads seen by a baseline build at the same time: side by side.
            base = Profd(tmp, "--frequency", str(args.hz), build=args.base)
            base.settle()

        def spawn(argv, as_user=False):
            kw = dict(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[], cwd="/") \
                if as_user else {}
            p = subprocess.Popen(argv, start_new_session=True, stdin=subprocess.DEVNULL, **kw)
            loads.append(p)
            return p

        def c(name):
            return os.path.join(cdir, name)

        spawn([*load_py, "execs", str(args.exec_rate), c("execs")])
        spawn([bins["churn"], "forks", str(args.fork_rate), c("forks")])
        spawn([bins["churn"], "threads", str(args.thread_rate), c("threads")])
        spawn([*load_py, "replace", victim, c("replace"), bins["churn"], bins["churn_b"]])
        spawn([*load_py, "run", victim, c("run")])
        elf = spawn([bins["churn"], "elf", bins["lib"], elf_dir, c("elf")])
        jit = spawn([bins["churn"], "jit", str(args.perf_map_mib), c("jit")], as_user=True)
        link = spawn([bins["churn"], "jitlink", secret, c("jitlink")], as_user=True)
        perf_maps += [f"/tmp/perf-{jit.pid}.map", f"/tmp/perf-{link.pid}.map"]
        print(f"churn: pids execs {loads[0].pid}, forks {loads[1].pid}, threads "
              f"{loads[2].pid}, replace {loads[3].pid}, run {loads[4].pid}, elf {elf.pid}, "
              f"jit {jit.pid} and jitlink {link.pid} (user {user}), daemon {d.proc.pid}",
              flush=True)

        st0 = d.status()
        p0 = processes_created()
        t0 = time.time()
        series = []  # (t, VmRSS, VmHWM, status)
        exited = set()
        next_counts = 60
        while time.time() - t0 < args.minutes * 60:
            time.sleep(args.every)
            if d.proc.poll() is not None:
                raise SystemExit(f"bench: profd exited with {d.proc.returncode} after "
                                 f"{time.time() - t0:.0f} s (log: see below)")
            for p in loads:
                if p.poll() is not None and p.pid not in exited:
                    exited.add(p.pid)
                    print(f"churn: load {' '.join(p.args[:3])} exited with {p.returncode}",
                          flush=True)
            st = d.status()
            vm = proc_status(d.proc.pid, ("VmRSS", "VmHWM"))
            t = time.time() - t0
            if base:
                if base.proc.poll() is not None:
                    raise SystemExit(f"bench: the baseline profd exited with "
                                     f"{base.proc.returncode}")
                base_series.append((t, proc_status(base.proc.pid, ("VmRSS",))["VmRSS"],
                                    base.status()))
            prev = series[-1][3] if series else st0
            pct = (st["daemon_cpu_ns"] - prev["daemon_cpu_ns"]) / 1e7 / \
                (t - (series[-1][0] if series else 0))
            series.append((t, vm["VmRSS"], vm["VmHWM"], st))
            print(f"t={t:5.0f}s rss={vm['VmRSS'] / MiB:6.1f} MiB hwm={vm['VmHWM'] / MiB:6.1f} "
                  f"MiB cpu={(st['daemon_cpu_ns'] - st0['daemon_cpu_ns']) / 1e9:6.1f}s "
                  f"({pct:4.1f}%) samples={st['samples_received']} "
                  f"lost={st['samples_lost_ringbuf']} "
                  f"dropped={st.get('samples_dropped', 0)} stacks={st['stacks']} "
                  f"procs={st['processes']} perf_map={st.get('perf_map_reads', 0)} reads/"
                  f"{st.get('perf_map_bytes', 0) / 1024:.0f} KiB "
                  f"new_procs={processes_created() - p0}" +
                  (f" base_rss={base_series[-1][1] / MiB:.1f} MiB" if base else ""),
                  flush=True)
            if st.get("memory"):
                print("  memory: " + ", ".join(
                    f"{m['name']} {m.get('bytes', 0) / MiB:.2f}" +
                    (f"/{m['count']}" if "count" in m else "") for m in st["memory"]),
                      flush=True)
            if t >= next_counts:
                next_counts += 60
                print("  done: " + "; ".join(
                    f"{k} " + " ".join(f"{n}={v}" for n, v in cs.items())
                    for k, cs in read_counts(cdir).items() if k != "elf") , flush=True)

        counts = read_counts(cdir)
        elapsed = time.time() - t0
        created = processes_created() - p0
        load_cpu = [cpu_seconds(p.pid) for p in loads]
        stop_loads(loads)
        loads = []
        time.sleep(1)
        st1 = d.status()
        vm1 = proc_status(d.proc.pid, ("VmRSS", "VmHWM"))
        lat_s = []
        for _ in range(5):
            t = time.perf_counter()
            d.status()
            lat_s.append(time.perf_counter() - t)
        folded = os.path.join(tmp, "churn.folded")
        lat_d = time_dump(d, "folded", folded, 5)
        whole = open(folded, errors="replace").read()
        jit_f = d.ctl("dump", "flamegraph", "--format", "folded", "--pid", str(jit.pid))
        link_f = d.ctl("dump", "flamegraph", "--format", "folded", "--pid", str(link.pid))
        elf_f = d.ctl("dump", "flamegraph", "--format", "folded", "--pid", str(elf.pid))
        elf_j = json.loads(d.ctl("dump", "flamegraph", "--format", "json", "--pid",
                                 str(elf.pid)))

        print(f"\nchurn: {elapsed / 60:.1f} min system-wide at {args.hz} Hz; daemon RSS "
              f"(VmRSS) and peak (VmHWM) from /proc/{d.proc.pid}/status")
        print(f"{'part':<8} {'CPU s':>6} {'rate':>22}  counts")
        for (name, key), cpu_s in zip(CHURN_PARTS, load_cpu):
            cs = counts.get(name, {})
            rate = f"{cs.get(key, 0) / elapsed:.1f} {key}/s"
            print(f"{name:<8} {cpu_s:6.1f} {rate:>22}  " +
                  " ".join(f"{k}={v}" for k, v in cs.items()))
        print(f"processes and threads created on the machine: {created} "
              f"({created / elapsed:.0f}/s, everyone's)")
        rss = [s[1] for s in series]
        half = rss[len(rss) // 2:]
        at1 = next((s[1] for s in series if s[0] >= 60 - args.every / 2), None)
        print(f"RSS second half: min {min(half) / MiB:.1f}, median "
              f"{statistics.median(half) / MiB:.1f}, max {max(half) / MiB:.1f} MiB; at minute 1 "
              + (f"{at1 / MiB:.1f}" if at1 else "-") + f" MiB, at the end "
              f"{rss[-1] / MiB:.1f} MiB (after the loads stopped {vm1['VmRSS'] / MiB:.1f}); "
              f"peak VmHWM {vm1['VmHWM'] / MiB:.1f} MiB")
        if base:
            print_side_by_side(series, base_series)
        cpu, nsamples = cpu_per_sample(st0, st1)
        print(f"daemon CPU: {(st1['daemon_cpu_ns'] - st0['daemon_cpu_ns']) / 1e9:.1f} s, "
              f"{cpu:.0f} ns per sample over {nsamples} samples; lost "
              f"{st1['samples_lost_ringbuf']}, dropped {st1.get('samples_dropped', 0)}, "
              f"evicted {st1['samples_evicted']}, task events lost {st1['task_events_lost']}, "
              f"malformed {st1['records_malformed']}, stack errors kernel "
              f"{st1['kstack_errors']} user {st1['ustack_errors']}")
        print(f"store: {st1['stacks']} stacks, {st1['frames']} frames, {st1['processes']} "
              f"processes, {st1['store_bytes'] / MiB:.1f} MiB; perf maps: "
              f"{st1.get('perf_map_reads', 0)} reads in "
              f"{st1.get('perf_map_read_ns', 0) / 1e9:.2f} s, "
              f"{st1.get('perf_map_bytes', 0) / 1024:.1f} KiB held of "
              f"{st1.get('perf_map_budget_bytes', 0) / MiB:.0f}, "
              f"{st1.get('perf_map_entries_dropped', 0)} entries left out, "
              f"{st1.get('perf_maps_sparse', 0)} sparse")
        for name, lat in (("status", lat_s), ("dump --format folded", lat_d)):
            print(f"profctl {name:<21} median {statistics.median(lat) * 1000:7.1f} ms of "
                  f"{len(lat)} (min {min(lat) * 1000:.1f}, max {max(lat) * 1000:.1f}), "
                  f"loads stopped")
        print(f"folded dump: {len(whole) / MiB:.1f} MiB, {whole.count(chr(10))} lines")
        by = folded_by_root(whole)
        print("samples by process name (top 12): " + ", ".join(
            f"{k} {v}" for k, v in sorted(by.items(), key=lambda kv: -kv[1])[:12]))
        total, named, names = folded_count(jit_f, lambda f: f.startswith("churn_jit_"))
        stale = sum(v for k, v in names.items() if "stale" in k)
        print(f"jit (perf map {counts['jit'].get('map_bytes', 0) / MiB:.0f} MiB, "
              f"{counts['jit'].get('appends', 0)} appends): {total} samples, {named} in named "
              f"JIT code ({len(names)} names, {stale} under a stale name), e.g. "
              + ", ".join(sorted(names, key=lambda k: -names[k])[:4]))
        total, leaked, _ = folded_count(link_f + whole, lambda f: "ROOT_ONLY_SECRET" in f)
        print(f"jitlink (perf map a symlink to a root-only file): "
              f"{sum(int(l.rpartition(' ')[2]) for l in link_f.splitlines() if l)} samples; "
              f"frames named from the root-only file: {leaked}")
        total, hit, names = folded_count(
            elf_f, lambda f: "churn_lib" in f or "libchurn" in f or "libm-churn" in f)
        print(f"elf: {total} samples, {hit} with a frame in a corrupted copy; those frames: "
              + ", ".join(f"{k} {v}" for k, v in sorted(names.items(),
                                                         key=lambda kv: -kv[1])[:6]))
        # Each copy is mapped for one spin of about 80 ms (8 samples at 99 Hz): many more
        # samples on one copy are samples of later copies charged to it. A copy is named when
        # its kind leaves the build-id (then the pristine library's symbols apply) and symbols.
        kinds = list(counts["elf"])[4:]
        per_copy, named_kind, all_kind = {}, {}, {}
        for smp in elf_j["samples"]:
            for fi in elf_j["stacks"][smp["stack"]]:
                fr = elf_j["frames"][fi]
                m = re.search(r"libchurn-(\d+)\.so", fr.get("module") or "")
                if m:
                    n, k = int(m.group(1)), int(m.group(1)) % max(1, len(kinds))
                    per_copy[n] = per_copy.get(n, 0) + smp["values"][0]
                    all_kind[k] = all_kind.get(k, 0) + smp["values"][0]
                    if fr["name"] != "[unknown]":
                        named_kind[k] = named_kind.get(k, 0) + smp["values"][0]
                    break
        if per_copy and kinds:
            top = max(per_copy, key=per_copy.get)
            print(f"elf: samples in {len(per_copy)} distinct copies of "
                  f"{counts['elf'].get('copies', 0)} made; per copy median "
                  f"{statistics.median(per_copy.values()):.0f}, most {per_copy[top]} "
                  f"(libchurn-{top}.so, {kinds[top % len(kinds)]}); named/all by kind: " +
                  ", ".join(f"{kinds[k]} {named_kind.get(k, 0)}/{all_kind[k]}"
                            for k in sorted(all_kind)))
        vstacks = [line.rpartition(" ") for line in whole.splitlines()
                   if line.startswith("victim;")]
        ok = sum(int(n) for st, _, n in vstacks
                 if "mode_victim;victim_spin_a" in st or "main;victim_spin_b" in st)
        mixed = sum(int(n) for st, _, n in vstacks if "victim_spin" in st) - ok
        print(f"replaced binary: {by.get('victim', 0)} samples under 'victim', {ok} in the "
              f"spin of either variant with its own call chain, {mixed} with a chain of the "
              f"other variant (symbols read from the wrong file), "
              f"{sum(int(n) for st, _, n in vstacks if st == 'victim;[unknown]')} only "
              f"'[unknown]'")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_loads(loads)
        for p in perf_maps:
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
        if made_user:
            for _ in range(10):
                if subprocess.run(["userdel", user]).returncode in (0, 6):
                    break
                time.sleep(0.5)
            else:
                print(f"bench: could not remove user {user}", file=sys.stderr)
        if base:
            base.stop()
        if d:
            d.stop()
            lines = open(log, errors="replace").read().splitlines()
            print(f"daemon: exit status {d.proc.returncode}, {len(lines)} log lines"
                  + (" (its errors and warnings first, then the last lines):" if lines else ""))
            levels = {}
            for line in lines:
                m = re.search(r"\b(error|warning|warn|info|debug)\b", line, re.I)
                levels[m.group(1).lower() if m else "?"] = \
                    levels.get(m.group(1).lower() if m else "?", 0) + 1
            print("  by level: " + ", ".join(f"{k} {v}" for k, v in levels.items()))
            bad = [line for line in lines if re.search(r"\b(error|warning|warn)\b", line, re.I)]
            for line in bad[:args.log_tail] + lines[-args.log_tail:]:
                print("  " + line[:300])
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGHUP, old_hup)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("overhead")
    o.add_argument("--rounds", type=int, default=13)
    o.add_argument("--work", type=int, default=450)
    b = sub.add_parser("busy")
    b.add_argument("--seconds", type=float, default=30)
    b.add_argument("--hz", type=int, default=999)
    s = sub.add_parser("soak")
    s.add_argument("--minutes", type=float, default=10)
    s.add_argument("--hz", type=int, default=99)
    s.add_argument("--load", type=int, default=1)
    s.add_argument("--every", type=float, default=10)
    h = sub.add_parser("hour")
    h.add_argument("--minutes", type=float, default=8, help="stop loading after this long")
    h.add_argument("--every", type=float, default=10)
    h.add_argument("--dumps", type=int, default=5)
    h.add_argument("--hold", type=float, default=0,
                   help="keep the daemon running this many seconds after the dumps")
    h.add_argument("--load", choices=["exec", "steady"], default="exec",
                   help="exec: many short-lived programs (worst case for distinct stacks); "
                   "steady: the CPU-bound work program on every CPU (few stacks)")
    c = sub.add_parser("churn")
    c.add_argument("--minutes", type=float, default=30)
    c.add_argument("--every", type=float, default=10)
    c.add_argument("--hz", type=int, default=99)
    c.add_argument("--exec-rate", type=float, default=75,
                   help="new processes a second from the exec loop")
    c.add_argument("--fork-rate", type=float, default=100, help="forks a second (no exec)")
    c.add_argument("--thread-rate", type=float, default=3000, help="threads a second")
    c.add_argument("--perf-map-mib", type=float, default=150,
                   help="size of the hostile perf map at start")
    c.add_argument("--log-tail", type=int, default=15, help="daemon log lines shown at the end")
    c.add_argument("--base", help="the build directory of a baseline: its profd runs beside "
                   "this build's under the same loads, and the RSS of both is shown")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench: run as root (profd needs BPF)")
    # Removed at the end: an hour's folded dump alone is hundreds of MiB.
    with tempfile.TemporaryDirectory(prefix="profd-bench-") as a.tmp:
        {"overhead": overhead, "busy": busy, "soak": soak, "hour": hour,
         "churn": churn}[a.cmd](a)


if __name__ == "__main__":
    main()
