# SPDX-License-Identifier: BSD-2-Clause
"""The device kit's analysis: the probe's dump (cupti_probe.c) read back, and what each Part A
check concludes from it. Pure functions of files and numbers, so the dry run exercises the
same code as the device run. Each analysis returns (pass, figure, detail): pass is True, False
or None (not settled: said why in detail)."""
import statistics

MULTIPLE_SUBSCRIBERS = 39
GRAPH_CBIDS = {(2, 311), (2, 312), (1, 514), (1, 515)}   # cudaGraphLaunch(_ptsz), cuGraphLaunch
TOL_NS = 1_000_000                                         # D2: 1 ms either side


class Dump:
    """The probe's lines by kind (see the table at the top of cupti_probe.c)."""

    def __init__(self, path):
        self.path = path
        self.lib = None
        self.version = None
        self.subs, self.errors, self.ts, self.cbs, self.kernels = [], [], [], [], []
        self.mems, self.apis, self.markers, self.bufs, self.declined = [], [], [], [], []
        self.marks, self.totals, self.other = [], [], 0
        self.memory, self.enables = [], []
        self.bad_lines = 0
        try:
            f = open(path, errors="replace")
        except OSError:
            self.missing = True
            return
        self.missing = False
        with f:
            for line in f:
                try:
                    self._line(line.rstrip("\n"))
                except (ValueError, IndexError):
                    self.bad_lines += 1

    def _line(self, line):
        tag, _, rest = line.partition(" ")
        if tag == "C":
            self.cbs.append(tuple(int(x) for x in rest.split()))
        elif tag == "K":
            p = rest.split(" ", 9)
            self.kernels.append({"deliver": int(p[0]), "kind": int(p[1]), "corr": int(p[2]),
                                 "start": int(p[3]), "end": int(p[4]), "device": int(p[5]),
                                 "stream": int(p[6]), "graph": int(p[7]), "node": int(p[8]),
                                 "name": p[9] if len(p) > 9 else ""})
        elif tag == "M":
            d, k, c, s, e, b = (int(x) for x in rest.split())
            self.mems.append({"deliver": d, "kind": k, "corr": c, "start": s, "end": e,
                              "bytes": b})
        elif tag == "G":
            d, op, c, b, ts, mk, pool, addr = (int(x) for x in rest.split())
            self.memory.append({"deliver": d, "op": op, "corr": c, "bytes": b, "ts": ts,
                                "mkind": mk, "pool": pool, "addr": addr})
        elif tag == "P":
            self.enables.append(tuple(int(x) for x in rest.split()))
        elif tag == "A":
            d, k, c, cbid, tid, s, e = (int(x) for x in rest.split())
            self.apis.append({"deliver": d, "kind": k, "corr": c, "cbid": cbid, "tid": tid,
                              "start": s, "end": e})
        elif tag == "N":
            p = rest.split(" ", 5)
            self.markers.append({"deliver": int(p[0]), "flags": int(p[1]), "id": int(p[2]),
                                 "tid": int(p[3]), "ts": int(p[4]),
                                 "name": p[5] if len(p) > 5 else "-"})
        elif tag == "B":
            self.bufs.append(tuple(int(x) for x in rest.split()))
        elif tag == "D":
            self.declined.append(int(rest))
        elif tag == "W":
            t, _, text = rest.partition(" ")
            self.marks.append((int(t), text))
        elif tag == "T":
            m, c = rest.split()
            self.ts.append((int(m), int(c)))
        elif tag == "S":
            p = rest.split(" ", 3)
            self.subs.append({"mono": int(p[0]), "session": int(p[1]), "result": int(p[2]),
                              "old": p[3] if len(p) > 3 else "-"})
        elif tag == "E":
            p = rest.split(" ", 2)
            self.errors.append({"mono": int(p[0]), "result": int(p[1]), "call": p[2]})
        elif tag == "L":
            self.lib = rest
        elif tag == "V":
            self.version = int(rest)
        elif tag == "X":
            self.totals.append(tuple(int(x) for x in rest.split()))
        elif tag == "O":
            self.other += 1
        else:
            self.bad_lines += 1

    def window(self, begin, end):
        """(t0, t1) of the marks named begin and end, or None."""
        t0 = next((t for t, s in self.marks if s == begin), None)
        t1 = next((t for t, s in self.marks if s == end), None)
        return (t0, t1) if t0 is not None and t1 is not None else None

    def calls_in(self, win):
        """Callbacks inside the window: (outermost ENTERs, nested ENTERs)."""
        outer, nested = [], []
        for c in self.cbs:
            mono, tid, dom, cbid, site, corr, depth = c
            if win[0] <= mono <= win[1] and site == 0:
                (nested if depth else outer).append(c)
        return outer, nested

    def records(self):
        return self.kernels + self.mems

    def dropped(self):
        return sum(b[3] for b in self.bufs)

    def describe(self):
        return (f"libcupti {self.lib or '?'} version {self.version}, {len(self.cbs)} callbacks, "
                f"{len(self.kernels)} kernels, {len(self.mems)} copies/memsets, "
                f"{len(self.markers)} markers, {len(self.memory)} memory records, "
                f"{len(self.bufs)} buffers, "
                f"{self.dropped()} dropped, {len(self.declined)} declined, "
                f"errors {[e['call'] + '=' + str(e['result']) for e in self.errors][:5]}")


def usable(d):
    """None when the dump can be analysed, else why not (as a detail)."""
    if d.missing:
        return f"no probe dump ({d.path}): CUDA did not load the probe"
    if not d.subs:
        return f"the probe never subscribed: {d.describe()}"
    if d.subs[0]["result"] != 0:
        return (f"the probe's subscribe failed with {d.subs[0]['result']} "
                f"(holder {d.subs[0]['old']})")
    return None


def pct(values, q):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(q / 100 * len(v)))]


# ---- D3: the correlation id a kernel record carries ----------------------------------------

def corr(d, cases, errors):
    """Every record of a case carries the id of the outermost call of its window (item 21)."""
    why = usable(d)
    if why:
        return False, None, why
    by_corr = {}
    for r in d.records():
        by_corr.setdefault(r["corr"], []).append(r)
    rows, ok, shares, goods = [], True, [], []
    for name in cases:
        if name in errors:
            rows.append(f"{name}: not run ({errors[name]})")
            if name != "triton":   # Triton needs a host compiler the machine may lack
                ok = False
            continue
        win = d.window(f"case {name} begin", f"case {name} end")
        if not win:
            rows.append(f"{name}: no window in the dump")
            ok = False
            continue
        outer, nested = d.calls_in(win)
        o_ids = {c[5] for c in outer}
        n_ids = {c[5] for c in nested}
        on_outer = sum(len(by_corr.get(i, [])) for i in o_ids)
        on_nested = sum(len(by_corr.get(i, [])) for i in n_ids - o_ids)
        if n_ids:
            shares.append(n_ids <= o_ids)
        good = on_outer > 0 and on_nested == 0
        goods.append(good)
        ok &= good
        rows.append(f"{name}: {len(outer)} outermost calls (cbids "
                    f"{sorted({(c[2], c[3]) for c in outer})}), {len(nested)} nested "
                    f"({'same id' if n_ids <= o_ids else 'own ids'}), records on the outermost "
                    f"id {on_outer}, on a nested id {on_nested}")
    figure = (f"{sum(goods)}/{len(goods)} paths' records carry the outermost id; nested calls "
              f"share it in {sum(shares)}/{len(shares)} paths with nested calls")
    return ok, figure, "; ".join(rows)


# ---- memory: the allocating call's id, expandable segments -------------------------------

MEM_ALLOC = 1


def allocs_in(d, win, ids):
    """
    MEMORY2 allocation records of the window: stamped inside it, or on the id of a call made
    in it (should CUPTI stamp memory records on another clock). Also how many were stamped
    inside.
    """
    al = [m for m in d.memory if m["op"] == MEM_ALLOC
          and (win[0] <= m["ts"] <= win[1] or m["corr"] in ids)]
    return al, sum(1 for m in al if win[0] <= m["ts"] <= win[1])


def memory_corr(d, cases, errors):
    """
    Each allocation path's MEMORY2 allocation carries the correlation id of the outermost traced
    call of its window (cudaMalloc, cudaMallocAsync, the caching allocator's cudaMalloc): the
    join of memory to its allocating stack rests on it, as D3's for kernels.
    """
    why = usable(d)
    if why:
        return False, None, why
    rows, ok, goods = [], True, []
    for name in cases:
        if name in errors:
            rows.append(f"{name}: not run ({errors[name]})")
            ok = False
            continue
        win = d.window(f"case {name} begin", f"case {name} end")
        if not win:
            rows.append(f"{name}: no window in the dump")
            ok = False
            continue
        outer, nested = d.calls_in(win)
        o_ids, n_ids = {c[5] for c in outer}, {c[5] for c in nested}
        al, stamped = allocs_in(d, win, o_ids | n_ids)
        on_outer = sum(1 for m in al if m["corr"] in o_ids)
        on_nested = sum(1 for m in al if m["corr"] in n_ids - o_ids)
        good = bool(al) and on_outer == len(al)
        goods.append(good)
        ok &= good
        rows.append(f"{name}: {len(outer)} outermost calls (cbids "
                    f"{sorted({(c[2], c[3]) for c in outer})}), {len(al)} allocation records "
                    f"({sum(m['bytes'] for m in al)} B), on the outermost id {on_outer}, on a "
                    f"nested id {on_nested}, on another {len(al) - on_outer - on_nested}, "
                    f"stamped inside the window {stamped}")
    figure = (f"{sum(goods)}/{len(goods)} allocation paths' MEMORY2 records carry the "
              f"outermost id; {len(d.memory)} memory records in all")
    return ok, figure, "; ".join(rows)


def expandable(d, stats, errors):
    """
    With expandable segments (cuMemCreate/cuMemMap, no cudaMalloc) do MEMORY2 records come, do
    they cover what torch reserved in the window, and do they carry a traced call's id (else
    profd's gpu-memory cannot put them under a stack)?
    """
    why = usable(d)
    if why:
        return False, None, why
    if "cache_alloc" in errors:
        return False, None, f"not run: {errors['cache_alloc']}"
    win = d.window("case cache_alloc begin", "case cache_alloc end")
    if not win:
        return False, None, "no window in the dump"
    outer, _ = d.calls_in(win)
    o_ids = {c[5] for c in outer}
    al, stamped = allocs_in(d, win, o_ids)
    got = sum(m["bytes"] for m in al)
    st = stats.get("cache_alloc", {})
    grew = st.get("reserved_bytes.all.allocated", 0)
    joined = sum(1 for m in al if m["corr"] in o_ids)
    ok = grew > 0 and got >= 0.9 * grew
    figure = (f"{len(al)} MEMORY2 allocations, {got} B for torch's +{grew} B reserved; "
              f"{joined} on a traced call's id")
    detail = (f"{figure}; stamped inside the window {stamped}; torch over the window {st}; "
              f"memory kinds "
              f"{sorted({m['mkind'] for m in al})}, pool types {sorted({m['pool'] for m in al})}; "
              f"traced calls in the window {sorted({(c[2], c[3]) for c in outer})}; pass: the "
              f"records cover 90% of what torch reserved (gpu-memory then sees them; without a "
              f"traced call's id they fall under the unknown stack)")
    return ok, figure, detail


# ---- D2: the clock -------------------------------------------------------------------------

def clock(d, label):
    """Kernels inside the host's CLOCK_MONOTONIC brackets; zero timestamps (items 2, 16)."""
    why = usable(d)
    if why:
        return False, None, f"{label}: {why}"
    brackets = []
    for t, s in d.marks:
        if s.startswith("br "):
            _, m0, m1 = s.split()
            brackets.append((int(m0), int(m1)))
    if not brackets:
        return False, None, f"{label}: no brackets in the dump"
    # The launch inside each bracket: the outermost ENTER between m0 and m1.
    starts = sorted((c[0], c[5]) for c in d.cbs if c[4] == 0 and c[6] == 0)
    import bisect
    times = [s[0] for s in starts]
    want = {}
    for m0, m1 in brackets:
        i = bisect.bisect_left(times, m0)
        while i < len(starts) and starts[i][0] <= m1:
            want[starts[i][1]] = (m0, m1)
            i += 1
    inside = outside = 0
    worst = 0
    for k in d.kernels:
        br = want.get(k["corr"])
        if not br or not k["start"]:
            continue
        off = max(br[0] - k["start"], k["end"] - br[1], 0)
        worst = max(worst, off)
        if off <= TOL_NS:
            inside += 1
        else:
            outside += 1
    zeros = sum(1 for k in d.kernels if k["start"] == 0 or k["end"] == 0)
    cupti_off = [c - m for m, c in d.ts]
    ok = inside > 0 and outside == 0 and zeros == 0 and inside >= 0.9 * len(brackets)
    figure = (f"{label}: {inside}/{len(brackets)} inside, {outside} outside, {zeros} zero "
              f"of {len(d.kernels)}")
    detail = (f"{figure}; worst miss {worst / 1e6:.3f} ms; cuptiGetTimestamp - MONOTONIC "
              f"{[round(o / 1e6, 3) for o in cupti_off[:3]]} ms; {d.describe()}")
    return ok, figure, detail


# ---- D4: graphs across sessions ------------------------------------------------------------

def graphs(d, replays, per_graph):
    """Graph kernels carry a graph launch's id, per_graph per id, in both sessions (items 3, 22,
    23); launches made during capture never get a record."""
    why = usable(d)
    if why:
        return False, None, why
    by_corr = {}
    for k in d.kernels:
        by_corr.setdefault(k["corr"], []).append(k)
    rows, figs, ok = [], [], True
    cap = d.window("capture begin", "capture end")
    if cap:
        outer, _ = d.calls_in(cap)
        got = sum(1 for c in outer if c[5] in by_corr)
        rows.append(f"capture: {len(outer)} launches, {got} with a record")
    for s in (1, 2):
        win = d.window(f"session {s} begin", f"session {s} end")
        if not win:
            rows.append(f"session {s}: no window")
            ok = False
            continue
        outer, _ = d.calls_in(win)
        g_ids = {c[5] for c in outer if (c[2], c[3]) in GRAPH_CBIDS}
        ks = [k for i in g_ids for k in by_corr.get(i, [])]
        in_graph = sum(1 for k in ks if k["graph"])
        counts = [len(by_corr.get(i, [])) for i in g_ids]
        # Graph kernels that ran in the window (it ends after a sync) on another id.
        stray = sum(1 for k in d.kernels if k["graph"] and win[0] <= k["start"] <= win[1]
                    and k["corr"] not in g_ids)
        good = (len(g_ids) == replays and in_graph == replays * per_graph
                and all(c == per_graph for c in counts) and stray == 0)
        ok &= good
        figs.append(f"session {s} {'ok' if good else 'WRONG'}")
        rows.append(f"session {s}: {len(g_ids)} graph launches, {in_graph} graph kernels on "
                    f"their ids (want {replays * per_graph}), {stray} graph kernels on other ids")
    return ok, ", ".join(figs), "; ".join(rows)


# ---- D5: NVTX ------------------------------------------------------------------------------

def nvtx(d, main_tid, worker_tid):
    """START/END pairs share an id, tids are the threads', names are right (items 4, 5, 18)."""
    why = usable(d)
    if why:
        return False, None, why
    starts = {m["id"]: m for m in d.markers if m["flags"] & 2}
    ends = {m["id"]: m for m in d.markers if m["flags"] & 4}
    instants = [m for m in d.markers if m["flags"] & 1]
    names = {m["name"]: m for m in starts.values()}
    problems = []
    for name, tid in (("outer", main_tid), ("inner", main_tid), ("thread_range", worker_tid)):
        m = names.get(name)
        if not m:
            problems.append(f"no START for {name}")
            continue
        if m["id"] not in ends:
            problems.append(f"{name}: no END with id {m['id']}")
        elif ends[m["id"]]["tid"] != m["tid"]:
            problems.append(f"{name}: END on another thread")
        if m["tid"] != tid:
            problems.append(f"{name}: tid {m['tid']}, thread was {tid}")
    if not any(m["name"] == "point" for m in instants):
        problems.append("no mark 'point'")
    unpaired = len(set(ends) - set(starts))
    figure = f"{len(starts)} ranges, {len(instants)} marks, {unpaired} END without START"
    pre = [m["name"] for m in d.markers if m["name"] in ("pre_init", "pre_mark")]
    detail = (f"{figure}; before CUDA init recorded: {pre or 'none'}; "
              f"subscribe after NVTX init: {d.subs[0]['result']}; problems: {problems or 'none'}")
    return not problems, figure, detail


# ---- D6: delivery --------------------------------------------------------------------------

def delivery(d, mode, launched):
    """Delivery minus kernel end, drops and declines (items 13, 14)."""
    why = usable(d)
    if why:
        return False, None, f"{mode}: {why}"
    win = d.window(f"{mode} begin", f"{mode} end")
    if not win:
        return False, None, f"{mode}: no window"
    outer, _ = d.calls_in(win)
    ids = {c[5] for c in outer}
    ks = [k for k in d.kernels if k["corr"] in ids]
    delays = [(k["deliver"] - k["end"]) / 1e9 for k in ks if k["end"]]
    lost = len(ids) - len({k["corr"] for k in ks})
    p50, p99, mx = pct(delays, 50), pct(delays, 99), max(delays) if delays else None
    ok = bool(ks) and lost == 0 and mx is not None and mx < 30
    figure = (f"{mode}: p50 {p50:.3f} s, p99 {p99:.3f} s, max {mx:.3f} s, lost {lost}/{len(ids)}"
              if delays else f"{mode}: no records of {len(ids)} launches")
    detail = (f"{figure}; launched {launched}; dropped (GetNumDroppedRecords) {d.dropped()}; "
              f"buffers declined {len(d.declined)}; buffers completed {len(d.bufs)}")
    return ok, figure, detail


# ---- D8: torch.profiler and the probe ------------------------------------------------------

def kineto_first(d):
    """(a) torch.profiler holds CUPTI when the probe enables: the subscribe's answer."""
    if d.missing or not d.subs:
        return False, None, "the probe never tried to subscribe"
    s = d.subs[0]
    taken = s["result"] == MULTIPLE_SUBSCRIBERS
    # Taken: profd would say SUBSCRIBER_TAKEN and stay out. Free: profd would take CUPTI's
    # buffers and clock from under a running torch.profiler.
    why = ("profd stays out of the way" if taken else
           "the profiler does not hold the subscriber slot, so profd would take CUPTI from it")
    return taken, ("slot taken by " + s["old"]) if taken else f"subscribe {s['result']}", \
        f"subscribe result {s['result']}, incumbent name {s['old']!r}: {why}"


def kineto_after(d, after_launches):
    """(b) the probe's records and clock after a torch.profiler session (item 1)."""
    why = usable(d)
    if why:
        return False, None, why
    win = d.window("after begin", "after end")
    before = d.window("before begin", "before end")
    if not win or not before:
        return False, None, "no windows in the dump"
    ids_after = {c[5] for c in d.calls_in(win)[0]}
    ids_before = {c[5] for c in d.calls_in(before)[0]}
    got = {r["corr"] for r in d.kernels}
    share_before = len(ids_before & got) / max(len(ids_before), 1)
    share_after = len(ids_after & got) / max(len(ids_after), 1)
    offs = [(m, c - m) for m, c in d.ts]
    off_after = [o for m, o in offs if m >= win[0]]
    bad_clock = any(abs(o) > 50_000_000 for o in off_after)
    ok = share_before > 0.99 and share_after > 0.99 and not bad_clock and off_after != []
    figure = (f"records after the profiler {share_after:.0%} (before {share_before:.0%}), "
              f"clock {'replaced' if bad_clock else 'kept' if off_after else 'unknown'}")
    detail = (f"{figure}; launches after {len(ids_after)} ({after_launches}); "
              f"cuptiGetTimestamp - MONOTONIC after: "
              f"{[round(o / 1e6, 1) for o in off_after[:4]]} ms")
    return ok, figure, detail


# ---- D7: uprobe addresses ------------------------------------------------------------------

def procaddr(res):
    """The pointers cudart and cuBLAS call through equal the exported symbols (item 24)."""
    rows, ok, n = [], True, 0
    for name, row in sorted(res.get("symbols", {}).items()):
        sym = row.get("dlsym")
        for via in ("cuGetProcAddress", "cudaGetDriverEntryPointByVersion"):
            if via not in row:
                continue
            v = row[via]
            same = isinstance(v, int) and v == sym
            n += same
            ok &= same
            rows.append(f"{name} {via}: {'same' if same else 'DIFFERENT' if isinstance(v, int) else v}")
    if not rows:
        return False, None, f"no addresses: {res}"
    return ok, f"{n}/{len(rows)} equal", "; ".join(rows)


def median(xs):
    return statistics.median(xs) if xs else None
