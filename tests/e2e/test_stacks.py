#!/usr/bin/env python3
# profctl dump stacks: the live stack of every thread of a process, blocked threads included
# (they take no CPU samples, so the daemon must read them on demand).
#  - A Python program (every CPython at hand) with three threads named through the OS, each
#    blocked in a known place: time.sleep, Lock.acquire, os.read of a pipe. Each thread shows
#    its name, its Python function with the line it waits on, and the kernel wait.
#  - A C program: main -> outer_wait -> middle_wait -> inner_read blocked in read(2) of a pipe,
#    and a thread named blk-sleeper in nanosleep: the native chain and the kernel frames.
#  - --json, and who may ask: a user dumps their own process, not root's; no such process and a
#    thread id are clear errors.
import grp
import json
import os
import re
import subprocess
import time

from profd_e2e import *

HERE = os.path.dirname(os.path.abspath(__file__))

PROGRAM = r'''
import ctypes, os, sys, threading, time

libc = ctypes.CDLL(None)


def os_name(name):
    libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME: the kernel's thread name


def sleeper(ready):
    os_name("py-sleeper")
    ready.release()
    time.sleep(3600)  # LINE:sleeper


def locker(ready, lock):
    os_name("py-locker")
    ready.release()
    lock.acquire()  # LINE:locker


def reader(ready, fd):
    os_name("py-reader")
    ready.release()
    os.read(fd, 1)  # LINE:reader


ready = threading.Semaphore(0)
lock = threading.Lock()
lock.acquire()
r, w = os.pipe()
for target, args in ((sleeper, ()), (locker, (lock,)), (reader, (r,))):
    threading.Thread(target=target, args=(ready, *args), daemon=True).start()
for _ in range(3):
    ready.acquire()
print("ready", flush=True)
sys.stdin.read()
'''

# Where each named thread waits: its function, the line of PROGRAM, the kernel frames one of
# which must show (the wait differs by version: select() before 3.11's clock_nanosleep).
THREADS = {
    "py-sleeper": ("sleeper", re.compile(r"^(hrtimer_nanosleep|do_nanosleep|do_select|"
                                         r"core_sys_select|schedule_hrtimeout.*)$")),
    "py-locker": ("locker", re.compile(r"^(futex_wait|__futex_wait|futex_do_wait|"
                                       r"futex_wait_queue)$")),
    "py-reader": ("reader", re.compile(r"^(anon_pipe_read|pipe_read)$")),
}


def program_lines():
    out = {}
    for i, line in enumerate(PROGRAM.splitlines()):
        m = re.search(r"# LINE:(\w+)", line)
        if m:
            out[m.group(1)] = i + 1
    return out


def parse_dump(text):
    """{tid: (name, state, [frames newest first])} from the text layout."""
    threads, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^Thread (\d+) \((.*)\) (\S+?)(, on a CPU)?"
                     r"(, holds the GIL|, does not hold the GIL|, no GIL \(.*\))?$", line)
        if m:
            cur = []
            threads[int(m.group(1))] = (m.group(2), m.group(3), cur)
        elif line.startswith("    ") and cur is not None:
            cur.append(line[4:])
    return threads


def by_name(threads, name):
    return [t for t in threads.values() if t[0] == name]


def kernel_names(frames):
    return [f[:-4] for f in frames if f.endswith(" [k]")]


def dump(d, pid, *args, user=None):
    return d.ctl("dump", "stacks", "--pid", str(pid), *args, user=user)


def check_python(d, label, exe, lines, program):
    p = subprocess.Popen([exe, program], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        check(p.stdout.readline().strip() == "ready", f"{label}: the program is ready")
        time.sleep(0.2)  # from the semaphore to the wait itself
        r = dump(d, p.pid)
        check(r.returncode == 0, f"{label}: dump stacks exits 0 ({r.returncode}: {r.stderr})")
        threads = parse_dump(r.stdout)
        log(f"{label}:\n{r.stdout}")
        check(len(threads) >= 4, f"{label}: the main thread and three more ({len(threads)})")
        for name, (func, kwait) in THREADS.items():
            found = by_name(threads, name)
            check(len(found) == 1, f"{label}: one thread named {name}")
            _, state, frames = found[0]
            check(state == "sleeping", f"{label}: {name} is sleeping ({state})")
            want = f"{func} ({program}:{lines[func]})"
            check(want in frames, f"{label}: {name} shows {want}")
            ks = kernel_names(frames)
            check(any(kwait.match(k) for k in ks), f"{label}: {name} waits in {kwait.pattern}"
                  f" (kernel frames {ks})")
            # Newest first: the kernel wait above the Python function.
            check(frames.index(want) > max(i for i, f in enumerate(frames) if f.endswith(" [k]")),
                  f"{label}: {name}'s kernel frames come before its Python frames")
            check(any(f.startswith("Thread.run (") or f.startswith("run (") for f in frames),
                  f"{label}: {name} shows threading's run() below its function")
    finally:
        p.kill()
        p.wait()


def check_native(d):
    p = subprocess.Popen([fixture("blocker")], stdout=subprocess.PIPE, text=True)
    try:
        check(p.stdout.readline().strip() == "ready", "blocker: ready")
        time.sleep(0.2)
        r = dump(d, p.pid)
        check(r.returncode == 0, f"blocker: dump stacks exits 0 ({r.returncode}: {r.stderr})")
        log(f"blocker:\n{r.stdout}")
        threads = parse_dump(r.stdout)
        check(set(t[0] for t in threads.values()) == {"blk-main", "blk-sleeper"},
              f"blocker: the two named threads ({[t[0] for t in threads.values()]})")
        _, state, frames = by_name(threads, "blk-main")[0]
        check(state == "sleeping", f"blocker: blk-main is sleeping ({state})")
        names = [f.split(" ")[0] for f in frames]
        chain = ["inner_read", "middle_wait", "outer_wait", "main"]
        check(any(names[i:i + 4] == chain for i in range(len(names))),
              f"blocker: newest first, {' <- '.join(chain)} ({names})")
        check(any(re.match(r"^(anon_pipe_read|pipe_read)$", k) for k in kernel_names(frames)),
              "blocker: blk-main waits in pipe_read")
        check(names.index("inner_read") > max(i for i, f in enumerate(frames)
                                              if f.endswith(" [k]")),
              "blocker: the kernel frames are above inner_read")
        check(all(f.endswith("(blocker)") for f in frames
                  if f.split(" ")[0] in chain), "blocker: the chain's module is blocker")
        _, _, frames = by_name(threads, "blk-sleeper")[0]
        check(any(re.match(r"^(hrtimer_nanosleep|do_nanosleep)$", k)
                  for k in kernel_names(frames)), "blocker: blk-sleeper waits in nanosleep")

        # JSON: the same threads, the same frames.
        r = dump(d, p.pid, "--json")
        check(r.returncode == 0, f"blocker: --json exits 0 ({r.stderr})")
        doc = json.loads(r.stdout)
        check(doc["pid"] == p.pid and doc["version"] == 1, "blocker: JSON names the process")
        jt = {t["name"]: t for t in doc["threads"]}
        check(set(jt) == {"blk-main", "blk-sleeper"}, "blocker: JSON has both threads")
        jnames = [f["name"] for f in jt["blk-main"]["frames"]]
        check(any(jnames[i:i + 4] == chain for i in range(len(jnames))),
              "blocker: JSON has the chain newest first")
        check(jt["blk-main"]["state"] == "sleeping", "blocker: JSON state")
        kinds = {f["name"]: f["kind"] for f in jt["blk-main"]["frames"]}
        check(kinds.get("inner_read") == "native" and
              any(v == "kernel" for v in kinds.values()), "blocker: JSON frame kinds")

        # A thread id is not a process; a user may not dump root's process.
        tid = [t for t in threads if t != p.pid][0]
        r = dump(d, tid)
        check(r.returncode == 5 and f"is a thread of process {p.pid}" in r.stderr,
              f"a thread id is refused with the process to ask for ({r.returncode}: {r.stderr})")
        r = dump(d, p.pid, user=USER)
        check(r.returncode == 4 and "permission denied" in r.stderr,
              f"another user may not dump root's process ({r.returncode}: {r.stderr})")
    finally:
        p.kill()
        p.wait()
    # ...but their own, through the socket's group.
    p = subprocess.Popen([*as_user(PW), fixture("blocker")], stdout=subprocess.PIPE, text=True)
    try:
        check(p.stdout.readline().strip() == "ready", "the user's blocker: ready")
        time.sleep(0.2)
        r = dump(d, p.pid, user=USER)
        check(r.returncode == 0 and "blk-main" in r.stdout and "inner_read (blocker)" in r.stdout,
              f"a user dumps their own process ({r.returncode}: {r.stderr})")
    finally:
        p.kill()
        p.wait()


require_root()
PW = temp_user("profdstk")
USER = (PW.pw_uid, PW.pw_gid)
with Daemon("--socket-group", grp.getgrgid(PW.pw_gid).gr_name) as d:
    # A pid that does not exist: a clear error, exit 5.
    r = d.ctl("dump", "stacks", "--pid", "4194303")
    check(r.returncode == 5 and r.stderr.strip() == "profctl: no process 4194303",
          f"no such process ({r.returncode}: {r.stderr.strip()})")
    r = d.ctl("dump", "stacks")
    check(r.returncode == 2 and "exactly one --pid" in r.stderr, "stacks needs --pid")
    check_native(d)
    tmp = d.tmp
    program = os.path.join(tmp, "blocked.py")
    with open(program, "w") as f:
        f.write(PROGRAM)
    os.chmod(tmp, 0o755)
    lines = program_lines()
    pys = cpythons()
    check(pys, "at least one CPython to test with")
    for label, exe in pys:
        check_python(d, label, exe, lines, program)
    check("stacks:" not in d.log_text() or "cannot load" not in d.log_text(),
          "the stack dump program loaded")
log("PASS")
