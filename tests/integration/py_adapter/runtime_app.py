# SPDX-License-Identifier: Apache-2.0
"""A plain ASGI application for the runtime tests, served by uvicorn:
/block holds the event loop 200 ms (time.sleep), /hold waits until
/release is asked for, anything else answers at once."""
import asyncio
import time

_released = None


async def app(scope, receive, send):
    global _released
    if scope["type"] != "http":
        return
    path = scope["path"]
    if _released is None:
        _released = asyncio.Event()
    if path == "/block":
        time.sleep(0.2)
    elif path == "/hold":
        await _released.wait()
    elif path == "/release":
        _released.set()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})
