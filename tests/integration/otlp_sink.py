# SPDX-License-Identifier: Apache-2.0
"""A minimal OTLP/HTTP metrics receiver for tests.

It decodes every request with the official Python bindings of the OTLP protos
(Debian's python3-opentelemetry-proto), independently of the shim's encoder,
and keeps the decoded requests. Its answers can be scripted per request to
play a faulty collector.
"""
import gzip
import http.server
import threading
import time

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2


class Received:
    """What a receiver keeps, and the queries on it: `requests` (decoded
    ExportMetricsServiceRequest, in arrival order) under `lock`."""

    def points(self, name):
        """Every data point of metric `name`, with its resource and metric, in arrival order."""
        out = []
        with self.lock:
            for req in self.requests:
                for rm in req.resource_metrics:
                    res = {a.key: any_value(a.value) for a in rm.resource.attributes}
                    for sm in rm.scope_metrics:
                        for m in sm.metrics:
                            if m.name != name:
                                continue
                            kind = m.WhichOneof("data")
                            for p in getattr(m, kind).data_points:
                                out.append((res, m, p))
        return out

    def latest_by_instance(self, name):
        """For cumulative metrics: the last point per (instance, attributes)."""
        latest = {}
        for res, m, p in self.points(name):
            key = (res.get("service.instance.id"), tuple(sorted(attrs(p).items())))
            latest[key] = (res, m, p)
        return list(latest.values())


class Sink(Received):
    def __init__(self):
        self.requests = []        # decoded ExportMetricsServiceRequest, in arrival order
        self.raw = []             # (headers, body) as received
        self.script = []          # list of (status, headers dict, body bytes[, delay s]) answered first
        self.arrivals = []        # time.monotonic() of every request
        self.lock = threading.Lock()
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                headers = dict(self.headers.items())
                data = body
                if headers.get("Content-Encoding") == "gzip":
                    data = gzip.decompress(body)
                req = metrics_service_pb2.ExportMetricsServiceRequest()
                req.ParseFromString(data)
                with sink.lock:
                    sink.arrivals.append(time.monotonic())
                    sink.raw.append((headers, body))
                    answer = sink.script.pop(0) if sink.script else (200, {}, b"")
                    if answer[0] == 200:
                        sink.requests.append(req)
                status, extra, out = answer[:3]
                if len(answer) > 3:
                    time.sleep(answer[3])
                self.send_response(status)
                for k, v in extra.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1/metrics"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def reset(self):
        with self.lock:
            self.requests.clear()
            self.raw.clear()
            self.arrivals.clear()

def any_value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def attrs(point):
    return {a.key: any_value(a.value) for a in point.attributes}
