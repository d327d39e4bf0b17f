# SPDX-License-Identifier: Apache-2.0
"""httpcore, the transport of httpx: connect_total and queue_duration_ms as
NeMo Gym records them, async and sync.

One acquisition is one request that asks the pool for a connection: one
call of the pool's request handler (handle_async_request, handle_request),
whether it reuses a connection, opens one, waits or fails; each redirect
hop of httpx is one more. The adapter replaces the handler by a plain
function that counts the acquisition and hands back the original (its
coroutine, for the async pool).

httpcore's pool assigns a connection to each request it queues (0.16 and
0.17: RequestStatus; 1.0: PoolRequest and AsyncPoolRequest) and the request
then calls wait_for_connection. A request whose connection is still
unassigned at that call waits; only then does the adapter time it. A woken
request often finds its connection taken by another (ConnectionNotAvailable:
httpcore hands one idle connection to every waiter) and waits again: the
acquisition has one sample, from its first wait's start to its last wait's
end, recorded when the handler returns or fails (the wait is noted on the
request object, which the handler gets and the pool's request holds). A wait
that ends by an exception (PoolTimeout, cancellation) is `abandoned`. The
only limit of such a pool is max_connections: the constraint is `total`.
"""
import functools
import operator
import sys
import time

import nemolens_adapter as _a

_on = True
_monotonic = time.monotonic
_MODULES = ("httpcore._async.connection_pool", "httpcore._sync.connection_pool")
_CO_COROUTINE = 0x80
_DEFAULT_PORTS = {b"http": 80, b"https": 443, b"ws": 80, b"wss": 443}
_NOTE = "_nemolens_wait"   # on a request that waited: [first start, last end, outcome]


def _off(where, e):
    global _on
    _on = False
    _a.log("python.httpcore", "Python adapter for httpcore is off (%s): %r" % (where, e))


def _port(url):
    port = url.port
    return _DEFAULT_PORTS.get(url.scheme, -1) if port is None else port


def _queued(status):
    """A wait begins: the note of its request's acquisition."""
    request = status.request
    note = request.__dict__.get(_NOTE)
    if note is None:
        note = [_monotonic(), None, _a.OUTCOME_ABANDONED]
        setattr(request, _NOTE, note)
    return note


def _woken(note, outcome):
    note[1] = _monotonic()
    note[2] = outcome


def _finish(request):
    """The handler is done with a request that waited: its one sample."""
    try:
        t0, t1, outcome = request.__dict__.pop(_NOTE)
        url = request.url
        _a.record(url.host, _port(url), t0, t1 if t1 is not None else _monotonic(), outcome,
                  _a.CONSTRAINT_TOTAL)
    except Exception as e:
        _off("record", e)


def _coroutine(f):
    return bool(f.__code__.co_flags & _CO_COROUTINE)


def _wrap_wait(original):
    if _coroutine(original):
        async def waited(self, args, kwargs):
            note = _queued(self)
            try:
                connection = await original(self, *args, **kwargs)
            except BaseException:
                _woken(note, _a.OUTCOME_ABANDONED)
                raise
            _woken(note, _a.OUTCOME_OK)
            return connection

        def wait_for_connection(self, *args, **kwargs):
            if self.connection is not None or not _on:
                return original(self, *args, **kwargs)   # assigned: no wait
            return waited(self, args, kwargs)
        wait_for_connection = _a.as_coroutine_function(wait_for_connection)
    else:
        def wait_for_connection(self, *args, **kwargs):
            if self.connection is not None or not _on:
                return original(self, *args, **kwargs)
            note = _queued(self)
            try:
                connection = original(self, *args, **kwargs)
            except BaseException:
                _woken(note, _a.OUTCOME_ABANDONED)
                raise
            _woken(note, _a.OUTCOME_OK)
            return connection
    functools.update_wrapper(wait_for_connection, original)
    wait_for_connection._nemolens = True
    return wait_for_connection


_origin = operator.attrgetter("scheme", "host", "port")   # of an httpcore.URL: plain attributes


def _host_port(key):
    scheme, host, port = key
    return host, _DEFAULT_PORTS.get(scheme, -1) if port is None else port


def _counter(acquire):
    """One acquisition of a request: its destination looked up by its URL's
    origin (asked of the shim once per origin), one call of the shim's."""
    dests = _a.Destinations(_host_port)

    def count(request):
        try:
            acquire(dests[_origin(request.url)])
        except Exception as e:
            _off("request", e)
    return count


def _wrap_handle(original, count):
    """The pool's request handler: one acquisition per call, and the
    sample of one that waited once it is over."""
    if _coroutine(original):
        async def handle(self, request, *args, **kwargs):
            if _on:
                count(request)
            try:
                return await original(self, request, *args, **kwargs)
            finally:
                if _NOTE in request.__dict__:
                    _finish(request)
    else:
        def handle(self, request, *args, **kwargs):
            if _on:
                count(request)
            try:
                return original(self, request, *args, **kwargs)
            finally:
                if _NOTE in request.__dict__:
                    _finish(request)
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
    _a.lib()
    count = _counter(_a.acquire_at)
    # Every part first, then the patches: none or all of them.
    wrapped = []
    for cls, attr, f in waits:
        wrapped.append((cls, attr, _wrap_wait(f)))
    for cls, attr, f in pools:
        wrapped.append((cls, attr, _wrap_handle(f, count)))
    for cls, attr, f in wrapped:
        setattr(cls, attr, f)
    return True
