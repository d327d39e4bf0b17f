# SPDX-License-Identifier: Apache-2.0
"""Shared helpers for the integration tests: paths, listeners, running under the shim."""
import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SO = os.environ.get("NL_SO") or os.path.join(os.path.dirname(__file__), "../../build/libnemolens_preload.so")
BIN = os.environ.get("NL_BIN") or os.path.join(os.path.dirname(__file__), "../../build/tests")
SRC = os.environ.get("NL_SRC") or os.path.join(os.path.dirname(__file__), "../..")
PYTHON = "/usr/bin/python3"

sys.path.insert(0, os.path.join(SRC, "scripts", "demo"))
from listeners import FullListener, refused_port  # noqa: E402,F401


def poll(predicate, timeout, interval=0.05, alive=None):
    """Calls PREDICATE every INTERVAL seconds until it returns something true
    or TIMEOUT seconds have passed, and returns what it returned last (its
    true value, or its false one at the deadline: it is always called once
    more then). With ALIVE, a subprocess.Popen, the wait also ends as soon
    as that process has exited, since what it was to bring about will not
    come. For a wait whose end is not a failure; wait_for fails."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= end:
            return value
        if alive is not None and alive.poll() is not None:
            return predicate()
        time.sleep(interval)


def wait_for(predicate, timeout, what, interval=0.05, alive=None):
    """poll, failing the test (AssertionError) when PREDICATE never held.
    WHAT says what was awaited: a string, or a function returning one,
    called at the failure so that it can show the state at that moment.
    Returns the predicate's true value."""
    value = poll(predicate, timeout, interval, alive)
    if not value:
        if alive is not None and alive.poll() is not None:
            why = f"process {alive.pid} exited with {alive.returncode}"
        else:
            why = f"not within {timeout} s"
        raise AssertionError(f"waited for {what() if callable(what) else what}: {why}")
    return value


def wait_for_file(path, timeout=20.0, alive=None):
    """Waits until PATH exists (a program's sign that it is ready)."""
    wait_for(lambda: os.path.exists(path), timeout, f"{path} to appear", interval=0.01, alive=alive)


class AcceptingListener:
    """A TCP listener on 127.0.0.1 that accepts and closes every connection."""

    def __init__(self, backlog=128):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            c.close()

    def settle(self, expected, timeout=10.0):
        """The accept count once this thread has caught up with the kernel's
        queue: connects finish before their accept, so a count read right
        after a program ends may be short. Waits until EXPECTED is reached
        (or TIMEOUT), then a little longer for any surplus."""
        poll(lambda: self.accepted >= expected, timeout, interval=0.01)
        time.sleep(0.05)
        return self.accepted

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


# Where the shim keeps the segments of the processes it runs
# (XDG_RUNTIME_DIR/nemolens): one private directory per test (ShimTestCase
# makes a fresh one), so that what one test's processes leave behind is
# never delivered to another test's collector, and nothing is left in the
# user's own directory.
_runtime = {"dir": None}


def runtime_dir():
    if _runtime["dir"] is None:
        new_runtime_dir()
    return _runtime["dir"]


def new_runtime_dir():
    d = tempfile.mkdtemp(prefix="nl-test-run-", dir="/dev/shm")
    atexit.register(shutil.rmtree, d, True)
    _runtime["dir"] = d
    return d


def shim_env(**extra):
    env = dict(os.environ)
    env["XDG_RUNTIME_DIR"] = runtime_dir()
    env["LD_PRELOAD"] = os.path.abspath(SO)
    runtime = os.environ.get("NL_SANITIZER_RUNTIME")
    if runtime:
        # A sanitizer build of the shim: its runtime must come first. Reports make
        # the program's stderr non-empty, which the tests treat as failure.
        env["LD_PRELOAD"] = runtime + ":" + env["LD_PRELOAD"]
        env["ASAN_OPTIONS"] = "detect_leaks=0:verify_asan_link_order=0:exitcode=66"
        env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1:exitcode=66"
        env["TSAN_OPTIONS"] = ("exitcode=66:report_signal_unsafe=0:die_after_fork=0:suppressions="
                               + os.path.join(os.path.dirname(os.path.abspath(__file__)), "tsan.supp"))
    for k in [k for k in env if k.startswith(("OTEL_", "NEMOLENS_", "NEMO_GYM_"))]:
        del env[k]
    # Set, the exit flush may take all of it: a loaded machine (or a
    # sanitizer build) can be slower to answer than the quick wait of an
    # exit whose values could stay for later (docs/export.md). The tests
    # of that quick wait remove it.
    env["NEMOLENS_EXIT_TIMEOUT_MS"] = "500"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def without_shim(env):
    """A copy of ENV with nothing in LD_PRELOAD."""
    env = dict(env)
    env.pop("LD_PRELOAD", None)
    return env


def plain_env(**extra):
    """shim_env(**extra) without the shim: the environment of the same
    program run plainly, to compare with its run under the shim (both see
    the same variables, runtime directory included). A sanitizer build's
    runtime is not preloaded either: the program is not instrumented."""
    return without_shim(shim_env(**extra))


def for_launcher(env):
    """A copy of ENV (made by shim_env) for a program that loads the shim
    itself: nemolens-run, which preloads it into its program, or a program
    linked with it. The shim leaves LD_PRELOAD; the runtime of a sanitizer
    build stays, since it must come first in every process that loads an
    instrumented shim."""
    env = without_shim(env)
    runtime = os.environ.get("NL_SANITIZER_RUNTIME")
    if runtime:
        env["LD_PRELOAD"] = runtime
    return env


def launcher_env(**extra):
    """shim_env(**extra) for nemolens-run (see for_launcher)."""
    return for_launcher(shim_env(**extra))


def start_sink(owner):
    """A new OTLP sink (otlp_sink.Sink) on a free loopback port, closed once
    OWNER is done with it: OWNER is a test (self), or its class when called
    from setUpClass. The close comes after tearDown or tearDownClass, so the
    exit flushes of programs those end still find it, and it comes even when
    the set-up fails half-way."""
    from otlp_sink import Sink
    sink = Sink()
    if isinstance(owner, type):
        owner.addClassCleanup(sink.close)
    else:
        owner.addCleanup(sink.close)
    return sink


def run(args, env, timeout=60, **kw):
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, **kw)


class ShimTestCase(unittest.TestCase):
    """Tests that run programs under the shim against an OTLP sink, with a
    loopback listener for the programs to connect to. The sink is emptied
    (and its scripted answers dropped) before each test."""

    @classmethod
    def setUpClass(cls):
        cls.listener = AcceptingListener()
        cls.sink = start_sink(cls)

    @classmethod
    def tearDownClass(cls):
        cls.listener.close()

    def setUp(self):
        self.sink.reset()
        self.sink.script.clear()
        new_runtime_dir()
