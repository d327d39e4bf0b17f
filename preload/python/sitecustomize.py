# SPDX-License-Identifier: Apache-2.0
# The start-up hook of the nemolens Python adapter. The shim puts this
# directory first on PYTHONPATH as the interpreter starts, and site runs
# this module. It puts the program's PYTHONPATH and sys.path back as they
# would have been without the shim, puts a watch for the clients the
# adapter patches on sys.meta_path, and then runs the program's own
# sitecustomize, if there is one, in its place: as site would have, once,
# with its errors reported by site as before.
#
# It runs in every Python process under the shim, most of which never
# import a pooled HTTP client, so it does as little as it can: the adapter
# itself (the package nemolens_adapter next to this file) is loaded only
# when the program imports one of the packages below.

# The packages whose import loads the adapter; it has a module patching
# each of them: the pools of aiohttp and httpcore, socket for the call
# sites of connections, asyncio and uvloop for the event loops and the
# collector, and NeMo Gym's observer, for which it stands aside.
_NEMOLENS_TARGETS = frozenset(("aiohttp", "httpcore", "socket", "asyncio", "uvloop",
                               "nemo_gym.telemetry.observer"))
_NEMOLENS_POOLS = ("aiohttp", "httpcore")

# This module itself is the finder it puts on sys.meta_path (a module with
# a find_spec function is one, and costs no class to build). It finds
# nothing itself: when the program imports a target package, it loads the
# adapter and lets it find the package (with the finders after this one)
# and patch it once it has been executed.
_self = None      # this module, as sys.meta_path holds it
_here = None      # the adapter's directory, no longer on sys.path
_adapter = None   # the package once loaded; False when it failed


def find_spec(name, path=None, target=None):
    if name not in _NEMOLENS_TARGETS or _adapter is False:
        return None
    adapter = _adapter or _load()
    if not adapter:
        return None
    return adapter.find_spec(_self, name, path, target)


def _load():
    global _adapter
    import sys

    try:
        adapter = sys.modules.get("nemolens_adapter")
        if adapter is None:
            spec = sys.modules["_frozen_importlib_external"].PathFinder.find_spec("nemolens_adapter", [_here])
            sys.path_importer_cache.pop(_here, None)
            adapter = _exec_spec(sys, "nemolens_adapter", spec)
    except Exception:
        adapter = False   # the program runs without the adapter
    _adapter = adapter
    return adapter


def _exec_spec(sys, name, spec):
    """Runs the module of spec as sys.modules[name], as an import would:
    a module whose code fails is not left behind."""
    module = sys.modules["_frozen_importlib"].module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _nemolens_start():
    global _here, _self
    import os
    import sys

    _self = sys.modules["sitecustomize"]
    # The directory, as sys.path has it: the shim puts an absolute path in
    # PYTHONPATH (os.path.abspath would cost every interpreter its time).
    here = _here = __file__.rpartition("/")[0]
    saved = os.environ.pop("NEMOLENS_PYTHON_SAVED_PATH", None)
    if saved is not None:
        if saved.startswith("="):
            os.environ["PYTHONPATH"] = saved[1:]
        else:
            os.environ.pop("PYTHONPATH", None)
    # The import system's own classes, as they are: importing
    # importlib.machinery would cost every interpreter a millisecond.
    finder = sys.modules["_frozen_importlib_external"].PathFinder
    v = os.environ.get("NEMOLENS_PYTHON", "").strip().lower()
    # A target imported before site ran was not imported by the program:
    # it is left alone.
    if v not in ("off", "false", "0", "no") and not any(t in sys.modules for t in _NEMOLENS_POOLS):
        sys.meta_path.insert(0, _self)
    # PYTHONPATH put this directory in once, before the program's entries.
    try:
        sys.path.remove(here)
    except ValueError:
        pass
    sys.path_importer_cache.pop(here, None)

    del sys.modules["sitecustomize"]
    spec = finder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return None
    return _exec_spec(sys, "sitecustomize", spec)


if _nemolens_start() is None:
    # As site sees a program without a sitecustomize of its own.
    raise ImportError("No module named 'sitecustomize'", name="sitecustomize")
