# SPDX-License-Identifier: BSD-2-Clause
# A user of the socket's group holds all the connections her uid may have and then connects in
# a loop, each connection refused as busy (issue 24 item 5: 182,161 "refused, too many
# connections" lines, 19.5 MB, in 20 s). The daemon's log gets at most a burst of the refusal
# per 10 s and one line with the count, and the lines and counts add up to every refusal.
import grp
import os
import re
import time

from profd_e2e import (Daemon, check, connect, error_of, log, read_frame, req_hello, req_status,
                       temp_user)

USER = "profd-e2e-logflood"
HOLD = 16  # the per-uid share of the default 64 client slots
LOOP_S = 5
BURST = 10  # lib/log.h: LOG_RATE_BURST lines per LOG_RATE_INTERVAL_NS (10 s)

pw = temp_user(USER)


def looper(path, uid, gid, wfd):
    """The user's connect loop, in a child as the user; writes how many were refused."""
    refused = admitted = 0
    try:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        held = []
        for _ in range(HOLD):
            s = connect(path, timeout=30)
            s.sendall(req_hello())
            read_frame(s)
            held.append(s)
        t_end = time.monotonic() + LOOP_S
        while time.monotonic() < t_end:
            s = connect(path, timeout=30)
            try:
                s.sendall(req_hello() + req_status())
            except OSError:
                pass  # refused at accept: the busy error is already waiting
            # The replies to Hello and Status: refused at accept, the first is the error.
            busy = False
            for _ in range(2):
                try:
                    body = read_frame(s)
                except OSError:
                    body = None
                e = error_of(body) if body is not None else None
                if body is None or e:
                    busy = bool(e and "too many connections" in e[1])
                    break
            s.close()
            if busy:
                refused += 1
            else:
                admitted += 1
        os.write(wfd, f"{refused} {admitted}".encode())
        os._exit(0)
    except Exception as e:  # noqa: BLE001 - report any failure as an exit code
        print(f"looper: {e}", flush=True)
        os._exit(2)


group = grp.getgrgid(pw.pw_gid).gr_name
with Daemon("--socket-group", group) as d:
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        looper(d.sock, pw.pw_uid, pw.pw_gid, w)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    elapsed = time.monotonic() - t0
    out = os.read(r, 100).decode().split()
    os.close(r)
    check(os.waitstatus_to_exitcode(status) == 0 and len(out) == 2,
          f"the connect loop ran: exit {os.waitstatus_to_exitcode(status)}, {out}")
    refused, admitted = int(out[0]), int(out[1])
    during = [ln for ln in d.log_text().splitlines() if "refused, too many connections" in ln]
    # Stopped: the count still held back is written at exit.
    d.stop()
    text = d.log_text()

lines = [ln for ln in text.splitlines() if "refused, too many connections" in ln]
written = [ln for ln in lines if "(repeated " not in ln]
counts = [int(m.group(1).replace(",", "")) for ln in lines
          for m in [re.search(r"\(repeated ([0-9,]+) times in \d+ s\)$", ln)] if m]
intervals = int(elapsed // 10) + 1
log(f"{refused} connections refused ({admitted} admitted) in {elapsed:.1f} s; the log has "
    f"{len(during)} refusal lines during the loop, {len(written)} lines and counts {counts} "
    f"after the stop; {len(text)} bytes of log in all")
check(refused >= 100, f"the loop was a flood: {refused} refusals")
check(len(during) <= intervals * (BURST + 1),
      f"at most {BURST} lines and a count per 10 s during the loop: {len(during)}")
check(len(written) <= intervals * BURST, f"refusal lines bounded: {len(written)}")
check(len(written) + sum(counts) == refused,
      f"every refusal is written or counted: {len(written)} + {sum(counts)} of {refused}")
check(len(text) < 64 * 1024, f"the log stays small: {len(text)} bytes")
log("all ok")
