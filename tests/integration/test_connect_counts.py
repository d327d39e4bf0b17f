# SPDX-License-Identifier: Apache-2.0
"""A client with a known set of connection attempts runs under the shim; the
OTLP it exports, decoded by the official Python bindings, must show exactly
those attempts per destination and exactly the queued acquisitions per outcome."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402

BOUNDS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30000]
DEST = "nemo.gym.http.destination.server.name"
OUTCOME = "nemo.gym.http.connection_pool.queue_outcome"
CONSTRAINT = "nemo.gym.http.connection_pool.queue_constraint"
ROUNDS = 7


class ConnectCounts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        cls.ok = harness.AcceptingListener()
        cls.refused = harness.refused_port()
        cls.full = harness.FullListener()
        env = harness.shim_env(
            OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=cls.sink.url,
            NEMOLENS_DESTINATIONS=f"alpha=127.0.0.1:{cls.ok.port},beta=127.0.0.1:{cls.refused},"
                                  f"gamma=*:{cls.full.port}",
        )
        client = os.path.join(harness.BIN, "connect_client")
        cls.proc = harness.run([client, str(cls.ok.port), str(cls.refused), str(cls.full.port), str(ROUNDS)], env)
        cls.truth = json.loads(cls.proc.stdout) if cls.proc.returncode == 0 else None

    @classmethod
    def tearDownClass(cls):
        cls.ok.close()
        cls.full.close()

    def test_client_ran(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        self.assertEqual(self.proc.stderr, "", "the shim printed warnings")

    def test_connect_total_per_destination(self):
        pts = self.sink.latest_by_instance("gym.http.connection_pool.connect_total")
        got = {attrs(p)[DEST]: p.as_int for _, _, p in pts}
        self.assertEqual(got, {
            "alpha": self.truth["connects"]["ok"],
            "beta": self.truth["connects"]["refused"],
            "gamma": self.truth["connects"]["full"],
        })
        for _, m, p in pts:
            self.assertEqual(m.unit, "{connection}")
            self.assertTrue(m.sum.is_monotonic)
            self.assertEqual(m.sum.aggregation_temporality, 2)  # cumulative
            self.assertEqual(list(attrs(p)), [DEST])

    def test_queued_acquisitions_per_outcome(self):
        pts = self.sink.latest_by_instance("gym.http.connection_pool.queue_duration_ms")
        got = {(attrs(p)[DEST], attrs(p)[OUTCOME]): p.count for _, _, p in pts}
        q = self.truth["queued"]
        self.assertEqual(got, {
            ("alpha", "ok"): q["ok"],
            ("beta", "abandoned"): q["abandoned_refused"],
            ("gamma", "abandoned"): q["abandoned_full"],
        })
        for _, m, p in pts:
            self.assertEqual(m.unit, "ms")
            self.assertEqual(list(p.explicit_bounds), BOUNDS)
            self.assertEqual(sum(p.bucket_counts), p.count)
            self.assertEqual(attrs(p)[CONSTRAINT], "unknown")
            self.assertTrue(p.HasField("min") and p.HasField("max"))
            self.assertLessEqual(p.min, p.max)

    def test_abandoned_wait_covers_the_time_before_close(self):
        # The client polls 20 ms before closing a connect that never completes.
        pts = self.sink.latest_by_instance("gym.http.connection_pool.queue_duration_ms")
        gamma = [p for _, _, p in pts if attrs(p)[DEST] == "gamma"]
        self.assertEqual(len(gamma), 1)
        self.assertGreaterEqual(gamma[0].min, 20.0)
        self.assertEqual(sum(gamma[0].bucket_counts[:9]), 0)  # nothing at or below 10 ms

    def test_resource(self):
        res, _, _ = self.sink.points("gym.http.connection_pool.connect_total")[0]
        self.assertEqual(res["process.executable.name"], "connect_client")
        self.assertEqual(res["service.name"], "connect_client")
        self.assertEqual(res["nemo.gym.server.name"], "connect_client")
        self.assertEqual(res["process.pid"] > 0, True)
        self.assertEqual(len(res["service.instance.id"]), 36)
        self.assertEqual(res["telemetry.sdk.name"], "nemolens-preload")



class SpliceSettles(unittest.TestCase):
    """splice() with a connecting socket at either end settles its wait as
    any read or write does, whatever it returns: here a socket spliced into
    a pipe, which reads 0 bytes (the listener closes it at once). The
    client holds the socket a second before closing it: a wait settled
    only at the close would span it."""

    CLIENT = r"""
import os, select, socket, sys, time
r, w = os.pipe()
s = socket.socket()
s.setblocking(False)
assert s.connect_ex(("127.0.0.1", int(sys.argv[1]))) in (115, 0)   # EINPROGRESS
select.select([s], [], [], 10)
n = os.splice(s.fileno(), w, 16)
time.sleep(1.0)
s.close()
print(n)
"""

    def test_the_wait_ends_at_the_splice(self):
        sink = harness.start_sink(self)
        ok = harness.AcceptingListener()
        self.addCleanup(ok.close)
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=sink.url,
                               NEMOLENS_DESTINATIONS=f"alpha=127.0.0.1:{ok.port}")
        p = harness.run([harness.PYTHON, "-c", self.CLIENT, str(ok.port)], env)
        self.assertEqual((p.returncode, p.stderr, p.stdout.strip()), (0, "", "0"))
        pts = sink.latest_by_instance("gym.http.connection_pool.queue_duration_ms")
        got = {(attrs(q)[DEST], attrs(q)[OUTCOME]): q for _, _, q in pts}
        self.assertEqual(list(got), [("alpha", "ok")])
        self.assertEqual(got[("alpha", "ok")].count, 1)
        self.assertLess(got[("alpha", "ok")].sum, 500.0)


class CloseOfAPendingConnect(unittest.TestCase):
    """A connect refused while pending, its fd duplicated and the original
    closed: the shim learns the outcome at the close (abandoned) without
    taking the socket's error from the duplicate, which still reads
    ECONNREFUSED as it does without the shim."""

    CLIENT = r"""
import os, socket, sys, time
s = socket.socket()
s.setblocking(False)
rc = s.connect_ex(("127.0.0.1", int(sys.argv[1])))
d = os.dup(s.fileno())
time.sleep(0.05)
s.close()
print(rc, socket.socket(fileno=d).getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))
"""

    def test_the_duplicate_keeps_the_error(self):
        sink = harness.start_sink(self)
        refused = harness.refused_port()
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=sink.url,
                               NEMOLENS_DESTINATIONS=f"beta=127.0.0.1:{refused}")
        p = harness.run([harness.PYTHON, "-c", self.CLIENT, str(refused)], env)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertEqual(p.stdout.split(), ["115", "111"])   # EINPROGRESS, then ECONNREFUSED
        pts = sink.latest_by_instance("gym.http.connection_pool.queue_duration_ms")
        self.assertEqual({(attrs(q)[DEST], attrs(q)[OUTCOME]): q.count for _, _, q in pts}, {("beta", "abandoned"): 1})

if __name__ == "__main__":
    unittest.main(verbosity=2)
