#!/usr/bin/env python3
# Mapping changes (the kernel side's PROFD_REC_MAPS records), against the real daemon. Groups:
#  - bound: a process with 600 more executable mappings than most (maps_many: copies of its own
#    code) spins in the copy at the lowest address. Under the default --unwind-max-mappings 512
#    the daemon describes it once (its mappings with tables first, the rest left out: status
#    over_bound 1), and its walks that reach a mapping left out are NOT answered by describing
#    it again every second (descriptions stay put while no-mapping walks come, counted as
#    back-offs). With --unwind-max-mappings 1024 it is described whole and its walks reach the
#    bottom. Bad values of the option are refused with one line.
#  - swap: maps_swap spins in liba's function, unloads liba, loads libb (which lands where liba
#    was: the fixture says "same") and spins in libb's: profd --record names each half by its own
#    library's function, not all of it by liba's.
#
# Usage: test_maps_change.py [bound|swap]...   (default: both)
import json
import os
import subprocess
import sys
import tempfile
import time

from profd_e2e import *

NMAPS = 600
WINDOW = 6.0  # seconds watched for descriptions made again
ENDS = ("bottom", "truncated", "fp_fallback", "no_mapping", "no_table", "no_row", "invalid",
        "read_fault", "bad_frame")


def status(d):
    r = d.ctl("status", "--json", timeout=30)
    if r.returncode != 0:
        fail(f"status --json failed ({r.returncode}): {r.stderr.strip()}")
    return json.loads(r.stdout)


def unwind(d):
    return status(d).get("unwind", {})


def settled(d, timeout=30.0):
    """The unwind status once the process is described and nothing is queued or running, and
    the count of descriptions held still for a second (a first description's partial parts and
    a mapping-change record at start are over)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        u = unwind(d)
        if u.get("processes", 0) >= 1 and not u.get("queued", 0) and not u.get("busy_pid", 0):
            if last is not None and last.get("described") == u.get("described"):
                return u
            last = u
            time.sleep(1.0)
            continue
        time.sleep(0.2)
    fail(f"the process was not described within {timeout:.0f} s: {u}")


def delta(a, b, k):
    return b.get(k, 0) - a.get(k, 0)


def whole_share(a, b):
    n = sum(delta(a, b, k) for k in ENDS)
    return delta(a, b, "bottom") / n if n else 0.0, n


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def group_bound():
    log("---- bound: 600 executable mappings")
    p = subprocess.Popen([fixture("maps_many"), str(NMAPS)], stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().strip()
        check(line == f"mapped {NMAPS}", f"maps_many made {NMAPS} copies of its code ({line!r})")
        with open(f"/proc/{p.pid}/maps") as f:
            nx = sum(1 for l in f if l.split()[1][2] == "x")
        check(nx > 512, f"maps_many has {nx} executable mappings, over the default bound")

        with Daemon("--pid", str(p.pid), "--frequency", "99") as d:
            a = settled(d)
            c0 = cpu_s(d.proc.pid)
            time.sleep(WINDOW)
            b = unwind(d)
            c1 = cpu_s(d.proc.pid)
            keys = ("described", "over_bound", "backoffs", "mappings_dropped", "max_mappings",
                    "no_mapping", "bottom")
            log(f"  default bound: {json.dumps({k: b.get(k) for k in keys})}, "
                f"daemon CPU {c1 - c0:.2f} s in {WINDOW:.0f} s")
            check(b.get("max_mappings") == 512,
                  f"status shows the bound 512 ({b.get('max_mappings')})")
            check(b.get("over_bound") == 1 and b.get("mappings_dropped", 0) >= nx - 512,
                  f"the process is over the bound: over_bound {b.get('over_bound')}, "
                  f"{b.get('mappings_dropped')} mappings left out of {nx}")
            check(delta(a, b, "no_mapping") > 0,
                  f"its walks reach mappings left out ({delta(a, b, 'no_mapping')} no-mapping "
                  f"walks in {WINDOW:.0f} s)")
            # The defect: described again on every second's no-mapping walks (600 file opens
            # each time), forever. Now only a change of its mappings would.
            check(delta(a, b, "described") == 0,
                  f"it is not described again while its mappings stay the same "
                  f"({delta(a, b, 'described')} descriptions in {WINDOW:.0f} s)")
            check(delta(a, b, "backoffs") > 0,
                  f"the misses are counted as left alone ({delta(a, b, 'backoffs')} back-offs)")
            share, n = whole_share(a, b)
            check(n > 0 and share < 0.1, f"its walks are not whole over the bound "
                                          f"({share:.0%} of {n} reach the bottom)")

        with Daemon("--pid", str(p.pid), "--frequency", "99",
                    "--unwind-max-mappings", "1024") as d:
            a = settled(d)
            time.sleep(WINDOW)
            b = unwind(d)
            check(b.get("max_mappings") == 1024 and b.get("over_bound") == 0 and
                  b.get("mappings_dropped") == 0,
                  f"--unwind-max-mappings 1024 describes all {nx} mappings "
                  f"(over_bound {b.get('over_bound')}, dropped {b.get('mappings_dropped')})")
            share, n = whole_share(a, b)
            check(n >= 20 and share >= 0.9,
                  f"its walks reach the bottom ({share:.0%} of {n})")
    finally:
        p.kill()
        p.wait()

    for bad in ("0", "15", "8193", "512x", "-1", ""):
        r = subprocess.run([PROFD, "--unwind-max-mappings", bad], capture_output=True,
                           text=True, timeout=30)
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith(
            f"profd: --unwind-max-mappings '{bad}': expected a whole number from 16 to 8192"),
              f"--unwind-max-mappings {bad!r} is refused with one line ({r.returncode}: "
              f"{r.stderr.strip()!r})")


def group_swap():
    log("---- swap: libb loaded where liba was")
    out = tempfile.mkdtemp(prefix="profd-maps-")
    prof = os.path.join(out, "swap.folded")
    liba = fixture("maps_swap_liba.so")
    libb = fixture("maps_swap_libb.so")
    r = subprocess.run([PROFD, "--record", "--frequency", "199", "-o", prof, "--",
                        fixture("maps_swap"), liba, libb, "2"],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"profd --record of maps_swap exits 0 ({r.returncode}: "
                             f"{r.stderr.strip()[-500:]})")
    # The fixture's own lines: where each function was, and whether libb took liba's place.
    words = r.stdout.split()
    check("same" in words, f"libb was loaded where liba was ({r.stdout.strip()!r})")
    f = parse_folded(open(prof).read())
    n = total(f)
    a = total(f, lambda fr: "liba_first_library_fn" in fr)
    b = total(f, lambda fr: "libb_second_library_fn" in fr)
    log(f"  {n} samples: {a} in liba_first_library_fn, {b} in libb_second_library_fn")
    # Each half spins 2 s of CPU: about half the samples each. Before, all were liba's.
    check(n >= 100 and a >= 0.3 * n and b >= 0.3 * n,
          f"each library's samples are named by its own function ({a} liba, {b} libb of {n})")


GROUPS = {"bound": group_bound, "swap": group_swap}

require_root()
for g in sys.argv[1:] or list(GROUPS):
    if g not in GROUPS:
        fail(f"unknown group {g!r} (one of {', '.join(GROUPS)})")
    GROUPS[g]()
log("PASS")
