# SPDX-License-Identifier: Apache-2.0
"""An aiohttp client workload with a small shared connection pool.

  /usr/bin/python3 client.py --target policy=http://127.0.0.1:P1/v1/work \
      --target judge=http://127.0.0.1:P2/v1/work --requests 200 --limit 4 \
      [--close-ratio 0.25] [--force-close] [--concurrency 32] \
      [--extra ghost=http://127.0.0.1:P3/,6] [--extra slow=http://127.0.0.1:P4/,3] \
      [--connect-timeout 0.3] [--linger 0] [--hold FILE]

`--requests` are spread round-robin over the targets; with `--close-ratio` a
share of them asks the server to close the connection afterwards
(`Connection: close`), so the pool must open new connections; `--force-close`
makes every request use a new connection. `--extra name=url,count` adds
`count` requests expected to fail (refused, or timing out on connect);
`--post name` sends that target's requests as POST with a JSON body;
`--chat name` sends it OpenAI chat completion requests (two models, half of
them streamed with their usage asked for) and reads the answers as an
OpenAI client does.
`--linger S` keeps the process alive S seconds after the workload, so the
shim exports once more while it lives: a series first recorded in the last
export interval then has two samples, which rate() needs.
`--hold FILE` then keeps it alive until FILE exists: under nemolens-run
--prometheus the endpoint that serves its values ends with the program, so
the program must live until Prometheus has scraped them.
Prints one JSON line: {"ok": {name: n}, "failed": {name: {error: n}},
"requests": {"host:port": n}, "pool": {"host:port ok|abandoned": [waits, total ms]},
"models": {model: {"calls", "streams", "input", "output", "ttfc_ms"}}}: "models" is
what the client read of its model calls (usage; time from the request's body
sent to the first content-bearing chunk of a stream, summed);
"requests" are the requests made per destination, each one acquisition of a
connection from the pool (the truth next to the shim's connect_total); "pool" is what
aiohttp's own trace signals saw of the acquisitions that waited for a slot
of the pool (queued_start to queued_end; a request that fails while queued
abandoned its wait), the truth next to the shim's queue_duration_ms.
"""
import argparse
import asyncio
import errno
import json
import os
import random
import sys
import time
import urllib.parse

import aiohttp


MODELS = ("policy-8b", "policy-70b")


def chat_body(rng):
    """A chat completion request of an RL rollout: one of two models, a
    prompt of a few dozen words, every other call a stream that asks for
    its usage."""
    body = {"model": rng.choice(MODELS), "max_tokens": rng.randint(4, 24),
            "messages": [{"role": "user", "content": " ".join(["word"] * rng.randint(5, 40))}]}
    if rng.random() < 0.5:
        body.update(stream=True, stream_options={"include_usage": True})
    return body


def parse_target(s):
    name, url = s.split("=", 1)
    return name, url


async def run(args):
    targets = [parse_target(t) for t in args.target]
    posts = set(getattr(args, "post", None) or ())   # the bench calls run() with fewer options
    extras = []
    for e in args.extra:
        name, rest = e.split("=", 1)
        url, count = rest.rsplit(",", 1)
        extras.append((name, url, int(count)))
    rng = random.Random(args.seed)
    ok, failed = {}, {}
    sem = asyncio.Semaphore(args.concurrency)
    connector = aiohttp.TCPConnector(limit=args.limit, force_close=args.force_close)
    timeout = aiohttp.ClientTimeout(total=30, sock_connect=args.connect_timeout)

    pool = {}
    requests = {}

    def pool_wait(url, outcome, t0):
        u = urllib.parse.urlsplit(url)
        w = pool.setdefault(f"{u.hostname}:{u.port} {outcome}", [0, 0.0])
        w[0] += 1
        w[1] += (time.monotonic() - t0) * 1000.0

    async def queued_start(session, ctx, params):
        ctx.trace_request_ctx["t0"] = time.monotonic()

    async def queued_end(session, ctx, params):
        r = ctx.trace_request_ctx
        pool_wait(r["url"], "ok", r.pop("t0"))

    async def body_sent(session, ctx, params):
        ctx.trace_request_ctx.setdefault("sent", time.monotonic())

    trace = aiohttp.TraceConfig()
    trace.on_connection_queued_start.append(queued_start)
    trace.on_connection_queued_end.append(queued_end)
    trace.on_request_chunk_sent.append(body_sent)

    chats = set(getattr(args, "chat", None) or ())
    models = {}

    async def chat_answer(resp, body, ctx):
        """Reads a model's answer as an OpenAI client does; notes its usage
        and, for a stream, the time to its first content-bearing chunk."""
        usage, first = None, None
        if body.get("stream"):
            async for line in resp.content:
                if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
                    continue
                event = json.loads(line[6:])
                if first is None and any(c.get("delta", {}).get("content") for c in event.get("choices", [])):
                    first = time.monotonic()
                usage = event.get("usage") or usage
        else:
            usage = (await resp.json()).get("usage")
        if resp.status != 200 or not usage:
            return
        m = models.setdefault(body["model"], {"calls": 0, "streams": 0, "input": 0, "output": 0, "ttfc_ms": 0.0})
        m["calls"] += 1
        m["input"] += usage["prompt_tokens"]
        m["output"] += usage["completion_tokens"]
        if first is not None:
            m["streams"] += 1
            m["ttfc_ms"] += (first - ctx["sent"]) * 1000.0

    async def one(session, name, url, close):
        async with sem:
            u = urllib.parse.urlsplit(url)
            requests[f"{u.hostname}:{u.port}"] = requests.get(f"{u.hostname}:{u.port}", 0) + 1
            headers = {"Connection": "close"} if close else None
            ctx = {"url": url}
            try:
                method = "POST" if name in posts or name in chats else "GET"
                body = chat_body(rng) if name in chats else {} if method == "POST" else None
                async with session.request(method, url, headers=headers, json=body, trace_request_ctx=ctx) as resp:
                    if name in chats:
                        await chat_answer(resp, body, ctx)
                    else:
                        await resp.read()
                    if resp.status == 200:
                        ok[name] = ok.get(name, 0) + 1
                    else:
                        err = failed.setdefault(name, {})
                        err[f"http_{resp.status}"] = err.get(f"http_{resp.status}", 0) + 1
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
                if "t0" in ctx:
                    pool_wait(url, "abandoned", ctx.pop("t0"))
                kind = type(e).__name__
                if isinstance(e, aiohttp.ClientConnectorError) and e.os_error.errno == errno.ECONNREFUSED:
                    kind = "refused"
                elif isinstance(e, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
                    kind = "connect_timeout"
                err = failed.setdefault(name, {})
                err[kind] = err.get(kind, 0) + 1

    async with aiohttp.ClientSession(connector=connector, timeout=timeout, trace_configs=[trace]) as session:
        jobs = []
        for i in range(args.requests):
            name, url = targets[i % len(targets)]
            jobs.append(one(session, name, url, rng.random() < args.close_ratio))
        for name, url, count in extras:
            jobs += [one(session, name, url, False) for _ in range(count)]
        rng.shuffle(jobs)
        await asyncio.gather(*jobs)
    return {"ok": ok, "failed": failed, "requests": requests, "pool": pool, "models": models}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", action="append", default=[])
    ap.add_argument("--extra", action="append", default=[])
    ap.add_argument("--post", action="append", default=[], help="names of targets sent as POST with a JSON body")
    ap.add_argument("--chat", action="append", default=[], help="names of targets sent chat completion requests")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--limit", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--close-ratio", type=float, default=0.0)
    ap.add_argument("--force-close", action="store_true")
    ap.add_argument("--connect-timeout", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--linger", type=float, default=0.0)
    ap.add_argument("--hold", help="after the workload and --linger, wait until this file exists")
    args = ap.parse_args()
    try:
        result = asyncio.run(run(args))
    except Exception as e:  # keep the demo's output free of tracebacks
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        sys.exit(1)
    print(json.dumps(result), flush=True)
    time.sleep(args.linger)
    while args.hold and not os.path.exists(args.hold):
        time.sleep(0.05)


if __name__ == "__main__":
    main()
