# SPDX-License-Identifier: Apache-2.0
"""TLS pieces for tests/integration/test_https.py.

In the test process (never under the shim):
    make_cert(dir)             a self-signed certificate for localhost and 127.0.0.1 (openssl req)
    TlsServers(latencies, cert, key)
                               plain_server.PlainServers over TLS (http.server, a thread per
                               connection, keep-alive, the same answers and counts)
    TlsConn(port, cafile)      rawhttp.Conn over TLS: exact bytes, framing, a Log of exchanges
    tls_sink(cert, key)        an otlp_sink.Sink answering over HTTPS

As programs, run under the shim (each prints one JSON line; servers serve until SIGTERM):
    tlsapps.py https-server CERT KEY               TlsServers([0]); {"port": N}
    tlsapps.py aiohttp-server CERT KEY             aiohttp.web over TLS (asyncio: memory BIOs); {"port": N}
    tlsapps.py aiohttp-client CAFILE < plan.json   one aiohttp.ClientSession, 4 requests at a time
    tlsapps.py others-server CERT KEY              {"h2": N, "echo": N, "web": N}: see others_server
    tlsapps.py others-client CAFILE H2 ECHO WEB    the other side of others-server
    tlsapps.py two-threads CAFILE PORT N           N requests on one TLS connection, written by one
                                                   thread and read by another
"""
import argparse
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from http_apps import plain_server, rawhttp  # noqa: E402

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"          # empty SETTINGS frame
H2_SETTINGS_ACK = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"
ECHO_LINES = [b"hello over tls\n", b"GET foo\r\n", b"\x16\x03\x01binary\x00\xff\n", b"PING\r\n"]


def make_cert(d):
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-days", "2",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    return cert, key


def server_context(cert, key, alpn=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    if alpn:
        ctx.set_alpn_protocols(alpn)
    return ctx


def client_context(cafile, alpn=None, tls12=False):
    ctx = ssl.create_default_context(cafile=cafile)
    if alpn:
        ctx.set_alpn_protocols(alpn)
    if tls12:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    return ctx


# ---- servers -----------------------------------------------------------------------
class _TlsServer(plain_server._Server):
    def __init__(self, addr, handler, ctx):
        self.ctx = ctx
        super().__init__(addr, handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        # the handshake happens in the connection's thread, inside its first read
        return self.ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request, client_address):
        pass    # a client that went away (or refused the certificate)


class TlsServers(plain_server.PlainServers):
    """PlainServers over TLS: same answers (/missing -> 404, /error -> 503, POST echoes),
    same counts()."""

    def __init__(self, latencies, cert, key, host="127.0.0.1"):
        import collections
        self._counts = collections.Counter()
        self._lock = threading.Lock()
        self.servers = []
        ctx = server_context(cert, key, ["http/1.1"])
        for lat in latencies:
            s = _TlsServer((host, 0), plain_server._handler(lat, self._record), ctx)
            threading.Thread(target=s.serve_forever, daemon=True).start()
            self.servers.append(s)
        self.ports = [s.server_address[1] for s in self.servers]


class TlsConn(rawhttp.Conn):
    """rawhttp.Conn over TLS (SNI and certificate name: server_hostname)."""

    def __init__(self, port, cafile, host="127.0.0.1", server_hostname="localhost", timeout=20.0):
        self.port, self.host = port, host
        raw = socket.create_connection((host, port), timeout=timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = client_context(cafile).wrap_socket(raw, server_hostname=server_hostname)
        self.rfile = self.sock.makefile("rb")


def tls_sink(cert, key):
    """An otlp_sink.Sink whose listener speaks TLS: the shim exports to it over HTTPS."""
    from otlp_sink import Sink
    sink = Sink()
    sink.server.shutdown()
    ctx = server_context(cert, key)
    srv = sink.server

    def get_request():
        sock, addr = srv.socket.accept()
        return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr
    srv.get_request = get_request
    srv.handle_error = lambda *a: None
    sink.thread = threading.Thread(target=srv.serve_forever, daemon=True)
    sink.thread.start()
    sink.url = f"https://127.0.0.1:{sink.port}/v1/metrics"
    return sink


def _serve_until_signalled(ready, close=None):
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    signal.signal(signal.SIGINT, lambda *a: done.set())
    print(json.dumps(ready), flush=True)
    while not done.wait(0.2):
        pass
    if close:
        close()


def https_server(cert, key):
    srv = TlsServers([0], cert, key)
    _serve_until_signalled({"port": srv.ports[0]}, srv.close)


# ---- aiohttp ---------------------------------------------------------------------------
def aiohttp_server(cert, key):
    from aiohttp import web

    async def hello(request):
        return web.Response(text="hello over tls\n")

    async def echo(request):
        return web.Response(status=201, body=await request.read())

    async def fail(request):
        raise RuntimeError("failing on purpose")

    app = web.Application()
    app.add_routes([web.get("/hello", hello), web.post("/echo", echo), web.get("/fail", fail)])
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    web.run_app(app, sock=sock, ssl_context=server_context(cert, key, ["http/1.1"]), print=None,
                access_log=None, shutdown_timeout=2)


def aiohttp_client(cafile, plan, concurrency=4):
    """plan: [{"method", "url", "body"?}]; prints per request its status."""
    import asyncio
    import aiohttp

    async def go():
        sem = asyncio.Semaphore(concurrency)
        conn = aiohttp.TCPConnector(ssl=client_context(cafile), limit=concurrency)
        async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=30)) as s:
            async def one(r):
                async with sem:
                    t0 = time.monotonic()
                    async with s.request(r["method"], r["url"], data=(r.get("body") or "").encode() or None) as resp:
                        await resp.read()
                    return {"status": resp.status, "elapsed": time.monotonic() - t0}
            return await asyncio.gather(*(one(r) for r in plan))
    out = asyncio.run(go())
    for r, x in zip(plan, out):
        x.update(method=r["method"], url=r["url"])
    print(json.dumps(out), flush=True)


# ---- TLS that does not carry HTTP/1.x --------------------------------------------------
def _h2_side(conn):
    """Server side of an HTTP/2 start over TLS (ALPN h2): the client's preface and
    SETTINGS in, the server's SETTINGS and the ACK out, then the client's ACK."""
    data = b""
    while len(data) < len(H2_PREFACE) + len(H2_SETTINGS):
        chunk = conn.recv(4096)
        if not chunk:
            return
        data += chunk
    conn.sendall(H2_SETTINGS + H2_SETTINGS_ACK)
    conn.recv(4096)      # the client's SETTINGS ACK
    conn.recv(4096)      # its end


def _echo_side(conn):
    while True:
        chunk = conn.recv(4096)
        if not chunk:
            return
        conn.sendall(chunk)


def others_server(cert, key):
    """Three TLS listeners: "h2" (ALPN h2 negotiated, HTTP/2 connection preface and
    SETTINGS exchanged), "echo" (bytes echoed back), "web" (HTTPS, the control)."""
    web = TlsServers([0], cert, key)
    ports = {"web": web.ports[0]}
    for name, alpn, side in (("h2", ["h2"], _h2_side), ("echo", None, _echo_side)):
        ctx = server_context(cert, key, alpn)
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(16)
        ports[name] = ls.getsockname()[1]

        def loop(ls=ls, ctx=ctx, side=side):
            while True:
                try:
                    raw, _ = ls.accept()
                except OSError:
                    return
                try:
                    with ctx.wrap_socket(raw, server_side=True) as conn:
                        side(conn)
                except (OSError, ssl.SSLError):
                    pass
        threading.Thread(target=loop, daemon=True).start()
    _serve_until_signalled(ports, web.close)


def others_client(cafile, h2, echo, web):
    out = {}
    with socket.create_connection(("127.0.0.1", h2)) as raw:
        with client_context(cafile, ["h2"]).wrap_socket(raw, server_hostname="localhost") as s:
            out["alpn"] = s.selected_alpn_protocol()
            s.sendall(H2_PREFACE + H2_SETTINGS)
            got = b""
            while len(got) < len(H2_SETTINGS + H2_SETTINGS_ACK):
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
            out["h2_frames"] = got == H2_SETTINGS + H2_SETTINGS_ACK
            s.sendall(H2_SETTINGS_ACK)
    echoed = []
    for _ in range(2):
        with socket.create_connection(("127.0.0.1", echo)) as raw:
            with client_context(cafile).wrap_socket(raw, server_hostname="localhost") as s:
                for line in ECHO_LINES:
                    s.sendall(line)
                    got = b""
                    while len(got) < len(line):
                        got += s.recv(4096)
                    echoed.append(got == line)
    out["echo"] = echoed
    with TlsConn(web, cafile) as c:
        out["web_status"] = c.request("GET", "/control").status
    print(json.dumps(out), flush=True)


# ---- one connection, two threads -------------------------------------------------------
def two_threads(cafile, port, n):
    """Request i is GET /ok/i, or /missing/i for every third. The writer thread sends
    them with at most 3 unanswered (the parser follows 4); the reader thread reads the
    responses, each as soon as it comes, concurrently with the writer's sends."""
    raw = socket.create_connection(("127.0.0.1", port))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # TLS 1.2: no post-handshake messages for SSL_read to process while SSL_write runs
    s = client_context(cafile, tls12=True).wrap_socket(raw, server_hostname="localhost")
    window = threading.Semaphore(3)
    statuses = []
    paths = [f"/missing/{i}" if i % 3 == 2 else f"/ok/{i}" for i in range(n)]

    def writer():
        for p in paths:
            window.acquire()
            s.sendall(rawhttp.build("GET", p, port, host="localhost"))

    class Reader(rawhttp.Conn):
        def __init__(self):
            self.rfile = s.makefile("rb")
    reader = Reader()

    def read_all():
        for _ in paths:
            statuses.append(reader.read_response("GET").status)
            window.release()
    t = [threading.Thread(target=writer), threading.Thread(target=read_all)]
    for x in t:
        x.start()
    for x in t:
        x.join()
    reader.rfile.close()
    s.close()
    print(json.dumps({"paths": paths, "statuses": statuses}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode")
    ap.add_argument("args", nargs="*")
    a = ap.parse_args()
    if a.mode == "https-server":
        https_server(*a.args)
    elif a.mode == "aiohttp-server":
        aiohttp_server(*a.args)
    elif a.mode == "aiohttp-client":
        aiohttp_client(a.args[0], json.load(sys.stdin))
    elif a.mode == "others-server":
        others_server(*a.args)
    elif a.mode == "others-client":
        others_client(a.args[0], *map(int, a.args[1:]))
    elif a.mode == "two-threads":
        two_threads(a.args[0], int(a.args[1]), int(a.args[2]))
    else:
        sys.exit(f"unknown mode {a.mode}")


if __name__ == "__main__":
    main()
