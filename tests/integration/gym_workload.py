# SPDX-License-Identifier: Apache-2.0
"""The demo's Gym-shaped workload, for tests that need a backend full of it.

    w = GymWorkload(vm)      # vm: a victoria.Victoria; launcher="/usr/bin/nemolens-run"
                             # starts each side with it instead of LD_PRELOAD
    w.run()                  # servers and client under the shim, until ingested
    w.stop()                 # also at interpreter exit

The pieces are the demo's (scripts/demo/server.py, client.py): uvicorn/FastAPI
under the shim on two ports (policy, judge) answering /v1/work, NeMo Gym's
POST /run and POST /verify (some with 500) and, on policy, vLLM-shaped
POST /v1/chat/completions (streamed or not), with memory profiling on; an
aiohttp client under the shim with a pool of 4 (so requests queue for it) and
a share of `Connection: close`, plus connects to a refused port (ghost) and to
a listener whose accept queue is full (slow), which time out.
"""
import atexit
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import harness

DEMO = os.path.join(harness.SRC, "scripts", "demo")
# Longer than two export intervals (1 s).
LINGER_S = 2.2


class GymWorkload:
    def __init__(self, vm, requests=120, limit=4, launcher=None):
        self.vm = vm
        self.launcher = [launcher] if launcher else []
        self.requests = requests
        self.limit = limit
        self.dir = tempfile.mkdtemp(prefix="nemolens-gym.")
        self.server = None
        self.files = []
        self.client_result = None
        atexit.register(self.stop)

    def env(self, service, **extra):
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.vm.otlp_url,
                               OTEL_METRIC_EXPORT_INTERVAL=1000, OTEL_SERVICE_NAME=service, **extra)
        return harness.without_shim(env) if self.launcher else env

    def start_servers(self):
        out = open(os.path.join(self.dir, "server.json"), "w+")
        err = open(os.path.join(self.dir, "server.log"), "w")
        self.files = [out, err]
        env = self.env("demo-servers", NEMOLENS_MEMORY_PROFILING="true", NEMOLENS_MEMORY_SAMPLE_INTERVAL_MS=200)
        self.server = subprocess.Popen(self.launcher + [harness.PYTHON, os.path.join(DEMO, "server.py"), "--ports", "2",
                                        "--latency-ms", "2,30", "--full", "--refused"],
                                       env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        def first_line():
            out.seek(0)
            line = out.readline()
            return line if line.endswith("\n") else ""
        line = harness.poll(first_line, 30, interval=0.1, alive=self.server)
        if line:
            self.ports = json.loads(line)
            return
        raise RuntimeError("demo server did not start: " + open(err.name).read()[-2000:])

    def run_client(self):
        p = self.ports
        policy, judge = p["ports"]
        env = self.env("demo-client", NEMOLENS_DESTINATIONS=(
            f"policy=127.0.0.1:{policy},judge=127.0.0.1:{judge},"
            f"ghost=127.0.0.1:{p['refused']},slow=127.0.0.1:{p['full']}"))
        proc = subprocess.run(
            self.launcher + [harness.PYTHON, os.path.join(DEMO, "client.py"),
             "--target", f"policy=http://127.0.0.1:{policy}/v1/work",
             "--target", f"judge=http://127.0.0.1:{judge}/v1/work",
             "--target", f"agent=http://127.0.0.1:{policy}/run", "--post", "agent",
             "--target", f"model=http://127.0.0.1:{policy}/v1/chat/completions", "--chat", "model",
             "--target", f"resources=http://127.0.0.1:{judge}/verify", "--post", "resources",
             "--requests", str(self.requests), "--limit", str(self.limit), "--close-ratio", "0.25",
             "--extra", f"ghost=http://127.0.0.1:{p['refused']}/,4",
             "--extra", f"slow=http://127.0.0.1:{p['full']}/,2", "--connect-timeout", "0.3",
             "--linger", str(LINGER_S)],
            env=env, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"demo client failed ({proc.returncode}): {proc.stdout} {proc.stderr[-2000:]}")
        self.client_result = json.loads(proc.stdout)

    def run(self, timeout=30):
        """Servers, client, then wait until the backend holds the servers'
        requests and memory, and the client's connections."""
        self.start_servers()
        self.run_client()
        total = self.requests
        calls = sum(m["calls"] for m in self.client_result["models"].values())
        checks = [
            ('sum({__name__="http.server.request.duration_count"})', lambda v: v >= total),
            ('sum({__name__="http.client.request.duration_count"})', lambda v: v >= total),
            ('sum({__name__="gym.http.connection_pool.connect_total"})', lambda v: v >= 1),
            ('sum({__name__="gen_ai.client.operation.duration_count"})', lambda v: v >= calls),
            ('sum({__name__="gen_ai.server.request.duration_count"})', lambda v: v >= calls),
            ('sum({__name__="gen_ai.server.time_to_first_token_count"})', lambda v: v >= 1),
            ('sum({__name__="gym.server.memory.usage"})', lambda v: v > 0),
            ('sum({__name__="gym.host.memory.available"})', lambda v: v > 0),
        ]
        for q, ok in checks:
            vec = self.vm.wait_for(q, lambda r: bool(r) and ok(float(r[0]["value"][1])), timeout=timeout)
            if not vec or not ok(float(vec[0]["value"][1])):
                raise RuntimeError(f"not ingested within {timeout} s: {q} -> {vec}")
        # Two more exports of the servers' last values: every series then has
        # at least two samples, as rate() needs (the client lingers likewise).
        time.sleep(LINGER_S)
        # On a loaded machine an export can come late: the Gym endpoints'
        # series, recorded last, are waited for until they hold two samples.
        q = 'min(count_over_time({__name__=~"gym[.](verify|rollout)[.]duration_ms_count"}[1m]))'
        self.vm.wait_for(q, lambda r: bool(r) and float(r[0]["value"][1]) >= 2, timeout=timeout)

    def stop(self):
        if self.server is not None and self.server.poll() is None:
            os.kill(self.server.pid, signal.SIGTERM)
            try:
                self.server.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.server.pid, signal.SIGKILL)
                self.server.wait(10)
        self.server = None
        for f in self.files:
            f.close()
        self.files = []
        shutil.rmtree(self.dir, ignore_errors=True)
