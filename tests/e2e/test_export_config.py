#!/usr/bin/env python3
# profd's configuration file at start-up and on SIGHUP, with export to the stand-in receiver:
# - each bad file (unknown key, bad URL, unreadable token file, a FIFO) stops the start with exit 2
#   and one line naming the file and the line;
# - a running profd reloads on SIGHUP: a bad file keeps the running configuration (one logged line
#   naming file and line; data still reaches the first receiver), a good one moves the export to
#   a second receiver with a new static label;
# - the default configuration the package installs is accepted.
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from profd_e2e import *

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "receiver"))
import receiver_client as rc  # noqa: E402

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

require_root()
try:
    rc.venv_python()
except rc.Unavailable as e:
    skip(str(e))
tmp = tempfile.mkdtemp(prefix="profd-config-")


def write(name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def start_bad(conf, want):
    """profd with a bad file: exit 2, exactly one line, naming FILE:LINE and the problem."""
    r = subprocess.run([PROFD, "--config", conf, "--socket", os.path.join(tmp, "bad.sock")],
                       capture_output=True, text=True, timeout=30)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    check(r.returncode == 2, f"{want}: exit {r.returncode} (want 2): {r.stderr.strip()}")
    check(len(lines) == 1, f"{want}: one line, got {lines}")
    check(lines and lines[0].startswith(f"profd: {conf}:") and want in lines[0],
          f"{want}: the line names the file, the line and the problem: {lines}")


# --- start-up ----------------------------------------------------------------------------------
start_bad(write("unknown.conf", "frequency = 49\n[export]\npyroscope = http://127.0.0.1:9\n"
                "retries = 3\n"), ":4: unknown key 'retries' in [export]")
start_bad(write("url.conf", "[export]\n\notlp = collector:4318\n"),
          ":3: otlp 'collector:4318': ")
start_bad(write("token.conf", "[export]\npyroscope = https://p.example:4040\n"
                f"bearer_token_file = {tmp}/missing-token\n"),
          f":3: bearer_token_file '{tmp}/missing-token': cannot read it")
start_bad(write("tokendir.conf", "[export]\npyroscope = https://p.example:4040\n"
                f"bearer_token_file = {tmp}\n"), ":3: bearer_token_file")
start_bad(write("section.conf", "[exporter]\n"), ":1: unknown section [exporter]")
# A FIFO is refused at once: opening it to read would wait for a writer forever.
fifo = os.path.join(tmp, "fifo.conf")
os.mkfifo(fifo)
start_bad(fifo, f"{fifo}: not a regular file")

# The package's default file parses (everything in it commented out but the rate and the cap).
r = subprocess.run([PROFD, "--config", os.path.join(SRC, "packaging", "profd.conf"), "--help"],
                   capture_output=True, text=True, timeout=30)
check(r.returncode == 0, f"packaging/profd.conf is accepted: {r.returncode} {r.stderr.strip()}")

# --- reload -----------------------------------------------------------------------------------
burner = start_fixture("burn", "60")
a = rc.Receiver(logpath=os.path.join(tmp, "a.log"))
b = rc.Receiver(logpath=os.path.join(tmp, "b.log"))
try:
    a.start()
    b.start()
    conf = os.path.join(tmp, "profd.conf")
    good_a = ("frequency = 99\n[export]\n"
              f"pyroscope = {a.url}\ninterval = 1s\nspool = {tmp}/spool\nlabels = stage=one\n")
    write("profd.conf", good_a)
    with Daemon("--config", conf, "--pid", str(burner.pid)) as d:
        def arrived(recv, stage):
            return rc.total_of(rc.series_of(recv.stats(), stage=stage), "samples/count")

        deadline = time.time() + 20
        while time.time() < deadline and arrived(a, "one") == 0:
            time.sleep(0.5)
        check(arrived(a, "one") > 0, "the first receiver gets data labelled stage=one")

        # A bad file: the running configuration stays, one line says where.
        write("profd.conf", good_a + "color = blue\n")
        d.proc.send_signal(signal.SIGHUP)
        time.sleep(2)
        text = d.log_text()
        check(f"{conf}:7: unknown key 'color' in [export]" in text,
              f"the bad reload is logged with file and line: {text[-600:]}")
        check("keeping the running one" in text, "the bad reload keeps the configuration")
        before = arrived(a, "one")
        time.sleep(3)
        check(arrived(a, "one") > before, "after a bad reload data still reaches the first "
              f"receiver ({before} -> {arrived(a, 'one')})")
        check(d.proc.poll() is None, "profd survives a bad reload")

        # A good file: export moves to the second receiver with the new label.
        write("profd.conf", good_a.replace(a.url, b.url).replace("stage=one", "stage=two"))
        d.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 20
        while time.time() < deadline and arrived(b, "two") == 0:
            time.sleep(0.5)
        check(arrived(b, "two") > 0, "after a good reload the second receiver gets stage=two")
        check("configuration applied" in d.log_text(), "the good reload is logged")
        settled = arrived(a, "one")
        time.sleep(3)
        check(arrived(a, "one") == settled, "the first receiver gets nothing after the reload")
        st = d.ctl("status")
        check(f"export pyroscope {b.url}" in st.stdout, f"status names the new URL: {st.stdout}")

        # Nothing lost across the reload: requests the first exporter left in the spool go to
        # the second receiver (labelled as they were made), and the two receivers together
        # hold exactly the samples of the burner's dump.
        burner.kill()
        burner.wait()
        deadline = time.time() + 30
        while time.time() < deadline:
            time.sleep(1)
            x = json.loads(d.ctl("status", "--json").stdout)["export"][0]
            if not x.get("spool_requests") and x.get("samples_exported") == x.get("samples_sent"):
                break
        time.sleep(2.5)  # one more interval: a last sample may still have been in the ring
        dumped = total(d.folded("--pid", str(burner.pid)))
        got = (rc.total_of(rc.series_of(a.stats()), "samples/count", unique=True) +
               rc.total_of(rc.series_of(b.stats()), "samples/count", unique=True))
        check(got == dumped, f"both receivers hold the dump's samples: {got} vs {dumped}")
finally:
    burner.kill()
    burner.wait()
    a.stop()
    b.stop()
log("PASS")
