# SPDX-License-Identifier: Apache-2.0
"""An HTTP/1.1 server on 127.0.0.1 (keep-alive) that holds every request for
the number of milliseconds in its path (/hold/<ms>) before answering, so a
client's pool stays busy for a time the test chooses. /to/<path> answers
with a redirect to /<path>."""
import http.server
import threading
import time


class HoldingServer:
    def __init__(self):
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                with server.lock:
                    server.requests += 1
                parts = self.path.partition("?")[0].split("/")
                ms = int(parts[2]) if len(parts) > 2 and parts[1] == "hold" else 0
                time.sleep(ms / 1000.0)
                body = b"ok\n"
                try:
                    if len(parts) > 2 and parts[1] == "to":
                        self.send_response(302)
                        self.send_header("Location", "/" + "/".join(parts[2:]))
                    else:
                        self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass   # the client gave up (timeouts, cancellation)

        self.lock = threading.Lock()
        self.requests = 0
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.request_queue_size = 128
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
