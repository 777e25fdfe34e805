#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""Fixed-work multi-threaded Python target for bench/python_vs_pyspy.py.

  py_work.py [--threads 4] [--rounds N] [--wait]

Each of the threads runs the same fixed number of rounds (a fixed amount of work, not a fixed
time); a round calls eleven Python functions whose self CPU time differs clearly (from about a
quarter of the total down to a few percent): a method (Accumulator.add_squares), a nested function
(make_scaler.<locals>.scale), a generator (primes) drained by its caller (count_primes), a
recursive function (fib), a caller with its own loop around a small helper (blend around lerp),
and plain loops. The threads share the GIL, so together they keep about one CPU busy.

Prints "wall SECONDS" (from the start of the threads to the end of the last one) on stdout.
With --wait it first prints "ready PID" and waits for a line on stdin before starting, and after
printing the wall time waits for another line before exiting: the caller attaches a profiler in
between and reads the profiler's CPU time at exactly the start and the end of the work.
"""
import argparse
import os
import sys
import threading
import time


class Accumulator:
    def __init__(self):
        self.total = 0

    def add_squares(self, n):
        t = self.total
        for i in range(n):
            t = (t + i * i) & 0xFFFFFFFF
        self.total = t
        return t


def parse_fields(n):
    line = "alpha,beta,gamma,delta"
    out = 0
    for i in range(n):
        parts = line.split(",")
        out += len(parts[i & 3])
    return out


def make_scaler(factor):
    def scale(values):
        s = 0
        for v in values:
            s += v * factor
        return s

    return scale


def primes(limit):
    for n in range(2, limit):
        for d in range(2, int(n ** 0.5) + 1):
            if n % d == 0:
                break
        else:
            yield n


def count_primes(limit, passes):
    c = 0
    for _ in range(passes):
        for p in primes(limit):
            c += p & 1
            for k in range(20):
                c ^= k
    return c


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def checksum(data):
    s = 0
    for b in data:
        s = (s * 31 + b) & 0xFFFF
    return s


def dict_churn(n):
    d = {}
    for i in range(n):
        k = i & 255
        d[k] = d.get(k, 0) + i
    return len(d)


def lerp(a, b, t):
    return a + (b - a) * t


def blend(n):
    acc = 0.0
    for i in range(n):
        x = i * 0.001
        y = x * x - x
        acc += y if i & 1 else -y
        acc = lerp(acc, y, 0.5)
    return acc


DATA = bytes(range(256)) * 16
VALUES = list(range(3000))


def one_round(acc, scale):
    """One round of every function; the sizes set each function's share of the CPU time."""
    acc.add_squares(24000)
    parse_fields(7500)
    scale(VALUES)
    scale(VALUES)
    scale(VALUES)
    scale(VALUES)
    count_primes(600, 3)
    fib(18)
    checksum(DATA)
    checksum(DATA)
    dict_churn(9000)
    blend(6500)


def worker(rounds):
    acc = Accumulator()
    scale = make_scaler(3)
    for _ in range(rounds):
        one_round(acc, scale)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--wait", action="store_true")
    a = ap.parse_args(argv[1:])
    if a.threads < 1 or a.rounds < 1:
        ap.error("--threads and --rounds must be positive")
    if a.wait:
        print(f"ready {os.getpid()}", flush=True)
        sys.stdin.readline()
    threads = [threading.Thread(target=worker, args=(a.rounds,), name=f"work-{i}")
               for i in range(a.threads)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"wall {time.perf_counter() - t0:.4f}", flush=True)
    if a.wait:
        sys.stdin.readline()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
