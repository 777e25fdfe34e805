#!/usr/bin/env python3
# A fixture that lives in read(2) shows kernel frames (suffix _[k]) above its user frame.
import re
import time
from profd_e2e import *

require_root()
p = start_fixture("syscaller", 8)
try:
    with Daemon("--pid", str(p.pid), "--frequency", "499") as d:
        p.wait(30)
        time.sleep(0.5)
        f = d.folded("--pid", str(p.pid))
finally:
    if p.poll() is None:
        p.kill()

for s, c in sorted(f.items(), key=lambda kv: -kv[1])[:8]:
    log(f"  {c:6d} {s}")
reads = total(f, lambda fr: "do_reads" in fr)
check(reads > 500, f"samples in do_reads ({reads})")


def kernel_above(fr):
    i = fr.index("do_reads")
    above = fr[i + 1:]
    return bool(above) and all(x.endswith("_[k]") for x in above)


kabove = total(f, lambda fr: "do_reads" in fr and kernel_above(fr))
check(kabove >= 0.5 * reads, f"most do_reads samples have kernel frames above ({kabove}/{reads})")
readpath = re.compile(r"^(vfs_read|ksys_read|__x64_sys_read|read_zero|iov_iter_zero|"
                      r"clear_user.*|__clear_user|rep_stos_alternative)_\[k\]$")
hits = total(f, lambda fr: "do_reads" in fr and any(readpath.match(x) for x in fr))
check(hits >= 0.5 * reads, f"the read path is named in the kernel frames ({hits}/{reads})")
check(not any(x.endswith("_[k]") for s in f for x in s.split(";")[:1]),
      "the root frame is never a kernel frame")
log("PASS")
