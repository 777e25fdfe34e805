#!/usr/bin/env python3
# Python frames of a process's last moments: profd handles samples at its next drain, up to
# 100 ms after they were taken, and by then a short-lived process may have exited with its
# memory, code objects included. Frames whose code objects the daemon read while the process
# lived keep their names; status counts, as left out because the process exited first, only
# the frames of code it never saw.
#
# Run 1: short burners in code read again and again: almost no frame may be left out (before
# the fix every sample of the last drain interval lost its Python frames: 30-40% of frames).
# Run 2: the same burners then run code compiled 40 ms before they exit: those frames are
# counted as left out because the process exited first, and only those.
#
# And the pprof of the exited burners names their executable as the main binary (the first
# mapping): with a shared libpython no native frame need lie in the executable itself.
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from profd_e2e import *

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "fixtures", "python", "short_lived.py")
SHARED = "/root/.pyenv/versions/3.12.1/bin/python3.12"  # pyenv builds link libpython
PYTHON = os.environ.get("PROFD_TEST_PYTHON",
                        SHARED if os.access(SHARED, os.X_OK) else sys.executable)
PROCS = 8
SECONDS = 0.3
FRESH_MS = 40
FREQ = 499


def run(extra):
    """Start the burners blocked on stdin, point a daemon at them, let them burn one after
    the other; returns (status as a dict, folded stacks of the burners)."""
    procs = [subprocess.Popen([PYTHON, SCRIPT, str(SECONDS), *extra], stdin=subprocess.PIPE,
                              text=True) for _ in range(PROCS)]
    pids = [str(p.pid) for p in procs]
    args = ["--frequency", str(FREQ)]
    for pid in pids:
        args += ["--pid", pid]
    with Daemon(*args) as d:
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.close()
            if p.wait(30) != 0:
                fail(f"burner {p.pid} exited with {p.returncode}")
        time.sleep(0.5)  # two drains after the last exit
        r = d.ctl("status", "--json")
        if r.returncode != 0:
            fail(f"profctl status failed: {r.stderr}")
        st = json.loads(r.stdout)
        text = d.ctl("status").stdout
        folded = d.folded(*[a for pid in pids for a in ("--pid", pid)])
        pprof = os.path.join(d.tmp, "burner.pb.gz")
        # All of them: a burner whose first samples the daemon handled only after it exited
        # (a slow daemon, under the sanitizers) has no executable to name.
        r = d.ctl("dump", "flamegraph", *[a for pid in pids for a in ("--pid", pid)], "-o", pprof)
        if r.returncode != 0:
            fail(f"profctl dump to pprof failed: {r.stderr}")
        check_main_binary(pprof)
    log(text)
    return st, folded


def check_main_binary(pprof):
    """go tool pprof names the profile after its first mapping: the interpreter."""
    if not shutil.which("go"):
        log("no go tool: the pprof main binary is not checked")
        return
    r = subprocess.run(["go", "tool", "pprof", "-top", pprof], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PPROF_TMPDIR": tempfile.gettempdir()})
    if r.returncode != 0:
        fail(f"go tool pprof -top failed: {r.stderr[-1000:]}")
    m = re.search(r"^File: (.*)$", r.stdout, re.M)
    want = os.path.basename(os.path.realpath(PYTHON))
    check(m is not None and m.group(1) == want,
          f"pprof: the main binary is the interpreter {want} ({m.group(1) if m else None})")


def py_samples(folded, name):
    return total(folded, lambda fr: any(x.startswith(name + " (") for x in fr))


require_root()

st, folded = run([])
n = total(folded)
named = py_samples(folded, "leaf")
dropped = st.get("python_frames_dropped", 0)
exited = st.get("python_frames_exited", 0)
pys = st.get("python_samples", 0)
log(f"run 1: {n} samples, {named} in leaf(), {pys} with Python frames, "
    f"{dropped} frames left out ({exited} process exited first)")
check(pys > 200, f"samples with Python frames ({pys})")
check("python_frames_exited" in st, "status reports the frames of exited processes")
check(dropped <= max(3, 0.02 * pys),
      f"frames left out: {dropped}, at most 2% of {pys} samples with Python frames")
check(named > 0.5 * n, f"samples in leaf() named ({named} of {n})")

st, folded = run(["--fresh", str(FRESH_MS)])
dropped = st.get("python_frames_dropped", 0)
exited = st.get("python_frames_exited", 0)
pys = st.get("python_samples", 0)
fresh = py_samples(folded, "fresh_leaf")
log(f"run 2: {pys} samples with Python frames, {dropped} frames left out "
    f"({exited} process exited first), {fresh} samples named fresh_leaf()")
# Each burner ran fresh code for FRESH_MS before exiting; unless a drain fell inside that window
# (then the code was read while alive and is named), its frames there are counted.
check(exited > 0, f"frames of code the daemon never saw before the exit are counted ({exited})")
check(exited <= PROCS * FRESH_MS / 1000 * FREQ * 2,
      f"and no more than the fresh code's samples could hold ({exited})")
check(dropped - exited <= max(3, 0.02 * pys),
      f"other frames left out: {dropped - exited}, at most 2% of {pys}")
log("PASS")
