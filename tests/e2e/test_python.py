#!/usr/bin/env python3
# Python stacks for every CPython profd reads (3.8 to 3.14, shared libpython and static), each
# interpreter started after the daemon: the workload's method, nested function and generator are
# named with their lines, in the CPU split the workload timed itself; a thread inside a hash that
# released the GIL keeps its Python caller under the native hash frames; 500-deep recursion is
# cut and marked; an interpreter profd does not know (3.7) gets native frames only and one line
# in the log.
#
# `test_python.py --self-check` runs the checks on handcrafted folded text instead (no root, no
# daemon): each check must pass on a right profile and fail on a profile broken in its way.
import json
import os
import re
import subprocess
import sys
import time

from profd_e2e import *

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
WORKLOAD = os.path.join(TOP, "tests", "fixtures", "python", "workload.py")
FETCH = os.path.join(TOP, "scripts", "fetch-python")
PYENV = os.environ.get("PROFD_PYENV", "/root/.pyenv/versions")
FREQ = 199
SECONDS = 8  # enough samples that the split is measured to about 2 points
DEEP_SECONDS = 4
SPLIT_TOLERANCE = 0.05
# Every passed check and the top stacks of each run: PROFD_TEST_VERBOSE=1. Failed checks always.
VERBOSE = os.environ.get("PROFD_TEST_VERBOSE") == "1"

# "NAME (FILE:LINE)" with FILE a Python source or a pseudo-file such as "<frozen ...>"; native
# frames without a symbol read "[unknown] (MODULE+0xADDR)" and never match.
PYFRAME = re.compile(r"^(?P<name>.+) \((?P<file>[^()]*\.py|<[^()]*>)(?::(?P<line>\d+))?\)$")
HASH_NATIVE = re.compile(r"sha256|sha2|hacl|libcrypto|_hashlib", re.I)


def pyframe(frame):
    """(name, file, line or 0) of a Python frame, None for any other frame."""
    m = PYFRAME.match(frame)
    if not m:
        return None
    return m.group("name"), m.group("file"), int(m.group("line") or 0)


def shown_name(qualname, modern):
    """How the frame is named: co_qualname from 3.11, co_name before."""
    return qualname if modern else qualname.rsplit(".", 1)[-1]


def top_stacks(folded, pred=lambda fr: True, n=8, width=600):
    rows = sorted(((c, s) for s, c in folded.items() if pred(s.split(";"))), reverse=True)[:n]
    out = []
    if not rows and folded:
        out.append("  (no stack of that kind; the top stacks are)")
        rows = sorted(((c, s) for s, c in folded.items()), reverse=True)[:n]
    for c, s in rows:
        # The leaf end says most; keep it when a stack is long.
        out.append(f"  {c:6d} {s if len(s) <= width else '...' + s[-width:]}")
    return "\n".join(out) or "  (no samples)"


class Checks:
    """Named checks that do not stop the test, with the stacks that explain a failure."""

    def __init__(self, label, quiet=False, show_ok=False):
        self.label = label
        self.quiet = quiet
        self.show_ok = show_ok
        self.failed = []
        self.passed = 0

    def check(self, cond, what, folded=None, pred=lambda fr: True):
        if cond:
            self.passed += 1
            if self.show_ok and not self.quiet:
                log(f"ok: [{self.label}] {what}")
            return True
        self.failed.append(what)
        if not self.quiet:
            log(f"FAIL: [{self.label}] {what}")
            if folded is not None:
                log(top_stacks(folded, pred))
        return False


def frames_of(stack):
    return stack.split(";")


def newest_index(frames, name, file="workload.py"):
    """Index of the newest (leafmost) Python frame called name in file, or -1."""
    for i in range(len(frames) - 1, -1, -1):
        p = pyframe(frames[i])
        if p and p[0] == name and p[1] == file:
            return i
    return -1


def check_lines(c, folded, info, modern):
    """Every workload.py frame whose function is known has a line inside that function."""
    ranges = {shown_name(q, modern): r for q, r in info["functions"].items()}
    bad = {}
    for s, n in folded.items():
        for fr in frames_of(s):
            p = pyframe(fr)
            if not p or p[1] != "workload.py" or p[0] not in ranges:
                continue
            lo, hi = ranges[p[0]]
            if not lo <= p[2] <= hi:
                bad[fr] = bad.get(fr, 0) + n
    c.check(not bad, "every workload.py frame has a line inside its function"
            + (f" (outside: {sorted(bad.items(), key=lambda kv: -kv[1])[:6]})" if bad else ""))


def check_threads(c, folded, info, freq=FREQ):
    """The checks of one `workload.py threads` run; info is the JSON the workload wrote."""
    modern = tuple(info["version"][:2]) >= (3, 11)
    comp = shown_name("Worker.compute", modern)
    inner = shown_name("outer.<locals>.inner", modern)
    groups = {"Worker.compute": comp, "outer.<locals>.inner": inner, "numbers": "numbers"}
    n = total(folded)
    c.check(n > 0, f"samples of the workload ({n})", folded)
    if not n:
        return

    # The names: qualified from 3.11, with the base name of the file.
    for q, name in groups.items():
        hits = total(folded, lambda fr, name=name: newest_index(fr, name) >= 0)
        c.check(hits > 0, f"frame '{name} (workload.py:LINE)' present ({hits} samples)",
                folded, lambda fr: any(q.rsplit(".", 1)[-1] in x for x in fr))
    if modern:
        plain = total(folded, lambda fr: any(re.match(r"^(compute|inner) \(", x) for x in fr))
        c.check(plain == 0, f"3.11+ names are qualified: no bare compute/inner ({plain})",
                folded, lambda fr: any(re.match(r"^(compute|inner) \(", x) for x in fr))
    full = total(folded, lambda fr: any("/workload.py" in x for x in fr))
    c.check(full == 0, f"files are shown by base name ({full} samples with a path)")

    # Lines: inside the function everywhere, and mostly on the lines marked hot.
    check_lines(c, folded, info, modern)
    for q, name in groups.items():
        hot = set(info["hot"][q])
        on_hot = at = 0
        for s, k in folded.items():
            fr = frames_of(s)
            i = newest_index(fr, name)
            if i < 0:
                continue
            at += k
            if pyframe(fr[i])[2] in hot:
                on_hot += k
        c.check(at and on_hot >= 0.8 * at,
                f"{name}: 80% of its samples on its hot lines {sorted(hot)} ({on_hot}/{at})",
                folded, lambda fr, name=name: newest_index(fr, name) >= 0)

    # Callers: the thread's loop below each function, drain below the generator.
    for q, name in groups.items():
        at = total(folded, lambda fr, name=name: newest_index(fr, name) >= 0)
        under = total(folded, lambda fr, name=name:
                      0 <= newest_index(fr, "cpu_loop") < newest_index(fr, name))
        c.check(at and under >= 0.9 * at, f"cpu_loop is below {name} ({under}/{at})",
                folded, lambda fr, name=name: newest_index(fr, name) >= 0)
    at = total(folded, lambda fr: newest_index(fr, "numbers") >= 0)
    under = total(folded, lambda fr: 0 <= newest_index(fr, "drain") < newest_index(fr, "numbers"))
    c.check(at and under >= 0.9 * at, f"drain is below numbers ({under}/{at})", folded,
            lambda fr: newest_index(fr, "numbers") >= 0)

    # The split, against the CPU time the thread measured around each call (numbers is timed
    # around drain, so drain's own samples count for it).
    def group_of(fr):
        if newest_index(fr, comp) >= 0:
            return "Worker.compute"
        if newest_index(fr, inner) >= 0:
            return "outer.<locals>.inner"
        if newest_index(fr, "numbers") >= 0 or newest_index(fr, "drain") >= 0:
            return "numbers"
        return None

    got = dict.fromkeys(groups, 0)
    for s, k in folded.items():
        g = group_of(frames_of(s))
        if g:
            got[g] += k
    gen = total(folded, lambda fr: newest_index(fr, "drain") >= 0)
    c.check(gen and at >= 0.7 * gen,
            f"the generator's own frame is in most samples of its loop ({at}/{gen})", folded,
            lambda fr: newest_index(fr, "drain") >= 0)
    cpu = info["cpu"]
    cpu_total = sum(cpu.values())
    prof_total = sum(got.values())
    expect = cpu_total * freq
    c.check(prof_total >= 0.7 * expect,
            f"samples of the three functions ({prof_total}) are 70% of {freq} Hz x the CPU time "
            f"they took ({cpu_total:.2f} s): every sample carries its Python frames", folded)
    if prof_total and cpu_total:
        for q in groups:
            share, want = got[q] / prof_total, cpu[q] / cpu_total
            c.check(abs(share - want) <= SPLIT_TOLERANCE,
                    f"{groups[q]}: share {share:.3f} within {SPLIT_TOLERANCE} of the timed "
                    f"{want:.3f} ({got[q]}/{prof_total} samples)", folded,
                    lambda fr: group_of(fr) is not None)

    # The hash thread, inside OpenSSL with the GIL released: its Python caller stays, with the
    # native hash frames above it.
    def hashing(fr):
        return any(HASH_NATIVE.search(x) and not pyframe(x) and not x.endswith("_[k]")
                   for x in fr)

    def sha_above(fr):
        i = newest_index(fr, "hash_loop")
        return i >= 0 and any(HASH_NATIVE.search(x) and not pyframe(x) and
                              not x.endswith("_[k]") for x in fr[i + 1:])

    hl = total(folded, lambda fr: newest_index(fr, "hash_loop") >= 0)
    c.check(hl >= 50, f"samples under hash_loop ({hl})", folded, hashing)
    above = total(folded, sha_above)
    c.check(hl and above >= 0.8 * hl,
            f"hash_loop has the native hash frames above it in 80% of its samples ({above}/{hl})",
            folded, lambda fr: newest_index(fr, "hash_loop") >= 0)
    last = total(folded, lambda fr: sha_above(fr) and not any(
        pyframe(x) for x in fr[newest_index(fr, "hash_loop") + 1:]))
    c.check(above and last >= 0.9 * above,
            f"hash_loop is the newest Python frame under the hash ({last}/{above})", folded,
            sha_above)
    h = total(folded, hashing)
    c.check(h and above >= 0.9 * h,
            f"90% of the samples in the hash keep their Python caller ({above}/{h})", folded,
            lambda fr: hashing(fr) and not sha_above(fr))
    mixed = total(folded, lambda fr: newest_index(fr, "hash_loop") >= 0 and group_of(fr))
    c.check(mixed == 0, f"no stack mixes the two threads' functions ({mixed})", folded,
            lambda fr: newest_index(fr, "hash_loop") >= 0 and group_of(fr))


def check_deep(c, folded, info):
    """The checks of one `workload.py deep` run: 500 nested recurse() calls."""
    modern = tuple(info["version"][:2]) >= (3, 11)
    deep = {s: k for s, k in folded.items() if newest_index(frames_of(s), "recurse") >= 0}
    n = total(deep)
    c.check(n >= 50, f"samples under recurse ({n})", folded)
    if not n:
        return
    most = max(sum(1 for x in frames_of(s) if pyframe(x)) for s in deep)
    c.check(most >= 128, f"at least 128 Python frames in a stack (most: {most})", deep)
    long = {s: k for s, k in deep.items()
            if sum(1 for x in frames_of(s) if pyframe(x) and pyframe(x)[0] == "recurse") >= 120}
    nl = total(long)
    c.check(nl >= 0.8 * n, f"80% of the recursion's samples hold 120+ recurse frames ({nl}/{n})",
            deep)
    marked = total(long, lambda fr: "[truncated]" in fr)
    c.check(nl and marked >= 0.9 * nl,
            f"the deep stacks are marked [truncated] ({marked}/{nl})", deep)
    check_lines(c, folded, info, modern)


def check_unsupported(c, folded, log_text, pid):
    """An interpreter profd does not read: native frames, no Python ones, one line in the log."""
    n = total(folded)
    c.check(n >= 50, f"native samples of the process ({n})", folded)
    names = {"compute", "inner", "numbers", "hash_loop", "cpu_loop", "drain", "Worker.compute",
             "outer.<locals>.inner"}
    py = total(folded, lambda fr: any(pyframe(x) or x in names for x in fr))
    c.check(py == 0, f"no Python-looking frame ({py} samples)", folded,
            lambda fr: any(pyframe(x) or x in names for x in fr))
    # The Python module's own lines about this pid (other modules may name its libpython path).
    pidre = re.compile(rf"\bpython: pid {pid}\b", re.I)
    lines = [ln for ln in log_text.splitlines() if pidre.search(ln)]
    c.check(len(lines) == 1 and re.search(r"unsupported|not supported|unknown", lines[0], re.I),
            f"one log line says pid {pid} runs a Python profd cannot read (got {lines[:4]})")


# ---- the interpreters ------------------------------------------------------------------------

def interpreters():
    """[(label, argv prefix or None, why not)] for every interpreter the test profiles."""
    out = []
    for v in ("3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"):
        mm = v.rsplit(".", 1)[0]
        exe = os.path.join(PYENV, v, "bin", "python" + mm)
        out.append((f"{v}-shared", [exe] if os.access(exe, os.X_OK) else None, f"{exe} missing"))
    exe = "/usr/bin/python3.11"
    out.append(("3.11-debian-static", [exe] if os.access(exe, os.X_OK) else None,
                f"{exe} missing"))
    r = subprocess.run([FETCH], capture_output=True, text=True, timeout=600)
    if r.returncode == 0:
        wrapper = r.stdout.strip().splitlines()[-1]
        out.append(("3.14-debian-static", [wrapper], None))
        shared = wrapper + "-shared"
        out.append(("3.14-debian-shared", [shared] if os.access(shared, os.X_OK) else None,
                    f"{shared} not built: {r.stderr.strip()}"))
    else:
        why = f"fetch-python exited {r.returncode}: {r.stderr.strip()}"
        out.append(("3.14-debian-static", None, why))
        out.append(("3.14-debian-shared", None, why))
    return out


def run_workload(argv, *args, timeout=120):
    p = subprocess.Popen([*argv, WORKLOAD, *map(str, args)], stdout=subprocess.DEVNULL)
    try:
        rc = p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = "timeout"
    return p.pid, rc


def profile_one(d, label, argv, tmp):
    """One interpreter's two runs and their checks: a Checks."""
    c = Checks(label, show_ok=VERBOSE)
    out = os.path.join(tmp, f"{label}.json")
    pid, rc = run_workload(argv, "threads", SECONDS, out)
    if not c.check(rc == 0, f"workload ran (exit {rc})"):
        return c
    time.sleep(0.5)
    f = d.folded("--pid", str(pid))
    with open(out) as fp:
        info = json.load(fp)
    if VERBOSE:
        log(f"[{label}] Python {'.'.join(map(str, info['version']))}, pid {pid}, "
            f"{total(f)} samples; timed CPU {info['cpu']}; top stacks:\n{top_stacks(f, n=6)}")
    check_threads(c, f, info)

    pid, rc = run_workload(argv, "deep", DEEP_SECONDS)
    if not c.check(rc == 0, f"deep workload ran (exit {rc})"):
        return c
    time.sleep(0.5)
    f = d.folded("--pid", str(pid))
    check_deep(c, f, info)
    c.check(d.proc.poll() is None and d.ping(), "the daemon is alive after the deep stacks")
    return c


def profile_interpreter(d, label, argv, tmp, checks):
    """
    Profile one interpreter; when a check fails, once more. The checks are statistical (CPU
    splits to 5 points, 70% of the expected samples) and a shared machine has stalled a run
    past them; a real defect fails both runs, and both runs' failures are printed.
    """
    c = profile_one(d, label, argv, tmp)
    if c.failed:
        log(f"[{label}] {len(c.failed)} checks failed; profiling it once more")
        c = profile_one(d, label + " (second run)", argv, tmp)
    log(f"[{label}] {c.passed} checks passed, {len(c.failed)} failed")
    checks.append(c)


def main():
    require_root()
    old = os.path.join(PYENV, "3.7.16", "bin", "python3.7")
    ci = os.environ.get("CI") == "true"
    todo = interpreters()
    missing = [(label, why) for label, argv, why in todo if argv is None]
    for label, why in missing:
        log(f"{'FAIL' if ci else 'SKIP'}: [{label}] {why}")
    if len(missing) == len(todo):
        skip("no Python interpreter to profile")
    checks = []
    with Daemon("--frequency", str(FREQ)) as d:
        for label, argv, _ in todo:
            if argv is not None:
                profile_interpreter(d, label, argv, d.tmp, checks)
        if os.access(old, os.X_OK):
            c = Checks("3.7.16-unsupported")
            checks.append(c)
            pid, rc = run_workload([old], "threads", SECONDS, os.path.join(d.tmp, "old.json"))
            if c.check(rc == 0, f"workload ran (exit {rc})"):
                time.sleep(0.5)
                check_unsupported(c, d.folded("--pid", str(pid)), d.log_text(), pid)
        else:
            log(f"{'FAIL' if ci else 'SKIP'}: [3.7.16-unsupported] {old} missing")
            missing.append(("3.7.16-unsupported", "missing"))
        c = Checks("daemon")
        checks.append(c)
        c.check(d.proc.poll() is None and d.ping(), "the daemon is alive at the end")

    bad = [(c.label, w) for c in checks for w in c.failed]
    log(f"{sum(c.passed for c in checks)} passed, {len(bad)} failed")
    for label, what in bad:
        log(f"  failed: [{label}] {what}")
    if bad:
        fail(f"{len(bad)} Python checks failed")
    if missing and ci:
        fail(f"interpreters missing in CI: {[m[0] for m in missing]}")
    log("PASS")


# ---- self-check: the checks on handcrafted profiles -------------------------------------------

def _info(version):
    r = subprocess.run([sys.executable, WORKLOAD, "lines"], capture_output=True, text=True,
                       check=True)
    info = json.loads(r.stdout)
    info["version"] = list(version)
    info["cpu"] = {"Worker.compute": 2.0, "outer.<locals>.inner": 1.2, "numbers": 0.8}
    return info


def _good_threads(info, modern):
    """A right profile of `workload.py threads` at 199 Hz for info's CPU times."""
    hot = info["hot"]
    rng = info["functions"]
    nm = lambda q: shown_name(q, modern)
    py = lambda q, line: f"{nm(q)} (workload.py:{line})"
    base = ["_start", "__libc_start_main", "main", "Py_BytesMain", "_PyEval_EvalFrameDefault"]
    thr = ["clone3", "start_thread", "thread_run", "<module> (workload.py:170)",
           "_bootstrap (threading.py:995)", "_bootstrap_inner (threading.py:1038)",
           "run (threading.py:975)", py("run_threads.<locals>.body", 120)]
    loop = thr + [py("cpu_loop", rng["cpu_loop"][0] + 8), "<lambda> (workload.py:70)"]
    f = {}
    f[";".join(loop + [py("Worker.compute", hot["Worker.compute"][1])])] = 300
    f[";".join(loop + [py("Worker.compute", hot["Worker.compute"][0])])] = 98
    f[";".join(loop + [py("outer", rng["outer"][1]), py("outer.<locals>.inner",
                                                       hot["outer.<locals>.inner"][1])])] = 239
    f[";".join(loop + [py("drain", rng["drain"][0] + 2), "gen_send_ex2",
                       py("numbers", hot["numbers"][1])])] = 150
    f[";".join(loop + [py("drain", rng["drain"][0] + 2)])] = 9
    f[";".join(loop + [py("cpu_loop", rng["cpu_loop"][0] + 9)])] = 5
    hl = thr + [py("hash_loop", rng["hash_loop"][0] + 3)]
    f[";".join(hl + ["_hashlib_HASH", "EVP_DigestUpdate",
                     "[unknown] (libcrypto.so.3+0x29c3c2)"])] = 600
    f[";".join(hl + ["[unknown] (libcrypto.so.3+0x29c47f)", "asm_sysvec_apic_timer_interrupt_[k]"
                     ])] = 30
    f[";".join(["[unknown] (libcrypto.so.3+0x29c3a6)"])] = 20
    f[";".join(base + [py("idle_wait", rng["idle_wait"][0] + 2), "clock_nanosleep"])] = 3
    return f


def _good_deep(info, modern):
    r = info["functions"]["recurse"]
    rec = [f"recurse (workload.py:{r[0] + 2})"] * 127 + [f"recurse (workload.py:{r[0] + 6})"]
    return {";".join(["[truncated]"] + rec): 700,
            ";".join(["main", "[truncated]"] + rec[:-1] + [f"recurse (workload.py:{r[0] + 7})"]):
            80, "main;Py_BytesMain": 3}


def self_check():
    results = []

    def expect(label, fn, want_fail):
        c = Checks(label, quiet=True)
        fn(c)
        ok = bool(c.failed) == bool(want_fail) and (not want_fail or any(
            re.search(want_fail, w) for w in c.failed))
        results.append(ok)
        print(f"{'ok' if ok else 'WRONG'}: {label}: {len(c.failed)} failed"
              + (f" ({c.failed})" if c.failed else ""))

    for version in ((3, 12, 1), (3, 9, 18)):
        modern = version >= (3, 11)
        info = _info(version)
        good = _good_threads(info, modern)
        v = "%d.%d" % version[:2]
        expect(f"{v} right profile", lambda c: check_threads(c, good, info), None)

        def mutate(fn):
            return {fn(s): k for s, k in good.items()}

        hot_line = info["hot"]["Worker.compute"][1]
        name = shown_name("Worker.compute", modern)
        bad = mutate(lambda s: s.replace(f"{name} (workload.py:{hot_line})",
                                         f"{name} (workload.py:{info['functions']['numbers'][0]})"))
        expect(f"{v} line outside compute", lambda c: check_threads(c, bad, info),
               "line inside its function")
        bad = mutate(lambda s: s.replace("(workload.py:", "(/src/tests/workload.py:"))
        expect(f"{v} full path", lambda c: check_threads(c, bad, info), "base name")
        if modern:
            bad = mutate(lambda s: s.replace("Worker.compute (", "compute ("))
            expect(f"{v} unqualified name", lambda c: check_threads(c, bad, info), "qualified")
        bad = dict(good)
        k = next(s for s in bad if "inner" in s)
        bad[k] += 200
        expect(f"{v} split off by 10 points", lambda c: check_threads(c, bad, info), "share")
        bad = mutate(lambda s: s.replace("_hashlib_HASH;EVP_DigestUpdate;", "").replace(
            "[unknown] (libcrypto.so.3+0x29c3c2)", "[unknown] (0x7f0012345678)")
            .replace("libcrypto.so.3+0x29c47f", "0x7f00123456aa"))
        expect(f"{v} no hash frames above hash_loop", lambda c: check_threads(c, bad, info),
               "native hash frames")
        bad = {(s.split(";")[-1] if "hash_loop" in s else s): k for s, k in good.items()}
        expect(f"{v} hash thread lost its Python frames", lambda c: check_threads(c, bad, info),
               "hash_loop")
        bad = {s: k for s, k in good.items() if "numbers (" not in s}
        bad[";".join(s for s in next(iter(good)).split(";")[:9])
            + f";{shown_name('drain', modern)} (workload.py:{info['functions']['drain'][0] + 2})"] \
            = 150
        expect(f"{v} generator frame missing", lambda c: check_threads(c, bad, info),
               "numbers")
        bad = {s: max(1, k // 3) for s, k in good.items()}
        expect(f"{v} too few samples", lambda c: check_threads(c, bad, info), "70%")

        deep = _good_deep(info, modern)
        expect(f"{v} deep right", lambda c: check_deep(c, deep, info), None)
        bad = {s.replace("[truncated];", ""): k for s, k in deep.items()}
        expect(f"{v} deep not marked", lambda c: check_deep(c, bad, info), "truncated")
        bad = {";".join(s.split(";")[:60]): k for s, k in deep.items()}
        expect(f"{v} deep cut at 60", lambda c: check_deep(c, bad, info), "128")

    native = {"_start;main;Py_BytesMain;_PyEval_EvalFrameDefault;sha256_block_data_order": 300,
              "start_thread;t_bootstrap;_PyEval_EvalFrameDefault": 200}
    log1 = "profd: info: python: pid 4242: CPython 3.7 is not supported, native frames only\n"
    expect("unsupported right", lambda c: check_unsupported(c, native, log1, 4242), None)
    expect("unsupported, no log line", lambda c: check_unsupported(c, native, "", 4242),
           "one log line")
    expect("unsupported, logged twice",
           lambda c: check_unsupported(c, native, log1 + log1, 4242), "one log line")
    bad = dict(native)
    bad["start_thread;compute (workload.py:38)"] = 3
    expect("unsupported with a Python frame", lambda c: check_unsupported(c, bad, log1, 4242),
           "Python-looking")

    print(f"self-check: {sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-check"]:
        sys.exit(self_check())
    main()
