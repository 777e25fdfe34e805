#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""
A stand-in profile backend for profd's export tests: NOT Grafana Pyroscope and NOT an
OpenTelemetry Collector (see README.md for what to point profd at for real).

It speaks the two ingest protocols profd sends, decoding with classes generated from the same
.proto files (the repository's proto/pyroscope/push.proto and proto/profile.proto through
grpc_tools.protoc; OTLP from PyPI's opentelemetry-proto), applies Pyroscope's distributor
validation (pkg/validation/validate.go) and hands every accepted pprof to the reference pprof
parser (`go tool pprof -raw`). It keeps an accounting the tests read, and injects faults on
request.

  POST /push.v1.PusherService/Push   Connect unary: application/proto or application/json,
                                     Content-Encoding gzip or none
  POST /v1development/profiles       OTLP/HTTP: application/x-protobuf or application/json,
                                     Content-Encoding gzip or none
  GET  /_stats                       the accounting, JSON; with ?arrivals=1 also, per source,
                                     "arrivals": [[time_nanos, duration_nanos, arrival_ns], ...]
                                     for every profile accepted (arrival: wall clock when its
                                     request's body had been read), in arrival order
  GET  /_profiles?service=NAME[&source=pyroscope|otlp][&name=process_cpu][&type=T/U]
                                     merged folded stacks {"T/U": {"root;...;leaf": v}};
                                     &format=folded gives text lines (needs type=)
  POST /_fault                       JSON, a fault for the next ingest requests (see FAULTS)
  POST /_reset                       forget the accounting (and empty --state)
  GET  /ready                        "ready"

Usage: receiver.py [--listen ADDR:PORT] [--state FILE] [--grpc-listen ADDR:PORT] ...
The first line on stdout is `listening ADDR:PORT` (then `grpc ADDR:PORT` with --grpc-listen).
With --tls-cert/--tls-key the HTTP port speaks HTTPS only (every route), and /_stats gains
"tls": {"handshakes", "failures": {reason: n}, "client_certs": {subject CN: n}}; --client-ca
makes a client certificate signed by that CA mandatory (mTLS). The gRPC port stays plain.
"""

import argparse
import base64
import http.server
import importlib.util
import json
import os
import re
import shutil
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qs, urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

PUSH_PATH = "/push.v1.PusherService/Push"
OTLP_PATH = "/v1development/profiles"

FAULTS = """\
POST /_fault bodies (each adds a rule; rules are tried in the order they were added, the first
that matches an ingest request is applied and its count goes down by one):
  {"status": 503, "retry_after": 2, "count": 3}   answer 503 (Retry-After: 2) to the next 3
  {"status": 429, "count": 1}                     429 (any status 400-599 works)
  {"status": 413, "max_body": BYTES}              413 for bodies above BYTES (default: forever)
  {"reset": true, "count": 2}                     read part of the body, then RST the connection
  {"status": 400, "match_service": "NAME"}        400 for requests carrying service NAME (forever)
  {"delay": SECONDS, "count": 1}                  wait before answering (with status: then fail)
  {"status": 400, "body_bytes": 10000000000}      with status: a reply body that long, written
                                                  until the client hangs up (/_stats counts
                                                  "huge_reply_bytes" written, "huge_replies")
  {"clear": true}                                 remove every rule
Options on any rule: "count" (default 1; -1 forever; rules with max_body or match_service
default to forever), "endpoint": "pyroscope" | "otlp" (default: both).
"""

# Pyroscope's defaults (pkg/validation/limits.go) and its label rules (prometheus model, legacy).
MAX_LABEL_NAMES = 30
MAX_LABEL_NAME_LEN = 1024
MAX_LABEL_VALUE_LEN = 2048
LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
METRIC_NAME_RE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")

CONNECT_CODES = {400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied",
                 404: "unimplemented", 408: "deadline_exceeded", 409: "aborted",
                 412: "failed_precondition", 413: "resource_exhausted",
                 415: "internal", 429: "resource_exhausted", 499: "canceled", 500: "internal",
                 501: "unimplemented", 502: "unavailable", 503: "unavailable",
                 504: "unavailable"}
# google.rpc.Code numbers for OTLP's Status body.
RPC_CODES = {400: 3, 401: 16, 403: 7, 404: 12, 408: 4, 413: 8, 415: 3, 429: 8, 500: 13,
             501: 12, 502: 14, 503: 14, 504: 14}


def die(msg):
    print(f"receiver: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


def log(msg):
    print(f"receiver: {msg}", file=sys.stderr, flush=True)


# ---- generated classes ---------------------------------------------------------------------

def load_protos(proto_dir, outdir):
    """Compile push.proto and profile.proto with grpc_tools.protoc into outdir and import them.
    Returns (push_pb2, profile_pb2)."""
    try:
        from grpc_tools import protoc
    except ImportError:
        die("grpc_tools is missing: run this with the python that scripts/test-venv prints")
    wkt = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    files = [os.path.join("pyroscope", "push.proto"), "profile.proto"]
    for f in files:
        if not os.path.exists(os.path.join(proto_dir, f)):
            die(f"{os.path.join(proto_dir, f)}: not found")
    os.makedirs(outdir, exist_ok=True)
    rc = protoc.main(["protoc", f"-I{proto_dir}", f"-I{wkt}", f"--python_out={outdir}", *files])
    if rc != 0:
        die(f"protoc failed ({rc}) on {files} in {proto_dir}")

    def load(name, path):
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    push = load("profd_push_pb2", os.path.join(outdir, "pyroscope", "push_pb2.py"))
    prof = load("profd_profile_pb2", os.path.join(outdir, "profile_pb2.py"))
    return push, prof


# ---- decoding and validation ---------------------------------------------------------------

class Reject(Exception):
    """A request the backend refuses: HTTP status, Pyroscope's discard reason, message."""

    def __init__(self, reason, msg, status=400):
        super().__init__(msg)
        self.reason = reason
        self.msg = msg
        self.status = status


def labels_string(ls):
    return "{" + ", ".join(f'{n}="{v}"' for n, v in ls) + "}"


def validate_labels(ls):
    """Pyroscope's ValidateLabels over [(name, value)]: returns them sorted or raises Reject."""
    if not ls:
        raise Reject("missing_labels", "error at least one label pair is required per profile")
    ls = sorted(ls)
    s = labels_string(ls)
    if len(ls) > MAX_LABEL_NAMES:
        raise Reject("max_label_names_per_series",
                     f"profile series '{s}' has {len(ls)} label names; limit {MAX_LABEL_NAMES}")
    d = dict(ls)
    if not METRIC_NAME_RE.match(d.get("__name__", "")):
        raise Reject("invalid_labels", f"invalid labels '{s}' with error: invalid metric name")
    if not d.get("service_name"):
        raise Reject("missing_labels",
                     f"invalid labels '{s}' with error: service name is not provided")
    last = None
    for n, v in ls:
        if len(n) > MAX_LABEL_NAME_LEN:
            raise Reject("label_name_too_long",
                         f"profile with labels '{s}' has label name too long: '{n}'")
        if len(v) > MAX_LABEL_VALUE_LEN:
            raise Reject("label_value_too_long",
                         f"profile with labels '{s}' has label value too long: '{v}'")
        if not LABEL_NAME_RE.match(n):
            raise Reject("invalid_labels",
                         f"invalid labels '{s}' with error: invalid label name '{n}'")
        if n == last:
            raise Reject("duplicate_label_names",
                         f"profile with labels '{s}' has duplicate label name: '{n}'")
        last = n
    return ls


def gunzip(data, limit, what):
    try:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out = d.decompress(data, limit + 1)
        if len(out) > limit:
            raise Reject("profile_size_limit", f"{what}: more than {limit} bytes uncompressed")
        if not d.eof:
            raise Reject("malformed_profile", f"{what}: truncated gzip stream")
        return out
    except zlib.error as e:
        raise Reject("malformed_profile", f"{what}: bad gzip: {e}")


def check_window(t_ns, ls, now_ns, older_ns, newer_ns):
    """Pyroscope's ingestion window: after now - older and before now + newer."""
    lo = now_ns - older_ns if older_ns else None
    hi = now_ns + newer_ns if newer_ns else None
    if (lo is None or t_ns > lo) and (hi is None or t_ns < hi):
        return

    def fmt(ns):
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns / 1e9)) + \
            f".{(ns // 1000000) % 1000:03d}Z"
    detail = " and ".join(x for x in (lo and f"the ingestion window starts at {fmt(lo)}",
                                      hi and f"ends at {fmt(hi)}") if x)
    raise Reject("not_in_ingestion_window",
                 f"profile with labels '{labels_string(ls)}' is outside of ingestion window "
                 f"(profile timestamp: {fmt(t_ns)}, {detail})")


def pprof_parts(p, series_labels):
    """Validate a decoded pprof Profile (Pyroscope's ValidateProfile plus the structure every
    reader relies on) and split it as Pyroscope does: string sample labels join the series
    labels. Returns [(labels sorted, {"type/unit": value}, {"type/unit": {folded: value}})]."""
    st = p.string_table
    ls = series_labels

    def s(i, what):
        if i < 0 or i >= len(st):
            raise Reject("malformed_profile", f"{what}: string index {i} out of range")
        return st[i]
    if not p.sample_type:
        raise Reject("malformed_profile", "profile has no sample types")
    types = []
    for vt in p.sample_type:
        t = s(vt.type, "sample_type")
        if "-" in t:
            raise Reject("malformed_profile", "sample type contains -")
        types.append(f"{t}/{s(vt.unit, 'sample_type unit')}")
    if len(set(types)) != len(types):
        raise Reject("malformed_profile", f"sample types repeat: {types}")
    funcs = {}
    for f in p.function:
        if f.id == 0:
            raise Reject("malformed_profile", "function id is 0")
        funcs[f.id] = s(f.name, "function name")
    locs = {}
    for loc in p.location:
        if loc.id == 0:
            raise Reject("malformed_profile", "location id is 0")
        names = []
        for ln in reversed(loc.line):  # the caller last in the list, first in a folded stack
            if ln.function_id not in funcs:
                raise Reject("malformed_profile",
                             f"location {loc.id}: unknown function {ln.function_id}")
            names.append(funcs[ln.function_id])
        locs[loc.id] = names or [f"0x{loc.address:x}"]
    parts = {}
    for smp in p.sample:
        if len(smp.value) != len(types):
            raise Reject("malformed_profile",
                         f"a sample has {len(smp.value)} values for {len(types)} sample types")
        frames = []
        for lid in reversed(smp.location_id):
            if lid not in locs:
                raise Reject("malformed_profile", f"a sample names unknown location {lid}")
            frames.extend(locs[lid])
        extra = []
        for lab in smp.label:
            if lab.str:
                extra.append((s(lab.key, "label key"), s(lab.str, "label value")))
        key = tuple(sorted(set(ls) | set(extra))) if extra else tuple(ls)
        part = parts.get(key)
        if part is None:
            if extra:
                validate_labels(list(key))
            part = parts[key] = ({t: 0 for t in types}, {t: {} for t in types})
        stack = ";".join(frames)
        for t, v in zip(types, smp.value):
            part[0][t] += v
            part[1][t][stack] = part[1][t].get(stack, 0) + v
    return [(list(k), v, f) for k, (v, f) in parts.items()]


class PprofCheck:
    """The reference parser: every pprof goes through `pprof -raw` (what `go tool pprof` runs),
    and the per-type totals it prints must equal ours."""

    def __init__(self, cmd, tmpdir):
        self.cmd = cmd
        self.tmpdir = tmpdir
        self.pool = ThreadPoolExecutor(max_workers=4)
        self.n = 0
        self.lock = threading.Lock()

    @staticmethod
    def find(arg):
        if arg:
            return arg.split()
        go = shutil.which("go")
        if not go:
            die("go is not installed (golang-go): it provides `go tool pprof`, the reference "
                "parser every received pprof is handed to")
        try:
            tooldir = subprocess.run([go, "env", "GOTOOLDIR"], capture_output=True, text=True,
                                     check=True, timeout=60).stdout.strip()
        except (subprocess.SubprocessError, OSError) as e:
            die(f"go env GOTOOLDIR: {e}")
        tool = os.path.join(tooldir, "pprof")
        # `go tool pprof` runs this binary; calling it directly spares go's start-up per profile.
        return [tool] if os.access(tool, os.X_OK) else [go, "tool", "pprof"]

    def run(self, raw, types):
        """None when pprof reads the profile and agrees on its totals, else the error."""
        with self.lock:
            self.n += 1
            path = os.path.join(self.tmpdir, f"p{self.n}.pb.gz")
        try:
            with open(path, "wb") as f:
                f.write(raw)
            r = subprocess.run([*self.cmd, "-raw", path], capture_output=True, text=True,
                               timeout=60, env=dict(os.environ, HOME=self.tmpdir))
        except subprocess.TimeoutExpired:
            return "go tool pprof -raw: timed out"
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass
        if r.returncode != 0:
            lines = [ln.replace(path, "raw_profile") for ln in r.stderr.strip().splitlines()]
            return "go tool pprof -raw: " + ("; ".join(lines[:3]) or f"exit {r.returncode}")
        got = self.totals(r.stdout)
        if got is None:
            return "go tool pprof -raw: no Samples section in its output"
        if got != types:
            return f"go tool pprof -raw reads totals {got}, the receiver {types}"
        return None

    @staticmethod
    def totals(text):
        """Per sample type totals from pprof's raw text ("Samples:", a header of type/unit
        names, then `  v1 v2: loc ...` lines, each maybe followed by label lines)."""
        lines = text.splitlines()
        try:
            i = lines.index("Samples:")
        except ValueError:
            return None
        # "type/unit", with "[dflt]" after the default sample type
        names = [n[:-len("[dflt]")] if n.endswith("[dflt]") else n for n in lines[i + 1].split()]
        sums = {n: 0 for n in names}
        for ln in lines[i + 2:]:
            if not ln.startswith(" "):
                break
            head, sep, _ = ln.partition(":")
            vals = head.split()
            if not sep or len(vals) != len(names) or not all(
                    v.lstrip("-").isdigit() for v in vals):
                continue  # a labels: line
            for n, v in zip(names, vals):
                sums[n] += int(v)
        return sums

    def check_all(self, items):
        """items: [(raw bytes, {type: total})]; returns the first error or None."""
        for err in self.pool.map(lambda it: self.run(*it), items):
            if err:
                return err
        return None


def any_value(v):
    """An OTLP AnyValue as a JSON-able Python value."""
    k = v.WhichOneof("value")
    if k is None:
        return None
    if k == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if k == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if k == "bytes_value":
        return base64.b64encode(v.bytes_value).decode()
    return getattr(v, k)


def otlp_parts(req, now_ns, older_ns, newer_ns):
    """Validate an ExportProfilesServiceRequest (every dictionary index in range, a sample type
    on every profile, time in the ingestion window) and return, per Profile,
    (resource attributes, profile id hex or "", {"type/unit": v}, {"type/unit": {folded: v}},
    (time, duration))."""
    d = req.dictionary
    st = d.string_table
    if st and st[0] != "":
        raise Reject("malformed_profile", "string_table[0] is not empty")

    def idx(table, i, what):
        if i < 0 or i >= len(table):
            raise Reject("malformed_profile", f"{what} index {i} out of range ({len(table)})")
        return table[i]

    def frames_of(stack_index):
        stack = idx(d.stack_table, stack_index, "stack")
        out = []
        for li in reversed(stack.location_indices):
            loc = idx(d.location_table, li, "location")
            if loc.mapping_index:
                idx(d.mapping_table, loc.mapping_index, "mapping")
            names = []
            for ln in reversed(loc.lines):
                fn = idx(d.function_table, ln.function_index, "function")
                names.append(idx(st, fn.name_strindex, "string"))
            out.extend(names or [f"0x{loc.address:x}"])
        return ";".join(out)

    parts = []
    for rp in req.resource_profiles:
        attrs = {kv.key: any_value(kv.value) for kv in rp.resource.attributes}
        ls = sorted((k, str(v)) for k, v in attrs.items())
        for sp in rp.scope_profiles:
            for prof in sp.profiles:
                if not prof.HasField("sample_type"):
                    raise Reject("malformed_profile", "profile has no sample type")
                t = (f"{idx(st, prof.sample_type.type_strindex, 'string')}/"
                     f"{idx(st, prof.sample_type.unit_strindex, 'string')}")
                if t == "/":
                    raise Reject("malformed_profile", "profile has an empty sample type")
                for ai in prof.attribute_indices:
                    idx(d.attribute_table, ai, "attribute")
                if prof.time_unix_nano:
                    check_window(prof.time_unix_nano, ls, now_ns, older_ns, newer_ns)
                total, folded = 0, {}
                for smp in prof.samples:
                    for ai in smp.attribute_indices:
                        idx(d.attribute_table, ai, "attribute")
                    if smp.link_index:
                        idx(d.link_table, smp.link_index, "link")
                    if smp.values and smp.timestamps_unix_nano and \
                            len(smp.values) != len(smp.timestamps_unix_nano):
                        raise Reject("malformed_profile",
                                     f"a sample has {len(smp.values)} values and "
                                     f"{len(smp.timestamps_unix_nano)} timestamps")
                    v = sum(smp.values) if smp.values else len(smp.timestamps_unix_nano)
                    stack = frames_of(smp.stack_index)
                    total += v
                    folded[stack] = folded.get(stack, 0) + v
                pid = prof.profile_id.hex() if any(prof.profile_id) else ""
                parts.append((attrs, pid, {t: total}, {t: folded},
                              (prof.time_unix_nano, prof.duration_nano)))
    return parts


# ---- accounting ----------------------------------------------------------------------------

def _add(dst, src):
    for k, v in src.items():
        dst[k] = dst.get(k, 0) + v


class Accounting:
    """Everything the tests read. Every change is an event (a dict) applied here, and appended
    as one JSON line to the --state file, which is replayed at start: a receiver killed and
    started again on the same file keeps counting."""

    def __init__(self, state_path):
        self.lock = threading.Lock()
        self.state_path = state_path
        self.fd = None
        self.reset_memory()
        if state_path:
            replayed = 0
            try:
                with open(state_path, "rb") as f:
                    for line in f:
                        try:
                            ev = json.loads(line)
                        except ValueError:
                            continue  # a line cut short when the receiver was killed
                        self.apply(ev)
                        replayed += 1
            except FileNotFoundError:
                pass
            if replayed:
                log(f"{state_path}: replayed {replayed} events")
            self.fd = os.open(state_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def reset_memory(self):
        self.src = {s: {"requests": {"accepted": 0, "rejected": {}, "faulted": {}},
                        "series": {}, "ids": {}, "bytes": 0, "peers": {}, "tenants": {},
                        "arrivals": []}
                    for s in ("pyroscope", "otlp")}
        self.profiles = {}  # (src, service, name) -> {type: {stack: v}}, first copies only

    def record(self, events):
        """Apply events and append them to the state file, atomically with respect to other
        requests; done before the reply, so an accepted request is on disk first."""
        with self.lock:
            if self.fd is not None:
                os.write(self.fd, b"".join(json.dumps(e, sort_keys=True).encode() + b"\n"
                                           for e in events))
            for e in events:
                self.apply(e)

    def reset(self):
        with self.lock:
            self.reset_memory()
            if self.fd is not None:
                os.ftruncate(self.fd, 0)

    def apply(self, e):
        src = self.src[e["src"]]
        if e["ev"] == "request":
            r = src["requests"]
            if e["result"] == "accepted":
                r["accepted"] += 1
                src["bytes"] += e.get("bytes", 0)
            else:
                _add(r[e["result"]], {e["reason"]: 1})
            _add(src["peers"], {e.get("peer", ""): 1})
            _add(src["tenants"], {e.get("tenant", ""): 1})
            return
        # one RawSample (Pyroscope) or one Profile (OTLP), maybe split into several series
        if "arrival_ns" in e:
            src["arrivals"].append([e.get("time_nanos", 0), e.get("duration_nanos", 0),
                                    e["arrival_ns"]])
        sid = e.get("id", "")
        first = True
        if sid:
            n = src["ids"].get(sid, 0)
            src["ids"][sid] = n + 1
            first = n == 0
        for part in e["parts"]:
            key = json.dumps(part["labels"], sort_keys=True)
            s = src["series"].get(key)
            if s is None:
                s = src["series"][key] = {"labels": part["labels"], "values": {},
                                          "unique_values": {}, "profiles": 0,
                                          "duplicate_profiles": 0}
            s["profiles"] += 1
            _add(s["values"], part["values"])
            t0, dur = e.get("time_nanos", 0), e.get("duration_nanos", 0)
            if t0:
                s["time_first_ns"] = min(s.get("time_first_ns", t0), t0)
                s["time_last_end_ns"] = max(s.get("time_last_end_ns", 0), t0 + dur)
            if not first:
                s["duplicate_profiles"] += 1
                continue
            _add(s["unique_values"], part["values"])
            lab = part["labels"]
            service = lab.get("service_name") if e["src"] == "pyroscope" else \
                lab.get("service.name", "unknown_service")
            pk = (e["src"], service, lab.get("__name__", ""))
            prof = self.profiles.setdefault(pk, {})
            for t, stacks in part["folded"].items():
                _add(prof.setdefault(t, {}), stacks)

    def stats(self, arrivals=False):
        with self.lock:
            out = {}
            for name, src in self.src.items():
                totals, unique = {}, {}
                for s in src["series"].values():
                    _add(totals, s["values"])
                    _add(unique, s["unique_values"])
                dups = {i: n - 1 for i, n in src["ids"].items() if n > 1}
                out[name] = {
                    "requests": src["requests"],
                    "series": [src["series"][k] for k in sorted(src["series"])],
                    "totals": totals, "unique_totals": unique,
                    "ids": sorted(src["ids"]), "duplicates": sum(dups.values()),
                    "duplicate_ids": dups, "bytes": src["bytes"],
                    "peers": src["peers"], "tenants": src["tenants"],
                }
                if arrivals:
                    out[name]["arrivals"] = src["arrivals"]
            return json.loads(json.dumps(out))  # a copy, taken under the lock

    def folded(self, source, service, name=None):
        with self.lock:
            out = {}
            for (src, svc, nm), types in self.profiles.items():
                if src != source or svc != service or (name is not None and nm != name):
                    continue
                for t, stacks in types.items():
                    _add(out.setdefault(t, {}), stacks)
            return out


# ---- faults --------------------------------------------------------------------------------

class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []

    def add(self, spec):
        if not isinstance(spec, dict):
            raise ValueError("a fault is a JSON object")
        known = {"status", "retry_after", "count", "max_body", "reset", "match_service",
                 "delay", "clear", "endpoint", "body_bytes"}
        bad = set(spec) - known
        if bad:
            raise ValueError(f"unknown fault keys {sorted(bad)}")
        if spec.get("clear"):
            with self.lock:
                self.rules.clear()
            return
        status = spec.get("status")
        if status is not None and (not isinstance(status, int) or not 400 <= status <= 599):
            raise ValueError("status must be an integer 400-599")
        if not status and not spec.get("reset") and not spec.get("delay"):
            raise ValueError("a fault needs status, reset or delay")
        if spec.get("match_service") is not None and not status:
            raise ValueError("match_service needs a status")
        if spec.get("body_bytes") is not None and not status:
            raise ValueError("body_bytes needs a status")
        if spec.get("endpoint") not in (None, "pyroscope", "otlp"):
            raise ValueError("endpoint is pyroscope or otlp")
        for k in ("retry_after", "max_body", "delay", "body_bytes"):
            if k in spec and (not isinstance(spec[k], (int, float)) or spec[k] < 0):
                raise ValueError(f"{k} must be a number >= 0")
        forever = "max_body" in spec or "match_service" in spec
        count = spec.get("count", -1 if forever else 1)
        if not isinstance(count, int) or count == 0 or count < -1:
            raise ValueError("count must be a positive integer, or -1 for forever")
        rule = dict(spec, count=count)
        with self.lock:
            self.rules.append(rule)

    def take(self, endpoint, length=None, services=None):
        """The rule that applies to this request, its count taken; None when none does.
        Before the body is read (services None) rules without match_service are tried; after
        decoding, only match_service rules."""
        with self.lock:
            for r in self.rules:
                if r.get("endpoint") not in (None, endpoint):
                    continue
                if services is None:
                    if "match_service" in r:
                        continue
                    if "max_body" in r and (length is None or length <= r["max_body"]):
                        continue
                elif r.get("match_service") not in services:
                    continue
                if r["count"] > 0:
                    r["count"] -= 1
                    if r["count"] == 0:
                        self.rules.remove(r)
                return dict(r)
        return None

    def list(self):
        with self.lock:
            return [dict(r) for r in self.rules]


# ---- HTTP ----------------------------------------------------------------------------------

def rpc_status(code, msg):
    """A google.rpc.Status {code=1, message=2}, the OTLP/HTTP error body."""
    def varint(n):
        out = bytearray()
        while True:
            b = n & 0x7F
            n >>= 7
            out.append(b | 0x80 if n else b)
            if not n:
                return bytes(out)
    m = msg.encode()
    return b"\x08" + varint(code) + b"\x12" + varint(len(m)) + m


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "profd-test-receiver/1"
    app = None  # set by main

    def log_message(self, fmt, *args):
        if not self.app.quiet:
            sys.stderr.write(f"receiver: {self.client_address[0]} {fmt % args}\n")

    def parse_request(self):
        self.expect_100 = False
        return super().parse_request()

    # Expect: 100-continue is answered when the body is wanted (a fault may refuse it first).
    def handle_expect_100(self):
        self.expect_100 = True
        return True

    def skip_body(self, length):
        """Before answering without looking at the body: read it, so that the connection stays
        usable and the peer gets the answer rather than an RST for unread data; or, when the
        peer waits for 100 Continue, never ask for it and close."""
        if self.expect_100:
            self.expect_100 = False
            self.close_connection = True
            return
        try:
            self.read_body(length, self.app.max_request)
        except Reject:
            self.close_connection = True

    def send_bytes(self, status, body, ctype, headers=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def send_huge(self, status, n, headers=()):
        """A reply whose body is n bytes of "x", written as fast as the client reads it, until
        it hangs up; what it took is counted in /_stats (huge_reply_bytes, huge_replies)."""
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(n))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        chunk, sent = b"x" * 65536, 0
        self.close_connection = True
        try:
            self.wfile.flush()
            while sent < n:
                k = min(len(chunk), n - sent)
                self.connection.sendall(chunk[:k])
                sent += k
        except OSError:
            pass
        with self.app.huge_lock:
            self.app.huge_bytes += sent
            self.app.huge_replies += 1

    def send_json(self, status, obj):
        self.send_bytes(status, json.dumps(obj, sort_keys=True).encode() + b"\n",
                        "application/json")

    def send_error_for(self, endpoint, status, msg, headers=()):
        """The error body each protocol defines: Connect's JSON for Pyroscope, a google.rpc.Status
        in the request's encoding for OTLP."""
        if endpoint == "otlp":
            code = RPC_CODES.get(status, 2)
            if self.headers.get("Content-Type", "").startswith("application/json"):
                self.send_bytes(status, json.dumps({"code": code, "message": msg}).encode(),
                                "application/json", headers)
            else:
                self.send_bytes(status, rpc_status(code, msg), "application/x-protobuf",
                                headers)
        else:
            self.send_bytes(status, json.dumps({"code": CONNECT_CODES.get(status, "unknown"),
                                                "message": msg}).encode(),
                            "application/json", headers)

    def continue_100(self):
        if self.expect_100:
            self.expect_100 = False
            self.send_response_only(100)
            self.end_headers()

    def body_length(self):
        te = self.headers.get("Transfer-Encoding", "").lower()
        if te == "chunked":
            return -1
        if te:
            raise Reject("bad_request", f"Transfer-Encoding {te} not supported", 501)
        cl = self.headers.get("Content-Length")
        if cl is None:
            raise Reject("bad_request", "Content-Length required", 411)
        if not cl.isdigit():
            raise Reject("bad_request", f"bad Content-Length {cl!r}")
        return int(cl)

    def read_body(self, length, limit):
        if length >= 0:
            if length > limit:
                raise Reject("request_too_large",
                             f"request body of {length} bytes is over {limit}", 413)
            data = self.rfile.read(length)
            if len(data) != length:
                raise ConnectionError("body cut short")
            return data
        out = bytearray()
        while True:
            line = self.rfile.readline(66)
            size = int(line.split(b";")[0].strip() or b"x", 16)
            if size == 0:
                while self.rfile.readline(8192) not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += self.rfile.read(size)
            self.rfile.readline(3)
            if len(out) > limit:
                raise Reject("request_too_large", f"request body over {limit} bytes", 413)

    def reset_connection(self, length):
        """Read part of the body and close with SO_LINGER 0: the peer gets an RST."""
        self.continue_100()
        if length != 0:
            try:
                self.connection.settimeout(2)
                want = max(1, length // 2) if length > 0 else 1
                self.rfile.read(min(want, 65536)) if length > 0 else self.rfile.readline(66)
            except OSError:
                pass
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        fd = self.connection.detach()
        os.close(fd)
        self.close_connection = True

    def do_GET(self):
        u = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        if u.path == "/_stats":
            st = self.app.acc.stats(arrivals=q.get("arrivals") == "1")
            st["faults"] = self.app.faults.list()
            with self.app.huge_lock:
                st["huge_reply_bytes"] = self.app.huge_bytes
                st["huge_replies"] = self.app.huge_replies
            if isinstance(self.server, TLSServer):
                st["tls"] = self.server.tls_stats()
            return self.send_json(200, st)
        if u.path == "/_profiles":
            if "service" not in q:
                return self.send_json(400, {"error": "service= is required"})
            src = q.get("source", "pyroscope")
            if src not in ("pyroscope", "otlp"):
                return self.send_json(400, {"error": "source is pyroscope or otlp"})
            prof = self.app.acc.folded(src, q["service"], q.get("name"))
            if "type" in q:
                prof = {q["type"]: prof.get(q["type"], {})}
            if q.get("format") == "folded":
                if "type" not in q:
                    return self.send_json(400, {"error": "format=folded needs type="})
                text = "".join(f"{s} {v}\n" for s, v in sorted(prof[q["type"]].items()))
                return self.send_bytes(200, text.encode(), "text/plain")
            return self.send_json(200, prof)
        if u.path == "/ready":
            return self.send_bytes(200, b"ready\n", "text/plain")
        self.send_json(404, {"error": f"no route GET {u.path}"})

    def do_POST(self):
        u = urlsplit(self.path)
        endpoint = {PUSH_PATH: "pyroscope", OTLP_PATH: "otlp"}.get(u.path)
        if endpoint:
            try:
                return self.ingest(endpoint)
            except (ConnectionError, socket.timeout) as e:
                log(f"{endpoint}: {self.client_address[0]}: {e}")
                self.close_connection = True
                return
            except Exception as e:  # a receiver bug: say so, and answer 500
                import traceback
                traceback.print_exc()
                self.close_connection = True
                return self.send_error_for(endpoint, 500, f"receiver error: {e!r}")
        try:
            length = self.body_length()
            self.continue_100()
            body = self.read_body(length, 1 << 20)
        except Reject as r:
            self.close_connection = True
            return self.send_json(r.status, {"error": r.msg})
        if u.path == "/_fault":
            try:
                self.app.faults.add(json.loads(body or b"{}"))
            except ValueError as e:
                return self.send_json(400, {"error": str(e), "usage": FAULTS})
            return self.send_json(200, {"faults": self.app.faults.list()})
        if u.path == "/_reset":
            self.app.acc.reset()
            return self.send_json(200, {})
        self.send_json(404, {"error": f"no route POST {u.path}"})

    def ingest(self, endpoint):
        app = self.app
        peer = self.client_address[0]
        tenant = self.headers.get("X-Scope-OrgID", "")
        base = {"ev": "request", "src": endpoint, "peer": peer, "tenant": tenant}

        def faulted(kind):
            app.acc.record([dict(base, result="faulted", reason=kind)])

        try:
            length = self.body_length()
        except Reject as r:
            self.close_connection = True
            app.acc.record([dict(base, result="rejected", reason=r.reason)])
            return self.send_error_for(endpoint, r.status, r.msg)

        fault = app.faults.take(endpoint, length=length)
        if fault and fault.get("delay"):
            time.sleep(fault["delay"])
        if fault and fault.get("reset"):
            faulted("reset")
            return self.reset_connection(length)
        if fault and fault.get("status"):
            faulted(str(fault["status"]))
            hdrs = [("Retry-After", str(fault["retry_after"]))] if "retry_after" in fault else []
            self.skip_body(length)
            if fault.get("body_bytes"):
                return self.send_huge(fault["status"], int(fault["body_bytes"]), hdrs)
            return self.send_error_for(endpoint, fault["status"],
                                       f"injected fault: HTTP {fault['status']}", hdrs)

        if app.auth and self.headers.get("Authorization") != app.auth:
            self.skip_body(length)
            app.acc.record([dict(base, result="rejected", reason="unauthenticated")])
            return self.send_error_for(endpoint, 401, "authentication required")

        self.continue_100()
        try:
            body = self.read_body(length, app.max_request)
            arrived = time.time_ns()
            nbytes = len(body)
            ce = self.headers.get("Content-Encoding", "identity").lower()
            if ce == "gzip":
                body = gunzip(body, app.max_request, "request body")
            elif ce not in ("identity", ""):
                raise Reject("bad_request", f"Content-Encoding {ce} not supported", 415)
            if endpoint == "pyroscope":
                events, services = self.decode_push(body)
            else:
                events, services = self.decode_otlp(body)
        except Reject as r:
            if r.status in (411, 413, 501):
                self.close_connection = True
            app.acc.record([dict(base, result="rejected", reason=r.reason)])
            log(f"{endpoint}: {r.status} {r.reason}: {r.msg}")
            return self.send_error_for(endpoint, r.status, r.msg)

        fault = app.faults.take(endpoint, services=services)
        if fault:
            faulted(str(fault["status"]))
            return self.send_error_for(endpoint, fault["status"],
                                       f"injected fault: service {fault['match_service']}")
        for e in events:
            e["arrival_ns"] = arrived
        app.acc.record(events + [dict(base, result="accepted", bytes=nbytes)])
        if endpoint == "pyroscope":
            if self.headers.get("Content-Type", "").startswith("application/json"):
                return self.send_bytes(200, b"{}", "application/json")
            return self.send_bytes(200, b"", "application/proto")
        resp = app.otlp_service.ExportProfilesServiceResponse().SerializeToString()
        self.send_bytes(200, resp, "application/x-protobuf")

    def decode_push(self, body):
        app = self.app
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        req = app.push.PushRequest()
        try:
            if ctype in ("application/proto", "application/protobuf"):
                req.ParseFromString(body)
            elif ctype == "application/json":
                from google.protobuf import json_format
                json_format.Parse(body.decode(), req)
            else:
                raise Reject("unsupported_media_type", f"Content-Type {ctype!r}: expected "
                             "application/proto or application/json", 415)
        except Reject:
            raise
        except Exception as e:  # DecodeError, ParseError, UnicodeDecodeError
            raise Reject("malformed_request", f"cannot decode PushRequest: {e}")
        now = time.time_ns()
        events, checks, services = [], [], set()
        for series in req.series:
            ls = validate_labels([(lp.name, lp.value) for lp in series.labels])
            services.add(dict(ls)["service_name"])
            for smp in series.samples:
                raw = smp.raw_profile
                data = gunzip(raw, app.max_profile, "raw_profile") if raw[:2] == b"\x1f\x8b" \
                    else raw
                p = app.profile.Profile()
                try:
                    p.ParseFromString(data)
                except Exception as e:
                    raise Reject("malformed_profile", f"cannot decode the pprof: {e}")
                if p.time_nanos > 0:
                    check_window(p.time_nanos, ls, now, app.older_ns, app.newer_ns)
                parts = pprof_parts(p, ls)
                total = {}
                for _, v, _ in parts:
                    _add(total, v)
                checks.append((raw, total))
                events.append({"ev": "sample", "src": "pyroscope", "id": smp.ID,
                               "time_nanos": p.time_nanos, "duration_nanos": p.duration_nanos,
                               "parts": [{"labels": dict(lab), "values": v, "folded": f}
                                         for lab, v, f in parts]})
        err = app.pprof.check_all(checks)
        if err:
            raise Reject("pprof_rejected", err)
        return events, services

    def decode_otlp(self, body):
        app = self.app
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        req = app.otlp_service.ExportProfilesServiceRequest()
        try:
            if ctype == "application/x-protobuf":
                req.ParseFromString(body)
            elif ctype == "application/json":
                from google.protobuf import json_format
                json_format.Parse(body.decode(), req)
            else:
                raise Reject("unsupported_media_type", f"Content-Type {ctype!r}: expected "
                             "application/x-protobuf or application/json", 415)
        except Reject:
            raise
        except Exception as e:
            raise Reject("malformed_request", f"cannot decode ExportProfilesServiceRequest: {e}")
        parts = otlp_parts(req, time.time_ns(), app.older_ns, app.newer_ns)
        events, services = [], set()
        for attrs, pid, values, folded, (t0, dur) in parts:
            services.add(str(attrs.get("service.name", "unknown_service")))
            lab = {k: str(v) for k, v in attrs.items()}
            events.append({"ev": "sample", "src": "otlp", "id": pid, "time_nanos": t0,
                           "duration_nanos": dur,
                           "parts": [{"labels": lab, "values": values, "folded": folded}]})
        return events, services


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


# ---- TLS -----------------------------------------------------------------------------------

def tls_context(cert, key, client_ca):
    """The server side of --tls-cert/--tls-key (PEM); with client_ca, a client must present a
    certificate that CA signed, else the handshake fails (mTLS)."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
        if client_ca:
            ctx.load_verify_locations(cafile=client_ca)
            ctx.verify_mode = ssl.CERT_REQUIRED
    except (OSError, ssl.SSLError) as e:
        die(f"TLS: {e}")
    return ctx


class TLSServer(Server):
    """The HTTP server over TLS. The handshake runs in the request's thread, so a client that
    stalls or fails it does not hold up accept(); each failure is logged and counted by
    OpenSSL's reason ("TLSV1_ALERT_UNKNOWN_CA": the client does not trust our certificate,
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": mTLS without a client certificate)."""
    tls = None  # the ssl.SSLContext, set before the server is made
    handshake_timeout = 10

    def __init__(self, *a, **kw):
        self.tls_lock = threading.Lock()
        self.tls_counts = {"handshakes": 0, "failures": {}, "client_certs": {}}
        super().__init__(*a, **kw)

    def get_request(self):
        sock, addr = self.socket.accept()
        return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def finish_request(self, request, client_address):
        import ssl
        try:
            request.settimeout(self.handshake_timeout)
            request.do_handshake()
            request.settimeout(None)
        except (ssl.SSLError, OSError) as e:
            reason = getattr(e, "reason", None) or type(e).__name__
            with self.tls_lock:
                _add(self.tls_counts["failures"], {reason: 1})
            log(f"tls: {client_address[0]}: handshake failed: {e}")
            return
        peer = request.getpeercert() or {}
        cn = next((v for rdn in peer.get("subject", ()) for k, v in rdn if k == "commonName"),
                  "")
        with self.tls_lock:
            self.tls_counts["handshakes"] += 1
            if peer:
                _add(self.tls_counts["client_certs"], {cn: 1})
        super().finish_request(request, client_address)

    def tls_stats(self):
        with self.tls_lock:
            return json.loads(json.dumps(self.tls_counts))


def parse_addr(s):
    host, sep, port = s.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        die(f"bad address {s!r}: expected ADDR:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


def serve_grpc(app, addr):
    """OTLP's gRPC Export on a second port, sharing the accounting (faults: HTTP only)."""
    import grpc
    from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2_grpc
    from concurrent import futures

    class Svc(profiles_service_pb2_grpc.ProfilesServiceServicer):
        def Export(self, request, context):
            peer = context.peer()
            arrived = time.time_ns()
            base = {"ev": "request", "src": "otlp", "peer": peer, "tenant": ""}
            try:
                parts = otlp_parts(request, time.time_ns(), app.older_ns, app.newer_ns)
            except Reject as r:
                app.acc.record([dict(base, result="rejected", reason=r.reason)])
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, r.msg)
            events = [{"ev": "sample", "src": "otlp", "id": pid, "time_nanos": t0,
                       "duration_nanos": dur, "arrival_ns": arrived,
                       "parts": [{"labels": {k: str(v) for k, v in attrs.items()},
                                  "values": values, "folded": folded}]}
                      for attrs, pid, values, folded, (t0, dur) in parts]
            app.acc.record(events + [dict(base, result="accepted",
                                          bytes=request.ByteSize())])
            return app.otlp_service.ExportProfilesServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    profiles_service_pb2_grpc.add_ProfilesServiceServicer_to_server(Svc(), server)
    host, port = addr
    bound = server.add_insecure_port(f"{'[' + host + ']' if ':' in host else host}:{port}")
    if not bound:
        die(f"gRPC: cannot listen on {host}:{port}")
    server.start()
    return server, bound


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=FAULTS)
    ap.add_argument("--listen", default="127.0.0.1:0", help="ADDR:PORT (port 0: any free)")
    ap.add_argument("--grpc-listen", help="also serve OTLP gRPC Export on ADDR:PORT")
    ap.add_argument("--state", help="append accepted data to FILE (JSON lines), replay at start")
    ap.add_argument("--proto-dir", default=os.path.join(ROOT, "proto"))
    ap.add_argument("--pprof", help="the pprof command (default: the one `go tool pprof` runs)")
    ap.add_argument("--reject-older-than", type=float, default=3600, metavar="SECONDS",
                    help="Pyroscope's ingestion window (0: off; default 1 h)")
    ap.add_argument("--reject-newer-than", type=float, default=600, metavar="SECONDS",
                    help="how far ahead a profile may be (0: off; default 10 min)")
    ap.add_argument("--max-request", type=int, default=64 << 20, metavar="BYTES")
    ap.add_argument("--bearer", help="require Authorization: Bearer TOKEN (else 401)")
    ap.add_argument("--basic", metavar="USER:PASSWORD", help="require basic auth (else 401)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no line per request on stderr")
    ap.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate (PEM)")
    ap.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM)")
    ap.add_argument("--client-ca", metavar="FILE",
                    help="require client certificates signed by this CA (PEM; needs --tls-cert)")
    args = ap.parse_args()
    if bool(args.tls_cert) != bool(args.tls_key):
        die("--tls-cert and --tls-key go together")
    if args.client_ca and not args.tls_cert:
        die("--client-ca needs --tls-cert and --tls-key")

    tmp = tempfile.mkdtemp(prefix="profd-receiver-")
    try:
        run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args, tmp):
    from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2

    class App:
        pass
    app = App()
    app.push, app.profile = load_protos(args.proto_dir, os.path.join(tmp, "gen"))
    app.otlp_service = profiles_service_pb2
    app.pprof = PprofCheck(PprofCheck.find(args.pprof), tmp)
    app.acc = Accounting(args.state)
    app.faults = Faults()
    app.huge_lock = threading.Lock()
    app.huge_bytes = app.huge_replies = 0
    app.older_ns = int(args.reject_older_than * 1e9)
    app.newer_ns = int(args.reject_newer_than * 1e9)
    app.max_request = args.max_request
    app.max_profile = args.max_request
    app.quiet = args.quiet
    app.auth = None
    if args.bearer:
        app.auth = f"Bearer {args.bearer}"
    elif args.basic:
        app.auth = "Basic " + base64.b64encode(args.basic.encode()).decode()
    Handler.app = app

    host, port = parse_addr(args.listen)
    Server.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server_class = Server
    if args.tls_cert:
        TLSServer.tls = tls_context(args.tls_cert, args.tls_key, args.client_ca)
        server_class = TLSServer
    try:
        httpd = server_class((host, port), Handler)
    except OSError as e:
        die(f"cannot listen on {host}:{port}: {e.strerror}")
    h, p = httpd.server_address[:2]
    print(f"listening {'[' + h + ']' if ':' in h else h}:{p}", flush=True)
    grpc_server = None
    if args.grpc_listen:
        grpc_server, gport = serve_grpc(app, parse_addr(args.grpc_listen))
        print(f"grpc {parse_addr(args.grpc_listen)[0]}:{gport}", flush=True)

    import signal
    signal.signal(signal.SIGTERM, lambda *a: threading.Thread(target=httpd.shutdown).start())
    try:
        httpd.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    if grpc_server:
        grpc_server.stop(0)
    httpd.server_close()


if __name__ == "__main__":
    main()
