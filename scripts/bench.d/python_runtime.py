#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Section 9 of scripts/bench: what the event loop probe costs an idle
server.

    python_runtime.py SO PAIRS SECONDS

An idle uvicorn server (the plain ASGI application of the runtime tests)
under the shim, with the probe off (NEMOLENS_EVENT_LOOP_LAG=false) and on
(the default), in alternating runs; each run's CPU time (from each
thread's /proc schedstat) over SECONDS once the server answers. Prints the median CPU
of each, in % of one core, and the difference.
"""
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
APPS = os.path.join(HERE, "..", "..", "tests", "integration", "py_adapter")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """The process's CPU time to the nanosecond (schedstat of each thread):
    /proc/PID/stat counts ticks of 10 ms, a twentieth of the figure over
    20 s. Falls back to the ticks where schedstat is missing."""
    total = 0
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / TICK


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one(so, probe, seconds):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "NEMOLENS_", "NEMO_GYM_"))}
    env.update(LD_PRELOAD=so, OTEL_METRICS_EXPORTER="none", PYTHONPATH=APPS)
    if not probe:
        env["NEMOLENS_EVENT_LOOP_LAG"] = "false"
    port = free_port()
    p = subprocess.Popen(["/usr/bin/python3", "-m", "uvicorn", "runtime_app:app", "--port", str(port),
                          "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/ok", timeout=1).read()
                break
            except OSError:
                if time.monotonic() > deadline or p.poll() is not None:
                    raise RuntimeError("uvicorn did not answer")
                time.sleep(0.1)
        time.sleep(0.5)   # the request's own work done
        c0, t0 = cpu_seconds(p.pid), time.monotonic()
        time.sleep(seconds)
        return (cpu_seconds(p.pid) - c0) / (time.monotonic() - t0) * 100.0
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main():
    so, pairs, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    off, on = [], []
    for _ in range(pairs):
        off.append(one(so, False, seconds))
        on.append(one(so, True, seconds))
    a, b = statistics.median(off), statistics.median(on)
    print(f"{a:.3f} {b:.3f} {b - a:.3f}")


if __name__ == "__main__":
    main()
