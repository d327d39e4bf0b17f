# SPDX-License-Identifier: Apache-2.0
"""Fallback OTLP/HTTP sink for scripts/bench when VictoriaMetrics is missing:
accepts every POST with 200 and an empty body. Prints its port, serves until killed."""
import http.server
import sys


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
s.daemon_threads = True
print(s.server_address[1], flush=True)
s.serve_forever()
