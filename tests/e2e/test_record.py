#!/usr/bin/env python3
# profctl record -- CMD through a running daemon and profd --record -- CMD on its own: the
# command's profile with its known split, its children, its exit status; Ctrl-C still writes
# the profile; a command that cannot start gives one line and the shell's status; a user may
# record her own command but not follow another user's process.
import grp
import os
import pwd
import signal
import sys
import tempfile
import time
from profd_e2e import *

require_root()
out = tempfile.mkdtemp(prefix="profd-record-")
os.chmod(out, 0o777)
burn = fixture("burn")
SPLIT_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "python",
                        "split.py")


def split_of(path, root_prefix="pid "):
    f = parse_folded(open(path).read())
    n = total(f)
    a = total(f, lambda fr: has_chain(fr, ["main", "run", "work_a", "spin_a"]))
    b = total(f, lambda fr: has_chain(fr, ["main", "run", "work_b", "spin_b"]))
    check(n > 0 and all(s.startswith(root_prefix) for s in f),
          f"{os.path.basename(path)}: {n} samples, every stack under a 'pid N (NAME)' root")
    return f, n, a, b


def check_split(path, min_samples):
    f, n, a, b = split_of(path)
    check(n >= min_samples, f"{os.path.basename(path)}: at least {min_samples} samples ({n})")
    split = a / max(a + b, 1)
    check(a + b >= 0.8 * n and abs(split - 0.75) <= 0.06,
          f"{os.path.basename(path)}: work_a's share {split:.3f} is 0.75 +- 0.06 "
          f"({a + b} of {n} in work_a/work_b)")
    return f


idle = subprocess.Popen(["sleep", "300"])
nobody = pwd.getpwnam("nobody")
nogroup = grp.getgrgid(nobody.pw_gid)
try:
    # A daemon for one unrelated process: record adds the command to its target list.
    with Daemon("--pid", str(idle.pid), "--frequency", "499", "--socket-group",
                nogroup.gr_name) as d:
        p1 = os.path.join(out, "burn.folded")
        r = d.ctl("record", "-o", p1, "--", burn, "3")
        check(r.returncode == 0, f"record of a 3 s burn exits 0 ({r.returncode}: {r.stderr})")
        check(f"wrote {p1}" in r.stderr, f"it says where the profile went: {r.stderr.strip()}")
        check_split(p1, 800)

        # A Python program: its functions with lines, in the known split.
        p1p = os.path.join(out, "py.folded")
        r = d.ctl("record", "-o", p1p, "--", sys.executable, SPLIT_PY, "4")
        check(r.returncode == 0, f"record of a Python burn exits 0 ({r.stderr})")
        fp = parse_folded(open(p1p).read())
        h = total(fp, lambda fr: any(x.startswith("heavy (") and "split.py:" in x for x in fr))
        l = total(fp, lambda fr: any(x.startswith("light (") and "split.py:" in x for x in fr))
        check(h + l >= 0.8 * total(fp) and h + l > 500,
              f"py.folded: {h + l} of {total(fp)} samples in heavy/light with their lines")
        check(abs(h / (h + l) - 0.75) <= 0.06, f"py.folded: heavy's share {h / (h + l):.3f} "
              "is 0.75 +- 0.06")

        # The command's exit status, and a child it runs (fork + exec from a shell).
        p2 = os.path.join(out, "sh.folded")
        r = d.ctl("record", "-o", p2, "--", "sh", "-c", f"{burn} 3; exit 3")
        check(r.returncode == 3, f"record exits with the command's status 3 ({r.returncode})")
        f = check_split(p2, 800)
        check(any(s.startswith("pid ") and s.split(";")[0].endswith("(burn)") for s in f),
              "the shell's child is under its own 'pid N (burn)' root")

        # Ctrl-C: the terminal signals the whole foreground group.
        p3 = os.path.join(out, "int.svg")
        rec = subprocess.Popen([PROFCTL, "--socket", d.sock, "record", "-o", p3, "--", burn,
                                "60"], start_new_session=True, stderr=subprocess.PIPE,
                               text=True)
        time.sleep(3)
        os.killpg(rec.pid, signal.SIGINT)
        try:
            _, err = rec.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(rec.pid, signal.SIGKILL)
            fail("record did not finish within 20 s of Ctrl-C")
        check(rec.returncode == 128 + signal.SIGINT,
              f"after Ctrl-C record exits 130, the command's status ({rec.returncode}: {err})")
        svg = open(p3).read() if os.path.exists(p3) else ""
        check(svg.startswith("<?xml") and "spin_a" in svg,
              "the SVG was still written, with the command's frames")

        # A command that cannot start.
        r = d.ctl("record", "-o", os.path.join(out, "none.svg"), "--", "/nonexistent/cmd")
        lines = r.stderr.strip().splitlines()
        check(r.returncode == 127 and len(lines) == 1 and "cannot run" in lines[0],
              f"a missing command: exit 127 and one line ({r.returncode}: {r.stderr!r})")
        check(not os.path.exists(os.path.join(out, "none.svg")), "and no profile file")
        r = d.ctl("record")
        check(r.returncode == 2 and "command" in r.stderr, f"no command: usage error {r.stderr!r}")

        # A group member records her own command.
        p4 = os.path.join(out, "user.folded")
        r = d.ctl("record", "-o", p4, "--", burn, "3", user=(nobody.pw_uid, nobody.pw_gid))
        check(r.returncode == 0, f"a group member records her own command ({r.stderr})")
        check_split(p4, 600)
        check(os.stat(p4).st_uid == nobody.pw_uid, "the profile belongs to her")

        # ... but may not follow root's process (the raw request profctl record sends).
        s = connect(d.sock)
        os.setegid(nobody.pw_gid)
        os.seteuid(nobody.pw_uid)
        try:
            s2 = connect(d.sock)
        finally:
            os.seteuid(0)
            os.setegid(0)
        s.close()
        s2.sendall(req_hello())
        read_frame(s2)
        s2.sendall(frame(field_bytes(10, field_varint(1, idle.pid))))
        e = error_of(read_frame(s2))
        s2.close()
        check(e is not None and e[0] == 3 and "permission denied" in e[1],
              f"following root's process as nobody is refused: {e}")

        # One user may follow 64 live processes at once: the filter is everyone's.
        sleepers = [subprocess.Popen(as_user(nobody) + ["sleep", "60"]) for _ in range(65)]
        try:
            time.sleep(0.5)
            os.setegid(nobody.pw_gid)
            os.seteuid(nobody.pw_uid)
            try:
                s3 = connect(d.sock)
            finally:
                os.seteuid(0)
                os.setegid(0)
            s3.sendall(req_hello())
            read_frame(s3)
            errs = []
            for p in sleepers:
                s3.sendall(frame(field_bytes(10, field_varint(1, p.pid))))
                errs.append(error_of(read_frame(s3)))
            s3.close()
            check(errs[:64] == [None] * 64 and errs[64] is not None and errs[64][0] == 7,
                  f"nobody follows 64 processes, the 65th is refused as busy: {errs[64]}")
        finally:
            for p in sleepers:
                p.kill()
                p.wait()
finally:
    idle.kill()
    idle.wait()

# profd --record on its own: no daemon needed.
p5 = os.path.join(out, "standalone.folded")
r = subprocess.run([PROFD, "--record", "--frequency", "499", "-o", p5, "--", burn, "3"],
                   capture_output=True, text=True, timeout=120)
check(r.returncode == 0, f"profd --record exits with the command's status 0 ({r.returncode}: "
      f"{r.stderr[-600:]})")
check_split(p5, 800)
r = subprocess.run([PROFD, "--record", "--", "sh", "-c", "exit 7"], capture_output=True,
                   text=True, timeout=120, cwd=out)
check(r.returncode == 7, f"profd --record returns the command's status 7 ({r.returncode})")
r = subprocess.run([PROFD, "--record", burn], capture_output=True, text=True, timeout=30)
check(r.returncode == 2 and "'--'" in r.stderr, f"--record without '--': usage ({r.stderr!r})")
check(not [x for x in os.listdir("/tmp") if x.startswith("profd-record-") and
           os.path.exists(os.path.join("/tmp", x, "profd.sock"))],
      "no private socket left behind")
log("PASS")
