#!/usr/bin/env python3
# profctl top and profctl table on the burn fixture (spin_a 75%, spin_b 25% of the work):
# - table, into a pipe: spin_a is the first row and its share of spin_a + spin_b is 0.75;
# - top, into a pipe: one table, then exit 0;
# - top on a terminal (a tmux pane): the hot function on top, the header updates, 's' sorts by
#   total, 'q' quits with 0 and gives the shell its screen and terminal modes back;
# - top when the daemon goes away: exit 3 with the message, terminal restored;
# - a slow, large reply shows "receiving profile: X of Y" on a terminal and nothing in a pipe.
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from profd_e2e import *

require_root()
if not shutil.which("tmux"):
    skip("tmux is not installed (scripts/install-deps installs it)")

tmp = tempfile.mkdtemp(prefix="profd-top-")
# Each session gets its own tmux server: a server that was just killed can still be exiting on
# its socket when the next new-session connects, and that client then fails with "server exited
# unexpectedly".
TMUX = ["tmux", "-L", f"profd-e2e-{os.getpid()}"]


def tmux(*args, check=True):
    r = subprocess.run([*TMUX, *args], capture_output=True, text=True, timeout=20)
    if check and r.returncode != 0:
        fail(f"tmux {' '.join(args)}: {r.stderr.strip()}")
    return r.stdout


def new_server(name):
    global TMUX
    TMUX = ["tmux", "-L", f"profd-e2e-{os.getpid()}-{name}"]


def screen():
    return tmux("capture-pane", "-p", "-t", "t")


def wait_screen(pred, what, timeout=10):
    deadline = time.time() + timeout
    text = ""
    while time.time() < deadline:
        text = screen()
        if pred(text):
            return text
        time.sleep(0.1)
    fail(f"{what}; the screen:\n{text}")


def table_rows(text):
    """{name: (self_pct, total_pct)} and the names in order, from `profctl table` output."""
    lines = text.splitlines()
    rules = [i for i, l in enumerate(lines) if l.startswith("----")]
    if len(rules) != 3:
        fail(f"table has {len(rules)} rule lines, expected 3:\n{text}")
    header = lines[rules[0] + 1].split()
    if header[:4] != ["Name", "Self", "CPU", "%"]:
        fail(f"unexpected table header: {lines[rules[0] + 1]!r}")
    rows, order = {}, []
    for l in lines[rules[1] + 1:rules[2]]:
        tok = l.split()
        # Name may hold spaces; the five columns after it do not.
        name, cols = " ".join(tok[:-5]), tok[-5:]
        rows[name] = (float(cols[0].rstrip("%")), float(cols[2].rstrip("%")))
        order.append(name)
    return rows, order, lines[rules[2] + 1:]


def top_rows(text):
    """[(name, self_pct, total_pct, self, total)] from the lines after top's column header."""
    lines = text.splitlines()
    hdr = [i for i, l in enumerate(lines) if re.match(r"\s*Self %\s+Total %\s+Self\s+Total", l)]
    if not hdr:
        return []
    out = []
    for l in lines[hdr[0] + 1:]:
        tok = l.split()
        if len(tok) < 5 or not tok[0].endswith("%"):
            break
        out.append((" ".join(tok[4:]), float(tok[0][:-1]), float(tok[1][:-1]), int(tok[2]),
                    int(tok[3])))
    return out


def share_a(rows):
    a = dict((r[0], r[1]) for r in rows)
    return a["spin_a"] / (a["spin_a"] + a["spin_b"])


burn = start_fixture("burn", 40)
try:
    with Daemon("--pid", str(burn.pid), "--frequency", "499") as d:
        time.sleep(4)
        pid = str(burn.pid)

        # ---- table into a pipe -------------------------------------------------------------
        r = d.ctl("table", "--pid", pid)
        log(r.stdout)
        check(r.returncode == 0, f"profctl table exits 0 (got {r.returncode}: {r.stderr})")
        rows, order, footer = table_rows(r.stdout)
        check(order[0] == "spin_a", f"spin_a is the first row (got {order[0]})")
        check(len(order) <= 20, "the default limit is 20 rows")
        sa, sb = rows["spin_a"][0], rows["spin_b"][0]
        check(abs(sa / (sa + sb) - 0.75) <= 0.07,
              f"spin_a's Self % is 0.75 +- 0.07 of spin_a + spin_b ({sa} vs {sb})")
        check(rows["spin_a"][1] >= sa, "spin_a's total is at least its self")
        check(footer and re.match(r"Self CPU time total: \d+\.\d{3}(s|ms)$", footer[0]),
              f"the footer gives the CPU time total ({footer})")
        r = d.ctl("table", "--pid", pid, "--sort", "total", "--limit", "3")
        rows_t, order_t, _ = table_rows(r.stdout)
        check(len(order_t) == 3 and all(rows_t[n][1] >= 95 for n in order_t),
              f"--sort total --limit 3 lists three ~100% callers ({order_t})")

        # ---- top into a pipe: one table ----------------------------------------------------
        r = d.ctl("top", "--pid", pid, "--interval", "300ms", timeout=20)
        check(r.returncode == 0, f"profctl top into a pipe exits 0 ({r.returncode}: {r.stderr})")
        check("\033" not in r.stdout, "no escape sequences into a pipe")
        pr = top_rows(r.stdout)
        check(pr and pr[0][0] == "spin_a", f"plain top: spin_a first ({pr[:2]})")

        # ---- top on a terminal -------------------------------------------------------------
        rc_file = os.path.join(tmp, "rc")
        stty_file = os.path.join(tmp, "stty")
        env_cmd = f"env PS1='$ ' TERM=xterm-256color sh"
        new_server("top")
        tmux("new-session", "-d", "-s", "t", "-x", "120", "-y", "40", env_cmd)
        try:
            wait_screen(lambda s: "$" in s, "the shell prompt shows")
            cmd = (f"{PROFCTL} --socket {d.sock} top --pid {pid} --interval 300ms; "
                   f"echo $? > {rc_file}; stty -a > {stty_file}; echo TOP_DONE")
            tmux("send-keys", "-t", "t", cmd, "Enter")
            s1 = wait_screen(lambda s: len(top_rows(s)) >= 2, "top shows a table")
            log(s1)
            rows1 = top_rows(s1)
            check(rows1[0][0] == "spin_a", f"spin_a is the top row on screen ({rows1[0]})")
            share = share_a(rows1)
            check(abs(share - 0.75) <= 0.1, f"spin_a's Self % is ~75% of the work ({share:.3f})")
            head1 = s1.splitlines()[:3]
            check(f"pid {pid} (burn)" in head1[0], f"the header names the target ({head1[0]})")
            check(re.search(r"window: last 5\.0 s, \d+ samples", head1[2]),
                  f"the header gives the window and its samples ({head1[2]})")
            time.sleep(1.5)
            s2 = wait_screen(lambda s: len(top_rows(s)) >= 2, "top still shows a table")
            head2 = s2.splitlines()[:3]
            check(head2 != head1, f"the header changed between refreshes:\n{head1}\n{head2}")
            check(re.search(r"daemon: 499 Hz .* [1-9]\d* samples/s", head2[1]),
                  f"the header shows the daemon's sample rate ({head2[1]})")
            tmux("send-keys", "-t", "t", "s")
            s3 = wait_screen(lambda s: "sort: total" in s, "'s' sorts by total")
            rows3 = top_rows(s3)
            check(rows3 and rows3[0][2] >= 95,
                  f"sorted by total, the first row is ~100% ({rows3[:1]})")
            tmux("send-keys", "-t", "t", "q")
            s4 = wait_screen(lambda s: re.search(r"^TOP_DONE\s*\n\$", s, re.M),
                             "'q' quits and the shell prompts again")
            log(s4)
            with open(rc_file) as f:
                check(f.read().strip() == "0", "top exits 0 on 'q'")
            check("Total %" not in s4 and "top --pid" in s4,
                  "the shell's screen is back (alternate screen left)")
            with open(stty_file) as f:
                modes = f.read().split()
            check("icanon" in modes and "echo" in modes and "isig" in modes,
                  "canonical mode, echo and signals are restored")

            # ---- the daemon goes away: exit 3 and the terminal back --------------------------
            os.unlink(rc_file)
            tmux("send-keys", "-t", "t", "clear; " + cmd, "Enter")
            wait_screen(lambda s: len(top_rows(s)) >= 2, "top shows a table again")
            d.stop()
            s5 = wait_screen(lambda s: re.search(r"^TOP_DONE\s*$", s, re.M),
                             "top ends when the daemon stops")
            log(s5)
            with open(rc_file) as f:
                check(f.read().strip() == "3", "top exits 3 when the daemon goes away")
            check(re.search(r"profctl: (no daemon at|the daemon at) ", s5),
                  "the error is printed on the restored screen")
            with open(stty_file) as f:
                modes = f.read().split()
            check("icanon" in modes and "echo" in modes, "terminal modes restored after the error")
        finally:
            tmux("kill-server", check=False)
finally:
    if burn.poll() is None:
        burn.kill()


# ---- progress on long replies, from a daemon that answers slowly ----------------------------
def fake_daemon(path, ready):
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(4)
    ready.set()
    for _ in range(2):
        c, _ = srv.accept()
        read_frame(c)
        c.sendall(frame(field_bytes(1, field_varint(1, PROTOCOL_VERSION))))
        read_frame(c)
        strings = [b"", b"main", b"samples", b"count", b"x" * (6 << 20)]
        prof = b"".join(field_bytes(1, s) for s in strings)
        prof += field_bytes(2, field_varint(1, 2) + field_varint(2, 1))
        prof += field_bytes(3, field_bytes(1, b"\x00"))
        prof += field_bytes(4, field_varint(1, 2) + field_varint(2, 3))
        prof += field_bytes(5, field_varint(1, 0) + field_varint(2, 7) + field_varint(3, 7) +
                            field_bytes(4, b"\x05"))
        body = frame(field_bytes(3, prof))
        step = len(body) // 25
        for i in range(0, len(body), step):
            c.sendall(body[i:i + step])
            time.sleep(0.1)
        c.close()


fake = os.path.join(tmp, "fake.sock")
ready = threading.Event()
threading.Thread(target=fake_daemon, args=(fake, ready), daemon=True).start()
ready.wait(5)
out = os.path.join(tmp, "table.txt")
new_server("progress")
tmux("new-session", "-d", "-s", "p", "-x", "100", "-y", "10", "env PS1='$ ' sh")
try:
    tmux("send-keys", "-t", "p",
         f"{PROFCTL} --socket {fake} table > {out}; echo PROGRESS_DONE=$?", "Enter")
    s = ""
    deadline = time.time() + 10
    seen = None
    while time.time() < deadline:
        s = tmux("capture-pane", "-p", "-t", "p")
        m = re.search(r"receiving profile: [\d.]+ (MiB|KiB) of 6\.0 MiB", s)
        if m:
            seen = m.group(0)
        if re.search(r"^PROGRESS_DONE", s, re.M):
            break
        time.sleep(0.1)
    log(s)
    check(seen is not None, f"a progress line showed on the terminal ({seen})")
    check("PROGRESS_DONE=0" in s and "receiving profile" not in s,
          "the progress line is cleared at the end")
    with open(out) as f:
        check(re.search(r"^main\s+100\.00%", f.read(), re.M), "the table arrived whole")
finally:
    tmux("kill-server", check=False)
r = subprocess.run([PROFCTL, "--socket", fake, "table"], capture_output=True, text=True,
                   timeout=30)
check(r.returncode == 0 and r.stderr == "", f"no progress into a pipe (stderr {r.stderr!r})")
log("PASS")
