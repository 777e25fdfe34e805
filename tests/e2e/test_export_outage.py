#!/usr/bin/env python3
# The backend away, and profd killed while it waits:
# 1. The stand-in Pyroscope receiver is killed for two minutes (a real 120 s) while profd
#    exports a CPU burner that runs into the outage and a second one that runs out of it. profd
#    spools, retries all along with its backoff capped (--export-retry-max 5s) and says so in
#    `profctl status`; once the receiver is back every sample arrives: the receiver's count (each
#    RawSample ID once) equals profctl's dump of each burner and samples_exported.
# 2. With the receiver down again, a burner's requests pile up in the spool; profd is killed
#    with SIGKILL, the spool's files are counted, a new profd starts on the same spool and the
#    receiver comes back: every spooled RawSample arrives, with the spool's sample count, and
#    the new profd's own data after it.
import os
import re
import signal
import tempfile
import time

from profd_e2e import Daemon, require_root, log
from export_e2e import (Burner, Checks, count_requests, dump_total, exporter, kill_all, note,
                        received, receiver_log, request_files, settle, start_receiver, tail,
                        wait_for)

FREQ = 99
OUTAGE = 120
RETRY_MAX = 5

require_root()
check = Checks()
tmp = tempfile.mkdtemp(prefix="profd-export-outage-")
spool = os.path.join(tmp, "spool")
pdir = os.path.join(spool, "pyroscope")
state = os.path.join(tmp, "receiver.jsonl")
t0 = time.time()

# Burner "before" runs from before the outage 20 s into it; "after" starts 10 s before its end
# and runs 10 s past it. "kill" fills the spool of the profd that gets killed, "restart" is
# profiled by the profd that takes the spool over.
b_before = Burner("outage-before", 25)
b_after = Burner("outage-after", 20)
b_kill = Burner("outage-kill", 4)
b_restart = Burner("outage-restart", 3)
burners = [b_before, b_after, b_kill, b_restart]
recv = None
logs = []


def daemon(*pids):
    args = [a for p in pids for a in ("--pid", str(p))]
    return Daemon(*args, "--frequency", str(FREQ), "--pyroscope", recv.url,
                  "--export-interval", "1s", "--export-retry-max", f"{RETRY_MAX}s",
                  "--export-spool", spool)


def wait_stable(d, timeout=30):
    """Wait until the exporter builds nothing new and its spool stays as it is (the receiver
    being down); returns the status."""
    last, deadline = None, time.time() + timeout
    while True:
        x = exporter(d)
        key = (x["requests_built"], x["samples_exported"], x["spool_requests"])
        if key == last or time.time() >= deadline:
            return x
        last = key
        time.sleep(1.5)


try:
    recv = start_receiver(tmp, state=state)
    d1 = daemon(b_before.pid, b_after.pid, b_kill.pid)
    d1.__enter__()
    logs.append(("profd (first)", d1.logpath))
    try:
        # ---- 1. two minutes without the backend ------------------------------------------
        b_before.go()
        first = wait_for(lambda: received(recv.stats(), service_name=b_before.service), 15)
        check(first > 0, f"outage: samples arrive before the outage ({first})")
        recv.kill()
        t_down = time.time()
        peak = {"spool_requests": 0}
        mid = None
        while time.time() < t_down + OUTAGE:
            if b_after.started is None and time.time() >= t_down + OUTAGE - 10:
                b_after.go()
            if mid is None and time.time() >= t_down + OUTAGE - 5:
                mid = exporter(d1)
                mid_text = d1.ctl("status").stdout
            x = exporter(d1)
            peak["spool_requests"] = max(peak["spool_requests"], x["spool_requests"])
            time.sleep(min(2, max(0.05, t_down + OUTAGE - time.time())))
        recv.start()
        t_up = time.time()
        note(f"outage: {t_up - t_down:.1f} s; status {OUTAGE - 5} s into it: {mid}")
        check(mid["spool_requests"] >= 15 and mid["spool_bytes"] > 0,
              f"outage: the requests wait in the spool ({mid['spool_requests']} requests, "
              f"{mid['spool_bytes']} bytes, {len(request_files(pdir))} files)")
        check(mid["oldest_age_ns"] >= (OUTAGE - 10) * 1e9,
              f"outage: the oldest is as old as the outage ({mid['oldest_age_ns'] / 1e9:.0f} s)")
        check(mid["last_success_age_ns"] >= (OUTAGE - 10) * 1e9,
              f"outage: last success {mid['last_success_age_ns'] / 1e9:.0f} s ago")
        tries = mid["requests_retried"]
        check(OUTAGE / (RETRY_MAX * 1.2) - 5 <= tries <= OUTAGE,
              f"outage: retried all along, at most every {RETRY_MAX} s and at least every "
              f"1 s ({tries} retries in {OUTAGE - 5} s)")
        check(mid["last_error"] != "" and not mid["last_error"].startswith("HTTP"),
              f"outage: last_error says why ({mid['last_error']!r})")
        check(mid["requests_dropped"] == 0 and mid["requests_expired"] == 0,
              "outage: nothing dropped or expired while waiting")
        line = next((x for x in mid_text.splitlines() if x.startswith("export pyroscope ")), "")
        note(f"outage: {line}")
        check(re.search(r"; requests \d+ sent, [1-9]\d* retried, 0 dropped, 0 expired", line) and
              re.search(r"spool \S+ \S+ in [1-9]\d* requests, oldest 1m", line) and
              "connect" in line,
              f"outage: profctl status says it (retries, the spool, its oldest, the error): "
              f"{line!r}")
        acc0 = recv.stats()["pyroscope"]["requests"]["accepted"]
        back = wait_for(lambda: recv.stats()["pyroscope"]["requests"]["accepted"] > acc0,
                        RETRY_MAX * 1.2 + 5, step=0.1)
        t_back = time.time() - t_up
        check(back, f"outage: delivering again {t_back:.1f} s after the receiver is back "
              f"(backoff capped at {RETRY_MAX} s)")
        b_after.wait()
        x = settle(d1, timeout=90)
        st = recv.stats()
        note(f"outage: drained {time.time() - t_up:.1f} s after the receiver came back")
        for b in (b_before, b_after):
            n = dump_total(d1, b.pid)
            got = received(st, service_name=b.service)
            check(n > 2 * FREQ and got == n,
                  f"outage: the receiver has {got} samples of {b.service}, the dump {n}")
        got = received(st)
        got_all = received(st, unique=False)
        dups = st["pyroscope"]["duplicates"]
        check(got == x["samples_exported"],
              f"outage: accepted {got} == samples_exported {x['samples_exported']}")
        # At least once: a request the receiver took in just as it was killed may come twice.
        check(dups <= 3 and got_all - got <= x["samples_exported"] // 10,
              f"outage: copies only from a reply lost in the kill ({dups} RawSamples, "
              f"{got_all - got} samples)")
        check(x["samples_sent"] == got_all,
              f"outage: samples_sent {x['samples_sent']} == accepted with copies {got_all}")
        check(x["spool_requests"] == 0 and request_files(pdir) == [],
              f"outage: the spool is empty again ({x['spool_requests']}, "
              f"{len(request_files(pdir))} files)")
        check(x["requests_dropped"] == 0 and x["requests_expired"] == 0,
              f"outage: nothing dropped or expired ({x['requests_dropped']}, "
              f"{x['requests_expired']})")
        t_part1 = time.time() - t0

        # ---- 2. SIGKILL with a full spool, and a new profd on it -------------------------
        recv.kill()
        dups_before = dups
        b_kill.go()
        b_kill.wait()
        xk = wait_stable(d1)
        n_kill = dump_total(d1, b_kill.pid)
        waiting = xk["samples_exported"] - xk["samples_sent"]
        d1.proc.send_signal(signal.SIGKILL)
        d1.proc.wait()
        sp = count_requests(pdir)
        note(f"kill: status before SIGKILL {xk}; spool {sp['files']} files, {sp['bytes']} bytes, "
             f"{sp['samples']} samples {sp['by_service']}")
        check(sp["files"] == xk["spool_requests"] and sp["files"] >= 2,
              f"kill: the spool holds the {xk['spool_requests']} waiting requests "
              f"({sp['files']} files)")
        check(sp["samples"] == waiting == n_kill,
              f"kill: their samples ({sp['samples']}) are what was exported and not sent "
              f"({waiting}) and the burner's dump ({n_kill})")
    finally:
        d1.__exit__(None, None, None)

    with daemon(b_restart.pid) as d2:
        logs.append(("profd (second)", d2.logpath))
        x = exporter(d2)
        check(x["spool_requests"] == sp["files"] and x["spool_bytes"] == sp["bytes"],
              f"restart: the new profd takes the spool over ({x['spool_requests']} requests, "
              f"{x['spool_bytes']} bytes; {sp['files']} files, {sp['bytes']} bytes)")
        b_restart.go()
        recv.start()
        b_restart.wait()
        x = settle(d2, timeout=60)
        st = recv.stats()
        ids = set(st["pyroscope"]["ids"])
        missing = sp["ids"] - ids
        check(not missing, f"restart: every spooled RawSample arrived ({len(sp['ids'])} IDs, "
              f"{len(missing)} missing)")
        got = received(st, service_name=b_kill.service)
        check(got == sp["samples"] == n_kill,
              f"restart: the receiver has {got} samples of {b_kill.service}, the spool had "
              f"{sp['samples']}, the first profd's dump {n_kill}")
        n = dump_total(d2, b_restart.pid)
        got = received(st, service_name=b_restart.service)
        check(n > 0 and got == n,
              f"restart: the new profd's own samples arrive too ({got}, dump {n})")
        # The spool taken up counts as exported by this profd too: sent never passes it.
        check(x["samples_sent"] == x["samples_exported"] == sp["samples"] + n,
              f"restart: samples_sent {x['samples_sent']} == samples_exported "
              f"{x['samples_exported']} == spooled {sp['samples']} + its own {n}")
        check(st["pyroscope"]["duplicates"] == dups_before,
              f"restart: no copies ({st['pyroscope']['duplicates'] - dups_before} new)")
        check(x["spool_requests"] == 0 and request_files(pdir) == [],
              f"restart: the spool is empty ({x['spool_requests']}, "
              f"{len(request_files(pdir))} files)")
except BaseException:
    for what, path in logs:
        log(tail(what, path))
    if recv:
        log(receiver_log(recv))
    raise
finally:
    kill_all(burners)
    if recv:
        recv.stop()
note(f"run time {time.time() - t0:.0f} s (outage part {t_part1:.0f} s)")
check.done(lambda: log("".join(tail(w, p) for w, p in logs) +
                       receiver_log(recv)))
