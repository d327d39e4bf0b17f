# SPDX-License-Identifier: Apache-2.0
"""nemolens-run --summary=FILE against a real backend: the demo's workload (an
aiohttp client with a pool of 4 against uvicorn servers, and connects to a
refused port) runs as one tree under the launcher, which exports it to a
private VictoriaMetrics. The tables in FILE must hold what VictoriaMetrics
holds: connections per destination, pool waits per destination and outcome,
server requests per route and status with their p50 and p99 (as
histogram_quantile answers over the same buckets); and the counts must be
those of the requests the client made.

The tables are parsed as a reader sees them: a title line "name (unit,
kind)", optional "all: key=value, ..." lines of values every row shares,
a header line and rows whose fields are separated by two or more spaces.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from victoria import Victoria  # noqa: E402

LAUNCHER = os.path.join(os.path.dirname(harness.SO), "nemolens-run")
DEMO = os.path.join(harness.SRC, "scripts", "demo")
CONNECTS = "gym.http.connection_pool.connect_total"
QUEUE = "gym.http.connection_pool.queue_duration_ms"
SERVER = "http.server.request.duration"
DEST = "nemo.gym.http.destination.server.name"
OUTCOME = "nemo.gym.http.connection_pool.queue_outcome"
ROUTE = "http.route"
STATUS = "http.response.status_code"
REQUESTS = 60
GHOSTS = 3

# The program the launcher runs: the demo's servers, then its client with the
# servers' ports as destinations, then the servers' end. It prints the
# client's own account of what it did, and the ports.
DRIVER = r"""
import json, os, signal, subprocess, sys
demo, py, requests, ghosts = sys.argv[1], sys.executable, sys.argv[2], sys.argv[3]
server = subprocess.Popen([py, os.path.join(demo, "server.py"), "--ports", "2", "--latency-ms", "2,20",
                           "--refused"], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
info = json.loads(server.stdout.readline())
policy, judge = info["ports"]
env = dict(os.environ, NEMOLENS_DESTINATIONS=f"policy=127.0.0.1:{policy},judge=127.0.0.1:{judge},"
                                             f"ghost=127.0.0.1:{info['refused']}")
client = subprocess.run(
    [py, os.path.join(demo, "client.py"),
     "--target", f"work=http://127.0.0.1:{policy}/v1/work",
     "--target", f"agent=http://127.0.0.1:{policy}/run", "--post", "agent",
     "--target", f"resources=http://127.0.0.1:{judge}/verify", "--post", "resources",
     "--requests", requests, "--limit", "4", "--close-ratio", "0.25",
     "--extra", f"ghost=http://127.0.0.1:{info['refused']}/,{ghosts}"],
    env=env, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
server.send_signal(signal.SIGTERM)
server.wait(20)
print(json.dumps({"client": json.loads(client.stdout), "ports": info}), flush=True)
sys.exit(client.returncode)
"""


def parse_tables(text):
    """{instrument name: {"kind", "unit", "rows": [{column: value}]}}: every
    row also holds the values of its "all:" line. Column names are the
    headers as printed."""
    tables = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\S+) \((?:(.*), )?(counter|up-down counter|gauge|histogram)\)$", lines[i])
        if not m:
            i += 1
            continue
        name, unit, kind = m.groups()
        i += 1
        shared = {}
        if i < len(lines) and lines[i].startswith("  all: "):
            items = lines[i][len("  all: "):]
            i += 1
            # Items that did not fit go on lines of their own, indented.
            while i < len(lines) and re.match(r"^ {7}\S", lines[i]):
                items += ", " + lines[i].strip()
                i += 1
            for kv in items.split(", "):
                k, v = kv.split("=", 1)
                shared[k] = v
        header = re.split(r"\s{2,}", lines[i].strip())
        i += 1
        rows = []
        while i < len(lines) and lines[i].startswith("  "):
            fields = re.split(r"\s{2,}", lines[i].strip())
            assert len(fields) == len(header), (lines[i], header)
            rows.append(dict(shared, **dict(zip(header, fields))))
            i += 1
        tables[name] = {"kind": kind, "unit": unit, "rows": rows}
    return tables


def column(row, header):
    """The row's value in the column of that (shortened) header, or of the
    key's value shared by every row."""
    assert header in row, (header, row)
    return row[header]


class SummaryMatchesVictoria(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.vm = Victoria()
        cls.addClassCleanup(cls.vm.stop)
        cls.dir = tempfile.mkdtemp(prefix="nemolens-summary.")
        cls.addClassCleanup(shutil.rmtree, cls.dir, True)
        cls.file = os.path.join(cls.dir, "summary.txt")
        env = harness.launcher_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=cls.vm.otlp_url,
                                   OTEL_METRIC_EXPORT_INTERVAL=1000, OTEL_SERVICE_NAME="summary-tree")
        cls.proc = subprocess.run([LAUNCHER, f"--summary={cls.file}", harness.PYTHON, "-c", DRIVER, DEMO,
                                   str(REQUESTS), str(GHOSTS)],
                                  env=env, capture_output=True, text=True, timeout=120)
        cls.out = json.loads(cls.proc.stdout.strip().splitlines()[-1]) if cls.proc.stdout.strip() else {}
        with open(cls.file) as f:
            cls.text = f.read()
        cls.tables = parse_tables(cls.text)
        # The launcher exported the tree's last values before it exited:
        # wait until the backend shows them.
        cls.client = cls.out.get("client", {})
        want = REQUESTS + GHOSTS
        cls.vm.wait_for(f'sum({{__name__="{CONNECTS}"}})', lambda v: bool(v) and float(v[0]["value"][1]) >= want,
                        timeout=15)
        served = REQUESTS
        cls.vm.wait_for(f'sum({{__name__="{SERVER}_count"}})',
                        lambda v: bool(v) and float(v[0]["value"][1]) >= served, timeout=15)

    def q(self, promql):
        self.vm.flush()
        return self.vm.query(promql)

    def by(self, promql, *labels):
        return {tuple(r["metric"].get(x) for x in labels): float(r["value"][1]) for r in self.q(promql)}

    def rows(self, name):
        self.assertIn(name, self.tables, self.text)
        return self.tables[name]["rows"]

    def test_program_ran_and_status_kept(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr[-3000:])
        self.assertTrue(self.client, self.proc.stdout)
        ok = self.client["ok"]
        self.assertEqual(sum(ok.values()) + sum(sum(e.values()) for e in self.client["failed"].values()),
                         REQUESTS + GHOSTS)
        # The summary went to the file, not to the launcher's stderr.
        self.assertNotIn("what the tree recorded", self.proc.stderr)
        self.assertTrue(self.text.startswith("nemolens-run: what the tree recorded ("), self.text)

    def test_tables_stay_within_width(self):
        for line in self.text.splitlines():
            self.assertLessEqual(len(line), 120, line)
        self.assertEqual(self.tables[CONNECTS]["kind"], "counter")
        self.assertEqual(self.tables[QUEUE]["kind"], "histogram")
        self.assertEqual(self.tables[QUEUE]["unit"], "ms")

    def test_connections_per_destination(self):
        mine = {column(r, "destination"): float(r["value"]) for r in self.rows(CONNECTS)}
        vm = {d: v for (d,), v in self.by(f'sum by ({DEST}) ({{__name__="{CONNECTS}"}})', DEST).items()}
        self.assertEqual(mine, vm, self.text)
        # Ground truth: the client's requests, one acquisition each.
        p = self.out["ports"]
        names = {f"127.0.0.1:{p['ports'][0]}": "policy", f"127.0.0.1:{p['ports'][1]}": "judge",
                 f"127.0.0.1:{p['refused']}": "ghost"}
        truth = {names[hp]: float(n) for hp, n in self.client["requests"].items()}
        self.assertEqual(truth, {"policy": REQUESTS * 2 // 3, "judge": REQUESTS // 3, "ghost": GHOSTS})
        self.assertEqual(mine, truth, self.text)

    def test_pool_waits_per_destination_and_outcome(self):
        rows = self.rows(QUEUE)
        mine = {}
        for r in rows:
            key = (column(r, "destination"), column(r, "queue_outcome"))
            self.assertNotIn(key, mine, self.text)   # one row per destination and outcome
            mine[key] = float(r["count"])
        vm = self.by(f'sum by ({DEST}, {OUTCOME}) ({{__name__="{QUEUE}_count"}})', DEST, OUTCOME)
        self.assertEqual(mine, vm, self.text)
        # Ground truth: the waits aiohttp's own trace saw, per destination
        # and outcome. The pool of 4 and 60 requests made some wait.
        p = self.out["ports"]
        names = {f"127.0.0.1:{p['ports'][0]}": "policy", f"127.0.0.1:{p['ports'][1]}": "judge",
                 f"127.0.0.1:{p['refused']}": "ghost"}
        truth = {}
        for k, (waits, _ms) in self.client["pool"].items():
            hp, outcome = k.split(" ")
            truth[(names[hp], outcome)] = float(waits)
        self.assertGreater(sum(truth.values()), 0, self.client)
        self.assertEqual(mine, truth, self.text)

    def test_server_requests_per_route_and_status(self):
        rows = self.rows(SERVER)
        mine = {}
        for r in rows:
            key = (column(r, "route"), column(r, "response.status_code"))
            self.assertNotIn(key, mine, self.text)   # one row per route and status
            mine[key] = r
        counts = {k: float(r["count"]) for k, r in mine.items()}
        vm = self.by(f'sum by ({ROUTE}, {STATUS}) ({{__name__="{SERVER}_count"}})', ROUTE, STATUS)
        self.assertEqual(counts, vm, self.text)
        # Ground truth: what the client got, by target (route).
        truth = {}
        for name, route in (("work", "/v1/work"), ("agent", "/run"), ("resources", "/verify")):
            n_ok = self.client["ok"].get(name, 0)
            if n_ok:
                truth[(route, "200")] = float(n_ok)
            for err, n in self.client["failed"].get(name, {}).items():
                self.assertTrue(err.startswith("http_"), (name, err))
                truth[(route, err[5:])] = float(n)
        self.assertEqual(counts, truth, self.text)
        # The quantiles, as VictoriaMetrics interpolates the same buckets.
        for phi, col in ((0.5, "p50"), (0.99, "p99")):
            vm = self.by(f'histogram_quantile({phi}, sum by (le, {ROUTE}, {STATUS}) '
                         f'({{__name__="{SERVER}_bucket"}}))', ROUTE, STATUS)
            self.assertEqual(set(vm), set(mine))
            for key, r in mine.items():
                self.assertAlmostEqual(float(r[col]), vm[key], delta=abs(vm[key]) * 1e-5,
                                       msg=f"{col} of {key}: {self.text}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
