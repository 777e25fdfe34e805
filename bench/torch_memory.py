#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The daemon's memory and dump latency while PyTorch processes start, profiled system-wide.

Starts profd system-wide, then N PyTorch training loops (an MLP, torch.set_num_threads(1)), from
one or two torch installs: the second is a copy of the venv's torch package (`cp -a` into a
directory put first on PYTHONPATH), so its libraries are other files with the same build-ids.
While the processes start (import torch maps libtorch_cpu.so and libtorch_cuda.so, whose unwind
tables and symbols the daemon reads), it polls the daemon's VmRSS, VmHWM, RssAnon and RssFile
every 50 ms and times `profctl dump --format folded` calls back to back. A dump counts as "while
tables build" when `profctl status` said a process was being described or queued just before
it, or when it started in the first STARTUP seconds after the processes did (a daemon whose
loop is busy answers `status` late too). At the end: one more dump over the whole run, the share of samples of the training loops
whose stack names an `at::native::` frame, and the daemon's symbols and unwind lines of
`profctl status`.

Usage: sudo bench/torch_memory.py [--build build] [--procs 1] [--installs 1|2] [--seconds 30]
       [--startup 20] [--python PYTHON]   (PYTHON: the torch venv's python; scripts/torch-venv prints it)
"""
import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)

TRAIN_PY = '''import sys, time
import torch
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                            torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(64, 256)
y = torch.randint(0, 10, (64,))
end = time.time() + float(sys.argv[1])
while time.time() < end:
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
'''


def status_kb(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                out[k] = int(v.split()[0])
    return out


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def profctl(bindir, sock, *args, timeout=60):
    """profctl's result; one that ran past timeout has returncode 124 and no output."""
    try:
        return subprocess.run([os.path.join(bindir, "profctl"), "--socket", sock, *args],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", "")


def building(bindir, sock):
    """Whether the daemon's unwinder is describing a process or has some queued."""
    st = profctl(bindir, sock, "status").stdout
    m = re.search(r"(\d+) waiting", st)
    return "describing pid" in st or bool(m and int(m.group(1)))


def second_install(python, tmp):
    """A copy of the venv's torch package, to be imported through PYTHONPATH."""
    site = subprocess.run([python, "-c", "import os, torch; print(os.path.dirname("
                           "os.path.dirname(torch.__file__)))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    dst = os.path.join(tmp, "site2")
    os.makedirs(dst)
    subprocess.run(["cp", "-a", os.path.join(site, "torch"), dst], check=True)
    return dst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--installs", type=int, choices=(1, 2), default=1)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--python", default=None)
    ap.add_argument("--frequency", type=int, default=99)
    ap.add_argument("--startup", type=float, default=20)
    args = ap.parse_args()
    if os.geteuid():
        sys.exit("torch_memory.py: run as root (profd loads BPF programs)")
    python = args.python or subprocess.run([os.path.join(TOP, "scripts", "torch-venv")],
                                           capture_output=True, text=True,
                                           check=True).stdout.strip()
    bindir = os.path.join(args.build, "bin")
    tmp = tempfile.mkdtemp(prefix="torch_memory.")
    procs, daemon = [], None
    try:
        site2 = second_install(python, tmp) if args.installs == 2 else None
        with open(os.path.join(tmp, "train.py"), "w") as f:
            f.write(TRAIN_PY)
        sock = os.path.join(tmp, "profd.sock")
        daemon = subprocess.Popen([os.path.join(bindir, "profd"), "--socket", sock,
                                   "--frequency", str(args.frequency), "-q"])
        deadline = time.time() + 30
        while not os.path.exists(sock) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(1)
        base = status_kb(daemon.pid)
        load0 = loadavg()
        samples, dumps, stop = [], [], threading.Event()
        t0 = time.time()
        startup_end = t0 + args.startup

        def poll():
            while not stop.is_set():
                try:
                    samples.append((time.time() - t0, status_kb(daemon.pid)))
                except OSError:
                    return
                time.sleep(0.05)

        def dumper():
            while not stop.is_set():
                s = time.time()
                b = s < startup_end or building(bindir, sock)
                s = time.time()
                r = profctl(bindir, sock, "dump", "flamegraph", "--format", "folded",
                            "--since", "5s")
                dumps.append((s - t0, time.time() - s, b, r.returncode))
                time.sleep(0.2)

        threads = [threading.Thread(target=poll), threading.Thread(target=dumper)]
        for t in threads:
            t.start()
        for i in range(args.procs):
            env = dict(os.environ)
            if site2 and i % 2:
                env["PYTHONPATH"] = site2
            procs.append(subprocess.Popen([python, os.path.join(tmp, "train.py"),
                                           str(args.seconds)], env=env, cwd=tmp))
        for p in procs:
            p.wait()
        stop.set()
        for t in threads:
            t.join()
        end = status_kb(daemon.pid)
        folded = profctl(bindir, sock, "dump", "flamegraph", "--format", "folded")
        status = profctl(bindir, sock, "status").stdout
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        if daemon:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)

    total = aten = 0
    for line in folded.stdout.splitlines():
        stack, _, n = line.rpartition(" ")
        # The training loops' samples: their Python frames name the script.
        if not n.isdigit() or "train.py" not in stack:
            continue
        total += int(n)
        aten += int(n) if "at::native::" in stack else 0
    rss = [s["VmRSS"] for _, s in samples]
    mib = 1024.0
    building_ms = [1000 * d for _, d, b, rc in dumps if b and rc == 0]
    idle_ms = [1000 * d for _, d, b, rc in dumps if not b and rc == 0]
    print(f"command: {' '.join(sys.argv)}")
    print(f"load average before / after: {load0} / {loadavg()}")
    print(f"processes: {args.procs} from {args.installs} install(s), {args.seconds:g} s each")
    print("| figure | MiB |")
    print("|---|---|")
    print(f"| daemon VmRSS before the processes | {base['VmRSS'] / mib:.1f} |")
    print(f"| daemon VmRSS peak (polled every 50 ms) | {max(rss) / mib:.1f} |")
    print(f"| daemon VmHWM at the end | {end['VmHWM'] / mib:.1f} |")
    print(f"| daemon VmRSS at the end (steady) | {end['VmRSS'] / mib:.1f} |")
    print(f"| of which RssAnon / RssFile at the end | {end['RssAnon'] / mib:.1f} / "
          f"{end['RssFile'] / mib:.1f} |")
    print(f"| RssFile peak | {max(s['RssFile'] for _, s in samples) / mib:.1f} |")
    for name, xs in (("while tables build", building_ms), ("otherwise", idle_ms)):
        if xs:
            print(f"dumps {name}: {len(xs)}, median {statistics.median(xs):.0f} ms, "
                  f"max {max(xs):.0f} ms")
        else:
            print(f"dumps {name}: none")
    fails = sum(1 for d in dumps if d[3] and d[3] != 124)
    if fails:
        print(f"dumps that failed: {fails}")
    late = sum(1 for d in dumps if d[3] == 124)
    if late:
        print(f"dumps that ran past profctl's 60 s: {late}")
    print(f"samples of the training processes: {total}, naming at::native:: frames: {aten} "
          f"({100.0 * aten / total if total else 0:.1f}%)")
    for line in status.splitlines():
        if line.strip().startswith(("symbols", "unwind")):
            print("status: " + line.strip())


if __name__ == "__main__":
    main()
