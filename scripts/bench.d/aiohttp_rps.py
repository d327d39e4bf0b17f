# SPDX-License-Identifier: Apache-2.0
"""The demo's aiohttp workload (scripts/demo/client.py), timed from inside.

  python3 aiohttp_rps.py URL REQUESTS [LIMIT] [CLOSE_RATIO]

Runs client.run() (aiohttp pool of LIMIT connections, CLOSE_RATIO of the
requests with `Connection: close`) against one uvicorn target and prints
"rps <requests per second> ok <n>"; interpreter start-up and imports are not timed.
"""
import asyncio
import os
import sys
import time
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "demo"))
import client  # noqa: E402  (scripts/demo/client.py)


def main():
    url, n = sys.argv[1], int(sys.argv[2])
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    close_ratio = float(sys.argv[4]) if len(sys.argv) > 4 else 0.25
    args = types.SimpleNamespace(target=[f"bench={url}"], extra=[], requests=n, limit=limit,
                                 concurrency=32, close_ratio=close_ratio, force_close=False,
                                 connect_timeout=5.0, seed=1)
    t0 = time.perf_counter()
    result = asyncio.run(client.run(args))
    dt = time.perf_counter() - t0
    ok = result["ok"].get("bench", 0)
    print(f"rps {ok / dt:.1f} ok {ok} failed {sum(sum(v.values()) for v in result['failed'].values())}")
    return 0 if ok == n else 1


if __name__ == "__main__":
    sys.exit(main())
