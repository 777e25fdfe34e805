# SPDX-License-Identifier: BSD-2-Clause
"""The device kit's checks of libprofd_cupti itself against the kit's profd (device-check), where
the bpf check found BPF working: D6 (delivery delay and loss under the delay bound and its
knobs), D2's zero timestamps as status counts them, D4 (graph replays after a disable/enable
of the one CUPTI session), D8 (torch.profiler after and before the library).

The workload (workload.py libsteps) runs its steps one at a time, each when the kit creates
GO.k; it says "wait k" first, and "begin"/"end" lines around each step, with what it measured.
The kit watches profd's status (profctl status --json) meanwhile."""
import bisect
import json
import os
import time

import checks
from kitrun import Daemon, Failed, fn_is, folded, share, tail

HERE = os.path.dirname(os.path.abspath(__file__))

# D6's settings: the defaults, then the two knobs that bound the delay otherwise.
D6_SETTINGS = (("defaults", {}), ("shared_buffers", {"PROFD_CUPTI_PER_THREAD_BUFFERS": "0"}),
               ("buffer_64k", {"PROFD_CUPTI_BUFFER_KB": "64"}))
D6_NAMES = tuple(f"D6.delivery_{s}" for s, _ in D6_SETTINGS) + ("D2.zero_status",)
D4_NAMES = ("D4.library_graphs",)
D8_NAMES = ("D8.library_after", "D8.library_first")
BOUND_S = 5.0          # PROFD_CUPTI_MAX_DELAY_MS's default


class Steps:
    """A libsteps workload with libprofd_cupti injected, talking to its profd's socket."""

    def __init__(self, ctx, log, steps, env_extra=None, daemon=None):
        """
        daemon: the log name of a profd to start before the workload. The library then finds
        it at its first try, not after its reconnection backoff (1, 2, 4, 8 s...): the
        workload waits in a shell on that process id until profd serves, then execs.
        """
        self.ctx, self.log = ctx, log
        self.d = None
        self.out = os.path.join(ctx.logs, log + ".steps")
        self.go = os.path.join(ctx.work, log + ".go")
        self.sock = os.path.join(ctx.work, log + "-profd.sock")
        for p in [self.out, self.go + ".exec"] + [f"{self.go}.{k}" for k in range(len(steps) + 1)]:
            if os.path.exists(p):
                os.unlink(p)
        env = ctx.base_env()
        env["CUDA_INJECTION64_PATH"] = ctx.profd_cupti
        env["PROFD_SOCKET"] = self.sock
        env["PROFD_CUPTI_VERBOSE"] = "1"     # what it did and when, in LOG.err
        env.update(env_extra or {})
        cmd = [ctx.py, os.path.join(HERE, "workload.py"), "libsteps", self.out, self.go, *steps] \
            + (["--fake"] if ctx.dry else [])
        if daemon:
            cmd = ["sh", "-c", 'while [ ! -e "$0" ]; do sleep 0.05; done; exec "$@"',
                   self.go + ".exec"] + cmd
        self.p = ctx.spawn(log, cmd, env=env)
        if daemon:
            # exec keeps the process id profd was given.
            self.d = self.daemon(daemon)
            open(self.go + ".exec", "w").close()
        self.pid = int(self.wait_line("pid", 90)[1])
        if self.pid != self.p.pid:
            raise Failed(f"{log}: the workload is {self.pid}, not the process {self.p.pid} "
                         f"profd watches")

    def lines(self):
        try:
            with open(self.out) as f:
                return [ln.split(" ", 4) for ln in f.read().splitlines()]
        except OSError:
            return []

    def wait_line(self, *prefix, limit=60):
        """The first line starting with the words prefix (waiting for it)."""
        if isinstance(prefix[-1], (int, float)):
            prefix, limit = prefix[:-1], prefix[-1]
        end = time.time() + min(limit, self.ctx.remaining())
        while time.time() < end:
            for w in self.lines():
                if tuple(w[:len(prefix)]) == prefix:
                    return w
            if self.p.poll() is not None:
                break
            time.sleep(0.05)
        raise Failed(f"{self.log}: no '{' '.join(prefix)}' line (exit {self.p.poll()}): "
                     f"{tail(self.ctx.read(self.log, 'err'))}")

    def go_step(self, k):
        open(f"{self.go}.{k}", "w").close()

    def result(self, k, limit=120):
        """The end line of step k: (its monotonic time, its JSON)."""
        w = self.wait_line("end", str(k), limit)
        return int(w[3]), json.loads(w[4] if len(w) > 4 else "{}")

    def daemon(self, log):
        d = Daemon(self.ctx, log, "--pid", str(self.p.pid), sock=self.sock)
        if not d.ready(30):
            d.stop()
            raise Failed(f"profd did not serve: {tail(self.ctx.read(log, 'err'))}")
        return d

    def stop(self):
        if self.d:
            self.d.stop()
        self.ctx.kill(self.p)


def status(d, log):
    rc, out, _ = d.ctl(log, "status", "--json", limit=10)
    try:
        return json.loads(out) if rc == 0 else {}
    except ValueError:
        return {}


def proc_state(st, pid):
    g = next((g for g in st.get("gpu", []) if g.get("pid") == pid), None)
    return (g.get("state"), g) if g else (None, None)


def wait_state(d, pid, want, limit):
    """The pid's GPU state once it is one of want (or the last seen when limit ran out)."""
    end = time.time() + limit
    last = (None, None)
    while time.time() < end and d.p.poll() is None:
        last = proc_state(status(d, d.log + "-status"), pid)
        if last[0] in want:
            break
        time.sleep(0.3)
    return last


def records(st):
    return st.get("gpu_records", 0) + st.get("gpu_zero_time_records", 0)


def quiet(d, limit):
    """Poll status until its records stop changing for 1.5 s (the flush period and the uplink's
    batching several times over; less in the dry run): the status then."""
    still = d.ctx.scale(1.5, 0.6)
    end = time.time() + limit
    st = status(d, d.log + "-poll")
    since = time.time()
    while time.time() < end:
        time.sleep(0.25)
        nxt = status(d, d.log + "-poll")
        if records(nxt) != records(st):
            since = time.time()
        st = nxt
        if time.time() - since >= still:
            break
    return st


# ---- D6: delivery delay, with the library, under the bound and its knobs ---------------------

def delays(ends, polls, base):
    """
    Delay of each kernel: the first status poll whose record count reached it, less its end.
    ends: [(mono, n)]: by mono the first n kernels had ended (from CUDA events). polls:
    [(mono, records)]. Records are counted in order of arrival, the kernels in order of end:
    one stream, one launching thread, so the n-th record to arrive is the n-th kernel's.
    Returns (delays in s, kernels never received).
    """
    counts = [r - base for _, r in polls]
    for i in range(1, len(counts)):   # a status that failed (0) must not undo a count
        counts[i] = max(counts[i], counts[i - 1])
    out, lost, prev = [], 0, 0
    for mono, n in sorted(ends):
        for j in range(prev + 1, n + 1):
            i = bisect.bisect_left(counts, j)
            if i == len(counts):
                lost += 1
            else:
                out.append(max(polls[i][0] - mono, 0) / 1e9)
        prev = max(prev, n)
    return out, lost


def d6_run(ctx, name, env_extra, long_s, small_s, rate):
    steps = [f"long:{long_s}", f"small:{small_s}:{rate}"]
    s = Steps(ctx, f"d6-{name}", steps, env_extra, daemon=f"d6-{name}-profd")
    d = s.d
    rows, figs, zeros, recs = [], {}, 0, 0
    try:
        if not d.collecting(s.pid, 40):
            raise Failed("the library never reported collecting (profctl status)")
        for k, mode in enumerate(("long", "small")):
            # What came before (warm-up kernels) is in: the window's count starts here.
            st0 = quiet(d, 10)
            base = records(st0)
            s.go_step(k)
            s.wait_line("begin", str(k))
            polls = []
            t_end = None
            while True:
                st = status(d, d.log + "-poll")
                polls.append((time.clock_gettime_ns(time.CLOCK_MONOTONIC), records(st)))
                if t_end is None and any(w[:2] == ["end", str(k)] for w in s.lines()):
                    t_end = time.time()
                # Past the end: the bound's worth of waiting, then what never came is lost.
                if t_end is not None and (records(st) - base >= launched_of(s, k)
                                          or time.time() - t_end > BOUND_S + 3):
                    break
                if s.p.poll() is not None and t_end is None:
                    raise Failed(f"the workload exited: {tail(ctx.read(s.log, 'err'))}")
                ctx.remaining()
                time.sleep(0.1)
            _, res = s.result(k)
            st1 = status(d, d.log + "-poll")
            ends = [(int(w[1]), int(w[2])) for w in s.lines() if w[0] == f"k{k}"]
            ds, lost = delays(ends, polls, base)
            launched = res.get("launched", 0)
            forced = st1.get("gpu_forced_flushes", 0) - st0.get("gpu_forced_flushes", 0)
            dropped = st1.get("gpu_dropped", 0) - st0.get("gpu_dropped", 0)
            got = records(st1) - base
            p50, p99 = checks.pct(ds, 50), checks.pct(ds, 99)
            mx = max(ds) if ds else None
            figs[mode] = (mx, launched - got)
            per_s = launched / max(res.get("secs", 1), 1e-3)
            rows.append(f"{mode}: {launched} kernels ({per_s:.0f}/s), delay p50 {fmt_s(p50)} "
                        f"p99 {fmt_s(p99)} max {fmt_s(mx)}, lost {max(launched - got, 0)} "
                        f"(never counted "
                        f"{lost}), forced flushes {forced}, dropped {dropped}")
        st = status(d, d.log + "-poll")
        zeros, recs = st.get("gpu_zero_time_records", 0), records(st)
        _, g = proc_state(st, s.pid)
        s.go_step(2)
    finally:
        d.stop()
        s.stop()
    return rows, figs, zeros, recs, g


def launched_of(s, k):
    w = next((w for w in s.lines() if w[:2] == ["end", str(k)]), None)
    if not w:
        return 1 << 62
    try:
        return int(json.loads(w[4] if len(w) > 4 else "{}").get("launched", 0))
    except ValueError:
        return 1 << 62


def fmt_s(x):
    return "n/a" if x is None else f"{x:.3f} s"


def c_d6(ctx):
    """D6 with the library: delay and loss at 50 ms kernels (sync every 5 s) and 10k/s small."""
    long_s, small_s, rate = ctx.scale(10, 2), ctx.scale(4, 1), ctx.scale(10000, 2000)
    zero_rows = []
    for name, env in D6_SETTINGS:
        rows, figs, zeros, recs, g = d6_run(ctx, name, env, long_s, small_s, rate)
        mxs = [m for m, _ in figs.values()]
        lost = sum(max(lo, 0) for _, lo in figs.values())
        ok = (len(figs) == 2 and all(m is not None and m <= BOUND_S + 1 for m in mxs)
              and lost == 0)
        fig = (f"max delay {', '.join(f'{k} {fmt_s(m)}' for k, (m, _) in figs.items())}; "
               f"lost {lost}")
        yield (f"D6.delivery_{name}", ok, fig,
               f"{env or 'no knobs'}; " + "; ".join(rows) + f"; the library: {g}; pass: every "
               f"delay within the {BOUND_S:.0f} s bound (+1 s of status polling) and nothing "
               f"lost")
        zero_rows.append((name, zeros, recs, (g or {}).get("clock")))
    z = sum(r[1] for r in zero_rows)
    yield ("D2.zero_status", z == 0, f"{z} zero-timestamp records of "
           f"{sum(r[2] for r in zero_rows)} (profd status)",
           "; ".join(f"{n}: {zz} of {rr}, clock {c}" for n, zz, rr, c in zero_rows)
           + "; CUPTI 12.6u2 to 13.0.x give kernels start = end = 0 with a timestamp callback")


# ---- D4: graph replays across a disable/enable of the one session ----------------------------

def graph_share(d, pid, log):
    """GPU time of the graphs' kernels: the share under replay_graph, and under unknown."""
    rc, o, e = d.ctl(log, "dump", "flamegraph", "--pid", str(pid), "--value", "gpu",
                     "--format", "folded")
    f = folded(o)
    return (share(f, lambda fr: any(fn_is(x, "replay_graph") for x in fr)),
            share(f, lambda fr: any("launch stack unknown" in x for x in fr)), sum(f.values()))


def c_d4_d8(ctx):
    """D4 with the library, then D8 (the profiler after profd) in the same process."""
    replays = ctx.scale(100, 20)
    s = Steps(ctx, "d4-lib", [f"graph:{replays}", f"graph:{replays}", "profiler:10"],
              daemon="d4-profd0")
    rows, good = [], True
    try:
        for k in (0, 1):
            # Each daemon's start enables the library, its stop disables it: the second
            # replays run after a disable/enable of the one CUPTI session.
            d = s.d if k == 0 else s.daemon(f"d4-profd{k}")
            try:
                if not d.collecting(s.pid, 40):
                    raise Failed("the library never reported collecting (profctl status)")
                s.go_step(k)
                _, gres = s.result(k)
                st = quiet(d, 10)
                under, unknown, total = graph_share(d, s.pid, f"d4-gpu{k}")
                want = replays * 10
                # Joined (not under the unknown stack) only when the record carries the id the
                # graph launch's callback saw: what the 13.1u1 notes say breaks in a second
                # session.
                ok = records(st) >= want and unknown is not None and unknown <= 0.1
                good &= ok
                rows.append(f"session {k + 1}: {records(st)} records (want {want}), "
                            f"unmatched {st.get('gpu_unmatched', 0)}, GPU time under "
                            f"replay_graph {under if under is None else round(under, 3)}, "
                            f"unknown {unknown if unknown is None else round(unknown, 3)}"
                            + (f", CUPTI {gres['cupti']}" if gres.get("cupti") else ""))
                if k == 1:
                    s.go_step(2)
                    _, res = s.result(2)
                    state, g = wait_state(d, s.pid, {"GPU_STATE_ACTIVITY_TAKEN"}, 10)
            finally:
                d.stop()
            if k == 0:
                # Without its daemon the library collects on for its grace period
                # (cupti/uplink.h UPLINK_GRACE_MS, 5 s), then disables: only then is the
                # next attach an enable.
                time.sleep(6.5)
        yield ("D4.library_graphs", good, f"{'ok' if good else 'WRONG'} after a disable/enable",
               "; ".join(rows) + "; profd stopped between, 6.5 s apart (past the library's "
               "grace); pass: every graph kernel counted and at most 10% of their time "
               "under [launch stack unknown] in both sessions")
        prof = (res or {})
        kern = prof.get("kernels") or 0
        ok = state == "GPU_STATE_ACTIVITY_TAKEN" and kern >= 10
        yield ("D8.library_after", ok, f"profd {state}, torch.profiler {kern} kernels",
               f"torch.profiler over 10 steps while the library collected: {prof}; profd's "
               f"state {g}; pass: profd says ACTIVITY_TAKEN and the profiler has its kernels")
    finally:
        s.stop()


def c_d8_first(ctx):
    """D8: torch.profiler holds CUPTI when profd attaches: SUBSCRIBER_TAKEN, its trace whole."""
    s = Steps(ctx, "d8-lib-first", ["profiler_hold:60"])
    try:
        s.go_step(0)
        s.wait_line("holding", ctx.scale(60, 30))
        d = s.daemon("d8-first-profd")
        try:
            state, g = wait_state(d, s.pid, {"GPU_STATE_SUBSCRIBER_TAKEN",
                                             "GPU_STATE_READY"}, 30)
        finally:
            open(f"{s.go}.0.stop", "w").close()
            d.stop()
        _, res = s.result(0)
    finally:
        s.stop()
    kern = res.get("kernels") or 0
    ok = state == "GPU_STATE_SUBSCRIBER_TAKEN" and kern > 0
    return [("D8.library_first", ok, f"profd {state}, torch.profiler {kern} kernels",
             f"profd attached while torch.profiler ran: {g}; profiler {res}; pass: "
             f"SUBSCRIBER_TAKEN and the profiler's kernels all there")]
