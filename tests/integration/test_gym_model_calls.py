# SPDX-License-Identifier: Apache-2.0
"""NeMo Gym's model-call capture, case by case, from outside both processes.

A vLLM-shaped engine (http_apps/vllm_standin.py) runs behind a Gym-shaped
model server (http_apps/gym_proxy.py), which takes calls under Gym's
/ng-rollout/<id>/ prefix and forwards them; a driver (http_apps/
gym_driver.py) makes the calls of PLAN through it, each on its own
connection. All three run under the shim. The plan holds every dialect
streamed and whole, and each way a call goes wrong: a stream the driver
abandons after its first chunk, an engine that dies mid-stream, an error
event inside a 200, a Responses stream that ends incomplete, an empty 200,
a timeout (504), 429, 404; and a completion and an embedding.

- gym.model_call.duration_ms of the model server: per (dialect, outcome)
  exactly what the plan caused, in NeMo Gym's outcome vocabulary;
  completions and embeddings absent, present in gen_ai.*.
- gym.model_call.ttft_ms: one sample per stream that sent a chunk, at most
  what the driver measured, chat streams after the engine's delay,
  Responses and Messages streams at once (response.created, message_start).
- The engine counts the same calls: told apart by nemo.gym.server.name
  (and the resource), so selecting the model server's counts each call once.
- Each instrument's unit, attribute keys and bucket boundaries are NeMo
  Gym's recorder's (GYM below, written from its source).
"""
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from http_apps import httpcheck as hc  # noqa: E402

PY = "/usr/bin/python3"
FIRST_DELAY = 0.3
SANITIZED = bool(os.environ.get("NL_SANITIZER_RUNTIME"))
ENGINE, PROXY, DRIVER = "vllm-engine", "gym-model-server", "gym-driver"

# NeMo Gym's recorder (nemo_gym/telemetry/gym_metrics.py, record_model_call):
# name -> (unit, attribute keys of a data point, explicit bucket boundaries).
IDENTITY = {"nemo.gym.server.name", "nemo.gym.model_call.dialect"}
GYM = {
    "gym.model_call.duration_ms": ("ms", IDENTITY | {"nemo.gym.model_call.outcome"},
                                   [100, 250, 500, 1000, 2000, 5000, 10000, 30000, 60000, 120000, 300000, 600000,
                                    1800000]),
    "gym.model_call.ttft_ms": ("ms", IDENTITY,
                               [50, 100, 250, 500, 1000, 2000, 5000, 10000, 30000, 60000, 120000, 300000]),
    "gym.model_call.tokens": ("{token}", IDENTITY | {"nemo.gym.model_call.token.type"},
                              [16, 64, 256, 1024, 4096, 16384, 32768, 65536, 131072, 262144, 524288, 1048576]),
    "gym.model_call.finish_total": ("1", IDENTITY | {"nemo.gym.model_call.finish_reason"}, None),
}


def chat(model, stream, n=3):
    return {"model": model, "messages": [{"role": "user", "content": "abc"}], "max_tokens": n, "stream": stream}


def resp(model, stream):
    return {"model": model, "input": "abc", "max_output_tokens": 3, "stream": stream}


# (path after /v1/, body, abandon, dialect, outcome at the model server; None: not Gym's)
PLAN = [
    ("chat/completions", chat("policy", True), False, "chat", "ok"),
    ("chat/completions", chat("policy", False), False, "chat", "ok"),
    ("responses", resp("policy", True), False, "responses", "ok"),
    ("responses", resp("policy", False), False, "responses", "ok"),
    ("messages", chat("claude", True), False, "messages", "ok"),
    ("messages", chat("claude", False), False, "messages", "ok"),
    ("chat/completions", chat("policy", True, 40), True, "chat", "stream_truncated"),
    ("chat/completions", chat("die", True), False, "chat", "stream_truncated"),
    ("chat/completions", chat("explode", True), False, "chat", "upstream_error"),
    ("responses", resp("short", True), False, "responses", "incomplete"),
    ("chat/completions", chat("empty", False), False, "chat", "ok"),
    ("chat/completions", chat("slow", False), False, "chat", "timeout"),
    ("messages", chat("busy", False), False, "messages", "rate_limit"),
    ("responses", resp("missing", True), False, "responses", "not_found"),
    ("completions", {"model": "policy", "prompt": "abc", "max_tokens": 2}, False, None, None),
    ("embeddings", {"model": "embed", "input": "abcd"}, False, None, None),
]


class GymModelCalls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME=ENGINE, STANDIN_FIRST_DELAY=str(FIRST_DELAY))
        cls.engine = hc.App([PY, hc.app_path("vllm_standin.py")], env, "vllm-standin")
        cls.addClassCleanup(cls.engine.cleanup)
        env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME=PROXY, ENGINE=f"http://127.0.0.1:{cls.engine.info['port']}")
        cls.proxy = hc.App([PY, hc.app_path("gym_proxy.py")], env, "gym-proxy")
        cls.addClassCleanup(cls.proxy.cleanup)
        plan = [{"path": f"/ng-rollout/r-{i}/v1/{path}", "body": body, "abandon": abandon}
                for i, (path, body, abandon, _, _) in enumerate(PLAN)]
        out = subprocess.run([PY, hc.app_path("gym_driver.py"), f"http://127.0.0.1:{cls.proxy.info['port']}"],
                             input=json.dumps(plan), env=hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME=DRIVER),
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        cls.calls = json.loads(out.stdout)
        time.sleep(0.5)     # the abandoned and broken streams' ends reach both servers
        cls.proxy.stop()
        cls.engine.stop()
        reqs = hc.all_requests(cls.sink)
        cls.srv = hc.of_service(reqs, PROXY)
        cls.eng = hc.of_service(reqs, ENGINE)
        cls.drv = hc.of_service(reqs, DRIVER)

    def test_the_driver_saw_the_plan(self):
        statuses = [c["status"] for c in self.calls]
        self.assertEqual(statuses, [200] * 11 + [504, 429, 404, 200, 200], self.calls)
        self.assertTrue(self.calls[7]["broke"], "the engine died mid-stream")

    def test_outcomes_per_dialect(self):
        want = {}
        for _, _, _, dialect, outcome in PLAN:
            if dialect:
                want[(dialect, outcome)] = want.get((dialect, outcome), 0) + 1
        got = hc.counts_by(self.srv, "gym.model_call.duration_ms", "nemo.gym.model_call.dialect",
                           "nemo.gym.model_call.outcome")
        self.assertEqual(got, want)

    def test_completions_and_embeddings_stay_in_gen_ai(self):
        got = hc.counts_by(self.srv, "gen_ai.server.request.duration", "gen_ai.operation.name")
        self.assertEqual(got.get(("text_completion",)), 1, got)
        self.assertEqual(got.get(("embeddings",)), 1, got)
        dialects = hc.attribute_values(self.srv, "gym.model_call.duration_ms", "nemo.gym.model_call.dialect")
        self.assertEqual(dialects, {"chat", "responses", "messages"})

    def test_one_first_chunk_per_stream(self):
        streams = [(p[3], c["first_chunk"]) for p, c in zip(PLAN, self.calls)
                   if p[1].get("stream") and c["status"] == 200]
        got = hc.hist_by(self.srv, "gym.model_call.ttft_ms", "nemo.gym.model_call.dialect")
        want = {}
        for dialect, _ in streams:
            want[(dialect,)] = want.get((dialect,), 0) + 1
        self.assertEqual({k: h.count for k, h in got.items()}, want)
        # Never after the driver saw it; chat streams wait for the engine's
        # delay, the others begin at once.
        # (How much later the driver sees a chunk is the machine's: tens of
        # milliseconds, hundreds in a sanitizer build on a loaded machine.)
        late = 500 if SANITIZED else 100
        for (dialect,), h in got.items():
            seen = sum(t for d, t in streams if d == dialect) * 1000
            self.assertLessEqual(h.sum, seen + 5, dialect)
            self.assertGreaterEqual(h.sum, seen - late * h.count, dialect)
        self.assertGreaterEqual(got[("chat",)].min, FIRST_DELAY * 1000 - 5)
        self.assertLess(got[("responses",)].max, FIRST_DELAY * 1000 / 2)
        self.assertLess(got[("messages",)].max, FIRST_DELAY * 1000 / 2)
        # The driver's own side: one time to first chunk per stream too.
        own = hc.hist_by(self.drv, "gen_ai.client.operation.time_to_first_chunk")[()]
        self.assertEqual(own.count, len(streams))
        self.assertLessEqual(own.sum, sum(t for _, t in streams) + 0.05)

    def test_the_engine_is_told_apart(self):
        # The engine behind the model server reads the same calls (unprefixed
        # paths are Gym's too): its series carry its own server name.
        engine = hc.counts_by(self.eng, "gym.model_call.duration_ms", "nemo.gym.server.name")
        proxy = hc.counts_by(self.srv, "gym.model_call.duration_ms", "nemo.gym.server.name")
        self.assertEqual(set(engine), {(ENGINE,)})
        self.assertEqual(set(proxy), {(PROXY,)})
        # Selecting the model server's name counts each call once.
        self.assertEqual(sum(proxy.values()), sum(1 for p in PLAN if p[3]))

    def test_units_attributes_and_buckets_are_gyms(self):
        for name, (unit, keys, bounds) in GYM.items():
            points = hc.points_in(self.srv, name)
            self.assertTrue(points, name)
            for _, metric, p in points:
                self.assertEqual(metric.unit, unit, name)
                self.assertEqual({a.key for a in p.attributes}, keys, name)
                if bounds is not None:
                    self.assertEqual(list(p.explicit_bounds), bounds, name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
