#!/usr/bin/env python3
# profd --pid on the 75/25 CPU burner with export to Pyroscope on (the stand-in receiver of
# tests/receiver, every second): the receiver's pprofs show the split within 5 points under the
# series labels service_name (the fixture's OTEL_SERVICE_NAME), host, cluster and
# __name__=process_cpu, and the samples it accepted equal profctl's dump of that pid over the
# whole run: nothing lost, nothing counted twice.
import json
import os
import re
import socket
import subprocess
import tempfile
import time
from profd_e2e import *
from export_e2e import Checks, note, rc, receiver_log

FREQ = 499
SECONDS = 9
SERVICE = "burn-export-e2e"
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)

require_root()
check = Checks()
try:
    rc.venv_python()
except rc.Unavailable as e:
    skip(str(e))

tmp = tempfile.mkdtemp(prefix="profd-export-")
spool = os.path.join(tmp, "spool")
recv = rc.Receiver(logpath=os.path.join(tmp, "receiver.log"))
try:
    recv.start()
except RuntimeError as e:
    fail(str(e))


def cpu_series(stats):
    return rc.series_of(stats, service_name=SERVICE)


def samples(stats, unique=True):
    return rc.total_of(cpu_series(stats), "samples/count", unique=unique)


def exporter(status_json):
    ex = [e for e in status_json.get("export", []) if e.get("name") == "pyroscope"]
    return ex[0] if ex else None


try:
    t_start = time.time_ns()
    burn = subprocess.Popen([fixture("burn"), str(SECONDS)],
                            env=dict(os.environ, OTEL_SERVICE_NAME=SERVICE))
    try:
        with Daemon("--pid", str(burn.pid), "--frequency", str(FREQ),
                    "--pyroscope", recv.url, "--export-interval", "1s",
                    "--export-spool", spool, "--export-labels", "cluster=test") as d:
            # While it runs, series arrive every interval, not only at the end.
            time.sleep(4)
            early = samples(recv.stats(), unique=False)
            burn.wait(30)
            t_end = time.time_ns()
            time.sleep(0.5)
            dump = d.folded("--pid", str(burn.pid))
            n = total(dump)
            # Everything is in the store now; the exporter sends it within an interval or two.
            deadline = time.time() + 20
            while time.time() < deadline and samples(recv.stats(), unique=False) < n:
                time.sleep(0.25)
            # Then three more intervals: nothing else may arrive.
            time.sleep(3.5)
            stats = recv.stats()
            prof = recv.profiles(SERVICE, name="process_cpu")
            st = d.ctl("status", "--json")
            st_text = d.ctl("status")
            note(st_text.stdout)
            dump_after = total(d.folded("--pid", str(burn.pid)))
    finally:
        if burn.poll() is None:
            burn.kill()
finally:
    recv.stop()

try:
    series = cpu_series(stats)
    note(json.dumps({"series": series, "requests": stats["pyroscope"]["requests"]},
                    indent=1)[:3000])
    check(early > 0, f"samples reach the receiver while the fixture runs ({early} after 4 s)")
    check(n > 1500, f"enough samples at {FREQ} Hz over ~{SECONDS - 1} s in the dump (got {n})")
    check(dump_after == n, f"exporting leaves the store's dump as it was ({dump_after} == {n})")

    # Labels: one series per label set and kind; pid and tid only when asked for.
    check(len(series) >= 1, f"the receiver has series for service_name={SERVICE}")
    want = {"__name__": "process_cpu", "service_name": SERVICE, "cluster": "test",
            "host": socket.gethostname()}
    for s in series:
        lab = s["labels"]
        check(all(lab.get(k) == v for k, v in want.items()),
              f"series labels {lab} carry {want}")
        check("pid" not in lab and "tid" not in lab, "no pid or tid label unless asked for")
    check(all(k in ("samples/count", "cpu/nanoseconds") for s in series for k in s["values"]),
          "process_cpu has the sample types samples/count and cpu/nanoseconds")

    # Totals: what profd collected for the pid is what the backend accepted, exactly once.
    got = samples(stats)
    got_all = samples(stats, unique=False)
    check(got == n, f"the receiver's samples equal profctl's dump of the pid ({got} == {n})")
    check(got_all == got and stats["pyroscope"]["duplicates"] == 0,
          f"no sample sent twice without a fault ({got_all} sent, {got} distinct IDs, "
          f"{stats['pyroscope']['duplicates']} duplicates)")
    check(stats["pyroscope"]["requests"]["rejected"] == {},
          f"the receiver refused nothing ({stats['pyroscope']['requests']['rejected']})")
    check(all(UUID.match(i) for i in stats["pyroscope"]["ids"]), "every RawSample ID is a UUID")
    cpu_ns = rc.total_of(series, "cpu/nanoseconds")
    period = 1e9 / FREQ
    check(abs(cpu_ns - got * period) <= 0.01 * got * period,
          f"cpu/nanoseconds is samples times the period ({cpu_ns} vs {got} x {period:.0f})")
    first = min(s["time_first_ns"] for s in series)
    last = max(s["time_last_end_ns"] for s in series)
    # (the end bound is loose: an exporter may also send windows after the fixture is gone)
    check(t_start - 2e9 <= first and last <= t_end + 30e9,
          f"profile windows lie within the run ({(first - t_start) / 1e9:+.1f} s from its start, "
          f"{(last - t_end) / 1e9:+.1f} s from its end)")
    check(stats["pyroscope"]["requests"]["accepted"] >= SECONDS // 2,
          f"one request per interval or so ({stats['pyroscope']['requests']['accepted']})")

    # The split, in the backend's own profile.
    f = prof.get("samples/count", {})
    a = total(f, lambda fr: "work_a" in fr)
    b = total(f, lambda fr: "work_b" in fr)
    check(a + b >= 0.9 * got, f"90% of the received samples inside work_a/work_b ({a + b}/{got})")
    split = a / max(1, a + b)
    check(abs(split - 0.75) <= 0.05, f"work_a share in the receiver {split:.3f} is 0.75 +- 0.05")
    chain_a = total(f, lambda fr: has_chain(fr, ["main", "run", "work_a", "spin_a"]))
    check(chain_a >= 0.8 * a, f"main;run;work_a;spin_a carries most work_a samples ({chain_a}/{a})")
    check(a == total(dump, lambda fr: "work_a" in fr) and
          b == total(dump, lambda fr: "work_b" in fr),
          "the receiver's work_a and work_b totals equal the dump's")

    # profctl status: the exporter's counters agree with the receiver.
    check(st.returncode == 0, f"profctl status --json ({st.stderr.strip()})")
    ex = exporter(json.loads(st.stdout))
    if ex is None:
        fail(f"status --json lists no pyroscope exporter: {st.stdout.strip()[:500]}")
    check(ex["url"].startswith(recv.url), f"its url is the receiver's ({ex['url']})")
    check(ex["requests_sent"] == stats["pyroscope"]["requests"]["accepted"],
          f"requests_sent {ex['requests_sent']} == accepted "
          f"{stats['pyroscope']['requests']['accepted']}")
    check(ex.get("samples_sent") == n, f"samples_sent {ex.get('samples_sent')} == {n}")
    check(ex.get("samples_exported") == n,
          f"samples_exported {ex.get('samples_exported')} == {n}")
    for k in ("requests_dropped", "requests_expired", "requests_quarantined", "spool_requests"):
        check(ex.get(k, 0) == 0, f"{k} is 0 ({ex.get(k, 0)})")
    check(any(line.startswith("export pyroscope ") for line in st_text.stdout.splitlines()),
          "profctl status prints an `export pyroscope URL:` line")
    pdir = os.path.join(spool, "pyroscope")
    check(os.path.isdir(pdir), f"the spool folder {pdir} exists")
    left = [x for x in os.listdir(pdir) if x != "quarantine"]
    check(left == [], f"the spool is empty once everything is sent ({left})")
except SystemExit:
    log(receiver_log(recv))
    raise
check.done(lambda: log(receiver_log(recv)))
