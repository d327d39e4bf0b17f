# SPDX-License-Identifier: Apache-2.0
"""The HTTP layer on the server side, on a NeMo-Gym-shaped FastAPI app.

The app (http_apps/gym_app.py) runs under uvicorn under the shim, once on
asyncio's event loop and once on uvloop's (libuv: read/write/writev instead of
recv/send). This test process, not under the shim, is the client: it sends a
known set of requests with its own raw-socket client (keep-alive,
`Connection: close`, concurrent, abandoned) and keeps every exchange in a Log,
the ground truth. What the shim exported, decoded by the OTLP sink, must match:

- http.server.request.duration: exact count per (route, method, status);
  duration sums at least the app's known sleeps and at most what the client
  measured around the same requests; the 2 s SSE stream lasts >= 2 s;
- routes: /users/{id}, /items/{id} for 55 numeric ids and 10 UUIDs, NeMo Gym's
  built-in /ng-rollout/{rollout_id}/v1/responses for 3 rollout ids: no raw id;
- http.server.active_requests: 1 GET during the stream, 0 everywhere when idle;
- body sizes: request and response bytes per (route, method, status) exactly
  what went over the wire (without chunk framing);
- gym.rollout.duration_ms: one sample per POST /run (200 or 500);
  gym.verify.duration_ms: one per POST /verify (200, 500, 422, abandoned);
  gym.verify.success_rate: 2xx / all verifications.
"""
import json
import os
import re
import sys
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402
from http_apps import httpcheck as hc  # noqa: E402
from http_apps.rawhttp import Conn, Log, abandon, one_shot  # noqa: E402

USERS = 50                # GET /users/<distinct int>
USERS_WITH_QUERY = 5      # GET /users/<int>?verbose=1 (the query is not part of the route)
ITEMS = 10                # GET /items/<distinct uuid>, each with Connection: close
ROLLOUT_IDS = 3           # POST /ng-rollout/<uuid>/v1/responses
RUN_SLEEP = 0.2
RUN_OK = 5                # concurrent, each on its own keep-alive connection
RUN_FAIL = 3              # sleep, then raise -> 500
VERIFY_SLEEP = 0.05
VERIFY_OK = 4
VERIFY_FAIL = 2           # sleep, then raise -> 500
VERIFY_INVALID = 2        # body does not validate -> 422
VERIFY_ABANDONED = 1      # the client closes before the (0.5 s) answer
STREAM_EVENTS, STREAM_GAP = 11, 0.2
STREAM_MIN_S = (STREAM_EVENTS - 1) * (STREAM_GAP - hc.TIMER_SLACK)   # ~2 s

USER_ROUTE = "/users/{id}"
ITEM_ROUTE = "/items/{id}"
ROLLOUT_ROUTE = "/ng-rollout/{rollout_id}/v1/responses"
EXPECTED_ROUTES = {"/", USER_ROUTE, ITEM_ROUTE, ROLLOUT_ROUTE, "/seed_session", "/aggregate_metrics",
                   "/v1/responses", "/run", "/verify", "/stream"}
JSON = {"Content-Type": "application/json"}
# Any of these in a route means a raw identifier leaked into it.
RAW_ID = re.compile(r"/\d+(/|$)|[0-9a-f]{8}-[0-9a-f]{4}-|[0-9a-f]{16,}|\?")


class GymScenario:
    LOOP = None

    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME=f"gym-app-{cls.LOOP}")
        cls.app = hc.App([hc.PYTHON, hc.app_path("gym_app.py"), "--loop", cls.LOOP], env, f"gym-{cls.LOOP}")
        cls.addClassCleanup(cls.app.cleanup)
        cls.log = Log()
        cls.t0 = time.monotonic()
        with cls.app.blamed():
            cls.drive(cls.app.info["port"])
        cls.t_end = time.monotonic()
        cls.idle = hc.wait_exports_after(cls.sink, cls.t_end)
        cls.rc = cls.app.stop()
        cls.reqs = hc.all_requests(cls.sink)
        cls.scenario_s = cls.t_end - cls.t0

    @classmethod
    def drive(cls, port):
        log = cls.log

        def post(conn, route, path, payload):
            body = json.dumps(payload).encode()
            return log.record(route, "POST", conn.request("POST", path, JSON, body), len(body))

        # One keep-alive connection for most of the traffic.
        with Conn(port) as c:
            log.record("/", "GET", c.request("GET", "/"))
            for i in range(USERS):
                log.record(USER_ROUTE, "GET", c.request("GET", f"/users/{1000 + 37 * i}"))
            for i in range(USERS_WITH_QUERY):
                log.record(USER_ROUTE, "GET", c.request("GET", f"/users/{i}?verbose=1"))
            for _ in range(2):
                post(c, "/seed_session", "/seed_session", {})
            post(c, "/aggregate_metrics", "/aggregate_metrics", {"rewards": [0, 1]})
            for _ in range(3):
                post(c, "/v1/responses", "/v1/responses", {"input": "hi"})
            for _ in range(ROLLOUT_IDS):
                post(c, ROLLOUT_ROUTE, f"/ng-rollout/{uuid.uuid4()}/v1/responses", {"input": "hi"})
            for _ in range(VERIFY_OK):
                post(c, "/verify", "/verify", {"response": "42", "sleep": VERIFY_SLEEP})
            for _ in range(VERIFY_INVALID):
                post(c, "/verify", "/verify", {"answer": 42})           # no "response": 422

        # A connection per request, closed by `Connection: close`.
        for _ in range(ITEMS):
            log.record(ITEM_ROUTE, "GET", one_shot(port, "GET", f"/items/{uuid.uuid4()}"))

        # Rollouts at the same time, each on a keep-alive connection of its own.
        def rollout():
            with Conn(port) as c:
                post(c, "/run", "/run", {"sleep": RUN_SLEEP})
        threads = [threading.Thread(target=rollout) for _ in range(RUN_OK)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)

        # Endpoints that raise: uvicorn closes the connection after the 500, so each
        # gets a connection of its own (without `Connection: close`).
        def raising(route, payload):
            body = json.dumps(payload).encode()
            log.record(route, "POST", one_shot(port, "POST", route, JSON, body, close_header=False), len(body))
        for _ in range(RUN_FAIL):
            raising("/run", {"sleep": RUN_SLEEP, "fail": True})
        for _ in range(VERIFY_FAIL):
            raising("/verify", {"response": "0", "sleep": VERIFY_SLEEP, "fail": True})

        # A verification whose client goes away before the answer: no response at all.
        body = json.dumps({"response": "42", "sleep": 0.5}).encode()
        for _ in range(VERIFY_ABANDONED):
            log.add("/verify", "POST", None, abandon(port, "POST", "/verify", JSON, body, wait=0.15), len(body))
        time.sleep(0.5)   # the app's handler finishes (and writes nothing) before the stream

        # The SSE stream, alone, so active_requests is exactly one GET meanwhile.
        cls.stream_start = time.monotonic()
        with Conn(port) as c:
            resp = log.record("/stream", "GET", c.request("GET", "/stream", {"Accept": "text/event-stream"}))
        cls.stream_end = time.monotonic()
        cls.stream_resp = resp

    # ---- the test's own ground truth (holds with or without the shim) ----------
    def test_app_answered_as_designed(self):
        got = self.log.counts()
        self.assertEqual(got[(USER_ROUTE, "GET", 200)], USERS + USERS_WITH_QUERY)
        self.assertEqual(got[(ITEM_ROUTE, "GET", 200)], ITEMS)
        self.assertEqual(got[(ROLLOUT_ROUTE, "POST", 200)], ROLLOUT_IDS)
        self.assertEqual(got[("/run", "POST", 200)], RUN_OK)
        self.assertEqual(got[("/run", "POST", 500)], RUN_FAIL)
        self.assertEqual(got[("/verify", "POST", 200)], VERIFY_OK)
        self.assertEqual(got[("/verify", "POST", 500)], VERIFY_FAIL)
        self.assertEqual(got[("/verify", "POST", 422)], VERIFY_INVALID)
        self.assertEqual(got[("/verify", "POST", None)], VERIFY_ABANDONED)
        self.assertEqual(self.stream_resp.headers.get("transfer-encoding"), "chunked")
        self.assertEqual(self.stream_resp.body.count(b"\n\n"), STREAM_EVENTS)
        self.assertGreaterEqual(self.stream_resp.elapsed, STREAM_MIN_S)
        self.assertEqual(self.rc, 0, self.app.stderr()[-2000:])
        self.assertNotIn("nemolens:", self.app.stderr(), "the shim printed warnings")
        print(f"\n  {self.LOOP}: {len(self.log.entries)} requests in {self.scenario_s:.1f}s", file=sys.stderr)

    def test_event_loop(self):
        self.assertEqual(self.app.info["loop"].split(".")[0], "uvloop" if self.LOOP == "uvloop" else "asyncio")

    # ---- what the shim exported ------------------------------------------------
    def test_instruments(self):
        self.assertInstruments()

    def test_requests_per_route_method_status(self):
        want = self.assertServerCounts()
        self.assertEqual(sum(want.values()), len(self.log.entries))

    def test_no_raw_identifier_in_any_route(self):
        routes = set()
        for name in (hc.SERVER_DURATION, hc.SERVER_REQ_BODY, hc.SERVER_RESP_BODY):
            routes |= hc.attribute_values(self.reqs, name, hc.ROUTE)
        self.assertEqual(routes, EXPECTED_ROUTES)
        for r in routes:
            self.assertIsNone(RAW_ID.search(r), r)
        self.assertEqual(hc.counts_by(self.reqs, hc.SERVER_DURATION, hc.ROUTE).get((USER_ROUTE,)),
                         USERS + USERS_WITH_QUERY)

    def test_attributes(self):
        self.assertCommonAttributes()
        aborted = [attrs(p) for _, _, p in hc.latest(self.reqs, hc.SERVER_DURATION) if hc.STATUS not in attrs(p)]
        self.assertEqual([(a[hc.ROUTE], a[hc.METHOD]) for a in aborted], [("/verify", "POST")])

    def test_durations(self):
        d = hc.hist_by(self.reqs, hc.SERVER_DURATION, hc.ROUTE, hc.METHOD, hc.STATUS)
        slack = hc.TIMER_SLACK
        # (route, method, status): (requests, the least each one takes: the app's sleeps)
        cases = {("/run", "POST", 200): (RUN_OK, RUN_SLEEP - slack),
                 ("/run", "POST", 500): (RUN_FAIL, RUN_SLEEP - slack),
                 ("/verify", "POST", 200): (VERIFY_OK, VERIFY_SLEEP - slack),
                 ("/verify", "POST", 500): (VERIFY_FAIL, VERIFY_SLEEP - slack),
                 # its last byte written, not its headers, ends the request: ~2 s
                 ("/stream", "GET", 200): (1, STREAM_MIN_S)}
        for key, (n, least) in cases.items():
            with self.subTest(key=key):
                h = d.get(key)
                self.assertIsNotNone(h, hc.summary(self.reqs))
                self.assertEqual(h.count, n)
                self.assertGreaterEqual(h.sum, n * least)
                # at most what the client measured around the same requests
                self.assertLessEqual(h.sum, self.log.elapsed_sum(route=key[0], method=key[1], status=key[2])
                                     + n * hc.IO_SLACK + hc.SCHED_SLACK)
                if h.min is not None:
                    self.assertGreaterEqual(h.min, least)

    def test_active_requests(self):
        self.assertIdle(["GET", "POST"])
        during = [req for at, req in hc.exports(self.sink)
                  if self.stream_start + 0.4 < at < self.stream_end - 0.2]
        self.assertGreater(len(during), 0, "no export arrived during the 2 s stream")
        for req in during:
            self.assertEqual(hc.values_by([req], hc.SERVER_ACTIVE, hc.METHOD, hc.SCHEME),
                             {("GET", "http"): 1, ("POST", "http"): 0})

    def test_body_sizes(self):
        self.assertBodySizes()
        resp = hc.sums_by(self.reqs, hc.SERVER_RESP_BODY, hc.ROUTE)
        self.assertEqual(resp.get(("/stream",)), float(len(self.stream_resp.body)))

    def test_gym_rollout_and_verify(self):
        runs = RUN_OK + RUN_FAIL
        verifies = VERIFY_OK + VERIFY_FAIL + VERIFY_INVALID + VERIFY_ABANDONED
        rollout = hc.latest(self.reqs, hc.GYM_ROLLOUT)
        verify = hc.latest(self.reqs, hc.GYM_VERIFY)
        self.assertEqual(len(rollout), 1, f"{hc.GYM_ROLLOUT}: one series expected")
        self.assertEqual(len(verify), 1, f"{hc.GYM_VERIFY}: one series expected")
        (_, rm, r), (_, vm, v) = rollout[0], verify[0]
        for m, p in ((rm, r), (vm, v)):
            self.assertEqual(m.unit, "ms")
            self.assertEqual(attrs(p), {})
            self.assertEqual(list(p.explicit_bounds), hc.GYM_BOUNDS)
        self.assertEqual(r.count, runs)
        self.assertGreaterEqual(r.sum, runs * (RUN_SLEEP - hc.TIMER_SLACK) * 1000)
        self.assertLessEqual(r.sum, (self.log.elapsed_sum(route="/run") + runs * hc.IO_SLACK + hc.SCHED_SLACK) * 1000)
        self.assertEqual(v.count, verifies)
        self.assertGreaterEqual(v.sum, (VERIFY_OK + VERIFY_FAIL) * (VERIFY_SLEEP - hc.TIMER_SLACK) * 1000)

    def test_gym_verify_success_rate(self):
        pts = hc.latest(self.reqs, hc.GYM_SUCCESS)
        self.assertEqual(len(pts), 1, f"{hc.GYM_SUCCESS}: one series expected")
        _, m, p = pts[0]
        self.assertEqual(m.WhichOneof("data"), "gauge")
        # completed = 2xx; the 500s, the 422s and the abandoned one are not
        self.assertAlmostEqual(hc.value(p), VERIFY_OK / (VERIFY_OK + VERIFY_FAIL + VERIFY_INVALID + VERIFY_ABANDONED),
                               places=9)

    def test_no_client_data_from_the_server(self):
        self.assertNoClientData()


class GymAppAsyncio(GymScenario, hc.ServerChecks, unittest.TestCase):
    LOOP = "asyncio"


class GymAppUvloop(GymScenario, hc.ServerChecks, unittest.TestCase):
    LOOP = "uvloop"


if __name__ == "__main__":
    unittest.main(verbosity=2)
