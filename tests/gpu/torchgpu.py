# SPDX-License-Identifier: BSD-2-Clause
"""The device run's GPU for the kit's workloads (workload.py): the operations each check makes
the GPU do, with PyTorch on the real GPU (and Triton, and cudart's own calls through ctypes).
fakegpu.FakeGpu plays the same operations in the dry run."""
import ctypes
import time


class TorchGpu:
    """The operations on the real GPU, with PyTorch (and Triton for one launch path)."""

    def __init__(self):
        import torch
        self.torch = torch
        self.name = None
        self.x = None
        self.triton_kernel = None
        self.sleep_cycles = None

    def init(self):
        t = self.torch
        if self.x is None:
            self.x = t.ones(1 << 20, device="cuda")
            self.a = t.randn(4096, 4096, device="cuda")
            self.b = t.randn(4096, 4096, device="cuda")
            self.img = t.randn(16, 64, 56, 56, device="cuda")
            self.w = t.randn(64, 64, 3, 3, device="cuda")
            self.name = t.cuda.get_device_name(0)
            t.cuda.synchronize()

    def sync(self):
        self.torch.cuda.synchronize()

    def add_one(self):
        self.init()
        self.x.add_(1)

    def mm(self):
        self.init()
        self.torch.mm(self.a, self.b)

    def conv(self):
        self.init()
        self.torch.nn.functional.conv2d(self.img, self.w, padding=1)

    def triton(self):
        self.init()
        if self.triton_kernel is None:
            import triton
            import triton.language as tl

            @triton.jit
            def add_kernel(x_ptr, n, BLOCK: tl.constexpr):
                off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
                m = off < n
                tl.store(x_ptr + off, tl.load(x_ptr + off, mask=m) + 1, mask=m)
            self.triton_kernel = add_kernel
        n = self.x.numel()
        self.triton_kernel[((n + 1023) // 1024,)](self.x, n, BLOCK=1024)

    def zeros(self):
        self.init()
        self.torch.zeros(1 << 20, device="cuda")

    def tiny(self, n=1):
        self.init()
        for _ in range(n):
            self.x.add_(1)

    def long_kernel(self, ms):
        self.init()
        if self.sleep_cycles is None:
            # Calibrate torch.cuda._sleep (a spin of N cycles) to the wanted length.
            s, e = self.torch.cuda.Event(True), self.torch.cuda.Event(True)
            s.record()
            self.torch.cuda._sleep(10_000_000)
            e.record()
            e.synchronize()
            self.sleep_cycles = int(10_000_000 / max(s.elapsed_time(e), 0.01))
        self.torch.cuda._sleep(int(self.sleep_cycles * ms))

    def clock_ref(self):
        """A CUDA event synchronised now, with the CLOCK_MONOTONIC time it completed at."""
        self.init()
        e = self.torch.cuda.Event(enable_timing=True)
        e.record()
        e.synchronize()
        return (e, time.clock_gettime_ns(time.CLOCK_MONOTONIC))

    def event_mark(self):
        e = self.torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def event_mono(self, ref, e):
        """When the work before event e ended, on CLOCK_MONOTONIC (e synchronised)."""
        return ref[1] + int(ref[0].elapsed_time(e) * 1e6)

    def profiler_until(self, stop, said):
        """torch.profiler over steps until stop() (said() once it runs): its kernels."""
        from torch.profiler import ProfilerActivity, profile
        self.sync()
        n = 0
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            while not stop() or n < 10:
                self.add_one()
                self.mm()
                self.sync()
                n += 1
                if n == 1:
                    said()
                time.sleep(0.01)
        k = sum(1 for e in prof.events() if "CUDA" in str(getattr(e, "device_type", ""))
                and e.time_range.elapsed_us() > 0)
        return {"steps": n, "kernels": k}

    def graph_make(self, k=10):
        t = self.torch
        self.init()
        s = t.cuda.Stream()
        s.wait_stream(t.cuda.current_stream())
        with t.cuda.stream(s):
            for _ in range(3):
                self.x.add_(1)
        t.cuda.current_stream().wait_stream(s)
        g = t.cuda.CUDAGraph()
        with t.cuda.graph(g):
            for _ in range(k):
                self.x.add_(1)
        return g

    def graph_replay(self, g):
        g.replay()

    # ---- device memory: cudart's own calls, and the caching allocator's ------------------
    def _cudart(self):
        if getattr(self, "cudart", None) is None:
            from workload import mapped
            self.init()
            path = (mapped("libcudart") or ["libcudart.so.13"])[0]
            self.cudart = ctypes.CDLL(path)
            self.cudart_path = path
        return self.cudart

    def rt_malloc(self, n):
        p = ctypes.c_void_p()
        r = self._cudart().cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n))
        if r:
            raise RuntimeError(f"cudaMalloc: error {r}")
        return p.value

    def rt_malloc_async(self, n):
        p = ctypes.c_void_p()
        r = self._cudart().cudaMallocAsync(ctypes.byref(p), ctypes.c_size_t(n), None)
        if r:
            raise RuntimeError(f"cudaMallocAsync: error {r}")
        return p.value

    def rt_free(self, p):
        self._cudart().cudaFree(ctypes.c_void_p(p))

    def rt_free_async(self, p):
        self._cudart().cudaFreeAsync(ctypes.c_void_p(p), None)

    def cache_alloc(self, n, expandable=False):
        """A tensor the caching allocator needs a new segment for (the cache emptied first)."""
        self.init()
        self.held = getattr(self, "held", [])
        self.held.append(self.torch.empty(n, dtype=self.torch.uint8, device="cuda"))

    def empty_cache(self):
        self.held = []
        self.torch.cuda.empty_cache()

    def mem_stats(self):
        return dict(self.torch.cuda.memory_stats())

    def nvtx_push(self, name):
        self.torch.cuda.nvtx.range_push(name)

    def nvtx_pop(self):
        self.torch.cuda.nvtx.range_pop()

    def nvtx_mark(self, name):
        self.torch.cuda.nvtx.mark(name)

    def profiler_steps(self, steps, step=None):
        """
        torch.profiler over steps (step(): one step of the caller's work, default an add and
        a matmul): its kernels' busy share of the window.
        """
        from torch.profiler import ProfilerActivity, profile
        self.sync()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                if step:
                    step()
                else:
                    self.add_one()
                    self.mm()
            self.sync()
        spans = []
        for e in prof.events():
            dt = getattr(e, "device_type", None)
            if dt is not None and "CUDA" in str(dt) and e.time_range.elapsed_us() > 0:
                spans.append((e.time_range.start, e.time_range.end))
        from workload import busy_pct
        return {"kernels": len(spans), "busy_pct": busy_pct(spans)}
