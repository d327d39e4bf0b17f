# SPDX-License-Identifier: Apache-2.0
"""The HTTP layer on the server side of real servers other than uvicorn, each
run under the shim, with this process (not under the shim) as the client:

- nginx (nginx-light, one foreground process, sendfile on, keep-alive) serving
  a file of known size: GETs on one keep-alive connection, HEAD, a 404, two
  conditional GETs -> 304 (If-None-Match, If-Modified-Since), 3 requests
  pipelined in one send, and `Connection: close` GETs. NEMOLENS_HTTP_ROUTES
  names the file's route `/files/*`. Counts per (route, method, status) equal
  what the client saw; the response bytes of the GET 200s are exactly
  file size x their number, although nginx sends the file with sendfile().
- Node.js's http server (libuv) and aiohttp's web server (asyncio) with the
  same endpoints: counts per (route, method, status), including one request
  whose client left before the answer (no status, error.type a type name),
  body bytes, idle active_requests.
"""
import os
import shutil
import signal
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from http_apps import httpcheck as hc  # noqa: E402
from http_apps.rawhttp import Conn, Log, abandon, one_shot  # noqa: E402

FILE_SIZE = 123457
FILE_ROUTE = "/files/*"
KEEPALIVE_GETS = 20
CLOSE_GETS = 5
PIPELINED = [("GET", "/files/data.bin"), ("GET", "/files/data.bin"), ("GET", "/nope.txt")]


class ServerScenario(hc.ServerChecks):
    """setUpClass: start the server under the shim, drive it, wait for an idle
    export, stop it, keep every export."""
    NAME = None
    STOP_SIGNAL = signal.SIGTERM
    ENV = {}

    @classmethod
    def start(cls, env):
        raise NotImplementedError

    @classmethod
    def drive(cls, port):
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        cls.log = Log()
        cls.app, port = cls.start(hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME=cls.NAME, **cls.ENV))
        cls.addClassCleanup(cls.app.cleanup)
        with cls.app.blamed():
            cls.drive(port)
        cls.idle = hc.wait_exports_after(cls.sink, time.monotonic())
        cls.rc = cls.app.stop(cls.STOP_SIGNAL)
        cls.reqs = hc.all_requests(cls.sink)

    def test_server_ran(self):
        self.assertEqual(self.rc, 0, self.app.stderr()[-2000:])
        self.assertNotIn("nemolens:", self.app.stderr(), "the shim printed warnings")

    def test_instruments(self):
        self.assertInstruments()

    def test_requests_per_route_method_status(self):
        self.assertServerCounts()

    def test_attributes(self):
        self.assertCommonAttributes()

    def test_body_sizes(self):
        self.assertBodySizes()

    def test_no_client_data_from_the_server(self):
        self.assertNoClientData()


class Nginx(ServerScenario, unittest.TestCase):
    NAME = "nginx"
    STOP_SIGNAL = signal.SIGQUIT      # graceful shutdown: nginx returns from main, the exit export runs
    ENV = {"NEMOLENS_HTTP_ROUTES": FILE_ROUTE}

    @classmethod
    def start(cls, env):
        d = tempfile.mkdtemp(prefix="nl-http-nginx.")
        cls.addClassCleanup(shutil.rmtree, d, True)
        os.makedirs(os.path.join(d, "html", "files"))
        os.makedirs(os.path.join(d, "tmp"))
        with open(os.path.join(d, "html", "files", "data.bin"), "wb") as f:
            f.write(os.urandom(FILE_SIZE))
        port = hc.free_port()
        with open(hc.app_path("nginx.conf.in")) as f:
            conf = f.read().replace("@DIR@", d).replace("@PORT@", str(port))
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(conf)
        # nginx writes its pid file after it opened its listening socket
        app = hc.App([hc.NGINX, "-p", d, "-e", os.path.join(d, "error.log"), "-c", os.path.join(d, "nginx.conf")],
                     env, "nginx", ready=os.path.join(d, "nginx.pid"), logs=[os.path.join(d, "error.log")])
        return app, port

    @classmethod
    def drive(cls, port):
        log = cls.log
        with Conn(port) as c:
            for _ in range(KEEPALIVE_GETS):
                first = log.record(FILE_ROUTE, "GET", c.request("GET", "/files/data.bin"))
            cls.etag, cls.last_modified = first.headers.get("etag"), first.headers.get("last-modified")
            cls.head = log.record(FILE_ROUTE, "HEAD", c.request("HEAD", "/files/data.bin"))
            log.record("/nope.txt", "GET", c.request("GET", "/nope.txt"))
            log.record(FILE_ROUTE, "GET", c.request("GET", "/files/data.bin", {"If-None-Match": cls.etag}))
            log.record(FILE_ROUTE, "GET", c.request("GET", "/files/data.bin",
                                                    {"If-Modified-Since": cls.last_modified}))
        with Conn(port) as c:
            cls.pipelined = c.pipeline(PIPELINED)
            for (method, path), resp in zip(PIPELINED, cls.pipelined):
                log.record(FILE_ROUTE if path.startswith("/files/") else path, method, resp)
        for _ in range(CLOSE_GETS):
            log.record(FILE_ROUTE, "GET", one_shot(port, "GET", "/files/data.bin"))

    def test_client_saw(self):
        gets = KEEPALIVE_GETS + 2 + CLOSE_GETS
        self.assertEqual(self.log.counts(), {(FILE_ROUTE, "GET", 200): gets, (FILE_ROUTE, "HEAD", 200): 1,
                                             (FILE_ROUTE, "GET", 304): 2, ("/nope.txt", "GET", 404): 2})
        self.assertEqual([r.status for r in self.pipelined], [200, 200, 404])
        self.assertEqual(self.head.headers.get("content-length"), str(FILE_SIZE))
        for e in self.log.select(route=FILE_ROUTE, method="GET", status=200):
            self.assertEqual(e.resp_body, FILE_SIZE)

    def test_sendfile_bytes_counted(self):
        gets = KEEPALIVE_GETS + 2 + CLOSE_GETS
        resp = hc.sums_by(self.reqs, hc.SERVER_RESP_BODY, hc.ROUTE, hc.METHOD, hc.STATUS)
        self.assertEqual(resp.get((FILE_ROUTE, "GET", 200)), float(FILE_SIZE * gets), hc.summary(self.reqs))
        self.assertEqual(resp.get((FILE_ROUTE, "HEAD", 200)), 0.0)   # HEAD: headers only
        self.assertEqual(resp.get((FILE_ROUTE, "GET", 304)), 0.0)

    def test_routes(self):
        self.assertEqual(hc.attribute_values(self.reqs, hc.SERVER_DURATION, hc.ROUTE), {FILE_ROUTE, "/nope.txt"})

    def test_idle(self):
        self.assertIdle(["GET", "HEAD"])


class SmallServer(ServerScenario):
    """Node.js and aiohttp: the same endpoints, the same traffic."""
    ARGS = None
    USERS = 10

    @classmethod
    def start(cls, env):
        app = hc.App(cls.ARGS, env, cls.NAME)
        return app, app.info["port"]

    @classmethod
    def drive(cls, port):
        log = cls.log
        with Conn(port) as c:
            for _ in range(10):
                log.record("/hello", "GET", c.request("GET", "/hello"))
            for i in range(cls.USERS):
                log.record("/users/{id}", "GET", c.request("GET", f"/users/{424242 + i}"))
            for _ in range(3):
                log.record("/missing", "GET", c.request("GET", "/missing"))
            for i in range(4):
                body = bytes([65 + i]) * (500 + i)
                log.record("/echo", "POST", c.request("POST", "/echo", {"Content-Type": "text/plain"}, body),
                           len(body))
            for _ in range(2):
                cls.chunked = log.record("/chunked", "GET", c.request("GET", "/chunked"))
        for _ in range(3):
            log.record("/hello", "GET", one_shot(port, "GET", "/hello"))
        for _ in range(2):
            log.record("/fail", "GET", one_shot(port, "GET", "/fail", close_header=False))
        # a request whose client goes away before the (0.3 s) answer
        log.add("/slow", "GET", None, abandon(port, "GET", "/slow", wait=0.1))
        time.sleep(0.5)    # the server's late answer goes nowhere before the idle export

    def test_client_saw(self):
        self.assertEqual(self.log.counts(), {("/hello", "GET", 200): 13, ("/users/{id}", "GET", 200): self.USERS,
                                             ("/missing", "GET", 404): 3, ("/echo", "POST", 201): 4,
                                             ("/chunked", "GET", 200): 2, ("/fail", "GET", 500): 2,
                                             ("/slow", "GET", None): 1})
        self.assertEqual(self.chunked.headers.get("transfer-encoding"), "chunked")
        self.assertEqual(len(self.chunked.body), 6 * 50 + 5 * 30 + 6)

    def test_echo_bytes(self):
        req = hc.sums_by(self.reqs, hc.SERVER_REQ_BODY, hc.ROUTE, hc.METHOD)
        self.assertEqual(req.get(("/echo", "POST")), float(500 + 501 + 502 + 503), hc.summary(self.reqs))

    def test_idle(self):
        self.assertIdle(["GET", "POST"])


class NodeServer(SmallServer, unittest.TestCase):
    NAME = "node-http"
    ARGS = [hc.NODE, hc.app_path("node_server.js")]


class AiohttpServer(SmallServer, unittest.TestCase):
    NAME = "aiohttp-web"
    ARGS = [hc.PYTHON, hc.app_path("aiohttp_server.py")]


if __name__ == "__main__":
    unittest.main(verbosity=2)
