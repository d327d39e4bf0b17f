"""CPython's own tests of how an interpreter starts, imports and runs its
children (libpython3.11-testsuite: test_site, test_import, test_subprocess,
test_venv) give the same per-test results under the shim, with its Python
adapter delivered into every interpreter they start, as without it."""
import os
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

SUITES = ["test_site", "test_import", "test_subprocess", "test_venv"]


def results(output):
    """{(test line, outcome): how often} from unittest's verbose output."""
    res = {}
    for m in re.finditer(r"^(.*) \.\.\. (ok|skipped .*|FAIL|ERROR|expected failure|unexpected success)$",
                         output, re.M):
        key = (m.group(1), m.group(2))
        res[key] = res.get(key, 0) + 1
    return res


class CPythonStartupSuites(unittest.TestCase):
    def test_same_results_with_and_without_the_shim(self):
        harness.new_runtime_dir()
        args = [harness.PYTHON, "-m", "test", "-v", *SUITES]
        plain = harness.shim_env(OTEL_METRICS_EXPORTER="none")
        del plain["LD_PRELOAD"]
        plain.pop("PYTHONPATH", None)
        shim = harness.shim_env(OTEL_METRICS_EXPORTER="none")
        shim.pop("PYTHONPATH", None)
        t0 = time.monotonic()
        base = subprocess.run(args, env=plain, capture_output=True, text=True, timeout=900, cwd="/tmp")
        t1 = time.monotonic()
        mine = subprocess.run(args, env=shim, capture_output=True, text=True, timeout=900, cwd="/tmp")
        t2 = time.monotonic()
        a, b = results(base.stdout + base.stderr), results(mine.stdout + mine.stderr)
        self.assertGreater(len(a), 300, "the suites ran too few tests to compare")
        self.assertEqual({k: v for k, v in b.items() if k not in a}, {})
        self.assertEqual({k: v for k, v in a.items() if k not in b}, {})
        self.assertEqual(b, a)
        self.assertEqual(mine.returncode, base.returncode)
        outcomes = {}
        for (_, outcome), n in a.items():
            outcomes[outcome.split()[0]] = outcomes.get(outcome.split()[0], 0) + n
        print(f"\n  {len(a)} results identical ({outcomes}); wall {t1 - t0:.1f}s without, "
              f"{t2 - t1:.1f}s with the shim", file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
