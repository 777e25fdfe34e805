# SPDX-License-Identifier: BSD-2-Clause
"""GPU memory by stack end to end, without a GPU: the gpu_app fixture in its "memory" mode
allocates 4 x 1 MiB from alloc_weights (cudaMalloc, never released) and 256 KiB per step from
alloc_activations (cudaMallocAsync from a pool, released by the next step's free_activations),
and releases once an address it never allocated. It writes the exact bytes it allocated and
what is still live, then stays until killed.

Checked: --value gpu-memory gives exactly those bytes under the allocating functions,
--value gpu-memory-live exactly what is still allocated (no stack goes negative for the stray
release), both in every flame graph format, table and top, status counts the records; and after
the process is gone nothing of it is live.
"""
import gzip
import json
import os
import tempfile
import time

from profd_e2e import Daemon, GpuApp, check, fail, has_chain, log, require_root

require_root()
tmp = tempfile.mkdtemp(prefix="profd-gpu-mem-")
app = GpuApp(tmp, 3, "memory")
pid = app.pid

W_LEAF = "[gpu memory]_[g]"
A_LEAF = "[gpu memory pool]_[g]"


def by_fn(folded, fn, leaf):
    """Bytes of the stacks through fn that end in leaf."""
    return sum(v for s, v in folded.items()
               if s.split(";")[-1] == leaf and fn in s.split(";"))


try:
    with Daemon("--pid", str(pid), "--frequency", "99", socket_path=app.sock) as d:
        deadline = time.time() + 90
        while time.time() < deadline and "acts_live" not in app.read_out():
            if app.proc.poll() is not None:
                fail(f"gpu_app exited with {app.proc.returncode}")
            time.sleep(0.2)
        res = {k: int(v) for k, v in app.read_out().items()}
        log(f"fixture: {res}")
        check(res.get("rounds", 0) >= 10, f"enough rounds ({res.get('rounds')})")
        check(res["weights_live"] == 4 << 20 and res["acts_live"] == 256 << 10,
              "the fixture still holds its weights and the last step's activations")
        # The join settles within the library's flush interval; give it a few.
        time.sleep(2)

        mem = d.folded("--pid", str(pid), "--value", "gpu-memory")
        log("\n".join(f"{v} {s}" for s, v in sorted(mem.items(), key=lambda x: -x[1])[:6]))
        w = by_fn(mem, "alloc_weights", W_LEAF)
        a = by_fn(mem, "alloc_activations", A_LEAF)
        check(w == res["weights_bytes"],
              f"bytes allocated under alloc_weights are exact ({w} vs {res['weights_bytes']})")
        check(a == res["acts_bytes"],
              f"bytes allocated under alloc_activations are exact ({a} vs {res['acts_bytes']})")
        check(sum(mem.values()) == res["weights_bytes"] + res["acts_bytes"],
              "no other stack has allocated bytes (the stray release added nothing)")
        check(all(has_chain(s.split(";"), ["step", "alloc_weights"]) for s in mem
                  if "alloc_weights" in s), "weights stacks run through step;alloc_weights")
        check(not any("free_activations" in s or "free_old" in s for s in mem),
              "releases are never charged as allocations")

        live = d.folded("--pid", str(pid), "--value", "gpu-memory-live")
        log("\n".join(f"{v} {s}" for s, v in live.items()))
        lw = by_fn(live, "alloc_weights", W_LEAF)
        la = by_fn(live, "alloc_activations", A_LEAF)
        check(lw == res["weights_live"], f"live weights are exact ({lw} vs {res['weights_live']})")
        check(la == res["acts_live"],
              f"live activations are the last step's only ({la} vs {res['acts_live']})")
        check(sum(live.values()) == lw + la, "nothing else is live")

        # Every format carries the columns with their unit.
        for fmt, name in (("json", "p.json"), ("pprof", "p.pb.gz"), ("speedscope", "p.ss.json"),
                          ("svg", "p.svg")):
            path = os.path.join(tmp, name)
            r = d.ctl("dump", "flamegraph", "--pid", str(pid), "--value", "gpu-memory-live",
                      "--format", fmt, "-o", path)
            check(r.returncode == 0, f"{fmt} with --value gpu-memory-live ({r.stderr.strip()})")
            with open(path, "rb") as f:
                data = f.read()
            if fmt == "json":
                p = json.loads(data)
                check(any(vt.get("type") == "gpu_memory_live" and vt.get("unit") == "bytes"
                          for vt in p.get("valueTypes", p.get("value_types", []))),
                      "the JSON profile names gpu_memory_live in bytes")
            elif fmt == "pprof":
                check(b"gpu_memory_live" in gzip.decompress(data),
                      "pprof names the gpu_memory_live column")
            elif fmt == "svg":
                check(b"alloc_weights" in data and b"GPU memory live" in data,
                      "the SVG draws alloc_weights under its title")
            else:
                check(b"alloc_weights" in data, f"{fmt} has the allocating frames")

        r = d.ctl("table", "--pid", str(pid), "--value", "gpu-memory", "--sort", "total",
                  "--limit", "0")
        log(r.stdout)
        check(r.returncode == 0 and "alloc_weights" in r.stdout and "alloc_activations"
              in r.stdout, f"table orders by gpu-memory ({r.stderr.strip()})")
        r = d.ctl("top", "--pid", str(pid), "--value", "gpu-memory-live", "--window", "60s",
                  "--sort", "total", timeout=30)
        log(r.stdout)
        check(r.returncode == 0 and "alloc_weights" in r.stdout,
              f"top orders by gpu-memory-live ({r.stderr.strip()})")

        r = d.ctl("status")
        log(r.stdout)
        check("memory records" in r.stdout and "1 releases of allocations not tracked"
              in r.stdout, "status counts the memory records and the stray release")
        # 4 MiB of weights and the last 256 KiB of activations, in 5 allocations.
        check("memory live 4.2 MiB in 5 allocations" in r.stdout,
              "status shows the live allocations")

        # The process ends: the driver released its memory, nothing of it is live now.
        app.kill()
        time.sleep(1.5)
        r = d.ctl("dump", "flamegraph", "--pid", str(pid), "--value", "gpu-memory-live",
                  "--format", "folded")
        after = sum(int(l.rsplit(" ", 1)[1]) for l in r.stdout.splitlines() if l.strip())
        check(after == 0, f"nothing is live after the process exited ({after})")
        check(sum(d.folded("--pid", str(pid), "--value", "gpu-memory").values())
              == res["weights_bytes"] + res["acts_bytes"],
              "what it allocated stays in the window")
finally:
    app.kill()
log("PASS")
