# SPDX-License-Identifier: BSD-2-Clause
# Who owns a process's samples, as ptrace and perf decide: a setuid-root program started by a
# user is root's (its effective uid, and it is not dumpable), so that user, a member of the
# socket's group, sees none of its stacks; a process that makes itself undumpable while profiled
# becomes root's too. The user still sees her ordinary processes.
import os
import shutil
import subprocess
import tempfile
import time

from profd_e2e import Daemon, as_user, check, fixture, log, parse_folded, temp_user

EXIT_DENIED = 4
USER = "profd-e2e-suid"

pw = temp_user(USER)
tmp = tempfile.mkdtemp(prefix="profd-suid-")
procs = []
try:
    import grp

    group = grp.getgrgid(pw.pw_gid).gr_name
    os.chmod(tmp, 0o755)
    # A setuid-root copy of the busy fixture, under its own name.
    suid = os.path.join(tmp, "suidburn")
    shutil.copy(fixture("burn"), suid)
    os.chown(suid, 0, 0)
    os.chmod(suid, 0o4755)
    # Her own busy process under another name, to show she still sees what is hers.
    mine = os.path.join(tmp, "userburn")
    shutil.copy(fixture("burn"), mine)
    os.chmod(mine, 0o755)

    with Daemon("--frequency", "199", "--socket-group", group) as d:
        p_suid = subprocess.Popen([*as_user(pw), suid, "30"])
        p_mine = subprocess.Popen([*as_user(pw), mine, "30"])
        # One that makes itself undumpable (PR_SET_DUMPABLE 0) after 2 s of being profiled.
        p_undump = subprocess.Popen([*as_user(pw), "env", "BURN_UNDUMPABLE_AFTER=2", mine, "30"])
        procs = [p_suid, p_mine, p_undump]
        time.sleep(1)
        st = os.stat(f"/proc/{p_suid.pid}")
        check(st.st_uid == 0, "the kernel counts the setuid program as root's (/proc owner)")
        time.sleep(4)

        r = d.ctl("dump", "flamegraph", "--format", "folded", "--pid", str(p_suid.pid),
                  user=(pw.pw_uid, pw.pw_gid))
        check(r.returncode == EXIT_DENIED,
              f"the user may not dump the setuid-root process she started: {r.returncode} "
              f"{r.stderr!r}")
        r = d.ctl("dump", "flamegraph", "--format", "folded", user=(pw.pw_uid, pw.pw_gid))
        roots = {line.split(";")[0] for line in r.stdout.splitlines() if line}
        check(r.returncode == 0 and "userburn" in roots,
              f"the user sees her own process: {r.returncode} {roots}")
        check("suidburn" not in roots,
              f"her system-wide dump holds nothing of the setuid program: {roots}")
        r = d.ctl("dump", "flamegraph", "--format", "folded", "--pid", str(p_undump.pid),
                  user=(pw.pw_uid, pw.pw_gid))
        check(r.returncode == EXIT_DENIED,
              f"a process that made itself undumpable is no longer hers to see: "
              f"{r.returncode} {r.stderr!r}")
        r = d.ctl("dump", "flamegraph", "--format", "folded", "--pid", str(p_undump.pid))
        check(r.returncode == 0 and parse_folded(r.stdout), "root still sees it")

        root_roots = {s.split(";")[0] for s in
                      parse_folded(d.ctl("dump", "flamegraph", "--format", "folded").stdout)}
        check("suidburn" in root_roots, f"root sees the setuid program: {root_roots}")
finally:
    for p in procs:
        p.kill()
        p.wait()
    shutil.rmtree(tmp, ignore_errors=True)
log("all ok")
