"""Out of the program's way: a collector that accepts connections and never
answers holds no fork back and costs an exit little, and what the processes
recorded meanwhile is not lost: once the collector answers, every value of
every process arrives, exactly, under that process's own resource. Timings
are printed (the bench measures them); the counts are asserted."""
import os
import re
import socket
import statistics
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

CONNECTS = "gym.http.connection_pool.connect_total"
SHORT_LIVED = os.path.join(harness.BIN, "short_lived")
PY = os.path.basename(os.path.realpath(harness.PYTHON))
SANITIZED = bool(os.environ.get("NL_SANITIZER_RUNTIME"))


class Gate:
    """A collector's address that first blackholes (accepts, reads, never
    answers) and, once opened, forwards every new connection to the sink.
    Connections held while it was a hole are closed when it opens."""

    def __init__(self, sink_port):
        self.sink_port = sink_port
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1/metrics"
        self.is_open = False
        self.held = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                if not self.is_open:
                    self.held.append(c)
                    threading.Thread(target=self._drain, args=(c,), daemon=True).start()
                    continue
            threading.Thread(target=self._forward, args=(c,), daemon=True).start()

    @staticmethod
    def _drain(c):
        try:
            while c.recv(65536):
                pass
        except OSError:
            pass

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _forward(self, c):
        try:
            up = socket.create_connection(("127.0.0.1", self.sink_port))
        except OSError:
            c.close()
            return
        threading.Thread(target=self._pump, args=(up, c), daemon=True).start()
        self._pump(c, up)

    def open(self):
        with self.lock:
            self.is_open = True
            held, self.held = self.held, []
        for c in held:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def close(self):
        self.open()
        self.sock.close()


CONN = r"""
import os, socket, sys, time
def conn(port, n):
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.close()
"""

# Connects once, waits until the exporter thread is inside an export to the
# silent collector, then forks N children one after the other, timing each
# fork() in the parent; child i connects i + 1 times and ends with exit()
# (its exit flush meets the silent collector) or _exit().
FORKS = CONN + r"""
port, n, wait = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
conn(port, 1)
time.sleep(wait)
took = []
for i in range(n):
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        conn(port, i + 1)
        if i % 2:
            os._exit(0)
        sys.exit(0)
    took.append(time.monotonic() - t0)
    _, status = os.waitpid(pid, 0)
    print("child", pid, status, flush=True)
print("fork_ms", " ".join(f"{1000 * t:.3f}" for t in took), flush=True)
"""


class OutOfTheWay(harness.ShimTestCase):

    def setUp(self):
        super().setUp()
        self.gate = Gate(self.sink.port)

    def tearDown(self):
        self.gate.close()

    def env(self, **extra):
        settings = {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": self.gate.url, "OTEL_METRIC_EXPORT_INTERVAL": 200}
        settings.update(extra)
        return harness.shim_env(**settings)

    def finals(self):
        """instance id -> (pid, executable, last connect_total)."""
        out = {}
        for res, _, p in self.sink.points(CONNECTS):
            out[res["service.instance.id"]] = (res["process.pid"], res["process.executable.name"], p.as_int)
        return out

    def wait_for(self, cond, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end and not cond():
            time.sleep(0.05)
        return cond()

    def deliver_through_open_gate(self):
        """The collector answers again: the next shim process delivers what
        the others left (it lives for a few of its export intervals)."""
        self.gate.open()
        q = harness.run([SHORT_LIVED, str(self.listener.port), "1", "1500"], self.env())
        self.assertEqual(q.returncode, 3, q.stderr)
        return q

    def test_fork_under_a_blackholed_collector(self):
        n = 10
        p = harness.run([harness.PYTHON, "-c", FORKS, str(self.listener.port), str(n), "0.6"], self.env(),
                        timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        children = {int(pid): int(st) for pid, st in re.findall(r"child (\d+) (-?\d+)\n", p.stdout)}
        self.assertEqual(list(children.values()), [0] * n, p.stdout)
        took = [float(t) for t in re.search(r"fork_ms (.*)\n", p.stdout).group(1).split()]
        print(f"\n  fork() while the exporter waits on a silent collector: median {statistics.median(took):.2f} ms, "
              f"max {max(took):.2f} ms", file=sys.stderr)
        if not SANITIZED:
            # It waited 100 ms for every export; a fork takes a few ms.
            self.assertLess(statistics.median(took), 50)
        self.assertEqual(self.sink.raw, [], "the collector never answered")
        self.deliver_through_open_gate()
        expected = 1 + n * (n + 1) // 2 + 1
        self.assertTrue(self.wait_for(lambda: sum(v for _, _, v in self.finals().values()) >= expected, 10))
        finals = self.finals()
        by_pid = {pid: (exe, v) for pid, exe, v in finals.values()}
        for i, pid in enumerate(children):
            self.assertEqual(by_pid.get(pid), (PY, i + 1), f"child {i} (pid {pid})")
        self.assertEqual(sorted(v for _, exe, v in finals.values() if exe == PY)[-1], n)
        self.assertEqual(len(finals), n + 2, finals)
        self.assertEqual(sum(v for _, _, v in finals.values()), expected)

    def test_exit_under_a_blackholed_collector(self):
        env = self.env(OTEL_METRIC_EXPORT_INTERVAL=60000, NEMOLENS_LOG_PATH="stderr")
        took = []
        pids = []
        for n in (2, 3, 4):
            t0 = time.monotonic()
            p = harness.run([harness.PYTHON, "-c", CONN + "conn(int(sys.argv[1]), int(sys.argv[2]))\n"
                             "print(os.getpid())", str(self.listener.port), str(n)], env)
            took.append(time.monotonic() - t0)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertRegex(p.stderr, r"they are kept, for the next shim process to deliver\n$")
            pids.append(int(p.stdout))
        plain = []
        for _ in range(3):
            t0 = time.monotonic()
            harness.run([harness.PYTHON, "-c", CONN + "conn(int(sys.argv[1]), 2)", str(self.listener.port)],
                        {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
            plain.append(time.monotonic() - t0)
        print(f"\n  exit of a short Python process, silent collector: {1000 * statistics.median(took):.0f} ms, "
              f"without the shim {1000 * statistics.median(plain):.0f} ms", file=sys.stderr)
        self.assertEqual(self.sink.raw, [])
        self.deliver_through_open_gate()
        self.assertTrue(self.wait_for(lambda: len(self.finals()) == 4, 10))
        by_pid = {pid: (exe, v) for pid, exe, v in self.finals().values()}
        self.assertEqual([by_pid.get(pid) for pid in pids], [(PY, 2), (PY, 3), (PY, 4)])


if __name__ == "__main__":
    unittest.main(verbosity=2)
