#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""
The stand-in receiver's own test, before profd is tested against it: PushRequest and OTLP
bodies built with the generated and PyPI classes are posted to a real receiver process, and its
accounting, Pyroscope's validation rules, the hand-off to `go tool pprof` and every fault mode
are checked. Exits 77 (skip) when its Python environment cannot be made here.
"""
import errno
import gzip
import http.client
import json
import os
import shutil
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import receiver_client as rc  # noqa: E402


def skip(why):
    if os.environ.get("CI") == "true":
        print(f"FAIL: would skip in CI: {why}", file=sys.stderr)
        sys.exit(1)
    print(f"SKIP: {why}", file=sys.stderr)
    sys.exit(77)


try:
    import grpc_tools  # noqa: F401
    from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as svc
except ImportError:
    if os.environ.get("PROFD_RECEIVER_REEXEC"):
        skip("the test-venv python lacks grpcio-tools or opentelemetry-proto")
    try:
        py = rc.venv_python()
    except rc.Unavailable as e:
        skip(str(e))
    os.environ["PROFD_RECEIVER_REEXEC"] = "1"
    os.execv(py, [py, os.path.abspath(__file__), *sys.argv[1:]])

import receiver  # noqa: E402

FAILS = 0
f_ok = 0


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def check(cond, what):
    global FAILS
    if cond:
        log(f"ok: {what}")
    else:
        FAILS += 1
        log(f"FAIL: {what}")


def check_eq(got, want, what):
    check(got == want, f"{what}: got {got!r}, want {want!r}" if got != want else what)


if not shutil.which("go"):
    skip("go (golang-go) is not installed: the receiver hands every pprof to `go tool pprof`")

TMP = tempfile.mkdtemp(prefix="test-receiver-")
push, prof = receiver.load_protos(os.path.join(rc.ROOT, "proto"), os.path.join(TMP, "gen"))
NOW = time.time_ns()

# ---- bodies --------------------------------------------------------------------------------


def make_pprof(stacks, types=(("samples", "count"), ("cpu", "nanoseconds")), time_ns=None,
               sample_labels=None, string0="", zipped=True):
    """A pprof of stacks {("root", ..., "leaf"): (v1, v2, ...)}, one location and function per
    name. sample_labels: {stack: {key: value}}."""
    p = prof.Profile()
    strings = {string0: 0}
    p.string_table.append(string0)

    def s(x):
        if x not in strings:
            strings[x] = len(p.string_table)
            p.string_table.append(x)
        return strings[x]
    for t, u in types:
        vt = p.sample_type.add()
        vt.type, vt.unit = s(t), s(u)
    ids = {}
    for stack, values in stacks.items():
        for name in stack:
            if name not in ids:
                ids[name] = len(ids) + 1
                f = p.function.add()
                f.id, f.name = ids[name], s(name)
                loc = p.location.add()
                loc.id = ids[name]
                loc.line.add().function_id = ids[name]
        smp = p.sample.add()
        smp.location_id.extend(ids[n] for n in reversed(stack))
        smp.value.extend(values)
        for k, v in (sample_labels or {}).get(stack, {}).items():
            lab = smp.label.add()
            lab.key, lab.str = s(k), s(v)
    if types:  # as profd's pprof does; `pprof -raw` marks it "[dflt]"
        p.default_sample_type = s(types[-1][0])
    p.time_nanos = NOW if time_ns is None else time_ns
    p.duration_nanos = 10**9
    data = p.SerializeToString()
    return gzip.compress(data) if zipped else data


def push_body(series):
    """series: [(labels dict, [(raw_profile, ID)])] -> a serialized PushRequest."""
    req = push.PushRequest()
    for labels, samples in series:
        sr = req.series.add()
        for k, v in labels.items():
            lp = sr.labels.add()
            lp.name, lp.value = k, v
        for raw, sid in samples:
            smp = sr.samples.add()
            smp.raw_profile, smp.ID = raw, sid
    return req.SerializeToString()


def cpu(service, **extra):
    return {"__name__": "process_cpu", "service_name": service, **extra}


def otlp_body(resources, string0=""):
    """resources: [(attributes dict, [(type, unit, {stack: value}, profile_id bytes)])]."""
    req = svc.ExportProfilesServiceRequest()
    d = req.dictionary
    strings = {}

    def s(x):
        if x not in strings:
            strings[x] = len(d.string_table)
            d.string_table.append(x)
        return strings[x]
    s(string0)
    d.mapping_table.add()
    d.location_table.add()
    d.function_table.add()
    d.link_table.add()
    d.attribute_table.add()
    d.stack_table.add()
    funcs, stacks = {}, {}
    for attrs, profiles in resources:
        rp = req.resource_profiles.add()
        for k, v in attrs.items():
            kv = rp.resource.attributes.add()
            kv.key = k
            if isinstance(v, int):
                kv.value.int_value = v
            else:
                kv.value.string_value = v
        sp = rp.scope_profiles.add()
        sp.scope.name = "profd"
        for t, u, samples, pid in profiles:
            pr = sp.profiles.add()
            pr.sample_type.type_strindex, pr.sample_type.unit_strindex = s(t), s(u)
            pr.time_unix_nano, pr.duration_nano = NOW, 10**9
            if pid:
                pr.profile_id = pid
            for stack, value in samples.items():
                if stack not in stacks:
                    locs = []
                    for name in reversed(stack):  # leaf first
                        if name not in funcs:
                            funcs[name] = len(d.function_table)
                            d.function_table.add().name_strindex = s(name)
                            loc = d.location_table.add()
                            loc.lines.add().function_index = funcs[name]
                        locs.append(funcs[name])
                    stacks[stack] = len(d.stack_table)
                    d.stack_table.add().location_indices.extend(locs)
                smp = pr.samples.add()
                smp.stack_index = stacks[stack]
                smp.values.append(value)
    return req


def post(r, path, body, ctype="application/proto", headers=None, conn=None):
    """(status, headers dict, body) of one POST; conn: a kept-alive HTTPConnection."""
    c = conn or http.client.HTTPConnection(r.host, r.port, timeout=30)
    c.request("POST", path, body=body, headers={"Content-Type": ctype, **(headers or {})})
    resp = c.getresponse()
    data = resp.read()
    if not conn:
        c.close()
    return resp.status, dict(resp.getheaders()), data


def push_req(r, body, **kw):
    return post(r, receiver.PUSH_PATH, body, **kw)


def otlp_req(r, req, zipped=True, **kw):
    data = req.SerializeToString()
    hdrs = {}
    if zipped:
        data = gzip.compress(data)
        hdrs["Content-Encoding"] = "gzip"
    return post(r, receiver.OTLP_PATH, data, ctype="application/x-protobuf", headers=hdrs, **kw)


def connect_error(data):
    try:
        return json.loads(data)
    except ValueError:
        return {}


def raw_post(r, path, body, extra="", send_body=True):
    """A hand-made request on a raw socket; returns the socket."""
    s = socket.create_connection((r.host, r.port), timeout=10)
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/proto\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode()
    s.sendall(head + (body if send_body else b""))
    return s


# ---- the test ------------------------------------------------------------------------------

state = os.path.join(TMP, "state.jsonl")
r = rc.Receiver("--reject-older-than", "3600", "--grpc-listen", "127.0.0.1:0", state=state,
                logpath=os.path.join(TMP, "receiver.log"))
try:
    r.start()
    log(f"receiver at {r.url}")

    # accounting: two services, one of them with two profiles; values known from the input
    a1 = {("main", "run", "work_a", "spin_a"): (30, 300), ("main", "run", "work_b"): (10, 100)}
    a2 = {("main", "run", "work_a", "spin_a"): (6, 60)}
    b1 = {("start", "loop"): (7, 70)}
    body = push_body([(cpu("alpha", host="n1"), [(make_pprof(a1), "id-a1"),
                                                  (make_pprof(a2), "id-a2")]),
                      (cpu("beta", host="n1"), [(make_pprof(b1), "id-b1")])])
    t_sent = time.time_ns()
    st, hd, data = push_req(r, body, headers={"X-Scope-OrgID": "tenant1"})
    t_answered = time.time_ns()
    check_eq(st, 200, "a valid PushRequest is accepted")
    arr = r._req("GET", "/_stats?arrivals=1")["pyroscope"]["arrivals"]
    check_eq([x[:2] for x in arr], [[NOW, 10**9]] * 3,
             "arrivals: time_nanos and duration_nanos of each of the 3 profiles")
    check(all(t_sent <= x[2] <= t_answered for x in arr),
          "arrivals: each arrival time lies between the request and its answer")
    check("arrivals" not in r.stats()["pyroscope"], "plain /_stats leaves the arrivals out")
    check_eq(hd.get("Content-Type"), "application/proto", "the reply is a Connect proto reply")
    s = r.stats()
    alpha = rc.series_of(s, service_name="alpha")
    check_eq([x["labels"] for x in alpha],
             [{"__name__": "process_cpu", "host": "n1", "service_name": "alpha"}],
             "alpha's one series carries its labels and __name__")
    check_eq(alpha[0]["values"], {"samples/count": 46, "cpu/nanoseconds": 460},
             "alpha's values are the sums of its two profiles")
    check_eq((alpha[0]["time_first_ns"], alpha[0]["time_last_end_ns"]), (NOW, NOW + 10**9),
             "alpha's time range: time_nanos to time_nanos + duration_nanos")
    check_eq(rc.total_of(rc.series_of(s, service_name="beta"), "samples/count"), 7,
             "beta's samples")
    check_eq(s["pyroscope"]["totals"], {"samples/count": 53, "cpu/nanoseconds": 530},
             "totals over all series")
    check_eq(s["pyroscope"]["ids"], ["id-a1", "id-a2", "id-b1"], "the RawSample IDs seen")
    check_eq(s["pyroscope"]["requests"]["accepted"], 1, "one request accepted")
    check_eq(s["pyroscope"]["tenants"], {"tenant1": 1}, "X-Scope-OrgID counted")
    check_eq(r.profiles("alpha")["samples/count"],
             {"main;run;work_a;spin_a": 36, "main;run;work_b": 10},
             "alpha's merged folded stacks, root first")

    # Connect JSON, and a gzip-encoded body
    from google.protobuf import json_format
    jreq = push.PushRequest()
    jreq.ParseFromString(push_body([(cpu("gamma"), [(make_pprof(b1), "id-g1")])]))
    st, hd, data = push_req(r, json_format.MessageToJson(jreq).encode(),
                            ctype="application/json")
    check_eq((st, data), (200, b"{}"), "a Connect JSON PushRequest is accepted")
    st, _, _ = push_req(r, gzip.compress(push_body([(cpu("gamma"), [(make_pprof(b1), "id-g2")])])),
                        headers={"Content-Encoding": "gzip"})
    check_eq(st, 200, "a gzip-encoded PushRequest is accepted")
    check_eq(r.profiles("gamma"), {"samples/count": {"start;loop": 14},
                                   "cpu/nanoseconds": {"start;loop": 140}},
             "gamma's profile from both encodings")

    # pprof sample labels become series labels, as in Pyroscope's pprof split
    st, _, _ = push_req(r, push_body([(cpu("delta"), [(make_pprof(
        a1, sample_labels={("main", "run", "work_b"): {"thread": "io"}}), "id-d1")])]))
    check_eq(st, 200, "a pprof with sample labels is accepted")
    s = r.stats()
    check_eq(sorted((x["labels"].get("thread", ""), x["values"]["samples/count"])
                    for x in rc.series_of(s, service_name="delta")),
             [("", 30), ("io", 10)], "a sample label splits the series")

    # at-least-once: a RawSample sent again counts as a duplicate
    st, _, _ = push_req(r, push_body([(cpu("alpha", host="n1"), [(make_pprof(a2), "id-a2")])]))
    check_eq(st, 200, "a resent RawSample is accepted")
    s = r.stats()
    alpha = rc.series_of(s, service_name="alpha")[0]
    check_eq((alpha["values"]["samples/count"], alpha["unique_values"]["samples/count"],
              s["pyroscope"]["duplicate_ids"]), (52, 46, {"id-a2": 1}),
             "the duplicate is in values, not in unique_values, and named")
    check_eq(r.profiles("alpha")["samples/count"]["main;run;work_a;spin_a"], 36,
             "profiles count each ID once")

    # keep-alive: three requests on one connection
    conn = http.client.HTTPConnection(r.host, r.port, timeout=30)
    socks = []
    for i in range(3):
        st, hd, _ = push_req(r, push_body([(cpu("ka"), [(make_pprof(b1), f"id-ka{i}")])]),
                             conn=conn)
        socks.append((st, conn.sock is not None and conn.sock.fileno()))
    conn.close()
    check(all(x == socks[0] and x[0] == 200 for x in socks), f"keep-alive: {socks}")

    # Pyroscope's validation rules: each a 400 with Connect's JSON error; nothing counted
    before = r.stats()["pyroscope"]["totals"]
    many = {f"l{i:02d}": "v" for i in range(29)}
    cases = [
        ("missing service_name", [({"__name__": "process_cpu"}, [(make_pprof(b1), "x1")])],
         "missing_labels"),
        ("31 labels", [(cpu("v", **many), [(make_pprof(b1), "x2")])],
         "max_label_names_per_series"),
        ("a bad label name", [(cpu("v", **{"a-b": "1"}), [(make_pprof(b1), "x3")])],
         "invalid_labels"),
        ("no __name__", [({"service_name": "v"}, [(make_pprof(b1), "x4")])], "invalid_labels"),
        ("a profile 2 h old", [(cpu("v"), [(make_pprof(b1, time_ns=NOW - 7200 * 10**9),
                                            "x5")])], "not_in_ingestion_window"),
        ("a profile 20 min ahead", [(cpu("v"), [(make_pprof(b1, time_ns=NOW + 1200 * 10**9),
                                                 "x6")])], "not_in_ingestion_window"),
        ("no sample types", [(cpu("v"), [(make_pprof({("a",): ()}, types=()), "x7")])],
         "malformed_profile"),
        ("a sample type with -", [(cpu("v"), [(make_pprof({("a",): (1,)},
                                                          types=(("cpu-time", "ns"),)), "x8")])],
         "malformed_profile"),
        ("a cut gzip stream", [(cpu("v"), [(make_pprof(b1)[:-12], "x9")])],
         "malformed_profile"),
        # only the reference parser checks this one: the hand-off to go tool pprof
        ("string_table[0] not empty", [(cpu("v"), [(make_pprof(b1, string0="junk"), "x10")])],
         "pprof_rejected"),
        ("one bad series among good ones", [(cpu("ok"), [(make_pprof(b1), "x11")]),
                                            ({"__name__": "process_cpu"},
                                             [(make_pprof(b1), "x12")])], "missing_labels"),
    ]
    for what, series, reason in cases:
        st, hd, data = push_req(r, push_body(series))
        err = connect_error(data)
        check(st == 400 and err.get("code") == "invalid_argument" and err.get("message"),
              f"{what}: 400 invalid_argument ({st} {data[:160]!r})")
        rej = r.stats()["pyroscope"]["requests"]["rejected"]
        check(rej.get(reason, 0) >= 1, f"{what}: counted as {reason} ({rej})")
    st, _, _ = push_req(r, b"\xff\xff\xff")
    check_eq(st, 400, "an undecodable body is a 400")
    st, _, _ = push_req(r, push_body([(cpu("v"), [(make_pprof(b1), "x13")])]),
                        ctype="text/plain")
    check_eq(st, 415, "a wrong Content-Type is a 415")
    after = r.stats()
    check_eq(after["pyroscope"]["totals"], before, "rejected requests add nothing")
    check("ok" not in {x["labels"]["service_name"] for x in after["pyroscope"]["series"]},
          "a request with one bad series is refused whole")

    # OTLP: resources, attributes, sample types; gzip and plain
    o1 = {("main", "run", "work_a"): 9, ("main", "run", "work_b"): 3}
    oreq = otlp_body([({"service.name": "alpha", "host.name": "n1", "process.pid": 42},
                       [("samples", "count", o1, b"\x01" * 16)]),
                      ({"service.name": "beta", "host.name": "n2"},
                       [("samples", "count", {("x", "y"): 5}, b""),
                        ("cpu", "nanoseconds", {("x", "y"): 50}, b"")])])
    st, hd, data = otlp_req(r, oreq)
    check_eq((st, hd.get("Content-Type")), (200, "application/x-protobuf"),
             "an OTLP gzip request is accepted")
    resp = svc.ExportProfilesServiceResponse()
    resp.ParseFromString(data)
    check(not resp.HasField("partial_success"),
          "the reply is an empty ExportProfilesServiceResponse")
    st, _, _ = otlp_req(r, otlp_body([({"service.name": "alpha", "host.name": "n1",
                                        "process.pid": 42},
                                       [("samples", "count", o1, b"\x01" * 16)])]), zipped=False)
    check_eq(st, 200, "an OTLP plain protobuf request is accepted")
    s = r.stats()
    oa = rc.series_of(s, "otlp", **{"service.name": "alpha"})
    check_eq([x["labels"] for x in oa],
             [{"host.name": "n1", "process.pid": "42", "service.name": "alpha"}],
             "OTLP series keyed by resource attributes")
    check_eq((oa[0]["values"], oa[0]["unique_values"], s["otlp"]["duplicates"]),
             ({"samples/count": 24}, {"samples/count": 12}, 1),
             "OTLP values summed; a repeated profile_id is a duplicate")
    check_eq(rc.series_of(s, "otlp", **{"service.name": "beta"})[0]["values"],
             {"samples/count": 5, "cpu/nanoseconds": 50}, "one OTLP Profile per sample type")
    check_eq(r.profiles("alpha", source="otlp"),
             {"samples/count": {"main;run;work_a": 9, "main;run;work_b": 3}},
             "OTLP folded stacks, root first")
    bad = otlp_body([({"service.name": "z"}, [("samples", "count", {("a",): 1}, b"")])])
    bad.resource_profiles[0].scope_profiles[0].profiles[0].samples[0].stack_index = 99
    st, hd, data = otlp_req(r, bad)
    check(st == 400 and data.startswith(b"\x08\x03"),
          f"an OTLP stack index out of range: 400 with a Status INVALID_ARGUMENT ({st} {data!r})")
    old = otlp_body([({"service.name": "z"}, [("samples", "count", {("a",): 1}, b"")])])
    old.resource_profiles[0].scope_profiles[0].profiles[0].time_unix_nano = NOW - 7200 * 10**9
    st, _, _ = otlp_req(r, old)
    check_eq(st, 400, "an OTLP profile 2 h old is refused")
    check_eq(rc.series_of(r.stats(), "otlp", **{"service.name": "z"}), [],
             "refused OTLP requests add nothing")

    # OTLP over gRPC, on the second port, into the same accounting
    import grpc
    from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2_grpc
    with grpc.insecure_channel(r.grpc) as ch:
        stub = profiles_service_pb2_grpc.ProfilesServiceStub(ch)
        stub.Export(otlp_body([({"service.name": "viagrpc"},
                                [("samples", "count", {("g", "h"): 4}, b"")])]), timeout=10)
        try:
            stub.Export(bad, timeout=10)
            code = None
        except grpc.RpcError as e:
            code = e.code()
    check_eq(rc.series_of(r.stats(), "otlp", **{"service.name": "viagrpc"})[0]["values"],
             {"samples/count": 4}, "an OTLP gRPC Export is counted")
    check_eq(code, grpc.StatusCode.INVALID_ARGUMENT, "a bad gRPC Export: INVALID_ARGUMENT")

    # faults -------------------------------------------------------------------------------
    # f_ok: samples of service f in requests answered 200

    def one(i, service="f"):
        return push_body([(cpu(service), [(make_pprof(b1), f"id-{service}{i}")])])

    def pf(body, samples=7):
        global f_ok
        got = push_req(r, body)
        if got[0] == 200:
            f_ok += samples
        return got

    r.fault(status=503, retry_after=2, count=3)
    got = [pf(one(i)) for i in range(4)]
    check_eq([g[0] for g in got], [503, 503, 503, 200], "503 for the next 3 requests, then 200")
    check(all(g[1].get("Retry-After") == "2" and connect_error(g[2]).get("code") == "unavailable"
              for g in got[:3]), "503s carry Retry-After: 2 and Connect's unavailable")
    r.fault(status=429)
    check_eq([pf(one(i))[0] for i in range(4, 6)], [429, 200], "one 429, then 200")
    r.fault(status=401)
    st, _, data = pf(one(6))
    check_eq((st, connect_error(data).get("code")), (401, "unauthenticated"), "a 401")
    check_eq(pf(one(6))[0], 200, "the same request accepted after the 401")
    check_eq(r.stats()["pyroscope"]["requests"]["faulted"], {"503": 3, "429": 1, "401": 1},
             "faults counted by status")
    check_eq(r.stats()["faults"], [], "counted faults are used up")

    big = push_body([(cpu("f"), [(make_pprof({(f"fn{i}",): (1, 1) for i in range(400)}),
                                  "id-big")])])
    small = one(7)
    r.fault(status=413, max_body=len(big) - 1)
    check_eq([pf(big, 400)[0], pf(small)[0], pf(big, 400)[0]], [413, 200, 413],
             f"413 for bodies above {len(big) - 1} bytes (every time), smaller ones accepted")
    sk = raw_post(r, receiver.PUSH_PATH, big, extra="Expect: 100-continue\r\n", send_body=False)
    head = sk.recv(4096)
    sk.close()
    check(head.startswith(b"HTTP/1.1 413"),
          f"with Expect: 100-continue the 413 comes before the body ({head[:20]!r})")
    r.clear_faults()
    check_eq(pf(big, 400)[0], 200, "cleared: the big body is accepted")

    r.fault(reset=True, count=2)
    outcomes = []
    for i in range(3):
        sk = raw_post(r, receiver.PUSH_PATH, one(10 + i))
        try:
            reply = sk.recv(4096)
            outcomes.append(reply[:12])
            if reply.startswith(b"HTTP/1.1 200"):
                f_ok += 7
        except ConnectionResetError as e:
            outcomes.append(errno.errorcode[e.errno])
        sk.close()
    check_eq(outcomes, ["ECONNRESET", "ECONNRESET", b"HTTP/1.1 200"],
             "two connections reset mid-request (RST), then 200")
    check_eq(r.stats()["pyroscope"]["requests"]["faulted"].get("reset"), 2, "resets counted")
    check_eq(rc.series_of(r.stats(), service_name="f")[0]["values"]["samples/count"], f_ok,
             f"service f holds exactly the {f_ok} samples of the requests answered 200")

    r.fault(status=400, match_service="bad")
    bad_body = push_body([(cpu("fine"), [(make_pprof(b1), "m1")]),
                          (cpu("bad"), [(make_pprof(b1), "m2")])])
    check_eq([push_req(r, bad_body)[0], push_req(r, bad_body)[0], push_req(r, one(20))[0]],
             [400, 400, 200], "a request carrying service 'bad' is refused every time")
    r.clear_faults()
    check_eq(push_req(r, bad_body)[0], 200, "cleared: the 'bad' request is accepted")

    r.fault(status=503, endpoint="otlp")
    check_eq(push_req(r, one(21))[0], 200, "an OTLP-only fault leaves Pyroscope alone")
    ob = otlp_body([({"service.name": "f"}, [("samples", "count", {("a",): 1}, b"")])])
    st, hd, data = otlp_req(r, ob)
    check(st == 503 and data.startswith(b"\x08\x0e"), f"OTLP 503 with Status UNAVAILABLE ({st})")
    r.fault(delay=0.5)
    t0 = time.time()
    st, _, _ = push_req(r, one(22))
    check(st == 200 and time.time() - t0 >= 0.5, "a delayed answer")
    for spec in ({"status": 200}, {"count": 2}, {"status": 503, "bogus": 1},
                 {"match_service": "x"}):
        try:
            r.fault(**spec)
            check(False, f"fault {spec} refused")
        except RuntimeError as e:
            check("HTTP 400" in str(e), f"fault {spec} refused")

    # a receiver that wants a bearer token
    with rc.Receiver("--bearer", "s3cret", "-q", logpath=os.path.join(TMP, "auth.log")) as ra:
        codes = [push_req(ra, one(30), headers=h)[0] for h in
                 ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Bearer s3cret"})]
        check_eq(codes, [401, 401, 200], "--bearer: 401 without the token, 200 with it")
        check_eq(ra.stats()["pyroscope"]["requests"]["rejected"], {"unauthenticated": 2},
                 "refused for auth, counted")

    # state: killed and started again on the same file and port, it keeps counting
    snap = r.stats()
    snap_alpha = r.profiles("alpha")
    port = r.port
    r.kill()
    r.start()
    check_eq(r.port, port, "started again on the same port")
    again = r.stats()
    for src in ("pyroscope", "otlp"):
        for k in ("series", "totals", "ids", "requests", "duplicate_ids"):
            check_eq(again[src][k], snap[src][k], f"{src} {k} survive a SIGKILL")
    check_eq(r.profiles("alpha"), snap_alpha, "profiles survive")
    st, _, _ = push_req(r, push_body([(cpu("alpha", host="n1"), [(make_pprof(a2), "id-a2")])]))
    s = r.stats()
    check_eq((st, s["pyroscope"]["duplicate_ids"].get("id-a2")), (200, 2),
             "a duplicate across the restart is seen")
    r.reset()
    check_eq((r.stats()["pyroscope"]["totals"], os.path.getsize(state)), ({}, 0),
             "/_reset empties the accounting and the state file")
finally:
    r.stop()
    if FAILS:
        log("---- receiver log ----\n" + r.log_text()[-3000:])
    shutil.rmtree(TMP, ignore_errors=True)

if FAILS:
    log(f"FAIL: {FAILS} checks failed")
    sys.exit(1)
log("PASS")
