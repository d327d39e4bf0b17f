# SPDX-License-Identifier: Apache-2.0
"""HTTP clients that the tests run under the shim.

    /usr/bin/python3 http_clients.py requests|aiohttp|urllib [--concurrency N] < plan.json

plan.json: [{"method": "GET", "url": "http://127.0.0.1:port/path", "body": "..."?}, ...].
Makes every request in the plan, through one session (keep-alive, connections
reused), and prints one JSON list: per request its url, method, status and
elapsed seconds (measured around the whole call, body read included), in plan
order. Exit status 0 when every request got a response.

  requests  a requests.Session, sequential
  aiohttp   one aiohttp.ClientSession, --concurrency requests at a time (default 4)
  urllib    urllib.request (http.client), a connection per request, sequential
"""
import argparse
import json
import sys
import time


def with_requests(plan):
    import requests
    out = []
    with requests.Session() as s:
        for r in plan:
            t0 = time.monotonic()
            resp = s.request(r["method"], r["url"], data=r.get("body", "").encode() or None, timeout=30)
            body = resp.content
            out.append({"status": resp.status_code, "elapsed": time.monotonic() - t0, "bytes": len(body)})
    return out


def with_aiohttp(plan, concurrency):
    import asyncio
    import aiohttp

    async def go():
        sem = asyncio.Semaphore(concurrency)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
            async def one(r):
                async with sem:
                    t0 = time.monotonic()
                    async with s.request(r["method"], r["url"], data=r.get("body", "").encode() or None) as resp:
                        body = await resp.read()
                    return {"status": resp.status, "elapsed": time.monotonic() - t0, "bytes": len(body)}
            return await asyncio.gather(*(one(r) for r in plan))
    return asyncio.run(go())


def with_urllib(plan):
    import urllib.error
    import urllib.request
    out = []
    for r in plan:
        t0 = time.monotonic()
        req = urllib.request.Request(r["url"], method=r["method"], data=r.get("body", "").encode() or None)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, body = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read()
        out.append({"status": status, "elapsed": time.monotonic() - t0, "bytes": len(body)})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lib", choices=["requests", "aiohttp", "urllib"])
    ap.add_argument("--concurrency", type=int, default=4)
    args = ap.parse_args()
    plan = json.load(sys.stdin)
    if args.lib == "requests":
        res = with_requests(plan)
    elif args.lib == "aiohttp":
        res = with_aiohttp(plan, args.concurrency)
    else:
        res = with_urllib(plan)
    for r, x in zip(plan, res):
        x.update(url=r["url"], method=r["method"])
    json.dump(list(res), sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
