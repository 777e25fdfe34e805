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
import json
import os
import subprocess
import sys
import time

from profd_e2e import *

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "fixtures", "python", "short_lived.py")
PYTHON = os.environ.get("PROFD_TEST_PYTHON", sys.executable)
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
    log(text)
    return st, folded


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
