#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Check a Chrome trace event file as profctl writes it, and print a summary line.

Checks: the object form with traceEvents and displayTimeUnit; every event has ph, ts, pid and
tid of the right types; ts never goes back within a track (pid, tid); complete events nest
properly within their track; every flow start has one flow end with the same id and bp "e",
lying at the start of a kernel event, and lies within a slice on its own track.
Prints {"M": n, "X": n, ...} (sorted keys) on success; exits 1 with a reason otherwise.
"""
import json
import sys


def fail(msg):
    print("check_trace_json: " + msg)
    sys.exit(1)


def main():
    with open(sys.argv[1], "rb") as f:
        raw = f.read()
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        fail("not JSON: %s" % e)
    if not isinstance(doc, dict) or doc.get("displayTimeUnit") != "ms":
        fail("not the object form with displayTimeUnit ms")
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        fail("no traceEvents list")
    counts = {}
    last_ts = {}
    open_slices = {}
    slices = {}
    kernels = set()
    starts = {}
    ends = {}
    for i, e in enumerate(events):
        for key, typ in (("ph", str), ("pid", int), ("tid", int)):
            if not isinstance(e.get(key), typ) or isinstance(e.get(key), bool):
                fail("event %d: %s missing or not %s: %r" % (i, key, typ.__name__, e))
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool) or ts < 0:
            fail("event %d: bad ts: %r" % (i, e))
        ph = e["ph"]
        counts[ph] = counts.get(ph, 0) + 1
        if ph == "M":
            continue
        track = (e["pid"], e["tid"])
        if ts < last_ts.get(track, 0):
            fail("event %d: ts %r goes back on track %r" % (i, ts, track))
        last_ts[track] = ts
        if not isinstance(e.get("name"), str):
            fail("event %d: no name" % i)
        if ph == "X":
            dur = e.get("dur")
            if not isinstance(dur, (int, float)) or dur < 0:
                fail("event %d: bad dur" % i)
            stack = open_slices.setdefault(track, [])
            while stack and stack[-1] <= ts:
                stack.pop()
            # A zero-length slice at the end of its parent still nests.
            if stack and ts + dur > stack[-1]:
                fail("event %d: %r overlaps its enclosing slice on %r" % (i, e["name"], track))
            stack.append(ts + dur)
            slices.setdefault(track, []).append((ts, ts + dur))
            if e.get("cat") == "kernel":
                kernels.add((e["pid"], e["tid"], ts))
        elif ph == "s":
            if e.get("id") in starts:
                fail("flow id %r starts twice" % e.get("id"))
            starts[e.get("id")] = e
        elif ph == "f":
            if e.get("id") in ends:
                fail("flow id %r ends twice" % e.get("id"))
            if e.get("bp") != "e":
                fail("flow end %r without bp e" % e.get("id"))
            ends[e.get("id")] = e
        elif ph == "i":
            if e.get("s") not in ("t", "p", "g"):
                fail("event %d: instant without scope" % i)
        else:
            fail("event %d: unexpected ph %r" % (i, ph))
    if set(starts) != set(ends):
        fail("flow ids without a partner: %r" % (set(starts) ^ set(ends)))
    for fid, s in starts.items():
        f = ends[fid]
        if (f["pid"], f["tid"], f["ts"]) not in kernels:
            fail("flow %r ends where no kernel starts" % fid)
        if not any(a <= s["ts"] <= b for a, b in slices.get((s["pid"], s["tid"]), [])):
            fail("flow %r starts outside any slice of its thread" % fid)
    print(json.dumps(counts, sort_keys=True))


main()
