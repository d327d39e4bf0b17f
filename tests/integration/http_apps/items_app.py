# SPDX-License-Identifier: Apache-2.0
"""A FastAPI app served by uvicorn with one parametrised route, as a new user's
service would have: what tests/integration/test_http_learned_routes.py and
test_http_server_name.py run under the shim.

    /usr/bin/python3 items_app.py

binds 127.0.0.1 on a free port, prints {"port": N} on stdout once listening,
and serves until SIGTERM/SIGINT (a graceful uvicorn shutdown and a normal
interpreter exit, so the shim's exit export runs).

Endpoints:
  GET  /items/{item_id}    any string: 200 with it
  GET  /health, /metrics, /v1/models, /api/v2/status    fixed paths: 200
  POST /v1/responses       NeMo Gym's built-in route: 200
  GET  /hold, POST /hold   answered once the app gets SIGUSR1 (every request
                           held until then; they print {"held": N} on stdout,
                           N the requests being held, as each arrives)
"""
import asyncio
import json
import logging
import signal
import socket
import sys

import uvicorn
from fastapi import FastAPI

app = FastAPI()
held = {"n": 0, "release": None}


@app.get("/items/{item_id}")
async def item(item_id: str):
    return {"id": item_id}


@app.get("/health")
async def health():
    return {"ok": True}


@app.get("/metrics")
async def metrics():
    return {"requests": 0}


@app.get("/v1/models")
async def models():
    return {"data": []}


@app.get("/api/v2/status")
async def status():
    return {"status": "up"}


@app.post("/v1/responses")
async def responses():
    return {"id": "resp_1", "output": []}


async def hold():
    held["n"] += 1
    print(json.dumps({"held": held["n"]}), flush=True)
    await held["release"].wait()
    held["n"] -= 1
    return {"released": True}


app.get("/hold")(hold)
app.post("/hold")(hold)


def main():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    config = uvicorn.Config(app, loop="asyncio", http="h11", lifespan="off", log_level="warning",
                            access_log=False, timeout_keep_alive=30)
    server = uvicorn.Server(config)

    async def serve():
        held["release"] = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, held["release"].set)
        print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
        await server.serve(sockets=[sock])
    asyncio.run(serve())
    logging.shutdown()
    sys.exit(0)


if __name__ == "__main__":
    main()
