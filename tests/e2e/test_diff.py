#!/usr/bin/env python3
# profctl diff against the real daemon. Phase A runs burn alone (spin_a 75%, spin_b 25%);
# phase B runs burn and syscaller side by side, so in B burn's share shrinks and syscaller's
# do_reads appears. Checked: the diff of two folded dumps line by line against a merge done
# here, the SVG's colours and tooltips, a pprof dump read back as the same stacks, and the
# same comparison made from two time windows of the daemon.
import os
import re
import shutil
import subprocess
import tempfile
import time
from profd_e2e import *


def ms(seconds):
    return f"{max(1, int(seconds * 1000))}ms"


def parse_diff(text):
    """{stack: (a, b)} of 'STACK A B' lines, checked to be well formed and sorted."""
    out, prev = {}, None
    for line in text.splitlines():
        m = re.fullmatch(r"(.+) (\d+) (\d+)", line)
        if not m:
            fail(f"malformed diff line: {line!r}")
        stack = m.group(1)
        if prev is not None and stack.encode() <= prev.encode():
            fail(f"diff lines not sorted: {prev!r} then {stack!r}")
        prev = stack
        out[stack] = (int(m.group(2)), int(m.group(3)))
    return out


def fill_of(svg, name):
    m = re.search(r"<title>" + re.escape(name) + r" \(([^<]*)\)</title><rect [^>]*"
                  r"fill=\"rgb\((\d+),(\d+),(\d+)\)\"", svg)
    if not m:
        fail(f"no frame {name} in the diff SVG")
    return m.group(1), tuple(int(m.group(i)) for i in (2, 3, 4))


def share(folded_counts, pred):
    tot = sum(folded_counts.values())
    return sum(c for s, c in folded_counts.items() if pred(s.split(";"))) / tot


require_root()
tmp = tempfile.mkdtemp(prefix="profd-diff-")
os.chmod(tmp, 0o755)
fa, fb = os.path.join(tmp, "a.folded"), os.path.join(tmp, "b.folded")
procs = []
try:
    # Fine buckets: the windows below are cut a fraction of a second from the phases.
    with Daemon("--frequency", "499", "--bucket", "100ms") as d:
        t0 = time.monotonic()
        b1 = start_fixture("burn", 3)
        procs.append(b1)
        b1.wait(30)
        t1 = time.monotonic()
        time.sleep(1.0)
        b2 = start_fixture("burn", 3)
        sc = start_fixture("syscaller", 3)
        procs += [b2, sc]
        b2.wait(30)
        sc.wait(30)
        time.sleep(0.5)

        # ---- two files ----
        for path, pids in ((fa, [b1.pid]), (fb, [b2.pid, sc.pid])):
            args = [a for p in pids for a in ("--pid", str(p))]
            r = d.ctl("dump", "flamegraph", "--format", "folded", "-o", path, *args)
            check(r.returncode == 0, f"dump {os.path.basename(path)} ({r.stderr.strip()})")
        A, B = parse_folded(open(fa).read()), parse_folded(open(fb).read())
        ta, tb = sum(A.values()), sum(B.values())
        log(f"A: {ta} samples, B: {tb} samples")
        # 3 s at 499 Hz is about 1500 a process; a busy machine gives fewer.
        check(ta > 200 and tb > 300, "both phases have samples")

        r = d.ctl("diff", fa, fb, "--format", "folded")
        check(r.returncode == 0, f"profctl diff A B exits 0 ({r.stderr.strip()})")
        got = parse_diff(r.stdout)
        want = {s: (A.get(s, 0), B.get(s, 0)) for s in set(A) | set(B)}
        check(got == want, "the folded diff is every stack of A and B with both counts")
        check(sum(a for a, _ in got.values()) == ta and sum(b for _, b in got.values()) == tb,
              "the diff keeps both totals")

        spin_a = lambda fr: has_chain(fr, ["main", "run", "work_a", "spin_a"])
        reads = lambda fr: "do_reads" in fr
        sa, sb = share(A, spin_a), share(B, spin_a)
        check(sa - sb > 0.15, f"spin_a's share shrinks from A to B ({sa:.3f} -> {sb:.3f})")
        check(share(A, reads) == 0 and share(B, reads) > 0.2,
              f"do_reads is only in B ({share(B, reads):.3f} of it)")

        # The SVG's tree is by path: start every stack at main, so that how the daemon names
        # the frames under main (libc's start, or an address) cannot split a node in two.
        na_path, nb_path = os.path.join(tmp, "a.main.folded"), os.path.join(tmp, "b.main.folded")
        for path, counts in ((na_path, A), (nb_path, B)):
            with open(path, "w") as f:
                for s, c in counts.items():
                    fr = s.split(";")
                    f.write(";".join(fr[fr.index("main"):] if "main" in fr else fr) + f" {c}\n")
        A2, B2 = parse_folded(open(na_path).read()), parse_folded(open(nb_path).read())
        svg_path = os.path.join(tmp, "diff.svg")
        r = d.ctl("diff", na_path, nb_path, "-o", svg_path)
        check(r.returncode == 0 and r.stdout == "", f"diff -o diff.svg ({r.stderr.strip()})")
        svg = open(svg_path, encoding="utf-8").read()
        x = subprocess.run(["xmllint", "--noout", svg_path], capture_output=True, text=True)
        check(x.returncode == 0, f"xmllint accepts the diff SVG ({x.stderr.strip()[:300]})")
        tip, rgb = fill_of(svg, "spin_a")
        na = sum(c for s, c in A2.items() if s.startswith("main;run;work_a;spin_a"))
        nb = sum(c for s, c in B2.items() if s.startswith("main;run;work_a;spin_a"))
        check(tip.startswith(f"A: {na} samples, ") and f"; B: {nb} samples, " in tip,
              f"spin_a's tooltip has both counts ({tip})")
        check(rgb[2] > rgb[0] + 40, f"spin_a shrank: blue ({rgb})")
        tip, rgb = fill_of(svg, "do_reads")
        check(tip.startswith("A: 0 samples, 0.00%; B: "), f"do_reads: none in A ({tip})")
        check(rgb[0] > rgb[2] + 40, f"do_reads grew: red ({rgb})")
        check(f" samples of A).</text>" in svg and f"of {ta} samples of A" in svg,
              "the legend says what is left out of A")
        check(f">A: {na_path}, {ta} samples; B: {nb_path}, {tb} samples<" in svg,
              "the subtitle names both files and their totals")

        # ---- pprof as input: the same stacks as the folded dump of the same process ----
        pa = os.path.join(tmp, "a.pb.gz")
        r = d.ctl("dump", "flamegraph", "--format", "pprof", "--pid", str(b1.pid), "-o", pa)
        check(r.returncode == 0, f"dump a.pb.gz ({r.stderr.strip()})")
        r = d.ctl("diff", pa, fa, "--format", "folded")
        check(r.returncode == 0, f"profctl diff a.pb.gz a.folded ({r.stderr.strip()})")
        same = parse_diff(r.stdout)
        differ = {s: ab for s, ab in same.items() if ab[0] != ab[1]}
        for s, ab in list(differ.items())[:10]:
            log(f"  differs: {ab[0]} {ab[1]} {s}")
        check(sum(a for a, _ in same.values()) == ta, "the pprof file has A's samples")
        check(not differ, "pprof and folded dumps of one process read as the same stacks")

        # ---- two windows of the daemon ----
        tc = time.monotonic()
        cut = tc - t1 - 0.5  # half a second after burn 1 ended, before phase B began
        before, after = f"{ms(tc - t0 + 1.0)}..{ms(cut)}", f"{ms(cut)}..now"
        pids = ["--pid", str(b1.pid), "--pid", str(b2.pid), "--pid", str(sc.pid)]
        r = d.ctl("diff", *pids, "--before", before, "--after", after, "--format", "folded")
        check(r.returncode == 0, f"diff --before {before} --after {after} ({r.stderr.strip()})")
        win = parse_diff(r.stdout)
        wa = {s: a for s, (a, _) in win.items() if a}
        wb = {s: b for s, (_, b) in win.items() if b}
        check(wa == A, "the before window holds exactly phase A's samples")
        check(wb == B, "the after window holds exactly phase B's samples")

        r = d.ctl("diff", *pids, "--before", before, "--after", after, "-o", svg_path)
        check(r.returncode == 0, f"windows diff as SVG ({r.stderr.strip()})")
        svg = open(svg_path, encoding="utf-8").read()
        check(f">A: window {before}, {ta} samples; B: window {after}, {tb} samples<" in svg,
              "the windows' SVG names the windows")
        check(fill_of(svg, "do_reads")[1][0] > fill_of(svg, "do_reads")[1][2],
              "do_reads is red in the windows' SVG")

        # A window with nothing in it: exit 5 and the window named.
        r = d.ctl("diff", "--pid", str(b1.pid), "--before", before, "--after", "200ms")
        check(r.returncode == 5, f"an empty window exits 5 (got {r.returncode})")
        check(r.stderr.strip() == "profctl: no samples in the after window (200ms): widen it, "
              "or check the --pid", f"and says which window ({r.stderr.strip()})")
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()

# Files only, no daemon needed: a bad line is named by file and line, exit 1.
bad = os.path.join(tmp, "bad.folded")
with open(bad, "w") as f:
    f.write("main;a 1\nmain;b\n")
r = subprocess.run([PROFCTL, "diff", fa, bad], capture_output=True, text=True)
check(r.returncode == 1 and r.stderr == f"profctl: diff: {bad}:2: no sample count at the end "
      "(expected 'STACK COUNT')\n", f"a malformed line is reported ({r.stderr.strip()})")
shutil.rmtree(tmp, ignore_errors=True)
log("PASS")
