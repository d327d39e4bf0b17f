# SPDX-License-Identifier: Apache-2.0
"""NeMo Gym's attribute set on http.server.active_requests, with no settings.

NeMo Gym's metrics table has http.server.active_requests by http.server_name
and http.method. A FastAPI app under uvicorn under the shim
(http_apps/items_app.py), with nothing set but where to export:

- while requests the test holds open are in flight (the app answers them at
  SIGUSR1), the series carry http.method and http.server_name (the Host each
  client sent, port included) besides the stable http.request.method and
  url.scheme; PromQL over a private VictoriaMetrics, `sum by (http.method)`
  and `sum by (http.server_name, http.method)`, gives exactly the in-flight
  counts the test made, and 0 once they are answered;
- 1,000 requests with random Host headers (OTLP sink): the series stay at
  NEMOLENS_HTTP_SERVER_NAME_LIMIT's default, 64, plus the overflow series
  (otel.metric.overflow=true), and every count returns to 0; requests with no
  Host (HTTP/1.0) count in a series without http.server_name.

(OTEL_SEMCONV_STABILITY_OPT_IN=http, the stable set alone: test_http_config.)
"""
import json
import os
import queue
import random
import signal
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402
from victoria import Victoria  # noqa: E402
from http_apps import httpcheck as hc  # noqa: E402
from http_apps.rawhttp import Conn, build  # noqa: E402

SERVICE = "items-active"
ACTIVE = hc.SERVER_ACTIVE
# (method, Host header) of each request held in flight
HELD = [("GET", "gym.example:8080"), ("GET", "gym.example:8080"), ("GET", None), ("POST", "policy.local"),
        ("POST", "policy.local")]
NAME_LIMIT = 64
RANDOM_HOSTS = 1000
NO_HOST = 3           # HTTP/1.0 requests without a Host header


def no_host_request(port):
    """GET /health over HTTP/1.0 with no Host; returns the status line."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    return data.split(b"\r\n", 1)[0]


def by(vec, *labels):
    return {tuple(r["metric"].get(label) for label in labels): float(r["value"][1]) for r in vec}


def held_lines(app, n, timeout=20.0):
    """Waits until the app reports n requests held (its stdout is read in a
    thread: lines the first readline buffered are not lost to select)."""
    lines = queue.Queue()

    def read():
        for line in app.proc.stdout:
            lines.put(line)
    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if json.loads(lines.get(timeout=0.5)).get("held") == n:
                return True
        except queue.Empty:
            pass
    return False


class ActiveRequestsAtVictoria(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.vm = Victoria()
        cls.addClassCleanup(cls.vm.stop)
        cls.app = app = hc.App([hc.PYTHON, hc.app_path("items_app.py")],
                               hc.shim_env(cls.vm.otlp_url, OTEL_SERVICE_NAME=SERVICE), "items-active")
        cls.addClassCleanup(app.cleanup)
        port = app.info["port"]
        cls.local = f"127.0.0.1:{port}"
        cls.hosts = [h or cls.local for _, h in HELD]
        socks = []
        with app.blamed():
            for method, host in HELD:
                s = socket.create_connection(("127.0.0.1", port), timeout=20)
                s.sendall(build(method, "/hold", port, {"Host": host} if host else None))
                socks.append(s)
            cls.all_held = held_lines(app, len(HELD))
            sel = f'{{__name__="{ACTIVE}", service.name="{SERVICE}"}}'
            want = {("GET",): 3.0, ("POST",): 2.0}
            cls.during = cls.vm.wait_for(f"sum by ({hc.OLD_METHOD}) ({sel})", lambda v: by(v, hc.OLD_METHOD) == want)
            cls.during_names = cls.vm.query(f"sum by ({hc.SERVER_NAME}, {hc.OLD_METHOD}) ({sel})")
            cls.series = cls.vm.query(sel)
            os.kill(app.proc.pid, signal.SIGUSR1)
            cls.answers = []
            for s in socks:
                s.settimeout(20)
                data = b""
                while b"released" not in data:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                cls.answers.append(data.split(b"\r\n", 1)[0])
                s.close()
            zero = {("GET",): 0.0, ("POST",): 0.0}
            cls.after = cls.vm.wait_for(f"sum by ({hc.OLD_METHOD}) ({sel})", lambda v: by(v, hc.OLD_METHOD) == zero)
        cls.rc = app.stop()

    def test_requests_were_held_and_answered(self):
        self.assertTrue(self.all_held)
        self.assertEqual(self.answers, [b"HTTP/1.1 200 OK"] * len(HELD))
        self.assertEqual(self.rc, 0)
        self.assertNotIn("nemolens:", self.app.stderr())

    def test_sum_by_gym_method_is_the_in_flight_count(self):
        self.assertEqual(by(self.during, hc.OLD_METHOD), {("GET",): 3.0, ("POST",): 2.0})

    def test_server_name_is_the_host_sent(self):
        self.assertEqual(by(self.during_names, hc.SERVER_NAME, hc.OLD_METHOD),
                         {("gym.example:8080", "GET"): 2.0, (self.local, "GET"): 1.0,
                          ("policy.local", "POST"): 2.0})

    def test_both_attribute_sets_on_each_series(self):
        self.assertEqual(len(self.series), 3, self.series)
        for r in self.series:
            m = r["metric"]
            self.assertEqual(m.get(hc.METHOD), m.get(hc.OLD_METHOD), m)
            self.assertEqual(m.get(hc.SCHEME), "http", m)
            self.assertIn(m.get(hc.SERVER_NAME), self.hosts, m)
            self.assertNotIn(hc.OLD_SCHEME, m)

    def test_back_to_zero(self):
        self.assertEqual(by(self.after, hc.OLD_METHOD), {("GET",): 0.0, ("POST",): 0.0})


class RandomHostsStayBounded(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        app = hc.App([hc.PYTHON, hc.app_path("items_app.py")],
                     hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="items-hosts"), "items-hosts")
        cls.addClassCleanup(app.cleanup)
        rng = random.Random(21)
        cls.sent = [f"h{rng.getrandbits(40):010x}.example:{rng.randrange(1, 65536)}" for _ in range(RANDOM_HOSTS)]
        with app.blamed(), Conn(app.info["port"]) as c:
            cls.statuses = [c.request("GET", "/health", {"Host": h}).status for h in cls.sent]
        with app.blamed():
            cls.no_host = [no_host_request(app.info["port"]) for _ in range(NO_HOST)]
        t_end = time.monotonic()
        cls.idle = hc.wait_exports_after(cls.sink, t_end)
        cls.rc = app.stop()
        cls.reqs = hc.all_requests(cls.sink)

    def test_answered(self):
        self.assertEqual(self.rc, 0)
        self.assertEqual(self.statuses, [200] * RANDOM_HOSTS)
        self.assertEqual(self.no_host, [b"HTTP/1.1 200 OK"] * NO_HOST)
        self.assertEqual(len(set(self.sent)), RANDOM_HOSTS)

    def test_series_at_the_cap_plus_overflow(self):
        pts = [attrs(p) for _, _, p in hc.latest(self.reqs, ACTIVE)]
        named = [a for a in pts if hc.SERVER_NAME in a]
        overflow = [a for a in pts if a.get(hc.OVERFLOW) is True]
        self.assertEqual(len(named), NAME_LIMIT, pts[:5])
        self.assertEqual(len(overflow), 1, pts[:5])
        self.assertEqual(overflow[0], {hc.OVERFLOW: True})
        # and the requests without a Host: a series without http.server_name
        rest = [a for a in pts if a not in named and a not in overflow]
        self.assertEqual(rest, [{hc.METHOD: "GET", hc.SCHEME: "http", hc.OLD_METHOD: "GET"}])
        self.assertEqual(len(pts), NAME_LIMIT + 2)
        names = {a[hc.SERVER_NAME] for a in named}
        self.assertEqual(len(names), NAME_LIMIT)
        self.assertLessEqual(names, set(self.sent))
        for a in named:
            self.assertEqual((a[hc.METHOD], a[hc.OLD_METHOD], a[hc.SCHEME]), ("GET", "GET", "http"), a)

    def test_every_count_back_to_zero(self):
        for reqs in (self.idle, self.reqs):
            self.assertEqual({hc.value(p) for _, _, p in hc.latest(reqs, ACTIVE)}, {0})

    def test_durations_all_counted(self):
        self.assertEqual(hc.counts_by(self.reqs, hc.SERVER_DURATION, hc.ROUTE), {("/health",): RANDOM_HOSTS + NO_HOST})


if __name__ == "__main__":
    unittest.main(verbosity=2)
