# SPDX-License-Identifier: Apache-2.0
"""The HTTP layer's configuration, on a plain Python HTTP server
(http_apps/plain_server.py) under the shim driven by this process's raw
client, and a urllib client (a connection per request) under the shim:

- NEMOLENS_HTTP=false: no http.* data on either side; connections still counted.
- NEMOLENS_HTTP=server / client: only that side reports.
- NEMOLENS_HTTP_ROUTES: configured templates, first match wins; the default
  templating of unmatched paths (query dropped, ids -> {id}); NeMo Gym's
  built-in routes.
- NEMOLENS_HTTP_ROUTE_UNMATCHED=path / unset / wildcard.
- OTEL_SEMCONV_STABILITY_OPT_IN=http/dup: the old names as well; =http: the stable attributes alone
  (by default active requests carry Gym's http.method and http.server_name too).
- NEMOLENS_GYM_ENDPOINTS=false: no gym.* from /run and /verify (and the default does).
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402
from http_apps import httpcheck as hc  # noqa: E402
from http_apps.rawhttp import Conn, Log  # noqa: E402

UUID = "550e8400-e29b-41d4-a716-446655440000"
HEX = "0123456789abcdef0123456789abcdef"
TOKEN = "AbC123xYz789QwE456rT"     # a long mixed token (20 characters)
ROLLOUT = "2f1c0b7e-5d7a-4a43-9a4e-1b2c3d4e5f60"

# (path sent, route expected) with NEMOLENS_HTTP_ROUTES=CONFIGURED and the default templating
CONFIGURED = "/users/{user_id},/static/special,/static/*"
ROUTE_CASES = [
    ("/users/7", "/users/{user_id}"),                      # configured template
    ("/users/8?verbose=1", "/users/{user_id}"),
    ("/static/special", "/static/special"),                 # first match wins over /static/*
    ("/static/app.css", "/static/*"),
    ("/static/js/app.js", "/static/*"),                     # (reading: * spans the rest of the path)
    ("/orders/12345", "/orders/{id}"),                      # default templating: numbers
    ("/orders/12345?page=2", "/orders/{id}"),               # query dropped
    (f"/items/{UUID}", "/items/{id}"),                      # UUIDs
    (f"/blobs/{HEX}", "/blobs/{id}"),                       # hex
    (f"/t/{TOKEN}/view", "/t/{id}/view"),                   # long mixed tokens
    ("/api/v2/health", "/api/v2/health"),                   # short words stay
    ("/v1/chat/completions", "/v1/chat/completions"),       # NeMo Gym's built-in routes
    ("/v1/messages", "/v1/messages"),
    (f"/ng-rollout/{ROLLOUT}/v1/responses", "/ng-rollout/{rollout_id}/v1/responses"),
    (f"/ng-rollout/r-{ROLLOUT[:8]}/training-token-capture/v1/responses",
     "/ng-rollout/{rollout_id}/training-token-capture/v1/responses"),
]
UNMATCHED = ["/users/123", "/users/456", f"/orders/{HEX}", "/catalog/shoes"]


class HttpConfig(harness.ShimTestCase):
    def serve(self, requests, name="plain-server", latency=0, **env):
        """Runs plain_server.py under the shim with env, sends `requests`
        [(method, path[, body])] on one keep-alive connection, stops the server
        (its exit export is then in the sink). Returns (its exports, Log)."""
        app = hc.App([hc.PYTHON, hc.app_path("plain_server.py"), "--latency", str(latency)],
                     hc.shim_env(self.sink.url, OTEL_SERVICE_NAME=name, **env), name)
        log = Log()
        try:
            with app.blamed(), Conn(app.info["ports"][0]) as c:
                for r in requests:
                    body = r[2].encode() if len(r) > 2 else b""
                    log.record(r[1], r[0], c.request(r[0], r[1], {}, body), len(body))
            self.assertEqual(app.stop(), 0, app.stderr()[-4000:])
            self.assertNotIn("nemolens:", app.stderr())
        finally:
            app.cleanup()
        return hc.of_service(hc.all_requests(self.sink), name), log

    def fetch(self, port, paths, name="urllib-client", **env):
        """urllib under the shim: one connection per request. Returns its exports."""
        plan = [{"method": "GET", "url": f"http://127.0.0.1:{port}{p}"} for p in paths]
        env = hc.shim_env(self.sink.url, OTEL_SERVICE_NAME=name, NEMOLENS_DESTINATIONS=f"web=127.0.0.1:{port}",
                          **env)
        p = harness.run([hc.PYTHON, hc.app_path("http_clients.py"), "urllib"], env, input=json.dumps(plan))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([r["status"] for r in json.loads(p.stdout)], [200] * len(paths))
        return hc.of_service(hc.all_requests(self.sink), name)

    def routes_of(self, reqs):
        return {attrs(p).get(hc.ROUTE) for _, _, p in hc.points_in(reqs, hc.SERVER_DURATION)}

    # ---- NEMOLENS_HTTP -----------------------------------------------------------
    def run_both(self, mode, n=4):
        """A server and a urllib client, both under the shim with NEMOLENS_HTTP=mode."""
        app = hc.App([hc.PYTHON, hc.app_path("plain_server.py")],
                     hc.shim_env(self.sink.url, OTEL_SERVICE_NAME="srv", NEMOLENS_HTTP=mode), "srv")
        try:
            client = self.fetch(app.info["ports"][0], [f"/hello/{i}" for i in range(n)], NEMOLENS_HTTP=mode)
            self.assertEqual(app.stop(), 0, app.stderr()[-4000:])
        finally:
            app.cleanup()
        return hc.of_service(hc.all_requests(self.sink), "srv"), client

    def test_http_false(self):
        server, client = self.run_both("false")
        self.assertEqual(hc.http_names(server), set(), hc.summary(server))
        self.assertEqual(hc.http_names(client), set(), hc.summary(client))
        self.assertEqual(hc.values_by(client, hc.CONNECTS, hc.DEST), {("web",): 4})

    def test_http_server_only(self):
        server, client = self.run_both("server")
        self.assertEqual(hc.counts_by(server, hc.SERVER_DURATION, hc.METHOD, hc.STATUS), {("GET", 200): 4},
                         hc.summary(server))
        self.assertEqual(hc.http_names(client), set(), hc.summary(client))

    def test_http_client_only(self):
        server, client = self.run_both("client")
        self.assertEqual(hc.http_names(server), set(), hc.summary(server))
        self.assertEqual(hc.counts_by(client, hc.CLIENT_DURATION, hc.DEST, hc.METHOD, hc.STATUS),
                         {("web", "GET", 200): 4}, hc.summary(client))

    # ---- routes ----------------------------------------------------------------
    def test_configured_builtin_and_default_routes(self):
        reqs, _ = self.serve([("GET", p) for p, _ in ROUTE_CASES], NEMOLENS_HTTP_ROUTES=CONFIGURED)
        want = {}
        for _, route in ROUTE_CASES:
            want[(route,)] = want.get((route,), 0) + 1
        self.assertEqual(hc.counts_by(reqs, hc.SERVER_DURATION, hc.ROUTE), want, hc.summary(reqs))

    def test_unmatched_path(self):
        reqs, _ = self.serve([("GET", p) for p in UNMATCHED] + [("POST", "/run", "{}")],
                             NEMOLENS_HTTP_ROUTE_UNMATCHED="path")
        self.assertEqual(self.routes_of(reqs), set(UNMATCHED) | {"/run"}, hc.summary(reqs))

    def test_unmatched_unset(self):
        reqs, _ = self.serve([("GET", p) for p in UNMATCHED] + [("POST", "/run", "{}")],
                             NEMOLENS_HTTP_ROUTE_UNMATCHED="unset")
        self.assertEqual(hc.counts_by(reqs, hc.SERVER_DURATION, hc.ROUTE, hc.METHOD),
                         {(None, "GET"): len(UNMATCHED), ("/run", "POST"): 1}, hc.summary(reqs))

    def test_unmatched_wildcard(self):
        # (reading, as preload/http/route.h has it: the first segment, then "/*")
        reqs, _ = self.serve([("GET", p) for p in UNMATCHED] + [("POST", "/run", "{}")],
                             NEMOLENS_HTTP_ROUTE_UNMATCHED="wildcard")
        self.assertEqual(hc.counts_by(reqs, hc.SERVER_DURATION, hc.ROUTE, hc.METHOD),
                         {("/users/*", "GET"): 2, ("/orders/*", "GET"): 1, ("/catalog/*", "GET"): 1,
                          ("/run", "POST"): 1}, hc.summary(reqs))

    def test_unknown_method_is_other(self):
        # http.server answers a method it has no handler for with 501 (and closes: so it goes last)
        reqs, log = self.serve([("GET", "/a"), ("PUT", "/a", "x"), ("PURGE", "/a")])
        self.assertEqual([e.status for e in log.entries], [200, 200, 501])
        self.assertEqual(hc.counts_by(reqs, hc.SERVER_DURATION, hc.METHOD, hc.STATUS, hc.ERROR),
                         {("GET", 200, None): 1, ("PUT", 200, None): 1, ("_OTHER", 501, "501"): 1}, hc.summary(reqs))

    # ---- old semantic conventions ------------------------------------------------------
    def test_semconv_http_dup(self):
        paths = [("GET", "/users/1"), ("GET", "/users/2"), ("GET", "/missing"), ("POST", "/run", "{}"),
                 ("GET", "/error")]
        reqs, log = self.serve(paths, latency=0.05, OTEL_SEMCONV_STABILITY_OPT_IN="http/dup")
        new = hc.counts_by(reqs, hc.SERVER_DURATION, hc.ROUTE, hc.METHOD, hc.STATUS)
        old = hc.counts_by(reqs, hc.OLD_SERVER_DURATION, hc.OLD_TARGET, hc.OLD_METHOD, hc.OLD_STATUS)
        want = {("/users/{id}", "GET", 200): 2, ("/missing", "GET", 404): 1, ("/run", "POST", 200): 1,
                ("/error", "GET", 503): 1}
        self.assertEqual(new, want, hc.summary(reqs))
        self.assertEqual(old, want, hc.summary(reqs))
        for _, m, p in hc.points_in(reqs, hc.OLD_SERVER_DURATION):
            self.assertEqual(m.unit, "ms")
            a = attrs(p)
            self.assertEqual((a.get(hc.OLD_SCHEME), a.get(hc.OLD_FLAVOR)), ("http", "1.1"), a)
        total_ms = sum(h.sum for h in hc.hist_by(reqs, hc.OLD_SERVER_DURATION).values())
        total_s = sum(h.sum for h in hc.hist_by(reqs, hc.SERVER_DURATION).values())
        self.assertGreaterEqual(total_ms, len(paths) * 50)
        self.assertLessEqual(total_ms, (log.elapsed_sum() + len(paths) * hc.IO_SLACK + hc.SCHED_SLACK) * 1000)
        self.assertAlmostEqual(total_ms, total_s * 1000, delta=1.0)   # the same measurements
        active = hc.latest(reqs, hc.SERVER_ACTIVE)
        self.assertTrue(active, hc.summary(reqs))
        for _, _, p in active:
            a = attrs(p)
            self.assertEqual((a.get(hc.SCHEME), a.get(hc.OLD_SCHEME)), ("http", "http"), a)
            self.assertEqual(a.get(hc.METHOD), a.get(hc.OLD_METHOD), a)
            self.assertRegex(a.get(hc.SERVER_NAME), r"^127\.0\.0\.1:\d+$")
            self.assertEqual(hc.value(p), 0)

    def test_semconv_default_has_no_old_names(self):
        # ...but active requests carry Gym's attributes (http.method, http.server_name) too
        reqs, _ = self.serve([("GET", "/users/1")])
        self.assertEqual(hc.counts_by(reqs, hc.SERVER_DURATION, hc.ROUTE), {("/users/{id}",): 1}, hc.summary(reqs))
        self.assertEqual(hc.points_in(reqs, hc.OLD_SERVER_DURATION), [])
        active = hc.latest(reqs, hc.SERVER_ACTIVE)
        self.assertTrue(active, hc.summary(reqs))
        for _, _, p in active:
            a = attrs(p)
            self.assertEqual(set(a), {hc.METHOD, hc.SCHEME, hc.OLD_METHOD, hc.SERVER_NAME}, a)
            self.assertEqual(a[hc.OLD_METHOD], a[hc.METHOD])
            self.assertRegex(a[hc.SERVER_NAME], r"^127\.0\.0\.1:\d+$")    # the Host the client sent

    def test_semconv_http_stable_only(self):
        reqs, _ = self.serve([("GET", "/users/1"), ("POST", "/run", "{}")], OTEL_SEMCONV_STABILITY_OPT_IN="http")
        self.assertEqual(hc.counts_by(reqs, hc.SERVER_DURATION, hc.ROUTE), {("/users/{id}",): 1, ("/run",): 1},
                         hc.summary(reqs))
        self.assertEqual(hc.points_in(reqs, hc.OLD_SERVER_DURATION), [])
        got = hc.values_by(reqs, hc.SERVER_ACTIVE, hc.METHOD, hc.SCHEME)
        self.assertEqual(got, {("GET", "http"): 0, ("POST", "http"): 0}, hc.summary(reqs))
        for _, _, p in hc.points_in(reqs, hc.SERVER_ACTIVE):
            self.assertEqual(set(attrs(p)), {hc.METHOD, hc.SCHEME}, attrs(p))

    # ---- NeMo Gym endpoints ----------------------------------------------------------
    GYM_TRAFFIC = [("POST", "/run", '{"x": 1}'), ("POST", "/run", "{}"), ("POST", "/verify", "{}"),
                   ("POST", "/verify", "{}"), ("GET", "/missing")]

    def test_gym_endpoints_default(self):
        reqs, _ = self.serve(self.GYM_TRAFFIC, latency=0.02)
        self.assertEqual([p.count for _, _, p in hc.latest(reqs, hc.GYM_ROLLOUT)], [2], hc.summary(reqs))
        self.assertEqual([p.count for _, _, p in hc.latest(reqs, hc.GYM_VERIFY)], [2])
        self.assertEqual([hc.value(p) for _, _, p in hc.latest(reqs, hc.GYM_SUCCESS)], [1.0])

    def test_gym_endpoints_false(self):
        reqs, _ = self.serve(self.GYM_TRAFFIC, latency=0.02, NEMOLENS_GYM_ENDPOINTS="false")
        self.assertEqual(hc.counts_by(reqs, hc.SERVER_DURATION, hc.ROUTE, hc.STATUS),
                         {("/run", 200): 2, ("/verify", 200): 2, ("/missing", 404): 1}, hc.summary(reqs))
        self.assertEqual(hc.metric_names(reqs) & {hc.GYM_ROLLOUT, hc.GYM_VERIFY, hc.GYM_SUCCESS}, set())


if __name__ == "__main__":
    unittest.main(verbosity=2)
