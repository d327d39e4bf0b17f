# SPDX-License-Identifier: Apache-2.0
"""The dashboard's panels, drawn in a real browser from real data.

VictoriaMetrics is fed the demo's workload under the shim (gym_workload.py);
scripts/demo/viewer.py serves the page that draws every panel of
dashboards/nemolens.json from the backend, as `scripts/demo.sh --keep`
leaves it running. Debian's headless Chromium loads it twice: once to dump
the DOM the page's script built (every panel must report data, and a chart
position), once to take a screenshot, in which every panel's chart area
must hold drawn series (pixels of the series colours, not just the white
chart background and grey frame).
"""
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from gym_workload import GymWorkload  # noqa: E402
from victoria import Victoria  # noqa: E402

sys.path.insert(0, os.path.join(harness.SRC, "scripts", "demo"))
import dashboard  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WINDOW = (1400, 3200)
# Chromium stops running the page once this much virtual time has passed
# with nothing left to load; the page needs well under a second.
BUDGET_MS = 15000
# The page's time window: the workload's few seconds, at a 2 s step.
WINDOW_S = 300


def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB/RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            if depth != 8 or color not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG: depth {depth}, colour type {color}, interlace {interlace}")
            bpp = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        off = y * (stride + 1)
        ftype, line = raw[off], bytearray(raw[off + 1:off + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 0xFF
            elif ftype == 2:
                line[i] = (line[i] + b) & 0xFF
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def coloured(rgb):
    """A pixel of a series colour: saturated, unlike the page's whites and greys."""
    return max(rgb) - min(rgb) > 60


class ViewerInChromium(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(CHROMIUM, os.X_OK):
            raise RuntimeError("chromium not found: run scripts/setup-deps.sh")
        cls.tmp = tempfile.mkdtemp(prefix="nemolens-viewer.")
        cls.vm = Victoria()
        workload = GymWorkload(cls.vm)
        try:
            workload.run()
        finally:
            workload.stop()
        cls.vm.flush()
        cls.viewer = subprocess.Popen([harness.PYTHON, os.path.join(harness.SRC, "scripts", "demo", "viewer.py"),
                                       "--vm", cls.vm.url], stdout=subprocess.PIPE, text=True,
                                      stdin=subprocess.DEVNULL)
        cls.url = json.loads(cls.viewer.stdout.readline())["url"]

    @classmethod
    def tearDownClass(cls):
        if cls.viewer.poll() is None:
            os.kill(cls.viewer.pid, signal.SIGTERM)
            cls.viewer.wait(10)
        cls.viewer.stdout.close()
        cls.vm.stop()
        if not os.environ.get("NL_KEEP_SHOT"):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def chromium(self, *args):
        profile = tempfile.mkdtemp(prefix="profile.", dir=self.tmp)
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-extensions", "--hide-scrollbars", "--force-device-scale-factor=1",
               f"--user-data-dir={profile}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
               f"--virtual-time-budget={BUDGET_MS}", *args, self.url + f"?window={WINDOW_S}"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        return p

    def panels_in_dom(self):
        dom = self.chromium("--dump-dom").stdout
        self.assertRegex(dom, r'<body[^>]*data-done="1"', dom[-2000:])
        self.assertNotRegex(dom, r'<body[^>]*data-error=', dom[-2000:])
        found = {}
        for m in re.finditer(r'<div class="panel"([^>]*)>', dom):
            attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))
            found[attrs["data-title"]] = attrs
        return dom, found

    def test_every_panel_drew_data(self):
        dom, found = self.panels_in_dom()
        titles = [p["title"] for p in dashboard.panels()]
        self.assertEqual(sorted(found), sorted(titles))
        for title in titles:
            attrs = found[title]
            self.assertEqual(attrs.get("data-state"), "data", f"{title}: {attrs}")
            self.assertGreater(int(attrs["data-points"]), 0, title)
        self.assertGreaterEqual(dom.count('class="series"'), len(titles))

        shot = os.path.join(self.tmp, "viewer.png")
        self.chromium(f"--screenshot={shot}")
        width, height, rows = read_png(shot)
        self.assertEqual((width, height), WINDOW)
        blank = []
        for title in titles:
            x, y, w, h = (int(v) for v in found[title]["data-chart"].split(","))
            self.assertLessEqual(y + h, height, f"{title} is below the screenshot")
            n = sum(coloured(rows[yy][xx]) for yy in range(y, y + h) for xx in range(x, min(x + w, width)))
            if n < 20:
                blank.append(f"{title}: {n} coloured pixels in {w}x{h} at {x},{y}")
        self.assertEqual(blank, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
