#!/usr/bin/env python3
# Import-time Python stacks: a module's top-level code object is freed once its import is done,
# usually before the daemon reads the sample (up to a drain interval later), so its frame often
# cannot be named. Such a frame must stay where it was, as "[python frame: ...]", and never
# shift the frames around it. For each CPython at hand (3.11: activations end at is_entry;
# 3.12+: at shim frames), a script imports fresh modules whose top level burns CPU, each outer
# module importing an inner one; in every sample:
#   - right after each `_call_with_frames_removed` that exec_module called (the importer's
#     call of exec) comes the imported module's frame: a `<module>`, or a placeholder;
#   - the frame of pv_inner_N, when named, has pv_outer_N's frame (or a placeholder) as the
#     next older module frame;
#   - no `_PyEval_EvalFrameDefault` is left rootward of the oldest Python frame (an eval frame
#     without its Python frames: the mark of a shift).
# Before placeholders, 70% of the samples in 3.11 had `_call_with_frames_removed` followed by
# importlib's frames, and 3.12 shifted whole stacks.
import json
import time
import os
import re
import subprocess

from profd_e2e import *

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "fixtures", "python", "imports.py")
PYENV = os.environ.get("PROFD_PYENV", "/root/.pyenv/versions")
VERSIONS = tuple(os.environ.get("PROFD_TEST_VERSIONS", "3.11.7 3.12.1 3.13.0").split())
FREQ = 499
# The stacks out of order, not only their count: PROFD_TEST_VERBOSE=1.
VERBOSE = os.environ.get("PROFD_TEST_VERBOSE") == "1"

PYFRAME = re.compile(r"^(?P<name>.+) \((?P<file>[^()]*\.py|<[^()]*>)(?::(?P<line>\d+))?\)$")
PLACEHOLDER = "[python frame: "


def is_python(frame):
    return frame.startswith(PLACEHOLDER) or PYFRAME.match(frame) is not None


def module_of(frame):
    """'pv_outer_3' for "<module> (.../pv_outer_3.py:2)", else None."""
    m = PYFRAME.match(frame)
    if not m or m.group("name") != "<module>":
        return None
    base = os.path.basename(m.group("file"))
    return base[:-3] if base.startswith("pv_") else None


def problems(frames):
    """What is wrong with one stack (root first), as a list of strings."""
    out = []
    py = [i for i, f in enumerate(frames) if is_python(f)]
    if py and any(f.startswith("_PyEval_EvalFrameDefault") for f in frames[:py[0]]):
        out.append("an eval frame rootward of the oldest Python frame")
    for k, i in enumerate(py):
        f = frames[i]
        # importlib calls exec through it from exec_module (and __import__ elsewhere).
        if (f.startswith("_call_with_frames_removed ") and 0 < k < len(py) - 1 and
                frames[py[k - 1]].startswith("_LoaderBasics.exec_module ")):
            nxt = frames[py[k + 1]]
            if not (nxt.startswith(PLACEHOLDER) or nxt.startswith("<module> (")):
                out.append(f"_call_with_frames_removed followed by {nxt}")
        mod = module_of(f)
        if mod and mod.startswith("pv_inner_"):
            older = [frames[j] for j in py[:k]
                     if module_of(frames[j]) or frames[j].startswith(PLACEHOLDER)]
            want = "pv_outer_" + mod[len("pv_inner_"):]
            if not older or not (older[-1].startswith(PLACEHOLDER) or
                                 module_of(older[-1]) == want):
                out.append(f"{mod} under {older[-1] if older else 'no module frame'}")
    return out


def run(label, exe):
    p = subprocess.Popen([exe, SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        with Daemon("--frequency", str(FREQ), "--pid", str(p.pid)) as d:
            p.stdin.write("go\n")
            p.stdin.flush()
            if p.stdout.readline().strip() != "done":
                fail(f"[{label}] the import script did not finish")
            time.sleep(0.5)  # two drains after the last import
            folded = d.folded("--pid", str(p.pid))
            st = json.loads(d.ctl("status", "--json").stdout)
    finally:
        p.stdin.close()
        p.wait(30)
    imports = {s: c for s, c in folded.items() if "_call_with_frames_removed (" in s}
    n = sum(imports.values())
    bad = {}
    for s, c in imports.items():
        for why in problems(s.split(";")):
            bad.setdefault(why, 0)
            bad[why] += c
    holes = total(imports, lambda fr: any(f.startswith(PLACEHOLDER) for f in fr))
    named = total(imports, lambda fr: any(module_of(f) for f in fr))
    log(f"[{label}] {n} import-time samples, {named} with a named pv_ module frame, "
        f"{holes} with a placeholder; status: {st.get('python_frames_dropped', 0)} frames "
        f"unnamed")
    check(n >= 100, f"[{label}] import-time samples ({n})")
    check(named > 0, f"[{label}] some module frames are named ({named})")
    for why, c in sorted(bad.items(), key=lambda x: -x[1])[:10]:
        log(f"[{label}] {c} samples: {why}")
    for s in [s for s in imports if problems(s.split(";"))][:2 if VERBOSE else 0]:
        log(f"[{label}] e.g. {s}")
    check(not bad, f"[{label}] every import-time stack in order ({sum(bad.values())} are not)")


require_root()
found = 0
for v in VERSIONS:
    exe = os.path.join(PYENV, v, "bin", "python" + v.rsplit(".", 1)[0])
    if not os.access(exe, os.X_OK):
        log(f"{v}: not installed, not checked")
        continue
    found += 1
    run(v, exe)
if not found:
    skip(f"no CPython of {', '.join(VERSIONS)} under {PYENV}")
log("PASS")
