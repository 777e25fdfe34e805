# SPDX-License-Identifier: BSD-2-Clause
# A user of the socket's group floods the daemon: 8 connections, each pipelining thousands of
# dump and status requests in one write and reading the replies slowly or not at all. Root's
# status is answered within 100 ms throughout, the sample ring loses nothing, and the daemon's
# memory for the replies stays bounded. When the flood stops, everything was answered or its
# connection closed, and the daemon serves on.
import os
import socket
import subprocess
import threading
import time

from profd_e2e import (SANITIZED, Daemon, check, connect, error_of, fixture, log, read_frame,
                       req_dump, req_hello, req_status, temp_user, top_fields, vm_bytes)

USER = "profd-e2e-flood"
CONNS = 8
PER_CONN = 4000
MiB = 2**20

pw = temp_user(USER)
procs = []
stop = threading.Event()


def status_fields(s):
    t0 = time.monotonic()
    s.sendall(req_status())
    body = read_frame(s)
    dt = time.monotonic() - t0
    check(body is not None and error_of(body) is None, "root's status is answered")
    return top_fields(top_fields(body)[2]), dt


def flooder(path, uid, gid, reads, results, i):
    """One of the user's connections (in a child process, as the user)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            s = connect(path, timeout=60)
            s.sendall(req_hello())
            read_frame(s)
            batch = (req_dump() + req_status()) * (PER_CONN // 2)
            s.sendall(batch)
            got = 0
            if reads:
                while got < PER_CONN and read_frame(s) is not None:
                    got += 1
            else:
                time.sleep(6)
            os._exit(0 if (got == PER_CONN or not reads) else 3)
        except Exception as e:  # noqa: BLE001 - report any failure as an exit code
            print(f"flooder {i}: {e}", flush=True)
            os._exit(2)
    results[i] = pid


try:
    import grp

    group = grp.getgrgid(pw.pw_gid).gr_name
    burn = subprocess.Popen([fixture("burn"), "30"])
    procs.append(burn)
    with Daemon("--frequency", "499", "--socket-group", group) as d:
        root = connect(d.sock)
        root.sendall(req_hello())
        read_frame(root)
        time.sleep(1)
        st0, _ = status_fields(root)
        rss0 = vm_bytes(d.proc.pid, "VmRSS")
        pids = [0] * CONNS
        # Half read their replies, half never do (their replies pile up until the write
        # timeout or the per-user bound).
        for i in range(CONNS):
            flooder(d.sock, pw.pw_uid, pw.pw_gid, i % 2 == 0, pids, i)
        worst, n = 0.0, 0
        t_end = time.monotonic() + 8
        while time.monotonic() < t_end:
            _, dt = status_fields(root)
            worst = max(worst, dt)
            n += 1
            time.sleep(0.05)
        hwm = vm_bytes(d.proc.pid, "VmHWM")
        codes = []
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            codes.append(os.waitstatus_to_exitcode(status))
        st1, dt = status_fields(root)
        lost = st1.get(11, 0) - st0.get(11, 0)
        log(f"root asked {n} times during the flood, slowest answer {worst * 1000:.0f} ms; "
            f"ring losses {lost}; daemon RSS {rss0 / MiB:.0f} MiB before, peak {hwm / MiB:.0f} "
            f"MiB; flooders exited {codes}")
        check(n >= 50, f"root's status was asked often: {n}")
        if SANITIZED:
            log("sanitizer build: the 100 ms and memory bounds are checked on the plain build")
        else:
            check(worst < 0.1, f"root's status answered within 100 ms: {worst * 1000:.0f} ms")
            check(hwm - rss0 < 96 * MiB,
                  f"reply memory is bounded: +{(hwm - rss0) / MiB:.0f} MiB")
        check(lost == 0, f"no sample lost to the flood: {lost}")
        check(codes[0::2] == [0] * (CONNS // 2),
              f"the readers got every reply: {codes}")
        check(st1.get(10, 0) > st0.get(10, 0), "sampling went on")
        # The daemon serves a new client at once.
        r = d.ctl("status")
        check(r.returncode == 0, f"profctl status after the flood: {r.stderr}")
finally:
    for p in procs:
        p.kill()
        p.wait()
log("all ok")
