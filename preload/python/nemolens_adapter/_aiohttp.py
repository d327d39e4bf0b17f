# SPDX-License-Identifier: Apache-2.0
"""aiohttp: one sample per connection acquisition that waited for a slot of
its connector's pool, as NeMo Gym records it.

aiohttp's own trace signals say when a wait begins and ends
(on_connection_queued_start / _end): a TraceConfig of the adapter's is
added to every ClientSession, after the program's own, which still run. One
acquisition is one call of BaseConnector.connect: the adapter wraps it, so
that repeated wake-ups of one acquisition (aiohttp 3.10+ waits again when a
woken waiter finds no slot) make one sample, from the first start to the
last end, and a wait that ends by an exception (timeout, cancellation, a
closed connector), when no queued_end comes, is recorded as abandoned.

Which limit made it wait is read from the connector when the wait begins:
`total` when its connections reach `limit`, `per_host` when this host's
reach `limit_per_host`; when neither is reached (a slot was just freed for
a waiter that has not run yet), the limit with the least room left.
"""
import contextvars
import functools
import time

import nemolens_adapter as _a

_on = True
_cur = contextvars.ContextVar("nemolens_aiohttp_acquisition", default=None)
_monotonic = time.monotonic


class _Acquisition(_a.Acquisition):
    __slots__ = ("connector", "req", "constraint")

    def __init__(self, connector, req):
        super().__init__()
        self.connector = connector
        self.req = req
        self.constraint = _a.CONSTRAINT_UNKNOWN


def _off(where, e):
    global _on
    _on = False
    _a.log("python.aiohttp", "Python adapter for aiohttp is off (%s): %r" % (where, e))


def _constraint(connector, key):
    limit = getattr(connector, "_limit", 0) or 0
    per_host = getattr(connector, "_limit_per_host", 0) or 0
    room_total = room_host = None
    if limit:
        room_total = limit - len(connector._acquired)
    if per_host:
        acquired = connector._acquired_per_host.get(key)
        room_host = per_host - (len(acquired) if acquired else 0)
    if room_total is not None and room_total <= 0:
        return _a.CONSTRAINT_TOTAL
    if room_host is not None and room_host <= 0:
        return _a.CONSTRAINT_PER_HOST
    if room_total is None and room_host is None:
        return _a.CONSTRAINT_UNKNOWN
    if room_host is None or (room_total is not None and room_total < room_host):
        return _a.CONSTRAINT_TOTAL
    return _a.CONSTRAINT_PER_HOST


async def _queued_start(session, ctx, params):
    if not _on:
        return
    try:
        acq = _cur.get()
        if acq is None:
            return
        if acq.t0 is None:
            acq.constraint = _constraint(acq.connector, acq.req.connection_key)
        acq.queued(_monotonic())
    except Exception as e:
        _off("queued start", e)


async def _queued_end(session, ctx, params):
    if not _on:
        return
    try:
        acq = _cur.get()
        if acq is not None and acq.waiting:
            acq.woken(_monotonic())
    except Exception as e:
        _off("queued end", e)


def _record(acq):
    try:
        req = acq.req
        _a.record(acq, req.host, req.port if req.port is not None else -1, acq.constraint, _monotonic())
    except Exception as e:
        _off("record", e)


def _wrap_connect(original):
    @functools.wraps(original)
    async def connect(self, req, *args, **kwargs):
        if not _on:
            return await original(self, req, *args, **kwargs)
        acq = _Acquisition(self, req)
        token = _cur.set(acq)
        try:
            return await original(self, req, *args, **kwargs)
        finally:
            _cur.reset(token)
            if acq.t0 is not None:
                _record(acq)

    connect._nemolens = True
    return connect


def _wrap_init(original, trace_config):
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        if _on:
            try:
                mine = kwargs.get("trace_configs")
                kwargs["trace_configs"] = list(mine or ()) + [trace_config]
            except Exception as e:
                _off("session", e)
        return original(self, *args, **kwargs)

    __init__._nemolens = True
    return __init__


def patch():
    import aiohttp
    from aiohttp import client, connector, tracing

    session, base = client.ClientSession, connector.BaseConnector
    if getattr(base.connect, "_nemolens", False):
        return True   # armed already (the package was reloaded)
    # What the patches read; a version without them is left alone.
    for cls, attr in ((session, "__init__"), (base, "connect"), (base, "_available_connections")):
        if not callable(getattr(cls, attr, None)):
            raise RuntimeError("aiohttp %s has no %s.%s" % (aiohttp.__version__, cls.__name__, attr))
    tc = tracing.TraceConfig()
    tc.on_connection_queued_start.append(_queued_start)
    tc.on_connection_queued_end.append(_queued_end)
    tc.freeze()
    base.connect = _wrap_connect(base.connect)
    session.__init__ = _wrap_init(session.__init__, tc)
    return True
