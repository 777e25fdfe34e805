# SPDX-License-Identifier: BSD-2-Clause
# Dumps say how many samples the daemon lost in their window. The daemon is stopped (SIGSTOP)
# for a second while two CPU burners run, so its ring buffer overflows for real; every dump
# whose window covers that second carries the count (JSON field, SVG subtitle, pprof comment,
# speedscope name, trace metadata, a note on stderr for every format), one after it does not,
# and a non-root client is not told the machine's losses.
import gzip
import json
import os
import signal
import subprocess
import tempfile
import time

from profd_e2e import Daemon, check, fixture, log, require_root

require_root()
tmp = tempfile.mkdtemp(prefix="profd-losses-")
burners = [subprocess.Popen([fixture("burn"), "30"]) for _ in range(2)]
# One of nobody's, for the non-root dump at the end.
burners.append(subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                 fixture("burn"), "30"], cwd="/"))
try:
    with Daemon("--frequency", "999", "--ringbuf-size", "64K") as d:
        time.sleep(1.5)
        os.kill(d.proc.pid, signal.SIGSTOP)
        time.sleep(1)
        os.kill(d.proc.pid, signal.SIGCONT)
        time.sleep(2.5)
        st = json.loads(d.ctl("status", "--json").stdout)
        lost = st.get("samples_lost_ringbuf", 0)
        log(f"lost while stopped: {lost} of {st.get('samples_received')}")
        check(lost > 100, f"the stopped daemon's ring overflowed: {lost}")

        r = d.ctl("dump", "flamegraph", "--format", "json")
        doc = json.loads(r.stdout)
        check(doc.get("samples_lost") == lost,
              f"the JSON dump of everything counts every loss: {doc.get('samples_lost')}")
        note = f"the daemon lost {lost} samples in this window"
        check(note in r.stderr, f"and says so on stderr: {r.stderr!r}")
        r = d.ctl("dump", "flamegraph", "--format", "folded")
        check(r.returncode == 0 and note in r.stderr, f"folded says so on stderr: {r.stderr!r}")
        svg = os.path.join(tmp, "a.svg")
        d.ctl("dump", "flamegraph", "--format", "svg", "-o", svg)
        check(f", {lost} samples lost" in open(svg).read(), "the SVG's subtitle has it")
        pprof = os.path.join(tmp, "a.pb.gz")
        d.ctl("dump", "flamegraph", "--format", "pprof", "-o", pprof)
        check(f"samples lost: {lost}".encode() in gzip.decompress(open(pprof, "rb").read()),
              "the pprof file has it as a comment")
        ss = json.loads(d.ctl("dump", "flamegraph", "--format", "speedscope").stdout)
        check(f"({lost} samples lost)" in ss.get("name", ""),
              f"the speedscope file's name has it: {ss.get('name')!r}")
        tr = json.loads(d.ctl("dump", "trace").stdout)
        check(tr.get("otherData", {}).get("samples_lost") == lost,
              f"the trace's metadata has it: {tr.get('otherData')}")

        # A window after the stop lost nothing and says nothing.
        r = d.ctl("dump", "flamegraph", "--format", "json", "--since", "1s")
        doc = json.loads(r.stdout)
        check(doc.get("samples_lost") == 0 and "lost" not in r.stderr,
              f"a window after the stop: {doc.get('samples_lost')} {r.stderr!r}")
        # Another user is not told the machine's losses.
        os.chmod(os.path.dirname(d.sock), 0o755)
        os.chmod(d.sock, 0o666)
        r = d.ctl("dump", "flamegraph", "--format", "json", user=(65534, 65534))
        doc = json.loads(r.stdout) if r.returncode == 0 else {}
        check(r.returncode == 0 and doc.get("stacks") and "samples_lost" not in doc
              and "lost" not in r.stderr,
              f"a non-root dump has no loss count: {r.returncode} {r.stderr!r}")
finally:
    for p in burners:
        p.kill()
        p.wait()
log("all ok")
