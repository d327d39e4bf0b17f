# SPDX-License-Identifier: Apache-2.0
"""End to end through a real backend: programs run under the shim export to a
private VictoriaMetrics (OTLP/HTTP protobuf), and PromQL over what it stored
must show exactly the connections the test itself counted.

(a) Debian's curl, run N times against a local HTTP server named by a hostname
    rule; (b) an aiohttp client (connector limit=2, force_close) against a
    uvicorn/FastAPI server on two ports named by IP rules, whose accepted
    connections the server counts itself.

How VictoriaMetrics 1.112 stores our metrics (see victoria.py): names keep
their dots and get no unit suffix; the histogram becomes `..._bucket` (`le`),
`..._count` and `..._sum`; attributes of points and resources become labels
under their own dotted names (PromQL accepts them unquoted: `by (a.b.c)`).
"""
import http.server
import ipaddress
import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from victoria import Victoria  # noqa: E402

CONNECT = "gym.http.connection_pool.connect_total"
QUEUE = "gym.http.connection_pool.queue_duration_ms"
DEST = "nemo.gym.http.destination.server.name"
OUTCOME = "nemo.gym.http.connection_pool.queue_outcome"
CONSTRAINT = "nemo.gym.http.connection_pool.queue_constraint"
BOUNDS = ["0.01", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "25", "50", "100", "250", "500",
          "1000", "5000", "30000", "+Inf"]
CURL = "/usr/bin/curl"
CURL_RUNS = 5
# Each curl run lasts longer than a few export intervals, so the shim's periodic
# export (not only the one at exit) happens during the run: see
# test_curl_short_run_survives_exit for why that matters.
CURL_RESPONSE_DELAY = 0.4
CURL_INTERVAL_MS = 100
DEMO = os.path.join(harness.SRC, "scripts", "demo")
AIO_REQUESTS = 40          # round-robin over alpha and beta
AIO_LIMIT = 2


def loopback_hostname():
    """A hostname other than "localhost" that resolves (getaddrinfo) to a loopback
    IPv4 address, and that address; curl resolves "localhost" itself, without
    getaddrinfo, so a "localhost" rule cannot name curl's connections."""
    for name in (socket.gethostname(), "localhost.localdomain"):
        try:
            infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_STREAM)
        except OSError:
            continue
        addrs = {i[4][0] for i in infos}
        if len(addrs) == 1 and ipaddress.ip_address(next(iter(addrs))).is_loopback:
            return name, next(iter(addrs))
    return None, "127.0.0.1"


class CountingHTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr, handler):
        self.accepted = 0
        super().__init__(addr, handler)

    def get_request(self):
        conn = super().get_request()
        self.accepted += 1
        return conn


def web_server(address, delay):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            time.sleep(delay)
            body = b"ok\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = CountingHTTPServer((address, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def by(vec, *labels):
    return {tuple(r["metric"].get(label) for label in labels): float(r["value"][1]) for r in vec}


class Victoria_(unittest.TestCase):
    """Shared: one VictoriaMetrics for the whole class."""

    @classmethod
    def setUpClass(cls):
        cls.vm = Victoria()

    @classmethod
    def tearDownClass(cls):
        cls.vm.stop()


# Debian's curl 7.88 hangs in setlocale() at start-up when a sanitizer runtime is
# preloaded, with or without the shim: nothing to learn about the shim there.
@unittest.skipIf(os.environ.get("NL_SANITIZER_RUNTIME"), "curl hangs under a preloaded sanitizer runtime alone")
class CurlToVictoria(Victoria_):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.host, address = loopback_hostname()
        cls.server = web_server(address, CURL_RESPONSE_DELAY)
        port = cls.server.server_address[1]
        rule_host = cls.host or address
        env = harness.shim_env(
            OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=cls.vm.otlp_url,
            OTEL_METRIC_EXPORT_INTERVAL=CURL_INTERVAL_MS,
            NEMOLENS_DESTINATIONS=f"web={rule_host}:{port}",
        )
        cls.runs = [harness.run([CURL, "-4", "-sS", "-o", "/dev/null", f"http://{rule_host}:{port}/"], env)
                    for _ in range(CURL_RUNS)]
        cls.accepted = cls.server.accepted

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()
        super().tearDownClass()

    def test_curl_ran(self):
        for r in self.runs:
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr, "", "curl or the shim printed something")
        self.assertEqual(self.accepted, CURL_RUNS, "curl -4 should connect exactly once per run")

    def test_hostname_rule_applies(self):
        if not self.host:
            self.skipTest("no hostname besides localhost resolves to loopback here (used an IP rule)")
        vec = self.vm.wait_for(f'sum by ({DEST}) ({{__name__="{CONNECT}",service.name="curl"}})',
                               lambda v: ("web",) in by(v, DEST), timeout=20)
        self.assertEqual(set(by(vec, DEST)), {("web",)}, "curl's connects were not all named 'web'")

    def test_connect_total_equals_connects(self):
        q = f'sum({{__name__="{CONNECT}", {DEST}="web"}})'
        vec = self.vm.wait_for(q, lambda v: v and float(v[0]["value"][1]) >= self.accepted, timeout=20)
        self.assertEqual(by(vec), {(): float(self.accepted)})
        # one series per curl process
        vec = self.vm.query(f'count({{__name__="{CONNECT}", {DEST}="web"}})')
        self.assertEqual(by(vec), {(): float(CURL_RUNS)})

    def test_queue_histogram(self):
        q = f'sum by ({OUTCOME}, {CONSTRAINT}) ({{__name__="{QUEUE}_count", {DEST}="web"}})'
        vec = self.vm.wait_for(q, lambda v: sum(by(v).values()) >= CURL_RUNS, timeout=20)
        # curl's connects are non-blocking: each one is a queued acquisition that succeeded
        self.assertEqual(by(vec, OUTCOME, CONSTRAINT), {("ok", "unknown"): float(CURL_RUNS)})
        vec = self.vm.query(f'sum by (le) ({{__name__="{QUEUE}_bucket", {DEST}="web"}})')
        buckets = by(vec, "le")
        self.assertEqual(sorted(b for (b,) in buckets), sorted(BOUNDS))
        self.assertEqual(buckets[("+Inf",)], float(CURL_RUNS))
        counts = [buckets[(b,)] for b in BOUNDS]
        self.assertEqual(counts, sorted(counts), "bucket series are not cumulative")
        vec = self.vm.query(f'sum({{__name__="{QUEUE}_sum", {DEST}="web"}})')
        self.assertEqual(len(vec), 1)
        self.assertGreater(float(vec[0]["value"][1]), 0.0)

    def test_names_and_resource_labels(self):
        self.vm.wait_for(f'{{__name__="{QUEUE}_count", {DEST}="web"}}', bool, timeout=20)
        names = set(self.vm.metric_names())
        self.assertTrue({CONNECT, QUEUE + "_bucket", QUEUE + "_count", QUEUE + "_sum"} <= names, names)
        vec = self.vm.query(f'{{__name__="{CONNECT}", {DEST}="web"}}')
        self.assertEqual(len(vec), CURL_RUNS)
        for r in vec:
            m = r["metric"]
            self.assertEqual(m.get("service.name"), "curl", m)
            self.assertEqual(m.get("process.executable.name"), "curl", m)
            self.assertEqual(m.get("telemetry.sdk.name"), "nemolens-preload", m)
            self.assertNotIn("job", m)
            self.assertNotIn("instance", m)
        self.assertEqual(len({r["metric"]["service.instance.id"] for r in vec}), CURL_RUNS)
        self.assertEqual(len({r["metric"]["process.pid"] for r in vec}), CURL_RUNS)

    def test_curl_short_run_survives_exit(self):
        """A short run exports only at exit, after curl set up OpenSSL (which
        registers its own atexit cleanup): the exit flush must run before that
        cleanup, or libcurl crashes inside the cleaned-up TLS library."""
        server = web_server("127.0.0.1", 0)
        try:
            port = server.server_address[1]
            env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.vm.otlp_url,
                                   NEMOLENS_DESTINATIONS=f"quick=127.0.0.1:{port}",
                                   OTEL_SERVICE_NAME="curl-short")
            r = harness.run([CURL, "-4", "-sS", "-o", "/dev/null", f"http://127.0.0.1:{port}/"], env)
        finally:
            server.shutdown()
            server.server_close()
        self.assertEqual(r.returncode, 0, f"curl under the shim exited with {r.returncode}: {r.stderr}")
        vec = self.vm.wait_for(f'sum({{__name__="{CONNECT}", {DEST}="quick"}})', bool, timeout=20)
        self.assertEqual(by(vec), {(): 1.0})


class AiohttpToVictoria(Victoria_):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.server = subprocess.Popen([harness.PYTHON, os.path.join(DEMO, "server.py"), "--ports", "2",
                                       "--latency-ms", "0,5"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = cls.server.stdout.readline()
            cls.info = json.loads(line)
        except ValueError:
            cls.server.kill()
            raise RuntimeError(f"server did not start: {cls.server.stderr.read()}")
        alpha, beta = cls.info["ports"]
        env = harness.shim_env(
            OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=cls.vm.otlp_url,
            OTEL_METRIC_EXPORT_INTERVAL=500,
            NEMOLENS_DESTINATIONS=f"alpha=127.0.0.1:{alpha},beta=127.0.0.1:{beta}",
        )
        cls.proc = harness.run([harness.PYTHON, os.path.join(DEMO, "client.py"),
                                "--target", f"alpha=http://127.0.0.1:{alpha}/v1/work",
                                "--target", f"beta=http://127.0.0.1:{beta}/v1/work",
                                "--requests", str(AIO_REQUESTS), "--limit", str(AIO_LIMIT),
                                "--concurrency", "16", "--force-close"], env, timeout=120)
        cls.result = json.loads(cls.proc.stdout) if cls.proc.returncode == 0 else None
        with urllib.request.urlopen(f"http://127.0.0.1:{cls.info['admin']}/stats", timeout=10) as r:
            stats = json.load(r)
        cls.accepted = {"alpha": stats.get(str(alpha), 0), "beta": stats.get(str(beta), 0)}

    @classmethod
    def tearDownClass(cls):
        cls.server.terminate()
        try:
            cls.server.wait(10)
        except subprocess.TimeoutExpired:
            cls.server.kill()
            cls.server.wait()
        cls.server.stdout.close()
        cls.server.stderr.close()
        super().tearDownClass()

    def test_client_ran(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr + self.proc.stdout)
        self.assertEqual(self.proc.stderr, "", "the client or the shim printed something")
        half = AIO_REQUESTS // 2
        # The client also reports the pool waits it saw itself ("pool"): the
        # adapter's tests check those; here only the requests count.
        self.assertEqual({k: self.result.get(k) for k in ("ok", "failed")},
                         {"ok": {"alpha": half, "beta": half}, "failed": {}})
        # force_close: a new connection per request
        self.assertEqual(self.accepted, {"alpha": half, "beta": half})

    def test_connect_total_equals_server_accepted(self):
        q = f'sum by ({DEST}) ({{__name__="{CONNECT}", {DEST}=~"alpha|beta"}})'
        want = {(k,): float(v) for k, v in self.accepted.items()}
        vec = self.vm.wait_for(q, lambda v: by(v, DEST) == want, timeout=20)
        self.assertEqual(by(vec, DEST), want)

    def test_queue_histogram_present_and_bounded(self):
        q = f'sum by ({DEST}, {OUTCOME}) ({{__name__="{QUEUE}_count", {DEST}=~"alpha|beta"}})'
        vec = self.vm.wait_for(q, lambda v: len(v) >= 2, timeout=20)
        got = by(vec, DEST, OUTCOME)
        self.assertEqual(set(got), {("alpha", "ok"), ("beta", "ok")}, got)
        for (dest, _), n in got.items():
            self.assertGreater(n, 0)
            self.assertLessEqual(n, self.accepted[dest])

    def test_resource_labels(self):
        vec = self.vm.wait_for(f'{{__name__="{CONNECT}", {DEST}="alpha"}}', bool, timeout=20)
        self.assertEqual(len(vec), 1)
        m = vec[0]["metric"]
        self.assertEqual(m.get("service.name"), "python3", m)
        self.assertEqual(m.get("telemetry.sdk.name"), "nemolens-preload", m)


if __name__ == "__main__":
    unittest.main(verbosity=2)
