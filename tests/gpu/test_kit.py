# SPDX-License-Identifier: BSD-2-Clause
"""The device kit, dry: packed from this build (tests/gpu/pack-kit), then run with --dry-run
over the fake CUPTI and the fake GPU, the real daemon doing part B. Checks what the device
run relies on: the files that come back, the JSON, every check present and settled the way
the fakes make certain, and that a check fails when the fake lies (PROFD_KIT_FAKE_FAULT).
Also that the probe enables what libprofd_cupti enables (its copies of launch.c's list of
traced calls and core.c's kinds)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

from profd_e2e import check, fail, log, require_root

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("PROFD_BUILD") or os.path.join(REPO, "build")

require_root()

# ---- the probe's lists are the library's ---------------------------------------------------
# Both build their tables from cupti/traced_apis.def and cupti/wanted_kinds.def; a list of
# their own in either would drift. The dry run's dumps then show the probe enabled them all.
def src(*p):
    with open(os.path.join(REPO, *p)) as f:
        return f.read()


def_apis = re.findall(r"^(RT|DRV)\((\w+), \"\w+\", (true|false)\)$",
                      src("cupti", "traced_apis.def"), re.M)
def_kinds = re.findall(r"^KIND\((\w+)\)", src("cupti", "wanted_kinds.def"), re.M)
check(len(def_apis) > 40 and "MEMORY2" in def_kinds and
      ("RT", "cudaMalloc_v3020", "true") in def_apis,
      f"the shared lists read ({len(def_apis)} calls, kinds {def_kinds})")
for where, text in (("cupti/launch.c", src("cupti", "launch.c")),
                    ("cupti/core.c", src("cupti", "core.c")),
                    ("tests/gpu/cupti_probe.c", src("tests", "gpu", "cupti_probe.c"))):
    own_apis = re.findall(r"^\s*(?:RT|DRV)\(\w+,", text, re.M)
    own_kinds = re.findall(r"^\s*CUPTI_ACTIVITY_KIND_\w+,", text, re.M)
    check(not own_apis and not own_kinds, f"{where} keeps no list of its own ({own_apis[:2]} "
          f"{own_kinds[:2]})")
check('#include "traced_apis.def"' in src("cupti", "launch.c")
      and '#include "wanted_kinds.def"' in src("cupti", "core.c")
      and all(f'#include "{d}"' in src("tests", "gpu", "cupti_probe.c")
              for d in ("traced_apis.def", "wanted_kinds.def")),
      "the library and the probe build their tables from the shared lists")

# ---- packing -------------------------------------------------------------------------------
tmp = tempfile.mkdtemp(prefix="profd-kit-test-")
kit = os.path.join(tmp, "kit")
r = subprocess.run([os.path.join(HERE, "pack-kit"), kit, BUILD], capture_output=True, text=True,
                   timeout=120)
log(r.stdout + r.stderr)
check(r.returncode == 0, "pack-kit packs this build")
libs = os.listdir(os.path.join(kit, "lib"))
check(not any(re.match(r"(libc|libm|libpthread|libdl|ld-linux.*)\.so", n) for n in libs),
      "glibc's own libraries stay out of the kit")
check({"libprofd_cupti.so", "libprofd_kit_probe.so", "libcupti_fake.so",
       "libkit_fake.so"} <= set(libs), "the CUPTI library, the probe and the fakes are in it")
out = subprocess.run(["ldd", os.path.join(kit, "bin", "profd")], capture_output=True, text=True,
                     env=dict(os.environ, LD_LIBRARY_PATH=os.path.join(kit, "lib"))).stdout
check("not found" not in out and os.path.join(kit, "lib") in out,
      "profd resolves its libraries from the kit")
size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(kit) for f in fs)
check(size < 60 << 20, f"the kit travels ({size >> 20} MiB)")
with open(os.path.join(kit, "MANIFEST")) as f:
    check("needs glibc 2." in f.read(), "MANIFEST says which glibc the kit needs")


def dry(out, *extra, env=None):
    t0 = time.time()
    r = subprocess.run([os.path.join(HERE, "device-check"), "--dry-run", "--kit", kit, "--out", out,
                        "--work", out + ".work", *extra], capture_output=True, text=True,
                       timeout=220, env=env)
    log(f"device-check {' '.join(extra)}: exit {r.returncode} in {time.time() - t0:.1f} s\n"
        + r.stdout + r.stderr[-3000:])
    check(r.returncode == 0, "device-check exits 0")
    with open(os.path.join(out, "device-run.json")) as f:
        run = json.load(f)
    return {c["name"]: c for c in run["checks"]}, run, time.time() - t0


# ---- the whole dry run ----------------------------------------------------------------------
out = os.path.join(tmp, "out")
res, run, secs = dry(out)
check(secs < 120, f"the dry run is quick ({secs:.0f} s)")
files = sorted(os.listdir(out))
check(files == ["device-run.json", "logs.tar.gz", "results.jsonl", "summary.txt"],
      f"only the four result files come back ({files})")
check(run["device"] == "dry run (fake CUPTI)" and re.fullmatch(r"[0-9a-f]{40}.*", run["commit"] or "")
      and re.match(r"\d{4}-\d\d-\d\dT", run["date"]), f"device, commit and date ({run['device']}, "
      f"{run['commit']}, {run['date']})")
with open(os.path.join(out, "results.jsonl")) as f:
    lines = [json.loads(ln) for ln in f]
check(lines == run["checks"], "results.jsonl holds the same lines, written as the checks ran")
for c in run["checks"]:
    if set(c) != {"name", "pass", "figure", "detail"} or c["pass"] not in (True, False, None):
        fail(f"malformed check {c}")
want = {
    # Settled by the fakes: they model real CUPTI's documented behaviour.
    "kit": True, "D0.versions": True, "bpf": True, "D1.injection": True,
    "D7.uprobe_addresses": True, "D3.correlation": True, "D2.clock_at-init": True,
    "D2.clock_late": True, "D4.graphs": True, "D5.nvtx": True, "D5.nvtx_no_device": True,
    "D8.profiler_first": True, "M.correlation": True, "M.expandable": True,
    # The library against profd over the fake CUPTI: the plumbing of D6, D4's and D8's.
    "D6.delivery_defaults": True, "D6.delivery_shared_buffers": True,
    "D6.delivery_buffer_64k": True, "D2.zero_status": True, "D4.library_graphs": True,
    "D8.library_after": True, "D8.library_first": True, "B.memory": True,
    "B1.join": True, "B2.stacks": True, "B.nvtx": True, "B.gpu_idle": True, "B.trace": True,
    "B3.uprobe_launches": True,
    # The fake takes the buffers and the clock as Kineto does (the review's item 1).
    "D8.profiler_after": False,
}
for name, p in want.items():
    c = res.get(name)
    check(c is not None and c["pass"] is p, f"{name} is {p} ({c and (c['figure'], c['detail'][:300])})")
# The library's one CUPTI session across profd's stop and start, which did disable it.
c = res.get("D4.library_graphs") or {}
check("CUPTI {'sessions': 1, 'kernel_disables': 1}" in c.get("detail", ""),
      f"D4's library replays span a disable/enable of one CUPTI session ({c.get('detail')})")
# Timing figures mean nothing on a loaded machine without a GPU: there only, no verdict asked.
for name in ("D9.launch_overhead", "B.overhead", "B.busy_vs_profiler"):
    check(name in res and res[name]["figure"], f"{name} reports a figure ({res.get(name)})")
with tarfile.open(os.path.join(out, "logs.tar.gz")) as tar:
    names = tar.getnames()
check(any(n.endswith("d3.probe") for n in names) and "logs/commands.txt" in names
      and "logs/device-run.json" in names, f"the tarball holds the logs ({len(names)} files)")
with tarfile.open(os.path.join(out, "logs.tar.gz")) as tar:
    d3 = tar.extractfile("logs/d3.probe").read().decode()
enables = re.findall(r"^P (\d+) (\d+)$", d3, re.M)
check(enables == [(str(len(def_apis)), str(len(def_kinds)))],
      f"the probe enabled every shared call and kind ({enables})")

# ---- a lying fake fails its check -----------------------------------------------------------
# With the library against profd too: a record on another id falls under the unknown stack,
# zero timestamps reach profd's status counters.
for fault, only, name in (("corr", "D3", "D3.correlation"), ("corr", "M", "M.correlation"),
                          ("corr", "D4", "D4.library_graphs"), ("zero", "D6", "D2.zero_status"),
                          ("clock", "D2", "D2.clock_at-init"),
                          ("zero", "D2", "D2.clock_late"), ("proc", "D7", "D7.uprobe_addresses")):
    res, _, _ = dry(os.path.join(tmp, "fault-" + fault), "--only", only,
                    env=dict(os.environ, PROFD_KIT_FAKE_FAULT=fault))
    check(res.get(name, {}).get("pass") is False,
          f"with the fake's fault {fault!r}, {name} fails ({res.get(name)})")

# ---- a hang costs its check only ------------------------------------------------------------
t0 = time.time()
res, _, _ = dry(os.path.join(tmp, "fault-hang"), "--only", "D3,D4", "--check-timeout", "3",
                env=dict(os.environ, PROFD_KIT_FAKE_FAULT="hang"))
check(res.get("D3.correlation", {}).get("figure") == "timed out" and time.time() - t0 < 30,
      f"a hanging workload times out ({res.get('D3.correlation')}, {time.time() - t0:.0f} s)")
check(res.get("D4.graphs", {}).get("pass") is True, "the next check still runs")

# ---- bad input -------------------------------------------------------------------------------
r = subprocess.run([os.path.join(HERE, "device-check"), "--dry-run", "--kit", kit, "--out",
                    os.path.join(tmp, "bad"), "--only", "D42"], capture_output=True, text=True,
                   timeout=30)
check(r.returncode == 2 and "unknown check" in r.stderr, f"an unknown check is refused ({r.stderr.strip()})")
r = subprocess.run([os.path.join(HERE, "device-check"), "--kit", os.path.join(tmp, "none"),
                    "--out", os.path.join(tmp, "bad")], capture_output=True, text=True, timeout=30)
check(r.returncode == 2 and "no kit" in r.stderr, f"a missing kit is refused ({r.stderr.strip()})")
# 25 MiB of kit per run: kept only when a check failed (fail() exits before this).
shutil.rmtree(tmp, ignore_errors=True)
log("PASS")
