# SPDX-License-Identifier: Apache-2.0
"""fork() while other threads hold the locks of the shim's parts.

tests/programs/fork_parts first uses the parts in a chosen order (the NeMo
Lens API's meter, the runtime through a first record, the hooks through a
connect), then forks while one thread makes new Lens series (the meter's
lock, then the registry's) and another connects (the hooks, the registry).
Each child records and connects once. Whatever the order of first use, every
fork returns and every child exits 0: under plain LD_PRELOAD (with an
exporter), under nemolens-run, and with libnemolens.so linked and no
preload. The prepare handlers' order itself is tested in tests/unit/test_fork.c.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

PROGRAM = os.path.join(harness.BIN, "fork_parts")
LAUNCHER = os.path.join(os.path.dirname(harness.SO), "nemolens-run")
SANITIZED = bool(os.environ.get("NL_SANITIZER_RUNTIME"))
# The order that deadlocked (the Lens API used before the first record) gets
# 3,000 forks under plain LD_PRELOAD, the other modes and orders fewer, for
# CI's time. A sanitizer's fork costs ten times as much.
FORKS = 200 if SANITIZED else 3000
FORKS_OTHER = 100 if SANITIZED else 500
TIMEOUT = 240


class ForkParts(harness.ShimTestCase):
    def env(self, mode):
        # New series keep being made past this limit (into the overflow), so the
        # registry's lock stays in use without the segment growing.
        extra = {"NEMOLENS_CARDINALITY_LIMIT": "200", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": self.sink.url,
                 "OTEL_METRIC_EXPORT_INTERVAL": "200"}
        env = harness.shim_env(**extra)
        return harness.for_launcher(env) if mode == "linked" else env

    def fork_parts(self, mode, order, forks):
        args = [PROGRAM, order, str(forks)]
        if mode == "run":
            args = [LAUNCHER, "--"] + args
        r = harness.run(args, self.env(mode), timeout=TIMEOUT)
        self.assertEqual(r.returncode, 0, f"{mode}/{order}: {r.stderr[-2000:]}")
        self.assertEqual(r.stdout.strip(), f"forks {forks}", f"{mode}/{order}: {r.stderr[-2000:]}")
        # Every child exits 0: one that records while its parent's threads make
        # new series copies an arena that changes under it (registry.h,
        # nl_registry_mend_copy), and a bad copy shows as a crash here.
        self.assertEqual(r.stderr.splitlines(), [], f"{mode}/{order}")

    def test_lens_first(self):
        for mode in ("preload", "run", "linked"):
            with self.subTest(mode=mode):
                self.fork_parts(mode, "lens", FORKS if mode == "preload" else FORKS_OTHER)

    def test_runtime_first(self):
        for mode in ("preload", "run", "linked"):
            with self.subTest(mode=mode):
                self.fork_parts(mode, "runtime", FORKS_OTHER)

    def test_hooks_first(self):
        for mode in ("preload", "run"):
            with self.subTest(mode=mode):
                self.fork_parts(mode, "hooks", FORKS_OTHER)


if __name__ == "__main__":
    unittest.main(verbosity=2)
