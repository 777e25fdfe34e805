# SPDX-License-Identifier: BSD-2-Clause
"""The GPU path end to end, without a GPU: libprofd_cupti.so over the fake libcupti in a real
process, the real daemon attaching the launch probe, joining kernels to launch stacks, holding
CPU samples for NVTX labels and GPU idleness, and profctl's GPU views on top.

The fixture (tests/fixtures/gpu_app/gpu_app.c) launches matmul from launch_matmul and relu from
launch_relu, and reports kernels that run exactly while it burns CPU in wait_gpu (matmul the
first 3/4, relu the last 1/4), inside an NVTX range train_step; load_data burns CPU while no
kernel runs. It writes the exact kernel time it reported.
"""
import json
import os
import re
import sys
import tempfile
import time

from profd_e2e import Daemon, GpuApp, check, fail, has_chain, log, require_root

require_root()
tmp = tempfile.mkdtemp(prefix="profd-gpu-")
# A relative library path, as CUDA_INJECTION64_PATH may be: the library must still tell the
# daemon where it lives.
so = os.environ.get("PROFD_CUPTI_SO") or "?"
app = GpuApp(tmp, 6, lib="./" + os.path.basename(so), cwd=os.path.dirname(so))
pid, sock, read_out = app.pid, app.sock, app.read_out

try:
    with Daemon("--pid", str(pid), "--frequency", "499", socket_path=sock) as d:
        rc = app.proc.wait(90)
        check(rc == 0, f"the application ran to completion with the library (exit {rc})")
        res = {k: int(v) for k, v in read_out().items()}
        log(f"fixture: {res}")
        check(res["rounds"] >= 20, f"enough rounds ({res['rounds']})")
        # Held samples are released at most hold (3 s) after they were taken.
        time.sleep(4)

        r = d.ctl("status")
        log(r.stdout)
        check(r.returncode == 0, "status answers")

        # ---- GPU time by launching stack -----------------------------------------------
        gpu = d.folded("--pid", str(pid), "--value", "gpu")
        log("\n".join(f"{v} {s}" for s, v in sorted(gpu.items(), key=lambda x: -x[1])[:8]))
        leaf = lambda s: s.split(";")[-1]
        mm = sum(v for s, v in gpu.items() if "matmul" in leaf(s))
        rl = sum(v for s, v in gpu.items() if "relu" in leaf(s))
        check(all(leaf(s).endswith("_[g]") for s in gpu), "every GPU stack ends in a _[g] kernel")
        check(mm == res["matmul_ns"],
              f"matmul's GPU time is exactly what ran ({mm} vs {res['matmul_ns']} ns)")
        check(rl == res["relu_ns"],
              f"relu's GPU time is exactly what ran ({rl} vs {res['relu_ns']} ns)")
        mm_under = sum(v for s, v in gpu.items()
                       if "matmul" in leaf(s) and has_chain(s.split(";"), ["step", "launch_matmul"]))
        rl_under = sum(v for s, v in gpu.items()
                       if "relu" in leaf(s) and has_chain(s.split(";"), ["step", "launch_relu"]))
        check(mm_under == mm, "all of matmul's time is under step;launch_matmul")
        check(rl_under == rl, "all of relu's time is under step;launch_relu")
        check(not any("launch_callback" in s for s in gpu),
              "the library's own callback frames are cut from launch stacks")
        check(any("matmul(float*, float*, int)" in leaf(s) for s in gpu),
              "kernel names are demangled")

        kern = d.folded("--pid", str(pid), "--value", "gpu-kernels")
        nk = sum(kern.values())
        check(nk == 2 * res["rounds"], f"one kernel count per launch ({nk} vs {2 * res['rounds']})")

        # ---- CPU while the GPU was idle ----------------------------------------------------
        cpu = d.folded("--pid", str(pid))
        idle = d.folded("--pid", str(pid), "--gpu-idle")
        tot = lambda f, fn: sum(v for s, v in f.items() if fn in s.split(";"))
        load_cpu, wait_cpu = tot(cpu, "load_data"), tot(cpu, "wait_gpu")
        load_idle, wait_idle = tot(idle, "load_data"), tot(idle, "wait_gpu")
        log(f"cpu: load_data {load_cpu} wait_gpu {wait_cpu}; idle: load_data {load_idle} "
            f"wait_gpu {wait_idle}")
        check(load_cpu > 500 and wait_cpu > 250, "both phases were sampled")
        check(load_idle >= 0.95 * load_cpu,
              f"load_data's samples are GPU-idle ({load_idle} of {load_cpu})")
        check(wait_idle <= 0.03 * wait_cpu,
              f"wait_gpu's samples are not GPU-idle ({wait_idle} of {wait_cpu})")

        # ---- NVTX ----------------------------------------------------------------------------
        nv = d.folded("--pid", str(pid), "--nvtx")
        in_range = lambda fn: sum(v for s, v in nv.items()
                                  if fn in s.split(";") and any("train_step" in f
                                                                 for f in s.split(";")))
        check(in_range("wait_gpu") >= 0.97 * wait_cpu,
              f"wait_gpu's samples carry the train_step range ({in_range('wait_gpu')})")
        check(in_range("load_data") <= 0.03 * load_cpu,
              f"load_data's samples do not ({in_range('load_data')})")
        check(not any("train_step" in s for s in cpu), "without --nvtx no range frames show")

        # ---- trace ---------------------------------------------------------------------------
        tpath = os.path.join(tmp, "trace.json")
        r = d.ctl("dump", "trace", "--pid", str(pid), "-o", tpath)
        check(r.returncode == 0, f"dump trace exits 0 ({r.stderr.strip()})")
        with open(tpath) as f:
            tr = json.load(f)
        ev = tr["traceEvents"] if isinstance(tr, dict) else tr
        for e in ev:
            if "ph" not in e or "pid" not in e or ("ts" not in e and e["ph"] != "M"):
                fail(f"malformed trace event {e}")
        kernels = [e for e in ev if e["ph"] == "X" and ("matmul" in e.get("name", "")
                                                       or "relu" in e.get("name", ""))]
        check(len(kernels) == 2 * res["rounds"],
              f"every kernel is on the timeline ({len(kernels)})")
        check(all(e["args"].get("grid") == 64 and e["args"].get("block") == 256
                  for e in kernels), "kernels carry their grid and block sizes")
        starts = {e["id"] for e in ev if e["ph"] == "s"}
        ends = {e["id"] for e in ev if e["ph"] == "f"}
        check(len(starts) >= 2 * res["rounds"] and starts == ends,
              f"a flow from each launch to its kernel ({len(starts)} starts, {len(ends)} ends)")
        tracks = {}
        for e in ev:
            if e["ph"] in ("X", "i", "I", "B", "E"):
                tracks.setdefault((e["pid"], e["tid"]), []).append(e["ts"])
        check(all(ts == sorted(ts) for ts in tracks.values()),
              "timestamps are monotonic on every track")
        check(any(e.get("name") == "train_step" for e in ev), "NVTX ranges are on the timeline")

        # ---- report --------------------------------------------------------------------------
        r = d.ctl("report", "--pid", str(pid))
        log(r.stdout)
        check(r.returncode == 0, f"report exits 0 ({r.stderr.strip()})")
        m = re.search(r"busy[^\d]*([\d.]+)\s*%", r.stdout, re.I)
        check(m is not None, "report gives the GPU busy percent")
        check("matmul" in r.stdout and "load_data" in r.stdout,
              "report names the top kernel and what the host did while the GPU idled")
        sites = r.stdout.split("Top launch sites", 1)[-1].split("Top CPU stacks", 1)[0]
        m = re.search(r"([\d.]+)%\s+\d+\s+launch_matmul\b", sites)
        check(m is not None and abs(float(m.group(1)) - 75.0) <= 0.5,
              f"report's top launch site is launch_matmul with 75% of GPU time ({sites.strip()!r})")
finally:
    app.kill()
log("PASS")
