# SPDX-License-Identifier: Apache-2.0
"""Protocols over TCP that are not HTTP, for the HTTP layer's negative test.

    /usr/bin/python3 not_http.py server
        listens on two 127.0.0.1 ports, prints {"echo": p1, "redis": p2}:
        echo   raw binary echo (whatever arrives is sent back)
        redis  a Redis-like server: RESP arrays (*N $len ...) and inline
               commands ("GET foo\\r\\n", "SET foo bar\\r\\n", "PING\\r\\n"), which
               begin like an HTTP request line but are not HTTP/1.x
        SIGTERM/SIGINT: exit status 0 (a normal exit, so the shim's exit export runs).

    /usr/bin/python3 not_http.py client ECHO_PORT REDIS_PORT HTTP_URL
        2 echo connections (binary payloads, one beginning with "GET"),
        1 redis connection (inline and RESP commands), then one HTTP GET of
        HTTP_URL (the control: the only HTTP this process does). Prints JSON
        {"connections": {"echo": 2, "redis": 1, "web": 1}, "replies": [...], "http_status": 200}.
"""
import json
import signal
import socket
import sys
import threading
import urllib.request


def listener():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s


def serve(sock, handler):
    while True:
        try:
            c, _ = sock.accept()
        except OSError:
            return
        threading.Thread(target=handler, args=(c,), daemon=True).start()


def echo(c):
    with c:
        while True:
            data = c.recv(65536)
            if not data:
                return
            c.sendall(data)


def redis(c):
    store = {}
    f = c.makefile("rb")
    with c, f:
        while True:
            line = f.readline()
            if not line:
                return
            if line.startswith(b"*"):          # RESP array of bulk strings
                args = []
                for _ in range(int(line[1:])):
                    n = int(f.readline()[1:])
                    args.append(f.read(n + 2)[:n])
            else:                              # inline command
                args = line.split()
            cmd = args[0].upper() if args else b""
            if cmd == b"PING":
                out = b"+PONG\r\n"
            elif cmd == b"SET" and len(args) == 3:
                store[args[1]] = args[2]
                out = b"+OK\r\n"
            elif cmd == b"GET" and len(args) == 2:
                v = store.get(args[1])
                out = b"$-1\r\n" if v is None else b"$%d\r\n%s\r\n" % (len(v), v)
            else:
                out = b"-ERR unknown command\r\n"
            c.sendall(out)


def server():
    e, r = listener(), listener()
    for s, h in ((e, echo), (r, redis)):
        threading.Thread(target=serve, args=(s, h), daemon=True).start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    signal.signal(signal.SIGINT, lambda *a: done.set())
    print(json.dumps({"echo": e.getsockname()[1], "redis": r.getsockname()[1]}), flush=True)
    while not done.wait(0.2):
        pass
    e.close()
    r.close()
    sys.exit(0)


def recv_exactly(c, n):
    out = b""
    while len(out) < n:
        d = c.recv(n - len(out))
        if not d:
            raise ConnectionError("closed early")
        out += d
    return out


def client(echo_port, redis_port, url):
    replies = []
    for payload in (bytes(range(256)) * 4, b"GET\x00\x01\x02 not a request line\xff\xfe" * 10):
        with socket.create_connection(("127.0.0.1", echo_port)) as c:
            c.sendall(payload)
            replies.append(recv_exactly(c, len(payload)) == payload)
    with socket.create_connection(("127.0.0.1", redis_port)) as c:
        f = c.makefile("rb")
        for cmd in (b"GET foo\r\n", b"SET foo bar\r\n", b"GET foo\r\n", b"PING\r\n",
                    b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n", b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n"):
            c.sendall(cmd)
            line = f.readline()
            if line.startswith(b"$") and line != b"$-1\r\n":
                line += f.readline()
            replies.append(line.decode())
        f.close()
    with urllib.request.urlopen(url, timeout=10) as r:
        status = r.status
        r.read()
    print(json.dumps({"connections": {"echo": 2, "redis": 1, "web": 1}, "replies": replies, "http_status": status}))


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server()
    else:
        client(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
