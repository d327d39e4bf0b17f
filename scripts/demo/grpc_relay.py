# SPDX-License-Identifier: Apache-2.0
"""An OTLP/gRPC receiver that hands every request on over OTLP/HTTP.

VictoriaMetrics takes OTLP over HTTP only; this stands where a collector
would, so that the demo can export over gRPC and still read its tables from
VictoriaMetrics. It serves the MetricsService generated from the official
OTLP protos (Debian's python3-grpcio and python3-opentelemetry-proto) on a
free loopback port, prints {"endpoint": ...} on stdout once it listens, and
posts each request's bytes unchanged; the gRPC call ends with the HTTP
answer's outcome (UNAVAILABLE when VictoriaMetrics cannot be reached).

  /usr/bin/python3 grpc_relay.py --to http://127.0.0.1:PORT/opentelemetry/v1/metrics
"""
import argparse
import json
import signal
import sys
import urllib.error
import urllib.request
from concurrent import futures

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc


class Relay(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, to):
        self.to = to
        self.calls = 0

    def Export(self, request, context):
        req = urllib.request.Request(self.to, data=request.SerializeToString(), method="POST",
                                     headers={"Content-Type": "application/x-protobuf"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                r.read()
        except urllib.error.HTTPError as e:
            code = grpc.StatusCode.UNAVAILABLE if e.code in (429, 502, 503, 504) else grpc.StatusCode.INVALID_ARGUMENT
            context.abort(code, f"the backend answered HTTP {e.code}")
        except OSError as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"the backend cannot be reached: {e}")
        self.calls += 1
        return metrics_service_pb2.ExportMetricsServiceResponse()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--to", required=True, help="the OTLP/HTTP metrics URL to post to")
    args = ap.parse_args()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Relay(args.to), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(json.dumps({"endpoint": f"http://127.0.0.1:{port}"}), flush=True)
    signal.signal(signal.SIGTERM, lambda *_: server.stop(1))
    server.wait_for_termination()
    return 0


if __name__ == "__main__":
    sys.exit(main())
