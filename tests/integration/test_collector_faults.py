# SPDX-License-Identifier: Apache-2.0
"""A collector that fails in every way an operator has seen: the program's
output, exit status and exit time stay as without the shim, each distinct
problem is reported once, memory stays bounded during an outage, and
cumulative values catch up when the collector comes back."""
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

CONNECTS = "gym.http.connection_pool.connect_total"
STEADY = os.path.join(harness.BIN, "steady_client")

# The exit flush failed; the segment stays for another process to deliver.
KEPT = "; they are kept, for the next shim process to deliver"

# How much longer than its own run plus the exit flush's 500 ms a program may
# take to end. A program whose exit waited for an answer that does not come
# would wait for the request's timeout (OTEL_EXPORTER_OTLP_TIMEOUT, 10 s);
# a loaded machine adds a fraction of a second. Between the two, with room
# on both sides.
EXIT_SLACK = 5.0


class CollectorFaults(harness.ShimTestCase):

    def steady(self, url, interval_ms=20, duration_ms=600, export_ms=100, **extra):
        # Warnings on the program's stderr, to count them (by default a
        # process whose stderr is not a terminal gets none).
        extra.setdefault("NEMOLENS_LOG_PATH", "stderr")
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=url, OTEL_METRIC_EXPORT_INTERVAL=export_ms,
                               **extra)
        t0 = time.monotonic()
        p = harness.run([STEADY, str(self.listener.port), str(interval_ms), str(duration_ms)], env)
        elapsed = time.monotonic() - t0
        self.assertEqual(p.returncode, 0, p.stderr)
        return int(p.stdout), p.stderr.splitlines(), elapsed

    def final_total(self):
        pts = self.sink.points(CONNECTS)
        return pts[-1][2].as_int if pts else None

    def test_500_is_not_retried_and_reported_once(self):
        self.sink.script[:] = [(500, {}, b"")] * 1000
        n, warnings, _ = self.steady(self.sink.url)
        self.assertEqual(len(warnings), 1, warnings)
        self.assertIn("500", warnings[0])
        attempts = len(self.sink.raw)
        self.assertGreaterEqual(attempts, 3)
        self.assertLessEqual(attempts, 600 // 100 + 2, "500 must not be retried")

    def test_400_reported_once_not_per_export(self):
        self.sink.script[:] = [(400, {}, b"bad")] * 1000
        _, warnings, _ = self.steady(self.sink.url)
        self.assertEqual(len(warnings), 1, warnings)

    def test_503_with_retry_after_then_success(self):
        self.sink.script[:] = [(503, {"Retry-After": "1"}, b"")]
        n, warnings, _ = self.steady(self.sink.url, duration_ms=2000, export_ms=300)
        times = [t for t in self.sink.arrivals]
        self.assertGreaterEqual(len(times), 2)
        self.assertGreaterEqual(times[1] - times[0], 0.95, "Retry-After: 1 not honoured")
        self.assertEqual(self.final_total(), n)

    def test_429_is_retried(self):
        self.sink.script[:] = [(429, {}, b"")] * 2
        # Two refusals, their retries, and a success: 2 s leave room for
        # them on a loaded machine, where 800 ms did not always.
        n, _, _ = self.steady(self.sink.url, duration_ms=2000, export_ms=200)
        self.assertEqual(self.final_total(), n)
        self.assertGreaterEqual(len(self.sink.raw), 3)

    def test_outage_then_recovery_loses_nothing(self):
        self.sink.script[:] = [(503, {}, b"")] * 15
        n, warnings, _ = self.steady(self.sink.url, duration_ms=2500, export_ms=100)
        self.assertEqual(self.final_total(), n)
        self.assertLessEqual(len(warnings), 2, warnings)

    def test_slow_collector_does_not_slow_the_program(self):
        # Every answer takes 15 s, longer than a request may wait: exports
        # overlap the program's whole life.
        self.sink.script[:] = [(200, {}, b"", 15)] * 20
        n, warnings, elapsed = self.steady(self.sink.url, interval_ms=10, duration_ms=1000, export_ms=100)
        # The exit flush gives up on the slow answer, and says so once.
        self.assertLessEqual(len(warnings), 1, warnings)
        self.assertTrue(all("timed out" in w for w in warnings), warnings)
        # About 100 connects in its 1 s; a busy machine halves that, a loop
        # that waited for the collector's answer would make one or two.
        self.assertGreater(n, 10, "the program's own loop was slowed down")
        # exit waits for at most the exit flush deadline (500 ms) beyond the program's 1 s
        self.assertLess(elapsed, 1.0 + 0.5 + EXIT_SLACK)

    def test_200_with_garbage_body_is_success(self):
        self.sink.script[:] = [(200, {"Content-Type": "application/x-protobuf"}, b"\xff\x00garbage\x13")] * 1000
        n, warnings, _ = self.steady(self.sink.url, duration_ms=300)
        self.assertEqual(warnings, [])
        self.assertEqual(self.final_total(), n)

    @unittest.skipIf(os.environ.get("NL_SANITIZER_RUNTIME"),
                     "a sanitizer's allocator quarantines freed memory: RSS is not the shim's")
    def test_memory_bounded_during_long_outage(self):
        dead = f"http://127.0.0.1:{harness.refused_port()}/v1/metrics"
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=dead, OTEL_METRIC_EXPORT_INTERVAL=20,
                               NEMOLENS_LOG_LEVEL="none")
        p = subprocess.Popen([STEADY, str(self.listener.port), "2", "4000"], env=env, stdout=subprocess.PIPE)
        rss = []
        try:
            for _ in range(7):
                time.sleep(0.5)
                with open(f"/proc/{p.pid}/status") as f:
                    rss += [int(l.split()[1]) for l in f if l.startswith("VmRSS:")]
        finally:
            p.wait(timeout=30)
        self.assertEqual(p.returncode, 0)
        growth_kb = rss[-1] - rss[1]
        print(f"\n  RSS during outage: {rss} kB", file=sys.stderr)
        self.assertLess(growth_kb, 512, f"RSS grew by {growth_kb} kB during the outage")

    def test_tls_to_plain_http_port(self):
        url = f"https://127.0.0.1:{self.sink.port}/v1/metrics"
        _, warnings, elapsed = self.steady(url, duration_ms=400)
        # Once from the periodic export (retried next time), once from the
        # exit flush (kept for another process): two different facts.
        self.assertEqual(len([w for w in warnings if w.endswith(KEPT)]), 1, warnings)
        self.assertLessEqual(len(warnings), 2, warnings)
        self.assertLess(elapsed, 0.4 + 0.5 + EXIT_SLACK)

    @unittest.skipUnless(shutil.which("openssl"), "openssl CLI not installed")
    def test_plain_http_to_tls_port(self):
        with tempfile.TemporaryDirectory() as d:
            key, cert = os.path.join(d, "k.pem"), os.path.join(d, "c.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                            "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            srv = socket.socket()
            srv.bind(("127.0.0.1", 0))
            srv.listen(16)
            stop = threading.Event()

            def serve():
                srv.settimeout(0.1)
                while not stop.is_set():
                    try:
                        c, _ = srv.accept()
                    except (socket.timeout, OSError):
                        continue
                    try:
                        ctx.wrap_socket(c, server_side=True).close()
                    except (ssl.SSLError, OSError):
                        c.close()

            t = threading.Thread(target=serve, daemon=True)
            t.start()
            try:
                _, warnings, elapsed = self.steady(f"http://127.0.0.1:{srv.getsockname()[1]}/v1/metrics",
                                                   duration_ms=400)
            finally:
                stop.set()
                t.join()
                srv.close()
        self.assertLessEqual(len([w for w in warnings if w.endswith(KEPT)]), 1, warnings)
        self.assertLessEqual(len(warnings), 2, warnings)
        self.assertLess(elapsed, 0.4 + 0.5 + EXIT_SLACK)


if __name__ == "__main__":
    unittest.main(verbosity=2)
