# SPDX-License-Identifier: BSD-2-Clause
"""NVTX_INJECTION64_PATH set for a job on a node without the CUDA driver, as fleets set it for
every job: PyPI's torch (its CUDA build, which runs on the CPU) calls NVTX, and the library must
leave NVTX a no-op instead of handing it to the wheel's libcupti, which without libcuda.so.1
recurses until the stack overflows (SIGSEGV at the first range_push).

Runs the real wheel from scripts/torch-venv, which makes the venv on first use (about 70 s and
5 GB from the package registry); where that fails outside CI, the test is skipped. Once with the
NVTX variable alone, once with CUDA_INJECTION64_PATH too (verbose: the one line saying why), and
once with the CUDA toolkit's stub libcuda installed as libcuda.so.1, as build images do.
"""
import ctypes
import os
import signal
import subprocess
import tempfile

from profd_e2e import SKIP, check, fail, log, skip

LIB = os.environ.get("PROFD_CUPTI_SO")
STUB = os.environ.get("PROFD_CUDA_STUB")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
if not LIB or not os.path.exists(LIB):
    fail(f"libprofd_cupti ({LIB}) is not built")

WORKLOAD = r"""
import threading
import torch
nvtx = torch.cuda.nvtx
got = [nvtx.range_push("outer"), nvtx.range_push("inner")]
nvtx.mark("mark")
a = torch.ones(64, 64)
mm = (a @ a).relu().sum().item()
got.append(nvtx.range_pop())
with nvtx.range("conv"):
    conv = torch.nn.functional.conv1d(torch.ones(1, 1, 8), torch.ones(1, 1, 3)).sum().item()
got.append(nvtx.range_pop())
def second_thread():
    got.append(nvtx.range_push("thread"))
    got.append(nvtx.range_pop())
t = threading.Thread(target=second_thread)
t.start()
t.join()
print("nvtx", *got)
print("ops", mm, conv)
print("cuda", torch.cuda.is_available())
"""
# 64x64 ones squared: every element is 64; conv of eight ones with a kernel of three ones: six
# outputs of 3.
OPS = "ops 262144.0 18.0"
# What nvtxRangePush/Pop return when no tool took NVTX (NVTX_NO_PUSH_POP_TRACKING in
# nvToolsExt.h): the calls went nowhere, they were not half handed to CUPTI.
NO_OP = "nvtx -2 -2 -2 -2 -2 -2"
LINE = "profd_cupti: NVTX is not collected: "


def driver_loads():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


# Not skip(): a CI machine with a GPU is no failure of this test, it only cannot make the case.
if driver_loads():
    log("SKIP: this machine has a CUDA driver: the case without one cannot be made here")
    raise SystemExit(SKIP)

venv = subprocess.run([os.path.join(ROOT, "scripts", "torch-venv")], capture_output=True,
                      text=True, timeout=1200)
if venv.returncode != 0:
    skip(f"no torch venv (a package registry is needed to make it): {venv.stderr.strip()[-300:]}")
python = venv.stdout.strip()


def run(what, extra_env, reason):
    """Runs the workload with the library injected; reason: the text the one verbose line must
    carry, or None when the run is not verbose and stderr must say nothing of the library."""
    env = dict(os.environ, NVTX_INJECTION64_PATH=LIB, **extra_env)
    for k in ("PROFD_CUPTI_VERBOSE", "PROFD_CUPTI_QUIET", "CUDA_INJECTION64_PATH"):
        if k not in extra_env:
            env.pop(k, None)
    if reason:
        env["PROFD_CUPTI_VERBOSE"] = "1"
    p = subprocess.run([python, "-c", WORKLOAD], env=env, capture_output=True, text=True,
                       timeout=300)
    log(f"--- {what}: exit {p.returncode}\n{p.stdout}{p.stderr[-2000:]}")
    if p.returncode < 0:
        fail(f"{what}: killed by {signal.Signals(-p.returncode).name}")
    check(p.returncode == 0, f"{what}: exit 0")
    out = p.stdout.splitlines()
    check(OPS in out, f"{what}: the torch ops computed what they should ({OPS})")
    check(NO_OP in out and "cuda False" in out,
          f"{what}: NVTX stayed a no-op ({NO_OP}) and CUDA is not available")
    ours = [line for line in p.stderr.splitlines() if line.startswith("profd_cupti:")]
    if reason is None:
        check(ours == [], f"{what}: not verbose, the library says nothing ({ours})")
    else:
        check(len(ours) == 1 and ours[0].startswith(LINE) and reason in ours[0],
              f"{what}: verbose, one line says why ({reason}): {ours}")


run("NVTX_INJECTION64_PATH", {}, None)
run("NVTX_INJECTION64_PATH and CUDA_INJECTION64_PATH", {"CUDA_INJECTION64_PATH": LIB},
    "no CUDA driver (libcuda.so.1: ")
if STUB and os.path.exists(STUB):
    stub_dir = tempfile.mkdtemp(prefix="profd-nvtx-stub-")
    os.symlink(STUB, os.path.join(stub_dir, "libcuda.so.1"))
    ld_path = ":".join(filter(None, [stub_dir, os.environ.get("LD_LIBRARY_PATH")]))
    run("the toolkit's stub as libcuda.so.1", {"LD_LIBRARY_PATH": ld_path},
        "libcuda.so.1 is not a working CUDA driver (cuDriverGetVersion: error 34)")
else:
    log(f"the stub libcuda case is not run: no stub library ({STUB})")
log("PASS")
