# SPDX-License-Identifier: Apache-2.0
"""A model server shaped like NeMo Gym's: it takes model calls under Gym's
rollout prefix and forwards them to an engine, as Gym's model server does
with the vLLM behind it.

    ENGINE=http://127.0.0.1:PORT /usr/bin/python3 gym_proxy.py

POST /ng-rollout/{id}/{path} goes to ENGINE/{path} with the same body; an
event stream is passed on as it comes (an engine that dies mid-stream ends
this answer mid-stream too), anything else whole, with the engine's
status. Prints {"port": N} when it listens (Starlette under uvicorn).
"""
import json
import os
import socket
import sys

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

ENGINE = os.environ["ENGINE"]
client = httpx.AsyncClient(timeout=30)


async def forward(request):
    body = await request.body()
    upstream = client.build_request("POST", f"{ENGINE}/{request.path_params['rest']}", content=body,
                                    headers={"content-type": "application/json"})
    r = await client.send(upstream, stream=True)
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        async def relay():
            try:
                async for chunk in r.aiter_raw():
                    yield chunk
            finally:
                await r.aclose()
        return StreamingResponse(relay(), status_code=r.status_code, media_type="text/event-stream")
    data = await r.aread()
    await r.aclose()
    return Response(data, status_code=r.status_code, media_type=r.headers.get("content-type"))


app = Starlette(routes=[Route("/ng-rollout/{rollout}/{rest:path}", forward, methods=["POST"])])

if __name__ == "__main__":
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", access_log=False, lifespan="off"))
    server.run(sockets=[sock])
    sys.exit(0)
