#!/usr/bin/env python3
# The py-spy-like views on a real Python process with two named threads (fixture
# named_threads.py: pv_math burns in burn_math, float arithmetic and math builtins; pv_loop in
# burn_loop):
# - dump --per-thread: every stack's root is "thread TID (COMM)", burn_math under pv_math and
#   burn_loop under pv_loop; the same dump without it has no thread roots;
# - dump --function: no Python frame keeps a line, burn_math reads "burn_math (named_threads.py)";
# - table: burn_math's interpreter time is its self time (most of its total), while --native
#   gives it back to the interpreter's frames; --per-thread names the thread in a column;
# - dump: no interpreter frame between two Python frames, unless --all-frames.
import os
import signal
import re
import subprocess
import sys
import time

from profd_e2e import *

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "fixtures", "python", "named_threads.py")
LINE = re.compile(r"\([^()]*\.py:\d+\)$")
PYFRAME = re.compile(r"^.+ \(([^()]*\.py|<[^()]*>)(:\d+)?\)$")
# CPython's own functions, as this test tells them by name (the views tell them by module).
CPYTHON = re.compile(r"^(_?Py[A-Z_]|_PyEval_|slot_tp_|method_vectorcall|cfunction_|"
                     r"vectorcall_|object_vacall|thread_run)")

require_root()


def table(d, *args):
    """{name or (name, thread): (self %, total %)} from `profctl table --limit 0`."""
    r = d.ctl("table", "--limit", "0", *args)
    if r.returncode != 0:
        fail(f"profctl table {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    lines = r.stdout.splitlines()
    rules = [i for i, l in enumerate(lines) if l.startswith("----")]
    if len(rules) < 3:
        fail(f"profctl table {' '.join(args)}: no table in\n{r.stdout}")
    header = lines[rules[0] + 1]
    threaded = "Thread" in header
    rows = {}
    for l in lines[rules[1] + 1:rules[2]]:
        cells = re.split(r"\s{2,}", l.strip())
        if threaded:
            name, thread, self_pct, _, total_pct = cells[:5]
            key = (name, thread)
        else:
            name, self_pct, _, total_pct = cells[:4]
            key = name
        rows[key] = (float(self_pct.rstrip("%")), float(total_pct.rstrip("%")))
    return rows, r.stdout


with Daemon("--frequency", "499") as d:
    py = subprocess.Popen([sys.executable, SCRIPT, "40"], stdout=subprocess.PIPE, text=True)
    try:
        if py.stdout.readline().strip() != "ready":
            fail("the fixture did not start its threads")
        pid = str(py.pid)
        comms = {}
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comms[f.read().strip()] = int(tid)
        check("pv_math" in comms and "pv_loop" in comms,
              f"the fixture's threads carry their names: {comms}")
        time.sleep(5)

        # --per-thread roots
        f = d.folded("--pid", pid, "--since", "4s", "--per-thread")
        roots = {}
        for s, c in f.items():
            root = s.split(";")[0]
            roots[root] = roots.get(root, 0) + c
        log(f"per-thread roots: {roots}")
        check(all(re.fullmatch(r"thread \d+( \(.*\))?", r) for r in roots),
              "every stack's root names a thread")
        math_root = f"thread {comms['pv_math']} (pv_math)"
        loop_root = f"thread {comms['pv_loop']} (pv_loop)"
        math_all = total(f, lambda fr: any(x.startswith("burn_math (") for x in fr))
        loop_all = total(f, lambda fr: any(x.startswith("burn_loop (") for x in fr))
        math_under = total(f, lambda fr: fr[0] == math_root and
                           any(x.startswith("burn_math (") for x in fr))
        loop_under = total(f, lambda fr: fr[0] == loop_root and
                           any(x.startswith("burn_loop (") for x in fr))
        log(f"burn_math {math_under}/{math_all} under {math_root}, "
            f"burn_loop {loop_under}/{loop_all} under {loop_root}")
        # A busy machine (2 CPUs shared with builds) may give the threads less than their
        # share; 50 samples still tell the roots apart.
        check(math_all >= 50 and loop_all >= 50, "both threads were sampled (50+ each)")
        check(math_under == math_all, "every burn_math sample is under pv_math's root")
        check(loop_under == loop_all, "every burn_loop sample is under pv_loop's root")
        plain = d.folded("--pid", pid, "--since", "4s")
        check(not any(s.startswith("thread ") for s in plain),
              "without --per-thread no stack has a thread root")

        # The interpreter's call machinery between Python frames: gone by default, there with
        # --all-frames (threading's run() calls the target through CPython's C call path).
        def between(folded):
            """Frames strictly between a stack's oldest and newest Python frame that are
            CPython's (by name: folded text has no modules), summed over samples."""
            n = 0
            for s, c in folded.items():
                fr = s.split(";")
                py = [i for i, x in enumerate(fr) if PYFRAME.match(x)]
                if py:
                    n += c * sum(1 for x in fr[py[0] + 1:py[-1]] if CPYTHON.match(x))
            return n

        # The same samples both ways: the process is stopped and the window covers its whole
        # run, so the two dumps cannot see different windows of a moving clock.
        os.kill(py.pid, signal.SIGSTOP)
        try:
            time.sleep(0.3)  # the ring buffer is drained every 100 ms
            whole = d.folded("--pid", pid, "--since", "10m")
            every = d.folded("--pid", pid, "--since", "10m", "--all-frames")
        finally:
            os.kill(py.pid, signal.SIGCONT)
        log(f"CPython frames between Python frames: {between(whole)} by default, "
            f"{between(every)} with --all-frames")
        check(between(every) > 0, "--all-frames keeps the interpreter between Python frames")
        check(between(whole) == 0, "by default no interpreter frame is between Python frames")
        check(total(every) == total(whole), "--all-frames counts the same samples "
              f"({total(every)} and {total(whole)})")

        # --function
        f = d.folded("--pid", pid, "--since", "4s", "--function")
        frames = {x for s in f for x in s.split(";")}
        check(not any(LINE.search(x) for x in frames), "--function: no Python frame has a line")
        check("burn_math (named_threads.py)" in frames,
              "--function: burn_math reads NAME (FILE)")
        lined = {x for s in plain for x in s.split(";")}
        n_lines = len({x for x in lined if x.startswith("burn_math (named_threads.py:")})
        log(f"burn_math lines without --function: {n_lines}")
        # Its loop header takes some 7% of its samples: with a few hundred, both lines show.
        if math_all >= 200:
            check(n_lines >= 2, "without --function burn_math shows several lines")
        check(n_lines >= 1, "without --function burn_math shows its line")

        # table: the interpreter's time is burn_math's self time
        rows, text = table(d, "--pid", pid, "--since", "4s")
        bm = rows.get("burn_math (named_threads.py)")
        check(bm is not None, f"table has a burn_math row:\n{text}")
        log(f"table burn_math self {bm[0]}% total {bm[1]}%")
        check(bm[0] >= 0.9 * bm[1], "burn_math's self is at least 90% of its total")
        check(not any(k.startswith(("_PyEval_EvalFrame", "PyFloat_", "_PyObject_Malloc"))
                      for k in rows), "no interpreter frame above Python is a row")
        rows_n, text_n = table(d, "--pid", pid, "--since", "4s", "--native")
        bmn = rows_n.get("burn_math (named_threads.py)")
        log(f"table --native burn_math self {bmn[0]}% total {bmn[1]}%")
        check(bmn[0] < 0.5 * bmn[1], "--native: most of burn_math's time is in native frames")
        natives = sorted(((v[0], k) for k, v in rows_n.items() if "(" not in k), reverse=True)
        log(f"--native: the top native rows {natives[:5]}")
        check(natives and natives[0][0] > 1.0, "--native: native frames have self time")

        rows_t, text_t = table(d, "--pid", pid, "--since", "4s", "--per-thread")
        mt = rows_t.get(("burn_math (named_threads.py)", f"{comms['pv_math']} pv_math"))
        check(mt is not None and mt[0] > 10, f"--per-thread: burn_math's row names pv_math:\n"
              f"{text_t}")
        check(not any(k[0].startswith("burn_math (") and "pv_loop" in k[1] for k in rows_t),
              "--per-thread: burn_math has no pv_loop row")
        r = d.ctl("top", "--pid", pid, "--per-thread", "--window", "3s", "--limit", "5")
        check(r.returncode == 0 and "Thread" in r.stdout and "pv_" in r.stdout,
              f"top --per-thread shows the Thread column:\n{r.stdout}{r.stderr}")
    finally:
        py.kill()
        py.wait()
log("ok")
