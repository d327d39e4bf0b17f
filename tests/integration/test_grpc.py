# SPDX-License-Identifier: Apache-2.0
"""gRPC (HTTP/2 with prior knowledge) from the bytes, both sides under the shim.

A grpcio server and a grpcio client (Debian's python3-grpcio, generic
handlers), each under the shim, on one channel with up to 50 calls in
flight: unary calls ending OK and with several error statuses, and
server-streaming calls. The truth is the plan the test hands the client and
the statuses the client saw: rpc.server.call.duration and
rpc.client.call.duration count exactly that per (rpc.method, status), and
the HTTP instruments count every call as an HTTP/2 request."""
import collections
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402
from http_apps import httpcheck as hc  # noqa: E402

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "http_apps", "grpc_app.py")
PLAN = [["Unary", "ok", 300], ["Unary", "NOT_FOUND", 20], ["Unary", "INVALID_ARGUMENT", 15],
        ["Unary", "UNAVAILABLE", 10], ["Stream", "3", 40]]


class GrpcTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        harness.new_runtime_dir()
        port = hc.free_port()
        server_env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="grpc-server")
        cls.server = hc.App([harness.PYTHON, APP, "server", str(port)], server_env, "grpc-server")
        # The client's values go at its exit: on a loaded machine its exit
        # flush may need longer than the harness's 500 ms, and no shim
        # process of this test lives on to deliver what it would keep.
        client_env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="grpc-client", NEMOLENS_EXIT_TIMEOUT_MS="5000")
        p = harness.run([harness.PYTHON, APP, "client", str(port), json.dumps(PLAN)], client_env, timeout=50)
        cls.client_out, cls.client_err = p.stdout, p.stderr
        cls.seen = json.loads(p.stdout) if p.returncode == 0 else None
        # What the client's exit flush could not send in time stays in its
        # segment, and the server, still running, delivers it at its next
        # export: wait for it before the server goes.
        harness.poll(lambda: any(res.get("service.name") == "grpc-client"
                                 for res, _, _ in cls.sink.points("rpc.client.call.duration")), 15)
        cls.server_status = cls.server.stop()
        cls.server_err = cls.server.stderr()

    def counts(self, name, service, keys):
        out = collections.Counter()
        for res, _, p in self.sink.latest_by_instance(name):
            if res.get("service.name") == service:
                a = attrs(p)
                out[tuple(a.get(k) for k in keys)] += p.count
        return out

    def test_programs_ran(self):
        self.assertIsNotNone(self.seen, self.client_err[-2000:])
        self.assertEqual(self.server_status, 0, self.server_err[-2000:])
        want = {f"{m} {'OK' if r in ('ok', '3') else r}": t for m, r, t in PLAN}
        self.assertEqual(self.seen, want)

    def truth(self):
        return {(f"demo.Echo/{k.split()[0]}", k.split()[1]): n for k, n in self.seen.items()}

    def test_rpc_server_counts(self):
        got = self.counts("rpc.server.call.duration", "grpc-server", ("rpc.method", "rpc.response.status_code"))
        self.assertEqual(dict(got), self.truth())

    def test_rpc_client_counts(self):
        got = self.counts("rpc.client.call.duration", "grpc-client", ("rpc.method", "rpc.response.status_code"))
        self.assertEqual(dict(got), self.truth())

    def test_rpc_attributes(self):
        for res, _, p in self.sink.latest_by_instance("rpc.client.call.duration"):
            a = attrs(p)
            self.assertEqual(a["rpc.system.name"], "grpc")
            self.assertEqual(a["server.address"], "127.0.0.1")
            self.assertEqual(a.get("error.type"), None if a["rpc.response.status_code"] == "OK"
                             else a["rpc.response.status_code"])

    def test_http_requests_are_http2(self):
        total = sum(t for _, _, t in PLAN)
        srv = self.counts("http.server.request.duration", "grpc-server",
                          ("network.protocol.version", "http.request.method", "http.response.status_code"))
        self.assertEqual(dict(srv), {("2", "POST", 200): total})
        cli = self.counts("http.client.request.duration", "grpc-client",
                          ("network.protocol.version", "http.request.method", "http.response.status_code"))
        self.assertEqual(dict(cli), {("2", "POST", 200): total})


if __name__ == "__main__":
    unittest.main()
