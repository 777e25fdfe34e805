# SPDX-License-Identifier: BSD-2-Clause
"""One member of the socket's group floods the daemon with GPU uplinks (the protocol spoken
directly, no CUDA: made-up kernel batches from 8 processes of hers) while the store is small:
another user's history survives her flood whole, her batches over the uplink rate are refused
and counted, and the store evicted her data first (its fairness counter moved).

Users made by the test: alice (her group may use the socket) and bob (his CPU burner is
sampled before the flood and has exited when it starts, so his samples are a fixed history).
"""
import grp
import os
import subprocess
import sys
import time

from profd_e2e import (SANITIZED, Daemon, check, connect, fixture, log, parse_folded, read_frame,
                       req_hello, req_status, temp_user, top_fields, total, vm_bytes)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from gpu_flood import flood  # noqa: E402 - the bench's flooder, found through the path above

MiB = 2**20
FLOOD_S = 12
RATE = 5000  # records a second an uplink; alice's 8 together 10000 (twice one)

alice = temp_user("profd-e2e-alice")
bob = temp_user("profd-e2e-bob")


def status(d):
    s = connect(d.sock)
    s.sendall(req_hello())
    read_frame(s)
    s.sendall(req_status())
    body = read_frame(s)
    s.close()
    return top_fields(top_fields(body)[2])


def bob_samples(d, pid):
    r = d.ctl("dump", "flamegraph", "--pid", str(pid), "--format", "folded")
    check(r.returncode == 0, f"root dumps bob's process ({r.stderr.strip()})")
    return total(parse_folded(r.stdout))


group = grp.getgrgid(alice.pw_gid).gr_name
with Daemon("--memory-cap", "16M", "--socket-group", group, "--gpu-uplink-rate",
            str(RATE)) as d:
    burn = subprocess.Popen(["setpriv", f"--reuid={bob.pw_uid}", f"--regid={bob.pw_gid}",
                             "--clear-groups", fixture("burn"), "4"])
    check(burn.wait(60) == 0, "bob's burner ran its 4 s")
    time.sleep(1.5)  # the last bucket's samples are in the store
    before = bob_samples(d, burn.pid)
    check(before > 20, f"bob's history is in the store: {before} samples")
    st0 = status(d)
    rss0 = vm_bytes(d.proc.pid, "VmRSS")

    wait = flood(d.sock, alice.pw_uid, alice.pw_gid, 8, FLOOD_S)
    tot = wait()
    hwm = vm_bytes(d.proc.pid, "VmHWM")
    time.sleep(1.5)
    st1 = status(d)
    after = bob_samples(d, burn.pid)
    log(f"flood: {tot}; status before {dict((k, st0.get(k)) for k in (14, 20, 96, 98, 100))}, "
        f"after {dict((k, st1.get(k)) for k in (14, 20, 96, 97, 98, 99, 100))}; RSS "
        f"{rss0 / MiB:.0f} MiB before, peak {hwm / MiB:.0f} MiB")
    check(tot["failed"] == 0 and tot["batches"] > 0,
          f"alice's 8 uplinks attached and flooded ({tot['batches']} batches)")
    # Field numbers: StatusReply in proto/profd.proto.
    check(st1.get(100, 0) > 0,
          f"the store was pressed and evicted alice's entries first ({st1.get(100, 0)} over "
          "her share)")
    check(after == before, f"bob's samples all survive alice's flood: {after} of {before}")
    check(st1.get(96, 0) > 0 and st1.get(98, 0) > 0 and st1.get(97, 0) > 0,
          f"batches over the uplink rate were refused and counted: {st1.get(96, 0)} records, "
          f"{st1.get(97, 0)} bytes in {st1.get(98, 0)} batches")
    check(tot["busy"] > 0, f"the uplinks were told: {tot['busy']} busy replies")
    st = d.ctl("status")
    check(st.returncode == 0 and "refused: over the rate of an uplink" in st.stdout and
          "evicted first from users over an equal share" in st.stdout,
          "profctl status shows the refusals and the fair eviction")
    check("its uplink sends more than" in d.log_text(), "the refusal is logged")
    if SANITIZED:
        log("sanitizer build: the memory bound is checked on the plain build")
    else:
        # The store's cap is 16 MiB and the GPU state of one user is bounded: the probe saw
        # the daemon grow by 180-410 MiB under such a flood.
        check(hwm - rss0 < 128 * MiB,
              f"the daemon's memory stays bounded: +{(hwm - rss0) / MiB:.0f} MiB at its peak")
log("PASS")
