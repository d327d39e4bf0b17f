# SPDX-License-Identifier: Apache-2.0
"""A small HTTP/1.x client over plain sockets, for the test process itself (never
under the shim): it sends exactly the bytes a test asks for (keep-alive,
`Connection: close`, pipelining several requests in one send, HTTP/1.0) and
reads responses with their framing (Content-Length, chunked, none for HEAD /
1xx / 204 / 304, close-delimited), so a test knows what went over the wire.

Every exchange is written to a Log: the ground truth the metric checks compare
against (route the test expects, method, status, elapsed time, body sizes).
"""
import collections
import socket
import threading
import time

Exchange = collections.namedtuple("Exchange", "route method status elapsed req_body resp_body")


class Log:
    """The exchanges a test made, with what the test expects as their route."""

    def __init__(self):
        self.entries = []
        self.lock = threading.Lock()

    def add(self, route, method, status, elapsed, req_body=0, resp_body=0):
        with self.lock:
            self.entries.append(Exchange(route, method, status, elapsed, req_body, resp_body))

    def record(self, route, method, resp, req_body=0):
        self.add(route, method, resp.status, resp.elapsed, req_body, len(resp.body))
        return resp

    def counts(self):
        """{(route, method, status): exchanges}; status None: no response (aborted)."""
        return dict(collections.Counter((e.route, e.method, e.status) for e in self.entries))

    def select(self, route=None, method=None, status=...):
        return [e for e in self.entries
                if (route is None or e.route == route) and (method is None or e.method == method)
                and (status is ... or e.status == status)]

    def elapsed_sum(self, **kw):
        return sum(e.elapsed for e in self.select(**kw))

    def body_sums(self):
        """{(route, method, status): (request body bytes, response body bytes)}, answered exchanges only."""
        out = {}
        for e in self.entries:
            if e.status is None:
                continue
            rq, rs = out.get((e.route, e.method, e.status), (0, 0))
            out[(e.route, e.method, e.status)] = (rq + e.req_body, rs + e.resp_body)
        return out


class Response:
    def __init__(self, version, status, reason, headers, body, elapsed):
        self.version, self.status, self.reason = version, status, reason
        self.headers = headers    # {lower-case name: value} (last one wins)
        self.body = body          # body bytes, chunk framing removed
        self.elapsed = elapsed    # s, from the start of sending to the last byte read

    def __repr__(self):
        return f"<Response {self.status} {len(self.body)} B {self.elapsed:.3f}s>"


def build(method, path, port, headers=None, body=b"", version="1.1", host="127.0.0.1"):
    """The bytes of one request. Host is set unless headers name it; a body gets a Content-Length."""
    hdrs = dict(headers or {})
    lines = [f"{method} {path} HTTP/{version}"]
    if not any(k.lower() == "host" for k in hdrs):
        lines.append(f"Host: {host}:{port}")
    for k, v in hdrs.items():
        lines.append(f"{k}: {v}")
    if body and not any(k.lower() in ("content-length", "transfer-encoding") for k in hdrs):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Conn:
    """One client connection. Requests on it are sent and answered in order."""

    def __init__(self, port, host="127.0.0.1", timeout=20.0):
        self.port, self.host = port, host
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.rfile = self.sock.makefile("rb")

    def send(self, data):
        self.sock.sendall(data)

    def request(self, method, path, headers=None, body=b"", version="1.1"):
        t0 = time.monotonic()
        self.send(build(method, path, self.port, headers, body, version, self.host))
        return self.read_response(method, t0)

    def pipeline(self, requests):
        """Sends every (method, path[, headers]) in one sendall(); returns their responses in order."""
        t0 = time.monotonic()
        data = b"".join(build(r[0], r[1], self.port, r[2] if len(r) > 2 else None, host=self.host)
                        for r in requests)
        self.send(data)
        return [self.read_response(r[0], t0) for r in requests]

    def read_response(self, method="GET", t0=None):
        t0 = time.monotonic() if t0 is None else t0
        while True:
            line = self._line()
            if not line:
                raise ConnectionError("connection closed before a response")
            version, status, reason = (line.split(" ", 2) + [""])[:3]
            status = int(status)
            headers = self._headers()
            if 100 <= status < 200 and status != 101:
                continue          # interim response: the final one follows
            break
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = self._chunked()
        elif "content-length" in headers:
            body = self._exactly(int(headers["content-length"]))
        else:
            body = self.rfile.read()   # close-delimited
        return Response(version, status, reason, headers, body, time.monotonic() - t0)

    def _line(self):
        return self.rfile.readline(65536).decode("latin-1").rstrip("\r\n")

    def _headers(self):
        headers = {}
        while True:
            line = self._line()
            if not line:
                return headers
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()

    def _exactly(self, n):
        data = self.rfile.read(n)
        if len(data) != n:
            raise ConnectionError(f"body cut short: {len(data)} of {n} bytes")
        return data

    def _chunked(self):
        out = []
        while True:
            size = int(self._line().split(";")[0], 16)
            if size == 0:
                while self._line():     # trailers
                    pass
                return b"".join(out)
            out.append(self._exactly(size))
            self._line()

    def close(self):
        try:
            self.rfile.close()
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def one_shot(port, method, path, headers=None, body=b"", close_header=True, host="127.0.0.1"):
    """A request on a connection of its own (closed afterwards). close_header:
    send `Connection: close`."""
    hdrs = dict(headers or {})
    if close_header:
        hdrs["Connection"] = "close"
    with Conn(port, host) as c:
        return c.request(method, path, hdrs, body)


def abandon(port, method, path, headers=None, body=b"", wait=0.15, host="127.0.0.1"):
    """Sends a whole request, waits `wait` seconds and closes the connection
    without reading anything: the server can never deliver its response.
    Returns the seconds from the start of sending to the close."""
    t0 = time.monotonic()
    c = Conn(port, host)
    try:
        c.send(build(method, path, port, headers, body, host=host))
        time.sleep(wait)
    finally:
        c.close()
    return time.monotonic() - t0
