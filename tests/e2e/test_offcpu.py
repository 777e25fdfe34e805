#!/usr/bin/env python3
# profd --off-cpu on fixtures with known answers: a thread that sleeps 70% and burns 30% of its
# time (off-CPU and wall-clock shares within 5 points of what the fixture measured itself, the
# sleep under sleep_part as [off-cpu: sleep]); two threads in a pipe ping-pong (both waits under
# their own read function, with the kernel's pipe_read and [off-cpu: pipe]); a thread that waits
# in page faults, not system calls (its waits under the function that faulted, never under the
# system call it made next); the status counters; and the option's validation.
import os
import re
import subprocess
import tempfile
import time
from profd_e2e import *

require_root()

# --off-cpu-min is validated: a bad value is one clear line and exit status 2 or 1.
for bad in ["0", "abc", "2s", "-5us", "10xs"]:
    r = subprocess.run([PROFD, "--off-cpu", "--off-cpu-min", bad], capture_output=True,
                       text=True, timeout=30)
    check(r.returncode != 0 and "--off-cpu-min" in r.stderr and len(r.stderr.splitlines()) == 1,
          f"--off-cpu-min {bad} is refused in one line ({r.returncode}: {r.stderr.strip()})")
r = subprocess.run([PROFD, "--help"], capture_output=True, text=True, timeout=30)
check("--off-cpu" in r.stdout and "--off-cpu-min" in r.stdout, "profd --help names --off-cpu")


def thread_rows(folded, comm):
    """{stack below the thread root: value} of the thread named comm (--per-thread)."""
    out = {}
    for s, c in folded.items():
        fr = s.split(";")
        m = re.match(r"^thread \d+ \((.*)\)$", fr[0])
        if m and m.group(1) == comm:
            key = ";".join(fr[1:])
            out[key] = out.get(key, 0) + c
    return out


def show(rows, n=8):
    for s, c in sorted(rows.items(), key=lambda kv: -kv[1])[:n]:
        log(f"  {c:14d} {s[:400]}")


SECONDS = 6
fx = subprocess.Popen([fixture("offcpu"), "sleepburn", str(SECONDS)], stdout=subprocess.PIPE,
                      text=True)
try:
    with Daemon("--pid", str(fx.pid), "--frequency", "499", "--off-cpu") as d:
        out, _ = fx.communicate(timeout=SECONDS + 30)
        time.sleep(0.5)
        wall = d.folded("--pid", str(fx.pid), "--value", "wall", "--per-thread",
                        "--thread-state")
        off = d.folded("--pid", str(fx.pid), "--value", "off-cpu", "--per-thread",
                       "--thread-state")
        plain = d.folded("--pid", str(fx.pid), "--value", "off-cpu")
        svg = d.ctl("dump", "flamegraph", "--pid", str(fx.pid), "--value", "wall",
                    "--format", "svg")
        pp = d.ctl("dump", "flamegraph", "--pid", str(fx.pid), "--value", "off-cpu",
                   "--format", "speedscope")
        table = d.ctl("table", "--pid", str(fx.pid))
        twall = d.ctl("table", "--pid", str(fx.pid), "--value", "wall", "--sort", "total",
                      "--limit", "0")
        tcpu = d.ctl("table", "--pid", str(fx.pid), "--sort", "total", "--limit", "0")
        rep = d.ctl("report", "--pid", str(fx.pid))
        st = d.ctl("status")
        log(st.stdout)
finally:
    if fx.poll() is None:
        fx.kill()

m = re.search(r"measured sleep=([\d.]+) burn=([\d.]+)", out)
check(m is not None, f"the fixture printed its shares ({out!r})")
want_sleep, want_burn = float(m.group(1)), float(m.group(2))
rows = thread_rows(wall, "sleepburn")
log(f"wall rows of sleepburn (fixture: sleep {want_sleep:.3f} burn {want_burn:.3f}):")
show(rows)
w = sum(rows.values())
w_off = sum(c for s, c in rows.items() if s.startswith("[off-cpu:"))
w_run = sum(c for s, c in rows.items() if s.startswith("[running"))
w_sleep = sum(c for s, c in rows.items()
              if s.startswith("[off-cpu: sleep]") and "sleep_part" in s.split(";"))
w_burn = sum(c for s, c in rows.items() if "burn_part" in s.split(";") and
             s.startswith("[running"))
check(w > 0.8 * SECONDS * 1e9 and w < 1.2 * SECONDS * 1e9,
      f"the thread's wall time {w / 1e9:.2f} s is its lifetime {SECONDS} s +- 20%")
# The fixture times its parts by the clock: a burn that was preempted (a loaded machine) is
# burn to it and off-CPU (preempted) to profd, so the shares compare by part.
w_in_sleep = sum(c for s, c in rows.items() if "sleep_part" in s.split(";"))
w_in_burn = sum(c for s, c in rows.items() if "burn_part" in s.split(";"))
w_preempted = sum(c for s, c in rows.items() if s.startswith("[off-cpu: preempted]"))
log(f"wall {w / 1e9:.3f} s: off-CPU {w_off / w:.3f} (preempted {w_preempted / w:.3f}), "
    f"running {w_run / w:.3f}; under sleep_part {w_in_sleep / w:.3f}, burn_part "
    f"{w_in_burn / w:.3f}")
check(abs((w_off - w_preempted) / w - want_sleep) <= 0.05,
      f"off-CPU share of wall but preemption {(w_off - w_preempted) / w:.3f} is the measured "
      f"sleep {want_sleep:.3f} +- 0.05")
check(abs((w_run + w_preempted) / w - want_burn) <= 0.05,
      f"running (and preempted) share of wall {(w_run + w_preempted) / w:.3f} is the measured "
      f"burn {want_burn:.3f} +- 0.05")
check(abs(w_in_sleep / w - want_sleep) <= 0.05 and abs(w_in_burn / w - want_burn) <= 0.05,
      "the wall shares under sleep_part and burn_part are the measured ones +- 0.05")
# Preemption is off-CPU time too, but no wait: a loaded machine's, charged to burn_part above.
check(w_sleep >= 0.9 * (w_off - w_preempted),
      f"[off-cpu: sleep] under sleep_part holds the off-CPU time but preemption "
      f"({w_sleep} of {w_off - w_preempted})")
check(w_burn >= 0.8 * w_run, f"burn_part holds the running time ({w_burn} of {w_run})")
orows = thread_rows(off, "sleepburn")
check(abs(sum(orows.values()) - w_off) <= 0.01 * w_off,
      "--value off-cpu sums to the off-CPU part of --value wall")
check(all(not s.startswith("[") or s.startswith("[short waits]") or "[off-cpu" not in s
          for s in plain), "without --thread-state no state frame is shown")
check(any("sleep_part" in s and "nanosleep" in s for s in plain),
      "the kernel frames of the sleep are in the off-CPU stacks")
check(svg.returncode == 0 and "<svg" in svg.stdout and "Wall-clock" in svg.stdout,
      f"an SVG of wall-clock time ({svg.returncode}: {svg.stderr})")
check(pp.returncode == 0 and '"unit": "nanoseconds"' in pp.stdout.replace('":"', '": "'),
      f"speedscope of off-CPU time in nanoseconds ({pp.returncode}: {pp.stderr})")
check(table.returncode == 0 and "off_cpu" in table.stdout and "wall_time" in table.stdout,
      f"profctl table shows off_cpu and wall_time columns ({table.stderr})\n{table.stdout[:800]}")


def row_order(text, names):
    pos = {}
    for i, line in enumerate(text.splitlines()):
        for n in names:
            if line.startswith(n + " ") and n not in pos:
                pos[n] = i
    return pos


ow = row_order(twall.stdout, ["sleep_part", "burn_part"])
oc = row_order(tcpu.stdout, ["sleep_part", "burn_part"])
check(twall.returncode == 0 and len(ow) == 2 and ow["sleep_part"] < ow["burn_part"],
      f"table --value wall ranks sleep_part (70%) above burn_part ({ow})\n{twall.stdout[:1500]}")
check(tcpu.returncode == 0 and oc.get("burn_part", 1 << 30) < oc.get("sleep_part", 1 << 30),
      f"by CPU burn_part ranks above sleep_part ({oc})")
log(rep.stdout)
m_run = re.search(r"^ +\S+ \S+ +([\d.]+)%  \[running\]$", rep.stdout, re.M)
m_slp = re.search(r"^ +\S+ \S+ +([\d.]+)%  \[off-cpu: sleep\]$", rep.stdout, re.M)
check(rep.returncode == 0 and "Time by thread state" in rep.stdout and m_run and m_slp,
      f"report: time by thread state names [running] and [off-cpu: sleep] ({rep.stderr})")
check(abs(float(m_slp.group(1)) / 100 - (w_off - w_preempted) / w) <= 0.01,
      f"report: [off-cpu: sleep] {m_slp.group(1)}% is the dump's share "
      f"{(w_off - w_preempted) / w:.3f} +- 0.01")
waits = rep.stdout.split("Top waits", 1)[-1].splitlines()
check(len(waits) > 2 and "sleep_part" in waits[2],
      f"report: the top wait is under sleep_part ({waits[2] if len(waits) > 2 else ''})")
check("off-CPU" in st.stdout or "off_cpu" in st.stdout or "Off-CPU" in st.stdout,
      "status reports off-CPU counters")

# Ping-pong: each thread waits in its own read, in the pipe.
fx = subprocess.Popen([fixture("offcpu"), "pingpong", "4"], stdout=subprocess.PIPE, text=True)
try:
    with Daemon("--pid", str(fx.pid), "--off-cpu", "--off-cpu-min", "1us") as d:
        out, _ = fx.communicate(timeout=40)
        time.sleep(0.5)
        off = d.folded("--pid", str(fx.pid), "--value", "off-cpu", "--per-thread",
                       "--thread-state")
        st = d.ctl("status")
        log(st.stdout)
finally:
    if fx.poll() is None:
        fx.kill()
log(out)
for comm, fn in [("ping", "ping_wait"), ("pong", "pong_wait")]:
    rows = thread_rows(off, comm)
    log(f"off-CPU rows of {comm}:")
    show(rows)
    t = sum(rows.values())
    inpipe = sum(c for s, c in rows.items() if fn in s.split(";") and "pipe_read_[k]" in s
                 and s.startswith("[off-cpu: pipe]"))
    check(t > 0, f"{comm} has off-CPU time")
    check(inpipe >= 0.5 * t, f"{comm}: most off-CPU time is in {fn} -> pipe_read as "
          f"[off-cpu: pipe] ({inpipe} of {t})")

# Page faults: a wait outside a system call is charged where the thread faulted. Its user
# stack is read as it leaves the CPU; read at its next system call's return it would name
# munmap or fadvise (what the fixture calls after touching the pages) under a fault's kernel
# stack.
with tempfile.NamedTemporaryFile(dir="/var/tmp", prefix="profd-fault-") as data:
    data.write(os.urandom(16 << 20))
    data.flush()
    fx = subprocess.Popen([fixture("offcpu"), "faultwait", data.name, "3"],
                          stdout=subprocess.PIPE, text=True)
    try:
        with Daemon("--pid", str(fx.pid), "--off-cpu") as d:
            out, _ = fx.communicate(timeout=40)
            time.sleep(0.5)
            off = d.folded("--pid", str(fx.pid), "--value", "off-cpu", "--thread-state")
    finally:
        if fx.poll() is None:
            fx.kill()
log(out)
faults = {s: c for s, c in off.items() if "asm_exc_page_fault_[k]" in s.split(";")}
show(faults)
where = {}
for s, c in faults.items():
    fr = s.split(";")
    user = fr[fr.index("asm_exc_page_fault_[k]") - 1]
    where[user] = where.get(user, 0) + c
t = sum(faults.values())
check(t >= 50_000_000, f"the fixture waited in page faults ({t / 1e6:.0f} ms)")
check(set(where) == {"touch_pages"},
      f"every page-fault wait is under touch_pages, where it faulted ({where})")
check(sum(c for s, c in faults.items() if s.startswith("[off-cpu: disk]")) >= 0.5 * t,
      "most of it is [off-cpu: disk]")
log("PASS")
