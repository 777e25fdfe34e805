#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
# Every format carries the same totals: one dump of the burn fixture (taken after it exited, so
# the data no longer moves) in folded, JSON, speedscope and pprof agrees on the sample count and
# on the stacks. The pprof file is read by the real `go tool pprof` (-top, -traces, -raw) and by
# Python's protobuf package decoding against proto/profile.proto; the speedscope file is checked
# against speedscope's published schema.
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from profd_e2e import *

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCHEMA = os.path.join(SRC, "tests", "fixtures", "speedscope", "file-format-schema.json")
CHAIN_A = ["main", "run", "work_a", "spin_a"]
CHAIN_B = ["main", "run", "work_b", "spin_b"]
missing = []


def python_with(*modules):
    """An interpreter that imports modules: this one, or the distribution's (where Debian's
    python3-protobuf and python3-jsonschema live); None if neither does."""
    probe = "import " + ", ".join(modules)
    for py in (sys.executable, "/usr/bin/python3"):
        if py and os.path.exists(py) and subprocess.run(
                [py, "-c", probe], capture_output=True).returncode == 0:
            return py
    return None


def run_py(py, code, *args):
    r = subprocess.run([py, "-c", code, *args], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail(f"helper failed ({r.returncode}): {r.stderr[-2000:]}")
    return r.stdout


def display_name(f):
    """profctl's display name of a JSON frame (lib/profile/profile.h spells out the rules)."""
    name = f["name"] or "[unknown]"
    base = lambda p: p.rsplit("/", 1)[-1]
    if f["kind"] == "python":
        if f["file"] and f["line"]:
            name += f" ({base(f['file'])}:{f['line']})"
        elif f["file"]:
            name += f" ({base(f['file'])})"
    elif name == "[unknown]":
        if f["module"]:
            name += f" ({base(f['module'])}+{f['address']})"
        elif f["address"] is not None:
            name += f" ({f['address']})"
    if f["kind"] == "kernel":
        name += "_[k]"
    elif f["kind"] == "gpu":
        name += "_[g]"
    return name


def fold(frames_root_first):
    return ";".join(n.replace(";", "_") for n in frames_root_first)


def add(d, key, n):
    d[key] = d.get(key, 0) + n


def stacks_from_json(doc):
    check(doc["value_types"][0] == {"type": "samples", "unit": "count"},
          "json: the first value type is samples/count")
    names = [display_name(f) for f in doc["frames"]]
    out = {}
    for s in doc["samples"]:
        frames = doc["stacks"][s["stack"]]
        add(out, fold([names[i] for i in reversed(frames)] or ["[no stack]"]), s["values"][0])
    return out


def stacks_from_speedscope(doc):
    names = [f["name"] for f in doc["shared"]["frames"]]
    out = {}
    for prof in doc["profiles"]:
        check(prof["type"] == "sampled" and len(prof["samples"]) == len(prof["weights"]),
              f"speedscope: profile {prof['name']!r} is sampled with one weight per sample")
        check(prof["endValue"] == sum(prof["weights"]),
              f"speedscope: {prof['name']!r} ends at the sum of its weights")
        for stack, w in zip(prof["samples"], prof["weights"]):
            add(out, fold(names[i] for i in stack), w)
    return out


def normalize(folded):
    """What survives in pprof: plain kernel names, Python names without the file, no name for
    frames without a symbol."""
    def one(n):
        if n.startswith("[unknown]"):
            return "?"
        n = re.sub(r"_\[[kg]\]$", "", n)
        return re.sub(r" \([^()]*\)$", "", n)
    out = {}
    for s, c in folded.items():
        add(out, ";".join(one(n) for n in s.split(";")), c)
    return out


# Decodes the pprof file with Python's protobuf package and the bindings protoc made from
# proto/profile.proto; prints what it found as JSON.
PPROF_READER = r"""
import gzip, json, sys
sys.path.insert(0, sys.argv[1])
import profile_pb2
raw = open(sys.argv[2], "rb").read()
assert raw[:2] == b"\x1f\x8b", "not gzip"
p = profile_pb2.Profile()
p.ParseFromString(gzip.decompress(raw))
s = p.string_table
fn = {f.id: f for f in p.function}
loc = {l.id: l for l in p.location}
maps = {m.id: m for m in p.mapping}
types = [s[t.type] + "/" + s[t.unit] for t in p.sample_type]
stacks, labels = {}, set()
for smp in p.sample:
    names = []
    for lid in reversed(smp.location_id):
        l = loc[lid]
        names.append(s[fn[l.line[0].function_id].name] if l.line else "?")
    key = ";".join(n.replace(";", "_") for n in names) or "[no stack]"
    stacks[key] = stacks.get(key, 0) + smp.value[types.index("samples/count")]
    for lb in smp.label:
        labels.add(s[lb.key])
    assert len(smp.value) == len(types)
print(json.dumps({
    "string0": s[0], "types": types, "period_type": s[p.period_type.type] + "/" +
    s[p.period_type.unit], "period": p.period, "time_nanos": p.time_nanos,
    "duration_nanos": p.duration_nanos, "default": s[p.default_sample_type],
    "mappings": [{"file": s[m.filename], "build_id": s[m.build_id],
                  "has_functions": m.has_functions} for m in p.mapping],
    "locations_in_range": all(l.mapping_id == 0 or maps[l.mapping_id].memory_start <=
                              l.address < maps[l.mapping_id].memory_limit for l in p.location),
    "cpu_ns": sum(x.value[types.index("cpu/nanoseconds")] for x in p.sample),
    "stacks": stacks, "labels": sorted(labels)}))
"""

SCHEMA_CHECK = r"""
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
doc = json.load(open(sys.argv[2]))
jsonschema.validate(doc, schema)
# The schema itself must be well formed, or the validation above proves little.
jsonschema.validators.validator_for(schema).check_schema(schema)
print("valid")
"""


def go_pprof(tmp, *args):
    env = dict(os.environ, HOME=tmp, GOCACHE=os.path.join(tmp, "gocache"),
               PPROF_TMPDIR=tmp, PPROF_BINARY_PATH=os.path.join(tmp, "nobin"), GOFLAGS="",
               GOPROXY="off", GOTOOLCHAIN="local")
    r = subprocess.run(["go", "tool", "pprof", *args], capture_output=True, text=True,
                       env=env, timeout=120)
    if r.returncode != 0:
        fail(f"go tool pprof {' '.join(args)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r


def parse_traces(text):
    """-traces: blocks of 'COUNT leaf' then callers, one per line; {root-first: count}."""
    out = {}
    for block in re.split(r"^-+\+-+$", text, flags=re.M)[1:]:
        lines = [l for l in block.splitlines() if l.strip()]
        frames, count = [], None
        for l in lines:
            m = re.match(r"^\s*(\d+)\s+(\S.*)$", l)
            if count is None and m:
                count = int(m.group(1))
                frames.append(m.group(2).strip())
            elif count is not None and re.match(r"^\s{5,}\S", l) and ":" not in l:
                frames.append(l.strip())
        if count is not None:
            add(out, ";".join(reversed(frames)), count)
    return out


require_root()
tmp = tempfile.mkdtemp(prefix="profd-formats-")
os.chmod(tmp, 0o755)
burn = start_fixture("burn", 4)
try:
    with Daemon("--pid", str(burn.pid), "--frequency", "499") as d:
        burn.wait(30)
        time.sleep(0.5)
        pid = str(burn.pid)
        folded = d.folded("--pid", pid)
        files = {"json": "cpu.json", "speedscope": "cpu.speedscope.json", "pprof": "cpu.pb.gz"}
        for fmt, name in files.items():
            # No --format: the suffix of -o picks it, as documented.
            r = d.ctl("dump", "flamegraph", "--pid", pid, "-o", os.path.join(tmp, name))
            check(r.returncode == 0, f"dump to {name} ({r.stderr.strip()})")
        again = d.folded("--pid", pid)
        check(again == folded, "the data did not change between the dumps")
        r = d.ctl("dump", "flamegraph", "--pid", pid, "--format", "json")
        check(r.returncode == 0, "--format json on standard output")
        # The window ends at "now", so only the time range may differ from the earlier dump.
        skew = lambda t: re.sub(r'"(start|end|realtime_offset)_ns": -?\d+', "", t)
        a, b = skew(r.stdout), skew(open(os.path.join(tmp, files["json"])).read())
        if a != b:
            import difflib
            log("".join(list(difflib.unified_diff(b.splitlines(1), a.splitlines(1)))[:40]))
        check(a == b,
              "--format json on stdout is the document -o cpu.json wrote")
finally:
    if burn.poll() is None:
        burn.kill()

n = total(folded)
chain_a = total(folded, lambda fr: has_chain(fr, CHAIN_A))
chain_b = total(folded, lambda fr: has_chain(fr, CHAIN_B))
log(f"folded: {n} samples, {len(folded)} stacks, chain a {chain_a}, chain b {chain_b}")
check(n > 200, f"enough samples at 499 Hz over ~4 s ({n})")
check(chain_a > 0.5 * n and chain_b > 0.1 * n, "both chains of the fixture are in the profile")

# JSON: the whole profile; the stacks rebuilt from it are exactly the folded ones.
with open(os.path.join(tmp, files["json"])) as f:
    doc = json.load(f)
jstacks = stacks_from_json(doc)
check(sum(jstacks.values()) == n, f"json: total {sum(jstacks.values())} == folded {n}")
check(jstacks == folded, "json: every stack and count equals folded")
check(all(s["pid"] == burn.pid for s in doc["samples"]), "json: samples carry the pid")
check(doc["end_ns"] > doc["start_ns"] >= 0 and doc["period_ns"] > 0, "json: time range, period")
check(any(p["pid"] == burn.pid and p["name"] == "burn" for p in doc["processes"]),
      "json: the process is named")

# speedscope: same stacks (root first), weights add up, valid against the published schema.
with open(os.path.join(tmp, files["speedscope"])) as f:
    ss = json.load(f)
sstacks = stacks_from_speedscope(ss)
check(sum(sstacks.values()) == n, f"speedscope: weights add up to {n}")
check(sstacks == folded, "speedscope: every stack and weight equals folded")
check(ss["exporter"].startswith("profd "), "speedscope: exporter names profd")
check(all(re.fullmatch(r".+ \(tid \d+\)", p["name"]) for p in ss["profiles"]),
      "speedscope: one profile per thread, named NAME (tid N)")
py = python_with("jsonschema")
if py:
    out = run_py(py, SCHEMA_CHECK, SCHEMA, os.path.join(tmp, files["speedscope"]))
    check(out.strip() == "valid", "speedscope: valid against speedscope's schema")
else:
    missing.append("python3-jsonschema")

# pprof, second reader: Python protobuf with bindings generated now from proto/profile.proto.
pprof_file = os.path.join(tmp, files["pprof"])
with open(pprof_file, "rb") as f:
    check(f.read(2) == b"\x1f\x8b", "pprof: the file is gzip")
py = python_with("google.protobuf")
if py and shutil.which("protoc"):
    gen = os.path.join(tmp, "gen")
    os.makedirs(gen)
    r = subprocess.run(["protoc", "--proto_path", os.path.join(SRC, "proto"),
                        "--python_out", gen, os.path.join(SRC, "proto", "profile.proto")],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"protoc --python_out profile.proto ({r.stderr.strip()})")
    pp = json.loads(run_py(py, PPROF_READER, gen, pprof_file))
    log(f"pprof (python): types {pp['types']}, period {pp['period']}, "
        f"{len(pp['mappings'])} mappings, labels {pp['labels']}")
    check(pp["string0"] == "", "pprof: string_table[0] is empty")
    check(pp["types"][:2] == ["samples/count", "cpu/nanoseconds"],
          "pprof: sample types samples/count, cpu/nanoseconds")
    check(pp["period_type"] == "cpu/nanoseconds" and pp["period"] == doc["period_ns"],
          "pprof: period type and period")
    check(pp["default"] == "cpu", "pprof: cpu is the default sample type")
    check(pp["cpu_ns"] == n * doc["period_ns"], "pprof: cpu time is samples times the period")
    # A dump of its own, a moment after the JSON one: its window ends a little later. A
    # window that starts at 0 (no sample is older) has no wall-clock start to give.
    if doc["start_ns"]:
        start_wall = doc["start_ns"] + doc["realtime_offset_ns"]
        check(abs(pp["time_nanos"] - start_wall) < 5e9 and
              abs(pp["time_nanos"] / 1e9 - time.time()) < 600,
              "pprof: the wall-clock start is the JSON dump's, about now")
        check(0 <= pp["duration_nanos"] - (doc["end_ns"] - doc["start_ns"]) < 5e9,
              "pprof: the duration is the JSON dump's window")
    else:
        check(pp["time_nanos"] == 0 and pp["duration_nanos"] == 0,
              "pprof: no wall-clock start or duration for a window from 0")
    check(pp["mappings"][0]["file"].endswith("/burn"),
          "pprof: the fixture is the first (main) mapping")
    burn_maps = [m for m in pp["mappings"] if m["file"].endswith("/burn")]
    check(len(burn_maps) == 1 and burn_maps[0]["has_functions"],
          "pprof: one mapping for the fixture, marked symbolized")
    check(all(re.fullmatch(r"[0-9a-f]+", m["build_id"]) for m in burn_maps),
          "pprof: the fixture's mapping has its build id")
    check(pp["locations_in_range"], "pprof: every address lies inside its mapping")
    check(pp["labels"] == ["pid", "process_name", "thread_name", "tid"],
          "pprof: labels pid, tid, thread_name, process_name")
    check(sum(pp["stacks"].values()) == n, f"pprof: total {sum(pp['stacks'].values())} == {n}")
    check(pp["stacks"] == normalize(folded), "pprof: every stack and count equals folded")
else:
    missing.append("python3-protobuf and protobuf-compiler")

# pprof, the real reader.
if shutil.which("go"):
    r = go_pprof(tmp, "-sample_index=samples", "-top", pprof_file)
    log(r.stdout[:1500])
    check(re.search(r"^File: burn$", r.stdout, re.M) is not None, "pprof -top: File: burn")
    check("symbolization" not in r.stderr.lower(),
          f"go tool pprof does not try to symbolize again ({r.stderr.strip()[:300]})")
    flat = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(\S.*)$", line)
        if m:
            flat[m.group(3).strip()] = (int(m.group(1)), int(m.group(2)))
    spin_a = total(folded, lambda fr: fr[-1] == "spin_a")
    spin_b = total(folded, lambda fr: fr[-1] == "spin_b")
    check(flat.get("spin_a", (None,))[0] == spin_a, f"pprof -top: spin_a flat {spin_a}")
    check(flat.get("spin_b", (None,))[0] == spin_b, f"pprof -top: spin_b flat {spin_b}")
    main_cum = total(folded, lambda fr: "main" in fr)
    check(flat.get("main", (0, None))[1] == main_cum, f"pprof -top: main cum {main_cum}")
    m = re.search(r"of (\d+) total", r.stdout)
    check(m and int(m.group(1)) == n, f"pprof -top: total {n}")

    r = go_pprof(tmp, "-sample_index=samples", "-traces", pprof_file)
    traces = parse_traces(r.stdout)
    check(sum(traces.values()) == n, f"pprof -traces: counts add up to {n}")
    t_a = sum(c for s, c in traces.items() if has_chain(s.split(";"), CHAIN_A))
    t_b = sum(c for s, c in traces.items() if has_chain(s.split(";"), CHAIN_B))
    check(t_a == chain_a and t_b == chain_b,
          f"pprof -traces: main;run;work_a;spin_a {t_a} == {chain_a}, work_b chain {t_b} == "
          f"{chain_b}")
    check(f"pid:[{burn.pid}]" in r.stdout.replace(" ", "") or
          re.search(rf"pid:\s*\[?{burn.pid}", r.stdout),
          "pprof -traces: shows the pid label")

    r = go_pprof(tmp, "-raw", pprof_file)
    check(re.search(r"^samples/count cpu/nanoseconds", r.stdout, re.M) is not None,
          "pprof -raw: sample types samples/count cpu/nanoseconds")
    check(re.search(r"^PeriodType: cpu nanoseconds", r.stdout, re.M) is not None,
          "pprof -raw: period type cpu nanoseconds")
    check(re.search(r"/burn\s", r.stdout) is not None, "pprof -raw: lists the fixture mapping")
else:
    missing.append("golang-go (go tool pprof)")

shutil.rmtree(tmp, ignore_errors=True)
if missing:
    skip("not installed: " + ", ".join(missing))
log("PASS")
