# SPDX-License-Identifier: BSD-2-Clause
"""The device kit's part B (device-check): the kit's profd on a PyTorch training loop (B1, B2
and the views, report, trace, overhead and memory checks) and on a process without the CUPTI
library (B3). Only where the bpf check found BPF working."""
import json
import os
import shutil
import time

import checks
from kitrun import Daemon, Failed, fmt_pct, fn_is, folded, share, tail

HERE = os.path.dirname(os.path.abspath(__file__))

B_NAMES = ("B1.join", "B2.stacks", "B.nvtx", "B.gpu_idle", "B.busy_vs_profiler", "B.trace",
           "B.overhead", "B.memory")


def c_train(ctx):
    """B1, B2, the idle view, busy %, the trace, overhead, CUDA memory: one training loop."""
    if not ctx.facts.get("bpf"):
        return [(n, None, "not run", "no BPF here (check bpf)") for n in B_NAMES]
    base_s, coll_s = ctx.scale(8, 2), ctx.scale(20, 3)
    outp = os.path.join(ctx.logs, "train.out")
    go = os.path.join(ctx.work, "train.go")
    for p in (outp, go, go + ".grow"):
        if os.path.exists(p):
            os.unlink(p)
    sock = os.path.join(ctx.work, "train-profd.sock")
    env = ctx.base_env()
    env["CUDA_INJECTION64_PATH"] = ctx.profd_cupti
    env["NVTX_INJECTION64_PATH"] = ctx.profd_cupti    # as README.md's GPU section has it
    env["PROFD_SOCKET"] = sock
    cmd = [ctx.py, os.path.join(HERE, "workload.py"), "train", outp, str(base_s + coll_s + 60),
           go] + (["--fake"] if ctx.dry else [])
    app = ctx.spawn("b-train", cmd, env=env)
    pid = None
    end = time.time() + min(90, ctx.remaining())
    while time.time() < end and pid is None:
        if app.poll() is not None:
            break
        try:
            with open(outp) as f:
                first = f.readline().split()
                pid = int(first[1]) if len(first) == 2 and first[0] == "pid" else None
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    if pid is None:
        ctx.kill(app)
        raise Failed(f"the training loop did not start: {tail(ctx.read('b-train', 'err'))}")
    time.sleep(base_s)
    daemon_args = ["--pid", str(pid)]
    d = Daemon(ctx, "b-profd", *daemon_args, sock=sock)
    try:
        if not d.ready(30):
            raise Failed(f"profd did not serve: {tail(ctx.read('b-profd', 'err'))}")
        if not d.collecting(pid, 40):
            raise Failed("the library never reported collecting (profctl status)")
        t_attach = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        time.sleep(coll_s / 2)
        open(go + ".grow", "w").close()
        time.sleep(coll_s / 2)
        time.sleep(4)    # held samples and the last records reach the store
        t_dump = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        ctl = lambda log, *a: d.ctl(log, *a)
        p = ["--pid", str(pid)]
        _, status, _ = ctl("b-status", "status")
        _, st_json, _ = ctl("b-status-json", "status", "--json")
        # The report's window from the attach on: before it the library did not collect, and
        # those seconds would read as an idle GPU.
        since = f"{max(1, (t_dump - t_attach) // 1_000_000_000)}s"
        _, rep_json, rep_err = ctl("b-report-json", "report", *p, "--since", since, "--json")
        ctl("b-report", "report", *p, "--since", since)
        _, gpu_f, _ = ctl("b-gpu", "dump", "flamegraph", *p, "--value", "gpu", "--format", "folded")
        _, idle_f, _ = ctl("b-idle", "dump", "flamegraph", *p, "--gpu-idle", "--format", "folded")
        _, nvtx_f, _ = ctl("b-nvtx", "dump", "flamegraph", *p, "--value", "gpu", "--nvtx",
                           "--format", "folded")
        trace = os.path.join(ctx.logs, "b-trace.json")
        trc, _, trace_err = ctl("b-trace", "dump", "trace", *p, "-o", trace)
        mem = {}
        for v in ("gpu-memory", "gpu-memory-live"):
            rc, o, e = ctl(f"b-{v}", "dump", "flamegraph", *p, "--value", v, "--format", "folded")
            mem[v] = (rc, folded(o), e.strip())
        open(go, "w").close()
        rc = ctx.wait(app, 120)
    finally:
        d.stop()
        ctx.kill(app)
    with open(outp) as f:
        lines = f.read().splitlines()
    steps = [tuple(map(int, ln.split()[1:3])) for ln in lines if ln.startswith("step ")]
    # step MONO COMPUTE_NS then torch's counters (workload.MEM_KEYS): reserved bytes allocated,
    # freed, segments allocated, freed.
    mems = [tuple(int(x) for x in ln.split()[1:2] + ln.split()[3:7]) for ln in lines
            if ln.startswith("step ") and len(ln.split()) == 7]
    result = next((json.loads(ln[7:]) for ln in lines if ln.startswith("result ")), {})
    marks = next((json.loads(ln[6:]) for ln in lines if ln.startswith("lines ")), {})
    out = []

    # B1: GPU time with a launch stack vs unknown.
    gf = folded(gpu_f)
    unknown = share(gf, lambda fr: any("launch stack unknown" in x for x in fr))
    out.append(("B1.join", unknown is not None and unknown <= 0.10,
                f"GPU time with a launch stack {fmt_pct(None if unknown is None else 1 - unknown)}",
                f"{sum(gf.values())} ns of GPU time in {len(gf)} stacks; unknown {fmt_pct(unknown)}; "
                f"status: {' | '.join(status.splitlines()[:40])[:1500]}"))

    # B2: stacks reach the Python lines of forward and of loss.backward().
    fwd = share(gf, lambda fr: any(fn_is(x, "forward") for x in fr))
    bwd_line = marks.get("backward")
    bwd = share(gf, lambda fr: any(fn_is(x, "train_step", bwd_line) for x in fr))
    out.append(("B2.stacks", bool(fwd) and bool(bwd),
                f"forward {fmt_pct(fwd)}, loss.backward() line {fmt_pct(bwd)} of GPU time",
                f"looked for forward frames and train_step at workload.py:{bwd_line}; top stacks: "
                + " | ".join(f"{v} {s[-300:]}" for s, v in sorted(gf.items(), key=lambda x: -x[1])[:3])))

    # NVTX: the train_step range over the kernels launched inside it. Ranges are per thread,
    # and the backward pass launches from autograd's threads: a part only, but not none.
    nf = folded(nvtx_f)
    in_range = share(nf, lambda fr: "[nvtx] train_step" in fr)
    out.append(("B.nvtx", in_range is not None and in_range >= 0.10,
                f"{fmt_pct(in_range)} of GPU time under [nvtx] train_step",
                f"dump flamegraph --value gpu --nvtx: {len(nf)} stacks; pass at 10% or more"))

    # The GPU-idle view is the loader's.
    idf = folded(idle_f)
    loader = share(idf, lambda fr: any(fn_is(x, "load_batch") for x in fr))
    out.append(("B.gpu_idle", loader is not None and loader >= 0.5,
                f"load_batch {fmt_pct(loader)} of GPU-idle samples",
                f"{sum(idf.values())} idle samples; top: "
                + " | ".join(f"{v} {s[-200:]}" for s, v in sorted(idf.items(), key=lambda x: -x[1])[:3])))

    # report's busy % against torch.profiler's over the same kind of steps.
    try:
        rj = json.loads(rep_json)
        busy = (rj.get("gpu_busy") or {}).get("percent")
    except ValueError:
        busy, rj = None, {}
    theirs = (result.get("profiler") or {}).get("busy_pct")
    if busy is None or theirs is None:
        out.append(("B.busy_vs_profiler", False if busy is None else None,
                    f"profd {busy}, torch.profiler {theirs}",
                    f"report: {tail(rep_err) or 'no gpu_busy'}; profiler: {result.get('profiler')}"))
    else:
        out.append(("B.busy_vs_profiler", abs(busy - theirs) <= 10,
                    f"profd {busy:.1f}%, torch.profiler {theirs:.1f}%",
                    "pass within 10 points (different windows of the same loop)"))

    # The trace is Chrome trace JSON that Perfetto loads.
    ok, why = False, f"exit {trc}: {tail(trace_err)}"
    if trc == 0:
        try:
            with open(trace) as f:
                tr = json.load(f)
            ev = tr["traceEvents"] if isinstance(tr, dict) else tr
            bad = [e for e in ev if "ph" not in e or "pid" not in e
                   or ("ts" not in e and e.get("ph") != "M")]
            kern = [e for e in ev if e.get("ph") == "X" and "grid" in (e.get("args") or {})]
            ok = not bad and bool(kern)
            why = f"{len(ev)} events, {len(kern)} kernel slices, {len(bad)} malformed"
        except (OSError, ValueError, KeyError, TypeError) as e:
            why = f"not JSON: {e}"
    out.append(("B.trace", ok, why, f"profctl dump trace -o {os.path.basename(trace)}: {why}"))

    # Overhead: the step's compute time, library idle (before) vs collecting (after).
    before = [c for m, c in steps if m < t_attach - 1_500_000_000]
    after = [c for m, c in steps if m > t_attach]
    mb, ma = checks.median(before), checks.median(after)
    if mb and ma and len(before) >= 5 and len(after) >= 5:
        ov = (ma - mb) / mb
        out.append(("B.overhead", ov < 0.03, f"{100 * ov:+.1f}% step time collecting",
                    f"median step compute {mb / 1e6:.2f} ms idle ({len(before)} steps) vs "
                    f"{ma / 1e6:.2f} ms collecting ({len(after)} steps); pass under 3%"))
    else:
        out.append(("B.overhead", False, "not measured",
                    f"{len(before)} steps before, {len(after)} after the attach"))

    # CUDA memory by stack: the segments torch's caching allocator made while profd collected
    # (its cache emptied midway, so the forward passes allocate theirs again) against
    # gpu-memory, and the grown tensor live under grow_memory.
    rc, mf, err = mem["gpu-memory"]
    rcl, lf, errl = mem["gpu-memory-live"]
    got, live = sum(mf.values()), sum(lf.values())
    grew = sum(int(ln.split()[1]) for ln in lines if ln.startswith("grew "))
    seg = [m for m in mems if t_attach - 1_000_000_000 <= m[0] <= t_dump]
    torch_alloc = seg[-1][1] - seg[0][1] if len(seg) >= 2 else None
    torch_segs = (seg[-1][3] - seg[0][3], seg[-1][4] - seg[0][4]) if len(seg) >= 2 else None
    try:
        stj = json.loads(st_json)
    except ValueError:
        stj = {}
    under = sum(v for s, v in lf.items() if any(fn_is(x, "grow_memory") for x in s.split(";")))
    fwd = share(mf, lambda fr: any(fn_is(x, "forward") for x in fr))
    ok = (rc == 0 and rcl == 0 and grew > 0 and under >= grew and torch_alloc is not None
          and abs(got - torch_alloc) <= 0.1 * torch_alloc and bool(fwd))
    out.append(("B.memory", ok, f"gpu-memory {got} B ({fmt_pct(fwd)} under forward), live "
                f"{live} B, torch {torch_alloc} B",
                f"live under grow_memory {under} B (grew {grew}); torch while collecting: "
                f"reserved_bytes.all.allocated +{torch_alloc} B, segments allocated/freed "
                f"{torch_segs}; profd status: {stj.get('gpu_memory_records', 0)} memory records, "
                f"{stj.get('gpu_memory_unmatched_frees', 0)} unmatched frees; over the loop "
                f"{result.get('memory')}; pass: gpu-memory within 10% of torch's reserved "
                f"bytes, some of it under forward, the grown tensor live under grow_memory; "
                f"exits {rc}/{rcl} {err[-200:]} {errl[-200:]}"))
    return out


def c_b3(ctx):
    """B3: launches of a process without the library, counted by the libcuda uprobes."""
    if not ctx.facts.get("bpf"):
        return [("B3.uprobe_launches", None, "not run", "no BPF here (check bpf)")]
    outp = os.path.join(ctx.logs, "launches.out")
    if os.path.exists(outp):
        os.unlink(outp)
    env = ctx.base_env()
    extra = []
    if ctx.dry:
        fake_cuda = os.path.join(ctx.work, "fakecuda", "libcuda.so.1")
        os.makedirs(os.path.dirname(fake_cuda), exist_ok=True)
        shutil.copy(os.path.join(ctx.lib, "libkit_fake.so"), fake_cuda)
        env["PROFD_KIT_FAKE_LIBCUDA"] = fake_cuda
        extra = ["--libcuda", fake_cuda]
    secs = ctx.scale(8, 1.5)
    go = os.path.join(ctx.work, "launches.go")
    if os.path.exists(go):
        os.unlink(go)
    cmd = [ctx.py, os.path.join(HERE, "workload.py"), "launches", outp, str(secs), go] + \
        (["--fake"] if ctx.dry else [])
    app = ctx.spawn("b3-app", cmd, env=env)
    pid = None
    end = time.time() + min(60, ctx.remaining())
    while time.time() < end and pid is None and app.poll() is None:
        try:
            with open(outp) as f:
                w = f.readline().split()
                pid = int(w[1]) if len(w) == 2 else None
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    if pid is None:
        ctx.kill(app)
        raise Failed(f"the launch loop did not start: {tail(ctx.read('b3-app', 'err'))}")
    d = Daemon(ctx, "b3-profd", "--pid", str(pid), *extra)
    try:
        if not d.ready(30):
            raise Failed(f"profd did not serve: {tail(ctx.read('b3-profd', 'err'))}")
        # profd attaches the libcuda uprobes before its loop serves (daemon/main.c): a process
        # launching from now on is counted.
        open(go, "w").close()
        ctx.wait(app, secs + 60)
        time.sleep(1.5)   # the last launches reach the store
        d.ctl("b3-status", "status")
        rc, o, e = d.ctl("b3-launches", "dump", "flamegraph", "--pid", str(pid), "--value",
                         "launches", "--format", "folded")
    finally:
        d.stop()
    with open(outp) as f:
        n = next((int(ln.split()[1]) for ln in f if ln.startswith("launches ")), 0)
    got = sum(folded(o).values())
    ok = n > 0 and got >= 0.9 * n
    return [("B3.uprobe_launches", ok, f"{got} of {n} launches counted",
             f"profctl exit {rc} {e.strip()[-200:]}; pass at 90% or more")]
