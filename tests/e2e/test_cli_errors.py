#!/usr/bin/env python3
# profctl's one-line errors and exit codes, and SO_PEERCRED access control against the real
# daemon: a non-root user sees only processes running under its own uid.
import json
import os
import sys
import pwd
import grp
import subprocess
import tempfile
import time
from profd_e2e import *

EXIT_USAGE, EXIT_UNREACHABLE, EXIT_DENIED, EXIT_NO_SAMPLES = 2, 3, 4, 5

require_root()

# No daemon at the path.
r = subprocess.run([PROFCTL, "--socket", "/nonexistent/profd.sock", "status"],
                   capture_output=True, text=True)
check(r.returncode == EXIT_UNREACHABLE, f"no daemon: exit {r.returncode}")
check(len(r.stderr.strip().splitlines()) == 1 and "/nonexistent/profd.sock" in r.stderr,
      f"no daemon: one line naming the path: {r.stderr!r}")

# Bad arguments.
for args in (["dump", "flamegraph", "--pid", "abc"], ["dump", "flamegraph", "--since", "5x"],
             ["dump", "flamegraph", "--format", "png"], ["frobnicate"]):
    r = subprocess.run([PROFCTL, "--socket", "/nonexistent", *args], capture_output=True,
                       text=True)
    check(r.returncode == EXIT_USAGE and len(r.stderr.strip().splitlines()) == 1,
          f"{' '.join(args)}: usage error, one line: {r.returncode} {r.stderr!r}")
r = subprocess.run([PROFD, "--frequency", "0"], capture_output=True, text=True)
check(r.returncode == 2 and "--frequency" in r.stderr, f"profd --frequency 0: {r.stderr!r}")
# The unwind tables' bound: 1M to 64G, on the command line and in the configuration file.
for v in ("0", "12Q", "65G"):
    r = subprocess.run([PROFD, "--unwind-memory", v], capture_output=True, text=True)
    check(r.returncode == 2 and r.stderr.count("\n") == 1 and
          r.stderr.startswith(f"profd: --unwind-memory '{v}': expected a size from 1M to 64G"),
          f"profd --unwind-memory {v}: exit {r.returncode}, {r.stderr!r}")
with tempfile.NamedTemporaryFile("w", suffix=".conf") as conf:
    conf.write("frequency = 49\nunwind_memory = x\n")
    conf.flush()
    r = subprocess.run([PROFD, "--config", conf.name], capture_output=True, text=True)
    check(r.returncode == 2 and r.stderr.count("\n") == 1 and
          r.stderr.startswith(f"profd: {conf.name}:2: unwind_memory 'x': expected a size from "
                              "1M to 64G"),
          f"unwind_memory = x in a --config file: exit {r.returncode}, {r.stderr!r}")

nobody = pwd.getpwnam("nobody")
nogroup = grp.getgrgid(nobody.pw_gid)
user = (nobody.pw_uid, nobody.pw_gid)

# root's burner under its own name, so a system-wide dump tells it from nobody's.
import shutil
import tempfile
rootburn = os.path.join(tempfile.mkdtemp(), "rootburn")
shutil.copy(fixture("burn"), rootburn)
root_burn = subprocess.Popen([rootburn, "20"])
user_burn = subprocess.Popen(["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}",
                              "--clear-groups", fixture("burn"), "20"])
try:
    with Daemon("--frequency", "199", "--socket-group", nogroup.gr_name) as d:
        st = os.stat(d.sock)
        check(st.st_mode & 0o777 == 0o660, f"socket mode {oct(st.st_mode & 0o777)} is 0660")
        check(os.stat(os.path.dirname(d.sock)).st_mode & 0o777 == 0o755,
              "socket directory mode 0755")
        check(st.st_gid == nogroup.gr_gid, "socket group set by --socket-group")
        time.sleep(3)

        r = d.ctl("dump", "flamegraph", "--format", "folded", "--pid", "999999")
        check(r.returncode == EXIT_NO_SAMPLES and "999999" in r.stderr,
              f"no samples for an unknown pid: {r.returncode} {r.stderr!r}")

        r = d.ctl("status", user=user)
        check(r.returncode == 0, f"a group member can ask for status: {r.stderr!r}")
        check("shown to root only" in r.stdout and "received" not in r.stdout
              and "unwind:" not in r.stdout,
              f"her status leaves out the whole machine's counters: {r.stdout!r}")
        r = d.ctl("status", "--json", user=user)
        js = json.loads(r.stdout) if r.returncode == 0 else {}
        check(js.get("only_uid") == user[0] and "samples_received" not in js
              and "processes" not in js and "stacks" not in js
              and "symbol_bytes" not in js and "trace_ring_bytes" not in js
              and "unwind" not in js,
              f"and so does its JSON: {sorted(js)}")
        r = d.ctl("status", "--json")
        js = json.loads(r.stdout) if r.returncode == 0 else {}
        check("samples_received" in js and "only_uid" not in js
              and js.get("unwind", {}).get("bottom", 0) > 0, "root's status has them all")
        # Memory outside the store: the ELF symbol cache within its bound, the trace ring
        # within its default 8 MiB and holding the samples taken so far.
        check(0 < js.get("symbol_bytes", 0) <= js.get("symbol_budget_bytes", 0)
              and js.get("symbol_files", 0) > 0
              and 0 < js.get("trace_ring_bytes", 0) <= 8 << 20,
              f"root's status shows the memory outside the store: {js}")
        r = d.ctl("status")
        check("symbols:" in r.stdout and "trace ring:" in r.stdout,
              f"and its text says so: {r.stdout!r}")

        r = d.ctl("dump", "flamegraph", "--format", "folded", "--pid", str(root_burn.pid),
                  user=user)
        check(r.returncode == EXIT_DENIED and "permission denied" in r.stderr.lower()
              and str(root_burn.pid) in r.stderr,
              f"nobody may not see root's process: {r.returncode} {r.stderr!r}")

        r = d.ctl("dump", "flamegraph", "--format", "folded", "--pid", str(user_burn.pid),
                  user=user)
        check(r.returncode == 0 and "work_a" in r.stdout,
              f"nobody sees its own process: {r.returncode} {r.stderr!r}")
        check(f"only processes of uid {user[0]} are shown" in r.stderr,
              f"nobody is told the view is filtered: {r.stderr!r}")

        r = d.ctl("dump", "flamegraph", "--format", "folded", user=user)
        roots = {l.split(";")[0] for l in r.stdout.splitlines() if l}
        # nobody's processes here: its burn fixture, and the profctl/setpriv it just ran.
        check(r.returncode == 0 and "burn" in roots and roots <= {"burn", "profctl", "setpriv"},
              f"nobody's system-wide dump holds only its own processes: {roots}")
        # One user cannot hold every connection slot: its 17th connection is refused as busy
        # (a quarter of the 64 slots each), and root is still served while it holds 16. Past
        # the limit a connection may still say Hello and become a CUDA library's uplink, so
        # the refusal comes with its first other request.
        hog = subprocess.Popen(
            ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups",
             sys.executable, "-c",
             "import socket, struct, sys\n"
             "def reply(s):\n"
             "    n = struct.unpack('>I', s.recv(4))[0]; return s.recv(n)\n"
             "conns = []\n"
             "for i in range(17):\n"
             "    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); conns.append(s)\n"
             "s = conns[-1]; s.settimeout(5)\n"
             "s.sendall(bytes.fromhex('000000040a020801')); reply(s)\n"
             "s.sendall(bytes.fromhex('000000021200')); body = reply(s)\n"
             "print('busy' if b'busy' in body else 'served', flush=True)\n"
             "sys.stdin.read()\n", d.sock],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        first = hog.stdout.readline()
        check("busy" in first, f"a user's 17th connection is refused as busy: {first!r}")
        r = d.ctl("status")
        check(r.returncode == 0, "root is served while another user holds 16 connections")
        hog.stdin.close()
        hog.wait(10)

        root_roots = {s.split(";")[0] for s in
                      parse_folded(d.ctl("dump", "flamegraph", "--format", "folded").stdout)}
        check("rootburn" in root_roots and "rootburn" not in roots,
              f"root sees root's busy process, nobody does not: {root_roots}")

    # A daemon for two processes: each user's status names only her own target.
    with Daemon("--pid", str(root_burn.pid), "--pid", str(user_burn.pid), "--socket-group",
                nogroup.gr_name) as d:
        js = json.loads(d.ctl("status", "--json", user=user).stdout or "{}")
        check(js.get("target_pids") == [user_burn.pid],
              f"nobody's status names only her own --pid target: {js.get('target_pids')}")
        js = json.loads(d.ctl("status", "--json").stdout or "{}")
        check(sorted(js.get("target_pids", [])) == sorted([root_burn.pid, user_burn.pid]),
              f"root's names both: {js.get('target_pids')}")
finally:
    for p in (root_burn, user_burn):
        p.kill()
        p.wait()
log("PASS")
