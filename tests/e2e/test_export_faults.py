#!/usr/bin/env python3
# One profd exporting to the stand-in Pyroscope receiver while the receiver misbehaves, one fault
# at a time, each with its own CPU burner (its own service_name) started once the fault is set:
#   503 with Retry-After 3 s (x3)   the attempts wait 3 s, not the 1-2 s of the backoff
#   429 (x2)                        retried
#   connections reset mid-request   retried
#   413 for bodies above a limit    four services at once: the requests are split until they fit
#   400 for one service             its requests are quarantined with the reply, the rest goes on
#   the spool's disk full           a small tmpfs the test fills: delivered from memory
# For each: the CPU samples the receiver accepted for that service (each RawSample ID once) equal
# profctl's dump of the burner's pid, and the counters of `profctl status` that the fault moves
# moved by the receiver's count of that fault. Over the whole run: samples_exported equals what
# the receiver accepted plus what sits in quarantine, and profd collected no other samples.
import os
import subprocess
import tempfile
import threading
import time

from profd_e2e import Daemon, require_root, fail, log
from export_e2e import (Burner, Checks, count_requests, dump_total, exporter, kill_all, note,
                        received, receiver_log, request_files, settle, start_receiver,
                        state_requests, tail)

FREQ = 199
BURN = 3  # seconds per burner
RETRY_AFTER = 3  # the 503s' Retry-After, above the backoff's first steps (1 s, 2 s)
RETRY_MAX = "4s"

require_root()
check = Checks()
tmp = tempfile.mkdtemp(prefix="profd-export-faults-")
spool = os.path.join(tmp, "spool")
pdir = os.path.join(spool, "pyroscope")
qdir = os.path.join(pdir, "quarantine")
state = os.path.join(tmp, "receiver.jsonl")
filler = os.path.join(spool, "filler")

# The spool on a small file system of its own, so that the test can fill it.
os.makedirs(spool)
r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "profd-e2e-spool", spool],
                   capture_output=True, text=True)
if r.returncode != 0:
    fail(f"cannot mount a tmpfs for the spool: {r.stderr.strip()}")


class FaultClock(threading.Thread):
    """Polls the receiver and notes when each faulted answer and each accepted request
    happened: {kind: [times]} and [times of accepted requests]."""

    def __init__(self, recv):
        super().__init__(daemon=True)
        self.recv = recv
        self.times = {}
        self.accepted = []
        self.halt = threading.Event()

    def run(self):
        seen, acc = {}, None
        while not self.halt.is_set():
            try:
                req = self.recv.stats()["pyroscope"]["requests"]
            except (RuntimeError, OSError):
                time.sleep(0.05)
                continue
            now = time.time()
            for k, n in req["faulted"].items():
                for _ in range(n - seen.get(k, n if acc is None else 0)):
                    self.times.setdefault(k, []).append(now)
                seen[k] = n
            if acc is not None:
                self.accepted += [now] * (req["accepted"] - acc)
            acc = req["accepted"]
            time.sleep(0.05)

    def stop(self):
        self.halt.set()
        self.join(5)


burners = {name: Burner(f"fault-{name}", BURN) for name in
           ("503", "429", "reset", "413-a", "413-b", "413-c", "413-d", "400-bad", "400-good",
            "diskfull")}
recv = None
dlog = None
t0 = time.time()
try:
    recv = start_receiver(tmp, state=state)
    with Daemon(*[a for b in burners.values() for a in ("--pid", str(b.pid))],
                "--frequency", str(FREQ), "--pyroscope", recv.url, "--export-interval", "1s",
                "--export-retry-max", RETRY_MAX, "--export-spool", spool) as d:
        dlog = d.logpath
        check(exporter(d) is not None, "profctl status --json lists the pyroscope exporter")

        def run_phase(names, fault=None):
            """Set the fault, let the burners run, wait until the exporter is quiet. Returns
            the status before and after, and the receiver's stats before and after."""
            x0, s0 = exporter(d), recv.stats()
            if fault:
                recv.fault(**fault)
            for n in names:
                burners[n].go()
            for n in names:
                burners[n].wait()
            x1 = settle(d)
            return x0, x1, s0, recv.stats()

        def delta(a, b, k):
            return b[k] - a[k]

        def faulted(s, kind):
            return s["pyroscope"]["requests"]["faulted"].get(kind, 0)

        def arrived(name, st):
            """The burner's samples in the receiver equal the dump of its pid, once each."""
            b = burners[name]
            n = dump_total(d, b.pid)
            got = received(st, service_name=b.service)
            got_all = received(st, unique=False, service_name=b.service)
            check(n >= 20, f"{name}: profd collected the burner ({n} samples)")
            check(got == n, f"{name}: the receiver accepted {got} samples of {b.service}, "
                  f"the dump of pid {b.pid} has {n}")
            check(got_all == got, f"{name}: none of them twice ({got_all} with copies)")
            return n

        # ---- 503 with Retry-After ---------------------------------------------------------
        clock = FaultClock(recv)
        clock.start()
        x0, x1, s0, s1 = run_phase(["503"], {"status": 503, "retry_after": RETRY_AFTER,
                                             "count": 3})
        clock.stop()
        arrived("503", s1)
        n503 = faulted(s1, "503") - faulted(s0, "503")
        check(n503 == 3, f"503: the receiver answered 503 three times ({n503})")
        check(delta(x0, x1, "requests_retried") == n503,
              f"503: requests_retried went up by the 503s ({delta(x0, x1, 'requests_retried')})")
        ts = clock.times.get("503", [])
        after = [t for t in clock.accepted if ts and t > ts[-1]]
        gaps = [b - a for a, b in zip(ts, ts[1:] + after[:1])]
        note(f"503: attempts {[round(t - ts[0], 2) for t in ts]} s, then accepted "
             f"{round(after[0] - ts[0], 2) if after else None} s after the first")
        check(len(gaps) == 3 and all(g >= RETRY_AFTER - 0.3 for g in gaps),
              f"503: each attempt waits Retry-After {RETRY_AFTER} s "
              f"(gaps {[round(g, 2) for g in gaps]} s)")
        check(f"retry in {RETRY_AFTER}.0 s" in x1["last_error"] and "503" in x1["last_error"],
              f"503: last_error tells ({x1['last_error']!r})")

        # ---- 429 ---------------------------------------------------------------------------
        x0, x1, s0, s1 = run_phase(["429"], {"status": 429, "count": 2})
        arrived("429", s1)
        n429 = faulted(s1, "429") - faulted(s0, "429")
        check(n429 == 2, f"429: the receiver answered 429 twice ({n429})")
        check(delta(x0, x1, "requests_retried") == n429,
              f"429: requests_retried went up by 2 ({delta(x0, x1, 'requests_retried')})")
        check("429" in x1["last_error"], f"429: last_error tells ({x1['last_error']!r})")

        # ---- connections reset mid-request -------------------------------------------------
        x0, x1, s0, s1 = run_phase(["reset"], {"reset": True, "count": 2})
        arrived("reset", s1)
        nrst = faulted(s1, "reset") - faulted(s0, "reset")
        check(nrst == 2, f"reset: the receiver reset two connections mid-request ({nrst})")
        # libcurl sends a request again by itself, once, when a connection it reused dies
        # before any answer: profd may see one failure for two resets.
        rrst = delta(x0, x1, "requests_retried")
        check(1 <= rrst <= nrst, f"reset: requests_retried went up by 1 to {nrst} ({rrst})")
        check(x1["last_error"] and not x1["last_error"].startswith("HTTP"),
              f"reset: last_error is the network error ({x1['last_error']!r})")

        # ---- 413 ---------------------------------------------------------------------------
        # Requests so far held one series each, of a burner alone on a CPU. A limit half as
        # big again as the biggest of them: four burners sharing the CPUs make smaller series,
        # which fit, and requests of four (or three, or two) series, which do not and are
        # split, down to one series if need be.
        singles = [b for b, n in state_requests(state) if n == 1]
        limit = int(1.5 * max(singles)) if singles else 0
        check(limit > 0, f"413: single-series requests seen ({len(singles)}, "
              f"{min(singles or [0])}-{max(singles or [0])} bytes); limit {limit}")
        nreq0 = len(state_requests(state))
        four = ["413-a", "413-b", "413-c", "413-d"]
        x0, x1, s0, s1 = run_phase(four, {"status": 413, "max_body": limit})
        recv.clear_faults()
        for n in four:
            arrived(n, s1)
        n413 = faulted(s1, "413") - faulted(s0, "413")
        nsplit = delta(x0, x1, "requests_split")
        sizes = state_requests(state)[nreq0:]
        note(f"413: accepted {len(sizes)} requests (bytes, series): {sizes}")
        check(n413 >= 1, f"413: the receiver refused requests as too large ({n413})")
        check(nsplit == n413, f"413: requests_split {nsplit} == the receiver's 413s {n413}")
        check(delta(x0, x1, "requests_quarantined") == 0,
              f"413: nothing quarantined ({delta(x0, x1, 'requests_quarantined')})")
        check(all(b <= limit for b, _ in sizes),
              f"413: every accepted request fits the limit (largest {max(sizes)[0]} <= {limit})")
        check(any(n > 1 for _, n in sizes) or n413 >= 3,
              f"413: the services were in requests together (series per request "
              f"{sorted(set(n for _, n in sizes))}, {n413} splits)")

        # ---- 400 for one service -----------------------------------------------------------
        bad, good = burners["400-bad"], burners["400-good"]
        x0, xm, s0, sm = run_phase(["400-bad"], {"status": 400, "match_service": bad.service})
        _, x1, _, s1 = run_phase(["400-good"])
        recv.clear_faults()
        nq = delta(x0, x1, "requests_quarantined")
        n400 = faulted(s1, "400") - faulted(s0, "400")
        check(nq >= 1 and nq == n400,
              f"400: requests_quarantined went up by the receiver's 400s ({nq} == {n400})")
        check(delta(x0, x1, "requests_retried") == 0,
              f"400: not retried ({delta(x0, x1, 'requests_retried')})")
        q = count_requests(qdir)
        replies = [n for n in sorted(os.listdir(qdir)) if n.endswith(".reply")] \
            if os.path.isdir(qdir) else []
        check(q["files"] == nq, f"400: {qdir} holds the {nq} refused requests ({q['files']})")
        check(len(replies) == nq and all(open(os.path.join(qdir, n), "rb").read().startswith(
            b"HTTP 400") for n in replies),
            f"400: each with its reply saved beside it ({len(replies)} .reply files, "
            f"starting 'HTTP 400')")
        nbad = dump_total(d, bad.pid)
        check(q["by_service"].get(bad.service, 0) == nbad and nbad > 0,
              f"400: the quarantined requests hold the {bad.service} samples "
              f"({q['by_service']}, dump {nbad})")
        check(received(s1, service_name=bad.service) == 0,
              f"400: the receiver accepted none of {bad.service}")
        arrived("400-good", s1)
        check("400" in xm["last_error"] and "quarantine" in xm["last_error"],
              f"400: last_error tells ({xm['last_error']!r})")

        # ---- the spool's disk full ---------------------------------------------------------
        # Fill the file system, then have the receiver refuse twice so that what profd
        # could not write waits in memory and is delivered from there.
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            while os.write(fd, b"\0" * 65536) > 0:
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        st = os.statvfs(spool)
        note(f"diskfull: {st.f_bavail * st.f_frsize} bytes left on the spool's tmpfs")
        x0, x1, s0, s1 = run_phase(["diskfull"], {"status": 503, "count": 2})
        os.unlink(filler)
        arrived("diskfull", s1)
        errs = delta(x0, x1, "spool_errors")
        built = delta(x0, x1, "requests_built")
        check(built >= 1 and errs >= built,
              f"diskfull: spool_errors went up for every request built ({errs}, {built} built)")
        check(delta(x0, x1, "requests_retried") == 2,
              f"diskfull: the two 503s were retried from memory "
              f"({delta(x0, x1, 'requests_retried')})")
        check(x1["spool_requests"] == 0 and request_files(pdir) == [],
              f"diskfull: nothing left behind ({x1['spool_requests']} waiting, "
              f"{request_files(pdir)} in the spool)")

        # ---- the whole run -----------------------------------------------------------------
        x = exporter(d)
        st = recv.stats()
        text = d.ctl("status").stdout
        collected = sum(dump_total(d, b.pid) for b in burners.values())
        r = d.ctl("dump", "flamegraph", "--format", "folded")
        all_pids = sum(int(l.rpartition(" ")[2]) for l in r.stdout.splitlines() if l.strip())
        got = received(st)
        got_all = received(st, unique=False)
        q = count_requests(qdir)
        note(f"status: {x}")
        check(all_pids == collected,
              f"profd collected only the burners ({all_pids} samples, burners {collected})")
        check(x["samples_exported"] == collected,
              f"samples_exported {x['samples_exported']} == collected {collected}")
        check(got + q["samples"] == x["samples_exported"],
              f"accepted {got} + quarantined {q['samples']} == samples_exported "
              f"{x['samples_exported']}")
        check(x["samples_sent"] == got_all == got,
              f"samples_sent {x['samples_sent']} == accepted with copies {got_all} == {got}")
        check(st["pyroscope"]["duplicates"] == 0,
              f"no RawSample arrived twice ({st['pyroscope']['duplicates']})")
        check(x["requests_sent"] == st["pyroscope"]["requests"]["accepted"],
              f"requests_sent {x['requests_sent']} == accepted "
              f"{st['pyroscope']['requests']['accepted']}")
        check(x["requests_dropped"] == 0 and x["requests_expired"] == 0,
              f"nothing dropped or expired ({x['requests_dropped']}, {x['requests_expired']})")
        check(x["requests_retried"] == n503 + n429 + rrst + 2,
              f"requests_retried {x['requests_retried']} == 503s {n503} + 429s {n429} + "
              f"failures after resets {rrst} + 503s with the disk full 2")
        line = next((l for l in text.splitlines() if l.startswith("export pyroscope ")), "")
        note(line)
        want = [f"{x['requests_retried']} retried", f"{x['requests_quarantined']} quarantined",
                "0 dropped", f"{x['samples_exported']} exported",
                f"{x['spool_errors']} spool write errors"]
        check(all(w in line for w in want), f"profctl status says {want}: {line!r}")
        check(st["pyroscope"]["requests"]["rejected"] == {},
              f"the receiver refused nothing itself ({st['pyroscope']['requests']['rejected']})")
except BaseException:
    if recv:
        log(receiver_log(recv))
    raise
finally:
    kill_all(burners.values())
    if recv:
        recv.stop()
    subprocess.run(["umount", spool], capture_output=True)
note(f"run time {time.time() - t0:.0f} s")
check.done(lambda: log(tail("profd", dlog) + receiver_log(recv)))
