# SPDX-License-Identifier: BSD-2-Clause
"""Helpers for profd's end-to-end tests: real daemon, real kernel, real socket.

A test that cannot run here (not root, BPF refused) exits 77 so ctest reports a skip; with
CI=true such a skip is a failure, because CI runs as root on a machine where BPF works.
"""
import atexit
import os
import pwd
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

BUILD = os.environ.get("PROFD_BUILD") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build")
PROFD = os.path.join(BUILD, "bin", "profd")
PROFCTL = os.path.join(BUILD, "bin", "profctl")
FIXTURES = os.path.join(BUILD, "tests", "fixtures")
# Built with ASan and UBSan: memory and latency bounds are not checked (see e2e.cmake).
SANITIZED = os.environ.get("PROFD_SANITIZED") == "1"
SKIP = 77


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def skip(why):
    if os.environ.get("CI") == "true":
        log(f"FAIL: would skip in CI: {why}")
        sys.exit(1)
    log(f"SKIP: {why}")
    sys.exit(SKIP)


def fail(why):
    log(f"FAIL: {why}")
    sys.exit(1)


def check(cond, what):
    if not cond:
        fail(what)
    log(f"ok: {what}")


def require_root():
    if os.geteuid() != 0:
        skip("needs root for BPF and perf events")


def temp_user(name):
    """A system user and its group, made for the test (an older one of that name removed
    first) and removed when the test's process exits. Returns its passwd entry."""
    require_root()
    subprocess.run(["userdel", name], capture_output=True)
    subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell",
                    "/usr/sbin/nologin", name], check=True)
    atexit.register(subprocess.run, ["userdel", name], capture_output=True)
    return pwd.getpwnam(name)


def as_user(pw):
    """The command prefix that runs a command as pw's user, with its group and no others."""
    return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups"]


def vm_bytes(pid, key):
    """A memory figure of /proc/PID/status (VmRSS, VmHWM, ...) in bytes; 0 when absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def cpythons():
    """[(label, executable)] of the CPythons at hand: pyenv's 3.8-3.13, Debian's static 3.11,
    and the 3.14 builds PROFD_TEST_PYTHON314 names (colon-separated)."""
    pyenv = os.environ.get("PROFD_PYENV", "/root/.pyenv/versions")
    out = []
    for v in ("3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"):
        exe = os.path.join(pyenv, v, "bin", "python" + v.rsplit(".", 1)[0])
        if os.access(exe, os.X_OK):
            out.append((v, exe))
    if os.access("/usr/bin/python3.11", os.X_OK):
        out.append(("3.11-debian-static", "/usr/bin/python3.11"))
    for exe in filter(None, os.environ.get("PROFD_TEST_PYTHON314", "").split(":")):
        if os.access(exe, os.X_OK):
            out.append((os.path.basename(exe), exe))
    return out


def fixture(name):
    path = os.path.join(FIXTURES, name)
    if not os.path.exists(path):
        fail(f"fixture {path} not built")
    return path


class Daemon:
    """profd on a private socket; stopped with SIGTERM on exit. prefix: a command that execs
    profd in the end (nsenter, unshare), so that the process started is profd itself."""

    def __init__(self, *args, socket_path=None, env=None, prefix=()):
        self.tmp = tempfile.mkdtemp(prefix="profd-e2e-")
        os.chmod(self.tmp, 0o755)
        self.sock = socket_path or os.path.join(self.tmp, "run", "profd.sock")
        self.logpath = os.path.join(self.tmp, "profd.log")
        self.args = list(args)
        self.env = env
        self.prefix = list(prefix)
        self.proc = None

    def __enter__(self):
        require_root()
        self.logf = open(self.logpath, "w")
        self.proc = subprocess.Popen([*self.prefix, PROFD, "--socket", self.sock, "-v",
                                      *self.args],
                                     stdout=self.logf, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                text = self.log_text()
                if "needs root" in text or "Operation not permitted" in text:
                    skip(f"profd cannot use BPF here: {text.strip()[-300:]}")
                fail(f"profd exited with {self.proc.returncode}: {text[-2000:]}")
            if os.path.exists(self.sock) and self.ping():
                return self
            time.sleep(0.05)
        fail(f"profd did not start serving in 20 s: {self.log_text()[-2000:]}")

    def ping(self):
        """True once the daemon answers Hello: the kernel accepts connections on the listening
        socket before the daemon's loop runs, so a bare connect proves nothing."""
        try:
            s = connect(self.sock, timeout=5)
            s.sendall(req_hello())
            body = read_frame(s)
            s.close()
            return body is not None and error_of(body) is None
        except OSError:
            return False

    def log_text(self):
        self.logf.flush()
        with open(self.logpath) as f:
            return f.read()

    def ctl(self, *args, user=None, timeout=60):
        cmd = [PROFCTL, "--socket", self.sock, *args]
        if user:
            cmd = ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups",
                   *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def folded(self, *args):
        r = self.ctl("dump", "flamegraph", "--format", "folded", *args)
        if r.returncode != 0:
            fail(f"profctl dump failed ({r.returncode}): {r.stderr}")
        return parse_folded(r.stdout)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                fail("profd did not exit within 20 s of SIGTERM")
        return self.proc.returncode

    def __exit__(self, *exc):
        self.stop()
        if exc[0] is not None or os.environ.get("PROFD_E2E_LOG"):
            log("---- profd log ----\n" + self.log_text()[-4000:])
        self.logf.close()


def parse_folded(text):
    out = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            fail(f"malformed folded line: {line!r}")
        out[stack] = out.get(stack, 0) + int(count)
    return out


def total(folded, pred=lambda frames: True):
    return sum(c for s, c in folded.items() if pred(s.split(";")))


def has_chain(frames, chain):
    """True if `chain` appears as consecutive frames (root first) in `frames`."""
    n = len(chain)
    return any(frames[i:i + n] == chain for i in range(len(frames) - n + 1))


def start_fixture(name, *args):
    p = subprocess.Popen([fixture(name), *map(str, args)])
    return p


# ---- raw protocol, for the bad-input tests ---------------------------------------------------

PROTOCOL_VERSION = 1


class GpuApp:
    """
    The gpu_app fixture over the fake libcupti (tests/fixtures/gpu_app/gpu_app.c), started and
    waited for until it has written its pid. lib: the libprofd_cupti path as the program gets
    it (cwd for a relative one); extra: arguments after OUT_FILE. Fails the test when the
    libraries are not built or the program does not start.
    """

    def __init__(self, tmp, seconds, *extra, lib=None, cwd=None):
        self.lib = os.environ.get("PROFD_CUPTI_SO")
        fake = os.environ.get("PROFD_FAKE_CUPTI")
        if not self.lib or not fake or not os.path.exists(self.lib) or not os.path.exists(fake):
            fail(f"libprofd_cupti ({self.lib}) or the fake libcupti ({fake}) is not built")
        self.out_path = os.path.join(tmp, "out")
        self.sock = os.path.join(tmp, "run", "profd.sock")
        env = dict(os.environ, PROFD_SOCKET=self.sock, PROFD_CUPTI_PATH=fake)
        self.proc = subprocess.Popen(
            [fixture("gpu_app"), lib or self.lib, str(seconds), self.out_path, *extra], env=env,
            cwd=cwd)
        deadline = time.time() + 10
        while time.time() < deadline and "pid" not in self.read_out():
            if self.proc.poll() is not None:
                fail(f"gpu_app exited with {self.proc.returncode} before it started")
            time.sleep(0.05)
        if "pid" not in self.read_out():
            self.kill()
            fail("gpu_app did not start in 10 s")
        self.pid = int(self.read_out()["pid"])

    def read_out(self):
        """What the program wrote: {"pid": "N", "rounds": "N", ...}; {} before it wrote."""
        try:
            with open(self.out_path) as f:
                return dict(line.split() for line in f if line.strip())
        except FileNotFoundError:
            return {}

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(num, value):
    return varint(num << 3) + varint(value)


def field_bytes(num, data):
    return varint(num << 3 | 2) + varint(len(data)) + data


def frame(body):
    return struct.pack(">I", len(body)) + body


def req_hello(version=PROTOCOL_VERSION):
    return frame(field_bytes(1, field_varint(1, version)))


def req_status():
    return frame(field_bytes(2, b""))


def req_dump(pid=None):
    body = field_varint(1, pid) if pid else b""
    return frame(field_bytes(3, body))


def read_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def read_frame(s):
    hdr = read_exact(s, 4)
    if hdr is None:
        return None
    (n,) = struct.unpack(">I", hdr)
    return read_exact(s, n)


def fields(buf):
    """(field number, wire type, raw value) of each field of a message, in order."""
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _read_varint(buf, i)
        elif wt == 2:
            ln, i = _read_varint(buf, i)
            v, i = buf[i:i + ln], i + ln
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        yield num, wt, v


def top_fields(body):
    """Top-level fields of a message: {field number: raw value} (last one wins)."""
    return {num: v for num, _, v in fields(body)}


def _read_varint(b, i):
    shift = v = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def error_of(body):
    """(code, message) if the Response is an Error, else None."""
    f = top_fields(body)
    if 4 not in f:
        return None
    e = top_fields(f[4])
    return e.get(1, 0), e.get(2, b"").decode()


def connect(path, timeout=10):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    return s
