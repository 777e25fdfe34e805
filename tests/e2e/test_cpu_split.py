#!/usr/bin/env python3
# profd --pid on a fixture with a known call chain and a 75/25 CPU split: the folded dump names
# the functions with the right callers and reports the split within a few points.
import time
from profd_e2e import *

require_root()
burn = start_fixture("burn", 9)
try:
    with Daemon("--pid", str(burn.pid), "--frequency", "499") as d:
        burn.wait(30)
        time.sleep(0.5)
        f = d.folded("--pid", str(burn.pid))
        st = d.ctl("status")
        log(st.stdout)
finally:
    if burn.poll() is None:
        burn.kill()

n = total(f)
log(f"{n} samples, {len(f)} stacks; top:")
for s, c in sorted(f.items(), key=lambda kv: -kv[1])[:8]:
    log(f"  {c:6d} {s}")
check(n > 1500, f"enough samples at 499 Hz over ~8 s (got {n})")
a = total(f, lambda fr: "work_a" in fr)
b = total(f, lambda fr: "work_b" in fr)
check(a + b >= 0.9 * n, f"90% of samples inside work_a/work_b ({a + b} of {n})")
split = a / (a + b)
check(abs(split - 0.75) <= 0.05, f"work_a share {split:.3f} is 0.75 +- 0.05")
chain_a = total(f, lambda fr: has_chain(fr, ["main", "run", "work_a", "spin_a"]))
chain_b = total(f, lambda fr: has_chain(fr, ["main", "run", "work_b", "spin_b"]))
check(chain_a >= 0.8 * a, f"main;run;work_a;spin_a carries most work_a samples ({chain_a}/{a})")
check(chain_b >= 0.8 * b, f"main;run;work_b;spin_b carries most work_b samples ({chain_b}/{b})")
check(not any("spin_b" in s.split(";") and "work_a" in s.split(";") for s in f),
      "spin_b never appears under work_a")
check(all(not s.startswith("burn;") for s in f), "a --pid dump has no process root frame")
log("PASS")
