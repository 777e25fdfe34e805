#!/usr/bin/env python3
# The unwind tables behind CFI stack walks (daemon/unwinder.c), against the real daemon and real
# processes; the stack checks are test_unwind.py's. Groups:
#  - cache: two processes of one fixture binary, one after the other under one profd: the
#    second builds no table (status `builds` unchanged), its mappings count as reused
#    (`cache_hits` grows), and both have whole stacks;
#  - evict: profd --unwind-memory 1M and, one after the other, Debian's python3.11 hashing
#    (libcrypto), a pyenv python and the chain, whose tables together exceed 1M: tables are
#    evicted, the loaded bytes stay within the bound, the daemon lives, and no stack is wrong:
#    each reaches its root or is marked [truncated]; the chain, last, is whole;
#  - dlopen: the chain loads a library while it runs (after the daemon described it) and spins
#    in it: the walk meets a pc outside the mappings it knows (no-mapping), the daemon reads them
#    again, and the library's samples are whole;
#  - zlib: Debian's python3.11 compressing: libz's static functions have no symbols, so its
#    frames read [unknown] (libz.so.1.2.13+0xADDR), ADDR the start of the function's FDE: few
#    distinct frames for hundreds of samples;
#  - manylibs: a process that maps 300 distinct libraries (copies of one, each with a build-id
#    of its own): status answers within 2 s all along the builds, 300+ tables, the progress
#    shows, and the stacks through the last library loaded are whole.
#
# Usage: test_unwind_tables.py [cache|evict|dlopen|zlib|manylibs]...   (default: all)
# PROFD_UNWIND_COMPILERS=gcc,clang picks the fixtures' compilers (cache, dlopen).
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

from profd_e2e import *
import test_unwind as uw
from test_unwind import expect, measure, share, pct, user_frames, honest, is_chain_prefix

FREQ = uw.FREQ
WHOLE = uw.WHOLE
LIBCHAIN = ["main", "c1", "c2", "c3", "lib_outer", "lib_inner"]
NLIBS = 300
STATUS_LATENCY = 2.0  # seconds a status may take while tables are built
MANY_DISTINCT_LIBZ = 40

ZLIB_PY = '''import zlib

data = b"".join(b"%d:%x;" % (i, i * 7919 % 65536) for i in range(100000))
while True:
    c = zlib.compress(data, 6)
    assert zlib.decompress(c) == data
'''


def unwind_status(d):
    """(the "unwind" object of status --json, seconds the call took); ({}, t) on an error."""
    t0 = time.monotonic()
    r = d.ctl("status", "--json", timeout=30)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        log(f"  status --json failed ({r.returncode}): {r.stderr.strip()}")
        return {}, dt
    try:
        u = json.loads(r.stdout).get("unwind")
    except ValueError:
        u = None
    return (u if isinstance(u, dict) else {}), dt


def brief(u):
    keys = ("tables", "table_bytes", "memory", "builds", "build_failed", "too_big", "evictions",
            "cache_hits", "processes", "queued", "busy_pid", "no_mapping", "no_table", "bottom",
            "truncated", "fp_fallback")
    return ", ".join(f"{k} {u.get(k, 0)}" for k in keys)


def settle(d, pid_alive, timeout=15.0):
    """Waits until the daemon describes a process and has nothing queued or in progress.
    Returns the last unwind status."""
    deadline = time.monotonic() + timeout
    u = {}
    while time.monotonic() < deadline:
        u, _ = unwind_status(d)
        if (u.get("processes", 0) >= 1 and not u.get("queued", 0) and not u.get("busy_pid", 0)
                and u.get("builds", 0) > 0):
            return u
        time.sleep(0.2)
    return u


class Proc:
    """A fixture process with its output lines collected by a thread."""

    def __init__(self, argv, stdin=None, cwd=None):
        log(f"  start: {' '.join(argv)}")
        self.p = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, cwd=cwd)
        self.pid = self.p.pid
        self.lines = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, text, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.lines:
                return True
            if self.p.poll() is not None:
                time.sleep(0.1)
                return text in self.lines
            time.sleep(0.05)
        return False

    def alive(self):
        return self.p.poll() is None

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def whole(names):
    def pred(frames):
        u = user_frames(frames)
        return uw.root_ok(frames, u) and is_chain_prefix(u, names)
    return pred


def in_lib(frames):
    return "lib_outer" in frames or "lib_inner" in frames


def show_top(folded, n=4):
    for s, c in sorted(folded.items(), key=lambda kv: -kv[1])[:n]:
        log(f"    {c:6d} {s if len(s) <= 300 else '...' + s[-300:]}")


def dlopen_path(cc):
    return fixture(f"unwind_dlopen_{cc}")


# ---- cache ------------------------------------------------------------------------------------

def run_cache(cc):
    label = f"cache {cc}"
    log(f"---- {label}")
    exe = dlopen_path(cc)
    a = Proc([exe])
    # The second waits on its standard input: off the CPU, so not sampled and not described
    # until released.
    b = Proc([exe, "--wait"], stdin=subprocess.PIPE)
    try:
        with Daemon("--pid", str(a.pid), "--pid", str(b.pid), "--frequency", str(FREQ)) as d:
            time.sleep(3)
            u1 = settle(d, a.alive)
            time.sleep(1)
            fa = d.folded("--pid", str(a.pid), "--since", "3s")
            log(f"  {label}: first process {a.pid}: {brief(u1)}")
            show_top(fa)
            measure(f"{label} first", fa, "whole stacks", whole(uw.CHAIN), lambda fr: True,
                    WHOLE)
            a.kill()
            time.sleep(1)
            u2, _ = unwind_status(d)
            # Built for the first, and kept loaded after it exited (processes back to 0).
            expect(u2.get("builds", 0) >= 3 and u2.get("tables", 0) == u1.get("tables", -1),
                   f"{label}: the first process's tables were built and stay loaded after it "
                   f"exited ({brief(u2)})")
            b.p.stdin.write("go\n")
            b.p.stdin.close()
            expect(b.wait_line("ready", 5), f"{label}: the second process runs ({b.lines})")
            time.sleep(3)
            u3 = settle(d, b.alive)
            time.sleep(1)
            fb = d.folded("--pid", str(b.pid), "--since", "3s")
            u3, _ = unwind_status(d)
            log(f"  {label}: second process {b.pid}: {brief(u3)}")
            show_top(fb)
            measure(f"{label} second", fb, "whole stacks", whole(uw.CHAIN), lambda fr: True,
                    WHOLE)
            hits = u3.get("cache_hits", 0) - u2.get("cache_hits", 0)
            expect(u3.get("builds", 0) == u2.get("builds", 0),
                   f"{label}: the second process built no table (builds {u2.get('builds')} -> "
                   f"{u3.get('builds')})")
            # Its executable, libc, ld.so and the vDSO at least.
            expect(hits >= 3, f"{label}: the second process's mappings reused the tables "
                   f"(cache_hits {u2.get('cache_hits')} -> {u3.get('cache_hits')}, +{hits})")
            built = re.findall(rf"unwind: pid {b.pid}: .*tables built.*", d.log_text())
            expect(not built, f"{label}: the log shows no table built for the second ({built})")
            expect(d.proc.poll() is None, f"{label}: profd lived through the run")
    finally:
        a.kill()
        b.kill()


# ---- evict ------------------------------------------------------------------------------------

def run_evict(tmp):
    label = "evict"
    log(f"---- {label}: --unwind-memory 1M")
    script = os.path.join(tmp, "work.py")
    with open(script, "w") as f:
        f.write(uw.WORK_PY)
    found = dict(uw.pythons())
    pyenv = found.get("3.12.1") or found.get("3.11.7")
    if not expect("3.11-debian-static" in found and pyenv,
                  f"{label}: Debian's python3.11 and a pyenv python ({sorted(found)})"):
        return
    runs = [("python3.11 (Debian, libcrypto)", [found["3.11-debian-static"], script]),
            ("pyenv python", [pyenv, script]),
            ("chain", [fixture("unwind_chain_gcc"), "2000"])]
    # One parent starts them one after the other: profd follows its children.
    parent = Proc(["/bin/sh", "-c", 'while read -r line; do $line & echo "pid $!"; done'],
                  stdin=subprocess.PIPE, cwd=tmp)
    over = []
    polls = 0
    try:
        with Daemon("--pid", str(parent.pid), "--frequency", str(FREQ),
                    "--unwind-memory", "1M") as d:
            for what, argv in runs:
                n0 = len(parent.lines)
                parent.p.stdin.write(" ".join(argv) + "\n")
                parent.p.stdin.flush()
                deadline = time.monotonic() + 5
                while len(parent.lines) == n0 and time.monotonic() < deadline:
                    time.sleep(0.05)
                m = re.match(r"^pid (\d+)$", parent.lines[-1]) if parent.lines else None
                if not expect(m is not None, f"{label}: {what} started ({parent.lines[-3:]})"):
                    continue
                pid = int(m.group(1))
                end = time.monotonic() + 7
                while time.monotonic() < end:
                    u, _ = unwind_status(d)
                    polls += 1
                    if u.get("table_bytes", 0) > u.get("memory", 1 << 20):
                        over.append(brief(u))
                    time.sleep(0.5)
                alive = os.path.exists(f"/proc/{pid}")
                f = d.folded("--pid", str(pid), "--since", "4s")
                os.kill(pid, 9)
                u, _ = unwind_status(d)
                log(f"  {label} {what} (pid {pid}): {brief(u)}")
                show_top(f, 3)
                expect(alive, f"{label}: {what} lived through its run")
                n = total(f)
                expect(n >= uw.MIN_SAMPLES, f"{label}: {what}: {n} samples in the window")
                # Never a wrong stack: each one reaches its root or says it does not.
                measure(f"{label} {what}", f, "stacks that reach their root or are marked "
                        "[truncated]", honest, lambda fr: True, 1.0)
                k, n = share(f, lambda fr: not uw.TRUNCATED in fr)
                log(f"  {label} {what}: whole {pct(k, n):.1f}% ({k}/{n})")
                if what == "chain":
                    measure(f"{label} chain", f, "whole stacks (its tables fit)",
                            whole(uw.CHAIN), lambda fr: True, WHOLE)
                time.sleep(1)
            u, _ = unwind_status(d)
            log(f"  {label}: at the end: {brief(u)}")
            expect(u.get("memory") == 1 << 20, f"{label}: the bound is 1M ({u.get('memory')})")
            expect(u.get("evictions", 0) > 0, f"{label}: tables were evicted "
                   f"({u.get('evictions', 0)})")
            expect(0 < u.get("table_bytes", 0) <= u.get("memory", 0),
                   f"{label}: loaded tables within the bound at the end ({u.get('table_bytes')} "
                   f"of {u.get('memory')})")
            expect(not over, f"{label}: within the bound in each of {polls} polls "
                   f"({len(over)} over: {over[:3]})")
            expect(d.proc.poll() is None, f"{label}: profd lived through the run")
    finally:
        parent.p.stdin.close()
        parent.kill()


# ---- dlopen -----------------------------------------------------------------------------------

def run_dlopen(cc):
    label = f"dlopen {cc}"
    log(f"---- {label}")
    lib = fixture(f"unwind_dlib_{cc}.so")
    p = Proc([dlopen_path(cc), lib])
    try:
        with Daemon("--pid", str(p.pid), "--frequency", str(FREQ)) as d:
            time.sleep(2)
            u0 = settle(d, p.alive)
            time.sleep(0.5)
            u0, _ = unwind_status(d)
            log(f"  {label}: before the load: {brief(u0)}")
            f0 = d.folded("--pid", str(p.pid), "--since", "1s")
            expect(total(f0, in_lib) == 0, f"{label}: no library samples before the load")
            os.kill(p.pid, 10)  # SIGUSR1: load it
            expect(p.wait_line("loaded 1", 5), f"{label}: the library was loaded ({p.lines})")
            time.sleep(5)
            f = d.folded("--pid", str(p.pid), "--since", "4s")
            u1, _ = unwind_status(d)
            log(f"  {label}: after the load: {brief(u1)}")
            show_top(f)
            k, n = share(f, in_lib)
            expect(k >= 0.5 * n and k >= 200,
                   f"{label}: the chain runs in the library ({k} of {n} samples)")
            measure(label, f, "library samples whole (main;c1;c2;c3;lib_outer;lib_inner)",
                    whole(LIBCHAIN), in_lib, WHOLE)
            nm = u1.get("no_mapping", 0) - u0.get("no_mapping", 0)
            # A few walks between the load and the daemon reading the maps again: well under
            # a second of samples.
            expect(0 < nm <= FREQ // 2, f"{label}: walks met a pc outside the mappings known, "
                   f"a few times ({u0.get('no_mapping', 0)} -> {u1.get('no_mapping', 0)})")
            expect(u1.get("builds", 0) > u0.get("builds", 0),
                   f"{label}: the library's table was built ({u0.get('builds')} -> "
                   f"{u1.get('builds')})")
            expect(p.alive() and d.proc.poll() is None, f"{label}: both lived through the run")
    finally:
        p.kill()


# ---- zlib -------------------------------------------------------------------------------------

LIBZ = "/usr/lib/x86_64-linux-gnu/libz.so.1"
UNKNOWN_LIBZ = re.compile(r"^\[unknown\] \((libz\.so[.\d]*)\+0x([0-9a-f]+)\)$")


def fde_starts(path):
    r = subprocess.run([os.path.join(BUILD, "bin", "profd-cfi"), "--fdes", path],
                       capture_output=True, text=True)
    return {int(w.split()[0], 16) for w in r.stdout.splitlines() if w.startswith("0x")}


def dyn_funcs(path):
    out = subprocess.run(["readelf", "--dyn-syms", "-W", path], capture_output=True,
                         text=True).stdout
    return {w[7].split("@")[0] for w in (x.split() for x in out.splitlines())
            if len(w) >= 8 and w[3] == "FUNC" and w[6] != "UND"}


def run_zlib(tmp):
    label = "zlib"
    log(f"---- {label}: Debian python3.11 compressing with libz")
    exe = "/usr/bin/python3.11"
    if not expect(os.access(exe, os.X_OK) and os.path.exists(LIBZ), f"{label}: {exe}, {LIBZ}"):
        return
    real = os.path.realpath(LIBZ)
    starts = fde_starts(real)
    names = dyn_funcs(real)
    expect(len(starts) > 50 and len(names) > 50,
           f"{label}: {os.path.basename(real)}: {len(starts)} FDEs, {len(names)} named functions")
    script = os.path.join(tmp, "zwork.py")
    with open(script, "w") as f:
        f.write(ZLIB_PY)
    p = Proc([exe, script], cwd=tmp)
    try:
        with Daemon("--pid", str(p.pid), "--frequency", str(FREQ)) as d:
            time.sleep(7)
            f = d.folded("--pid", str(p.pid), "--since", "5s")
            alive = p.alive()
    finally:
        p.kill()
    expect(alive, f"{label}: python lived through the run ({p.lines[-3:]})")
    show_top(f)
    unknown, named, bad = {}, {}, {}
    in_z = 0
    for s, c in f.items():
        hit = False
        for x in user_frames(s.split(";")):
            m = UNKNOWN_LIBZ.match(x)
            if m:
                hit = True
                addr = int(m.group(2), 16)
                unknown[x] = unknown.get(x, 0) + c
                if addr not in starts:
                    bad[x] = bad.get(x, 0) + c
            elif x in names:
                hit = True
                named[x] = named.get(x, 0) + c
            elif "libz" in x:
                bad[x] = bad.get(x, 0) + c
        in_z += c if hit else 0
    log(f"  {label}: {in_z} of {total(f)} samples in libz; {len(unknown)} unnamed frames "
        f"{sorted(unknown.items(), key=lambda kv: -kv[1])[:8]}, {len(named)} named "
        f"{sorted(named.items(), key=lambda kv: -kv[1])[:8]}")
    expect(in_z >= 200, f"{label}: hundreds of samples in libz ({in_z})")
    expect(len(unknown) > 0, f"{label}: libz's static functions show as [unknown] (libz+0xADDR)")
    expect(not bad, f"{label}: every libz frame is named or at the start of an FDE of "
           f"{os.path.basename(real)} ({len(bad)} not: {list(bad.items())[:5]})")
    expect(len(unknown) + len(named) <= MANY_DISTINCT_LIBZ,
           f"{label}: few distinct libz frames ({len(unknown)} + {len(named)}, at most "
           f"{MANY_DISTINCT_LIBZ})")
    measure(label, f, "libz samples reach their root or are marked [truncated]", honest,
            lambda fr: any(UNKNOWN_LIBZ.match(x) or x in names for x in fr), 0.995)


# ---- manylibs ---------------------------------------------------------------------------------

def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return bytes.fromhex(m.group(1)) if m else None


def make_libs(src, dst, n):
    """n copies of src in dst, each with a build-id of its own (the same length, its index in
    the last bytes). Returns their paths."""
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    os.chmod(dst, 0o755)
    data = open(src, "rb").read()
    bid = build_id(src)
    if not bid or data.count(bid) != 1:
        fail(f"{src}: no build-id found once in the file ({bid})")
    at = data.index(bid)
    out = []
    for i in range(n):
        new = bid[:-4] + (0xA5000000 + i).to_bytes(4, "big")
        path = os.path.join(dst, f"lib{i:04d}.so")
        with open(path, "wb") as f:
            f.write(data[:at] + new + data[at + len(bid):])
        out.append(path)
    return out


def run_manylibs(tmp):
    label = "manylibs"
    log(f"---- {label}: {NLIBS} distinct libraries in one process")
    libdir = os.path.join(tmp, "libs")
    libs = make_libs(fixture("unwind_dlib_gcc.so"), libdir, NLIBS)
    ids = {build_id(libs[0]), build_id(libs[-1])}
    expect(len(ids) == 2, f"{label}: the copies have build-ids of their own ({ids})")
    p = Proc([dlopen_path("gcc"), "--preload", libdir])
    lat, busy, tables_max = [], [], 0
    try:
        if not expect(p.wait_line("ready", 30), f"{label}: the libraries loaded ({p.lines})"):
            return
        with open(f"/proc/{p.pid}/maps") as m:
            mapped = {line.split()[-1] for line in m if " r-xp " in line and libdir in line}
        expect(len(mapped) == NLIBS, f"{label}: {len(mapped)} copies mapped executable, "
               f"{NLIBS} loaded")
        with Daemon("--pid", str(p.pid), "--frequency", str(FREQ)) as d:
            end = time.monotonic() + 10
            while time.monotonic() < end:
                u, dt = unwind_status(d)
                lat.append(dt)
                tables_max = max(tables_max, u.get("tables", 0))
                if u.get("busy_pid") == p.pid or u.get("queued", 0):
                    busy.append((u.get("busy_done", 0), u.get("busy_mappings", 0)))
                time.sleep(0.2)
            f = d.folded("--pid", str(p.pid), "--since", "4s")
            u, _ = unwind_status(d)
            text = d.log_text()
            alive = p.alive() and d.proc.poll() is None
    finally:
        p.kill()
    log(f"  {label}: {brief(u)}")
    lat.sort()
    log(f"  {label}: {len(lat)} status calls: median {lat[len(lat) // 2] * 1000:.0f} ms, "
        f"max {lat[-1] * 1000:.0f} ms; in progress in {len(busy)}: {busy[:6]}")
    show_top(f)
    done = re.findall(rf"unwind: pid {p.pid}: (\d+) mappings described, (\d+) tables built, "
                      rf"in ([\d.]+) ms", text)
    progress = re.findall(rf"unwind: pid {p.pid}: \d+ of \d+ mappings.*", text)
    log(f"  {label}: log: {done[:3]} {progress[:3]}")
    expect(alive, f"{label}: the process and profd lived through the run")
    expect(lat and lat[-1] < STATUS_LATENCY, f"{label}: status answered within "
           f"{STATUS_LATENCY:g} s each time ({len(lat)} calls, max {lat[-1]:.2f} s)")
    expect(tables_max >= NLIBS, f"{label}: {tables_max} tables loaded, at least {NLIBS}")
    expect(any(int(b) >= NLIBS for _, b, _ in done) or progress,
           f"{label}: the log shows the builds ({len(done)} done lines, {len(progress)} "
           "progress lines)")
    expect(busy or progress, f"{label}: status or the log showed the build in progress "
           f"({len(busy)} polls, {len(progress)} log lines)")
    expect(u.get("mappings_dropped", 0) == 0, f"{label}: no mapping left out "
           f"({u.get('mappings_dropped', 0)})")
    measure(label, f, "whole stacks (main;c1;c2;c3;lib_outer;lib_inner in the last library)",
            whole(LIBCHAIN), lambda fr: True, WHOLE)
    shutil.rmtree(libdir, ignore_errors=True)


def main():
    require_root()
    groups = sys.argv[1:] or ["cache", "evict", "dlopen", "zlib", "manylibs"]
    known = {"cache": run_cache, "evict": run_evict, "dlopen": run_dlopen, "zlib": run_zlib,
             "manylibs": run_manylibs}
    bad = [g for g in groups if g not in known]
    if bad:
        fail(f"unknown group {bad}; known: {' '.join(known)}")
    compilers = os.environ.get("PROFD_UNWIND_COMPILERS", "gcc,clang").split(",")
    tmp = os.path.realpath(os.path.join(BUILD, "tests", "unwind-tables"))
    os.makedirs(tmp, exist_ok=True)
    os.chmod(tmp, 0o755)
    for g in groups:
        if g in ("cache", "dlopen"):
            for cc in compilers:
                known[g](cc)
        else:
            known[g](tmp)
    log("\n---- summary: share of samples (need in the check above)")
    for label, what, k, n in uw.SUMMARY:
        log(f"  {label:28s} {pct(k, n):6.1f}%  {k:6d}/{n:<6d} {what}")
    if uw.FAILED:
        log(f"\n{len(uw.FAILED)} checks failed:")
        for w in uw.FAILED:
            log(f"  {w}")
        sys.exit(1)
    log("PASS")


if __name__ == "__main__":
    main()
