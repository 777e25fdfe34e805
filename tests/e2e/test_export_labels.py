#!/usr/bin/env python3
# Who a series is, end to end: profd system-wide exporting to the stand-in receiver with
# --export-sample-labels pid, and processes that test each way profd names a service:
# - short-lived processes (1 s each) with OTEL_SERVICE_NAME that exit before the export's flush:
#   their samples keep the name of their environment (read while they ran, not at the flush);
# - a wrapper that execs the real program: after the exec its samples carry the program's name;
# - a [services] rule (--export-service NAME=GLOB) on the command line;
# - a process in a systemd-style service cgroup (NAME.service made by the test in the cgroup v2
#   hierarchy): label container=NAME.service, service_name NAME;
# - every series carries pid (asked for) and no tid; each pid's series hold its dump's samples.
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from profd_e2e import *

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "receiver"))
import receiver_client as rc  # noqa: E402

require_root()
try:
    rc.venv_python()
except rc.Unavailable as e:
    skip(str(e))
tmp = tempfile.mkdtemp(prefix="profd-export-labels-")
os.chmod(tmp, 0o755)
wrapped = os.path.join(tmp, "wrapped-burn")
shutil.copy(fixture("burn"), wrapped)
ruled = os.path.join(tmp, "ruled-burn")
shutil.copy(fixture("burn"), ruled)
unit = f"profd-e2e-{os.getpid()}"


def cgroup2_root():
    with open("/proc/mounts") as f:
        for line in f:
            dev, path, fstype = line.split()[:3]
            if fstype == "cgroup2":
                return path
    return None


recv = rc.Receiver(logpath=os.path.join(tmp, "receiver.log"))
try:
    recv.start()
except RuntimeError as e:
    fail(str(e))
cg_dir = None
procs = []
try:
    with Daemon("--pyroscope", recv.url, "--export-interval", "4s", "--export-spool",
                os.path.join(tmp, "spool"), "--export-sample-labels", "pid",
                "--export-service", f"ruled=*/ruled-burn*") as d:
        env = dict(os.environ)
        env.pop("OTEL_SERVICE_NAME", None)
        env.pop("PYROSCOPE_APPLICATION_NAME", None)
        # Three short-lived processes, one after the other.
        short = []
        for i in range(3):
            p = subprocess.Popen([fixture("burn"), "1"], env=dict(env, OTEL_SERVICE_NAME="short-e2e"))
            p.wait(30)
            short.append(p.pid)
        # A wrapper that burns in the shell a while, then execs the program.
        wrap = subprocess.Popen(["sh", "-c", 'i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; '
                                 'exec "$0" 2', wrapped], env=env)
        # A rule, and a process in a service cgroup.
        ruled_p = subprocess.Popen([ruled, "2"], env=env)
        procs += [wrap, ruled_p]
        root = cgroup2_root()
        svc = None
        if root:
            cg_dir = os.path.join(root, f"{unit}.service")
            os.mkdir(cg_dir)
            svc = subprocess.Popen(["sh", "-c", 'read _ && exec "$0" 2', fixture("burn")],
                                   stdin=subprocess.PIPE, env=env)
            procs.append(svc)
            with open(os.path.join(cg_dir, "cgroup.procs"), "w") as f:
                f.write(str(svc.pid))
            svc.stdin.write(b"go\n")
            svc.stdin.close()
        for p in procs:
            p.wait(60)
        time.sleep(6)  # the last interval (4 s +-20%) carries the rest out
        deadline = time.time() + 20
        while time.time() < deadline:
            x = json.loads(d.ctl("status", "--json").stdout)["export"][0]
            if not x.get("spool_requests") and x.get("samples_exported") == x.get("samples_sent"):
                break
            time.sleep(1)
        st = recv.stats()

        def by_pid(pid, **match):
            return rc.total_of(rc.series_of(st, pid=str(pid), **match), "samples/count",
                               unique=True)

        for pid in short:
            want = total(d.folded("--pid", str(pid)))
            got = by_pid(pid, service_name="short-e2e")
            check(want > 0 and got == want,
                  f"short-lived pid {pid}: {got} samples under its environment's name of "
                  f"{want} (it exited before the flush)")
        f = d.folded("--pid", str(wrap.pid))
        after = total(f, lambda fr: "work_a" in fr or "work_b" in fr)
        got = by_pid(wrap.pid, service_name="wrapped-burn")
        check(after > 0 and got >= after,
              f"after the exec the wrapper's samples are the program's: {got} >= {after}")
        check(by_pid(wrap.pid) == total(f), f"all of the wrapper's pid arrived: "
              f"{by_pid(wrap.pid)} of {total(f)}")
        want = total(d.folded("--pid", str(ruled_p.pid)))
        check(want > 0 and by_pid(ruled_p.pid, service_name="ruled") == want,
              f"the [services] rule names its process: {by_pid(ruled_p.pid, service_name='ruled')}"
              f" of {want}")
        if svc:
            want = total(d.folded("--pid", str(svc.pid)))
            got = by_pid(svc.pid, service_name=unit, container=f"{unit}.service")
            check(want > 0 and got == want,
                  f"a process in {unit}.service: container and service from the cgroup "
                  f"({got} of {want})")
        else:
            log("no cgroup2 hierarchy mounted: the service cgroup case is left out")
        check(all("pid" in s["labels"] and "tid" not in s["labels"]
                  for s in st["pyroscope"]["series"]), "every series has pid and no tid")
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    if cg_dir and os.path.isdir(cg_dir):
        try:
            os.rmdir(cg_dir)
        except OSError as e:
            log(f"could not remove {cg_dir}: {e}")
    recv.stop()
log("PASS")
