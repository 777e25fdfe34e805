#!/usr/bin/env python3
"""Loads for the churn soak (bench/run.py churn) written in Python, one mode per process. Each
runs until killed and rewrites COUNTS (a JSON object of what it did so far) about once a second.

  churn_load.py execs RATE COUNTS
        short-lived processes of many different binaries and shell pipelines, paced to about
        RATE new processes a second (each command counts the processes it creates)
  churn_load.py run PATH COUNTS
        run the program at PATH ("PATH victim 150": 150 ms of CPU) over and over with 100 ms
        pauses, counting the runs that worked and the ones that failed (text file busy, bad
        executable, signals)
  churn_load.py replace PATH COUNTS VARIANT...
        every 150 ms put another of the VARIANT binaries at PATH: mostly a new copy renamed over
        it (a new inode, often while it runs), one time in four truncated and rewritten in place
        (the same inode; refused while it runs, so tried again for up to 300 ms), one time in
        twelve left half written for 50 ms first
"""
import errno
import json
import os
import random
import shutil
import subprocess
import sys
import time


def writer(path):
    last = [0.0]

    def write(obj, force=False):
        now = time.monotonic()
        if not force and now - last[0] < 1.0:
            return
        last[0] = now
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(obj, f)
        os.replace(tmp, path)
    return write


def pace(t0, done, rate):
    """Sleep until `done` units are due at `rate` a second since t0; never catch up more than
    1 s. Returns the (possibly moved) t0."""
    now = time.monotonic()
    due = t0 + done / rate
    if now - due > 1.0:
        return t0 + now - due - 1.0
    if due > now:
        time.sleep(due - now)
    return t0


def exec_commands():
    """(argv, processes it creates): single binaries, a Python start-up, shell pipelines."""
    py = sys.executable or "python3"
    cmds = [
        (["/bin/true"], 1),
        (["/bin/false"], 1),
        (["env"], 1),
        (["date", "+%s.%N"], 1),
        (["uname", "-a"], 1),
        (["id"], 1),
        (["cat", "/proc/self/status"], 1),
        (["ls", "-l", "/usr/bin"], 1),
        (["stat", "/etc/passwd"], 1),
        (["readlink", "-f", "/proc/self/exe"], 1),
        (["seq", "1", "2000"], 1),
        (["sha1sum", "/etc/services"], 1),
        (["md5sum", "/etc/passwd"], 1),
        (["gzip", "-c", "/etc/services"], 1),
        (["sort", "/etc/services"], 1),
        (["awk", "{ n += NF } END { print n }", "/etc/services"], 1),
        (["sed", "s/a/b/g", "/etc/services"], 1),
        (["grep", "-c", "tcp", "/etc/services"], 1),
        ([py, "-c", "pass"], 1),
        ([py, "-S", "-c", "import json, re; json.dumps(list(range(1000)))"], 1),
        (["sh", "-c", "cat /etc/services | tr a-z A-Z | sort | uniq -c | wc -l"], 6),
        (["sh", "-c", "ls /usr/lib | head -50 | xargs -n 10 echo | wc -c"], 6),
        (["sh", "-c", "for i in 1 2 3; do expr $i + 1; done | tail -1"], 5),
        (["sh", "-c", "basename /a/b/c; dirname /a/b/c; printf '%s\\n' x | cut -c1"], 5),
        (["perl", "-e", "my $s = 0; $s += $_ for 1..10000"], 1),
    ]
    return [(c, n) for c, n in cmds if os.path.isabs(c[0]) or shutil.which(c[0])]


def execs(rate, counts):
    write = writer(counts)
    cmds = exec_commands()
    done = {"processes": 0, "commands": 0, "failed": 0, "binaries": len(cmds)}
    t0 = time.monotonic()
    while True:
        for argv, n in random.sample(cmds, len(cmds)):
            try:
                subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL)
            except OSError:
                done["failed"] += 1
            done["processes"] += n
            done["commands"] += 1
            write(done)
            t0 = pace(t0, done["processes"], rate)


def run(path, counts):
    write = writer(counts)
    done = {"runs": 0, "ok": 0, "text_busy": 0, "exec_error": 0, "signalled": 0, "failed": 0}
    while True:
        done["runs"] += 1
        try:
            r = subprocess.run([path, "victim", "150"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                done["ok"] += 1
            elif r.returncode < 0:
                done["signalled"] += 1
            else:
                done["failed"] += 1
        except OSError as e:
            if e.errno == errno.ETXTBSY:
                done["text_busy"] += 1
            else:
                done["exec_error"] += 1
        write(done)
        time.sleep(0.1)


def replace(path, counts, variants):
    write = writer(counts)
    blobs = [open(v, "rb").read() for v in variants]
    done = {"replaced": 0, "renamed": 0, "in_place": 0, "half_written": 0, "busy": 0,
            "gave_up": 0}
    i = 0
    while True:
        i += 1
        data = blobs[i % len(blobs)]
        try:
            if i % 4 == 0:
                # Same inode, new contents: refused (text file busy) while a run holds it, so
                # try again in the pauses between runs.
                deadline = time.monotonic() + 0.3
                while True:
                    try:
                        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
                        break
                    except OSError as e:
                        if e.errno != errno.ETXTBSY or time.monotonic() > deadline:
                            raise
                        done["busy"] += 1
                        time.sleep(0.005)
                try:
                    if i % 12 == 0:
                        os.write(fd, data[:len(data) // 2])
                        time.sleep(0.05)
                        os.write(fd, data[len(data) // 2:])
                        done["half_written"] += 1
                    else:
                        os.write(fd, data)
                finally:
                    os.close(fd)
                done["in_place"] += 1
            else:
                tmp = f"{path}.new"
                with open(tmp, "wb") as f:
                    f.write(data)
                os.chmod(tmp, 0o755)
                os.replace(tmp, path)
                done["renamed"] += 1
            done["replaced"] += 1
        except OSError as e:
            if e.errno != errno.ETXTBSY:
                raise
            done["gave_up"] += 1
        write(done)
        time.sleep(0.15)


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "execs":
        execs(float(args[0]), args[1])
    elif mode == "run":
        run(args[0], args[1])
    elif mode == "replace":
        replace(args[0], args[1], args[2:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
