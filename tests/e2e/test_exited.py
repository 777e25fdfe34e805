#!/usr/bin/env python3
# A process that exits right after being sampled keeps its names: symbolized while alive.
import time
from profd_e2e import *

require_root()
burn = start_fixture("burn", 4)
with Daemon("--pid", str(burn.pid), "--frequency", "299") as d:
    burn.wait(30)
    time.sleep(3)  # gone for seconds before the dump
    check(burn.poll() is not None, "the fixture has exited")
    f = d.folded("--pid", str(burn.pid))
n = total(f)
chain = total(f, lambda fr: has_chain(fr, ["main", "run", "work_a", "spin_a"]))
check(n > 100, f"samples kept after exit ({n})")
check(chain > 0.5 * n, f"names resolved for an exited process ({chain}/{n})")
unknown = total(f, lambda fr: any(x.startswith("[unknown]") for x in fr))
check(unknown < 0.1 * n, f"few [unknown] frames ({unknown}/{n})")
log("PASS")
