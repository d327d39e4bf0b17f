# SPDX-License-Identifier: Apache-2.0
"""The Python runtime through the adapter: gym.event_loop.* from uvicorn's
loops (asyncio's and uvloop's) and gym.gc.* from the collector, under the
real shim, checked at the OTLP sink; the switches; standing aside for NeMo
Gym's own observer; an unknown Python or a broken asyncio costing a log
line and nothing else. Only the interpreter of the machine is run (Debian
12: CPython 3.11)."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "py_adapter")
LAG = "gym.event_loop.lag_ms"
TASKS = "gym.event_loop.tasks"
PAUSE = "gym.gc.pause_duration_ms"
COLLECTIONS = "gym.gc.collections_total"
COLLECTED = "gym.gc.collected_total"
UNCOLLECTABLE = "gym.gc.uncollectable_total"
COUNT = "gym.gc.count"
GEN = "nemo.gym.gc.generation"
ALL = (LAG, TASKS, PAUSE, COLLECTIONS, COLLECTED, UNCOLLECTABLE, COUNT)
BOUNDS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 5000, 30000]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path, timeout=10):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.read()


def lag_hist(sink):
    pts = [p for _, _, p in sink.latest_by_instance(LAG)]
    if not pts:
        return None
    assert len(pts) == 1, pts
    return pts[0]


def at_least(p, ms):
    """Samples of histogram point p in buckets wholly at or above ms."""
    return sum(c for c, lo in zip(p.bucket_counts, [float("-inf")] + list(p.explicit_bounds)) if lo >= ms)


def p99_bound(p):
    """The upper bound of the bucket that holds the 99th percentile."""
    need, seen = 0.99 * p.count, 0
    for c, hi in zip(p.bucket_counts, list(p.explicit_bounds) + [float("inf")]):
        seen += c
        if seen >= need:
            return hi
    return float("inf")


class Uvicorn(unittest.TestCase):
    LOOP = "asyncio"

    def serve(self, **extra):
        harness.new_runtime_dir()
        sink = harness.start_sink(self)
        port = free_port()
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=sink.url, OTEL_METRIC_EXPORT_INTERVAL=200,
                               NEMOLENS_EVENT_LOOP_LAG_INTERVAL_MS=20, **extra)
        env["PYTHONPATH"] = APPS + ":" + env.get("PYTHONPATH", "")
        p = subprocess.Popen([harness.PYTHON, "-m", "uvicorn", "runtime_app:app", "--port", str(port),
                              "--loop", self.LOOP, "--log-level", "warning"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def stop():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
                try:
                    p.communicate(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.communicate()
        self.addCleanup(stop)

        def up():
            try:
                return get(port, "/ok", timeout=1) == b"ok"
            except OSError:
                return False
        harness.wait_for(up, 30, "uvicorn to answer", interval=0.1, alive=p)
        return p, port, sink, stop

    def test_blocking_handler_shows_as_lag(self):
        p, port, sink, stop = self.serve()
        for _ in range(5):
            self.assertEqual(get(port, "/block"), b"ok")
            # The probe asks to be woken every 20 ms: each block holds at
            # least one wake-up back by more than 100 ms.
        stop()
        self.assertEqual(p.returncode, 0, p.stderr)
        h = lag_hist(sink)
        self.assertIsNotNone(h)
        self.assertEqual(list(h.explicit_bounds), BOUNDS)
        self.assertGreaterEqual(at_least(h, 100), 5, list(h.bucket_counts))
        self.assertGreaterEqual(h.max, 150)
        # Tasks are off unless switched on.
        self.assertEqual(sink.points(TASKS), [])

    def test_quiet_loop_and_tasks_in_flight(self):
        p, port, sink, stop = self.serve(NEMOLENS_EVENT_LOOP_TASKS="true")
        for _ in range(50):
            get(port, "/ok")
        n = 6
        threads = [threading.Thread(target=get, args=(port, "/hold", 30)) for _ in range(n)]
        for t in threads:
            t.start()

        def tasks():
            pts = [p for _, _, p in sink.latest_by_instance(TASKS)]
            return pts and pts[0].as_int >= n
        harness.wait_for(tasks, 20, lambda: f"{TASKS} >= {n}: {sink.latest_by_instance(TASKS)}", alive=p)
        get(port, "/release")
        for t in threads:
            t.join(30)

        def settled():
            pts = [p for _, _, p in sink.latest_by_instance(TASKS)]
            return pts and pts[0].as_int < n
        harness.wait_for(settled, 20, f"{TASKS} below {n} once released", alive=p)
        stop()
        self.assertEqual(p.returncode, 0, p.stderr)
        h = lag_hist(sink)
        self.assertGreater(h.count, 20)
        self.assertLessEqual(p99_bound(h), 50, list(h.bucket_counts))

    def test_switched_off(self):
        p, port, sink, stop = self.serve(NEMOLENS_EVENT_LOOP_LAG="false", NEMOLENS_PYTHON_GC="false")
        get(port, "/block")
        get(port, "/ok")
        stop()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(sink.points("http.server.request.duration"))   # the process did export
        for name in ALL:
            self.assertEqual(sink.points(name), [], name)


class UvicornUvloop(Uvicorn):
    LOOP = "uvloop"


GC_PROGRAM = """
import asyncio, gc
gc.disable()
for _ in range(10):
    gc.collect()
print("done")
"""


class Collector(unittest.TestCase):
    def run_program(self, code, **extra):
        harness.new_runtime_dir()
        sink = harness.start_sink(self)
        log = tempfile.NamedTemporaryFile(prefix="nl-runtime-log-", delete=False)
        log.close()
        self.addCleanup(os.unlink, log.name)
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=sink.url, NEMOLENS_LOG_PATH=log.name, **extra)
        p = harness.run([harness.PYTHON, "-c", code], env)
        with open(log.name) as f:
            return p, sink, f.read()

    def by_gen(self, sink, name):
        return {attrs(p)[GEN]: p for _, _, p in sink.latest_by_instance(name)}

    def test_ten_collections_of_generation_2(self):
        p, sink, log = self.run_program(GC_PROGRAM)
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "done\n", ""))
        self.assertEqual(self.by_gen(sink, COLLECTIONS)[2].as_int, 10)
        pause = self.by_gen(sink, PAUSE)[2]
        self.assertEqual(pause.count, 10)
        self.assertGreater(pause.sum, 0)
        self.assertEqual(list(pause.explicit_bounds), BOUNDS)
        self.assertIn(2, self.by_gen(sink, COLLECTED))
        self.assertIn(2, self.by_gen(sink, UNCOLLECTABLE))
        self.assertEqual(sorted(self.by_gen(sink, COUNT)), [0, 1, 2])
        self.assertEqual(log, "")

    def test_collected_and_uncollectable(self):
        code = ("import asyncio, gc\n"
                "gc.disable()\n"
                "class C:\n"
                "    pass\n"
                "for _ in range(100):\n"
                "    a, b = C(), C(); a.b, b.a = b, a\n"
                "del a, b\n"
                "print(gc.collect())\n")
        p, sink, log = self.run_program(code)
        self.assertEqual(p.returncode, 0, p.stderr)
        freed = int(p.stdout)
        self.assertGreaterEqual(freed, 200)
        self.assertEqual(self.by_gen(sink, COLLECTED)[2].as_int, freed)
        self.assertEqual(self.by_gen(sink, UNCOLLECTABLE)[2].as_int, 0)

    def test_switched_off(self):
        p, sink, log = self.run_program(GC_PROGRAM, NEMOLENS_PYTHON_GC="off")
        self.assertEqual((p.returncode, p.stdout), (0, "done\n"))
        for name in ALL:
            self.assertEqual(sink.points(name), [], name)

    def test_gym_observer_present(self):
        # NeMo Gym's observer records these names itself: the adapter, which
        # sees the module imported, records none of them, so each name has
        # one source. Imported before asyncio or after, the same.
        d = tempfile.mkdtemp(prefix="nl-gym-")
        self.addCleanup(__import__("shutil").rmtree, d, True)
        os.makedirs(os.path.join(d, "nemo_gym", "telemetry"))
        for f in ("nemo_gym/__init__.py", "nemo_gym/telemetry/__init__.py"):
            open(os.path.join(d, f), "w").close()
        with open(os.path.join(d, "nemo_gym", "telemetry", "observer.py"), "w") as f:
            f.write("RECORDS = ('gym.event_loop.lag_ms', 'gym.gc.pause_duration_ms')\n")
        for first in ("before", "after"):
            with self.subTest(first):
                body = ("import asyncio, gc\n"
                        "async def main():\n"
                        "    await asyncio.sleep(0.3)\n"
                        "gc.disable()\n"
                        "asyncio.run(main())\n"
                        "for _ in range(10):\n"
                        "    gc.collect()\n"
                        "print('done')\n")
                imp = "import nemo_gym.telemetry.observer\n"
                code = "import sys; sys.path.insert(0, %r)\n" % d + (imp + body if first == "before" else
                                                                       body.replace("gc.disable()\n", "gc.disable()\n" + imp))
                p, sink, log = self.run_program(code, NEMOLENS_EVENT_LOOP_LAG_INTERVAL_MS=20,
                                                NEMOLENS_EVENT_LOOP_TASKS="on")
                self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "done\n", ""))
                for name in ALL:
                    self.assertEqual(sink.points(name), [], name)
                # Without the observer the same program records them.
                p, sink, log = self.run_program("import sys; sys.path.insert(0, %r)\n" % d + body,
                                                NEMOLENS_EVENT_LOOP_LAG_INTERVAL_MS=20)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertTrue(sink.points(LAG))
                self.assertEqual(self.by_gen(sink, COLLECTIONS)[2].as_int, 10)


SLEEPER_PROGRAM = """
import asyncio, time
HOG = 0.03
async def main():
    loop = asyncio.get_running_loop()
    def hog():
        # Always one ready callback that holds the loop 30 ms: a timer's
        # callback runs behind one, what it schedules behind the next.
        t = time.perf_counter()
        while time.perf_counter() - t < HOG:
            pass
        loop.call_soon(hog)
    lags = []
    async def sleeper():
        for _ in range(30):
            t = loop.time()
            await asyncio.sleep(0.02)
            lags.append((loop.time() - t - 0.02) * 1000)
    loop.call_soon(hog)
    s = asyncio.ensure_future(sleeper())
    print(len(asyncio.all_tasks()))
    await s
    print(min(lags) >= 55)
asyncio.run(main())
"""


class Probe(unittest.TestCase):
    run_program = Collector.run_program

    def test_lag_is_a_sleeping_coroutines(self):
        # Gym's lag is how late a sleeping coroutine wakes up. With a
        # callback that holds the loop 30 ms always ready, such a coroutine
        # wakes at least 60 ms late: its timer runs behind one hold, the
        # wake-up it schedules behind the next. A plain timer callback
        # would count only the first. The probe counts both, and is no
        # task of the program's.
        p, sink, log = self.run_program(SLEEPER_PROGRAM, NEMOLENS_EVENT_LOOP_LAG_INTERVAL_MS=20)
        self.assertEqual((p.returncode, p.stdout, p.stderr, log), (0, "2\nTrue\n", "", ""))
        h = lag_hist(sink)
        self.assertGreaterEqual(h.count, 10)
        self.assertGreaterEqual(h.min, 55, list(h.bucket_counts))


class Unknown(unittest.TestCase):
    """A Python the adapter does not know, or an asyncio it cannot wrap:
    one line in the shim's log, and the program runs as without it."""

    def run_both(self, code, pythonpath=None):
        harness.new_runtime_dir()
        sink = harness.start_sink(self)
        log = tempfile.NamedTemporaryFile(prefix="nl-runtime-log-", delete=False)
        log.close()
        self.addCleanup(os.unlink, log.name)
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=sink.url, NEMOLENS_LOG_PATH=log.name)
        if pythonpath:
            env["PYTHONPATH"] = pythonpath + ":" + env.get("PYTHONPATH", "")
        plain = harness.run([harness.PYTHON, "-c", code], harness.without_shim(env))
        shim = harness.run([harness.PYTHON, "-c", code], env)
        with open(log.name) as f:
            lines = [ln for ln in f.read().splitlines() if ln.strip()]
        return plain, shim, lines, sink

    def test_python_outside_3_9_to_3_13(self):
        code = ("import sys\n"
                "sys.version_info = (3, 14, 0, 'final', 0)\n"
                "import asyncio, gc\n"
                "asyncio.run(asyncio.sleep(0.05))\n"
                "gc.collect()\n"
                "print('done', sys.version_info[:2])\n")
        plain, shim, lines, sink = self.run_both(code)
        self.assertEqual((shim.returncode, shim.stdout, shim.stderr), (plain.returncode, plain.stdout, plain.stderr))
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("3.14", lines[0])
        for name in ALL:
            self.assertEqual(sink.points(name), [], name)

    def test_broken_asyncio(self):
        # An asyncio whose loop class has no run_forever: first on the path.
        d = tempfile.mkdtemp(prefix="nl-asyncio-")
        self.addCleanup(__import__("shutil").rmtree, d, True)
        os.makedirs(os.path.join(d, "asyncio"))
        with open(os.path.join(d, "asyncio", "__init__.py"), "w") as f:
            f.write("from . import base_events\n")
        with open(os.path.join(d, "asyncio", "base_events.py"), "w") as f:
            f.write("class BaseEventLoop:\n    pass\n")
        code = "import asyncio, gc\ngc.collect()\nprint('done', asyncio.base_events.BaseEventLoop.__dict__.keys() - {'__module__', '__dict__', '__weakref__', '__doc__'})\n"
        plain, shim, lines, sink = self.run_both(code, pythonpath=d)
        self.assertEqual((shim.returncode, shim.stdout, shim.stderr), (plain.returncode, plain.stdout, plain.stderr))
        self.assertEqual(plain.stdout, "done set()\n")
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("asyncio", lines[0])
        # The collector is another part: it still records.
        self.assertTrue(sink.points(COLLECTIONS))


if __name__ == "__main__":
    unittest.main(verbosity=2)
