# SPDX-License-Identifier: Apache-2.0
"""A plain HTTP/1.1 server (http.server, a thread per connection, keep-alive) on
one or more 127.0.0.1 ports, each port with a fixed latency.

Every request on a port waits that port's latency, then:
  /missing...  -> 404        /error... -> 503
  POST         -> 200 echoing the request body
  other        -> 200 "ok <path>\\n" (HEAD: the same headers, no body)
It counts what it answered per (port, method, path without query, status).

In the test process (not under the shim):
    srv = PlainServers([0.1, 0.3]); srv.ports; srv.counts(); srv.close()
As a program (under the shim, for server-side tests):
    /usr/bin/python3 plain_server.py [--latency 0,0.1]
prints {"ports": [...]} once listening; SIGTERM/SIGINT end it with exit status 0.
"""
import argparse
import collections
import http.server
import json
import signal
import socket
import sys
import threading
import time


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def _handler(latency, record):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def setup(self):
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def answer(self, with_body=True):
            length = int(self.headers.get("Content-Length") or 0)
            received = self.rfile.read(length) if length else b""
            if latency:
                time.sleep(latency)
            path = self.path.split("?", 1)[0]
            if path.startswith("/missing"):
                status, body = 404, b"not found\n"
            elif path.startswith("/error"):
                status, body = 503, b"unavailable\n"
            elif self.command == "POST":
                status, body = 200, received
            else:
                status, body = 200, f"ok {path}\n".encode()
            # counted before answering: once the client has its answer, the count is there
            record(self.server.server_address[1], self.command, path, status)
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def do_GET(self):
            self.answer()

        def do_POST(self):
            self.answer()

        def do_PUT(self):
            self.answer()

        def do_HEAD(self):
            self.answer(with_body=False)

    return Handler


class PlainServers:
    def __init__(self, latencies, host="127.0.0.1"):
        self._counts = collections.Counter()
        self._lock = threading.Lock()
        self.servers = []
        for lat in latencies:
            s = _Server((host, 0), _handler(lat, self._record))
            threading.Thread(target=s.serve_forever, daemon=True).start()
            self.servers.append(s)
        self.ports = [s.server_address[1] for s in self.servers]

    def _record(self, port, method, path, status):
        with self._lock:
            self._counts[(port, method, path, status)] += 1

    def counts(self):
        """{(port, method, path, status): answered}"""
        with self._lock:
            return dict(self._counts)

    def close(self):
        for s in self.servers:
            s.shutdown()
            s.server_close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", default="0", help="comma-separated seconds, one port each")
    args = ap.parse_args()
    srv = PlainServers([float(x) for x in args.latency.split(",")])
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    signal.signal(signal.SIGINT, lambda *a: done.set())
    print(json.dumps({"ports": srv.ports}), flush=True)
    while not done.wait(0.2):
        pass
    srv.close()
    sys.exit(0)


if __name__ == "__main__":
    main()
