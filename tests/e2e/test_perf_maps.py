# SPDX-License-Identifier: BSD-2-Clause
# Perf maps of a user's JIT processes, as that user (made by the test) writes them: one written
# only after its code has run for a while is still used (the daemon looks again when it
# changes), and one that is a symbolic link to a file only root may read is not followed: none of
# that file's lines comes back as a frame name. JIT code no map names is one frame per mapping.
import os
import subprocess
import tempfile
import time

from profd_e2e import Daemon, as_user, check, fixture, log, parse_folded, temp_user

USER = "profd-e2e-maps"

pw = temp_user(USER)
tmp = tempfile.mkdtemp(prefix="profd-maps-")
procs = []


def start(env):
    p = subprocess.Popen([*as_user(pw), "env", *env, fixture("jit"), "0", "40"], cwd="/",
                         stdout=subprocess.PIPE, text=True)
    procs.append(p)
    line = p.stdout.readline().split()
    check(line[:1] == ["ready"], f"the JIT fixture runs: {line}")
    return p, int(line[1]), int(line[2], 16)


def frames_of(d, pid):
    r = d.ctl("dump", "flamegraph", "--format", "folded", "--pid", str(pid))
    return {f for s in parse_folded(r.stdout) for f in s.split(";")}


try:
    secret = os.path.join(tmp, "secret.map")
    late, late_pid, _ = start(["JIT_MAP_AFTER=4"])
    linked, linked_pid, linked_code = start([f"JIT_MAP_LINK={secret}"])
    # Root's file, in the map's syntax, covering the linked process's JIT code.
    with open(secret, "w") as f:
        f.write(f"{linked_code:x} 100 secret_symbol_line\n")
    os.chmod(secret, 0o600)
    os.chmod(tmp, 0o755)

    with Daemon("--frequency", "199", "--pid", str(late_pid), "--pid", str(linked_pid)) as d:
        time.sleep(2)
        early = frames_of(d, late_pid)
        check("jit_hot_loop" not in early and "[anon]" in " ".join(early),
              f"before its map exists, the JIT frame is anonymous: {sorted(early)[:8]}")
        check(late.stdout.readline().strip() == "written", "the late map is written")
        named = set()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "jit_hot_loop" not in named:
            time.sleep(0.5)
            named = frames_of(d, late_pid)
        check("jit_hot_loop" in named, "the map written late names the JIT frame")

        frames = frames_of(d, linked_pid)
        log(f"linked map's process: {sorted(frames)[:10]}")
        check(any("anon" in f for f in frames),
              "the linked map's process was sampled in its JIT code")
        # Its JIT code stays unnamed: one frame for the mapping, not one per address.
        jit = sorted(f for f in frames if "anon" in f)
        check(jit == [f"[jit] ([anon]@0x{linked_code:x})"],
              f"the unnamed JIT code is one frame, named by its mapping: {jit[:6]}")
        check(not any("secret" in f for f in frames),
              "no line of the root-only file behind the link names a frame")
        r = d.ctl("dump", "flamegraph", "--format", "folded")
        check("secret_symbol_line" not in r.stdout, "not in the system-wide dump either")
finally:
    for p in procs:
        p.kill()
        p.wait()
        try:
            os.unlink(f"/tmp/perf-{p.pid}.map")
        except OSError:
            pass
    subprocess.run(["rm", "-rf", tmp])
log("all ok")
