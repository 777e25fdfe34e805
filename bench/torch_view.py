#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""What a PyTorch user gets from `profd --record`: the flame graph of a small MLP training loop
(bench/torch_mlp.py, torch.set_num_threads(1)) from two builds, side by side. As root:

  sudo bench/torch_view.py --before OLD_BUILD [--after build] [--seconds 15]

For each build, `profd --record` runs the loop twice (its SVG, then its folded stacks: one
output per run); reported: the SVG's size and frames (its <g> elements), the deepest frame, and
over the folded samples the mean and largest stack depth (all of them, and those of the
training step: under train_step), the samples with Python frames and, per such sample, the
frames between the newest and the oldest Python frame that are the interpreter's (libpython's, or the executable's), told from the folded names by the
interpreter's known symbol prefixes (Py*, _Py*, and CPython's static call helpers), which only
this benchmark uses to count; and the Python frames shown as placeholders. The loop's python
is `scripts/torch-venv`'s.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
LOOP = os.path.join(ROOT, "bench", "torch_mlp.py")
PYFRAME = re.compile(r"^(?P<name>.+) \((?P<file>[^()]*\.py|<[^()]*>)(?::\d+)?\)$")
# Only to count, in folded text that carries no module: the names CPython's call machinery
# has in the stacks of this loop.
MACHINERY = re.compile(r"^(_?Py|slot_tp_|method_vectorcall|cfunction_|vectorcall_|"
                       r"object_vacall|builtin_|_PyEval_)")


def record(build, out, seconds, python):
    cmd = [os.path.join(build, "bin", "profd"), "--record", "-o", out, "--", python, LOOP,
           str(seconds)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    if r.returncode != 0 or not os.path.exists(out):
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r.stdout.strip()


def svg_figures(path):
    text = open(path).read()
    depths = [int(d) for d in re.findall(r'<g class="f"[^>]* data-d="(\d+)"', text)]
    title = re.search(r'<text id="title"[^>]*>([^<]*)</text>', text)
    return {"svg_bytes": os.path.getsize(path), "svg_frames": len(depths),
            "svg_max_depth": max(depths, default=0), "title": title.group(1) if title else ""}


def folded_figures(path):
    depth, step_depth, py_samples, between, n, holes, jit = [], [], 0, 0, 0, 0, 0
    for line in open(path):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        c = int(count)
        frames = stack.split(";")
        n += c
        depth += [len(frames)] * c
        if any(f.startswith("train_step (") for f in frames):
            step_depth += [len(frames)] * c
        holes += c * sum(1 for f in frames if f.startswith("[python frame: "))
        jit += c * sum(1 for f in frames if f.startswith("[jit] ("))
        py = [i for i, f in enumerate(frames) if PYFRAME.match(f)]
        if py:
            py_samples += c
            between += c * sum(1 for f in frames[py[0]:py[-1]] if MACHINERY.match(f))
    return {"samples": n, "mean_depth": statistics.mean(depth) if depth else 0,
            "max_depth": max(depth, default=0), "py_samples": py_samples,
            "step_samples": len(step_depth),
            "step_mean_depth": statistics.mean(step_depth) if step_depth else 0,
            "step_max_depth": max(step_depth, default=0), "placeholder_frames": holes,
            "jit_frames": jit,
            "machinery_per_py_sample": between / py_samples if py_samples else 0}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="build directory of the baseline")
    ap.add_argument("--after", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seconds", type=float, default=15)
    a = ap.parse_args()
    python = subprocess.run([os.path.join(ROOT, "scripts", "torch-venv")], capture_output=True,
                            text=True, check=True).stdout.strip().splitlines()[-1]
    tmp = tempfile.mkdtemp(prefix="profd-torch-view-")
    rows = []
    for label, build in (("before", a.before), ("after", a.after)):
        svg = os.path.join(tmp, f"{label}.svg")
        folded = os.path.join(tmp, f"{label}.folded")
        steps = record(build, svg, a.seconds, python)
        f = svg_figures(svg)
        record(build, folded, a.seconds, python)
        f.update(folded_figures(folded))
        f["steps"] = steps
        rows.append((label, f))
    keys = ["steps", "svg_bytes", "svg_frames", "svg_max_depth", "samples", "mean_depth",
            "max_depth", "step_samples", "step_mean_depth", "step_max_depth", "py_samples",
            "machinery_per_py_sample", "placeholder_frames", "title"]
    print("| figure | " + " | ".join(l for l, _ in rows) + " |")
    print("|---|" + "---|" * len(rows))
    for k in keys:
        cells = []
        for _, f in rows:
            v = f[k]
            cells.append(f"{v:.1f}" if isinstance(v, float) else str(v))
        print(f"| {k} | " + " | ".join(cells) + " |")
    print(f"(outputs in {tmp})")


if __name__ == "__main__":
    main()
