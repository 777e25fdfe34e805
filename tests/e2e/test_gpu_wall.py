# SPDX-License-Identifier: BSD-2-Clause
"""Wall-clock time while the GPU was idle, end to end without a GPU: libprofd_cupti.so over the
fake libcupti in a real process, the real daemon with --off-cpu.

The fixture (tests/fixtures/gpu_app/gpu_app.c, "sleep" mode) sleeps 40 ms in load_data with no
kernel running, then launches two kernels and sleeps 20 ms in wait_gpu while they run (their
records cover that wait exactly). CPU samples see neither wait; the wall-clock GPU-idle view must
charge load_data's sleep to the idle GPU and not wait_gpu's, and `profctl report` must say so.
"""
import json
import os
import tempfile
import time

from profd_e2e import Daemon, GpuApp, check, log, require_root, total

require_root()
LOAD_NS, WAIT_NS = 40_000_000, 20_000_000
app = GpuApp(tempfile.mkdtemp(prefix="profd-gpu-wall-"), 6, "sleep")
pid, sock = app.pid, app.sock


def kernels_over(kernels, start, end):
    """The kernels ((start, end) in us) that overlap [start, end)."""
    return [k for k in kernels if k[0] < end and k[1] > start]


def under(folded, fn):
    return total(folded, lambda frames: fn in frames)


try:
    with Daemon("--pid", str(pid), "--off-cpu", socket_path=sock) as d:
        rc = app.proc.wait(90)
        check(rc == 0, f"the application ran to completion with the library (exit {rc})")
        res = {k: int(v) for k, v in app.read_out().items()}
        rounds = res["rounds"]
        log(f"fixture: {res}")
        check(rounds >= 50, f"enough rounds ({rounds})")
        # Held waits are released at most hold (3 s) after they ended.
        time.sleep(4)
        main = ["--pid", str(pid), "--tid", str(pid)]

        off = d.folded(*main, "--value", "off-cpu")
        idle_off = d.folded(*main, "--gpu-idle", "--value", "off-cpu")
        lo, wo = under(off, "load_data"), under(off, "wait_gpu")
        li, wi = under(idle_off, "load_data"), under(idle_off, "wait_gpu")
        log(f"off-CPU: load_data {lo / 1e6:.1f} ms, wait_gpu {wo / 1e6:.1f} ms; while idle: "
            f"load_data {li / 1e6:.1f} ms, wait_gpu {wi / 1e6:.1f} ms")
        # Sleeps run a little long (timer slack, wake-up); the rounds' count is exact.
        check(0.95 * rounds * LOAD_NS <= lo <= 1.15 * rounds * LOAD_NS,
              f"load_data's off-CPU time is its sleeps ({lo / 1e6:.0f} ms for {rounds} x 40 ms)")
        check(0.95 * rounds * WAIT_NS <= wo <= 1.15 * rounds * WAIT_NS,
              f"wait_gpu's off-CPU time is its sleeps ({wo / 1e6:.0f} ms for {rounds} x 20 ms)")
        check(li >= 0.95 * lo, f"load_data's waits are GPU-idle ({li} of {lo} ns)")
        check(wi <= 0.05 * wo, f"wait_gpu's waits, kernels running, are not ({wi} of {wo} ns)")

        # Wall clock while idle, with states: the main thread's sleep in load_data leads.
        # d.folded fails the test when profctl does not exit 0.
        wall = d.folded(*main, "--gpu-idle", "--value", "wall", "--thread-state")
        all_idle = total(wall)
        top = max(wall.items(), key=lambda kv: kv[1])
        log("\n".join(f"{v} {s}" for s, v in sorted(wall.items(), key=lambda x: -x[1])[:5]))
        check(top[0].startswith("[off-cpu") and "load_data" in top[0].split(";"),
              f"the top GPU-idle stack is an off-CPU wait in load_data ({top[0]})")
        lw = under(wall, "load_data")
        check(lw >= 0.85 * all_idle,
              f"load_data is most of the main thread's GPU-idle wall time ({lw} of {all_idle})")
        check(under(wall, "wait_gpu") <= 0.05 * under(d.folded(*main, "--value", "wall"),
                                                     "wait_gpu"),
              "wait_gpu is not GPU-idle in wall-clock time either")

        r = d.ctl("dump", "flamegraph", *main, "--gpu-idle", "--value", "gpu")
        check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
              and "--gpu-idle" in r.stderr,
              f"--gpu-idle with --value gpu is a usage error in one line ({r.stderr.strip()})")

        # The trace: each wait a slice on its thread, beside the kernels it waited for.
        tpath = os.path.join(os.path.dirname(app.out_path), "trace.json")
        r = d.ctl("dump", "trace", "--pid", str(pid), "-o", tpath)
        check(r.returncode == 0, f"dump trace exits 0 ({r.stderr.strip()})")
        with open(tpath) as f:
            ev = json.load(f)["traceEvents"]
        waits = [e for e in ev if e.get("cat") == "off_cpu" and e["tid"] == pid]
        in_load = [e for e in waits if "load_data" in e["args"]["stack"]]
        in_wait = [e for e in waits if "wait_gpu" in e["args"]["stack"]]
        check(rounds - 2 <= len(in_load) <= rounds and rounds - 2 <= len(in_wait) <= rounds,
              f"the trace has each sleep as a slice ({len(in_load)} in load_data, "
              f"{len(in_wait)} in wait_gpu, {rounds} rounds)")
        check(all(e["ph"] == "X" and e["name"] == "off-cpu: sleep" and
                  39000 <= e["dur"] <= 60000 for e in in_load),
              "load_data's slices are 'off-cpu: sleep', 40 ms long")
        kernels = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                         if e.get("cat") == "kernel")
        inside = 0
        for e in in_wait:
            near = kernels_over(kernels, e["ts"], e["ts"] + e["dur"])
            # The step's two kernels run back to back over the whole wait (1 ms slack).
            if near and min(a for a, _ in near) <= e["ts"] + 1000 and \
                    max(b for _, b in near) >= e["ts"] + e["dur"] - 1000:
                inside += 1
        check(inside >= len(in_wait) - 2,
              f"wait_gpu's slices lie under the kernels they waited for ({inside} of "
              f"{len(in_wait)})")

        # The report: where the threads were while the GPU was idle.
        r = d.ctl("report", "--pid", str(pid))
        log(r.stdout)
        check(r.returncode == 0, f"report exits 0 ({r.stderr.strip()})")
        check("While the GPU was idle: top stacks (wall-clock)" in r.stdout,
              "report has the GPU-idle wall-clock section")
        r = d.ctl("report", "--pid", str(pid), "--json")
        check(r.returncode == 0, f"report --json exits 0 ({r.stderr.strip()})")
        rep = json.loads(r.stdout)
        rows = rep.get("gpu_idle_stacks_wall", [])
        mine = [x for x in rows if "load_data" in x["name"] and x["name"].startswith("[off-cpu")]
        check(mine and 0.9 * li <= mine[0]["ns"] <= 1.1 * li + 0.2 * rounds * LOAD_NS,
              f"report's GPU-idle stacks have load_data's wait ({mine[:1]}, off-CPU idle {li})")
        states = {x["name"]: x["ns"] for x in rep.get("gpu_idle_thread_states", [])}
        check(any(k.startswith("[off-cpu") for k in states),
              f"report's GPU-idle states include waiting ({states})")
finally:
    app.kill()
log("PASS")
