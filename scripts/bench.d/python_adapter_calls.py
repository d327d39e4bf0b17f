# SPDX-License-Identifier: Apache-2.0
"""The Python adapter's cost per request that gets a connection at once
(scripts/bench section 9), counted by callgrind: instructions per request
of a client fetching from a local aiohttp server (not under the shim) on a
pool that never fills, as the difference of two runs (N1 and N2 requests)
divided by N2 - N1, so start-up and exit cancel. Three clients each, in one
run: no shim, the shim with NEMOLENS_PYTHON=off, the shim with the adapter.

  python_adapter_calls.py SO OUT_DIR N1 N2

Writes OUT_DIR/calls: "<client> <none|off|on> <instructions per request>".
  aiohttp  async: one ClientSession, requests one after the other
  httpx    sync: one httpx.Client, requests one after the other
"""
import os
import re
import subprocess
import sys

SO, OUT, N1, N2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
PY = "/usr/bin/python3"

SERVER = r"""
from aiohttp import web
import socket
async def ok(request):
    return web.Response(text="ok")
app = web.Application()
app.router.add_get("/", ok)
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(512)
print(s.getsockname()[1], flush=True)
web.run_app(app, sock=s, print=None, handle_signals=True)
"""

CLIENTS = {
    "aiohttp": r"""
import asyncio, sys, aiohttp
async def main(url, n):
    async with aiohttp.ClientSession() as s:
        for _ in range(n):
            async with s.get(url) as r:
                await r.read()
asyncio.run(main(sys.argv[1], int(sys.argv[2])))
""",
    "httpx": r"""
import sys, httpx
with httpx.Client() as c:
    for _ in range(int(sys.argv[2])):
        c.get(sys.argv[1]).read()
""",
}


def env(mode):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "NEMOLENS_", "NEMO_GYM_"))}
    e.pop("PYTHONPATH", None)
    e.pop("LD_PRELOAD", None)
    if mode != "none":
        # Recording, as in production; the export goes nowhere, once, at exit.
        e.update(LD_PRELOAD=SO, NEMOLENS_PYTHON=mode, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="http://127.0.0.1:9/",
                 OTEL_METRIC_EXPORT_INTERVAL="3600000", NEMOLENS_EXIT_TIMEOUT_MS="100")
    return e


def instructions(client, url, n, mode):
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                        PY, "-c", CLIENTS[client], url, str(n)],
                       env=env(mode), capture_output=True, text=True, check=True)
    m = re.search(r"Collected : (\d+)", p.stderr)
    if not m:
        raise RuntimeError("no callgrind total: " + p.stderr[-500:])
    return int(m.group(1))


server = subprocess.Popen([PY, "-c", SERVER], stdout=subprocess.PIPE, text=True,
                          env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
try:
    url = "http://127.0.0.1:%s/" % server.stdout.readline().strip()
    with open(os.path.join(OUT, "calls"), "w") as f:
        for client in CLIENTS:
            for mode in ("none", "off", "on"):
                per = (instructions(client, url, N2, mode) - instructions(client, url, N1, mode)) / (N2 - N1)
                f.write("%s %s %.0f\n" % (client, mode, per))
                f.flush()
finally:
    server.kill()   # the bench's own child; nothing of its state matters
    server.wait(timeout=10)
