# SPDX-License-Identifier: Apache-2.0
"""fork, vfork+exec, posix_spawn, threads and signal handlers under the shim:
each process reports exactly its own connections, under its own identity."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

CONNECTS = "gym.http.connection_pool.connect_total"
PROG = os.path.join(harness.BIN, "proc_tree")


class Processes(harness.ShimTestCase):

    def run_mode(self, mode, n):
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url,
                               SHORT_LIVED=os.path.join(harness.BIN, "short_lived"))
        p = harness.run([PROG, mode, str(self.listener.port), str(n)], env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        return p.stdout.splitlines()[-1].split()

    def totals(self):
        """(executable, pid, instance id) -> last cumulative connect count."""
        out = {}
        for res, _, p in self.sink.points(CONNECTS):
            out[(res["process.executable.name"], res["process.pid"], res["service.instance.id"])] = p.as_int
        return out

    def test_fork_vfork_exec_posix_spawn(self):
        n = 5
        words = self.run_mode("fork", n)
        self.assertEqual(words, ["parent", str(n), "child", "1", "vfork", "1", "spawn", "1"])
        totals = self.totals()
        # Each reports only its own; the _exit()ed child, which cannot flush,
        # through its parent, which delivers the segment it left.
        self.assertEqual(sorted((exe, count) for (exe, _, _), count in totals.items()),
                         sorted([("proc_tree", n), ("proc_tree", 2 * n), ("proc_tree", 2 * n), ("short_lived", n),
                                 ("short_lived", n)]))
        self.assertEqual(len({pid for (_, pid, _) in totals}), 5)
        self.assertEqual(len({iid for (_, _, iid) in totals}), 5)

    def test_threads_exact_total(self):
        n = 60
        words = self.run_mode("threads", n)
        self.assertEqual(words, ["threads", str(16 * n)])
        self.assertEqual(list(self.totals().values()), [16 * n])

    def test_threads_of_a_fork_child_racing_for_its_first_record(self):
        # The child's first record copies its parent's registry into a file
        # of its own; the threads that record meanwhile wait for it.
        n = 60
        p = harness.run([PROG, "forkthreads", str(self.listener.port), str(n)],
                        harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url), timeout=120)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertEqual(p.stdout.splitlines(), ["threads %d" % (16 * n), "parent 1 child 1"])
        self.assertEqual(sorted(self.totals().values()), [1, 16 * n])

    def test_signal_handlers_that_connect(self):
        words = self.run_mode("signals", 3000)
        main, handler, ticks = int(words[1]), int(words[3]), int(words[5])
        self.assertEqual(main, 3000)
        self.assertGreater(ticks, 0)
        self.assertEqual(list(self.totals().values()), [main + handler])

    def test_exec_inherits_no_fd_of_the_shim(self):
        # Exports (and the collector connection) happen before the exec.
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url, OTEL_METRIC_EXPORT_INTERVAL=50)
        args = [PROG, "exec", str(self.listener.port), "400"]
        shim = harness.run(args, env)
        base = harness.run(args, harness.plain_env())
        self.assertGreaterEqual(len(self.sink.raw), 2, "no export happened before the exec")
        self.assertEqual((shim.returncode, shim.stdout), (base.returncode, base.stdout))


if __name__ == "__main__":
    unittest.main(verbosity=2)
