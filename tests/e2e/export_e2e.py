# SPDX-License-Identifier: BSD-2-Clause
"""Helpers of the export end-to-end tests (test_export*.py): the stand-in receiver's client,
CPU burners started on a signal, profd's exporter status, and a reader of Pyroscope push
requests (spooled or quarantined) that counts their samples with the standard library only.

Checks go through Checks: a failed one is printed and the test goes on to the end, so one run
shows every number; passed ones are printed with PROFD_TEST_VERBOSE=1.
"""
import gzip
import json
import os
import subprocess
import sys
import time

from profd_e2e import fixture, fail, log, _read_varint, fields as _fields

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "receiver"))
import receiver_client as rc  # noqa: E402

VERBOSE = os.environ.get("PROFD_TEST_VERBOSE") == "1"
CPU_TYPE = "samples/count"


class Checks:
    """check() records and prints a failure and goes on; done() exits 1 if any failed."""

    def __init__(self):
        self.failed = []
        self.passed = 0

    def __call__(self, cond, what):
        if cond:
            self.passed += 1
            if VERBOSE:
                log(f"ok: {what}")
            return True
        self.failed.append(what)
        log(f"FAIL: {what}")
        return False

    def done(self, on_failure=None):
        if self.failed:
            if on_failure:
                on_failure()
            fail(f"{len(self.failed)} of {len(self.failed) + self.passed} checks failed")
        log(f"PASS ({self.passed} checks)")


def tail(what, path, n=4000):
    """The end of a log file, headed, for a failed test's output."""
    try:
        with open(path, errors="replace") as f:
            return f"---- {what} log ----\n" + f.read()[-n:] + "\n"
    except (OSError, TypeError):
        return ""


def receiver_log(recv):
    """The receiver's log for a failed test, with whether it is still running (an exit status
    of 0 means it stopped on SIGTERM or SIGINT, a negative one on that signal)."""
    if not recv:
        return ""
    rc_ = recv.proc.poll() if recv.proc else None
    head = "running" if recv.proc and rc_ is None else f"exited with {rc_}"
    return tail(f"receiver ({head})", recv.logpath)


def note(msg):
    """A measurement worth seeing when asked for (PROFD_TEST_VERBOSE=1)."""
    if VERBOSE:
        log(msg)


class Burner:
    """The burn fixture (75/25 split, tests/fixtures/burn.c) under OTEL_SERVICE_NAME=service,
    started at once but waiting for go(): a shell blocked in `read` that execs the burner. The
    pid is known before profd starts (so --pid can name it) and no CPU is spent before go()."""

    def __init__(self, service, seconds, env=None):
        self.service = service
        self.seconds = seconds
        e = dict(os.environ if env is None else env, OTEL_SERVICE_NAME=service)
        self.proc = subprocess.Popen(["sh", "-c", 'read _ && exec "$0" "$@"', fixture("burn"),
                                      str(seconds)], stdin=subprocess.PIPE, env=e)
        self.pid = self.proc.pid
        self.started = None

    def go(self):
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.close()
        self.started = time.time()

    def wait(self, timeout=None):
        t = timeout if timeout is not None else self.seconds + 30
        try:
            return self.proc.wait(t)
        except subprocess.TimeoutExpired:
            fail(f"burner {self.service} did not end within {t} s")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def kill_all(burners):
    for b in burners:
        b.kill()


# ---- profd's side -----------------------------------------------------------------------------

def exporter(d, name="pyroscope"):
    """The ExportStatus of backend name in `profctl status --json` (fields as in profd.proto,
    unset ones 0), or None when the daemon lists none."""
    r = d.ctl("status", "--json")
    if r.returncode != 0:
        fail(f"profctl status --json failed ({r.returncode}): {r.stderr.strip()}")
    for x in json.loads(r.stdout).get("export", []):
        if x.get("name") == name:
            out = {k: 0 for k in ("requests_sent", "requests_retried", "requests_dropped",
                                  "requests_expired", "requests_quarantined", "requests_split",
                                  "samples_exported", "samples_sent", "bytes_sent",
                                  "spool_bytes", "spool_requests", "oldest_age_ns",
                                  "spool_errors", "requests_built", "encode_errors",
                                  "quarantine_requests", "quarantine_bytes",
                                  "quarantine_dropped", "requests_invalid")}
            out.update(x)
            out.setdefault("last_error", "")
            return out
    return None


def dump_total(d, pid):
    """CPU samples profd holds for pid (profctl dump over the whole run)."""
    r = d.ctl("dump", "flamegraph", "--format", "folded", "--pid", str(pid))
    if r.returncode != 0:
        fail(f"profctl dump --pid {pid} failed ({r.returncode}): {r.stderr.strip()}")
    n = 0
    for line in r.stdout.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            n += int(count)
    return n


def wait_for(cond, timeout, step=0.25):
    """Poll cond() until it returns a true value or timeout passes; returns its last value."""
    deadline = time.time() + timeout
    while True:
        v = cond()
        if v or time.time() >= deadline:
            return v
        time.sleep(step)


def settle(d, timeout=60, name="pyroscope"):
    """Wait until the exporter is quiet: nothing waits in its spool and two status reads a
    second and a half apart (more than an interval of 1 s) agree on what was built and sent.
    Returns the last status (the caller checks what it wants of it)."""
    last = None
    deadline = time.time() + timeout
    while True:
        x = exporter(d, name)
        key = (x["requests_built"], x["requests_sent"], x["requests_quarantined"],
               x["spool_requests"], x["samples_exported"])
        if x["spool_requests"] == 0 and key == last:
            return x
        if time.time() >= deadline:
            log(f"exporter not quiet after {timeout} s: {x}")
            return x
        last = key
        time.sleep(1.5)


# ---- the receiver's side ----------------------------------------------------------------------

def cpu_series(stats, **match):
    return rc.series_of(stats, "pyroscope", __name__="process_cpu", **match)


def received(stats, unique=True, **match):
    """CPU samples the receiver accepted under these labels (each RawSample ID once)."""
    return rc.total_of(cpu_series(stats, **match), CPU_TYPE, unique=unique)


def start_receiver(tmp, *args, **kw):
    try:
        rc.venv_python()
    except rc.Unavailable as e:
        from profd_e2e import skip
        skip(str(e))
    r = rc.Receiver("-q", *args, logpath=os.path.join(tmp, "receiver.log"), **kw)
    try:
        r.start()
    except RuntimeError as e:
        fail(str(e))
    return r


def state_requests(path):
    """The accepted Pyroscope requests of a receiver --state file, in order: [(bytes, number of
    RawSamples)] (a request's sample events are written just before its request event)."""
    out, pending = [], 0
    with open(path) as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("src") != "pyroscope":
                continue
            if ev["ev"] == "sample":
                pending += 1
            elif ev["ev"] == "request":
                if ev["result"] == "accepted":
                    out.append((ev.get("bytes", 0), pending))
                pending = 0
    return out


# ---- Pyroscope push requests, as profd spools them --------------------------------------------

def _varints(buf):
    i, out = 0, []
    while i < len(buf):
        v, i = _read_varint(buf, i)
        out.append(v - (1 << 64) if v >= 1 << 63 else v)
    return out


def pprof_totals(raw):
    """{"type/unit": sum} of a pprof (gzipped or not)."""
    data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    strings, types, samples = [], [], []
    for num, wt, v in _fields(data):
        if num == 6:
            strings.append(v.decode())
        elif num == 1:
            f = {n: x for n, _, x in _fields(v)}
            types.append((f.get(1, 0), f.get(2, 0)))
        elif num == 2:
            vals = []
            for n, w, x in _fields(v):
                if n == 2:
                    vals += _varints(x) if w == 2 else [x - (1 << 64) if x >= 1 << 63 else x]
            samples.append(vals)
    out = {}
    for k, (t, u) in enumerate(types):
        name = f"{strings[t]}/{strings[u]}"
        out[name] = out.get(name, 0) + sum(s[k] for s in samples if k < len(s))
    return out


def push_request(body):
    """[(labels dict, [(ID, {"type/unit": sum})])] of a PushRequest body."""
    out = []
    for num, _, series in _fields(body):
        if num != 1:
            continue
        labels, samples = {}, []
        for n, _, v in _fields(series):
            if n == 1:
                f = {a: b for a, _, b in _fields(v)}
                labels[f.get(1, b"").decode()] = f.get(2, b"").decode()
            elif n == 2:
                f = {a: b for a, _, b in _fields(v)}
                samples.append((f.get(2, b"").decode(), pprof_totals(f.get(1, b""))))
        out.append((labels, samples))
    return out


SPOOL_MAGIC = b"PROFDSPL"
SPOOL_HDR_LEN = 56


def spool_body(data):
    """The request body of a spool file: after its header (daemon/export/spool.h)."""
    if data[:8] != SPOOL_MAGIC:
        fail(f"a spool file without a header: {data[:16]!r}")
    return data[SPOOL_HDR_LEN:]


def request_files(folder):
    """The request files of a spool (or quarantine) folder, oldest first: names ending .req
    that are not temp files."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.endswith(".req") and not n.startswith(".tmp"))


def count_requests(folder):
    """What the request files of folder carry: {"files", "bytes", "samples" (CPU, process_cpu),
    "by_service" {service: CPU samples}, "ids" set}."""
    out = {"files": 0, "bytes": 0, "samples": 0, "by_service": {}, "ids": set()}
    for name in request_files(folder):
        with open(os.path.join(folder, name), "rb") as f:
            body = spool_body(f.read())
        out["files"] += 1
        out["bytes"] += len(body)
        for labels, samples in push_request(body):
            for sid, totals in samples:
                out["ids"].add(sid)
                if labels.get("__name__") != "process_cpu":
                    continue
                n = totals.get(CPU_TYPE, 0)
                out["samples"] += n
                svc = labels.get("service_name", "")
                out["by_service"][svc] = out["by_service"].get(svc, 0) + n
    return out
