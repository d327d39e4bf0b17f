# SPDX-License-Identifier: Apache-2.0
"""The Python adapter's cost (scripts/bench section 9): every process runs
under the shim; A has NEMOLENS_PYTHON=off, B the adapter. Runs alternate
A B A B so drift cancels within a pair. Writes "A <value>" / "B <value>"
lines for stats.py into OUT_DIR/{start,aiohttp,httpx,queued}.

  python_adapter.py SO OUT_DIR PAIRS QUEUED_REQUESTS

  start    CPU ms (user+system) of `python3 -c pass`
  aiohttp  CPU ms of `python3 -c "import aiohttp"`
  httpx    CPU ms of `python3 -c "import httpx"`
(CPU time rather than wall time: on a shared machine the wall time of a
15 ms program is mostly the scheduler's; a start-up that waits for nothing
takes its CPU time in wall time on an idle one.)
  queued   CPU us (time.process_time) per request of an aiohttp client whose
           pool (limit=1) queues every request but the first, against a
           local aiohttp server that is not under the shim: one client
           process under the shim with the adapter, its batches alternately
           with the adapter switched off (A) and on (B), so both halves
           share the process, its caches and the machine's load
"""
import os
import resource
import subprocess
import sys
import time

SO, OUT, PAIRS, N = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
PY = "/usr/bin/python3"

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "aiohttp_ok_server.py")

CLIENT = r"""
import asyncio, sys, time, aiohttp
import nemolens_adapter._aiohttp as adapter
async def batch(s, port, n):
    async def one():
        async with s.get(f"http://127.0.0.1:{port}/") as r:
            await r.read()
    t = time.process_time()
    await asyncio.gather(*(one() for _ in range(n)))
    return (time.process_time() - t) * 1e6 / n
async def main(port, n, pairs):
    conn = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=conn) as s:
        await batch(s, port, n)   # warm
        for _ in range(pairs):
            for tag, on in (("A", False), ("B", True)):
                adapter._on = on
                print(tag, await batch(s, port, n), flush=True)
asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
"""


def env(on):
    e = dict(os.environ, LD_PRELOAD=SO, OTEL_METRICS_EXPORTER="none")
    e.pop("PYTHONPATH", None)
    e["NEMOLENS_PYTHON"] = "on" if on else "off"
    return e


def wall_ms(args, on):
    t = time.perf_counter()
    subprocess.run(args, env=env(on), check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - t) * 1000.0


def child_cpu_us(args, on):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(args, env=env(on), check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1e6


def series(name, measure):
    with open(os.path.join(OUT, name), "w") as f:
        for _ in range(PAIRS):
            f.write("A %f\n" % measure(False))
            f.write("B %f\n" % measure(True))


# Warm the page cache and the bytecode caches first (not for one pair: the
# smoke run only shows that every row can be measured).
for on in (False, True) if PAIRS > 1 else ():
    wall_ms([PY, "-c", "import aiohttp, httpx"], on)
series("start", lambda on: child_cpu_us([PY, "-c", "pass"], on) / 1000.0)
series("aiohttp", lambda on: child_cpu_us([PY, "-c", "import aiohttp"], on) / 1000.0)
series("httpx", lambda on: child_cpu_us([PY, "-c", "import httpx"], on) / 1000.0)

server = subprocess.Popen([PY, SERVER], stdout=subprocess.PIPE, text=True,
                          env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
try:
    port = server.stdout.readline().strip()
    with open(os.path.join(OUT, "queued"), "w") as f:
        subprocess.run([PY, "-c", CLIENT, port, str(N), str(PAIRS)], env=env(True), check=True, stdout=f)
finally:
    server.kill()   # the bench's own child; nothing of its state matters
    server.wait(timeout=10)
