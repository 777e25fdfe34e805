# SPDX-License-Identifier: BSD-2-Clause
"""A CUDA process started by the profiled one (a launcher's trainer, a DataLoader worker): the
daemon follows it from its fork, accepts its CUPTI library's GpuAttach, and charges its kernels
to its launch stacks; `dump --children` shows them under the child's own root.

profd --pid LAUNCHER, where the launcher (a shell) forks the gpu_app fixture over the fake
libcupti after profd started.
"""
import os
import subprocess
import tempfile
import time

from profd_e2e import Daemon, check, fail, fixture, log, parse_folded, require_root

require_root()
LIB = os.environ.get("PROFD_CUPTI_SO")
FAKE = os.environ.get("PROFD_FAKE_CUPTI")
if not LIB or not FAKE or not os.path.exists(LIB) or not os.path.exists(FAKE):
    fail(f"libprofd_cupti ({LIB}) or the fake libcupti ({FAKE}) is not built")

tmp = tempfile.mkdtemp(prefix="profd-gpu-child-")
out_path = os.path.join(tmp, "out")
go = os.path.join(tmp, "go")
sock = os.path.join(tmp, "run", "profd.sock")
env = dict(os.environ, PROFD_SOCKET=sock, PROFD_CUPTI_PATH=FAKE,
           CUDA_INJECTION64_PATH=LIB)
# The launcher waits for profd, then starts the app as its child (not exec: it stays the parent).
launcher = subprocess.Popen(
    ["sh", "-c", f'while [ ! -e "{go}" ]; do sleep 0.05; done; "{fixture("gpu_app")}" '
     f'"{LIB}" 4 "{out_path}"; echo done'], env=env, stdout=subprocess.DEVNULL)
try:
    with Daemon("--pid", str(launcher.pid), "--frequency", "499", socket_path=sock) as d:
        open(go, "w").close()
        rc = launcher.wait(90)
        check(rc == 0, f"the launcher and its app ran to completion (exit {rc})")
        res = dict(line.split() for line in open(out_path) if line.strip())
        app = int(res["pid"])
        check(app != launcher.pid, f"the app ({app}) is a child of the launcher")
        time.sleep(4)  # held samples are released at most 3 s after they were taken
        st = d.ctl("status")
        log(st.stdout)
        gpu_line = st.stdout.split("gpu:")[1].splitlines()[0]
        check(" 0 joined" not in gpu_line and "attached" in d.log_text(),
              f"the child's CUPTI library was accepted and its kernels joined ({gpu_line})")
        r = d.ctl("dump", "flamegraph", "--pid", str(launcher.pid), "--children", "--value",
                  "gpu", "--format", "folded")
        check(r.returncode == 0, f"dump --children --value gpu works ({r.stderr.strip()})")
        f = parse_folded(r.stdout)
        for s, v in sorted(f.items(), key=lambda kv: -kv[1])[:6]:
            log(f"  {v} {s}")
        mm = sum(v for s, v in f.items() if s.startswith(f"pid {app} (") and
                 "matmul" in s.split(";")[-1])
        check(mm == int(res["matmul_ns"]),
              f"the child's matmul GPU time is exactly what ran ({mm} vs {res['matmul_ns']})")
finally:
    if launcher.poll() is None:
        launcher.kill()
log("PASS")
