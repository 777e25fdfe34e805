#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Whole stacks on PyTorch and numpy from PyPI: profd, perf --call-graph dwarf and py-spy --native.

  sudo bench/torch_stacks.py [--workload mlp|conv|numpy]... [--seconds 15] [--warmup 5]
                             [--hz 99] [--keep DIR] [--json FILE|-]
  bench/torch_stacks.py --analyse DIR [--json FILE|-]   the figures again from a --keep DIR
  bench/torch_stacks.py --self-check                    the analysis on handcrafted stacks

Each workload of bench/torch_work.py (an MLP training loop with two DataLoader workers; a conv net
and a 2-layer TransformerEncoder; a numpy matmul loop, OPENBLAS_NUM_THREADS=1) runs in the
interpreter `scripts/torch-venv` prints, under `profd --pid` from its start (so its unwind tables
are built while torch imports). Once it trains, and WARMUP seconds later, perf record
--call-graph dwarf and py-spy record --native sample its main thread at once for SECONDS, all
three at HZ; profd's samples are `profctl dump --tid PID --since SECONDS`. py-spy is installed
into the venv (pip) when missing, for this benchmark only; perf is used when on PATH.

Figures, over each tool's samples of the main thread in that window (training steps only):
  whole      the stack reaches its root: profd did not mark it [truncated] (its mark of a
             walk that stopped short); for perf and py-spy, its outermost user frame is _start,
             __libc_start_call_main, __libc_start_main, clone/clone3 or start_thread. py-spy leaves out the interpreter's own frames (_start
             among them) and names libc's by address only, so its whole stacks end in an unnamed
             libc frame (libc's start routine); when its native walk fails it puts the Python
             frames at the root of what it got, which then does not count.
  backward   (torch) samples under `loss.backward()` (a Python frame Tensor.backward in
             torch/_tensor.py), and of those the share that shows autograd's engine
             (torch::autograd::Engine::...) and ATen (at::...) frames between that Python frame
             and the leaf. perf has no Python frames: '-'.
  through    (numpy) whole, and through the Python line (matmul in torch_work.py), numpy's C
             entry (ufunc_generic_fastcall, ufunc_generic_call, array_matrix_multiply) and an
             OpenBLAS dgemm routine. perf: '-'.
"""
import argparse
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
WORK = os.path.join(HERE, "torch_work.py")
WORKLOADS = ("mlp", "conv", "numpy")
TOOLS = ("profd", "perf", "py-spy")

ROOT = re.compile(r"^(_start|__libc_start_call_main|__libc_start_main\w*|__clone3?|clone3?|"
                  r"start_thread|\[py-spy: libc start\])$")
# A Python frame as profd and py-spy print it: "NAME (FILE.py:LINE)".
PYFRAME = re.compile(r"^(?P<name>.+) \((?P<file>[^()]*\.py):\d+\)$")
BACKWARD = re.compile(r"^(\S+\.)?backward \((\S*/)?_tensor\.py:\d+\)$")
MATMUL_LINE = re.compile(r"^matmul \((\S*/)?torch_work\.py:\d+\)$")
NUMPY_ENTRY = re.compile(r"^(ufunc_generic_fastcall|ufunc_generic_call|array_matrix_multiply)"
                         r"(\.\w+)*$")
BLAS = re.compile(r"^(\w*cblas_dgemm\w*|dgemm_\w+)$")
# py-spy names libc's frames by address only (Debian's libc has no .symtab) and leaves out the
# interpreter's own: an unnamed libc frame at the root of its stack is libc's start routine
# beneath the interpreter (__libc_start_call_main; clone3 or start_thread on other threads).
LIBC_ADDR = re.compile(r"^0x[0-9a-f]+ \((\S*/)?libc(\.so\.6|-[\d.]+\.so)\)$")
PYSPY_LIBC_ROOT = "[py-spy: libc start]"
# py-spy's root frame with --threads: "thread (TID)" or "thread (TID): NAME".
PYSPY_THREAD = re.compile(r"^thread \((\d+|0x[0-9A-Fa-f]+)\)(: .*)?$")


# ---- frames ------------------------------------------------------------------------------------

def _strip_templates(s):
    """s without its <...> template arguments (nested), keeping operator<, operator<< ... ."""
    out, depth, i = [], 0, 0
    while i < len(s):
        if s.startswith("operator", i) and depth == 0:
            m = re.match(r"operator(<<=|>>=|<<|>>|<=|>=|<|>|->\*|->|\(\)|\[\])?", s[i:])
            out.append(m.group(0))
            i += len(m.group(0))
            continue
        c = s[i]
        if c == "<":
            depth += 1
        elif c == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(c)
        i += 1
    return "".join(out)


def qualified(frame):
    """The qualified name of a demangled C++ frame, without return type, template arguments,
    parameters and a tool's " (module)" suffix: "void at::native::foo<float>(at::Tensor&)" ->
    "at::native::foo". The parameters of any frame name at::Tensor, so ATen is told by the
    function's own name only."""
    s = frame.replace("(anonymous namespace)", "{anon}")
    s = _strip_templates(s)
    s = s.split("(", 1)[0].strip()
    return s.rsplit(" ", 1)[-1] if s else s


def is_aten(frame):
    return frame.startswith("_ZN2at") or qualified(frame).startswith("at::")


def is_engine(frame):
    return frame.startswith("_ZN5torch8autograd6Engine") or \
        "torch::autograd::Engine::" in qualified(frame)


def is_python(frame):
    return bool(PYFRAME.match(frame))


# ---- each tool's output to [(count, frames root first, user frames only)] ----------------------

def profd_stacks(text):
    """profctl dump --format folded (one thread): kernel frames (_[k]) dropped; [truncated]
    kept where it is, as the root."""
    out = []
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = [f for f in stack.split(";") if not f.endswith("_[k]")]
        out.append((int(n), frames))
    return out


def pyspy_stacks(text, tid):
    """py-spy record --format raw --threads: thread TID's stacks, the thread root dropped and
    native frames' " (module)" suffix cut (Python frames keep "(file:line)")."""
    out = []
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = stack.split(";")
        m = PYSPY_THREAD.match(frames[0])
        if not m or m.group(1) != str(tid):
            continue
        names = [f if is_python(f) else re.sub(r" \([^()]*\)$", "", f) for f in frames[1:]]
        if names and LIBC_ADDR.match(frames[1]):
            names[0] = PYSPY_LIBC_ROOT
        out.append((int(n), names))
    return out


def perf_stacks(text, tid):
    """perf script -F tid,ip,sym,dso: thread TID's samples, user frames, root first."""
    out = []
    for block in text.split("\n\n"):
        lines = [x for x in block.splitlines() if x.strip()]
        if not lines:
            continue
        head = lines[0].split()
        if not head or not head[0].isdigit() or int(head[0]) != tid:
            continue
        frames = []
        for line in lines[1:]:
            w = line.split(None, 1)
            if not w or w[0].startswith("ffffffff"):
                continue  # a kernel frame, or perf's end-of-walk marker
            sym = w[1].rsplit(" (", 1)[0].strip() if len(w) > 1 else "[unknown]"
            frames.append(re.sub(r"\+0x[0-9a-f]+$", "", sym))
        out.append((1, frames[::-1]))
    return out


# ---- figures -----------------------------------------------------------------------------------

def whole(frames, tool):
    """profd marks a walk that did not reach the stack's bottom with a [truncated] root, and may
    leave out the interpreter's frames below the first Python frame in its default view: its
    mark is the test. The other tools' stacks must end in a root function."""
    if tool == "profd":
        return bool(frames) and "[truncated]" not in frames
    return bool(frames) and bool(ROOT.match(frames[0]))


def backward_shows_engine(frames):
    """(under loss.backward(), with the engine's and ATen's frames leafward of it)."""
    idx = [i for i, f in enumerate(frames) if BACKWARD.match(f)]
    if not idx:
        return False, False
    below = frames[idx[-1] + 1:]
    return True, any(is_engine(f) for f in below) and any(is_aten(f) for f in below)


def through_blas(frames, tool):
    return (whole(frames, tool) and any(MATMUL_LINE.match(f) for f in frames) and
            any(NUMPY_ENTRY.match(f) for f in frames) and any(BLAS.match(f) for f in frames))


def figures(workload, tool, stacks):
    n = sum(c for c, _ in stacks)
    m = {"samples": n, "whole": None, "backward_samples": None, "backward_engine_aten": None,
         "through": None}
    if not n:
        return m
    m["whole"] = sum(c for c, f in stacks if whole(f, tool)) / n
    has_py = tool != "perf"
    if workload == "numpy":
        if has_py:
            m["through"] = sum(c for c, f in stacks if through_blas(f, tool)) / n
    elif has_py:
        bw = ok = 0
        for c, f in stacks:
            under, shows = backward_shows_engine(f)
            bw += c if under else 0
            ok += c if shows else 0
        m["backward_samples"] = bw
        m["backward_engine_aten"] = ok / bw if bw else None
    return m


def pct(x):
    return "-" if x is None else f"{100 * x:.1f}"


def table(results):
    lines = [f"{'workload':8s} {'tool':7s} {'samples':>7s} {'whole %':>8s} {'backward':>8s} "
             f"{'engine+ATen %':>13s} {'through %':>9s}"]
    for r in results:
        m = r["figures"]
        bw = "-" if m["backward_samples"] is None else str(m["backward_samples"])
        lines.append(f"{r['workload']:8s} {r['tool']:7s} {m['samples']:7d} "
                     f"{pct(m['whole']):>8s} {bw:>8s} {pct(m['backward_engine_aten']):>13s} "
                     f"{pct(m['through']):>9s}")
    return "\n".join(lines)


# ---- runs --------------------------------------------------------------------------------------

def read_line(proc, timeout):
    """A line of the workload's stdout within timeout seconds, or None."""
    end = time.monotonic() + timeout
    buf = b""
    fd = proc.stdout.fileno()
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
        if not r:
            break
        c = os.read(fd, 1)
        if not c:
            return None
        if c == b"\n":
            return buf.decode(errors="replace")
        buf += c
    return None


def run_workload(name, a, tmp, keep):
    """One run of workload NAME under the three tools; writes profd.folded, perf.txt and
    pyspy.raw (and meta.json: the main thread's id) into keep/NAME."""
    out = os.path.join(keep, name)
    os.makedirs(out, exist_ok=True)
    for stale in ("profd.folded", "perf.txt", "pyspy.raw", "meta.json"):
        if os.path.exists(os.path.join(out, stale)):  # of an earlier run into the same DIR
            os.remove(os.path.join(out, stale))
    profd = os.path.join(a.build, "bin", "profd")
    profctl = os.path.join(a.build, "bin", "profctl")
    sock = os.path.join(tmp, f"{name}.sock")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    w = subprocess.Popen([a.python, WORK, "--workload", name, "--seconds", "0"],
                         stdout=subprocess.PIPE, env=env, start_new_session=True)
    d = spy = perf = None
    t0 = time.monotonic()

    def step(what):
        print(f"    {name}: {what} at {time.monotonic() - t0:.1f} s", flush=True)
    try:
        d = subprocess.Popen([profd, "--socket", sock, "--pid", str(w.pid), "--frequency",
                              str(a.hz), "-q"])
        line = read_line(w, 180)
        if not line or line.split() != ["training", str(w.pid)]:
            sys.exit(f"torch_stacks.py: {name}: the workload did not start training ({line!r})")
        step("training")
        time.sleep(a.warmup)
        if "perf" in a.tools:
            perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(a.hz),
                                     "--call-graph", "dwarf", "-t", str(w.pid), "-o",
                                     os.path.join(tmp, f"{name}.perf.data"), "--", "sleep",
                                     f"{a.seconds:g}"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
        if "py-spy" in a.tools:
            spy = subprocess.Popen([a.py_spy, "record", "--pid", str(w.pid), "--native",
                                    "--threads", "--format", "raw", "--rate", str(a.hz),
                                    "--duration", f"{a.seconds:g}", "-o",
                                    os.path.join(out, "pyspy.raw")],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        else:
            time.sleep(a.seconds)
        spy_log = spy.communicate(timeout=a.seconds + 120)[0] if spy else ""
        perf_err = perf.communicate(timeout=a.seconds + 120)[1] if perf else ""
        dump = subprocess.run([profctl, "--socket", sock, "dump", "flamegraph", "--format",
                               "folded", "--pid", str(w.pid), "--tid", str(w.pid), "--since",
                               f"{a.seconds:g}s"], capture_output=True, text=True, timeout=120)
        if dump.returncode:
            sys.exit(f"torch_stacks.py: {name}: profctl dump failed: {dump.stderr.strip()}")
        step("sampled and dumped")
        status = subprocess.run([profctl, "--socket", sock, "status"], capture_output=True,
                                text=True, timeout=60).stdout
    finally:
        for p in (spy, perf):
            if p and p.poll() is None:
                p.kill()
        try:
            os.killpg(w.pid, signal.SIGKILL)  # the DataLoader's workers too
        except ProcessLookupError:
            pass
        w.wait()
        if d:
            d.send_signal(signal.SIGTERM)
            d.wait(30)
    if spy and spy.returncode:
        sys.exit(f"torch_stacks.py: {name}: py-spy failed: {spy_log.strip()[-500:]}")
    if perf and perf.returncode:
        sys.exit(f"torch_stacks.py: {name}: perf record failed: {perf_err.strip()[-500:]}")
    with open(os.path.join(out, "profd.folded"), "w") as f:
        f.write(dump.stdout)
    if perf:
        # --no-inline: perf's inline lookups through addr2line take minutes on libtorch
        script = subprocess.run(["perf", "script", "-i", os.path.join(tmp, f"{name}.perf.data"),
                                 "-F", "tid,ip,sym,dso", "--no-inline"], capture_output=True,
                                text=True)
        if script.returncode:
            sys.exit(f"torch_stacks.py: perf script failed: {script.stderr.strip()[-500:]}")
        with open(os.path.join(out, "perf.txt"), "w") as f:
            f.write(script.stdout)
        step("perf script done")
    unwind = [x.strip() for x in status.splitlines() if x.startswith("unwind")]
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump({"tid": w.pid, "seconds": a.seconds, "hz": a.hz, "warmup": a.warmup,
                   "profd_unwind_status": unwind,
                   "pyspy_said": [x for x in spy_log.splitlines() if "Samples" in x]}, f)


def analyse(keep, workloads):
    results = []
    for name in workloads:
        d = os.path.join(keep, name)
        meta_path = os.path.join(d, "meta.json")
        if not os.path.exists(meta_path):
            continue
        with open(meta_path) as f:
            meta = json.load(f)
        tid = meta["tid"]
        for tool, fname, parse in (("profd", "profd.folded", profd_stacks),
                                   ("perf", "perf.txt", lambda t: perf_stacks(t, tid)),
                                   ("py-spy", "pyspy.raw", lambda t: pyspy_stacks(t, tid))):
            path = os.path.join(d, fname)
            if not os.path.exists(path):
                continue
            with open(path) as f:
                stacks = parse(f.read())
            row = {"workload": name, "tool": tool, "figures": figures(name, tool, stacks)}
            if tool == "profd":
                row["unwind_status"] = meta["profd_unwind_status"]
            results.append(row)
    return results


def find_pyspy(python):
    exe = os.path.join(os.path.dirname(python), "py-spy")
    if not os.access(exe, os.X_OK):
        pip = os.path.join(os.path.dirname(python), "pip")
        print(f"torch_stacks.py: py-spy missing: {pip} install py-spy (for this benchmark only)",
              file=sys.stderr)
        subprocess.run([pip, "install", "-q", "--disable-pip-version-check", "py-spy"],
                       check=True)
    return exe


# ---- self-check on handcrafted stacks ----------------------------------------------------------

def self_check():
    fails = []

    def check(cond, what):
        if not cond:
            fails.append(what)

    check(qualified("void at::native::(anonymous namespace)::cpu_kernel_vec<float>"
                    "(at::TensorIteratorBase&)") == "at::native::{anon}::cpu_kernel_vec",
          "qualified: return type, templates, anonymous namespace, parameters")
    check(not is_aten("torch::autograd::VariableType::{anon}::mm(c10::DispatchKeySet, "
                      "at::Tensor const&)"), "at::Tensor in the parameters is not ATen")
    check(not is_aten("c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::"
                      "WrapFunctionIntoFunctor_<c10::CompileTimeFunctionPointer<at::Tensor "
                      "(at::Tensor const&), &at::{anon}::wrapper_mm>>>::call"),
          "at:: in template arguments is not ATen")
    check(is_aten("at::native::cpublas::gemm") and is_aten("at::_ops::mm::call(at::Tensor "
                                                           "const&)"), "ATen frames")
    check(is_aten("at::native::cpublas::gemm (libtorch_cpu.so)") is True, "py-spy's suffix")
    check(is_engine("torch::autograd::Engine::thread_main(std::shared_ptr<"
                    "torch::autograd::GraphTask> const&)") and
          not is_engine("torch::autograd::python::PythonEngine::execute"),
          "the engine's frames, not PythonEngine's")
    check(qualified("std::vector<int>::operator<<(int)") == "std::vector::operator<<",
          "operator<< survives the template stripping")

    py = ["_start", "__libc_start_call_main", "Py_BytesMain", "<module> (torch_work.py:150)",
          "train_step (torch_work.py:98)", "Tensor.backward (/v/torch/_tensor.py:647)",
          "THPEngine_run_backward", "torch::autograd::Engine::execute(x)",
          "at::_ops::mm::call(at::Tensor const&)", "mkl_blas_def_sgemm_kernel_0_zen"]
    folded = ";".join(py) + " 7\n" + ";".join(["[truncated]"] + py[3:6] + py[-1:]) + " 3\n" + \
        ";".join(py[:5] + ["Module._call_impl (/v/module.py:1)", "do_it_[k]"]) + " 10\n"
    st = profd_stacks(folded)
    check(st[2][1][-1] == "Module._call_impl (/v/module.py:1)", "profd: kernel frames dropped")
    m = figures("mlp", "profd", st)
    check(m["samples"] == 20 and abs(m["whole"] - 17 / 20) < 1e-9,
          f"profd whole: 17 of 20, got {m}")
    check(m["backward_samples"] == 10 and abs(m["backward_engine_aten"] - 0.7) < 1e-9,
          f"profd backward: 7 of 10 show engine and ATen, got {m}")
    check(whole(["<module> (a.py:1)", "leaf"], "profd") and
          not whole(["<module> (a.py:1)", "leaf"], "py-spy"),
          "profd's mark decides, the others' root frame")
    # the engine above the Python line does not count
    check(backward_shows_engine(["torch::autograd::Engine::x", "at::y",
                                 "backward (torch/_tensor.py:1)", "leaf"]) == (True, False),
          "engine frames must be leafward of the Python line")

    raw = ("thread (42): MainThread;0x7f140824524a (libc.so.6);<module> (w.py:1);"
           "matmul (/b/torch_work.py:108);ufunc_generic_fastcall (_multiarray_umath.so);"
           "DOUBLE_matmul (_multiarray_umath.so);dgemm_nn (libscipy_openblas.so);"
           "dgemm_kernel_HASWELL (libscipy_openblas.so) 6\n"
           "thread (42): MainThread;<module> (w.py:1);matmul (/b/torch_work.py:108);"
           "dgemm_kernel_HASWELL (libscipy_openblas.so) 4\n"
           "thread (43);__libc_start_call_main (libc.so.6);x (w.py:2) 99\n")
    sp = pyspy_stacks(raw, 42)
    check(len(sp) == 2 and sp[0][1][0] == PYSPY_LIBC_ROOT, f"py-spy: thread 42, {sp}")
    m = figures("numpy", "py-spy", sp)
    check(m["samples"] == 10 and abs(m["whole"] - 0.6) < 1e-9 and abs(m["through"] - 0.6) < 1e-9,
          f"py-spy numpy: 6 of 10 whole and through, got {m}")

    perf = (" 42 \n\t  c79fdc dgemm_kernel_SKYLAKEX (/x/libopenblas.so)\n"
            "\t  3d2de9 dgemm_nn (/x/libopenblas.so)\n"
            "\t  1000 __libc_start_call_main (/usr/lib/libc.so.6)\n"
            "\t  2000 _start (/usr/bin/python3.11)\n"
            "\tffffffffffffffff [unknown] ([unknown])\n\n"
            " 42 \n\tffffffff81000000 do_syscall_64 ([kernel.kallsyms])\n"
            "\t  c79fdc dgemm_kernel_SKYLAKEX+0x1c (/x/libopenblas.so)\n\n"
            " 43 \n\t  1000 __libc_start_call_main (/usr/lib/libc.so.6)\n\n")
    pe = perf_stacks(perf, 42)
    check([f for _, f in pe] == [["_start", "__libc_start_call_main", "dgemm_nn",
                                  "dgemm_kernel_SKYLAKEX"], ["dgemm_kernel_SKYLAKEX"]],
          f"perf: thread 42, root first, no kernel, no offsets: {pe}")
    m = figures("numpy", "perf", pe)
    check(m["whole"] == 0.5 and m["through"] is None, f"perf numpy: {m}")
    for f in fails:
        print(f"FAIL: {f}")
    print(f"torch_stacks.py --self-check: {len(fails)} failed")
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--python", help="the venv's interpreter (default: scripts/torch-venv's)")
    ap.add_argument("--workload", action="append", choices=WORKLOADS)
    ap.add_argument("--tool", action="append", choices=TOOLS, help="default: all three")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--warmup", type=float, default=5)
    ap.add_argument("--hz", type=int, default=99)
    ap.add_argument("--keep", help="directory to keep each tool's stacks in (re-read with "
                    "--analyse)")
    ap.add_argument("--analyse", metavar="DIR", help="no run: the figures of a --keep DIR")
    ap.add_argument("--json", metavar="FILE", help="the figures as JSON too ('-': stdout)")
    ap.add_argument("--self-check", action="store_true")
    a = ap.parse_args()
    if a.self_check:
        sys.exit(self_check())
    workloads = a.workload or list(WORKLOADS)
    if a.analyse:
        results = analyse(a.analyse, workloads)
        if not results:
            sys.exit(f"torch_stacks.py: nothing to analyse in {a.analyse}")
    else:
        if os.geteuid() != 0:
            sys.exit("torch_stacks.py: needs root (profd, perf record -t, py-spy)")
        if not 1 <= a.seconds <= 300 or not 0 <= a.warmup <= 120 or not 1 <= a.hz <= 999:
            sys.exit("torch_stacks.py: --seconds 1-300, --warmup 0-120, --hz 1-999")
        a.build = os.path.abspath(a.build)
        if not os.access(os.path.join(a.build, "bin", "profd"), os.X_OK):
            sys.exit(f"torch_stacks.py: no {a.build}/bin/profd: build first")
        a.tools = set(a.tool or TOOLS)
        if "perf" in a.tools and not shutil.which("perf"):
            print("torch_stacks.py: perf not found (Debian: linux-perf): left out",
                  file=sys.stderr)
            a.tools.discard("perf")
        if not a.python:
            a.python = subprocess.run([os.path.join(TOP, "scripts", "torch-venv")],
                                      capture_output=True, text=True,
                                      check=True).stdout.strip()
        if "py-spy" in a.tools:
            a.py_spy = find_pyspy(a.python)
        load = open("/proc/loadavg").read().split()[:3]
        print(f"torch_stacks.py: {', '.join(workloads)}; {a.seconds:g} s at {a.hz} Hz after "
              f"{a.warmup:g} s; load average {' '.join(load)}", flush=True)
        with tempfile.TemporaryDirectory(prefix="profd-torch-") as tmp:
            keep = a.keep or os.path.join(tmp, "keep")
            for name in workloads:
                run_workload(name, a, tmp, keep)
            results = analyse(keep, workloads)
        load = open("/proc/loadavg").read().split()[:3]
        print(f"load average after: {' '.join(load)}")
    print(table(results))
    if a.json:
        text = json.dumps(results, indent=1)
        if a.json == "-":
            print(text)
        else:
            with open(a.json, "w") as f:
                f.write(text + "\n")


if __name__ == "__main__":
    main()
