# SPDX-License-Identifier: Apache-2.0
"""Call sites of connections (native programs): a program connects from
functions it names, a known number of times each, under the shim; the OTLP
sink must show each connection once under the function that made it, and
the same totals as connect_total."""
import collections
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402

NAME = "nemo.lens.connection.call_site.attempts"
DEST = "nemo.gym.http.destination.server.name"
FUNCTION = "code.function.name"
OBJECT = "nemo.lens.code.shared_object"
CLIENT = os.path.join(harness.BIN, "callsite_client")
N = 25
# Under a sanitizer's runtime, a program linked with libcurl sometimes hangs
# at exit in libp11-kit's destructor (with or without call sites): the
# sanitizer runs leave the libcurl caller out.
SANITIZED = bool(os.environ.get("NL_SANITIZER_RUNTIME"))
# ThreadSanitizer's runtime defers signals (an interrupted connect() then
# fails with EINTR) and does not support a vfork child calling into it, nor
# fork children of a threaded process: those programs cannot run under it.
TSAN = "tsan" in os.environ.get("NL_SANITIZER_RUNTIME", "")


class CallSites(harness.ShimTestCase):
    def run_client(self, *args, timeout=60, **env):
        e = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=self.sink.url,
                             NEMOLENS_DESTINATIONS=f"policy=127.0.0.1:{self.listener.port}", **env)
        start = time.monotonic()
        proc = harness.run([CLIENT, str(self.listener.port), str(N)] + [str(a) for a in args], e, timeout=timeout)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "", "the shim printed warnings")
        self.elapsed = time.monotonic() - start
        return proc

    def sites(self):
        """{(function, object): count} over every process, and the overflow count."""
        got, overflow = collections.Counter(), 0
        for _, m, p in self.sink.latest_by_instance(NAME):
            a = attrs(p)
            self.assertEqual(m.unit, "{connection}")
            self.assertTrue(m.sum.is_monotonic)
            if a.get("otel.metric.overflow"):
                overflow += p.as_int
                continue
            self.assertEqual(a[DEST], "policy")
            got[(a[FUNCTION], os.path.basename(a.get(OBJECT, "")))] += p.as_int
        return got, overflow

    def connect_total(self):
        return sum(p.as_int for _, _, p in self.sink.latest_by_instance("gym.http.connection_pool.connect_total"))

    def test_three_functions(self):
        self.run_client("three", *(["nocurl"] if SANITIZED else []))
        got, overflow = self.sites()
        want = {
            ("direct_connect", "callsite_client"): N,
            ("callsite_lib_connect", "libcallsite_lib.so"): N,
        }
        if not SANITIZED:
            want[("curl_caller", "callsite_client")] = N
        self.assertEqual(dict(got), want)
        self.assertEqual(overflow, 0)
        self.assertEqual(self.connect_total(), len(want) * N)
        # Gym's own instrument keeps exactly its attributes.
        for _, _, p in self.sink.latest_by_instance("gym.http.connection_pool.connect_total"):
            self.assertEqual(list(attrs(p)), [DEST])

    def test_limit_then_overflow(self):
        self.run_client("many", 6, NEMOLENS_CALL_SITE_LIMIT=4)
        got, overflow = self.sites()
        self.assertEqual(len(got), 4)
        self.assertEqual(set(got.values()), {N})
        self.assertTrue(all(f.startswith("site_") for f, _ in got))
        self.assertEqual(overflow, 2 * N)

    def test_off(self):
        self.run_client("three", *(["nocurl"] if SANITIZED else []), NEMOLENS_CALL_SITES="false")
        self.assertEqual(self.sink.points(NAME), [])
        self.assertEqual(self.connect_total(), (2 if SANITIZED else 3) * N)

    @unittest.skipIf(TSAN, "the program cannot run under ThreadSanitizer")
    def test_signal_handler(self):
        proc = self.run_client("signal", timeout=30)
        handled = json.loads(proc.stdout)["handler"]
        got, overflow = self.sites()
        # A handler that interrupted the main thread's own unwinding counts
        # as unknown; every other connection under its function.
        unknown = got.pop(("unknown", ""), 0)
        self.assertEqual(got[("direct_connect", "callsite_client")], N)
        self.assertEqual(got[("signal_connect", "callsite_client")] + unknown, handled)
        self.assertEqual(len(got), 2)
        self.assertEqual(overflow, 0)

    @unittest.skipIf(TSAN, "the program cannot run under ThreadSanitizer")
    def test_vfork_children(self):
        self.run_client("vfork", timeout=30)
        got, _ = self.sites()
        # Named when the name was known before the vfork, else unknown.
        self.assertEqual(got.get(("vfork_child", "callsite_client"), 0) + got.get(("unknown", ""), 0), N)
        self.assertEqual(sum(got.values()), N)

    @unittest.skipIf(TSAN, "the program cannot run under ThreadSanitizer")
    def test_threads_connect_while_main_forks(self):
        self.run_client("forks", 4, timeout=60)
        self.assertLess(self.elapsed, 30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.connect_total() < 5 * N:
            time.sleep(0.1)   # the children's values, delivered by the parent
        got, overflow = self.sites()
        total = self.connect_total()
        if not SANITIZED:
            # (Under a sanitizer the fork children may record nothing.)
            self.assertEqual(total, 5 * N, "every child's connection delivered")
        self.assertEqual(got[("thread_connect", "callsite_client")], 4 * N)
        self.assertEqual(got.get(("fork_child", "callsite_client"), 0) + got.get(("unknown", ""), 0), total - 4 * N)
        self.assertEqual(overflow, 0)
        self.assertEqual(sum(got.values()), total)


if __name__ == "__main__":
    unittest.main()
