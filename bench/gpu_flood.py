#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""A socket-group member floods profd with GPU uplinks: the protocol spoken directly, no CUDA.

Each uplink is a process of the flooding user that says Hello and GpuAttach (READY) and then
sends GpuBatch after GpuBatch of made-up kernels as fast as the socket takes them: new kernel
names until the connection's string table is full, then its names again, half of the kernels
with no correlation id (charged at once to "[launch stack unknown]") and half with ids no launch
will ever match (they wait for their launch). Replies are read and counted, busy errors
included, and ignored: a hostile client does not slow down when told.

As a benchmark it measures the daemon's memory under the flood, for two builds side by side:

  sudo bench/gpu_flood.py --base BASE/bin/profd --new build/bin/profd [--seconds 60]

For each build: users made for the run (the flooder, whose group may use the socket, and a
second user whose CPU burner the daemon samples), the daemon system-wide with --memory-cap, the
burner for 5 s, then the flood with 8 uplinks for --seconds, VmRSS and VmHWM read every second.
Prints the memory, the second user's samples before and after the flood, and the load average.

tests/e2e/test_uid_fair.py uses flood() as its flooder.
"""
import argparse
import grp
import os
import pwd
import socket
import subprocess
import sys
import tempfile
import threading
import time

# The wire's framing and protobuf field helpers are the e2e tests' (one copy of each).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
from profd_e2e import field_bytes as fb, field_varint as fv, frame, read_frame, req_hello  # noqa: E402

MiB = 2**20
READY = 1
TABLE_MAX = 65536  # the daemon's string table per connection (gpu_batch.c MAX_STRINGS)


def req_attach(library_path):
    return frame(fb(4, fv(1, READY) + fb(5, library_path.encode())))


class Batches:
    """The GpuBatch frames of one uplink, each with fresh times."""

    def __init__(self, kernels, new_names, seed):
        self.kernels = kernels
        self.new_names = new_names
        self.nstrings = 0
        self.next_name = 0
        self.corr = 1
        self.seed = seed

    def next(self):
        now = time.monotonic_ns()
        body = bytearray()
        for _ in range(self.new_names if self.nstrings < TABLE_MAX else 0):
            name = f"_Z12flood_kernelILi{self.seed}ELi{self.nstrings}EEvPf".encode()
            body += fb(1, name)
            self.nstrings += 1
        for i in range(self.kernels):
            k = fv(1, now - 2000 - i) + fv(2, now - 1000)
            if i & 1:
                k += fv(3, self.corr)
                self.corr = self.corr + 1 if self.corr < 2**32 - 1 else 1
            else:
                k += fv(3, 0)
            if self.nstrings:
                k += fv(4, self.next_name % self.nstrings + 1)
                self.next_name += 1
            body += fb(2, bytes(k))
        return frame(fb(5, bytes(body)))


def uplink(path, seconds, library_path, seed, out_fd, kernels=1000, new_names=500):
    """One uplink, in this (already forked, already setuid) process. Writes
    "batches replies busy" to out_fd when done."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(path)
    s.sendall(req_hello())
    read_frame(s)
    s.sendall(req_attach(library_path))
    read_frame(s)
    counts = {"replies": 0, "busy": 0}

    def reader():
        while True:
            try:
                body = read_frame(s)
            except OSError:
                return
            if body is None:
                return
            counts["replies"] += 1
            if body[:1] == bytes([4 << 3 | 2]):  # Response.error
                counts["busy"] += 1

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    gen = Batches(kernels, new_names, seed)
    sent = 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            s.sendall(gen.next())
            sent += 1
    except OSError:
        pass
    time.sleep(0.5)
    os.write(out_fd, f"{sent} {counts['replies']} {counts['busy']}\n".encode())
    s.close()


def flood(path, uid, gid, uplinks, seconds, library_path="/opt/profd/lib/libprofd_cupti.so"):
    """Start `uplinks` processes of user uid (primary group gid, no others) flooding the socket
    at path for `seconds`. Returns a function that waits for them and returns their totals
    {"batches", "replies", "busy", "failed"}."""
    r, w = os.pipe()
    pids = []
    for i in range(uplinks):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(r)
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)
                uplink(path, seconds, library_path, i, w)
            except Exception as e:  # noqa: BLE001 - any failure is this uplink's exit code
                print(f"uplink {i}: {e}", file=sys.stderr, flush=True)
                code = 2
            os._exit(code)
        pids.append(pid)
    os.close(w)

    def wait():
        failed = 0
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            failed += os.waitstatus_to_exitcode(status) != 0
        text = b""
        while True:
            chunk = os.read(r, 4096)
            if not chunk:
                break
            text += chunk
        os.close(r)
        tot = {"batches": 0, "replies": 0, "busy": 0, "failed": failed}
        for line in text.decode().splitlines():
            b, rep, busy = (int(x) for x in line.split())
            tot["batches"] += b
            tot["replies"] += rep
            tot["busy"] += busy
        return tot

    return wait


# --- the benchmark ---------------------------------------------------------------------------


def vm(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def make_user(name):
    subprocess.run(["userdel", name], capture_output=True)
    subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell",
                    "/usr/sbin/nologin", name], check=True)
    return pwd.getpwnam(name)


def samples_of(profctl, sock, pid):
    r = subprocess.run([profctl, "--socket", sock, "dump", "flamegraph", "--pid", str(pid),
                        "--format", "folded"], capture_output=True, text=True, timeout=120)
    total = 0
    for line in r.stdout.splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            total += int(n)
    return total


def run_one(label, profd, burn, seconds, cap, alice, bob, extra):
    tmp = tempfile.mkdtemp(prefix="profd-flood-")
    os.chmod(tmp, 0o755)
    sock = os.path.join(tmp, "run", "profd.sock")
    profctl = os.path.join(os.path.dirname(profd), "profctl")
    logf = open(os.path.join(tmp, "profd.log"), "w")
    group = grp.getgrgid(alice.pw_gid).gr_name
    d = subprocess.Popen([profd, "--socket", sock, "--memory-cap", cap, "--socket-group", group,
                          *extra], stdout=logf, stderr=subprocess.STDOUT)
    try:
        for _ in range(400):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        time.sleep(1)
        b = subprocess.Popen(["setpriv", f"--reuid={bob.pw_uid}", f"--regid={bob.pw_gid}",
                              "--clear-groups", burn, "5"])
        b.wait()
        time.sleep(2)
        bob_before = samples_of(profctl, sock, b.pid)
        rss0 = vm(d.pid, "VmRSS")
        wait = flood(sock, alice.pw_uid, alice.pw_gid, 8, seconds)
        rss = []
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            time.sleep(1)
            rss.append(vm(d.pid, "VmRSS"))
        tot = wait()
        hwm = vm(d.pid, "VmHWM")
        time.sleep(2)
        bob_after = samples_of(profctl, sock, b.pid)
        return {"label": label, "rss0": rss0, "rss_max": max(rss), "rss_end": rss[-1],
                "hwm": hwm, "bob_before": bob_before, "bob_after": bob_after, **tot}
    finally:
        d.terminate()
        d.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the baseline build's profd")
    ap.add_argument("--new", required=True, help="the build under test's profd")
    ap.add_argument("--burn", help="the burn fixture (default: next to --new's tests)")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--memory-cap", default="16M")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("gpu_flood: needs root (users, BPF)")
    burn = args.burn or os.path.join(os.path.dirname(args.new), "..", "tests", "fixtures",
                                     "burn")
    alice = make_user("profd-bench-alice")
    bob = make_user("profd-bench-bob")
    try:
        rows = []
        for label, profd in (("base", args.base), ("new", args.new)):
            load = os.getloadavg()
            row = run_one(label, profd, burn, args.seconds, args.memory_cap, alice, bob, [])
            row["load"] = load
            rows.append(row)
        print(f"8 uplinks, {args.seconds} s, --memory-cap {args.memory_cap}")
        print("build  RSS before  RSS max  RSS end  VmHWM   bob before/after  batches  busy"
              "  load (1/5/15 min at start)")
        for r in rows:
            print(f"{r['label']:6} {r['rss0'] / MiB:8.0f}M {r['rss_max'] / MiB:7.0f}M "
                  f"{r['rss_end'] / MiB:7.0f}M {r['hwm'] / MiB:6.0f}M {r['bob_before']:8}/"
                  f"{r['bob_after']:<8} {r['batches']:8} {r['busy']:5}  "
                  f"{r['load'][0]:.2f} {r['load'][1]:.2f} {r['load'][2]:.2f}")
    finally:
        subprocess.run(["userdel", alice.pw_name], capture_output=True)
        subprocess.run(["userdel", bob.pw_name], capture_output=True)


if __name__ == "__main__":
    main()
