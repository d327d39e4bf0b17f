# SPDX-License-Identifier: Apache-2.0
"""Names the HTTP layer exports, and helpers shared by tests/integration/test_http_*.py:
starting and stopping the programs under test, waiting for exports, and
summarising what the OTLP sink decoded.

Every metric and attribute name the tests check is a constant here: adjust it
in this one place.
"""
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402

# ---- names -------------------------------------------------------------------
SERVER_DURATION = "http.server.request.duration"          # histogram, s
SERVER_ACTIVE = "http.server.active_requests"             # UpDownCounter, {request}
SERVER_REQ_BODY = "http.server.request.body.size"         # histogram, By
SERVER_RESP_BODY = "http.server.response.body.size"       # histogram, By
CLIENT_DURATION = "http.client.request.duration"          # histogram, s
OLD_SERVER_DURATION = "http.server.duration"              # OTEL_SEMCONV_STABILITY_OPT_IN=http/dup, ms
GYM_ROLLOUT = "gym.rollout.duration_ms"                   # histogram, ms, no attributes
GYM_VERIFY = "gym.verify.duration_ms"                     # histogram, ms, no attributes
GYM_SUCCESS = "gym.verify.success_rate"                   # gauge (double), no attributes
CONNECTS = "gym.http.connection_pool.connect_total"

METHOD = "http.request.method"
STATUS = "http.response.status_code"   # an int attribute
ROUTE = "http.route"
SCHEME = "url.scheme"
VERSION = "network.protocol.version"
ERROR = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"            # an int attribute
DEST = "nemo.gym.http.destination.server.name"
OLD_METHOD = "http.method"
OLD_STATUS = "http.status_code"
OLD_TARGET = "http.target"
OLD_SCHEME = "http.scheme"
OLD_FLAVOR = "http.flavor"
SERVER_NAME = "http.server_name"       # active requests: the Host the server received (Gym's table)
OVERFLOW = "otel.metric.overflow"

DURATION_BOUNDS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]
GYM_BOUNDS = [100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 120000, 300000, 600000, 1200000, 1800000,
              3600000]
CUMULATIVE = 2
# uvloop (libuv: millisecond timers) wakes a sleep up to ~1 ms early: lower bounds
# derived from an app's sleeps allow this much per sleep.
TIMER_SLACK = 0.002
# A duration's ends are the shim's clock readings around a read or write: one
# taken just after a write returns can come after the peer already acted on the
# bytes (or the other process already read them) when the writer's thread is
# scheduled out. Bounds that compare a duration with the peer's own clock allow
# this much per request.
IO_SLACK = 0.005
# Upper bounds allow this much more in all: on a small machine busy with other
# test processes, the writer's thread can stay scheduled out for tens of
# milliseconds between its write and the shim's clock reading, while the
# peer's clock has already stopped.
SCHED_SLACK = 0.25

# Shim settings every test uses: frequent exports, so "idle" state is seen soon.
EXPORT_INTERVAL_MS = 200
# How long a test waits for exports that should come within a few intervals;
# without the HTTP layer nothing ever comes, and the test fails after this.
EXPORT_WAIT_S = 5.0

NODE = "/usr/bin/node"
NGINX = "/usr/sbin/nginx"
CURL = "/usr/bin/curl"
PYTHON = harness.PYTHON


def app_path(name):
    return os.path.join(HERE, name)


def shim_env(sink_url, **extra):
    """harness.shim_env exporting to sink_url every EXPORT_INTERVAL_MS.
    NL_HTTP_APPS_BARE=1 in the environment runs everything without the shim
    (to check the test programs themselves: only metric assertions fail then)."""
    env = harness.shim_env(OTEL_EXPORTER_OTLP_METRICS_ENDPOINT=sink_url,
                           OTEL_METRIC_EXPORT_INTERVAL=EXPORT_INTERVAL_MS, **extra)
    for k in [k for k in env if k.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")]:
        del env[k]    # every request here goes straight to 127.0.0.1
    if os.environ.get("NL_HTTP_APPS_BARE") == "1":
        env.pop("LD_PRELOAD", None)
    return env


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---- programs ----------------------------------------------------------------
class App:
    """A program in the background. Ready when it prints one JSON line on stdout
    (ready="line"; the line is .info), or when a file appears (ready=path).
    Its stderr goes to a file (.stderr(), with the files in logs). stop() ends it by its pid."""

    def __init__(self, args, env, name, ready="line", timeout=30.0, cwd=None, logs=()):
        self.name = name
        self.logs = list(logs)    # more files the program writes its errors to (nginx: error.log)
        self.log = tempfile.NamedTemporaryFile(prefix=f"nl-http-{name}.", suffix=".log", delete=False)
        self.proc = subprocess.Popen(args, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True)
        self.info = None
        self.returncode = None
        try:
            if ready == "line":
                r, _, _ = select.select([self.proc.stdout], [], [], timeout)
                line = self.proc.stdout.readline() if r else ""
                if not line:
                    raise RuntimeError(f"{name} did not start within {timeout}s: {self.stderr()[-2000:]}")
                self.info = json.loads(line)
            else:
                if not harness.poll(lambda: os.path.exists(ready), timeout, alive=self.proc):
                    raise RuntimeError(f"{name} did not start: {self.stderr()[-2000:]}")
        except BaseException:
            self.stop(signal.SIGKILL)
            os.unlink(self.log.name)
            raise

    def stderr(self):
        out = ""
        for path in [self.log.name] + self.logs:
            try:
                with open(path, errors="replace") as f:
                    out += f.read()
            except OSError:
                pass
        return out

    def stop(self, sig=signal.SIGTERM, timeout=15.0):
        """Signals the program (by pid) and waits; SIGKILL if it does not exit in time.
        Returns its exit status. Safe to call twice."""
        if self.returncode is not None:
            return self.returncode
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self.returncode = self.proc.returncode
        self.proc.stdout.close()
        self.log.close()
        return self.returncode

    @contextlib.contextmanager
    def blamed(self):
        """Wraps the load a test puts on the program: when a request fails, the
        error carries the program's stderr (a crash or sanitizer report)."""
        try:
            yield
        except (OSError, ValueError) as e:
            time.sleep(0.2)    # let a dying program finish its report
            rc = self.proc.poll()
            state = "still runs" if rc is None else f"exited with {rc}"
            raise RuntimeError(f"{self.name}: a request failed ({e!r}); the program {state}; "
                               f"its stderr ends with:\n{self.stderr()[-4000:]}") from e

    def cleanup(self):
        self.stop()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass


# ---- what the sink holds -----------------------------------------------------
def exports(sink):
    """[(arrival time.monotonic(), decoded request)] in arrival order (the sink
    answers everything with 200 unless scripted, so the two lists align)."""
    with sink.lock:
        return list(zip(sink.arrivals, sink.requests))


def wait_exports_after(sink, t, n=2, timeout=EXPORT_WAIT_S):
    """Waits until n exports arrived after time.monotonic() t and returns the
    requests that did (fewer on timeout). With one exporting process, the
    second one after t was collected after t: it holds everything done before t."""
    def after():
        return [req for at, req in exports(sink) if at > t]
    harness.poll(lambda: len(after()) >= n, timeout)
    return after()


def points_in(reqs, name):
    """[(resource attrs, metric, point)] of metric `name` in these requests."""
    out = []
    for req in reqs:
        for rm in req.resource_metrics:
            res = {a.key: _any(a.value) for a in rm.resource.attributes}
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == name:
                        for p in getattr(m, m.WhichOneof("data")).data_points:
                            out.append((res, m, p))
    return out


def latest(reqs, name):
    """Cumulative data: the last point per (process instance, attributes)."""
    last = {}
    for res, m, p in points_in(reqs, name):
        last[(res.get("service.instance.id"), tuple(sorted(attrs(p).items())))] = (res, m, p)
    return list(last.values())


def all_requests(sink):
    with sink.lock:
        return list(sink.requests)


def of_service(reqs, service_name):
    """The exports of the processes whose service.name is service_name."""
    out = []
    for req in reqs:
        for rm in req.resource_metrics:
            if any(a.key == "service.name" and _any(a.value) == service_name for a in rm.resource.attributes):
                out.append(req)
                break
    return out


def metric_names(reqs):
    return {m.name for req in reqs for rm in req.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


def http_names(reqs):
    return {n for n in metric_names(reqs) if n.startswith("http.")}


def _any(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def value(p):
    """A NumberDataPoint's value, int or double."""
    return getattr(p, p.WhichOneof("value"))


class Hist:
    """Histogram points added together (across processes or attribute sets)."""

    def __init__(self):
        self.count, self.sum, self.min, self.max, self.points = 0, 0.0, None, None, 0

    def add(self, p):
        self.count += p.count
        self.sum += p.sum
        self.points += 1
        if p.HasField("min"):
            self.min = p.min if self.min is None else min(self.min, p.min)
        if p.HasField("max"):
            self.max = p.max if self.max is None else max(self.max, p.max)

    def __repr__(self):
        return f"Hist(count={self.count}, sum={self.sum:.4f}, min={self.min}, max={self.max})"


def hist_by(reqs, name, *keys):
    """{(attribute values for keys): Hist} over the latest cumulative points;
    a missing attribute is None."""
    out = {}
    for _, _, p in latest(reqs, name):
        a = attrs(p)
        out.setdefault(tuple(a.get(k) for k in keys), Hist()).add(p)
    return out


def counts_by(reqs, name, *keys):
    return {k: h.count for k, h in hist_by(reqs, name, *keys).items()}


def sums_by(reqs, name, *keys):
    return {k: h.sum for k, h in hist_by(reqs, name, *keys).items()}


def values_by(reqs, name, *keys):
    """{(attribute values for keys): sum of the latest values} for a Sum or Gauge."""
    out = {}
    for _, _, p in latest(reqs, name):
        a = attrs(p)
        k = tuple(a.get(k) for k in keys)
        out[k] = out.get(k, 0) + value(p)
    return out


def attribute_values(reqs, name, key):
    """Every value attribute `key` takes in metric `name` (None: a point without it)."""
    return {attrs(p).get(key) for _, _, p in points_in(reqs, name)}


def summary(reqs):
    """A short description of the http.* data, for failure messages."""
    lines = []
    for name in sorted(http_names(reqs)):
        for _, _, p in latest(reqs, name):
            v = f"count={p.count} sum={p.sum:.4f}" if hasattr(p, "bucket_counts") else f"value={value(p)}"
            lines.append(f"  {name} {dict(sorted(attrs(p).items()))} {v}")
    return "\n".join(lines) or "  (no http.* data at all)"


# ---- assertions shared by the server tests -------------------------------------
class ServerChecks:
    """Mixin for unittest.TestCase classes whose setUpClass ran one scenario and
    left cls.reqs (every decoded export), cls.log (a rawhttp.Log), cls.idle
    (exports collected after the load ended, before stopping)."""

    def assertServerCounts(self):
        want = self.log.counts()
        got = counts_by(self.reqs, SERVER_DURATION, ROUTE, METHOD, STATUS)
        self.assertEqual(got, want, "requests per (route, method, status):\n" + summary(self.reqs))
        return want

    def assertInstruments(self):
        pts = points_in(self.reqs, SERVER_DURATION)
        self.assertTrue(pts, "no " + SERVER_DURATION + " at all:\n" + summary(self.reqs))
        for _, m, p in pts:
            self.assertEqual(m.unit, "s")
            self.assertEqual(m.histogram.aggregation_temporality, CUMULATIVE)
            self.assertEqual(list(p.explicit_bounds), DURATION_BOUNDS)
            self.assertEqual(sum(p.bucket_counts), p.count)
        for name in (SERVER_REQ_BODY, SERVER_RESP_BODY):
            pts = points_in(self.reqs, name)
            self.assertTrue(pts, f"no {name} at all")
            for _, m, p in pts:
                self.assertEqual(m.unit, "By", name)
        pts = points_in(self.reqs, SERVER_ACTIVE)
        self.assertTrue(pts, f"no {SERVER_ACTIVE} at all")
        for _, m, p in pts:
            self.assertEqual(m.unit, "{request}")
            self.assertEqual(m.WhichOneof("data"), "sum")
            self.assertFalse(m.sum.is_monotonic)
            self.assertEqual(set(attrs(p)) >= {METHOD, SCHEME}, True, attrs(p))

    def assertCommonAttributes(self, version="1.1"):
        pts = points_in(self.reqs, SERVER_DURATION)
        self.assertTrue(pts, "no " + SERVER_DURATION + " at all:\n" + summary(self.reqs))
        for _, _, p in pts:
            a = attrs(p)
            self.assertEqual(a.get(SCHEME), "http", a)
            self.assertEqual(a.get(VERSION), version, a)
            status = a.get(STATUS)
            if status is None:
                # ended before a complete response: a short type name, not a status code
                self.assertTrue(a.get(ERROR) and not str(a[ERROR]).isdigit(), a)
            elif status >= 500:
                self.assertEqual(a.get(ERROR), str(status), a)
            else:
                self.assertNotIn(ERROR, a)

    def assertIdle(self, methods):
        """active_requests is 0 for every series once the load is over, both in an
        export collected while idle and in the last one; the methods used have series
        (series of methods never used, if exported at all, are 0 too)."""
        for reqs, when in ((self.idle, "while idle"), (self.reqs, "at the end")):
            got = values_by(reqs, SERVER_ACTIVE, METHOD, SCHEME)
            self.assertEqual({k: got.get(k) for k in [(m, "http") for m in methods]},
                             {(m, "http"): 0 for m in methods}, f"{when}: {got}")
            self.assertEqual({k: v for k, v in got.items() if v != 0}, {}, when)

    def assertBodySizes(self, routes=None):
        """Body size sums per (route, method, status) equal the bytes the client
        sent and received (chunk framing excluded); one sample per answered request."""
        want = {k: v for k, v in self.log.body_sums().items() if routes is None or k[0] in routes}
        req = sums_by(self.reqs, SERVER_REQ_BODY, ROUTE, METHOD, STATUS)
        resp = sums_by(self.reqs, SERVER_RESP_BODY, ROUTE, METHOD, STATUS)
        self.assertEqual({k: req.get(k) for k in want}, {k: float(v[0]) for k, v in want.items()},
                         "request body bytes")
        self.assertEqual({k: resp.get(k) for k in want}, {k: float(v[1]) for k, v in want.items()},
                         "response body bytes")
        counts = self.log.counts()
        got = counts_by(self.reqs, SERVER_RESP_BODY, ROUTE, METHOD, STATUS)
        self.assertEqual({k: got.get(k) for k in want}, {k: counts[k] for k in want}, "response body samples")

    def assertNoClientData(self):
        """The shim's own export requests are never reported as the program's HTTP client traffic
        (meaningful once the process reports its server side)."""
        self.assertTrue(points_in(self.reqs, SERVER_DURATION), "no server data either")
        self.assertEqual(points_in(self.reqs, CLIENT_DURATION), [])
