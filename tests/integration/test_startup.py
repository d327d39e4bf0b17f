# SPDX-License-Identifier: Apache-2.0
"""Start-up figures: nemolens.server.ready.duration, once per server process, from
its start to its first response; and NeMo Gym's start-up stages from its launch
stamps (NEMO_GYM_STARTUP_SPAWN_NS, NEMO_GYM_STARTUP_SETUP_DONE_NS), recorded by
the server only, never by the launch shell or a client that inherit the stamps."""
import os
import socket
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402

LAUNCHER = os.path.join(os.path.dirname(harness.SO), "nemolens-run")
SANITIZER = bool(os.environ.get("NL_SANITIZER_RUNTIME"))

# Sleeps, then listens on the port given, answers one GET and exits (its exit
# flush exports what it recorded).
SERVER = r"""
import http.server, sys, time
time.sleep(1.5)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).handle_request()
"""

# Forks after 1 s; the child sleeps 1 s more, then serves one GET as
# SERVER does, while the parent only waits for it: a pre-forked worker.
FORKING = r"""
import os, sys, time
time.sleep(1.0)
if os.fork() == 0:
    time.sleep(1.0)
    exec(compile(SERVER.replace("time.sleep(1.5)", ""), "server", "exec"))
else:
    os.wait()
""".replace("SERVER", repr(SERVER))

READY = "nemolens.server.ready.duration"
STAGES = "gym.server.startup_stage_duration_ms"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Startup(harness.ShimTestCase):

    def env(self, launcher=False, **extra):
        make = harness.launcher_env if launcher else harness.shim_env
        return make(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{self.sink.port}",
                    OTEL_METRIC_EXPORT_INTERVAL="60000", NEMOLENS_SERVER_NAME="startup_test", **extra)

    def serve(self, args, env):
        """Starts args (a server on port args[-1]), gets its one answer with a
        client that runs without the shim, and waits for it to exit."""
        port = args[-1]
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            def answered():
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                        return r.status == 200
                except OSError:
                    return False
            harness.wait_for(answered, 60, "the server's answer", interval=0.1, alive=proc)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 0)
        self.assertEqual(err.decode(errors="replace").strip(), "")

    def server_args(self, shell=None):
        port = str(free_port())
        if shell == "exec":
            return ["sh", "-c", 'exec "$0" -c "$1" "$2"', harness.PYTHON, SERVER, port]
        if shell == "child":
            return ["sh", "-c", '"$0" -c "$1" "$2"; true', harness.PYTHON, SERVER, port]
        return [harness.PYTHON, "-c", SERVER, port]

    def points(self, name):
        return [(res, p) for res, _, p in self.sink.latest_by_instance(name)]

    def samples(self, name, stage=None, worker=False):
        """(pid, value) of every sample of name: one point per process, each
        holding one sample, whose sum is the value."""
        out = []
        for res, p in self.points(name):
            a = attrs(p)
            if stage is not None and a.get("nemo.gym.startup.stage") != stage:
                continue
            self.assertEqual(p.count, 1, f"{name} {a}: one sample per process")
            self.assertEqual(a.get("nemo.gym.server.name"), "startup_test")
            self.assertIs(a.get("nemo.gym.server.worker"), worker)
            self.assertNotIn("nemo.gym.server.type", a)
            out.append((res.get("process.pid"), p.sum))
        return out

    def check_ready(self):
        ready = self.samples(READY)
        self.assertEqual(len(ready), 1, ready)
        self.assertGreaterEqual(ready[0][1], 1.5)
        self.assertLessEqual(ready[0][1], 2.5 if not SANITIZER else 5)
        return ready[0][0]

    def wait_exported(self, name):
        harness.wait_for(lambda: self.points(name), 30, f"an export of {name}")

    def test_ready_and_interpreter_start(self):
        for launcher in (False, True):
            with self.subTest(launcher=launcher):
                self.sink.reset()
                spawn = time.time_ns() - 1_000_000_000
                args = self.server_args()
                env = self.env(launcher, NEMO_GYM_STARTUP_SPAWN_NS=spawn)
                self.serve([LAUNCHER] + args if launcher else args, env)
                self.wait_exported(READY)
                self.wait_exported(STAGES)
                pid = self.check_ready()
                stages = self.samples(STAGES)
                self.assertEqual(len(stages), 1, stages)
                self.assertEqual(stages[0][0], pid, "recorded by the server")
                self.assertGreaterEqual(stages[0][1], 950)
                self.assertLessEqual(stages[0][1], 1300 if not SANITIZER else 3000)

    def test_venv_setup_and_interpreter_start(self):
        now = time.time_ns()
        env = self.env(NEMO_GYM_STARTUP_SPAWN_NS=now - 3_000_000_000,
                       NEMO_GYM_STARTUP_SETUP_DONE_NS=now - 1_000_000_000)
        self.serve(self.server_args(), env)
        self.wait_exported(STAGES)
        venv = self.samples(STAGES, "venv_setup")
        interpreter = self.samples(STAGES, "interpreter_start")
        self.assertEqual(len(venv), 1, venv)
        self.assertEqual(len(interpreter), 1, interpreter)
        self.assertAlmostEqual(venv[0][1], 2000, delta=1)
        self.assertGreaterEqual(interpreter[0][1], 950)
        self.assertLessEqual(interpreter[0][1], 1300 if not SANITIZER else 3000)

    def test_launch_shell_records_nothing(self):
        for shell in ("exec", "child"):
            with self.subTest(shell=shell):
                self.sink.reset()
                spawn = time.time_ns() - 1_000_000_000
                self.serve(self.server_args(shell), self.env(NEMO_GYM_STARTUP_SPAWN_NS=spawn))
                self.wait_exported(READY)
                self.check_ready()
                stages = self.samples(STAGES)
                self.assertEqual(len(stages), 1, stages)

    def test_forked_worker(self):
        for launcher in (False, True):
            with self.subTest(launcher=launcher):
                self.sink.reset()
                port = str(free_port())
                args = [harness.PYTHON, "-c", FORKING, port]
                env = self.env(launcher, NEMO_GYM_STARTUP_SPAWN_NS=time.time_ns() - 1_000_000_000)
                self.serve([LAUNCHER] + args if launcher else args, env)
                self.wait_exported(READY)
                ready = self.samples(READY, worker=True)
                self.assertEqual(len(ready), 1, ready)
                # From the fork, not from the parent's start.
                self.assertGreaterEqual(ready[0][1], 1.0)
                self.assertLessEqual(ready[0][1], 1.9 if not SANITIZER else 4)
                # The parent never answered: no point of its own; the child's
                # interpreter started in its parent: no stage.
                self.assertEqual(len(self.points(READY)), 1)
                self.assertEqual(self.sink.points(STAGES), [])

    def test_client_records_nothing(self):
        spawn = time.time_ns() - 1_000_000_000
        port = str(free_port())
        plain = subprocess.Popen([harness.PYTHON, "-c", SERVER.replace("time.sleep(1.5)", "").replace("handle_request()", "serve_forever()"), port],
                                 env=harness.plain_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            client = ("import sys, time, urllib.request\n"
                      "for _ in range(200):\n"
                      "    try:\n"
                      "        urllib.request.urlopen('http://127.0.0.1:' + sys.argv[1] + '/', timeout=2).read(); break\n"
                      "    except OSError:\n"
                      "        time.sleep(0.05)\n")
            for launcher in (False, True):
                args = [harness.PYTHON, "-c", client, port]
                p = harness.run([LAUNCHER] + args if launcher else args,
                                self.env(launcher, NEMO_GYM_STARTUP_SPAWN_NS=spawn))
                self.assertEqual(p.returncode, 0, p.stderr)
        finally:
            plain.kill()
            plain.wait()
        harness.wait_for(lambda: self.sink.points("http.client.request.duration"), 30, "the client's export")
        self.assertEqual(self.sink.points(READY), [])
        self.assertEqual(self.sink.points(STAGES), [])


if __name__ == "__main__":
    unittest.main()
