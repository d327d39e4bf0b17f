# SPDX-License-Identifier: Apache-2.0
"""Every query of dashboards/nemolens.json, asked of a backend that holds real data.

VictoriaMetrics is fed the demo's Gym-shaped workload under the shim (uvicorn/
FastAPI servers with memory profiling, an aiohttp client with a saturated pool
of 4, a refused port and a full listener: gym_workload.py). Then each panel's
queries and each template variable's query run against /api/v1/query with
every variable on "All": none may fail, and every panel has data, except those
listed in NO_DATA with the reason this workload cannot produce it.

The queries use only forms VictoriaMetrics 1.112 and Prometheus 3 (UTF-8
names) both parse: `{__name__="a.b", "c.d"=~"..."}` selectors, and grouping
by plain names that label_replace copies the dotted labels into (Prometheus 3
wants `by ("c.d")`, which VictoriaMetrics 1.112 rejects).
"""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from gym_workload import GymWorkload  # noqa: E402
from victoria import Victoria  # noqa: E402

sys.path.insert(0, os.path.join(harness.SRC, "scripts", "demo"))
import dashboard  # noqa: E402

# Panels this workload cannot fill, with the reason. Empty: it fills them all.
NO_DATA = {}

ROWS = ["Connections", "HTTP servers", "HTTP clients", "Gym endpoints", "Inference", "Memory"]


class Dashboard(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.vm = Victoria()
        cls.workload = GymWorkload(cls.vm)
        try:
            cls.workload.run()
        finally:
            cls.workload.stop()
        cls.vm.flush()

    @classmethod
    def tearDownClass(cls):
        cls.vm.stop()

    def test_dashboard_is_importable(self):
        dash = dashboard.load()
        self.assertEqual(dash["uid"], "nemolens")
        ds = [v for v in dash["templating"]["list"] if v["type"] == "datasource"]
        self.assertEqual([(v["name"], v["query"]) for v in ds], [("datasource", "prometheus")])
        names = {v["name"] for v in dash["templating"]["list"]}
        self.assertLessEqual({"service", "destination", "route"}, names)
        ids = [p["id"] for p in dash["panels"]]
        self.assertEqual(len(ids), len(set(ids)))
        for p in dash["panels"]:
            if p["type"] != "row":
                self.assertEqual(p["datasource"]["uid"], "${datasource}", p["title"])
                self.assertTrue(p["targets"], p["title"])
        self.assertEqual([p["title"] for p in dash["panels"] if p["type"] == "row"], ROWS)

    def test_no_dotted_name_outside_quotes(self):
        # Prometheus 3 parses a dotted name only quoted: in a selector as
        # "a.b"=..., never after by/without; label_replace takes strings.
        for p in dashboard.panels():
            for q in p["queries"]:
                unquoted = re.sub(r'"(?:[^"\\]|\\.)*"', '""', q)
                self.assertNotRegex(unquoted, r"[A-Za-z_]\.[A-Za-z_]", f"{p['title']}: {q}")

    def test_every_query_answers_with_data(self):
        empty, report = [], []
        for p in dashboard.panels():
            series = 0
            for q in p["queries"]:
                try:
                    vec = self.vm.query(q)
                except RuntimeError as e:
                    self.fail(f"{p['row']} / {p['title']}: query failed: {e}")
                series += len(vec)
                report.append(f"{p['title']}: {len(vec)} series")
            if series == 0 and p["title"] not in NO_DATA:
                empty.append(f"{p['row']} / {p['title']}: {p['queries']}")
            if p["title"] in NO_DATA:
                self.assertEqual(series, 0, f"{p['title']} is listed as without data, but has {series} series")
        self.assertEqual(empty, [], "\n".join(report))
        print("\n".join(report), file=sys.stderr)

    def test_variables_list_the_workloads_values(self):
        values = {}
        for name, var in dashboard.variables().items():
            vec = self.vm.query(var["query"])
            pattern = re.compile(var["regex"].strip("/"))
            # Grafana applies the regex to each result's text, as query_result shows it.
            found = set()
            for r in vec:
                text = "{" + ",".join(f'{k}="{v}"' for k, v in sorted(r["metric"].items())) + "}"
                m = pattern.search(text)
                if m:
                    found.add(m.group(1))
            values[name] = found
        self.assertLessEqual({"demo-servers", "demo-client"}, values["service"])
        self.assertLessEqual({"policy", "judge", "ghost", "slow"}, values["destination"])
        self.assertLessEqual({"/v1/work", "/run", "/verify"}, values["route"])

    def test_values_match_the_workload(self):
        """A few panels against ground truth: routes and statuses the client
        saw, and the success rate of the verifications."""
        client = self.workload.client_result
        by_title = {p["title"]: p for p in dashboard.panels()}
        statuses = {(r["metric"]["route"], r["metric"]["status"])
                    for r in self.vm.query(by_title["Requests per second by route and status"]["queries"][0])}
        self.assertIn(("/v1/work", "200"), statuses)
        if client["failed"].get("resources", {}).get("http_500"):
            self.assertIn(("/verify", "500"), statuses)
        ok = client["ok"].get("resources", 0)
        total = ok + sum(client["failed"].get("resources", {}).values())
        rate = self.vm.query(by_title["Verify success rate"]["queries"][0])
        got = {r["metric"].get("service"): float(r["value"][1]) for r in rate}
        self.assertAlmostEqual(got["demo-servers"], ok / total, places=6)
        conns = by_title["Acquisitions and connections opened per destination"]["queries"]
        dests = {r["metric"]["dest"] for r in self.vm.query(conns[0])}
        self.assertLessEqual({"policy", "judge", "ghost", "slow"}, dests)
        opened = {r["metric"]["dest"] for r in self.vm.query(conns[1])}
        self.assertLessEqual({"policy", "judge"}, opened)

    def test_acquisitions_and_the_share_that_queued(self):
        """The client is aiohttp under the adapter: connect_total is one per
        request it made, as NeMo Gym counts it, more than the connections it
        opened (keep-alive), and queued acquisitions over connect_total, the
        dashboard's share, is at most 1 for every destination."""
        client = self.workload.client_result
        total = self.vm.query('sum({__name__="gym.http.connection_pool.connect_total", "service.name"="demo-client"})')
        self.assertEqual(int(float(total[0]["value"][1])), sum(client["requests"].values()))
        opened = self.vm.query('sum({__name__="nemolens.connection.opened", "service.name"="demo-client"})')
        self.assertLess(int(float(opened[0]["value"][1])), sum(client["requests"].values()))
        # The panel's formula over the whole run: its rates over a short run
        # skew (an acquisition is counted when it begins, its wait when it
        # ends, maybe one export later); its totals cannot.
        by_title = {p["title"]: p for p in dashboard.panels()}
        formula = re.sub(r"rate\((\{[^}]*\})\[[^]]*\]\)", r"\1",
                         by_title["Share of acquisitions that queued"]["queries"][0])
        self.assertNotIn("rate(", formula)
        share = {r["metric"]["dest"]: float(r["value"][1]) for r in self.vm.query(formula)}
        self.assertLessEqual({"policy", "judge"}, set(share))
        for dest, v in share.items():
            self.assertLessEqual(v, 1.0, dest)
        self.assertGreater(share["policy"] + share["judge"], 0)


    def test_inference_row_against_the_clients_answers(self):
        """The token panel's formula over the whole run, for the client's
        service, is the usage the client read in its answers, per model and
        token type; the call panel sees the same models on both sides."""
        models = self.workload.client_result["models"]
        self.assertTrue(models)
        by_title = {p["title"]: p for p in dashboard.panels()}
        formula = re.sub(r"rate\((\{[^}]*\})\[[^]]*\]\)", r"\1",
                         by_title["Tokens per second by model and type"]["queries"][0])
        formula = formula.replace('"service.name"=~".*"', '"service.name"="demo-client"')
        self.assertIn("demo-client", formula)
        got = {(r["metric"]["model"], r["metric"]["type"]): int(float(r["value"][1])) for r in self.vm.query(formula)}
        want = {(m, t): v[t] for m, v in models.items() for t in ("input", "output")}
        self.assertEqual(got, want)
        calls = by_title["Model calls per second by model"]["queries"]
        for q in calls:
            self.assertEqual({r["metric"]["model"] for r in self.vm.query(q)}, set(models))

if __name__ == "__main__":
    unittest.main(verbosity=2)
