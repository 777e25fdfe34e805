#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""What a node's always-on profd costs with fleet export on. Run as root after building.

  bench/export.py [--minutes 30] [--quick] [--ab-rounds 2] [--ab-seconds 60] [--out DIR]
  bench/export.py --report DIR      the summary again, from the files of a run (even a cut one)

profd runs system-wide (no --pid) at the fleet default rate (49 Hz, packaging/profd.conf) and
exports every 15 s (the default interval) to the stand-in receiver (tests/receiver/receiver.py,
started with the python scripts/test-venv prints) on both endpoints, Pyroscope and OTLP, with the
static labels a fleet sets (cluster=..., region=...) and the spool in a temporary directory.
A node-like workload runs throughout, at about one of the machine's CPUs' worth:

  * the C burner (tests/fixtures/burn) for 2 s, then 3 s idle, over and over (a new process
    every 5 s, about 40% of a CPU);
  * bench/py_work.py (2 Python threads) for about 3 s, then 3 s idle (about 50% of a CPU);
  * bench/churn_load.py execs 5: about 5 short-lived processes a second from two dozen
    different binaries and shell pipelines, so that new services (series) keep appearing.

Two phases, in this order:

 1. side by side: --ab-rounds rounds, each of which runs, in random order, a fresh profd with
    export off, with Pyroscope only, and with both endpoints, for --ab-seconds each after a 10 s
    warm-up (the start-up scan of running processes is left out); profd's CPU over each run
    from /proc/PID/stat. Reported as the median per mode and the ratio of each export mode's
    CPU to the export-off run of the same round (median, min-max).
 2. the long run: one profd with both endpoints for --minutes. Every 10 s: profd's utime+stime
    and VmRSS (/proc/PID/stat, /proc/PID/status), the load average and the receiver's counters
    (accepted requests and body bytes per endpoint, series). At the end the receiver's arrival
    times (GET /_stats?arrivals=1): for every accepted profile, arrival minus its window's end
    (time_nanos + duration_nanos) and minus its start (the oldest a sample in it can be).

Everything is written to --out (default: a new directory under /tmp) as it is measured:
ab.jsonl, run.jsonl (one line per 10 s), stats.json and status.json at the end; --report reads
them. PROFD_BUILD (default build/) picks the build; --bin DIR takes profd, profctl and burn from
DIR instead (binaries copied aside so that rebuilds cannot change them mid-run).
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
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("PROFD_BUILD", os.path.join(ROOT, "build"))
HZ = 49
LABELS = "cluster=train-a,region=eu-west"
TICK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count()


def log(msg):
    print(msg, flush=True)


def cpu_s(pid):
    """utime + stime of every thread of pid, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run_ns(pid):
    """CPU time of pid's live threads in ns from /proc/PID/task/*/schedstat (the scheduler's
    clock: finer than utime+stime's 10 ms ticks, which a short run at 49 Hz needs)."""
    n = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                n += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return n


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def loadavg():
    return [float(x) for x in open("/proc/loadavg").read().split()[:3]]


def pct(xs, p):
    """The p-th percentile (nearest rank) of xs."""
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = max(0, min(len(xs) - 1, int(round(p / 100 * len(xs) + 0.5)) - 1))
    return xs[k]


class Receiver:
    """The stand-in backend, keeping its accounting in a --state file: should it die (another
    job on this shared machine once killed it mid-run), ensure() starts it again on the same
    port and it goes on counting; profd's spool holds what it could not send meanwhile."""

    def __init__(self, out):
        self.py = subprocess.run([os.path.join(ROOT, "scripts", "test-venv")],
                                 capture_output=True, text=True, check=True).stdout.strip()
        self.err = open(os.path.join(out, "receiver.log"), "a")
        self.state = os.path.join(out, "receiver-state.jsonl")
        self.restarts = 0
        self.start("127.0.0.1:0")

    def start(self, addr):
        self.proc = subprocess.Popen([self.py, os.path.join(ROOT, "tests", "receiver",
                                                            "receiver.py"),
                                      "--listen", addr, "--state", self.state, "-q"],
                                     stdout=subprocess.PIPE, stderr=self.err, text=True,
                                     start_new_session=True)
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "listening":
            raise SystemExit(f"bench: the receiver did not start (see {self.err.name})")
        self.addr = line[1]
        self.url = f"http://{line[1]}"

    def ensure(self):
        if self.proc.poll() is None:
            return
        self.restarts += 1
        log(f"  the receiver exited ({self.proc.returncode}); started again on {self.addr}")
        for _ in range(50):
            try:
                self.start(self.addr)
                return
            except SystemExit:
                time.sleep(0.2)
        raise SystemExit("bench: the receiver cannot be started again")

    def get(self, path):
        self.ensure()
        with urllib.request.urlopen(self.url + path, timeout=60) as r:
            return json.load(r)

    def reset(self):
        self.ensure()
        req = urllib.request.Request(self.url + "/_reset", data=b"", method="POST")
        urllib.request.urlopen(req, timeout=60).read()

    def counters(self):
        st = self.get("/_stats")
        return {s: {"requests": st[s]["requests"]["accepted"], "bytes": st[s]["bytes"],
                    "rejected": sum(st[s]["requests"]["rejected"].values()),
                    "series": len(st[s]["series"])} for s in ("pyroscope", "otlp")}

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Profd:
    def __init__(self, bindir, tmp, mode, recv_url):
        self.sock = os.path.join(tmp, f"profd-{random.randrange(1 << 30)}.sock")
        self.spool = tempfile.mkdtemp(prefix="spool-", dir=tmp)
        self.bindir = bindir
        args = [os.path.join(bindir, "profd"), "--socket", self.sock, "--frequency", str(HZ),
                "--quiet"]
        if mode in ("pyroscope", "both"):
            args += ["--pyroscope", recv_url]
        if mode == "both":
            args += ["--otlp", recv_url]
        if mode != "off":
            args += ["--export-interval", "15s", "--export-spool", self.spool,
                     "--export-labels", LABELS]
        self.args = args
        self.proc = subprocess.Popen(args)
        deadline = time.time() + 30
        while not os.path.exists(self.sock):
            if time.time() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"bench: profd did not start: {' '.join(args)}")
            time.sleep(0.05)

    def status(self):
        r = subprocess.run([os.path.join(self.bindir, "profctl"), "--socket", self.sock,
                            "status", "--json"], capture_output=True, text=True)
        try:
            return json.loads(r.stdout)
        except ValueError:
            return {"error": r.stderr.strip()}

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.spool, ignore_errors=True)


def start_workload(bindir, tmp):
    burn = os.path.join(bindir, "burn")
    if not os.access(burn, os.X_OK):
        burn = os.path.join(BUILD, "tests", "fixtures", "burn")
    if not os.access(burn, os.X_OK):
        raise SystemExit(f"bench: no burn fixture at {burn} (build tests/fixtures/burn)")
    py = shutil.which("python3") or sys.executable
    cmds = [
        f"while :; do '{burn}' 2 >/dev/null; sleep 3; done",
        f"while :; do '{py}' '{ROOT}/bench/py_work.py' --threads 2 --rounds 200 >/dev/null; "
        "sleep 3; done",
        f"exec '{py}' '{ROOT}/bench/churn_load.py' execs 5 '{tmp}/churn.json'",
    ]
    return [subprocess.Popen(["sh", "-c", c], start_new_session=True) for c in cmds]


def stop_workload(procs):
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def append(path, obj):
    with open(path, "a") as f:
        f.write(json.dumps(obj) + "\n")


def side_by_side(a, recv, out):
    modes = ["off", "pyroscope", "both"]
    for rnd in range(a.ab_rounds):
        order = random.sample(modes, len(modes))
        for mode in order:
            d = Profd(a.bin, a.tmp, mode, recv.url)
            time.sleep(a.warmup)
            if not d.alive():
                raise SystemExit(f"bench: profd ({mode}) exited with {d.proc.returncode}")
            c0, n0, t0, l0 = cpu_s(d.proc.pid), run_ns(d.proc.pid), time.monotonic(), loadavg()
            time.sleep(a.ab_seconds)
            c1, n1, t1 = cpu_s(d.proc.pid), run_ns(d.proc.pid), time.monotonic()
            rec = {"round": rnd, "mode": mode, "cpu_s": c1 - c0, "wall_s": t1 - t0,
                   "cpu_pct_core": 100 * (c1 - c0) / (t1 - t0),
                   "sched_pct_core": 100 * (n1 - n0) / 1e9 / (t1 - t0),
                   "rss": rss_bytes(d.proc.pid),
                   "load": [l0, loadavg()]}
            d.stop()
            append(os.path.join(out, "ab.jsonl"), rec)
            log(f"  round {rnd + 1} {mode:9s} {rec['cpu_pct_core']:.3f}% of a core "
                f"(schedstat {rec['sched_pct_core']:.3f}%) "
                f"(load {rec['load'][1][0]:.2f})")


def long_run(a, recv, out):
    recv.reset()
    d = Profd(a.bin, a.tmp, "both", recv.url)
    with open(os.path.join(out, "command.txt"), "w") as f:
        f.write(" ".join(d.args) + "\n")
    t_start = time.monotonic()
    wall_start = time.time()
    end = t_start + a.minutes * 60
    path = os.path.join(out, "run.jsonl")
    nxt = t_start
    while True:
        if not d.alive():
            raise SystemExit(f"bench: profd exited with {d.proc.returncode} mid-run")
        now = time.monotonic()
        rec = {"t": now - t_start, "wall": time.time(), "cpu_s": cpu_s(d.proc.pid),
               "run_ns": run_ns(d.proc.pid),
               "rss": rss_bytes(d.proc.pid), "load": loadavg(), "recv": recv.counters(),
               "receiver_restarts": recv.restarts}
        append(path, rec)
        if int(rec["t"]) % 60 < 10:
            log(f"  {rec['t'] / 60:5.1f} min: cpu {rec['cpu_s']:.2f} s, rss "
                f"{rec['rss'] / 2**20:.1f} MiB, load {rec['load'][0]:.2f}, "
                f"pyroscope {rec['recv']['pyroscope']['bytes']} B, "
                f"otlp {rec['recv']['otlp']['bytes']} B")
        if now >= end:
            break
        nxt += 10
        time.sleep(max(0.0, min(nxt, end) - time.monotonic()))
    with open(os.path.join(out, "status.json"), "w") as f:
        json.dump(d.status(), f)
    d.stop()
    st = recv.get("/_stats?arrivals=1")
    with open(os.path.join(out, "stats.json"), "w") as f:
        json.dump({"wall_start": wall_start, "stats": st}, f)


def summary(out):
    lines = []
    p = lines.append
    meta = json.load(open(os.path.join(out, "meta.json")))
    p(f"machine: nproc {meta['nproc']}, kernel {meta['kernel']}, commit {meta['commit']}, "
      f"{HZ} Hz system-wide, labels {LABELS}")
    ab = [json.loads(x) for x in open(os.path.join(out, "ab.jsonl"))] \
        if os.path.exists(os.path.join(out, "ab.jsonl")) else []
    if ab:
        p(f"side by side: {max(r['round'] for r in ab) + 1} rounds, "
          f"{statistics.median(r['wall_s'] for r in ab):.0f} s each, load average "
          f"{min(r['load'][1][0] for r in ab):.2f}-{max(r['load'][1][0] for r in ab):.2f}")
        for key, what in (("cpu_pct_core", "utime+stime"), ("sched_pct_core", "schedstat")):
            by = {}
            for r in ab:
                if key in r:
                    by.setdefault(r["mode"], {})[r["round"]] = r[key]
            for m in ("off", "pyroscope", "both"):
                if m not in by:
                    continue
                v = list(by[m].values())
                p(f"  {what:11s} {m:9s} profd CPU {statistics.median(v):.3f}% of one core "
                  f"median ({min(v):.3f}-{max(v):.3f}), {statistics.median(v) / NCPU:.3f}% of "
                  "the machine")
            for m in ("pyroscope", "both"):
                ratios = [by[m][k] / by["off"][k] for k in by.get(m, {})
                          if k in by.get("off", {}) and by["off"][k] > 0]
                if ratios:
                    p(f"  {what:11s} {m} / off, per round: median "
                      f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}, "
                      f"{len(ratios)} rounds)")
    rp = os.path.join(out, "run.jsonl")
    if not os.path.exists(rp):
        return "\n".join(lines)
    run = [json.loads(x) for x in open(rp)]
    if len(run) < 2:
        return "\n".join(lines)
    el = run[-1]["t"] - run[0]["t"]
    p(f"long run: {el / 60:.1f} min, {len(run)} readings every 10 s; load average 1 min "
      f"median {statistics.median(r['load'][0] for r in run):.2f} "
      f"(min {min(r['load'][0] for r in run):.2f}, max {max(r['load'][0] for r in run):.2f})")
    total = run[-1]["cpu_s"] - run[0]["cpu_s"]
    wins = []
    for i in range(0, len(run) - 6, 6):
        a, b = run[i], run[i + 6]
        wins.append(100 * (b["cpu_s"] - a["cpu_s"]) / (b["t"] - a["t"]))
    p(f"  profd CPU total {total:.2f} s over {el:.0f} s = {100 * total / el:.3f}% of one core, "
      f"{100 * total / el / NCPU:.3f}% of the machine")
    if wins:
        p(f"  1-minute windows ({len(wins)}): median {statistics.median(wins):.3f}%, "
          f"p95 {pct(wins, 95):.3f}%, max {max(wins):.3f}% of one core "
          f"(machine: median {statistics.median(wins) / NCPU:.3f}%, p95 "
          f"{pct(wins, 95) / NCPU:.3f}%)")
    rss = [r["rss"] / 2**20 for r in run]
    p(f"  RSS start {rss[0]:.1f} MiB, median {statistics.median(rss):.1f}, max {max(rss):.1f}, "
      f"end {rss[-1]:.1f}")
    # Bytes: from the first reading with anything received to the last, so the rate is not
    # diluted by the first interval.
    for s in ("pyroscope", "otlp"):
        a, b = run[0]["recv"][s], run[-1]["recv"][s]
        req = b["requests"] - a["requests"]
        byt = b["bytes"] - a["bytes"]
        p(f"  {s:9s} {req} requests, {byt} bytes: {byt * 3600 / el / 2**20:.2f} MiB/hour, "
          f"{req * 3600 / el:.0f} requests/hour, {byt / max(req, 1) / 1024:.1f} KiB/request; "
          f"{b['series']} series; {b['rejected']} rejected")
    sp = os.path.join(out, "stats.json")
    if os.path.exists(sp):
        st = json.load(open(sp))["stats"]
        for s in ("pyroscope", "otlp"):
            arr = st[s].get("arrivals", [])
            if not arr:
                continue
            end_lat = [(ar - (t0 + dur)) / 1e9 for t0, dur, ar in arr if t0]
            start_lat = [(ar - t0) / 1e9 for t0, dur, ar in arr if t0]
            p(f"  {s:9s} {len(arr)} profiles; arrival - window end: median "
              f"{statistics.median(end_lat):.2f} s, p95 {pct(end_lat, 95):.2f}, max "
              f"{max(end_lat):.2f}, min {min(end_lat):.2f}; arrival - window start: median "
              f"{statistics.median(start_lat):.2f} s, p95 {pct(start_lat, 95):.2f}, max "
              f"{max(start_lat):.2f}")
            svc = {x["labels"].get("service_name", x["labels"].get("service.name"))
                   for x in st[s]["series"]}
            p(f"  {s:9s} {len(st[s]['series'])} series, {len(svc)} services, "
              f"{st[s]['duplicates']} duplicate profiles")
    stp = os.path.join(out, "status.json")
    if os.path.exists(stp):
        for e in json.load(open(stp)).get("export", []):
            p(f"  profctl status: {e.get('name')}: sent {e.get('requests_sent')}, retried "
              f"{e.get('requests_retried')}, dropped {e.get('requests_dropped')}, samples "
              f"{e.get('samples_sent')}, spool {e.get('spool_requests')} requests, last error "
              f"{e.get('last_error')!r}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30, help="the long run (default 30)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 2 minutes, one side-by-side round of 20 s")
    ap.add_argument("--ab-rounds", type=int, default=2, help="side-by-side rounds (default 2)")
    ap.add_argument("--ab-seconds", type=float, default=60, help="per side-by-side run")
    ap.add_argument("--warmup", type=float, default=10, help="before each side-by-side run")
    ap.add_argument("--bin", default=os.path.join(BUILD, "bin"),
                    help="directory with profd, profctl (and burn)")
    ap.add_argument("--out", help="where the results go (default: a new /tmp directory)")
    ap.add_argument("--report", metavar="DIR", help="print the summary of a run's files")
    a = ap.parse_args()
    if a.report:
        print(summary(a.report))
        return
    if a.quick:
        a.minutes, a.ab_rounds, a.ab_seconds, a.warmup = 2, 1, 20, 5
    if a.minutes <= 0 or a.ab_rounds < 0 or a.ab_seconds <= 0:
        raise SystemExit("bench: --minutes and --ab-seconds must be > 0, --ab-rounds >= 0")
    if os.geteuid() != 0:
        raise SystemExit("bench: run as root (profd needs BPF)")
    for b in ("profd", "profctl"):
        if not os.access(os.path.join(a.bin, b), os.X_OK):
            raise SystemExit(f"bench: {os.path.join(a.bin, b)}: not found (build first)")
    out = a.out or tempfile.mkdtemp(prefix="profd-export-bench-")
    os.makedirs(out, exist_ok=True)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump({"nproc": NCPU, "kernel": platform.release(), "commit": commit,
                   "argv": sys.argv, "bin": a.bin, "load_before": loadavg(),
                   "start": time.time()}, f)
    log(f"results in {out}; load average before {loadavg()}")
    with tempfile.TemporaryDirectory(prefix="profd-export-") as a.tmp:
        recv = Receiver(out)
        work = start_workload(a.bin, a.tmp)
        try:
            time.sleep(5)
            if a.ab_rounds:
                log(f"side by side: {a.ab_rounds} rounds of off / pyroscope / both, "
                    f"{a.ab_seconds:.0f} s each")
                side_by_side(a, recv, out)
            log(f"long run: {a.minutes:g} min, both endpoints")
            long_run(a, recv, out)
        finally:
            stop_workload(work)
            recv.stop()
            if os.path.exists(os.path.join(a.tmp, "churn.json")):
                shutil.copy(os.path.join(a.tmp, "churn.json"), out)
    print(summary(out))


if __name__ == "__main__":
    main()
