# SPDX-License-Identifier: Apache-2.0
"""Faults that are not the shim's: programs with and without handlers of
their own, a handler installed before the shim's and after it, Python's
faulthandler, a SIGFPE and a SIGSEGV sent with kill() end exactly as
without the shim (same output, same death signal), though the shim's crash
handler is installed; and a program asking what handles these signals is
told SIG_DFL, as without the shim."""
import os
import re
import resource
import signal
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

PROG = os.path.join(harness.BIN, "fault_handlers")
SANITIZER = os.environ.get("NL_SANITIZER_RUNTIME")


def no_core():
    # The death signal is what is compared; a core file of each run would
    # only fill the working directory.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def envs(**extra):
    """The shim's environment, and the same without the shim: in a
    sanitizer build the baseline keeps the sanitizer's runtime preloaded, so
    that the two runs differ by the shim alone."""
    shim = harness.shim_env(**extra)
    base = harness.without_shim(shim)
    if SANITIZER:
        base["LD_PRELOAD"] = SANITIZER
    return shim, base


def run(args, env, **kw):
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, preexec_fn=no_core, **kw)


class FaultsNotInTheShim(unittest.TestCase):

    def both(self, args, **extra):
        shim_env, base_env = envs(**extra)
        return run(args, shim_env), run(args, base_env)

    def test_the_handler_is_installed_and_sigaction_and_signal_show_the_default(self):
        shim, base = self.both([PROG, "none", "status"])
        self.assertEqual((shim.returncode, base.returncode), (0, 0), shim.stderr + base.stderr)
        self.assertEqual(base.stdout.count("sigaction default, signal default, kernel default"), 4, base.stdout)
        if not SANITIZER:
            # Ground truth from the kernel (SigCgt): the shim's handler is there.
            self.assertEqual(shim.stdout.count("sigaction default, signal default, kernel handler"), 4,
                             shim.stdout)
        shim_off = run([PROG, "none", "status"], envs(NEMOLENS_CRASH_REPORT="false")[0])
        self.assertEqual(shim_off.stdout, base.stdout, "turned off, the shim installs nothing")

    def test_a_handler_found_at_load_is_left_alone(self):
        """A library the program links installs its handler from its
        constructor, which runs before the shim's: the shim keeps out of
        those signals and takes only the others."""
        shim, base = self.both([PROG, "none", "status"], FAULT_HANDLER_EARLY="1")
        self.assertIn("SIGSEGV: sigaction handler, signal handler, kernel handler", base.stdout)
        self.assertIn("SIGFPE: sigaction handler, signal handler, kernel handler", base.stdout)
        self.assertIn("SIGSEGV: sigaction handler, signal handler, kernel handler", shim.stdout)
        self.assertIn("SIGFPE: sigaction handler, signal handler, kernel handler", shim.stdout)
        if not SANITIZER:
            self.assertIn("SIGBUS: sigaction default, signal default, kernel handler", shim.stdout)

    def test_faults_in_the_program_end_as_without_the_shim(self):
        cases = [("none", "segv", {}), ("none", "fpe", {}),
                 ("main", "segv", {}), ("main", "fpe", {}),
                 ("none", "segv", {"FAULT_HANDLER_EARLY": "1"}), ("none", "fpe", {"FAULT_HANDLER_EARLY": "1"})]
        for handler, what, extra in cases:
            with self.subTest(handler=handler, what=what, **extra):
                shim, base = self.both([PROG, handler, what], **extra)
                self.assertEqual((shim.returncode, shim.stdout), (base.returncode, base.stdout))
                if not SANITIZER:
                    sig = signal.SIGSEGV if what == "segv" else signal.SIGFPE
                    self.assertEqual(base.returncode, -sig, base.stderr)
                if handler != "none" or extra:
                    self.assertRegex(base.stdout, r"handled SIG\w+ code 1, previous handler: default")

    def test_a_sigsegv_sent_with_kill_ends_as_without_the_shim(self):
        for handler in ("none", "main"):
            with self.subTest(handler=handler):
                results = []
                for env in envs():
                    p = subprocess.Popen([PROG, handler, "wait"], env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, preexec_fn=no_core)
                    line = p.stdout.readline()
                    while line and line != "ready\n":
                        line = p.stdout.readline()
                    self.assertEqual(line, "ready\n")
                    os.kill(p.pid, signal.SIGSEGV)
                    out, _ = p.communicate(timeout=30)
                    results.append((p.returncode, out))
                self.assertEqual(results[0], results[1])
                if not SANITIZER:
                    self.assertEqual(results[1][0], -signal.SIGSEGV)
                if handler == "main":
                    self.assertIn("handled SIGSEGV code 0, previous handler: default", results[1][1])

    def test_python_faulthandler_reports_and_dies_as_without_the_shim(self):
        args = [harness.PYTHON, "-X", "faulthandler", "-c", "import ctypes; ctypes.string_at(0)"]
        shim, base = self.both(args)
        for p in (shim, base):
            self.assertIn("Fatal Python error: Segmentation fault", p.stderr)
            self.assertRegex(p.stderr, re.compile(r'File "<string>", line 1 in <module>'))
        self.assertEqual(shim.returncode, base.returncode)
        if not SANITIZER:
            self.assertEqual(base.returncode, -signal.SIGSEGV)
            self.assertNotIn("nemolens", shim.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
