# SPDX-License-Identifier: Apache-2.0
"""Nothing a fork child records is lost while its parent's threads connect.

tests/programs/fork_stress starts four threads that connect to eight
listeners in turn, so that their first connects make new series (the
registry's lock, the destinations, the call sites) while the main thread
forks twelve children at once (with fork(), or with clone() without
CLONE_VM, for which libc runs no fork handlers). Each child connects twice
and leaves: by _exit, exit, SIGKILL or exec. Under plain LD_PRELOAD (every process exports
for itself, the parent's exporter thread running all along) and under
nemolens-run, in many runs, every connect of every process must reach the
collector, each child's under an instance of its own, and the program must
behave as without the shim."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402

PROGRAM = os.path.join(harness.BIN, "fork_stress")
LAUNCHER = os.path.join(os.path.dirname(harness.SO), "nemolens-run")
CONNECT = "gym.http.connection_pool.connect_total"
DEST = "nemo.gym.http.destination.server.name"
SANITIZED = bool(os.environ.get("NL_SANITIZER_RUNTIME"))
ROUNDS = 24
CHILDREN = 12
LEAVES = ("_exit", "exit", "kill", "exec")
# Per mode and way of leaving: 96 runs in all in the gcc build, some five
# seconds; 63 in a sanitizer build, whose forks cost several times as much.
RUNS = 9 if SANITIZED else 12
# clone() children: fewer, the same paths after the handlers.
CLONE_RUNS = 3


class ForkStress(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.listeners = [harness.AcceptingListener(backlog=512) for _ in range(8)]
        cls.ports = [lst.port for lst in cls.listeners]
        cls.sink = harness.start_sink(cls)
        cls.destinations = ",".join(f"p{p}=127.0.0.1:{p}" for p in cls.ports)

    @classmethod
    def tearDownClass(cls):
        for lst in cls.listeners:
            lst.close()

    def run_once(self, mode, make, leave):
        self.sink.reset()
        harness.new_runtime_dir()
        args = [PROGRAM, str(ROUNDS), str(CHILDREN), make, leave] + [str(p) for p in self.ports]
        extra = {"NEMOLENS_DESTINATIONS": self.destinations}
        if mode == "launcher":
            env = harness.launcher_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{self.sink.port}",
                                       OTEL_METRIC_EXPORT_INTERVAL="100", **extra)
            args = [LAUNCHER, "--"] + args
        else:
            env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url,
                                   OTEL_METRIC_EXPORT_INTERVAL="50", **extra)
        p = harness.run(args, env, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "", "the shim printed warnings")
        did = json.loads(p.stdout)
        self.assertEqual(did["children_ended_as_told"], CHILDREN)
        per_dest, per_instance = {}, {}
        for res, _, pt in self.sink.latest_by_instance(CONNECT):
            dest = attrs(pt)[DEST]
            per_dest[dest] = per_dest.get(dest, 0) + pt.as_int
            inst = res["service.instance.id"]
            per_instance[inst] = per_instance.get(inst, 0) + pt.as_int
        want = {f"p{port}": n for port, n in did["connects"].items()}
        self.assertEqual(per_dest, want)
        # The parent's own, and two of each child's under its own instance.
        self.assertEqual(sorted(per_instance.values()), [2] * CHILDREN + [4 * ROUNDS])

    def stress(self, make, runs):
        for mode in ("preload", "launcher"):
            for leave in LEAVES:
                # A child that exits under plain LD_PRELOAD exports, which
                # allocates; AddressSanitizer's allocator (gcc 12's) takes
                # no lock around fork(), so a child forked while another
                # thread of the parent allocates (the exporter thread, a
                # first unwind of a call site) can wait for ever on the
                # allocator's lock. glibc's allocator is fork-safe.
                if SANITIZED and mode == "preload" and leave == "exit":
                    continue
                for i in range(runs):
                    with self.subTest(mode=mode, leave=leave, run=i):
                        self.run_once(mode, make, leave)

    def test_fork_while_threads_connect(self):
        self.stress("fork", RUNS)

    def test_clone_while_threads_connect(self):
        self.stress("clone", CLONE_RUNS)

if __name__ == "__main__":
    unittest.main(verbosity=2)
