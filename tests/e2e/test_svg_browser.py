#!/usr/bin/env python3
# The SVG flame graph of the burn fixture in a real browser: valid XML, headless Chromium draws
# the frames (pixels of the flame colours in a screenshot, none in a blank page), and a search
# given in the address (file.svg?s=spin_a) highlights the matching frames once the page loads.
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from profd_e2e import *

HIGHLIGHT = (230, 0, 230)  # the search highlight fill of the SVG's script
BACKGROUND = (246, 246, 240)


def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    w, h, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        fail(f"{path}: PNG depth {depth} colour type {ctype} interlace {interlace} not handled")
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 0xFF
            elif ftype == 2:
                line[x] = (line[x] + b) & 0xFF
            elif ftype == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[x] = (line[x] + pred) & 0xFF
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def count_pixels(rows, pred):
    return sum(1 for row in rows for px in row if pred(px))


def warm(px):
    """The native frames' red-to-orange family (format_svg.c), not grey, white or magenta."""
    r, g, b = px
    return r >= 180 and b <= 140 and r - b >= 80 and g >= 40


def near(px, want, tol=12):
    return all(abs(a - b) <= tol for a, b in zip(px, want))


class Chromium:
    def __init__(self):
        self.exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if not self.exe:
            skip("chromium is not installed (Debian package chromium)")
        self.tmp = tempfile.mkdtemp(prefix="profd-chromium-")
        self.n = 0

    def run(self, *args):
        # A private profile directory and HOME: headless Chromium writes both.
        self.n += 1
        profile = os.path.join(self.tmp, f"profile{self.n}")
        env = dict(os.environ, HOME=self.tmp)
        cmd = [self.exe, "--headless", "--no-sandbox", "--disable-gpu",
               f"--user-data-dir={profile}", "--no-first-run", "--disable-extensions",
               "--hide-scrollbars", *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env,
                           cwd=self.tmp)
        if r.returncode != 0:
            fail(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr[-2000:]}")
        return r

    def screenshot(self, url, name):
        out = os.path.join(self.tmp, name)
        self.run(f"--screenshot={out}", "--window-size=1200,800", url)
        if not os.path.exists(out):
            fail(f"chromium wrote no screenshot for {url}")
        return read_png(out)

    def dom(self, url):
        return self.run("--dump-dom", url).stdout


require_root()
if not shutil.which("xmllint"):
    skip("xmllint is not installed (Debian package libxml2-utils)")
browser = Chromium()
tmp = tempfile.mkdtemp(prefix="profd-svg-")
os.chmod(tmp, 0o755)
svg = os.path.join(tmp, "burn.svg")

burn = start_fixture("burn", 5)
try:
    with Daemon("--pid", str(burn.pid), "--frequency", "499") as d:
        burn.wait(30)
        time.sleep(0.3)
        r = d.ctl("dump", "flamegraph", "--pid", str(burn.pid), "-o", svg)
        check(r.returncode == 0, f"profctl dump -o burn.svg succeeds ({r.stderr.strip()})")
finally:
    if burn.poll() is None:
        burn.kill()

text = open(svg, encoding="utf-8").read()
r = subprocess.run(["xmllint", "--noout", svg], capture_output=True, text=True)
check(r.returncode == 0, f"xmllint accepts the SVG ({r.stderr.strip()[:300]})")
check("<title>spin_a (" in text and "<title>spin_b (" in text, "the SVG has spin_a and spin_b")

# A negative control first: the pixel checks must tell an empty page from a flame graph.
blank = os.path.join(tmp, "blank.svg")
with open(blank, "w") as f:
    f.write('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="1200" '
            'height="300"><rect width="1200" height="300" fill="#f6f6f0"/></svg>\n')
w, h, rows = browser.screenshot("file://" + blank, "blank.png")
check(count_pixels(rows, warm) == 0, "a blank page has no flame-coloured pixels")

url = "file://" + svg
w, h, rows = browser.screenshot(url, "plain.png")
check((w, h) == (1200, 800), f"the screenshot is 1200x800 (got {w}x{h})")
n_warm = count_pixels(rows, warm)
n_bg = count_pixels(rows, lambda px: near(px, BACKGROUND, 3))
n_hl = count_pixels(rows, lambda px: near(px, HIGHLIGHT))
log(f"plain: {n_warm} flame pixels, {n_bg} background pixels, {n_hl} highlight pixels")
# spin_a, work_a, run, main and their siblings: several 15 px rows across most of 1180 px.
check(n_warm > 30000, f"the screenshot shows the frames ({n_warm} flame-coloured pixels)")
check(n_bg > 20000, f"the SVG's background is drawn ({n_bg} pixels)")
check(n_hl == 0, "nothing is highlighted without a search")

# The search in the address runs on load: spin_a's rects take the highlight fill.
dom = browser.dom(url + "?s=spin_a")
groups = re.findall(r"<g class=\"f[^\"]*\"[^>]*><title>([^<]*)</title><rect ([^>]*)>", dom)
check(len(groups) >= 5, f"the DOM after the script ran has the frames ({len(groups)})")
hl = [t for t, attrs in groups if 'fill="rgb(230,0,230)"' in attrs]
check(any(t.startswith("spin_a (") for t in hl), f"spin_a is highlighted ({hl})")
check(all(t.startswith("spin_a (") for t in hl), "only frames matching spin_a are highlighted")
spin_b = [attrs for t, attrs in groups if t.startswith("spin_b (")]
check(spin_b and 'rgb(230,0,230)' not in spin_b[0], "spin_b keeps its colour")
m = re.search(r'id="matched"[^>]*>Matched: ([0-9.]+)% of samples for /spin_a/<', dom)
check(m is not None, "the matched line names the share and the term")
share = float(m.group(1))
check(60 <= share <= 90, f"spin_a matched {share}% of the samples (about 75%)")

# The fragment form works too, and the highlight shows up on screen.
dom = browser.dom(url + "#s=spin_b")
check(re.search(r"Matched: [0-9.]+% of samples for /spin_b/", dom) is not None,
      "#s=spin_b searches as well")
w, h, rows = browser.screenshot(url + "?s=spin_a", "search.png")
n_hl = count_pixels(rows, lambda px: near(px, HIGHLIGHT))
log(f"search: {n_hl} highlight pixels")
check(n_hl > 5000, f"the search highlight is on screen ({n_hl} pixels)")
shutil.rmtree(browser.tmp, ignore_errors=True)
shutil.rmtree(tmp, ignore_errors=True)
log("PASS")
