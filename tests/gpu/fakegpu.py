# SPDX-License-Identifier: BSD-2-Clause
"""The dry run's GPU: the operations the kit's workloads use (workload.py), played over the
fake libcupti (tests/fixtures/cupti_fake) through kit_fake.so. Each operation fires the
callbacks CUDA would (a runtime call with a nested driver call sharing its correlation id, a
graph launch with one id for its kernels) and queues the records; a synchronisation hands them
over, as CUPTI completes a buffer. Kernels "run" inside the call that launched them, so the
clock checks see them inside the host's brackets.

PROFD_KIT_FAKE_FAULT makes the fake lie the way real CUPTI might, so the kit's own test can see
a check fail: "corr" gives each kernel the nested driver call's id, not the runtime call's;
"clock" stamps kernels a second late; "zero" gives every tenth kernel zero timestamps; "hang" never returns from a matmul.
"""
import ctypes
import os
import threading
import time

RUNTIME, DRIVER = 2, 1
ENTER, EXIT = 0, 1
CB_LAUNCH = 505         # __cudaLaunchKernel_v13000
CB_GRAPH = 311          # cudaGraphLaunch_v10000
CB_MEMSET = 51          # cudaMemsetAsync_v3020
CB_CU_LAUNCH = 307      # cuLaunchKernel
CB_CU_LAUNCH_EX = 652   # cuLaunchKernelEx
CB_CU_GRAPH = 514       # cuGraphLaunch
CB_CU_MEMSET = 216      # cuMemsetD8Async
CB_MALLOC = 20          # cudaMalloc_v3020
CB_MALLOC_ASYNC = 373   # cudaMallocAsync_v11020
CB_FREE = 22            # cudaFree_v3020
CB_CU_MEM_ALLOC = 243   # cuMemAlloc_v2
CB_CU_MEM_ALLOC_ASYNC = 598  # cuMemAllocAsync
CB_CU_MEM_FREE = 245    # cuMemFree_v2
MEM_ALLOC, MEM_RELEASE = 1, 2
KIND_MEMORY2 = 49
MARKER_INSTANT, MARKER_START, MARKER_END = 1, 2, 4
KIND_CONCURRENT_KERNEL = 10


def mono_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class FakeGpu:
    name = "fake GPU (libcupti_fake)"
    fake = True

    def __init__(self):
        fake = os.environ["PROFD_KIT_FAKE_CUPTI"]
        self.cupti = ctypes.CDLL(fake, mode=ctypes.RTLD_GLOBAL)
        self.kit = ctypes.CDLL(os.environ["PROFD_KIT_FAKE_LIB"], mode=ctypes.RTLD_GLOBAL)
        self.kit.kit_fake_kernel.argtypes = [ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64,
                                             ctypes.c_uint32, ctypes.c_uint64, ctypes.c_char_p]
        self.kit.kit_fake_memset.argtypes = [ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64,
                                             ctypes.c_uint64]
        self.kit.kit_fake_memory.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.c_uint64,
                                             ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint32]
        self.kit.kit_fake_marker.argtypes = [ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                                             ctypes.c_uint64, ctypes.c_char_p]
        self.kit.kit_fake_callback.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_int,
                                               ctypes.c_uint32]
        self.fault = os.environ.get("PROFD_KIT_FAKE_FAULT", "")
        self.corr = 100
        self.graph_id = 0
        self.nkernels = 0
        self.names = {}          # keeps the names' bytes alive until delivered
        self.nvtx_id = 0
        self.nvtx_stack = []
        self.lock = threading.Lock()
        self.inited = False
        self.nvtx_inited = False
        self.spans = None        # kernel spans while "torch.profiler" runs
        self.next_addr = 0x7f0000000000
        self.allocs = {}         # address -> bytes, what "cudaMalloc" handed out
        # torch.cuda.memory_stats()'s counters the checks compare with (the caching allocator).
        self.stats = {"reserved_bytes.all.allocated": 0, "reserved_bytes.all.freed": 0,
                      "segment.all.allocated": 0, "segment.all.freed": 0}
        self.cache = []          # segments the "caching allocator" holds unused
        self.kept = []           # and those in use
        cuda = os.environ.get("PROFD_KIT_FAKE_LIBCUDA")
        # A libcuda.so.1 whose launch functions the daemon's uprobes watch (B3).
        self.libcuda = ctypes.CDLL(cuda) if cuda else None

    # ---- CUDA's part ----------------------------------------------------------------------
    def init(self):
        """CUDA initialisation: the injection library is loaded and its entry point called."""
        if self.inited:
            return
        self.inited = True
        inj = os.environ.get("CUDA_INJECTION64_PATH")
        if inj:
            lib = ctypes.CDLL(inj)
            lib.InitializeInjection()

    def _name(self, s):
        b = self.names.get(s)
        if b is None:
            b = self.names[s] = ctypes.create_string_buffer(s.encode())
        return b

    def _collecting(self):
        return self.kit.kit_fake_kind_enabled(KIND_CONCURRENT_KERNEL) != 0

    def _kernel(self, corr, name, ns=2000, graph=0, node=0):
        t0 = mono_ns()
        deadline = t0 + ns
        while mono_ns() < deadline:
            pass
        t1 = mono_ns()
        self.nkernels += 1
        if self.spans is not None:
            self.spans.append((t0, t1))
        start, end = t0, t1
        if self.fault == "clock":
            start, end = t0 + 1_000_000_000, t1 + 1_000_000_000
        if self.fault == "zero" and self.nkernels % 10 == 0:
            start = end = 0
        if self._collecting():
            self.kit.kit_fake_kernel(corr, start, end, graph, node,
                                     ctypes.cast(self._name(name), ctypes.c_char_p))

    def _call(self, rt_cbid, drv_cbid, body):
        """A runtime call with its nested driver call; body(corr) runs the GPU work."""
        with self.lock:
            self.corr += 1
            corr = self.corr
            drv = corr + 1 if self.fault == "corr" else corr
            if self.fault == "corr":
                self.corr += 1
        cb = self.kit.kit_fake_callback
        if rt_cbid:
            cb(RUNTIME, rt_cbid, ENTER, corr)
        cb(DRIVER, drv_cbid, ENTER, drv)
        body(drv if self.fault == "corr" else corr)
        cb(DRIVER, drv_cbid, EXIT, drv)
        if rt_cbid:
            cb(RUNTIME, rt_cbid, EXIT, corr)

    def sync(self):
        self.init()
        self.kit.kit_fake_deliver()

    # ---- the workloads' operations ---------------------------------------------------------
    def add_one(self):
        self.init()
        if self.libcuda:
            self.libcuda.cuLaunchKernel()
        self._call(CB_LAUNCH, CB_CU_LAUNCH, lambda c: self._kernel(c, "vectorized_elementwise"))

    def mm(self):
        self.init()
        if self.fault == "hang":
            time.sleep(3600)
        self._call(0, CB_CU_LAUNCH_EX, lambda c: self._kernel(c, "sm90_xmma_gemm", 20000))

    def conv(self):
        self.init()
        self._call(0, CB_CU_LAUNCH_EX, lambda c: self._kernel(c, "cudnn_conv_fprop", 20000))

    def triton(self):
        self.init()
        self._call(0, CB_CU_LAUNCH, lambda c: self._kernel(c, "triton_add_kernel"))

    def zeros(self):
        self.init()

        def body(c):
            t0 = mono_ns()
            if self._collecting():
                self.kit.kit_fake_memset(c, t0, mono_ns() + 1000, 4096)
        self._call(CB_MEMSET, CB_CU_MEMSET, body)

    def tiny(self, n=1):
        for _ in range(n):
            self.add_one()

    def long_kernel(self, ms):
        self.init()
        self._call(CB_LAUNCH, CB_CU_LAUNCH,
                   lambda c: self._kernel(c, "sleep_kernel", int(ms * 1e6)))

    def graph_make(self, k=10):
        self.init()
        self.graph_id += 1
        # Capture: launches fire callbacks and never get a record.
        for _ in range(k):
            self._call(CB_LAUNCH, CB_CU_LAUNCH, lambda c: None)
        return (self.graph_id, k)

    def graph_replay(self, g):
        gid, k = g

        def body(c):
            for n in range(k):
                self._kernel(c, "graph_kernel", 1000, graph=gid, node=n + 1)
        self._call(CB_GRAPH, CB_CU_GRAPH, body)

    def _nvtx_init(self):
        """NVTX's first call loads NVTX_INJECTION64_PATH and calls its entry point."""
        if self.nvtx_inited:
            return
        self.nvtx_inited = True
        path = os.environ.get("NVTX_INJECTION64_PATH")
        if path:
            table = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint32)(lambda i: None)
            self._nvtx_table = table
            ctypes.CDLL(path).InitializeInjectionNvtx2(table)

    def nvtx_push(self, name):
        self._nvtx_init()
        self.nvtx_id += 1
        self.nvtx_stack.append((self.nvtx_id, name))
        if self.inited and self._collecting():
            self.kit.kit_fake_marker(MARKER_START, self.nvtx_id, threading.get_native_id(),
                                     mono_ns(), ctypes.cast(self._name(name), ctypes.c_char_p))

    def nvtx_pop(self):
        mid, _ = self.nvtx_stack.pop()
        if self.inited and self._collecting():
            self.kit.kit_fake_marker(MARKER_END, mid, threading.get_native_id(), mono_ns(),
                                     None)

    def nvtx_mark(self, name):
        self._nvtx_init()
        self.nvtx_id += 1
        if self.inited and self._collecting():
            self.kit.kit_fake_marker(MARKER_INSTANT, self.nvtx_id, threading.get_native_id(),
                                     mono_ns(), ctypes.cast(self._name(name), ctypes.c_char_p))

    # ---- device memory (MEMORY2 records on the allocating call's id) -----------------------
    def _mem(self, op, c, addr, n, stream=0):
        if self.kit.kit_fake_kind_enabled(KIND_MEMORY2):
            self.kit.kit_fake_memory(op, c, addr, n, mono_ns(), stream)

    def _malloc(self, rt, drv, n, stream=0):
        self.init()
        addr = self.next_addr
        self.next_addr += (n + 0xfffff) & ~0xfffff
        self.allocs[addr] = n
        self._call(rt, drv, lambda c: self._mem(MEM_ALLOC, c, addr, n, stream))
        return addr

    def rt_malloc(self, n):
        return self._malloc(CB_MALLOC, CB_CU_MEM_ALLOC, n)

    def rt_malloc_async(self, n):
        return self._malloc(CB_MALLOC_ASYNC, CB_CU_MEM_ALLOC_ASYNC, n, stream=7)

    def rt_free(self, addr):
        n = self.allocs.pop(addr)
        self._call(CB_FREE, CB_CU_MEM_FREE, lambda c: self._mem(MEM_RELEASE, c, addr, n))

    rt_free_async = rt_free

    def cache_alloc(self, n, expandable=False, keep=False):
        """The caching allocator's new segment: cudaMalloc, or with expandable segments
        cuMemCreate/cuMemMap (no traced call: the record's id is an untraced driver call's).
        keep: a segment in use, which empty_cache leaves alone."""
        if expandable:
            self.init()
            with self.lock:
                self.corr += 1
                c = self.corr
            addr = self.next_addr
            self.next_addr += (n + 0xfffff) & ~0xfffff
            self.allocs[addr] = n
            # CUPTI calls back only for enabled calls, and cuMemCreate is none of them.
            self._mem(MEM_ALLOC, c, addr, n)
        else:
            addr = self.rt_malloc(n)
        (self.kept if keep else self.cache).append(addr)
        self.stats["reserved_bytes.all.allocated"] += n
        self.stats["segment.all.allocated"] += 1
        return addr

    def empty_cache(self):
        for addr in self.cache:
            self.stats["reserved_bytes.all.freed"] += self.allocs.get(addr, 0)
            self.stats["segment.all.freed"] += 1
            self.rt_free(addr)
        self.cache = []

    def mem_stats(self):
        return dict(self.stats)

    def cupti_counts(self):
        """CUPTI sessions and kernel-kind disables so far (the fake keeps a call log)."""
        s, d = ctypes.c_uint(), ctypes.c_uint()
        self.kit.kit_fake_cupti_counts(ctypes.byref(s), ctypes.byref(d))
        return {"sessions": s.value, "kernel_disables": d.value}

    def clock_ref(self):
        return (None, mono_ns())

    def event_mark(self):
        return mono_ns()     # the fake's kernels ran inside their launch

    def event_mono(self, ref, e):
        return e

    def profiler_until(self, stop, said):
        """torch.profiler's effect on CUPTI, then steps until stop()."""
        self.kit.kit_fake_foreign_client()
        n = k = 0
        while not stop() or n < 10:
            self.add_one()
            self.sync()
            n += 1
            k += 1
            if n == 1:
                said()
            time.sleep(0.01)
        return {"steps": n, "kernels": k}

    def profiler_steps(self, steps, step=None):
        """torch.profiler's effect on CUPTI (kit_fake_foreign_client), then the steps."""
        from workload import busy_pct
        self.kit.kit_fake_foreign_client()
        self.spans = []
        for _ in range(steps):
            if step:
                step()
            else:
                self.add_one()
            self.sync()
        spans, self.spans = self.spans, None
        return {"kernels": len(spans), "busy_pct": busy_pct(spans)}
