# SPDX-License-Identifier: Apache-2.0
"""aiohttp: connect_total and queue_duration_ms as NeMo Gym records them.

One acquisition is one call of BaseConnector.connect, whether it reuses a
keep-alive connection, opens one, waits, times out or is retried: each
redirect hop, reconnect and retry of the program is one more. The adapter
replaces connect by a plain function that counts the acquisition and hands
back the original coroutine, so a request pays one lookup of its origin,
one call of the shim's and no coroutine of the adapter's.

Waits are timed only on the path a request takes when no slot is free:
  - aiohttp 3.10 and later wait in _wait_for_available_connection; the
    adapter wraps it. One call is one acquisition however often a woken
    waiter finds no slot and waits again (one sample, from its start to its
    end); an exception out of it (timeout, cancellation, a closed
    connector) is an abandoned wait.
  - aiohttp 3.8 and 3.9 wait inside connect on a future they append to the
    connector's queue of waiters for the host (_waiters[key]). The adapter
    gives each connector a queue whose append notes the wait's start and
    how it ends: a future that gets its result is a slot had, one that is
    cancelled or fails is abandoned.

Which limit made it wait is decided when the wait begins, from the
connector: `total` when its connections reach `limit`, `per_host` when this
host's reach `limit_per_host`; when neither is reached (a slot was just
freed for a waiter that has not run yet), the limit with the least room
left. The program's own trace configurations are left as they are.
"""
import collections
import functools
import inspect
import operator
import time
import urllib.parse

import nemolens_adapter as _a

_on = True
_monotonic = time.monotonic
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


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


def _record(key, t0, outcome, constraint):
    try:
        _a.record(key.host, key.port if key.port is not None else -1, t0, _monotonic(), outcome, constraint)
    except Exception as e:
        _off("record", e)


class _Origins(dict):
    """The adapter's destinations of one client, by a request URL's scheme,
    then by its netloc (two lookups of strings the URL holds already: a
    tuple of the two would cost a request twice as much)."""
    __slots__ = ()

    def __missing__(self, scheme):
        default = _DEFAULT_PORTS.get(scheme)

        def origin(netloc):
            u = urllib.parse.urlsplit("//" + netloc)   # parsed as yarl parses it
            return u.hostname, default if u.port is None else u.port

        self[scheme] = d = _a.Destinations(origin)
        return d


def _url_fields():
    """How the scheme and netloc of a request's yarl URL are read: as they
    are stored (yarl 1.13 and later keep them in slots of their own, older
    ones in a split result), by one C call each and parsed by nobody; by
    its public properties on a yarl the adapter does not know."""
    from yarl import URL

    slots = getattr(URL, "__slots__", ())
    if "_scheme" in slots and "_netloc" in slots:
        return operator.attrgetter("_scheme"), operator.attrgetter("_netloc")
    if "_val" in slots:
        return operator.attrgetter("_val.scheme"), operator.attrgetter("_val.netloc")
    return operator.attrgetter("scheme"), operator.attrgetter("raw_authority")


_CONNECT = ["self", "req", "traces", "timeout"]


def _wrap_connect(original, acquire):
    """connect(self, req, traces, timeout), aiohttp's signature from 3.8 on,
    written out: a wrapper taking *args would cost a request more than all
    it does."""
    params = inspect.signature(original).parameters.values()
    if [p.name for p in params] != _CONNECT or any(
            p.kind is not p.POSITIONAL_OR_KEYWORD or p.default is not p.empty for p in params):
        raise RuntimeError("BaseConnector.connect%s" % inspect.signature(original))
    scheme_of, netloc_of = _url_fields()
    dests = _Origins()

    def connect(self, req, traces, timeout):
        if _on:
            try:
                url = req.url
                acquire(dests[scheme_of(url)][netloc_of(url)])
            except Exception as e:
                _off("connect", e)
        return original(self, req, traces, timeout)

    functools.update_wrapper(connect, original)
    connect._nemolens = True
    return _a.as_coroutine_function(connect)


# aiohttp 3.10 and later.

def _wrap_wait(original):
    @functools.wraps(original)
    async def _wait_for_available_connection(self, key, *args, **kwargs):
        if not _on:
            return await original(self, key, *args, **kwargs)
        try:
            key = getattr(key, "connection_key", key)   # some versions pass the request
            constraint = _constraint(self, key)
        except Exception as e:
            _off("wait", e)
            return await original(self, key, *args, **kwargs)
        t0 = _monotonic()
        try:
            result = await original(self, key, *args, **kwargs)
        except BaseException:
            _record(key, t0, _a.OUTCOME_ABANDONED, constraint)
            raise
        _record(key, t0, _a.OUTCOME_OK, constraint)
        return result

    _wait_for_available_connection._nemolens = True
    return _wait_for_available_connection


# aiohttp 3.8 and 3.9.

def _woken(key, t0, constraint, fut):
    if _on:
        ok = not fut.cancelled() and fut.exception() is None
        _record(key, t0, _a.OUTCOME_OK if ok else _a.OUTCOME_ABANDONED, constraint)


class _Queue(collections.deque):
    """The waiters of one host: connect appends a future here only when the
    request has to wait, and waits on it."""
    __slots__ = ("connector", "key")

    def append(self, fut):
        collections.deque.append(self, fut)
        if _on:
            try:
                # Added before the waiting task's own callback: it runs first,
                # as the slot is handed over.
                fut.add_done_callback(functools.partial(_woken, self.key, _monotonic(),
                                                        _constraint(self.connector, self.key)))
            except Exception as e:
                _off("wait", e)


class _Waiters(dict):
    """A connector's queues of waiters, as defaultdict(deque) makes them,
    with queues of the adapter's."""
    __slots__ = ("connector",)

    def __missing__(self, key):
        q = _Queue()
        q.connector, q.key = self.connector, key
        self[key] = q
        return q


def _wrap_init(original):
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if _on:
            try:
                w = self._waiters
                if type(w) is not collections.defaultdict or w.default_factory is not collections.deque or w:
                    raise RuntimeError("unknown queue of waiters %r" % type(w))
                mine = _Waiters()
                mine.connector = self
                self._waiters = mine
            except Exception as e:
                _off("connector", e)

    __init__._nemolens = True
    return __init__


def patch():
    import aiohttp
    from aiohttp import connector

    base = connector.BaseConnector
    if getattr(base.connect, "_nemolens", False):
        return True   # armed already (the package was reloaded)
    # What the patches read; a version without them is left alone.
    for attr in ("__init__", "connect", "_available_connections"):
        if not callable(getattr(base, attr, None)):
            raise RuntimeError("aiohttp %s has no BaseConnector.%s" % (aiohttp.__version__, attr))
    _a.lib()
    connect = _wrap_connect(base.connect, _a.acquire_at)   # may refuse: before any patch
    wait = base.__dict__.get("_wait_for_available_connection")
    if wait is not None:
        base._wait_for_available_connection = _wrap_wait(wait)
    else:
        base.__init__ = _wrap_init(base.__init__)
    base.connect = connect
    return True
