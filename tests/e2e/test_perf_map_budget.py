# SPDX-License-Identifier: BSD-2-Clause
# A user's 150 MiB perf map: the daemon keeps its memory within the perf-map budget and its loop
# responsive while it reads the map (off the loop), and the map's real entry still names the
# JIT frame that samples land in. Two such processes, as in the report that found it.
import json
import os
import subprocess
import time

from profd_e2e import (SANITIZED, Daemon, as_user, check, fixture, log, parse_folded, temp_user,
                       vm_bytes)

USER = "profd-e2e-jit"
MAP_MIB = 150
MiB = 2**20

pw = temp_user(USER)
procs = []


def status(d):
    t0 = time.monotonic()
    r = d.ctl("status", "--json")
    dt = time.monotonic() - t0
    if r.returncode != 0:
        check(False, f"status answers: {r.stderr}")
    return json.loads(r.stdout), dt


try:
    pids = []
    for _ in range(2):
        p = subprocess.Popen([*as_user(pw), fixture("jit"), str(MAP_MIB), "60"], cwd="/",
                             stdout=subprocess.PIPE, text=True)
        procs.append(p)
        line = p.stdout.readline().split()
        check(line[:1] == ["ready"], f"the JIT fixture wrote its map: {line}")
        pids.append(int(line[1]))
        st = os.stat(f"/tmp/perf-{pids[-1]}.map")
        check(st.st_size >= MAP_MIB * MiB and st.st_uid == pw.pw_uid,
              f"a {st.st_size >> 20} MiB map owned by the user")

    args = []
    for pid in pids:
        args += ["--pid", str(pid)]
    with Daemon("--frequency", "199", *args) as d:
        base_rss = vm_bytes(d.proc.pid, "VmRSS")
        named = {}
        worst = 0.0
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and len(named) < len(pids):
            _, dt = status(d)
            worst = max(worst, dt)
            for pid in pids:
                if pid in named:
                    continue
                r = d.ctl("dump", "flamegraph", "--format", "folded", "--pid", str(pid))
                stacks = parse_folded(r.stdout)
                hot = sum(n for s, n in stacks.items() if "jit_hot_loop" in s)
                if hot:
                    named[pid] = hot / sum(stacks.values())
            time.sleep(0.2)
        check(len(named) == len(pids),
              f"the real entry in the middle of each 150 MiB map names the JIT frame: {named}")
        log(f"named: {named}, slowest status while the maps were read: {worst * 1000:.0f} ms")
        # Named while the maps were being read: the loop answered throughout.
        if not SANITIZED:
            check(worst < 0.5, f"status answered within 500 ms throughout: {worst * 1000:.0f} ms")

        st, _ = status(d)
        hwm = vm_bytes(d.proc.pid, "VmHWM")
        log(f"daemon RSS {base_rss / MiB:.1f} MiB at start, peak {hwm / MiB:.1f} MiB; "
            f"perf maps {st.get('perf_map_bytes', 0) / MiB:.2f} of "
            f"{st.get('perf_map_budget_bytes', 0) / MiB:.0f} MiB, "
            f"{st.get('perf_maps_sparse')} sparse, "
            f"{st.get('perf_map_entries_dropped')} entries left out, "
            f"{st.get('perf_map_reads')} reads")
        check(st.get("perf_maps_sparse") == 2, "both maps are over their budget")
        check(st.get("perf_map_entries_dropped", 0) >= 2 * 3000000,
              "the entries left out are counted")
        check(0 < st.get("perf_map_bytes", 0) <= st.get("perf_map_budget_bytes", 0),
              "the maps' symbols fit the budget")
        # Reading the maps whole took the daemon past 1 GB; the budget is 64 MiB, and a map
        # over it keeps only what samples hit.
        if not SANITIZED:
            check(hwm - base_rss < 64 * MiB,
                  f"peak RSS grew by less than the budget: {(hwm - base_rss) / MiB:.1f} MiB")
        r = d.ctl("dump", "flamegraph", "--format", "folded", "--pid", str(pids[0]))
        check("filler_entry" not in r.stdout, "no filler entry names a frame")
        # The maps do not change, so the worker reads them no more: what its reads built and
        # dropped (a 16 MiB dense table per map) is not held once they are done.
        time.sleep(1)
        rss = vm_bytes(d.proc.pid, "VmRSS")
        log(f"daemon RSS {rss / MiB:.1f} MiB after the reads")
        if not SANITIZED:
            check(rss - base_rss < 12 * MiB,
                  f"the reads' memory is handed back: RSS +{(rss - base_rss) / MiB:.1f} MiB")
finally:
    for p in procs:
        p.kill()
        p.wait()
    for p in procs:
        try:
            os.unlink(f"/tmp/perf-{p.pid}.map")
        except OSError:
            pass
log("all ok")
