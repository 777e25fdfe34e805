#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
# Whole stacks through numpy's wheel from PyPI (the python of `scripts/torch-venv --numpy-only`,
# made on first use): a matmul loop on one BLAS thread (OPENBLAS_NUM_THREADS=1), nearly all of
# its time in OpenBLAS's dgemm kernel, which no FDE covers and which uses rbp as a general
# register, sampled by profd --pid. Over the last WINDOW seconds, the main thread's stacks must
# reach their root (no [truncated] root frame) and pass through the Python line, numpy's C entry
# and an OpenBLAS dgemm frame.
import os
import subprocess
import tempfile
import time
from profd_e2e import *

# Issue 22, "What must hold" 3: on a numpy matmul loop (numpy's wheel, OPENBLAS_NUM_THREADS=1)
# >= 90% whole through the Python line, numpy's C entry and the BLAS kernel.
MIN_WHOLE = 0.90
MIN_THROUGH = 0.90
RUN = 10      # seconds the loop runs under profd
WINDOW = 6    # the last seconds looked at: a process's first samples precede its tables
MIN_SAMPLES = 50

WORK = '''import sys
import numpy as np

def matmul(a, b):
    return a @ b

rng = np.random.default_rng(0)
a = rng.standard_normal((384, 384))
b = rng.standard_normal((384, 384))
matmul(a, b)
print("ready", flush=True)
sys.stdin.readline()
while True:
    matmul(a, b)
'''

NUMPY_ENTRY = ("ufunc_generic_fastcall", "ufunc_generic_call", "array_matrix_multiply")


def whole(frames):
    """profd marks a walk that stopped short of the stack's bottom with a [truncated] root."""
    return bool(frames) and "[truncated]" not in frames


def through(frames):
    return (whole(frames) and
            any(f.startswith("matmul (") and "numpy_matmul.py:" in f for f in frames) and
            any(f.split(".")[0] in NUMPY_ENTRY for f in frames) and
            any(f.startswith("dgemm_") or "cblas_dgemm" in f for f in frames))


# The checks accept the stack a whole walk gives (its shape from perf --call-graph dwarf).
EXAMPLE = ["_start", "__libc_start_main", "__libc_start_call_main", "Py_BytesMain",
           "<module> (numpy_matmul.py:14)", "matmul (numpy_matmul.py:5)",
           "PyNumber_MatrixMultiply", "ufunc_generic_fastcall",
           "PyUFunc_GeneralizedFunctionInternal", "DOUBLE_matmul",
           "DOUBLE_matmul_matrixmatrix.isra.0", "scipy_cblas_dgemm64_", "dgemm_nn",
           "dgemm_kernel_SKYLAKEX"]
check(through(EXAMPLE) and not through(["[truncated]"] + EXAMPLE[4:]) and
      not through(EXAMPLE[:6] + EXAMPLE[-2:]), "the checks tell a whole stack from a cut one")

require_root()
venv = subprocess.run([os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "scripts", "torch-venv"), "--numpy-only"],
                      capture_output=True, text=True, timeout=600)
python = venv.stdout.strip()
if venv.returncode or not os.access(python, os.X_OK):
    skip(f"scripts/torch-venv --numpy-only failed: {venv.stderr.strip()[-500:]}")

tmp = tempfile.mkdtemp(prefix="profd-numpy-")
os.chmod(tmp, 0o755)
script = os.path.join(tmp, "numpy_matmul.py")
with open(script, "w") as f:
    f.write(WORK)
p = subprocess.Popen([python, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                     env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
try:
    line = p.stdout.readline().strip()
    check(line == "ready", f"the numpy loop started ({line!r})")
    with Daemon("--pid", str(p.pid), "--frequency", "199") as d:
        p.stdin.write("\n")
        p.stdin.flush()
        time.sleep(RUN)
        f = d.folded("--pid", str(p.pid), "--tid", str(p.pid), "--since", f"{WINDOW}s")
        log(d.ctl("status").stdout)
finally:
    p.kill()
    p.wait()

stacks = {s: c for s, c in f.items()}
frames = {s: [x for x in s.split(";") if not x.endswith("_[k]")] for s in stacks}
n = total(f)
log(f"{n} samples of the main thread in the last {WINDOW} s; top:")
for s, c in sorted(stacks.items(), key=lambda kv: -kv[1])[:6]:
    log(f"  {c:6d} {s}")
check(n >= MIN_SAMPLES, f"at least {MIN_SAMPLES} samples (got {n})")
w = sum(c for s, c in stacks.items() if whole(frames[s]))
t = sum(c for s, c in stacks.items() if through(frames[s]))
log(f"whole: {w} of {n} ({100 * w / n:.1f}%); through matmul, numpy's C entry and OpenBLAS's "
    f"dgemm: {t} ({100 * t / n:.1f}%)")
check(w >= MIN_WHOLE * n, f"{100 * MIN_WHOLE:.0f}% of the stacks reach their root "
      f"({100 * w / n:.1f}%)")
check(t >= MIN_THROUGH * n, f"{100 * MIN_THROUGH:.0f}% go through the Python line, numpy's C "
      f"entry and the BLAS kernel ({100 * t / n:.1f}%)")
log("PASS")
