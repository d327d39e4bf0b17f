# SPDX-License-Identifier: Apache-2.0
"""A FastAPI app served by uvicorn on several loopback ports at once.

It counts the TCP connections it accepts, per port, and exposes the counts on a
separate admin port (GET /stats) so reading them does not disturb them. It can
also hold a "full" listener (accept queue full: new connects hang until the
client gives up) and name a refused port, for demos of failing connections.

Run:  /usr/bin/python3 server.py --ports 2 [--latency-ms 1,15] [--full] [--refused]
Once serving, it prints one JSON line to stdout:
  {"ports": [p1, p2], "admin": pa, "full": pf|null, "refused": pr|null}
It stops on SIGTERM/SIGINT.

Every port also answers POST /v1/chat/completions the way vLLM's
OpenAI-compatible server does (a stand-in: no model behind it): `usage`
before a long `prompt_token_ids`, streams of `chat.completion.chunk` events
after a first-token delay, with the usage chunk when the request asks for
it (`stream_options.include_usage`). Input tokens are the words of the
messages, output tokens `max_tokens`.
"""
import argparse
import asyncio
import json
import logging
import os
import random
import signal
import socket
import sys
import threading

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from uvicorn.protocols.http.h11_impl import H11Protocol

from listeners import FullListener, refused_port

accepted = {}            # local port -> accepted connections
accepted_lock = threading.Lock()


class CountingH11Protocol(H11Protocol):
    def connection_made(self, transport):
        port = transport.get_extra_info("sockname")[1]
        with accepted_lock:
            accepted[port] = accepted.get(port, 0) + 1
        super().connection_made(transport)


def make_app(latency):
    app = FastAPI()

    @app.get("/")
    async def root():
        return {"ok": True}

    @app.post("/v1/work")
    @app.get("/v1/work")
    async def work():
        if latency[1] > 0:
            await asyncio.sleep(random.uniform(*latency) / 1000.0)
        return {"ok": True}

    # NeMo Gym's endpoints, as an agent server (/run) and a resources server
    # (/verify) answer them: some rollouts fail, some verifications raise.
    @app.post("/run")
    async def run():
        await asyncio.sleep(random.uniform(10, 40) / 1000.0)
        if random.random() < 0.1:
            return JSONResponse({"error": "rollout failed"}, status_code=500)
        return {"reward": random.random()}

    @app.post("/verify")
    async def verify():
        await asyncio.sleep(random.uniform(2, 10) / 1000.0)
        if random.random() < 0.25:
            return JSONResponse({"error": "verifier raised"}, status_code=500)
        return {"reward": 1.0}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        model, n_out = body["model"], int(body.get("max_tokens", 8))
        n_in = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        usage = {"prompt_tokens": n_in, "total_tokens": n_in + n_out, "completion_tokens": n_out}
        head = {"id": "chatcmpl-demo", "created": 1, "model": model}
        if not body.get("stream"):
            await asyncio.sleep(random.uniform(20, 60) / 1000.0)
            out = dict(head, object="chat.completion", choices=[
                {"index": 0, "message": {"role": "assistant", "content": " token" * n_out},
                 "logprobs": None, "finish_reason": "length", "stop_reason": None}],
                usage=usage, prompt_logprobs=None, prompt_token_ids=list(range(n_in * 40)))
            return Response(json.dumps(out), media_type="application/json")

        def event(choices, **extra):
            return ("data: " + json.dumps(dict(head, object="chat.completion.chunk", choices=choices, **extra)) +
                    "\n\n").encode()

        async def stream():
            await asyncio.sleep(random.uniform(20, 60) / 1000.0)   # the prompt's prefill
            yield event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
            for _ in range(n_out):
                await asyncio.sleep(0.002)
                yield event([{"index": 0, "delta": {"content": " token"}, "finish_reason": None}])
            yield event([{"index": 0, "delta": {}, "finish_reason": "length"}])
            if (body.get("stream_options") or {}).get("include_usage"):
                yield event([], usage=usage)
            yield b"data: [DONE]\n\n"
        return StreamingResponse(stream(), media_type="text/event-stream")

    @app.get("/stats")
    async def stats():
        with accepted_lock:
            return {str(k): v for k, v in accepted.items()}

    return app


def listening_socket():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(1024)
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ports", type=int, default=2, help="how many service ports")
    ap.add_argument("--latency-ms", default="0,0", help="uniform random latency lo,hi of /v1/work")
    ap.add_argument("--full", action="store_true", help="also hold a full listener")
    ap.add_argument("--refused", action="store_true", help="also name a refused port")
    args = ap.parse_args()
    latency = tuple(float(x) for x in args.latency_ms.split(","))

    socks = [listening_socket() for _ in range(args.ports)]
    admin = listening_socket()
    full = FullListener() if args.full else None
    info = {
        "ports": [s.getsockname()[1] for s in socks],
        "admin": admin.getsockname()[1],
        "full": full.port if full else None,
        "refused": refused_port() if args.refused else None,
    }

    config = uvicorn.Config(make_app(latency), http=CountingH11Protocol, lifespan="off",
                            log_level="critical", access_log=False, backlog=1024)
    server = uvicorn.Server(config)
    logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)

    async def serve():
        task = asyncio.ensure_future(server.serve(sockets=socks + [admin]))
        while not server.started:
            if task.done():
                task.result()
                return
            await asyncio.sleep(0.01)
        sys.stdout.write(json.dumps(info) + "\n")
        sys.stdout.flush()
        await task

    def stop(*_):
        server.should_exit = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
