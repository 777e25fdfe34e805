#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
# The export spool as a trust boundary, against a user made here (alice) and the stand-in
# receiver on 127.0.0.1:
# - a spool folder alice owns, one with a symbolic link on its path, one any user can write:
#   profd refuses to start (exit 2, one line), from the command line and from the file; on
#   SIGHUP such a folder is refused and the running configuration kept;
# - after a reload the new exporter sends what the old one left, and samples_sent never passes
#   samples_exported (the probe saw 165 exported, 194 sent);
# - a spool damaged while profd was stopped (emptied, cut short, random bytes, an older
#   profd's file without a header, alice's files, a 3 GiB sparse file, a link): nothing of it
#   is sent, each is quarantined and counted, the good requests all arrive and none is pushed
#   out by the sparse file under a 1M cap;
# - quarantine/ counts against that cap, oldest dropped first, and status says so;
# - a reply body of 10 GB is read to 64 KiB: the request is quarantined at once.
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time

from profd_e2e import PROFD, Daemon, log, require_root
from export_e2e import (Burner, Checks, exporter, push_request, receiver_log, request_files,
                        settle, spool_body, start_receiver, wait_for)

require_root()
check = Checks()
USER = "profd-e2e-alice"
SERVICE = "spool-e2e"

subprocess.run(["userdel", USER], capture_output=True)
subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
               check=True)
alice = pwd.getpwnam(USER)
tmp = tempfile.mkdtemp(prefix="profd-spool-")
os.chmod(tmp, 0o755)
recv = start_receiver(tmp)
burners = []


def one_line(text):
    return len([line for line in text.splitlines() if line.strip()]) == 1


def start_refused(args, want, what):
    try:
        r = subprocess.run([PROFD, "--socket", os.path.join(tmp, "bad.sock"), "--pyroscope",
                            recv.url, *args], capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired as e:
        # it started instead (run() killed it)
        r = subprocess.CompletedProcess(e.cmd, None, "", (e.stderr or b"").decode()[-300:])
    check(r.returncode == 2 and want in r.stderr and "refusing it" in r.stderr and
          one_line(r.stderr), f"{what}: exit 2 and one line naming it ({r.returncode}, "
          f"{r.stderr.strip()!r})")
    return r


def as_alice(path, mode=None):
    os.chown(path, alice.pw_uid, alice.pw_gid, follow_symlinks=False)
    if mode is not None:
        os.chmod(path, mode)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def samples_of(body):
    """CPU samples of a Pyroscope push body."""
    return sum(t.get("samples/count", 0) for labels, smp in push_request(body)
               if labels.get("__name__") == "process_cpu" for _, t in smp)


def req_name(created_ns, seq):
    return f"{created_ns:020d}-{seq:020d}.req"


try:
    # --- refused at start ------------------------------------------------------------------
    theirs = os.path.join(tmp, "theirs")
    os.mkdir(theirs, 0o755)
    as_alice(theirs)
    start_refused(["--export-spool", theirs + "/spool"], "belongs to uid", "a folder of alice's")
    check(not os.path.exists(theirs + "/spool"), "nothing is made in alice's folder")
    start_refused(["--export-spool", theirs], "belongs to uid", "alice's folder as the spool")
    real = os.path.join(tmp, "real")
    os.mkdir(real, 0o700)
    link = os.path.join(tmp, "link")
    os.symlink(real, link)
    as_alice(link)
    start_refused(["--export-spool", link + "/spool"], f"{link} is a symbolic link",
                  "a link on the path")
    check(not os.path.exists(real + "/spool"), "nothing is made through the link")
    start_refused(["--export-spool", link], f"{link} is a symbolic link", "a link as the spool")
    shared = os.path.join(tmp, "shared")
    os.mkdir(shared)
    os.chmod(shared, 0o777)
    start_refused(["--export-spool", shared + "/spool"], "is writable by others",
                  "a folder anyone can write on the path")
    os.chmod(shared, 0o1777)
    start_refused(["--export-spool", shared], "is writable by others",
                  "a sticky folder anyone can write as the spool")
    group = os.path.join(tmp, "group")
    os.mkdir(group)
    os.chmod(group, 0o770)
    start_refused(["--export-spool", group], "is writable by others", "a group-writable folder")
    conf = os.path.join(tmp, "bad.conf")
    write(conf, f"[export]\npyroscope = {recv.url}\nspool = {theirs}/spool\n".encode())
    r = start_refused(["--config", conf], "belongs to uid", "the spool from the file")
    check(r.stderr.startswith(f"profd: {conf}:3: spool "), f"the line names file and line: "
          f"{r.stderr.strip()!r}")

    # --- a reload: refused folder kept out, the spool carried over, samples add up ----------
    spool = os.path.join(tmp, "spool")
    pdir = os.path.join(spool, "pyroscope")
    qdir = os.path.join(pdir, "quarantine")
    conf = os.path.join(tmp, "profd.conf")
    good_conf = f"[export]\npyroscope = {recv.url}\ninterval = 1s\nspool = {spool}\n".encode()
    write(conf, good_conf)
    b1 = Burner(SERVICE, 8)
    burners.append(b1)
    recv.fault(status=503, count=-1)
    with Daemon("--config", conf, "--pid", str(b1.pid)) as d:
        b1.go()
        check(wait_for(lambda: exporter(d)["spool_requests"] >= 3, 30),
              f"requests wait in the spool while the backend answers 503: {exporter(d)}")
        write(conf, good_conf.replace(spool.encode(), f"{theirs}/spool".encode()))
        d.proc.send_signal(signal.SIGHUP)
        check(wait_for(lambda: "keeping the running one" in d.log_text(), 10),
              "a reload to alice's folder keeps the running configuration")
        check("belongs to uid" in d.log_text(), "and the log says why")
        check(not os.path.exists(theirs + "/spool"), "nothing is made in alice's folder")
        # A changed [export] (an unchanged one keeps its exporter): the exporter restarts
        # on the spool it had.
        write(conf, good_conf.replace(b"interval = 1s", b"interval = 2s"))
        d.proc.send_signal(signal.SIGHUP)
        check(wait_for(lambda: "configuration applied" in d.log_text(), 10),
              "a good reload applies")
        recv.clear_faults()
        b1.wait()
        worst = None
        deadline = time.time() + 60
        while time.time() < deadline:
            x = exporter(d)
            if x["samples_sent"] > x["samples_exported"] and worst is None:
                worst = x
            if x["spool_requests"] == 0 and x["samples_sent"] and \
                    x["samples_sent"] == x["samples_exported"]:
                break
            time.sleep(0.3)
        x = settle(d)
        check(worst is None, f"samples_sent never passes samples_exported: {worst}")
        check(x["samples_sent"] == x["samples_exported"] > 0,
              f"after the reload every sample exported is sent: {x['samples_exported']} "
              f"exported, {x['samples_sent']} sent")

    # --- damage while stopped ---------------------------------------------------------------
    b2 = Burner(SERVICE, 8)
    burners.append(b2)
    recv.fault(status=503, count=-1)
    with Daemon("--config", conf, "--pid", str(b2.pid)) as d:
        b2.go()
        b2.wait()
        check(wait_for(lambda: len(request_files(pdir)) >= 4, 20),
              f"requests wait in the spool ({len(request_files(pdir))})")
    recv.clear_faults()
    files = request_files(pdir)
    bodies = {}
    for name in files:
        with open(os.path.join(pdir, name), "rb") as f:
            bodies[name] = f.read()
    good = files[2:]
    want = sum(samples_of(spool_body(bodies[n])) for n in good)
    t0 = int(files[0].split("-")[0])
    write(os.path.join(pdir, files[0]), b"")                       # emptied
    os.truncate(os.path.join(pdir, files[1]), 300)                 # cut short
    planted = {
        req_name(t0 - 900, 1): os.urandom(3000),                   # random bytes
        req_name(t0 - 899, 2): spool_body(bodies[good[0]]),        # an older profd's file
        req_name(t0 - 898, 3): bodies[good[0]],                    # a good copy, alice's
        req_name(t0 - 897, 4): b"INJECTED-BY-ALICE " * 40,         # alice's text
        req_name(t0 - 896, 5): bodies[good[0]],                    # 3 GiB, sparse
    }
    for name, data in planted.items():
        write(os.path.join(pdir, name), data)
    as_alice(os.path.join(pdir, req_name(t0 - 898, 3)))
    as_alice(os.path.join(pdir, req_name(t0 - 897, 4)))
    os.truncate(os.path.join(pdir, req_name(t0 - 896, 5)), 3 << 30)
    os.symlink("/etc/passwd", os.path.join(pdir, req_name(t0 - 895, 6)))
    n_bad = 2 + len(planted) + 1
    # quarantine/ of a previous run: three old requests of 450 KiB, over the 1M cap together
    os.makedirs(qdir, exist_ok=True)
    big = [req_name(t0 - 2000 + i, 7 + i) for i in range(3)]
    for name in big:
        write(os.path.join(qdir, name), b"q" * (450 << 10))
        write(os.path.join(qdir, name + ".reply"), b"HTTP 400\n\nold")
    before = recv.stats()["pyroscope"]["requests"]

    b3 = Burner(SERVICE, 4)
    burners.append(b3)
    with Daemon("--config", conf, "--pid", str(b3.pid), "--export-spool-max-size", "1M") as d:
        x = settle(d)
        after = recv.stats()["pyroscope"]["requests"]
        check(after.get("rejected", {}) == before.get("rejected", {}),
              f"nothing the receiver refused was sent: {after}")
        check(after["accepted"] - before["accepted"] == len(good),
              f"the {len(good)} good requests arrive ({after['accepted'] - before['accepted']})")
        check(x["requests_invalid"] == n_bad,
              f"the {n_bad} damaged files are counted invalid ({x['requests_invalid']})")
        check(x["requests_dropped"] == 0, f"none of the good ones pushed out: {x}")
        check(x["samples_sent"] == want, f"their {want} samples sent ({x['samples_sent']})")
        check(x["samples_sent"] <= x["samples_exported"], f"sent <= exported: {x}")
        notes = [n for n in os.listdir(qdir) if n.endswith(".invalid")]
        check(len(notes) == n_bad, f"each quarantined with a note saying why: {notes}")
        with open(os.path.join(qdir, req_name(t0 - 899, 2) + ".invalid")) as f:
            check("no spool header" in f.read(), "the older profd's file is named as such")
        with open(os.path.join(qdir, req_name(t0 - 897, 4) + ".invalid")) as f:
            check(f"owned by uid {alice.pw_uid}" in f.read(), "alice's file is named as hers")
        with open(os.path.join(qdir, req_name(t0 - 896, 5) + ".invalid")) as f:
            check("its header says" in f.read(), "the sparse file is refused by its size")
        check(x["quarantine_dropped"] == 1 and not os.path.exists(os.path.join(qdir, big[0])),
              f"quarantine/ over the cap: its oldest dropped ({x['quarantine_dropped']})")
        check(x["quarantine_bytes"] + x["spool_bytes"] <= 1 << 20,
              f"quarantine/ and the spool within 1M: {x['quarantine_bytes']} + "
              f"{x['spool_bytes']}")
        check(x["quarantine_requests"] == n_bad + 2, f"status counts quarantine/: {x}")
        st = d.ctl("status").stdout
        check(f"quarantine {n_bad + 2} requests in" in st and "1 dropped" in st and
              f"{n_bad} spool files did not verify" in st, f"profctl status says so: {st}")

        # --- a reply of 10 GB ---------------------------------------------------------------
        q0 = x["requests_quarantined"]
        recv.fault(status=400, body_bytes=10 ** 10, count=1)
        t = time.time()
        b3.go()
        check(wait_for(lambda: exporter(d)["requests_quarantined"] == q0 + 1, 20),
              f"a 400 with a 10 GB body: quarantined ({exporter(d)})")
        took = time.time() - t
        check(wait_for(lambda: recv.stats().get("huge_replies") == 1, 10), "the reply ended")
        sent = recv.stats()["huge_reply_bytes"]
        log(f"10 GB reply: profd took {sent} bytes, quarantined after {took:.1f} s")
        check(sent < 64 << 20, f"profd read a little of it, not until the timeout ({sent})")
        notes = [n for n in os.listdir(qdir) if n.endswith(".reply") and n[:-6] not in big]
        if check(len(notes) == 1, f"its reply beside it: {notes}"):
            size = os.path.getsize(os.path.join(qdir, notes[0]))
            check(size == len("HTTP 400\n\n") + (64 << 10), f"64 KiB of the reply kept ({size})")
        b3.wait()
finally:
    for b in burners:
        b.kill()
    if check.failed:
        print(receiver_log(recv))
    recv.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.run(["userdel", USER], capture_output=True)
check.done()
