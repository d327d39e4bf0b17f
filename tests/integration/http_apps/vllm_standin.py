# SPDX-License-Identifier: Apache-2.0
"""A model server shaped like vLLM's OpenAI-compatible one (and Anthropic's
/v1/messages), for the model-call tests: /v1/chat/completions,
/v1/completions, /v1/responses, /v1/messages, streaming or not.

Token counts follow from the request, so the test knows them: input is the
length in characters of the prompt text, output is max_tokens; /v1/messages
adds 3 cache-read and 4 cache-creation input tokens; chat bodies report 2
reasoning tokens. Streams wait FIRST_DELAY before their first content.
Model "missing" answers 404, "busy" 429, "slow" 504, "empty" a 200 without
a body; model "explode" streams an error event in a 200, "die" closes the
connection in the middle of its stream, "short" ends a Responses stream
with response.incomplete. /v1/embeddings answers with its usage. Prints
{"port": N} when it listens; over HTTPS with STANDIN_CERT and STANDIN_KEY
(PEM files).

With STANDIN_COMPRESS=1 it compresses what it answers as the client asks,
gzip first, else deflate (zlib-wrapped, RFC 9110), each event of a stream
flushed as it goes, as OpenAI's API does; and it reads request bodies sent
with Content-Encoding: gzip or deflate.
"""
import asyncio
import json
import os
import socket
import sys
import zlib

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from h2_asgi import read_body

FIRST_DELAY = float(os.environ.get("STANDIN_FIRST_DELAY", "0.3"))
GAP = 0.02


def prompt_text(body):
    if "messages" in body:
        c = body["messages"][0]["content"]
        return c if isinstance(c, str) else ""
    if "prompt" in body:
        return body["prompt"]
    return body.get("input", "") if isinstance(body.get("input"), str) else ""


def sse(obj, event=None):
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(obj) + "\n\n").encode()


class Died(Exception):
    """Raised inside a stream: uvicorn ends the connection there."""


def refused(model):
    """The answer of a model that does not serve, or None."""
    statuses = {"missing": (404, "NotFoundError"), "busy": (429, "RateLimitError"), "slow": (504, "Timeout")}
    if model in statuses:
        status, kind = statuses[model]
        return JSONResponse({"object": "error", "message": kind, "type": kind, "param": None, "code": status},
                            status_code=status)
    if model == "empty":
        return Response(b"", status_code=200, media_type="application/json")
    return None


async def embeddings(request):
    body = await request.json()
    n_in = len(body.get("input", ""))
    return JSONResponse({"object": "list", "model": body["model"], "data": [{"index": 0, "embedding": [0.5]}],
                         "usage": {"prompt_tokens": n_in, "total_tokens": n_in}})


async def chat(request):
    body = await request.json()
    model, n_in, n_out = body["model"], len(prompt_text(body)), body.get("max_tokens", 4)
    if refused(model):
        return refused(model)
    completion = request.url.path.endswith("/v1/completions")
    if not body.get("stream"):
        choice = {"index": 0, "logprobs": {"content": [{"token": "\"usage\"", "logprob": -0.1, "bytes": [34]}]},
                  "finish_reason": "length", "stop_reason": None}
        if completion:
            choice["text"] = "\"usage\": {\"completion_tokens\": 999}"
        else:
            choice["message"] = {"role": "assistant", "content": "{\"usage\": {\"completion_tokens\": 999}}"}
        usage = {"prompt_tokens": n_in, "total_tokens": n_in + n_out, "completion_tokens": n_out}
        if not completion:
            usage["completion_tokens_details"] = {"reasoning_tokens": 2}
        out = {"id": "x", "object": "text_completion" if completion else "chat.completion", "created": 1,
               "model": model, "choices": [choice], "usage": usage, "prompt_logprobs": None,
               "prompt_token_ids": list(range(2000))}
        return Response(json.dumps(out), media_type="application/json")

    async def gen():
        await asyncio.sleep(FIRST_DELAY)
        head = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": model}
        yield sse({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "finish_reason": None}]})
        if model == "explode":
            yield sse({"error": {"object": "error", "message": "engine died", "type": "InternalServerError",
                                 "param": None, "code": 500}})
            yield b"data: [DONE]\n\n"
            return
        if model == "die":
            await asyncio.sleep(GAP)
            raise Died()
        for _ in range(n_out):
            await asyncio.sleep(GAP)
            yield sse({**head, "choices": [{"index": 0, "delta": {"content": " usage"}, "finish_reason": None}]})
        yield sse({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            yield sse({**head, "choices": [], "usage": {"prompt_tokens": n_in, "completion_tokens": n_out,
                                                        "total_tokens": n_in + n_out}})
        yield b"data: [DONE]\n\n"
    return StreamingResponse(gen(), media_type="text/event-stream")


async def responses(request):
    body = await request.json()
    model, n_in, n_out = body["model"], len(prompt_text(body)), body.get("max_output_tokens", 4)
    if refused(model):
        return refused(model)
    final = {"id": "r", "object": "response", "model": model, "status": "completed", "error": None,
             "incomplete_details": None, "output": [{"type": "message", "content": [{"type": "output_text",
                                                                                       "text": "usage"}]}],
             "usage": {"input_tokens": n_in, "output_tokens": n_out, "output_tokens_details": {"reasoning_tokens": 1},
                       "total_tokens": n_in + n_out}}
    if not body.get("stream"):
        return JSONResponse(final)

    async def gen():
        yield sse({"type": "response.created", "response": {**final, "status": "in_progress", "usage": None}},
                  "response.created")
        await asyncio.sleep(FIRST_DELAY)
        for _ in range(n_out):
            yield sse({"type": "response.output_text.delta", "delta": "usage"}, "response.output_text.delta")
            await asyncio.sleep(GAP)
        if model == "short":
            cut = {**final, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}
            yield sse({"type": "response.incomplete", "response": cut}, "response.incomplete")
            return
        yield sse({"type": "response.completed", "response": final}, "response.completed")
    return StreamingResponse(gen(), media_type="text/event-stream")


async def messages(request):
    body = await request.json()
    model, n_in, n_out = body["model"], len(prompt_text(body)), body.get("max_tokens", 4)
    if refused(model):
        return refused(model)
    usage = {"input_tokens": n_in, "cache_read_input_tokens": 3, "cache_creation_input_tokens": 4,
             "output_tokens": n_out}
    if not body.get("stream"):
        return JSONResponse({"id": "m", "type": "message", "role": "assistant", "model": model,
                             "content": [{"type": "text", "text": "\"stop_reason\": \"x\""}],
                             "stop_reason": "max_tokens", "stop_sequence": None, "usage": usage})

    async def gen():
        yield sse({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
                                                        "model": model, "content": [], "stop_reason": None,
                                                        "usage": {**usage, "output_tokens": 1}}}, "message_start")
        await asyncio.sleep(FIRST_DELAY)
        yield sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                  "content_block_start")
        for _ in range(n_out):
            yield sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}},
                      "content_block_delta")
            await asyncio.sleep(GAP)
        yield sse({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                   "usage": {"output_tokens": n_out}}, "message_delta")
        yield sse({"type": "message_stop"}, "message_stop")
    return StreamingResponse(gen(), media_type="text/event-stream")


class Compress:
    """Compressed bodies both ways, in plain ASGI: each body message of an
    answer compressed and flushed on its own."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode().lower(): v.decode().lower() for k, v in scope["headers"]}
        coding = headers.get("content-encoding")
        if coding in ("gzip", "deflate"):
            plain = zlib.decompress(await read_body(receive), 31 if coding == "gzip" else 15)

            async def receive():
                return {"type": "http.request", "body": plain, "more_body": False}
        asked = [c.split(";")[0].strip() for c in headers.get("accept-encoding", "").split(",")]
        out = "gzip" if "gzip" in asked else "deflate" if "deflate" in asked else None
        if not out:
            return await self.app(scope, receive, send)
        z = zlib.compressobj(6, zlib.DEFLATED, 31 if out == "gzip" else 15)

        async def send_compressed(m):
            if m["type"] == "http.response.start":
                kept = [(k, v) for k, v in m["headers"] if k.lower() != b"content-length"]
                m = {**m, "headers": kept + [(b"content-encoding", out.encode())]}
            elif m["type"] == "http.response.body":
                more = m.get("more_body", False)
                data = z.compress(m.get("body", b"")) + (z.flush(zlib.Z_SYNC_FLUSH) if more else z.flush())
                m = {**m, "body": data}
            await send(m)
        await self.app(scope, receive, send_compressed)


app = Starlette(routes=[
    Route("/v1/chat/completions", chat, methods=["POST"]),
    Route("/v1/completions", chat, methods=["POST"]),
    Route("/v1/responses", responses, methods=["POST"]),
    Route("/v1/messages", messages, methods=["POST"]),
    Route("/v1/embeddings", embeddings, methods=["POST"]),
])

if os.environ.get("STANDIN_COMPRESS") == "1":
    app = Compress(app)

if __name__ == "__main__":
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            ssl_certfile=os.environ.get("STANDIN_CERT"), ssl_keyfile=os.environ.get("STANDIN_KEY"))
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
    sys.exit(0)
