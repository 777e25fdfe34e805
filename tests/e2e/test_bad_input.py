#!/usr/bin/env python3
# Bad input against the real daemon: garbage, oversized and truncated frames, unknown requests,
# requests before Hello, a wrong version, a client that vanishes mid-reply, a slow client, and
# two clients at once. The daemon answers with errors or closes that one connection, and keeps
# serving everyone else.
import socket
import struct
import threading
import time
from profd_e2e import *

ERROR_BAD_REQUEST, ERROR_UNSUPPORTED_VERSION, ERROR_TOO_LARGE = 1, 2, 5

require_root()
burn = start_fixture("burn", 30)
try:
    with Daemon("--frequency", "999") as d:
        time.sleep(2)

        def alive(what):
            r = d.ctl("status")
            check(d.proc.poll() is None and r.returncode == 0, f"daemon serves after {what}")

        def hello(s):
            s.sendall(req_hello())
            body = read_frame(s)
            check(body is not None and error_of(body) is None, "hello answered")

        # Request before Hello.
        s = connect(d.sock)
        s.sendall(req_status())
        e = error_of(read_frame(s) or b"")
        check(e is not None and e[0] == ERROR_BAD_REQUEST and "hello" in e[1].lower(),
              f"status before hello is refused: {e}")
        s.close()
        alive("a request before hello")

        # Wrong protocol version.
        s = connect(d.sock)
        s.sendall(req_hello(version=999))
        e = error_of(read_frame(s) or b"")
        check(e is not None and e[0] == ERROR_UNSUPPORTED_VERSION, f"version 999 refused: {e}")
        check(read_frame(s) is None, "connection closed after a version mismatch")
        s.close()

        # Garbage body in a well-formed frame.
        s = connect(d.sock)
        hello(s)
        s.sendall(frame(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01garbage"))
        body = read_frame(s)
        check(body is None or error_of(body) is not None, "garbage answered by an error")
        s.close()
        alive("garbage bytes")

        # Raw junk with no framing at all.
        s = connect(d.sock)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        body = read_frame(s)
        check(body is None or error_of(body) is not None, "HTTP junk refused")
        s.close()
        alive("junk without framing")

        # A length over the maximum: refused before the daemon allocates it.
        s = connect(d.sock)
        hello(s)
        s.sendall(struct.pack(">I", 0xFFFFFFF0) + b"x" * 100)
        e = error_of(read_frame(s) or b"")
        check(e is not None and e[0] == ERROR_TOO_LARGE, f"oversized frame refused: {e}")
        check(read_frame(s) is None, "connection closed after an oversized frame")
        s.close()
        alive("an oversized frame")

        # A truncated frame, then hang up.
        s = connect(d.sock)
        hello(s)
        s.sendall(struct.pack(">I", 100) + b"\x12\x00")
        s.close()
        alive("a truncated frame")

        # Unknown request (a field number from the future): an error, the connection stays.
        s = connect(d.sock)
        hello(s)
        s.sendall(frame(field_bytes(15, b"")))
        e = error_of(read_frame(s) or b"")
        check(e is not None and e[0] == ERROR_BAD_REQUEST, f"unknown request refused: {e}")
        s.sendall(req_status())
        body = read_frame(s)
        check(body is not None and 2 in top_fields(body), "status works on the same connection")
        s.close()

        # A client that asks for a large dump and disconnects before reading it.
        for _ in range(5):
            s = connect(d.sock)
            hello(s)
            s.sendall(req_dump())
            s.close()
        s = connect(d.sock)
        hello(s)
        s.sendall(req_dump())
        hdr = s.recv(2)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # reset mid-reply
        alive("clients that vanish mid-reply")

        # A slow client: many dump requests, never reads. Others are still served promptly.
        slow = connect(d.sock)
        hello(slow)
        slow.setblocking(False)
        sent = 0
        try:
            for _ in range(200):
                slow.send(req_dump())
                sent += 1
        except BlockingIOError:
            pass
        t0 = time.time()
        r = d.ctl("status")
        dt = time.time() - t0
        check(r.returncode == 0 and dt < 10, f"status answered in {dt:.2f}s beside a slow client")
        rss = [l for l in r.stdout.splitlines() if "rss" in l.lower()]
        log(f"daemon memory beside the slow client: {rss}")
        slow.close()

        # Two clients at once, interleaved on the wire.
        a, b = connect(d.sock), connect(d.sock)
        a.sendall(req_hello())
        b.sendall(req_hello())
        a.sendall(req_status())
        b.sendall(req_status())
        ra = [read_frame(a), read_frame(a)]
        rb = [read_frame(b), read_frame(b)]
        check(all(x is not None and error_of(x) is None for x in ra + rb),
              "two clients at once both get hello and status")
        a.close()
        b.close()

        # Many clients in parallel threads.
        results = []

        def one():
            r = d.ctl("status")
            results.append(r.returncode)

        ts = [threading.Thread(target=one) for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        check(results == [0] * 8, f"8 parallel profctl status all succeed: {results}")
        alive("everything")
finally:
    burn.kill()
    burn.wait()
log("PASS")
