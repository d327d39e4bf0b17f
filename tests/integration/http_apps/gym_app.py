# SPDX-License-Identifier: Apache-2.0
"""A NeMo-Gym-shaped FastAPI app served by uvicorn: what the tests run under the shim.

    /usr/bin/python3 gym_app.py --loop asyncio|uvloop

binds 127.0.0.1 on a free port, prints {"port": N} on stdout once listening,
and serves until SIGTERM/SIGINT (a graceful uvicorn shutdown and a normal
interpreter exit, so the shim's exit export runs).

Endpoints (bodies are JSON):
  POST /run            {"sleep": s, "fail": bool}  sleeps s, then 200, or raises (-> 500)
  POST /verify         VerifyBody                  sleeps, then 200 or raises (-> 500);
                                                   a body that does not validate -> 422
  POST /seed_session, POST /aggregate_metrics, POST /v1/responses,
  POST /ng-rollout/{rollout_id}/v1/responses       200 at once
  GET  /users/{user_id} (int), GET /items/{item_id} (UUID), GET /
  GET  /stream         text/event-stream, STREAM_EVENTS events STREAM_GAP s apart
                       (a chunked StreamingResponse)
"""
import argparse
import asyncio
import json
import logging
import socket
import sys
import uuid

import uvicorn
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

STREAM_EVENTS = 11
STREAM_GAP = 0.2          # s between events: the stream lasts (STREAM_EVENTS - 1) * STREAM_GAP

app = FastAPI()


class RunBody(BaseModel):
    sleep: float = 0.0
    fail: bool = False


class VerifyBody(BaseModel):
    response: str
    sleep: float = 0.0
    fail: bool = False


@app.post("/run")
async def run(body: RunBody):
    await asyncio.sleep(body.sleep)
    if body.fail:
        raise RuntimeError("rollout failed (on purpose)")
    return {"reward": 1.0, "responses": ["ok"]}


@app.post("/verify")
async def verify(body: VerifyBody):
    await asyncio.sleep(body.sleep)
    if body.fail:
        raise RuntimeError("verification failed (on purpose)")
    return {"reward": 1.0 if body.response == "42" else 0.0}


@app.post("/seed_session")
async def seed_session():
    return {"ok": True}


@app.post("/aggregate_metrics")
async def aggregate_metrics():
    return {"mean_reward": 0.5}


@app.post("/v1/responses")
async def responses():
    return {"id": "resp_1", "output": []}


@app.post("/ng-rollout/{rollout_id}/v1/responses")
async def rollout_responses(rollout_id: str):
    return {"id": f"resp_{rollout_id}", "output": []}


@app.get("/users/{user_id}")
async def user(user_id: int, verbose: int = 0):
    return {"id": user_id, "name": f"user-{user_id}", "verbose": bool(verbose)}


@app.get("/items/{item_id}")
async def item(item_id: uuid.UUID):
    return {"id": str(item_id)}


@app.get("/")
async def root():
    return {"service": "gym-app"}


def event(i):
    return f"id: {i}\ndata: {json.dumps({'delta': 'token-' + str(i)})}\n\n".encode()


STREAM_BYTES = sum(len(event(i)) for i in range(STREAM_EVENTS))


@app.get("/stream")
async def stream():
    async def events():
        for i in range(STREAM_EVENTS):
            if i:
                await asyncio.sleep(STREAM_GAP)
            yield event(i)
    return StreamingResponse(events(), media_type="text/event-stream")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    args = ap.parse_args()
    # IPPROTO_TCP explicitly, as uvicorn's own create_server() does: asyncio sets
    # TCP_NODELAY on accepted sockets only when the listener's proto says TCP.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    # Tracebacks of the endpoints that raise on purpose go to stderr (the test keeps it in a file).
    config = uvicorn.Config(app, loop=args.loop, http="h11", lifespan="off", log_level="warning",
                            access_log=False, timeout_keep_alive=30)
    server = uvicorn.Server(config)
    config.setup_event_loop()      # installs uvloop's policy for --loop uvloop

    async def serve():
        loop = type(asyncio.get_running_loop())
        print(json.dumps({"port": sock.getsockname()[1], "loop": f"{loop.__module__}.{loop.__name__}"}),
              flush=True)
        await server.serve(sockets=[sock])
    asyncio.run(serve())
    logging.shutdown()
    sys.exit(0)


if __name__ == "__main__":
    main()
