#!/usr/bin/env python3
# Start-up refusals, a second daemon on the same socket, stale sockets, and a clean shutdown:
# SIGTERM detaches the BPF programs and removes the socket.
import os
import pwd
import socket
import subprocess
from profd_e2e import *

require_root()


def profd_progs():
    r = subprocess.run(["bpftool", "prog", "show"], capture_output=True, text=True)
    return sum(1 for l in r.stdout.splitlines() if "profd_sample" in l)


before = profd_progs()

# Not privileged: say which capabilities are missing.
nobody = pwd.getpwnam("nobody")
r = subprocess.run(["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                    "--clear-groups", PROFD, "--socket", "/tmp/profd-nobody.sock"],
                   capture_output=True, text=True, timeout=30)
check(r.returncode != 0 and "CAP_BPF" in r.stderr and "root" in r.stderr,
      f"unprivileged start refused naming the capabilities: {r.stderr!r}")

# A target that does not exist.
r = subprocess.run([PROFD, "--pid", "999999", "--socket", "/tmp/profd-x.sock"],
                   capture_output=True, text=True, timeout=30)
check(r.returncode != 0 and "999999" in r.stderr, f"missing --pid target refused: {r.stderr!r}")

with Daemon() as d:
    check(profd_progs() == before + 1, "one sampler program loaded while running")
    r = subprocess.run([PROFD, "--socket", d.sock], capture_output=True, text=True, timeout=30)
    check(r.returncode != 0 and "already" in r.stderr,
          f"a second daemon on the same socket refuses: {r.stderr!r}")
    check(d.ping(), "the first daemon still serves")
    rc = d.stop()
    check(rc == 0, f"SIGTERM exits 0 (got {rc})")
    check(not os.path.exists(d.sock), "socket removed on shutdown")
check(profd_progs() == before, "BPF programs detached after shutdown")

# A stale socket file (nobody listening) is replaced.
import tempfile
tmp = tempfile.mkdtemp()
stale = os.path.join(tmp, "stale.sock")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(stale)
s.close()
with Daemon(socket_path=stale) as d:
    check(d.ping(), "a stale socket file is replaced")
    r = d.ctl("status")
    check(r.returncode == 0, "status over the replaced socket")
log("PASS")
