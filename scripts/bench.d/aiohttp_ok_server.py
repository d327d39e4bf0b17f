# SPDX-License-Identifier: Apache-2.0
"""An aiohttp server that answers "ok" to GET /, on a free loopback port,
which it prints first: the Python adapter benches' server."""
import socket

from aiohttp import web


async def ok(request):
    return web.Response(text="ok")


app = web.Application()
app.router.add_get("/", ok)
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(512)
print(s.getsockname()[1], flush=True)
web.run_app(app, sock=s, print=None, handle_signals=True)
