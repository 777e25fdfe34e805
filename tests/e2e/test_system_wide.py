#!/usr/bin/env python3
# System-wide mode sees a process it was not told about, started after the daemon.
import time
from profd_e2e import *

require_root()
with Daemon("--frequency", "199") as d:
    burn = start_fixture("burn", 5)
    burn.wait(30)
    time.sleep(0.5)
    f = d.folded("--pid", str(burn.pid))
    allp = d.folded("--since", "1m")
    st = d.ctl("status")

n = total(f)
check(n > 300, f"samples of the unannounced process ({n})")
chain = total(f, lambda fr: has_chain(fr, ["main", "run", "work_a", "spin_a"]))
check(chain > 0.4 * n, f"its call chain is named ({chain}/{n})")
check(total(allp, lambda fr: fr[0] == "burn") >= n * 0.9,
      "a system-wide dump roots its stacks at the process name")
check(len({s.split(";")[0] for s in allp}) >= 2, "a system-wide dump holds several processes")
check("system-wide" in st.stdout.lower() or "all processes" in st.stdout.lower(),
      f"status says system-wide: {st.stdout!r}")
log("PASS")
