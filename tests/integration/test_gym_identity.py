# SPDX-License-Identifier: Apache-2.0
"""A server started the way NeMo Gym's orchestrator starts one: its name in
NEMO_GYM_CONFIG_PATH, the global configuration (YAML, as OmegaConf writes it)
in NEMO_GYM_CONFIG_DICT, Gym's own switch for memory profiling, and no
variable of the shim's naming it. Its resource and its memory series carry
the name and type Gym gives it, and service.name as Gym builds it."""
import os
import signal
import socket
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402

CONFIG = """config_paths:
- resources_servers/math/configs/math.yaml
policy_model:
  responses_api_models:
    vllm_model:
      entrypoint: app.py
math_verify:
  resources_servers:
    math:
      entrypoint: app.py
      host: 127.0.0.1
"""
USAGE = "gym.server.memory.usage"
DURATION = "http.server.request.duration"


def answers(url):
    """Whether an HTTP server answers URL."""
    try:
        urllib.request.urlopen(url, timeout=2).read()
        return True
    except OSError:
        return False


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GymServer(unittest.TestCase):
    def serve(self, **extra):
        sink = harness.start_sink(self)
        port = free_port()
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=sink.url, OTEL_METRIC_EXPORT_INTERVAL=200,
                               NEMOLENS_MEMORY_SAMPLE_INTERVAL_MS=100, NEMO_GYM_CONFIG_PATH="math_verify",
                               NEMO_GYM_CONFIG_DICT=CONFIG, NEMO_GYM_OTEL_MEMORY_PROFILING_ENABLED="true", **extra)
        p = subprocess.Popen([harness.PYTHON, "-m", "http.server", str(port), "--bind", "127.0.0.1"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd="/")
        try:
            harness.wait_for(lambda: answers(f"http://127.0.0.1:{port}/"), 20, "http.server to answer", alive=p)
            time.sleep(0.8)
        finally:
            p.send_signal(signal.SIGINT)   # http.server exits normally: the exit flush
            _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        return sink

    def test_name_type_and_service_from_gyms_variables(self):
        sink = self.serve()
        want = {"service.name": "nemo-gym/math_verify", "nemo.gym.server.name": "math_verify",
                "nemo.gym.server.type": "resources_servers"}
        for name in (USAGE, DURATION):
            points = sink.points(name)
            self.assertTrue(points, name)
            for res, _, _ in points:
                self.assertEqual({k: res.get(k) for k in want}, want, name)
        mem = [attrs(p) for _, _, p in sink.points(USAGE)]
        self.assertEqual({(a["nemo.gym.server.name"], a["nemo.gym.server.type"]) for a in mem},
                         {("math_verify", "resources_servers")})

    def test_otel_service_name_is_the_group(self):
        sink = self.serve(OTEL_SERVICE_NAME="rl-run")
        res = {r.get("service.name") for r, _, _ in sink.points(USAGE)}
        self.assertEqual(res, {"rl-run/math_verify"})


if __name__ == "__main__":
    unittest.main(verbosity=2)
