# SPDX-License-Identifier: Apache-2.0
"""The HTTP layer end to end through a real backend: the NeMo-Gym-shaped FastAPI
app (http_apps/gym_app.py) under the shim exports to a private VictoriaMetrics;
PromQL over what it stored must show exactly the requests this test made, by
route, method and status.

VictoriaMetrics' naming (see victoria.py): names keep their dots; the histogram
http.server.request.duration becomes http.server.request.duration_bucket (le),
_count and _sum; attributes become labels under their dotted names; an int
attribute (http.response.status_code) becomes its decimal string.
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from victoria import Victoria  # noqa: E402
from http_apps import httpcheck as hc  # noqa: E402
from http_apps.rawhttp import Conn, Log, one_shot  # noqa: E402

USERS = 20
RUN_SLEEP = 0.12   # above the 0.1 s bucket boundary by more than timer noise
SERVICE = "gym-app-vm"
DURATION = hc.SERVER_DURATION
BOUNDS = ["0.005", "0.01", "0.025", "0.05", "0.075", "0.1", "0.25", "0.5", "0.75", "1", "2.5", "5", "7.5", "10",
          "+Inf"]
BY = f"{hc.ROUTE}, {hc.METHOD}, {hc.STATUS}"
WAIT_S = 10     # the app has exited (exit export done) before the first query
COUNTS = f'sum by ({BY}) ({{__name__="{DURATION}_count", service.name="{SERVICE}"}})'


def by(vec, *labels):
    return {tuple(r["metric"].get(label) for label in labels): float(r["value"][1]) for r in vec}


class GymAppToVictoria(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.vm = Victoria()
        cls.addClassCleanup(cls.vm.stop)
        env = hc.shim_env(cls.vm.otlp_url, OTEL_SERVICE_NAME=SERVICE)
        app = hc.App([hc.PYTHON, hc.app_path("gym_app.py"), "--loop", "asyncio"], env, "gym-vm")
        cls.addClassCleanup(app.cleanup)
        port = app.info["port"]
        cls.log = log = Log()
        with app.blamed(), Conn(port) as c:
            for i in range(USERS):
                log.record("/users/{id}", "GET", c.request("GET", f"/users/{7000 + i}"))
            for _ in range(2):
                body = json.dumps({"sleep": RUN_SLEEP}).encode()
                log.record("/run", "POST", c.request("POST", "/run", {"Content-Type": "application/json"}, body))
            for _ in range(2):
                body = json.dumps({"response": "42"}).encode()
                log.record("/verify", "POST", c.request("POST", "/verify", {"Content-Type": "application/json"},
                                                        body))
            log.record("/verify", "POST", c.request("POST", "/verify", {"Content-Type": "application/json"}, b"{}"))
        body = json.dumps({"sleep": RUN_SLEEP, "fail": True}).encode()
        with app.blamed():
            log.record("/run", "POST", one_shot(port, "POST", "/run", {"Content-Type": "application/json"}, body,
                                                close_header=False))
        cls.rc = app.stop()
        cls.want = {(r, m, str(s)): float(n) for (r, m, s), n in log.counts().items()}
        # One bounded wait for everything: the app exited, so its exit export is
        # already in; the tests below query without waiting.
        cls.vm.wait_for(COUNTS, lambda v: by(v, hc.ROUTE, hc.METHOD, hc.STATUS) == cls.want, timeout=WAIT_S)
        cls.vm.wait_for(f'{{__name__="{hc.GYM_SUCCESS}", service.name="{SERVICE}"}}', bool, timeout=2)

    def q(self, promql):
        self.vm.flush()
        return self.vm.query(promql)

    def test_client_saw(self):
        self.assertEqual(self.rc, 0)
        self.assertEqual(self.want, {("/users/{id}", "GET", "200"): USERS, ("/run", "POST", "200"): 2,
                                     ("/run", "POST", "500"): 1, ("/verify", "POST", "200"): 2,
                                     ("/verify", "POST", "422"): 1})

    def test_counts_by_route_method_status(self):
        vec = self.q(COUNTS)
        self.assertEqual(by(vec, hc.ROUTE, hc.METHOD, hc.STATUS), self.want)

    def test_series_selected_by_labels(self):
        q = (f'{{__name__="{DURATION}_count", {hc.ROUTE}="/users/{{id}}", {hc.METHOD}="GET", '
             f'{hc.STATUS}="200"}}')
        vec = self.q(q)
        self.assertEqual(len(vec), 1, vec)
        m = vec[0]["metric"]
        self.assertEqual(float(vec[0]["value"][1]), float(USERS))
        self.assertEqual((m.get(hc.SCHEME), m.get(hc.VERSION), m.get("service.name")), ("http", "1.1", SERVICE), m)
        self.assertNotIn(hc.ERROR, m)
        q = f'{{__name__="{DURATION}_count", {hc.ROUTE}="/run", {hc.STATUS}="500"}}'
        vec = self.q(q)
        self.assertEqual([(r["metric"].get(hc.ERROR), float(r["value"][1])) for r in vec], [("500", 1.0)])

    def test_no_raw_id_in_route_labels(self):
        q = f'count by ({hc.ROUTE}) ({{__name__="{DURATION}_count"}})'
        vec = self.q(q)
        self.assertEqual({r for (r,) in by(vec, hc.ROUTE)}, {"/users/{id}", "/run", "/verify"})

    def test_buckets_and_sum(self):
        sel = f'{hc.ROUTE}="/run", {hc.STATUS}="200"'
        vec = self.q(f'sum by (le) ({{__name__="{DURATION}_bucket", {sel}}})')
        buckets = by(vec, "le")
        self.assertEqual(sorted(b for (b,) in buckets), sorted(BOUNDS))
        self.assertEqual(buckets[("+Inf",)], 2.0)
        self.assertEqual(buckets[("0.1",)], 0.0)      # each /run slept 0.12 s: none is at or below 0.1 s
        vec = self.q(f'sum({{__name__="{DURATION}_sum", {sel}}})')
        self.assertEqual(len(vec), 1)
        total = float(vec[0]["value"][1])
        self.assertGreaterEqual(total, 2 * RUN_SLEEP)
        self.assertLessEqual(total, self.log.elapsed_sum(route="/run", status=200) + 2 * hc.IO_SLACK + hc.SCHED_SLACK)

    def test_gym_metrics(self):
        vec = self.q(f'sum({{__name__="{hc.GYM_ROLLOUT}_count", service.name="{SERVICE}"}})')
        self.assertEqual(by(vec), {(): 3.0})
        vec = self.q(f'sum({{__name__="{hc.GYM_VERIFY}_count", service.name="{SERVICE}"}})')
        self.assertEqual(by(vec), {(): 3.0})
        vec = self.q(f'{{__name__="{hc.GYM_SUCCESS}", service.name="{SERVICE}"}}')
        self.assertEqual([round(v, 9) for v in by(vec).values()], [round(2 / 3, 9)])


if __name__ == "__main__":
    unittest.main(verbosity=2)
