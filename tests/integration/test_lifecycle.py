# SPDX-License-Identifier: Apache-2.0
"""Lifecycle: short-lived processes export at exit, periodic export keeps one
start time, disabled configurations export nothing, and a dead or blackholed
collector changes neither the program's output nor (beyond a bound) its exit time."""
import json
import os
import socket
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402

CONNECTS = "gym.http.connection_pool.connect_total"
PROG = os.path.join(harness.BIN, "short_lived")


# How much later than without the shim a program may end when the collector
# is down or never answers: the exit flush takes at most 500 ms, a wait for the
# answer would last the request's timeout (10 s) or for ever, and a loaded
# machine adds a fraction of a second. Between the two, with room on both sides.
EXIT_DELAY_S = 5.0


def timed(args, env):
    t0 = time.monotonic()
    p = harness.run(args, env)
    return p, time.monotonic() - t0


class Lifecycle(harness.ShimTestCase):

    def args(self, n=4, ms=50):
        return [PROG, str(self.listener.port), str(n), str(ms)]

    def baseline(self, n=4, ms=50):
        return timed(self.args(n, ms), harness.plain_env())

    def test_50ms_process_exports_at_exit(self):
        p, _ = timed(self.args(4, 50), harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url,
                                                         NEMOLENS_DESTINATIONS=f"srv=*:{self.listener.port}"))
        self.assertEqual(p.returncode, 3)
        pts = self.sink.points(CONNECTS)
        self.assertEqual(len(pts), 1)
        self.assertEqual(attrs(pts[0][2]), {"nemo.gym.http.destination.server.name": "srv"})
        self.assertEqual(pts[0][2].as_int, 4)

    def test_periodic_exports_are_cumulative_with_one_start_time(self):
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url, OTEL_METRIC_EXPORT_INTERVAL=150)
        p, _ = timed(self.args(3, 800), env)
        self.assertEqual(p.returncode, 3)
        pts = [pt for _, _, pt in self.sink.points(CONNECTS)]
        self.assertGreaterEqual(len(pts), 3, "expected periodic exports plus one at exit")
        self.assertEqual({pt.start_time_unix_nano for pt in pts}.__len__(), 1)
        self.assertEqual([pt.as_int for pt in pts], [3] * len(pts))
        times = [pt.time_unix_nano for pt in pts]
        self.assertEqual(times, sorted(times))
        self.assertLess(pts[0].start_time_unix_nano, pts[0].time_unix_nano)

    def test_delta_temporality(self):
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url, OTEL_METRIC_EXPORT_INTERVAL=150,
                               OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE="delta")
        p, _ = timed(self.args(5, 500), env)
        self.assertEqual(p.returncode, 3)
        pts = self.sink.points(CONNECTS)
        self.assertGreaterEqual(len(pts), 1)
        self.assertEqual(sum(pt.as_int for _, _, pt in pts), 5)
        for _, m, _ in pts:
            self.assertEqual(m.sum.aggregation_temporality, 1)  # delta

    def test_disabled_configurations_export_nothing_and_change_nothing(self):
        base, _ = self.baseline()
        for extra in ({"OTEL_SDK_DISABLED": "true"}, {"OTEL_METRICS_EXPORTER": "none"},
                      {"NEMOLENS_ENABLED": "false"}, {"NEMOLENS_METRICS_ENABLED": "false"}):
            with self.subTest(**extra):
                p, _ = timed(self.args(), harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url,
                                                           **extra))
                self.assertEqual((p.returncode, p.stdout, p.stderr), (base.returncode, base.stdout, base.stderr))
                self.assertEqual(self.sink.raw, [])

    def test_dead_collector_changes_nothing(self):
        dead = harness.refused_port()
        base, base_t = self.baseline()
        p, t = timed(self.args(), harness.shim_env(
            OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=f"http://127.0.0.1:{dead}/v1/metrics", NEMOLENS_LOG_PATH="stderr"))
        self.assertEqual((p.returncode, p.stdout), (base.returncode, base.stdout))
        # Asked for on stderr: the exit flush says, once, that another process delivers the values.
        self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
        self.assertRegex(p.stderr, r"^nemolens: exit: could not deliver this process's metrics to .*; "
                                   r"they are kept, for the next shim process to deliver\n$")
        self.assertLess(t - base_t, EXIT_DELAY_S)
        print(f"\n  exit delay, collector down: {1000 * (t - base_t):.0f} ms", file=sys.stderr)

    def test_blackhole_collector_exit_is_prompt(self):
        hole = socket.socket()
        hole.bind(("127.0.0.1", 0))
        hole.listen(16)   # accepts in the kernel, never answers
        try:
            url = f"http://127.0.0.1:{hole.getsockname()[1]}/v1/metrics"
            base, base_t = self.baseline()
            p, t = timed(self.args(), harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=url))
            self.assertEqual((p.returncode, p.stdout), (base.returncode, base.stdout))
            self.assertLess(t - base_t, EXIT_DELAY_S)
            print(f"\n  exit delay, blackholed collector: {1000 * (t - base_t):.0f} ms", file=sys.stderr)
        finally:
            hole.close()

    def test_console_exporter_writes_otlp_json_lines(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "metrics.jsonl")
            env = harness.shim_env(OTEL_METRICS_EXPORTER="console", NEMOLENS_CONSOLE_PATH=path,
                                   NEMOLENS_DESTINATIONS=f"srv=127.0.0.1:{self.listener.port}")
            p, _ = timed(self.args(2, 10), env)
            self.assertEqual(p.returncode, 3)
            with open(path) as f:
                lines = f.read().splitlines()
        self.assertEqual(len(lines), 1)
        doc = json.loads(lines[0])
        metrics = doc["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
        by_name = {m["name"]: m for m in metrics}
        point = by_name[CONNECTS]["sum"]["dataPoints"][0]
        self.assertEqual(point["asInt"], "2")
        self.assertEqual(point["attributes"][0]["value"]["stringValue"], "srv")
        self.assertEqual(doc["resourceMetrics"][0]["scopeMetrics"][0]["scope"]["name"], "nemo.lens")
        self.assertEqual(self.sink.raw, [])

    def test_malformed_variables_warn_once_and_still_export(self):
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url,
                               OTEL_METRIC_EXPORT_INTERVAL="soon", OTEL_EXPORTER_OTLP_COMPRESSION="zip",
                               OTEL_RESOURCE_ATTRIBUTES="a=%zz", NEMOLENS_LOG_PATH="stderr")
        p, _ = timed(self.args(1, 0), env)
        self.assertEqual(p.returncode, 3)
        warnings = p.stderr.splitlines()
        self.assertEqual(len(warnings), 3, p.stderr)
        self.assertTrue(all(w.startswith("nemolens: ") for w in warnings))
        self.assertEqual(self.sink.points(CONNECTS)[0][2].as_int, 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
