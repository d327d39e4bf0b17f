# SPDX-License-Identifier: Apache-2.0
"""The ways a process ends of test_nothing_lost.py, exporting over
OTLP/gRPC to grpcio's MetricsService (otlp_grpc_sink.py): every value
reaches the receiver exactly once per process, under its own resource,
with the exact counts, in both modes. The exit flush, the delivery of the
dead from their segments and the launcher's export of the tree are the
same machinery for both protocols; this shows the gRPC transport carries
all of them. (The cases that script the collector's answers, and those
that concern only the segments' files, run over OTLP/HTTP alone.)"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from otlp_grpc_sink import GrpcSink  # noqa: E402
from test_nothing_lost import INTERVAL_MS, NothingLost  # noqa: E402

KEPT = ("test_every_way_a_child_ends", "test_fork_pool_terminated",
        "test_child_that_outlives_its_parent_is_delivered_by_the_next_process",
        "test_launcher_delivers_its_program_killed_with_sigkill")


class OverGrpc(NothingLost):
    @classmethod
    def setUpClass(cls):
        cls.listener = harness.AcceptingListener()
        cls.sink = GrpcSink()
        cls.addClassCleanup(cls.sink.close)

    def setUp(self):
        super().setUp()
        self.sink.script.clear()

    def env(self, **extra):
        settings = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": self.sink.endpoint,
                    "OTEL_METRIC_EXPORT_INTERVAL": INTERVAL_MS, "XDG_RUNTIME_DIR": self.base}
        settings.update(extra)
        return harness.shim_env(**settings)


class NothingLostOverGrpc(OverGrpc):
    """Plain LD_PRELOAD: each process exports for itself, over gRPC."""


class NothingLostOverGrpcUnderTheLauncher(OverGrpc):
    """nemolens-run exports for the tree, over gRPC."""
    launcher = True
    scale = 5
    test_launcher_delivers_its_program_killed_with_sigkill = None


for cls in (NothingLostOverGrpc, NothingLostOverGrpcUnderTheLauncher):
    for name in dir(NothingLost):
        if name.startswith("test_") and name not in KEPT:
            setattr(cls, name, None)
del NothingLost, OverGrpc, cls

if __name__ == "__main__":
    unittest.main(verbosity=2)
