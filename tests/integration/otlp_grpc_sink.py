# SPDX-License-Identifier: Apache-2.0
"""A minimal OTLP/gRPC metrics receiver for tests.

A grpcio server (Debian's python3-grpcio) serving the MetricsService that
Debian's python3-opentelemetry-proto generates from the official proto
files: nothing of the shim's is used to decode what arrives. It keeps the
decoded requests, with the same queries as the OTLP/HTTP sink, and its
answers can be scripted per call to play a faulty collector.
"""
import threading
import time
from concurrent import futures

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc

from otlp_sink import Received


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, payload):
    """A length-delimited protobuf field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def retry_info_status(code, message, delay_s):
    """A serialised google.rpc.Status carrying a google.rpc.RetryInfo whose
    retry_delay is delay_s, written from the protos' field numbers (Status:
    code 1, message 2, details 3; Any: type_url 1, value 2; RetryInfo:
    retry_delay 1; Duration: seconds 1, nanos 2)."""
    seconds, nanos = int(delay_s), int(round((delay_s - int(delay_s)) * 1e9))
    duration = varint(1 << 3) + varint(seconds) + (varint(2 << 3) + varint(nanos) if nanos else b"")
    retry_info = field(1, duration)
    any_ = field(1, b"type.googleapis.com/google.rpc.RetryInfo") + field(2, retry_info)
    return varint(1 << 3) + varint(code.value[0]) + field(2, message.encode()) + field(3, any_)


class GrpcSink(Received):
    """Answers: `script` holds one entry per call, answered first; each a dict
    with any of code (a grpc.StatusCode, default OK), message, details (bytes
    of grpc-status-details-bin), delay (seconds before answering),
    rejected (partial success: rejected data points). Without a script: OK."""

    def __init__(self, tls=None, host="127.0.0.1", port=0):
        self.requests = []        # decoded ExportMetricsServiceRequest that were answered OK
        self.calls = []           # (metadata, code, size of the decoded request, peer) of every call
        self.script = []
        self.arrivals = []
        self.lock = threading.Lock()
        sink = self

        class Servicer(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request, context):
                with sink.lock:
                    sink.arrivals.append(time.monotonic())
                    answer = sink.script.pop(0) if sink.script else {}
                    code = answer.get("code", grpc.StatusCode.OK)
                    sink.calls.append((dict(context.invocation_metadata()), code, request.ByteSize(), context.peer()))
                    if code == grpc.StatusCode.OK:
                        sink.requests.append(request)
                if answer.get("delay"):
                    time.sleep(answer["delay"])
                if code != grpc.StatusCode.OK:
                    if answer.get("details"):
                        context.set_trailing_metadata((("grpc-status-details-bin", answer["details"]),))
                    context.abort(code, answer.get("message", ""))
                response = metrics_service_pb2.ExportMetricsServiceResponse()
                if answer.get("rejected"):
                    response.partial_success.rejected_data_points = answer["rejected"]
                    response.partial_success.error_message = answer.get("message", "")
                return response

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Servicer(), self.server)
        if tls:
            key, cert = tls
            with open(key, "rb") as k, open(cert, "rb") as c:
                creds = grpc.ssl_server_credentials([(k.read(), c.read())])
            self.port = self.server.add_secure_port(f"{host}:{port}", creds)
            self.endpoint = f"https://{host}:{self.port}"
        else:
            self.port = self.server.add_insecure_port(f"{host}:{port}")
            self.endpoint = f"http://{host}:{self.port}"
        self.server.start()

    def close(self):
        self.server.stop(0).wait()

    def reset(self):
        with self.lock:
            self.requests.clear()
            self.calls.clear()
            self.arrivals.clear()
