#!/usr/bin/env python3
# profd against py-spy on the same process: `profctl table`'s self shares of a pyperformance-like
# workload (fixture pybench.py: ray tracing, a richards-like scheduler, n-body, word counts,
# spectral norm; one thread, deterministic) agree with `py-spy record --format raw` within
# POINTS percentage points for each of the top functions of either, and the two tops name the
# same functions.
#
# Both profilers watch the one process at the same time: profd --pid and py-spy record --pid
# attach while the workload waits on standard input, then it runs and exits, which ends both.
# py-spy pauses the process for each of its samples (its default, the numbers users see); profd
# samples the CPU clock, which stops while the process is paused, so the pauses take nothing
# from either. Python self time means the same on both sides: py-spy shows Python frames only,
# and profctl table counts the interpreter's native frames above a Python frame as that
# function's self time (its default).
#
# py-spy comes from PyPI for the test only: PROFD_PYSPY names a binary, else it is installed
# with pip into .cache/py-spy-VERSION in the repository (kept for the next run). Without it
# the test skips, except in CI.
import glob
import os
import re
import subprocess
import sys
import tempfile
import time

from profd_e2e import *

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
SCRIPT = os.path.join(TOP, "tests", "fixtures", "python", "pybench.py")
PYENV = os.environ.get("PROFD_PYENV", "/root/.pyenv/versions")
PYSPY_VERSION = "0.4.3"
# Both profilers, samples per second: some 6000 samples each, so that a share of 20% is
# measured to about half a point (at 250 Hz the top function differed by 2 points once).
RATE = 499
ROUNDS = 2400       # some 12 s of the workload on CPython 3.12 here
POINTS = 3.0        # the largest difference of a self share, in percentage points
TOP_N = 10

require_root()


def find_pip():
    """An argv prefix that runs pip, or None."""
    cands = [[sys.executable, "-m", "pip"]]
    cands += [[p, "-m", "pip"] for p in sorted(glob.glob(os.path.join(PYENV, "3.*", "bin",
                                                                       "python3")))]
    cands += [["pip3"], ["pip"]]
    for c in cands:
        try:
            if subprocess.run([*c, "--version"], capture_output=True, timeout=60).returncode == 0:
                return c
        except OSError:
            continue
    return None


def find_pyspy():
    """The py-spy binary: $PROFD_PYSPY, else the cached install, else pip installs it."""
    exe = os.environ.get("PROFD_PYSPY")
    if exe:
        if not os.access(exe, os.X_OK):
            fail(f"PROFD_PYSPY={exe} is not an executable")
        return exe
    cache = os.path.join(TOP, ".cache", f"py-spy-{PYSPY_VERSION}")
    exe = os.path.join(cache, "bin", "py-spy")
    if not os.access(exe, os.X_OK):
        pip = find_pip()
        if pip is None:
            skip("no pip to install py-spy with")
        log(f"installing py-spy {PYSPY_VERSION} into {cache}")
        r = subprocess.run([*pip, "install", "--quiet", "--disable-pip-version-check",
                            "--no-deps", "--target", cache, f"py-spy=={PYSPY_VERSION}"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or not os.access(exe, os.X_OK):
            skip(f"pip could not install py-spy {PYSPY_VERSION}: {r.stderr.strip()[-500:]}")
    r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        fail(f"{exe} --version exited {r.returncode}: {r.stderr.strip()}")
    log(f"using {r.stdout.strip()} at {exe}")
    return exe


def find_python():
    """An interpreter both read: CPython 3.12 or 3.11 from pyenv (libpython shared), else
    Debian's static 3.11."""
    for mm in ("3.12", "3.11"):
        for d in sorted(glob.glob(os.path.join(PYENV, mm + ".*")), reverse=True):
            exe = os.path.join(d, "bin", "python" + mm)
            if os.access(exe, os.X_OK):
                return exe
    if os.access("/usr/bin/python3.11", os.X_OK):
        return "/usr/bin/python3.11"
    skip(f"no CPython 3.12 or 3.11 under {PYENV} nor /usr/bin/python3.11")


def function_of(frame):
    """'NAME (FILE)' for a Python frame 'NAME (PATH:LINE)' (any path, line or none)."""
    m = re.fullmatch(r"(.*) \(([^()]*?)(?::\d+)?\)", frame)
    if not m:
        return frame
    return f"{m.group(1)} ({os.path.basename(m.group(2))})"


def pyspy_shares(path):
    """{function: self %} and the sample count of py-spy's raw (folded) output."""
    counts, n = {}, 0
    with open(path) as f:
        for line in f:
            stack, _, c = line.rstrip("\n").rpartition(" ")
            if not c.isdigit():
                fail(f"malformed py-spy raw line: {line!r}")
            # A sample with no Python frame (py-spy caught the thread between frames) is an
            # empty stack: part of py-spy's total, no function's.
            leaf = function_of(stack.split(";")[-1]) if stack else "(no frames)"
            counts[leaf] = counts.get(leaf, 0) + int(c)
            n += int(c)
    return {k: 100.0 * v / n for k, v in counts.items()}, n


def profd_shares(d, pid):
    """{function: self %} and the sample count of `profctl table --limit 0`."""
    r = d.ctl("table", "--pid", str(pid), "--limit", "0")
    if r.returncode != 0:
        fail(f"profctl table failed ({r.returncode}): {r.stderr}")
    lines = r.stdout.splitlines()
    rules = [i for i, l in enumerate(lines) if l.startswith("----")]
    if len(rules) < 3:
        fail(f"profctl table: no table in\n{r.stdout}")
    rows = {}
    for l in lines[rules[1] + 1:rules[2]]:
        cells = re.split(r"\s{2,}", l.strip())
        rows[cells[0]] = float(cells[1].rstrip("%"))
    return rows, total(d.folded("--pid", str(pid))), r.stdout


pyspy = find_pyspy()
python = find_python()
log(f"workload: {python} {SCRIPT} {ROUNDS}")
tmp = tempfile.mkdtemp(prefix="profd-pyspy-")
raw = os.path.join(tmp, "pyspy.txt")

py = subprocess.Popen([python, SCRIPT, str(ROUNDS)], stdin=subprocess.PIPE,
                      stdout=subprocess.PIPE, text=True)
spy = None
try:
    if py.stdout.readline().strip() != "ready":
        fail("the workload did not start")
    with Daemon("--pid", str(py.pid), "--frequency", str(RATE)) as d:
        spy = subprocess.Popen([pyspy, "record", "--pid", str(py.pid), "--rate", str(RATE),
                                "--format", "raw", "--output", raw],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # py-spy says it samples once it has attached.
        said = ""
        deadline = time.time() + 30
        while time.time() < deadline and "Sampling process" not in said:
            line = spy.stdout.readline()
            if not line:
                break
            said += line
        if "Sampling process" not in said:
            fail(f"py-spy did not start sampling: {said.strip()}")
        t0 = time.time()
        py.stdin.write("go\n")
        py.stdin.flush()
        out = py.stdout.read()
        rc = py.wait(120)
        secs = time.time() - t0
        check(rc == 0 and out.startswith("checksum"),
              f"the workload ran {ROUNDS} rounds in {secs:.1f} s ({out.strip()})")
        said += spy.communicate(timeout=60)[0]
        check(spy.returncode == 0 and os.path.exists(raw),
              f"py-spy wrote its profile: {said.strip().splitlines()[-2:]}")
        spy_rows, spy_n = pyspy_shares(raw)
        prof_rows, prof_n, text = profd_shares(d, py.pid)
finally:
    for p in (spy, py):
        if p and p.poll() is None:
            p.kill()
            p.wait()

log(text)
log(f"samples: profd {prof_n}, py-spy {spy_n}")
# What profd sees that py-spy cannot: kernel frames (py-spy's own ptrace stops among them) and
# samples without a Python frame.
other = sum(v for k, v in prof_rows.items() if not k.endswith(".py)"))
log(f"profd's self share outside Python functions: {other:.2f}%")
check(prof_n >= 0.5 * RATE * secs and spy_n >= 0.5 * RATE * secs,
      f"both took at least half of {RATE} samples a second for {secs:.1f} s")

top_prof = sorted(prof_rows, key=lambda k: -prof_rows[k])[:TOP_N]
top_spy = sorted(spy_rows, key=lambda k: -spy_rows[k])[:TOP_N]
names = top_prof + [k for k in top_spy if k not in top_prof]
width = max(len(k) for k in names)
log(f"  {'function':{width}}  {'profd':>7}  {'py-spy':>7}  {'diff':>6}")
worst = 0.0
for k in names:
    a, b = prof_rows.get(k, 0.0), spy_rows.get(k, 0.0)
    worst = max(worst, abs(a - b))
    log(f"  {k:{width}}  {a:6.2f}%  {b:6.2f}%  {a - b:+6.2f}")
check(worst <= POINTS, f"the self shares of the top {TOP_N} functions of either agree within "
      f"{POINTS} points (worst {worst:.2f})")
# The same functions lead: the top 5 of each are in the other's top 10.
check(set(top_prof[:5]) <= set(top_spy) and set(top_spy[:5]) <= set(top_prof),
      f"the top 5 of each are in the other's top {TOP_N}")
ours = [k for k in top_prof if k.endswith("(pybench.py)")]
check(len(ours) >= 8, f"the workload's own functions lead profd's table ({len(ours)} of "
      f"{TOP_N})")
log("ok")
