#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Section 10 of scripts/bench: a scrape of nemolens-run's Prometheus
endpoint for a tree of 100 processes.

    scrape.py NEMOLENS_RUN STEADY_CLIENT MODE

nemolens-run --prometheus starts a shell that starts 100 steady_client
processes (each connects to a local listener every 50 ms, so each has a
segment with series); once the exposition shows all 100, the scrape is
timed ROUNDS times, one after the other, the way Prometheus asks (the
OpenMetrics Accept header), and one TSV row is printed: the median and
the slowest wall time from the request to the last byte, against the
target of 100 ms.
"""
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

PROCESSES = 100
ACCEPT = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"


def listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1024)

    def loop():
        while True:
            try:
                c, _ = s.accept()
                c.close()
            except OSError:
                return
    threading.Thread(target=loop, daemon=True).start()
    return s


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Accept": ACCEPT})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read()
    return time.monotonic() - t0, body.decode()


def main():
    launcher, client, mode = sys.argv[1:4]
    rounds = 5 if mode == "smoke" else 50
    lst = listener()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "NEMOLENS_", "NEMO_GYM_"))}
    duration = 60000
    script = (f"for i in $(seq {PROCESSES}); do {client} {lst.getsockname()[1]} 50 {duration} >/dev/null & done; "
              "wait")
    # A session of its own: the launcher, its shell and the clients are one
    # process group, ended together at the end.
    p = subprocess.Popen([launcher, f"--prometheus=127.0.0.1:{port}", "sh", "-c", script], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        n = 0
        while time.monotonic() < deadline:
            try:
                _, text = scrape(port)
                n = text.count("\ntarget_info{")
                if n >= PROCESSES:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        if n < PROCESSES:
            raise SystemExit(f"scrape.py: the exposition showed {n} processes, not {PROCESSES}")
        times, size = [], 0
        for _ in range(rounds):
            t, text = scrape(port)
            times.append(t * 1000)
            size = len(text)
        med, worst = statistics.median(times), max(times)
        status = "pass" if med < 100 else "miss"
        print(f"10\tscrape of /metrics, a tree of {PROCESSES} live processes ({size // 1024} KiB of OpenMetrics; "
              f"median of {rounds}, slowest {worst:.1f} ms)\t-\t{med:.1f} ms\t{med / PROCESSES * 1000:.0f} us per "
              f"process\t< 100 ms\t{status}")
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(10)
        lst.close()


if __name__ == "__main__":
    main()
