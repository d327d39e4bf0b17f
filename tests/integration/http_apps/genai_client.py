# SPDX-License-Identifier: Apache-2.0
"""The client side of the model-call tests: aiohttp without streaming (as
NeMo Gym's model server calls vLLM), then httpx streaming (as the openai SDK
does), against the stand-in at argv[1] (base URL). Prints one JSON line:
its own time to the first content line of each stream that completed, how
long each stream took, and the time to the first line of every stream (the
first chunk), for the test to compare with the shim's.
Over HTTPS, GENAI_CAFILE names the server's certificate.
"""
import asyncio
import json
import os
import ssl
import sys
import time

import aiohttp
import httpx

BASE = sys.argv[1]
CAFILE = os.environ.get("GENAI_CAFILE")
TLS = ssl.create_default_context(cafile=CAFILE) if CAFILE else None


def chat(model, text, n, **kw):
    return {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": n, **kw}


NON_STREAM = [
    ("/v1/chat/completions", chat("policy-a", "hello", 5)),
    ("/v1/chat/completions", chat("policy-a", "hello there", 6)),
    ("/v1/chat/completions", chat("policy-a", "hi", 7)),
    ("/v1/completions", {"model": "policy-a", "prompt": "once upon", "max_tokens": 3}),
    ("/v1/responses", {"model": "policy-a", "input": "abc", "max_output_tokens": 9}),
    ("/v1/messages", chat("claude-a", "abcd", 8)),
    ("/v1/chat/completions", chat("missing", "x", 1)),
]

STREAM = [
    ("/v1/chat/completions", chat("policy-b", "stream me", 4, stream=True, stream_options={"include_usage": True})),
    ("/v1/chat/completions", chat("policy-b", "again", 3, stream=True, stream_options={"include_usage": True})),
    ("/v1/responses", {"model": "policy-b", "input": "resp", "max_output_tokens": 5, "stream": True}),
    ("/v1/messages", chat("claude-b", "msg", 6, stream=True)),
]


async def non_streaming():
    async with aiohttp.ClientSession() as s:
        for path, body in NON_STREAM:
            async with s.post(BASE + path, json=body, ssl=TLS if TLS else None) as r:
                await r.read()


def first_content(path, line):
    if not line.startswith("data:") or "[DONE]" in line:
        return False
    d = json.loads(line[5:])
    if path.endswith("/v1/responses"):
        return d.get("type", "").endswith(".delta")
    if path.endswith("/v1/messages"):
        return d.get("type") == "content_block_delta"
    return bool(d.get("choices"))


def streaming():
    ttfc, total, chunk = [], [], []

    def lines(r, t0):
        for line in r.iter_lines():
            if len(chunk) < n_streams[0] + 1 and line:
                chunk.append(time.monotonic() - t0)
            yield line
    n_streams = [0]
    with httpx.Client(timeout=30, verify=TLS if TLS else True) as c:
        for path, body in STREAM:
            t0 = time.monotonic()
            first = None
            with c.stream("POST", BASE + path, json=body) as r:
                for line in lines(r, t0):
                    if first is None and first_content(path, line):
                        first = time.monotonic() - t0
            n_streams[0] += 1
            total.append(time.monotonic() - t0)
            ttfc.append(first)
        # An error event inside a 200 stream.
        t0 = time.monotonic()
        with c.stream("POST", BASE + "/v1/chat/completions", json=chat("explode", "x", 2, stream=True)) as r:
            for _ in lines(r, t0):
                pass
        n_streams[0] += 1
    # A client that walks away mid-stream: its own connection, closed after the first lines.
    with httpx.Client(timeout=30, verify=TLS if TLS else True) as c:
        t0 = time.monotonic()
        with c.stream("POST", BASE + "/v1/chat/completions", json=chat("policy-b", "bye", 40, stream=True)) as r:
            for i, _ in enumerate(lines(r, t0)):
                if i == 3:
                    break
    return ttfc, total, chunk


asyncio.run(non_streaming())
ttfc, total, chunk = streaming()
print(json.dumps({"ttfc": ttfc, "total": total, "first_chunk": chunk}), flush=True)
