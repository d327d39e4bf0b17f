# SPDX-License-Identifier: Apache-2.0
"""An aiohttp client that saturates its pools in every way NeMo Gym's
queue_duration_ms distinguishes, and prints what aiohttp's own trace
signals saw of each queued acquisition (the ground truth) as JSON.

It also prints how many requests it made per destination (each one
acquisition of a pooled connection: NeMo Gym's connect_total) and, from
the same trace signals, how many connections aiohttp created.

argv: port of server A, port of server B, port of the slow server C,
port of server D (no destination rule), ports of servers E, F and G (NeMo
Gym's own cases for connect_total, one each).
A is reached as 127.0.0.1, B as localhost (a host-name rule), the others as
127.0.0.1.
"""
import asyncio
import json
import sys
import time

import aiohttp

A, B, C, D, E, F, G = (int(p) for p in sys.argv[1:8])
samples = []    # [destination label, outcome, constraint, ms]
created = {}    # destination label -> connections created
requests = {}   # destination label -> requests made (acquisitions)


class Ctx:
    """A request's trace_request_ctx: which destination and limit the
    scenario is about, and its wait: from the first queued_start to the
    last queued_end (aiohttp 3.10+ may wake a waiter and queue it again:
    one acquisition, one wait, as NeMo Gym counts it)."""

    def __init__(self, dest, constraint):
        self.dest, self.constraint = dest, constraint
        self.t0 = self.t1 = None
        self.waiting = False


def tracer():
    """A TraceConfig of the program's own: notes every queued acquisition
    it sees (aiohttp's trace signals are the truth)."""
    tc = aiohttp.TraceConfig()

    async def start(session, ctx, params):
        r = ctx.trace_request_ctx
        if r.t0 is None:
            r.t0 = time.monotonic()
        r.waiting = True

    async def end(session, ctx, params):
        r = ctx.trace_request_ctx
        r.t1 = time.monotonic()
        r.waiting = False

    async def create(session, ctx, params):
        r = ctx.trace_request_ctx
        created[r.dest] = created.get(r.dest, 0) + 1

    tc.on_connection_queued_start.append(start)
    tc.on_connection_queued_end.append(end)
    tc.on_connection_create_start.append(create)
    return tc


async def get(session, url, dest, constraint, ctx=None, **kwargs):
    """A GET, and its wait once it is over: ok when it ended with a slot,
    abandoned when the request failed while queued (no queued_end)."""
    ctx = ctx or Ctx(dest, constraint)
    requests[dest] = requests.get(dest, 0) + 1
    try:
        async with session.get(url, trace_request_ctx=ctx, **kwargs) as r:
            await r.read()
    finally:
        if ctx.t0 is not None:
            if ctx.waiting:
                samples.append([dest, "abandoned", constraint, (time.monotonic() - ctx.t0) * 1000.0])
            else:
                samples.append([dest, "ok", constraint, (ctx.t1 - ctx.t0) * 1000.0])


async def total():
    # limit=3, 30 requests at once to one server: waits for the total limit.
    conn = aiohttp.TCPConnector(limit=3)
    async with aiohttp.ClientSession(connector=conn, trace_configs=[tracer()]) as s:
        await asyncio.gather(*(get(s, f"http://127.0.0.1:{A}/hold/40", "alpha", "total") for _ in range(30)))


async def per_host():
    # limit=100, limit_per_host=2, 20 requests to each of two servers.
    conn = aiohttp.TCPConnector(limit=100, limit_per_host=2)
    async with aiohttp.ClientSession(connector=conn, trace_configs=[tracer()]) as s:
        jobs = [get(s, f"http://127.0.0.1:{A}/hold/40", "alpha", "per_host") for _ in range(20)]
        jobs += [get(s, f"http://localhost:{B}/hold/40", "beta", "per_host") for _ in range(20)]
        await asyncio.gather(*jobs)


async def abandoned_by_timeout():
    # limit=1 and 3 requests whose total timeout (1 s) ends while two are
    # queued behind the first, which the server holds for 3 s. The first
    # gives up half a second later: had it the same deadline, the slot it
    # frees could reach a waiter before that waiter's own timeout.
    conn = aiohttp.TCPConnector(limit=1)
    timeout = aiohttp.ClientTimeout(total=1.0)
    async with aiohttp.ClientSession(connector=conn, timeout=timeout, trace_configs=[tracer()]) as s:
        url = f"http://127.0.0.1:{C}/hold/3000"
        jobs = [get(s, url, "gamma", "total", timeout=aiohttp.ClientTimeout(total=1.5))]
        jobs += [get(s, url, "gamma", "total") for _ in range(2)]
        res = await asyncio.gather(*jobs, return_exceptions=True)
        assert all(isinstance(r, asyncio.TimeoutError) for r in res), res


async def abandoned_by_cancellation():
    # The same, cancelled once two of them are seen queued.
    conn = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=conn, trace_configs=[tracer()]) as s:
        ctxs = [Ctx("gamma", "total") for _ in range(3)]
        tasks = [asyncio.ensure_future(get(s, f"http://127.0.0.1:{C}/hold/3000", "gamma", "total", c))
                 for c in ctxs]
        for _ in range(1000):
            if sum(c.waiting for c in ctxs) == 2:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        for t in tasks:
            t.cancel()
        res = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, asyncio.CancelledError) for r in res), res


async def no_trace_config():
    # A session without trace configs of its own: 5 requests, limit=1, to
    # a server no rule names. Its truth is the schedule: 4 queued.
    conn = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=conn) as s:
        async def one():
            async with s.get(f"http://127.0.0.1:{D}/hold/50") as r:
                await r.read()
        await asyncio.gather(*(one() for _ in range(5)))
    requests["external"] = requests.get("external", 0) + 5


async def gym_cases():
    """NeMo Gym's own cases for connect_total, each to a destination of its
    own: delta 2, epsilon 2, zeta 3 acquisitions."""
    async with aiohttp.ClientSession(trace_configs=[tracer()]) as s:
        # Two sequential requests on one session: the second reuses the
        # first's connection, and is one more acquisition.
        await get(s, f"http://127.0.0.1:{E}/hold/0", "delta", "total")
        await get(s, f"http://127.0.0.1:{E}/hold/0", "delta", "total")
        # A redirect: two hops, two acquisitions.
        await get(s, f"http://127.0.0.1:{F}/to/hold/0", "epsilon", "total")
        requests["epsilon"] += 1
    # A request holds the only slot; another, queued behind it, times out
    # and is retried: three acquisitions.
    conn = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=conn, trace_configs=[tracer()]) as s:
        url = f"http://127.0.0.1:{G}"
        holder = asyncio.ensure_future(get(s, f"{url}/hold/600", "zeta", "total"))
        await asyncio.sleep(0.1)
        try:
            await get(s, f"{url}/hold/0", "zeta", "total", timeout=aiohttp.ClientTimeout(total=0.2))
            raise AssertionError("the queued request did not time out")
        except asyncio.TimeoutError:
            pass
        await get(s, f"{url}/hold/0", "zeta", "total")
        await holder


async def main():
    await total()
    await per_host()
    await abandoned_by_timeout()
    await abandoned_by_cancellation()
    await no_trace_config()
    await gym_cases()


asyncio.run(main())
json.dump({"samples": samples, "created": created, "requests": requests, "version": aiohttp.__version__},
          sys.stdout)
