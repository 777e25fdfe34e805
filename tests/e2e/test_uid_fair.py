# SPDX-License-Identifier: BSD-2-Clause
"""One member of the socket's group floods the daemon with GPU uplinks (the protocol spoken
directly, no CUDA: made-up kernel batches from 8 processes of hers). With the store small
(8 MiB), another user's history survives her flood whole and the store evicts her data first
(its fairness counter moves); with a low uplink rate, her batches over it are refused, counted
and answered busy.

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
RATE = 100  # records a second an uplink; alice's 8 together 200 (twice one)

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

# The store's fairness, at the default rate: the store is pressed by what the daemon takes.
with Daemon("--memory-cap", "8M", "--socket-group", group) as d:
    burn = subprocess.Popen(["setpriv", f"--reuid={bob.pw_uid}", f"--regid={bob.pw_gid}",
                             "--clear-groups", fixture("burn"), "4"])
    check(burn.wait(60) == 0, "bob's burner ran its 4 s")
    time.sleep(1.5)  # the last bucket's samples are in the store
    before = bob_samples(d, burn.pid)
    check(before > 20, f"bob's history is in the store: {before} samples")
    rss0 = vm_bytes(d.proc.pid, "VmRSS")

    tot = flood(d.sock, alice.pw_uid, alice.pw_gid, 8, FLOOD_S)()
    hwm = vm_bytes(d.proc.pid, "VmHWM")
    time.sleep(1.5)
    st = status(d)
    after = bob_samples(d, burn.pid)
    # Field numbers: StatusReply in proto/profd.proto.
    log(f"flood: {tot}; samples evicted {st.get(14, 0)}, store {st.get(20, 0)} bytes, "
        f"waits refused {st.get(99, 0)}, over share {st.get(100, 0)}; RSS {rss0 / MiB:.0f} MiB "
        f"before, peak {hwm / MiB:.0f} MiB")
    check(tot["failed"] == 0 and tot["batches"] > 0,
          f"alice's 8 uplinks attached and flooded ({tot['batches']} batches)")
    check(st.get(100, 0) > 0,
          f"the store was pressed and evicted alice's entries first ({st.get(100, 0)} over "
          "her share)")
    check(after == before, f"bob's samples all survive alice's flood: {after} of {before}")
    check("evicted first from users over an equal share" in d.ctl("status").stdout,
          "profctl status shows the fair eviction")
    if SANITIZED:
        log("sanitizer build: the memory bound is checked on the plain build")
    else:
        # The probe saw the daemon grow by 180-410 MiB under such a flood.
        check(hwm - rss0 < 128 * MiB,
              f"the daemon's memory stays bounded: +{(hwm - rss0) / MiB:.0f} MiB at its peak")
    rc = d.stop()
    check(rc == 0, f"profd exits cleanly after the flood (status {rc})")

# The uplink rate, low enough that even a sanitizer build takes more than it allows.
with Daemon("--socket-group", group, "--gpu-uplink-rate", str(RATE)) as d:
    tot = flood(d.sock, alice.pw_uid, alice.pw_gid, 8, 6)()
    st = status(d)
    log(f"flood: {tot}; refused {st.get(96, 0)} records, {st.get(97, 0)} bytes, "
        f"{st.get(98, 0)} batches")
    check(tot["failed"] == 0 and tot["batches"] > 0,
          f"alice's 8 uplinks attached and flooded ({tot['batches']} batches)")
    check(st.get(96, 0) > 0 and st.get(98, 0) > 0 and st.get(97, 0) > 0,
          f"batches over the uplink rate were refused and counted: {st.get(96, 0)} records, "
          f"{st.get(97, 0)} bytes in {st.get(98, 0)} batches")
    check(tot["busy"] == st.get(98, 0) and tot["busy"] < tot["batches"],
          f"the uplinks were told of each refusal ({tot['busy']} busy replies) and some "
          "batches passed")
    st_text = d.ctl("status").stdout
    check("refused: over the rate of an uplink (100 records a second)" in st_text,
          "profctl status shows the refusals and the rate")
    check("its uplink sends more than 100 records" in d.log_text(), "the refusal is logged")
log("PASS")
