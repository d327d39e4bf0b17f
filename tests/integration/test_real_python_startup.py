# SPDX-License-Identifier: Apache-2.0
"""CPython's own tests of how an interpreter starts, imports and runs its
children (libpython3.11-testsuite: test_site, test_import, test_subprocess,
test_venv) give the same per-test results under the shim, with its Python
adapter delivered into every interpreter they start, as without it."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
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
        plain = harness.plain_env(OTEL_METRICS_EXPORTER="none")
        plain.pop("PYTHONPATH", None)
        shim = harness.shim_env(OTEL_METRICS_EXPORTER="none")
        shim.pop("PYTHONPATH", None)
        # Each run its own user site (test_site reads and changes what is
        # there), made as a user's usual one: run side by side with one
        # shared, either run could see the other's in the middle of a test.
        for e in (plain, shim):
            e["PYTHONUSERBASE"] = tempfile.mkdtemp(prefix="nl-test-userbase-", dir="/dev/shm")
            self.addCleanup(shutil.rmtree, e["PYTHONUSERBASE"], True)
            site = subprocess.run([harness.PYTHON, "-c", "import site; print(site.getusersitepackages())"], env=e,
                                  capture_output=True, text=True, check=True).stdout.strip()
            os.makedirs(site)
        # Both runs at once: each is mostly one busy interpreter, and the
        # machine has a core for each.
        t0 = time.monotonic()
        procs = [subprocess.Popen(args, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/tmp")
                 for e in (plain, shim)]
        outs = [p.communicate(timeout=900) for p in procs]
        t1 = time.monotonic()
        base = subprocess.CompletedProcess(args, procs[0].returncode, *outs[0])
        mine = subprocess.CompletedProcess(args, procs[1].returncode, *outs[1])
        a, b = results(base.stdout + base.stderr), results(mine.stdout + mine.stderr)
        self.assertGreater(len(a), 300, "the suites ran too few tests to compare")
        self.assertEqual({k: v for k, v in b.items() if k not in a}, {})
        self.assertEqual({k: v for k, v in a.items() if k not in b}, {})
        self.assertEqual(b, a)
        self.assertEqual(mine.returncode, base.returncode)
        outcomes = {}
        for (_, outcome), n in a.items():
            outcomes[outcome.split()[0]] = outcomes.get(outcome.split()[0], 0) + n
        print(f"\n  {len(a)} results identical ({outcomes}); both runs side by side in {t1 - t0:.1f}s",
              file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
