#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
"""The unwind table builder (daemon/unwind/cfi.c, through profd-cfi) row by row against binutils'
readelf --debug-dump=frames-interp.

For every FDE readelf interprets, each of its rows (LOC, CFA, rbp, ra columns) is converted to
the row the table should hold by the rules of docs/unwinding.md, and the builder's table is
looked up at LOC (last row at or below it) as the BPF walker does. CFA expressions, which the
interpreted dump prints as "exp", are taken from the raw dump (--debug-dump=frames). Then every
row of the table must sit at a readelf LOC or at an FDE end (GAP). Any difference fails.

usage: check_cfi_readelf.py PROFD_CFI FILE...   (a file that does not exist is skipped)
"""
import bisect
import collections
import os
import re
import subprocess
import sys

REGS = {"rax": 0, "rdx": 1, "rcx": 2, "rbx": 3, "rsi": 4, "rdi": 5, "rbp": 6, "rsp": 7,
        "r8": 8, "r9": 9, "r10": 10, "r11": 11, "r12": 12, "r13": 13, "r14": 14, "r15": 15,
        "rip": 16}
HDR = re.compile(r"^([0-9a-f]{8,16}) [0-9a-f]+ ([0-9a-f]+) (CIE|FDE)(.*)$")
FDE_PC = re.compile(r"cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+)")
CELL = re.compile(r"r\d+ \([a-z0-9]+\)|\S+")
TO = re.compile(r" to ([0-9a-f]+)$")
PLT = re.compile(r"^DW_OP_breg7 \(rsp\): 8; DW_OP_breg16 \(rip\): 0; DW_OP_lit15; DW_OP_and; "
                 r"DW_OP_lit(\d+); DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus$")
DEREF = re.compile(r"^DW_OP_breg7 \(rsp\): (-?\d+); DW_OP_deref(?:; DW_OP_plus_uconst: (\d+))?$")

INVALID = ("INVALID", 0, 0)


def readelf(path, what):
    return subprocess.run(["readelf", "--debug-dump=" + what, path], check=False,
                          capture_output=True, text=True).stdout.splitlines()


def entries(lines):
    """(offset, kind, header rest, body lines) per CIE/FDE."""
    cur = None
    for line in lines:
        m = HDR.match(line)
        if m:
            if cur:
                yield cur
            cur = (m.group(1), m.group(3), m.group(2) + " " + m.group(4), [])
        elif cur:
            cur[3].append(line)
    if cur:
        yield cur


def interp_rows(body):
    """[(loc, {column: cell})] of an interpreted entry."""
    cols, rows = None, []
    for line in body:
        cells = CELL.findall(line)
        if not cells:
            continue
        if cells[0] == "LOC":
            cols = cells
        elif cols and re.fullmatch(r"[0-9a-f]{16}", cells[0]) and len(cells) == len(cols):
            rows.append((int(cells[0], 16), dict(zip(cols[1:], cells[1:]))))
    return rows


def cfa_exprs(body, start):
    """Sorted [(loc, expression text or None)]: the CFA expression current from loc on."""
    out, cur, stack, loc = [], None, [], start
    for line in body:
        s = line.strip()
        m = TO.search(s)
        if s.startswith("DW_CFA_advance_loc") or s.startswith("DW_CFA_set_loc"):
            out.append((loc, cur))
            if m:
                loc = int(m.group(1), 16)
            elif s.startswith("DW_CFA_set_loc"):
                loc = int(s.split()[-1], 16)
        elif s.startswith("DW_CFA_def_cfa_expression"):
            cur = s[s.index("(") + 1:s.rindex(")")]
        elif s.startswith("DW_CFA_def_cfa:") or s.startswith("DW_CFA_def_cfa_sf"):
            cur = None
        elif s.startswith("DW_CFA_remember_state"):
            stack.append(cur)
        elif s.startswith("DW_CFA_restore_state") and stack:
            cur = stack.pop()
    out.append((loc, cur))
    return out


def units8(text, lo, hi):
    v = int(text)
    if v % 8 or not lo <= v // 8 <= hi:
        return None
    return v // 8


def rbp_slot(cell):
    if cell in (None, "u", "s"):
        return 0
    m = re.fullmatch(r"c([+-]\d+)", cell)
    if not m:
        return None
    u = units8(m.group(1), -128, 127)
    return None if u in (None, 0) else u


def expect(cfa, rbp, ra, expr):
    """The row (kind, cfa, reg) the table should hold for one readelf row."""
    if ra == "u":
        return ("STOP", 0, 0)
    slot = rbp_slot(rbp)
    m = re.fullmatch(r"r(\d+) \(\w+\)", ra or "")
    if m:
        c = re.fullmatch(r"rsp\+(\d+)", cfa)
        u = c and units8(c.group(1), 0, 65535)
        if u is None or slot != 0 or int(m.group(1)) > 16:
            return INVALID
        return ("RA_REG", u, int(m.group(1)))
    if ra != "c-8" or slot is None:
        return INVALID
    m = re.fullmatch(r"([a-z0-9]+)\+(\d+)", cfa)
    if m and m.group(1) in REGS:
        if m.group(1) in ("rsp", "rbp"):
            u = units8(m.group(2), 0, 65535)
            return INVALID if u is None else (m.group(1).upper(), u, slot)
        u = units8(m.group(2), 0, 255)
        return INVALID if u is None else ("CFA_REG", u | (slot & 0xff) << 8, REGS[m.group(1)])
    if cfa == "exp" and expr:
        m = PLT.match(expr)
        if m:
            t = int(m.group(1))
            return ("PLT", 0, t) if t in (10, 11) and slot == 0 else INVALID
        m = DEREF.match(expr)
        if m:
            n = units8(m.group(1), 0, 255)
            mm = units8(m.group(2) or "0", -128, 127)
            if n is None or mm is None:
                return INVALID
            return ("DEREF", n | (mm & 0xff) << 8, slot)
    return INVALID


def table(tool, path):
    out = subprocess.run([tool, path], check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        if line.startswith("#"):
            continue
        pc, kind, cfa, reg = line.split()
        rows.append((int(pc, 16), kind, int(cfa[4:]), int(reg[4:])))
    return rows


def check(tool, path):
    raw = {off: (hdr, body) for off, kind, hdr, body in entries(readelf(path, "frames"))}
    cies, fdes = {}, []
    for off, kind, hdr, body in entries(readelf(path, "frames-interp")):
        rows = interp_rows(body)
        if kind == "CIE":
            aug = re.search(r'"([^"]*)"', hdr)
            cies[off] = (rows[0][1] if rows else {}, "S" in (aug.group(1) if aug else ""))
            continue
        m = FDE_PC.search(hdr)
        start, end = int(m.group(2), 16), int(m.group(3), 16)
        if start == end:
            continue
        fdes.append((start, end, m.group(1).zfill(len(off)), rows, cfa_exprs(raw[off][1], start)))
    fdes.sort(key=lambda f: f[0])
    rows = table(tool, path)
    pcs = [r[0] for r in rows]
    ok = collections.Counter()
    bad = collections.Counter()
    fails = []
    allowed = set()

    def lookup(loc):
        i = bisect.bisect_right(pcs, loc) - 1
        return rows[i][1:] if i >= 0 else None

    def compare(loc, want, what):
        got = lookup(loc)
        if got == want:
            ok[want[0]] += 1
        else:
            bad[want[0]] += 1
            if len(fails) < 20:
                fails.append("%s 0x%x (%s): want %s, table has %s" % (path, loc, what, want, got))

    for i, (start, end, cie_off, frows, exprs) in enumerate(fdes):
        nxt = fdes[i + 1][0] if i + 1 < len(fdes) else None
        eff_end = min(end, nxt) if nxt is not None else end
        if eff_end <= start:
            continue
        cie_row, signal = cies.get(cie_off, ({}, False))
        if not frows:
            frows = [(start, cie_row)]
        for loc, cols in frows:
            if loc >= eff_end:
                continue
            allowed.add(loc)
            if signal:
                compare(loc, ("SIGNAL", 0, 0), "signal")
                continue
            k = bisect.bisect_right([e[0] for e in exprs], loc) - 1
            expr = exprs[k][1] if k >= 0 else None
            want = expect(cols.get("CFA"), cols.get("rbp"), cols.get("ra"), expr)
            compare(loc, want, "CFA %s rbp %s ra %s%s" % (cols.get("CFA"), cols.get("rbp"),
                                                          cols.get("ra"),
                                                          " " + expr if expr else ""))
        if nxt is None or nxt - end >= 16:
            allowed.add(end)
            compare(end, ("GAP", 0, 0), "gap after the FDE")
    stray = [r for r in rows if r[0] not in allowed]
    total = sum(ok.values()) + sum(bad.values())
    kinds = sorted(set(ok) | set(bad))
    print("%s: %d FDEs, %d readelf rows + gaps checked, %d table rows (%d bytes): %.3f%% match"
          % (path, len(fdes), total, len(rows), 8 * len(rows),
             100.0 * sum(ok.values()) / max(total, 1)))
    print("  " + ", ".join("%s %d/%d" % (k, ok[k], ok[k] + bad[k]) for k in kinds))
    for f in fails:
        print("  MISMATCH " + f)
    for r in stray[:10]:
        print("  STRAY ROW 0x%x %s (no readelf LOC or FDE end there)" % (r[0], r[1]))
    return not fails and not stray and total > 0


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    tool, files = sys.argv[1], [f for f in sys.argv[2:] if os.path.exists(f)]
    if not files:
        print("check_cfi_readelf: none of the files exists: skipped")
        return 77
    good = all([check(tool, f) for f in files])
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
