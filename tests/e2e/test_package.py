#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
# The installation and the Debian package, from the build tree under test:
#  1. `cmake --install` into a DESTDIR, with the default prefix and with /usr: every file in its
#     place, the unit's ExecStart naming that prefix's profd, the config out of /etc unless the
#     prefix is /usr.
#  2. `cpack -G DEB`: the control fields, Depends naming the package of every library the
#     binaries load (looked up with dpkg -S, not listed here), the file list, the conffile, the
#     maintainer scripts (sh -n), stripped binaries whose debug files are in profd-dbgsym, the
#     library's USDT probe kept by the stripping.
#  3. A real installation with dpkg into a throw-away root (dpkg --root, maintainer scripts run
#     outside a chroot with DPKG_ROOT set, which deb-systemd-helper honours): the service
#     enabled there, the installed binaries running, an edited conffile kept over a
#     reinstallation, remove masking the unit and purge deleting /etc/profd, /var/lib/profd and
#     the enablement. Dependencies are not installed in that root (--force-depends): the
#     binaries run against this machine's libraries.
#  4. The maintainer scripts' service handling as on a booted system, with systemd's tools
#     replaced by ones that log their arguments and /run/systemd/system present only in a
#     private mount namespace: start on install, restart on upgrade, stop on remove, nothing
#     started when systemd is not running or DPKG_ROOT is set.
import glob
import gzip
import os
import re
import shutil
import stat
import subprocess
import tempfile
from profd_e2e import *

SRC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
for tool in ("cpack", "dpkg-deb", "dpkg", "dpkg-shlibdeps", "deb-systemd-helper", "readelf",
             "file", "unshare"):
    if not shutil.which(tool):
        skip(f"{tool} is not installed (scripts/install-deps installs it)")
require_root()

tmp = tempfile.mkdtemp(prefix="profd-package-")
atexit.register(shutil.rmtree, tmp, ignore_errors=True)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        log(r.stdout + r.stderr)
        fail(f"{' '.join(cmd)}: exit {r.returncode}")
    return r.stdout


def cache(name):
    with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.rstrip("\n").split("=", 1)[1]
    return ""


version = cache("CMAKE_PROJECT_VERSION")
check(re.fullmatch(r"\d+\.\d+\.\d+", version) is not None, f"project version {version!r}")
cupti = os.path.exists(os.path.join(BUILD, "lib", "libprofd_cupti.so"))
log(f"libprofd_cupti.so built: {cupti}")
conf_src = open(os.path.join(SRC, "packaging", "profd.conf")).read()

# --- 0. the default config documents every key of the contract ----------------------------------
# Keys set or shown commented out (`# key = value`), each in its section; every other line is a
# comment, blank or a section header.
CONTRACT = {
    "": {"frequency", "memory_cap", "off_cpu", "off_cpu_min", "bucket", "ringbuf_size",
         "gpu_ring_size", "socket_group", "libcuda"},
    "export": {"pyroscope", "otlp", "interval", "spool", "spool_max_size", "spool_max_age",
               "retry_max", "timeout", "labels", "sample_labels", "host", "ca_file",
               "cert_file", "key_file", "bearer_token_file", "basic_auth_file", "header"},
}
section, shown, set_keys, bad = "", {"": set(), "export": set(), "services": set()}, {}, []
for n, line in enumerate(conf_src.splitlines(), 1):
    m = re.fullmatch(r"\[(\w+)\]", line)
    if m:
        section = m.group(1)
        if section not in shown:
            bad.append(f"{n}: [{section}]")
        continue
    m = re.fullmatch(r"(#\s?)?([a-z_]+) = (\S.*?)(\s+#.*)?", line)
    if m and (not m.group(1) or m.group(2) in CONTRACT.get(section, ())):
        shown[section].add(m.group(2))
        if not m.group(1):
            set_keys[m.group(2)] = m.group(3)
        continue
    if line and not line.startswith("#"):
        bad.append(f"{n}: {line}")
check(not bad, f"profd.conf: only comments, [export], [services] and key = value: {bad}")
for sect, keys in CONTRACT.items():
    check(keys <= shown[sect], f"profd.conf [{sect or 'top'}] shows every key: "
          f"missing {sorted(keys - shown[sect])}")
check(set(set_keys) == {"frequency", "memory_cap"} and 19 <= int(set_keys["frequency"]) <= 49,
      f"only the fleet rate (19-49 Hz) and the memory cap are set: {set_keys}")

# --- 1. cmake --install ---------------------------------------------------------------------
for prefix, unit_dir, conf_dir in (("/usr/local", "/usr/local/lib/systemd/system",
                                    "/usr/local/etc/profd"),
                                   ("/usr", "/lib/systemd/system", "/etc/profd")):
    dest = os.path.join(tmp, "destdir" + prefix.replace("/", "-"))
    run(["cmake", "--install", BUILD, "--prefix", prefix], env=dict(os.environ, DESTDIR=dest))
    want = [f"{prefix}/bin/profd", f"{prefix}/bin/profctl", f"{unit_dir}/profd.service",
            f"{conf_dir}/profd.conf", f"{prefix}/share/man/man8/profd.8.gz",
            f"{prefix}/share/man/man1/profctl.1.gz",
            f"{prefix}/share/bash-completion/completions/profctl",
            f"{prefix}/share/doc/profd/fleet.md", f"{prefix}/share/doc/profd/copyright"]
    if cupti:
        want.append(f"{prefix}/lib/profd/libprofd_cupti.so")
    missing = [p for p in want if not os.path.isfile(dest + p)]
    check(not missing, f"cmake --install --prefix {prefix}: all files in place: {missing}")
    if prefix != "/usr":
        check(not os.path.exists(dest + "/etc"), f"prefix {prefix}: nothing written to /etc")
    unit = open(dest + f"{unit_dir}/profd.service").read()
    execs = re.findall(r"^ExecStart=(\S+)", unit, re.M)
    check(execs == [f"{prefix}/bin/profd"], f"prefix {prefix}: ExecStart names {execs}")
    check(open(dest + f"{conf_dir}/profd.conf").read() == conf_src,
          f"prefix {prefix}: the config is packaging/profd.conf")
    for page, sect in (("profd.8", "8"), ("profctl.1", "1")):
        with gzip.open(dest + f"{prefix}/share/man/man{sect}/{page}.gz", "rt") as f:
            check(f.read() == open(os.path.join(SRC, "docs", page)).read(),
                  f"prefix {prefix}: {page}.gz is docs/{page}")

# --- 2. cpack -G DEB ------------------------------------------------------------------------
out = os.path.join(tmp, "cpack")
run(["cpack", "-G", "DEB", "-B", out, "--config", os.path.join(BUILD, "CPackConfig.cmake")],
    cwd=BUILD)
arch = run(["dpkg", "--print-architecture"]).strip()
debs = glob.glob(os.path.join(out, "*.deb"))
check([os.path.basename(d) for d in debs] == [f"profd_{version}-1_{arch}.deb"],
      f"one package, profd_{version}-1_{arch}.deb: {[os.path.basename(d) for d in debs]}")
deb = debs[0]
fields = {}
for line in run(["dpkg-deb", "-f", deb]).splitlines():
    if line and not line.startswith(" "):
        k, v = line.split(":", 1)
        fields[k] = v.strip()
log(fields)
check(fields.get("Package") == "profd" and fields.get("Version") == f"{version}-1" and
      fields.get("Architecture") == arch, "Package, Version, Architecture")
check(fields.get("Section") == "admin" and fields.get("Priority") == "optional",
      "Section admin, Priority optional")
check(re.fullmatch(r".+ <[^ >]+@[^ >]+>", fields.get("Maintainer", "")) is not None,
      f"Maintainer is a name and an address: {fields.get('Maintainer')!r}")
check(len(fields.get("Description", "")) > 20, "a Description")
depends = {re.split(r"[ (]", d.strip())[0] for d in fields.get("Depends", "").split(",")}
# Every library the binaries load comes from a package the package depends on.
binaries = [os.path.join(BUILD, "bin", "profd"), os.path.join(BUILD, "bin", "profctl")]
if cupti:
    binaries.append(os.path.join(BUILD, "lib", "libprofd_cupti.so"))
# The libraries each binary names (NEEDED), found where the loader finds them (ldd).
needed = {}
for b in binaries:
    found = dict(re.findall(r"^\s*(\S+) => (/\S+)", run(["ldd", b]), re.M))
    for lib in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                          run(["readelf", "-d", b])):
        check(lib in found, f"{os.path.basename(b)}: {lib} is found by the loader")
        needed[lib] = found[lib]
check(needed, f"the binaries load libraries: {sorted(needed)}")
for lib, path in sorted(needed.items()):
    # dpkg knows a file by the name its package ships it under: with merged /usr that may be
    # /lib/... or /usr/lib/..., the soname's link or the file it points to.
    real = os.path.realpath(path)
    owner = ""
    for p in (path, re.sub(r"^/lib/", "/usr/lib/", path), re.sub(r"^/usr/lib/", "/lib/", path),
              real, re.sub(r"^/usr/lib/", "/lib/", real)):
        owner = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True).stdout
        if owner:
            break
    pkg = owner.split(":")[0].strip()
    check(pkg and pkg in depends, f"{lib} ({path}, package {pkg!r}) is in Depends")
check("procps" in depends, "Depends on procps (kill for systemctl reload)")
check("ca-certificates" in fields.get("Recommends", ""), "Recommends ca-certificates")

listing = run(["dpkg-deb", "-c", deb])
files = {l.split()[-1].lstrip(".") for l in listing.splitlines() if not l.startswith("d")}
want = {"/usr/bin/profd", "/usr/bin/profctl", "/lib/systemd/system/profd.service",
        "/etc/profd/profd.conf", "/usr/share/man/man8/profd.8.gz",
        "/usr/share/man/man1/profctl.1.gz", "/usr/share/bash-completion/completions/profctl",
        "/usr/share/doc/profd/copyright", "/usr/share/doc/profd/fleet.md"}
if cupti:
    want.add("/usr/lib/profd/libprofd_cupti.so")
check(want <= files, f"the package holds {sorted(want - files)} too")
check(not [f for f in files if "/tests/" in f or "fixture" in f or f.startswith("/usr/local")],
      "no test files, nothing under /usr/local")

ctrl = os.path.join(tmp, "control")
run(["dpkg-deb", "-e", deb, ctrl])
check(open(os.path.join(ctrl, "conffiles")).read().split() == ["/etc/profd/profd.conf"],
      "conffiles lists /etc/profd/profd.conf")
for script in ("postinst", "prerm", "postrm"):
    p = os.path.join(ctrl, script)
    check(os.path.exists(p) and os.stat(p).st_mode & 0o777 == 0o755,
          f"{script} is there, mode 0755")
    run(["sh", "-n", p])
    check("deb-systemd-" in open(p).read(), f"{script} parses (sh -n) and manages the unit")

root = os.path.join(tmp, "extract")
run(["dpkg-deb", "-x", deb, root])
unit = open(os.path.join(root, "lib/systemd/system/profd.service")).read()
check(re.findall(r"^ExecStart=(\S+)", unit, re.M) == ["/usr/bin/profd"],
      "the package's unit starts /usr/bin/profd")
check(open(os.path.join(root, "etc/profd/profd.conf")).read() == conf_src,
      "the package's config is packaging/profd.conf")
elfs = ["usr/bin/profd", "usr/bin/profctl"] + (["usr/lib/profd/libprofd_cupti.so"] if cupti
                                               else [])
ddebs = glob.glob(os.path.join(out, "profd-dbgsym_*.ddeb"))
check(len(ddebs) == 1, "a profd-dbgsym package")
dbg = run(["dpkg-deb", "-c", ddebs[0]])
for e in elfs:
    sections = run(["readelf", "-S", "-W", os.path.join(root, e)])
    check(".debug_info" not in sections and ".symtab" not in sections, f"{e} is stripped")
    bid = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", os.path.join(root, e)]))
    check(bid and f"/usr/lib/debug/.build-id/{bid[1][:2]}/{bid[1][2:]}.debug" in dbg,
          f"{e}: its debug file is in profd-dbgsym")
if cupti:
    notes = run(["readelf", "-n", os.path.join(root, "usr/lib/profd/libprofd_cupti.so")])
    check("stapsdt" in notes and "cuda_launch" in notes,
          "the stripped library keeps its profd:cuda_launch USDT note")

# --- 3. a real installation into a throw-away root ------------------------------------------
inst = os.path.join(tmp, "root")
for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"):
    os.makedirs(os.path.join(inst, d))
for f in ("var/lib/dpkg/status", "var/lib/dpkg/available"):
    open(os.path.join(inst, f), "w").close()
DPKG = ["dpkg", f"--root={inst}", "--force-script-chrootless", "--force-depends",
        "--log=/dev/null"]
run(DPKG + ["-i", deb])
status = run(["dpkg", f"--root={inst}", "-s", "profd"])
check("Status: install ok installed" in status, "dpkg: profd installed and configured")
wants = os.path.join(inst, "etc/systemd/system/multi-user.target.wants/profd.service")
check(os.path.islink(wants) and os.readlink(wants) == "/lib/systemd/system/profd.service",
      "postinst enabled profd.service in the new root")
check(not os.path.exists("/etc/systemd/system/multi-user.target.wants/profd.service") or
      os.path.realpath("/etc/systemd/system/multi-user.target.wants/profd.service") !=
      os.path.join(inst, "lib/systemd/system/profd.service"), "this machine's systemd untouched")
for b in ("profd", "profctl"):
    v = run([os.path.join(inst, "usr/bin", b), "--version"])
    check(version in v, f"the installed, stripped {b} runs: {v.strip()}")
conf = os.path.join(inst, "etc/profd/profd.conf")
with open(conf, "a") as f:
    f.write("# edited by the administrator\n")
run(DPKG + ["-i", deb])  # a reinstallation goes through the upgrade path of the scripts
check(open(conf).read().endswith("# edited by the administrator\n"),
      "a reinstallation keeps the edited conffile")
check(os.path.islink(wants), "still enabled after the reinstallation")
os.makedirs(os.path.join(inst, "var/lib/profd/spool/pyroscope"))
open(os.path.join(inst, "var/lib/profd/spool/pyroscope/0001"), "w").close()
run(DPKG + ["-r", "profd"])
check(not os.path.exists(os.path.join(inst, "usr/bin/profd")), "remove: the binaries are gone")
check(os.path.exists(conf), "remove: the conffile stays")
masked = os.path.join(inst, "etc/systemd/system/profd.service")
check(os.path.islink(masked) and os.readlink(masked) == "/dev/null", "remove: the unit is masked")
check(os.path.isdir(os.path.join(inst, "var/lib/profd/spool")), "remove: the spool stays")
run(DPKG + ["-P", "profd"])
check(not os.path.exists(os.path.join(inst, "etc/profd")), "purge: /etc/profd is gone")
check(not os.path.exists(os.path.join(inst, "var/lib/profd")), "purge: /var/lib/profd is gone")
check(not os.path.lexists(masked) and not os.path.lexists(wants),
      "purge: neither mask nor enablement is left")
left = [os.path.join(d, f) for d, _, fs in os.walk(os.path.join(inst, "var/lib/systemd"))
        for f in fs]
check(not left, f"purge: deb-systemd-helper's state for profd is gone: {left}")

# --- 4. the scripts as on a booted system ----------------------------------------------------
fake = os.path.join(tmp, "fakebin")
os.makedirs(fake)
calls = os.path.join(tmp, "calls")
for tool in ("deb-systemd-helper", "deb-systemd-invoke", "systemctl"):
    with open(os.path.join(fake, tool), "w") as f:
        f.write(f'#!/bin/sh\necho "{tool} $*" >> "{calls}"\nexit 0\n')
    os.chmod(os.path.join(fake, tool), 0o755)


def script(name, *args, booted=True, env_extra=None):
    """Runs one of the package's maintainer scripts, in a mount namespace where /run is a
    fresh tmpfs with /run/systemd/system when booted; returns the tools it called."""
    open(calls, "w").close()
    env = {k: v for k, v in os.environ.items() if k != "DPKG_ROOT"}
    env.update(PATH=fake + ":" + os.environ["PATH"], **(env_extra or {}))
    p = os.path.join(ctrl, name)
    inner = "mount -t tmpfs none /run && " + ("mkdir -p /run/systemd/system && " if booted
                                               else "") + 'exec "$0" "$@"'
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", inner, p,
                        *args], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        log(r.stdout + r.stderr)
        fail(f"{name} {' '.join(args)}: exit {r.returncode}")
    return [l for l in open(calls).read().splitlines()]


c = script("postinst", "configure")
log(c)
check("deb-systemd-helper enable profd.service" in c and
      "deb-systemd-invoke start profd.service" in c and
      c.index("deb-systemd-helper enable profd.service") <
      c.index("systemctl --system daemon-reload") <
      c.index("deb-systemd-invoke start profd.service"),
      "postinst configure (fresh): enable, daemon-reload, start")
c = script("postinst", "configure", "0.0.9-1")
check("deb-systemd-invoke restart profd.service" in c and
      not any("invoke start" in x for x in c), "postinst configure OLD (upgrade): restart")
c = script("postinst", "configure", booted=False)
check("deb-systemd-helper enable profd.service" in c and
      not any("deb-systemd-invoke" in x or "systemctl" in x for x in c),
      "postinst without a running systemd: enabled, nothing started")
c = script("postinst", "configure", env_extra={"DPKG_ROOT": os.path.join(tmp, "elsewhere")})
check(not any("deb-systemd-invoke" in x for x in c),
      "postinst with DPKG_ROOT: nothing started on this machine")
c = script("prerm", "remove")
check(c == ["deb-systemd-invoke stop profd.service"], f"prerm remove: stop: {c}")
c = script("prerm", "upgrade", "0.2.0-1")
check(c == [], f"prerm upgrade: the service keeps running until postinst restarts it: {c}")
c = script("prerm", "remove", booted=False)
check(c == [], f"prerm remove without a running systemd: nothing to stop: {c}")
c = script("postrm", "remove")
check("deb-systemd-helper mask profd.service" in c, f"postrm remove: masks the unit: {c}")
log("PASS")
