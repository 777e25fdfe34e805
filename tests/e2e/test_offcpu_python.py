#!/usr/bin/env python3
# profd --off-cpu on a Python program whose main thread waits in a queue's get for a slow
# producer: a worker thread feeding a queue.Queue (the wait reads [off-cpu: futex]) and a worker
# process feeding a multiprocessing.Queue (a pipe read: [off-cpu: pipe]). On every interpreter at
# hand (pyenv 3.8-3.13, Debian's static 3.11, 3.14), the main thread's off-CPU time shows under
# wait_for_item -> get (Queue.get from 3.11; queue.py or queues.py).
import os
import re
import subprocess
import time
from profd_e2e import *

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.normpath(os.path.join(HERE, "..", "fixtures", "python", "queue_wait.py"))
SECONDS = 4

require_root()
pythons = cpythons()
check(pythons, "at least one CPython to test with")

for (v, py), mode in [(p, m) for p in pythons for m in ("thread", "process")]:
    v = f"{v} {mode}"
    fx = subprocess.Popen([py, SCRIPT, str(SECONDS), mode], stdout=subprocess.PIPE, text=True)
    try:
        with Daemon("--pid", str(fx.pid), "--off-cpu", "--frequency", "199") as d:
            out, _ = fx.communicate(timeout=SECONDS + 60)
            time.sleep(0.5)
            off = d.folded("--pid", str(fx.pid), "--value", "off-cpu", "--per-thread",
                           "--thread-state")
    finally:
        if fx.poll() is None:
            fx.kill()
    m = re.search(r"measured get=([\d.]+)", out)
    check(m is not None, f"{v}: the fixture printed its share ({out!r})")
    main = {}
    for s, c in off.items():
        fr = s.split(";")
        if fr[0].startswith(f"thread {fx.pid} ("):
            main[";".join(fr[1:])] = c
    t = sum(main.values())
    under_get = sum(c for s, c in main.items()
                    if any(re.match(r"(Queue\.)?get \(queues?\.py", x) for x in s.split(";")) and
                    any(x.startswith("wait_for_item (queue_wait.py") for x in s.split(";")))
    why = "[off-cpu: futex]" if mode == "thread" else "[off-cpu: pipe]"
    futex = sum(c for s, c in main.items() if s.startswith(why))
    log(f"{v}: main thread off-CPU {t / 1e9:.2f} s, under get {under_get / 1e9:.2f} s, "
        f"futex {futex / 1e9:.2f} s (fixture: {m.group(1)} of its {SECONDS} s in get)")
    for s, c in sorted(main.items(), key=lambda kv: -kv[1])[:5]:
        log(f"  {c:14d} {s[-500:]}")
    check(t >= 0.25 * SECONDS * 1e9, f"{v}: the main thread has off-CPU time ({t / 1e9:.2f} s)")
    check(under_get >= 0.8 * t,
          f"{v}: >= 80% of main's off-CPU time is under wait_for_item -> get")
    check(futex >= 0.8 * under_get, f"{v}: the wait reads {why}")
log("PASS")
