# SPDX-License-Identifier: Apache-2.0
"""Opens connections from functions of its own, with requests, aiohttp and
a raw socket, so the call sites the shim reports can be checked.

    call_sites_client.py PORT N

Each of the functions below opens N connections to 127.0.0.1:PORT (an HTTP
server). The line of each connection's call carries a "site:" comment that
the test finds. Prints one JSON line: the connections per function."""
import asyncio
import json
import socket
import sys

import aiohttp
import requests


def with_requests(url, n):
    for _ in range(n):
        requests.get(url, timeout=10).content  # site: with_requests


async def with_aiohttp(url, n):
    for _ in range(n):
        # A session per request: each request opens a connection of its own.
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as r:  # site: with_aiohttp
                await r.read()


class Raw:
    def __init__(self, port):
        self.port = port

    def dial(self, n):
        for _ in range(n):
            socket.create_connection(("127.0.0.1", self.port), timeout=10).close()  # site: Raw.dial


def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    url = "http://127.0.0.1:%d/" % port
    with_requests(url, n)
    asyncio.run(with_aiohttp(url, n))
    Raw(port).dial(n)
    # A UDP socket's connect is no connection: no call site.
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.connect(("127.0.0.1", port))
    u.close()
    print(json.dumps({"with_requests": n, "with_aiohttp": n, "Raw.dial": n}))


if __name__ == "__main__":
    main()
