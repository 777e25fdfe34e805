#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Check the OTLP bodies test_otlp wrote in DIR with the official opentelemetry-proto classes.

DIR holds body.bin (a gzipped ExportProfilesServiceRequest), expected.json (what test_otlp
expects, computed from its inputs), half-a.bin / half-b.bin (otlp__split of the body) and
piece-N.bin (the body split down to single samples). Every body must parse with the PyPI
classes without unknown fields, follow the dictionary rules (entry 0 of every table is the zero
value, every index in range, no duplicate entries, no entry nothing refers to), and resolve to
the expected resources, profiles, stacks and values. Prints what differs; exit 1 on any error.
Run with the python of scripts/test-venv.
"""
import collections
import gzip
import json
import os
import sys

from google.protobuf import unknown_fields
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2

FRAME_TYPE = "profile.frame.type"
BUILD_ID = "process.executable.build_id.gnu"
FIRST_COLUMNS = ("samples", "gpu_kernel_time", "off_cpu")

errors = []


def fail(msg):
    errors.append(msg)
    print("check_otlp: " + msg, file=sys.stderr)


def no_unknown_fields(msg, where):
    """Every field the encoder wrote must be one the official definitions know."""
    if len(unknown_fields.UnknownFieldSet(msg)):
        fail(f"{where}: {msg.DESCRIPTOR.full_name} has unknown fields")
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        repeated = fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED
        if repeated:
            for i, m in enumerate(value):
                no_unknown_fields(m, f"{where}.{fd.name}[{i}]")
        else:
            no_unknown_fields(value, f"{where}.{fd.name}")


def load(path):
    with open(path, "rb") as f:
        raw = gzip.decompress(f.read())
    req = profiles_service_pb2.ExportProfilesServiceRequest()
    req.ParseFromString(raw)
    no_unknown_fields(req, os.path.basename(path))
    return req


def any_value(v):
    kind = v.WhichOneof("value")
    return None if kind is None else getattr(v, kind)


class Resolver:
    """Follows a request's indices, checking each, and records which entries were reached."""

    def __init__(self, req, name):
        self.d = req.dictionary
        self.name = name
        self.used = collections.defaultdict(set)

    def at(self, table, i):
        rows = getattr(self.d, table)
        if not 0 <= i < len(rows):
            fail(f"{self.name}: {table} index {i} out of range ({len(rows)})")
            return None
        self.used[table].add(i)
        return rows[i]

    def string(self, i):
        s = self.at("string_table", i)
        return "" if s is None else s

    def attrs(self, indices):
        out = {}
        for i in indices:
            a = self.at("attribute_table", i)
            if a is None:
                continue
            if a.value.WhichOneof("value") == "string_value_strindex":
                out[self.string(a.key_strindex)] = self.string(a.value.string_value_strindex)
            else:
                out[self.string(a.key_strindex)] = any_value(a.value)
            self.string(a.unit_strindex)
        return out

    def frame(self, i):
        loc = self.at("location_table", i)
        if loc is None:
            return {}
        mapping = self.at("mapping_table", loc.mapping_index) if loc.mapping_index else None
        if mapping is not None:
            if mapping.memory_start != 0 or mapping.file_offset != 0:
                fail(f"{self.name}: mapping {loc.mapping_index} does not start at 0")
            if loc.address >= mapping.memory_limit:
                fail(f"{self.name}: address {loc.address:#x} past its mapping's limit")
        if len(loc.lines) > 1:
            fail(f"{self.name}: location {i} has {len(loc.lines)} lines")
        name, file, line = None, "", 0
        if loc.lines:
            fn = self.at("function_table", loc.lines[0].function_index)
            name = self.string(fn.name_strindex)
            file = self.string(fn.filename_strindex)
            self.string(fn.system_name_strindex)
            line = loc.lines[0].line
        frame_attrs = self.attrs(loc.attribute_indices)
        map_attrs = self.attrs(mapping.attribute_indices) if mapping is not None else {}
        return {
            "name": name,
            "type": frame_attrs.get(FRAME_TYPE),
            "file": file,
            "line": line,
            "mapping": self.string(mapping.filename_strindex) if mapping is not None else None,
            "build_id": map_attrs.get(BUILD_ID),
            "address": loc.address if mapping is not None else 0,
        }

    def stack(self, i):
        st = self.at("stack_table", i)
        if st is None:
            return ()
        # Leaf first on the wire; root first here, as people read stacks.
        return tuple(json.dumps(self.frame(j), sort_keys=True) for j in reversed(st.location_indices))

    def value_type(self, vt):
        return [self.string(vt.type_strindex), self.string(vt.unit_strindex)]

    def check_tables(self):
        """Entry 0 of each table is the zero value; entries are unique and all referenced."""
        d = self.d
        if not d.string_table or d.string_table[0] != "":
            fail(f"{self.name}: string_table[0] is not \"\"")
        for table in ("mapping_table", "location_table", "function_table", "link_table",
                      "attribute_table", "stack_table"):
            rows = getattr(d, table)
            if not rows or rows[0].SerializeToString() != b"":
                fail(f"{self.name}: {table}[0] is not the zero value")
                continue
            seen = [r.SerializeToString(deterministic=True) for r in rows]
            if len(set(seen)) != len(seen):
                fail(f"{self.name}: {table} has duplicate entries")
            unused = set(range(1, len(rows))) - self.used[table]
            if unused and table != "link_table":
                fail(f"{self.name}: {table} entries {sorted(unused)} are not referenced")
        if len(set(d.string_table)) != len(d.string_table):
            fail(f"{self.name}: string_table has duplicates")
        unused = set(range(1, len(d.string_table))) - self.used["string_table"]
        if unused:
            fail(f"{self.name}: strings {[d.string_table[i] for i in sorted(unused)]} unused")


def resolve(req, name):
    """The request as [(resource attributes, scope, [profile...])], each profile resolved."""
    r = Resolver(req, name)
    out = []
    for rp in req.resource_profiles:
        attrs = {kv.key: any_value(kv.value) for kv in rp.resource.attributes}
        if len(attrs) != len(rp.resource.attributes):
            fail(f"{name}: duplicate resource attribute keys")
        if len(rp.scope_profiles) != 1:
            fail(f"{name}: {len(rp.scope_profiles)} scopes in one resource")
        for sp in rp.scope_profiles:
            scope = {"name": sp.scope.name, "version": sp.scope.version}
            profiles = []
            for p in sp.profiles:
                samples = {}
                for s in p.samples:
                    if len(s.values) != 1:
                        fail(f"{name}: a sample with {len(s.values)} values")
                    if s.attribute_indices or s.link_index or s.timestamps_unix_nano:
                        fail(f"{name}: a sample with attributes, link or timestamps")
                    st = r.stack(s.stack_index)
                    if st in samples:
                        fail(f"{name}: two samples of one stack in a profile")
                    samples[st] = samples.get(st, 0) + (s.values[0] if s.values else 0)
                profiles.append({
                    "sample_type": r.value_type(p.sample_type),
                    "time": p.time_unix_nano,
                    "duration": p.duration_nano,
                    "period_type": r.value_type(p.period_type) if p.HasField("period_type") else None,
                    "period": p.period,
                    "samples": samples,
                })
                if p.profile_id or p.attribute_indices or p.original_payload:
                    fail(f"{name}: unexpected profile fields set")
            out.append((attrs, scope, profiles))
    r.check_tables()
    return out


def expected_profiles(series_profiles):
    out = []
    for p in series_profiles:
        samples = collections.Counter()
        for s in p["samples"]:
            samples[tuple(json.dumps(f, sort_keys=True) for f in s["stack"])] += s["value"]
        out.append(dict(p, samples=dict(samples)))
    return out


def flatten(resolved):
    """Every sample as one hashable row: what a split must neither lose nor duplicate."""
    rows = collections.Counter()
    for attrs, scope, profiles in resolved:
        key = json.dumps(attrs, sort_keys=True) + json.dumps(scope, sort_keys=True)
        for p in profiles:
            head = (key, tuple(p["sample_type"]), p["time"], p["duration"],
                    json.dumps(p["period_type"]), p["period"])
            for st, v in p["samples"].items():
                rows[head + (st,)] += v
    return rows


def count(resolved):
    return sum(v for _, _, profiles in resolved for p in profiles
               if p["sample_type"][0] in FIRST_COLUMNS for v in p["samples"].values())


def show(x):
    if isinstance(x, dict) and x and isinstance(next(iter(x)), tuple):
        # Samples: stack (root first) -> value, one line per sample.
        x = sorted(" > ".join(str(json.loads(f)["name"]) for f in st) + f" = {v}"
                   for st, v in x.items())
    return json.dumps(x, indent=1, sort_keys=True, default=str)[:3000]


def main():
    d = sys.argv[1]
    with open(os.path.join(d, "expected.json")) as f:
        exp = json.load(f)
    whole = resolve(load(os.path.join(d, "body.bin")), "body")

    # Resources in the order their label sets first appear, each with its series' profiles.
    want = []
    for s in exp["series"]:
        for attrs, profiles in want:
            if attrs == s["attributes"]:
                profiles.extend(expected_profiles(s["profiles"]))
                break
        else:
            want.append((s["attributes"], expected_profiles(s["profiles"])))
    if len(whole) != exp["resources"] or len(want) != exp["resources"]:
        fail(f"body: {len(whole)} resources, expected {exp['resources']}")
    for (attrs, scope, profiles), (want_attrs, want_profiles) in zip(whole, want):
        if attrs != want_attrs:
            fail(f"resource attributes {show(attrs)}, expected {show(want_attrs)}")
        if scope != exp["scope"]:
            fail(f"scope {scope}, expected {exp['scope']}")
        if len(profiles) != len(want_profiles):
            fail(f"{attrs.get('service.name')}: {len(profiles)} profiles, "
                 f"expected {len(want_profiles)}")
        for got, wanted in zip(profiles, want_profiles):
            for field in ("sample_type", "time", "duration", "period_type", "period"):
                if got[field] != wanted[field]:
                    fail(f"{got['sample_type']}: {field} {got[field]}, expected {wanted[field]}")
            if got["samples"] != wanted["samples"]:
                fail(f"{got['sample_type']}: samples differ:\n got {show(got['samples'])}\n"
                     f" expected {show(wanted['samples'])}")

    total = count(whole)
    if not total == exp["count"] == exp["encoder_count"]:
        fail(f"count: decoded {total}, expected {exp['count']}, otlp__count {exp['encoder_count']}")

    rows = flatten(whole)
    halves = [resolve(load(os.path.join(d, f"half-{h}.bin")), f"half-{h}") for h in "ab"]
    if not all(halves):
        fail("a half is empty")
    if flatten(halves[0]) + flatten(halves[1]) != rows:
        fail("the halves do not add up to the body")
    if [count(h) for h in halves] != exp["half_counts"] or sum(exp["half_counts"]) != total:
        fail(f"half counts {[count(h) for h in halves]}, otlp__count {exp['half_counts']}")

    pieces = collections.Counter()
    for i in range(exp["pieces"]):
        piece = resolve(load(os.path.join(d, f"piece-{i}.bin")), f"piece-{i}")
        flat = flatten(piece)
        if len(flat) != 1:
            fail(f"piece-{i}: {len(flat)} samples, expected 1")
        pieces += flat
    if pieces != rows:
        fail("the pieces do not add up to the body")

    nsamples = sum(len(p["samples"]) for _, _, ps in whole for p in ps)
    print(f"check_otlp: {len(whole)} resources, "
          f"{sum(len(ps) for _, _, ps in whole)} profiles, {nsamples} samples, "
          f"{exp['pieces']} pieces: {len(errors)} errors", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
