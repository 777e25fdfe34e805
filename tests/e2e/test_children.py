#!/usr/bin/env python3
# profd --pid PARENT follows the processes PARENT starts: a child forked before profd started
# (found at start-up), a multiprocessing pool started after (followed from its fork), a child
# that execs a C program; `dump --children` shows each under a root frame "pid N (NAME)" with
# its own work and split, and a plain --pid dump keeps to the parent. --no-children stops it.
import json
import os
import sys
import tempfile
import time
from profd_e2e import *

require_root()
FAMILY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "python",
                      "family.py")
SECONDS = 6


def run_family(*daemon_args):
    tmp = tempfile.mkdtemp(prefix="profd-children-")
    ready, go = os.path.join(tmp, "ready"), os.path.join(tmp, "go")
    p = subprocess.Popen([sys.executable, FAMILY, ready, go, str(SECONDS), fixture("burn")])
    try:
        deadline = time.time() + 30
        while not os.path.exists(ready):
            if p.poll() is not None or time.time() > deadline:
                fail(f"the family fixture did not start (exit {p.poll()})")
            time.sleep(0.02)
        parent = int(open(ready).read())
        with Daemon("--pid", str(parent), "--frequency", "499", *daemon_args) as d:
            open(go, "w").close()
            p.wait(SECONDS + 60)
            time.sleep(0.5)
            r = d.ctl("dump", "flamegraph", "--pid", str(parent), "--children", "--format",
                      "folded")
            own = d.ctl("dump", "flamegraph", "--pid", str(parent), "--format", "folded")
            js = d.ctl("dump", "flamegraph", "--pid", str(parent), "--children", "--format",
                       "json")
            st = d.ctl("status")
            log(st.stdout)
    finally:
        if p.poll() is None:
            p.kill()
    pids = {}
    for line in open(ready + ".pids"):
        kind, pid = line.split()
        pids.setdefault(kind, []).append(int(pid))
    return parent, pids, r, own, st, js


parent, pids, r, own, st, js = run_family()
check(r.returncode == 0, f"dump --children succeeds ({r.returncode}: {r.stderr.strip()})")
f = parse_folded(r.stdout)
for s, c in sorted(f.items(), key=lambda kv: -kv[1])[:12]:
    log(f"  {c:6d} {s[:160]}")
roots = {}
for s, c in f.items():
    root = s.split(";")[0]
    roots[root] = roots.get(root, 0) + c
log(f"roots: {roots}")
check(all(x.startswith("pid ") and x.endswith(")") for x in roots),
      "every stack starts with a 'pid N (NAME)' root")


def of(pid):
    pre = f"pid {pid} ("
    return {s: c for s, c in f.items() if s.startswith(pre)}


check(len(pids.get("worker", [])) == 3, f"three pool workers ran: {pids.get('worker')}")
heavy = light = 0
for w in pids["worker"]:
    fw = of(w)
    h = total(fw, lambda fr: any(x.startswith("heavy ") for x in fr))
    l = total(fw, lambda fr: any(x.startswith("light ") for x in fr))
    check(h + l > 100, f"worker {w} (started after profd) was sampled: {h} heavy + {l} light")
    heavy += h
    light += l
split = heavy / (heavy + light)
check(abs(split - 0.75) <= 0.07, f"the workers' heavy share {split:.3f} is 0.75 +- 0.07")

early = pids["early"][0]
fe = of(early)
check(total(fe, lambda fr: any(x.startswith("early_spin ") for x in fr)) > 100,
      f"the child forked before profd started ({early}) was followed: "
      f"{total(fe)} samples")

ex = pids["exec"][0]
fx = of(ex)
chain = total(fx, lambda fr: has_chain(fr, ["main", "run", "work_a", "spin_a"]))
check(chain > 100, f"the child that exec'd the C fixture ({ex}) shows main;run;work_a;spin_a "
      f"({chain} samples)")
check(any(s.startswith(f"pid {ex} (burn)") for s in fx), "its root names the new image: burn")

check(own.returncode in (0, 5), f"a plain --pid dump works ({own.returncode}: {own.stderr})")
fo = parse_folded(own.stdout)
check(not any("heavy " in s or "early_spin " in s or "spin_a" in s for s in fo),
      "a --pid dump without --children has none of the children's work")
check("children followed" in st.stdout, "status reports the children followed")
procs = {p["pid"]: p for p in json.loads(js.stdout)["processes"]}
check(all(procs.get(w, {}).get("exited") for w in pids["worker"] + pids["exec"]),
      "the followed children that exited are known to have exited: "
      f"{[(w, procs.get(w, {}).get('exited')) for w in pids['worker'] + pids['exec']]}")

# --no-children: the targets' new processes are not sampled.
parent, pids, r, own, st, js = run_family("--no-children")
f = parse_folded(r.stdout) if r.returncode == 0 else {}
check(not any(s.startswith(f"pid {w} (") for s in f for w in pids.get("worker", [])),
      "with --no-children the pool workers are not sampled")
check(not any(s.startswith(f"pid {pids['exec'][0]} (") for s in f),
      "with --no-children the exec'd child is not sampled")
log("PASS")
