# SPDX-License-Identifier: Apache-2.0
"""A grpcio server or client with generic handlers (no generated code).

server PORT: serves demo.Echo/Unary (the request names the status to end
with: b"ok" or a status name) and demo.Echo/Stream (server streaming, the
request is the number of messages); prints {"port": PORT} once ready, stops
on SIGTERM.
client PORT PLAN: runs the calls of the JSON plan [[method, request, times],
...] on one channel, at most 50 in flight, and prints the statuses it saw,
{"method status": count}."""
import collections
import json
import signal
import sys
import threading
from concurrent import futures

import grpc


def unary(req, ctx):
    if req != b"ok":
        ctx.abort(getattr(grpc.StatusCode, req.decode()), "as asked")
    return b"pong"


def stream(req, ctx):
    for i in range(int(req)):
        yield b"item%d" % i


def serve(port):
    handler = grpc.method_handlers_generic_handler("demo.Echo", {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.unary_stream_rpc_method_handler(stream)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), maximum_concurrent_rpcs=None)
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print(json.dumps({"port": port}), flush=True)
    done.wait()
    server.stop(0).wait()


def call(channel, method, req):
    try:
        if method == "Stream":
            list(channel.unary_stream("/demo.Echo/Stream")(req.encode()))
        else:
            channel.unary_unary("/demo.Echo/Unary")(req.encode())
        return "OK"
    except grpc.RpcError as e:
        return e.code().name


def client(port, plan):
    seen = collections.Counter()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        with futures.ThreadPoolExecutor(max_workers=50) as pool:
            jobs = [(m, pool.submit(call, channel, m, r)) for m, r, times in plan for _ in range(times)]
            for m, j in jobs:
                seen[f"{m} {j.result()}"] += 1
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(int(sys.argv[2]))
    else:
        client(int(sys.argv[2]), json.loads(sys.argv[3]))
