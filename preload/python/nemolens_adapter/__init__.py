# SPDX-License-Identifier: Apache-2.0
"""The nemolens Python adapter: pool waits of aiohttp and httpx, as NeMo Gym
defines gym.http.connection_pool.queue_duration_ms.

The socket calls the shim sees cannot show a request that waits inside the
client for a slot of its connection pool: it makes no system call while it
waits. This adapter watches the pools from inside and hands each wait to
the shim through one C entry point (nemolens_pool_wait), into the same
instrument the socket layer records.

It imports nothing of the program's, and is not even loaded until the
program needs it: the start-up hook next to it (sitecustomize.py) puts a
finder on sys.meta_path that loads this package when the program itself
imports aiohttp or httpcore (httpx's transport), and calls find_spec below,
which patches the package once it has been executed. Its rule is never to harm the program: any failure turns
that library's adapter off, with one line in the shim's log, and no
exception ever reaches the program.
"""
import sys

OUTCOME_OK, OUTCOME_ABANDONED = 0, 1
CONSTRAINT_UNKNOWN, CONSTRAINT_TOTAL, CONSTRAINT_PER_HOST = 0, 1, 2

_lib = None


def lib():
    """The shim's entry points, through ctypes (imported only now: a program
    that never imports a pooled client never pays for it). None when the
    shim is not recording in this process."""
    global _lib
    if _lib is None:
        import ctypes

        so = ctypes.CDLL(None)
        try:
            wait = so.nemolens_pool_wait
            active = so.nemolens_pool_adapter_active
            enabled = so.nemolens_enabled
            log_line = so.nemolens_adapter_log
        except AttributeError:
            _lib = False
            return None
        wait.argtypes = (ctypes.c_char_p, ctypes.c_int, ctypes.c_double, ctypes.c_int, ctypes.c_int)
        wait.restype = ctypes.c_int
        active.argtypes = ()
        active.restype = None
        enabled.argtypes = ()
        enabled.restype = ctypes.c_bool
        log_line.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
        log_line.restype = None
        _lib = so if enabled() else False
    return _lib or None


def log(key, message):
    """One line in the shim's log (once per key and process)."""
    try:
        so = lib()
        if so is not None:
            so.nemolens_adapter_log(key.encode("ascii", "replace"), message.encode("utf-8", "replace"))
    except Exception:
        pass


class Acquisition:
    """One acquisition of a pooled connection, as a library adapter follows
    it: the first wait's start (t0), the last wait's end (t1), and whether
    it is waiting now. An acquisition that ends while waiting was
    abandoned."""
    __slots__ = ("t0", "t1", "waiting")

    def __init__(self):
        self.t0 = None
        self.t1 = None
        self.waiting = False

    def queued(self, now):
        if self.t0 is None:
            self.t0 = now
        self.waiting = True

    def woken(self, now):
        self.t1 = now
        self.waiting = False


def record(acq, host, port, constraint, now):
    """Hands one finished acquisition that waited to the shim."""
    if acq.waiting:
        outcome, end = OUTCOME_ABANDONED, now
    else:
        outcome, end = OUTCOME_OK, acq.t1
    lib().nemolens_pool_wait(host_bytes(host), port, (end - acq.t0) * 1000.0, outcome, constraint)


def host_bytes(host):
    """A request's host as nemolens_pool_wait takes it: IPv6 literals in
    brackets, as the destination rules write them."""
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if ":" in host and not host.startswith("["):
        host = "[" + host + "]"
    return host.encode("ascii", "replace")


_busy = set()   # the targets being looked for now (by the finders after the hook)


def find_spec(hook, name, path=None, target=None):
    """Called by the start-up hook's finder on sys.meta_path (hook) when the
    program imports a target package: asks the finders after it for the
    package and wraps the exec_module of the loader instance they return,
    so the adapter is armed once the package has been executed the usual
    way. Finds nothing itself."""
    if name in _busy:
        return None
    _busy.add(name)
    try:
        spec = None
        for finder in sys.meta_path:
            if finder is hook:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        if spec is not None and spec.loader is not None:
            _arm(spec.loader, name, "_" + name)
        return spec
    except Exception as e:
        log("python.finder", "Python adapter: cannot watch the import of %s: %r" % (name, e))
        return None
    finally:
        _busy.discard(name)


def _arm(loader, name, patcher):
    original = getattr(loader, "exec_module", None)
    if original is None:
        return

    def exec_module(module):
        try:
            original(module)
        finally:
            try:
                del loader.exec_module   # this loader is the package's alone
            except Exception:
                pass
        _patch(name, patcher)

    loader.exec_module = exec_module


def _patch(name, patcher):
    try:
        so = lib()
        if so is None:
            return
        mod = __import__(__name__ + "." + patcher, fromlist=["patch"])
        if mod.patch():
            so.nemolens_pool_adapter_active()
    except Exception as e:
        log("python." + name, "Python adapter for %s is off: %r" % (name, e))
