# SPDX-License-Identifier: Apache-2.0
"""HTTPS: the HTTP metrics from OpenSSL's plaintext (hooks/ssl.c), with a
self-signed certificate made for the run (openssl req):

- Python's ssl (http.server over an SSLContext, real sockets) under the shim,
  a requests client in this process: server counts per (method, status)
  exact, url.scheme "https" everywhere, idle active_requests; the shim
  exports to an HTTPS collector and never counts its own TLS.
- aiohttp server and aiohttp client (asyncio: TLS over memory BIOs, no fd
  under the SSL object), both under the shim: server counts exact; client
  counts per destination exact, the destination named from the SNI name
  "localhost" by a host rule.
- curl (libcurl, libssl in the global scope) under the shim against HTTPS
  servers in this process: counts per (destination, method, status) exact.
- nginx with a TLS listener under the shim: counts per (route, method,
  status) exact, body bytes, and HTTP/2 over TLS (ALPN h2, curl --http2
  under the shim) on a second listener: counted as HTTP/2 on both sides.
- HTTP/2's connection preface over TLS (ALPN h2) and a raw echo over TLS,
  both sides under the shim: no HTTP data; a control HTTPS request is seen.
- One TLS connection written by one thread and read by another at the same
  time (the client under the shim): counts exact (and clean under TSan).
"""
import collections
import json
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
from http_apps import tlsapps  # noqa: E402
from http_apps.rawhttp import Log  # noqa: E402

CERT = KEY = None
TLSAPPS = hc.app_path("tlsapps.py")
# Debian's curl hangs at start-up under a preloaded sanitizer runtime (see test_http_client.py).
NO_CURL = bool(os.environ.get("NL_SANITIZER_RUNTIME"))


def setUpModule():
    global CERT, KEY
    d = tempfile.mkdtemp(prefix="nl-https.")
    unittest.addModuleCleanup(shutil.rmtree, d, True)
    CERT, KEY = tlsapps.make_cert(d)


def run_client(args, env, stdin=None):
    p = harness.run(args, env, input=stdin)
    out = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else None
    return p, out


class Checks:
    def assertClean(self, stderr, what):
        self.assertNotIn("nemolens:", stderr, f"{what}: the shim printed warnings")

    def assertHttps(self, reqs):
        self.assertEqual(hc.attribute_values(reqs, hc.SERVER_DURATION, hc.SCHEME), {"https"}, hc.summary(reqs))
        for name in (hc.SERVER_REQ_BODY, hc.SERVER_RESP_BODY, hc.SERVER_ACTIVE):
            self.assertEqual(hc.attribute_values(reqs, name, hc.SCHEME), {"https"}, name)

    def assertIdleHttps(self, reqs, methods):
        got = hc.values_by(reqs, hc.SERVER_ACTIVE, hc.METHOD, hc.SCHEME)
        self.assertEqual({(m, "https"): got.get((m, "https")) for m in methods}, {(m, "https"): 0 for m in methods})
        self.assertEqual({k: v for k, v in got.items() if v != 0}, {})


# ---- Python's ssl server, requests client ----------------------------------------------
class PythonSslServer(Checks, unittest.TestCase):
    PLAN = [("GET", "/ok", 6), ("GET", "/missing", 3), ("GET", "/error", 2), ("POST", "/ok", 2), ("HEAD", "/ok", 1)]
    BODY = b"x" * 1000

    @classmethod
    def setUpClass(cls):
        import requests
        cls.sink = tlsapps.tls_sink(CERT, KEY)
        cls.addClassCleanup(cls.sink.close)
        env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="https-server", OTEL_EXPORTER_OTLP_CERTIFICATE=CERT)
        cls.app = hc.App([hc.PYTHON, TLSAPPS, "https-server", CERT, KEY], env, "https-server")
        cls.addClassCleanup(cls.app.cleanup)
        base = f"https://127.0.0.1:{cls.app.info['port']}"
        cls.truth = collections.Counter()
        with cls.app.blamed():
            with requests.Session() as s:
                for method, path, n in cls.PLAN:
                    for _ in range(n):
                        r = s.request(method, base + path, data=cls.BODY if method == "POST" else None,
                                      verify=CERT, timeout=20)
                        cls.truth[(method, r.status_code)] += 1
            for _ in range(3):    # a connection each
                r = requests.get(base + "/ok", verify=CERT, timeout=20, headers={"Connection": "close"})
                cls.truth[("GET", r.status_code)] += 1
        cls.idle = hc.wait_exports_after(cls.sink, time.monotonic())
        cls.rc = cls.app.stop()
        cls.reqs = hc.all_requests(cls.sink)

    def test_server_ran(self):
        self.assertEqual(self.rc, 0, self.app.stderr()[-2000:])
        self.assertClean(self.app.stderr(), "server")
        self.assertEqual(dict(self.truth), {("GET", 200): 9, ("GET", 404): 3, ("GET", 503): 2, ("POST", 200): 2,
                                            ("HEAD", 200): 1})

    def test_exported_over_https(self):
        self.assertTrue(self.reqs, "nothing reached the HTTPS collector")

    def test_requests_per_method_status(self):
        self.assertEqual(hc.counts_by(self.reqs, hc.SERVER_DURATION, hc.METHOD, hc.STATUS), dict(self.truth),
                         hc.summary(self.reqs))

    def test_scheme_is_https(self):
        self.assertHttps(self.reqs)
        for _, _, p in hc.points_in(self.reqs, hc.SERVER_DURATION):
            self.assertEqual(hc.attrs(p).get(hc.VERSION), "1.1")

    def test_body_sizes(self):
        req = hc.sums_by(self.reqs, hc.SERVER_REQ_BODY, hc.METHOD, hc.STATUS)
        self.assertEqual(req.get(("POST", 200)), 2.0 * len(self.BODY))
        resp = hc.sums_by(self.reqs, hc.SERVER_RESP_BODY, hc.METHOD, hc.STATUS)
        self.assertEqual(resp.get(("POST", 200)), 2.0 * len(self.BODY))    # echoed
        self.assertEqual(resp.get(("HEAD", 200)), 0.0)
        self.assertEqual(resp.get(("GET", 404)), 3.0 * len(b"not found\n"))

    def test_idle(self):
        self.assertIdleHttps(self.idle, ["GET", "POST", "HEAD"])
        self.assertIdleHttps(self.reqs, ["GET", "POST", "HEAD"])

    def test_own_https_export_not_counted(self):
        self.assertEqual(hc.points_in(self.reqs, hc.CLIENT_DURATION), [], hc.summary(self.reqs))


# ---- aiohttp on both sides: memory BIOs -----------------------------------------------
class Aiohttp(Checks, unittest.TestCase):
    PLAN = [("GET", "/hello", 6), ("GET", "/missing", 2), ("GET", "/fail", 2), ("POST", "/echo", 3)]

    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        cls.app = hc.App([hc.PYTHON, TLSAPPS, "aiohttp-server", CERT, KEY],
                         hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="aiohttp-tls-server"), "aiohttp-tls-server")
        cls.addClassCleanup(cls.app.cleanup)
        cls.port = cls.app.info["port"]
        plan = [{"method": m, "url": f"https://localhost:{cls.port}{p}", "body": "b" * 300 if m == "POST" else ""}
                for m, p, n in cls.PLAN for _ in range(n)]
        env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="aiohttp-tls-client",
                          NEMOLENS_DESTINATIONS=f"other=localhost:1,tlsapp=localhost:{cls.port}")
        with cls.app.blamed():
            cls.client, cls.results = run_client([hc.PYTHON, TLSAPPS, "aiohttp-client", CERT], env, json.dumps(plan))
        cls.idle = hc.wait_exports_after(cls.sink, time.monotonic())
        cls.rc = cls.app.stop()
        reqs = hc.all_requests(cls.sink)
        cls.server_reqs = hc.of_service(reqs, "aiohttp-tls-server")
        cls.client_reqs = hc.of_service(reqs, "aiohttp-tls-client")
        cls.idle = hc.of_service(cls.idle, "aiohttp-tls-server")

    def truth(self):
        return dict(collections.Counter((r["method"], r["status"]) for r in self.results or []))

    def test_programs_ran(self):
        self.assertEqual(self.client.returncode, 0, self.client.stderr[-3000:])
        self.assertEqual(self.rc, 0, self.app.stderr()[-2000:])
        self.assertClean(self.client.stderr, "client")
        self.assertClean(self.app.stderr(), "server")
        self.assertEqual(self.truth(), {("GET", 200): 6, ("GET", 404): 2, ("GET", 500): 2, ("POST", 201): 3})

    def test_server_counts(self):
        self.assertEqual(hc.counts_by(self.server_reqs, hc.SERVER_DURATION, hc.METHOD, hc.STATUS), self.truth(),
                         hc.summary(self.server_reqs))
        self.assertHttps(self.server_reqs)
        self.assertIdleHttps(self.idle, ["GET", "POST"])
        req = hc.sums_by(self.server_reqs, hc.SERVER_REQ_BODY, hc.METHOD)
        self.assertEqual(req.get(("POST",)), 3.0 * 300)

    def test_client_counts_by_sni_destination(self):
        want = {("tlsapp",) + k: n for k, n in self.truth().items()}
        self.assertEqual(hc.counts_by(self.client_reqs, hc.CLIENT_DURATION, hc.DEST, hc.METHOD, hc.STATUS), want,
                         hc.summary(self.client_reqs))

    def test_client_server_address_and_port(self):
        self.assertEqual(hc.attribute_values(self.client_reqs, hc.CLIENT_DURATION, hc.SERVER_ADDRESS), {"localhost"})
        self.assertEqual(hc.attribute_values(self.client_reqs, hc.CLIENT_DURATION, hc.SERVER_PORT), {self.port})

    def test_no_client_data_in_the_server(self):
        self.assertEqual(hc.points_in(self.server_reqs, hc.CLIENT_DURATION), [])
        self.assertEqual(hc.points_in(self.client_reqs, hc.SERVER_DURATION), [])


# ---- curl ------------------------------------------------------------------------------
@unittest.skipIf(NO_CURL, "curl hangs under a preloaded sanitizer runtime alone")
class Curl(Checks, unittest.TestCase):
    PLAN = [("fast", "/ok", 3), ("fast", "/missing", 1), ("fast", "/error", 1), ("other", "/ok", 2)]

    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        cls.srv = tlsapps.TlsServers([0.05, 0], CERT, KEY)
        cls.addClassCleanup(cls.srv.close)
        port = dict(zip(["fast", "other"], cls.srv.ports))
        args = [hc.CURL, "-s", "--http1.1", "--cacert", CERT, "-w", "%{http_code} %{http_version}\\n"]
        for dest, path, n in cls.PLAN:
            for _ in range(n):
                args += ["-o", "/dev/null", f"https://127.0.0.1:{port[dest]}{path}"]
        env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="curl-tls",
                          NEMOLENS_DESTINATIONS=f"fast=127.0.0.1:{port['fast']}")
        cls.curl = harness.run(args, env)
        cls.reqs = hc.all_requests(cls.sink)
        cls.dest_of = {p: ("fast" if d == "fast" else "external") for d, p in port.items()}

    def test_curl_ran(self):
        self.assertEqual(self.curl.returncode, 0, self.curl.stderr)
        self.assertClean(self.curl.stderr, "curl")
        self.assertEqual(self.curl.stdout.split("\n")[:-1],
                         ["200 1.1"] * 3 + ["404 1.1", "503 1.1"] + ["200 1.1"] * 2)

    def test_counts_per_destination(self):
        want = collections.Counter()
        for (port, method, _path, status), n in self.srv.counts().items():
            want[(self.dest_of[port], method, status)] += n
        self.assertEqual(dict(want), {("fast", "GET", 200): 3, ("fast", "GET", 404): 1, ("fast", "GET", 503): 1,
                                      ("external", "GET", 200): 2})
        self.assertEqual(hc.counts_by(self.reqs, hc.CLIENT_DURATION, hc.DEST, hc.METHOD, hc.STATUS), dict(want),
                         hc.summary(self.reqs))

    def test_attributes(self):
        self.assertEqual(hc.attribute_values(self.reqs, hc.CLIENT_DURATION, hc.SERVER_ADDRESS), {"127.0.0.1"})
        self.assertEqual(hc.attribute_values(self.reqs, hc.CLIENT_DURATION, hc.SERVER_PORT), set(self.srv.ports))
        errors = hc.counts_by(self.reqs, hc.CLIENT_DURATION, hc.ERROR)
        self.assertEqual(errors, {(None,): 6, ("503",): 1})
        # each request to "fast" waited its 50 ms
        fast = hc.hist_by(self.reqs, hc.CLIENT_DURATION, hc.DEST)[("fast",)]
        self.assertGreaterEqual(fast.sum, 5 * 0.05 - 5 * hc.TIMER_SLACK)


# ---- nginx -----------------------------------------------------------------------------
class NginxTls(Checks, unittest.TestCase):
    FILE_SIZE = 54321
    ROUTE = "/files/*"

    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        d = tempfile.mkdtemp(prefix="nl-https-nginx.")
        cls.addClassCleanup(shutil.rmtree, d, True)
        os.makedirs(os.path.join(d, "html", "files"))
        os.makedirs(os.path.join(d, "tmp"))
        with open(os.path.join(d, "html", "files", "data.bin"), "wb") as f:
            f.write(os.urandom(cls.FILE_SIZE))
        cls.port, cls.h2port = hc.free_port(), hc.free_port()
        with open(hc.app_path("nginx_tls.conf.in")) as f:
            conf = f.read()
        for k, v in {"@DIR@": d, "@PORT@": str(cls.port), "@H2PORT@": str(cls.h2port), "@CERT@": CERT,
                     "@KEY@": KEY}.items():
            conf = conf.replace(k, v)
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(conf)
        env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="nginx-tls", NEMOLENS_HTTP_ROUTES=cls.ROUTE)
        cls.app = hc.App([hc.NGINX, "-p", d, "-e", os.path.join(d, "error.log"), "-c", os.path.join(d, "nginx.conf")],
                         env, "nginx-tls", ready=os.path.join(d, "nginx.pid"), logs=[os.path.join(d, "error.log")])
        cls.addClassCleanup(cls.app.cleanup)
        cls.log = Log()
        with cls.app.blamed():
            cls.drive()
            cls.h2 = None if NO_CURL else harness.run([hc.CURL, "-s", "--http2", "--cacert", CERT, "-w", "%{http_version} %{http_code}\\n"]
                                 + ["-o", "/dev/null", f"https://127.0.0.1:{cls.h2port}/files/data.bin"] * 3
                                 + ["-o", "/dev/null", f"https://127.0.0.1:{cls.h2port}/nope.txt"],
                                 hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="curl-h2"))
        cls.idle = hc.wait_exports_after(cls.sink, time.monotonic())
        cls.rc = cls.app.stop(signal.SIGQUIT)
        reqs = hc.all_requests(cls.sink)
        cls.reqs = hc.of_service(reqs, "nginx-tls")
        cls.h2_reqs = hc.of_service(reqs, "curl-h2")

    @classmethod
    def drive(cls):
        log, port, path = cls.log, cls.port, "/files/data.bin"
        with tlsapps.TlsConn(port, CERT) as c:
            for _ in range(8):
                first = log.record(cls.ROUTE, "GET", c.request("GET", path))
            log.record(cls.ROUTE, "HEAD", c.request("HEAD", path))
            log.record("/nope.txt", "GET", c.request("GET", "/nope.txt"))
            log.record(cls.ROUTE, "GET", c.request("GET", path, {"If-None-Match": first.headers.get("etag")}))
        with tlsapps.TlsConn(port, CERT) as c:
            reqs = [("GET", path), ("GET", "/nope.txt"), ("GET", path)]
            for (m, p), r in zip(reqs, c.pipeline(reqs)):
                log.record(cls.ROUTE if p == path else p, m, r)
        for _ in range(3):
            with tlsapps.TlsConn(port, CERT) as c:
                log.record(cls.ROUTE, "GET", c.request("GET", path, {"Connection": "close"}))

    def test_server_ran(self):
        self.assertEqual(self.rc, 0, self.app.stderr()[-2000:])
        self.assertClean(self.app.stderr(), "nginx")
        self.assertEqual(self.log.counts(), {(self.ROUTE, "GET", 200): 13, (self.ROUTE, "HEAD", 200): 1,
                                             (self.ROUTE, "GET", 304): 1, ("/nope.txt", "GET", 404): 2})

    def http1(self, by):
        return {k[1:]: v for k, v in by.items() if k[0] != "2"}

    def test_requests_per_route_method_status(self):
        self.assertEqual(self.http1(hc.counts_by(self.reqs, hc.SERVER_DURATION, hc.VERSION, hc.ROUTE, hc.METHOD,
                                                 hc.STATUS)),
                         self.log.counts(), hc.summary(self.reqs))
        self.assertHttps(self.reqs)

    def test_body_bytes(self):
        resp = self.http1(hc.sums_by(self.reqs, hc.SERVER_RESP_BODY, hc.VERSION, hc.ROUTE, hc.METHOD, hc.STATUS))
        self.assertEqual(resp.get((self.ROUTE, "GET", 200)), 13.0 * self.FILE_SIZE, hc.summary(self.reqs))
        self.assertEqual(resp.get((self.ROUTE, "HEAD", 200)), 0.0)
        self.assertEqual(resp.get((self.ROUTE, "GET", 304)), 0.0)

    def test_idle(self):
        self.assertIdleHttps(hc.of_service(self.idle, "nginx-tls"), ["GET", "HEAD"])

    @unittest.skipIf(NO_CURL, "curl hangs under a preloaded sanitizer runtime alone")
    def test_http2_over_tls(self):
        self.assertEqual(self.h2.returncode, 0, self.h2.stderr)
        self.assertClean(self.h2.stderr, "curl --http2")
        self.assertEqual(self.h2.stdout.split("\n")[:-1], ["2 200"] * 3 + ["2 404"])
        want = {("2", "GET", 200): 3, ("2", "GET", 404): 1}
        self.assertEqual(hc.counts_by(self.h2_reqs, hc.CLIENT_DURATION, hc.VERSION, hc.METHOD, hc.STATUS), want,
                         hc.summary(self.h2_reqs))
        server = hc.counts_by(self.reqs, hc.SERVER_DURATION, hc.VERSION, hc.METHOD, hc.STATUS)
        self.assertEqual({k: v for k, v in server.items() if k[0] == "2"}, want, hc.summary(self.reqs))
        resp = hc.sums_by(self.reqs, hc.SERVER_RESP_BODY, hc.VERSION, hc.ROUTE, hc.METHOD, hc.STATUS)
        self.assertEqual(resp.get(("2", self.ROUTE, "GET", 200)), 3.0 * self.FILE_SIZE)
        self.assertEqual(hc.values_by(self.h2_reqs, hc.CONNECTS, hc.DEST), {("external",): 1})


# ---- TLS without HTTP/1.x ----------------------------------------------------------------
class NotHttpOverTls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        server = hc.App([hc.PYTHON, TLSAPPS, "others-server", CERT, KEY],
                        hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="tls-others-server"), "tls-others-server")
        cls.addClassCleanup(server.cleanup)
        p = server.info
        env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="tls-others-client",
                          NEMOLENS_DESTINATIONS=f"h2=127.0.0.1:{p['h2']},echo=127.0.0.1:{p['echo']},"
                                                f"web=127.0.0.1:{p['web']}")
        with server.blamed():
            cls.client, cls.truth = run_client([hc.PYTHON, TLSAPPS, "others-client", CERT, str(p["h2"]),
                                                str(p["echo"]), str(p["web"])], env)
        hc.wait_exports_after(cls.sink, time.monotonic())
        cls.server_rc = server.stop()
        cls.server_err = server.stderr()
        reqs = hc.all_requests(cls.sink)
        cls.client_reqs = hc.of_service(reqs, "tls-others-client")
        cls.server_reqs = hc.of_service(reqs, "tls-others-server")

    def test_programs_ran(self):
        self.assertEqual(self.client.returncode, 0, self.client.stderr)
        self.assertEqual(self.server_rc, 0, self.server_err)
        for err in (self.client.stderr, self.server_err):
            self.assertNotIn("nemolens:", err)
        self.assertEqual(self.truth, {"alpn": "h2", "h2_frames": True, "echo": [True] * 8, "web_status": 200})

    def test_connections_counted(self):
        self.assertEqual(hc.values_by(self.client_reqs, hc.CONNECTS, hc.DEST),
                         {("h2",): 1, ("echo",): 2, ("web",): 1})

    def test_server_saw_only_the_control(self):
        self.assertEqual(hc.counts_by(self.server_reqs, hc.SERVER_DURATION, hc.ROUTE, hc.METHOD, hc.STATUS),
                         {("/control", "GET", 200): 1}, hc.summary(self.server_reqs))
        self.assertEqual(hc.points_in(self.server_reqs, hc.CLIENT_DURATION), [])

    def test_client_saw_only_the_control(self):
        self.assertEqual(hc.http_names(self.client_reqs), {hc.CLIENT_DURATION}, hc.summary(self.client_reqs))
        self.assertEqual(hc.counts_by(self.client_reqs, hc.CLIENT_DURATION, hc.DEST, hc.METHOD, hc.STATUS),
                         {("web", "GET", 200): 1}, hc.summary(self.client_reqs))


# ---- one connection, two threads ----------------------------------------------------------
class TwoThreads(unittest.TestCase):
    N = 30
    LATENCY = 0.02

    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        cls.srv = tlsapps.TlsServers([cls.LATENCY], CERT, KEY)
        cls.addClassCleanup(cls.srv.close)
        port = cls.srv.ports[0]
        env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="tls-two-threads",
                          NEMOLENS_DESTINATIONS=f"dual=127.0.0.1:{port}")
        cls.client, cls.truth = run_client([hc.PYTHON, TLSAPPS, "two-threads", CERT, str(port), str(cls.N)], env)
        cls.reqs = hc.all_requests(cls.sink)

    def test_client_ran(self):
        self.assertEqual(self.client.returncode, 0, self.client.stderr[-4000:])
        self.assertEqual(self.client.stderr, "", "warnings or sanitizer reports")
        self.assertEqual(collections.Counter(self.truth["statuses"]), {200: 20, 404: 10})

    def test_counts(self):
        self.assertEqual(hc.counts_by(self.reqs, hc.CLIENT_DURATION, hc.DEST, hc.METHOD, hc.STATUS),
                         {("dual", "GET", 200): 20, ("dual", "GET", 404): 10}, hc.summary(self.reqs))
        served = collections.Counter()
        for (_, method, _, status), n in self.srv.counts().items():
            served[(method, status)] += n
        self.assertEqual(dict(served), {("GET", 200): 20, ("GET", 404): 10})

    def test_durations(self):
        h = hc.hist_by(self.reqs, hc.CLIENT_DURATION, hc.DEST)[("dual",)]
        self.assertGreaterEqual(h.min, self.LATENCY - hc.TIMER_SLACK, h)


if __name__ == "__main__":
    unittest.main(verbosity=2)
