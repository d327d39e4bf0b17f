# SPDX-License-Identifier: Apache-2.0
"""Real programs behave under the shim exactly as without it.

- Two real projects' own test suites, from Debian packages: CPython's
  networking tests (libpython3.11-testsuite) and GLib's GIO socket tests
  (libglib2.0-tests). Each runs without and with the shim (exporting to a
  live collector); the per-test results must be identical, and the shim must
  have recorded the suites' connections.
- A fork/exec storm: a shell starting 2,000 short processes.
- A threaded client holding 1,000 connections open at once.
- A static binary and a Go program, which LD_PRELOAD cannot see into.
"""
import os
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

CONNECTS = "gym.http.connection_pool.connect_total"
PY_TESTS = ["test_httplib", "test_urllib2_localnet", "test_asyncio.test_sock_lowlevel",
            "test_asyncio.test_streams", "test_asyncio.test_sendfile", "test_smtplib", "test_wsgiref",
            "test_telnetlib", "test_asyncio.test_events"]
GLIB_DIR = "/usr/libexec/installed-tests/glib"
GLIB_TESTS = ["socket", "socket-service", "socket-listener", "gsocketclient-slow", "network-address",
              "unix-streams", "inet-address", "socket-address", "unix-fd"]


def unittest_results(output):
    """{(test line, outcome): how often} from unittest's verbose output."""
    res = {}
    for m in re.finditer(r"^(.*) \.\.\. (ok|skipped|FAIL|ERROR|expected failure|unexpected success)", output, re.M):
        key = (m.group(1), m.group(2))
        res[key] = res.get(key, 0) + 1
    return res


def tap_results(output):
    return {m.group(2): m.group(1) for m in re.finditer(r"^(ok|not ok) \d+ (\S+)", output, re.M)}


class RealPrograms(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)

    def setUp(self):
        self.sink.reset()

    def shim(self, **extra):
        return harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url, **extra)

    def compare(self, args, parse, timeout=600):
        t0 = time.monotonic()
        base = subprocess.run(args, env=harness.plain_env(), capture_output=True, text=True, timeout=timeout)
        t1 = time.monotonic()
        shim = subprocess.run(args, env=self.shim(), capture_output=True, text=True, timeout=timeout)
        t2 = time.monotonic()
        a, b = parse(base.stdout + base.stderr), parse(shim.stdout + shim.stderr)
        self.assertGreater(len(a), 20, "the suite ran too few tests to compare")
        self.assertEqual(b, a)
        self.assertEqual(shim.returncode, base.returncode)
        print(f"\n  {args[-1] if len(args) < 4 else len(a)} tests: {len(a)} results identical; "
              f"wall {t1 - t0:.1f}s without, {t2 - t1:.1f}s with the shim", file=sys.stderr)
        return a

    def test_cpython_network_test_suite(self):
        results = self.compare([harness.PYTHON, "-m", "test", "-v", *PY_TESTS], unittest_results)
        counts = {}
        for (_, outcome), n in results.items():
            counts[outcome] = counts.get(outcome, 0) + n
        print(f"  CPython outcomes: {counts}", file=sys.stderr)
        self.assertGreater(sum(p.as_int for _, _, p in self.sink.points(CONNECTS)), 0,
                           "the shim recorded none of the suite's connections")

    def test_glib_gio_socket_tests(self):
        def run_all(env):
            out = []
            for t in GLIB_TESTS:
                p = subprocess.run([os.path.join(GLIB_DIR, t)], env=env, capture_output=True, text=True,
                                   timeout=300, cwd="/tmp")
                out.append(p.stdout + p.stderr + f"\nrc {t} {p.returncode}\n")
            return "".join(out)
        base = run_all(harness.plain_env())
        shim = run_all(self.shim())
        a, b = tap_results(base), tap_results(shim)
        self.assertGreater(len(a), 50)
        self.assertEqual(b, a)
        self.assertEqual(re.findall(r"^rc .*", shim, re.M), re.findall(r"^rc .*", base, re.M))
        print(f"\n  GLib: {len(a)} TAP results identical", file=sys.stderr)
        self.assertGreater(sum(p.as_int for _, _, p in self.sink.points(CONNECTS)), 0)

    def test_fork_exec_storm(self):
        script = "i=0; while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done; echo storm $i"
        t0 = time.monotonic()
        base = subprocess.run(["sh", "-c", script], env=harness.plain_env(), capture_output=True, text=True)
        t1 = time.monotonic()
        shim = subprocess.run(["sh", "-c", script], env=self.shim(), capture_output=True, text=True)
        t2 = time.monotonic()
        self.assertEqual((shim.returncode, shim.stdout, shim.stderr), (base.returncode, "storm 2000\n", ""))
        self.assertEqual(self.sink.raw, [], "processes that recorded nothing must export nothing")
        print(f"\n  2000 processes: {t1 - t0:.2f}s without, {t2 - t1:.2f}s with the shim "
              f"(ratio {(t2 - t1) / (t1 - t0):.2f})", file=sys.stderr)

    def test_thousand_concurrent_connections(self):
        listener = harness.AcceptingListener(backlog=2048)
        try:
            p = harness.run([os.path.join(harness.BIN, "many_conns"), str(listener.port), "8", "125"],
                            self.shim(), timeout=120)
        finally:
            listener.close()
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "established 1000\n", ""))
        self.assertEqual([pt.as_int for _, _, pt in self.sink.points(CONNECTS)], [1000])
        queued = self.sink.points("gym.http.connection_pool.queue_duration_ms")
        self.assertEqual(sum(pt.count for _, _, pt in queued), 1000)

    def test_static_binary_and_go_program_are_unaffected(self):
        listener = harness.AcceptingListener()
        try:
            port = str(listener.port)
            for args in ([os.path.join(harness.BIN, "static_client"), port, "5"],
                         [os.path.join(harness.BIN, "go_dialer"), f"127.0.0.1:{port}"]):
                with self.subTest(program=os.path.basename(args[0])):
                    base = harness.run(args, harness.plain_env())
                    shim = harness.run(args, self.shim())
                    self.assertEqual(base.returncode, 0, base.stderr)
                    self.assertEqual((shim.returncode, shim.stdout, shim.stderr),
                                     (base.returncode, base.stdout, base.stderr))
                    self.assertIn("connected 5", shim.stdout)
        finally:
            listener.close()
        self.assertEqual(self.sink.raw, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
