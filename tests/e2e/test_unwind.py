#!/usr/bin/env python3
# Whole native stacks without frame pointers: profd walks user stacks from the binaries' CFI.
# Every fixture is built by gcc and by clang at -O2 -fomit-frame-pointer (e2e.cmake), so a frame
# pointer walk cannot link their frames. Each run profiles one process with `profd --pid` at
# FREQ Hz for RUN seconds and looks only at the last WINDOW (a process's first samples fall back
# to frame pointers until its tables are loaded):
#  - chain (n = 2000: time in leaf; n = 50: more in libc's snprintf): 95% of the samples are whole,
#    _start;__libc_start_main;...;main;c1;c2;c3;{leaf or libc} with no frame missing;
#  - signal: a SIGPROF handler (on_prof;h1;h2;spin) above the chain it interrupted, the signal
#    frame (__restore_rt) between them: 90% of the handler's samples are whole;
#  - recurse: 200 frames deep the stack is cut at the limit and marked [truncated] (status counts
#    truncated walks); 20 deep it is whole, with each of the 21 rec frames;
#  - spawn: posix_spawn and vfork of /bin/true in a loop beside the chain: the daemon and the
#    fixture live on, the main thread's stacks stay whole;
#  - stripped: the chain with its CFI only in a separate debug file (.debug_frame), found by the
#    debug link: whole as the others;
#  - python: Debian's /usr/bin/python3.11 and pyenv's 3.11/3.12 running a loop that calls into
#    hashlib: 95% of the samples reach _start through Py_BytesMain, the Python frames merged above
#    the interpreter's entry in the right order.
# For every run: a stack that does not reach its root is marked [truncated] (honest stacks), and
# `profctl status` shows the walks' end reasons, the same in its text and its JSON.
#
#  - drap: the chain whose c3 realigns its stack with a DRAP register (gcc: CFA = *(rbp - 24),
#    rbp at rbp + 0): whole as the chain;
#  - jit: the chain whose c3 calls machine code in anonymous executable memory (no perf map, no
#    CFI; oneDNN's preamble, then rbp a general register, a 0x398-byte frame holding a stale
#    return address): 95% of the samples are whole down to the root with the JIT frame as the
#    leaf (left by the walk's stack scan, which status counts, passing over the stale word), and
#    no walk that used the scan ends short;
#  - jitfp: as jit, but c3 keeps a frame pointer (CFA = rbp + 16, so leaving c3 needs the rbp
#    the leaf saved) and snprintf's stale frames lie in the leaf's frame: as jit;
#  - lld: the chain linked by lld, whose executable segment starts in the page where the
#    read-only one ends (as numpy's OpenBLAS after auditwheel): whole as the chain;
# Usage: test_unwind.py [chain|drap|jit|jitfp|lld|signal|recurse|spawn|stripped|python]...   (default: all)
# `test_unwind.py --self-check` runs the stack checks on handcrafted stacks (no root, no daemon):
# each must pass on a whole stack and fail on stacks broken the ways walks break.
# PROFD_UNWIND_COMPILERS=gcc,clang picks the fixtures' compilers.
import collections
import json
import os
import re
import subprocess
import sys
import threading
import time

from profd_e2e import *

FREQ = 999
RUN = 7.0  # seconds each process is profiled
WINDOW = "4s"  # the part looked at: the first seconds warm the tables up
WHOLE = 0.95  # chain, spawn, stripped, recurse (shallow) and python samples
WHOLE_SIGNAL = 0.90  # the handler's samples
MIN_SAMPLES = 400  # in the window; a loaded 2-CPU machine gives the fixture a fraction of a CPU
HONEST = 0.995  # samples that reach their root or say they do not
MERGED = 0.90  # python samples with their Python frames merged above Py_BytesMain
DEEP, SHALLOW = 200, 20  # unwind_recurse's arguments

CHAIN = ["main", "c1", "c2", "c3", "leaf"]
HANDLER = ["on_prof", "h1", "h2", "spin"]
# The bottom of a main thread's stack: _start's CFI says its return address is undefined; glibc
# names its start-up function __libc_start_main, __libc_start_main_impl (debug file) or alike.
ROOT = re.compile(r"^(_start|__libc_start_main\w*)(@.*)?$")
# Between the root and main: more of glibc's start-up, named or not (no libc debug file).
START = re.compile(r"^(_start|__libc_start\w*(@.*)?|\[unknown\] \(libc\.so[^)]*\)|"
                   r"libc\.so[.\d]*\+0x[0-9a-f]+)$")
# ...and of another thread's: glibc's clone marks its child's return address undefined.
# (libc's debug file names its internal aliases __GI_*.)
THREAD_ROOT = re.compile(r"^(__GI_)?(__clone3?|clone3?|start_thread)(@.*)?$")
# The signal trampoline: named by libc's debug file, or by module and offset without one.
TRAMPOLINE = re.compile(r"^(__restore_rt|.*libc\.so[.\d]*\+0x[0-9a-f]+\)?)$")
PYFRAME = re.compile(r"^(?P<name>.+) \((?P<file>[^()]*\.py)(?::(?P<line>\d+))?\)$")
HASH_NATIVE = re.compile(r"sha256|sha2|SHA256|libcrypto|_hashlib", re.I)
TRUNCATED = "[truncated]"

WORK_PY = '''import hashlib


def f(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def work():
    data = b"x" * (1 << 20)
    while True:
        f(20000)
        hashlib.sha256(data).digest()


work()
'''

FAILED = []
SUMMARY = []


def expect(cond, what):
    """A check that does not stop the test: every run is measured and printed."""
    if cond:
        log(f"ok: {what}")
    else:
        log(f"FAIL: {what}")
        FAILED.append(what)
    return cond


def pct(a, b):
    return 100.0 * a / b if b else 0.0


# ---- what a stack shows -----------------------------------------------------------------------

def user_frames(frames):
    """The user part of a folded stack (root first): kernel frames and markers ([truncated],
    [no user stack], a thread state) left out; [unknown] (MODULE+0xADDR) frames kept."""
    return [x for x in frames
            if not x.endswith("_[k]") and (not x.startswith("[") or x.startswith("[unknown]"))]


def is_chain_prefix(u, names=CHAIN):
    """u's frames of the names are a prefix of names, one after the other and after the
    start-up frames only: the whole stack of a sample in any of them (libc frames may follow
    c3)."""
    idx = [i for i, x in enumerate(u) if x in names]
    got = [u[i] for i in idx]
    if not got or got != names[:len(got)]:
        return False
    if idx != list(range(idx[0], idx[0] + len(idx))):
        return False
    return all(START.match(x) for x in u[:idx[0]])


def root_ok(frames, u):
    return TRUNCATED not in frames and bool(u) and bool(ROOT.match(u[0]))


def chain_whole(frames):
    u = user_frames(frames)
    return root_ok(frames, u) and is_chain_prefix(u)


# The leaf of unwind_jit: its anonymous mapping, named as JIT code or as an unknown address.
JIT_LEAF = re.compile(r"^(\[jit\]|\[unknown\]) \(\[anon\]")


def jit_whole(frames):
    """Reaches the root through main;c1;c2;c3, the JIT frame last and right above c3."""
    u = [x for x in user_frames(frames) if not JIT_LEAF.match(x)]
    return (root_ok(frames, u) and is_chain_prefix(u, CHAIN[:4]) and len(u) > 0 and
            u[-1] == "c3" and len(frames) > 0 and bool(JIT_LEAF.match(frames[-1])))


def full_chain(frames):
    return has_chain(user_frames(frames), CHAIN[:4])


def handler_whole(frames):
    """_start;...;main;c1;...;TRAMPOLINE;on_prof;h1;h2;spin: the handler's frames above the
    signal frame, the interrupted chain below it, whole."""
    u = user_frames(frames)
    hi = next((i for i, x in enumerate(u) if x in HANDLER), -1)
    if hi < 2 or not root_ok(frames, u):
        return False
    if u[hi:] != HANDLER[:len(u) - hi] or u[hi] != HANDLER[0]:
        return False
    return bool(TRAMPOLINE.match(u[hi - 1])) and is_chain_prefix(u[:hi - 1])


def deep_marked(frames):
    """A sample at the bottom of the deep recursion: cut at the limit and marked."""
    return TRUNCATED in frames and frames.count("rec") >= 100


def shallow_whole(frames):
    """_start;...;main;rec x (SHALLOW + 1);spin_shallow[;leaf]: every rec frame there."""
    u = user_frames(frames)
    if not root_ok(frames, u) or "main" not in u:
        return False
    i = u.index("main")
    rest = u[i + 1:]
    return (all(START.match(x) for x in u[:i]) and
            rest[:SHALLOW + 1] == ["rec"] * (SHALLOW + 1) and
            rest[SHALLOW + 1:SHALLOW + 2] == ["spin_shallow"])


def py_idx(u):
    """Indices of work.py's Python frames in u."""
    out = []
    for i, x in enumerate(u):
        m = PYFRAME.match(x)
        if m and m.group("file") == "work.py":
            out.append(i)
    return out


def py_reach(frames):
    """A Python sample whose walk reached _start through the interpreter's entry."""
    u = user_frames(frames)
    return root_ok(frames, u) and "Py_BytesMain" in u


def py_merged(frames):
    """...with work.py's Python frames merged above Py_BytesMain."""
    u = user_frames(frames)
    idx = py_idx(u)
    return py_reach(frames) and bool(idx) and u.index("Py_BytesMain") < idx[0]


def py_ordered(frames):
    """work.py's frames read <module>;work;f (a prefix of it, where the sample is)."""
    u = user_frames(frames)
    names = [PYFRAME.match(u[i]).group("name") for i in py_idx(u)]
    return names == ["<module>", "work", "f"][:len(names)]


def py_has(frames):
    return bool(py_idx(user_frames(frames)))


def in_hash(frames):
    return any(HASH_NATIVE.search(x) for x in user_frames(frames))


def hash_whole(frames):
    """A sample in the hash's native code: whole, under work (work.py:LINE)."""
    return py_merged(frames) and any(x.startswith("work (work.py") for x in frames)


def in_handler(frames):
    return any(x in HANDLER for x in frames)


def honest(frames):
    """Reaches the bottom of its thread's stack, or says it does not."""
    if TRUNCATED in frames:
        return True
    u = user_frames(frames)
    return bool(u) and bool(ROOT.match(u[0]) or THREAD_ROOT.match(u[0]))


def share(folded, pred, within=lambda fr: True):
    """(samples matching pred among those matching within, samples matching within)."""
    n = total(folded, within)
    return total(folded, lambda fr: within(fr) and pred(fr)), n


def show_misses(folded, pred, within=lambda fr: True, n=6, width=500):
    rows = sorted(((c, s) for s, c in folded.items()
                   if within(s.split(";")) and not pred(s.split(";"))), reverse=True)[:n]
    for c, s in rows:
        log(f"    {c:6d} {s if len(s) <= width else '...' + s[-width:]}")


def measure(label, folded, what, pred, within, need):
    """Checks that pred holds for at least need of the samples within; prints the share."""
    k, n = share(folded, pred, within)
    SUMMARY.append((label, what, k, n))
    ok = expect(n > 0 and k >= need * n,
                f"{label}: {what}: {pct(k, n):.1f}% ({k}/{n}), need {100 * need:g}%")
    if not ok:
        show_misses(folded, pred, within)
    return ok


# ---- profd's counters -------------------------------------------------------------------------

def norm(key):
    return re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")


def unwind_text(text):
    """{reason: count} of status's 'unwind:' line, any order; None without one."""
    for line in text.splitlines():
        m = re.match(r"^unwind:\s+(.*)$", line)
        if m:
            return {norm(k): int(v) for k, v in re.findall(r"([A-Za-z][\w-]*)\s+(\d+)",
                                                         m.group(1))}
    return None


def unwind_json(doc):
    """{reason: count} under status --json's "unwind": an object of counts, or a list of
    {reason|name, count|samples} objects; None without one."""
    u = doc.get("unwind")
    if isinstance(u, dict):
        return {norm(k): v for k, v in u.items() if isinstance(v, int)}
    if isinstance(u, list):
        out = {}
        for e in u:
            if isinstance(e, dict):
                name = e.get("reason", e.get("name"))
                count = e.get("count", e.get("samples"))
                if isinstance(name, str) and isinstance(count, int):
                    out[norm(name)] = count
        return out
    return None


def check_status(label, d, need_truncated=False, need_insn=True):
    """The walks' end reasons in status, text and JSON alike (the profiled process has exited,
    so the counters stand still). Returns the counters or None."""
    t = d.ctl("status")
    j = d.ctl("status", "--json")
    if not expect(t.returncode == 0 and j.returncode == 0,
                  f"{label}: profctl status and status --json exit 0 ({t.stderr.strip()} "
                  f"{j.stderr.strip()})"):
        return None
    text = unwind_text(t.stdout)
    try:
        js = unwind_json(json.loads(j.stdout))
    except ValueError:
        js = None
    if not expect(text is not None, f"{label}: status shows an 'unwind:' line"):
        log("  " + t.stdout.replace("\n", "\n  "))
    expect(js is not None, f"{label}: status --json has \"unwind\"")
    if text is None:
        return None
    log(f"  {label}: unwind {text}")
    if js is not None:
        # JSON has the tables' counters too: compare the reasons the text line gives.
        js = {k: js.get(k) for k in text}
        expect(text == js, f"{label}: status text and JSON give the same walk counts "
               f"({text} vs {js})")
    expect(text.get("bottom", 0) > 0, f"{label}: walks reached the bottom ({text.get('bottom')})")
    # Functions without CFI analysed from their code (the fixtures' _init, _fini, frame_dummy...):
    # counted apart, text and JSON alike. need_insn=False where every function may have CFI
    # (Debian's python3.11 and the libraries it maps have none without).
    m = re.search(r"from machine code: (\d+) functions without CFI, (\d+) rows", t.stdout)
    ju = json.loads(j.stdout).get("unwind", {}) if js is not None else {}
    if expect(m is not None, f"{label}: status shows a 'from machine code:' line"):
        got = (int(m.group(1)), int(m.group(2)))
        expect((got[0] > 0 or not need_insn) and
               got == (ju.get("insn_functions"), ju.get("insn_rows")),
               f"{label}: functions analysed from their code, text {got} and JSON "
               f"({ju.get('insn_functions')}, {ju.get('insn_rows')})")
    if need_truncated:
        expect(text.get("truncated", 0) > 0,
               f"{label}: status counts truncated walks ({text.get('truncated')})")
    return text


# ---- one profiled process ---------------------------------------------------------------------

class Run:
    def __init__(self, folded, thread_folded, alive, daemon_alive, output):
        self.folded = folded  # the process, the last WINDOW
        self.thread = thread_folded  # its main thread only
        self.alive = alive  # the process lived through the run
        self.daemon_alive = daemon_alive
        self.output = output  # its standard output, lines


def profile(label, argv, after=None, cwd=None):
    """Profiles argv for RUN seconds. after(d, run): checks while the daemon still runs, after
    the process was killed."""
    log(f"---- {label}: {' '.join(argv)}")
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         cwd=cwd)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    try:
        with Daemon("--pid", str(p.pid), "--frequency", str(FREQ)) as d:
            time.sleep(RUN)
            alive = p.poll() is None
            f = d.folded("--pid", str(p.pid), "--since", WINDOW)
            ft = d.folded("--pid", str(p.pid), "--tid", str(p.pid), "--since", WINDOW)
            p.kill()
            p.wait()
            time.sleep(0.5)  # the last samples through the ring
            run = Run(f, ft, alive, d.proc.poll() is None, lines)
            if after:
                after(d, run)
            run.daemon_alive = run.daemon_alive and d.proc.poll() is None
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    n = total(run.folded)
    log(f"  {n} samples in the last {WINDOW}, {len(run.folded)} stacks; top:")
    for s, c in sorted(run.folded.items(), key=lambda kv: -kv[1])[:5]:
        log(f"    {c:6d} {s if len(s) <= 400 else '...' + s[-400:]}")
    expect(alive, f"{label}: the process lived through the run (output: {lines[-3:]})")
    expect(run.daemon_alive, f"{label}: profd lived through the run")
    expect(n >= MIN_SAMPLES, f"{label}: at least {MIN_SAMPLES} samples in the window ({n})")
    measure(label, run.folded, "stacks that reach their root or are marked [truncated]", honest,
            lambda fr: True, HONEST)
    return run


def fixture_path(name, cc):
    return fixture(f"unwind_{name}_{cc}")


def run_chain(cc):
    for n in (2000, 50):
        label = f"chain {cc} n={n}"
        r = profile(label, [fixture_path("chain", cc), str(n)],
                    after=lambda d, run, label=label: check_status(label, d))
        measure(label, r.folded, "whole stacks", chain_whole, lambda fr: True, WHOLE)
        measure(label, r.folded, "main;c1;c2;c3 (in leaf, c3 or libc)", full_chain,
                lambda fr: True, 0.90)


def run_drap(cc):
    # gcc's build of c3 has DRAP CFI (CFA = *(rbp - N)); without DRAP rows the test proves nothing.
    path = fixture_path("drap", cc)
    if cc == "gcc":
        rows = subprocess.run([os.path.join(BUILD, "bin", "profd-cfi"), path], check=True,
                              capture_output=True, text=True).stdout
        expect(" DRAP " in rows, f"drap {cc}: the fixture's table has DRAP rows")
    label = f"drap {cc}"
    r = profile(label, [path], after=lambda d, run: check_status(label, d))
    measure(label, r.folded, "whole stacks", chain_whole, lambda fr: True, WHOLE)


def run_jit(cc):
    label = f"jit {cc}"
    counts = []

    def after(d, run):
        t = check_status(label, d)
        counts.append(t or {})

    r = profile(label, [fixture_path("jit", cc)], after=after)
    measure(label, r.folded, "whole stacks, the JIT frame the leaf", jit_whole,
            lambda fr: True, WHOLE)
    check_scan(label, counts[-1] if counts else {})


def check_scan(label, t):
    """The scan's counters of a JIT fixture's run: walks left the leaf by the scan, passed over
    the stale return address in the leaf's frame (its caller's frame does not fit) and none of
    them ended short: the leaf's prologue and epilogue, where rbp is still (or again) c3's,
    are left by the frame-pointer step, not by the scan."""
    expect(t.get("scanned", 0) > 0,
           f"{label}: status counts walks that left JIT code by a scan ({t.get('scanned')})")
    expect(t.get("scan_rejects", 0) > 0,
           f"{label}: the scan passed over the stale return address ({t.get('scan_rejects')})")
    expect(t.get("scan_short", 0) == 0,
           f"{label}: walks that used the scan reach the bottom (scan-short "
           f"{t.get('scan_short')} of {t.get('scanned')})")


def run_jitfp(cc):
    # c3's rbp-based CFA needs c3's rbp, which the leaf saved below c3's return address and
    # replaced by a constant: a scan that keeps rbp, or takes the wrong saved word, leaves the
    # leaf into c3 and then ends the walk (bad-frame) in c3. snprintf's stale frames (return
    # addresses after direct calls) lie in the leaf's frame too.
    label = f"jitfp {cc}"
    counts = []

    def after(d, run):
        t = check_status(label, d)
        counts.append(t or {})

    r = profile(label, [fixture_path("jitfp", cc)], after=after)
    measure(label, r.folded, "whole stacks, the JIT frame the leaf", jit_whole,
            lambda fr: True, WHOLE)
    check_scan(label, counts[-1] if counts else {})


def run_lld(cc):
    # lld packs the segments: the executable one starts in the read-only one's last page, at an
    # address a page further. A wrong bias for that mapping breaks every walk through it.
    if cc != "clang":
        return
    path = fixture("unwind_chain_lld")
    loads = subprocess.run(["readelf", "-lW", path], check=True, capture_output=True,
                           text=True).stdout
    segs = [ln.split() for ln in loads.splitlines() if ln.split()[:1] == ["LOAD"]]
    x = [sg for sg in segs if "E" in sg[6:-1]]
    expect(x and int(x[0][1], 16) & ~4095 != int(x[0][2], 16) & ~4095,
           "lld: the executable segment's page offset and address differ (the layout tested)")
    label = "chain lld"
    r = profile(label, [path, "2000"], after=lambda d, run: check_status(label, d))
    measure(label, r.folded, "whole stacks", chain_whole, lambda fr: True, WHOLE)


def run_signal(cc):
    label = f"signal {cc}"
    r = profile(label, [fixture_path("signal", cc)],
                after=lambda d, run: check_status(label, d))
    k, n = share(r.folded, in_handler)
    expect(k >= 0.2 * n, f"{label}: the handler runs ({pct(k, n):.1f}% of the samples)")
    measure(label, r.folded, "handler samples whole (chain;trampoline;on_prof;h1;h2;spin)",
            handler_whole, in_handler, WHOLE_SIGNAL)
    measure(label, r.folded, "other samples whole", chain_whole,
            lambda fr: not in_handler(fr), WHOLE)
    tramp = collections.Counter()
    for s, c in r.folded.items():
        u = user_frames(s.split(";"))
        hi = next((i for i, x in enumerate(u) if x == HANDLER[0]), -1)
        if hi > 0:
            tramp[u[hi - 1]] += c
    log(f"  {label}: frames below on_prof: {tramp.most_common(4)}")


def run_recurse(cc):
    label = f"recurse {cc}"
    r = profile(label, [fixture_path("recurse", cc), str(DEEP), str(SHALLOW)],
                after=lambda d, run: check_status(label, d, need_truncated=True))
    deep = lambda fr: "spin_deep" in fr
    shallow = lambda fr: "spin_shallow" in fr
    measure(label, r.folded, f"{DEEP} deep: marked [truncated], 100+ rec frames kept",
            deep_marked, deep, WHOLE)
    measure(label, r.folded, f"{SHALLOW} deep: whole, main;rec x {SHALLOW + 1};spin_shallow",
            shallow_whole, shallow, WHOLE)


def run_spawn(cc):
    label = f"spawn {cc}"

    def after(d, run):
        check_status(label, d)
        r = d.ctl("status")
        expect(r.returncode == 0, f"{label}: profd answers after the spawn loop")

    r = profile(label, [fixture_path("spawn", cc)], after=after)
    counts = [int(m.group(1)) for m in (re.match(r"^spawned (\d+)$", x.strip())
                                        for x in r.output) if m]
    expect(counts and counts[-1] >= 100,
           f"{label}: the fixture started children ({counts[-1] if counts else 0})")
    measure(label, r.thread, "main thread: whole stacks", chain_whole, lambda fr: True, WHOLE)
    k, n = share(r.folded, lambda fr: "spawn_one" in fr)
    log(f"  {label}: {n} samples in the spawner thread's spawn_one")


def elf_fdes(path):
    """[(lo, hi)] of the FDEs of path's own .eh_frame and .debug_frame (-wN: readelf would
    follow the debug link and show the debug file's too)."""
    out = subprocess.run(["readelf", "-wN", "--debug-dump=frames", path], capture_output=True,
                         text=True).stdout
    return [(int(a, 16), int(b, 16)) for a, b in
            re.findall(r"FDE cie=\w+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", out)]


def elf_sections(path):
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True).stdout
    return dict(re.findall(r"\]\s+(\.\S+)\s+(\w+)", out))


def func_addrs(path, names):
    out = subprocess.run(["readelf", "-sW", path], capture_output=True, text=True).stdout
    got = {}
    for line in out.splitlines():
        w = line.split()
        if len(w) >= 8 and w[3] == "FUNC" and w[7] in names:
            got[w[7]] = int(w[1], 16)
    return got


def run_stripped(cc):
    label = f"stripped {cc}"
    exe = fixture_path("stripped", cc)
    dbg = os.path.join(os.path.dirname(exe), ".debug", f"unwind_stripped_{cc}.debug")
    # The fixture is what it claims: no symbols and no CFI of its own functions; both in the
    # debug file its .gnu_debuglink names.
    secs = elf_sections(exe)
    mine = sorted(x for x in secs if x in (".symtab", ".debug_frame", ".gnu_debuglink",
                                            ".eh_frame"))
    expect(".symtab" not in secs and ".debug_frame" not in secs and ".gnu_debuglink" in secs,
           f"{label}: stripped, with a debug link ({mine})")
    expect(os.path.exists(dbg) and elf_sections(dbg).get(".debug_frame") == "PROGBITS",
           f"{label}: {dbg} holds .debug_frame")
    addrs = func_addrs(dbg, CHAIN)
    expect(sorted(addrs) == sorted(CHAIN), f"{label}: the debug file names the chain ({addrs})")
    own = [n for n, a in addrs.items() if any(lo <= a < hi for lo, hi in elf_fdes(exe))]
    expect(not own, f"{label}: the binary's .eh_frame covers none of the chain ({own})")
    cover = [n for n, a in addrs.items() if any(lo <= a < hi for lo, hi in elf_fdes(dbg))]
    expect(sorted(cover) == sorted(CHAIN), f"{label}: the debug file's .debug_frame covers the "
           f"chain ({cover})")
    r = profile(label, [exe, "2000"], after=lambda d, run: check_status(label, d))
    measure(label, r.folded, "whole stacks", chain_whole, lambda fr: True, WHOLE)
    measure(label, r.folded, "main;c1;c2;c3 (in leaf, c3 or libc)", full_chain,
            lambda fr: True, 0.90)


def pythons():
    """Debian's static python3.11 and pyenv's 3.11 and 3.12 (shared libpython)."""
    want = {"3.11-debian-static", "3.11.7", "3.12.1"}
    return [(label, exe) for label, exe in cpythons() if label in want]


def run_python(tmp):
    script = os.path.join(tmp, "work.py")
    with open(script, "w") as f:
        f.write(WORK_PY)
    os.chmod(tmp, 0o755)
    found = pythons()
    expect(any(label == "3.11-debian-static" for label, _ in found) and len(found) >= 2,
           f"Debian's python3.11 and a pyenv CPython to test with ({[x for x, _ in found]})")
    for plabel, exe in found:
        label = f"python {plabel}"
        r = profile(label, [exe, script], after=lambda d, run, label=label:
                    check_status(label, d, need_insn=False), cwd=tmp)
        measure(label, r.folded, "samples reaching _start through Py_BytesMain", py_reach,
                lambda fr: True, WHOLE)
        measure(label, r.folded, "work.py frames merged above Py_BytesMain", py_merged,
                lambda fr: True, MERGED)
        measure(label, r.folded, "work.py frames in order <module>;work;f", py_ordered, py_has,
                0.99)
        k, n = share(r.folded, in_hash)
        expect(k > 0, f"{label}: samples in the hash's native code ({k})")
        measure(label, r.folded, "hash samples whole, under work (work.py)", hash_whole,
                in_hash, WHOLE)


# ---- self-check: the checks on handcrafted stacks ---------------------------------------------

LIBC_START = "_start;__libc_start_main_impl;__libc_start_call_main"


def self_check():
    """Each predicate on stacks as a right walk and as broken walks show them (no root, no
    daemon): a right one must pass, each broken one fail. Returns the exit code."""
    rec = lambda n: ";".join(["rec"] * n)
    py = "Py_BytesMain;Py_RunMain;_PyRun_AnyFileObject;_PyEval_EvalFrameDefault"
    cases = [
        (chain_whole, True, f"{LIBC_START};main;c1;c2;c3;leaf"),
        (chain_whole, True, f"{LIBC_START};main;c1;c2;c3;leaf;asm_sysvec_apic_timer_interrupt_[k]"),
        (chain_whole, True, f"{LIBC_START};main;c1;c2;c3;__snprintf;__vsnprintf_internal"),
        (chain_whole, True, f"_start;__libc_start_main;[unknown] (libc.so.6+0x271ca);main;c1"),
        (chain_whole, True, f"_start;__libc_start_main;libc.so.6+0x27180;main;c1;c2"),
        (chain_whole, False, "main;c1;c2;c3;leaf"),  # the walk stopped: no root
        (chain_whole, False, "__libc_start_call_main;main;c1;c2;c3;leaf"),  # ditto, unmarked
        (chain_whole, False, f"[truncated];{LIBC_START};main;c1;c2;c3;leaf"),
        (chain_whole, False, f"{LIBC_START};main;c1;c2;leaf"),  # c3 skipped (a frameless leaf)
        (chain_whole, False, f"{LIBC_START};main;c2;c3;leaf"),
        (chain_whole, False, f"{LIBC_START};main;c1;c1;c2;c3;leaf"),
        (chain_whole, False, f"{LIBC_START};main;[unknown] (unwind_chain+0x1234);c1;c2;c3"),
        (chain_whole, False, f"{LIBC_START};main;c1;c2;c3;leaf;c2"),
        (chain_whole, False, "leaf"),
        (chain_whole, False, "[no user stack];do_syscall_64_[k]"),
        (full_chain, True, f"{LIBC_START};main;c1;c2;c3;__vfprintf_internal"),
        (full_chain, False, f"{LIBC_START};main;c1;c2"),
        (honest, True, f"{LIBC_START};main;c1;c2;c3;leaf"),
        (honest, True, "[truncated];c3;leaf"),
        (honest, True, "clone3;start_thread;spawner;spawn_one;__spawni"),
        (honest, False, "c3;leaf"),
        (honest, False, "[unknown] (libc.so.6+0x1234);leaf"),
        (honest, False, "[no user stack];do_syscall_64_[k]"),
        (handler_whole, True,
         f"{LIBC_START};main;c1;c2;c3;leaf;__restore_rt;on_prof;h1;h2;spin"),
        (handler_whole, True,
         f"{LIBC_START};main;c1;c2;c3;__vfprintf_internal;__restore_rt;on_prof;h1;h2;spin"),
        (handler_whole, True,
         f"{LIBC_START};main;c1;[unknown] (libc.so.6+0x3c04f);on_prof;h1;h2"),
        (handler_whole, False, f"{LIBC_START};main;c1;c2;c3;leaf;on_prof;h1;h2;spin"),
        (handler_whole, False, "__restore_rt;on_prof;h1;h2;spin"),
        (handler_whole, False, f"{LIBC_START};main;c1;c2;c3;leaf;__restore_rt;on_prof;h2;spin"),
        (handler_whole, False, f"{LIBC_START};main;c1;c3;leaf;__restore_rt;on_prof;h1;h2;spin"),
        (handler_whole, False,
         f"[truncated];{LIBC_START};main;c1;c2;c3;leaf;__restore_rt;on_prof;h1;h2;spin"),
        (handler_whole, False, "on_prof;h1;h2;spin"),
        (deep_marked, True, f"[truncated];{rec(125)};spin_deep"),
        (deep_marked, False, f"{rec(125)};spin_deep"),
        (deep_marked, False, "[truncated];rec;spin_deep"),
        (shallow_whole, True, f"{LIBC_START};main;{rec(SHALLOW + 1)};spin_shallow"),
        (shallow_whole, False, f"{LIBC_START};main;{rec(SHALLOW)};spin_shallow"),
        (shallow_whole, False, f"{LIBC_START};main;{rec(SHALLOW + 2)};spin_shallow"),
        (shallow_whole, False, f"{rec(SHALLOW + 1)};spin_shallow"),
        (py_reach, True, f"{LIBC_START};main;{py};<module> (work.py:18);f (work.py:7)"),
        (py_reach, False, "<module> (work.py:18);work (work.py:15);f (work.py:7)"),
        (py_reach, False, f"[truncated];{LIBC_START};main;{py};<module> (work.py:18)"),
        (py_merged, True, f"{LIBC_START};main;{py};<module> (work.py:18);work (work.py:15)"),
        (py_merged, False, f"{LIBC_START};main;{py};_PyEval_EvalFrameDefault"),
        (py_merged, False, f"<module> (work.py:18);work (work.py:15);{LIBC_START};main;{py}"),
        (py_ordered, True, "x;<module> (work.py:18);work (work.py:15);f (work.py:7);y"),
        (py_ordered, True, "x;<module> (work.py:18);work (work.py:15);PyObject_Free"),
        (py_ordered, False, "x;<module> (work.py:18);f (work.py:7)"),
        (py_ordered, False, "x;work (work.py:15);<module> (work.py:18)"),
        (hash_whole, True, f"{LIBC_START};main;{py};<module> (work.py:18);work (work.py:15);"
                           "_hashlib_HASH_update;SHA256_Update;[unknown] (libcrypto.so.3+0x1f0)"),
        (hash_whole, False, "<module> (work.py:18);work (work.py:15);SHA256_Update"),
    ]
    bad = 0
    for pred, want, stack in cases:
        got = bool(pred(stack.split(";")))
        if got != want:
            bad += 1
            print(f"FAIL: {pred.__name__} is {got} on {stack[:200]}")
    # The counters, as status may print them.
    text = "samples: 1\nunwind:       bottom 1234, truncated 5, fp-fallback 12, no-mapping 0\n"
    want = {"bottom": 1234, "truncated": 5, "fp_fallback": 12, "no_mapping": 0}
    for got, what in ((unwind_text(text), "text"),
                      (unwind_text("unwind: truncated 5, fp-fallback 12, no-mapping 0, "
                                   "bottom 1234"), "text in another order"),
                      (unwind_json({"unwind": {"bottom": 1234, "truncated": 5,
                                               "fp_fallback": 12, "no_mapping": 0}}), "json"),
                      (unwind_json({"unwind": [{"reason": "bottom", "count": 1234},
                                               {"reason": "truncated", "count": 5},
                                               {"reason": "fp-fallback", "count": 12},
                                               {"reason": "no_mapping", "count": 0}]}),
                       "json list")):
        if got != want:
            bad += 1
            print(f"FAIL: unwind counters from {what}: {got}")
    for got, what in ((unwind_text("samples: 1\nunwind tables: 3 files, 1.2 MiB\n"),
                       "a tables line only"), (unwind_json({"samples": 1}), "json without")):
        if got is not None:
            bad += 1
            print(f"FAIL: unwind counters from {what}: {got}, not None")
    n = len(cases) + 6
    print(f"self-check: {n - bad} passed, {bad} failed")
    return 1 if bad else 0


def main():
    if sys.argv[1:] == ["--self-check"]:
        sys.exit(self_check())
    require_root()
    groups = sys.argv[1:] or ["chain", "drap", "jit", "jitfp", "lld", "signal", "recurse",
                              "spawn", "stripped", "python"]
    known = {"chain": run_chain, "drap": run_drap, "jit": run_jit, "jitfp": run_jitfp,
             "lld": run_lld,
             "signal": run_signal, "recurse": run_recurse,
             "spawn": run_spawn, "stripped": run_stripped, "python": None}
    bad = [g for g in groups if g not in known]
    if bad:
        fail(f"unknown group {bad}; known: {' '.join(known)}")
    compilers = os.environ.get("PROFD_UNWIND_COMPILERS", "gcc,clang").split(",")
    for g in groups:
        if g == "python":
            tmp = os.path.join(BUILD, "tests", "unwind-python")
            os.makedirs(tmp, exist_ok=True)
            run_python(tmp)
            continue
        for cc in compilers:
            known[g](cc)
    log("\n---- summary: share of samples (need in the check above)")
    for label, what, k, n in SUMMARY:
        log(f"  {label:28s} {pct(k, n):6.1f}%  {k:6d}/{n:<6d} {what}")
    if FAILED:
        log(f"\n{len(FAILED)} checks failed:")
        for w in FAILED:
            log(f"  {w}")
        sys.exit(1)
    log("PASS")


if __name__ == "__main__":
    main()
