# SPDX-License-Identifier: BSD-2-Clause
"""The device kit's workloads: what each check makes the GPU do, in the process CUDA injects
the probe (or libprofd_cupti) into. Run as `workload.py NAME [args] [--fake]`; with --fake the
GPU is fakegpu.FakeGpu over the fake libcupti (the dry run), else PyTorch on the real GPU.

Windows are marked in the probe's dump (probe_mark, "W" lines) with CLOCK_MONOTONIC times, so
the analysis (checks.py) reads the probe's records and the workload's intent from one file.
The last line on stdout is a JSON object of what the workload measured itself.
"""
import ctypes
import json
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from torchgpu import TorchGpu  # noqa: E402


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def mapped(pattern):
    """Paths of the objects mapped in this process whose base name starts with pattern."""
    seen = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6:
                path = parts[5].strip()
                if os.path.basename(path).startswith(pattern) and path not in seen:
                    seen.append(path)
    return seen


class Probe:
    """The probe's controls, when CUDA_INJECTION64_PATH names it; no-ops otherwise."""

    def __init__(self):
        self.lib = None
        path = os.environ.get("CUDA_INJECTION64_PATH", "")
        if os.environ.get("PROFD_PROBE_OUT") and path:
            self.lib = ctypes.CDLL(path)
            self.lib.probe_mark.argtypes = [ctypes.c_char_p]

    def mark(self, text):
        if self.lib:
            self.lib.probe_mark(text.encode())

    def flush(self, forced=False):
        if self.lib:
            self.lib.probe_flush(1 if forced else 0)

    def restart(self):
        return self.lib.probe_restart() if self.lib else -1

    def stop(self):
        if self.lib:
            self.lib.probe_stop()

    def enabled(self):
        return bool(self.lib and self.lib.probe_enabled())

    def wait_enabled(self, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            if self.enabled():
                return True
            time.sleep(0.05)
        return False

    def settle(self, gpu):
        """Let outstanding records reach the dump: sync, then flushes a period apart."""
        gpu.sync()
        # The fake GPU hands records over at the sync: no delivery to wait for.
        pause = 0.02 if getattr(gpu, "fake", False) else 0.3
        for _ in range(3):
            self.flush()
            time.sleep(pause)
        self.flush(forced=True)


def busy_pct(spans, window=None):
    """The union of [start, end) spans over the window (default: first start to last end)."""
    if not spans:
        return None
    spans = sorted(spans)
    lo, hi = window or (spans[0][0], max(e for _, e in spans))
    busy, cur_s, cur_e = 0, None, None
    for s, e in spans:
        s, e = max(s, lo), min(e, hi)
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    return 100.0 * busy / (hi - lo) if hi > lo else None


def make_gpu(fake):
    if fake:
        from fakegpu import FakeGpu
        return FakeGpu()
    return TorchGpu()


# ---- the workloads ------------------------------------------------------------------------

def w_versions(gpu, probe, args):
    """D0: what the process maps and which libcupti/cuptiGetVersion it has."""
    out = {}
    if isinstance(gpu, TorchGpu):
        import importlib.metadata as md
        t = gpu.torch
        out["torch"] = t.__version__
        out["torch_cuda"] = t.version.cuda
        out["dists"] = {d.metadata["Name"]: d.version for d in md.distributions()
                        if d.metadata["Name"] and ("cupti" in d.metadata["Name"].lower()
                                                   or d.metadata["Name"].lower()
                                                   in ("triton", "nvidia-cuda-runtime",
                                                       "nvidia-cuda-runtime-cu13"))}
    else:
        out["torch"] = None
    try:
        gpu.init()
        out["device"] = gpu.name
    except Exception as e:   # no driver, no device: the rest of D0 still says what is here
        out["cuda_error"] = f"{type(e).__name__}: {e}"[:300]
    cupti = mapped("libcupti")
    out["libcupti_mapped"] = cupti
    out["libcudart_mapped"] = mapped("libcudart")
    out["libcuda_mapped"] = mapped("libcuda.so")
    if cupti and "cuda_error" not in out:
        v = ctypes.c_uint32(0)
        lib = ctypes.CDLL(cupti[0])
        r = lib.cuptiGetVersion(ctypes.byref(v))
        out["cuptiGetVersion"] = v.value if r == 0 else f"error {r}"
    elif cupti:
        # Without a driver 13.2's cuptiGetVersion recurses until the stack overflows.
        out["cuptiGetVersion"] = "not asked: CUDA did not initialise"
    return out


def w_inject(gpu, probe, args):
    """D1: CUDA loads the injection library and the process maps which libcupti."""
    gpu.init()
    gpu.add_one()
    gpu.sync()
    time.sleep(1.5)   # the library's uplink thread logs its first attempt within a second
    return {"libcupti_mapped": mapped("libcupti"),
            "profd_cupti_mapped": mapped("libprofd_cupti")}


def w_corr(gpu, probe, args):
    """D3: one window per launch path, warmed up first (handles, workspaces, JIT)."""
    cases = [("add_one", gpu.add_one), ("mm", gpu.mm), ("conv2d", gpu.conv),
             ("triton", gpu.triton), ("memset", gpu.zeros)]
    errors = {}
    gpu.init()
    probe.wait_enabled()
    for name, op in cases:
        try:
            op()
            op()
            gpu.sync()
        except Exception as e:  # a path this machine lacks (Triton without a compiler)
            errors[name] = f"{type(e).__name__}: {e}"[:300]
            continue
        probe.mark(f"case {name} begin")
        op()
        gpu.sync()
        probe.mark(f"case {name} end")
    probe.settle(gpu)
    return {"errors": errors}


MEM_KEYS = ("reserved_bytes.all.allocated", "reserved_bytes.all.freed",
            "segment.all.allocated", "segment.all.freed")


def w_memory(gpu, probe, args):
    """
    Memory, part A: one window per allocating path (cudaMalloc, cudaMallocAsync, a new segment
    of the caching allocator), each allocation freed after its window. args[0] "expandable":
    only the caching allocator's path (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is set
    by the caller). The result has torch's segment counters over each window.
    """
    expandable = args[0] == "expandable"
    n = 64 << 20
    cases = [("cache_alloc", lambda: gpu.cache_alloc(96 << 20, expandable),
              lambda _: gpu.empty_cache())]
    if not expandable:
        cases = [("malloc", lambda: gpu.rt_malloc(n), gpu.rt_free),
                 ("malloc_async", lambda: gpu.rt_malloc_async(n), gpu.rt_free_async)] + cases
    errors, stats = {}, {}
    gpu.init()
    probe.wait_enabled()
    gpu.empty_cache()
    for name, alloc, free in cases:
        try:
            free(alloc())   # warm: the path's first call may set up pools and handles
            gpu.sync()
            gpu.empty_cache()
        except Exception as e:
            errors[name] = f"{type(e).__name__}: {e}"[:300]
            continue
        s0 = gpu.mem_stats()
        probe.mark(f"case {name} begin")
        p = alloc()
        gpu.sync()
        probe.mark(f"case {name} end")
        s1 = gpu.mem_stats()
        stats[name] = {k: s1.get(k, 0) - s0.get(k, 0) for k in MEM_KEYS}
        free(p)
        gpu.sync()
    probe.settle(gpu)
    return {"errors": errors, "stats": stats, "cudart": getattr(gpu, "cudart_path", None)}


def w_clock(gpu, probe, args):
    """D2: each kernel bracketed by CLOCK_MONOTONIC reads around launch and sync."""
    n_br, n_bulk = int(args[0]), int(args[1])
    gpu.init()
    if not probe.wait_enabled():
        return {"error": "the probe never enabled"}
    gpu.add_one()
    gpu.sync()
    probe.mark("brackets begin")
    for _ in range(n_br):
        m0 = mono_ns()
        gpu.add_one()
        gpu.sync()
        m1 = mono_ns()
        probe.mark(f"br {m0} {m1}")
    probe.mark("brackets end")
    for i in range(n_bulk):
        gpu.add_one()
        if i % 1000 == 999:
            gpu.sync()
    probe.settle(gpu)
    return {"brackets": n_br, "bulk": n_bulk}


def w_graph(gpu, probe, args):
    """D4: capture 10 kernels, replay in one CUPTI session, then in a second one."""
    replays = int(args[0])
    gpu.init()
    probe.wait_enabled()
    probe.mark("capture begin")
    g = gpu.graph_make(10)
    gpu.sync()
    probe.mark("capture end")
    for session in (1, 2):
        if session == 2:
            r = probe.restart()
            if r != 0:
                return {"error": f"probe_restart {r}"}
        probe.mark(f"session {session} begin")
        for _ in range(replays):
            gpu.graph_replay(g)
        gpu.sync()
        probe.mark(f"session {session} end")
        probe.settle(gpu)
    return {"replays": replays, "per_graph": 10}


def w_nvtx(gpu, probe, args):
    """D5: NVTX before CUDA init, nested ranges, a mark, a range on another thread."""
    main_tid = threading.get_native_id()
    gpu.nvtx_push("pre_init")
    gpu.nvtx_mark("pre_mark")
    gpu.nvtx_pop()
    no_device = os.environ.get("CUDA_VISIBLE_DEVICES") == ""
    if no_device:
        return {"no_device": True}
    gpu.init()
    probe.wait_enabled()
    probe.mark(f"tid main {main_tid}")
    gpu.nvtx_push("outer")
    gpu.nvtx_push("inner")
    gpu.add_one()
    gpu.nvtx_pop()
    gpu.nvtx_pop()
    gpu.nvtx_mark("point")
    worker = {}

    def other():
        worker["tid"] = threading.get_native_id()
        gpu.nvtx_push("thread_range")
        gpu.nvtx_pop()
    th = threading.Thread(target=other)
    th.start()
    th.join()
    probe.mark(f"tid worker {worker['tid']}")
    probe.settle(gpu)
    return {"main_tid": main_tid, "worker_tid": worker["tid"]}


def w_delivery(gpu, probe, args):
    """D6: long kernels with rare syncs, or a stream of small ones, for SECONDS."""
    mode, seconds = args[0], float(args[1])
    gpu.init()
    probe.wait_enabled()
    probe.mark(f"{mode} begin")
    end = time.time() + seconds
    launched = 0
    if mode == "long":
        last_sync = time.time()
        while time.time() < end:
            gpu.long_kernel(50)
            launched += 1
            if time.time() - last_sync >= 5:
                gpu.sync()
                last_sync = time.time()
            if launched % 8 == 0 and time.time() - last_sync < 5:
                time.sleep(0.35)   # stay about one kernel ahead of the GPU, never idle
    else:
        rate = float(args[2]) if len(args) > 2 else 10000
        t0 = time.time()
        while time.time() < end:
            k = min(int((time.time() - t0) * rate) - launched, 100)
            if k > 0:
                gpu.tiny(k)
                launched += k
            else:
                time.sleep(0.0005)
        gpu.sync()
    probe.mark(f"{mode} end")
    probe.settle(gpu)
    return {"launched": launched}


def w_kineto(gpu, probe, args):
    """D8: (a) torch.profiler running when the probe enables; (b) the profiler after it."""
    order = args[0]
    gpu.init()
    res = {}
    if order == "profiler-first":
        # The probe enables (PROFD_PROBE_DELAY_MS) while the profiler holds CUPTI: steps of
        # about 5 ms keep the profile going past it.
        def step():
            gpu.add_one()
            gpu.mm()
            time.sleep(0.002)
        res["profiler"] = gpu.profiler_steps(int(args[1]), step)
        return res
    probe.wait_enabled()
    probe.mark("before begin")
    for _ in range(200):
        gpu.add_one()
    gpu.sync()
    probe.mark("before end")
    probe.settle(gpu)   # these records reach the probe before the profiler starts
    res["profiler"] = gpu.profiler_steps(10)
    probe.mark("after begin")
    end = time.time() + float(args[1])
    n = 0
    while time.time() < end:
        gpu.add_one()
        n += 1
        if n % 100 == 0:
            gpu.sync()
    gpu.sync()
    probe.mark("after end")
    probe.settle(gpu)
    res["after_launches"] = n
    return res


PROC_NAMES = ("cuLaunchKernel", "cuLaunchKernelEx", "cuGraphLaunch")


def w_procaddr(gpu, probe, args):
    """
    D7: the addresses cudart and cuBLAS call through (cuGetProcAddress_v2, and
    cudaGetDriverEntryPointByVersion) against the exported symbols the uprobes sit on, for the
    legacy (flags 1) and per-thread (flags 2, the _ptsz symbols) default streams.
    """
    gpu.init()
    fake = not isinstance(gpu, TorchGpu)
    libcuda = ctypes.CDLL(os.environ["PROFD_KIT_FAKE_LIB"] if fake else "libcuda.so.1")
    cudart_path = None if fake else (mapped("libcudart") or [None])[0]
    cudart = ctypes.CDLL(cudart_path) if cudart_path else None
    libcuda.cuInit(0)
    res = {"libcuda": mapped("libcuda.so")[:1] or [os.environ.get("PROFD_KIT_FAKE_LIB")],
           "cudart": cudart_path, "symbols": {}}
    for base in PROC_NAMES:
        for flags, exported in ((1, base), (2, base + "_ptsz")):
            try:
                sym = ctypes.cast(getattr(libcuda, exported), ctypes.c_void_p).value
            except AttributeError:
                sym = None
            p, st = ctypes.c_void_p(), ctypes.c_int(0)
            r = libcuda.cuGetProcAddress_v2(base.encode(), ctypes.byref(p), 13000,
                                            ctypes.c_uint64(flags), ctypes.byref(st))
            row = {"dlsym": sym, "cuGetProcAddress": p.value if r == 0 else f"error {r}"}
            if cudart is not None:
                q = ctypes.c_void_p()
                r = cudart.cudaGetDriverEntryPointByVersion(base.encode(), ctypes.byref(q),
                                                            13000, ctypes.c_uint64(flags),
                                                            ctypes.byref(st))
                row["cudaGetDriverEntryPointByVersion"] = q.value if r == 0 else f"error {r}"
            res["symbols"][exported] = row
    return res


def w_bench(gpu, probe, args):
    """D9 without nvcc: ns per launch of the framework's smallest kernel (N [WAIT_S])."""
    n = int(args[0])
    gpu.init()
    time.sleep(float(args[1]) if len(args) > 1 else 0)   # a daemon attaches meanwhile
    gpu.tiny(100)
    gpu.sync()
    t0 = time.perf_counter_ns()
    gpu.tiny(n)
    gpu.sync()
    return {"ns_per_launch": (time.perf_counter_ns() - t0) / n, "launches": n}


# ---- libprofd_cupti against a daemon (library.py) ------------------------------------------

def lib_delivery(gpu, mode, secs, rate, say, k):
    """
    D6: 50 ms kernels (long) or small ones at RATE a second (small), a sync every 5 s. After
    each sync "kK MONO N": the first N kernels had ended by MONO (from CUDA events: every
    kernel's in long, every 100th's in small).
    """
    ref = gpu.clock_ref()
    marks, launched = [], 0
    t0 = last_sync = time.time()

    def sync():
        gpu.sync()
        for n, e in marks:
            say(f"k{k} {gpu.event_mono(ref, e)} {n}")
        marks.clear()
    while time.time() - t0 < secs:
        if mode == "long":
            gpu.long_kernel(50)
            launched += 1
            marks.append((launched, gpu.event_mark()))
            if launched % 8 == 0 and time.time() - last_sync < 5:
                time.sleep(0.35)   # stay about one kernel ahead of the GPU, never idle
        else:
            n = min(int((time.time() - t0) * rate) - launched, 100)
            if n > 0:
                gpu.tiny(n)
                launched += n
                marks.append((launched, gpu.event_mark()))
            else:
                time.sleep(0.0005)
        if time.time() - last_sync >= 5:
            sync()
            last_sync = time.time()
    sync()
    return {"launched": launched, "secs": time.time() - t0}


def w_libsteps(gpu, probe, args):
    """
    Steps run one by one for the kit (library.py) with libprofd_cupti injected: OUT GO STEP...
    Before step k it says "wait k" and waits for the file GO.k; each step is framed by
    "begin k NAME MONO" and "end k NAME MONO JSON". Steps: long:SECS and small:SECS:RATE (D6),
    graph:REPLAYS (D4), profiler:STEPS and profiler_hold:SECS (D8: until GO.k.stop).
    """
    out_path, go, steps = args[0], args[1], args[2:]
    gpu.init()
    gpu.add_one()
    gpu.sync()
    g = gpu.graph_make(10) if any(s.startswith("graph:") for s in steps) else None
    if any(s.startswith("long:") for s in steps):
        gpu.long_kernel(1)   # its calibration kernel, before any window counts records
    gpu.sync()
    f = open(out_path, "w")

    def say(line):
        f.write(line + "\n")
        f.flush()

    def wait(path, limit=180):
        end = time.time() + limit
        while not os.path.exists(path) and time.time() < end:
            time.sleep(0.02)
    say(f"pid {os.getpid()}")
    for k, step in enumerate(steps):
        say(f"wait {k}")
        wait(f"{go}.{k}")
        name, *a = step.split(":")
        say(f"begin {k} {name} {mono_ns()}")
        if name in ("long", "small"):
            res = lib_delivery(gpu, name, float(a[0]), float(a[1]) if a[1:] else 0, say, k)
        elif name == "graph":
            def replay_graph():
                for _ in range(int(a[0])):
                    gpu.graph_replay(g)
            replay_graph()
            # Only the fake can say what CUPTI saw (its call log); real CUPTI cannot.
            res = {"replays": int(a[0]), "cupti": getattr(gpu, "cupti_counts", dict)()}
        elif name == "profiler":
            res = gpu.profiler_steps(int(a[0]))
        elif name == "profiler_hold":
            end = time.time() + float(a[0])
            res = gpu.profiler_until(lambda: os.path.exists(f"{go}.{k}.stop")
                                     or time.time() > end, lambda: say("holding"))
        else:
            res = {"error": f"unknown step {name}"}
        gpu.sync()
        say(f"end {k} {name} {mono_ns()} {json.dumps(res)}")
    say(f"wait {len(steps)}")
    wait(f"{go}.{len(steps)}", 60)
    f.close()
    return {}


# ---- part B: a training loop --------------------------------------------------------------

def w_train(gpu, probe, args):
    """
    Part B (but B3): a training loop with a slow data loader. Writes "pid" then, per step, its compute
    time; when the file named by args[2] appears it runs torch.profiler over a few steps and
    stops. Functions are named for what the checks look for: load_batch (the loader), forward,
    and the loss.backward() line in train_step.
    """
    out_path, seconds, go_path = args[0], float(args[1]), args[2]
    torch_mode = isinstance(gpu, TorchGpu)
    if torch_mode:
        t = gpu.torch
        nn = t.nn
        model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                              nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(), nn.Flatten(),
                              nn.Linear(32 * 32 * 32, 1024), nn.ReLU(),
                              nn.Linear(1024, 10)).cuda()
        opt = t.optim.SGD(model.parameters(), lr=0.01)
    held = []

    def load_batch():
        # The slow loader: the GPU starves while the host sleeps and decodes.
        time.sleep(0.03)
        end = time.perf_counter() + 0.01
        while time.perf_counter() < end:
            pass
        if torch_mode:
            return (t.randn(64, 3, 32, 32).cuda(non_blocking=True),
                    t.randint(0, 10, (64,)).cuda(non_blocking=True))
        return None, None

    def forward(x):
        if torch_mode:
            return model(x)
        if not gpu.cache:
            gpu.cache_alloc(2 << 20)   # the caching allocator's segment for activations
        gpu.mm()
        gpu.conv()
        return None

    def train_step(x, y):
        gpu.nvtx_push("train_step")
        if torch_mode:
            opt.zero_grad()
            loss = t.nn.functional.cross_entropy(forward(x), y)
            loss.backward()
            opt.step()
        else:
            forward(x)
            gpu.add_one()   # backward's kernels
        gpu.nvtx_pop()

    def grow_memory():
        # A fresh cudaMalloc the caching allocator cannot serve from its segments.
        if torch_mode:
            held.append(t.empty(256 << 20, dtype=t.uint8, device="cuda"))
        else:
            gpu.cache_alloc(256 << 20, keep=True)

    # The line of train_step whose kernels are the backward pass's, for the stack check.
    want = "loss.backward()" if torch_mode else "# backward's kernels"
    with open(__file__) as src:
        back = next(i for i, ln in enumerate(src, 1) if ln.strip().startswith(
            want if torch_mode else "gpu.add_one()") and want in ln)
    gpu.init()
    with open(out_path, "w") as f:
        f.write(f"pid {os.getpid()}\n")
        f.write("lines " + json.dumps({"backward": back}) + "\n")
        f.flush()
        start = time.time()
        grew = False
        mem0 = gpu.mem_stats()
        while time.time() - start < seconds and not os.path.exists(go_path):
            x, y = load_batch()
            c0 = time.perf_counter_ns()
            train_step(x, y)
            gpu.sync()
            c1 = time.perf_counter_ns() - c0
            # The caching allocator's cudaMalloc total and segment counts (B.memory).
            ms = gpu.mem_stats()
            f.write(f"step {mono_ns()} {c1} " + " ".join(str(ms.get(k, 0)) for k in MEM_KEYS)
                    + "\n")
            f.flush()
            if not grew and os.path.exists(go_path + ".grow"):
                # Cached segments go back, so the next forward passes allocate theirs anew
                # while profd collects; then a tensor no segment can hold.
                gpu.empty_cache()
                grow_memory()
                grew = True
                f.write(f"grew {256 << 20}\n")
        res = {}
        mem1 = gpu.mem_stats()
        res["memory"] = {k: mem1.get(k, 0) - mem0.get(k, 0) for k in MEM_KEYS}
        res["profiler"] = gpu.profiler_steps(20, lambda: train_step(*load_batch()))
        f.write("result " + json.dumps(res) + "\n")
    return {}


def w_launches(gpu, probe, args):
    """
    B3: launches by the framework for SECONDS, counted by the workload itself, once the file
    GO exists (the daemon has attached its uprobes by then; at most a minute's wait).
    """
    out_path, seconds, go = args[0], float(args[1]), args[2]
    gpu.init()
    with open(out_path, "w") as f:
        f.write(f"pid {os.getpid()}\n")
        f.flush()
        end = time.time() + 60
        while not os.path.exists(go) and time.time() < end:
            time.sleep(0.05)
        # 2000 launches a second: under the daemon's 5000 launch records a second per process
        # (daemon/sampler.h SAMPLER_LAUNCH_RATE), so every launch the uprobes see is counted.
        n, t0 = 0, time.time()
        while time.time() - t0 < seconds:
            if n < (time.time() - t0) * 2000:
                gpu.tiny(10)
                n += 10
                gpu.sync()
            else:
                time.sleep(0.001)
        f.write(f"launches {n}\n")
    return {"launches": n}


WORKLOADS = {"versions": w_versions, "inject": w_inject, "corr": w_corr, "clock": w_clock,
             "graph": w_graph, "memory": w_memory, "nvtx": w_nvtx, "delivery": w_delivery,
             "kineto": w_kineto, "bench": w_bench, "libsteps": w_libsteps,
             "procaddr": w_procaddr, "train": w_train, "launches": w_launches}


def main():
    argv = sys.argv[1:]
    fake = "--fake" in argv
    argv = [a for a in argv if a != "--fake"]
    if not argv or argv[0] not in WORKLOADS:
        print(f"usage: workload.py {{{'|'.join(WORKLOADS)}}} [ARGS] [--fake]", file=sys.stderr)
        return 2
    gpu = make_gpu(fake)
    probe = Probe()
    res = WORKLOADS[argv[0]](gpu, probe, argv[1:])
    probe.stop()
    print(json.dumps(res, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
