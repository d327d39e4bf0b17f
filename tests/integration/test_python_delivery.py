# SPDX-License-Identifier: Apache-2.0
"""How the shim delivers its Python adapter: every Python process gets it,
the program sees the sys.path and PYTHONPATH it would have had without the
shim, its own sitecustomize still runs once, children get it too, and
python -I/-E/-S, NEMOLENS_PYTHON=off and programs that are not Python get
nothing at all."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

STATE = (
    "import sys, os, json\n"
    "print(json.dumps({'path': sys.path, 'pythonpath': os.environ.get('PYTHONPATH'),\n"
    "  'env': sorted(k for k in os.environ if k.startswith('NEMOLENS_PYTHON_SAVED')),\n"
    "  'adapter': any(hasattr(f, '_NEMOLENS_TARGETS') for f in sys.meta_path),\n"
    "  'loaded': 'nemolens_adapter' in sys.modules,\n"
    "  'clients': sorted(m for m in ('aiohttp', 'httpx', 'httpcore', 'ctypes') if m in sys.modules),\n"
    "  'site': getattr(sys.modules.get('sitecustomize'), '__file__', None)}))\n"
)


def state(args, env):
    p = harness.run([harness.PYTHON] + args + ["-c", STATE], env)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    return json.loads(p.stdout)


class Delivery(unittest.TestCase):
    def setUp(self):
        harness.new_runtime_dir()
        self.tmp = tempfile.mkdtemp(prefix="nl-py-")
        self.common = dict(OTEL_METRICS_EXPORTER="none")

    def env(self, shim=True, pythonpath=None, **extra):
        e = (harness.shim_env if shim else harness.plain_env)(**self.common, **extra)
        e.pop("PYTHONPATH", None)
        if pythonpath is not None:
            e["PYTHONPATH"] = pythonpath
        return e

    def test_path_and_environment_as_without_the_shim(self):
        for pp in (None, "", "/nonexistent/a:/nonexistent/b", "/nonexistent/c:"):
            with self.subTest(pythonpath=pp):
                mine = state([], self.env(True, pp))
                theirs = state([], self.env(False, pp))
                self.assertTrue(mine.pop("adapter"))
                self.assertFalse(theirs.pop("adapter"))
                self.assertEqual(mine, theirs)
                self.assertEqual(mine["clients"], [])   # nothing imported for the program
                self.assertFalse(mine["loaded"])        # nor the adapter, until it imports a client

    def test_program_sitecustomize_runs_once(self):
        d = os.path.join(self.tmp, "site")
        os.mkdir(d)
        log = os.path.join(self.tmp, "ran")
        with open(os.path.join(d, "sitecustomize.py"), "w") as f:
            f.write(f"open({log!r}, 'a').write('x')\nMARK = 1\n")
        code = ("import sys, json; m = sys.modules['sitecustomize']; "
                "print(json.dumps([m.__file__, m.MARK, m.__name__, m.__spec__.name]))")
        for shim in (True, False):
            with self.subTest(shim=shim):
                if os.path.exists(log):
                    os.unlink(log)
                p = harness.run([harness.PYTHON, "-c", code], self.env(shim, d))
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(p.stderr, "")
                self.assertEqual(json.loads(p.stdout), [os.path.join(d, "sitecustomize.py"), 1,
                                                        "sitecustomize", "sitecustomize"])
                with open(log) as f:
                    self.assertEqual(f.read(), "x")

    def test_failing_program_sitecustomize_reported_as_before(self):
        d = os.path.join(self.tmp, "bad")
        os.mkdir(d)
        with open(os.path.join(d, "sitecustomize.py"), "w") as f:
            f.write("raise ValueError('broken on purpose')\n")
        out = []
        for shim in (True, False):
            p = harness.run([harness.PYTHON, "-c", "import sys; print('sitecustomize' in sys.modules)"],
                            self.env(shim, d))
            out.append((p.returncode, p.stdout, p.stderr))
        self.assertEqual(out[0], out[1])
        self.assertIn("Error in sitecustomize", out[0][2])

    def test_usercustomize_still_runs(self):
        user = os.path.join(self.tmp, "home")
        site = subprocess.run([harness.PYTHON, "-c", "import site; print(site.getusersitepackages())"],
                              env=dict(self.env(False), HOME=user), capture_output=True, text=True).stdout.strip()
        os.makedirs(site)
        with open(os.path.join(site, "usercustomize.py"), "w") as f:
            f.write("import sys; sys.nl_user = getattr(sys, 'nl_user', 0) + 1\n")
        code = "import sys; print(sys.nl_user, any(hasattr(f, '_NEMOLENS_TARGETS') for f in sys.meta_path))"
        p = harness.run([harness.PYTHON, "-c", code], dict(self.env(True), HOME=user))
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "1 True\n", ""))

    def test_child_interpreters(self):
        # A child started with subprocess, by a parent with and without -E,
        # gets the adapter and the parent's PYTHONPATH.
        child = f"import subprocess, sys; sys.exit(subprocess.call([{harness.PYTHON!r}, '-c', {STATE!r}]))"
        for flags in ([], ["-E"]):
            with self.subTest(flags=flags):
                p = harness.run([harness.PYTHON] + flags + ["-c", child], self.env(True, "/nonexistent/p"))
                self.assertEqual(p.returncode, 0, p.stderr)
                got = json.loads(p.stdout)
                self.assertTrue(got["adapter"])
                self.assertEqual(got["pythonpath"], "/nonexistent/p")
                self.assertEqual(got["env"], [])
                self.assertEqual(got["path"], state([], self.env(False, "/nonexistent/p"))["path"])

    def test_isolated_and_no_site_get_nothing(self):
        for flags in (["-I"], ["-E"], ["-S"], ["-sEb"], ["-X", "dev", "-I"], ["-W", "ignore", "-S"]):
            with self.subTest(flags=flags):
                mine = state(flags, self.env(True, "/nonexistent/q"))
                theirs = state(flags, self.env(False, "/nonexistent/q"))
                self.assertFalse(mine["adapter"])
                self.assertEqual(mine, theirs)

    def test_off(self):
        mine = state([], self.env(True, "/nonexistent/r", NEMOLENS_PYTHON="off"))
        self.assertEqual(mine, state([], self.env(False, "/nonexistent/r")))
        self.assertFalse(mine["adapter"])

    def test_virtualenv(self):
        venv = os.path.join(self.tmp, "venv")
        subprocess.run([harness.PYTHON, "-m", "venv", "--system-site-packages", "--without-pip", venv],
                       check=True, env=self.env(False))
        py = os.path.join(venv, "bin", "python")
        for shim in (True, False):
            p = harness.run([py, "-c", STATE], self.env(shim))
            self.assertEqual((p.returncode, p.stderr), (0, ""))
            got = json.loads(p.stdout)
            self.assertEqual(got.pop("adapter"), shim)
            if shim:
                mine = got
        self.assertEqual(mine, got)
        self.assertIn(os.path.join(venv, "lib", "python%d.%d" % sys.version_info[:2], "site-packages"), mine["path"])

    def test_programs_that_are_not_python_see_no_change(self):
        for pp in (None, "/nonexistent/s"):
            mine = harness.run(["/usr/bin/env"], self.env(True, pp)).stdout.splitlines()
            theirs = harness.run(["/usr/bin/env"], self.env(False, pp)).stdout.splitlines()
            # The shim's own marks of the tree (docs/safety.md) aside.
            marks = ("LD_PRELOAD=", "NEMOLENS_OUTERMOST_PID=", "NEMOLENS_RUN_ID=")
            self.assertEqual(sorted(x for x in mine if not x.startswith(marks)),
                             sorted(theirs))

    def test_a_library_the_adapter_does_not_know_is_left_alone(self):
        # An "aiohttp" without the classes the adapter patches: the program
        # imports and uses it as usual; the adapter logs one line and is off.
        d = os.path.join(self.tmp, "fake", "aiohttp")
        os.makedirs(d)
        with open(os.path.join(d, "__init__.py"), "w") as f:
            f.write("__version__ = '0.0'\nVALUE = 42\n")
        log = os.path.join(self.tmp, "shim.log")
        p = harness.run([harness.PYTHON, "-c", "import aiohttp; print(aiohttp.VALUE)"],
                        self.env(True, os.path.dirname(d), NEMOLENS_LOG_PATH=log))
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, "42\n", ""))
        with open(log) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("Python adapter for aiohttp is off", lines[0])


if __name__ == "__main__":
    unittest.main(verbosity=2)
