#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""How whole user stacks are through BLAS kernels without CFI: numpy's `a @ b` (512x512 float64,
OPENBLAS_NUM_THREADS=1, numpy's wheel: OpenBLAS's dgemm kernels) or a torch MLP training step
(torch.set_num_threads(1): MKL's sgemm kernels), sampled by `profd --pid` of each build.

  sudo bench/unwind_blas.py --python PY [--base BASE_BUILD] [--new build] [--rounds 3]
                            [--seconds 10] [--warmup 3] [--workload numpy|torch-mlp]

In each round every build profiles its own fresh process, in random order. A sample is whole when
its user stack has no `[truncated]` root (the walk reached the stack's bottom); also reported: the
samples whose leaf is a BLAS kernel (`gemm` in the leaf's user frame), and how whole those are.
Needs a Python with numpy (scripts/torch-venv --numpy-only prints one) or torch.
Every run prints the load average: the machine is shared.
"""
import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from unwind_cost import Daemon, load  # noqa: E402

NUMPY = """import numpy as np
a = np.random.rand(512, 512)
b = np.random.rand(512, 512)
while True:
    c = a @ b
"""

TORCH_MLP = """import torch
torch.set_num_threads(1)
m = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512),
                        torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(256, 512)
y = torch.randint(0, 10, (256,))
while True:
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
"""


def user_part(stack):
    """The user frames of a folded stack, root first (kernel frames end in _[k])."""
    return [f for f in stack.split(";") if not f.endswith("_[k]")]


def measure(build, argv, seconds, warmup, env):
    w = subprocess.Popen(argv, stdout=subprocess.DEVNULL, env=env)
    with tempfile.TemporaryDirectory(prefix="profd-blas-") as tmp:
        os.chmod(tmp, 0o755)
        d = Daemon(build, tmp, ["--pid", str(w.pid), "--frequency", "499"])
        try:
            # the interpreter's start-up and the tables' first build are not looked at
            time.sleep(warmup + seconds)
            text = d.ctl("dump", "flamegraph", "--format", "folded", "--pid", str(w.pid),
                         "--since", f"{seconds}s")
            st = d.status().get("unwind", {})
        finally:
            w.kill()
            w.wait()
            d.stop()
    n = whole = blas = blas_whole = 0
    for line in text.splitlines():
        stack, _, cnt = line.rpartition(" ")
        if not stack or not cnt.isdigit():
            continue
        c = int(cnt)
        u = user_part(stack)
        ok = not u or u[0] != "[truncated]"
        n += c
        whole += c * ok
        if u and "gemm" in u[-1].lower():
            blas += c
            blas_whole += c * ok
    return {"n": n, "whole": whole, "blas": blas, "blas_whole": blas_whole, "status": st}


def pct(a, b):
    return 100.0 * a / b if b else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", required=True)
    ap.add_argument("--base")
    ap.add_argument("--new", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--workload", choices=("numpy", "torch-mlp"), default="numpy")
    ap.add_argument("--warmup", type=float, default=3,
                    help="seconds from the process's start not looked at (torch: 30)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("unwind_blas: needs root (BPF)")
    builds = {"new": args.new}
    if args.base:
        builds["base"] = args.base
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    code = NUMPY if args.workload == "numpy" else TORCH_MLP
    res = {}
    for r in range(args.rounds):
        order = list(builds)
        random.shuffle(order)
        for b in order:
            m = measure(builds[b], [args.python, "-c", code], args.seconds, args.warmup, env)
            res.setdefault(b, []).append(m)
            u = m["status"]
            print(f"round {r + 1} {b:4s}: {m['n']} samples, whole {pct(m['whole'], m['n']):5.1f}%;"
                  f" gemm leaf {pct(m['blas'], m['n']):5.1f}% of them, whole "
                  f"{pct(m['blas_whole'], m['blas']):5.1f}%; walks: bottom {u.get('bottom', 0)}"
                  f" invalid {u.get('invalid', 0)} bad-frame {u.get('bad_frame', 0)}"
                  f" read-fault {u.get('read_fault', 0)}; insn functions "
                  f"{u.get('insn_functions', '-')}; load {load()}", flush=True)
    print(f"\n{args.workload}, profd --pid at 499 Hz, the last {args.seconds:g} s of "
          f"{args.warmup + args.seconds:g} s, {args.rounds} rounds; medians (min-max)")
    for b, ms in res.items():
        w = [pct(m["whole"], m["n"]) for m in ms]
        bw = [pct(m["blas_whole"], m["blas"]) for m in ms]
        print(f"{b:4s} whole {statistics.median(w):5.1f}% ({min(w):.1f}-{max(w):.1f}); "
              f"gemm-leaf samples whole {statistics.median(bw):5.1f}% "
              f"({min(bw):.1f}-{max(bw):.1f})")


if __name__ == "__main__":
    main()
