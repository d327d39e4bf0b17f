# SPDX-License-Identifier: Apache-2.0
"""N requests for /file.txt to a server on 127.0.0.1, sent as wrk sends them
(a request line and a Host field), one at a time, for scripts/bench.d/cpu.sh:

    requests.py PORT N ka       N requests on one keep-alive connection
    requests.py PORT N close    N connections, one request each (Connection: close)

Exits non-zero when an answer is cut short."""
import socket
import sys


def exchange(s, req, buf):
    """Sends req, reads one response with its Content-Length body; returns the bytes after it."""
    s.sendall(req)
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            length = 0
            for line in buf[:end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(buf) >= end + 4 + length:
                return buf[end + 4 + length:]
        data = s.recv(65536)
        if not data:
            sys.exit("requests.py: connection closed before the response ended")
        buf += data


def main():
    port, n, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    req = f"GET /file.txt HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    req += b"Connection: close\r\n\r\n" if mode == "close" else b"\r\n"
    if mode == "ka":
        with socket.create_connection(("127.0.0.1", port)) as s:
            buf = b""
            for _ in range(n):
                buf = exchange(s, req, buf)
    else:
        for _ in range(n):
            with socket.create_connection(("127.0.0.1", port)) as s:
                exchange(s, req, b"")


if __name__ == "__main__":
    main()
