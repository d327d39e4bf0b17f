# SPDX-License-Identifier: Apache-2.0
"""httpcore, the transport of httpx: one sample per request that waited for
a connection of its pool, async and sync.

httpcore's pool assigns a connection to each request it queues (0.16 and
0.17: RequestStatus; 1.0: PoolRequest and AsyncPoolRequest) and the request
waits in wait_for_connection until it has one. A request whose connection
is still unassigned when it starts to wait is queued. A woken request can
find its connection taken by another (ConnectionNotAvailable) and wait
again: the pool's request handler (handle_async_request, handle_request)
is one acquisition, so its waits make one sample, from the first wait's
start to the last one's end, as NeMo Gym combines repeated wake-ups. A
wait that ends by an exception (PoolTimeout, cancellation) is abandoned.
The only limit of such a pool is max_connections: the constraint is
`total`.
"""
import contextvars
import functools
import sys
import time

import nemolens_adapter as _a

_on = True
_monotonic = time.monotonic
_cur = contextvars.ContextVar("nemolens_httpcore_acquisition", default=None)
_MODULES = ("httpcore._async.connection_pool", "httpcore._sync.connection_pool")
_CO_COROUTINE = 0x80
_DEFAULT_PORTS = {b"http": 80, b"https": 443, b"ws": 80, b"wss": 443}


class _Acquisition(_a.Acquisition):
    __slots__ = ("request",)

    def __init__(self):
        super().__init__()
        self.request = None


def _off(where, e):
    global _on
    _on = False
    _a.log("python.httpcore", "Python adapter for httpcore is off (%s): %r" % (where, e))


def _record(acq):
    try:
        url = acq.request.url
        port = url.port
        if port is None:
            port = _DEFAULT_PORTS.get(url.scheme, -1)
        _a.record(acq, url.host, port, _a.CONSTRAINT_TOTAL, _monotonic())
    except Exception as e:
        _off("record", e)


def _queued(status):
    """The acquisition of the request that starts to wait, or None when it
    does not wait (its connection is assigned) or is not watched."""
    if not _on or getattr(status, "connection", True) is not None:
        return None
    acq = _cur.get()
    if acq is None:
        return None
    if acq.t0 is None:
        acq.request = status.request
    acq.queued(_monotonic())
    return acq


def _woken(acq, connection):
    if acq is not None:
        acq.woken(_monotonic())
    return connection


def _coroutine(f):
    return bool(f.__code__.co_flags & _CO_COROUTINE)


def _wrap_wait(original):
    if _coroutine(original):
        async def wait_for_connection(self, *args, **kwargs):
            acq = _queued(self)
            return _woken(acq, await original(self, *args, **kwargs))
    else:
        def wait_for_connection(self, *args, **kwargs):
            acq = _queued(self)
            return _woken(acq, original(self, *args, **kwargs))
    functools.update_wrapper(wait_for_connection, original)
    wait_for_connection._nemolens = True
    return wait_for_connection


def _enter():
    acq = _Acquisition()
    return acq, _cur.set(acq)


def _leave(acq, token):
    _cur.reset(token)
    if acq.t0 is not None:
        _record(acq)


def _wrap_handle(original):
    """The pool's request handler: one acquisition, however often it waits."""
    if _coroutine(original):
        async def handle(self, request, *args, **kwargs):
            if not _on:
                return await original(self, request, *args, **kwargs)
            acq, token = _enter()
            try:
                return await original(self, request, *args, **kwargs)
            finally:
                _leave(acq, token)
    else:
        def handle(self, request, *args, **kwargs):
            if not _on:
                return original(self, request, *args, **kwargs)
            acq, token = _enter()
            try:
                return original(self, request, *args, **kwargs)
            finally:
                _leave(acq, token)
    functools.update_wrapper(handle, original)
    handle._nemolens = True
    return handle


def patch():
    import httpcore

    # The pools are httpcore's public classes; the requests they queue are
    # classes of the same modules (httpcore renames the public classes'
    # __module__, so classes are told by their methods, once each).
    waits, pools, seen = [], [], set()
    for cls, attr in ((getattr(httpcore, "AsyncConnectionPool", None), "handle_async_request"),
                      (getattr(httpcore, "ConnectionPool", None), "handle_request")):
        f = cls.__dict__.get(attr) if isinstance(cls, type) else None
        if f is not None and hasattr(f, "__code__"):
            pools.append((cls, attr, f))
    for name in _MODULES:
        module = sys.modules.get(name)
        for cls in list(vars(module).values()) if module is not None else ():
            f = cls.__dict__.get("wait_for_connection") if isinstance(cls, type) else None
            if f is not None and hasattr(f, "__code__") and cls not in seen:
                seen.add(cls)
                waits.append((cls, "wait_for_connection", f))
    version = getattr(httpcore, "__version__", "?")
    if not waits or not pools:
        raise RuntimeError("httpcore %s: no pool requests that wait" % version)
    for cls, attr, f in waits + pools:
        if getattr(f, "_nemolens", False):
            return True   # armed already (the package was reloaded)
    # Every part first, then the patches: none or all of them.
    wrapped = []
    for cls, attr, f in waits:
        wrapped.append((cls, attr, _wrap_wait(f)))
    for cls, attr, f in pools:
        wrapped.append((cls, attr, _wrap_handle(f)))
    for cls, attr, f in wrapped:
        setattr(cls, attr, f)
    return True
