#!/usr/bin/env python3
# The daemon's memory by owner (profctl status): through bursts of short-lived processes and
# threads (fork and exec, fork without exec, Python, thread storms) the per-process state of
# ingest, Python, the unwinder and the symbolizer follows the processes alive on the machine,
# and does not grow from one burst to the next; the owners add up with "other" to the RSS.
#
# The last thread of a process is sampled on its way out, after the process's exit record.
# Before the fix each such sample brought the process's entry back for good: after two bursts
# the ingest held hundreds of processes more than the machine had (the daemon runs
# system-wide at 999 Hz, so that many exits are sampled).
import json
import os
import subprocess
import sys
import time

from profd_e2e import *

FREQ = 999
OWNERS = ["store", "symbols", "unwind_tables", "ingest", "python", "unwinder", "symbolizer",
          "gpu", "export", "clients", "trace_ring", "other"]
PER_PROCESS = ["ingest", "python", "unwinder", "symbolizer"]
# Processes in flight between the daemon's view and /proc's (a drain is 100 ms; other jobs on
# the machine come and go), and what the daemon itself runs.
SLACK = 40

# Forks that burn a little and exit without exec (some of them after a grandchild of theirs),
# and threads that do the same: run by a Python child so that the test's own process stays out.
FORKS = r"""
import os, sys, threading, time

def burn(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass

n = int(sys.argv[1])
for i in range(n):
    pid = os.fork()
    if pid == 0:
        if i % 10 == 0 and os.fork() == 0:
            burn(0.002)
            os._exit(0)
        burn(0.003)
        os._exit(0)
    os.waitpid(pid, 0)
for _ in range(n // 50):
    ts = [threading.Thread(target=burn, args=(0.001,)) for _ in range(50)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
"""


def burst():
    """About 1,300 processes and 600 threads, all gone when it returns."""
    subprocess.run(["sh", "-c", "i=0; while [ $i -lt 800 ]; do /bin/true; i=$((i+1)); done"],
                   check=True)
    subprocess.run([sys.executable, "-c", FORKS, "300"], check=True)
    for _ in range(40):
        subprocess.run([sys.executable, "-c", "sum(range(300000))"], check=True)
    subprocess.run(["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do "
                    "cat /proc/self/status | grep -c Vm | wc -l; done"], check=True,
                   stdout=subprocess.DEVNULL)


def live_processes():
    return sum(1 for n in os.listdir("/proc") if n.isdigit())


def owners(d):
    r = d.ctl("status", "--json")
    if r.returncode != 0:
        fail(f"profctl status --json failed: {r.stderr}")
    st = json.loads(r.stdout)
    mem = {m["name"]: m for m in st.get("memory", [])}
    check(list(mem) == OWNERS, f"status names the owners in order ({list(mem)})")
    return st, mem


def check_sum(st, mem):
    rss = st["daemon_rss_bytes"]
    counted = sum(m.get("bytes", 0) for n, m in mem.items() if n != "other")
    check(mem["other"].get("bytes", 0) == max(0, rss - counted),
          f"other ({mem['other'].get('bytes')} B) is the RSS ({rss} B) less the owners' "
          f"{counted} B")
    # The owners count what they allocated; all of it but the untouched pages of large zeroed
    # blocks is in the RSS, and the code and libraries are in "other".
    check(counted <= rss + (2 << 20), f"the owners' {counted} B are within the RSS ({rss} B)")
    check(mem["other"]["bytes"] > (1 << 20),
          f"other ({mem['other']['bytes']} B) holds at least the code (1 MiB)")
    check(mem["store"]["bytes"] == st["store_bytes"],
          f"the store owner's bytes ({mem['store']['bytes']}) are store_bytes")


def check_follows(d, when):
    """The per-process owners hold no more processes than the machine has."""
    time.sleep(1.5)  # the last exit records and late samples drained
    before = live_processes()
    st, mem = owners(d)
    live = max(before, live_processes())
    counts = {n: mem[n].get("count", 0) for n in PER_PROCESS}
    log(f"{when}: {live} processes on the machine; held: " +
        ", ".join(f"{n} {c} ({mem[n]['bytes']} B)" for n, c in counts.items()) +
        f"; RSS {st['daemon_rss_bytes']} B, other {mem['other']['bytes']} B")
    for n, c in counts.items():
        check(c <= live + SLACK,
              f"{when}: {n} holds {c} processes, no more than the machine's {live} "
              f"(+{SLACK} in flight)")
    check_sum(st, mem)
    return st, counts


def main():
    require_root()
    with Daemon("--frequency", str(FREQ)) as d:
        time.sleep(2)  # the start-up scan
        st0, c0 = check_follows(d, "at start")
        samples0 = st0.get("samples_received", 0)
        for i in (1, 2):
            burst()
            st, c = check_follows(d, f"after burst {i}")
        check(st.get("samples_received", 0) > samples0, "samples during the bursts")
        text = d.ctl("status").stdout
        check("memory:" in text and all(f" {n} " in text for n in OWNERS),
              "profctl status shows every owner")
    log("ok")


if __name__ == "__main__":
    main()
