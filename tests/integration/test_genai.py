# SPDX-License-Identifier: Apache-2.0
"""Model calls read from the bytes, on both sides, with no code change.

A vLLM-shaped stand-in (http_apps/vllm_standin.py: Starlette under uvicorn)
runs under the shim; so do its clients: aiohttp without streaming, httpx
streaming (http_apps/genai_client.py) and curl. The stand-in's token counts
follow from the requests, so this test knows every figure:

- gen_ai.server.request.duration and gen_ai.client.operation.duration:
  calls per (operation, request model, error.type), a 404, an error event
  inside a 200 stream, a client that walks away mid-stream
  (connection_closed);
- gen_ai.client.token.usage: count and sum per (operation, response model,
  token type) on both sides, Anthropic's cache tokens in the input;
- gen_ai.client.operation.time_to_first_chunk: one per stream, however it
  ended (the one with an error event and the one the client walked away
  from included), to its first chunk: at most what the client itself saw;
  gen_ai.server.time_to_first_token one per stream, to its first token, at
  least the stand-in's delay; time_per_output_token one per completed stream;
- NeMo Gym's gym.model_call.*: duration per (dialect, outcome) with Gym's
  outcomes (an error event inside a 200 is upstream_error, a stream the
  client walked away from is stream_truncated), tokens per (dialect, type)
  with reasoning tokens, finish_total per (dialect, reason), ttft_ms per
  dialect for event streams; only Gym's three dialects (/v1/completions
  stays in gen_ai.*); nemo.gym.server.name the server's.

All of it once over plain HTTP and once over HTTPS (uvicorn with a
certificate made for the run; OpenSSL's plaintext on both sides), and the
same again with the stand-in compressing what it answers as each client
asks (aiohttp and httpx ask for gzip; curl asks for deflate only, and sends
its request body gzip-compressed): the same figures, read through zlib.
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from http_apps import httpcheck as hc  # noqa: E402
from http_apps import tlsapps  # noqa: E402

PY = "/usr/bin/python3"
FIRST_DELAY = 0.3
SERVER, CLIENT, CURL = "genai-server", "genai-client", "genai-curl"
SANITIZED = bool(os.environ.get("NL_SANITIZER_RUNTIME"))


def sums(reqs, name, *keys):
    return {k: (h.count, round(h.sum, 6)) for k, h in hc.hist_by(reqs, name, *keys).items()}


class ModelCalls(unittest.TestCase):
    TLS = False
    COMPRESS = False

    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        tls_env, curl_tls, client_env = {}, [], {}
        if cls.TLS:
            d = tempfile.TemporaryDirectory()
            cls.addClassCleanup(d.cleanup)
            cert, key = tlsapps.make_cert(d.name)
            tls_env = {"STANDIN_CERT": cert, "STANDIN_KEY": key}
            curl_tls = ["--cacert", cert]
            client_env = {"GENAI_CAFILE": cert}
        if cls.COMPRESS:
            tls_env["STANDIN_COMPRESS"] = "1"
        env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME=SERVER, STANDIN_FIRST_DELAY=str(FIRST_DELAY), **tls_env)
        cls.server = hc.App([PY, hc.app_path("vllm_standin.py")], env, "vllm-standin")
        cls.addClassCleanup(cls.server.cleanup)
        base = f"{'https' if cls.TLS else 'http'}://127.0.0.1:{cls.server.info['port']}"
        out = subprocess.run([PY, hc.app_path("genai_client.py"), base], env=hc.shim_env(cls.sink.url,
                             OTEL_SERVICE_NAME=CLIENT, **client_env), capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        cls.client = json.loads(out.stdout.strip().splitlines()[-1])
        body = json.dumps({"model": "policy-c", "messages": [{"role": "user", "content": "curl"}], "max_tokens": 2})
        # In a sanitizer build curl runs without the shim: the sanitizer's
        # runtime cannot start in curl (libp11-kit's constructor calls
        # newlocale before it, whose malloc then starts the runtime under
        # glibc's locale lock, and it deadlocks on that lock). The server still
        # sees its call; its client side is checked in the plain build.
        curl_env = harness.plain_env() if SANITIZED else hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME=CURL)
        with tempfile.TemporaryDirectory() as d:
            head, send = os.path.join(d, "head"), ["-d", body]
            if cls.COMPRESS:
                with open(os.path.join(d, "body.gz"), "wb") as f:
                    f.write(gzip.compress(body.encode()))
                send = ["-H", "Content-Encoding: gzip", "--data-binary", "@" + f.name,
                        "-H", "Accept-Encoding: deflate", "--compressed"]
            subprocess.run(["curl", "-sS", "--http1.1", "-o", "/dev/null", "-D", head, "-H",
                            "Content-Type: application/json", *send, *curl_tls, base + "/v1/chat/completions"],
                           env=curl_env, check=True, timeout=60)
            with open(head) as f:
                cls.curl_head = f.read().lower()
        time.sleep(0.5)     # the walked-away stream's end on the server
        cls.server.stop()
        reqs = hc.all_requests(cls.sink)
        cls.srv = hc.of_service(reqs, SERVER)
        cls.cli = hc.of_service(reqs, CLIENT)
        cls.curl = hc.of_service(reqs, CURL)

    # ---- the GenAI conventions' set ------------------------------------------------
    def test_server_calls(self):
        got = hc.counts_by(self.srv, "gen_ai.server.request.duration", "gen_ai.operation.name",
                           "gen_ai.request.model", "error.type")
        self.assertEqual(got, {
            ("chat", "policy-a", None): 4, ("text_completion", "policy-a", None): 1,
            ("chat", "claude-a", None): 1, ("chat", "missing", "404"): 1, ("chat", "policy-b", None): 3,
            ("chat", "claude-b", None): 1, ("chat", "explode", "InternalServerError"): 1,
            ("chat", "policy-b", "connection_closed"): 1, ("chat", "policy-c", None): 1})
        providers = hc.attribute_values(self.srv, "gen_ai.server.request.duration", "gen_ai.provider.name")
        self.assertEqual(providers, {"openai", "anthropic"})

    def test_compressed_as_asked(self):
        self.assertEqual("content-encoding: deflate" in self.curl_head, self.COMPRESS, self.curl_head)

    def test_client_calls(self):
        got = hc.counts_by(self.cli, "gen_ai.client.operation.duration", "gen_ai.operation.name",
                           "gen_ai.request.model", "error.type")
        self.assertEqual(got, {
            ("chat", "policy-a", None): 4, ("text_completion", "policy-a", None): 1,
            ("chat", "claude-a", None): 1, ("chat", "missing", "404"): 1, ("chat", "policy-b", None): 3,
            ("chat", "claude-b", None): 1, ("chat", "explode", "InternalServerError"): 1,
            ("chat", "policy-b", "connection_closed"): 1})
        if not SANITIZED:
            self.assertEqual(hc.counts_by(self.curl, "gen_ai.client.operation.duration", "gen_ai.request.model",
                                          "server.address"), {("policy-c", "127.0.0.1"): 1})

    TOKENS = {
        ("chat", "policy-a", "input"): (4, 21), ("chat", "policy-a", "output"): (4, 27),
        ("text_completion", "policy-a", "input"): (1, 9), ("text_completion", "policy-a", "output"): (1, 3),
        ("chat", "claude-a", "input"): (1, 11), ("chat", "claude-a", "output"): (1, 8),
        ("chat", "policy-b", "input"): (3, 18), ("chat", "policy-b", "output"): (3, 12),
        ("chat", "claude-b", "input"): (1, 10), ("chat", "claude-b", "output"): (1, 6),
    }

    def test_tokens_both_sides(self):
        keys = ("gen_ai.operation.name", "gen_ai.response.model", "gen_ai.token.type")
        server = dict(self.TOKENS)
        server[("chat", "policy-c", "input")] = (1, 4)
        server[("chat", "policy-c", "output")] = (1, 2)
        self.assertEqual(sums(self.srv, "gen_ai.client.token.usage", *keys), server)
        self.assertEqual(sums(self.cli, "gen_ai.client.token.usage", *keys), self.TOKENS)

    def test_time_to_first_chunk(self):
        # Six streams: four that completed, the error event's, the one walked away from.
        own = self.client["first_chunk"]
        self.assertEqual(len(own), 6, self.client)
        h = hc.hist_by(self.cli, "gen_ai.client.operation.time_to_first_chunk")[()]
        self.assertEqual(h.count, 6)
        self.assertLessEqual(h.sum, sum(own) + 0.05, "the shim saw the first chunks after the client did")
        # The four chat streams' first chunk waits for the delay; the
        # Responses and Messages streams begin at once (response.created,
        # message_start).
        self.assertGreaterEqual(h.sum, 4 * (FIRST_DELAY - hc.TIMER_SLACK))
        self.assertLess(h.min, FIRST_DELAY / 2)
        ttft = hc.hist_by(self.srv, "gen_ai.server.time_to_first_token")[()]
        self.assertEqual(ttft.count, 6)
        self.assertGreaterEqual(ttft.min, FIRST_DELAY - hc.TIMER_SLACK, "the first token comes after the delay")
        self.assertEqual(hc.hist_by(self.srv, "gen_ai.server.time_per_output_token")[()].count, 4)

    # ---- NeMo Gym's model-call set ---------------------------------------------------
    def test_gym_duration(self):
        got = hc.counts_by(self.srv, "gym.model_call.duration_ms", "nemo.gym.model_call.dialect",
                           "nemo.gym.model_call.outcome", "nemo.gym.server.name")
        self.assertEqual(got, {("chat", "ok", SERVER): 6, ("chat", "not_found", SERVER): 1,
                               ("chat", "upstream_error", SERVER): 1, ("chat", "stream_truncated", SERVER): 1,
                               ("responses", "ok", SERVER): 2, ("messages", "ok", SERVER): 2})
        self.assertEqual(hc.metric_names(self.cli) & {"gym.model_call.duration_ms", "gym.model_call.tokens"},
                         set(), "the client side has no Gym model-call series")

    def test_gym_tokens(self):
        got = sums(self.srv, "gym.model_call.tokens", "nemo.gym.model_call.dialect", "nemo.gym.model_call.token.type")
        self.assertEqual(got, {
            ("chat", "input"): (6, 36), ("chat", "output"): (6, 27), ("chat", "reasoning"): (4, 8),
            ("responses", "input"): (2, 7), ("responses", "output"): (2, 14), ("responses", "reasoning"): (2, 2),
            ("messages", "input"): (2, 21), ("messages", "output"): (2, 14)})

    def test_gym_finish(self):
        got = hc.values_by(self.srv, "gym.model_call.finish_total", "nemo.gym.model_call.dialect",
                           "nemo.gym.model_call.finish_reason")
        self.assertEqual(got, {("chat", "length"): 4, ("chat", "stop"): 2, ("responses", "completed"): 2,
                               ("messages", "max_tokens"): 1, ("messages", "end_turn"): 1})

    def test_gym_ttft(self):
        got = hc.hist_by(self.srv, "gym.model_call.ttft_ms", "nemo.gym.model_call.dialect")
        self.assertEqual({k: h.count for k, h in got.items()},
                         {("chat",): 4, ("responses",): 1, ("messages",): 1})
        # Responses sends response.created at once: its first body chunk comes before the delay.
        self.assertGreaterEqual(got[("chat",)].min, FIRST_DELAY * 1000 - 2)
        self.assertLess(got[("responses",)].max, FIRST_DELAY * 1000)


class ModelCallsOverTLS(ModelCalls):
    TLS = True


class CompressedModelCalls(ModelCalls):
    COMPRESS = True


class CompressedModelCallsOverTLS(ModelCalls):
    TLS = True
    COMPRESS = True


if __name__ == "__main__":
    unittest.main()
