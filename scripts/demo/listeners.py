# SPDX-License-Identifier: Apache-2.0
"""Loopback destinations that fail in known ways, shared by the demo and the
integration tests: a port that refuses, and a listener that never answers."""
import socket
import time


def refused_port():
    """A loopback port with no listener (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class FullListener:
    """A listener whose accept queue is full: further SYNs go unanswered."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.fillers = []
        while True:
            c = socket.socket()
            c.setblocking(False)
            try:
                c.connect(("127.0.0.1", self.port))
            except BlockingIOError:
                pass
            time.sleep(0.05)
            # connected when the peer is known
            try:
                c.getpeername()
                self.fillers.append(c)
            except OSError:
                c.close()
                break
            if len(self.fillers) > 64:
                raise RuntimeError("listener never filled up")

    def close(self):
        for c in self.fillers:
            c.close()
        self.sock.close()
