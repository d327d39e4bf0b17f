# SPDX-License-Identifier: Apache-2.0
"""The Python adapter's cost per request that gets a connection at once
(scripts/bench section 9), counted by callgrind: instructions per request
of a client fetching from a local aiohttp server (not under the shim) on a
pool that never fills, as the difference of two runs (N1 and N2 requests)
divided by N2 - N1, so start-up and exit cancel. Each client, in one run,
three ways: no shim, the shim with NEMOLENS_PYTHON=off, the shim with the
adapter; with Debian 12's libraries and, when the test tree of Debian 13's
is installed (scripts/setup-deps.sh), with those.

  python_adapter_calls.py SO OUT_DIR N1 N2 [first]

Writes OUT_DIR/calls, a line a client and library version:
  "<client> <version> <none> <off> <on>" (instructions per request)
  aiohttp        async: one ClientSession, requests one after the other
  httpx          sync: one httpx.Client, requests one after the other
  httpx-async    async: one httpx.AsyncClient, the same
"first" measures the first client with Debian 12's library only and without
the no-shim control (the smoke run: every valgrind run of Python costs seconds). PYTHONHASHSEED is fixed: the interpreter's string hashing otherwise
moves a run's count by more than the adapter costs.
"""
import os
import re
import subprocess
import sys

SO, OUT, N1, N2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
FIRST = sys.argv[5:] == ["first"]
PY = "/usr/bin/python3"
TRIXIE = "/opt/nemolens-deps/python-trixie/usr/lib/python3/dist-packages"
LIBS = [None] + ([TRIXIE] if os.path.isdir(TRIXIE) and not FIRST else [])

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aiohttp_ok_server.py")

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
    "httpx-async": r"""
import asyncio, sys, httpx
async def main(url, n):
    async with httpx.AsyncClient() as c:
        for _ in range(n):
            r = await c.get(url)
            await r.aread()
asyncio.run(main(sys.argv[1], int(sys.argv[2])))
""",
}


def env(mode, libs):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "NEMOLENS_", "NEMO_GYM_"))}
    e.pop("PYTHONPATH", None)
    e.pop("LD_PRELOAD", None)
    e["PYTHONHASHSEED"] = "0"
    if libs:
        e["PYTHONPATH"] = libs
    if mode != "none":
        # Recording, as in production; the export goes nowhere, once, at exit.
        e.update(LD_PRELOAD=SO, NEMOLENS_PYTHON=mode, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="http://127.0.0.1:9/",
                 OTEL_METRIC_EXPORT_INTERVAL="3600000", NEMOLENS_EXIT_TIMEOUT_MS="100")
    return e


def instructions(client, libs, url, n, mode):
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                        PY, "-c", CLIENTS[client], url, str(n)],
                       env=env(mode, libs), capture_output=True, text=True, check=True)
    m = re.search(r"Collected : (\d+)", p.stderr)
    if not m:
        raise RuntimeError("no callgrind total: " + p.stderr[-500:])
    return int(m.group(1))


def version(client, libs):
    package = client.split("-")[0]
    p = subprocess.run([PY, "-c", "import %s; print(%s.__version__)" % (package, package)],
                       env=env("none", libs), capture_output=True, text=True, check=True)
    return "%s-%s" % (package, p.stdout.strip())


server = subprocess.Popen([PY, SERVER], stdout=subprocess.PIPE, text=True,
                          env={k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PYTHONPATH")})
try:
    url = "http://127.0.0.1:%s/" % server.stdout.readline().strip()
    with open(os.path.join(OUT, "calls"), "w") as f:
        for client in list(CLIENTS)[:1] if FIRST else CLIENTS:
            for libs in LIBS:
                per = [float("nan") if FIRST and mode == "none" else
                       (instructions(client, libs, url, N2, mode) - instructions(client, libs, url, N1, mode))
                       / (N2 - N1) for mode in ("none", "off", "on")]
                f.write("%s %s %.0f %.0f %.0f\n" % (client, version(client, libs), *per))
                f.flush()
finally:
    server.kill()   # the bench's own child; nothing of its state matters
    server.wait(timeout=10)
