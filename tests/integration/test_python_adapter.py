# SPDX-License-Identifier: Apache-2.0
"""The Python adapter: pool waits of aiohttp and httpx as NeMo Gym defines
them, from real clients under the real shim, checked at the OTLP sink
against the clients' own ground truth (aiohttp's trace signals; for httpx,
each request's time from its start to httpcore's first trace event)."""
import collections
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "py_adapter"))
import harness  # noqa: E402
from holding_server import HoldingServer  # noqa: E402
from otlp_sink import attrs  # noqa: E402

QUEUE = "gym.http.connection_pool.queue_duration_ms"
CONNECTS = "gym.http.connection_pool.connect_total"
OPENED = "nemolens.connection.opened"
DEST = "nemo.gym.http.destination.server.name"
OUTCOME = "nemo.gym.http.connection_pool.queue_outcome"
CONSTRAINT = "nemo.gym.http.connection_pool.queue_constraint"
APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "py_adapter")
# Debian 13's aiohttp 3.11 and httpx 0.28 / httpcore 1.0 (scripts/setup-deps.sh),
# run by Debian 12's interpreter in pure-Python mode.
TRIXIE = "/opt/nemolens-deps/python-trixie/usr/lib/python3/dist-packages"


def client_env(libs, **extra):
    env = harness.shim_env(**extra)
    if libs:
        env["PYTHONPATH"] = libs + ":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else libs
    return env


def queue_points(sink):
    """(destination, outcome, constraint) -> (count, sum) at the sink."""
    out = {}
    for _, _, p in sink.latest_by_instance(QUEUE):
        a = attrs(p)
        out[(a[DEST], a[OUTCOME], a[CONSTRAINT])] = (p.count, p.sum)
    return out


def connects(sink, name=None):
    return {attrs(p)[DEST]: p.as_int for _, _, p in sink.latest_by_instance(name or CONNECTS)}


class Aiohttp(unittest.TestCase):
    LIBS, VERSION, ENV = None, "3.8.", {}

    @classmethod
    def setUpClass(cls):
        harness.new_runtime_dir()
        cls.sink = harness.start_sink(cls)
        cls.servers = [HoldingServer() for _ in range(7)]
        a, b, c, d, e, f, g = ports = [str(s.port) for s in cls.servers]
        env = client_env(cls.LIBS, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=cls.sink.url, **cls.ENV,
                         NEMOLENS_DESTINATIONS=f"alpha=127.0.0.1:{a},beta=localhost:{b},gamma=127.0.0.1:{c},"
                                               f"delta=127.0.0.1:{e},epsilon=127.0.0.1:{f},zeta=127.0.0.1:{g}")
        cls.proc = harness.run([harness.PYTHON, os.path.join(APPS, "aiohttp_client.py")] + ports, env, timeout=120)
        cls.truth = json.loads(cls.proc.stdout) if cls.proc.returncode == 0 else None
        cls.got = queue_points(cls.sink)

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.close()

    def test_client_ran_quietly(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        self.assertEqual(self.proc.stderr, "")
        self.assertTrue(self.truth["version"].startswith(self.VERSION), self.truth["version"])

    def test_counts_and_sums_per_destination_outcome_constraint(self):
        truth = collections.defaultdict(lambda: [0, 0.0])
        for dest, outcome, constraint, ms in self.truth["samples"]:
            truth[(dest, outcome, constraint)][0] += 1
            truth[(dest, outcome, constraint)][1] += ms
        # The scenarios did saturate their pools as planned.
        self.assertEqual(truth[("alpha", "ok", "total")][0], 27)
        self.assertEqual(truth[("alpha", "ok", "per_host")][0], 18)
        self.assertEqual(truth[("beta", "ok", "per_host")][0], 18)
        self.assertEqual(truth[("gamma", "abandoned", "total")][0], 4)   # 2 timed out, 2 cancelled
        got = {k: v for k, v in self.got.items() if k[0] != "external"}
        self.assertEqual({k: v[0] for k, v in got.items()}, {k: v[0] for k, v in truth.items()})
        for k, (count, total) in got.items():
            self.assertAlmostEqual(total, truth[k][1], delta=0.1 * truth[k][1], msg=k)

    def test_abandoned_waits_last_until_the_timeout_or_cancellation(self):
        count, total = self.got[("gamma", "abandoned", "total")]
        # Two waits end at the 1 s timeout (which runs from the request's
        # start, a little before its wait), two at the cancellation, at
        # least 100 ms after they were seen queued.
        self.assertGreaterEqual(total, 2 * 500 + 2 * 100)

    def test_session_without_trace_configs(self):
        # limit=1 and 5 requests held 50 ms each: 4 waits of 50 to 200 ms.
        count, total = self.got[("external", "ok", "total")]
        self.assertEqual(count, 4)
        self.assertGreaterEqual(total, 50 + 100 + 150 + 200)

    def test_no_socket_level_queue_samples(self):
        self.assertEqual([k for k in self.got if k[2] == "unknown"], [])

    def test_connect_total_counts_acquisitions(self):
        # One per request, hop and retry, whether it reused a connection,
        # opened one, waited or gave up (NeMo Gym's connect_total).
        self.assertEqual(connects(self.sink), self.truth["requests"])
        self.assertEqual({d: self.truth["requests"][d] for d in ("delta", "epsilon", "zeta")},
                         {"delta": 2, "epsilon": 2, "zeta": 3})
        self.assertEqual(self.truth["requests"]["alpha"], 50)
        self.assertEqual(self.truth["requests"]["gamma"], 6)

    def test_new_connections_keep_a_name_of_their_own(self):
        got = connects(self.sink, OPENED)
        for dest in ("alpha", "beta", "gamma", "delta", "epsilon", "zeta"):
            self.assertEqual(got[dest], self.truth["created"][dest], dest)
        # Keep-alive: far fewer connections than acquisitions.
        self.assertLess(got["alpha"], self.truth["requests"]["alpha"] / 2)

    def test_gym_cases_queue_samples(self):
        # The timed-out attempt is abandoned, its retry waits for the slot.
        self.assertEqual(self.got[("zeta", "abandoned", "total")][0], 1)
        self.assertEqual(self.got[("zeta", "ok", "total")][0], 1)


class Aiohttp311(Aiohttp):
    LIBS, VERSION = TRIXIE, "3.11."


class Httpx(unittest.TestCase):
    N, M, H = 10, 2, 300
    LIBS, VERSION = None, "0.23."

    @classmethod
    def setUpClass(cls):
        harness.new_runtime_dir()
        cls.sink = harness.start_sink(cls)
        cls.servers = [HoldingServer() for _ in range(4)]
        a, b, c, d = (s.port for s in cls.servers)
        env = client_env(cls.LIBS, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=cls.sink.url,
                         NEMOLENS_DESTINATIONS=f"alpha=127.0.0.1:{a},beta=127.0.0.1:{b},gamma=127.0.0.1:{c},"
                                               f"delta=127.0.0.1:{d}")
        cls.proc = harness.run([harness.PYTHON, os.path.join(APPS, "httpx_client.py"), str(a), str(b), str(c),
                                str(cls.N), str(cls.M), str(cls.H), str(d)], env, timeout=120)
        cls.out = json.loads(cls.proc.stdout) if cls.proc.returncode == 0 else None
        cls.got = queue_points(cls.sink)

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.close()

    def truth(self, kind):
        """The waits of the queued requests: all but the M that found a
        connection at once (the M shortest)."""
        waits = sorted(self.out[kind])
        self.assertEqual(len(waits), self.N)
        return waits[self.M:]

    def test_client_ran_quietly(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)
        self.assertEqual(self.proc.stderr, "")
        self.assertTrue(self.out["version"].startswith(self.VERSION), self.out["version"])
        self.assertEqual(self.out["async_ok"], self.N)
        self.assertEqual(self.out["sync_ok"], self.N)
        self.assertEqual(self.out["pool_timeouts"], 2)
        self.assertEqual(self.out["cancelled"], 3)

    def test_async_waits(self):
        truth = self.truth("async")
        count, total = self.got[("alpha", "ok", "total")]
        self.assertEqual(count, self.N - self.M)
        self.assertAlmostEqual(total, sum(truth), delta=0.1 * sum(truth))

    def test_sync_waits(self):
        truth = self.truth("sync")
        count, total = self.got[("beta", "ok", "total")]
        self.assertEqual(count, self.N - self.M)
        self.assertAlmostEqual(total, sum(truth), delta=0.1 * sum(truth))

    def test_pool_timeout_and_cancellation_are_abandoned(self):
        count, total = self.got[("gamma", "abandoned", "total")]
        self.assertEqual(count, 4)   # two PoolTimeouts, two of the three cancelled
        self.assertGreaterEqual(total, 2 * (200 - 10))   # the two pool timeouts alone

    def test_connect_total_counts_requests_of_the_pool(self):
        self.assertEqual(self.out["redirect"], [200, 1])
        # The warm-up request and N; 3 pool timeouts and 3 cancelled; a
        # redirect's two hops.
        self.assertEqual(connects(self.sink), {"alpha": self.N + 1, "beta": self.N + 1, "gamma": 6, "delta": 2})
        opened = connects(self.sink, OPENED)
        self.assertEqual(opened["delta"], 1)   # the redirect's hops share a connection
        self.assertTrue(1 <= opened["alpha"] <= self.M, opened)

    def test_only_these_series(self):
        self.assertEqual(sorted(self.got), [("alpha", "ok", "total"), ("beta", "ok", "total"),
                                            ("gamma", "abandoned", "total")])


class Httpx028(Httpx):
    LIBS, VERSION = TRIXIE, "0.28."


class EntryPoint(unittest.TestCase):
    """The entry points themselves, called as the adapter calls them."""

    def test_destinations_and_arguments(self):
        harness.new_runtime_dir()
        sink = harness.start_sink(self)
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=sink.url,
                               NEMOLENS_DESTINATIONS="byname=api.example:8000,byaddr=10.1.2.3:80,"
                                                     "v6=[fd00::5]:443,net=192.168.0.0/16")
        code = (
            "import ctypes\n"
            "f = ctypes.CDLL(None).nemolens_pool_wait\n"
            "f.argtypes = (ctypes.c_char_p, ctypes.c_int, ctypes.c_double, ctypes.c_int, ctypes.c_int)\n"
            "r = [f(b'API.example', 8000, 5.0, 0, 1), f(b'api.example', 8001, 1.0, 0, 1),\n"
            "     f(b'10.1.2.3', 80, 2.0, 1, 2), f(b'[fd00::5]', 443, 3.0, 0, 0),\n"
            "     f(b'192.168.7.7', 9, 4.0, 0, 1),\n"
            "     f(b'x', 1, -1.0, 0, 0), f(b'x', 1, float('nan'), 0, 0), f(b'x', 1, 1.0, 2, 0),\n"
            "     f(b'x', 1, 1.0, 0, 3), f(None, 1, 1.0, 0, 0), f(b'x', 70000, 1.0, 0, 0)]\n"
            "d = ctypes.CDLL(None).nemolens_pool_destination\n"
            "d.argtypes = (ctypes.c_char_p, ctypes.c_int)\n"
            "a = ctypes.CDLL(None).nemolens_pool_acquire\n"
            "a.argtypes = (ctypes.c_int,)\n"
            "i = [d(h, p) for h, p in ((b'api.example', 8000), (b'API.example', 8000), (b'10.1.2.3', 80),\n"
            "                          (b'x', 1), (None, 1), (b'x', 70000), (b'x', -2))]\n"
            "for x in i + [-1, 258, 1 << 20]:\n"
            "    a(x)\n"
            "print(r)\n"
            "print(i[4:])\n")
        p = harness.run([harness.PYTHON, "-c", code], env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split("\n")[:2], [str([0] * 5 + [-1] * 6), str([-1] * 3)])
        got = queue_points(sink)
        self.assertEqual(got, {
            ("byname", "ok", "total"): (1, 5.0),
            ("external", "ok", "total"): (1, 1.0),
            ("byaddr", "abandoned", "per_host"): (1, 2.0),
            ("v6", "ok", "unknown"): (1, 3.0),
            ("net", "ok", "total"): (1, 4.0),
        })
        self.assertEqual(connects(sink), {"byname": 2, "byaddr": 1, "external": 1})


if __name__ == "__main__":
    unittest.main(verbosity=2)
