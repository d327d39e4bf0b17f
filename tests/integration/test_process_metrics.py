# SPDX-License-Identifier: Apache-2.0
"""Process pressure from /proc: process.cpu.time, process.memory.usage,
process.thread.count, process.open_file_descriptor.count and
process.context_switches, each on its own process's resource, checked
against the program's own view of itself.

The program (tests/programs/proc_pressure.c) and its forked child each take
a known state (CPU burnt, threads, descriptors), print their own view of it
(getrusage, /proc/self/status, /proc/self/fd) and hold it until stdin
closes; the test lets several export intervals pass in that state first, so
the last values exported were sampled in it. In both modes: under plain
LD_PRELOAD each process samples itself, under nemolens-run the launcher
samples them (and serves them to a Prometheus scrape as well).

Tolerances. CPU time: 10 % of the program's own figure (clock ticks of
10 ms; under plain LD_PRELOAD the shim's own thread adds its exports' CPU
time to the process's). Threads and descriptors: exact. Under plain
LD_PRELOAD the process's own view includes the shim's export thread and its
connection to the collector, as the figures from /proc do.
"""
import os
import re
import socket
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

SANITIZED = bool(os.environ.get("NL_SANITIZER_RUNTIME"))
from otlp_sink import attrs  # noqa: E402

PROG = os.path.join(harness.BIN, "proc_pressure")
LAUNCHER = os.path.join(os.path.dirname(harness.SO), "nemolens-run")
NAMES = ["process.cpu.time", "process.memory.usage", "process.thread.count",
         "process.open_file_descriptor.count", "process.context_switches"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ProcessMetrics(unittest.TestCase):
    launcher = False

    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)

    def setUp(self):
        self.sink.reset()
        harness.new_runtime_dir()

    def run_program(self, hold_s=1.2, scrape=None, **env):
        """Runs the program to its end; its two views {who: {...}} and, when
        scrape is a port, the exposition scraped while it held its state."""
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url, OTEL_METRIC_EXPORT_INTERVAL=200,
                               **env)
        args = [PROG]
        if self.launcher:
            env = harness.for_launcher(env)
            args = [LAUNCHER] + args
        p = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        views = {}
        try:
            while len(views) < 2:
                line = p.stdout.readline()
                if not line.startswith("view "):
                    self.fail(f"proc_pressure did not start: {line!r} {p.communicate(timeout=30)}")
                v = dict(w.split("=") for w in line.split()[1:])
                who = v.pop("who")
                views[who] = {k: int(x) for k, x in v.items()}
            time.sleep(hold_s)
            text = None
            if scrape:
                with urllib.request.urlopen(f"http://127.0.0.1:{scrape}/metrics", timeout=10) as r:
                    text = r.read().decode()
        finally:
            _, err = p.communicate(input="", timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(err, "")
        return views, text

    def latest(self, name, pid):
        """{attributes tuple: (value, metric, resource)} of the last export of pid."""
        out = {}
        for res, m, p in self.sink.points(name):
            if res.get("process.pid") != pid:
                continue
            v = p.as_double if p.WhichOneof("value") == "as_double" else p.as_int
            out[tuple(sorted(attrs(p).items()))] = (v, m, res, p)
        return out

    def check(self, view, cpu_s):
        pid = view["pid"]
        cpu = self.latest("process.cpu.time", pid)
        self.assertEqual(set(cpu), {(("cpu.mode", "user"),), (("cpu.mode", "system"),)})
        user, m, res, p = cpu[(("cpu.mode", "user"),)]
        self.assertEqual((m.unit, m.WhichOneof("data"), m.sum.is_monotonic, m.sum.aggregation_temporality),
                         ("s", "sum", True, 2))
        self.assertEqual(p.WhichOneof("value"), "as_double")
        self.assertGreater(p.start_time_unix_nano, 0)
        self.assertLess(abs(user - view["user_ms"] / 1000), 0.1 * view["user_ms"] / 1000,
                        f"user CPU {user} s, the process's own {view['user_ms']} ms")
        self.assertGreaterEqual(view["user_ms"], cpu_s * 1000 - 1)
        instance = res["service.instance.id"]
        want = {"process.thread.count": ("{thread}", view["threads"]),
                "process.open_file_descriptor.count": ("{file_descriptor}", view["fds"])}
        for name, (unit, value) in want.items():
            got = self.latest(name, pid)
            self.assertEqual(list(got), [()], name)
            v, m, r, _ = got[()]
            self.assertEqual((m.unit, m.WhichOneof("data"), m.sum.is_monotonic), (unit, "sum", False), name)
            self.assertEqual(v, value, name)
            self.assertEqual(r["service.instance.id"], instance, name)
        mem = self.latest("process.memory.usage", pid)[()]
        self.assertEqual(mem[1].unit, "By")
        # A live C program's resident bytes, not a count of pages.
        self.assertGreater(mem[0], 64 * os.sysconf("SC_PAGE_SIZE"))
        sw = self.latest("process.context_switches", pid)
        self.assertEqual(set(sw), {(("process.context_switch.type", "voluntary"),),
                                   (("process.context_switch.type", "involuntary"),)})
        for v, m, r, _ in sw.values():
            self.assertEqual((m.unit, m.sum.is_monotonic), ("{context_switch}", True))
            self.assertGreaterEqual(v, 0)
        self.assertGreater(sum(v for v, _, _, _ in sw.values()), 0)
        # Cumulative: never back, from one export to the next.
        series = [p.as_double for res, m, p in self.sink.points("process.cpu.time")
                  if res.get("process.pid") == pid and attrs(p) == {"cpu.mode": "user"}]
        self.assertEqual(series, sorted(series))
        return instance

    def test_each_process_its_own(self):
        port = free_port() if self.launcher else None
        extra = {"OTEL_METRICS_EXPORTER": "otlp,prometheus", "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
                 "OTEL_EXPORTER_PROMETHEUS_PORT": port} if port else {}
        views, text = self.run_program(scrape=port, **extra)
        parent = self.check(views["parent"], 1.5)
        child = self.check(views["child"], 0.3)
        self.assertNotEqual(parent, child)
        # (A sanitizer's runtime runs threads of its own in every process.)
        threads = (views["parent"]["threads"], views["child"]["threads"])
        if not self.launcher:
            # The shim's export thread is the process's too under plain LD_PRELOAD.
            if not SANITIZED:
                self.assertEqual(threads, (8, 4))
            return
        # Nothing of the shim runs in the programs: their own threads only.
        if not SANITIZED:
            self.assertEqual(threads, (7, 3))
        for who in ("parent", "child"):
            v = views[who]
            inst = parent if who == "parent" else child
            labels = f'instance="{inst}"'
            for fam, value in (("process_thread_count", v["threads"]),
                               ("process_open_file_descriptor_count", v["fds"])):
                m = re.search(r"^%s\{[^}]*%s[^}]*\} (\S+)$" % (fam, re.escape(labels)), text, re.M)
                self.assertIsNotNone(m, f"{fam} of {who} not in the exposition")
                self.assertEqual(float(m.group(1)), value, fam)
            m = re.search(r'^process_cpu_time_seconds_total\{[^}]*cpu_mode="user"[^}]*%s[^}]*\} (\S+)$'
                          % re.escape(labels), text, re.M)
            if m is None:
                m = re.search(r'^process_cpu_time_seconds_total\{[^}]*%s[^}]*cpu_mode="user"[^}]*\} (\S+)$'
                              % re.escape(labels), text, re.M)
            self.assertIsNotNone(m, f"process_cpu_time_seconds_total of {who} not in the exposition")
            self.assertLess(abs(float(m.group(1)) - v["user_ms"] / 1000), 0.1 * v["user_ms"] / 1000)
        self.assertIn("# TYPE process_cpu_time_seconds_total counter", text)
        self.assertIn("# TYPE process_context_switches_total counter", text)
        self.assertIn("# TYPE process_memory_usage_bytes gauge", text)

    def test_switched_off(self):
        views, _ = self.run_program(hold_s=0.6, NEMOLENS_PROCESS_METRICS="false")
        self.assertTrue(self.sink.points("gym.http.connection_pool.connect_total"), "nothing exported")
        for name in NAMES:
            self.assertEqual(self.sink.points(name), [], name)


class ProcessMetricsLauncher(ProcessMetrics):
    launcher = True


if __name__ == "__main__":
    unittest.main()
