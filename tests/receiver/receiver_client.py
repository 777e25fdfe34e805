# SPDX-License-Identifier: BSD-2-Clause
"""Start and query the stand-in receiver (receiver.py) from a test. Standard library only, so
the e2e tests keep running under the system python; the receiver itself runs under the python
that scripts/test-venv prints."""
import json
import os
import select
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
RECEIVER = os.path.join(HERE, "receiver.py")


class Unavailable(Exception):
    """The receiver's Python environment cannot be made here (no PyPI, no go)."""


def venv_python():
    """The python of scripts/test-venv (made on first use); raises Unavailable."""
    try:
        r = subprocess.run([os.path.join(ROOT, "scripts", "test-venv")], capture_output=True,
                           text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable(f"scripts/test-venv: {e}")
    if r.returncode != 0 or not r.stdout.strip():
        raise Unavailable(f"scripts/test-venv failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return r.stdout.strip().splitlines()[-1]


class Receiver:
    """receiver.py as a child process. args: extra receiver options; prefix: a command to run
    it under (["ip", "netns", "exec", "NS"]). The first stdout line gives the address. With
    --tls-cert in args the receiver speaks HTTPS: tls_ca is the CA file its certificate is
    checked against, tls_client a (cert, key) pair for our own queries when it wants one."""

    def __init__(self, *args, listen="127.0.0.1:0", state=None, prefix=(), logpath=None,
                 tls_ca=None, tls_client=None):
        self.args = list(args)
        self.listen = listen
        self.state = state
        self.prefix = list(prefix)
        if not logpath:
            fd, logpath = tempfile.mkstemp(prefix="receiver-", suffix=".log")
            os.close(fd)
        self.logpath = logpath
        self.proc = None
        self.host = self.port = self.grpc = None
        self.tls_ca = tls_ca
        self.tls_client = tls_client

    def start(self, timeout=60):
        if self.proc and self.proc.poll() is None:
            raise RuntimeError("receiver already running")
        python = venv_python()
        cmd = [*self.prefix, python, RECEIVER, "--listen", self.listen, *self.args]
        if self.state:
            cmd += ["--state", self.state]
        self.logf = open(self.logpath, "a")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.logf)
        deadline = time.time() + timeout
        text = self._line(deadline)
        if not text.startswith("listening "):
            self.kill()
            raise RuntimeError(f"receiver did not start ({text!r}): {self.log_text()[-2000:]}")
        hostport = text.split()[1]
        host, _, port = hostport.rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)
        # Later starts (after a kill) listen on the same address.
        self.listen = hostport
        if "--grpc-listen" in self.args:
            text = self._line(deadline)
            if not text.startswith("grpc "):
                self.kill()
                raise RuntimeError(f"receiver did not start gRPC ({text!r})")
            self.grpc = text.split()[1]
            i = self.args.index("--grpc-listen")
            self.args[i + 1] = self.grpc
        return self

    def _line(self, deadline):
        line = b""
        while not line.endswith(b"\n") and time.time() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                c = os.read(self.proc.stdout.fileno(), 1)
                if not c:
                    break
                line += c
            elif self.proc.poll() is not None:
                break
        return line.decode().strip()

    @property
    def url(self):
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if "--tls-cert" in self.args else "http"
        return f"{scheme}://{host}:{self.port}"

    def log_text(self):
        try:
            with open(self.logpath) as f:
                return f.read()
        except OSError:
            return ""

    def kill(self):
        """SIGKILL, as a crash would: nothing is flushed but what was already written."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self):
        return self.start() if not self.proc else self

    def __exit__(self, *exc):
        self.stop()
        if exc[0] is not None:
            sys.stderr.write("---- receiver log ----\n" + self.log_text()[-4000:] + "\n")

    # ---- queries ---------------------------------------------------------------------------

    def _req(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        ctx = None
        if self.url.startswith("https:"):
            ctx = ssl.create_default_context(cafile=self.tls_ca)
            if self.tls_client:
                ctx.load_cert_chain(*self.tls_client)
        try:
            with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{method} {path}: HTTP {e.code}: {e.read().decode()[:500]}")

    def stats(self):
        return self._req("GET", "/_stats")

    def profiles(self, service, source="pyroscope", name=None):
        q = {"service": service, "source": source}
        if name:
            q["name"] = name
        return self._req("GET", "/_profiles?" + urllib.parse.urlencode(q))

    def fault(self, **spec):
        return self._req("POST", "/_fault", spec)

    def clear_faults(self):
        return self._req("POST", "/_fault", {"clear": True})

    def reset(self):
        return self._req("POST", "/_reset", {})


def series_of(stats, source="pyroscope", **match):
    """The series of a /_stats answer whose labels include every match item."""
    return [s for s in stats[source]["series"]
            if all(s["labels"].get(k) == v for k, v in match.items())]


def total_of(series, vtype, unique=False):
    key = "unique_values" if unique else "values"
    return sum(s[key].get(vtype, 0) for s in series)
