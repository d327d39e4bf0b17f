# SPDX-License-Identifier: Apache-2.0
"""nemo.run.id: one value on every process of a run, from NeMo Gym's
variable, else Slurm's, else made by the tree's outermost process.

A shell runs two programs that connect, one of which forks a child; so the
tree holds processes made by exec (the programs), by fork (the child), and
a shell that records nothing. Under plain LD_PRELOAD and under nemolens-run,
every process that exports carries the same nemo.run.id: the one the
environment gives, else 12 hex digits, different for two runs."""
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

QUIET = os.path.join(harness.BIN, "quiet_client")
LAUNCHER = os.path.join(os.path.dirname(harness.SO), "nemolens-run")
CONNECT = "gym.http.connection_pool.connect_total"


class RunIdentity(harness.ShimTestCase):
    def run_ids(self, launcher, **extra):
        """The nemo.run.id of every process that exported (by instance)."""
        self.sink.reset()
        harness.new_runtime_dir()
        port = str(self.listener.port)
        script = f'"{QUIET}" {port} 1 0 >/dev/null 2>&1; "{QUIET}" {port} 1 1 >/dev/null 2>&1'
        args = ["/bin/sh", "-c", script]
        if launcher:
            env = harness.launcher_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{self.sink.port}", **extra)
            args = [LAUNCHER, "--"] + args
        else:
            env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url, **extra)
        for k in ("NEMO_GYM_OTEL_RUN_ID", "SLURM_JOB_ID", "NEMOLENS_RUN_ID"):
            if k not in extra:
                env.pop(k, None)
        p = harness.run(args, env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        ids = {res["service.instance.id"]: res.get("nemo.run.id") for res, _, _ in self.sink.points(CONNECT)}
        # Two programs and the child one of them forks.
        self.assertEqual(len(ids), 3, ids)
        return set(ids.values())

    def test_each_source_in_both_modes(self):
        for launcher in (False, True):
            with self.subTest(launcher=launcher, source="gym"):
                self.assertEqual(self.run_ids(launcher, NEMO_GYM_OTEL_RUN_ID="gym-run-7", SLURM_JOB_ID="4242"),
                                 {"gym-run-7"})
            with self.subTest(launcher=launcher, source="slurm"):
                self.assertEqual(self.run_ids(launcher, SLURM_JOB_ID="4242"), {"4242"})
            with self.subTest(launcher=launcher, source="made by the tree"):
                first = self.run_ids(launcher)
                second = self.run_ids(launcher)
                self.assertEqual(len(first), 1, first)
                self.assertRegex(next(iter(first)), re.compile(r"^[0-9a-f]{12}$"))
                self.assertNotEqual(first, second, "two runs, two ids")


if __name__ == "__main__":
    unittest.main(verbosity=2)
