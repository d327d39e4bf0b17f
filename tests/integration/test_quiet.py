# SPDX-License-Identifier: Apache-2.0
"""The shim adds no byte to a program's output, names what is true, and stands
down in privileged programs.

1. A C program (with forked children), a Python program and a shell running
   50 commands, all making real connections: stdout and stderr, captured
   separately and merged, are byte-identical with and without the shim, with
   nothing listening at the default endpoint, with a collector answering
   HTTP 500, and with malformed variables.
2. A real test runner whose workers report over a pipe with stderr merged
   passes the same way with and without the shim.
3. NEMOLENS_LOG_PATH=<file>: one line per distinct problem per process, with
   time, program name and pid; mode 0600; a symlink planted at the path is
   refused. NEMOLENS_LOG_PATH=stderr: every process writes to its stderr.
4. A terminal: the outermost process writes each warning once; its children,
   forked or exec'd, write nothing.
5. AT_SECURE (a setuid program): the shim is loaded but records, sends and
   writes nothing, even with NEMOLENS_LOG_PATH set; the same copy of the
   shim in a normal process does record (so the check is not vacuous).
"""
import errno
import gzip
import http.server
import os
import pty
import pwd
import re
import select
import shutil
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2  # noqa: E402

CONNECTS = "gym.http.connection_pool.connect_total"
QUIET = os.path.join(harness.BIN, "quiet_client")
# Forked children of a process whose exporter thread is running can hang at
# exit under a preloaded sanitizer runtime (its allocator and fork); the
# sanitizer runs use no forks, the plain build all of them.
FORKS = 0 if os.environ.get("NL_SANITIZER_RUNTIME") else 2
STEADY = os.path.join(harness.BIN, "steady_client")
PY_CLIENT = r"""
import socket, sys
port = int(sys.argv[1])
for i in range(3):
    socket.create_connection(("127.0.0.1", port)).close()
    print("py out", i, flush=True)
    print("py err", i, file=sys.stderr, flush=True)
"""
MALFORMED = {"OTEL_METRIC_EXPORT_INTERVAL": "abc", "NEMOLENS_DESTINATIONS": "=,bad",
             "NEMOLENS_LOG_PATH": "relative.log", "NEMOLENS_LOG_LEVEL": "verbose"}
# A process's segment stays when its exit flush fails: the next shim process delivers it.
EXIT_KEPT = re.compile(r"^nemolens: exit: could not deliver this process's metrics to \S+: .+; they are kept, "
                       r"for the next shim process to deliver$")
FILE_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) (\S+)\[(\d+)\] nemolens: (.+)$")
AT_SECURE = 23


def outputs(args, env, **kw):
    """(returncode, stdout, stderr) captured separately, and (returncode, output) merged."""
    sep = subprocess.run(args, env=env, capture_output=True, timeout=120, **kw)
    merged = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120, **kw)
    return (sep.returncode, sep.stdout, sep.stderr), (merged.returncode, merged.stdout)


def hold_default_endpoint():
    """Binds localhost:4318 (IPv4 and, where there is one, IPv6) without
    listening, so that the default endpoint refuses connections. None when
    something already listens there."""
    held = []
    for family, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            s = socket.socket(family)
        except OSError:
            continue
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((addr, 4318))
        except OSError as e:
            s.close()
            if e.errno == errno.EADDRNOTAVAIL and family == socket.AF_INET6:
                continue
            for h in held:
                h.close()
            return None
        held.append(s)
    return held


class Answer500:
    """A collector that answers every export with HTTP 500, and keeps the
    service.instance.id of each export's resources: a process whose exit
    flush gave up waiting has its values delivered again by another process
    of the shim, under the same instance (docs/export.md), so the instances
    count the processes that exported, the requests may count more."""

    def __init__(self):
        self.instances = set()
        lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                req = metrics_service_pb2.ExportMetricsServiceRequest()
                req.ParseFromString(body)
                with lock:
                    for rm in req.resource_metrics:
                        for a in rm.resource.attributes:
                            if a.key == "service.instance.id":
                                outer.instances.add(a.value.string_value)
                body = b"collector exploded"
                self.send_response(500)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def run_on_terminal(args, env, timeout=60):
    """Runs args with stderr on a pseudo-terminal and stdout on a pipe.
    Returns (returncode, stdout, terminal lines)."""
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    finally:
        os.close(slave)
    seen = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:   # until every holder of the terminal is gone
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError as e:   # EIO: every writer of the terminal is gone
                    if e.errno != errno.EIO:
                        raise
                    break
                if not chunk:
                    break
                seen += chunk
        stdout = p.stdout.read()
        p.wait(timeout=timeout)
    finally:
        p.stdout.close()
        os.close(master)
    return p.returncode, stdout, seen.decode(errors="replace").replace("\r\n", "\n").splitlines()


class Quiet(harness.ShimTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.held = hold_default_endpoint()
        if cls.held is None:
            # Something listens at the default endpoint: point at a refused port instead.
            cls.dead = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{harness.refused_port()}"}
            print("\n  localhost:4318 is taken: using a refused port as the dead collector", file=sys.stderr)
        else:
            cls.dead = {}
        cls.c500 = Answer500()

    @classmethod
    def tearDownClass(cls):
        cls.c500.close()
        for s in cls.held or []:
            s.close()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp(prefix="nl-quiet.")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def programs(self):
        port = str(self.listener.port)
        fifty = " ".join(str(i) for i in range(1, 51))
        loop = f'for i in {fifty}; do "{QUIET}" {port} 1 0; echo "rc $?"; done; echo done >&2'
        return {
            # (arguments, processes that connect, connections)
            "c": ([QUIET, port, "3", str(FORKS)], 1 + FORKS, 3 + FORKS),
            "python": ([harness.PYTHON, "-c", PY_CLIENT, port], 1, 3),
            "shell": (["/bin/sh", "-c", loop], 50, 50),
        }

    # ---- 1. output streams ---------------------------------------------------

    def test_output_streams_unchanged(self):
        settings = {
            "no collector": dict(self.dead),
            "HTTP 500": {"OTEL_EXPORTER_OTLP_ENDPOINT": self.c500.url},
            "malformed variables": dict(MALFORMED, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url),
        }
        for prog, (args, processes, connections) in self.programs().items():
            start = self.listener.accepted
            base = outputs(args, harness.plain_env(), cwd=self.tmp)
            self.listener.settle(start + 2 * connections)
            self.assertEqual(base[0][0], 0, base)
            self.assertTrue(base[0][1] and base[0][2], "the program writes to both streams")
            for name, extra in settings.items():
                with self.subTest(program=prog, setting=name):
                    self.sink.reset()
                    self.c500.instances.clear()
                    before_accepted = self.listener.accepted
                    shim = outputs(args, harness.shim_env(**extra), cwd=self.tmp)
                    self.assertEqual(shim[0], base[0], "separate stdout/stderr differ")
                    self.assertEqual(shim[1], base[1], "merged output differs")
                    self.assertEqual(self.listener.settle(before_accepted + 2 * connections) - before_accepted,
                                     2 * connections)
                    if name == "HTTP 500":
                        # Every connecting process exported at exit and was refused.
                        self.assertEqual(len(self.c500.instances), 2 * processes)
                    if name == "malformed variables":
                        # The invalid values fell back to defaults; still exported.
                        total = sum(pt.as_int for _, _, pt in self.sink.latest_by_instance(CONNECTS))
                        self.assertEqual(total, 2 * connections)
                    self.assertEqual(os.listdir(self.tmp), [], "a relative NEMOLENS_LOG_PATH created a file")

    def test_there_is_something_to_say(self):
        """The same runs with NEMOLENS_LOG_PATH=stderr do warn: the silence above is the rule, not luck."""
        args, processes, _ = self.programs()["c"]
        p = harness.run(args, harness.shim_env(NEMOLENS_LOG_PATH="stderr", **self.dead))
        self.assertEqual(p.returncode, 0)
        lines = [l for l in p.stderr.splitlines() if l.startswith("nemolens: ")]
        self.assertEqual(len(lines), processes, p.stderr)
        for line in lines:
            self.assertRegex(line, EXIT_KEPT)
            self.assertNotIn("again", line)

        shell = self.programs()["shell"][0]
        p = harness.run(shell, harness.shim_env(NEMOLENS_LOG_PATH="stderr", OTEL_METRIC_EXPORT_INTERVAL="abc",
                                                OTEL_METRICS_EXPORTER="none"))
        warnings = [l for l in p.stderr.splitlines() if l.startswith("nemolens: ")]
        self.assertEqual(len(warnings), 51, "the shell and each of its 50 commands")
        self.assertTrue(all("OTEL_METRIC_EXPORT_INTERVAL" in w for w in warnings), warnings)

    def test_periodic_failure_says_it_is_retried(self):
        p = harness.run([STEADY, str(self.listener.port), "20", "600"],
                        harness.shim_env(NEMOLENS_LOG_PATH="stderr", OTEL_METRIC_EXPORT_INTERVAL=100,
                                         OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{harness.refused_port()}"))
        self.assertEqual(p.returncode, 0)
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 2, lines)
        self.assertRegex(lines[0], r"^nemolens: cannot send metrics to \S+: .*; they are sent again at the next "
                                   r"export$")
        self.assertRegex(lines[1], EXIT_KEPT)

    # ---- 2. a test runner ------------------------------------------------------

    def test_test_runner_with_merged_worker_output(self):
        with open(os.path.join(self.tmp, "workers.py"), "w") as f:
            f.write(r'''
import json, os, subprocess, sys, unittest

QUIET, PORT, FORKS = os.environ["QT_CLIENT"], os.environ["QT_PORT"], os.environ["QT_FORKS"]
PY = "import json, socket, sys\n" \
     "for _ in range(3): socket.create_connection(('127.0.0.1', int(sys.argv[1]))).close()\n" \
     "print(json.dumps({'connected': 3}))\n"


def merged(args):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)


class Workers(unittest.TestCase):
    def test_c_worker(self):
        p = merged([QUIET, PORT, "2", FORKS])
        child = ["child out 1", "child err 1"] if FORKS == "1" else []
        self.assertEqual((p.returncode, p.stdout.splitlines()), (0, ["out 1", "err 1", "out 2", "err 2"] + child))

    def test_python_worker_reports_json(self):
        p = merged([sys.executable, "-c", PY, PORT])
        self.assertEqual(json.loads(p.stdout), {"connected": 3})

    def test_shell_of_workers(self):
        p = merged(["/bin/sh", "-c", f'for i in 1 2 3; do "{QUIET}" {PORT} 1 0; done'])
        self.assertEqual(p.stdout, "out 1\nerr 1\n" * 3)
''')
        forks = min(FORKS, 1)
        extra = {"QT_CLIENT": QUIET, "QT_PORT": str(self.listener.port), "QT_FORKS": str(forks)}
        args = [harness.PYTHON, "-m", "unittest", "-v", "workers"]

        def norm(out):
            return re.sub(rb"Ran (\d+) tests in [0-9.]+s", rb"Ran \1 tests", out)

        before = self.listener.accepted
        base = subprocess.run(args, env=harness.plain_env(**extra), cwd=self.tmp, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=300)
        self.assertEqual(base.returncode, 0, base.stdout.decode())
        shim = subprocess.run(args, env=harness.shim_env(**extra, **self.dead), cwd=self.tmp,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        self.assertEqual((shim.returncode, norm(shim.stdout)), (0, norm(base.stdout)), shim.stdout.decode())
        self.assertIn(b"Ran 3 tests", shim.stdout)
        self.assertEqual(self.listener.settle(before + 2 * (2 + forks + 3 + 3)) - before,
                         2 * (2 + forks + 3 + 3))
        # With the old behaviour asked for explicitly, the workers' reports break.
        loud = subprocess.run(args, env=harness.shim_env(**extra, **self.dead, NEMOLENS_LOG_PATH="stderr"),
                              cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        self.assertNotEqual(loud.returncode, 0)

    # ---- 3. the log file -------------------------------------------------------

    def test_log_file_one_line_per_problem_per_process(self):
        path = os.path.join(self.tmp, "nemolens.log")
        dead = f"http://127.0.0.1:{harness.refused_port()}"
        # Each process: one bad rule twice, and a refused collector at every
        # export (about five) and at exit.
        env = harness.shim_env(NEMOLENS_LOG_PATH=path, OTEL_EXPORTER_OTLP_ENDPOINT=dead,
                               OTEL_METRIC_EXPORT_INTERVAL=100, NEMOLENS_DESTINATIONS="junk,junk")
        args = [STEADY, str(self.listener.port), "20", "600"]
        t0 = time.time()
        procs = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  preexec_fn=lambda: os.umask(0)) for _ in range(2)]
        results = [(p.pid,) + p.communicate(timeout=60) + (p.returncode,) for p in procs]
        t1 = time.time()
        for _, out, err, rc in results:
            self.assertEqual((rc, err), (0, b""))
            self.assertGreater(int(out), 10)
        self.assertEqual(stat.S_IMODE(os.lstat(path).st_mode), 0o600)
        with open(path) as f:
            lines = f.read().splitlines()
        by_pid = {}
        for line in lines:
            m = FILE_LINE.match(line)
            self.assertTrue(m, line)
            when = time.mktime(time.strptime(m.group(1)[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
            self.assertTrue(t0 - 2 <= when <= t1 + 2, line)
            self.assertEqual(m.group(2), "steady_client")
            by_pid.setdefault(int(m.group(3)), []).append(m.group(4))
        self.assertEqual(sorted(by_pid), sorted(pid for pid, *_ in results))
        for pid, msgs in by_pid.items():
            self.assertEqual(len(msgs), 3, msgs)
            self.assertEqual(len([m for m in msgs if "NEMOLENS_DESTINATIONS" in m]), 1, msgs)
            self.assertEqual(len([m for m in msgs if "sent again at the next export" in m]), 1, msgs)
            self.assertEqual(len([m for m in msgs if EXIT_KEPT.match("nemolens: " + m)]), 1, msgs)

    def test_log_file_refuses_a_symlink(self):
        target = os.path.join(self.tmp, "precious")
        with open(target, "w") as f:
            f.write("original\n")
        link = os.path.join(self.tmp, "nemolens.log")
        os.symlink(target, link)
        dangling = os.path.join(self.tmp, "dangling.log")
        os.symlink(os.path.join(self.tmp, "created-through-link"), dangling)
        args = [QUIET, str(self.listener.port), "2", str(min(FORKS, 1))]
        base = outputs(args, harness.plain_env())
        for path in (link, dangling):
            with self.subTest(path=os.path.basename(path)):
                env = harness.shim_env(NEMOLENS_LOG_PATH=path, OTEL_METRIC_EXPORT_INTERVAL="abc", **self.dead)
                self.assertEqual(outputs(args, env), base)
                self.assertTrue(os.path.islink(path))
        with open(target) as f:
            self.assertEqual(f.read(), "original\n")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "created-through-link")))
        # Control: the same run with a plain path writes its lines.
        plain = os.path.join(self.tmp, "plain.log")
        harness.run(args, harness.shim_env(NEMOLENS_LOG_PATH=plain, OTEL_METRIC_EXPORT_INTERVAL="abc", **self.dead))
        with open(plain) as f:
            self.assertIn("OTEL_METRIC_EXPORT_INTERVAL", f.read())

    # ---- 4. a terminal ------------------------------------------------------------

    def test_terminal_outermost_process_warns_once(self):
        env = harness.shim_env(OTEL_METRIC_EXPORT_INTERVAL="abc", **self.dead)
        rc, out, lines = run_on_terminal([QUIET, str(self.listener.port), "2", "2"], env)
        self.assertEqual((rc, out), (0, b"out 1\nout 2\nchild out 1\nchild out 2\n"))
        ours = [l for l in lines if l.startswith("nemolens: ")]
        self.assertEqual([l for l in lines if not l.startswith("nemolens: ")],
                         ["err 1", "err 2", "child err 1", "child err 2"])
        # The interval warning once; one exit line, the parent's: its forked
        # children, which lose their own values too, say nothing.
        self.assertEqual(len(ours), 2, lines)
        self.assertIn("OTEL_METRIC_EXPORT_INTERVAL", ours[0])
        self.assertRegex(ours[1], EXIT_KEPT)

    def test_terminal_children_of_a_shell_are_silent(self):
        port = self.listener.port
        env = harness.shim_env(OTEL_METRIC_EXPORT_INTERVAL="abc", **self.dead)
        py = f"import socket, sys; socket.create_connection(('127.0.0.1', {port})).close(); print('py', file=sys.stderr)"
        # "; true": the shell must not exec the last command in its own place
        # (a process that execs stays the outermost one).
        script = f'for i in 1 2 3; do "{QUIET}" {port} 1 0; done; "{harness.PYTHON}" -c "{py}"; true'
        rc, out, lines = run_on_terminal(["/bin/sh", "-c", script], env)
        self.assertEqual((rc, out), (0, b"out 1\n" * 3))
        ours = [l for l in lines if l.startswith("nemolens: ")]
        # The shell's own warning, once; none of its children's (each has the
        # same bad variable and loses its values at exit).
        self.assertEqual(len(ours), 1, lines)
        self.assertIn("OTEL_METRIC_EXPORT_INTERVAL", ours[0])
        self.assertEqual([l for l in lines if not l.startswith("nemolens: ")], ["err 1"] * 3 + ["py"])

    # ---- 5. privileged programs ---------------------------------------------------

    @unittest.skipUnless(os.geteuid() == 0, "needs root to make a setuid program")
    @unittest.skipIf(os.environ.get("NL_SANITIZER_RUNTIME"),
                     "a sanitizer build of the shim needs its runtime, which a secure process does not preload")
    def test_setuid_program_stands_down(self):
        libdir = next((d for d in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64")
                       if os.path.exists(os.path.join(d, "libc.so.6"))), None)
        if not libdir:
            self.skipTest("no system library directory found")
        nobody = pwd.getpwnam("nobody")
        # A secure process preloads only libraries named without a slash, from
        # a system directory, with the set-user-ID bit.
        name = f"libnemolens-quiet-test-{os.getpid()}.so"
        sys_copy = os.path.join(libdir, name)
        shutil.copy(harness.SO, sys_copy)
        self.addCleanup(os.unlink, sys_copy)
        os.chmod(sys_copy, 0o4755)

        os.chmod(self.tmp, 0o755)
        logs = os.path.join(self.tmp, "logs")
        os.mkdir(logs)
        os.chmod(logs, 0o777)   # writable for nobody: a shim that did not stand down could log here
        setuid_bin = os.path.join(self.tmp, "steady_setuid")
        plain_bin = os.path.join(self.tmp, "steady_plain")
        shutil.copy(STEADY, setuid_bin)
        shutil.copy(STEADY, plain_bin)
        os.chown(setuid_bin, nobody.pw_uid, nobody.pw_gid)
        os.chmod(setuid_bin, 0o4755)

        def run(binary, preload, log):
            env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url, NEMOLENS_LOG_PATH=log,
                                   OTEL_METRIC_EXPORT_INTERVAL="abc", NEMOLENS_DESTINATIONS="junk")
            env["LD_PRELOAD"] = preload
            p = subprocess.Popen([binary, str(self.listener.port), "20", "800"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(0.3)
            with open(f"/proc/{p.pid}/maps") as f:
                mapped = name in f.read()
            with open(f"/proc/{p.pid}/auxv", "rb") as f:
                raw = f.read()
            aux = dict(struct.iter_unpack("QQ", raw))
            out, err = p.communicate(timeout=60)
            return p.returncode, out, err, mapped, aux.get(AT_SECURE)

        for log in (os.path.join(logs, "secure.log"), "stderr"):
            with self.subTest(log=log):
                self.sink.reset()
                before = self.listener.accepted
                rc, out, err, mapped, secure = run(setuid_bin, name, log)
                self.assertEqual(secure, 1, "the setuid copy did not run in secure mode")
                self.assertTrue(mapped, "the shim was not loaded into the setuid program")
                self.assertEqual((rc, err), (0, b""))
                self.assertEqual(self.listener.settle(before + int(out)) - before, int(out))
                time.sleep(0.2)
                self.assertEqual(self.sink.raw, [], "a secure process exported")
                self.assertEqual(os.listdir(logs), [], "a secure process wrote a log file")

        # Control: the very same shim in a normal process records and logs (a
        # copy with its export module beside it, which it opens to export).
        control_dir = os.path.join(self.tmp, "control")
        os.mkdir(control_dir)
        control_copy = os.path.join(control_dir, name)
        shutil.copy(harness.SO, control_copy)
        shutil.copy(os.path.join(os.path.dirname(harness.SO), "libnemolens_export.so"), control_dir)
        self.sink.reset()
        control_log = os.path.join(logs, "control.log")
        rc, out, err, mapped, secure = run(plain_bin, control_copy, control_log)
        self.assertEqual((rc, err, mapped, secure), (0, b"", True, 0))
        total = sum(pt.as_int for _, _, pt in self.sink.latest_by_instance(CONNECTS))
        self.assertEqual(total, int(out))
        with open(control_log) as f:
            self.assertIn("NEMOLENS_DESTINATIONS", f.read())

    @unittest.skipUnless(os.geteuid() == 0, "needs root to make a setuid program")
    @unittest.skipIf(os.environ.get("NL_SANITIZER_RUNTIME"), "the library needs the sanitizer runtime")
    @unittest.skipUnless(shutil.which("cc"), "no C compiler")
    def test_setuid_program_linking_libnemolens_stands_down(self):
        lib = os.path.join(os.path.dirname(os.path.abspath(harness.SO)), "libnemolens.so.0")
        if not os.path.exists(lib):
            self.skipTest("libnemolens.so.0 not built")
        nobody = pwd.getpwnam("nobody")
        os.chmod(self.tmp, 0o755)
        libs = os.path.join(self.tmp, "lib")
        os.mkdir(libs)
        os.chmod(libs, 0o755)
        shutil.copy(lib, os.path.join(libs, "libnemolens.so.0"))
        os.symlink("libnemolens.so.0", os.path.join(libs, "libnemolens.so"))
        src = os.path.join(self.tmp, "lens_setuid.c")
        with open(src, "w") as f:
            f.write('#include <stdio.h>\n#include <nemolens.h>\nint main(void)\n{\n'
                    '\tnemolens_record_rl_metrics(NULL, .reward_mean = NEMOLENS_F64(0.5));\n'
                    '\tprintf("enabled %d\\n", (int)nemolens_enabled());\n\treturn 0;\n}\n')
        plain_bin = os.path.join(self.tmp, "lens_plain")
        cc = subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", src, "-o", plain_bin,
                             "-I" + os.path.join(os.path.abspath(harness.SRC), "preload", "include"),
                             "-L" + libs, "-lnemolens", "-Wl,-rpath," + libs], capture_output=True, text=True)
        self.assertEqual(cc.returncode, 0, cc.stderr)
        setuid_bin = os.path.join(self.tmp, "lens_setuid")
        shutil.copy(plain_bin, setuid_bin)
        os.chown(setuid_bin, nobody.pw_uid, nobody.pw_gid)
        os.chmod(setuid_bin, 0o4755)
        logs = os.path.join(self.tmp, "logs")
        os.mkdir(logs)
        os.chmod(logs, 0o777)

        def run(binary):
            self.sink.reset()
            env = harness.plain_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url,
                                    NEMOLENS_LOG_PATH=os.path.join(logs, os.path.basename(binary) + ".log"),
                                    OTEL_METRIC_EXPORT_INTERVAL="abc")
            p = subprocess.run([binary], env=env, capture_output=True, timeout=60)
            time.sleep(0.2)
            return p.returncode, p.stdout, p.stderr, len(self.sink.points("rl.reward.mean"))

        self.assertEqual(run(setuid_bin), (0, b"enabled 0\n", b"", 0))
        self.assertEqual(os.listdir(logs), [])
        self.assertEqual(run(plain_bin), (0, b"enabled 1\n", b"", 1))
        self.assertEqual(os.listdir(logs), ["lens_plain.log"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
