# SPDX-License-Identifier: Apache-2.0
"""The Python runtime as NeMo Gym's observer names it: the garbage collector
(gym.gc.*) and every running asyncio event loop (gym.event_loop.*).

The collector is watched through gc.callbacks: a collection's start and
stop are timed with time.perf_counter_ns, and its generation, the objects
it freed and those it found uncollectable are read from the info the
interpreter passes to the stop. gc.get_count() is sampled at most once per
interval, at a collection or at a probe's wake-up.

Event loops are found without the program's help: run_forever, which every
way of running a loop ends in (asyncio.run, run_until_complete, uvicorn,
aiohttp's run_app), is wrapped on asyncio's BaseEventLoop and, when the
program imports uvloop, on uvloop's Loop. While a loop runs, a probe lives
on it, not a thread, and measures what Gym's observer measures: how late a
coroutine that sleeps a fixed interval wakes up. It takes the path such a
coroutine's wake-up takes through the loop, without being a task the
program could see: a call_later timer at the interval, whose callback
schedules the wake-up with call_soon, as the end of asyncio.sleep does for
the sleeping task. How much later than the interval the wake-up runs is the
lag, what the loop's own scheduling makes its coroutines wait. When
run_forever returns, the probe's pending callback is cancelled. The probe
touches no request: what a request does runs exactly as before.

Everything here starts when the program imports asyncio (or uvloop), and
never on a Python outside 3.9 to 3.13, whose collector and loops the
adapter has not been checked against. Any failure turns the part that
failed off, with one line in the shim's log, and never reaches the
program. Where NeMo Gym's own observer runs in the process, the adapter
stands aside: it records none of these names, so none is counted twice.
"""
import gc
import os
import sys
import time

import nemolens_adapter as _a

OBSERVER = "nemo_gym.telemetry.observer"
VERSIONS = ((3, 9), (3, 13))
DEFAULT_INTERVAL_MS = 1000

_perf_ns = time.perf_counter_ns
_monotonic = time.monotonic

_started = False
_aside = False        # NeMo Gym's observer records these names here
_lag_on = False
_tasks_on = False
_gc_on = False
_interval = DEFAULT_INTERVAL_MS / 1000.0
_count_every_ns = DEFAULT_INTERVAL_MS * 1000000

# The shim's entry points (adapter.h), once found.
_lag = _tasks = _collection = _count = None

_probes = {}          # id(loop) -> its _Probe, while the loop runs
_wrapped = set()      # the classes whose run_forever is wrapped


def _switch(name, default):
    v = os.environ.get(name, "").strip().lower()
    if v in ("on", "true", "1", "yes"):
        return True
    if v in ("off", "false", "0", "no"):
        return False
    if v:
        _a.log("python.runtime." + name, "%s=%r is not a switch (true/false): %s" % (
            name, v, "on" if default else "off"))
    return default


def _interval_ms():
    v = os.environ.get("NEMOLENS_EVENT_LOOP_LAG_INTERVAL_MS", "").strip()
    if not v:
        return DEFAULT_INTERVAL_MS
    try:
        ms = int(v)
        if 1 <= ms <= 3600000:
            return ms
    except ValueError:
        pass
    _a.log("python.runtime.interval", "NEMOLENS_EVENT_LOOP_LAG_INTERVAL_MS=%r is not a number of "
           "milliseconds from 1 to 3600000: %d" % (v, DEFAULT_INTERVAL_MS))
    return DEFAULT_INTERVAL_MS


def _entry_points():
    """The shim's runtime entry points through ctypes, or False when the
    shim does not record in this process. Called without releasing
    Python's lock: they only record (adapter.h), and the collector's
    callbacks are best not left by the thread that runs them."""
    global _lag, _tasks, _collection, _count
    if _a.lib() is None:
        return False
    import ctypes

    so = ctypes.PyDLL(None)
    ll, d = ctypes.c_longlong, ctypes.c_double
    _lag = so.nemolens_loop_lag
    _lag.argtypes, _lag.restype = (d,), None
    _tasks = so.nemolens_loop_tasks
    _tasks.argtypes, _tasks.restype = (ll,), None
    _collection = so.nemolens_gc_collection
    _collection.argtypes, _collection.restype = (ctypes.c_int, d, ll, ll), None
    _count = so.nemolens_gc_count
    _count.argtypes, _count.restype = (ll, ll, ll), None
    return True


def start():
    """Once per process, when the program imports asyncio or uvloop: reads
    the switches, puts the collector's callback in place and wraps the
    loops of asyncio (uvloop's are wrapped when it is imported)."""
    global _started, _lag_on, _tasks_on, _gc_on, _interval, _count_every_ns
    if _started:
        return
    _started = True
    v = sys.version_info
    if not VERSIONS[0] <= (v[0], v[1]) <= VERSIONS[1]:
        _a.log("python.runtime", "Python adapter: no event loop or collector figures on Python %d.%d "
               "(known: %d.%d to %d.%d)" % ((v[0], v[1]) + VERSIONS[0] + VERSIONS[1]))
        return
    gc_on = _switch("NEMOLENS_PYTHON_GC", True)
    lag_on = _switch("NEMOLENS_EVENT_LOOP_LAG", True)
    tasks_on = _switch("NEMOLENS_EVENT_LOOP_TASKS", False)
    if not (gc_on or lag_on or tasks_on) or OBSERVER in sys.modules:
        return
    if not _entry_points():
        return
    ms = _interval_ms()
    _interval, _count_every_ns = ms / 1000.0, ms * 1000000
    _lag_on, _tasks_on = lag_on, tasks_on
    if gc_on:
        try:
            gc.callbacks.append(_on_gc)
            _gc_on = True
        except Exception as e:
            _a.log("python.runtime.gc", "Python adapter: no collector figures: %r" % (e,))
    if lag_on or tasks_on:
        asyncio = sys.modules.get("asyncio.base_events")
        if asyncio is not None:
            wrap_loop(asyncio, "BaseEventLoop", "asyncio")


def patch(name):
    """The program imported name (asyncio, uvloop or NeMo Gym's observer)."""
    if name == OBSERVER:
        stand_aside()
        return
    start()
    if name == "uvloop" and (_lag_on or _tasks_on):
        wrap_loop(sys.modules["uvloop"], "Loop", "uvloop")


def stand_aside():
    """NeMo Gym's observer has been imported: it records these names in
    this process, so the adapter stops recording them. The collector's
    callback goes now; each probe goes at its next wake-up."""
    global _aside, _gc_on, _lag_on, _tasks_on
    _aside = True
    _lag_on = _tasks_on = False
    if _gc_on:
        _gc_on = False
        try:
            gc.callbacks.remove(_on_gc)
        except (ValueError, AttributeError):
            pass


# ---- the collector ------------------------------------------------------

_gc_t0 = None     # perf_counter_ns at the start of the collection under way
_count_at = 0     # perf_counter_ns of the last gc.get_count() sample


def _on_gc(phase, info):
    global _gc_t0
    if phase == "start":
        if _gc_on:
            _gc_t0 = _perf_ns()
        return
    t0 = _gc_t0
    if t0 is None or not _gc_on:
        return
    _gc_t0 = None
    try:
        now = _perf_ns()
        _collection(info["generation"], (now - t0) / 1e6, info["collected"], info["uncollectable"])
        if now - _count_at >= _count_every_ns:
            _sample_count(now)
    except Exception as e:
        _gc_off(e)


def _sample_count(now):
    global _count_at
    _count_at = now
    c = gc.get_count()
    _count(c[0], c[1], c[2])


def _gc_off(e):
    # The callback stays in gc.callbacks, doing nothing: taking it out
    # while the interpreter walks that list would skip the program's own
    # callback after it, once.
    global _gc_on
    _gc_on = False
    _a.log("python.runtime.gc", "Python adapter: no more collector figures: %r" % (e,))


# ---- event loops --------------------------------------------------------

def wrap_loop(module, name, what):
    """Wraps run_forever of the loop class module.name, so that a probe
    lives on each loop of that class while it runs."""
    try:
        cls = getattr(module, name)
        original = cls.__dict__["run_forever"] if "run_forever" in cls.__dict__ else cls.run_forever
        if cls in _wrapped:
            return
        if not callable(original):
            raise TypeError("%s.run_forever is %r" % (name, original))

        def run_forever(self):
            probe = _attach(self)
            try:
                return original(self)
            finally:
                if probe is not None:
                    _detach(self, probe)

        run_forever.__wrapped__ = original
        for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
            try:
                setattr(run_forever, attr, getattr(original, attr))
            except (AttributeError, TypeError):
                pass
        cls.run_forever = run_forever
        _wrapped.add(cls)
    except Exception as e:
        _a.log("python.runtime." + what, "Python adapter: no event loop figures for %s: %r" % (what, e))


def _attach(loop):
    """A probe on loop, about to run; None when it has one, runs already
    (run_forever will say so to the program) or nothing is recorded."""
    if not (_lag_on or _tasks_on):
        return None
    try:
        key = id(loop)
        if key in _probes or loop.is_running() or loop.is_closed():
            return None
        probe = _Probe(loop)
        probe.arm()
        _probes[key] = probe
        return probe
    except Exception as e:
        _loops_off(e)
        return None


def _detach(loop, probe):
    try:
        probe.cancel()
        if _probes.get(id(loop)) is probe:
            del _probes[id(loop)]
            if _tasks_on:
                _tasks(sum(p.tasks for p in _probes.values()))
    except Exception as e:
        _loops_off(e)


def _loops_off(e):
    global _lag_on, _tasks_on
    _lag_on = _tasks_on = False
    _a.log("python.runtime.loop", "Python adapter: no more event loop figures: %r" % (e,))


class _Probe:
    """Sleeps the interval on its loop as a coroutine would, and records
    at each wake-up how much later than the interval it came."""
    __slots__ = ("loop", "handle", "due", "tasks")

    def __init__(self, loop):
        self.loop = loop
        self.handle = None   # the timer, then the wake-up: the one pending
        self.due = 0.0
        self.tasks = 0

    def arm(self):
        self.due = _monotonic() + _interval
        self.handle = self.loop.call_later(_interval, self.ring)

    def ring(self):
        # The timer of asyncio.sleep only resolves the sleeping task's
        # future; the task resumes from the loop's next round of ready
        # callbacks, behind those already queued. So does the wake-up.
        self.handle = None
        try:
            self.handle = self.loop.call_soon(self.wake)
        except Exception as e:
            _loops_off(e)

    def cancel(self):
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None

    def wake(self):
        self.handle = None
        if not (_lag_on or _tasks_on):
            return   # switched off, or standing aside: the probe goes
        try:
            late = (_monotonic() - self.due) * 1000.0
            if _lag_on:
                # A timer may come a little early (the loop's clock
                # resolution): that is no lag.
                _lag(late if late > 0.0 else 0.0)
            if _tasks_on:
                self.tasks = _count_tasks(self.loop)
                _tasks(sum(p.tasks for p in _probes.values()))
            if _gc_on:
                now = _perf_ns()
                if now - _count_at >= _count_every_ns:
                    _sample_count(now)
            self.arm()
        except Exception as e:
            _loops_off(e)


def _count_tasks(loop):
    import asyncio

    return len(asyncio.all_tasks(loop))
