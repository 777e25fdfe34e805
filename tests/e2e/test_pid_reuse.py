#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
# A pid the kernel reuses names two processes, and profd keeps them apart: alice's process
# (oldproc: burn, spin_a) exits, and bob's (newproc: syscaller, do_reads) is made to get its pid
# by writing /proc/sys/kernel/ns_last_pid right before the fork. Root's dump shows alice's
# functions under her process's name and uid and bob's under his; alice, a member of the
# socket's group, may still ask for her old process's pid and sees only her own samples, under
# her own process's name and uid. Before processes were keyed by their life, alice's samples
# showed under bob's name and uid, and alice was refused --pid on her own process.
import json
import os
import shutil
import subprocess
import tempfile
import time

from profd_e2e import Daemon, as_user, check, fail, fixture, log, parse_folded, temp_user

ALICE = "profd-reuse-alice"
BOB = "profd-reuse-bob"
NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"

alice = temp_user(ALICE)
bob = temp_user(BOB)
tmp = tempfile.mkdtemp(prefix="profd-reuse-")
procs = []


def spawn_on_pid(pid, argv, tries=500):
    """Start argv so that it gets pid: ns_last_pid is set to pid - 1 just before the fork. Other
    processes of the machine may fork in between and take it: kill ours and try again."""
    for _ in range(tries):
        with open(NS_LAST_PID, "w") as f:
            f.write(str(pid - 1))
        p = subprocess.Popen(argv)
        if p.pid == pid:
            return p
        p.kill()
        p.wait()
    fail(f"no fork got pid {pid} in {tries} tries")


def dump_json(d, *args, user=None):
    r = d.ctl("dump", "flamegraph", "--format", "json", *args, user=user)
    who = f"uid {user[0]}" if user else "root"
    check(r.returncode == 0, f"dump {' '.join(args)} as {who}: {r.returncode} {r.stderr!r}")
    return json.loads(r.stdout)


def functions_by_process(prof, pid):
    """{(process name, uid): set of function names} of pid's samples in a JSON dump."""
    out = {}
    for s in prof["samples"]:
        if s["pid"] != pid or not s["values"][0]:
            continue
        if "process" in s:
            pr = prof["processes"][s["process"]]
        else:
            # Without the reference the pid must name one process of the dump.
            same = [p for p in prof["processes"] if p["pid"] == pid]
            if len(same) != 1:
                fail(f"a sample of pid {pid} does not say which of {len(same)} it is from")
            pr = same[0]
        if pr["pid"] != pid:
            fail(f"a sample of pid {pid} names the process entry of pid {pr['pid']}")
        names = {prof["frames"][i]["name"] for i in prof["stacks"][s["stack"]]}
        out.setdefault((pr["name"], pr["uid"]), set()).update(names)
    return out


try:
    import grp

    if not os.access(NS_LAST_PID, os.W_OK):
        fail(f"{NS_LAST_PID} is not writable: pid reuse cannot be forced")
    group = grp.getgrgid(alice.pw_gid).gr_name
    os.chmod(tmp, 0o755)
    old = os.path.join(tmp, "oldproc")
    new = os.path.join(tmp, "newproc")
    shutil.copy(fixture("burn"), old)
    shutil.copy(fixture("syscaller"), new)
    os.chmod(old, 0o755)
    os.chmod(new, 0o755)

    with Daemon("--frequency", "199", "--socket-group", group) as d:
        p_old = subprocess.Popen([*as_user(alice), old, "3"])
        procs.append(p_old)
        pid = p_old.pid
        check(p_old.wait(30) == 0, f"alice's process (pid {pid}) ran and exited")
        p_new = spawn_on_pid(pid, [*as_user(bob), new, "3"])
        procs.append(p_new)
        log(f"bob's process got pid {pid}")
        check(p_new.wait(30) == 0, f"bob's process ran on pid {pid} and exited")
        time.sleep(1)  # the last samples and the exit record reach the daemon

        # Root: every process under its own name, the folded roots as the probe read them.
        r = d.ctl("dump", "flamegraph", "--format", "folded")
        check(r.returncode == 0, f"root's dump: {r.stderr!r}")
        stacks = [st.split(";") for st in parse_folded(r.stdout)]
        old_fns = {fn for st in stacks if st[0] == "oldproc" for fn in st}
        new_fns = {fn for st in stacks if st[0] == "newproc" for fn in st}
        check("spin_a" in old_fns, "root's folded dump: alice's spin_a under oldproc")
        check("spin_a" not in new_fns, "root's folded dump: no spin_a under bob's newproc")
        check("do_reads" in new_fns, "root's folded dump: bob's do_reads under newproc")
        check("do_reads" not in old_fns, "root's folded dump: no do_reads under oldproc")

        # Root's JSON for the pid: two processes, each with its own owner and functions.
        prof = dump_json(d, "--pid", str(pid))
        lives = [p for p in prof["processes"] if p["pid"] == pid]
        check(len(lives) == 2, f"pid {pid} is listed once per process: {lives}")
        check(all(p.get("start_time") for p in lives), "each process has its start time")
        by = functions_by_process(prof, pid)
        log(f"root's view of pid {pid}: { {k: sorted(v)[:6] for k, v in by.items()} }")
        check("spin_a" in by.get(("oldproc", alice.pw_uid), set()),
              "alice's spin_a is under oldproc and alice's uid")
        check("do_reads" in by.get(("newproc", bob.pw_uid), set()),
              "bob's do_reads is under newproc and bob's uid")
        check(not any("spin_a" in v for k, v in by.items() if k != ("oldproc", alice.pw_uid)),
              "alice's spin_a is under no other process or owner")

        # Alice may ask for the pid her process held, and sees her own process only.
        prof = dump_json(d, "--pid", str(pid), user=(alice.pw_uid, alice.pw_gid))
        by = functions_by_process(prof, pid)
        check(set(by) == {("oldproc", alice.pw_uid)},
              f"alice's --pid {pid}: her process under its own name and uid only: {set(by)}")
        check("spin_a" in by[("oldproc", alice.pw_uid)], "alice sees her spin_a")
        check(all(p["uid"] == alice.pw_uid for p in prof["processes"]),
              "alice's dump lists no other user's process")
        r = d.ctl("dump", "flamegraph", "--format", "folded", user=(alice.pw_uid, alice.pw_gid))
        roots = {line.split(";")[0] for line in r.stdout.splitlines() if line}
        check(r.returncode == 0 and "oldproc" in roots and "newproc" not in roots,
              f"alice's whole dump: her oldproc, not bob's newproc: {roots}")
        # Under the sanitizers an error or a leak makes the daemon's exit status non-zero.
        check(d.stop() == 0, "the daemon stops cleanly")
    log("PASS")
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    shutil.rmtree(tmp, ignore_errors=True)
