#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The export's transport security and credentials against a real TLS server: the stand-in
receiver over HTTPS (Python's ssl) with a throw-away CA, a server certificate for 127.0.0.1 (an
IP SAN) and a client certificate, all made here with `openssl`. Each case runs the real daemon on
a CPU burner (`--pid`, export every second) and compares what arrives with profctl's dump:

a) https with --export-ca-file, Pyroscope and OTLP: every sample arrives over TLS;
b) https without it: the system CAs do not know ours, so nothing arrives, `profctl status`'s
   last_error names the certificate problem and the requests stay in the spool (every sample of
   the dump in it); a profd started again on that spool with the CA file delivers them all;
c) mTLS (the receiver wants a client certificate), Pyroscope and OTLP: without
   --export-cert-file/--export-key-file every handshake fails (the receiver says why; profd shows
   a transport error), with them the spool arrives, under our certificate's name;
d) bearer token and basic auth files: a wrong one gets 401, status says auth_failing and keeps
   the spool; the config file (--config) pointed at the right file and a SIGHUP deliver it;
e) --export-header "X-Scope-OrgID: team-a" reaches the receiver as the tenant.
"""
import os
import signal
import subprocess
import tempfile
import time

from profd_e2e import Daemon, fail, log, require_root, skip
from export_e2e import (Burner, Checks, count_requests, dump_total, exporter, rc, receiver_log,
                        received, settle, wait_for)

FREQ = 99
BURN = 2  # seconds each burner runs
TENANT = "team-a"
CLIENT_CN = "profd-test-node"

require_root()
check = Checks()
try:
    rc.venv_python()
except rc.Unavailable as e:
    skip(str(e))
tmp = tempfile.mkdtemp(prefix="profd-export-tls-")
os.chmod(tmp, 0o700)
t0 = time.time()


# ---- a throw-away PKI -------------------------------------------------------------------------

def openssl(*args):
    try:
        r = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        skip("openssl is not installed (scripts/install-deps installs it)")
    if r.returncode != 0:
        fail(f"openssl {' '.join(args)}: {r.stderr.strip()[-500:]}")
    return r.stdout


def make_pki(d):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, P-256, valid a day.
    Returns {name: path}."""
    p = {k: os.path.join(d, k) for k in ("ca.pem", "ca.key", "server.pem", "server.key",
                                          "client.pem", "client.key")}
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *key, "-keyout", p["ca.key"], "-out", p["ca.pem"], "-days", "1",
            "-subj", "/CN=profd test CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    for who, ext in (("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
                     ("client", f"subjectAltName=DNS:{CLIENT_CN}\n"
                                "extendedKeyUsage=clientAuth\n")):
        csr, extfile = os.path.join(d, f"{who}.csr"), os.path.join(d, f"{who}.ext")
        with open(extfile, "w") as f:
            f.write("basicConstraints=critical,CA:FALSE\n"
                    "keyUsage=critical,digitalSignature\n"
                    "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n" + ext)
        cn = "127.0.0.1" if who == "server" else CLIENT_CN
        openssl("req", "-new", *key, "-keyout", p[f"{who}.key"], "-out", csr,
                "-subj", f"/CN={cn}")
        openssl("x509", "-req", "-in", csr, "-CA", p["ca.pem"], "-CAkey", p["ca.key"],
                "-set_serial", str(int(time.time() * 1000) + len(who)), "-days", "1",
                "-extfile", extfile, "-out", p[f"{who}.pem"])
    for k in p:
        if k.endswith(".key"):
            os.chmod(p[k], 0o600)
    return p


pki = make_pki(tmp)
# The system's CA store must not know ours, or case b proves nothing.
r = subprocess.run(["openssl", "verify", pki["server.pem"]], capture_output=True, text=True)
check(r.returncode != 0, "the system CAs do not trust the test server certificate")


def write(name, text, mode=0o600):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


# ---- receivers and daemons --------------------------------------------------------------------

receivers = []


def receiver(name, *args):
    tls = ["--tls-cert", pki["server.pem"], "--tls-key", pki["server.key"]]
    client = (pki["client.pem"], pki["client.key"]) if "--client-ca" in args else None
    r = rc.Receiver("-q", *tls, *args, logpath=os.path.join(tmp, f"receiver-{name}.log"),
                    tls_ca=pki["ca.pem"], tls_client=client)
    receivers.append(r)
    try:
        r.start()
    except RuntimeError as e:
        fail(str(e))
    return r


def daemon(recv, spool, *args, pids=()):
    pid_args = [a for p in pids for a in ("--pid", str(p))]
    return Daemon(*pid_args, "--frequency", str(FREQ), "--pyroscope", recv.url,
                  "--export-interval", "1s", "--export-retry-max", "2s",
                  "--export-spool", spool, *args)


def idle_pid():
    """A process that burns nothing: the --pid of a profd that only delivers a spool."""
    p = subprocess.Popen(["sleep", "120"])
    idlers.append(p)
    return p.pid


idlers = []


def burn(d, b):
    """Run burner b under daemon d to its end; wait until d has flushed its last interval."""
    b.go()
    b.wait()
    time.sleep(2.5)  # the samples still in the ring go out with the next interval or two
    return dump_total(d, b.pid)


def tls_of(recv):
    return recv.stats().get("tls", {"handshakes": 0, "failures": {}, "client_certs": {}})


def failures(recv, reason):
    return sum(n for k, n in tls_of(recv)["failures"].items() if reason in k)


def wait_status(d, pred, name="pyroscope", timeout=15):
    """Wait until pred(the exporter's status) holds; returns the last status either way."""
    last = {}

    def poll():
        last["x"] = exporter(d, name)
        return pred(last["x"])
    wait_for(poll, timeout)
    return last["x"]


def failing(d, name="pyroscope"):
    """Wait until the exporter has failed at least once and holds requests."""
    return wait_status(d, lambda x: x["last_error"] and x["spool_requests"], name)


def otlp_total(stats, service):
    return sum(s["unique_values"].get("samples/count", 0) for s in stats["otlp"]["series"]
               if s["labels"].get("service.name") == service)


def status_line(d, name="pyroscope"):
    out = d.ctl("status").stdout
    return next((ln for ln in out.splitlines() if ln.startswith(f"export {name} ")), "")


try:
    r_tls = receiver("tls")
    r_mtls = receiver("mtls", "--client-ca", pki["ca.pem"])
    r_bearer = receiver("bearer", "--bearer", "s3cret-token")
    r_basic = receiver("basic", "--basic", "node:pa55word")
    log(f"PKI and four receivers ready after {time.time() - t0:.1f} s")

    # -- a) and e): https with the CA file, both backends, the tenant header --------------------
    b = Burner("tls-ca", BURN)
    with daemon(r_tls, os.path.join(tmp, "spool-a"), "--otlp", r_tls.url,
                "--export-ca-file", pki["ca.pem"],
                "--export-header", f"X-Scope-OrgID: {TENANT}", pids=[b.pid]) as d:
        n = burn(d, b)
        x = settle(d, 20)
        xo = settle(d, 20, name="otlp")
        st = r_tls.stats()
    got = received(st, service_name=b.service)
    check(n > 0, f"a: the burner was sampled ({n})")
    check(got == n, f"a: Pyroscope over https with --export-ca-file: {got} == the dump's {n}")
    got = otlp_total(st, b.service)
    check(got == n, f"a: OTLP over https: {got} == the dump's {n}")
    check(x["requests_sent"] > 0 and xo["requests_sent"] > 0 and not x["last_error"] and
          not xo["last_error"], f"a: both exporters sent without an error ({x['last_error']!r}, "
          f"{xo['last_error']!r})")
    check(st["tls"]["handshakes"] > 0 and st["tls"]["failures"] == {},
          f"a: the receiver spoke TLS only, with no failed handshake ({st['tls']})")
    for src in ("pyroscope", "otlp"):
        tenants = st[src]["tenants"]
        check(set(tenants) == {TENANT} and tenants[TENANT] == st[src]["requests"]["accepted"],
              f"e: every {src} request carries X-Scope-OrgID {TENANT} ({tenants})")

    # -- b) https without the CA file: refused, spooled, delivered once the CA is given ---------
    b = Burner("tls-no-ca", BURN)
    spool = os.path.join(tmp, "spool-b")
    with daemon(r_tls, spool, pids=[b.pid]) as d:
        n = burn(d, b)
        x = failing(d)
        line = status_line(d)
    err = x["last_error"]
    check("certificate" in err.lower(),
          f"b: without the CA file last_error names the certificate problem ({err!r})")
    check("certificate" in line.lower(), f"b: so does profctl status's line ({line!r})")
    check(x["requests_sent"] == 0 and x["spool_requests"] > 0,
          f"b: nothing sent, {x['spool_requests']} requests in the spool")
    check(received(r_tls.stats(), service_name=b.service) == 0, "b: nothing arrived")
    check(failures(r_tls, "UNKNOWN_CA") > 0,
          f"b: the receiver saw profd refuse its certificate ({tls_of(r_tls)['failures']})")
    spooled = count_requests(os.path.join(spool, "pyroscope"))
    check(spooled["samples"] == n,
          f"b: the spool holds every sample of the dump ({spooled['samples']} == {n}, "
          f"{spooled['files']} files)")
    with daemon(r_tls, spool, "--export-ca-file", pki["ca.pem"], pids=[idle_pid()]) as d:
        x = settle(d, 20)
    got = received(r_tls.stats(), service_name=b.service)
    check(got == n, f"b: restarted with the CA file, the spool arrives: {got} == the dump's {n}")
    check(x["requests_sent"] >= spooled["files"] and x["spool_requests"] == 0,
          f"b: {x['requests_sent']} requests sent, the spool empty ({x['spool_requests']})")

    # -- c) mTLS: no client certificate, then one ------------------------------------------------
    b = Burner("tls-mtls", BURN)
    spool = os.path.join(tmp, "spool-c")
    with daemon(r_mtls, spool, "--otlp", r_mtls.url, "--export-ca-file", pki["ca.pem"],
                pids=[b.pid]) as d:
        n = burn(d, b)
        x = failing(d)
        xo = failing(d, "otlp")
    # In TLS 1.3 the server checks the client's certificate after the client has finished its
    # side of the handshake, so curl learns of the refusal while sending the request: from the
    # server's alert ("tlsv13 alert certificate required") when it reads first, else as a
    # broken pipe or a reset. Either way a transport error, never an HTTP status.
    for name, ex in (("pyroscope", x), ("otlp", xo)):
        err = ex["last_error"]
        check(err and not err.startswith("HTTP") and ex["spool_requests"] > 0,
              f"c: {name} without a client certificate: a transport error ({err!r}) and "
              f"{ex['spool_requests']} requests wait")
    st = r_mtls.stats()
    check(st["pyroscope"]["requests"]["accepted"] == 0 and st["otlp"]["requests"]["accepted"] == 0,
          "c: nothing arrived without the client certificate")
    attempts = x["requests_retried"] + xo["requests_retried"]
    fails = st["tls"]["failures"]
    check(set(fails) == {"PEER_DID_NOT_RETURN_A_CERTIFICATE"} and
          fails["PEER_DID_NOT_RETURN_A_CERTIFICATE"] >= attempts > 0,
          f"c: the receiver refused each of profd's {attempts} failed attempts for want of a "
          f"client certificate ({fails})")
    with daemon(r_mtls, spool, "--otlp", r_mtls.url, "--export-ca-file", pki["ca.pem"],
                "--export-cert-file", pki["client.pem"], "--export-key-file", pki["client.key"],
                pids=[idle_pid()]) as d:
        x = settle(d, 20)
        xo = settle(d, 20, name="otlp")
    st = r_mtls.stats()
    got = received(st, service_name=b.service)
    check(got == n, f"c: with the client certificate the spool arrives: {got} == the dump's {n}")
    got = otlp_total(st, b.service)
    check(got == n, f"c: OTLP too: {got} == the dump's {n}")
    certs = st["tls"]["client_certs"]
    check(set(certs) == {CLIENT_CN},
          f"c: every accepted handshake presented our client certificate ({certs})")
    check(x["spool_requests"] == 0 and xo["spool_requests"] == 0, "c: both spools empty")

    # -- d) bearer token and basic auth files, fixed by a SIGHUP reload --------------------------
    for kind, recv, key, wrong, right in (
            ("bearer", r_bearer, "bearer_token_file", "not-the-token\n", "s3cret-token\n"),
            ("basic", r_basic, "basic_auth_file", "node:wrong\n", "node:pa55word\n")):
        wrong_f = write(f"{kind}-wrong", wrong)
        right_f = write(f"{kind}-right", right)
        conf_head = (f"frequency = {FREQ}\n[export]\npyroscope = {recv.url}\ninterval = 1s\n"
                     f"retry_max = 2s\nspool = {tmp}/spool-{kind}\nca_file = {pki['ca.pem']}\n")
        conf = write(f"{kind}.conf", conf_head + f"{key} = {wrong_f}\n", 0o644)
        b = Burner(f"tls-{kind}", BURN)
        with Daemon("--config", conf, "--pid", str(b.pid)) as d:
            n = burn(d, b)
            x = wait_status(d, lambda x: x.get("auth_failing") and x["spool_requests"])
            line = status_line(d)
            check(x.get("auth_failing") and "401" in x["last_error"] and x["spool_requests"] > 0,
                  f"d: {kind}: a wrong credential gives 401, auth_failing, the spool kept "
                  f"({x['last_error']!r}, auth_failing {x.get('auth_failing')}, "
                  f"{x['spool_requests']} requests)")
            check("REFUSES THE CREDENTIALS" in line, f"d: {kind}: status says so ({line!r})")
            st = recv.stats()
            rej = st["pyroscope"]["requests"]["rejected"].get("unauthenticated", 0)
            check(rej > 0 and received(st, service_name=b.service) == 0,
                  f"d: {kind}: the receiver refused {rej} requests and accepted none")
            write(f"{kind}.conf", conf_head + f"{key} = {right_f}\n", 0o644)
            d.proc.send_signal(signal.SIGHUP)
            check(wait_for(lambda: "configuration applied" in d.log_text(), 10),
                  f"d: {kind}: the reload with the right file is applied")
            x = settle(d, 20)
            n = dump_total(d, b.pid)
        got = received(recv.stats(), service_name=b.service)
        check(got == n, f"d: {kind}: after the reload the spool arrives: {got} == the dump's {n}")
        check(not x.get("auth_failing") and x["spool_requests"] == 0,
              f"d: {kind}: auth_failing cleared, spool empty ({x})")
except SystemExit:
    for r in receivers:
        log(receiver_log(r))
    raise
finally:
    for p in idlers:
        p.kill()
        p.wait()
    for r in receivers:
        r.stop()
log(f"ran {time.time() - t0:.1f} s")
check.done(lambda: [log(receiver_log(r)) for r in receivers])
