#!/usr/bin/env python3
# systemd/profd.service passes `systemd-analyze verify`. The unit names the installed binary;
# verify checks that ExecStart exists, so the copy verified here points at the built one.
import os
import shutil
import subprocess
import tempfile
from profd_e2e import *

src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "systemd",
                   "profd.service")
if not shutil.which("systemd-analyze"):
    skip("systemd-analyze is not installed (scripts/install-deps installs it)")
text = open(src).read()
check("Type=notify" in text and "NoNewPrivileges=yes" in text, "unit is Type=notify, hardened")
check("EnvironmentFile=-/etc/default/profd" in text and " $PROFD_OPTIONS" in text,
      "options come from /etc/default/profd (PROFD_OPTIONS), optional")
tmp = tempfile.mkdtemp()
unit = os.path.join(tmp, "profd.service")
with open(unit, "w") as f:
    f.write(text.replace("/usr/local/bin/profd", os.path.abspath(PROFD)))
r = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True)
log(r.stdout + r.stderr)
problems = [l for l in (r.stdout + r.stderr).splitlines()
            if "profd.service" in l and "Failed to" not in l or "profd.service:" in l]
check(r.returncode == 0 and not problems, f"systemd-analyze verify is clean: {problems}")
log("PASS")
