# SPDX-License-Identifier: Apache-2.0
"""An httpx client with a known schedule: N requests at once through a pool
of M connections to a server that holds each for H ms, async and sync; and
requests whose pool timeout ends while they wait. Prints what it did as
JSON and, per request, the time from its start to httpcore's first trace event
(request extension "trace": the request's first step on the connection it
got, so the end of any wait in the pool). Requests start 20 ms apart, so a
request's time before it reaches the pool is its own, not the sum of
those started before it.

A request that follows a redirect on server D makes two requests of the
pool (NeMo Gym's connect_total counts each).

argv: port of server A (async), port of server B (sync), port of server C
(pool timeouts), N, M, H, port of server D (a redirect).
"""
import asyncio
import json
import sys
import threading
import time

import httpx

A, B, C, N, M, H, D = (int(v) for v in sys.argv[1:8])
out = {"version": httpx.__version__, "async": [], "sync": []}
STAGGER = 0.02


def timed(kind):
    """A trace callback that notes the time from now to the first event."""
    t0, seen = time.monotonic(), []

    def note():
        if not seen:
            seen.append(1)
            out[kind].append((time.monotonic() - t0) * 1000.0)
    return note


async def run_async():
    limits = httpx.Limits(max_connections=M, max_keepalive_connections=M)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        await client.get(f"http://127.0.0.1:{A}/hold/0")   # warm: httpx's lazy imports

        async def one():
            note = timed("async")

            async def trace(event, info):
                note()
            return await client.get(f"http://127.0.0.1:{A}/hold/{H}", extensions={"trace": trace})
        tasks = []
        for _ in range(N):
            tasks.append(asyncio.ensure_future(one()))
            await asyncio.sleep(STAGGER)
        rs = await asyncio.gather(*tasks)
    out["async_ok"] = sum(r.status_code == 200 for r in rs)


def run_sync():
    limits = httpx.Limits(max_connections=M, max_keepalive_connections=M)
    ok = []
    with httpx.Client(limits=limits, timeout=30) as client:
        client.get(f"http://127.0.0.1:{B}/hold/0")

        def one():
            note = timed("sync")
            r = client.get(f"http://127.0.0.1:{B}/hold/{H}", extensions={"trace": lambda event, info: note()})
            ok.append(r.status_code == 200)
        threads = [threading.Thread(target=one) for _ in range(N)]
        for t in threads:
            t.start()
            time.sleep(STAGGER)
        for t in threads:
            t.join()
    out["sync_ok"] = sum(ok)


async def run_pool_timeout():
    # One connection, held 1 s; three requests whose pool timeout is 0.2 s:
    # two of them give up while they wait.
    limits = httpx.Limits(max_connections=1)
    timeout = httpx.Timeout(5.0, pool=0.2)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        rs = await asyncio.gather(*(client.get(f"http://127.0.0.1:{C}/hold/1000") for _ in range(3)),
                                  return_exceptions=True)
    out["pool_timeouts"] = sum(isinstance(r, httpx.PoolTimeout) for r in rs)


async def run_cancelled():
    limits = httpx.Limits(max_connections=1)
    async with httpx.AsyncClient(limits=limits, timeout=5.0) as client:
        tasks = [asyncio.ensure_future(client.get(f"http://127.0.0.1:{C}/hold/3000")) for _ in range(3)]
        await asyncio.sleep(0.5)   # two of them queued by then
        for t in tasks:
            t.cancel()
        rs = await asyncio.gather(*tasks, return_exceptions=True)
    out["cancelled"] = sum(isinstance(r, asyncio.CancelledError) for r in rs)


def run_redirect():
    with httpx.Client(follow_redirects=True) as client:
        r = client.get(f"http://127.0.0.1:{D}/to/hold/0")
    out["redirect"] = [r.status_code, len(r.history)]


asyncio.run(run_async())
run_sync()
asyncio.run(run_pool_timeout())
asyncio.run(run_cancelled())
run_redirect()
json.dump(out, sys.stdout)
