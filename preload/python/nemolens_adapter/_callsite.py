# SPDX-License-Identifier: Apache-2.0
"""Call sites of a Python program's connections: the Python frame that asked
for each one, for the shim's nemolens.connection.call_site.

Under the interpreter, the native stack of a connect() names the
interpreter's own functions only. The socket module's socket.connect and
connect_ex are wrapped instead: before a TCP socket connects, the wrapper
walks the Python frames outward from the call, past the standard library's
networking and asyncio and past the HTTP libraries, and hands the first
frame outside them (module.qualname, file, line) to the shim, which counts
the connect() that follows under it. For an aiohttp request inside a task
that is the coroutine that called session.get: a task's coroutines run
nested in one another, so their frames are on the stack.

The walk's answers are cached per code object and line, so a connection from
a known place costs a few dictionary lookups per frame. The shim is asked
for the first time at the first connection, not at import: a program that
imports socket and never connects pays for the two wrappers only.
"""
import os
import sys

import nemolens_adapter as _a

# Modules that are plumbing, not the program: a frame of one of these (or
# of a submodule) is looked past.
_PLUMBING = frozenset((
    "socket", "ssl", "selectors", "asyncio", "http", "urllib", "socketserver", "smtplib", "ftplib",
    "poplib", "imaplib", "xmlrpc", "concurrent", "threading", "contextlib", "functools",
    "aiohttp", "aiohappyeyeballs", "httpx", "httpcore", "anyio", "sniffio", "h11", "h2",
    "urllib3", "requests", "nemolens_adapter",
))
_MAX_FRAMES = 64

_sites = {}    # (code, line) -> the shim's site number, or -1
_skip = {}     # code -> whether its module is plumbing
_named = None  # nemolens_call_site, once asked
_next = None   # nemolens_call_site_next
_TCP = None    # (AF_INET, AF_INET6), SOCK_STREAM


def _is_plumbing(code, frame):
    s = _skip.get(code)
    if s is None:
        name = frame.f_globals.get("__name__") or ""
        s = name.partition(".")[0] in _PLUMBING
        if len(_skip) >= 4096:
            _skip.clear()
        _skip[code] = s
    return s


def _site_of(frame):
    """The shim's number for the first frame outward from frame that is not
    plumbing; -1 when there is none or the shim takes no more."""
    for _ in range(_MAX_FRAMES):
        if frame is None:
            return -1
        code = frame.f_code
        if not _is_plumbing(code, frame):
            key = (code, frame.f_lineno)
            site = _sites.get(key)
            if site is None:
                module = frame.f_globals.get("__name__") or "?"
                function = module + "." + getattr(code, "co_qualname", code.co_name)
                site = _named(function.encode("utf-8", "replace"),
                              code.co_filename.encode("utf-8", "replace"), frame.f_lineno)
                if len(_sites) >= 4096:
                    _sites.clear()
                _sites[key] = site
            return site
        frame = frame.f_back
    return -1


def _bind():
    """Finds the shim's entry points at the first connection: False when the
    shim does not record in this process (the wrappers then step aside)."""
    global _named, _next, _TCP
    import ctypes
    import socket

    if _a.lib() is None:
        return False
    try:
        named = ctypes.PyDLL(None).nemolens_call_site
        nxt = ctypes.PyDLL(None).nemolens_call_site_next
    except AttributeError:
        return False
    named.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_long)
    named.restype = ctypes.c_int
    nxt.argtypes = (ctypes.c_int,)
    nxt.restype = None
    _named, _next = named, nxt
    _TCP = ((socket.AF_INET, socket.AF_INET6), socket.SOCK_STREAM)
    return True


def patch():
    """Wraps socket.socket.connect and connect_ex. Returns False: this is no
    pool adapter, connect_total stays what it is."""
    if os.environ.get("NEMOLENS_CALL_SITES", "").strip().lower() in ("off", "false", "0", "no"):
        return False
    import socket

    cls = socket.socket
    originals = {"connect": cls.connect, "connect_ex": cls.connect_ex}
    state = {"bound": None}
    getframe = sys._getframe

    def site_for(sock):
        bound = state["bound"]
        if bound is None:
            try:
                bound = state["bound"] = _bind()
            except Exception as e:
                bound = state["bound"] = False
                _a.log("python.callsite", "Python call sites are off: %r" % (e,))
            if not bound:
                for name, f in originals.items():
                    setattr(cls, name, f)
        if not bound:
            return -1
        try:
            if sock.family not in _TCP[0] or sock.type != _TCP[1]:
                return -1
            return _site_of(getframe(2))
        except Exception:
            return -1

    def wrap(original):
        def method(self, address):
            site = site_for(self)
            if site < 0:
                return original(self, address)
            _next(site)
            try:
                return original(self, address)
            finally:
                _next(-1)
        method.__name__ = original.__name__
        method.__qualname__ = original.__qualname__
        method.__doc__ = original.__doc__
        return method

    for name, f in originals.items():
        setattr(cls, name, wrap(f))
    return False
