# SPDX-License-Identifier: Apache-2.0
"""A private VictoriaMetrics for integration tests.

    vm = Victoria()                   # free 127.0.0.1 port, temporary data dir, healthy
    vm.otlp_url                       # where the shim should export (OTLP/HTTP protobuf)
    vm.query('sum(x)')                # PromQL instant query -> result vector (list of dicts)
    vm.wait_for('sum(x)', lambda r: ..., timeout=20)   # poll until predicate(vector) holds
    vm.stop()                         # by pid; also run at interpreter exit

Naming as observed with VictoriaMetrics 1.112 (OTLP ingestion, default flags):
metric names keep their dots and get no unit suffix; a histogram `h` becomes
`h_bucket` (label `le`, with "+Inf"), `h_count` and `h_sum`; every data point
and resource attribute becomes a label under its own dotted name
(e.g. `service.name`, `service.instance.id`, `process.pid`); no job/instance.
"""
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request

import harness

VM_BIN = os.environ.get("VM_BIN", "/opt/nemolens-deps/usr/bin/victoria-metrics")


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Victoria:
    def __init__(self, start_timeout=30.0):
        if not os.access(VM_BIN, os.X_OK):
            raise RuntimeError(f"{VM_BIN} not found: run scripts/setup-deps.sh")
        self.dir = tempfile.mkdtemp(prefix="nemolens-vm.")
        self.proc = None
        atexit.register(self.stop)
        last_error = None

        def healthy():
            nonlocal last_error
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                    return r.status == 200
            except OSError as e:
                last_error = e
                return False

        for _ in range(3):
            self.port = _free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self.otlp_url = f"{self.url}/opentelemetry/v1/metrics"
            self.log = open(os.path.join(self.dir, "vm.log"), "wb")
            self.proc = subprocess.Popen(
                [VM_BIN, f"-storageDataPath={self.dir}/data", f"-httpListenAddr=127.0.0.1:{self.port}",
                 "-retentionPeriod=1d", "-search.latencyOffset=0s", "-search.disableCache",
                 "-loggerLevel=ERROR"],
                stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if harness.poll(healthy, start_timeout, interval=0.1, alive=self.proc) and self.proc.poll() is None:
                return
            self._kill()   # exited (port taken?) or never healthy: try another port
        self.stop()
        raise RuntimeError(f"VictoriaMetrics did not become healthy: {last_error}")

    def _kill(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.proc = None
        self.log.close()

    def stop(self):
        self._kill()
        if self.dir and os.path.isdir(self.dir):
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None

    def _get(self, path, **params):
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{path} {params}: HTTP {e.code}: {e.read().decode(errors='replace')}")
        if body.get("status") != "success":
            raise RuntimeError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, promql):
        """The result vector of an instant query: [{"metric": {...}, "value": [ts, "v"]}, ...]."""
        data = self._get("/api/v1/query", query=promql)
        if data["resultType"] != "vector":
            raise RuntimeError(f"{promql}: result type {data['resultType']}")
        return data["result"]

    def values(self, promql):
        """The vector as {frozenset(labels.items()): float}."""
        return {frozenset(r["metric"].items()): float(r["value"][1]) for r in self.query(promql)}

    def metric_names(self):
        return self._get("/api/v1/label/__name__/values")

    def label_names(self):
        return self._get("/api/v1/labels")

    def flush(self):
        """Make recently ingested samples searchable now (/internal/force_flush).
        Without it, a query made within ~2 s of ingestion can keep seeing no
        series for ~10 s more (observed with 1.112)."""
        with urllib.request.urlopen(f"{self.url}/internal/force_flush", timeout=10) as r:
            r.read()

    def wait_for(self, promql, predicate, timeout=20.0, interval=0.2):
        """Poll `promql` (flushing first) until predicate(vector) is true; return
        the vector. On timeout, return the last vector (the caller's asserts
        then show it)."""
        last = []

        def holds():
            self.flush()
            last[:] = [self.query(promql)]
            return predicate(last[0])
        harness.poll(holds, timeout, interval)
        return last[0]


def scalar_by(vec, label):
    """{vec element's `label` value: float value}."""
    return {r["metric"].get(label): float(r["value"][1]) for r in vec}
