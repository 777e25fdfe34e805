#!/usr/bin/env python3
# Three profd "nodes" exporting to one receiver at once, each in a network namespace of its own
# that the test makes, linked by a veth pair to a namespace holding the stand-in Pyroscope
# receiver (and the test's own veth to that namespace, to read the receiver's accounting). Each
# node's profd runs in a UTS namespace with a hostname of its own, so its host label comes from
# gethostname() as on a real node; each has its own socket, spool and CPU burner, all under the
# same service_name. Every node's series arrive, labelled by its host, with its totals (the
# receiver's count equals that node's dump of its burner and its samples_exported), and each
# node's requests came from its own address.
#
# Addresses: one 10.231.N.0/24 that no interface, route or namespace here uses (checked), cut
# into /30 links. Namespaces and links are removed in every outcome, and the leftovers of a run
# that was killed are removed by the next.
import atexit
import ipaddress
import os
import random
import re
import signal
import socket
import subprocess
import tempfile
import time

from profd_e2e import Daemon, require_root, fail, log, skip
from export_e2e import (Burner, Checks, dump_total, kill_all, note, rc, received, receiver_log,
                        settle, start_receiver, tail)

NODES = 3
FREQ = 199
BURN = 6
TAG = f"pe2e{os.getpid()}"  # namespace and link names carry the test's pid
STALE = re.compile(r"^pe2e(\d+)")

require_root()
check = Checks()


def ip(*args, check_rc=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check_rc and r.returncode != 0:
        fail(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


def namespaces():
    r = ip("netns", "list", check_rc=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def remove_stale():
    """Namespaces and links of earlier runs whose test process is gone."""
    for ns in namespaces():
        m = STALE.match(ns)
        if m and not alive(int(m.group(1))):
            ip("netns", "del", ns, check_rc=False)
    for line in ip("-o", "link", "show", check_rc=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        m = STALE.match(name)
        if m and not alive(int(m.group(1))):
            ip("link", "del", name, check_rc=False)


def used_networks():
    """Every IPv4 network of an address or route here, in this namespace and the named ones."""
    nets = []
    for prefix in [[]] + [["-n", ns] for ns in namespaces()]:
        for line in ip(*prefix, "-o", "-4", "addr", "show", check_rc=False).stdout.splitlines():
            m = re.search(r"inet (\S+)", line)
            if m:
                nets.append(ipaddress.ip_interface(m.group(1)).network)
        for line in ip(*prefix, "-4", "route", "show", "table", "all",
                       check_rc=False).stdout.splitlines():
            dst = line.split()[0] if line.split() else ""
            if dst in ("default", "broadcast", "local", "unreachable", "prohibit", "blackhole"):
                dst = line.split()[1] if dst != "default" and len(line.split()) > 1 else ""
            try:
                net = ipaddress.ip_network(dst, strict=False)
            except ValueError:
                continue
            if net.prefixlen > 0:
                nets.append(net)
    return nets


def free_block():
    used = used_networks()
    for n in random.sample(range(1, 255), 254):
        block = ipaddress.ip_network(f"10.231.{n}.0/24")
        if not any(block.overlaps(u) for u in used):
            return n
    fail("no free 10.231.N.0/24 for the test's links")


made_ns = []
made_links = []


def cleanup():
    for ns in reversed(made_ns):
        ip("netns", "del", ns, check_rc=False)
    for link in made_links:
        ip("link", "del", link, check_rc=False)
    made_ns.clear()
    made_links.clear()


def on_signal(sig, frame):
    raise SystemExit(f"signal {sig}")


atexit.register(cleanup)
signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)

if subprocess.run(["ip", "netns", "help"], capture_output=True).returncode not in (0, 255):
    skip("ip netns is not available")
for tool in ("nsenter", "unshare", "hostname"):
    if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
        fail(f"{tool} is missing (util-linux, hostname)")

remove_stale()
N = free_block()
rcv_ns = f"{TAG}r"
node_ns = [f"{TAG}n{i}" for i in range(1, NODES + 1)]
rcv_addr = f"10.231.{N}.2"  # the test's link: host .1, receiver namespace .2
hostname = socket.gethostname()
names = [f"node{i}-{os.getpid()}" for i in range(1, NODES + 1)]
check(hostname not in names, f"the nodes' hostnames {names} differ from this host's ({hostname})")


def node_addrs(i):
    """(receiver side, node side) of node i's /30 link (i from 1)."""
    return f"10.231.{N}.{4 * i + 1}", f"10.231.{N}.{4 * i + 2}"


tmp = tempfile.mkdtemp(prefix="profd-export-netns-")
t0 = time.time()
burners = [Burner("netns-burn", BURN) for _ in range(NODES)]
recv = None
daemons = []
try:
    # ---- the network --------------------------------------------------------------------
    for ns in [rcv_ns] + node_ns:
        ip("netns", "add", ns)
        made_ns.append(ns)
        ip("-n", ns, "link", "set", "lo", "up")
    made_links.append(f"{TAG}h")
    ip("link", "add", f"{TAG}h", "type", "veth", "peer", "name", f"{TAG}r0", "netns", rcv_ns)
    ip("addr", "add", f"10.231.{N}.1/30", "dev", f"{TAG}h")
    ip("link", "set", f"{TAG}h", "up")
    ip("-n", rcv_ns, "addr", "add", f"{rcv_addr}/30", "dev", f"{TAG}r0")
    ip("-n", rcv_ns, "link", "set", f"{TAG}r0", "up")
    for i, ns in enumerate(node_ns, 1):
        r_side, n_side = node_addrs(i)
        ip("link", "add", f"{TAG}r{i}", "netns", rcv_ns, "type", "veth", "peer", "name",
           f"{TAG}n{i}", "netns", ns)
        ip("-n", rcv_ns, "addr", "add", f"{r_side}/30", "dev", f"{TAG}r{i}")
        ip("-n", rcv_ns, "link", "set", f"{TAG}r{i}", "up")
        ip("-n", ns, "addr", "add", f"{n_side}/30", "dev", f"{TAG}n{i}")
        ip("-n", ns, "link", "set", f"{TAG}n{i}", "up")
    note(f"links: 10.231.{N}.0/24, receiver namespace {rcv_ns}, nodes {node_ns}")

    # ---- the receiver, in its namespace -------------------------------------------------
    recv = start_receiver(tmp, listen="0.0.0.0:0",
                          prefix=["nsenter", f"--net=/run/netns/{rcv_ns}"])
    recv.host = rcv_addr  # where this namespace reaches it
    recv.stats()
    # A node reaches only its own link: not the test's address of the receiver.
    r = subprocess.run(["nsenter", f"--net=/run/netns/{node_ns[0]}", "ip", "-4", "route", "get",
                        rcv_addr], capture_output=True, text=True)
    check(r.returncode != 0, f"node 1 has no route to the test's link ({r.stdout.strip()})")

    # ---- three nodes --------------------------------------------------------------------
    for i, (ns, name, b) in enumerate(zip(node_ns, names, burners), 1):
        r_side, _ = node_addrs(i)
        d = Daemon("--pid", str(b.pid), "--frequency", str(FREQ),
                   "--pyroscope", f"http://{r_side}:{recv.port}", "--export-interval", "1s",
                   "--export-retry-max", "2s", "--export-spool", os.path.join(tmp, f"spool{i}"),
                   prefix=["nsenter", f"--net=/run/netns/{ns}", "unshare", "--uts", "sh", "-c",
                           'hostname "$0" && exec "$@"', name])
        d.__enter__()
        daemons.append(d)
    socks = {d.sock for d in daemons}
    check(len(socks) == NODES, f"each node has its own socket ({len(socks)})")
    for d, name in zip(daemons, names):
        r = subprocess.run(["nsenter", f"--uts=/proc/{d.proc.pid}/ns/uts", "hostname"],
                           capture_output=True, text=True)
        check(r.stdout.strip() == name, f"profd {d.proc.pid} runs with hostname {name} "
              f"({r.stdout.strip()!r})")
        check(os.readlink(f"/proc/{d.proc.pid}/ns/net") !=
              os.readlink("/proc/self/ns/net"), f"profd {d.proc.pid} is in its own network "
              "namespace")

    for b in burners:
        b.go()
    for b in burners:
        b.wait()
    xs = [settle(d) for d in daemons]
    st = recv.stats()

    # ---- every node's series, by host ---------------------------------------------------
    series = rc.series_of(st, "pyroscope", service_name="netns-burn")
    hosts = sorted({s["labels"].get("host") for s in series})
    check(hosts == sorted(names), f"the receiver's series of netns-burn carry the hosts "
          f"{hosts}, one per node")
    peers = st["pyroscope"]["peers"]
    want_peers = {node_addrs(i)[1] for i in range(1, NODES + 1)}
    check(set(peers) == want_peers, f"the requests came from the nodes' addresses "
          f"({sorted(peers)})")
    spans = []
    for i, (d, x, b, name) in enumerate(zip(daemons, xs, burners, names), 1):
        n = dump_total(d, b.pid)
        got = received(st, host=name, service_name="netns-burn")
        got_all = received(st, unique=False, host=name)
        note(f"{name}: dump {n}, received {got} ({got_all} with copies), status {x}")
        check(n >= 20, f"{name}: profd collected its burner ({n} samples)")
        check(got == n == x["samples_exported"],
              f"{name}: the receiver has {got} samples under host={name}, the node's dump "
              f"{n}, its samples_exported {x['samples_exported']}")
        check(got_all == got == x["samples_sent"],
              f"{name}: none twice, samples_sent {x['samples_sent']} ({got_all} with copies)")
        check(peers.get(node_addrs(i)[1], 0) == x["requests_sent"] > 0,
              f"{name}: its {x['requests_sent']} requests came from {node_addrs(i)[1]} "
              f"({peers.get(node_addrs(i)[1], 0)})")
        check(x["spool_requests"] == 0 and x["requests_retried"] == 0,
              f"{name}: nothing waits, nothing retried ({x['spool_requests']}, "
              f"{x['requests_retried']})")
        mine = [s for s in series if s["labels"].get("host") == name]
        if mine:
            spans.append((min(s["time_first_ns"] for s in mine),
                          max(s["time_last_end_ns"] for s in mine)))
    rel = [(round((a - spans[0][0]) / 1e9, 1), round((b - spans[0][0]) / 1e9, 1))
           for a, b in spans]
    check(len(spans) == NODES and max(a for a, _ in spans) < min(b for _, b in spans),
          f"the nodes' profiles cover the same time (exported at once): {rel} s")
except BaseException:
    for d in daemons:
        log(tail(f"profd {d.proc.pid}", d.logpath))
    if recv:
        log(receiver_log(recv))
    raise
finally:
    for d in daemons:
        d.__exit__(None, None, None)
    kill_all(burners)
    if recv:
        recv.stop()
    cleanup()
left = [ns for ns in namespaces() if ns.startswith(TAG)]
links = [line for line in ip("-o", "link", "show").stdout.splitlines() if TAG in line]
check(not left and not links, f"namespaces and links removed ({left}, {len(links)} links)")
note(f"run time {time.time() - t0:.0f} s")
check.done(lambda: log("".join(tail(f"profd {d.proc.pid}", d.logpath) for d in daemons) +
                       receiver_log(recv)))
