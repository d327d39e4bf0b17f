# SPDX-License-Identifier: Apache-2.0
"""An aiohttp web server (aiohttp.web, asyncio) that the tests run under the shim.

    /usr/bin/python3 aiohttp_server.py

binds 127.0.0.1 on a free port, prints {"port": N} once listening, serves until
SIGTERM/SIGINT (aiohttp's graceful exit, then a normal interpreter exit).
Routes are those of node_server.js (see there): /hello, /users/{id},
POST /echo (201), /chunked, /slow (0.3 s), /fail (raises -> 500), anything else 404.
"""
import asyncio
import json
import socket

from aiohttp import web

CHUNKS = [b"alpha-" * 50, b"beta-" * 30, b"gamma\n"]


async def hello(request):
    return web.Response(text="hello from aiohttp\n")


async def user(request):
    uid = request.match_info["id"]
    return web.json_response({"id": uid, "name": f"user-{uid}"})


async def echo(request):
    body = await request.read()
    return web.Response(status=201, body=body, content_type="application/octet-stream")


async def chunked(request):
    resp = web.StreamResponse()
    resp.enable_chunked_encoding()
    resp.content_type = "text/plain"
    await resp.prepare(request)
    for c in CHUNKS:
        await resp.write(c)
    await resp.write_eof()
    return resp


async def slow(request):
    await asyncio.sleep(0.3)
    return web.Response(text="finally\n")


async def fail(request):
    raise RuntimeError("failing on purpose")


def main():
    app = web.Application()
    app.add_routes([web.get("/hello", hello), web.get("/users/{id}", user), web.post("/echo", echo),
                    web.get("/chunked", chunked), web.get("/slow", slow),
                    web.get("/fail", fail)])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    web.run_app(app, sock=sock, print=None, access_log=None, shutdown_timeout=2)


if __name__ == "__main__":
    main()
