# SPDX-License-Identifier: Apache-2.0
"""Protocols over TCP that are not HTTP produce no http.* data.

A raw binary echo server and a Redis-like server (inline commands such as
"GET foo\\r\\n" begin like an HTTP request line) run under the shim, and so
does their client (http_apps/not_http.py). The client also makes one real HTTP
GET to a plain server in this process, the control that shows the HTTP layer is
active in it: exactly that one request is in http.client.request.duration, and
nothing else anywhere is http.*, while connect_total counts every connection.
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from http_apps import httpcheck as hc  # noqa: E402
from http_apps.plain_server import PlainServers  # noqa: E402

EXPECTED_REPLIES = [True, True, "$-1\r\n", "+OK\r\n", "$3\r\nbar\r\n", "+PONG\r\n", "+OK\r\n", "$5\r\nvalue\r\n"]


class NotHttp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        web = PlainServers([0])
        cls.addClassCleanup(web.close)
        server = hc.App([hc.PYTHON, hc.app_path("not_http.py"), "server"],
                        hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="not-http-server"), "not-http-server")
        cls.addClassCleanup(server.cleanup)
        ports = server.info
        env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="not-http-client",
                          NEMOLENS_DESTINATIONS=f"echo=127.0.0.1:{ports['echo']},redis=127.0.0.1:{ports['redis']},"
                                                f"web=127.0.0.1:{web.ports[0]}")
        cls.client = harness.run([hc.PYTHON, hc.app_path("not_http.py"), "client", str(ports["echo"]),
                                  str(ports["redis"]), f"http://127.0.0.1:{web.ports[0]}/control"], env)
        cls.server_rc = server.stop()
        cls.server_err = server.stderr()
        reqs = hc.all_requests(cls.sink)
        cls.client_reqs = hc.of_service(reqs, "not-http-client")
        cls.server_reqs = hc.of_service(reqs, "not-http-server")

    def test_programs_ran(self):
        self.assertEqual(self.client.returncode, 0, self.client.stderr)
        self.assertEqual(self.server_rc, 0, self.server_err)
        for err in (self.client.stderr, self.server_err):
            self.assertNotIn("nemolens:", err)
        truth = json.loads(self.client.stdout)
        self.assertEqual(truth["replies"], EXPECTED_REPLIES)
        self.assertEqual(truth["http_status"], 200)

    def test_connections_counted(self):
        self.assertEqual(hc.values_by(self.client_reqs, hc.CONNECTS, hc.DEST),
                         {("echo",): 2, ("redis",): 1, ("web",): 1})

    def test_no_http_data_from_the_server(self):
        self.assertEqual(hc.http_names(self.server_reqs), set(), hc.summary(self.server_reqs))

    def test_client_http_data_is_only_the_control_request(self):
        self.assertEqual(hc.http_names(self.client_reqs) - {hc.CLIENT_DURATION}, set(),
                         hc.summary(self.client_reqs))
        dests = hc.attribute_values(self.client_reqs, hc.CLIENT_DURATION, hc.DEST)
        self.assertEqual(dests & {"echo", "redis"}, set(), hc.summary(self.client_reqs))

    def test_control_request_is_seen(self):
        self.assertEqual(hc.counts_by(self.client_reqs, hc.CLIENT_DURATION, hc.DEST, hc.METHOD, hc.STATUS),
                         {("web", "GET", 200): 1}, hc.summary(self.client_reqs))


if __name__ == "__main__":
    unittest.main(verbosity=2)
