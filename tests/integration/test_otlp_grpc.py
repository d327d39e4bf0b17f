# SPDX-License-Identifier: Apache-2.0
"""OTLP/gRPC export against an independent receiver.

The receiver is grpcio serving the MetricsService that Debian generates
from the official OTLP proto files (otlp_grpc_sink.py). One workload runs
under the shim: a program that connects and forks children that connect,
and a Python client fetching from a local HTTP server, two routes, two
statuses.

- Its values over gRPC, plaintext and TLS, gzip or not, under plain
  LD_PRELOAD and under nemolens-run, equal those the same workload exports
  over OTLP/HTTP to the HTTP sink, and the connection counts equal the
  workload's own.
- A receiver that answers UNAVAILABLE, then OK, loses nothing.
- INVALID_ARGUMENT is not retried; RESOURCE_EXHAUSTED is retried only with a
  RetryInfo, not before its delay.
- A receiver that never answers holds no fork() back.
- Nothing of this reaches the program's output."""
import http.server
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import test_out_of_the_way as out_of_the_way  # noqa: E402
from otlp_grpc_sink import GrpcSink, retry_info_status  # noqa: E402
from otlp_sink import attrs  # noqa: E402

LAUNCHER = os.path.join(os.path.dirname(harness.SO), "nemolens-run")
QUIET = os.path.join(harness.BIN, "quiet_client")
STEADY = os.path.join(harness.BIN, "steady_client")
FETCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "http_apps", "fetch.py")
CONNECT = "gym.http.connection_pool.connect_total"
SANITIZED = bool(os.environ.get("NL_SANITIZER_RUNTIME"))
CONNECTS, FORKS = 3, 2           # the workload's connects: CONNECTS, then one per child
ROUTES = [("/ok", 3), ("/missing", 2)]


class Pages(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = b"fine\n" if self.path == "/ok" else b"no\n"
        self.send_response(200 if self.path == "/ok" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def totals(received):
    """What the workload recorded, whichever process recorded it: per
    (metric, attributes), a sum's value and a histogram's count, each
    process's last cumulative point, added over processes. Gauges (memory)
    and the values of time histograms are not the workload's to decide."""
    out, seen = {}, {}
    with received.lock:
        requests = list(received.requests)
    for req in requests:
        for rm in req.resource_metrics:
            res = {a.key: a.value for a in rm.resource.attributes}
            instance = str(res.get("service.instance.id"))
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    kind = m.WhichOneof("data")
                    if kind not in ("sum", "histogram"):
                        continue
                    for p in getattr(m, kind).data_points:
                        key = (m.name, tuple(sorted((k, str(v)) for k, v in attrs(p).items())))
                        value = p.count if kind == "histogram" else (p.as_int or p.as_double)
                        seen[(instance, key)] = value
    for (_, key), value in seen.items():
        out[key] = out.get(key, 0) + value
    return out


class GrpcExport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.listener = harness.AcceptingListener()
        cls.addClassCleanup(cls.listener.close)
        cls.pages = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
        cls.pages.daemon_threads = True
        threading.Thread(target=cls.pages.serve_forever, daemon=True).start()
        cls.addClassCleanup(cls.pages.server_close)
        cls.addClassCleanup(cls.pages.shutdown)
        cls.http_sink = harness.start_sink(cls)
        cls.tmp = tempfile.mkdtemp(prefix="nl-grpc-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.key, cls.cert = os.path.join(cls.tmp, "k.pem"), os.path.join(cls.tmp, "c.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", cls.key,
                        "-out", cls.cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
        cls.plain = GrpcSink()
        cls.addClassCleanup(cls.plain.close)
        cls.tls = GrpcSink(tls=(cls.key, cls.cert))
        cls.addClassCleanup(cls.tls.close)

    def setUp(self):
        for sink in (self.http_sink, self.plain, self.tls):
            sink.reset()
            sink.script.clear()
        harness.new_runtime_dir()

    # ---- the workload ---------------------------------------------------

    def workload(self, launcher, **settings):
        """Runs the workload under the shim with settings; its stdout as
        run without the shim is the test's to compare."""
        base = f"http://127.0.0.1:{self.pages.server_address[1]}"
        fetches = " ".join(f"{base}{route}" for route, n in ROUTES for _ in range(n))
        script = f'"{QUIET}" {self.listener.port} {CONNECTS} {FORKS} 2>&1; "{harness.PYTHON}" "{FETCH}" {fetches}'
        args = ["/bin/sh", "-c", script]
        settings.setdefault("NEMOLENS_DESTINATIONS", f"pages=127.0.0.1:{self.pages.server_address[1]},"
                            f"listener=127.0.0.1:{self.listener.port}")
        env = harness.shim_env(**settings)
        if launcher:
            env = harness.for_launcher(env)
            args = [LAUNCHER, "--"] + args
        p = harness.run(args, env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        plain = harness.run(["/bin/sh", "-c", script], harness.without_shim(env), timeout=60)
        self.assertEqual(p.stdout, plain.stdout, "the shim changed what the workload prints")
        self.assertEqual(p.stderr, plain.stderr)
        self.assertEqual(sorted(re.findall(r"^\d{3}$", p.stdout, re.M)),
                         sorted(["200"] * 3 + ["404"] * 2), p.stdout)
        return p

    def over_http(self, launcher):
        self.http_sink.reset()
        harness.new_runtime_dir()
        self.workload(launcher, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.http_sink.url)
        return totals(self.http_sink)

    def over_grpc(self, sink, launcher, **settings):
        sink.reset()
        harness.new_runtime_dir()
        self.workload(launcher, OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_EXPORTER_OTLP_ENDPOINT=sink.endpoint,
                      **settings)
        return totals(sink)

    def assert_workload(self, got):
        connects = sum(v for (name, a), v in got.items()
                       if name == CONNECT and ("nemo.gym.http.destination.server.name", "listener") in a)
        self.assertEqual(connects, CONNECTS + FORKS, got)

    # ---- the same values as OTLP/HTTP -----------------------------------

    def test_same_values_as_otlp_http(self):
        cases = [("plaintext", self.plain, {}),
                 ("tls", self.tls, {"OTEL_EXPORTER_OTLP_CERTIFICATE": self.cert}),
                 ("gzip", self.plain, {"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"})]
        for launcher in (False, True):
            want = self.over_http(launcher)
            self.assert_workload(want)
            for name, sink, settings in cases:
                with self.subTest(launcher=launcher, case=name):
                    got = self.over_grpc(sink, launcher, **settings)
                    self.assertEqual(got, want)
                    self.assertEqual({call[1] for call in sink.calls}, {grpc.StatusCode.OK})
                    # The HTTP/2 body is the gRPC message and its 5-byte
                    # prefix: the request itself, or gzip's version of it.
                    framed = [(int(md["content-length"]) - 5, size) for md, _, size, _ in sink.calls]
                    if name == "gzip":
                        self.assertTrue(all(sent != size for sent, size in framed), framed)
                    else:
                        self.assertTrue(all(sent == size for sent, size in framed), framed)

    # ---- faults ---------------------------------------------------------

    def steady(self, sink, duration_ms, interval_ms=200, launcher=False, **settings):
        """steady_client connecting every 20 ms for duration_ms, exporting
        every interval_ms; returns how many connects it made."""
        env = harness.shim_env(OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_EXPORTER_OTLP_ENDPOINT=sink.endpoint,
                               OTEL_METRIC_EXPORT_INTERVAL=interval_ms,
                               NEMOLENS_DESTINATIONS=f"listener=127.0.0.1:{self.listener.port}", **settings)
        args = [STEADY, str(self.listener.port), "20", str(duration_ms)]
        if launcher:
            env, args = harness.for_launcher(env), [LAUNCHER, "--"] + args
        p = harness.run(args, env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        return int(p.stdout)

    def delivered(self, sink):
        return sum(v for (name, _), v in totals(sink).items() if name == CONNECT)

    def test_unavailable_then_ok_loses_nothing(self):
        for launcher in (False, True):
            with self.subTest(launcher=launcher):
                self.setUp()
                self.plain.script = [{"code": grpc.StatusCode.UNAVAILABLE, "message": "busy"}] * 3
                made = self.steady(self.plain, 1200, launcher=launcher)
                codes = [call[1] for call in self.plain.calls]
                self.assertEqual(codes[:3], [grpc.StatusCode.UNAVAILABLE] * 3)
                self.assertIn(grpc.StatusCode.OK, codes)
                self.assertEqual(self.delivered(self.plain), made)

    def test_invalid_argument_is_not_retried(self):
        self.plain.script = [{"code": grpc.StatusCode.INVALID_ARGUMENT, "message": "no"}]
        made = self.steady(self.plain, 1000, interval_ms=600)
        arrivals = list(self.plain.arrivals)
        # A retry would follow within the backoff (50 to 100 ms); the next
        # call is the next export or the exit's, 400 ms or more later.
        self.assertGreaterEqual(len(arrivals), 2, arrivals)
        self.assertGreater(arrivals[1] - arrivals[0], 0.3, arrivals)
        # Cumulative: the next export carries everything.
        self.assertEqual(self.delivered(self.plain), made)

    def test_resource_exhausted_waits_for_its_retry_info(self):
        status = retry_info_status(grpc.StatusCode.RESOURCE_EXHAUSTED, "slow down", 0.35)
        self.plain.script = [{"code": grpc.StatusCode.RESOURCE_EXHAUSTED, "message": "slow down",
                              "details": status}]
        made = self.steady(self.plain, 1500, interval_ms=1000, OTEL_METRIC_EXPORT_TIMEOUT=900)
        arrivals = list(self.plain.arrivals)
        self.assertGreaterEqual(len(arrivals), 2, arrivals)
        gap = arrivals[1] - arrivals[0]
        self.assertGreaterEqual(gap, 0.35, arrivals)
        self.assertLess(gap, 0.9, "retried within the export, not at the next one")
        self.assertEqual(self.delivered(self.plain), made)

    def test_resource_exhausted_without_retry_info_is_not_retried(self):
        self.plain.script = [{"code": grpc.StatusCode.RESOURCE_EXHAUSTED, "message": "full"}]
        made = self.steady(self.plain, 1000, interval_ms=600)
        arrivals = list(self.plain.arrivals)
        self.assertGreaterEqual(len(arrivals), 2, arrivals)
        self.assertGreater(arrivals[1] - arrivals[0], 0.3, arrivals)
        self.assertEqual(self.delivered(self.plain), made)

    def test_one_connection_over_tls(self):
        """A process's exports share one HTTP/2 connection: the receiver
        sees every call from one client port."""
        made = self.steady(self.tls, 1200, OTEL_EXPORTER_OTLP_CERTIFICATE=self.cert)
        peers = [call[3] for call in self.tls.calls]
        self.assertGreaterEqual(len(peers), 4, peers)
        self.assertEqual(len(set(peers)), 1, peers)
        self.assertEqual(self.delivered(self.tls), made)

    def test_one_connection_in_cleartext_renewed_when_it_goes(self):
        """In cleartext too a process's exports share one connection (with
        Debian 12's libcurl as with a newer one); when the receiver goes
        and another takes its port, the exports go on over a new one, and
        the totals arrive whole."""
        first = GrpcSink()
        self.addCleanup(first.close)
        env = harness.shim_env(OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_EXPORTER_OTLP_ENDPOINT=first.endpoint,
                               OTEL_METRIC_EXPORT_INTERVAL=200,
                               NEMOLENS_DESTINATIONS=f"listener=127.0.0.1:{self.listener.port}")
        p = subprocess.Popen([STEADY, str(self.listener.port), "20", "2500"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        harness.wait_for(lambda: len(first.calls) >= 3, 20, "three exports", alive=p)
        first.close()
        second = GrpcSink(port=first.port)
        self.addCleanup(second.close)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(err, "")
        peers = [call[3] for call in first.calls]
        self.assertEqual(len(set(peers)), 1, peers)
        later = [call[3] for call in second.calls]
        self.assertGreaterEqual(len(later), 2, later)
        self.assertEqual(len(set(later)), 1, later)
        self.assertNotEqual(later[0], peers[0])
        self.assertEqual(self.delivered(second), int(out))

    def test_a_receiver_that_never_answers_holds_no_fork(self):
        n = 8
        self.plain.script = [{"delay": 20}] * 4
        env = harness.shim_env(OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_EXPORTER_OTLP_ENDPOINT=self.plain.endpoint,
                               OTEL_METRIC_EXPORT_INTERVAL=200)
        p = harness.run([harness.PYTHON, "-c", out_of_the_way.FORKS, str(self.listener.port), str(n), "0.6"], env,
                        timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        took = [float(t) for t in re.search(r"fork_ms (.*)\n", p.stdout).group(1).split()]
        self.assertGreaterEqual(len(self.plain.calls), 1, "an export was in flight")
        print(f"\n  fork() while a gRPC export waits on a silent receiver: median {statistics.median(took):.2f} ms, "
              f"max {max(took):.2f} ms", file=sys.stderr)
        if not SANITIZED:
            # Held back, a fork would wait for the call: 20 s, or the
            # export's timeout (10 s).
            self.assertLess(statistics.median(took), 1000)


if __name__ == "__main__":
    unittest.main(verbosity=2)
