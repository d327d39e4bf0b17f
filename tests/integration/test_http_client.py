# SPDX-License-Identifier: Apache-2.0
"""The HTTP layer on the client side: requests, aiohttp and curl run under the
shim against a plain HTTP server in this test process (not under the shim)
with a known latency per port:

    fast   127.0.0.1:<p1>  0.1 s per request   NEMOLENS_DESTINATIONS fast=127.0.0.1:<p1>
    slow   127.0.0.1:<p2>  0.3 s per request                         slow=127.0.0.1:<p2>
    other  127.0.0.1:<p3>  no delay            (no rule: "external")

Each client makes the same plan (200s, 404s, 503s, a POST; keep-alive, so
connections are reused). http.client.request.duration must hold, per
(destination, method, status), exactly the requests the client made and the
server answered; each duration sum at least count x the port's latency and at
most what the client measured around the same calls; server.address and
server.port from the Host header; error.type "503" on the 503s.
"""
import collections
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402
from http_apps import httpcheck as hc  # noqa: E402
from http_apps.plain_server import PlainServers  # noqa: E402

LATENCY = {"fast": 0.1, "slow": 0.3, "external": 0.0}
# (destination, method, path, times)
PLAN = [("fast", "GET", "/ok", 4), ("fast", "GET", "/missing", 2), ("fast", "GET", "/error", 1),
        ("fast", "POST", "/ok", 1), ("slow", "GET", "/ok", 3), ("slow", "GET", "/error", 1),
        ("external", "GET", "/ok", 2)]
POST_BODY = "x" * 1000


class ClientScenario:
    LIB = None

    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        cls.srv = PlainServers([LATENCY["fast"], LATENCY["slow"], LATENCY["external"]])
        cls.addClassCleanup(cls.srv.close)
        cls.port = dict(zip(["fast", "slow", "external"], cls.srv.ports))
        cls.dest_of_port = {p: d for d, p in cls.port.items()}
        cls.plan = []
        for dest, method, path, n in PLAN:
            for _ in range(n):
                r = {"method": method, "url": f"http://127.0.0.1:{cls.port[dest]}{path}"}
                if method == "POST":
                    r["body"] = POST_BODY
                cls.plan.append(r)
        env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME=f"client-{cls.LIB}",
                          NEMOLENS_DESTINATIONS=f"fast=127.0.0.1:{cls.port['fast']},"
                                                f"slow=127.0.0.1:{cls.port['slow']}")
        cls.proc, cls.results = cls.run_client(env)
        cls.reqs = hc.all_requests(cls.sink)

    @classmethod
    def run_client(cls, env):
        p = hc.harness.run([hc.PYTHON, hc.app_path("http_clients.py"), cls.LIB], env, input=json.dumps(cls.plan))
        return p, (json.loads(p.stdout) if p.returncode == 0 else [])

    def truth(self):
        """{(destination, method, status): [elapsed, ...]} as the client saw it."""
        out = collections.defaultdict(list)
        for r in self.results:
            port = int(r["url"].split(":")[2].split("/")[0])
            out[(self.dest_of_port[port], r["method"], r["status"])].append(r["elapsed"])
        return out

    def test_client_ran(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        self.assertNotIn("nemolens:", self.proc.stderr, "the shim printed warnings")
        self.assertEqual(len(self.results), len(self.plan))
        want = {("fast", "GET", 200): 4, ("fast", "GET", 404): 2, ("fast", "GET", 503): 1, ("fast", "POST", 200): 1,
                ("slow", "GET", 200): 3, ("slow", "GET", 503): 1, ("external", "GET", 200): 2}
        self.assertEqual({k: len(v) for k, v in self.truth().items()}, want)
        # the server answered exactly those
        served = collections.Counter()
        for (port, method, _, status), n in self.srv.counts().items():
            served[(self.dest_of_port[port], method, status)] += n
        self.assertEqual(dict(served), want)

    def test_instruments(self):
        pts = hc.points_in(self.reqs, hc.CLIENT_DURATION)
        self.assertTrue(pts, f"no {hc.CLIENT_DURATION} at all:\n" + hc.summary(self.reqs))
        for _, m, p in pts:
            self.assertEqual(m.unit, "s")
            self.assertEqual(m.histogram.aggregation_temporality, hc.CUMULATIVE)
            self.assertEqual(list(p.explicit_bounds), hc.DURATION_BOUNDS)
            self.assertEqual(sum(p.bucket_counts), p.count)

    def test_requests_per_destination_method_status(self):
        got = hc.counts_by(self.reqs, hc.CLIENT_DURATION, hc.DEST, hc.METHOD, hc.STATUS)
        self.assertEqual(got, {k: len(v) for k, v in self.truth().items()}, hc.summary(self.reqs))

    def test_durations_cover_the_server_latency(self):
        got = hc.hist_by(self.reqs, hc.CLIENT_DURATION, hc.DEST, hc.METHOD, hc.STATUS)
        for key, elapsed in self.truth().items():
            with self.subTest(key=key):
                h = got.get(key)
                self.assertIsNotNone(h, hc.summary(self.reqs))
                # at least the server's latency (less the shim's clock-reading slack), at
                # most what the client measured around the same calls
                least = LATENCY[key[0]] - hc.IO_SLACK
                self.assertGreaterEqual(h.sum, len(elapsed) * least)
                self.assertLessEqual(h.sum, sum(elapsed) + 0.001)
                if h.min is not None:
                    self.assertGreaterEqual(h.min, least)

    def test_attributes(self):
        pts = hc.latest(self.reqs, hc.CLIENT_DURATION)
        self.assertTrue(pts, hc.summary(self.reqs))
        for _, _, p in pts:
            a = attrs(p)
            self.assertEqual(a.get(hc.SERVER_ADDRESS), "127.0.0.1", a)
            self.assertEqual(a.get(hc.SERVER_PORT), self.port[a.get(hc.DEST)], a)
            self.assertEqual(a.get(hc.VERSION), "1.1", a)
            if a.get(hc.STATUS, 0) >= 500:
                self.assertEqual(a.get(hc.ERROR), str(a[hc.STATUS]), a)
            elif a.get(hc.STATUS, 0) < 400:
                self.assertNotIn(hc.ERROR, a)
            # (4xx: whether a client reports error.type for them is not checked)

    def test_no_server_data_and_not_the_exporter(self):
        self.assertEqual(hc.points_in(self.reqs, hc.SERVER_DURATION), [])
        ports = hc.attribute_values(self.reqs, hc.CLIENT_DURATION, hc.SERVER_PORT)
        self.assertNotIn(self.sink.port, ports, "the shim's own export requests were counted")

    def test_connections_still_counted(self):
        got = hc.values_by(self.reqs, hc.CONNECTS, hc.DEST)
        self.assertEqual(set(got), {("fast",), ("slow",), ("external",)})
        for v in got.values():
            self.assertGreaterEqual(v, 1)


class RequestsClient(ClientScenario, unittest.TestCase):
    LIB = "requests"


class AiohttpClient(ClientScenario, unittest.TestCase):
    LIB = "aiohttp"


# Debian's curl hangs at start-up under a preloaded sanitizer runtime (see test_victoria.py).
@unittest.skipIf(os.environ.get("NL_SANITIZER_RUNTIME"), "curl hangs under a preloaded sanitizer runtime alone")
class CurlClient(ClientScenario, unittest.TestCase):
    LIB = "curl"

    @classmethod
    def run_client(cls, env):
        """One curl for the whole plan (`--next` between requests: one connection
        cache, so connections are reused); -w prints each status and time_total."""
        args = [hc.CURL]
        for i, r in enumerate(cls.plan):
            if i:
                args.append("--next")
            args += ["-sS", "-o", "/dev/null", "-w", "%{http_code} %{time_total}\\n"]
            if r["method"] == "POST":
                args += ["--data-binary", r["body"]]
            args.append(r["url"])
        p = hc.harness.run(args, env)
        results = []
        if p.returncode == 0:
            for r, line in zip(cls.plan, p.stdout.split("\n")):
                status, elapsed = line.split()
                results.append({"url": r["url"], "method": r["method"], "status": int(status),
                                "elapsed": float(elapsed)})
        return p, results



class FailedDup(unittest.TestCase):
    """dup2 and dup3 over a followed connection that fail (an old fd that is
    not open: EBADF) leave the connection as it was: it is still followed,
    and its requests after the failed calls are counted."""

    CLIENT = r"""
import errno, http.client, os, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
def get():
    c.request("GET", "/ok")
    return c.getresponse().read()
get()
closed = os.open("/dev/null", os.O_RDONLY)
os.close(closed)
for inheritable in (True, False):   # dup2, then dup3 (O_CLOEXEC)
    try:
        os.dup2(closed, c.sock.fileno(), inheritable=inheritable)
    except OSError as e:
        assert e.errno == errno.EBADF, e
    else:
        raise SystemExit("dup2 of a closed fd succeeded")
    get()
print(c.sock.fileno())
"""

    def test_the_connection_stays_followed(self):
        sink = harness.start_sink(self)
        srv = PlainServers([0.0])
        self.addCleanup(srv.close)
        env = hc.shim_env(sink.url, OTEL_SERVICE_NAME="client-dup")
        p = hc.harness.run([hc.PYTHON, "-c", self.CLIENT, str(srv.ports[0])], env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        got = hc.counts_by(hc.all_requests(sink), hc.CLIENT_DURATION, hc.METHOD, hc.STATUS)
        self.assertEqual(got, {("GET", 200): 3})

if __name__ == "__main__":
    unittest.main(verbosity=2)
