# SPDX-License-Identifier: Apache-2.0
"""The NeMo Lens C API end to end.

(a) A Python program under the preload records RL metrics through ctypes
    (examples/rl_metrics.py, functions found with ctypes.CDLL(None) and by
    opening the preloaded .so's path); the values reach a real VictoriaMetrics.
(b) The C example linked with libnemolens.so (not preloaded) exports exactly
    its values to the OTLP sink, decoded by the official bindings, and does not
    interpose connect(): its connection is not counted. Under the preload as
    well, the connection is counted and the values still arrive once.
(c) `cmake --install` to a temporary prefix installs both libraries, the header
    and a pkg-config file; the C example builds against that copy with
    `pkg-config --cflags --libs nemolens` and exports the same values.
"""
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402

BUILD = os.path.dirname(os.path.abspath(harness.BIN))
EXAMPLE = os.path.join(BUILD, "examples", "nemolens_example")
EXAMPLES_SRC = os.path.join(os.path.abspath(harness.SRC), "examples")
CONNECT_TOTAL = "gym.http.connection_pool.connect_total"
CALL_SITE = "nemolens.connection.call_site"
DURATION_S_BOUNDS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
TOKEN_BOUNDS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]
GYM_BOUNDS = [100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 300000, 600000, 1200000, 1800000,
              3600000]
RL_BOUNDS = [0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000]

# What examples/lens_example.c records (see its header comment).
EXAMPLE_HIST = {
    # name: {attribute items: (count, sum, min, max)}
    "gen_ai.server.request.duration": {
        (("gen_ai.operation.name", "text_completion"), ("gen_ai.provider.name", "nemo"),
         ("gen_ai.request.model", "llama-3-8b")): (2, 0.75, 0.25, 0.5),
        (("gen_ai.operation.name", "text_completion"), ("gen_ai.provider.name", "nemo"),
         ("gen_ai.request.model", "mistral-7b")): (1, 1.5, 1.5, 1.5),
    },
    "gen_ai.client.token.usage": {
        (("gen_ai.operation.name", "text_completion"), ("gen_ai.provider.name", "nemo"),
         ("gen_ai.request.model", "llama-3-8b"), ("gen_ai.token.type", "input")): (2, 384, 128, 256),
        (("gen_ai.operation.name", "text_completion"), ("gen_ai.provider.name", "nemo"),
         ("gen_ai.request.model", "llama-3-8b"), ("gen_ai.token.type", "output")): (2, 96, 32, 64),
        (("gen_ai.operation.name", "text_completion"), ("gen_ai.provider.name", "nemo"),
         ("gen_ai.request.model", "mistral-7b"), ("gen_ai.token.type", "input")): (1, 1000, 1000, 1000),
        (("gen_ai.operation.name", "text_completion"), ("gen_ai.provider.name", "nemo"),
         ("gen_ai.request.model", "mistral-7b"), ("gen_ai.token.type", "output")): (1, 10, 10, 10),
    },
    "rl.generation.duration_ms": {(): (3, 1500, 450, 550)},
    "rl.rollout.duration_ms": {(): (1, 2300, 2300, 2300)},
    "gym.verify.duration_ms": {(): (1, 120, 120, 120)},
}
EXAMPLE_UNITS = {
    "gen_ai.server.request.duration": "s", "gen_ai.client.token.usage": "{token}",
    "rl.generation.duration_ms": "ms", "rl.rollout.duration_ms": "ms", "gym.verify.duration_ms": "ms",
    "rl.reward.mean": "", "rl.policy_loss": "", "rl.learning_rate": "",
    "gym.verify.success_rate": "", "gym.servers.active": "",
}
EXAMPLE_BOUNDS = {
    "gen_ai.server.request.duration": DURATION_S_BOUNDS, "gen_ai.client.token.usage": TOKEN_BOUNDS,
    "rl.generation.duration_ms": RL_BOUNDS, "rl.rollout.duration_ms": RL_BOUNDS,
    "gym.verify.duration_ms": GYM_BOUNDS,
}
EXAMPLE_GAUGES = {"rl.reward.mean": 0.75, "rl.policy_loss": 0.3, "rl.learning_rate": 3e-6,
                  "gym.verify.success_rate": 0.5}


def lens_metric_names(sink):
    names = set()
    with sink.lock:
        for req in sink.requests:
            for rm in req.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        names.add(m.name)
    return names


class LensTestCase(unittest.TestCase):
    def assert_example_values(self, sink, instances=1):
        """The sink holds exactly what lens_example.c records, from `instances` processes."""
        for name, expected in EXAMPLE_HIST.items():
            pts = sink.latest_by_instance(name)
            got = {tuple(attrs(p).items()): (p.count, p.sum, p.min, p.max) for _, _, p in pts}
            self.assertEqual(len(pts), len(expected) * instances, name)
            self.assertEqual(got, expected, name)
            for _, m, p in pts:
                self.assertEqual(m.unit, EXAMPLE_UNITS[name], name)
                self.assertEqual(m.histogram.aggregation_temporality, 2)
                self.assertEqual(list(p.explicit_bounds), EXAMPLE_BOUNDS[name], name)
                self.assertEqual(sum(p.bucket_counts), p.count)
        for name, value in EXAMPLE_GAUGES.items():
            pts = sink.latest_by_instance(name)
            self.assertEqual(len(pts), instances, name)
            for _, m, p in pts:
                self.assertEqual(m.WhichOneof("data"), "gauge", name)
                self.assertEqual(m.unit, "", name)
                self.assertEqual(p.WhichOneof("value"), "as_double", name)
                self.assertEqual(p.as_double, value, name)
                self.assertEqual(attrs(p), {}, name)
        pts = sink.latest_by_instance("gym.servers.active")
        self.assertEqual([(m.WhichOneof("data"), p.WhichOneof("value"), p.as_int) for _, m, p in pts],
                         [("gauge", "as_int", 4)] * instances)
        # Nothing the example did not record, and everything in scope nemo.lens.
        with sink.lock:
            for req in sink.requests:
                for rm in req.resource_metrics:
                    for sm in rm.scope_metrics:
                        self.assertEqual(sm.scope.name, "nemo.lens")
        unexpected = lens_metric_names(sink) - set(EXAMPLE_UNITS) - {CONNECT_TOTAL, CALL_SITE}
        self.assertEqual(unexpected, set())


class LinkedCExample(LensTestCase):
    """(b): the C example linked with libnemolens.so."""

    def setUp(self):
        if not os.access(EXAMPLE, os.X_OK):
            self.skipTest(f"{EXAMPLE} not built")
        self.sink = harness.start_sink(self)
        self.listener = harness.AcceptingListener()

    def tearDown(self):
        self.listener.close()

    def env(self, preload):
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url,
                               NEMOLENS_DESTINATIONS=f"backend=127.0.0.1:{self.listener.port}")
        return env if preload else harness.without_shim(env)

    def test_linked_not_preloaded(self):
        proc = harness.run([EXAMPLE, "--connect", str(self.listener.port)], self.env(preload=False))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "")
        self.assertIn("recorded", proc.stdout)
        # The library is linked, and the preload is not in the process.
        maps = subprocess.run(["ldd", EXAMPLE], capture_output=True, text=True).stdout
        self.assertIn("libnemolens.so", maps)
        self.assertNotIn("libnemolens_preload", maps)
        self.assert_example_values(self.sink)
        # connect() is not interposed: the example's connection is not counted.
        counted = sum(p.as_int for _, _, p in self.sink.latest_by_instance(CONNECT_TOTAL))
        self.assertEqual(counted, 0)
        res, _, _ = self.sink.points("rl.reward.mean")[0]
        self.assertEqual(res["process.executable.name"], "nemolens_example")

    def test_linked_and_preloaded(self):
        """Both copies in one process: the preloaded functions win, values arrive once,
        and now the connection is counted."""
        proc = harness.run([EXAMPLE, "--connect", str(self.listener.port)], self.env(preload=True))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "")
        self.assert_example_values(self.sink, instances=1)
        got = {attrs(p)["nemo.gym.http.destination.server.name"]: p.as_int
               for _, _, p in self.sink.latest_by_instance(CONNECT_TOTAL)}
        self.assertEqual(got, {"backend": 1})
        sites = {attrs(p)["code.function.name"]: p.as_int for _, _, p in self.sink.latest_by_instance(CALL_SITE)}
        self.assertEqual(list(sites.values()), [1], sites)

    def test_disabled(self):
        env = self.env(preload=False)
        env["NEMOLENS_ENABLED"] = "false"
        proc = harness.run([EXAMPLE], env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("disabled", proc.stdout)
        self.assertEqual(self.sink.requests, [])


class InstalledCExample(LensTestCase):
    """(c): install to a temporary prefix, build the example with pkg-config."""

    def test_install_and_pkg_config(self):
        for tool in ("cmake", "pkg-config", "cc"):
            if not shutil.which(tool):
                self.skipTest(f"{tool} not found")
        if os.environ.get("NL_SANITIZER_RUNTIME"):
            self.skipTest("sanitizer build: the installed library needs the sanitizer runtime")
        prefix = tempfile.mkdtemp(prefix="nemolens-install.")
        self.addCleanup(shutil.rmtree, prefix, True)
        inst = subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix], capture_output=True, text=True)
        self.assertEqual(inst.returncode, 0, inst.stdout + inst.stderr)
        files = {os.path.relpath(os.path.join(d, f), prefix) for d, _, fs in os.walk(prefix) for f in fs}
        libdir = next(os.path.dirname(f) for f in files if f.endswith("libnemolens_preload.so"))
        for f in ("libnemolens.so", "libnemolens.so.0", "libnemolens_preload.so", "pkgconfig/nemolens.pc"):
            self.assertIn(os.path.join(libdir, f), files)
        self.assertIn("include/nemolens.h", files)

        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(prefix, libdir, "pkgconfig"))
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "nemolens"], env=env,
                               capture_output=True, text=True)
        self.assertEqual(flags.returncode, 0, flags.stderr)
        # The .pc file is relocatable (prefix from its own place): paths may hold "..".
        norm = {f[:2] + os.path.normpath(f[2:]) for f in flags.stdout.split() if f[:2] in ("-I", "-L")}
        self.assertEqual(norm, {f"-I{prefix}/include", f"-L{prefix}/{libdir}"})
        exe = os.path.join(prefix, "lens_example")
        cc = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE",
                             os.path.join(EXAMPLES_SRC, "lens_example.c"), "-o", exe] + flags.stdout.split(),
                            capture_output=True, text=True)
        self.assertEqual(cc.returncode, 0, cc.stderr)
        # The header is C++-clean too.
        if shutil.which("c++"):
            cxx = subprocess.run(["c++", "-fsyntax-only", "-x", "c++", "-Wall", "-Wextra", "-Werror",
                                  f"-I{prefix}/include", "-"],
                                 input="#include <nemolens.h>\nint main() {\n"
                                       "  nemolens_rl_metrics m{};\n  m.reward_mean = nemolens_f64(0.5);\n"
                                       "  nemolens_gym_metrics g{};\n  g.active_servers = nemolens_i64(2);\n"
                                       "  nemolens_record(nemolens_meter_default(), m);\n"
                                       "  nemolens_record(nullptr, g);\n}\n",
                                 capture_output=True, text=True)
            self.assertEqual(cxx.returncode, 0, cxx.stderr)

        sink = harness.start_sink(self)
        run_env = harness.plain_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=sink.url,
                                    LD_LIBRARY_PATH=os.path.join(prefix, libdir))
        ldd = subprocess.run(["ldd", exe], env=run_env, capture_output=True, text=True).stdout
        self.assertIn(os.path.join(prefix, libdir, "libnemolens.so.0"), ldd)
        proc = harness.run([exe], run_env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "")
        self.assert_example_values(sink)


PY_SCRIPT = r"""
import ctypes, os, sys
sys.path.insert(0, sys.argv[1])
import rl_metrics

# The functions come from the preloaded library, nothing is linked or installed.
lib = rl_metrics.lib()
assert lib._name is None, lib._name
assert lib.nemolens_enabled()
# Opening the preloaded .so by its path gives the very same functions.
direct = ctypes.CDLL(os.environ["LD_PRELOAD"].split(":")[-1])
assert ctypes.cast(direct.nemolens_record_rl, ctypes.c_void_p).value == \
       ctypes.cast(lib.nemolens_record_rl, ctypes.c_void_p).value

meter = rl_metrics.get_meter("trainer")
for step in range(4):
    rl_metrics.record_rl_metrics(meter, reward_mean=0.25 * step, policy_loss=1.5 - step, grad_norm=None,
                                 throughput_tokens_per_sec=18500.0,
                                 generation_duration_ms=100.0 * (step + 1))
rl_metrics.record_rl_metrics(meter, rollout_duration_ms=2300.0, learning_rate=3e-6)
# Through the path-opened handle and the default meter (NULL) too.
m = rl_metrics.RlMetrics()
m.kl_divergence = rl_metrics.OptF64(True, 0.02)
direct.nemolens_record_rl(None, ctypes.byref(m), ctypes.c_size_t(ctypes.sizeof(m)))
print("ok")
"""


class PythonUnderPreload(unittest.TestCase):
    """(a): Python + ctypes under the preload, into VictoriaMetrics."""

    @classmethod
    def setUpClass(cls):
        try:
            from victoria import Victoria
            cls.vm = Victoria()
        except RuntimeError as e:
            raise unittest.SkipTest(str(e))

    @classmethod
    def tearDownClass(cls):
        cls.vm.stop()

    def run_py(self, args, **extra):
        env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.vm.otlp_url, **extra)
        return harness.run([harness.PYTHON] + args, env)

    def series(self, name):
        vec = self.vm.wait_for(f'{{__name__="{name}",service.name="{self.service}"}}', lambda v: len(v) > 0)
        return [(r["metric"], float(r["value"][1])) for r in vec]

    def one(self, name):
        s = self.series(name)
        self.assertEqual(len(s), 1, f"{name}: {s}")
        return s[0]

    def test_rl_metrics_reach_victoria(self):
        self.service = "lens-ctypes-test"
        proc = self.run_py(["-c", PY_SCRIPT, EXAMPLES_SRC], OTEL_SERVICE_NAME=self.service)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "ok")
        self.assertEqual(proc.stderr, "")
        gauges = {"rl.reward.mean": 0.75, "rl.policy_loss": -1.5, "rl.throughput.tokens_per_sec": 18500.0,
                  "rl.learning_rate": 3e-6, "rl.kl_divergence": 0.02}
        for name, value in gauges.items():
            labels, v = self.one(name)
            self.assertTrue(math.isclose(v, value, rel_tol=1e-12), f"{name} = {v}")
            # Gauges carry no point attributes: only resource labels.
            self.assertTrue(labels["process.executable.name"].startswith("python3"), labels)
        self.assertEqual(self.vm.query(f'{{__name__="rl.grad_norm",service.name="{self.service}"}}'), [])
        self.assertEqual(self.one("rl.generation.duration_ms_count")[1], 4)
        self.assertEqual(self.one("rl.generation.duration_ms_sum")[1], 1000)
        self.assertEqual(self.one("rl.rollout.duration_ms_count")[1], 1)
        self.assertEqual(self.one("rl.rollout.duration_ms_sum")[1], 2300)
        buckets = {r[0]["le"]: r[1] for r in self.series("rl.generation.duration_ms_bucket")}
        # 100, 200, 300, 400 ms against the cumulative `le` buckets.
        self.assertEqual(buckets["100"], 1)
        self.assertEqual(buckets["250"], 2)
        self.assertEqual(buckets["500"], 4)
        self.assertEqual(buckets["+Inf"], 4)

    def test_example_script(self):
        self.service = "lens-ctypes-example"
        proc = self.run_py([os.path.join(EXAMPLES_SRC, "rl_metrics.py")], OTEL_SERVICE_NAME=self.service)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("recorded", proc.stdout)
        self.assertEqual(self.one("rl.reward.mean")[1], 0.75)
        self.assertEqual(self.one("rl.generation.duration_ms_count")[1], 3)
        self.assertEqual(self.one("rl.rollout.duration_ms_sum")[1], 2300)


if __name__ == "__main__":
    unittest.main(verbosity=2)
