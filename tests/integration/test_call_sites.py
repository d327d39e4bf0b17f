# SPDX-License-Identifier: Apache-2.0
"""Call sites of connections: a program opens connections from functions the
test names (one of its own directly, one through libcurl, one in a shared
library of the test's), from more functions than the limit, from a signal
handler, and from Python (test_call_sites_fork.py: vfork children and
threads while the program forks). What reaches
the collector in nemolens.connection.call_site must name each function with
exactly the connections it opened, and nothing may hang (every run has a
timeout that fails the test)."""
import http.server
import json
import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402

SITE = "nemolens.connection.call_site"
CONNECT = "gym.http.connection_pool.connect_total"
FUNCTION = "code.function.name"
OBJECT = "nemolens.code.object"
DEST = "nemo.gym.http.destination.server.name"
PROGRAM = os.path.join(harness.BIN, "call_sites")
LAUNCHER = os.path.join(os.path.dirname(harness.SO), "nemolens-run")
N = 12


class Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    # The program connects and closes faster than one accept at a time:
    # with the default queue of 5, a full queue drops SYNs, and each costs a
    # second of retransmission.
    request_queue_size = 256
    daemon_threads = True


class CallSiteCase(unittest.TestCase):
    """A server for the programs, a sink, and what they report: the tests
    are in the classes below and in test_call_sites_fork.py."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(("127.0.0.1", 0), Quiet)
        cls.port = cls.server.server_address[1]
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.sink = harness.start_sink(cls)

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def setUp(self):
        self.sink.reset()
        harness.new_runtime_dir()

    def run_program(self, modes, launcher=False, **env):
        """Runs the program under the shim (or under nemolens-run); returns
        what it says it did."""
        args = [PROGRAM, str(self.port), str(N)] + modes
        if launcher:
            e = harness.launcher_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{self.sink.port}", **env)
            args = [LAUNCHER, "--"] + args
        else:
            e = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url, **env)
        p = harness.run(args, e, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "", "the shim printed warnings")
        return json.loads(p.stdout)

    def sites(self):
        """Connections per (function, object), summed over the processes."""
        got = {}
        for _, m, p in self.sink.latest_by_instance(SITE):
            self.assertEqual(m.unit, "{connection}")
            self.assertTrue(m.sum.is_monotonic)
            a = attrs(p)
            if a.get("otel.metric.overflow"):
                key = ("overflow", None)
            else:
                self.assertEqual(a[DEST], "external")
                self.assertNotIn("code.line.number", a, "native frames have no line")
                key = (a[FUNCTION], a.get(OBJECT))
            got[key] = got.get(key, 0) + p.as_int
        return got

    def connects(self):
        return sum(p.as_int for _, _, p in self.sink.latest_by_instance(CONNECT))


class CallSites(CallSiteCase):
    def test_three_functions(self):
        did = self.run_program(["direct", "curl", "lib"])
        self.assertEqual(did["dial_directly"], N)
        self.assertEqual(self.sites(), {
            ("dial_directly", "call_sites"): N,
            ("fetch_with_curl", "call_sites"): N,
            ("call_sites_lib_dial", "libcall_sites_dial.so"): N,
        })
        self.assertEqual(self.connects(), 3 * N)

    def test_libcurl_is_a_call_site_once_taken_off_the_list(self):
        # With an empty skip list, libcurl's own function that calls
        # connect() is the first frame outside libc and the shim.
        self.run_program(["curl"], NEMOLENS_CALL_SITES_SKIP="libnothing")
        got = self.sites()
        self.assertEqual(sum(got.values()), N)
        self.assertEqual([o for _, o in got], ["libcurl.so.4"], got)

    def test_limit_then_overflow(self):
        self.run_program(["many"], NEMOLENS_CALL_SITES_LIMIT="5")
        # The functions are called dial_0 ... dial_7, in that order, each round.
        want = {(f"dial_{i}", "call_sites"): N for i in range(5)}
        want[("overflow", None)] = 3 * N
        self.assertEqual(self.sites(), want)

    def test_signal_handler(self):
        did = self.run_program(["signal"])
        self.assertEqual(self.sites(), {
            ("on_alarm", "call_sites"): did["on_alarm"],
            ("dial_directly", "call_sites"): did["dial_directly"],
        })

    def test_python_frames(self):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "py_adapter", "call_sites_client.py")
        lines = {}
        with open(script) as f:
            for i, line in enumerate(f, 1):
                if "# site: " in line:
                    lines[line.split("# site: ")[1].strip()] = i
        e = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url)
        p = harness.run(["/usr/bin/python3", script, str(self.port), str(N)], e, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        did = json.loads(p.stdout)
        got = {}
        for _, _, pt in self.sink.latest_by_instance(SITE):
            a = attrs(pt)
            self.assertNotIn(OBJECT, a, "a Python frame has no shared object")
            key = (a[FUNCTION], a.get("code.file.path"), a.get("code.line.number"))
            got[key] = got.get(key, 0) + pt.as_int
        self.assertEqual(got, {("__main__." + f, script, lines[f]): did[f] for f in lines})

    def test_off(self):
        self.run_program(["direct"], NEMOLENS_CALL_SITES="false")
        self.assertEqual(self.sink.points(SITE), [])
        self.assertEqual(self.connects(), N)


if __name__ == "__main__":
    unittest.main(verbosity=2)
