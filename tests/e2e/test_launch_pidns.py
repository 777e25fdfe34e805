# SPDX-License-Identifier: BSD-2-Clause
"""profd in a pid namespace of its own: a connecting GPU library names itself by a pid of that
namespace (SO_PEERCRED), the launch probes and CPU samples by its pid in the initial one, so the
daemon turns GPU correlation off and says so once at start. In the initial namespace it does not.
"""
import os
import shutil
import signal
import subprocess
import tempfile

import profd_e2e
from profd_e2e import Daemon, check, log, require_root, skip

OFF = "GPU correlation is off"

require_root()
unshare = shutil.which("unshare")
if not unshare:
    skip("no unshare(1)")
if subprocess.run([unshare, "--pid", "--fork", "--mount-proc", "true"]).returncode != 0:
    skip("cannot create a pid namespace here")

with Daemon("--frequency", "19") as d:
    r = d.ctl("status")
    check(r.returncode == 0, "status answers in the initial pid namespace")
    check(OFF not in d.log_text(), "GPU correlation stays on in the initial pid namespace")

# The daemon's test harness starts PROFD with arguments: put it in a fresh pid namespace, with a
# /proc of that namespace. unshare(1) does not pass SIGTERM on: the daemon is stopped directly.
tmp = tempfile.mkdtemp(prefix="profd-pidns-")
wrapper = os.path.join(tmp, "profd-in-pidns")
with open(wrapper, "w") as f:
    f.write(f'#!/bin/sh\nexec {unshare} --pid --mount-proc --kill-child=SIGTERM '
            f'{profd_e2e.PROFD} "$@"\n')
os.chmod(wrapper, 0o755)
profd_e2e.PROFD = wrapper

with Daemon("--frequency", "19") as d:
    r = d.ctl("status")
    check(r.returncode == 0, "status answers in a pid namespace of its own")
    text = d.log_text()
    log(text)
    check(text.count(OFF) == 1, "GPU correlation is off, said once")
    check("pid namespace of its own" in text, "the log line says why")
    with open(f"/proc/{d.proc.pid}/task/{d.proc.pid}/children") as f:
        daemon_pid = int(f.read().split()[0])
    os.kill(daemon_pid, signal.SIGTERM)
    check(d.proc.wait(20) == 0, "profd stops on SIGTERM, and unshare with it")
shutil.rmtree(tmp)
log("PASS")
