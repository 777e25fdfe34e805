#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
# Four Python threads contending for the GIL, on every interpreter at hand (pyenv 3.8-3.13,
# Debian's static 3.11, the 3.14 builds PROFD_TEST_PYTHON314 names): with --off-cpu, each
# thread's wall-clock time under [waiting for GIL] is within 10 points of the share the fixture
# measures itself (1 - (thread CPU time + run-queue delay) / wall time: the threads do nothing
# but run Python), and
# a thread that waits on a Lock shows that wait as a futex, not as one for the GIL.
import os
import subprocess
import tempfile
import time
from profd_e2e import Daemon, check, cpythons, fail, log, parse_folded, require_root

require_root()
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "python",
                       "gil_contend.py")
SECONDS = 4


def run(label, exe):
    tmp = tempfile.mkdtemp(prefix="profd-gilwait-")
    result = os.path.join(tmp, "result")
    p = subprocess.Popen([exe, FIXTURE, str(SECONDS), result])
    with Daemon("--pid", str(p.pid), "--off-cpu", "--frequency", "499") as d:
        p.wait(SECONDS + 60)
        time.sleep(0.5)
        r = d.ctl("dump", "flamegraph", "--pid", str(p.pid), "--value", "wall",
                  "--thread-state", "--per-thread", "--format", "folded")
    if r.returncode != 0:
        fail(f"{label}: dump failed ({r.returncode}): {r.stderr}")
    f = parse_folded(r.stdout)
    mine, locked = {}, None
    for line in open(result):
        if line.startswith("lock "):
            locked = int(line.split()[1])
            continue
        # Time runnable but off CPU is preemption, which profd shows as such, not as waiting
        # for the GIL: a loaded machine makes it large, so it is left out of both.
        tid, wall, cpu, rq = map(int, line.split())
        mine[tid] = 1 - (cpu + rq) / wall
    for tid, want in mine.items():
        pre = f"thread {tid} ("
        rows = {s: v for s, v in f.items() if any(x.startswith(pre) for x in s.split(";"))}
        wall = sum(rows.values())
        gil = sum(v for s, v in rows.items() if "[waiting for GIL]" in s.split(";"))
        got = gil / wall if wall else 0
        check(wall > 0.8 * SECONDS * 1e9 and abs(got - want) <= 0.10,
              f"{label}: thread {tid} waits for the GIL {got:.3f} of {wall / 1e9:.2f} s, the "
              f"fixture measured {want:.3f} (within 0.10)")


    pre = f"thread {locked} ("
    rows = {s: v for s, v in f.items() if any(x.startswith(pre) for x in s.split(";"))}
    wall = sum(rows.values())
    gil = sum(v for s, v in rows.items() if "[waiting for GIL]" in s.split(";"))
    futex = sum(v for s, v in rows.items() if "[off-cpu: futex]" in s.split(";"))
    # Each 0.2 s timeout returns it to Python, which means taking the GIL from the burners
    # first: some real GIL waiting, but the Lock's futex is most of its time.
    check(wall > 0 and futex >= 0.6 * wall and gil < 0.5 * futex,
          f"{label}: the thread blocked on a Lock waits mostly on it, as [off-cpu: futex] "
          f"({futex / 1e9:.2f} s of {wall / 1e9:.2f} s; {gil / 1e9:.2f} s for the GIL)")


pys = cpythons()
check(pys, "at least one CPython to test with")
for label, exe in pys:
    run(label, exe)
log("PASS")
