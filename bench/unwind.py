#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""profd's user stacks against `perf record --call-graph dwarf` on the same runs.

Cases: the chain fixture main -> c1 -> c2 -> c3 -> {leaf, snprintf} (tests/fixtures/unwind_chain.c,
-O2 -fomit-frame-pointer) built by gcc and by clang with n = 2000 (time in leaf) and n = 50 (more in
libc's snprintf), and Debian's /usr/bin/python3.11 running a loop of a Python function and
hashlib.sha256 (work.py below; the one of the research notes, unbounded), and the same under a
pyenv CPython 3.11 when ~/.pyenv (or $PYENV_ROOT) has one.

Each run starts the program and profd --pid on it, lets profd warm up (a process's first samples
fall back to frame pointers until its tables are loaded), then runs perf record on the same
process for SECONDS while profd samples on, and compares the two over that window: profd's
samples from `profctl dump --since SECONDS`, perf's from `perf script`. RUNS runs per case; perf's
DWARF unwinder is flaky here (some runs lose every libc-leaf stack), so its best run is the
reference, beside profd's median and range.

Per run: complete-stack fraction (chain: the chain's frames are a prefix of main;c1;c2;c3;leaf
from main on, none missing; python: the stack reaches Py_BytesMain or _start), the fraction that
also ends at the root (_start or __libc_start_main; profd: and not marked [truncated]), and each
function's inclusive share (the samples whose stack contains it; snprintf: __snprintf or snprintf;
python: hash = hashlib's native code; eval/py = _PyEval_EvalFrameDefault, or a Python frame
`NAME (FILE.py:LINE)`, which profd puts in place of the eval loop's frames).
Then profd's unwind counters from `profctl status` where it has them.

Usage: sudo bench/unwind.py [--build build] [--runs 3] [--seconds 4] [--warmup 3] [--freq 999]
                            [--case chain-gcc-2000] ...   (cases: --list)
"""
import argparse
import os
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

WORK_PY = '''import hashlib
def f(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
while True:
    f(20000)
    hashlib.sha256(b"x" * 65536).digest()
'''

CHAIN = ["main", "c1", "c2", "c3", "leaf"]
ROOT = re.compile(r"^(_start|__libc_start_main\w*)(@.*)?$")
SNPRINTF = re.compile(r"^(__)?snprintf$")
PY_ROOT = re.compile(r"^(Py_BytesMain|_start)$")
PY_FRAME = re.compile(r"\(\S*\.py(:\d+)?\)$")
HASH = re.compile(r"sha256|EVP_Digest|_hashlib|libcrypto", re.I)
CHAIN_FUNCS = [(n, lambda u, n=n: n in u) for n in CHAIN] + [
    ("snprintf", lambda u: any(SNPRINTF.match(x) for x in u))]
PY_FUNCS = [("Py_BytesMain", lambda u: "Py_BytesMain" in u),
            # profd puts the Python frames where the eval loop's frames were: either counts
            ("eval/py", lambda u: any(x == "_PyEval_EvalFrameDefault" or PY_FRAME.search(x)
                                      for x in u)),
            ("hash", lambda u: any(HASH.search(x) for x in u))]


def cases(build):
    fx = os.path.join(build, "tests", "fixtures")
    out = {}
    for cc in ("gcc", "clang"):
        for n in (2000, 50):
            out[f"chain-{cc}-{n}"] = ("chain", [os.path.join(fx, f"unwind_chain_{cc}"), str(n)])
    out["python3.11"] = ("python", ["/usr/bin/python3.11", "work.py"])
    # A pyenv CPython (built from source, its own libpython flags), when one is installed
    pyenv = os.path.expanduser(os.environ.get("PYENV_ROOT", "~/.pyenv"))
    for v in sorted(os.listdir(os.path.join(pyenv, "versions")) if os.path.isdir(
            os.path.join(pyenv, "versions")) else []):
        if v.startswith("3.11."):
            out[f"pyenv-{v}"] = ("python", [os.path.join(pyenv, "versions", v, "bin", "python3"),
                                            "work.py"])
    return out


# ---- stacks, root first, user frames only ------------------------------------------------------

def perf_stacks(data):
    """[(count, [frames root first])] of perf.data's samples, user frames only."""
    r = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"], capture_output=True,
                       text=True)
    if r.returncode:
        sys.exit(f"unwind.py: perf script failed: {r.stderr.strip()[-500:]}")
    out = []
    for block in r.stdout.split("\n\n"):
        frames = []
        for line in block.splitlines():
            w = line.split(None, 1)
            if not w or w[0].startswith("ffffffff"):
                continue  # a kernel frame
            name = re.sub(r"\+0x[0-9a-f]+$", "", w[1].strip()) if len(w) > 1 else "[unknown]"
            # perf also shows inlined functions, and glibc's internal aliases (__GI___snprintf)
            name = re.sub(r"^__GI_", "", name.removesuffix(" (inlined)"))
            frames.append(name)
        if block.strip():
            out.append((1, frames[::-1]))
    return out


def profd_stacks(folded_text):
    out = []
    for line in folded_text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        fr = stack.split(";")
        marked = "[truncated]" in fr
        u = [x for x in fr if not x.endswith("_[k]") and
             (not x.startswith("[") or x.startswith("[unknown]"))]
        out.append((int(count), ["[truncated]"] + u if marked else u))
    return out


def chain_complete(u):
    """The chain's frames are a non-empty prefix of main;c1;c2;c3;leaf, adjacent in the stack
    (the research notes' definition, which also accepts a sample in main or c1 itself)."""
    idx = [i for i, x in enumerate(u) if x in CHAIN]
    got = [u[i] for i in idx]
    return bool(got) and got == CHAIN[:len(got)] and idx == list(range(idx[0],
                                                                          idx[0] + len(idx)))


def rooted(u):
    return bool(u) and u[0] != "[truncated]" and bool(ROOT.match(u[0]))


def measure(kind, stacks):
    n = sum(c for c, _ in stacks)
    if not n:
        return None
    complete = chain_complete if kind == "chain" else (lambda u: any(PY_ROOT.match(x)
                                                                     for x in u))
    funcs = CHAIN_FUNCS if kind == "chain" else PY_FUNCS
    m = {"samples": n,
         "complete": sum(c for c, u in stacks if complete(u) and "[truncated]" not in u) / n,
         "rooted": sum(c for c, u in stacks if complete(u) and rooted(u)) / n}
    for name, has in funcs:
        m[name] = sum(c for c, u in stacks if has(u)) / n
    return m


# ---- one run -----------------------------------------------------------------------------------

def one_run(build, kind, argv, args, tmp, i):
    profd = os.path.join(build, "bin", "profd")
    profctl = os.path.join(build, "bin", "profctl")
    sock = os.path.join(tmp, f"s{i}.sock")
    data = os.path.join(tmp, f"perf{i}.data")
    p = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.DEVNULL)
    d = subprocess.Popen([profd, "--socket", sock, "--pid", str(p.pid), "--frequency",
                          str(args.freq), "-q"])
    try:
        deadline = time.time() + 20
        while not os.path.exists(sock) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(args.warmup)
        perf = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(args.freq),
                               "--call-graph", "dwarf", "-o", data, "-p", str(p.pid), "--",
                               "sleep", str(args.seconds)], capture_output=True, text=True)
        if perf.returncode:
            sys.exit(f"unwind.py: perf record failed: {perf.stderr.strip()[-500:]}")
        dump = subprocess.run([profctl, "--socket", sock, "dump", "flamegraph", "--format",
                               "folded", "--pid", str(p.pid), "--since",
                               f"{args.seconds:g}s"], capture_output=True, text=True)
        status = subprocess.run([profctl, "--socket", sock, "status"], capture_output=True,
                                text=True)
        if dump.returncode:
            sys.exit(f"unwind.py: profctl dump failed: {dump.stderr.strip()}")
    finally:
        p.kill()
        p.wait()
        d.send_signal(signal.SIGTERM)
        d.wait(30)
    uw = [line.strip() for line in status.stdout.splitlines() if line.startswith("unwind")]
    return (measure(kind, perf_stacks(data)), measure(kind, profd_stacks(dump.stdout)), uw)


def fmt(m, cols):
    if m is None:
        return "  (no samples)"
    return f"{m['samples']:7d}" + "".join(f" {100 * m[c]:7.1f}" for c in cols)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--freq", type=int, default=999)
    ap.add_argument("--case", action="append")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    all_cases = cases(os.path.abspath(args.build))
    if args.list:
        print("\n".join(all_cases))
        return
    if os.geteuid() != 0:
        sys.exit("unwind.py: needs root (profd, perf record -p)")
    if not shutil.which("perf"):
        sys.exit("unwind.py: perf not found (Debian: apt-get install linux-perf)")
    if not 1 <= args.runs <= 20 or not 1 <= args.seconds <= 60 or not 0 <= args.warmup <= 60:
        sys.exit("unwind.py: --runs 1-20, --seconds 1-60, --warmup 0-60")
    bad = [c for c in args.case or [] if c not in all_cases]
    if bad:
        sys.exit(f"unwind.py: unknown case {bad}; see --list")
    perf_v = subprocess.run(["perf", "--version"], capture_output=True, text=True).stdout.strip()
    print(f"{perf_v}; {args.runs} runs of {args.seconds:g} s at {args.freq} Hz per case, "
          f"profd warmed up {args.warmup:g} s first; shares in % of each tool's samples")
    summary = []
    with tempfile.TemporaryDirectory(prefix="profd-unwind-") as tmp:
        os.chmod(tmp, 0o755)
        with open(os.path.join(tmp, "work.py"), "w") as f:
            f.write(WORK_PY)
        for name in args.case or list(all_cases):
            kind, argv = all_cases[name]
            if not os.access(argv[0], os.X_OK):
                print(f"\n{name}: {argv[0]} not found, skipped")
                continue
            funcs = [n for n, _ in (CHAIN_FUNCS if kind == "chain" else PY_FUNCS)]
            cols = ["complete", "rooted"] + funcs
            print(f"\n{name}: {' '.join(argv)}")
            print(f"  {'tool':11s}{'samples':>7s}" + "".join(f" {c[:7]:>7s}" for c in cols))
            perf_runs, profd_runs = [], []
            for i in range(args.runs):
                pm, dm, uw = one_run(os.path.abspath(args.build), kind, argv, args, tmp, i)
                print(f"  {'perf #%d' % (i + 1):11s}{fmt(pm, cols)}")
                print(f"  {'profd #%d' % (i + 1):11s}{fmt(dm, cols)}")
                for line in uw:
                    print(f"    profd {line}")
                if pm:
                    perf_runs.append(pm)
                if dm:
                    profd_runs.append(dm)
            best = max(perf_runs, key=lambda m: m["complete"]) if perf_runs else None
            print(f"  {'perf best':11s}{fmt(best, cols)}")
            if profd_runs:
                med = {c: statistics.median(m[c] for m in profd_runs) for c in cols}
                med["samples"] = int(statistics.median(m["samples"] for m in profd_runs))
                print(f"  {'profd med.':11s}{fmt(med, cols)}")
                lo = min(m["complete"] for m in profd_runs)
                hi = max(m["complete"] for m in profd_runs)
                summary.append((name, best["complete"] if best else None, med["complete"], lo,
                                hi))
    print("\ncomplete stacks: perf --call-graph dwarf (best of runs) vs profd (median, range)")
    for name, pb, med, lo, hi in summary:
        pbs = f"{100 * pb:5.1f}%" if pb is not None else "  n/a "
        print(f"  {name:18s} perf {pbs}   profd {100 * med:5.1f}% ({100 * lo:.1f}-{100 * hi:.1f})")


if __name__ == "__main__":
    main()
