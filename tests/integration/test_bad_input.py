# SPDX-License-Identifier: Apache-2.0
"""Odd file descriptors, hostile configuration and huge destination sets:
the program behaves exactly as without the shim, warnings are one line per
problem, memory stays bounded, and what can be counted still is."""
import os
import socket
import subprocess
import threading
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402

CONNECTS = "gym.http.connection_pool.connect_total"
QUEUE = "gym.http.connection_pool.queue_duration_ms"
DEST = "nemo.gym.http.destination.server.name"
ODD = os.path.join(harness.BIN, "odd_fds")
SHORT = os.path.join(harness.BIN, "short_lived")


class BadInput(harness.ShimTestCase):

    def shim(self, **extra):
        return harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url, **extra)

    def test_invalid_fds_keep_return_values_and_errno(self):
        args = [ODD, "bad", str(self.listener.port)]
        base = harness.run(args, harness.plain_env())
        shim = harness.run(args, self.shim())
        self.assertEqual(base.returncode, 0)
        self.assertGreater(len(base.stdout.splitlines()), 25)
        self.assertEqual((shim.returncode, shim.stdout, shim.stderr), (base.returncode, base.stdout, base.stderr))

    def test_fd_number_reused_behind_libc_records_no_wait(self):
        full = harness.FullListener()
        try:
            p = harness.run([ODD, "reuse", str(full.port)], self.shim(NEMOLENS_DESTINATIONS=f"full=*:{full.port}"))
        finally:
            full.close()
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "reused 1 read 16\n", ""))
        self.assertEqual([pt.as_int for _, _, pt in self.sink.points(CONNECTS)], [1])
        self.assertEqual(self.sink.points(QUEUE), [], "a file read was taken for the connection's first I/O")

    def test_fds_closed_through_syscall_are_released_as_by_close(self):
        # libuv (Node.js, uvloop) closes with syscall(SYS_close): two pending
        # connects to a full listener, closed that way, are abandoned waits.
        full = harness.FullListener()
        try:
            p = harness.run([ODD, "uvclose", str(full.port)], self.shim(NEMOLENS_DESTINATIONS=f"full=*:{full.port}"))
        finally:
            full.close()
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "closed 0 0\n", ""))
        self.assertEqual([pt.as_int for _, _, pt in self.sink.points(CONNECTS)], [2])
        self.assertEqual([(attrs(pt)["nemo.gym.http.connection_pool.queue_outcome"], pt.count)
                          for _, _, pt in self.sink.points(QUEUE)], [("abandoned", 2)])

    def test_socket_on_a_high_fd(self):
        p = harness.run([ODD, "high", str(self.listener.port)], self.shim())
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "high fd 5000 so_error 0\n", ""))
        self.assertEqual([pt.as_int for _, _, pt in self.sink.points(CONNECTS)], [1])
        self.assertEqual([(attrs(pt)["nemo.gym.http.connection_pool.queue_outcome"], pt.count)
                          for _, _, pt in self.sink.points(QUEUE)], [("ok", 1)])

    def test_stderr_reused_as_a_socket_gets_no_warning(self):
        # The program closes stderr and fd 2 becomes its connection to a server;
        # the collector is down, so the shim has a warning to give, and must not
        # put it into the program's connection.
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        received = []

        def serve():
            c, _ = srv.accept()
            c.settimeout(10)
            data = b""
            while True:
                chunk = c.recv(4096)
                if not chunk:
                    break
                data += chunk
            received.append(data)
            c.close()
        t = threading.Thread(target=serve, daemon=True)
        t.start()
        dead = f"http://127.0.0.1:{harness.refused_port()}/v1/metrics"
        p = harness.run([ODD, "stderr", str(srv.getsockname()[1])],
                        harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=dead, NEMOLENS_LOG_PATH="stderr"))
        t.join(timeout=15)
        srv.close()
        self.assertEqual((p.returncode, p.stdout), (0, "stderr is a socket\n"))
        self.assertEqual(received, [b"hello\n"])

    def test_hostile_environment(self):
        hostile = {
            "OTEL_METRIC_EXPORT_INTERVAL": "-5",
            "OTEL_METRIC_EXPORT_TIMEOUT": "9" * 400,
            "OTEL_EXPORTER_OTLP_TIMEOUT": "ten",
            "OTEL_EXPORTER_OTLP_HEADERS": "a=%zz,b",
            "OTEL_RESOURCE_ATTRIBUTES": "k=" + "x" * 100000 + ",bad=\udcff",
            "OTEL_SERVICE_NAME": "caf\udce9",
            "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "sideways",
            "NEMOLENS_MEMORY_SAMPLE_INTERVAL_MS": "0",
            # 10,000 rules (one kernel limit: 128 KiB per variable)
            "NEMOLENS_DESTINATIONS": ",".join(f"a=*:{i + 1}" for i in range(10000)) + ",junk,=,a=b=c",
            "NEMOLENS_LOG_LEVEL": "verbose",
            "NEMOLENS_CARDINALITY_LIMIT": "-1",
        }
        env = self.shim(**hostile, NEMOLENS_LOG_PATH="stderr")   # the warnings on stderr, to check them
        env = {k: v.encode("utf-8", "surrogateescape") for k, v in env.items()}
        args = [SHORT, str(self.listener.port), "3", "0"]
        base = subprocess.run(args, env=harness.plain_env(), capture_output=True, timeout=60)
        shim = subprocess.run(args, env=env, capture_output=True, timeout=60)
        self.assertEqual((shim.returncode, shim.stdout), (base.returncode, base.stdout))
        warnings = shim.stderr.decode(errors="replace").splitlines()
        self.assertTrue(all(w.startswith("nemolens: ") and len(w) < 400 for w in warnings), warnings)
        self.assertGreaterEqual(len(warnings), len(hostile) - 3, warnings)
        self.assertLessEqual(len(warnings), len(hostile) + 3, warnings)
        # Still exported: the invalid values fell back to their defaults.
        self.assertEqual(sum(pt.as_int for _, _, pt in self.sink.points(CONNECTS)), 3)
        for res, _, _ in self.sink.points(CONNECTS):
            self.assertEqual(res["service.name"], "caf?")

    def test_hundred_thousand_destinations_stay_bounded(self):
        named = 300
        rules = ",".join(f"d{i}=127.1.{i // 256}.{i % 256}:*" for i in range(named))
        port = harness.refused_port()
        env = self.shim(NEMOLENS_DESTINATIONS=rules, NEMOLENS_LOG_LEVEL="error")
        p = harness.run([os.path.join(harness.BIN, "spray"), str(port), "100000", str(named)], env, timeout=300)
        self.assertEqual((p.returncode, p.stdout), (0, f"external 100000 named {named}\n"))
        pts = self.sink.latest_by_instance(CONNECTS)
        by_dest = {attrs(pt).get(DEST, "<overflow>"): pt.as_int for _, _, pt in pts}
        self.assertEqual(by_dest.pop("external"), 100000)
        overflow = [pt for _, _, pt in pts if attrs(pt) == {"otel.metric.overflow": True}]
        self.assertEqual(len(overflow), 1)
        self.assertEqual(overflow[0].as_int, named - 256)
        by_dest.pop("<overflow>")
        self.assertEqual(len(by_dest), 256)
        self.assertTrue(all(v == 1 for v in by_dest.values()))


if __name__ == "__main__":
    unittest.main(verbosity=2)
