# SPDX-License-Identifier: BSD-2-Clause
# The socket against a local user who can write near it: a socket directory writable by others or
# owned by another user is refused, a sticky one (like /tmp) is not; the socket's mode and group
# are set on the file bind made; a 0700 directory with --socket-group is warned about; and a
# stopping daemon leaves alone a socket that is no longer its own.
import grp
import os
import shutil
import socket
import subprocess
import tempfile

from profd_e2e import PROFD, Daemon, check, log, require_root

require_root()

USER = "profd-e2e-sock"
GROUP = "profd-e2e-sockgrp"


def run_profd(sock):
    return subprocess.run([PROFD, "--socket", sock], capture_output=True, text=True, timeout=30)


def one_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return len(lines) == 1


subprocess.run(["userdel", USER], capture_output=True)
subprocess.run(["groupdel", GROUP], capture_output=True)
subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
               check=True)
subprocess.run(["groupadd", "--system", GROUP], check=True)
tmp = tempfile.mkdtemp(prefix="profd-sock-")
try:
    os.chmod(tmp, 0o755)

    # A directory any user may write, without the sticky bit: refused before anything starts.
    open_dir = os.path.join(tmp, "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777)
    r = run_profd(os.path.join(open_dir, "profd.sock"))
    check(r.returncode != 0 and "writable by others" in r.stderr and one_line(r.stderr),
          f"a socket directory writable by others is refused in one line: {r.stderr!r}")
    check(not os.listdir(open_dir), "nothing was made in it")

    # A directory of another user: she could replace the socket at will.
    theirs = os.path.join(tmp, "theirs")
    os.mkdir(theirs)
    shutil.chown(theirs, user=USER)
    r = run_profd(os.path.join(theirs, "profd.sock"))
    check(r.returncode != 0 and "belongs to uid" in r.stderr and one_line(r.stderr),
          f"a socket directory owned by another user is refused: {r.stderr!r}")

    # Sticky and writable by all, like /tmp: nobody can remove or rename another's file there.
    sticky = os.path.join(tmp, "sticky")
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    with Daemon(socket_path=os.path.join(sticky, "profd.sock")) as d:
        check(d.ping(), "a sticky directory writable by all is accepted")

    # Mode and group: what bind made, not the umask's leftovers, and the group's gid.
    gid = grp.getgrnam(GROUP).gr_gid
    with Daemon("--socket-group", GROUP) as d:
        st = os.lstat(d.sock)
        check(st.st_mode & 0o7777 == 0o660, f"the socket's mode is 0660 ({st.st_mode & 0o7777:o})")
        check(st.st_gid == gid, f"the socket's group is {GROUP} ({st.st_gid} == {gid})")
        check("does not let the group" not in d.log_text(),
              "no warning for a directory the group can reach")

    # A 0700 directory with --socket-group: the group's members cannot reach the socket.
    closed = os.path.join(tmp, "closed")
    os.mkdir(closed)
    os.chmod(closed, 0o700)
    with Daemon("--socket-group", GROUP, socket_path=os.path.join(closed, "profd.sock")) as d:
        text = d.log_text()
        check("does not let the group's members reach the socket" in text,
              "a 0700 socket directory with --socket-group is warned about")

    # The shutdown race: by the time this daemon stops, another socket is at its path (a newer
    # daemon's). Stopping must leave that one alone.
    with Daemon() as d:
        os.unlink(d.sock)
        newer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        newer.bind(d.sock)
        newer.listen(1)
        ino = os.lstat(d.sock).st_ino
        check(d.stop() == 0, "the daemon stops cleanly")
        check(os.path.exists(d.sock) and os.lstat(d.sock).st_ino == ino,
              "a socket that is not the daemon's own is not unlinked on shutdown")
        check("no longer this daemon's socket" in d.log_text(), "and the daemon says so")
        newer.close()

    # And its own socket still goes.
    with Daemon() as d:
        d.stop()
        check(not os.path.exists(d.sock), "the daemon's own socket is removed on shutdown")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(["userdel", USER], capture_output=True)
    subprocess.run(["groupdel", GROUP], capture_output=True)
log("all ok")
