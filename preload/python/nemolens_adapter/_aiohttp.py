"""aiohttp: one sample per connection acquisition that waited for a slot of
its connector's pool, as NeMo Gym records it.

aiohttp's trace signals say when a wait begins and ends: the connector
sends connection_queued_start / _end to every trace of the request. One
acquisition is one call of BaseConnector.connect: the adapter wraps it
and, when the connector is full or has waiters (so the call may wait),
adds a trace of its own for that call only, after the session's (the
program's own trace configs run as before). Sessions themselves are left
as they are: tracing every request of every session would cost each
request more than its wait is worth. The adapter's trace answers the two
queue events and ignores every other (any send_* method is a no-op).
Repeated wake-ups of one acquisition (aiohttp 3.10+ waits again when a
woken waiter finds no slot) make one sample, from the first start to the
last end; a wait that ends by an exception (timeout, cancellation, a closed
connector), when no queued_end comes, is abandoned.

Which limit made it wait is read from the connector when the wait begins:
`total` when its connections reach `limit`, `per_host` when this host's
reach `limit_per_host`; when neither is reached (a slot was just freed for
a waiter that has not run yet), the limit with the least room left.
"""
import functools
import time

import nemolens_adapter as _a

_on = True
_monotonic = time.monotonic


class _Acquisition:
    __slots__ = ("connector", "req", "t0", "t1", "waiting", "constraint")

    def __init__(self, connector, req):
        self.connector = connector
        self.req = req
        self.t0 = None
        self.t1 = None
        self.waiting = False
        self.constraint = _a.CONSTRAINT_UNKNOWN


def _off(where, e):
    global _on
    _on = False
    _a.log("python.aiohttp", "Python adapter for aiohttp is off (%s): %r" % (where, e))


def _constraint(connector, req):
    limit, per_host = connector._limit, connector._limit_per_host
    room_total = limit - len(connector._acquired) if limit else None
    if room_total is not None and (room_total <= 0 or not per_host):
        return _a.CONSTRAINT_TOTAL   # full, or the only limit
    if not per_host:
        return _a.CONSTRAINT_UNKNOWN
    acquired = connector._acquired_per_host.get(req.connection_key)
    room_host = per_host - (len(acquired) if acquired else 0)
    if room_host > 0 and room_total is not None and room_total < room_host:
        return _a.CONSTRAINT_TOTAL
    return _a.CONSTRAINT_PER_HOST


def _may_wait(connector):
    """Whether connect may wait: the pool is full, or others wait already
    (aiohttp queues behind them). Conservative: per-host fullness is left
    to the trace, any waiter counts."""
    if connector._waiters:
        return True
    limit = connector._limit
    if limit and len(connector._acquired) >= limit:
        return True
    return bool(connector._limit_per_host and connector._acquired_per_host)


async def _ignore(*args, **kwargs):
    pass


class _Trace:
    """What BaseConnector.connect needs of a trace, for one acquisition."""
    __slots__ = ("acq",)

    def __init__(self, acq):
        self.acq = acq

    def send_connection_queued_start(self, *args, **kwargs):
        if _on:
            try:
                acq = self.acq
                if acq.t0 is None:
                    acq.t0 = _monotonic()
                    acq.constraint = _constraint(acq.connector, acq.req)
                acq.waiting = True
            except Exception as e:
                _off("queued start", e)
        return _ignore()

    def send_connection_queued_end(self, *args, **kwargs):
        if _on:
            acq = self.acq
            if acq.waiting:
                acq.t1 = _monotonic()
                acq.waiting = False
        return _ignore()

    def __getattr__(self, name):
        if name.startswith("send_"):
            return _ignore
        raise AttributeError(name)


def _record(acq):
    try:
        if acq.waiting:
            outcome, end = _a.OUTCOME_ABANDONED, _monotonic()
        else:
            outcome, end = _a.OUTCOME_OK, acq.t1
        req = acq.req
        _a.lib().nemolens_pool_wait(_a.host_bytes(req.host), req.port if req.port is not None else -1,
                                    (end - acq.t0) * 1000.0, outcome, acq.constraint)
    except Exception as e:
        _off("record", e)


def _wrap_connect(original):
    @functools.wraps(original)
    async def connect(self, req, traces, *args, **kwargs):
        if not _on:
            return await original(self, req, traces, *args, **kwargs)
        try:
            if not _may_wait(self):
                return await original(self, req, traces, *args, **kwargs)
            acq = _Acquisition(self, req)
            mine = [*traces, _Trace(acq)] if traces else [_Trace(acq)]
        except Exception as e:
            _off("connect", e)
            return await original(self, req, traces, *args, **kwargs)
        try:
            return await original(self, req, mine, *args, **kwargs)
        finally:
            if acq.t0 is not None:
                _record(acq)

    connect._nemolens = True
    return connect


def patch():
    import aiohttp
    from aiohttp import connector

    base = connector.BaseConnector
    if getattr(base.connect, "_nemolens", False):
        return True   # armed already (the package was reloaded)
    # What the patches use; a version without them is left alone.
    for attr in ("connect", "_available_connections"):
        if not callable(getattr(base, attr, None)):
            raise RuntimeError("aiohttp %s has no BaseConnector.%s" % (aiohttp.__version__, attr))
    base.connect = _wrap_connect(base.connect)
    return True
