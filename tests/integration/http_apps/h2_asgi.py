# SPDX-License-Identifier: Apache-2.0
"""A small ASGI app for hypercorn: 404 under /missing, else 200 with "ok:"
and the request body."""


async def read_body(receive):
    """A request's whole body, from its ASGI messages."""
    body = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            return body


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = await read_body(receive)
    status = 404 if scope["path"].startswith("/missing") else 200
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok:" + body})
