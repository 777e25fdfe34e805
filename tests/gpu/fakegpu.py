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
