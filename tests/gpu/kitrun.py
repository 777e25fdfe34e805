# SPDX-License-Identifier: BSD-2-Clause
"""The device kit's machinery (device-check): a run's context (processes under the check's
deadline, logs, results, the tarball) and profd from the kit on a private socket."""
import io
import json
import os
import signal
import subprocess
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

LOG_CAP = 1 << 20          # bytes of each log kept in the tarball (head and tail)
TAR_CAP = 14 << 20         # the tarball stays under what comes back from the machine

class Timeout(Exception):
    pass


class Failed(Exception):
    """A check that could not get as far as a verdict: its workload did not start."""


def tail(text, lines=3, cap=500):
    """The last lines of a program's stderr: the error itself, not the middle of a traceback."""
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
    return " | ".join(kept)[-cap:]


class Ctx:
    def __init__(self, a):
        self.a = a
        self.dry = a.dry_run
        self.kit = os.path.abspath(a.kit)
        self.out = os.path.abspath(a.out)
        self.work = os.path.abspath(a.work or tempfile.mkdtemp(prefix="profd-kit-"))
        self.logs = os.path.join(self.work, "logs")
        os.makedirs(self.logs, exist_ok=True)
        os.makedirs(self.out, exist_ok=True)
        self.py = a.python
        self.start = time.time()
        self.budget = a.budget
        self.deadline = None
        self.results = []
        self.timings = []
        self.facts = {}     # what earlier checks learned: libcupti path, BPF, device
        self.bin = os.path.join(self.kit, "bin")
        self.lib = os.path.join(self.kit, "lib")
        self.probe = os.path.join(self.lib, "libprofd_kit_probe.so")
        self.profd_cupti = os.path.join(self.lib, "libprofd_cupti.so")
        self.procs = []

    # ---- processes ---------------------------------------------------------------------
    def remaining(self):
        left = self.deadline - time.time()
        if left <= 0:
            raise Timeout()
        return left

    def base_env(self, binaries=False):
        env = dict(os.environ)
        for k in list(env):
            # The kit sets what its programs see; the fakes' fault switch (tests) passes.
            if k.startswith(("PROFD_", "CUDA_INJECTION64", "NVTX_INJECTION64")) and \
                    k != "PROFD_KIT_FAKE_FAULT":
                del env[k]
        env["PYTHONUNBUFFERED"] = "1"
        if binaries:
            # Only the kit's own programs get its libraries: a framework's process must keep
            # the system's and its wheels' (the kit's libz or libstdc++ could shadow them).
            env["LD_LIBRARY_PATH"] = self.lib + (":" + env["LD_LIBRARY_PATH"]
                                                 if env.get("LD_LIBRARY_PATH") else "")
        if self.dry:
            env["PROFD_KIT_FAKE_CUPTI"] = os.path.join(self.lib, "libcupti_fake.so")
            env["PROFD_KIT_FAKE_LIB"] = os.path.join(self.lib, "libkit_fake.so")
            env["PROFD_CUPTI_PATH"] = env["PROFD_KIT_FAKE_CUPTI"]
        elif self.facts.get("libcupti"):
            # For programs without a libcupti of their own (launch_bench): the wheel's.
            env["PROFD_PROBE_CUPTI"] = self.facts["libcupti"]
            env["PROFD_CUPTI_PATH"] = self.facts["libcupti"]
        return env

    def spawn(self, log, cmd, env=None, cwd=None):
        """Start cmd in its own process group, output to logs/LOG.{out,err}."""
        o = open(os.path.join(self.logs, log + ".out"), "wb")
        e = open(os.path.join(self.logs, log + ".err"), "wb")
        with open(os.path.join(self.logs, "commands.txt"), "a") as f:
            f.write(f"[{log}] {' '.join(cmd)}\n")
        p = subprocess.Popen(cmd, stdout=o, stderr=e, stdin=subprocess.DEVNULL, env=env,
                             cwd=cwd, start_new_session=True)
        o.close()
        e.close()
        self.procs.append(p)
        return p

    def kill(self, p, sig=signal.SIGKILL, wait=10):
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(wait)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def wait(self, p, limit=None):
        """Wait for p within limit and the check's deadline; a hang is killed and reported."""
        t = self.remaining() if limit is None else min(limit, self.remaining())
        try:
            return p.wait(t)
        except subprocess.TimeoutExpired:
            self.kill(p)
            if limit is not None and limit < self.remaining():
                return None
            raise Timeout()

    def read(self, log, which="out"):
        try:
            with open(os.path.join(self.logs, f"{log}.{which}"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def run(self, log, cmd, env=None, limit=None, cwd=None):
        """
        (rc, stdout, stderr); rc None when limit ran out (the check's deadline raises), 127
        when the program is not there (the machine may lack any tool).
        """
        try:
            p = self.spawn(log, cmd, env, cwd)
        except OSError as e:
            return 127, "", f"{cmd[0]}: {e.strerror}"
        rc = self.wait(p, limit)
        return rc, self.read(log), self.read(log, "err")

    def workload(self, log, name, *args, env=None, limit=None):
        """The workload in the framework's Python: (rc, its JSON result or {}, stderr)."""
        cmd = [self.py, os.path.join(HERE, "workload.py"), name, *map(str, args)]
        if self.dry:
            cmd.append("--fake")
        rc, out, err = self.run(log, cmd, env=env or self.base_env(), limit=limit)
        res = {}
        for line in reversed(out.splitlines()):
            try:
                res = json.loads(line)
                break
            except ValueError:
                continue
        return rc, res, err

    def probe_env(self, dump, **extra):
        env = self.base_env()
        env["CUDA_INJECTION64_PATH"] = self.probe
        env["PROFD_PROBE_OUT"] = dump
        for k, v in extra.items():
            env[k] = str(v)
        if os.path.exists(dump):
            os.unlink(dump)
        return env

    def dump_path(self, name):
        return os.path.join(self.logs, name + ".probe")

    def scale(self, real, dry):
        return dry if self.dry else real

    # ---- results -----------------------------------------------------------------------
    def record(self, name, ok, figure, detail):
        r = {"name": name, "pass": ok, "figure": figure, "detail": detail}
        self.results.append(r)
        with open(os.path.join(self.out, "results.jsonl"), "a") as f:
            f.write(json.dumps(r, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
        state = {True: "PASS", False: "FAIL", None: "----"}[ok]
        print(f"{state} {name}: {figure}", flush=True)

    def write_tar(self):
        """logs.tar.gz of the work folder's logs, each cut to LOG_CAP (head and tail)."""
        path = os.path.join(self.out, "logs.tar.gz")
        tmp = path + ".tmp"
        total = 0
        with tarfile.open(tmp, "w:gz") as tar:
            for name in sorted(os.listdir(self.logs)):
                full = os.path.join(self.logs, name)
                if not os.path.isfile(full):
                    continue
                size = os.path.getsize(full)
                with open(full, "rb") as f:
                    if size > LOG_CAP:
                        data = (f.read(LOG_CAP // 2) + b"\n[... cut ...]\n")
                        f.seek(size - LOG_CAP // 2)
                        data += f.read()
                    else:
                        data = f.read()
                if total + len(data) > TAR_CAP * 4:   # gzip makes text far smaller
                    continue
                total += len(data)
                info = tarfile.TarInfo("logs/" + name)
                info.size = len(data)
                info.mtime = int(time.time())
                tar.addfile(info, io.BytesIO(data))
        if os.path.getsize(tmp) > TAR_CAP:
            os.unlink(tmp)
            return
        os.replace(tmp, path)


# ---- helpers -------------------------------------------------------------------------------

def folded(text):
    out = {}
    for line in text.splitlines():
        stack, _, v = line.rpartition(" ")
        if stack and v.isdigit():
            out[stack] = out.get(stack, 0) + int(v)
    return out


def share(f, pred):
    tot = sum(f.values())
    return (sum(v for s, v in f.items() if pred(s.split(";"))) / tot) if tot else None


def fn_is(frame, name, line=None, file="workload.py"):
    """
    A Python frame of function name in file (nested functions show as
    "outer.<locals>.name (file:line)"), at line when given: not a framework's own forward.
    """
    func, sep, where = frame.partition(" (")
    if not sep or func.split(".")[-1] != name or not where.startswith(file + ":"):
        return False
    return line is None or where == f"{file}:{line})"


def fmt_pct(x):
    return "n/a" if x is None else f"{100 * x:.1f}%"


class Daemon:
    """profd from the kit on a private socket, stopped with SIGTERM."""

    def __init__(self, ctx, log, *args, sock=None):
        self.ctx = ctx
        self.sock = sock or os.path.join(ctx.work, log + ".sock")
        if os.path.exists(self.sock):
            os.unlink(self.sock)
        self.log = log
        self.p = ctx.spawn(log, [os.path.join(ctx.bin, "profd"), "--socket", self.sock, "-v",
                                 *args], env=ctx.base_env(binaries=True))

    def ctl(self, log, *args, limit=60):
        return self.ctx.run(log, [os.path.join(self.ctx.bin, "profctl"), "--socket", self.sock,
                                  *args], env=self.ctx.base_env(binaries=True), limit=limit)

    def ready(self, limit=20):
        """True once profctl status answers; False when profd exited or never answered."""
        end = time.time() + min(limit, self.ctx.remaining())
        while time.time() < end:
            if self.p.poll() is not None:
                return False
            if os.path.exists(self.sock):
                rc, _, _ = self.ctl(f"{self.log}-ping", "status", limit=10)
                if rc == 0:
                    return True
            time.sleep(0.2)
        return False

    def collecting(self, pid, limit):
        """
        Wait until status says pid's CUPTI library collects ("pid N: ready, collecting"): the
        library retries its connection with a growing wait, so that may take seconds.
        """
        end = time.time() + min(limit, self.ctx.remaining())
        while time.time() < end and self.p.poll() is None:
            # One log for the polls: the last answer is the one worth keeping.
            rc, out, _ = self.ctl(f"{self.log}-status", "status", limit=10)
            for line in out.splitlines():
                if line.strip().startswith(f"pid {pid}:") and "collecting" in line:
                    return True
            time.sleep(0.5)
        return False

    def stop(self):
        self.ctx.kill(self.p, signal.SIGTERM, wait=20)
        return self.p.returncode
