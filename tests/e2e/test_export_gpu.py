# SPDX-License-Identifier: BSD-2-Clause
"""GPU and off-CPU profiles in the fleet export, end to end without a GPU: libprofd_cupti.so over
the fake libcupti in a real process (tests/fixtures/gpu_app, "sleep" mode: kernels, and sleeps with
and without them), the real daemon with --off-cpu exporting to the stand-in receiver's Pyroscope
and OTLP endpoints every second.

Each backend must get, beside process_cpu, a `gpu` series with gpu_kernel_time/nanoseconds and
gpu_kernel_launches/count whose stacks are the launching CPU stacks with the kernel as leaf, and an
`off_cpu` series with off_cpu/nanoseconds; each total equal to what profctl's dump of the process
holds for the same value: nothing lost, nothing counted twice.
"""
import os
import sys
import tempfile
import time

from profd_e2e import Daemon, GpuApp, check, fail, log, require_root, skip, total

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "receiver"))
import receiver_client as rc  # noqa: E402

SERVICE = "gpu-export-e2e"
require_root()
try:
    rc.venv_python()
except rc.Unavailable as e:
    skip(str(e))
tmp = tempfile.mkdtemp(prefix="profd-export-gpu-")
recv = rc.Receiver(logpath=os.path.join(tmp, "receiver.log"))
try:
    recv.start()
except RuntimeError as e:
    fail(str(e))

os.environ["OTEL_SERVICE_NAME"] = SERVICE
app = GpuApp(tmp, 5, "sleep")
try:
    # 499 Hz: the app mostly sleeps (tens of ms of CPU in 5 s): at 99 Hz its CPU samples were
    # 0 to 6, and 0 fails the check below.
    with Daemon("--pid", str(app.pid), "--off-cpu", "--frequency", "499", "--pyroscope", recv.url,
                "--otlp", recv.url,
                "--export-interval", "1s", "--export-spool", os.path.join(tmp, "spool"),
                socket_path=app.sock) as d:
        code = app.proc.wait(90)
        check(code == 0, f"the application ran to completion with the library (exit {code})")
        # Held waits and kernel records are settled a few seconds after the end; then one more
        # interval carries them out.
        time.sleep(6)
        pid = ["--pid", str(app.pid)]
        want = {
            ("gpu", "gpu_kernel_time/nanoseconds"): total(d.folded(*pid, "--value", "gpu")),
            ("gpu", "gpu_kernel_launches/count"): total(d.folded(*pid, "--value",
                                                                 "gpu-kernels")),
            ("off_cpu", "off_cpu/nanoseconds"): total(d.folded(*pid, "--value", "off-cpu")),
            ("process_cpu", "samples/count"): total(d.folded(*pid)),
        }
        log(f"dump: {want}")
        check(all(v > 0 for v in want.values()), "the dump has every kind of value")
        st = recv.stats()
        for (name, vtype), v in want.items():
            got = rc.total_of(rc.series_of(st, service_name=SERVICE, __name__=name), vtype,
                              unique=True)
            check(got == v, f"pyroscope {name} {vtype}: {got} == the dump's {v}")
            otlp = [s for s in st["otlp"]["series"]
                    if s["labels"].get("service.name") == SERVICE]
            got = sum(s["unique_values"].get(vtype, 0) for s in otlp)
            check(got == v, f"otlp {vtype}: {got} == the dump's {v}")
        # GPU stacks: the launching CPU stack, the kernel as leaf.
        prof = recv.profiles(SERVICE, name="gpu")["gpu_kernel_time/nanoseconds"]
        kernels = {s.split(";")[-1] for s in prof}
        log(f"gpu leaves: {sorted(kernels)}")
        check(prof and all(";" in s for s in prof), "every GPU stack has CPU frames under it")
        check(any("launch" in s or "main" in s for s in prof),
              f"the launching CPU frames are there: {list(prof)[:2]}")
        # Folded output marks GPU frames with _[g]; pprof names them plainly.
        leaves = {s.split(";")[-1].removesuffix("_[g]")
                  for s in d.folded(*pid, "--value", "gpu")}
        check(kernels == leaves, f"the leaves are the dump's kernels: {kernels} vs {leaves}")
finally:
    app.kill()
    recv.stop()
log("PASS")
