#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""What unwinding from CFI costs: a build with it (NEW) against one with frame pointers only (BASE).

  sudo bench/unwind_cost.py bpf --base BASE_BUILD [--new build] [--rounds 5] [--seconds 4]
        BPF CPU per sample: kernel.bpf_stats_enabled=1, run_time_ns and run_cnt of this daemon's
        profd_sample program (found through /proc/PID/fdinfo, so other daemons on the machine do
        not count) over a window after warm-up, against the daemon's samples_received in the same
        window; workloads chain (gcc, n=2000), python3.11 work.py, recursion 200 deep, the
        chain through a JIT leaf (unwind_jit_gcc, unwind_jitfp_gcc); in each
        round every workload runs under both builds, in random order; medians over rounds
  sudo bench/unwind_cost.py overhead --base BASE_BUILD [--new build] [--rounds 9] [--work 450]
                                     [--omit-fp]
        slowdown of bench/work.c (fixed work) with modes none / new 99 / new 999 / base 99 /
        base 999 in random order each round, profd system-wide (as bench/run.py overhead), each
        fresh daemon left to sample for 2 s and then to settle (CPU calm and unwinder idle for
        1 s) before the program starts;
        --omit-fp builds work.c with -fomit-frame-pointer instead of -fno-omit-frame-pointer
  sudo bench/unwind_cost.py tables [--new build]
        per file: profd-cfi's time and rows (8 bytes each) for libc, libpython, libcrypto,
        python3.11; then a daemon on a python3.11 process that uses hashlib: its status tables
        line, the BPF map memory of its tables (bpftool memlock of the inner maps of
        unwind_tables, and of unwind_procs) against its RSS
  sudo bench/unwind_cost.py big [--new build] [--libs 300] [--system-wide]
        a process mapping LIBS distinct copies of one small library (build-ids patched so each is
        a file of its own): time until the daemon has described it, and `profctl status`
        round-trip latency while it builds against idle (profd --pid on it, or system-wide)
  sudo bench/unwind_cost.py startup --base BASE_BUILD [--new build] [--rounds 5]
        start-up time of a system-wide profd: from its start to its "serving" log line, with and
        without --off-cpu, each build and mode once per round in random order; medians; then
        per build, its programs' instructions as verified (bpf_prog_info.verified_insns), and
        bytes translated and JITed

Every run prints the load average: the machine is shared.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)

# The Python workload: a loop and 64 KiB of hashing, as bench/unwind.py runs it.
from unwind import WORK_PY  # noqa: E402

LIBDIR = "/usr/lib/x86_64-linux-gnu"
FILES = [f"{LIBDIR}/libc.so.6", f"{LIBDIR}/libpython3.11.so.1.0", f"{LIBDIR}/libcrypto.so.3",
         "/usr/bin/python3.11"]


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def sh(*argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, check=True, **kw).stdout


class Daemon:
    def __init__(self, build, tmp, args, log=None):
        self.build = build
        self.sock = os.path.join(tmp, f"d{random.randrange(1 << 30)}.sock")
        out = open(log, "w") if log else subprocess.DEVNULL
        argv = [os.path.join(build, "bin", "profd"), "--socket", self.sock, *args]
        if not log:
            argv.append("-q")
        self.proc = subprocess.Popen(argv, stdout=out, stderr=out)
        deadline = time.time() + 20
        while not os.path.exists(self.sock):
            if time.time() > deadline or self.proc.poll() is not None:
                sys.exit("unwind_cost: profd did not start")
            time.sleep(0.02)

    def ctl(self, *args):
        return sh(os.path.join(self.build, "bin", "profctl"), "--socket", self.sock, *args)

    def status(self):
        return json.loads(self.ctl("status", "--json"))

    def bpf_ids(self, kind):
        """Ids of this daemon's BPF programs or maps (kind 'prog_id' or 'map_id')."""
        ids = []
        fd_dir = f"/proc/{self.proc.pid}/fdinfo"
        for fd in os.listdir(fd_dir):
            try:
                with open(os.path.join(fd_dir, fd)) as f:
                    for line in f:
                        if line.startswith(kind + ":"):
                            ids.append(int(line.split()[1]))
            except OSError:
                pass
        return ids

    def prog(self, name="profd_sample"):
        for i in self.bpf_ids("prog_id"):
            p = json.loads(sh("bpftool", "prog", "show", "id", str(i), "--json"))
            if p.get("name") == name:
                return p
        sys.exit(f"unwind_cost: no {name} program in profd's fds")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


def workloads(new, tmp):
    fx = os.path.join(new, "tests", "fixtures")
    with open(os.path.join(tmp, "work.py"), "w") as f:
        f.write(WORK_PY)
    return {"chain-gcc-2000": [os.path.join(fx, "unwind_chain_gcc"), "2000"],
            "python3.11": ["/usr/bin/python3.11", os.path.join(tmp, "work.py")],
            "recurse-200": [os.path.join(fx, "unwind_recurse_gcc"), "200"],
            # the chain through a JIT leaf left by the stack scan (c3 rsp- or rbp-based)
            "jit-gcc": [os.path.join(fx, "unwind_jit_gcc")],
            "jitfp-gcc": [os.path.join(fx, "unwind_jitfp_gcc")]}


# ---- BPF CPU per sample ------------------------------------------------------------------------

def bpf_window(build, argv, args, tmp):
    w = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    d = Daemon(build, tmp, ["--pid", str(w.pid), "--frequency", str(args.freq)])
    try:
        time.sleep(args.warmup)
        p0, s0 = d.prog(), d.status()
        time.sleep(args.seconds)
        p1, s1 = d.prog(), d.status()
    finally:
        w.kill()
        w.wait()
        d.stop()
    ns = p1["run_time_ns"] - p0["run_time_ns"]
    cnt = p1["run_cnt"] - p0["run_cnt"]
    smp = s1["samples_received"] - s0["samples_received"]
    return {"per_run": ns / cnt if cnt else float("nan"),
            "per_sample": ns / smp if smp else float("nan"), "runs": cnt, "samples": smp}


def cmd_bpf(args):
    old = open("/proc/sys/kernel/bpf_stats_enabled").read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    builds = {"new": args.new, "base": args.base}
    res = {}
    try:
        with tempfile.TemporaryDirectory(prefix="profd-uwcost-") as tmp:
            os.chmod(tmp, 0o755)
            wl = workloads(args.new, tmp)
            for r in range(args.rounds):
                for name, argv in wl.items():
                    order = list(builds)
                    random.shuffle(order)
                    for b in order:
                        m = bpf_window(builds[b], argv, args, tmp)
                        res.setdefault((name, b), []).append(m)
                        print(f"round {r + 1} {name:15s} {b:4s}: {m['per_run']:7.0f} ns/run "
                              f"({m['runs']} runs), {m['per_sample']:7.0f} ns/sample "
                              f"({m['samples']} samples); load {load()}", flush=True)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)
    print(f"\nBPF program profd_sample, {args.freq} Hz, --pid WORKLOAD, {args.seconds:g} s "
          f"windows after {args.warmup:g} s warm-up, {args.rounds} rounds; medians (min-max)")
    print("ns/run = run_time_ns / run_cnt (every cpu-clock tick of both CPUs, the filtered ones "
          "too); ns/sample = run_time_ns / samples the daemon received")
    print(f"{'workload':16s} {'build':5s} {'ns/run':>18s} {'ns/sample':>20s}")
    for name in wl:
        med = {}
        for b in builds:
            xs = res[(name, b)]
            for k in ("per_run", "per_sample"):
                v = [x[k] for x in xs]
                med[(b, k)] = statistics.median(v)
            pr = [x["per_run"] for x in xs]
            ps = [x["per_sample"] for x in xs]
            print(f"{name:16s} {b:5s} {statistics.median(pr):6.0f} ({min(pr):5.0f}-{max(pr):5.0f})"
                  f" {statistics.median(ps):7.0f} ({min(ps):5.0f}-{max(ps):5.0f})")
        print(f"{name:16s} diff  {med[('new', 'per_run')] - med[('base', 'per_run')]:6.0f}"
              f"{'':13s} {med[('new', 'per_sample')] - med[('base', 'per_sample')]:7.0f}"
              f"   (x{med[('new', 'per_sample')] / med[('base', 'per_sample')]:.2f} per sample)")


# ---- slowdown ----------------------------------------------------------------------------------

def settle(d, limit=20.0, warm=2.0, stable=1.0):
    """Let a fresh daemon finish its start-up before the measured run: sample for WARM seconds
    (a system-wide daemon meets the machine's processes and, the new build, queues their
    descriptions), then wait until its CPU is calm (under 5 ms per 0.25 s) and its unwinder idle
    (unwind.queued == 0 and unwind.busy_pid == 0; a build without an unwinder has no such
    section and counts as idle), both for STABLE seconds. Returns whether it settled within
    LIMIT."""
    time.sleep(warm)
    deadline = time.time() + limit
    prev = d.status()["daemon_cpu_ns"]
    since = None
    while time.time() < deadline:
        time.sleep(0.25)
        st = d.status()
        cur = st["daemon_cpu_ns"]
        u = st.get("unwind") or {}
        quiet = cur - prev < 5_000_000 and not u.get("queued") and not u.get("busy_pid")
        prev = cur
        if not quiet:
            since = None
        elif since is None:
            since = time.time()
        elif time.time() - since >= stable:
            return True
    return False


def cmd_overhead(args):
    with tempfile.TemporaryDirectory(prefix="profd-uwcost-") as tmp:
        exe = os.path.join(tmp, "work")
        fp = "-fomit-frame-pointer" if args.omit_fp else "-fno-omit-frame-pointer"
        subprocess.run(["cc", "-O1", "-g", fp, "-fno-inline", "-fno-optimize-sibling-calls",
                        os.path.join(HERE, "work.c"), "-o", exe], check=True)
        modes = ["none", "new-99", "new-999", "base-99", "base-999"]
        builds = {"new": args.new, "base": args.base}
        times = {m: [] for m in modes}
        cpu = {m: [] for m in modes if m != "none"}
        unsettled = {m: 0 for m in cpu}
        print(f"work.c built with {fp}; load before {load()}", flush=True)
        for r in range(args.rounds):
            order = modes[:]
            random.shuffle(order)
            for m in order:
                if m == "none":
                    out = sh(exe, str(args.work))
                else:
                    b, hz = m.split("-")
                    d = Daemon(builds[b], tmp, ["--frequency", hz])
                    try:
                        if not settle(d):
                            unsettled[m] += 1
                        c0 = d.status()["daemon_cpu_ns"]
                        out = sh(exe, str(args.work))
                        cpu[m].append((d.status()["daemon_cpu_ns"] - c0) / 1e6)
                    finally:
                        d.stop()
                times[m].append(float(out.strip().splitlines()[-1]))
            print(f"round {r + 1:2}/{args.rounds} ({' '.join(order)}): " +
                  ", ".join(f"{m} {times[m][-1]:.3f}s" for m in modes) + f"; load {load()}",
                  flush=True)
        base = statistics.median(times["none"])
        print(f"\nwork {args.work}, {args.rounds} rounds, random order per round, profd "
              f"system-wide; load after {load()}")
        print(f"{'mode':9s} {'median s':>9s} {'min':>7s} {'max':>7s} {'IQR s':>13s} {'ratio':>7s} "
              f"{'paired':>7s}")
        for m in modes:
            xs = times[m]
            q = statistics.quantiles(xs, n=4, method="inclusive")
            paired = statistics.median(x / b for x, b in zip(xs, times["none"]))
            print(f"{m:9s} {statistics.median(xs):9.3f} {min(xs):7.3f} {max(xs):7.3f} "
                  f"{q[0]:6.3f}-{q[2]:6.3f} {statistics.median(xs) / base:7.4f} {paired:7.4f}")
        q = statistics.quantiles(times["none"], n=4, method="inclusive")
        print(f"baseline IQR {100 * (q[2] - q[0]) / base:.1f}% of its median")
        for m, v in cpu.items():
            print(f"daemon CPU during the program's run, {m}: median {statistics.median(v):.0f} "
                  f"ms, min {min(v):.0f}, max {max(v):.0f}")
        print("runs whose daemon had not settled (CPU calm, unwinder idle) within 20 s: " +
              ", ".join(f"{m} {n}" for m, n in unsettled.items()))
        for hz in ("99", "999"):
            pr = statistics.median(n / b for n, b in zip(times[f"new-{hz}"],
                                                           times[f"base-{hz}"]))
            print(f"new against base at {hz} Hz, paired per round: {pr:.4f}")


# ---- tables ------------------------------------------------------------------------------------

def inner_maps(outer_id):
    """Ids of the maps a map-in-map holds."""
    out = json.loads(sh("bpftool", "map", "dump", "id", str(outer_id), "--json"))
    ids = []
    for e in out:
        v = e.get("value", e.get("formatted", {}).get("value"))
        if isinstance(v, list):  # raw bytes, little-endian u32 id
            v = int.from_bytes(bytes(int(x, 16) for x in v[:4]), "little")
        ids.append(int(v))
    return ids


def map_info(i):
    return json.loads(sh("bpftool", "map", "show", "id", str(i), "--json"))


def cmd_tables(args):
    cfi = os.path.join(args.new, "bin", "profd-cfi")
    print(f"load before {load()}")
    print(f"{'file':40s} {'rows':>7s} {'bytes':>9s} {'profd-cfi ms (median of 5, min-max)':>38s}")
    for f in FILES:
        if not os.path.exists(f):
            print(f"{f}: not found")
            continue
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            out = sh(cfi, f)
            ts.append(1e3 * (time.perf_counter() - t))
        rows = len(out.splitlines())
        print(f"{f:40s} {rows:7d} {8 * rows:9d} {statistics.median(ts):12.1f} "
              f"({min(ts):.1f}-{max(ts):.1f})")
    with tempfile.TemporaryDirectory(prefix="profd-uwcost-") as tmp:
        os.chmod(tmp, 0o755)
        wl = workloads(args.new, tmp)["python3.11"]
        w = subprocess.Popen(wl, stdout=subprocess.DEVNULL)
        log = os.path.join(tmp, "log")
        d = Daemon(args.new, tmp, ["--pid", str(w.pid), "--frequency", "999"], log=log)
        try:
            deadline = time.time() + 30
            while time.time() < deadline:
                time.sleep(0.5)
                u = d.status().get("unwind", {})
                if u.get("processes", 0) >= 1 and not u.get("queued") and not u.get("busy_pid"):
                    break
            time.sleep(1)
            print("\n" + "".join(x for x in d.ctl("status").splitlines(True)
                                 if "tables:" in x or x.startswith("unwind")), end="")
            u = d.status()["unwind"]
            print(f"status json: tables {u.get('tables')}, table_bytes {u.get('table_bytes')}, "
                  f"builds {u.get('builds')}, build_ns {u.get('build_ns')}")
            maps = {m["name"]: m for m in (map_info(i) for i in d.bpf_ids("map_id"))}
            inner = [map_info(i) for i in inner_maps(maps["unwind_tables"]["id"])]
            rows_mem = sum(m["bytes_memlock"] for m in inner)
            procs = maps["unwind_procs"]["bytes_memlock"]
            with open(f"/proc/{d.proc.pid}/status") as f:
                rss = next(int(x.split()[1]) * 1024 for x in f if x.startswith("VmRSS"))
            print(f"profd_uw_rows maps: {len(inner)}, entries " +
                  ", ".join(str(m["max_entries"]) for m in inner) +
                  f"; memlock {rows_mem} B; unwind_procs memlock {procs} B; "
                  f"total {rows_mem + procs} B = {(rows_mem + procs) / 2**20:.2f} MiB; "
                  f"daemon VmRSS {rss / 2**20:.1f} MiB")
            allmem = sum(m.get("bytes_memlock", 0) for m in maps.values())
            print(f"all of the daemon's own maps (fds): {len(maps)}, memlock "
                  f"{allmem / 2**20:.2f} MiB")
        finally:
            w.kill()
            w.wait()
            d.stop()
        print("log:\n" + "".join(x for x in open(log) if "unwind" in x))
    print(f"load after {load()}")


# ---- a process with hundreds of libraries ------------------------------------------------------

LIB_C = "int f_%d(int x) { return x * %d + 1; }\n"


def patch_build_id(path, n):
    """Give the copy its own build-id: overwrite the last 4 bytes of its NT_GNU_BUILD_ID."""
    data = bytearray(open(path, "rb").read())
    out = sh("readelf", "-n", path)
    bid = next(x.split(":")[1].strip() for x in out.splitlines() if "Build ID" in x)
    raw = bytes.fromhex(bid)
    at = data.find(raw)
    if at < 0 or data.find(raw, at + 1) >= 0:
        sys.exit("unwind_cost: build-id not found once in the library")
    data[at + len(raw) - 4:at + len(raw)] = n.to_bytes(4, "little")
    open(path, "wb").write(data)


def cmd_big(args):
    with tempfile.TemporaryDirectory(prefix="profd-uwbig-") as tmp:
        os.chmod(tmp, 0o755)
        src = os.path.join(tmp, "lib.c")
        with open(src, "w") as f:
            f.write("".join(LIB_C % (i, i) for i in range(64)))
        one = os.path.join(tmp, "libone.so")
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-Wl,--build-id", src, "-o", one],
                       check=True)
        libs = []
        for i in range(args.libs):
            p = os.path.join(tmp, f"libc{i:04d}.so")
            shutil.copy(one, p)
            patch_build_id(p, i + 1)
            libs.append(p)
        ids = {sh("readelf", "-n", p).split("Build ID:")[1].split()[0] for p in libs}
        print(f"{len(libs)} copies of a {os.path.getsize(one)} B library, {len(ids)} distinct "
              f"build-ids; load before {load()}")
        # The process: python3 waits for GO (profd is started on it and measured idle first),
        # dlopens every copy, then keeps calling into them.
        prog = os.path.join(tmp, "big.py")
        with open(prog, "w") as f:
            f.write("import ctypes, os, sys, time\n"
                    "while not os.path.exists(sys.argv[1]):\n"
                    "    time.sleep(0.01)\n"
                    f"libs = [ctypes.CDLL(p) for p in {libs!r}]\n"
                    "open(sys.argv[2], 'w').write('up')\n"
                    "x = 0\n"
                    "while True:\n"
                    "    for l in libs:\n"
                    "        x = l.f_3(x) & 0xffff\n")
        log = os.path.join(tmp, "log")
        go, ready = os.path.join(tmp, "go"), os.path.join(tmp, "ready")
        w = subprocess.Popen(["python3", prog, go, ready])
        target = [] if args.system_wide else ["--pid", str(w.pid)]
        d = Daemon(args.new, tmp, ["--frequency", "999", *target], log=log)
        try:
            settle(d)
            ctl = [os.path.join(args.new, "bin", "profctl"), "--socket", d.sock, "status"]

            def lat(n, until=None):
                xs = []
                for _ in range(n):
                    t = time.perf_counter()
                    subprocess.run(ctl, capture_output=True, check=True)
                    xs.append(1e3 * (time.perf_counter() - t))
                    if until and until():
                        break
                return xs

            idle = lat(args.idle)
            with open(f"/proc/{w.pid}/maps") as f:
                before = sum(1 for x in f if " r-xp " in x)
            t0 = time.monotonic()
            open(go, "w").close()
            while not os.path.exists(ready):
                time.sleep(0.01)
            t_loaded = time.monotonic() - t0
            with open(f"/proc/{w.pid}/maps") as f:
                nmaps = sum(1 for x in f if " r-xp " in x)

            def described():
                """The log line of a description that covers every library: a sample taken
                while the libraries were still being loaded may have described a part."""
                for x in open(log):
                    m = re.search(rf"unwind: pid {w.pid}: (\d+) mappings described", x)
                    if m and int(m.group(1)) >= before + args.libs:
                        return True
                return False

            during = lat(10000, until=described)
            deadline = time.time() + 120
            while not described() and time.time() < deadline:
                time.sleep(0.05)
            t_desc2 = time.monotonic() - t0
            st = d.ctl("status")
        finally:
            w.kill()
            w.wait()
            d.stop()
        how = "system-wide" if args.system_wide else "--pid"
        print(f"process: {before} executable mappings before GO, {nmaps} after; all libraries "
              f"loaded {t_loaded:.2f} s after GO; profd {how}")
        print(f"described (log line seen) {t_desc2:.2f} s after GO "
              f"({t_desc2 - t_loaded:.2f} s after its libraries were loaded)")

        def s(xs):
            return (f"median {statistics.median(xs):.1f} ms, max {max(xs):.1f} ms, "
                    f"n {len(xs)}")
        print(f"status round trip idle:          {s(idle)}")
        print(f"status round trip while building: {s(during)}")
        print("".join(x for x in st.splitlines(True) if "tables:" in x or
                      x.startswith("unwind")), end="")
        print("log:\n" + "".join(x for x in open(log) if "unwind" in x)[-3000:])
    print(f"load after {load()}")


# ---- start-up ----------------------------------------------------------------------------------

def startup_once(build, tmp, extra):
    log = os.path.join(tmp, "startup.log")
    sock = os.path.join(tmp, f"s{random.randrange(1 << 30)}.sock")
    with open(log, "w") as out:
        t0 = time.monotonic()
        p = subprocess.Popen([os.path.join(build, "bin", "profd"), "--socket", sock, *extra],
                             stdout=out, stderr=out)
    try:
        deadline = t0 + 30
        while True:
            with open(log) as f:
                if "serving" in f.read():
                    return time.monotonic() - t0
            if p.poll() is not None or time.monotonic() > deadline:
                sys.exit("unwind_cost: profd exited or did not log 'serving':\n" + open(log).read())
            time.sleep(0.002)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(30)


def verified_insns(prog_id):
    """bpf_prog_info.verified_insns of a program (what the verifier processed), by
    BPF_PROG_GET_FD_BY_ID and BPF_OBJ_GET_INFO_BY_FD; offsets from the kernel's uapi, which only
    grows."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    nr_bpf = 321  # x86_64
    attr = ctypes.create_string_buffer(144)
    ctypes.c_uint32.from_buffer(attr, 0).value = prog_id
    fd = libc.syscall(nr_bpf, 13, attr, 144)  # BPF_PROG_GET_FD_BY_ID
    if fd < 0:
        return None
    try:
        info = ctypes.create_string_buffer(232)
        attr = ctypes.create_string_buffer(144)
        ctypes.c_uint32.from_buffer(attr, 0).value = fd  # info.bpf_fd
        ctypes.c_uint32.from_buffer(attr, 4).value = 232  # info.info_len
        ctypes.c_uint64.from_buffer(attr, 8).value = ctypes.addressof(info)  # info.info
        if libc.syscall(nr_bpf, 15, attr, 144) < 0:  # BPF_OBJ_GET_INFO_BY_FD
            return None
        return ctypes.c_uint32.from_buffer(info, 216).value
    finally:
        os.close(fd)


def cmd_startup(args):
    builds = {"new": args.new, "base": args.base}
    modes = [(b, oc) for b in builds for oc in (False, True)]
    res = {m: [] for m in modes}
    print(f"load before {load()}")
    with tempfile.TemporaryDirectory(prefix="profd-uwcost-") as tmp:
        for r in range(args.rounds):
            order = modes[:]
            random.shuffle(order)
            for b, oc in order:
                res[(b, oc)].append(startup_once(builds[b], tmp, ["--off-cpu"] if oc else []))
            print(f"round {r + 1}: " + ", ".join(
                f"{b}{' --off-cpu' if oc else ''} {res[(b, oc)][-1]:.3f} s" for b, oc in modes) +
                f"; load {load()}", flush=True)
    print(f"\nstart to 'serving', system-wide, {args.rounds} rounds; medians (min-max)")
    for b, oc in modes:
        xs = res[(b, oc)]
        print(f"{b:4s} {'--off-cpu' if oc else '':9s} {statistics.median(xs):.3f} s "
              f"({min(xs):.3f}-{max(xs):.3f})")
    print(f"\n{'build':5s} {'program':24s} {'verified insns':>14s} {'xlated B':>9s} "
          f"{'jited B':>8s}")
    with tempfile.TemporaryDirectory(prefix="profd-uwcost-") as tmp:
        for b in builds:
            d = Daemon(builds[b], tmp, ["--off-cpu"])
            try:
                d.status()  # the socket is there before the programs: wait until it answers
                for i in sorted(set(d.bpf_ids("prog_id"))):  # links hold ids too
                    p = json.loads(sh("bpftool", "prog", "show", "id", str(i), "--json"))
                    print(f"{b:5s} {p.get('name', '?'):24s} {verified_insns(i) or 0:14d} "
                          f"{p.get('bytes_xlated', 0):9d} {p.get('bytes_jited', 0):8d}")
            finally:
                d.stop()
    print(f"load after {load()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("bpf", "overhead", "tables", "big", "startup"):
        p = sub.add_parser(name)
        p.add_argument("--new", default=os.path.join(TOP, "build"))
        if name in ("bpf", "overhead", "startup"):
            p.add_argument("--base", required=True)
            p.add_argument("--rounds", type=int, default=9 if name == "overhead" else 5)
        if name == "bpf":
            p.add_argument("--seconds", type=float, default=4)
            p.add_argument("--warmup", type=float, default=2)
            p.add_argument("--freq", type=int, default=999)
        if name == "overhead":
            p.add_argument("--work", type=int, default=450)
            p.add_argument("--omit-fp", action="store_true")
        if name == "big":
            p.add_argument("--libs", type=int, default=300)
            p.add_argument("--idle", type=int, default=50)
            p.add_argument("--system-wide", action="store_true")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("unwind_cost: needs root (profd, bpftool)")
    for b in (args.new, getattr(args, "base", None)):
        if b and not os.access(os.path.join(b, "bin", "profd"), os.X_OK):
            sys.exit(f"unwind_cost: no {b}/bin/profd")
    if getattr(args, "rounds", 1) < 1 or getattr(args, "libs", 1) < 1:
        sys.exit("unwind_cost: --rounds and --libs must be positive")
    {"bpf": cmd_bpf, "overhead": cmd_overhead, "tables": cmd_tables, "big": cmd_big,
     "startup": cmd_startup}[args.cmd](args)


if __name__ == "__main__":
    main()
