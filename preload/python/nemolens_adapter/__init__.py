# SPDX-License-Identifier: Apache-2.0
"""The nemolens Python adapter: the connection pools of aiohttp and httpx, as
NeMo Gym defines gym.http.connection_pool.connect_total (one per pool
acquisition) and gym.http.connection_pool.queue_duration_ms (one sample per
acquisition that waited for a slot).

The socket calls the shim sees cannot show a pool: a request that reuses a
keep-alive connection makes no connect(), and one that waits for a slot
makes no system call while it waits. This adapter watches the pools from
inside and hands each acquisition and each wait to the shim through its C
entry points (nemolens_pool_acquire, nemolens_pool_wait), into the
instruments the socket layer records elsewhere. A request that gets a slot
at once costs one call of the shim's; only the path a request takes when no
slot is free is timed.

It imports nothing of the program's, and is not even loaded until the
program needs it: the start-up hook next to it (sitecustomize.py) puts a
finder on sys.meta_path that loads this package when the program itself
imports aiohttp, httpcore (httpx's transport), socket (for the call sites
of connections, _callsite.py), or asyncio and uvloop (event loops and the
collector, _runtime.py), and calls find_spec below,
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
            destination = so.nemolens_pool_destination
            wait = so.nemolens_pool_wait
            active = so.nemolens_pool_adapter_active
            enabled = so.nemolens_enabled
            log_line = so.nemolens_adapter_log
            # Called on every request: without releasing Python's lock (it
            # never waits for the program, adapter.h) and without argument
            # types (an int goes as a C int): a third of the call's cost.
            acquire = ctypes.PyDLL(None).nemolens_pool_acquire
        except AttributeError:
            _lib = False
            return None
        destination.argtypes = (ctypes.c_char_p, ctypes.c_int)
        destination.restype = ctypes.c_int
        acquire.restype = None
        wait.argtypes = (ctypes.c_char_p, ctypes.c_int, ctypes.c_double, ctypes.c_int, ctypes.c_int)
        wait.restype = ctypes.c_int
        active.argtypes = ()
        active.restype = None
        enabled.argtypes = ()
        enabled.restype = ctypes.c_bool
        log_line.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
        log_line.restype = None
        global acquire_at
        acquire_at = acquire
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


def record(host, port, t0, end, outcome, constraint):
    """Hands one acquisition that waited, from t0 to end (time.monotonic),
    to the shim."""
    lib().nemolens_pool_wait(host_bytes(host), port, (end - t0) * 1000.0, outcome, constraint)


_hosts = {}   # host (str or bytes) -> its bytes for the shim


def host_bytes(host):
    """A request's host as the entry points take it: IPv6 literals in
    brackets, as the destination rules write them. Cached: a client asks
    for few hosts, and each request of theirs pays a lookup only."""
    b = _hosts.get(host)
    if b is None:
        b = host.decode("ascii", "replace") if isinstance(host, bytes) else host
        if ":" in b and not b.startswith("["):
            b = "[" + b + "]"
        b = b.encode("ascii", "replace")
        if len(_hosts) >= 256:
            _hosts.clear()
        _hosts[host] = b
    return b


acquire_at = None   # nemolens_pool_acquire, once lib() has found it


class Destinations(dict):
    """The shim's destination index of each origin a client's requests go
    to, keyed by what a request carries already (a tuple of its URL's
    fields), so that a request pays one lookup and no parsing: the
    destination rules are fixed at load. A key seen for the first time is
    turned into a host and port by origin(key) and asked of the shim once.
    Bounded: a client that talks to more origins than that starts over."""
    __slots__ = ("origin",)

    def __init__(self, origin):
        dict.__init__(self)
        self.origin = origin

    def __missing__(self, key):
        host, port = self.origin(key)
        d = lib().nemolens_pool_destination(host_bytes(host), -1 if port is None else port)
        if d >= 0:
            if len(self) >= 256:
                self.clear()
            self[key] = d
        return d


def as_coroutine_function(f):
    """Marks f, a plain function that returns a coroutine, as a coroutine
    function for asyncio and inspect, as the method it replaces was."""
    import inspect

    mark = getattr(inspect, "markcoroutinefunction", None)
    if mark is not None:
        return mark(f)
    try:
        import asyncio.coroutines

        f._is_coroutine = asyncio.coroutines._is_coroutine
    except AttributeError:
        pass
    return f


# The module that patches each target, where it is not "_" and the name.
_PATCHERS = {"socket": "_callsite"}
# Targets whose patcher asks the shim itself, when first needed.
_LAZY = frozenset(("socket",))
# The targets of the runtime's figures (_runtime.py): the event loops and,
# from the first of them on, the collector; NeMo Gym's own observer, which
# records the same names, makes the adapter stand aside.
_RUNTIME = frozenset(("asyncio", "uvloop", "nemo_gym.telemetry.observer"))

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
            _arm(spec.loader, name, _PATCHERS.get(name, "_" + name))
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
        if name in _RUNTIME:
            from nemolens_adapter import _runtime

            _runtime.patch(name)
            return
        if name in _LAZY:
            __import__(__name__ + "." + patcher, fromlist=["patch"]).patch()
            return
        so = lib()
        if so is None:
            return
        mod = __import__(__name__ + "." + patcher, fromlist=["patch"])
        if mod.patch():
            so.nemolens_pool_adapter_active()
    except Exception as e:
        log("python." + name, "Python adapter for %s is off: %r" % (name, e))
