#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
# Time in CUDA's synchronization calls is a thread state of its own: with --off-cpu, a host
# thread that sleeps half its time in cudaStreamSynchronize and spins the other half in
# cuStreamSynchronize_ptsz shows [off-cpu: CUDA sync] and [running: CUDA sync], each about half
# of its wall-clock time, under train_step.
import time
from profd_e2e import *

require_root()
SECONDS = 5
fx = start_fixture("cuda_sync", SECONDS)
try:
    with Daemon("--pid", str(fx.pid), "--off-cpu", "--frequency", "499") as d:
        fx.wait(SECONDS + 30)
        time.sleep(0.5)
        f = d.folded("--pid", str(fx.pid), "--value", "wall", "--thread-state")
finally:
    if fx.poll() is None:
        fx.kill()

n = total(f)
for s, c in sorted(f.items(), key=lambda kv: -kv[1])[:6]:
    log(f"  {c:14d} {s[:200]}")
off = total(f, lambda fr: fr[0] == "[off-cpu: CUDA sync]")
spin = total(f, lambda fr: fr[0] == "[running: CUDA sync]")
check(n > 0.8 * SECONDS * 1e9, f"the wall-clock profile covers the run ({n / 1e9:.2f} s)")
check(abs(off / n - 0.5) <= 0.12,
      f"blocked in cudaStreamSynchronize: {off / n:.3f} of wall time as [off-cpu: CUDA sync]")
check(abs(spin / n - 0.5) <= 0.12,
      f"spinning in cuStreamSynchronize_ptsz: {spin / n:.3f} as [running: CUDA sync]")
check(total(f, lambda fr: fr[0] == "[off-cpu: CUDA sync]" and
            has_chain(fr, ["train_step", "cudaStreamSynchronize"])) >= 0.9 * off,
      "the blocked time is under train_step;cudaStreamSynchronize")
log("PASS")
