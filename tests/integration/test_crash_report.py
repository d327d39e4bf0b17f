# SPDX-License-Identifier: Apache-2.0
"""A fault inside the shim: the test build of the shim
(libnemolens_preload_crashtest.so, never the product) faults in its
constructor as NEMOLENS_TEST_FAULT says. The log gets one report (signal,
fault address, version, a backtrace naming the faulting function) and the
process dies of the same signal; turned off, or with the log unset, the
process dies the same and nothing is written."""
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

CRASH_SO = os.environ.get("NL_CRASHTEST_SO") or os.path.join(harness.BIN, "libnemolens_preload_crashtest.so")
PROG = os.path.join(harness.BIN, "fault_handlers")


def version():
    with open(os.path.join(harness.SRC, "CMakeLists.txt")) as f:
        return re.search(r"project\(\w+ VERSION ([0-9.]+)", f.read()).group(1)


def no_core():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class FaultInTheShim(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="nl-crash-", dir="/dev/shm")
        self.log = os.path.join(self.dir, "shim.log")

    def tearDown(self):
        for f in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, f))
        os.rmdir(self.dir)

    def run_fault(self, how, **extra):
        env = harness.shim_env(NEMOLENS_TEST_FAULT=how, **extra)
        env["LD_PRELOAD"] = os.path.abspath(CRASH_SO)
        return subprocess.run([PROG, "none", "status"], env=env, capture_output=True, text=True, timeout=60,
                              preexec_fn=no_core)

    def report(self):
        with open(self.log) as f:
            return [line.rstrip("\n") for line in f]

    def test_the_test_build_runs_as_the_shim_without_a_fault(self):
        """The ground the other tests stand on: without NEMOLENS_TEST_FAULT
        the test build is the shim, with its handler installed."""
        p = self.run_fault("", NEMOLENS_LOG_PATH=self.log)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.count("sigaction default, signal default, kernel handler"), 4, p.stdout)
        self.assertFalse(os.path.exists(self.log) and self.report(), "no fault, no report")

    def test_one_report_then_death_by_the_same_signal(self):
        for how, sig, name, code in (("segv", signal.SIGSEGV, "SIGSEGV", "SEGV_MAPERR"),
                                     ("fpe", signal.SIGFPE, "SIGFPE", "FPE_INTDIV"),
                                     ("ill", signal.SIGILL, "SIGILL", "ILL_ILLOPN")):
            with self.subTest(fault=how):
                if os.path.exists(self.log):
                    os.unlink(self.log)
                p = self.run_fault(how, NEMOLENS_LOG_PATH=self.log)
                self.assertEqual(p.returncode, -sig, p.stderr)
                self.assertEqual(p.stdout, "", "the program's main never ran")
                lines = self.report()
                heads = [l for l in lines if re.search(r"nemolens: crash: SIG", l)]
                self.assertEqual(len(heads), 1, lines)
                head = heads[0]
                self.assertIn(f"crash: {name} ({code}) at address ", head)
                self.assertIn(f"(nemolens-preload {version()})", head)
                if how == "segv":
                    self.assertIn("at address 0x10,", head, "the address the test build reads")
                frames = [l for l in lines if re.search(r"crash: #\d+ 0x", l)]
                self.assertRegex(frames[0], r"crash: #0 0x[0-9a-f]+ nl_crash_test_fault_now\+0x[0-9a-f]+ \(shim\+")
                self.assertRegex(frames[1], r"crash: #1 0x[0-9a-f]+ nl_crash_test_fault\+0x[0-9a-f]+ \(shim\+")
                self.assertTrue(any(" nl_load+" in f for f in frames), frames)
                self.assertRegex(lines[-1], rf"crash: end of report, {len(frames)} frames$")
                # One process, one report: every line is this process's.
                self.assertEqual(len({re.search(r"\[(\d+)\] nemolens", l).group(1) for l in lines}), 1, lines)

    def test_turned_off_the_process_dies_the_same_without_a_report(self):
        p = self.run_fault("segv", NEMOLENS_LOG_PATH=self.log, NEMOLENS_CRASH_REPORT="false")
        self.assertEqual(p.returncode, -signal.SIGSEGV, p.stderr)
        self.assertFalse(os.path.exists(self.log), "nothing to log")

    def test_no_log_path_nothing_is_written_to_a_pipe(self):
        """The report goes where warnings go: by default only to a terminal
        that a person reads, so a captured stderr stays the program's."""
        p = self.run_fault("segv")
        self.assertEqual(p.returncode, -signal.SIGSEGV)
        self.assertEqual(p.stderr, "")
        p = self.run_fault("segv", NEMOLENS_LOG_PATH="stderr")
        self.assertEqual(p.returncode, -signal.SIGSEGV)
        self.assertEqual(len(re.findall(r"^nemolens: crash: SIGSEGV \(SEGV_MAPERR\)", p.stderr, re.M)), 1, p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
