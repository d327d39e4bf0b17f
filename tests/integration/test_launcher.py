# SPDX-License-Identifier: Apache-2.0
"""nemolens-run: the program it starts really runs under the shim (its connections
reach the sink with the options' endpoint and service name), LD_PRELOAD keeps what
was there and holds the shim once, the launcher itself is never instrumented, exit
statuses and exec failures come back as a shell reports them, signals reach the
program once (terminal signals included), --print-config shows what the shim will
read and its warnings without running anything, and usage errors exit 2."""
import json
import os
import pty
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

CONNECTS = "gym.http.connection_pool.connect_total"
SO = os.path.realpath(harness.SO)
LAUNCHER = os.path.join(os.path.dirname(harness.SO), "nemolens-run")
SHORT_LIVED = os.path.join(harness.BIN, "short_lived")
RUNTIME = os.environ.get("NL_SANITIZER_RUNTIME") or ""

# Records every forwarded signal it gets, one name a line, in LOG; writes READY
# once its handlers are in place. The first FINAL signal makes it exit with 7
# after a grace period in which duplicates would still be recorded. With
# "leave" it first moves to a process group of its own.
TARGET = r"""
import os, signal, sys, time
log, ready, final = sys.argv[1], sys.argv[2], sys.argv[3]
if len(sys.argv) > 4 and sys.argv[4] == "leave":
    os.setpgid(0, 0)
deadline = None
def on(sig, frame):
    global deadline
    with open(log, "a") as f:
        f.write(signal.Signals(sig).name + "\n")
    if signal.Signals(sig).name == final and deadline is None:
        deadline = time.monotonic() + 0.5
for s in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGWINCH"):
    signal.signal(getattr(signal, s), on)
open(ready, "w").close()
end = time.monotonic() + 30
while time.monotonic() < end and (deadline is None or time.monotonic() < deadline):
    time.sleep(0.02)
sys.exit(7 if deadline else 1)
"""

# Prints what it sees of LD_PRELOAD and of the shim, in itself and in its parent.
SHOW = r"""
import json, os
def count(pid, what):
    with open(f"/proc/{pid}/{what}", "rb") as f:
        return f.read().count(b"libnemolens_preload")
with open(f"/proc/{os.getppid()}/environ", "rb") as f:
    parent_env = [e.decode() for e in f.read().split(b"\0") if e]
print(json.dumps({
    "preload": os.environ.get("LD_PRELOAD"),
    "self_maps": count("self", "maps"),
    "parent_maps": count(os.getppid(), "maps"),
    "parent_env": parent_env,
    "outermost": os.environ.get("NEMOLENS_OUTERMOST_PID"),
    "pid": os.getpid(),
}))
"""


def with_runtime(*entries):
    return ":".join(([RUNTIME] if RUNTIME else []) + list(entries))


def parse_config(stdout):
    out = {}
    for line in stdout.splitlines():
        name, sep, value = line.partition(" = ")
        if sep:
            out[name.strip()] = value
    return out


class Launcher(harness.ShimTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="nl-launcher-")
        self.target = os.path.join(self.tmp, "target.py")
        with open(self.target, "w") as f:
            f.write(TARGET)
        # Any stray export goes to the sink, never to a collector on this host.
        self.env = harness.launcher_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{self.sink.port}")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def launch(self, args, env=None, **kw):
        return harness.run([LAUNCHER] + args, self.env if env is None else env, **kw)

    def show(self, env):
        p = self.launch([harness.PYTHON, "-c", SHOW], env)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    # ---- the program runs under the shim --------------------------------

    def test_connections_reach_the_sink_with_the_options(self):
        env = dict(self.env)
        # The option wins over the more specific variable, which points nowhere.
        env["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] = f"http://127.0.0.1:{harness.refused_port()}/v1/metrics"
        p = self.launch(["--endpoint", f"http://127.0.0.1:{self.sink.port}", "--service-name=launched-svc",
                         f"--destinations=srv=*:{self.listener.port}", "--",
                         SHORT_LIVED, str(self.listener.port), "5", "0"], env)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertEqual(p.stdout.strip(), "connected 5 of 5")
        self.assertEqual(p.stderr, "")
        pts = self.sink.latest_by_instance(CONNECTS)
        self.assertEqual(len(pts), 1, pts)
        res, _, pt = pts[0]
        self.assertEqual(pt.as_int, 5)
        self.assertEqual(res.get("service.name"), "launched-svc")
        self.assertEqual({a.key: a.value.string_value for a in pt.attributes},
                         {"nemo.gym.http.destination.server.name": "srv"})

    def test_existing_ld_preload_is_kept(self):
        env = dict(self.env, LD_PRELOAD=with_runtime("libm.so.6"))
        seen = self.show(env)
        self.assertEqual(seen["preload"], with_runtime(SO, "libm.so.6"))
        self.assertGreater(seen["self_maps"], 0, "the shim is not loaded in the program")

    def test_shim_already_preloaded_is_not_added_twice_and_launcher_leaves_it(self):
        # As when an instrumented parent starts nemolens-run: the launcher
        # re-executes itself without the shim, with the environment it got.
        env = dict(self.env, LD_PRELOAD=with_runtime(SO, "libm.so.6"), NEMOLENS_MEMORY_PROFILING="true",
                   NEMOLENS_MEMORY_SAMPLE_INTERVAL_MS="60000")
        seen = self.show(env)
        self.assertEqual(seen["preload"], with_runtime(SO, "libm.so.6"))
        self.assertGreater(seen["self_maps"], 0)
        self.assertEqual(seen["parent_maps"], 0, "nemolens-run itself runs under the shim")
        self.assertIn("LD_PRELOAD=" + with_runtime("libm.so.6"), seen["parent_env"])
        self.assertFalse([e for e in seen["parent_env"] if e.startswith("NEMOLENS_OUTERMOST_PID=")])
        # So the program, not the launcher, is the outermost shim process.
        self.assertEqual(seen["outermost"], str(seen["pid"]))

    def test_shim_from_nemolens_preload_path(self):
        copy = os.path.join(self.tmp, "elsewhere", "libnemolens_preload.so")
        os.makedirs(os.path.dirname(copy))
        shutil.copy(SO, copy)
        seen = self.show(dict(self.env, NEMOLENS_PRELOAD_PATH=copy))
        self.assertEqual(seen["preload"], with_runtime(copy))
        self.assertGreater(seen["self_maps"], 0)

    def test_installed_layout_finds_the_shim_from_bin(self):
        prefix = os.path.join(self.tmp, "prefix")
        os.makedirs(os.path.join(prefix, "bin"))
        launcher = os.path.join(prefix, "bin", "nemolens-run")
        shutil.copy(LAUNCHER, launcher)
        # Alone, it says where it looked...
        p = harness.run([launcher, "true"], self.env)
        self.assertEqual(p.returncode, 125)
        m = re.search(r"in \S+ or (\S+) \(set NEMOLENS_PRELOAD_PATH\)", p.stderr)
        self.assertTrue(m, p.stderr)
        libdir = m.group(1)
        # ... and finds the shim there once it is installed.
        os.makedirs(libdir, exist_ok=True)
        shutil.copy(SO, os.path.join(libdir, "libnemolens_preload.so"))
        p = harness.run([launcher, harness.PYTHON, "-c", "import os; print(os.environ['LD_PRELOAD'])"], self.env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), with_runtime(os.path.realpath(os.path.join(libdir,
                                                                                       "libnemolens_preload.so"))))

    def test_no_shim_exits_125(self):
        marker = os.path.join(self.tmp, "ran")
        p = self.launch(["touch", marker], dict(self.env, NEMOLENS_PRELOAD_PATH=os.path.join(self.tmp, "none.so")))
        self.assertEqual(p.returncode, 125)
        self.assertIn("NEMOLENS_PRELOAD_PATH", p.stderr)
        self.assertFalse(os.path.exists(marker))

    # ---- exit status -----------------------------------------------------

    def test_exit_status_is_the_programs(self):
        for script, want in [("exit 0", 0), ("exit 3", 3), ("kill -KILL $$", 137), ("kill -TERM $$", 143)]:
            with self.subTest(script=script):
                p = self.launch(["sh", "-c", script])
                self.assertEqual(p.returncode, want, p.stderr)
                self.assertEqual(p.stderr, "")

    def test_status_kept_when_started_with_sigchld_ignored(self):
        # An ignored SIGCHLD is inherited through exec and would make the kernel
        # reap the program, status and all; the program itself still inherits it.
        ignoring = ("import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN);"
                    "os.execv(sys.argv[1], sys.argv[1:])")
        show = ("import sys; ign = [l for l in open('/proc/self/status') if l.startswith('SigIgn:')][0];"
                "print(int(ign.split()[1], 16) >> 16 & 1); sys.exit(3)")
        p = harness.run([harness.PYTHON, "-c", ignoring, LAUNCHER, harness.PYTHON, "-c", show], self.env)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertEqual(p.stdout.strip(), "1")

    def test_exec_failures(self):
        missing = os.path.join(self.tmp, "no-such-program")
        p = self.launch([missing])
        self.assertEqual(p.returncode, 127)
        self.assertIn(missing, p.stderr)
        p = self.launch(["no-such-program-on-path-nl"])
        self.assertEqual(p.returncode, 127)
        plain = os.path.join(self.tmp, "not-executable")
        with open(plain, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(plain, stat.S_IRUSR | stat.S_IWUSR)
        p = self.launch([plain])
        self.assertEqual(p.returncode, 126)
        self.assertIn(plain, p.stderr)

    # ---- signals ---------------------------------------------------------

    def log_lines(self, log):
        try:
            with open(log) as f:
                return f.read().split()
        except FileNotFoundError:
            return []

    def test_signals_are_forwarded(self):
        for final in ("SIGTERM", "SIGINT"):
            with self.subTest(final=final):
                log, ready = os.path.join(self.tmp, final + ".log"), os.path.join(self.tmp, final + ".ready")
                proc = subprocess.Popen([LAUNCHER, harness.PYTHON, self.target, log, ready, final], env=self.env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                try:
                    harness.wait_for_file(ready, alive=proc)
                    sent = ["SIGUSR1", "SIGUSR2", "SIGHUP", "SIGWINCH", "SIGQUIT", final]
                    for i, name in enumerate(sent):
                        proc.send_signal(getattr(signal, name))
                        # One at a time: two pending signals of a kind are one.
                        harness.poll(lambda: len(self.log_lines(log)) >= i + 1, 10, interval=0.01)
                    _, err = proc.communicate(timeout=20)
                finally:
                    proc.kill()
                    proc.wait()
                self.assertEqual(proc.returncode, 7, err)
                self.assertEqual(self.log_lines(log), sent)

    def on_terminal(self, leave):
        """Runs the target under nemolens-run as the foreground job of a new
        terminal and presses Ctrl-C while nemolens-run is stopped, so that
        the program has handled what the terminal sent it before nemolens-run
        sees the signal (two pending SIGINTs would merge into one and hide a
        duplicate). Returns (received before nemolens-run went on, received
        in all, nemolens-run's exit status)."""
        tag = "leave" if leave else "stay"
        log, ready = os.path.join(self.tmp, tag + ".log"), os.path.join(self.tmp, tag + ".ready")
        args = [LAUNCHER, harness.PYTHON, self.target, log, ready, "SIGINT"] + (["leave"] if leave else [])
        pid, master = pty.fork()
        if pid == 0:
            try:
                os.execve(LAUNCHER, args, self.env)
            finally:
                os._exit(99)

        def drain(timeout):
            # Keeps the terminal's output moving so that nothing blocks on it.
            if select.select([master], [], [], timeout)[0]:
                try:
                    os.read(master, 4096)
                except OSError:
                    pass

        try:
            harness.wait_for_file(ready)
            os.kill(pid, signal.SIGSTOP)
            os.waitpid(pid, os.WUNTRACED)
            os.write(master, b"\x03")
            end = time.monotonic() + (0.3 if leave else 10)
            while time.monotonic() < end and not self.log_lines(log):
                drain(0.01)
            before = self.log_lines(log)
            os.kill(pid, signal.SIGCONT)
            end = time.monotonic() + 20
            status = None
            while time.monotonic() < end:
                drain(0.05)
                done, st = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = os.waitstatus_to_exitcode(st)
                    break
            return before, self.log_lines(log), status
        finally:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            os.close(master)

    def test_ctrl_c_reaches_the_program_once(self):
        before, got, status = self.on_terminal(leave=False)
        self.assertEqual(before, ["SIGINT"], "the terminal's SIGINT did not reach the program directly")
        self.assertEqual(got, ["SIGINT"], "nemolens-run passed the terminal's SIGINT on once more")
        self.assertEqual(status, 7)

    def test_ctrl_c_is_forwarded_to_a_program_that_left_the_group(self):
        before, got, status = self.on_terminal(leave=True)
        self.assertEqual(before, [])
        self.assertEqual(got, ["SIGINT"])
        self.assertEqual(status, 7)

    # ---- --print-config --------------------------------------------------

    def test_print_config(self):
        marker = os.path.join(self.tmp, "ran")
        env = dict(self.env, OTEL_METRIC_EXPORT_INTERVAL="abc", NEMOLENS_LOG_LEVEL="none",
                   OTEL_EXPORTER_OTLP_HEADERS="authorization=Bearer%20s3cret,x-tenant=t1",
                   OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test")
        p = self.launch(["--endpoint=http://collector.example:4318", "--service-name", "cfg-svc",
                         "--destinations", "a=1.2.3.4:80", "--memory", "--console", "--print-config",
                         "--", "touch", marker], env)
        self.assertEqual(p.returncode, 0, p.stderr)
        cfg = parse_config(p.stdout)
        self.assertEqual(cfg["endpoint"], "http://collector.example:4318/v1/metrics")
        self.assertEqual(cfg["service_name"], "cfg-svc")
        self.assertEqual(cfg["server_name"], "cfg-svc")
        self.assertEqual(cfg["exporter"], "console")
        self.assertEqual(cfg["memory_profiling"], "true")
        self.assertEqual(cfg["destinations"], "a=1.2.3.4:80")
        self.assertEqual(cfg["export_interval_ms"], "10000")
        self.assertEqual(cfg["headers"], "authorization=<redacted>, x-tenant=<redacted>")
        self.assertEqual(cfg["resource_attributes"], "deployment.environment=test")
        self.assertEqual(cfg["log_level"], "none")
        self.assertEqual(cfg["preload"], SO)
        for name in ("temporality", "export_timeout_ms", "otlp_timeout_ms", "exit_timeout_ms", "server_type",
                     "cardinality_limit", "console_path", "compression", "enabled"):
            self.assertIn(name, cfg)
        self.assertNotIn("s3cret", p.stdout)
        self.assertNotIn("t1", p.stdout)
        # The warning shows although NEMOLENS_LOG_LEVEL=none would hide it from a program.
        self.assertRegex(p.stderr, r"nemolens: .*OTEL_METRIC_EXPORT_INTERVAL=\"abc\"")
        self.assertFalse(os.path.exists(marker), "--print-config ran the program")
        self.assertEqual(self.sink.requests, [])

    def test_print_config_without_program(self):
        p = self.launch(["--print-config"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        self.assertEqual(parse_config(p.stdout)["endpoint"], f"http://127.0.0.1:{self.sink.port}/v1/metrics")

    # ---- usage -----------------------------------------------------------

    def test_usage_errors_exit_2(self):
        for args in ([], ["--bogus", "true"], ["--endpoint"], ["-x", "true"], ["--service-name"],
                     ["--memory"], ["--"]):
            with self.subTest(args=args):
                p = self.launch(args)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("usage:", p.stderr)
                self.assertEqual(p.stdout, "")

    def test_help_and_version(self):
        p = self.launch(["--help"])
        self.assertEqual(p.returncode, 0)
        self.assertIn("--print-config", p.stdout)
        self.assertIn("125", p.stdout)
        p = self.launch(["--version"])
        self.assertEqual(p.returncode, 0)
        self.assertRegex(p.stdout, r"^nemolens-run \S+")

    def test_program_options_are_the_programs(self):
        # Options after the program's name belong to it; "--" is optional.
        p = self.launch(["sh", "-c", "echo \"$0 $1\"", "--print-config", "--help"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), "--print-config --help")


if __name__ == "__main__":
    unittest.main(verbosity=2)
