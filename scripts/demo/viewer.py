# SPDX-License-Identifier: Apache-2.0
"""The Grafana dashboard's panels in a browser, without Grafana.

  /usr/bin/python3 scripts/demo/viewer.py --vm http://127.0.0.1:PORT [--port 0]

Serves, on 127.0.0.1, a page (viewer.html) that draws every panel of
dashboards/nemolens.json from VictoriaMetrics's query_range API, with the
dashboard's variables on "All". /panels.json is the panel list as
dashboard.py reads it; /api/v1/query_range is passed through to the backend,
so the page has one origin. Prints one JSON line once listening:
{"url": "http://127.0.0.1:PORT/"}. Stops on SIGTERM/SIGINT.

Debian's victoria-metrics is built without vmui's web assets (its /vmui/
answers 404), so vmui's own custom dashboards cannot be used with it.
"""
import argparse
import http.server
import json
import os
import signal
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dashboard  # noqa: E402

PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "viewer.html")


def make_handler(vm_url, title, panels):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def send(self, code, body, ctype):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            if url.path in ("/", "/index.html"):
                with open(PAGE, "rb") as f:
                    self.send(200, f.read(), "text/html; charset=utf-8")
            elif url.path == "/panels.json":
                self.send(200, json.dumps({"title": title, "panels": panels}).encode(), "application/json")
            elif url.path == "/api/v1/query_range":
                try:
                    with urllib.request.urlopen(f"{vm_url}{url.path}?{url.query}", timeout=30) as r:
                        self.send(r.status, r.read(), "application/json")
                except urllib.error.HTTPError as e:
                    self.send(e.code, e.read(), "application/json")
                except OSError as e:
                    self.send(502, json.dumps({"status": "error", "error": str(e)}).encode(), "application/json")
            else:
                self.send(404, b"not found\n", "text/plain")

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vm", required=True, help="VictoriaMetrics base URL")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    panels = dashboard.panels()
    title = dashboard.load()["title"]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args.vm.rstrip("/"), title, panels))
    server.daemon_threads = True

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(json.dumps({"url": f"http://127.0.0.1:{server.server_address[1]}/"}), flush=True)
    server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()
