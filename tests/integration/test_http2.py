# SPDX-License-Identifier: Apache-2.0
"""HTTP/2 from the bytes with real programs (h2c, prior knowledge).

- h2load (nghttp2) against nghttpd under the shim, ten clients with ten
  streams each at once: the server counts exactly the requests h2load says
  it made, per status; h2load's HPACK use exercises the dynamic table.
- httpx with http2=True against hypercorn, both under the shim: counts per
  (method, status) exact on both sides, as HTTP/2.
- nghttp -u against hypercorn, both under the shim: HTTP/1.1 with
  `Upgrade: h2c`, `101 Switching Protocols`, then HTTP/2 on the same
  connection: the upgrading request counts once as HTTP/1.1 (with the 101),
  the requests after it as HTTP/2 (exact on the server side)."""
import collections
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from otlp_sink import attrs  # noqa: E402
from http_apps import httpcheck as hc  # noqa: E402

APPS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "http_apps")
CLIENT = """
import httpx, sys
port = int(sys.argv[1])
with httpx.Client(http1=False, http2=True) as c:
    for i in range(40):
        assert c.get(f"http://127.0.0.1:{port}/items/{i}").status_code == 200
    for i in range(7):
        assert c.get(f"http://127.0.0.1:{port}/missing/{i}").status_code == 404
    for i in range(5):
        assert c.post(f"http://127.0.0.1:{port}/post", content=b"x" * 100).status_code == 200
"""


def wait_port(port, server):
    """Waits until SERVER (a subprocess.Popen) accepts connections on PORT;
    ends it and fails when it does not."""
    def accepts():
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            return True
        except OSError:
            return False
    try:
        harness.wait_for(accepts, 30, f"a listener on port {port}", alive=server)
    except AssertionError:
        server.kill()
        _, err = server.communicate(timeout=15)
        raise AssertionError(f"port {port} never accepted: {err[-2000:]}")


def counts(sink, name, service):
    out = collections.Counter()
    for res, _, p in sink.latest_by_instance(name):
        if res.get("service.name") == service:
            a = attrs(p)
            out[(a.get(hc.VERSION), a.get(hc.METHOD), a.get(hc.STATUS))] += p.count
    return dict(out)



def start_hypercorn(sink):
    """hypercorn serving h2_asgi's app under the shim (HTTP/1.1 and h2c on one
    port), in a runtime directory of its own: (process, port)."""
    harness.new_runtime_dir()
    port = hc.free_port()
    server = subprocess.Popen([harness.PYTHON, "-m", "hypercorn", "--bind", f"127.0.0.1:{port}", "h2_asgi:app"],
                              env=hc.shim_env(sink.url, OTEL_SERVICE_NAME="hypercorn"), cwd=APPS,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_port(port, server)
    return server, port

class H2loadNghttpd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        harness.new_runtime_dir()
        cls.dir = tempfile.mkdtemp(prefix="nl-h2-")
        with open(os.path.join(cls.dir, "index.html"), "w") as f:
            f.write("hello\n" * 100)
        port = hc.free_port()
        env = hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="nghttpd")
        cls.server = subprocess.Popen(["nghttpd", "--no-tls", "-d", cls.dir, str(port)], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_port(port, cls.server)
        urls = [f"http://127.0.0.1:{port}/index.html", f"http://127.0.0.1:{port}/missing"]
        cls.load = harness.run(["h2load", "-n", "2000", "-c", "10", "-m", "10"] + urls, harness.plain_env(), timeout=50)
        hc.wait_exports_after(cls.sink, time.monotonic())    # nghttpd ends on SIGTERM without an exit flush
        cls.server.terminate()
        cls.server.wait(15)

    def test_server_counts(self):
        out = self.load.stdout
        m = re.search(r"status codes: (\d+) 2xx, \d+ 3xx, (\d+) 4xx", out)
        self.assertIsNotNone(m, out)
        self.assertIn("2000 done", out)
        want = {("2", "GET", 200): int(m.group(1)), ("2", "GET", 404): int(m.group(2))}
        self.assertEqual(sum(want.values()), 2000)
        self.assertEqual(counts(self.sink, hc.SERVER_DURATION, "nghttpd"), want)


class HttpxHypercorn(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        cls.server, port = start_hypercorn(cls.sink)
        cls.client = harness.run([harness.PYTHON, "-c", CLIENT, str(port)],
                                 hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="httpx"), timeout=50)
        cls.server.terminate()
        cls.server.wait(15)

    def test_client_ran(self):
        self.assertEqual(self.client.returncode, 0, self.client.stderr[-2000:])

    def test_counts_both_sides(self):
        want = {("2", "GET", 200): 40, ("2", "GET", 404): 7, ("2", "POST", 200): 5}
        self.assertEqual(counts(self.sink, hc.SERVER_DURATION, "hypercorn"), want)
        self.assertEqual(counts(self.sink, hc.CLIENT_DURATION, "httpx"), want)


class UpgradeH2c(unittest.TestCase):
    """One nghttp connection to hypercorn (nghttpd answers HTTP/2 only): the
    first URI asks for the upgrade, the others follow as HTTP/2 streams on
    the connection the 101 switched."""
    OK, MISSING = 6, 3

    @classmethod
    def setUpClass(cls):
        cls.sink = harness.start_sink(cls)
        cls.server, port = start_hypercorn(cls.sink)
        base = f"http://127.0.0.1:{port}"
        # nghttp fetches each URI once and reuses one connection per origin.
        urls = [f"{base}/items/up"] + [f"{base}/items/{i}" for i in range(cls.OK)] + \
            [f"{base}/missing/{i}" for i in range(cls.MISSING)]
        cls.client = harness.run(["nghttp", "-u", "-v"] + urls,
                                 hc.shim_env(cls.sink.url, OTEL_SERVICE_NAME="nghttp"), timeout=30)
        cls.server.terminate()
        cls.server.wait(15)

    def test_client_upgraded(self):
        self.assertEqual(self.client.returncode, 0, self.client.stderr[-2000:])
        self.assertIn("HTTP Upgrade success", self.client.stdout)
        self.assertEqual(self.client.stdout.count("recv HEADERS frame"), 1 + self.OK + self.MISSING)

    def want(self):
        # The response to the upgrading request comes on stream 1 but is not
        # counted again: that request was counted with its 101.
        return {("1.1", "GET", 101): 1, ("2", "GET", 200): self.OK, ("2", "GET", 404): self.MISSING}

    def test_server_counts(self):
        self.assertEqual(counts(self.sink, hc.SERVER_DURATION, "hypercorn"), self.want())

    def test_client_counts(self):
        # The client may read the 101 and the server's first frames at once,
        # which the shim does not split (docs/http2.md): then only the
        # upgrading request is counted; never a wrong count.
        upgrading = {("1.1", "GET", 101): 1}
        self.assertIn(counts(self.sink, hc.CLIENT_DURATION, "nghttp"), [self.want(), upgrading])


if __name__ == "__main__":
    unittest.main()
