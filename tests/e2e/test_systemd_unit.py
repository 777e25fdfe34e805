#!/usr/bin/env python3
# systemd/profd.service, the fleet unit, passes `systemd-analyze verify` and keeps the settings
# the fleet relies on. The unit names the installed binary; verify checks that ExecStart exists,
# so the copy verified here points at the built one (its man page is not installed: --man=no).
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


def setting(key):
    return [l.split("=", 1)[1] for l in text.splitlines() if l.startswith(key + "=")]


execs = setting("ExecStart")
check(len(execs) == 1 and execs[0].startswith("/usr/bin/profd "), f"ExecStart: {execs}")
args = execs[0].split()
check("--pid" not in args and "-p" not in args, "system-wide: no --pid")
# The sampling rate and the memory cap come from /etc/profd/profd.conf: a flag here would
# override the config file and make its keys dead.
check(not [a for a in args if a.startswith(("--frequency", "-F", "--memory-cap", "--config"))],
      f"no --frequency, --memory-cap or --config in ExecStart: {args}")
check(setting("StateDirectory") == ["profd"], "the spool's /var/lib/profd is StateDirectory=")
check(setting("Restart") == ["on-failure"] and setting("RestartPreventExitStatus") == ["2"],
      "Restart=on-failure, but not after a bad config (exit 2)")
check(setting("RuntimeDirectoryPreserve") == ["yes"],
      "/run/profd outlives restarts (containers mount it for the socket)")
check(setting("MemoryMax") == ["1G"], "the service's memory is capped")
check(setting("ExecReload") == ["/bin/kill -HUP $MAINPID"], "reload is SIGHUP")
families = setting("RestrictAddressFamilies")
check(len(families) == 1 and set(families[0].split()) == {"AF_UNIX", "AF_INET", "AF_INET6"},
      f"sockets: the Unix socket and IPv4/IPv6 for export: {families}")
caps = setting("AmbientCapabilities")
check(len(caps) == 1 and {"CAP_BPF", "CAP_PERFMON"} <= set(caps[0].split()),
      "BPF and perf events still allowed")
conf_path = os.path.join(os.path.dirname(src), "..", "packaging", "profd.conf")
freq = [l for l in open(conf_path).read().splitlines() if l.startswith("frequency = ")]
check(len(freq) == 1 and 19 <= int(freq[0].split("=")[1].split("#")[0]) <= 49,
      f"the default config sets the fleet rate, 19-49 Hz: {freq}")
tmp = tempfile.mkdtemp()
unit = os.path.join(tmp, "profd.service")
with open(unit, "w") as f:
    f.write(text.replace("=/usr/bin/profd ", "=" + os.path.abspath(PROFD) + " "))
r = subprocess.run(["systemd-analyze", "verify", "--man=no", unit], capture_output=True, text=True)
log(r.stdout + r.stderr)
problems = [l for l in (r.stdout + r.stderr).splitlines()
            if "profd.service" in l and "Failed to" not in l or "profd.service:" in l]
check(r.returncode == 0 and not problems, f"systemd-analyze verify is clean: {problems}")
log("PASS")
