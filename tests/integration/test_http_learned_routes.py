# SPDX-License-Identifier: Apache-2.0
"""http.route stays low-cardinality whatever the identifiers look like.

A FastAPI app with one route, /items/{item_id} (http_apps/items_app.py), runs
under uvicorn under the shim with its defaults. The client (this process, not
under the shim) asks for /items/<id> with identifiers of the shapes services
use: numbers, UUIDs, 8-hex, 24-hex object ids, ULIDs, 7-hex short hashes, date
slugs, digit-hex pairs, 6-character base36, user names, and more. Then what the
OTLP sink decoded must show:

- for /items/...: at most 12 routes; the static rules (preload/http/route.h)
  make every identifier shape but the base36 and the names "/items/{id}"; of
  those, the first 10 distinct values keep their routes (the position has not
  shown more than NEMOLENS_HTTP_ROUTE_SEGMENT_LIMIT=10 values yet) and every
  later one is "/items/{id}": the test knows each request's route, so counts
  per route are exact;
- fixed paths (/health, /metrics, /v1/models, /api/v2/status, NeMo Gym's
  /v1/responses) stay exactly what they are.
"""
import os
import random
import string
import sys
import unittest
import uuid

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from http_apps import httpcheck as hc  # noqa: E402
from http_apps.rawhttp import Conn, Log  # noqa: E402

ID_ROUTE = "/items/{id}"
LIMIT = 10        # NEMOLENS_HTTP_ROUTE_SEGMENT_LIMIT's default
FIXED = [("GET", "/health"), ("GET", "/metrics"), ("GET", "/v1/models"), ("GET", "/api/v2/status"),
         ("POST", "/v1/responses")]
NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory",
         "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "zoe", "wendy", "yvonne",
         "xavier", "quentin", "ursula"]
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
HEX = "0123456789abcdef"


def hex_with_digit(rng, n):
    s = [rng.choice(HEX) for _ in range(n)]
    s[rng.randrange(n)] = rng.choice(string.digits)
    return "".join(s)


def base36(rng):
    """6 characters of a-z0-9 that the static rules keep: 1 to 3 digits, and a
    letter past 'f' (so not hex)."""
    while True:
        s = "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(6))
        digits = sum(c.isdigit() for c in s)
        if 1 <= digits <= 3 and any(c > "f" for c in s if c.isalpha()):
            return s


def identifiers(rng):
    """[(identifier, static)]: static when the static rules alone make it {id}."""
    out = []
    out += [(str(rng.randrange(10, 10**9)), True) for _ in range(40)]                 # numbers
    out += [(str(uuid.UUID(int=rng.getrandbits(128), version=4)), True) for _ in range(30)]
    out += [(hex_with_digit(rng, 8), True) for _ in range(30)]                          # 8-hex
    out += [(hex_with_digit(rng, 24), True) for _ in range(30)]                         # object ids
    out += [("01" + "".join(rng.choice(CROCKFORD) for _ in range(24)), True) for _ in range(30)]   # ULIDs
    out += [(hex_with_digit(rng, 7), True) for _ in range(30)]                          # short hashes
    out += [(f"run-2026-{rng.randrange(1, 13):02}-{rng.randrange(1, 29):02}-k{rng.randrange(1, 10)}", True)
            for _ in range(30)]                                                         # date slugs
    out += [(f"{rng.randrange(1, 100)}-{hex_with_digit(rng, 8)}", True) for _ in range(30)]   # digit-hex
    out += [(base36(rng), False) for _ in range(25)]                                    # k3j9x2
    out += [(n, False) for n in NAMES]                                                  # user names
    # more of our own
    out += [(f"user{rng.randrange(1000, 99999)}", True) for _ in range(10)]
    out += [(f"INV-{rng.randrange(2020, 2030)}-{rng.randrange(1, 9999):04}", True) for _ in range(10)]
    out += [(f"{rng.choice(NAMES)}%40example.com", True) for _ in range(5)]
    out += [(f"sha256~{hex_with_digit(rng, 64)}", True) for _ in range(5)]
    out += [("".join(rng.choice(string.ascii_letters) for _ in range(12)) + str(rng.randrange(1000, 9999)), True)
            for _ in range(10)]
    out += [(f"{rng.choice(['llama', 'qwen', 'mistral'])}-{rng.randrange(2, 9)}-{rng.randrange(1, 9)}b-"
             f"{hex_with_digit(rng, 12)}", True) for _ in range(10)]
    return out


class LearnedRoutes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        rng = random.Random(19)
        ids = identifiers(rng)
        # Some identifiers asked for more than once, all in a shuffled order.
        ids += rng.sample(ids, 60)
        rng.shuffle(ids)
        cls.n_ids = len({i for i, _ in ids})
        cls.sink = harness.start_sink(cls)
        env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="items-app")
        app = hc.App([hc.PYTHON, hc.app_path("items_app.py")], env, "items")
        cls.addClassCleanup(app.cleanup)
        cls.log = log = Log()
        learned = []              # the values the position has shown, in order
        with app.blamed(), Conn(app.info["port"]) as c:
            for k, (ident, static) in enumerate(ids):
                route = ID_ROUTE
                if not static:
                    if ident not in learned and len(learned) < LIMIT:
                        learned.append(ident)
                    if ident in learned:
                        route = f"/items/{ident}"
                log.record(route, "GET", c.request("GET", f"/items/{ident}"))
                if k % 50 == 0:
                    for method, path in FIXED:
                        log.record(path, method, c.request(method, path))
        cls.learned = learned
        cls.t_end = hc.time.monotonic()
        hc.wait_exports_after(cls.sink, cls.t_end)
        cls.rc = app.stop()
        cls.reqs = hc.all_requests(cls.sink)

    def test_app_answered_everything(self):
        self.assertEqual(self.rc, 0)
        self.assertEqual({e.status for e in self.log.entries}, {200})
        self.assertGreaterEqual(self.n_ids, 300)
        self.assertEqual(len(self.learned), LIMIT)

    def test_at_most_12_item_routes(self):
        routes = {r for (r,) in hc.counts_by(self.reqs, hc.SERVER_DURATION, hc.ROUTE) if r.startswith("/items/")}
        self.assertLessEqual(len(routes), 12, sorted(routes))
        self.assertEqual(routes, {ID_ROUTE} | {f"/items/{v}" for v in self.learned})

    def test_counts_per_route_exact(self):
        got = hc.counts_by(self.reqs, hc.SERVER_DURATION, hc.ROUTE, hc.METHOD, hc.STATUS)
        self.assertEqual(got, self.log.counts(), hc.summary(self.reqs))

    def test_fixed_paths_unchanged(self):
        got = hc.counts_by(self.reqs, hc.SERVER_DURATION, hc.ROUTE, hc.METHOD)
        want = self.log.counts()
        for method, path in FIXED:
            self.assertEqual(got.get((path, method)), want[(path, method, 200)], path)


if __name__ == "__main__":
    unittest.main(verbosity=2)
