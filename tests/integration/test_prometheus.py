# SPDX-License-Identifier: Apache-2.0
"""nemolens-run's Prometheus endpoint, scraped by a real Prometheus.

Debian 12's Prometheus (unpacked by scripts/setup-deps.sh, run here with a
private configuration and data directory on loopback, scrape interval 1 s,
honor_labels: true) scrapes nemolens-run --prometheus while its program, a
shell, runs the same HTTP client twice, one after the other, against two
local servers of this test (alpha and beta) with a known plan of routes and
statuses, then waits. Both clients have ended before the queries: what the
endpoint shows of them is what the dead processes left.

- Prometheus' query API gives, per client (instance), the requests per
  destination, route, method and status of the plan: the test's own ground
  truth (the plan, and the servers' own counts).
- The two clients' identical series stay two (two instances, one job).
- promtool check metrics parses every exposition fetched, text and
  OpenMetrics, and reports nothing but what the specification's naming
  makes (see PROMTOOL_ALLOWED).
- Other paths, methods, a request with a body, a huge header, a malformed
  request: an error status each, the endpoint still serves after them, and
  the program's exit status is nemolens-run's. The endpoint is bound to
  loopback: the host's other address is refused.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from http_apps import httpcheck as hc  # noqa: E402
from http_apps.plain_server import PlainServers  # noqa: E402

PROM_PREFIX = "/opt/nemolens-deps/prometheus/usr/bin"
PROMETHEUS = os.path.join(PROM_PREFIX, "prometheus")
PROMTOOL = os.path.join(PROM_PREFIX, "promtool")
LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(harness.SO)), "nemolens-run")
# (destination, method, path, times)
PLAN = [("alpha", "GET", "/ok", 4), ("alpha", "GET", "/missing", 2), ("alpha", "GET", "/error", 1),
        ("beta", "GET", "/ok", 3), ("beta", "POST", "/ok", 1)]
STATUS = {"/ok": 200, "/missing": 404, "/error": 503}
CLIENTS = 2
OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
# What promtool's lint (the text format's rules) says of a correct
# exposition: the specification spells ms out as _milliseconds where
# Prometheus' own convention is seconds, keeps a name's own _ms, and
# OpenMetrics names a counter's family without the _total its samples
# carry, which the text parser promtool uses cannot relate; and the
# OpenTelemetry process conventions name counts *.count.
PROMTOOL_ALLOWED = [r'metric names should not contain abbreviated units$',
                    r'use base unit "seconds" instead of "milliseconds"$',
                    r'^\S+_total no help text$',
                    # The process conventions' own names end in count
                    # (process.thread.count): not a summary's _count.
                    r'non-histogram and non-summary metrics should not have "_count" suffix$']


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def other_address():
    """An address of this host that is not loopback, or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            a = s.getsockname()[0]
        except OSError:
            return None
    return None if a.startswith("127.") else a


def raw(port, data, timeout=5):
    """Sends DATA as it is, returns the status code of the answer (0: none)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:
            pass
        got = b""
        try:
            while b"\r\n" not in got:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        except OSError:
            pass
    m = re.match(rb"HTTP/1\.[01] (\d{3})", got)
    return int(m.group(1)) if m else 0


class PrometheusScrape(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Installed by scripts/setup-deps.sh: its absence is a failure, not a skip.
        if not os.access(PROMETHEUS, os.X_OK):
            raise RuntimeError(f"{PROMETHEUS} is missing: run scripts/setup-deps.sh")
        cls.tmp = tempfile.mkdtemp(prefix="nl-prom-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        cls.srv = PlainServers([0.0, 0.0])
        cls.addClassCleanup(cls.srv.close)
        cls.port = dict(zip(["alpha", "beta"], cls.srv.ports))
        plan = []
        for dest, method, path, n in PLAN:
            plan += [{"method": method, "url": f"http://127.0.0.1:{cls.port[dest]}{path}",
                      **({"body": "x" * 100} if method == "POST" else {})}] * n
        with open(os.path.join(cls.tmp, "plan.json"), "w") as f:
            json.dump(plan, f)
        cls.stop = os.path.join(cls.tmp, "stop")
        cls.scrape_port = free_port()
        prom_port = free_port()
        cls.prom_url = f"http://127.0.0.1:{prom_port}"
        with open(os.path.join(cls.tmp, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: nemolens\n    honor_labels: true\n"
                    f"    static_configs:\n      - targets: ['127.0.0.1:{cls.scrape_port}']\n")
        cls.prom_log = open(os.path.join(cls.tmp, "prometheus.log"), "w")
        cls.addClassCleanup(cls.prom_log.close)
        cls.prom = subprocess.Popen(
            [PROMETHEUS, "--config.file", os.path.join(cls.tmp, "prometheus.yml"),
             "--storage.tsdb.path", os.path.join(cls.tmp, "data"), "--web.listen-address",
             f"127.0.0.1:{prom_port}", "--log.level", "warn"],
            stdout=subprocess.DEVNULL, stderr=cls.prom_log)
        cls.addClassCleanup(cls.prom.wait, 10)
        cls.addClassCleanup(cls.prom.terminate)
        # The program: the same client twice, then waiting until told to end.
        client = f"{hc.PYTHON} {hc.app_path('http_clients.py')} requests < {cls.tmp}/plan.json"
        script = "; ".join(f"{client} > {cls.tmp}/out{i}" for i in range(CLIENTS))
        script += f"; while [ ! -e {cls.stop} ]; do sleep 0.05; done; exit 3"
        env = harness.launcher_env(OTEL_SERVICE_NAME="prom-client", OTEL_METRIC_EXPORT_INTERVAL="500",
                                   NEMOLENS_DESTINATIONS=f"alpha=127.0.0.1:{cls.port['alpha']},"
                                                         f"beta=127.0.0.1:{cls.port['beta']}")
        cls.launcher = subprocess.Popen([LAUNCHER, f"--prometheus=127.0.0.1:{cls.scrape_port}", "sh", "-c", script],
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        cls.addClassCleanup(lambda: cls.launcher.poll() is None and cls.launcher.kill())
        harness.wait_for(lambda: all(os.path.exists(f"{cls.tmp}/out{i}") and os.path.getsize(f"{cls.tmp}/out{i}")
                                     for i in range(CLIENTS)), 30, "the clients' results",
                         alive=cls.launcher)
        cls.results = []
        for i in range(CLIENTS):
            with open(f"{cls.tmp}/out{i}") as f:
                cls.results.append(json.load(f))

    @classmethod
    def tearDownClass(cls):
        if cls.launcher.poll() is None:
            open(cls.stop, "w").close()
            cls.launcher.wait(20)
        cls.launcher.stdout.close()
        cls.launcher.stderr.close()

    def fetch(self, accept=None):
        req = urllib.request.Request(f"http://127.0.0.1:{self.scrape_port}/metrics",
                                     headers={"Accept": accept} if accept else {})
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()

    def query(self, expr):
        url = f"{self.prom_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
        self.assertEqual(body["status"], "success", body)
        return body["data"]["result"]

    def truth(self):
        """{(destination, route, method, status): requests} of one client, from
        the plan, checked against what the client and the servers saw."""
        want = {}
        for dest, method, path, n in PLAN:
            key = (dest, path, method, str(STATUS[path]))
            want[key] = want.get(key, 0) + n
        for res in self.results:
            self.assertEqual(sorted(r["status"] for r in res),
                             sorted(int(k[3]) for k, n in want.items() for _ in range(n)))
        served = {}
        for (port, method, path, status), n in self.srv.counts().items():
            dest = {p: d for d, p in self.port.items()}[port]
            served[(dest, path, method, str(status))] = served.get((dest, path, method, str(status)), 0) + n
        self.assertEqual(served, {k: CLIENTS * n for k, n in want.items()})
        return want

    def test_1_prometheus_holds_the_clients_counts(self):
        want = self.truth()
        expr = ('http_client_request_duration_seconds_count{job="prom-client"}')
        got = {}

        def collect():
            got.clear()
            for s in self.query(expr):
                m = s["metric"]
                key = (m.get("nemo_gym_http_destination_server_name"), m.get("url_path", m.get("http_route")),
                       m.get("http_request_method"), m.get("http_response_status_code"))
                got.setdefault(m["instance"], {})[key] = int(float(s["value"][1]))
            return len(got) == CLIENTS and all(
                {(k[0], k[2], k[3]): v for k, v in per.items()} == {(k[0], k[2], k[3]): v for k, v in want.items()}
                for per in got.values())
        harness.poll(collect, 20, interval=0.25)
        by_dest = [{(k[0], k[2], k[3]): v for k, v in per.items()} for per in got.values()]
        self.assertEqual(by_dest, [{(k[0], k[2], k[3]): v for k, v in want.items()}] * CLIENTS, got)
        # Two processes with the same series: two instances of one job, never merged.
        self.assertEqual(len(got), CLIENTS)
        # Each instance has its target_info, with the resource.
        info = self.query('target_info{job="prom-client"}')
        self.assertTrue(set(got) <= {s["metric"]["instance"] for s in info}, info)
        for s in info:
            self.assertIn("host_name", s["metric"])
            self.assertIn("process_pid", s["metric"])
        # The connections per destination, from the same processes.
        conns = self.query('sum by (nemo_gym_http_destination_server_name) '
                           '(gym_http_connection_pool_connect_total{job="prom-client"})')
        self.assertEqual({s["metric"]["nemo_gym_http_destination_server_name"] for s in conns}, {"alpha", "beta"})

    def test_2_expositions_pass_promtool(self):
        for accept, ctype in ((None, "text/plain; version=0.0.4"),
                              (OPENMETRICS, "application/openmetrics-text; version=1.0.0")):
            with self.subTest(accept=accept):
                status, got_type, text = self.fetch(accept)
                self.assertEqual(status, 200)
                self.assertTrue(got_type.startswith(ctype), got_type)
                self.assertIn("http_client_request_duration_seconds_bucket{", text)
                self.assertIn('le="+Inf"', text)
                self.assertEqual(text.endswith("# EOF\n"), accept is not None)
                if accept:
                    self.assertIn("# UNIT http_client_request_duration_seconds seconds\n", text)
                    self.assertIn("# TYPE gym_http_connection_pool_connect counter\n", text)
                else:
                    self.assertIn("# TYPE gym_http_connection_pool_connect_total counter\n", text)
                p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True,
                                   timeout=30)
                self.assertNotEqual(p.returncode, 1, p.stderr + p.stdout)
                self.assertNotIn("error while linting", p.stderr + p.stdout)
                for line in (p.stdout + p.stderr).splitlines():
                    self.assertTrue(any(re.search(a, line) for a in PROMTOOL_ALLOWED), line)

    def test_3_bad_requests(self):
        port = self.scrape_port
        self.assertEqual(raw(port, b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n"), 404)
        self.assertEqual(raw(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"), 405)
        self.assertEqual(raw(port, b"DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 405)
        self.assertEqual(raw(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"), 413)
        self.assertIn(raw(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n"),
                      (413, 414, 431))
        self.assertIn(raw(port, b"GET /" + b"m" * 100000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"), (400, 413, 414, 431))
        # Not HTTP at all: libmicrohttpd closes the connection, or says 400.
        self.assertIn(raw(port, b"\x00\x01garbage\r\n\r\n"), (0, 400))
        # A client that connects and says nothing is no obstacle either.
        idle = socket.create_connection(("127.0.0.1", port))
        self.addCleanup(idle.close)
        self.assertEqual(self.fetch()[0], 200)
        other = other_address()
        if other:
            with self.assertRaises(OSError):
                socket.create_connection((other, port), timeout=2).close()

    def test_4_exit_status(self):
        open(self.stop, "w").close()
        self.launcher.wait(20)
        err = self.launcher.stderr.read()
        self.assertEqual(self.launcher.returncode, 3, err)
        self.assertEqual(err, "")


if __name__ == "__main__":
    unittest.main()
